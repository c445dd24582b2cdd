"""Qwise speed benchmark: the fast full-matrix solvers (subgradient, PDHG) vs Clarabel and SCS.

Run from the repository root (by hand; not part of the tests)::

    python -m benchmarks.qwise_speed                 # d = 50 with 1,000 and 10,000 quadruplets
    python -m benchmarks.qwise_speed --sizes 1000    # the small one only (about a minute)
    python -m benchmarks.qwise_speed --skip CLARABEL # leave out a solver (also: subgradient, pdhg)
    python -m benchmarks.qwise_speed --blas-threads 0  # leave the BLAS thread pools alone
    python -m benchmarks.qwise_speed --jobs 2        # both sizes at once (each size whole in one process)

For each size it prints the time of every solver, its ratio to each fast solver's time, and the
relative gap each reached against the best objective found (so an inaccurate cvxpy solve is
visible too), plus PDHG's certified lower bound and the gap of every solver to it (a gap that
needs no cvxpy solve at all). BLAS thread pools are limited to ``--blas-threads`` (default 1)
for every solver alike: on a shared machine, multi-threaded BLAS on d = 50 matrices
oversubscribes the cores and slows small products ten-fold. SCS runs at its own default accuracy (eps 1e-4), as a user would run it; Clarabel
at the project's ground-truth settings. Expect SCS ~4-5 GB and minutes at 10,000 quadruplets.
"""
from __future__ import annotations

import argparse
import functools
import time

from cvxmetric.certificates import relative_difference, relative_gap
from cvxmetric.instances import get_instance
from cvxmetric.formulations.qwise import build_qwise
from cvxmetric.solvers.qwise import solve_qwise

from ._parallel import add_arguments, map_rows

FAST = ("subgradient", "pdhg")
INSTANCES = {1000: "syn-d50-m1000", 10000: "syn-d50-m10000"}
SCS_USER_OPTIONS = {"eps_abs": 1e-4, "eps_rel": 1e-4, "max_iters": 100_000}


def run(size: int, skip: set) -> list[dict]:
    inst = get_instance("qwise", INSTANCES[size])
    rows = []
    lower = None
    form = build_qwise(inst.X, inst.constraints, **inst.params)
    for method in FAST:
        if method in skip:
            continue
        t0 = time.perf_counter()
        res = solve_qwise(inst.X, inst.constraints, method=method, **inst.params)
        elapsed = time.perf_counter() - t0
        rows.append({"solver": f"fast ({res.solver})", "time": elapsed, "value": form.value_at(res.M),
                     "status": res.status, "n_iter": res.n_iter})
        if res.lower_bound is not None and (lower is None or res.lower_bound > lower):
            lower = res.lower_bound
    for solver in ("SCS", "CLARABEL"):
        if solver in skip:
            continue
        opts = SCS_USER_OPTIONS if solver == "SCS" else {}
        form = build_qwise(inst.X, inst.constraints, **inst.params)
        sol = form.solve(solver, **opts)
        value = form.value_at(form.feasible_point(sol.point)) if sol.point is not None else None
        rows.append({"solver": solver, "time": sol.total_time, "value": value, "status": sol.status,
                     "compile": sol.compile_time})
    best = min(r["value"] for r in rows if r["value"] is not None)
    fast_times = {r["solver"]: r["time"] for r in rows if r["solver"].startswith("fast")}
    for r in rows:
        r["gap"] = None if r["value"] is None else relative_difference(r["value"], best)
        r["gap_certified"] = None if r["value"] is None or lower is None else relative_gap(r["value"], lower)
        r["ratios"] = {name: r["time"] / t for name, t in fast_times.items()}
    print(f"\nQwise d={inst.d}, {len(inst.constraints)} quadruplets ({inst.description}); best objective {best:.8g}"
          + ("" if lower is None else f"; PDHG certified lower bound {lower:.8g}"))
    ratio_heads = "".join(f" {'x ' + name[6:-1]:>20s}" for name in fast_times)
    print(f"{'solver':28s} {'time [s]':>10s}{ratio_heads} {'rel. gap':>10s} {'cert. gap':>10s}  status")
    for r in rows:
        gap = "-" if r["gap"] is None else f"{r['gap']:.1e}"
        cgap = "-" if r["gap_certified"] is None else f"{r['gap_certified']:.1e}"
        ratios = "".join(f" {r['ratios'][name]:20.1f}" for name in fast_times)
        print(f"{r['solver']:28s} {r['time']:10.2f}{ratios} {gap:>10s} {cgap:>10s}  {r['status']}", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000], choices=sorted(INSTANCES))
    p.add_argument("--skip", nargs="*", default=[], choices=["SCS", "CLARABEL", *FAST])
    p.add_argument("--blas-threads", type=int, default=1,
                   help="BLAS threads for every solver (0: leave the thread pools alone)")
    add_arguments(p, "sizes")
    args = p.parse_args(argv)
    limit = None
    if args.blas_threads > 0:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn

        limit = threadpool_limits(limits=args.blas_threads, user_api="blas")
        print(f"BLAS thread pools limited to {args.blas_threads} thread(s)")
    try:
        # one size, with every solver compared at it, per row
        list(map_rows(functools.partial(run, skip=set(args.skip)), args.sizes, args,
                      label=lambda size: f"{size} quadruplets", blas_threads=args.blas_threads or None))
    finally:
        if limit is not None:
            limit.restore_original_limits()
    return 0


if __name__ == "__main__":
    import importlib

    # main() of the module imported by name (not this __main__ copy): worker processes load its rows by name
    from benchmarks._report import run_main

    raise SystemExit(run_main('qwise_speed', importlib.import_module(__spec__.name).main))
