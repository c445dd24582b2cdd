"""The complementarity polish of hinge multipliers (HingeModel.complementary_multipliers).

It is a heuristic that proposes multipliers; the certificate (HingeModel.certify) judges them.
These tests check that near a solution it proposes exactly dual-feasible multipliers whose bound is
within the primal error of p* (where the targeted repair lags), that it stays in the box, declines
where it does not apply, scales with the problem, and that PDHG with it stops no later and
certifies only valid bounds.
"""
import warnings

import numpy as np
import pytest

from cvxmetric.certificates import relative_gap
from cvxmetric.hinge import QuadrupletGeometry
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.hinge_certificates import EIG_ROUNDOFF
from cvxmetric.models import HingeModel, qwise_model
from cvxmetric.solvers.pdhg import pdhg, start_state


def _model(**kw):
    inst = synthetic_qwise(10, 3, 300, 2000, seed=3)
    params = dict(inst.params, **kw)
    return qwise_model(inst.X, inst.constraints, **params)


@pytest.fixture(scope="module")
def near_solution():
    """A PDHG candidate after 112 iterations (relative objective error ~6e-5) and p* bracketed
    to 1e-8 (certified lower bound, objective)."""
    model = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pdhg(model, tol=1e-8, residual_tol=1e-9, max_iter=20_000)
        state = start_state(model)
        pdhg(model, state=state, max_iter=112, warn=False)
    assert ref.converged
    cand = state.last
    return model, cand.M, cand.y / state.s, state.best_f, (ref.lower_bound, ref.objective)


def test_polished_multipliers_are_dual_feasible_and_tight(near_solution):
    model, M, y, upper, (p_low, p_up) = near_solution
    yp = model.complementary_multipliers(M, y)
    assert yp.shape == (model.m,) and np.all(yp >= 0) and np.all(yp <= model.coef)
    S = model.R + model.geometry.weighted_sum(yp)
    lam = np.linalg.eigvalsh(0.5 * (S + S.T))
    assert lam[0] >= -1e2 * EIG_ROUNDOFF * np.max(np.abs(lam))     # PSD up to round-off
    polished = model.dual_bound(yp, upper=upper, repair_steps=0)
    repaired = model.dual_bound(y, upper=upper)
    assert polished <= p_up                                        # a valid bound
    # measured: 3.4e-5 below p* where the repair of the same multiplier is 6.1e-4 below
    assert relative_gap(p_low, polished) <= 1e-4
    assert relative_gap(p_up, polished) < 0.2 * relative_gap(p_up, repaired)


def test_inputs_are_not_modified(near_solution):
    model, M, y, _, _ = near_solution
    M0, y0 = M.copy(), y.copy()
    model.complementary_multipliers(M, y)
    np.testing.assert_array_equal(M, M0)
    np.testing.assert_array_equal(y, y0)


def test_declines_where_it_does_not_apply(near_solution):
    model, M, y, _, _ = near_solution
    d = model.d
    assert model.complementary_multipliers(np.zeros((d, d)), y) is None            # rank 0
    full = model.polish_plan(np.eye(d))                                            # full rank: S = 0
    assert full.r == d and full.n_eq == d * (d + 1) // 2
    frob = _model(regularizer="frobenius")                                         # q > 0
    assert frob.q > 0 and frob.complementary_multipliers(M, y) is None
    few = model.subset(np.arange(50))                                              # too few rows
    assert few.complementary_multipliers(M, y[:50]) is None
    assert model.polish_plan(np.zeros((d, d))) is None
    plan = model.polish_plan(M)
    assert plan.r == 6 and plan.n_eq == 6 * 7 // 2 + 6 * (d - 6) and plan.n_free == 2 * plan.n_eq
    with pytest.raises(ValueError, match="free_factor"):
        model.complementary_multipliers(M, y, free_factor=0.5)
    # a larger free set is priced higher, and declines once it exceeds the constraints
    assert model.polish_plan(M, free_factor=4.0).cost > plan.cost
    assert model.polish_plan(M, free_factor=model.m) is None
    with pytest.raises(ValueError, match="free_factor"):
        model.polish_plan(M, free_factor=0.5)
    with pytest.raises(ValueError, match="y"):
        model.complementary_multipliers(M, y[:-1])
    with pytest.raises(ValueError, match="M"):
        model.complementary_multipliers(M[:-1], y)


