r"""How well a learned metric does its job: the measures the benchmarks, notebooks and
estimators share.

* quadruplet ordering (thesis sec. 3.4.1): the share of quadruplets :math:`(i, j, k, l)`
  ordered by :math:`D_M` as by a target metric :math:`D_T`,
  i.e. :math:`\operatorname{sign}(D_M(k, l) - D_M(i, j)) = \operatorname{sign}(D_T(k, l) - D_T(i, j))`;
* the distance between two metrics after scaling each to a largest entry of 1 (thesis table 3.1);
* the test error of the k-nearest-neighbour classifier under :math:`D_M` (the use most metrics are
  learned for), the mean average precision of retrieval (:func:`retrieval_precision`), and the
  2-D picture of the data in the learned metric (:func:`metric_embedding`).

Everything is evaluated through a factor :math:`L` with :math:`M = L^\top L`
(:func:`cvxmetric.linalg.psd_factor`): :math:`D_M(x, x') = \|Lx - Lx'\|^2`, so the learned metric
*is* the Euclidean metric of the mapped points :math:`Lx`. Quadruplets are scored in chunks, so
:math:`10^6` of them never form a :math:`(10^6, d)` array.
"""
from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from cvxmetric._checks import as_data_matrix, as_labels, as_square_symmetric, check_int_in_range
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


def _mapped(*sets, M=None) -> list[np.ndarray]:
    """Each ``(X, name)`` of ``sets`` as a data matrix, mapped by the one factor ``L`` of ``M``
    (unchanged when ``M`` is None); the sets must have the same number of columns."""
    Xs = [as_data_matrix(X, name) for X, name in sets]
    d = Xs[0].shape[1]
    for X, (_, name) in zip(Xs[1:], sets[1:]):
        if X.shape[1] != d:
            raise ValueError(f"{name} has {X.shape[1]} columns but {sets[0][1]} has {d}; "
                             "give the sets the same features")
    if M is None:
        return Xs
    M = as_square_symmetric(M, "M", d=d, psd=True)
    L = psd_factor(M)
    if L.shape[0] == 0:
        raise ValueError("M is the zero matrix: every distance under it is 0, so it orders nothing; "
                         "pass a nonzero PSD metric (or M=None for the Euclidean metric)")
    return [X @ L.T for X in Xs]


def knn_error(X_train, y_train, X_test, y_test, M=None, *, n_neighbors: int = 3) -> float:
    r"""Test error of the k-nearest-neighbour classifier under :math:`D_M`.

    Parameters
    ----------
    X_train, y_train : ndarray of shape (n, d), (n,)
        The points the neighbours are searched among, and their labels.
    X_test, y_test : ndarray of shape (n_test, d), (n_test,)
        The points classified, and their true labels.
    M : ndarray of shape (d, d) or None
        A PSD metric; None is the Euclidean metric (:math:`M = I`).
    n_neighbors : int
        Neighbours voting (scikit-learn's :class:`~sklearn.neighbors.KNeighborsClassifier`).

    Returns
    -------
    float
        The share of test points whose predicted class differs from ``y_test``.

    Notes
    -----
    With :math:`M = L^\top L`, :math:`D_M(x, x') = \|Lx - Lx'\|^2`, so k-NN under :math:`M` is
    Euclidean k-NN on the mapped points :math:`Lx`; both sets are mapped by the same ``L``. The
    metric must have been learned on the training points only, or the error is optimistic.
    """
    from sklearn.neighbors import KNeighborsClassifier

    n_neighbors = check_int_in_range(n_neighbors, "n_neighbors", 1)
    Z_train, Z_test = _mapped((X_train, "X_train"), (X_test, "X_test"), M=M)
    y_train = as_labels(y_train, Z_train.shape[0], "y_train")
    y_test = as_labels(y_test, Z_test.shape[0], "y_test")
    if n_neighbors > Z_train.shape[0]:
        raise ValueError(f"n_neighbors = {n_neighbors} exceeds the {Z_train.shape[0]} training points; "
                         "pass a smaller n_neighbors")
    clf = KNeighborsClassifier(n_neighbors=n_neighbors).fit(Z_train, y_train)
    return float(np.mean(clf.predict(Z_test) != y_test))


