"""``--jobs N`` and ``--dask ADDRESS`` for every benchmark that sweeps rows: one helper.

A benchmark lists its rows as tasks (a split, a grid cell, a seed, a size, an instance) and runs
them through :func:`map_rows`, which is :func:`cvxmetric.parallel.imap_tasks` (the parallel map of
the verification report) driven by the options of :func:`add_arguments`:

* the results come back in row order, and whatever a row prints is printed in row order too (in
  parallel it is captured in the worker and replayed), so ``--jobs N`` and ``--dask`` print what
  ``--jobs 1`` prints, except the timings;
* one row — one problem and the peers it is compared with inside that row — runs whole in one
  process, so the ratios within a row (ours vs peer, ours vs floor) still compare like with like;
* each worker pins BLAS to one thread (threadpoolctl), like the serial benchmarks;
* stderr gets one line per finished row (``... [3/10] iris split 4 done``).

Parallel rows share the machine's cores, so absolute times grow with ``--jobs``; compare ratios
measured within one row. A benchmark run as ``python -m benchmarks.<name>`` must hand worker
processes functions they can import: its ``__main__`` block calls ``main`` of the module imported
by name (``importlib.import_module(__spec__.name).main()``), not of the ``__main__`` copy.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import math
import sys
from typing import Any, Callable, Iterable, Iterator

from cvxmetric import parallel
from cvxmetric._checks import argument_type

#: Appended to the help of ``--jobs`` of every benchmark.
TIMING_NOTE = (". Parallel rows share the cores, so absolute times grow with N; the ratios within a row "
               "(ours vs peer, ours vs floor) are measured in one process and still compare")


#: argparse types of counts, seconds and fractions: a clear usage error (exit 2) instead of a
#: traceback later.
positive_int = argument_type(int, lambda v: v >= 1, "a positive integer")
positive_float = argument_type(float, lambda v: 0 < v < math.inf, "a positive number")
fraction = argument_type(float, lambda v: 0 <= v <= 1, "a number in [0, 1]")


def add_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--jobs N`` and ``--dask ADDRESS`` (:func:`cvxmetric.parallel.add_arguments`) for rows named ``what``."""
    parallel.add_arguments(parser, what=what, note=TIMING_NOTE)


def _captured(function: Callable[[Any], Any], task: Any) -> tuple[Any, str]:
    """``function(task)`` and what it printed (in a worker, to be replayed in row order)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = function(task)
    return result, out.getvalue()


def map_rows(function: Callable[[Any], Any], tasks: Iterable[Any], args: argparse.Namespace, *,
             label: Callable[[Any], str] = str, blas_threads: int | None = parallel.BLAS_THREADS) -> Iterator[Any]:
    """``function(task)`` for every row, yielded in row order, serially or as ``args`` ask.

    Parameters
    ----------
    function : callable
        One row: ``function(task) -> result``; a module-level function of an importable module
        (or a :func:`functools.partial` of one) when it runs in workers. What it prints goes to
        stdout in row order.
    tasks : iterable
        The rows' tasks.
    args : argparse.Namespace
        Parsed options of :func:`add_arguments` (``jobs``, ``dask``).
    label : callable
        ``label(task)``: the row's name in the progress lines on stderr.
    blas_threads : int or None
        BLAS threads of each worker (None: leave the thread pools alone).
    """
    tasks = list(tasks)
    with contextlib.ExitStack() as stack:
        try:
            n_jobs, backend = stack.enter_context(parallel.backend_from_args(args))
        except ValueError as exc:   # no dask installed, no scheduler there: a usage error, exit 2
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        on_done = stack.enter_context(parallel.progress(len(tasks), label=label))
        if n_jobs == 1 and backend is None:   # the plain loop: rows print as they run
            yield from parallel.imap_tasks(function, tasks, on_done=on_done)
            return
        for result, printed in parallel.imap_tasks(functools.partial(_captured, function), tasks, n_jobs=n_jobs,
                                                   backend=backend, blas_threads=blas_threads, on_done=on_done):
            sys.stdout.write(printed)
            sys.stdout.flush()
            yield result
