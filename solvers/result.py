"""The result record returned by every fast solver."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from cvxmetric.exceptions import ConvergenceWarning

__all__ = ["SolverResult", "ConvergenceWarning", "warn_not_converged"]


@dataclass
class SolverResult:
    """What a fast solver returns.

    Attributes
    ----------
    solver : str
        Name of the algorithm (e.g. ``"qwise-subgradient"``).
    M : ndarray, shape (d, d), or None
        The learned PSD matrix (None for vector models, whose point is ``w``).
    w : ndarray or None
        The learned vector (vector models, BoostMetric weights, ...).
    objective : float
        The solver's own value of the objective at the returned point.
    n_iter : int
        Iterations performed.
    converged : bool
        Whether the stopping rule held (False means the iteration limit was hit; a
        :class:`~cvxmetric.exceptions.ConvergenceWarning` was issued).
    history : ndarray
        Objective per iteration (see each solver's docstring for what is recorded).
    time : float
        Wall-clock seconds.
    info : dict
        Solver-specific extras (step sizes, active-set sizes, certificates, ...).
    """

    solver: str
    M: np.ndarray | None
    w: np.ndarray | None
    objective: float
    n_iter: int
    converged: bool
    history: np.ndarray
    time: float
    info: dict = field(default_factory=dict)

    @property
    def point(self) -> np.ndarray:
        """``M`` for matrix models, ``w`` otherwise."""
        return self.M if self.M is not None else self.w


def warn_not_converged(solver: str, n_iter: int, detail: str = "") -> None:
    """Issue a :class:`ConvergenceWarning` naming the solver and the iteration count."""
    msg = f"{solver} stopped after {n_iter} iterations without meeting its stopping rule"
    if detail:
        msg += f" ({detail})"
    msg += "; raise max_iter or loosen tol, and check the result's optimality gap"
    warnings.warn(msg, ConvergenceWarning, stacklevel=3)
