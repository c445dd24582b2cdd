"""Qwise vector model: the certified projected Newton solver, its certificate, the formulation's
certification hooks, and their behaviour on features scaled 1e-4..1e4."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvxmetric import ConstraintSet, ConvergenceWarning
from cvxmetric.certificates import relative_difference
from cvxmetric.instances import get_instance
from cvxmetric.vector_model import qwise_vector_model
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.formulations.qwise import build_qwise_vector
from cvxmetric.solvers.newton import NEWTON_TOL, _direction, _line_search, projected_newton
from cvxmetric.solvers.qwise import solve_qwise_vector
from cvxmetric.verification.kkt import vector_kkt, vector_kkt_truth

#: The ground truth is certified to this relative width (the ladder's tolerance in these tests).
TRUTH_RTOL = 1e-7
#: A certified lower bound may exceed a feasible value only by round-off of the two sums.
ROUNDOFF_RTOL = 1e-12

SCALES = (1e-4, 1e-2, 150.0, 1e3, 1e4)


def _instance(name, scale, keep=0.5):
    """A default vector instance with half its constraints (speed), features times ``scale``."""
    inst = get_instance("qwise_vector", name)
    idx = np.random.default_rng(0).permutation(len(inst.constraints))[: int(keep * len(inst.constraints))]
    return inst.X * scale, inst.constraints.subset(np.sort(idx)), inst.params


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", ["diag-d10", "relattr-d8"])
def test_newton_certified_on_scaled_features(name, scale):
    """Features x150 and x1e3 (where a gradient-norm stop reports "converged" at +3.7 % and at
    221 x the value at 0): Newton's
    answer is certified (gap <= tol) and lies in the certified ground-truth interval."""
    X, cons, params = _instance(name, scale)
    form = build_qwise_vector(X, cons, **params)
    truth = solve_certified(form, TRUTH_RTOL)
    assert truth.certified, [(a.rung, a.status, a.gap) for a in truth.attempts]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = solve_qwise_vector(X, cons, **params)
    assert res.converged and res.status == "converged"
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert res.measure == "certified_gap" and res.certified_gap <= res.tol == NEWTON_TOL
    f_fast = form.value_at(res.w)
    assert abs(relative_difference(f_fast, res.objective)) <= 1e-9
    assert truth.bounds.contains(f_fast, rtol=ROUNDOFF_RTOL)
    assert res.lower_bound <= truth.bounds.upper * (1 + ROUNDOFF_RTOL)
    assert truth.bounds.lower <= res.objective * (1 + ROUNDOFF_RTOL)
    # Armijo never accepts an increase (measured from the step; the recorded values of F carry round-off)
    assert np.all(np.diff(res.history) <= 1e-14 * np.abs(res.history[:-1]))
    assert vector_kkt(form.model, res.w) <= 1e-6
    assert max(vector_kkt_truth(truth.formulation, truth.solution).values()) <= 1e-5


def test_not_converged_is_reported_and_warned():
    X, cons, params = _instance("diag-d10", 1e3)
    vm = qwise_vector_model(X, cons, **params)
    with pytest.warns(ConvergenceWarning, match="certified gap"):
        res = projected_newton(vm, max_iter=2)
    assert not res.converged and res.status == "max_iter" and res.certified_gap > res.tol
    # the line search never accepts an increase: along an ascent direction it stalls at once
    w = res.w
    g = vm.gradient(w)
    p, free = _direction(vm, w, g)
    assert _line_search(vm, w, g, p, free) is not None
    assert _line_search(vm, w, g, -p, free) is None


def test_certificate_is_a_lower_bound_and_tight_at_the_optimum():
    X, cons, params = _instance("relattr-d8", 1.0)
    vm = qwise_vector_model(X, cons, **params)
    res = projected_newton(vm)
    rng = np.random.default_rng(3)
    for _ in range(5):
        w = res.w + 0.1 * rng.standard_normal(vm.e)
        assert vm.lower_bound(w) <= res.objective * (1 + ROUNDOFF_RTOL)
        assert vm.dual_value(vm.multipliers(w) + rng.standard_normal(len(vm.coef))) <= res.objective * (1 + ROUNDOFF_RTOL)
    # the strong-convexity bound equals the dual function at the point's multipliers
    w = res.w + 0.01 * rng.standard_normal(vm.e)
    assert abs(relative_difference(vm.lower_bound(w), vm.dual_value(vm.multipliers(w)))) <= 1e-12


@pytest.mark.parametrize("name", ["diag-d10", "relattr-d8"])
def test_normalize_is_exact(name):
    X, cons, params = _instance(name, 1e3, keep=0.2)
    form = build_qwise_vector(X, cons, **params)
    norm = form.normalize()
    rng = np.random.default_rng(1)
    for _ in range(3):
        u = np.abs(rng.standard_normal(form.model.e)) * 1e-3
        assert abs(relative_difference(form.value_at(norm.point_back(u)),
                                       norm.value_scale * norm.formulation.value_at(u))) <= 1e-12
        # the KKT residual of the fast point is the same in both coordinates
        a = norm.point_back(np.ones(1))[0]
        assert vector_kkt(norm.formulation.model, u) == pytest.approx(vector_kkt(form.model, a * u), rel=1e-9)
    neg = -np.ones(form.model.e)
    assert np.all(form.feasible_point(neg) >= 0) if form.model.nonneg else np.all(form.feasible_point(neg) == neg)


@st.composite
def _tiny_vector_case(draw):
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    n, d = draw(st.integers(6, 10)), draw(st.integers(1, 3))
    X = rng.standard_normal((n, d)) * draw(st.sampled_from([1e-3, 1.0, 1e3]))
    all_pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n)])
    m = draw(st.integers(1, 12))
    quads = np.hstack([all_pairs[rng.integers(0, len(all_pairs), m)], all_pairs[rng.integers(0, len(all_pairs), m)]])
    cons = ConstraintSet.from_quadruplets(quads, delta=draw(st.sampled_from([0.0, 1.0])))
    pairs = all_pairs[rng.permutation(len(all_pairs))[:6]]
    cons = cons + ConstraintSet.from_pairs(pairs[:3], similar=True, bound=1.0) \
        + ConstraintSet.from_pairs(pairs[3:], similar=False, bound=1.0)
    params = {"diagonal": draw(st.booleans()),
              "C_Q": draw(st.sampled_from([1e-3, 1.0, 10.0])), "C_P": draw(st.sampled_from([1e-3, 1.0])),
              "h": draw(st.sampled_from([0.01, 0.05, 0.5]))}
    return X, cons, params


@settings(max_examples=30)
@given(_tiny_vector_case())
def test_property_converged_means_certified(case):
    """Converged => certified gap <= tol; every bound (fast and ground truth) is below every feasible value."""
    X, cons, params = case
    form = build_qwise_vector(X, cons, **params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = solve_qwise_vector(X, cons, **params)
    if res.converged:
        assert res.certified_gap <= res.tol
    else:
        assert any(issubclass(w.category, ConvergenceWarning) for w in caught)
    sol = form.solve("CLARABEL")
    if sol.point is not None:
        upper = form.value_at(form.feasible_point(sol.point))
        scale = max(abs(upper), abs(res.objective))
        assert res.lower_bound <= upper + ROUNDOFF_RTOL * scale
        lb = form.lower_bound(sol)
        if lb is not None:
            assert lb <= res.objective + ROUNDOFF_RTOL * scale
