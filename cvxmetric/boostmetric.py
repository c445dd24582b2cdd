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
notes); :func:`lambda_max_column_generation` is the column generation of the hinge dual
:math:`\min_{u \in U_\nu} \lambda_{\max}(\hat A(u))`, used by the hinge solver and by the exponential
certificate's anchor. :meth:`BoostMetricModel.normalized` is the exact power-of-two rescaling
the ground truth and the solvers run on. Every tolerance here is relative to the data's scale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import highspy
import numpy as np
from scipy.special import entr, expit, log_expit, logsumexp, softmax

from ._checks import as_data_matrix, check_positive
from ._output import foreign_output_redirected
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
    "solve_restricted_lp",
    "MasterLP",
    "highs_lp",
    "ColumnGeneration",
    "column_point",
    "lambda_max_column_generation",
    "DualBound",
    "BoostMetricCertifier",
    "power_of_two",
    "working_set_start",
    "working_set_limit",
    "check_working_set",
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

#: HiGHS's feasibility tolerances are absolute (default 1e-7 on the rescaled LP, whose entries
#: are at most ~1): column generation stalls once the reduced costs of new columns fall below
#: them, measured at a certified gap of 2.9e-6 on iris (p* = 0.035 while max|H| ~ 8). At 1e-10
#: the LP keeps improving down to the round-off of H.
LP_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}

#: Active-set steps :func:`project_capped_simplex` tries before its sorted search (measured: 1-3
#: steps from the weights of an LP or the eigenvalues of a near-PSD trace-one matrix, 5-20x faster
#: than the sort at m = 540; far-off points fall through to the sort after these few).
CAPPED_NEWTON_STEPS = 4
#: Wentges' dual smoothing weight of :func:`lambda_max_column_generation` (above LINE_SEARCH_MAX_D, or
#: when asked for): price at alpha * u_best + (1 - alpha) * u_LP. Measured on wine (60 points,
#: 540 triplets, nu = 10/m): 277 LPs without smoothing, 133 with 0.5, 115 with 0.7.
SMOOTHING = 0.7

#: The line search on alpha (the default stabilization at small d): rounds of a grid of
#: points refined around the best, each round one batched d x d ``eigvalsh`` (3 x 11 points:
#: resolution 0.004; measured on iris: 57 LPs with alpha = 0.7, 21 with the line search).
LINE_SEARCH_ROUNDS = 3
LINE_SEARCH_POINTS = 11
#: ``smoothing="auto"`` line-searches up to this dimension and uses ``SMOOTHING`` above: the
#: search costs 33 d x d eigenvalue problems per LP, which does not pay at larger d (measured on
#: wine embedded in d dimensions, 1602 triplets, CPU: d = 30: 0.77 s against 0.55 s with
#: alpha = 0.7; d = 200: 3.8 s against 1.0 s).
LINE_SEARCH_MAX_D = 32

#: Columns priced per LP by :func:`lambda_max_column_generation` (the leading eigenvectors of
#: A(u) with a positive reduced cost). Measured on circles (d = 10, 540 triplets) to a 1e-7
#: certified gap (LPs with 1 / 3 / 5 columns, alpha = 0.7, a cold scipy LP): iris
#: 60 / 56 / 57, wine 108 / 66 / 66, circles 354 / 130 / 85 (13 s / 6.6 s / 4.7 s).
CG_COLUMNS = 5

#: Column generation drops a column that has had zero weight in this many consecutive LPs: the
#: LP's cost grows with its columns (HiGHS: ~1 ms per column at m = 540) while an optimal X has
#: few (measured on circles, d = 10: 340 LPs in 60 s without pruning).
PRUNE_IDLE_LPS = 10

#: Triplet working sets of the hinge column generation's LPs (``working_set=True``: the master
#: LP, :class:`MasterLP`, and the slack LP of :mod:`cvxmetric.solvers.boostmetric_cg`): an LP starts
#: from the WORKING_SET_START / nu triplets of smallest margin (3/nu = 162 of the 540 triplets
#: of the default instances) ...
WORKING_SET_START = 3.0
#: ... and after each solve adds at most WORKING_SET_ADD / nu of the triplets outside it whose
#: weight has a negative reduced cost, the most negative first. Adding every such triplet at once
#: re-solved all 540 after the first slack LP (measured on circles: 597 primal simplex
#: iterations, 35 ms, against 200 for the cold full LP); 1/nu per LP grows the slack LP's set to
#: ~290 in 4 LPs.
WORKING_SET_ADD = 1.0
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


