r"""The subspace master of the totally-corrective BoostMetric solver: Newton's method with a log barrier.

The paper's totally-corrective step (algorithm 4) re-optimises the weights of the rank-one
learners :math:`v_j v_j^\top` found so far: its feasible set, the cone they generate, is
polyhedral, and a full-rank optimum is only approached as more and more rank-one columns enter
(measured on wine, standardized: 500 columns generated, certified gap 1.2e-5 after 34 s). This
master optimises over every PSD matrix on the span of the columns instead,

.. math:: \min_{W \succeq 0}\ \text{loss}(\rho(Q W Q^\top)) + \nu\,\mathrm{tr}\,W,
          \qquad \rho_r(Q W Q^\top) = p_r^\top W p_r - q_r^\top W q_r,

with :math:`Q` (d, k) an orthonormal basis of the columns, :math:`p_r = Q^\top(x_i - x_k)`,
:math:`q_r = Q^\top(x_i - x_j)`. Its answer is again a weighted sum of rank-one learners: the
eigenvectors of :math:`Q W Q^\top` weighted by its eigenvalues. It is solved by a barrier method,
:math:`\min \text{loss} + \nu\,\mathrm{tr}\,W - \mu \log\det W` for decreasing :math:`\mu`, each by Newton's method
with the exact Hessian in the coordinates :math:`\mathrm{svec}(W)` and a backtracking line search
that keeps :math:`W \succ 0`. Newton's method and the barrier are invariant under
:math:`W \to T W T^\top`, so neither the data's units nor unequal feature scales slow it down.
The outer loop prices the directions outside the span (eigenvectors of :math:`\hat A(u)` above
:math:`\nu`) and the certificate (:class:`cvxmetric.boostmetric.BoostMetricCertifier`) decides
``converged``.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, eigh

from cvxmetric.boostmetric import TripletGeometry, loss_value, loss_weights

__all__ = ["SubspaceMaster", "whitened_basis"]

#: Barrier weight at the start of a master solve: MU_START times the objective's scale per
#: dimension (the barrier's gap is mu k, here a tenth of the objective: far enough from the
#: boundary for full Newton steps, close enough that few stages follow).
MU_START = 0.1

#: The barrier weight shrinks by this factor per stage (a long-step path: 3-6 Newton steps per
#: stage, measured on iris, wine, breast_cancer).
MU_SHRINK = 0.1

#: A stage ends when half the squared Newton decrement, the predicted decrease (an estimate of
#: the distance to the stage's minimiser in objective units), is below CENTERING times the
#: barrier's gap mu k: each stage's point is then as close to its minimiser as the barrier
#: keeps it from the master's optimum, relatively.
CENTERING = 0.1

#: Newton steps per stage at most (a stage needs 3-6 when it succeeds; more means stagnation in
#: round-off).
NEWTON_STEPS_PER_STAGE = 50

#: Armijo's sufficient-decrease fraction and the backtracking factor (Boyd & Vandenberghe 9.2).
ARMIJO = 0.25
BACKTRACK = 0.5

#: Fraction of the step to the boundary of the PSD cone taken at most (keeps W strictly
#: positive definite, the standard 0.99 of interior-point methods).
BOUNDARY_FRACTION = 0.99

#: Triplets whose loss curvature is below this fraction of the largest one leave the Hessian
#: (not the gradient or the objective): their rows add at most this relative amount per row, far
#: below the Newton step's accuracy, and on large data sets most margins sit deep in the
#: loss's flat tail (the Hessian costs m k^4 / 8 flops over the rows kept).
CURVATURE_RTOL = 1e-14


#: Entries of the block of Hessian rows formed at once (2^22 doubles, 32 MB: the rows a_r of
#: all triplets take m k^4 / 4 doubles, 270 MB on digits).
HESSIAN_BLOCK = 2 ** 22


def whitened_basis(Q: np.ndarray, second_moment: np.ndarray) -> np.ndarray:
    r""":math:`B = Q T` with :math:`T = (Q^\top S Q)^{-1/2}`, S the second moment of the difference vectors:
    in the coordinates of B every direction carries margins of the same size, so a multiple of
    the identity is a well-scaled starting point whatever the features' units (raw features
    differ by 1e4 in scale; in the orthonormal basis the optimal W's eigenvalues spanned 1e-12
    .. 1e5 and Newton's method from an isotropic start stalled). Directions without spread keep
    a unit scale (their eigenvalues are floored at round-off of the largest)."""
    lam, E = np.linalg.eigh(Q.T @ second_moment @ Q)
    lam = np.maximum(lam, np.finfo(np.float64).eps * max(float(lam[-1]), np.finfo(np.float64).tiny))
    return Q @ ((E / np.sqrt(lam)) @ E.T)


def svec_index(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Rows, columns and weights of :math:`\mathrm{svec}`: the upper triangle, off-diagonals times :math:`\sqrt 2`
    (so that :math:`\langle A, B\rangle = \mathrm{svec}(A)^\top \mathrm{svec}(B)`)."""
    I, J = np.triu_indices(k)
    return I, J, np.where(I == J, 1.0, math.sqrt(2.0))


