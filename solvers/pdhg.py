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
:math:`K^* y` go through :class:`~cvxmetric.hinge.QuadrupletGeometry`, which picks by a measured
cost model between one difference vector per constraint (:math:`O(m d^2)`) and the constraints'
shared points (:math:`O(n d^2 + m d)`: :math:`Z = X M`, one dot product per endpoint pair,
:math:`K^* y = X^\top \mathcal{L}_y X`); :math:`K M^+` reads the projection's eigenpairs as a
factor of rank r (:math:`O(n d r + m r)`) where the model says it pays. :math:`K M^+` and
:math:`K^* y^+` are cached, so an iteration costs one ``eigh`` (the projection,
:func:`cvxmetric.linalg.project_psd`) plus one :math:`K` and one :math:`K^*`; the :math:`K^*` is an
update over the multipliers that changed (most multipliers at a bound stay there) where the model
prices that below a full product (``INCREMENTAL_ADJOINT``; recomputed in full at the next check).
**Low-rank projection.** Where the iterate has rank :math:`r \ll d`, a step need not form
:math:`K^* y` nor decompose a d x d matrix: the positive eigenpairs of the step matrix
:math:`A = (M - \tau(R + K^* y))/(1 + \tau q)` are tracked on a warm basis B of
:math:`k = r + \max(8, r/4)` columns (``LOWRANK_EXTRA_*``) by one block Rayleigh-Ritz step on
:math:`[B, AB]` per iteration (:func:`cvxmetric.linalg.rayleigh_ritz_positive`), with A applied
matrix-free: M through its factor :math:`V \mathrm{diag}(\lambda) V^\top`, R as a multiple of the
identity where it is one, :math:`K^* y` through the data and the sparse Laplacian
(:meth:`cvxmetric.hinge.QuadrupletGeometry.adjoint_operator`, :math:`O(n d k + P k)`). The Ritz
values never exceed the eigenvalues (Cauchy interlacing) and :math:`M^+ = V_+ \mathrm{diag}(\lambda_+)
V_+^\top` is PSD by construction, so every scored point is feasible; only the step is inexact
(measured with ``python -m benchmarks.scale --sizes d1000-m1e4``, with the matrix-free checks
below: d = 1000 with 10^4 quadruplets stops at a certified 6.4e-5 after 208 iterations, all
low-rank steps but the first few). The choice is made per step by the cost model
(:func:`cvxmetric.hinge.projection_costs`) at the current rank, and only where the dense step's
``eigh`` is a sizeable share of it (``LOWRANK_MIN_EIGH_SHARE``: at d = 50 a few early low-rank
steps lengthened the run by a fifth to a quarter) (``projection="auto"``), or forced. The cold
start's power iteration runs on :math:`K K^*` through the Gram matrix of the points where that is
cheaper (:meth:`cvxmetric.hinge.QuadrupletGeometry.normal_operator`).

**Row order.** On the points path with many constraints (``ROW_ORDER``) a cold start iterates on
the model with its rows sorted by the pair of their u half
(:meth:`cvxmetric.models.HingeModel.permuted`): K reads the u halves' pair values and K*
accumulates their weights as streams; the result's multipliers are in the given order.

**Matrix-free checks.** Where q = 0 and R = rI (the trace regularizer), and the cost model
(:func:`check_costs`) prices them below the dense checks (``checks="auto"``; from d ~ 700 with 2,000
points), a check never decomposes the d x d dual matrix :math:`S = rI + K'^* y'`. Both points are
scored from Ritz values of S (``CHECK_RITZ_STEPS`` block Rayleigh-Ritz steps on :math:`-S` through
the data, on the tracked negative eigenspace; :math:`\langle S, M\rangle = \langle R, M\rangle +
y'^\top K' M` exactly), and one bound is proven: the point with the larger estimated bound forms its
:math:`K'^* y'` once, LOBPCG refines its smallest Ritz pair, and a Cholesky factorization at a safe
shift below it proves :math:`\lambda_{\min}(S)` (:func:`cvxmetric.linalg.lambda_min_lower_bound`: a
poor estimate gives a weaker bound, never an invalid one), where the estimate would certify ``tol``
or within ``PROOF_BUDGET``. The targeted repair and the polish (both read d x d spectra) do not
run there: the proven bound is within the shift of :math:`\delta^\top y` (:meth:`PDHGState._certify_matrix_free`).

The state of the method is a :class:`PDHGState` (step, check, restart, result). The practical
ingredients of PDLP (Applegate et al., 2021) and its KKT-restart variant (cuPDLP, Lu & Yang, 2023):

* **row scaling** — constraint :math:`c` is divided by :math:`\|A_c\|_F` (a diagonal dual
  preconditioner);
* **congruence equilibration** (q = 0) — the primal variable is a matrix under a Frobenius prox
  onto the PSD cone, so its diagonal preconditioner is a congruence :math:`M = D M' D` (D
  diagonal, positive: it maps the cone onto itself), which scales column :math:`(a, b)` of
  :math:`K` by :math:`D_a D_b` and turns R into :math:`DRD`. :func:`equilibration` picks D by
  Ruiz passes over the diagonal columns (powers of two: the twin is exact) and iterates on the
  twin (:meth:`cvxmetric.models.HingeModel.congruent`) where the features' scales spread by
  orders of magnitude (raw data in mixed units: the entries of :math:`A_c` then span many orders
  and the row-scaled operator is nearly blind to the features in small units). The result is
  mapped back exactly: same rows, multipliers and bound, ``M`` = :math:`D M' D`. Not with
  :math:`q > 0` (:math:`\|D M' D\|_F \ne \|M'\|_F`) nor on a state continued by a caller
  (:func:`start_state`: working sets);
* **adaptive step size** — a step is accepted when
  :math:`\eta \le \|\Delta z\|_\omega^2 / (2 |\langle K \Delta M, \Delta y\rangle|)`, with
  :math:`\|\Delta z\|_\omega^2 = \omega\|\Delta M\|_F^2 + \|\Delta y\|^2/\omega`, and the next
  :math:`\eta` is :math:`\min((1 - (k+1)^{-0.3})\,\eta_{\max}, (1 + (k+1)^{-0.6})\,\eta)`; the first
  :math:`\eta` is :math:`0.99/\|K\|_2`, estimated by ``POWER_ITERATIONS`` power iterations (on a
  seeded sample of the rows where they are many, ``NORM_SAMPLE_*``);
* **adaptive restarts to the average** — every ``check_every`` iterations the current iterate and
  the step-weighted average since the last restart are scored by a KKT error (below); the better
  one is the restart candidate, adopted when its error fell below 0.2x the error at the last
  restart (sufficient decay), or below 0.8x and it stopped improving (necessary decay), or when
  the restart cycle is longer than 0.36x the iterations so far (artificial restart);
* **primal weight balancing** — at a restart,
  :math:`\omega \leftarrow \exp(\tfrac12 \log(\|\Delta y\| / \|\Delta M\|_F) + \tfrac12 \log \omega)`
  with the moves since the previous restart; the first ``PRIMAL_WEIGHT_WARMUP`` measured ratios
  replace :math:`\omega` outright (the a-priori weight can be off by orders of magnitude: 0.8
  against a settled ~200 at d = 50, 26 against ~6.5 at d = 500, and halving the error in
  :math:`\log\omega` per restart spends the first cycles at the wrong balance).

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
  there), over all scored points. At a check where the candidate improved (``REPAIR_DECAY``) or the
  residual test holds, the candidate's multiplier is first made complementary to its point
  (:meth:`~cvxmetric.models.HingeModel.complementary_multipliers`, q = 0: the least change of the
  multipliers nearest their margin that solves :math:`S V = 0` on the range V of M, in the box),
  which near a solution makes S exactly PSD, so the bound is :math:`\delta^\top y` within the
  primal error of p*; a polish that failed is corrected where its value could certify
  (``POLISH_CORRECT_GAP``: a larger free set where the equations ran out of free multipliers,
  the range widened where S is indefinite off it); the targeted repair runs where that does not
  apply, failed or gained nothing, and only where its bound could certify ``tol``
  (``REPAIR_ONLY_IF_IT_CAN_CERTIFY``).

