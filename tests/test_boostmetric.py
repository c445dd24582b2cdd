"""BoostMetric: geometry and losses, formulations, column generation, boosting solvers, bad input."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog

from cvxmetric.boostmetric import (TripletGeometry, boostmetric_model, hinge_dual_weights, hinge_value,
                                   project_capped_simplex)
from cvxmetric.constraints import ConstraintSet
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.generators import triplets_from_labels
from cvxmetric.instances.boostmetric import boostmetric_instance
from cvxmetric.linalg import random_psd
from formulations.boostmetric import build_boostmetric, build_master_dual_lp, build_master_lp
from solvers.boostmetric_cg import boostmetric_hinge_cg, solve_master_lp
from solvers.boostmetric_stagewise import (boostmetric_multipass, boostmetric_stagewise,
                                           boostmetric_totally_corrective, line_search_weight)


@pytest.fixture(autouse=True, scope="module")
def _single_blas_thread():
    """The tiny BLAS calls of these solvers (L-BFGS-B, HiGHS, d <= 13) slow down 10-30x when
    OpenBLAS threads compete on a loaded 2-core machine (measured); one thread is faster."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


def _dense_A(X, trip):
    """A_r = C_ik - C_ij formed explicitly (the test's independent definition)."""
    i, j, k = trip.idx[:, 0], trip.idx[:, 1], trip.idx[:, 3]
    P, Q = X[i] - X[k], X[i] - X[j]
    return np.einsum("ma,mb->mab", P, P) - np.einsum("ma,mb->mab", Q, Q)


def _random_problem(seed, n=12, d=4, m=20):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    t = np.array([rng.choice(n, 3, replace=False) for _ in range(m)])
    return X, ConstraintSet.from_triplets(t)


# ----------------------------------------------------------------------------- linear algebra
@given(st.integers(0, 10_000), st.integers(1, 6))
def test_matrix_free_operator_equals_dense_sum(seed, k):
    X, trip = _random_problem(seed)
    geom = TripletGeometry(X, trip)
    rng = np.random.default_rng(seed + 1)
    u = rng.random(geom.m)
    A = _dense_A(X, trip)
    S = np.einsum("m,mab->ab", u, A)
    V = rng.standard_normal((X.shape[1], k))
    np.testing.assert_allclose(geom.weighted_sum(u), S, atol=1e-10 * max(1, np.abs(S).max()))
    np.testing.assert_allclose(geom.apply(u, V), S @ V, atol=1e-9 * max(1, np.abs(S @ V).max()))
    np.testing.assert_allclose(geom.operator(u).matvec(V[:, 0]), S @ V[:, 0], atol=1e-9 * max(1, np.abs(S).max()))
    M = random_psd(X.shape[1], seed=seed)
    np.testing.assert_allclose(geom.margins(M), np.einsum("mab,ab->m", A, M), atol=1e-9 * max(1, np.abs(A).max()))
    H = geom.columns(V)
    np.testing.assert_allclose(H, np.einsum("mab,aj,bj->mj", A, V, V), atol=1e-9 * max(1, np.abs(H).max()))


def test_lanczos_top_eigenpair_matches_dense():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((80, 30))
    trip = ConstraintSet.from_triplets(np.array([rng.choice(80, 3, replace=False) for _ in range(300)]))
    geom = TripletGeometry(X, trip)
    u = rng.random(geom.m)
    lam_d, V_d, _ = geom.top_eigenpair(u, method="dense", k=2)
    lam_l, V_l, res = geom.top_eigenpair(u, method="lanczos", k=2)
    np.testing.assert_allclose(lam_l, lam_d, rtol=1e-10)
    assert abs(abs(V_d[:, 0] @ V_l[:, 0]) - 1) < 1e-8 and res < 1e-8 * abs(lam_d[0])


