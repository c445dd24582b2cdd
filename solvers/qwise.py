"""Fast Qwise solvers: projected subgradient or PDHG (full matrix) and projected Newton (vector).

Both read the same numpy model as the cvxpy formulation (:mod:`cvxmetric.models`,
:mod:`cvxmetric.vector_model`), so their objective is the formulation's by construction.
"""
from __future__ import annotations

import numpy as np

from cvxmetric._checks import as_square_symmetric, check_bool
from cvxmetric.constraints import ConstraintSet
from cvxmetric.losses import DEFAULT_HUBER_H
from cvxmetric.models import qwise_model
from cvxmetric.vector_model import qwise_vector_model

from .newton import projected_newton
from .pdhg import pdhg
from .result import SolverResult
from .subgradient import projected_subgradient
from .working_set import WS_SLACK, ModelPool, solve_working_set

__all__ = ["solve_qwise", "solve_qwise_vector", "QWISE_METHODS"]

#: Options of the working set (``method="pdhg", working_set=True``) that no other path takes.
WORKING_SET_OPTIONS = ("ws_slack", "drop_after", "round_iter", "max_rounds", "max_add")

#: Full-matrix algorithms of :func:`solve_qwise`: the thesis' projected subgradient engine and the
#: restarted primal-dual hybrid gradient method (much faster at d = 50 and thousands of constraints).
QWISE_METHODS = ("subgradient", "pdhg")


def solve_qwise(X, constraints: ConstraintSet, *, regularizer: str = "trace", C_Q: float = 1.0,
                C_P: float = 1.0, reg_weight: float = 1.0, pull_pairs=None, method: str = "subgradient",
                working_set: bool = False, **options) -> SolverResult:
    """Full-matrix Qwise (thesis eq. 2.7) by the projected subgradient engine or by PDHG.

    Model parameters as in :func:`cvxmetric.formulations.qwise.build_qwise`. ``method="subgradient"``
    (thesis alg. 1) passes ``options`` to :func:`cvxmetric.solvers.subgradient.projected_subgradient`
    (``max_iter``, ``tol`` — the certified relative gap it stops at —, ``active_set``, ...);
    ``method="pdhg"`` to :func:`cvxmetric.solvers.pdhg.pdhg` (``max_iter``, ``tol``, ``certificate_tol``,
    ``time_limit``, ``M0``, ``y0``, ...). Both results carry the hinge ``multipliers`` and, where the
    model has one, a certified ``lower_bound`` (``measure == "certified_gap"``; PDHG otherwise a
    relative ``"kkt_residual"``).

    ``method="pdhg", working_set=True`` runs PDHG on a working set of the constraints near or past
    the margin, certified on the full set (:func:`cvxmetric.solvers.working_set.solve_working_set`:
    ``ws_slack``, ``drop_after``, ``round_iter``, ``max_rounds``, ``max_add``, ``max_iter`` (total
    PDHG iterations), ``tol``, ``certificate_tol``, ``time_limit``, ``callback``, ``M0`` (default
    0) and the rest passed to each PDHG round); ``solver == "qwise-pdhg-ws"``. Its cost per
    iteration follows the working set, not the number of constraints.
    """
    if not isinstance(method, str) or method not in QWISE_METHODS:
        raise ValueError(f"method must be one of {QWISE_METHODS}; got {method!r}")
    model = qwise_model(X, constraints, regularizer=regularizer, C_Q=C_Q, C_P=C_P,
                        reg_weight=reg_weight, pull_pairs=pull_pairs)
    if check_bool(working_set, "working_set"):
        if method != "pdhg":
            raise ValueError(f"working_set=True applies to method='pdhg' only; got method={method!r}")
        pool = ModelPool(model, options.pop("ws_slack", WS_SLACK))
        M0 = options.pop("M0", None)
        M0 = np.zeros((model.d, model.d)) if M0 is None else as_square_symmetric(M0, "M0", d=model.d, psd=True)
        return solve_working_set(pool, M0, solver_name="qwise-pdhg-ws", **options)
    ws_only = sorted(set(options) & set(WORKING_SET_OPTIONS))
    if ws_only:
        raise ValueError(f"{', '.join(ws_only)} apply to method='pdhg' with working_set=True only")
    if method == "pdhg":
        return pdhg(model, solver_name="qwise-pdhg", **options)
    return projected_subgradient(model, solver_name="qwise-subgradient", **options)


def solve_qwise_vector(X, constraints: ConstraintSet, *, model: str = "diagonal", C_Q: float = 1.0,
                       C_P: float = 1.0, h: float = DEFAULT_HUBER_H, **options) -> SolverResult:
    """Vector Qwise (thesis eq. 2.10, Huber losses) by projected Newton (appendix B, alg. 4)."""
    vm = qwise_vector_model(X, constraints, model=model, C_Q=C_Q, C_P=C_P, h=h)
    return projected_newton(vm, **options)
