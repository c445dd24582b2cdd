r"""Restarted primal-dual hybrid gradient (Chambolle-Pock / PDLP-style) for every hinge model.

It solves the :class:`~cvxmetric.models.HingeModel` problem

.. math::
    \min_{M \succeq 0}\ f(M) = \langle R, M\rangle + \tfrac q2 \|M\|_F^2
        + \sum_c c_c\,[\delta_c + \langle M, A_c\rangle]_+

through its saddle-point form (:math:`K M = (\langle M, A_c\rangle)_c`,
:math:`K^* y = \sum_c y_c A_c`)

.. math::
    \min_{M \succeq 0}\ \max_{0 \le y \le c}\
    \langle R, M\rangle + \tfrac q2 \|M\|_F^2 + \delta^\top y + \langle K M, y\rangle ,

whose dual function is :math:`D(y) = \delta^\top y + \min_{M \succeq 0} \langle R + K^* y, M\rangle
+ \tfrac q2 \|M\|_F^2`.

Algorithm
---------
One PDHG step with primal step :math:`\tau = \eta/\omega` and dual step :math:`\sigma = \eta\omega`
(:math:`\eta` the step size, :math:`\omega` the primal weight):

.. math::
    M^+ = \Pi_{\mathbb{S}^d_+}\Big(\frac{M - \tau (R + K^* y)}{1 + \tau q}\Big), \qquad
    y^+ = \mathrm{clip}_{[0, c]}\big(y + \sigma(\delta + K(2M^+ - M))\big),

(the prox of :math:`\tau(\langle R,\cdot\rangle + \frac q2\|\cdot\|^2 + \iota_{\succeq 0})` and of the
conjugate of the hinge sum, a box projection shifted by :math:`\delta`). :math:`K M` and
:math:`K^* y` go through :class:`~cvxmetric.hinge.QuadrupletGeometry` (difference vectors, never a
:math:`d \times d` matrix per constraint); :math:`K M^+` and :math:`K^* y^+` are cached, so an
iteration costs one ``eigh`` (the projection, :func:`cvxmetric.linalg.project_psd`) plus one pass
:math:`K` and one pass :math:`K^*` over the constraints. The practical ingredients of PDLP
(Applegate et al., 2021) and its KKT-restart variant (cuPDLP, Lu & Yang, 2023):

* **row scaling** — constraint :math:`c` is divided by :math:`\|A_c\|_F` (a diagonal dual
  preconditioner; the primal variable is a matrix under a Frobenius prox, so it is not scaled);
* **adaptive step size** — a step is accepted when
  :math:`\eta \le \|\Delta z\|_\omega^2 / (2 |\langle K \Delta M, \Delta y\rangle|)`, with
  :math:`\|\Delta z\|_\omega^2 = \omega\|\Delta M\|_F^2 + \|\Delta y\|^2/\omega`, and the next
  :math:`\eta` is :math:`\min((1 - (k+1)^{-0.3})\,\eta_{\max}, (1 + (k+1)^{-0.6})\,\eta)`; the first
  :math:`\eta` is :math:`1/\|K\|_2`, estimated by power iteration;
* **adaptive restarts to the average** — every ``check_every`` iterations the current iterate and
  the step-weighted average since the last restart are scored by a KKT error (below); the better
  one is the restart candidate, adopted when its error fell below 0.2x the error at the last
  restart (sufficient decay), or below 0.8x and it stopped improving (necessary decay), or when
  the restart cycle is longer than 0.36x the iterations so far (artificial restart);
* **primal weight balancing** — at a restart,
  :math:`\omega \leftarrow \exp(\tfrac12 \log(\|\Delta y\| / \|\Delta M\|_F) + \tfrac12 \log \omega)`
  with the moves since the previous restart.

Optimality measures, at a point :math:`(M, y)` with :math:`M \succeq 0`, :math:`0 \le y \le c`
(both hold exactly, by construction, at every iterate; there is no primal residual) and
:math:`S = R + qM + K^* y` (:math:`R + qM` is the gradient of the smooth part). Every one is
relative to the size of the terms it balances, never to :math:`\max(1, \cdot)`, so multiplying all
weights by a constant, or the data by a scalar where the model is invariant, changes none of them:

* dual residual :math:`r_d = \|S_-\|_F` (:math:`S_-` the negative part; :math:`S \succeq 0` is dual
  feasibility of the conic (Wolfe) dual), relative to :math:`\max(\|R + qM\|_F, \|K^* y\|_F)`;
* Lagrangian duality gap :math:`f(M) - (\delta^\top y - \tfrac q2 \|M\|_F^2) = \langle S, M\rangle
  + \sum_c (c_c[t_c]_+ - y_c t_c)` (:math:`t = \delta + KM`), relative to
  :math:`\max(|f(M)|, |\delta^\top y - \tfrac q2\|M\|_F^2|)`;
* restart error :math:`e = \langle S, M\rangle + \rho\,\|S_-\|_* + \sum_c (c_c[t_c]_+ - y_c t_c) \ge 0`
  (:math:`\rho = \max(\|M\|_2, \|M_{\text{restart}}\|_2)`), a single number in objective units,
  relative to the same denominator as the Lagrangian gap;
* certified gap :func:`cvxmetric.certificates.relative_gap` of the best objective and the best
  lower bound :meth:`cvxmetric.models.HingeModel.dual_bound` (q > 0: closed form; q = 0: on the span
  of the data's difference vectors, theta repair or trace bound from the best objective; see
  there), over all scored points.

**Stopping rule and verdict.** The iteration stops when the certified gap is at most ``tol``, or
when the relative dual residual and restart error are at most ``tol`` and the certified gap is at
most ``certificate_tol`` (the certificate repairs the dual feasibility of an approximate
multiplier, so it lags the true gap: on syn-d50-m10000 the residual test holds at a true gap of
~3e-6 while the certificate still reads ~2e-3). The result's measure is the certified gap, held
to ``certificate_tol``, wherever the model always has a bound (q > 0, R positive definite on the
data span, or a trace bound: ``HingeModel.has_certificate``) or a bound within ``certificate_tol``
was found; otherwise (q = 0, R singular on the data span, and no repaired multiplier exactly dual
feasible) it is the relative KKT residual :math:`\max(r_d^{rel}, e^{rel})` of the returned point,
held to ``tol``. Hitting ``max_iter``/``time_limit`` first gives
``converged=False`` and a :class:`~cvxmetric.exceptions.ConvergenceWarning`.

The best lower bound and the best objective over all scored points are kept; the returned
``M`` is the PSD point with the lowest objective among those scored, ``multipliers`` the hinge
multipliers (in :math:`[0, c]`) of the best bound.

Scale invariance: the row scaling makes :math:`K'` invariant under X -> sX; the initial primal
weight :math:`\|R\|_F / \|\delta'\|` (or :math:`\|c'\|/\|\delta'\|` when R = 0) scales like
:math:`\|y'\| / \|M\|`; the adaptive step and the restart tests compare homogeneous quantities.
The iterates are therefore equivariant under all weights times a constant (M unchanged, y scaled).
"""
from __future__ import annotations

