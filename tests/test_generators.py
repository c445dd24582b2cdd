"""Constraint generators and data sets: determinism and meaning."""
import numpy as np
import pytest

from cvxmetric.datasets import load_dataset, synthetic_low_rank_metric
from cvxmetric.generators import (lmnn_constraints, pairs_from_labels, quadruplets_from_metric,
                                  relative_attribute_quadruplets, sample_quadruplet_indices, target_neighbors)


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
    tg, trip = lmnn_constraints(X, y, 2, mu=0.5)
    assert len(tg) == 60 and len(trip) == 60 * 20
    assert np.all(y[trip.idx[:, 3]] != y[trip.idx[:, 0]])


@pytest.mark.parametrize("k, match", [(0, r"k must be in"), (10, r"k must be in"), (2.0, "integer")])
def test_target_neighbors_bad_k(k, match):
    X = np.zeros((30, 2)) + np.arange(30)[:, None]
    y = np.repeat([0, 1, 2], 10)
    with pytest.raises((ValueError, TypeError), match=match):
        target_neighbors(X, y, k)


def test_target_neighbors_bad_labels():
    X = np.arange(20.0).reshape(10, 2)
    with pytest.raises(ValueError, match="single class"):
        target_neighbors(X, np.zeros(10), 1)
    with pytest.raises(ValueError, match="labels"):
        target_neighbors(X, np.zeros(9), 1)


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
