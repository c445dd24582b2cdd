r"""Linear algebra used by every layer: symmetrization, PSD projection, eigen helpers, svec.

All functions are pure: they never modify their inputs.
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np
import scipy.linalg

from ._checks import check_bool, check_int_in_range
from .tolerances import RANK_RTOL

__all__ = ["power_of_two", 
    "symmetrize",
    "eigh_descending",
    "positive_eigenpairs",
    "orthonormal_columns",
    "project_psd",
    "rayleigh_ritz_positive",
    "lambda_min_lower_bound",
    "project_psd_halfspace",
    "psd_factor",
    "numerical_rank",
    "triu_indices",
    "svec",
    "svec_outer",
    "random_psd",
]


def symmetrize(A: np.ndarray) -> np.ndarray:
    """Return ``(A + A.T) / 2`` (a new array)."""
    A = np.asarray(A, dtype=np.float64)
    return 0.5 * (A + A.T)


def eigh_descending(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Eigen-decomposition of a symmetric matrix with eigenvalues sorted non-increasing.

    Returns
    -------
    lam : ndarray, shape (d,)
        :math:`\lambda_1 \ge \dots \ge \lambda_d`.
    V : ndarray, shape (d, d)
        Orthonormal eigenvectors as columns, ``M = V diag(lam) V.T``.
    """
    lam, V = np.linalg.eigh(symmetrize(M))
    return lam[::-1].copy(), V[:, ::-1].copy()


#: From this dimension on, ``project_psd(..., partial=None)`` may compute only the eigenpairs with
#: positive eigenvalues (``scipy.linalg.eigh(driver="evr", subset_by_value=(0, inf))``: the same
#: tridiagonalization, no back-transformation of the other eigenvectors). Measured on one BLAS
#: thread, 10 positive eigenvalues, loaded machine: d = 50 0.23 ms vs 0.16 ms (full eigh faster),
#: d = 100 equal, d = 300 24 ms vs 54 ms, d = 500 0.13 s vs 0.23 s, d = 1000 0.69 s vs 1.65 s;
#: eigenvalues agree to ~1e-13 relative.
PARTIAL_EIGH_MIN_D = 200
#: ... and only while the expected number of positive eigenvalues (``rank_hint``) is at most this
#: fraction of d. For a subset LAPACK's dsyevr does not use MRRR but bisection and inverse iteration
#: (dstebz + dstein), whose cost grows with the subset, while the full divide-and-conquer solver
#: (dsyevd) does not. Measured (``python -m benchmarks.eigh``: one BLAS thread, random orthogonal
#: eigenbasis, best of 5 taking turns, load 6-7), time partial / full at a fraction f positive:
#: d = 500: f = 0.05 0.45, 0.1 0.56, 0.15 0.71, 0.2 0.97, 0.3 1.45, 0.5 2.39; d = 1000: 0.05 0.48,
#: 0.1 0.59, 0.15 0.71, 0.2 0.78, 0.3 1.02, 0.5 1.59 (0.5 at d = 1000: 0.51 s against 0.32 s). PDHG's
#: iterates on d = 1000, 10^4 quadruplets have rank ~57 (partial), the early ones up to ~140.
PARTIAL_EIGH_MAX_FRACTION = 0.2


