"""Qwise speed benchmark: the fast full-matrix solver vs Clarabel and SCS on one instance.

Run from the repository root (by hand; not part of the tests)::

    python -m benchmarks.qwise_speed                 # d = 50 with 1,000 and 10,000 quadruplets
    python -m benchmarks.qwise_speed --sizes 1000    # the small one only (about a minute)
    python -m benchmarks.qwise_speed --skip CLARABEL # leave out a cvxpy solver

For each size it prints the time of every solver, the ratio to the fast solver, and the
relative gap each reached against the best objective found (so an inaccurate cvxpy solve is
visible too). SCS runs at its own default accuracy (eps 1e-4), as a user would run it; Clarabel
at the project's ground-truth settings. Expect SCS ~4-5 GB and minutes at 10,000 quadruplets.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from cvxmetric.instances import get_instance
from cvxmetric.linalg import project_psd
from formulations.qwise import build_qwise
from solvers.qwise import solve_qwise

INSTANCES = {1000: "syn-d50-m1000", 10000: "syn-d50-m10000"}
SCS_USER_OPTIONS = {"eps_abs": 1e-4, "eps_rel": 1e-4, "max_iters": 100_000}


def run(size: int, skip: set) -> list[dict]:
    inst = get_instance("qwise", INSTANCES[size])
    rows = []
    t0 = time.perf_counter()
    res = solve_qwise(inst.X, inst.constraints, **inst.params)
    t_fast = time.perf_counter() - t0
    form = build_qwise(inst.X, inst.constraints, **inst.params)
    rows.append({"solver": "fast (qwise-subgradient)", "time": t_fast, "value": form.value_at(res.M),
                 "status": "converged" if res.converged else "max_iter", "n_iter": res.n_iter})
    for solver in ("SCS", "CLARABEL"):
        if solver in skip:
            continue
        opts = SCS_USER_OPTIONS if solver == "SCS" else {}
        form = build_qwise(inst.X, inst.constraints, **inst.params)
        sol = form.solve(solver, **opts)
        value = form.value_at(project_psd(sol.point)) if sol.ok else None
        rows.append({"solver": solver, "time": sol.total_time, "value": value, "status": sol.status,
                     "compile": sol.compile_time})
    best = min(r["value"] for r in rows if r["value"] is not None)
    for r in rows:
        r["gap"] = None if r["value"] is None else (r["value"] - best) / max(1.0, abs(best))
        r["ratio"] = r["time"] / t_fast
    print(f"\nQwise d={inst.d}, {len(inst.constraints)} quadruplets ({inst.description}); best objective {best:.8g}")
    print(f"{'solver':28s} {'time [s]':>10s} {'x fast':>8s} {'rel. gap':>10s}  status")
    for r in rows:
        gap = "-" if r["gap"] is None else f"{r['gap']:.1e}"
        print(f"{r['solver']:28s} {r['time']:10.2f} {r['ratio']:8.1f} {gap:>10s}  {r['status']}")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000], choices=sorted(INSTANCES))
    p.add_argument("--skip", nargs="*", default=[], choices=["SCS", "CLARABEL"])
    args = p.parse_args(argv)
    for size in args.sizes:
        run(size, set(args.skip))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
