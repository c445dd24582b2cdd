"""ITML in the harness: cvxpy LogDet/exp-cone ground truth vs cyclic Bregman projections.

* ground truth: the formulation's certification hooks (``dual_bound`` from the duals of
  "similar"/"dissimilar" through :meth:`cvxmetric.itml.ITMLModel.dual_bound`; ``normalize``, the
  whitened and rescaled twin; ``make_feasible``), so :func:`cvxmetric.formulations.ladder.solve_certified`
  returns a certified interval;
* ground-truth KKT: :func:`cvxmetric.formulations.itml.itml_kkt_truth` (every residual relative to the
  terms it balances: invariant under X -> sX and the prior's conditioning);
* fast solver: its verdict is its certified gap (``measure = "certified_gap"``, the same dual
  bound, from its own multipliers); the fast point's relative stationarity residual
  (:meth:`cvxmetric.itml.ITMLModel.kkt_residual`, whitened) is reported, not checked: at the
  solver's certified gap 1e-12 it is ~1e-6 (the gap is about its square), a diagnostic only;
* extra check (the harness itself re-checks the certified gap against ``value_at``): its multipliers agree with
  the closed-form multipliers of the returned M (both stationarity invariants hold, so this is
  complementary slackness / primal feasibility of the dual iterate).
"""
from __future__ import annotations

import numpy as np

from cvxmetric.formulations.itml import build_itml, itml_kkt_truth
from cvxmetric.solvers.itml import solve_itml

from ..registry import FastSolver, MethodSpec, Thresholds
from ..tolerances import GAP_BREGMAN, KKT_FAST_BREGMAN

#: The thresholds of ITML's solver (``solve_itml(method=...)``); the fast point's stationarity is
#: checked by the multiplier agreement (extra check, KKT_FAST_BREGMAN), not by a KKT residual.
TOLERANCES = {"bregman": Thresholds(GAP_BREGMAN, None)}


def _build(inst):
    return build_itml(inst.X, inst.constraints, **inst.params)


def _fast(inst):
    return [FastSolver("itml-bregman", lambda i: solve_itml(i.X, i.constraints, **i.params), *TOLERANCES["bregman"])]


def _kkt_fast(form, point):
    return form.model.kkt_residual(point)


def _extra(form, inst, res, truth):
    model = form.model
    lam_breg = np.asarray(res.multipliers)
    lam_closed = model.multipliers(res.M)
    scale = float(np.max(np.abs(lam_closed)))
    diff = float(np.max(np.abs(lam_breg - lam_closed)))
    agreement = 0.0 if diff == 0.0 else (diff / scale if scale > 0 else np.inf)
    return {"dual_agreement": (agreement, KKT_FAST_BREGMAN ** 0.5)}


SPEC = MethodSpec(
    name="itml",
    instance_methods=("itml",),
    build=_build,
    fast_solvers=_fast,
    kkt_truth=itml_kkt_truth,
    kkt_fast=_kkt_fast,
    extra_checks=_extra,
    tolerances=TOLERANCES,
)
