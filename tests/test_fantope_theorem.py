"""The Fantope supergradient theorem (design §6) on several seeds and d in {4, 10, 30}."""
import numpy as np
import pytest

from cvxmetric.linalg import random_psd
from cvxmetric.verification import tolerances as tol
from cvxmetric.verification.fantope_checks import (directional_derivative, lmo_checks, superdifferential_min,
                                         supergradient_checks, uniqueness_checks, zero_gap_checks, zero_gap_matrix)


def sym(d, seed):
    G = np.random.default_rng(seed).standard_normal((d, d))
    return 0.5 * (G + G.T)


CASES = [(4, 1, 0), (4, 3, 1), (10, 7, 2), (10, 3, 3), (30, 20, 4)]


@pytest.mark.parametrize("d,k,seed", CASES)
def test_check1_lmo(d, k, seed):
    for M in (random_psd(d, seed=seed), sym(d, seed)):
        r = lmo_checks(M, k)
        assert r["w_fantope_violation"] <= 1e-12
        assert r["w_value_err"] <= 1e-12
        for key in ("lmo_value_err", "lss_atom_err", "lss_sdp_err", "lmo_fantope_violation"):
            assert r[key] <= tol.FANTOPE_VALUE_RTOL, (key, r[key])


@pytest.mark.parametrize("d,k,seed", [c for c in CASES if c[0] <= 10])
def test_check2_supergradient(d, k, seed):
    M = random_psd(d, seed=seed)
    F_lmo = lmo_checks(M, k)["lmo_solution"]
    r = supergradient_checks(M, k, seed=seed, F_lmo=F_lmo, n_random=100)
    assert r["random_min_W"] >= -1e-12
    assert r["adv_W"] >= -tol.SUPERGRADIENT_TOL
    assert r["adv_lmo"] >= -tol.SUPERGRADIENT_TOL
    # the top-k projector is in F_k but not a supergradient: clearly negative, = closed form
    assert r["adv_top"] < -tol.FANTOPE_SEPARATION
    assert r["adv_top_closed_err"] <= tol.FANTOPE_VALUE_RTOL
    assert r["random_min_top"] < 0


@pytest.mark.parametrize("d,k,seed", [c for c in CASES if c[0] <= 10])
def test_check3_unique_lmo_with_positive_gap(d, k, seed):
    M = random_psd(d, seed=seed)
    r = uniqueness_checks(M, k)
    assert r["eigengap"] > 0
    assert r["lmo_dist"] <= tol.LMO_SOLUTION_TOL
    assert r["face_spread"] <= r["face_spread_bound"] + tol.FACE_SPREAD_SLACK


@pytest.mark.parametrize("d,k,seed", [(4, 1, 0), (4, 2, 1), (10, 7, 2), (10, 3, 3)])
def test_check3_zero_gap(d, k, seed):
    r = zero_gap_checks(d, k, seed=seed)
    assert abs(r["eigengap"]) <= 1e-12 * d
    assert r["w_fantope_violation"] <= 1e-12 and r["w_value_err"] <= 1e-12
    assert r["w_distance"] == pytest.approx(np.sqrt(2))
    assert r["adv_min"] >= -tol.SUPERGRADIENT_TOL
    assert r["face_spread"] >= tol.FACE_SPREAD_MIN
    assert r["dd_fd_err"] <= tol.DIRECTIONAL_TOL
    assert r["dd_cvxpy_above"] <= tol.SUPERGRADIENT_TOL
    assert r["dd_cvxpy_below"] <= r["dd_cvxpy_below_bound"]
    assert r["kink"] < -tol.KINK_MIN


@pytest.mark.parametrize("d", [4, 10, 30])
def test_directional_derivative_closed_form(d):
    """No cvxpy: one-sided derivatives = min over the superdifferential, at zero and positive gaps."""
    rng = np.random.default_rng(d)
    for k in (1, d // 2, d - 1):
        M, W1, W2 = zero_gap_matrix(d, k, seed=rng)
        for _ in range(3):
            D = sym(d, int(rng.integers(1 << 30)))
            nD = np.linalg.norm(D, 2)
            for s in (1, -1):
                assert directional_derivative(M, k, s * D) == pytest.approx(
                    superdifferential_min(M, k, s * D), abs=tol.DIRECTIONAL_TOL * nD)
            # the min over the face is below both exhibited supergradients
            assert superdifferential_min(M, k, D) <= min(np.vdot(W1, D), np.vdot(W2, D)) + 1e-10
        P = random_psd(d, seed=rng)  # generic: positive gap, derivative is <W(M), D>
        from cvxmetric.fantope import fantope_projector
        assert superdifferential_min(P, k, D) == pytest.approx(np.vdot(fantope_projector(P, k), D), abs=1e-9)


def test_zero_gap_matrix_bad_input():
    with pytest.raises(ValueError, match="1 <= k < d"):
        zero_gap_matrix(5, 5)
    with pytest.raises(ValueError, match="d must be"):
        zero_gap_matrix(1, 1)
