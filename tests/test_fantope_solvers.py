"""Fantope bound / MM / alg. 2: fast solvers vs cvxpy (the Fantope checks of design §6), value_at, bad input."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.fantope import fantope_center, fantope_model, fantope_projector
from cvxmetric.instances import get_instance
from cvxmetric.instances.fantope import synthetic_fantope
from cvxmetric.linalg import numerical_rank, random_psd
from cvxmetric.formulations.fantope import build_fantope_bound, build_fantope_lmo, build_supergradient_gap, fantope_mm_reference
from cvxmetric.solvers.factor_subgradient import factor_subgradient
from cvxmetric.solvers.fantope_mm import fantope_mm
from cvxmetric.solvers.fantope_subgradient import fantope_subgradient
from cvxmetric.solvers.subgradient import projected_subgradient
from cvxmetric.verification import tolerances as tol
from cvxmetric.verification.fantope_checks import mm_checks


def small(d, seed, m=120):
    e = max(1, d // 4)
    return synthetic_fantope(d, e, 40, m, seed=seed, reg_weight=1.0, trace_weight=0.1, C_Q=0.3)


INSTANCES = [("small", 4, 0), ("small", 4, 1), ("default", "syn-d8-e2", None), ("default", "syn-d10-e3", None)]


def instance(kind, a, b):
    return small(a, b) if kind == "small" else get_instance("fantope", a)


def model(inst):
    return fantope_model(inst.X, inst.constraints, **inst.params)


@pytest.mark.parametrize("case", INSTANCES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_bound_fast_vs_cvxpy(case):
    inst = instance(*case)
    fm = model(inst)
    W = inst.extra["W"]
    form = build_fantope_bound(fm, W)
    sol = form.solve("CLARABEL")
    assert sol.point is not None, sol.status
    res = projected_subgradient(fm.bound(W))
    f_fast = form.value_at(res.M)
    assert abs(f_fast - res.objective) <= tol.VALUE_AT_RTOL * max(1, abs(f_fast))
    gap = (f_fast - sol.value) / max(1.0, abs(sol.value))
    assert -tol.GAP_NEGATIVE_SLACK <= gap <= tol.GAP_FIRST_ORDER


@pytest.mark.parametrize("d", [4, 10])
def test_value_at_equals_numpy_objective(d):
    inst = small(d, 3)
    fm = model(inst)
    rng = np.random.default_rng(d)
    for W in (inst.extra["W"], fantope_center(d, fm.k)):
        form = build_fantope_bound(fm, W)
        for _ in range(4):
            M = random_psd(d, seed=rng, scale=float(rng.uniform(0.01, 3)))
            assert form.value_at(M) == pytest.approx(fm.bound(W).value(M), rel=1e-9)
            # tightness through cvxpy: the bound at W(M) equals phi(M)
            assert build_fantope_bound(fm, fantope_projector(M, fm.k)).value_at(M) == pytest.approx(fm.value(M), rel=1e-9)


@pytest.mark.parametrize("case", INSTANCES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_mm_monotone_fixed_point_and_fast_vs_reference(case):
    inst = instance(*case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        r = mm_checks(model(inst), run_alg2=case[0] == "default")
    assert r["ref_converged"]
    assert r["ref_max_increase"] <= tol.MM_MONOTONE_RTOL
    assert r["fast_max_increase"] <= 0.0                         # exactly monotone
    assert -tol.MM_FIXED_POINT_RTOL <= r["fixed_point_gap"] <= tol.MM_FIXED_POINT_RTOL
    assert abs(r["fast_gap"]) <= tol.FANTOPE_MM_GAP
    assert -tol.GAP_NEGATIVE_SLACK <= r["surrogate_gap"] <= tol.FANTOPE_MM_GAP
    assert r["surrogate_value_at_err"] <= tol.VALUE_AT_RTOL
    assert r["phi_value_err"] <= 1e-12
    if "alg2_gap" in r:
        assert abs(r["alg2_gap"]) <= tol.FANTOPE_ALG2_GAP
        assert r["alg2_value_err"] <= tol.VALUE_AT_RTOL


def test_mm_trajectory_and_starts():
    inst = small(4, 5)
    fm = model(inst)
    ref = fantope_mm_reference(fm)
    assert len(ref.phi) == len(ref.Ms) == len(ref.Ws) == len(ref.bound_values)
    assert np.allclose(ref.Ws[0], fantope_center(4, fm.k))
    # each bound value is an upper bound of phi at the new iterate: phi(M^{n+1}) <= bound_n
    assert np.all(ref.phi <= ref.bound_values + 1e-6 * np.maximum(1, np.abs(ref.phi)))
    fast = fantope_mm(fm, M0=ref.M)
    assert fast.objective <= ref.objective + 1e-9
    assert np.allclose(fast.info["Ws"][0], fantope_projector(ref.M, fm.k))


def test_alg2_history_and_objective():
    inst = small(4, 6)
    fm = model(inst)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fantope_subgradient(fm, max_iter=3000)
    assert res.objective == pytest.approx(fm.value(res.M), rel=1e-12)
    assert len(res.history) == res.n_iter and res.info["k"] == fm.k
    assert np.linalg.eigvalsh(res.M)[0] >= -1e-12


def test_fantope_controls_rank():
    """Large reg_weight: the MM solution has R = 0, i.e. rank <= d - k (the reference MM; cvxpy)."""
    inst = synthetic_fantope(10, 2, 60, 200, seed=9, reg_weight=50.0, trace_weight=0.0)
    fm = model(inst)
    res = fantope_mm_reference(fm, max_iter=8)
    assert np.all(np.diff(res.phi) <= 1e-6 * np.abs(res.phi[1:]))
    assert numerical_rank(res.M, rtol=1e-6) <= 2


def test_factor_subgradient():
    inst = small(10, 2)
    base = model(inst).base
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = factor_subgradient(base, 3, seed=0, max_iter=500)
    assert numerical_rank(res.M) <= 3
    assert res.objective == pytest.approx(base.value(res.M), rel=1e-9)
    with pytest.raises(ValueError, match="rank"):
        factor_subgradient(base, 11)
    with pytest.raises(ValueError, match="L0"):
        factor_subgradient(base, 2, L0=np.ones((3, 10)))


def test_bad_input():
    inst = small(4, 0)
    fm = model(inst)
    with pytest.raises(ValueError, match="not in the Fantope"):
        build_fantope_bound(fm, np.eye(4))
    with pytest.raises(ValueError, match="not in the Fantope"):
        fantope_mm(fm, W0=2 * fantope_center(4, fm.k))
    with pytest.raises(ValueError, match="not in the Fantope"):
        fantope_mm_reference(fm, W0=np.zeros((4, 4)))
    with pytest.raises(ValueError, match="at most one"):
        fantope_mm(fm, W0=fantope_center(4, fm.k), M0=np.eye(4))
    with pytest.raises(TypeError, match="FantopeModel"):
        build_fantope_bound(fm.base, fantope_center(4, fm.k))
    with pytest.raises(ValueError, match="1 <= k <= d"):
        build_fantope_lmo(np.eye(4), 5)
    bad = np.eye(4)
    bad[0, 1] = 1.0
    with pytest.raises(ValueError, match="not symmetric"):
        build_fantope_lmo(bad, 2)
    with pytest.raises(ValueError, match="tau must be > 0"):
        build_supergradient_gap(np.eye(4), np.eye(4) / 2, 2, 0.0)
    with pytest.raises(ValueError, match="positive semidefinite"):
        fantope_mm(fm, M0=-np.eye(4))


def test_solvers_import_without_cvxpy():
    code = ("import sys; sys.modules['cvxpy'] = None\n"
            "import cvxmetric.solvers.fantope_mm, cvxmetric.solvers.fantope_subgradient, cvxmetric.solvers.factor_subgradient, cvxmetric.fantope")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_inexact_mm_inner_tolerance_schedule():
    """The inner certified gap follows the last MM fixed-point gap, between the final and the loose one."""
    from cvxmetric.solvers.fantope_mm import INNER_TOL_FRACTION, INNER_TOL_LOOSE, INNER_TOL_PROGRESS, inner_tolerance
    tol = 1e-4
    assert inner_tolerance(tol, None) == INNER_TOL_LOOSE
    assert inner_tolerance(tol, float("inf")) == INNER_TOL_LOOSE
    assert inner_tolerance(tol, 0.5) == INNER_TOL_LOOSE
    assert inner_tolerance(tol, 1e-3) == pytest.approx(INNER_TOL_PROGRESS * 1e-3)
    assert inner_tolerance(tol, 1e-6) == INNER_TOL_FRACTION * tol
    rhos = np.logspace(1, -8, 50)
    assert np.all(np.diff([inner_tolerance(tol, r) for r in rhos]) <= 0)
    assert inner_tolerance(1e-2, None) == INNER_TOL_FRACTION * 1e-2     # never looser than the final solve


def test_inexact_mm_certifies_like_strict_inner_solves():
    """The schedule changes the cost, not the certificate: each solve's tolerance follows the previous rho,
    the returned point is certified (rho <= tol from a bound of the last solve), and its objective
    agrees with MM runs whose inner solves are all held to the final tolerance."""
    from cvxmetric.solvers.fantope_mm import INNER_TOL_FRACTION, inner_tolerance
    inst = get_instance("fantope", "syn-d10-e3")
    fm = model(inst)
    fast = fantope_mm(fm)
    strict = fantope_mm(fm, inner_options={"tol": INNER_TOL_FRACTION * 1e-4})
    assert fast.converged and strict.converged
    tols, rhos = fast.info["inner_tols"], fast.info["fixed_point_gaps"]
    assert tols[0] == inner_tolerance(fast.tol, None)
    assert tols[1:] == [inner_tolerance(fast.tol, r) for r in [None] + rhos[:-1]][:len(tols) - 1]
    assert set(strict.info["inner_tols"]) == {INNER_TOL_FRACTION * 1e-4}
    assert fast.measure_value <= fast.tol and rhos[-1] == fast.measure_value
    assert fast.measure_value >= fast.info["inner_gaps"][-1] - 1e-12     # rho bounds the inner gap
    assert abs(fast.objective - strict.objective) <= 10 * fast.tol * abs(strict.objective)


def test_fast_mm_inner_pdhg_budget_and_warm_starts(monkeypatch):
    """Every PDHG inner solve gets the INNER_MAX_ITER budget; from the second on it starts from the
    previous solve's multipliers, step size and primal weight (no power iteration)."""
    import cvxmetric.solvers.fantope_mm as fmm
    calls = []
    real = fmm.INNER_SOLVERS["pdhg"]

    def spy(bound, **kw):
        calls.append(kw)
        return real(bound, **kw)
    monkeypatch.setitem(fmm.INNER_SOLVERS, "pdhg", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fantope_mm(model(small(4, 0)), max_iter=3)
        default_calls = list(calls)
        calls.clear()
        fantope_mm(model(small(4, 0)), max_iter=2, inner_options={"max_iter": 7, "tol": 1e-3})
        fixed_calls = list(calls)
    assert len(default_calls) >= 2
    assert all(kw["max_iter"] == fmm.INNER_MAX_ITER for kw in default_calls)
    assert not {"y0", "step_size", "primal_weight"} & set(default_calls[0])
    for kw in default_calls[1:]:
        assert kw["y0"] is not None and kw["step_size"] > 0 and kw["primal_weight"] > 0
    assert res.info["inner_tols"] == [kw["tol"] for kw in default_calls]
    assert fixed_calls and all((kw["max_iter"], kw["tol"]) == (7, 1e-3) for kw in fixed_calls)
