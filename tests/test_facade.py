"""The solve_<method> facades of cvxmetric.solvers and the project's vocabulary.

* every facade, for every ``method=`` value, on a tiny instance: the result contract, the same
  point as the algorithm it wraps run directly on the model, and the model's objective at it;
* options a method does not read (another method's, or unknown) are a ValueError naming the
  option and the method; so is a BoostMetric method that does not apply to the loss;
* the glossary's parameter names are accepted and other spellings (the papers' symbols) rejected
  with an error naming them.
"""
import inspect
import math

import numpy as np
import pytest

import cvxmetric.solvers as solvers
from cvxmetric._checks import check_method_options, keyword_options
from cvxmetric.boostmetric import boostmetric_model
from cvxmetric.solvers.boostmetric import weight_keyword
from cvxmetric.fantope import fantope_model
from cvxmetric.generators import pairs_from_labels, quadruplets_from_metric, triplets_from_labels
from cvxmetric.instances import get_instance
from cvxmetric.instances.boostmetric import boostmetric_instance
from cvxmetric.instances.fantope import synthetic_fantope
from cvxmetric.itml import itml_model
from cvxmetric.linalg import random_psd
from cvxmetric.mmc import MMCModel
from cvxmetric.models import qwise_model
from cvxmetric.orml import orml_model
from cvxmetric.taxonomy import taxonomy_quadruplets
from cvxmetric.vector_model import qwise_vector_model
from cvxmetric.webpage import monotony_quadruplets
from cvxmetric.solvers.boostmetric_cg import boostmetric_hinge_cg
from cvxmetric.solvers.boostmetric_gradient import boostmetric_projected_gradient
from cvxmetric.solvers.boostmetric_stagewise import boostmetric_stagewise, boostmetric_totally_corrective
from cvxmetric.solvers.factor_subgradient import factor_subgradient
from cvxmetric.solvers.fantope_mm import fantope_mm
from cvxmetric.solvers.fantope_subgradient import fantope_subgradient
from cvxmetric.solvers.itml import bregman_itml
from cvxmetric.solvers.mmc import mmc_ascent
from cvxmetric.solvers.newton import projected_newton
from cvxmetric.solvers.orml import orml_pursuit
from cvxmetric.solvers.hinge_barrier import dual_barrier
from cvxmetric.solvers.pdhg import DEFAULT_TOL, RESIDUAL_TOL_FRACTION, pdhg
from cvxmetric.solvers.qwise import BARRIER_START_GAP
from cvxmetric.solvers.result import MEASURES, SolverResult
from cvxmetric.solvers.subgradient import projected_subgradient

pytestmark = pytest.mark.filterwarnings("ignore::cvxmetric.exceptions.ConvergenceWarning")

FACADES = ["solve_qwise", "solve_qwise_vector", "solve_fantope", "solve_lmnn", "solve_mmc", "solve_itml",
           "solve_boostmetric", "solve_orml"]


def _qwise_data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 3))
    cons = quadruplets_from_metric(X, random_psd(3, seed=1), 30, seed=2, flip_fraction=0.1)
    y = np.repeat([0, 1], 8)
    return X, cons + pairs_from_labels(y, n_similar=5, n_dissimilar=5, u=1.0, l=4.0, seed=3)


def _fantope():
    inst = synthetic_fantope(4, 1, 20, 40, seed=0, reg_weight=1.0, trace_weight=0.1, C_Q=0.3)
    return inst, fantope_model(inst.X, inst.constraints, **inst.params)


def _boost(loss):
    return boostmetric_instance("iris", loss, n=24, seed=0)


def _pdhg_from_barrier(model, **options):
    """What ``solve_qwise(method="pdhg")`` runs on few constraints: PDHG from the dual barrier pair."""
    start = dual_barrier(model, gap=BARRIER_START_GAP * RESIDUAL_TOL_FRACTION * DEFAULT_TOL)
    return pdhg(model, M0=start.M, y0=start.y, **options)


