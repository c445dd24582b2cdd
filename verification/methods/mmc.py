r"""MMC in the harness: the max-form ascent (exact projection) against the cvxpy min form.

Ground-truth KKT (min form, from the duals :math:`\nu` of "dissimilar" and :math:`Z` of "psd"):
the Lagrangian is :math:`\langle C_S, M\rangle - \nu (g(M) - 1) - \langle Z, M\rangle` with
:math:`g(M) = \sum_D w_p \sqrt{\langle M, C_p\rangle}`, so

* primal feasibility: :math:`M \succeq 0`, :math:`g(M) \ge 1`;
* dual feasibility: :math:`\nu \ge 0`, :math:`Z \succeq 0`;
* complementary slackness: :math:`\nu (g(M) - 1) = 0`, :math:`\langle Z, M\rangle = 0`;
* stationarity: :math:`C_S - \nu \nabla g(M) - Z = 0`, :math:`\nabla g = \sum_D \frac{w_p}{2\sqrt{D_M(p)}} C_p`;
* (by homogeneity, :math:`\langle \nabla g(M), M\rangle = g(M)/2`, these imply :math:`\nu = 2 p^*`).

Fast solvers: the ascent in whitened coordinates (``mmc-ascent``, the default) and in the
original ones (``mmc-ascent-raw``). Fast point: its KKT residual is the certified relative gap of the point (scaled onto the
max-form boundary), :math:`f\,u^2 - 1` (:meth:`cvxmetric.mmc.MMCModel.certificate`).
Extra checks per fast row: the solver's certified gap, the scale identity on its own numbers
(:math:`f_{\text{fast}}\,p_{\max}^2 = 1`) and on the ground truth (Clarabel on both forms), and
that the certified lower bound does not exceed Clarabel's :math:`p^*`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from cvxmetric.mmc import MMCModel
from formulations.mmc import build_mmc, build_mmc_max
from solvers.mmc import solve_mmc

from ..registry import FastSolver, MethodSpec
from ..tolerances import (CERTIFICATE_SLACK, GAP_FIRST_ORDER, MMC_SCALE_IDENTITY_FAST_RTOL,
                          MMC_SCALE_IDENTITY_RTOL)


def _rel(num: float, *scales: float) -> float:
    return float(num) / max(1.0, *[float(s) for s in scales])


def mmc_kkt_truth(form, sol) -> dict[str, float]:
    """KKT residuals of a solved MMC min form (see the module docstring)."""
    model: MMCModel = form.model
    M = sol.point
    nu = float(np.asarray(sol.duals["dissimilar"]).reshape(-1)[0])
    Z = sol.duals["psd"]
    g = model.dissimilar_sum(M)
    nM, nZ = float(np.linalg.norm(M, 2)), float(np.linalg.norm(Z, 2))
    grad = nu * model.gradient(M)
    stat = model.CS - grad - Z
    return {
        "primal_psd": _rel(max(0.0, -float(np.linalg.eigvalsh(M)[0])), nM),
        "primal_dissimilar": max(0.0, 1.0 - g),
        "dual_nu": _rel(max(0.0, -nu), abs(nu)),
        "dual_psd": _rel(max(0.0, -float(np.linalg.eigvalsh(Z)[0])), nZ),
        "comp_dissimilar": _rel(abs(nu * (g - 1.0)), abs(nu)),
        "comp_psd": _rel(abs(float(np.vdot(Z, M))), nZ * nM),
        "stationarity_M": _rel(float(np.linalg.norm(stat)), np.linalg.norm(model.CS), np.linalg.norm(grad),
                               np.linalg.norm(Z)),
    }


def mmc_kkt_fast(form, point) -> float:
    """Certified relative gap :math:`f u^2 - 1` of any PSD point (scale-free)."""
    model: MMCModel = form.model
    M = np.asarray(point, dtype=np.float64)
    f = model.similar_sum(M)
    if f <= 0:
        return float("inf")
    g, u = model.certificate(M / f)
    return max(0.0, (1.0 / g ** 2) * u ** 2 - 1.0)


@lru_cache(maxsize=None)
def _max_form_value(name: str) -> float | None:
    from cvxmetric.instances import get_instance

    inst = get_instance("mmc", name)
    sol = build_mmc_max(inst.X, inst.constraints).solve("CLARABEL")
    return sol.value if sol.ok else None


def _extra_checks(form, inst, res, refs):
    p_max = res.info["p_max"]
    f_fast = form.value_at(res.M)
    out = {"certified_gap": (res.info["certified_gap"], GAP_FIRST_ORDER),
           "scale_identity_fast": (abs(f_fast * p_max ** 2 - 1.0), MMC_SCALE_IDENTITY_FAST_RTOL)}
    clar = refs.get("CLARABEL")
    p_star = clar.value if clar is not None and clar.ok else None
    pmax_star = _max_form_value(inst.name)
    out["scale_identity_truth"] = (None if p_star is None or pmax_star is None
                                   else abs(p_star * pmax_star ** 2 - 1.0), MMC_SCALE_IDENTITY_RTOL)
    out["certificate_below_truth"] = (None if p_star is None
                                      else (res.info["p_min_lower"] - p_star) / max(1.0, abs(p_star)),
                                      CERTIFICATE_SLACK)
    return out


SPEC = MethodSpec(
    name="mmc",
    instance_methods=("mmc",),
    build=lambda inst: build_mmc(inst.X, inst.constraints),
    fast_solvers=lambda inst: [
        FastSolver("mmc-ascent", lambda i: solve_mmc(i.X, i.constraints), GAP_FIRST_ORDER, GAP_FIRST_ORDER),
        FastSolver("mmc-ascent-raw", lambda i: solve_mmc(i.X, i.constraints, whiten=False),
                   GAP_FIRST_ORDER, GAP_FIRST_ORDER)],
    kkt_truth=mmc_kkt_truth,
    kkt_fast=mmc_kkt_fast,
    extra_checks=_extra_checks,
)
