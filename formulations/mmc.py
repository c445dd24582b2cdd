r"""MMC in cvxpy: the min form and the max form.

Reference: Xing et al. 2002; thesis eq. 1.3; design §5.1.

Min form (the ground truth):

.. math:: \min_{M \succeq 0}\ \langle M, C_S\rangle \quad\text{s.t.}\quad \sum_D w_p \sqrt{\langle M, C_p\rangle} \ge 1
          \qquad (\text{"dissimilar"},\ \text{"psd"}),

DCP-valid: a sum of ``sqrt`` of affine expressions is concave. Max form (the fast solver's):

.. math:: \max_{M \succeq 0}\ \sum_D w_p \sqrt{\langle M, C_p\rangle} \quad\text{s.t.}\quad \langle M, C_S\rangle \le 1
          \qquad (\text{"similar"},\ \text{"psd"}),

with :math:`p^*_{\min} = 1 / (p^*_{\max})^2`. Every :math:`\langle M, C_p\rangle` is
``A_svec @ svec(M)`` as in :mod:`cvxmetric.formulations.hinge`.

``value_at(M)`` of the min form is :math:`f(M) / \min(1, g(M))^2`: the objective at a feasible M,
and at an infeasible one the objective at its smallest feasible rescaling :math:`M / g(M)^2`
(:math:`+\infty` if :math:`g(M) = 0`); see :mod:`cvxmetric.mmc`. The two sums are evaluated by
cvxpy expressions; the combination is :func:`cvxmetric.mmc.min_form_value`, shared with the fast
solver.

Certification hooks of the min form (:mod:`cvxmetric.formulations.ladder`):

* ``make_feasible`` = :meth:`cvxmetric.mmc.MMCModel.make_feasible`: the PSD part of the point
  rescaled to make the constraint tight, :math:`P / g(P)^2`. Hence ``value_at(feasible_point(M))``
  is :math:`f(P)/g(P)^2`, **scale-free**: an M of any scale (metric-learn's, whose scale is
  arbitrary; an infeasible too-small M) is scored by its ray, never penalised for its scale.
* ``dual_bound`` = :meth:`cvxmetric.mmc.MMCModel.lower_bound` at the solver's point:
  :math:`p^*_{\min} \ge 1/(2 g(M)\lambda(M))`, :math:`\lambda(M) = \max_{M' \succeq 0, \langle M', C_S\rangle \le 1}
  \langle \nabla g(M), M'\rangle`. It is the Lagrangian bound :math:`\max_\nu \nu - \nu^2 u^2/4 = 1/u^2` of the
  min form with :math:`u = \sqrt{2 g \lambda}` the concavity bound on :math:`p^*_{\max}` at M (minimised
  over the scale of M): dual feasible by construction, valid at any point, exact at the optimum.
  The duals of "dissimilar" (:math:`\nu`) would only give :math:`\nu - \nu^2 u^2/4 \le 1/u^2`.
* ``normalize`` (min forms, full and diagonal): the twin on :math:`X F^{-1}` (F = the features'
  power-of-2 scales, :func:`twin_data`) with
  similar weights times :math:`a` and dissimilar weights times :math:`b` (powers of 2 nearest to
  :math:`1/\sum w_S` and :math:`1/\sum w_D`); every scaling is a power of 2, so the twin is exactly
  the same problem: a twin point P maps back to :math:`M = b^2 F^{-1} P F^{-1}` and
  ``value_at(M) = (b^2/a) * twin.value_at(P)``.

The fast solver's certificate (:mod:`cvxmetric.solvers.mmc`) is the same function, so ground truth and
fast solver are held to one bound.

Diagonal form (:func:`build_mmc_diagonal`, metric-learn's ``diagonal=True``): the min form over
:math:`M = \operatorname{diag}(a)`,

.. math:: \min_{a \ge 0}\ s^\top a \quad\text{s.t.}\quad \sum_D w_p \sqrt{q_p^\top a} \ge 1
          \qquad (\text{"nonneg"},\ \text{"dissimilar"}),

:math:`q_p` the squared coordinates of a difference, :math:`s = \sum_S w_p q_p`; its point is the matrix
:math:`\operatorname{diag}(a)` and its hooks are those of :class:`cvxmetric.mmc.DiagonalMMCModel`.
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxmetric._checks import as_square_symmetric
from cvxmetric.constraints import ConstraintSet
from cvxmetric.linalg import svec_outer
from cvxmetric.linalg import power_of_two
from cvxmetric.mmc import DiagonalMMCModel, MMCModel, _pair_differences, min_form_value

from .base import Formulation, Normalization, symmetric_parameter
from .hinge import svec_expr, svec_weights

__all__ = ["build_mmc", "build_mmc_max", "build_mmc_diagonal", "twin_data", "CLARABEL_TIGHT"]

#: Clarabel options of the MMC forms. The KKT stationarity residual goes through
#: grad g = sum_D C_p / (2 sqrt(D_p)), which amplifies the solver's error: at the default 1e-7
#: it measured 1.7e-5 on wine (tolerance 1e-5), at 1e-8 3.4e-6; 3e-9 ends "optimal_inaccurate".
CLARABEL_TIGHT = {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8}


def _pieces(X, constraints):
    model = MMCModel(X, constraints)
    return model, svec_weights(model.CS), svec_outer(model.UD)


def build_mmc(X, constraints: ConstraintSet) -> Formulation:
    """The MMC min form with named constraints ``psd`` and ``dissimilar``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Similar and dissimilar pairs (bounds ignored, weights used), see
        :class:`cvxmetric.mmc.MMCModel`.

    Returns
    -------
    Formulation
        Variable ``M``; constraints ``psd`` (dual Z) and ``dissimilar`` (scalar dual nu);
        ``model`` is the :class:`~cvxmetric.mmc.MMCModel` the fast solver reads.
    """
    model, s, AD = _pieces(X, constraints)
    d = model.d
    M = cp.Variable((d, d), symmetric=True, name="M")
    cons = {"psd": M >> 0, "dissimilar": model.wD @ cp.sqrt(AD @ svec_expr(M)) >= 1}
    problem = cp.Problem(cp.Minimize(s @ svec_expr(M)), list(cons.values()))
    P = symmetric_parameter(d)
    f_expr = s @ svec_expr(P)
    dist_expr = AD @ svec_expr(P)

    def evaluate(point) -> float:
        P.value = as_square_symmetric(point, "M", d=d)
        g = float(model.wD @ np.sqrt(np.maximum(np.asarray(dist_expr.value, dtype=np.float64), 0.0)))
        return min_form_value(float(f_expr.value), g)

    def dual_bound(solution) -> float | None:
        if solution.point is None or not np.all(np.isfinite(solution.point)):
            return None
        return model.lower_bound(solution.point)

    def normalize() -> Normalization:
        return _normalize(X, constraints)

    return Formulation(method="mmc", problem=problem, variables={"M": M}, constraints=cons,
                       point_name="M", evaluate=evaluate, model=model, info={"form": "min"},
                       solver_options={"CLARABEL": CLARABEL_TIGHT}, make_feasible=model.make_feasible,
                       dual_bound=dual_bound, normalize=normalize)


def twin_data(X, constraints: ConstraintSet):
    r"""The normalized twin's data (module docstring, ``normalize``), shared by every form.

    Returns
    -------
    X_twin : ndarray
        :math:`X F^{-1}`.
    constraints_twin : ConstraintSet
        Similar weights times :math:`a`, dissimilar weights times :math:`b`.
    F : ndarray
        The features' power-of-2 scales (:attr:`cvxmetric.mmc.MMCModel.feature_scale`): the
        original point of a twin point P is :math:`b^2 F^{-1} P F^{-1}`.
    a, b : float
        Powers of 2 nearest to :math:`1/\sum w_S` and :math:`1/\sum w_D`.
    """
    X, US, wS, UD, wD = _pair_differences(X, constraints)
    F = power_of_two(np.max(np.abs(np.vstack([US, UD])), axis=0))
    sim = constraints.is_similar
    w = np.asarray(constraints.weight, dtype=np.float64)
    a = float(power_of_two(1.0 / np.sum(wS)))
    b = float(power_of_two(1.0 / np.sum(wD)))
    return X / F, constraints.with_weight(np.where(sim, a * w, b * w)), F, a, b


def _normalization(twin: Formulation, F, a: float, b: float) -> Normalization:
    """The map back from a twin built on :func:`twin_data` (module docstring, ``normalize``)."""
    twin.normalize = None

    def point_back(P):
        return b * b * np.asarray(P, dtype=np.float64) / F[:, None] / F[None, :]

    return Normalization(formulation=twin, point_back=point_back, value_scale=b * b / a,
                         description=f"features / powers of 2 in [{F.min():.3g}, {F.max():.3g}], "
                                     f"similar weights x {a:.3g}, dissimilar weights x {b:.3g}")


def _normalize(X, constraints: ConstraintSet) -> Normalization:
    """The exactly rescaled twin of the min form (module docstring, ``normalize``)."""
    X_twin, cons_twin, F, a, b = twin_data(X, constraints)
    return _normalization(build_mmc(X_twin, cons_twin), F, a, b)


def build_mmc_max(X, constraints: ConstraintSet) -> Formulation:
    """The MMC max form (for the scale identity): maximise the dissimilar sum, ``<M, C_S> <= 1``.

    Returns
    -------
    Formulation
        Variable ``M``; constraints ``psd`` and ``similar``; ``value_at(M)`` is
        :math:`\\sum_D w_p \\sqrt{D_M(p)}` (feasibility is not checked).
    """
    model, s, AD = _pieces(X, constraints)
    d = model.d
    M = cp.Variable((d, d), symmetric=True, name="M")
    cons = {"psd": M >> 0, "similar": s @ svec_expr(M) <= 1}
    problem = cp.Problem(cp.Maximize(model.wD @ cp.sqrt(AD @ svec_expr(M))), list(cons.values()))
    P = symmetric_parameter(d)
    dist_expr = AD @ svec_expr(P)

    def evaluate(point) -> float:
        P.value = as_square_symmetric(point, "M", d=d)
        return float(model.wD @ np.sqrt(np.maximum(np.asarray(dist_expr.value, dtype=np.float64), 0.0)))

    return Formulation(method="mmc_max", problem=problem, variables={"M": M}, constraints=cons,
                       point_name="M", evaluate=evaluate, model=model, info={"form": "max"},
                       solver_options={"CLARABEL": CLARABEL_TIGHT})


def build_mmc_diagonal(X, constraints: ConstraintSet) -> Formulation:
    r"""The diagonal MMC min form with named constraints ``nonneg`` and ``dissimilar`` (module docstring).

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Similar and dissimilar pairs, see :class:`cvxmetric.mmc.DiagonalMMCModel`.

    Returns
    -------
    Formulation
        Variable ``a`` (the diagonal) and the point ``M = diag(a)`` (point name ``"M"``); constraints
        ``nonneg`` (dual z) and ``dissimilar`` (scalar dual nu); ``model`` the
        :class:`~cvxmetric.mmc.DiagonalMMCModel` the fast solver reads. A point's value is
        :math:`f(a) / \min(1, g(a))^2` of its diagonal, as for the full form.
    """
    model = DiagonalMMCModel(X, constraints)
    d = model.d
    a = cp.Variable(d, name="a")
    M = cp.Variable((d, d), symmetric=True, name="M")
    cons = {"nonneg": a >= 0, "dissimilar": model.wD @ cp.sqrt(model.QD @ a) >= 1, "diagonal": M == cp.diag(a)}
    problem = cp.Problem(cp.Minimize(model.s @ a), list(cons.values()))

    def evaluate(point) -> float:
        diag = np.diag(as_square_symmetric(point, "M", d=d))
        return model.value(np.maximum(diag, 0.0)) if np.all(diag >= 0) else float("inf")

    def dual_bound(solution) -> float | None:
        if solution.point is None or not np.all(np.isfinite(solution.point)):
            return None
        return model.lower_bound(np.diag(solution.point))

    def make_feasible(point) -> np.ndarray:
        return np.diag(model.make_feasible(np.diag(np.asarray(point, dtype=np.float64))))

    def normalize() -> Normalization:
        X_twin, cons_twin, F, a_w, b_w = twin_data(X, constraints)
        return _normalization(build_mmc_diagonal(X_twin, cons_twin), F, a_w, b_w)

    return Formulation(method="mmc_diagonal", problem=problem, variables={"M": M, "a": a}, constraints=cons,
                       point_name="M", evaluate=evaluate, model=model, info={"form": "min", "diagonal": True},
                       solver_options={"CLARABEL": CLARABEL_TIGHT}, make_feasible=make_feasible,
                       dual_bound=dual_bound, normalize=normalize)
