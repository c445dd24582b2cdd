r"""BoostMetric's shared vocabulary: triplet geometry, margins, the matrix-free pricing operator and
the three losses.

Reference: Shen et al. 2012 (JMLR); design §5.6.

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
:math:`\nu I - \hat A(u)` with :math:`\hat A(u) = \sum_r u_r A_r` (eq. 17).

Certificates (shared by the cvxpy ground truth and every fast solver): :class:`BoostMetricCertifier`
turns any dual weights into a certified lower bound on the optimum (the exact repairs are in its
notes). The column generation of the hinge dual :math:`\min_{u \in U_\nu} \lambda_{\max}(\hat A(u))`,
the hinge solver's engine and the exponential certificate's anchor search, is a solver
(:func:`cvxmetric.solvers.boostmetric_lp.lambda_max_column_generation`); the certifier takes it as
``anchor_search``. :meth:`BoostMetricModel.normalized` is the exact power-of-two rescaling
the ground truth and the solvers run on. Every tolerance here is relative to the data's scale.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from scipy.special import entr, expit, log_expit, logsumexp, softmax

from ._checks import as_data_matrix, check_positive
from .constraints import ConstraintSet
from .hinge import QuadrupletGeometry

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
    "project_capped_simplex",
    "project_spectraplex",
    "DualBound",
    "BoostMetricCertifier",
    "power_of_two",
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

#: Round-off of :math:`\hat A(u)` and of its eigenvalues (:meth:`TripletGeometry.roundoff`):
#: summing m terms and a backward-stable ``eigh`` of a d x d matrix err by at most about
#: (m + d) ulps of :math:`\sum_r |u_r| (\|x_i - x_j\|^2 + \|x_i - x_k\|^2)` (the size of the terms
#: summed). It is added to :math:`\lambda_{\max}` wherever that enters a certified bound, and a
#: priced column whose reduced cost is below it is round-off, not an improvement.
#: (A fixed 1e-12 of that size stalled column generation at a 1.4e-7 gap on ill-conditioned
#: features, where the size is 1e6 times the optimum.)
ROUNDOFF_ULPS_PER_TERM = 1.0

#: Active-set steps :func:`project_capped_simplex` tries before its sorted search (measured: 1-3
#: steps from the weights of an LP or the eigenvalues of a near-PSD trace-one matrix, 5-20x faster
#: than the sort at m = 540; far-off points fall through to the sort after these few).
CAPPED_NEWTON_STEPS = 4
#: Exponential-loss certificate (:class:`BoostMetricCertifier`): the search for an anchor u0 with
#: lambda_max(A(u0)) < nu stops once its slack nu - lambda_max(A(u0)) is at least this fraction of
#: the largest slack possible (nu minus the restricted LP's lower bound on min lambda_max) ...
ANCHOR_SLACK_FRACTION = 0.5
#: ... or after this many LPs (measured: 5-40 on the default instances).
ANCHOR_MAX_LP = 200


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
        zu, zv = self.geometry.zero_length()   # the project's one (relative) duplicate test
        zero = zu | zv
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
        self._sizes = a + b

    def weight_scale(self, u: np.ndarray) -> float:
        r""":math:`\sum_r |u_r| (\|x_i - x_j\|^2 + \|x_i - x_k\|^2) \ge \|\hat A(u)\|_2`: the size of the
        terms summed into :math:`\hat A(u)`, the unit of its round-off (scales with the data squared)."""
        return float(np.abs(u) @ self._sizes)

    def column_bound(self) -> float:
        r""":math:`\max_r (\|x_i - x_j\|^2 + \|x_i - x_k\|^2) \ge |H_{rj}|` for every unit column
        :math:`v_j`: the size of the master LP's entries (:class:`MasterLP`)."""
        return float(np.max(self._sizes))

    def eig_method(self, eig: str = "auto") -> str:
        """The eigen-solver ``eig`` resolves to: ``"auto"`` is dense up to ``DENSE_EIG_MAX_D``."""
        if eig not in ("auto", "dense", "lanczos"):
            raise ValueError(f"eig must be 'auto', 'dense' or 'lanczos'; got {eig!r}")
        if eig == "auto":
            return "dense" if self.d <= DENSE_EIG_MAX_D else "lanczos"
        return eig

    def data_scale(self) -> float:
        r"""The data's squared scale as a power of 4: :math:`c^2 = 4^k` nearest (in log) to the mean
        squared length of the triplets' difference vectors. Dividing the data by :math:`c = 2^k` is
        exact in floating point (see :meth:`BoostMetricModel.normalized`)."""
        return power_of_two(float(np.mean(self._sizes)) / 2.0, even=True)

    def roundoff(self, u: np.ndarray) -> float:
        """Round-off allowance of :math:`\\hat A(u)` and its eigenvalues (see ``ROUNDOFF_ULPS_PER_TERM``)."""
        return ROUNDOFF_ULPS_PER_TERM * (self.m + self.d) * np.finfo(np.float64).eps * self.weight_scale(u)

    def lambda_max_upper(self, u: np.ndarray, *, eig: str = "auto", v0: np.ndarray | None = None,
                         n_vectors: int = 1, A: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        r"""A certified upper bound on :math:`\lambda_{\max}(\hat A(u))` and the top eigenvector(s).

        The computed eigenvalue plus the eigen-solver's residual (Lanczos) plus the round-off
        allowance :meth:`roundoff`. Returns the bound and the ``n_vectors``
        leading unit eigenvectors, shape (d, n_vectors). ``A``: :math:`\hat A(u)` if already formed
        (dense path).
        """
        lam, V, resid = self.top_eigenpair(u, eig=eig, v0=v0, n_vectors=min(int(n_vectors), self.d), A=A)
        return float(lam[0]) + resid + self.roundoff(u), V

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

    def top_eigenpair(self, u: np.ndarray, *, eig: str = "auto", v0: np.ndarray | None = None,
                      n_vectors: int = 1, A: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float]:
        r"""Largest eigenvalue(s) and eigenvector(s) of :math:`\hat A(u)` (the base learner, eq. 18).

        Parameters
        ----------
        u : ndarray, shape (m,)
        eig : {"auto", "dense", "lanczos"}
            ``"dense"`` builds :math:`\hat A(u)` from the difference vectors and calls ``eigh``;
            ``"lanczos"`` runs ``eigsh`` on :meth:`operator`; ``"auto"`` is dense up to
            ``DENSE_EIG_MAX_D``.
        v0 : ndarray, shape (d,), optional
            Lanczos starting vector (e.g. the previous eigenvector).
        n_vectors : int
            Number of leading eigenpairs (scipy's ``k``).
        A : ndarray, shape (d, d), optional
            :math:`\hat A(u)` if the caller has formed it (used by the dense path instead of
            :meth:`weighted_sum`).

        Returns
        -------
        lam : ndarray, shape (n_vectors,)
            Eigenvalues, largest first.
        V : ndarray, shape (d, n_vectors)
            Unit eigenvectors.
        residual : float
            :math:`\max_i \|\hat A v_i - \lambda_i v_i\|`: a bound on how far ``lam[0]`` can be from an
            eigenvalue (0 up to round-off for the dense path).
        """
        k = int(n_vectors)
        path = self.eig_method(eig)
        if path == "lanczos" and k >= self.d - 1:
            path = "dense"  # ARPACK needs k < d - 1
        if path == "dense":
            lam, V = np.linalg.eigh(self.weighted_sum(u) if A is None else A)
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
            f"the hinge's slack weight nu (slack_weight) = {nu:.6g} < 1/|I| = {1.0 / m:.6g} ({m} triplets): the "
            "hinge problem (5) is unbounded (its dual, 1'u = 1 with 0 <= u <= nu, is infeasible); use "
            "slack_weight >= 1/|I|, e.g. 1/K to maximise the mean of the K smallest margins"
        )
    return nu


