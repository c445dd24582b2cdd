"""ITML: numpy model, cvxpy formulation, Bregman solver, harness row (design §5.3)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvxmetric.certificates import relative_difference, relative_gap
from cvxmetric.constraints import ConstraintSet
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.instances import get_instance, list_instances
from cvxmetric.itml import ITMLModel, default_bounds, itml_model, slack_term
from cvxmetric.linalg import random_psd
from cvxmetric.formulations.itml import build_itml, build_itml_problem, itml_kkt_truth
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.solvers.itml import _full, _sweep, bregman_itml, solve_itml
from cvxmetric.verification import tolerances as vtol

#: Relative agreement required between scaled twins of one problem (the acceptance bound of the scale-invariance tests).
SCALE_AGREEMENT = 1e-4
#: The fast point's relative stationarity residual is a diagnostic: the gap is about its square,
#: so at the solver's certified gap 1e-12 it is ~1e-6; 1e-5 still fails a run stopped early.
KKT_DIAGNOSTIC = 1e-5

INSTANCES = list_instances("itml", default_only=True)
_REF = {}


def _reference(name):
    """Clarabel (and the formulation) of an instance, solved once per test session."""
    if name not in _REF:
        inst = get_instance("itml", name)
        form = build_itml(inst.X, inst.constraints, **inst.params)
        sol = form.solve("CLARABEL")
        assert sol.point is not None, sol.status
        _REF[name] = (inst, form, sol)
    return _REF[name]


def _small_model(seed, n=30, d=4, p=12, q=12, gamma=1.0, prior=None, weight=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = rng.integers(0, 3, n)
    iu, ju = np.triu_indices(n, 1)
    same = np.flatnonzero(y[iu] == y[ju])
    diff = np.flatnonzero(y[iu] != y[ju])
    s = rng.choice(same, p, replace=False)
    t = rng.choice(diff, q, replace=False)
    return ITMLModel(X, np.column_stack([iu[s], ju[s]]), np.column_stack([iu[t], ju[t]]), gamma=gamma,
                     prior=prior, weight=weight)


# ----------------------------------------------------------------------------- agreement
@pytest.mark.parametrize("name", INSTANCES)
@pytest.mark.parametrize("seed", [0, 1])
def test_bregman_matches_clarabel(name, seed):
    inst, form, sol = _reference(name)
    res = solve_itml(inst.X, inst.constraints, seed=seed, **inst.params)
    # converged means certified: the gap between the returned value and the dual bound of the
    # solver's own (repaired) multipliers is within tol
    assert res.converged and res.measure == "certified_gap"
    assert res.certified_gap == relative_gap(res.objective, res.lower_bound) <= res.tol
    f = form.value_at(res.M)
    assert abs(relative_difference(f, res.objective)) <= vtol.VALUE_AT_RTOL
    # the two certificates cross: each lower bound is below the other's feasible value
    truth_lower = form.lower_bound(sol)
    truth_upper = form.value_at(sol.point)
    assert truth_lower <= f * (1 + 1e-13) and res.lower_bound <= truth_upper * (1 + 1e-13)
    assert relative_gap(truth_upper, truth_lower) <= 1e-8
    assert -vtol.GAP_NEGATIVE_SLACK <= relative_difference(f, truth_upper) <= vtol.GAP_BREGMAN
    # the fast point is stationary, its Bregman multipliers are the closed-form ones and match
    # Clarabel's duals
    assert form.model.kkt_residual(res.M) <= KKT_DIAGNOSTIC
    lam_closed = form.model.multipliers(res.M)
    assert np.array_equal(res.multipliers, res.info["lam"])
    assert np.max(np.abs(res.multipliers - lam_closed)) <= 1e-4 * lam_closed.max()
    lam_clar = np.concatenate([sol.duals[k] for k in ("similar", "dissimilar")])
    assert np.max(np.abs(res.multipliers - lam_clar)) <= 1e-3 * lam_clar.max()
    assert np.allclose(res.M, sol.point, rtol=1e-4, atol=1e-4 * np.abs(sol.point).max())


@pytest.mark.parametrize("name", INSTANCES)
def test_ground_truth_kkt(name):
    _, form, sol = _reference(name)
    res = itml_kkt_truth(form, sol)
    assert max(res.values()) <= vtol.KKT_TRUTH_TOL, res


def test_scs_agrees_with_clarabel():
    inst, form, sol = _reference("iris")
    form2 = build_itml(inst.X, inst.constraints, **inst.params)
    scs = form2.solve("SCS")
    assert scs.point is not None, scs.status
    assert abs(form2.value_at(scs.point) - sol.value) <= vtol.SOLVER_AGREEMENT_RTOL * max(1.0, abs(sol.value))


def test_gap_check_catches_a_wrong_solver():
    """The agreement test is discriminating: the optimum of a slightly different model (gamma
    off by 20 %, or metric-learn's stopping rule too early) fails the gap tolerance."""
    inst, form, sol = _reference("wine")
    params = dict(inst.params)
    params["gamma"] = 1.2 * params["gamma"]
    wrong = solve_itml(inst.X, inst.constraints, **params)
    assert (form.value_at(wrong.M) - sol.value) / sol.value > vtol.GAP_BREGMAN
    with pytest.warns(ConvergenceWarning):
        early = solve_itml(inst.X, inst.constraints, max_iter=2, **inst.params)
    assert not early.converged
    assert (form.value_at(early.M) - sol.value) / sol.value > vtol.GAP_BREGMAN


def test_fixed_order_and_warm_start():
    inst, form, sol = _reference("iris")
    model = form.model
    res = bregman_itml(model)
    # a warm start from the optimal multipliers is (almost) done after one sweep
    warm = bregman_itml(model, lam0=res.multipliers)
    assert warm.converged and warm.n_iter <= 2
    assert abs(warm.objective - res.objective) <= 1e-11 * res.objective
    # the fixed (similar-first) order converges to the same point, only slower
    fast = bregman_itml(model, tol=1e-6)
    fixed = bregman_itml(model, shuffle=False, tol=1e-6, max_iter=20_000)
    assert fast.converged and fixed.converged and fixed.n_iter > 5 * fast.n_iter
    assert abs(fixed.objective - res.objective) <= 1e-6 * res.objective


# ----------------------------------------------------------------------------- value_at / model
@pytest.mark.parametrize("name", INSTANCES)
def test_value_at_matches_model_at_random_points(name):
    _, form, _ = _reference(name)
    model = form.model
    rng = np.random.default_rng(7)
    for k in range(4):
        # scaled so that some similar pairs exceed u and some dissimilar pairs fall below l
        M = random_psd(model.d, seed=rng, scale=10.0 ** rng.uniform(-1, 0.5)) + 0.05 * np.eye(model.d)
        v_cvx, v_np = form.value_at(M), model.value(M)
        assert abs(v_cvx - v_np) <= vtol.VALUE_AT_RTOL * max(1.0, abs(v_np))
        dist = model.distances(M)
        assert np.any(dist[: model.n_similar] > model.u) or np.any(dist[model.n_similar:] < model.l)
    singular = np.zeros((model.d, model.d))
    singular[0, 0] = 1.0
    assert form.value_at(singular) == np.inf and model.value(singular) == np.inf
    assert model.value(np.eye(model.d) * -1.0) == np.inf


def test_value_at_prior_is_slack_only():
    model = _small_model(3)
    xi = model.slack(model.M0)
    assert model.logdet_divergence(model.M0) == pytest.approx(0.0, abs=1e-12)
    assert model.value(model.M0) == pytest.approx(model.gamma * np.sum(slack_term(xi / model.xi0)), rel=1e-12)


def test_gradient_matches_finite_differences():
    prior = random_psd(4, seed=11) + 0.5 * np.eye(4)
    model = _small_model(5, gamma=0.7, prior=prior)
    rng = np.random.default_rng(1)
    M = random_psd(4, seed=rng) + 0.3 * np.eye(4)
    G = model.gradient(M)
    for _ in range(3):
        E = rng.standard_normal((4, 4))
        E = 0.5 * (E + E.T)
        h = 1e-6
        fd = (model.value(M + h * E) - model.value(M - h * E)) / (2 * h)
        assert fd == pytest.approx(np.vdot(G, E), rel=1e-5, abs=1e-7)


@settings(max_examples=60, deadline=None)
@given(dist=st.floats(1e-3, 1e3), xi0=st.floats(1e-2, 1e2), similar=st.booleans(),
       t=st.floats(1e-3, 1e3), gamma=st.floats(1e-2, 1e2))
def test_closed_form_slack_is_the_minimiser(dist, xi0, similar, t, gamma):
    """xi* = max(D, xi0) (similar) / min(D, xi0) (dissimilar) minimises gamma*h(xi/xi0) over the
    feasible slacks (xi >= D for similar, 0 < xi <= D for dissimilar)."""
    xi_star = max(dist, xi0) if similar else min(dist, xi0)
    feasible_t = max(t, dist) if similar else min(t, dist)
    f = lambda x: gamma * float(slack_term(np.array([x / xi0]))[0])  # noqa: E731
    assert f(xi_star) <= f(feasible_t) + 1e-12 * max(1.0, f(feasible_t))
    assert (xi_star >= dist) if similar else (xi_star <= dist)


def test_model_slack_matches_scalar_closed_form():
    model = _small_model(8)
    M = random_psd(model.d, seed=2) + 0.1 * np.eye(model.d)
    dist = model.distances(M)
    xi = model.slack(M)
    p = model.n_similar
    assert np.array_equal(xi[:p], np.maximum(dist[:p], model.u))
    assert np.array_equal(xi[p:], np.minimum(dist[p:], model.l))
    # the closed-form multipliers are non-negative and invert the slack stationarity
    lam = model.multipliers(M)
    assert np.all(lam >= -1e-15)
    assert np.allclose(model.slack_from_multipliers(lam), xi, rtol=1e-12)


# ----------------------------------------------------------------------------- linear algebra
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(1, 7), theta=st.floats(-0.9, 5.0), similar=st.booleans())
def test_sherman_morrison_update_equals_direct_inverse(seed, d, theta, similar):
    r"""One projection of the solver's sweep (dsymv + dsyr on M's upper triangle) gives
    (M^{-1} + theta s v v^T)^{-1}, and it keeps lambda/slack consistent with the invariants."""
    rng = np.random.default_rng(seed)
    M = random_psd(d, seed=rng) + 0.2 * np.eye(d)
    v = rng.standard_normal(d)
    s = 1.0 if similar else -1.0
    p = float(v @ M @ v)
    # admissible step: M^{-1} + theta s v v^T must stay PD, i.e. 1 + theta s p > 0
    if 1.0 + theta * s * p <= 1e-3:
        theta = (-1.0 + 1e-3) / (s * p) * 0.5
    direct = np.linalg.inv(np.linalg.inv(M) + theta * s * np.outer(v, v))
    from scipy.linalg import blas

    Mf = np.array(M, order="F")
    Mv = blas.dsymv(1.0, Mf, v)
    blas.dsyr(-theta * s / (1.0 + theta * s * p), Mv, a=Mf, overwrite_a=1)
    assert np.allclose(_full(Mf), direct, rtol=1e-9, atol=1e-9 * np.abs(direct).max())


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), gamma=st.floats(0.05, 20.0), sweeps=st.integers(1, 3))
def test_sweeps_keep_the_bregman_invariants(seed, gamma, sweeps):
    r"""After any number of projections: M^{-1} = M0^{-1} + sum_c s_c lambda_c C_c, lambda >= 0,
    and M stays positive definite."""
    prior = random_psd(4, seed=seed) + 0.5 * np.eye(4)
    model = _small_model(seed, gamma=gamma, prior=prior)
    M = np.array(model.M0, order="F")
    lam = [0.0] * model.m
    rows = list(np.random.default_rng(seed).permutation(model.m))
    g = model.gamma_pair
    for _ in range(sweeps):
        _sweep(M, np.ascontiguousarray(model.V), rows, lam, (1.0 / model.xi0).tolist(), model.sign.tolist(),
               (1.0 / g).tolist(), (g / (g + 1.0)).tolist())
    lam = np.array(lam)
    Mf = _full(M)
    assert np.all(lam >= 0)
    assert np.linalg.eigvalsh(Mf)[0] > 0
    Minv = model.M0_inv + model.weighted_sum(model.sign * lam)
    assert np.allclose(np.linalg.inv(Mf), Minv, rtol=1e-7, atol=1e-7 * np.abs(Minv).max())
    assert np.all(model.slack_from_multipliers(lam) > 0)


