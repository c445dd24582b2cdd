"""LMNN at scale: the data generator, the chunked impostor search against a dense one, the coarse start,
and the full-triplet-set certificate against the cvxpy ground truth."""
import numpy as np
import pytest

from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.formulations.lmnn import build_lmnn
from cvxmetric.generators import NO_TARGET, gaussian_classes
from cvxmetric.lmnn import ImpostorSearch
from cvxmetric.linalg import psd_factor, random_psd
from cvxmetric.solvers import lmnn as lmnn_solvers
from cvxmetric.solvers.lmnn import coarse_start, solve_lmnn, stratified_subsample
from cvxmetric.verification.tolerances import VALUE_AT_RTOL


def test_gaussian_classes_is_seeded_balanced_and_checked():
    X, y = gaussian_classes(103, 12, 10, seed=3)
    X2, y2 = gaussian_classes(103, 12, 10, seed=np.random.default_rng(3))
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert X.shape == (103, 12) and set(np.unique(y)) == set(range(10))
    assert np.ptp(np.bincount(y)) <= 1
    assert not np.array_equal(X, gaussian_classes(103, 12, 10, seed=4)[0])
    with pytest.raises(ValueError, match="n_informative"):
        gaussian_classes(100, 5, n_informative=6)
    with pytest.raises(ValueError, match="separation"):
        gaussian_classes(100, 20, separation=0.0)
    with pytest.raises(TypeError, match="n_classes"):
        gaussian_classes(100, 20, 2.0)
    with pytest.raises(ValueError, match="n must be"):
        gaussian_classes(5, 20, 10)


def test_gaussian_classes_have_impostors():
    """Some point's Euclidean nearest neighbour lies in another class (LMNN has work to do)."""
    X, y = gaussian_classes(200, 20, seed=0)
    search = ImpostorSearch(X, y, 3)
    assert search.violated(np.eye(20)).shape[0] > 0


def _dense_violated(X, y, targets, L, margin):
    """Every violated triplet and its margin from the full n x n matrix of exact squared distances."""
    Z = X @ L.T
    D = np.sum((Z[:, None, :] - Z[None, :, :]) ** 2, axis=2)
    rows, margins = [], []
    for i in range(len(y)):
        for j in targets[i][targets[i] != NO_TARGET]:
            marg = margin + D[i, j] - D[i]
            hit = np.flatnonzero((y != y[i]) & (marg > 0))
            rows += [(i, j, l) for l in hit]
            margins += list(marg[hit])
    return np.array(rows, dtype=np.int64).reshape(-1, 3), np.array(margins)