@given(st.integers(0, 10_000), st.integers(1, 30), st.floats(0.0, 3.0))
def test_hinge_value_is_the_lp_over_rho_and_xi(seed, m, extra):
    rng = np.random.default_rng(seed)
    rho = rng.standard_normal(m)
    nu = 1.0 / m + extra * rng.random()
    # max_{t, xi} t - nu 1'xi  s.t.  xi_r >= t - rho_r, xi >= 0   (variables [t, xi])
    res = linprog(np.concatenate([[-1.0], np.full(m, nu)]),
                  A_ub=np.hstack([np.ones((m, 1)), -np.eye(m)]), b_ub=rho,
                  bounds=[(None, None)] + [(0, None)] * m, method="highs")
    assert res.status == 0
    assert hinge_value(rho, nu) == pytest.approx(-res.fun, abs=1e-9)
    u = hinge_dual_weights(rho, nu)
    assert u.sum() == pytest.approx(1.0) and np.all(u >= 0) and np.all(u <= nu + 1e-15)


@given(st.integers(0, 10_000), st.integers(2, 40))
def test_capped_simplex_projection(seed, n):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n)
    cap = (1.0 + rng.random()) / n
    u = project_capped_simplex(z, cap)
    assert u.sum() == pytest.approx(1.0, abs=1e-12) and u.min() >= 0 and u.max() <= cap
    # optimality: z - u = tau on the free coordinates
    free = (u > 1e-12) & (u < cap - 1e-12)
    if free.sum() > 1:
        assert np.ptp((z - u)[free]) < 1e-9


def test_triplets_from_labels_follow_the_paper():
    X = np.array([[0.0], [0.1], [0.2], [0.35], [1.0], [1.1], [1.3], [1.6], [0.1]])
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 0])
    t = triplets_from_labels(X, y, k_target=2, k_impostor=2)
    i, j, k = t.idx[:, 0], t.idx[:, 1], t.idx[:, 3]
    assert np.all(y[i] == y[j]) and np.all(y[i] != y[k])
    assert not np.any((i == 1) & (j == 8)) and not np.any((i == 8) & (j == 1))  # duplicates skipped
    assert np.sum(i == 0) == 4
    assert set(j[i == 0]) == {1, 2} or set(j[i == 0]) == {8, 2} or set(j[i == 0]) == {1, 8}
    assert set(k[i == 0]) == {4, 5}
    TripletGeometry(X, t)  # no zero-length differences


