"""The model build at scale: compact index dtypes, the pair table against a direct construction,
chunked passes against unchunked ones, and difference vectors never formed by the points path."""
import numpy as np
import pytest

from cvxmetric import ConstraintSet, hinge
from cvxmetric import generators
from cvxmetric._checks import INT32_INDEX_MAX, index_dtype
from cvxmetric.datasets import synthetic_low_rank_metric
from cvxmetric.generators import pairs_from_labels, quadruplets_from_metric
from cvxmetric.hinge import PairTable, QuadrupletGeometry, distinct_keys

#: Exact forms that differ by round-off only (the order of a sum).
RTOL = 1e-12


def _constraints(n=40, d=6, m=400, seed=0):
    """Quadruplets on shared points (repeated pairs, both orientations), plus similar and dissimilar
    pairs (degenerate halves)."""
    X, T = synthetic_low_rank_metric(n, d, 2, seed=seed)
    cons = quadruplets_from_metric(X, T, m, seed=seed + 1, flip_fraction=0.1)
    y = (X[:, 0] > 0.5).astype(int)
    cons = cons + pairs_from_labels(y, n_similar=20, n_dissimilar=20, u=0.5, l=2.0, seed=seed)
    return X, cons + ConstraintSet.from_quadruplets([[0, 1, 1, 0], [3, 2, 2, 3]])


def test_index_dtype_is_int32_below_2_to_31():
    assert index_dtype(0) is np.int32 and index_dtype(INT32_INDEX_MAX) is np.int32
    assert index_dtype(INT32_INDEX_MAX + 1) is np.int64
    small = ConstraintSet.from_quadruplets([[0, 1, 2, 3]])
    assert small.idx.dtype == np.int32
    big = ConstraintSet.from_quadruplets([[0, 1, 2, INT32_INDEX_MAX + 1]])
    assert big.idx.dtype == np.int64 and big.idx[0, 3] == INT32_INDEX_MAX + 1
    joined = small + ConstraintSet.from_triplets(np.array([[4.0, 5.0, 6.0]]))
    assert joined.idx.dtype == np.int32
    np.testing.assert_array_equal(joined.idx, [[0, 1, 2, 3], [4, 5, 4, 6]])


