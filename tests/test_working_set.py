"""Working sets with certificates (cvxmetric.solvers.working_set): the same answer as plain PDHG and
as the certified cvxpy ground truth, a certificate of the *full* problem, dropped constraints
re-added, one mechanism for explicit models (Qwise, Fantope bound, LMNN materialised) and LMNN's
implicit triplet set."""
import warnings
from functools import lru_cache

import numpy as np
import pytest

from cvxmetric.certificates import relative_difference
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.fantope import fantope_model
from cvxmetric.formulations.hinge import build_hinge_problem
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.formulations.lmnn import build_lmnn
from cvxmetric.formulations.qwise import build_qwise
from cvxmetric.generators import gaussian_classes, quadruplets_from_metric
from cvxmetric.instances import get_instance
from cvxmetric.linalg import psd_factor, random_psd
from cvxmetric.lmnn import ImpostorSearch
from cvxmetric.models import qwise_model
from cvxmetric.solvers.lmnn import solve_lmnn
from cvxmetric.solvers.pdhg import pdhg, start_state
from cvxmetric.solvers.qwise import solve_qwise
from cvxmetric.solvers.working_set import ImpostorPool, ModelPool, Scan, WorkingSet, solve_working_set, sorted_union

#: Relative width of the ground truth's certified interval.
TRUTH_RTOL = 1e-6
#: The working set's answer and the truth agree to the certified gap the solver is held to.
AGREE_RTOL = 1e-3


@lru_cache(maxsize=None)
def _qwise_truth(name):
    inst = get_instance("qwise", name)
    truth = solve_certified(build_qwise(inst.X, inst.constraints, **inst.params), TRUTH_RTOL)
    assert truth.certified
    return inst, truth


def _assert_full_certificate(res, model, truth):
    """The result is certified for the full problem: objective = full f(M), bound <= p*, gap <= tol."""
    assert res.converged and res.measure == "certified_gap" and res.certified_gap <= res.tol
    assert res.objective == pytest.approx(model.value(res.M), rel=1e-12)
    assert res.lower_bound <= truth.bounds.upper * (1 + TRUTH_RTOL)
    assert abs(relative_difference(res.objective, truth.bounds.upper)) <= AGREE_RTOL


@pytest.mark.parametrize("name", ["syn-d5", "iris-mixed", "hierarchy-d8"])
def test_qwise_working_set_matches_plain_pdhg_and_ground_truth(name):
    inst, truth = _qwise_truth(name)
    model = qwise_model(inst.X, inst.constraints, **inst.params)
    ws = solve_qwise(inst.X, inst.constraints, method="pdhg", working_set=True, max_add=50, **inst.params)
    plain = solve_qwise(inst.X, inst.constraints, method="pdhg", **inst.params)
    assert ws.solver == "qwise-pdhg-ws"
    _assert_full_certificate(ws, model, truth)
    assert abs(relative_difference(ws.objective, plain.objective)) <= AGREE_RTOL
    # the multipliers live on all rows of the full model, zero outside the working set
    assert ws.multipliers.shape == (model.m,)
    assert np.all(ws.multipliers >= 0) and np.all(ws.multipliers <= model.coef)
    assert model.dual_bound(ws.multipliers, upper=ws.objective) >= ws.lower_bound * (1 - 1e-9) - 1e-12
    assert ws.n_iter == sum(ws.info["pdhg_iterations"])


def test_cost_follows_the_working_set():
    """Most constraints satisfied with room at the optimum: PDHG never runs on all of them."""
    rng = np.random.default_rng(0)
    d = 6
    X = rng.random((120, d))
    T = random_psd(d, rank=2, seed=1)
    cons = quadruplets_from_metric(X, T, 3000, seed=2)
    model = qwise_model(X, cons, regularizer="trace", C_Q=1.0)
    truth = solve_certified(build_hinge_problem(model), TRUTH_RTOL)
    res = solve_working_set(ModelPool(model), np.zeros((d, d)), max_add=200)
    _assert_full_certificate(res, model, truth)
    assert max(res.info["working_set_sizes"]) < model.m / 2
    assert res.info["working_set_size"] == len(res.info["working_set"]) < model.m


