r"""BoostMetric in cvxpy: the hinge SDP, its restricted master LP and the LP's dual, and the
exponential- and logistic-loss problems.

Reference: Shen et al. 2012; design §5.6.

With :math:`\rho_r(X) = \langle A_r, X\rangle`, :math:`A_r = C_{ik} - C_{ij}` written as
``A_svec @ svec(X)`` (see :mod:`cvxmetric.formulations.hinge`), the problems are (minimisation convention:
the hinge problem's value is the negative of the paper's eq. 5):

* ``hinge`` (eq. 5): :math:`\min_{X, \rho, \xi} -\rho + \nu 1^\top\xi` s.t. :math:`\rho_r(X) \ge \rho - \xi_r` ("margin"),
  :math:`\xi \ge 0` ("slack_nonneg"), :math:`\mathrm{tr}X = 1` ("trace"), :math:`X \succeq 0` ("psd");
* ``master LP`` (eq. 7) for fixed unit vectors :math:`v_j` (columns of V): the same with
  :math:`X = \sum_j w_j v_j v_j^\top`: :math:`H w \ge \rho 1 - \xi` ("margin"), :math:`1^\top w = 1` ("simplex"),
  :math:`w \ge 0` ("w_nonneg"), :math:`\xi \ge 0` ("slack_nonneg");
* ``dual LP``: :math:`\min_{u, \pi} \pi` s.t. :math:`H^\top u \le \pi 1` ("columns"), :math:`1^\top u = 1`
  ("simplex"), :math:`u \ge 0` ("u_nonneg"), :math:`u \le \nu` ("u_cap");
* ``exp`` (eq. 8): :math:`\min_{X, \rho} \log\sum_r e^{-\rho_r} + \nu\,\mathrm{tr}X` s.t. :math:`\rho = \rho(X)`
  ("margin", its multiplier is the weight vector u of eq. 13), :math:`X \succeq 0` ("psd");
* ``logistic`` (eq. 19): :math:`\sum_r \log(1 + e^{-\rho_r}) + \nu\,\mathrm{tr}X`, same constraints.

Certification (``cvxmetric.formulations.ladder``): ``make_feasible`` projects a point onto the feasible set
(the PSD cone; for the hinge problem the trace-one slice, eigenvalues projected onto the
simplex); ``dual_bound`` is :class:`cvxmetric.boostmetric.BoostMetricCertifier` applied to the
"margin" multipliers (hinge: :math:`u \in U_\nu`; exp/logistic: the weights of eq. 13/20, and also
the weights :math:`u(X)` of the solver's point, the better bound kept); ``normalize`` divides the
data by a power of two (:meth:`cvxmetric.boostmetric.BoostMetricModel.normalized`): the hinge
value scales by :math:`c^2` at the same point, the smooth problems keep their value with
:math:`\nu / c^2` and points divided by :math:`c^2`. No per-problem solver options: the ladder and
the certificate replace them.

``value_at`` minimises the auxiliary variables in closed form through cvxpy expressions: for the
hinge problem :math:`\max_\rho \rho - \nu\sum_r[\rho - \rho_r]_+ = (\nu(K+1) - 1)\,S_K + (1 - K\nu)\,S_{K+1}`
with :math:`K = \lfloor 1/\nu \rfloor` and :math:`S_k` = ``sum_smallest(rho(X), k)`` (the LP dual over
:math:`\{1^\top u = 1, 0 \le u \le \nu\}` puts :math:`\nu` on the K smallest margins and the rest on the next).
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxmetric._checks import as_square_symmetric
from cvxmetric.boostmetric import (BoostMetricCertifier, BoostMetricModel, boostmetric_model,
                                   project_spectraplex)
from cvxmetric.solvers.boostmetric_lp import lambda_max_column_generation

from .base import Formulation, Normalization, ReferenceSolution, symmetric_parameter
from .hinge import svec_expr

__all__ = ["build_boostmetric", "build_boostmetric_hinge", "project_trace_one", "build_boostmetric_smooth", "build_master_lp",
           "build_master_dual_lp", "margin_matrix", "hinge_value_expr"]


def margin_matrix(model: BoostMetricModel) -> np.ndarray:
    r"""Rows :math:`a_r` with :math:`\langle A_r, X\rangle = a_r \cdot \mathrm{svec}(X)`, shape (m, d(d+1)/2)."""
    return -model.geometry.geometry.svec_matrix()


def hinge_value_expr(rho: cp.Expression, nu: float) -> cp.Expression:
    r"""The paper's hinge value :math:`\max_\rho \rho - \nu \sum_r [\rho - \rho_r]_+` of margins ``rho`` (concave)."""
    m = rho.shape[0]
    K = int(np.floor(1.0 / nu))
    if K == 0:
        return cp.min(rho)
    if K >= m:
        return nu * cp.sum(rho)
    return (nu * (K + 1) - 1.0) * cp.sum_smallest(rho, K) + (1.0 - K * nu) * cp.sum_smallest(rho, K + 1)


