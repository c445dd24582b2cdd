"""Fast Qwise solvers: projected subgradient or PDHG (full matrix) and projected Newton (vector).

Both read the same numpy model as the cvxpy formulation (:mod:`cvxmetric.models`,
:mod:`cvxmetric.vector_model`), so their objective is the formulation's by construction. On few
constraints PDHG starts from the pair of a dense barrier method on the dual
(:mod:`cvxmetric.solvers.hinge_barrier`) and certifies it before its first step.
"""
from __future__ import annotations

import time

import numpy as np

from cvxmetric._checks import as_square_symmetric, check_bool, check_method_options, keyword_options
from cvxmetric.constraints import ConstraintSet
from cvxmetric.losses import DEFAULT_HUBER_H
from cvxmetric.models import qwise_model
from cvxmetric.vector_model import qwise_vector_model

from .hinge_barrier import dual_barrier
from .newton import projected_newton
from .pdhg import DEFAULT_TOL, RESIDUAL_TOL_FRACTION, pdhg
from .result import ENGINE_HOOKS, SolverResult
from .subgradient import projected_subgradient
from .subspace import subspace
from .working_set import WORKING_SET_OPTIONS, WS_SLACK, ModelPool, solve_working_set

__all__ = ["solve_qwise", "solve_qwise_vector", "QWISE_METHODS", "QWISE_DEFAULT_METHOD", "QWISE_VECTOR_METHODS",
           "BARRIER_START_MAX", "BARRIER_START_GAP"]

#: Full-matrix algorithms of :func:`solve_qwise` and the options each reads: the thesis' projected
#: subgradient engine, the restarted primal-dual hybrid gradient method (much faster at d = 50
#: and thousands of constraints) and, for the trace regularizer at large d, subspace generation
#: (:func:`cvxmetric.solvers.subspace.subspace`: PDHG on restricted problems M = P W P^T, certified
#: on the full space).
QWISE_METHODS = {
    "pdhg": keyword_options(pdhg, exclude=ENGINE_HOOKS | {"state"}),   # the facade builds the model
    "subgradient": keyword_options(projected_subgradient, exclude=ENGINE_HOOKS),
    "subspace": keyword_options(subspace, exclude=ENGINE_HOOKS),
}
#: The default algorithm, of :func:`solve_qwise` and of :class:`cvxmetric.problems.Qwise` (and so of
#: the estimator): PDHG, the faster of the two at every size the harness and the benchmarks run.
QWISE_DEFAULT_METHOD = "pdhg"

#: What ``method="pdhg", working_set=True`` reads (:data:`~cvxmetric.solvers.working_set.WORKING_SET_OPTIONS`).
QWISE_WORKING_SET_METHODS = {"pdhg": WORKING_SET_OPTIONS}

#: ``method="pdhg", barrier_start="auto"`` (the default) starts plain PDHG from the pair of the
#: dense dual barrier method (:func:`cvxmetric.solvers.hinge_barrier.dual_barrier`) up to this many
#: constraints: its Newton step costs O(m^3) (an m x m system), PDHG's iteration O(m d^2).
#: Measured (standardized digits, d = 64, random same-class/different-class quadruplets, one BLAS
#: thread, machine loaded; barrier then PDHG certifying its start at 0 iterations, against cold
#: PDHG): m = 100 47 Newton steps 0.16 s + 0.02 s against 208 iterations 0.61 s; m = 250 75 steps
#: 0.66 s + 0.03 s against 576 iterations 2.09 s; m = 500 114 steps 3.94 s against 352 iterations
#: 1.62 s; m = 1000 267 steps 18.2 s against 1,296 iterations 2.60 s.
BARRIER_START_MAX = 250
#: The barrier method stops at this fraction of PDHG's ``residual_tol`` (a certified gap below
#: ``min(residual_tol, tol)`` stops PDHG at once), so that PDHG's certificate, checked at the start,
#: accepts the pair as it is (0 iterations).
BARRIER_START_GAP = 0.1

#: Algorithms of :func:`solve_qwise_vector` (one: projected Newton) and their options.
QWISE_VECTOR_METHODS = {"newton": keyword_options(projected_newton, exclude=ENGINE_HOOKS)}


