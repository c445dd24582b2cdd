r"""BoostMetric with the exponential or the logistic loss by accelerated projected gradient.

FISTA (Beck & Teboulle 2009) with a backtracking step and the gradient-based adaptive restart of
O'Donoghue & Candès (2015) on the smooth BoostMetric problems over the PSD cone,

.. math:: \min_{M \succeq 0}\ \text{loss}(\rho(M)) + \nu\,\mathrm{tr}\,M, \qquad
          \rho_r(M) = \langle A_r, M\rangle,\ A_r = C_{ik} - C_{ij},

the objective of :class:`cvxmetric.boostmetric.BoostMetricModel` (``value``). Each iteration takes
one PSD projection (:func:`cvxmetric.linalg.project_psd`, one ``eigh``), the margins of the trial
point and the weighted sum :math:`\hat A(u) = \sum_r u_r A_r` at the extrapolated point, both
through the triplets' difference vectors (:class:`cvxmetric.boostmetric.TripletGeometry`); the
margins are linear in M, so the extrapolated point's margins are a combination of known ones.

The iteration runs on the normalized twin (:meth:`BoostMetricModel.normalized`, data divided by a
power of two) in whitened coordinates :math:`M = B \tilde M B^\top`, with
:math:`B = E\,\Lambda^{-1/2}` from the second moment :math:`S = E \Lambda E^\top` of the difference
vectors on its range (:func:`whitening`): there every direction carries margins of the same size,
so one step length fits all of them whatever the features' units. Directions outside the range of
S carry no margin and only cost trace, so the optimum has no part there. The point is mapped back
exactly (:math:`B \tilde M B^\top`, then divided by :math:`c^2`, a power of four).

Once the rank of the iterate has settled (``RANK_SETTLED`` iterations unchanged) and a Newton
step is cheap against an iteration (``NEWTON_STEP_RATIO``), Newton's method over a factor
:math:`\tilde M = L L^\top` of that rank (:mod:`.boostmetric_newton`) takes the iterate to a
stationary point; it is certified like any other point, and when it does not certify, the iteration
goes on from it (if it is lower) without momentum. This matters where the optimum lies in the
loss' exponential tail (data in large units): there the iteration finds the rank in a few hundred
iterations and the optimum's span in thousands, which Newton's method on the factor finds in
tens of steps (measured on breast_cancer standardized x 1e3, ``python -m benchmarks.defaults
--estimators BoostMetric --datasets breast_cancer``: 564 iterations and 21 Newton steps in all).

``converged`` comes only from the certificate: :class:`cvxmetric.boostmetric.BoostMetricCertifier`
at the iterate's own weights :math:`u(M)` with ``upper`` = :math:`f(M)`. A backtracking
that finds no step, or no decrease for many iterations, ends the loop (``"stalled"``) without proof.
"""
from __future__ import annotations

import math
import time

import numpy as np

from cvxmetric._checks import check_int_in_range
from cvxmetric.boostmetric import TripletGeometry
from cvxmetric.certificates import relative_gap
from cvxmetric.linalg import project_psd

from .boostmetric_newton import FactorNewton, newton_step_cost
from .boostmetric_stagewise import DEFAULT_TOL, _Run, line_search_weight
from .boostmetric_subspace import whitened_basis
from .result import SolverResult, make_result

__all__ = ["boostmetric_projected_gradient", "whitening"]

#: Eigenvalues of the difference vectors' second moment at or below SPAN_RTOL times the largest
#: are round-off of the zero eigenvalues of constant features (the eigh of a d x d matrix errs by
#: about d ulps of its largest eigenvalue, d <= 1e3 here): such directions leave the whitened
#: coordinates. Whitened by 1 / sqrt(round-off), their trace gradient would be 1e16 times the
#: rest, and the projection's eigh would lose every other direction to its round-off.
SPAN_RTOL = 1e-13

#: The step's curvature estimate L shrinks by this factor before each iteration and doubles
#: (BACKTRACK_GROWTH) until the quadratic upper bound holds: the loss' curvature falls as margins
#: move into its flat tails, and a fixed or only growing L would keep the first, largest one.
#: 0.8 costs about 1.3 trial points per iteration.
L_SHRINK = 0.8
BACKTRACK_GROWTH = 2.0

