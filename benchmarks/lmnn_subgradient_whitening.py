r"""Why the projected subgradient LMNN needs :class:`~cvxmetric.solvers.lmnn.PullWhitening` (digits).

Run from the repository root::

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.lmnn_subgradient_whitening            # ~45 s
    OPENBLAS_NUM_THREADS=1 python -m benchmarks.lmnn_subgradient_whitening --max-iter 50000

``solve_lmnn(..., method="subgradient")`` on the peer benchmark's digits split
(:mod:`benchmarks.peer_lmnn_mmc`: 70 %, ``n_neighbors`` 3, ``regularization`` 0.5, margin 1, start
at the identity), tol 1e-2, with ``whiten`` off and on, each at ``step_scale`` 0.05 (the peer
benchmark's unwhitened setting) and at the engine's default step rule. One row per
run: iterations, seconds, the best objective, the certified lower bound and gap, and what the
bound is made of, at the multipliers of the best bound (the ergodic average of the method's
hinge multipliers; ``multipliers`` over the rows of ``info["certificate_model"]``, both in the
original coordinates):

* ``d'y``: :math:`\delta^\top \bar y`, the bound these multipliers would give were they dual
  feasible;
* ``lam_min``: the smallest eigenvalue of :math:`L^{-1} U^\top (R + K^*\bar y) U L^{-\top}`
  (:math:`U^\top R U = LL^\top` on the data span): the dual residual measured against the pull
  matrix (``-1`` is "bends :math:`R + K^*\bar y` negative by 100 % of R"; it is the same number
  in both coordinates, since whitening maps R to the identity). The bound's repair scales the
  multipliers by about :math:`1 / (1 - \text{lam\_min})` where it cannot do better, so a
  residual of this order costs the bound most of :math:`\delta^\top \bar y`.

The comparable numbers are those of one run (the machine may be shared); the objective's
optimum is about 1460.8 (PDHG at tol 1e-3 brackets it in [1460.52, 1461.03]: :mod:`benchmarks.peer_lmnn_mmc` with ``--lmnn-pdhg-tols 1e-3``).
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.solvers.lmnn import solve_lmnn

from .peer_lmnn_mmc import LMNN_N_NEIGHBORS, LMNN_REGULARIZATION, load_split

#: The runs: (whiten, step_scale); None is the engine's default step rule.
RUNS = ((False, 0.05), (False, None), (True, 0.05), (True, None))
TOL = 1e-2


def relative_dual_residual(model, y) -> float:
    r""":math:`\lambda_{\min}(L^{-1} U^\top (R + K^* y) U L^{-\top})` at ``y`` clipped into the box."""
    U, R_U, L_inv = model.span_basis()
    Ky = model.geometry.weighted_sum(np.clip(y, 0.0, model.coef))
    S = R_U + (Ky if U is None else U.T @ Ky @ U)
    B = L_inv @ S @ L_inv.T
    return float(np.linalg.eigvalsh(0.5 * (B + B.T))[0])


def run(X, y, whiten: bool, step_scale, max_iter: int) -> dict:
    options = {} if step_scale is None else {"step_scale": step_scale}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)   # the row reports whether it converged
        res = solve_lmnn(X, y, LMNN_N_NEIGHBORS, regularization=LMNN_REGULARIZATION, method="subgradient",
                         tol=TOL, max_iter=max_iter, whiten=whiten, **options)
    model, ybar = res.info["certificate_model"], res.multipliers
    return {"whiten": whiten, "step_scale": "default" if step_scale is None else step_scale,
            "it": res.n_iter, "s": res.time, "objective": res.objective, "bound": res.lower_bound,
            "gap": res.certified_gap, "converged": res.converged,
            "d'y": float(model.constraints.delta @ np.clip(ybar, 0.0, model.coef)),
            "lam_min": relative_dual_residual(model, ybar)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-iter", type=int, default=3000, help="iteration limit of each run (default 3000)")
    args = p.parse_args(argv)
    data = load_split("digits")
    cols = ("whiten", "step_scale", "it", "s", "objective", "bound", "gap", "converged", "d'y", "lam_min")
    fmt = {"s": "{:.2f}", "objective": "{:.2f}", "bound": "{:.2f}", "gap": "{:.2g}", "d'y": "{:.2f}",
           "lam_min": "{:.3g}"}
    print("  ".join(f"{c:>10}" for c in cols))
    with threadpool_limits(1):
        for whiten, step in RUNS:
            row = run(data.Xtr, data.ytr, whiten, step, args.max_iter)
            print("  ".join(f"{fmt.get(c, '{}').format(row[c]):>10}" for c in cols), flush=True)
    return 0


if __name__ == "__main__":
    from benchmarks._report import run_main

    raise SystemExit(run_main('lmnn_subgradient_whitening', main))
