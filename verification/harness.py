r"""The verification harness: certified ground truth vs fast solvers, one row per method x instance x solver.

Every instance is a :class:`cvxmetric.problems.Problem` (:func:`cvxmetric.problems.problem_of`): it
builds the formulation of the ground truth and runs the fast solvers, one row per documented run
(:meth:`~cvxmetric.problems.Problem.runs`, :func:`fast_solvers`); the method's
:class:`~cvxmetric.verification.registry.MethodSpec` adds the checks and the thresholds.

For every row it measures (design §6):

* :math:`p^*` as a **certified interval** :math:`[\ell, u]` computed by project code
  (:func:`cvxmetric.formulations.ladder.solve_certified`: a feasible point's ``value_at`` and a repaired
  dual bound), with the ladder rung that certified it; SCS's point, made feasible and scored with
  ``value_at``, as a second opinion;
* ``f_fast = value_at(point)`` (cvxpy's expression) next to the solver's own objective;
* the relative gap of the fast point to the best certified value,
  ``relative_difference(f_fast, u)`` (denominator :math:`\max(|f|, |u|)`,
  :mod:`cvxmetric.certificates`), and that ``f_fast`` is not below the certified lower bound;
* the fast solver's own verdict read from its result contract (``converged``, ``measure``,
  ``lower_bound``): its certificate is recomputed against ``value_at`` and checked to lie below
  the ground truth's upper end;
* KKT residuals of the ground truth from its named duals, and of the fast point;
* times and speed-up ratios; method-specific checks (theorems, scale identities).

**Verdicts.** A row's ``verdict`` is ``"pass"`` (every check passed), ``"fail"`` (a check of the
fast point failed) or ``"undecided"`` (only checks of the oracle failed: the ground truth could not
be certified to the width the verdict needs, or its own diagnostics failed — nothing is then said
about the fast point). ``passed`` is True exactly on ``"pass"``. See :func:`verdict`.

**The harness never crashes.** Every stage of a row runs guarded: an exception becomes a failed
check named after the stage, with the reason in the row's ``errors``; the table still prints.

:func:`score_point` scores **any** point (e.g. another library's M) against the ground truth.
"""
from __future__ import annotations

import functools
import math
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import numpy as np

from cvxmetric.certificates import relative_difference
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.instances import get_instance, list_instances
from cvxmetric.parallel import BLAS_THREADS as PARALLEL_BLAS_THREADS, run_tasks
from cvxmetric.formulations.ladder import LADDER, CertifiedTruth, solve_certified

from . import tolerances as tol
from cvxmetric.problems import problem_of

from .registry import FastSolver, MethodSpec, get_spec, list_methods

__all__ = ["Check", "verdict", "TRUTH_STAGES", "verify_method", "verify_instance", "verify_cases", "verify_result", "score_point", "ReferenceCache", "fast_solvers",
           "REQUIRED_KEYS", "default_cases", "find_instance_method", "BLAS_THREADS"]

#: Stable keys of every row (the JSON output documented in docs/report.md).
REQUIRED_KEYS = ("method", "instance", "solver", "d", "n_constraints", "p_star_lower", "p_star_upper",
                 "truth_gap", "truth_rung", "p_star_scs", "f_fast", "rel_gap", "kkt_truth", "kkt_fast",
                 "time_truth", "time_scs", "time_fast", "passed", "checks", "errors")

#: BLAS threads of every solve in the report (:data:`cvxmetric.parallel.BLAS_THREADS`). The
#: harness' matrices are small (d <= 64): one thread is as fast, and multi-threaded BLAS spins
#: (measured 10-30x slower per call on a loaded 2-core machine, e.g. L-BFGS-B evaluations 10 ms
#: instead of 0.3 ms). Parallel runs (:func:`verify_cases`) pin every worker to it too: the
#: parallelism is across cases.
BLAS_THREADS = PARALLEL_BLAS_THREADS

#: Checks of the oracle itself, whatever the method: the ground truth's build and certified solve
#: (guard stages ``build``, ``truth``), SCS's second opinion (``scs``), the interval's width
#: (``truth_certified``), the truth's KKT residuals (``kkt_truth``) and SCS's agreement with it.
#: A method adds the names of its own truth-side extra checks (``MethodSpec.truth_checks``).
TRUTH_STAGES = frozenset({"build", "truth", "scs", "truth_certified", "kkt_truth", "scs_agreement"})

