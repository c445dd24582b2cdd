r"""Fast majorization–minimization for Fantope regularization (thesis alg. 3, inexact inner solves).

Outer loop: :math:`W^n = W(M^n)` (a supergradient of :math:`R` at :math:`M^n`); inner: minimise the convex
bound :math:`\hat\varphi(M; W^n) = \mu\langle W^n, M\rangle + \gamma\,\mathrm{tr}\,M + \ell(M)` over
:math:`M \succeq 0` with :func:`solvers.subgradient.projected_subgradient`, warm-started at :math:`M^n`.

The inner solver is :func:`solvers.pdhg.pdhg` (default) or the projected subgradient engine. The
warm start is kept whenever the inner solve does not improve on it, so
:math:`\hat\varphi(M^{n+1}; W^n) \le \hat\varphi(M^n; W^n) = \varphi(M^n)`, hence
:math:`\varphi(M^{n+1}) \le \varphi(M^n)` **exactly**, whatever the inner accuracy: the fast MM is
monotone like the exact one.
"""
from __future__ import annotations

import time

import numpy as np

from cvxmetric._checks import as_square_symmetric, check_int_in_range, check_positive
from cvxmetric.fantope import FantopeModel, fantope_center, fantope_projector

from .pdhg import pdhg
from .result import SolverResult, warn_not_converged
from .subgradient import projected_subgradient

__all__ = ["fantope_mm", "MM_TOL", "MM_MAX_OUTER", "INNER_SOLVERS"]

#: Fast solvers of the convex bound (both minimise any HingeModel).
INNER_SOLVERS = {"subgradient": projected_subgradient, "pdhg": pdhg}

#: Relative decrease of phi per outer step below which the fast MM stops. The inner solvers
#: stop near relative gaps of 1e-5 (PDHG) to 3e-4 (subgradient, solvers.subgradient.DEFAULT_TOL),
#: so decreases much below that are inner-solver noise; 1e-5 still lets the W update act.
MM_TOL = 1e-5
#: Outer iteration limit.
MM_MAX_OUTER = 50
#: The outer loop has reached a fixed point when the bound point moves by less than this
#: (Frobenius; ||W||_F = sqrt(k)): the next surrogate is then the same problem, and re-solving
#: it only continues the inner solver's own (already converged) run.
W_TOL = 1e-3


def fantope_mm(model: FantopeModel, *, W0=None, M0=None, max_outer: int = MM_MAX_OUTER,
               tol: float = MM_TOL, inner: str = "pdhg", inner_options: dict | None = None) -> SolverResult:
    r"""Majorization–minimization with the fast inner solver.

    Parameters
    ----------
    model : FantopeModel
    W0 : array_like, shape (d, d), optional
        First bound point in :math:`\mathbb{F}_k`; default :math:`W(M_0)` when ``M0`` is given, else the
        barycentre :math:`(k/d) I` (the same convention as
        :func:`formulations.fantope.fantope_mm_reference`).
    M0 : array_like, shape (d, d), optional
        PSD start; also the warm start of the first inner solve (default 0).
    max_outer : int
        Outer iteration limit (a ``ConvergenceWarning`` when it stops the method).
    tol : float
        Stop when :math:`\varphi(M^{n-1}) - \varphi(M^n) \le` ``tol`` :math:`\max(1, |\varphi|)`, or when
        :math:`\|W(M^n) - W^{n-1}\|_F \le` ``W_TOL`` (an outer fixed point), after at least 2 steps.
    inner : {"pdhg", "subgradient"}
        Inner solver of the bound: :func:`solvers.pdhg.pdhg` (default: restarted PDHG, accurate
        to ~1e-5 in a few hundred iterations) or :func:`solvers.subgradient.projected_subgradient`
        (thesis alg. 1).
    inner_options : dict, optional
        Options of the inner solver for every inner solve.

    Returns
    -------
    SolverResult
        ``M`` the last iterate, ``objective`` :math:`\varphi(M)`, ``history`` :math:`\varphi(M^n)` per
        outer iteration, ``n_iter`` outer iterations, ``info``: ``inner_iterations``,
        ``bound_values`` (inner objectives), ``Ws`` (bound points used), ``W_final``
        (:math:`W(M)`), ``inner_converged``.
    """
    if not isinstance(model, FantopeModel):
        raise TypeError(f"model must be a FantopeModel; got {type(model).__name__}")
    max_outer = check_int_in_range(max_outer, "max_outer", 1, 10**6)
    tol = check_positive(tol, "tol")
    if inner not in INNER_SOLVERS:
        raise ValueError(f"inner must be one of {sorted(INNER_SOLVERS)}; got {inner!r}")
    solve_bound = INNER_SOLVERS[inner]
    inner_opts = dict(inner_options or {})
    inner_opts.setdefault("solver_name", f"fantope-mm-inner-{inner}")
    t0 = time.perf_counter()
    if W0 is not None and M0 is not None:
        raise ValueError("give at most one of W0 and M0 (W0 defaults to W(M0))")
    M = None if M0 is None else as_square_symmetric(M0, "M0", d=model.d, psd=True)
    if W0 is not None:
        W = model.check_w(W0, "W0")
    elif M is not None:
        W = fantope_projector(M, model.k)
    else:
        W = fantope_center(model.d, model.k)
    phi, bounds, Ws, inner_iters, inner_ok = [], [], [], [], []
    converged = False
    for _ in range(max_outer):
        bound = model.bound(W)
        res = solve_bound(bound, M0=M, **inner_opts)
        # keep the warm start if the inner solver did not improve on it: then
        # bound(M_next) <= bound(M_n) = phi(M_n), so phi never increases (whatever the inner accuracy)
        if M is not None and bound.value(M) < res.objective:
            M_next, bound_value = M, bound.value(M)
        else:
            M_next, bound_value = res.M, res.objective
        M = M_next
        Ws.append(W)
        bounds.append(bound_value)
        inner_iters.append(res.n_iter)
        inner_ok.append(res.converged)
        phi.append(model.value(M))
        W_prev, W = W, fantope_projector(M, model.k)
        if len(phi) >= 2 and (phi[-2] - phi[-1] <= tol * max(1.0, abs(phi[-1]))
                              or np.linalg.norm(W - W_prev) <= W_TOL):
            converged = True
            break
    if not converged:
        warn_not_converged("fantope-mm", len(phi), f"phi {phi[-1]:.6g}")
    return SolverResult(solver="fantope-mm", M=M, w=None, objective=float(phi[-1]), n_iter=len(phi),
                        converged=converged, history=np.asarray(phi), time=time.perf_counter() - t0,
                        info={"inner_iterations": inner_iters, "bound_values": bounds, "Ws": Ws,
                              "W_final": W, "inner_converged": inner_ok, "k": model.k})
