"""ORML (Liu, Hoi & Liu 2008): weights by brute force, PSD regularizer, ideal output (eq. 16),
closed forms vs lstsq and the certified cvxpy problems, orthogonality, bad input, scale behaviour."""
import numpy as np
import pytest
from scipy.linalg import lstsq

from cvxmetric.certificates import relative_difference, relative_gap
from cvxmetric.instances import get_instance
from cvxmetric.orml import (check_ideal_output, direction_problem, orml_model, orml_weights,
                            pursuit_basis, simulate_log_sessions)
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.formulations.orml import build_orml, direction_values
from cvxmetric.problems import ORML
from cvxmetric.solvers.orml import ORML_TOL, direction_bound, orml_pursuit
from cvxmetric.verification.tolerances import GAP_ORML, ORML_ORTHOGONALITY_TOL, ORML_TRUTH_RTOL


def _data(seed=0, n=60, d=6):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3)
    X = 2.0 * rng.standard_normal((3, d))[y] + rng.standard_normal((n, d))
    pairs, rel, ses = simulate_log_sessions(X, y, 6, 5, noise=0.1, seed=seed + 1)
    return X, y, pairs, rel, ses


def _brute_weights(X, pairs, relevant, k, alpha, beta):
    """Eqs. 4-5 read literally, with loops."""
    n = len(X)
    S = {(int(i), int(j)) for (i, j), r in zip(pairs, relevant) if r}
    D = {(int(i), int(j)) for (i, j), r in zip(pairs, relevant) if not r}
    S |= {(j, i) for i, j in S}
    D |= {(j, i) for i, j in D}
    nbrs = []
    for i in range(n):
        dist = [(float(np.sum((X[i] - X[j]) ** 2)), j) for j in range(n) if j != i]
        nbrs.append({j for _, j in sorted(dist)[:k]})
    W, T = np.zeros((n, n)), np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if (i, j) in S:
                W[i, j] = alpha
            elif (i, j) in D:
                W[i, j] = T[i, j] = beta
            elif j in nbrs[i] or i in nbrs[j]:
                W[i, j] = 1.0
    return W, T


def test_weights_brute_force():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((9, 3))
    pairs = np.array([[0, 1], [0, 5], [0, 7], [4, 2], [4, 8]])
    rel = np.array([True, False, True, False, True])
    W, T = orml_weights(X, pairs, rel, n_neighbors=2, alpha=1.5, beta=3.0)
    Wb, Tb = _brute_weights(X, pairs, rel, 2, 1.5, 3.0)
    np.testing.assert_array_equal(W, Wb)
    np.testing.assert_array_equal(T, Tb)


def test_regularizer_identity_and_psd():
    """a^T M a = 1/2 [sum_{not D} W (a_i - a_j)^2 + sum_D W (a_i + a_j)^2] (eq. 8), M and S PSD."""
    X, _, pairs, rel, ses = _data()
    W, T = orml_weights(X, pairs, rel, session=ses)
    M = np.diag(W.sum(1)) - W + 2 * T
    a = np.random.default_rng(0).standard_normal(len(X))
    dis = T > 0
    lhs = 0.5 * (np.sum(W[~dis] * (a[:, None] - a[None, :])[~dis] ** 2)
                 + np.sum(W[dis] * (a[:, None] + a[None, :])[dis] ** 2))
    assert relative_difference(a @ M @ a, lhs) < 1e-12
    assert np.linalg.eigvalsh(M)[0] >= -1e-12 * np.linalg.eigvalsh(M)[-1]
    model = orml_model(X, pairs, rel, session=ses, r=4)
    S_paper = model.Xc.T @ M @ model.Xc
    np.testing.assert_allclose(model.S, S_paper, rtol=0, atol=1e-12 * np.abs(S_paper).max())


def test_pca_and_ideal_output():
    X, _, pairs, rel, ses = _data()
    model = orml_model(X, pairs, rel, session=ses, r=4)
    np.testing.assert_allclose(model.V.T @ model.Xc.T @ model.Xc @ model.V, np.eye(4), atol=1e-12)
    sim, dis = check_ideal_output(model.Y, model.sample_pairs, model.relevant)
    assert sim == 0.0 and dis >= 1.0 - 1e-14
    # eq. 14 per coordinate: |y_i + y_j| = 1/sqrt(r) on dissimilar pairs, the query keeps v^T x_i
    qi, ji = model.sample_pairs[~model.relevant].T
    np.testing.assert_allclose(np.abs(model.Y[qi] + model.Y[ji]), 0.5, rtol=1e-14)
    np.testing.assert_array_equal(model.Y[qi], model.Xl[qi] @ model.V)
    assert len(model.Xl) == len(pairs) + len(np.unique(ses))


def test_closed_form_matches_lstsq_and_orthogonal():
    X, _, pairs, rel, ses = _data(1)
    model = orml_model(X, pairs, rel, session=ses, r=5)
    res = orml_pursuit(model)
    assert res.converged and res.measure_value <= ORML_TOL
    U = res.info["U"]
    off = 0
    for d in range(model.r):
        Vd = pursuit_basis(model.V, U[:, :d], d)
        G, h = direction_problem(model, Vd, d)
        b_ls = lstsq(G, h)[0]
        b = res.w[off:off + Vd.shape[1]]
        off += Vd.shape[1]
        assert np.linalg.norm(b - b_ls) <= 1e-10 * np.linalg.norm(b_ls)
        np.testing.assert_allclose(Vd @ b, U[:, d], rtol=0, atol=1e-14 * np.linalg.norm(U[:, d]))
    nrm = np.linalg.norm(U, axis=0)
    C = U.T @ U / np.outer(nrm, nrm)
    assert np.max(np.abs(C - np.eye(model.r))) <= ORML_ORTHOGONALITY_TOL
    np.testing.assert_allclose(res.info["A"], U @ U.T)


