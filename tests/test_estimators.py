"""The scikit-learn estimators (cvxmetric.estimators): scikit-learn's estimator checks, pipelines,
certificates of the fast and the exact solvers, verify(), and metric-learn's input conventions."""
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from cvxmetric import (ITML, LMNN, MMC, ORML, BoostMetric, ITML_Supervised, MMC_Supervised, Qwise,
                       Qwise_Supervised)
from cvxmetric.certificates import relative_difference
from cvxmetric.datasets import load_dataset
from cvxmetric.orml import simulate_log_sessions

#: Objectives of the default fast solver and of solver="cvxpy" agree to the harness' first-order gap.
AGREEMENT_RTOL = 1e-3


# ------------------------------------------------------------------ scikit-learn's estimator checks
# every learner from points (the learners from tuples take tuples, which these checks do not
# make; metric-learn's suite checks them: python -m benchmarks.metric_learn_suite); small constraint counts keep every fit of the checks' tiny data sets in milliseconds; LMNN keeps
# its default n_neighbors = 3, which check_fit2d_1feature meets with a class of exactly 3 points
@parametrize_with_checks([LMNN(), ITML_Supervised(n_constraints=20, random_state=0),
                          MMC_Supervised(n_constraints=20, random_state=0),
                          MMC_Supervised(n_constraints=20, diagonal=True, random_state=0),
                          Qwise_Supervised(n_constraints=20, random_state=0), BoostMetric()])
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # ConvergenceWarning on the checks' degenerate data is a report
        check(estimator)


# ------------------------------------------------------------------ data
@pytest.fixture(scope="module")
def iris():
    return load_dataset("iris")


@pytest.fixture(scope="module")
def small(iris):
    X, y = iris
    return X[::3], y[::3]