def _cases():
    """(facade call, direct call of the wrapped algorithm on the model, the model's value function)."""
    X, cons = _qwise_data()
    hinge = qwise_model(X, cons)
    vm = qwise_vector_model(X, cons, diagonal=False)
    f_inst, fm = _fantope()
    itml = get_instance("itml", "iris")
    mmc = get_instance("mmc", "iris")
    orml = get_instance("orml", "syn-sessions")
    e = orml.extra
    out = {
        "qwise/subgradient": (lambda: solvers.solve_qwise(X, cons, method="subgradient", max_iter=300),
                              lambda: projected_subgradient(hinge, max_iter=300), hinge.value),
        "qwise/pdhg": (lambda: solvers.solve_qwise(X, cons, method="pdhg", max_iter=300),
                       lambda: _pdhg_from_barrier(hinge, max_iter=300), hinge.value),
        "qwise/pdhg-cold": (lambda: solvers.solve_qwise(X, cons, method="pdhg", barrier_start=False, max_iter=300),
                            lambda: pdhg(hinge, max_iter=300), hinge.value),
        "qwise_vector/newton": (lambda: solvers.solve_qwise_vector(X, cons, diagonal=False, method="newton"),
                                lambda: projected_newton(vm), None),
        "fantope/mm": (lambda: solvers.solve_fantope(f_inst.X, f_inst.constraints, **f_inst.params, method="mm",
                                                     max_iter=3),
                       lambda: fantope_mm(fm, max_iter=3), fm.value),
        "fantope/subgradient": (lambda: solvers.solve_fantope(f_inst.X, f_inst.constraints, **f_inst.params,
                                                              method="subgradient", max_iter=300),
                                lambda: fantope_subgradient(fm, max_iter=300), fm.value),
        "fantope/factor": (lambda: solvers.solve_fantope(f_inst.X, f_inst.constraints, **f_inst.params,
                                                         method="factor", seed=0, max_iter=300),
                           lambda: factor_subgradient(fm.base, 1, seed=0, max_iter=300), fm.value),
        "mmc/ascent": (lambda: solvers.solve_mmc(mmc.X, mmc.constraints, method="ascent", max_iter=50),
                       lambda: mmc_ascent(MMCModel(mmc.X, mmc.constraints), max_iter=50),
                       MMCModel(mmc.X, mmc.constraints).value),
        "itml/bregman": (lambda: solvers.solve_itml(itml.X, itml.constraints, **itml.params, method="bregman",
                                                    max_iter=5),
                         lambda: bregman_itml(itml_model(itml.X, itml.constraints, **itml.params), max_iter=5),
                         itml_model(itml.X, itml.constraints, **itml.params).value),
        "orml/pursuit": (lambda: solvers.solve_orml(orml.X, e["pairs"], e["relevant"], session=e["session"],
                                                    **orml.params, method="pursuit"),
                         lambda: orml_pursuit(orml_model(orml.X, e["pairs"], e["relevant"], session=e["session"],
                                                         **orml.params)), None),
    }
    for loss, method, direct in (("hinge", "column_generation", None),
                                 ("exp", "totally_corrective", boostmetric_totally_corrective),
                                 ("exp", "stagewise", boostmetric_stagewise),
                                 ("logistic", "totally_corrective", boostmetric_totally_corrective),
                                 ("logistic", "stagewise", boostmetric_stagewise),
                                 ("exp", "projected_gradient", boostmetric_projected_gradient),
                                 ("logistic", "projected_gradient", boostmetric_projected_gradient)):
        b = _boost(loss)
        nu = b.params["nu"]
        model = boostmetric_model(b.X, b.constraints, loss=loss, nu=nu)
        run = (lambda b=b, nu=nu: boostmetric_hinge_cg(b.X, b.constraints, nu, max_iter=20)) if direct is None else \
            (lambda b=b, loss=loss, nu=nu, direct=direct: direct(b.X, b.constraints, loss=loss, nu=nu, max_iter=20))
        out[f"boostmetric-{loss}/{method}"] = (
            lambda b=b, loss=loss, nu=nu, method=method: solvers.solve_boostmetric(
                b.X, b.constraints, loss=loss, **weight_keyword(loss, nu), method=method, max_iter=20),
            run, model.value)
    return out


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_every_facade_and_method(name):
    facade, direct, value = CASES[name]
    res, ref = facade(), direct()
    assert isinstance(res, SolverResult)
    assert res.measure in MEASURES and isinstance(res.converged, bool) and res.status and res.message
    assert res.tol > 0 and res.measure_value is not None
    assert res.converged == (res.measure_value <= res.tol)
    if res.lower_bound is not None and math.isfinite(res.lower_bound):
        assert res.lower_bound <= res.objective + 1e-9 * abs(res.objective)
    # the facade runs exactly the algorithm it names, on the model of its parameters
    point, ref_point = (res.M, ref.M) if res.w is None else (res.w, ref.w)
    np.testing.assert_allclose(point, ref_point, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(ref_point).max()))
    assert res.objective == pytest.approx(ref.objective, rel=1e-10)
    if value is not None:      # one objective: the model's value at the returned point
        assert res.objective == pytest.approx(value(res.M), rel=1e-8, abs=1e-12)


