"""The accelerated projected-gradient BoostMetric solver (solvers/boostmetric_gradient.py)."""
import numpy as np
import pytest

from cvxmetric import solvers
from cvxmetric.boostmetric import boostmetric_model
from cvxmetric.constraints import ConstraintSet
from cvxmetric.instances.boostmetric import boostmetric_instance
from cvxmetric.solvers.boostmetric_gradient import boostmetric_projected_gradient
from cvxmetric.solvers.boostmetric_stagewise import DEFAULT_TOL, boostmetric_totally_corrective


@pytest.fixture(autouse=True, scope="module")
def _single_blas_thread():
    """d <= 13: one BLAS thread is faster than competing ones on a shared machine."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


def _random_problem(seed, n=15, d=4, m=40):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    t = np.array([rng.choice(n, 3, replace=False) for _ in range(m)])
    return X, ConstraintSet.from_triplets(t)


@pytest.mark.parametrize("loss,nu", [("exp", 0.5), ("logistic", 1.0)])
@pytest.mark.parametrize("seed", [0, 1])
def test_certifies_random_problems_and_leaves_inputs_alone(loss, nu, seed):
    X, trip = _random_problem(seed)
    X0, idx0 = X.copy(), trip.idx.copy()
    res = boostmetric_projected_gradient(X, trip, loss=loss, nu=nu)
    assert res.converged and res.certified_gap <= DEFAULT_TOL and res.measure == "certified_gap"
    assert np.array_equal(X, X0) and np.array_equal(trip.idx, idx0)
    assert np.linalg.eigvalsh(res.M)[0] >= -1e-10 * max(1.0, np.linalg.norm(res.M, 2))
    assert res.multipliers.shape == (len(trip),)


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_agrees_with_the_totally_corrective_certified_optimum_on_iris(loss):
    inst = boostmetric_instance("iris", loss, n=30, seed=1)
    res = boostmetric_projected_gradient(inst.X, inst.constraints, **inst.params)
    ref = boostmetric_totally_corrective(inst.X, inst.constraints, **inst.params, n_columns=3)
    assert res.converged and ref.converged
    # both intervals [lower_bound, objective] hold the optimum: they overlap
    assert res.lower_bound <= ref.objective * (1 + 1e-12) and ref.lower_bound <= res.objective * (1 + 1e-12)
    assert res.objective == pytest.approx(ref.objective, rel=2 * DEFAULT_TOL)


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_objective_is_the_models_value_at_the_returned_point(loss):
    inst = boostmetric_instance("iris", loss, n=30, seed=0)
    res = boostmetric_projected_gradient(inst.X, inst.constraints, **inst.params)
    model = boostmetric_model(inst.X, inst.constraints, **inst.params)
    assert res.objective == model.value(res.M)


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_iterations_do_not_depend_on_the_data_scale(loss):
    # data scaled by s with nu scaled by s^2 is the same problem (the point divided by s^2)
    inst = boostmetric_instance("iris", loss, n=30, seed=0)
    nu = inst.params["nu"]
    base = boostmetric_projected_gradient(inst.X, inst.constraints, loss=loss, nu=nu)
    for k in (-10, 10):
        s = 2.0 ** k
        res = boostmetric_projected_gradient(inst.X * s, inst.constraints, loss=loss, nu=nu * s * s)
        assert res.converged
        assert max(res.n_iter, 1) <= 1.5 * max(base.n_iter, 1) and max(base.n_iter, 1) <= 1.5 * max(res.n_iter, 1)
        assert res.objective == pytest.approx(base.objective, rel=2 * DEFAULT_TOL)
        np.testing.assert_allclose(res.M * s * s, base.M, rtol=1e-6, atol=1e-6 * np.abs(base.M).max())


def test_facade_runs_it_for_the_smooth_losses_and_rejects_it_for_the_hinge():
    inst = boostmetric_instance("iris", "logistic", n=30, seed=0)
    res = solvers.solve_boostmetric(inst.X, inst.constraints, loss="logistic", trace_weight=inst.params["nu"],
                                    method="projected_gradient")
    assert res.converged and res.solver == "boostmetric-logistic-fista"
    hinge = boostmetric_instance("iris", "hinge", n=30, seed=0)
    with pytest.raises(ValueError, match="projected_gradient"):
        solvers.solve_boostmetric(hinge.X, hinge.constraints, loss="hinge", slack_weight=hinge.params["nu"],
                                  method="projected_gradient")


def _large_units_instance():
    """iris, 30 points, standardized and times 1e3: the trace weight is 1e-6 of the data's, the
    optimum lies deep in the logistic loss' exponential tail."""
    inst = boostmetric_instance("iris", "logistic", n=30, seed=0)
    X = inst.X - inst.X.mean(axis=0)
    return X / X.std(axis=0) * 1e3, inst.constraints


def test_newton_phase_certifies_the_nearly_unregularised_problem():
    X, trip = _large_units_instance()
    res = boostmetric_projected_gradient(X, trip, loss="logistic", nu=1.0)
    assert res.converged and res.info["newton_steps"] > 0
    ref = boostmetric_totally_corrective(X, trip, loss="logistic", nu=1.0)
    assert ref.converged
    assert res.lower_bound <= ref.objective * (1 + 1e-12) and ref.lower_bound <= res.objective * (1 + 1e-12)


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_factor_newton_reaches_a_stationary_factor_and_never_raises_the_objective(loss):
    from cvxmetric.boostmetric import TripletGeometry, loss_value, loss_weights
    from cvxmetric.solvers.boostmetric_newton import FactorNewton

    X, trip = _random_problem(0)
    geom = TripletGeometry(X, trip)
    T = 0.5 * np.eye(X.shape[1])
    newton = FactorNewton(geom, loss, T)
    L0 = np.random.default_rng(0).standard_normal((X.shape[1], 2))
    L0_copy = L0.copy()
    L = newton.solve(L0)
    assert np.array_equal(L0, L0_copy) and newton.n_steps > 0

    def phi_and_gradient(L):
        rho = geom.margins(L @ L.T)
        S = T - geom.weighted_sum(loss_weights(loss, rho))
        return loss_value(loss, rho) + float(np.sum(T * (L @ L.T))), 2.0 * S @ L

    phi0, g0 = phi_and_gradient(L0)
    phi, g = phi_and_gradient(L)
    assert phi <= phi0
    assert np.linalg.norm(g) <= 1e-10 * np.linalg.norm(g0)