@pytest.mark.parametrize("chunk_elements", [7, 1000, 2 ** 22])
@pytest.mark.parametrize("seed", [0, 1])
def test_chunked_search_equals_dense_search(seed, chunk_elements):
    """On small data the chunked, class-blocked search lists exactly the triplets the dense
    all-pairs matrix shows violated (same order, same margins), for low-rank and full factors."""
    X, y = gaussian_classes(90, 6, 4, n_informative=3, seed=seed)
    search = ImpostorSearch(X, y, 3, margin=1.0, chunk_elements=chunk_elements)
    rng = np.random.default_rng(seed)
    for rank in (1, 3, 6):
        L = psd_factor(random_psd(6, rank=rank, seed=rng, scale=0.3))
        codes, marg = search.violated_codes(L, return_margins=True)
        dense, dense_marg = _dense_violated(X, y, search.targets, L, 1.0)
        assert dense.shape[0] > 0
        np.testing.assert_array_equal(search.decode(codes), dense)
        np.testing.assert_allclose(marg, dense_marg, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("offset, scales", [(1e6, [1.0, 1.0, 1.0]), (0.0, [1e-4, 1.0, 1e4]), (1e3, [1e-3, 1.0, 1e3])])
def test_single_precision_block_loses_no_triplet(offset, scales):
    """Far from the origin and at mixed feature scales (where float32 products of the raw points
    would cancel), the search still equals the exact dense enumeration."""
    rng = np.random.default_rng(11)
    y = np.repeat(np.arange(3), 15)
    X = offset + (rng.standard_normal((45, 3)) + 0.7 * y[:, None]) * np.array(scales)
    search = ImpostorSearch(X, y, 2, margin=1.0)
    for M in (np.diag(1.0 / np.array(scales) ** 2), np.eye(3) / max(scales) ** 2):
        L = psd_factor(M)
        codes, marg = search.violated_codes(L, return_margins=True)
        dense, dense_marg = _dense_violated(X, y, search.targets, L, 1.0)
        np.testing.assert_array_equal(search.decode(codes), dense)
        np.testing.assert_allclose(marg, dense_marg, rtol=1e-8, atol=1e-8)


def test_stratified_subsample_keeps_every_class():
    y = np.array([0] * 9 + [1] * 2 + [2])
    sub = stratified_subsample(y, 4)
    np.testing.assert_array_equal(sub, [0, 4, 8, 9, 11])
    np.testing.assert_array_equal(stratified_subsample(y, 1), np.arange(12))


@pytest.fixture
def small_coarse(monkeypatch):
    """The coarse-start rule at a size cvxpy solves: levels above 40 points start from a subsample."""
    monkeypatch.setattr(lmnn_solvers, "COARSE_MIN_POINTS", 40)
    monkeypatch.setattr(lmnn_solvers, "COARSE_FACTOR", 2)


def test_coarse_start_is_the_subsample_solution(small_coarse):
    X, y = gaussian_classes(120, 4, 3, n_informative=2, seed=5)
    M0 = coarse_start(X, y, 3)
    sub = stratified_subsample(y, 2)
    inner = coarse_start(X[sub], y[sub], 3)   # 60 points: itself started from 30
    ref = solve_lmnn(X[sub], y[sub], 3, method="pdhg", M0=inner, tol=lmnn_solvers.COARSE_TOL,
                     residual_tol=lmnn_solvers.COARSE_TOL)
    np.testing.assert_allclose(M0, ref.M, rtol=1e-12, atol=1e-12)
    assert np.linalg.eigvalsh(M0).min() >= -1e-10 * np.abs(M0).max()


@pytest.mark.parametrize("seed", [0, 1])
def test_full_set_certificate_brackets_the_cvxpy_optimum(small_coarse, seed):
    """Certified on the implicit triplet set from the coarse start: the lower bound is below the
    ground truth's optimum and the objective (over every triplet) above it, within the gap."""
    X, y = gaussian_classes(80, 3, 3, n_informative=2, seed=seed)
    res = solve_lmnn(X, y, 3, method="pdhg", tol=1e-3, residual_tol=1e-3)
    assert res.converged and res.certified_gap <= 1e-3
    assert res.info["start"] == "coarse_start" and res.info["start_seconds"] > 0
    form = build_lmnn(X, y, n_neighbors=3, regularization=0.5, margin=1.0)
    truth = solve_certified(form, 1e-6)
    assert truth.rung is not None
    lower, upper = truth.bounds.lower, truth.bounds.upper
    scale = max(1.0, upper)
    assert res.lower_bound <= upper + VALUE_AT_RTOL * scale   # a valid bound of the full problem
    assert res.objective >= lower - VALUE_AT_RTOL * scale
    assert abs(form.value_at(res.M) - res.objective) <= VALUE_AT_RTOL * scale   # the objective is over every triplet


def test_default_start_below_the_coarse_size_is_unchanged(monkeypatch):
    """At most COARSE_MIN_POINTS points the default start is lmnn_start (no subsample solve)."""
    X, y = gaussian_classes(60, 3, 3, n_informative=2, seed=2)
    called = []
    monkeypatch.setattr(lmnn_solvers, "coarse_start", lambda *a, **k: called.append(1))
    with pytest.warns(ConvergenceWarning):
        res = solve_lmnn(X, y, 3, method="pdhg", max_iter=16)
    assert not called and res.info["start"] == "lmnn_start"
    with pytest.warns(ConvergenceWarning):
        assert solve_lmnn(X, y, 3, method="pdhg", max_iter=16, M0=np.eye(3)).info["start"] == "given"


def test_target_selection_breaks_ties_by_index_like_a_stable_sort():
    """The partial selection behind target_neighbors equals a stable full sort, ties included."""
    from cvxmetric.generators import _nearest_first
    rng = np.random.default_rng(0)
    for _ in range(100):
        D = rng.integers(0, 4, size=(7, 9)).astype(float)   # many ties
        k = int(rng.integers(1, 9))
        np.testing.assert_array_equal(_nearest_first(D, k), np.argsort(D, axis=1, kind="stable")[:, :k])


def test_subgradient_method_takes_the_coarse_start_too(small_coarse):
    X, y = gaussian_classes(80, 3, 3, n_informative=2, seed=3)
    res = solve_lmnn(X, y, 3, method="subgradient", tol=1e-2)
    assert res.info["start"] == "coarse_start" and res.converged


def test_a_start_direction_enters_at_the_smallest_level(small_coarse):
    """coarse_start's direction starts its smallest level (lmnn_start of it); above it every level
    starts from the one below, as without a direction."""
    from cvxmetric.lmnn import lmnn_start
    X, y = gaussian_classes(120, 4, 3, n_informative=2, seed=5)
    D = np.diag([1.0, 0.0, 0.0, 1.0])    # low rank, as an LDA map's
    sub = stratified_subsample(y, 2)                 # 60 points
    base = stratified_subsample(y[sub], 2)           # 30 points: the smallest level
    Xb, yb = X[sub][base], y[sub][base]
    np.testing.assert_allclose(coarse_start(Xb, yb, 3, direction=D),
                               lmnn_start(Xb, ImpostorSearch(Xb, yb, 3).target_pairs, 1.0, direction=D))
    inner = coarse_start(X[sub], y[sub], 3, direction=D)
    ref = solve_lmnn(X[sub], y[sub], 3, method="pdhg", M0=inner, tol=lmnn_solvers.COARSE_TOL,
                     residual_tol=lmnn_solvers.COARSE_TOL)
    np.testing.assert_allclose(coarse_start(X, y, 3, direction=D), ref.M, rtol=1e-12, atol=1e-12)
    res = solve_lmnn(X, y, 3, method="pdhg", tol=1e-3, residual_tol=1e-3, start_direction=D)
    assert res.info["start"] == "coarse_start" and res.converged


def test_start_direction_and_m0_exclude_each_other():
    X, y = gaussian_classes(60, 3, 3, n_informative=2, seed=2)
    with pytest.raises(ValueError, match="M0 .* or start_direction"):
        solve_lmnn(X, y, 3, M0=np.eye(3), start_direction=np.eye(3))
    with pytest.raises(ValueError, match="start_direction"):
        solve_lmnn(X, y, 3, start_direction=-np.eye(3))
