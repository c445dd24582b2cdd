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