def hinge_value(rho: np.ndarray, nu: float) -> float:
    r"""The paper's hinge objective at fixed margins, maximised over :math:`\rho, \xi` (eq. 5).

    .. math:: \max_{\rho}\ \rho - \nu \sum_r [\rho - \rho_r]_+ = \min_{u \in U_\nu} u^\top \rho
              = \nu \sum_{r \le K} \rho_{(r)} + (1 - K\nu)\, \rho_{(K+1)},\quad K = \lfloor 1/\nu \rfloor,

    :math:`\rho_{(1)} \le \rho_{(2)} \le \dots` the sorted margins (:math:`\nu \ge 1/m` is required).
    """
    rho = np.asarray(rho, dtype=np.float64).reshape(-1)
    m = rho.size
    nu = check_hinge_nu(nu, m)
    K = min(int(np.floor(1.0 / nu)), m)
    if K == m:
        return float(nu * rho.sum())
    smallest = np.partition(rho, K)   # the K smallest first, then the (K+1)-th: O(m), no sort
    return float(nu * smallest[:K].sum() + max(0.0, 1.0 - K * nu) * smallest[K])


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


def project_capped_simplex(z: np.ndarray, cap: float, total: float = 1.0) -> np.ndarray:
    r"""Euclidean projection onto :math:`\{u : 0 \le u \le \text{cap}, 1^\top u = \text{total}\}`.

    The projection is :math:`u = \mathrm{clip}(z - \tau, 0, \text{cap})` with the shift :math:`\tau`
    solving :math:`f(\tau) = \sum_i \mathrm{clip}(z_i - \tau, 0, \text{cap}) = \text{total}`. The function f
    is piecewise linear and non-increasing with breakpoints :math:`z_i` and :math:`z_i - \text{cap}`.
    First up to ``CAPPED_NEWTON_STEPS`` active-set steps from :math:`\tau = 0`
    (:func:`_capped_shift_active_set`, exact when they stop; cheap for points that are nearly
    feasible already, such as an LP's weights), else f is evaluated at all 2n breakpoints from
    sorted prefix sums (:math:`O(n \log n)`), and :math:`\tau` is interpolated exactly on the
    segment that brackets ``total``. Needs :math:`\text{cap} \cdot n \ge \text{total}`.
    """
    z = np.asarray(z, dtype=np.float64)
    n = z.size
    if cap * n < total * (1 - 1e-12):
        raise ValueError(f"the capped simplex is empty: cap * n = {cap * z.size} < total = {total}")
    if cap * n <= total:
        return np.full(z.shape, cap)
    tau = _capped_shift_active_set(z.reshape(-1), cap, total)
    if tau is None:
        tau = _capped_shift_sorted(z.reshape(-1), cap, total)
    return np.clip(z - tau, 0.0, cap)