def positive_eigenpairs(S: np.ndarray, *, partial: bool | None = None, rank_hint: int | None = None,
                        overwrite: bool = False) -> tuple[np.ndarray, np.ndarray, bool]:
    r"""Eigenpairs of the symmetric ``S`` with the eigensolver chosen by the measured rule.

    Parameters
    ----------
    S : ndarray, shape (d, d)
        Symmetric matrix (not checked; only its lower triangle is read).
    partial : bool or None
        True: only the eigenpairs with :math:`\lambda > 0` (dsyevr on that subset); False: all of
        them (dsyevd, divide and conquer); None: partial when ``d >= PARTIAL_EIGH_MIN_D`` and
        ``rank_hint`` (the expected number of positive eigenvalues; None for unknown) is at most
        ``PARTIAL_EIGH_MAX_FRACTION * d``.
    rank_hint : int, optional
        Expected number of positive eigenvalues, e.g. that of the previous iterate of a method.
    overwrite : bool
        ``S`` is a private copy that LAPACK may overwrite.

    Returns
    -------
    lam : ndarray
        Eigenvalues, ascending (only the positive ones when partial).
    V : ndarray, shape (d, lam.size)
        Orthonormal eigenvectors as columns.
    partial : bool
        Whether only the positive eigenpairs were computed.
    """
    from scipy.linalg import eigh

    d = S.shape[0]
    if rank_hint is not None:
        rank_hint = check_int_in_range(rank_hint, "rank_hint", 0, d)
    if partial is None:
        partial = d >= PARTIAL_EIGH_MIN_D and (rank_hint is None or rank_hint <= PARTIAL_EIGH_MAX_FRACTION * d)
    if partial:
        lam, V = eigh(S, subset_by_value=(0.0, np.inf), driver="evr", overwrite_a=overwrite)
    elif d == 1:   # scipy's dsyevd wrapper asks LAPACK for too small a workspace at d = 1 (1.10, 1.13 measured)
        lam, V = np.linalg.eigh(S)
    else:
        lam, V = eigh(S, driver="evd", overwrite_a=overwrite)
    return lam, V, bool(partial)


def project_psd(M: np.ndarray, *, return_eig: bool = False, partial: bool | None = False,
                rank_hint: int | None = None):
    r"""Euclidean (Frobenius) projection onto the PSD cone :math:`\mathbb{S}^d_+`.

    Parameters
    ----------
    M : ndarray, shape (d, d)
        Symmetric matrix (it is symmetrized first, which is exact for symmetric input).
    return_eig : bool
        Also return the eigenvalues (ascending) and eigenvectors of the symmetrized ``M``.
    partial : bool or None
        Compute only the eigenpairs with positive eigenvalues (then ``return_eig`` returns only
        those); None chooses by the measured rule of :func:`positive_eigenpairs`
        (``PARTIAL_EIGH_MIN_D``, ``PARTIAL_EIGH_MAX_FRACTION`` of ``rank_hint``).
    rank_hint : int, optional
        Expected number of positive eigenvalues (e.g. the rank of the previous iterate of a
        method); only read when ``partial`` is None.

    Notes
    -----
    :math:`\Pi_{\mathbb{S}^d_+}(M) = V \operatorname{diag}(\max(\lambda, 0)) V^\top` for
    :math:`M = V \operatorname{diag}(\lambda) V^\top`: one ``eigh`` call, :math:`O(d^3)`. Only the
    positive eigenpairs enter, so a partial eigensolver that returns exactly those gives the same
    projection (up to round-off).
    """
    return_eig = check_bool(return_eig, "return_eig")
    S = symmetrize(M)      # a private copy: LAPACK may overwrite it
    lam, V, _ = positive_eigenpairs(S, partial=partial, rank_hint=rank_hint, overwrite=True)
    pos = lam > 0
    Vp = V[:, pos]
    P = (Vp * lam[pos]) @ Vp.T
    P = 0.5 * (P + P.T)
    if return_eig:
        return P, lam, V
    return P


def orthonormal_columns(Z: np.ndarray, against: Optional[np.ndarray] = None,
                         drop_rtol: Optional[float] = None) -> np.ndarray:
    """An orthonormal basis of the columns of ``Z`` (orthogonal to the orthonormal ``against``,
    by two passes of block Gram-Schmidt), dropping directions at round-off level
    (``drop_rtol``, default ``RITZ_DROP_RTOL``, of the largest column norm)."""
    scale = float(np.max(np.linalg.norm(Z, axis=0), initial=0.0))
    if scale == 0.0:
        return Z[:, :0]
    for _ in range(2 if against is not None else 0):
        Z = Z - against @ (against.T @ Z)
    Q, Rz = np.linalg.qr(Z)
    keep = np.abs(np.diag(Rz)) > (RITZ_DROP_RTOL if drop_rtol is None else drop_rtol) * scale
    return Q[:, keep]