def test_memory_cap(near_solution, monkeypatch):
    """The plan states its memory; a polish whose memory exceeds the cap (the floor, or the ratio to
    the problem's own bytes) is declined, and the same plan fits again under a cap above it."""
    import cvxmetric.hinge_certificates as hc
    model, M, y, _, _ = near_solution
    plan = model.polish_plan(M)
    assert plan.nbytes == hc.polish_bytes(plan.n_eq, plan.n_free)
    assert plan.nbytes >= 16.0 * plan.n_free * plan.n_eq            # B and its copy, 8 bytes each
    assert hc.polish_memory_cap(model) >= hc.POLISH_MEMORY_RATIO * hc.problem_bytes(model)
    monkeypatch.setattr(hc, "POLISH_MEMORY_FLOOR", plan.nbytes - 1.0)
    monkeypatch.setattr(hc, "POLISH_MEMORY_RATIO", 0.0)
    assert model.polish_plan(M) is None
    assert model.complementary_multipliers(M, y) is None
    monkeypatch.setattr(hc, "POLISH_MEMORY_FLOOR", plan.nbytes)
    assert model.polish_plan(M).n_eq == plan.n_eq
    # the ratio to the problem's bytes admits it where the floor alone would not
    monkeypatch.setattr(hc, "POLISH_MEMORY_FLOOR", 0.0)
    monkeypatch.setattr(hc, "POLISH_MEMORY_RATIO", (1.0 + 1e-12) * plan.nbytes / hc.problem_bytes(model))
    assert model.polish_plan(M) is not None


@pytest.mark.parametrize("a, k", [(1e-3, 1.0), (1e3, 1.0), (1.0, 1e-6), (1.0, 1e6)])
def test_scales_with_the_problem(near_solution, a, k):
    """X -> a X with R -> a^2 R (M -> M / a^2, same multipliers), and all weights times k
    (multipliers times k): the polish commutes with both."""
    model, M, y, _, _ = near_solution
    geom = model.geometry
    scaled = HingeModel(QuadrupletGeometry(a * geom.X, model.constraints), k * model.coef,
                        k * a * a * model.R, model.q)
    yp = model.complementary_multipliers(M, y)
    ys = scaled.complementary_multipliers(M / (a * a), k * y)
    np.testing.assert_allclose(ys, k * yp, rtol=1e-6, atol=1e-9 * k * float(model.coef.max()))


def test_pdhg_with_the_polish_stops_no_later_with_a_valid_bound(near_solution, monkeypatch):
    import cvxmetric.solvers.pdhg as mod

    model, _, _, _, (_, p_up) = near_solution
    with_polish = pdhg(model, tol=1e-4, residual_tol=1e-4)
    monkeypatch.setattr(mod, "POLISH_CERTIFICATE", False)
    without = pdhg(model, tol=1e-4, residual_tol=1e-4)
    for res in (with_polish, without):
        assert res.converged and res.lower_bound <= p_up
    assert with_polish.info["polishes"] >= 1 and without.info["polishes"] == 0
    assert with_polish.n_iter <= without.n_iter


