"""The harness and its command line (the main job itself runs in tests/test_main_job.py)."""
import json
import math

import numpy as np
import pytest

from cvxmetric.instances import Instance, get_instance
from cvxmetric.verification import registry
from cvxmetric.verification.cli import load_point, main
from cvxmetric.verification.harness import REQUIRED_KEYS, Check, ReferenceCache, score_point, verify_instance
from cvxmetric.problems import Qwise, Run
from cvxmetric.verification.registry import MethodSpec, get_spec, list_methods


@pytest.fixture(scope="module")
def cache():
    return ReferenceCache()


@pytest.fixture(scope="module")
def rows(cache):
    return verify_instance("qwise", "syn-d5", cache=cache) + verify_instance("qwise", "diag-d10", cache=cache)


def test_rows_have_the_stable_keys_and_pass(rows):
    for r in rows:
        assert set(REQUIRED_KEYS) <= set(r)
        assert r["passed"], (r["checks"], r["errors"])
        assert r["truth_rung"] is not None and r["truth_gap"] <= 1e-6
        assert r["p_star_lower"] <= r["p_star_upper"]
        for c in r["checks"].values():
            assert set(c) == {"value", "tol", "passed"}
    json.dumps(rows)  # serialisable


def test_check_semantics():
    assert Check(1e-4, 1e-3).passed
    assert not Check(1e-2, 1e-3).passed
    assert not Check(None, 1.0).passed
    assert not Check(float("nan"), 1.0).passed
    assert not Check(-1.0, 1.0, low=-1e-6).passed


def _truth_point(cache, method="qwise", instance="syn-d5"):
    spec = get_spec(method)
    inst = get_instance(method if method != "qwise" or instance != "diag-d10" else "qwise_vector", instance)
    return cache.get(spec, inst).truth.point


def test_score_point_of_optimum_and_of_a_bad_matrix(cache):
    good = _truth_point(cache)
    ok = score_point("qwise", "syn-d5", good, cache=cache)
    assert ok["passed"] and abs(ok["rel_gap"]) < 1e-6 and ok["kkt"] < 1e-3
    bad = score_point("qwise", "syn-d5", 2 * good, cache=cache)
    assert not bad["passed"] and bad["rel_gap"] > 1e-3
    indefinite = good - 10 * np.eye(good.shape[0])
    r = score_point("qwise", "syn-d5", indefinite, cache=cache)
    assert not r["feasible"] and not r["passed"]


@pytest.mark.parametrize("point, match", [
    (np.ones((3, 3)), "shape"), (np.full((5, 5), np.nan), "NaN"), (np.triu(np.ones((5, 5))), "symmetric"),
])
def test_score_point_bad_input(cache, point, match):
    with pytest.raises(ValueError, match=match):
        score_point("qwise", "syn-d5", point, cache=cache)


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown method"):
        get_spec("nope")
    with pytest.raises(ValueError, match="unknown instance"):
        verify_instance("qwise", "nope")
    assert "qwise" in list_methods()


# ----------------------------------------------------------------------------- never crash
def _toy_instance(seed=0):
    X = np.random.default_rng(seed).standard_normal((6, 2))
    return Instance("qwise", "syn-d5", X, None)


def _broken_spec(**overrides):
    """The spec "broken": Qwise's checks (its instances are Qwise problems), with ``overrides``."""
    base = get_spec("qwise")
    fields = dict(name="broken", instance_methods=("qwise",), kkt_truth=base.kkt_truth, kkt_fast=base.kkt_fast,
                  tolerances=base.tolerances)
    fields.update(overrides)
    return MethodSpec(**fields)


def _boom(*args, **kwargs):
    raise RuntimeError("deliberate failure")


