"""Every pass/fail threshold of the verification harness, in one place, with its reason.

Residuals and gaps are relative (see each check's docstring for the normalisation) unless
named ``ABS``. Gaps use the one denominator of :mod:`cvxmetric.certificates`
(``max(|a|, |b|)``, never ``max(1, ...)``), so every verdict is invariant under scaling the
objective.
"""

from cvxmetric.certificates import WRONG_CERTIFICATE_RTOL

#: Width of the certified ground-truth interval [lower, upper] (relative_gap) required for p* to
#: be usable. Clarabel at 1e-7 leaves intervals of ~1e-8..1e-7 after the dual repair; 1e-6 is
#: below every gap threshold a fast solver is held to (the tightest, GAP_NEWTON, is measured
#: against the interval's upper end). A row whose interval is wider still passes when the interval
#: proves its gap (harness._width_needed): the width a verdict needs, not more. MMC is held to
#: the same width (its fast gap tolerance is GAP_FIRST_ORDER): its KKT check reads the dual slack
#: stationarity implies, not the solver's psd dual (verification/methods/mmc.py); at 1e-8 no rung
#: certified breast-cancer subsets of 30-60 points (best widths 1.3e-8..4.1e-7). Measured at 1e-6
#: on MMC's default instances, seeds 0-6: widths 7e-11..3.7e-7, KKT residuals <= 2.6e-6.
TRUTH_RTOL = 1e-6

#: A matrix passed for scoring may differ from its transpose by this much relative to its largest
#: entry (round-off of L.T @ L, of a file written in text).
SYMMETRY_RTOL = 1e-8

#: value_at(point) (cvxpy's expression) vs the fast solver's own objective. Both evaluate the
#: same sums in float64; only summation order differs.
VALUE_AT_RTOL = 1e-9

#: SCS's second opinion vs the certified p*: its point (made feasible, scored with value_at) may be
#: this much above the interval's upper end, relatively. SCS runs at eps 1e-9 on the normalized
#: twin (cvxmetric.formulations.ladder); a first-order method's point, projected, keeps a ~1e-5 excess.
SOLVER_AGREEMENT_RTOL = 1e-4
#: ... relative to the larger of the two values, or, for an optimum far below the size of the
#: objective's terms, to SCS_AGREEMENT_FLOOR times that size (``Formulation.reference_value``, the
#: objective at M = 0): SCS's tolerances (eps 1e-9) are relative to the size of the data, so its
#: value is accurate to ~1e-9 of the terms, not of p*. The floor is the size at which an error of
#: 1e-9 of the terms reads as SOLVER_AGREEMENT_RTOL: 1e-9 / 1e-4. Measured on Qwise webpage-full with
#: X x 1e4: p* = 1.87e-8 beside terms of 2.31 (every quadruplet met by a metric of trace ~1e-8),
#: SCS 7.2e-10 above it (3.1e-10 of the terms): 3.7e-2 relative to p*, 3.1e-5 against the floor.
#: Where p* is of the terms' size the floor does not act (every default instance).
SCS_AGREEMENT_FLOOR = 1e-9 / SOLVER_AGREEMENT_RTOL

#: BoostMetric exp/logistic ground truth: Clarabel's duals y of the margin constraints against the
#: weights u(rho) of its own point (the stationarity in rho), relative to the largest weight.
#: Measured 2e-4 (wine-exp) and 9e-5 (circles-exp) while the certified interval of p* is 1e-8
#: wide: the exponential-cone duals converge more slowly than the value. A diagnostic of the
#: solver's duals, not of p*; 1e-3 still fails duals of another problem or with a sign error.
#: ITML's slack stationarity reads exponential-cone duals too and is held to the same threshold.
KKT_TRUTH_DUAL_WEIGHTS = 1e-3

#: Largest ground-truth KKT residual (primal/dual feasibility, complementary slackness,
#: stationarity) computed from Clarabel's duals; Clarabel solves to 1e-7.
KKT_TRUTH_TOL = 1e-5

#: Relative optimality gap (f_fast - p*) / max(1, |p*|) of first-order (subgradient) solvers.
GAP_FIRST_ORDER = 1e-3

