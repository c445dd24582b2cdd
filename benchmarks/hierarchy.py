"""Taxonomy benchmark (thesis sec. 2.5): k-NN accuracy of Euclidean vs learned diagonal and full Qwise metrics.

Run from the repository root (by hand; not part of the tests)::

    python -m benchmarks.hierarchy                  # 5 seeds, about 10 s
    python -m benchmarks.hierarchy --seeds 10 --k 5
    python -m benchmarks.hierarchy --jobs 2         # seeds in 2 processes (the same table)

Data: :func:`cvxmetric.taxonomy.synthetic_taxonomy` with 4 super-classes x 3 sub-classes x 30
points (4 informative and 4 noise features), standardized with the training statistics and split
in half, stratified by leaf class. Training constraints: :func:`cvxmetric.taxonomy.taxonomy_quadruplets`
on the training half (300 same-vs-sibling + 300 sibling-vs-cousin quadruplets, k = 5), learned with
the parameters of the default instances ``hierarchy-diag-d8`` (diagonal, projected Newton, C_Q = 1)
and ``hierarchy-d8`` (full matrix, trace regularizer, PDHG, C_Q = 0.01, chosen there for the
subgradient row's iteration budget, so the trace term weighs heavily), and the full matrix again at
the diagonal model's C_Q = 1. Every learned metric's certified gap is
printed: a metric whose solver did not converge is flagged, not silently used.

Accuracies on the held-out half (mean +/- std over seeds):

- *local subtree*: k-NN among the training points of the test point's super-class only (the
  local-subtree task of Verma et al. 2012 used in thesis 2.5.2: the super-class is known, the
  leaf among its siblings is predicted);
- *overall*: k-NN among all training points;
- *hier.*: overall k-NN with the thesis' taxonomy-aware score (1 for the right leaf, 0.5 for a
  sibling of it, 0 otherwise; thesis table 2.5).
"""
from __future__ import annotations

import argparse
import functools
import warnings

import numpy as np

from cvxmetric.instances import get_instance
from cvxmetric.taxonomy import class_parents, synthetic_taxonomy, taxonomy_quadruplets
from cvxmetric.solvers.qwise import solve_qwise, solve_qwise_vector

from ._parallel import add_arguments, map_rows, positive_int


def stratified_half(y, rng):
    train = np.zeros(y.shape[0], dtype=bool)
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        train[idx[: idx.size // 2]] = True
    return train


def knn_predict(Z_train, y_train, Z_test, k, allowed=None):
    """Majority vote of the ``k`` nearest training points (ties: the nearest voter's class)."""
    pred = np.empty(Z_test.shape[0], dtype=y_train.dtype)
    for t, z in enumerate(Z_test):
        cand = np.arange(Z_train.shape[0]) if allowed is None else np.flatnonzero(allowed[t])
        diff = Z_train[cand] - z
        order = cand[np.argsort(np.einsum("ij,ij->i", diff, diff), kind="stable")[:k]]
        labels, first, counts = np.unique(y_train[order], return_index=True, return_counts=True)
        best = np.flatnonzero(counts == counts.max())
        pred[t] = labels[best[np.argmin(first[best])]]
    return pred


def factor(M):
    """``L`` with ``L^T L = M`` (PSD ``M``), so distances are Euclidean in ``X @ L.T``."""
    vals, vecs = np.linalg.eigh((M + M.T) / 2)
    return (vecs * np.sqrt(np.clip(vals, 0, None))).T


def one_seed(seed, k):
    rng = np.random.default_rng(seed)
    X, y, tree = synthetic_taxonomy(4, 3, 30, d_informative=4, d_noise=4, seed=rng)
    parent = class_parents(tree)
    train = stratified_half(y, rng)
    mu, sd = X[train].mean(axis=0), X[train].std(axis=0)
    X = (X - mu) / sd
    Xtr, ytr, Xte, yte = X[train], y[train], X[~train], y[~train]
    cons = taxonomy_quadruplets(Xtr, ytr, tree, n_same=300, n_sibling=300, n_neighbors=5, seed=rng)
    diag_params = get_instance("qwise_vector", "hierarchy-diag-d8").params
    full_params = get_instance("qwise", "hierarchy-d8").params
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rd = solve_qwise_vector(Xtr, cons, **diag_params)
        rf = solve_qwise(Xtr, cons, method="pdhg", **full_params)
        rf1 = solve_qwise(Xtr, cons, method="pdhg", **{**full_params, "C_Q": diag_params["C_Q"]})
    metrics = {"Euclidean": (np.eye(X.shape[1]), True, None),
               f"diagonal C_Q={diag_params['C_Q']:g}": (np.diag(rd.w[:-1]), rd.converged, rd.certified_gap),
               f"full C_Q={full_params['C_Q']:g}": (rf.M, rf.converged, rf.certified_gap),
               f"full C_Q={diag_params['C_Q']:g}": (rf1.M, rf1.converged, rf1.certified_gap)}
    sup_tr = np.array([parent[c] for c in ytr.tolist()])
    sup_te = np.array([parent[c] for c in yte.tolist()])
    same_subtree = sup_te[:, None] == sup_tr[None, :]
    out = {}
    for name, (M, converged, gap) in metrics.items():
        L = factor(M)
        Ztr, Zte = Xtr @ L.T, Xte @ L.T
        local = knn_predict(Ztr, ytr, Zte, k, allowed=same_subtree)
        overall = knn_predict(Ztr, ytr, Zte, k)
        sib = np.array([parent[p] == parent[t] for p, t in zip(overall.tolist(), yte.tolist())])
        hier = np.where(overall == yte, 1.0, np.where(sib, 0.5, 0.0))
        out[name] = (np.mean(local == yte), np.mean(overall == yte), hier.mean(), converged, gap)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=positive_int, default=5)
    ap.add_argument("--k", type=int, default=5, help="neighbours of the k-NN classifier")
    add_arguments(ap, "seeds")
    args = ap.parse_args(argv)
    runs = list(map_rows(functools.partial(one_seed, k=args.k), range(args.seeds), args,
                         label=lambda s: f"seed {s}"))
    print(f"Synthetic two-level taxonomy (4 super-classes x 3 leaves, d = 8: 4 informative + 4 noise), "
          f"{args.k}-NN on held-out halves, {args.seeds} seeds (mean +/- std)")
    print(f"{'metric':<20}{'local subtree':>16}{'overall':>16}{'hier. score':>16}{'converged':>11}{'max cert.gap':>14}")
    for name in runs[0]:
        acc = np.array([[r[name][0], r[name][1], r[name][2]] for r in runs]) * 100
        conv = sum(bool(r[name][3]) for r in runs)
        gaps = [r[name][4] for r in runs if r[name][4] is not None]
        gap = f"{max(gaps):.1e}" if gaps else "-"
        cells = "".join(f"{m:>9.1f} +/- {s:<3.1f}" for m, s in zip(acc.mean(0), acc.std(0)))
        print(f"{name:<20}{cells}{conv:>8}/{len(runs)}{gap:>14}")


if __name__ == "__main__":
    import importlib

    # main() of the module imported by name (not this __main__ copy): worker processes load its rows by name
    from benchmarks._report import run_main

    raise SystemExit(run_main('hierarchy', importlib.import_module(__spec__.name).main))
