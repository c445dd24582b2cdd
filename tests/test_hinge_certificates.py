"""The hinge family's one certificate, its exact rescaling, and scale invariance of PDHG and LMNN.

* ``HingeModel.dual_bound`` is a valid lower bound (<= the certified cvxpy optimum) for any
  multipliers, including q = 0 with a linear term that is singular on R^d but positive definite on
  the span of the data's differences (constant features), and with only a trace bound;
* ``HingeModel.rescaled``/``normalization`` map values and points back exactly;
* Qwise-PDHG (weights x 1e-6; "pull" data x 1e-4..1e4, where the model is invariant) and
  LMNN-PDHG (data x 1e-4..1e4) give the same certified answer, or converged=False with a warning;
* the ground truth of LMNN at X x 1e-3 / 1e3 agrees with the unscaled one (the normalized rung);
* the fast-point KKT residual is finite and scale-free at features x 1e3 and never raises;
* a hypothesis property over random tiny hinge models.
"""
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvxmetric import ConstraintSet, ConvergenceWarning
from cvxmetric.certificates import relative_difference, relative_gap
from cvxmetric.hinge import QuadrupletGeometry
from cvxmetric.instances import get_instance
from cvxmetric.linalg import random_psd
from cvxmetric.models import HingeModel, pull_matrix, qwise_model
from cvxmetric.formulations.hinge import build_hinge_problem
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.formulations.lmnn import build_lmnn
from cvxmetric.solvers.lmnn import solve_lmnn
from cvxmetric.solvers.pdhg import pdhg
from cvxmetric.verification.kkt import hinge_kkt_fast

#: Scales of the invariance tests: data, and all hinge weights.
DATA_SCALES = (1e-4, 1e-2, 1e2, 1e4)
WEIGHT_SCALE = 1e-6
#: Certified optima of rescaled problems agree to this (the ladder certifies to TRUTH_RTOL).
TRUTH_RTOL = 1e-7
AGREE_RTOL = 1e-4