import math
import time
from typing import Callable, Optional

import numpy as np

from cvxmetric._checks import as_rng, as_square_symmetric, check_bool, check_int_in_range, check_positive
from cvxmetric.certificates import relative_gap
from cvxmetric.linalg import project_psd, symmetrize
from cvxmetric.models import HingeModel

from .result import SolverResult, make_result

__all__ = ["pdhg", "estimate_operator_norm", "DEFAULT_TOL", "DEFAULT_CERTIFICATE_TOL", "CHECK_EVERY", "POWER_ITERATIONS"]

#: Relative tolerance of the stopping rule (a certified gap this small stops at once; the relative
#: dual residual and restart error must reach it otherwise) and of the KKT measure of models
#: without a certificate. Measured: relative gaps to p* of 1e-6-1e-4.
DEFAULT_TOL = 1e-4
#: The certified relative gap a result is held to (``converged``) where a certificate exists, and
#: required before the residual test may stop the method: the harness' first-order gap threshold
#: (cvxmetric.verification.tolerances.GAP_FIRST_ORDER). Measured: syn-d50-m10000 certifies 8.5e-4 after
#: 304 iterations; digits' LMNN (constraint generation) 1.0e-2 after 1,856.
DEFAULT_CERTIFICATE_TOL = 1e-3
#: Iterations between two restart/termination checks (cuPDLP uses 64; our checks are cheap: a few
#: d x d eigendecompositions, plus the certificate's repair passes while the bound is loose).
CHECK_EVERY = 16
#: Power iterations for the estimate of ||K||_2 (it only sets the first step size).
POWER_ITERATIONS = 15
#: Restart thresholds of cuPDLP: sufficient decay, necessary decay, artificial restart fraction.
BETA_SUFFICIENT = 0.2
BETA_NECESSARY = 0.8
BETA_ARTIFICIAL = 0.36
#: Smoothing of the primal-weight update at restarts (PDLP's theta).
PRIMAL_WEIGHT_SMOOTHING = 0.5
#: A constraint row counts as empty (A_c = 0: both pairs degenerate or equal) when its Frobenius
#: norm is at most this times the largest row norm; round-off of u u^T - v v^T is ~1e-16 of it.
EMPTY_ROW_RTOL = 1e-12
#: The primal weight is rebalanced at a restart only when both moves since the last restart exceed
#: this fraction of the size of the iterates (a zero move carries no information on the balance).
MOVE_RTOL = 1e-12