def test_direction_bound_is_a_lower_bound_and_tight_only_at_the_optimum():
    rng = np.random.default_rng(5)
    G, h = rng.standard_normal((30, 4)), rng.standard_normal(30)
    b = lstsq(G, h)[0]
    f, low = direction_bound(G, h, b)
    assert relative_gap(f, low) < 1e-14
    fp, lowp = direction_bound(G, h, b + 0.1 * rng.standard_normal(4))
    assert lowp <= f * (1 + 1e-14) and relative_gap(fp, lowp) > 1e-4


def test_ground_truth_certifies_the_closed_form():
    inst = get_instance("orml", "syn-sessions")
    model = ORML.from_instance(inst).model()
    form = build_orml(model)
    truth = solve_certified(form, ORML_TRUTH_RTOL)
    assert truth.certified
    res = orml_pursuit(model)
    assert relative_difference(form.value_at(res.w), truth.p_star) <= GAP_ORML
    np.testing.assert_allclose(direction_values(form, res.w), res.info["direction_values"], rtol=1e-12)
    # a wrong point is scored as worse than the certified optimum
    assert relative_difference(form.value_at(1.01 * res.w), truth.bounds.lower) > 1e-6


def test_inputs_unchanged():
    X, _, pairs, rel, ses = _data()
    copies = [a.copy() for a in (X, pairs, rel, ses)]
    orml_pursuit(orml_model(X, pairs, rel, session=ses, r=3))
    orml_weights(X, pairs, rel, session=ses)
    for a, c in zip((X, pairs, rel, ses), copies):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("s", [1e-3, 1e4])
def test_scale_and_translation(s):
    """X -> sX + c: the coefficients b and the objective are unchanged, U -> U / s."""
    X, _, pairs, rel, ses = _data(2)
    base = orml_pursuit(orml_model(X, pairs, rel, session=ses, r=4))
    other = orml_pursuit(orml_model(s * X + 3.0, pairs, rel, session=ses, r=4))
    assert relative_difference(other.objective, base.objective) < 1e-9
    np.testing.assert_allclose(other.w, base.w, rtol=1e-7, atol=1e-9 * np.abs(base.w).max())
    np.testing.assert_allclose(s * other.info["U"], base.info["U"], rtol=1e-7,
                               atol=1e-9 * np.abs(base.info["U"]).max())
    assert other.converged


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"pairs": [[0, 0]], "relevant": [True]}, ValueError, "against itself"),
    ({"pairs": [[0, 1], [1, 0]], "relevant": [True, False]}, ValueError, "both relevant and irrelevant"),
    ({"pairs": [[0, 1]], "relevant": [1]}, TypeError, "relevant"),
    ({"pairs": [[0, 99]], "relevant": [True]}, ValueError, "n = 20"),
    ({"pairs": [[0, 1], [2, 3]], "relevant": [True, True], "session": [0, 0]}, ValueError, "more than one query"),
    ({"output_weight": 0.0}, ValueError, "output_weight"),
    ({"gamma": 9.0}, TypeError, "gamma"),        # the paper's symbol, not the parameter output_weight
    ({"r": 7}, ValueError, "r must be"),
    ({"r": 2.0}, TypeError, "r must be an integer"),
    ({"n_neighbors": -1}, ValueError, "n_neighbors must be"),
    ({"k": 6}, TypeError, "k"),                  # the paper's symbol, not the parameter n_neighbors
])
def test_bad_input(kwargs, exc, words):
    X = np.random.default_rng(0).standard_normal((20, 6))
    args = {"pairs": [[0, 1], [0, 2]], "relevant": [True, False], "r": 3}
    args.update(kwargs)
    pairs, relevant = args.pop("pairs"), np.asarray(args.pop("relevant"))
    with pytest.raises(exc, match=words):
        orml_model(X, pairs, relevant, **args)


def test_rank_deficient_data_names_r():
    X = np.random.default_rng(0).standard_normal((20, 6))
    X[:, 5] = X[:, 4]
    with pytest.raises(ValueError, match="numerical rank"):
        orml_model(X, [[0, 1]], np.array([True]), r=6)
    with pytest.raises(ValueError, match="NaN"):
        orml_model(np.full((5, 2), np.nan), [[0, 1]], np.array([True]), r=1)


def test_a_wrong_solve_is_not_certified(monkeypatch):
    """A closed form that is off by 0.1 % fails its own certificate (converged=False, a warning)."""
    import cvxmetric.solvers.orml as so
    from cvxmetric.exceptions import ConvergenceWarning
    real = so.cho_solve
    monkeypatch.setattr(so, "cho_solve", lambda *a, **k: 1.001 * real(*a, **k))
    X, _, pairs, rel, ses = _data(4)
    with pytest.warns(ConvergenceWarning):
        res = orml_pursuit(orml_model(X, pairs, rel, session=ses, r=3))
    assert not res.converged and res.measure_value > ORML_TOL


@pytest.mark.parametrize("name", ["syn-sessions", "digits-sessions"])
def test_harness_rows_pass(name):
    from cvxmetric.verification.harness import verify_instance
    rows = verify_instance("orml", name, seed=1)
    assert rows and all(r["passed"] for r in rows), [r["checks"] for r in rows]


def test_solver_bad_input():
    X, _, pairs, rel, ses = _data()
    with pytest.raises(TypeError, match="ORMLModel"):
        orml_pursuit(X)
    with pytest.raises(ValueError, match="tol"):
        orml_pursuit(orml_model(X, pairs, rel, session=ses, r=2), tol=-1.0)