#: Backtrackings per iteration at most (2^60 times the estimate: beyond it the upper bound fails
#: only by round-off, and the iteration stops, "stalled").
MAX_BACKTRACK = 60

#: Round-off allowance of the quadratic upper-bound test, in ulps of |f| (the objective sums m
#: terms, but the test compares values of nearby points, whose errors cancel to a few ulps).
TEST_ULPS = 16.0

#: The first curvature estimate is a secant along the negative gradient over a step of this
#: Frobenius length times the start's (normalized units: the start has entries of order one).
PROBE_STEP = 1e-3

#: The certificate (one weighted sum and one d x d eigh on the twin, about one iteration's cost)
#: is computed when the complementarity gap |nu tr M - u^T rho| (free from the margins; it is
#: the certified gap when A(u) <= nu I, and 0 at the optimum) is within tol, and then at most every CERTIFY_EVERY
#: iterations: at most a fifth more work in the final phase.
CERTIFY_EVERY = 5

#: Stop ("stalled") when the best objective has not decreased for this many iterations (far
#: longer than a restart cycle, tens to hundreds of iterations on the default instances), or
#: when no step passes the backtracking test. A step below the point's round-off is no reason to
#: stop: L shrinks by L_SHRINK each iteration until the step counts again (measured on
#: breast_cancer standardized times 1e3: such a step occurs at a certified gap of 7e-6, and the
#: iteration certifies 1e-6 some hundred iterations later).
STALL_ITERATIONS = 500

#: The projection's eigenpairs give the new point as a factor, M = L^T L with r rows (its positive
#: eigenvalues); its margins cost O(m k r) that way against O(m k^2) from M. Used when r is at
#: most FACTOR_MAX_FRACTION of k (measured, one thread: breast_cancer, k = 30, m = 5121: 0.45 ms
#: at r = 15 against 0.8 ms; digits, k = 61, m = 16173: 1.8 ms against 2.8 ms).
FACTOR_MAX_FRACTION = 0.5

#: Newton's phase over the factor (:mod:`.boostmetric_newton`) starts once the rank of the FISTA
#: iterate has not changed for RANK_SETTLED iterations, and again after twice as many each time
#: its point does not certify.
RANK_SETTLED = 50

#: ... and only when one Newton step costs at most NEWTON_STEP_RATIO FISTA iterations, counted in
#: multiply-adds (:func:`~.boostmetric_newton.newton_step_cost` against the m k^2 of an
#: iteration's weighted sum). On breast_cancer standardized x 1e3 (k = 30, r = 13, some 350 of
#: 5121 triplets in the Hessian) a step costs about 16 iterations and Newton's phase replaces
#: thousands of them; on data in natural units every triplet stays in the Hessian, a step would
#: cost hundreds of iterations, and FISTA alone certifies in a few hundred.
NEWTON_STEP_RATIO = 20.0


def whitening(geom: TripletGeometry) -> np.ndarray:
    r"""The whitening :math:`B` (d, k): :math:`B^\top S B = I` on the range of the second moment
    :math:`S = (U^\top U + V^\top V) / (2m)` of the difference vectors (eigenvalues above ``SPAN_RTOL``
    of the largest), through :func:`~.boostmetric_subspace.whitened_basis`."""
    U, V = geom.geometry.U, geom.geometry.V
    S = (U.T @ U + V.T @ V) / (2 * geom.m)
    lam, E = np.linalg.eigh(0.5 * (S + S.T))
    keep = lam > SPAN_RTOL * max(float(lam[-1]), 0.0)
    return whitened_basis(E[:, keep], S)