# ----------------------------------------------------------------------------- construction
def test_default_bounds_use_squared_lengths():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [0.0, 2.0]])
    S = np.array([[0, 1]])
    D = np.array([[0, 2], [1, 3]])
    u, l = default_bounds(X, S, D)
    sq = np.array([1.0, 9.0, 5.0])
    assert (u, l) == pytest.approx(tuple(np.percentile(sq, (5, 95))))
    model = ITMLModel(X, S, D)
    assert (model.u, model.l) == pytest.approx((u, l))
    assert np.array_equal(model.sign, [1.0, -1.0, -1.0])


def test_constraint_set_and_arrays_give_the_same_model():
    inst = get_instance("itml", "wine")
    cs = inst.constraints
    a = itml_model(inst.X, cs, **inst.params)
    S, D = cs.idx[cs.is_similar][:, :2], cs.idx[cs.is_dissimilar][:, 2:]
    b = itml_model(inst.X, S, D, u=a.u, l=a.l, **inst.params)
    M = random_psd(a.d, seed=0) + np.eye(a.d)
    assert a.value(M) == b.value(M)
    # the instance's bounds are the default squared-length percentiles
    assert (a.u, a.l) == pytest.approx(default_bounds(inst.X, S, D))
    assert itml_model(inst.X, cs, u=1.0, l=2.0).u == 1.0


