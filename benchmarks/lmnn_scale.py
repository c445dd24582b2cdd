r"""LMNN on tens of thousands of points, certified on the full triplet set, beside pylmnn and metric-learn.

Run from the repository root::

    python -m benchmarks.lmnn_scale                          # 20,000 points, d = 50, both peers (builds their venv)
    python -m benchmarks.lmnn_scale --sizes 5000 20000 --d 50 100
    python -m benchmarks.lmnn_scale --sizes 20000 100000 --d 50 100 --cap 300 --write-docs   # the page's table
    python -m benchmarks.lmnn_scale --sizes 100000 --d 50 100 --peers none   # ours only
    python -m benchmarks.lmnn_scale --peers none             # ours only
    python -m benchmarks.lmnn_scale --write-docs             # and write the output into docs/benchmarks.md

The data: :func:`cvxmetric.generators.gaussian_classes` (10 overlapping Gaussian classes under a
rotated, unevenly scaled noise, seed ``--seed``). The problem: LMNN with ``n_neighbors = 3``,
``regularization = 0.5`` (pull weight), margin 1, over the **full implicit triplet set**
(every :math:`(i, j, l)`, j one of i's 3 targets, l of another class: 1.08e9 triplets at 20,000 points).

* **ours**: :class:`cvxmetric.problems.LMNN` ``(X, y).solve(tol=t, residual_tol=t)`` (its default method,
  constraint generation around PDHG, started from a class-stratified subsample's solution:
  :func:`cvxmetric.solvers.lmnn.coarse_start`); the seconds include everything (target
  neighbours, the coarse levels, every full impostor pass); ``iterations`` are the PDHG
  iterations on the full data, ``certified gap`` the relative gap between the objective over the
  full triplet set and the dual bound of the full problem, ``peak GB`` the peak resident memory of
  the process that ran it (one forked per row).
* **pylmnn** (L-BFGS over :math:`L`, impostors sampled above ``max_impostors``) and
  **metric-learn** 0.7.0 (gradient descent over :math:`L`): both optimize the same objective over
  :math:`L` (non-convex), from the identity, with the same pull weight and margin (pylmnn's
  ``weight_push_loss = 0.5`` is ours up to a factor 2). They run in their own virtual environment
  (``--venv``; made when missing: scikit-learn 1.5.2, metric-learn 0.7.0, pylmnn, six), one
  BLAS thread, the two side by side (each in its own process: their CPU seconds do not depend on
  it), fit capped at ``--cap`` CPU seconds (a capped run is scored at its last accepted
  iterate). A peer is skipped, with its reason printed in its cell, when the row would need more
  memory than ``--peer-gb`` for it (:func:`peer_skip_reason`): metric-learn's impostor search holds a
  dense distance matrix between one class and the classes above it (9 GB with its masks at
  100,000 points in 10 classes). Seconds are CPU seconds of the process beside ours (on a shared machine the wall-clock
  figure adds the waiting for a core; ours is printed both ways). pylmnn 1.6 imports GPyOpt in its
  package ``__init__`` and passes a 2-D ``x0`` to :func:`scipy.optimize.minimize`, which current
  scipy rejects; the benchmark patches the
  installed copy in that environment (the import dropped, ``x0`` flattened). Nothing of either
  peer is kept in this repository.

Every metric is scored by **our** objective over the full triplet set at :math:`M = L^\top L`
(:meth:`cvxmetric.lmnn.ImpostorSearch.objective`), next to our certified lower bound.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks._report import run_main
from cvxmetric.generators import gaussian_classes
from cvxmetric.lmnn import ImpostorSearch

#: The peer environment's packages (metric-learn 0.7.0 needs scikit-learn < 1.6; pylmnn needs ``six``).
PEER_PACKAGES = ("scikit-learn==1.5.2", "metric-learn==0.7.0", "pylmnn==1.6.4", "six")
PEERS = ("pylmnn", "metric-learn")
N_NEIGHBORS = 3
REGULARIZATION = 0.5
N_CLASSES = 10
#: Each peer's fit is stopped after this many CPU seconds of its process (then scored at its last
#: accepted iterate). CPU seconds, not wall-clock: on a shared machine a wall-clock cap would give a
#: peer whatever share of a core the other processes leave it.
CAP_SECONDS = 600.0
#: Iteration limits high enough that the cap, not the limit, stops a long run (pylmnn's default 50
#: L-BFGS iterations would stop it early; metric-learn's default is 1000).
PEER_MAX_ITER = {"pylmnn": 1000, "metric-learn": 1000}
#: Memory a peer's fit may take before the row skips it (GB). The machine (23 GB) is shared with
#: other jobs, and our own row peaks at 3.9 GB (100,000 x 50) to 5.9 GB (100,000 x 100).
PEER_GB = 4.0
#: metric-learn 0.7.0's ``LMNN._find_impostors`` computes, for each class c, the dense squared
#: distances between the points of the classes above c and the points of c (float64, 8 bytes an
#: entry) and compares them with two margin arrays (two boolean masks of the same shape, 1 byte an
#: entry each): 10 bytes an entry at the peak.
METRIC_LEARN_BYTES_PER_DISTANCE = 10

#: The child process: fit one peer with a wall-clock cap, keep its last accepted L.
_PEER_SCRIPT = r"""
import json, signal, sys, time
import numpy as np
args = json.loads(sys.argv[1])
data = np.load(args["data"])
X, y = data["X"], data["y"]
last = {"L": None, "n_iter": 0}

