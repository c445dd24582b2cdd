"""No dependency writes into the project's output: the report's stdout is the table or the JSON."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True)


def test_redirect_discards_what_a_library_writes_to_fd_1():
    r = _python("""
        import os
        from cvxmetric._output import foreign_output_redirected
        print("before", flush=True)
        with foreign_output_redirected():
            os.write(1, b"foreign\\n")
        with foreign_output_redirected(to=2):
            os.write(1, b"to stderr\\n")
        print("after", flush=True)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["before", "after"]
    assert "to stderr" in r.stderr


def test_highs_banner_never_reaches_stdout():
    r = _python("""
        from cvxmetric.solvers.boostmetric_lp import highs_lp
        highs_lp(); highs_lp()
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"


def _report(*args) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "cvxmetric.verification", "--no-progress", "--method", "boostmetric",
            "--instance", "iris-hinge", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)


def test_report_json_parses_with_a_highs_row():
    r = _report("--json")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    assert rows and {row["solver"] for row in rows} == {"boostmetric-hinge-cg"}


def test_report_table_has_no_foreign_lines():
    r = _report()
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    header, rule, *body = lines
    assert header.split()[:2] == ["method", "instance"] and set(rule) <= {"-", " "}
    rows = [line for line in body if line.strip()]
    assert rows[-1].endswith("rows passed all checks")
    assert all(line.startswith("boostmetric ") for line in rows[:-1]), rows