def _capped_shift_active_set(z: np.ndarray, cap: float, total: float) -> float | None:
    r"""The shift :math:`\tau` of :func:`project_capped_simplex` by active-set steps from :math:`\tau = 0`.

    Each step takes the free entries :math:`F = \{0 < z_i - \tau < \text{cap}\}` and the capped
    ones :math:`C = \{z_i - \tau \ge \text{cap}\}` at the current :math:`\tau` and solves
    :math:`\sum_{F}(z_i - \tau') + |C|\,\text{cap} = \text{total}` for :math:`\tau'`. When :math:`F` and
    :math:`|C|` are the same at :math:`\tau'` (a shift cannot move an entry from capped to zero
    without moving another the other way, so :math:`C` is the same too), :math:`f(\tau') = \text{total}`:
    :math:`\tau'` is the answer. None after ``CAPPED_NEWTON_STEPS`` steps or when no entry is free.
    """
    free, n_cap = (z > 0.0) & (z < cap), int(np.count_nonzero(z >= cap))   # at tau = 0
    for _ in range(CAPPED_NEWTON_STEPS):
        k = int(np.count_nonzero(free))
        if k == 0:
            return None
        new = (float(z[free].sum()) + n_cap * cap - total) / k
        x = z - new
        free_new, n_cap_new = (x > 0.0) & (x < cap), int(np.count_nonzero(x >= cap))
        if n_cap_new == n_cap and np.array_equal(free_new, free):
            return new
        free, n_cap = free_new, n_cap_new
    return None


