"""ITML and MMC across the data scales ``as_data_matrix`` accepts (2^-130..2^130).

Both are exactly invariant under X -> sX: ITML with its default bounds (which scale by s^2) keeps
the same M, ITML with a prior scaled by 1/s^2 and fixed bounds gives M / s^2, and MMC gives
M / s^2. At every scale the facades and the estimators must return the same certified answer,
mapped back, in about as many iterations; bad input gets a ValueError that names what the user
passed.
"""
import math
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine

from cvxmetric.constraints import ConstraintSet
from cvxmetric.estimators import ITML, MMC, ITML_Supervised, MMC_Supervised
from cvxmetric.estimators._supervision import label_pairs
from cvxmetric.itml import ITMLModel
from cvxmetric.solvers import solve_itml, solve_mmc
from cvxmetric.solvers.itml import DEFAULT_TOL as ITML_TOL
from cvxmetric.solvers.mmc import DEFAULT_TOL as MMC_TOL

SCALES = [1e-38, 1e-30, 1e-10, 1e10, 1e30, 1e38]
#: Iteration counts of a scaled problem may differ from the unscaled one by at most this factor.
ITERATION_RATIO = 1.5
#: Two answers certified to a relative gap tol lie within about sqrt(tol) of each other in M
#: (the objective grows quadratically away from the optimum); measured: 4e-14 here.
ITML_M_RTOL = math.sqrt(ITML_TOL)
MMC_M_RTOL = math.sqrt(MMC_TOL)


