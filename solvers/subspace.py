r"""Subspace generation for the trace-regularized hinge model at large d, certified on the full space.

It solves the :class:`~cvxmetric.models.HingeModel` problem with the trace regularizer (q = 0,
:math:`R = rI`, r > 0)

.. math::
    \min_{M \succeq 0}\ f(M) = r\,\mathrm{tr}\,M + \sum_c c_c\,[\delta_c + \langle M, A_c\rangle]_+ ,

whose optimum is low rank, by a sequence of **restricted** problems over :math:`M = P W P^\top`
(P: d x k with orthonormal columns, :math:`k \ll d`, :math:`W \in \mathbb{S}^k_+`). The restricted
problem is the same model on the projected points :math:`XP`
(:meth:`~cvxmetric.models.HingeModel.restricted`), solved by restarted PDHG
(:func:`cvxmetric.solvers.pdhg.pdhg`, dense at k of a few hundred), and every round certifies the
**full** problem from the restricted multipliers y, matrix-free: the dual matrix
:math:`S = rI + K^* y` of the full space is read through the data
(:meth:`~cvxmetric.hinge.QuadrupletGeometry.adjoint_operator`), and its most negative eigenvectors
are where M wants to grow; they are the next round's new directions (column generation on the
spectrum, "pricing").
"""
from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from cvxmetric._checks import as_rng, check_int_in_range, check_positive
from cvxmetric.certificates import relative_gap
from cvxmetric.hinge import COST_EIGH
from cvxmetric.linalg import orthonormal_columns, psd_factor
from cvxmetric.models import HingeModel

from .pdhg import DEFAULT_TOL, PROOF_BLOCK, estimated_bound, pdhg, smallest_ritz_pairs
from .result import SolverResult, make_result

__all__ = ["subspace", "subspace_pays", "subspace_applies", "full_steps_cheap", "INNER_TOL_FRACTION", "INNER_GAP_FRACTION",
           "INNER_TOL_MAX", "PRICE_BLOCK", "PRICE_GROWTH", "PRICE_GUARD", "PRICE_RITZ_STEPS",
           "SUBSPACE_MIN_EIGH_SECONDS", "MAX_ROUNDS"]

