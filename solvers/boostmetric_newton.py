r"""Newton's method for smooth BoostMetric over a low-rank factor, :math:`M = L L^\top`.

A first-order method finds the rank r of the optimum early and its eigenvectors late: in
nearly unregularised problems (data in large units, as :math:`X \to sX` divides the trace weight
by :math:`s^2`) the optimum lies deep in the loss' exponential tail, the loss' curvature spans many
orders of magnitude across triplets, and projected gradient steps rotate the optimum's span
slowly. Over the factor L (k, r) the problem is smooth and unconstrained,

.. math:: \phi(L) = \text{loss}(\rho(L)) + \langle T, L L^\top\rangle, \qquad
          \rho_s(L) = \|L^\top v_s\|^2 - \|L^\top u_s\|^2,

(:math:`u_s = x_i - x_j`, :math:`v_s = x_i - x_k`, T the linear term), with gradient
:math:`2 S L`, :math:`S = T - \hat A(u(\rho))`, and Hessian

.. math:: \nabla^2\phi = J^\top \nabla^2\text{loss}(\rho)\, J + 2\, S \otimes I_r, \qquad
          J_{s,(a,b)} = 2\big(v_{sa} (L^\top v_s)_b - u_{sa} (L^\top u_s)_b\big).

At a minimiser with :math:`S \succeq 0` the point :math:`L L^\top` solves the problem over the whole
PSD cone; the caller's certificate decides whether it does.

The Newton system uses :math:`|S|` (the eigenvalues of S by their absolute values) in place of S,
as in saddle-free Newton methods: away from the optimum S has negative eigenvalues (directions
the current span misses), the true Hessian is indefinite, and a Levenberg-Marquardt shift large
enough to make it definite turned the steps into short gradient steps (measured on breast_cancer
standardized x 1e3 from the FISTA iterate of rank 13: 41 steps with the shift, 56 with S's positive
part, 14 with :math:`|S|`). At the optimum :math:`S \succeq 0` and the system is Newton's, so the
convergence is quadratic there.

The gradient is exact; the Hessian's first term keeps only the triplets whose loss curvature is
at least ``CURVATURE_RTOL`` of the largest (a few hundred of thousands in the exponential tail),
which changes the Newton direction, not the point Newton's method converges to. The Hessian is
singular along the rotations :math:`L \to L\,\Omega` (:math:`\Omega` skew), which leave
:math:`\phi` unchanged and to which the gradient is orthogonal; a Levenberg-Marquardt shift
(``SHIFT_START`` of the Jacobi-scaled system, grown by ``SHIFT_GROWTH`` until the Cholesky
factorisation succeeds) keeps the system solvable there.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from cvxmetric.boostmetric import TripletGeometry, loss_value, loss_weights

__all__ = ["FactorNewton", "newton_step_cost"]

#: Triplets whose loss curvature is below this fraction of the largest leave the Hessian (not
#: the gradient). Measured on breast_cancer standardized x 1e3 (m = 5121, logistic): about 350
#: triplets remain, and the Newton decrements agree to six digits with those of the full Hessian
#: (CURVATURE_RTOL = 0).
CURVATURE_RTOL = 1e-8

#: Newton steps per call at most. Measured from the FISTA iterate whose rank has settled: 14 steps
#: on breast_cancer standardized x 1e3 (r = 13), 2-28 in all on the default fits that use it; a
#: call that needs more starts from a rank that is not yet the optimum's, and the caller's
#: iteration goes on instead.
MAX_NEWTON_STEPS = 40

#: Stop when the Newton decrement g^T H^{-1} g / 2 is below this fraction of |phi|, or when a
#: step no longer lowers phi. The certificate's gap is far more sensitive than phi (the dual
#: point u(rho) is rescaled until A(u) <= nu I, and nu is tiny in these problems), so Newton runs
#: to the round-off floor of its decrement: measured on breast_cancer standardized x 1e3, a
#: decrement of 1e-15 |phi| left a certified gap of 1.04e-6 at the optimum's value, the next
#: (quadratic) step reaches the floor of 1e-22 |phi| and a gap of 5e-9.
DECREMENT_RTOL = 1e-20

#: Levenberg-Marquardt shift of the Jacobi-scaled Hessian (whose diagonal is one), and its growth.
SHIFT_START = 1e-12
SHIFT_GROWTH = 100.0

#: Armijo constant, backtracking factor and the smallest step tried.
ARMIJO_SIGMA = 1e-4
BACKTRACK = 0.5
MIN_STEP = 1e-10

#: Round-off allowance of the decrease test, in ulps of |phi| (as in the FISTA test).
TEST_ULPS = 16.0


def curvature_rows(loss: str, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""(mask, curvature): the triplets the Hessian keeps, and the loss' curvature weights
    (logistic :math:`u(1-u)`; exp :math:`u`, its rank-one part handled separately)."""
    u = loss_weights(loss, rho)
    curv = u * (1.0 - u) if loss == "logistic" else u
    return curv >= CURVATURE_RTOL * float(np.max(curv)), curv