def solve_qwise(X, constraints: ConstraintSet, *, regularizer: str = "trace", C_Q: float = 1.0,
                C_P: float = 1.0, reg_weight: float = 1.0, pull_pairs=None, method: str = QWISE_DEFAULT_METHOD,
                working_set: bool = False, barrier_start="auto", **options) -> SolverResult:
    r"""Full-matrix Qwise (thesis eq. 2.7) by the projected subgradient engine or by PDHG.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row.
    constraints : ConstraintSet
        Relative constraints (quadruplets, triplets; weighted by ``C_Q``) and pairs (``C_P``).
    regularizer : {"trace", "frobenius", "pull"}
        :math:`\Omega`: :math:`\mathrm{tr}\,M`, :math:`\frac12\|M\|_F^2` or
        :math:`\langle M, \sum_{(i,j) \in S} C_{ij}\rangle` over ``pull_pairs``.
    C_Q, C_P : float
        Non-negative weights of the relative and the pairwise hinge terms.
    reg_weight : float
        Positive weight of :math:`\Omega`.
    pull_pairs : array_like, shape (p, 2), optional
        The similar pairs :math:`S` of the ``"pull"`` regularizer (required by it, rejected otherwise).
    method : {"pdhg", "subgradient", "subspace"}
        ``"pdhg"`` (default, :data:`QWISE_DEFAULT_METHOD`): restarted PDHG, :func:`cvxmetric.solvers.pdhg.pdhg`;
        ``"subgradient"``: thesis alg. 1, :func:`cvxmetric.solvers.subgradient.projected_subgradient`;
        ``"subspace"``: subspace generation, :func:`cvxmetric.solvers.subspace.subspace` (trace
        regularizer only; where it pays: :func:`cvxmetric.solvers.subspace.subspace_pays`).
    working_set : bool
        With ``method="pdhg"``: run PDHG on a working set of the constraints near or past the
        margin, certified on the full set (:func:`cvxmetric.solvers.working_set.solve_working_set`:
        ``ws_slack``, ``drop_after``, ``round_iter``, ``max_rounds``, ``max_add``, ``max_iter``
        (total PDHG iterations), ``tol``, ``residual_tol``, ``time_limit``, ``callback``, ``M0``
        (default 0) and the rest passed to each PDHG round; ``solver == "qwise-pdhg-ws"``). Its
        cost per iteration follows the working set, and its certificate is the full problem's, as
        strict as plain PDHG's. Not the default: at the default ``tol`` (1e-3) plain PDHG was
        measured faster at three of four sizes from 10^4 to 10^6 constraints (``python -m
        benchmarks.working_set``, d = 50, one BLAS thread, seconds to a certified 1e-3, working set
        / plain: 0.59x, 1.16x, 1.33x, 1.12x; to 1e-4 0.92x, 1.16x, 0.84x, 0.87x), the working set
        needing more PDHG iterations (176-320 against 112-144) for a smaller operator. At the
        optimum of the scale benchmark's instances (``benchmarks.scale``: 10^5 and 10^6 quadruplets
        on 2,000 points, d = 50, trace) 45 % of the quadruplets are violated and 48 % near or past
        the margin (``ws_slack`` 0.1), 46 % carry a multiplier: a working set keeps half the rows,
        and on the points path the products' work over the n x n point pairs (the Gram matrix of
        the factor, the Laplacian) does not shrink with it. Its ``callback`` is called per round.
    barrier_start : bool or "auto"
        With plain PDHG (``method="pdhg"``, no working set): start from the primal-dual pair of
        the dense barrier method on the dual (:func:`cvxmetric.solvers.hinge_barrier.dual_barrier`,
        to ``BARRIER_START_GAP`` times ``residual_tol``), which PDHG certifies before its first step and
        stops on at once where its certificate accepts it (otherwise it iterates from there).
        ``"auto"``: up to :data:`BARRIER_START_MAX` constraints, where the model has q = 0 and R
        positive definite (trace regularizer; the barrier method needs both) and neither ``M0``
        nor ``y0`` is given. ``True`` asks for it at any size (a ValueError where it does not
        apply). Where it ran, the result's ``n_iter`` counts its Newton steps and PDHG's
        iterations, ``info["barrier_newton_steps"]`` and ``info["pdhg_iterations"]`` each,
        ``info["barrier_gap"]`` is the pair's relative gap, and ``time`` includes it. False: PDHG
        from ``M0`` (default 0).
    **options
        Options of the chosen algorithm (``max_iter``, ``tol``, ``time_limit``, ``M0``, ...; PDHG
        also ``residual_tol``, ``y0``, ...). An option the method does not read is a ValueError.

    Returns
    -------
    SolverResult
        The result contract (:func:`cvxmetric.solvers.result.make_result`): ``M``, ``objective``,
        ``converged``, ``measure`` (``"certified_gap"``; PDHG without a certificate
        ``"kkt_residual"``), ``lower_bound``, ``certified_gap`` and the hinge ``multipliers``.

    Notes
    -----
    .. math::
        \min_{M \succeq 0}\ \lambda\,\Omega(M) + \sum_c C_c\, w_c\,
        [\delta_c + \langle M, C_{ij} - C_{kl}\rangle]_+ ,

    with :math:`\lambda` = ``reg_weight``, :math:`C_c` = ``C_Q`` on relative constraints and
    ``C_P`` on pairs, :math:`w_c`, :math:`\delta_c` the weights and margins of ``constraints``
    (a pair is the quadruplet with a repeated index, :class:`~cvxmetric.constraints.ConstraintSet`)
    and :math:`C_{ij} = (x_i - x_j)(x_i - x_j)^\top`.

    The program is not invariant under :math:`X \to sX`: :math:`C_{ij}` scales by :math:`s^2`
    while the margins :math:`\delta_c` and :math:`\Omega` do not, so the optimum is not
    :math:`M^*/s^2`. As :math:`s` shrinks the metric that reaches the margins costs more in
    :math:`\lambda\,\Omega` than the hinge terms it removes and :math:`M = 0` becomes optimal; as
    it grows :math:`\lambda\,\Omega` fades against the hinge terms. PDHG equilibrates features in
    units orders of magnitude apart (:func:`cvxmetric.solvers.pdhg.equilibration`, with the trace
    and pull regularizers); the answer is the same program's.
    """
    ws = _use_working_set(working_set, method)
    ws_only = sorted(set(options) & (WORKING_SET_OPTIONS - QWISE_METHODS["pdhg"]))
    if ws_only and not ws:
        raise ValueError(f"{', '.join(ws_only)} apply to method='pdhg' with working_set=True only")
    method = check_method_options("solve_qwise", method, options,
                                  QWISE_WORKING_SET_METHODS if ws else QWISE_METHODS)
    barrier = _check_barrier_start(barrier_start, method, ws)
    model = qwise_model(X, constraints, regularizer=regularizer, C_Q=C_Q, C_P=C_P,
                        reg_weight=reg_weight, pull_pairs=pull_pairs)
    if ws:
        pool = ModelPool(model, options.pop("ws_slack", WS_SLACK))
        M0 = options.pop("M0", None)
        M0 = np.zeros((model.d, model.d)) if M0 is None else as_square_symmetric(M0, "M0", d=model.d, psd=True)
        return solve_working_set(pool, M0, solver_name="qwise-pdhg-ws", **options)
    if method == "pdhg":
        t0 = time.perf_counter()
        start = _barrier_start(barrier, model, options)
        if start is None:
            return pdhg(model, solver_name="qwise-pdhg", **options)
        res = pdhg(model, solver_name="qwise-pdhg", M0=start.M, y0=start.y, **options)
        res.info.update(barrier_newton_steps=start.newton_steps, barrier_gap=start.gap, pdhg_iterations=res.n_iter)
        res.n_iter += start.newton_steps
        res.time = time.perf_counter() - t0
        return res
    if method == "subspace":
        return subspace(model, solver_name="qwise-subspace", **options)
    return projected_subgradient(model, solver_name="qwise-subgradient", **options)