#: The restricted problems are solved to this fraction of ``tol`` (their certified relative gap)
#: once the full gap nears ``tol``: the full gap is the restricted solve's own gap plus what the
#: subspace misses (the negative curvature of the full dual matrix off the subspace), so the inner
#: solve may spend at most a tenth of the budget, leaving the rest to the pricing.
INNER_TOL_FRACTION = 0.1
#: ... and, while the full gap is far above ``tol``, to this fraction of the last round's estimated
#: full gap (at most ``INNER_TOL_MAX``): a restricted optimum far more accurate than its subspace
#: buys nothing. Measured on d = 1000 with 10^4 quadruplets (2,000 points): at a fixed inner tol of
#: 1e-4 the early rounds took 208-1,920 PDHG iterations while the full gap was 0.5-1.0.
INNER_GAP_FRACTION = 0.1
INNER_TOL_MAX = 1e-2
#: New directions per round: at least this many eigenvectors of the most negative eigenvalues of the
#: full dual matrix (the first subspace takes as many) ...
PRICE_BLOCK = 24
#: ... and, where every Ritz value of the last pricing was negative (the negative eigenspace is
#: wider than the block), this fraction of the current k: the subspace then grows geometrically
#: towards the optimum's rank (measured 121 at d = 200 and 316 at d = 1000 on 1,000-2,000 points;
#: with a fixed block of 24, 9 and 25 rounds). Where some Ritz value was not negative, the next
#: block is the number of negative ones just found (at least ``PRICE_BLOCK``): the negative
#: eigenspace's measured width. Measured at d = 5000 (trace weight 1e4, W's rank settled at 59): a
#: reset to ``PRICE_BLOCK`` there found all 32 Ritz values negative, so the next block was 0.5 k
#: (300 columns, 37-43 CPU s of pricing) of which some 60 were negative, then 24 again: the
#: rounds alternated 7 and 24-43 CPU s of pricing, 239 of the solve's 582 CPU s. With the width:
#: 13 rounds and 384 CPU s to a certified 1e-3 (``python -m benchmarks.scale --sizes d5000-m1e5``,
#: 1,536 inner iterations, k = 705) against 16 rounds and 650 CPU s (2,080, k = 693).
PRICE_GROWTH = 0.5
#: ... from a LOBPCG block this many columns wider (its leading Ritz pairs converge faster with
#: guard vectors beside them).
PRICE_GUARD = 8
#: LOBPCG iterations of the pricing per round (products through the data, O(n d) per column): the
#: Ritz pairs need only point into the negative eigenspace, and the proof's shift reads the smallest
#: one's residual, so a poor estimate costs bound, not validity. Measured at d = 5000 (10^5
#: quadruplets on 5,000 points, trace weight 1000, one BLAS thread) on the multipliers of round 5
#: (k = 162) and round 7 (k = 365): 20 iterations gave the smallest Ritz value of 40 to four digits
#: (-1.024e4, -4367; residual 3e-5 r and 6e-7 r) and new directions capturing the same negative
#: curvature of S off P to 0.02 % (sum of the negative eigenvalues of S compressed to them), in
#: 6.6 against 10.9 and 12.8 against 18.8 CPU s; 10 iterations captured 99 % of it.
PRICE_RITZ_STEPS = 20
#: A round's outer limit: the rounds stop (not converged) after this many.
MAX_ROUNDS = 50
#: :func:`subspace_pays` chooses the subspace rounds where one dense eigendecomposition of order d
#: (``COST_EIGH`` d^3 of :mod:`cvxmetric.hinge`: the step plain PDHG takes while its early iterates
#: are high rank) is modelled above this many seconds, and the rounds hand over to plain PDHG
#: (``fallback="auto"``) only where it is modelled at most this: one rule for where a full PDHG
#: step is cheap. Measured (one BLAS thread, CPU seconds to a certified 1e-3, the
#: ``benchmarks.scale`` instances on 2,000 points with 10^4 quadruplets): d = 1000 (eigh modelled
#: 0.18 s) plain PDHG 32.5 s (208 iterations) against 45.5 s for the subspace (3 rounds to k = 72,
#: then 336 iterations of the hand-over); d = 2000 (1.4 s) plain PDHG 75 s of wall time against
#: 154 s for the rounds alone (``fallback=False``: 13 rounds to k = 690); at d = 5000 (22 s) plain
#: PDHG did not certify within 1,800 s (its early iterates reach rank 784, each ``eigh`` ~16 s),
#: and the full PDHG the rounds handed over to at k = 365 (W of rank 148) did not certify within
#: 1,900 s (4.56 GB peak), while the rounds alone certify 1e-3 where the optimum is of low rank
#: (trace weight 1e4, rank 58: 13 rounds, 384 CPU s, 2.1 GB).
SUBSPACE_MIN_EIGH_SECONDS = 5.0


def subspace_applies(model: HingeModel) -> bool:
    """Whether :func:`subspace` solves ``model``: q = 0 and the linear term a positive multiple of
    the identity (the trace regularizer)."""
    if not isinstance(model, HingeModel) or model.q != 0:
        return False
    r = model._identity_multiple()
    return r is not None and r > 0


def subspace_pays(model: HingeModel) -> bool:
    r"""Whether :func:`subspace` is the solver of choice for ``model`` (a measured cost-model rule):
    it applies (:func:`subspace_applies`) and one dense eigendecomposition of order d, modelled at
    ``COST_EIGH`` d^3 seconds (:func:`cvxmetric.hinge.projection_costs`), exceeds
    ``SUBSPACE_MIN_EIGH_SECONDS`` (d above ~3,000): there the subspace rounds replace every
    full-space decomposition by products with the data and decompositions of order k."""
    return subspace_applies(model) and not full_steps_cheap(model)


