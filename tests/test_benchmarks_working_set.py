"""The working-set benchmark's smoke run completes and certifies both solvers to its tolerance."""
from benchmarks import working_set


def test_quick_run_certifies_both_solvers(capsys):
    assert working_set.main(["--quick", "--time-limit", "3600"]) == 0   # seconds of work: no wall-clock race
    out = capsys.readouterr().out
    assert "BLAS thread pools limited to 1 thread" in out
    for label in ("pdhg ", "working set "):
        row = [line for line in out.splitlines() if line.strip().startswith(label) and " / " not in line][-1]
        assert row.rstrip().endswith("converged")
        gap = float(row.split()[5 if label == "pdhg " else 6])
        assert 0.0 <= gap <= working_set.CERTIFICATE_TOL
    assert "pdhg / working set: time" in out
