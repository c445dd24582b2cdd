r"""Fantope regularization in the harness (design §5.5, §6).

Fast-solver rows: the convex bound :math:`\hat\varphi(\cdot; W)` at the instance's fixed Fantope point
``extra["W"]`` — the projected subgradient engine and restarted PDHG
(:meth:`cvxmetric.problems.Fantope.solve_bound`) vs cvxpy (Clarabel, SCS),
gap, KKT and (PDHG) certified gap as for Qwise (the bound *is* a hinge model).

Method-level rows (``extra_rows``), one per theorem check, with the stable keys filled with
``null`` where a number does not apply and the numbers in ``checks``:

* ``theorem1:lmo`` — W(M) in F_k, <W, M> = R(M) = SDP LMO value = ``cvxpy.lambda_sum_smallest``,
  at a random PSD matrix, an indefinite matrix and the MM solution;
* ``theorem2:supergradient`` — random and adversarial supergradient inequality for W(M) and the
  LMO's own solution; strictly violated by the top-k projector;
* ``theorem3:unique-lmo`` (positive eigengap) and ``theorem3:zero-gap`` (repeated eigenvalue at the
  cut: distinct supergradients, directional derivatives);
* ``theorem4:mm-reference`` — the reference MM (every step certified by the solve ladder): phi
  non-increasing, and its certified MM fixed-point gap rho(M*) (a critical point of the DC
  objective, ``cvxmetric.formulations.fantope.fantope_mm_reference``);
* ``fantope-mm`` — fast MM vs the reference MM (``p_star_upper`` = reference phi, ``f_fast`` =
  fast phi), its monotonicity, and its own fixed-point certificate re-checked by the ladder (the
  bound at its last W solved and certified: the gap must be within the harness tolerance and
  not above the fast solver's claimed rho);
* ``fantope-subgradient (alg. 2)`` — the thesis' alg. 2 vs the reference MM's phi, with its
  majorizer-gap measure (``cvxmetric.solvers.fantope_subgradient``).

No check raises: an SDP that cannot be solved or certified leaves its value None (a failed check)
and its reason in the row's ``errors``.
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.linalg import random_psd
from cvxmetric.problems import Fantope

from .. import tolerances as tol
from ..fantope_checks import lmo_checks, mm_checks, supergradient_checks, uniqueness_checks, zero_gap_checks
from ..harness import Check
from ..kkt import hinge_kkt_fast, hinge_kkt_truth
from ..registry import MethodSpec, Thresholds

#: The thresholds of the Fantope solvers (``solve_fantope(method=...)``), non-convex: a fit is
#: verified on the convex bound at W(M) of its M, whose certified minimum is the critical-point
#: test of M. ``mm``: the fast MM (row ``fantope-mm``: its phi against the reference MM's and its
#: fixed-point gap by the ladder); ``subgradient``: the thesis' alg. 2 (row ``fantope-subgradient
#: (alg. 2)``), a local method without an optimality certificate of its own; ``factor``: the
#: subgradient over a factor L (M = L^T L), no row of its own, a local method held as alg. 2.
#: ``bound-subgradient`` / ``bound-pdhg``: the convex bound at a fixed W
#: (:meth:`cvxmetric.problems.Fantope.solve_bound`), a hinge problem held as Qwise's solvers (the
#: subgradient row's fast-point KKT residual is reported, not checked: tolerances.KKT_FAST_FIRST_ORDER).
TOLERANCES = {"mm": Thresholds(tol.FANTOPE_MM_GAP, None),
              "subgradient": Thresholds(tol.FANTOPE_ALG2_GAP, None),
              "factor": Thresholds(tol.FANTOPE_ALG2_GAP, None),
              "bound-subgradient": Thresholds(tol.GAP_FIRST_ORDER, None),
              "bound-pdhg": Thresholds(tol.GAP_FIRST_ORDER, tol.KKT_FAST_FIRST_ORDER)}


def model_of(inst):
    """The :class:`~cvxmetric.fantope.FantopeModel` of an instance (its Fantope problem's model)."""
    return Fantope.from_instance(inst).model()


def _kkt_fast(form, point):
    return hinge_kkt_fast(form.model, point)


def _num(x):
    if x is None:
        return None
    x = float(x)
    return x if np.isfinite(x) else None


def _row(inst, solver: str, checks: dict, *, p_star=None, f_fast=None, rel_gap=None, time_truth=None,
         time_fast=None, numbers: dict | None = None) -> dict:
    """A method-level row with the report's stable keys (``p_star_upper`` = the reference value the
    row compares with; no certified interval: ``p_star_lower``, ``truth_gap`` and ``truth_rung`` are
    null). ``passed`` is finalised by :func:`_finish` once the row's ``errors`` are known."""
    chk = {name: c.as_dict() for name, c in checks.items()}
    return {"method": "fantope", "instance": inst.name, "seed": inst.seed, "solver": solver, "d": inst.d,
            "n_constraints": inst.n_constraints, "p_star_lower": None, "p_star_upper": _num(p_star),
            "truth_gap": None, "truth_rung": None, "p_star_scs": None,
            "f_fast": _num(f_fast), "rel_gap": _num(rel_gap), "kkt_truth": None, "kkt_fast": None,
            "time_truth": _num(time_truth), "time_scs": None, "time_fast": _num(time_fast),
            "checks": chk, "errors": [], "warnings": [],
            "numbers": {k: _num(v) if np.isscalar(v) and not isinstance(v, (bool, str)) else v
                        for k, v in (numbers or {}).items()}}


def _finish(rows: list[dict]) -> list[dict]:
    for r in rows:
        r["passed"] = all(c["passed"] for c in r["checks"].values()) and not r["errors"]
    return rows


def _pick(dicts, key, fn=max):
    """``fn`` of ``key`` over the check dicts; None (a failed check) when any is missing."""
    vals = [d.get(key) for d in dicts]
    return None if not vals or any(v is None for v in vals) else fn(vals)


def _errors(*dicts) -> list[str]:
    out = []
    for d in dicts:
        if d.get("error"):
            out.append(d["error"])
        out.extend(d.get("errors", []))
    return out


def _neg(x):
    return None if x is None else -x


def _pos(x):
    return None if x is None else max(0.0, x)


def _test_matrices(inst, M_star):
    d = inst.d
    rng = np.random.default_rng(12345 + d)
    G = rng.standard_normal((d, d))
    return {"random-psd": random_psd(d, seed=rng), "indefinite": 0.5 * (G + G.T), "mm-solution": M_star}


def _extra_rows(inst) -> list[dict]:
    model = model_of(inst)
    k = model.k
    rows = []
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        mm = mm_checks(model)
    mm_warnings = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    t_mm = time.perf_counter() - t0
    mats = _test_matrices(inst, mm.get("M_star"))
    mats = {name: M for name, M in mats.items() if M is not None}

    # 1. LMO: W in F_k and <W, M> = R = SDP = lambda_sum_smallest
    t0 = time.perf_counter()
    lmo = {name: lmo_checks(M, k) for name, M in mats.items()}
    worst = {key: _pick(lmo.values(), key) for key in
             ("w_fantope_violation", "w_value_err", "lmo_value_err", "lss_atom_err", "lss_sdp_err",
              "lmo_fantope_violation")}
    rows.append(_row(inst, "theorem1:lmo", {
        "w_in_fantope": Check(worst["w_fantope_violation"], tol.FANTOPE_VALUE_RTOL),
        "w_value_eq_R": Check(worst["w_value_err"], tol.FANTOPE_VALUE_RTOL),
        "lmo_sdp_eq_R": Check(worst["lmo_value_err"], tol.FANTOPE_VALUE_RTOL),
        "lambda_sum_smallest_atom_eq_R": Check(worst["lss_atom_err"], tol.FANTOPE_VALUE_RTOL),
        "lambda_sum_smallest_sdp_eq_R": Check(worst["lss_sdp_err"], tol.FANTOPE_VALUE_RTOL),
        "lmo_solution_in_fantope": Check(worst["lmo_fantope_violation"], tol.FANTOPE_VALUE_RTOL),
    }, time_truth=time.perf_counter() - t0,
        numbers={f"R[{n}]": v.get("R") for n, v in lmo.items()} | {"matrices": list(mats)}))
    rows[-1]["errors"] = _errors(*lmo.values())

    # 2. supergradient inequality, random and adversarial (PSD test matrices only)
    t0 = time.perf_counter()
    sg = {name: supergradient_checks(M, k, seed=7, F_lmo=lmo[name].get("lmo_solution"))
          for name, M in mats.items() if name != "indefinite"}
    rnd = _pick(sg.values(), "random_min_W", min)
    adv_W, adv_lmo = _pick(sg.values(), "adv_W", min), _pick(sg.values(), "adv_lmo", min)
    adv = None if adv_W is None or adv_lmo is None else min(adv_W, adv_lmo)
    top = _pick(sg.values(), "adv_top")
    rows.append(_row(inst, "theorem2:supergradient", {
        "random_W_violation": Check(_pos(_neg(rnd)), tol.SUPERGRADIENT_TOL),
        "adversarial_W_and_lmo_violation": Check(_pos(_neg(adv)), tol.SUPERGRADIENT_TOL),
        "adversarial_top_k_negative": Check(top, -tol.FANTOPE_SEPARATION),
        "adversarial_top_k_closed_form_err": Check(_pick(sg.values(), "adv_top_closed_err"),
                                                   tol.FANTOPE_VALUE_RTOL),
    }, time_truth=time.perf_counter() - t0,
        numbers={"random_min_W": rnd, "adversarial_min_W_lmo": adv, "adversarial_max_top": top,
                 "random_min_top": _pick(sg.values(), "random_min_top", min)}))
    rows[-1]["errors"] = _errors(*sg.values())

    # 3a. positive eigengap: unique LMO solution = W(M)
    t0 = time.perf_counter()
    un = {name: uniqueness_checks(M, k, lmo_solution=lmo[name].get("lmo_solution"))
          for name, M in mats.items() if name != "mm-solution"}
    spread_excess = [{"x": None if v.get("face_spread") is None else v["face_spread"] - v["face_spread_bound"]}
                     for v in un.values()]
    rows.append(_row(inst, "theorem3:unique-lmo", {
        "eigengap_positive": Check(_neg(_pick(un.values(), "eigengap", min)), 0.0, low=-np.inf),
        "lmo_solution_eq_W": Check(_pick(un.values(), "lmo_dist"), tol.LMO_SOLUTION_TOL),
        "face_spread_within_eps_over_gap": Check(_pick(spread_excess, "x"), tol.FACE_SPREAD_SLACK),
    }, time_truth=time.perf_counter() - t0,
        numbers={f"{key}[{n}]": v.get(key) for n, v in un.items() for key in ("eigengap", "lmo_dist", "face_spread")}))
    rows[-1]["errors"] = _errors(*un.values())

    # 3b. zero eigengap: several supergradients, directional derivatives
    t0 = time.perf_counter()
    zk = min(k, inst.d - 1)
    zg = zero_gap_checks(inst.d, zk, seed=inst.d)
    g = zg.get
    below = None if g("dd_cvxpy_below") is None else g("dd_cvxpy_below") - g("dd_cvxpy_below_bound")
    rows.append(_row(inst, "theorem3:zero-gap", {
        "eigengap_zero": Check(None if g("eigengap") is None else abs(g("eigengap")) / inst.d,
                               tol.FANTOPE_VALUE_RTOL),
        "both_in_fantope": Check(g("w_fantope_violation"), tol.FANTOPE_VALUE_RTOL),
        "both_attain_R": Check(g("w_value_err"), tol.FANTOPE_VALUE_RTOL),
        "distinct": Check(_neg(g("w_distance")), -1.0, low=-np.inf),
        "both_supergradients": Check(_pos(_neg(g("adv_min"))), tol.SUPERGRADIENT_TOL),
        "face_not_singleton": Check(_neg(g("face_spread")), -tol.FACE_SPREAD_MIN, low=-np.inf),
        "directional_fd_eq_min_superdiff": Check(g("dd_fd_err"), tol.DIRECTIONAL_TOL),
        "directional_cvxpy_face_not_above": Check(_pos(g("dd_cvxpy_above")), tol.SUPERGRADIENT_TOL),
        "directional_cvxpy_face_within_sqrt_eps": Check(below, 0.0, low=-np.inf),
        "kink": Check(g("kink"), -tol.KINK_MIN),
    }, time_truth=time.perf_counter() - t0,
        numbers={key: v for key, v in zg.items() if key != "error"} | {"k": zk}))
    rows[-1]["errors"] = _errors(zg)

    # 4. reference MM monotone and at a certified fixed point
    g = mm.get
    rows.append(_row(inst, "theorem4:mm-reference", {
        "phi_non_increasing": Check(_pos(g("ref_max_increase")), tol.MM_MONOTONE_RTOL),
        "certified_fixed_point": Check(g("fixed_point_gap"), tol.MM_FIXED_POINT_RTOL, low=-tol.GAP_NEGATIVE_SLACK),
        "converged": Check(None if g("ref_converged") is None else (0.0 if g("ref_converged") else 1.0), 0.0),
    }, p_star=g("phi_star"), time_truth=g("time_ref"),
        numbers={"phi_trajectory": g("phi_ref"), "iterations": g("ref_iterations")}))
    rows[-1]["message"] = g("ref_message", mm.get("error", ""))

    # 5. fast MM vs the reference MM; its fixed-point certificate re-checked by the ladder
    mm_gap, alg2_gap = TOLERANCES["mm"].gap_tol, TOLERANCES["subgradient"].gap_tol
    rows.append(_row(inst, "fantope-mm", {
        "phi_gap_vs_reference_mm": Check(g("fast_gap"), mm_gap, low=-mm_gap),
        "fixed_point_gap_by_ladder": Check(g("surrogate_gap"), mm_gap, low=-tol.GAP_NEGATIVE_SLACK),
        "fixed_point_certificate_valid": Check(g("surrogate_certificate_valid"), tol.GAP_NEGATIVE_SLACK,
                                               low=-np.inf),
        "surrogate_value_at_agreement": Check(g("surrogate_value_at_err"), tol.VALUE_AT_RTOL),
        "phi_non_increasing": Check(_pos(g("fast_max_increase")), tol.MM_MONOTONE_RTOL),
        "converged": Check(None if g("fast_converged") is None else (0.0 if g("fast_converged") else 1.0), 0.0),
    }, p_star=g("phi_star"), f_fast=g("phi_fast"), rel_gap=g("fast_gap"), time_truth=g("time_ref"),
        time_fast=g("time_fast"), numbers={"outer": g("fast_outer"), "inner": g("fast_inner"),
                                           "fixed_point_gap_fast": g("fast_rho"),
                                           "surrogate_gap": g("surrogate_gap")}))
    rows[-1]["message"] = g("fast_message", "")
    rows.append(_row(inst, "fantope-subgradient (alg. 2)", {
        "phi_gap_vs_reference_mm": Check(g("alg2_gap"), alg2_gap, low=-alg2_gap),
        "phi_value_agreement": Check(g("alg2_value_err"), tol.VALUE_AT_RTOL),
        "converged": Check(None if g("alg2_converged") is None else (0.0 if g("alg2_converged") else 1.0), 0.0),
    }, p_star=g("phi_star"), f_fast=g("phi_alg2"), rel_gap=g("alg2_gap"), time_truth=g("time_ref"),
        time_fast=g("time_alg2"), numbers={"majorizer_gap": g("alg2_rho")}))
    rows[-1]["message"] = g("alg2_message", "")
    rows[-1]["numbers"]["time_mm_checks"] = t_mm
    for r in rows[-3:]:
        r["errors"] = _errors(mm)
        r["warnings"] = [w for w in mm_warnings if ("alg. 2" in r["solver"]) == ("fantope-subgradient" in w)]
    return _finish(rows)

SPEC = MethodSpec(
    name="fantope",
    instance_methods=("fantope",),
    kkt_truth=hinge_kkt_truth,
    kkt_fast=_kkt_fast,
    extra_rows=_extra_rows,
    tolerances=TOLERANCES,
    report_order=1,
)
