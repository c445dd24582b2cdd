"""The PDHG hinge-model solver: agreement with Clarabel, certificates, operator facts, bad input."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvxmetric import ConstraintSet, ConvergenceWarning
from cvxmetric.generators import pairs_from_labels
from cvxmetric.hinge import QuadrupletGeometry
from cvxmetric.instances import get_instance
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.linalg import random_psd
from cvxmetric.models import HingeModel, qwise_model
from cvxmetric.formulations.hinge import build_hinge_problem
from cvxmetric.solvers.pdhg import estimate_operator_norm, pdhg
from cvxmetric.solvers.qwise import solve_qwise
from cvxmetric.verification.tolerances import GAP_FIRST_ORDER, GAP_NEGATIVE_SLACK, VALUE_AT_RTOL

#: PDHG at its default tolerances is held to a tenth of the first-order threshold (measured gaps
#: 2e-8-1e-4 at the default tolerances); at tol = residual_tol = 1e-6 (TIGHT) to 1e-5
#: (measured 2e-9-8e-7, certified gaps <= 7e-7).
GAP_PDHG_TEST = 0.1 * GAP_FIRST_ORDER
TIGHT = dict(tol=1e-6, residual_tol=1e-6)
GAP_PDHG_TIGHT = 1e-5


def _synthetic(d, e, n, m, reg, C_Q, seed, pull=0, pairs=0):
    inst = synthetic_qwise(d, e, n, m, seed=100 * seed + d, regularizer=reg, C_Q=C_Q)
    cons = inst.constraints
    if pairs:
        y = (inst.X[:, 0] > 0.5).astype(int)
        cons = cons + pairs_from_labels(y, n_similar=pairs, n_dissimilar=pairs, u=0.5, l=2.0, seed=seed)
    params = dict(inst.params)
    if pull:
        rng = np.random.default_rng(seed)
        params["pull_pairs"] = np.column_stack([np.arange(n - 1), np.arange(1, n)])[rng.permutation(n - 1)[:pull]]
    return qwise_model(inst.X, cons, **params)


def _general(seed):
    """A HingeModel that is no Qwise regularizer: R = mu W + gamma I (a Fantope-bound shape) and q > 0."""
    inst = synthetic_qwise(8, 3, 100, 400, seed=seed + 7, regularizer="trace")
    rng = np.random.default_rng(seed)
    V = np.linalg.qr(rng.standard_normal((8, 8)))[0][:, :5]
    R = 0.5 * V @ V.T + 0.1 * np.eye(8)
    geom = QuadrupletGeometry(inst.X, inst.constraints)
    coef = rng.uniform(0.5, 2.0, len(inst.constraints))
    return HingeModel(geom, coef, R, q=0.2, name="general")


# name -> (builder(seed), certificate expected)
CASES = {
    "d5-trace": (lambda s: _synthetic(5, 2, 80, 300, "trace", 10.0, s), True),
    "d10-pull": (lambda s: _synthetic(10, 3, 150, 600, "pull", 1.0, s, pull=60), True),
    "d12-frobenius-pairs": (lambda s: _synthetic(12, 3, 150, 500, "frobenius", 0.5, s, pairs=100), True),
    "d8-general": (_general, True),
    # a pull matrix of 5 pairs in d = 10 is singular on the data span: a bound exists only when
    # the repaired multipliers are exactly dual feasible (then it is certified), else KKT residual
    "d10-pull-singular": (lambda s: _synthetic(10, 3, 150, 400, "pull", 1.0, s, pull=5), False),
}
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def solved():
    cache = {}

    def get(case, seed):
        if (case, seed) not in cache:
            model = CASES[case][0](seed)
            form = build_hinge_problem(model)
            sol = form.solve("CLARABEL")
            assert sol.ok, sol.status
            cache[case, seed] = (model, form, sol)
        return cache[case, seed]
    return get


def _gap(f, p):
    return (f - p) / max(1.0, abs(p))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES)
def test_pdhg_reaches_clarabel_optimum_with_valid_certificate(solved, case, seed):
    model, form, sol = solved(case, seed)
    res = pdhg(model, **TIGHT)
    assert res.converged
    assert res.solver == "pdhg"
    f_fast = form.value_at(res.M)
    assert abs(res.objective - f_fast) / max(1.0, abs(f_fast)) <= VALUE_AT_RTOL
    assert abs(res.objective - model.value(res.M)) <= 1e-12 * max(1.0, abs(res.objective))
    assert -GAP_NEGATIVE_SLACK <= _gap(f_fast, sol.value) <= GAP_PDHG_TIGHT
    assert np.linalg.eigvalsh(res.M)[0] >= -1e-12 * max(1.0, np.linalg.norm(res.M, 2))
    y = res.info["y"]
    assert y.shape == (model.m,) and np.all(y >= 0) and np.all(y <= model.coef * (1 + 1e-12))
    lb = res.info["lower_bound"]
    if CASES[case][1]:
        assert lb is not None
        assert _gap(lb, sol.value) <= GAP_NEGATIVE_SLACK          # a valid lower bound ...
        assert res.info["certified_gap"] <= GAP_PDHG_TIGHT        # ... and a tight one
        # the returned multipliers reproduce (at least) the bound through the core certificate
        again = model.dual_bound(y, upper=res.objective)
        assert again >= lb - 1e-8 * abs(lb) and _gap(again, sol.value) <= GAP_NEGATIVE_SLACK
        assert res.lower_bound == lb and res.measure == "certified_gap"
        assert np.array_equal(res.multipliers, y)
    elif lb is None:
        assert res.measure == "kkt_residual" and res.info["certified_gap"] is None
    else:
        assert res.measure == "certified_gap" and _gap(lb, sol.value) <= GAP_NEGATIVE_SLACK


@pytest.mark.parametrize("case", ["d5-trace", "d10-pull-singular", "d8-general"])
def test_pdhg_default_tolerances(solved, case):
    model, form, sol = solved(case, 1)
    res = pdhg(model)
    assert res.converged
    assert -GAP_NEGATIVE_SLACK <= _gap(form.value_at(res.M), sol.value) <= GAP_PDHG_TEST
    if CASES[case][1]:
        assert _gap(res.info["lower_bound"], sol.value) <= GAP_NEGATIVE_SLACK
        assert res.info["certified_gap"] <= GAP_FIRST_ORDER


def test_pdhg_multipliers_match_clarabel_on_strict_constraints(solved):
    """Constraints clearly violated (inactive) at the optimum have multiplier c (0)."""
    model, form, sol = solved("d12-frobenius-pairs", 0)
    res = pdhg(model, tol=1e-7, residual_tol=1e-7)
    marg = model.margins(sol.point)
    scale = max(1.0, float(np.max(np.abs(marg))))
    hi, lo = marg > 1e-2 * scale, marg < -1e-2 * scale
    np.testing.assert_allclose(res.info["y"][hi], model.coef[hi], atol=1e-3)
    np.testing.assert_allclose(res.info["y"][lo], 0.0, atol=1e-3)
    assert _gap(res.objective, sol.value) <= 1e-6


def test_solve_qwise_pdhg_on_iris_pairs_and_triplets():
    inst = get_instance("qwise", "iris-mixed")
    from cvxmetric.formulations.qwise import build_qwise

    form = build_qwise(inst.X, inst.constraints, **inst.params)
    sol = form.solve("CLARABEL")
    res = solve_qwise(inst.X, inst.constraints, method="pdhg", **inst.params)
    assert res.solver == "qwise-pdhg" and res.converged
    assert -GAP_NEGATIVE_SLACK <= _gap(form.value_at(res.M), sol.value) <= GAP_PDHG_TEST
    assert _gap(res.info["lower_bound"], sol.value) <= GAP_NEGATIVE_SLACK


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 1.0))
def test_any_box_multiplier_gives_a_lower_bound(solved, seed, scale):
    """Weak duality: model.dual_bound(y) <= p* for every y in [0, c] (trace and q > 0 models)."""
    rng = np.random.default_rng(seed)
    for case in ("d5-trace", "d8-general"):
        model, _, sol = solved(case, 0)
        y = scale * rng.uniform(0, 1, model.m) * model.coef
        lb = model.dual_bound(y)
        assert lb is not None and lb <= sol.value * (1 + 1e-9) + 1e-9


def test_clarabel_duals_certify_the_optimum(solved):
    """Fed the exact multipliers, the certificate is tight (q > 0: exact dual function)."""
    model, _, sol = solved("d8-general", 1)
    y = np.clip(sol.duals["hinge"], 0, model.coef)
    assert abs(model.dual_bound(y) - sol.value) <= 1e-5 * max(1.0, abs(sol.value))


def test_operator_norm_estimate_and_adjointness():
    model = _synthetic(6, 2, 60, 80, "trace", 1.0, 0)
    geom = model.geometry
    A = np.stack([geom.weighted_sum(np.eye(model.m)[i]).ravel() for i in range(model.m)])
    exact = np.linalg.norm(A, 2)
    est = estimate_operator_norm(geom.values, geom.weighted_sum, model.d, n_iter=300, seed=0)
    assert est <= exact * (1 + 1e-9) and est >= 0.999 * exact
    rng = np.random.default_rng(1)
    M, y = random_psd(6, seed=rng) - random_psd(6, seed=rng), rng.standard_normal(model.m)
    assert abs(geom.values(M) @ y - np.vdot(M, geom.weighted_sum(y))) <= 1e-10 * np.linalg.norm(A) * np.linalg.norm(M) * np.linalg.norm(y)


def test_checks_have_teeth(solved):
    model, form, sol = solved("d10-pull", 0)
    with pytest.warns(ConvergenceWarning, match="pdhg"):
        early = pdhg(model, max_iter=5)
    assert not early.converged
    assert _gap(form.value_at(early.M), sol.value) > GAP_FIRST_ORDER
    assert early.info["certified_gap"] is None or early.info["certified_gap"] > GAP_FIRST_ORDER


def test_warm_start_from_solution_stops_quickly(solved):
    model, _, sol = solved("d5-trace", 1)
    cold = pdhg(model)
    warm = pdhg(model, M0=cold.M, y0=cold.info["y"])
    assert warm.converged and warm.n_iter <= cold.n_iter
    assert _gap(warm.objective, sol.value) <= GAP_PDHG_TEST


# ----------------------------------------------------------------------------- bad input
X5 = np.random.default_rng(0).random((10, 3))
CS = ConstraintSet.from_quadruplets([[0, 1, 2, 3], [4, 5, 6, 7]])
MODEL = qwise_model(X5, CS)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(max_iter=0), ValueError, "max_iter"),
    (dict(tol=0.0), ValueError, "tol"),
    (dict(residual_tol=-1.0), ValueError, "residual_tol"),
    (dict(check_every=0), ValueError, "check_every"),
    (dict(time_limit=0.0), ValueError, "time_limit"),
    (dict(primal_weight=-2.0), ValueError, "primal_weight"),
    (dict(M0=-np.eye(3)), ValueError, "M0"),
    (dict(M0=np.eye(4)), ValueError, "M0"),
    (dict(y0=np.ones(3)), ValueError, "y0"),
    (dict(y0=np.array([2.0, 0.0])), ValueError, "y0"),
    (dict(y0=np.array([np.nan, 0.0])), ValueError, "y0"),
])
def test_bad_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        pdhg(MODEL, **kwargs)


def test_bad_model_and_method():
    with pytest.raises(TypeError, match="HingeModel"):
        pdhg("model")
    with pytest.raises(ValueError, match="y"):
        MODEL.dual_bound(-np.ones(3))
    with pytest.raises(ValueError, match="y"):
        MODEL.dual_bound(np.array([np.nan, 0.0]))
    # multipliers outside the box are repaired (clipped into [0, c]), not trusted
    assert MODEL.dual_bound(-np.ones(2)) == MODEL.dual_bound(np.zeros(2))
    with pytest.raises(ValueError, match="method"):
        solve_qwise(X5, CS, method="interior-point")
    with pytest.raises(ValueError, match="regularizer"):
        solve_qwise(X5, CS, method="pdhg", regularizer="nuclear")


def test_inputs_are_not_modified():
    M0, y0 = 0.1 * np.eye(3), np.array([0.5, 0.25])
    R0 = MODEL.R.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pdhg(MODEL, M0=M0, y0=y0, max_iter=20)
    np.testing.assert_array_equal(M0, 0.1 * np.eye(3))
    np.testing.assert_array_equal(y0, [0.5, 0.25])
    np.testing.assert_array_equal(MODEL.R, R0)


# ----------------------------------------------------------------------------- state object
#: Pinned outputs of pdhg() with difference-vector operators and the certificate repaired at every
#: check, seed 0, default options: (iterations, restarts, rejected steps, objective); the state
#: object reproduces them.
BEFORE_STATE_OBJECT = {
    "d5-trace": (224, 6, 12, 1150.6322482757976),
    "d8-general": (128, 5, 7, 250.34051904039967),
    "d10-pull-singular": (192, 5, 5, 180.34624288370517),
}


@pytest.mark.parametrize("case", BEFORE_STATE_OBJECT)
def test_same_iterates_as_before_the_state_object(case, monkeypatch):
    """With the repair at every check, no polish, no ray search, the primal weight smoothed from the first
    restart and 15 power iterations for the first step (as before), the same run: counters exactly,
    objective to round-off (the shared-point operators and the factor products differ from the
    difference vectors by round-off only). With the default schedule and the polish (the weight
    still smoothed from the first restart, 15 power iterations), the same iterates: only the check at which the
    certificate stops the run may differ."""
    import cvxmetric.solvers.pdhg as mod

    n_iter, n_restarts, rejected, objective = BEFORE_STATE_OBJECT[case]
    with monkeypatch.context() as mp:
        mp.setattr(mod, "REPAIR_DECAY", math.inf)
        mp.setattr(mod, "REPAIR_BUDGET", math.inf)
        mp.setattr(mod, "POLISH_CERTIFICATE", False)
        mp.setattr(mod, "BEST_ON_RAY", False)     # the best objective of the scored points only
        mp.setattr(mod, "PRIMAL_WEIGHT_WARMUP", 0)
        mp.setattr(mod, "POWER_ITERATIONS", 15)
        res = pdhg(CASES[case][0](0))
    assert (res.n_iter, res.info["restarts"], res.info["rejected_steps"]) == (n_iter, n_restarts, rejected)
    assert abs(res.objective - objective) <= 1e-9 * abs(objective)
    with monkeypatch.context() as mp:
        mp.setattr(mod, "PRIMAL_WEIGHT_WARMUP", 0)
        mp.setattr(mod, "POWER_ITERATIONS", 15)
        default = pdhg(CASES[case][0](0))
    k = min(len(default.history), len(res.history))
    np.testing.assert_allclose(default.history[:k], res.history[:k], rtol=1e-12)
    # the polished certificate may stop it sooner (any stop is certified: converged means the
    # certified gap is within tol), never much later
    assert default.converged and default.n_iter <= res.n_iter + 2 * 16


def test_primal_weight_warmup_adopts_the_first_ratios_in_full():
    """The first PRIMAL_WEIGHT_WARMUP measured ratios ||dy'|| / ||dM|| replace the weight; later
    ones are smoothed (geometric mean with the old weight, PDLP's theta = 1/2). A rebound state
    (a working set's next round) carries the count."""
    from cvxmetric.solvers.pdhg import PRIMAL_WEIGHT_SMOOTHING, PRIMAL_WEIGHT_WARMUP, start_state

    model = CASES["d5-trace"][0](0)
    state = start_state(model)
    seen = []
    while len(seen) < PRIMAL_WEIGHT_WARMUP + 2:
        if not state.step() or state.n_iter % 16:
            continue
        cand, is_avg = state.check(1e-12)
        if not state.restart_due(cand):
            continue
        point = state._avg_point if is_avg else (state.M, state.y)
        ratio = np.linalg.norm(point[1] - state.y_last) / np.linalg.norm(point[0] - state.M_last)
        before = state.omega
        state.restart(cand, is_avg)
        theta = 1.0 if len(seen) < PRIMAL_WEIGHT_WARMUP else PRIMAL_WEIGHT_SMOOTHING
        np.testing.assert_allclose(state.omega, ratio ** theta * before ** (1.0 - theta), rtol=1e-12)
        seen.append(state.omega)
    assert state.n_weight_updates == len(seen)
    moved = state.rebind(model, state.M, state.y / state.s, np.arange(model.m))
    assert moved.n_weight_updates == len(seen) and moved.omega == state.omega


def test_state_object_driven_by_hand_reproduces_pdhg():
    """step / check / converged / restart_due / restart compose to pdhg() exactly."""
    from cvxmetric.solvers.pdhg import DEFAULT_TOL, RESIDUAL_TOL_FRACTION, PDHGState, _ScaledOperator

    model = CASES["d10-pull"][0](0)
    ref = pdhg(model, max_iter=200)
    op = _ScaledOperator(model)
    norm_K = estimate_operator_norm(op.apply, op.adjoint, model.d, seed=0)
    state = PDHGState(model, np.zeros((model.d, model.d)), np.zeros(model.m), eta=0.99 / norm_K,
                      omega=_initial_weight(model, op), operator=op)
    while state.n_iter < 200:
        if not state.step() or (state.n_iter % 16 and state.n_iter < 200):
            continue
        cand, is_avg = state.check(RESIDUAL_TOL_FRACTION * DEFAULT_TOL)
        if state.converged(cand, RESIDUAL_TOL_FRACTION * DEFAULT_TOL, DEFAULT_TOL, model.has_certificate):
            break
        if state.restart_due(cand):
            state.restart(cand, is_avg)
    assert state.n_iter == ref.n_iter and state.n_restarts == ref.info["restarts"]
    np.testing.assert_array_equal(state.best_M, ref.M)
    assert state.best_lb == ref.lower_bound


def _initial_weight(model, op):
    from cvxmetric.solvers.pdhg import _initial_primal_weight

    return _initial_primal_weight(model.R, model.coef * op.s, model.constraints.delta / op.s)


def test_factor_product_equals_full_product():
    """K M from the projection's eigenpairs (rank-r factor) equals K M (both operator paths)."""
    from cvxmetric.linalg import project_psd
    from cvxmetric.solvers.pdhg import _ScaledOperator

    model = _synthetic(12, 3, 60, 2000, "trace", 1.0, 0)
    op = _ScaledOperator(model)
    rng = np.random.default_rng(0)
    A = random_psd(12, rank=3, seed=rng) - 0.1 * np.eye(12)
    P, lam, V = project_psd(A, return_eig=True)
    assert np.count_nonzero(lam > 0) == 3
    assert model.geometry.product_cost("K", r=3) < model.geometry.product_cost("K")   # the factor path is taken
    full = op.apply(P)
    via = op.apply(P, eig=(lam, V))
    assert np.linalg.norm(full - via) <= 1e-12 * np.linalg.norm(full)


def test_incremental_adjoint_is_the_full_product():
    """K'* y updated over the changed multipliers equals the full product (to round-off), as a
    fresh array; with nothing changed it is a copy; where the change is wide it is the full product."""
    from cvxmetric.solvers.pdhg import _ScaledOperator

    model = _synthetic(10, 3, 2000, 3000, "trace", 1.0, 0)
    op = _ScaledOperator(model)
    rng = np.random.default_rng(0)
    y_old = rng.uniform(0, 1, model.m)
    KTy = op.adjoint(y_old)
    for frac in (0.0, 0.02, 0.2, 1.0):
        y_new = y_old.copy()
        rows = rng.choice(model.m, int(frac * model.m), replace=False)
        y_new[rows] = rng.uniform(0, 1, rows.size)
        chosen = op.update_rows(y_old, y_new)
        if frac <= 0.02:   # few changes: the update (the cost model prices it below a full product)
            assert chosen is not None and np.array_equal(np.sort(chosen), np.sort(rows))
        if frac == 1.0:
            assert chosen is None
        out, exact = op.adjoint_update(KTy, y_old, y_new)
        assert out is not KTy and exact == (chosen is None)
        np.testing.assert_allclose(out, op.adjoint(y_new), rtol=0, atol=1e-12 * np.abs(KTy).max())


def test_incremental_adjoint_keeps_the_iterates(monkeypatch):
    """PDHG with the K'* update where it pays takes the steps of the full product (iterates to
    round-off, the same stop) and uses the update on this many-points instance."""
    import cvxmetric.solvers.pdhg as mod

    model = _synthetic(10, 3, 2000, 3000, "trace", 1.0, 0)
    geom = model.geometry
    calls = {"rows": 0}
    full_sum = geom.weighted_sum

    def counting(coef, rows=None, **kw):
        calls["rows"] += rows is not None
        return full_sum(coef, rows=rows, **kw)

    monkeypatch.setattr(geom, "weighted_sum", counting)
    fast = pdhg(model, tol=1e-4, residual_tol=1e-4)
    assert calls["rows"] > 0 and fast.info["adjoint_updates"] > 0
    assert 0 < fast.info["adjoint_update_rows"] < model.m
    monkeypatch.setattr(mod, "INCREMENTAL_ADJOINT", False)
    full = pdhg(model, tol=1e-4, residual_tol=1e-4)
    assert (fast.n_iter, fast.converged) == (full.n_iter, full.converged) and fast.converged
    np.testing.assert_allclose(fast.history, full.history, rtol=1e-9)
    assert abs(fast.lower_bound - full.lower_bound) <= 1e-9 * abs(full.lower_bound)


# ----------------------------------------------------------------------------- congruence equilibration
def _units(lo, hi, d=5, seed=3):
    """A small trace-Qwise instance whose features are in units 10^lo ... 10^hi (X @ diag(10^t))."""
    inst = synthetic_qwise(d, 2, 60, 200, seed=seed, regularizer="trace", C_Q=1.0)
    return qwise_model(inst.X * 10.0 ** np.linspace(lo, hi, d), inst.constraints, **inst.params)


def test_congruent_twin_has_the_same_values():
    """f'(M') = f(D M' D) with D powers of two (the twin's data and R are the original's bits with
    shifted exponents), and the point maps round trip exactly; q > 0 is refused."""
    model = _units(-3, 3)
    D = 2.0 ** np.array([3, -1, 0, 5, -4])
    twin = model.congruent(D)
    Mp = random_psd(5, seed=0)
    assert twin.model.value(Mp) == pytest.approx(model.value(twin.point(Mp)), rel=1e-12)
    np.testing.assert_array_equal(twin.twin_point(twin.point(Mp)), Mp)
    with pytest.raises(ValueError, match="q = 0"):
        _synthetic(12, 3, 150, 500, "frobenius", 0.5, 0).congruent(np.ones(12))
    with pytest.raises(ValueError, match="positive"):
        model.congruent(np.array([1.0, 0.0, 1.0, 1.0, 1.0]))


def test_ruiz_block_is_the_column_norm_of_the_scaled_rows():
    """A Ruiz pass's column sums from the vectors' weighted products equal the definition on the
    explicit matrices: sum_c (diag(D A_c D) / ||D A_c D||_F)^2, a zero row (u = v) left out."""
    from cvxmetric.solvers.pdhg import _ruiz_block

    rng = np.random.default_rng(8)
    u, v = rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
    v[2] = u[2]    # A = 0
    v[4] = 0.0     # a pair row
    D = rng.uniform(0.5, 2.0, 4)
    want = np.zeros(4)
    for a, b in zip(u, v):
        S = np.diag(D) @ (np.outer(a, a) - np.outer(b, b)) @ np.diag(D)
        if np.linalg.norm(S) > 0:
            want += (np.diag(S) / np.linalg.norm(S)) ** 2
    got = D ** 4 * _ruiz_block(u.copy(), v.copy(), D * D)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_equilibration_only_where_units_spread():
    """Well-scaled data keep the plain iteration; features in units 10^-3 ... 10^3 get a twin with
    factors (powers of two) spread within the cap, its certificate kept."""
    from cvxmetric.solvers.pdhg import EQUILIBRATION_MAX_SPREAD, EQUILIBRATION_MIN_SPREAD, equilibration

    assert equilibration(_units(0, 0)) is None
    twin = equilibration(_units(-3, 3))
    assert twin is not None and twin.model.has_certificate
    np.testing.assert_array_equal(twin.D, 2.0 ** np.round(np.log2(twin.D)))
    assert EQUILIBRATION_MIN_SPREAD < twin.D.max() / twin.D.min() <= EQUILIBRATION_MAX_SPREAD
    assert equilibration(_synthetic(12, 3, 150, 500, "frobenius", 0.5, 0)) is None   # q > 0


def test_the_targeted_repair_runs_only_where_its_bound_could_certify(monkeypatch):
    """The repair only shrinks multipliers and no bound of y exceeds delta_+^T y, so a repair whose
    cap delta_+^T y is more than tol below the best objective cannot certify: the checks skip it
    (the polish off, so that they repair). Every repair that ran is one the cap allowed; the cap
    bounds a repaired bound."""
    import cvxmetric.solvers.pdhg as pdhg_module

    model = _synthetic(12, 3, 150, 500, "trace", 1.0, 0)
    monkeypatch.setattr(pdhg_module, "POLISH_CERTIFICATE", False)
    verdicts = []
    may = pdhg_module.PDHGState._repair_may_certify
    monkeypatch.setattr(pdhg_module.PDHGState, "_repair_may_certify",
                        lambda state, y_, tol: verdicts.append(may(state, y_, tol)) or verdicts[-1])
    res = pdhg(model, tol=1e-3)
    assert res.converged and True in verdicts and False in verdicts
    assert res.info["repairs"] == verdicts.count(True)
    cap = np.maximum(model.constraints.delta, 0.0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        y = model.coef * rng.uniform(0.0, 1.0, model.m)
        b, _ = model.certify(y, upper=res.objective)
        assert b is None or b <= cap @ y


def test_equilibration_on_a_sample_of_many_rows(monkeypatch):
    """Where the rows are many, the column norms come from a seeded sample: the rounded factors
    within a power of two of those from all rows; a sample that misses a feature falls back to all rows."""
    import cvxmetric.solvers.pdhg as pdhg_module

    inst = synthetic_qwise(6, 2, 300, 6000, seed=4, regularizer="trace", C_Q=1.0)
    model = qwise_model(inst.X * 10.0 ** np.linspace(-3, 3, 6), inst.constraints, **inst.params)
    full = pdhg_module.equilibration(model)
    monkeypatch.setattr(pdhg_module, "EQUILIBRATION_SAMPLE_ROWS", 1024)
    read = []
    ruiz = pdhg_module._ruiz_factors
    monkeypatch.setattr(pdhg_module, "_ruiz_factors",
                        lambda geom, rows=None: read.append(geom.m if rows is None else rows.size) or ruiz(geom, rows))
    for seed in (0, 1, np.random.default_rng(2)):
        read.clear()
        twin = pdhg_module.equilibration(model, seed)
        assert read == [1024]
        assert np.all(np.abs(np.log2(twin.D / full.D)) <= 1)   # a factor near a rounding boundary may flip
    # a feature of one new point, in the first constraint only: a sample of 1,024 rows misses it
    X = np.hstack([inst.X * 10.0 ** np.linspace(-3, 3, 6), np.zeros((inst.X.shape[0], 1))])
    idx = np.array(inst.constraints.idx)
    X = np.vstack([X, X[idx[0, 0]]])
    X[-1, -1], idx[0, 0] = 1.0, X.shape[0] - 1
    cs = ConstraintSet(idx, inst.constraints.delta, inst.constraints.weight)
    rare = qwise_model(X, cs, **inst.params)
    read.clear()
    pdhg_module.equilibration(rare, 0)
    assert read == [1024, rare.m]


def test_badly_scaled_features_take_about_the_well_scaled_iterations():
    """With the equilibration, features in units 10^-3 ... 10^3 cost a small multiple of the
    well-scaled instance's iterations (measured 32 against 96; plain PDHG took 4,096)."""
    well = pdhg(_units(0, 0))
    bad = pdhg(_units(-3, 3))
    assert well.converged and bad.converged
    assert bad.n_iter <= 2 * well.n_iter


def test_equilibrated_and_plain_paths_certify_the_same_optimum():
    """Both paths certify; each one's lower bound is below the other's objective, and the returned
    point is the original's (objective = model.value(M)); the callback sees original points."""
    model = _units(-2, 2)
    seen = []
    eq = pdhg(model, callback=lambda k, M, f: seen.append(abs(model.value(M) - f) <= 1e-9 * abs(f)))
    plain = pdhg(model, equilibrate=False)
    assert eq.converged and plain.converged and eq.measure == plain.measure == "certified_gap"
    assert eq.objective == model.value(eq.M)
    assert eq.info["congruence_factors"] is not None and plain.info["congruence_factors"] is None
    assert eq.lower_bound <= plain.objective * (1 + 1e-12) and plain.lower_bound <= eq.objective * (1 + 1e-12)
    assert seen and all(seen)
    assert np.all(np.linalg.eigvalsh(eq.M) >= -1e-12 * np.abs(eq.M).max())


@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_far_scaled_data_certify_or_warn(scale):
    """Data scaled by 1e+-30: every full-matrix and vector solver (PDHG, subgradient, Fantope MM and
    subgradient, projected Newton) returns a certified result or converged=False with a
    ConvergenceWarning, and no numpy/scipy error or warning."""
    from cvxmetric.solvers import solve_fantope, solve_qwise_vector

    inst = synthetic_qwise(4, 2, 40, 120, seed=1, regularizer="trace", C_Q=1.0)
    X = (inst.X - inst.X.mean(0)) / inst.X.std(0) * scale
    cons = inst.constraints
    runs = [lambda: solve_qwise(X, cons, method="pdhg", max_iter=3000),
            lambda: solve_qwise(X, cons, method="subgradient", max_iter=300),
            lambda: solve_qwise_vector(X, cons, diagonal=True),
            lambda: solve_qwise_vector(X, cons, diagonal=False),
            lambda: solve_fantope(X, cons, rank=2, reg_weight=1.0, inner_options={"max_iter": 3000}),
            lambda: solve_fantope(X, cons, rank=2, reg_weight=1.0, method="subgradient", max_iter=300)]
    for run in runs:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = run()
        kinds = {type(w.message) for w in caught}
        assert kinds <= {ConvergenceWarning}, kinds
        assert res.converged or ConvergenceWarning in kinds


# ----------------------------------------------------------------------------- best point on the ray
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ray_minimum_matches_a_fine_grid(seed):
    """min over alpha >= 0 of f(alpha M) (q = 0): its value is f at its alpha, and no alpha of a fine
    grid (nor 0) does better."""
    model = _synthetic(6, 2, 40, 120, "trace", 1.0, seed)
    M = random_psd(6, rank=3, seed=seed)
    alpha, value = model.ray_minimum(float(np.vdot(model.R, M)), model.geometry.values(M))
    assert alpha >= 0.0
    assert value == pytest.approx(model.value(alpha * M), rel=1e-12, abs=1e-12)
    grid = np.concatenate([[0.0], np.linspace(0.0, 4.0 * max(alpha, 1.0), 4001)[1:]])
    assert value <= min(model.value(a * M) for a in grid) + 1e-12 * abs(value)


@pytest.mark.parametrize("seed", [0, 1])
def test_first_crossing_is_the_sorted_cumulative_crossing(seed):
    """The selection (halving around medians past SELECTION_SORT_MAX keys) finds the key a full
    sort and cumulative sum find, with ties among the keys, and None beyond the total weight."""
    from cvxmetric.models import SELECTION_SORT_MAX, first_crossing

    rng = np.random.default_rng(seed)
    n = 5 * SELECTION_SORT_MAX + 17
    keys = np.round(rng.random(n) * 1000.0) / 7.0      # many ties
    weights = rng.random(n)
    order = np.argsort(keys, kind="stable")
    cum = np.cumsum(weights[order])
    for need in (0.0, 1e-3, 0.37 * cum[-1], 0.9 * cum[-1], cum[-1] * (1 - 1e-9)):
        expected = keys[order[np.flatnonzero(cum >= need)[0]]]
        assert first_crossing(keys, weights, need) == expected
        # a hint of where the crossing is changes the work, not the answer: at, near, far from it
        for near in (expected, expected * (1 + 2.0 ** -10), 1.0, 70.0, 1e6):
            assert first_crossing(keys, weights, need, near=near) == expected
    assert first_crossing(keys, weights, 1.01 * cum[-1]) is None
    assert first_crossing(keys, weights, 1.01 * cum[-1], near=1.0) is None
    assert first_crossing(np.full(n, 2.5), weights, 0.5 * cum[-1]) == 2.5
    assert first_crossing(np.full(n, 2.5), weights, 0.5 * cum[-1], near=2.5) == 2.5


def test_ray_minimum_rejects_q_and_bad_values():
    with pytest.raises(ValueError, match="q = 0"):
        HingeModel(MODEL.geometry, MODEL.coef, MODEL.R, 1.0).ray_minimum(0.0, np.zeros(MODEL.m))
    with pytest.raises(ValueError, match="values"):
        MODEL.ray_minimum(0.0, np.zeros(MODEL.m + 1))


def test_best_on_ray_leaves_the_iterates_and_only_lowers_the_best_objective(monkeypatch):
    """The ray search changes no iterate (same objectives of the current point and the average at
    every check) and the best objective it reports is never above the scored points'."""
    import cvxmetric.solvers.pdhg as pdhg_module

    model = _synthetic(8, 3, 60, 300, "trace", 1.0, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        on = pdhg(model, max_iter=96, tol=1e-8, projection="dense")
        monkeypatch.setattr(pdhg_module, "BEST_ON_RAY", False)
        off = pdhg(model, max_iter=96, tol=1e-8, projection="dense")
    assert [row[2:4] for row in on.info["trace"]] == [row[2:4] for row in off.info["trace"]]
    scored = math.inf
    for row_on, row_off in zip(on.info["trace"], off.info["trace"]):
        scored = min(scored, row_on[2], row_on[3])
        assert row_on[9] <= scored and row_off[9] == scored
    assert on.objective == pytest.approx(model.value(on.M), rel=1e-12)
    assert on.objective <= off.objective * (1 + 1e-12)


@pytest.mark.parametrize("mixed_units", [False, True])
def test_rows_sorted_by_pair_give_the_same_run_in_the_given_order(monkeypatch, mixed_units):
    """ROW_ORDER (applied here below its size threshold): the run on the rows sorted by pair
    matches the run in the given order to round-off, and its multipliers are those of the given
    rows (the model's own certificate of them is the reported bound); also on the congruence twin
    (features in mixed units: the rows of the equilibrated twin are sorted)."""
    import solvers.pdhg as pdhg_module
    from cvxmetric.instances.qwise import synthetic_qwise
    from cvxmetric.models import qwise_model

    inst = synthetic_qwise(20, 3, 300, 20_000, seed=3)
    X = inst.X * np.repeat([1.0, 2.0 ** 12], 10) if mixed_units else inst.X
    model = qwise_model(X, inst.constraints, **inst.params)
    assert model.geometry.operator_path("K")[0] == "points"
    assert (pdhg_module.equilibration(model) is not None) == mixed_units
    runs = {}
    for sort in (False, True):
        monkeypatch.setattr(pdhg_module, "ROW_ORDER", sort)
        monkeypatch.setattr(pdhg_module, "ROW_ORDER_MIN_ROWS", 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs[sort] = pdhg(model, max_iter=48, tol=1e-6)
    plain, sorted_ = runs[False], runs[True]
    assert plain.n_iter == sorted_.n_iter == 48
    assert abs(sorted_.objective - plain.objective) <= 1e-9 * abs(plain.objective)
    np.testing.assert_allclose(sorted_.multipliers, plain.multipliers, rtol=0, atol=1e-9 * model.coef.max())
    assert sorted_.lower_bound == pytest.approx(plain.lower_bound, rel=1e-9)
    bounds = [model.certify(r.multipliers, upper=r.objective, repair_steps=0)[0] for r in (plain, sorted_)]
    assert bounds[1] == pytest.approx(bounds[0], rel=1e-9)


def test_first_step_norm_from_a_sample_of_the_rows(monkeypatch):
    """Where the rows outnumber NORM_SAMPLE_SHARE samples of NORM_SAMPLE_PER_ENTRY rows per entry
    (lowered here), the adaptive rule's first ||K'|| is the sample's estimate scaled by
    sqrt(m / sample): close to the estimate on all rows, seeded, and never for a constant step."""
    import solvers.pdhg as pdhg_module
    from cvxmetric.instances.qwise import synthetic_qwise
    from cvxmetric.models import qwise_model

    inst = synthetic_qwise(10, 3, 300, 20_000, seed=3)
    model = qwise_model(inst.X, inst.constraints, **inst.params)
    op = pdhg_module._ScaledOperator(model)
    full = pdhg_module._operator_norm(op, model, 15, 0)
    monkeypatch.setattr(pdhg_module, "NORM_SAMPLE_PER_ENTRY", 40)   # 2,200 of 20,000 rows
    sampled = pdhg_module._operator_norm(op, model, 15, 0, sample=True)
    assert sampled != full and abs(sampled - full) <= 0.1 * full
    assert pdhg_module._operator_norm(op, model, 15, 0, sample=True) == sampled
    assert pdhg_module._operator_norm(op, model, 15, 0, sample=False) == full
    monkeypatch.setattr(pdhg_module, "NORM_SAMPLE_PER_ENTRY", 400)  # more than a quarter of the rows
    assert pdhg_module._operator_norm(op, model, 15, 0, sample=True) == full
    monkeypatch.setattr(pdhg_module, "NORM_SAMPLE_PER_ENTRY", 40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        constant = pdhg(model, adaptive_step=False, max_iter=1)
    assert constant.info["operator_norm"] == pytest.approx(
        pdhg_module._operator_norm(op, model, pdhg_module.POWER_ITERATIONS_CONSTANT_STEP, 0), rel=1e-12)
