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
