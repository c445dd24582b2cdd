"""Fantope linear algebra (cvxmetric.fantope): R, W, eigengap, membership, the model, bad input."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cvxmetric.constraints import ConstraintSet
from cvxmetric.fantope import (eigengap, fantope_center, fantope_model, fantope_projector, fantope_regularizer,
                               fantope_terms_from_eig, fantope_violation, in_fantope, sum_smallest_eigenvalues)
from cvxmetric.linalg import project_psd, random_psd
from cvxmetric.verification.fantope_checks import random_orthogonal, top_projector


def sym(d, seed):
    G = np.random.default_rng(seed).standard_normal((d, d))
    return 0.5 * (G + G.T)


@pytest.mark.parametrize("d", [4, 10, 30])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_R_and_W_definitions(d, seed):
    M = sym(d, seed)
    lam = np.sort(np.linalg.eigvalsh(M))
    for k in (1, d // 2, d):
        R, W = fantope_regularizer(M, k)
        assert R == pytest.approx(lam[:k].sum(), abs=1e-12)
        assert np.vdot(W, M) == pytest.approx(R, abs=1e-10)
        assert np.allclose(W @ W, W, atol=1e-12)           # projector
        assert np.trace(W) == pytest.approx(k, abs=1e-12)  # rank k
        assert in_fantope(W, k)
        assert np.allclose(fantope_projector(M, k), W)
        assert sum_smallest_eigenvalues(M, k) == pytest.approx(R)


@pytest.mark.parametrize("d", [4, 10, 30])
def test_terms_from_eig_match_and_cost_no_eigh(d):
    M = random_psd(d, rank=d // 2, seed=d)
    P, lam, V = project_psd(M, return_eig=True)
    R, W = fantope_terms_from_eig(np.maximum(lam, 0), V, d - d // 2)
    R2, W2 = fantope_regularizer(P, d - d // 2)
    assert R == pytest.approx(R2, abs=1e-10)
    assert abs(R) < 1e-10  # rank d//2 matrix: the k = d - d//2 smallest vanish
    assert np.vdot(W, P) == pytest.approx(R2, abs=1e-10)


def test_eigengap_values():
    Q = random_orthogonal(5, 0)
    M = (Q * np.array([0.5, 1.0, 1.0, 2.0, 3.0])) @ Q.T
    assert eigengap(M, 2) == pytest.approx(0.0, abs=1e-12)   # lambda_3 = lambda_4 = 1
    assert eigengap(M, 3) == pytest.approx(1.0)              # lambda_2 - lambda_3 = 2 - 1
    assert eigengap(M, 1) == pytest.approx(0.5)
    assert eigengap(M, 5) == np.inf


def test_membership():
    d, k = 6, 2
    assert in_fantope(fantope_center(d, k), k)
    assert in_fantope(top_projector(sym(d, 3), k), k)
    assert not in_fantope(np.eye(d), k)                        # trace d != k
    assert not in_fantope(np.diag([1.5, 0.5, 0, 0, 0, 0]), k)  # eigenvalue > 1
    assert not in_fantope(np.diag([1.0, 1.5, -0.5, 0, 0, 0]), k)
    assert fantope_violation(np.diag([1.5, 0.5, 0, 0, 0, 0]), k) == pytest.approx(0.5)


@given(st.integers(2, 8), st.integers(0, 10**6), st.data())
def test_ky_fan_bounds(d, seed, data):
    """R(M) <= <A, M> for every A in F_k (Ky Fan), R concave: R(M+N) >= R(M) + R(N)."""
    k = data.draw(st.integers(1, d))
    rng = np.random.default_rng(seed)
    M, N = sym(d, seed), sym(d, seed + 1)
    w = rng.uniform(0, 1, d)
    w = w / w.sum() * k
    if np.max(w) <= 1:  # a random interior Fantope point
        Q = random_orthogonal(d, rng)
        A = (Q * w) @ Q.T
        A = 0.5 * (A + A.T)
        assert in_fantope(A, k)
    else:
        A = fantope_center(d, k)
    assert sum_smallest_eigenvalues(M, k) <= np.vdot(A, M) + 1e-10
    assert sum_smallest_eigenvalues(M + N, k) >= sum_smallest_eigenvalues(M, k) + sum_smallest_eigenvalues(N, k) - 1e-10
    # positive homogeneity, and R = 0 iff rank <= d - k on the PSD cone
    assert sum_smallest_eigenvalues(3.0 * M, k) == pytest.approx(3.0 * sum_smallest_eigenvalues(M, k), abs=1e-9)
    P = random_psd(d, rank=d - k, seed=seed) if k < d else np.zeros((d, d))
    assert abs(sum_smallest_eigenvalues(P, k)) < 1e-9


@given(st.integers(2, 8), st.integers(0, 10**6))
def test_supergradient_inequality_property(d, seed):
    k = 1 + seed % d
    M, X = sym(d, seed), sym(d, seed + 7) * 3
    R, W = fantope_regularizer(M, k)
    assert R + np.vdot(W, X - M) >= sum_smallest_eigenvalues(X, k) - 1e-10


def _data(d, m=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((30, d))
    q = rng.integers(0, 30, (m, 4))
    q[:, 1] = (q[:, 0] + 1) % 30
    q[:, 3] = (q[:, 2] + 2) % 30
    return X, ConstraintSet.from_quadruplets(q, delta=1.0)


def test_model_value_bound_and_tightness():
    d, k = 6, 4
    X, cons = _data(d)
    fm = fantope_model(X, cons, rank=d - k, reg_weight=2.0, trace_weight=0.3)
    rng = np.random.default_rng(1)
    for _ in range(5):
        M = random_psd(d, seed=rng)
        W = fantope_projector(M, k)
        assert fm.bound(W).value(M) == pytest.approx(fm.value(M), rel=1e-12)   # tight at W(M)
        N = random_psd(d, seed=rng)
        assert fm.bound(W).value(N) >= fm.value(N) - 1e-10                     # upper bound
        assert fm.bound(fantope_center(d, k)).value(N) >= fm.value(N) - 1e-10
    lam, V = np.linalg.eigh(M)
    val, grad = fm.extra_term(M, lam, V)
    assert val == pytest.approx(2.0 * sum_smallest_eigenvalues(M, k))
    assert np.allclose(grad, 2.0 * fantope_projector(M, k))


def test_bad_input():
    X, cons = _data(5)
    M = sym(5, 0)
    for k in (0, 6, -1):
        with pytest.raises(ValueError, match="1 <= k <= d"):
            sum_smallest_eigenvalues(M, k)
        with pytest.raises(ValueError, match="0 <= rank <= d - 1"):
            fantope_model(X, cons, rank=5 - k, reg_weight=1.0)
    with pytest.raises(TypeError):
        fantope_projector(M, 2.5)
    bad = M.copy()
    bad[0, 1] += 1.0
    for f in (sum_smallest_eigenvalues, fantope_projector, eigengap, fantope_regularizer):
        with pytest.raises(ValueError, match="not symmetric"):
            f(bad, 2)
    fm = fantope_model(X, cons, rank=3, reg_weight=1.0)
    with pytest.raises(ValueError, match="not in the Fantope"):
        fm.bound(np.eye(5))
    with pytest.raises(ValueError, match="not symmetric"):
        fm.bound(bad)
    with pytest.raises(ValueError, match="reg_weight must be >= 0"):
        fantope_model(X, cons, rank=3, reg_weight=-1.0)
    with pytest.raises(ValueError, match="trace_weight must be >= 0"):
        fantope_model(X, cons, rank=3, reg_weight=1.0, trace_weight=-1.0)
    with pytest.raises(ValueError, match="sorted ascending"):
        fantope_terms_from_eig(np.array([2.0, 1.0]), np.eye(2), 1)
    M_in = M.copy()
    fantope_regularizer(M, 2)
    assert np.array_equal(M, M_in)  # inputs never modified
