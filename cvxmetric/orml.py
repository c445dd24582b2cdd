r"""Output regularized metric learning, ORML (Liu, Hoi & Liu, ECCV 2008): the numpy model.

Conventions
-----------
The paper stores points as *columns*: :math:`X \in \mathbb{R}^{m \times n}`, the log samples
:math:`X_l \in \mathbb{R}^{m \times l}`, the output :math:`Y_l \in \mathbb{R}^{r \times l}` and the
regularizer :math:`S = X M X^T \in \mathbb{R}^{m \times m}`. The project stores points as *rows*
(``X`` of shape ``(n, d)``, ``d = m``), so here

* ``S = Xc.T @ M @ Xc`` (shape ``(d, d)``), ``Xc`` the centered data (the paper assumes
  zero-centered points, sec. 4.1; the learned metric acts on differences and does not depend on
  the centering, but the ideal output :math:`v^T x` does);
* ``Xl`` has shape ``(l, d)`` (rows = log samples, the paper's :math:`X_l^T`) and ``Y`` has shape
  ``(l, r)`` (the paper's :math:`Y_l^T`; column ``d`` is :math:`\mathbf{y}^{(d)}`);
* ``U`` has shape ``(d, r)`` as in the paper, :math:`A = U U^T`.

The model
---------
Weights (eqs. 4-5), for judged pairs :math:`\mathcal{S}, \mathcal{D}` and the Euclidean
``n_neighbors``-nearest-neighbour relation :math:`\mathcal{N}` (symmetrized: either point among
the other's ``n_neighbors`` nearest):

.. math::

    W_{ij} = \alpha \ [(i,j) \in \mathcal{S}],\ \beta \ [(i,j) \in \mathcal{D}],\
    1 \ [\text{neighbours, not judged}],\ 0 \text{ otherwise};\qquad
    T_{ij} = \beta\,[(i,j) \in \mathcal{D}],

:math:`L = \operatorname{diag}(W 1) - W`, :math:`M = L + 2T` (eq. 8). For every vector ``a``
(eq. 8 read backwards),

.. math::

    a^T M a = \sum_{i<j,\,(i,j)\notin\mathcal{D}} W_{ij}(a_i - a_j)^2
            + \sum_{i<j,\,(i,j)\in\mathcal{D}} W_{ij}(a_i + a_j)^2 = \|B a\|^2,

with one row :math:`\sqrt{W_{ij}}(e_i \mp e_j)` of ``B`` per edge. So :math:`M = B^T B \succeq 0`
and :math:`S = F^T F` with ``F = B @ Xc``: the paper's claim :math:`S \succeq 0`, and the factor
the least-squares problems below are written with.

Ideal output (eqs. 12-15): PCA of the centered data, :math:`V = P \Lambda^{-1/2}` (so
:math:`V^T X_c^T X_c V = I`); the log samples are the *occurrences* of images in log sessions
(each session contributes its query, then its judged images, as in the paper's 20 log samples per
session), and for the query ``i`` of a session and :math:`a = v_d^T x_i`: the query's output is
``a``, a relevant image's is ``a``, an irrelevant image's is
:math:`-\operatorname{sgn}(a)(|a| + 1/\sqrt{r})` with :math:`\operatorname{sgn}(0) = 1` (eq. 14).
Then eq. 16 holds: :math:`\|\hat x_i - \hat x_j\| = 0` on similar pairs and :math:`\ge 1` on
dissimilar ones (every coordinate of the difference is at least :math:`1/\sqrt{r}` in magnitude).

Orthogonal pursuit (eqs. 18-21): for ``d = 1..r``,
:math:`V^{(d)} = (I - Q Q^T)[v_d, \dots, v_r]` where ``Q`` is an orthonormal basis of
:math:`u_1, \dots, u_{d-1}` (equal to the product of eq. 18 because the :math:`u_i` are
orthogonal), and :math:`u_d = V^{(d)} b^*` with

.. math::

    b^* = \arg\min_b\ f_d(b) = \|F V^{(d)} b\|^2 + \gamma\,\|X_l V^{(d)} b - y^{(d)}\|^2
    \quad\text{(eq. 20, a strictly convex least-squares problem)},

whose normal equations :math:`H b = c`, :math:`H = V^{(d)T}(S + \gamma X_l^T X_l)V^{(d)}`,
:math:`c = \gamma V^{(d)T} X_l^T y^{(d)}` are eq. 21 multiplied by :math:`\gamma` (the parameter ``output_weight``). The full
problem with :math:`U^T U = \Sigma` (eqs. 9-10) is non-convex; only the per-direction problems
are convex (design §5.7).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import as_data_matrix, as_index_array, check_int_in_range, check_positive

__all__ = ["ORMLModel", "orml_model", "orml_weights", "edge_rows", "ideal_output", "pca_transform",
           "as_judgements", "check_ideal_output", "simulate_log_sessions", "direction_problem",
           "pursuit_basis", "pursuit_bases"]

#: Eigenvalues of the centered scatter below this fraction of the largest count as zero: PCA
#: (eq. 12) divides by sqrt(lambda_r), so r may not exceed the numerical rank.
PCA_RANK_RTOL = 1e-10


def as_judgements(pairs, relevant, n: int, session=None):
    """Validated log-session judgements: ``(pairs, relevant, session)`` as fresh arrays.

    Parameters
    ----------
    pairs : array_like of int, shape (m, 2)
        ``(query, image)`` row indices of ``X``: the first element is always the query.
    relevant : array_like of bool, shape (m,)
        The user's judgement of each image (True: relevant, a similar pair).
    n : int
        Number of rows of ``X``.
    session : array_like of int, shape (m,), optional
        Session id (a non-negative integer) of each judgement (default: the query index, one
        session per query). All judgements of one session must share its query; sessions are
        ordered by first appearance.
    """
    P = as_index_array(pairs, 2, "pairs", n=n)
    if len(P) == 0:
        raise ValueError("pairs is empty; give at least one (query, image) judgement")
    if np.any(P[:, 0] == P[:, 1]):
        q = int(np.argmax(P[:, 0] == P[:, 1]))
        raise ValueError(f"pairs row {q} judges image {int(P[q, 0])} against itself; drop the query from "
                         "its own ranked list")
    rel = np.asarray(relevant)
    if rel.shape != (len(P),) or rel.dtype.kind != "b":
        raise TypeError(f"relevant must be a bool array of shape ({len(P)},) matching pairs; got dtype "
                        f"{rel.dtype} and shape {rel.shape}: pass e.g. np.asarray(labels, dtype=bool)")
    rel = rel.astype(bool, copy=True)
    if session is None:
        ses = P[:, 0].copy()
    else:
        ses = as_index_array(np.asarray(session).reshape(-1, 1), 1, "session")[:, 0]
        if len(ses) != len(P):
            raise ValueError(f"session must have shape ({len(P)},) matching pairs; got {len(ses)} entries")
    for s in np.unique(ses):
        if len(np.unique(P[ses == s, 0])) != 1:
            raise ValueError(f"session {int(s)} has more than one query; every judgement of a session "
                             "must share its query (pairs[:, 0])")
    key = {}
    for (i, j), r in zip(P, rel):
        e = (min(i, j), max(i, j))
        if key.setdefault(e, r) != r:
            raise ValueError(f"the pair ({int(i)}, {int(j)}) is judged both relevant and irrelevant; keep "
                             "one judgement per pair (e.g. the majority vote)")
    return P, rel, ses


def _knn_edges(X: np.ndarray, k: int) -> set:
    """Unordered Euclidean k-NN edges (i in N(j) or j in N(i)) of the data as given (uncentered).

    Distances are sums of squared differences (``cdist``), so equal distances tie exactly (no Gram
    round-off) and ties are broken by index (stable sort).
    """
    from scipy.spatial.distance import cdist
    D = cdist(X, X, "sqeuclidean")
    np.fill_diagonal(D, np.inf)
    nn = np.argsort(D, axis=1, kind="stable")[:, :k]
    return {(min(i, j), max(i, j)) for i in range(len(X)) for j in nn[i]}


def _edges(X, pairs, relevant, k, alpha, beta):
    """Edge list ``(i, j, weight, dissimilar)`` of W (eq. 4), i < j."""
    judged = {}
    for (i, j), r in zip(pairs, relevant):
        judged[(min(i, j), max(i, j))] = bool(r)
    edges = {e: (1.0, False) for e in _knn_edges(X, k)} if k > 0 else {}
    for e, r in judged.items():
        edges[e] = (alpha, False) if r else (beta, True)
    keys = sorted(edges)
    I = np.array([e[0] for e in keys], dtype=np.int64)
    J = np.array([e[1] for e in keys], dtype=np.int64)
    w = np.array([edges[e][0] for e in keys])
    dis = np.array([edges[e][1] for e in keys], dtype=bool)
    return I, J, w, dis


def orml_weights(X, pairs, relevant, *, n_neighbors: int = 6, alpha: float = 1.0, beta: float = 2.0,
                 session=None):
    """The weight matrices W (eq. 4) and T (eq. 5), dense, shape (n, n), symmetric.

    Parameters
    ----------
    X : array_like, shape (n, d)
    pairs, relevant, session
        Judgements, see :func:`as_judgements`.
    n_neighbors : int
        Number of Euclidean nearest neighbours (0: no neighbourhood graph).
    alpha, beta : float > 0
        Weights of similar and dissimilar pairs.
    """
    X = as_data_matrix(X, min_rows=2)
    n_neighbors = check_int_in_range(n_neighbors, "n_neighbors", 0, len(X) - 1)
    alpha, beta = check_positive(alpha, "alpha"), check_positive(beta, "beta")
    P, rel, _ = as_judgements(pairs, relevant, len(X), session)
    I, J, w, dis = _edges(X, P, rel, n_neighbors, alpha, beta)
    n = len(X)
    W = np.zeros((n, n))
    T = np.zeros((n, n))
    W[I, J] = W[J, I] = w
    T[I[dis], J[dis]] = T[J[dis], I[dis]] = w[dis]
    return W, T


def edge_rows(Xc: np.ndarray, I, J, w, dissimilar) -> np.ndarray:
    r"""``F = B @ Xc`` without forming ``B`` (one row :math:`\sqrt{w}(e_i \mp e_j)` per edge), so
    :math:`F^T F = X_c^T M X_c = S`: row ``e`` is :math:`\sqrt{w_e}(x_i - x_j)`, or
    :math:`\sqrt{w_e}(x_i + x_j)` for a dissimilar pair."""
    sign = np.where(np.asarray(dissimilar, dtype=bool), 1.0, -1.0)
    return np.sqrt(np.asarray(w, dtype=np.float64))[:, None] * (Xc[I] + sign[:, None] * Xc[J])


def pca_transform(Xc: np.ndarray, r: int) -> np.ndarray:
    r""":math:`V = P \Lambda^{-1/2}` (eq. 12) of centered data ``Xc``: ``V.T @ Xc.T @ Xc @ V = I``."""
    lam, P = np.linalg.eigh(Xc.T @ Xc)
    lam, P = lam[::-1][:r], P[:, ::-1][:, :r]
    if lam[-1] <= PCA_RANK_RTOL * lam[0]:
        rank = int(np.sum(lam > PCA_RANK_RTOL * lam[0]))
        raise ValueError(f"r = {r} exceeds the numerical rank ({rank} or less) of the centered data; "
                         f"choose r <= {rank}")
    # a deterministic sign per eigenvector (largest entry positive): the ideal output depends on it
    sign = np.where(P[np.argmax(np.abs(P), axis=0), np.arange(r)] < 0, -1.0, 1.0)
    return P * (sign / np.sqrt(lam))


def ideal_output(Xc: np.ndarray, V: np.ndarray, pairs, relevant, session):
    r"""Log samples ``Xl`` (l, d), the ideal output ``Y`` (l, r) (eqs. 14-15) and the index pairs.

    Returns
    -------
    Xl : ndarray, shape (l, d)
        One row per occurrence: each session's query, then its judged images.
    Y : ndarray, shape (l, r)
        The paper's :math:`Y_l^T`.
    sample_pairs : ndarray of int, shape (m, 2)
        ``(query row, image row)`` of ``Xl`` for every judgement.
    rows : ndarray of int, shape (l,)
        The row of ``X`` behind each log sample.
    """
    r = V.shape[1]
    c = 1.0 / np.sqrt(r)
    rows, Y, sample_pairs = [], [], np.zeros((len(pairs), 2), dtype=np.int64)
    order = list(dict.fromkeys(session.tolist()))
    for s in order:
        idx = np.flatnonzero(session == s)
        q = int(pairs[idx[0], 0])
        a = Xc[q] @ V
        sgn = np.where(a < 0, -1.0, 1.0)
        far = -sgn * (np.abs(a) + c)
        qrow = len(rows)
        rows.append(q)
        Y.append(a)
        for t in idx:
            sample_pairs[t] = (qrow, len(rows))
            rows.append(int(pairs[t, 1]))
            Y.append(a.copy() if relevant[t] else far)
    rows = np.array(rows, dtype=np.int64)
    return Xc[rows], np.array(Y), sample_pairs, rows


def check_ideal_output(Y, sample_pairs, relevant):
    """Eq. 16 on ``Y``: (largest similar-pair distance, smallest dissimilar-pair distance).

    The first must be exactly 0 and the second at least 1 (up to the rounding of a sum of r
    squares; every coordinate difference is at least 1/sqrt(r) in floating point too).
    """
    Y = np.asarray(Y)
    diff = Y[sample_pairs[:, 0]] - Y[sample_pairs[:, 1]]
    dist = np.linalg.norm(diff, axis=1)
    sim = float(np.max(dist[relevant])) if np.any(relevant) else 0.0
    dis = float(np.min(dist[~relevant])) if np.any(~relevant) else np.inf
    return sim, dis


@dataclass(frozen=True, eq=False)
class ORMLModel:
    r"""Everything ORML reads, built by :func:`orml_model` (see the module docstring).

    Attributes
    ----------
    Xc : ndarray (n, d)
        Centered data.
    F : ndarray (n_edges, d)
        ``B @ Xc``, so :math:`S = F^T F`.
    S : ndarray (d, d)
        :math:`X_c^T M X_c` (eq. 8), symmetric PSD.
    V : ndarray (d, r)
        PCA transform (eq. 12).
    Xl : ndarray (l, d), Y : ndarray (l, r)
        Log samples and ideal output (eqs. 14-15).
    sample_pairs : ndarray (m, 2); relevant : ndarray (m,)
        The judgements as rows of ``Xl``.
    output_weight : float
        :math:`\gamma` of eq. 20.
    r : int
    mean : ndarray (d,)
    """

    Xc: np.ndarray
    F: np.ndarray
    S: np.ndarray
    V: np.ndarray
    Xl: np.ndarray
    Y: np.ndarray
    sample_pairs: np.ndarray
    relevant: np.ndarray
    output_weight: float
    r: int
    mean: np.ndarray

    @property
    def d(self) -> int:
        return int(self.Xc.shape[1])


def orml_model(X, pairs, relevant, *, session=None, n_neighbors: int = 6, alpha: float = 1.0, beta: float = 2.0,
               output_weight: float = 9.0, r: int = 15) -> ORMLModel:
    r"""Build the ORML model (regularizer, PCA, ideal output) of data ``X`` (n, d) and judgements.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row (never modified; centered internally).
    pairs, relevant, session
        Log-session judgements, see :func:`as_judgements`.
    n_neighbors, alpha, beta
        Neighbourhood size (the paper's k) and pair weights of eq. 4 (paper: 6, 1, 2).
    output_weight : float > 0
        Weight :math:`\gamma` of the output loss (paper: 9).
    r : int
        Number of directions, ``1 <= r <= d`` and at most the rank of the centered data (paper: 15).

    Notes
    -----
    The program of direction ``d`` (eq. 20) is given by :func:`direction_problem`; the pursuit is
    :func:`cvxmetric.solvers.orml.orml_pursuit` (the facade :func:`cvxmetric.solvers.orml.solve_orml`
    builds this model and runs it).
    """
    X = as_data_matrix(X, min_rows=2)
    n, dim = X.shape
    n_neighbors = check_int_in_range(n_neighbors, "n_neighbors", 0, n - 1)
    alpha, beta = check_positive(alpha, "alpha"), check_positive(beta, "beta")
    output_weight = check_positive(output_weight, "output_weight")
    r = check_int_in_range(r, "r", 1, min(dim, n - 1))
    P, rel, ses = as_judgements(pairs, relevant, n, session)
    mean = X.mean(axis=0)
    Xc = X - mean
    I, J, w, dis = _edges(X, P, rel, n_neighbors, alpha, beta)
    F = edge_rows(Xc, I, J, w, dis)
    S = F.T @ F
    S = 0.5 * (S + S.T)
    V = pca_transform(Xc, r)
    Xl, Y, sample_pairs, _ = ideal_output(Xc, V, P, rel, ses)
    return ORMLModel(Xc, F, S, V, Xl, Y, sample_pairs, rel, output_weight, r, mean)


def direction_problem(model: ORMLModel, Vd: np.ndarray, d: int):
    r"""Least-squares data ``(G, h)`` of eq. 20 for direction ``d`` (0-based) and basis ``Vd``.

    :math:`f_d(b) = \|G b - h\|^2` with :math:`G = [F V_d;\ \sqrt{\gamma} X_l V_d]` and
    :math:`h = [0;\ \sqrt{\gamma}\, y^{(d)}]`, :math:`\gamma` = ``model.output_weight``.
    """
    sg = np.sqrt(model.output_weight)
    G = np.vstack([model.F @ Vd, sg * (model.Xl @ Vd)])
    h = np.concatenate([np.zeros(model.F.shape[0]), sg * model.Y[:, d]])
    return G, h


def pursuit_basis(V: np.ndarray, U_prev: np.ndarray, d: int) -> np.ndarray:
    r""":math:`V^{(d)}` of eq. 18: columns ``d..r-1`` of ``V`` projected off ``span(U_prev)`` (twice)."""
    Vd = V[:, d:].copy()
    if U_prev.shape[1] == 0:
        return Vd
    Q, _ = np.linalg.qr(U_prev)
    for _ in range(2):
        Vd -= Q @ (Q.T @ Vd)
    return Vd


def pursuit_bases(model: ORMLModel) -> list:
    r"""The bases :math:`V^{(1)}, \dots, V^{(r)}` of eq. 18 along the exact pursuit.

    Each :math:`u_d = V^{(d)} b^*` with :math:`b^*` from ``scipy.linalg.lstsq`` on eq. 20 (an
    orthogonal factorization, independent of the fast solver's Cholesky normal equations): the
    problems the ground truth (:func:`cvxmetric.formulations.orml.build_orml`) states for every direction.
    """
    from scipy.linalg import lstsq
    U = np.zeros((model.d, model.r))
    bases = []
    for d in range(model.r):
        Vd = pursuit_basis(model.V, U[:, :d], d)
        G, h = direction_problem(model, Vd, d)
        U[:, d] = Vd @ lstsq(G, h, lapack_driver="gelsd")[0]
        bases.append(Vd)
    return bases


def simulate_log_sessions(X, y, n_sessions: int, n_judged: int, *, noise: float = 0.0, seed=None):
    """Simulated relevance-feedback log: a query and its ``n_judged`` Euclidean top-ranked images.

    Each session draws a query (without replacement), ranks the other points by Euclidean
    distance, and judges the top ``n_judged``: relevant iff same label, flipped with probability
    ``noise``. A pair judged twice (the reverse pair of an earlier session) keeps its first
    judgement (a user's verdict on a pair is one fact). Returns ``(pairs, relevant, session)``.
    """
    from ._checks import as_labels, as_rng
    X = as_data_matrix(X, min_rows=2)
    y = as_labels(y, len(X))
    n_sessions = check_int_in_range(n_sessions, "n_sessions", 1, len(X))
    n_judged = check_int_in_range(n_judged, "n_judged", 1, len(X) - 1)
    noise = float(noise)
    if not 0.0 <= noise <= 0.5:
        raise ValueError(f"noise must be in [0, 0.5]; got {noise}")
    rng = as_rng(seed)
    queries = rng.choice(len(X), size=n_sessions, replace=False)
    pairs, rel, ses, seen = [], [], [], {}
    for s, q in enumerate(queries):
        dist = np.sum((X - X[q]) ** 2, axis=1)
        dist[q] = np.inf
        top = np.argsort(dist, kind="stable")[:n_judged]
        flip = rng.random(n_judged) < noise
        for j, f in zip(top, flip):
            e = (min(q, j), max(q, j))
            judged = seen.setdefault(e, bool((y[q] == y[j]) != f))
            pairs.append((int(q), int(j)))
            rel.append(judged)
            ses.append(s)
    return np.array(pairs, dtype=np.int64), np.array(rel, dtype=bool), np.array(ses, dtype=np.int64)
