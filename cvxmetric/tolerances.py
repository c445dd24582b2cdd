"""Named numerical constants of the shared core (and their reasons).

The verification harness keeps its own pass/fail thresholds in
``verification/tolerances.py``; the constants here are the ones the numerics themselves need.
"""

#: Inputs that should be symmetric may differ from their transpose by this much relative to
#: their largest entry: round-off of a product such as ``L.T @ L`` stays well below it.
SYMMETRY_RTOL = 1e-8

#: A "PSD" input (a prior, a metric passed for scoring) may have a smallest eigenvalue down to
#: ``-PSD_INPUT_TOL * ||M||_2``: the round-off of an eigendecomposition-based projection.
PSD_INPUT_TOL = 1e-8

#: Eigenvalues of a PSD matrix at or below ``RANK_RTOL * lambda_max`` count as zero when a
#: numerical rank is reported (documented wherever a rank is printed).
RANK_RTOL = 1e-6

#: Two rows of X count as the same point (a zero-length difference vector, which every method
#: must reject or skip) when every feature differs by at most ZERO_LENGTH_RTOL times that
#: feature's largest magnitude max_r |X_rt| (see :func:`cvxmetric._checks.zero_length_mask`, the
#: one test of the project). Relative and per feature because no well-posed problem may be
#: rejected for its scale: the test gives the same answer for X, s * X and X @ diag(s) (feature
#: scales spanning 1e-4..1e4). The value sits well above the round-off that preprocessing leaves
#: on duplicated rows (centring, scaling or a product X @ L.T: a few ulps, ~1e-15 relative) and far
#: below any difference a data set resolves (12 significant digits).
ZERO_LENGTH_RTOL = 1e-12

#: The scales of data every method accepts: the largest magnitude of X at most DATA_SCALE_MAX and
#: its spread (the largest difference between two rows in a feature) at least DATA_SCALE_MIN
#: when it is not zero. The solvers form squared differences and their products (the Gram matrix
#: of the constraint matrices holds fourth powers of the data, summed over up to 10^7 constraints
#: and d^2 entries), which stay well inside float64's range (1e-308..1e308) at 2^+-130 (about
#: 1e+-39); outside it a learned metric, which scales as 1 / scale^2, would not be representable
#: either. Data outside the range get a ValueError that says so and how to rescale.
DATA_SCALE_MAX = 2.0 ** 130
DATA_SCALE_MIN = 2.0 ** -130


#: A matrix is in the Fantope F_k when its eigenvalues are in [-tol, 1 + tol] and its trace is
#: within tol of k: a projector built as V_k V_k^T from an eigendecomposition is off by ~1e-15,
#: a Fantope point returned by an interior-point SDP solve (Clarabel at 1e-7) by ~1e-8.
FANTOPE_TOL = 1e-6