def _solve(fn, *args, **kw):
    """Run a solver; return (result, warned) with ConvergenceWarnings recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        res = fn(*args, **kw)
    return res, any(issubclass(w.category, ConvergenceWarning) for w in caught)


def _same_certified_answer(res, warned, reference, rtol):
    """The invariance verdict: converged with the reference value (and a bound below it), or a
    non-converged result that said so."""
    if not res.converged:
        assert warned and res.status != "converged"
        return
    assert not warned
    assert res.measure == "certified_gap" and res.certified_gap <= res.tol
    assert abs(relative_difference(res.objective, reference)) <= rtol
    assert res.lower_bound <= reference * (1 + TRUTH_RTOL)


# ----------------------------------------------------------------------------- the certificate
def _constant_feature_lmnn():
    """LMNN data with a constant feature and a duplicated one: the pull matrix is singular on R^d
    (no certificate existed), positive definite on the span of the differences."""
    inst = get_instance("lmnn", "iris-sub")
    X = np.column_stack([inst.X, np.full(len(inst.X), 3.0), inst.X[:, 0]])
    return X, inst.y, {k: inst.params[k] for k in ("n_neighbors", "regularization", "margin")}


def test_certificate_on_the_data_span_with_constant_features():
    X, y, p = _constant_feature_lmnn()
    form = build_lmnn(X, y, **p)
    model = form.model
    assert np.linalg.eigvalsh(model.R)[0] <= 1e-12 * np.linalg.norm(model.R)   # singular on R^d
    truth = solve_certified(form, TRUTH_RTOL)
    assert truth.certified
    res = solve_lmnn(X, y, method="pdhg", **p)
    assert res.converged and res.measure == "certified_gap"
    assert res.lower_bound <= truth.bounds.upper * (1 + TRUTH_RTOL)
    assert abs(relative_difference(res.objective, truth.bounds.upper)) <= 1e-3
    # Clarabel's own multipliers certify the optimum through the core function
    sol = form.solve("CLARABEL")
    assert relative_gap(truth.bounds.upper, model.dual_bound(sol.duals["hinge"])) <= 1e-5


def _plain_repair(model, y, KTy, span, steps):
    """The targeted repair as written in the Notes of ``dual_bound``: every row, one (m, J) array."""
    from cvxmetric.hinge_certificates import EIG_ROUNDOFF, REPAIR_OVERSHOOT, restrict

    y = y.copy()
    for _ in range(steps):
        lam, V = np.linalg.eigh(span.R_s + restrict(span.U, KTy))
        neg = lam < -EIG_ROUNDOFF * float(np.max(np.abs(lam)))
        if not np.any(neg):
            break
        Vn = V[:, neg] if span.U is None else span.U @ V[:, neg]
        G = np.minimum(model.geometry.values_rank_one(Vn, path="differences"), 0.0)
        have = y @ (G * G)
        if not np.any(have > 0):
            break
        beta = REPAIR_OVERSHOOT * (-lam[neg]) / np.where(have > 0, have, np.inf)
        y = y * (1.0 - np.minimum(1.0, np.max(-G * beta[None, :], axis=1)))
        KTy = model.geometry.weighted_sum(y, path="differences")
    return y


def test_repair_over_the_support_in_blocks_is_the_plain_repair():
    """The repair runs over the support of y in cache-sized blocks (twice per step) on the cheaper
    operator path; it is the plain repair up to round-off, and its bound is valid."""
    X, y_lab, p = _constant_feature_lmnn()
    model = build_lmnn(X, y_lab, **p).model
    rng = np.random.default_rng(0)
    y = np.where(rng.random(model.m) < 0.4, 0.0, rng.random(model.m) * model.coef)
    span = model._span()
    KTy = model.geometry.weighted_sum(y)
    from cvxmetric.hinge_certificates import _repair, restrict

    lam0 = np.linalg.eigvalsh(span.R_s + restrict(span.U, KTy))
    fast, _, _ = _repair(model, y, KTy, span, 10, lam0)
    plain = _plain_repair(model, y, KTy, span, 10)
    assert np.all(fast[y == 0] == 0) and np.linalg.norm(fast - plain) <= 1e-10 * np.linalg.norm(plain)
    assert not np.allclose(fast, y)   # the repair did something
    truth = solve_certified(build_lmnn(X, y_lab, **p), TRUTH_RTOL)
    assert model.dual_bound(y) <= truth.bounds.upper * (1 + TRUTH_RTOL)


def test_trace_bound_certifies_a_singular_linear_term():
    """q = 0, R = 0 on the span, similar pairs present: only the trace bound (from a feasible
    value) certifies; without ``upper`` there is no bound for a non-feasible multiplier."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, 3))
    cons = (ConstraintSet.from_pairs(np.array([[0, 1], [2, 3], [4, 5], [6, 7]]), similar=True, bound=0.5)
            + ConstraintSet.from_pairs(np.array([[0, 8], [1, 9], [2, 10], [3, 11]]), similar=False, bound=2.0)
            + ConstraintSet.from_quadruplets([[0, 1, 2, 9], [4, 5, 6, 11], [1, 3, 7, 8]]))
    model = HingeModel(QuadrupletGeometry(X, cons), np.ones(len(cons)), np.zeros((3, 3)), 0.0)
    assert model.has_certificate
    truth = solve_certified(build_hinge_problem(model), TRUTH_RTOL)
    assert truth.certified
    y = np.full(model.m, 0.5)
    assert model.dual_bound(y, upper=truth.bounds.upper) <= truth.bounds.upper * (1 + 1e-9)
    res = pdhg(model)
    assert res.converged and res.lower_bound <= truth.bounds.upper * (1 + TRUTH_RTOL)