def test_fantope_bound_model():
    inst = get_instance("fantope", "syn-d8-e2")
    p = inst.params
    fm = fantope_model(inst.X, inst.constraints, **p)
    bound = fm.bound_at(random_psd(inst.d, seed=3))
    truth = solve_certified(build_hinge_problem(bound), TRUTH_RTOL)
    res = solve_working_set(ModelPool(bound), np.zeros((inst.d, inst.d)), max_add=40)
    _assert_full_certificate(res, bound, truth)
    plain = pdhg(bound)
    assert abs(relative_difference(res.objective, plain.objective)) <= AGREE_RTOL


def test_certificate_is_for_the_full_problem_not_the_working_set():
    """One round on a small working set: the restricted problem is solved well, but the result
    reports the full objective and is not converged while the full gap is large."""
    inst, truth = _qwise_truth("iris-mixed")
    model = qwise_model(inst.X, inst.constraints, **inst.params)
    with pytest.warns(ConvergenceWarning):
        res = solve_working_set(ModelPool(model), np.zeros((inst.d, inst.d)), max_add=20, max_rounds=1,
                                round_iter=2000)
    assert res.info["working_set_size"] == 20
    assert not res.converged and res.info["violated_outside_working_set"] > 0
    assert res.objective == pytest.approx(model.value(res.M), rel=1e-12)
    assert res.objective > truth.bounds.upper * (1 + AGREE_RTOL)    # the restricted optimum is worse over all
    assert res.lower_bound <= truth.bounds.upper * (1 + TRUTH_RTOL)  # and the bound still holds for p*


def test_working_set_drops_and_readds():
    """Unit rules: idle constraints (far from the margin, zero multiplier) leave after
    ``drop_after`` passes; one that is near the margin again at a later pass comes back."""
    ws = WorkingSet(np.array([0, 1, 2, 5]), drop_after=1)
    # pass 1: only 0 near; 1 has a positive multiplier (kept), 2 and 5 idle -> dropped
    scan = Scan(np.array([0, 7]), np.array([0.5, 2.0]), 0.0)
    rows, n_add, n_drop = ws.update(scan, np.array([0.3, 0.2, 0.0, 0.0]), max_add=0)
    np.testing.assert_array_equal(ws.ids, [0, 1, 7])
    np.testing.assert_array_equal(rows, [0, 1, -1])   # the old positions of 0 and 1; 7 is new
    assert (n_add, n_drop, ws.readded) == (1, 2, 0)
    # pass 2: 2 is violated again -> re-added (multiplier 0), 1 idle with y = 0 now -> dropped
    scan = Scan(np.array([0, 2, 7]), np.array([0.1, 0.4, -0.01]), 0.0)
    rows, n_add, n_drop = ws.update(scan, np.array([0.3, 0.0, 0.1]), max_add=0)
    np.testing.assert_array_equal(ws.ids, [0, 2, 7])
    np.testing.assert_array_equal(rows, [0, -1, 2])
    assert (n_add, n_drop, ws.readded, ws.n_dropped) == (1, 1, 1, 3)
    # never drop with drop_after = 0
    keep = WorkingSet(np.array([3, 4]), drop_after=0)
    keep.update(Scan(np.zeros(0, dtype=np.int64), np.zeros(0), 0.0), np.zeros(2), max_add=0)
    np.testing.assert_array_equal(keep.ids, [3, 4])


def test_aggressive_dropping_readds_and_still_certifies():
    """drop_after=1 and short rounds: constraints are dropped, some come back, the answer is the truth."""
    inst, truth = _qwise_truth("syn-d5")
    model = qwise_model(inst.X, inst.constraints, **inst.params)
    res = solve_working_set(ModelPool(model, slack=0.0), np.zeros((inst.d, inst.d)), drop_after=1,
                            round_iter=8, max_add=30)
    assert sum(res.info["dropped"]) > 0 and res.info["readded"] > 0
    _assert_full_certificate(res, model, truth)


