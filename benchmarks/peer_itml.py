r"""Head-to-head: cvxmetric's ITML (Bregman, random order) vs metric-learn 0.7.0's ITML.

Run from the repository root (metric-learn lives in its own venv, see ``benchmarks/peer.py``)::

    python -m benchmarks.peer_itml [--repeats 3] [--quick] [--jobs 3]

Both fit the *same* problem: the same similar/dissimilar pairs (drawn from the training labels
of a fixed, seeded 70/30 split), the same bounds (our default: 5th/95th percentiles of the
pairs' **squared** lengths, passed to metric-learn explicitly because its default uses
unsquared distances of all pairs of constrained points -- a different, mis-scaled problem), the
same gamma and the identity prior. The objectives therefore coincide, and each M is scored
with *our* ``value_at`` (the cvxpy expression) against Clarabel's optimum. metric-learn visits
the pairs in a fixed order (similar first) and stops when the relative l1 change of its
multipliers is below ``tol`` (default 1e-3); we also run it at ``tol=1e-5`` to compare at a
similar accuracy
(not on the 2,000-pair case, where that takes too long). Reported per data set: fit times and their ratio, sweeps, objective and
relative gap, and the 3-NN test error of each metric next to Euclidean.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from benchmarks._parallel import add_arguments, map_rows, positive_int
from benchmarks.peer import peer_available, run_peer
from cvxmetric.certificates import relative_difference
from cvxmetric.datasets import load_dataset
from cvxmetric.instances.itml import itml_pairs
from cvxmetric.itml import itml_model
from cvxmetric.formulations.itml import build_itml_problem
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.solvers.itml import bregman_itml
from cvxmetric.verification.tolerances import TRUTH_RTOL

#: (label, data set, similar pairs, dissimilar pairs, gamma, metric-learn tolerances). The
#: large case runs metric-learn at its default tolerance only: its fixed-order sweeps need
#: thousands of passes over 2,000 pairs at tighter tolerances (over 10 minutes).
CASES = [
    ("iris-300", "iris", 150, 150, 1.0, (1e-3, 1e-5)),
    ("wine-300", "wine", 150, 150, 1.0, (1e-3, 1e-5)),
    ("wine-2000", "wine", 1000, 1000, 1.0, (1e-3,)),
]
#: metric-learn's iteration cap (sweeps); its default is 1,000.
PEER_MAX_ITER = 20_000
SPLIT_SEED = 0
PAIR_SEED = 1


def knn_error(M, Xtr, ytr, Xte, yte, k: int = 3) -> float:
    """Test error of k-NN under the metric M (via a factor L with M = L L^T)."""
    lam, V = np.linalg.eigh(0.5 * (M + M.T))
    L = V * np.sqrt(np.maximum(lam, 0.0))
    clf = KNeighborsClassifier(n_neighbors=k).fit(Xtr @ L, ytr)
    return float(np.mean(clf.predict(Xte @ L) != yte))


def _median_time(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def run_case(label, dataset, n_sim, n_dis, gamma, peer_tols, repeats):
    X, y = load_dataset(dataset)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=SPLIT_SEED, stratify=y)
    cons = itml_pairs(Xtr, ytr, n_similar=n_sim, n_dissimilar=n_dis, seed=PAIR_SEED)
    model = itml_model(Xtr, cons, gamma=gamma)
    form = build_itml_problem(model)
    ref = solve_certified(form, TRUTH_RTOL)
    p_star = ref.p_star if ref.certified else None
    S = cons.idx[cons.is_similar][:, :2]
    D = cons.idx[cons.is_dissimilar][:, 2:]
    P = np.concatenate([S, D])
    pairs3d = np.stack([Xtr[P[:, 0]], Xtr[P[:, 1]]], axis=1)
    ypairs = np.concatenate([np.ones(len(S)), -np.ones(len(D))])
    bounds = np.array([model.u, model.l])

    t_ours, res = _median_time(lambda: bregman_itml(itml_model(Xtr, cons, gamma=gamma)), repeats)
    rows = [("cvxmetric bregman", t_ours, res.n_iter, res.M)]
    for tol in peer_tols:
        params = {"gamma": gamma, "tol": tol, "max_iter": PEER_MAX_ITER, "prior": "identity"}
        runs = [run_peer("ITML", params, pairs=pairs3d, y=ypairs, bounds=bounds) for _ in range(repeats)]
        t_peer = float(np.median([r["time"] for r in runs]))
        rows.append((f"metric-learn tol={tol:g}", t_peer, runs[-1]["n_iter"], runs[-1]["M"]))
    # metric-learn's own default bounds (unsquared distances): what it would solve by default
    pts = np.unique(pairs3d.reshape(-1, X.shape[1]), axis=0)
    dd = np.sqrt(np.maximum(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1), 0.0))
    ml_default = np.percentile(dd, (5, 95))

    print(f"\n== {label}: {dataset} train {Xtr.shape[0]} x {X.shape[1]}, {len(S)} similar + {len(D)} dissimilar "
          f"pairs, gamma={gamma:g}, bounds u={model.u:.4g}, l={model.l:.4g} (squared)")
    print(f"   metric-learn's default bounds would be {ml_default[0]:.4g}, {ml_default[1]:.4g} (unsquared "
          f"distances): not comparable, so bounds are passed explicitly")
    print(f"   certified p* = {ref.p_star:.10g} (+/- {ref.gap:.0e}, {ref.rung}, {ref.time:.2f}s)")
    hdr = f"   {'fit':<26}{'time':>9}{'sweeps':>8}{'x ours':>9}{'objective':>18}{'rel.gap':>11}{'3-NN err':>10}"
    print(hdr, flush=True)
    print(f"   {'Euclidean (M = I)':<26}{'':>9}{'':>8}{'':>9}{form.value_at(np.eye(X.shape[1])):>18.10g}"
          f"{'':>11}{knn_error(np.eye(X.shape[1]), Xtr, ytr, Xte, yte):>10.3f}")
    out = []
    for name, t, it, M in rows:
        val = form.value_at(M)
        gap = relative_difference(val, p_star) if p_star is not None else float("nan")
        err = knn_error(M, Xtr, ytr, Xte, yte)
        print(f"   {name:<26}{t:>8.3f}s{it:>8d}{t / t_ours:>9.1f}{val:>18.10g}{gap:>11.1e}{err:>10.3f}", flush=True)
        out.append({"fit": name, "time": t, "ratio": t / t_ours, "objective": val, "gap": gap, "knn": err})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=positive_int, default=3,
                    help="median of this many fits (default 3; the 2,000-pair case runs once)")
    ap.add_argument("--quick", action="store_true", help="only the 300-pair cases")
    add_arguments(ap, "data sets")
    args = ap.parse_args(argv)
    if not peer_available():
        raise SystemExit("metric-learn's venv is not available; see benchmarks/peer.py for the set-up")
    tasks = [(case, args.repeats if case[2] + case[3] <= 300 else 1) for case in CASES
             if not (args.quick and case[2] + case[3] > 300)]
    with threadpool_limits(1):   # our side on one BLAS thread, as metric-learn's child (peer.BLAS_ENV)
        list(map_rows(run_task, tasks, args, label=lambda task: task[0][0]))


def run_task(task):
    """One row of the sweep: a case (ours and metric-learn on it) and its repeats."""
    case, repeats = task
    return run_case(*case, repeats=repeats)


if __name__ == "__main__":
    import importlib

    # main() of the module imported by name (not this __main__ copy): worker processes load its rows by name
    from benchmarks._report import run_main

    raise SystemExit(run_main('peer_itml', importlib.import_module(__spec__.name).main))