class Capped(Exception):
    pass

def on_alarm(signum, frame):
    raise Capped()

if args["peer"] == "pylmnn":
    from pylmnn import LargeMarginNearestNeighbor
    def keep(transformation, n_iter):
        last["L"], last["n_iter"] = np.array(transformation).reshape(-1, X.shape[1]), n_iter
    est = LargeMarginNearestNeighbor(n_neighbors=args["k"], weight_push_loss=1.0 - args["reg"], init="identity",
                                     max_iter=args["max_iter"], callback=keep, random_state=0)
else:
    import metric_learn
    from metric_learn.lmnn import LMNN
    loss_grad = LMNN._loss_grad
    best = {"objective": np.inf}
    def tracked(self, X_, L, *rest):
        G, objective, active = loss_grad(self, X_, L, *rest)
        if objective <= best["objective"]:   # metric-learn accepts a step only when its objective decreases
            best["objective"] = objective
            last["L"], last["n_iter"] = np.array(L), last["n_iter"] + 1
        return G, objective, active
    LMNN._loss_grad = tracked
    est = LMNN(n_neighbors=args["k"], regularization=args["reg"], init="identity", max_iter=args["max_iter"],
               random_state=0)
signal.signal(signal.SIGPROF, on_alarm)
signal.setitimer(signal.ITIMER_PROF, args["cap"])   # the process's CPU seconds, as the cap counts them
t0, c0 = time.perf_counter(), time.process_time()
capped = False
try:
    est.fit(X, y)
    L = est.components_
except Capped:
    capped, L = True, last["L"]
elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
signal.setitimer(signal.ITIMER_PROF, 0)
np.savez(args["out"], L=np.eye(X.shape[1]) if L is None else L)
print(json.dumps({"time": elapsed, "cpu": cpu, "capped": capped, "n_iter": int(last["n_iter"])}))
"""


def _run(cmd: list) -> None:
    print("$ " + " ".join(str(c) for c in cmd), file=sys.stderr, flush=True)
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)


def patch_pylmnn(python: Path) -> None:
    """Make the installed pylmnn 1.6 import and run on current scipy (its own copy in the peer venv):
    drop the package's GPyOpt import, and flatten the ``x0`` it gives ``scipy.optimize.minimize``."""
    where = subprocess.run([str(python), "-c", "import importlib.util as u; "
                            "print(u.find_spec('pylmnn').submodule_search_locations[0])"],
                           check=True, capture_output=True, text=True).stdout.strip()
    patch_pylmnn_files(Path(where))


#: The text replacements of :func:`patch_pylmnn_files`: file -> (old, new).
PYLMNN_PATCHES = {"__init__.py": ("from .bayesopt import find_hyperparams\n", ""),
                  "lmnn.py": ("'x0': transformation,", "'x0': transformation.ravel(),")}


