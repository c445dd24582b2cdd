"""metric-learn's conventions the estimators follow so that code written for metric-learn runs
with only the import changed: random_state, classifier type, calibration strategies, ITML priors,
preprocessors and metric-learn's constructor parameters."""
import numpy as np
import pytest

from cvxmetric import ITML_Supervised, MMC_Supervised, Qwise_Supervised
from cvxmetric.datasets import load_dataset


@pytest.fixture(scope="module")
def iris_small():
    X, y = load_dataset("iris")
    return X[::3], y[::3]


# ------------------------------------------------------------------ random_state
SUPERVISED = [lambda rs: ITML_Supervised(n_constraints=20, random_state=rs),
              lambda rs: MMC_Supervised(n_constraints=20, random_state=rs),
              lambda rs: Qwise_Supervised(n_constraints=20, random_state=rs)]


@pytest.mark.parametrize("make", SUPERVISED, ids=["ITML_Supervised", "MMC_Supervised", "Qwise_Supervised"])
def test_random_state_accepts_randomstate_reproducibly(make, iris_small):
    X, y = iris_small
    a = make(np.random.RandomState(1234)).fit(X, y).get_mahalanobis_matrix()
    b = make(np.random.RandomState(1234)).fit(X, y).get_mahalanobis_matrix()
    np.testing.assert_array_equal(a, b)
    rs = np.random.RandomState(5)
    make(rs).fit(X, y)
    assert rs.randint(1000) != np.random.RandomState(5).randint(1000)   # the fit drew from it


@pytest.mark.parametrize("make", SUPERVISED, ids=["ITML_Supervised", "MMC_Supervised", "Qwise_Supervised"])
def test_random_state_accepts_generator_and_int(make, iris_small):
    X, y = iris_small
    a = make(np.random.default_rng(3)).fit(X, y).get_mahalanobis_matrix()
    b = make(np.random.default_rng(3)).fit(X, y).get_mahalanobis_matrix()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(make(7).fit(X, y).get_mahalanobis_matrix(),
                                  make(np.int64(7)).fit(X, y).get_mahalanobis_matrix())


def test_random_state_of_another_type_is_a_type_error(iris_small):
    X, y = iris_small
    with pytest.raises(TypeError, match="random_state must be None, an int, a numpy.random.RandomState"):
        ITML_Supervised(n_constraints=20, random_state="seed").fit(X, y)