@pytest.mark.parametrize("problem_hook, override, stage", [
    ("_build_formulation", {}, "build"),     # the Problem builds the formulation
    ("_run", {}, "fast_solve"),              # and runs the fast solvers
    (None, {"kkt_fast": _boom}, "kkt_fast"),
    (None, {"kkt_truth": _boom}, "kkt_truth"),
    (None, {"extra_checks": _boom}, "extra_checks"),
])
def test_a_failing_stage_fails_its_row_with_the_reason(monkeypatch, problem_hook, override, stage, capsys):
    if problem_hook is not None:
        monkeypatch.setattr(Qwise, problem_hook, _boom)
    monkeypatch.setitem(registry._SPECS, "broken", _broken_spec(**override))
    rows = verify_instance("broken", "syn-d5", cache=ReferenceCache(), instance_method="qwise")
    assert rows and not any(r["passed"] for r in rows)
    assert any(stage in e and "deliberate failure" in e for r in rows for e in r["errors"])
    assert any(stage in r["checks"] and not r["checks"][stage]["passed"] for r in rows)
    # the command line prints the table and the reason, and exits 1 (not a traceback)
    assert main(["--method", "broken", "--instance", "syn-d5", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "rows passed" in out and "deliberate failure" in out


def test_converged_claim_without_certificate_fails_the_row(monkeypatch):
    """A solver whose result does not carry the contract's measure fails 'result_contract'."""
    from cvxmetric.solvers.result import SolverResult

    def liar(problem, method, tol, max_iter, random_state, options):
        d = problem.d
        return SolverResult("liar", np.zeros((d, d)), None, 0.0, 1, True, np.zeros(1), 0.0)

    monkeypatch.setattr(Qwise, "runs", lambda problem: (Run("liar", "pdhg"),))
    monkeypatch.setattr(Qwise, "_run", liar)
    monkeypatch.setitem(registry._SPECS, "broken", _broken_spec())
    (row,) = verify_instance("broken", "syn-d5", cache=ReferenceCache(), instance_method="qwise")
    assert row["solver"] == "qwise-liar"
    assert not row["passed"]
    assert not row["checks"]["result_contract"]["passed"]
    assert not row["checks"]["rel_gap"]["passed"]           # M = 0 is far from optimal
    assert not row["checks"]["value_at_agreement"]["passed"]  # its objective 0 is not f(0)


def test_rows_are_the_problems_runs_with_their_thresholds():
    """A row per documented run of the instance's Problem, labelled by its name and the run's, held
    to the thresholds of the run's algorithm (or of the variant its label names)."""
    from cvxmetric.problems import problem_of
    from cvxmetric.verification.harness import fast_solvers

    held = get_spec("qwise").tolerances
    rows = fast_solvers(problem_of(get_instance("qwise", "syn-d5")))
    assert [fs.name for fs in rows] == ["qwise-subgradient", "qwise-pdhg", "qwise-pdhg-ws"]
    assert [(fs.gap_tol, fs.kkt_tol) for fs in rows] == [tuple(held[k]) for k in ("subgradient", "pdhg", "pdhg-ws")]
    (vector,) = fast_solvers(problem_of(get_instance("qwise_vector", "diag-d10")))
    assert vector.name == "qwise-vector-newton" and (vector.gap_tol, vector.kkt_tol) == tuple(held["newton"])


# ----------------------------------------------------------------------------- command line
def test_cli_json_one_instance(capsys):
    code = main(["--method", "qwise", "--instance", "relattr-d8", "--json", "--no-progress"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert len(out) == 1 and out[0]["method"] == "qwise" and out[0]["passed"] is True
    assert set(REQUIRED_KEYS) <= set(out[0])


def test_cli_instance_alone_finds_its_method(capsys):
    assert main(["--instance", "relattr-d8", "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["method"] for r in out} == {"qwise"}
    assert main(["--instance", "nope"]) == 2
    assert "no method has an instance named 'nope'" in capsys.readouterr().err


def test_cli_table_and_list(capsys):
    assert main(["--method", "qwise", "--instance", "syn-d5", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "qwise-pdhg" in out and "PASS" in out and "rows passed" in out
    assert main(["--list"]) == 0
    assert "syn-d20" in capsys.readouterr().out


def test_cli_check_matrix(tmp_path, capsys):
    from cvxmetric.verification.harness import _DEFAULT_CACHE

    M = _truth_point(_DEFAULT_CACHE)
    f = tmp_path / "M.npy"
    np.save(f, M)
    assert main(["--method", "qwise", "--instance", "syn-d5", "--check-matrix", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    txt = tmp_path / "M.csv"
    np.savetxt(txt, M, delimiter=",", fmt="%.17g")
    assert main(["--instance", "syn-d5", "--check-matrix", str(txt)]) == 0
    capsys.readouterr()
    np.save(f, 3 * M)
    assert main(["--method", "qwise", "--instance", "syn-d5", "--check-matrix", str(f)]) == 1
    assert "rel_gap" in capsys.readouterr().out


def test_load_point_reads_text_and_npy(tmp_path):
    A = np.arange(9.0).reshape(3, 3)
    np.save(tmp_path / "a.npy", A)
    np.savetxt(tmp_path / "a.txt", A)
    assert np.array_equal(load_point(str(tmp_path / "a.npy")), A)
    assert np.array_equal(load_point(str(tmp_path / "a.txt")), A)


@pytest.mark.parametrize("content, suffix, match", [
    (b"", ".npy", "is empty"),
    (b"1 2\n3 4\n", ".npy", "is not a .npy file"),
    (b"a,b\nc,d\n", ".csv", "not a numeric text matrix"),
    (b"\x93NUMPY\x01\x00garbage", ".npy", "could not be read"),
])
def test_cli_bad_check_matrix_files_exit_2(tmp_path, capsys, content, suffix, match):
    f = tmp_path / f"M{suffix}"
    f.write_bytes(content)
    assert main(["--method", "qwise", "--instance", "syn-d5", "--check-matrix", str(f)]) == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("argv, match", [
    (["--method", "nope"], "unknown method"),
    (["--method", "qwise", "--instance", "nope"], "unknown instance"),
    (["--method", "qwise", "--check-matrix", "x.npy"], "--check-matrix needs"),
    (["--method", "qwise", "--instance", "syn-d5", "--check-matrix", "/no/such/file.npy"], "no such file"),
    (["--seed", "-1"], "--seed must be a non-negative integer"),
    (["--seed", "x"], "--seed must be a non-negative integer"),
])
def test_cli_errors_exit_2(argv, match, capsys):
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_seeded_instances_differ_and_are_reproducible():
    a, b = get_instance("qwise", "syn-d5", seed=0), get_instance("qwise", "syn-d5", seed=1)
    assert a.seed == 0 and b.seed == 1 and not np.array_equal(a.X, b.X)
    assert get_instance("qwise", "syn-d5", seed=1) is b
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        get_instance("qwise", "syn-d5", seed=-1)
    assert math.isfinite(float(b.X.sum()))


def test_a_method_module_that_fails_to_import_fails_its_row(monkeypatch, capsys):
    broken = registry._broken_spec("ghost", "ImportError: no module named 'nowhere'")
    monkeypatch.setitem(registry._SPECS, "ghost", broken)
    assert main(["--method", "ghost", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "failed to import" in out and "no module named 'nowhere'" in out


def test_verify_result_rows_a_given_result_without_solving_again():
    """verify_result scores a result computed elsewhere (e.g. an estimator's) through the report's
    row builder: the row passes for a certified result and fails for a tampered one."""
    import dataclasses

    from cvxmetric.solvers.qwise import solve_qwise
    from cvxmetric.verification.harness import verify_result
    from cvxmetric.verification.tolerances import GAP_FIRST_ORDER, KKT_FAST_FIRST_ORDER

    inst = get_instance("qwise", "syn-d5")
    res = solve_qwise(inst.X, inst.constraints, method="pdhg", **inst.params)
    row = verify_result("qwise", inst, res, solver="given", gap_tol=GAP_FIRST_ORDER, kkt_tol=KKT_FAST_FIRST_ORDER)
    assert set(REQUIRED_KEYS) <= set(row)
    assert row["passed"], row["errors"]
    assert row["solver"] == "given" and row["time_fast"] == pytest.approx(res.time)   # not solved again
    assert row["f_fast"] == pytest.approx(res.objective, rel=1e-9)
    # the same claims about a point twice as large: its value is not the claimed objective, nor optimal
    tampered = dataclasses.replace(res, M=2.0 * res.M)
    bad = verify_result("qwise", inst, tampered, solver="given", gap_tol=GAP_FIRST_ORDER)
    assert not bad["passed"]
    assert not bad["checks"]["value_at_agreement"]["passed"] and not bad["checks"]["rel_gap"]["passed"]
