"""The matrix-free checks of PDHG (q = 0, R = rI) and the certificate from a caller's Ritz estimate.

The checks score both points through the data (Ritz values of the dual matrix) and prove one bound
per check by a safe shift (one Cholesky factorization) chosen from a Ritz estimate. The estimate
only chooses the shift: on random dual matrices (indefinite, singular, clustered), with good and
with misleading estimates, the bound stays below the exact smallest eigenvalue, and PDHG's
certificates stay valid against the dense path's objective.
"""
import warnings

import numpy as np
import pytest

from cvxmetric.certificates import WRONG_CERTIFICATE_RTOL, relative_gap
from cvxmetric.constraints import ConstraintSet
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.generators import sample_quadruplet_indices
from cvxmetric.hinge_certificates import EIG_ROUNDOFF, ESTIMATE_SHIFT_STEPS
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.linalg import lambda_min_lower_bound, rayleigh_ritz_positive
from cvxmetric.models import qwise_model
from cvxmetric.solvers.pdhg import check_costs, pdhg, start_state


def _model(d, n, m, seed, regularizer="trace"):
    inst = synthetic_qwise(d, min(5, d), n, m, seed=seed, regularizer=regularizer)
    return qwise_model(inst.X, inst.constraints, **inst.params)


def _random_symmetric(kind: str, d: int, rng) -> np.ndarray:
    if kind == "indefinite":
        A = rng.standard_normal((d, d))
        S = A + A.T
    elif kind == "singular":          # PSD with lambda_min = 0 exactly
        G = rng.standard_normal((d - 3, d))
        S = G.T @ G
    else:                             # negative eigenvalues clustered near zero (late PDHG iterates)
        Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
        lam = np.concatenate([-1e-6 * rng.random(12), 1.0 + rng.random(d - 12)])
        S = (Q * lam) @ Q.T
    return 0.5 * (S + S.T)


def _ritz_estimate(S: np.ndarray, steps: int, rng) -> tuple:
    """(theta, residual) of the smallest Ritz pair after a few block Rayleigh-Ritz steps."""
    basis = rng.standard_normal((S.shape[0], 4))
    for _ in range(steps):
        _, _, ritz = rayleigh_ritz_positive(lambda B: -(S @ B), basis)
        basis = ritz[:, :4]
    x = basis[:, 0] / np.linalg.norm(basis[:, 0])
    theta = float(x @ S @ x)
    return theta, float(np.linalg.norm(S @ x - theta * x))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["indefinite", "singular", "clustered"])
def test_the_bound_from_a_ritz_estimate_is_below_lambda_min(kind, seed):
    rng = np.random.default_rng(seed)
    S = _random_symmetric(kind, 80, rng) * 10.0 ** rng.integers(-4, 5)
    lam = np.linalg.eigvalsh(S)
    exact, scale = float(lam[0]), float(np.abs(lam).max())
    theta_max = float(lam[-1])
    estimates = [_ritz_estimate(S, steps, rng) for steps in (1, 3, 10)]
    estimates += [(theta_max, 0.0), (exact, 0.0), (exact - scale, 1e-3 * scale)]   # misleading and exact
    for estimate in estimates:
        bound = lambda_min_lower_bound(S, estimate, ESTIMATE_SHIFT_STEPS)
        assert bound <= exact + 1e-13 * scale, (estimate, bound, exact)
    # the exact eigenpair's value proves a bound within the round-off guard
    assert lambda_min_lower_bound(S, (exact, 0.0), ESTIMATE_SHIFT_STEPS) >= exact - 1e-9 * scale


def test_lambda_min_lower_bound_does_not_modify_its_input():
    S = _random_symmetric("indefinite", 30, np.random.default_rng(0))
    before = S.copy()
    lambda_min_lower_bound(S, (0.0, 1.0))
    np.testing.assert_array_equal(S, before)


