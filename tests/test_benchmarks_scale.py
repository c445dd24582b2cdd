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
    assert 0.0 <= gap <= scale.QUICK["quick-d10"].tol
    assert float(fields[8]) > 0.0 and "converged" in row   # floor ms printed, certified
    assert 0.0 < float(fields[10]) <= float(fields[9])     # without the one-time work: no more per iteration
    assert re.search(r"\[points|\[differences", row)


def test_peers_are_skipped_where_they_do_not_fit(capsys):
    r = {"name": "d1000-m1e4", "time": 1.0, "lower": 1.0, "size": scale.SIZES["d1000-m1e4"]}
    scale.print_peers(r, {"SCS": None, "CLARABEL": None})
    out = capsys.readouterr().out
    assert out.count("not run at this size") == 2


def test_floor_of_a_lowrank_run_times_the_rayleigh_ritz_step():
    import numpy as np

    from cvxmetric.instances.qwise import synthetic_qwise
    from cvxmetric.models import qwise_model
    from cvxmetric.solvers.pdhg import pdhg

    inst = synthetic_qwise(12, 4, 60, 400, seed=3)
    model = qwise_model(inst.X, inst.constraints, **inst.params)
    res = pdhg(model, projection="lowrank", max_iter=64, warn=False)
    step = (res.info["step_size"], res.info["primal_weight"])
    low = scale.floor(model, res.M, res.multipliers, step, lowrank=1.0)
    dense = scale.floor(model, res.M, res.multipliers, step)
    assert low["Kt"] == 0.0 and low["eig"] > 0.0 and "100% low-rank steps" in low["path_Kt"]
    assert dense["Kt"] > 0.0 and "low-rank" not in dense["path_Kt"]
    assert np.isfinite(low["total"]) and low["rank"] == dense["rank"]


def test_new_sizes_carry_their_targets():
    assert scale.SIZES["d1000-m1e4"].target_s == 20.0
    assert (scale.SIZES["d2000-m1e4"].d, scale.SIZES["d2000-m1e4"].m, scale.SIZES["d2000-m1e4"].target_s) == (2000, 10_000, 60.0)
    big = scale.SIZES["d5000-m1e5"]
    assert (big.d, big.n, big.m, big.target_s, big.target_gb) == (5000, 5000, 100_000, 600.0, 4.0)


def test_the_longest_sizes_run_only_when_named():
    named_only = {"d5000-m1e5", "d50-m1e7"}
    assert not any(scale.SIZES[name].in_default for name in named_only)
    assert all(size.in_default for name, size in scale.SIZES.items() if name not in named_only)


def test_targets_are_printed_met_or_not():
    size = scale.SIZES["d50-m1e7"]
    row = {"size": size, "build": 20.0, "t_1e3": 30.0, "peak_gb": 9.0}
    assert scale.targets(row) == "  target: build + s to 1e-3 = 50.0 s <= 60 s; peak 9.00 GB > 8 GB"
    row["t_1e3"] = None   # never certified 1e-3
    assert "= inf s > 60 s" in scale.targets(row)
    assert scale.targets({**row, "size": scale.SIZES["d50-m1e4"]}) == ""


def test_a_size_carries_its_trace_weight_into_the_model():
    _, plain = scale.build("tiny", scale.Size(12, 60, 300, seed=1))
    _, heavy = scale.build("tiny", scale.Size(12, 60, 300, seed=1, reg_weight=7.0))
    assert heavy.geometry.X.shape == plain.geometry.X.shape
    assert heavy._identity_multiple() == 7.0 * plain._identity_multiple()
    assert all(size.reg_weight == 1.0 for name, size in scale.SIZES.items() if name != "d5000-m1e5")