class _Whitened:
    r"""The twin's objective in whitened coordinates: :math:`\tilde f(\tilde M) = \text{loss}(\rho) + \nu \langle B^\top B, \tilde M\rangle`."""

    def __init__(self, run: _Run, B: np.ndarray):
        self.run, self.B = run, B
        self.geom = TripletGeometry(run.geom.X @ B, run.geom.triplets)   # rows B^T x: margins of B M B^T
        self.trace_weight = run.nu * (B.T @ B)                           # nu tr(B M B^T) = <nu B^T B, M>

    def margins(self, Mt: np.ndarray) -> np.ndarray:
        return self.geom.margins(Mt)

    def margins_eig(self, Mt: np.ndarray, lam: np.ndarray, V: np.ndarray) -> np.ndarray:
        """The margins of the projection ``Mt`` of a matrix with eigenpairs (lam, V): through its
        factor when its rank is at most ``FACTOR_MAX_FRACTION`` of the dimension."""
        pos = lam > 0.0
        if np.count_nonzero(pos) > FACTOR_MAX_FRACTION * lam.size:
            return self.geom.margins(Mt)
        return self.geom.margins_factor((V[:, pos] * np.sqrt(lam[pos])).T)

    def value(self, rho: np.ndarray, Mt: np.ndarray) -> float:
        return self.run.twin.value_from_margins(rho, 0.0) + float(np.sum(self.trace_weight * Mt))

    def gradient(self, rho: np.ndarray) -> np.ndarray:
        r""":math:`\nu B^\top B - \sum_r u_r B^\top A_r B` with :math:`u = u(\rho)`."""
        return self.trace_weight - self.geom.weighted_sum(self.run.twin.weights(rho))

    def start(self) -> np.ndarray:
        r""":math:`\gamma I`, :math:`\gamma \ge 0` the exact minimiser along the whitened identity
        (algorithm 2's line search; raises when the exponential-loss problem is unbounded)."""
        k = self.B.shape[1]
        h = self.margins(np.eye(k))
        self.run.line_search(self.run.model.loss, np.zeros_like(h), h)   # the unboundedness check
        gamma = line_search_weight(self.run.model.loss, np.zeros_like(h), h, float(np.trace(self.trace_weight)))
        return gamma * np.eye(k)


class _Fista:
    """The iterate x (margins, value), the previous one, the momentum and the step's curvature L."""

    def __init__(self, prob: _Whitened, x: np.ndarray):
        self.prob = prob
        self.x, self.rho = x, prob.margins(x)
        self.f = prob.value(self.rho, x)
        self.x_old, self.rho_old = self.x, self.rho
        self.theta = 1.0
        self.n_trials = 0
        self.n_restarts = 0
        self.rank, self.same_rank = -1, 0
        G = prob.gradient(self.rho)
        step = PROBE_STEP * max(float(np.linalg.norm(x)), 1.0) / max(float(np.linalg.norm(G)), np.finfo(float).tiny)
        z_rho = self.rho - step * prob.margins(G)
        dG = prob.gradient(z_rho) - G
        self.L = max(float(np.linalg.norm(dG)) / (step * float(np.linalg.norm(G))), np.finfo(float).tiny)

    def step(self) -> bool:
        """One FISTA step with backtracking and restart; False when no step passes the test."""
        prob = self.prob
        beta = (self.theta - 1.0) / self.theta_next()
        y = self.x + beta * (self.x - self.x_old)
        rho_y = self.rho + beta * (self.rho - self.rho_old)
        f_y = prob.value(rho_y, y)
        G = prob.gradient(rho_y)
        L = self.L * L_SHRINK
        for _ in range(MAX_BACKTRACK):
            self.n_trials += 1
            x_new, lam, V = project_psd(y - G / L, return_eig=True)
            D = x_new - y
            rho_new = prob.margins_eig(x_new, lam, V)
            f_new = prob.value(rho_new, x_new)
            bound = f_y + float(np.sum(G * D)) + 0.5 * L * float(np.sum(D * D))
            if f_new <= bound + TEST_ULPS * np.finfo(float).eps * max(abs(f_y), abs(f_new)):
                break
            L *= BACKTRACK_GROWTH
        else:
            return False
        # gradient restart: the generalized gradient y - x_new points along the last step
        if float(np.sum(-D * (x_new - self.x))) > 0.0:
            self.theta = 1.0
            self.n_restarts += 1
        else:
            self.theta = self.theta_next()
        self.x_old, self.rho_old = self.x, self.rho
        self.x, self.rho, self.f, self.L = x_new, rho_new, f_new, L
        pos = lam > 0.0
        self.same_rank = self.same_rank + 1 if np.count_nonzero(pos) == self.rank else 0
        self.rank, self.factor = int(np.count_nonzero(pos)), V[:, pos] * np.sqrt(lam[pos])
        return True

    def reset(self, x: np.ndarray, rho: np.ndarray, f: float) -> None:
        """Continue from the point x (margins rho, value f), without momentum."""
        self.x = self.x_old = x
        self.rho = self.rho_old = rho
        self.f, self.theta, self.same_rank = f, 1.0, 0

    def theta_next(self) -> float:
        return 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * self.theta ** 2))