# ----------------------------------------------------------------------------- value_at
@pytest.mark.parametrize("loss", ["hinge", "exp", "logistic"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_value_at_equals_model_objective_at_random_points(loss, seed):
    inst = boostmetric_instance("iris", loss, n=30, seed=seed)
    form = build_boostmetric(inst.X, inst.constraints, **inst.params)
    model = form.model
    for r in range(3):
        M = random_psd(inst.d, rank=r + 1, seed=100 * seed + r)
        M = M / np.trace(M) if loss == "hinge" else M
        a, b = form.value_at(M), model.value(M)
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12)


def test_value_at_hinge_requires_trace_one():
    inst = boostmetric_instance("iris", "hinge", n=30)
    form = build_boostmetric(inst.X, inst.constraints, **inst.params)
    with pytest.raises(ValueError, match="trace"):
        form.value_at(2 * np.eye(inst.d) / inst.d)


# ----------------------------------------------------------------------------- master LP
@pytest.mark.parametrize("seed", [0, 1])
def test_master_lp_primal_dual_and_highs_agree(seed):
    inst = boostmetric_instance("wine", "hinge", n=30, seed=seed)
    model = boostmetric_model(inst.X, inst.constraints, loss="hinge", nu=inst.params["nu"])
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((inst.d, 8))
    V /= np.linalg.norm(V, axis=0)
    primal, dual = build_master_lp(model, V), build_master_dual_lp(model, V)
    sp_, sd = primal.solve("CLARABEL"), dual.solve("CLARABEL")
    w, u, val = solve_master_lp(model.geometry.columns(V), model.nu)
    assert sp_.ok and sd.ok
    assert -sp_.value == pytest.approx(sd.value, abs=1e-6)
    assert val == pytest.approx(sd.value, abs=1e-6)
    assert primal.value_at(w) == pytest.approx(-val, abs=1e-8)
    assert dual.value_at(u) == pytest.approx(val, abs=1e-8)
    X = (V * w) @ V.T
    assert model.value(X) == pytest.approx(-val, abs=1e-8)


# ----------------------------------------------------------------------------- agreement
@pytest.mark.parametrize("dataset", ["iris", "wine"])
@pytest.mark.parametrize("seed", [0, 1])
def test_hinge_column_generation_matches_clarabel_with_certificate(dataset, seed):
    inst = boostmetric_instance(dataset, "hinge", n=40, seed=seed)
    nu = inst.params["nu"]
    form = build_boostmetric(inst.X, inst.constraints, loss="hinge", nu=nu)
    ref = form.solve("CLARABEL")
    assert ref.ok, ref.status
    res = boostmetric_hinge_cg(inst.X, inst.constraints, nu)
    assert res.converged
    scale = max(1.0, abs(ref.value))
    assert abs(res.objective - ref.value) / scale <= 1e-6
    assert res.info["certified_gap_rel"] <= 1e-6
    assert -res.info["dual_bound"] - 1e-6 * scale <= ref.value <= res.objective + 1e-6 * scale
    assert form.value_at(res.M) == pytest.approx(res.objective, rel=1e-9, abs=1e-12)
    assert np.linalg.eigvalsh(res.M)[0] >= -1e-12 and abs(np.trace(res.M) - 1) <= 1e-12


@pytest.mark.parametrize("dataset,loss,nu", [("iris", "exp", None), ("wine", "exp", 5.0), ("circles", "exp", 1.0),
                                             ("iris", "logistic", None), ("wine", "logistic", None)])
@pytest.mark.parametrize("seed", [0, 1])
def test_totally_corrective_matches_cvxpy(dataset, loss, nu, seed):
    # wine with 30 points in 13 dimensions is separable: nu = 5 keeps the exp problem bounded
    inst = boostmetric_instance(dataset, loss, n=30, seed=seed, nu=nu)
    form = build_boostmetric(inst.X, inst.constraints, **inst.params)
    ref = form.solve("CLARABEL")
    assert ref.ok, ref.status
    res = boostmetric_totally_corrective(inst.X, inst.constraints, **inst.params, n_columns=3)
    assert res.converged
    assert abs(res.objective - ref.value) / max(1.0, abs(ref.value)) <= 1e-4
    assert form.value_at(res.M) == pytest.approx(res.objective, rel=1e-9)
    if res.info["certified_gap"] is not None:
        assert res.objective - res.info["certified_gap"] <= ref.value + 1e-6 * max(1.0, abs(ref.value))


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_stagewise_is_monotone_feasible_and_stops_at_a_psd_gradient(loss):
    inst = boostmetric_instance("iris", loss, n=30, seed=0)
    form = build_boostmetric(inst.X, inst.constraints, **inst.params)
    ref = form.solve("CLARABEL")
    res = boostmetric_stagewise(inst.X, inst.constraints, **inst.params, max_iter=2000)
    assert res.converged and res.info["lambda_max"] <= inst.params["nu"] * (1 + 1e-6) + 1e-6
    assert np.all(np.diff(res.history) <= 1e-12 * np.abs(res.history[:-1]))
    assert ref.value - 1e-6 <= res.objective <= res.history[0]
    assert form.value_at(res.M) == pytest.approx(res.objective, rel=1e-9)


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_line_search_zeroes_the_derivative(loss):
    rng = np.random.default_rng(0)
    rho, h, nu = rng.standard_normal(50), rng.standard_normal(50) + 1.0, 0.3
    w = line_search_weight(loss, rho, h, nu)
    model_u = (lambda r: np.exp(-r - np.logaddexp.reduce(-r))) if loss == "exp" else (lambda r: 1 / (1 + np.exp(r)))
    assert w > 0 and abs(nu - h @ model_u(rho + w * h)) < 1e-9


def test_multipass_returns_a_metric_in_the_original_coordinates():
    inst = boostmetric_instance("iris", "logistic", n=45, seed=0)
    opts = {"loss": "logistic", "nu": 1.0}
    one = boostmetric_multipass(inst.X, inst.y, passes=1, **opts)
    ref = boostmetric_stagewise(inst.X, triplets_from_labels(inst.X, inst.y), **opts)
    np.testing.assert_allclose(one.M, ref.M, atol=1e-10)
    two = boostmetric_multipass(inst.X, inst.y, passes=2, **opts)
    assert two.M.shape == (inst.d, inst.d) and np.linalg.eigvalsh(two.M)[0] >= -1e-10
    assert len(two.info["passes"]) == 2


def test_hinge_cg_warns_when_stopped_early():
    inst = boostmetric_instance("circles", "hinge", n=40)
    with pytest.warns(ConvergenceWarning):
        res = boostmetric_hinge_cg(inst.X, inst.constraints, inst.params["nu"], max_iter=2)
    assert not res.converged and res.info["certified_gap"] > 0


# ----------------------------------------------------------------------------- bad input
def test_bad_input():
    X, trip = _random_problem(0)
    m = len(trip)
    with pytest.raises(ValueError, match="1/|I|"):
        boostmetric_model(X, trip, loss="hinge", nu=0.5 / m)
    with pytest.raises(ValueError, match="unbounded"):
        build_boostmetric(X, trip, loss="hinge", nu=0.5 / m)
    with pytest.raises(ValueError, match="unbounded"):
        boostmetric_hinge_cg(X, trip, 0.5 / m)
    with pytest.raises(ValueError, match="empty"):
        boostmetric_stagewise(X, np.zeros((0, 3), dtype=int))
    with pytest.raises(ValueError, match="d = 0"):
        TripletGeometry(np.zeros((5, 0)), [[0, 1, 2]])
    Xd = X.copy()
    Xd[1] = Xd[0]
    with pytest.raises(ValueError, match="zero-length"):
        boostmetric_hinge_cg(Xd, [[0, 1, 2]], 1.0)
    with pytest.raises(ValueError, match="repeats an index"):
        TripletGeometry(X, [[0, 1, 1]])
    with pytest.raises(ValueError, match="not a triplet"):
        TripletGeometry(X, ConstraintSet.from_quadruplets([[0, 1, 2, 3]]))
    with pytest.raises(ValueError, match="weight"):
        TripletGeometry(X, ConstraintSet.from_triplets([[0, 1, 2]], weight=2.0))
    with pytest.raises(ValueError, match="loss"):
        boostmetric_model(X, trip, loss="square")
    with pytest.raises(ValueError, match="loss"):
        boostmetric_stagewise(X, trip, loss="hinge")
    with pytest.raises(ValueError, match="rows >= n|>= n"):
        TripletGeometry(X, [[0, 1, 99]])
    with pytest.raises(ValueError, match="unit length"):
        build_master_lp(boostmetric_model(X, trip, loss="hinge", nu=1.0), 2 * np.eye(X.shape[1]))


def test_exponential_loss_on_separable_triplets_is_reported_unbounded():
    X = np.array([[0.0], [0.1], [5.0]])
    with pytest.raises(ValueError, match="unbounded"):
        boostmetric_stagewise(X, [[0, 1, 2]], loss="exp", nu=1e-3)
    res = boostmetric_stagewise(X, [[0, 1, 2]], loss="logistic", nu=1e-3)  # logistic stays bounded
    assert np.isfinite(res.objective)


def test_inputs_are_not_modified():
    X, trip = _random_problem(1)
    X0 = X.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        boostmetric_stagewise(X, trip.idx[:, [0, 1, 3]], nu=0.5, max_iter=5)
        boostmetric_hinge_cg(X, trip, 1.0, max_iter=3)
    np.testing.assert_array_equal(X, X0)