def test_every_facade_is_exported_with_method_and_a_program_in_notes():
    assert set(FACADES) <= set(solvers.__all__)
    for name in FACADES:
        fn = getattr(solvers, name)
        params = inspect.signature(fn).parameters
        assert "method" in params, name
        doc = inspect.getdoc(fn)
        assert "Notes\n-----" in doc and ".. math::" in doc.split("Notes\n-----")[1], name
        assert "Returns\n-------" in doc and "Parameters\n----------" in doc, name


def test_boostmetric_default_method_follows_the_loss():
    b = _boost("hinge")
    assert solvers.solve_boostmetric(b.X, b.constraints, loss="hinge", slack_weight=b.params["nu"],
                                     max_iter=5).solver == "boostmetric-hinge-cg"
    b = _boost("exp")
    res = solvers.solve_boostmetric(b.X, b.constraints, loss="exp", trace_weight=b.params["nu"], max_iter=5)
    assert res.solver == "boostmetric-exp-fista"


# ---------------------------------------------------------------------------- rejected options
def _reject_cases():
    X, cons = _qwise_data()
    f_inst, _ = _fantope()
    fp = f_inst.params
    itml, mmc, orml = get_instance("itml", "iris"), get_instance("mmc", "iris"), get_instance("orml", "syn-sessions")
    e = orml.extra
    hb, eb = _boost("hinge"), _boost("exp")
    return [
        # another method's option
        (lambda: solvers.solve_qwise(X, cons, method="pdhg", active_set=True), "active_set", "pdhg"),
        (lambda: solvers.solve_qwise(X, cons, method="subgradient", residual_tol=1e-3), "residual_tol",
         "subgradient"),
        (lambda: solvers.solve_fantope(f_inst.X, f_inst.constraints, **fp, method="factor", W0=np.eye(4)), "W0",
         "factor"),
        (lambda: solvers.solve_fantope(f_inst.X, f_inst.constraints, **fp, method="mm", L0=np.ones((1, 4))), "L0",
         "mm"),
        (lambda: solvers.solve_fantope(f_inst.X, f_inst.constraints, **fp, method="subgradient", inner="pdhg"),
         "inner", "subgradient"),
        (lambda: solvers.solve_boostmetric(eb.X, eb.constraints, loss="exp", trace_weight=eb.params["nu"],
                                           method="stagewise",
                                           n_columns=3), "n_columns", "stagewise"),
        (lambda: solvers.solve_boostmetric(hb.X, hb.constraints, loss="hinge", slack_weight=hb.params["nu"],
                                           lbfgs_maxiter=3),
         "lbfgs_maxiter", "column_generation"),
        # unknown options
        (lambda: solvers.solve_qwise(X, cons, max_iters=10), "max_iters", "pdhg"),
        (lambda: solvers.solve_qwise_vector(X, cons, max_iters=10), "max_iters", "newton"),
        (lambda: solvers.solve_itml(itml.X, itml.constraints, impostors="search"), "impostors", "bregman"),
        (lambda: solvers.solve_mmc(mmc.X, mmc.constraints, seed=0), "seed", "ascent"),
        (lambda: solvers.solve_orml(orml.X, e["pairs"], e["relevant"], session=e["session"], max_iter=3),
         "max_iter", "pursuit"),
        (lambda: solvers.solve_boostmetric(eb.X, eb.constraints, loss="exp", trace_weight=eb.params["nu"], smoothing=0.5),
         "smoothing", "projected_gradient"),
        # unknown method, and a method that does not apply to the loss
        (lambda: solvers.solve_qwise(X, cons, method="newton"), "method", "newton"),
        (lambda: solvers.solve_fantope(f_inst.X, f_inst.constraints, **fp, method="pdhg"), "method", "pdhg"),
        (lambda: solvers.solve_boostmetric(hb.X, hb.constraints, loss="hinge", slack_weight=hb.params["nu"],
                                           method="stagewise"), "stagewise", "hinge"),
        (lambda: solvers.solve_boostmetric(eb.X, eb.constraints, loss="exp", trace_weight=eb.params["nu"],
                                           method="column_generation"), "column_generation", "exp"),
        (lambda: solvers.solve_boostmetric(eb.X, eb.constraints, loss="square", trace_weight=1.0), "loss", "square"),
    ]


