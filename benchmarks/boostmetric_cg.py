"""BoostMetric hinge: column generation against Clarabel (the ground-truth solve), one run.

Run from the repository root (by hand; not part of the tests)::

    python -m benchmarks.boostmetric_cg                        # defaults + wine-hinge-d200, Clarabel capped at 600 s
    python -m benchmarks.boostmetric_cg --instances iris-hinge circles-hinge --cap 60
    python -m benchmarks.boostmetric_cg --plain                # also the paper's plain rule
    python -m benchmarks.boostmetric_cg --jobs 2               # 2 instances at once (same table)

For each instance it prints the column generation's time (wall and CPU), its LPs (X-side columns
+ dual-slack side), columns, certified relative gap and whether it converged, then Clarabel's
time for the certified ground truth (``cvxmetric.formulations.ladder.solve_certified``: the
cvxpy build, the Clarabel solve and its certificate, exactly what the report's ``time_truth``
measures), or that it did not finish within ``--cap`` seconds (or the ``--mem-gb`` address-space
cap), and the ratio Clarabel / CG of both clocks. Clarabel runs in a worker process (so that it
can be stopped at the cap, and restarted after it); it times itself there, after its imports.
BLAS thread pools are pinned to one thread in both processes (threadpoolctl, and the
OPENBLAS/OMP/MKL variables of the worker).

The machine may be shared: the load of other jobs changes both clocks within seconds. So each
instance runs ``--rounds`` rounds (default 5), each one solve of every CG variant immediately
followed by one Clarabel solve; the times are the best of the rounds, and ``paired`` is the
median over the rounds of the CPU ratio within a round (both sides measured under the same
load). Clarabel's rounds stop at its first failure.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import select
import subprocess
import sys
import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks._parallel import add_arguments, map_rows, positive_float, positive_int
from benchmarks.peer import BLAS_ENV

DEFAULT_INSTANCES = ("iris-hinge", "wine-hinge", "circles-hinge", "wine-hinge-d200")
#: Seconds the worker may spend on its imports on top of the cap (cvxpy, scipy: ~5 s on a loaded machine).
IMPORT_ALLOWANCE = 60.0
#: The ground truth's relative gap (the report's TRUTH_RTOL).
TRUTH_RTOL = 1e-6


def _timed(solve) -> tuple[dict, object]:
    """Wall and CPU seconds of one ``solve()``, and its result."""
    t, c = time.perf_counter(), time.process_time()
    res = solve()
    return {"wall": time.perf_counter() - t, "cpu": time.process_time() - c}, res


def _truth_worker() -> None:
    """Worker process: reads instance names from stdin, one a line, and answers each with one
    JSON line: the time of its certified ground truth (timed after the imports)."""
    with threadpool_limits(1):
        from cvxmetric.formulations.boostmetric import build_boostmetric
        from cvxmetric.formulations.ladder import solve_certified
        from cvxmetric.instances import get_instance

        for line in sys.stdin:
            inst = get_instance("boostmetric", line.strip())
            times, truth = _timed(lambda: solve_certified(build_boostmetric(inst.X, inst.constraints, **inst.params),
                                                          TRUTH_RTOL))
            print(json.dumps({**times, "gap": truth.gap, "certified": truth.certified, "rung": truth.rung}),
                  flush=True)


class _Truth:
    """The Clarabel worker (:func:`_truth_worker`) under an address-space cap, restarted after a
    failure; :meth:`solve` waits at most ``cap`` seconds (plus the imports the first time)."""

    def __init__(self, cap: float, mem_gb: float):
        self.cap, self.mem_gb, self.proc = cap, mem_gb, None

    def _start(self) -> None:
        nbytes = int(self.mem_gb * 2**30)
        self.err = tempfile.TemporaryFile(mode="w+")   # a file, not a pipe: a full pipe would block the worker
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.boostmetric_cg", "--truth-worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.err, text=True, env={**os.environ, **BLAS_ENV},
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes)))
        self.fresh = True

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def solve(self, name: str) -> dict:
        if self.proc is None:
            self._start()
        t = time.perf_counter()
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        deadline = t + self.cap + (IMPORT_ALLOWANCE if self.fresh else 0.0)
        self.fresh = False
        ready = bool(select.select([self.proc.stdout], [], [], max(deadline - time.perf_counter(), 0.0))[0])
        line = self.proc.stdout.readline() if ready else ""
        while line and not line.startswith("{"):   # the answer is the JSON line; skip anything else printed
            line = self.proc.stdout.readline()      # (a late answer is still caught by its wall time below)
        if not line:
            if not ready:
                self.stop()
                return {"finished": False, "why": f"did not finish in {self.cap:.0f} s"}
            self.proc.wait()
            self.err.seek(0)
            err = self.err.read()
            self.proc = None
            tail = (err.strip().splitlines() or ["no output"])[-1][:80]
            memory = "MemoryError" in err or "memory allocation" in err
            why = f"over the {self.mem_gb:g} GB memory cap: {tail}" if memory else tail
            return {"finished": False, "why": f"failed after {time.perf_counter() - t:.0f} s ({why})"}
        res = json.loads(line)
        if res["wall"] > self.cap:
            return {"finished": False, "why": f"did not finish in {self.cap:.0f} s (took {res['wall']:.0f} s)"}
        return {"finished": True, **res}


def _cg_solver(name: str, **kw):
    from cvxmetric.instances import get_instance
    from cvxmetric.solvers.boostmetric_cg import boostmetric_hinge_cg

    inst = get_instance("boostmetric", name)

    def solve():
        return boostmetric_hinge_cg(inst.X, inst.constraints, inst.params["nu"], max_iter=5000, **kw)

    return inst, solve


def _measure(name: str, variants, truth: _Truth, rounds: int) -> tuple[list, dict]:
    """``rounds`` rounds, each one solve of every variant and then one Clarabel solve (paired under
    the same load); Clarabel's rounds stop at its first failure."""
    solvers = [(label, *_cg_solver(name, **kw)) for label, kw in variants]
    runs = {label: [] for label, _ in variants}
    truths = []
    for _ in range(rounds):
        with threadpool_limits(1):
            for label, _inst, solve in solvers:
                runs[label].append(_timed(solve))
        if not truths or truths[-1]["finished"]:
            truths.append(truth.solve(name))
    rows = []
    for label, inst, _ in solvers:
        times = [t for t, _ in runs[label]]
        res = runs[label][-1][1]
        row = {"label": label, "d": inst.X.shape[1], "m": len(inst.constraints),
               "wall": min(t["wall"] for t in times), "cpu": min(t["cpu"] for t in times),
               "lp_columns": res.info["lp_columns"], "lp_slack": res.info["lp_slack"],
               "columns": res.info["n_columns"], "gap": res.certified_gap, "converged": res.converged}
        done = [(t, c) for t, c in zip(times, truths) if c["finished"]]
        row["paired"] = float(np.median([c["cpu"] / t["cpu"] for t, c in done])) if done else None
        rows.append(row)
    ok = [c for c in truths if c["finished"]]
    summary = {"finished": True, "wall": min(c["wall"] for c in ok), "cpu": min(c["cpu"] for c in ok)} if ok \
        else truths[-1]
    return rows, summary