def test_rescaling_is_exact_and_normalization_is_a_power_of_two_shift():
    inst = get_instance("qwise", "iris-mixed")
    model = qwise_model(inst.X, inst.constraints, **inst.params)
    M = random_psd(model.d, seed=0)
    tw = model.rescaled(0.375, 2.5, 7.0)
    assert math.isclose(model.value(tw.point_scale * M), tw.value_scale * tw.model.value(M), rel_tol=1e-12)
    a = model.normalization()
    b = qwise_model(inst.X * 2.0 ** 10, inst.constraints, **inst.params).normalization()
    np.testing.assert_array_equal(a.model.geometry.X, b.model.geometry.X)   # bit for bit
    assert model.value(a.point_scale * M) == a.value_scale * a.model.value(M)


# ----------------------------------------------------------------------------- invariance
def test_qwise_pdhg_weights_times_1e6():
    """All weights x 1e-6 (the same minimiser): the same certified answer, value x 1e-6."""
    inst = get_instance("qwise", "iris-mixed")
    p = dict(inst.params)
    base, _ = _solve(pdhg, qwise_model(inst.X, inst.constraints, **p))
    assert base.converged
    for key in ("C_Q", "C_P", "reg_weight"):
        p[key] = p.get(key, 1.0) * WEIGHT_SCALE
    res, warned = _solve(pdhg, qwise_model(inst.X, inst.constraints, **p))
    _same_certified_answer(res, warned, WEIGHT_SCALE * base.objective, 1e-3)
    assert res.n_iter == base.n_iter   # the iterates are equivariant, not merely close


@pytest.mark.parametrize("scale", DATA_SCALES)
def test_qwise_pdhg_pull_data_scaling(scale):
    """Qwise with the "pull" regularizer is invariant under X -> sX (M -> M / s^2)."""
    inst = get_instance("qwise", "syn-d5")
    pull = np.column_stack([np.arange(40), np.arange(1, 41)])
    kw = dict(regularizer="pull", C_Q=inst.params["C_Q"], pull_pairs=pull)
    truth = solve_certified(build_hinge_problem(qwise_model(inst.X, inst.constraints, **kw)), TRUTH_RTOL)
    assert truth.certified
    res, warned = _solve(pdhg, qwise_model(inst.X * scale, inst.constraints, **kw))
    _same_certified_answer(res, warned, truth.bounds.upper, 1e-3)


@pytest.mark.parametrize("scale", DATA_SCALES)
def test_lmnn_pdhg_data_scaling(scale):
    inst = get_instance("lmnn", "iris-sub")
    p = {k: inst.params[k] for k in ("n_neighbors", "regularization", "margin")}
    truth = solve_certified(build_lmnn(inst.X, inst.y, **p), TRUTH_RTOL)
    res, warned = _solve(solve_lmnn, inst.X * scale, inst.y, method="pdhg", **p)
    _same_certified_answer(res, warned, truth.bounds.upper, 1e-3)


@pytest.mark.parametrize("scale", (1e-3, 1e3))
def test_lmnn_ground_truth_is_scale_invariant(scale):
    """Clarabel on the raw problem was 47 % off at X x 1e-3; the ladder's normalized rung certifies."""
    inst = get_instance("lmnn", "wine-sub")
    p = {k: inst.params[k] for k in ("n_neighbors", "regularization", "margin")}
    ref = solve_certified(build_lmnn(inst.X, inst.y, **p), TRUTH_RTOL)
    got = solve_certified(build_lmnn(inst.X * scale, inst.y, **p), TRUTH_RTOL)
    assert ref.certified and got.certified
    assert abs(relative_difference(got.bounds.upper, ref.bounds.upper)) <= AGREE_RTOL
    assert got.bounds.lower <= ref.bounds.upper * (1 + TRUTH_RTOL)