def metric_embedding(X, M=None, n_components: int = 2) -> tuple[np.ndarray, float]:
    r"""The best ``n_components``-dimensional picture of ``X`` under :math:`D_M`.

    The points are mapped by :math:`L` (:math:`M = L^\top L`), centred, and projected on their
    leading principal directions. For ``M=None`` this is PCA of ``X``: the Euclidean picture.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    M : ndarray of shape (d, d) or None
        A PSD metric; None is the Euclidean metric.
    n_components : int
        Dimensions of the picture (at most ``d``).

    Returns
    -------
    Z : ndarray of shape (n, n_components)
        The coordinates (zero columns where the metric has fewer directions).
    kept : float
        The share of :math:`\sum_{i<j} D_M(x_i, x_j)` the picture preserves, in [0, 1].

    Notes
    -----
    Among all projections of the mapped points onto ``n_components`` orthonormal directions,
    PCA keeps the largest sum of squared pairwise distances, and
    :math:`\sum_{i<j}\|z_i - z_j\|^2 = n \sum_i \|z_i - \bar z\|^2`, so ``kept`` is the
    explained variance ratio. A learned metric that concentrates on few directions has
    ``kept`` close to 1: the picture is then the whole story.
    """
    (Z,) = _mapped((X, "X"), M=M)
    n_components = check_int_in_range(n_components, "n_components", 1, np.shape(X)[1])
    Z = Z - Z.mean(axis=0)
    _, s, Vt = np.linalg.svd(Z, full_matrices=False)
    r = min(n_components, Vt.shape[0])
    out = np.zeros((Z.shape[0], n_components))
    out[:, :r] = Z @ Vt[:r].T
    total = float(np.sum(s ** 2))
    return out, (float(np.sum(s[:r] ** 2)) / total if total > 0 else 1.0)


def normalized_spectrum(M) -> np.ndarray:
    r"""Eigenvalues of PSD ``M``, non-increasing, divided by :math:`\operatorname{tr} M`.

    Metrics are defined up to scale (a k-NN rule or an ordering of distances does not change
    when :math:`M` is multiplied by :math:`s > 0`), so spectra are compared at unit trace: the
    entries sum to 1 and read as the share of the metric each direction carries.
    """
    M = as_square_symmetric(M, "M", psd=True)
    lam = np.clip(np.linalg.eigvalsh(M)[::-1], 0.0, None)
    total = float(lam.sum())
    if total <= 0:
        raise ValueError("M is the zero matrix; its spectrum cannot be normalized to unit trace")
    return lam / total


def retrieval_precision(X_query, y_query, X_db, y_db, M=None, *, top_k: int = 20) -> tuple[float, np.ndarray]:
    r"""Mean average precision at ``top_k`` and mean precision at depths 1 to ``top_k`` of ranking
    ``X_db`` by :math:`D_M`.

    Parameters
    ----------
    X_query, y_query : ndarray of shape (n_q, d), (n_q,)
        The queries and their classes.
    X_db, y_db : ndarray of shape (n_db, d), (n_db,)
        The database searched, and its classes (an item is relevant iff its class is the query's).
    M : ndarray of shape (d, d) or None
        A PSD metric; None is the Euclidean metric.
    top_k : int
        Depth of the ranking (at most ``n_db``).

    Returns
    -------
    map_k : float
        Mean over queries of :math:`\mathrm{AP@k} = \sum_{i \le k} \mathrm{prec@}i \cdot \mathrm{rel}_i \,/\,
        \sum_{i \le k} \mathrm{rel}_i` (0 for a query with nothing relevant in its top ``top_k``).
    precision : ndarray of shape (top_k,)
        Mean over queries of the precision at depth i (``prec@i``), the share of relevant items among the top i.

    Notes
    -----
    Ties in distance are broken by database order (a stable sort), so the result is deterministic.
    """
    Zq, Zd = _mapped((X_query, "X_query"), (X_db, "X_db"), M=M)
    y_query = as_labels(y_query, Zq.shape[0], "y_query")
    y_db = as_labels(y_db, Zd.shape[0], "y_db")
    k = check_int_in_range(top_k, "top_k", 1, Zd.shape[0])
    D = cdist(Zq, Zd, "sqeuclidean")   # exact per pair: equal distances tie exactly (stable sort)
    top = np.argsort(D, axis=1, kind="stable")[:, :k]
    hit = y_db[top] == y_query[:, None]
    prec = np.cumsum(hit, axis=1) / np.arange(1, k + 1)
    n_rel = hit.sum(axis=1)
    ap = np.where(n_rel > 0, np.sum(prec * hit, axis=1) / np.maximum(n_rel, 1), 0.0)
    return float(ap.mean()), prec.mean(axis=0)
