"""Subspace generation (cvxmetric.solvers.subspace) and the restricted model it solves."""
import math
import warnings

import numpy as np
import pytest

from cvxmetric.certificates import relative_gap
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.models import qwise_model
from cvxmetric.solvers import solve_qwise
from cvxmetric.solvers.pdhg import pdhg
from cvxmetric.solvers.subspace import subspace, subspace_applies, subspace_pays


def _model(d=24, n=150, m=1200, seed=3, reg_weight=1.0, C_Q=1.0, data_scale=1.0):
    inst = synthetic_qwise(d, min(5, d), n, m, seed=seed, name="sub")
    params = dict(inst.params, reg_weight=reg_weight, C_Q=C_Q)
    return qwise_model(inst.X * data_scale, inst.constraints, **params)


def _orthonormal(d, k, seed):
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((d, k)))[0]


@pytest.mark.parametrize("regularizer", ["trace", "frobenius"])
def test_restricted_objective_is_the_full_objective(regularizer):
    inst = synthetic_qwise(12, 4, 60, 300, seed=1, name="sub")
    model = qwise_model(inst.X, inst.constraints, **dict(inst.params, regularizer=regularizer))
    rng = np.random.default_rng(0)
    P = _orthonormal(12, 5, 1)
    G = rng.standard_normal((5, 3))
    W = G @ G.T
    full = model.value(P @ W @ P.T)
    sub = model.restricted(P)
    assert sub.d == 5 and sub.m == model.m
    assert sub.value(W) == pytest.approx(full, rel=1e-12)
    assert model.value_factor(P @ G) == pytest.approx(full, rel=1e-12)


def test_restricted_rejects_a_basis_that_is_not_orthonormal():
    model = _model(d=8, n=40, m=100)
    with pytest.raises(ValueError, match="orthonormal"):
        model.restricted(2.0 * _orthonormal(8, 3, 0))
    with pytest.raises(ValueError, match="P must be"):
        model.restricted(np.ones(8))


def test_subspace_is_certified_and_below_no_solution_of_dense_pdhg():
    model = _model()
    res = subspace(model, tol=1e-4)
    assert res.converged and res.measure == "certified_gap" and res.certified_gap <= 1e-4
    ref = pdhg(model, tol=1e-6, projection="dense", checks="dense")
    # the subspace's bound is proven: never above any feasible point's objective
    assert res.lower_bound <= ref.objective * (1 + 1e-12)
    assert ref.lower_bound <= res.objective * (1 + 1e-12)
    # same objective within the certified gaps
    assert relative_gap(res.objective, ref.lower_bound) <= 1e-4 + 1e-6
    assert model.value(res.M) == pytest.approx(res.objective, rel=1e-10)


def test_result_contract_fields():
    model = _model(d=16, n=100, m=600)
    res = subspace(model, tol=1e-3, form_M=False, fallback=False)   # the rounds' own result
    assert res.M is None and res.solver == "hinge-subspace" and res.status == "converged"
    F = res.info["factor"]
    assert F.shape[0] == model.d and model.value_factor(F) == pytest.approx(res.objective, rel=1e-12)
    P, W = res.info["basis"], res.info["W"]
    assert np.allclose(P.T @ P, np.eye(P.shape[1]), atol=1e-10)
    assert np.allclose(P @ W @ P.T, F @ F.T, atol=1e-9 * np.abs(W).max())
    assert res.multipliers.shape == (model.m,)
    assert np.all(res.multipliers >= 0) and np.all(res.multipliers <= model.coef)
    # the proven bound (a safe shift below lambda_min) is at most the rule's bound at the exact eigenvalues
    exact = model.dual_bound(res.multipliers, upper=res.objective, repair_steps=0)
    assert res.lower_bound <= exact + 1e-12 * abs(exact) and res.lower_bound <= res.objective
    assert res.info["rounds"] == len(res.info["inner_iterations"]) == len(res.info["k"])
    assert res.n_iter == sum(res.info["inner_iterations"]) + res.info["fallback_iterations"]
    assert res.certified_gap == relative_gap(res.objective, res.lower_bound)


def test_limits_give_an_honest_unconverged_result():
    model = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = subspace(model, tol=1e-6, max_rounds=1, fallback=False)
    assert not res.converged and res.status in ("max_iter", "stalled")
    assert res.lower_bound is None or res.lower_bound <= res.objective


@pytest.mark.parametrize("kind", ["weights", "data"])
def test_scale_invariance(kind):
    s = 8.0
    base = subspace(_model(), tol=1e-4)
    if kind == "weights":     # every weight times s: M unchanged, objective times s
        scaled = subspace(_model(reg_weight=s, C_Q=s), tol=1e-4)
        M_ratio, f_ratio = 1.0, s
    else:                     # X -> sX with the trace weight times s^2: M / s^2, same objective
        scaled = subspace(_model(data_scale=s, reg_weight=s * s), tol=1e-4)
        M_ratio, f_ratio = 1.0 / s ** 2, 1.0
    assert scaled.converged == base.converged
    assert scaled.info["rounds"] == base.info["rounds"] and scaled.info["k"] == base.info["k"]
    assert scaled.objective == pytest.approx(f_ratio * base.objective, rel=1e-4)
    assert np.allclose(scaled.M, M_ratio * base.M, atol=1e-3 * M_ratio * np.abs(base.M).max())


def test_applies_to_the_trace_regularizer_only():
    inst = synthetic_qwise(10, 3, 50, 200, seed=2, name="sub")
    frob = qwise_model(inst.X, inst.constraints, **dict(inst.params, regularizer="frobenius"))
    assert not subspace_applies(frob) and not subspace_pays(frob)
    with pytest.raises(ValueError, match="trace regularizer"):
        subspace(frob)
    assert subspace_applies(_model(d=10, n=50, m=200)) and not subspace_pays(_model(d=10, n=50, m=200))