def full_steps_cheap(model: HingeModel) -> bool:
    """Whether a step of plain PDHG on the full model is cheap: its dense eigendecomposition of
    order d, modelled at ``COST_EIGH`` d^3 seconds, is at most ``SUBSPACE_MIN_EIGH_SECONDS`` (d up
    to ~3,000). There plain PDHG is the solver of choice (:func:`subspace_pays`) and the tail of the
    subspace rounds (``fallback="auto"``); above it, neither."""
    return COST_EIGH * model.d ** 3 <= SUBSPACE_MIN_EIGH_SECONDS


def subspace(model: HingeModel, *, tol: float = DEFAULT_TOL, max_rounds: int = MAX_ROUNDS,
             max_iter: int = 100_000, time_limit: Optional[float] = None, fallback="auto",
             form_M: bool = True, seed=0, solver_name: str = "hinge-subspace", warn: bool = True) -> SolverResult:
    r"""Subspace generation with a matrix-free certificate for the trace-regularized hinge model.

    Parameters
    ----------
    model : HingeModel
        q = 0 and :math:`R = rI`, r > 0 (:func:`subspace_applies`); else a ValueError.
    tol : float
        The certified relative gap (:func:`cvxmetric.certificates.relative_gap`) the result is held to.
    max_rounds : int
        Outer rounds at most.
    max_iter : int
        PDHG iterations at most, over all rounds' restricted solves and the fallback (each solve
        gets what is left).
    time_limit : float, optional
        Wall-clock limit in seconds (checked between rounds, and passed on to each inner solve).
    fallback : bool or "auto"
        True: where the rounds reach their tail (W's rank stopped growing while the subspace grew)
        or the pricing stalls (no direction outside the subspace but the gap above ``tol``),
        continue with plain PDHG on the full model warm-started from the subspace's point and
        multipliers (``pdhg(model, M0=P W P^T, y0=y)``). False: the rounds go on until ``tol``, a
        stall or a limit. ``"auto"`` (default): True where a full PDHG step is cheap
        (:func:`full_steps_cheap`: d up to ~3,000), else False.
    form_M : bool
        Return ``M`` as a d x d array (formed once, at the end: 200 MB at d = 5000); False leaves
        ``M`` None, the point being ``info["factor"]`` F with :math:`M = FF^\top`.
    seed : int or Generator
        Seeds the random columns of the pricing's start block and the inner solves.
    solver_name : str
        Name recorded in the result.
    warn : bool
        Issue a :class:`~cvxmetric.exceptions.ConvergenceWarning` when not converged.

    Returns
    -------
    SolverResult
        Built by :func:`cvxmetric.solvers.result.make_result`: ``measure == "certified_gap"`` (the
        full problem's), ``objective`` :math:`f(PWP^\top)` of the full model through the factor
        (:meth:`~cvxmetric.models.HingeModel.value_factor`), ``lower_bound`` the best proven bound,
        ``multipliers`` its hinge multipliers (shape (m,)), ``n_iter`` the inner PDHG iterations of
        all rounds, ``history`` the objective per round, and ``info`` with ``rounds``,
        ``inner_iterations`` (per round), ``k`` and ``ranks`` (per round: the subspace and W's rank),
        ``factor`` (F, d x rank),
        ``basis`` (P) and ``W``, ``proofs`` (proven bounds), ``lambda_min_estimate`` (the last
        round's smallest Ritz value of S), ``fallback_iterations`` (0 where the fallback did not
        run), ``trace`` (per round: seconds, k, inner iterations, objective, smallest Ritz value,
        estimated bound, proven bound or None), ``stop_reason``.

    Notes
    -----
    The program is :math:`\min_{M \succeq 0} r\,\mathrm{tr}\,M + \sum_c c_c [\delta_c + \langle M,
    A_c\rangle]_+` with :math:`A_c = C_{ij} - C_{kl}`. Round j, with P (d x k) orthonormal:

    1. **Restricted problem.** :math:`\min_{W \succeq 0} r\,\mathrm{tr}\,W + \sum_c c_c[\delta_c
       + \langle W, P^\top A_c P\rangle]_+`, the model on the points XP
       (:meth:`~cvxmetric.models.HingeModel.restricted`), by :func:`~cvxmetric.solvers.pdhg.pdhg` to
       ``INNER_TOL_FRACTION * tol``, warm-started from the previous W padded with zeros, its
       multipliers, step size and primal weight.
    2. **Upper bound.** :math:`f(PWP^\top)` on the full model through the factor
       :math:`F = P W^{1/2}` (equal to the restricted objective).
    3. **Lower bound.** For every :math:`y \in [0, c]`,

       .. math::
           p^* \ge \delta^\top y + T \min(0, \lambda_{\min}(S)), \qquad S = rI + K^* y,

       with the trace bound :math:`T \ge \mathrm{tr}\,M^*` (:meth:`~cvxmetric.models.HingeModel.trace_bound`)
       (or the theta rule; :meth:`~cvxmetric.models.HingeModel.dual_bound`). On the subspace S is
       the restricted dual matrix, which the inner solve made nearly PSD; off it S may have negative
       directions. LOBPCG (``PRICE_RITZ_STEPS`` iterations, ``PRICE_BLOCK + PRICE_GUARD`` columns)
       on S through the data (:meth:`~cvxmetric.hinge.QuadrupletGeometry.adjoint_operator`,
       :math:`O(nd)` per column) gives its smallest Ritz pairs; where the estimated bound at the
       smallest Ritz value (:func:`~cvxmetric.solvers.pdhg.estimated_bound`, never below the
       provable one) would certify ``tol``, or in the last round, the bound is proven:
       :math:`K^* y` is formed once and one Cholesky factorization at a safe shift below the
       estimate proves :math:`\lambda_{\min}(S)` (:meth:`~cvxmetric.models.HingeModel.certify` with
       ``lambda_min_estimate``; :func:`cvxmetric.linalg.lambda_min_lower_bound`).
    4. **Pricing.** If the certified gap exceeds ``tol``: the Ritz vectors of the negative Ritz
       values (at most ``PRICE_BLOCK``, or ``PRICE_GROWTH`` k where all were negative, or the
       number of negative ones of the last pricing where more),
       orthogonalized against P, are appended to P. The first P
       holds those of S at the hinge subgradient of M = 0 (:math:`y_c = c_c` where
       :math:`\delta_c > 0`).

    5. **Tail.** Once W's rank stops growing while the subspace grows (the optimum's range is held;
       measured: at d = 1000 the rank settles at 40-57 while fixed blocks of 24 took the subspace to
       k = 600 over 25 rounds, each new block closing a little of the gap), the rounds hand over to
       PDHG on the full model from :math:`(PWP^\top, y)` (``fallback``), by default only where its
       steps are cheap (:func:`full_steps_cheap`).

    Every bound is proven on the full problem, whatever the subspace: the rounds only decide how
    soon it closes. Scale invariance: all weights times s (r and c) scale S, the tolerances of the
    pricing (relative to r) and the objective alike; X -> sX with r -> s^2 r maps M to M/s^2 and S
    to itself; so the rounds are the same.
    """
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    if not subspace_applies(model):
        raise ValueError("subspace needs q = 0 and a linear term r I with r > 0 (the trace regularizer); "
                         "use cvxmetric.solvers.pdhg.pdhg for other models")
    if model.m == 0:
        raise ValueError("model has no constraints; the subspace rounds need at least one hinge term")
    tol = check_positive(tol, "tol")
    max_rounds = check_int_in_range(max_rounds, "max_rounds", 1, 10**6)
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**9)
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    if isinstance(fallback, str) and fallback == "auto":
        fallback = full_steps_cheap(model)
    elif not isinstance(fallback, (bool, np.bool_)):
        raise TypeError(f'fallback must be True, False or "auto"; got {fallback!r}')
    rounds = _Rounds(model, tol, as_rng(seed), time_limit, max_iter, settle=fallback)
    stop_reason = rounds.run(max_rounds)
    if stop_reason == "stalled" and fallback and rounds.iterations_left() > 0:
        stop_reason = rounds.fall_back()
    return rounds.result(stop_reason, form_M, solver_name, warn)