def _ratio(num: float, den: float) -> float:
    """``num / den`` for a residual ``num >= 0`` and its scale ``den`` (0/0 = 0, x/0 = inf)."""
    if num == 0.0:
        return 0.0
    return num / den if den > 0 else math.inf


class _ScaledOperator:
    """:math:`K' = \\mathrm{diag}(1/s) K` with the row norms :math:`s_c = \\|A_c\\|_F` (1 for empty rows)."""

    def __init__(self, model: HingeModel):
        geom = model.geometry
        self.geometry = geom
        a, b = geom.squared_lengths()
        # ||u u^T - v v^T||_F^2 = |u|^4 + |v|^4 - 2 (u.v)^2
        uv = np.zeros(model.m)
        both = np.intersect1d(geom.u_rows, geom.v_rows)
        if both.size:
            U = geom.U[geom._u_pos[both]]
            V = geom.V[geom._v_pos[both]]
            uv[both] = np.einsum("ij,ij->i", U, V)
        s2 = np.maximum(a * a + b * b - 2.0 * uv * uv, 0.0)
        s = np.sqrt(s2)
        smax = float(s.max(initial=0.0))
        s[s <= EMPTY_ROW_RTOL * smax] = 1.0
        self.s = s

    def apply(self, M: np.ndarray) -> np.ndarray:
        return self.geometry.values(M) / self.s

    def adjoint(self, y: np.ndarray) -> np.ndarray:
        return self.geometry.weighted_sum(y / self.s)


def estimate_operator_norm(apply: Callable, adjoint: Callable, d: int, *, n_iter: int = POWER_ITERATIONS,
                           seed=0) -> float:
    r"""Power-iteration estimate of :math:`\|K\|_2` for :math:`K: \mathbb{S}^d \to \mathbb{R}^m`.

    Iterates :math:`X \leftarrow K^*K X / \|K^*K X\|_F` from a random symmetric start and returns
    :math:`\|K X\|_2` (a lower estimate that converges to :math:`\|K\|_2`).
    """
    rng = as_rng(seed)
    X = symmetrize(rng.standard_normal((d, d)))
    X /= np.linalg.norm(X)
    est = 0.0
    for _ in range(n_iter):
        Y = adjoint(apply(X))
        nrm = float(np.linalg.norm(Y))
        if nrm == 0.0:
            return 0.0
        X = Y / nrm
        est = float(np.linalg.norm(apply(X)))
    return est


