"""Input defects: bad input fails early and names the argument; inputs are never modified.

Covers the shared checks of ``cvxmetric._checks`` (data matrices, flags, labels, index arrays,
counts, the relative duplicate test) and their use by the generators, the model constructors and
the solvers' flags.
"""
import warnings

import numpy as np
import pytest

from cvxmetric import ConstraintSet, project_psd, qwise_model
from cvxmetric._checks import as_data_matrix, as_index_array, as_labels, as_square_symmetric, zero_length_mask
from cvxmetric.boostmetric import boostmetric_model
from cvxmetric.datasets import load_dataset
from cvxmetric.fantope import fantope_model
from cvxmetric.generators import (lmnn_constraints, pairs_from_labels, quadruplets_from_metric,
                                  relative_attribute_quadruplets, target_neighbors,
                                  triplets_from_labels)
from cvxmetric.hinge import QuadrupletGeometry
from cvxmetric.instances import list_instances
from cvxmetric.itml import ITMLModel
from cvxmetric.lmnn import lmnn_model
from cvxmetric.mmc import MMCModel
from cvxmetric.tolerances import ZERO_LENGTH_RTOL
from cvxmetric.vector_model import qwise_vector_model


def _data(n=24, d=3, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], n // 3)
    return rng.standard_normal((n, d)) + y[:, None], y


# ---------------------------------------------------------------- data matrices
@pytest.mark.parametrize("bad, match", [
    (np.ones((4, 2)) + 1e-3j, "complex"),
    (np.ones((4, 2), dtype=np.complex64), "complex"),
    (np.array([["1.5", "2"], ["3", "4"]]), "dtype <U"),
    (np.array([[1.0, 2.0], [3.0, 4.0]], dtype=object), "dtype object"),
    ([[1.0, 2.0], [3.0]], "rectangular"),
])
def test_data_matrix_rejects_non_real_input(bad, match):
    with pytest.raises(TypeError, match=f"X.*{match}|{match}.*X"):
        as_data_matrix(bad)


def test_complex_data_is_rejected_by_every_entry_point():
    X, y = _data()
    Xc = X + 1j * 1e-9
    cons = ConstraintSet.from_triplets([[0, 1, 9], [2, 3, 12]])
    builders = [
        lambda: qwise_model(Xc, cons),
        lambda: qwise_vector_model(Xc, cons),
        lambda: fantope_model(Xc, cons, rank=1, reg_weight=1.0),
        lambda: boostmetric_model(Xc, cons),
        lambda: lmnn_model(Xc, y, 2),
        lambda: ITMLModel(Xc, [[0, 1]], [[0, 9]]),
        lambda: MMCModel(Xc, ConstraintSet.from_pairs([[0, 1]], similar=True, bound=0.0)),
        lambda: triplets_from_labels(Xc, y),
        lambda: target_neighbors(Xc, y, 2),
    ]
    for build in builders:
        with pytest.raises(TypeError, match="complex"):
            build()


@pytest.mark.parametrize("name, call", [
    ("prior", lambda X: ITMLModel(X, [[0, 1]], [[0, 9]], prior=np.eye(3) + 0j)),
    ("T", lambda X: quadruplets_from_metric(X, np.eye(3, dtype=complex), 5, seed=0)),
    ("M", lambda X: as_square_symmetric(np.array([["1"]]))),
])
def test_complex_or_text_matrices_are_rejected(name, call):
    with pytest.raises(TypeError, match=name):
        call(_data()[0])


