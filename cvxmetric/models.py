r"""The hinge model shared by Qwise, LMNN and the Fantope convex bound.

All three minimise, over :math:`M \in \mathbb{S}^d_+`,

.. math::
    f(M) = \langle R, M\rangle + \tfrac{q}{2}\|M\|_F^2
           + \sum_{c} c_c\,[\delta_c + \langle M, C_{ij} - C_{kl}\rangle]_+ ,

with a symmetric linear-term matrix :math:`R`, a quadratic weight :math:`q \ge 0` and
per-constraint coefficients :math:`c_c \ge 0`:

* Qwise (thesis eq. 2.7): :math:`\Omega = \mathrm{tr}\,M` (:math:`R = I`), :math:`\tfrac12\|M\|_F^2`
  (:math:`q = 1`) or :math:`\langle M, \sum_S C_p\rangle` ("pull", :math:`R = \sum_S C_p`), times
  ``reg_weight``; :math:`c_c = w_c C_Q` on relative constraints and :math:`w_c C_P` on pairs.
* LMNN: "pull" with weight :math:`1 - \mu` and :math:`c = \mu` on the triplets.
* Fantope bound: :math:`R = \mu W + \gamma I`.

A :class:`HingeModel` is the single definition of this objective: the cvxpy builder
(``formulations``) and the fast solvers (``solvers``) both read it, so they cannot drift apart.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import as_data_matrix, as_index_array, as_square_symmetric, check_nonnegative, check_positive
from .constraints import ConstraintSet
from .hinge import HingeLoss, QuadrupletGeometry

__all__ = ["HingeModel", "qwise_model", "pull_matrix", "REGULARIZERS"]

#: Names of the Qwise regularizers Omega(M) (thesis eq. 2.7 and footnote 19).
REGULARIZERS = ("trace", "frobenius", "pull")


@dataclass(frozen=True, eq=False)
class HingeModel:
    r"""A linear/quadratic term plus a weighted hinge loss over the PSD cone.

    Attributes
    ----------
    geometry : QuadrupletGeometry
        Data and constraints (difference vectors).
    coef : ndarray, shape (m,)
        Hinge coefficients :math:`c_c \ge 0`.
    R : ndarray, shape (d, d)
        Symmetric linear term.
    q : float
        Weight of :math:`\tfrac12 \|M\|_F^2`.
    name : str
        For reports.
    """

    geometry: QuadrupletGeometry
    coef: np.ndarray
    R: np.ndarray
    q: float = 0.0
    name: str = "hinge"

    @property
    def d(self) -> int:
        return self.geometry.d

    @property
    def m(self) -> int:
        return self.geometry.m

    @property
    def constraints(self) -> ConstraintSet:
        return self.geometry.constraints

    def with_linear_term(self, R: np.ndarray) -> "HingeModel":
        """The same model with another linear term (e.g. a refreshed Fantope bound)."""
        return HingeModel(self.geometry, self.coef, np.asarray(R, dtype=np.float64), self.q, self.name)

    def extended(self, constraints: ConstraintSet, coef) -> "HingeModel":
        r"""The same model with ``constraints`` (hinge coefficients ``coef``) appended.

        Used by solvers that generate constraints on the fly (e.g. LMNN impostors): the rows of
        ``self`` keep their positions, the new ones follow. The new constraints must index rows
        of the same data matrix.
        """
        if not isinstance(constraints, ConstraintSet):
            raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
        coef = np.asarray(coef, dtype=np.float64)
        if coef.shape != (len(constraints),):
            raise ValueError(f"coef must have shape ({len(constraints)},); got {coef.shape}")
        if np.any(coef < 0) or not np.all(np.isfinite(coef)):
            raise ValueError("coef must be finite and non-negative")
        constraints.validate(self.geometry.X.shape[0], name="constraints", allow_empty=True)
        geometry = self.geometry.extended(constraints)
        return HingeModel(geometry, np.concatenate([self.coef, coef]), self.R, self.q, self.name)

    def regularizer(self, M: np.ndarray) -> float:
        r""":math:`\langle R, M\rangle + \tfrac q2 \|M\|_F^2`."""
        return float(np.vdot(self.R, M) + 0.5 * self.q * np.vdot(M, M))

    def regularizer_grad(self, M: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`regularizer`: ``R + q M``."""
        return self.R + self.q * M if self.q else self.R.copy()

    def hinge(self) -> HingeLoss:
        """A fresh incremental hinge-loss evaluator for this model."""
        return HingeLoss(self.geometry, self.coef)

    def margins(self, M: np.ndarray) -> np.ndarray:
        r""":math:`\delta_c + \langle M, A_c\rangle` for every constraint."""
        return self.geometry.constraints.delta + self.geometry.values(M)

    def value(self, M: np.ndarray) -> float:
        """The objective :math:`f(M)` (numpy; the cvxpy twin is ``formulations``' ``value_at``)."""
        M = np.asarray(M, dtype=np.float64)
        return self.regularizer(M) + float(self.coef @ np.maximum(self.margins(M), 0.0))


