"""Every pass/fail threshold of the verification harness, in one place, with its reason.

Residuals and gaps are relative (see each check's docstring for the normalisation) unless
named ``ABS``.
"""

#: value_at(point) (cvxpy's expression) vs the fast solver's own objective. Both evaluate the
#: same sums in float64; only summation order differs.
VALUE_AT_RTOL = 1e-9

#: Clarabel vs SCS optimal values, |p_C - p_S| / max(1, |p_C|). SCS runs at eps 1e-7
#: (formulations.base.SOLVER_OPTIONS) and its M is projected onto the PSD cone before scoring.
SOLVER_AGREEMENT_RTOL = 1e-4

#: Largest ground-truth KKT residual (primal/dual feasibility, complementary slackness,
#: stationarity) computed from Clarabel's duals; Clarabel solves to 1e-7.
KKT_TRUTH_TOL = 1e-5

#: Relative optimality gap (f_fast - p*) / max(1, |p*|) of first-order (subgradient) solvers.
GAP_FIRST_ORDER = 1e-3

#: Relative optimality gap of Newton-type solvers on smooth problems.
GAP_NEWTON = 1e-6

#: A fast solution may beat Clarabel's p* by this much (Clarabel's own accuracy); more means a
#: definition drift or an infeasible point and fails the gap check.
GAP_NEGATIVE_SLACK = 1e-6

#: Smallest eigenvalue of a returned M, relative to max(1, ||M||_2): fast solvers project
#: onto the PSD cone, so only round-off is allowed.
PSD_FEASIBILITY_TOL = 1e-9

#: KKT residual of a fast solver's point (distance from 0 to the subdifferential plus normal
#: cone, relative). A subgradient method's iterate is only approximately stationary: its
#: residual is reported with this loose threshold; Newton points meet KKT_FAST_NEWTON.
KKT_FAST_FIRST_ORDER = 1e-1
KKT_FAST_NEWTON = 1e-6

#: For the fast point's KKT problem (measured: a subgradient point at a 2e-4 gap has margins
#: off by up to ~1e-2 on constraints that are tight at the optimum): a hinge constraint whose margin is within
#: TIGHT_RTOL * max(1, |delta|) of 0 is "tight" (its multiplier is free in [0, c]); an
#: eigenvalue of M at or below NULLSPACE_RTOL * max(1, lambda_max) spans the null space
#: where the normal-cone matrix may live.
TIGHT_RTOL = 1e-2
NULLSPACE_RTOL = 1e-4

#: MMC scale identity on the ground truth: |p*_min (p*_max)^2 - 1| with both forms solved by
#: Clarabel at 1e-7 (measured 7e-9 on iris, 3e-7 on wine).
MMC_SCALE_IDENTITY_RTOL = 1e-5

#: MMC scale identity on the fast solver's own numbers: |f_fast * p_max^2 - 1|. The exact
#: projection leaves <M_max, C_S> within PROJECTION_RTOL = 1e-12 of 1, so only round-off remains.
MMC_SCALE_IDENTITY_FAST_RTOL = 1e-9

#: A certified lower bound (MMC's concavity certificate) may exceed Clarabel's p* by at most
#: Clarabel's own relative accuracy; more would mean a wrong certificate.
CERTIFICATE_SLACK = 1e-6