def test_matrix_checks_are_relative_to_the_matrix_scale():
    """A tiny non-symmetric or indefinite matrix is not waved through by an absolute floor."""
    A = 1e-9 * np.array([[1.0, 1.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="not symmetric"):
        as_square_symmetric(A)
    B = 1e-9 * np.diag([1.0, -0.5])
    with pytest.raises(ValueError, match="not positive semidefinite"):
        as_square_symmetric(B, psd=True)
    for s in (1e-8, 1.0, 1e8):   # a PSD matrix passes at every scale
        as_square_symmetric(s * np.diag([1.0, 0.0]), psd=True)


# ---------------------------------------------------------------- boolean flags
@pytest.mark.parametrize("flag, call", [
    ("similar", lambda: ConstraintSet.from_pairs([[0, 1]], similar="no", bound=1.0)),
    ("allow_empty", lambda: ConstraintSet.from_triplets([[0, 1, 2]]).validate(3, allow_empty="yes")),
    ("standardized", lambda: load_dataset("iris", standardized="no")),
    ("return_eig", lambda: project_psd(np.eye(2), return_eig="no")),
    ("default_only", lambda: list_instances("qwise", default_only=1)),
])
def test_flags_must_be_real_bools(flag, call):
    with pytest.raises(TypeError, match=f"{flag} must be True or False"):
        call()


def test_itml_shuffle_no_is_not_true():
    from cvxmetric.solvers.itml import bregman_itml

    X, _ = _data()
    model = ITMLModel(X, [[0, 1], [2, 3]], [[0, 9], [1, 17]])
    with pytest.raises(TypeError, match="shuffle must be True or False"):
        bregman_itml(model, shuffle="no")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bregman_itml(model, shuffle=np.False_, max_iter=2)   # numpy bools are bools


# ---------------------------------------------------------------- labels
@pytest.mark.parametrize("y", [
    np.array([0.0, 0.0, 1.0, np.nan, 1.0, 2.0]),
    np.array([0.0, 0.0, 1.0, np.inf, 1.0, 2.0]),
    np.array([0, 0, 1, None, 1, 2], dtype=object),
    [0, 0, 1, float("nan"), 1, 2],
])
def test_non_finite_labels_are_rejected(y):
    with pytest.raises(ValueError, match="y contains a missing or non-finite label"):
        pairs_from_labels(y, n_similar=1, n_dissimilar=1, u=1.0, l=2.0, seed=0)
    X = np.arange(12.0).reshape(6, 2)
    with pytest.raises(ValueError, match="non-finite label"):
        triplets_from_labels(X, y)
    with pytest.raises(ValueError, match="non-finite label"):
        target_neighbors(X, y, 1)


def test_string_labels_are_fine():
    y = np.array(["a", "a", "b", "b"])
    assert as_labels(y, 4).tolist() == y.tolist()
    cs = pairs_from_labels(y, n_similar=2, n_dissimilar=4, u=1.0, l=2.0, seed=0)
    assert len(cs) == 6


# ---------------------------------------------------------------- index arrays
def test_index_arrays_accept_whole_floats_only():
    np.testing.assert_array_equal(as_index_array(np.array([[0.0, 2.0]]), 2, "pairs"), [[0, 2]])
    assert as_index_array([], 3, "triplets").shape == (0, 3)
    for bad, exc, match in [(np.array([[0.5, 1.0]]), TypeError, r"entry \(0, 0\) is 0.5"),
                            (np.array([[np.nan, 1.0]]), TypeError, "integer row indices"),
                            (np.array([[True, False]]), TypeError, "integer row indices"),
                            (np.array([["0", "1"]]), TypeError, "integer row indices"),
                            (np.array([[0, 1 + 0j]]), TypeError, "integer row indices"),
                            (np.array([[0, -1]]), ValueError, "non-negative"),
                            (np.array([[0, 7]]), ValueError, "n = 5")]:
        with pytest.raises(exc, match=match):
            as_index_array(bad, 2, "pairs", n=5)


def test_pull_pairs_as_floats():
    X, _ = _data()
    cons = ConstraintSet.from_triplets([[0, 1, 9]])
    pull = np.array([[0, 1], [2, 3]])
    ref = qwise_model(X, cons, regularizer="pull", pull_pairs=pull)
    same = qwise_model(X, cons, regularizer="pull", pull_pairs=pull.astype(float))
    np.testing.assert_array_equal(ref.R, same.R)
    with pytest.raises(TypeError, match="pull_pairs must hold integer row indices"):
        qwise_model(X, cons, regularizer="pull", pull_pairs=[[0.0, 1.5]])
    with pytest.raises(ValueError, match="pull_pairs row 0 = \\(0, 99\\)"):
        qwise_model(X, cons, regularizer="pull", pull_pairs=[[0, 99]])
    with pytest.raises(ValueError, match="pull_pairs must have shape"):
        qwise_model(X, cons, regularizer="pull", pull_pairs=[0, 1])


def test_constraint_subset_rows_are_checked():
    cs = ConstraintSet.from_triplets([[0, 1, 2], [1, 2, 3]])
    assert len(cs.subset([1])) == 1 and len(cs.subset(np.array([1.0]))) == 1
    with pytest.raises(TypeError, match="rows"):
        cs.subset([0.5])
    with pytest.raises(ValueError, match="rows"):
        cs.subset([5])
    with pytest.raises(ValueError, match="mask"):
        cs.subset([True])


# ---------------------------------------------------------------- the relative duplicate test
def test_zero_length_mask_is_per_feature_relative():
    X = np.array([[0.0, 1e4], [1e-4, 1e4], [0.0, 1e4], [0.0, 2e4]])
    D = np.array([X[1] - X[0], X[2] - X[0], X[3] - X[0], 1e-13 * X[3]])
    np.testing.assert_array_equal(zero_length_mask(D, X), [False, True, False, True])
    for s in (1e-300 * 1e100, 1e-6, 1e6, np.array([1e-4, 1e4])):   # the same verdict at any scale
        np.testing.assert_array_equal(zero_length_mask(D * s, X * s), [False, True, False, True])
    assert zero_length_mask(np.zeros((0, 2)), X).shape == (0,)
    assert 0 < ZERO_LENGTH_RTOL < 1e-8


def test_geometry_zero_length_masks():
    X = np.array([[0.0, 0.0], [1e-7, 0.0], [0.0, 0.0], [1.0, 1.0]]) * 1e-6
    cs = ConstraintSet.from_quadruplets([[0, 1, 0, 2], [0, 2, 1, 3]]) + ConstraintSet.from_pairs(
        [[0, 3]], similar=True, bound=1.0)
    zu, zv = QuadrupletGeometry(X, cs).zero_length()
    np.testing.assert_array_equal(zu, [False, True, False])
    np.testing.assert_array_equal(zv, [True, False, True])   # (0, 2) duplicates; (0, 0) is empty


def test_duplicates_found_and_nothing_else_at_any_scale():
    """iris rows 101 and 142 are identical; no other pair is, at X * 1e-6 or with scaled features."""
    X, y = load_dataset("iris", standardized=False)
    d = X.shape[1]
    ref = triplets_from_labels(X, y)
    for scale in (2.0 ** -20, 2.0 ** 20, 1e-6, 1e6, np.logspace(-4, 4, d)):
        Xs = X * scale
        got = triplets_from_labels(Xs, y)
        # every anchor keeps its 3 x 3 triplets (no point is taken for a duplicate); with an exact
        # (power of two) scale even the order of tied neighbours is the same
        np.testing.assert_array_equal(np.bincount(got.idx[:, 0]), np.bincount(ref.idx[:, 0]))
        if np.ndim(scale) == 0 and np.log2(scale) % 1 == 0:
            np.testing.assert_array_equal(got.idx, ref.idx)
        u = Xs[101] - Xs[142]
        v = Xs[101] - Xs[100]
        np.testing.assert_array_equal(zero_length_mask(np.array([u, v]), Xs), [True, False])
        trip = got.idx[:, [0, 1, 3]]
        assert not np.any(np.isin(trip[:, 0], [101, 142]) & np.isin(trip[:, 1:], [101, 142]).any(axis=1))


# ---------------------------------------------------------------- inputs are never modified
def _frozen(*arrays):
    """Read-only copies (a write raises) and the originals to compare with afterwards."""
    out = []
    for a in arrays:
        c = np.array(a, copy=True)
        c.setflags(write=False)
        out.append(c)
    return out


def test_generators_do_not_modify_inputs():
    X0, y0 = _data(30, 4)
    T0 = np.diag([1.0, 2.0, 0.0, 0.0])
    X, y, T = _frozen(X0, y0, T0)
    pairs_from_labels(y, n_similar=5, n_dissimilar=5, u=1.0, l=2.0, seed=0)
    target_neighbors(X, y, 2)
    lmnn_constraints(X, y, 2)
    quadruplets_from_metric(X, T, 20, seed=1, flip_fraction=0.2)
    relative_attribute_quadruplets(np.repeat(np.arange(5), 6), [[0], [1], [2, 3], [4]], 10, kind="relaxed",
                                   seed=0)
    triplets_from_labels(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(T, T0)


def test_models_do_not_modify_inputs():
    X0, y0 = _data(30, 3)
    X, y = _frozen(X0, y0)
    trip = ConstraintSet.from_triplets([[0, 1, 12], [2, 3, 25], [11, 12, 2]])
    pairs = (ConstraintSet.from_pairs([[0, 1], [10, 11], [20, 21]], similar=True, bound=1.0)
             + ConstraintSet.from_pairs([[0, 10], [1, 20], [11, 25]], similar=False, bound=4.0))
    S0, D0, P0, R0 = np.array([[0, 1], [10, 11]]), np.array([[0, 20]]), np.array([[0, 2]]), 2.0 * np.eye(3)
    S, D, P, R = _frozen(S0, D0, P0, R0)
    idx0 = trip.idx.copy()
    qwise_model(X, trip + pairs, regularizer="pull", pull_pairs=P)
    qwise_vector_model(X, trip + pairs)
    fantope_model(X, trip, rank=1, reg_weight=1.0)
    boostmetric_model(X, trip)
    lmnn_model(X, y, 2)
    ITMLModel(X, S, D, prior=R)
    mmc = MMCModel(X, pairs)
    from cvxmetric.solvers.mmc import mmc_ascent

    M0 = _frozen(np.eye(3))[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mmc_ascent(mmc, M0=M0, max_iter=5, whiten=False)
    for got, want in ((X, X0), (y, y0), (S, S0), (D, D0), (P, P0), (R, R0), (trip.idx, idx0), (M0, np.eye(3))):
        np.testing.assert_array_equal(got, want)


def test_constraint_set_copies_its_input():
    q = np.array([[0, 1, 2, 3]])
    w = np.array([2.0])
    cs = ConstraintSet.from_quadruplets(q, weight=w)
    q[0, 0] = 9
    w[0] = 5.0
    assert cs.idx[0, 0] == 0 and cs.weight[0] == 2.0


# ---------------------------------------------------------------- messages name the real cause
def test_mmc_start_at_any_scale_and_the_null_space_message():
    """A positive definite M0 far outside {<M, C_S> <= 1} is scaled onto it (the same ray, the same
    run); an M0 whose null space holds a dissimilar difference is named as the cause."""
    from cvxmetric.solvers.mmc import mmc_ascent

    X = np.array([[0.0, 0.0], [10.0, 0.0], [20.0, 0.0], [20.0, 1.0], [30.0, 0.0], [31.0, 0.0]])
    cons = (ConstraintSet.from_pairs([[0, 1], [2, 3]], similar=True, bound=0.0)
            + ConstraintSet.from_pairs([[4, 5]], similar=False, bound=0.0))
    model = MMCModel(X, cons)
    far, near = (mmc_ascent(model, M0=c * np.eye(2), whiten=False) for c in (1024.0, 1.0))
    assert far.converged and far.n_iter == near.n_iter
    np.testing.assert_allclose(far.M, near.M, rtol=1e-12)
    with pytest.raises(ValueError, match="null space of M0"):
        mmc_ascent(model, M0=np.diag([0.0, 1.0]), whiten=False)


def test_lmnn_overflow_message_names_the_cause():
    from cvxmetric.solvers.lmnn import solve_lmnn

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 15)
    X = rng.standard_normal((30, 3)) + 3.0 * y[:, None]
    with pytest.raises(RuntimeError, match="small next to the margin"):   # a start in other units than X's
        solve_lmnn(X * 1e-3, y, 2, method="subgradient", M0=np.eye(3), max_triplets=20, max_iter=5)
    with pytest.raises(RuntimeError, match="scale matches the margin"):
        solve_lmnn(3.0 * rng.standard_normal((30, 3)), y, 2, method="pdhg", max_triplets=20, max_iter=5)


def test_solver_flags_must_be_real_bools():
    from cvxmetric.solvers.mmc import mmc_ascent
    from cvxmetric.solvers.pdhg import pdhg

    X, _ = _data()
    model = qwise_model(X, ConstraintSet.from_triplets([[0, 1, 9], [2, 3, 12]]))
    for flag in ("restarts", "adaptive_step"):
        with pytest.raises(TypeError, match=f"{flag} must be True or False"):
            pdhg(model, **{flag: "no"})
    pairs = (ConstraintSet.from_pairs([[0, 1], [2, 3], [8, 9]], similar=True, bound=0.0)
             + ConstraintSet.from_pairs([[0, 9]], similar=False, bound=0.0))
    with pytest.raises(TypeError, match="whiten must be True or False"):
        mmc_ascent(MMCModel(X, pairs), whiten="no")


def test_solvers_do_not_modify_inputs():
    from cvxmetric.solvers.itml import bregman_itml
    from cvxmetric.solvers.lmnn import solve_lmnn
    from cvxmetric.solvers.pdhg import pdhg

    X0, y0 = _data(24, 3)
    X, y, M0, prior = _frozen(X0, y0, 0.5 * np.eye(3), np.diag([1.0, 2.0, 3.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pdhg(qwise_model(X, ConstraintSet.from_triplets([[0, 1, 9], [2, 3, 12]])), M0=M0, max_iter=20)
        itml = ITMLModel(X, [[0, 1], [2, 3]], [[0, 9], [1, 17]], prior=prior)
        lam0 = _frozen(np.zeros(itml.m))[0]
        bregman_itml(itml, lam0=lam0, max_iter=2)
        solve_lmnn(X, y, 2, method="subgradient", M0=M0, max_iter=5)
    for got, want in ((X, X0), (y, y0), (M0, 0.5 * np.eye(3)), (prior, np.diag([1.0, 2.0, 3.0])),
                      (lam0, np.zeros(itml.m))):
        np.testing.assert_array_equal(got, want)
