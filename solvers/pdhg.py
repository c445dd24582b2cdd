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
:math:`S = R + qM + K^* y` (:math:`R + qM` is the gradient of the smooth part):

* dual residual :math:`r_d = \|S_-\|_F` (:math:`S_-` the negative part; :math:`S \succeq 0` is dual
  feasibility of the conic (Wolfe) dual), relative to :math:`1 + \|R + qM\|_F + \|K^* y\|_F`;
* Lagrangian duality gap :math:`f(M) - (\delta^\top y - \tfrac q2 \|M\|_F^2) = \langle S, M\rangle
  + \sum_c (c_c[t_c]_+ - y_c t_c)` (:math:`t = \delta + KM`), relative to :math:`1 + |f(M)| + |\cdot|`;
* restart error :math:`\langle S, M\rangle + \rho\,\|S_-\|_* + \sum_c (c_c[t_c]_+ - y_c t_c) \ge 0`
  (:math:`\rho = \max(\|M\|_2, \|M_{\text{restart}}\|_2)`), a single number in objective units.

**Stopping rule**: the relative certified gap :math:`(f(M) - \text{lower bound}) / \max(1, |f(M)|)`
is at most ``tol``; or the relative dual residual and the relative restart error (Lagrangian gap
plus :math:`\rho\|S_-\|_*`, over :math:`\max(1, |f(M)|)`) are at most ``tol`` *and*, when a
certificate exists, the certified gap is at most ``certificate_tol``. (The certificate repairs the
dual feasibility of an approximate multiplier, so it lags the true gap: on syn-d50-m10000 the
residual test holds at a true gap of ~3e-6 while the certificate still reads ~2e-3.)

Certified lower bound (any :math:`y \in [0, c]` gives one where stated):

* :math:`q > 0`: :math:`D(y) = \delta^\top y - \|\Pi_{\mathbb{S}_+}(-(R + K^* y))\|_F^2 / (2q)`;
* :math:`q = 0`, :math:`R \succ 0`: with :math:`\theta` the largest value in :math:`[0, 1]` such that
  :math:`R + \theta K^* y \succeq 0`, :math:`\theta y` is dual feasible and
  :math:`\max(0, \theta\,\delta^\top y)` is a lower bound;
* :math:`q = 0`, :math:`R` singular or indefinite (e.g. a "pull" matrix of fewer pairs than
  :math:`d`): :math:`D(y) = \delta^\top y` only if :math:`R + K^* y \succeq 0` holds exactly, which a
  first-order iterate rarely achieves, so in general **no certificate** exists and ``info``
  reports ``lower_bound = None`` (the stopping rule then uses the residual and Lagrangian gap).

The best lower bound and the best objective over all scored points are kept; the returned
``M`` is the PSD point with the lowest objective among those scored.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Optional

import numpy as np

from cvxmetric._checks import as_rng, as_square_symmetric, check_bool, check_int_in_range, check_positive
from cvxmetric.linalg import project_psd, symmetrize
from cvxmetric.models import HingeModel

from .result import SolverResult, warn_not_converged

__all__ = ["pdhg", "dual_lower_bound", "estimate_operator_norm", "DEFAULT_TOL", "DEFAULT_CERTIFICATE_TOL", "CHECK_EVERY", "POWER_ITERATIONS"]

#: Relative tolerance of the stopping rule (dual residual, Lagrangian gap, certified gap).
#: Measured: relative gaps to p* of 1e-6-1e-4 (syn-d50-m10000: 3e-6 after ~300 iterations).
DEFAULT_TOL = 1e-4
#: Certified gap required, where a certificate exists, before the residual test may stop the
#: method: the harness' first-order gap threshold (verification.tolerances.GAP_FIRST_ORDER).
DEFAULT_CERTIFICATE_TOL = 1e-3
#: Iterations between two restart/termination checks (cuPDLP uses 64; our checks are cheap: two
#: d x d eigendecompositions and no pass over the constraints).
CHECK_EVERY = 16
#: Power iterations for the estimate of ||K||_2 (it only sets the first step size).
POWER_ITERATIONS = 15
#: Restart thresholds of cuPDLP: sufficient decay, necessary decay, artificial restart fraction.
BETA_SUFFICIENT = 0.2
BETA_NECESSARY = 0.8
BETA_ARTIFICIAL = 0.36
#: Smoothing of the primal-weight update at restarts (PDLP's theta).
PRIMAL_WEIGHT_SMOOTHING = 0.5
#: A matrix R counts as positive definite for the q = 0 certificate when its smallest eigenvalue
#: exceeds this times its largest one.
PD_RTOL = 1e-10
#: Safety factor on theta of the q = 0 certificate, absorbing the round-off of its eigenvalue.
THETA_SAFETY = 1.0 - 1e-9


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
        s[s <= 1e-12 * max(1.0, float(s.max(initial=0.0)))] = 1.0
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


