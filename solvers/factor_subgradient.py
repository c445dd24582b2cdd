r"""Subgradient descent over a factor :math:`L` (:math:`M = L^\top L`, rank at most ``rank``): the
non-convex low-rank baseline of thesis table 3.1 ("subgradient descent over L").

.. math::
    \min_{L \in \mathbb{R}^{r \times d}}\ f(L^\top L), \qquad
    f(M) = \langle R, M\rangle + \tfrac q2 \|M\|_F^2 + \sum_c c_c [\delta_c + \langle M, A_c\rangle]_+ ,

for any :class:`~cvxmetric.models.HingeModel`. A subgradient in :math:`L` is :math:`2 L (R + qM + G)`
with :math:`G = \sum_{\text{violated}} c_c A_c`; the constraint values are computed through the factor
(:meth:`~cvxmetric.hinge.QuadrupletGeometry.values_factor`, :math:`O(m d r)`). No projection is needed,
and the rank can never exceed ``rank``; the problem is not convex, so the result depends on the
(seeded) start and is a local solution at best. Step rule: normalized steps
:math:`\eta_t = \eta_0 / \sqrt t` relative to :math:`\|L\|_F`, in epochs of doubling length restarted from
the best point (as :func:`solvers.subgradient.projected_subgradient`), stopping when two
consecutive epochs improve the best objective by less than ``tol`` (relative).
"""
from __future__ import annotations

import time

import numpy as np

from cvxmetric._checks import as_rng, check_int_in_range, check_positive
from cvxmetric.models import HingeModel

from .result import SolverResult, warn_not_converged
from .subgradient import DEFAULT_TOL, FIRST_EPOCH, STALLED_EPOCHS, STEP_SCALE

__all__ = ["factor_subgradient"]


def factor_subgradient(model: HingeModel, rank: int, *, L0=None, seed=None, max_iter: int = 20000,
                       tol: float = DEFAULT_TOL, step_scale: float = STEP_SCALE,
                       first_epoch: int = FIRST_EPOCH) -> SolverResult:
    r"""Minimise ``model`` over :math:`M = L^\top L` with :math:`L` of shape (rank, d).

    Parameters
    ----------
    model : HingeModel
    rank : int
        Number of rows of :math:`L` (the largest possible rank of :math:`M`), ``1 <= rank <= d``.
    L0 : array_like, shape (rank, d), optional
        Start; default a seeded Gaussian matrix scaled so that a typical :math:`\langle M, A_c\rangle`
        matches a typical margin.
    seed : None, int or Generator
        Randomness of the default start.
    max_iter, tol, step_scale, first_epoch
        As in :func:`solvers.subgradient.projected_subgradient` (steps relative to :math:`\|L\|_F`).

    Returns
    -------
    SolverResult
        ``M = L.T @ L`` of the best point, ``objective`` :math:`f(M)`, ``history`` per iteration,
        ``info["L"]``.
    """
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    d = model.d
    rank = check_int_in_range(rank, "rank", 1, d)
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**9)
    tol = check_positive(tol, "tol")
    step_scale = check_positive(step_scale, "step_scale")
    t0 = time.perf_counter()
    geom, coef = model.geometry, model.coef
    delta = np.asarray(model.constraints.delta, dtype=np.float64)
    if L0 is None:
        rng = as_rng(seed)
        L = rng.standard_normal((rank, d)) / np.sqrt(d)
        a, b = geom.squared_lengths()
        spread = float(np.median(a + b)) if model.m else 1.0
        margin = float(np.median(np.abs(delta))) if model.m else 1.0
        if spread > 0 and margin > 0:
            L *= np.sqrt(margin / spread * d / rank)
    else:
        L = np.array(L0, dtype=np.float64, copy=True)
        if L.shape != (rank, d):
            raise ValueError(f"L0 must have shape ({rank}, {d}); got {L.shape}")

    def objective_and_grad(L):
        M = L.T @ L
        marg = delta + geom.values_factor(L)
        viol = marg > 0
        f = model.regularizer(M) + float(coef[viol] @ marg[viol])
        G = model.regularizer_grad(M) + geom.weighted_sum(coef[viol], np.flatnonzero(viol))
        return f, 2.0 * L @ G

    best_f, best_g = objective_and_grad(L)
    best_L = L
    history: list[float] = []
    n_iter, epochs, stalled, epoch_len = 0, 0, 0, first_epoch
    converged = False
    while n_iter < max_iter and not converged:
        L, g = best_L, best_g
        step0 = step_scale * max(float(np.linalg.norm(L)), 1e-12)
        f_start = best_f
        epochs += 1
        for t in range(1, epoch_len + 1):
            if n_iter >= max_iter:
                break
            gn = float(np.linalg.norm(g))
            if gn == 0.0:
                converged = True
                break
            L = L - (step0 / np.sqrt(t)) * g / gn
            n_iter += 1
            f, g = objective_and_grad(L)
            history.append(f)
            if f < best_f:
                best_f, best_g, best_L = f, g, L
        if converged:
            break
        stalled = stalled + 1 if (f_start - best_f) / max(1.0, abs(best_f)) < tol else 0
        converged = stalled >= STALLED_EPOCHS
        epoch_len *= 2
    if not converged:
        warn_not_converged("factor-subgradient", n_iter, f"best objective {best_f:.6g}")
    M = best_L.T @ best_L
    return SolverResult(solver="factor-subgradient", M=0.5 * (M + M.T), w=None, objective=float(best_f),
                        n_iter=n_iter, converged=converged, history=np.asarray(history),
                        time=time.perf_counter() - t0, info={"L": best_L, "epochs": epochs, "rank": rank})
