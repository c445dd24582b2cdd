r"""The certificate of the hinge model: its dual bound, the repair of multipliers, the polish.

:class:`~cvxmetric.models.HingeModel` states the objective; this module computes its one certified
lower bound from hinge multipliers (:meth:`~cvxmetric.models.HingeModel.dual_bound`, whose Notes
state the rules: the closed form for :math:`q > 0`; on the data span for :math:`q = 0`, exact dual
feasibility, the theta scaling, the trace bound) and the two ways of moving a multiplier towards
exact dual feasibility: the targeted repair of the negative curvature of
:math:`S = R + K^* y` (:func:`certify`) and the complementarity polish
(:meth:`~cvxmetric.models.HingeModel.complementary_multipliers`), with their tolerances.

The model's methods call these functions with itself as ``model``; the model caches the data span
(:func:`compute_basis`, :func:`compute_span`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.linalg

from ._checks import as_square_symmetric, check_positive
from .hinge import COST_DENSE, COST_GEMM
from .linalg import lambda_min_lower_bound, positive_eigenpairs, triu_indices

__all__ = ["PD_RTOL", "CROSS_RTOL", "EIG_ROUNDOFF", "THETA_SAFETY", "REPAIR_STEPS", "REPAIR_OVERSHOOT",
           "POLISH_RANK_RTOL", "POLISH_FREE_FACTOR", "POLISH_ROUNDS", "POLISH_CORRECTIONS", "POLISH_GROWTH",
           "POLISH_SOLVED_RTOL", "PolishOutcome", "polish_corrected", "POLISH_RIDGE", "POLISH_MEMORY_FLOOR",
           "POLISH_MEMORY_RATIO", "PolishPlan", "restrict", "polish_cost", "polish_bytes", "problem_bytes",
           "polish_memory_cap",
           "compute_basis", "compute_span", "trace_bound", "certify", "polish_plan", "complementary_multipliers"]

#: The linear term restricted to the data span counts as positive definite (the q = 0 theta
#: certificate and the trace bound from y = 0 need it) when its smallest eigenvalue exceeds this
#: times its largest magnitude: below it the Cholesky factor of the theta test is round-off.
PD_RTOL = 1e-10
#: The data span may replace the whole space in the q = 0 certificate when the cross block
#: :math:`(I - P) R P` of the linear term is at most this times :math:`\|R\|_F` and its
#: complement block :math:`(I - P) R (I - P)` has no eigenvalue below ``-CROSS_RTOL * ||R||_F``.
#: Both hold exactly for R built from the data (pull matrices) or a multiple of the identity,
#: up to the round-off of its construction (~1e-16 relative).
CROSS_RTOL = 1e-10
#: Eigenvalues of a symmetric matrix S computed by ``eigh`` are within ~d eps ||S||_2 of the exact
#: ones: an eigenvalue test of dual feasibility subtracts this times ``max |lambda|``.
EIG_ROUNDOFF = 1e-13
#: Safety factor on theta of the q = 0 certificate (absorbs the round-off of its eigenvalue).
THETA_SAFETY = 1.0 - 1e-9
#: Steps of the targeted multiplier repair of the q = 0 certificate (each: one eigendecomposition
#: on the span and one pass over the constraints; the repair stops as soon as S is PSD on the
#: span). Measured: on digits' LMNN (a PDHG multiplier at relative dual residual 2e-3, objective
#: 1471) theta alone certifies 967, 10 steps 1390 (S exactly PSD after 10); on Qwise syn-d5 with
#: X x 1e4 (trace weight 2e-9 of the hinge weights in the normalized twin; Clarabel's multipliers,
#: optimum 1138.812) theta certifies 1.1, 10 steps 206, 30 steps 1138.62.
REPAIR_STEPS = 30
#: The repair removes this multiple of the negative curvature per step (an overshoot of 5 %
#: ends the repair in fewer steps than an exact removal, whose round-off leaves -1e-17).
REPAIR_OVERSHOOT = 1.05
#: Complementarity polish (:meth:`~cvxmetric.models.HingeModel.complementary_multipliers`): eigenvalues of M below this
#: fraction of its largest are off its range. An average of iterates carries a tail of small
#: eigenvalues; measured on syn-d50-m10000 (PDHG candidates at every check): at 1e-6 the tail made
#: the rank 36-50 instead of 30 and the polish failed; 1e-4 and 1e-3 found the range at every check.
POLISH_RANK_RTOL = 1e-4
#: Slack subtracted from the trace bound on the rank (:func:`range_rank_lower_bound`) before it is
#: floored: far above the relative round-off (~k eps) of the trace and norm of a PSD point.
RANK_BOUND_SLACK = 1e-6
#: Free multipliers per complementarity equation (the constraints nearest their margin). Measured on
#: syn-d50-m10000: 1.3x and 1.5x left S indefinite after the box clamps at most checks; 2x and 3x
#: made S exactly PSD at every check from iteration 112 on (3x at 1.3x the time).
POLISH_FREE_FACTOR = 2.0
#: At most this many clamp rounds (each one Cholesky of the equations' Gram matrix); measured 4-6.
POLISH_ROUNDS = 8
#: Corrections of a polish that failed, each one more solve (:func:`polish_corrected`): where the
#: equations were left unsolved (the free set ran out of multipliers inside the box: more
#: constraints sit near their margin than it held, which grows with m) the free set grows by
#: ``POLISH_GROWTH``; where they were solved but the dual matrix is indefinite off the range V (the
#: point's range misses a direction of the solution's: its eigenvalue there is still below
#: ``POLISH_RANK_RTOL``) V takes the negative directions in. Measured with ``python -m
#: benchmarks.scale --sizes d50-m1e6`` (PDHG candidates at a relative objective error of 1e-5, rank
#: 31 of the solution's 32): twice the free multipliers solved the equations and left one negative
#: direction off V (-5 r); V with it certified 1.7e-4 where the plain polish read 0.94.
POLISH_CORRECTIONS = 2
#: ... the growth of the free set per correction.
POLISH_GROWTH = 2.0
#: The equations count as solved when the norm of their residual after the box clamps is at most
#: this times the Frobenius norm of the polished dual matrix on the span: a solve that ran through
#: leaves the ridge's round-off (measured 1e-14 of it at d = 50 with 10^6 constraints), one that ran
#: out of free multipliers leaves percents (measured 3e-2).
POLISH_SOLVED_RTOL = 1e-8
#: Rows per block when the polish forms its equations (a (block, d, r) product stays in cache).
POLISH_ROW_BLOCK = 128
#: Ridge of that Gram matrix, relative to its mean diagonal entry: the equations may be redundant
#: (rank-deficient data, repeated constraints); 1e-10 moves the solution by round-off only.
POLISH_RIDGE = 1e-10
#: The polish factors its Gram matrix in single precision first and refines the last round's
#: solution in double precision (the polish is a proposal, which ``certify`` judges; the Gram matrix
#: is well conditioned: 55 on syn-d50-m10000's first free set). Measured there (one BLAS thread):
#: the Gram syrk 53 -> 28 ms, each Cholesky factor 17 -> 11 ms, the downdates 17 -> 9 ms, the whole
#: polish 200 -> 130 ms; after two refinement steps the equations' residual is float64's (6e-11
#: relative, 6e-7 unrefined). A single-precision pass that cannot vouch for its result (a Cholesky
#: factor failed or spread beyond ``POLISH_SINGLE_MAX_SPREAD``, or the refinement did not reach
#: ``POLISH_REFINE_RTOL``) is redone in double.
#: The cost model (:meth:`~cvxmetric.models.HingeModel.polish_plan`) keeps the double-precision price: at half of it,
#: PDHG's repair budget admitted a second, earlier polish on syn-d50-m10000 that did not stop it
#: sooner (144 iterations either way).
POLISH_SINGLE_PRECISION = True
#: Ridge of the single-precision Gram matrix, relative to its mean diagonal entry: about eight
#: float32 epsilons, so that its Cholesky factor exists wherever the double one does up to a
#: condition of ~1e6 (the refinement removes its effect on the solution).
POLISH_RIDGE_SINGLE = 1e-6
#: Refinement steps of the last round's solution (each: one product with B and one with B^T in
#: double precision and one single-precision solve), and the relative residual of the normal
#: equations they must reach.
POLISH_REFINE_STEPS = 3
POLISH_REFINE_RTOL = 1e-10
#: The single-precision pass gives up at once when its first Cholesky factor's diagonal spreads
#: wider than this (its squared max/min ratio, a cheap lower estimate of the Gram matrix's
#: condition): the refinement would not reach ``POLISH_REFINE_RTOL``. Measured: 6 on
#: syn-d50-m10000 (condition 55), 1.1e5 on digits' LMNN, whose equations are redundant (condition
#: ~1e299), where the single pass ran all its rounds before its refinement failed (0.35 s instead
#: of 0.15 s for the polish).
POLISH_SINGLE_MAX_SPREAD = 1e4
#: The polish's memory, in bytes per entry of its arrays (:func:`polish_bytes`): the coefficients B
#: of the free multipliers (n_free x n_eq) in double precision and, for the single-precision pass,
#: a float32 copy (8 + 4), or in the double-precision pass a copy of B's free rows where a downdated
#: factor fails (8 + 8: the larger of the two); the Gram matrix (n_eq x n_eq) and the copy that
#: its Cholesky factor writes, in double precision at most (2 x 8).
POLISH_BYTES_PER_B_ENTRY = 16
POLISH_BYTES_PER_GRAM_ENTRY = 16
#: The polish is declined where its memory (:func:`polish_bytes`) exceeds the larger of
#: ``POLISH_MEMORY_FLOOR`` bytes and ``POLISH_MEMORY_RATIO`` times the problem's own
#: (:func:`problem_bytes`): its equations number r(r+1)/2 + r(k-r), up to d(d+1)/2, so its arrays
#: grow as d^4 while the problem's grow as n d + m (at d = 100 up to 5,050 equations and 10,100 free
#: multipliers, 1.2 GB; at d = 200 up to 20,100 equations, 19 GB). The floor admits every polish
#: measured to pay at d = 50 (1,065 equations; up to 8,520 free multipliers after ``POLISH_GROWTH``
#: at 10^6 constraints: 163 MB). Measured with ``python -m benchmarks.lmnn_scale --peers none``
#: (one BLAS thread; the final working set's polish, the cap, the run's peak memory with the
#: polish, without it): 20,000 points at d = 100, 4,522 equations and 0.98 GB against a cap of
#: 0.69 GB, peak 2.00 -> 1.34 GB; 3,000 points at d = 150, 9,047 equations and 3.9 GB against
#: 0.26 GB, peak 4.09 -> 1.34 GB (each at the same iterations, certified within its tol).
POLISH_MEMORY_FLOOR = 256e6
POLISH_MEMORY_RATIO = 4.0
#: Bytes per constraint of the problem (:func:`problem_bytes`): its two pairs' four row indices,
#: its offset and weight, a multiplier and a margin (8 numbers of 8 bytes).
PROBLEM_BYTES_PER_CONSTRAINT = 64

def _nonzero_or_inf(v: np.ndarray) -> np.ndarray:
    """v with its non-positive entries replaced by inf (a divisor that turns them into 0)."""
    return np.where(v > 0, v, np.inf)


def _svec_weights(r: int) -> np.ndarray:
    """Weights of the upper triangle of an r x r block in svec order (sqrt 2 off the diagonal),
    so that the Euclidean norm of the svec is the Frobenius norm of the block."""
    iu, ju = triu_indices(r)
    return np.where(iu == ju, 1.0, math.sqrt(2.0))


def _complementarity_vector(S_Q: np.ndarray, r: int) -> np.ndarray:
    """E of a dual matrix in the coordinates [V W]: svec of its V block, then its W x V block."""
    iu, ju = triu_indices(r)
    return np.concatenate([S_Q[iu, ju] * _svec_weights(r), S_Q[r:, :r].ravel()])


def _clamped_least_change(B: np.ndarray, e0: np.ndarray, y0: np.ndarray, upper: np.ndarray) -> np.ndarray:
    r"""The least change of ``y0`` (in ``[0, upper]``) that solves :math:`e_0 + B^\top (y - y_0) = 0`,
    kept in the box by clamping (see :meth:`~cvxmetric.models.HingeModel.complementary_multipliers`): the minimum-norm
    step on the free entries, :math:`B_F (B_F^\top B_F + \mu I)^{-1}(-e)`, entries that leave the box
    clamped and fixed, repeated on the rest (at most ``POLISH_ROUNDS`` rounds; the Gram matrix is
    downdated by the newly fixed rows). In single precision first (``POLISH_SINGLE_PRECISION``),
    in double where that pass cannot vouch for its result."""
    if POLISH_SINGLE_PRECISION:
        y = _clamped_rounds(B, e0, y0, upper, np.float32)
        if y is not None:
            return y
    return _clamped_rounds(B, e0, y0, upper, np.float64)


def _clamped_rounds(B: np.ndarray, e0: np.ndarray, y0: np.ndarray, upper: np.ndarray, dtype) -> Optional[np.ndarray]:
    """The rounds of :func:`_clamped_least_change` with the Gram matrix and its factors in ``dtype``;
    None from a single-precision pass that cannot vouch for its result (a factor failed or spread
    beyond ``POLISH_SINGLE_MAX_SPREAD``, or the refinement fell short). Rounds that run out with
    entries still leaving the box return the clamped point in either precision (the double pass
    would run out as well: measured on digits' LMNN, where redoing it in double doubled the
    polish's time). The single-precision Gram matrix is that of ``B / max|B|`` (no overflow or
    underflow at any scale of the data)."""
    single = dtype != np.float64
    b = float(np.abs(B).max(initial=0.0)) if single else 1.0
    if not (b > 0 and math.isfinite(b)):
        b = 1.0
    if single:     # B / b written straight into single precision (no double-precision temporary)
        B_f = np.empty(B.shape, dtype=dtype)
        np.divide(B, b, out=B_f, casting="same_kind")
    else:
        B_f = B
    n_eq = B.shape[1]
    ridge = POLISH_RIDGE_SINGLE if single else POLISH_RIDGE

    def gram(rows):
        Br = B_f[rows] if rows is not None else B_f
        G = Br.T @ Br      # one operand twice: numpy computes it as a symmetric rank-k update (syrk)
        G[np.diag_indices_from(G)] += ridge * float(np.trace(G)) / n_eq
        return G

    def solve(factor, rhs):   # of the unscaled system: G = (B^T B + mu I) / b^2
        # the right-hand side enters at unit size (a power of two: exact), its scale and 1/b^2 are
        # applied in double precision: rhs / b^2 leaves single precision's range for data far from 1
        r = float(np.abs(rhs).max(initial=0.0))
        r = 2.0 ** math.ceil(math.log2(r)) if r > 0 and math.isfinite(r) else 1.0
        z = scipy.linalg.cho_solve(factor, (rhs / r).astype(dtype)).astype(np.float64)
        return z * (r / (b * b))

    def moved(step):           # the free entries moved by step, and those that leave the box
        new = np.where(free, y + step, y)
        return new, free & ((new < 0.0) | (new > upper))

    y, free, G = y0.copy(), np.ones(y0.size, dtype=bool), gram(None)
    mu = POLISH_RIDGE * b * b * (float(np.trace(G)) / n_eq) / (1.0 + ridge)     # the double-precision ridge
    for k in range(POLISH_ROUNDS):
        try:
            factor = scipy.linalg.cho_factor(G)
        except np.linalg.LinAlgError:     # round-off of the downdates: rebuild from the free rows
            if single:
                return None
            G = gram(free)
            try:
                factor = scipy.linalg.cho_factor(G)
            except np.linalg.LinAlgError:
                break
        if single and k == 0:             # too ill-conditioned for the refinement: double at once
            diag = np.abs(np.diag(factor[0]))
            if float(diag.max()) ** 2 > POLISH_SINGLE_MAX_SPREAD * float(diag.min()) ** 2:
                return None
        rhs = -(e0 + B.T @ (y - y0))
        z = solve(factor, rhs)
        step = B @ z
        new, out = moved(step)
        if single and not np.any(out):   # the last round, unless the refined step leaves the box
            step = _refined_step(B, free, rhs, z, step, lambda r: solve(factor, r), mu)
            if step is None:
                return None
            new, out = moved(step)
        y = np.clip(new, 0.0, upper)
        if not np.any(out):
            return y
        free &= ~out
        B_out = B_f[out]
        G -= B_out.T @ B_out   # syrk, as above (B[out].T @ B[out] is two copies: a general product)
    return y


def _refined_step(B, free, rhs, z, step, solve, mu) -> Optional[np.ndarray]:
    r"""Iterative refinement of a single-precision solution z of :math:`(B_F^\top B_F + \mu I) z =`
    ``rhs`` in double precision (at most ``POLISH_REFINE_STEPS``, each one ``solve`` of the
    single-precision factor): the step :math:`B z` on the rows, or None when the residual does not
    reach ``POLISH_REFINE_RTOL``."""
    target = POLISH_REFINE_RTOL * float(np.linalg.norm(rhs))

    def residual(z, step):
        return rhs - B.T @ np.where(free, step, 0.0) - mu * z

    res = residual(z, step)
    for _ in range(POLISH_REFINE_STEPS):
        if float(np.linalg.norm(res)) <= target:
            return step
        z = z + solve(res)
        step = B @ z
        res = residual(z, step)
    return step if float(np.linalg.norm(res)) <= target else None


@dataclass(frozen=True)
class _Span:
    """The data span and the linear term on it (see :meth:`~cvxmetric.models.HingeModel.dual_bound`).

    ``U`` (d, r) is an orthonormal basis of the span of the data's difference vectors, or None
    when the restriction does not apply (full rank, or R couples the span to its complement);
    ``R_s = U^T R U``; ``chol_inv`` the inverse Cholesky factor of ``R_s`` when it is positive
    definite (else None); ``trace_sources`` the pairs ``(delta^T y', beta)`` of fixed multipliers
    y' with ``lambda_min(U^T (R + K^* y') U) = beta > 0``; ``R_scale`` the number r when
    ``R_s = r I`` exactly with r > 0 (the theta test then reads the eigenvalues of ``S_U`` divided
    by r, with no second eigendecomposition), else None.
    """

    U: Optional[np.ndarray]
    R_s: np.ndarray
    chol_inv: Optional[np.ndarray]
    trace_sources: tuple
    R_scale: Optional[float] = None



@dataclass(frozen=True, eq=False)
class PolishPlan:
    """A complementarity polish at one point (:meth:`~cvxmetric.models.HingeModel.polish_plan`): the basis ``Q = [V W]``
    of the data span with the range V of the point in its first ``r`` columns, the number of
    equations and of free multipliers, the modelled cost in seconds and the memory in bytes
    (:func:`polish_bytes`)."""

    Q: np.ndarray
    r: int
    n_eq: int
    n_free: int
    cost: float
    nbytes: float



def _dual_on_span(span: "_Span", KTy: np.ndarray) -> np.ndarray:
    """``span.R_s + restrict(span.U, KTy)`` (the same numbers) in one new d x d array where U is None
    (at d = 5000 each temporary is 200 MB)."""
    if span.U is not None:
        return span.R_s + restrict(span.U, KTy)
    S = np.add(KTy, KTy.T)
    S *= 0.5
    S += span.R_s
    return S


def restrict(U: Optional[np.ndarray], S: np.ndarray) -> np.ndarray:
    """sym(S) in the coordinates of the data span: :math:`U^\top S U` (S itself when U is None)."""
    S = 0.5 * (S + S.T)
    return S if U is None else U.T @ S @ U


def compute_basis(model):
    """``(U, R_s, chol_inv)`` of :class:`_Span` for ``model``: they depend on X and R only
    (uncached; the model caches them and passes them on to its row subsets and extensions)."""
    X = model.geometry.X
    d = model.d
    R = 0.5 * (model.R + model.R.T)
    normR = float(np.linalg.norm(R))
    U = None
    # R = rI with r > 0 (the trace regularizer): the whole space loses nothing, since S = rI is
    # positive definite on the complement of the span, so lambda_min(S) = min(r, lambda_min(S_U));
    # the SVD of the data (O(n d min(n, d)): seconds at d = 1000) is skipped
    scalar = R[0, 0] > 0 and np.array_equal(R, R[0, 0] * np.eye(d))
    if X.shape[0] > 1 and not scalar:
        # the differences x_i - x_0 span every difference x_i - x_j (exact zeros for constant
        # features); numpy's matrix_rank tolerance separates rank from round-off
        # (full_matrices only when n < d: Vt is then completed to d x d; with n >= d the thin
        # SVD already has a d x d Vt and never forms an n x n factor)
        _, sv, Vt = np.linalg.svd(X - X[0], full_matrices=X.shape[0] < d)
        r = int(np.sum(sv > sv[0] * max(X.shape) * np.finfo(float).eps)) if sv.size and sv[0] > 0 else 0
        if r < d:
            Q = Vt.T
            Rq = Q.T @ R @ Q
            cross = float(np.linalg.norm(Rq[r:, :r]))
            comp = np.linalg.eigvalsh(Rq[r:, r:])
            if cross <= CROSS_RTOL * normR and comp[0] >= -CROSS_RTOL * normR:
                U = Q[:, :r]
    R_s = R if U is None else U.T @ R @ U
    chol_inv = None
    lam = _eigenvalues(R_s)
    if lam.size and lam[0] > PD_RTOL * max(abs(lam[-1]), abs(lam[0])):
        # rI: its factor's inverse is I / sqrt(r) (two d^3 factorizations at d = 5000: ~15 s)
        chol_inv = (np.eye(d) / math.sqrt(float(R[0, 0])) if scalar
                    else np.linalg.inv(np.linalg.cholesky(R_s)))
    return U, R_s, chol_inv


def _eigenvalues(B: np.ndarray) -> np.ndarray:
    """``eigvalsh(B)``; for a multiple of the identity its diagonal, without a decomposition (the
    same numbers: at d = 5000 one ``eigvalsh`` takes ~20 s)."""
    if B.size and np.array_equal(B, B[0, 0] * np.eye(B.shape[0])):
        return np.full(B.shape[0], float(B[0, 0]))
    return np.linalg.eigvalsh(B) if B.size else np.zeros(0)


def compute_span(model) -> _Span:
    """The :class:`_Span` of ``model`` (uncached; the model caches it)."""
    U, R_s, chol_inv = model._basis()
    # fixed multipliers whose dual matrix is positive definite bound tr(M*) (trace bound):
    # y' = 0, and y' = c on the similar pairs (A_c = C_p is PSD, so R + K^* y' >= R)
    delta = np.asarray(model.constraints.delta, dtype=np.float64)
    sources = []
    sim = np.zeros(model.m, dtype=bool)
    sim[model.geometry.u_rows] = True
    sim[model.geometry.v_rows] = False
    candidates = [np.zeros(model.m)]
    if np.any(sim & (model.coef > 0)):
        candidates.append(np.where(sim, model.coef, 0.0))
    for yp in candidates:
        B = R_s + restrict(U, model.geometry.weighted_sum(yp)) if np.any(yp) else R_s
        lb = _eigenvalues(B)
        if lb.size:
            beta = float(lb[0]) - EIG_ROUNDOFF * float(np.max(np.abs(lb)))
            if beta > PD_RTOL * float(np.max(np.abs(lb))):
                sources.append((float(delta @ yp), beta))
    R_scale = None
    if chol_inv is not None and np.array_equal(R_s, R_s[0, 0] * np.eye(R_s.shape[0])):
        R_scale = float(R_s[0, 0])
    return _Span(U, R_s, chol_inv, tuple(sources), R_scale)


def trace_bound(model, upper: float) -> Optional[float]:
    """The computation of :meth:`HingeModel.trace_bound <cvxmetric.models.HingeModel.trace_bound>`."""
    if upper is None or not math.isfinite(float(upper)):
        return None
    sources = model._span().trace_sources
    if not sources:
        return None
    return min(max(float(upper) - dy, 0.0) / beta for dy, beta in sources)


def certify(model, y, upper: Optional[float] = None, *, Ky: Optional[np.ndarray] = None,
            repair_steps: int = REPAIR_STEPS, dual_eigvals: Optional[np.ndarray] = None,
            lambda_min_estimate: Optional[tuple] = None) -> tuple:
    """The computation of :meth:`HingeModel.certify <cvxmetric.models.HingeModel.certify>` (the rules
    of :meth:`~cvxmetric.models.HingeModel.dual_bound`, Notes)."""
    if lambda_min_estimate is not None:
        lambda_min_estimate = _checked_estimate(lambda_min_estimate)
    if dual_eigvals is not None:
        dual_eigvals = np.asarray(dual_eigvals, dtype=np.float64)
        if dual_eigvals.shape != (model.d,):
            raise ValueError(f"dual_eigvals must be the {model.d} eigenvalues of the dual matrix; "
                             f"got shape {dual_eigvals.shape}")
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (model.m,) or not np.all(np.isfinite(y)):
        raise ValueError(f"y must be a finite array of shape ({model.m},); got shape {y.shape}")
    y = np.clip(y, 0.0, model.coef)
    delta = np.asarray(model.constraints.delta, dtype=np.float64)
    dy = float(delta @ y)
    KTy = model.geometry.weighted_sum(y) if Ky is None else np.asarray(Ky, dtype=np.float64)
    if model.q > 0:
        if dual_eigvals is None:
            dual_eigvals = np.linalg.eigvalsh(0.5 * (model.R + model.R.T) + 0.5 * (KTy + KTy.T))
        neg = np.minimum(dual_eigvals, 0.0)
        return dy - float(neg @ neg) / (2.0 * model.q), y
    span = model._span()
    if span.R_s.size == 0:   # no data variation at all: every <M, A_c> is 0
        return dy, y
    if span.U is None and dual_eigvals is not None:
        lam = dual_eigvals
    elif span.R_scale is not None and lambda_min_estimate is not None:
        lam = _SafeShift(_dual_on_span(span, KTy), lambda_min_estimate)
    elif _safe_shift_pays(span):
        lam = _SafeShift(span.R_s + restrict(span.U, KTy))
    else:
        lam = np.linalg.eigvalsh(span.R_s + restrict(span.U, KTy))
    best, lam_min = _bound_q0(model, y, dy, KTy, span, upper, lam)
    if repair_steps and lam_min < 0.0:
        if isinstance(lam, _SafeShift):   # the repair reads the whole spectrum
            lam = np.linalg.eigvalsh(lam.S)
        y_r, dy_r, KTy_r = _repair(model, y, KTy, span, int(repair_steps), lam)
        rep, _ = _bound_q0(model, y_r, dy_r, KTy_r, span, upper,
                           _SafeShift(span.R_s + restrict(span.U, KTy_r)) if _safe_shift_pays(span) else None)
        if rep[0] is not None and (best[0] is None or rep[0] > best[0]):
            best = rep
    return best


def _bound_q0(model, y: np.ndarray, dy: float, KTy: np.ndarray, span: _Span, upper, lam=None):
    """The q = 0 rules of :meth:`~cvxmetric.models.HingeModel.dual_bound` for one multiplier:
    ((bound or None, y_used), lambda_min). ``lam``: the eigenvalues of ``S_U`` when the caller has them,
    or a :class:`_SafeShift` of it (only where ``R_scale`` is set: every rule then reads the smallest
    eigenvalue alone, and the safe shift is a proven lower bound on it, round-off included)."""
    if lam is None:
        lam = np.linalg.eigvalsh(span.R_s + restrict(span.U, KTy))
    if isinstance(lam, _SafeShift):
        lam_min = lam_low = lam.bound()
    else:
        lam_min = float(lam[0]) - EIG_ROUNDOFF * float(np.max(np.abs(lam)))
        lam_low = float(lam[0])
    cands = []
    if lam_min >= 0.0:
        cands.append((dy, y))
    if span.R_scale is not None:      # B = S_U / r
        mu = lam_low / span.R_scale - 1.0
    elif span.chol_inv is not None:
        S_U = span.R_s + restrict(span.U, KTy)
        B = span.chol_inv @ S_U @ span.chol_inv.T      # = I + L^{-1} K_U L^{-T}
        mu = float(np.linalg.eigvalsh(0.5 * (B + B.T))[0]) - 1.0
    if span.chol_inv is not None:
        theta = THETA_SAFETY * (1.0 if mu >= -1.0 else -1.0 / mu)
        cands.append((theta * dy, theta * y) if dy > 0 else (0.0, np.zeros_like(y)))
    T = trace_bound(model, upper) if upper is not None else None
    if T is not None:
        cands.append((dy + T * min(0.0, lam_min), y))
    if not cands:
        return (None, y), lam_min
    return max(cands, key=lambda c: c[0]), lam_min


#: The smallest eigenvalue of the dual matrix is bounded by a safe shift (:class:`_SafeShift`)
#: instead of ``eigvalsh`` where the modelled costs say so: ``eigvalsh`` at ``COST_EIGVALSH`` d^3
#: (measured 0.17 s at d = 1000, 1.10 s at d = 2000, one BLAS thread, load ~4), against the
#: estimate's ``SAFE_SHIFT_ESTIMATE_STEPS`` LOBPCG iterations (each about three products of the d x d
#: matrix with a block of ``SAFE_SHIFT_BLOCK`` columns, plus ``SAFE_SHIFT_STEP_CALL`` of overhead:
#: scipy's LOBPCG solves small eigenproblems and orthogonalizes at every iteration; measured 0.32-0.44 s
#: for 40 iterations at d = 800, load ~8, against 0.18-0.29 s for ``eigvalsh``) and one Cholesky
#: factorization at ``COST_CHOLESKY`` d^3 (measured 37 ms at d = 1000). The model takes the safe
#: shift from d ~ 1400 on.
COST_EIGVALSH = 1.5e-10
COST_CHOLESKY = 3.5e-11
SAFE_SHIFT_ESTIMATE_STEPS = 40
SAFE_SHIFT_BLOCK = 4
SAFE_SHIFT_STEP_CALL = 8e-3
#: The safe shifts tried below a caller's estimate (``lambda_min_estimate`` of :func:`certify`), as
#: multiples of its residual norm, from one residual norm down. A failed attempt costs about a whole
#: Cholesky factorization (the matrix is nearly PSD: the pivot fails late), seconds at d = 5000. The
#: callers' Ritz pairs come from a few block steps on a dual matrix whose negative eigenvalues cluster
#: near zero, where the Ritz value sits above lambda_min by more than a tenth of its residual:
#: measured with ``python -m benchmarks.scale --sizes d1000-m1e4`` (12 proofs, the exact eigenvalues
#: beside them), lambda_min was 1.0-4.5 times the Ritz value and within one residual norm below it at
#: every check, where shifts of 0.01 and 0.1 residuals (``cvxmetric.linalg.SAFE_SHIFT_STEPS``) failed.
ESTIMATE_SHIFT_STEPS = (1.0, 4.0, 64.0)


def _safe_shift_pays(span: _Span) -> bool:
    """Whether the bound reads a safe shift (only with ``R_scale``: every rule needs lambda_min alone)."""
    if span.R_scale is None:
        return False
    d = span.R_s.shape[0]
    estimate = SAFE_SHIFT_ESTIMATE_STEPS * (3 * SAFE_SHIFT_BLOCK * d * d * COST_GEMM + SAFE_SHIFT_STEP_CALL)
    return estimate + COST_CHOLESKY * d ** 3 < COST_EIGVALSH * d ** 3


class _SafeShift:
    """The dual matrix on the span, whose smallest eigenvalue is bounded from below by a safe shift
    (:func:`cvxmetric.linalg.lambda_min_lower_bound`) from ``estimate`` (a Ritz pair's value and
    residual norm, from the caller), or else from a LOBPCG estimate (matrix-free: products with S
    only, ``SAFE_SHIFT_BLOCK`` columns, seeded start); computed once, on first use. The estimate
    only chooses the shift: the bound is the Cholesky proof's, whatever the estimate's quality."""

    def __init__(self, S: np.ndarray, estimate: Optional[tuple] = None):
        self.S = S
        self.estimate = estimate
        self._bound = None

    def bound(self) -> float:
        if self._bound is None:
            if self.estimate is not None:
                self._bound = lambda_min_lower_bound(self.S, self.estimate, ESTIMATE_SHIFT_STEPS)
            else:
                self._bound = lambda_min_lower_bound(self.S, _lambda_min_estimate(self.S))
        return self._bound


def _checked_estimate(estimate) -> tuple:
    """``(theta, residual)`` as two finite floats (residual >= 0), or a ValueError naming the fix."""
    try:
        theta, res = (float(v) for v in estimate)
    except (TypeError, ValueError):
        raise ValueError("lambda_min_estimate must be a pair (theta, residual norm) of a Ritz pair of the dual "
                         f"matrix; got {estimate!r}") from None
    if not (math.isfinite(theta) and math.isfinite(res) and res >= 0.0):
        raise ValueError("lambda_min_estimate must be finite with a non-negative residual norm; got "
                         f"({theta}, {res})")
    return theta, res


def _lambda_min_estimate(S: np.ndarray) -> Optional[tuple]:
    """(theta, ||S x - theta x||) of LOBPCG's smallest Ritz pair of S, or None where it fails."""
    import warnings

    from scipy.sparse.linalg import lobpcg

    d = S.shape[0]
    k = min(SAFE_SHIFT_BLOCK, max(d // 3, 1))
    X0 = np.random.default_rng(0).standard_normal((d, k))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theta, X = lobpcg(S, X0, largest=False, maxiter=SAFE_SHIFT_ESTIMATE_STEPS,
                              tol=1e-10 * float(np.linalg.norm(S)))
    except (np.linalg.LinAlgError, ValueError):
        return None
    j = int(np.argmin(theta))
    x = X[:, j] / np.linalg.norm(X[:, j])
    t = float(x @ S @ x)
    return t, float(np.linalg.norm(S @ x - t * x))


def _repair(model, y: np.ndarray, KTy: np.ndarray, span: _Span, steps: int, lam0: np.ndarray):
    r"""Targeted repair of :meth:`~cvxmetric.models.HingeModel.dual_bound` (see its Notes): returns
    (y', delta^T y', K^* y').

    A step only shrinks multipliers, so it runs over the support of y (a zero stays zero), block
    by block (:meth:`cvxmetric.hinge.QuadrupletGeometry.rank_one_blocks`): one pass for
    :math:`\sum_c y_c g_{ck}^2`, one for the shrink factors.

    ``lam0``: the eigenvalues of the starting ``S_U``. Each step needs only the negative
    eigenpairs: the eigensolver of :func:`cvxmetric.linalg.positive_eigenpairs` on
    :math:`-S_U` (partial while they are few; their number at the previous step is the hint),
    with the round-off threshold scaled by the largest eigenvalue magnitude seen (the partial
    solver does not return the top of the spectrum; the threshold only guards round-off).
    """
    delta = np.asarray(model.constraints.delta, dtype=np.float64)
    geom = model.geometry
    y = y.copy()
    sup = np.flatnonzero(y > 0)
    ys = y[sup]
    scale = float(np.max(np.abs(lam0)))
    n_neg = int(np.count_nonzero(lam0 < -EIG_ROUNDOFF * scale))
    for _ in range(steps):
        mlam, V, partial = positive_eigenpairs(-(span.R_s + restrict(span.U, KTy)), rank_hint=n_neg,
                                               overwrite=True)
        lam = -mlam                 # eigenvalues of S_U (only the negative ones when partial)
        scale = max(scale, float(np.max(np.abs(lam), initial=0.0))) if partial else float(np.max(np.abs(lam)))
        neg = lam < -EIG_ROUNDOFF * scale
        n_neg = int(np.count_nonzero(neg))
        if not n_neg:
            break
        Vn = V[:, neg] if span.U is None else span.U @ V[:, neg]
        have = np.zeros(Vn.shape[1])
        for sl, G in geom.rank_one_blocks(Vn, sup):
            np.minimum(G, 0.0, out=G)        # <A_c, v v^T>, the negative part
            have += ys[sl] @ (G * G)
        if not np.any(have > 0):
            break
        beta = REPAIR_OVERSHOOT * (-lam[neg]) / _nonzero_or_inf(have)
        r = np.empty(sup.size)
        for sl, G in geom.rank_one_blocks(Vn, sup):
            np.minimum(G, 0.0, out=G)
            G *= -beta
            r[sl] = G.max(axis=1, initial=0.0)
        np.minimum(r, 1.0, out=r)
        ys = ys * (1.0 - r)
        y[sup] = ys
        keep = ys > 0
        sup, ys = sup[keep], ys[keep]
        KTy = geom.weighted_sum(y)
    return y, float(delta @ y), KTy


def polish_plan(model, M, free_factor: float = POLISH_FREE_FACTOR,
                max_cost: Optional[float] = None) -> Optional[PolishPlan]:
    """The computation of :meth:`HingeModel.polish_plan <cvxmetric.models.HingeModel.polish_plan>`."""
    free_factor = check_positive(free_factor, "free_factor")
    if free_factor < 1.0:
        raise ValueError(f"free_factor must be at least 1 (free multipliers per equation); got {free_factor}")
    if max_cost is not None:
        max_cost = float(max_cost)
        if not max_cost >= 0.0:
            raise ValueError(f"max_cost must be a non-negative number of modelled seconds (or None); got {max_cost}")
    if model.q > 0:
        return None
    M = as_square_symmetric(M, "M", d=model.d)
    M_s = _on_span(model, M)
    k = M_s.shape[0]
    # the rank from the eigenvalues alone: the eigenvectors only where the polish applies (at
    # d = 500-1000 it never does, and eigvalsh costs a third of eigh there)

    def sizes(r):
        return _plan_sizes(model, k, r, free_factor, max_cost)

    # the number of equations (and the memory) grows with r (r k - r (r - 1) / 2, r <= k): a proven
    # lower bound on the rank that already has too many equations rejects the polish without an
    # eigendecomposition
    r_low = range_rank_lower_bound(M_s)
    if r_low > 0 and sizes(r_low) is None:
        return None
    if sizes(_range_rank(np.linalg.eigvalsh(M_s))) is None:
        return None
    Q, r = _range_basis(model, M_s)
    if sizes(r) is None:      # the eigenvalues of eigh and eigvalsh agree to round-off only
        return None
    n_eq, n_free = sizes(r)
    return PolishPlan(Q, r, n_eq, n_free, polish_cost(model.d, n_eq, n_free), polish_bytes(n_eq, n_free))


def polish_cost(d: int, n_eq: int, n_free: int) -> float:
    """Modelled seconds of the polish (the cost model of :mod:`cvxmetric.hinge`, double precision):
    the free constraints' coordinates (two n_free x d x d products), the Gram matrix and its
    downdates (n_free n_eq^2 / 2 multiply-adds each at most) and one Cholesky factor per round
    (n_eq^3 / 3 each, ``POLISH_ROUNDS`` rounds)."""
    return (COST_GEMM * 2.0 * n_free * d * d
            + COST_DENSE * (float(n_free) * n_eq * n_eq + POLISH_ROUNDS * float(n_eq) ** 3 / 3.0))


def polish_bytes(n_eq: int, n_free: int) -> float:
    """Bytes the polish allocates for ``n_eq`` equations and ``n_free`` free multipliers (an upper
    estimate: ``POLISH_BYTES_PER_B_ENTRY`` per coefficient, ``POLISH_BYTES_PER_GRAM_ENTRY`` per
    entry of the Gram matrix)."""
    return float(POLISH_BYTES_PER_B_ENTRY) * n_free * n_eq + float(POLISH_BYTES_PER_GRAM_ENTRY) * n_eq * n_eq


def problem_bytes(model) -> float:
    """Bytes of the problem itself: its data X (n x d), a d x d point and
    ``PROBLEM_BYTES_PER_CONSTRAINT`` per constraint."""
    X = model.geometry.X
    return 8.0 * (X.shape[0] * X.shape[1] + model.d * model.d) + float(PROBLEM_BYTES_PER_CONSTRAINT) * model.m


def polish_memory_cap(model) -> float:
    """The most memory a polish of ``model`` may take: the larger of ``POLISH_MEMORY_FLOOR`` and
    ``POLISH_MEMORY_RATIO`` times :func:`problem_bytes`."""
    return max(POLISH_MEMORY_FLOOR, POLISH_MEMORY_RATIO * problem_bytes(model))


def complementary_multipliers(model, M, y, *, Ky: Optional[np.ndarray] = None,
                              margins: Optional[np.ndarray] = None, free_factor: float = POLISH_FREE_FACTOR,
                              plan: Optional[PolishPlan] = None) -> Optional[np.ndarray]:
    """The computation of :meth:`HingeModel.complementary_multipliers
    <cvxmetric.models.HingeModel.complementary_multipliers>`."""
    M = as_square_symmetric(M, "M", d=model.d)
    if plan is None:
        plan = polish_plan(model, M, free_factor)
        if plan is None:
            return None
    return polish_corrected(model, M, y, plan, Ky=Ky, margins=margins).y


@dataclass(frozen=True, eq=False)
class PolishOutcome:
    """The result of :func:`polish_corrected`: the multipliers (in the box), the plan of the last
    solve (its range dimension ``r`` and free multipliers), the solves made and the modelled cost of
    those beyond the first, whether the last one solved its equations, and whether it did so with
    the dual matrix PSD off the range (up to round-off: then ``certify`` reads a bound near
    ``delta^T y``)."""

    y: np.ndarray
    plan: PolishPlan
    solves: int
    extra_cost: float
    solved: bool
    complementary: bool


def polish_corrected(model, M, y, plan: PolishPlan, *, Ky: Optional[np.ndarray] = None,
                     margins: Optional[np.ndarray] = None,
                     corrections: int = POLISH_CORRECTIONS, max_cost: Optional[float] = None,
                     correct_above: Optional[float] = None) -> PolishOutcome:
    r"""The complementarity polish of ``y`` at M by ``plan``, corrected where it failed.

    Parameters
    ----------
    model : HingeModel
    M : ndarray, shape (d, d)
        The PSD point of ``plan``.
    y : array_like, shape (m,)
        Multipliers (clipped into the box).
    plan : PolishPlan
        :func:`polish_plan` of M.
    Ky, margins : ndarray, optional
        :math:`K^* y` and :math:`t = \delta + K M`, when the caller has them.
    corrections : int
        At most this many more solves (default ``POLISH_CORRECTIONS``).
    max_cost : float, optional
        The modelled seconds (:func:`polish_cost`) the corrections may take together (None: any).
    correct_above : float, optional
        Correct only a first solve whose value :math:`\delta^\top y` exceeds this (a caller's
        least value that could certify; None: always).

    Returns
    -------
    PolishOutcome

    Notes
    -----
    After a solve (:meth:`~cvxmetric.models.HingeModel.complementary_multipliers`) the polished dual
    matrix in the coordinates Q = [V W] is :math:`Q^\top S Q + \sum_{c \in F} \Delta y_c
    Q^\top A_c Q`, an :math:`O(|F| k^2)` update. Where the equations' residual (its V columns)
    exceeds ``POLISH_SOLVED_RTOL`` of its norm, the free set was too small: the next solve takes
    ``POLISH_GROWTH`` times as many free multipliers. Where they were solved but :math:`W^\top S W`
    has negative eigenvalues (beyond ``EIG_ROUNDOFF`` of its largest magnitude), S cannot be PSD
    with V as the range: the next solve moves their eigenvectors from W into V (more equations, the
    same free multipliers per equation). A correction is made only where its plan fits the memory
    cap and the constraints (:func:`polish_memory_cap`); every proposal is still judged by
    ``certify``.
    """
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (model.m,) or not np.all(np.isfinite(y)):
        raise ValueError(f"y must be a finite array of shape ({model.m},); got shape {y.shape}")
    y = np.clip(y, 0.0, model.coef)
    corrections = int(corrections)
    t = model.margins(M) if margins is None else np.asarray(margins, dtype=np.float64)
    KTy = model.geometry.weighted_sum(y) if Ky is None else np.asarray(Ky, dtype=np.float64)
    S0 = 0.5 * (model.R + model.R.T) + 0.5 * (KTy + KTy.T)
    dist = np.abs(t) / _nonzero_or_inf(model.geometry.frobenius_norms())
    solves, extra = 0, 0.0
    while True:
        solves += 1
        y_out, S_Q = _polish_once(model, plan, S0, y, dist)
        solved, negative = _polish_diagnosis(S_Q, plan.r)
        done = solved and negative is None
        if done or solves > corrections or (correct_above is not None and solves == 1
                                            and not float(model.constraints.delta @ y_out) > correct_above):
            return PolishOutcome(y_out, plan, solves, extra, solved, done)
        if solved:
            Q, r = plan.Q, plan.r
            k = negative.shape[1]
            Q = np.hstack([Q[:, :r], Q[:, r:] @ negative, Q[:, r:] @ _complement(negative)])
            nxt = _plan_of(model, Q, r + k, plan.n_free / plan.n_eq)
        else:
            nxt = _plan_of(model, plan.Q, plan.r, POLISH_GROWTH * plan.n_free / plan.n_eq)
        if nxt is None or (max_cost is not None and extra + nxt.cost > max_cost):
            return PolishOutcome(y_out, plan, solves, extra, solved, False)
        plan = nxt
        extra += plan.cost


def _polish_once(model, plan: PolishPlan, S0: np.ndarray, y: np.ndarray, dist: np.ndarray) -> tuple:
    """One solve of the polish: the multipliers and the polished dual matrix in the coordinates Q."""
    Q, r, n_free = plan.Q, plan.r, plan.n_free
    F = np.argpartition(dist, n_free - 1)[:n_free] if n_free < model.m else np.arange(model.m)
    Pu, Pw = (D @ Q for D in model.geometry.difference_vectors(F))
    B = _complementarity_rows(model, Pu, Pw, r)
    S_Q = Q.T @ S0 @ Q
    e0 = _complementarity_vector(S_Q, r)
    y_out = y.copy()
    y_out[F] = _clamped_least_change(B, e0, y[F], model.coef[F])
    change = y_out[F] - y[F]
    S_Q += (Pu.T * change) @ Pu - (Pw.T * change) @ Pw
    return y_out, S_Q


def _polish_diagnosis(S_Q: np.ndarray, r: int) -> tuple:
    """``(solved, negative)`` of a polished dual matrix in the coordinates [V W] (V: the first r):
    whether its V columns vanish (``POLISH_SOLVED_RTOL``), and the eigenvectors (in W's
    coordinates) of its W block's negative eigenvalues beyond round-off, or None where there are
    none."""
    S_Q = 0.5 * (S_Q + S_Q.T)
    solved = float(np.linalg.norm(S_Q[:, :r])) <= POLISH_SOLVED_RTOL * float(np.linalg.norm(S_Q))
    if S_Q.shape[0] == r:
        return solved, None
    lam, Z = np.linalg.eigh(S_Q[r:, r:])
    neg = lam < -EIG_ROUNDOFF * float(np.max(np.abs(lam)))
    return solved, (Z[:, neg] if np.any(neg) else None)


def _complement(Z: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the orthogonal complement of the orthonormal columns Z."""
    full = np.linalg.qr(Z, mode="complete")[0]
    return full[:, Z.shape[1]:]


def _plan_sizes(model, k: int, r: int, free_factor: float, max_cost: Optional[float] = None) -> Optional[tuple]:
    """``(equations, free multipliers)`` of a polish with range dimension r in a k-dimensional
    span, or None where it does not apply (r = 0), fit (more free multipliers than constraints, a
    memory above :func:`polish_memory_cap`) or pay (a modelled cost above ``max_cost``)."""
    n_eq = r * (r + 1) // 2 + r * (k - r)
    n_free = int(math.ceil(free_factor * n_eq))
    fits = n_free <= model.m and polish_bytes(n_eq, n_free) <= polish_memory_cap(model)
    pays = max_cost is None or polish_cost(model.d, n_eq, n_free) <= max_cost
    return (n_eq, n_free) if r > 0 and fits and pays else None


def _plan_of(model, Q: np.ndarray, r: int, free_factor: float) -> Optional[PolishPlan]:
    """The plan on the basis Q = [V W] with V its first r columns, or None where it does not fit
    (:func:`_plan_sizes`)."""
    sizes = _plan_sizes(model, Q.shape[1], r, free_factor)
    if sizes is None:
        return None
    n_eq, n_free = sizes
    return PolishPlan(Q, r, n_eq, n_free, polish_cost(model.d, n_eq, n_free), polish_bytes(n_eq, n_free))


def _on_span(model, M: np.ndarray) -> np.ndarray:
    """M in the coordinates of the data span (:meth:`~cvxmetric.models.HingeModel.dual_bound`; M itself
    when the certificate works on the whole space), symmetrized."""
    U = model._basis()[0]
    M_s = M if U is None else U.T @ M @ U
    return 0.5 * (M_s + M_s.T)


def _range_mask(lam: np.ndarray) -> np.ndarray:
    """The eigenvalues (ascending) of the range: above ``POLISH_RANK_RTOL`` times the largest."""
    lam_max = float(lam[-1]) if lam.size else 0.0
    return lam > POLISH_RANK_RTOL * lam_max if lam_max > 0 else np.zeros(lam.size, dtype=bool)


def range_rank_lower_bound(M_s: np.ndarray) -> int:
    r"""A lower bound on :func:`_range_rank` of the PSD ``M_s`` (k x k) from its trace and Frobenius
    norm alone, :math:`O(k^2)`.

    Notes
    -----
    With :math:`\lambda_1 \ge \dots \ge \lambda_k \ge 0` and r eigenvalues above
    :math:`\rho\lambda_1` (:math:`\rho` = ``POLISH_RANK_RTOL``), :math:`\mathrm{tr} = \sum_i
    \lambda_i \le r\lambda_1 + (k - r)\rho\lambda_1`, and :math:`\lambda_1 \le \|M_s\|_F`, so
    :math:`r \ge (\mathrm{tr}/\|M_s\|_F - k\rho) / (1 - \rho)`. The bound is lowered by
    ``RANK_BOUND_SLACK`` (round-off of the two sums and of a slightly indefinite M_s) and floored.
    """
    k = M_s.shape[0]
    fro = float(np.linalg.norm(M_s))
    if k == 0 or not fro > 0:
        return 0
    rho = POLISH_RANK_RTOL
    bound = (float(np.trace(M_s)) / fro - k * rho) / (1.0 - rho)
    return max(int(math.floor(bound - RANK_BOUND_SLACK)), 0)


def _range_rank(lam: np.ndarray) -> int:
    """The dimension of the range (:func:`_range_mask`)."""
    return int(np.count_nonzero(_range_mask(lam)))


def _range_basis(model, M_s: np.ndarray) -> tuple[np.ndarray, int]:
    """``(Q, r)`` for ``M_s`` on the span (:func:`_on_span`): an orthonormal basis ``Q = [V W]``
    of the data span (the whole space when the certificate does not restrict to it) whose
    first r columns span the range of M."""
    lam, E = np.linalg.eigh(M_s)
    on = _range_mask(lam)
    Q = np.hstack([E[:, on], E[:, ~on]])
    U = model._basis()[0]
    return (Q if U is None else U @ Q), int(np.count_nonzero(on))


def _complementarity_rows(model, Pu: np.ndarray, Pw: np.ndarray, r: int) -> np.ndarray:
    r"""Row i: the coefficients of :math:`y_c` (c the i-th free constraint) in E(y) (see
    :meth:`~cvxmetric.models.HingeModel.complementary_multipliers`), for
    :math:`A_c = u u^\top - w w^\top` with ``Pu``, ``Pw`` its difference vectors in the
    coordinates Q = [V W] (rows :math:`u^\top Q`, :math:`w^\top Q`):
    :math:`\mathrm{svec}(p p^\top - q q^\top)` on V and :math:`\mathrm{vec}(\bar p p^\top - \bar q q^\top)`
    across, with p, q the V-coordinates of u, w and :math:`\bar p, \bar q` their W-coordinates."""
    iu, ju = triu_indices(r)
    n, k = Pu.shape
    w = _svec_weights(r)
    B = np.empty((n, iu.size + r * (k - r)))
    # Q^T A_c V = Pu_c p^T - Pw_c q^T, in blocks of rows that keep the (block, k, r) products in cache
    for s in range(0, n, POLISH_ROW_BLOCK):
        sl = slice(s, s + POLISH_ROW_BLOCK)
        Z = Pu[sl, :, None] * Pu[sl, None, :r]
        Z -= Pw[sl, :, None] * Pw[sl, None, :r]
        Z = Z.reshape(Z.shape[0], k * r)
        np.multiply(Z[:, iu * r + ju], w, out=B[sl, :iu.size])
        B[sl, iu.size:] = Z[:, r * r:]
    return B
