r"""The hinge model shared by Qwise, LMNN and the Fantope convex bound.

All three minimise, over :math:`M \in \mathbb{S}^d_+`,

.. math::
    f(M) = \langle R, M\rangle + \tfrac{q}{2}\|M\|_F^2
           + \sum_{c} c_c\,[\delta_c + \langle M, C_{ij} - C_{kl}\rangle]_+ ,

with a symmetric linear-term matrix :math:`R`, a quadratic weight :math:`q \ge 0` and
per-constraint coefficients :math:`c_c \ge 0`:

* Qwise (thesis eq. 2.7): :math:`\Omega = \mathrm{tr}\,M` (:math:`R = I`), :math:`\tfrac12\|M\|_F^2`
  (:math:`q = 1`) or :math:`\langle M, \sum_S C_p\rangle` ("pull", :math:`R = \sum_S C_p`), times
  ``reg_weight``; :math:`c_c = w_c C_Q` on relative constraints and :math:`w_c C_P` on pairs.
* LMNN: "pull" with weight :math:`1 - \mu` and :math:`c = \mu` on the triplets.
* Fantope bound: :math:`R = \mu W + \gamma I`.

A :class:`HingeModel` is the single definition of this objective: the cvxpy builder
(``formulations``) and the fast solvers (``solvers``) both read it, so they cannot drift apart.
It also holds the one certified lower bound of the family (:meth:`HingeModel.dual_bound`), read by
the PDHG solver, LMNN's constraint generation and the ground truth's solve ladder, and its exact
rescaling (:meth:`HingeModel.rescaled`, :meth:`HingeModel.normalization`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import scipy.linalg

from ._checks import as_data_matrix, as_index_array, as_square_symmetric, check_nonnegative, check_positive
from .constraints import ConstraintSet
from .hinge import COST_DENSE, COST_GEMM, HingeLoss, QuadrupletGeometry
from .linalg import positive_eigenpairs, power_of_two, triu_indices

__all__ = ["HingeModel", "HingeRescaling", "HingeCongruence", "qwise_model", "pull_matrix", "REGULARIZERS", "PD_RTOL",
           "CROSS_RTOL", "EIG_ROUNDOFF", "THETA_SAFETY", "REPAIR_STEPS", "REPAIR_OVERSHOOT", "POLISH_RANK_RTOL",
           "POLISH_FREE_FACTOR", "POLISH_ROUNDS", "POLISH_RIDGE", "PolishPlan"]

#: Names of the Qwise regularizers Omega(M) (thesis eq. 2.7 and footnote 19).
REGULARIZERS = ("trace", "frobenius", "pull")

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
#: Complementarity polish (:meth:`HingeModel.complementary_multipliers`): eigenvalues of M below this
#: fraction of its largest are off its range. An average of iterates carries a tail of small
#: eigenvalues; measured on syn-d50-m10000 (PDHG candidates at every check): at 1e-6 the tail made
#: the rank 36-50 instead of 30 and the polish failed; 1e-4 and 1e-3 found the range at every check.
POLISH_RANK_RTOL = 1e-4
#: Free multipliers per complementarity equation (the constraints nearest their margin). Measured on
#: syn-d50-m10000: 1.3x and 1.5x left S indefinite after the box clamps at most checks; 2x and 3x
#: made S exactly PSD at every check from iteration 112 on (3x at 1.3x the time).
POLISH_FREE_FACTOR = 2.0
#: At most this many clamp rounds (each one Cholesky of the equations' Gram matrix); measured 4-6.
POLISH_ROUNDS = 8
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
#: The cost model (:meth:`HingeModel.polish_plan`) keeps the double-precision price: at half of it,
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
    kept in the box by clamping (see :meth:`HingeModel.complementary_multipliers`): the minimum-norm
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
    B_f = (B / b).astype(dtype) if single else B
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
    """The data span and the linear term on it (see :meth:`HingeModel.dual_bound`).

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


@dataclass(frozen=True)
class HingeRescaling:
    r"""An exactly rescaled twin of a :class:`HingeModel` (see :meth:`HingeModel.rescaled`).

    ``original.value(point_scale * M) == value_scale * model.value(M)`` for every ``M``; a bound
    ``b`` of the twin is the bound ``value_scale * b`` of the original.
    """

    model: "HingeModel"
    point_scale: float
    value_scale: float
    data_scale: float
    margin_scale: float

    @property
    def description(self) -> str:
        return (f"X x {self.data_scale:.6g}, margins / {self.margin_scale:.6g}, values / "
                f"{self.value_scale:.6g}, M = {self.point_scale:.6g} M'")


@dataclass(frozen=True)
class HingeCongruence:
    r"""A congruent twin of a :class:`HingeModel` with :math:`q = 0` (see :meth:`HingeModel.congruent`).

    The twin has data :math:`X \mathrm{Diag}(D)` and linear term :math:`DRD` (``D`` the diagonal),
    so :math:`A_c' = D A_c D` and ``original.value(point(M')) == model.value(M')`` for every
    :math:`M'`; :math:`M \mapsto D^{-1} M D^{-1}` maps the PSD cone onto itself, so both problems
    have the same optimal value, every bound of the twin bounds the original, and the hinge rows
    and multipliers are the same. Exact in floating point when every :math:`D_a` is a power of two.
    """

    original: "HingeModel"
    model: "HingeModel"
    D: np.ndarray

    def point(self, M_twin: np.ndarray) -> np.ndarray:
        r"""The original's point :math:`D M' D` of the twin's point :math:`M'` (a new array)."""
        return M_twin * np.outer(self.D, self.D)

    def twin_point(self, M: np.ndarray) -> np.ndarray:
        r"""The twin's point :math:`D^{-1} M D^{-1}` of the original's point :math:`M` (a new array)."""
        return M / np.outer(self.D, self.D)