def _trace_model(d=60, n=50, m=300, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return qwise_model(X, ConstraintSet.from_quadruplets(sample_quadruplet_indices(n, m, rng)))


@pytest.mark.parametrize("level", [0.1, 0.5, 1.0])
def test_certify_from_a_ritz_estimate_is_at_most_the_eigenvalue_certificate(level):
    """The bound proven from a caller's estimate, good or poor, never exceeds the bound of the full
    spectrum; from a converged Ritz pair it is close to it."""
    model = _trace_model()
    rng = np.random.default_rng(1)
    y = level * model.coef * rng.random(model.m)
    Ky = model.geometry.weighted_sum(y)
    S = model.R + 0.5 * (Ky + Ky.T)
    lam = np.linalg.eigvalsh(S)
    exact, _ = model.certify(y, upper=1e4, Ky=Ky, repair_steps=0, dual_eigvals=lam)
    scale = abs(exact) + np.abs(lam).max()
    for estimate in (_ritz_estimate(S, 2, rng), (float(lam[-1]), 0.0), (float(lam[0]), 0.0)):
        bound, y_used = model.certify(y, upper=1e4, Ky=Ky, repair_steps=0, lambda_min_estimate=estimate)
        assert bound <= exact + 1e-12 * scale
        assert np.all(y_used >= 0) and np.all(y_used <= model.coef)
    tight, _ = model.certify(y, upper=1e4, Ky=Ky, repair_steps=0, lambda_min_estimate=(float(lam[0]), 0.0))
    assert tight >= exact - 1e-6 * scale


@pytest.mark.parametrize("estimate", [(np.nan, 1.0), (0.0, -1.0), (1.0,), (1.0, 2.0, 3.0), "ab"])
def test_certify_rejects_a_malformed_estimate(estimate):
    model = _trace_model(d=8, n=20, m=40)
    with pytest.raises(ValueError, match="lambda_min_estimate"):
        model.certify(np.zeros(model.m), upper=1.0, lambda_min_estimate=estimate)


@pytest.mark.parametrize("projection", ["lowrank", "dense"])
def test_matrix_free_checks_certify_valid_bounds(projection):
    """Forced matrix-free checks (the cost model takes them from d ~ 700 on): a certified result,
    each bound valid against the other path's objective; with dense steps the product K* y left
    unformed by the checks (a restart to the average) is formed by the next step."""
    model = _model(30, 150, 1500, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        dense = pdhg(model, checks="dense", projection=projection)
        free = pdhg(model, checks="matrix_free", projection=projection)
    for res in (dense, free):
        assert res.converged and res.measure == "certified_gap" and res.certified_gap <= 1e-3
        np.testing.assert_allclose(res.objective, model.value(res.M), rtol=1e-12)
    assert free.info["repairs"] == 0 and free.info["polishes"] == 0
    assert relative_gap(dense.objective, free.lower_bound) >= -WRONG_CERTIFICATE_RTOL
    assert relative_gap(free.objective, dense.lower_bound) >= -WRONG_CERTIFICATE_RTOL
    # the returned multipliers reproduce the bound through the full spectrum (a certificate, no label)
    y = free.multipliers
    assert np.all(y >= 0) and np.all(y <= model.coef)
    lam = np.linalg.eigvalsh(model.R + model.geometry.weighted_sum(y))
    exact, _ = model.certify(y, upper=free.objective, repair_steps=0, dual_eigvals=lam)
    assert free.lower_bound <= exact + 1e-9 * abs(exact)


def test_matrix_free_checks_need_the_trace_regularizer():
    model = _model(10, 60, 300, 2, regularizer="frobenius")
    with pytest.raises(ValueError, match="checks='matrix_free'"):
        pdhg(model, checks="matrix_free")
    with pytest.raises(ValueError, match="checks must be one of"):
        pdhg(_model(10, 60, 300, 2), checks="sparse")
    with pytest.raises(ValueError, match="checks must be one of"):
        start_state(_model(10, 60, 300, 2), checks=None)


def test_check_cost_model_takes_the_matrix_free_checks_at_large_d():
    kt = lambda n, d: n * d * d * 8e-11      # X^T L X through the points
    for d in (10, 50, 200):
        costs = check_costs(2000, 20_000, d, 16, kt(2000, d))
        assert costs["dense"] < costs["matrix_free"], d
    for d, n in ((1000, 2000), (2000, 2000), (5000, 5000)):
        costs = check_costs(n, 2 * 10 ** 5, d, 16, kt(n, d))
        assert costs["matrix_free"] < costs["dense"], d
    model = _model(12, 60, 400, 1)
    assert not start_state(model).matrix_free and start_state(model, checks="matrix_free").matrix_free


def test_the_span_of_the_trace_regularizer_needs_no_eigendecomposition(monkeypatch):
    """R = rI: the certificate's span (its eigenvalues, Cholesky factor and trace source) is read
    off r, the same numbers ``eigvalsh`` gives (at d = 5000 each decomposition takes ~20 s)."""
    model = _trace_model(d=40)
    R = np.asarray(model.R)
    lam = np.linalg.eigvalsh(R)                      # the decompositions the general path takes
    chol_inv = np.linalg.inv(np.linalg.cholesky(R))

    def refuse(*args, **kwargs):
        raise AssertionError("an eigendecomposition of order d")

    monkeypatch.setattr(np.linalg, "eigvalsh", refuse)
    span = model._span()
    assert span.U is None and span.R_scale == 1.0
    np.testing.assert_array_equal(span.chol_inv, chol_inv)
    assert span.trace_sources == ((0.0, float(lam[0]) - EIG_ROUNDOFF * float(np.abs(lam).max())),)


def test_matrix_free_checks_follow_the_model():
    import cvxmetric.solvers.pdhg as mod

    model = _model(40, 30, 2000, 6)
    assert mod.matrix_free_checks(model, "matrix_free") and not mod.matrix_free_checks(model)
    assert not mod.matrix_free_checks(model, "dense")
    with pytest.raises(ValueError, match="checks must be one of"):
        mod.matrix_free_checks(model, "MATRIX_FREE")


def test_without_a_proof_budget_the_checks_prove_only_near_tol(monkeypatch):
    """With no budget a check proves its bound only where the estimate would certify ``tol``: fewer
    proofs than checks, and the run still ends certified (a skipped proof could not have)."""
    import cvxmetric.solvers.pdhg as mod

    model = _model(30, 150, 1500, 5)
    proofs = []   # the proofs so far after each check's certification
    certify = mod.PDHGState._certify_matrix_free

    def counted(state, points):
        out = certify(state, points)
        proofs[-1].append(state.proofs)
        return out

    monkeypatch.setattr(mod.PDHGState, "_certify_matrix_free", counted)
    proofs.append([])
    free = pdhg(model, checks="matrix_free", projection="lowrank")
    monkeypatch.setattr(mod, "PROOF_BUDGET", 0.0)
    proofs.append([])
    lean = pdhg(model, checks="matrix_free", projection="lowrank")
    assert free.info["proofs"] >= lean.info["proofs"] >= 1
    assert lean.info["proofs"] < lean.info["checks"]
    assert lean.converged and lean.certified_gap <= 1e-3
    # a proof never steers the steps (they read no K* y a proof formed); its Ritz vectors start the
    # next check's scores, so the runs agree up to the first check whose proofs differ
    first = next(i for i, (a, b) in enumerate(zip(*proofs)) if a != b)
    np.testing.assert_array_equal(lean.history[:first + 1], free.history[:first + 1])
