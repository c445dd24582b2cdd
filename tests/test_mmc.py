"""MMC: min-form ground truth vs the max-form ascent, the exact projection, the scale identity, bad input."""
import warnings
from functools import lru_cache

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvxmetric.certificates import relative_difference, relative_gap
from cvxmetric.constraints import ConstraintSet
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.instances import get_instance, list_instances
from cvxmetric.instances.mmc import mmc_pairs
from cvxmetric.linalg import project_psd_halfspace, random_psd
from cvxmetric.mmc import MMCModel, min_form_value
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.formulations.mmc import build_mmc, build_mmc_max
from cvxmetric.solvers.mmc import mmc_ascent, solve_mmc
from cvxmetric.verification.methods.mmc import mmc_kkt_fast, mmc_kkt_truth
from cvxmetric.verification.tolerances import (GAP_FIRST_ORDER, GAP_NEGATIVE_SLACK, KKT_TRUTH_TOL,
                                     MMC_SCALE_IDENTITY_RTOL, VALUE_AT_RTOL)

INSTANCES = list_instances("mmc", default_only=True)


@lru_cache(maxsize=None)
def _truth(name):
    inst = get_instance("mmc", name)
    form = build_mmc(inst.X, inst.constraints)
    sol = form.solve("CLARABEL")
    assert sol.ok, sol.status
    return form, sol


def _blobs(seed=0, n_per=15, d=4):
    rng = np.random.default_rng(seed)
    X = np.concatenate([rng.standard_normal((n_per, d)) + c for c in range(3)])
    return X, np.repeat(np.arange(3), n_per)


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", INSTANCES)
def test_fast_matches_clarabel(name, seed, whiten):
    """From the default start and from a random PD start: gap <= 1e-3, value_at agrees, the
    certificate brackets Clarabel's optimum."""
    inst = get_instance("mmc", name)
    form, sol = _truth(name)
    M0 = None if seed == 0 else random_psd(inst.d, seed=seed) + 0.1 * np.eye(inst.d)
    res = solve_mmc(inst.X, inst.constraints, M0=M0, whiten=whiten)
    assert res.converged and res.info["whiten"] is whiten
    f = form.value_at(res.M)
    assert abs(f - res.objective) <= VALUE_AT_RTOL * max(1.0, abs(f))
    gap = (f - sol.value) / max(1.0, abs(sol.value))
    assert -GAP_NEGATIVE_SLACK <= gap <= GAP_FIRST_ORDER
    assert res.info["p_min_lower"] <= sol.value * (1 + 1e-6)
    assert abs(res.objective * res.info["p_max"] ** 2 - 1.0) <= 1e-9
    assert mmc_kkt_fast(form, res.M) <= GAP_FIRST_ORDER


@pytest.mark.parametrize("name", INSTANCES)
def test_ground_truth_kkt_and_scale_identity(name):
    inst = get_instance("mmc", name)
    form, sol = _truth(name)
    assert max(mmc_kkt_truth(form, sol).values()) <= KKT_TRUTH_TOL
    mx = build_mmc_max(inst.X, inst.constraints).solve("CLARABEL")
    assert mx.ok
    assert abs(sol.value * mx.value ** 2 - 1.0) <= MMC_SCALE_IDENTITY_RTOL
    # the dual of the dissimilar constraint is 2 p* (homogeneity)
    assert abs(float(sol.duals["dissimilar"]) / 2 - sol.value) <= 1e-4 * sol.value


def test_wrong_solver_would_fail():
    inst = get_instance("mmc", "wine")
    form, sol = _truth("wine")
    model = form.model
    assert (form.value_at(model.to_min_form(np.eye(inst.d))) - sol.value) / sol.value > GAP_FIRST_ORDER
    P = sol.point + 0.02 * np.linalg.norm(sol.point) * random_psd(inst.d, rank=1, seed=3)
    assert (form.value_at(model.to_min_form(P)) - sol.value) / sol.value > GAP_FIRST_ORDER