def _check_point(point, d: int) -> np.ndarray:
    return as_square_symmetric(point, "X", d=d)


def build_boostmetric_hinge(model: BoostMetricModel) -> Formulation:
    """The hinge SDP (eq. 5) of a hinge :class:`BoostMetricModel` (see the module docstring).

    Returns
    -------
    Formulation
        Variables ``M`` (d, d), ``rho`` (scalar), ``xi`` (m,); constraints ``psd``, ``trace``,
        ``margin``, ``slack_nonneg``; ``value_at(X)`` needs :math:`\\mathrm{tr} X = 1` (ValueError otherwise).
    """
    if model.loss != "hinge":
        raise ValueError(f"build_boostmetric_hinge needs a hinge model; got loss {model.loss!r}")
    d, m, nu = model.d, model.m, model.nu
    A = margin_matrix(model)
    M = cp.Variable((d, d), symmetric=True, name="M")
    rho = cp.Variable(name="rho")
    xi = cp.Variable(m, name="xi")
    cons = {"psd": M >> 0, "trace": cp.trace(M) == 1, "margin": A @ svec_expr(M) >= rho - xi,
            "slack_nonneg": xi >= 0}
    problem = cp.Problem(cp.Minimize(-rho + nu * cp.sum(xi)), list(cons.values()))
    P = symmetric_parameter(d)
    value_expr = -hinge_value_expr(A @ svec_expr(P), nu)

    def evaluate(point) -> float:
        Xp = _check_point(point, d)
        tr = float(np.trace(Xp))
        if abs(tr - 1.0) > 1e-8:
            raise ValueError(f"the hinge problem is over trace-one matrices; tr X = {tr:.12g} (normalise X / tr X)")
        P.value = Xp
        return float(value_expr.value)

    form = Formulation(method="boostmetric", problem=problem, variables={"M": M, "rho": rho, "xi": xi},
                       constraints=cons, point_name="M", evaluate=evaluate, model=model,
                       info={"A_svec": A, "loss": "hinge"}, make_feasible=project_trace_one)
    _add_certification(form, model)
    return form


def build_boostmetric_smooth(model: BoostMetricModel) -> Formulation:
    """The exponential-loss (eq. 8) or logistic-loss (eq. 19) problem of a :class:`BoostMetricModel`.

    Returns
    -------
    Formulation
        Variables ``M`` (d, d) and ``rho`` (m,); constraints ``psd`` and ``margin``
        (:math:`\\rho = \\rho(X)`).
    """
    if model.loss not in ("exp", "logistic"):
        raise ValueError(f"build_boostmetric_smooth needs loss 'exp' or 'logistic'; got {model.loss!r}")
    d, m, nu = model.d, model.m, model.nu
    A = margin_matrix(model)

    def loss_expr(r):
        return cp.log_sum_exp(-r) if model.loss == "exp" else cp.sum(cp.logistic(-r))

    M = cp.Variable((d, d), symmetric=True, name="M")
    rho = cp.Variable(m, name="rho")
    cons = {"psd": M >> 0, "margin": rho == A @ svec_expr(M)}
    problem = cp.Problem(cp.Minimize(loss_expr(rho) + nu * cp.trace(M)), list(cons.values()))
    P = symmetric_parameter(d)
    value_expr = loss_expr(A @ svec_expr(P)) + nu * cp.trace(P)

    def evaluate(point) -> float:
        P.value = _check_point(point, d)
        return float(value_expr.value)

    form = Formulation(method="boostmetric", problem=problem, variables={"M": M, "rho": rho},
                       constraints=cons, point_name="M", evaluate=evaluate, model=model,
                       info={"A_svec": A, "loss": model.loss})
    _add_certification(form, model)
    return form


