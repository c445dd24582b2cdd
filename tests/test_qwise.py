"""Qwise end to end: one objective everywhere, fast solvers vs cvxpy, KKT, bad input."""
import warnings

import numpy as np
import pytest

from cvxmetric import ConstraintSet, ConvergenceWarning
from cvxmetric.instances import get_instance
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.linalg import project_psd, random_psd
from cvxmetric.models import qwise_model
from cvxmetric.formulations.qwise import build_qwise, build_qwise_vector
from cvxmetric.solvers.qwise import solve_qwise, solve_qwise_vector
from cvxmetric.verification.kkt import hinge_kkt_fast, hinge_kkt_truth, vector_kkt, vector_kkt_truth
from cvxmetric.verification.tolerances import (GAP_FIRST_ORDER, GAP_NEWTON, KKT_TRUTH_TOL, SOLVER_AGREEMENT_RTOL,
                                     VALUE_AT_RTOL)

# (d, e, n, m, regularizer, C_Q): small instances where Clarabel solves in about a second
FULL_CASES = {
    "d5-trace": (5, 2, 80, 300, "trace", 10.0),
    "d10-pull": (10, 3, 150, 800, "pull", 1.0),
    "d20-frobenius": (20, 4, 300, 1500, "frobenius", 0.3),
}
SEEDS = (0, 1)


def _full_instance(case, seed):
    d, e, n, m, reg, C_Q = FULL_CASES[case]
    inst = synthetic_qwise(d, e, n, m, seed=100 * seed + d, regularizer=reg, C_Q=C_Q)
    params = dict(inst.params)
    if reg == "pull":
        rng = np.random.default_rng(seed)
        params["pull_pairs"] = np.column_stack([np.arange(n - 1), np.arange(1, n)])[rng.permutation(n - 1)[:60]]
    return inst, params


def _rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


@pytest.fixture(scope="module")
def solved():
    """Ground truth solved once per (case, seed)."""
    cache = {}

    def get(case, seed):
        if (case, seed) not in cache:
            inst, params = _full_instance(case, seed)
            form = build_qwise(inst.X, inst.constraints, **params)
            sol = form.solve("CLARABEL")
            assert sol.ok, sol.status
            cache[case, seed] = (inst, params, form, sol)
        return cache[case, seed]
    return get


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", FULL_CASES)
def test_value_at_equals_numpy_objective_at_random_M(solved, case, seed):
    inst, params, form, _ = solved(case, seed)
    rng = np.random.default_rng(seed)
    for rank in (1, inst.d):
        M = random_psd(inst.d, rank=rank, seed=rng, scale=rng.uniform(0.01, 10))
        assert _rel(form.value_at(M), form.model.value(M)) <= VALUE_AT_RTOL


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", FULL_CASES)
def test_subgradient_solver_reaches_clarabel_optimum(solved, case, seed):
    inst, params, form, sol = solved(case, seed)
    res = solve_qwise(inst.X, inst.constraints, method="subgradient", **params)
    assert res.converged
    f_fast = form.value_at(res.M)
    assert _rel(res.objective, f_fast) <= VALUE_AT_RTOL
    gap = (f_fast - sol.value) / max(1.0, abs(sol.value))
    assert -1e-6 <= gap <= GAP_FIRST_ORDER
    assert np.linalg.eigvalsh(res.M)[0] >= -1e-10
    # converged means certified: the engine's own dual bound is a true lower bound on p*
    assert res.measure == "certified_gap" and res.certified_gap <= res.tol
    assert res.lower_bound <= sol.value + 1e-6 * abs(sol.value)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", FULL_CASES)
def test_ground_truth_kkt(solved, case, seed):
    _, _, form, sol = solved(case, seed)
    res = hinge_kkt_truth(form, sol)
    assert max(res.values()) <= KKT_TRUTH_TOL, res


@pytest.mark.parametrize("case", ["d5-trace", "d10-pull"])
def test_clarabel_and_scs_agree(solved, case):
    _, _, form, sol = solved(case, 0)
    scs = form.solve("SCS")
    assert scs.ok, scs.status
    assert _rel(form.value_at(project_psd(scs.point)), sol.value) <= SOLVER_AGREEMENT_RTOL


def test_checks_have_teeth(solved):
    """A broken or stopped-early solver is caught by the same checks."""
    inst, params, form, sol = solved("d10-pull", 0)
    with pytest.warns(ConvergenceWarning):
        early = solve_qwise(inst.X, inst.constraints, method="subgradient", max_iter=5, **params)
    assert not early.converged
    assert (form.value_at(early.M) - sol.value) / max(1, abs(sol.value)) > GAP_FIRST_ORDER
    assert (form.value_at(1.2 * sol.point) - sol.value) / max(1, abs(sol.value)) > GAP_FIRST_ORDER
    assert hinge_kkt_fast(form.model, 1.5 * project_psd(sol.point)) > 0.1


def test_active_set_gives_same_answer(solved):
    inst, params, form, sol = solved("d20-frobenius", 1)
    res = solve_qwise(inst.X, inst.constraints, method="subgradient", active_set=True, recheck_every=5, **params)
    assert res.info["active_set"]
    assert (form.value_at(res.M) - sol.value) / max(1, abs(sol.value)) <= GAP_FIRST_ORDER


