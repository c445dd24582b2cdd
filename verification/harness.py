r"""The verification harness: ground truth vs fast solvers, one row per method x instance x solver.

For every row it measures (DESIGN §6):

* :math:`p^*` with Clarabel and with SCS (statuses, times, relative agreement; SCS's point is
  projected onto the feasible set and scored with ``value_at`` so it cannot look better than
  it is);
* ``f_fast = value_at(point)`` (cvxpy's expression) next to the solver's own objective;
* the relative optimality gap :math:`(f_{\text{fast}} - p^*) / \max(1, |p^*|)`;
* KKT residuals of the ground truth from its named duals, and of the fast point;
* times and speed-up ratios; method-specific checks (certified gaps, theorems).

:func:`score_point` scores **any** point (e.g. another library's M) against the ground truth.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Optional

import numpy as np

from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.instances import get_instance, list_instances
from cvxmetric.linalg import project_psd

from . import tolerances as tol
from .registry import MethodSpec, get_spec, list_methods

__all__ = ["Check", "verify_method", "verify_instance", "score_point", "ReferenceCache", "REQUIRED_KEYS"]

#: Stable keys of every row (the JSON output documented in the README).
REQUIRED_KEYS = ("method", "instance", "solver", "d", "n_constraints", "p_star_clarabel", "p_star_scs",
                 "f_fast", "rel_gap", "kkt_truth", "kkt_fast", "time_clarabel", "time_scs", "time_fast",
                 "passed", "checks")


@dataclass
class Check:
    """One numeric check: passes when ``low <= value <= tol`` (``value`` None fails)."""

    value: Optional[float]
    tol: float
    low: float = -math.inf

    @property
    def passed(self) -> bool:
        return self.value is not None and math.isfinite(self.value) and self.low <= self.value <= self.tol

    def as_dict(self) -> dict:
        return {"value": _num(self.value), "tol": self.tol, "passed": bool(self.passed)}


def _num(x) -> Optional[float]:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(1.0, abs(b))


class ReferenceCache:
    """Solves each (method, instance) ground truth once per process."""

    def __init__(self):
        self._store: dict = {}

    def get(self, spec: MethodSpec, inst) -> tuple[Any, dict]:
        key = (spec.name, inst.method, inst.name)
        if key not in self._store:
            form = spec.build(inst)
            refs = {s: form.solve(s) for s in spec.reference_solvers}
            self._store[key] = (form, refs)
        return self._store[key]


_DEFAULT_CACHE = ReferenceCache()


def _reference_summary(spec: MethodSpec, form, refs: dict) -> dict:
    clar = refs.get("CLARABEL")
    scs = refs.get("SCS")
    out = {"status_clarabel": clar.status if clar else None, "status_scs": scs.status if scs else None,
           "p_star_clarabel": clar.value if clar and clar.ok else None,
           "p_star_scs": None, "p_star_scs_reported": scs.value if scs and scs.ok else None,
           "lambda_min_scs": None,
           "time_clarabel": clar.total_time if clar else None, "time_scs": scs.total_time if scs else None,
           "compile_time_clarabel": clar.compile_time if clar else None,
           "compile_time_scs": scs.compile_time if scs else None}
    if scs is not None and scs.ok:
        if form.point_name == "M":
            out["lambda_min_scs"] = float(np.linalg.eigvalsh(scs.point)[0])
        out["p_star_scs"] = form.value_at(_project(spec, form, scs.point))
    return out


def _project(spec: MethodSpec, form, point):
    if spec.project_point is not None:
        return spec.project_point(form, point)
    return project_psd(point) if form.point_name == "M" else point


def _truth_checks(spec: MethodSpec, form, refs: dict, summary: dict) -> tuple[dict, Optional[float]]:
    checks: dict[str, Check] = {}
    clar = refs.get("CLARABEL")
    kkt_max = None
    if clar is not None and clar.ok:
        res = spec.kkt_truth(form, clar)
        kkt_max = max(res.values()) if res else 0.0
        checks["kkt_truth"] = Check(kkt_max, tol.KKT_TRUTH_TOL)
    else:
        checks["kkt_truth"] = Check(None, tol.KKT_TRUTH_TOL)
    pc, ps = summary["p_star_clarabel"], summary["p_star_scs"]
    if "SCS" in refs:
        checks["solver_agreement"] = Check(None if pc is None or ps is None else _rel(ps, pc),
                                           tol.SOLVER_AGREEMENT_RTOL)
    return checks, kkt_max


def _run_fast(fs, inst):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        t0 = time.perf_counter()
        res = fs.run(inst)
        elapsed = time.perf_counter() - t0
    msgs = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    return res, elapsed, msgs


def verify_instance(method: str, instance: str, *, cache: Optional[ReferenceCache] = None,
                    instance_method: Optional[str] = None) -> list[dict]:
    """All rows (one per fast solver, plus method-level rows) of one method on one instance."""
    spec = get_spec(method)
    cache = cache or _DEFAULT_CACHE
    im = instance_method or _find_instance_method(spec, instance)
    inst = get_instance(im, instance)
    form, refs = cache.get(spec, inst)
    summary = _reference_summary(spec, form, refs)
    truth_checks, kkt_max = _truth_checks(spec, form, refs, summary)
    p_star = summary["p_star_clarabel"]
    rows = []
    for fs in spec.fast_solvers(inst):
        res, elapsed, warns = _run_fast(fs, inst)
        point = res.point
        f_fast = form.value_at(point)
        checks = dict(truth_checks)
        checks["value_at_agreement"] = Check(_rel(res.objective, f_fast), tol.VALUE_AT_RTOL)
        rel_gap = None if p_star is None else (f_fast - p_star) / max(1.0, abs(p_star))
        checks["rel_gap"] = Check(rel_gap, fs.gap_tol, low=-tol.GAP_NEGATIVE_SLACK)
        checks["converged"] = Check(0.0 if res.converged else 1.0, 0.0)
        if form.point_name == "M":
            M = np.asarray(point)
            lam_min = float(np.linalg.eigvalsh(M)[0])
            checks["psd_feasible"] = Check(max(0.0, -lam_min) / max(1.0, float(np.linalg.norm(M, 2))),
                                           tol.PSD_FEASIBILITY_TOL)
        kkt_fast = spec.kkt_fast(form, point) if spec.kkt_fast is not None else None
        if kkt_fast is not None and fs.kkt_tol is not None:
            checks["kkt_fast"] = Check(kkt_fast, fs.kkt_tol)
        if spec.extra_checks is not None:
            for name, (value, t) in spec.extra_checks(form, inst, res, refs).items():
                checks[name] = Check(value, t)
        t_fast = res.time if res.time else elapsed
        row = {
            "method": spec.name, "instance": inst.name, "solver": fs.name, "d": inst.d,
            "n_constraints": inst.n_constraints,
            "p_star_clarabel": _num(p_star), "p_star_scs": _num(summary["p_star_scs"]),
            "f_fast": _num(f_fast), "f_fast_self": _num(res.objective), "rel_gap": _num(rel_gap),
            "kkt_truth": _num(kkt_max), "kkt_fast": _num(kkt_fast),
            "time_clarabel": _num(summary["time_clarabel"]), "time_scs": _num(summary["time_scs"]),
            "time_fast": _num(t_fast),
            "speedup_clarabel": _num(summary["time_clarabel"] / t_fast) if summary["time_clarabel"] and t_fast else None,
            "speedup_scs": _num(summary["time_scs"] / t_fast) if summary["time_scs"] and t_fast else None,
            "status_clarabel": summary["status_clarabel"], "status_scs": summary["status_scs"],
            "lambda_min_scs": _num(summary["lambda_min_scs"]),
            "n_iter": res.n_iter, "converged": bool(res.converged), "warnings": warns,
            "checks": {k: c.as_dict() for k, c in checks.items()},
        }
        row["passed"] = all(c["passed"] for c in row["checks"].values())
        rows.append(row)
    if spec.extra_rows is not None:
        rows.extend(spec.extra_rows(inst))
    return rows


def _find_instance_method(spec: MethodSpec, instance: str) -> str:
    for im in spec.instance_methods:
        if instance in list_instances(im):
            return im
    names = [n for im in spec.instance_methods for n in list_instances(im)]
    raise ValueError(f"unknown instance {instance!r} for method {spec.name}; choose one of {', '.join(names)}")


def default_cases(methods: Optional[Iterable[str]] = None, instance: Optional[str] = None) -> list[tuple[str, str, str]]:
    """(method, instance_method, instance) triples of the default report."""
    cases = []
    for m in (methods or list_methods()):
        spec = get_spec(m)
        if instance is not None:
            cases.append((m, _find_instance_method(spec, instance), instance))
            continue
        for im in spec.instance_methods:
            for name in list_instances(im, default_only=True):
                cases.append((m, im, name))
    return cases


def verify_method(method: str, instances: Optional[Iterable[str]] = None, **kw) -> list[dict]:
    """Rows for a method on the given (default: its default) instances."""
    rows = []
    for m, im, name in default_cases([method]) if instances is None else [(method, None, n) for n in instances]:
        rows.extend(verify_instance(m, name, instance_method=im, **kw))
    return rows


def score_point(method: str, instance: str, point, *, cache: Optional[ReferenceCache] = None,
                gap_tol: float = tol.GAP_FIRST_ORDER) -> dict:
    """Score a user's point (e.g. another library's M) against the ground truth.

    Returns
    -------
    dict
        ``value`` (value_at), ``p_star_clarabel``, ``rel_gap``, ``kkt`` (the fast-point KKT
        residual when the method defines one), ``lambda_min`` (matrix points), ``feasible``,
        ``passed`` (feasible and gap within ``gap_tol``), and ``checks``.
    """
    spec = get_spec(method)
    cache = cache or _DEFAULT_CACHE
    inst = get_instance(_find_instance_method(spec, instance), instance)
    form, refs = cache.get(spec, inst)
    point = np.array(point, dtype=np.float64)
    expected = form.point.shape
    if point.shape != expected:
        raise ValueError(f"the point for {method}/{instance} must have shape {expected}; got {point.shape}")
    if not np.all(np.isfinite(point)):
        raise ValueError("the point contains NaN or inf")
    checks: dict[str, Check] = {}
    lam_min = None
    if form.point_name == "M":
        asym = float(np.max(np.abs(point - point.T)))
        if asym > 1e-8 * max(1.0, float(np.max(np.abs(point)))):
            raise ValueError(f"M is not symmetric (max |M - M.T| = {asym:.3g}); pass a symmetric matrix")
        point = 0.5 * (point + point.T)
        lam_min = float(np.linalg.eigvalsh(point)[0])
        checks["psd_feasible"] = Check(max(0.0, -lam_min) / max(1.0, float(np.linalg.norm(point, 2))),
                                       tol.PSD_FEASIBILITY_TOL)
    value = form.value_at(point)
    clar = refs.get("CLARABEL")
    p_star = clar.value if clar is not None and clar.ok else None
    rel_gap = None if p_star is None else (value - p_star) / max(1.0, abs(p_star))
    checks["rel_gap"] = Check(rel_gap, gap_tol, low=-tol.GAP_NEGATIVE_SLACK)
    kkt = spec.kkt_fast(form, point) if spec.kkt_fast is not None else None
    return {"method": method, "instance": instance, "value": _num(value), "p_star_clarabel": _num(p_star),
            "rel_gap": _num(rel_gap), "kkt": _num(kkt), "lambda_min": _num(lam_min),
            "feasible": checks.get("psd_feasible", Check(0.0, 1.0)).passed,
            "checks": {k: c.as_dict() for k, c in checks.items()},
            "passed": all(c.passed for c in checks.values())}
