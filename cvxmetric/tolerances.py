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

#: Squared lengths of difference vectors at or below this count as zero-length pairs.
ZERO_LENGTH_TOL = 1e-12

#: A matrix is in the Fantope F_k when its eigenvalues are in [-tol, 1 + tol] and its trace is
#: within tol of k: a projector built as V_k V_k^T from an eigendecomposition is off by ~1e-15,
#: a Fantope point returned by an interior-point SDP solve (Clarabel at 1e-7) by ~1e-8.
FANTOPE_TOL = 1e-6
