"""ITML in the harness: cvxpy LogDet/exp-cone ground truth vs cyclic Bregman projections.

* ground-truth KKT: :func:`formulations.itml.itml_kkt_truth` (duals of "similar"/"dissimilar");
* fast point: the relative stationarity residual of the reduced objective
  (:meth:`cvxmetric.itml.ITMLModel.kkt_residual`; smooth on the open PD cone);
* extra checks: the Bregman multipliers agree with the closed-form multipliers of the returned M
  (both stationarity invariants hold, so this is complementary slackness / primal feasibility of
  the dual iterate).
"""
from __future__ import annotations

import numpy as np

from formulations.itml import build_itml, itml_kkt_truth
from solvers.itml import solve_itml

from ..registry import FastSolver, MethodSpec
from ..tolerances import GAP_BREGMAN, KKT_FAST_BREGMAN


def _build(inst):
    return build_itml(inst.X, inst.constraints, **inst.params)


def _fast(inst):
    return [FastSolver("itml-bregman", lambda i: solve_itml(i.X, i.constraints, **i.params),
                       GAP_BREGMAN, KKT_FAST_BREGMAN)]


def _kkt_fast(form, point):
    return form.model.kkt_residual(point)


def _project(form, point):
    # SCS's M: symmetrize only. An (unlikely) indefinite M scores +inf under value_at, which
    # is the honest value of the LogDet objective there; no projection can make it look better.
    point = np.asarray(point, dtype=np.float64)
    return 0.5 * (point + point.T)


def _extra(form, inst, res, refs):
    model = form.model
    lam_breg = np.asarray(res.info["lam"])
    lam_closed = model.multipliers(res.M)
    scale = max(1.0, float(np.max(np.abs(lam_closed))))
    return {"dual_agreement": (float(np.max(np.abs(lam_breg - lam_closed))) / scale, KKT_FAST_BREGMAN ** 0.5)}


SPEC = MethodSpec(
    name="itml",
    instance_methods=("itml",),
    build=_build,
    fast_solvers=_fast,
    kkt_truth=itml_kkt_truth,
    kkt_fast=_kkt_fast,
    extra_checks=_extra,
)