# ------------------------------------------------------------------ pair and quadruplet learners are classifiers
def _labelled_pairs(X, y, m, seed):
    rng = np.random.default_rng(seed)
    P = rng.integers(0, len(X), (4 * m, 2))
    P = P[np.any(X[P[:, 0]] != X[P[:, 1]], axis=1)]
    sim = y[P[:, 0]] == y[P[:, 1]]
    P = np.vstack([P[sim][: m // 2], P[~sim][: m // 2]])
    return X[P], np.where(y[P[:, 0]] == y[P[:, 1]], 1, -1)


def test_tuple_learners_are_classifiers_and_others_are_not():
    from sklearn.base import is_classifier
    from cvxmetric import ITML, LMNN, MMC, Qwise
    assert all(is_classifier(est) for est in (ITML(), MMC(), Qwise()))
    assert not any(is_classifier(est) for est in (LMNN(), ITML_Supervised(), MMC_Supervised()))


def test_roc_auc_scorer_and_stratified_cross_validation_on_pairs(iris_small):
    from sklearn.metrics import get_scorer, roc_auc_score
    from sklearn.model_selection import StratifiedKFold, check_cv, cross_val_score
    from cvxmetric import ITML
    pairs, yp = _labelled_pairs(*iris_small, 60, seed=0)
    est = ITML(random_state=0).fit(pairs, yp)
    assert get_scorer("roc_auc")(est, pairs, yp) == pytest.approx(roc_auc_score(yp, est.decision_function(pairs)))
    assert isinstance(check_cv(3, yp, classifier=True), StratifiedKFold)
    scores = cross_val_score(ITML(random_state=0), pairs, yp, cv=3, scoring="roc_auc")
    assert scores.shape == (3,) and np.all((scores >= 0.0) & (scores <= 1.0))


# ------------------------------------------------------------------ calibration strategies
def _rates(y, pred):
    tpr = np.sum((pred == 1) & (y == 1)) / max(np.sum(y == 1), 1)
    tnr = np.sum((pred == -1) & (y == -1)) / max(np.sum(y == -1), 1)
    return tpr, tnr


def _constrained(rate, other_min, which):
    def score(y, pred):
        tpr, tnr = _rates(y, pred)
        best, other = (tpr, tnr) if which == "tpr" else (tnr, tpr)
        return best if other >= other_min else -1.0
    return score


def _strategies():
    from functools import partial
    from sklearn.metrics import accuracy_score, fbeta_score, precision_score
    out = [({"strategy": "accuracy"}, accuracy_score)]
    out += [({"strategy": "f_beta", "beta": b}, partial(fbeta_score, beta=b, zero_division=0.0))
            for b in (0.5, 1.0, 2.0)]
    out += [({"strategy": "f_beta", "beta": 0.0}, partial(precision_score, zero_division=0.0))]
    out += [({"strategy": "max_tpr", "min_rate": t}, _constrained("tpr", t, "tpr")) for t in (0.0, 0.5, 0.9, 1.0)]
    out += [({"strategy": "max_tnr", "min_rate": t}, _constrained("tnr", t, "tnr")) for t in (0.0, 0.5, 0.9, 1.0)]
    return out


@pytest.mark.parametrize("kwargs, scoring", _strategies(), ids=lambda v: str(v) if isinstance(v, dict) else "")
def test_calibrated_threshold_has_the_best_score(kwargs, scoring):
    from cvxmetric import ITML
    rng = np.random.default_rng(42)
    pairs, y = rng.standard_normal((50, 2, 4)), rng.choice([-1, 1], size=50)
    pairs[6:10], y[6:10] = pairs[10:14], y[10:14]          # tied distances
    est = ITML(random_state=0).fit(pairs, y)
    est.calibrate_threshold(pairs, y, **kwargs)
    best = scoring(y, est.predict(pairs))
    dist = est.pair_distance(pairs)
    scores = []
    for t in np.r_[dist.min() - 1.0, dist, dist.max() + 1.0]:
        scores.append(scoring(y, est.set_threshold(t).predict(pairs)))
    assert max(scores) == pytest.approx(best) and len(set(scores)) > 1


def test_calibration_accepts_or_rejects_every_pair_when_that_is_best():
    from cvxmetric.estimators._calibration import best_threshold
    dist = np.arange(7.0)[::-1]                            # the similar pairs are the farthest
    similar = np.array([True, True, True, False, False, False, False])
    assert best_threshold(dist, similar, "accuracy") < dist.min()              # reject all
    assert best_threshold(dist, similar, "max_tpr", min_rate=0.0) == dist.max()  # accept all
    assert best_threshold(dist, similar, "max_tnr", min_rate=0.0) < dist.min()
    more_similar = np.array([True, True, True, True, False, False, False])
    assert best_threshold(dist, more_similar, "accuracy") == dist.max()
    assert best_threshold(dist, more_similar, "max_tnr", min_rate=0.0) < dist.min()
    alternating = np.arange(6.0)[::-1]
    assert best_threshold(alternating, np.arange(6) % 2 == 0, "f_beta", beta=1.0) == alternating.max()


@pytest.mark.parametrize("kwargs, match", [({"strategy": "weird"}, 'Strategy can either be "accuracy", "f_beta" or "max_tpr" or "max_tnr". Got "weird"'),
                                           ({"strategy": "max_tpr"}, "min_rate must be a number in"),
                                           ({"strategy": "max_tnr", "min_rate": 1.2}, "min_rate must be a number in"),
                                           ({"strategy": "max_tnr", "min_rate": "0.5"}, "min_rate must be a number"),
                                           ({"strategy": "f_beta", "beta": None}, "beta must be a real number"),
                                           ({"strategy": "f_beta", "beta": 3 + 2j}, "beta must be a real number")])
def test_calibration_parameters_are_checked(kwargs, match, iris_small):
    from cvxmetric import ITML
    pairs, yp = _labelled_pairs(*iris_small, 40, seed=1)
    est = ITML(random_state=0).fit(pairs, yp)
    with pytest.raises(ValueError, match=match):
        est.calibrate_threshold(pairs, yp, **kwargs)


# ------------------------------------------------------------------ ITML priors
def test_itml_named_priors(iris_small):
    from cvxmetric import ITML
    X, y = iris_small
    pairs, yp = _labelled_pairs(X, y, 40, seed=2)
    identity = ITML(random_state=0).fit(pairs, yp)
    named = ITML(prior="identity", random_state=0).fit(pairs, yp)
    np.testing.assert_array_equal(identity.get_mahalanobis_matrix(), named.get_mahalanobis_matrix())
    cov = ITML(prior="covariance", random_state=0).fit(pairs, yp)
    points = np.unique(pairs.reshape(-1, X.shape[1]), axis=0)
    np.testing.assert_allclose(cov.problem_.instance.params["prior"], np.linalg.inv(np.cov(points, rowvar=False)),
                               rtol=1e-10)
    a = ITML(prior="random", random_state=np.random.RandomState(3)).fit(pairs, yp).problem_.instance.params["prior"]
    b = ITML(prior="random", random_state=np.random.RandomState(3)).fit(pairs, yp).problem_.instance.params["prior"]
    c = ITML(prior="random", random_state=4).fit(pairs, yp).problem_.instance.params["prior"]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c) and np.linalg.eigvalsh(a)[0] >= 1.0 - 1e-12


def test_itml_singular_prior_is_a_linalg_error(iris_small):
    from cvxmetric import ITML
    from cvxmetric.estimators import SingularPriorError
    X, y = iris_small
    pairs, yp = _labelled_pairs(X, y, 40, seed=2)
    singular = np.diag([1.0, 1.0, 1.0, 0.0])
    with pytest.raises(np.linalg.LinAlgError, match="strictly positive definite matrix as `prior`"):
        ITML(prior=singular).fit(pairs, yp)
    with pytest.raises(ValueError, match="strictly positive definite matrix as `prior`"):
        ITML_Supervised(prior=singular, n_constraints=20).fit(X, y)
    X_dependent = np.hstack([X, X[:, :1]])                 # a repeated feature: singular covariance
    with pytest.raises(SingularPriorError, match="inverse of the covariance matrix since it is not definite"):
        ITML_Supervised(prior="covariance", n_constraints=20, random_state=0).fit(X_dependent, y)
    with pytest.raises(ValueError, match="`prior` must be 'identity', 'covariance', 'random' or a numpy array"):
        ITML(prior="pca").fit(pairs, yp)


# ------------------------------------------------------------------ preprocessors, score_pairs, preprocessor_
def test_callable_preprocessor_gets_the_keys_as_given(iris_small):
    from cvxmetric import ITML
    X, y = iris_small
    pairs, yp = _labelled_pairs(X, y, 40, seed=3)
    points = np.unique(pairs.reshape(-1, X.shape[1]), axis=0)
    names = np.array([f"img_{i:03d}.png" for i in range(len(points))])
    table = dict(zip(names, points))
    seen = []

    def load(keys):
        seen.append(np.asarray(keys).dtype.kind)
        return np.array([table[k] for k in keys])

    where = {tuple(p): names[i] for i, p in enumerate(points)}
    named_pairs = np.array([[where[tuple(a)], where[tuple(b)]] for a, b in pairs])
    by_name = ITML(preprocessor=load, random_state=0).fit(named_pairs, yp)
    by_points = ITML(random_state=0).fit(pairs, yp)
    assert seen and set(seen) == {"U"}
    np.testing.assert_array_equal(by_name.get_mahalanobis_matrix(), by_points.get_mahalanobis_matrix())
    np.testing.assert_allclose(by_name.pair_distance(named_pairs), by_points.pair_distance(pairs))
    np.testing.assert_allclose(by_name.transform(names[:5]), by_points.transform(points[:5]))
    assert by_name.preprocessor_ is load and by_points.preprocessor_ is None


def test_array_preprocessor_still_needs_integer_indices(iris_small):
    from cvxmetric import ITML
    X, y = iris_small
    with pytest.raises(TypeError, match="array preprocessor must hold integer row indices"):
        ITML(preprocessor=X).fit(np.array([["a", "b"], ["c", "d"]]), [1, -1])


def test_score_pairs_is_the_deprecated_pair_distance(iris_small):
    from cvxmetric import ITML
    pairs, yp = _labelled_pairs(*iris_small, 40, seed=4)
    est = ITML(random_state=0).fit(pairs, yp)
    with pytest.warns(FutureWarning, match="score_pairs will be deprecated in release 0.7.0. Use pair_score"):
        dist = est.score_pairs(pairs)
    np.testing.assert_array_equal(dist, est.pair_distance(pairs))


# ------------------------------------------------------------------ metric-learn's constructor parameters
def test_lmnn_init_is_a_start_that_keeps_the_certified_optimum(iris_small):
    from cvxmetric import LMNN
    X, y = iris_small
    fits = {init: LMNN(n_neighbors=3, init=init, random_state=0).fit(X, y)
            for init in ("auto", "identity", "random", "pca", "lda")}
    fits["array"] = LMNN(n_neighbors=3, init=np.eye(X.shape[1])[:2], n_components=2).fit(X, y)
    best = min(f.certificate_.objective for f in fits.values())
    for name, fit in fits.items():
        assert fit.certificate_.certified, name
        # two certified objectives differ by at most the larger certified relative gap
        assert fit.certificate_.objective - best <= fit.certificate_.value * abs(fit.certificate_.objective), name
    with pytest.raises(ValueError, match="`init` must be 'auto', 'pca', 'identity', 'random', 'lda' or a numpy"):
        LMNN(init="zeros").fit(X, y)


def test_lmnn_n_components_keeps_the_leading_directions(iris_small):
    from cvxmetric import LMNN
    X, y = iris_small
    two = LMNN(n_neighbors=3, n_components=2).fit(X, y)
    assert two.transform(X).shape == (X.shape[0], 2)
    # the leading rows of the certified M's map (init="auto" chose metric-learn's "lda" start here)
    np.testing.assert_array_equal(two.components_, two.problem_.components(two.result_)[:2])
    with pytest.raises(ValueError, match=r"Invalid n_components, must be in \[1, 4\]"):
        LMNN(n_components=9).fit(X, y)


def test_optimiser_only_parameters_warn_once_and_change_nothing(iris_small, capsys):
    from cvxmetric import LMNN
    X, y = iris_small
    with pytest.warns(UserWarning, match="learn_rate, min_iter .parameters of metric-learn's own optimiser. ignored"):
        tuned = LMNN(n_neighbors=3, learn_rate=1e-6, min_iter=50, verbose=True).fit(X, y)
    assert "certified=True" in capsys.readouterr().out
    np.testing.assert_array_equal(tuned.components_, LMNN(n_neighbors=3).fit(X, y).components_)
    with pytest.warns(UserWarning, match="max_proj .a parameter of metric-learn's own optimiser. ignored"):
        MMC_Supervised(n_constraints=20, max_proj=100, random_state=0).fit(X, y)


def test_convergence_tol_is_the_solver_tolerance(iris_small):
    from cvxmetric import LMNN
    X, y = iris_small
    by_alias = LMNN(n_neighbors=3, convergence_tol=1e-5).fit(X, y)
    by_tol = LMNN(n_neighbors=3, tol=1e-5).fit(X, y)
    default = LMNN(n_neighbors=3).fit(X, y)
    np.testing.assert_array_equal(by_alias.components_, by_tol.components_)
    assert by_alias.n_iter_ == by_tol.n_iter_ != default.n_iter_
    with pytest.raises(ValueError, match="convergence_tol must be a positive number"):
        LMNN(convergence_tol=-1.0).fit(X, y)


def test_mmc_init_is_a_start(iris_small):
    X, y = iris_small
    fits = [MMC_Supervised(n_constraints=20, init=init, random_state=0).fit(X, y)
            for init in (None, "identity", "covariance", "random", np.diag([1.0, 2.0, 3.0, 4.0]))]
    best = min(f.certificate_.objective for f in fits)
    for fit in fits:
        assert fit.certificate_.certified
        assert fit.certificate_.objective - best <= fit.certificate_.value * abs(fit.certificate_.objective)


def test_mmc_covariance_start_of_singular_data_is_its_pseudo_inverse(iris_small):
    X, y = iris_small
    X_dependent = np.hstack([X, X[:, :2] @ [[2.0], [3.0]]])
    with pytest.warns(UserWarning, match="The covariance matrix is not invertible: using the pseudo-inverse instead"):
        fit = MMC_Supervised(n_constraints=20, init="covariance", random_state=0).fit(X_dependent, y)
    assert fit.certificate_.certified


def test_get_metric_takes_one_feature_components(iris_small):
    from cvxmetric import ITML
    est = ITML(random_state=0).fit(*_labelled_pairs(*iris_small, 40, seed=5))
    est.components_ = np.array([3.1])
    metric = est.get_metric()
    for u, v in [(5, 6.7), ([5], [6.7]), ([[5]], [[6.7]])]:
        assert metric(u, v) == pytest.approx(3.1 * 1.7)


def test_metric_learn_walkthrough_calls_run_with_the_import_changed():
    """The estimator calls of metric-learn's example ``plot_metric_learning_examples.py`` (its
    LMNN, ITML_Supervised, MMC_Supervised and weakly supervised ITML), on data of the same kind."""
    from sklearn.datasets import make_classification
    from cvxmetric import ITML, LMNN
    X, y = make_classification(n_samples=100, n_classes=3, n_clusters_per_class=2, n_informative=3, class_sep=4.0,
                               n_features=5, n_redundant=0, shuffle=True, scale=[1, 1, 20, 20, 20], random_state=42)
    with pytest.warns(UserWarning, match="learn_rate"):
        lmnn = LMNN(n_neighbors=5, learn_rate=1e-6).fit(X, y)
    assert lmnn.transform(X).shape == X.shape and lmnn.certificate_.certified
    assert ITML_Supervised().fit_transform(X, y).shape == X.shape
    assert MMC_Supervised().fit_transform(X, y).shape == X.shape
    rng = np.random.default_rng(0)
    same = np.array([(i, j) for i in range(len(y)) for j in range(i + 1, len(y)) if y[i] == y[j]])
    other = np.array([(i, j) for i in range(len(y)) for j in range(i + 1, len(y)) if y[i] != y[j]])
    other = other[rng.choice(len(other), len(same), replace=False)]
    pairs = np.vstack([same, other])
    labels = np.concatenate([np.ones(len(same)), -np.ones(len(same))])     # floats, as in the example
    assert ITML(preprocessor=X).fit(pairs, labels).transform(X).shape == X.shape


# ------------------------------------------------------------------ metric-learn's init="auto" and messages
@pytest.mark.parametrize("n_classes, n_features, n_samples, n_components, expected",
                         [(None, 3, 20, 3, "identity"), (None, 3, 2, 3, "identity"), (None, 5, 3, 4, "identity"),
                          (None, 4, 5, 3, "pca"), (4, 5, 6, 3, "lda"), (3, 6, 3, 3, "identity"),
                          (2, 5, 6, 4, "pca"), (10, 2, 6, 2, "lda"), (3, 4, 6, 2, "lda")])
def test_auto_init_is_metric_learns_rule(n_classes, n_features, n_samples, n_components, expected):
    from cvxmetric.estimators._metric_learn import auto_init
    assert auto_init(n_samples, n_features, n_components, n_classes) == expected


@pytest.mark.filterwarnings("ignore:lmnn-pdhg. stopped .max iter.")      # max_iter=3: the starts compared
@pytest.mark.parametrize("n_components, chosen", [(2, "lda"), (3, "pca"), (None, "identity")])
def test_lmnn_auto_init_fits_as_the_init_it_chooses(iris_small, n_components, chosen):
    from cvxmetric import LMNN
    X, y = iris_small        # 4 features, 3 classes: lda for k <= 2, pca for k = 3, identity for k = 4
    auto = LMNN(n_components=n_components, init="auto", max_iter=3).fit(X, y)
    named = LMNN(n_components=n_components, init=chosen, max_iter=3).fit(X, y)
    np.testing.assert_array_equal(auto.components_, named.components_)


def test_lmnn_named_inits_start_at_the_datas_scale(iris_small):
    """A named init is a direction; the start is scaled to the data's units, so data in other
    units take the same path (the same iterations, the metric scaled by 1/s^2)."""
    from cvxmetric import LMNN
    X, y = iris_small
    for init in ("pca", "lda", "random"):
        a = LMNN(init=init, n_components=2, random_state=0).fit(X, y)
        b = LMNN(init=init, n_components=2, random_state=0).fit(X * 1e-3, y)
        assert a.certificate_.certified and b.certificate_.certified and a.n_iter_ == b.n_iter_, init
        np.testing.assert_allclose(b.get_mahalanobis_matrix() * 1e-6, a.get_mahalanobis_matrix(), rtol=1e-6,
                                   atol=1e-9 * np.abs(a.get_mahalanobis_matrix()).max())


def test_init_array_and_n_components_messages_are_metric_learns(iris_small):
    from cvxmetric import LMNN
    X, y = iris_small
    cases = [(np.ones((4, 5)), None, r"The input dimensionality \(5\) of the given linear transformation `init` "
                                     r"must match the dimensionality of the given inputs `X` \(4\)\."),
             (np.ones((5, 4)), None, r"The output dimensionality \(5\) of the given linear transformation `init` "
                                     r"cannot be greater than its input dimensionality \(4\)\."),
             (np.eye(4), 3, r"The preferred dimensionality of the projected space `n_components` \(3\) does not "
                            r"match the output dimensionality of the given linear transformation `init` \(4\)!"),
             ("auto", 0, r"^Invalid n_components, must be in \[1, 4\]$"),
             (1, None, r"^`init` must be 'auto', 'pca', 'identity', 'random', 'lda' or a numpy array of shape")]
    for init, k, message in cases:
        with pytest.raises(ValueError, match=message):
            LMNN(init=init, n_components=k).fit(X, y)


def test_input_shape_messages_are_metric_learns(iris_small):
    from cvxmetric import ITML
    X, y = iris_small
    est = ITML(random_state=0).fit(*_labelled_pairs(X, y, 40, seed=6))
    with pytest.raises(ValueError) as err:
        est.pair_distance(X[:2])
    assert str(err.value) == ("3D array of formed tuples expected by ITML. Found 2D array instead:\n"
                              f"input={X[:2]}. Reshape your data and/or use a preprocessor.\n")
    with pytest.raises(ValueError) as err:
        est.transform(X[0])
    assert str(err.value) == ("2D array of formed points expected by ITML. Found 1D array instead:\n"
                              f"input={X[0]}. Reshape your data and/or use a preprocessor.\n")
    triplets = X[:6].reshape(2, 3, 4)
    with pytest.raises(ValueError) as err:
        est.pair_score(triplets)
    assert str(err.value) == ("Tuples of 2 element(s) expected by ITML. Got tuples of 3 element(s) instead "
                              f"(shape=(2, 3, 4)):\ninput={triplets}.\n")
    with pytest.raises(ValueError, match=r"^Tuples of 2 element\(s\) expected by ITML"):
        ITML().pair_score(triplets)                      # the input is checked before the fit, as in metric-learn
    with pytest.raises(ValueError, match=r"^When training on pairs, the labels \(y\) should contain only values"):
        ITML().fit(*_labelled_pairs(X, y, 40, seed=6)[:1], np.zeros(40))


def test_calibration_is_checked_before_the_fit(iris_small, monkeypatch):
    from cvxmetric import MMC
    pairs, yp = _labelled_pairs(*iris_small, 40, seed=7)
    est = MMC()
    monkeypatch.setattr(est, "_fit_pairs", lambda *a: pytest.fail("fitted before checking calibration_params"))
    with pytest.raises(ValueError, match='^Strategy can either be "accuracy"'):
        est.fit(pairs, yp, calibration_params={"strategy": "weird"})


def test_qwise_drops_quadruplets_of_two_identical_pairs(iris_small):
    from cvxmetric import Qwise
    X, _ = iris_small
    rng = np.random.default_rng(0)
    Q = X[rng.integers(0, len(X), (30, 4))]
    twice = np.vstack([Q, X[[[5, 5, 9, 9]]]])           # a quadruplet of two zero-length pairs
    with pytest.warns(UserWarning, match=r"^1 of the 31 quadruplets compare two pairs of identical points"):
        dropped = Qwise(random_state=0).fit(twice)
    np.testing.assert_array_equal(dropped.components_, Qwise(random_state=0).fit(Q).components_)
    with pytest.raises(ValueError, match="every quadruplet compares two pairs of identical points"):
        with pytest.warns(UserWarning):
            Qwise().fit(X[[[5, 5, 9, 9]]])


def test_only_the_learners_from_points_are_scikit_learn_transformers(iris_small):
    """A pipeline ending in a tuple learner predicts and scores tuples as the learner does; it has
    no transform of its training tuples (transform takes points), as in metric-learn."""
    from sklearn.base import TransformerMixin
    from sklearn.pipeline import make_pipeline

    from cvxmetric import ITML, LMNN, MMC, ORML, BoostMetric, Qwise
    assert all(issubclass(c, TransformerMixin) for c in (LMNN, ITML_Supervised, MMC_Supervised, Qwise_Supervised,
                                                         BoostMetric))
    assert not any(issubclass(c, TransformerMixin) for c in (ITML, MMC, Qwise, ORML))
    pairs, yp = _labelled_pairs(*iris_small, 40, seed=8)
    alone, piped = ITML(random_state=0).fit(pairs, yp), make_pipeline(ITML(random_state=0)).fit(pairs, yp)
    np.testing.assert_array_equal(alone.predict(pairs), piped.predict(pairs))
    assert alone.score(pairs, yp) == piped.score(pairs, yp)


# ------------------------------------------------------------------ diagonal MMC
def test_diagonal_mmc_is_certified_diagonal_and_agrees_with_cvxpy(iris_small):
    X, y = iris_small
    fast = MMC_Supervised(n_constraints=30, diagonal=True, random_state=0).fit(X, y)
    exact = MMC_Supervised(n_constraints=30, diagonal=True, solver="cvxpy", random_state=0).fit(X, y)
    M = fast.get_mahalanobis_matrix()
    assert fast.certificate_.certified and exact.certificate_.certified
    assert fast.problem_.name == "mmc_diagonal" and fast.result_.solver == "mmc-diagonal-ascent"
    np.testing.assert_array_equal(M, np.diag(np.diag(M)))
    assert np.all(np.diag(M) >= 0)
    # two certified values of one optimum: within the sum of their certified relative gaps
    f, e = fast.certificate_, exact.certificate_
    assert abs(f.objective - e.objective) <= (f.value + e.value) * max(f.objective, e.objective)
    np.testing.assert_allclose(np.diag(M), np.diag(exact.get_mahalanobis_matrix()), rtol=1e-2,
                               atol=1e-3 * np.abs(np.diag(M)).max())
    full = MMC_Supervised(n_constraints=30, random_state=0).fit(X, y)
    assert full.certificate_.objective <= f.objective * (1 + f.value)   # diagonal metrics are a subset


def test_diagonal_mmc_starts_from_the_diagonal_of_init_and_ignores_diagonal_c(iris_small):
    X, y = iris_small
    base = MMC_Supervised(n_constraints=30, diagonal=True, random_state=0).fit(X, y)
    started = MMC_Supervised(n_constraints=30, diagonal=True, init=np.diag([1.0, 2.0, 3.0, 4.0]) + 0.1,
                             random_state=0).fit(X, y)
    assert started.certificate_.certified and started.result_.history[0] != base.result_.history[0]
    with pytest.warns(UserWarning, match="diagonal_c=3.0 ignored"):
        scaled = MMC_Supervised(n_constraints=30, diagonal=True, diagonal_c=3.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(scaled.components_, base.components_)
    with pytest.raises(ValueError, match="diagonal_c must be a positive number"):
        MMC_Supervised(diagonal=True, diagonal_c=-1.0).fit(X, y)
    with pytest.raises(TypeError, match="diagonal must be True"):
        MMC_Supervised(diagonal="yes").fit(X, y)


def test_metric_learn_diagonal_objective_is_minimised_by_the_rescaled_solution(iris_small):
    """metric-learn's diagonal objective s.w - c log sum_D sqrt(q.w) has its minimiser on the ray of
    the certified diagonal MMC, at the scale c/2 (DiagonalMMCModel.metric_learn_scale): its KKT
    conditions hold there (gradient 0 on the support, >= 0 off it)."""
    X, y = iris_small
    fit = MMC_Supervised(n_constraints=30, diagonal=True, random_state=0, tol=1e-9).fit(X, y)
    from cvxmetric.mmc import DiagonalMMCModel
    model = DiagonalMMCModel(fit.problem_.X, fit.problem_.constraints)
    for c in (1.0, 5.0):
        w = model.metric_learn_scale(np.diag(fit.result_.M), c)
        D = model.dissimilar_distances(w)
        grad = model.s - c * ((model.wD / (2 * np.sqrt(D))) @ model.QD) / float(model.wD @ np.sqrt(D))
        scale = np.maximum(model.s, 1e-300)
        on = w > 0
        assert np.all(np.abs(grad[on]) / scale[on] <= 1e-6)
        assert np.all(grad[~on] / scale[~on] >= -1e-6)


def test_qwise_accepts_lsmls_prior_and_ignores_it_with_a_warning(iris_small):
    X, y = iris_small
    with pytest.warns(UserWarning, match="prior='covariance' ignored: it is metric-learn's LSML prior"):
        with_prior = Qwise_Supervised(n_constraints=20, prior="covariance", random_state=0).fit(X, y)
    np.testing.assert_array_equal(with_prior.components_,
                                  Qwise_Supervised(n_constraints=20, random_state=0).fit(X, y).components_)
