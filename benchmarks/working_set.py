"""Working-set benchmark: Qwise PDHG on all constraints against PDHG on a working set, in one run.

Run from the repository root (by hand; not part of the tests)::

    python -m benchmarks.working_set                            # d = 50 with 10^4, 3 x 10^4, 10^5 quadruplets
    python -m benchmarks.working_set --sizes d50-m1e6 --time-limit 600
    python -m benchmarks.working_set --quick                    # a small smoke run (seconds)

The instances are those of :mod:`benchmarks.scale` (the harness' synthetic target-metric
quadruplets, 10 % flipped, trace regularizer; ``d50-m1e4`` is the harness instance
``syn-d50-m10000`` on 8,000 points, the larger ones put the quadruplets on 2,000 points), plus
``d50-m3e4`` (30,000 quadruplets on 2,000 points), the size between. Both solvers run to a
certified relative gap of 1e-4 (``tol``, with ``residual_tol`` 1e-4 too); each row
prints the time, the seconds until the best point and bound so far first certified 1e-3 and
1e-4 (PDHG: at a check; working set: at a full pass), the PDHG iterations, and for the working
set its rounds, its largest and last size, and the ratio of the plain solve's times to its own.

BLAS thread pools are pinned to one thread (threadpoolctl). On a shared machine the absolute
times move with the load (printed at the start and the end); the ratios are measured in one run.
"""
from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np

from cvxmetric.certificates import relative_gap
from cvxmetric.solvers.pdhg import pdhg
from cvxmetric.solvers.working_set import ModelPool, solve_working_set

from ._parallel import positive_float
from .scale import QUICK, SIZES, Size, build

#: The sizes of :mod:`benchmarks.scale` with d = 50, and one between 10^4 and 10^5.
WS_SIZES = {"d50-m1e4": SIZES["d50-m1e4"], "d50-m3e4": Size(50, 2000, 30_000, seed=5005),
            "d50-m1e5": SIZES["d50-m1e5"], "d50-m1e6": SIZES["d50-m1e6"]}
DEFAULT_SIZES = ("d50-m1e4", "d50-m3e4", "d50-m1e5")
#: The certified relative gap both solvers are run to (the accuracy of benchmarks.scale's SCS comparison).
CERTIFICATE_TOL = 1e-4
#: Default time limit of each solve, seconds.
TIME_LIMIT = 600.0


def _first_time(rows, levels=(1e-3, 1e-4)) -> dict:
    """Seconds of the first row ``(seconds, best objective, best bound)`` certifying each level."""
    out = dict.fromkeys(levels)
    for sec, f, lb in rows:
        gap = relative_gap(f, lb)
        for level in levels:
            if out[level] is None and gap <= level:
                out[level] = sec
    return out


def run_plain(model, time_limit: float) -> dict:
    t0 = time.perf_counter()
    res = pdhg(model, tol=CERTIFICATE_TOL, residual_tol=CERTIFICATE_TOL, time_limit=time_limit)
    elapsed = time.perf_counter() - t0
    rows, best_f, best_lb = [], math.inf, None
    for it, sec, f_cur, f_avg, lb, *_ in res.info["trace"]:
        best_f = min(best_f, f_cur, f_avg)
        best_lb = lb if lb is not None and (best_lb is None or lb > best_lb) else best_lb
        rows.append((sec, best_f, best_lb))
    return {"time": elapsed, "iters": res.n_iter, "gap": res.certified_gap, "status": res.status,
            "to": _first_time(rows)}


def run_working_set(model, time_limit: float) -> dict:
    t0 = time.perf_counter()
    res = solve_working_set(ModelPool(model), np.zeros((model.d, model.d)), tol=CERTIFICATE_TOL,
                            residual_tol=CERTIFICATE_TOL,
                            time_limit=time_limit)
    elapsed = time.perf_counter() - t0
    rows = [(sec, best_f, lb) for _, sec, _, _, _, best_f, lb, _ in res.info["trace"]]
    return {"time": elapsed, "iters": res.n_iter, "gap": res.certified_gap, "status": res.status,
            "to": _first_time(rows), "rounds": res.info["rounds"], "sizes": res.info["working_set_sizes"]}


def _fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)


def print_rows(name: str, size: Size, plain: dict, ws: dict) -> None:
    print(f"\n{name}: d={size.d}, n={size.n}, m={size.m}")
    print(f"  {'solver':14s} {'time s':>8s} {'to 1e-3':>8s} {'to 1e-4':>8s} {'iters':>6s} {'cert. gap':>9s}  "
          f"{'rounds':>6s} {'max |W|':>8s} {'last |W|':>8s}  status")
    for label, r in (("pdhg", plain), ("working set", ws)):
        extra = (f"{r['rounds']:6d} {max(r['sizes']):8d} {r['sizes'][-1]:8d}" if "rounds" in r
                 else f"{'-':>6s} {'-':>8s} {'-':>8s}")
        print(f"  {label:14s} {r['time']:8.2f} {_fmt(r['to'][1e-3]):>8s} {_fmt(r['to'][1e-4]):>8s} {r['iters']:6d} "
              f"{_fmt(r['gap'], '.1e'):>9s}  {extra}  {r['status']}")
    ratio = {k: (None if plain["to"][k] is None or ws["to"][k] is None else plain["to"][k] / ws["to"][k])
             for k in (1e-3, 1e-4)}
    print(f"  pdhg / working set: time {plain['time'] / ws['time']:.2f}x, to 1e-3 {_fmt(ratio[1e-3])}x, "
          f"to 1e-4 {_fmt(ratio[1e-4])}x", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=list(DEFAULT_SIZES), choices=sorted(WS_SIZES))
    p.add_argument("--quick", action="store_true", help="a small smoke run (seconds); overrides --sizes")
    p.add_argument("--time-limit", type=positive_float, default=TIME_LIMIT, help="time limit of each solve, s")
    args = p.parse_args(argv)
    from threadpoolctl import threadpool_limits

    sizes = dict(QUICK) if args.quick else {k: WS_SIZES[k] for k in args.sizes}
    with threadpool_limits(limits=1, user_api="blas"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        print(f"BLAS thread pools limited to 1 thread; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores at the start")
        for name, size in sizes.items():
            _, model = build(name, size)
            plain = run_plain(model, args.time_limit)
            ws = run_working_set(model, args.time_limit)
            print_rows(name, size, plain, ws)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    from benchmarks._report import run_main

    raise SystemExit(run_main('working_set', main))
