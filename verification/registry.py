"""How a method plugs into the harness: a :class:`MethodSpec` per method, auto-discovered.

Each module of ``verification/methods/`` defines ``SPEC = MethodSpec(...)`` (or a list
``SPECS``). Adding a method never edits a shared file.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Optional

__all__ = ["MethodSpec", "FastSolver", "get_spec", "list_methods"]


@dataclass(frozen=True)
class FastSolver:
    """A fast solver as the harness runs it.

    Attributes
    ----------
    name : str
        Row label (``"qwise-subgradient"``, ...).
    run : callable
        ``run(instance) -> SolverResult``.
    gap_tol : float
        Relative optimality gap required (see ``verification.tolerances``).
    kkt_tol : float or None
        Threshold of the fast point's KKT residual (None: reported, not checked).
    """

    name: str
    run: Callable[[Any], Any]
    gap_tol: float
    kkt_tol: Optional[float] = None


@dataclass(frozen=True)
class MethodSpec:
    """Everything the harness needs to verify one method.

    Attributes
    ----------
    name : str
        CLI name (``qwise``, ``fantope``, ``lmnn``, ``mmc``, ``itml``, ``boostmetric``).
    instance_methods : tuple of str
        Keys of ``cvxmetric.instances`` whose instances this method verifies.
    build : callable
        ``build(instance) -> Formulation``.
    fast_solvers : callable
        ``fast_solvers(instance) -> list[FastSolver]``.
    kkt_truth : callable
        ``kkt_truth(formulation, reference_solution) -> dict[str, float]``.
    kkt_fast : callable or None
        ``kkt_fast(formulation, point) -> float``.
    project_point : callable
        ``project_point(formulation, point)``: maps a (slightly infeasible) reference point,
        e.g. SCS's M, onto the feasible set before it is scored (default: PSD projection of
        matrix points, identity otherwise).
    extra_checks : callable or None
        ``extra_checks(formulation, instance, result, reference) -> dict[str, (value, tol)]``:
        method-specific checks added to each fast-solver row (certified gaps, ...).
    extra_rows : callable or None
        ``extra_rows(instance) -> list[dict]``: method-level rows (e.g. the Fantope theorem).
    """

    name: str
    instance_methods: tuple
    build: Callable
    fast_solvers: Callable
    kkt_truth: Callable
    kkt_fast: Optional[Callable] = None
    project_point: Optional[Callable] = None
    extra_checks: Optional[Callable] = None
    extra_rows: Optional[Callable] = None
    reference_solvers: tuple = ("CLARABEL", "SCS")


_SPECS: dict[str, MethodSpec] = {}
_LOADED = False


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    from . import methods

    for mod in pkgutil.iter_modules(methods.__path__):
        module = importlib.import_module(f"{methods.__name__}.{mod.name}")
        specs = list(getattr(module, "SPECS", [])) + ([module.SPEC] if hasattr(module, "SPEC") else [])
        for spec in specs:
            _SPECS[spec.name] = spec
    _LOADED = True


#: Report order of the methods (others follow alphabetically).
METHOD_ORDER = ("qwise", "fantope", "lmnn", "mmc", "itml", "boostmetric")


def list_methods() -> list[str]:
    """Names of the verifiable methods, in report order."""
    _load()
    known = [m for m in METHOD_ORDER if m in _SPECS]
    return known + sorted(set(_SPECS) - set(known))


def get_spec(name: str) -> MethodSpec:
    """The :class:`MethodSpec` of a method name."""
    _load()
    if name not in _SPECS:
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(list_methods())}")
    return _SPECS[name]
