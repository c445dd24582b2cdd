"""The harness and its command line."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from verification.cli import main
from verification.harness import REQUIRED_KEYS, Check, ReferenceCache, score_point, verify_instance
from verification.registry import get_spec, list_methods

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cache():
    return ReferenceCache()


@pytest.fixture(scope="module")
def rows(cache):
    return verify_instance("qwise", "syn-d5", cache=cache) + verify_instance("qwise", "diag-d10", cache=cache)


def test_rows_have_the_stable_keys_and_pass(rows):
    for r in rows:
        assert set(REQUIRED_KEYS) <= set(r)
        assert r["passed"], r["checks"]
        for c in r["checks"].values():
            assert set(c) == {"value", "tol", "passed"}
    json.dumps(rows)  # serialisable


def test_check_semantics():
    assert Check(1e-4, 1e-3).passed
    assert not Check(1e-2, 1e-3).passed
    assert not Check(None, 1.0).passed
    assert not Check(float("nan"), 1.0).passed
    assert not Check(-1.0, 1.0, low=-1e-6).passed


def test_score_point_of_optimum_and_of_a_bad_matrix(cache):
    spec = get_spec("qwise")
    good = cache._store[("qwise", "qwise", "syn-d5")][1]["CLARABEL"].point
    ok = score_point("qwise", "syn-d5", good, cache=cache)
    assert ok["passed"] and abs(ok["rel_gap"]) < 1e-6 and ok["kkt"] < 1e-3
    bad = score_point("qwise", "syn-d5", 2 * good, cache=cache)
    assert not bad["passed"] and bad["rel_gap"] > 1e-3
    indefinite = good - 10 * np.eye(good.shape[0])
    r = score_point("qwise", "syn-d5", indefinite, cache=cache)
    assert not r["feasible"] and not r["passed"]
    assert spec.name == "qwise"


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


def test_cli_json_one_instance(capsys):
    code = main(["--method", "qwise", "--instance", "relattr-d8", "--json", "--no-progress"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert len(out) == 1 and out[0]["method"] == "qwise" and out[0]["passed"] is True
    assert set(REQUIRED_KEYS) <= set(out[0])


def test_cli_table_and_list(capsys):
    assert main(["--method", "qwise", "--instance", "syn-d5", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "qwise-subgradient" in out and "PASS" in out and "rows passed" in out
    assert main(["--list"]) == 0
    assert "syn-d20" in capsys.readouterr().out


def test_cli_check_matrix(tmp_path, capsys, cache):
    from verification.harness import _DEFAULT_CACHE

    good = verify_instance("qwise", "syn-d5")  # fills the default cache used by the CLI
    assert good
    M = _DEFAULT_CACHE._store[("qwise", "qwise", "syn-d5")][1]["CLARABEL"].point
    f = tmp_path / "M.npy"
    np.save(f, M)
    assert main(["--method", "qwise", "--instance", "syn-d5", "--check-matrix", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    np.save(f, 3 * M)
    assert main(["--method", "qwise", "--instance", "syn-d5", "--check-matrix", str(f)]) == 1
    assert "rel_gap" in capsys.readouterr().out


@pytest.mark.parametrize("argv, match", [
    (["--method", "nope"], "unknown method"),
    (["--method", "qwise", "--instance", "nope"], "unknown instance"),
    (["--method", "qwise", "--check-matrix", "x.npy"], "--check-matrix needs"),
    (["--method", "qwise", "--instance", "syn-d5", "--check-matrix", "/no/such/file.npy"], "cannot read"),
])
def test_cli_errors_exit_2(argv, match, capsys):
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_module_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "verification", "--method", "qwise", "--instance", "relattr-d8",
                        "--json"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["solver"] == "qwise-vector-newton"