@pytest.mark.parametrize("name", INSTANCES)
def test_value_at_equals_model_value(name):
    """value_at (cvxpy expressions) == the numpy model, at feasible and infeasible random M."""
    inst = get_instance("mmc", name)
    form, _ = _truth(name)
    model = form.model
    rng = np.random.default_rng(11)
    for t in range(5):
        M = random_psd(inst.d, rank=1 + t % inst.d, seed=rng, scale=10.0 ** (t - 2))
        v = form.value_at(M)
        assert abs(model.value(M) - v) <= VALUE_AT_RTOL * max(1.0, v)
        g = model.dissimilar_sum(M)
        if g < 1:  # infeasible: the objective of the smallest feasible rescaling M / g^2
            assert abs(v - model.similar_sum(M) / g ** 2) <= 1e-12 * v
            assert abs(v - form.value_at(model.to_min_form(M))) <= 1e-9 * v
        else:
            assert abs(v - model.similar_sum(M)) <= 1e-12 * max(1.0, v)


def test_min_form_value_definition():
    assert min_form_value(3.0, 2.0) == 3.0
    assert min_form_value(3.0, 0.5) == 12.0
    assert min_form_value(3.0, 0.0) == float("inf")


# ----------------------------------------------------------------------------- projection
@st.composite
def _projection_case(draw):
    d = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((d, d)) * draw(st.sampled_from([0.1, 1.0, 10.0]))
    Y = Y + Y.T
    C = random_psd(d, rank=draw(st.integers(1, d)), seed=rng)
    b = draw(st.sampled_from([0.01, 1.0, 5.0]))
    return Y, C, b, rng


@given(_projection_case())
def test_exact_projection_is_the_projection(case):
    """Feasible, and the KKT conditions of min ||P - Y||^2 over {P >= 0, <P, C> <= b} hold:
    P = Pi_psd(Y - tau C), Z = P - (Y - tau C) >= 0, <Z, P> = 0, tau >= 0, tau (<P, C> - b) = 0;
    hence the variational inequality <Y - P, Q - P> <= 0 for feasible Q."""
    Y, C, b, rng = case
    P, tau = project_psd_halfspace(Y, C, b, return_tau=True)
    scale = max(1.0, float(np.linalg.norm(Y)))
    assert np.linalg.eigvalsh(P)[0] >= -1e-10 * scale
    assert np.vdot(P, C) <= b * (1 + 1e-12)
    assert tau >= 0
    Z = P - (Y - tau * C)
    assert np.linalg.eigvalsh(Z)[0] >= -1e-9 * scale
    assert abs(np.vdot(Z, P)) <= 1e-8 * scale ** 2
    assert tau * abs(np.vdot(P, C) - b) <= 1e-9 * max(1.0, tau) * b
    for _ in range(5):
        Q = random_psd(Y.shape[0], seed=rng)
        q = float(np.vdot(Q, C))
        if q > b:
            Q = Q * (b / q)
        assert np.vdot(Y - P, Q - P) <= 1e-8 * scale ** 2


