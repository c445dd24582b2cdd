"""Fast Qwise solvers: the projected subgradient engine (full matrix) and projected Newton (vector).

Both read the same numpy model as the cvxpy formulation (:mod:`cvxmetric.models`,
:mod:`cvxmetric.vector_model`), so their objective is the formulation's by construction.
"""
from __future__ import annotations

from cvxmetric.constraints import ConstraintSet
from cvxmetric.losses import DEFAULT_HUBER_H
from cvxmetric.models import qwise_model
from cvxmetric.vector_model import qwise_vector_model

from .newton import projected_newton
from .result import SolverResult
from .subgradient import projected_subgradient

__all__ = ["solve_qwise", "solve_qwise_vector"]


def solve_qwise(X, constraints: ConstraintSet, *, regularizer: str = "trace", C_Q: float = 1.0,
                C_P: float = 1.0, reg_weight: float = 1.0, pull_pairs=None, **options) -> SolverResult:
    """Full-matrix Qwise (thesis eq. 2.7) by the projected subgradient engine.

    Model parameters as in :func:`formulations.qwise.build_qwise`; ``options`` go to
    :func:`solvers.subgradient.projected_subgradient` (``max_iter``, ``tol``, ``active_set``, ...).
    """
    model = qwise_model(X, constraints, regularizer=regularizer, C_Q=C_Q, C_P=C_P,
                        reg_weight=reg_weight, pull_pairs=pull_pairs)
    return projected_subgradient(model, solver_name="qwise-subgradient", **options)


def solve_qwise_vector(X, constraints: ConstraintSet, *, model: str = "diagonal", C_Q: float = 1.0,
                       C_P: float = 1.0, h: float = DEFAULT_HUBER_H, **options) -> SolverResult:
    """Vector Qwise (thesis eq. 2.10, Huber losses) by projected Newton (appendix B, alg. 4)."""
    vm = qwise_vector_model(X, constraints, model=model, C_Q=C_Q, C_P=C_P, h=h)
    return projected_newton(vm, **options)