def test_on_the_data_span():
    """Data with a constant feature: the certificate works on the span of the differences (a basis
    U, k = d - 1), and so does the polish. Its multipliers are exactly dual feasible there and
    certify within 1e-4 of p*, and its equations are those of Q = U E (checked at random y:
    E(y) = E(0) + B^T y). The linear term is the trace plus a small pull term (on the span): with a
    multiple of the identity alone the whole space certifies alike and no span is computed."""
    from cvxmetric.hinge_certificates import _complementarity_rows, _complementarity_vector
    from cvxmetric.models import pull_matrix

    inst = synthetic_qwise(8, 3, 300, 2000, seed=5)
    X = np.hstack([inst.X, np.ones((inst.X.shape[0], 1))])
    pull = 0.01 * pull_matrix(X, np.column_stack([np.arange(20), np.arange(20, 40)]))
    model = qwise_model(X, inst.constraints, **inst.params, linear_term=pull)
    U = model.span_basis()[0]
    assert U is not None and U.shape == (9, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pdhg(model, tol=1e-8, residual_tol=1e-9, max_iter=20_000)
        state = start_state(model)
        pdhg(model, state=state, max_iter=128, warn=False)
    cand = state.last
    plan = model.polish_plan(cand.M)
    assert plan.Q.shape == (9, 8) and np.allclose(plan.Q.T @ plan.Q, np.eye(8), atol=1e-12)
    rng = np.random.default_rng(0)
    rows = rng.choice(model.m, 50, replace=False)
    Pu, Pw = (D @ plan.Q for D in model.geometry.difference_vectors(rows))
    B = _complementarity_rows(model, Pu, Pw, plan.r)
    y = np.zeros(model.m)
    y[rows] = rng.random(50)

    def E(yv):
        Ky = model.geometry.weighted_sum(yv)
        return _complementarity_vector(plan.Q.T @ (model.R + Ky) @ plan.Q, plan.r)

    np.testing.assert_allclose(E(y), E(np.zeros(model.m)) + B.T @ y[rows], rtol=0, atol=1e-12 * np.abs(E(y)).max())
    yp = model.complementary_multipliers(cand.M, cand.y / state.s)
    polished = model.dual_bound(yp, upper=state.best_f, repair_steps=0)
    assert polished <= ref.objective
    assert relative_gap(ref.lower_bound, polished) <= 1e-4


def test_difference_vectors_of_subsets_and_extensions():
    model = _model()
    geom = model.geometry
    rows = np.array([5, 0, 17, 5])
    for g, r in ((geom, rows), (geom.subset(rows), np.arange(4)),
                 (geom.extended(geom.constraints.subset(rows)), geom.m + np.arange(4))):
        Du, Dw = g.difference_vectors(r)
        idx = g.constraints.idx[r]
        np.testing.assert_array_equal(Du, g.X[idx[:, 0]] - g.X[idx[:, 1]])
        np.testing.assert_array_equal(Dw, g.X[idx[:, 2]] - g.X[idx[:, 3]])


def test_single_precision_pass_gives_the_double_precision_multipliers(near_solution, monkeypatch):
    """The Gram matrix is factored in float32 and the last round refined in float64: the same
    multipliers as the double-precision pass, up to the refinement's tolerance."""
    import cvxmetric.hinge_certificates as mod

    model, M, y, _, _ = near_solution
    passes = []
    rounds = mod._clamped_rounds

    def recording(B, e0, y0, upper, dtype):
        out = rounds(B, e0, y0, upper, dtype)
        passes.append((np.dtype(dtype).name, out is not None))
        return out

    monkeypatch.setattr(mod, "_clamped_rounds", recording)
    monkeypatch.setattr(mod, "POLISH_SINGLE_PRECISION", True)
    single = model.complementary_multipliers(M, y)
    assert passes == [("float32", True)]            # the single-precision pass vouched for itself
    monkeypatch.setattr(mod, "POLISH_SINGLE_PRECISION", False)
    double = model.complementary_multipliers(M, y)
    change = np.linalg.norm(double - np.clip(y, 0.0, model.coef))
    assert change > 0
    assert np.linalg.norm(single - double) <= 1e-8 * change


def test_single_precision_pass_hands_an_ill_conditioned_system_to_double():
    """Equations whose Gram matrix has condition ~1e12: the single-precision pass cannot refine to
    its tolerance and says so (None); the polish then gives the double-precision pass's answer."""
    from cvxmetric.hinge_certificates import _clamped_least_change, _clamped_rounds

    rng = np.random.default_rng(0)
    B = rng.standard_normal((200, 40)) * np.logspace(0, -6, 40)
    y0 = rng.uniform(0.2, 0.8, 200)
    upper = np.ones(200)
    e0 = 1e-3 * B.T @ rng.standard_normal(200)
    assert _clamped_rounds(B, e0, y0, upper, np.float32) is None
    double = _clamped_rounds(B, e0, y0, upper, np.float64)
    np.testing.assert_array_equal(_clamped_least_change(B, e0, y0, upper), double)
    # solved up to the ridge's effect on the weakest directions (measured 5e-6), in the box
    assert np.linalg.norm(e0 + B.T @ (double - y0)) <= 1e-4 * np.linalg.norm(e0)
    assert np.all((double >= 0) & (double <= upper))
    well = B / np.logspace(0, -6, 40)                                                # condition ~ 10
    single = _clamped_rounds(well, e0, y0, upper, np.float32)
    assert single is not None
    np.testing.assert_allclose(single, _clamped_rounds(well, e0, y0, upper, np.float64), rtol=0, atol=1e-9)


@pytest.mark.parametrize("a", [1e-20, 1e20])
def test_single_precision_pass_at_any_scale(a):
    """Equations scaled far beyond float32's range (B -> a B, e0 -> a e0: the same solution): the
    single-precision pass works on B / max|B|, so it neither overflows nor underflows."""
    from cvxmetric.hinge_certificates import _clamped_rounds

    rng = np.random.default_rng(1)
    B = rng.standard_normal((300, 60))
    y0 = rng.uniform(0.2, 0.8, 300)
    upper = np.ones(300)
    e0 = 0.5 * B.T @ rng.standard_normal(300)
    ref = _clamped_rounds(B, e0, y0, upper, np.float64)
    assert np.any((ref == 0) | (ref == 1))                                          # clamps happened
    scaled = _clamped_rounds(a * B, a * e0, y0, upper, np.float32)
    assert scaled is not None
    np.testing.assert_allclose(scaled, ref, rtol=0, atol=1e-9)


def test_max_cost(near_solution):
    """A plan whose modelled cost exceeds ``max_cost`` is declined (also before the eigendecomposition,
    from the rank's lower bound); one within it is the plan without the limit; a negative or NaN
    limit is a ValueError."""
    import cvxmetric.hinge_certificates as hc
    model, M, _, _, _ = near_solution
    plan = model.polish_plan(M)
    assert plan.cost == hc.polish_cost(model.d, plan.n_eq, plan.n_free)
    assert model.polish_plan(M, max_cost=plan.cost).n_eq == plan.n_eq
    assert model.polish_plan(M, max_cost=0.999 * plan.cost) is None
    assert model.polish_plan(M, max_cost=0.0) is None
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="max_cost"):
            model.polish_plan(M, max_cost=bad)


