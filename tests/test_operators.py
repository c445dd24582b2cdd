"""The two exact forms of K M and K* y (difference vectors, shared points): agreement and choice."""
import numpy as np
import pytest

from cvxmetric import ConstraintSet
from cvxmetric.generators import pairs_from_labels, quadruplets_from_metric
from cvxmetric.datasets import synthetic_low_rank_metric
from cvxmetric.hinge import OPERATOR_PATHS, QuadrupletGeometry, operator_costs

#: Both paths are exact; they differ by round-off only (measured ~1e-15 relative).
PATH_RTOL = 1e-12


def _geometry(n=60, d=12, m=500, offset=0.0, seed=3):
    """Quadruplets on shared points, plus similar/dissimilar pairs (degenerate halves) and a
    quadruplet whose two halves are the same pair."""
    X, T = synthetic_low_rank_metric(n, d, 3, seed=seed)
    cons = quadruplets_from_metric(X, T, m, seed=seed + 1, flip_fraction=0.1)
    y = (X[:, 0] > 0.5).astype(int)
    cons = cons + pairs_from_labels(y, n_similar=40, n_dissimilar=40, u=0.5, l=2.0, seed=seed)
    cons = cons + ConstraintSet.from_quadruplets([[0, 1, 1, 0], [2, 3, 2, 3]])
    return QuadrupletGeometry(X + offset, cons)


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(a)


