r"""MMC (Xing et al. 2002; thesis sec. 1.3.4.1, eq. 1.3; DESIGN §5.1): the numpy model.

Min form (the ground truth's statement)

.. math:: p^*_{\min} = \min_{M \succeq 0}\ f(M) = \sum_{S} w_p \langle M, C_p\rangle
          \quad\text{s.t.}\quad g(M) = \sum_{D} w_p \sqrt{\langle M, C_p\rangle} \ge 1 ,

max form (what the fast solver solves)

.. math:: p^*_{\max} = \max_{M \succeq 0}\ g(M) \quad\text{s.t.}\quad f(M) = \langle M, C_S\rangle \le 1,
          \qquad C_S = \sum_S w_p C_p .

:math:`f` is homogeneous of degree 1 and :math:`g` of degree 1/2, so :math:`M \mapsto M / g(M)^2` maps a
max-form solution to a min-form one and :math:`p^*_{\min} = 1 / (p^*_{\max})^2` (the *scale
identity*).

``value(M)`` (the min-form objective used by ``value_at``) is :math:`f(M)` at a feasible M
(:math:`g(M) \ge 1`); at an infeasible M with :math:`g(M) > 0` it is the objective at the smallest
feasible rescaling :math:`M / g(M)^2`, i.e. :math:`f(M) / g(M)^2`; with :math:`g(M) = 0` no
rescaling is feasible and it is :math:`+\infty`. In one formula:
:math:`f(M) / \min(1, g(M))^2`. The scale-free :math:`f(M) / g(M)^2` (the objective after the *best*
rescaling) is :meth:`MMCModel.scale_free_value`; it is how an M of arbitrary scale (e.g.
metric-learn's) is compared.

Certificate: :math:`g` is concave, so for :math:`M \in K = \{M \succeq 0, \langle M, C_S\rangle \le 1\}`
with :math:`G = \nabla g(M)`, :math:`p^*_{\max} \le g(M) + \max_{M' \in K}\langle G, M' - M\rangle
= g(M) - \langle G, M\rangle + \lambda_{\max}^+(G; C_S)` (the largest generalized eigenvalue of
:math:`(G, C_S)` on the range of :math:`C_S`). Hence a certified lower bound on :math:`p^*_{\min}`.
"""
from __future__ import annotations

import numpy as np

from ._checks import as_data_matrix
from .constraints import ConstraintSet
from .linalg import symmetrize
from .tolerances import RANK_RTOL, ZERO_LENGTH_TOL

__all__ = ["MMCModel", "mmc_model", "min_form_value", "SPAN_RTOL"]

#: A dissimilar difference counts as inside the range of C_S when its component outside it is at
#: most SPAN_RTOL times its length (the range keeps eigenvalues above RANK_RTOL * lambda_max).
SPAN_RTOL = 1e-6


def min_form_value(f: float, g: float) -> float:
    r"""The min-form objective from :math:`f = \langle M, C_S\rangle` and :math:`g = \sum_D w \sqrt{D_M}`.

    :math:`f / \min(1, g)^2`; :math:`+\infty` when :math:`g = 0` (see the module docstring).
    """
    if g <= 0:
        return float("inf")
    return float(f) / min(1.0, float(g)) ** 2


