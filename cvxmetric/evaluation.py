r"""How well a learned metric does its job: the measures the benchmarks, notebooks and
estimators share.

* quadruplet ordering (thesis sec. 3.4.1): the share of quadruplets :math:`(i, j, k, l)`
  ordered by :math:`D_M` as by a target metric :math:`D_T`,
  i.e. :math:`\operatorname{sign}(D_M(k, l) - D_M(i, j)) = \operatorname{sign}(D_T(k, l) - D_T(i, j))`;
* the distance between two metrics after scaling each to a largest entry of 1 (thesis table 3.1).

Everything is evaluated through a factor :math:`L` with :math:`M = L^\top L`, in chunks, so
:math:`10^6` quadruplets never form a :math:`(10^6, d)` array.
"""
from __future__ import annotations

import numpy as np

from cvxmetric.generators import sample_quadruplet_indices
from cvxmetric.linalg import psd_factor

#: Quadruplets scored per chunk: bounds the memory at ``CHUNK * rank(M)`` floats per endpoint.
CHUNK = 100_000


def quadruplet_scores(X, L, q) -> np.ndarray:
    r""":math:`\|L(x_k - x_l)\|^2 - \|L(x_i - x_j)\|^2` for every row ``(i, j, k, l)`` of ``q``."""
    X = np.asarray(X, dtype=float)
    out = np.empty(q.shape[0])
    XL = X @ np.asarray(L, dtype=float).T  # (n, r): project the points once
    for s in range(0, q.shape[0], CHUNK):
        b = q[s:s + CHUNK]
        u = XL[b[:, 0]] - XL[b[:, 1]]
        v = XL[b[:, 2]] - XL[b[:, 3]]
        out[s:s + CHUNK] = np.einsum("ij,ij->i", v, v) - np.einsum("ij,ij->i", u, u)
    return out


def labelled_quadruplets(X, T, m: int, seed) -> tuple[np.ndarray, np.ndarray]:
    """``m`` random quadruplets and the sign of D_T(k, l) - D_T(i, j), ties dropped.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    T : ndarray of shape (d, d)
        The target metric (PSD).
    m : int
        Quadruplets drawn (fewer are returned when ties are dropped).
    seed : int or numpy.random.Generator

    Returns
    -------
    q : ndarray of shape (m', 4)
    sign : ndarray of shape (m',)
        +1 where the pair (k, l) is farther than (i, j) under ``T``, -1 otherwise.
    """
    q = sample_quadruplet_indices(np.asarray(X).shape[0], m, seed)
    sign = np.sign(quadruplet_scores(X, psd_factor(T), q))
    keep = sign != 0
    return q[keep], sign[keep]


def quadruplet_accuracy(X, M, q, sign) -> float:
    """Share of quadruplets ``q`` ordered by D_M as ``sign`` says (strict inequality)."""
    L = psd_factor(M)
    if L.shape[0] == 0:
        return 0.0
    return float(np.mean(np.sign(quadruplet_scores(X, L, q)) == sign))


def scaled_distance(M, T) -> float:
    r""":math:`\|M / \max|M| - T / \max|T|\|_F^2` (thesis: both rescaled to a largest entry of 1)."""
    M = np.asarray(M, dtype=float)
    T = np.asarray(T, dtype=float)
    Ms = M / np.max(np.abs(M)) if np.max(np.abs(M)) > 0 else M
    return float(np.sum((Ms - T / np.max(np.abs(T))) ** 2))
