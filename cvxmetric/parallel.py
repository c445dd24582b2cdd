"""Independent tasks in parallel: joblib worker processes, or a dask.distributed cluster.

The one parallel map of the project. The verification report (``python -m cvxmetric.verification
--jobs N``) and the benchmarks (``python -m benchmarks.<name> --jobs N``) both run their rows
through :func:`imap_tasks`:

* ``n_jobs=1`` (and no backend): every task in this process, one after the other, under the
  caller's BLAS thread limits — the plain serial loop;
* otherwise :class:`joblib.Parallel` (``-1``: all cores, or every worker thread of a dask cluster),
  **one whole task per joblib task**: a task is one problem with everything it is compared with,
  and it is never split across processes or machines. Each worker pins BLAS to
  ``blas_threads`` threads (threadpoolctl; default :data:`BLAS_THREADS`): the parallelism is
  across tasks, and multi-threaded BLAS in several workers only oversubscribes the cores;
* ``backend="dask"`` submits the tasks to the current ``distributed.Client`` directly
  (``client.submit`` and ``as_completed``; :func:`dask_client` opens one for ``--dask ADDRESS`` or
  ``--dask local``). Not through joblib's Dask backend (joblib 1.6): a task the scheduler gives
  up on (a ``KilledWorker`` after its workers died ``distributed.scheduler.allowed-failures``
  times) never comes out of its ``generator_unordered`` results, so a run would wait forever.
  Each future's own outcome (result or exception, ``KilledWorker`` included) is read here, so
  every task ends as a result or as ``on_failure``.

The results come back **in task order** whatever the order of completion, so a parallel run
prints exactly what the serial run prints (only timings differ).

Command lines get the same two options everywhere from :func:`add_arguments` (``--jobs N``,
``--dask ADDRESS``) and turn them into a backend with :func:`backend_from_args`.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
from typing import Any, Callable, Iterable, Iterator, Optional

__all__ = ["BLAS_THREADS", "imap_tasks", "run_tasks", "dask_client", "progress", "add_arguments",
           "backend_from_args", "jobs_argument"]

#: BLAS threads of every worker. Parallel tasks already fill the cores; multi-threaded BLAS on
#: top spins (measured 10-30x slower per call on a loaded 2-core machine for d <= 64 products).
BLAS_THREADS = 1

Task = Any


class _Raised:
    """A task's exception, carried back from a worker as its result (so that one task that raises
    fails that task alone, as in the serial loop, not every task still pending)."""

    def __init__(self, exc: BaseException):
        self.exc = exc


def _pinned(function: Callable[[Task], Any], k: int, task: Task, blas_threads: Optional[int],
            catch: bool = False) -> tuple[int, Any]:
    """``(k, function(task))`` in a worker, BLAS pinned to ``blas_threads`` (None: left alone);
    ``catch``: an exception of the task is returned as :class:`_Raised`."""
    try:
        if blas_threads is None:
            return k, function(task)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=blas_threads, user_api="blas"):
            return k, function(task)
    except Exception as exc:   # noqa: BLE001 - the parent's on_failure decides
        if not catch:
            raise
        return k, _Raised(exc)


def imap_tasks(function: Callable[[Task], Any], tasks: Iterable[Task], *, n_jobs: int = 1,
               backend: Optional[str] = None, blas_threads: Optional[int] = BLAS_THREADS,
               on_done: Optional[Callable[[int, Task], None]] = None,
               on_failure: Optional[Callable[[Task, BaseException], Any]] = None) -> Iterator[Any]:
    """``function(task)`` for every task, yielded in task order.

    Parameters
    ----------
    function : callable
        ``function(task) -> result``. For worker processes it must be importable by name (a
        module-level function, or a :func:`functools.partial` of one), and ``task`` and the result
        must pickle.
    tasks : iterable
        The independent tasks; each runs whole in one process.
    n_jobs : int
        1 (and no ``backend``): serially in this process. Otherwise the number of tasks run at
        once by :class:`joblib.Parallel` (``-1``: all cores), or in flight on a dask cluster
        (``-1``: all of them; the scheduler runs as many as the cluster has worker threads).
    backend : str, optional
        A joblib backend name; default the active one (loky unless inside
        ``joblib.parallel_config``). ``"dask"`` submits the tasks to the current
        ``distributed.Client`` as futures; a task the scheduler gives up on (``KilledWorker``)
        is ``on_failure`` of that task.
    blas_threads : int or None
        BLAS threads of each worker (threadpoolctl); None leaves the workers' thread pools alone.
        The serial path runs under the caller's own limits. A limit is per process: with joblib's
        "threading" backend the tasks share the caller's BLAS pool (measured with this OpenBLAS:
        a task thread still reported the caller's 2 threads), so pinned timings need a process
        backend (loky, or dask's worker processes).
    on_done : callable, optional
        ``on_done(k, task)`` after each finished task, ``k`` the number finished so far (in
        completion order, which in parallel differs from the task order).
    on_failure : callable, optional
        ``on_failure(task, exc)`` is the result of a task that raised (that task alone, serially
        and in parallel alike), and, when the parallel machinery itself fails (a worker process
        dies, the cluster is lost, the backend cannot start), of every task without a result yet.
        Default: the exception propagates.

    Yields
    ------
    object
        The result of each task, in task order, each as soon as it and every earlier one are done.
    """
    tasks = list(tasks)
    if n_jobs == 1 and backend is None:
        for k, task in enumerate(tasks):
            try:
                result = function(task)
            except Exception as exc:   # noqa: BLE001 - the caller's on_failure decides
                if on_failure is None:
                    raise
                result = on_failure(task, exc)
            if on_done is not None:
                on_done(k + 1, task)
            yield result
        return
    if backend == "dask":
        yield from _on_dask(function, tasks, n_jobs, blas_threads, on_done, on_failure)
        return
    yield from _parallel(function, tasks, n_jobs, backend, blas_threads, on_done, on_failure)


def _parallel(function, tasks, n_jobs, backend, blas_threads, on_done, on_failure) -> Iterator[Any]:
    """:func:`imap_tasks` through :class:`joblib.Parallel`, in task order."""
    yield from _in_task_order(_joblib_outcomes(function, tasks, n_jobs, backend, blas_threads, on_done, on_failure),
                              tasks, on_failure)


def _joblib_outcomes(function, tasks, n_jobs, backend, blas_threads, on_done, on_failure) -> Iterator[tuple[int, Any]]:
    """``(k, result)`` of every task in completion order, from :class:`joblib.Parallel`."""
    from joblib import Parallel, delayed, parallel_config

    # parallel_config (not Parallel(backend=...)) resolves lazily registered backends;
    # batch_size=1: a task is seconds to minutes of work, so one per joblib task balances best
    catch = on_failure is not None
    config = parallel_config(backend=backend) if backend is not None else contextlib.nullcontext()
    with config:
        parallel = Parallel(n_jobs=n_jobs, batch_size=1, return_as="generator_unordered")
        jobs = (delayed(_pinned)(function, k, task, blas_threads, catch) for k, task in enumerate(tasks))
        for done, (k, result) in enumerate(parallel(jobs), start=1):
            yield k, (on_failure(tasks[k], result.exc) if isinstance(result, _Raised) else result)
            if on_done is not None:
                on_done(done, tasks[k])


def _in_task_order(outcomes: Iterator[tuple[int, Any]], tasks: list, on_failure) -> Iterator[Any]:
    """Yield the results of ``(k, result)`` pairs (any order) in task order.

    A result that is :class:`_Raised` is raised in its turn (the serial loop's order: the results
    of the earlier tasks first). When the machinery itself fails (an exception out of
    ``outcomes``) and ``on_failure`` is given, every task without a result yet gets
    ``on_failure(task, exc)``; otherwise it propagates.
    """
    results: dict[int, Any] = {}
    nxt = 0   # the next task to yield
    try:
        for k, result in outcomes:
            results[k] = result
            while nxt in results:
                result = results.pop(nxt)
                if isinstance(result, _Raised):
                    raise result.exc
                yield result
                nxt += 1
    except Exception as exc:   # noqa: BLE001 - a dead worker, a lost cluster, a backend that cannot start
        if on_failure is None:
            raise
        for k in range(nxt, len(tasks)):
            yield results.pop(k) if k in results else on_failure(tasks[k], exc)


def _on_dask(function, tasks, n_jobs, blas_threads, on_done, on_failure) -> Iterator[Any]:
    """:func:`imap_tasks` on the current ``distributed.Client``, in task order."""
    yield from _in_task_order(_dask_outcomes(function, tasks, n_jobs, blas_threads, on_done, on_failure),
                              tasks, on_failure)


def _dask_outcomes(function, tasks, n_jobs, blas_threads, on_done, on_failure) -> Iterator[tuple[int, Any]]:
    """``(k, result)`` of every task in completion order, at most ``n_jobs`` in flight (-1: all).

    A task's exception (raised by it, or ``KilledWorker`` / a cancellation from the scheduler)
    is ``on_failure(task, exc)`` for that task alone; without ``on_failure`` it comes back as
    :class:`_Raised`, to be raised in task order.
    """
    from distributed import as_completed, get_client

    client = get_client()   # ValueError without a client: a machinery failure of every task
    catch = on_failure is not None
    queue = iter(enumerate(tasks))
    keys: dict[Any, int] = {}

    def submit(k: int, task: Task):
        future = client.submit(_pinned, function, k, task, blas_threads, catch, pure=False)
        keys[future] = k
        return future

    limit = len(tasks) if n_jobs is None or n_jobs < 1 else n_jobs
    running = as_completed([submit(k, task) for k, task in itertools.islice(queue, limit)])
    for done, future in enumerate(running, start=1):
        k = keys.pop(future)
        yield k, _dask_result(future, tasks[k], on_failure)
        future.release()
        if on_done is not None:
            on_done(done, tasks[k])
        for k_next, task in itertools.islice(queue, 1):
            running.add(submit(k_next, task))


def _dask_result(future, task: Task, on_failure) -> Any:
    """The result of one finished future: the task's value, or ``on_failure`` of its exception
    (:class:`_Raised` without ``on_failure``)."""
    try:
        _, result = future.result()
    except Exception as exc:   # noqa: BLE001 - KilledWorker, a cancellation, the task's own exception
        result = _Raised(exc)
    return on_failure(task, result.exc) if isinstance(result, _Raised) and on_failure is not None else result


def run_tasks(function: Callable[[Task], Any], tasks: Iterable[Task], **kw) -> list:
    """The list of :func:`imap_tasks` (every result, in task order)."""
    return list(imap_tasks(function, tasks, **kw))


# ------------------------------------------------------------------------------ dask.distributed
@contextlib.contextmanager
def dask_client(address: str, n_jobs: Optional[int] = None):
    """A ``distributed.Client`` for ``--dask ADDRESS``, closed on exit.

    ``address`` is a scheduler address (``tcp://host:8786``) or ``"local"``: a LocalCluster of this
    machine with one single-threaded worker process per task slot (``n_jobs`` workers, or one per
    core) — a task pins BLAS to one thread and holds the GIL in python loops.

    Raises
    ------
    ValueError
        When dask.distributed is not installed (the message says what to install) or the scheduler
        cannot be reached (after a 20 s timeout).
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ValueError("--dask needs dask.distributed, which is not installed; "
                         "install it with: pip install 'cvxmetric[distributed]' (or 'dask[distributed]')") from None
    with contextlib.ExitStack() as stack:
        try:
            if address == "local":
                n_workers = (os.cpu_count() or 1) if n_jobs in (None, -1) else n_jobs
                cluster = stack.enter_context(LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                                           processes=True, dashboard_address=None))
                address = cluster.scheduler_address
            client = stack.enter_context(Client(address, timeout="20s"))
        except (OSError, TimeoutError, ValueError, RuntimeError) as exc:
            raise ValueError(f"--dask {address!r}: cannot start or connect to a dask scheduler ({exc}); start one with "
                             f"'dask scheduler' and pass its tcp://host:8786 address, or use --dask local") from None
        yield client


# ----------------------------------------------------------------------------------- progress
@contextlib.contextmanager
def progress(total: int, *, label: Callable[[Task], str], bar: bool = False, lines: bool = True,
             desc: str = "running", unit: str = "task"):
    """An ``on_done(k, task)`` callback for :func:`imap_tasks`, as a context manager.

    ``bar``: a tqdm bar on stderr (for a terminal); else ``lines``: one stderr line per finished
    task, ``... [k/total] <label(task)> done``; else nothing (yields None).
    """
    if bar:
        from tqdm import tqdm

        with tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False) as t:
            def on_done(k, task):
                t.set_postfix_str(label(task), refresh=False)
                t.update(1)
            yield on_done
    elif lines:
        yield lambda k, task: print(f"... [{k}/{total}] {label(task)} done", file=sys.stderr, flush=True)
    else:
        yield None


