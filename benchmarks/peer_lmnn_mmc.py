r"""Head-to-head with metric-learn 0.7.0 (LMNN, MMC) on iris, wine and digits.

Run from the repository root (metric-learn lives in its own venv, see ``benchmarks/peer.py``)::

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.peer_lmnn_mmc    # everything (digits LMNN: ~2 min)
    OPENBLAS_NUM_THREADS=1 python -m benchmarks.peer_lmnn_mmc --methods mmc --datasets iris wine
    ... --lmnn-tols 1e-2 1e-3                                     # projected subgradient, one row per tol
    ... --lmnn-pdhg-tols 1e-2 1e-3                                # PDHG on a working set, one row per tol
    ... --lmnn-no-whiten                                          # both LMNN methods without PullWhitening
    ... --jobs 2                                                  # 2 (method, data set) sections at once

Single-threaded BLAS for both libraries (the variable reaches metric-learn's subprocess): on
a shared 2-core machine multi-threaded OpenBLAS on 64 x 64 products spins and makes timings
swing by 10x between runs.

Protocol (one fixed, seeded, stratified 70/30 split per data set; every metric is learned on
the 70 % and scored by 3-NN test error on the 30 %, next to the Euclidean metric):

* **LMNN** — the same ``n_neighbors = 3`` target neighbours rule, pull weight 1/2
  (``regularization=0.5``, the same name and meaning in both libraries), margin 1, plain hinge; metric-learn starts at the identity, ours at the identity scaled
  to the data's units (:func:`cvxmetric.lmnn.lmnn_start`):
  metric-learn's objective at :math:`L` *is* ours at :math:`M = L^\top L`, but it optimizes over
  :math:`L` by gradient steps (non-convex in L); ours is the convex problem in M. Both metrics
  are scored with *our* objective over the **full implicit triplet set**
  (:meth:`cvxmetric.lmnn.ImpostorSearch.objective`), and our result is additionally certified
  by a brute-force enumeration of every triplet (no radius filter, exact differences).
  Target neighbour ties (digits' pixel distances tie often) may be broken differently by
  metric-learn's non-stable argsort; the number of differing target pairs is reported.
* **MMC** — the same similar/dissimilar pairs. metric-learn maximizes
  :math:`\log \sum_D \sqrt{D_M}` subject to :math:`\sum_S D_M \le t` with an arbitrary scale
  :math:`t = \sum_S D_{M_0} / 100`; this is the MMC problem up to scale, so the comparable number
  is the scale-free min-form value :math:`f(M)/g(M)^2` (our objective after the best rescaling;
  our dissimilar weights are uniform, 1/|D|, which changes the value by a constant factor
  only). Our ``value_at`` of its raw M is shown too.

Adding a method (e.g. ITML via ``cvxmetric.solvers.itml``) means writing one ``<method>_rows(data)``
function returning rows with the keys of ``COLUMNS`` and registering it in ``SECTIONS``.
"""
from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import euclidean_distances
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from cvxmetric.datasets import load_dataset
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.generators import NO_TARGET
from cvxmetric.instances.mmc import mmc_pairs
from cvxmetric.lmnn import ImpostorSearch
from cvxmetric.linalg import psd_factor
from cvxmetric.mmc import MMCModel
from cvxmetric.solvers.lmnn import solve_lmnn
from cvxmetric.solvers.mmc import solve_mmc

from ._parallel import add_arguments, map_rows
from .peer import peer_available, run_peer

