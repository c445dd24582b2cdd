"""Taxonomy quadruplets (thesis 2.5.1), the synthetic taxonomy and its certified default instances."""
import numpy as np
import pytest

from cvxmetric.instances import get_instance
from cvxmetric.taxonomy import class_parents, synthetic_taxonomy, taxonomy_quadruplets
from cvxmetric.solvers.qwise import solve_qwise, solve_qwise_vector
from cvxmetric.verification.tolerances import GAP_FIRST_ORDER, GAP_NEWTON

#: two super-classes: a = {0, 1, 2} and b = {3, 4}; class 5 sits alone under c (no sibling)
TREE = {"root": ["a", "b", "c"], "a": [0, 1, 2], "b": [3, 4], "c": [5]}


def _tiny(seed=0, n_per=6):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(6), n_per)
    X = rng.standard_normal((y.size, 3)) + y[:, None]
    return X, y


def _brute_force_check(X, y, tree, q, n_same, k):
    """Every quadruplet has the taxonomy relation of its type and I_j among the k nearest."""
    parent = class_parents(tree)
    for r, (i, j, kk, ll) in enumerate(q):
        ci, cj, ck, cl = (int(y[t]) for t in (i, j, kk, ll))
        assert ck == ci                                          # I_k in c_a
        d = np.sum((X - X[i]) ** 2, axis=1)
        if r < n_same:                                           # (1) same class vs sibling class
            assert cj == ci and j != i
            assert cl != ci and parent[cl] == parent[ci]
            pool = [t for t in range(len(y)) if y[t] == ci and t != i]
        else:                                                    # (2) sibling vs cousin
            assert cj != ci and parent[cj] == parent[ci]
            assert parent[cl] != parent[ci]
            pool = [t for t in range(len(y)) if y[t] != ci and parent[int(y[t])] == parent[ci]]
        kth = np.sort(d[pool])[min(k, len(pool)) - 1]
        assert d[j] <= kth                                       # I_j among the k nearest


def test_every_quadruplet_has_the_taxonomy_relation_and_a_nearest_neighbour():
    X, y = _tiny()
    cons = taxonomy_quadruplets(X, y, TREE, n_same=40, n_sibling=30, n_neighbors=2, seed=1)
    assert len(cons) == 70
    assert np.all(cons.delta == 1.0)
    _brute_force_check(X, y, TREE, cons.idx, 40, 2)
    # both kinds of neighbours are reached, and class 5 (no sibling) never anchors
    assert not np.any(y[cons.idx[:, 0]] == 5)
    assert set(y[cons.idx[40:, 3]]) <= {0, 1, 2, 3, 4, 5}


def test_deterministic_under_a_seed_and_inputs_unchanged():
    X, y = _tiny()
    X0, y0, tree0 = X.copy(), y.copy(), {k: list(v) for k, v in TREE.items()}
    a = taxonomy_quadruplets(X, y, TREE, n_same=20, n_sibling=20, seed=3)
    b = taxonomy_quadruplets(X, y, TREE, n_same=20, n_sibling=20, seed=np.random.default_rng(3))
    c = taxonomy_quadruplets(X, y, TREE, n_same=20, n_sibling=20, seed=4)
    np.testing.assert_array_equal(a.idx, b.idx)
    assert not np.array_equal(a.idx, c.idx)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    assert TREE == tree0


def test_feature_scales_1e_4_to_1e4_are_accepted():
    X, y = _tiny()
    Xs = X * np.logspace(-4, 4, 3)
    cons = taxonomy_quadruplets(Xs, y, TREE, n_same=20, n_sibling=20, n_neighbors=2, seed=0)
    _brute_force_check(Xs, y, TREE, cons.idx, 20, 2)
    # a uniform rescaling changes nothing (no absolute threshold anywhere)
    for s in (1e-6, 1e6):
        np.testing.assert_array_equal(
            taxonomy_quadruplets(X * s, y, TREE, n_same=20, n_sibling=20, n_neighbors=2, seed=0).idx,
            taxonomy_quadruplets(X, y, TREE, n_same=20, n_sibling=20, n_neighbors=2, seed=0).idx)


