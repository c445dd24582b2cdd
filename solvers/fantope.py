r"""The Fantope facade: :func:`solve_fantope` over the three fast algorithms of the thesis' chapter 3.

* ``"mm"`` — majorization–minimization with fast inner solves (thesis alg. 3,
  :func:`cvxmetric.solvers.fantope_mm.fantope_mm`), certified critical point;
* ``"subgradient"`` — projected subgradient on the DC objective (thesis alg. 2,
  :func:`cvxmetric.solvers.fantope_subgradient.fantope_subgradient`), certified critical point;
* ``"factor"`` — subgradient descent over a factor :math:`L` of rank ``rank``
  (:func:`cvxmetric.solvers.factor_subgradient.factor_subgradient`; thesis table 3.1's
  "subgradient over L"): on :math:`\{M = L^\top L\}` every matrix has rank at most ``rank``, so
  :math:`R(M) = 0` and the objective is :math:`\gamma\,\mathrm{tr}\,M + \ell(M)`, the model's ``base``.
  Its certified lower bound (the hinge dual bound of the unconstrained-rank problem) is a lower
  bound on :math:`\min\varphi` too (:math:`R \ge 0` on :math:`\mathbb{S}^d_+`), so ``converged`` means a
  certified global minimum of :math:`\varphi`; when the rank budget binds the result is honestly
  not converged.
"""
from __future__ import annotations

from cvxmetric._checks import check_method_options, keyword_options
from cvxmetric.constraints import ConstraintSet
from cvxmetric.fantope import fantope_model

from .factor_subgradient import factor_subgradient
from .fantope_mm import fantope_mm
from .fantope_subgradient import fantope_subgradient
from .result import ENGINE_HOOKS, SolverResult
from .subgradient import projected_subgradient

__all__ = ["solve_fantope", "FANTOPE_METHODS"]

#: Algorithms of :func:`solve_fantope` and the options each reads (from the signatures of the
#: functions they call; alg. 2 passes its options on to the projected subgradient engine).
FANTOPE_METHODS = {
    "mm": keyword_options(fantope_mm),
    "subgradient": keyword_options(fantope_subgradient) | keyword_options(projected_subgradient, exclude=ENGINE_HOOKS),
    "factor": keyword_options(factor_subgradient, exclude={"rank"}),
}


def solve_fantope(X, constraints: ConstraintSet, *, rank: int, reg_weight: float, trace_weight: float = 0.0,
                  C_Q: float = 1.0, C_P: float = 1.0, method: str = "mm", **options) -> SolverResult:
    r"""Fantope-regularized metric learning (thesis ch. 3): a metric of rank ``rank``.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row.
    constraints : ConstraintSet
        Relative constraints (weighted by ``C_Q``) and pairs (``C_P``).
    rank : int
        Target rank :math:`e`, ``0 <= rank <= d - 1`` (``"factor"``: ``>= 1``). The regularizer
        penalises the :math:`k = d - e` smallest eigenvalues.
    reg_weight : float
        Weight :math:`\mu \ge 0` of the Fantope regularizer :math:`R`.
    trace_weight : float
        Weight :math:`\gamma \ge 0` of the trace (default 0: Fantope alone).
    C_Q, C_P : float
        Non-negative weights of the relative and the pairwise hinge terms.
    method : {"mm", "subgradient", "factor"}
        ``"mm"`` (default): majorization–minimization, PDHG inner solves (thesis alg. 3);
        ``"subgradient"``: projected subgradient on :math:`\varphi` (thesis alg. 2); ``"factor"``:
        subgradient descent over :math:`L \in \mathbb{R}^{e \times d}` (module docstring).
    **options
        Options of the chosen algorithm: ``"mm"`` — ``max_iter`` (outer), ``tol``, ``inner``,
        ``inner_options``, ``M0``, ``W0``, ``time_limit``; ``"subgradient"`` — ``M0`` and the
        engine's ``max_iter``, ``tol``, ``time_limit``, ...; ``"factor"`` — ``L0``, ``seed``,
        ``max_iter``, ``tol``, ``time_limit``, .... An option the method does not read is a ValueError.

    Returns
    -------
    SolverResult
        The result contract. ``"mm"`` and ``"subgradient"``: ``measure="kkt_residual"``, a
        certified critical point of the DC program (the majorizer gap, no global bound:
        ``lower_bound`` None); ``"factor"``: ``measure="certified_gap"`` with a lower bound on
        :math:`\min\varphi`. ``objective`` is :math:`\varphi(M)` in all three.

    Notes
    -----
    .. math::
        \min_{M \succeq 0}\ \varphi(M) = \mu\, R(M) + \gamma\,\mathrm{tr}\,M
        + \sum_c C_c\, w_c\,[\delta_c + \langle M, C_{ij} - C_{kl}\rangle]_+ ,
        \qquad R(M) = \sum_{i = e + 1}^{d} \lambda_i(M)

    (eigenvalues non-increasing: :math:`R` sums the :math:`d - e` smallest; thesis eq. 3.1 with the
    trace term of 3.4.1), :math:`\mu` = ``reg_weight``, :math:`\gamma` = ``trace_weight``,
    :math:`e` = ``rank``, :math:`C_c` = ``C_Q`` on relative constraints and ``C_P`` on pairs.
    ``"factor"`` solves :math:`\min_{L \in \mathbb{R}^{e \times d}} \varphi(L^\top L)`.
    The objective is not convex (:math:`R` is concave).
    """
    method = check_method_options("solve_fantope", method, options, FANTOPE_METHODS)
    model = fantope_model(X, constraints, rank=rank, reg_weight=reg_weight, trace_weight=trace_weight,
                          C_Q=C_Q, C_P=C_P)
    if method == "mm":
        return fantope_mm(model, **options)
    if method == "subgradient":
        return fantope_subgradient(model, **options)
    return factor_subgradient(model.base, model.rank, **options)
