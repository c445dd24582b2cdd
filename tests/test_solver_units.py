"""The fast solvers' speed and certificate do not depend on the data's units.

Qwise, the Fantope bound and BoostMetric keep their margins and weights in their own units, so
X -> sX alone changes the program; X -> sX together with the linear term (the trace weight,
BoostMetric's nu) times s^2 is the same program with M -> M / s^2. Under that map a solver must
take the same iterations to the same certified gap at every s. (X -> sX alone, with nu fixed, is
BoostMetric with nu / s^2, which the stage-wise method must still stop on at its own rule.)
"""
import warnings

import numpy as np
import pytest

from cvxmetric.constraints import ConstraintSet
from cvxmetric.fantope import fantope_model
from cvxmetric.instances import get_instance
from cvxmetric.models import qwise_model
from cvxmetric.solvers import solve_qwise
from cvxmetric.solvers.boostmetric_stagewise import boostmetric_stagewise
from cvxmetric.solvers.factor_subgradient import factor_subgradient
from cvxmetric.solvers.subgradient import _initial_scale, projected_subgradient
from cvxmetric.verification.tolerances import GAP_BOOSTMETRIC_STAGEWISE

SCALES = (1e-4, 1.0, 1e4)


def _mostly_pairs(seed: int = 0):
    """A small Qwise problem whose constraints are mostly similar pairs with bound 0, so margin 0
    (as webpage-full's: 64 % of its margins are 0)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(24, 4))
    quads = np.array([rng.permutation(24)[:4] for _ in range(12)])
    pairs = np.array([rng.permutation(24)[:2] for _ in range(30)])
    return X, ConstraintSet.from_quadruplets(quads) + ConstraintSet.from_pairs(pairs, similar=True, bound=0.0)


def _same_run(results):
    """The runs at every scale: the same iterations (within 5 %), verdict and certified gap."""
    n = [r.n_iter for r in results]
    assert max(n) <= 1.05 * min(n), n
    assert len({r.converged for r in results}) == 1, [r.converged for r in results]
    gaps = [r.measure_value for r in results]
    assert np.allclose(gaps, gaps[1], rtol=1e-3, atol=1e-12), gaps


def test_initial_scale_moves_with_the_data_when_most_margins_are_zero():
    X, cons = _mostly_pairs()
    assert np.median(cons.delta) == 0.0   # the plain median of the margins says nothing
    s0 = [_initial_scale(qwise_model(X * s, cons)) * s ** 2 for s in SCALES]
    assert s0 == pytest.approx([s0[1]] * 3, rel=1e-12)
    # it moves with the margins too, and not with the weights
    twice = ConstraintSet(cons.idx, 2.0 * cons.delta, cons.weight)
    assert _initial_scale(qwise_model(X, twice)) == pytest.approx(2.0 * s0[1])
    assert _initial_scale(qwise_model(X, cons, C_Q=7.0, C_P=7.0, reg_weight=7.0)) == pytest.approx(s0[1])


def test_initial_scale_with_every_margin_zero_is_in_data_units():
    X, cons = _mostly_pairs()
    zero = ConstraintSet(cons.idx, np.zeros(len(cons)), cons.weight)
    s0 = [_initial_scale(qwise_model(X * s, zero)) * s ** 2 for s in SCALES]
    assert s0 == pytest.approx([s0[1]] * 3, rel=1e-12)


@pytest.mark.parametrize("name", ["hierarchy-d8"])
def test_qwise_subgradient_is_invariant_with_the_trace_weight_in_data_units(name):
    inst = get_instance("qwise", name)
    runs = []
    for s in SCALES:
        params = dict(inst.params, reg_weight=inst.params["reg_weight"] * s ** 2)
        runs.append(solve_qwise(inst.X * s, inst.constraints, method="subgradient", **params))
    _same_run(runs)
    assert all(r.converged for r in runs)


def test_subgradient_on_mostly_zero_margins_is_invariant():
    X, cons = _mostly_pairs()
    runs = [solve_qwise(X * s, cons, method="subgradient", reg_weight=0.1 * s ** 2) for s in SCALES]
    _same_run(runs)
    assert all(r.converged for r in runs)
    # scaling every weight scales the objective only: the same run
    heavy = solve_qwise(X, cons, method="subgradient", reg_weight=0.1 * 1e3, C_Q=1e3, C_P=1e3)
    assert heavy.n_iter == runs[1].n_iter and heavy.objective == pytest.approx(1e3 * runs[1].objective, rel=1e-9)


def test_fantope_bound_subgradient_is_invariant_with_its_weights_in_data_units():
    inst = get_instance("fantope", "syn-d8-e2")
    runs = []
    for s in SCALES:
        params = dict(inst.params, reg_weight=inst.params["reg_weight"] * s ** 2,
                      trace_weight=inst.params["trace_weight"] * s ** 2)
        bound = fantope_model(inst.X * s, inst.constraints, **params).bound(inst.extra["W"])
        runs.append(projected_subgradient(bound))
    _same_run(runs)


@pytest.mark.parametrize("name", ["iris-logistic", "iris-exp"])
def test_stagewise_is_invariant_with_nu_in_data_units(name):
    inst = get_instance("boostmetric", name)
    loss, nu = inst.params["loss"], inst.params["nu"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = [boostmetric_stagewise(inst.X * s, inst.constraints, loss=loss, nu=nu * s ** 2,
                                      tol=GAP_BOOSTMETRIC_STAGEWISE) for s in SCALES]
    _same_run(runs)


def test_stagewise_with_a_small_nu_stops_at_its_own_rule():
    # features x 1e4 at a fixed nu: the program with nu 1e-8 times smaller than the data's
    # squared scale. The method stops where lambda_max(A(u)) reaches nu (relative STALL_RTOL),
    # and there the logistic certificate needs no large repair.
    inst = get_instance("boostmetric", "circles-logistic")
    res = boostmetric_stagewise(inst.X * 1e4, inst.constraints, loss="logistic", nu=inst.params["nu"],
                                max_iter=2000, tol=GAP_BOOSTMETRIC_STAGEWISE)
    assert res.converged and res.certified_gap <= GAP_BOOSTMETRIC_STAGEWISE
    assert res.n_iter < 2000


def test_factor_subgradient_on_mostly_zero_margins_is_invariant():
    X, cons = _mostly_pairs()
    runs = [factor_subgradient(qwise_model(X * s, cons, reg_weight=0.1 * s ** 2), rank=2, seed=0, max_iter=3000)
            for s in SCALES]
    _same_run(runs)