# ----------------------------------------------------------------------------- fast-point KKT
@pytest.mark.parametrize("scale", (1e-3, 1e3))
def test_fast_kkt_is_scale_free_and_never_raises(scale):
    inst = get_instance("qwise", "syn-d5")
    kw = dict(regularizer="pull", C_Q=inst.params["C_Q"], pull_pairs=np.column_stack([np.arange(40), np.arange(1, 41)]))
    m1 = qwise_model(inst.X, inst.constraints, **kw)
    ms = qwise_model(inst.X * scale, inst.constraints, **kw)
    res, _ = _solve(pdhg, m1)
    r1 = hinge_kkt_fast(m1, res.M)
    rs = hinge_kkt_fast(ms, res.M / scale ** 2)
    assert r1.reason == "" and rs.reason == ""
    assert math.isclose(r1, rs, rel_tol=1e-3, abs_tol=1e-8)
    bad = hinge_kkt_fast(m1, np.full((m1.d, m1.d), np.nan))
    assert math.isnan(bad) and "failed" in bad.reason


# ----------------------------------------------------------------------------- property
@st.composite
def tiny_models(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    d = draw(st.integers(2, 4))
    n = 10
    X = rng.standard_normal((n, d)) * draw(st.sampled_from([1e-3, 1.0, 1e3]))
    if draw(st.booleans()):
        X[:, -1] = 1.0   # a constant feature
    m_q, m_p = draw(st.integers(1, 20)), draw(st.integers(0, 10))
    quads = rng.integers(0, n, (m_q, 4))
    quads[:, 1] = (quads[:, 0] + 1 + rng.integers(0, n - 1, m_q)) % n
    cons = ConstraintSet.from_quadruplets(quads, delta=rng.uniform(0.1, 2.0, m_q))
    if m_p:
        pairs = np.column_stack([rng.integers(0, n, m_p), rng.integers(0, n, m_p)])
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        if len(pairs):
            half = len(pairs) // 2
            if half:
                cons = cons + ConstraintSet.from_pairs(pairs[:half], similar=True, bound=0.5)
            cons = cons + ConstraintSet.from_pairs(pairs[half:], similar=False, bound=2.0)
    kind = draw(st.sampled_from(["trace", "pull", "frobenius", "pull-singular"]))
    coef = rng.uniform(0.1, 2.0, len(cons)) * draw(st.sampled_from([1e-6, 1.0, 1e3]))
    q = 0.0
    if kind == "trace":
        R = np.eye(d)
    elif kind == "frobenius":
        R, q = np.zeros((d, d)), 1.0
    else:
        k = n - 1 if kind == "pull" else 1
        R = pull_matrix(X, np.column_stack([np.arange(k), np.arange(1, k + 1)]))
    return HingeModel(QuadrupletGeometry(X, cons), coef, R, q, name=kind), seed


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_models())
def test_random_tiny_models_certificates_are_valid(case):
    """Converged implies certified gap <= tol; every core dual bound is <= the certified optimum."""
    model, seed = case
    truth = solve_certified(build_hinge_problem(model), TRUTH_RTOL)
    if truth.bounds.upper is None:
        return
    p_up = truth.bounds.upper
    slack = 1e-7 * abs(p_up) + 1e-12 * float(np.sum(model.coef))
    rng = np.random.default_rng(seed)
    for y in (rng.uniform(0, 1, model.m) * model.coef, model.coef, np.zeros(model.m)):
        b = model.dual_bound(y, upper=p_up)
        assert b is None or b <= p_up + slack
    res, warned = _solve(pdhg, model, max_iter=4000)
    if res.lower_bound is not None:
        assert res.lower_bound <= p_up + slack
    if res.converged:
        assert not warned
        assert res.measure_value <= res.tol
        if res.measure == "certified_gap":
            assert relative_gap(res.objective, res.lower_bound) <= res.tol
        if truth.certified and res.measure == "certified_gap":
            assert relative_difference(res.objective, p_up) <= res.tol + 2 * TRUTH_RTOL
    else:
        assert warned


