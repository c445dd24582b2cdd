r"""The Qwise vector model (thesis eq. 2.10 and appendix B), shared by cvxpy and Newton.

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

:math:`\Psi_{ij} = x_i - x_j` (``model="linear"``: a row of :math:`L`, relative attributes) or
:math:`(x_i - x_j)^{\circ 2}` (``model="diagonal"``: :math:`M = \mathrm{Diag}(w)`).
:math:`c_c = w_c C_Q` on relative constraints and :math:`w_c C_P` on pairs. Pairs use the
learned threshold :math:`b` with unit margins (eq. 2.10), so the bounds stored in a pair's
:math:`\delta` are not used by this model.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import as_data_matrix, check_nonnegative, check_positive
from .constraints import ConstraintSet
from .losses import DEFAULT_HUBER_H, huber_hinge, huber_hinge_curvature, huber_hinge_grad

__all__ = ["VectorModel", "qwise_vector_model", "VECTOR_MODELS"]

VECTOR_MODELS = ("linear", "diagonal")


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

    def metric(self, omega: np.ndarray) -> np.ndarray:
        """The Mahalanobis matrix: ``Diag(w)`` (diagonal) or ``w w^T`` (linear, one row of L)."""
        w = np.asarray(omega, dtype=np.float64)[:-1]
        return np.diag(w) if self.kind == "diagonal" else np.outer(w, w)


def qwise_vector_model(X, constraints: ConstraintSet, *, model: str = "diagonal", C_Q: float = 1.0,
                       C_P: float = 1.0, h: float = DEFAULT_HUBER_H) -> VectorModel:
    """Build the :class:`VectorModel` of thesis eq. (2.10) (see the module docstring)."""
    X = as_data_matrix(X)
    if not isinstance(constraints, ConstraintSet):
        raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
    constraints.validate(X.shape[0], name="constraints")
    if model not in VECTOR_MODELS:
        raise ValueError(f"model must be one of {VECTOR_MODELS}; got {model!r}")
    C_Q = check_nonnegative(C_Q, "C_Q")
    C_P = check_nonnegative(C_P, "C_P")
    h = check_positive(h, "h")
    if h > 0.5:
        raise ValueError(f"h is the Huber width, in (0, 0.5] (thesis: [0.01, 0.5]); got {h}")
    idx = constraints.idx
    diff_ij = X[idx[:, 0]] - X[idx[:, 1]]
    diff_kl = X[idx[:, 2]] - X[idx[:, 3]]
    if model == "diagonal":
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
    return VectorModel(G, beta, coef, h, nonneg=(model == "diagonal"), kind=model)