#: The three verdicts of a row (:func:`verdict`).
VERDICTS = ("pass", "fail", "undecided")

#: The SCS rung of the ladder, used for the second opinion.
_SCS_RUNG = next(r for r in LADDER if r.solver == "SCS")


@dataclass
class Check:
    """One numeric check: passes when ``low <= value <= tol`` (``value`` None fails)."""

    value: Optional[float]
    tol: float
    low: float = -math.inf

    @property
    def passed(self) -> bool:
        return bool(self.value is not None and math.isfinite(self.value) and self.low <= self.value <= self.tol)

    def as_dict(self) -> dict:
        return {"value": _num(self.value), "tol": self.tol, "passed": bool(self.passed)}


def verdict(checks: dict, errors: Iterable[str], truth_side: Iterable[str], truth_errors: Iterable[str] = ()) -> str:
    """The verdict of a row from its checks and errors.

    Parameters
    ----------
    checks : dict of str to Check or dict
        The row's checks (``Check`` objects or their ``as_dict()``).
    errors : iterable of str
        The row's error messages.
    truth_side : iterable of str
        Names of the checks of the oracle (:data:`TRUTH_STAGES` and the method's
        ``truth_checks``).
    truth_errors : iterable of str
        The errors that came from the oracle (its build and solves).

    Returns
    -------
    str
        ``"pass"`` when no check failed and there is no error; ``"undecided"`` when every failed
        check is a check of the oracle and every error came from it (the ground truth cannot decide:
        not a verdict on the fast point); ``"fail"`` otherwise.
    """
    failed = {name for name, c in checks.items() if not (c.passed if isinstance(c, Check) else c["passed"])}
    fast_errors = set(errors) - set(truth_errors)
    if not failed and not set(errors):
        return "pass"
    if failed <= set(truth_side) and not fast_errors:
        return "undecided"
    return "fail"


def _truth_side(spec: MethodSpec) -> frozenset:
    """Names of the oracle's checks in a row of ``spec``."""
    return TRUTH_STAGES | frozenset(spec.truth_checks)


def _num(x) -> Optional[float]:
    if x is None:
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