class MMCModel:
    r"""Similar and dissimilar pairs of an MMC problem on a data matrix.

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Pairs only: similar pairs (``k == l`` rows) form :math:`S`, dissimilar pairs (``i == j``)
        form :math:`D`. Their bounds are ignored (MMC has none); weights :math:`w_p` multiply the
        terms. Dissimilar pairs of zero length (which contribute 0) are dropped.

    Attributes
    ----------
    US : ndarray, shape (p, d)
        Similar differences :math:`x_i - x_j`, with weights ``wS``.
    UD : ndarray, shape (q, d)
        Dissimilar differences, with weights ``wD``.
    CS : ndarray, shape (d, d)
        :math:`C_S = \sum_S w_p C_p`.
    range_basis : ndarray, shape (d, r)
        :math:`Q_r \Lambda_r^{-1/2}` of the eigenpairs of :math:`C_S` above ``RANK_RTOL * lambda_max``:
        :math:`\max_{M \in K}\langle G, M\rangle = \lambda_{\max}^+(B^\top G B)` with ``B = range_basis``.

    Raises
    ------
    ValueError
        If the set holds relative constraints, has no similar or no (non-zero) dissimilar pair,
        or a dissimilar difference leaves the range of :math:`C_S` (then :math:`M = t\,vv^\top`
        with :math:`C_S v = 0` reaches objective 0: the problem is degenerate).
    """

    def __init__(self, X, constraints: ConstraintSet):
        X = as_data_matrix(X)
        if not isinstance(constraints, ConstraintSet):
            raise TypeError(f"constraints must be a ConstraintSet of pairs; got {type(constraints).__name__}")
        constraints.validate(X.shape[0], name="constraints")
        if np.any(constraints.is_relative):
            q = int(np.argmax(constraints.is_relative))
            raise ValueError(f"MMC uses similar and dissimilar pairs only; constraint {q} = "
                             f"{tuple(constraints.idx[q])} is relative (a triplet or quadruplet)")
        idx, w = constraints.idx, np.asarray(constraints.weight, dtype=np.float64)
        sim, dis = constraints.is_similar, constraints.is_dissimilar
        if not np.any(sim):
            raise ValueError("MMC needs at least one similar pair (the objective sums their distances)")
        self.X = X
        self.d = X.shape[1]
        self.constraints = constraints
        self.US = X[idx[sim, 0]] - X[idx[sim, 1]]
        self.wS = w[sim]
        UD = X[idx[dis, 2]] - X[idx[dis, 3]]
        keep = np.einsum("ij,ij->i", UD, UD) > ZERO_LENGTH_TOL
        self.UD, self.wD = UD[keep], w[dis][keep]
        if self.UD.shape[0] == 0 or not np.any(self.wD > 0):
            raise ValueError("MMC needs at least one dissimilar pair of distinct points with positive weight")
        self.CS = symmetrize((self.US * self.wS[:, None]).T @ self.US)
        lam, Q = np.linalg.eigh(self.CS)
        keep = lam > RANK_RTOL * max(float(lam[-1]), 0.0)
        if not np.any(keep):
            raise ValueError("the similar pairs all have zero length: C_S = 0 and MMC is unbounded")
        Qr = Q[:, keep]
        out = self.UD - (self.UD @ Qr) @ Qr.T
        ratio = np.linalg.norm(out, axis=1) / np.linalg.norm(self.UD, axis=1)
        if np.any(ratio > SPAN_RTOL):
            q = int(np.argmax(ratio))
            raise ValueError(
                f"MMC is degenerate: dissimilar pair {q} has a difference outside the span of the similar "
                "pairs' differences, so M = t v v^T (C_S v = 0) reaches objective 0; add similar pairs "
                "that span the data (or reduce the dimension first)"
            )
        self.range_projector = Qr @ Qr.T
        self.range_basis = Qr / np.sqrt(lam[keep])

    # ------------------------------------------------------------------ values
    def similar_sum(self, M) -> float:
        r""":math:`f(M) = \langle M, C_S\rangle`."""
        return float(np.vdot(self.CS, M))

    def dissimilar_distances(self, M) -> np.ndarray:
        r""":math:`D_M(p)` of the dissimilar pairs, shape (q,), clipped at 0 (round-off of a PSD M)."""
        M = np.asarray(M, dtype=np.float64)
        return np.maximum(np.einsum("ij,ij->i", self.UD @ M, self.UD), 0.0)

    def dissimilar_sum(self, M) -> float:
        r""":math:`g(M) = \sum_D w_p \sqrt{D_M(p)}`."""
        return float(self.wD @ np.sqrt(self.dissimilar_distances(M)))

    def value(self, M) -> float:
        """Min-form objective ``f(M) / min(1, g(M))**2`` (see the module docstring)."""
        return min_form_value(self.similar_sum(M), self.dissimilar_sum(M))

    def scale_free_value(self, M) -> float:
        r""":math:`f(M) / g(M)^2`: the min-form objective after the best rescaling of M."""
        g = self.dissimilar_sum(M)
        return float("inf") if g <= 0 else self.similar_sum(M) / g ** 2

    def to_min_form(self, M) -> np.ndarray:
        r"""The min-form point :math:`M / g(M)^2` (feasible with :math:`g = 1`)."""
        g = self.dissimilar_sum(M)
        if g <= 0:
            raise ValueError("g(M) = 0: no rescaling of M satisfies the dissimilar constraint")
        return np.asarray(M, dtype=np.float64) / g ** 2

    def gradient(self, M, distances: np.ndarray | None = None) -> np.ndarray:
        r""":math:`\nabla g(M) = \sum_D \frac{w_p}{2\sqrt{D_M(p)}} C_p` (requires every :math:`D_M(p) > 0`)."""
        D = self.dissimilar_distances(M) if distances is None else distances
        if np.any(D <= 0):
            raise ValueError("g is not differentiable where a dissimilar distance is 0")
        coef = self.wD / (2.0 * np.sqrt(D))
        return symmetrize((self.UD * coef[:, None]).T @ self.UD)

    def linear_max(self, G) -> float:
        r""":math:`\max_{M \succeq 0, \langle M, C_S\rangle \le 1} \langle G, M\rangle` for G with range(G) in range(C_S)."""
        B = self.range_basis
        return max(0.0, float(np.linalg.eigvalsh(symmetrize(B.T @ G @ B))[-1]))

    def certificate(self, M) -> tuple[float, float]:
        r"""``(g(M), upper)`` with ``upper`` :math:`\ge p^*_{\max}`, for M in the max-form feasible set.

        M is first scaled onto :math:`\langle M, C_S\rangle \le 1` when it lies outside.
        """
        M = np.asarray(M, dtype=np.float64)
        f = self.similar_sum(M)
        if f > 1.0:
            M = M / f
        D = self.dissimilar_distances(M)
        g = float(self.wD @ np.sqrt(D))
        if np.any(D <= 0):
            return g, float("inf")
        G = self.gradient(M, D)
        return g, g - float(np.vdot(G, M)) + self.linear_max(G)


def mmc_model(X, constraints: ConstraintSet) -> MMCModel:
    """The :class:`MMCModel` of ``constraints`` on ``X`` (validated)."""
    return MMCModel(X, constraints)

