"""Warnings shared by the fast solvers and the harness."""

__all__ = ["ConvergenceWarning"]


class ConvergenceWarning(UserWarning):
    """A solver stopped at its iteration limit before its stopping rule held.

    The returned result is the best point found, with ``converged=False``; it is never silently
    presented as an optimum.
    """