@dataclass(frozen=True, eq=False)
class PolishPlan:
    """A complementarity polish at one point (:meth:`HingeModel.polish_plan`): the basis ``Q = [V W]``
    of the data span with the range V of the point in its first ``r`` columns, the number of
    equations and of free multipliers, and the modelled cost in seconds."""

    Q: np.ndarray
    r: int
    n_eq: int
    n_free: int
    cost: float


@dataclass(frozen=True, eq=False)
class HingeModel:
    r"""A linear/quadratic term plus a weighted hinge loss over the PSD cone.

    Attributes
    ----------
    geometry : QuadrupletGeometry
        Data and constraints (difference vectors).
    coef : ndarray, shape (m,)
        Hinge coefficients :math:`c_c \ge 0`.
    R : ndarray, shape (d, d)
        Symmetric linear term.
    q : float
        Weight of :math:`\tfrac12 \|M\|_F^2`.
    name : str
        For reports.
    """

    geometry: QuadrupletGeometry
    coef: np.ndarray
    R: np.ndarray
    q: float = 0.0
    name: str = "hinge"
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def d(self) -> int:
        return self.geometry.d

    @property
    def m(self) -> int:
        return self.geometry.m

    @property
    def constraints(self) -> ConstraintSet:
        return self.geometry.constraints

    def with_linear_term(self, R: np.ndarray) -> "HingeModel":
        """The same model with another linear term (e.g. a refreshed Fantope bound)."""
        return HingeModel(self.geometry, self.coef, np.asarray(R, dtype=np.float64), self.q, self.name)

    def extended(self, constraints: ConstraintSet, coef) -> "HingeModel":
        r"""The same model with ``constraints`` (hinge coefficients ``coef``) appended.

        Used by solvers that generate constraints on the fly (e.g. LMNN impostors): the rows of
        ``self`` keep their positions, the new ones follow. The new constraints must index rows
        of the same data matrix.
        """
        if not isinstance(constraints, ConstraintSet):
            raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
        coef = np.asarray(coef, dtype=np.float64)
        if coef.shape != (len(constraints),):
            raise ValueError(f"coef must have shape ({len(constraints)},); got {coef.shape}")
        if np.any(coef < 0) or not np.all(np.isfinite(coef)):
            raise ValueError("coef must be finite and non-negative")
        constraints.validate(self.geometry.X.shape[0], name="constraints", allow_empty=True)
        return self._with_rows(self.geometry.extended(constraints), np.concatenate([self.coef, coef]))

    def subset(self, index) -> "HingeModel":
        r"""The same model restricted to the constraints ``index`` (a boolean mask or row indices).

        Used by working sets (:mod:`cvxmetric.solvers.working_set`): the restricted objective drops
        non-negative hinge terms only, so its optimum is at most the full one.
        """
        rows = np.arange(self.m)[np.asarray(index)]
        return self._with_rows(self.geometry.subset(rows), self.coef[rows])

    def _with_rows(self, geometry: QuadrupletGeometry, coef: np.ndarray) -> "HingeModel":
        """The same linear and quadratic terms over other constraint rows on the same data (the one
        mechanism of :meth:`extended` and :meth:`subset`): same X and R, so the data span
        (:meth:`_basis`) is passed on through the cache."""
        out = HingeModel(geometry, coef, self.R, self.q, self.name)
        if "basis" in self._cache:
            out._cache["basis"] = self._cache["basis"]
        return out

    # ------------------------------------------------------------------ certificate
    def _span(self) -> _Span:
        if "span" not in self._cache:
            self._cache["span"] = self._compute_span()
        return self._cache["span"]

    def _basis(self):
        """``(U, R_s, chol_inv)`` of :class:`_Span`: they depend on X and R only, so
        :meth:`extended` (same X and R) passes them on through the cache."""
        if "basis" not in self._cache:
            self._cache["basis"] = self._compute_basis()
        return self._cache["basis"]

    def _compute_basis(self):
        X = self.geometry.X
        d = self.d
        R = 0.5 * (self.R + self.R.T)
        normR = float(np.linalg.norm(R))
        U = None
        if X.shape[0] > 1:
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
        lam = np.linalg.eigvalsh(R_s) if R_s.size else np.zeros(0)
        if lam.size and lam[0] > PD_RTOL * max(abs(lam[-1]), abs(lam[0])):
            chol_inv = np.linalg.inv(np.linalg.cholesky(R_s))
        return U, R_s, chol_inv

    def _compute_span(self) -> _Span:
        U, R_s, chol_inv = self._basis()
        # fixed multipliers whose dual matrix is positive definite bound tr(M*) (trace bound):
        # y' = 0, and y' = c on the similar pairs (A_c = C_p is PSD, so R + K^* y' >= R)
        delta = np.asarray(self.constraints.delta, dtype=np.float64)
        sources = []
        sim = np.zeros(self.m, dtype=bool)
        sim[self.geometry.u_rows] = True
        sim[self.geometry.v_rows] = False
        candidates = [np.zeros(self.m)]
        if np.any(sim & (self.coef > 0)):
            candidates.append(np.where(sim, self.coef, 0.0))
        for yp in candidates:
            B = R_s + self._restrict(U, self.geometry.weighted_sum(yp)) if np.any(yp) else R_s
            lb = np.linalg.eigvalsh(B) if B.size else np.zeros(0)
            if lb.size:
                beta = float(lb[0]) - EIG_ROUNDOFF * float(np.max(np.abs(lb)))
                if beta > PD_RTOL * float(np.max(np.abs(lb))):
                    sources.append((float(delta @ yp), beta))
        R_scale = None
        if chol_inv is not None and np.array_equal(R_s, R_s[0, 0] * np.eye(R_s.shape[0])):
            R_scale = float(R_s[0, 0])
        return _Span(U, R_s, chol_inv, tuple(sources), R_scale)

    def span_basis(self) -> tuple:
        r"""``(U, R_U, L_inv)`` of the certificate (:meth:`dual_bound`, Notes): an orthonormal basis
        ``U`` (d, r) of the data span (None when the whole space is used), :math:`R_U = U^\top R U`,
        and the inverse Cholesky factor of :math:`R_U` when it is positive definite (to
        ``PD_RTOL``; else None). Depends on X and R only. Copies: the cached arrays behind every
        later bound of this model stay untouched."""
        return tuple(None if a is None else np.array(a) for a in self._basis())

    @staticmethod
    def _restrict(U: Optional[np.ndarray], S: np.ndarray) -> np.ndarray:
        S = 0.5 * (S + S.T)
        return S if U is None else U.T @ S @ U

    @property
    def has_certificate(self) -> bool:
        """Whether :meth:`dual_bound` gives a finite bound for *every* multiplier in the box
        (q > 0, or R positive definite on the data span, or a trace bound given ``upper``)."""
        span = self._span()
        return self.q > 0 or span.chol_inv is not None or bool(span.trace_sources)

    def trace_bound(self, upper: float) -> Optional[float]:
        r"""A bound :math:`T \ge \mathrm{tr}(U^\top M U)` for every PSD M with :math:`f(M) \le` ``upper``.

        None when no fixed multiplier makes the dual matrix positive definite on the span (see
        :meth:`dual_bound`).
        """
        if upper is None or not math.isfinite(float(upper)):
            return None
        sources = self._span().trace_sources
        if not sources:
            return None
        return min(max(float(upper) - dy, 0.0) / beta for dy, beta in sources)

    def dual_bound(self, y, upper: Optional[float] = None, *, Ky: Optional[np.ndarray] = None,
                   repair_steps: int = REPAIR_STEPS) -> Optional[float]:
        r"""Certified lower bound on :math:`p^* = \inf_{M \succeq 0} f(M)` from hinge multipliers.

        Parameters
        ----------
        y : array_like, shape (m,)
            Hinge multipliers (the "hinge" duals of a cvxpy solve, PDHG's dual iterate, ...).
            They are repaired, not trusted: clipped into the box :math:`[0, c]` first.
        upper : float, optional
            The objective of any PSD point (an upper bound on :math:`p^*`); it enables the trace
            bound of the case :math:`q = 0` with a singular linear term.
        Ky : ndarray, shape (d, d), optional
            :math:`K^* y = \sum_c y_c A_c` of the (already clipped) ``y``, when the caller has it.
        repair_steps : int
            Steps of the targeted repair (q = 0, Notes); 0 switches it off.

        Returns
        -------
        float or None
            A number :math:`\le p^*` in exact arithmetic (up to the documented round-off
            guards), or None when no certificate exists for these multipliers.

        Notes
        -----
        For every :math:`y \in [0, c]` and every :math:`M \succeq 0`,
        :math:`c_c[t]_+ \ge y_c t` gives

        .. math::
            f(M) \ge \delta^\top y + \langle S, M\rangle + \tfrac q2 \|M\|_F^2, \qquad
            S = R + K^* y = R + \textstyle\sum_c y_c A_c ,

        so :math:`p^* \ge \delta^\top y + \inf_{M \succeq 0} (\langle S, M\rangle + \tfrac q2\|M\|_F^2)`.

        * :math:`q > 0`: the infimum is :math:`-\|\Pi_{\mathbb{S}_+}(-S)\|_F^2 / (2q)` (closed form).
        * :math:`q = 0`. Let :math:`U` (d x r) be an orthonormal basis of the span of the data's
          difference vectors :math:`x_i - x_j` (from an SVD of :math:`X - x_0`, rank at numpy's
          ``matrix_rank`` tolerance) and :math:`P = UU^\top`. Every :math:`A_c` satisfies
          :math:`A_c = P A_c P`. When :math:`R` does not couple the span to its complement and is
          PSD on the complement (checked to ``CROSS_RTOL``; true for pull matrices, built from
          data differences, and for multiples of the identity), then
          :math:`\langle S, M\rangle \ge \langle S_U, U^\top M U\rangle` with
          :math:`S_U = U^\top S U`, and directions outside the span change nothing: constant
          features (digits' border pixels) no longer make a "pull" term singular. Otherwise
          :math:`U = I`. Then the bound is the largest of those that apply:

          - :math:`S_U \succeq 0` (smallest eigenvalue, less its ``EIG_ROUNDOFF``, non-negative):
            :math:`\delta^\top y` (y is exactly dual feasible);
          - :math:`R_U = U^\top R U \succ 0` (to ``PD_RTOL``): with :math:`\theta \in [0, 1]` the
            largest value such that :math:`R_U + \theta U^\top K^* y\, U \succeq 0` (from the
            smallest eigenvalue of :math:`L^{-1} S_U L^{-\top}`, :math:`R_U = LL^\top`, times
            ``THETA_SAFETY``), :math:`\theta y \in [0, c]` is dual feasible and
            :math:`\max(0, \theta\,\delta^\top y)` is a bound (0 is the value of y = 0);
          - a trace bound :math:`T \ge \mathrm{tr}(U^\top M^* U)` (:meth:`trace_bound`, needs
            ``upper``): :math:`\delta^\top y + T \min(0, \lambda_{\min}(S_U))`. T comes from a
            fixed :math:`y'` with :math:`B = U^\top(R + K^* y')U \succ 0`
            (:math:`\beta = \lambda_{\min}(B) > 0`; y' = 0, and y' = c on the similar pairs,
            whose :math:`A_c = C_p \succeq 0`): every M with :math:`f(M) \le` ``upper`` has
            :math:`\mathrm{upper} \ge \delta^\top y' + \beta\, \mathrm{tr}(U^\top M U)`.

          With none of them (R singular on the span, no usable y', S_U not PSD), None.

          **Targeted repair** (q = 0, :math:`S_U` not PSD; up to ``repair_steps`` steps): theta
          shrinks every multiplier alike, which costs much where R is ill-conditioned on the span
          (digits). Instead, with :math:`(\lambda_k, v_k)` the negative eigenpairs of :math:`S_U`
          (:math:`v_k` mapped back by U) and :math:`g_{ck} = [\langle A_c, v_k v_k^\top\rangle]_-`,
          each step sets :math:`y_c \leftarrow y_c (1 - \min(1, \max_k \beta_k |g_{ck}|))`,
          :math:`\beta_k` = ``REPAIR_OVERSHOOT`` :math:`|\lambda_k| / \sum_c y_c g_{ck}^2`: the
          multipliers that bend :math:`S` negative shrink in proportion to how much they do
          (for one direction the least loss of :math:`\delta^\top y` per unit of curvature,
          by Cauchy-Schwarz). The repaired multiplier stays in :math:`[0, c]`, and its bound is
          computed by the same three rules above, so the result is a certificate whatever the
          heuristic did; the larger of the two bounds is returned.

        Each bound is invariant, up to the same factor as the objective, under every positive
        scaling of the weights (R, q and c together) and under X -> sX with R scaled by s^2.
        """
        return self.certify(y, upper, Ky=Ky, repair_steps=repair_steps)[0]

    def certify(self, y, upper: Optional[float] = None, *, Ky: Optional[np.ndarray] = None,
                repair_steps: int = REPAIR_STEPS, dual_eigvals: Optional[np.ndarray] = None) -> tuple:
        """:meth:`dual_bound` and the multipliers it was computed from: ``(bound or None, y_used)``.

        ``y_used`` is in :math:`[0, c]`: the clipped ``y`` (closed form, exact feasibility, trace
        bound), :math:`\\theta y` (theta rule), or the repaired multiplier.

        ``dual_eigvals``, when the caller has them: ``numpy.linalg.eigvalsh`` of the full-space
        dual matrix ``sym(R) + sym(Ky)`` (``sym(A) = (A + A.T) / 2``, formed in that order), which
        replace the eigendecomposition of the bound where it works on the whole space (q > 0, or
        q = 0 with ``U = I``); ignored elsewhere. They are trusted (the bound is only as valid as
        they are); only their shape is checked.
        """
        if dual_eigvals is not None:
            dual_eigvals = np.asarray(dual_eigvals, dtype=np.float64)
            if dual_eigvals.shape != (self.d,):
                raise ValueError(f"dual_eigvals must be the {self.d} eigenvalues of the dual matrix; "
                                 f"got shape {dual_eigvals.shape}")
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (self.m,) or not np.all(np.isfinite(y)):
            raise ValueError(f"y must be a finite array of shape ({self.m},); got shape {y.shape}")
        y = np.clip(y, 0.0, self.coef)
        delta = np.asarray(self.constraints.delta, dtype=np.float64)
        dy = float(delta @ y)
        KTy = self.geometry.weighted_sum(y) if Ky is None else np.asarray(Ky, dtype=np.float64)
        if self.q > 0:
            if dual_eigvals is None:
                dual_eigvals = np.linalg.eigvalsh(0.5 * (self.R + self.R.T) + 0.5 * (KTy + KTy.T))
            neg = np.minimum(dual_eigvals, 0.0)
            return dy - float(neg @ neg) / (2.0 * self.q), y
        span = self._span()
        if span.R_s.size == 0:   # no data variation at all: every <M, A_c> is 0
            return dy, y
        lam = dual_eigvals if span.U is None and dual_eigvals is not None else \
            np.linalg.eigvalsh(span.R_s + self._restrict(span.U, KTy))
        best, lam_min = self._bound_q0(y, dy, KTy, span, upper, lam)
        if repair_steps and lam_min < 0.0:
            y_r, dy_r, KTy_r = self._repair(y, KTy, span, int(repair_steps), lam)
            rep, _ = self._bound_q0(y_r, dy_r, KTy_r, span, upper)
            if rep[0] is not None and (best[0] is None or rep[0] > best[0]):
                best = rep
        return best

    def _bound_q0(self, y: np.ndarray, dy: float, KTy: np.ndarray, span: _Span, upper, lam=None):
        """The q = 0 rules of :meth:`dual_bound` for one multiplier: ((bound or None, y_used), lambda_min).
        ``lam``: the eigenvalues of ``S_U`` when the caller has them."""
        if lam is None:
            lam = np.linalg.eigvalsh(span.R_s + self._restrict(span.U, KTy))
        lam_min = float(lam[0]) - EIG_ROUNDOFF * float(np.max(np.abs(lam)))
        cands = []
        if lam_min >= 0.0:
            cands.append((dy, y))
        if span.R_scale is not None:      # B = S_U / r
            mu = float(lam[0]) / span.R_scale - 1.0
        elif span.chol_inv is not None:
            S_U = span.R_s + self._restrict(span.U, KTy)
            B = span.chol_inv @ S_U @ span.chol_inv.T      # = I + L^{-1} K_U L^{-T}
            mu = float(np.linalg.eigvalsh(0.5 * (B + B.T))[0]) - 1.0
        if span.chol_inv is not None:
            theta = THETA_SAFETY * (1.0 if mu >= -1.0 else -1.0 / mu)
            cands.append((theta * dy, theta * y) if dy > 0 else (0.0, np.zeros_like(y)))
        T = self.trace_bound(upper) if upper is not None else None
        if T is not None:
            cands.append((dy + T * min(0.0, lam_min), y))
        if not cands:
            return (None, y), lam_min
        return max(cands, key=lambda c: c[0]), lam_min

    def _repair(self, y: np.ndarray, KTy: np.ndarray, span: _Span, steps: int, lam0: np.ndarray):
        r"""Targeted repair of :meth:`dual_bound` (see its Notes): returns (y', delta^T y', K^* y').

        A step only shrinks multipliers, so it runs over the support of y (a zero stays zero), block
        by block (:meth:`cvxmetric.hinge.QuadrupletGeometry.rank_one_blocks`): one pass for
        :math:`\sum_c y_c g_{ck}^2`, one for the shrink factors.

        ``lam0``: the eigenvalues of the starting ``S_U``. Each step needs only the negative
        eigenpairs: the eigensolver of :func:`cvxmetric.linalg.positive_eigenpairs` on
        :math:`-S_U` (partial while they are few; their number at the previous step is the hint),
        with the round-off threshold scaled by the largest eigenvalue magnitude seen (the partial
        solver does not return the top of the spectrum; the threshold only guards round-off).
        """
        delta = np.asarray(self.constraints.delta, dtype=np.float64)
        geom = self.geometry
        y = y.copy()
        sup = np.flatnonzero(y > 0)
        ys = y[sup]
        scale = float(np.max(np.abs(lam0)))
        n_neg = int(np.count_nonzero(lam0 < -EIG_ROUNDOFF * scale))
        for _ in range(steps):
            mlam, V, partial = positive_eigenpairs(-(span.R_s + self._restrict(span.U, KTy)), rank_hint=n_neg,
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

    # ------------------------------------------------------------------ complementarity polish
    def polish_plan(self, M, free_factor: float = POLISH_FREE_FACTOR) -> Optional["PolishPlan"]:
        """The sizes and modelled cost of :meth:`complementary_multipliers` at the PSD point ``M``
        (the range of M on the data span, at ``POLISH_RANK_RTOL``), or None where it does not
        apply: q > 0, M = 0, or fewer than ``free_factor`` constraints per equation. A caller
        prices it (``plan.cost``, seconds of the cost model of :mod:`cvxmetric.hinge`: the free
        constraints' coordinates, the equations' Gram matrix and its downdates, a Cholesky factor
        per round, all in double precision: a conservative price of the single-precision pass,
        ``POLISH_SINGLE_PRECISION``) and passes it on to :meth:`complementary_multipliers`."""
        free_factor = check_positive(free_factor, "free_factor")
        if free_factor < 1.0:
            raise ValueError(f"free_factor must be at least 1 (free multipliers per equation); got {free_factor}")
        if self.q > 0:
            return None
        M = as_square_symmetric(M, "M", d=self.d)
        M_s = self._on_span(M)
        k = M_s.shape[0]
        # the rank from the eigenvalues alone: the eigenvectors only where the polish applies (at
        # d = 500-1000 it never does, and eigvalsh costs a third of eigh there)
        def sizes(r):   # (equations, free multipliers), or None where the polish does not apply
            n_eq = r * (r + 1) // 2 + r * (k - r)
            n_free = int(math.ceil(free_factor * n_eq))
            return (n_eq, n_free) if r > 0 and n_free <= self.m else None

        if sizes(self._range_rank(np.linalg.eigvalsh(M_s))) is None:
            return None
        Q, r = self._range_basis(M_s)
        if sizes(r) is None:      # the eigenvalues of eigh and eigvalsh agree to round-off only
            return None
        n_eq, n_free = sizes(r)
        cost = (COST_GEMM * 2 * n_free * self.d * self.d
                + COST_DENSE * (n_free * n_eq * n_eq + POLISH_ROUNDS * n_eq ** 3 / 3.0))   # syrk/2 + downdates/2
        return PolishPlan(Q, r, n_eq, n_free, cost)

    def complementary_multipliers(self, M, y, *, Ky: Optional[np.ndarray] = None,
                                  margins: Optional[np.ndarray] = None, free_factor: float = POLISH_FREE_FACTOR,
                                  plan: Optional["PolishPlan"] = None) -> Optional[np.ndarray]:
        r"""Multipliers near ``y`` in complementarity with the PSD point ``M``: a candidate for
        :meth:`certify`, which judges it (this is a heuristic; a bound is only ever a certificate).

        Parameters
        ----------
        M : array_like, shape (d, d)
            A PSD point near the optimum (e.g. PDHG's iterate).
        y : array_like, shape (m,)
            Multipliers near the optimal ones (e.g. PDHG's dual iterate); clipped into the box.
        Ky : ndarray, shape (d, d), optional
            :math:`K^* y` of the clipped ``y``, when the caller has it.
        margins : ndarray, shape (m,), optional
            :math:`t = \delta + K M`, when the caller has them (else one K pass).
        free_factor : float
            Free multipliers per equation (at least 1). More constraints sit near their margin
            when m is large: a caller whose polish failed may retry with a larger factor.
        plan : PolishPlan, optional
            :meth:`polish_plan` of this M (and ``free_factor``, then not read), when the caller
            priced it.

        Returns
        -------
        ndarray of shape (m,) in :math:`[0, c]`, or None
            None where the polish does not apply (:math:`q > 0`, whose closed-form bound needs no
            feasibility; M = 0; fewer than ``free_factor`` constraints per equation).

        Notes
        -----
        With :math:`q = 0` the bound of ``y`` is :math:`\delta^\top y` once :math:`S = R + K^* y`
        is PSD (on the data span), and the certificate of an approximate multiplier lags because
        S is not: the trace bound or the repair pay for its negative curvature. At a solution,
        :math:`S^* \succeq 0` and :math:`S^* M^* = 0`. Let :math:`Q = [V\; W]` be an orthonormal
        basis of the span (:meth:`dual_bound`) with V the range of M (eigenvalues above
        ``POLISH_RANK_RTOL`` times the largest) of dimension r. For a PSD S, :math:`S V = 0` is

        .. math:: E(y) = \big(\mathrm{svec}(V^\top S V),\ \mathrm{vec}(W^\top S V)\big) = 0 ,

        :math:`r(r+1)/2 + r(k-r)` linear equations in y. The multipliers of constraints far from
        their margin sit at a bound at the solution and keep their value; ``free_factor``
        (default ``POLISH_FREE_FACTOR``) times as many constraints with the smallest distance
        :math:`|t_c| / \|A_c\|_F` of M to their margin (:math:`t = \delta + K M`) form the free
        set F. On F the least change that solves the equations,

        .. math:: y_F \leftarrow y_F + B_F (B_F^\top B_F + \mu I)^{-1} (-E(y)) ,

        (:math:`B_F` the equations' coefficients of the free multipliers, :math:`\mu` =
        ``POLISH_RIDGE`` times the mean diagonal), is taken; multipliers that leave :math:`[0, c]`
        are clamped to the box and leave F, and the step repeats on the rest (at most
        ``POLISH_ROUNDS`` rounds). Near a solution with strict complementarity (W^T S W positive
        definite) the result is exactly dual feasible, and its bound :math:`\delta^\top y` is
        within the primal error of p*: measured on syn-d50-m10000 (PDHG at a relative error of
        the objective of 2.4e-4), 5e-5 below p*, where the targeted repair of the same multiplier
        reached 1e-2.

        Every step uses relative quantities only (an eigenvalue ratio, a ranking of normalized
        margins, a relative ridge), so the result scales with y under every scaling of the weights
        and the data.
        """
        M = as_square_symmetric(M, "M", d=self.d)
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (self.m,) or not np.all(np.isfinite(y)):
            raise ValueError(f"y must be a finite array of shape ({self.m},); got shape {y.shape}")
        y = np.clip(y, 0.0, self.coef)
        if plan is None:
            plan = self.polish_plan(M, free_factor)
            if plan is None:
                return None
        Q, r, n_free = plan.Q, plan.r, plan.n_free
        t = self.margins(M) if margins is None else np.asarray(margins, dtype=np.float64)
        # the free set: the constraints nearest their margin
        dist = np.abs(t) / _nonzero_or_inf(self.geometry.frobenius_norms())
        F = np.argpartition(dist, n_free - 1)[:n_free] if n_free < self.m else np.arange(self.m)
        B = self._complementarity_rows(F, Q, r)
        KTy = self.geometry.weighted_sum(y) if Ky is None else np.asarray(Ky, dtype=np.float64)
        e0 = _complementarity_vector(Q.T @ (0.5 * (self.R + self.R.T) + 0.5 * (KTy + KTy.T)) @ Q, r)
        y_out = y.copy()
        y_out[F] = _clamped_least_change(B, e0, y[F], self.coef[F])
        return y_out

    def _on_span(self, M: np.ndarray) -> np.ndarray:
        """M in the coordinates of the data span (:meth:`dual_bound`; M itself when the certificate
        works on the whole space), symmetrized."""
        U = self._basis()[0]
        M_s = M if U is None else U.T @ M @ U
        return 0.5 * (M_s + M_s.T)

    @staticmethod
    def _range_mask(lam: np.ndarray) -> np.ndarray:
        """The eigenvalues (ascending) of the range: above ``POLISH_RANK_RTOL`` times the largest."""
        lam_max = float(lam[-1]) if lam.size else 0.0
        return lam > POLISH_RANK_RTOL * lam_max if lam_max > 0 else np.zeros(lam.size, dtype=bool)

    def _range_rank(self, lam: np.ndarray) -> int:
        return int(np.count_nonzero(self._range_mask(lam)))

    def _range_basis(self, M_s: np.ndarray) -> tuple[np.ndarray, int]:
        """``(Q, r)`` for ``M_s`` on the span (:meth:`_on_span`): an orthonormal basis ``Q = [V W]``
        of the data span (the whole space when the certificate does not restrict to it) whose
        first r columns span the range of M."""
        lam, E = np.linalg.eigh(M_s)
        on = self._range_mask(lam)
        Q = np.hstack([E[:, on], E[:, ~on]])
        U = self._basis()[0]
        return (Q if U is None else U @ Q), int(np.count_nonzero(on))

    def _complementarity_rows(self, rows: np.ndarray, Q: np.ndarray, r: int) -> np.ndarray:
        r"""Row i: the coefficients of :math:`y_c` (c = ``rows[i]``) in E(y) (see
        :meth:`complementary_multipliers`), for :math:`A_c = u u^\top - w w^\top` in the
        coordinates ``Q = [V W]``: :math:`\mathrm{svec}(p p^\top - q q^\top)` on V and
        :math:`\mathrm{vec}(\bar p p^\top - \bar q q^\top)` across, with p, q the V-coordinates of
        u, w and :math:`\bar p, \bar q` their W-coordinates."""
        Du, Dw = self.geometry.difference_vectors(rows)
        Pu, Pw = Du @ Q, Dw @ Q
        iu, ju = triu_indices(r)
        k = Q.shape[1]
        w = _svec_weights(r)
        B = np.empty((rows.size, iu.size + r * (k - r)))
        # Q^T A_c V = Pu_c p^T - Pw_c q^T, in blocks of rows that keep the (block, k, r) products in cache
        for s in range(0, rows.size, POLISH_ROW_BLOCK):
            sl = slice(s, s + POLISH_ROW_BLOCK)
            Z = Pu[sl, :, None] * Pu[sl, None, :r]
            Z -= Pw[sl, :, None] * Pw[sl, None, :r]
            Z = Z.reshape(Z.shape[0], k * r)
            np.multiply(Z[:, iu * r + ju], w, out=B[sl, :iu.size])
            B[sl, iu.size:] = Z[:, r * r:]
        return B

    # ------------------------------------------------------------------ rescaling
    def rescaled(self, data_scale: float, margin_scale: float = 1.0, value_scale: float = 1.0) -> HingeRescaling:
        r"""The same problem in rescaled units: X -> aX, margins / kappa, values / v.

        Parameters
        ----------
        data_scale : float
            :math:`a > 0`: the twin's data is :math:`aX` (so :math:`A_c' = a^2 A_c`).
        margin_scale : float
            :math:`\kappa > 0`: the twin's margins are :math:`\delta / \kappa`.
        value_scale : float
            :math:`v > 0`: the twin's objective is :math:`f / v`.

        Returns
        -------
        HingeRescaling
            The twin with :math:`R' = a^2 \kappa R / v`, :math:`q' = a^4 \kappa^2 q / v`,
            :math:`c' = \kappa c / v`, and ``point_scale`` :math:`b = a^2 \kappa`:
            :math:`f(bM') = v f'(M')` for every :math:`M'` (exact when a, kappa, v are powers of 2).
        """
        a, kappa, v = (float(t) for t in (data_scale, margin_scale, value_scale))
        for name, t in (("data_scale", a), ("margin_scale", kappa), ("value_scale", v)):
            if not (math.isfinite(t) and t > 0):
                raise ValueError(f"{name} must be a positive finite number; got {t!r}")
        cons = self.constraints
        twin_cons = ConstraintSet(cons.idx, np.asarray(cons.delta) / kappa, cons.weight)
        geometry = QuadrupletGeometry(a * self.geometry.X, twin_cons, _validated=True)
        twin = HingeModel(geometry, self.coef * (kappa / v), self.R * (a * a * kappa / v),
                          self.q * (a ** 4 * kappa ** 2 / v), self.name)
        return HingeRescaling(twin, a * a * kappa, v, a, kappa)

    def congruent(self, D) -> HingeCongruence:
        r"""The same problem in the coordinates :math:`M = D M' D` (``D`` a positive diagonal).

        Parameters
        ----------
        D : array_like, shape (d,)
            Positive finite diagonal; powers of two make the twin exact in floating point.

        Returns
        -------
        HingeCongruence
            The twin on data :math:`X \mathrm{Diag}(D)` with linear term :math:`D R D`, the same
            constraints, margins and coefficients.

        Notes
        -----
        .. math::
            f'(M') = \langle DRD, M'\rangle + \sum_c c_c\,[\delta_c + \langle D A_c D, M'\rangle]_+
            = f(D M' D),

        since :math:`\langle D A D, M'\rangle = \langle A, D M' D\rangle`. The Frobenius term is
        not congruence-invariant (:math:`\|D M' D\|_F \ne \|M'\|_F`), so :math:`q > 0` is a
        ValueError.
        """
        if self.q != 0:
            raise ValueError(f"congruent applies to q = 0 only (||D M' D||_F is not ||M'||_F); got q={self.q!r}")
        D = np.asarray(D, dtype=np.float64)
        if D.shape != (self.d,) or not np.all(np.isfinite(D)) or np.any(D <= 0):
            raise ValueError(f"D must be {self.d} positive finite numbers; got shape {D.shape}")
        geometry = QuadrupletGeometry(self.geometry.X * D, self.constraints, _validated=True)
        twin = HingeModel(geometry, self.coef, self.R * np.outer(D, D), 0.0, self.name)
        return HingeCongruence(self, twin, D.copy())

    def _median_squared_length(self) -> float:
        sq_u, sq_v = self.geometry.squared_lengths()
        sq = np.concatenate([sq_u, sq_v])
        sq = sq[sq > 0]
        return float(np.median(sq)) if sq.size else 0.0

    @property
    def metric_scale(self) -> float:
        r"""The natural size of a metric for this model: :math:`\max_c |\delta_c|` over the median
        positive squared length of the difference vectors (the multiple of the identity that moves
        a typical constraint value by the largest margin). It scales like the optimal M under
        X -> sX and margins -> kappa delta, so residuals measured against it stay scale-free where
        the optimum is M = 0 and a relative measure has no size to refer to. 0 when undefined."""
        med = self._median_squared_length()
        dmax = float(np.max(np.abs(self.constraints.delta))) if self.m else 0.0
        return dmax / med if med > 0 else 0.0

    def normalization(self) -> HingeRescaling:
        r"""The rescaled twin (:meth:`rescaled`) whose numbers are of order one.

        Notes
        -----
        :math:`a` makes the median positive squared length of the constraints' difference vectors
        about 1 (so :math:`|\langle M', A_c'\rangle|` is O(1) for an O(1) metric), :math:`\kappa`
        the largest margin magnitude about 1, :math:`v = \kappa \max_c c_c` the largest hinge
        coefficient about 1. Each factor is rounded to a power of two, so the twin's data are the
        original's bits with shifted exponents and every value maps back exactly; the twin of
        :math:`X \cdot 2^k` is then the twin of X, bit for bit (LMNN's invariance made exact).
        """
        med = self._median_squared_length()
        a = power_of_two(1.0 / math.sqrt(med)) if med > 0 else 1.0
        dmax = float(np.max(np.abs(self.constraints.delta))) if self.m else 0.0
        kappa = power_of_two(dmax) if dmax > 0 else 1.0
        cmax = float(np.max(self.coef)) if self.m else 0.0
        v = kappa * (power_of_two(cmax) if cmax > 0 else 1.0)
        return self.rescaled(a, kappa, v)

    def regularizer(self, M: np.ndarray) -> float:
        r""":math:`\langle R, M\rangle + \tfrac q2 \|M\|_F^2`."""
        return float(np.vdot(self.R, M) + (0.5 * self.q * np.vdot(M, M) if self.q else 0.0))

    def regularizer_grad(self, M: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`regularizer`: ``R + q M``."""
        return self.R + self.q * M if self.q else self.R.copy()

    def hinge(self) -> HingeLoss:
        """A fresh incremental hinge-loss evaluator for this model."""
        return HingeLoss(self.geometry, self.coef)

    def margins(self, M: np.ndarray) -> np.ndarray:
        r""":math:`\delta_c + \langle M, A_c\rangle` for every constraint."""
        return self.geometry.constraints.delta + self.geometry.values(M)

    def value(self, M: np.ndarray) -> float:
        """The objective :math:`f(M)` (numpy; the cvxpy twin is ``formulations``' ``value_at``)."""
        M = np.asarray(M, dtype=np.float64)
        return self.regularizer(M) + float(self.coef @ np.maximum(self.margins(M), 0.0))


def pull_matrix(X, pairs) -> np.ndarray:
    r""":math:`\sum_{(i, j)} C_{ij}` over ``pairs`` (shape (p, 2)), computed from difference vectors."""
    X = as_data_matrix(X)
    P = as_index_array(pairs, 2, "pull_pairs", n=X.shape[0])
    Dv = X[P[:, 0]] - X[P[:, 1]]
    G = Dv.T @ Dv
    return 0.5 * (G + G.T)


def qwise_model(X, constraints: ConstraintSet, *, regularizer: str = "trace", C_Q: float = 1.0,
                C_P: float = 1.0, reg_weight: float = 1.0, pull_pairs=None,
                linear_term=None) -> HingeModel:
    r"""The full-matrix Qwise model (thesis eq. 2.7) as a :class:`HingeModel`.

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Relative constraints (weighted by ``C_Q``) and pairs (weighted by ``C_P``).
    regularizer : {"trace", "frobenius", "pull"}
        :math:`\Omega(M)`: :math:`\mathrm{tr} M`, :math:`\frac12 \|M\|_F^2` or
        :math:`\langle M, \sum_{(i,j) \in \text{pull\_pairs}} C_{ij}\rangle`.
    C_Q, C_P : float
        Non-negative weights of the relative and pairwise hinge terms.
    reg_weight : float
        Positive factor in front of :math:`\Omega`.
    pull_pairs : array_like, shape (p, 2), optional
        Required for ``"pull"``: the similar pairs :math:`S` of :math:`\Omega`.
    linear_term : array_like, shape (d, d), optional
        An extra symmetric matrix added to :math:`R` (e.g. :math:`\mu W` of a Fantope bound).
    """
    X = as_data_matrix(X)
    if not isinstance(constraints, ConstraintSet):
        raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
    constraints.validate(X.shape[0], name="constraints")
    if not isinstance(regularizer, str) or regularizer not in REGULARIZERS:
        raise ValueError(f"regularizer must be one of {REGULARIZERS}; got {regularizer!r}")
    C_Q = check_nonnegative(C_Q, "C_Q")
    C_P = check_nonnegative(C_P, "C_P")
    reg_weight = check_positive(reg_weight, "reg_weight")
    d = X.shape[1]
    geometry = QuadrupletGeometry(X, constraints, _validated=True)
    coef = constraints.weight * np.where(constraints.is_pair, C_P, C_Q)
    q = 0.0
    R = np.zeros((d, d))
    if regularizer == "trace":
        R = reg_weight * np.eye(d)
    elif regularizer == "frobenius":
        q = reg_weight
    else:
        if pull_pairs is None:
            raise ValueError("regularizer='pull' needs pull_pairs, the similar pairs S of Omega")
        R = reg_weight * pull_matrix(X, pull_pairs)
    if pull_pairs is not None and regularizer != "pull":
        raise ValueError("pull_pairs is only used with regularizer='pull'")
    if linear_term is not None:
        R = R + as_square_symmetric(linear_term, "linear_term", d=d)
    return HingeModel(geometry, coef, R, q, name=f"qwise[{regularizer}]")