def test_instances_are_deterministic_and_have_positive_optimum():
    for name in INSTANCES:
        inst = get_instance("itml", name)
        assert inst.n_constraints >= 150
        assert len(set(map(tuple, inst.constraints.idx))) == inst.n_constraints
    _, _, sol = _reference("iris")
    assert sol.value > 1.0


def test_inputs_not_modified():
    inst = get_instance("itml", "syn-d8")
    X = np.array(inst.X)
    prior = np.array(inst.params["prior"])
    X0, P0 = X.copy(), prior.copy()
    res = solve_itml(X, inst.constraints, gamma=inst.params["gamma"], prior=prior)
    assert res.converged
    assert np.array_equal(X, X0) and np.array_equal(prior, P0)


# ----------------------------------------------------------------------------- bad input
def _xy():
    rng = np.random.default_rng(0)
    return rng.standard_normal((10, 3)), np.array([[0, 1], [2, 3]]), np.array([[4, 5], [6, 7]])


def test_bad_prior():
    X, S, D = _xy()
    with pytest.raises(ValueError, match="prior must be symmetric positive definite"):
        ITMLModel(X, S, D, prior=np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ValueError, match="positive definite|singular"):
        ITMLModel(X, S, D, prior=np.diag([1.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match="not symmetric"):
        ITMLModel(X, S, D, prior=np.array([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]]))
    with pytest.raises(ValueError, match=r"shape \(3, 3\)"):
        ITMLModel(X, S, D, prior=np.eye(4))
    with pytest.raises(ValueError, match="NaN"):
        ITMLModel(X, S, D, prior=np.full((3, 3), np.nan))


def test_bad_bounds_and_gamma():
    X, S, D = _xy()
    with pytest.raises(ValueError, match="u < l"):
        ITMLModel(X, S, D, u=2.0, l=2.0)
    with pytest.raises(ValueError, match="u < l"):
        ITMLModel(X, S, D, u=3.0, l=1.0)
    with pytest.raises(ValueError, match="u must be > 0"):
        ITMLModel(X, S, D, u=0.0, l=1.0)
    with pytest.raises(ValueError, match="gamma must be > 0"):
        ITMLModel(X, S, D, gamma=0.0)
    with pytest.raises(ValueError, match="gamma must be > 0"):
        ITMLModel(X, S, D, gamma=-1.0)
    with pytest.raises(ValueError, match="gamma must be finite"):
        ITMLModel(X, S, D, gamma=np.inf)
    with pytest.raises(TypeError, match="gamma must be a real number"):
        ITMLModel(X, S, D, gamma="1")
    # all pairs of equal length: the default percentiles coincide
    Xe = np.array([[0.0], [1.0], [2.0], [3.0]])
    with pytest.raises(ValueError, match="u < l"):
        ITMLModel(Xe, [[0, 1]], [[2, 3]])


def test_zero_length_pairs_rejected():
    X, S, D = _xy()
    X[5] = X[4]
    with pytest.raises(ValueError, match=r"dissimilar pair 0 = \(4, 5\) has zero length.*identical"):
        ITMLModel(X, S, D)
    with pytest.raises(ValueError, match=r"similar pair 1 = \(8, 8\) has zero length"):
        ITMLModel(X, [[0, 1], [8, 8]], [[2, 3]])
    # iris has duplicate rows 101 and 142
    from cvxmetric.datasets import load_dataset

    Xi, _ = load_dataset("iris")
    with pytest.raises(ValueError, match=r"\(101, 142\) has zero length"):
        ITMLModel(Xi, [[0, 1]], [[101, 142]])


def test_bad_shapes_and_values():
    X, S, D = _xy()
    with pytest.raises(ValueError, match=r"similar must have shape \(p, 2\)"):
        ITMLModel(X, np.array([[0, 1, 2]]), D)
    with pytest.raises(ValueError, match="2-D"):
        ITMLModel(X[:, 0], S, D)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ITMLModel(Xn, S, D)
    with pytest.raises(ValueError, match="outside"):
        ITMLModel(X, [[0, 10]], D)
    with pytest.raises(TypeError, match="integer"):
        ITMLModel(X, [[0.5, 1.0]], D)
    with pytest.raises(ValueError, match="at least one"):
        ITMLModel(X, None, None)
    trip = ConstraintSet.from_triplets([[0, 1, 2]])
    with pytest.raises(ValueError, match="pairwise constraints only"):
        itml_model(X, trip)
    mixed = (ConstraintSet.from_pairs([[0, 1]], similar=True, bound=1.0)
             + ConstraintSet.from_pairs([[2, 3]], similar=True, bound=2.0)
             + ConstraintSet.from_pairs([[4, 5]], similar=False, bound=5.0))
    with pytest.raises(ValueError, match="pass u="):
        itml_model(X, mixed)
    with pytest.raises(ValueError, match="not both"):
        itml_model(X, mixed, D)
    model = ITMLModel(X, S, D)
    with pytest.raises(ValueError, match=r"shape \(3, 3\)"):
        model.value(np.eye(2))
    with pytest.raises(TypeError, match="ITMLModel"):
        bregman_itml("not a model")
    with pytest.raises(TypeError, match="ITMLModel"):
        build_itml_problem(object())
    with pytest.raises(ValueError, match="lam0"):
        bregman_itml(model, lam0=-np.ones(model.m))
    with pytest.raises(ValueError, match="tol must be > 0"):
        bregman_itml(model, tol=0.0)


def test_only_one_kind_of_pairs():
    X, S, D = _xy()
    for sim, dis in ((S, None), (None, D)):
        model = ITMLModel(X, sim, dis, u=0.5, l=4.0)
        form = build_itml_problem(model)
        sol = form.solve("CLARABEL")
        assert sol.point is not None, sol.status
        res = bregman_itml(model)
        assert res.converged
        assert abs(res.objective - sol.value) <= 1e-6 * max(1.0, sol.value)
        assert set(form.constraints) == ({"similar"} if dis is None else {"dissimilar"})


def test_harness_row_passes():
    from cvxmetric.verification.harness import verify_instance

    rows = verify_instance("itml", "iris")
    assert len(rows) == 1 and rows[0]["passed"], rows[0]["checks"]


# ----------------------------------------------------------------------------- certificate
def _scaled_model(s, prior=None, **params):
    """The iris instance with X -> sX and the bounds scaled by s^2 (the same problem)."""
    inst = get_instance("itml", "iris")
    base = itml_model(inst.X, inst.constraints, **inst.params)
    return itml_model(inst.X * s, inst.constraints, u=base.u * s * s, l=base.l * s * s, prior=prior,
                      **{**inst.params, **params})


def _rotated_prior(eigenvalues, seed=0):
    d = len(eigenvalues)
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    P = Q @ np.diag(eigenvalues) @ Q.T
    return 0.5 * (P + P.T)


def test_dual_bound_is_below_the_optimum_for_any_multipliers():
    model = _small_model(4, gamma=0.8, prior=random_psd(4, seed=3) + 0.2 * np.eye(4),
                         weight=np.linspace(0.5, 2.0, 24))
    res = bregman_itml(model)
    assert res.converged and res.certified_gap <= res.tol
    f_star = res.objective
    rng = np.random.default_rng(0)
    for scale in (1e-3, 1.0, 1e3):
        for lam in (scale * rng.standard_normal(model.m), scale * rng.exponential(size=model.m),
                    res.multipliers * (1 + scale * 1e-3 * rng.standard_normal(model.m))):
            b = model.dual_bound(lam)
            assert b.value <= f_star * (1 + 1e-12) and b.value >= 0.0
            # the repaired multipliers are exactly dual feasible
            assert np.all(b.multipliers >= 0) and 0.0 <= b.theta <= 1.0
            assert np.all(model.slack_from_multipliers(b.multipliers) > 0)
            np.linalg.cholesky(np.eye(model.d) + model.whitened_sum(model.sign * b.multipliers))
    # at the optimal multipliers the bound is the optimum
    assert relative_gap(f_star, model.dual_bound(res.multipliers).value) <= res.tol
    with pytest.raises(ValueError, match="shape"):
        model.dual_bound(np.ones(3))


@pytest.mark.parametrize("s", [1e-4, 1e-2, 1e2, 1e4])
def test_solver_is_scale_invariant(s):
    """X -> sX with bounds times s^2 is the same problem: the same certified answer."""
    ref = bregman_itml(_scaled_model(1.0))
    res = bregman_itml(_scaled_model(s))
    assert res.converged and res.certified_gap <= res.tol
    assert res.n_iter == ref.n_iter
    assert abs(relative_difference(res.objective, ref.objective)) <= 1e-10
    assert np.allclose(res.M, ref.M, rtol=1e-8, atol=1e-8 * np.abs(ref.M).max())
    assert np.allclose(res.multipliers * s * s, ref.multipliers, rtol=1e-8, atol=1e-8 * ref.multipliers.max())


def test_ground_truth_is_scale_invariant():
    """The certified ground truth of X * s (bounds * s^2) matches the unscaled one; plain Clarabel on
    the scaled problem is 246 % off with status "optimal" (X * 1e3)."""
    truths = {}
    for s in (1.0, 1e-4, 1e-3, 1e3, 1e4):
        ct = solve_certified(build_itml_problem(_scaled_model(s)), 1e-8)
        assert ct.certified, ct.attempts
        truths[s] = ct
    ref = truths[1.0].bounds
    for s, ct in truths.items():
        assert abs(relative_difference(ct.bounds.upper, ref.upper)) <= SCALE_AGREEMENT
        assert ct.bounds.lower <= ref.upper and ref.lower <= ct.bounds.upper   # the intervals meet
        fast = bregman_itml(_scaled_model(s))
        assert ct.bounds.contains(fast.objective, 1e-9)


@pytest.mark.parametrize("eigenvalues,rotate", [(np.logspace(-11, 0, 4), False), ([1, 1, 1, 1e-11], True),
                                                ([1e11, 1, 1, 1], False)])
def test_ill_conditioned_prior(eigenvalues, rotate):
    """A prior of condition 1e11: a residual divided by ||M0^-1|| reports convergence after
    one sweep 47 % above the optimum; the certified gap cannot be hidden by the prior's scale."""
    prior = _rotated_prior(eigenvalues) if rotate else np.diag(eigenvalues)
    model = _scaled_model(1.0, prior=prior)
    with pytest.warns(ConvergenceWarning):
        one = bregman_itml(model, max_iter=1)
    assert not one.converged and one.certified_gap > 1e-2
    res = bregman_itml(model)
    assert res.converged and 0.0 <= res.certified_gap <= res.tol
    truth = solve_certified(build_itml_problem(model), 1e-8)
    assert truth.certified, truth.attempts
    assert truth.bounds.contains(res.objective, 1e-9)
    assert relative_difference(one.objective, truth.bounds.lower) > 1e-2


def test_normalized_twin_maps_values_back_exactly():
    prior = _rotated_prior(np.logspace(-6, 0, 4), seed=2)
    form = build_itml_problem(_scaled_model(1e3, prior=prior))
    norm = form.normalize()
    twin = norm.formulation
    assert norm.value_scale == 1.0
    rng = np.random.default_rng(5)
    for _ in range(3):
        P = random_psd(4, seed=rng) + 0.1 * np.eye(4)
        assert abs(relative_difference(form.value_at(norm.point_back(P)), twin.value_at(P))) <= 1e-9
    # the twin's numbers are O(1): bounds within a factor 16 of 1
    assert 1 / 16 <= np.sqrt(twin.model.u * twin.model.l) <= 16
    # make_feasible leaves a PD point alone and repairs an indefinite one to a finite value
    M = norm.point_back(np.eye(4))
    assert np.array_equal(form.feasible_point(M), M)
    bad = M - 2 * np.abs(np.linalg.eigvalsh(M)).max() * np.outer(np.eye(4)[0], np.eye(4)[0])
    assert np.isfinite(form.value_at(form.feasible_point(bad)))


# ----------------------------------------------------------------------------- weights
def test_pair_weights_are_used():
    X, S, D = _xy()
    cs = (ConstraintSet.from_pairs(S, similar=True, bound=0.5, weight=[2.0, 3.0])
          + ConstraintSet.from_pairs(D, similar=False, bound=4.0, weight=0.5))
    model = itml_model(X, cs, gamma=0.7)
    assert np.array_equal(model.weight, [2.0, 3.0, 0.5, 0.5])
    assert np.allclose(model.gamma_pair, 0.7 * model.weight)
    # an integer weight is the same as repeating the pair (the repeated slacks are equal at the optimum)
    twice = ITMLModel(X, S, [[4, 5], [4, 5], [6, 7]], u=0.5, l=4.0)
    weighted = ITMLModel(X, S, D, u=0.5, l=4.0, weight=[1.0, 1.0, 2.0, 1.0])
    a, b = bregman_itml(twice), bregman_itml(weighted)
    assert a.converged and b.converged
    assert abs(relative_difference(a.objective, b.objective)) <= 1e-10
    assert np.allclose(a.M, b.M, rtol=1e-5, atol=1e-5)   # M is accurate to ~sqrt(gap)
    # solver, formulation and certificate agree on the weighted objective
    truth = solve_certified(build_itml_problem(weighted), 1e-8)
    assert truth.certified and truth.bounds.contains(b.objective, 1e-9)
    unweighted = bregman_itml(ITMLModel(X, S, D, u=0.5, l=4.0))
    assert abs(relative_difference(unweighted.objective, b.objective)) > 1e-3


def test_bad_weights():
    X, S, D = _xy()
    for w, msg in ((0.0, "weight must be > 0"), ([1.0, 1.0, -1.0, 1.0], "weight must be > 0"),
                   ([1.0, np.nan, 1.0, 1.0], "NaN"), (np.ones(3), r"shape \(4,\)")):
        with pytest.raises(ValueError, match=msg):
            ITMLModel(X, S, D, weight=w)
    cs = ConstraintSet.from_pairs(S, similar=True, bound=0.5) + ConstraintSet.from_pairs(D, similar=False, bound=4.0)
    with pytest.raises(ValueError, match="carries its own weights"):
        itml_model(X, cs, weight=2.0)
    zero = ConstraintSet.from_pairs(S, similar=True, bound=0.5, weight=0.0) + ConstraintSet.from_pairs(
        D, similar=False, bound=4.0)
    with pytest.raises(ValueError, match="drop it"):
        itml_model(X, zero)


def test_zero_length_is_relative_to_the_data_scale():
    inst = get_instance("itml", "iris")
    for s in (1e-6, 1e6):
        model = itml_model(inst.X * s, inst.constraints, **inst.params)   # no pair is "identical"
        assert model.m == inst.n_constraints
    X, S, D = _xy()
    X[5] = X[4]
    for s in (1e-6, 1.0, 1e6):
        with pytest.raises(ValueError, match=r"\(4, 5\) has zero length"):
            ITMLModel(X * s, S, D)


# ----------------------------------------------------------------------------- property
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(1, 4), n_pairs=st.integers(2, 20),
       gamma=st.floats(0.1, 10.0), log_scale=st.floats(-3, 3), weighted=st.booleans(), with_prior=st.booleans())
