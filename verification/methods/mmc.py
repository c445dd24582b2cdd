r"""MMC in the harness: the max-form ascent (exact projection) against the cvxpy min form.

Ground-truth KKT (min form, from the solver's point :math:`M` and the dual :math:`\nu` of
"dissimilar"): the Lagrangian is :math:`\langle C_S, M\rangle - \nu (g(M) - 1) - \langle Z, M\rangle` with
:math:`g(M) = \sum_D w_p \sqrt{\langle M, C_p\rangle}`, so

* primal feasibility: :math:`M \succeq 0`, :math:`g(M) \ge 1`;
* stationarity: :math:`Z = C_S - \nu \nabla g(M)`, :math:`\nabla g = \sum_D \frac{w_p}{2\sqrt{D_M(p)}} C_p`;
* dual feasibility: :math:`\nu \ge 0`, :math:`Z \succeq 0`;
* complementary slackness: :math:`\nu (g(M) - 1) = 0`, :math:`\langle Z, M\rangle = 0`;
* (by homogeneity, :math:`\langle \nabla g(M), M\rangle = g(M)/2`, these imply :math:`\nu = 2 p^*`).

The dual slack :math:`Z` is the one stationarity assigns to :math:`(M, \nu)` (the certificate's
:math:`\lambda(M)` reads the same matrix :math:`\nabla g(M)`), not the solver's reported dual of
"psd": Clarabel returns its interior iterate of that dual, whose block on the null space of a
low-rank optimum is off by ~1e-5 relative even when the interval of :math:`p^*` is 1e-8 wide
(wine subset, 30 points: :math:`\|C_S - \nu\nabla g - Z_{\text{Clarabel}}\|` 1.7e-5 relative, all of it
on the null space of M, while :math:`C_S - \nu\nabla g` itself is PSD to 1e-12 and orthogonal to M to
1e-10; SCS's dual on the same problem: 3e-8). A wrong point or a wrong :math:`\nu` still fails:
:math:`Z` then has a negative eigenvalue or is not orthogonal to :math:`M`.

Every residual is scale-free: matrices are compared in the model's equilibrated coordinates
(:math:`F M F`, :math:`F^{-1} Z F^{-1}`, ``F = feature_scale``, exact powers of 2) and each residual is
divided by the size of the terms it balances (never by ``max(1, ...)``); the constraint residuals
:math:`1 - g` are already relative to the right-hand side 1.

Fast solvers (the MMC problem's runs, :meth:`cvxmetric.problems.MMC.runs`): the ascent in
whitened coordinates (``mmc-ascent``, the default) and in the original ones (``mmc-ascent-raw``). The diagonal MMC (``mmc_diagonal``, metric-learn's
``diagonal=True``) is checked the same way with the vector :math:`a = \operatorname{diag}(M)`:
:math:`z = s - \nu \nabla g(a) \ge 0` and :math:`z \circ a = 0` replace the PSD dual slack, each
feature's residual relative to the larger of its two terms. Their optimality measure is the certified gap of
:meth:`cvxmetric.mmc.MMCModel.bounds` (``result.certified_gap``). Fast point (any PSD M, of any
scale): ``kkt_fast`` is the same certified relative gap of its ray. Extra checks per fast row: the
scale identity on the solver's own numbers (:math:`f_{\text{fast}}\,p_{\max}^2 = 1`, :math:`p_{\max}` the
max-form value of the returned point's ray) and on the ground
truth (Clarabel on both forms), and that the certified lower bound does not exceed the ground
truth's :math:`p^*` (relative).
"""
from __future__ import annotations

import numpy as np

from cvxmetric.mmc import DiagonalMMCModel, MMCModel
from cvxmetric.formulations.mmc import build_mmc_max, twin_data

from ..kkt import relative_residual
from ..registry import MethodSpec, Thresholds
from ..tolerances import GAP_FIRST_ORDER, MMC_SCALE_IDENTITY_FAST_RTOL, MMC_SCALE_IDENTITY_RTOL

#: The thresholds of MMC's solver (``solve_mmc(method=...)``): the first-order gap, and its KKT
#: residual held to the same relative size.
TOLERANCES = {"ascent": Thresholds(GAP_FIRST_ORDER, GAP_FIRST_ORDER)}


def mmc_kkt_truth(form, sol) -> dict[str, float]:
    """KKT residuals of a solved MMC min form, Z from stationarity (see the module docstring)."""
    model: MMCModel = form.model
    F = model.feature_scale
    inv = 1.0 / F
    M = model.psd_part(sol.point)
    nu = float(np.asarray(sol.duals["dissimilar"]).reshape(-1)[0])
    g = model.dissimilar_sum(M)
    grad = nu * model.gradient(M)
    Z = model.CS - grad
    # equilibrated coordinates: M_eq = F M F, dual-side matrices F^-1 (.) F^-1 (exact scalings)
    M_eq = M * F[:, None] * F[None, :]
    Z_eq, CS_eq, grad_eq = (A * inv[:, None] * inv[None, :] for A in (Z, model.CS, grad))
    nM = float(np.linalg.norm(M_eq, 2))
    # Z is the difference of two terms: its size is measured against theirs
    n_terms = max(float(np.linalg.norm(CS_eq, 2)), float(np.linalg.norm(grad_eq, 2)))
    return {
        "primal_psd": relative_residual(max(0.0, -float(np.linalg.eigvalsh(sol.point * F[:, None] * F[None, :])[0])),
                                        nM),
        "primal_dissimilar": max(0.0, 1.0 - g),
        "dual_nu": relative_residual(max(0.0, -nu), abs(nu)),
        "dual_psd": relative_residual(max(0.0, -float(np.linalg.eigvalsh(Z_eq)[0])), n_terms),
        "comp_dissimilar": abs(g - 1.0) if nu != 0.0 else 0.0,
        "comp_psd": relative_residual(abs(float(np.vdot(Z_eq, M_eq))), n_terms * nM),
    }