def pull_matrix(X, pairs) -> np.ndarray:
    r""":math:`\sum_{(i, j)} C_{ij}` over ``pairs`` (shape (p, 2)), computed from difference vectors."""
    X = as_data_matrix(X)
    P = as_index_array(pairs, 2, "pull_pairs", n=X.shape[0])
    Dv = X[P[:, 0]] - X[P[:, 1]]
    G = Dv.T @ Dv
    return 0.5 * (G + G.T)


def qwise_model(X, constraints: ConstraintSet, *, regularizer: str = "trace", C_Q: float = 1.0,
                C_P: float = 1.0, reg_weight: float = 1.0, pull_pairs=None,
                linear_term=None) -> HingeModel:
    r"""The full-matrix Qwise model (thesis eq. 2.7) as a :class:`HingeModel`.

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Relative constraints (weighted by ``C_Q``) and pairs (weighted by ``C_P``).
    regularizer : {"trace", "frobenius", "pull"}
        :math:`\Omega(M)`: :math:`\mathrm{tr} M`, :math:`\frac12 \|M\|_F^2` or
        :math:`\langle M, \sum_{(i,j) \in \text{pull\_pairs}} C_{ij}\rangle`.
    C_Q, C_P : float
        Non-negative weights of the relative and pairwise hinge terms.
    reg_weight : float
        Positive factor in front of :math:`\Omega`.
    pull_pairs : array_like, shape (p, 2), optional
        Required for ``"pull"``: the similar pairs :math:`S` of :math:`\Omega`.
    linear_term : array_like, shape (d, d), optional
        An extra symmetric matrix added to :math:`R` (e.g. :math:`\mu W` of a Fantope bound).
    """
    X = as_data_matrix(X)
    if not isinstance(constraints, ConstraintSet):
        raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
    constraints.validate(X.shape[0], name="constraints")
    if not isinstance(regularizer, str) or regularizer not in REGULARIZERS:
        raise ValueError(f"regularizer must be one of {REGULARIZERS}; got {regularizer!r}")
    C_Q = check_nonnegative(C_Q, "C_Q")
    C_P = check_nonnegative(C_P, "C_P")
    reg_weight = check_positive(reg_weight, "reg_weight")
    d = X.shape[1]
    geometry = QuadrupletGeometry(X, constraints, _validated=True)
    coef = constraints.weight * np.where(constraints.is_pair, C_P, C_Q)
    q = 0.0
    R = np.zeros((d, d))
    if regularizer == "trace":
        R = reg_weight * np.eye(d)
    elif regularizer == "frobenius":
        q = reg_weight
    else:
        if pull_pairs is None:
            raise ValueError("regularizer='pull' needs pull_pairs, the similar pairs S of Omega")
        R = reg_weight * pull_matrix(X, pull_pairs)
    if pull_pairs is not None and regularizer != "pull":
        raise ValueError("pull_pairs is only used with regularizer='pull'")
    if linear_term is not None:
        R = R + as_square_symmetric(linear_term, "linear_term", d=d)
    return HingeModel(geometry, coef, R, q, name=f"qwise[{regularizer}]")
