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
the best point (as :func:`cvxmetric.solvers.subgradient.projected_subgradient`).

Certificate and stopping rule (``measure="certified_gap"``)
------------------------------------------------------------
The hinge dual bound (:meth:`cvxmetric.models.HingeModel.dual_bound`) at the ergodic hinge
multipliers of the epoch (and of its second half; weights :math:`\eta_t/\|g_t\|`, as in the
engine) is a lower bound on :math:`\min_{M \succeq 0} f(M)`, hence on the factored problem's
minimum too (:math:`\{L^\top L\} \subseteq \mathbb{S}^d_+`). The method stops when the relative gap
between the best objective and the best such bound is at most ``tol`` — a certified global
optimum, which the factored problem attains when ``rank`` is at least the rank of a convex
optimum (Burer–Monteiro) — or at ``max_iter`` / ``time_limit``. When the rank budget binds
(the convex optimum has a larger rank), no certificate can close the gap and the result is
honestly ``converged=False`` with a :class:`~cvxmetric.exceptions.ConvergenceWarning`: the
local solution of the rank-constrained problem is returned, not certified.
"""
from __future__ import annotations

import time

import numpy as np

from cvxmetric._checks import as_rng, check_int_in_range, check_positive
from cvxmetric.models import HingeModel

from cvxmetric.certificates import relative_gap

from .result import SolverResult, make_result
from .subgradient import (CERTIFY_EVERY, DEFAULT_TOL, FIRST_EPOCH, STEP_SCALE, DualBoundCertificate, EpochAverages,
                         EpochSchedule, ErgodicAverage, typical_metric_scale)

__all__ = ["factor_subgradient"]


def factor_subgradient(model: HingeModel, rank: int, *, L0=None, seed=None, max_iter: int = 20000,
                       tol: float = DEFAULT_TOL, step_scale: float = STEP_SCALE,
                       first_epoch: int = FIRST_EPOCH, time_limit=None,
                       certify_every: int = CERTIFY_EVERY) -> SolverResult:
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
    max_iter, tol, step_scale, first_epoch, time_limit, certify_every
        As in :func:`cvxmetric.solvers.subgradient.projected_subgradient` (steps relative to :math:`\|L\|_F`;
        ``tol`` is the certified relative gap, module docstring).

    Returns
    -------
    SolverResult
        Built by :func:`cvxmetric.solvers.result.make_result`: ``M = L.T @ L`` of the best point,
        ``objective`` :math:`f(M)`, ``lower_bound`` / ``certified_gap`` / ``multipliers`` (module
        docstring), ``history`` per iteration, ``info["L"]``.
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
    # the scale of a factor whose typical <L^T L, A_c> matches a typical margin (in the data's units)
    t = typical_metric_scale(model)
    scale0 = 1.0 if t is None else float(np.sqrt(t * d))
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    if L0 is None:
        rng = as_rng(seed)
        L = rng.standard_normal((rank, d)) / np.sqrt(d)
        if t is not None:
            L *= np.sqrt(t * d / rank)
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
        return f, (2.0 * L @ G, np.where(viol, coef, 0.0))

    best_f, best_g = objective_and_grad(L)
    best_L = L
    cert = DualBoundCertificate(model)   # dual_bound without an upper bound (no trace-bound repair)

    def certify(ergo) -> float:
        return cert.update(model, ergo, best_f)

    schedule = EpochSchedule(step_scale, first_epoch, scale0)
    history: list[float] = []
    n_iter = 0
    done = timed_out = False
    while n_iter < max_iter and not done and not timed_out:
        L, (g, y_t) = best_L, best_g
        schedule.start(L)
        averages = EpochAverages(model.m)
        for t in range(1, schedule.length + 1):
            if n_iter >= max_iter:
                break
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                timed_out = True
                break
            gn = float(np.linalg.norm(g))
            if gn == 0.0:
                single = ErgodicAverage(model.m)
                single.add(1.0, y_t)
                done = certify(single) <= tol
                break
            w = schedule.weight(t, gn)
            averages.add(schedule, t, w, y_t)
            L = L - w * g
            n_iter += 1
            f, (g, y_t) = objective_and_grad(L)
            history.append(f)
            if f < best_f:
                best_f, best_g, best_L = f, (g, y_t), L
            if t % certify_every == 0:
                certify(averages.whole)
                if certify(averages.tail) <= tol:
                    done = True
                    break
        if not done:
            certify(averages.whole)
            done = certify(averages.tail) <= tol
        schedule.finish()
    M = best_L.T @ best_L
    lb = cert.lower_bound
    stop = "time_limit" if timed_out else "max_iter"
    return make_result("factor-subgradient", objective=best_f, measure="certified_gap", tol=tol,
                       stop_reason=stop, M=0.5 * (M + M.T), lower_bound=lb, multipliers=cert.y,
                       n_iter=n_iter, history=history, time=time.perf_counter() - t0,
                       info={"L": best_L, "epochs": schedule.epochs, "rank": rank},
                       detail="" if relative_gap(best_f, lb) <= tol else
                       f"no certificate: a rank budget ({rank}) below a convex optimum's rank cannot be certified")
