"""Constraint generators and data sets: determinism and meaning."""
import numpy as np
import pytest

from cvxmetric.datasets import load_dataset, synthetic_low_rank_metric
from cvxmetric.generators import (lmnn_constraints, pairs_from_labels, quadruplets_from_metric,
                                  relative_attribute_quadruplets, sample_quadruplet_indices, target_neighbors,
                                  target_pairs, triplets_from_labels, NO_TARGET)


def test_pairs_from_labels_deterministic_and_correct():
    y = np.repeat([0, 1, 2], 10)
    a = pairs_from_labels(y, n_similar=20, n_dissimilar=30, u=1.0, l=3.0, seed=3)
    b = pairs_from_labels(y, n_similar=20, n_dissimilar=30, u=1.0, l=3.0, seed=3)
    np.testing.assert_array_equal(a.idx, b.idx)
    sim, dis = a.subset(a.is_similar), a.subset(a.is_dissimilar)
    assert len(sim) == 20 and len(dis) == 30
    assert np.all(y[sim.idx[:, 0]] == y[sim.idx[:, 1]]) and np.all(sim.delta == -1.0)
    assert np.all(y[dis.idx[:, 2]] != y[dis.idx[:, 3]]) and np.all(dis.delta == 3.0)
    with pytest.raises(ValueError, match="u must be <= l"):
        pairs_from_labels(y, n_similar=1, n_dissimilar=1, u=3.0, l=1.0)
    with pytest.raises(ValueError, match="n_similar"):
        pairs_from_labels(y, n_similar=10**6, n_dissimilar=1, u=1.0, l=3.0)


def test_target_neighbors_are_nearest_same_class():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    y = np.repeat([0, 1, 2], 10)
    T = target_neighbors(X, y, 3)
    for i in range(30):
        same = np.flatnonzero((y == y[i]) & (np.arange(30) != i))
        dist = np.linalg.norm(X[same] - X[i], axis=1)
        np.testing.assert_array_equal(T[i], same[np.argsort(dist, kind="stable")[:3]])
    tg, trip = lmnn_constraints(X, y, 2, regularization=0.5)
    assert len(tg) == 60 and len(trip) == 60 * 20
    assert np.all(y[trip.idx[:, 3]] != y[trip.idx[:, 0]])


@pytest.mark.parametrize("k, match", [(0, r"n_neighbors must be at least 1"), (-1, r"n_neighbors must be at least 1"),
                                      (2.0, "integer")])
def test_target_neighbors_bad_k(k, match):
    X = np.zeros((30, 2)) + np.arange(30)[:, None]
    y = np.repeat([0, 1, 2], 10)
    with pytest.raises((ValueError, TypeError), match=match):
        target_neighbors(X, y, k)


