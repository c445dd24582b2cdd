r"""cvxpy statement of a :class:`~cvxmetric.models.HingeModel` (Qwise, LMNN, Fantope bound).

.. math::
    \min_{M, \xi}\ \langle R, M\rangle + \tfrac q2 \|M\|_F^2 + \sum_c c_c \xi_c
    \quad\text{s.t.}\quad
    \xi_c \ge \delta_c + \langle M, A_c\rangle\ (\text{"hinge"}),\quad
    \xi \ge 0\ (\text{"slack\_nonneg"}),\quad
    M \succeq 0\ (\text{"psd"}).

Every :math:`\langle M, A_c\rangle` is written as ``A_svec @ svec(M)`` (upper triangle with the
off-diagonal coefficients doubled), which cvxpy compiles markedly faster than the full
:math:`d \times d` form. The duals of "hinge" are the hinge multipliers
:math:`\alpha_c \in [0, c_c]`, the dual of "psd" is the matrix :math:`Z \succeq 0`.

Certification hooks (``cvxmetric.formulations.ladder``):

* ``dual_bound(solution)`` — :meth:`cvxmetric.models.HingeModel.dual_bound` of the "hinge" duals
  (clipped into :math:`[0, c]`, repaired to exact dual feasibility there), with the objective of
  the solver's point projected onto the PSD cone as the ``upper`` value its trace bound needs;
  the same function certifies PDHG and LMNN's constraint generation;
* ``normalize()`` — the problem of :meth:`~cvxmetric.models.HingeModel.normalization`: data,
  margins and weights multiplied by powers of two so that difference vectors, margins and hinge
  coefficients are O(1); :math:`M = b M'` and :math:`f = v f'` map back exactly.
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxmetric._checks import as_square_symmetric
from cvxmetric.linalg import project_psd, svec
from cvxmetric.models import HingeModel

from .base import Formulation, Normalization, ReferenceSolution, symmetric_parameter

__all__ = ["build_hinge_problem", "svec_expr", "svec_weights"]


def svec_expr(M: cp.Expression) -> cp.Expression:
    """Upper triangle (diagonal included, row-major) of a (d, d) cvxpy expression."""
    return M[np.triu_indices(M.shape[0])]


def svec_weights(R: np.ndarray) -> np.ndarray:
    r"""Coefficients ``r`` with :math:`\langle R, M\rangle = r \cdot \mathrm{svec}(M)` for symmetric R, M."""
    r = svec(R)
    i, j = np.triu_indices(R.shape[0])
    return np.where(i == j, r, 2.0 * r)


def _objective(model: HingeModel, A: np.ndarray, M: cp.Expression, hinge_part: cp.Expression) -> cp.Expression:
    sv = svec_expr(M)
    obj = svec_weights(model.R) @ sv + model.coef @ hinge_part
    if model.q:
        obj = obj + 0.5 * model.q * cp.sum_squares(M)
    return obj


def build_hinge_problem(model: HingeModel, *, method: str = "qwise") -> Formulation:
    """The cvxpy problem of ``model`` with named constraints and a closed-form ``value_at``.

    Returns
    -------
    Formulation
        ``variables = {"M", "xi"}``, ``constraints = {"psd", "hinge", "slack_nonneg"}``, and the
        hooks ``dual_bound`` and ``normalize`` (module docstring).
    """
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    d, m = model.d, model.m
    A = model.geometry.svec_matrix()
    delta = np.asarray(model.constraints.delta, dtype=np.float64)
    M = cp.Variable((d, d), symmetric=True, name="M")
    xi = cp.Variable(m, name="xi")
    cons = {
        "psd": M >> 0,
        "hinge": xi >= delta + A @ svec_expr(M),
        "slack_nonneg": xi >= 0,
    }
    problem = cp.Problem(cp.Minimize(_objective(model, A, M, xi)), list(cons.values()))

    P = symmetric_parameter(d)
    value_expr = _objective(model, A, P, cp.pos(delta + A @ svec_expr(P)))

    def evaluate(point) -> float:
        P.value = as_square_symmetric(point, "M", d=d)
        return float(value_expr.value)

    def dual_bound(solution: ReferenceSolution):
        alpha = solution.duals.get("hinge")
        if alpha is None:
            return None
        alpha = np.asarray(alpha, dtype=np.float64).reshape(-1)
        if alpha.shape != (m,) or not np.all(np.isfinite(alpha)):
            return None
        upper = None
        if solution.point is not None and np.all(np.isfinite(solution.point)):
            upper = model.value(project_psd(solution.point))
        return model.dual_bound(alpha, upper=upper)

    def normalize() -> Normalization:
        tw = model.normalization()
        b = tw.point_scale
        return Normalization(formulation=build_hinge_problem(tw.model, method=method),
                             point_back=lambda P: b * np.asarray(P, dtype=np.float64),
                             value_scale=tw.value_scale, description=tw.description)

    return Formulation(method=method, problem=problem, variables={"M": M, "xi": xi},
                       constraints=cons, point_name="M", evaluate=evaluate, model=model,
                       info={"A_svec": A}, dual_bound=dual_bound, normalize=normalize)