def _capped_shift_sorted(z: np.ndarray, cap: float, total: float) -> float:
    """The shift of :func:`project_capped_simplex` from f at all its breakpoints (sorted search)."""
    n = z.size
    zs = np.sort(z)
    tail = np.concatenate([np.cumsum(zs[::-1])[::-1], [0.0]])   # tail[k] = sum of zs[k:]

    def f(tau):   # sum_i max(z_i - tau, 0) - max(z_i - cap - tau, 0), vectorised over tau
        k1 = np.searchsorted(zs, tau, side="right")
        k2 = np.searchsorted(zs, tau + cap, side="right")
        return (tail[k1] - (n - k1) * tau) - (tail[k2] - (n - k2) * (tau + cap))

    br = np.unique(np.concatenate([zs, zs - cap]))   # ascending, f non-increasing along it
    fb = f(br)
    j = int(np.searchsorted(-fb, -total, side="left"))   # first breakpoint with f <= total
    if j == 0:
        return float(br[0] - (total - fb[0]) / n)   # left of every breakpoint f has slope -n
    lo, hi, flo, fhi = br[j - 1], br[j], fb[j - 1], fb[j]
    return float(hi if flo == fhi else lo + (flo - total) * (hi - lo) / (flo - fhi))


def project_spectraplex(X: np.ndarray, *, eigh: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    r"""Projection of a symmetric X onto :math:`\{X \succeq 0, \mathrm{tr}X = 1\}` (its eigenvalues
    projected onto the simplex, :func:`project_capped_simplex` with cap 1). ``eigh``: the caller's
    ``numpy.linalg.eigh(X)`` of a symmetric X, if already computed."""
    X = np.asarray(X, dtype=np.float64)
    lam, V = np.linalg.eigh(0.5 * (X + X.T)) if eigh is None else eigh
    lam = project_capped_simplex(lam, 1.0)
    P = (V * lam) @ V.T
    P = 0.5 * (P + P.T)
    return P / np.trace(P)


def power_of_two(x: float, *, even: bool = False) -> float:
    r"""The power of two nearest to ``x > 0`` in log scale (``even``: a power of four); 1 for x <= 0.

    Scaling by a power of two is exact in floating point, so a problem rescaled by one is the
    same problem bit for bit (barring under/overflow).
    """
    if not (x > 0 and np.isfinite(x)):
        return 1.0
    k = np.log2(x)
    k = 2.0 * np.round(k / 2.0) if even else np.round(k)
    return float(2.0 ** k)


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

    def normalized(self) -> tuple["BoostMetricModel", float]:
        r"""The same problem with the data divided by :math:`c = 2^k` (exact), and the map back.

        What is exactly invariant:

        * hinge: the objective is positively homogeneous in the margins and :math:`\mathrm{tr}X = 1`
          is kept, so with the same :math:`\nu`, ``value(X) == c2 * twin.value(X)`` (same point);
          :math:`c^2` = :meth:`TripletGeometry.data_scale`, so the twin's margins are of order one;
        * exp / logistic: :math:`\text{loss}(\rho(X)/c^2) + (\nu/c^2)\,\mathrm{tr}X = f(X / c^2)`, so the
          twin has :math:`\nu / c^2` and ``twin.value(P) == value(P / c2)`` (values equal, points
          divided by :math:`c^2`). Hence data scaled by s with :math:`\nu` scaled by :math:`s^2` is the
          same problem (points divided by :math:`s^2`), and so is its twin.

        The smooth problems have one free scale, and two coefficients per unit of trace: the margins'
        size :math:`D` (``data_scale``, the loss's derivative being O(1)) and the trace weight
        :math:`\nu`. Their ratio :math:`\nu / D` is the problem's own (data x s with the same
        :math:`\nu` is another problem: :math:`\nu / s^2` on the data); :math:`c^2 = \max(D, \nu)` (a power
        of four) makes the larger of the two coefficients of order one, so that an error of a solver's
        point in the twin's units costs the objective no more than its own size. With :math:`c^2 = D`
        alone, an optimum :math:`X^* = 0` (:math:`\nu \gg D`) would put a weight :math:`\nu / D` on the
        trace: on wine-exp with X x 1e-4 (:math:`\nu = 3`, :math:`D = 6 \times 10^{-8}`) that twin's trace
        weight is 5e7, and Clarabel's point there, of trace 4e-12, costs 2.9e-5 of the objective (an
        uncertified interval); with :math:`c^2 = 4` the first rung certifies 1.5e-9.

        Returns
        -------
        twin : BoostMetricModel
        c2 : float
            :math:`c^2` (a power of four).
        """
        c2 = self.geometry.data_scale()
        if self.loss == "hinge":
            nu = self.nu
        else:
            c2 = max(c2, power_of_two(self.nu, even=True))
            nu = self.nu / c2
        c = float(np.sqrt(c2))
        geom = TripletGeometry(self.geometry.X / c, self.geometry.triplets)
        return BoostMetricModel(geom, self.loss, nu), c2


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


# --------------------------------------------------------------------------------- certificates
@dataclass(frozen=True)
class DualBound:
    r"""A certified lower bound on a BoostMetric optimum (minimisation convention).

    Attributes
    ----------
    lower : float or None
        The bound (None: no certificate; ``detail`` says why).
    multipliers : ndarray, shape (m,)
        The repaired dual weights :math:`u` the bound was computed from.
    lam_max : float
        Certified upper bound on :math:`\lambda_{\max}(\hat A(u))` (:meth:`TripletGeometry.lambda_max_upper`).
    detail : str
        How the bound was obtained (which repair).
    """

    lower: float | None
    multipliers: np.ndarray
    lam_max: float
    detail: str = ""


class BoostMetricCertifier:
    r"""Certified lower bounds of the three BoostMetric problems from dual weights :math:`u`.

    One instance per problem: it caches the exponential loss's anchor (below). The ground truth
    (``cvxmetric.formulations.boostmetric``, from Clarabel's duals) and every fast solver call it.

    Parameters
    ----------
    model : BoostMetricModel
    eig : {"auto", "dense", "lanczos"}
        Eigen-solver (see :meth:`TripletGeometry.top_eigenpair`).
    anchor_search : callable, optional
        The exponential loss' anchor search, ``anchor_search(geometry, cap, *, stop, max_lp, eig,
        V0)`` -> a state with ``pi``, ``lam_best``, ``u_best``, ``n_lp``: the column generation
        :func:`cvxmetric.solvers.boostmetric_lp.lambda_max_column_generation` (a solver, passed in
        by the ground truth and the fast solvers). None: an exp bound that needs an anchor is None,
        and its detail says why.

    Notes
    -----
    Write :math:`\hat A(u) = \sum_r u_r A_r` and :math:`\bar\lambda(u)` for the certified upper
    bound on :math:`\lambda_{\max}(\hat A(u))`. Any :math:`u` is first *repaired* into the dual
    domain, then:

    * **hinge** (minimise :math:`-p(X)`, :math:`p` the paper's eq. 5): u is projected onto
      :math:`U_\nu = \{1^\top u = 1, 0 \le u \le \nu\}`. For :math:`u \in U_\nu` and
      :math:`\pi = \lambda_{\max}(\hat A(u))`, :math:`(u, \pi)` is feasible for the SDP dual
      :math:`\min \pi` s.t. :math:`\hat A(u) \preceq \pi I`, so :math:`p^* \le \pi` and the bound is
      :math:`-p^* \ge -\bar\lambda(u)`.
    * **exp** (:math:`f(X) = \log\sum_r e^{-\rho_r(X)} + \nu\,\mathrm{tr}X`): u is projected onto the
      simplex :math:`\Delta`. Fenchel: :math:`\log\sum_r e^{z_r} = \max_{u \in \Delta} u^\top z + H(u)`,
      :math:`H(u) = -\sum_r u_r \log u_r`, so for every :math:`X \succeq 0`

      .. math:: f(X) \ge H(u) + \langle \nu I - \hat A(u), X\rangle
                \ge H(u) - [\bar\lambda(u) - \nu]_+\,\mathrm{tr}X .

      If :math:`\bar\lambda(u) \le \nu` the bound is :math:`H(u)`. Otherwise a bound on
      :math:`\mathrm{tr}X^*` is needed: take an *anchor* :math:`u_0 \in \Delta` with
      :math:`\lambda_0 = \bar\lambda(u_0) < \nu`; the same inequality at :math:`X^*` and
      :math:`f(X^*) \le F` (F = ``upper``, the value of a feasible point) give

      .. math:: \mathrm{tr}X^* \le T = \frac{F - H(u_0)}{\nu - \lambda_0},\qquad
                f^* \ge \max\big(H(u_0),\ H(u) - T\,(\bar\lambda(u) - \nu)\big).

      The anchor is found once by ``anchor_search`` with cap 1 (seeded with the caller's columns), which stops when its slack :math:`\nu - \lambda_0` is at least
      ``ANCHOR_SLACK_FRACTION`` of the largest possible one; when its LP lower bound reaches
      :math:`\nu`, :math:`\min_{u\in\Delta}\lambda_{\max}(\hat A(u)) \ge \nu` and the problem has no
      strictly feasible dual (unbounded or not attained): no bound.
    * **logistic** (:math:`\sum_r \log(1 + e^{-\rho_r(X)}) + \nu\,\mathrm{tr}X`): u is clipped into
      :math:`[0, 1]^m`. Fenchel: :math:`\log(1 + e^{s}) = \max_{p \in [0,1]} ps + h(p)`, h the binary
      entropy, so :math:`f(X) \ge \sum_r h(u_r) + \langle \nu I - \hat A(u), X\rangle`. The domain is a
      box, so scaling repairs exactly: with :math:`t = \min(1, \nu / \bar\lambda(u))`,
      :math:`\hat A(tu) \preceq \nu I` and :math:`f^* \ge \sum_r h(t u_r)`.

    At the optimum (:math:`u = u(X^*)`, :math:`\lambda_{\max}(\hat A(u)) = \nu`) every bound is tight.
    """

    def __init__(self, model: BoostMetricModel, *, eig: str = "auto", anchor_search: Optional[Callable] = None):
        self.model = model
        self.eig = eig
        self.anchor_search = anchor_search
        self._anchor = None   # (u0, lam0, H(u0)) once searched; False when there is none
        self._anchor_detail = ""

    # ------------------------------------------------------------------ repairs
    def repair(self, u) -> np.ndarray:
        """``u`` projected into the dual domain of the loss (see the class notes)."""
        u = np.asarray(u, dtype=np.float64).reshape(-1)
        if u.shape != (self.model.m,) or not np.all(np.isfinite(u)):
            raise ValueError(f"u must be a finite vector of shape ({self.model.m},); got shape {u.shape}")
        if self.model.loss == "hinge":
            return project_capped_simplex(u, self.model.nu)
        if self.model.loss == "exp":
            return project_capped_simplex(u, 1.0)
        return np.clip(u, 0.0, 1.0)

    def anchor(self, columns: np.ndarray | None = None):
        r"""The exponential loss's anchor :math:`(u_0, \lambda_0, H(u_0))` (None: no strictly feasible dual)."""
        if self._anchor is None and self.anchor_search is None:
            self._anchor = False
            self._anchor_detail = "no anchor search given (anchor_search=None)"
        if self._anchor is None:
            nu = self.model.nu

            def stop(st):
                return st.pi >= nu or (st.lam_best < nu and nu - st.lam_best >= ANCHOR_SLACK_FRACTION * (nu - st.pi))

            st = self.anchor_search(self.model.geometry, 1.0, stop=stop, max_lp=ANCHOR_MAX_LP, eig=self.eig,
                                    V0=columns)
            if st.lam_best < nu:
                u0 = st.u_best
                self._anchor = (u0, st.lam_best, float(np.sum(entr(u0))))
                self._anchor_detail = f"anchor lambda_0 = {st.lam_best:.6g} < nu after {st.n_lp} LPs"
            else:
                self._anchor = False
                self._anchor_detail = (f"no anchor: min over the simplex of lambda_max(A(u)) >= {st.pi:.6g}"
                                       f" (nu = {nu:.6g}) after {st.n_lp} LPs; the problem has no strictly "
                                       "feasible dual (unbounded below or not attained)")
        return self._anchor or None

    # ------------------------------------------------------------------ the bound
    def bound(self, u, *, upper: float | None = None, columns: np.ndarray | None = None) -> DualBound:
        """A certified lower bound from dual weights ``u`` (see the class notes).

        Parameters
        ----------
        u : array_like, shape (m,)
            Dual weights (Clarabel's margin multipliers, the weights :math:`u(X)` of a point, an
            LP dual); repaired first.
        upper : float, optional
            The objective of a feasible point (exp: needed for the trace bound when
            :math:`\\bar\\lambda(u) > \\nu`).
        columns : ndarray, shape (d, J), optional
            Directions that seed the anchor search (exp).
        """
        model = self.model
        geom, nu = model.geometry, model.nu
        u = self.repair(u)
        lam, _ = geom.lambda_max_upper(u, eig=self.eig)
        if model.loss == "hinge":
            return DualBound(-lam, u, lam, "hinge: u projected onto U_nu, bound -lambda_max(A(u))")
        if model.loss == "logistic":
            t = 1.0 if lam <= nu else nu / lam
            detail = "logistic: u in [0, 1]" + ("" if t == 1.0 else f", scaled by {t:.12g} into A(u) <= nu I")
            return DualBound(float(np.sum(entr(t * u) + entr(1.0 - t * u))), t * u, t * lam, detail)
        H = float(np.sum(entr(u)))
        if lam <= nu:
            return DualBound(H, u, lam, "exp: u on the simplex with A(u) <= nu I, bound H(u)")
        anchor = self.anchor(columns)
        if anchor is None:
            return DualBound(None, u, lam, f"exp: lambda_max(A(u)) > nu and {self._anchor_detail}")
        u0, lam0, H0 = anchor
        if upper is None or not np.isfinite(upper):
            return DualBound(H0, u0, lam0, f"exp: anchor bound H(u0) ({self._anchor_detail})")
        T = max(0.0, float(upper) - H0) / (nu - lam0)
        lower = H - T * (lam - nu)
        if lower >= H0:
            return DualBound(lower, u, lam, f"exp: lambda_max(A(u)) - nu = {lam - nu:.3g} repaired by "
                                            f"tr X* <= {T:.6g} ({self._anchor_detail})")
        return DualBound(H0, u0, lam0, f"exp: anchor bound H(u0) ({self._anchor_detail})")