#: A direction of the Rayleigh-Ritz residual block counts as new only when its length after
#: orthogonalization exceeds this fraction of the block's largest residual (below it is round-off).
RITZ_DROP_RTOL = 1e-10


def rayleigh_ritz_positive(apply, basis: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Positive Ritz pairs of a symmetric operator on the block Krylov space of ``basis``.

    Parameters
    ----------
    apply : callable
        ``apply(B)`` returns :math:`A B` for a (d, k) block ``B`` (A symmetric, never formed).
    basis : ndarray, shape (d, k)
        Columns spanning the expected dominant invariant subspace (e.g. the previous call's
        returned basis); orthonormalized here.

    Returns
    -------
    lam : ndarray
        The positive Ritz values, descending.
    V : ndarray, shape (d, lam.size)
        Their orthonormal Ritz vectors.
    ritz_basis : ndarray, shape (d, <= 2k)
        All Ritz vectors of the step, by descending Ritz value (the caller keeps the leading
        columns as the next ``basis``).

    Notes
    -----
    One step of block Rayleigh-Ritz on :math:`\mathcal{K} = \mathrm{span}[B, AB]`: with
    :math:`B` orthonormal, :math:`W = AB`, :math:`Z` an orthonormal basis of
    :math:`(I - BB^\top) W` and :math:`Q = [B\; Z]`, the Ritz pairs are the eigenpairs of
    :math:`H = Q^\top A Q` (two products with A: :math:`AB` and :math:`AZ`), mapped back by Q.
    By the Cauchy interlacing theorem the j-th largest Ritz value is at most the j-th largest
    eigenvalue of A, and :math:`V \mathrm{diag}(\lambda) V^\top` is positive semidefinite by
    construction. Called on a warm basis at every step of an iteration whose matrix moves little
    between steps, it tracks the dominant subspace (one LOBPCG-like step per call); it is not a
    converged eigensolver, and its caller must not need one.
    """
    B = orthonormal_columns(np.asarray(basis, dtype=np.float64))
    W = apply(B)
    H11 = B.T @ W
    Z = orthonormal_columns(W - B @ H11, against=B)
    AZ = apply(Z) if Z.shape[1] else Z
    k = B.shape[1]
    H = np.empty((k + Z.shape[1],) * 2)
    H[:k, :k] = H11
    H[:k, k:] = W.T @ Z
    H[k:, :k] = H[:k, k:].T
    H[k:, k:] = Z.T @ AZ
    theta, Y = np.linalg.eigh(0.5 * (H + H.T))
    theta, Y = theta[::-1], Y[:, ::-1]
    ritz = B @ Y[:k] + Z @ Y[k:]
    pos = theta > 0
    return theta[pos].copy(), ritz[:, pos], ritz


def _cholesky_backward_error(d: int, norm: float) -> float:
    r"""Bound on :math:`\|E\|_2` for a Cholesky factorization of order d of a matrix of Frobenius norm
    ``norm`` that ran to completion in floating point: the computed R satisfies
    :math:`R^\top R = S + E`, :math:`|E| \le \gamma_{d+1} |R^\top||R|` (Higham, Accuracy and
    Stability of Numerical Algorithms, 2nd ed., Thm 10.3; :math:`\gamma_k = k u / (1 - k u)`), and
    :math:`\||R^\top||R|\|_2 \le d\,\|R\|_2^2 = d\,\|S + E\|_2`, so
    :math:`\|E\|_2 \le d\gamma_{d+1} \|S\|_2 / (1 - d\gamma_{d+1})`, with :math:`\|S\|_2 \le \|S\|_F`."""
    u = np.finfo(np.float64).eps / 2.0
    gamma = (d + 1) * u / (1.0 - (d + 1) * u)
    return d * gamma * norm / (1.0 - d * gamma)


#: Shifts :func:`lambda_min_lower_bound` tries below its estimate, as multiples of the estimate's
#: residual norm plus its round-off guard, tightest first: the first that factors is the bound (each
#: failure costs one Cholesky attempt, which stops at the first non-positive pivot). A Ritz value
#: is never below lambda_min, and lambda_min is usually within far less than the residual norm of it
#: (the residual bound is quadratic in the eigenvector's error), so the tight shifts usually factor.
SAFE_SHIFT_STEPS = (0.01, 0.1, 1.0, 4.0, 64.0)


def lambda_min_lower_bound(S: np.ndarray, estimate: Optional[tuple] = None,
                           steps: tuple = SAFE_SHIFT_STEPS) -> float:
    r"""A proven lower bound on the smallest eigenvalue of the symmetric ``S`` (a safe shift).

    Parameters
    ----------
    S : ndarray, shape (d, d)
        Symmetric matrix (its lower triangle is read).
    estimate : (float, float), optional
        An estimate :math:`\theta` of :math:`\lambda_{\min}` and its residual norm
        :math:`\|S x - \theta x\|` for a unit Ritz vector x (e.g. from LOBPCG, matrix-free). Default:
        Gershgorin's lower bound, which is itself proven.
    steps : tuple of float
        The multiples of the residual norm (plus round-off guard) tried below the estimate,
        tightest first (default ``SAFE_SHIFT_STEPS``).

    Returns
    -------
    float
        :math:`\sigma` with :math:`\lambda_{\min}(S) \ge \sigma` (``-inf`` if no shift factored).

    Notes
    -----
    A Ritz pair alone proves only that *some* eigenvalue lies within :math:`\|r\|` of
    :math:`\theta`, not that none lies below it, so the estimate is not trusted: the bound is a
    **safe shift**. If the Cholesky factorization of :math:`S - \sigma' I` runs to completion in
    floating point, the computed factor is the exact factor of :math:`S - \sigma' I + E` with
    :math:`\|E\|_2 \le \epsilon_{chol}` (``_cholesky_backward_error``, Higham Thm 10.3), so
    :math:`S - \sigma' I + E \succeq 0` and :math:`\lambda_{\min}(S) \ge \sigma' - \epsilon_{chol}`.
    The shifts tried are :math:`\sigma' = \theta - c(\|r\| + g)` for c in ``SAFE_SHIFT_STEPS``
    (g the round-off guard), then Gershgorin's bound. Cost: :math:`d^3/3` per attempt, a fraction
    of a symmetric eigenvalue decomposition (measured at d = 1000: 37 ms against 173 ms for
    ``eigvalsh``, one BLAS thread).
    """
    S = np.asarray(S, dtype=np.float64)
    d = S.shape[0]
    if d == 0:
        return math.inf
    norm = float(np.linalg.norm(S))
    # round-off guard of the shift (``tiny``: a zero matrix still needs a positive shift to factor)
    guard = _cholesky_backward_error(d, norm) + 4.0 * np.finfo(np.float64).eps * norm + np.finfo(np.float64).tiny
    # row sums of |S| by blocks of rows (no second d x d array)
    absrow = np.concatenate([np.sum(np.abs(S[i:i + 256]), axis=1) for i in range(0, d, 256)]) - np.abs(np.diag(S))
    gersh = float(np.min(np.diag(S) - absrow))
    shifts = []
    if estimate is not None:
        theta, res = (float(v) for v in estimate)
        if math.isfinite(theta) and math.isfinite(res):
            shifts = [theta - c * (abs(res) + guard) for c in steps]
    shifts = [t for t in shifts if t > gersh] + [gersh - guard]
    diag = np.diagonal(S).copy()
    for sigma in shifts:
        # S - sigma I in one d x d array (at d = 5000 each is 200 MB), factored in place
        shifted = S.copy()
        np.fill_diagonal(shifted, diag - sigma)
        norm_shifted = float(np.linalg.norm(shifted))
        try:
            # the lower triangle of the C-ordered array is the upper one of its Fortran-ordered
            # transpose, which LAPACK factors in place (no copy)
            scipy.linalg.cholesky(shifted.T, lower=False, overwrite_a=True, check_finite=False)
        except np.linalg.LinAlgError:
            continue
        finally:
            del shifted
        return sigma - _cholesky_backward_error(d, norm_shifted)
    return -math.inf


#: Relative accuracy of the halfspace constraint at the point returned by
#: :func:`project_psd_halfspace`: <P, C> is in [b (1 - PROJECTION_RTOL), b] when the constraint is active.
PROJECTION_RTOL = 1e-12
#: Root-finding steps of :func:`project_psd_halfspace` before it gives up (each one ``eigh``).
PROJECTION_MAX_STEPS = 200


def project_psd_halfspace(Y: np.ndarray, C: np.ndarray, b: float = 1.0, *, return_tau: bool = False):
    r"""Exact Euclidean projection onto :math:`K = \{M \succeq 0,\ \langle M, C\rangle \le b\}` (C PSD, b > 0).

    Parameters
    ----------
    Y : ndarray, shape (d, d)
        Symmetric matrix to project.
    C : ndarray, shape (d, d)
        Symmetric PSD matrix of the halfspace.
    b : float
        Right-hand side, > 0.
    return_tau : bool
        Also return the multiplier :math:`\tau`.

    Returns
    -------
    P : ndarray, shape (d, d)
        The projection (PSD, :math:`\langle P, C\rangle \le b`).
    tau : float
        Only with ``return_tau``.

    Notes
    -----
    The KKT conditions of :math:`\min_{M \in K} \tfrac12\|M - Y\|_F^2` give
    :math:`P = \Pi_{\mathbb{S}_+}(Y - \tau C)` with :math:`\tau \ge 0` and
    :math:`\tau(\langle P, C\rangle - b) = 0`. :math:`h(\tau) = \langle \Pi_{\mathbb{S}_+}(Y - \tau C), C\rangle`
    is continuous and non-increasing (C PSD) with :math:`h(\tau) \to 0 < b`, so :math:`\tau = 0`
    when :math:`h(0) \le b` and otherwise :math:`\tau` is the root of :math:`h(\tau) = b`, found by a
    bracket (doubling) and safeguarded regula falsi (Illinois variant, falling back to
    bisection). The returned point is the bracket's feasible end: :math:`\langle P, C\rangle \in
    [b(1 - \text{PROJECTION\_RTOL}), b]`. One ``eigh`` per step: the exact projection costs
    ~10-30 eigendecompositions, and beats alternating projections, which only converge in the
    limit.
    """
    return_tau = check_bool(return_tau, "return_tau")
    Y = np.asarray(Y, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] != Y.shape[1] or C.shape != Y.shape:
        raise ValueError(f"Y and C must be square matrices of the same shape; got {Y.shape} and {C.shape}")
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"b must be finite and > 0; got {b}")

    def h(tau):
        P = project_psd(Y - tau * C)
        return P, float(np.vdot(P, C))

    P0, h0 = h(0.0)
    if h0 <= b:
        return (P0, 0.0) if return_tau else P0
    cnorm2 = float(np.vdot(C, C))  # > 0: h(0) > b > 0 needs C != 0
    lo, f_lo = 0.0, h0 - b
    hi = (h0 - b) / cnorm2
    P_hi, h_hi = h(hi)
    steps = 0
    while h_hi > b:
        lo, f_lo = hi, h_hi - b
        hi *= 2.0
        P_hi, h_hi = h(hi)
        steps += 1
        if steps > PROJECTION_MAX_STEPS:
            raise RuntimeError("project_psd_halfspace could not bracket the multiplier; is C PSD?")
    f_hi = h_hi - b
    side = 0
    while f_hi < -PROJECTION_RTOL * b and hi - lo > 1e-15 * hi:
        steps += 1
        if steps > PROJECTION_MAX_STEPS:
            break
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        if not lo < mid < hi or steps % 8 == 0:
            mid = 0.5 * (lo + hi)
        P_mid, h_mid = h(mid)
        f_mid = h_mid - b
        if f_mid > 0:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi *= 0.5
            side = -1
        else:
            hi, f_hi, P_hi = mid, f_mid, P_mid
            if side == 1:
                f_lo *= 0.5
            side = 1
    return (P_hi, hi) if return_tau else P_hi


def psd_factor(M: np.ndarray, *, rtol: float = 0.0) -> np.ndarray:
    r"""A factor :math:`L` (shape (r, d)) with :math:`M \approx L^\top L`, r = numerical rank.

    Eigenvalues at or below ``rtol * lambda_max`` (and all non-positive ones) are dropped, so
    for a PSD input with ``rtol=0`` the factorization is exact up to round-off.
    """
    lam, V = np.linalg.eigh(symmetrize(M))
    top = lam[-1] if lam.size else 0.0
    keep = lam > max(rtol * max(top, 0.0), 0.0)
    return (V[:, keep] * np.sqrt(lam[keep])).T.copy()


def numerical_rank(M: np.ndarray, *, rtol: float = RANK_RTOL) -> int:
    r"""Number of eigenvalues of symmetric ``M`` above ``rtol * lambda_max`` (0 for M = 0)."""
    lam = np.linalg.eigvalsh(symmetrize(M))
    top = float(lam[-1])
    if top <= 0:
        return 0
    return int(np.sum(lam > rtol * top))


@functools.lru_cache(maxsize=64)
def triu_indices(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Row/column indices of the upper triangle (diagonal included), row-major order (read-only
    arrays, computed once per d: the column-generation loops call :func:`svec_outer` and its
    inverse every step, where ``numpy.triu_indices`` cost as much as the products)."""
    r, c = np.triu_indices(d)
    r.flags.writeable = c.flags.writeable = False
    return r, c


def svec(M: np.ndarray) -> np.ndarray:
    r"""Upper triangle of ``M`` (diagonal included), row-major: :math:`d(d+1)/2` entries.

    With :func:`svec_outer`, :math:`\langle M, u u^\top\rangle = \mathrm{svec\_outer}(u) \cdot \mathrm{svec}(M)`.
    """
    M = np.asarray(M, dtype=np.float64)
    return M[triu_indices(M.shape[0])]


def svec_outer(U: np.ndarray) -> np.ndarray:
    r"""Rows :math:`u_a u_b\,(2 - [a = b])` over the upper triangle, for every row ``u`` of ``U``.

    Returns an array of shape (m, d(d+1)/2) such that
    ``svec_outer(U) @ svec(M) == einsum('ma,ab,mb->m', U, M, U)`` for symmetric ``M``.
    No (m, d, d) array is formed.
    """
    U = np.asarray(U, dtype=np.float64)
    r, c = triu_indices(U.shape[1])
    UT = np.ascontiguousarray(U.T)
    out = UT[r]           # built row by row in place: the one-line U[:, r] * U[:, c] * scale made
    out *= UT[c]          # three (m, d(d+1)/2) temporaries, measured 12x slower at m = 540, d = 10
    out[r != c] *= 2.0
    return out.T


def random_psd(d: int, *, rank: int | None = None, seed=None, scale: float = 1.0) -> np.ndarray:
    """A random PSD matrix ``G.T @ G / rank`` with Gaussian ``G`` of shape (rank, d) (for tests)."""
    from ._checks import as_rng

    rng = as_rng(seed)
    r = d if rank is None else rank
    G = rng.standard_normal((r, d))
    return scale * (G.T @ G) / max(r, 1)


def power_of_two(x) -> np.ndarray | float:
    """The powers of 2 nearest to positive ``x`` (1 where ``x`` is 0 or not finite).

    Scaling by a power of 2 is exact in floating point, so a problem rescaled by them is *exactly*
    the same problem: the one rounding used by every equilibration and normalized twin.
    A scalar ``x`` gives a float.
    """
    arr = np.asarray(x, dtype=np.float64)
    ok = np.isfinite(arr) & (arr > 0)
    out = np.where(ok, np.exp2(np.round(np.log2(np.where(ok, arr, 1.0)))), 1.0)
    return float(out) if out.ndim == 0 else out
