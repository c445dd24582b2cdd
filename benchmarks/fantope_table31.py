r"""Thesis table 3.1 (sec. 3.4.1) at full size, with the fast solvers.

Set-up (thesis 3.4.1): :math:`x \sim U[0, 1)^{50}`, :math:`|\mathcal{X}| = 8000`, target
:math:`T = \mathrm{blockdiag}(A, 0)` of rank :math:`e = 10`, :math:`|\mathcal{N}| = 10^4` training quadruplets
labelled by :math:`D_T` (no noise) with :math:`\delta = 1`, validation and test sets of :math:`10^6`
quadruplets each. Methods (all hinge losses with :math:`C_Q = 1`):

* no regularization — :math:`\mu = \gamma = 0`, solved over :math:`M` (restarted PDHG, :mod:`cvxmetric.solvers.pdhg`);
* subgradient over :math:`L` — :math:`M = L^\top L`, :math:`L \in \mathbb{R}^{e \times d}`, no regularizer;
* trace — :math:`\gamma\,\mathrm{tr}\,M`, :math:`\gamma` chosen on the validation set (PDHG);
* Fantope — :math:`\mu R(M)` with :math:`k = d - e`, :math:`\mu` chosen on validation; fast MM (PDHG inner solves);
* Fantope + trace — :math:`\mu R(M) + \gamma\,\mathrm{tr}\,M`, both chosen on validation; fast MM.

:math:`\mu` is the parameter ``reg_weight`` and :math:`\gamma` the parameter ``trace_weight`` of
:func:`cvxmetric.fantope.fantope_model` (the grids ``mus`` and ``gammas`` below; the table prints them
as mu and gamma).

Reported: test accuracy (share of test quadruplets whose order under :math:`D_M` matches
:math:`D_T`, strict inequality; evaluated through a factor :math:`L` of :math:`M` in chunks),
numerical rank of :math:`M` (eigenvalues above ``RANK_RTOL_TABLE`` :math:`\lambda_{\max}`), and
:math:`\|M - T\|_F^2` after scaling both to a largest element of 1, next to the thesis' numbers.

Run from the repository root: ``python -m benchmarks.fantope_table31`` (``--quick`` for a reduced
size smoke run; ``--baseline-iters``, ``--label-noise`` and ``--m-train`` change one factor of the
protocol, see :func:`run`; ``--jobs N`` fits N grid cells at once, ``--dask ADDRESS`` on a cluster, with
the same table). The convex rows (no regularization, trace) are solved by PDHG to its own stopping
rule; the Fantope rows run at most ``MM_MAX_OUTER`` MM iterations, each bound solved by PDHG with the
MM's inexact tolerance schedule and its per-solve cap ``INNER_MAX_ITER``
(:mod:`cvxmetric.solvers.fantope_mm`); the non-convex factor baseline runs ``FACTOR_MAX_ITER``
subgradient iterations. Runs that stop at a cap are reported as not converged.
"""
from __future__ import annotations

import argparse
import functools
import time
import warnings
from dataclasses import dataclass

import numpy as np

from cvxmetric.datasets import synthetic_low_rank_metric
from cvxmetric.evaluation import labelled_quadruplets, quadruplet_accuracy as accuracy, scaled_distance
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.fantope import fantope_model
from cvxmetric.generators import quadruplets_from_metric
from cvxmetric.linalg import numerical_rank
from cvxmetric.solvers.factor_subgradient import factor_subgradient
from cvxmetric.solvers.fantope_mm import fantope_mm
from cvxmetric.solvers.pdhg import pdhg
from cvxmetric.solvers.subgradient import projected_subgradient

from ._parallel import add_arguments, map_rows

#: Eigenvalues above this fraction of lambda_max count in the reported rank. The subgradient
#: iterates are PSD projections, so "zero" eigenvalues are exact zeros or tiny positive values
#: left by the last steps; 1e-3 separates them from the signal on every run we made (the rank
#: at 1e-6 is printed too).
RANK_RTOL_TABLE = 1e-3
#: Iterations of the non-convex factor baseline ("subgradient over L"; it has no stopping test).
FACTOR_MAX_ITER = 1500
#: MM (outer) iterations of the Fantope rows, keeping the whole grid under 10 minutes. Each inner
#: bound solve is capped by the MM itself (``cvxmetric.solvers.fantope_mm.INNER_MAX_ITER``).
MM_MAX_OUTER = 4
#: ``run`` without ``parallel_args``: every grid cell in this process.
_SERIAL = argparse.Namespace(jobs=1, dask=None)

