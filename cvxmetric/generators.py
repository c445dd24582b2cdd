r"""Deterministic generators of constraint sets (design §4).

Every generator takes ``seed`` (None, an int or a ``numpy.random.Generator``) for its random
choices and returns a :class:`~cvxmetric.constraints.ConstraintSet`. Counts are integers >= 0
(a float or a negative count is an error naming the argument); a generator asked for a positive
number of constraints never returns an empty set silently: it raises and says why none exist.
Inputs are never modified.
"""
from __future__ import annotations

import numpy as np

from ._checks import (as_data_matrix, as_labels, as_rng, as_square_symmetric, check_int_in_range,
                      check_nonnegative, check_positive, zero_length_mask)
from .constraints import ConstraintSet
from .tolerances import ZERO_LENGTH_RTOL

__all__ = [
    "pairs_from_labels",
    "target_neighbors",
    "target_pairs",
    "NO_TARGET",
    "lmnn_constraints",
    "quadruplets_from_metric",
    "relative_attribute_quadruplets",
    "sample_quadruplet_indices",
    "triplets_from_labels",
    "gaussian_classes",
]


def _class_members(y: np.ndarray) -> dict:
    return {c: np.flatnonzero(y == c) for c in np.unique(y)}


def pairs_from_labels(y, *, n_similar: int, n_dissimilar: int, u: float, l: float,
                      seed=None, weight: float = 1.0) -> ConstraintSet:
    r"""Random similar pairs (same label, :math:`D \le u`) and dissimilar pairs (:math:`D \ge l`).

    Pairs are drawn uniformly among all eligible unordered pairs, without replacement.

    Parameters
    ----------
    y : array_like, shape (n,)
        Class labels.
    n_similar, n_dissimilar : int
        How many pairs of each kind (at most the number that exist).
    u, l : float
        Upper bound for similar pairs and lower bound for dissimilar pairs (``0 <= u <= l``).

    Raises
    ------
    ValueError
        Non-finite labels, a negative count, or more pairs of a kind than exist (the message says
        why, e.g. "no class has two points").
    TypeError
        A count that is not an integer (``3.0`` included).
    """
    y = as_labels(y)
    n_similar = check_int_in_range(n_similar, "n_similar", 0)
    n_dissimilar = check_int_in_range(n_dissimilar, "n_dissimilar", 0)
    u = check_nonnegative(u, "u")
    l = check_nonnegative(l, "l")
    if not u <= l:
        raise ValueError(f"u must be <= l for pairwise bounds; got u={u}, l={l}")
    rng = as_rng(seed)
    n = y.shape[0]
    iu, ju = np.triu_indices(n, 1)
    same = y[iu] == y[ju]
    none_left = {"n_similar": "no class has two points, so there is no similar pair",
                 "n_dissimilar": "y has fewer than two classes, so there is no dissimilar pair"}
    sets = []
    for count, mask, similar, bound, label in ((n_similar, same, True, u, "n_similar"),
                                               (n_dissimilar, ~same, False, l, "n_dissimilar")):
        avail = np.flatnonzero(mask)
        if count > avail.size:
            why = none_left[label] if avail.size == 0 else f"only {avail.size} such pairs exist"
            raise ValueError(f"{label}={count} pairs asked for, but {why}; ask for at most {avail.size}")
        pick = np.sort(rng.choice(avail, size=count, replace=False))
        sets.append(ConstraintSet.from_pairs(np.column_stack([iu[pick], ju[pick]]),
                                             similar=similar, bound=bound, weight=weight))
    return ConstraintSet.concatenate(*sets)


#: Entry of :func:`target_neighbors`' array where a point has no further target neighbour (its
#: class has ``n_neighbors`` or fewer points); never a valid row index.
NO_TARGET = -1