#: Relative optimality gap of Newton-type solvers on smooth problems.
GAP_NEWTON = 1e-6

#: A fast solution may beat a single Clarabel solve's *reported* (uncertified) value by this much,
#: relatively (Clarabel's own accuracy at 1e-7): used where a test compares with one solve.
GAP_NEGATIVE_SLACK = 1e-6

#: A feasible point's value may fall below a *certified* lower bound by this much, relatively: the
#: round-off of evaluating both (value_at through cvxpy, the bound through eigenvalues). More
#: means a definition drift, an infeasible point or a wrong certificate (also: a fast solver's
#: lower bound above the ground truth's upper end). The core's constant, shared with the solvers'
#: result contract and the solve ladder.
BELOW_LOWER_BOUND_RTOL = WRONG_CERTIFICATE_RTOL

#: Smallest eigenvalue of a returned M, relative to max(1, ||M||_2): fast solvers project
#: onto the PSD cone, so only round-off is allowed.
PSD_FEASIBILITY_TOL = 1e-9

#: KKT residual of a fast solver's point (distance from 0 to the subdifferential plus normal
#: cone, relative), checked for PDHG points (measured 1e-11..6e-4); Newton points meet
#: KKT_FAST_NEWTON. A subgradient iterate's residual is *reported, not checked* (FastSolver
#: kkt_tol=None): on a nonsmooth objective a point certified within 5e-4 of p* can sit at any
#: distance from its own subdifferential (measured 0.10..0.12 on seeds 2-4 at certified gaps
#: <= 5e-4), so the residual is no optimality measure there; the certified gap is.
KKT_FAST_FIRST_ORDER = 1e-1
KKT_FAST_NEWTON = 1e-6

#: For the fast point's KKT problem (measured: a subgradient point at a 2e-4 gap has margins
#: off by up to ~1e-2 on constraints that are tight at the optimum): a hinge constraint whose margin is within
#: TIGHT_RTOL * max(|delta_c|, |<M, A_c>|) of 0 is "tight" (its multiplier is free in [0, c]); an
#: eigenvalue of M at or below NULLSPACE_RTOL * max(1, lambda_max) spans the null space
#: where the normal-cone matrix may live.
TIGHT_RTOL = 1e-2
NULLSPACE_RTOL = 1e-4

# ----------------------------------------------------------------------------- Fantope theorem
#: |<W(M), M> - R(M)|, |R(M) - LMO SDP value| and |R(M) - cvxpy.lambda_sum_smallest|, relative to
#: max(1, ||M||_2): eigh is exact to ~1e-15; the SDPs (Clarabel at 1e-7) to ~1e-8.
FANTOPE_VALUE_RTOL = 1e-6

#: Supergradient inequality R(M) + <F, X - M> - R(X) >= -tol, relative to max(1, ||M||_2, ||X||_2):
#: exact arithmetic gives >= 0; eigenvalue round-off is ~1e-14 (random X), Clarabel's adversarial
#: optimum is accurate to ~1e-7 of the trace bound tau.
SUPERGRADIENT_TOL = 1e-6

#: A matrix that is *not* in the LMO argmin (the projector onto the k largest eigenvectors)
#: must have an adversarial value below -FANTOPE_SEPARATION (relative): on the test matrices the
#: value is R(M) - <F, M> = -(sum of the k largest minus the k smallest eigenvalues), O(1).
FANTOPE_SEPARATION = 1e-3

#: ||A_LMO - W(M)||_F when the eigengap is positive: Clarabel's interior solution approaches the
#: unique vertex to ~sqrt(1e-7 / gap); 1e-3 is met with gaps above ~1e-1 (the test matrices').
LMO_SOLUTION_TOL = 1e-3

