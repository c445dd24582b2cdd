r"""Fast majorization–minimization for Fantope regularization, with inexact inner solves.

Reference: thesis alg. 3.

Outer loop: :math:`W^n = W(M^n)` (a supergradient of :math:`R` at :math:`M^n`); inner: minimise the convex
bound :math:`\hat\varphi(M; W^n) = \mu\langle W^n, M\rangle + \gamma\,\mathrm{tr}\,M + \ell(M)` over
:math:`M \succeq 0` with :func:`cvxmetric.solvers.pdhg.pdhg` (default) or the projected subgradient engine,
warm-started at :math:`M^n` (and, for PDHG, at the previous multipliers, step size and primal weight).

Inexact MM: the inner solves are not all held to the final accuracy. The solve of the bound at
:math:`W(M^n)` is asked for the certified gap :math:`\varepsilon_n` of :func:`inner_tolerance`, a tenth
of the last fixed-point gap :math:`\rho_{n-1}` (below), between ``INNER_TOL_LOOSE`` and
``INNER_TOL_FRACTION * tol``: far from a fixed point a loose solve keeps most of the decrease an
exact one could give, and near it the tolerance follows :math:`\rho` down to the final one, the
only one at which :math:`\rho \le` ``tol`` can be certified (reasons at ``INNER_TOL_PROGRESS``).

The warm start is kept whenever the inner solve does not improve on it, so
:math:`\hat\varphi(M^{n+1}; W^n) \le \hat\varphi(M^n; W^n) = \varphi(M^n)`, hence
:math:`\varphi(M^{n+1}) \le \varphi(M^n)` **exactly**, whatever the inner accuracy: the fast MM is
monotone like the exact one.

Optimality measure and stopping rule (``measure="kkt_residual"``)
-----------------------------------------------------------------
The objective is not convex, so the result certifies a **critical point** (not a global
minimum) by the *MM fixed-point gap*

.. math::
    \rho(M^n) = \frac{\varphi(M^n) - L_n}{\max(|\varphi(M^n)|, |L_n|)}, \qquad
    L_n \le \min_{M \succeq 0} \hat\varphi(M; W(M^n)),

with :math:`L_n` the certified lower bound of the inner solve of the bound at :math:`W(M^n)` (the
hinge dual bound at the inner solver's multipliers, repaired to exact dual feasibility). As
:math:`\hat\varphi(M^n; W(M^n)) = \varphi(M^n)`, :math:`\rho(M^n) \ge 0` bounds (relatively) the
decrease one more *exact* MM step could achieve, and :math:`\rho(M^n) = 0` iff :math:`M^n` minimises
its own majorizer: :math:`0 \in \gamma I + \mu W(M^n) + \partial\ell(M^n) + N_{\mathbb{S}_+}(M^n)`, the
critical-point condition of the DC program (the same measure as alg. 2's,
:func:`cvxmetric.solvers.fantope_subgradient.majorizer_residual` with :math:`W = W(M)`). It is scale-invariant
(weights times :math:`c`, data times :math:`s`) and it uses nothing of the stopping heuristics: a
lower bound of a convex problem and the objective at a PSD point. Every inner solve of the
bound at :math:`W(M^n)` is thus also the certificate of :math:`M^n`; the loop stops as soon as
:math:`\rho(M^n) \le` ``tol`` and returns that certified :math:`M^n`. An inner solve whose own
certificate lags (e.g. features scaled by 1e6) cannot give a small :math:`\rho`: the loop stops after
the first inner solve that ends uncertified (its step is kept: it still decreases :math:`\varphi`) with
``converged=False`` and status ``"inner_not_converged"`` — never a converged outer loop over
unconverged inner solves; ``max_iter`` (outer iterations) and ``time_limit`` stop it otherwise.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np

from cvxmetric._checks import as_square_symmetric, check_int_in_range, check_positive
from cvxmetric.certificates import relative_gap
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.fantope import FantopeModel, fantope_center, fantope_projector

from .pdhg import pdhg
from .result import SolverResult, make_result
from .subgradient import projected_subgradient

__all__ = ["fantope_mm", "MM_TOL", "MM_MAX_OUTER", "INNER_SOLVERS", "INNER_TOL_FRACTION", "INNER_TOL_PROGRESS",
           "INNER_TOL_LOOSE", "INNER_MAX_ITER", "inner_tolerance", "result_lower_bound"]

#: Fast solvers of the convex bound (both minimise any HingeModel).
INNER_SOLVERS = {"subgradient": projected_subgradient, "pdhg": pdhg}

#: Tolerance of the MM fixed-point gap rho (module docstring): a tenth of the harness' gap for
#: the fast MM (cvxmetric.verification.tolerances.FANTOPE_MM_GAP = 1e-3). Measured on the default
#: instances: reached in 3-8 outer steps with PDHG inner solves.
MM_TOL = 1e-4
#: Outer iteration limit.
MM_MAX_OUTER = 50
#: The certified gap of the final inner solves, as a fraction of ``tol``: rho(M^n) is the inner
#: certificate's gap plus the decrease left, so the certificate must be tighter than tol.
INNER_TOL_FRACTION = 0.25
#: Inexact MM: the inner solve of the bound at :math:`W(M^n)` is asked for the certified gap
#: :math:`\varepsilon_n = \min(\text{INNER\_TOL\_LOOSE}, \max(\text{INNER\_TOL\_FRACTION}\cdot\text{tol},
#: \text{INNER\_TOL\_PROGRESS}\cdot\rho_{n-1}))`, with :math:`\rho_{n-1}` the fixed-point gap measured
#: at the previous outer step (the loose tolerance before any). Why: :math:`\rho(M^n)\,s` (s the
#: gap's denominator) is the most one exact MM step from :math:`M^n` can decrease :math:`\varphi`;
#: an inner point within :math:`\varepsilon_n s` of :math:`L_n` keeps all of it but
#: :math:`\varepsilon_n s` (:math:`\varphi(M^{n+1}) \le \hat\varphi(M^{n+1}) \le L_n + \varepsilon_n s`), so a tenth
#: of the last gap keeps ~90 % of the step while the gap is large; a tighter inner solve far from
#: the fixed point only refines a step the next bound point moves anyway. Near the fixed point
#: :math:`\rho` shrinks to the inner gap, the tolerance follows it down to the final
#: ``INNER_TOL_FRACTION * tol``, and only a solve at that tolerance can certify
#: :math:`\rho \le` tol: no certificate is weakened, the early solves are just cheaper. Measured
#: (one BLAS thread): thesis table 3.1's first Fantope fit (d = 50, mu = 10) needs 448 and 2,960
#: PDHG iterations for its first two inner solves instead of 912 and 5,056 with every solve held
#: to 0.25 tol; at the benchmark's quick size the MM fits take 1.6-1.8x less CPU time.
INNER_TOL_PROGRESS = 0.1
#: The loosest inner tolerance (first solves): PDHG's ``DEFAULT_TOL``, the harness'
#: first-order gap, the accuracy at which the fast MM's inner solves ran before they were certified.
INNER_TOL_LOOSE = 1e-3

#: Iteration budget of each PDHG inner solve (PDHG's own default is 100,000). Measured: certified
#: inner solves take <= 100 iterations on the harness' default instances and 450-3,000 on thesis
#: table 3.1 (d = 50, |N| = 1e4) at ``INNER_TOL_LOOSE``. The solves that need more are those
#: whose certificate cannot exist: on noise-free data phi reaches its global minimum 0 (every
#: term of phi is >= 0), where no relative gap or relative residual can be met, and such a solve
#: ran to PDHG's default cap (> 12 min). Hitting the budget ends the MM with
#: ``inner_not_converged`` (the step is kept: phi still decreases); it never certifies anything.
INNER_MAX_ITER = 5000


def inner_tolerance(tol: float, rho_prev: float | None) -> float:
    r"""The inexact-MM schedule of the inner certified gap (``INNER_TOL_PROGRESS``)."""
    if rho_prev is None or not math.isfinite(rho_prev):
        return max(INNER_TOL_LOOSE, INNER_TOL_FRACTION * tol)
    return min(max(INNER_TOL_LOOSE, INNER_TOL_FRACTION * tol),
               max(INNER_TOL_FRACTION * tol, INNER_TOL_PROGRESS * rho_prev))


def result_lower_bound(res: SolverResult):
    """The certified lower bound of a fast solver's result (the field, or PDHG's legacy info key)."""
    lb = getattr(res, "lower_bound", None)
    if lb is None:
        lb = res.info.get("lower_bound")
    return None if lb is None or not math.isfinite(lb) else float(lb)


def _multipliers(res: SolverResult):
    y = getattr(res, "multipliers", None)
    return res.info.get("y") if y is None else y


def fantope_mm(model: FantopeModel, *, W0=None, M0=None, max_iter: int = MM_MAX_OUTER,
               tol: float = MM_TOL, inner: str = "pdhg", inner_options: dict | None = None,
               time_limit: float | None = None) -> SolverResult:
    r"""Majorization–minimization with the fast inner solver.

    Parameters
    ----------
    model : FantopeModel
    W0 : array_like, shape (d, d), optional
        First bound point in :math:`\mathbb{F}_k`; default :math:`W(M_0)` when ``M0`` is given, else the
        barycentre :math:`(k/d) I` (the same convention as
        :func:`cvxmetric.formulations.fantope.fantope_mm_reference`).
    M0 : array_like, shape (d, d), optional
        PSD start; also the warm start of the first inner solve (default 0).
    max_iter : int
        Outer iteration limit (a ``ConvergenceWarning`` when it stops an uncertified method).
    tol : float
        Tolerance of the MM fixed-point gap :math:`\rho` (module docstring).
    inner : {"pdhg", "subgradient"}
        Inner solver of the bound: :func:`cvxmetric.solvers.pdhg.pdhg` (default: restarted PDHG) or
        :func:`cvxmetric.solvers.subgradient.projected_subgradient` (thesis alg. 1).
    inner_options : dict, optional
        Options of the inner solver for every inner solve. Default ``tol``: the inexact-MM
        schedule :func:`inner_tolerance` (from ``INNER_TOL_LOOSE`` down to
        ``INNER_TOL_FRACTION * tol``, following the last fixed-point gap); a ``tol`` given here
        holds every inner solve to it. For PDHG ``residual_tol`` defaults to the same,
        ``max_iter`` to ``INNER_MAX_ITER``, and the multipliers, step size and primal weight are
        warm-started from the previous inner solve.
    time_limit : float, optional
        Wall-clock limit in seconds for the whole run (each inner solve gets the time left).

    Returns
    -------
    SolverResult
        Built by :func:`cvxmetric.solvers.result.make_result` with ``measure="kkt_residual"``:
        ``measure_value`` = :math:`\rho(M)` of the returned ``M`` (the last iterate whose bound
        was solved; ``inf`` when none was), ``objective`` :math:`\varphi(M)`, ``lower_bound`` None
        (no bound on the global minimum), ``multipliers`` the inner multipliers of :math:`L`,
        ``history`` :math:`\varphi(M^n)` per outer iteration, ``n_iter`` outer iterations,
        ``info``: ``inner_iterations``, ``bound_values`` (inner objectives), ``Ws`` (bound points
        used), ``W_final`` (:math:`W(M)`), ``inner_converged``, ``inner_gaps`` (each inner
        solve's certified gap), ``fixed_point_gaps`` (:math:`\rho(M^n)` per certified iterate),
        ``fixed_point_bound`` (:math:`L` of the returned point).
    """
    if not isinstance(model, FantopeModel):
        raise TypeError(f"model must be a FantopeModel; got {type(model).__name__}")
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**6)
    tol = check_positive(tol, "tol")
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    if inner not in INNER_SOLVERS:
        raise ValueError(f"inner must be one of {sorted(INNER_SOLVERS)}; got {inner!r}")
    solve_bound = INNER_SOLVERS[inner]
    inner_opts = dict(inner_options or {})
    inner_opts.setdefault("solver_name", f"fantope-mm-inner-{inner}")
    scheduled = "tol" not in inner_opts          # a fixed inner tol switches the schedule off
    if inner == "pdhg":
        inner_opts.setdefault("max_iter", INNER_MAX_ITER)
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
    tight = W0 is None and M is not None      # W = W(M): the bound's solve certifies M
    phi, bounds, Ws, inner_iters, inner_ok, inner_gaps, rhos = [], [], [], [], [], [], []
    certified = None        # (M, phi, rho, L, y) of the last iterate whose bound was solved
    y_prev = None
    res = None
    inner_tols = []
    last_inner_ok = True
    timed_out = False
    for _ in range(max_iter):
        bound = model.bound(W)
        opts = dict(inner_opts)
        if time_limit is not None:
            left = time_limit - (time.perf_counter() - t0)
            if left <= 0:
                timed_out = True
                break
            opts["time_limit"] = min(left, opts.get("time_limit", left))
        if scheduled:
            opts["tol"] = inner_tolerance(tol, rhos[-1] if rhos else None)
        if inner == "pdhg":
            opts.setdefault("residual_tol", opts["tol"])
            if res is not None:       # warm start: multipliers, step size and primal weight
                for key, value in (("y0", y_prev), ("step_size", res.info.get("step_size")),
                                   ("primal_weight", res.info.get("primal_weight"))):
                    if value is not None and key not in inner_opts:
                        opts[key] = value
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)   # reported through the outer result
            res = solve_bound(bound, M0=M, **opts)
        inner_tols.append(opts["tol"])
        lb = result_lower_bound(res)
        y_prev = _multipliers(res)
        last_inner_ok = bool(res.converged)
        inner_gaps.append(relative_gap(res.objective, lb))
        if tight:
            phi_M = model.value(M)
            rho = relative_gap(phi_M, lb)
            rhos.append(rho)
            certified = (M, phi_M, rho, lb, y_prev, W)
            if rho <= tol:
                break
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
        W, tight = fantope_projector(M, model.k), True
        if not last_inner_ok:
            break     # the inner solver spent its budget uncertified: no later rho can be trusted more
    if certified is not None and rhos and rhos[-1] <= tol:
        # the certifying solve is recorded like the others: its bound point W(M) and the bound's
        # value at the returned point M (= phi(M), the bound being tight there)
        Ws.append(W)
        bounds.append(certified[1])
        inner_iters.append(res.n_iter)
        inner_ok.append(res.converged)
    if certified is not None:
        M_out, phi_out, rho_out, lb_out, y_out, _ = certified
    else:
        M_out = M if M is not None else np.zeros((model.d, model.d))   # no inner solve ran
        phi_out, rho_out, lb_out, y_out = model.value(M_out), math.inf, None, y_prev
    stop = "time_limit" if timed_out else ("max_iter" if last_inner_ok else "inner_not_converged")
    return make_result("fantope-mm", objective=phi_out, measure="kkt_residual", tol=tol, stop_reason=stop,
                       M=M_out, measure_value=rho_out, multipliers=y_out, n_iter=len(Ws), history=phi,
                       time=time.perf_counter() - t0,
                       info={"inner_iterations": inner_iters, "bound_values": bounds, "Ws": Ws,
                             "W_final": fantope_projector(M_out, model.k), "inner_converged": inner_ok,
                             "inner_gaps": inner_gaps, "inner_tols": inner_tols, "fixed_point_gaps": rhos, "fixed_point_bound": lb_out,
                             "k": model.k},
                       detail="measure: MM fixed-point gap (a critical point of the DC objective)")