def _certify(run: _Run, rho: np.ndarray, f: float, trace: float, *, force: bool = False):
    """(certified relative gap, DualBound or None) at the point with margins rho, value f, trace tr M."""
    u = run.twin.weights(rho)
    comp = run.nu * trace - float(u @ rho)   # <nu I - A(u), M>: the gap when A(u) <= nu I
    if not force and relative_gap(f, f - abs(comp)) > run.tol:
        return math.inf, None
    bound = run.certifier.bound(u, upper=f)
    return relative_gap(f, bound.lower), bound


def boostmetric_projected_gradient(X, triplets, *, loss: str = "logistic", nu: float = 1.0,
                                   max_iter: int = 20000, tol: float = DEFAULT_TOL,
                                   eig: str = "auto") -> SolverResult:
    r"""BoostMetric (exp or logistic loss) by FISTA with backtracking and adaptive restart.

    Parameters
    ----------
    X : array_like, shape (n, d)
    triplets : ConstraintSet or array_like of int, shape (m, 3)
    loss : {"exp", "logistic"}
        The estimator's default loss is the logistic one, with ``nu = 1``
        (:data:`cvxmetric.instances.boostmetric.DEFAULT_NU`).
    nu : float
        Trace weight.
    max_iter : int
        FISTA iterations at most (measured, ``python -m benchmarks.defaults --estimators BoostMetric``:
        0-672 on the estimator's default fits of iris, wine, breast_cancer and digits at five
        preprocessings, 1146 on digits standardized x 1e3), not counting the steps of Newton's phase
        (``info["newton_steps"]``: 0-28 there).
    tol : float
        Certified relative gap for ``converged``.
    eig : {"auto", "dense", "lanczos"}
        The certificate's eigen-solver (:class:`~cvxmetric.boostmetric.BoostMetricCertifier`).

    Returns
    -------
    SolverResult
        ``M``, ``objective`` = ``model.value(M)``, ``lower_bound`` and ``multipliers`` (the repaired
        weights u) from the certificate, ``measure="certified_gap"``, ``history`` = f after each
        iteration; ``info``: trial points, restarts, the whitened dimension, Newton's steps, the
        certificate's detail.

    Notes
    -----
    The program (:class:`~cvxmetric.boostmetric.BoostMetricModel`), with
    :math:`A_r = C_{ik} - C_{ij}`, :math:`C_{ab} = (x_a - x_b)(x_a - x_b)^\top`:

    .. math::
        \text{exp:}\quad &\min_{M \succeq 0}\ \log \sum_r e^{-\langle A_r, M\rangle} + \nu\,\mathrm{tr}\,M,\\
        \text{logistic:}\quad &\min_{M \succeq 0}\ \sum_r \log(1 + e^{-\langle A_r, M\rangle}) + \nu\,\mathrm{tr}\,M .

    Its gradient is :math:`\nu I - \sum_r u_r A_r` with :math:`u = -\nabla_\rho \text{loss}`. Solved on
    the normalized twin in whitened coordinates :math:`M = B \tilde M B^\top` (module docstring),
    where the iteration is

    .. math:: x_{k+1} = \Pi_{\succeq 0}\big(y_k - \tfrac{1}{L_k}\nabla \tilde f(y_k)\big),\qquad
              y_{k+1} = x_{k+1} + \tfrac{\theta_k - 1}{\theta_{k+1}}(x_{k+1} - x_k),

    :math:`L_k` found by backtracking on :math:`\tilde f(x_{k+1}) \le \tilde f(y_k) + \langle\nabla, x_{k+1} - y_k\rangle
    + \tfrac{L_k}{2}\|x_{k+1} - y_k\|_F^2`, and :math:`\theta` reset to 1 when
    :math:`\langle y_k - x_{k+1}, x_{k+1} - x_k\rangle > 0`.
    """
    run = _Run(X, triplets, loss, nu, eig, tol)
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**7)
    B = whitening(run.geom)
    prob = _Whitened(run, B)
    it = _Fista(prob, prob.start())
    best = (it.f, it.x, it.rho)
    history, stop_reason, n_iter, last_cert, since_best, bound = [], "max_iter", 0, -CERTIFY_EVERY, 0, None
    newton_wait, n_newton, newton_point = RANK_SETTLED, 0, None

    def trace_of(x):
        return float(np.sum(prob.trace_weight * x)) / run.nu

    gap, bound = _certify(run, it.rho, it.f, trace_of(it.x))
    if gap <= run.tol:
        stop_reason = "converged"
    else:
        for n_iter in range(1, int(max_iter) + 1):
            stepped = it.step()
            history.append(it.f)
            if it.f < best[0]:
                best, since_best = (it.f, it.x, it.rho), 0
            else:
                since_best += 1
            if it.rank > 0 and it.same_rank >= newton_wait and _newton_affordable(prob, it):
                newton_wait *= 2
                x, rho, f, n_newton = _newton_phase(prob, it.factor, n_newton)
                gap, _ = _certify(run, rho, f, trace_of(x), force=True)
                if gap <= run.tol:
                    stop_reason, newton_point = "converged", (f, x, rho)
                    break
                if f < it.f:
                    it.reset(x, rho, f)
                    if f < best[0]:
                        best, since_best = (f, x, rho), 0
            if n_iter - last_cert >= CERTIFY_EVERY:
                gap, b = _certify(run, it.rho, it.f, trace_of(it.x))
                if b is not None:
                    last_cert = n_iter
                    if gap <= run.tol:
                        stop_reason = "converged"
                        break
            if not stepped or since_best >= STALL_ITERATIONS:
                stop_reason = "stalled"
                break
    final = newton_point or (best if stop_reason != "converged" else (it.f, it.x, it.rho))
    return _result(run, prob, final, n_iter,
                   stop_reason, history, {"trial_points": it.n_trials, "restarts": it.n_restarts,
                                          "whitened_dimension": int(B.shape[1]), "newton_steps": n_newton})