def test_pdhg_prices_the_polish_at_its_residual_test(near_solution, monkeypatch):
    """With no repair budget the polish runs only once the residual test holds, and only where it is
    worth its cost (``POLISH_WORTH``): at worth 0 it never runs, and the bound (from the repair)
    stays valid."""
    import cvxmetric.solvers.pdhg as mod

    model, _, _, _, (_, p_up) = near_solution
    monkeypatch.setattr(mod, "REPAIR_BUDGET", 0.0)
    priced = pdhg(model, tol=1e-4, residual_tol=1e-4)
    monkeypatch.setattr(mod, "POLISH_WORTH", 0.0)
    declined = pdhg(model, tol=1e-4, residual_tol=1e-4)
    assert priced.info["polishes"] >= 1 and declined.info["polishes"] == 0
    for res in (priced, declined):
        assert res.lower_bound is not None and res.lower_bound <= p_up


def test_corrected_polish_grows_a_free_set_that_ran_out(near_solution):
    """With one free multiplier per equation the clamps exhaust the free set (the equations stay
    unsolved); the correction doubles it, solves them, and the bound is within 1e-4 of p*."""
    from cvxmetric.hinge_certificates import _plan_of, polish_corrected

    model, M, y, upper, (p_low, p_up) = near_solution
    plan = model.polish_plan(M)
    small = _plan_of(model, plan.Q, plan.r, 1.0)
    plain = polish_corrected(model, M, y, small, corrections=0)
    fixed = polish_corrected(model, M, y, small)
    assert not plain.solved and not plain.complementary and plain.solves == 1
    assert fixed.solved and fixed.complementary and fixed.solves > 1 and fixed.plan.n_free > small.n_free
    assert fixed.extra_cost > 0 and np.all(fixed.y >= 0) and np.all(fixed.y <= model.coef)
    bound = model.dual_bound(fixed.y, upper=upper, repair_steps=0)
    assert bound <= p_up and relative_gap(p_low, bound) <= 1e-4
    assert model.dual_bound(plain.y, upper=upper, repair_steps=0) < bound