def test_solve_qwise_offers_the_subspace_method():
    inst = synthetic_qwise(14, 4, 80, 400, seed=4, name="sub")
    res = solve_qwise(inst.X, inst.constraints, method="subspace", tol=1e-3, **inst.params)
    assert res.solver == "qwise-subspace" and res.converged
    with pytest.raises(ValueError):
        solve_qwise(inst.X, inst.constraints, method="subspace", residual_tol=1e-4, **inst.params)


def test_shared_ritz_pairs_and_estimated_bound():
    from cvxmetric.linalg import lambda_min_lower_bound
    from cvxmetric.solvers.pdhg import estimated_bound, smallest_ritz_pairs

    rng = np.random.default_rng(5)
    A = rng.standard_normal((60, 60))
    S = 0.5 * (A + A.T) + 2.0 * np.eye(60)
    exact = np.linalg.eigvalsh(S)[0]
    theta, X, (value, residual) = smallest_ritz_pairs(lambda B: S @ B, rng.standard_normal((60, 6)), 2.0, 200)
    assert theta[0] >= exact - 1e-9 and value == pytest.approx(theta[0], abs=1e-6)
    assert np.allclose(X.T @ X, np.eye(X.shape[1]), atol=1e-8)
    assert lambda_min_lower_bound(S, (value, residual)) <= exact
    # each rule increases with lambda_min: the estimate at a Ritz value bounds the estimate below it
    for T in (None, 3.0):
        assert estimated_bound(5.0, -0.5, T, 2.0) >= estimated_bound(5.0, -0.7, T, 2.0)
    assert estimated_bound(5.0, 0.1, 3.0, 2.0) == 5.0
    assert estimated_bound(5.0, -1.0, 3.0, 2.0) == max(5.0 - 3.0, 5.0 * 2.0 / 3.0)


def test_scale_benchmark_prints_a_subspace_row(monkeypatch, capsys):
    from benchmarks import scale
    import cvxmetric.solvers.subspace as sub

    monkeypatch.setattr(sub, "subspace_pays", lambda model: True)
    size = scale.Size(12, 80, 400, seed=1)
    row = scale.run_ours("tiny", size, 60.0)
    assert row["solver"] == "subspace" and row["floor"] is None and row["converged"]
    assert row["t_1e3"] is not None and row["iters"] > 0
    row["peak_gb"] = 0.1
    scale.print_table([row])
    out = capsys.readouterr().out
    assert "n/a" in out and f"{row['rounds']} rounds" in out


def test_the_tail_hands_over_to_full_pdhg_and_both_paths_certify():
    model = _model(d=60, n=100, m=500, reg_weight=16.0)
    with_fallback = subspace(model, tol=1e-4)
    ranks, ks = with_fallback.info["ranks"], with_fallback.info["k"]
    assert with_fallback.converged and with_fallback.info["fallback_iterations"] > 0
    assert ks[-1] > ks[-2] and ranks[-1] <= ranks[-2] and ks[-1] < model.d   # the settled rank, k < d
    rounds_only = subspace(model, tol=1e-4, fallback=False)
    assert rounds_only.converged and rounds_only.info["fallback_iterations"] == 0
    assert relative_gap(with_fallback.objective, rounds_only.lower_bound) <= 1e-4 + 1e-9
    assert relative_gap(rounds_only.objective, with_fallback.lower_bound) <= 1e-4 + 1e-9


def test_the_hand_over_is_taken_only_where_full_steps_are_cheap(monkeypatch):
    import cvxmetric.solvers.subspace as sub

    model = _model(d=60, n=100, m=500, reg_weight=16.0)
    assert sub.full_steps_cheap(model) and not sub.subspace_pays(model)
    cheap = subspace(model, tol=1e-4)
    assert cheap.info["fallback_iterations"] > 0
    # the same model where one dense eigh of order d is modelled dear: the rounds go on alone
    monkeypatch.setattr(sub, "SUBSPACE_MIN_EIGH_SECONDS", 0.0)
    assert not sub.full_steps_cheap(model) and sub.subspace_pays(model)
    dear = subspace(model, tol=1e-4)
    assert dear.converged and dear.info["fallback_iterations"] == 0
    forced = subspace(model, tol=1e-4, fallback=True)
    assert forced.info["fallback_iterations"] == cheap.info["fallback_iterations"]
    with pytest.raises(TypeError, match="fallback"):
        subspace(model, fallback="always")


def test_the_next_pricing_block_is_the_measured_width_of_the_negative_eigenspace():
    import cvxmetric.solvers.subspace as sub

    model = _model(d=120, n=100, m=300)
    rounds = sub._Rounds(model, 1e-3, np.random.default_rng(0), None, 1000, settle=False)
    V = _orthonormal(120, 60, 4)
    rounds.block = 40
    theta = np.r_[-np.arange(30, 0, -1.0), np.arange(1.0, 11.0)]   # 30 negative of 40 Ritz values
    assert rounds.grow(theta, V[:, :40]) and rounds.P.shape[1] == 30
    assert rounds.block == 30                                       # the width found, not PRICE_BLOCK
    assert rounds.grow(-np.arange(20, 0, -1.0), V[:, 40:60])       # all negative: geometric growth
    assert rounds.P.shape[1] == 50 and rounds.block == max(sub.PRICE_BLOCK, math.ceil(sub.PRICE_GROWTH * 50))
    rounds.block = 40
    assert not rounds.grow(np.array([-1.0, 2.0]), V[:, :2])        # no direction outside P
