"""The eigensolver rule of the PSD projection: full divide and conquer against positive eigenpairs only.

Run from the repository root::

    python -m benchmarks.eigh                              # d = 500, 1000; 5-90 % positive
    python -m benchmarks.eigh --sizes 500 1000 2000 --fractions 0.1 0.3 0.5

For each dimension d and fraction f of positive eigenvalues, a symmetric matrix with a random
orthogonal eigenbasis, d (1 - f) eigenvalues uniform in [-1, 0) and d f uniform in (0, 1], is
decomposed by each solver of :func:`cvxmetric.linalg.positive_eigenpairs` (best of ``--repeats``,
taking turns, one BLAS thread): ``scipy.linalg.eigh(driver="evd")`` (all eigenpairs, LAPACK dsyevd) and
``driver="evr", subset_by_value=(0, inf)`` (the positive ones: dsyevr, which for a subset uses
bisection and inverse iteration, dstebz + dstein, not MRRR), and numpy's ``eigh`` for reference.
The ratio partial / full sets ``PARTIAL_EIGH_MAX_FRACTION``: the fraction below which the
partial solver pays. Times move with the machine's load; the ratios are measured in one run.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from ._parallel import fraction, positive_int


def _best(solvers: dict, A: np.ndarray, repeats: int) -> dict:
    """Best time of each solver on a copy of ``A``, the solvers taking turns (the load only adds time)."""
    best = dict.fromkeys(solvers, math.inf)
    for _ in range(repeats):
        for name, fn in solvers.items():
            B = A.copy()
            t0 = time.perf_counter()
            fn(B)
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main(argv=None) -> int:
    from scipy.linalg import eigh
    from threadpoolctl import threadpool_limits

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", type=int, default=[500, 1000])
    p.add_argument("--fractions", nargs="+", type=fraction, default=[0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5])
    p.add_argument("--repeats", type=positive_int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    solvers = {
        "numpy eigh": lambda A: np.linalg.eigh(A),
        "evd (all)": lambda A: eigh(A, driver="evd", overwrite_a=True),
        "evr (positive)": lambda A: eigh(A, driver="evr", subset_by_value=(0.0, np.inf), overwrite_a=True),
    }
    rng = np.random.default_rng(args.seed)
    with threadpool_limits(limits=1, user_api="blas"):
        print(f"BLAS thread pools limited to 1 thread; load average {os.getloadavg()[0]:.1f} at the start")
        print(f"{'d':>5s} {'positive':>8s} " + " ".join(f"{k + ' ms':>17s}" for k in solvers) + f" {'partial/full':>13s}")
        for d in args.sizes:
            Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
            for f in args.fractions:
                k = int(round(f * d))
                lam = np.concatenate([-rng.random(d - k), 1.0 - rng.random(k)])
                A = (Q * lam) @ Q.T
                A = 0.5 * (A + A.T)
                t = _best(solvers, A, args.repeats)
                print(f"{d:5d} {f:8.2f} " + " ".join(f"{1e3 * v:17.1f}" for v in t.values())
                      + f" {t['evr (positive)'] / t['evd (all)']:13.2f}", flush=True)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    from benchmarks._report import run_main

    raise SystemExit(run_main('eigh', main))