def test_target_neighbors_of_small_classes_are_capped():
    """A point takes min(n_neighbors, class size - 1) targets, the row padded with NO_TARGET."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((10, 2))
    y = np.array([0, 0, 0, 1, 1, 1, 1, 1, 2, 3])   # classes of 3, 5, 1 and 1 points
    T = target_neighbors(X, y, 3)
    for i in range(10):
        same = np.flatnonzero((y == y[i]) & (np.arange(10) != i))
        k_i = min(3, same.size)
        dist = np.linalg.norm(X[same] - X[i], axis=1)
        np.testing.assert_array_equal(T[i, :k_i], same[np.argsort(dist, kind="stable")[:k_i]])
        assert np.all(T[i, k_i:] == NO_TARGET)
    tg, trip = lmnn_constraints(X, y, 3)
    np.testing.assert_array_equal(tg, target_pairs(T))
    assert len(tg) == 3 * 2 + 5 * 3 and len(trip) == 3 * 2 * 7 + 5 * 3 * 5
    assert np.all(tg[:, 1] != NO_TARGET)


def test_target_neighbors_bad_labels():
    X = np.arange(20.0).reshape(10, 2)
    with pytest.raises(ValueError, match="single class"):
        target_neighbors(X, np.zeros(10), 1)
    with pytest.raises(ValueError, match="labels"):
        target_neighbors(X, np.zeros(9), 1)
    with pytest.raises(ValueError, match="no target pair"):
        target_neighbors(X[:3], np.arange(3), 1)


def test_quadruplets_oriented_by_target_metric():
    X, T = synthetic_low_rank_metric(100, 6, 2, seed=1)
    cs = quadruplets_from_metric(X, T, 500, seed=2)
    i, j, k, l = cs.idx.T
    dij = np.einsum("ma,ab,mb->m", X[i] - X[j], T, X[i] - X[j])
    dkl = np.einsum("ma,ab,mb->m", X[k] - X[l], T, X[k] - X[l])
    assert np.all(dkl > dij)
    assert np.linalg.matrix_rank(T) == 2
    noisy = quadruplets_from_metric(X, T, 500, seed=2, flip_fraction=0.2)
    i, j, k, l = noisy.idx.T
    dij = np.einsum("ma,ab,mb->m", X[i] - X[j], T, X[i] - X[j])
    dkl = np.einsum("ma,ab,mb->m", X[k] - X[l], T, X[k] - X[l])
    assert 0.1 < np.mean(dkl < dij) < 0.3


def test_sampled_pairs_are_not_degenerate():
    q = sample_quadruplet_indices(3, 1000, seed=0)
    assert np.all(q[:, 0] != q[:, 1]) and np.all(q[:, 2] != q[:, 3])


def test_relative_attribute_quadruplets_respect_the_ordering():
    y = np.repeat(np.arange(6), 5)
    levels = [[0], [1], [2, 3], [4], [5]]
    rank = {0: 0, 1: 1, 2: 2, 3: 2, 4: 3, 5: 4}
    strict = relative_attribute_quadruplets(y, levels, 200, kind="strict", seed=0)
    for i, j, k, l in strict.idx:  # (g, f, h, e) with e < f < g < h
        assert rank[y[l]] < rank[y[j]] < rank[y[i]] < rank[y[k]]
    relaxed = relative_attribute_quadruplets(y, levels, 200, kind="relaxed", seed=0)
    for i, j, k, l in relaxed.idx:  # f ~ g strictly inside (e, h)
        assert rank[y[i]] == rank[y[j]] == 2 and rank[y[l]] < 2 < rank[y[k]]
    np.testing.assert_array_equal(relaxed.idx[0, [1, 0, 2, 3]], relaxed.idx[1])
    with pytest.raises(ValueError, match="4 levels"):
        relative_attribute_quadruplets(y, [[0], [1], [2]], 5)
    with pytest.raises(ValueError, match="does not occur"):
        relative_attribute_quadruplets(y, [[0], [1], [2], [9]], 5)


@pytest.mark.parametrize("name", ["iris", "wine"])
def test_bundled_datasets_standardized(name):
    X, y = load_dataset(name)
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(X.std(0), 1, atol=1e-10)
    assert X.shape[0] == y.shape[0]
    with pytest.raises(ValueError, match="unknown data set"):
        load_dataset("mnist")


# ---------------------------------------------------------------- counts and empty results
def _labelled(n=30, d=4, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], n // 3)
    return rng.standard_normal((n, d)) + y[:, None], y


LEVELS = [[0], [1], [2, 3], [4], [5]]


@pytest.mark.parametrize("name, call", [
    ("n_similar", lambda m: pairs_from_labels(np.repeat([0, 1], 5), n_similar=m, n_dissimilar=1, u=1.0, l=2.0)),
    ("n_dissimilar", lambda m: pairs_from_labels(np.repeat([0, 1], 5), n_similar=1, n_dissimilar=m, u=1.0, l=2.0)),
    ("m", lambda m: sample_quadruplet_indices(10, m, seed=0)),
    ("m", lambda m: quadruplets_from_metric(*synthetic_low_rank_metric(20, 3, 2, seed=0), m, seed=0)),
    ("m", lambda m: relative_attribute_quadruplets(np.repeat(np.arange(6), 3), LEVELS, m, seed=0)),
    ("n_neighbors", lambda m: triplets_from_labels(*_labelled(), n_neighbors=m)),
    ("n_impostors", lambda m: triplets_from_labels(*_labelled(), n_impostors=m)),
    ("n_neighbors", lambda m: target_neighbors(*_labelled(), m)),
])
def test_counts_are_validated(name, call):
    with pytest.raises(ValueError, match=f"{name} must be"):
        call(-1)
    for bad in (3.0, 2.5, True, "3"):
        with pytest.raises(TypeError, match=f"{name} must be an integer"):
            call(bad)
    assert len(call(np.int64(2))) > 0


def test_asking_for_zero_gives_an_empty_set_and_nothing_else_is_empty():
    y = np.repeat([0, 1], 5)
    assert len(pairs_from_labels(y, n_similar=0, n_dissimilar=0, u=1.0, l=2.0)) == 0
    X, T = synthetic_low_rank_metric(20, 3, 2, seed=0)
    assert len(quadruplets_from_metric(X, T, 0, seed=0)) == 0
    assert sample_quadruplet_indices(5, 0).shape == (0, 4)
    assert len(relative_attribute_quadruplets(np.repeat(np.arange(6), 3), LEVELS, 0)) == 0


@pytest.mark.parametrize("call, match", [
    (lambda: pairs_from_labels([0, 1, 2, 3], n_similar=2, n_dissimilar=1, u=1.0, l=2.0),
     "no class has two points"),
    (lambda: pairs_from_labels([5, 5, 5], n_similar=1, n_dissimilar=1, u=1.0, l=2.0),
     "fewer than two classes"),
    (lambda: pairs_from_labels([0, 0, 1, 1], n_similar=3, n_dissimilar=1, u=1.0, l=2.0),
     "only 2 such pairs exist"),
    (lambda: quadruplets_from_metric(np.random.default_rng(0).random((10, 3)), np.zeros((3, 3)), 5, seed=0),
     "exact ties under T"),
    (lambda: triplets_from_labels(np.repeat([[0.0, 1.0], [2.0, 3.0]], 3, axis=0), np.repeat([0, 1], 3)),
     "no triplet could be formed"),
    (lambda: pairs_from_labels([0, 1, 1], n_similar=1, n_dissimilar=1, u=-1.0, l=2.0), "u must be >= 0"),
    (lambda: quadruplets_from_metric(np.eye(3), np.eye(3), 5, flip_fraction=0.7), "flip_fraction"),
    (lambda: lmnn_constraints(np.eye(4), [0, 0, 1, 1], 1, margin=0.0), "margin must be > 0"),
    (lambda: relative_attribute_quadruplets([0, 1, 2, 3], "abcd", 3), "sequence of sequences"),
    (lambda: relative_attribute_quadruplets([0, 1, 2, 3], [[0], [], [1], [2], [3]], 3), r"levels\[1\] is empty"),
    (lambda: relative_attribute_quadruplets([0, 1, 2, 3], [[0], [1], [2], [3, 0]], 3), "twice"),
])
def test_empty_or_impossible_requests_say_why(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_feature_scales_1e_4_to_1e4_are_accepted_everywhere():
    """Column scales spanning 1e-4..1e4: every generator and check works and finds no duplicate."""
    from cvxmetric._checks import as_data_matrix, zero_length_mask
    from cvxmetric.hinge import QuadrupletGeometry

    X0, y = _labelled(30, 5)
    X = X0 * np.logspace(-4, 4, 5)
    Xc = as_data_matrix(X)
    np.testing.assert_array_equal(Xc, X)
    T = np.diag(np.logspace(8, -8, 5))   # the metric that undoes the scaling (squared)
    n = X.shape[0]
    i, j = np.triu_indices(n, 1)
    assert not np.any(zero_length_mask(X[i] - X[j], X))
    assert target_neighbors(X, y, 3).shape == (n, 3)
    assert len(lmnn_constraints(X, y, 2)[1]) == n * 2 * 20
    quads = quadruplets_from_metric(X, T, 50, seed=0)
    assert len(quads) == 50
    trip = triplets_from_labels(X, y)
    assert len(trip) == n * 9
    zu, zv = QuadrupletGeometry(X, trip + quads).zero_length()
    assert not np.any(zu) and not np.any(zv)
    # a row that differs from another only in the 1e-4 feature is a distinct point
    Xd = np.vstack([X, X[0] + np.array([1e-6, 0, 0, 0, 0])])
    assert not zero_length_mask((Xd[-1] - Xd[0])[None], Xd)[0]


def test_standardize_does_not_amplify_round_off():
    from cvxmetric.datasets import standardize

    X = np.array([[0.1 + 0.2, 1.0], [0.3, 2.0], [0.3, 4.0]])
    Z = standardize(X)
    np.testing.assert_array_equal(Z[:, 0], 0.0)   # a constant column (up to round-off) becomes 0
    np.testing.assert_allclose(Z[:, 1].std(), 1.0)
    for s in (1e-8, 1e8):   # the same result at any feature scale
        np.testing.assert_allclose(standardize(X * [1.0, s]), Z, atol=1e-12)