def patch_pylmnn_files(package: Path) -> None:
    """Apply :data:`PYLMNN_PATCHES` to the pylmnn package folder ``package`` (a file already patched
    is left as it is; a file holding neither text is an error: another pylmnn release)."""
    for name, (old, new) in PYLMNN_PATCHES.items():
        path = package / name
        text = path.read_text()
        if old in text:
            path.write_text(text.replace(old, new))
        elif new and new not in text or not new and "bayesopt" in text:
            raise RuntimeError(f"{path} does not hold {old!r}: not the pylmnn release this benchmark patches "
                               f"({PEER_PACKAGES})")


def ensure_venv(venv: Path) -> Path:
    """The peers' interpreter; the environment is created (and pylmnn patched) when ``venv`` has none."""
    python = venv / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", venv])
        _run([python, "-m", "pip", "install", "-q", *PEER_PACKAGES])
        patch_pylmnn(python)
    return python


def peer_memory_gb(peer: str, y: np.ndarray) -> float:
    """The largest array (GB) ``peer``'s fit holds on labels ``y`` beyond its O(n d) data: metric-learn's
    class-by-class distance block (:data:`METRIC_LEARN_BYTES_PER_DISTANCE`); pylmnn searches impostors
    in blocks of bounded size (0 here)."""
    if peer != "metric-learn":
        return 0.0
    labels, counts = np.unique(y, return_counts=True)
    above = len(y) - np.cumsum(counts)                    # points in the classes after each class
    return float(np.max(counts * above)) * METRIC_LEARN_BYTES_PER_DISTANCE / 1e9


def peer_skip_reason(peer: str, y: np.ndarray, limit_gb: float) -> str | None:
    """Why ``peer`` is not run on labels ``y`` (its memory over ``limit_gb``), or None to run it."""
    need = peer_memory_gb(peer, y)
    if need <= limit_gb:
        return None
    return f"skipped: {need:.1f} GB > {limit_gb:g}"


def run_peer(python: Path, peer: str, X: np.ndarray, y: np.ndarray, cap: float) -> dict:
    """Fit ``peer`` on (X, y) in the peer environment: ``L``, ``time`` (fit seconds), ``capped``, ``n_iter``."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        data, out = os.path.join(tmp, "data.npz"), os.path.join(tmp, "out.npz")
        np.savez(data, X=X, y=y)
        payload = json.dumps({"peer": peer, "data": data, "out": out, "k": N_NEIGHBORS, "reg": REGULARIZATION,
                              "cap": cap, "max_iter": PEER_MAX_ITER[peer]})
        r = subprocess.run([str(python), "-c", _PEER_SCRIPT, payload], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
        result = json.loads(r.stdout.strip().splitlines()[-1])
        with np.load(out) as f:
            result["L"] = np.array(f["L"])
    return result


def run_ours(X: np.ndarray, y: np.ndarray, tol: float) -> dict:
    """Our certified LMNN (the problem's default method), timed end to end; ``peak_gb``: the peak
    resident memory of the process so far (of the run, in the process of its own that
    :func:`run_in_own_process` gives it)."""
    from cvxmetric.problems import LMNN
    t0, c0 = time.perf_counter(), time.process_time()
    res = LMNN(X, y, n_neighbors=N_NEIGHBORS, regularization=REGULARIZATION).solve(tol=tol, residual_tol=tol)
    return {"time": time.perf_counter() - t0, "cpu": time.process_time() - c0, "n_iter": res.n_iter,
            "gap": res.certified_gap,
            "objective": res.objective, "lower": res.lower_bound, "converged": res.converged, "M": res.M,
            "triplets": res.info["n_triplets"], "working_set": res.info["working_set_size"],
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}   # Linux: kilobytes


def _run_ours_one_thread(X: np.ndarray, y: np.ndarray, tol: float) -> dict:
    with threadpool_limits(limits=1, user_api="blas"):
        return run_ours(X, y, tol)


def run_in_own_process(X: np.ndarray, y: np.ndarray, tol: float) -> dict:
    """:func:`run_ours` on one BLAS thread in a process forked for it, so its peak memory is the
    run's (plus what the benchmark's process held at the fork: the interpreter and the data)."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(_run_ours_one_thread, (X, y, tol))


def ours_cells(n: int, d: int, ours: dict) -> str:
    """The row's first columns: the data and our run (``*``: the gap is not within tol)."""
    gap = f"{ours['gap']:.1e}" + ("" if ours["converged"] else "*")
    return (f"{n:>7} {d:>4} {ours['triplets']:>9.2e} | {ours['time']:>7.1f} {ours['cpu']:>6.1f} {ours['n_iter']:>4} "
            f"{gap:>8} {ours['objective']:>11.6g} {ours['lower']:>11.6g} {ours['peak_gb']:>7.2f}")


