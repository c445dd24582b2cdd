r"""LMNN as a metric-learn user fits it: ``LMNN(n_neighbors=3).fit(X, y)`` on 20,000 points.

Run from the repository root::

    python -m benchmarks.lmnn_estimator                  # 20,000 points, the four data sets below
    python -m benchmarks.lmnn_estimator --points 2000    # a quick run

Every row is one fit of :class:`cvxmetric.estimators.LMNN` with its defaults (``init="auto"``,
``tol`` None: the solver's certified relative gap of 1e-3), in a process forked for it, on one BLAS
thread:

* ``synthetic``: :func:`cvxmetric.generators.gaussian_classes` (10 classes, d = 50, seed 0), the
  data of :mod:`benchmarks.lmnn_scale`;
* ``mixed units``: the same data with half the columns multiplied by 1e3 (features in other units);
* ``digits``: scikit-learn's bundled digits (1,797 x 64) tiled to the number of points, each
  copy moved by Gaussian noise of standard deviation 0.5 pixel (seed 0, so that no two points
  coincide), then standardized;
* ``synthetic, n_components=5``: metric-learn's ``"auto"`` init is then LDA's rank-5 map, which
  the solver takes as the direction of its start (``start_direction``).

The columns: the engine (``result_.solver``), its start (``result_.info["start"]``), the process's
CPU seconds of the fit, the PDHG iterations on the full data, the certified relative gap
(``certificate_.value``; ``*``: not within its ``certificate_.tol``), and the peak resident memory
of the process (the data and the interpreter included).
"""
from __future__ import annotations

import argparse
import multiprocessing
import resource
import time

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks._report import run_main
from cvxmetric.estimators import LMNN
from cvxmetric.generators import gaussian_classes

#: The data sets of the rows: name -> the estimator's parameters beyond ``n_neighbors``.
ROWS = {"synthetic": {}, "mixed units": {}, "digits": {}, "synthetic, n_components=5": {"n_components": 5}}
N_NEIGHBORS = 3
#: Features of the synthetic data (the LMNN scale benchmark's d).
D = 50
#: Standard deviation of the noise that moves each tiled copy of digits (pixels, 0..16).
DIGITS_JITTER = 0.5
#: The factor of the columns in other units.
UNITS_FACTOR = 1e3


def tiled_digits(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Digits tiled to ``n`` points, each copy moved by :data:`DIGITS_JITTER`, standardized."""
    from sklearn.datasets import load_digits
    X0, y0 = load_digits(return_X_y=True)
    reps = -(-n // len(y0))
    X = np.tile(X0, (reps, 1))[:n] + DIGITS_JITTER * np.random.default_rng(seed).standard_normal((n, X0.shape[1]))
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X, np.tile(y0, reps)[:n]


def data(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The points and labels of row ``name`` (:data:`ROWS`)."""
    if name == "digits":
        return tiled_digits(n)
    X, y = gaussian_classes(n, D, 10, seed=0)
    if name == "mixed units":
        X = X.copy()
        X[:, : D // 2] *= UNITS_FACTOR
    return X, y


def fit_row(name: str, n: int) -> dict:
    """Fit row ``name`` on ``n`` points (one BLAS thread): what the fitted estimator reports."""
    X, y = data(name, n)
    with threadpool_limits(limits=1, user_api="blas"):
        c0 = time.process_time()
        est = LMNN(n_neighbors=N_NEIGHBORS, **ROWS[name]).fit(X, y)
        cpu = time.process_time() - c0
    res, cert = est.result_, est.certificate_
    return {"shape": X.shape, "solver": res.solver, "start": res.info.get("start"), "cpu": cpu, "n_iter": res.n_iter,
            "measure": cert.measure, "gap": cert.value, "certified": cert.certified,
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}   # Linux: kilobytes


def fit_in_own_process(name: str, n: int) -> dict:
    """:func:`fit_row` in a process forked for it (its peak memory is the fit's)."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(fit_row, (name, n))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lmnn_estimator", description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20_000, help="points of every data set")
    args = parser.parse_args(argv)
    print(f"cvxmetric.estimators.LMNN(n_neighbors={N_NEIGHBORS}).fit(X, y), defaults (init 'auto', certified gap "
          f"1e-3), {args.points} points, one BLAS thread")
    print(f"{'data':<27} {'n x d':>11} {'engine':>10} {'start':>13} {'cpu s':>7} {'it':>5} {'gap':>9} {'peak GB':>7}")
    for name in ROWS:
        r = fit_in_own_process(name, args.points)
        gap = f"{r['gap']:.1e}" + ("" if r["certified"] and r["measure"] == "certified_gap" else "*")
        shape = f"{r['shape'][0]} x {r['shape'][1]}"
        print(f"{name:<27} {shape:>11} {r['solver']:>10} {r['start']:>13} {r['cpu']:>7.1f} {r['n_iter']:>5} "
              f"{gap:>9} {r['peak_gb']:>7.2f}", flush=True)
    print("engine: result_.solver; start: result_.info['start']; cpu s: CPU seconds of the fit; it: PDHG iterations "
          "on the full data; gap: certificate_.value, the certified relative gap (* not within tol); peak GB: peak "
          "resident memory of the process forked for the row")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main("lmnn_estimator", main))
