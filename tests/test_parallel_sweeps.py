"""The shared parallel map (:mod:`cvxmetric.parallel`) and the benchmarks' ``--jobs``/``--dask``
(:mod:`benchmarks._parallel`): serial, 2 worker processes and a dask LocalCluster give the same
results in the same order.

The benchmark sweep is ``benchmarks.hierarchy`` with 2 seeds (about 1 s per seed): its table has
no timing field, so the printed text itself must be identical.
"""
import argparse
import sys
import time

import pytest

from benchmarks import _parallel, hierarchy
from cvxmetric import parallel

TASKS = [3, 0, 2, 1]


def slow_square(x: int) -> int:
    """A task whose completion order differs from the task order (the first task is the slowest)."""
    time.sleep(0.05 * x)
    return x * x


def fail_on_two(x: int) -> int:
    if x == 2:
        raise RuntimeError("task 2 failed")
    return x


@pytest.fixture(scope="module")
def dask_cluster():
    pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install 'cvxmetric[distributed]')")
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_results_come_in_task_order(n_jobs):
    done = []
    out = parallel.run_tasks(slow_square, TASKS, n_jobs=n_jobs, on_done=lambda k, task: done.append((k, task)))
    assert out == [x * x for x in TASKS]
    assert [k for k, _ in done] == [1, 2, 3, 4] and sorted(t for _, t in done) == sorted(TASKS)


def test_dask_backend_gives_the_same_results(dask_cluster):
    from distributed import Client

    with Client(dask_cluster):
        assert parallel.run_tasks(slow_square, TASKS, n_jobs=-1, backend="dask") == [x * x for x in TASKS]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_failing_task_raises_or_is_replaced(n_jobs):
    with pytest.raises(RuntimeError, match="task 2 failed"):
        parallel.run_tasks(fail_on_two, TASKS, n_jobs=n_jobs)
    out = parallel.run_tasks(fail_on_two, TASKS, n_jobs=n_jobs, on_failure=lambda task, exc: f"failed: {exc}")
    # serially and in parallel alike, only the task that raised is replaced
    assert out == [3, 0, "failed: task 2 failed", 1]


def test_a_backend_that_cannot_start_fails_every_task_not_the_caller():
    """The machinery's own failure (here: an unknown backend) becomes every task's failure."""
    out = parallel.run_tasks(slow_square, TASKS, n_jobs=2, backend="no-such-backend",
                             on_failure=lambda task, exc: "failed")
    assert out == ["failed"] * len(TASKS)
    with pytest.raises(ValueError):
        parallel.run_tasks(slow_square, TASKS, n_jobs=2, backend="no-such-backend")


def printing_square(x: int) -> int:
    print(f"row {x}")
    return slow_square(x)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_map_rows_prints_and_returns_in_row_order(jobs, capsys):
    args = argparse.Namespace(jobs=int(jobs), dask=None)
    assert list(_parallel.map_rows(printing_square, TASKS, args, label=lambda x: f"x={x}")) == [x * x for x in TASKS]
    out = capsys.readouterr()
    assert out.out == "".join(f"row {x}\n" for x in TASKS)
    lines = out.err.splitlines()   # one per finished row, in completion order
    assert [line.split("]")[0] for line in lines] == [f"... [{k}/4" for k in range(1, 5)]
    assert sorted(line.split("] ")[1] for line in lines) == sorted(f"x={x} done" for x in TASKS)


def _hierarchy_output(capsys, *extra) -> str:
    hierarchy.main(["--seeds", "2", *extra])
    out = capsys.readouterr()
    assert out.err.count(" done") == 2   # one progress line per finished seed, on stderr
    return out.out


def test_hierarchy_sweep_is_the_same_with_jobs_2_and_on_dask(capsys, dask_cluster):
    serial = _hierarchy_output(capsys)
    assert "2 seeds" in serial and serial.count("/2") == 4   # four metrics, each converged on 2 seeds
    assert _hierarchy_output(capsys, "--jobs", "2") == serial
    assert _hierarchy_output(capsys, "--dask", dask_cluster.scheduler_address) == serial


def test_benchmark_options_are_the_reports(capsys):
    p = argparse.ArgumentParser()
    _parallel.add_arguments(p, "splits")
    assert vars(p.parse_args(["--jobs", "-1", "--scheduler", "tcp://h:8786"])) == {"jobs": -1, "dask": "tcp://h:8786"}
    with pytest.raises(SystemExit):
        p.parse_args(["--jobs", "0"])
    assert "--jobs must be a positive integer" in capsys.readouterr().err
    assert "absolute times grow" in " ".join(p.format_help().split())


def test_dask_requested_but_not_installed_exits_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)   # import distributed -> ImportError
    args = argparse.Namespace(jobs=None, dask="local")
    with pytest.raises(SystemExit) as exc:
        list(_parallel.map_rows(slow_square, TASKS, args))
    assert exc.value.code == 2 and "pip install" in capsys.readouterr().err


@pytest.mark.parametrize("module, argv", [("hierarchy", ["--seeds", "0"]), ("boostmetric_table1", ["--splits", "-1"]),
                                          ("eigh", ["--fractions", "1.5"]), ("scale", ["--time-limit", "-1"]),
                                          ("working_set", ["--time-limit", "0"]), ("boostmetric_cg", ["--cap", "-1"]),
                                          ("peer_itml", ["--repeats", "0"]),
                                          ("boostmetric_cg", ["--instances", "iris-exp"])])   # not a hinge instance
def test_a_bad_count_or_time_is_a_usage_error(module, argv, capsys):
    """Exit 2 with the argument named (argparse), before any work: not a traceback later."""
    import importlib

    main = importlib.import_module(f"benchmarks.{module}").main
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and argv[0] in capsys.readouterr().err
