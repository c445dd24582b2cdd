r"""The one result contract of every fast solver (modelled on :class:`scipy.optimize.OptimizeResult`).

A solver's ``converged=True`` is never a stopping heuristic ("the objective stopped improving",
"the step got small"): it means that a **scale-invariant optimality measure**, computed apart
from the stopping heuristics, is within the solver's tolerance. Two measures exist:

* ``"certified_gap"`` — :func:`cvxmetric.certificates.relative_gap` between the returned
  objective (a feasible point's value) and a lower bound computed from multipliers repaired to
  exact dual feasibility; the bound is ``lower_bound``, the multipliers ``multipliers``;
* ``"kkt_residual"`` — a relative KKT residual of the returned point (each solver documents its
  normalisation, always by the size of the terms it balances, never by ``max(1, ...)``), used
  where no dual bound exists (e.g. a stationary point of a non-convex objective).

Every solver builds its result with :func:`make_result`, which derives ``converged``, ``status``
and ``message`` from the measure, so the rule cannot differ between solvers, and issues a
:class:`~cvxmetric.exceptions.ConvergenceWarning` for any result that is not converged.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from cvxmetric.certificates import WRONG_CERTIFICATE_RTOL, relative_gap
from cvxmetric.constraints import ConstraintSet
from cvxmetric.exceptions import ConvergenceWarning

__all__ = ["SolverResult", "ConvergenceWarning", "make_result", "MEASURES",
           "STOP_REASONS", "ENGINE_HOOKS"]

#: The optimality measures a solver may certify its answer with (see the module docstring).
MEASURES = ("certified_gap", "kkt_residual")

#: Why a solver stopped when it is not converged (``status``); a converged result has status
#: ``"converged"``.
STOP_REASONS = ("max_iter", "time_limit", "stalled", "inner_not_converged", "not_certified")

#: Keyword arguments of the solver engines that a ``solve_<method>`` facade sets itself (the
#: result's name, the Fantope term and stationarity hook, LMNN's impostor oracle): never options
#: of a facade (:func:`cvxmetric._checks.keyword_options` excludes them).
ENGINE_HOOKS = frozenset({"solver_name", "extra", "oracle", "stationarity"})


@dataclass
class SolverResult:
    """What a fast solver returns.

    Attributes
    ----------
    solver : str
        Name of the algorithm (e.g. ``"qwise-pdhg"``).
    M : ndarray, shape (d, d), or None
        The learned PSD matrix (None for vector models, whose point is ``w``).
    w : ndarray or None
        The learned vector (vector models, BoostMetric weights, ...).
    objective : float
        The solver's own value of the objective at the returned point.
    n_iter : int
        Iterations performed.
    converged : bool
        ``measure_value <= tol`` (see the module docstring). False comes with a
        :class:`~cvxmetric.exceptions.ConvergenceWarning`.
    history : ndarray
        Objective per iteration (see each solver's docstring for what is recorded).
    time : float
        Wall-clock seconds.
    info : dict
        Solver-specific extras (step sizes, active-set sizes, ...). Nothing that decides a
        verdict lives here: the harness reads only the named fields.
    status : str
        ``"converged"`` or one of :data:`STOP_REASONS`.
    message : str
        One human-readable sentence: why the solver stopped and what its measure reads.
    measure : str or None
        The optimality measure, one of :data:`MEASURES`.
    measure_value : float or None
        Its value at the returned point.
    tol : float or None
        The tolerance ``measure_value`` was held to.
    lower_bound : float or None
        A certified lower bound on the optimal value (None where no certificate exists).
    certified_gap : float or None
        ``relative_gap(objective, lower_bound)`` (None without a lower bound).
    multipliers : ndarray or None
        The dual variables (one name across methods: hinge multipliers, ITML's lambda, the
        BoostMetric triplet weights u, ...).
    working_set : ConstraintSet or None
        For a constraint set that is searched rather than materialised (LMNN's impostor
        triplets, ``impostors="search"``): the rows the solver held at the returned point, every
        row violated there included. None when the solver held the full set.
    """

    solver: str
    M: Optional[np.ndarray]
    w: Optional[np.ndarray]
    objective: float
    n_iter: int
    converged: bool
    history: np.ndarray
    time: float
    info: dict = field(default_factory=dict)
    status: str = ""
    message: str = ""
    measure: Optional[str] = None
    measure_value: Optional[float] = None
    tol: Optional[float] = None
    lower_bound: Optional[float] = None
    certified_gap: Optional[float] = None
    multipliers: Optional[np.ndarray] = None
    working_set: Optional[ConstraintSet] = None

    @property
    def point(self) -> np.ndarray:
        """``M`` for matrix models, ``w`` otherwise."""
        return self.M if self.M is not None else self.w

    @property
    def success(self) -> bool:
        """scipy's name for :attr:`converged`."""
        return self.converged


def make_result(solver: str, *, objective: float, measure: str, tol: float, stop_reason: str,
                M: Optional[np.ndarray] = None, w: Optional[np.ndarray] = None,
                measure_value: Optional[float] = None, lower_bound: Optional[float] = None,
                multipliers=None, n_iter: int = 0, history=(), time: float = 0.0,
                info: Optional[dict] = None, detail: str = "", warn: bool = True,
                reference: Optional[float] = None) -> SolverResult:
    r"""Build a :class:`SolverResult` whose verdict follows from its optimality measure.

    Parameters
    ----------
    solver : str
        Name of the algorithm.
    objective : float
        Objective at the returned (feasible) point.
    measure : {"certified_gap", "kkt_residual"}
        The optimality measure. For ``"certified_gap"``, ``measure_value`` defaults to
        ``relative_gap(objective, lower_bound, reference)``.
    tol : float
        The tolerance: ``converged = measure_value <= tol``.
    stop_reason : str
        Why the iteration ended, reported as the status when the result is not converged
        (one of :data:`STOP_REASONS`; a solver whose own test held but whose measure does not
        pass says ``"not_certified"``).
    M, w : ndarray, optional
        The returned point.
    measure_value : float, optional
        Value of the measure (required for ``"kkt_residual"``).
    lower_bound : float, optional
        Certified lower bound on the optimum.
    multipliers : array_like, optional
        Dual variables.
    n_iter, history, time, info
        As in :class:`SolverResult`.
    detail : str
        Extra words for the message (and the warning).
    warn : bool
        Issue a :class:`ConvergenceWarning` when not converged (inner solves of an outer loop
        pass False and report through the outer result).
    reference : float, optional
        The problem's objective at M = 0, against which a zero optimum is certified
        (:func:`cvxmetric.certificates.relative_gap`).
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}; got {measure!r}")
    if stop_reason not in STOP_REASONS and stop_reason != "converged":
        raise ValueError(f"stop_reason must be one of {STOP_REASONS}; got {stop_reason!r}")
    objective = float(objective)
    gap = None if lower_bound is None else relative_gap(objective, lower_bound, reference)
    if measure == "certified_gap" and measure_value is None:
        measure_value = math.inf if gap is None else gap
    if measure_value is None:
        raise ValueError(f"measure {measure!r} needs measure_value")
    measure_value = float(measure_value)
    wrong = gap is not None and gap < -WRONG_CERTIFICATE_RTOL
    converged = bool(math.isfinite(measure_value) and measure_value <= tol and not wrong)
    status = "converged" if converged else (stop_reason if stop_reason != "converged" else "not_certified")
    if wrong:
        status = "not_certified"
        detail = (f"the lower bound {lower_bound:.6g} exceeds the objective {objective:.6g}: a wrong certificate "
                  f"or an infeasible point") + (f"; {detail}" if detail else "")
    words = f"{measure.replace('_', ' ')} {measure_value:.3g} {'<=' if converged else '>'} tol {tol:.3g}"
    if converged:
        message = f"{solver}: converged after {n_iter} iterations ({words})"
    else:
        message = f"{solver}: stopped ({status.replace('_', ' ')}) after {n_iter} iterations ({words})"
    if detail:
        message += f"; {detail}"
    result = SolverResult(solver=solver, M=M, w=w, objective=objective, n_iter=int(n_iter),
                          converged=converged, history=np.asarray(history, dtype=np.float64),
                          time=float(time), info=dict(info or {}), status=status, message=message,
                          measure=measure, measure_value=measure_value, tol=float(tol),
                          lower_bound=None if lower_bound is None else float(lower_bound),
                          certified_gap=gap,
                          multipliers=None if multipliers is None else np.asarray(multipliers, dtype=np.float64))
    if warn and not converged:
        warnings.warn(message + "; raise max_iter, or check the problem's scaling", ConvergenceWarning,
                      stacklevel=2)
    return result