PAPER = {"no regularization": (89.3, 31, 1.07), "subgradient over L": (92.7, 10, 0.44),
         "trace": (95.1, 4, 0.38), "Fantope": (97.5, 10, 0.04), "Fantope + trace": (98.0, 10, 0.03)}


@dataclass(frozen=True)
class Data:
    """What every fit of the grid shares: the points, the training quadruplets and the settings."""

    X: np.ndarray
    train: object
    e: int
    seed: int
    factor_max_iter: int
    baseline_iters: int | None


@dataclass(frozen=True)
class Cell:
    """One grid cell (one row of the sweep): a table row's method at one (mu, gamma)."""

    method: str
    mu: float
    gamma: float
    how: str   # "baseline", "factor", "M" (PDHG on the convex model) or "mm"


def fit_cell(cell: Cell, data: Data):
    """The fit of one grid cell, its wall time and its CPU time in seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    model = fantope_model(data.X, data.train, rank=data.e, reg_weight=cell.mu, trace_weight=cell.gamma)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if cell.how == "mm":
            res = fantope_mm(model, max_iter=MM_MAX_OUTER, inner="pdhg")
        elif cell.how == "factor":
            res = factor_subgradient(model.base, data.e, seed=data.seed + 4, max_iter=data.factor_max_iter)
        elif cell.how == "baseline" and data.baseline_iters is not None:
            res = projected_subgradient(model.base, max_iter=data.baseline_iters, warn=False)
        else:
            res = pdhg(model.base)
    return res, time.perf_counter() - t0, time.process_time() - c0


def run(*, n=8000, d=50, e=10, m_train=10_000, m_eval=1_000_000, seed=0, factor_max_iter=FACTOR_MAX_ITER,
        gammas=(3.0, 30.0, 300.0), mus=(10.0, 100.0, 1000.0), mix=((100.0, 3.0), (1000.0, 3.0)),
        label_noise=0.0, baseline_iters=None, verbose=True, parallel_args=None):
    """Run the table; ``label_noise`` is the share of *training* quadruplets reversed.

    The thesis labels every set exactly by :math:`D_T` (``label_noise = 0``, the default). With
    ``0.1`` both unregularized rows reach the thesis' level but every regularized row falls far
    below it (the factor runs of table 3.1 on ``docs/benchmarks.md``); validation and test sets stay exactly
    labelled either way.

    ``baseline_iters`` (default None: PDHG to the optimum) solves the no-regularization row by
    the projected subgradient method over M instead (as the thesis does, Alg. 1, start 0:
    :func:`cvxmetric.solvers.subgradient.projected_subgradient`), stopped after that many iterations. The
    thesis gives neither its step nor its stopping threshold; stopped early (``120``), this row
    reaches the thesis' accuracy level, the likeliest cause of the gap (the factor runs
    of table 3.1 on ``docs/benchmarks.md``); the regularized rows are unaffected.

    ``parallel_args`` (the ``--jobs``/``--dask`` options of :mod:`benchmarks._parallel`; default
    serial) fits the grid cells in parallel, each cell whole in one process; validation and test
    accuracies are computed here, in cell order.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # measured: multi-threaded BLAS spins 4x the CPU time at d = 50
        return _run(n, d, e, m_train, m_eval, seed, factor_max_iter, gammas, mus, mix, label_noise,
                    baseline_iters, verbose, parallel_args)