# -------------------------------------------------------------------------------- command line
def jobs_argument(text: str) -> int:
    """``--jobs``: a positive integer, or -1 (all cores)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError(f"--jobs must be a positive integer or -1 (all cores); got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser, *, what: str = "rows", note: str = "") -> None:
    """Add ``--jobs N`` and ``--dask ADDRESS`` (alias ``--scheduler``) to a command line.

    ``what`` names the unit of work in the help text (``"cases (method x instance)"``,
    ``"splits"``, ...); ``note`` is appended to the help of ``--jobs``.
    """
    parser.add_argument("--jobs", type=jobs_argument, default=None, metavar="N",
                        help=f"run N {what} at once in worker processes, -1: all cores (default 1; with "
                             f"--dask, all threads of the cluster). The output (rows, their order, the JSON) is "
                             f"that of --jobs 1; one problem always stays in one process" + note)
    parser.add_argument("--dask", "--scheduler", dest="dask", metavar="ADDRESS",
                        help=f"run the {what} on a dask.distributed cluster (one future per task): a "
                             "scheduler address (tcp://host:8786), or 'local' for a LocalCluster of this machine "
                             "(needs the 'distributed' extra: pip install 'cvxmetric[distributed]')")


@contextlib.contextmanager
def backend_from_args(args: argparse.Namespace):
    """``(n_jobs, backend)`` for :func:`imap_tasks` from :func:`add_arguments`' options.

    Without ``--dask``: ``(args.jobs or 1, None)``. With ``--dask``: a client is opened for the
    duration (:func:`dask_client`; a ``ValueError`` when it cannot be) and the tasks go to it,
    ``n_jobs`` defaulting to every worker thread of the cluster.
    """
    if not getattr(args, "dask", None):
        yield (args.jobs or 1), None
        return
    with dask_client(args.dask, args.jobs):
        yield (args.jobs or -1), "dask"