class SubspaceMaster:
    r"""The master problem on the span of Q (module docstring), for one loss and :math:`\nu`.

    Parameters
    ----------
    geom : TripletGeometry
        The (normalized) triplets.
    loss : {"exp", "logistic"}
    nu : float
    B : ndarray, shape (d, k)
        Linearly independent columns: the master's point is :math:`B W B^\top` (the solver passes
        an orthonormal basis times a whitening :math:`T`, see :func:`whitened_basis`).
    """

    def __init__(self, geom: TripletGeometry, loss: str, nu: float, B: np.ndarray):
        self.loss, self.nu, self.B = loss, float(nu), B
        self.k = B.shape[1]
        self.Pk = geom.geometry.V @ B    # B^T (x_i - x_k), one row per triplet
        self.Pj = geom.geometry.U @ B    # B^T (x_i - x_j)
        self.gram = B.T @ B              # tr(B W B^T) = <B^T B, W>
        self.I, self.J, self.s = svec_index(self.k)
        self.n_newton = 0

    # ------------------------------------------------------------------ the objective's parts
    def margins(self, W: np.ndarray) -> np.ndarray:
        r""":math:`\rho_r(Q W Q^\top)`, shape (m,)."""
        return np.einsum("ij,ij->i", self.Pk @ W, self.Pk) - np.einsum("ij,ij->i", self.Pj @ W, self.Pj)

    def value(self, rho: np.ndarray, W: np.ndarray) -> float:
        """loss + nu tr(B W B^T) (the problem's objective at B W B^T)."""
        return loss_value(self.loss, rho) + self.nu * float(np.sum(self.gram * W))

    def _svec(self, S: np.ndarray) -> np.ndarray:
        return self.s * S[self.I, self.J]

    def _smat(self, x: np.ndarray) -> np.ndarray:
        S = np.zeros((self.k, self.k))
        S[self.I, self.J] = x / self.s
        S[self.J, self.I] = x / self.s
        return S

    def _gradient(self, u: np.ndarray, B: np.ndarray, mu: float) -> np.ndarray:
        r"""svec of :math:`\nu B^\top B - B^\top \hat A(u) B - \mu W^{-1}`."""
        G = self.nu * self.gram - (self.Pk.T * u) @ self.Pk + (self.Pj.T * u) @ self.Pj - mu * B
        return self._svec(G)

    def _rows(self, rows: np.ndarray) -> np.ndarray:
        r""":math:`a_r = \mathrm{svec}(p_r p_r^\top - q_r q_r^\top)` for the given triplets, shape (len(rows), K)."""
        Pk, Pj = self.Pk[rows], self.Pj[rows]
        return self.s * (Pk[:, self.I] * Pk[:, self.J] - Pj[:, self.I] * Pj[:, self.J])

    def _loss_hessian(self, rho: np.ndarray, u: np.ndarray) -> np.ndarray:
        r""":math:`\sum_r \ell''_r a_r a_r^\top` (minus :math:`(\sum u_r a_r)(\cdot)^\top` for the log-sum-exp)
        over the rows of non-negligible curvature, in blocks of ``HESSIAN_BLOCK`` entries."""
        h = u if self.loss == "exp" else u * (1.0 - u)
        K = self.s.size
        Hm, a = np.zeros((K, K)), np.zeros(K)
        if not h.size or not float(np.max(h)) > 0.0:
            return Hm
        rows = np.flatnonzero(h > CURVATURE_RTOL * float(np.max(h)))
        step = max(1, HESSIAN_BLOCK // K)
        for lo in range(0, rows.size, step):
            r = rows[lo:lo + step]
            A = self._rows(r)
            Hm += (A * h[r, None]).T @ A
            if self.loss == "exp":
                a += A.T @ u[r]
        return Hm - np.outer(a, a) if self.loss == "exp" else Hm

    def _barrier_hessian(self, B: np.ndarray, mu: float) -> np.ndarray:
        r""":math:`\mu\,(W^{-1} \otimes_s W^{-1})` in svec coordinates:
        :math:`\tfrac{\mu}{2} s_{ij} s_{kl} (B_{ik} B_{jl} + B_{il} B_{jk})`."""
        I, J, s = self.I, self.J, self.s
        T = B[np.ix_(I, I)] * B[np.ix_(J, J)] + B[np.ix_(I, J)] * B[np.ix_(J, I)]
        return (0.5 * mu) * np.outer(s, s) * T

    # ------------------------------------------------------------------ Newton
    def _phi(self, rho, W, mu) -> float:
        """The barrier objective, inf outside the PSD cone."""
        try:
            L = np.linalg.cholesky(W)
        except np.linalg.LinAlgError:
            return np.inf
        return self.value(rho, W) - 2.0 * mu * float(np.sum(np.log(np.diag(L))))

    def _max_step(self, W: np.ndarray, D: np.ndarray) -> float:
        """The largest t <= 1 with W + t D inside the cone, shortened by BOUNDARY_FRACTION."""
        lam = eigh(D, W, eigvals_only=True)   # generalized: W + tD > 0 iff 1 + t lam > 0
        low = float(np.min(lam))
        return 1.0 if low >= -1.0 else BOUNDARY_FRACTION / -low

    def isotropic_weight(self) -> float:
        r"""The minimiser :math:`\gamma \ge 0` of the objective at :math:`\gamma B B^\top` (algorithm 2's line
        search along the identity of the whitened coordinates: a first step in the data's units),
        or the weight giving the largest margin one when that minimiser is 0."""
        from .boostmetric_stagewise import line_search_weight   # the module that imports this one

        h = self.margins(np.eye(self.k))
        gamma = line_search_weight(self.loss, np.zeros_like(h), h, self.nu * float(np.trace(self.gram)))
        return gamma if gamma > 0.0 else 1.0 / float(np.max(np.abs(h)))

    def newton_step(self, W: np.ndarray, rho: np.ndarray, mu: float):
        """One damped Newton step on the barrier problem: (W, rho, half the squared decrement)."""
        try:
            B = np.linalg.inv(W)
        except np.linalg.LinAlgError:   # W singular in floating point: no Newton step from it
            return W, rho, 0.0
        B = 0.5 * (B + B.T)
        u = loss_weights(self.loss, rho)
        g = self._gradient(u, B, mu)
        if not np.all(np.isfinite(g)):
            return W, rho, 0.0
        Hm = self._loss_hessian(rho, u) + self._barrier_hessian(B, mu)
        try:
            x = -cho_solve(cho_factor(Hm), g)
        except LinAlgError:   # the barrier term is positive definite; only round-off gets here
            x = -np.linalg.lstsq(Hm, g, rcond=None)[0]
        dec = -float(g @ x)
        if not dec > 0.0:
            return W, rho, 0.0
        D = self._smat(x)
        drho = self.margins(D)
        t = self._max_step(W, D)
        phi0 = self._phi(rho, W, mu)
        while t > 1e-20:   # 2^-66: below it the step changes no double of W
            Wt, rt = W + t * D, rho + t * drho
            if self._phi(rt, Wt, mu) <= phi0 - ARMIJO * t * dec:
                self.n_newton += 1
                return 0.5 * (Wt + Wt.T), rt, 0.5 * dec
            t *= BACKTRACK
        return W, rho, 0.0

    def solve(self, W: np.ndarray, mu: float, mu_final: float):
        """Barrier stages from ``mu`` down to ``mu_final``: (W, rho, the last mu)."""
        rho = self.margins(W)
        while True:
            for _ in range(NEWTON_STEPS_PER_STAGE):
                W, rho, half_dec = self.newton_step(W, rho, mu)
                if half_dec <= CENTERING * mu * self.k:
                    break
            if mu <= mu_final:
                return W, rho, mu
            mu = max(mu_final, mu * MU_SHRINK)