def test_converged_means_certified_and_the_dual_bound_is_below_cvxpy(seed, d, n_pairs, gamma, log_scale, weighted,
                                                                      with_prior):
    rng = np.random.default_rng(seed)
    n = 12
    X = rng.standard_normal((n, d)) * 10.0 ** log_scale
    iu, ju = np.triu_indices(n, 1)
    pick = rng.choice(iu.size, n_pairs, replace=False)
    pairs = np.column_stack([iu[pick], ju[pick]])
    n_sim = int(rng.integers(1, n_pairs))
    V = X[pairs[:, 0]] - X[pairs[:, 1]]
    med = float(np.median(np.einsum("ij,ij->i", V, V)))
    weight = rng.uniform(0.2, 5.0, n_pairs) if weighted else None
    prior = random_psd(d, seed=rng) + 0.1 * np.eye(d) if with_prior else None
    model = ITMLModel(X, pairs[:n_sim], pairs[n_sim:], u=0.5 * med, l=2.0 * med, gamma=gamma, prior=prior,
                      weight=weight)
    res = bregman_itml(model)
    if res.converged:
        assert res.certified_gap <= res.tol and res.lower_bound <= res.objective * (1 + 1e-12)
    form = build_itml_problem(model)
    sol = form.solve("CLARABEL")
    lower = form.lower_bound(sol)
    if lower is not None:
        assert lower <= res.objective * (1 + 1e-12)
        if sol.point is not None:
            upper = form.value_at(form.feasible_point(sol.point))
            assert lower <= upper * (1 + 1e-12)