def project_trace_one(X) -> np.ndarray:
    r"""Projection of a symmetric X onto :math:`\{X \succeq 0, \mathrm{tr}X = 1\}`
    (:func:`cvxmetric.boostmetric.project_spectraplex`)."""
    return project_spectraplex(X)


def _margin_duals(model: BoostMetricModel, solution: ReferenceSolution) -> np.ndarray:
    """The "margin" multipliers with cvxpy's sign made that of u (an equality dual's sign is cvxpy's)."""
    y = np.asarray(solution.duals["margin"], dtype=np.float64).reshape(-1)
    return y if float(np.sum(y)) >= 0 else -y


def _add_certification(form: Formulation, model: BoostMetricModel) -> None:
    """Attach ``dual_bound`` and ``normalize`` (see the module docstring)."""
    certifier = BoostMetricCertifier(model, anchor_search=lambda_max_column_generation)

    def dual_bound(solution: ReferenceSolution):
        bounds = [certifier.bound(_margin_duals(model, solution)).lower] if model.loss == "hinge" else []
        if model.loss != "hinge":
            upper = None
            if solution.point is not None and np.all(np.isfinite(solution.point)):
                X = form.feasible_point(solution.point)
                upper = model.value(X)
                cols = np.linalg.eigh(X)[1][:, -min(model.d, 3):]   # seeds of the exp anchor search
                bounds.append(certifier.bound(model.weights(model.geometry.margins(X)), upper=upper,
                                              columns=cols).lower)
            else:
                cols = None
            bounds.append(certifier.bound(_margin_duals(model, solution), upper=upper, columns=cols).lower)
        bounds = [b for b in bounds if b is not None and np.isfinite(b)]
        return max(bounds) if bounds else None

    def normalize() -> Normalization:
        twin_model, c2 = model.normalized()
        twin = build_boostmetric_hinge(twin_model) if model.loss == "hinge" else build_boostmetric_smooth(twin_model)
        if model.loss == "hinge":
            return Normalization(twin, lambda P: np.asarray(P, dtype=np.float64), c2,
                                 f"data / {np.sqrt(c2):g}; hinge value times {c2:g} at the same X")
        return Normalization(twin, lambda P: np.asarray(P, dtype=np.float64) / c2, 1.0,
                             f"data / {np.sqrt(c2):g}, nu / {c2:g}; same value at X / {c2:g}")

    form.dual_bound = dual_bound
    form.normalize = normalize
    form.info["certifier"] = certifier


def build_boostmetric(X, triplets, *, loss: str = "exp", nu: float = 1e-7) -> Formulation:
    r"""The BoostMetric problem of one loss (``"hinge"``, ``"exp"`` or ``"logistic"``) on triplets.

    Parameters
    ----------
    X : array_like, shape (n, d)
    triplets : ConstraintSet or array_like of int, shape (m, 3)
    loss : {"hinge", "exp", "logistic"}
    nu : float
        Hinge: slack weight (:math:`\nu \ge 1/m`, ValueError otherwise); exp/logistic: trace weight.
    """
    model = boostmetric_model(X, triplets, loss=loss, nu=nu)
    if loss == "hinge":
        return build_boostmetric_hinge(model)
    return build_boostmetric_smooth(model)


def _columns(model: BoostMetricModel, V) -> np.ndarray:
    V = np.array(V, dtype=np.float64, copy=True)
    if V.ndim == 1:
        V = V[:, None]
    if V.ndim != 2 or V.shape[0] != model.d or V.shape[1] == 0:
        raise ValueError(f"V must hold unit column vectors, shape ({model.d}, J) with J >= 1; got {V.shape}")
    norms = np.linalg.norm(V, axis=0)
    if np.any(np.abs(norms - 1.0) > 1e-8):
        raise ValueError("the columns of V must have unit length (rank-one trace-one bases v v^T); "
                         "normalise them with V / np.linalg.norm(V, axis=0)")
    return model.geometry.columns(V)