def peer_cells(run: dict, search: ImpostorSearch) -> str:
    """A peer's columns: its CPU seconds and our objective at its metric (or why it did not run)."""
    if "skipped" in run:
        return f" | {run['skipped']:>32}"
    if "error" in run:
        return f" | {'failed':>20} {run['error'][:11]:>11}"
    with threadpool_limits(limits=1, user_api="blas"):
        value = search.objective(run["L"].T @ run["L"], REGULARIZATION)
    seconds = f"{run['cpu']:.1f}" + (" (capped)" if run["capped"] else "")
    return f" | {seconds:>20} {value:>11.6g}"


def run_or_skip(python: Path, peer: str, X: np.ndarray, y: np.ndarray, args: argparse.Namespace) -> dict:
    """:func:`run_peer`, or ``{"skipped": reason}`` when :func:`peer_skip_reason` gives one."""
    reason = peer_skip_reason(peer, y, args.peer_gb)
    return {"skipped": reason} if reason else run_peer(python, peer, X, y, args.cap)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lmnn_scale", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000], help="numbers of points")
    parser.add_argument("--d", type=int, nargs="+", default=[50], help="dimensions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tol", type=float, default=1e-2, help="our certified relative gap")
    parser.add_argument("--peers", nargs="+", default=list(PEERS), choices=[*PEERS, "none"])
    parser.add_argument("--cap", type=float, default=CAP_SECONDS, help="CPU seconds a peer's fit may take")
    parser.add_argument("--peer-gb", type=float, default=PEER_GB,
                        help="a peer whose fit needs more memory (GB) than this is skipped in that row")
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "venv-lmnn-peers",
                        help="the peers' virtual environment (created when missing)")
    args = parser.parse_args(argv)
    peers = [p for p in args.peers if p != "none"]
    python = ensure_venv(args.venv) if peers else None
    print(f"LMNN, gaussian_classes (10 classes, seed {args.seed}), n_neighbors {N_NEIGHBORS}, regularization "
          f"{REGULARIZATION}, margin 1; ours to a certified gap of {args.tol:g}, peers capped at {args.cap:g} CPU s; "
          "every objective is ours over the full triplet set; one BLAS thread")
    head = (f"{'points':>7} {'d':>4} {'triplets':>9} | {'ours s':>7} {'cpu s':>6} {'it':>4} {'gap':>8} "
            f"{'objective':>11} {'bound':>11} {'peak GB':>7}")
    head += "".join(f" | {p + ' cpu s':>20} {'objective':>11}" for p in peers)
    print(head, flush=True)
    for n in args.sizes:
        for d in args.d:
            X, y = gaussian_classes(n, d, N_CLASSES, seed=args.seed)
            try:
                ours = run_in_own_process(X, y, args.tol)
            except RuntimeError as exc:   # a row that fails says why (the working set's bound); the table goes on
                print(f"{n:>7} {d:>4} | failed: {exc}", flush=True)
                continue
            print(ours_cells(n, d, ours), end="", flush=True)   # the peers' cells follow on the line
            search = ImpostorSearch(X, y, N_NEIGHBORS)
            with ThreadPoolExecutor(max_workers=max(1, len(peers))) as pool:   # each in its own process
                runs = list(pool.map(lambda peer: run_or_skip(python, peer, X, y, args), peers))
            print("".join(peer_cells(r, search) for r in runs), flush=True)
    print("ours: seconds end to end (target neighbours, the coarse start, every full impostor pass) and the process's "
          "CPU seconds (one BLAS thread: the wall-clock figure less the waiting of a shared machine), PDHG iterations "
          "on the full data, certified relative gap (* not within tol), objective and lower bound over the full "
          "triplet set, peak resident memory of the process that ran it (forked for the row: the data and the "
          "interpreter included); a peer's CPU seconds of its fit (one BLAS thread) and our objective at its M = L^T L "
          "(capped: at its last accepted iterate; skipped: the memory its fit would take, over --peer-gb "
          f"{args.peer_gb:g} GB: metric-learn's dense class-by-class distance block)")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main("lmnn_scale", main))
