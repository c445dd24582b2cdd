"""How a method plugs into the harness: a :class:`MethodSpec` per method, auto-discovered.

Each module of ``verification/methods/`` defines ``SPEC = MethodSpec(...)`` (or a list
``SPECS``). A spec holds only the harness' own part of a method, its checks and thresholds: the
instances it verifies are :class:`cvxmetric.problems.Problem` objects, which build the
formulation and run the fast solvers (:meth:`~cvxmetric.problems.Problem.runs`). Adding a method
is its Problem subclass and its spec; it never edits a shared file.
"""
from __future__ import annotations

import importlib
import math
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Optional

__all__ = ["MethodSpec", "FastSolver", "Thresholds", "get_spec", "spec_of_problem", "list_methods", "register_spec",
           "truth_rtol"]


class Thresholds(NamedTuple):
    """How the harness holds one fast solver: its relative gap and its fast-point KKT residual
    (``kkt_tol`` None: reported, not checked); constants of ``cvxmetric.verification.tolerances``.

    Each method module keeps one mapping ``TOLERANCES`` (solver ``method=`` name -> Thresholds), read
    by its report rows and, through :attr:`MethodSpec.tolerances`, by the estimators' ``verify()``.
    """

    gap_tol: float
    kkt_tol: Optional[float] = None


@dataclass(frozen=True)
class FastSolver:
    """A fast solver as the harness runs it: a :class:`cvxmetric.problems.Run` of an instance's
    Problem with its thresholds, or a result computed elsewhere
    (:func:`cvxmetric.verification.harness.verify_result`).

    Attributes
    ----------
    name : str
        Row label (``"qwise-subgradient"``, ...).
    run : callable
        ``run(instance) -> SolverResult``.
    gap_tol : float
        Relative optimality gap required (see ``cvxmetric.verification.tolerances``).
    kkt_tol : float or None
        Threshold of the fast point's KKT residual (None: reported, not checked).
    expect_converged : bool
        Whether the row requires ``converged=True``. False only for algorithms that are not
        optimal by design (e.g. stage-wise boosting never lowers a weight): their row then
        checks that the solver *says* so (``converged=False`` with its certified gap reported).
    """

    name: str
    run: Callable[[Any], Any]
    gap_tol: float
    kkt_tol: Optional[float] = None
    expect_converged: bool = True


@dataclass(frozen=True)
class MethodSpec:
    """Everything the harness needs to verify one method.

    Attributes
    ----------
    name : str
        CLI name (``qwise``, ``fantope``, ``lmnn``, ``mmc``, ``itml``, ``boostmetric``).
    instance_methods : tuple of str
        The problem families (keys of ``cvxmetric.instances``, names of
        :class:`cvxmetric.problems.Problem` subclasses) whose instances this method verifies: each
        instance's Problem builds its formulation and runs its fast solvers.
    kkt_truth : callable
        ``kkt_truth(formulation, reference_solution) -> dict[str, float]``.
    kkt_fast : callable or None
        ``kkt_fast(formulation, point) -> float``.
    extra_checks : callable or None
        ``extra_checks(formulation, instance, result, truth) -> dict[str, (value, tol)]``:
        method-specific checks added to each fast-solver row (``truth`` is the
        :class:`cvxmetric.formulations.ladder.CertifiedTruth` of the row).
    extra_rows : callable or None
        ``extra_rows(instance) -> list[dict]``: method-level rows (e.g. the Fantope theorem).
    truth_checks : tuple of str
        Names of the ``extra_checks`` computed from the ground truth alone (a check of the oracle,
        not of the fast point): when only such checks fail, the row's verdict is ``"undecided"``
        (:func:`cvxmetric.verification.harness.verdict`).
    truth_rtol : float
        Relative width the certified ground-truth interval must reach
        (``cvxmetric.verification.tolerances.TRUTH_RTOL`` unless a method documents another).
    tolerances : mapping of str to Thresholds
        The thresholds of each fast solver of the method, by the ``method=`` name of its
        ``solve_<method>`` facade, or the name of a variant result
        (:attr:`cvxmetric.problems.Problem.result_variants`; the module's ``TOLERANCES``): the
        report's rows of that solver and an estimator's ``verify()`` with ``solver=`` that name
        hold it to the same numbers.
    report_order : float
        The method's place in the report, ascending (a method without one follows those with one,
        alphabetically).
    load_error : str or None
        Set (by the registry) when the method's module failed to import: the report then shows
        one failed row with this reason instead of crashing.
    """

    name: str
    instance_methods: tuple
    kkt_truth: Callable
    kkt_fast: Optional[Callable] = None
    extra_checks: Optional[Callable] = None
    extra_rows: Optional[Callable] = None
    truth_checks: tuple = ()
    truth_rtol: Optional[float] = None
    tolerances: Mapping[str, Thresholds] = field(default_factory=dict)
    report_order: float = math.inf
    load_error: Optional[str] = None

    def truth_tolerance(self) -> float:
        """The relative width this method's ground truth is held to: ``truth_rtol``, else
        ``verification.tolerances.TRUTH_RTOL``."""
        from .tolerances import TRUTH_RTOL
        return self.truth_rtol if self.truth_rtol is not None else TRUTH_RTOL


