"""The projected subgradient engine as a state object: same results as the one-function engine,
and the parts (step rule, ergodic averages, certificates, checked rows) each doing one thing."""
import math

import numpy as np
import pytest

from cvxmetric.constraints import ConstraintSet
from cvxmetric.fantope import fantope_model
from cvxmetric.instances.fantope import synthetic_fantope
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.linalg import project_psd
from cvxmetric.lmnn import ImpostorSearch, lmnn_model, lmnn_pull_model
from cvxmetric.models import qwise_model
from cvxmetric.solvers.fantope_subgradient import fantope_subgradient
from cvxmetric.solvers.subgradient import (AllRows, DualBoundCertificate, EpochAverages, EpochSchedule,
                                           ErgodicAverage, SubgradientState, ActiveSetRows, projected_subgradient)


def _qwise(d=5, e=2, n=80, m=300, reg="trace", C_Q=10.0, seed=0):
    inst = synthetic_qwise(d, e, n, m, seed=seed, regularizer=reg, C_Q=C_Q)
    return qwise_model(inst.X, inst.constraints, **inst.params)


def _lmnn(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((18, 3))
    y = np.repeat(np.arange(3), 6)
    full = lmnn_model(X, y, 2)
    base = lmnn_pull_model(X, ImpostorSearch(X, y, 2).target_pairs, 0.5)

    def oracle(M, lam, V):
        viol = full.margins(M) > 0
        return full.constraints.subset(viol), full.coef[viol]
    return base, oracle


def _fantope(seed=0):
    inst = synthetic_fantope(6, 1, 40, 120, seed=seed, reg_weight=1.0, trace_weight=0.1, C_Q=0.3)
    return fantope_model(inst.X, inst.constraints, **inst.params)


# Pinned outputs of the engine on these fixed instances (objective, iterations, tr M, bound), to
# round-off: the state object reproduces the one-function engine's outputs bit for bit.
RECORDED = {
    "qwise-trace": (lambda: projected_subgradient(_qwise()),
                    1366.425189137627, 600, 11.507751161227224, 1365.938856880112),
    "qwise-active-set": (lambda: projected_subgradient(_qwise(8, 3, 100, 600, "frobenius", 0.3), active_set=True,
                                                       recheck_every=7, max_iter=3000),
                         106.28021329020885, 250, 7.398183695897944, 106.27260238468939),
    "lmnn-oracle": (lambda: projected_subgradient(_lmnn()[0], M0=np.eye(3), oracle=_lmnn()[1], max_iter=3000),
                    133.75130785071497, 250, 0.8571423142982538, 133.69727873066046),
    "fantope-alg2": (lambda: fantope_subgradient(_fantope(), max_iter=2500),
                     24.2171866036569, 750, 4.978457792048827, None),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_same_results_as_the_one_function_engine(name):
    run, objective, n_iter, trace, lower = RECORDED[name]
    res = run()
    assert res.converged
    assert res.n_iter == n_iter
    assert res.objective == pytest.approx(objective, rel=1e-10)
    assert float(np.trace(res.M)) == pytest.approx(trace, rel=1e-8)
    if lower is None:
        assert res.lower_bound is None
    else:
        assert res.lower_bound == pytest.approx(lower, rel=1e-10)


def test_epoch_schedule_doubles_and_adapts_to_the_restart_point():
    s = EpochSchedule(0.25, 100, scale0=2.0)
    s.start(np.zeros((3, 3)))                      # ||M|| = 0 < s0: the data's scale sets the step
    assert s.step0 == pytest.approx(0.5) and s.epochs == 1
    assert s.weight(4, 10.0) == pytest.approx(0.5 / 2 / 10.0)
    assert not s.in_tail(50) and s.in_tail(51)
    s.finish()
    s.start(4.0 * np.eye(4))                       # ||M||_F = 8
    assert s.length == 200 and s.epochs == 2 and s.step0 == pytest.approx(2.0)
    assert not s.in_tail(100) and s.in_tail(101)


def test_epoch_averages_weight_the_tail_only_in_the_second_half():
    s = EpochSchedule(1.0, 4, 1.0)
    avg = EpochAverages(2)
    for t, (w, y) in enumerate([(1.0, [1, 0]), (1.0, [1, 0]), (2.0, [0, 1]), (2.0, [0, 3])], start=1):
        avg.add(s, t, w, np.array(y, float))
    assert np.allclose(avg.whole.mean(2), [2 / 6, 8 / 6])
    assert np.allclose(avg.tail.mean(2), [0.0, 2.0])
    grown = ErgodicAverage(1)
    grown.add(1.0, np.array([1.0]))
    grown.add(1.0, np.array([1.0, 2.0]))           # a row appended by an oracle starts at 0
    assert np.allclose(grown.mean(3), [1.0, 1.0, 0.0])
    assert ErgodicAverage(3).mean(3) is None


def test_step_is_a_projected_normalized_subgradient_step():
    model = _qwise()
    state = SubgradientState(model, extra=None, M0=None, max_iter=10, tol=1e-4, step_scale=0.25,
                             first_epoch=10, use_working_set=False, recheck_every=10,
                             solver_name="t", oracle=None, callback=None, time_limit=None,
                             stationarity=None, certify_every=50, warn=False)
    state.start_epoch()
    M = state.M.copy()
    y = state.multipliers().copy()
    g = state.subgradient()
    assert np.allclose(g, model.regularizer_grad(M) + model.geometry.weighted_sum(y))
    gnorm = float(np.linalg.norm(g))
    state.step(1, g, gnorm)
    w = state.schedule.step0 / gnorm
    assert np.allclose(state.M, project_psd(M - w * g))
    assert state.n_iter == 1 and state.history == [pytest.approx(model.value(state.M))]
    assert state.averages.whole.w_sum == pytest.approx(w)
    assert np.allclose(state.averages.whole.mean(model.m), y)
    assert state.best_f == min(model.value(M), model.value(state.M))


def test_certificate_keeps_the_best_bound_and_the_stop_test_reads_it():
    model = _qwise()
    res = projected_subgradient(model)
    cert = DualBoundCertificate(model)
    good, bad = ErgodicAverage(model.m), ErgodicAverage(model.m)
    good.add(1.0, res.multipliers)
    bad.add(1.0, np.zeros(model.m))
    gap_good = cert.update(model, good, res.objective, upper=res.objective)
    assert gap_good <= 5e-4 and cert.lower_bound <= res.objective
    lb = cert.lower_bound
    assert cert.update(model, bad, res.objective, upper=res.objective) == gap_good   # a worse bound is not kept
    assert cert.lower_bound == lb and cert.y is not None
    assert DualBoundCertificate(model).update(model, None, res.objective) == math.inf


def test_working_set_checks_all_rows_only_every_recheck():
    model = _qwise(8, 3, 100, 600, "frobenius", 0.3)
    M = project_psd(np.eye(8) * 0.05)
    rows = ActiveSetRows(model, M, recheck_every=3)
    assert np.array_equal(rows.working, model.margins(M) > 0)
    full = [rows.check(M * (1 + 0.5 * i), None, None, i)[1] for i in range(1, 7)]
    assert full == [False, False, True, False, False, True]
    assert rows.full_checks == 3
    assert AllRows(model, M).check(M, None, None, 1) == (pytest.approx(model.value(M) - model.regularizer(M)), True)


def test_zero_subgradient_on_a_working_set_rechecks_all_rows_and_stops():
    """g = 0 on an empty working set: the one-function engine looped forever here (until time_limit)."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, 4))
    q = rng.integers(0, 12, size=(30, 4))
    q = q[(q[:, 0] != q[:, 1]) & (q[:, 2] != q[:, 3])]
    model = qwise_model(X, ConstraintSet.from_quadruplets(q, delta=0.0), regularizer="frobenius")
    res = projected_subgradient(model, active_set=True, time_limit=20.0)
    assert res.status == "converged" and res.info["zero_subgradient"]
    assert res.info["full_checks"] == 2 and res.objective == 0.0 and res.lower_bound == 0.0