def _check_barrier_start(barrier_start, method: str, ws: bool):
    """``barrier_start`` validated: ``"auto"``, True or False (True only with plain PDHG)."""
    if isinstance(barrier_start, str) and barrier_start == "auto":
        return "auto"
    if not isinstance(barrier_start, (bool, np.bool_)):
        raise TypeError(f"barrier_start must be True, False or 'auto'; got {barrier_start!r}")
    if barrier_start and (method != "pdhg" or ws):
        raise ValueError(f"barrier_start=True applies to plain PDHG only (method='pdhg', working_set=False); "
                         f"got method={method!r}, working_set={'True' if ws else 'False'}")
    return bool(barrier_start)


def _barrier_start(mode, model, options):
    """The barrier method's pair (:func:`~cvxmetric.solvers.hinge_barrier.dual_barrier`) that plain
    PDHG starts from, or None (``mode`` as validated by :func:`_check_barrier_start`, resolved as
    documented in :func:`solve_qwise`)."""
    given = "M0" in options or "y0" in options
    if mode == "auto":
        wanted = model.m <= BARRIER_START_MAX and not given
    else:
        wanted = mode
        if wanted and given:
            raise ValueError("barrier_start=True computes the start itself: pass M0/y0 with barrier_start=False")
    if not wanted:
        return None
    tol = options.get("tol", DEFAULT_TOL)
    residual_tol = options.get("residual_tol", RESIDUAL_TOL_FRACTION * tol)
    start = dual_barrier(model, gap=BARRIER_START_GAP * min(residual_tol, tol))
    if start is None and mode is True:
        raise ValueError("barrier_start=True needs q = 0 and a positive definite linear term "
                         "(regularizer='trace'); use barrier_start=False")
    return start


