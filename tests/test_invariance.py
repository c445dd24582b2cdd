"""Scale invariance of the certified ground truth and of every fast solver.

LMNN, ITML and MMC are exactly invariant under X -> sX: LMNN and MMC with M -> M / s^2, ITML with
its bounds scaled by s^2 and the same M. So the certified p* of a scaled instance must equal the
unscaled one, and every fast solver must either return the same certified answer or say that it
did not converge (``converged=False`` with a ConvergenceWarning). A raw Clarabel solve is not
enough: on the untransformed formulations it reports "optimal" 47 % off on LMNN at X * 1e-3 and
246 % off on ITML at X * 1e3, which is why the ground truth is the certified ladder.
"""
import dataclasses
import warnings

import numpy as np
import pytest

from cvxmetric.certificates import relative_difference
from cvxmetric.constraints import ConstraintSet
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.instances import get_instance
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.problems import problem_of
from cvxmetric.verification.harness import fast_solvers
from cvxmetric.verification.tolerances import TRUTH_RTOL

#: Agreement of a scaled problem's certified p* with the unscaled one (the bar of the scale-invariance tests).
SCALED_AGREEMENT = 1e-4

CASES = [("lmnn", "iris-sub"), ("itml", "iris"), ("mmc", "iris")]
SCALES = [1e-3, 1e3]


def scaled(inst, s: float):
    """The instance with X * s (ITML: margins, i.e. the bounds u and l, times s^2)."""
    X = np.asarray(inst.X) * s
    cons = inst.constraints
    if inst.method == "itml":
        cons = ConstraintSet(cons.idx, cons.delta * s ** 2, cons.weight)
    return dataclasses.replace(inst, X=X, constraints=cons, name=f"{inst.name}*{s:g}")


@pytest.fixture(scope="module")
def unscaled_truth():
    out = {}
    for method, name in CASES:
        inst = get_instance(method, name)
        out[method] = solve_certified(problem_of(inst).formulation(), TRUTH_RTOL)
    return out


@pytest.mark.parametrize("s", SCALES)
@pytest.mark.parametrize("method, name", CASES)
def test_certified_truth_is_scale_invariant(unscaled_truth, method, name, s):
    base = unscaled_truth[method]
    assert base.certified, base.attempts
    truth = solve_certified(problem_of(scaled(get_instance(method, name), s)).formulation(), TRUTH_RTOL)
    assert truth.certified, truth.attempts
    assert abs(relative_difference(truth.p_star, base.p_star)) <= SCALED_AGREEMENT


@pytest.mark.parametrize("s", SCALES)
@pytest.mark.parametrize("method, name", CASES)
def test_every_fast_solver_is_scale_invariant_or_says_so(unscaled_truth, method, name, s):
    inst = scaled(get_instance(method, name), s)
    form = problem_of(inst).formulation()
    p_star = unscaled_truth[method].p_star
    for fs in fast_solvers(problem_of(inst)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            res = fs.run(inst)
        warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
        if not res.converged:
            assert warned, f"{fs.name} at scale {s}: not converged and no ConvergenceWarning"
            continue
        f = form.value_at(res.point)
        assert relative_difference(f, p_star) <= max(fs.gap_tol, SCALED_AGREEMENT), (fs.name, s, f, p_star)
        assert relative_difference(f, p_star) >= -SCALED_AGREEMENT, (fs.name, s, f, p_star)
        assert res.measure is not None and res.measure_value <= res.tol
        if res.certified_gap is not None:
            assert res.certified_gap <= 10 * res.tol, (fs.name, s, res.certified_gap, res.tol)