def _standardized(loader):
    X, y = loader(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


@pytest.fixture(scope="module", params=["iris", "wine"])
def data(request):
    X, y = _standardized({"iris": load_iris, "wine": load_wine}[request.param])
    S, D = label_pairs(y, None, 0)
    mmc_pairs = (ConstraintSet.from_pairs(S, similar=True, bound=0.0)
                 + ConstraintSet.from_pairs(D, similar=False, bound=0.0, weight=1.0 / len(D)))
    return X, y, S, D, mmc_pairs


def _relative(A, B) -> float:
    return float(np.linalg.norm(A - B) / np.linalg.norm(B))


def _same_run(res, ref, M_scaled, rtol: float, tol: float) -> None:
    assert res.converged and res.certified_gap <= tol
    assert _relative(M_scaled, ref.M) <= rtol
    assert abs(res.objective - ref.objective) <= 2 * tol * abs(ref.objective)
    assert ref.n_iter / ITERATION_RATIO <= res.n_iter <= ITERATION_RATIO * ref.n_iter


@pytest.mark.parametrize("s", SCALES)
def test_itml_facade_default_bounds_same_answer(data, s):
    X, _, S, D, _ = data
    ref, res = solve_itml(X, S, D), solve_itml(X * s, S, D)
    _same_run(res, ref, res.M, ITML_M_RTOL, ITML_TOL)


@pytest.mark.parametrize("s", SCALES)
def test_itml_facade_prior_over_s2_gives_M_over_s2(data, s):
    X, _, S, D, _ = data
    eye = np.eye(X.shape[1])
    ref = solve_itml(X, S, D, u=0.5, l=8.0)
    res = solve_itml(X * s, S, D, u=0.5, l=8.0, prior=eye / s**2)
    _same_run(res, ref, res.M * s**2, ITML_M_RTOL, ITML_TOL)


@pytest.mark.parametrize("s", SCALES)
def test_mmc_facade_gives_M_over_s2(data, s):
    X, _, _, _, pairs = data
    ref = solve_mmc(X, pairs)
    res = solve_mmc(X * s, pairs)
    _same_run(res, ref, res.M * s**2, MMC_M_RTOL, MMC_TOL)


@pytest.mark.parametrize("s", [1e-30, 1e30])
def test_estimators_with_defaults_same_answer(data, s):
    X, y, _, _, _ = data
    itml = [ITML_Supervised(random_state=0).fit(Z, y) for Z in (X, X * s)]
    mmc = [MMC_Supervised(random_state=0).fit(Z, y) for Z in (X, X * s)]
    _same_run(itml[1].result_, itml[0].result_, itml[1].get_mahalanobis_matrix(), ITML_M_RTOL, ITML_TOL)
    np.testing.assert_allclose(itml[1].bounds_, itml[0].bounds_ * s**2, rtol=1e-12)
    _same_run(mmc[1].result_, mmc[0].result_, mmc[1].get_mahalanobis_matrix() * s**2, MMC_M_RTOL, MMC_TOL)


@pytest.mark.parametrize("k", [-129, -100, 100, 129])
def test_power_of_two_scales_give_the_identical_run(data, k):
    """X * 2^k: the solvers' power-of-two normalization makes the run bit for bit the same."""
    X, _, S, D, pairs = data
    s = 2.0 ** k / np.abs(X).max() if k > 0 else 2.0 ** k / np.ptp(X, axis=0).max()
    s = 2.0 ** math.floor(math.log2(s))   # a power of two, keeping X * s inside 2^-130..2^130
    for run, power in ((lambda Z: solve_itml(Z, S, D), 0), (lambda Z: solve_mmc(Z, pairs), 2)):
        ref, res = run(X), run(X * s)
        assert res.converged and res.n_iter == ref.n_iter
        np.testing.assert_array_equal(res.M * s**power, ref.M)


def test_itml_run_with_bounds_far_from_the_prior_ends_without_internal_errors():
    """A prior 1/var(X) with Euclidean default bounds at X * 4e38: bounds ~1e154 times the whitened
    lengths. The rank-one updates lose positive definiteness to round-off (a distance of exactly 0
    on iris); the run must still end, its verdict read from its certificate."""
    X, y = _standardized(load_iris)
    S, D = label_pairs(y, None, 0)
    Z = X * (2.0 ** 129.9 / np.abs(X).max())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve_itml(Z, S, D, prior=np.eye(X.shape[1]) / np.var(Z))
    assert np.all(np.isfinite(res.M)) and res.converged == (res.certified_gap <= ITML_TOL)


# ------------------------------------------------------------------ messages name what was passed
@pytest.fixture(scope="module")
def iris_pairs():
    X, y = _standardized(load_iris)
    S, D = label_pairs(y, None, 0)
    P = np.concatenate([S, D])
    return X, y, S, D, X[P], np.r_[np.ones(len(S)), -np.ones(len(D))]


@pytest.mark.parametrize("bounds", [(0, 1), (2, 1), (np.nan, 1), (-1, 1), (1, 2, 3)])
def test_estimator_bounds_are_named_as_bounds(iris_pairs, bounds):
    X, y, _, _, pairs, labels = iris_pairs
    for fit in (lambda: ITML().fit(pairs, labels, bounds=bounds), lambda: ITML_Supervised().fit(X, y, bounds=bounds)):
        with pytest.raises(ValueError, match=r"^bounds must") as info:
            fit()
        assert "bound contains" not in str(info.value) and "u must" not in str(info.value)


def test_equal_default_bounds_name_the_pairs_not_u_and_l():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    pairs, labels = X[np.array([[0, 1], [0, 2]])], [1, -1]
    for fit in (lambda: solve_itml(X, [[0, 1]], [[0, 2]]), lambda: ITML().fit(pairs, labels)):
        with pytest.raises(ValueError, match=r"default bounds .* squared lengths of the 2 given pairs") as info:
            fit()
        assert "got u=" not in str(info.value)


def test_one_bound_passed_is_the_one_named(iris_pairs):
    X, _, S, D, _, _ = iris_pairs
    with pytest.raises(ValueError, match=r"^u=1000 must be below l, and it is not below the default l"):
        solve_itml(X, S, D, u=1e3)
    with pytest.raises(ValueError, match=r"^l=0.001 must be above u, and it is not above the default u"):
        solve_itml(X, S, D, l=1e-3)


def test_unrepresentable_scales_name_the_prior_or_the_bound(iris_pairs):
    X, y, S, D, _, _ = iris_pairs
    eye = np.eye(X.shape[1])
    with pytest.raises(ValueError, match=r"^prior makes the squared lengths .* default bounds"):
        solve_itml(X, S, D, prior=1e-300 * eye)
    with pytest.raises(ValueError, match=r"^prior makes the squared lengths .* default bounds"):
        ITML_Supervised(prior=1e-300 * eye, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"^prior gives the pairs of X squared lengths near 1e-326"):
        solve_itml(X * 1e-38, S, D, prior=1e-250 * eye)
    with pytest.raises(ValueError, match=r"^the bound u=1e-300 is about 1e-376 times"):
        solve_itml(X * 1e38, S, D, u=1e-300, l=1.0)


def test_scaled_twin_is_exact(iris_pairs):
    X, _, S, D, _, _ = iris_pairs
    model = ITMLModel(X * 1e30, S, D, prior=np.diag([1.0, 2.0, 3.0, 4.0]))
    twin, sigma = model.scaled_twin()
    np.testing.assert_array_equal(twin.W * sigma, model.W)
    np.testing.assert_array_equal(twin.xi0 * sigma**2, model.xi0)
    assert model.given == {"prior"} and twin.d == model.d and twin.m == model.m


def test_pairs_of_identical_points_are_dropped_with_a_warning_naming_them(iris_pairs):
    """metric-learn accepts a pair of identical points: a similar one constrains nothing, a
    dissimilar one no metric can satisfy; both are dropped with a warning naming the first."""
    *_, pairs, labels = iris_pairs
    j = int(np.argmax(labels == -1))
    for k, kind in ((3, "similar"), (j, "dissimilar")):
        bad = pairs.copy()
        bad[k, 1] = bad[k, 0]
        for learner in (ITML(), MMC()):
            with pytest.warns(UserWarning, match=rf"^1 of the \d+ pairs join two identical points: \w+ drops them "
                                                 rf"\(the first: pairs\[{k}\], {kind}\)"):
                fit = learner.fit(bad, labels)
            assert fit.problem_.constraints.idx.shape[0] == len(pairs) - 1 and fit.certificate_.certified
