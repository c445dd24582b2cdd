"""The low-rank, matrix-free projection of PDHG and the proven lower bound on lambda_min.

The low-rank path (a tracked basis, one block Rayleigh-Ritz step per iteration, K* y applied
through the data) is held against the dense path (K* y formed, ``eigh``) on small random problems:
the same certified verdict and objective, each certificate valid against the other's objective.
"""
import warnings

import numpy as np
import pytest

from cvxmetric.certificates import WRONG_CERTIFICATE_RTOL, relative_gap
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.hinge import projection_costs
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.linalg import lambda_min_lower_bound, rayleigh_ritz_positive
from cvxmetric.models import qwise_model
from cvxmetric.solvers.pdhg import PDHGState, pdhg, start_state


def _model(d, n, m, seed, regularizer="trace"):
    inst = synthetic_qwise(d, min(5, d), n, m, seed=seed, regularizer=regularizer)
    return qwise_model(inst.X, inst.constraints, **inst.params)


@pytest.mark.parametrize("d, n, m, seed, regularizer", [(12, 60, 400, 1, "trace"), (25, 120, 1200, 2, "trace"),
                                                          (15, 80, 600, 3, "frobenius")])
def test_lowrank_path_agrees_with_the_dense_path(d, n, m, seed, regularizer):
    model = _model(d, n, m, seed, regularizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        dense = pdhg(model, projection="dense")
        low = pdhg(model, projection="lowrank")
    assert dense.converged and low.converged
    assert dense.info["lowrank_steps"] == 0
    assert low.info["lowrank_steps"] == low.n_iter - low.info["rejected_steps"]
    for res in (dense, low):
        assert res.measure == "certified_gap" and res.certified_gap <= 1e-3
        np.testing.assert_allclose(res.objective, model.value(res.M), rtol=1e-12)
        assert np.linalg.eigvalsh(res.M)[0] >= -1e-12 * np.linalg.norm(res.M, 2)
    # each bound is below the other path's objective: both certificates are valid
    assert relative_gap(dense.objective, low.lower_bound) >= -WRONG_CERTIFICATE_RTOL
    assert relative_gap(low.objective, dense.lower_bound) >= -WRONG_CERTIFICATE_RTOL
    assert abs(relative_gap(dense.objective, low.objective)) <= 2e-3


def test_lowrank_step_equals_the_dense_step_on_an_exact_basis():
    """With a basis that contains the step matrix's positive eigenvectors, the Rayleigh-Ritz
    projection is the exact projection: the two paths take the same step."""
    model = _model(10, 50, 300, 4)
    state = start_state(model, projection="dense")
    for _ in range(20):
        state.step()
    twin = start_state(model, projection="lowrank")
    for name in ("M", "y", "KM", "KTy", "eta", "omega", "rank"):
        setattr(twin, name, getattr(state, name))
    twin._factor = None
    twin._basis = np.linalg.qr(np.random.default_rng(0).standard_normal((model.d, model.d)))[0]
    twin.rank = model.d - twin._block_size(0)   # so that the block holds the whole space
    assert twin._block_size(twin.rank) == model.d
    assert state.step() and twin.step()
    np.testing.assert_allclose(twin.M, state.M, atol=1e-12 * np.abs(state.M).max())
    np.testing.assert_allclose(twin.y, state.y, atol=1e-12 * max(np.abs(state.y).max(), 1.0))


def test_rayleigh_ritz_finds_a_dominant_subspace_from_a_near_basis():
    rng = np.random.default_rng(5)
    d, r = 80, 6
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    lam = -1.0 - rng.random(d)
    lam[:r] = np.linspace(3.0, 1.0, r)
    A = (Q * lam) @ Q.T
    near = Q[:, :r + 4] + 1e-3 * rng.standard_normal((d, r + 4))
    theta, V, ritz = rayleigh_ritz_positive(lambda B: A @ B, near)
    assert theta.size == r
    np.testing.assert_allclose(theta, lam[:r], rtol=1e-5)
    # Cauchy interlacing: no Ritz value above its eigenvalue, and the projection is PSD
    assert np.all(theta <= lam[:r] + 1e-12)
    np.testing.assert_allclose(V.T @ V, np.eye(r), atol=1e-12)
    assert ritz.shape[1] <= 2 * (r + 4)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("d", [1, 7, 60, 200])
def test_lambda_min_lower_bound_is_a_lower_bound(d, seed):
    rng = np.random.default_rng(seed)
    kind = seed % 3
    if kind == 0:        # indefinite
        A = rng.standard_normal((d, d))
        S = A + A.T
    elif kind == 1:      # PSD, singular (lambda_min = 0 exactly)
        G = rng.standard_normal((max(d - 2, 0), d))
        S = G.T @ G
    else:                # positive definite, clustered near the bottom
        Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
        S = (Q * (1.0 + 1e-8 * rng.random(d))) @ Q.T
    S = 0.5 * (S + S.T) * 10.0 ** rng.integers(-5, 6)
    exact = float(np.linalg.eigvalsh(S)[0])
    scale = float(np.abs(np.linalg.eigvalsh(S)).max())
    for estimate in (None, (exact, 0.0), (exact + 0.1 * scale, 1e-3 * scale), (exact - 0.5 * scale, 0.0)):
        bound = lambda_min_lower_bound(S, estimate)
        # a proven bound: below the exact eigenvalue, up to numpy's own round-off of it
        assert bound <= exact + 1e-13 * scale, (estimate, bound, exact)
    # a good estimate gives a tight bound
    assert lambda_min_lower_bound(S, (exact, 0.0)) >= exact - 1e-9 * scale - 2 * np.finfo(float).tiny


def test_lambda_min_lower_bound_rejects_nothing_silently():
    assert lambda_min_lower_bound(np.zeros((0, 0))) == np.inf
    S = np.diag([3.0, -2.0, 5.0])
    assert lambda_min_lower_bound(S, (np.nan, 1.0)) <= -2.0


def test_cost_model_switches_to_the_lowrank_projection_at_large_d_and_low_rank():
    kt = lambda n, d: 2 * n * d * d * 8e-11
    small = projection_costs(100, 1000, 20, 5, 13, kt(100, 20), 1e-4)
    assert small["dense"] < small["lowrank"]
    big = projection_costs(2000, 20_000, 1000, 60, 75, kt(2000, 1000), 1e-2)
    assert big["lowrank"] < big["dense"]
    # the same size at full rank: the dense step again
    full = projection_costs(2000, 20_000, 1000, 900, 1000, kt(2000, 1000), 1e-2)
    assert full["dense"] < full["lowrank"]


def test_auto_projection_follows_the_cost_model():
    model = _model(8, 40, 200, 6)
    state = start_state(model)
    assert state.projection == "auto"
    assert not state._lowrank_pays()          # tiny d: the dense step is cheaper
    with pytest.raises(ValueError, match="projection"):
        pdhg(model, projection="sparse")
    with pytest.raises(ValueError, match="projection"):
        PDHGState(model, np.zeros((8, 8)), np.zeros(model.m), eta=1.0, omega=1.0, projection=None)


def test_adjoint_operator_matches_the_formed_adjoint():
    model = _model(9, 40, 300, 7)
    geom = model.geometry
    c = np.random.default_rng(1).standard_normal(model.m)
    B = np.random.default_rng(2).standard_normal((9, 4))
    np.testing.assert_allclose(geom.adjoint_operator(c)(B), geom.weighted_sum(c) @ B, atol=1e-10)
    with pytest.raises(ValueError, match="coef"):
        geom.adjoint_operator(c[:-1])


def test_normal_operator_is_K_of_K_adjoint():
    model = _model(11, 50, 400, 8)
    geom = model.geometry
    c = np.random.default_rng(3).standard_normal(model.m)
    expected = geom.values(geom.weighted_sum(c))
    np.testing.assert_allclose(geom.normal_operator()(c), expected, atol=1e-12 * np.abs(expected).max())


def test_gram_norm_estimate_is_a_lower_estimate_of_the_operator_norm():
    from cvxmetric.solvers.pdhg import _ScaledOperator, estimate_norm_from_normal, estimate_operator_norm

    model = _model(11, 50, 400, 9)
    op = _ScaledOperator(model)
    normal = model.geometry.normal_operator()
    dense_rows = np.stack([op.apply(E) for E in np.eye(11 * 11).reshape(-1, 11, 11)], axis=1)
    exact = float(np.linalg.norm(dense_rows, 2))
    estimate = estimate_norm_from_normal(lambda y: normal(y / op.s) / op.s, model.m, n_iter=60)
    assert estimate <= exact * (1 + 1e-12)
    assert estimate >= 0.95 * exact
    assert estimate_operator_norm(op.apply, op.adjoint, 11, n_iter=60) <= exact * (1 + 1e-12)


def test_certificate_by_safe_shift_agrees_with_the_eigenvalue_certificate(monkeypatch):
    """Where the bound reads a safe shift (forced here at d = 300; the cost model takes it from
    d ~ 1400 on), the bound is at most the one from the full spectrum, and close to it."""
    import cvxmetric.hinge_certificates as hc

    rng = np.random.default_rng(4)
    X = rng.random((60, 300))
    from cvxmetric.generators import sample_quadruplet_indices
    from cvxmetric.constraints import ConstraintSet

    model = qwise_model(X, ConstraintSet.from_quadruplets(sample_quadruplet_indices(60, 300, rng)))
    span = model._span()
    assert span.U is None and span.R_scale == 1.0 and not hc._safe_shift_pays(span)
    monkeypatch.setattr(hc, "_safe_shift_pays", lambda span: True)
    KTy_unit = model.geometry.weighted_sum(np.ones(model.m))
    for level in (0.1, 0.5, 1.0):     # dual matrices from PSD to clearly indefinite
        y = level * model.coef
        shift, _ = model.certify(y, upper=1e6, repair_steps=0)
        lam = np.linalg.eigvalsh(model.R + level * KTy_unit)
        exact, _ = model.certify(y, upper=1e6, repair_steps=0, dual_eigvals=lam)
        scale = abs(exact) + np.abs(lam).max()
        assert shift <= exact + 1e-12 * scale
        assert shift >= exact - 1e-6 * scale


def test_a_dense_step_then_lowrank_steps_continue_from_its_factor():
    """A run that switches paths (as ``"auto"`` does when the rank moves) stays exact: after dense
    steps, the low-rank step reads M through the dense step's positive eigenpairs only."""
    model = _model(14, 60, 500, 10)
    state = start_state(model, projection="dense")
    for _ in range(12):
        state.step()
    lam, V = state._factor
    np.testing.assert_allclose((V * lam) @ V.T, state.M, atol=1e-12 * np.abs(state.M).max())
    assert np.all(lam > 0)
    state.projection = "lowrank"
    for _ in range(200):
        state.step()
    res = pdhg(model, state=state, warn=False)
    ref = pdhg(model, projection="dense")
    assert res.converged and ref.converged
    assert relative_gap(ref.objective, res.lower_bound) >= -WRONG_CERTIFICATE_RTOL
    assert relative_gap(res.objective, ref.lower_bound) >= -WRONG_CERTIFICATE_RTOL


def test_safe_shift_cost_switch():
    import cvxmetric.hinge_certificates as hc

    def span(d, scale):
        return hc._Span(None, np.eye(d), np.eye(d), (), scale)

    assert not hc._safe_shift_pays(span(300, 1.0))
    assert hc._safe_shift_pays(span(2500, 1.0))
    assert not hc._safe_shift_pays(span(2500, None))   # rules that read more than lambda_min


def test_lowrank_projection_is_not_chosen_where_the_eigh_is_a_small_share_of_the_dense_step():
    from cvxmetric.hinge import LOWRANK_MIN_EIGH_SHARE

    kt = lambda n, d: 2 * n * d * d * 8e-11
    # d = 50 on many pairs: the low-rank step is priced below the dense one at rank 0, but the
    # dense step is almost all products over the constraints (its eigh a tiny share)
    costs = projection_costs(2000, 2_000_000, 50, 0, 8, 4e-2, 1e-2)
    assert costs["lowrank"] < costs["dense"]
    assert costs["eigh"] < LOWRANK_MIN_EIGH_SHARE * costs["dense"]
    big = projection_costs(2000, 20_000, 1000, 60, 75, kt(2000, 1000), 1e-2)
    assert big["eigh"] >= LOWRANK_MIN_EIGH_SHARE * big["dense"]
    # a model whose low-rank step is priced below the dense one at rank 0, with a tiny eigh: dense
    model = _model(40, 500, 10_000, 1)
    geom = model.geometry
    halves = geom.u_rows.size + geom.v_rows.size
    at_zero = projection_costs(500, halves, 40, 0, 8, geom.product_cost("Kt"), geom.product_cost("K", r=1))
    assert at_zero["lowrank"] < at_zero["dense"]
    assert not start_state(model)._lowrank_pays()
    assert start_state(model, projection="lowrank")._lowrank_pays()