@pytest.mark.parametrize("packed_bits", [hinge.PACKED_KEY_BITS, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_distinct_keys_is_unique_with_inverse(monkeypatch, packed_bits, seed):
    """The packed sort and the stable argsort (taken when the packed key does not fit) both give
    np.unique's distinct keys and inverse."""
    monkeypatch.setattr(hinge, "PACKED_KEY_BITS", packed_bits)
    keys = np.random.default_rng(seed).integers(0, 300, 2000)
    distinct, inverse = distinct_keys(keys, 300)
    ref, ref_inverse = np.unique(keys, return_inverse=True)
    np.testing.assert_array_equal(distinct, ref)
    np.testing.assert_array_equal(inverse, ref_inverse)
    assert inverse.dtype == np.int32
    one, inv_one = distinct_keys(np.array([5]), 6)
    assert one.tolist() == [5] and inv_one.tolist() == [0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pair_table_equals_a_direct_construction(seed):
    """Used points, distinct pairs (sorted), the pair of every half and the weighted sum of the
    pairs' outer products, against a dictionary of point pairs built one half at a time."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((50, 4))
    a = rng.integers(0, 45, 600)      # rows 45..49 are never used
    b = rng.integers(0, 44, 600)
    b[b >= a] += 1
    table = PairTable(X, a, b)
    used = sorted(set(a.tolist()) | set(b.tolist()))
    pairs = sorted({(min(i, j), max(i, j)) for i, j in zip(a.tolist(), b.tolist())})
    assert table.n == len(used) and table.P == len(pairs)
    used = np.array(used)
    assert list(zip(used[table.pa].tolist(), used[table.pb].tolist())) == pairs
    number = {p: k for k, p in enumerate(pairs)}
    assert table.half_pair.tolist() == [number[(min(i, j), max(i, j))] for i, j in zip(a.tolist(), b.tolist())]
    np.testing.assert_array_equal(table.Xc, X[used] - X[used].mean(axis=0))
    for arr in (table.pa, table.pb, table.half_pair):
        assert arr.dtype == np.int32
    w = rng.standard_normal(table.P)
    ref = np.zeros((4, 4))
    for (i, j), wp in zip(pairs, w):
        c = X[i] - X[j]
        ref += wp * np.outer(c, c)
    for dense in (False, True):
        G = table.laplacian_form(w, dense)
        assert np.linalg.norm(G - ref) <= RTOL * np.linalg.norm(ref)
        np.testing.assert_array_equal(G, G.T)   # X^T Y + (X^T Y)^T: symmetric to the last bit


def test_points_path_forms_no_difference_vectors():
    """Building the pair table and every all-rows pass of the points path leave U and V unformed;
    U and V, formed on first use, are the direct differences."""
    X, cons = _constraints()
    g = QuadrupletGeometry(X, cons)
    M = np.eye(g.d)
    g.pair_table()
    g.values(M, path="points")
    g.values_factor(np.eye(g.d)[:2], path="points")
    g.weighted_sum(np.ones(g.m), path="points")
    g.frobenius_norms()
    g.squared_lengths()
    g.values_rank_one(np.eye(g.d)[:, :2], path="points")
    assert g._U is None and g._V is None
    idx = cons.idx
    np.testing.assert_array_equal(g.U, X[idx[g.u_rows, 0]] - X[idx[g.u_rows, 1]])
    np.testing.assert_array_equal(g.V, X[idx[g.v_rows, 2]] - X[idx[g.v_rows, 3]])
    table, pu, pv = g.pair_table()
    for arr in (cons.idx, g.u_rows, g.v_rows, g._u_pos, g._v_pos, table.pa, table.pb, *g._pair_ends()):
        assert arr.dtype == np.int32
    assert pu.dtype == pv.dtype == np.intp   # the per-call gathers of K and K*


def test_chunked_passes_equal_unchunked(monkeypatch):
    """Row norms, squared lengths, difference vectors and rank-one blocks in blocks of 7 rows equal
    the passes in one block and the direct formulas on the full difference vectors."""
    X, cons = _constraints(seed=4)
    whole = QuadrupletGeometry(X, cons)
    ref = (whole.frobenius_norms(), whole.squared_lengths(), whole.U.copy(), whole.V.copy())
    V = np.random.default_rng(0).standard_normal((whole.d, 3))
    rank_one = {p: whole.values_rank_one(V, path=p) for p in hinge.OPERATOR_PATHS}
    monkeypatch.setattr(hinge, "GATHER_CHUNK", 7)
    g = QuadrupletGeometry(X, cons)
    np.testing.assert_array_equal(g.frobenius_norms(), ref[0])
    for got, want in zip(g.squared_lengths(), ref[1]):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(g.U, ref[2])
    np.testing.assert_array_equal(g.V, ref[3])
    for p in hinge.OPERATOR_PATHS:
        np.testing.assert_array_equal(g.values_rank_one(V, path=p), rank_one[p])
    # the direct formulas: |u|^2, |v|^2 and ||u u^T - v v^T||_F from full (m, d) differences
    idx = cons.idx
    U, W = X[idx[:, 0]] - X[idx[:, 1]], X[idx[:, 2]] - X[idx[:, 3]]
    a, b = (U * U).sum(1), (W * W).sum(1)
    np.testing.assert_allclose(ref[1][0], a, rtol=RTOL)
    np.testing.assert_allclose(ref[1][1], b, rtol=RTOL)
    direct = np.array([np.linalg.norm(np.outer(u, u) - np.outer(w, w)) for u, w in zip(U, W)])
    np.testing.assert_allclose(ref[0], direct, rtol=1e-9, atol=1e-12 * direct.max())


def test_extended_geometry_reuses_formed_differences():
    X, cons = _constraints(seed=5)
    head, tail = cons.subset(np.arange(300)), cons.subset(np.arange(300, len(cons)))
    formed = QuadrupletGeometry(X, head)
    formed.U, formed.V   # noqa: B018 (formed on first use)
    lazy = QuadrupletGeometry(X, head)
    both = formed.extended(tail), lazy.extended(tail)
    assert both[0]._U is not None and both[1]._U is None
    direct = QuadrupletGeometry(X, cons)
    for g in both:
        np.testing.assert_array_equal(g.U, direct.U)
        np.testing.assert_array_equal(g.V, direct.V)
        np.testing.assert_array_equal(g._u_pos, direct._u_pos)
        np.testing.assert_array_equal(g.frobenius_norms(), direct.frobenius_norms())


def test_generator_blocks_do_not_change_the_constraints(monkeypatch):
    """quadruplets_from_metric in blocks of 5 rows gives the same set as in one block, and its
    orientation agrees with D_T through one difference vector per pair."""
    X, T = synthetic_low_rank_metric(30, 5, 2, seed=7)
    one = quadruplets_from_metric(X, T, 300, seed=8, flip_fraction=0.0)
    monkeypatch.setattr(generators, "GENERATOR_CHUNK", 5)
    blocks = quadruplets_from_metric(X, T, 300, seed=8, flip_fraction=0.0)
    np.testing.assert_array_equal(one.idx, blocks.idx)
    idx = one.idx
    U, W = X[idx[:, 0]] - X[idx[:, 1]], X[idx[:, 2]] - X[idx[:, 3]]
    assert np.all(np.einsum("ij,jk,ik->i", W, T, W) > np.einsum("ij,jk,ik->i", U, T, U))
