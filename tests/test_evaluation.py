"""cvxmetric.evaluation (measures of a learned metric) and cvxmetric.plotting (its pictures)."""
import numpy as np
import pytest

from cvxmetric.datasets import synthetic_low_rank_metric
from cvxmetric.evaluation import (knn_error, labelled_quadruplets, metric_embedding, normalized_spectrum,
                                  quadruplet_accuracy, scaled_distance)


def _noisy_classes(seed=0, n=120, noise_dims=6):
    """Two classes separated along feature 0, buried under large noise features."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = np.column_stack([y + 0.15 * rng.standard_normal(n), 4.0 * rng.standard_normal((n, noise_dims))])
    return X, y


# ---------------------------------------------------------------- quadruplet measures
def test_target_orders_its_own_quadruplets_and_identity_does_not():
    X, T = synthetic_low_rank_metric(200, 8, 2, seed=0)
    q, sign = labelled_quadruplets(X, T, 2000, seed=1)
    assert quadruplet_accuracy(X, T, q, sign) == 1.0
    assert quadruplet_accuracy(X, np.eye(8), q, sign) < 0.9
    assert quadruplet_accuracy(X, np.zeros((8, 8)), q, sign) == 0.0


def test_scaled_distance_ignores_scale():
    _, T = synthetic_low_rank_metric(10, 6, 2, seed=0)
    assert scaled_distance(3.0 * T, T) == pytest.approx(0.0, abs=1e-24)
    assert scaled_distance(np.eye(6), T) > 0.1


# ---------------------------------------------------------------- k-NN error
def test_knn_error_drops_when_the_metric_ignores_noise_features():
    X, y = _noisy_classes()
    tr, te = np.arange(0, 120, 2), np.arange(1, 120, 2)
    M = np.zeros((7, 7))
    M[0, 0] = 1.0
    euclid = knn_error(X[tr], y[tr], X[te], y[te])
    learned = knn_error(X[tr], y[tr], X[te], y[te], M)
    assert learned == 0.0 < euclid
    assert knn_error(X[tr], y[tr], X[te], y[te], np.eye(7)) == euclid   # None is the identity


def test_knn_error_is_scale_invariant_and_leaves_inputs_alone():
    X, y = _noisy_classes(seed=1)
    M = np.diag([1.0, 0.2, 0.1, 0.0, 0.3, 0.0, 0.05])
    X0, M0 = X.copy(), M.copy()
    e1 = knn_error(X[:60], y[:60], X[60:], y[60:], M, n_neighbors=5)
    e2 = knn_error(X[:60], y[:60], X[60:], y[60:], 1e4 * M, n_neighbors=5)
    assert e1 == e2
    assert np.array_equal(X, X0) and np.array_equal(M, M0)


def test_knn_error_rejects_bad_input():
    X, y = _noisy_classes()
    with pytest.raises(ValueError, match="zero matrix"):
        knn_error(X, y, X, y, np.zeros((7, 7)))
    with pytest.raises(TypeError, match="n_neighbors"):
        knn_error(X, y, X, y, n_neighbors=True)
    with pytest.raises(ValueError, match="n_neighbors"):
        knn_error(X[:3], y[:3], X, y, n_neighbors=4)
    with pytest.raises(ValueError, match="shape"):
        knn_error(X, y, X, y, np.eye(3))
    with pytest.raises(ValueError, match="positive semidefinite"):
        knn_error(X, y, X, y, -np.eye(7))
    with pytest.raises(ValueError, match="y_test"):
        knn_error(X, y, X, y[:-1])


# ---------------------------------------------------------------- 2-D picture and spectrum
def test_euclidean_embedding_is_pca():
    from sklearn.decomposition import PCA

    X, _ = _noisy_classes()
    Z, kept = metric_embedding(X)
    pca = PCA(2).fit(X)
    ref = pca.transform(X)
    np.testing.assert_allclose(np.abs(Z), np.abs(ref), atol=1e-10)
    assert kept == pytest.approx(pca.explained_variance_ratio_.sum(), rel=1e-12)


def test_embedding_of_low_rank_metric_keeps_everything():
    X, _ = _noisy_classes()
    G = np.random.default_rng(0).standard_normal((1, 7))
    Z, kept = metric_embedding(X, G.T @ G)          # rank one: a line
    assert kept == pytest.approx(1.0)
    assert np.abs(Z[:, 1]).max() <= 1e-6 * np.abs(Z[:, 0]).max()   # round-off directions only
    # distances in the picture are the metric's distances
    D_M = ((X[:, None, :] - X[None, :, :]) @ G.T)[..., 0] ** 2
    D_Z = np.sum((Z[:, None, :] - Z[None, :, :]) ** 2, axis=-1)
    np.testing.assert_allclose(D_Z, D_M, rtol=1e-9, atol=1e-9 * D_M.max())


def test_embedding_share_is_below_one_for_full_rank_metric():
    X, _ = _noisy_classes()
    _, kept = metric_embedding(X, np.eye(7))
    assert 0.0 < kept < 1.0
    with pytest.raises(ValueError, match="n_components"):
        metric_embedding(X, n_components=8)


def test_normalized_spectrum():
    lam = normalized_spectrum(np.diag([1.0, 3.0, 0.0, 4.0]))
    np.testing.assert_allclose(lam, [0.5, 0.375, 0.125, 0.0])
    np.testing.assert_allclose(normalized_spectrum(np.eye(5)), np.full(5, 0.2))
    with pytest.raises(ValueError, match="zero matrix"):
        normalized_spectrum(np.zeros((3, 3)))


# ---------------------------------------------------------------- plotting
@pytest.fixture
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_plot_spectrum_draws_reference_and_metrics(plt):
    from cvxmetric.plotting import SPECTRUM_FLOOR, plot_spectrum

    M = np.diag([2.0, 1.0, 0.0])
    ax = plot_spectrum({"a": M, "b": np.eye(3)}, reference=M, labels=("unused", "target"))
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["target", "a", "b"]
    np.testing.assert_allclose(lines[1].get_ydata(), [2 / 3, 1 / 3, SPECTRUM_FLOOR])
    ax = plot_spectrum(M, log=False)
    assert ax.get_lines()[0].get_label() == "identity"
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), np.full(3, 1 / 3))


def test_plot_embeddings_one_panel_per_metric(plt):
    from cvxmetric.plotting import plot_embeddings

    X, y = _noisy_classes()
    M = np.zeros((7, 7))
    M[0, 0] = 1.0
    axes = plot_embeddings(X, y, {"Euclidean": None, "learned": M})
    assert len(axes) == 2
    assert "100%" in axes[1].get_title()
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="one per metric"):
        plot_embeddings(X, y, {"Euclidean": None, "learned": M}, axes=[ax])
    with pytest.raises(TypeError, match="dict"):
        plot_embeddings(X, y, [None])


# ---------------------------------------------------------------- retrieval
def test_retrieval_precision_by_hand():
    from cvxmetric.evaluation import retrieval_precision

    X_db = np.array([[0.0], [1.0], [2.0], [10.0]])
    y_db = np.array([0, 1, 0, 1])
    # query at 0.1 (class 0): ranking 0 (rel), 1 (not), 2 (rel) -> AP@3 = (1 + 2/3) / 2
    m, prec = retrieval_precision(np.array([[0.1]]), np.array([0]), X_db, y_db, top_k=3)
    assert m == pytest.approx((1 + 2 / 3) / 2)
    np.testing.assert_allclose(prec, [1.0, 0.5, 2 / 3])
    # nothing relevant in the top 1: AP = 0
    m, _ = retrieval_precision(np.array([[0.9]]), np.array([0]), X_db, y_db, top_k=1)
    assert m == 0.0


def test_retrieval_precision_improves_when_noise_is_ignored():
    from cvxmetric.evaluation import retrieval_precision

    X, y = _noisy_classes()
    M = np.zeros((7, 7))
    M[0, 0] = 1.0
    m_e, _ = retrieval_precision(X[:20], y[:20], X[20:], y[20:], top_k=10)
    m_l, prec = retrieval_precision(X[:20], y[:20], X[20:], y[20:], M, top_k=10)
    assert m_l == 1.0 > m_e and prec.shape == (10,)
    with pytest.raises(ValueError, match="top_k"):
        retrieval_precision(X[:20], y[:20], X[20:], y[20:], top_k=200)
