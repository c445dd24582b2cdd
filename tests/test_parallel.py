"""Parallel reports: ``--jobs N`` (joblib, loky processes) and ``--dask ADDRESS`` (futures on a
dask.distributed cluster) give exactly the serial rows, in the serial order.

Only the timing fields may differ. The cases are two cheap qwise instances (a matrix and a vector
model), so every test runs whole cases in other processes within a few seconds.
"""
import functools
import json
import sys
import threading

import pytest
import dask
from distributed import Client, LocalCluster
from threadpoolctl import threadpool_info, threadpool_limits

from cvxmetric import parallel
from cvxmetric.verification import harness
from cvxmetric.verification.cli import main
from cvxmetric.verification.harness import BLAS_THREADS, ReferenceCache, verify_cases

CASES = [("qwise", "qwise", "syn-d5"), ("qwise", "qwise_vector", "diag-d10")]
ARGV = ["--method", "qwise", "--instance", "syn-d5", "--json", "--no-progress"]
#: Prefixes of the fields that measure wall-clock time (``time_truth``, ``speedup_scs``, a truth
#: attempt's ``time``, fantope's ``numbers.time_mm_checks``): they differ between any two runs.
TIMING_PREFIXES = ("time", "speedup")


def _timeless(value):
    """``value`` with every timing field removed, at any depth (rows, checks, truth attempts)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if not k.startswith(TIMING_PREFIXES)}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@pytest.fixture(scope="module")
def serial_rows():
    return verify_cases(CASES, n_jobs=1, cache=ReferenceCache())


def _cli_json(argv, capsys) -> list:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_serial_rows_follow_the_case_order(serial_rows):
    order = [[c[2] for c in CASES].index(r["instance"]) for r in serial_rows]
    assert order == sorted(order) and set(order) == {0, 1}
    assert all(r["passed"] for r in serial_rows)


def test_jobs_2_gives_the_serial_rows_in_the_serial_order(serial_rows):
    done = []
    rows = verify_cases(CASES, n_jobs=2, on_done=lambda k, case: done.append((k, case)))
    assert _timeless(rows) == _timeless(serial_rows)
    assert [k for k, _ in done] == [1, 2]
    assert sorted(case for _, case in done) == sorted(CASES)


def test_cli_jobs_json_equals_the_serial_json(capsys):
    serial = _cli_json(ARGV, capsys)
    parallel = _cli_json(ARGV + ["--jobs", "2"], capsys)
    assert len(parallel) == len(serial) > 0
    assert _timeless(parallel) == _timeless(serial)


def test_dask_local_cluster_gives_the_serial_rows(serial_rows, capsys):
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster):
            rows = verify_cases(CASES, n_jobs=-1, backend="dask")
        # the command line, pointed at the cluster's scheduler as at a real one
        via_cli = _cli_json(ARGV + ["--dask", cluster.scheduler_address], capsys)
    assert _timeless(rows) == _timeless(serial_rows)
    assert _timeless(via_cli) == _timeless([r for r in serial_rows if r["instance"] == "syn-d5"])


def test_a_worker_pins_blas_to_one_thread(monkeypatch):
    seen = []

    def record(case, seed, cache):
        seen.extend(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")
        return []

    monkeypatch.setattr(harness, "_case_rows", record)
    # the shared mechanism's worker wrapper, as verify_cases calls it in a worker
    worker = functools.partial(harness._worker_case_rows, seed=0)
    # under a caller that allows 2 threads (the test session pins 1, which would hide a missing pin)
    with threadpool_limits(limits=2, user_api="blas"):
        assert parallel._pinned(worker, 0, CASES[0], BLAS_THREADS) == (0, [])
    assert BLAS_THREADS != 2 and seen and set(seen) == {BLAS_THREADS}


def test_a_case_that_raises_becomes_a_failed_row():
    (row,) = verify_cases([("no-such-method", None, "x")], n_jobs=1)
    assert not row["passed"] and row["errors"][0].startswith("case: ")


def test_a_failing_worker_fails_the_rows_of_its_cases(monkeypatch):
    def die(case, seed):   # what joblib raises when a worker process dies
        raise RuntimeError("worker died")

    monkeypatch.setattr(harness, "_worker_case_rows", die)
    rows = verify_cases(CASES, n_jobs=2, backend="threading")   # threads see the patched function
    assert [r["instance"] for r in rows] == [c[2] for c in CASES]
    assert all(not r["passed"] and r["errors"] == ["worker: RuntimeError: worker died"] for r in rows)


def test_dask_requested_but_not_installed_exits_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)   # import distributed -> ImportError
    assert main(ARGV + ["--dask", "local"]) == 2
    assert "pip install" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["0", "-2", "two"])
def test_bad_jobs_exit_2(jobs, capsys):
    assert main(ARGV + ["--jobs", jobs]) == 2
    assert "--jobs" in capsys.readouterr().err


def test_scheduler_is_another_name_for_dask():
    from cvxmetric.verification.cli import build_parser

    assert build_parser().parse_args(["--scheduler", "tcp://h:8786"]).dask == "tcp://h:8786"
    assert build_parser().parse_args(["--jobs", "-1"]).jobs == -1


def test_a_backend_that_cannot_start_gives_failed_rows_not_a_traceback():
    rows = verify_cases(CASES, n_jobs=2, backend="no-such-backend")
    assert len(rows) == len(CASES) and not any(r["passed"] for r in rows)
    assert all(r["errors"][0].startswith("worker: ") for r in rows)


#: Seconds the give-up test waits for its run: a run on a fresh 2-worker LocalCluster takes ~1 s
#: (start included); a run that hangs, as one did before tasks were read as futures, never ends.
GIVE_UP_TIMEOUT = 120


def test_a_task_dask_gives_up_on_becomes_a_failure_and_the_run_ends():
    def kill_worker_at_2(task):   # a local function: cloudpickle ships it by value to the workers
        import os

        if task == 2:
            os._exit(1)
        return task * 10

    out = {}

    def run():
        out["results"] = parallel.run_tasks(kill_worker_at_2, range(5), n_jobs=-1, backend="dask",
                                            on_failure=lambda task, exc: ("failed", task, type(exc).__name__))

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster):
            runner = threading.Thread(target=run, daemon=True)
            runner.start()
            runner.join(GIVE_UP_TIMEOUT)
            assert not runner.is_alive(), "the run did not end after dask gave up on a task"
    results = out["results"]
    assert results[2] == ("failed", 2, "KilledWorker")
    # a task queued on the worker that died may be given up on too (allowed-failures 0)
    assert all(r in (k * 10, ("failed", k, "KilledWorker")) for k, r in enumerate(results))


def test_dask_tasks_come_back_in_task_order_with_their_own_failures():
    def odd_fails(task):
        if task % 2:
            raise ValueError(f"task {task}")
        return task

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster):
        results = parallel.run_tasks(odd_fails, range(6), n_jobs=1, backend="dask",
                                     on_failure=lambda task, exc: str(exc))
        assert results == [0, "task 1", 2, "task 3", 4, "task 5"]
        with pytest.raises(ValueError, match="task 1"):
            parallel.run_tasks(odd_fails, range(6), n_jobs=-1, backend="dask")


def test_dask_without_a_client_fails_every_task():
    results = parallel.run_tasks(str, range(3), n_jobs=-1, backend="dask",
                                 on_failure=lambda task, exc: ("failed", task))
    assert results == [("failed", 0), ("failed", 1), ("failed", 2)]


def test_cli_exits_1_with_a_failed_row_when_dask_gives_up_on_a_case(capsys):
    def cases_kill_their_worker():   # run on every worker: a case then kills its worker process
        import os

        from cvxmetric.verification import harness as worker_harness

        def die(case, seed):
            os._exit(1)

        worker_harness._worker_case_rows = die

    out = {}
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.run(cases_kill_their_worker)
            runner = threading.Thread(target=lambda: out.update(code=main(ARGV + ["--dask", cluster.scheduler_address])),
                                      daemon=True)
            runner.start()
            runner.join(GIVE_UP_TIMEOUT)
            assert not runner.is_alive(), "the report did not end after dask gave up on its case"
    assert out["code"] == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert not row["passed"] and row["errors"][0].startswith("worker: KilledWorker")