def test_exact_projection_matches_cvxpy():
    rng = np.random.default_rng(5)
    for d in (3, 5):
        Y = rng.standard_normal((d, d))
        Y = 3 * (Y + Y.T)
        C = random_psd(d, rank=d - 1, seed=rng)
        P = project_psd_halfspace(Y, C)
        M = cp.Variable((d, d), symmetric=True)
        cp.Problem(cp.Minimize(cp.sum_squares(M - Y)), [M >> 0, cp.trace(C @ M) <= 1]).solve(
            solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
        np.testing.assert_allclose(P, M.value, atol=1e-5)


def test_projection_inside_is_identity_and_bad_input():
    C = np.eye(3)
    P = 0.1 * np.eye(3)
    np.testing.assert_allclose(project_psd_halfspace(P, C), P, atol=1e-15)
    with pytest.raises(ValueError, match="b must be"):
        project_psd_halfspace(P, C, b=0.0)
    with pytest.raises(ValueError, match="same shape"):
        project_psd_halfspace(P, np.eye(2))
    Y = np.diag([2.0, -1.0, 0.5])
    np.testing.assert_allclose(project_psd_halfspace(Y, np.zeros((3, 3))), np.diag([2.0, 0.0, 0.5]))


def test_certificate_is_an_upper_bound_everywhere():
    """p_max <= the concavity certificate at any feasible point (checked against Clarabel)."""
    inst = get_instance("mmc", "iris")
    model = MMCModel(inst.X, inst.constraints)
    mx = build_mmc_max(inst.X, inst.constraints).solve("CLARABEL")
    rng = np.random.default_rng(2)
    for _ in range(5):
        M = random_psd(inst.d, seed=rng) + 0.01 * np.eye(inst.d)
        g, upper = model.certificate(M)
        assert g <= mx.value * (1 + 1e-7) and upper >= mx.value * (1 - 1e-7)


def test_non_convergence_warns_and_inputs_unchanged():
    X, y = _blobs(1)
    cons = mmc_pairs(y, 30, 30, seed=1)
    X0 = X.copy()
    with pytest.warns(ConvergenceWarning, match="certified gap"):
        res = solve_mmc(X, cons, max_iter=1, tol=1e-14)
    assert not res.converged
    np.testing.assert_array_equal(X, X0)


# ----------------------------------------------------------------------------- bad input
def test_bad_constraint_sets():
    X, y = _blobs(0)
    with pytest.raises(ValueError, match="relative"):
        solve_mmc(X, ConstraintSet.from_triplets([[0, 1, 20]]))
    dis = ConstraintSet.from_pairs([[0, 20]], similar=False, bound=1.0)
    sim = ConstraintSet.from_pairs([[0, 1]], similar=True, bound=1.0)
    with pytest.raises(ValueError, match="at least one similar pair"):
        build_mmc(X, dis)
    with pytest.raises(ValueError, match="dissimilar pair"):
        solve_mmc(X, sim)
    with pytest.raises(ValueError, match="degenerate"):
        solve_mmc(X, sim + dis)  # one similar pair spans 1 of 4 dimensions
    with pytest.raises(TypeError, match="ConstraintSet"):
        solve_mmc(X, [[0, 1]])
    with pytest.raises(ValueError, match="indexes a row"):
        solve_mmc(X[:10], mmc_pairs(y, 30, 30, seed=0))


def test_bad_solver_options():
    X, y = _blobs(0)
    cons = mmc_pairs(y, 30, 30, seed=0)
    with pytest.raises(ValueError, match="positive semidefinite"):
        solve_mmc(X, cons, M0=-np.eye(4))
    with pytest.raises(ValueError, match="tol must be > 0"):
        solve_mmc(X, cons, tol=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        solve_mmc(X, cons, max_iter=0)
    with pytest.raises(ValueError, match="shape"):
        build_mmc(X, cons).value_at(np.eye(3))
    with pytest.raises(TypeError, match="whiten"):
        solve_mmc(X, cons, whiten="yes")


# ----------------------------------------------------------------------------- certificates and scale
#: The ground truth is certified to this relative width in these tests.
TRUTH_RTOL = 1e-6
#: Two certified answers of the same problem (each within its own certified gap) agree to this.
AGREEMENT_RTOL = 1e-4


def _feature_scalings(d):
    return {"x1e-3": np.full(d, 1e-3), "x1e3": np.full(d, 1e3), "features 1e-4..1e4": np.logspace(-4, 4, d)}


@pytest.mark.parametrize("scaling", ["x1e-3", "x1e3", "features 1e-4..1e4"])
def test_invariance_under_linear_maps_of_X(scaling):
    """MMC is invariant under X -> X S: the solver and the certified ground truth give the same
    certified answer (no false "degenerate" rejection when feature scales span 1e-4..1e4)."""
    inst = get_instance("mmc", "wine")
    S = _feature_scalings(inst.d)[scaling]
    base = solve_mmc(inst.X, inst.constraints)
    res = solve_mmc(inst.X * S, inst.constraints)
    assert res.converged and res.measure == "certified_gap" and res.certified_gap <= res.tol
    assert abs(relative_difference(res.objective, base.objective)) <= AGREEMENT_RTOL
    form0 = build_mmc(inst.X, inst.constraints)
    M_back = S[:, None] * res.M * S[None, :]        # the scaled problem's point in original coordinates
    assert abs(relative_difference(form0.value_at(form0.feasible_point(M_back)), base.objective)) <= AGREEMENT_RTOL
    truth = solve_certified(build_mmc(inst.X * S, inst.constraints), TRUTH_RTOL)
    assert truth.certified and truth.rung == "normalized/clarabel"
    assert truth.bounds.contains(res.objective, rtol=res.tol)
    assert res.lower_bound <= truth.bounds.upper * (1 + 1e-12)
    # the unpreconditioned ascent: the same certified answer, or a warned non-convergence
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raw = solve_mmc(inst.X * S, inst.constraints, whiten=False, max_iter=300)
    if raw.converged:
        assert truth.bounds.contains(raw.objective, rtol=raw.tol)
    else:
        assert any(issubclass(w.category, ConvergenceWarning) for w in caught)
        assert raw.lower_bound <= truth.bounds.upper * (1 + 1e-12)


def test_degeneracy_and_zero_length_tests_are_relative():
    """Per-feature scales 1e-4..1e4 and X * 1e-6 are accepted (and give the same model); a genuinely
    degenerate set is still rejected whatever the scale."""
    inst = get_instance("mmc", "iris")
    ref = MMCModel(inst.X, inst.constraints)
    for S in (np.logspace(-4, 4, inst.d), np.full(inst.d, 1e-6), np.full(inst.d, 1e6)):
        model = MMCModel(inst.X * S, inst.constraints)
        assert model.rank == ref.rank and len(model.wD) == len(ref.wD)
    X, y = _blobs(0)
    dis = ConstraintSet.from_pairs([[0, 20]], similar=False, bound=1.0)
    sim = ConstraintSet.from_pairs([[0, 1]], similar=True, bound=1.0)
    for s in (1e-6, 1.0, 1e6):
        with pytest.raises(ValueError, match="degenerate"):
            MMCModel(X * s, sim + dis)


@pytest.mark.parametrize("scale", [1e-3, 0.5, 1.0, 1e3])
def test_scoring_an_outside_matrix_is_scale_free(scale):
    """--check-matrix: a correct M of any scale (metric-learn's scale is arbitrary), feasible or not,
    scores p* after feasible_point (the tight rescaling M / g(M)^2)."""
    inst = get_instance("mmc", "iris")
    form, sol = _truth("iris")
    truth = solve_certified(form, TRUTH_RTOL)
    M = scale * truth.point
    P = form.feasible_point(M)
    assert abs(form.model.dissimilar_sum(P) - 1.0) <= 1e-12      # the constraint is tight
    assert abs(relative_difference(form.value_at(P), truth.bounds.upper)) <= 1e-9
    assert form.model.bounds(M).gap <= 1e-5                        # kkt_fast of the harness: scale-free
    # a wrong matrix still fails, at every scale
    assert relative_difference(form.value_at(form.feasible_point(scale * np.eye(inst.d))), truth.bounds.upper) > GAP_FIRST_ORDER


@pytest.mark.parametrize("name", INSTANCES)
def test_ground_truth_hooks(name):
    """dual_bound at Clarabel's point certifies it; normalize is exact (powers of 2)."""
    inst = get_instance("mmc", name)
    form, sol = _truth(name)
    lb = form.lower_bound(sol)
    assert lb <= sol.value * (1 + 1e-9) and relative_gap(sol.value, lb) <= 1e-5
    norm = form.normalize()
    rng = np.random.default_rng(0)
    for t in range(3):
        P = random_psd(inst.d, seed=rng, scale=10.0 ** (t - 1))
        assert abs(relative_difference(form.value_at(norm.point_back(P)),
                                       norm.value_scale * norm.formulation.value_at(P))) <= 1e-12
    # the fast solver's certificate and the ground truth's are one function
    res = solve_mmc(inst.X, inst.constraints)
    assert res.lower_bound == form.model.lower_bound(res.M)


@st.composite
def _tiny_mmc_case(draw):
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    d = draw(st.integers(1, 3))
    n_per = draw(st.integers(4, 5))
    X = np.concatenate([rng.standard_normal((n_per, d)) + 2 * c for c in range(2)])
    X = X * np.array([draw(st.sampled_from([1e-3, 1.0, 1e3])) for _ in range(d)])
    y = np.repeat([0, 1], n_per)
    return X, mmc_pairs(y, draw(st.integers(d + 2, 8)), draw(st.integers(1, 6)), seed=seed)


@settings(max_examples=25)
@given(_tiny_mmc_case())
def test_property_converged_means_certified(case):
    """Converged => certified gap <= tol, and the certified bound is below the cvxpy optimum."""
    X, cons = case
    try:
        model = MMCModel(X, cons)
    except ValueError as exc:   # too few similar pairs to span the data: a legitimate rejection
        assert "degenerate" in str(exc)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = mmc_ascent(model, max_iter=2000)
    if res.converged:
        assert res.certified_gap <= res.tol
    else:
        assert any(issubclass(w.category, ConvergenceWarning) for w in caught)
    truth = solve_certified(build_mmc(X, cons), TRUTH_RTOL)
    assert truth.bounds.upper is not None
    assert res.lower_bound <= truth.bounds.upper * (1 + 1e-9)
    if truth.bounds.lower is not None:
        assert truth.bounds.lower <= res.objective * (1 + 1e-9)


# ------------------------------------------------------------------ the diagonal MMC
def test_capped_simplex_projection_is_the_nearest_point():
    from cvxmetric.solvers.mmc import project_capped_simplex
    rng = np.random.default_rng(0)
    for scale in (0.1, 1.0, 5.0):
        y = scale * rng.standard_normal(6)
        b = project_capped_simplex(y)
        v = cp.Variable(6)
        cp.Problem(cp.Minimize(cp.sum_squares(v - y)), [v >= 0, cp.sum(v) <= 1]).solve("CLARABEL")
        np.testing.assert_allclose(b, v.value, atol=1e-7)


@pytest.mark.parametrize("name", ["iris", "wine"])
def test_diagonal_mmc_fast_and_certified_truth_agree(name):
    from cvxmetric.formulations.mmc import build_mmc_diagonal
    from cvxmetric.solvers.mmc import solve_mmc_diagonal
    inst = get_instance("mmc_diagonal", name)
    res = solve_mmc_diagonal(inst.X, inst.constraints)
    truth = solve_certified(build_mmc_diagonal(inst.X, inst.constraints), 1e-7)
    assert res.converged and truth.certified
    assert res.lower_bound <= truth.bounds.upper * (1 + 1e-9)         # the certificate is a valid bound
    assert truth.bounds.lower <= res.objective * (1 + 1e-9)
    assert relative_difference(res.objective, truth.bounds.upper) <= res.measure_value + 1e-7
    M = res.M
    np.testing.assert_array_equal(M, np.diag(np.diag(M)))


def test_diagonal_mmc_is_invariant_under_feature_scaling():
    from cvxmetric.solvers.mmc import solve_mmc_diagonal
    inst = get_instance("mmc_diagonal", "iris")
    F = np.array([1e-4, 1.0, 1e3, 1e4])
    a, b = solve_mmc_diagonal(inst.X, inst.constraints), solve_mmc_diagonal(inst.X * F, inst.constraints)
    assert a.n_iter == b.n_iter and b.converged
    np.testing.assert_allclose(np.diag(b.M) * F ** 2, np.diag(a.M), rtol=1e-9, atol=1e-12 * np.diag(a.M).max())


def test_diagonal_mmc_names_a_degenerate_feature():
    from cvxmetric.solvers.mmc import solve_mmc_diagonal
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [3.0, 5.0]])
    cons = (ConstraintSet.from_pairs([[0, 1]], similar=True, bound=0.0)
            + ConstraintSet.from_pairs([[2, 3]], similar=False, bound=0.0))
    with pytest.raises(ValueError, match="feature 1 is constant on every similar pair but not on dissimilar pair 0"):
        solve_mmc_diagonal(X, cons)