_SPECS: dict[str, MethodSpec] = {}
_LOADED = False


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    from . import methods

    for mod in pkgutil.iter_modules(methods.__path__):
        try:
            module = importlib.import_module(f"{methods.__name__}.{mod.name}")
        except Exception as exc:   # noqa: BLE001 - a broken method fails its row, not the report
            _SPECS[mod.name] = _broken_spec(mod.name, f"{type(exc).__name__}: {exc}")
            continue
        specs = list(getattr(module, "SPECS", [])) + ([module.SPEC] if hasattr(module, "SPEC") else [])
        for spec in specs:
            _SPECS[spec.name] = spec
    _LOADED = True


def register_spec(spec: MethodSpec) -> MethodSpec:
    """Add the spec of a method defined outside ``verification/methods/`` (e.g. by a plug-in package)."""
    if not isinstance(spec, MethodSpec):
        raise TypeError(f"spec must be a MethodSpec; got {type(spec).__name__}")
    _load()
    _SPECS[spec.name] = spec
    return spec


def _broken_spec(name: str, error: str) -> MethodSpec:
    def fail(*args, **kwargs):
        raise RuntimeError(f"the method module {name!r} failed to import: {error}")
    return MethodSpec(name=name, instance_methods=(), kkt_truth=fail, load_error=error)


def list_methods() -> list[str]:
    """Names of the verifiable methods, in report order (:attr:`MethodSpec.report_order`, then the name)."""
    _load()
    return sorted(_SPECS, key=lambda name: (_SPECS[name].report_order, name))


def get_spec(name: str) -> MethodSpec:
    """The :class:`MethodSpec` of a method name."""
    _load()
    if name not in _SPECS:
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(list_methods())}")
    return _SPECS[name]


def spec_of_problem(problem: str) -> MethodSpec:
    """The :class:`MethodSpec` that verifies the problem family ``problem``: the spec of that name,
    else the one listing it among its ``instance_methods`` (e.g. ``"qwise_vector"`` -> ``"qwise"``)."""
    _load()
    if problem in _SPECS:
        return _SPECS[problem]
    for spec in _SPECS.values():
        if problem in spec.instance_methods:
            return spec
    raise ValueError(f"no method of the harness verifies the problem {problem!r}; the methods are "
                     f"{', '.join(list_methods())}")


def truth_rtol(name: str) -> float:
    """The relative width a method's certified ground truth is held to (its spec's ``truth_rtol``,
    else ``verification.tolerances.TRUTH_RTOL``)."""
    return get_spec(name).truth_tolerance()