def test_iris_mixed_pairs_and_triplets():
    inst = get_instance("qwise", "iris-mixed")
    form = build_qwise(inst.X, inst.constraints, **inst.params)
    sol = form.solve("CLARABEL")
    res = solve_qwise(inst.X, inst.constraints, method="subgradient", **inst.params)
    assert (form.value_at(res.M) - sol.value) / max(1, abs(sol.value)) <= GAP_FIRST_ORDER


# ----------------------------------------------------------------------------- vector model
VECTOR_CASES = ["diag-d10", "relattr-d8"]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", VECTOR_CASES)
def test_vector_newton_reaches_clarabel_optimum(name, seed):
    inst = get_instance("qwise_vector", name)
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.permutation(len(inst.constraints))[: int(0.8 * len(inst.constraints))])
    cons = inst.constraints.subset(keep)
    form = build_qwise_vector(inst.X, cons, **inst.params)
    sol = form.solve("CLARABEL")
    assert sol.ok
    assert max(vector_kkt_truth(form, sol).values()) <= KKT_TRUTH_TOL
    res = solve_qwise_vector(inst.X, cons, **inst.params)
    assert res.converged
    f_fast = form.value_at(res.w)
    assert _rel(res.objective, f_fast) <= VALUE_AT_RTOL
    assert -1e-6 <= (f_fast - sol.value) / max(1, abs(sol.value)) <= GAP_NEWTON
    assert vector_kkt(form.model, res.w) <= 1e-6
    if inst.params["diagonal"]:
        assert np.all(res.w >= 0)
    w = rng.standard_normal(inst.d + 1)
    assert _rel(form.value_at(w), form.model.value(w)) <= VALUE_AT_RTOL


def test_huber_loss_matches_thesis_definitions():
    from cvxmetric.losses import huber_hinge

    h = 0.05
    t = np.linspace(-1, 2, 301)
    # L_1^h(1, t) of eq. (B.3)
    L1 = np.where(t > 1 + h, 0, np.where(np.abs(1 - t) <= h, (1 + h - t) ** 2 / (4 * h), 1 - t))
    np.testing.assert_allclose(huber_hinge(1 - t, h), L1, atol=1e-12)
    # L_0^h(1, t) of eq. (B.4)
    L0 = np.where(t > 0, 0, np.where(np.abs(-h - t) <= h, t ** 2 / (4 * h), -h - t))
    np.testing.assert_allclose(huber_hinge(-h - t, h), L0, atol=1e-12)


# ----------------------------------------------------------------------------- bad input
X5 = np.random.default_rng(0).random((10, 3))
CS = ConstraintSet.from_quadruplets([[0, 1, 2, 3], [4, 5, 6, 7]])


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(X=np.where(np.eye(10, 3) > 0, np.nan, X5), constraints=CS), ValueError, "NaN"),
    (dict(X=X5[:, 0], constraints=CS), ValueError, "2-D"),
    (dict(X=X5, constraints=ConstraintSet.from_quadruplets([[0, 1, 2, 30]])), ValueError, "n = 10"),
    (dict(X=X5, constraints=ConstraintSet.from_quadruplets(np.zeros((0, 4), int))), ValueError, "empty"),
    (dict(X=X5, constraints=CS, regularizer="nuclear"), ValueError, "regularizer"),
    (dict(X=X5, constraints=CS, C_Q=-1.0), ValueError, "C_Q"),
    (dict(X=X5, constraints=CS, reg_weight=0.0), ValueError, "reg_weight"),
    (dict(X=X5, constraints=CS, regularizer="pull"), ValueError, "pull_pairs"),
    (dict(X=X5, constraints=[[0, 1, 2, 3]]), TypeError, "ConstraintSet"),
    (dict(X="abc", constraints=CS), TypeError, "numeric"),
])
@pytest.mark.parametrize("entry", [qwise_model, build_qwise, solve_qwise])
def test_bad_input_full(entry, kwargs, exc, match):
    kw = dict(kwargs)
    with pytest.raises(exc, match=match):
        entry(kw.pop("X"), kw.pop("constraints"), **kw)


@pytest.mark.parametrize("kwargs, match", [
    (dict(h=0.0), "h"), (dict(h=0.9), "h"), (dict(C_P=np.inf), "C_P"),
])
@pytest.mark.parametrize("entry", [build_qwise_vector, solve_qwise_vector])
def test_bad_input_vector(entry, kwargs, match):
    with pytest.raises(ValueError, match=match):
        entry(X5, CS, **kwargs)


def test_bad_solver_options_and_start():
    with pytest.raises(ValueError, match="M0"):
        solve_qwise(X5, CS, M0=-np.eye(3))
    with pytest.raises(ValueError, match="max_iter"):
        solve_qwise(X5, CS, max_iter=0)
    with pytest.raises(ValueError, match="active_set"):
        solve_qwise(X5, CS, active_set="sometimes")
    with pytest.raises(ValueError, match="w0"):
        solve_qwise_vector(X5, CS, w0=np.ones(2))


def test_inputs_are_not_modified():
    X = X5.copy()
    M0 = 0.1 * np.eye(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        solve_qwise(X, CS, method="subgradient", M0=M0, max_iter=50)
    np.testing.assert_array_equal(X, X5)
    np.testing.assert_array_equal(M0, 0.1 * np.eye(3))