@pytest.mark.parametrize("case", range(len(_reject_cases())))
def test_options_a_method_does_not_read_are_rejected(case):
    call, option, method = _reject_cases()[case]
    with pytest.raises(ValueError) as err:
        call()
    assert option in str(err.value) and method in str(err.value)


def test_check_method_options():
    accepted = {"a": keyword_options(lambda model, *, x=1, y=2, **kw: None), "b": frozenset({"z"})}
    assert accepted["a"] == {"x", "y"}
    assert check_method_options("f", "a", {"x": 3}, accepted) == "a"
    with pytest.raises(ValueError, match=r"f: option 'z' does not apply to method='a' \(only to method='b'\)"):
        check_method_options("f", "a", {"z": 3}, accepted)
    with pytest.raises(ValueError, match=r"unknown option 'w' for method='b'; its options are z"):
        check_method_options("f", "b", {"w": 3}, accepted)
    with pytest.raises(ValueError, match=r"method must be one of \('a', 'b'\); got 'c'"):
        check_method_options("f", "c", {}, accepted)


# ---------------------------------------------------------------------------- vocabulary
def test_fantope_vocabulary():
    inst, fm = _fantope()
    assert set(inst.params) == {"rank", "reg_weight", "trace_weight", "C_Q", "C_P"}
    assert (fm.rank, fm.k, fm.reg_weight, fm.trace_weight) == (1, 3, 1.0, 0.1)
    X, cons = inst.X, inst.constraints
    for old, new in (("k", "rank"), ("mu", "reg_weight"), ("gamma", "trace_weight")):
        kw = {"rank": 1, "reg_weight": 1.0, "trace_weight": 0.1}
        kw[old] = kw.pop(new)
        with pytest.raises(TypeError, match=old):
            fantope_model(X, cons, **kw)
        if old != "gamma":
            with pytest.raises(TypeError, match=new):     # the new name is required
                solvers.solve_fantope(X, cons, **kw)
    with pytest.raises(ValueError, match="unknown option 'gamma'"):
        solvers.solve_fantope(X, cons, rank=1, reg_weight=1.0, gamma=0.1)
    with pytest.raises(ValueError, match="unknown option 'mu'"):
        solvers.solve_fantope(X, cons, rank=1, reg_weight=1.0, mu=0.1)


