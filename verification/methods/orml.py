r"""ORML in the harness: the orthogonal pursuit's closed forms against the certified cvxpy problems.

Ground truth: :func:`cvxmetric.formulations.orml.build_orml`, every direction's least-squares problem
(eq. 20) stacked, certified by the ladder to ``ORML_TRUTH_RTOL``. Its KKT residuals: the relative
stationarity of the normal equations per direction, :math:`\|G_d^T(G_d b_d - h_d)\| /
(\|G_d^T G_d b_d\| + \|G_d^T h_d\|)`, and the relative violation of "residual"
(:math:`\|z - (Gw - h)\| / \max(\|z\|, \|h\|)`).

Fast solver: ``orml-pursuit`` (the ORML problem's ``"pursuit"``, :func:`cvxmetric.solvers.orml.orml_pursuit`, Cholesky normal equations);
``kkt_fast`` is the same stationarity residual at its point. Extra checks per row:

* ``direction_gap_max``: the largest relative gap of a direction's closed form against that
  direction's certified interval (upper: :math:`f_d` at Clarabel's point; lower: the dual bound
  of its residual repaired by projection, :func:`cvxmetric.formulations.orml.direction_dual_bounds`), and
  ``direction_truth_gap_max``, the widest of those intervals; ``direction_argmin_max``, the largest
  relative distance between a direction's closed-form ``b_d`` and Clarabel's (each problem is
  strongly convex, so the minimiser is unique: an objective gap is quadratic in the point's
  error, this check is linear in it);
* ``orthogonality``: :math:`\max_{i \ne j} |\cos(u_i, u_j)|` of the directions ``U`` of the
  returned coefficients ``w`` (:func:`cvxmetric.solvers.orml.pursuit_directions`);
* ``eq16_similar`` (exactly 0) and ``eq16_dissimilar`` (:math:`1 - \min` distance) on ``Y_l``;
* ``M_psd``, ``S_psd``: the paper's claim on :math:`M = L + 2T` and :math:`S = X_c^T M X_c` built
  densely from W and T (eq. 8), and ``S_factor`` its agreement with the edge factor.
"""
from __future__ import annotations

import numpy as np

from cvxmetric.certificates import relative_difference, relative_gap
from cvxmetric.orml import check_ideal_output, orml_weights
from cvxmetric.formulations.orml import direction_dual_bounds, direction_values
from cvxmetric.solvers.orml import pursuit_directions

from ..registry import MethodSpec, Thresholds
from ..tolerances import (GAP_ORML, ORML_ARGMIN_RTOL, KKT_FAST_ORML, ORML_EQ16_DISSIMILAR_RTOL, ORML_ORTHOGONALITY_TOL,
                          ORML_PSD_RTOL, ORML_S_FACTOR_RTOL, ORML_TRUTH_RTOL)

#: The threshold of ORML's closed-form pursuit (``solve_orml(method=...)``).
TOLERANCES = {"pursuit": Thresholds(GAP_ORML, KKT_FAST_ORML)}


def _ratio(num: float, den: float) -> float:
    return 0.0 if num == 0.0 else (num / den if den > 0 else float("inf"))


def stationarity(form, point) -> float:
    """Largest relative stationarity residual of the normal equations over the directions."""
    w = np.asarray(point, dtype=np.float64).reshape(-1)
    out = 0.0
    for G, h, s in zip(form.info["G"], form.info["h"], form.info["blocks"]):
        GtGb, Gth = G.T @ (G @ w[s]), G.T @ h
        out = max(out, _ratio(float(np.linalg.norm(GtGb - Gth)),
                              float(np.linalg.norm(GtGb) + np.linalg.norm(Gth))))
    return out


def orml_kkt_truth(form, sol) -> dict[str, float]:
    """KKT residuals of a solved ORML problem (module docstring)."""
    w = sol.point
    h = np.concatenate(form.info["h"])
    z = sol.aux.get("z")
    Gw = np.concatenate([G @ w[s] for G, s in zip(form.info["G"], form.info["blocks"])])
    primal = (float("inf") if z is None else
              _ratio(float(np.linalg.norm(z - (Gw - h))), max(float(np.linalg.norm(z)), float(np.linalg.norm(h)))))
    return {"stationarity": stationarity(form, w), "primal_residual": primal}


def _pairwise_cos(U: np.ndarray) -> float:
    nrm = np.linalg.norm(U, axis=0)
    C = (U.T @ U) / np.outer(nrm, nrm)
    return float(np.max(np.abs(C - np.diag(np.diag(C))))) if U.shape[1] > 1 else 0.0


def _psd_ratio(A: np.ndarray) -> float:
    lam = np.linalg.eigvalsh(0.5 * (A + A.T))
    return max(0.0, -float(lam[0])) / max(abs(float(lam[-1])), np.finfo(float).tiny)


def _extra_checks(form, inst, res, truth):
    model = form.model
    out = {}
    fast = direction_values(form, res.w)
    if truth is not None and truth.point is not None:
        upper = direction_values(form, truth.point)
        w = np.asarray(truth.point, dtype=np.float64)
        z = np.concatenate([G @ w[s] - h for G, h, s in zip(form.info["G"], form.info["h"], form.info["blocks"])])
        lower = direction_dual_bounds(form, 2.0 * z)
        out["direction_truth_gap_max"] = (max(relative_gap(u, lo) for u, lo in zip(upper, lower)), ORML_TRUTH_RTOL)
        out["direction_gap_max"] = (max(relative_difference(f, lo) for f, lo in zip(fast, lower)),
                                   TOLERANCES["pursuit"].gap_tol)
        out["direction_argmin_max"] = (max(float(np.linalg.norm(res.w[s] - w[s]) / np.linalg.norm(w[s]))
                                           for s in form.info["blocks"]), ORML_ARGMIN_RTOL)
    else:
        out["direction_gap_max"] = (None, TOLERANCES["pursuit"].gap_tol)
    out["orthogonality"] = (_pairwise_cos(pursuit_directions(model, res.w)), ORML_ORTHOGONALITY_TOL)
    sim, dis = check_ideal_output(model.Y, model.sample_pairs, model.relevant)
    out["eq16_similar"] = (sim, 0.0)
    out["eq16_dissimilar"] = (max(0.0, 1.0 - dis), ORML_EQ16_DISSIMILAR_RTOL)
    e = inst.extra
    W, T = orml_weights(inst.X, e["pairs"], e["relevant"], session=e["session"], n_neighbors=inst.params["n_neighbors"],
                        alpha=inst.params["alpha"], beta=inst.params["beta"])
    M = np.diag(W.sum(axis=1)) - W + 2.0 * T
    S = model.Xc.T @ M @ model.Xc
    out["M_psd"] = (_psd_ratio(M), ORML_PSD_RTOL)
    out["S_psd"] = (_psd_ratio(S), ORML_PSD_RTOL)
    out["S_factor"] = (float(np.max(np.abs(S - model.S)) / np.max(np.abs(S))), ORML_S_FACTOR_RTOL)
    return out


SPEC = MethodSpec(
    name="orml",
    instance_methods=("orml",),
    kkt_truth=orml_kkt_truth,
    kkt_fast=stationarity,
    extra_checks=_extra_checks,
    truth_checks=("direction_truth_gap_max",),
    truth_rtol=ORML_TRUTH_RTOL,
    tolerances=TOLERANCES,
    report_order=7,
)