def target_neighbors(X, y, n_neighbors: int) -> np.ndarray:
    r"""The ``n_neighbors`` nearest same-class neighbours of every point (Euclidean, fixed; LMNN).

    Returns
    -------
    ndarray of int, shape (n, n_neighbors)
        Row ``i`` lists the targets of point ``i``, nearest first (ties broken by index), padded
        at the end with :data:`NO_TARGET` when the class is too small.

    Raises
    ------
    ValueError
        If ``n_neighbors < 1``, there is a single class, or every class has a single point (no
        target pair at all).

    Notes
    -----
    A point of a class of :math:`n_c` points takes :math:`k_i = \min(k, n_c - 1)` targets
    (:math:`k` = ``n_neighbors``): a target is another point of the class, so a class of exactly
    :math:`k` points gives each point the :math:`k - 1` others, and a point alone in its class has
    no target and acts only as an impostor of the other classes. (metric-learn 0.7.0 instead
    accepts classes of at least :math:`k` points and, in a class of exactly :math:`k`, makes each
    point its own farthest target, a zero-length pair.)
    """
    k = n_neighbors
    X = as_data_matrix(X)
    y = as_labels(y, X.shape[0])
    members = _class_members(y)
    if len(members) < 2:
        raise ValueError("y has a single class; LMNN needs at least two classes for impostors")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"n_neighbors must be an integer; got {k!r} ({type(k).__name__})")
    if k < 1:
        raise ValueError(f"n_neighbors must be at least 1; got n_neighbors={k}")
    if max(len(v) for v in members.values()) < 2:
        raise ValueError("every class of y has a single point, so LMNN has no target pair; give some class "
                         "at least two points")
    out = np.full((X.shape[0], k), NO_TARGET, dtype=np.int64)
    for idx in members.values():
        Z = X[idx]
        sq = np.einsum("ij,ij->i", Z, Z)
        k_c = min(k, idx.size - 1)
        if k_c == 0:
            continue
        step = max(1, _TARGET_BLOCK_ELEMENTS // idx.size)
        for start in range(0, idx.size, step):
            rows = np.arange(start, min(idx.size, start + step))
            D = sq[rows, None] + sq[None, :] - 2 * Z[rows] @ Z.T
            D[np.arange(rows.size), rows] = np.inf
            out[idx[rows], :k_c] = idx[_nearest_first(D, k_c)]
    return out


#: Entries of one (rows x class size) block of squared distances in :func:`target_neighbors` (32 MB).
_TARGET_BLOCK_ELEMENTS = 2 ** 22


def _nearest_first(D: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` smallest entries of each row of ``D``, smallest first, ties by
    column index: ``np.argsort(D, axis=1, kind="stable")[:, :k]`` without sorting whole rows."""
    kth = np.partition(D, k - 1, axis=1)[:, k - 1]
    r, c = np.nonzero(D <= kth[:, None])   # k per row, more where the k-th value ties
    order = np.lexsort((c, D[r, c], r))
    r, c = r[order], c[order]
    first = np.searchsorted(r, np.arange(D.shape[0]))
    rank = np.arange(r.size) - first[r]
    keep = rank < k
    out = np.empty((D.shape[0], k), dtype=np.int64)
    out[r[keep], rank[keep]] = c[keep]
    return out


def target_pairs(T: np.ndarray) -> np.ndarray:
    """The pairs ``(i, j)``, ``j`` a target of ``i``, of a :func:`target_neighbors` array (shape (p, 2)).

    Ordered by ``i`` then rank; the :data:`NO_TARGET` padding is left out.
    """
    n, k = T.shape
    pairs = np.column_stack([np.repeat(np.arange(n), k), T.ravel()])
    return pairs[pairs[:, 1] != NO_TARGET]


def lmnn_constraints(X, y, n_neighbors: int, *, regularization: float = 0.5, margin: float = 1.0):
    r"""LMNN's target pairs and full impostor triplet set (design §5.2).

    Returns
    -------
    targets : ndarray of int, shape (sum_i k_i, 2)
        The pairs :math:`(i, j)` with :math:`j` a target neighbour of :math:`i`
        (:math:`k_i` of them for point :math:`i`, ``n_neighbors`` capped at its class size minus
        one: :func:`target_neighbors`).
    triplets : ConstraintSet
        All :math:`(i, j, l)` with :math:`j` a target of :math:`i` and :math:`y_l \ne y_i`,
        margin ``margin`` and weight ``1 - regularization`` (``regularization`` is the weight of
        the pull term, in (0, 1)). Its size is :math:`\sum_i k_i (n - n_{y_i})`: materialise it
        only for small data (the LMNN solver generates impostors on the fly for large data).
    """
    X = as_data_matrix(X)
    y = as_labels(y, X.shape[0])
    regularization = check_positive(regularization, "regularization")
    if not regularization < 1.0:
        raise ValueError(f"regularization must be in (0, 1) (the weight of the pull term); got {regularization}")
    margin = check_positive(margin, "margin")
    tg = target_pairs(target_neighbors(X, y, n_neighbors))
    rows = []
    for a, b in tg:
        others = np.flatnonzero(y != y[a])
        rows.append(np.column_stack([np.full(others.size, a), np.full(others.size, b), others]))
    trip = np.concatenate(rows) if rows else np.zeros((0, 3), dtype=np.int64)
    return tg, ConstraintSet.from_triplets(trip, delta=margin, weight=1.0 - regularization)


def gaussian_classes(n: int, d: int, n_classes: int = 10, *, n_informative: int = 10, separation: float = 1.0,
                     seed=None) -> tuple[np.ndarray, np.ndarray]:
    r"""Overlapping Gaussian classes under a rotated, unevenly scaled noise: LMNN data of any size.

    Parameters
    ----------
    n : int
        Points (>= ``n_classes``); the classes are balanced (sizes differ by at most one).
    d : int
        Features (>= ``n_informative``).
    n_classes : int
        Classes (>= 2).
    n_informative : int
        Dimension of the subspace holding the class means (1 .. d).
    separation : float
        Standard deviation of the class means along each informative direction, in units of the
        noise's median standard deviation (> 0); about 1 leaves the classes overlapping.
    seed : None, int or numpy.random.Generator

    Returns
    -------
    X : ndarray, shape (n, d)
    y : ndarray of int, shape (n,)
        Labels ``0 .. n_classes - 1`` in random order.

    Notes
    -----
    With :math:`Q` a random orthogonal d x d matrix, standard deviations :math:`s_t` drawn
    log-uniformly from :math:`[1/4, 4]` and class means :math:`\mu_c = \text{separation}\,(g_c, 0)`,
    :math:`g_c \sim N(0, I_{\text{n\_informative}})`,

    .. math::
        x_i = Q\,(\mu_{y_i} + s \circ z_i), \qquad z_i \sim N(0, I_d).

    The class means span ``n_informative`` directions while the noise spreads over all ``d``, so
    the Euclidean metric mixes the classes and a learned metric separates them better, yet not
    fully: nearest neighbours of other classes (LMNN's impostors) exist at every size. Measured
    (``n = 4000, d = 50``, seed 0, 3-fold 3-NN accuracy): separation 1 gives 0.26 in the
    Euclidean metric and 0.81 after linear discriminant analysis.
    """
    n_classes = check_int_in_range(n_classes, "n_classes", 2)
    n = check_int_in_range(n, "n", n_classes)
    n_informative = check_int_in_range(n_informative, "n_informative", 1)
    d = check_int_in_range(d, "d", 1)
    if d < n_informative:
        raise ValueError(f"d must be at least n_informative (the class means span n_informative of the d "
                         f"directions); got d={d}, n_informative={n_informative}")
    separation = check_positive(separation, "separation")
    rng = as_rng(seed)
    y = rng.permutation(np.arange(n) % n_classes)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    scales = np.exp(rng.uniform(np.log(0.25), np.log(4.0), d))
    means = np.zeros((n_classes, d))
    means[:, :n_informative] = separation * rng.standard_normal((n_classes, n_informative))
    X = (means[y] + scales * rng.standard_normal((n, d))) @ Q.T
    return X, y


def sample_quadruplet_indices(n: int, m: int, seed=None) -> np.ndarray:
    """``m`` random quadruplets of row indices with ``i != j`` and ``k != l`` (shape (m, 4))."""
    n = check_int_in_range(n, "n", 0)
    m = check_int_in_range(m, "m", 0)
    rng = as_rng(seed)
    if n < 2:
        raise ValueError(f"need at least 2 points to form pairs; got n={n}")
    q = rng.integers(0, n, size=(m, 4))
    for a, b in ((0, 1), (2, 3)):
        clash = q[:, a] == q[:, b]
        while np.any(clash):
            q[clash, b] = rng.integers(0, n, size=int(clash.sum()))
            clash = q[:, a] == q[:, b]
    return q


#: Constraints per block of the generators' chunked passes (bounds their (rows, d) temporaries).
GENERATOR_CHUNK = 65536


def _pair_distances_under(X: np.ndarray, T: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`D_T(x_i, x_j)` and :math:`D_T(x_k, x_l)` of the quadruplets ``q`` (shape (m, 4)).

    Through a factor :math:`T = B B^\top` (:math:`B = V_+ \Lambda_+^{1/2}`, the positive eigenpairs of
    T, rank r): :math:`D_T(i, j) = \|f_i - f_j\|^2` with :math:`F = X B`, in blocks of
    ``GENERATOR_CHUNK`` rows: :math:`O(n d r + m r)` time and :math:`O(n r)` memory beside the
    output, where one difference vector per pair would take :math:`O(m d^2)` and an (m, d) array.
    A pair of duplicate points gets exactly 0, and the same pair in two places exactly the same
    value (the same rows of F, the same operations); other values agree with
    :math:`(x_i - x_j)^\top T (x_i - x_j)` to round-off.
    """
    lam, V = np.linalg.eigh(T)
    pos = lam > 0
    F = X @ (V[:, pos] * np.sqrt(lam[pos]))
    out = np.empty((2, q.shape[0]))
    for s in range(0, q.shape[0], GENERATOR_CHUNK):
        block = q[s:s + GENERATOR_CHUNK]
        for half, (a, b) in enumerate(((0, 1), (2, 3))):
            D = np.take(F, block[:, a], axis=0)
            D -= np.take(F, block[:, b], axis=0)
            out[half, s:s + block.shape[0]] = np.einsum("ij,ij->i", D, D)
    return out[0], out[1]


def quadruplets_from_metric(X, T, m: int, *, delta: float = 1.0, seed=None,
                            flip_fraction: float = 0.0) -> ConstraintSet:
    r"""Quadruplets labelled by a known target metric :math:`T` (thesis sec. 3.4.1).

    Random quadruplets of distinct-pair points are oriented so that
    :math:`D_T(x_k, x_l) > D_T(x_i, x_j)`; exact ties are dropped. ``flip_fraction`` of them
    (chosen at random) are then reversed, as label noise, which makes the optimum of a hinge
    model clearly positive.
    """
    X = as_data_matrix(X)
    T = as_square_symmetric(T, "T", d=X.shape[1])
    # the features T reads: D_T(u) = u_S^T T_SS u_S on the support S of T's columns (exact), so the
    # PSD test and the factor of the distances are |S| x |S| eigenvalue problems, not d x d ones
    # (a zero row and column of T adds the eigenvalue 0)
    support = np.flatnonzero(np.any(T != 0.0, axis=0))
    T_s = as_square_symmetric(T[np.ix_(support, support)], "T", psd=True) if support.size else T[:0, :0]
    m = check_int_in_range(m, "m", 0)
    flip_fraction = check_nonnegative(flip_fraction, "flip_fraction")
    rng = as_rng(seed)
    if not flip_fraction < 0.5:
        raise ValueError(f"flip_fraction must be in [0, 0.5); got {flip_fraction}")
    q = sample_quadruplet_indices(X.shape[0], m, rng)
    dij, dkl = _pair_distances_under(X[:, support], T_s, q)
    keep = dij != dkl
    if m > 0 and not np.any(keep):
        raise ValueError(
            f"all {m} sampled quadruplets are exact ties under T (D_T(i, j) == D_T(k, l)), so none "
            "can be oriented: T is zero or X is constant along the range of T (e.g. duplicate rows); "
            "pass a non-zero T that separates the points of X"
        )
    if not np.all(keep):
        q, dij, dkl = q[keep], dij[keep], dkl[keep]
    swap = dij > dkl
    if flip_fraction > 0:
        flip = rng.random(q.shape[0]) < flip_fraction
        swap ^= flip
    for c in (0, 1):   # swap the pairs (i, j) and (k, l) of the rows ``swap``, column by column
        first = q[:, c].copy()
        np.copyto(q[:, c], q[:, c + 2], where=swap)
        np.copyto(q[:, c + 2], first, where=swap)
    return ConstraintSet.from_quadruplets(q, delta=delta)


def relative_attribute_quadruplets(y, levels, m: int, *, kind: str = "strict", seed=None,
                                   delta: float = 1.0) -> ConstraintSet:
    r"""Quadruplets from an ordering of classes by the strength of one attribute (thesis 2.4.1).

    Parameters
    ----------
    y : array_like, shape (n,)
        Class labels.
    levels : sequence of sequences of labels
        The ordering weakest to strongest; classes in the same level are equivalent (``~``),
        e.g. ``[[T], [I, S], [H], [C, O, M, F]]`` for ``T < I ~ S < H < C ~ O ~ M ~ F``.
    m : int
        Number of constraints to draw.
    kind : {"strict", "relaxed"}
        ``"strict"`` (``e < f < g < h``): :math:`(i, j, k, l) \in g \times f \times h \times e`,
        :math:`D_w(k, l) \ge D_w(i, j) + \delta` (eq. 2.12).
        ``"relaxed"`` (``e < f ~ g < h``): :math:`(i, j) \in f \times g`, :math:`(k, l) \in h \times e`,
        two constraints :math:`D_w(k, l) \ge \pm D_w(i, j) + \delta` (eq. 2.13), written as the
        quadruplets :math:`(i, j, k, l)` and :math:`(j, i, k, l)`; ``m`` counts both.

    Notes
    -----
    These constraints are meant for the signed vector model :math:`D_w(i, j) = w^\top (x_i - x_j)`
    (``cvxmetric.formulations.qwise.build_qwise_vector(..., diagonal=False)``).
    """
    y = as_labels(y)
    m = check_int_in_range(m, "m", 0)
    rng = as_rng(seed)
    members = _class_members(y)
    if isinstance(levels, (str, bytes)):
        raise TypeError("levels must be a sequence of sequences of labels, weakest first; got a string")
    try:
        lv = [list(level) for level in levels]
    except TypeError as exc:
        raise TypeError("levels must be a sequence of sequences of labels, weakest first, "
                        "e.g. [[0], [1, 2], [3]]") from exc
    seen = set()
    for t, level in enumerate(lv):
        if not level:
            raise ValueError(f"levels[{t}] is empty; every level needs at least one class")
        for c in level:
            if c not in members:
                raise ValueError(f"levels names class {c!r}, which does not occur in y")
            if c in seen:
                raise ValueError(f"levels names class {c!r} twice; each class has one level")
            seen.add(c)
    if kind == "strict":
        if len(lv) < 4:
            raise ValueError("kind='strict' needs at least 4 levels (e < f < g < h)")
    elif kind == "relaxed":
        if not any(len(level) >= 2 for level in lv[1:-1]):
            raise ValueError("kind='relaxed' needs an inner level with two equivalent classes (f ~ g)")
    else:
        raise ValueError(f"kind must be 'strict' or 'relaxed'; got {kind!r}")

    def draw(cls):
        return int(rng.choice(members[cls]))

    rows = []
    L = len(lv)
    while len(rows) < m:
        if kind == "strict":
            a, b, c, d = np.sort(rng.choice(L, size=4, replace=False))
            e, f, g, h = (lv[t][rng.integers(len(lv[t]))] for t in (a, b, c, d))
            rows.append((draw(g), draw(f), draw(h), draw(e)))
        else:
            inner = [t for t in range(1, L - 1) if len(lv[t]) >= 2]
            b = int(rng.choice(inner))
            f, g = rng.choice(len(lv[b]), size=2, replace=False)
            a = int(rng.integers(0, b))
            d = int(rng.integers(b + 1, L))
            e = lv[a][rng.integers(len(lv[a]))]
            h = lv[d][rng.integers(len(lv[d]))]
            i, j, k, l = draw(lv[b][f]), draw(lv[b][g]), draw(h), draw(e)
            rows.append((i, j, k, l))
            if len(rows) < m:
                rows.append((j, i, k, l))
    return ConstraintSet.from_quadruplets(np.array(rows[:m], dtype=np.int64).reshape(-1, 4), delta=delta)


def triplets_from_labels(X, y, *, n_neighbors: int = 3, n_impostors: int = 3) -> ConstraintSet:
    r"""Local triplets from labels, as in BoostMetric's experiments (Shen et al. 2012, sec. 4.2).

    For every point :math:`x_i`: its ``n_neighbors`` nearest same-class neighbours (targets
    :math:`j`) and its ``n_impostors`` nearest other-class neighbours (impostors :math:`k`), both
    Euclidean in ``X``; every pair gives the triplet :math:`(i, j, k)` ("i closer to j than to
    k"), so a point yields up to ``n_neighbors * n_impostors`` triplets (the paper's k = 3: 9).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data (pass transformed data ``X @ L.T`` to generate triplets in a learned metric, as
        multi-pass BoostMetric does).
    y : array_like, shape (n,)
        Class labels (at least two classes).
    n_neighbors, n_impostors : int
        Neighbour counts (>= 1).

    Returns
    -------
    ConstraintSet
        Triplets (weight 1, delta 1), ordered by anchor, then target, then impostor.

    Notes
    -----
    Duplicates of :math:`x_i` are never used as targets or impostors: they would give zero-length
    difference vectors. "Duplicate" is the project's relative test
    (:func:`cvxmetric._checks.zero_length_mask`), so ``X`` at any scale (``X * 1e-6``) or with
    feature scales spanning 1e-4..1e4 loses no point to it. Distances come from explicit
    differences (no Gram-matrix cancellation), in blocks of bounded memory: time
    :math:`O(n^2 d)` (digits, n = 1797, d = 64: about 1 s on one core). A class with fewer points than ``n_neighbors + 1``
    simply yields fewer targets. Ties are broken by index (deterministic).
    """
    X = as_data_matrix(X)
    y = as_labels(y, X.shape[0])
    n_neighbors = check_int_in_range(n_neighbors, "n_neighbors", 1)
    n_impostors = check_int_in_range(n_impostors, "n_impostors", 1)
    if np.unique(y).size < 2:
        raise ValueError("y has a single class; triplets need impostors from another class")
    rows = []
    for i, D, far in _row_distances(X):
        same = np.flatnonzero((y == y[i]) & far)
        other = np.flatnonzero((y != y[i]) & far)
        if same.size == 0 or other.size == 0:
            continue
        tj = same[np.argsort(D[same], kind="stable")[:n_neighbors]]
        tk = other[np.argsort(D[other], kind="stable")[:n_impostors]]
        jj, kk = np.meshgrid(tj, tk, indexing="ij")
        rows.append(np.column_stack([np.full(jj.size, i), jj.ravel(), kk.ravel()]))
    if not rows:
        raise ValueError("no triplet could be formed: no point has both a distinct same-class point and "
                         "a distinct other-class point (every class holds copies of a single point)")
    return ConstraintSet.from_triplets(np.concatenate(rows))


#: Entries of one (rows x n x d) block of difference vectors in :func:`_row_distances` (32 MB).
_DIFF_BLOCK_ELEMENTS = 2 ** 22


def _row_distances(X: np.ndarray):
    """Yield ``(i, D_i, far_i)``: squared distances from row ``i`` to every row, and which rows differ.

    Distances come from explicit differences, not from ``|a|^2 + |b|^2 - 2 a.b``, whose
    cancellation (about eps * max |x|^2) swamps features at a small scale next to large ones
    (scales 1e-4..1e4); ``far_i`` is ``~zero_length_mask``, the project's one duplicate test.
    """
    n, d = X.shape
    block = max(1, _DIFF_BLOCK_ELEMENTS // max(1, n * d))
    # a zero-length difference has |diff_t| <= ZERO_LENGTH_RTOL * max|X_t| in every feature, so its
    # squared length is at most this: only pairs below it need the per-feature test
    bound = ZERO_LENGTH_RTOL ** 2 * float(np.sum(np.max(np.abs(X), axis=0) ** 2))
    for start in range(0, n, block):
        rows = np.arange(start, min(n, start + block))
        diff = X[None, :, :] - X[rows, None, :]
        D = np.einsum("bnd,bnd->bn", diff, diff)
        far = D > bound
        near = np.flatnonzero(~far)
        far.ravel()[near] = ~zero_length_mask(diff.reshape(-1, d)[near], X)
        for r, i in enumerate(rows):
            yield int(i), D[r], far[r]