**Stopping rule and verdict.** ``tol`` is what ``converged`` is held to; ``residual_tol`` (default
``RESIDUAL_TOL_FRACTION * tol``) is the tolerance of the residual test. The iteration stops when the
certified gap is at most ``min(residual_tol, tol)``, or when the relative dual residual and restart
error are at most ``residual_tol`` and the certified gap is at most ``tol`` (the certificate
repairs the dual feasibility of an approximate
multiplier, so it can lag the true gap: on syn-d50-m10000, with the repair alone, the residual
test held at a true gap of ~3e-6 while the certificate still read ~2e-3; the complementarity
polish closes most of that lag, and the stop then waits for the objective). The result's measure is the certified gap, held
to ``tol``, wherever the model always has a bound (q > 0, R positive definite on the
data span, or a trace bound: ``HingeModel.has_certificate``) or a bound within ``tol``
was found; otherwise (q = 0, R singular on the data span, and no repaired multiplier exactly dual
feasible) it is the relative KKT residual :math:`\max(r_d^{rel}, e^{rel})` of the returned point,
held to ``tol`` as well (both are relative measures of the point's first-order accuracy).
Hitting ``max_iter``/``time_limit`` first gives
``converged=False`` and a :class:`~cvxmetric.exceptions.ConvergenceWarning`.

The best lower bound and the best objective over all scored points are kept; the returned
``M`` is the PSD point with the lowest objective among those scored, ``multipliers`` the hinge
multipliers (in :math:`[0, c]`) of the best bound.

Scale invariance: the row scaling makes :math:`K'` invariant under X -> sX (so are the equilibration's
factors, computed on the row-scaled operator); the initial primal
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
from cvxmetric.hinge import (COST_EIGH, COST_GEMM, COST_SPARSE, GATHER_CHUNK, LOWRANK_MIN_EIGH_SHARE, normal_costs,
                             projection_costs)
from cvxmetric.hinge_certificates import COST_CHOLESKY, COST_EIGVALSH, POLISH_FREE_FACTOR, REPAIR_STEPS, polish_corrected
from cvxmetric.linalg import project_psd, rayleigh_ritz_positive, symmetrize
from cvxmetric.models import HingeCongruence, HingeModel

from .result import SolverResult, make_result

__all__ = ["pdhg", "start_state", "PDHGState", "estimate_operator_norm", "estimate_norm_from_normal", "PROJECTIONS",
           "CHECKS", "check_costs", "matrix_free_checks",
           "equilibration", "estimated_bound", "smallest_ritz_pairs", "DEFAULT_TOL", "RESIDUAL_TOL_FRACTION", "CHECK_EVERY", "POWER_ITERATIONS",
           "POWER_ITERATIONS_CONSTANT_STEP",
           "EQUILIBRATION_MIN_SPREAD", "EQUILIBRATION_MAX_SPREAD",
           "EQUILIBRATION_SAMPLE_ROWS", "EQUILIBRATION_SAMPLE_SHARE"]

#: ``tol``: the certified relative gap a result is held to (``converged``; the KKT residual where no
#: certificate exists), and required before the residual test may stop the method: the harness'
#: first-order gap threshold (cvxmetric.verification.tolerances.GAP_FIRST_ORDER). Measured:
#: syn-d50-m10000 certifies 8.5e-4 after 304 iterations; digits' LMNN (constraint generation) 1.0e-2
#: after 1,856.
DEFAULT_TOL = 1e-3
#: ``residual_tol`` defaults to this fraction of ``tol``: the relative dual residual and restart error
#: the residual test asks for (and a certified gap this small stops at once). The certificate lags
#: the true gap (module docstring), so the residuals are asked for a tenth of it: at the default
#: 1e-4, measured relative gaps to p* of 1e-6-1e-4.
RESIDUAL_TOL_FRACTION = 0.1
#: Iterations between two restart/termination checks (cuPDLP uses 64; our checks are cheap: a few
#: d x d eigendecompositions, plus the certificate's repair passes while the bound is loose).
CHECK_EVERY = 16
#: Power iterations for the estimate of ||K||_2 (it only sets the first step size, which the
#: adaptive rule corrects). 15 estimate 0.96-0.98 of ||K||_2. Not adopted: 8 (0.94-0.95; the same
#: iterations at the scale benchmark's sizes, but one more certificate polish on digits' LMNN, 0.47 s
#: -> 0.85 s); Lanczos (256-272 iterations instead of 240 at d = 500 and 1000).
#: Not adopted either: 3 steps on the Gram path at large d (a step of the normal operator over the
#: multipliers costs 0.2 s of CPU at d = 1000, seconds at d = 5000). Measured with the matrix-free
#: checks on the instances of ``benchmarks.scale`` (one run each): d = 1000, 15 / 5 / 3 steps estimate
#: 2.38 / 2.22 / 2.10 and take 208 / 192 / 192 iterations; d = 2000, 15 / 3 steps take 240 / 384
#: iterations (a certified 1e-3 after 192 / 320).
POWER_ITERATIONS = 15
#: With the adaptive rule and at least ``NORM_SAMPLE_SHARE`` as many rows as a sample of
#: ``NORM_SAMPLE_PER_ENTRY`` rows per entry of a symmetric d x d matrix (d(d+1)/2 of them), the power
#: iteration runs on such a seeded uniform sample of the rows of K', its estimate scaled by
#: sqrt(m / sample): the rows of K' have unit norm, :math:`\|K'\|_2^2 = \|\sum_c a_c a_c^\top\|_2`, and
#: the sample's sum times m / sample is an unbiased estimate of that sum (its top eigenvalue a little
#: above, from the sample's noise: a slightly smaller first step, which the adaptive rule grows).
#: Measured with ``python -m benchmarks.scale --sizes d50-m1e6`` (one BLAS thread, 15 power
#: iterations each): all 10^6 rows 41.3 in 1.15 CPU s; samples of 10^4 / 3 x 10^4 / 10^5 rows
#: 44.8 / 42.8 / 41.6 in 0.04 / 0.09 / 0.24 s. At 10^7 rows the power iteration on all of them took
#: 48 CPU s.
NORM_SAMPLE_PER_ENTRY = 24
NORM_SAMPLE_SHARE = 4
#: ... and without the adaptive rule, where nothing corrects a step above 1/||K||_2 (the estimate
#: is a lower one): measured on syn-d5 (400 quadruplets), 8 / 15 / 30 steps read 0.973 / 0.998 /
#: 1.000 of ||K||_2 (0.99 / estimate is above 1/||K||_2 after 8).
POWER_ITERATIONS_CONSTANT_STEP = 50
#: Each step updates :math:`K'^* y` by the product over the multipliers that changed (their
#: difference vectors), where the cost model prices that below a full product (late steps change
#: few: most multipliers at a bound stay there); a check after such steps recomputes the current
#: point's and the average's K'* y as full products, so scores and certificates read products, not
#: chains of updates. Measured on syn-d50-m10000 (one BLAS thread): 9-11 % of the multipliers change
#: per step from iteration 32 on, K'* over them 0.6 ms against 2.8 ms; the solve 1.21 -> 0.81 s at
#: the same 144 iterations and certified gap (to 1e-11). On the points path the update reads the
#: changed rows' pairs in the table of all rows (:meth:`cvxmetric.hinge.PairTable.pairs_form`).
#: Measured (d = 50 on 2,000 points, one BLAS thread, CPU seconds at load ~10, on / off): 10^5
#: constraints 68 of 112 steps take the update (6,800 rows each), 3.24 / 3.35 s; 10^6, 40 of 128
#: (44,000 rows each: 87-99 % of the multipliers change per step up to iteration ~60, 0.5 % at the
#: end), 16.0 / 15.9 s (the checks after update steps recompute two full products). At d = 500 and
#: 1000 (~80 % change) none. False: always the full product (ablations).
INCREMENTAL_ADJOINT = True
#: On the points path with at least this many constraints, a cold start iterates on the model with
#: its rows sorted by the pair of their u half (:meth:`cvxmetric.hinge.QuadrupletGeometry.pair_order`,
#: :meth:`cvxmetric.models.HingeModel.permuted`: the same pair table, the multipliers mapped back at
#: the result): every step reads the pair values of the u halves (K) and accumulates their weights
#: (K*) as streams instead of random accesses. Below, the per-pair arrays (8 bytes a pair) fit in a
#: 2 MB L2 cache and the order hardly matters: measured (one BLAS thread, a gather and a scatter-add of m
#: rows over 1.26-1.8 m pairs, random / sorted) 0.14 / 0.08 and 0.24 / 0.20 ms at m = 10^5, 7.0 / 0.9
#: and 8.1 / 2.0 ms at 10^6. False: the caller's order (ablations).
ROW_ORDER = True
ROW_ORDER_MIN_ROWS = 2 ** 18
#: The targeted repair of the certificate (a few dozen passes over the constraints, see
#: :meth:`cvxmetric.models.HingeModel.dual_bound`) runs at a check only when the candidate's relative
#: restart error fell by this factor since the last repair (or the residual test holds): a point
#: that barely moved gives a bound that barely moved. Measured on syn-d50-m10000: 9 repairs instead
#: of 19, the repairs were 2/3 of the time, same iterations and certified gap.
REPAIR_DECAY = 0.5
#: ... and only while the modelled cost of the repairs (REPAIR_STEPS steps, each two passes of
#: ``values_rank_one`` over the negative directions of the dual matrix and the support of y, one
#: K* and one eigendecomposition of order d; the cost model of :mod:`cvxmetric.hinge`) stays within
#: this multiple of the modelled cost of the iterations so far. The repairs never change the iterates, only when the certificate is seen:
#: measured (one run each, d = 50), the default stop came at the same iteration with budgets 1, 0.25
#: and 0 (10^4: 336 iterations, 11/5/3 repairs, 16.9/13.4/10.5 s; 10^5: 320, 8/3/1 repairs,
#: 75/45/26 s on a loaded machine), because the certificate reaches ``tol`` only once the residual test
#: holds, and then the repair runs at every check regardless. The budget keeps a bound for runs cut
#: short by ``time_limit``/``max_iter`` at a quarter of the iteration cost.
REPAIR_BUDGET = 0.25
#: ... and only where its bound could certify ``tol``: the repair only shrinks multipliers, and no
#: bound of a multiplier y exceeds :math:`\delta^\top y` (weak duality at M = 0), so a candidate
#: whose :math:`\delta_+^\top y` is further than ``tol`` below the best objective is not repaired
#: (:meth:`PDHGState._repair_may_certify`). A run cut short by a limit keeps the bounds of its
#: plain certificates and polishes. Measured with ``python -m benchmarks.scale`` (one BLAS thread;
#: the same iterations and certified gaps): at 10^7 quadruplets the repair at iteration 128 (a
#: bound 8.8e-3 below, 51 s) was skipped, build + seconds to a certified 1e-3 308 -> 254 s;
#: d500-m1e4's one repair (0.7 s) was skipped; the other sizes ran none. False: repair wherever
#: the budget allows (ablations).
REPAIR_ONLY_IF_IT_CAN_CERTIFY = True
#: Certify through the complementarity polish of the candidate's multiplier
#: (:meth:`cvxmetric.models.HingeModel.complementary_multipliers`) where it applies, before the
#: targeted repair (which then runs only if the polish failed, i.e. left the dual matrix
#: indefinite beyond ``residual_tol``, or gained nothing, and the budget allows it); the schedule and budget
#: above are shared. False restores the repair alone (ablations). Measured on
#: syn-d50-m10000 (one run, one BLAS thread): 336 -> 224 iterations to a certified 1e-4, one polish
#: (0.3 s) instead of five repairs (0.9 s); the polished bound was within 5e-5 of p* from iteration
#: 144 on, where the repaired one read 1e-2 (the stop then waits for the objective).
POLISH_CERTIFICATE = True
#: A polish that failed is corrected (:func:`cvxmetric.hinge_certificates.polish_corrected`: a larger
#: free set, a wider range; each one more solve) only where the value of its first solve,
#: :math:`\delta^\top y`, is within this many ``tol`` of the best objective: its corrections move only
#: the free multipliers, and a bound above that value is impossible. Measured with ``python -m
#: benchmarks.scale --sizes d50-m1e6`` (the candidates of two runs, relative objective errors 1e-5 and
#: 1e-5): values 1.5e-3 and 1.7e-3 below it became certificates of 1.7e-4 and 2.7e-4 after the
#: corrections (in 0.6-0.8 s); one 4.0e-3 below stayed 1.4e-3 below after three solves (1.5 s, no
#: certificate).
POLISH_CORRECT_GAP = 2.0
#: The free multipliers per equation of the next polish: those of the last polish's final solve
#: where it made the dual matrix PSD or ran out of free multipliers again
#: (:func:`cvxmetric.hinge_certificates.polish_corrected` grows the free set where the equations ran
#: out of them; a check starts where the last one ended instead of climbing the same steps), or
#: ``POLISH_FREE_FACTOR`` again where that no longer fits.
#: Once the residual test holds (the stop then waits for the certificate) the polish runs where its
#: modelled cost is at most this multiple of the modelled cost of the iterations so far: what a
#: polish that certifies saves is the certificate's lag, measured at half the run (syn-d50-m10000:
#: 336 -> 224 iterations to a certified 1e-4), and a polish costing more than that cannot pay.
#: Measured (one BLAS thread): syn-d50-m10000's polish at its residual test, modelled 0.2 s against
#: a worth of 0.43 s, runs (144 iterations, certified 6.9e-5); LMNN (``python -m
#: benchmarks.lmnn_scale --peers none``, the final working set's polish) at d = 100 on 20,000
#: points modelled 15.1 s (measured 13.4 CPU s) against 12.5 s, at d = 150 on 3,000 points 121 s
#: (measured 64 CPU s) against 2.6 s: both declined (by the memory cap as well), the run's CPU
#: seconds 68 -> 54 and 92 -> 26 at the same 32 and 64 iterations, certified 5.9e-3 and 9.4e-3 (tol 1e-2).
POLISH_WORTH = 0.5
#: The projection paths of a step (:func:`pdhg`'s ``projection``): by the cost model, or forced.
PROJECTIONS = ("auto", "dense", "lowrank")
#: Columns of the tracked basis of the low-rank projection beyond the iterate's rank r: at least
#: ``LOWRANK_EXTRA_MIN`` and ``LOWRANK_EXTRA_FRACTION * r`` (directions about to enter the cone
#: are found there; a Rayleigh-Ritz step on [B, AB] returns up to 2k Ritz pairs, so the rank can
#: grow by k per step).
LOWRANK_EXTRA_MIN = 8
LOWRANK_EXTRA_FRACTION = 0.25
#: The paths of a check (:func:`pdhg`'s ``checks``): by the cost model (:func:`check_costs`), or forced.
CHECKS = ("auto", "dense", "matrix_free")
#: Matrix-free checks: block Rayleigh-Ritz steps (:func:`cvxmetric.linalg.rayleigh_ritz_positive` on
#: :math:`-S`) per scored point on the tracked negative eigenspace of the dual matrix S, applied
#: through the data; warm-started from the previous check's Ritz vectors.
CHECK_RITZ_STEPS = 3
#: ... at most this many more on the point whose bound is proven, stopping once the smallest Ritz
#: pair's residual norm is at most ``PROOF_RESIDUAL_RTOL`` times the linear term's scale r (the safe
#: shift then loses at most about that, relative, on the trace bound; the Cholesky proof holds
#: whatever the residual).
PROOF_RITZ_STEPS = 20
PROOF_RESIDUAL_RTOL = 1e-6
PROOF_BLOCK = 8
#: A matrix-free check proves its bound (one K'* y of order n d^2 and a Cholesky factorization of
#: order d: ~15 s at d = 5000, against ~0.3 s per low-rank step) when the estimated bound would
#: certify the run's ``tol`` (the proven gap is never below the estimated one, so a check whose
#: estimate is above tol cannot certify), or else while the modelled cost of the proofs stays within
#: this multiple of the modelled cost of the iterations so far (a run cut short by its time limit
#: still has a bound). At d = 1000 a proof costs about one check interval's worth of steps: every
#: check proves.
PROOF_BUDGET = 0.5
#: Columns of the tracked negative eigenspace: at most this many (early iterates have many negative
#: directions; the scores then read the most negative ones only).
CHECK_BLOCK_MAX = 64
#: Gaussian columns of the sketch of :math:`\|K'^* y'\|_F` (the scale of the relative dual
#: residual) on the matrix-free path: :math:`\|K'^* y' \Omega\|_F^2 / p` (seeded) is an unbiased
#: estimate of its square.
CHECK_SKETCH = 8
#: The best objective is read, at every check, on the ray of the scored point with the lower
#: objective (the current iterate or the average): :math:`\min_\alpha f(\alpha M)` (q = 0,
#: :meth:`cvxmetric.models.HingeModel.ray_minimum`, one selection over the m margins), a PSD point
#: whose value is as much an upper bound as the point's own. The iterates are unchanged; only the
#: certified gap closes sooner where the bound leads the objective. Measured with ``python -m
#: benchmarks.scale --sizes d1000-m1e4`` (trace): at iteration 128 the bound was within 4e-4 of p*
#: while the iterate read f = 13.5 against p* = 8.408, and its best multiple 8.50. The other
#: point's ray costs as much (60 ms at 10^6 quadruplets) and seldom holds more: on the scale
#: benchmark's d50-m1e4 / m1e5 / m1e6 / d500-m1e4 it beat the best objective at 1 / 1 / 1 / 2 of
#: 8 / 7 / 8 / 11 checks (the first check of each, and d500's last by 1.2e-5 of the objective),
#: the same iterations either way. False: the scored points only (ablations).
BEST_ON_RAY = True
#: Restart thresholds of cuPDLP: sufficient decay, necessary decay, artificial restart fraction.
BETA_SUFFICIENT = 0.2
BETA_NECESSARY = 0.8
BETA_ARTIFICIAL = 0.36
#: Smoothing of the primal-weight update at restarts (PDLP's theta).
PRIMAL_WEIGHT_SMOOTHING = 0.5
#: The first this many measured weight ratios are adopted in full (no smoothing): the a-priori
#: weight is only a guess of scale. Measured on the scale benchmark's sizes (iterations to the
#: certified tolerance, 0 -> 2): d = 50 with 10^4 / 10^5 / 10^6 quadruplets 224 -> 144 / 160 -> 112
#: / 192 -> 128, d = 500 256 -> 240, d = 1000 304 -> 240; 1 helped less at d = 50 (208 / 144 / 144
#: iterations), 3 no more (128 at 10^5).
PRIMAL_WEIGHT_WARMUP = 2
#: A constraint row counts as empty (A_c = 0: both pairs degenerate or equal) when its Frobenius
#: norm is at most this times the largest row norm; round-off of u u^T - v v^T is ~1e-16 of it.
EMPTY_ROW_RTOL = 1e-12
#: The primal weight is rebalanced at a restart only when both moves since the last restart exceed
#: this fraction of the size of the iterates (a zero move carries no information on the balance).
MOVE_RTOL = 1e-12

#: Ruiz passes of the congruence equilibration (:func:`equilibration`), each O(m d). Measured with
#: Qwise_Supervised's defaults on raw breast_cancer, PDHG from M = 0 (``solve_qwise(...,
#: barrier_start=False)``; iterations, one run each; the count swings with
#: the rounding of single factors): 4 passes 8,400, 8 passes 5,008 (capped, below), 16 passes 12,512.
EQUILIBRATION_PASSES = 8
#: ... and they stop once the factors of a pass move within this factor of one another (half a
#: binary order: the factors are rounded to powers of two, and a common factor is a rescaling,
#: which the iterates are equivariant to): well-scaled data stop after the first pass.
EQUILIBRATION_SETTLED = math.sqrt(2.0)
#: Ruiz's column norms are sums over the rows: with at least ``EQUILIBRATION_SAMPLE_SHARE`` times
#: this many rows they are estimated on a seeded sample of this many (the sums scaled by m over the
#: sample). A factor moves as the fourth root of its norm and is rounded to a power of two, so a
#: norm off by a few percent moves a factor at most to the neighbouring power of two, and only near
#: a rounding boundary; a feature no sampled row touches takes all rows (its norm would read 0).
#: Measured at 10^6 quadruplets on 2,000 points, d = 50 (five seeds): well-scaled 0.28 -> 0.03 s,
#: features in units 10^-3 ... 10^3 1.8 -> 0.12 s, the rounded factors those of all rows; at
#: 3 x 10^5 rows, d = 20, two seeds in five stopped one pass later (the factors moved by a nearly
#: common 2^-1.25, a rescaling the iterates are equivariant to).
EQUILIBRATION_SAMPLE_ROWS = 2 ** 16
EQUILIBRATION_SAMPLE_SHARE = 4
#: The congruence is used only when the equilibrating factors spread by more than this (largest
#: over smallest, after rounding): it balances the operator's columns but turns an isotropic linear
#: term (the trace) into a weighted one, which costs where the features share their units.
#: Measured with Qwise_Supervised's defaults, PDHG from M = 0 (iterations plain / equilibrated): spread 2^2-2^6 on
#: iris raw 96 / 208, digits raw 400 / 848, digits minmax 256 / 336 (worse); 2^11 on wine raw
#: 59,600 / 496 and 2^13 on breast_cancer raw 89,328 / 5,008 (features in units 10^-3 to 10^3).
EQUILIBRATION_MIN_SPREAD = 2.0 ** 8
#: The factors are capped at this spread: the twin's linear term D R D then has a condition number
#: at most its square times R's (2^26 ~ 7e7, within the certificate's positive-definiteness test
#: PD_RTOL = 1e-10 of cvxmetric.hinge_certificates for a well-conditioned R). Uncapped, breast_cancer raw
#: spread 2^17 and its twin's trace term lost the certificate (its R' read as singular).
EQUILIBRATION_MAX_SPREAD = 2.0 ** 13

#: The iteration stops ("stalled", not converged) once :math:`\|M\|_2` of an iterate exceeds this:
#: its squares (the Frobenius norms and scores) would leave float64 (largest ~2^1024), and an
#: iterate this far from every data scale (``as_data_matrix`` keeps the data within 2^130, so
#: :math:`A_c` within 2^261) has diverged. Measured: a Fantope bound (R of rank 2 in d = 4) on
#: iris standardized and scaled by 1e-30 grew to 1e191 within 5,000 steps.
ITERATE_MAX = 2.0 ** 500


def _ratio(num: float, den: float) -> float:
    """``num / den`` for a residual ``num >= 0`` and its scale ``den`` (0/0 = 0, x/0 = inf)."""
    if num == 0.0:
        return 0.0
    return num / den if den > 0 else math.inf


def check_costs(n_points: int, n_pairs: int, d: int, k: int, kt_dense: float) -> dict:
    r"""Modelled seconds of one check (the current point and the average) on each path.

    Parameters
    ----------
    n_points, n_pairs : int
        Points and distinct pairs of the pair table (products with :math:`K^* y` through the data).
    d : int
        Dimension.
    k : int
        Columns of the tracked negative eigenspace of the dual matrix.
    kt_dense : float
        Modelled seconds of one full :math:`K^* y` as a d x d matrix
        (:meth:`cvxmetric.hinge.QuadrupletGeometry.product_cost`).

    Returns
    -------
    dict
        ``{"dense": s, "matrix_free": s}``. Dense: :math:`K^* y` of both points and three
        ``eigvalsh`` of order d (both dual matrices, the average's :math:`\|M\|_2`). Matrix-free:
        ``2 CHECK_RITZ_STEPS + PROOF_RITZ_STEPS`` block Rayleigh-Ritz steps of two products with k
        columns through the data (:math:`2 n d` multiply-adds and the sparse Laplacian per column),
        one :math:`K^* y` and one Cholesky factorization of order d (the proof of one bound).
    """
    per_col = 2 * n_points * d * COST_GEMM + (n_points + 2 * n_pairs) * COST_SPARSE
    ritz = (2 * CHECK_RITZ_STEPS + PROOF_RITZ_STEPS) * 2 * k * per_col
    return {"dense": 2.0 * kt_dense + 3.0 * COST_EIGVALSH * d ** 3,
            "matrix_free": kt_dense + COST_CHOLESKY * d ** 3 + ritz}


def matrix_free_checks(model: HingeModel, checks: str = "auto") -> bool:
    """Whether PDHG's checks on ``model`` read the dual matrix through the data
    (:meth:`PDHGState._score_matrix_free`, :meth:`PDHGState._certify_matrix_free`): forced by
    ``checks``, or where the cost model (:func:`check_costs`) prices them below the dense checks.
    They apply where every rule of the certificate reads the smallest eigenvalue of the dual matrix
    alone: q = 0 and R a positive multiple of the identity (the trace regularizer; the certificate
    then works on the whole space); ``checks="matrix_free"`` elsewhere is a ValueError."""
    if not isinstance(checks, str) or checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}; got {checks!r}")
    R = np.asarray(model.R, dtype=np.float64)
    applies = (model.q == 0 and R[0, 0] > 0 and np.array_equal(R, R[0, 0] * np.eye(model.d))
               and model._span().U is None and model._span().R_scale is not None)
    if checks == "matrix_free" and not applies:
        raise ValueError("checks='matrix_free' needs q = 0 and R a positive multiple of the identity "
                         "(the trace regularizer); use checks='dense' or 'auto'")
    if checks != "auto" or not applies:
        return checks == "matrix_free"
    geom = model.geometry
    halves = geom.u_rows.size + geom.v_rows.size
    k = LOWRANK_EXTRA_MIN + max(LOWRANK_EXTRA_MIN, math.ceil(LOWRANK_EXTRA_FRACTION * LOWRANK_EXTRA_MIN))
    costs = check_costs(min(geom.X.shape[0], 2 * halves), halves, geom.d, min(geom.d, k), geom.product_cost("Kt"))
    return costs["matrix_free"] < costs["dense"]