def test_orml_vocabulary():
    inst = get_instance("orml", "syn-sessions")
    e = inst.extra
    assert {"n_neighbors", "output_weight"} <= set(inst.params)
    args = (inst.X, e["pairs"], e["relevant"])
    with pytest.raises(TypeError, match="'k'"):
        orml_model(*args, session=e["session"], k=6)
    with pytest.raises(TypeError, match="'gamma'"):
        orml_model(*args, session=e["session"], gamma=9.0)
    with pytest.raises(ValueError, match="unknown option 'k'"):
        solvers.solve_orml(*args, session=e["session"], k=6)
    with pytest.raises(ValueError, match="unknown option 'gamma'"):
        solvers.solve_orml(*args, session=e["session"], gamma=9.0)
    with pytest.raises(TypeError, match="ORMLModel"):
        orml_pursuit(inst.X)


def test_vector_qwise_vocabulary():
    X, cons = _qwise_data()
    assert qwise_vector_model(X, cons, diagonal=True).kind == "diagonal"
    assert qwise_vector_model(X, cons, diagonal=False).kind == "linear"
    with pytest.raises(TypeError, match="'model'"):
        qwise_vector_model(X, cons, model="diagonal")
    with pytest.raises(TypeError, match="diagonal must be True or False"):
        qwise_vector_model(X, cons, diagonal="linear")
    with pytest.raises(ValueError, match="unknown option 'model'"):
        solvers.solve_qwise_vector(X, cons, model="diagonal")


def test_other_renames_reject_the_former_names():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((12, 2)), np.repeat([0, 1, 2, 3], 3)
    tree = {"root": ["a", "b"], "a": [0, 1], "b": [2, 3]}
    assert len(taxonomy_quadruplets(X, y, tree, n_same=4, n_sibling=4, n_neighbors=2, seed=0)) == 8
    with pytest.raises(TypeError, match="'k'"):
        taxonomy_quadruplets(X, y, tree, n_same=4, n_sibling=4, k=2, seed=0)
    assert len(triplets_from_labels(X, y, n_neighbors=1, n_impostors=2)) == 24
    for old in ("k_target", "k_impostor"):
        with pytest.raises(TypeError, match=old):
            triplets_from_labels(X, y, **{old: 1})
    assert monotony_quadruplets(10, change_period=3)[1].any()
    with pytest.raises(TypeError, match="'gamma'"):
        monotony_quadruplets(10, gamma=3)
    itml = get_instance("itml", "iris")
    model = itml_model(itml.X, itml.constraints, **itml.params)
    assert bregman_itml(model, max_iter=1).n_iter == 1
    with pytest.raises(TypeError, match="'max_sweeps'"):
        bregman_itml(model, max_sweeps=1)
    with pytest.raises(ValueError, match="unknown option 'max_sweeps'"):
        solvers.solve_itml(itml.X, itml.constraints, max_sweeps=1)
    _, fm = _fantope()
    with pytest.raises(TypeError, match="'max_outer'"):
        fantope_mm(fm, max_outer=2)


@pytest.mark.parametrize("loss, kwargs, match", [
    ("hinge", {"trace_weight": 0.1}, "slack_weight, not trace_weight"),
    ("hinge", {}, "needs slack_weight"),
    ("exp", {"slack_weight": 0.1}, "has no slacks: pass trace_weight"),
    ("logistic", {}, "needs trace_weight"),
    ("exp", {"trace_weight": -1.0}, "trace_weight"),
])
def test_boostmetric_takes_each_weight_by_its_meaning(loss, kwargs, match):
    """The paper's nu is a trace weight for exp/logistic and a slack weight for the hinge: one name each."""
    b = _boost("exp")
    with pytest.raises(ValueError, match=match):
        solvers.solve_boostmetric(b.X, b.constraints, loss=loss, **kwargs)

