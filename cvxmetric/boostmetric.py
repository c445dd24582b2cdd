r"""BoostMetric's shared vocabulary (Shen et al. 2012, JMLR; DESIGN §5.6): triplet geometry,
margins, the matrix-free pricing operator and the three losses.

A triplet :math:`r = (i, j, k)` says "i is closer to j than to k". With
:math:`C_{ab} = (x_a - x_b)(x_a - x_b)^\top` the paper's eq. (4) is

.. math:: A_r = C_{ik} - C_{ij}, \qquad \rho_r = \langle A_r, X\rangle
          = D_X(i, k) - D_X(i, j),

and for unit vectors :math:`v_j` (the rank-one trace-one "weak learners" :math:`Z_j = v_j v_j^\top`)

.. math:: H_{rj} = \langle A_r, v_j v_j^\top\rangle = (v_j^\top(x_i - x_k))^2 - (v_j^\top(x_i - x_j))^2 .

Nothing here forms a :math:`d \times d` matrix per triplet: everything goes through the difference
vectors of :class:`~cvxmetric.hinge.QuadrupletGeometry` (the triplet is the quadruplet
:math:`(i, j, i, k)`, whose :math:`C_{ij} - C_{ik}` is :math:`-A_r`).

The three problems (all over :math:`X \succeq 0`; the project *minimises*, so the hinge problem's
value is the negative of the paper's):

* hinge, eq. (5): :math:`\min_{X, \rho, \xi} -\rho + \nu \sum_r \xi_r` s.t.
  :math:`\rho_r(X) \ge \rho - \xi_r`, :math:`\xi \ge 0`, :math:`\mathrm{tr} X = 1`;
  needs :math:`\nu \ge 1/|\mathcal{I}|` (else unbounded). With the slacks and :math:`\rho` minimised in
  closed form the objective at :math:`X` is :math:`-\min_{u \in U_\nu} u^\top \rho(X)`,
  :math:`U_\nu = \{u : 1^\top u = 1, 0 \le u \le \nu\}`: for :math:`\nu = 1/K` it is minus the mean
  of the :math:`K` smallest margins (see :func:`hinge_value`);
* exponential, eq. (8): :math:`\log \sum_r \exp(-\rho_r(X)) + \nu\, \mathrm{tr} X`;
* logistic, eq. (19): :math:`\sum_r \log(1 + \exp(-\rho_r(X))) + \nu\, \mathrm{tr} X`.

For the smooth losses the dual weights of eq. (13)/(20) are
:math:`u = \mathrm{softmax}(-\rho)` and :math:`u_r = \sigma(-\rho_r)`; the gradient of the objective is
:math:`\nu I - \hat A(u)` with :math:`\hat A(u) = \sum_r u_r A_r` (eq. 17), and when
:math:`\lambda_{\max}(\hat A(u)) \le \nu` the duality gap of :math:`X` is certified:
:math:`f(X) - f^* \le \nu\,\mathrm{tr} X - u^\top \rho(X)` (:func:`smooth_certificate`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit, logsumexp, softmax

from ._checks import as_data_matrix, check_positive
from .constraints import ConstraintSet
from .hinge import QuadrupletGeometry
from .tolerances import ZERO_LENGTH_TOL

__all__ = [
    "LOSSES",
    "DENSE_EIG_MAX_D",
    "TripletGeometry",
    "BoostMetricModel",
    "boostmetric_model",
    "as_triplets",
    "hinge_value",
    "hinge_dual_weights",
    "loss_value",
    "loss_weights",
    "smooth_certificate",
    "project_capped_simplex",
]

#: The losses of the paper: hinge (eq. 5), exponential (eq. 8), logistic (eq. 19).
LOSSES = ("hinge", "exp", "logistic")

#: Up to this dimension the pricing problem builds the d x d matrix sum_r u_r A_r from the
#: difference vectors (O(m d^2)) and calls dense ``eigh`` (0.2 ms at d = 50, 3 ms at d = 200);
#: above it a Lanczos solver (``eigsh``) runs on the matrix-free operator (O(m d) per product).
DENSE_EIG_MAX_D = 200

#: Relative tolerance handed to ``eigsh`` for the top eigenpair (its residual is reported and
#: added to the eigenvalue wherever the eigenvalue is used as a certified bound).
LANCZOS_TOL = 1e-12


def as_triplets(triplets) -> ConstraintSet:
    """Triplets as a :class:`ConstraintSet` (an (m, 3) index array or a set of triplet rows).

    Raises
    ------
    TypeError
        If ``triplets`` is neither a ConstraintSet nor an integer array.
    ValueError
        If a row of a ConstraintSet is not a triplet ``(i, j, i, k)``, or a weight is not 1
        (BoostMetric weighs every triplet equally; margins ``delta`` are not used).
    """
    if isinstance(triplets, ConstraintSet):
        cons = triplets
        bad = cons.idx[:, 0] != cons.idx[:, 2]
        if np.any(bad):
            q = int(np.argmax(bad))
            raise ValueError(
                f"triplets: row {q} = {tuple(cons.idx[q])} is not a triplet (i, j, i, k); build the set "
                "with ConstraintSet.from_triplets"
            )
        if np.any(cons.weight != 1.0):
            raise ValueError("triplets: BoostMetric weighs all triplets equally; pass weight=1 (the default)")
        return cons
    return ConstraintSet.from_triplets(triplets)


class TripletGeometry:
    r"""Difference vectors of BoostMetric triplets on a data matrix.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row (``d >= 1``).
    triplets : ConstraintSet or array_like of int, shape (m, 3)
        Rows ``(i, j, k)``: "i is closer to j than to k" (see :func:`as_triplets`).

    Attributes
    ----------
    m, d : int
    geometry : QuadrupletGeometry
        The quadruplets ``(i, j, i, k)``; its ``U`` holds :math:`x_i - x_j` and ``V`` holds
        :math:`x_i - x_k` (shape (m, d) each).

    Raises
    ------
    ValueError
        Empty triplet set, ``d = 0``, an index out of range, a repeated index in a triplet, or a
        zero-length difference vector (duplicate points): such a triplet has :math:`A_r \preceq 0`
        or :math:`A_r \succeq 0` and says nothing about the metric.
    """

    def __init__(self, X, triplets):
        X = as_data_matrix(X)
        cons = as_triplets(triplets)
        if len(cons) == 0:
            raise ValueError("triplets is empty; give at least one triplet (i, j, k), e.g. from "
                             "cvxmetric.generators.triplets_from_labels")
        cons.validate(X.shape[0], name="triplets")
        i, j, k = cons.idx[:, 0], cons.idx[:, 1], cons.idx[:, 3]
        rep = (i == j) | (i == k) | (j == k)
        if np.any(rep):
            q = int(np.argmax(rep))
            raise ValueError(f"triplet {q} = {(int(i[q]), int(j[q]), int(k[q]))} repeats an index; "
                             "every triplet needs three distinct points")
        self.geometry = QuadrupletGeometry(X, cons, _validated=True)
        a, b = self.geometry.squared_lengths()
        zero = (a <= ZERO_LENGTH_TOL) | (b <= ZERO_LENGTH_TOL)
        if np.any(zero):
            q = int(np.argmax(zero))
            raise ValueError(
                f"triplet {q} = {(int(i[q]), int(j[q]), int(k[q]))} has a zero-length difference "
                f"(|x_i - x_j|^2 = {a[q]:.3g}, |x_i - x_k|^2 = {b[q]:.3g}): duplicate points; "
                "drop the triplet or de-duplicate X"
            )
        self.X = X
        self.triplets = cons
        self.m, self.d = len(cons), X.shape[1]

    # ----------------------------------------------------------------- margins and columns
    def margins(self, M: np.ndarray) -> np.ndarray:
        r""":math:`\rho_r = \langle A_r, M\rangle`, shape (m,)."""
        return -self.geometry.values(M)

    def margins_factor(self, L: np.ndarray) -> np.ndarray:
        r""":math:`\rho_r` for :math:`M = L^\top L` (L of shape (p, d)), cost :math:`O(m d p)`."""
        return -self.geometry.values_factor(L)

    def columns(self, V: np.ndarray) -> np.ndarray:
        r""":math:`H_{rj} = (v_j^\top(x_i - x_k))^2 - (v_j^\top(x_i - x_j))^2` for the columns of V (d, J): (m, J)."""
        return -self.geometry.values_rank_one(V)

    # ----------------------------------------------------------------- the pricing operator
    def weighted_sum(self, u: np.ndarray) -> np.ndarray:
        r""":math:`\hat A(u) = \sum_r u_r A_r` as a dense (d, d) matrix (from the difference vectors)."""
        return -self.geometry.weighted_sum(u)

    def apply(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        r"""Matrix-free :math:`\hat A(u) v` for v of shape (d,) or (d, k), cost :math:`O(m d k)`."""
        return -self.geometry.apply(u, v)

    def operator(self, u: np.ndarray):
        r""":math:`\hat A(u)` as a ``scipy.sparse.linalg.LinearOperator`` (symmetric, matrix-free)."""
        from scipy.sparse.linalg import LinearOperator

        u = np.array(u, dtype=np.float64, copy=True)
        return LinearOperator((self.d, self.d), matvec=lambda v: self.apply(u, v),
                              matmat=lambda V: self.apply(u, V), rmatvec=lambda v: self.apply(u, v),
                              dtype=np.float64)

    def top_eigenpair(self, u: np.ndarray, *, method: str = "auto", v0: np.ndarray | None = None,
                      k: int = 1) -> tuple[np.ndarray, np.ndarray, float]:
        r"""Largest eigenvalue(s) and eigenvector(s) of :math:`\hat A(u)` (the base learner, eq. 18).

        Parameters
        ----------
        u : ndarray, shape (m,)
        method : {"auto", "dense", "lanczos"}
            ``"dense"`` builds :math:`\hat A(u)` from the difference vectors and calls ``eigh``;
            ``"lanczos"`` runs ``eigsh`` on :meth:`operator`; ``"auto"`` is dense up to
            ``DENSE_EIG_MAX_D``.
        v0 : ndarray, shape (d,), optional
            Lanczos starting vector (e.g. the previous eigenvector).
        k : int
            Number of leading eigenpairs.

        Returns
        -------
        lam : ndarray, shape (k,)
            Eigenvalues, largest first.
        V : ndarray, shape (d, k)
            Unit eigenvectors.
        residual : float
            :math:`\max_i \|\hat A v_i - \lambda_i v_i\|`: a bound on how far ``lam[0]`` can be from an
            eigenvalue (0 up to round-off for the dense path).
        """
        if method not in ("auto", "dense", "lanczos"):
            raise ValueError(f"method must be 'auto', 'dense' or 'lanczos'; got {method!r}")
        k = int(k)
        if method == "auto":
            method = "dense" if self.d <= DENSE_EIG_MAX_D else "lanczos"
        if method == "lanczos" and k >= self.d - 1:
            method = "dense"  # ARPACK needs k < d - 1
        if method == "dense":
            lam, V = np.linalg.eigh(self.weighted_sum(u))
            lam, V = lam[::-1][:k].copy(), V[:, ::-1][:, :k].copy()
            return lam, V, 0.0
        from scipy.sparse.linalg import eigsh

        lam, V = eigsh(self.operator(u), k=k, which="LA", tol=LANCZOS_TOL, v0=v0)
        order = np.argsort(lam)[::-1]
        lam, V = lam[order], V[:, order]
        V = V / np.linalg.norm(V, axis=0)
        R = self.apply(u, V) - V * lam
        return lam, V, float(np.max(np.linalg.norm(R, axis=0)))


# --------------------------------------------------------------------------------- losses
def _check_loss(loss: str) -> str:
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}; got {loss!r}")
    return loss


def check_hinge_nu(nu, m: int) -> float:
    r"""Validate :math:`\nu` for the hinge problem: :math:`\nu \ge 1/|\mathcal{I}|`.

    Raises
    ------
    ValueError
        If :math:`\nu < 1/m`: then :math:`0 \le u \le \nu` and :math:`1^\top u = 1` cannot both hold, the
        dual is infeasible and the primal (5) is unbounded (:math:`\rho \to \infty`).
    """
    nu = check_positive(nu, "nu")
    if nu * m < 1.0 - 1e-12:
        raise ValueError(
            f"nu = {nu:.6g} < 1/|I| = {1.0 / m:.6g} ({m} triplets): the hinge problem (5) is unbounded "
            "(its dual, 1'u = 1 with 0 <= u <= nu, is infeasible); use nu >= 1/|I|, e.g. nu = 1/K to "
            "maximise the mean of the K smallest margins"
        )
    return nu


def hinge_value(rho: np.ndarray, nu: float) -> float:
    r"""The paper's hinge objective at fixed margins, maximised over :math:`\rho, \xi` (eq. 5).

    .. math:: \max_{\rho}\ \rho - \nu \sum_r [\rho - \rho_r]_+ = \min_{u \in U_\nu} u^\top \rho
              = \nu \sum_{r \le K} \rho_{(r)} + (1 - K\nu)\, \rho_{(K+1)},\quad K = \lfloor 1/\nu \rfloor,

    :math:`\rho_{(1)} \le \rho_{(2)} \le \dots` the sorted margins (:math:`\nu \ge 1/m` is required).
    """
    rho = np.asarray(rho, dtype=np.float64)
    m = rho.size
    nu = check_hinge_nu(nu, m)
    return float(hinge_dual_weights(rho, nu) @ rho)


def hinge_dual_weights(rho: np.ndarray, nu: float) -> np.ndarray:
    r"""A minimiser :math:`u` of :math:`u^\top\rho` over :math:`U_\nu` (weight :math:`\nu` on the K smallest
    margins, :math:`1 - K\nu` on the next one)."""
    rho = np.asarray(rho, dtype=np.float64)
    m = rho.size
    K = min(int(np.floor(1.0 / nu)), m)
    order = np.argsort(rho, kind="stable")
    u = np.zeros(m)
    u[order[:K]] = nu
    if K < m:
        u[order[K]] = max(0.0, 1.0 - K * nu)
    return u


def loss_value(loss: str, rho: np.ndarray) -> float:
    r"""Loss part of the smooth objectives: :math:`\log\sum_r e^{-\rho_r}` ("exp") or
    :math:`\sum_r \log(1 + e^{-\rho_r})` ("logistic"), computed stably."""
    rho = np.asarray(rho, dtype=np.float64)
    if loss == "exp":
        return float(logsumexp(-rho))
    if loss == "logistic":
        return float(-np.sum(log_expit(rho)))
    raise ValueError(f"loss_value takes 'exp' or 'logistic'; got {loss!r}")


def loss_weights(loss: str, rho: np.ndarray) -> np.ndarray:
    r"""Dual weights :math:`u = -\nabla_\rho \text{loss}`: softmax(−ρ) (eq. 13) or σ(−ρ) (eq. 20)."""
    rho = np.asarray(rho, dtype=np.float64)
    if loss == "exp":
        return softmax(-rho)
    if loss == "logistic":
        return expit(-rho)
    raise ValueError(f"loss_weights takes 'exp' or 'logistic'; got {loss!r}")


def smooth_certificate(nu: float, trace: float, rho: np.ndarray, u: np.ndarray, lam_max: float) -> float | None:
    r"""Certified duality gap :math:`\nu\,\mathrm{tr}X - u^\top\rho` of a smooth BoostMetric point, or None.

    By Fenchel duality (the entropy duals (12) and the logistic dual of sec. 3.5), any
    :math:`u = u(X)` with :math:`\hat A(u) \preceq \nu I` gives :math:`f^* \ge f(X) - \langle \nu I - \hat A(u), X\rangle`.
    Returns None when :math:`\lambda_{\max}(\hat A(u)) > \nu` (u is not dual feasible).
    """
    if lam_max > nu:
        return None
    return float(max(0.0, nu * trace - float(u @ rho)))


def project_capped_simplex(z: np.ndarray, cap: float, total: float = 1.0) -> np.ndarray:
    r"""Euclidean projection onto :math:`\{u : 0 \le u \le \text{cap}, 1^\top u = \text{total}\}`.

    Bisection on the shift :math:`\tau` of :math:`u = \mathrm{clip}(z - \tau, 0, \text{cap})` (monotone in
    :math:`\tau`), to machine precision. Needs :math:`\text{cap} \cdot n \ge \text{total}`.
    """
    z = np.asarray(z, dtype=np.float64)
    if cap * z.size < total * (1 - 1e-12):
        raise ValueError(f"the capped simplex is empty: cap * n = {cap * z.size} < total = {total}")
    lo, hi = float(z.min()) - cap - 1.0, float(z.max()) + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        s = np.clip(z - mid, 0.0, cap).sum()
        if s > total:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(mid)):
            break
    u = np.clip(z - 0.5 * (lo + hi), 0.0, cap)
    return u


# --------------------------------------------------------------------------------- the model
@dataclass(frozen=True, eq=False)
class BoostMetricModel:
    r"""One BoostMetric problem: triplets, a loss and :math:`\nu` (the single numpy definition of the
    objective, read by the cvxpy formulations and the fast solvers).

    Attributes
    ----------
    geometry : TripletGeometry
    loss : {"hinge", "exp", "logistic"}
    nu : float

    Notes
    -----
    ``value(M)`` is the minimisation-convention objective (see the module docstring):
    :math:`-\text{hinge\_value}(\rho(M), \nu)` for the hinge problem (``M`` must have trace 1) and
    :math:`\text{loss}(\rho(M)) + \nu\,\mathrm{tr} M` for the smooth ones.
    """

    geometry: TripletGeometry
    loss: str
    nu: float

    @property
    def m(self) -> int:
        return self.geometry.m

    @property
    def d(self) -> int:
        return self.geometry.d

    def value_from_margins(self, rho: np.ndarray, trace: float) -> float:
        """Objective from precomputed margins and trace (see the class notes)."""
        if self.loss == "hinge":
            return -hinge_value(rho, self.nu)
        return loss_value(self.loss, rho) + self.nu * float(trace)

    def value(self, M: np.ndarray) -> float:
        """Objective at a PSD ``M`` (trace 1 for the hinge problem)."""
        M = np.asarray(M, dtype=np.float64)
        if M.shape != (self.d, self.d):
            raise ValueError(f"M must have shape ({self.d}, {self.d}); got {M.shape}")
        tr = float(np.trace(M))
        if self.loss == "hinge" and abs(tr - 1.0) > 1e-8:
            raise ValueError(f"the hinge problem is over trace-one matrices; tr M = {tr:.12g}")
        return self.value_from_margins(self.geometry.margins(M), tr)

    def weights(self, rho: np.ndarray) -> np.ndarray:
        r"""Dual weights :math:`u(\rho)` (hinge: a minimiser over :math:`U_\nu`)."""
        if self.loss == "hinge":
            return hinge_dual_weights(rho, self.nu)
        return loss_weights(self.loss, rho)


def boostmetric_model(X, triplets, *, loss: str = "exp", nu: float = 1e-7) -> BoostMetricModel:
    r"""Build a :class:`BoostMetricModel` (validates the data, the triplets and :math:`\nu`).

    Parameters
    ----------
    X : array_like, shape (n, d)
    triplets : ConstraintSet or array_like of int, shape (m, 3)
    loss : {"hinge", "exp", "logistic"}
    nu : float
        Trace weight (exp/logistic, paper default 1e-7) or slack weight of the hinge problem
        (needs :math:`\nu \ge 1/m`).
    """
    _check_loss(loss)
    geom = TripletGeometry(X, triplets)
    nu = check_hinge_nu(nu, geom.m) if loss == "hinge" else check_positive(nu, "nu")
    return BoostMetricModel(geom, loss, nu)