SPLIT_SEED = 0
TEST_SIZE = 0.3
KNN = 3
LMNN_N_NEIGHBORS = 3
LMNN_REGULARIZATION = 0.5
#: Our LMNN's projected subgradient settings (``method="subgradient"``, whitened by
#: :class:`cvxmetric.solvers.lmnn.PullWhitening` unless ``--lmnn-no-whiten``): the engine's own
#: step rule. Whitened it certifies digits at tol 1e-2 in ~150 iterations.
LMNN_OPTIONS = {"max_iter": 50_000}
#: Unwhitened (``--lmnn-no-whiten``) the subgradient rows take a first step of 5 % of ||M|| (the
#: default 25 % collapses the identity start in its first steps on digits, where ~200,000 impostor
#: triplets appear). Unwhitened they do not certify digits at tol 1e-2 within 50,000 iterations
#: (616 s in a loaded run, objective 1472.35): the ergodic multipliers' dual residual is large next
#: to the pull matrix's small eigenvalues (see :mod:`cvxmetric.solvers.lmnn`).
LMNN_PLAIN_OPTIONS = {"step_scale": 0.05}
#: The certified relative gap of each projected subgradient row (``tol``), one row each.
LMNN_TOLS: list[float] = [1e-2]
#: ``method="pdhg"`` (PDHG on a working set, certified on the full triplet set) rows: the
#: certified relative gap each row is held to (``tol`` and ``residual_tol``), one row each.
LMNN_PDHG_TOLS = [1e-2]
#: Both LMNN methods run whitened (:class:`cvxmetric.solvers.lmnn.PullWhitening`) unless
#: ``--lmnn-no-whiten``.
LMNN_WHITEN = [True]
#: (similar, dissimilar) pairs drawn from the training labels for MMC. Digits needs 2,000 similar
#: pairs: with 1,000 some rarely-inked pixel varies in a dissimilar pair but in no similar pair,
#: and MMC is degenerate (objective 0 along that pixel; MMCModel raises).
MMC_PAIRS = {"iris": (200, 200), "wine": (300, 300), "digits": (2000, 1000)}
DATASETS = ("iris", "wine", "digits")

COLUMNS = (("method", "{}"), ("data", "{}"), ("solver", "{}"), ("fit_s", "{:.2f}"), ("ratio", "{:.1f}x"),
           ("objective", "{:.6g}"), ("note", "{}"), ("knn_err", "{:.4f}"))


@dataclass(frozen=True)
class Split:
    name: str
    Xtr: np.ndarray
    Xte: np.ndarray
    ytr: np.ndarray
    yte: np.ndarray


def load_split(name: str) -> Split:
    X, y = load_dataset(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=TEST_SIZE, random_state=SPLIT_SEED, stratify=y)
    return Split(name, Xtr, Xte, ytr, yte)


def knn_error(data: Split, M: np.ndarray | None) -> float:
    """3-NN test error with the metric M (None: Euclidean)."""
    L = np.eye(data.Xtr.shape[1]) if M is None else psd_factor(M)
    clf = KNeighborsClassifier(n_neighbors=KNN).fit(data.Xtr @ L.T, data.ytr)
    return float(np.mean(clf.predict(data.Xte @ L.T) != data.yte))