class _Certificate:
    r"""Lower bound :math:`D` from :math:`K^* y` and :math:`\delta^\top y` (see the module docstring)."""

    def __init__(self, R: np.ndarray, q: float):
        self.R = symmetrize(R)
        self.q = float(q)
        self.chol_inv = None
        if self.q == 0.0:
            lamR = np.linalg.eigvalsh(self.R)
            if lamR[0] > PD_RTOL * max(abs(lamR[-1]), 1e-300):
                self.chol_inv = np.linalg.inv(np.linalg.cholesky(self.R))

    @property
    def exists(self) -> bool:
        """Whether every multiplier in the box yields a finite bound (q > 0 or R positive definite)."""
        return self.q > 0 or self.chol_inv is not None

    def __call__(self, KTy: np.ndarray, delta_y: float) -> Optional[float]:
        S = symmetrize(self.R + KTy)
        if self.q > 0:
            neg = np.minimum(np.linalg.eigvalsh(S), 0.0)
            return delta_y - float(neg @ neg) / (2.0 * self.q)
        if self.chol_inv is not None:
            B = symmetrize(self.chol_inv @ S @ self.chol_inv.T)   # = I + L^{-1} K*y L^{-T}
            mu = float(np.linalg.eigvalsh(B)[0]) - 1.0
            theta = 1.0 if mu >= -1.0 else -1.0 / mu
            return max(0.0, THETA_SAFETY * theta * delta_y)
        if float(np.linalg.eigvalsh(S)[0]) >= 0.0:
            return delta_y
        return None