def newton_step_cost(loss: str, rho: np.ndarray, k: int, r: int) -> float:
    """Multiply-adds of one Newton step at margins rho on a factor (k, r): the Hessian over the
    kept triplets and its Cholesky factorisation."""
    n = k * r
    return float(np.count_nonzero(curvature_rows(loss, rho)[0])) * n * n + n ** 3 / 3.0


class FactorNewton:
    r"""The smooth BoostMetric objective over a factor :math:`L` (k, r) of :math:`M = L L^\top`.

    Parameters
    ----------
    geom : TripletGeometry
        The triplets on the data (dimension k).
    loss : {"exp", "logistic"}
    trace_weight : ndarray, shape (k, k)
        The linear term T: the objective is :math:`\text{loss}(\rho(M)) + \langle T, M\rangle`.
    """

    def __init__(self, geom: TripletGeometry, loss: str, trace_weight: np.ndarray):
        self.geom, self.loss, self.T = geom, loss, trace_weight
        self.U, self.V = geom.geometry.U, geom.geometry.V
        self.n_steps = 0

    def _evaluate(self, L: np.ndarray):
        """(phi, margins, V L, U L) at L."""
        VL, UL = self.V @ L, self.U @ L
        rho = np.einsum("ij,ij->i", VL, VL) - np.einsum("ij,ij->i", UL, UL)
        return loss_value(self.loss, rho) + float(np.sum(self.T * (L @ L.T))), rho, VL, UL

    def _hessian(self, rho: np.ndarray, u: np.ndarray, S: np.ndarray, VL: np.ndarray, UL: np.ndarray) -> np.ndarray:
        """The Hessian over vec(L) (row-major), on the triplets of non-negligible curvature."""
        k, r = self.V.shape[1], VL.shape[1]
        keep, curv = curvature_rows(self.loss, rho)   # exp: diag(u) - u u^T, the rank-one part below
        J = 2.0 * (self.V[keep, :, None] * VL[keep, None, :] - self.U[keep, :, None] * UL[keep, None, :]).reshape(-1, k * r)
        H = J.T @ (curv[keep, None] * J)
        if self.loss == "exp":
            Ju = J.T @ u[keep]
            H -= np.outer(Ju, Ju)
        lam, E = np.linalg.eigh(S)
        return H + 2.0 * np.kron((E * np.abs(lam)) @ E.T, np.eye(r))

    @staticmethod
    def _direction(H: np.ndarray, g: np.ndarray) -> np.ndarray:
        r""":math:`-(H + \delta D)^{-1} g` with the Jacobi scaling D = diag(H) and the smallest shift
        :math:`\delta \ge` ``SHIFT_START`` for which the Cholesky factorisation succeeds."""
        s = np.sqrt(np.maximum(np.abs(np.diag(H)), np.finfo(float).tiny))
        Hs = H / s[:, None] / s[None, :]
        shift = SHIFT_START
        while True:
            try:
                factor = cho_factor(Hs + shift * np.eye(g.size))
                return -cho_solve(factor, g / s) / s
            except LinAlgError:
                shift *= SHIFT_GROWTH

    def solve(self, L: np.ndarray) -> np.ndarray:
        r"""Damped Newton from the factor ``L``; returns the last factor (its :math:`\phi` never
        above the start's)."""
        phi, rho, VL, UL = self._evaluate(L)
        for _ in range(MAX_NEWTON_STEPS):
            u = loss_weights(self.loss, rho)
            S = self.T - self.geom.weighted_sum(u)
            g = (2.0 * S @ L).ravel()
            d = self._direction(self._hessian(rho, u, S, VL, UL), g)
            decrease = -float(g @ d)
            if not decrease > 2.0 * DECREMENT_RTOL * abs(phi):
                return L
            step, D = 1.0, d.reshape(L.shape)
            while step >= MIN_STEP:
                trial = self._evaluate(L + step * D)
                if trial[0] <= phi - ARMIJO_SIGMA * step * decrease + TEST_ULPS * np.finfo(float).eps * abs(phi):
                    break
                step *= BACKTRACK
            else:
                return L
            self.n_steps += 1
            L = L + step * D
            if not trial[0] < phi:      # the round-off floor: the decrement no longer predicts a change
                return L
            phi, rho, VL, UL = trial
        return L
