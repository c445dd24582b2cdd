r"""A dense barrier method on the dual of a hinge model with few constraints: a start for PDHG.

The hinge model of :mod:`cvxmetric.models` with :math:`q = 0` (the trace and pull regularizers of
Qwise, thesis eq. 2.7) is

.. math::
    p^* = \min_{M \succeq 0}\ \langle R, M\rangle + \sum_c c_c\,[\delta_c + \langle M, A_c\rangle]_+ ,
    \qquad A_c = u_c u_c^\top - v_c v_c^\top .

With :math:`c_c [t]_+ = \max_{0 \le y_c \le c_c} y_c t` and :math:`\min_{M \succeq 0}\langle S, M\rangle
= 0` if :math:`S \succeq 0` (:math:`-\infty` otherwise), its Lagrange dual is the small program

.. math::
    d^* = \max_{y}\ \delta^\top y \quad \text{s.t.} \quad
    S(y) = R + \sum_c y_c A_c \succeq 0, \qquad 0 \le y \le c ,

(m multipliers and one d x d PSD condition), and :math:`p^* = d^*` when R is positive definite
(a small :math:`y > 0` is then strictly feasible: Slater). For Qwise with the trace regularizer
(:math:`R = \lambda I`, :math:`c_q = C_Q w_q`, :math:`A_q = C_{ij} - C_{kl}`) it reads

.. math::
    \max_{0 \le y_q \le C_Q w_q}\ \sum_q \delta_q y_q \quad \text{s.t.} \quad
    \lambda I + \sum_q y_q (C_{ij} - C_{kl}) \succeq 0 :

the negative parts :math:`-y_q C_{kl}` may use up no more than :math:`\lambda I` and the
positive parts provide. Where m is small this dual is solved to high
accuracy by a dense barrier method in :math:`O(m^3 + m^2 d + d^3)` per Newton step, where PDHG on
badly scaled data spends thousands of iterations (its primal weight must settle over orders of
magnitude). The result is a start :math:`(M_0, y_0)` for :func:`cvxmetric.solvers.pdhg.pdhg`, whose
own certificate then confirms it: nothing here is reported on its own.

Notes
-----
For :math:`\mu > 0` the barrier problem

.. math::
    \max_{0 < y < c,\ S(y) \succ 0}\ \phi_\mu(y) = \delta^\top y + \mu\Big(\log\det S(y)
        + \sum_c \log y_c + \sum_c \log(c_c - y_c)\Big)

has a unique maximiser :math:`y(\mu)` (rows with :math:`c_c = 0` are fixed at 0). With
:math:`W = S^{-1}` its gradient and negative Hessian are

.. math::
    \nabla\phi_\mu = \delta + \mu\big(\langle W, A_c\rangle + 1/y_c - 1/(c_c - y_c)\big)_c ,\qquad
    H_{ab} = \mu\big(\langle W A_a W, A_b\rangle + [a = b](y_a^{-2} + (c_a - y_a)^{-2})\big),

and for rank-two rows :math:`\langle W A_a W, A_b\rangle = (u_a^\top W u_b)^2 - (u_a^\top W v_b)^2
- (v_a^\top W u_b)^2 + (v_a^\top W v_b)^2`: four entry-wise squares of the Gram matrices of the
difference vectors in the metric W. At the maximiser the primal point :math:`M(\mu) = \mu W` is
PSD, :math:`t_c = \delta_c + \langle M, A_c\rangle = \mu/(c_c - y_c) - \mu/y_c` and
:math:`\langle S, M\rangle = \mu d`, so

.. math::
    f(M(\mu)) - \delta^\top y(\mu) = \mu d + \sum_c \big(c_c [t_c]_+ - y_c t_c\big)
        \le \mu\,(d + m) ,

each term of the sum being at most :math:`\mu`. The method (Boyd & Vandenberghe, Convex
Optimization, 11.3) centres by damped Newton steps (backtracking on :math:`\phi_\mu`, keeping
:math:`0 < y < c` and :math:`S \succ 0`, the latter by a Cholesky factorisation) until the Newton
decrement :math:`\lambda^2 = \nabla\phi^\top H^{-1}\nabla\phi` is at most ``CENTERING_DECREMENT``
times :math:`\mu`, forms the primal point (:func:`dual_barrier`, Notes), and stops once the
pair's measured relative gap is at most ``gap``; otherwise it divides :math:`\mu` by
``BARRIER_SHRINK``. It starts from :math:`y_c = \min(c_c/2,\ 1/(2m\, v_c^\top R^{-1} v_c))`
(:math:`S(y) \succeq R/2`) and from :math:`\mu_0 = |\delta|^\top c / (d + m)`, whose gap bound
:math:`\mu_0 (d + m)` is the hinge sum of a metric that misses every margin by its own size.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.linalg

from cvxmetric._checks import check_int_in_range, check_positive
from cvxmetric.certificates import relative_gap
from cvxmetric.linalg import project_psd, symmetrize
from cvxmetric.models import HingeModel

__all__ = ["dual_barrier", "BarrierPoint", "BARRIER_SHRINK", "CENTERING_DECREMENT", "BARRIER_GAP",
           "MU_FLOOR", "MAX_NEWTON_STEPS"]

#: Factor by which the barrier weight :math:`\mu` shrinks after each centring (a long step: the
#: centring then takes a few Newton steps; Boyd & Vandenberghe's typical 10-20).
BARRIER_SHRINK = 10.0
#: Centring stops when the Newton decrement :math:`\lambda^2` (in units of :math:`\mu`, so
#: scale-free) is at most this: within the quadratic region of a self-concordant barrier.
CENTERING_DECREMENT = 1e-2
#: Measured relative gap of the pair at which the method stops by default: an order below PDHG's
#: default ``tol`` (1e-4), so PDHG's certificate confirms the start as it is.
BARRIER_GAP = 1e-5
#: The method also stops once :math:`\mu (d + m)`, the gap bound at an exact centre, is below this
#: fraction of :math:`|\delta^\top y|` (and returns its pair): the smallest eigenvalues of
#: :math:`S(y)` are of order :math:`\mu`, and the next centring would be beyond double precision.
#: Measured on Qwise_Supervised's default quadruplets of raw breast_cancer and on a second draw of
#: 80: the condition number of S was 3.5e12 at :math:`\mu (d + m) = 10^{-5}\,\delta^\top y` and
#: 3.5e13 at 1e-6 (pair gaps 9.5e-7 and 7.3e-7 there); the centring for 1e-7 failed on both (the
#: line search found no ascent).
MU_FLOOR = 1e-6
#: Newton steps after which the method returns its last pair: a self-concordant barrier needs
#: O(sqrt(m + d) log(1/gap)) of them.
MAX_NEWTON_STEPS = 500
#: Backtracking: Armijo fraction, step shrink factor, and the step below which the line search
#: fails (the direction is then no ascent direction in floating point).
ARMIJO = 0.25
BACKTRACK = 0.5
MIN_STEP = 1e-12


@dataclass(frozen=True)
class BarrierPoint:
    r"""A primal-dual pair of the hinge model from :func:`dual_barrier`.

    Attributes
    ----------
    M : ndarray, shape (d, d)
        The PSD point: the best of :math:`\mu S(y)^{-1}`, its first-order correction and 0
        (:func:`dual_barrier`, Notes).
    y : ndarray, shape (m,)
        Multipliers in :math:`[0, c]` with :math:`S(y) \succ 0` at the last Cholesky factorisation.
    mu : float
        The final barrier weight (:math:`\mu (d + m)` bounds the gap at an exact centre).
    newton_steps : int
        Newton steps taken.
    objective, dual_value : float
        :math:`f(M)` and :math:`\delta^\top y` (a lower bound on :math:`p^*`: S(y) is positive
        definite at the last Cholesky factorisation).
    gap : float
        Their relative gap (:func:`cvxmetric.certificates.relative_gap`).
    """

    M: np.ndarray
    y: np.ndarray
    mu: float
    newton_steps: int
    objective: float
    dual_value: float
    gap: float


def dual_barrier(model: HingeModel, *, gap: float = BARRIER_GAP,
                 max_steps: int = MAX_NEWTON_STEPS) -> Optional[BarrierPoint]:
    r"""Solve the dual of a hinge model (q = 0, R positive definite) by a dense barrier method.

    Parameters
    ----------
    model : HingeModel
        :math:`q = 0` and :math:`R \succ 0` (else None is returned: the barrier needs a strictly
        feasible start, and :math:`y = 0` is one exactly when R is positive definite).
    gap : float
        Stop once the pair's measured relative gap
        (:func:`cvxmetric.certificates.relative_gap` of :math:`f(M)` and :math:`\delta^\top y`)
        is at most ``gap``.
    max_steps : int
        Newton steps in all (the method then returns its last pair).

    Returns
    -------
    BarrierPoint or None
        The last pair (``gap`` reached or not: its ``gap`` attribute says), or None where the
        method does not apply (q > 0, R not positive definite, no positive coefficient, every
        margin 0) or a Newton system or line search failed. A start, not a result: its caller certifies.

    Notes
    -----
    The dual program, the barrier, its derivatives and the gap bound are in the module docstring
    (:mod:`cvxmetric.solvers.hinge_barrier`). Where the corner :math:`y = c` is dual feasible and
    every margin non-negative, the pair :math:`(0, c)` has a zero gap and is returned after 0
    Newton steps (:func:`_upper_corner`). After each centring the primal point is the best
    (lowest :math:`f`) of the zero metric (optimal where the data are small against the margins),
    :math:`\mu W` and its first-order correction along the Newton direction
    :math:`\Delta y` at the centre, :math:`\Pi_{\mathbb{S}_+}(\mu (W - W K^*(\Delta y) W))`
    (:math:`\mu S(y + \Delta y)^{-1}` to first order; the dual-scaling primal of Benson, Ye & Zhang,
    SIAM J. Optim. 10, 2000): an inexact centre leaves :math:`\mu W` off by the Newton residual,
    which the correction removes to first order. Measured on Qwise_Supervised's default
    quadruplets of raw breast_cancer (d = 30, m = 80), at :math:`\mu (d + m) = 10^{-5}\,\delta^\top y`:
    relative gap 1.4e-3 with :math:`\mu W`, 9.6e-6 corrected (at 1e-6: 8.9e-3 and 1.1e-6).
    """
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    gap = check_positive(gap, "gap")
    max_steps = check_int_in_range(max_steps, "max_steps", 1, 10**6)
    if model.q != 0 or model.m == 0:
        return None
    R = symmetrize(np.asarray(model.R, dtype=np.float64))
    try:
        L = np.linalg.cholesky(R)
    except np.linalg.LinAlgError:
        return None
    free = np.flatnonzero(np.asarray(model.coef, dtype=np.float64) > 0)
    if free.size == 0:
        return None
    problem = _Dual(model, R, free)
    upper = _upper_corner(model, problem, free)
    if upper is not None:
        return upper
    y = problem.interior_start(L)
    mu = float(np.abs(problem.delta) @ problem.c) / (model.d + free.size)
    if not mu > 0:   # every margin 0: the optimum is M = 0, and nothing sets the barrier's scale
        return None
    steps = 0
    while True:
        y, taken = problem.center(y, mu, max_steps - steps)
        steps += taken
        if y is None:
            return None
        point = _pair(model, problem, free, y, mu, steps)
        if point is None or point.gap <= gap or steps >= max_steps or \
                mu * (model.d + free.size) <= MU_FLOOR * abs(point.dual_value):
            return point
        mu /= BARRIER_SHRINK


def _upper_corner(model: HingeModel, problem: "_Dual", free: np.ndarray) -> Optional[BarrierPoint]:
    r"""The exact pair :math:`(0, c)` where it is optimal: every margin :math:`\delta_c \ge 0` and
    :math:`S(c) \succeq 0` (smallest eigenvalue non-negative). Then :math:`y = c` is dual feasible
    with value :math:`\delta^\top c = \sum_c c_c [\delta_c]_+ = f(0)`, a zero gap: the data are
    small against the margins (no metric pays for the trace it costs). Else None."""
    if np.any(problem.delta < 0) or np.linalg.eigvalsh(problem.dual_matrix(problem.c))[0] < 0:
        return None
    y = np.zeros(model.m)
    y[free] = problem.c
    M = np.zeros((model.d, model.d))
    objective, dual_value = model.value(M), float(problem.delta @ problem.c)
    return BarrierPoint(M=M, y=y, mu=0.0, newton_steps=0, objective=objective, dual_value=dual_value,
                        gap=relative_gap(objective, dual_value))


def _pair(model: HingeModel, problem: "_Dual", free: np.ndarray, y: np.ndarray, mu: float,
          steps: int) -> Optional[BarrierPoint]:
    """The primal-dual pair at a centre (:func:`dual_barrier`, Notes), or None where the Newton
    system is singular."""
    newton = problem.newton_direction(y, mu)
    if newton is None:
        return None
    direction = newton[0]
    L = problem.cholesky(y)
    W = scipy.linalg.cho_solve((L, True), np.eye(model.d))
    W = 0.5 * (W + W.T)
    dS = problem.dual_matrix(direction) - problem.R
    candidates = (mu * W, project_psd(mu * (W - W @ dS @ W)), np.zeros((model.d, model.d)))
    values = [model.value(M) for M in candidates]
    best = int(np.argmin(values))
    full = np.zeros(model.m)
    full[free] = y
    dual_value = float(problem.delta @ y)
    return BarrierPoint(M=candidates[best], y=full, mu=mu, newton_steps=steps, objective=values[best],
                        dual_value=dual_value, gap=relative_gap(values[best], dual_value))


class _Dual:
    """The dual program restricted to the multipliers with a positive coefficient."""

    def __init__(self, model: HingeModel, R: np.ndarray, free: np.ndarray):
        self.R = R
        self.d = model.d
        self.c = np.asarray(model.coef, dtype=np.float64)[free]
        self.delta = np.asarray(model.constraints.delta, dtype=np.float64)[free]
        self.U, self.V = model.geometry.difference_vectors(free)

    def dual_matrix(self, y: np.ndarray) -> np.ndarray:
        r""":math:`S(y) = R + \sum_c y_c (u_c u_c^\top - v_c v_c^\top)`."""
        S = self.R + (self.U.T * y) @ self.U - (self.V.T * y) @ self.V
        return 0.5 * (S + S.T)

    def cholesky(self, y: np.ndarray) -> Optional[np.ndarray]:
        """Lower Cholesky factor of S(y), or None where S(y) is not positive definite."""
        try:
            return np.linalg.cholesky(self.dual_matrix(y))
        except np.linalg.LinAlgError:
            return None

    def interior_start(self, L: np.ndarray) -> np.ndarray:
        r"""Per row :math:`y_c = \min(c_c / 2,\ 1 / (2 m\, v_c^\top R^{-1} v_c))` (R = L L^T): the
        negative parts then sum to at most :math:`R/2`, so :math:`S(y) \succeq R/2 \succ 0`, and a
        row whose negative part is small in the metric of R starts near the middle of its box."""
        Lv = scipy.linalg.solve_triangular(L, self.V.T, lower=True)
        curvature = np.einsum("ij,ij->j", Lv, Lv)
        with np.errstate(divide="ignore"):
            cap = np.where(curvature > 0, 1.0 / (2.0 * self.c.size * curvature), np.inf)
        return np.minimum(0.5 * self.c, cap)

    def barrier_value(self, y: np.ndarray, mu: float) -> float:
        r""":math:`\phi_\mu(y)`, :math:`-\infty` outside the domain."""
        if np.any(y <= 0) or np.any(y >= self.c):
            return -math.inf
        L = self.cholesky(y)
        if L is None:
            return -math.inf
        logdet = 2.0 * float(np.sum(np.log(np.diag(L))))
        return float(self.delta @ y) + mu * (logdet + float(np.sum(np.log(y)) + np.sum(np.log(self.c - y))))

    def barrier_derivatives(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Gradient and negative Hessian of the barrier alone (:math:`\phi_\mu` without
        :math:`\delta^\top y`, divided by :math:`\mu`; module Notes)."""
        L = self.cholesky(y)
        Lu = scipy.linalg.solve_triangular(L, self.U.T, lower=True)   # L^{-1} u: W = L^{-T} L^{-1}
        Lv = scipy.linalg.solve_triangular(L, self.V.T, lower=True)
        Guu, Guv, Gvv = Lu.T @ Lu, Lu.T @ Lv, Lv.T @ Lv
        slack = self.c - y
        g = np.diag(Guu) - np.diag(Gvv) + 1.0 / y - 1.0 / slack
        H = Guu * Guu - Guv * Guv - Guv.T * Guv.T + Gvv * Gvv
        H[np.diag_indices_from(H)] += 1.0 / (y * y) + 1.0 / (slack * slack)
        return g, H

    def newton_direction(self, y: np.ndarray, mu: float) -> Optional[tuple[np.ndarray, float]]:
        r"""The Newton direction :math:`H^{-1}\nabla\phi_\mu` at y and the decrement
        :math:`\lambda^2 = \nabla\phi_\mu^\top H^{-1}\nabla\phi_\mu`; None where H is not positive
        definite in floating point."""
        g, H = self.barrier_derivatives(y)
        grad = self.delta + mu * g
        try:
            direction = scipy.linalg.cho_solve(scipy.linalg.cho_factor(mu * H), grad)
        except np.linalg.LinAlgError:
            return None
        return direction, float(grad @ direction)

    def center(self, y: np.ndarray, mu: float, budget: int) -> tuple[Optional[np.ndarray], int]:
        """Damped Newton steps on phi_mu from y until the decrement is at most
        ``CENTERING_DECREMENT`` times mu, or ``budget`` steps: (the last point, steps taken);
        (None, steps) where a Newton system or the line search failed."""
        value = self.barrier_value(y, mu)
        for step in range(budget):
            newton = self.newton_direction(y, mu)
            if newton is None:
                return None, step
            direction, decrement = newton
            if decrement <= CENTERING_DECREMENT * mu:
                return y, step
            s = 1.0
            while True:
                trial = y + s * direction
                new = self.barrier_value(trial, mu)
                if new >= value + ARMIJO * s * decrement:
                    break
                s *= BACKTRACK
                if s < MIN_STEP:
                    return None, step + 1
            y, value = trial, new
        return y, budget