def _newton_affordable(prob: _Whitened, it: _Fista) -> bool:
    """Whether one Newton step on the iterate's factor costs at most ``NEWTON_STEP_RATIO`` iterations."""
    m, k = prob.geom.m, prob.B.shape[1]
    return newton_step_cost(prob.run.model.loss, it.rho, k, it.rank) <= NEWTON_STEP_RATIO * m * k * k


def _newton_phase(prob: _Whitened, factor: np.ndarray, n_newton: int):
    """Newton's method over the factor from the FISTA iterate's factor: (point, margins, value, steps so far)."""
    newton = FactorNewton(prob.geom, prob.run.model.loss, prob.trace_weight)
    L = newton.solve(factor)
    x = L @ L.T
    x = 0.5 * (x + x.T)
    rho = prob.margins(x)
    return x, rho, prob.value(rho, x), n_newton + newton.n_steps


def _result(run: _Run, prob: _Whitened, point, n_iter: int, stop_reason: str, history, info: dict) -> SolverResult:
    """The point mapped back (B M B^T / c^2, exact up to the products' round-off) and its certificate."""
    f, x, rho = point
    M = prob.B @ x @ prob.B.T / run.c2
    M = 0.5 * (M + M.T)
    _, bound = _certify(run, rho, f, float(np.sum(prob.trace_weight * x)) / run.nu, force=True)
    info = dict(info, certificate=bound.detail)
    return make_result(f"boostmetric-{run.model.loss}-fista", objective=run.model.value(M), measure="certified_gap",
                       tol=run.tol, stop_reason=stop_reason, M=M, lower_bound=bound.lower,
                       multipliers=bound.multipliers, n_iter=n_iter, history=history,
                       time=time.perf_counter() - run.t0, info=info)
