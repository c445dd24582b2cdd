r"""Thesis alg. 2: projected subgradient on the Fantope-regularized objective (DC, not convex).

.. math:: \min_{M \succeq 0}\ \varphi(M) = \mu R(M) + \gamma\,\mathrm{tr}\,M + \ell(M).

Each iteration steps along :math:`\gamma I + \mu W(M^n) + G_{\text{hinge}}(M^n)` (thesis eq. 3.8 with the
trace term) and projects onto :math:`\mathbb{S}^d_+`. :math:`W(M^n)` — a supergradient of :math:`R`, the
gradient when the eigengap is positive — is read from the eigendecomposition the projection
already computed (:meth:`cvxmetric.fantope.FantopeModel.extra_term`), so the Fantope term costs no
extra ``eigh``. The engine is :func:`solvers.subgradient.projected_subgradient` (incremental
subgradient, active set, epoch steps, best point kept); on this non-convex objective the
result is a stationary-looking point, not a certified global minimum.
"""
from __future__ import annotations

from cvxmetric.fantope import FantopeModel

from .result import SolverResult
from .subgradient import projected_subgradient

__all__ = ["fantope_subgradient"]


def fantope_subgradient(model: FantopeModel, *, M0=None, **options) -> SolverResult:
    r"""Minimise :math:`\varphi` by thesis alg. 2.

    Parameters
    ----------
    model : FantopeModel
    M0 : array_like, shape (d, d), optional
        PSD start (default 0; there :math:`W(0)` is LAPACK's arbitrary projector, a valid
        supergradient since every projector is one at 0).
    **options
        Passed to :func:`solvers.subgradient.projected_subgradient` (``max_iter``, ``tol``, ...).

    Returns
    -------
    SolverResult
        ``objective`` = :math:`\varphi(M)` (numpy: ``model.value``), ``history`` = :math:`\varphi` per
        iteration (over the working set between full checks), ``info["k"]``.
    """
    if not isinstance(model, FantopeModel):
        raise TypeError(f"model must be a FantopeModel; got {type(model).__name__}")
    options.setdefault("solver_name", "fantope-subgradient")
    res = projected_subgradient(model.base, extra=model.extra_term, M0=M0, **options)
    res.info["k"] = model.k
    return res