class _Score:
    """Optimality measures of one point (see the module docstring)."""

    __slots__ = ("f", "dual_res", "lag_gap", "err", "rel_err", "rel_dual", "rel_gap", "M", "y", "norm2")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def pdhg(model: HingeModel, *, M0=None, y0=None, max_iter: int = 100_000, tol: float = DEFAULT_TOL,
         certificate_tol: float = DEFAULT_CERTIFICATE_TOL,
         time_limit: Optional[float] = None, check_every: int = CHECK_EVERY, primal_weight=None,
         step_size=None,
         restarts: bool = True, adaptive_step: bool = True, seed=0, solver_name: str = "pdhg",
         callback: Optional[Callable[[int, np.ndarray, float], None]] = None,
         warn: bool = True) -> SolverResult:
    r"""Minimise a hinge model over the PSD cone by restarted, adaptive PDHG.

    Parameters
    ----------
    model : HingeModel
        :math:`f(M) = \langle R, M\rangle + \tfrac q2\|M\|_F^2 + \sum_c c_c [\delta_c + \langle M, A_c\rangle]_+`.
    M0 : array_like, shape (d, d), optional
        PSD primal start (default 0).
    y0 : array_like, shape (m,), optional
        Dual start in :math:`[0, c]` (default 0): the hinge multipliers.
    max_iter : int
        Iteration limit (rejected adaptive steps count); hitting it (or ``time_limit``) issues a
        :class:`~cvxmetric.exceptions.ConvergenceWarning`.
    tol : float
        Relative tolerance of the stopping rule (module docstring).
    certificate_tol : float
        Certified relative gap required, where a certificate exists, when the residual test
        stops the method (module docstring).
    time_limit : float, optional
        Wall-clock limit in seconds.
    check_every : int
        Iterations between restart/termination checks.
    primal_weight : float, optional
        Initial primal weight :math:`\omega` (default :math:`\|R\|_F / \|\delta'\|_2`, or
        :math:`\|c'\|_2 / \|\delta'\|_2` when R = 0).
    step_size : float, optional
        Initial step size :math:`\eta` (default :math:`0.99/\|K\|_2`, with :math:`\|K\|_2` from a power
        iteration). Warm starts pass a previous run's ``info["step_size"]`` (and ``primal_weight``)
        and skip the power iteration; the adaptive rule corrects a step that is too large.
    restarts, adaptive_step : bool
        Switch off the restarts (plain averaging-free PDHG) or the adaptive step (constant
        :math:`\eta = 0.99/\|K\|_2`), for ablations.
    seed : int or Generator
        Seeds the power iteration.
    solver_name : str
        Name recorded in the result.
    callback : callable, optional
        ``callback(iteration, M, objective)`` at every check (current iterate).
    warn : bool
        Issue a :class:`~cvxmetric.exceptions.ConvergenceWarning` when not converged (an outer
        loop that reports through its own result passes False).

    Returns
    -------
    SolverResult
        Built by :func:`cvxmetric.solvers.result.make_result`. With a certificate: ``measure ==
        "certified_gap"`` (held to ``certificate_tol``), ``M`` the PSD point with the lowest
        objective among the scored points, ``lower_bound`` the best bound, ``multipliers`` its
        hinge multipliers (shape (m,), in :math:`[0, c]`). Without one: ``measure ==
        "kkt_residual"`` (held to ``tol``), ``M`` and ``multipliers`` the point the residual was
        measured at, ``lower_bound`` None. ``objective = model.value(M)``, ``history`` the
        objective at each check, and ``info`` with ``y`` (= ``multipliers``), ``lower_bound``,
        ``certified_gap`` (:func:`cvxmetric.certificates.relative_gap`, or None), ``kkt_residual``,
        ``stopped_by`` ("certificate", "kkt" or None),
        ``dual_residual``, ``lagrangian_gap`` (relative), ``restarts``, ``rejected_steps``,
        ``primal_weight``, ``step_size``, ``operator_norm``, ``checks``, ``stop_reason``, and
        ``trace``: per check (iteration, seconds, f(current), f(average), lower bound or None,
        relative dual residual, relative Lagrangian gap, restart error, candidate is average).

    Notes
    -----
    The program, the algorithm, the stopping rule and the certificates are in the module
    docstring (:mod:`cvxmetric.solvers.pdhg`).
    """
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**9)
    check_every = check_int_in_range(check_every, "check_every", 1, 10**6)
    restarts, adaptive_step = check_bool(restarts, "restarts"), check_bool(adaptive_step, "adaptive_step")
    tol = check_positive(tol, "tol")
    certificate_tol = check_positive(certificate_tol, "certificate_tol")
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    if primal_weight is not None:
        primal_weight = check_positive(primal_weight, "primal_weight")
    if model.m == 0:
        raise ValueError("model has no constraints; PDHG needs at least one hinge term")

    t_start = time.perf_counter()
    d, m = model.d, model.m
    R = np.asarray(model.R, dtype=np.float64)
    q = float(model.q)
    coef = np.asarray(model.coef, dtype=np.float64)
    delta = np.asarray(model.constraints.delta, dtype=np.float64)
    op = _ScaledOperator(model)
    s = op.s
    cs = coef * s            # box of the scaled dual y' = s * y
    ds = delta / s           # scaled margins

    if M0 is None:
        M = np.zeros((d, d))
    else:
        M = project_psd(as_square_symmetric(M0, "M0", d=d, psd=True))
    if y0 is None:
        y = np.zeros(m)
    else:
        y0 = np.asarray(y0, dtype=np.float64)
        if y0.shape != (m,) or not np.all(np.isfinite(y0)):
            raise ValueError(f"y0 must be a finite array of shape ({m},); got shape {y0.shape}")
        if np.any(y0 < 0) or np.any(y0 > coef * (1 + 1e-12)):
            raise ValueError("y0 must lie in the box [0, model.coef]; clip it with np.clip(y0, 0, model.coef)")
        y = np.clip(y0, 0.0, coef) * s

    robust = model.has_certificate
    if step_size is None or not adaptive_step:
        norm_K = estimate_operator_norm(op.apply, op.adjoint, d, seed=seed)
        if norm_K == 0.0:
            norm_K = 1.0
        eta = 0.99 / norm_K
    else:
        eta = check_positive(step_size, "step_size")
        norm_K = None
    if primal_weight is None:
        omega = _initial_primal_weight(R, cs, ds)
    else:
        omega = float(primal_weight)

    KM = op.apply(M)
    KTy = op.adjoint(y)

    def score(M_, y_, KM_, KTy_, rho) -> _Score:
        t = delta + KM_ * s
        f = float(np.vdot(R, M_) + 0.5 * q * np.vdot(M_, M_) + coef @ np.maximum(t, 0.0))
        G = R + q * M_
        S = symmetrize(G + KTy_)
        lamS = np.linalg.eigvalsh(S)
        neg = np.minimum(lamS, 0.0)
        dual_res = float(np.sqrt(neg @ neg))
        yu = y_ / s
        comp = float(coef @ np.maximum(t, 0.0) - yu @ t)
        lag_gap = float(np.vdot(S, M_)) + comp
        lamM = np.linalg.eigvalsh(M_)
        norm2 = max(float(lamM[-1]), 0.0)
        err = max(lag_gap + max(rho, norm2) * float(-neg.sum()), 0.0)
        dual_val = float(delta @ yu) - 0.5 * q * float(np.vdot(M_, M_))
        size = max(abs(f), abs(dual_val))
        rel_dual = _ratio(dual_res, max(float(np.linalg.norm(G)), float(np.linalg.norm(KTy_))))
        return _Score(f=f, dual_res=dual_res, lag_gap=lag_gap, err=err, rel_err=_ratio(err, size),
                      rel_dual=rel_dual, rel_gap=_ratio(abs(lag_gap), size),
                      M=M_, y=y_, norm2=norm2)

    # restart state
    M_last, y_last = M.copy(), y.copy()
    rho = 0.0
    err_last = score(M, y, KM, KTy, rho).err
    err_prev_cand = math.inf
    # running (step-weighted) sums since the last restart
    w_sum = 0.0
    M_sum = np.zeros_like(M)
    y_sum = np.zeros_like(y)
    KM_sum = np.zeros_like(KM)
    KTy_sum = np.zeros_like(KTy)

    best_f, best_M = math.inf, M
    best_lb = None
    cert_y = None
    history: list[float] = []
    trace: list[tuple] = []
    n_iter = n_restarts = rejected = n_checks = 0
    cycle_start = 0
    stop_reason = "max_iter"
    stopped_by = None
    last = None
    while n_iter < max_iter:
        tau, sigma = eta / omega, eta * omega
        M_new, _, _ = project_psd((M - tau * (R + KTy)) / (1.0 + tau * q), return_eig=True)
        KM_new = op.apply(M_new)
        y_new = np.clip(y + sigma * (ds + 2.0 * KM_new - KM), 0.0, cs)
        n_iter += 1
        dM = M_new - M
        dy = y_new - y
        inter = abs(float((KM_new - KM) @ dy))
        movement = omega * float(np.vdot(dM, dM)) + float(dy @ dy) / omega
        eta_max = movement / (2.0 * inter) if inter > 0 else math.inf
        if adaptive_step and eta > eta_max:
            rejected += 1
            eta = min((1.0 - (n_iter + 1) ** -0.3) * eta_max, (1.0 + (n_iter + 1) ** -0.6) * eta)
            continue
        KTy_new = op.adjoint(y_new)
        M, y, KM, KTy = M_new, y_new, KM_new, KTy_new
        w_sum += eta
        M_sum += eta * M
        y_sum += eta * y
        KM_sum += eta * KM
        KTy_sum += eta * KTy
        if adaptive_step and math.isfinite(eta_max):
            eta = min((1.0 - (n_iter + 1) ** -0.3) * eta_max, (1.0 + (n_iter + 1) ** -0.6) * eta)
        elif adaptive_step:
            eta = (1.0 + (n_iter + 1) ** -0.6) * eta

        if n_iter % check_every and n_iter < max_iter:
            continue
        # ---- check: score current and average, restart, terminate
        n_checks += 1
        cur = score(M, y, KM, KTy, rho)
        avg = score(M_sum / w_sum, y_sum / w_sum, KM_sum / w_sum, KTy_sum / w_sum, rho) if w_sum > 0 else cur
        cand = avg if avg.err < cur.err else cur
        is_avg = cand is avg
        for sc in (cur, avg):
            if sc.f < best_f:
                best_f, best_M = sc.f, sc.M
        # bounds of both points without the targeted repair; the repair (a few passes over the
        # constraints) only for the better-scored point, and only while the bound is not yet tight
        lb, lb_y = None, None
        pts = ((KTy, y, cur), (KTy_sum / w_sum, avg.y, avg))
        for KTy_, y_, _ in pts:
            b, yb = model.certify(y_ / s, upper=best_f, Ky=KTy_, repair_steps=0)
            if b is not None and (lb is None or b > lb):
                lb, lb_y = b, yb
        if relative_gap(best_f, lb) > tol:
            KTy_, y_, _ = min(pts, key=lambda p: p[2].err)
            b, yb = model.certify(y_ / s, upper=best_f, Ky=KTy_)
            if b is not None and (lb is None or b > lb):
                lb, lb_y = b, yb
        if lb is not None and (best_lb is None or lb > best_lb):
            best_lb, cert_y = lb, lb_y
        history.append(cur.f)
        trace.append((n_iter, time.perf_counter() - t_start, cur.f, avg.f, lb, cand.rel_dual, cand.rel_gap,
                      cand.err, is_avg))
        last = cand
        if callback is not None:
            callback(n_iter, M, cur.f)
        cert_gap = relative_gap(best_f, best_lb)
        kkt_ok = max(cand.rel_dual, cand.rel_err) <= tol
        if cert_gap <= tol or (kkt_ok and (cert_gap <= certificate_tol or not robust)):
            stop_reason = "converged"
            stopped_by = "certificate" if cert_gap <= certificate_tol else "kkt"
            break
        if time_limit is not None and time.perf_counter() - t_start > time_limit:
            stop_reason = "time_limit"
            break
        if not restarts:
            continue
        do_restart = (cand.err <= BETA_SUFFICIENT * err_last
                      or (cand.err <= BETA_NECESSARY * err_last and cand.err > err_prev_cand)
                      or (n_iter - cycle_start) >= BETA_ARTIFICIAL * n_iter)
        err_prev_cand = cand.err
        if do_restart:
            n_restarts += 1
            if is_avg:
                M, y = avg.M, avg.y
                KM, KTy = KM_sum / w_sum, KTy_sum / w_sum
            dMn = float(np.linalg.norm(M - M_last))
            dyn = float(np.linalg.norm(y - y_last))
            sizeM = max(float(np.linalg.norm(M)), float(np.linalg.norm(M_last)))
            sizey = max(float(np.linalg.norm(y)), float(np.linalg.norm(y_last)))
            if dMn > MOVE_RTOL * sizeM and dyn > MOVE_RTOL * sizey:
                omega = math.exp(PRIMAL_WEIGHT_SMOOTHING * math.log(dyn / dMn)
                                 + (1.0 - PRIMAL_WEIGHT_SMOOTHING) * math.log(omega))
            M_last, y_last = M.copy(), y.copy()
            rho = cand.norm2
            err_last = cand.err
            err_prev_cand = math.inf
            cycle_start = n_iter
            w_sum = 0.0
            M_sum = np.zeros_like(M)
            y_sum = np.zeros_like(y)
            KM_sum = np.zeros_like(KM)
            KTy_sum = np.zeros_like(KTy)

    if last is None:   # max_iter reached before the first check cannot happen (the last iteration checks)
        last = score(M, y, KM, KTy, rho)
    kkt_value = max(last.rel_dual, last.rel_err)
    certified = best_lb is not None and (robust or relative_gap(best_f, best_lb) <= certificate_tol)
    if certified:
        M_out, y_out = best_M, cert_y
        measure, measure_tol, measure_value = "certified_gap", certificate_tol, None
    else:   # no dual bound for this model: the relative KKT residual of the point it was measured at
        M_out, y_out = last.M, last.y / s
        measure, measure_tol, measure_value = "kkt_residual", tol, kkt_value
    objective = model.value(M_out)
    lb_out = best_lb if certified else None
    if stop_reason == "converged" and measure_value is None and relative_gap(objective, lb_out) > measure_tol:
        stop_reason = "not_certified"
    elif stop_reason == "converged" and measure_value is not None and measure_value > measure_tol:
        stop_reason = "not_certified"
    detail = (f"objective {objective:.6g}, lower bound {'none' if lb_out is None else format(lb_out, '.6g')}, "
              f"relative dual residual {last.rel_dual:.2g}, relative restart error {last.rel_err:.2g}")
    return make_result(solver_name, objective=objective, measure=measure, tol=measure_tol,
                       stop_reason=stop_reason, M=M_out, measure_value=measure_value, lower_bound=lb_out,
                       multipliers=y_out, n_iter=n_iter, history=history,
                       time=time.perf_counter() - t_start, detail=detail, warn=warn,
                       info={"y": y_out, "lower_bound": lb_out,
                             "certified_gap": None if lb_out is None else relative_gap(objective, lb_out),
                             "dual_residual": last.rel_dual, "lagrangian_gap": last.rel_gap,
                             "kkt_residual": kkt_value, "stopped_by": stopped_by,
                             "restarts": n_restarts, "rejected_steps": rejected,
                             "primal_weight": omega, "step_size": eta, "operator_norm": norm_K,
                             "checks": n_checks, "stop_reason": stop_reason,
                             "trace": trace})


def _initial_primal_weight(R: np.ndarray, cs: np.ndarray, ds: np.ndarray) -> float:
    r"""PDLP's :math:`\|c\|/\|b\|`: :math:`\|R\|_F / \|\delta'\|` (objective over right-hand side), or
    :math:`\|c'\| / \|\delta'\|` (dual box over right-hand side) when R = 0; both scale like
    :math:`\|y'\| / \|M\|`, so the iterates are equivariant under weight and data scalings. 1 when
    every margin is 0 (then nothing fixes a scale)."""
    nd = float(np.linalg.norm(ds))
    if nd == 0.0:
        return 1.0
    normR = float(np.linalg.norm(R))
    if normR > 0.0:
        return normR / nd
    nc = float(np.linalg.norm(cs))
    return nc / nd if nc > 0 else 1.0