def estimated_bound(dy: float, theta: float, T: Optional[float], r: float) -> float:
    r"""The bound the certificate's rules (q = 0, R = rI; :meth:`~cvxmetric.models.HingeModel.dual_bound`)
    would give for a multiplier with :math:`\delta^\top y` = ``dy`` if :math:`\lambda_{\min}(S)` were
    ``theta``: :math:`\delta^\top y` where :math:`\theta \ge 0`, else the larger of the trace rule
    :math:`\delta^\top y + T\theta` (trace bound ``T``, None where there is none) and the theta rule
    :math:`\delta^\top y\, r / (r - \theta)`. Each rule increases with :math:`\lambda_{\min}`, and a
    Ritz value is never below it, so at a Ritz value this is at least the bound a proof can give:
    a proof is worth its cost only where this estimate certifies."""
    if theta >= 0.0:
        return dy
    return max(dy + T * theta if T is not None else -math.inf, dy * r / (r - theta) if dy > 0 else 0.0)


def smallest_ritz_pairs(apply_S: Callable, X0: np.ndarray, r: float, max_steps: int = PROOF_RITZ_STEPS) -> tuple:
    r"""LOBPCG's smallest Ritz pairs of a symmetric S given by its products, and the estimate that
    chooses the safe shift of the proof of :math:`\lambda_{\min}(S)`
    (:func:`cvxmetric.linalg.lambda_min_lower_bound`).

    Parameters
    ----------
    apply_S : callable
        ``apply_S(B)`` = :math:`S B` for (d, k) blocks (a formed d x d matrix, or through the data).
    X0 : ndarray, shape (d, k)
        Start block (e.g. the previous Ritz vectors).
    r : float
        The scale of S's linear term (R = rI): LOBPCG stops once every residual norm is at most
        ``PROOF_RESIDUAL_RTOL * r``, or after ``max_steps`` iterations.

    Returns
    -------
    theta : ndarray
        The Ritz values, ascending (empty where LOBPCG failed).
    X : ndarray, shape (d, theta.size)
        Their Ritz vectors.
    estimate : (float, float)
        :math:`(x^\top S x, \|S x - (x^\top S x) x\|)` of the unit smallest Ritz vector x (of the
        start block's first column where LOBPCG failed): the ``lambda_min_estimate`` of
        :meth:`~cvxmetric.models.HingeModel.certify`. It only chooses the shift: a poor one gives a
        weaker bound, never an invalid one.
    """
    import warnings

    from scipy.sparse.linalg import LinearOperator, lobpcg

    d = X0.shape[0]

    def matmat(B):
        return apply_S(B.reshape(d, -1))

    op = LinearOperator((d, d), matvec=matmat, matmat=matmat, dtype=np.float64)
    theta, X, x = np.zeros(0), X0[:, :0], X0[:, 0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theta, X = lobpcg(op, X0, largest=False, maxiter=max_steps, tol=PROOF_RESIDUAL_RTOL * r)
        order = np.argsort(theta)
        theta, X = theta[order], X[:, order]
        x = X[:, 0]
    except (np.linalg.LinAlgError, ValueError):   # keep the start block's first column
        pass
    x = x / np.linalg.norm(x)
    Sx = matmat(x[:, None])[:, 0]
    value = float(x @ Sx)
    return theta, X, (value, float(np.linalg.norm(Sx - value * x)))


class _ScaledOperator:
    """:math:`K' = \\mathrm{diag}(1/s) K` with the row norms :math:`s_c = \\|A_c\\|_F` (1 for empty rows)."""

    def __init__(self, model: HingeModel):
        geom = model.geometry
        self.geometry = geom
        s = geom.frobenius_norms()
        smax = float(s.max(initial=0.0))
        s[s <= EMPTY_ROW_RTOL * smax] = 1.0
        self.s = s
        self.n_updates = self.updated_rows = 0   # adjoint_update's updates and their rows (reported)
        self._coef = None   # the kept work array of adjoint

    def apply(self, M: np.ndarray, eig: Optional[tuple] = None) -> np.ndarray:
        r""":math:`K' M`. ``eig = (lam, V)``, the eigendecomposition M was projected from
        (:math:`M = V_+ \mathrm{diag}(\lambda_+) V_+^\top`): the product then reads the factor
        :math:`L = \mathrm{diag}(\lambda_+)^{1/2} V_+^\top` of rank r where the cost model of
        :mod:`cvxmetric.hinge` says it pays (:math:`O(n d r + P r)` instead of :math:`O(n d^2 + P d)`)."""
        out = None
        if eig is not None:
            lam, V = eig
            pos = lam > 0
            r = int(np.count_nonzero(pos))
            if r < self.geometry.d and self.geometry.product_cost("K", r=r) < self.geometry.product_cost("K"):
                out = self.geometry.values_factor((V[:, pos] * np.sqrt(lam[pos])).T)
        if out is None:
            out = self.geometry.values(M)
        out /= self.s     # a fresh vector: scaled in place
        return out

    def adjoint(self, y: np.ndarray) -> np.ndarray:
        r""":math:`K'^* y = K^* (y / s)` (``y / s`` in a kept work array: no (m,) allocation per product)."""
        if self._coef is None:
            self._coef = np.empty_like(self.s)
        return self.geometry.weighted_sum(np.divide(y, self.s, out=self._coef))

    def update_rows(self, y_old: np.ndarray, y_new: np.ndarray) -> Optional[np.ndarray]:
        """The entries that changed from ``y_old`` to ``y_new`` where :meth:`adjoint_update` takes
        the product over them (``INCREMENTAL_ADJOINT``, and the cost model of :mod:`cvxmetric.hinge`
        prices it below a full product), else None (the full product). The product over the rows
        goes through their difference vectors, or through their pairs in the table of all rows
        where the full product is on the points path (:meth:`cvxmetric.hinge.PairTable.pairs_form`);
        never through a pair table built per call (measured on digits' LMNN: 1.25 ms against
        0.76 ms for the full product)."""
        if not INCREMENTAL_ADJOINT:
            return None
        changed = np.flatnonzero(y_new != y_old)
        geom = self.geometry
        if changed.size and (geom.product_cost("Kt", n_rows=changed.size) >= geom.product_cost("Kt")
                             or self._update_path(changed.size) is None):
            return None
        return changed

    def _update_path(self, n_rows: int) -> Optional[str]:
        """The path of :meth:`adjoint_update` over ``n_rows`` rows (the cost model's), or None where
        it would build a pair table for the call."""
        path = self.geometry.operator_path("Kt", n_rows=n_rows)[0]
        if path == "points" and self.geometry.operator_path("Kt")[0] != "points":
            return None
        return path

    def adjoint_update(self, KTy: np.ndarray, y_old: np.ndarray, y_new: np.ndarray) -> tuple[np.ndarray, bool]:
        r""":math:`K'^* y_{new}` from ``KTy`` :math:`= K'^* y_{old}`: plus :math:`K'^*(y_{new} - y_{old})`
        over the entries that changed (:meth:`update_rows`), or the full product. Returns a fresh
        array and whether it is the full product (an update carries the round-off of its chain)."""
        changed = self.update_rows(y_old, y_new)
        if changed is None:
            return self.adjoint(y_new), True
        self.n_updates += 1
        self.updated_rows += changed.size
        if changed.size == 0:
            return KTy.copy(), False
        dy = (y_new[changed] - y_old[changed]) / self.s[changed]
        return KTy + self.geometry.weighted_sum(dy, rows=changed, path=self._update_path(changed.size)), False


def estimate_operator_norm(apply: Callable, adjoint: Callable, d: int, *, n_iter: Optional[int] = None,
                           seed=0) -> float:
    r"""Power-iteration estimate of :math:`\|K\|_2` for :math:`K: \mathbb{S}^d \to \mathbb{R}^m`.

    Iterates :math:`X \leftarrow K^*K X / \|K^*K X\|_F` from a random symmetric start ``n_iter``
    times (default ``POWER_ITERATIONS``) and returns :math:`\|K X\|_2` (a lower estimate that
    converges to :math:`\|K\|_2`).
    """
    if n_iter is None:
        n_iter = POWER_ITERATIONS
    rng = as_rng(seed)
    X = symmetrize(rng.standard_normal((d, d)))
    X /= np.linalg.norm(X)
    for _ in range(n_iter):
        Y = adjoint(apply(X))
        nrm = float(np.linalg.norm(Y))
        if nrm == 0.0:
            return 0.0
        X = Y / nrm
    # ||K X|| of the last iterate only (one K per step; at d = 1000 a K costs twice a K*)
    return float(np.linalg.norm(apply(X)))


def _operator_norm(op: "_ScaledOperator", model: HingeModel, n_iter: int, seed, sample: bool = False) -> float:
    r"""The power-iteration estimate of :math:`\|K'\|_2` on the cheaper side by the cost model
    (:func:`cvxmetric.hinge.normal_costs`): on :math:`K'^* K'` over d x d matrices
    (:func:`estimate_operator_norm`), or on :math:`K' K'^*` over multipliers through the Gram
    matrix of the points (:meth:`cvxmetric.hinge.QuadrupletGeometry.normal_operator`; no d x d
    product at all). Both are lower estimates converging to :math:`\|K'\|_2` (the largest
    eigenvalue of either product is :math:`\|K'\|_2^2`). With ``sample`` (the first step of the
    adaptive rule only), on a seeded sample of the rows where ``NORM_SAMPLE_*`` says so (an
    estimate, neither lower nor upper)."""
    n_rows = math.ceil(NORM_SAMPLE_PER_ENTRY * model.d * (model.d + 1) / 2)
    if sample and NORM_SAMPLE_SHARE * n_rows <= model.m:
        rng = as_rng(seed)
        rows = np.sort(rng.choice(model.m, n_rows, replace=False))
        part = model.subset(rows)
        return math.sqrt(model.m / n_rows) * _operator_norm(_ScaledOperator(part), part, n_iter, rng)
    geom = model.geometry
    if not _norm_by_gram(geom, n_iter):
        return estimate_operator_norm(op.apply, op.adjoint, model.d, n_iter=n_iter, seed=seed)
    normal, s = geom.normal_operator(), op.s
    return estimate_norm_from_normal(lambda y: normal(y / s) / s, model.m, n_iter=n_iter, seed=seed)


def _norm_by_gram(geom, n_iter: int) -> bool:
    """Whether :func:`_operator_norm` iterates on :math:`K' K'^*` through the points' Gram matrix
    (cost model :func:`cvxmetric.hinge.normal_costs`; a function of the sizes alone)."""
    halves = geom.u_rows.size + geom.v_rows.size
    costs = normal_costs(min(geom.X.shape[0], 2 * halves), halves, geom.d, n_iter, geom.product_cost("K"),
                         geom.product_cost("Kt"))
    return costs["gram"] < costs["dense"]


def estimate_norm_from_normal(normal: Callable, m: int, *, n_iter: int = POWER_ITERATIONS, seed=0) -> float:
    r"""Power-iteration estimate of :math:`\|K\|_2` from :math:`N = K K^*` on :math:`\mathbb{R}^m`:
    ``n_iter`` steps :math:`y \leftarrow N y` from a random unit y, normalized, and
    :math:`\sqrt{\|N y\|}` of the last unit y (at most :math:`\|K\|_2`: a lower estimate that
    converges to it)."""
    y = as_rng(seed).standard_normal(m)
    value = 0.0
    for _ in range(n_iter):
        y /= float(np.linalg.norm(y))
        z = normal(y)
        value = float(np.linalg.norm(z))
        if value == 0.0:
            return 0.0
        y = z
    return math.sqrt(value)


def equilibration(model: HingeModel, seed=0) -> Optional[HingeCongruence]:
    r"""The congruence twin of ``model`` whose operator columns are equilibrated, or None.

    Parameters
    ----------
    model : HingeModel
    seed : int or numpy.random.Generator
        Seeds the sample of rows the column norms are estimated on (``EQUILIBRATION_SAMPLE_*``).

    Returns
    -------
    HingeCongruence or None
        ``model.congruent(D)`` (:meth:`cvxmetric.models.HingeModel.congruent`) with ``D`` from the
        Ruiz passes below; None where it does not apply (q > 0, no certificate, the twin's
        certificate lost) or does not pay (spread of ``D`` at most ``EQUILIBRATION_MIN_SPREAD``).

    Notes
    -----
    The primal variable is a PSD matrix under a Frobenius prox, so the only diagonal primal
    preconditioner that keeps the projection a projection is a congruence :math:`M = D M' D`,
    which scales the column :math:`(a, b)` of :math:`K` by :math:`D_a D_b`. Ruiz's equilibration
    (as in PDLP) on the diagonal columns: with the rows scaled as :class:`_ScaledOperator` scales
    them (:math:`A_c' / \|A_c'\|_F`), each pass computes

    .. math::
        \gamma_a = \Big(\sum_c \big(A'_c[a, a] / \|A'_c\|_F\big)^2\Big)^{1/2},
        \qquad D_a \leftarrow D_a\, \gamma_a^{-1/4}

    (Ruiz's square root of the norm, for a column that scales like :math:`D_a^2`), for
    ``EQUILIBRATION_PASSES`` passes or until no factor moves by more than
    ``EQUILIBRATION_SETTLED``. :math:`A_c[a, a] = u_a^2 - v_a^2` for :math:`A_c = u u^\top - v
    v^\top`, so a pass is :math:`O(m d)` (over a seeded sample of the rows where they are
    many: ``EQUILIBRATION_SAMPLE_*``). ``D`` is then rounded to powers of two (the twin is
    exact), its spread capped at ``EQUILIBRATION_MAX_SPREAD`` (from the largest factors down: they
    belong to the features in the smallest units), and features with no entry in any constraint
    take the smallest factor.
    """
    if model.q != 0 or not model.has_certificate:
        return None
    geom = model.geometry
    D = None
    if geom.m >= EQUILIBRATION_SAMPLE_SHARE * EQUILIBRATION_SAMPLE_ROWS:
        rows = np.sort(as_rng(seed).choice(geom.m, EQUILIBRATION_SAMPLE_ROWS, replace=False))
        D = _ruiz_factors(geom, rows)   # None where a feature has no entry in the sample
    if D is None:
        D = _ruiz_factors(geom)
    if D is None:
        return None
    D = np.exp2(np.round(np.log2(D)))
    D = np.minimum(D, D.min() * EQUILIBRATION_MAX_SPREAD)
    if D.max() <= D.min() * EQUILIBRATION_MIN_SPREAD:
        return None
    twin = model.congruent(D)
    return twin if twin.model.has_certificate else None


def _ruiz_factors(geom, rows: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
    """The Ruiz factors of :func:`equilibration` before rounding, from all rows or the sorted
    sample ``rows`` (None when no feature has an entry; on a sample, when some feature has none)."""
    sample = rows is not None
    rows = np.arange(geom.m) if rows is None else rows
    D = np.ones(geom.d)
    used = None
    for _ in range(EQUILIBRATION_PASSES):
        gamma = np.zeros(geom.d)
        for start in range(0, geom.m, GATHER_CHUNK):
            gamma += _ruiz_block(*geom.difference_vectors(rows[start:start + GATHER_CHUNK]), D * D)
        gamma = D * D * np.sqrt(gamma * (geom.m / rows.size))
        if used is None:   # a feature constant over every constraint has exact zeros
            used = gamma > 0
            if not np.any(used) or (sample and not np.all(used)):
                return None
        move = gamma[used] ** -0.25
        D[used] *= move
        if move.max() <= move.min() * EQUILIBRATION_SETTLED:   # a common factor is a rescaling
            break
    D[~used] = D[used].min()
    return D


def _ruiz_block(u: np.ndarray, v: np.ndarray, D2: np.ndarray) -> np.ndarray:
    r""":math:`\sum_c (u_c \circ u_c - v_c \circ v_c)^{\circ 2} / \|D A_c D\|_F^2` over a block of
    rows (shape (d,); rows with :math:`D A_c D = 0` left out), the difference vectors overwritten.

    With :math:`D^2` = ``D2``: :math:`\|D A_c D\|_F^2 = (u^\top D^2 u)^2 + (v^\top D^2 v)^2 - 2
    (u^\top D^2 v)^2`, the three weighted products as matrix-vector products of the squared and
    multiplied vectors with :math:`D^2`; the column sums as one transposed product.
    """
    uv = u * v
    u *= u
    v *= v
    uu, vv, cross = u @ D2, v @ D2, uv @ D2
    norm2 = np.maximum(uu * uu + vv * vv - 2.0 * cross * cross, 0.0)
    weight = np.divide(1.0, norm2, out=np.zeros_like(norm2), where=norm2 > 0)
    u -= v
    u *= u
    return weight @ u


class _Score:
    """Optimality measures of one point (see the module docstring)."""

    __slots__ = ("f", "dual_res", "lag_gap", "err", "rel_err", "rel_dual", "rel_gap", "M", "y", "norm2", "n_neg",
                 "lamS", "t", "ritz", "ritz_values", "dual_apply")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class PDHGState:
    r"""The state of restarted, adaptive PDHG on one hinge model, and its small steps.

    The pieces of the method (module docstring) as methods on one state, so that operators and
    working sets plug in without growing one function: :meth:`step` (one PDHG step with the adaptive
    step-size rule), :meth:`check` (score the current point and the average, certify, keep the best),
    :meth:`converged` (the stopping rule), :meth:`restart` (restart to the better candidate and
    rebalance the primal weight), :meth:`result` (the result contract).

    Parameters
    ----------
    model : HingeModel
    M, y : ndarray
        PSD primal start and the *unscaled* dual start in :math:`[0, c]`.
    eta, omega : float
        Initial step size and primal weight.
    adaptive_step : bool
        Use the adaptive step-size rule.
    operator : _ScaledOperator, optional
        The scaled operator :math:`K'` (built from ``model`` when omitted).
    t_start : float, optional
        ``time.perf_counter()`` at the start of the solve (default: now).
    err_last : float, optional
        Restart error of the last restart (default: the start's; :meth:`rebind` carries it).
    congruence : HingeCongruence, optional
        When ``model`` is its twin: the callback and the result read the original's points
        (:meth:`~cvxmetric.models.HingeCongruence.point`) and objective.
    row_order : (HingeModel, ndarray), optional
        ``(unpermuted, order)`` when ``model`` is ``unpermuted.permuted(order)`` (``ROW_ORDER``):
        the result's multipliers are those of ``unpermuted``'s rows, its objective ``unpermuted``'s.

    Attributes
    ----------
    M, y, KM, KTy : ndarray
        Current iterate (``y`` scaled: :math:`y' = s \circ y`) and its cached products.
    eta, omega : float
        Step size and primal weight.
    n_iter, rejected, n_restarts, n_checks, n_weight_updates : int
        Counters (rejected adaptive steps count as iterations; ``n_weight_updates``: primal-weight
        rebalancings, of which the first ``PRIMAL_WEIGHT_WARMUP`` are adopted in full).
    w_sum, M_sum, y_sum, KM_sum, KTy_sum
        Step-weighted sums since the last restart (the average).
    M_last, y_last, rho, err_last, err_prev_cand, cycle_start
        Restart bookkeeping.
    best_f, best_M, best_lb, cert_y, last
        Best objective and its point, best bound and its multipliers, last candidate score.
    err_at_repair, n_repairs, n_polishes, polish_free_factor, repair_cost, repair_time
        Relative restart error of the point the certificate was last improved at; targeted repairs
        and complementarity polishes so far, the polish's free multipliers per equation (those of the
        last polish's final solve), their modelled cost (seconds of the cost model, which
        schedules them) and their measured seconds (reported only).
    start_time : float
        Seconds of the cold start that made this state (0 for one made directly; reported only).
    history, trace : list
        Per check: the objective of the current iterate, and the trace row (see :func:`pdhg`).
    """

    def __init__(self, model: HingeModel, M: np.ndarray, y: np.ndarray, *, eta: float, omega: float,
                 adaptive_step: bool = True, operator: Optional["_ScaledOperator"] = None,
                 t_start: Optional[float] = None, err_last: Optional[float] = None,
                 congruence: Optional[HingeCongruence] = None, projection: str = "auto", seed=0,
                 checks: str = "auto", row_order: Optional[tuple] = None):
        if row_order is not None and (len(row_order) != 2 or not isinstance(row_order[0], HingeModel)
                                      or np.shape(row_order[1]) != (model.m,) or row_order[0].m != model.m):
            raise ValueError("row_order must be (unpermuted model, order) with model = unpermuted.permuted(order)")
        if congruence is not None and congruence.model is not (model if row_order is None else row_order[0]):
            raise ValueError("congruence must be the HingeCongruence whose twin is model")
        # the model before its rows were sorted (ROW_ORDER) and the order: the result maps back
        self.row_order = row_order
        if not isinstance(projection, str) or projection not in PROJECTIONS:
            raise ValueError(f"projection must be one of {PROJECTIONS}; got {projection!r}")
        if not isinstance(checks, str) or checks not in CHECKS:
            raise ValueError(f"checks must be one of {CHECKS}; got {checks!r}")
        self.projection, self.checks = projection, checks
        self._rng = as_rng(seed)
        # the low-rank projection: the tracked basis, the factor (V, lam) of the current M when it
        # is a projection's output (None after a restart to the average), the steps that took it
        self._basis, self._factor, self.lowrank_steps = None, None, 0
        R0 = np.asarray(model.R, dtype=np.float64)
        self._R_scalar = float(R0[0, 0]) if np.array_equal(R0, R0[0, 0] * np.eye(model.d)) else None
        self.model = model
        self.congruence = congruence
        self.op = _ScaledOperator(model) if operator is None else operator
        self.q = float(model.q)
        # the matrix-free checks: their tracked negative eigenspace of the dual matrix and its size
        self.matrix_free = matrix_free_checks(model, checks)
        self._neg_basis, self._n_neg = None, 0
        self.proofs, self.proof_cost = 0, 0.0   # matrix-free proofs and their modelled seconds
        self.target_tol = DEFAULT_TOL            # the certified gap the run is held to (set by pdhg)
        self.R = np.asarray(model.R, dtype=np.float64)
        self.coef = np.asarray(model.coef, dtype=np.float64)
        self.delta = np.asarray(model.constraints.delta, dtype=np.float64)
        self.s = self.op.s
        self.cs = self.coef * self.s      # box of the scaled dual y' = s * y
        self.ds = self.delta / self.s     # scaled margins
        self.eta, self.omega = float(eta), float(omega)
        self.adaptive_step = adaptive_step
        self.M, self.y = M, y * self.s
        # the dense scores' sym(R) (a d x d array, 200 MB at d = 5000: not kept for matrix-free checks)
        self.R_sym = None if self.matrix_free else symmetrize(self.R)
        # the eigenvalues known from the last projection: its number of positive ones (the rank
        # hint of the next projection's eigensolver) and ||M||_2 of the current iterate
        self.rank = None
        self.norm2 = max(float(np.linalg.eigvalsh(self.M)[-1]), 0.0) if np.any(self.M) else 0.0
        # K' 0 = 0 and K'* 0 = 0 (exact zeros either way): at d = 5000 each product costs seconds
        self.KM = self.op.apply(self.M) if np.any(self.M) else np.zeros(model.m)
        self.KTy = self.op.adjoint(self.y) if np.any(self.y) else np.zeros((model.d, model.d))
        self._KTy_exact = True   # False after a step that updated it (adjoint_update)
        self._KTy_stale = False  # True after a low-rank step, which does not form K'* y at all
        self._work, self._work2 = np.empty_like(self.y), np.empty_like(self.y)   # scratch of a step
        # d x d scratch of a step (M+ - M, eta M): a fresh 8 MB array at d = 1000 costs its page
        # faults at every step
        self._work_dd = np.empty_like(self.M)
        self.n_iter = self.rejected = self.n_restarts = self.n_checks = 0
        self.n_weight_updates = 0   # primal-weight rebalancings so far (PRIMAL_WEIGHT_WARMUP)
        self.t_start = time.perf_counter() if t_start is None else t_start
        self.start_time = 0.0
        # restart bookkeeping
        self.M_last, self.y_last = self.M.copy(), self.y.copy()
        self.rho = 0.0
        self.err_last = (self.score(self.M, self.y, self.KM, self.KTy, self.norm2).err if err_last is None
                         else err_last)
        self.err_prev_cand = math.inf
        self.cycle_start = 0
        self._reset_average()
        # best point and bound over all scored points
        self.best_f, self.best_M = math.inf, self.M
        self.best_lb, self.cert_y = None, None
        self.err_at_repair = math.inf
        self.n_repairs = self.n_polishes = 0
        self.repair_cost = self._repair_estimate = self.repair_time = 0.0
        self._plan, self._repair_allowed, self._correction_allowance = None, True, 0.0
        self.polish_free_factor = POLISH_FREE_FACTOR
        self.last = None
        self.history: list[float] = []
        self.trace: list[tuple] = []

    def rebind(self, model: HingeModel, M: np.ndarray, y: np.ndarray, rows: np.ndarray) -> "PDHGState":
        r"""This state moved to another model on the same data and linear term (a working set's next
        restricted model), at the point ``(M, y)`` (``y`` unscaled, on the rows of ``model``): a warm
        start that keeps what a cold start would have to learn again.

        Carried: step size, primal weight, counters, the restart bookkeeping (restart point, error,
        cycle) and the repair bookkeeping; the step-weighted average and the restart point's
        multipliers row by row (``rows[i]``: the row of ``self.model`` that row i of ``model`` was,
        -1 for a new row, whose multipliers start at 0), the average's products recomputed on
        ``model``. Reset: the best point and bound, which belong to the old model's objective. A
        constant step (``adaptive_step=False``) is recomputed as 0.99/||K'|| of the new model.
        """
        rows = np.asarray(rows)
        if rows.shape != (model.m,) or not np.issubdtype(rows.dtype, np.integer) \
                or np.any(rows < -1) or np.any(rows >= self.model.m):
            raise ValueError(f"rows must be {model.m} integers in [-1, {self.model.m}) (the old row of each new "
                             f"row, -1 for a new one); got shape {rows.shape}, dtype {rows.dtype}")
        rows = rows.astype(np.int64, copy=False)
        new = PDHGState(model, M, y, eta=self.eta, omega=self.omega, adaptive_step=self.adaptive_step,
                        t_start=self.t_start, err_last=self.err_last, projection=self.projection,
                        seed=self._rng, checks=self.checks)
        new._basis, new.lowrank_steps = self._basis, self.lowrank_steps
        hit = rows >= 0

        def moved(v):   # scaled multipliers of the old rows -> scaled multipliers of the new rows
            out = np.zeros(model.m)
            out[hit] = v[rows[hit]] / self.s[rows[hit]] * new.s[hit]
            return out

        new.n_iter, new.rejected, new.n_restarts, new.n_checks = self.n_iter, self.rejected, self.n_restarts, self.n_checks
        new.n_weight_updates = self.n_weight_updates
        new.M_last, new.y_last = self.M_last, moved(self.y_last)
        new.rho, new.err_prev_cand, new.cycle_start = self.rho, self.err_prev_cand, self.cycle_start
        if self.w_sum > 0:
            new.w_sum, new.M_sum, new.y_sum = self.w_sum, self.M_sum.copy(), moved(self.y_sum)
            new.KM_sum, new.KTy_sum = new.op.apply(new.M_sum), new.op.adjoint(new.y_sum)
        new.err_at_repair, new.n_repairs, new.repair_cost = self.err_at_repair, self.n_repairs, self.repair_cost
        new.n_polishes, new.polish_free_factor = self.n_polishes, self.polish_free_factor
        new.repair_time, new.start_time = self.repair_time, self.start_time
        new.proofs, new.proof_cost, new.target_tol = self.proofs, self.proof_cost, self.target_tol
        new._neg_basis, new._n_neg = self._neg_basis, self._n_neg
        new.op.n_updates, new.op.updated_rows = self.op.n_updates, self.op.updated_rows
        new.history, new.trace = list(self.history), list(self.trace)   # the old state's records stay its own
        new.rank = self.rank        # the eigensolver's rank hint
        if not self.adaptive_step:  # a constant step must stay below 1/||K'|| of the new model
            new.eta = 0.99 / (estimate_operator_norm(new.op.apply, new.op.adjoint, model.d,
                                                     n_iter=POWER_ITERATIONS_CONSTANT_STEP) or 1.0)
        return new

    def _reset_average(self) -> None:
        self.w_sum = 0.0
        self.M_sum = np.zeros_like(self.M)
        self.y_sum = np.zeros_like(self.y)
        self.KM_sum = np.zeros_like(self.KM)
        self.KTy_sum = np.zeros_like(self.KTy)
        self._KTy_sum_exact = True   # a sum of full products K'* y_k (not of updates)

    # ------------------------------------------------------------------ iteration
    def _next_eta(self, eta_max: float) -> float:
        k = self.n_iter + 1
        if math.isfinite(eta_max):
            return min((1.0 - k ** -0.3) * eta_max, (1.0 + k ** -0.6) * self.eta)
        return (1.0 + k ** -0.6) * self.eta

    def step(self) -> bool:
        r"""One PDHG step (module docstring); False when the adaptive rule rejected it.

        A rejected step counts as an iteration and only shrinks :math:`\eta`.
        """
        eta, omega = self.eta, self.omega
        tau, sigma = eta / omega, eta * omega
        lowrank = self._lowrank_pays()
        if lowrank:
            M_new, lam, V = self._lowrank_projection(tau)
        else:
            if self._KTy_stale:      # a low-rank step left K'* y behind: the dense step reads it
                self.KTy, self._KTy_exact, self._KTy_stale = self.op.adjoint(self.y), True, False
            M_new, lam, V = project_psd((self.M - tau * (self.R + self.KTy)) / (1.0 + tau * self.q),
                                        return_eig=True, partial=None, rank_hint=self.rank)
        self.rank = int(np.count_nonzero(lam > 0))
        KM_new = self.op.apply(M_new, eig=(lam, V))
        # y+ = clip(y + sigma (delta' + 2 K'M+ - K'M)), in place on one new vector (the same
        # operations in the same order as the formula, so the same round-off)
        y_new = np.multiply(KM_new, 2.0)
        y_new += self.ds
        y_new -= self.KM
        y_new *= sigma
        y_new += self.y
        np.clip(y_new, 0.0, self.cs, out=y_new)
        self.n_iter += 1
        dM = np.subtract(M_new, self.M, out=self._work_dd)
        dy = np.subtract(y_new, self.y, out=self._work)
        dK = np.subtract(KM_new, self.KM, out=self._work2)
        inter = abs(float(dK @ dy))
        movement = omega * float(np.vdot(dM, dM)) + float(dy @ dy) / omega
        eta_max = movement / (2.0 * inter) if inter > 0 else math.inf
        if self.adaptive_step and eta > eta_max:
            self.rejected += 1
            self.eta = self._next_eta(eta_max)
            return False
        if lowrank:   # K'* y is never formed on this path: the next dense step or check computes it
            KTy_new, self._KTy_exact, self._KTy_stale = self.KTy, False, True
            self.lowrank_steps += 1
        else:
            KTy_new, self._KTy_exact = self.op.adjoint_update(self.KTy, self.y, y_new)
        self.M, self.y, self.KM, self.KTy = M_new, y_new, KM_new, KTy_new
        pos = lam > 0     # the factor of M+: its positive eigenpairs (a full eigh returns all d)
        self._factor = (lam[pos], V[:, pos])
        self._KTy_sum_exact &= self._KTy_exact
        self.norm2 = max(float(lam[-1]), 0.0) if lam.size else 0.0
        self.w_sum += eta
        self.M_sum += np.multiply(self.M, eta, out=self._work_dd)
        self.y_sum += np.multiply(self.y, eta, out=self._work)
        self.KM_sum += np.multiply(self.KM, eta, out=self._work)
        if self._KTy_sum_exact:
            self.KTy_sum += eta * self.KTy
        if self.adaptive_step:
            self.eta = self._next_eta(eta_max)
        return True

    def _block_size(self, r: int) -> int:
        """Columns of the tracked basis for an iterate of rank r (``LOWRANK_EXTRA_*``), at most d."""
        return min(self.model.d, r + max(LOWRANK_EXTRA_MIN, math.ceil(LOWRANK_EXTRA_FRACTION * r)))

    def _lowrank_pays(self) -> bool:
        """Whether this step takes the low-rank projection: forced by ``projection``, or where the
        cost model (:func:`cvxmetric.hinge.projection_costs`) prices it below the dense step at the
        current rank and the dense step's ``eigh`` is at least ``LOWRANK_MIN_EIGH_SHARE`` of it
        (the inexact step costs iterations, which only a saving on the d x d work repays). The
        counts are the sizes' bounds of :meth:`QuadrupletGeometry.operator_path` (no table
        needed), so the choice is the same in every run."""
        if self.projection != "auto":
            return self.projection == "lowrank"
        geom = self.model.geometry
        r = self.rank if self.rank is not None else 0
        halves = geom.u_rows.size + geom.v_rows.size
        costs = projection_costs(min(geom.X.shape[0], 2 * halves), halves, geom.d, r, self._block_size(r),
                                 geom.product_cost("Kt"), geom.product_cost("K", r=max(r, 1)))
        return costs["lowrank"] < costs["dense"] and costs["eigh"] >= LOWRANK_MIN_EIGH_SHARE * costs["dense"]

    def _lowrank_projection(self, tau: float) -> tuple:
        r"""The projection of the step matrix :math:`A = (M - \tau(R + K'^* y'))/(1 + \tau q)` from
        its positive Ritz pairs on the tracked basis (:func:`cvxmetric.linalg.rayleigh_ritz_positive`),
        A applied matrix-free: M through its factor (or the d x d iterate after a restart), R as a
        multiple of the identity where it is one, :math:`K'^* y'` through the data and the sparse
        Laplacian (:meth:`cvxmetric.hinge.QuadrupletGeometry.adjoint_operator`). Returns
        ``(M+, lam, V)`` with ``lam`` ascending (the dense path's order)."""
        d = self.model.d
        KTy_apply = self.model.geometry.adjoint_operator(self.y / self.s)
        factor, M, R, R_scalar = self._factor, self.M, self.R, self._R_scalar
        scale = 1.0 / (1.0 + tau * self.q)

        def apply(B):
            if factor is not None:
                lam, V = factor
                MB = V @ (lam[:, None] * (V.T @ B))
            else:
                MB = M @ B
            RB = R_scalar * B if R_scalar is not None else R @ B
            return scale * (MB - tau * (RB + KTy_apply(B)))

        k = self._block_size(self.rank or 0)
        basis = self._basis
        if basis is None:   # the first low-rank step: the range of M (a dense step's factor), if any
            basis = factor[1] if factor is not None else np.empty((d, 0))
        if basis.shape[1] < k:
            basis = np.hstack([basis, self._rng.standard_normal((d, k - basis.shape[1]))])
        lam, V, ritz = rayleigh_ritz_positive(apply, basis[:, :k])
        self._basis = ritz[:, :self._block_size(lam.size)]
        F = V * np.sqrt(lam)    # the Ritz values are positive
        M_new = F @ F.T         # a symmetric rank-k product (syrk): symmetric to the last bit
        return M_new, lam[::-1].copy(), V[:, ::-1]

    # ------------------------------------------------------------------ matrix-free checks
    def _dual_operator(self, y_: np.ndarray) -> Callable:
        r"""The map :math:`B \mapsto S B` of the dual matrix :math:`S = rI + K'^* y'` (q = 0, R = rI)
        for (d, k) blocks, through the data (:meth:`cvxmetric.hinge.QuadrupletGeometry.adjoint_operator`)."""
        apply_Kt, r = self.model.geometry.adjoint_operator(y_ / self.s), self._R_scalar

        def apply(B: np.ndarray) -> np.ndarray:
            out = apply_Kt(B)
            out += r * B
            return out

        return apply

    def _ritz_steps(self, apply_S: Callable, basis: np.ndarray, steps: int) -> tuple:
        """``steps`` block Rayleigh-Ritz steps on :math:`-S` from ``basis``: the negative Ritz values
        of S (ascending) and the last step's Ritz vectors (ascending Ritz values of S)."""
        k = basis.shape[1]
        lam, ritz = np.zeros(0), basis
        for _ in range(steps):
            lam, _, ritz = rayleigh_ritz_positive(lambda B: -apply_S(B), ritz[:, :k])
        return -lam, ritz

    def _norm2_estimate(self, M_: np.ndarray) -> float:
        r""":math:`\|M\|_2` of a PSD point from two block Rayleigh-Ritz steps on the current iterate's
        range (a lower estimate: the largest Ritz value; the average of the iterates shares their
        leading directions)."""
        d = self.model.d
        basis = self._factor[1] if self._factor is not None and self._factor[1].shape[1] else np.empty((d, 0))
        k = self._block_size(basis.shape[1])
        basis = np.hstack([basis[:, -k:], self._rng.standard_normal((d, max(k - basis.shape[1], 0)))])
        lam = np.zeros(0)
        for _ in range(2):
            lam, _, ritz = rayleigh_ritz_positive(lambda B: M_ @ B, basis)
            basis = ritz[:, :k]
        return float(lam[0]) if lam.size else 0.0

    def _score_matrix_free(self, M_, y_, KM_, norm2: Optional[float] = None) -> _Score:
        r"""The measures of :meth:`score` with the dual matrix read through the data (q = 0, R = rI).

        The objective and the Lagrangian gap are exact (:math:`\langle S, M\rangle = \langle R,
        M\rangle + y'^\top K' M`); the negative spectrum of S (dual residual, restart error) is that
        of ``CHECK_RITZ_STEPS`` block Rayleigh-Ritz steps on the tracked negative eigenspace (at most
        ``CHECK_BLOCK_MAX`` directions), :math:`\|K'^* y'\|_F` a seeded Gaussian sketch
        (``CHECK_SKETCH`` columns), and :math:`\|M\|_2` of the average a Ritz estimate. They steer the
        restarts and the residual test; no bound reads them (:meth:`_certify_matrix_free` proves
        its bound)."""
        s, coef, delta = self.s, self.coef, self.delta
        d = self.model.d
        t = delta + KM_ * s
        linear = float(np.vdot(self.R, M_))
        f = float(linear + coef @ np.maximum(t, 0.0))
        apply_S = self._dual_operator(y_)
        k = min(d, CHECK_BLOCK_MAX, self._block_size(self._n_neg))
        basis = self._neg_basis if self._neg_basis is not None else np.empty((d, 0))
        if basis.shape[1] < k:
            basis = np.hstack([basis, self._rng.standard_normal((d, k - basis.shape[1]))])
        neg, ritz = self._ritz_steps(apply_S, basis[:, :k], CHECK_RITZ_STEPS)
        self._neg_basis, self._n_neg = ritz, neg.size
        dual_res = float(np.sqrt(neg @ neg))
        yu = y_ / s
        comp = float(coef @ np.maximum(t, 0.0) - yu @ t)
        lag_gap = linear + float(y_ @ KM_) + comp
        if norm2 is None:
            norm2 = self._norm2_estimate(M_)
        err = max(lag_gap + max(self.rho, norm2) * float(-neg.sum()), 0.0)
        dual_val = float(delta @ yu)
        size = max(abs(f), abs(dual_val))
        Omega = self._rng.standard_normal((d, CHECK_SKETCH))
        KTy_norm = float(np.linalg.norm(apply_S(Omega) - self._R_scalar * Omega)) / math.sqrt(CHECK_SKETCH)
        rel_dual = _ratio(dual_res, max(float(np.linalg.norm(self.R)), KTy_norm))
        return _Score(f=f, dual_res=dual_res, lag_gap=lag_gap, err=err, rel_err=_ratio(err, size),
                      rel_dual=rel_dual, rel_gap=_ratio(abs(lag_gap), size), M=M_, y=y_, norm2=norm2,
                      n_neg=int(neg.size), lamS=None, t=t, ritz=ritz, ritz_values=neg, dual_apply=apply_S)

    def _proof_estimate(self, sc: _Score, KTy_: np.ndarray) -> tuple:
        r"""``(theta, ||S x - theta x||)`` of the smallest Ritz pair of the scored point's dual matrix
        S from LOBPCG (at most ``PROOF_RITZ_STEPS`` iterations, ``PROOF_BLOCK`` columns, started from the
        score's smallest Ritz vectors; its vectors start the next check's scores): the estimate
        that chooses the safe shift of the proof.
        ``KTy_``: the point's :math:`K'^* y'` (d x d), formed for the proof: its products cost
        :math:`d^2` per column against :math:`2 n d` through the data."""
        r = self._R_scalar

        def apply_S(B):
            out = KTy_ @ B
            out += r * B
            return out

        theta, X, estimate = smallest_ritz_pairs(apply_S, sc.ritz[:, :min(PROOF_BLOCK, sc.ritz.shape[1])], r)
        if theta.size:
            self._neg_basis = np.hstack([X, self._neg_basis])   # the next scores start there
        return estimate

    def _step_cost(self) -> float:
        """Modelled seconds of one step at the current rank: the cheaper projection path
        (:func:`cvxmetric.hinge.projection_costs`, as ``projection="auto"`` chooses)."""
        geom = self.model.geometry
        r = self.rank if self.rank is not None else 0
        halves = geom.u_rows.size + geom.v_rows.size
        costs = projection_costs(min(geom.X.shape[0], 2 * halves), halves, geom.d, r, self._block_size(r),
                                 geom.product_cost("Kt"), geom.product_cost("K", r=max(r, 1)))
        return min(costs.values())

    def _certify_matrix_free(self, points) -> Optional[float]:
        r"""The bound of one scored point, proven (matrix-free checks): the point whose estimated
        bound :math:`\delta^\top y + T \min(0, \theta)` (trace bound T, :math:`\theta` its smallest
        negative Ritz value) is larger, and only where that estimate exceeds the best bound so far
        (a Ritz value is never below :math:`\lambda_{\min}`, so the proven bound cannot exceed the
        estimate). Its :math:`K'^* y'` is formed once (d x d), and
        :meth:`~cvxmetric.models.HingeModel.certify` proves :math:`\lambda_{\min}` by one
        Cholesky factorization at the safe shift chosen from :meth:`_proof_estimate`; only where
        that estimate would certify ``target_tol`` or the proofs' modelled cost is within
        ``PROOF_BUDGET``. Keeps the best bound; returns this check's (None where nothing was
        proven)."""
        T = self.model.trace_bound(self.best_f)
        best = None
        for KTy_, y_, sc in points:
            dy = float(self.delta @ (y_ / self.s))
            theta = float(sc.ritz_values[0]) if sc.ritz_values.size else 0.0
            est = estimated_bound(dy, theta, T, self._R_scalar)
            if best is None or est > best[0]:
                best = (est, KTy_, y_, sc)
        est, KTy_, y_, sc = best
        if self.best_lb is not None and est <= self.best_lb:
            return None
        geom = self.model.geometry
        cost = geom.product_cost("Kt") + COST_CHOLESKY * geom.d ** 3
        if relative_gap(self.best_f, est) > self.target_tol and \
                self.proof_cost + cost > PROOF_BUDGET * self.n_iter * self._step_cost():
            return None
        self.proofs += 1
        self.proof_cost += cost
        if KTy_ is None:
            KTy_ = self.op.adjoint(y_)
            if y_ is self.y:   # the current point's product: exact for the next dense step
                self.KTy, self._KTy_exact, self._KTy_stale = KTy_, True, False
        b, yb = self.model.certify(y_ / self.s, upper=self.best_f, Ky=KTy_, repair_steps=0,
                                   lambda_min_estimate=self._proof_estimate(sc, KTy_))
        if b is not None and (self.best_lb is None or b > self.best_lb):
            self.best_lb, self.cert_y = b, yb
        return b

    # ------------------------------------------------------------------ scores and certificates
    def score(self, M_, y_, KM_, KTy_, norm2: Optional[float] = None) -> _Score:
        """Optimality measures of one point (module docstring), against the current restart radius.

        ``norm2`` is :math:`\\|M\\|_2` when the caller knows it (the current iterate: from its
        projection). The dual matrix is formed as :meth:`HingeModel.certify` forms it (sym(R) +
        sym(K* y), plus q M), so that with q = 0 its eigenvalues ``lamS`` serve the certificate too.
        With matrix-free checks, :meth:`_score_matrix_free` (``KTy_`` is not read).
        """
        if self.matrix_free:
            return self._score_matrix_free(M_, y_, KM_, norm2)
        s, coef, delta, q = self.s, self.coef, self.delta, self.q
        t = delta + KM_ * s
        sq = 0.5 * q * float(np.vdot(M_, M_)) if q else 0.0   # q = 0: no ||M||^2 (it may overflow)
        f = float(np.vdot(self.R, M_) + sq + coef @ np.maximum(t, 0.0))
        G = self.R + q * M_
        S = self.R_sym + symmetrize(KTy_)
        if q:
            S += q * M_
        lamS = np.linalg.eigvalsh(S)
        neg = np.minimum(lamS, 0.0)
        dual_res = float(np.sqrt(neg @ neg))
        yu = y_ / s
        comp = float(coef @ np.maximum(t, 0.0) - yu @ t)
        lag_gap = float(np.vdot(S, M_)) + comp
        if norm2 is None:
            norm2 = max(float(np.linalg.eigvalsh(M_)[-1]), 0.0)
        err = max(lag_gap + max(self.rho, norm2) * float(-neg.sum()), 0.0)
        dual_val = float(delta @ yu) - sq
        size = max(abs(f), abs(dual_val))
        rel_dual = _ratio(dual_res, max(float(np.linalg.norm(G)), float(np.linalg.norm(KTy_))))
        return _Score(f=f, dual_res=dual_res, lag_gap=lag_gap, err=err, rel_err=_ratio(err, size),
                      rel_dual=rel_dual, rel_gap=_ratio(abs(lag_gap), size), M=M_, y=y_, norm2=norm2,
                      n_neg=int(np.count_nonzero(neg)), lamS=lamS, t=t)

    def _average(self) -> tuple:
        """The step-weighted average (M, y', K'M, K'* y'); its K'* y' is None where the steps did not
        sum full products (matrix-free checks do not form it)."""
        w = self.w_sum
        return self.M_sum / w, self.y_sum / w, self.KM_sum / w, self.KTy_sum / w if self._KTy_sum_exact else None

    def repair_due(self, cand: _Score, tol: float) -> bool:
        """Whether this check improves the certificate (the polish, or the targeted repair): the
        residual test holds (then the stop waits for the certificate), or the candidate's relative
        restart error fell by ``REPAIR_DECAY`` since the last improvement and its modelled cost
        stays within ``REPAIR_BUDGET``. Plans the polish at the candidate (its own rank on the data
        span: ``_plan``; at the residual test only where its modelled cost is within ``POLISH_WORTH``
        of the iterations', and where its memory is within the cap of
        :meth:`~cvxmetric.models.HingeModel.polish_plan`) and sets ``_repair_allowed``: whether the
        (dearer) targeted repair may follow a polish that failed or gained nothing."""
        geom = self.model.geometry
        kkt = max(cand.rel_dual, cand.rel_err) <= tol
        if not kkt and cand.rel_err > REPAIR_DECAY * self.err_at_repair:
            return False
        # modelled cost (cvxmetric.hinge cost model, so the schedule is the same in every run): a
        # repair step is two passes of values_rank_one over the negative directions and the support
        # of y, one K* and the eigendecomposition of the dual matrix (d^3: measured at d = 1000 with
        # 10^4 quadruplets, 2 repairs (21 s) instead of 4 (32 s) at the same 288 iterations and
        # certified gap 5.0e-5); an iteration one K and one K*; a polish its plan's cost and one K*
        support = int(np.count_nonzero(cand.y))    # the repair runs over the support of y, twice a step
        self._repair_estimate = REPAIR_STEPS * (2.0 * geom.rank_one_cost(max(cand.n_neg, 1), n_rows=support)
                                                + geom.product_cost("Kt") + COST_EIGH * geom.d ** 3)
        run = self.n_iter * (geom.product_cost("K") + geom.product_cost("Kt"))
        # at the residual test the polish is priced against the iterations it would save
        worth = POLISH_WORTH * run if kkt else None
        self._plan = None
        if POLISH_CERTIFICATE:
            self._plan = self.model.polish_plan(cand.M, self.polish_free_factor, max_cost=worth)
            if self._plan is None and self.polish_free_factor > POLISH_FREE_FACTOR:
                # the grown free set no longer fits (memory, cost, constraints): start over
                self.polish_free_factor = POLISH_FREE_FACTOR
                self._plan = self.model.polish_plan(cand.M, self.polish_free_factor, max_cost=worth)
        polish = None if self._plan is None else self._plan.cost + geom.product_cost("Kt")
        budget = REPAIR_BUDGET * run
        # the polish's corrections (a larger free set, a wider range) are priced like the polish
        self._correction_allowance = max((worth if kkt else budget) - self.repair_cost - (polish or 0.0), 0.0)
        self._repair_allowed = kkt or self.repair_cost + (polish or 0.0) + self._repair_estimate <= budget
        return kkt or self.repair_cost + (self._repair_estimate if polish is None else polish) <= budget

    def certify(self, points, tol: float, repair: bool = True) -> Optional[float]:
        """Bounds of the scored ``points`` ((K* y', y', score) each); when ``repair`` and the bound
        is not within ``tol``, the better-scored point's multiplier is polished (where planned)
        and, if that failed or gained nothing, repaired (where allowed). Keeps the best bound;
        returns this check's."""
        model, s = self.model, self.s
        lb, lb_y = None, None
        for KTy_, y_, sc in points:
            # with q = 0 the score's dual matrix is the certificate's: its eigenvalues are reused
            b, yb = model.certify(y_ / s, upper=self.best_f, Ky=KTy_, repair_steps=0,
                                  dual_eigvals=sc.lamS if self.q == 0 else None)
            if b is not None and (lb is None or b > lb):
                lb, lb_y = b, yb
        if repair and relative_gap(self.best_f, lb) > tol:
            KTy_, y_, sc = min(points, key=lambda p: p[2].err)
            t0 = time.perf_counter()
            b, yb, ok = self._polished_bound(sc, y_ / s, KTy_, tol)
            gained = b is not None and (lb is None or b > lb)
            if gained:
                lb, lb_y = b, yb
            ran = self._plan is not None
            # the targeted repair of the candidate's own multiplier, where its bound could certify
            if not (ok and gained) and self._repair_allowed and (not REPAIR_ONLY_IF_IT_CAN_CERTIFY
                                                                 or self._repair_may_certify(y_, tol)):
                ran = True
                self.n_repairs += 1
                self.repair_cost += self._repair_estimate
                b, yb = model.certify(y_ / s, upper=self.best_f, Ky=KTy_,
                                      dual_eigvals=sc.lamS if self.q == 0 else None)
                if b is not None and (lb is None or b > lb):
                    lb, lb_y = b, yb
            if ran:
                self.err_at_repair = sc.rel_err
            self.repair_time += time.perf_counter() - t0
        if lb is not None and (self.best_lb is None or lb > self.best_lb):
            self.best_lb, self.cert_y = lb, lb_y
        return lb

    def _repair_may_certify(self, y_: np.ndarray, tol: float) -> bool:
        r"""Whether the targeted repair of the scaled multiplier ``y_`` could certify ``tol``. The
        repair only shrinks multipliers, and no bound of a multiplier y exceeds :math:`\delta^\top y`
        (weak duality at M = 0), so its bound is at most :math:`\delta_+^\top y` (:math:`\delta_+`
        the positive part of the margins)."""
        cap = float(np.maximum(self.delta, 0.0) @ (y_ / self.s))
        return relative_gap(self.best_f, cap) <= tol

    def _polished_bound(self, sc: _Score, y: np.ndarray, KTy: np.ndarray, tol: float) -> tuple:
        r"""The bound of the candidate's multiplier made complementary to its point (no repair):
        ``(bound or None, multiplier, ok)``; ``(None, None, False)`` where no polish was planned.
        ``ok``: the polished dual matrix was PSD up to ``tol``, i.e. the bound (trace or theta
        rule) is within ``tol`` of the polished multiplier's own value :math:`\delta^\top y`.
        The polish corrects itself where it failed
        (:func:`cvxmetric.hinge_certificates.polish_corrected`: a larger free set, or the range
        with the dual matrix's negative directions); the next polish starts with the free
        multipliers per equation of its last solve."""
        plan = self._plan
        if plan is None:
            return None, None, False
        # corrected only where the first solve's value could certify within POLISH_CORRECT_GAP tol
        floor = self.best_f - POLISH_CORRECT_GAP * tol * abs(self.best_f)
        out = polish_corrected(self.model, sc.M, y, plan, Ky=KTy, margins=sc.t, max_cost=self._correction_allowance,
                               correct_above=floor)
        self.repair_cost += plan.cost + out.extra_cost + self.model.geometry.product_cost("Kt")
        self.n_polishes += 1
        if out.complementary or not out.solved:   # the free set that solved them, or the largest tried
            self.polish_free_factor = max(self.polish_free_factor, out.plan.n_free / out.plan.n_eq)
        b, yb = self.model.certify(out.y, upper=self.best_f, repair_steps=0)
        dy = float(self.delta @ out.y)   # its value were S exactly PSD
        return b, yb, b is not None and relative_gap(dy, b) <= tol

    def check(self, tol: float, callback=None) -> tuple:
        """Score the current iterate and the average, keep the best point and bound; returns the
        restart candidate's score and whether it is the average."""
        self.n_checks += 1
        # where steps updated K'* y (INCREMENTAL_ADJOINT), the current point's and the average's are
        # recomputed as full products: scores and certificates read products, not chains of updates
        # (matrix-free checks form only the proven point's, in _certify_matrix_free)
        if not self._KTy_exact and not self.matrix_free:
            self.KTy, self._KTy_exact, self._KTy_stale = self.op.adjoint(self.y), True, False
        if not self._KTy_sum_exact and not self.matrix_free:
            self.KTy_sum, self._KTy_sum_exact = self.op.adjoint(self.y_sum), True
        cur = self.score(self.M, self.y, self.KM, self.KTy, self.norm2)
        avg_pt = self._average() if self.w_sum > 0 else None
        avg = self.score(*avg_pt) if avg_pt is not None else cur
        cand = avg if avg.err < cur.err else cur
        is_avg = cand is avg
        # the ray minimum (one selection over the m margins) of the point with the lower objective only
        ray_avg = avg is not cur and avg.f < cur.f
        self._keep_best(cur, self.KM, ray=not ray_avg)
        if avg is not cur:
            self._keep_best(avg, avg_pt[2], ray=ray_avg)
        # bounds of both points without the targeted repair; the repair (a few passes over the
        # constraints) only for the better-scored point, and only while the bound is not yet tight
        avg_KTy = avg_pt[3] if avg_pt is not None else self.KTy
        if self.matrix_free:
            cur_KTy = self.KTy if self._KTy_exact else None
            lb = self._certify_matrix_free(((cur_KTy, self.y, cur),) + (((avg_KTy, avg.y, avg),) if avg is not cur else ()))
        else:
            lb = self.certify(((self.KTy, self.y, cur), (avg_KTy, avg.y, avg)), tol, self.repair_due(cand, tol))
        self.history.append(cur.f)
        self.trace.append((self.n_iter, time.perf_counter() - self.t_start, cur.f, avg.f, lb, cand.rel_dual,
                           cand.rel_gap, cand.err, is_avg, self.best_f))
        self.last = cand
        self._avg_point = avg_pt
        if callback is not None:
            callback(self.n_iter, self.M if self.congruence is None else self.congruence.point(self.M), cur.f)
        return cand, is_avg

    def _keep_best(self, sc: _Score, KM_: np.ndarray, ray: bool = True) -> None:
        """Keep the scored point, or (with ``ray``) its best multiple on its ray where that is lower
        (``BEST_ON_RAY``, q = 0: :meth:`~cvxmetric.models.HingeModel.ray_minimum`), if it beats the
        best objective so far."""
        f, M_ = sc.f, sc.M
        if ray and BEST_ON_RAY and self.q == 0 and sc.norm2 > 0:
            alpha, f_ray = self.model.ray_minimum(float(np.vdot(self.R, sc.M)), KM_ * self.s)
            if f_ray < f and f_ray < self.best_f:
                f, M_ = f_ray, alpha * sc.M
        if f < self.best_f:
            self.best_f, self.best_M = f, M_

    def converged(self, cand: _Score, residual_tol: float, tol: float, robust: bool):
        """The stopping rule (module docstring): None, or how it stopped ("certificate" or "kkt")."""
        cert_gap = relative_gap(self.best_f, self.best_lb)
        kkt_ok = max(cand.rel_dual, cand.rel_err) <= residual_tol
        if cert_gap <= min(residual_tol, tol) or (kkt_ok and (cert_gap <= tol or not robust)):
            return "certificate" if cert_gap <= tol else "kkt"
        return None

    # ------------------------------------------------------------------ restarts
    def restart_due(self, cand: _Score) -> bool:
        """cuPDLP's restart tests (sufficient, necessary and artificial decay); records the candidate."""
        due = (cand.err <= BETA_SUFFICIENT * self.err_last
               or (cand.err <= BETA_NECESSARY * self.err_last and cand.err > self.err_prev_cand)
               or (self.n_iter - self.cycle_start) >= BETA_ARTIFICIAL * self.n_iter)
        self.err_prev_cand = cand.err
        return due

    def restart(self, cand: _Score, is_avg: bool) -> None:
        """Restart to the candidate (the average or the current point) and rebalance the primal weight."""
        self.n_restarts += 1
        if is_avg:
            M, y, KM, KTy = self._avg_point
            self.M, self.y, self.KM = M, y, KM
            if KTy is None:     # not formed (matrix-free checks): the next dense step or check forms it
                self._KTy_exact, self._KTy_stale = False, True
            else:
                self.KTy = KTy
            self._factor = None
        self.norm2 = cand.norm2
        M, y = self.M, self.y
        dMn = float(np.linalg.norm(M - self.M_last))
        dyn = float(np.linalg.norm(y - self.y_last))
        sizeM = max(float(np.linalg.norm(M)), float(np.linalg.norm(self.M_last)))
        sizey = max(float(np.linalg.norm(y)), float(np.linalg.norm(self.y_last)))
        if dMn > MOVE_RTOL * sizeM and dyn > MOVE_RTOL * sizey:
            theta = 1.0 if self.n_weight_updates < PRIMAL_WEIGHT_WARMUP else PRIMAL_WEIGHT_SMOOTHING
            self.omega = math.exp(theta * math.log(dyn / dMn) + (1.0 - theta) * math.log(self.omega))
            self.n_weight_updates += 1
        self.M_last, self.y_last = M.copy(), y.copy()
        self.rho = cand.norm2
        self.err_last = cand.err
        self.err_prev_cand = math.inf
        self.cycle_start = self.n_iter
        self._reset_average()

    # ------------------------------------------------------------------ result
    def result(self, *, stop_reason: str, stopped_by, tol: float, robust: bool,
               norm_K, solver_name: str, warn: bool) -> SolverResult:
        """The result contract (see :func:`pdhg`, Returns)."""
        model, s = self.model, self.s
        last = self.last if self.last is not None else self.score(self.M, self.y, self.KM, self.KTy, self.norm2)
        kkt_value = max(last.rel_dual, last.rel_err)
        best_lb = self.best_lb
        certified = best_lb is not None and (robust or relative_gap(self.best_f, best_lb) <= tol)
        if certified:
            M_out, y_out = self.best_M.copy(), self.cert_y.copy()   # copies: the state may go on
            measure, measure_value = "certified_gap", None
        else:   # no dual bound for this model: the relative KKT residual of the point it was measured at
            M_out, y_out = last.M.copy(), last.y / s
            measure, measure_value = "kkt_residual", kkt_value
        if self.row_order is not None:   # the rows in their given order (same point, same bound)
            model, order = self.row_order
            y_out = _unpermuted(y_out, order)
        if self.congruence is not None:   # the original's point and objective (same bound, same rows)
            M_out = self.congruence.point(M_out)
            model = self.congruence.original
        objective = model.value(M_out)
        lb_out = best_lb if certified else None
        # make_result derives the verdict (a loop that stopped on its own test but whose measure
        # does not pass is "not_certified"); info["stop_reason"] repeats its status
        detail = (f"objective {objective:.6g}, lower bound {'none' if lb_out is None else format(lb_out, '.6g')}, "
                  f"relative dual residual {last.rel_dual:.2g}, relative restart error {last.rel_err:.2g}")
        res = make_result(solver_name, objective=objective, measure=measure, tol=tol,
                           stop_reason=stop_reason, M=M_out, measure_value=measure_value, lower_bound=lb_out,
                           multipliers=y_out, n_iter=self.n_iter, history=list(self.history),
                           time=time.perf_counter() - self.t_start, detail=detail, warn=warn,
                           info={"y": y_out, "lower_bound": lb_out,
                                 "certified_gap": None if lb_out is None else relative_gap(objective, lb_out),
                                 "dual_residual": last.rel_dual, "lagrangian_gap": last.rel_gap,
                                 "kkt_residual": kkt_value, "stopped_by": stopped_by,
                                 "restarts": self.n_restarts, "rejected_steps": self.rejected,
                                 "primal_weight": self.omega, "step_size": self.eta, "operator_norm": norm_K,
                                 "checks": self.n_checks, "repairs": self.n_repairs, "polishes": self.n_polishes,
                                 "repair_seconds": self.repair_time,
                                 "start_seconds": self.start_time,
                                 "adjoint_updates": self.op.n_updates,
                                 "lowrank_steps": self.lowrank_steps,
                                 "matrix_free_checks": self.matrix_free, "proofs": self.proofs,
                                 "adjoint_update_rows": self.op.updated_rows / max(self.op.n_updates, 1),
                                 "congruence_factors": (None if self.congruence is None
                                                        else self.congruence.D.copy()),
                                 "trace": list(self.trace)})   # copies: the state may go on
        res.info["stop_reason"] = res.status
        return res


def pdhg(model: HingeModel, *, M0=None, y0=None, max_iter: int = 100_000, tol: float = DEFAULT_TOL,
         residual_tol: Optional[float] = None,
         time_limit: Optional[float] = None, check_every: int = CHECK_EVERY, primal_weight=None,
         step_size=None,
         restarts: bool = True, adaptive_step: bool = True, equilibrate: bool = True, seed=0,
         solver_name: str = "pdhg", callback: Optional[Callable[[int, np.ndarray, float], None]] = None,
         warn: bool = True, state: Optional[PDHGState] = None, projection: str = "auto",
         checks: str = "auto") -> SolverResult:
    r"""Minimise a hinge model over the PSD cone by restarted, adaptive PDHG.

    Parameters
    ----------
    model : HingeModel
        :math:`f(M) = \langle R, M\rangle + \tfrac q2\|M\|_F^2 + \sum_c c_c [\delta_c + \langle M, A_c\rangle]_+`.
    M0 : array_like, shape (d, d), optional
        PSD primal start (default 0).
    y0 : array_like, shape (m,), optional
        Dual start in :math:`[0, c]` (default 0): the hinge multipliers. A given ``y0`` makes the
        start ``(M0, y0)`` scored and certified before the first step (one check): a start the
        stopping rule accepts is returned after 0 iterations.
    max_iter : int
        Iteration limit (rejected adaptive steps count); hitting it (or ``time_limit``) issues a
        :class:`~cvxmetric.exceptions.ConvergenceWarning`.
    tol : float
        What ``converged`` is held to: the certified relative gap (the relative KKT residual where
        no certificate exists; module docstring).
    residual_tol : float, optional
        Tolerance of the stopping rule's residual test (module docstring); default
        ``RESIDUAL_TOL_FRACTION * tol``.
    time_limit : float, optional
        Wall-clock limit in seconds.
    check_every : int
        Iterations between restart/termination checks.
    primal_weight : float, optional
        Initial primal weight :math:`\omega` (default :math:`\|R\|_F / \|\delta'\|_2`, or
        :math:`\|c'\|_2 / \|\delta'\|_2` when R = 0); restarts rebalance it, the first
        ``PRIMAL_WEIGHT_WARMUP`` of them to the measured ratio outright.
    step_size : float, optional
        Initial step size :math:`\eta` (default :math:`0.99/\|K\|_2`, with :math:`\|K\|_2` from a power
        iteration). Warm starts pass a previous run's ``info["step_size"]`` (and ``primal_weight``)
        and skip the power iteration; the adaptive rule corrects a step that is too large.
    restarts, adaptive_step : bool
        Switch off the restarts (plain averaging-free PDHG) or the adaptive step (constant
        :math:`\eta = 0.99/\|K\|_2`, the norm from ``POWER_ITERATIONS_CONSTANT_STEP`` power
        iterations), for ablations.
    equilibrate : bool
        Iterate on the congruent twin :math:`M = D M' D` whose operator columns are equilibrated
        (:func:`equilibration`; module docstring), where it applies and pays; the result is mapped
        back exactly (``M``, ``objective`` of ``model``; the bound and multipliers are the same).
        ``step_size`` and ``primal_weight`` (given or reported) are the twin's. False: always
        ``model`` itself.
    seed : int or Generator
        Seeds the power iteration and the starting basis of the low-rank projection.
    solver_name : str
        Name recorded in the result.
    callback : callable, optional
        ``callback(iteration, M, objective)`` at every check (current iterate).
    warn : bool
        Issue a :class:`~cvxmetric.exceptions.ConvergenceWarning` when not converged (an outer
        loop that reports through its own result passes False).
    projection : {"auto", "dense", "lowrank"}
        How a step projects onto the PSD cone: ``"dense"`` forms :math:`K'^* y` and the d x d step
        matrix and takes its positive eigenpairs (``eigh``); ``"lowrank"`` tracks them matrix-free
        by one block Rayleigh-Ritz step per iteration on a warm basis (:meth:`PDHGState.step`);
        ``"auto"`` takes, at every step, the cheaper one by the cost model
        (:func:`cvxmetric.hinge.projection_costs`) at the current rank, where the dense step's
        ``eigh`` is at least ``LOWRANK_MIN_EIGH_SHARE`` of it. Not read with ``state``
        (the state keeps its own).
    checks : {"auto", "dense", "matrix_free"}
        How a check reads the dual matrix :math:`S = R + K^* y` of its two points: ``"dense"``
        forms it and takes its eigenvalues (scores and certificate from ``eigvalsh``);
        ``"matrix_free"`` (q = 0 and R a positive multiple of the identity only) scores both
        points by block Rayleigh-Ritz steps on S's negative eigenspace through the data and proves
        one bound by a single Cholesky factorization (:meth:`PDHGState._certify_matrix_free`; no
        targeted repair nor polish); ``"auto"`` takes the cheaper by the cost model
        (:func:`check_costs`). Either way every bound is proven. Not read with ``state``.
    state : PDHGState, optional
        Continue from this state (:func:`start_state`, or its :meth:`PDHGState.rebind` onto
        ``model``: a working set's next round), advancing it in place, instead of starting cold:
        ``M0``, ``y0``, ``step_size``, ``primal_weight``, ``adaptive_step``, ``equilibrate`` and
        ``seed`` are then not read, and ``max_iter`` counts the iterations of this call.

    Returns
    -------
    SolverResult
        Built by :func:`cvxmetric.solvers.result.make_result`. With a certificate: ``measure ==
        "certified_gap"`` (held to ``tol``), ``M`` the PSD point with the lowest
        objective among the scored points, ``lower_bound`` the best bound, ``multipliers`` its
        hinge multipliers (shape (m,), in :math:`[0, c]`). Without one: ``measure ==
        "kkt_residual"`` (held to ``tol``), ``M`` and ``multipliers`` the point the residual was
        measured at, ``lower_bound`` None. ``objective = model.value(M)``, ``history`` the
        objective at each check, and ``info`` with ``y`` (= ``multipliers``), ``lower_bound``,
        ``certified_gap`` (:func:`cvxmetric.certificates.relative_gap`, or None), ``kkt_residual``,
        ``stopped_by`` ("certificate", "kkt" or None),
        ``dual_residual``, ``lagrangian_gap`` (relative), ``restarts``, ``rejected_steps``,
        ``primal_weight``, ``step_size``, ``operator_norm``, ``checks``, ``repairs`` (targeted
        repairs of the certificate), ``polishes`` (complementarity polishes), ``repair_seconds``
        (the wall-clock time of both), ``start_seconds`` (of the cold start: the start point's
        validation, the power iteration, the primal weight), ``adjoint_updates`` (steps whose
        :math:`K'^* y` was an update over the changed multipliers, ``INCREMENTAL_ADJOINT``) and
        ``adjoint_update_rows`` (their mean number of rows), ``matrix_free_checks`` (whether the
        checks read the dual matrix through the data, ``checks``) and ``proofs`` (their proven
        bounds), ``congruence_factors`` (the
        diagonal D of the equilibration, or None where it was not used), ``stop_reason``
        (= ``status``), and
        ``trace``: per check (iteration, seconds, f(current), f(average), lower bound or None,
        relative dual residual, relative Lagrangian gap, restart error, candidate is average, best
        objective so far: over the scored points and, with ``BEST_ON_RAY``, their rays).

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
    equilibrate = check_bool(equilibrate, "equilibrate")
    tol = check_positive(tol, "tol")
    residual_tol = (RESIDUAL_TOL_FRACTION * tol if residual_tol is None
                    else check_positive(residual_tol, "residual_tol"))
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    if primal_weight is not None:
        primal_weight = check_positive(primal_weight, "primal_weight")
    if model.m == 0:
        raise ValueError("model has no constraints; PDHG needs at least one hinge term")
    if not isinstance(projection, str) or projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}; got {projection!r}")
    if not isinstance(checks, str) or checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}; got {checks!r}")

    if state is not None:
        if not isinstance(state, PDHGState) or state.model is not model:
            raise ValueError("state must be a PDHGState of this model (start_state(model, ...), or a "
                             "state's rebind(model, ...))")
        return _run(state, max_iter, residual_tol, tol, time_limit, check_every, restarts, None, solver_name,
                    callback, warn, time.perf_counter())
    state, norm_K = _cold_state(model, M0, y0, step_size, primal_weight, adaptive_step, seed,
                                equilibration(model, seed) if equilibrate else None, projection, checks, sort_rows=True)
    return _run(state, max_iter, residual_tol, tol, time_limit, check_every, restarts, norm_K, solver_name,
                callback, warn, state.t_start, check_start=y0 is not None)


def start_state(model: HingeModel, *, M0=None, y0=None, step_size=None, primal_weight=None,
                adaptive_step: bool = True, seed=0, projection: str = "auto", checks: str = "auto") -> PDHGState:
    """The state :func:`pdhg` starts from (same options, same defaults), for a caller that continues
    it over several calls: ``pdhg(model, state=...)`` advances it in place, and
    :meth:`PDHGState.rebind` moves it onto another model (a working set's next round)."""
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    if primal_weight is not None:
        primal_weight = check_positive(primal_weight, "primal_weight")
    if not isinstance(projection, str) or projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}; got {projection!r}")
    if not isinstance(checks, str) or checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}; got {checks!r}")
    return _cold_state(model, M0, y0, step_size, primal_weight, check_bool(adaptive_step, "adaptive_step"), seed,
                       projection=projection, checks=checks)[0]


def _cold_state(model, M0, y0, step_size, primal_weight, adaptive_step, seed,
                congruence: Optional[HingeCongruence] = None, projection: str = "auto",
                checks: str = "auto", sort_rows: bool = False) -> tuple[PDHGState, Optional[float]]:
    """The cold start (validated start point, step size from a power iteration unless given, PDLP's
    primal weight unless given) and the operator norm estimate (None when not computed); on the
    twin of ``congruence`` where given (the start point mapped to it), and with ``sort_rows`` on its
    rows sorted by pair where ``ROW_ORDER`` applies (a state that :func:`pdhg` alone advances: a
    caller's state stays on the caller's model)."""
    t_start = time.perf_counter()
    M, y = _start(model, M0, y0)
    if congruence is not None:
        model, M = congruence.model, congruence.twin_point(M)
    row_order = None
    if sort_rows and ROW_ORDER and model.m >= ROW_ORDER_MIN_ROWS and model.geometry.operator_path("K")[0] == "points":
        order = model.geometry.pair_order()
        row_order = (model, order)
        model, y = model.permuted(order), y[order]
    estimate = step_size is None or not adaptive_step
    n_iter = POWER_ITERATIONS if adaptive_step else POWER_ITERATIONS_CONSTANT_STEP
    if (estimate and _norm_by_gram(model.geometry, n_iter)) or model.geometry.operator_path("K") == ("points", True):
        # the power iteration reads the points' Gram matrix, or K takes its n x n form (an n x n
        # product per call anyway): formed first, the row norms read it (measured at 10^6
        # constraints on 2,000 points: the Gram 0.01 s, the norms from its entries 0.17 s against
        # 0.27 s from difference vectors)
        model.geometry.points_gram()
    op = _ScaledOperator(model)
    if estimate:
        norm_K = _operator_norm(op, model, n_iter, seed, sample=adaptive_step) or 1.0
        eta = 0.99 / norm_K
    else:
        eta = check_positive(step_size, "step_size")
        norm_K = None
    if primal_weight is None:
        coef = np.asarray(model.coef, dtype=np.float64)
        omega = _initial_primal_weight(np.asarray(model.R, dtype=np.float64), coef * op.s,
                                       np.asarray(model.constraints.delta, dtype=np.float64) / op.s)
    else:
        omega = float(primal_weight)
    state = PDHGState(model, M, y, eta=eta, omega=omega, adaptive_step=adaptive_step, operator=op,
                      t_start=t_start, congruence=congruence, projection=projection, seed=seed, checks=checks,
                      row_order=row_order)
    state.start_time = time.perf_counter() - t_start
    return state, norm_K


def _run(state: PDHGState, max_iter, residual_tol, tol, time_limit, check_every, restarts, norm_K, solver_name,
         callback, warn, t_start, check_start: bool = False) -> SolverResult:
    """The iteration of :func:`pdhg` from ``state``: at most ``max_iter`` more iterations;
    ``check_start``: score and certify the start first (a given start that the stopping rule
    accepts is returned after 0 iterations)."""
    robust = state.model.has_certificate
    state.target_tol = tol
    stop_reason, stopped_by = "max_iter", None
    stop_at = state.n_iter + max_iter
    if check_start:
        stopped_by = state.converged(state.check(residual_tol, callback)[0], residual_tol, tol, robust)
        if stopped_by is not None:
            stop_at, stop_reason = state.n_iter, "converged"
    while state.n_iter < stop_at:
        if not state.step():
            continue
        if not state.norm2 <= ITERATE_MAX:   # diverged (or not finite): no later step is meaningful
            stop_reason = "stalled"
            break
        if state.n_iter % check_every and state.n_iter < stop_at:
            continue
        cand, is_avg = state.check(residual_tol, callback)
        stopped_by = state.converged(cand, residual_tol, tol, robust)
        if stopped_by is not None:
            stop_reason = "converged"
            break
        if time_limit is not None and time.perf_counter() - t_start > time_limit:
            stop_reason = "time_limit"
            break
        if restarts and state.restart_due(cand):
            state.restart(cand, is_avg)
    return state.result(stop_reason=stop_reason, stopped_by=stopped_by, tol=tol,
                        robust=robust, norm_K=norm_K, solver_name=solver_name, warn=warn)


def _unpermuted(y: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Multipliers of the permuted rows (row i is row ``order[i]``) in the rows' given order."""
    out = np.empty_like(y)
    out[order] = y
    return out


def _start(model: HingeModel, M0, y0) -> tuple[np.ndarray, np.ndarray]:
    """Validated starting point: PSD ``M0`` (default 0) and ``y0`` in the box (default 0)."""
    d, m = model.d, model.m
    coef = np.asarray(model.coef, dtype=np.float64)
    M = np.zeros((d, d)) if M0 is None else project_psd(as_square_symmetric(M0, "M0", d=d, psd=True))
    if y0 is None:
        return M, np.zeros(m)
    y0 = np.asarray(y0, dtype=np.float64)
    if y0.shape != (m,) or not np.all(np.isfinite(y0)):
        raise ValueError(f"y0 must be a finite array of shape ({m},); got shape {y0.shape}")
    if np.any(y0 < 0) or np.any(y0 > coef * (1 + 1e-12)):
        raise ValueError("y0 must lie in the box [0, model.coef]; clip it with np.clip(y0, 0, model.coef)")
    return M, np.clip(y0, 0.0, coef)


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