@pytest.mark.parametrize("offset", [0.0, 1e3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paths_agree_on_random_M_and_y(seed, offset):
    g = _geometry(seed=seed, offset=offset)
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((g.d, g.d))
    M = M + M.T
    y = rng.standard_normal(g.m)
    vals = {p: g.values(M, path=p) for p in OPERATOR_PATHS}
    sums = {p: g.weighted_sum(y, path=p) for p in OPERATOR_PATHS}
    assert _rel(vals["differences"], vals["points"]) <= PATH_RTOL
    assert _rel(sums["differences"], sums["points"]) <= PATH_RTOL
    # the repeated-pair quadruplet has A = 0 on both paths
    assert abs(vals["points"][-1]) <= PATH_RTOL * np.abs(vals["points"]).max()
    # adjointness of the points path: <K M, y> = <M, K* y>
    assert abs(vals["points"] @ y - np.vdot(M, sums["points"])) <= PATH_RTOL * np.abs(vals["points"]) @ np.abs(y)


@pytest.mark.parametrize("seed", [0, 1])
def test_paths_agree_on_factors_rank_one_rows_and_gram(seed):
    g = _geometry(seed=seed)
    rng = np.random.default_rng(10 + seed)
    L = rng.standard_normal((3, g.d))
    assert _rel(g.values_factor(L, path="differences"), g.values_factor(L, path="points")) <= PATH_RTOL
    assert _rel(g.values_factor(L, path="points"), g.values(L.T @ L, path="differences")) <= PATH_RTOL
    V = rng.standard_normal((g.d, 4))
    assert _rel(g.values_rank_one(V, path="differences"), g.values_rank_one(V, path="points")) <= PATH_RTOL
    rows = rng.choice(g.m, 150, replace=False)
    c = rng.standard_normal(rows.size)
    assert _rel(g.weighted_sum(c, rows, path="differences"), g.weighted_sum(c, rows, path="points")) <= PATH_RTOL
    table = g.pair_table()[0]
    M = L.T @ L
    assert _rel(table.squared_distances(M, gram=True), table.squared_distances(M, gram=False)) <= PATH_RTOL
    F = table.Xc @ L.T
    assert _rel(table.factor_distances(F, gram=True), table.factor_distances(F, gram=False)) <= PATH_RTOL


def test_pair_table_lists_each_pair_once():
    g = _geometry()
    table, pu, pv = g.pair_table()
    keys = np.stack([table.pa, table.pb], axis=1)
    assert np.all(table.pa < table.pb) and len(np.unique(keys, axis=0)) == table.P
    # degenerate halves point at the zero slot P
    assert np.all(pu[np.setdiff1d(np.arange(g.m), g.u_rows)] == table.P)
    assert np.all(pv[np.setdiff1d(np.arange(g.m), g.v_rows)] == table.P)


def test_cost_model_choice():
    """Many constraints on few points: the shared-point path; a handful of long rows: differences."""
    costs = operator_costs(n_points=2000, n_pairs=2_000_000, n_rows=1_000_000, n_halves=2_000_000, d=50)
    assert costs["points"][0] < costs["differences"][0] and costs["points"][1] < costs["differences"][1]
    costs = operator_costs(n_points=2000, n_pairs=1000, n_rows=500, n_halves=1000, d=1000)
    assert costs["points"][0] > costs["differences"][0] and costs["points"][1] > costs["differences"][1]
    g = _geometry()
    with pytest.raises(ValueError, match="path"):
        g.values(np.eye(g.d), path="dense")
    # the choice does not depend on whether the pair table exists
    before = g.operator_path("K"), g.operator_path("Kt")
    g.pair_table()
    assert (g.operator_path("K"), g.operator_path("Kt")) == before


def test_extended_geometry_rebuilds_its_pairs():
    g = _geometry(seed=0)
    g.pair_table()
    extra = ConstraintSet.from_quadruplets([[4, 5, 6, 7], [8, 9, 10, 11]])
    big = g.extended(extra)
    rng = np.random.default_rng(0)
    M = rng.standard_normal((g.d, g.d))
    M = M + M.T
    assert _rel(big.values(M, path="differences"), big.values(M, path="points")) <= PATH_RTOL
    assert big.pair_table()[0].P >= g.pair_table()[0].P


def test_permuted_geometry_shares_the_pair_table_and_moves_the_rows():
    """Row i of the permuted geometry is row order[i]: values, weighted sums and row norms are the
    original's permuted (the degenerate halves included), on the original's pair table; the pair
    order sorts the rows by the pair of their u half; a non-permutation is a ValueError."""
    g = _geometry(seed=1)
    table, pu, _ = g.pair_table()
    order = g.pair_order()
    assert np.all(np.diff(pu[order]) >= 0)
    p = g.permuted(order)
    assert p.pair_table()[0] is table
    rng = np.random.default_rng(0)
    M = rng.standard_normal((g.d, g.d))
    M = M + M.T
    y = rng.random(g.m)
    np.testing.assert_allclose(p.values(M, path="points"), g.values(M, path="points")[order], rtol=0, atol=0)
    np.testing.assert_allclose(p.values(M, path="differences"), g.values(M, path="differences")[order],
                               rtol=1e-13, atol=1e-12)
    assert _rel(g.weighted_sum(y), p.weighted_sum(y[order])) <= PATH_RTOL
    np.testing.assert_allclose(p.frobenius_norms(), g.frobenius_norms()[order], rtol=1e-13)
    for bad in (order[:-1], np.r_[order[:-1], order[0]], order + 1, order.astype(float)):
        with pytest.raises(ValueError, match="permutation"):
            g.permuted(bad)


@pytest.mark.parametrize("seed", [0, 1])
def test_dense_laplacian_rank_one_rows_and_row_norms_agree(seed):
    """The dense Laplacian form of K* (rewritten in place between calls), values_rank_one over a
    subset of rows on both paths, and the Frobenius norms of the rows, against direct forms."""
    g = _geometry(seed=seed)
    rng = np.random.default_rng(20 + seed)
    table, pu, pv = g.pair_table()
    for _ in range(2):    # the second call overwrites the stored pattern
        w = rng.standard_normal(table.P)
        assert _rel(table.laplacian_form(w, dense=False), table.laplacian_form(w, dense=True)) <= PATH_RTOL
    V = rng.standard_normal((g.d, 5))
    rows = rng.choice(g.m, 97, replace=False)
    full = g.values_rank_one(V, path="differences")
    for p in OPERATOR_PATHS:
        assert _rel(full[rows], g.values_rank_one(V, rows, path=p)) <= PATH_RTOL
        blocks = [(sl, b.copy()) for sl, b in g.rank_one_blocks(V, rows, path=p, chunk=10)]
        assert len(blocks) == 10 and _rel(full[rows], np.concatenate([b for _, b in blocks])) <= PATH_RTOL
    idx = g.constraints.idx
    X = g.X
    direct = [np.linalg.norm(np.outer(X[i] - X[j], X[i] - X[j]) - np.outer(X[k] - X[l], X[k] - X[l]))
              for i, j, k, l in idx]
    assert _rel(np.asarray(direct), g.frobenius_norms()) <= PATH_RTOL


def test_cost_model_takes_the_dense_laplacian_when_pairs_fill_the_matrix():
    dense = operator_costs(n_points=2000, n_pairs=2_000_000, n_rows=1_000_000, n_halves=2_000_000, d=50)
    assert dense["dense"]
    sparse = operator_costs(n_points=8000, n_pairs=20_000, n_rows=10_000, n_halves=20_000, d=50)
    assert not sparse["dense"]
    # a temporary table of a subset of rows never keeps an n x n matrix
    assert not operator_costs(n_points=2000, n_pairs=2_000_000, n_rows=1_000_000, n_halves=2_000_000, d=50,
                              build=True)["dense"]


def test_a_sum_over_rows_reads_the_pairs_of_the_table_of_all_rows(monkeypatch):
    """Where the full K* runs on the points path, K* over a subset of rows takes those rows' pairs
    in the cached table of all rows (PairTable.pairs_form) and equals the difference-vector sum."""
    rng = np.random.default_rng(4)
    X = rng.random((60, 20))
    idx = rng.integers(0, 60, size=(20_000, 4))
    idx = idx[(idx[:, 0] != idx[:, 1]) & (idx[:, 2] != idx[:, 3])]
    geom = QuadrupletGeometry(X, ConstraintSet.from_quadruplets(idx))
    assert geom.operator_path("Kt")[0] == "points"
    rows = np.sort(rng.choice(geom.m, 3000, replace=False))
    coef = rng.standard_normal(rows.size)
    geom.pair_table()

    def no_new_table(*args, **kwargs):
        raise AssertionError("a pair table was built for the subset")

    monkeypatch.setattr("cvxmetric.hinge.PairTable", no_new_table)
    via_pairs = geom.weighted_sum(coef, rows=rows, path="points")
    assert _rel(via_pairs, geom.weighted_sum(coef, rows=rows, path="differences")) <= PATH_RTOL


def test_kept_pair_weights_equal_the_counted_ones(monkeypatch):
    """Above KEPT_ARRAY_MIN the pair weights are accumulated into a kept array (np.add.at): the
    same weights, products and values as np.bincount's, call after call."""
    import cvxmetric.hinge as hinge

    rng = np.random.default_rng(5)
    X = rng.random((50, 6))
    idx = rng.integers(0, 50, size=(3000, 4))
    idx = idx[(idx[:, 0] != idx[:, 1]) & (idx[:, 2] != idx[:, 3])]
    geom = QuadrupletGeometry(X, ConstraintSet.from_quadruplets(idx))
    table, pu, pv = geom.pair_table()
    coefs = [rng.standard_normal(geom.m) for _ in range(2)]
    counted = [table.pair_weights(pu, pv, c).copy() for c in coefs]
    sums = [geom.weighted_sum(c, path="points") for c in coefs]
    monkeypatch.setattr(hinge, "KEPT_ARRAY_MIN", 1)
    for c, w, G in zip(coefs, counted, sums):
        assert _rel(table.pair_weights(pu, pv, c), w) <= PATH_RTOL
        assert _rel(geom.weighted_sum(c, path="points"), G) <= PATH_RTOL
    M = rng.standard_normal((6, 6))
    M = M @ M.T
    assert _rel(geom.values(M, path="points"), geom.values(M, path="differences")) <= PATH_RTOL
    assert _rel(geom.values(M, path="points"), geom.values(M, path="points")) == 0.0


#: Row norms from Gram entries keep a relative error below 1e-6 by construction (GRAM_CANCELLATION);
#: on these small instances they agree to about 1e-13 per row.
GRAM_NORM_RTOL = 1e-9


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_row_norms_through_the_gram_entries_equal_the_difference_vector_definition(offset):
    """||A_c||_F from the points' Gram matrix, row by row, against ||u u^T - v v^T||_F of the
    difference vectors: quadruplets, pairs (a degenerate half), a row with both halves on one pair
    (A = 0) and a near-duplicate pair whose Gram entries cancel (recomputed from its vectors)."""
    base = _geometry(seed=4)
    X = base.X.copy()
    X[5] = X[4] + 1e-7 * np.arange(X.shape[1])   # ||x_4 - x_5||^2 ~ 1e-11 of ||x_4||^2
    cons = base.constraints + ConstraintSet.from_quadruplets([[4, 5, 6, 7], [4, 5, 5, 4]])
    g = QuadrupletGeometry(X + offset, cons)
    X_before = g.X.copy()
    direct = np.array([np.linalg.norm(np.outer(g.X[i] - g.X[j], g.X[i] - g.X[j])
                                      - np.outer(g.X[k] - g.X[l], g.X[k] - g.X[l])) for i, j, k, l in cons.idx])
    g.points_gram()
    got = g.frobenius_norms()
    np.testing.assert_array_equal(g.X, X_before)
    assert got[-1] == 0.0 and got[-2] > 0.0
    np.testing.assert_array_less(np.abs(got - direct), GRAM_NORM_RTOL * direct + 1e-300 + (direct == 0))
    fresh = QuadrupletGeometry(X + offset, cons)   # the gathered route (no Gram matrix formed)
    assert fresh._gram is None
    np.testing.assert_allclose(fresh.frobenius_norms(), got, rtol=GRAM_NORM_RTOL, atol=0.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_pair_table_passes_against_their_definitions(seed):
    """Pair distances through M and through a factor (Gram and gather forms) and the Laplacian form
    on both paths equal their direct definitions, with points that start no pair (empty runs of the
    first endpoints)."""
    g = _geometry(seed=seed)
    table = g.pair_table()[0]
    rng = np.random.default_rng(40 + seed)
    D = table.Xc[table.pa] - table.Xc[table.pb]
    L = rng.standard_normal((g.d, 4))
    M = L @ L.T
    direct = np.einsum("ij,jk,ik->i", D, M, D)
    for gram in (True, False):
        assert _rel(direct, table.squared_distances(M, gram)) <= PATH_RTOL
        assert _rel(direct, table.factor_distances(table.Xc @ L, gram)) <= PATH_RTOL
    assert np.any(np.bincount(table.pa, minlength=table.n) == 0)
    w = rng.standard_normal(table.P)
    direct = (D * w[:, None]).T @ D
    for dense in (True, False):
        assert _rel(direct, table.laplacian_form(w, dense=dense)) <= PATH_RTOL
