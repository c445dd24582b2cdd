r"""KKT residuals for the hinge model (Qwise, LMNN, Fantope bound) and the vector model.

Ground truth (from the named duals of a solved :func:`cvxmetric.formulations.hinge.build_hinge_problem`):
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

__all__ = ["Residual", "relative_residual", "hinge_kkt_truth", "hinge_kkt_fast", "vector_kkt", "vector_kkt_truth"]


def relative_residual(num: float, *scales: float) -> float:
    """``num`` relative to the largest of ``scales`` (0/0 = 0; x/0 = inf): no floor at 1, so the
    residual is the same number for a problem and any rescaling of it."""
    num = float(num)
    den = max((float(t) for t in scales), default=0.0)
    if num == 0.0:
        return 0.0
    return num / den if den > 0 else float("inf")


class Residual(float):
    """A KKT residual (a float) with ``reason``: empty when it was computed as documented, else why
    it is NaN or only an upper bound (a failed small cvxpy problem never raises)."""

    reason: str = ""

    def __new__(cls, value: float, reason: str = ""):
        out = super().__new__(cls, value)
        out.reason = reason
        return out


def hinge_kkt_truth(form, sol) -> dict[str, float]:
    """KKT residuals of a solved hinge-model formulation (see the module docstring).

    Every residual is relative to the size of the terms it compares, with no floor at 1, so the
    same solve of a rescaled problem (the ladder's normalized twin, data times s, weights times c)
    gives the same numbers:

    * ``primal_psd``: :math:`[-\\lambda_{\\min}(M)]_+ / \\max(\\|M\\|_2, m_0)` with :math:`m_0` the
      model's ``metric_scale`` (the optimum may be M = 0, where a solver returns round-off);
    * ``primal_hinge``, ``primal_slack``: violations over :math:`\\max(\\|\\xi\\|_\\infty,
      \\|\\delta + \\langle M, A\\rangle\\|_\\infty)`;
    * ``dual_alpha``, ``dual_beta``, ``stationarity_xi``: over :math:`\\max_c c_c`;
    * ``dual_psd``: :math:`[-\\lambda_{\\min}(Z)]_+ / \\|Z\\|_2`;
    * ``comp_hinge``, ``comp_slack``: :math:`\\max_c |\\alpha_c\\,\\mathrm{slack}_c|` over
      :math:`\\max_c c_c` times the margin scale above;
    * ``comp_psd``: :math:`|\\langle Z, M\\rangle|` over :math:`\\max(\\|M\\|_F, m_0)` times the
      largest norm of the stationarity terms (below): the size of each term of
      :math:`\\langle R + qM + \\sum \\alpha_c A_c - Z, M\\rangle = 0`;
    * ``stationarity_M``: :math:`\\|R + qM + \\sum \\alpha_c A_c - Z\\|_F` over the largest of the
      three terms' norms and, for :math:`q > 0`, the regularizer's gradient at the edge of the ball
      that holds the optimum (:func:`_hinge_ball_gradient`).
    """
    model: HingeModel = form.model
    M = sol.point
    xi = sol.aux["xi"]
    alpha, beta, Z = sol.duals["hinge"], sol.duals["slack_nonneg"], sol.duals["psd"]
    geom = model.geometry
    delta = np.asarray(model.constraints.delta)
    lin = delta + geom.values(M)
    lam_M = np.linalg.eigvalsh(M)
    lam_Z = np.linalg.eigvalsh(Z)
    m0 = model.metric_scale
    nM, nZ = max(float(np.linalg.norm(M, 2)), m0), float(np.linalg.norm(Z, 2))
    xscale = max(float(np.max(np.abs(xi))), float(np.max(np.abs(lin)))) if xi.size else 0.0
    cmax = float(np.max(model.coef)) if model.m else 0.0
    grad_reg = model.regularizer_grad(M)
    sumA = geom.weighted_sum(alpha)
    stat = grad_reg + sumA - Z
    stat_scale = max(float(np.linalg.norm(grad_reg)), float(np.linalg.norm(sumA)), float(np.linalg.norm(Z)),
                     _hinge_ball_gradient(model))
    return {
        # primal feasibility
        "primal_psd": relative_residual(max(0.0, -lam_M[0]), nM),
        "primal_hinge": relative_residual(max(0.0, float(np.max(lin - xi))) if xi.size else 0.0, xscale),
        "primal_slack": relative_residual(max(0.0, float(-np.min(xi))) if xi.size else 0.0, xscale),
        # dual feasibility
        "dual_alpha": relative_residual(max(0.0, float(-np.min(alpha))) if alpha.size else 0.0, cmax),
        "dual_beta": relative_residual(max(0.0, float(-np.min(beta))) if beta.size else 0.0, cmax),
        "dual_psd": relative_residual(max(0.0, -lam_Z[0]), nZ),
        # complementary slackness
        "comp_hinge": relative_residual(float(np.max(np.abs(alpha * (xi - lin)))) if xi.size else 0.0, cmax * xscale),
        "comp_slack": relative_residual(float(np.max(np.abs(beta * xi))) if xi.size else 0.0, cmax * xscale),
        "comp_psd": relative_residual(abs(float(np.vdot(Z, M))), max(float(np.linalg.norm(M)), m0) * stat_scale),
        # stationarity
        "stationarity_M": relative_residual(float(np.linalg.norm(stat)), stat_scale),
        "stationarity_xi": relative_residual(float(np.max(np.abs(model.coef - alpha - beta))) if alpha.size else 0.0, cmax),
    }


def _hinge_ball_gradient(model: HingeModel) -> float:
    r"""The gradient :math:`q r` of the regularizer at the radius :math:`r` of the ball that holds the
    optimum of a hinge model with :math:`q > 0` (0 for :math:`q = 0`).

    The loss is nonnegative, so :math:`\tfrac q2 \|M^*\|_F^2 - \|R\|_F \|M^*\|_F \le f(M^*) \le f(0)`, i.e.
    :math:`q\|M^*\|_F \le \|R\|_F + \sqrt{\|R\|_F^2 + 2 q f(0)}`. A stationarity residual :math:`S` relative to
    this size is what it costs the objective across that ball (:math:`\|S\| r` against :math:`f(0)`), the
    same reading as the vector model's radius (:func:`_radius`). Without it an optimum deep inside the
    ball reads 0/0: Qwise syn-d20 with X x 1e-4 (normalized twin: :math:`q = 1.1 \times 10^{15}`,
    :math:`M^* \approx 10^{-12} I`) balances terms of 84 (:math:`\sum\alpha_c A_c`) against Clarabel's
    :math:`qM` and :math:`Z` of 8e3 and 1.4e4, certified within 1.2e-11: 0.42 of those terms, 2.6e-6 of
    :math:`qr = 2.3 \times 10^9`. On the default instances :math:`qr` is of the terms' size (syn-d20: 35 and 22).
    """
    if not model.q:
        return 0.0
    nR = float(np.linalg.norm(model.R))
    f0 = model.value(np.zeros((model.d, model.d)))
    return nR + float(np.sqrt(nR * nR + 2.0 * model.q * max(f0, 0.0)))


def hinge_kkt_fast(model: HingeModel, M: np.ndarray, *, tight_rtol: float = TIGHT_RTOL,
                   null_rtol: float = NULLSPACE_RTOL) -> Residual:
    r"""Relative distance from 0 to :math:`\partial f(M) + N_{\mathbb{S}_+}(M)` at a (near-)PSD M.

    Returns
    -------
    Residual
        A float: :math:`\min \|G + \sum_{\text{tight}} a_c c_c A_c - V_0 S V_0^\top\|_F / \sigma` over
        :math:`a \in [0, 1]`, :math:`S \succeq 0`, with :math:`G = R + qM + \sum_{\text{violated}} c_c A_c`
        and :math:`\sigma = \max(\|R + qM\|_F, \|\sum_{\text{violated}} c_c A_c\|_F,
        \|\sum_{\text{tight}} c_c A_c\|_F)` (0 when :math:`\sigma = 0`). Never raises: a failed
        solve gives NaN with ``reason`` set.

    Notes
    -----
    Scale-free throughout: a constraint is tight when its margin :math:`\delta_c + \langle M, A_c\rangle`
    is within ``tight_rtol`` of :math:`\max(|\delta_c|, |\langle M, A_c\rangle|)`; the null space of M
    holds the eigenvalues at or below ``null_rtol`` times :math:`\max(\lambda_{\max}(M), m_0)`
    (:math:`m_0` the model's ``metric_scale``: an M that is round-off around an optimum M = 0 is all
    null space); the small QP is posed in units of :math:`\sigma` (every coefficient O(1),
    whatever the scale of X or of the weights), and its value is recomputed in numpy at the
    solver's point made feasible (a clipped into [0, 1], S projected onto the PSD cone), so the
    number returned is the residual of an exact feasible choice: an upper bound on the distance,
    tight when the solve is accurate.
    """
    try:
        return _hinge_kkt_fast(model, M, tight_rtol, null_rtol)
    except Exception as exc:   # the harness prints the reason in the row; it never crashes
        return Residual(float("nan"), f"fast-point KKT residual failed: {type(exc).__name__}: {exc}")


def _hinge_kkt_fast(model: HingeModel, M, tight_rtol: float, null_rtol: float) -> Residual:
    M = project_psd(np.asarray(M, dtype=np.float64))
    geom = model.geometry
    delta = np.asarray(model.constraints.delta)
    vals = geom.values(M)
    s = delta + vals
    band = tight_rtol * np.maximum(np.abs(delta), np.abs(vals))
    violated = s > band
    tight = np.abs(s) <= band
    grad = model.regularizer_grad(M)
    base = grad + geom.weighted_sum(model.coef * violated)
    t_rows = np.flatnonzero(tight)
    tight_sum = geom.weighted_sum(model.coef * tight)
    scale = max(float(np.linalg.norm(grad)), float(np.linalg.norm(base - grad)), float(np.linalg.norm(tight_sum)))
    if scale == 0.0:
        return Residual(0.0)
    lam, V = np.linalg.eigh(M)
    V0 = V[:, lam <= null_rtol * max(float(lam[-1]), model.metric_scale)]
    if t_rows.size == 0 and V0.shape[1] == 0:
        return Residual(float(np.linalg.norm(base)) / scale)
    # everything in Frobenius-weighted svec coordinates (upper triangle, off-diagonals times
    # sqrt 2): ||vec||_2 = ||matrix||_F, with d(d+1)/2 entries and no d x d matrix per constraint,
    # divided by scale so that every coefficient of the QP is O(1)
    iu = np.triu_indices(model.d)
    off = iu[0] != iu[1]
    fro = np.where(off, np.sqrt(2.0), 1.0)
    b0 = base[iu] * fro / scale
    # svec_matrix rows hold <M, A_c> coefficients (off-diagonals doubled): entries A_ab are a / 2
    # off the diagonal, so the Frobenius-weighted entries are a / sqrt 2 there
    At = (geom.subset(t_rows).svec_matrix() * np.where(off, 1.0 / np.sqrt(2.0), 1.0)).T \
        * (model.coef[t_rows] / scale) if t_rows.size else np.zeros((b0.size, 0))
    r = V0.shape[1]

    def residual(a, S) -> float:
        vec = b0 + At @ a
        if r:
            vec = vec - fro * (V0 @ S @ V0.T)[iu]
        return float(np.linalg.norm(vec))

    a_var = cp.Variable(t_rows.size) if t_rows.size else None
    S_var = cp.Variable((r, r), PSD=True) if r else None
    expr = b0
    cons = []
    if a_var is not None:
        expr = expr + At @ a_var
        cons += [a_var >= 0, a_var <= 1]
    if S_var is not None:
        expr = expr - cp.multiply(fro, (V0 @ S_var @ V0.T)[iu])
    # least squares (a QP for Clarabel) rather than the norm (an SOCP): same minimiser, and
    # Clarabel solves the QP form to full accuracy where the SOCP form sometimes ends inaccurate
    prob = cp.Problem(cp.Minimize(cp.sum_squares(expr)), cons)
    status = "not solved"
    try:
        prob.solve(solver="CLARABEL")
        status = str(prob.status)
    except Exception as exc:
        status = f"error: {type(exc).__name__}: {exc}"
    a = np.zeros(t_rows.size)
    S = np.zeros((r, r))
    have_point = (a_var is None or a_var.value is not None) and (S_var is None or S_var.value is not None)
    if not have_point:
        return Residual(float("nan"), f"fast-point KKT problem ended with status {status} and no point")
    if a_var is not None:
        a = np.clip(np.asarray(a_var.value, dtype=np.float64).reshape(-1), 0.0, 1.0)
    if S_var is not None:
        S = project_psd(np.asarray(S_var.value, dtype=np.float64))
    value = residual(a, S)
    reason = "" if status == "optimal" else f"fast-point KKT problem ended with status {status}; " \
                                            "the residual is that of its point made feasible (an upper bound)"
    return Residual(value, reason)


def _radius(vm: VectorModel, w: np.ndarray) -> float:
    r"""The radius :math:`R = \sqrt{2\min(F(0), F(\Pi_{\mathcal{C}}(\omega)))}` of a ball that holds the optimum.

    The loss is nonnegative and :math:`0 \in \mathcal{C}`, so :math:`\tfrac12\|\omega^*\|^2 \le p^* \le F(0)`,
    and likewise :math:`\le F(\omega)` at any feasible point: :math:`R` is the objective's own unit of
    length (a step :math:`r` from the optimum costs at least :math:`\tfrac12\|r\|^2`, 1-strong convexity, i.e.
    :math:`(r / R)^2` of the objective's size), and does not grow with a wrong point.
    """
    f = min(vm.value(np.zeros(vm.e)), vm.value(vm.project(w)))
    return float(np.sqrt(2.0 * max(f, 0.0)))


def _vector_terms_scale(vm: VectorModel, w: np.ndarray, alpha: np.ndarray, nu=None) -> float:
    r"""The size a stationarity residual of :math:`\omega - G^\top\alpha - \nu = 0` is measured against: the
    largest of its terms *before* they cancel, :math:`\|\omega\|_\infty`, :math:`\||G|^\top|\alpha|\|_\infty`,
    :math:`\|\nu\|_\infty` (a normwise backward error), and the radius :func:`_radius` of a ball that holds
    the optimum.

    On stiff data the terms cancel by many orders (features x1e4: summands :math:`g_c\alpha_c` of 1e8
    balance an :math:`\omega` of 1e-8), so dividing by the size of the *sums* reads round-off of the
    multipliers as a residual of order 1; dividing by ``max(1, ...)`` makes the residual absolute.
    Without the radius, an optimum far inside that ball reads 0/0: hierarchy-diag-d8 with X x 1e-4 has
    every loss term in its linear zone, :math:`\omega^* = G^\top c` with
    :math:`\|\omega^*\|_\infty = 8.6 \times 10^{-6}` and :math:`F = 600`; the point :math:`\omega = 0`,
    certified within 4e-13 of :math:`p^*`, has the residual :math:`8.6 \times 10^{-6}`: 0.67 of the
    terms (:math:`1.3 \times 10^{-5}`), :math:`2.5 \times 10^{-7}` of :math:`R = 34.6`.

    Scale-free: every term and :math:`R` scale alike under the model's exact rescaling
    :meth:`~cvxmetric.vector_model.VectorModel.scaled` (:math:`F(\alpha u) = \alpha^2 F_\alpha(u)`).
    """
    terms = [float(np.max(np.abs(w), initial=0.0)),
             float(np.max(np.abs(vm.G).T @ np.abs(alpha), initial=0.0)),
             _radius(vm, w)]
    if nu is not None:
        terms.append(float(np.max(np.abs(nu), initial=0.0)))
    return max(terms)


def vector_kkt(vm: VectorModel, w: np.ndarray) -> float:
    r"""Relative projected-gradient residual of the smooth model at a fast point.

    :math:`r = \omega - \Pi(\omega - \nabla F)`, :math:`\nabla F = \omega - G^\top\alpha(\omega)`,
    :math:`\alpha = c \circ \ell_h'(s)`. Each entry is one of two things, measured in its own unit:

    * where the projection is inactive, :math:`r_i = \nabla_i F`, a sum of terms that cancel: over
      :func:`_vector_terms_scale` (the terms and the radius :math:`R` of :func:`_radius`);
    * where it clips (diagonal model, :math:`\omega_i \le \nabla_i F`), :math:`r_i = \omega_i`, the distance to
      the bound :math:`\omega_i = 0`, a length: over :math:`R`. The gradient's terms are no unit for it
      (a point with :math:`\omega_i = 1.1` where the optimum has 0, on hierarchy-diag-d8 with its
      constraints reversed and X x 1e4, has terms of 1e11 and would read 1e-11).

    Returns the larger of the two (0/0 = 0), so it is small at an optimum, also one deep inside the
    ball or on the boundary :math:`w = 0`, and large at a point off the optimum by a fraction of
    :math:`R` that the objective feels.
    """
    w = np.asarray(w, dtype=np.float64)
    g = vm.gradient(w)
    clipped = (w - g < 0.0) if vm.nonneg else np.zeros(w.shape, dtype=bool)
    r_free = float(np.max(np.abs(g[~clipped]), initial=0.0))
    r_bound = float(np.max(np.abs(w[clipped]), initial=0.0))
    return max(relative_residual(r_free, _vector_terms_scale(vm, w, vm.multipliers(w))),
               relative_residual(r_bound, _radius(vm, w)))


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
    out = {"stationarity": relative_residual(float(np.max(np.abs(w - vm.G.T @ lam - nu))), scale),
           "dual_box": relative_residual(float(np.max(box, initial=0.0)), float(np.max(vm.coef, initial=0.0)))}
    if vm.nonneg:
        out["primal_nonneg"] = relative_residual(max(0.0, float(-np.min(w))), scale)
        out["dual_nonneg"] = relative_residual(max(0.0, float(-np.min(nu))), scale)
        out["comp_nonneg"] = relative_residual(float(np.max(np.abs(nu * w))), scale * scale)
    return out