def test_duplicates_are_never_neighbours():
    X, y = _tiny()
    X = np.vstack([X, X[0], X[0]])    # copies of point 0 in class 0 and in its sibling class 1
    y = np.append(y, [0, 1])
    n = len(y)
    cons = taxonomy_quadruplets(X, y, TREE, n_same=300, n_sibling=300, n_neighbors=1, seed=0)
    pairs = {(int(i), int(j)) for i, j in cons.idx[:, :2]}
    assert not pairs & {(0, n - 2), (n - 2, 0), (0, n - 1), (n - 1, 0), (n - 2, n - 1), (n - 1, n - 2)}
    assert any(i == 0 for i, _ in pairs)


@pytest.mark.parametrize("kwargs, tree, exc, match", [
    ({"n_same": 1.0, "n_sibling": 0}, TREE, TypeError, "n_same must be an integer"),
    ({"n_same": -1, "n_sibling": 0}, TREE, ValueError, "n_same must be >= 0"),
    ({"n_same": 1, "n_sibling": 0, "n_neighbors": 0}, TREE, ValueError, "n_neighbors must be >= 1"),
    ({"n_same": 1, "n_sibling": 0}, {"a": [0], "b": [1], "c": [2], "d": [3], "e": [4], "f": [5]},
     ValueError, "no class of y has a sibling"),
    ({"n_same": 0, "n_sibling": 1}, {"a": [0, 1, 2, 3, 4, 5]}, ValueError, "cousin"),
    ({"n_same": 1, "n_sibling": 0}, {"a": [0, 1, 2], "b": [3, 4]}, ValueError, "label 5 of y is not"),
    ({"n_same": 1, "n_sibling": 0}, ["a", "b"], TypeError, "tree must be a dict"),
    ({"n_same": 1, "n_sibling": 0}, {"a": [0, 1, 2], "b": [2, 3, 4, 5]}, ValueError, "exactly one parent"),
    ({"n_same": 1, "n_sibling": 0}, {"a": [0, 1, 2, "b"], "b": [3, 4, 5, "a"]}, ValueError, "cycle"),
    ({"n_same": 1, "n_sibling": 0}, {"a": [], "b": [0, 1, 2, 3, 4, 5]}, ValueError, "no children"),
    ({"n_same": 1, "n_sibling": 0}, {"a": "012", "b": [3, 4, 5]}, TypeError, "sequence of child names"),
    ({"n_same": 1, "n_sibling": 0}, {"r": ["a", 5], "a": [0, 1, 2, 3, 4, 5]}, ValueError,
     "exactly one parent"),
])
def test_bad_input_names_the_problem(kwargs, tree, exc, match):
    X, y = _tiny()
    with pytest.raises(exc, match=match):
        taxonomy_quadruplets(X, y, tree, seed=0, **kwargs)


def test_singleton_classes_cannot_give_same_class_pairs():
    X = np.arange(12.0).reshape(4, 3)
    y = np.array([0, 1, 2, 3])
    tree = {"a": [0, 1], "b": [2, 3]}
    with pytest.raises(ValueError, match="distinct same-class point"):
        taxonomy_quadruplets(X, y, tree, n_same=1, n_sibling=0, seed=0)
    assert len(taxonomy_quadruplets(X, y, tree, n_same=0, n_sibling=5, seed=0)) == 5


def test_synthetic_taxonomy_shapes_and_seed():
    X, y, tree = synthetic_taxonomy(2, 3, 4, d_informative=2, d_noise=1, seed=0)
    assert X.shape == (24, 3) and tree == {"super0": [0, 1, 2], "super1": [3, 4, 5]}
    np.testing.assert_array_equal(X, synthetic_taxonomy(2, 3, 4, d_informative=2, d_noise=1, seed=0)[0])


def test_default_instances_are_certified_with_the_harness_gap():
    full = get_instance("qwise", "hierarchy-d8")
    assert full.X.shape[1] <= 10 and len(full.constraints) <= 1000
    r = solve_qwise(full.X, full.constraints, method="pdhg", **full.params)
    assert r.converged and r.measure == "certified_gap" and r.certified_gap <= GAP_FIRST_ORDER
    assert r.lower_bound > 0.1 * r.objective > 0          # a clearly positive optimum
    diag = get_instance("qwise_vector", "hierarchy-diag-d8")
    rv = solve_qwise_vector(diag.X, diag.constraints, **diag.params)
    assert rv.converged and rv.certified_gap is not None and rv.certified_gap <= GAP_NEWTON
    assert rv.objective > 0
