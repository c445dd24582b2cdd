r"""KKT residuals for the hinge model (Qwise, LMNN, Fantope bound) and the vector model.

Ground truth (from the named duals of a solved :func:`formulations.hinge.build_hinge_problem`):
with :math:`\alpha` = dual of "hinge", :math:`\beta` = dual of "slack_nonneg", :math:`Z` = dual of
"psd", the Lagrangian is
:math:`\langle R, M\rangle + \tfrac q2\|M\|^2 + c^\top\xi + \sum_c \alpha_c(\delta_c + \langle M, A_c\rangle - \xi_c)
- \beta^\top\xi - \langle Z, M\rangle` and the KKT conditions are

* primal feasibility: :math:`M \succeq 0`, :math:`\xi \ge \delta + \langle M, A\rangle`, :math:`\xi \ge 0`;
* dual feasibility: :math:`\alpha, \beta \ge 0`, :math:`Z \succeq 0`;
* complementary slackness: :math:`\alpha_c(\xi_c - \delta_c - \langle M, A_c\rangle) = 0`,
  :math:`\beta_c\xi_c = 0`, :math:`\langle Z, M\rangle = 0`;
* stationarity: :math:`R + qM + \sum_c \alpha_c A_c - Z = 0` and :math:`c - \alpha - \beta = 0`.

Each residual is normalised by the size of the terms it compares (documented per entry).

Fast point: the distance from 0 to :math:`\partial f(M) + N_{\mathbb{S}_+}(M)`, i.e.
:math:`\min \|R + qM + \sum_{\text{violated}} c_c A_c + \sum_{\text{tight}} \alpha_c A_c - V_0 S V_0^\top\|_F`
over :math:`\alpha_c \in [0, c_c]` and :math:`S \succeq 0`, with :math:`V_0` the (numerical) null space
of :math:`M`: a small cvxpy problem.
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxmetric.linalg import project_psd
from cvxmetric.models import HingeModel
from cvxmetric.vector_model import VectorModel

from .tolerances import NULLSPACE_RTOL, TIGHT_RTOL

__all__ = ["hinge_kkt_truth", "hinge_kkt_fast", "vector_kkt", "vector_kkt_truth", "certificate_checks"]


def _rel(num: float, *scales: float) -> float:
    return float(num) / max(1.0, *[float(s) for s in scales])


def hinge_kkt_truth(form, sol) -> dict[str, float]:
    """KKT residuals of a solved hinge-model formulation (see the module docstring)."""
    model: HingeModel = form.model
    M = sol.point
    xi = sol.aux["xi"]
    alpha, beta, Z = sol.duals["hinge"], sol.duals["slack_nonneg"], sol.duals["psd"]
    geom = model.geometry
    delta = np.asarray(model.constraints.delta)
    lin = delta + geom.values(M)
    lam_M = np.linalg.eigvalsh(M)
    lam_Z = np.linalg.eigvalsh(Z)
    nM, nZ = float(np.linalg.norm(M, 2)), float(np.linalg.norm(Z, 2))
    xscale = float(np.max(np.abs(xi))) if xi.size else 0.0
    cmax = float(np.max(model.coef)) if model.m else 0.0
    grad_reg = model.regularizer_grad(M)
    sumA = geom.weighted_sum(alpha)
    stat = grad_reg + sumA - Z
    return {
        # primal feasibility
        "primal_psd": _rel(max(0.0, -lam_M[0]), nM),
        "primal_hinge": _rel(max(0.0, float(np.max(lin - xi))) if xi.size else 0.0, xscale),
        "primal_slack": _rel(max(0.0, float(-np.min(xi))) if xi.size else 0.0, xscale),
        # dual feasibility
        "dual_alpha": _rel(max(0.0, float(-np.min(alpha))) if alpha.size else 0.0, cmax),
        "dual_beta": _rel(max(0.0, float(-np.min(beta))) if beta.size else 0.0, cmax),
        "dual_psd": _rel(max(0.0, -lam_Z[0]), nZ),
        # complementary slackness
        "comp_hinge": _rel(float(np.max(np.abs(alpha * (xi - lin)))) if xi.size else 0.0, cmax * max(1.0, xscale)),
        "comp_slack": _rel(float(np.max(np.abs(beta * xi))) if xi.size else 0.0, cmax * max(1.0, xscale)),
        "comp_psd": _rel(abs(float(np.vdot(Z, M))), nZ * nM),
        # stationarity
        "stationarity_M": _rel(float(np.linalg.norm(stat)), np.linalg.norm(grad_reg), np.linalg.norm(sumA),
                               np.linalg.norm(Z)),
        "stationarity_xi": _rel(float(np.max(np.abs(model.coef - alpha - beta))) if alpha.size else 0.0, cmax),
    }


def hinge_kkt_fast(model: HingeModel, M: np.ndarray, *, tight_rtol: float = TIGHT_RTOL,
                   null_rtol: float = NULLSPACE_RTOL) -> float:
    r"""Relative distance from 0 to :math:`\partial f(M) + N_{\mathbb{S}_+}(M)` at a (near-)PSD M.

    Normalised by :math:`\max(1, \|R + qM\|_F, \|\sum_{\text{violated}} c A\|_F)`.
    """
    M = project_psd(np.asarray(M, dtype=np.float64))
    geom = model.geometry
    delta = np.asarray(model.constraints.delta)
    s = delta + geom.values(M)
    band = tight_rtol * np.maximum(1.0, np.abs(delta))
    violated = s > band
    tight = np.abs(s) <= band
    base = model.regularizer_grad(M) + geom.weighted_sum(model.coef * violated)
    lam, V = np.linalg.eigh(M)
    V0 = V[:, lam <= null_rtol * max(1.0, float(lam[-1]))]
    scale = max(1.0, float(np.linalg.norm(model.regularizer_grad(M))), float(np.linalg.norm(base)))
    t_rows = np.flatnonzero(tight)
    if t_rows.size == 0 and V0.shape[1] == 0:
        return float(np.linalg.norm(base)) / scale
    # everything in Frobenius-weighted svec coordinates (upper triangle, off-diagonals times
    # sqrt 2): ||vec||_2 = ||matrix||_F, with d(d+1)/2 entries and no d x d matrix per constraint
    iu = np.triu_indices(model.d)
    off = iu[0] != iu[1]
    fro = np.where(off, np.sqrt(2.0), 1.0)
    vec = base[iu] * fro
    cons = []
    if t_rows.size:
        # svec_matrix rows hold <M, A_c> coefficients (off-diagonals doubled): entries A_ab are
        # a / 2 off the diagonal, so the Frobenius-weighted entries are a / sqrt 2 there
        A = geom.subset(t_rows).svec_matrix() * np.where(off, 1.0 / np.sqrt(2.0), 1.0)
        alpha = cp.Variable(t_rows.size)
        cons += [alpha >= 0, alpha <= model.coef[t_rows]]
        vec = vec + A.T @ alpha
    r = V0.shape[1]
    if r:
        S = cp.Variable((r, r), PSD=True)
        vec = vec - cp.multiply(fro, (V0 @ S @ V0.T)[iu])
    # least squares (a QP for Clarabel) rather than the norm (an SOCP): same minimiser, and
    # Clarabel solves the QP form to full accuracy where the SOCP form sometimes ends inaccurate
    prob = cp.Problem(cp.Minimize(cp.sum_squares(vec)), cons)
    prob.solve(solver="CLARABEL")
    if prob.status != "optimal":
        raise RuntimeError(f"fast-point KKT problem ended with status {prob.status}")
    return float(np.sqrt(max(prob.value, 0.0))) / scale


def _vector_terms_scale(vm: VectorModel, w: np.ndarray, alpha: np.ndarray, nu=None) -> float:
    r"""Size of the terms the stationarity :math:`\omega - G^\top\alpha - \nu = 0` sums, *before* they cancel:
    :math:`\max(\|\omega\|_\infty, \||G|^\top|\alpha|\|_\infty, \|\nu\|_\infty)` (a normwise backward error).

    On stiff data the terms cancel by many orders (features x1e4: summands :math:`g_c\alpha_c` of 1e8
    balance an :math:`\omega` of 1e-8), so dividing by the size of the *sums* reads round-off of the
    multipliers as a residual of order 1; dividing by ``max(1, ...)`` makes the residual absolute.
    This denominator is scale-free (every term scales alike under the model's exact rescaling
    :meth:`~cvxmetric.vector_model.VectorModel.scaled`).
    """
    terms = [float(np.max(np.abs(w), initial=0.0)),
             float(np.max(np.abs(vm.G).T @ np.abs(alpha), initial=0.0))]
    if nu is not None:
        terms.append(float(np.max(np.abs(nu), initial=0.0)))
    return max(terms)


def _ratio(num: float, den: float) -> float:
    """``num / den``; 0 when ``num`` is 0 (every term zero), ``inf`` for a non-zero residual over 0."""
    num = float(num)
    if num == 0.0:
        return 0.0
    return num / den if den > 0 else float("inf")


def vector_kkt(vm: VectorModel, w: np.ndarray) -> float:
    r"""Relative projected-gradient residual of the smooth model at a fast point.

    :math:`\|\omega - \Pi(\omega - \nabla F)\|_\infty`, :math:`\nabla F = \omega - G^\top\alpha(\omega)`,
    :math:`\alpha = c \circ \ell_h'(s)`, divided by :func:`_vector_terms_scale`.
    """
    w = np.asarray(w, dtype=np.float64)
    g = vm.gradient(w)
    z = np.maximum(w - g, 0.0) if vm.nonneg else w - g
    return _ratio(float(np.max(np.abs(w - z), initial=0.0)), _vector_terms_scale(vm, w, vm.multipliers(w)))


def vector_kkt_truth(form, sol) -> dict[str, float]:
    r"""KKT residuals of the vector model's ground truth, from its duals.

    With :math:`\lambda` the dual of "hinge" (:math:`t \ge v`) and :math:`\nu` that of "nonneg", the Lagrangian's
    stationarity in :math:`v` gives :math:`\lambda_c = c_c(s_c + h - v_c)/(2h)` (the loss multipliers) and in
    :math:`\omega`: :math:`\omega - G^\top\lambda - \nu = 0`; with :math:`t`: :math:`0 \le \lambda \le c`. Residuals:
    ``stationarity`` (divided by :func:`_vector_terms_scale`, S), ``dual_box`` (distance of
    :math:`\lambda` to :math:`[0, c]` over :math:`\max c`), and for the diagonal model ``primal_nonneg``,
    ``dual_nonneg`` (over S) and ``comp_nonneg`` :math:`\max|\nu_i\omega_i|` (over :math:`S^2`). All scale-free.
    The duals are used rather than :math:`\alpha(\omega)` recomputed from the point: on stiff data a
    point accurate to 1e-12 gives multipliers off by :math:`\text{curvature} \times 10^{-12}`.
    """
    vm: VectorModel = form.model
    w = np.asarray(sol.point, dtype=np.float64)
    lam = np.asarray(sol.duals["hinge"], dtype=np.float64).reshape(-1)
    nu = np.asarray(sol.duals["nonneg"], dtype=np.float64).reshape(-1) if vm.nonneg else np.zeros_like(w)
    scale = _vector_terms_scale(vm, w, lam, nu)
    box = np.maximum(np.maximum(-lam, lam - vm.coef), 0.0)
    out = {"stationarity": _ratio(float(np.max(np.abs(w - vm.G.T @ lam - nu))), scale),
           "dual_box": _ratio(float(np.max(box, initial=0.0)), float(np.max(vm.coef, initial=0.0)))}
    if vm.nonneg:
        out["primal_nonneg"] = _ratio(max(0.0, float(-np.min(w))), scale)
        out["dual_nonneg"] = _ratio(max(0.0, float(-np.min(nu))), scale)
        out["comp_nonneg"] = _ratio(float(np.max(np.abs(nu * w))), scale * scale)
    return out


def certificate_checks(form, inst, res, refs) -> dict:
    """Checks of a fast solver's certified lower bound (``res.info["lower_bound"]``), where it has one.

    ``certified_gap`` (the solver's own (f - bound) / max(1, |f|)) must be small, and the bound must
    not exceed Clarabel's p* (a bound above the optimum is a wrong certificate). A MethodSpec's
    ``extra_checks``.
    """
    from .tolerances import CERTIFIED_GAP_PDHG, GAP_NEGATIVE_SLACK

    lb = res.info.get("lower_bound")
    if lb is None:
        return {}
    checks = {"certified_gap": (res.info["certified_gap"], CERTIFIED_GAP_PDHG)}
    clar = refs.get("CLARABEL")
    if clar is not None and clar.ok:
        checks["certificate_below_p_star"] = ((lb - clar.value) / max(1.0, abs(clar.value)), GAP_NEGATIVE_SLACK)
    return checks