#: Width eps of the "epsilon-optimal face" of the LMO, relative to max(1, ||M||_2). With a positive
#: eigengap g the face's spread is <= eps / g (+ solver accuracy FACE_SPREAD_SLACK); with a zero
#: eigengap it is >= FACE_SPREAD_MIN (a one-vector swap inside the repeated eigenspace gives 1).
FACE_EPS = 1e-6
FACE_SPREAD_SLACK = 1e-5
FACE_SPREAD_MIN = 0.5
#: The cvxpy cross-check of a directional derivative minimises <D, A> over an eps-optimal face
#: (eps = FACE_EPS_DIRECTIONAL * max(1, ||M||_2); Clarabel reports "optimal_inaccurate" on thinner
#: slivers). That minimum is <= the exact face minimum (up to solver accuracy,
#: SUPERGRADIENT_TOL) and above it by at most FACE_DIRECTIONAL_C * sqrt(eps) * ||D||: a rotation
#: by theta off the face costs theta^2 * gap in <M, A> and moves <D, A> by O(theta ||D||); the
#: zero-gap test matrices have all other gaps >= 1. Measured: 0.3..0.5 * sqrt(eps) at d = 4..16.
FACE_EPS_DIRECTIONAL = 1e-4
FACE_DIRECTIONAL_C = 4.0

#: One-sided directional derivative of R by forward differences with step t = FD_STEP * scale:
#: truncation error ~ t ||D||^2 / (next eigengap) ~ 1e-6, round-off ~ 1e-16 / t; compared with
#: min over the superdifferential (closed form and cvxpy) to DIRECTIONAL_TOL (relative).
FD_STEP = 1e-7
DIRECTIONAL_TOL = 1e-4
#: A kink: R'(M; D) + R'(M; -D) must be below -KINK_MIN * ||D||_2 at a zero eigengap.
KINK_MIN = 1e-3

#: MM monotonicity: phi(M^{n+1}) - phi(M^n) <= tol * max(1, |phi|). The reference MM's bounds are
#: solved by Clarabel to 1e-7; the fast MM is monotone exactly (best point kept, warm start).
MM_MONOTONE_RTOL = 1e-6
#: MM fixed point: (phi(M*) - min_M bound(M; W(M*))) / max(1, |phi|): the exact bound minimum can
#: only be lower; at an MM fixed point it is lower by no more than the solver accuracy plus the
#: MM stopping tolerance (1e-6 per step).
MM_FIXED_POINT_RTOL = 1e-5
#: Fast MM vs reference MM final phi, and fast inner optimum vs cvxpy optimum of the same bound.
FANTOPE_MM_GAP = 1e-3
#: Alg. 2 (subgradient on the non-convex phi) vs the reference MM: the two are local methods on a
#: DC objective without a common optimality certificate; measured 1e-4..3e-4 on the defaults.
FANTOPE_ALG2_GAP = 1e-2

#: Relative optimality gap of the ITML Bregman solver. ITML is smooth and strictly convex; the
#: solver stops on its own certified gap (cvxmetric.solvers.itml.DEFAULT_TOL = 1e-12, measured final gaps
#: 4e-14..5e-13), so 1e-5 only leaves room for the ground truth's interval while still failing
#: any solver that stops early or drifts.
GAP_BREGMAN = 1e-5

#: Agreement of the Bregman multipliers with the closed-form multipliers of the returned M,
#: squared: the relative stationarity residual of the fast point is about the square root of the
#: certified gap (1e-6 at a gap of 1e-12), and the multipliers inherit it; 1e-6 ** 0.5 = 1e-3.
KKT_FAST_BREGMAN = 1e-6

#: BoostMetric hinge (column generation vs the certified ground truth), relative gap: the
#: acceptance bound of the method (design §5.6). Column generation stops at its own certified gap
#: (cvxmetric.solvers.boostmetric_cg, 1e-7), so only the ground truth's interval width remains.
GAP_BOOSTMETRIC_HINGE = 1e-6

#: |tr X - 1| of the hinge solution (X is normalised by its trace: round-off only).
TRACE_ONE_TOL = 1e-9

#: Exponential/logistic BoostMetric, totally corrective (L-BFGS-B over all weights): the
#: acceptance bound (design §5.6). Measured 1e-9 (exp) and 3e-7 (logistic).
GAP_BOOSTMETRIC_SMOOTH = 1e-4

#: Stage-wise BoostMetric (the paper's algorithm 3) never lowers a weight, so it stops where no
#: rank-one direction can be *added* (lambda_max <= nu) without being optimal: measured gaps
#: 2e-3 (iris, exp), 6.5e-2 (iris, logistic), 3.6e-1 (wine, logistic, nu = 2). Reported with this
#: loose bound, which only catches a broken line search or pricing.
GAP_BOOSTMETRIC_STAGEWISE = 5e-1

