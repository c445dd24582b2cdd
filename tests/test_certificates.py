"""The one relative gap, the result contract and the solve ladder."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cvxmetric.certificates import Bounds, relative_difference, relative_gap
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.solvers.result import make_result

finite = st.floats(-1e6, 1e6, allow_nan=False)


def test_relative_gap_values():
    assert relative_gap(1.0, 1.0) == 0.0 and relative_gap(0.0, 0.0) == 0.0
    assert relative_gap(2.0, 1.0) == pytest.approx(0.5)
    assert relative_gap(None, 1.0) == math.inf and relative_gap(1.0, float("nan")) == math.inf
    # |p*| << 1 cannot hide an error: an 8.8 % error reads 8.8 %, not 8.8e-8
    assert relative_gap(1.088e-6, 1e-6) == pytest.approx(0.088 / 1.088)
    assert relative_gap(1.0, 2.0) < 0   # a bound above a feasible value


@given(finite, finite, st.floats(1e-8, 1e8))
def test_relative_gap_is_invariant_under_scaling_the_objective(u, lo, c):
    assert relative_gap(c * u, c * lo) == pytest.approx(relative_gap(u, lo), rel=1e-9, abs=1e-12)
    assert abs(relative_difference(u, lo)) <= 2.0


def test_bounds_certify_only_a_valid_interval():
    assert Bounds(1.0, 1.0 + 1e-8).certifies(1e-6) and not Bounds(1.0, 1.1).certifies(1e-6)
    assert Bounds(1.0 + 1e-13, 1.0).certifies(1e-6)        # round-off
    assert not Bounds(1.1, 1.0).certifies(1e-6)            # a bound above a feasible value
    assert not Bounds(None, 1.0).certifies(1.0)


def test_bounds_contains():
    b = Bounds(1.0, 1.0 + 1e-8)
    assert b.contains(1.0 + 5e-9, 0.0) and not b.contains(1.1, 1e-6) and b.gap < 1e-7
    assert Bounds(None, 1.0).gap == math.inf and not Bounds(None, 1.0).contains(1.0, 1.0)


def test_make_result_derives_the_verdict_from_the_measure():
    r = make_result("toy", objective=1.0, lower_bound=1.0 - 1e-9, measure="certified_gap", tol=1e-6,
                    stop_reason="stalled", M=np.eye(2))
    assert r.converged and r.status == "converged" and r.certified_gap == pytest.approx(1e-9)
    assert r.measure_value == r.certified_gap and r.success
    with pytest.warns(ConvergenceWarning, match="certified gap"):
        r = make_result("toy", objective=1.0, lower_bound=0.5, measure="certified_gap", tol=1e-6,
                        stop_reason="stalled")
    assert not r.converged and r.status == "stalled" and "stalled" in r.message
    with pytest.warns(ConvergenceWarning):
        r = make_result("toy", objective=1.0, measure="certified_gap", tol=1.0, stop_reason="max_iter")
    assert not r.converged and r.certified_gap is None   # no bound, no certificate
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = make_result("toy", objective=1.0, measure="kkt_residual", measure_value=1e-9, tol=1e-6,
                        stop_reason="stalled")
    assert r.converged
    with pytest.raises(ValueError, match="measure"):
        make_result("toy", objective=1.0, measure="improvement", tol=1.0, stop_reason="stalled")
    with pytest.raises(ValueError, match="needs measure_value"):
        make_result("toy", objective=1.0, measure="kkt_residual", tol=1.0, stop_reason="stalled")
    with pytest.raises(ValueError, match="stop_reason"):
        make_result("toy", objective=1.0, measure="kkt_residual", measure_value=0.0, tol=1.0, stop_reason="ok")


def test_ladder_certifies_by_interval_and_climbs_on_failure():
    """A formulation with a correct certificate is certified at the first rung; one whose first
    rung is sabotaged (its solver errors) climbs to the next rung instead of failing."""
    from cvxmetric.instances import get_instance
    from cvxmetric.formulations.ladder import LADDER, Rung, solve_certified
    from cvxmetric.problems import problem_of

    inst = get_instance("qwise", "syn-d5")
    form = problem_of(inst).formulation()
    truth = solve_certified(form, 1e-6)
    assert truth.certified and truth.rung == LADDER[0].name
    assert truth.bounds.lower <= truth.bounds.upper
    broken = (Rung("broken", "CLARABEL", {"max_iter": 0}),) + LADDER
    truth2 = solve_certified(form, 1e-6, ladder=broken)
    assert truth2.certified and truth2.rung != "broken" and truth2.attempts[0].rung == "broken"
    assert truth2.bounds.upper == pytest.approx(truth.bounds.upper, rel=1e-6)


def test_a_bound_above_the_objective_is_never_converged():
    with pytest.warns(ConvergenceWarning, match="wrong certificate"):
        r = make_result("toy", objective=1.0, lower_bound=1.1, measure="certified_gap", tol=1e-6,
                        stop_reason="stalled")
    assert not r.converged and r.status == "not_certified"
    r = make_result("toy", objective=1.0, lower_bound=1.0 + 1e-13, measure="certified_gap", tol=1e-6,
                    stop_reason="stalled")   # round-off
    assert r.converged