def mmc_kkt_fast(form, point) -> float:
    """Certified relative gap of any PSD point's ray (:meth:`cvxmetric.mmc.MMCModel.bounds`; scale-free)."""
    return max(0.0, form.model.bounds(point).gap)


_MAX_FORM: dict = {}


def _max_form_value(inst, model) -> float | None:
    """The max form's optimum by Clarabel, read as the value of its point's ray on the original data
    (cached per instance name and seed).

    The max form is solved on the min form's normalized data (:func:`~cvxmetric.formulations.mmc.twin_data`:
    features over powers of 2, weights times powers of 2); its point P maps back to the ray of
    :math:`F^{-1} P F^{-1}`, and :meth:`~cvxmetric.mmc.MMCModel.max_form_value` of that ray is the
    value of a feasible point of the max form: no status label is read, and the data's scale does
    not reach the solver (the raw max form of iris x 1e-4 read 0.72 off the identity, and with
    x 1e4 Clarabel returned no usable solve).
    """
    key = (inst.name, inst.seed)
    if key not in _MAX_FORM:
        X_twin, cons_twin, F, _, _ = twin_data(inst.X, inst.constraints)
        sol = build_mmc_max(X_twin, cons_twin).solve("CLARABEL")
        point = sol.point
        ok = point is not None and np.all(np.isfinite(point))
        _MAX_FORM[key] = model.max_form_value(model.cone_part(point / F[:, None] / F[None, :])) if ok else None
    return _MAX_FORM[key]


def _extra_checks(form, inst, res, truth):
    """The scale identity p*_min (p*_max)^2 = 1 on the solver's numbers and on the ground truth
    (the certificate itself is re-checked by the harness for every solver)."""
    out = {"scale_identity_fast": (abs(res.objective * form.model.max_form_value(res.M) ** 2 - 1.0),
                                   MMC_SCALE_IDENTITY_FAST_RTOL)}
    p_star = truth.p_star if truth is not None else None
    pmax_star = _max_form_value(inst, form.model)
    out["scale_identity_truth"] = (None if p_star is None or pmax_star is None
                                   else abs(p_star * pmax_star ** 2 - 1.0), MMC_SCALE_IDENTITY_RTOL)
    return out


SPEC = MethodSpec(
    name="mmc",
    instance_methods=("mmc",),
    kkt_truth=mmc_kkt_truth,
    kkt_fast=mmc_kkt_fast,
    extra_checks=_extra_checks,
    truth_checks=("scale_identity_truth",),
    tolerances=TOLERANCES,
    report_order=3,
)


def mmc_diagonal_kkt_truth(form, sol) -> dict[str, float]:
    """KKT residuals of a solved diagonal MMC min form, z from stationarity (module docstring)."""
    model: DiagonalMMCModel = form.model
    a = np.diag(sol.point)
    a_plus = model.nonneg_part(a)
    nu = float(np.asarray(sol.duals["dissimilar"]).reshape(-1)[0])
    g = model.dissimilar_sum(a_plus)
    grad = nu * model.gradient(a_plus)
    z = model.s - grad
    terms = np.maximum(model.s, np.abs(grad))          # each feature's residual against its two terms
    scaled = np.divide(z, terms, out=np.zeros_like(z), where=terms > 0)
    return {
        "primal_nonneg": relative_residual(max(0.0, -float(np.min(a))), float(np.max(np.abs(a)))),
        "primal_dissimilar": max(0.0, 1.0 - g),
        "dual_nu": relative_residual(max(0.0, -nu), abs(nu)),
        "dual_nonneg": max(0.0, -float(np.min(scaled))),
        "comp_dissimilar": abs(g - 1.0) if nu != 0.0 else 0.0,
        "comp_nonneg": relative_residual(float(np.abs(z) @ a_plus), float(terms @ a_plus)),
    }


def mmc_diagonal_kkt_fast(form, point) -> float:
    """Certified relative gap of any diagonal point's ray (:meth:`cvxmetric.mmc.DiagonalMMCModel.bounds`)."""
    return max(0.0, form.model.bounds(np.diag(point)).gap)


DIAGONAL_SPEC = MethodSpec(
    name="mmc_diagonal",
    instance_methods=("mmc_diagonal",),
    kkt_truth=mmc_diagonal_kkt_truth,
    kkt_fast=mmc_diagonal_kkt_fast,
    tolerances=TOLERANCES,
    report_order=4,
)

SPECS = [DIAGONAL_SPEC]
