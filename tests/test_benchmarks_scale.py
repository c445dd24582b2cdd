"""The scale benchmark's smoke run completes and prints a certified gap beside the floor."""
import re

from benchmarks import scale


def test_quick_run_prints_a_certified_gap(capsys):
    assert scale.main(["--quick", "--time-limit", "120"]) == 0
    out = capsys.readouterr().out
    assert "BLAS thread pools limited to 1 thread" in out
    row = [line for line in out.splitlines() if line.startswith("quick-d10")][-1]
    fields = row.split()
    gap = float(fields[12])
    assert 0.0 <= gap <= scale.QUICK["quick-d10"].certificate_tol
    assert float(fields[8]) > 0.0 and "converged" in row   # floor ms printed, certified
    assert 0.0 < float(fields[10]) <= float(fields[9])     # without the one-time work: no more per iteration
    assert re.search(r"\[points|\[differences", row)


def test_peers_are_skipped_where_they_do_not_fit(capsys):
    r = {"name": "d1000-m1e4", "time": 1.0, "lower": 1.0, "size": scale.SIZES["d1000-m1e4"]}
    scale.print_peers(r, {"SCS": None, "CLARABEL": None})
    out = capsys.readouterr().out
    assert out.count("not run at this size") == 2


def test_targets_are_printed_met_or_not():
    size = scale.SIZES["d50-m1e7"]
    row = {"size": size, "build": 20.0, "t_1e3": 30.0, "peak_gb": 9.0}
    assert scale.targets(row) == "  target: build + s to 1e-3 = 50.0 s <= 60 s; peak 9.00 GB > 8 GB"
    row["t_1e3"] = None   # never certified 1e-3
    assert "= inf s > 60 s" in scale.targets(row)
    assert scale.targets({**row, "size": scale.SIZES["d50-m1e4"]}) == ""
