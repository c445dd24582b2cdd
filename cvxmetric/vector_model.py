r"""The Qwise vector model, shared by cvxpy and the projected Newton solver.

Reference: thesis eq. 2.10 and appendix B.

With :math:`\omega = [w; b] \in \mathcal{C}^{d+1}` (:math:`\mathbb{R}^{d+1}`, or
:math:`\mathbb{R}^{d+1}_+` for a diagonal metric) the problem is

.. math::
    \min_\omega\ \tfrac12 \|\omega\|^2 + \sum_c c_c\, \ell_h(\beta_c - g_c^\top \omega)

with one row :math:`g_c` per constraint:

* similar pair :math:`(i, j)`: :math:`g = -[\Psi_{ij}; -1]`, :math:`\beta = 1`
  (:math:`L^h_1(-1, w^\top\Psi_{ij} - b)`, i.e. :math:`D_w(i, j) \le b - 1`);
* dissimilar pair: :math:`g = [\Psi_{ij}; -1]`, :math:`\beta = 1` (:math:`D_w(i, j) \ge b + 1`);
* relative :math:`(i, j, k, l)` with margin :math:`\delta`: :math:`g = [\Psi_{kl} - \Psi_{ij}; 0]`,
  :math:`\beta = \delta` for :math:`\delta \ne 0` (:math:`L^h_\delta`; the thesis uses
  :math:`\delta = 1`) and :math:`\beta = -h` for :math:`\delta = 0` (:math:`L^h_0`, zero loss as
  soon as :math:`D_w(k, l) \ge D_w(i, j)`);

:math:`\Psi_{ij} = x_i - x_j` (``diagonal=False``, the linear model: a row of :math:`L`, relative
attributes) or :math:`(x_i - x_j)^{\circ 2}` (``diagonal=True``: :math:`M = \mathrm{Diag}(w)`).
:math:`c_c = w_c C_Q` on relative constraints and :math:`w_c C_P` on pairs. Pairs use the
learned threshold :math:`b` with unit margins (eq. 2.10), so the bounds stored in a pair's
:math:`\delta` are not used by this model.

Certificate (:meth:`VectorModel.lower_bound`): :math:`F` is 1-strongly convex (the loss is convex and
:math:`\tfrac12\|\omega\|^2` is 1-strongly convex), so for every feasible :math:`\omega \in \mathcal{C}` with
:math:`g = \nabla F(\omega)` and every :math:`\nu \in \mathcal{C}`,
:math:`F(\nu) \ge F(\omega) + \langle g, \nu - \omega\rangle + \tfrac12\|\nu - \omega\|^2`. Minimising the right-hand
side over :math:`\mathcal{C}` (attained at :math:`\nu = \Pi_{\mathcal{C}}(\omega - g)`) gives the certified bound

.. math:: p^* \ge \ell(\omega) = F(\omega) + \langle g, \delta\rangle + \tfrac12\|\delta\|^2,
          \qquad \delta = \Pi_{\mathcal{C}}(\omega - g) - \omega ,

(for :math:`\mathcal{C} = \mathbb{R}^e`: :math:`F - \tfrac12\|g\|^2`). Its gap :math:`F(\omega) - \ell(\omega)` vanishes
quadratically at the optimum. It is also the Lagrangian dual function at the loss multipliers
:math:`\alpha_c = c_c \ell_h'(s_c(\omega)) \in [0, c_c]` (exactly dual feasible, no repair needed): with
:math:`\ell_h(s) = \max_{a \in [0, 1]} a(s + h) - h a^2`,
:math:`D(\alpha) = \alpha^\top(\beta + h) - h\sum_c \alpha_c^2/c_c - \tfrac12\|\Pi_{\mathcal{C}}(G^\top\alpha)\|^2`, and
:math:`F(\omega) - D(\alpha(\omega))` equals the gap above coordinate by coordinate. The fast solver (:mod:`cvxmetric.solvers.newton`) and the ground truth
(``build_qwise_vector``'s ``dual_bound``, at the cvxpy point) use this one function.

Exact rescaling (:meth:`VectorModel.scaled`): with :math:`\omega = \alpha u`, :math:`F(\alpha u) = \alpha^2 F_\alpha(u)` where :math:`F_\alpha` has rows :math:`\alpha g_c` and
weights :math:`c_c / \alpha^2` (the same :math:`\beta`, h). With :math:`\alpha` a power of 2 this is exact in floating
point: it is the only exact twin of the model (its regulariser is isotropic).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .certificates import Bounds
from ._checks import as_data_matrix, check_bool, check_nonnegative, check_positive
from .constraints import ConstraintSet
from .losses import DEFAULT_HUBER_H, huber_hinge, huber_hinge_curvature, huber_hinge_grad

__all__ = ["VectorModel", "qwise_vector_model", "VECTOR_KINDS"]

#: The two parametrisations (``VectorModel.kind``), chosen by ``qwise_vector_model(..., diagonal=)``.
VECTOR_KINDS = ("linear", "diagonal")


@dataclass(frozen=True, eq=False)
class VectorModel:
    r"""Objective :math:`\tfrac12\|\omega\|^2 + \sum_c c_c \ell_h(\beta_c - g_c^\top\omega)`.

    Attributes
    ----------
    G : ndarray, shape (m, e)
    beta : ndarray, shape (m,)
    coef : ndarray, shape (m,)
    h : float
    nonneg : bool
        Whether :math:`\omega \ge 0` (diagonal model).
    """

    G: np.ndarray
    beta: np.ndarray
    coef: np.ndarray
    h: float
    nonneg: bool
    kind: str = "linear"

    @property
    def e(self) -> int:
        return int(self.G.shape[1])

    def residuals(self, omega: np.ndarray) -> np.ndarray:
        r""":math:`s_c = \beta_c - g_c^\top\omega`."""
        return self.beta - self.G @ omega

    def value(self, omega: np.ndarray) -> float:
        omega = np.asarray(omega, dtype=np.float64)
        return float(0.5 * omega @ omega + self.coef @ huber_hinge(self.residuals(omega), self.h))

    def gradient(self, omega: np.ndarray) -> np.ndarray:
        s = self.residuals(omega)
        return omega - self.G.T @ (self.coef * huber_hinge_grad(s, self.h))

    def hessian(self, omega: np.ndarray) -> np.ndarray:
        """``I + G_Q.T diag(c / 2h) G_Q`` over the quadratic zone only (appendix B.3)."""
        s = self.residuals(omega)
        curv = self.coef * huber_hinge_curvature(s, self.h)
        rows = np.flatnonzero(curv)
        Gq = self.G[rows]
        return np.eye(self.e) + (Gq * curv[rows, None]).T @ Gq

    def value_change(self, omega: np.ndarray, omega_new: np.ndarray) -> float:
        r""":math:`F(\omega_{new}) - F(\omega)` computed from the step, without the cancellation of two values of F.

        :math:`\tfrac12\Delta^\top(\omega_{new} + \omega) + \sum_c c_c[\ell_h(s_c + \Delta s_c) - \ell_h(s_c)]`,
        :math:`\Delta s = -G\Delta`; a term whose two residuals lie in one zone of :math:`\ell_h` is differenced
        in closed form (0, :math:`\Delta s`, or :math:`\Delta s (s + s' + 2h)/(4h)`). On stiff data the
        change a Newton step makes is far below the round-off of F itself (features x1e4: 1e-16 against
        F ~ 1e2), and a line search comparing two values of F cannot judge it.
        """
        omega = np.asarray(omega, dtype=np.float64)
        delta = np.asarray(omega_new, dtype=np.float64) - omega
        s = self.residuals(omega)
        ds = -(self.G @ delta)
        t = s + ds
        h = self.h
        zone_s = np.where(s > h, 2, np.where(s < -h, 0, 1))
        zone_t = np.where(t > h, 2, np.where(t < -h, 0, 1))
        diff = np.where(zone_s != zone_t, huber_hinge(t, h) - huber_hinge(s, h),
                        np.where(zone_s == 2, ds, np.where(zone_s == 1, ds * (s + t + 2 * h) / (4 * h), 0.0)))
        return float(0.5 * delta @ (omega + omega + delta) + self.coef @ diff)

    def project(self, omega: np.ndarray) -> np.ndarray:
        r""":math:`\Pi_{\mathcal{C}}(\omega)`: clipped at 0 for the diagonal model, a copy otherwise."""
        omega = np.array(omega, dtype=np.float64).reshape(-1)
        return np.maximum(omega, 0.0) if self.nonneg else omega

    def suboptimality_bound(self, omega: np.ndarray) -> float:
        r"""The certified bound on :math:`F(w) - p^*` at :math:`w = \Pi_{\mathcal{C}}(\omega)`:
        :math:`-\langle \nabla F, \delta\rangle - \tfrac12\|\delta\|^2 \ge 0` (module docstring), computed without
        the cancellation of :math:`F - \ell`."""
        w = self.project(omega)
        g = self.gradient(w)
        step = self.project(w - g) - w
        return max(0.0, float(-(g @ step) - 0.5 * (step @ step)))

    def lower_bound(self, omega: np.ndarray) -> float:
        r"""Certified lower bound :math:`\ell(\Pi_{\mathcal{C}}(\omega)) \le p^*` (module docstring)."""
        return self.value(self.project(omega)) - self.suboptimality_bound(omega)

    def dual_value(self, alpha) -> float:
        r"""Lagrangian dual function :math:`D(\alpha) \le p^*` at the multipliers clipped into their box :math:`[0, c]`.

        :math:`D(\alpha) = \alpha^\top(\beta + h) - h\sum_c \alpha_c^2 / c_c - \tfrac12\|\Pi_{\mathcal{C}}(G^\top\alpha)\|^2`
        (module docstring); terms with :math:`c_c = 0` take :math:`\alpha_c = 0`.
        """
        alpha = np.clip(np.asarray(alpha, dtype=np.float64).reshape(-1), 0.0, self.coef)
        pos = self.coef > 0
        u = self.project(self.G.T @ alpha)
        return float(alpha @ (self.beta + self.h) - self.h * np.sum(alpha[pos] ** 2 / self.coef[pos]) - 0.5 * (u @ u))

    def bounds(self, omega: np.ndarray) -> Bounds:
        r"""The certified interval ``[lower_bound(w), value(w)]`` at :math:`w = \Pi_{\mathcal{C}}(\omega)`."""
        w = self.project(omega)
        return Bounds(lower=self.lower_bound(w), upper=self.value(w))

    def multipliers(self, omega: np.ndarray) -> np.ndarray:
        r"""The loss terms' multipliers :math:`c_c\,\ell_h'(s_c) \in [0, c_c]` (:math:`\nabla F = \omega - G^\top \alpha`)."""
        return self.coef * huber_hinge_grad(self.residuals(omega), self.h)

    def scaled(self, alpha: float) -> "VectorModel":
        r"""The twin :math:`F_\alpha` with :math:`F(\alpha u) = \alpha^2 F_\alpha(u)` (module docstring)."""
        alpha = float(alpha)
        return VectorModel(self.G * alpha, self.beta, self.coef / alpha ** 2, self.h, self.nonneg, self.kind)

    def metric(self, omega: np.ndarray) -> np.ndarray:
        """The Mahalanobis matrix: ``Diag(w)`` (diagonal) or ``w w^T`` (linear, one row of L)."""
        w = np.asarray(omega, dtype=np.float64)[:-1]
        return np.diag(w) if self.kind == "diagonal" else np.outer(w, w)


def qwise_vector_model(X, constraints: ConstraintSet, *, diagonal: bool = True, C_Q: float = 1.0,
                       C_P: float = 1.0, h: float = DEFAULT_HUBER_H) -> VectorModel:
    """Build the :class:`VectorModel` of thesis eq. (2.10) (see the module docstring).

    ``diagonal=True``: :math:`M = \\mathrm{Diag}(w)`, :math:`w \\ge 0` (kind ``"diagonal"``);
    ``diagonal=False``: the linear model, :math:`M = w w^\\top` (kind ``"linear"``).
    """
    X = as_data_matrix(X)
    if not isinstance(constraints, ConstraintSet):
        raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
    constraints.validate(X.shape[0], name="constraints")
    kind = "diagonal" if check_bool(diagonal, "diagonal") else "linear"
    C_Q = check_nonnegative(C_Q, "C_Q")
    C_P = check_nonnegative(C_P, "C_P")
    h = check_positive(h, "h")
    if h > 0.5:
        raise ValueError(f"h is the Huber width, in (0, 0.5] (thesis: [0.01, 0.5]); got {h}")
    idx = constraints.idx
    diff_ij = X[idx[:, 0]] - X[idx[:, 1]]
    diff_kl = X[idx[:, 2]] - X[idx[:, 3]]
    if kind == "diagonal":
        psi_ij, psi_kl = diff_ij ** 2, diff_kl ** 2
    else:
        psi_ij, psi_kl = diff_ij, diff_kl
    m, d = len(constraints), X.shape[1]
    G = np.zeros((m, d + 1))
    beta = np.empty(m)
    sim, dis = constraints.is_similar, constraints.is_dissimilar
    rel = ~(sim | dis)
    G[sim, :d] = -psi_ij[sim]
    G[sim, d] = 1.0
    G[dis, :d] = psi_kl[dis]
    G[dis, d] = -1.0
    beta[sim | dis] = 1.0
    G[rel, :d] = psi_kl[rel] - psi_ij[rel]
    delta = np.asarray(constraints.delta)
    beta[rel] = np.where(delta[rel] == 0, -h, delta[rel])
    coef = constraints.weight * np.where(rel, C_Q, C_P)
    return VectorModel(G, beta, coef, h, nonneg=(kind == "diagonal"), kind=kind)