def _pairs(X, y, m, seed):
    rng = np.random.default_rng(seed)
    P = rng.integers(0, len(X), (3 * m, 2))
    P = P[(P[:, 0] != P[:, 1]) & np.any(X[P[:, 0]] != X[P[:, 1]], axis=1)]
    sim = y[P[:, 0]] == y[P[:, 1]]
    P = np.vstack([P[sim][: m // 2], P[~sim][: m // 2]])
    return P, np.where(y[P[:, 0]] == y[P[:, 1]], 1, -1)


def _quadruplets(y, m, seed):
    rng = np.random.default_rng(seed)
    n = len(y)
    out = []
    while len(out) < m:
        a, b, c, d = rng.integers(0, n, 4)
        if a != b and c != d and y[a] == y[b] and y[c] != y[d]:
            out.append((a, b, c, d))
    return np.array(out)


def _sessions(X, y):
    return simulate_log_sessions(X, y, 8, 6, noise=0.1, seed=0)


# (name, make estimator, fit arguments as (data, labels) -> args) for every estimator
def _fit_args(name, X, y):
    if name in ("ITML", "MMC"):
        P, yp = _pairs(X, y, 60, seed=1)
        return (X[P], yp)
    if name == "Qwise":
        return (X[_quadruplets(y, 80, seed=2)],)
    if name == "Qwise-fantope":
        return (X[_quadruplets(y, 80, seed=2)],)
    if name == "ORML":
        P, rel, _ = _sessions(X, y)
        return (X[P], np.where(rel, 1, -1))
    return (X, y)


ESTIMATORS = {
    "LMNN": lambda **kw: LMNN(n_neighbors=2, **kw),
    "ITML": lambda **kw: ITML(random_state=0, **kw),
    "ITML_Supervised": lambda **kw: ITML_Supervised(n_constraints=40, random_state=0, **kw),
    "MMC": lambda **kw: MMC(**kw),
    "MMC_Supervised": lambda **kw: MMC_Supervised(n_constraints=40, random_state=0, **kw),
    "Qwise": lambda **kw: Qwise(**kw),
    "Qwise-fantope": lambda **kw: Qwise(regularizer="fantope", rank=2, trace_weight=0.1, **kw),
    "Qwise_Supervised": lambda **kw: Qwise_Supervised(n_constraints=40, random_state=0, **kw),
    "BoostMetric": lambda **kw: BoostMetric(**kw),
    "BoostMetric-hinge": lambda **kw: BoostMetric(loss="hinge", **kw),
    "ORML": lambda **kw: ORML(n_components=3, **kw),
}


@pytest.fixture(scope="module")
def fitted(small):
    """Every estimator fitted with its default fast solver and with solver="cvxpy"."""
    X, y = small
    out = {}
    for name, make in ESTIMATORS.items():
        args = _fit_args(name, X, y)
        out[name] = (make().fit(*args), make(solver="cvxpy").fit(*args))
    return out


@pytest.mark.parametrize("name", ESTIMATORS)
def test_default_and_exact_solvers_are_certified_and_agree(fitted, name):
    fast, exact = fitted[name]
    for est in (fast, exact):
        cert = est.certificate_
        assert cert.certified, cert.message
        assert cert.value <= cert.tol
        assert est.result_.converged and cert.solver == est.result_.solver
    assert exact.solver_ == "cvxpy" and fast.solver_ != "cvxpy"
    assert exact.result_.measure == ("kkt_residual" if name == "Qwise-fantope" else "certified_gap")
    if exact.result_.lower_bound is not None:
        assert exact.result_.lower_bound <= exact.result_.objective
    assert abs(relative_difference(fast.certificate_.objective, exact.certificate_.objective)) <= AGREEMENT_RTOL


@pytest.mark.parametrize("name", ESTIMATORS)
def test_verify_passes_for_the_default_solver(fitted, name):
    fast, _ = fitted[name]
    row = fast.verify()
    failed = {k: v for k, v in row["checks"].items() if not v["passed"]}
    assert row["passed"], (failed, row["errors"])
    assert row["solver"] == fast.result_.solver
    assert row["f_fast"] == pytest.approx(fast.result_.objective, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", ["LMNN", "ITML", "Qwise-fantope", "ORML"])
def test_verify_passes_for_the_exact_solver(fitted, name):
    _, exact = fitted[name]
    row = exact.verify()
    assert row["passed"], ({k: v for k, v in row["checks"].items() if not v["passed"]}, row["errors"])


def test_lmnn_with_a_class_of_exactly_n_neighbors_points(small):
    """A class of n_neighbors points (its points take the others as targets) fits, certified, and the
    default and exact solvers agree; verify() passes."""
    X, y = small
    keep = np.flatnonzero(y != 2)
    keep = np.concatenate([keep, np.flatnonzero(y == 2)[:3]])   # class 2 keeps 3 points
    Xs, ys = X[keep], y[keep]
    fast, exact = LMNN().fit(Xs, ys), LMNN(solver="cvxpy").fit(Xs, ys)
    for est in (fast, exact):
        assert est.certificate_.certified, est.certificate_.message
    assert abs(relative_difference(fast.certificate_.objective, exact.certificate_.objective)) <= AGREEMENT_RTOL
    assert fast.verify()["passed"]


def test_verify_fails_an_uncertified_fit(small):
    """verify() can fail: a fit stopped early is not converged and its gap to p* is large."""
    X, y = small
    with pytest.warns(Warning):
        est = Qwise_Supervised(n_constraints=40, random_state=0, solver="subgradient", max_iter=3).fit(X, y)
    assert not est.certificate_.certified
    row = est.verify()
    assert not row["passed"]
    assert not row["checks"]["converged"]["passed"]


# ------------------------------------------------------------------ the Mahalanobis API
@pytest.mark.parametrize("name", ESTIMATORS)
def test_transform_pair_distance_metric_and_matrix_agree(fitted, small, name):
    est, _ = fitted[name]
    X, _ = small
    rng = np.random.default_rng(3)
    P = rng.integers(0, len(X), (25, 2))
    Z = est.transform(X)
    d_embed = np.linalg.norm(Z[P[:, 0]] - Z[P[:, 1]], axis=1)
    np.testing.assert_allclose(est.pair_distance(X[P]), d_embed, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.pair_score(X[P]), -d_embed, rtol=1e-10, atol=1e-12)
    M = est.get_mahalanobis_matrix()
    diff = X[P[:, 0]] - X[P[:, 1]]
    np.testing.assert_allclose(np.einsum("ij,jk,ik->i", diff, M, diff), d_embed ** 2, rtol=1e-9, atol=1e-12)
    metric = est.get_metric()
    assert metric(X[P[0, 0]], X[P[0, 1]]) == pytest.approx(d_embed[0], rel=1e-10, abs=1e-12)
    assert metric(X[P[0, 0]], X[P[0, 1]], squared=True) == pytest.approx(d_embed[0] ** 2, rel=1e-9, abs=1e-12)


def test_metric_matrix_is_the_solvers_matrix(fitted):
    est, _ = fitted["ITML_Supervised"]
    np.testing.assert_allclose(est.get_mahalanobis_matrix(), est.result_.M, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------ tuples: points or indices + preprocessor
WEAK = ["ITML", "MMC", "Qwise", "Qwise-fantope", "ORML"]


@pytest.mark.parametrize("name", WEAK)
def test_tuples_as_points_or_indices_give_identical_results(small, name):
    X, y = small
    args = _fit_args(name, X, y)
    if name in ("ITML", "MMC"):
        idx, labels = _pairs(X, y, 60, seed=1)
        rest = (labels,)
    elif name == "ORML":
        idx, rel, _ = _sessions(X, y)
        rest = (np.where(rel, 1, -1),)
    else:
        idx = _quadruplets(y, 80, seed=2)
        rest = ()
    make = ESTIMATORS[name]
    by_points = make().fit(*args)
    by_callable = make(preprocessor=lambda i: X[i]).fit(idx, *rest)
    for other in ([by_callable] if name == "ORML" else [by_callable, make(preprocessor=X).fit(idx, *rest)]):
        np.testing.assert_array_equal(other.components_, by_points.components_)
        assert other.certificate_ == by_points.certificate_
    # the fitted estimators read tuples both ways
    kind = 4 if name.startswith("Qwise") else 2
    T = idx[:10, :kind]
    np.testing.assert_array_equal(by_callable.decision_function(T), by_points.decision_function(X[T]))
    np.testing.assert_array_equal(by_callable.transform(np.arange(5)), by_points.transform(X[:5]))


def test_orml_array_preprocessor_uses_every_point(small):
    """With an array preprocessor ORML's graph and PCA use all its points (the paper's set-up)."""
    X, y = small
    P, rel, ses = _sessions(X, y)
    est = ORML(n_components=3, preprocessor=X).fit(P, np.where(rel, 1, -1), session=ses)
    assert est.problem_.X.shape == X.shape and est.certificate_.certified
    assert est.verify()["passed"]


def test_pair_classifiers_predict_and_score(fitted, small):
    X, y = small
    est, _ = fitted["ITML"]
    P, yp = _pairs(X, y, 60, seed=1)
    pred = est.predict(X[P])
    assert set(np.unique(pred)) <= {-1, 1}
    assert np.mean(pred == yp) >= 0.8          # threshold calibrated on these pairs
    assert est.score(X[P], yp) > 0.9           # ROC AUC
    np.testing.assert_array_equal(est.decision_function(X[P]), -est.pair_distance(X[P]))
    est.set_threshold(0.0)
    assert np.all(est.predict(X[P]) == -1)


def test_quadruplet_classifier_predict_and_score(fitted, small):
    X, y = small
    est, _ = fitted["Qwise"]
    Q = X[_quadruplets(y, 80, seed=5)]
    pred = est.predict(Q)
    assert est.score(Q) == pytest.approx(float(np.mean(pred == 1)))
    assert est.score(Q) > 0.9
    np.testing.assert_allclose(est.decision_function(Q), est.pair_distance(Q[:, 2:]) - est.pair_distance(Q[:, :2]))


# ------------------------------------------------------------------ pipelines
@pytest.mark.parametrize("est, grid", [
    (LMNN(), {"est__n_neighbors": [2, 3]}),
    (ITML_Supervised(n_constraints=40, random_state=0), {"est__gamma": [0.5, 2.0]}),
    (MMC_Supervised(n_constraints=40, random_state=0), {"est__n_constraints": [30, 60]}),
    (Qwise_Supervised(n_constraints=60, random_state=0), {"est__reg_weight": [0.1, 1.0]}),
    (BoostMetric(), {"est__loss": ["logistic", "hinge"]}),
], ids=lambda v: type(v).__name__ if not isinstance(v, dict) else "")
def test_pipeline_grid_search_on_iris(iris, est, grid):
    X, y = iris
    pipe = Pipeline([("est", est), ("knn", KNeighborsClassifier(n_neighbors=3))])
    search = GridSearchCV(pipe, grid, cv=2).fit(X, y)
    assert search.best_score_ > 0.85
    assert search.best_estimator_.named_steps["est"].certificate_.certified


# ------------------------------------------------------------------ bad input
def test_unknown_solver_is_rejected(small):
    X, y = small
    with pytest.raises(ValueError, match="solver must be one of"):
        LMNN(solver="lbfgs").fit(X, y)
    with pytest.raises(ValueError, match="solver must be one of"):
        Qwise(regularizer="fantope", rank=2, solver="pdhg").fit(X[_quadruplets(y, 20, 0)])


def test_unknown_and_ignored_options_are_rejected(small):
    X, y = small
    with pytest.raises(ValueError, match="learn_rate"):
        LMNN(solver_options={"learn_rate": 1e-7}).fit(X, y)
    with pytest.raises(ValueError, match="max_iter is not used by the exact solve 'cvxpy'"):
        ITML_Supervised(solver="cvxpy", max_iter=10, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="takes no solver options"):
        MMC_Supervised(solver="cvxpy", solver_options={"whiten": False}, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="max_iter is not used"):
        ORML(max_iter=5).fit(*_fit_args("ORML", X, y))
    with pytest.raises(ValueError, match="rank applies to regularizer='fantope'"):
        Qwise_Supervised(rank=2).fit(X, y)
    with pytest.raises(ValueError, match="trace_weight applies"):
        Qwise_Supervised(trace_weight=0.1).fit(X, y)
    with pytest.raises(ValueError, match="needs rank"):
        Qwise_Supervised(regularizer="fantope").fit(X, y)
    with pytest.raises(ValueError, match="regularization must be"):
        LMNN(regularization=1.5).fit(X, y)


def test_bad_tuples_are_rejected(small):
    X, y = small
    with pytest.raises(ValueError, match="preprocessor"):
        ITML().fit(np.array([[0, 1], [2, 3]]), [1, -1])
    with pytest.raises(ValueError, match=r"Tuples of 4 element\(s\) expected by Qwise. Got tuples of 2"):
        Qwise().fit(X[:12].reshape(3, 2, 8))
    with pytest.raises(ValueError, match=r"labels \(y\) should contain only values in \[-1, 1\]"):
        MMC().fit(X[np.array([[0, 1], [2, 40]])], [1, 0])


def test_calibrated_threshold_maximises_training_accuracy(fitted, small):
    X, y = small
    est, _ = fitted["MMC"]
    P, yp = _pairs(X, y, 60, seed=1)
    dist = est.pair_distance(X[P])
    best = max(np.mean(np.where(dist <= t, 1, -1) == yp) for t in np.concatenate([[-1.0], dist]))
    assert np.mean(est.predict(X[P]) == yp) == pytest.approx(best)


def test_itml_bounds_are_squared_distance_bounds(small):
    X, y = small
    P, yp = _pairs(X, y, 60, seed=1)
    est = ITML(random_state=0).fit(X[P], yp, bounds=(0.5, 6.0))
    np.testing.assert_array_equal(est.bounds_, [0.5, 6.0])
    cons = est.problem_.constraints
    np.testing.assert_array_equal(-cons.delta[cons.is_similar], 0.5)
    np.testing.assert_array_equal(cons.delta[cons.is_dissimilar], 6.0)
    default = ITML(random_state=0).fit(X[P], yp)
    d2 = np.sum((X[P[:, 0]] - X[P[:, 1]]) ** 2, axis=1)
    np.testing.assert_allclose(default.bounds_, np.percentile(d2, [5, 95]))   # over all pairs, squared


def test_quadruplet_weights_enter_the_objective(small):
    """A zero weight drops a quadruplet: the fit equals the fit on the others."""
    X, y = small
    Q = _quadruplets(y, 80, seed=2)
    w = np.where(np.arange(len(Q)) % 2 == 0, 1.0, 0.0)
    weighted = Qwise(solver="cvxpy").fit(X[Q], weights=w)
    dropped = Qwise(solver="cvxpy").fit(X[Q[w > 0]])
    assert weighted.certificate_.objective == pytest.approx(dropped.certificate_.objective, rel=1e-5)
    full = Qwise(solver="cvxpy").fit(X[Q])
    assert full.certificate_.objective > weighted.certificate_.objective * (1 + 1e-3)


@pytest.mark.parametrize("name", WEAK)
def test_refit_on_tuples_of_another_dimension(small, name):
    """fit resets n_features_in_; afterwards tuples of another dimension are rejected."""
    X, y = small
    est = ESTIMATORS[name]().fit(*_fit_args(name, X[:, :3], y))
    assert est.n_features_in_ == 3
    est.fit(*_fit_args(name, X, y))
    assert est.n_features_in_ == 4 and est.components_.shape[1] == 4
    with pytest.raises(ValueError, match="expecting 4 features"):
        est.pair_distance(np.zeros((2, 2, 3)))


@pytest.mark.parametrize("params", [{}, {"n_components": 2}, {"init": "pca"}])
def test_lmnn_fit_on_many_points_takes_the_scalable_engine(monkeypatch, params):
    """metric-learn's call ``LMNN(n_neighbors=3).fit(X, y)`` on many points (here: more than a
    lowered COARSE_MIN_POINTS) runs constraint generation around PDHG from the coarse start, whatever
    ``init`` ("auto" with n_components=2 is LDA's low-rank map), and reports its certified gap."""
    from cvxmetric.generators import gaussian_classes
    from cvxmetric.solvers import lmnn as lmnn_solvers
    monkeypatch.setattr(lmnn_solvers, "COARSE_MIN_POINTS", 100)
    X, y = gaussian_classes(300, 6, 3, n_informative=2, seed=0)
    est = LMNN(n_neighbors=3, **params).fit(X, y)
    res = est.result_
    assert res.solver == "lmnn-pdhg" and res.info["impostors"] == "search"
    assert res.info["start"] == "coarse_start"
    assert est.certificate_.measure == "certified_gap" and est.certificate_.certified
    assert est.certificate_.value == res.certified_gap <= est.certificate_.tol
    assert est.certificate_.lower_bound <= est.certificate_.objective
