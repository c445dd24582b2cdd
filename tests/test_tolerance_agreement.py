"""One place for each solver's thresholds: the harness' method module (``TOLERANCES``). The report's
rows and an estimator's ``verify()`` read the same numbers, so they cannot drift."""
import numpy as np
import pytest

from cvxmetric.problems import list_problems, problem_class, problem_of
from cvxmetric.instances import get_instance
from cvxmetric.verification import harness
from cvxmetric.verification.harness import default_cases
from cvxmetric.verification.registry import get_spec, list_methods, spec_of_problem

#: Report row -> the facade ``method=`` it runs (rows that run a variant of a solver with its
#: thresholds). ``qwise-pdhg-ws`` (PDHG on a working set) checks PDHG's gap but reports its KKT
#: residual (registry comment there); the vector model's Newton row has no estimator solver.
ROW_SOLVER = {"qwise-subgradient": "subgradient", "qwise-pdhg": "pdhg", "lmnn-search": "subgradient",
              "lmnn-materialised": "subgradient", "lmnn-pdhg": "pdhg", "itml-bregman": "bregman",
              "mmc-ascent": "ascent", "mmc-ascent-raw": "ascent", "mmc-diagonal-ascent": "ascent",
              "orml-pursuit": "pursuit",
              "boostmetric-hinge-cg": "column_generation", "boostmetric-exp-tc": "totally_corrective",
              "boostmetric-logistic-tc": "totally_corrective", "boostmetric-exp-stagewise": "stagewise",
              "boostmetric-logistic-stagewise": "stagewise", "boostmetric-exp-fista": "projected_gradient",
              "boostmetric-logistic-fista": "projected_gradient", "qwise-pdhg-ws": "pdhg-ws"}
NOT_AN_ESTIMATOR_SOLVER = {"qwise-vector-newton", "fantope-bound-subgradient", "fantope-bound-pdhg"}


@pytest.mark.parametrize("method", list_methods())
def test_every_estimator_solver_has_the_harness_thresholds(method):
    """A spec's thresholds are those of its problems' algorithms and of their variant results, nothing else."""
    held = set(get_spec(method).tolerances)
    classes = [problem_class(p) for p in list_problems() if spec_of_problem(p).name == method]
    assert classes, method
    algorithms = set().union(*(cls.methods for cls in classes))
    assert algorithms <= held
    # any other entry is the thresholds of a variant result that a problem's algorithm returns
    assert held - algorithms == set().union(*(cls.result_variants.values() for cls in classes))


def _report_rows():
    """(method, row name, FastSolver) of every fast-solver row of the default report."""
    seen = {}
    for method, im, name in default_cases():
        for fs in harness.fast_solvers(problem_of(get_instance(im, name))):
            seen.setdefault(fs.name, (method, fs))
    return seen


def test_report_rows_use_the_thresholds_of_their_solver():
    rows = _report_rows()
    assert set(rows) == set(ROW_SOLVER) | NOT_AN_ESTIMATOR_SOLVER   # a new row must be listed above
    for row, solver in ROW_SOLVER.items():
        method, fs = rows[row]
        assert (fs.gap_tol, fs.kkt_tol) == tuple(get_spec(method).tolerances[solver]), row


@pytest.mark.parametrize("solver", ["pdhg", "subgradient"])
def test_estimator_verify_reads_the_harness_thresholds(solver, monkeypatch):
    from cvxmetric import LMNN

    seen = {}
    monkeypatch.setattr(harness, "verify_result", lambda *a, **kw: seen.update(kw) or {"passed": True})
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((24, 3)), np.repeat([0, 1, 2], 8)
    est = LMNN(n_neighbors=2, solver=solver).fit(X, y)
    held = get_spec("lmnn").tolerances
    est.verify()
    assert (seen["gap_tol"], seen["kkt_tol"]) == tuple(held[solver])
    # one place: a changed threshold there is what verify() applies
    monkeypatch.setitem(held, solver, type(held[solver])(0.123, 0.456))
    est.verify()
    assert (seen["gap_tol"], seen["kkt_tol"]) == (0.123, 0.456)


def test_verify_holds_a_working_set_result_to_its_own_row(monkeypatch):
    """Qwise(solver="pdhg", solver_options={"working_set": True}) runs PDHG on a working set; verify()
    then applies the qwise-pdhg-ws row's thresholds (gap checked, KKT reported), not plain PDHG's."""
    import dataclasses

    from cvxmetric import Qwise_Supervised

    seen = {}
    monkeypatch.setattr(harness, "verify_result", lambda *a, **kw: seen.update(kw) or {"passed": True})
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((30, 3)), np.repeat([0, 1, 2], 10)
    est = Qwise_Supervised(n_constraints=40, random_state=0, solver="pdhg").fit(X, y)
    held = get_spec("qwise").tolerances
    est.verify()
    assert (seen["gap_tol"], seen["kkt_tol"]) == tuple(held["pdhg"])
    est.result_ = dataclasses.replace(est.result_, solver="qwise-pdhg-ws")
    est.verify()
    assert (seen["gap_tol"], seen["kkt_tol"]) == tuple(held["pdhg-ws"])
