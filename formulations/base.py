"""The record every formulation builder returns, and the one way to solve it.

A :class:`Formulation` holds the cvxpy ``Problem``, its variables, its *named* constraints (the
KKT checks read their dual values by name), and ``value_at``: the objective at a given point
with every auxiliary variable (slack) minimised in closed form, evaluated through cvxpy
expressions built from the same pieces as the problem. ``value_at`` is how the harness scores
a fast solver's output with the ground truth's own definition of the objective.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import cvxpy as cp
import numpy as np

__all__ = ["Formulation", "ReferenceSolution", "Normalization", "SOLVER_OPTIONS", "symmetric_parameter"]

#: Options per cvxpy solver used for ground truth.
#: Clarabel's default tolerances (1e-8) stall at a duality gap of ~2e-8 on some of these SDPs
#: ("AlmostSolved", cvxpy's optimal_inaccurate); 1e-7 is reached cleanly and is still far
#: tighter than every check of the harness.
#: SCS's default eps (1e-4) leaves relative errors around 1e-4..1e-3 on these SDPs, too loose
#: for an oracle: 1e-7 makes it agree with Clarabel to ~1e-5 at a few times the cost.
SOLVER_OPTIONS: dict[str, dict[str, Any]] = {
    "CLARABEL": {"tol_gap_abs": 1e-7, "tol_gap_rel": 1e-7, "tol_feas": 1e-7},
    "SCS": {"eps_abs": 1e-7, "eps_rel": 1e-7, "max_iters": 200_000},
}

#: cvxpy statuses accepted as a solved problem.
OPTIMAL_STATUSES = ("optimal",)


@dataclass
class ReferenceSolution:
    """Outcome of one cvxpy solve of a :class:`Formulation`.

    Attributes
    ----------
    solver : str
    status : str
        cvxpy's status string (``"optimal"`` when solved).
    value : float or None
        The problem's optimal value as reported by cvxpy.
    point : ndarray or None
        The main variable's value (``M``, or ``w`` for vector models).
    compile_time, solve_time : float
        Seconds spent by cvxpy canonicalisation and by the solver.
    duals : dict
        Dual values of the named constraints (copied after the solve).
    aux : dict
        Values of the other variables (slacks, ...).
    iterations : int or None
        The solver's iteration count, when it reports one.
    """

    solver: str
    status: str
    value: float | None
    point: np.ndarray | None
    compile_time: float
    solve_time: float
    duals: dict = field(default_factory=dict)
    aux: dict = field(default_factory=dict)
    iterations: int | None = None

    @property
    def ok(self) -> bool:
        return self.status in OPTIMAL_STATUSES

    @property
    def total_time(self) -> float:
        return self.compile_time + self.solve_time


@dataclass(frozen=True)
class Normalization:
    """A rescaled twin of a :class:`Formulation` (see ``Formulation.normalize``).

    Attributes
    ----------
    formulation : Formulation
        The twin: the same problem with data and weights multiplied by scalars.
    point_back : callable
        ``point_back(twin_point) -> point`` of the original problem (exact).
    value_scale : float
        ``value_at(point_back(P)) == value_scale * twin.value_at(P)`` for every P (exact up to
        round-off); bounds of the twin map back the same way.
    description : str
        The scalings, for reports.
    """

    formulation: "Formulation"
    point_back: Callable[[np.ndarray], np.ndarray]
    value_scale: float
    description: str = ""


def symmetric_parameter(d: int, name: str = "M_eval") -> cp.Parameter:
    """A symmetric (d, d) parameter used to evaluate an objective expression at a given M."""
    return cp.Parameter((d, d), symmetric=True, name=name)


@dataclass(eq=False)
class Formulation:
    """A cvxpy statement of one method on one data set.

    Attributes
    ----------
    method : str
        Method name (``"qwise"``, ...).
    problem : cvxpy.Problem
    variables : dict of str to cvxpy.Variable
        ``variables[point_name]`` is the main variable.
    constraints : dict of str to cvxpy.Constraint
        Named constraints (``"psd"``, ``"hinge"``, ``"slack_nonneg"``, ...).
    point_name : str
        ``"M"`` or ``"w"``.
    evaluate : callable
        ``evaluate(point) -> float``: the objective with slacks minimised, through cvxpy.
    model : object
        The numpy model the fast solvers read (a ``HingeModel``, ...), when there is one.
    info : dict
        Anything else a verification check needs.
    solver_options : dict
        Per-solver option overrides for this problem (on top of ``SOLVER_OPTIONS``).
    make_feasible : callable or None
        ``make_feasible(point) -> point``: maps a solver's (slightly infeasible) point onto the
        feasible set (default: PSD projection of a matrix point, identity otherwise) so that its
        ``value_at`` is an upper bound on the optimum.
    dual_bound : callable or None
        ``dual_bound(solution) -> float or None``: a certified lower bound on the optimum computed
        by project code (numpy) from the named duals of a :class:`ReferenceSolution` of *this*
        formulation, repaired to exact dual feasibility. None: the method has no certificate.
    normalize : callable or None
        ``normalize() -> Normalization``: an equivalent, well-scaled twin of this problem (data and
        weights multiplied by scalars) whose points and values map back exactly. The solve ladder
        (:mod:`cvxmetric.formulations.ladder`) solves the twin first.
    refine : callable or None
        ``refine(solution, rtol) -> ReferenceSolution``: a first-order method warm-started from a
        solve's point and duals, run until its own certified gap is within a fraction of ``rtol``;
        it returns every named dual and auxiliary value, so that the ladder certifies (and the
        KKT checks read) it like any cvxpy solve. None: the problem has no such method.
    reference_value : float or None
        The objective at the problem's trivial point (a hinge problem's M = 0: every constraint at
        its margin): the size of the objective's terms, against which a value near zero is
        measured (:func:`cvxmetric.certificates.relative_gap`'s ``reference``). None where the
        problem has no trivial point.
    """

    method: str
    problem: cp.Problem
    variables: dict
    constraints: dict
    point_name: str
    evaluate: Callable[[np.ndarray], float]
    model: Any = None
    info: dict = field(default_factory=dict)
    solver_options: dict = field(default_factory=dict)
    solutions: dict = field(default_factory=dict)
    make_feasible: Callable[[np.ndarray], np.ndarray] | None = None
    dual_bound: Callable[["ReferenceSolution"], float | None] | None = None
    normalize: Callable[[], "Normalization"] | None = None
    refine: Callable[["ReferenceSolution", float], "ReferenceSolution"] | None = None
    reference_value: float | None = None

    @property
    def point(self) -> cp.Variable:
        return self.variables[self.point_name]

    def feasible_point(self, point) -> np.ndarray:
        """``point`` mapped onto the feasible set (see ``make_feasible``)."""
        point = np.asarray(point, dtype=np.float64)
        if self.make_feasible is not None:
            return np.asarray(self.make_feasible(point), dtype=np.float64)
        if self.point_name == "M":
            from cvxmetric.linalg import project_psd
            return project_psd(point)
        return point

    def lower_bound(self, solution: "ReferenceSolution") -> float | None:
        """Certified lower bound from a solution's duals (None without ``dual_bound`` or duals)."""
        if self.dual_bound is None or solution is None or not solution.duals:
            return None
        bound = self.dual_bound(solution)
        return None if bound is None or not np.isfinite(bound) else float(bound)

    def value_at(self, point) -> float:
        """Objective at ``point`` with every auxiliary variable minimised in closed form."""
        return float(self.evaluate(point))

    def solve(self, solver: str = "CLARABEL", **options) -> ReferenceSolution:
        """Solve with a cvxpy solver; return (and remember) a :class:`ReferenceSolution`.

        A non-optimal status is reported in the result, never raised (the ladder certifies solves
        by their interval); solver exceptions become the status ``"error: ..."``.
        """
        solver = solver.upper()
        opts = dict(SOLVER_OPTIONS.get(solver, {}))
        opts.update(self.solver_options.get(solver, {}))
        opts.update(options)
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                self.problem.solve(solver=solver, canon_backend="SCIPY", **opts)
            status = str(self.problem.status)
        except Exception as exc:   # a solver crash is a status, never a traceback in a report
            status = f"error: {type(exc).__name__}: {exc}"
        total = time.perf_counter() - t0
        stats = getattr(self.problem, "solver_stats", None)
        solve_time = getattr(stats, "solve_time", None) if stats is not None else None
        if solve_time is None or not np.isfinite(solve_time):
            solve_time = total
        solve_time = min(float(solve_time), total)
        iterations = getattr(stats, "num_iters", None) if stats is not None else None
        ok = status in OPTIMAL_STATUSES
        # Points and duals are kept whatever the status label says: the ladder certifies them by
        # their own interval (cvxmetric.formulations.ladder), so an "optimal_inaccurate" point can still be
        # certified and an "optimal" one can still be rejected.
        point = None
        duals = {}
        aux = {}
        if not status.startswith("error") and self.point.value is not None:
            point = np.array(self.point.value, dtype=np.float64)
            for name, con in self.constraints.items():
                try:
                    dv = con.dual_value
                except Exception:   # cvxpy raises when a dual was never set
                    dv = None
                duals[name] = None if dv is None else np.array(dv, dtype=np.float64)
            if any(v is None for v in duals.values()):
                duals = {}
            for name, var in self.variables.items():
                if name != self.point_name and var.value is not None:
                    aux[name] = np.array(var.value, dtype=np.float64)
        sol = ReferenceSolution(solver, status, float(self.problem.value) if ok else None, point,
                                total - solve_time, solve_time, duals, aux,
                                None if iterations is None else int(iterations))
        self.solutions[solver] = sol
        return sol