@pytest.mark.parametrize("impostors", ["search", "materialised"])
def test_lmnn_implicit_and_materialised_pools_agree_with_ground_truth(impostors):
    inst = get_instance("lmnn", "wine-sub")
    p = {k: inst.params[k] for k in ("n_neighbors", "regularization", "margin")}
    form = build_lmnn(inst.X, inst.y, **p)
    truth = solve_certified(form, TRUTH_RTOL)
    res = solve_lmnn(inst.X, inst.y, method="pdhg", impostors=impostors, **p)
    _assert_full_certificate(res, form.model, truth)
    search = ImpostorSearch(inst.X, inst.y, p["n_neighbors"], margin=p["margin"])
    assert res.objective == pytest.approx(search.objective(res.M, p["regularization"]), rel=1e-12)


def test_lmnn_start_far_from_the_margin_is_shrunk():
    """M0 so large that no triplet is near the margin: the first working set comes from a shrunk start."""
    inst = get_instance("lmnn", "iris-sub")
    p = {k: inst.params[k] for k in ("n_neighbors", "regularization", "margin")}
    truth = solve_certified(build_lmnn(inst.X, inst.y, **p), TRUTH_RTOL)
    res = solve_lmnn(inst.X, inst.y, method="pdhg", M0=1e6 * np.eye(inst.d), **p)
    assert res.converged and abs(relative_difference(res.objective, truth.bounds.upper)) <= AGREE_RTOL


# ----------------------------------------------------------------------------- options
def _small():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.standard_normal((6, 3)) + 1.5 * c for c in range(3)])
    return X, np.repeat(np.arange(3), 6)


@pytest.mark.parametrize("kw, match", [
    ({"method": "pdhg", "step_scale": 0.1}, "'step_scale' does not apply to method='pdhg'"),
    ({"method": "subgradient", "round_iter": 3}, "'round_iter' does not apply to method='subgradient'"),
    ({"method": "subgradient", "ws_slack": 0.2}, "'ws_slack' does not apply"),
    ({"impostors": "materialised", "max_triplets": 10}, "max_triplets"),
    ({"method": "pdhg", "impostors": "materialised", "max_triplets": 10}, "max_triplets"),
    ({"method": "pdhg", "drop_after": -1}, "drop_after"),
    ({"method": "pdhg", "max_add": 1.5}, "max_add"),
])
def test_lmnn_options_of_the_other_method_are_rejected(kw, match):
    X, y = _small()
    with pytest.raises((ValueError, TypeError), match=match):
        solve_lmnn(X, y, 2, **kw)


def test_qwise_working_set_options():
    inst = get_instance("qwise", "syn-d5")
    with pytest.raises(ValueError, match="working_set=True applies to method='pdhg'"):
        solve_qwise(inst.X, inst.constraints, method="subgradient", working_set=True, **inst.params)
    with pytest.raises(TypeError, match="working_set must be True or False"):
        solve_qwise(inst.X, inst.constraints, method="pdhg", working_set="yes", **inst.params)
    with pytest.raises(ValueError, match="ws_slack"):
        solve_qwise(inst.X, inst.constraints, method="pdhg", working_set=True, ws_slack=-1.0, **inst.params)
    with pytest.raises(ValueError, match="round_iter apply to method='pdhg' with working_set=True only"):
        solve_qwise(inst.X, inst.constraints, method="pdhg", round_iter=4, **inst.params)
    for loop_option in ("y0", "warn"):   # the loop's own business: rejected by the one option check
        with pytest.raises(ValueError, match=f"unknown option '{loop_option}' for method='pdhg'"):
            solve_qwise(inst.X, inst.constraints, method="pdhg", working_set=True, **{loop_option: None},
                        **inst.params)
    with pytest.raises(TypeError, match="pool must be a ConstraintPool"):
        solve_working_set(qwise_model(inst.X, inst.constraints), np.zeros((5, 5)))


def test_inputs_are_not_modified():
    inst = get_instance("qwise", "syn-d5")
    M0 = 0.1 * np.eye(inst.d)
    X0, M00 = inst.X.copy(), M0.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        solve_qwise(inst.X, inst.constraints, method="pdhg", working_set=True, M0=M0, max_rounds=2, **inst.params)
    np.testing.assert_array_equal(inst.X, X0)
    np.testing.assert_array_equal(M0, M00)