def _run(n, d, e, m_train, m_eval, seed, factor_max_iter, gammas, mus, mix, label_noise, baseline_iters,
         verbose, parallel_args):
    t_all = time.perf_counter()
    c_all = time.process_time()
    X, T = synthetic_low_rank_metric(n, d, e, seed=seed)
    train = quadruplets_from_metric(X, T, m_train, seed=seed + 1, flip_fraction=label_noise)
    t0 = time.perf_counter()
    qv, sv = labelled_quadruplets(X, T, m_eval, seed + 2)
    qt, st = labelled_quadruplets(X, T, m_eval, seed + 3)
    if verbose:
        print(f"data: d={d}, e={e}, |X|={n}, |N|={len(train)} (label noise {label_noise:g}), "
              f"|V|={len(qv)}, |T|={len(qt)} "
              f"({time.perf_counter() - t0:.1f}s to label the evaluation sets)", flush=True)
    data = Data(X, train, e, seed, factor_max_iter, baseline_iters)
    cells = [Cell(name, mu, gamma, how) for name, candidates, how in (
        ("no regularization", [(0.0, 0.0)], "baseline"),
        ("subgradient over L", [(0.0, 0.0)], "factor"),
        ("trace", [(0.0, g) for g in gammas], "M"),
        ("Fantope", [(mu, 0.0) for mu in mus], "mm"),
        ("Fantope + trace", list(mix), "mm")) for mu, gamma in candidates]
    fits = map_rows(functools.partial(fit_cell, data=data), cells, parallel_args or _SERIAL,
                    label=lambda c: f"{c.method} mu={c.mu:g} gamma={c.gamma:g}")
    best = {}   # method -> (validation accuracy, cell, result), the first best cell of each method
    worker_cpu = 0.0   # CPU time of the fits run in other processes
    in_workers = parallel_args is not None and (parallel_args.jobs not in (None, 1) or bool(parallel_args.dask))
    for cell, (res, elapsed, cpu) in zip(cells, fits):
        worker_cpu += cpu if in_workers else 0.0
        acc_v = accuracy(X, res.M, qv, sv)
        if verbose:
            print(f"  {cell.method:20s} mu={cell.mu:<6g} gamma={cell.gamma:<6g} val acc {100 * acc_v:.2f}%  "
                  f"iters {res.n_iter} conv {res.converged}  {elapsed:.1f}s", flush=True)
        if cell.method not in best or acc_v > best[cell.method][0]:
            best[cell.method] = (acc_v, cell, res)
    rows = []
    for acc_v, cell, res in best.values():
        rows.append({"method": cell.method, "mu": cell.mu, "gamma": cell.gamma, "val_acc": acc_v,
                     "test_acc": accuracy(X, res.M, qt, st), "rank": numerical_rank(res.M, rtol=RANK_RTOL_TABLE),
                     "rank_1e-6": numerical_rank(res.M, rtol=1e-6), "dist": scaled_distance(res.M, T),
                     "time": res.time, "converged": res.converged, "M": res.M})
    total = time.perf_counter() - t_all
    cpu = time.process_time() - c_all + worker_cpu
    if verbose:
        print_table(rows, total, cpu)
    return {"rows": rows, "T": T, "time": total, "cpu_time": cpu}


def print_table(rows, total, cpu) -> None:
    print(f"\nTable 3.1 reproduction (rank: eigenvalues > {RANK_RTOL_TABLE:g} * lambda_max; "
          "||M - T||_F^2 with both scaled to max element 1)")
    head = f"{'method':20s} {'mu':>6s} {'gamma':>6s} {'test acc':>9s} {'paper':>6s} {'rank':>5s} " \
           f"{'paper':>5s} {'rank@1e-6':>9s} {'||M-T||^2':>9s} {'paper':>6s} {'fit s':>6s} conv"
    print(head)
    print("-" * len(head))
    for r in rows:
        pa, pr, pd = PAPER[r["method"]]
        print(f"{r['method']:20s} {r['mu']:6g} {r['gamma']:6g} {100 * r['test_acc']:8.2f}% {pa:5.1f}% "
              f"{r['rank']:5d} {pr:5d} {r['rank_1e-6']:9d} {r['dist']:9.3f} {pd:6.2f} {r['time']:6.1f} "
              f"{r['converged']}")
    print(f"\ntotal wall time {total:.0f}s, CPU time {cpu:.0f}s (one BLAS thread; wall exceeds CPU "
          "when other processes share the cores)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="reduced size (d=20, e=4, |N|=2000, 1e5 eval)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label-noise", type=float, default=0.0,
                   help="share of training quadruplets reversed (default 0, as in the thesis)")
    p.add_argument("--m-train", type=int, default=None, help="|N| (default 10^4, as in the thesis)")
    p.add_argument("--baseline-iters", type=int, default=None,
                   help="solve the no-regularization row by this many projected subgradient "
                        "iterations (default: PDHG to the optimum)")
    add_arguments(p, "grid cells")
    args = p.parse_args(argv)
    extra = {"label_noise": args.label_noise, "baseline_iters": args.baseline_iters, "parallel_args": args}
    if args.m_train is not None:
        extra["m_train"] = args.m_train
    if args.quick:
        run(**{"n": 2000, "d": 20, "e": 4, "m_train": 2000, "m_eval": 100_000, "seed": args.seed,
               "factor_max_iter": 1000, "gammas": (1.0, 10.0), "mus": (10.0, 100.0), "mix": ((100.0, 1.0),),
               **extra})
    else:
        run(seed=args.seed, **extra)


if __name__ == "__main__":
    import importlib

    # main() of the module imported by name (not this __main__ copy): worker processes load its rows by name
    from benchmarks._report import run_main

    raise SystemExit(run_main('fantope_table31', importlib.import_module(__spec__.name).main))
