r"""Primal projected Newton method for the Qwise vector model (thesis appendix B, alg. 4).

Minimises :math:`F(\omega) = \tfrac12\|\omega\|^2 + \sum_c c_c\, \ell_h(\beta_c - g_c^\top\omega)` over
:math:`\mathbb{R}^e` or :math:`\mathbb{R}^e_+` (:class:`~cvxmetric.vector_model.VectorModel`).

Algorithm
---------
Gradient :math:`\nabla F = \omega - G^\top (c \circ \ell_h'(s))` and Hessian
:math:`H = I + G_Q^\top \operatorname{diag}(c / 2h) G_Q`, built only from the terms in the quadratic
zone :math:`|s_c| \le h` (appendix B.3); :math:`H \succeq I`, so the Newton system is always solvable
(Cholesky). On :math:`\mathbb{R}^e_+` a naive projection of the Newton step can stall, so the
thesis' step :math:`\omega \leftarrow \Pi(\omega - \eta H^{-1}\nabla)` is made safe in the way of
Bertsekas' projected Newton method: coordinates at the bound whose gradient pushes outward
(:math:`\omega_i \le \epsilon`, :math:`\nabla_i > 0`) take a plain gradient step, the free ones a
Newton step on :math:`H_{FF}`; the step length :math:`\eta` comes from an Armijo backtracking line
search along the projection arc. Stopping rule: the thesis' :math:`\|\omega_t - \omega_{t-1}\|^2 \le
\epsilon` together with a small projected gradient.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from cvxmetric._checks import check_int_in_range, check_positive
from cvxmetric.vector_model import VectorModel

from .result import SolverResult, warn_not_converged

__all__ = ["projected_newton", "NEWTON_TOL", "ARMIJO_SIGMA"]

#: Stop when the projected gradient's max-norm is below this (relative to max(1, ||grad||)).
NEWTON_TOL = 1e-10
#: Sufficient-decrease constant of the Armijo rule.
ARMIJO_SIGMA = 1e-4
#: Threshold defining coordinates "at the bound" (Bertsekas' epsilon), cap.
ACTIVE_EPS = 1e-6
#: Smallest line-search step before the step is declared failed.
MIN_STEP = 1e-12


def projected_newton(vm: VectorModel, *, w0=None, max_iter: int = 200, tol: float = NEWTON_TOL,
                     solver_name: str = "qwise-vector-newton") -> SolverResult:
    r"""Solve a :class:`VectorModel` by projected Newton with line search.

    Parameters
    ----------
    vm : VectorModel
    w0 : array_like, shape (e,), optional
        Starting point (default 0; projected onto the feasible set).
    max_iter : int
        Newton iterations at most.
    tol : float
        Projected-gradient tolerance.

    Returns
    -------
    SolverResult
        ``w`` is :math:`\omega = [w; b]`; ``history`` the objective per iteration; ``info`` has
        ``grad_norm`` (final projected gradient max-norm) and ``quadratic_zone`` (number of terms
        in the quadratic zone at the solution).
    """
    if not isinstance(vm, VectorModel):
        raise TypeError(f"vm must be a VectorModel; got {type(vm).__name__}")
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**7)
    tol = check_positive(tol, "tol")
    t_start = time.perf_counter()
    e = vm.e
    proj = (lambda z: np.maximum(z, 0.0)) if vm.nonneg else (lambda z: z)
    if w0 is None:
        w = np.zeros(e)
    else:
        w = np.array(w0, dtype=np.float64).reshape(-1)
        if w.shape != (e,) or not np.all(np.isfinite(w)):
            raise ValueError(f"w0 must be a finite vector of length {e}")
        w = proj(w)
    f = vm.value(w)
    history = [f]
    converged = False
    pg_norm = np.inf
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        g = vm.gradient(w)
        pg = w - proj(w - g)
        pg_norm = float(np.max(np.abs(pg))) if e else 0.0
        if pg_norm <= tol * max(1.0, float(np.max(np.abs(g)))):
            converged = True
            n_iter -= 1
            break
        H = vm.hessian(w)
        p = np.zeros(e)
        if vm.nonneg:
            eps = min(ACTIVE_EPS, float(np.linalg.norm(pg)))
            at_bound = (w <= eps) & (g > 0)
        else:
            at_bound = np.zeros(e, dtype=bool)
        free = ~at_bound
        if np.any(free):
            p[free] = cho_solve(cho_factor(H[np.ix_(free, free)]), g[free])
        p[at_bound] = g[at_bound]
        step = 1.0
        while True:
            w_new = proj(w - step * p)
            f_new = vm.value(w_new)
            decrease = step * float(g[free] @ p[free]) + float(g[at_bound] @ (w - w_new)[at_bound])
            if f_new <= f - ARMIJO_SIGMA * decrease or step < MIN_STEP:
                break
            step *= 0.5
        moved = float(np.sum((w_new - w) ** 2))
        w, f = w_new, f_new
        history.append(f)
        if moved <= (tol * max(1.0, float(np.linalg.norm(w)))) ** 2:
            g = vm.gradient(w)
            pg_norm = float(np.max(np.abs(w - proj(w - g))))
            converged = pg_norm <= np.sqrt(tol) * max(1.0, float(np.max(np.abs(g))))
            break
    elapsed = time.perf_counter() - t_start
    if not converged:
        warn_not_converged(solver_name, n_iter, f"projected gradient {pg_norm:.3g}")
    s = vm.residuals(w)
    return SolverResult(solver=solver_name, M=None, w=w, objective=float(vm.value(w)), n_iter=n_iter,
                        converged=converged, history=np.asarray(history), time=elapsed,
                        info={"grad_norm": pg_norm, "quadratic_zone": int(np.sum(np.abs(s) <= vm.h)),
                              "metric": vm.metric(w)})
