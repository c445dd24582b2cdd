r"""Qwise constraints from a class taxonomy, and a synthetic two-level taxonomy.

Reference: thesis sec. 2.5.1.

A *class tree* is a dict mapping every internal node to the sequence of its children,
e.g. ``{"animal": ["dog", "cat"], "vehicle": ["car", "bus", "bike"]}`` (two super-classes, each
with leaf classes) or, deeper, ``{"root": ["animal", "vehicle"], "animal": ["dog", "cat"], ...}``.
A node that is not a key is a leaf; the leaves are the class labels of ``y``. Node names are any
hashable values (labels of ``y`` compare with ``==``, so ``0`` and ``np.int64(0)`` are the same
class).

Relations between leaf classes (only classes that occur in ``y`` count):

- **siblings**: two different leaves with the same parent;
- **cousins**: two leaves with different parents (the thesis' "a class that is not their sibling").

:func:`taxonomy_quadruplets` is the generator; :func:`synthetic_taxonomy` makes Gaussian data
with a known two-level taxonomy for the default instances and the benchmark
(``benchmarks/hierarchy.py``).
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np

from ._checks import as_data_matrix, as_labels, as_rng, check_int_in_range, check_nonnegative, check_positive
from .constraints import ConstraintSet
from .generators import _row_distances

__all__ = ["class_parents", "taxonomy_quadruplets", "synthetic_taxonomy"]


def class_parents(tree) -> dict:
    """Validate a class tree (dict node -> children) and return ``{node: parent}`` for every child.

    Raises
    ------
    TypeError
        ``tree`` is not a dict, or a node's children are not a sequence of hashable names.
    ValueError
        A node without children, a child listed twice or under two parents, a node that is its own
        ancestor (a cycle), or a tree without any internal node.
    """
    if not isinstance(tree, Mapping):
        raise TypeError("tree must be a dict mapping each internal node to its children, e.g. "
                        f"{{'animal': ['dog', 'cat'], 'vehicle': ['car', 'bus']}}; got {type(tree).__name__}")
    if not tree:
        raise ValueError("tree is empty; give at least one node with its children")
    parent = {}
    for node, children in tree.items():
        if isinstance(children, (str, bytes)) or not hasattr(children, "__iter__"):
            raise TypeError(f"tree[{node!r}] must be a sequence of child names; got {type(children).__name__} "
                            f"(write {{{node!r}: [{children!r}]}} for a single child)")
        children = list(children)
        if not children:
            raise ValueError(f"tree[{node!r}] has no children; drop the node or list its children")
        for c in children:
            if not isinstance(c, Hashable):
                raise TypeError(f"tree[{node!r}] holds an unhashable child {c!r}; node names must be hashable")
            if c in parent:
                where = "twice" if parent[c] == node else f"under both {parent[c]!r} and {node!r}"
                raise ValueError(f"class {c!r} is listed {where}; every node has exactly one parent")
            parent[c] = node
    for start in parent:
        seen, node = {start}, start
        while node in parent:
            node = parent[node]
            if node in seen:
                raise ValueError(f"tree has a cycle through {node!r}; a class tree has no node that is "
                                 "its own ancestor")
            seen.add(node)
    return parent


def _relations(tree, y: np.ndarray):
    """Leaf classes of ``y`` with their parents; checks every label is a leaf of ``tree``."""
    parent = class_parents(tree)
    classes = list(dict.fromkeys(y.tolist()))
    for c in classes:
        if c not in parent:
            raise ValueError(f"label {c!r} of y is not a child of any node of tree; add it under its "
                             "parent class (tree maps node -> children)")
        if c in tree:
            raise ValueError(f"label {c!r} of y is an internal node of tree (it has children); labels "
                             "must be leaves")
    return classes, parent


def _neighbour_lists(X, y, parent, k):
    """For every point: its ``k`` nearest distinct same-class points and sibling-class points."""
    same_nn, sib_nn = [], []
    codes = {}
    par = np.array([codes.setdefault(parent[c], len(codes)) for c in y.tolist()], dtype=np.int64)
    for i, D, far in _row_distances(X):
        same = np.flatnonzero((y == y[i]) & far)
        sib = np.flatnonzero((par == par[i]) & (y != y[i]) & far)
        same_nn.append(same[np.argsort(D[same], kind="stable")[:k]])
        sib_nn.append(sib[np.argsort(D[sib], kind="stable")[:k]])
    return same_nn, sib_nn


def taxonomy_quadruplets(X, y, tree, *, n_same: int, n_sibling: int, n_neighbors: int = 5, delta: float = 1.0,
                         weight: float = 1.0, seed=None) -> ConstraintSet:
    r"""Quadruplets from a class taxonomy (thesis sec. 2.5.1): closer classes give smaller distances.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data; the nearest neighbours are Euclidean in ``X`` (pass ``X @ L.T`` for a learned metric).
    y : array_like, shape (n,)
        Leaf-class labels; every label must be a leaf of ``tree``.
    tree : dict
        The class tree, node -> children (module docstring).
    n_same : int
        Number of type-(1) quadruplets: same-class pair closer than a sibling-class pair.
    n_sibling : int
        Number of type-(2) quadruplets: sibling-class pair closer than a cousin-class pair.
    n_neighbors : int
        Neighbourhood size for :math:`\mathcal{I}_j` (>= 1).
    delta, weight : float
        Margin :math:`\delta \ge 0` and weight of every quadruplet.
    seed : None, int or numpy.random.Generator

    Returns
    -------
    ConstraintSet
        ``n_same + n_sibling`` quadruplets :math:`(i, j, k, l)` meaning
        :math:`D(k, l) \ge D(i, j) + \delta`: the ``n_same`` type-(1) rows first, then the type-(2) rows.

    Raises
    ------
    ValueError
        A bad tree (:func:`class_parents`), a label that is not a leaf, a negative count, or a
        positive count of a type that no point can form (no class with a sibling class; no distinct
        same-class neighbour; no cousin class), the message says which.
    TypeError
        A count or ``n_neighbors`` that is not an integer.

    Notes
    -----
    Exactly what is sampled, independently for every quadruplet (with replacement, like the other
    generators; a repeated quadruplet counts twice):

    Type (1), :math:`c_a` the class of :math:`\mathcal{I}_i`:

    1. :math:`\mathcal{I}_i` uniform among the points that have a distinct same-class point and
       whose class has a sibling class;
    2. :math:`\mathcal{I}_j` uniform among the ``n_neighbors`` nearest distinct points of :math:`c_a`;
    3. :math:`\mathcal{I}_k` uniform in :math:`c_a` (it may equal :math:`\mathcal{I}_i`; LMNN would
       force it), :math:`c_b` uniform among the sibling classes of :math:`c_a`,
       :math:`\mathcal{I}_l` uniform in :math:`c_b`.

    Type (2):

    1. :math:`\mathcal{I}_i` uniform among the points whose class has a sibling class and a cousin
       class;
    2. :math:`\mathcal{I}_j` uniform among the ``n_neighbors`` nearest distinct points of the union of the
       sibling classes of :math:`c_a` (the neighbour fixes :math:`c_b`);
    3. :math:`\mathcal{I}_k` uniform in :math:`c_a`, :math:`c_d` uniform among the cousin classes
       of :math:`c_a`, :math:`\mathcal{I}_l` uniform in :math:`c_d`.

    "Distinct" excludes duplicates of :math:`\mathcal{I}_i` by the project's relative test
    (:func:`cvxmetric._checks.zero_length_mask`), so any feature scaling leaves the set unchanged.
    Fewer than ``n_neighbors`` candidates: all are used. Distances are computed from explicit differences,
    time :math:`O(n^2 d)`. Inputs are never modified.
    """
    X = as_data_matrix(X)
    y = as_labels(y, X.shape[0])
    n_same = check_int_in_range(n_same, "n_same", 0)
    n_sibling = check_int_in_range(n_sibling, "n_sibling", 0)
    n_neighbors = check_int_in_range(n_neighbors, "n_neighbors", 1)
    delta = check_nonnegative(delta, "delta")
    weight = check_positive(weight, "weight")
    rng = as_rng(seed)
    classes, parent = _relations(tree, y)
    members = {c: np.flatnonzero(y == c) for c in classes}
    siblings = {c: [s for s in classes if s != c and parent[s] == parent[c]] for c in classes}
    cousins = {c: [s for s in classes if parent[s] != parent[c]] for c in classes}
    if (n_same or n_sibling) and not any(siblings.values()):
        raise ValueError("no class of y has a sibling class (two leaves of tree with the same parent, both "
                         "present in y), so no taxonomy quadruplet exists; give a tree where some parent "
                         "has at least two classes of y")
    same_nn, sib_nn = _neighbour_lists(X, y, parent, n_neighbors)
    labels = y.tolist()
    rows = []
    for count, kind in ((n_same, 1), (n_sibling, 2)):
        if count == 0:
            continue
        if kind == 1:
            ok = [i for i, c in enumerate(labels) if siblings[c] and same_nn[i].size]
            why = ("no point of a class with a sibling class has a distinct same-class point (such classes "
                   "hold a single point or copies of one)")
        else:
            ok = [i for i, c in enumerate(labels) if cousins[c] and sib_nn[i].size]
            why = ("no class with a sibling class also has a cousin class (a leaf under another parent): "
                   "the tree needs at least two parents with classes of y")
        if not ok:
            raise ValueError(f"{'n_same' if kind == 1 else 'n_sibling'}={count} quadruplets asked for, but {why}; "
                             "ask for 0 or extend the tree")
        anchors = np.asarray(ok)[rng.integers(0, len(ok), size=count)]
        for i in anchors:
            c = labels[i]
            j = rng.choice(same_nn[i] if kind == 1 else sib_nn[i])
            kk = rng.choice(members[c])
            far = siblings[c] if kind == 1 else cousins[c]
            ll = rng.choice(members[far[rng.integers(len(far))]])
            rows.append((i, j, kk, ll))
    q = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return ConstraintSet.from_quadruplets(q, delta=delta, weight=weight)


def synthetic_taxonomy(n_super: int = 3, n_sub: int = 3, n_per: int = 15, *, d_informative: int = 4,
                       d_noise: int = 4, super_scale: float = 3.0, sub_scale: float = 1.0,
                       noise_scale: float = 2.0, seed=None):
    r"""Gaussian clusters with a two-level taxonomy: super-classes, each with sub-classes (leaves).

    Super-class centres :math:`\mu_s \sim N(0, \mathrm{super\_scale}^2 I)` and sub-class centres
    :math:`\mu_s + N(0, \mathrm{sub\_scale}^2 I)` live in the first ``d_informative`` features; each
    point is its sub-class centre plus :math:`N(0, 0.5^2 I)` there (so sub-classes of one
    super-class overlap a little) and :math:`N(0, \mathrm{noise\_scale}^2 I)` in ``d_noise`` further
    features that carry no class information (they mislead the Euclidean distance).

    Returns
    -------
    X : ndarray, shape (n_super * n_sub * n_per, d_informative + d_noise)
    y : ndarray of int, shape (n,)
        Leaf class ``s * n_sub + t`` for sub-class ``t`` of super-class ``s``.
    tree : dict
        ``{"super0": [0, 1, 2], "super1": [3, 4, 5], ...}``.
    """
    n_super = check_int_in_range(n_super, "n_super", 1)
    n_sub = check_int_in_range(n_sub, "n_sub", 1)
    n_per = check_int_in_range(n_per, "n_per", 1)
    d_informative = check_int_in_range(d_informative, "d_informative", 1)
    d_noise = check_int_in_range(d_noise, "d_noise", 0)
    super_scale = check_positive(super_scale, "super_scale")
    sub_scale = check_positive(sub_scale, "sub_scale")
    noise_scale = check_positive(noise_scale, "noise_scale")
    rng = as_rng(seed)
    blocks, labels, tree = [], [], {}
    for s in range(n_super):
        mu_s = super_scale * rng.standard_normal(d_informative)
        tree[f"super{s}"] = [s * n_sub + t for t in range(n_sub)]
        for t in range(n_sub):
            mu = mu_s + sub_scale * rng.standard_normal(d_informative)
            inf = mu + 0.5 * rng.standard_normal((n_per, d_informative))
            noise = noise_scale * rng.standard_normal((n_per, d_noise))
            blocks.append(np.hstack([inf, noise]))
            labels.append(np.full(n_per, s * n_sub + t))
    return np.vstack(blocks), np.concatenate(labels), tree