#: KKT residual of a smooth-loss BoostMetric point (verification/methods/boostmetric.py _kkt_fast:
#: dual feasibility of G = nu I - A(u) over its terms, complementarity <G, X> over |f|). Measured on
#: the six smooth default instances: <= 1.1e-8 (totally corrective) and <= 2.7e-7 (FISTA) at their
#: converged points; >= 8.6e-3 at points 4e-3 or more above p* (X* times 2 or 1/2, X = 0, the top
#: eigenpair alone): tests/test_verdicts.py, test_boostmetric_kkt_fast_*.
KKT_FAST_BOOSTMETRIC = 1e-3

# ----------------------------------------------------------------------------- MMC


#: MMC scale identity on the ground truth: |p*_min (p*_max)^2 - 1|, p*_min certified, p*_max the
#: ray value of Clarabel's max-form point on the normalized data (verification/methods/mmc.py).
#: Measured on iris, wine and syn-blobs with X x 1e-4, 1 and 1e4: 3e-10 .. 1.4e-7.
MMC_SCALE_IDENTITY_RTOL = 1e-5

#: MMC scale identity on the fast solver's own numbers: |f_fast * p_max^2 - 1|. The exact
#: projection leaves <M_max, C_S> within PROJECTION_RTOL = 1e-12 of 1, so only round-off remains.
MMC_SCALE_IDENTITY_FAST_RTOL = 1e-9

# ----------------------------------------------------------------------------- ORML
#: Width of ORML's certified ground-truth interval and the per-direction gap of the closed form
#: (eq. 21) against it. Every direction is a least-squares problem: the dual bound repaired by a
#: projection onto ker G^T is the optimum up to round-off, and Clarabel's point is within ~1e-12
#: of it (measured 0 to 3e-12 on syn-sessions and digits-sessions), so 1e-8 only absorbs
#: ill-conditioned directions.
ORML_TRUTH_RTOL = 1e-8
GAP_ORML = 1e-8

#: Relative distance between each direction's closed-form minimiser and Clarabel's point. Each
#: direction is strongly convex (cond(G_d) measured 2..50 on the default instances) and Clarabel's
#: points agree with the closed forms to 1e-14..6e-13; 1e-8 leaves room for worse conditioning.
ORML_ARGMIN_RTOL = 1e-8

#: Orthogonality of the pursuit's directions, max_{i != j} |cos(u_i, u_j)|: the bases are projected
#: twice against an orthonormal basis of the previous directions, leaving round-off only
#: (measured ~1e-16..1e-15).
ORML_ORTHOGONALITY_TOL = 1e-10

#: Eq. 16 on the ideal output: similar pairs are at distance exactly 0 (the same floats are copied);
#: dissimilar pairs at distance >= 1, each coordinate difference being >= 1/sqrt(r) in floating
#: point too, so 1 - min distance can only be the rounding of a sum of r squares and a sqrt.
ORML_EQ16_DISSIMILAR_RTOL = 1e-14

#: The paper's claim M = L + 2T >= 0 and S = Xc^T M Xc >= 0: smallest eigenvalue relative to the
#: largest. Both are exactly PSD (M = B^T B with one row per edge); eigvalsh of a matrix formed in
#: floats leaves -(a few) eps ||.|| (measured ~1e-16..1e-15).
ORML_PSD_RTOL = 1e-12

#: The paper's S = Xc^T (D - W + 2T) Xc (dense, eq. 8) against the edge factor F^T F the model and
#: the cvxpy problem use: relative max-entry difference, round-off of two summation orders.
ORML_S_FACTOR_RTOL = 1e-12

#: Relative stationarity residual of the normal equations, ||G^T (G w - h)|| / (||G^T G w|| +
#: ||G^T h||), at Clarabel's point (truth, KKT_TRUTH_TOL) and at the closed form (fast): a Cholesky
#: solve leaves round-off times the condition number of H (measured <= 1e-12).
KKT_FAST_ORML = 1e-9