def dual_lower_bound(model: HingeModel, y) -> Optional[float]:
    r"""Certified lower bound on :math:`\min_{M \succeq 0} f(M)` from hinge multipliers ``y``.

    Parameters
    ----------
    model : HingeModel
    y : array_like, shape (m,)
        Multipliers in the box :math:`[0, c]` (``model.coef``), e.g. ``result.info["y"]`` of
        :func:`pdhg` or the "hinge" duals of the cvxpy formulation.

    Returns
    -------
    float or None
        :math:`\delta^\top y - \|\Pi_{\mathbb{S}_+}(-(R + K^* y))\|_F^2 / (2q)` for :math:`q > 0`;
        :math:`\max(0, \theta\,\delta^\top y)` for :math:`q = 0` and :math:`R \succ 0`, with
        :math:`\theta \in [0, 1]` the largest value with :math:`R + \theta K^* y \succeq 0`;
        :math:`\delta^\top y` for :math:`q = 0`, :math:`R` singular, when :math:`R + K^* y \succeq 0`;
        None otherwise (no certificate).
    """
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (model.m,) or not np.all(np.isfinite(y)):
        raise ValueError(f"y must be a finite array of shape ({model.m},); got shape {y.shape}")
    coef = np.asarray(model.coef, dtype=np.float64)
    if np.any(y < 0) or np.any(y > coef * (1 + 1e-12)):
        raise ValueError("y must lie in the box [0, model.coef]; clip it with np.clip(y, 0, model.coef)")
    y = np.clip(y, 0.0, coef)
    delta = np.asarray(model.constraints.delta, dtype=np.float64)
    return _Certificate(model.R, model.q)(model.geometry.weighted_sum(y), float(delta @ y))


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
         callback: Optional[Callable[[int, np.ndarray, float], None]] = None) -> SolverResult:
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
        Initial primal weight :math:`\omega` (default :math:`\|R\|_F / \|\delta'\|_2`, or 1).
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

    Returns
    -------
    SolverResult
        ``M`` the PSD point with the lowest objective among the scored points, ``objective =
        model.value(M)``, ``history`` that objective at each check, ``converged``, and ``info``
        with ``y`` (hinge multipliers of shape (m,), in :math:`[0, c]`: those of the best
        certificate when one exists, else those of the last restart candidate), ``lower_bound``
        (certified lower bound on the optimum, or None when no certificate exists),
        ``certified_gap`` (``(objective - lower_bound) / max(1, |objective|)`` or None),
        ``dual_residual``, ``lagrangian_gap`` (relative), ``restarts``, ``rejected_steps``,
        ``primal_weight``, ``step_size``, ``operator_norm``, ``checks``, ``stop_reason``, and
        ``trace``: per check (iteration, seconds, f(current), f(average), lower bound or None,
        relative dual residual, relative Lagrangian gap, restart error, candidate is average).

    Notes
    -----
    The program, the algorithm, the stopping rule and the certificates are in the module
    docstring (:mod:`solvers.pdhg`).
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

    certificate = _Certificate(R, q)
    has_certificate = certificate.exists
    if step_size is None or not adaptive_step:
        norm_K = estimate_operator_norm(op.apply, op.adjoint, d, seed=seed)
        if norm_K == 0.0:
            norm_K = 1.0
        eta = 0.99 / norm_K
    else:
        eta = check_positive(step_size, "step_size")
        norm_K = None
    normR = float(np.linalg.norm(R))
    if primal_weight is None:
        nd = float(np.linalg.norm(ds))
        omega = normR / nd if normR > 0 and nd > 0 else 1.0
    else:
        omega = float(primal_weight)

    KM = op.apply(M)
    KTy = op.adjoint(y)

    def lower_bound(KTy_, y_) -> Optional[float]:
        return certificate(KTy_, float(ds @ y_))

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
        rel_dual = dual_res / (1.0 + float(np.linalg.norm(G)) + float(np.linalg.norm(KTy_)))
        rel_gap = abs(lag_gap) / (1.0 + abs(f) + abs(dual_val))
        return _Score(f=f, dual_res=dual_res, lag_gap=lag_gap, err=err, rel_err=err / max(1.0, abs(f)),
                      rel_dual=rel_dual, rel_gap=rel_gap,
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
    best_lb = -math.inf
    cert_y = None
    history: list[float] = []
    trace: list[tuple] = []
    n_iter = n_restarts = rejected = n_checks = 0
    cycle_start = 0
    converged = False
    stop_reason = "max_iter"
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
        lb, lb_y = None, None
        for KTy_, y_ in ((KTy, y), (KTy_sum / w_sum, avg.y)):
            b = lower_bound(KTy_, y_)
            if b is not None and (lb is None or b > lb):
                lb, lb_y = b, y_
        if lb is not None and lb > best_lb:
            best_lb, cert_y = lb, lb_y
        history.append(cur.f)
        trace.append((n_iter, time.perf_counter() - t_start, cur.f, avg.f, lb, cand.rel_dual, cand.rel_gap,
                      cand.err, is_avg))
        last = cand
        if callback is not None:
            callback(n_iter, M, cur.f)
        cert_gap = (best_f - best_lb) / max(1.0, abs(best_f)) if best_lb > -math.inf else math.inf
        kkt_ok = cand.rel_dual <= tol and cand.rel_err <= tol
        if cert_gap <= tol or (kkt_ok and (not has_certificate or cert_gap <= certificate_tol)):
            converged = True
            stop_reason = "certified gap" if cert_gap <= tol else "kkt"
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
            if dMn > 1e-10 and dyn > 1e-10:
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

    objective = model.value(best_M)
    y_out = (cert_y if cert_y is not None else (last.y if last is not None else y)) / s
    lb_out = best_lb if best_lb > -math.inf else None
    cert_gap = None if lb_out is None else (objective - lb_out) / max(1.0, abs(objective))
    elapsed = time.perf_counter() - t_start
    if not converged:
        warn_not_converged(solver_name, n_iter, f"objective {objective:.6g}, "
                           f"dual residual {last.rel_dual if last else float('nan'):.2g}, "
                           f"gap {last.rel_gap if last else float('nan'):.2g}")
    return SolverResult(solver=solver_name, M=best_M, w=None, objective=float(objective), n_iter=n_iter,
                        converged=converged, history=np.asarray(history), time=elapsed,
                        info={"y": y_out,
                              "lower_bound": lb_out, "certified_gap": cert_gap,
                              "dual_residual": last.rel_dual if last else None,
                              "lagrangian_gap": last.rel_gap if last else None,
                              "restarts": n_restarts, "rejected_steps": rejected,
                              "primal_weight": omega, "step_size": eta, "operator_norm": norm_K,
                              "checks": n_checks, "stop_reason": stop_reason,
                              "trace": trace})
