r"""The one solve ladder of the ground truth: certified intervals, not status labels.

A cvxpy solve is *usable* when project code certifies it: the solver's point is made feasible
(``Formulation.feasible_point``) and scored with ``value_at`` (the upper end :math:`u`), and its
duals give a lower bound repaired to exact dual feasibility (``Formulation.lower_bound``, the
lower end :math:`\ell`). The ground truth is the interval :math:`[\ell, u]`; it certifies
:math:`p^*` when :func:`cvxmetric.certificates.relative_gap` of the interval is within the row's
tolerance — whatever the solver called its run ("optimal" solves were measured 47 % and 246 %
off on LMNN and ITML with rescaled data; "optimal_inaccurate" solves are often fine).

Rungs are tried in order until one certifies (the tightest interval seen is kept either way):

1. the **normalized** twin (``Formulation.normalize``: data and weights multiplied by scalars so
   that the problem's numbers are of order one; values and points map back exactly) with
   Clarabel at the ground-truth tolerances;
2. the same Clarabel solve **refined** (``Formulation.refine``, where the problem has one: a
   first-order method warm-started from its point and duals; the solve is reused, not repeated):
   interior-point solves of LMNN stall short of the tolerance, and on 60 breast-cancer points
   with 30 features SCS, the next rung, took 471 s to certify 4.5e-7 where the refinement
   certifies 5e-7 in 7,136 PDHG iterations (11-22 s; ``python -m benchmarks.truth``). A
   refinement whose own interval certifies is reported with its own upper end, point and solve
   (a consistent primal-dual pair for the KKT checks) and the best lower end;
3. the normalized twin with SCS at high accuracy (its point projected before scoring);
4. the original problem with Clarabel (a problem already well scaled by its author);
5. the normalized twin with Clarabel at its default (tighter) tolerances and more iterations.

Each row of the report records the rung that certified it.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from cvxmetric.certificates import Bounds, relative_gap

from .base import Formulation, ReferenceSolution

__all__ = ["Rung", "LADDER", "CertifiedTruth", "Attempt", "solve_certified"]


@dataclass(frozen=True)
class Rung:
    """One way of solving a formulation: a cvxpy solver, its options, which twin, and whether the
    solve is refined (``Formulation.refine``; the rung is skipped for a problem without it, and an
    earlier rung's solve with the same solver of the same twin is reused)."""

    name: str
    solver: str
    options: dict = field(default_factory=dict)
    normalized: bool = True
    refine: bool = False


#: The ladder (see the module docstring). Options add to ``cvxmetric.formulations.base.SOLVER_OPTIONS``.
LADDER = (
    Rung("normalized/clarabel", "CLARABEL"),
    Rung("normalized/clarabel+refine", "CLARABEL", refine=True),
    Rung("normalized/scs", "SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 500_000}),
    Rung("original/clarabel", "CLARABEL", normalized=False),
    Rung("normalized/clarabel-tight", "CLARABEL",
         {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9, "max_iter": 500}),
)


@dataclass
class Attempt:
    """What one rung produced (for the report): ``time`` is the rung's seconds, of which
    ``time_compile`` went to cvxpy's canonicalisation and ``time_solve`` to the solver (a reused
    solve counts zero; a refinement's seconds are solve time; every timing field's name starts
    with ``time``, as in the report's rows); ``iterations`` are the solver's (the refinement's own
    for a refining rung), when it reports them."""

    rung: str
    status: str
    lower: Optional[float]
    upper: Optional[float]
    gap: float
    time: float
    error: str = ""
    time_compile: float = 0.0
    time_solve: float = 0.0
    iterations: Optional[int] = None


@dataclass
class CertifiedTruth:
    """The ground truth of one formulation: a certified interval and where it came from.

    Attributes
    ----------
    bounds : Bounds
        The tightest interval found (best lower, best upper over all rungs tried).
    point : ndarray or None
        The feasible point (original coordinates) whose value is ``bounds.upper``.
    rung : str or None
        The rung whose interval met the tolerance (None: none did).
    attempts : list of Attempt
        Every rung tried, in order.
    formulation : Formulation or None
        The formulation (original or normalized twin) of the certifying solve, and
    solution : ReferenceSolution or None
        that solve (its duals are in the twin's own units: use relative KKT residuals).
    rtol : float
        The tolerance the interval was held to.
    """

    bounds: Bounds
    point: Optional[np.ndarray]
    rung: Optional[str]
    attempts: list
    formulation: Optional[Formulation]
    solution: Optional[ReferenceSolution]
    rtol: float

    @property
    def certified(self) -> bool:
        return self.bounds.certifies(self.rtol)

    @property
    def gap(self) -> float:
        return self.bounds.gap

    @property
    def time(self) -> float:
        return float(sum(a.time for a in self.attempts))

    @property
    def p_star(self) -> Optional[float]:
        """The upper end (a feasible point's value), the number gaps are measured against."""
        return self.bounds.upper


def _twin(form: Formulation, cache: dict):
    if "twin" not in cache:
        cache["twin"] = form.normalize() if form.normalize is not None else None
    return cache["twin"]


def _refinable(form: Formulation, rung: Rung, cache: dict):
    """The formulation a refining rung would refine, or None when it has no ``refine``."""
    norm = _twin(form, cache) if rung.normalized else None
    used = norm.formulation if norm is not None else form
    return used if used.refine is not None else None


def _solve(used: Formulation, rung: Rung, rtol: float):
    """The rung's solution of ``used`` and its (compile, solve) seconds."""
    if not rung.refine:
        sol = used.solve(rung.solver, **rung.options)
        return sol, sol.compile_time, sol.solve_time
    base = used.solutions.get(rung.solver.upper())
    compile_time = solve_time = 0.0
    if base is None:
        base = used.solve(rung.solver, **rung.options)
        compile_time, solve_time = base.compile_time, base.solve_time
    sol = used.refine(base, rtol)
    return sol, compile_time, solve_time + sol.total_time


def _attempt(form: Formulation, rung: Rung, cache: dict, rtol: float):
    """Solve one rung; return (Attempt, formulation used, solution, lower, upper, point)."""
    norm = _twin(form, cache) if rung.normalized else None
    used = norm.formulation if norm is not None else form
    scale = norm.value_scale if norm is not None else 1.0
    t0 = time.perf_counter()
    sol, compile_time, solve_time = _solve(used, rung, rtol)
    lower = upper = None
    point = None
    error = ""
    try:
        if sol.point is not None and np.all(np.isfinite(sol.point)):
            twin_point = used.feasible_point(sol.point)
            point = norm.point_back(twin_point) if norm is not None else twin_point
            point = form.feasible_point(point)
            upper = form.value_at(point)
            if not math.isfinite(upper):
                upper, point = None, None
        lb = used.lower_bound(sol)
        lower = None if lb is None else scale * lb
    except Exception as exc:   # a certificate that cannot be computed is a failed rung, not a crash
        error = f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - t0
    att = Attempt(rung.name, sol.status, lower, upper, relative_gap(upper, lower), elapsed, error,
                  compile_time, solve_time, sol.iterations)
    return att, used, sol, lower, upper, point


def solve_certified(form: Formulation, rtol: float, ladder=LADDER) -> CertifiedTruth:
    """Climb the ladder until a rung's interval is within ``rtol`` (see the module docstring).

    Never raises for a solver failure: a rung that fails is recorded in ``attempts`` and the next
    one is tried; when none certifies, the result has ``rung=None`` and the tightest interval.
    """
    cache: dict = {}
    attempts = []
    best_lower, best_upper, best_point = None, None, None
    cert_form = cert_sol = None
    rung_name = None
    for rung in ladder:
        if not rung.normalized and form.normalize is None:
            continue   # the original problem is already the first rung's problem
        if rung.refine and _refinable(form, rung, cache) is None:
            continue   # no refinement for this problem
        att, used, sol, lower, upper, point = _attempt(form, rung, cache, rtol)
        attempts.append(att)
        if lower is not None and (best_lower is None or lower > best_lower):
            best_lower = lower
        own = rung.refine and Bounds(lower, upper).certifies(rtol)
        if upper is not None and (own or best_upper is None or upper < best_upper):
            # a refinement that certifies on its own is reported with its own point and solve: a
            # consistent primal-dual pair for the KKT checks (the start it refined may have a
            # lower value but inaccurate duals: Clarabel's "AlmostSolved" exits)
            best_upper, best_point = upper, point
            cert_form, cert_sol = used, sol
        if Bounds(best_lower, best_upper).certifies(rtol):
            rung_name = rung.name
            break
    return CertifiedTruth(Bounds(best_lower, best_upper), best_point, rung_name, attempts,
                          cert_form, cert_sol, rtol)