class _Rounds:
    """The state of the subspace rounds (the pieces of :func:`subspace`, Notes, as small methods)."""

    def __init__(self, model: HingeModel, tol: float, rng: np.random.Generator, time_limit: Optional[float],
                 max_iter: int, settle: bool):
        self.model, self.tol, self.rng, self.time_limit, self.max_iter = model, tol, rng, time_limit, max_iter
        self.settle = settle         # stop the rounds once W's rank settles (rank_settled), for the fallback
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.r = float(model._identity_multiple())
        self.delta = np.asarray(model.constraints.delta, dtype=np.float64)
        self.coef = np.asarray(model.coef, dtype=np.float64)
        self.P = np.empty((model.d, 0))
        self.W = np.zeros((0, 0))
        self.y = np.where(self.delta > 0, self.coef, 0.0)   # the hinge subgradient of M = 0
        self.ritz = None             # the pricing's last Ritz vectors (the next start block)
        self.best_f, self.F = model.value_factor(np.zeros((model.d, 0))), np.zeros((model.d, 0))
        self.best_lb, self.cert_y = None, None
        self.inner_state = {}        # step size and primal weight of the last inner solve
        self.inner_iterations, self.ks, self.ranks, self.history, self.trace = [], [], [], [], []
        self.proofs, self.fallback_iterations, self.theta = 0, 0, None
        self.block = PRICE_BLOCK                 # directions the next round may add
        self.inner_tol = INNER_TOL_MAX           # the next restricted solve's tolerance
        self.est_gap = math.inf                  # the last round's estimated full gap
        self.fallback_M = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def out_of_time(self) -> bool:
        return self.time_limit is not None and self.elapsed() > self.time_limit

    def iterations_left(self) -> int:
        return self.max_iter - sum(self.inner_iterations) - self.fallback_iterations

    # ------------------------------------------------------------------ one round
    def run(self, max_rounds: int) -> str:
        """The rounds until the certified gap is at most ``tol``; the stop reason."""
        theta, V = self.price()
        if not self.grow(theta, V):    # S at the subgradient of 0 is PSD: M = 0 is optimal
            self.certify(final=True)
            return "converged" if self.gap() <= self.tol else "stalled"
        for _ in range(max_rounds):
            self.solve_restricted()
            theta, V = self.price()
            self.certify(final=False)
            if self.gap() <= self.tol:
                return "converged"
            if self.out_of_time() or self.iterations_left() <= 0:
                self.certify(final=True)
                return "time_limit" if self.out_of_time() else "max_iter"
            if self.settle and self.rank_settled():
                return "stalled"
            base = INNER_TOL_FRACTION * self.tol
            grew = self.grow(theta, V)
            if not grew and self.inner_tol <= base:
                self.certify(final=True)
                return "stalled"
            # a loose restricted solve leaves negative curvature inside the subspace: no new direction
            # then asks for a tighter one, not for the fallback
            self.inner_tol = base if not grew else min(max(INNER_GAP_FRACTION * self.est_gap, base), INNER_TOL_MAX)
        self.certify(final=True)
        return "max_iter"

    def rank_settled(self) -> bool:
        """Whether the rounds reached their tail: the subspace grew in the last round but W's rank
        did not (the optimum's range is held; what is left is the multipliers' accuracy off it,
        which new directions close one block at a time)."""
        return len(self.ranks) >= 2 and self.ks[-1] > self.ks[-2] and self.ranks[-1] <= self.ranks[-2]

    def solve_restricted(self) -> None:
        """Step 1 and 2 of a round: the restricted problem by PDHG, warm-started, and its point's
        full objective through the factor."""
        k = self.P.shape[1]
        sub = self.model.restricted(self.P)
        W0 = np.zeros((k, k))
        W0[:self.W.shape[0], :self.W.shape[0]] = self.W
        remaining = None if self.time_limit is None else max(self.time_limit - self.elapsed(), 1e-3)
        res = pdhg(sub, M0=W0, y0=self.y, tol=self.inner_tol, max_iter=self.iterations_left(),
                   time_limit=remaining, seed=self.rng, warn=False, **self.inner_state)
        self.inner_state = {"step_size": res.info["step_size"], "primal_weight": res.info["primal_weight"]}
        self.W, self.y = res.M, np.clip(res.multipliers, 0.0, self.coef)
        self.inner_iterations.append(res.n_iter)
        self.ks.append(k)
        L = psd_factor(self.W, rtol=RANGE_RTOL)
        self.ranks.append(L.shape[0])
        F = self.P @ L.T
        f = self.model.value_factor(F)
        self.history.append(f)
        if f < self.best_f:
            self.best_f, self.F = f, F

    def price(self) -> tuple:
        """Step 3's estimate and step 4's directions: LOBPCG's smallest Ritz pairs of the full dual
        matrix :math:`S = rI + K^* y` through the data (start: the last Ritz vectors, then random
        columns)."""
        d = self.model.d
        apply_Kt, r = self.model.geometry.adjoint_operator(self.y), self.r

        def apply_S(B):
            out = apply_Kt(B)
            out += r * B
            return out

        b = min(self.block + PRICE_GUARD, d // 3 if d >= 3 else d)
        start = self.ritz if self.ritz is not None else np.empty((d, 0))
        start = np.hstack([start[:, :b], self.rng.standard_normal((d, max(b - start.shape[1], 0)))])
        theta, V, self.estimate = smallest_ritz_pairs(apply_S, start, r, PRICE_RITZ_STEPS)
        if theta.size:
            self.ritz = V
        self.theta = float(self.estimate[0])
        return theta, V

    def certify(self, final: bool) -> None:
        """Step 3's proof, where the estimated bound certifies ``tol`` (or ``final``: the result's bound)."""
        T = self.model.trace_bound(self.best_f)
        dy = float(self.delta @ self.y)
        est = estimated_bound(dy, self.theta, T, self.r)
        self.est_gap = relative_gap(self.best_f, est)
        proven = None
        if (self.est_gap <= self.tol or final) and (self.best_lb is None or est > self.best_lb):
            self.proofs += 1
            KTy = self.model.geometry.weighted_sum(self.y)
            proven, y_used = self.model.certify(self.y, upper=self.best_f, Ky=KTy, repair_steps=0,
                                                lambda_min_estimate=self._proof_estimate(KTy))
            del KTy
            if proven is not None and (self.best_lb is None or proven > self.best_lb):
                self.best_lb, self.cert_y = proven, y_used
        self.trace.append((self.elapsed(), self.P.shape[1], self.inner_iterations[-1] if self.inner_iterations else 0,
                           self.best_f, self.theta, est, proven))

    def _proof_estimate(self, KTy: np.ndarray) -> tuple:
        """The smallest Ritz pair refined on the formed :math:`K^* y` (``PROOF_RITZ_STEPS`` LOBPCG
        iterations from the pricing's ``PROOF_BLOCK`` smallest Ritz vectors: a product costs d^2 per
        column there against 2nd through the data), the estimate of the proof's shift; the
        pricing's own where it has the smaller residual."""
        r = self.r

        def apply_S(B):
            out = KTy @ B
            out += r * B
            return out

        if self.ritz is None:
            return self.estimate
        estimate = smallest_ritz_pairs(apply_S, self.ritz[:, :PROOF_BLOCK], r)[2]
        return estimate if estimate[1] < self.estimate[1] else self.estimate

    def grow(self, theta: np.ndarray, V: np.ndarray) -> bool:
        """Step 4: append the Ritz vectors of the negative Ritz values (at most ``self.block``),
        orthogonalized against P (two passes of Gram-Schmidt); False where none is new. Where every
        Ritz value was negative, the next block is ``PRICE_GROWTH`` times the new k, else the number
        of negative ones (at least ``PRICE_BLOCK``)."""
        neg = V[:, theta < 0][:, :self.block] if theta.size else V[:, :0]
        wide = theta.size > 0 and bool(np.all(theta < 0))
        if neg.shape[1] == 0:
            return False
        new = orthonormal_columns(neg, against=self.P, drop_rtol=NEW_DIRECTION_RTOL)
        if new.shape[1] == 0:
            return False
        self.P = np.hstack([self.P, new])
        width = math.ceil(PRICE_GROWTH * self.P.shape[1]) if wide else neg.shape[1]
        self.block = max(PRICE_BLOCK, width)
        return True

    def gap(self) -> float:
        return relative_gap(self.best_f, self.best_lb)

    # ------------------------------------------------------------------ fallback and result
    def fall_back(self) -> str:
        """Plain PDHG on the full model from the subspace's point and multipliers."""
        remaining = None if self.time_limit is None else max(self.time_limit - self.elapsed(), 1e-3)
        res = pdhg(self.model, M0=self.F @ self.F.T, y0=self.y, tol=self.tol, max_iter=self.iterations_left(),
                   time_limit=remaining, seed=self.rng, warn=False)
        self.fallback_iterations = res.n_iter
        if res.objective < self.best_f:
            self.best_f, self.fallback_M = res.objective, res.M
        if res.lower_bound is not None and (self.best_lb is None or res.lower_bound > self.best_lb):
            self.best_lb, self.cert_y = res.lower_bound, res.multipliers
        return "converged" if self.gap() <= self.tol else res.status

    def result(self, stop_reason: str, form_M: bool, solver_name: str, warn: bool) -> SolverResult:
        M = None
        if self.fallback_M is not None:
            M = self.fallback_M
        elif form_M:
            M = self.F @ self.F.T
        n_iter = sum(self.inner_iterations) + self.fallback_iterations
        info = {"rounds": len(self.inner_iterations), "inner_iterations": list(self.inner_iterations),
                "k": list(self.ks), "ranks": list(self.ranks), "factor": self.F, "basis": self.P, "W": self.W, "proofs": self.proofs,
                "lambda_min_estimate": self.theta, "fallback_iterations": self.fallback_iterations,
                "trace": list(self.trace), "y": self.cert_y, "lower_bound": self.best_lb,
                "certified_gap": None if self.best_lb is None else self.gap(), "stop_reason": stop_reason,
                "cpu_seconds": time.process_time() - self.c0}
        detail = f"{info['rounds']} rounds, final k = {self.P.shape[1]}"
        return make_result(solver_name, objective=self.best_f, measure="certified_gap", tol=self.tol,
                           stop_reason=stop_reason,
                           M=M, lower_bound=self.best_lb, multipliers=self.cert_y, n_iter=n_iter,
                           history=self.history, time=self.elapsed(), info=info, detail=detail, warn=warn)


#: An eigenvalue of W at most this fraction of its largest is off its range (W is a PSD projection's
#: output: its other eigenvalues are zeros up to the round-off of a k x k eigendecomposition, ~k eps).
RANGE_RTOL = 1e-10
#: A priced direction is new when its length after orthogonalization against P is above this
#: (the Ritz vectors are unit vectors; below it the direction is in P up to round-off).
NEW_DIRECTION_RTOL = 1e-8