def peer_targets(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """metric-learn 0.7.0's target rule (``LMNN._select_targets``), for the tie report."""
    out = np.empty((X.shape[0], k), dtype=int)
    for c in np.unique(y):
        inds = np.flatnonzero(y == c)
        dd = euclidean_distances(X[inds], squared=True)
        np.fill_diagonal(dd, np.inf)
        out[inds] = inds[np.argsort(dd)[..., :k]]
    return out


def brute_force_lmnn(search: ImpostorSearch, M: np.ndarray, regularization: float,
                     chunk: int = 64) -> tuple[float, int]:
    """LMNN objective and violated-triplet count by enumerating *every* triplet (exact differences)."""
    L = psd_factor(M)
    Z = search.X @ L.T
    T, y, n = search.targets, search.y, search.n
    dt = np.einsum("ikr,ikr->ik", Z[:, None, :] - Z[T], Z[:, None, :] - Z[T])
    missing = T == NO_TARGET   # a point of a small class has fewer targets
    dt[missing] = -np.inf      # and those slots are violated by no impostor
    total, count = 0.0, 0
    for s in range(0, n, chunk):
        rows = np.arange(s, min(n, s + chunk))
        diff = Z[rows, None, :] - Z[None, :, :]
        D = np.einsum("abr,abr->ab", diff, diff)
        other = y[rows, None] != y[None, :]
        for r in range(search.n_neighbors):
            marg = search.margin + dt[rows, r][:, None] - D
            viol = (marg > 0) & other
            total += float(marg[viol].sum())
            count += int(viol.sum())
    return regularization * float(dt[~missing].sum()) + (1.0 - regularization) * total, count


def lmnn_rows(data: Split) -> list[dict]:
    search = ImpostorSearch(data.Xtr, data.ytr, LMNN_N_NEIGHBORS)
    n_diff = int(np.sum(np.sort(peer_targets(data.Xtr, data.ytr, LMNN_N_NEIGHBORS), 1) != np.sort(search.targets, 1)))
    peer = run_peer("LMNN", {"n_neighbors": LMNN_N_NEIGHBORS, "regularization": LMNN_REGULARIZATION,
                             "init": "identity", "max_iter": 1000, "random_state": 0}, X=data.Xtr, y=data.ytr)
    f_peer = search.objective(peer["M"], LMNN_REGULARIZATION)
    ours = []

    def run(solver, label, describe, every, **kw):
        """One timed fit of ours, scored on the full triplet set and by brute force."""
        match = []
        t0 = time.perf_counter()

        def watch(it, M, f):
            # f is the objective over all triplets when ``it % every == 0`` (subgradient: the
            # re-checks, a working-set value between; pdhg: after every round)
            if it % every == 0 and not match and f <= f_peer:
                match.append(time.perf_counter() - t0)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            res = solve_lmnn(data.Xtr, data.ytr, LMNN_N_NEIGHBORS, regularization=LMNN_REGULARIZATION,
                             callback=watch, **kw)
            t_ours = time.perf_counter() - t0
        f_brute, n_viol = brute_force_lmnn(search, res.M, LMNN_REGULARIZATION)
        note = (f"{label}: {describe(res)}, viol {res.info['violated_at_solution']} (brute force {n_viol}, "
                f"f {f_brute:.6g}), |T|={search.n_triplets}; "
                + (f"reached metric-learn's objective at {match[0]:.2f}s" if match else "never below metric-learn")
                + (", NOT converged" if caught else ""))
        ours.append({"method": "lmnn", "data": data.name, "solver": solver, "fit_s": t_ours,
                     "ratio": peer["time"] / t_ours, "objective": search.objective(res.M, LMNN_REGULARIZATION), "note": note,
                     "knn_err": knn_error(data, res.M)})

    whiten = LMNN_WHITEN[0]
    for tol in LMNN_TOLS:
        run("cvxmetric-subgradient", f"subgradient tol {tol:g}",
            lambda r: (f"{r.n_iter} it, {r.info['epochs']} epochs, max WS {r.info['max_working_set']}, lower bound "
                       + ("none" if r.lower_bound is None else f"{r.lower_bound:.6g}")
                       + ("" if r.certified_gap is None else f", certified gap {r.certified_gap:.2g}")
                       + f", {r.status}" + (", whitened" if r.info["whitened"] else "")),
            10, method="subgradient", tol=tol, whiten=whiten, **LMNN_OPTIONS, **({} if whiten else LMNN_PLAIN_OPTIONS))
    for tol in LMNN_PDHG_TOLS:
        run("cvxmetric-pdhg", f"pdhg tol {tol:g}",
            lambda r: (f"{r.info['rounds']} rounds, {r.n_iter} PDHG it, WS {r.info['working_set_size']} "
                       f"(max {max(r.info['working_set_sizes'])}), outside WS "
                       f"{r.info['violated_outside_working_set']}, lower bound "
                       + ("none" if r.lower_bound is None else f"{r.lower_bound:.6g}")
                       + ("" if r.certified_gap is None else f", certified gap {r.certified_gap:.2g}")
                       + f", {r.status}" + (", whitened" if r.info["whitened"] else "")),
            1, method="pdhg", tol=tol, residual_tol=tol, whiten=whiten)
    return [
        {"method": "lmnn", "data": data.name, "solver": "euclidean", "fit_s": None, "ratio": None,
         "objective": search.objective(np.eye(data.Xtr.shape[1]), LMNN_REGULARIZATION), "note": "M = I",
         "knn_err": knn_error(data, None)},
        {"method": "lmnn", "data": data.name, "solver": "metric-learn", "fit_s": peer["time"], "ratio": None,
         "objective": f_peer, "note": f"{peer['n_iter']} it; {n_diff} target pairs differ by ties",
         "knn_err": knn_error(data, peer["M"])},
    ] + ours


def mmc_rows(data: Split) -> list[dict]:
    n_sim, n_dis = MMC_PAIRS[data.name]
    cons = mmc_pairs(data.ytr, n_sim, n_dis, seed=SPLIT_SEED)
    model = MMCModel(data.Xtr, cons)
    sim, dis = cons.is_similar, cons.is_dissimilar
    pairs = np.concatenate([cons.idx[sim][:, :2], cons.idx[dis][:, 2:]])
    labels = np.concatenate([np.ones(int(sim.sum())), -np.ones(int(dis.sum()))])
    peer = run_peer("MMC", {"init": "identity", "diagonal": False, "random_state": 0},
                    pairs=data.Xtr[pairs], y=labels)
    t0 = time.perf_counter()
    res = solve_mmc(data.Xtr, cons)
    t_ours = time.perf_counter() - t0
    return [
        {"method": "mmc", "data": data.name, "solver": "euclidean", "fit_s": None, "ratio": None,
         "objective": model.scale_free_value(np.eye(data.Xtr.shape[1])), "note": "M = I",
         "knn_err": knn_error(data, None)},
        {"method": "mmc", "data": data.name, "solver": "metric-learn", "fit_s": peer["time"], "ratio": None,
         "objective": model.scale_free_value(peer["M"]),
         "note": f"{peer['n_iter']} it; value_at(raw M) = {model.value(peer['M']):.6g}",
         "knn_err": knn_error(data, peer["M"])},
        {"method": "mmc", "data": data.name, "solver": "cvxmetric", "fit_s": t_ours, "ratio": peer["time"] / t_ours,
         "objective": model.scale_free_value(res.M),
         "note": (f"{res.n_iter} it; certified gap {res.certified_gap:.1e}; "
                  f"1/p_max^2 = {1 / res.info['p_max'] ** 2:.6g}"),
         "knn_err": knn_error(data, res.M)},
    ]


#: Benchmark sections: method name -> rows of one data set. Add ITML here.
SECTIONS = {"lmnn": lmnn_rows, "mmc": mmc_rows}


def format_rows(rows: list[dict]) -> str:
    def fmt(v, f):
        return "-" if v is None else f.format(v)
    body = [[fmt(r.get(k), f) for k, f in COLUMNS] for r in rows]
    head = [k for k, _ in COLUMNS]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def section_rows(task) -> list[dict]:
    """One row of the sweep: one method on one data set, ours and metric-learn's fits (a worker
    process gets the row settings of the command line with the task)."""
    method, name, lmnn_tols, lmnn_pdhg_tols, whiten = task
    LMNN_TOLS[:] = lmnn_tols
    LMNN_PDHG_TOLS[:] = lmnn_pdhg_tols
    LMNN_WHITEN[:] = [whiten]
    return SECTIONS[method](load_split(name))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    p.add_argument("--lmnn-tols", nargs="*", type=float, default=list(LMNN_TOLS),
                   help="tolerances of our projected subgradient LMNN runs (one row each)")
    p.add_argument("--lmnn-pdhg-tols", nargs="*", type=float, default=list(LMNN_PDHG_TOLS),
                   help="PDHG tolerances of our constraint-generation LMNN runs (one row each)")
    p.add_argument("--lmnn-no-whiten", action="store_true",
                   help="run both LMNN methods in the original coordinates (whiten=False)")
    add_arguments(p, "(method, data set) sections")
    args = p.parse_args(argv)
    LMNN_TOLS[:] = args.lmnn_tols
    LMNN_WHITEN[:] = [not args.lmnn_no_whiten]
    LMNN_PDHG_TOLS[:] = args.lmnn_pdhg_tols
    if not peer_available():
        print("metric-learn's venv is missing; see benchmarks/peer.py for the set-up")
        return 2
    rows = []
    tasks = [(method, name, tuple(LMNN_TOLS), tuple(LMNN_PDHG_TOLS), LMNN_WHITEN[0])
             for method in args.methods for name in args.datasets]
    with threadpool_limits(1):   # one BLAS thread here; the peer's subprocess inherits OPENBLAS_NUM_THREADS
        for new in map_rows(section_rows, tasks, args, label=lambda task: f"{task[0]} on {task[1]}"):
            print(format_rows(new), flush=True)
            print(flush=True)
            rows += new
    print("All rows:")
    print(format_rows(rows))
    return 0


if __name__ == "__main__":
    import importlib

    # main() of the module imported by name (not this __main__ copy): worker processes load its rows by name
    from benchmarks._report import run_main

    raise SystemExit(run_main('peer_lmnn_mmc', importlib.import_module(__spec__.name).main))