def _small_qwise(m=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((60, 5))
    cons = quadruplets_from_metric(X, random_psd(5, rank=2, seed=seed + 1), m, seed=seed + 2)
    return qwise_model(X, cons, regularizer="trace", C_Q=1.0)


def test_pdhg_continues_from_its_state_exactly():
    """Two calls advancing one state (start_state, then pdhg(state=...) twice) make the same
    iterates as one call."""
    model = _small_qwise()
    one = pdhg(model, max_iter=64, warn=False)
    state = start_state(model)
    first = pdhg(model, state=state, max_iter=32, warn=False)
    second = pdhg(model, state=state, max_iter=32, warn=False)
    assert (first.n_iter, second.n_iter, one.n_iter) == (32, 64, 64)
    np.testing.assert_array_equal(second.M, one.M)
    np.testing.assert_array_equal(second.multipliers, one.multipliers)
    assert second.objective == one.objective and second.lower_bound == one.lower_bound
    assert len(first.history) == len(first.info["trace"]) == 2   # a result's record does not grow when its state goes on
    np.testing.assert_array_equal(second.history, one.history)
    with pytest.raises(ValueError, match="state must be a PDHGState of this model"):
        pdhg(model.subset(np.arange(10)), state=state)


def test_rebind_carries_the_state_row_by_row():
    """rebind onto another working set: new rows start at 0, kept rows keep their multipliers (also in
    the average), step size, primal weight and counters carry, the best point and bound reset."""
    model = _small_qwise()
    state = start_state(model.subset(np.arange(0, 300)))
    pdhg(state.model, state=state, max_iter=40, warn=False)
    ids = np.arange(100, 400)                      # rows 100..299 kept, 300..399 new
    rows = np.where(ids < 300, ids, -1)
    sub = model.subset(ids)
    y = np.where(rows >= 0, state.y[np.maximum(rows, 0)] / state.s[np.maximum(rows, 0)], 0.0)
    new = state.rebind(sub, state.M, y, rows)
    assert (new.eta, new.omega, new.n_iter, new.n_restarts) == (state.eta, state.omega, state.n_iter, state.n_restarts)
    assert new.best_lb is None and new.best_f == np.inf
    np.testing.assert_allclose(new.y[:200], state.y[100:300], rtol=1e-12)
    assert np.all(new.y[200:] == 0) and np.all(new.y_sum[200:] == 0)
    np.testing.assert_allclose(new.y_sum[:200], state.y_sum[100:300], rtol=1e-12)
    np.testing.assert_allclose(new.KM, sub.geometry.values(state.M) / new.s, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(new.KTy_sum, sub.geometry.weighted_sum(new.y_sum / new.s), rtol=1e-9, atol=1e-12)


def test_working_set_runs_one_pdhg_state_across_rounds():
    """The rounds continue one PDHG state: the iterations of all rounds add up to the state's
    counter, and the rounds' trace is in the result."""
    model = _small_qwise(m=1500)
    res = solve_working_set(ModelPool(model), np.zeros((model.d, model.d)), max_add=200, round_iter=8)
    assert res.converged and res.info["rounds"] > 1
    assert res.n_iter == sum(res.info["pdhg_iterations"])
    assert res.info["model"] is not None and len(res.info["trace"]) == res.info["rounds"]
    gaps = [row[-1] for row in res.info["trace"]]
    assert gaps[-1] == res.info["certified_gap"] <= res.tol


def test_working_set_is_asked_for_and_only_with_pdhg():
    """Plain PDHG is the default (sooner to the default tol at most sizes, benchmarks.working_set); the working
    set runs when asked for, with PDHG only; its options without it, and bad values, are errors."""
    inst = get_instance("qwise", "syn-d5")
    assert solve_qwise(inst.X, inst.constraints, method="pdhg", **inst.params).solver == "qwise-pdhg"
    assert solve_qwise(inst.X, inst.constraints, method="pdhg", working_set=True,
                       **inst.params).solver == "qwise-pdhg-ws"
    with pytest.raises(ValueError, match="drop_after apply to method='pdhg' with working_set=True only"):
        solve_qwise(inst.X, inst.constraints, method="pdhg", drop_after=1, **inst.params)
    with pytest.raises(TypeError, match="working_set must be True or False"):
        solve_qwise(inst.X, inst.constraints, method="pdhg", working_set="auto", **inst.params)
    with pytest.raises(ValueError, match="applies to method='pdhg' only"):
        solve_qwise(inst.X, inst.constraints, method="subgradient", working_set=True, **inst.params)
    y0 = np.zeros(len(inst.constraints))
    with pytest.raises(ValueError, match="y0"):
        solve_qwise(inst.X, inst.constraints, method="pdhg", working_set=True, y0=y0, **inst.params)


@pytest.mark.parametrize("call", ["qwise", "lmnn", "loop"])
def test_a_pdhg_state_is_not_a_user_option(call):
    """``state`` belongs to the working set's loop (and the facades build their models): every
    facade rejects it with the option check's message, not a TypeError from inside."""
    model = _small_qwise()
    state = start_state(model)
    inst = get_instance("qwise", "syn-d5")
    with pytest.raises(ValueError, match="state"):
        if call == "qwise":
            solve_qwise(inst.X, inst.constraints, method="pdhg", state=state, **inst.params)
        elif call == "lmnn":
            X = np.random.default_rng(0).standard_normal((30, 3))
            solve_lmnn(X, np.repeat([0, 1, 2], 10), n_neighbors=2, method="pdhg", state=state)
        else:
            solve_working_set(ModelPool(model), np.zeros((model.d, model.d)), state=state)


def test_rebind_keeps_a_constant_step_valid_and_checks_rows():
    """Without the adaptive rule the step must stay below 1/||K'|| of the model it runs on: rebind
    onto a larger working set recomputes it. The rank hint carries; bad ``rows`` are a ValueError."""
    from cvxmetric.solvers.pdhg import estimate_operator_norm

    model = _small_qwise()
    state = start_state(model.subset(np.arange(20)), adaptive_step=False)
    pdhg(state.model, state=state, max_iter=16, warn=False)
    rows = np.where(np.arange(model.m) < 20, np.arange(model.m), -1)
    state.op.n_updates, state.op.updated_rows = 3, 30     # the K'* update counters carry over
    new = state.rebind(model, state.M, np.zeros(model.m), rows)
    assert new.eta * estimate_operator_norm(new.op.apply, new.op.adjoint, model.d, n_iter=1000, seed=1) < 1.0
    assert new.rank == state.rank
    assert (new.op.n_updates, new.op.updated_rows) == (3, 30)
    new.history.append(0.0)
    assert len(new.history) == len(state.history) + 1   # the old state's record is its own
    with pytest.raises(ValueError, match="rows must be"):
        state.rebind(model, state.M, np.zeros(model.m), rows[:-1])
    with pytest.raises(ValueError, match="rows must be"):
        state.rebind(model, state.M, np.zeros(model.m), np.full(model.m, 20))


def test_a_result_does_not_share_arrays_with_its_state():
    """Editing a result in place leaves the state that may continue untouched."""
    model = _small_qwise()
    state = start_state(model)
    res = pdhg(model, state=state, max_iter=32, warn=False)
    assert not np.shares_memory(res.M, state.best_M) and not np.shares_memory(res.M, state.M)
    if state.cert_y is not None:
        assert not np.shares_memory(res.multipliers, state.cert_y)
    U, R_U, L_inv = model.span_basis()
    if R_U is not None:
        R_U[...] = 0.0
        assert np.any(model.span_basis()[1])   # the cached basis behind the bounds is intact


# ----------------------------------------------------------------------------- LMNN's working-set geometry
def _lmnn_pool(seed, d):
    X, y = gaussian_classes(60, d, 3, n_informative=2, seed=seed)
    return ImpostorPool(ImpostorSearch(X, y, 3), 0.5)


def _dense_K(X, triplets, M):
    """<M, C_ij - C_il> per triplet, from the definition."""
    u, v = X[triplets[:, 0]] - X[triplets[:, 1]], X[triplets[:, 0]] - X[triplets[:, 2]]
    return np.einsum("ij,jk,ik->i", u, M, u) - np.einsum("ij,jk,ik->i", v, M, v)


def _dense_Kt(X, triplets, c):
    """sum_q c_q (C_ij - C_il), from the definition."""
    u, v = X[triplets[:, 0]] - X[triplets[:, 1]], X[triplets[:, 0]] - X[triplets[:, 2]]
    return (u * c[:, None]).T @ u - (v * c[:, None]).T @ v


@pytest.mark.parametrize("seed, d", [(0, 3), (1, 7), (2, 12)])
def test_lmnn_working_set_operators_through_the_points_match_the_definition(seed, d):
    """K and K* of a restricted LMNN model on the points path (pair table, no difference vector per
    triplet) equal the dense definition, at a random PSD M and random coefficients."""
    pool = _lmnn_pool(seed, d)
    rng = np.random.default_rng(seed)
    M = random_psd(d, seed=seed)
    near = pool.scan(0.05 * M).ids   # a small metric: most triplets are near the margin
    ids = np.sort(rng.choice(near, size=min(300, near.size), replace=False))
    geom = pool.submodel(ids).geometry
    triplets = pool.search.decode(ids)
    c = rng.uniform(-1.0, 1.0, ids.size)
    scale = np.abs(_dense_K(pool.search.X, triplets, M)).max()
    np.testing.assert_allclose(geom.values(M, path="points"), _dense_K(pool.search.X, triplets, M),
                               rtol=1e-10, atol=1e-10 * scale)
    L = psd_factor(M)
    np.testing.assert_allclose(geom.values_factor(L, path="points"), _dense_K(pool.search.X, triplets, M),
                               rtol=1e-10, atol=1e-10 * scale)
    G = _dense_Kt(pool.search.X, triplets, c)
    np.testing.assert_allclose(geom.weighted_sum(c, path="points"), G, rtol=1e-10, atol=1e-10 * np.abs(G).max())
    assert geom._U is None and geom._V is None   # nothing of size (triplets, d) was formed


def test_lmnn_restricted_model_built_from_the_previous_one_equals_a_fresh_one():
    """A working set that keeps some rows, drops others and adds new ones: the restricted model
    built from the previous one has the rows (in id order), weights and Frobenius norms of one
    built from scratch."""
    pool = _lmnn_pool(3, 5)
    rng = np.random.default_rng(3)
    near = pool.scan(0.05 * np.eye(5)).ids
    first = np.sort(rng.choice(near, size=200, replace=False))
    sub = pool.submodel(first)
    sub.geometry.frobenius_norms()   # as PDHG does: the next model reuses them
    second = sorted_union(first[::2], np.sort(rng.choice(np.setdiff1d(near, first), size=100, replace=False)))
    grown = pool.submodel(second)
    fresh = ImpostorPool(pool.search, 0.5).submodel(second)
    np.testing.assert_array_equal(grown.constraints.idx, fresh.constraints.idx)
    np.testing.assert_array_equal(grown.coef, fresh.coef)
    np.testing.assert_array_equal(grown.constraints.delta, fresh.constraints.delta)
    np.testing.assert_allclose(grown.geometry.frobenius_norms(), fresh.geometry.frobenius_norms(), rtol=1e-14)
    assert grown.geometry._norms is not None   # carried over, not recomputed on demand
    np.testing.assert_array_equal(pool.submodel(second[5:]).constraints.idx, fresh.constraints.idx[5:])


@pytest.mark.parametrize("sizes", [(0, 0), (0, 5), (7, 0), (50, 40), (300, 1)])
def test_sorted_union_is_union1d_of_sorted_ids(sizes):
    rng = np.random.default_rng(sum(sizes))
    a, b = (np.unique(rng.integers(0, 80, k)) for k in sizes)
    out = sorted_union(a, b)
    np.testing.assert_array_equal(out, np.union1d(a, b))
    assert out.dtype == np.int64
