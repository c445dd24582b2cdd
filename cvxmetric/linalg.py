r"""Linear algebra used by every layer: symmetrization, PSD projection, eigen helpers, svec.

All functions are pure: they never modify their inputs.
"""
from __future__ import annotations

import numpy as np

from ._checks import as_square_symmetric
from .tolerances import RANK_RTOL

__all__ = [
    "symmetrize",
    "eigh_descending",
    "project_psd",
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


def project_psd(M: np.ndarray, *, return_eig: bool = False):
    r"""Euclidean (Frobenius) projection onto the PSD cone :math:`\mathbb{S}^d_+`.

    Parameters
    ----------
    M : ndarray, shape (d, d)
        Symmetric matrix (it is symmetrized first, which is exact for symmetric input).
    return_eig : bool
        Also return the eigenvalues (ascending) and eigenvectors of the symmetrized ``M``.

    Notes
    -----
    :math:`\Pi_{\mathbb{S}^d_+}(M) = V \operatorname{diag}(\max(\lambda, 0)) V^\top` for
    :math:`M = V \operatorname{diag}(\lambda) V^\top`: one ``eigh`` call, :math:`O(d^3)`.
    """
    lam, V = np.linalg.eigh(symmetrize(M))
    pos = lam > 0
    Vp = V[:, pos]
    P = (Vp * lam[pos]) @ Vp.T
    P = 0.5 * (P + P.T)
    if return_eig:
        return P, lam, V
    return P


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


def triu_indices(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Row/column indices of the upper triangle (diagonal included), row-major order."""
    return np.triu_indices(d)


def svec(M: np.ndarray) -> np.ndarray:
    r"""Upper triangle of ``M`` (diagonal included), row-major: :math:`d(d+1)/2` entries.

    With :func:`svec_outer`, :math:`\langle M, u u^\top\rangle = \mathrm{svec\_outer}(u) \cdot \mathrm{svec}(M)`.
    """
    M = np.asarray(M, dtype=np.float64)
    return M[np.triu_indices(M.shape[0])]


def svec_outer(U: np.ndarray) -> np.ndarray:
    r"""Rows :math:`u_a u_b\,(2 - [a = b])` over the upper triangle, for every row ``u`` of ``U``.

    Returns an array of shape (m, d(d+1)/2) such that
    ``svec_outer(U) @ svec(M) == einsum('ma,ab,mb->m', U, M, U)`` for symmetric ``M``.
    No (m, d, d) array is formed.
    """
    U = np.asarray(U, dtype=np.float64)
    r, c = np.triu_indices(U.shape[1])
    scale = np.where(r == c, 1.0, 2.0)
    return U[:, r] * U[:, c] * scale


def random_psd(d: int, *, rank: int | None = None, seed=None, scale: float = 1.0) -> np.ndarray:
    """A random PSD matrix ``G.T @ G / rank`` with Gaussian ``G`` of shape (rank, d) (for tests)."""
    from ._checks import as_rng

    rng = as_rng(seed)
    r = d if rank is None else rank
    G = rng.standard_normal((r, d))
    return scale * (G.T @ G) / max(r, 1)


def check_psd_matrix(M, name: str = "M", d: int | None = None) -> np.ndarray:
    """Validated symmetric PSD copy of ``M`` (see :func:`cvxmetric._checks.as_square_symmetric`)."""
    return as_square_symmetric(M, name, d=d, psd=True)