def build_master_lp(model: BoostMetricModel, V) -> Formulation:
    r"""The restricted master LP (eq. 7) for the unit columns of V (shape (d, J)), minimisation form.

    Returns
    -------
    Formulation
        Point ``w`` (J,); variables ``rho``, ``xi``; constraints ``margin``, ``simplex``,
        ``w_nonneg``, ``slack_nonneg``; ``info["H"]`` is the (m, J) matrix :math:`H`. The dual of
        ``margin`` is the LP dual's :math:`u`. ``value_at(w)`` needs :math:`w \ge 0`, :math:`1^\top w = 1`.
    """
    if model.loss != "hinge":
        raise ValueError("the master LP belongs to the hinge problem; build the model with loss='hinge'")
    H = _columns(model, V)
    m, J = H.shape
    w = cp.Variable(J, name="w")
    rho = cp.Variable(name="rho")
    xi = cp.Variable(m, name="xi")
    cons = {"margin": H @ w >= rho - xi, "simplex": cp.sum(w) == 1, "w_nonneg": w >= 0, "slack_nonneg": xi >= 0}
    problem = cp.Problem(cp.Minimize(-rho + model.nu * cp.sum(xi)), list(cons.values()))
    P = cp.Parameter(J, name="w_eval")
    value_expr = -hinge_value_expr(H @ P, model.nu)

    def evaluate(point) -> float:
        p = np.array(point, dtype=np.float64).reshape(-1)
        if p.shape != (J,) or np.any(p < -1e-12) or abs(p.sum() - 1.0) > 1e-8:
            raise ValueError(f"w must have shape ({J},), w >= 0 and sum(w) = 1")
        P.value = p
        return float(value_expr.value)

    return Formulation(method="boostmetric_lp", problem=problem, variables={"w": w, "rho": rho, "xi": xi},
                       constraints=cons, point_name="w", evaluate=evaluate, model=model, info={"H": H})


def build_master_dual_lp(model: BoostMetricModel, V) -> Formulation:
    r"""The dual of the master LP: :math:`\min_{u, \pi} \pi` s.t. :math:`H^\top u \le \pi 1`, :math:`1^\top u = 1`,
    :math:`0 \le u \le \nu`. Its value equals the paper's (maximisation) LP value.

    Returns
    -------
    Formulation
        Point ``u`` (m,); variable ``pi``; constraints ``columns`` (its dual is :math:`w`),
        ``simplex``, ``u_nonneg``, ``u_cap``. ``value_at(u)`` = :math:`\max_j (H^\top u)_j` for feasible u.
    """
    if model.loss != "hinge":
        raise ValueError("the master LP belongs to the hinge problem; build the model with loss='hinge'")
    H = _columns(model, V)
    m, J = H.shape
    u = cp.Variable(m, name="u")
    pi = cp.Variable(name="pi")
    cons = {"columns": H.T @ u <= pi, "simplex": cp.sum(u) == 1, "u_nonneg": u >= 0, "u_cap": u <= model.nu}
    problem = cp.Problem(cp.Minimize(pi), list(cons.values()))
    P = cp.Parameter(m, name="u_eval")
    value_expr = cp.max(H.T @ P)

    def evaluate(point) -> float:
        p = np.array(point, dtype=np.float64).reshape(-1)
        if p.shape != (m,) or np.any(p < -1e-12) or np.any(p > model.nu + 1e-12) or abs(p.sum() - 1.0) > 1e-8:
            raise ValueError(f"u must have shape ({m},), 0 <= u <= nu and sum(u) = 1")
        P.value = p
        return float(value_expr.value)

    return Formulation(method="boostmetric_dual_lp", problem=problem, variables={"u": u, "pi": pi},
                       constraints=cons,
                       point_name="u", evaluate=evaluate, model=model, info={"H": H})