def instance_rows(task) -> None:
    """One row of the sweep: one instance, every CG variant and Clarabel on it, in paired rounds
    (printed); the row has its own Clarabel worker process."""
    name, variants, cap, mem_gb, rounds = task
    truth = _Truth(cap, mem_gb)
    try:
        rows, tr = _measure(name, variants, truth, rounds)
    finally:
        truth.stop()
    for r in rows:
        lps = f"{r['lp_columns']}+{r['lp_slack']}"
        gap = f"{r['gap']:.1e}" + ("" if r["converged"] else "!")
        if tr["finished"]:
            out = (f"{tr['wall']:13.3f} {tr['cpu']:7.3f} | {tr['wall'] / r['wall']:10.2f} "
                   f"{tr['cpu'] / r['cpu']:6.2f} {r['paired']:7.2f}")
        else:
            out = tr["why"]
        print(f"{name:16s} {r['d']:4d} {r['m']:5d} {r['label']:6s} {r['wall']:8.3f} {r['cpu']:7.3f} {lps:>10s} "
              f"{r['columns']:5d} {gap:>9s} | {out}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from cvxmetric.instances import list_instances

    hinge = [name for name in list_instances("boostmetric") if "hinge" in name]   # column generation's loss
    ap.add_argument("--instances", nargs="+", default=list(DEFAULT_INSTANCES), choices=hinge, metavar="NAME",
                    help=f"BoostMetric hinge instances (default: {' '.join(DEFAULT_INSTANCES)}; one of {', '.join(hinge)})")
    ap.add_argument("--cap", type=positive_float, default=600.0, help="Clarabel's wall-clock cap in seconds (default 600)")
    ap.add_argument("--mem-gb", type=positive_float, default=10.0, help="Clarabel's address-space cap in GB (default 10)")
    ap.add_argument("--plain", action="store_true", help="also run the paper's plain rule (1 column, no stabilization)")
    ap.add_argument("--rounds", type=positive_int, default=5,
                    help="rounds per instance, each one solve per side (default 5)")
    ap.add_argument("--truth-worker", action="store_true", help=argparse.SUPPRESS)
    add_arguments(ap, "instances")
    args = ap.parse_args(argv)
    if args.truth_worker:
        _truth_worker()
        return
    variants = [("CG", {})] + ([("plain", {"n_columns": 1, "smoothing": 0.0, "slack": False})] if args.plain else [])
    head = (f"{'instance':16s} {'d':>4s} {'m':>5s} {'solver':6s} {'wall s':>8s} {'cpu s':>7s} {'LPs (X+S)':>10s} "
            f"{'cols':>5s} {'cert. gap':>9s} | {'Clarabel wall':>13s} {'cpu':>7s} | {'ratio wall':>10s} {'cpu':>6s} "
            f"{'paired':>7s}")
    print(head)
    print("-" * len(head))
    tasks = [(name, variants, args.cap, args.mem_gb, args.rounds) for name in args.instances]
    list(map_rows(instance_rows, tasks, args, label=lambda task: task[0]))
    print(f"times: the best of {args.rounds} rounds; ratio = Clarabel / CG (> 1: CG faster); 'paired': the median "
          "over the rounds of the CPU ratio within a round; '!' after a gap: not converged within the default tol 1e-7")


if __name__ == "__main__":
    import importlib

    # main() of the module imported by name (not this __main__ copy): worker processes load its rows by name
    from benchmarks._report import run_main

    raise SystemExit(run_main('boostmetric_cg', importlib.import_module(__spec__.name).main))