def test_corrected_polish_widens_a_range_that_misses_a_direction(near_solution):
    """A point whose smallest range direction is removed: V misses a direction of the solution's
    range, the solved polish leaves the dual matrix indefinite off V, and the correction takes
    the negative direction into V (one more solve, a larger r)."""
    from cvxmetric.hinge_certificates import polish_corrected

    model, M, y, upper, (p_low, p_up) = near_solution
    lam, V = np.linalg.eigh(M)
    keep = lam > 1e-4 * lam[-1]
    drop = np.flatnonzero(keep)[0]
    keep[drop] = False
    M_cut = (V[:, keep] * lam[keep]) @ V[:, keep].T
    plan = model.polish_plan(M_cut, 4.0)
    plain = polish_corrected(model, M_cut, y, plan, corrections=0)
    fixed = polish_corrected(model, M_cut, y, plan)
    assert plain.solved and not plain.complementary
    assert fixed.complementary and fixed.plan.r > plan.r
    assert model.dual_bound(fixed.y, upper=upper, repair_steps=0) > model.dual_bound(plain.y, upper=upper, repair_steps=0)
    assert model.dual_bound(fixed.y, upper=upper, repair_steps=0) <= p_up


def test_corrected_polish_respects_its_gate(near_solution):
    """No correction where the first solve's value is not above ``correct_above``, nor beyond
    ``max_cost``."""
    from cvxmetric.hinge_certificates import _plan_of, polish_corrected

    model, M, y, _, _ = near_solution
    plan = model.polish_plan(M)
    small = _plan_of(model, plan.Q, plan.r, 1.0)
    assert polish_corrected(model, M, y, small, correct_above=np.inf).solves == 1
    assert polish_corrected(model, M, y, small, max_cost=0.0).solves == 1
    assert polish_corrected(model, M, y, small, correct_above=-np.inf).solves > 1


def test_pdhg_starts_the_polish_over_where_a_grown_free_set_no_longer_fits():
    """A free factor carried from earlier polishes whose plan no longer fits (here: more free
    multipliers than constraints) is reset to POLISH_FREE_FACTOR, and the polish is planned."""
    from cvxmetric.hinge_certificates import POLISH_FREE_FACTOR

    model = _model()
    state = start_state(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pdhg(model, state=state, max_iter=112, warn=False)
    state.polish_free_factor = float(model.m)
    state.err_at_repair = np.inf
    assert state.repair_due(state.last, 1e-3)
    assert state._plan is not None and state.polish_free_factor == POLISH_FREE_FACTOR
