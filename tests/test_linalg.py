"""Linear-algebra facts the whole project relies on (property tests)."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cvxmetric import ConstraintSet, HingeLoss, QuadrupletGeometry
from cvxmetric.linalg import (eigh_descending, numerical_rank, project_psd, psd_factor, svec, svec_outer,
                              random_psd)
from cvxmetric.tolerances import RANK_RTOL

dims = st.integers(min_value=1, max_value=8)
seeds = st.integers(min_value=0, max_value=2**31 - 1)


def _sym(d, seed):
    A = np.random.default_rng(seed).standard_normal((d, d))
    return A + A.T


@given(dims, seeds)
def test_projection_is_psd_idempotent_and_a_moreau_split(d, seed):
    A = _sym(d, seed)
    P = project_psd(A)
    N = P - A  # the negative part, PSD and orthogonal to P
    assert np.linalg.eigvalsh(P)[0] >= -1e-10
    assert np.linalg.eigvalsh(N)[0] >= -1e-10
    assert abs(np.vdot(P, N)) <= 1e-9 * max(1.0, np.linalg.norm(A) ** 2)
    np.testing.assert_allclose(project_psd(P), P, atol=1e-10)


@given(dims, seeds)
def test_projection_is_nearest_psd_matrix(d, seed):
    A = _sym(d, seed)
    P = project_psd(A)
    rng = np.random.default_rng(seed + 1)
    for _ in range(5):
        Q = random_psd(d, seed=rng)
        assert np.linalg.norm(A - P) <= np.linalg.norm(A - Q) + 1e-12


def test_projection_does_not_modify_input():
    A = _sym(4, 0)
    A0 = A.copy()
    project_psd(A)
    np.testing.assert_array_equal(A, A0)


@given(dims, seeds)
def test_factor_and_rank(d, seed):
    r = 1 + seed % d
    M = random_psd(d, rank=r, seed=seed)
    L = psd_factor(M)
    np.testing.assert_allclose(L.T @ L, M, atol=1e-10 * max(1, np.abs(M).max()))
    lam = np.linalg.eigvalsh(M)
    # a Gaussian Gram matrix may have its r-th eigenvalue near RANK_RTOL: then its rank is a tie
    assume(lam[-min(r, d)] > 1e3 * RANK_RTOL * lam[-1])
    assert numerical_rank(M) == min(r, d)


@given(dims, seeds)
def test_eigh_descending_sorted(d, seed):
    lam, V = eigh_descending(_sym(d, seed))
    assert np.all(np.diff(lam) <= 1e-12)
    np.testing.assert_allclose(V.T @ V, np.eye(d), atol=1e-10)


@given(dims, seeds)
def test_svec_outer_inner_product(d, seed):
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((5, d))
    M = _sym(d, seed)
    expected = np.einsum("ma,ab,mb->m", U, M, U)
    np.testing.assert_allclose(svec_outer(U) @ svec(M), expected, rtol=1e-10, atol=1e-10)


def _random_set(n, m, rng):
    q = rng.integers(0, n, size=(m, 4))
    q[:, 1] = np.where(q[:, 1] == q[:, 0], (q[:, 0] + 1) % n, q[:, 1])
    q[:, 3] = np.where(q[:, 3] == q[:, 2], (q[:, 2] + 1) % n, q[:, 3])
    quads = ConstraintSet.from_quadruplets(q, delta=rng.standard_normal(m))
    pairs = ConstraintSet.from_pairs(q[:3, :2], similar=True, bound=1.0)
    return quads + pairs + ConstraintSet.from_pairs(q[3:6, 2:], similar=False, bound=2.0)


def _brute_values(X, cs, M):
    i, j, k, l = cs.idx.T
    u, v = X[i] - X[j], X[k] - X[l]
    return np.einsum("ma,ab,mb->m", u, M, u) - np.einsum("ma,ab,mb->m", v, M, v)


def _random_geometry(d, seed, m):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((12, d))
    cs = _random_set(12, m, rng)
    return X, cs, QuadrupletGeometry(X, cs), rng


@given(dims, seeds)
def test_geometry_matches_brute_force(d, seed):
    X, cs, g, rng = _random_geometry(d, seed, 20)
    M = _sym(d, seed)
    np.testing.assert_allclose(g.values(M), _brute_values(X, cs, M), rtol=1e-10, atol=1e-10)
    L = psd_factor(random_psd(d, seed=seed))
    np.testing.assert_allclose(g.values_factor(L), _brute_values(X, cs, L.T @ L), rtol=1e-9, atol=1e-9)
    coef = rng.random(len(cs))
    i, j, k, l = cs.idx.T
    u, v = X[i] - X[j], X[k] - X[l]
    brute = np.einsum("m,ma,mb->ab", coef, u, u) - np.einsum("m,ma,mb->ab", coef, v, v)
    np.testing.assert_allclose(g.weighted_sum(coef), brute, atol=1e-10)
    np.testing.assert_allclose(g.svec_matrix() @ svec(M), _brute_values(X, cs, M), rtol=1e-10, atol=1e-10)


@given(dims, seeds)
def test_incremental_subgradient_equals_recomputed(d, seed):
    X, cs, g, rng = _random_geometry(d, seed, 25)
    coef = rng.random(len(cs))
    h = HingeLoss(g, coef)
    for step in range(6):
        M = random_psd(d, seed=seed + step)
        rows = None if step % 2 == 0 else np.arange(0, len(cs), 2)
        h.update(M, rows)
        active = h.active.copy()
        np.testing.assert_allclose(h.G, g.weighted_sum(coef * active), atol=1e-9)
    loss, marg = h.update(M)
    assert loss == pytest.approx(float(coef @ np.maximum(marg, 0)))
    assert loss == pytest.approx(h.value(M))


@pytest.mark.parametrize("d, rank", [(12, 3), (40, 0), (30, 30)])
def test_partial_projection_equals_full(d, rank):
    """The positive-eigenpairs-only path gives the same projection (and the same positive pairs)."""
    from cvxmetric.linalg import project_psd

    rng = np.random.default_rng(d + rank)
    G = rng.standard_normal((d, rank))
    B = rng.standard_normal((d, d))
    A = G @ G.T - 0.5 * np.eye(d) + 0.01 * (B + B.T) if rank < d else G @ G.T + np.eye(d)
    P_full, lam_f, _ = project_psd(A, return_eig=True, partial=False)
    P_part, lam_p, V_p = project_psd(A, return_eig=True, partial=True)
    scale = max(np.linalg.norm(A), 1.0)
    assert np.linalg.norm(P_full - P_part) <= 1e-12 * scale
    np.testing.assert_allclose(lam_p, lam_f[lam_f > 0], rtol=0, atol=1e-12 * scale)
    assert V_p.shape == (d, lam_p.size)
    assert np.array_equal(project_psd(A, partial=None), project_psd(A, partial=d >= 200))


def test_partial_projection_follows_the_rank_hint():
    """partial=None takes the positive-eigenpairs solver only while the expected rank is a small
    fraction of d (PARTIAL_EIGH_MAX_FRACTION); both give the same projection."""
    from cvxmetric.linalg import PARTIAL_EIGH_MAX_FRACTION, PARTIAL_EIGH_MIN_D, positive_eigenpairs, project_psd

    d = PARTIAL_EIGH_MIN_D
    rng = np.random.default_rng(5)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.linspace(-1.0, 1.0, d)
    A = (Q * lam) @ Q.T
    small, large = int(PARTIAL_EIGH_MAX_FRACTION * d), int(PARTIAL_EIGH_MAX_FRACTION * d) + 1
    assert positive_eigenpairs(A, rank_hint=small)[2] and not positive_eigenpairs(A, rank_hint=large)[2]
    assert positive_eigenpairs(A)[2] and not positive_eigenpairs(A[:50, :50])[2]
    P_small, lam_small, _ = project_psd(A, return_eig=True, partial=None, rank_hint=small)
    P_large, lam_large, _ = project_psd(A, return_eig=True, partial=None, rank_hint=large)
    assert lam_small.size == d // 2 and lam_large.size == d
    assert np.linalg.norm(P_small - P_large) <= 1e-12 * np.linalg.norm(A)
    A0 = A.copy()
    project_psd(A, partial=True)
    assert np.array_equal(A, A0)     # the input is never overwritten


@pytest.mark.parametrize("hint", [-1, 2.5, True, "3", 11])
def test_rank_hint_is_checked(hint):
    """rank_hint is a number of eigenvalues in [0, d]; anything else names the argument."""
    from cvxmetric.linalg import positive_eigenpairs

    with pytest.raises((TypeError, ValueError), match="rank_hint"):
        positive_eigenpairs(np.eye(10), rank_hint=hint)
