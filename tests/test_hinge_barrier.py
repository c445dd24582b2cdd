"""The dense barrier method on the dual of a hinge model, and Qwise's PDHG started from its pair."""
import numpy as np
import pytest

from cvxmetric import ConstraintSet
from cvxmetric.formulations.hinge import build_hinge_problem
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.models import qwise_model
from cvxmetric.solvers.hinge_barrier import BARRIER_GAP, dual_barrier
from cvxmetric.solvers.pdhg import DEFAULT_TOL, pdhg
from cvxmetric.solvers.qwise import BARRIER_START_MAX, solve_qwise
from cvxmetric.verification.tolerances import GAP_NEGATIVE_SLACK

#: Features in units six orders of magnitude apart (raw breast_cancer spans 1e-3..1e3), where
#: cold PDHG needs thousands of iterations.
UNITS = np.logspace(-3, 3, 6)


def _instance(seed, units=None):
    inst = synthetic_qwise(6, 2, 60, 120, seed=seed, regularizer="trace", C_Q=1.0)
    X = inst.X if units is None else inst.X * units
    return X, inst.constraints, dict(inst.params)


@pytest.fixture(scope="module", params=[(0, None), (1, "units")])
def case(request):
    seed, scaled = request.param
    X, cons, params = _instance(seed, UNITS if scaled else None)
    model = qwise_model(X, cons, **params)
    sol = build_hinge_problem(model).solve("CLARABEL")
    assert sol.ok, sol.status
    return X, cons, params, model, sol.value


def _rel(a, b):
    return (a - b) / max(1.0, abs(b))


def test_pair_brackets_the_optimum_within_the_requested_gap(case):
    *_, model, p_star = case
    bp = dual_barrier(model)
    assert bp.gap <= BARRIER_GAP
    # a valid bound (S(y) is PSD: the core certificate reproduces it exactly) and a PSD point
    assert _rel(bp.dual_value, p_star) <= GAP_NEGATIVE_SLACK
    assert model.dual_bound(bp.y) == pytest.approx(bp.dual_value, rel=1e-12)
    assert np.linalg.eigvalsh(bp.M)[0] >= -1e-12 * np.linalg.norm(bp.M, 2)
    assert bp.objective == pytest.approx(model.value(bp.M), rel=1e-12)
    assert _rel(bp.objective, p_star) >= -GAP_NEGATIVE_SLACK
    assert np.all(bp.y >= 0) and np.all(bp.y <= model.coef)


def test_pdhg_certifies_the_pair_before_its_first_step(case):
    *_, model, p_star = case
    bp = dual_barrier(model)
    res = pdhg(model, M0=bp.M, y0=bp.y)
    assert res.converged and res.n_iter == 0 and res.measure == "certified_gap"
    assert res.info["certified_gap"] <= DEFAULT_TOL
    assert _rel(res.lower_bound, p_star) <= GAP_NEGATIVE_SLACK


def test_solve_qwise_starts_from_the_barrier_pair_by_default(case):
    X, cons, params, model, p_star = case
    assert len(cons) <= BARRIER_START_MAX
    X_before = X.copy()
    res = solve_qwise(X, cons, method="pdhg", **params)
    assert np.array_equal(X, X_before)
    assert res.converged and res.solver == "qwise-pdhg" and res.info["pdhg_iterations"] == 0
    assert res.n_iter == res.info["barrier_newton_steps"] > 0 and res.info["barrier_gap"] <= BARRIER_GAP
    assert res.info["certified_gap"] <= DEFAULT_TOL
    cold = solve_qwise(X, cons, method="pdhg", barrier_start=False, **params)
    assert "barrier_newton_steps" not in cold.info and cold.n_iter > 0
    assert res.objective <= cold.objective + DEFAULT_TOL * abs(cold.objective)


def test_zero_metric_is_the_pair_where_it_is_optimal():
    X, cons, params = _instance(0)
    model = qwise_model(X * 1e-4, cons, **params)   # distances far below the margins: M = 0 is optimal
    bp = dual_barrier(model)
    assert not np.any(bp.M) and bp.newton_steps == 0 and bp.gap <= 1e-12    # the corner y = c
    np.testing.assert_array_equal(bp.y, model.coef)
    assert bp.objective == pytest.approx(float(model.coef @ np.maximum(model.constraints.delta, 0.0)))


def test_does_not_apply_without_a_positive_definite_linear_term():
    X, cons, params = _instance(0)
    assert dual_barrier(qwise_model(X, cons, regularizer="frobenius")) is None       # q > 0
    singular = qwise_model(X, cons, regularizer="pull", pull_pairs=[[0, 1]])          # R of rank 1
    assert dual_barrier(singular) is None
    with pytest.raises(ValueError, match="barrier_start=True needs"):
        solve_qwise(X, cons, method="pdhg", regularizer="frobenius", barrier_start=True)
    res = solve_qwise(X, cons, method="pdhg", regularizer="frobenius")   # "auto": plain PDHG
    assert res.converged and "barrier_newton_steps" not in res.info


def test_a_given_start_is_kept():
    X, cons, params = _instance(0)
    res = solve_qwise(X, cons, method="pdhg", M0=np.eye(X.shape[1]), **params)
    assert "barrier_newton_steps" not in res.info


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(method="pdhg", barrier_start="yes"), TypeError, "barrier_start must be"),
    (dict(method="subgradient", barrier_start=True), ValueError, "plain PDHG only"),
    (dict(method="pdhg", working_set=True, barrier_start=True), ValueError, "plain PDHG only"),
    (dict(method="pdhg", barrier_start=True, M0=np.eye(6)), ValueError, "M0/y0"),
])
def test_bad_barrier_start(kwargs, exc, match):
    X, cons, params = _instance(0)
    with pytest.raises(exc, match=match):
        solve_qwise(X, cons, **params, **kwargs)


def test_not_a_model():
    with pytest.raises(TypeError, match="HingeModel"):
        dual_barrier(ConstraintSet.from_quadruplets([[0, 1, 2, 3]]))


def test_step_budget_returns_the_last_pair_still_a_valid_bracket(case):
    *_, model, p_star = case
    bp = dual_barrier(model, max_steps=3)
    assert bp.newton_steps == 3 and bp.gap > BARRIER_GAP
    assert _rel(bp.dual_value, p_star) <= GAP_NEGATIVE_SLACK and _rel(bp.objective, p_star) >= -GAP_NEGATIVE_SLACK


def test_zero_margins_give_no_pair():
    X, cons, params = _instance(0)
    flat = ConstraintSet.from_quadruplets(cons.idx, delta=0.0)
    assert dual_barrier(qwise_model(X, flat, **params)) is None


@pytest.mark.parametrize("kwargs, match", [(dict(gap=0.0), "gap"), (dict(max_steps=0), "max_steps")])
def test_bad_options(kwargs, match):
    X, cons, params = _instance(0)
    with pytest.raises(ValueError, match=match):
        dual_barrier(qwise_model(X, cons, **params), **kwargs)