def _use_working_set(working_set, method) -> bool:
    """``working_set`` validated: True or False, True with ``method="pdhg"`` only."""
    if not isinstance(working_set, (bool, np.bool_)):
        raise TypeError(f"working_set must be True or False; got {working_set!r}")
    ws = bool(working_set)
    if ws and method != "pdhg":
        raise ValueError(f"working_set=True applies to method='pdhg' only; got method={method!r}")
    return ws


def solve_qwise_vector(X, constraints: ConstraintSet, *, diagonal: bool = True, C_Q: float = 1.0,
                       C_P: float = 1.0, h: float = DEFAULT_HUBER_H, method: str = "newton",
                       **options) -> SolverResult:
    r"""Vector Qwise (thesis eq. 2.10, Huber losses) by projected Newton (appendix B, alg. 4).

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Relative constraints (weighted by ``C_Q``) and pairs (``C_P``; the model learns the
        pairs' threshold :math:`b`, so their bounds are not read).
    diagonal : bool
        ``True``: :math:`M = \mathrm{Diag}(w)` with :math:`w \ge 0` and
        :math:`\Psi_{ij} = (x_i - x_j)^{\circ 2}`; ``False``: the linear model, one row :math:`w^\top`
        of :math:`L` (:math:`M = w w^\top`), :math:`\Psi_{ij} = x_i - x_j`, :math:`w` free.
    C_Q, C_P : float
        Non-negative weights of the relative and pairwise losses.
    h : float
        Huber width in (0, 0.5].
    method : {"newton"}
        Projected Newton, :func:`cvxmetric.solvers.newton.projected_newton` (the one algorithm).
    **options
        ``w0``, ``max_iter``, ``tol``. Any other option is a ValueError.

    Returns
    -------
    SolverResult
        The result contract with the point ``w`` (:math:`\omega = [w; b]`), ``M`` the metric,
        ``measure="certified_gap"`` and ``lower_bound``
        (:meth:`cvxmetric.vector_model.VectorModel.lower_bound`).

    Notes
    -----
    With :math:`\omega = [w; b]` (:math:`\omega \ge 0` when ``diagonal``):

    .. math::
        \min_\omega\ \tfrac12\|\omega\|^2 + C_Q \sum_{\text{relative}} w_c\,
        \ell_h(\beta_c - [\Psi_{kl} - \Psi_{ij}; 0]^\top\omega)
        + C_P \sum_{\text{pairs}} w_c\, \ell_h(1 \pm [\Psi_{ij}; -1]^\top\omega),

    (``+`` for similar, ``-`` for dissimilar pairs: :math:`D_w(i, j) \le b - 1` resp.
    :math:`\ge b + 1`), :math:`\beta_c = \delta_c`, or :math:`-h` when :math:`\delta_c = 0`, and
    :math:`\ell_h` the Huber-smoothed hinge (:mod:`cvxmetric.vector_model`).
    """
    method = check_method_options("solve_qwise_vector", method, options, QWISE_VECTOR_METHODS)
    vm = qwise_vector_model(X, constraints, diagonal=check_bool(diagonal, "diagonal"), C_Q=C_Q, C_P=C_P, h=h)
    return projected_newton(vm, **options)
