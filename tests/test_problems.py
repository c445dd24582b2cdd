"""The public problem objects (cvxmetric.problems): solve, truth, objective, check and verify on
the user's data, the ``check`` command line, and a method added through its descriptor alone."""
import dataclasses
import json

import numpy as np
import pytest

from cvxmetric import problems
from cvxmetric.certificates import relative_difference
from cvxmetric.datasets import load_dataset
from cvxmetric.orml import simulate_log_sessions
from cvxmetric.problems import problem_class
from cvxmetric.problems.cli import main as check
from cvxmetric.verification.tolerances import VALUE_AT_RTOL


@pytest.fixture(scope="module")
def data():
    """Iris (standardized), every 5th point: 30 points, 3 classes, d = 4."""
    X, y = load_dataset("iris")
    return X[::5].copy(), y[::5].copy()


def _pairs(y, m, seed):
    rng = np.random.default_rng(seed)
    P = rng.integers(0, len(y), (4 * m, 2))
    P = P[P[:, 0] != P[:, 1]]
    sim = y[P[:, 0]] == y[P[:, 1]]
    P = np.vstack([P[sim][: m // 2], P[~sim][: m // 2]])
    return P, np.where(y[P[:, 0]] == y[P[:, 1]], 1, -1)


def _quadruplets(y, m, seed):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < m:
        a, b, c, d = rng.integers(0, len(y), 4)
        if a != b and c != d and y[a] == y[b] and y[c] != y[d]:
            out.append((a, b, c, d))
    return np.array(out)


def make_problem(name, X, y):
    if name == "lmnn":
        return problems.LMNN(X, y, n_neighbors=2)
    if name in ("itml", "mmc"):
        P, lab = _pairs(y, 40, seed=1)
        return problems.ITML(X, P, lab) if name == "itml" else problems.MMC(X, P, lab)
    if name == "qwise":
        return problems.Qwise(X, _quadruplets(y, 40, seed=2))
    if name == "boostmetric":
        return problems.BoostMetric(X, y, loss="hinge", n_neighbors=2, n_impostors=2)
    if name == "orml":
        P, rel, _ = simulate_log_sessions(X, y, 6, 5, noise=0.1, seed=0)
        return problems.ORML(X, P, np.where(rel, 1, -1), n_components=3)
    raise AssertionError(name)


CONVEX = ("lmnn", "itml", "mmc", "qwise", "boostmetric", "orml")


@pytest.fixture(scope="module")
def solved(data):
    """Each convex problem with its default fast result and its exact result."""
    out = {}
    for name in CONVEX:
        p = make_problem(name, *data)
        out[name] = (p, p.solve(), p.solve("cvxpy"))
    return out


def _point(result):
    return result.M if result.M is not None else result.w


@pytest.mark.parametrize("name", CONVEX)
def test_default_solve_is_certified_and_its_objective_is_the_formulations(solved, name):
    p, fast, exact = solved[name]
    assert fast.converged and exact.converged
    assert p.default_method() == type(p).methods[0] or name == "boostmetric"
    # two implementations of one objective: the fast model's and the formulation's value_at
    assert abs(relative_difference(p.objective(_point(fast)), fast.objective)) <= VALUE_AT_RTOL
    assert p.objective(_point(exact)) == pytest.approx(exact.objective, rel=VALUE_AT_RTOL)
    truth = p.truth()
    assert truth.certified and truth is p.truth()   # cached


@pytest.mark.parametrize("name", CONVEX)
def test_check_confirms_the_exact_point_at_1e_6_and_rejects_a_perturbed_one(solved, name):
    p, _, exact = solved[name]
    report = p.check(_point(exact), rtol=1e-6)
    assert report.verdict == "optimal", report
    assert report.rel_gap_lower <= 1e-6
    point = _point(exact)
    worse = 2.0 * point if name != "mmc" else point + np.diag(np.diag(point))   # MMC: rescaling is no change
    if name == "boostmetric":   # the hinge problem is over trace one: a rank-one corner instead
        worse = np.zeros_like(point)
        worse[0, 0] = 1.0
    bad = p.check(worse, rtol=1e-6)
    assert bad.verdict == "suboptimal", bad
    assert bad.rel_gap > 1e-6


@pytest.mark.parametrize("name", ["lmnn", "qwise", "mmc"])
def test_check_says_infeasible_for_an_indefinite_matrix(solved, name):
    p = solved[name][0]
    M = np.eye(p.d)
    M[0, 0] = -1.0
    report = p.check(M)
    assert report.verdict == "infeasible" and not report.feasible and report.lambda_min == -1.0


def test_check_at_a_loose_tolerance_confirms_the_fast_point(solved):
    p, fast, _ = solved["lmnn"]
    report = p.check(fast.M, rtol=fast.tol)
    assert report.verdict == "optimal"
    assert report.as_dict()["verdict"] == "optimal" and "verdict" in str(report)


def test_undecided_when_the_interval_cannot_decide(solved, monkeypatch):
    """An interval wider than the tolerance is the oracle's limit: "undecided", never "suboptimal"."""
    from cvxmetric.formulations.ladder import Bounds

    p, _, exact = solved["qwise"]
    wide = p.truth()
    v = p.objective(exact.M)
    fake = type(wide)(Bounds(v * (1 - 1e-3), v), wide.point, None, [], None, None, 1e-12)
    monkeypatch.setattr(p, "_truth_of", lambda instance, rtol: fake)
    report = p.check(exact.M, rtol=1e-6)   # at the upper end, 1e-3 above the lower one
    assert report.verdict == "undecided" and "too wide" in report.reason


def test_verify_is_the_harness_row_of_a_solve(solved):
    p, fast, exact = solved["mmc"]
    row = p.verify(fast)
    assert row["passed"], row["errors"]
    assert p.verify(exact)["passed"]
    with pytest.raises(ValueError, match="needs method="):
        p.verify(dataclasses.replace(fast))


def test_mmc_is_invariant_under_scaling_of_the_data(data, solved):
    """MMC's problem on sX is the problem on X with M -> M / s^2: same value, same verdict."""
    p, _, exact = solved["mmc"]
    s = 8.0
    P, lab = _pairs(data[1], 40, seed=1)
    scaled = problems.MMC(s * data[0], P, lab)
    assert scaled.objective(exact.M / s ** 2) == pytest.approx(p.objective(exact.M), rel=1e-12)
    assert scaled.check(exact.M / s ** 2, rtol=1e-6).verdict == "optimal"


def test_boostmetric_hinge_is_invariant_under_scaling_of_the_data(data, solved):
    """The hinge problem is over trace-one M: on sX every margin is s^2 times larger, the same M is optimal."""
    p, _, exact = solved["boostmetric"]
    scaled = problems.BoostMetric(4.0 * data[0], data[1], loss="hinge", n_neighbors=2, n_impostors=2)
    assert scaled.objective(exact.M) == pytest.approx(16.0 * p.objective(exact.M), rel=1e-9)
    assert scaled.check(exact.M, rtol=1e-6).verdict == "optimal"


def test_score_point_takes_a_problem(solved):
    from cvxmetric.verification.harness import score_point

    p, _, exact = solved["itml"]
    scored = score_point("itml", p, exact.M)
    assert scored["passed"] and scored["instance"] == p.instance.name
    assert scored["value"] == pytest.approx(p.objective(exact.M), rel=1e-12)


def test_a_bundled_instance_is_a_problem():
    p = problems.bundled("mmc", "iris")
    assert isinstance(p, problems.MMC) and p.instance.name == "iris"
    res = p.solve()
    assert res.converged and p.verify(res)["passed"]
    with pytest.raises(ValueError, match="unknown problem"):
        problems.bundled("qwise-vector", "diag-d10")


def test_vector_qwise_is_a_problem_of_the_users_data(data):
    """The vector model (its point w = [w; b]) on quadruplets and labelled pairs: Newton's point is
    certified optimal, and the bundled instances are the same Problem."""
    X, y = data
    P, lab = _pairs(y, 20, seed=3)
    problem = problems.QwiseVector(X, _quadruplets(y, 30, seed=4), pairs=P, labels=lab, h=0.05)
    res = problem.solve()
    assert res.converged and problem.check(res.w, rtol=1e-3).verdict == "optimal"
    assert abs(relative_difference(problem.objective(res.w), res.objective)) <= VALUE_AT_RTOL
    assert problem.verify(res)["passed"]
    assert isinstance(problems.bundled("qwise_vector", "diag-d10"), problems.QwiseVector)
    with pytest.raises(ValueError, match="pairs and labels"):
        problems.QwiseVector(X, _quadruplets(y, 30, seed=4), pairs=P)


def test_fantope_checks_a_critical_point_on_its_bound(data):
    X, y = data
    p = problems.Fantope(X, _quadruplets(y, 30, seed=3), rank=2, trace_weight=0.1)
    res = p.solve()
    assert res.converged
    report = p.check(res.M, rtol=1e-3)
    assert report.verdict == "optimal", report
    assert p.objective(res.M) == pytest.approx(res.objective, rel=1e-9)
    with pytest.raises(ValueError, match="not convex"):
        p.truth()
    with pytest.raises(ValueError, match="not convex"):
        p.solve_bound("pdhg")
    bound = p.solve_bound("pdhg", at=res.M)    # the bound at W(M): M's critical-point test
    assert bound.converged and bound.objective == pytest.approx(res.objective, rel=1e-3)


def test_fantope_verify_checks_the_bound_solve_bound_solved(data):
    """A solve_bound result is verified on the program it solved, the bound at its fixed W (carried
    in info["bound_W"]), not on the bound at W(result.M), another program when W is not W(M)."""
    from cvxmetric.fantope import fantope_projector
    X, y = data
    p = problems.Fantope(X, _quadruplets(y, 30, seed=3), rank=2, trace_weight=0.1)
    at = np.diag([1.0, 2.0, 3.0, 4.0])       # its Fantope point: the first two coordinates
    res = p.solve_bound("pdhg", at=at)
    W = res.info["bound_W"]
    np.testing.assert_allclose(W, fantope_projector(at, 2), atol=1e-12)
    assert np.abs(W - fantope_projector(res.M, 2)).max() > 0.1      # the two programs differ
    row = p.verify(res, method="bound-pdhg")
    assert row["passed"], (row["checks"], row["errors"])
    assert p.formulation(at=at).value_at(res.M) == pytest.approx(res.objective, rel=1e-6)


def test_fantope_solves_its_convex_bound_at_the_instances_fixed_point():
    """A bundled Fantope instance carries a Fantope point W: its truth, formulation and
    solve_bound are those of the convex bound at W (the harness' rows)."""
    from cvxmetric.verification.tolerances import GAP_FIRST_ORDER

    p = problems.bundled("fantope", "syn-d8-e2")
    truth = p.truth()
    assert truth.certified
    for method in ("pdhg", "subgradient"):
        res = p.solve_bound(method)
        assert res.solver == f"fantope-bound-{method}" and res.converged
        assert 0.0 <= relative_difference(p.formulation().value_at(res.M), truth.bounds.lower) <= GAP_FIRST_ORDER
    with pytest.raises(ValueError, match="method must be one of"):
        p.solve_bound("mm")


def test_bad_input_names_the_argument(data):
    X, y = data
    with pytest.raises(ValueError, match="regularization"):
        problems.LMNN(X, y, regularization=1.5)
    with pytest.raises(ValueError, match="labels"):
        problems.MMC(X, [[0, 1], [2, 3]], [1, 0])
    with pytest.raises(ValueError, match="pairs"):
        problems.ITML(X, [[0, 100]], [1])
    with pytest.raises(ValueError, match="method must be one of"):
        problems.LMNN(X, y).solve("lbfgs")
    with pytest.raises(ValueError, match="shape"):
        problems.LMNN(X, y).objective(np.eye(3))
    with pytest.raises(ValueError, match="unknown problem"):
        problem_class("lmnn2")


def test_inputs_are_not_modified(data):
    X, y = data[0].copy(), data[1].copy()
    P, lab = _pairs(y, 20, seed=4)
    before = [a.copy() for a in (X, y, P, lab)]
    problems.ITML(X, P, lab).solve()
    for a, b in zip((X, y, P, lab), before):
        assert np.array_equal(a, b)


def test_estimators_share_the_problems_default_algorithm(data):
    from cvxmetric import LMNN

    est = LMNN(n_neighbors=2).fit(*data)
    assert isinstance(est.problem_, problems.LMNN)
    assert est.solver_ == problems.LMNN.methods[0]


def test_orml_components_come_from_the_result_w(solved):
    p, fast, _ = solved["orml"]
    U = p.components(fast).T
    assert np.allclose(U @ U.T, fast.info["A"], rtol=1e-12, atol=1e-12 * np.abs(fast.info["A"]).max())


# ------------------------------------------------------------------ the check command line
@pytest.fixture(scope="module")
def cli_files(tmp_path_factory, solved, data):
    d = tmp_path_factory.mktemp("check")
    p, fast, exact = solved["mmc"]
    P, lab = _pairs(data[1], 40, seed=1)
    np.savez(d / "pairs.npz", X=data[0], pairs=P, labels=lab)
    np.save(d / "M.npy", exact.M)
    np.save(d / "I.npy", np.eye(p.d))
    return d


def test_cli_check_optimal_is_exit_0_with_json(cli_files, capsys):
    code = check(["--problem", "mmc", "--data", str(cli_files / "pairs.npz"), "--matrix",
                 str(cli_files / "M.npy"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "optimal" and out["problem"] == "mmc"


def test_cli_check_suboptimal_is_exit_1(cli_files, capsys):
    code = check(["--problem", "mmc", "--data", str(cli_files / "pairs.npz"), "--matrix",
                 str(cli_files / "I.npy"), "--rtol", "1e-6"])
    assert code == 1 and "suboptimal" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--problem", "mmc", "--data", "missing.npz"], "no such file"),
    (["--problem", "lmnn", "--data", "pairs.npz"], "lacks y"),
    (["--problem", "mmc", "--data", "pairs.npz", "--param", "k=3"], "not a parameter"),
    (["--problem", "mmc", "--data", "pairs.npz", "--param", "X=3"], "not a parameter"),
])
def test_cli_check_unusable_input_is_exit_2(cli_files, capsys, args, message):
    args = [a if not a.endswith(".npz") else str(cli_files / a) for a in args]
    code = check([*args, "--matrix", str(cli_files / "M.npy")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_the_harness_program_starts_the_check_command(cli_files):
    """``python -m cvxmetric.verification check ...`` is the problems' command, through the program."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "cvxmetric.verification", "check", "--problem", "mmc", "--data",
                        str(cli_files / "pairs.npz"), "--matrix", str(cli_files / "I.npy")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "suboptimal" in r.stdout, r.stderr


# ------------------------------------------------------------------ a method added in one place
def test_a_toy_method_is_seen_by_problems_estimators_and_the_harness(monkeypatch, data):
    """A trace-regularized pair hinge, added by its own Problem subclass (the descriptor: its
    algorithm, its run, its formulation), its harness checks (a spec without any solver or
    formulation of its own) and one instance, with no shared file edited."""
    from cvxmetric import instances
    from cvxmetric.constraints import ConstraintSet
    from cvxmetric.estimators._base import MetricLearner
    from cvxmetric.instances import Instance
    from cvxmetric.problems import _base
    from cvxmetric.verification import harness, registry
    from cvxmetric.verification.kkt import hinge_kkt_fast, hinge_kkt_truth
    from cvxmetric.verification.registry import MethodSpec, Thresholds

    registry.list_methods()
    instances.list_instances()
    monkeypatch.setattr(_base, "_REGISTRY", dict(_base._REGISTRY))
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    monkeypatch.setattr(instances, "_REGISTRY", dict(instances._REGISTRY))

    class PairHinge(problems.Problem):
        """Trace-regularized hinge on pairs: similar D_M <= 1, dissimilar D_M >= 2."""

        name = "pairhinge"
        methods = ("pdhg",)
        data_keys = ("X", "pairs", "labels")

        def __init__(self, X, pairs, labels):
            S, D = problems.pairs.pair_split(np.asarray(X, dtype=float), pairs, labels)
            cons = ConstraintSet.from_pairs(S, similar=True, bound=1.0) + \
                ConstraintSet.from_pairs(D, similar=False, bound=2.0)
            super().__init__(Instance("pairhinge", "user", np.asarray(X, dtype=float), cons,
                                      params={"regularizer": "trace", "C_Q": 1.0, "C_P": 1.0, "reg_weight": 1.0}))

        def _run(self, method, tol, max_iter, random_state, options):
            from cvxmetric.solvers import solve_qwise
            return solve_qwise(self.X, self.constraints, method=method, **self.params,
                               **_base.solver_options(tol, max_iter, **options))

        def _build_formulation(self, instance):
            from cvxmetric.formulations.qwise import build_qwise
            return build_qwise(instance.X, instance.constraints, **instance.params)

    registry.register_spec(MethodSpec(
        name="pairhinge", instance_methods=("pairhinge",),
        kkt_truth=hinge_kkt_truth, kkt_fast=lambda form, M: hinge_kkt_fast(form.model, M),
        tolerances={"pdhg": Thresholds(1e-3, None)}))
    X, y = data
    P, lab = _pairs(y, 30, seed=5)

    @instances.register("pairhinge", "iris-pairs")
    def _inst(seed: int = 0):
        return PairHinge(X, P, lab).instance

    class PairHingeLearner(MetricLearner):
        def __init__(self, solver=None, tol=None, max_iter=None, solver_options=None, random_state=None,
                     preprocessor=None):
            self.solver, self.tol, self.max_iter = solver, tol, max_iter
            self.solver_options, self.random_state, self.preprocessor = solver_options, random_state, preprocessor

        def fit(self, X, pairs, labels):
            return self._fit_problem(PairHinge(X, pairs, labels))

    assert problem_class("pairhinge") is PairHinge and "pairhinge" in registry.list_methods()
    est = PairHingeLearner().fit(X, P, lab)
    assert est.solver_ == "pdhg" and est.certificate_.certified
    assert est.verify()["passed"]
    assert est.problem_.check(est.result_.M, rtol=1e-3).verdict == "optimal"
    (row,) = harness.verify_instance("pairhinge", "iris-pairs", cache=harness.ReferenceCache())
    assert row["passed"], row["errors"]
    assert row["solver"] == "pairhinge-pdhg"     # the problem's name and its algorithm's


# ------------------------------------------------------------------ the documentation's example
def test_the_check_your_solver_page_runs():
    """docs/check_your_solver.md: its ```python blocks, in order, in one namespace."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "check_your_solver.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", page, flags=re.S | re.M)
    assert len(blocks) == 3
    namespace = {}
    for block in blocks:
        exec(compile(block, "check_your_solver.md", "exec"), namespace)
    assert namespace["report"].verdict == "optimal"
    assert namespace["itml"].check(namespace["M_itml"], rtol=1e-6).verdict == "optimal"
    verdicts = {name: namespace["mmc"].check(M, rtol=1e-6).verdict for name, M in namespace["candidates"].items()}
    assert verdicts == {"identity": "suboptimal", "perturbed optimum": "suboptimal", "indefinite": "infeasible"}


def test_each_problem_default_is_its_facade_default():
    """One default per method: a Problem's first algorithm is its ``solve_<method>`` facade's default."""
    import inspect

    from cvxmetric import solvers
    from cvxmetric.problems import list_problems, problem_class

    facades = {"lmnn": solvers.solve_lmnn, "qwise": solvers.solve_qwise, "fantope": solvers.solve_fantope,
               "itml": solvers.solve_itml, "mmc": solvers.solve_mmc, "orml": solvers.solve_orml}
    for name in list_problems():
        if name not in facades:   # BoostMetric's default follows its loss (LOSS_METHODS)
            continue
        default = inspect.signature(facades[name]).parameters["method"].default
        assert problem_class(name).methods[0] == default, name
    assert solvers.solve_lmnn.__kwdefaults__["method"] == "pdhg" == solvers.solve_qwise.__kwdefaults__["method"]