def highs_lp() -> "highspy.Highs":
    """A silent HiGHS instance set up for warm re-solves of a growing LP: no presolve (a warm
    restart cannot use a presolved model), no scaling of its own (the callers scale the rows by a
    power of two already; HiGHS's scaling of every re-solve costs more than it saves, measured on
    circles: 0.48 s -> 0.37 s of LP time over 100 LPs) and the tolerances ``LP_OPTIONS``.

    HiGHS prints a banner to the process' stdout when its first instance is created, before
    ``output_flag`` can act: the constructor runs with that output discarded."""
    with foreign_output_redirected():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("presolve", "off")
    h.setOptionValue("simplex_scale_strategy", 0)
    for key, val in LP_OPTIONS.items():
        h.setOptionValue(key, val)
    return h


class MasterLP:
    r"""The restricted master LP of the hinge problem (eq. 7) in dual form, held by one HiGHS
    instance (``highspy``) that is warm started from its last basis.

    Notes
    -----
    The program (one row per column :math:`v_j`, :math:`h_j = H_{:, j}`):

    .. math:: \min_{u, \pi}\ \pi \quad\text{s.t.}\quad h_j^\top u / s \le \pi / s\ (j = 1..J),\quad
              1^\top u = 1,\quad 0 \le u \le \text{cap},

    with :math:`s` a fixed power of two (``scale``) of the size of H, so that HiGHS's absolute
    tolerances act on numbers of order one (the LP is positively homogeneous in H: same u and
    w, value times s; without it an H of size 1e-8 is solved to no digit). The primal weights
    :math:`w_j \ge 0`, :math:`1^\top w = 1` are the multipliers of the J column rows.

    Adding columns adds rows: the previous optimal basis stays dual feasible, so HiGHS's dual
    simplex restarts from it (``warm=True``; measured 3-10x fewer simplex iterations and time
    than a cold solve on the default instances). ``warm=False`` discards the basis before
    every solve (a cold solve of the same LP: the reference the warm path is tested against).
    Dropping columns deletes their rows.

    With ``start``, the LP holds the weights :math:`u_r` of a working set of triplets only (the
    others are 0, so its :math:`u` stays in :math:`U_{\text{cap}}`): :meth:`price_triplets` finds
    the weights outside it with a negative reduced cost :math:`-(y_0 + H_{r,:}\, y / s)` at the
    last row duals (:math:`y_0` of the simplex row, :math:`y` of the column rows), and
    :meth:`add_triplets` adds them as LP columns (the basis stays primal feasible). When none
    is left, the LP is the full restricted master.

    Parameters
    ----------
    m : int
        Number of triplets (LP variables :math:`u`).
    cap : float
        The cap :math:`\nu` on the dual weights (cap = 1: the plain simplex).
    scale : float
        :math:`s`, a power of two (e.g. ``power_of_two(max|H|)``).
    warm : bool
        Restart every solve from the last basis (default) or from scratch.
    start : ndarray of int, optional
        The first working set of triplets (default: all, no working set); at least 1/cap of them.
    """

    def __init__(self, m: int, cap: float, scale: float, *, warm: bool = True, start: np.ndarray | None = None):
        self.m, self.cap, self.scale, self.warm = int(m), float(cap), float(scale), bool(warm)
        self.n_columns = 0
        self.active = check_working_set(start, self.m, self.cap)
        k = self.active.size
        h = highs_lp()
        inf = highspy.kHighsInf
        lower = np.zeros(k + 1)
        upper = np.full(k + 1, self.cap)
        lower[-1], upper[-1] = -inf, inf
        cost = np.zeros(k + 1)
        cost[-1] = 1.0
        none = np.zeros(0, dtype=np.int32)
        h.addCols(k + 1, cost, lower, upper, 0, none, none, np.zeros(0))
        h.addRows(1, np.ones(1), np.ones(1), k, np.zeros(1, dtype=np.int32),
                  np.arange(k, dtype=np.int32), np.ones(k))
        self._u_cols = np.arange(k)     # the HiGHS columns of the active triplets' weights
        self._pi_col = k
        self._y = None                  # the last row duals
        self._h, self._inf, self._model_status = h, inf, highspy.HighsModelStatus

    def add_columns(self, H: np.ndarray) -> None:
        r"""Append columns ``H`` (shape (m, k)) as k rows :math:`h_j^\top u / s - \pi \le 0`."""
        H = np.asarray(H, dtype=np.float64)
        k = H.shape[1]
        if H.shape[0] != self.m or k == 0:
            return
        n = self.active.size
        rows = np.empty((k, n + 1))
        rows[:, :n] = H[self.active].T / self.scale
        rows[:, n] = -1.0
        index = np.append(self._u_cols, self._pi_col).astype(np.int32)
        starts = np.arange(k, dtype=np.int32) * (n + 1)
        self._h.addRows(k, np.full(k, -self._inf), np.zeros(k), rows.size, starts, np.tile(index, k),
                        rows.reshape(-1))
        self.n_columns += k

    def price_triplets(self, H: np.ndarray, limit: int) -> np.ndarray:
        """Up to ``limit`` triplets outside the working set whose weight has a negative reduced cost
        at the last solve's row duals, the most negative first (``H``: the columns of that solve's
        rows, shape (m, J))."""
        if self.active.size == self.m or self._y is None:
            return np.zeros(0, dtype=np.int64)
        y0, y = self._y[0], self._y[1:]
        rc = -(y0 + H @ y / self.scale)
        rc[self.active] = 0.0
        new = np.flatnonzero(rc < -LP_OPTIONS["dual_feasibility_tolerance"])
        if new.size > limit:
            new = new[np.argpartition(rc[new], limit - 1)[:limit]]
        return np.sort(new)

    def add_triplets(self, r: np.ndarray, H: np.ndarray) -> None:
        """Add the weights of triplets ``r`` (outside the working set) as LP columns; ``H``: the
        columns of the LP's current rows, shape (m, J)."""
        k = r.size
        if k == 0:
            return
        J = H.shape[1]
        values = np.empty((k, J + 1))
        values[:, 0] = 1.0                      # the simplex row
        values[:, 1:] = H[r] / self.scale       # the column rows
        first = self._h.getNumCol()
        self._h.addCols(k, np.zeros(k), np.zeros(k), np.full(k, self.cap), values.size,
                        (np.arange(k) * (J + 1)).astype(np.int32), np.tile(np.arange(J + 1, dtype=np.int32), k),
                        values.reshape(-1))
        self.active = np.concatenate([self.active, r])
        self._u_cols = np.concatenate([self._u_cols, np.arange(first, first + k)])

    @property
    def size(self) -> int:
        """Nonzeros of the LP: (weights + 1) per column row, plus the simplex row."""
        return (self.active.size + 1) * self.n_columns + self.active.size

    def keep_columns(self, keep: np.ndarray) -> None:
        """Delete the rows of the columns with ``keep[j] == False``."""
        drop = np.flatnonzero(~np.asarray(keep, dtype=bool))
        if drop.size:
            self._h.deleteRows(int(drop.size), (drop + 1).astype(np.int32))
            self.n_columns -= int(drop.size)

    def solve(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Solve; return ``(w, u, pi)`` as :func:`solve_restricted_lp`.

        Raises
        ------
        RuntimeError
            If HiGHS does not report an optimal solution or returns no primal weights.
        """
        if not self.warm:
            self._h.clearSolver()
        self._h.run()
        status = self._h.getModelStatus()
        if status != self._model_status.kOptimal:
            raise RuntimeError(f"master LP: HiGHS ended with status {self._h.modelStatusToString(status)}")
        sol = self._h.getSolution()
        self._y = np.asarray(sol.row_dual)
        w = np.maximum(-self._y[1:], 0.0)
        if w.sum() <= 0:
            raise RuntimeError("master LP: HiGHS returned no primal weights (all column multipliers are 0)")
        u = np.zeros(self.m)
        u[self.active] = np.asarray(sol.col_value)[self._u_cols]
        u = project_capped_simplex(u, self.cap)
        return w / w.sum(), u, float(self._h.getInfo().objective_function_value) * self.scale


def solve_restricted_lp(H: np.ndarray, cap: float) -> tuple[np.ndarray, np.ndarray, float]:
    r"""The restricted master LP of the hinge problem (eq. 7) and its dual, by HiGHS (one cold solve
    of :class:`MasterLP` with :math:`s` the power of two nearest to :math:`\max|H|`).

    HiGHS solves the dual form :math:`\min_{u, \pi} \pi` s.t. :math:`H^\top u \le \pi 1`,
    :math:`1^\top u = 1`, :math:`0 \le u \le \text{cap}` (J + 1 rows instead of m: measured 10x
    faster than the primal form at m = 1600, J = 200); the primal weights :math:`w` are the
    multipliers of the J column rows.

    Parameters
    ----------
    H : ndarray, shape (m, J)
        :math:`H_{rj} = \langle A_r, v_j v_j^\top\rangle`.
    cap : float
        The cap :math:`\nu` on the dual weights (cap = 1: the plain simplex).

    Returns
    -------
    w : ndarray, shape (J,)
        Column weights (:math:`w \ge 0`, :math:`1^\top w = 1`).
    u : ndarray, shape (m,)
        Dual weights, projected onto :math:`U_{\text{cap}}` (removes HiGHS's round-off).
    value : float
        The LP value :math:`\pi` (paper's sign: the restricted maximum of eq. 7).

    Raises
    ------
    RuntimeError
        If HiGHS does not report an optimal solution.
    """
    H = np.asarray(H, dtype=np.float64)
    lp = MasterLP(H.shape[0], cap, power_of_two(float(np.max(np.abs(H)))), warm=False)
    lp.add_columns(H)
    return lp.solve()


def _stabilization_weight(A_best: np.ndarray, A_u: np.ndarray) -> float:
    r"""The :math:`\alpha \in [0, 1]` minimising :math:`\lambda_{\max}(\alpha \hat A(u_{\text{best}}) + (1 - \alpha)\hat A(u))`.

    The function is convex in :math:`\alpha` (:math:`\hat A` is linear in u, :math:`\lambda_{\max}`
    convex), so a grid refined around its best point converges to the minimiser: each of
    ``LINE_SEARCH_ROUNDS`` rounds evaluates ``LINE_SEARCH_POINTS`` values in one batched
    ``eigvalsh`` and keeps the two cells around the best (resolution :math:`(2/10)^{3}/2`).
    """
    lo, hi = 0.0, 1.0
    best = 1.0
    for _ in range(LINE_SEARCH_ROUNDS):
        alphas = np.linspace(lo, hi, LINE_SEARCH_POINTS)
        lam = np.linalg.eigvalsh(alphas[:, None, None] * A_best + (1.0 - alphas)[:, None, None] * A_u)[:, -1]
        i = int(np.argmin(lam))
        best = float(alphas[i])
        step = alphas[1] - alphas[0]
        lo, hi = max(0.0, best - step), min(1.0, best + step)
    return best


def _stabilization(smoothing, d: int) -> float | None:
    """The fixed smoothing weight, or None for the line search (see :func:`lambda_max_column_generation`)."""
    if smoothing == "auto":
        return None if d <= LINE_SEARCH_MAX_D else SMOOTHING
    if smoothing == "line-search":
        return None
    if isinstance(smoothing, str):
        raise ValueError(f"smoothing must be 'auto', 'line-search' or a number in [0, 1); got {smoothing!r}")
    alpha = float(smoothing)
    if not (0.0 <= alpha < 1.0):
        raise ValueError(f"smoothing must be in [0, 1) (0: the paper's plain rule); got {smoothing}")
    return alpha


def working_set_start(rho: np.ndarray, cap: float) -> np.ndarray:
    """A first working set of triplets: the ``WORKING_SET_START / cap`` of smallest margin ``rho``
    (at least the 1/cap that the weights need: their sum is 1 under the cap), sorted."""
    k = min(rho.size, math.ceil(WORKING_SET_START / cap))
    return np.sort(np.argpartition(rho, k - 1)[:k])


def check_working_set(start, m: int, cap: float) -> np.ndarray:
    """``start`` as a sorted array of distinct triplet indices, or all m of them if None.

    Raises
    ------
    ValueError
        An index out of range, or fewer than 1/cap triplets (their weights, capped at cap,
        could not sum to 1: the LP would be infeasible).
    """
    if start is None:
        return np.arange(m)
    r = np.unique(np.asarray(start, dtype=np.int64).reshape(-1))
    if r.size and (r[0] < 0 or r[-1] >= m):
        raise ValueError(f"start holds triplet indices outside [0, {m}); give indices of the LP's triplets")
    if r.size * cap < 1.0 - 1e-12:
        raise ValueError(f"start holds {r.size} triplets, fewer than 1/cap = {1.0 / cap:.6g}: their weights "
                         "cannot sum to 1; start from at least that many (e.g. working_set_start)")
    return r


def working_set_limit(cap: float) -> int:
    """The most triplets a working set takes in per solve: ``WORKING_SET_ADD / cap``."""
    return math.ceil(WORKING_SET_ADD / cap)


def column_point(V: np.ndarray, w: np.ndarray) -> np.ndarray:
    r""":math:`X = \sum_j w_j v_j v_j^\top`, normalised to trace one (PSD): the point of column weights
    ``w`` (shape (J,)) on unit columns ``V`` (shape (d, J))."""
    keep = w > 0
    X = (V[:, keep] * w[keep]) @ V[:, keep].T
    X = 0.5 * (X + X.T)
    return X / np.trace(X)


@dataclass(eq=False)
class ColumnGeneration:
    r"""State of the column generation of :func:`lambda_max_column_generation`, one
    :meth:`step` per master LP.

    Attributes
    ----------
    geom : TripletGeometry
    cap : float
    cols : ndarray, shape (d, J)
        Unit columns :math:`v_j` (the last ones may have been priced after the last LP).
    H : ndarray, shape (m, J)
        :math:`H_{rj} = \langle A_r, v_j v_j^\top\rangle`.
    lp : MasterLP
        The master LP over the columns (its rows follow ``cols``).
    w, u, pi
        The last LP's column weights (over the first ``w.size`` columns), dual weights and value.
    u_best : ndarray, shape (m,)
        The dual point with the smallest certified :math:`\lambda_{\max}(\hat A(u))` seen.
    lam_best : float
        That certified upper bound (:meth:`TripletGeometry.lambda_max_upper`).
    n_lp, n_mispriced : int
        LPs solved, and stabilized pricings that gave no improving column.
    history : list of float
        LP value per LP.
    reason : str
        ``"stop"`` (the caller's test held), ``"stalled"`` (no improving column at the LP's own
        dual point: the restricted LP is optimal up to round-off) or ``"max_iter"``.
    eig : {"dense", "lanczos"}
        The eigen-solver of the pricing step (resolved from ``"auto"``).
    alpha : float or None
        Wentges' fixed smoothing weight, or None for the line search (then ``A_best`` is
        :math:`\hat A(u_{\text{best}})`, dense).
    n_columns : int
    """

    geom: TripletGeometry
    cap: float
    cols: np.ndarray
    H: np.ndarray
    lp: MasterLP
    u_best: np.ndarray
    lam_best: float
    eig: str = "dense"
    alpha: float | None = SMOOTHING
    n_columns: int = CG_COLUMNS
    A_best: np.ndarray | None = None
    idle: np.ndarray | None = None
    w: np.ndarray | None = None
    u: np.ndarray | None = None
    pi: float = -np.inf
    n_lp: int = 0
    n_mispriced: int = 0
    history: list = field(default_factory=list)
    reason: str = ""

    @classmethod
    def start(cls, geom: TripletGeometry, cap: float, *, smoothing: float | str = "auto", eig: str = "auto",
              V0: np.ndarray | None = None, n_columns: int = CG_COLUMNS, warm: bool = True,
              working_set: bool = False) -> "ColumnGeneration":
        """The state before the first LP: the top eigenvector at uniform u (and ``V0``) as columns
        (``working_set``: the master LP starts from the triplets of smallest mean margin on them,
        :func:`working_set_start`, and prices the others in after each LP)."""
        m = geom.m
        path = geom.eig_method(eig)
        alpha = _stabilization(smoothing, geom.d)
        u0 = np.full(m, 1.0 / m)
        lam, v = geom.lambda_max_upper(u0, eig=path)
        cols = v if V0 is None or V0.size == 0 else np.column_stack([V0, v])
        H = geom.columns(cols)
        start = working_set_start(H.mean(axis=1), cap) if working_set else None
        lp = MasterLP(m, cap, power_of_two(geom.column_bound()), warm=warm, start=start)
        lp.add_columns(H)
        return cls(geom=geom, cap=cap, cols=cols, H=H, lp=lp, u_best=u0, lam_best=lam, eig=path,
                   alpha=alpha, n_columns=int(n_columns), A_best=geom.weighted_sum(u0) if alpha is None else None,
                   idle=np.zeros(cols.shape[1], dtype=np.int64))

    def offer_dual(self, u: np.ndarray, lam: float, A_u: np.ndarray | None = None) -> None:
        r"""Take ``u`` as the stabilization center if its certified :math:`\lambda_{\max}` bound ``lam``
        is the best seen (``A_u`` = :math:`\hat A(u)` if known)."""
        if lam < self.lam_best:
            self.lam_best, self.u_best = float(lam), u
            if self.alpha is None:
                self.A_best = self.geom.weighted_sum(u) if A_u is None else A_u

    def step(self) -> bool:
        """One master LP and one pricing round of columns (and of triplets, with a working set);
        returns whether the LP grew (improving columns or triplets were added)."""
        geom = self.geom
        w, u, pi = self.lp.solve()
        triplets = self.lp.price_triplets(self.H, working_set_limit(self.cap))
        self.idle = np.where(w > 0, 0, self.idle + 1)
        keep = self.idle <= PRUNE_IDLE_LPS
        if not np.all(keep):   # the LP optimum keeps its columns, so pi cannot decrease
            self.lp.keep_columns(keep)
            self.cols, self.H, w, self.idle = self.cols[:, keep], self.H[:, keep], w[keep], self.idle[keep]
        self.lp.add_triplets(triplets, self.H)
        self.w, self.u, self.pi = w, u, pi
        self.n_lp += 1
        self.history.append(pi)
        A_u = geom.weighted_sum(u) if self.alpha is None else None
        alpha = _stabilization_weight(self.A_best, A_u) if self.alpha is None else self.alpha
        while True:
            u_s = alpha * self.u_best + (1.0 - alpha) * u
            A_s = None if A_u is None else alpha * self.A_best + (1.0 - alpha) * A_u
            lam, V = geom.lambda_max_upper(u_s, eig=self.eig, v0=self.cols[:, int(np.argmax(w))],
                                           n_vectors=self.n_columns, A=A_s)
            self.offer_dual(u_s, lam, A_s)
            h = geom.columns(V)
            improving = h.T @ u - pi > geom.roundoff(u)
            if np.any(improving) or alpha == 0.0:
                break
            alpha = 0.0  # mis-pricing: the stabilized point gave no improving column; price at u
            self.n_mispriced += 1
        if not np.any(improving):
            return triplets.size > 0
        self.add_columns(V[:, improving], h[:, improving])
        return True

    def add_columns(self, V: np.ndarray, H: np.ndarray | None = None) -> None:
        """Add unit columns ``V`` (shape (d, k); ``H`` = :meth:`TripletGeometry.columns` of them if known)."""
        H = self.geom.columns(V) if H is None else H
        self.lp.add_columns(H)
        self.cols = np.column_stack([self.cols, V])
        self.H = np.column_stack([self.H, H])
        self.idle = np.append(self.idle, np.zeros(V.shape[1], dtype=np.int64))

    def value(self) -> float:
        r"""The paper's hinge value :math:`p(X)` of the last LP's point (its margins :math:`H w`)."""
        return hinge_value(self.H[:, :self.w.size] @ self.w, self.cap)


def lambda_max_column_generation(geom: TripletGeometry, cap: float, *, stop, max_lp: int,
                                 smoothing: float | str = "auto", eig: str = "auto",
                                 V0: np.ndarray | None = None, n_columns: int = CG_COLUMNS,
                                 warm: bool = True) -> ColumnGeneration:
    r""":math:`\min_{u \in U_{\text{cap}}} \lambda_{\max}(\hat A(u))` by LP column generation (design §5.6).

    This is the dual of the hinge SDP (eq. 5) with :math:`\nu` = ``cap``, and with cap = 1 the
    best trace-one worst margin :math:`\lambda^* = \max_{\mathrm{tr}X = 1, X \succeq 0} \min_r \rho_r(X)`
    (the exponential-loss problem is bounded below iff :math:`\nu \ge \lambda^*`).

    Each iteration solves the restricted LP over the columns (:class:`MasterLP`, warm started
    from the previous basis) and prices new columns: the ``n_columns`` leading eigenvectors of
    :math:`\hat A(u_s)` at a stabilized dual point :math:`u_s = \alpha u_{\text{best}} + (1 - \alpha) u`
    (plain column generation tails off: HiGHS returns arbitrary vertices of degenerate dual faces
    and the pricing zig-zags), of which those with a positive reduced cost at the LP's :math:`u`
    (above :meth:`TripletGeometry.roundoff`) enter. :math:`\alpha` is Wentges' fixed weight, or
    the exact line search :math:`\alpha = \arg\min_{[0, 1]} \lambda_{\max}(\hat A(u_s))` (a convex
    function of :math:`\alpha`; small d only). When no column priced at :math:`u_s`
    improves the LP, it prices at :math:`u` itself. Columns without weight for
    ``PRUNE_IDLE_LPS`` LPs leave. :math:`\lambda_{\max}(\hat A(u_{\text{best}}))` is an upper bound
    and the LP value a lower bound on the minimum.

    Parameters
    ----------
    geom : TripletGeometry
    cap : float
        :math:`\nu`, at least 1/m.
    stop : callable
        ``stop(state) -> bool``, called after every LP and pricing step.
    max_lp : int
    smoothing : float in [0, 1), "line-search" or "auto"
        The stabilization: Wentges' fixed :math:`\alpha` (0: none, the paper's plain rule), the
        line search, or ``"auto"``: the line search up to d = ``LINE_SEARCH_MAX_D``, ``SMOOTHING`` above.
    eig : {"auto", "dense", "lanczos"}
    V0 : ndarray, shape (d, J0), optional
        Initial unit columns (e.g. a solver's), added to the top eigenvector at uniform u.
    n_columns : int
        Leading eigenvectors priced per LP (1 is the paper's rule).
    warm : bool
        Warm start every LP from the previous basis (False: a cold solve each time, the same LPs).

    Returns
    -------
    ColumnGeneration
    """
    st = ColumnGeneration.start(geom, cap, smoothing=smoothing, eig=eig, V0=V0, n_columns=n_columns, warm=warm)
    for _ in range(max_lp):
        added = st.step()
        if stop(st):
            st.reason = "stop"
            return st
        if not added:
            st.reason = "stalled"
            return st
    st.reason = "max_iter"
    return st


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

        With :math:`c^2` = :meth:`TripletGeometry.data_scale` the twin's margins are
        :math:`\rho(X) / c^2`, of order :math:`\mathrm{tr}X`. What is exactly invariant:

        * hinge: the objective is positively homogeneous in the margins and :math:`\mathrm{tr}X = 1`
          is kept, so with the same :math:`\nu`, ``value(X) == c2 * twin.value(X)`` (same point);
        * exp / logistic: :math:`\text{loss}(\rho(X)/c^2) + (\nu/c^2)\,\mathrm{tr}X = f(X / c^2)`, so the
          twin has :math:`\nu / c^2` and ``twin.value(P) == value(P / c2)`` (values equal, points
          divided by :math:`c^2`). Hence data scaled by s with :math:`\nu` scaled by :math:`s^2` is the
          same problem (points divided by :math:`s^2`), and so is its twin.

        Returns
        -------
        twin : BoostMetricModel
        c2 : float
            :math:`c^2` (a power of four).
        """
        c2 = self.geometry.data_scale()
        c = float(np.sqrt(c2))
        geom = TripletGeometry(self.geometry.X / c, self.geometry.triplets)
        nu = self.nu if self.loss == "hinge" else self.nu / c2
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

      The anchor is found once by :func:`lambda_max_column_generation` with cap 1 (seeded with
      the caller's columns), which stops when its slack :math:`\nu - \lambda_0` is at least
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

    def __init__(self, model: BoostMetricModel, *, eig: str = "auto"):
        self.model = model
        self.eig = eig
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
        if self._anchor is None:
            nu = self.model.nu

            def stop(st):
                return st.pi >= nu or (st.lam_best < nu and nu - st.lam_best >= ANCHOR_SLACK_FRACTION * (nu - st.pi))

            st = lambda_max_column_generation(self.model.geometry, 1.0, stop=stop, max_lp=ANCHOR_MAX_LP,
                                              eig=self.eig, V0=columns)
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