@pytest.mark.parametrize("regularizer", ["trace", "frobenius", "pull"])
def test_certify_with_the_callers_dual_eigenvalues_is_the_same_bound(regularizer):
    """Eigenvalues of sym(R) + sym(K* y) passed by the caller (PDHG's score computes them) give the
    same bound as the certificate's own eigendecomposition; the trace regularizer (R = I) takes the
    theta test from them (R_scale) without a second one."""
    rng = np.random.default_rng(11)
    n, d = 30, 4
    X = rng.standard_normal((n, d))
    cons = ConstraintSet.from_quadruplets(rng.integers(0, n, size=(40, 4)))
    kw = {"pull_pairs": rng.integers(0, n, size=(20, 2))} if regularizer == "pull" else {}
    model = qwise_model(X, cons, regularizer=regularizer, **kw)
    assert (model._span().R_scale is not None) == (regularizer == "trace")
    for scale in (0.0, 0.3, 1.0):
        y = scale * model.coef * rng.random(model.m)
        Ky = model.geometry.weighted_sum(y)
        lam = np.linalg.eigvalsh(0.5 * (model.R + model.R.T) + 0.5 * (Ky + Ky.T))
        for steps in (0, 5):
            b_own, y_own = model.certify(y, upper=1e3, Ky=Ky, repair_steps=steps)
            b_given, y_given = model.certify(y, upper=1e3, Ky=Ky, repair_steps=steps, dual_eigvals=lam)
            assert b_given == pytest.approx(b_own, rel=1e-12, abs=1e-12)
            np.testing.assert_allclose(y_given, y_own, rtol=1e-12, atol=0)


@pytest.mark.parametrize("y_scale", [0.001, 0.003])
def test_repair_with_the_partial_eigensolver_is_the_full_one(y_scale, monkeypatch):
    """From d = PARTIAL_EIGH_MIN_D the repair takes only the negative eigenpairs (few here: 6 and
    36 of 200); the repaired bound equals the one of the full eigendecomposition."""
    import cvxmetric.linalg as linalg

    rng = np.random.default_rng(2)
    n, d = 300, linalg.PARTIAL_EIGH_MIN_D
    X = rng.standard_normal((n, d))
    model = qwise_model(X, ConstraintSet.from_quadruplets(rng.integers(0, n, size=(400, 4))))
    y = y_scale * model.coef * rng.random(model.m)
    b_part, y_part = model.certify(y, upper=1e3)
    assert b_part > model.certify(y, upper=1e3, repair_steps=0)[0]      # the repair ran and paid
    monkeypatch.setattr(linalg, "PARTIAL_EIGH_MIN_D", 10 * d)
    b_full, y_full = model.certify(y, upper=1e3)
    assert b_part == pytest.approx(b_full, rel=1e-9)
    np.testing.assert_allclose(y_part, y_full, rtol=1e-8, atol=1e-12 * float(np.max(model.coef)))


@pytest.mark.parametrize("seed", range(4))
def test_range_rank_lower_bound_is_below_the_counted_rank(seed):
    """The trace bound on the range's dimension never exceeds the count of eigenvalues above
    POLISH_RANK_RTOL of the largest, over flat, graded and tailed spectra."""
    from cvxmetric.hinge_certificates import POLISH_RANK_RTOL, _range_rank, range_rank_lower_bound

    rng = np.random.default_rng(seed)
    k = 40
    Q = np.linalg.qr(rng.standard_normal((k, k)))[0]
    spectra = [np.r_[np.ones(12), np.zeros(k - 12)],
               np.r_[np.geomspace(1.0, 1e-3, 20), np.zeros(k - 20)],
               np.r_[rng.random(10) + 0.5, np.full(k - 10, 0.9 * POLISH_RANK_RTOL * 1.5)],
               rng.random(k) ** 4]
    for lam in spectra:
        M = (Q * lam) @ Q.T
        M = 0.5 * (M + M.T)
        assert range_rank_lower_bound(M) <= _range_rank(np.linalg.eigvalsh(M))
    # a flat spectrum of rank 12: tr / ||M||_F = sqrt(12) (||M||_F stands in for the largest eigenvalue)
    assert range_rank_lower_bound(Q[:, :12] @ Q[:, :12].T) == math.floor(
        (math.sqrt(12) - k * POLISH_RANK_RTOL) / (1 - POLISH_RANK_RTOL))
    assert range_rank_lower_bound(np.zeros((k, k))) == 0