class _Guard:
    """Runs the stages of one row; an exception becomes a failed check and an error message."""

    def __init__(self):
        self.errors: list[str] = []
        self.checks: dict[str, Check] = {}

    def __call__(self, stage: str, fn: Callable, *args, default=None, **kw):
        try:
            return fn(*args, **kw)
        except Exception as exc:   # noqa: BLE001 - the harness reports, never crashes
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.errors.append(f"{stage}: {type(exc).__name__}: {exc} "
                               f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
            self.checks[stage] = Check(None, 0.0)
            return default


@dataclass
class _Reference:
    """Ground truth of one (method, instance): formulation, certified interval, SCS opinion."""

    form: Any
    truth: Optional[CertifiedTruth]
    p_star_scs: Optional[float]
    time_scs: Optional[float]
    errors: list


class ReferenceCache:
    """Builds and certifies each (method, instance, seed) ground truth once per process."""

    def __init__(self):
        self._store: dict = {}

    def get(self, spec: MethodSpec, inst) -> _Reference:
        key = (spec.name, inst.method, inst.name, inst.seed)
        if key not in self._store:
            self._store[key] = _solve_reference(spec, inst)
        return self._store[key]


_DEFAULT_CACHE = ReferenceCache()


def _scs_opinion(form) -> tuple[Optional[float], Optional[float]]:
    """SCS on the normalized twin (when there is one): its point made feasible and scored."""
    norm = form.normalize() if form.normalize is not None else None
    used = norm.formulation if norm is not None else form
    t0 = time.perf_counter()
    sol = used.solve(_SCS_RUNG.solver, **_SCS_RUNG.options)
    if sol.point is None or not np.all(np.isfinite(sol.point)):
        return None, time.perf_counter() - t0
    point = used.feasible_point(sol.point)
    if norm is not None:
        point = form.feasible_point(norm.point_back(point))
    return form.value_at(point), time.perf_counter() - t0


def _build(inst):
    """The formulation of ``inst``, built by its Problem (:func:`cvxmetric.problems.problem_of`)."""
    return problem_of(inst).formulation()


def _solve_reference(spec: MethodSpec, inst) -> _Reference:
    guard = _Guard()
    form = guard("build", _build, inst)
    truth = None if form is None else guard("truth", solve_certified, form, spec.truth_tolerance())
    p_scs, t_scs = (None, None)
    if form is not None:
        p_scs, t_scs = guard("scs", _scs_opinion, form, default=(None, None))
    return _Reference(form, truth, p_scs, t_scs, guard.errors)


def scs_difference(p_scs: float, p_star: float, reference: Optional[float]) -> float:
    r"""SCS's value against the certified :math:`p^*`: :math:`(p_{scs} - p^*) / \max(|p_{scs}|, |p^*|, F)`,
    :math:`F` = ``SCS_AGREEMENT_FLOOR`` times the size of the objective's terms (``reference``, the
    objective at the trivial point; no floor without one): SCS is accurate relative to the terms,
    not to an optimum far below them (``verification.tolerances.SCS_AGREEMENT_FLOOR``)."""
    if p_scs == p_star:
        return 0.0
    floor = 0.0 if reference is None else tol.SCS_AGREEMENT_FLOOR * abs(float(reference))
    return (p_scs - p_star) / max(abs(p_scs), abs(p_star), floor)


def _truth_checks(spec: MethodSpec, ref: _Reference, guard: _Guard) -> Optional[float]:
    """Checks of the ground truth itself; returns its largest KKT residual."""
    truth = ref.truth
    if truth is None:
        guard.checks["truth_certified"] = Check(None, spec.truth_tolerance())
        return None
    # a lower bound above the feasible value by more than round-off is a wrong certificate
    guard.checks["truth_certified"] = Check(truth.gap, truth.rtol, low=-tol.BELOW_LOWER_BOUND_RTOL)
    kkt_max = None
    if truth.solution is not None and truth.solution.duals:
        res = guard("kkt_truth", spec.kkt_truth, truth.formulation, truth.solution, default=None)
        if res is not None:
            kkt_max = max(res.values()) if res else 0.0
            guard.checks["kkt_truth"] = Check(kkt_max, tol.KKT_TRUTH_TOL)
    else:
        guard.checks["kkt_truth"] = Check(None, tol.KKT_TRUTH_TOL)
    if ref.p_star_scs is not None and truth.p_star is not None:
        guard.checks["scs_agreement"] = Check(scs_difference(ref.p_star_scs, truth.p_star, ref.form.reference_value),
                                              tol.SOLVER_AGREEMENT_RTOL, low=-tol.SOLVER_AGREEMENT_RTOL)
    return kkt_max


def _width_needed(truth: CertifiedTruth, rel_gap: Optional[float], gap_tol: float) -> float:
    r"""The interval width that decides a row's gap check: ``truth.rtol``, or wider when it proves the pass.

    With :math:`0 \le \ell \le u` the certified interval and :math:`f \ge \ell` the fast point's
    value, :math:`(f - \ell)/\max(f, \ell) \le (f - u)/\max(f, u) + (u - \ell)/u` (each fraction only
    grows when its denominator shrinks), so a width :math:`\le` ``gap_tol - rel_gap`` *proves* the
    fast point within ``gap_tol`` of :math:`p^*` (rel_gap to the upper end, the row's own gap check).
    A row whose gap check fails is decided by the upper end alone (a feasible value:
    :math:`f - p^* \ge f - u`). Measured on Qwise syn-d5 with
    X x 1e4 (a trace weight 2e-9 of the hinge weights in the normalized twin): every rung's interval
    is 1.5e-4 wide, the fast points are within 1e-5..4e-5 of its upper end, gap_tol 1e-3: decided.
    A negative lower end (BoostMetric's hinge objective :math:`-\rho + \nu 1^\top\xi`) keeps
    ``truth.rtol``.
    """
    lower = truth.bounds.lower
    if rel_gap is None or not math.isfinite(rel_gap) or rel_gap > gap_tol or lower is None or lower < 0.0:
        return truth.rtol
    return max(truth.rtol, gap_tol - max(rel_gap, 0.0))


def _run_fast(fs, inst):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        t0 = time.perf_counter()
        res = fs.run(inst)
        elapsed = time.perf_counter() - t0
    msgs = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    return res, elapsed, msgs


def _contract_checks(fs, res, f_fast: float, truth: Optional[CertifiedTruth], guard: _Guard) -> None:
    """The fast solver's own verdict, read from its result contract and re-checked."""
    has_measure = res.measure is not None and res.measure_value is not None and res.tol is not None
    guard.checks["result_contract"] = Check(0.0 if has_measure else 1.0, 0.0)
    if fs.expect_converged:
        guard.checks["converged"] = Check(0.0 if res.converged else 1.0, 0.0)
    else:   # not optimal by design: it must not claim convergence it does not have
        claims = bool(res.converged) and not (has_measure and res.measure_value <= res.tol)
        guard.checks["honest_verdict"] = Check(1.0 if claims else 0.0, 0.0)
    if res.lower_bound is None:
        return
    if res.converged:
        # the solver's certificate, recomputed against the ground truth's definition of the
        # objective: a converged solver's certified gap must be within the row's gap tolerance
        guard.checks["certified_gap"] = Check(relative_difference(f_fast, res.lower_bound), fs.gap_tol,
                                              low=-tol.BELOW_LOWER_BOUND_RTOL)
    if truth is not None and truth.p_star is not None:
        # a lower bound above a feasible value is a wrong certificate
        guard.checks["certificate_below_truth"] = Check(relative_difference(res.lower_bound, truth.p_star),
                                                        tol.BELOW_LOWER_BOUND_RTOL)


def _truth_guard(spec: MethodSpec, ref: _Reference) -> tuple[_Guard, Optional[float]]:
    """The ground truth's errors and checks, shared by every row of one (method, instance)."""
    truth_guard = _Guard()
    truth_guard.errors = list(ref.errors)
    for msg in ref.errors:
        truth_guard.checks[msg.split(":", 1)[0]] = Check(None, 0.0)
    return truth_guard, _truth_checks(spec, ref, truth_guard)


def _fast_row(spec: MethodSpec, inst, ref: _Reference, fs, truth_guard: _Guard, kkt_truth) -> dict:
    guard = _Guard()
    guard.errors = list(truth_guard.errors)
    guard.checks = dict(truth_guard.checks)
    form, truth = ref.form, ref.truth
    p_upper = truth.p_star if truth is not None else None
    run = guard("fast_solve", _run_fast, fs, inst, default=None)
    res, elapsed, warns = run if run is not None else (None, None, [])
    f_fast = rel_gap = kkt_fast = None
    if res is not None and form is not None:
        point = res.point
        f_fast = guard("value_at", form.value_at, point)
        if f_fast is not None:
            guard.checks["value_at_agreement"] = Check(abs(relative_difference(res.objective, f_fast)),
                                                       tol.VALUE_AT_RTOL)
            if p_upper is not None:
                rel_gap = relative_difference(f_fast, p_upper)
                guard.checks["rel_gap"] = Check(rel_gap, fs.gap_tol, low=-math.inf)
                guard.checks["truth_certified"] = Check(truth.gap, _width_needed(truth, rel_gap, fs.gap_tol),
                                                        low=-tol.BELOW_LOWER_BOUND_RTOL)
                # no feasible point can be below a certified lower bound
                guard.checks["above_truth_lower_bound"] = Check(
                    relative_difference(truth.bounds.lower, f_fast), tol.BELOW_LOWER_BOUND_RTOL)
            guard("contract", _contract_checks, fs, res, f_fast, truth, guard)
        if form.point_name == "M" and point is not None:
            M = np.asarray(point, dtype=np.float64)
            lam = np.linalg.eigvalsh(M)
            guard.checks["psd_feasible"] = Check(max(0.0, -lam[0]) / max(abs(lam[-1]), np.finfo(float).tiny),
                                                 tol.PSD_FEASIBILITY_TOL)
        if spec.kkt_fast is not None:
            kkt_fast = guard("kkt_fast", spec.kkt_fast, form, point)
            reason = getattr(kkt_fast, "reason", "")
            if reason and not (kkt_fast is not None and math.isfinite(kkt_fast)):
                guard.errors.append(f"kkt_fast: {reason}")
            if fs.kkt_tol is not None and "kkt_fast" not in guard.checks:
                guard.checks["kkt_fast"] = Check(kkt_fast, fs.kkt_tol)
        if spec.extra_checks is not None:
            extra = guard("extra_checks", spec.extra_checks, form, inst, res, truth, default={}) or {}
            for name, (value, t) in extra.items():
                guard.checks[name] = Check(value, t)
    t_fast = (res.time if res is not None and res.time else elapsed)
    t_truth = truth.time if truth is not None else None
    row = {
        "method": spec.name, "instance": inst.name, "seed": inst.seed, "solver": fs.name, "d": inst.d,
        "n_constraints": inst.n_constraints,
        "p_star_lower": _num(truth.bounds.lower) if truth else None,
        "p_star_upper": _num(p_upper), "truth_gap": _num(truth.gap) if truth else None,
        "truth_rung": truth.rung if truth else None, "p_star_scs": _num(ref.p_star_scs),
        "f_fast": _num(f_fast), "f_fast_self": _num(res.objective) if res is not None else None,
        "rel_gap": _num(rel_gap), "kkt_truth": _num(kkt_truth), "kkt_fast": _num(kkt_fast),
        "time_truth": _num(t_truth), "time_scs": _num(ref.time_scs), "time_fast": _num(t_fast),
        "speedup_truth": _num(t_truth / t_fast) if t_truth and t_fast else None,
        "speedup_scs": _num(ref.time_scs / t_fast) if ref.time_scs and t_fast else None,
        "n_iter": res.n_iter if res is not None else None,
        "converged": bool(res.converged) if res is not None else None,
        "status": res.status if res is not None else None,
        "measure": res.measure if res is not None else None,
        "measure_value": _num(res.measure_value) if res is not None else None,
        "lower_bound": _num(res.lower_bound) if res is not None else None,
        "certified_gap": _num(res.certified_gap) if res is not None else None,
        "warnings": warns,
        "truth_attempts": [a.__dict__ for a in truth.attempts] if truth is not None else [],
        "checks": {k: c.as_dict() for k, c in guard.checks.items()},
        "errors": guard.errors,
    }
    row["verdict"] = verdict(row["checks"], row["errors"], _truth_side(spec), truth_guard.errors)
    row["passed"] = row["verdict"] == "pass"
    return row


def _error_row(method: str, instance: str, seed: int, stage: str, exc: BaseException) -> dict:
    """A row for a case that could not even be set up (the report still prints)."""
    row = {k: None for k in REQUIRED_KEYS}
    row.update({"method": method, "instance": instance, "seed": seed, "solver": "-", "passed": False,
                "verdict": "fail",
                "checks": {stage: Check(None, 0.0).as_dict()},
                "errors": [f"{stage}: {type(exc).__name__}: {exc}"], "warnings": []})
    return row


def fast_solvers(problem) -> list[FastSolver]:
    """The rows a :class:`cvxmetric.problems.Problem` runs: one per documented run
    (:meth:`~cvxmetric.problems.Problem.runs`), labelled by
    :meth:`~cvxmetric.problems.Problem.run_label` and held to the thresholds of its algorithm
    (:meth:`~cvxmetric.problems.Problem.run_thresholds`)."""
    def row(run):
        held = problem.run_thresholds(run)
        return FastSolver(problem.run_label(run), lambda _inst: problem.execute(run), held.gap_tol,
                          held.kkt_tol, run.expect_converged)
    return [row(run) for run in problem.runs()]


def verify_instance(method: str, instance: str, *, cache: Optional[ReferenceCache] = None,
                    instance_method: Optional[str] = None, seed: int = 0) -> list[dict]:
    """All rows (one per fast solver, plus method-level rows) of one method on one instance.

    Never raises for a failure inside a row: see the module docstring. (An unknown method or
    instance name is a usage error and raises ``ValueError``.)
    """
    spec = get_spec(method)
    if spec.load_error is not None:
        return [_error_row(spec.name, instance, seed, "import",
                           RuntimeError(f"the method module failed to import: {spec.load_error}"))]
    cache = cache or _DEFAULT_CACHE
    im = instance_method or find_instance_method(spec, instance)
    try:
        inst = get_instance(im, instance, seed=seed)
    except Exception as exc:   # noqa: BLE001
        return [_error_row(spec.name, instance, seed, "instance", exc)]
    ref = cache.get(spec, inst)
    truth_guard, kkt_truth = _truth_guard(spec, ref)
    try:
        solvers = fast_solvers(problem_of(inst))
    except Exception as exc:   # noqa: BLE001
        return [_error_row(spec.name, inst.name, seed, "fast_solvers", exc)]
    rows = [_fast_row(spec, inst, ref, fs, truth_guard, kkt_truth) for fs in solvers]
    if spec.extra_rows is not None:
        try:
            # method-level rows (theorems on the instance) check no fast point against the truth
            rows.extend({**r, "verdict": r.get("verdict", "pass" if r["passed"] else "fail")}
                        for r in spec.extra_rows(inst))
        except Exception as exc:   # noqa: BLE001
            rows.append(_error_row(spec.name, inst.name, seed, "extra_rows", exc))
    return rows


def verify_result(method: str, instance, result, *, solver: str, gap_tol: float = tol.GAP_FIRST_ORDER,
                  kkt_tol: Optional[float] = None, expect_converged: bool = True,
                  cache: Optional[ReferenceCache] = None) -> dict:
    """The harness row of a result computed elsewhere (e.g. by a fitted estimator), not re-solved.

    The row is built exactly as for a fast solver of the report (:func:`_fast_row`): the given
    ``result`` stands for the output of a :class:`~cvxmetric.verification.registry.FastSolver` whose
    ``run`` returns it, and is scored against the certified ground truth of ``instance`` with the
    method's checks (gap, KKT, the result contract and its certificate, method extras).

    Parameters
    ----------
    method : str
        Harness method name (``"lmnn"``, ``"itml"``, ...), whose spec holds the checks (the
        instance's Problem builds the formulation).
    instance : cvxmetric.instances.Instance
        The problem the result solves (any name; the ground truth is computed for it).
    result : SolverResult
        The result to verify.
    solver : str
        Row label.
    gap_tol, kkt_tol, expect_converged
        As in :class:`~cvxmetric.verification.registry.FastSolver`.
    cache : ReferenceCache, optional
        Where the ground truth is cached; default a fresh cache (instances made from user data
        need not have unique names).

    Returns
    -------
    dict
        One row with the report's keys (``passed``, ``checks``, ``errors``, ...). Never raises for
        a failure inside the row; an unknown method is a ``ValueError``.
    """
    spec = get_spec(method)
    if spec.load_error is not None:
        return _error_row(spec.name, instance.name, instance.seed, "import",
                          RuntimeError(f"the method module failed to import: {spec.load_error}"))
    ref = (cache or ReferenceCache()).get(spec, instance)
    truth_guard, kkt_truth = _truth_guard(spec, ref)
    fs = FastSolver(solver, lambda _inst: result, gap_tol, kkt_tol, expect_converged)
    return _fast_row(spec, instance, ref, fs, truth_guard, kkt_truth)


def find_instance_method(spec: MethodSpec, instance: str) -> str:
    """The instance family (``spec.instance_methods``) that holds ``instance``."""
    for im in spec.instance_methods:
        if instance in list_instances(im):
            return im
    names = [n for im in spec.instance_methods for n in list_instances(im)]
    raise ValueError(f"unknown instance {instance!r} for method {spec.name}; choose one of {', '.join(names)}")


def methods_with_instance(instance: str) -> list[str]:
    """Every method that lists ``instance`` among its instances."""
    out = []
    for m in list_methods():
        spec = get_spec(m)
        if spec.load_error is None and any(instance in list_instances(im) for im in spec.instance_methods):
            out.append(m)
    return out


def default_cases(methods: Optional[Iterable[str]] = None, instance: Optional[str] = None) -> list[tuple[str, str, str]]:
    """(method, instance_method, instance) triples of the default report.

    With ``instance`` and no ``methods``, the methods that have an instance of that name.
    """
    if instance is not None and not methods:
        methods = methods_with_instance(instance)
        if not methods:
            known = sorted({n for m in list_methods() for im in get_spec(m).instance_methods
                            for n in list_instances(im)})
            raise ValueError(f"no method has an instance named {instance!r}; choose one of {', '.join(known)}")
    cases = []
    for m in (methods or list_methods()):
        spec = get_spec(m)
        if spec.load_error is not None:
            cases.append((m, None, instance or "-"))
            continue
        if instance is not None:
            cases.append((m, find_instance_method(spec, instance), instance))
            continue
        for im in spec.instance_methods:
            for name in list_instances(im, default_only=True):
                cases.append((m, im, name))
    return cases


#: One case of the report: (method, instance family, instance name), as :func:`default_cases` lists.
Case = tuple


def _case_rows(case: Case, seed: int, cache: ReferenceCache) -> list[dict]:
    """The rows of one case; even an unexpected exception becomes a failed row."""
    method, im, name = case
    try:
        return verify_instance(method, name, cache=cache, instance_method=im, seed=seed)
    except Exception as exc:   # noqa: BLE001 - the harness reports, never crashes
        return [_error_row(method, name, seed, "case", exc)]


def _worker_case_rows(case: Case, seed: int) -> list[dict]:
    """:func:`_case_rows` in a worker process (loky or a dask worker), with its own cache."""
    return _case_rows(case, seed, ReferenceCache())


def verify_cases(cases: Iterable[Case], *, seed: int = 0, n_jobs: int = 1, backend: Optional[str] = None,
                 cache: Optional[ReferenceCache] = None,
                 on_done: Optional[Callable[[int, Case], None]] = None) -> list[dict]:
    """The rows of many cases, in the order of ``cases``, optionally computed in parallel.

    Parameters
    ----------
    cases : iterable of (method, instance_method, instance)
        As returned by :func:`default_cases`.
    seed : int
        Instance seed (see :func:`verify_instance`).
    n_jobs : int
        1 (and no ``backend``): every case in this process, one after the other, sharing
        ``cache``. Otherwise the cases run through :func:`cvxmetric.parallel.imap_tasks`
        (:class:`joblib.Parallel`, or futures of a dask cluster; ``-1``: all cores, or all worker
        threads of the cluster),
        one whole case per task: a problem is never split across processes or machines. Each
        worker pins BLAS to :data:`BLAS_THREADS`.
    backend : str, optional
        A joblib backend name; default the active one (loky unless inside
        ``joblib.parallel_config``). ``"dask"`` sends the cases to the current
        ``distributed.Client``.
    cache : ReferenceCache, optional
        Used by the serial path only (workers build their own).
    on_done : callable, optional
        ``on_done(k, case)`` after each finished case, ``k`` the number finished so far (in
        completion order, which in parallel differs from the order of the rows).

    Returns
    -------
    list of dict
        Exactly the rows of the serial run, in the same order (only the timings differ). When the
        parallel machinery itself fails (a worker process dies, the cluster is lost), every case
        without rows yet gets one failed row with the reason (check ``worker``).
    """
    if n_jobs == 1 and backend is None:
        function = functools.partial(_case_rows, seed=seed, cache=cache or _DEFAULT_CACHE)
    else:
        function = functools.partial(_worker_case_rows, seed=seed)

    def failed(case: Case, exc: BaseException) -> list[dict]:
        method, _, name = case
        return [_error_row(method, name, seed, "worker", exc)]

    results = run_tasks(function, cases, n_jobs=n_jobs, backend=backend, blas_threads=BLAS_THREADS,
                        on_done=on_done, on_failure=failed)
    return [row for rows in results for row in rows]


def verify_method(method: str, instances: Optional[Iterable[str]] = None, *, seed: int = 0, **kw) -> list[dict]:
    """Rows for a method on the given (default: its default) instances."""
    rows = []
    for m, im, name in default_cases([method]) if instances is None else [(method, None, n) for n in instances]:
        rows.extend(verify_instance(m, name, instance_method=im, seed=seed, **kw))
    return rows


def score_point(method: str, instance, point, *, cache: Optional[ReferenceCache] = None,
                gap_tol: float = tol.GAP_FIRST_ORDER, seed: int = 0) -> dict:
    """Score a user's point (e.g. another library's M) against the certified ground truth.

    ``instance`` is a bundled instance's name (drawn with ``seed``), an
    :class:`~cvxmetric.instances.Instance`, or a :class:`cvxmetric.problems.Problem` built from the
    user's own data (its ``instance``). :meth:`cvxmetric.problems.Problem.check` gives the verdict
    at a user's tolerance; this is the harness' view, with its checks.

    The point is first made feasible by the formulation's own ``make_feasible`` (PSD projection;
    for MMC a rescaling onto its constraint, so that a correct but differently scaled M scores as
    the same metric — MMC's solution is only defined up to that scale), and the distance of that
    step is reported as ``infeasibility``.

    Returns
    -------
    dict
        ``value`` (value_at of the feasible point), ``p_star_lower``/``p_star_upper`` (the
        certified interval), ``rel_gap`` (to the upper end), ``kkt`` (the fast-point KKT residual
        when the method defines one), ``lambda_min`` (matrix points), ``feasible``, ``passed``
        (feasible, certified truth, and gap within ``gap_tol``), ``verdict`` (``"pass"``,
        ``"fail"``, or ``"undecided"`` when only the oracle's checks failed: the ground truth could
        not be certified, see :func:`verdict`), ``checks`` and ``errors``.

    Raises
    ------
    ValueError
        For a point of the wrong shape, with NaN/inf, or (matrices) not symmetric.
    """
    spec = get_spec(method)
    if isinstance(instance, str):
        inst = get_instance(find_instance_method(spec, instance), instance, seed=seed)
        cache = cache or _DEFAULT_CACHE
    else:   # a Problem or an Instance: the user's data, whose names need not be unique
        inst = getattr(instance, "instance", instance)
        cache = cache or ReferenceCache()
    instance = inst.name
    ref = cache.get(spec, inst)
    form = ref.form
    if form is None:
        raise ValueError(f"the ground truth of {method}/{instance} could not be built: {'; '.join(ref.errors)}")
    point = np.array(point, dtype=np.float64)
    expected = form.point.shape
    if point.shape != expected:
        raise ValueError(f"the point for {method}/{instance} must have shape {expected}; got {point.shape}")
    if not np.all(np.isfinite(point)):
        raise ValueError("the point contains NaN or inf")
    guard = _Guard()
    guard.errors = list(ref.errors)
    lam_min = None
    if form.point_name == "M":
        scale = float(np.max(np.abs(point))) if point.size else 0.0
        asym = float(np.max(np.abs(point - point.T))) if point.size else 0.0
        if asym > tol.SYMMETRY_RTOL * scale:
            raise ValueError(f"M is not symmetric (max |M - M.T| = {asym:.3g}); pass a symmetric matrix")
        point = 0.5 * (point + point.T)
        lam = np.linalg.eigvalsh(point)
        lam_min = float(lam[0])
        guard.checks["psd_feasible"] = Check(max(0.0, -lam[0]) / max(abs(lam[-1]), np.finfo(float).tiny),
                                             tol.PSD_FEASIBILITY_TOL)
    feasible = guard("make_feasible", form.feasible_point, point)
    value = None if feasible is None else guard("value_at", form.value_at, feasible)
    truth = ref.truth
    rel_gap = None
    if truth is not None:
        guard.checks["truth_certified"] = Check(truth.gap, truth.rtol, low=-tol.BELOW_LOWER_BOUND_RTOL)
        if value is not None and truth.p_star is not None:
            rel_gap = relative_difference(value, truth.p_star)
            guard.checks["rel_gap"] = Check(rel_gap, gap_tol, low=-math.inf)
            guard.checks["truth_certified"] = Check(truth.gap, _width_needed(truth, rel_gap, gap_tol),
                                                    low=-tol.BELOW_LOWER_BOUND_RTOL)
            guard.checks["above_truth_lower_bound"] = Check(relative_difference(truth.bounds.lower, value),
                                                            tol.BELOW_LOWER_BOUND_RTOL)
    else:
        guard.checks["truth_certified"] = Check(None, spec.truth_tolerance())
    kkt = None if spec.kkt_fast is None or feasible is None else guard("kkt_fast", spec.kkt_fast, form, feasible)
    row_verdict = verdict(guard.checks, guard.errors, _truth_side(spec), ref.errors)
    return {"method": method, "instance": instance, "value": _num(value),
            "p_star_lower": _num(truth.bounds.lower) if truth else None,
            "p_star_upper": _num(truth.p_star) if truth else None,
            "rel_gap": _num(rel_gap), "kkt": _num(kkt), "lambda_min": _num(lam_min),
            "feasible": guard.checks.get("psd_feasible", Check(0.0, 1.0)).passed,
            "checks": {k: c.as_dict() for k, c in guard.checks.items()},
            "errors": guard.errors, "verdict": row_verdict, "passed": row_verdict == "pass"}
