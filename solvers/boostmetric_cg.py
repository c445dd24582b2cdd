r"""BoostMetric with the hinge loss by column generation, with a certified duality gap.

Reference: Shen et al. 2012, sec. 3.1; design §5.6.

The SDP (eq. 5) is :math:`\max_{X, \rho, \xi} \rho - \nu \sum_r \xi_r` s.t. :math:`\langle A_r, X\rangle \ge \rho - \xi_r`,
:math:`\xi \ge 0`, :math:`X \succeq 0`, :math:`\mathrm{tr} X = 1`. By theorem 4, :math:`X = \sum_j w_j v_j v_j^\top`
with unit :math:`v_j`, :math:`w \ge 0`, :math:`1^\top w = 1`, which gives the restricted master LP (eq. 7)

.. math:: \max_{w, \rho, \xi}\ \rho - \nu 1^\top \xi \quad\text{s.t.}\quad H w \ge \rho 1 - \xi,\ 1^\top w = 1,\ w \ge 0,\ \xi \ge 0,

:math:`H_{rj} = \langle A_r, v_j v_j^\top\rangle`, and its dual
:math:`\min_{u, \pi} \pi` s.t. :math:`H^\top u \le \pi 1`, :math:`1^\top u = 1`, :math:`0 \le u \le \nu`.
The SDP's dual is :math:`\min_{u \in U_\nu, \pi} \pi` s.t. :math:`S = \pi I - \hat A(u) \succeq 0`,
:math:`\hat A(u) = \sum_r u_r A_r`. The project minimises, so ``objective`` is :math:`-p(X)`.

Algorithm: column generation from both sides
--------------------------------------------
* **Columns of X** (the paper's; :class:`cvxmetric.solvers.boostmetric_lp.ColumnGeneration`): the master LP
  above, warm-started HiGHS (:class:`cvxmetric.solvers.boostmetric_lp.MasterLP`), priced by the
  ``n_columns`` leading eigenvectors of :math:`\hat A(u_s)` at a stabilized dual point (line
  search on Wentges' weight). Its LP value is a *lower* bound on :math:`p^*` (an inner
  approximation of the spectraplex): good when :math:`X^*` has low rank.
* **Columns of the dual slack S** (:class:`SlackColumnGeneration`, small d only): the same SDP
  dual with :math:`S` restricted to the cone of the slack columns,
  :math:`S = \sum_k \mu_k s_k s_k^\top`, :math:`\mu \ge 0`,

  .. math:: \min_{u \in U_\nu, \pi, \mu \ge 0}\ \pi \quad\text{s.t.}\quad
            \hat A(u) - \pi I + \sum_k \mu_k s_k s_k^\top = 0 ,

  an LP with :math:`d(d+1)/2 + 1` rows. Its :math:`u` is dual feasible with
  :math:`\lambda_{\max}(\hat A(u)) \le \pi`, and the multiplier of its equality rows is a trace-one
  :math:`X` with :math:`s_k^\top X s_k \ge 0` (an outer approximation of the PSD cone); when
  :math:`X` has a negative eigenvalue, the eigenvectors of its negative and small eigenvalues
  (``SLACK_CUT_RTOL``) are the new slack columns. Good when the null
  space of :math:`X^*` is small (:math:`X^*` of high rank), where rank-one columns of X need
  many rounds (measured on circles, :math:`X^*` of rank 8 in d = 10: 99 LPs against 24).

Both LPs hold a working set of triplets (``working_set``, :class:`cvxmetric.solvers.boostmetric_lp.MasterLP`
and :class:`SlackColumnGeneration`): the weights of the triplets of smallest margin, the others
priced in after each LP by their reduced costs (one product with the row duals). A weight left
out is 0, so every dual point stays in :math:`U_\nu`, and both the certificate and the feasible
points are evaluated on all triplets: the working set changes the LPs' cost, never the
certified interval. Measured (540 triplets): the slack LP holds ~290 weights, the X-side LP
~210 (wine: 0.22 s -> 0.13 s, d = 200: 0.78 s -> 0.54 s of CPU).

A scheduler runs the side that has shrunk the certified gap most per unit of LP work (each side
first gets ``SCHEDULE_PROBE`` steps, and the slower side a step now and then, see :class:`_Scheduler`). Both sides feed one incumbent: the best feasible point (the X-side
LP's :math:`X`, or the slack side's :math:`X` projected onto the spectraplex) and the best certified
dual point (which also becomes the X side's stabilization center). The data are first divided by
a power of two (:meth:`cvxmetric.boostmetric.BoostMetricModel.normalized`, exact), so that
every internal number is of order one whatever the feature scale.

Certificate and stopping test (one and the same)
------------------------------------------------
Any :math:`u \in U_\nu = \{1^\top u = 1, 0 \le u \le \nu\}` gives :math:`p^* \le \lambda_{\max}(\hat A(u))`
(:class:`cvxmetric.boostmetric.BoostMetricCertifier`). With :math:`\bar u` the dual point of smallest
certified :math:`\lambda_{\max}` seen and :math:`X` the best feasible point, the minimisation-form
interval is :math:`[-\lambda_{\max}(\hat A(\bar u)), -p(X)]` and the loop stops as soon as its
relative width :func:`cvxmetric.certificates.relative_gap` is at most ``tol``: converged means
certified, the test is invariant under every scaling of the data, and there is no absolute floor.
The loop also stops when neither side finds a new column (``stalled``) or after ``max_iter``
LPs; the result is then converged only if its certified gap is within ``tol`` anyway.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import highspy
import numpy as np

from cvxmetric._checks import check_int_in_range, check_positive
from cvxmetric.boostmetric import (BoostMetricCertifier, TripletGeometry, boostmetric_model, hinge_value, power_of_two,
                                   project_capped_simplex, project_spectraplex)
from cvxmetric.certificates import relative_gap
from cvxmetric.linalg import svec, svec_outer, triu_indices

from .boostmetric_lp import (CG_COLUMNS, LP_OPTIONS, SMOOTHING, ColumnGeneration, check_working_set, column_point,
                             highs_lp, lambda_max_column_generation, working_set_limit, working_set_start)
from .result import SolverResult, make_result

__all__ = ["boostmetric_hinge_cg", "SlackColumnGeneration", "DEFAULT_TOL", "SMOOTHING",
           "SLACK_MAX_D"]

#: Certified relative gap the loop stops at. Measured: reached in 20-100 LPs on the default
#: instances (HiGHS's round-off on H stalls the gap near 1e-9 relative), 10x below the 1e-6 the
#: harness asks for.
DEFAULT_TOL = 1e-7

#: ``slack="auto"`` runs the slack side up to this dimension: its LP has d(d+1)/2 + 1 rows and
#: its slack columns are d x d eigenvectors (528 rows at d = 32, as many as the triplets of the
#: default instances).
SLACK_MAX_D = 32

#: Scheduler: steps each side gets before the scheduler compares them ...
SCHEDULE_PROBE = 2
#: ... and the slower side gets one step after this many steps in a row of the faster one, which
#: must also have cost this many of the slower side's steps (its last measured rate may be stale;
#: doubled each time the slower side stays slower).
SCHEDULE_REFRESH = 5

#: The slack LP's X violates X >= 0 when it has an eigenvalue below
#: -SLACK_NEGATIVE_RTOL * max|eig(X)| (round-off of the LP's multipliers is not a violation) ...
SLACK_NEGATIVE_RTOL = 1e-12
#: ... and then the eigenvectors of all its eigenvalues below SLACK_CUT_RTOL * max|eig(X)| (and
#: their pairs) become slack columns: the negative ones cut X off, the small positive ones are the
#: likely null space of X*, where the optimal slack S* lives. Measured (slack LPs to a 1e-7 gap):
#: iris 26 -> 17, circles 18 -> 17 with 0.1 against the negative ones alone; over 12 smaller
#: instances (iris, wine, circles, n = 40) never more, circles seed 3: 47 -> 38.
SLACK_CUT_RTOL = 0.1

#: HiGHS's ``simplex_strategy`` value of the primal simplex.
HIGHS_PRIMAL_SIMPLEX = 4


def _diagonally_dominant_generators(d: int) -> np.ndarray:
    r"""Unit vectors :math:`e_i` and :math:`(e_i \pm e_j)/\sqrt 2` (i < j), shape (d, d^2): their outer
    products generate the cone of diagonally dominant matrices."""
    i, j = np.triu_indices(d, 1)
    plus = np.zeros((d, i.size))
    plus[i, np.arange(i.size)] = plus[j, np.arange(i.size)] = np.sqrt(0.5)
    minus = plus.copy()
    minus[j, np.arange(i.size)] = -np.sqrt(0.5)
    return np.hstack([np.eye(d), plus, minus])


def _pairs(V: np.ndarray) -> np.ndarray:
    r"""The columns :math:`v_i` of V and :math:`(v_i \pm v_j)/\sqrt 2` (i < j): with the eigenvectors of
    X's negative eigenvalues, slack columns that also cut the 2 x 2 blocks of the violated
    subspace (measured: circles 25 -> 19 slack LPs, iris 28 -> 20)."""
    k = V.shape[1]
    if k < 2:
        return V
    i, j = np.triu_indices(k, 1)
    return np.hstack([V, (V[:, i] + V[:, j]) * np.sqrt(0.5), (V[:, i] - V[:, j]) * np.sqrt(0.5)])


def _symmetric_from_svec(x: np.ndarray, d: int, *, off_diagonal: float = 1.0) -> np.ndarray:
    """The symmetric matrix whose upper triangle (row-major, :func:`cvxmetric.linalg.svec`) is ``x``,
    its off-diagonal entries times ``off_diagonal``."""
    r, c = triu_indices(d)
    v = np.where(r == c, x, x * off_diagonal) if off_diagonal != 1.0 else x
    M = np.empty((d, d))
    M[r, c] = v
    M[c, r] = v
    return M


@dataclass(frozen=True, eq=False)
class SlackStep:
    r"""One step of :class:`SlackColumnGeneration`.

    Attributes
    ----------
    u : ndarray, shape (m,)
        The LP's dual weights, projected onto :math:`U_\nu` (zero outside the LP's triplets;
        certify with :meth:`TripletGeometry.lambda_max_upper`).
    X : ndarray, shape (d, d)
        The multiplier of the equality rows (symmetric, trace one, not necessarily PSD).
    X_projected : ndarray, shape (d, d)
        X projected onto the spectraplex (a feasible point, from the same eigendecomposition).
    A_u : ndarray, shape (d, d)
        :math:`\hat A(u)` (:meth:`SlackColumnGeneration.weighted_sum`).
    margins : ndarray, shape (m,)
        The margins :math:`\rho_r` of ``X_projected`` on all triplets.
    added : bool
        Whether the LP grew: X had a negative eigenvalue (new slack columns) or a triplet outside
        the LP has a negative reduced cost (new triplets).
    """

    u: np.ndarray
    X: np.ndarray
    X_projected: np.ndarray
    A_u: np.ndarray
    margins: np.ndarray
    added: bool


class SlackColumnGeneration:
    r"""Column generation of the dual slack :math:`S = \pi I - \hat A(u)` (see the module docstring).

    The LP, held by one warm-started HiGHS instance (new slack columns are new LP columns: the
    last basis stays primal feasible):

    .. math:: \min_{u, \pi, \mu}\ \pi \quad\text{s.t.}\quad \mathrm{svec}\big(\hat A(u) - \pi I
              + \textstyle\sum_k \mu_k s_k s_k^\top\big) / s = 0,\quad 1^\top u = 1,\quad
              0 \le u \le \nu,\quad \mu \ge 0,

    with :math:`\mathrm{svec}` the upper triangle of :func:`cvxmetric.linalg.svec` (the coefficients
    are :func:`cvxmetric.linalg.svec_outer` rows, so that the multiplier vector of the equality
    rows is :math:`\mathrm{svec}(X)`) and :math:`s` a power of two of the entries' size. The first
    slack columns are :math:`e_i` and :math:`(e_i \pm e_j)/\sqrt 2`, whose cone is the diagonally
    dominant matrices: the LP is then feasible and bounded (:math:`X_{ii} \ge 0`,
    :math:`2|X_{ij}| \le X_{ii} + X_{jj}`, :math:`\mathrm{tr}X = 1`); with the unit vectors alone
    the off-diagonal entries of X are free and the LP unbounded.

    With ``start``, the LP holds only the weights :math:`u_r` of a working set of triplets (the
    others are 0): its :math:`u` is still in :math:`U_\nu` and certified on all triplets. After each
    solve the weights outside it are priced, one product :math:`A\,y` with the row duals
    :math:`y` (reduced cost :math:`-(a_r^\top y_{\text{svec}} / s + y_{1^\top u})`), and up to
    ``WORKING_SET_ADD / nu`` of those with a negative reduced cost enter as new columns (the basis
    stays primal feasible). When none is left the LP is the full one.

    Parameters
    ----------
    geom : TripletGeometry
    cap : float
        :math:`\nu`.
    start : ndarray of int, optional
        The first working set (default: all triplets, no working set). At least 1/cap of them.
    """

    def __init__(self, geom: TripletGeometry, cap: float, *, start: np.ndarray | None = None):
        m, d = geom.m, geom.d
        self.A = -geom.geometry.svec_matrix()          # rho_r(X) = A[r] @ svec(X)
        self.geom, self.cap, self.m, self.d = geom, float(cap), m, d
        self.n_x = self.A.shape[1]
        self.scale = power_of_two(geom.column_bound())
        self.n_lp = 0
        self._h = highs_lp()
        self._inf, self._model_status = highspy.kHighsInf, highspy.HighsModelStatus
        rhs = np.zeros(self.n_x + 1)
        rhs[-1] = 1.0
        none = np.zeros(0, dtype=np.int32)
        self._h.addRows(self.n_x + 1, rhs, rhs, 0, none, none, np.zeros(0))
        self._add_columns(np.append(-svec(np.eye(d)) / self.scale, 0.0)[:, None], np.ones(1),
                          np.full(1, -self._inf), np.full(1, self._inf))              # pi
        self.active = np.zeros(0, dtype=np.int64)      # the triplets in the LP, in column order
        self._u_cols = np.zeros(0, dtype=np.int64)     # their HiGHS columns
        self.add_triplets(check_working_set(start, m, self.cap))
        self.add_slack_columns(_diagonally_dominant_generators(d))

    def add_triplets(self, r: np.ndarray) -> None:
        """Add the weights :math:`0 \\le u_r \\le \\nu` of the triplets ``r`` (not yet in the LP) as columns."""
        k = r.size
        if k == 0:
            return
        first = self._h.getNumCol()
        self._add_columns(np.vstack([self.A[r].T / self.scale, np.ones((1, k))]), np.zeros(k), np.zeros(k),
                          np.full(k, self.cap))
        self.active = np.concatenate([self.active, r])
        self._u_cols = np.concatenate([self._u_cols, np.arange(first, first + k)])

    def _add_columns(self, C: np.ndarray, cost, lower, upper) -> None:
        k = C.shape[1]
        nz = C != 0.0
        counts = nz.sum(axis=0)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
        index = np.nonzero(nz.T)[1].astype(np.int32)          # row indices, column by column
        values = C.T[nz.T]
        self._h.addCols(k, np.asarray(cost, float), np.asarray(lower, float), np.asarray(upper, float),
                        int(values.size), starts, index, values)

    def add_slack_columns(self, S: np.ndarray) -> None:
        r"""Slack columns :math:`\mu_k \ge 0` for the unit vectors :math:`s_k` (columns of S, shape (d, k))."""
        k = S.shape[1]
        self._add_columns(np.vstack([svec_outer(S.T).T / self.scale, np.zeros((1, k))]), np.zeros(k),
                          np.zeros(k), np.full(k, self._inf))

    def step(self) -> SlackStep:
        r"""Solve the LP, add the slack columns its X violates and the triplets it prices in.

        Returns
        -------
        SlackStep

        Raises
        ------
        RuntimeError
            If HiGHS does not report an optimal solution.
        """
        self._h.run()
        status = self._h.getModelStatus()
        if status != self._model_status.kOptimal:
            raise RuntimeError(f"slack LP: HiGHS ended with status {self._h.modelStatusToString(status)}")
        self.n_lp += 1
        if self.n_lp == 1:
            # new slack columns keep the optimal basis primal feasible: re-solve by primal simplex
            # from it (the cold first solve is faster by HiGHS's default dual simplex). Measured on
            # circles: 1.8 ms against 2.2 ms per re-solve, 0.08 s against 0.10-0.13 s in all.
            self._h.setOptionValue("simplex_strategy", HIGHS_PRIMAL_SIMPLEX)
        sol = self._h.getSolution()
        u = np.zeros(self.m)
        u[self.active] = np.asarray(sol.col_value)[self._u_cols]
        u = project_capped_simplex(u, self.cap)
        y = np.asarray(sol.row_dual)
        # stationarity in pi: 1 + svec(I) . y / s = 0, so X = -smat(y / s) has trace one
        X = -_symmetric_from_svec(y[:self.n_x] / self.scale, self.d)
        lam, V = np.linalg.eigh(X)
        size = np.max(np.abs(lam))
        negative = lam < -SLACK_NEGATIVE_RTOL * size
        if np.any(negative):
            self.add_slack_columns(_pairs(V[:, lam < SLACK_CUT_RTOL * size]))
        new = self._price_triplets(y)
        self.add_triplets(new)
        Xp = project_spectraplex(X, eigh=(lam, V))
        return SlackStep(u=u, X=X, X_projected=Xp, A_u=self.weighted_sum(u), margins=self.A @ svec(Xp),
                         added=bool(np.any(negative) or new.size))

    def weighted_sum(self, u: np.ndarray) -> np.ndarray:
        r""":math:`\hat A(u)` from the LP's coefficient rows, :math:`\mathrm{smat}(A^\top u)` (A's rows
        are :func:`cvxmetric.linalg.svec_outer` rows: off-diagonal entries twice). The same m-term
        sums as :meth:`TripletGeometry.weighted_sum`, so the same round-off allowance
        :meth:`TripletGeometry.roundoff` holds; one product instead of two (m, d) products
        (measured 10x cheaper at m = 540, d <= 13)."""
        return _symmetric_from_svec(self.A.T @ u, self.d, off_diagonal=0.5)

    def _price_triplets(self, y: np.ndarray) -> np.ndarray:
        """The triplets outside the LP whose weight has a negative reduced cost at the row duals ``y``."""
        if self.active.size == self.m:
            return self.active[:0]
        rc = -(self.A @ y[:self.n_x] / self.scale + y[-1])
        rc[self.active] = 0.0
        new = np.flatnonzero(rc < -LP_OPTIONS["dual_feasibility_tolerance"])
        k = working_set_limit(self.cap)
        if new.size > k:
            new = new[np.argpartition(rc[new], k - 1)[:k]]
        return np.sort(new)

    @property
    def size(self) -> int:
        """Nonzeros of the LP (the scheduler's measure of a step's work)."""
        return self.n_x * self._h.getNumCol() + self.m


@dataclass
class _Scheduler:
    """Which side runs next: the one that has shrunk log(gap) most per unit of LP work (the
    nonzeros of its LP per step: deterministic, unlike a clock, and proportional to HiGHS's cost
    per solve at these sizes).

    Each side first gets ``SCHEDULE_PROBE`` steps. Afterwards the slower side gets one step
    after ``patience`` steps of the faster one that have also cost ``patience`` times the slower
    side's mean work per step (its rate may be stale, but a costly step is not spent on a
    refresh every few cheap ones: measured on wine, 5 -> 4 slack LPs of ~10 ms each);
    ``patience`` starts at ``SCHEDULE_REFRESH`` and doubles every time such a step does not make
    that side the faster.
    """

    sides: list
    rate: dict = field(default_factory=dict)
    drop: dict = field(default_factory=dict)
    work: dict = field(default_factory=dict)
    steps: dict = field(default_factory=dict)
    run_length: int = 0
    run_work: float = 0.0
    last: str | None = None
    patience: int = SCHEDULE_REFRESH

    def _fastest(self) -> str:
        return max(self.sides, key=lambda s: self.rate.get(s, 0.0))

    def next(self) -> str:
        for side in self.sides:
            if self.steps.get(side, 0) < SCHEDULE_PROBE:
                return side
        best = self._fastest()
        if len(self.sides) > 1 and best == self.last and self.run_length >= self.patience:
            other = next(s for s in self.sides if s != best)
            if self.run_work >= self.patience * self.work[other] / self.steps[other]:
                return other
        return best

    def record(self, side: str, gap_before: float, gap_after: float, work: float) -> None:
        refresh = len(self.sides) > 1 and self.last is not None and side != self.last \
            and all(self.steps.get(s, 0) >= SCHEDULE_PROBE for s in self.sides)
        drop = math.log(gap_before / gap_after) if 0 < gap_after < gap_before < math.inf else 0.0
        self.drop[side] = self.drop.get(side, 0.0) + drop
        self.work[side] = self.work.get(side, 0.0) + work
        self.rate[side] = self.drop[side] / max(self.work[side], 1.0)
        self.steps[side] = self.steps.get(side, 0) + 1
        if refresh and self._fastest() != side:
            self.patience *= 2
        self.run_length = self.run_length + 1 if side == self.last else 1
        self.run_work = self.run_work + work if side == self.last else work
        self.last = side

    def retire(self, side: str) -> None:
        if side in self.sides:
            self.sides.remove(side)


def boostmetric_hinge_cg(X, triplets, nu: float, *, tol: float = DEFAULT_TOL, max_iter: int = 1000,
                         eig: str = "auto", smoothing: float | str = "auto", n_columns: int = CG_COLUMNS,
                         slack: bool | str = "auto", warm: bool = True, working_set: bool = True) -> SolverResult:
    r"""Solve the BoostMetric hinge SDP (eq. 5) by column generation (see the module docstring).

    Parameters
    ----------
    X : array_like, shape (n, d)
    triplets : ConstraintSet or array_like of int, shape (m, 3)
        Rows ``(i, j, k)``: "i closer to j than to k".
    nu : float
        Slack weight, :math:`\nu \ge 1/m` (``nu = 1/K`` maximises the mean of the K smallest margins).
    tol : float
        Certified relative gap to reach (``converged`` iff the returned point's gap is within it).
    max_iter : int
        Maximum number of LP solves (both sides together).
    eig : {"auto", "dense", "lanczos"}
        Eigen-solver of the pricing step (see :meth:`cvxmetric.boostmetric.TripletGeometry.top_eigenpair`).
    smoothing : float in [0, 1), "line-search" or "auto"
        The dual stabilization of the X side (see
        :func:`cvxmetric.solvers.boostmetric_lp.lambda_max_column_generation`): Wentges' fixed :math:`\alpha`
        (0: none), the exact line search on :math:`\alpha`, or ``"auto"`` (the line search up to
        d = ``LINE_SEARCH_MAX_D``, :math:`\alpha` = ``SMOOTHING`` above).
    n_columns : int
        Leading eigenvectors priced per round on the X side.
    slack : bool or "auto"
        Run the slack side too (``"auto"``: when d <= ``SLACK_MAX_D``). ``n_columns=1,
        smoothing=0, slack=False`` is the paper's plain rule (one column per round, the most
        violated eigenvector, no stabilization).
    warm : bool
        Warm start each X-side master LP from the previous basis (False: cold solves).
    working_set : bool
        Both LPs start from the triplets of smallest margin and price the rest in (see
        :class:`cvxmetric.solvers.boostmetric_lp.MasterLP` and :class:`SlackColumnGeneration`; False: all
        triplets from the start). The certificate is on all triplets either way.

    Returns
    -------
    SolverResult
        ``M`` = :math:`X` (PSD, trace 1), ``w`` = column weights of the X side's last LP,
        ``objective`` = :math:`-p(X)`, ``measure`` = ``"certified_gap"``, ``lower_bound`` =
        :math:`-\lambda_{\max}(\hat A(\bar u))` (certified), ``multipliers`` = :math:`\bar u`,
        ``history`` = the X side's LP value :math:`\pi` per LP (paper's sign); ``info``:
        ``columns`` (d, J), ``n_columns``, ``n_mispriced``, ``lp_columns`` / ``lp_slack`` (LPs of
        each side), ``point_from`` (``"columns"`` or ``"slack"``), ``certificate``.
    """
    t0 = time.perf_counter()
    tol = check_positive(tol, "tol")
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**7)
    n_columns = check_int_in_range(n_columns, "n_columns", 1, 10**6)
    if slack not in (True, False, "auto"):
        raise ValueError(f"slack must be True, False or 'auto'; got {slack!r}")
    model = boostmetric_model(X, triplets, loss="hinge", nu=nu)
    twin, c2 = model.normalized()
    geom, nu = twin.geometry, model.nu
    cols = ColumnGeneration.start(geom, nu, smoothing=smoothing, eig=eig, n_columns=n_columns, warm=warm,
                                  working_set=working_set)
    use_slack = slack is True or (slack == "auto" and geom.d <= SLACK_MAX_D)
    slack_cg = None   # built when the scheduler first runs the slack side
    sched = _Scheduler(["columns", "slack"] if use_slack else ["columns"])
    best = {"p": -math.inf, "source": None}   # the best feasible point: its value and where it is
    gap, reason = math.inf, "max_iter"
    for _ in range(max_iter):
        side = sched.next()
        if side == "columns":
            work = cols.lp.size
            added = cols.step()
            p = cols.value()
            if p > best["p"]:
                best.update(p=p, source="columns", cols=cols.cols[:, :cols.w.size], w=cols.w)
        else:
            if slack_cg is None:
                rho = cols.H[:, 0] if cols.w is None else cols.H[:, :cols.w.size] @ cols.w   # the X side's margins
                start = working_set_start(rho, nu) if working_set else None
                slack_cg = SlackColumnGeneration(geom, nu, start=start)
            work = slack_cg.size
            st = slack_cg.step()
            added = st.added
            lam, _ = geom.lambda_max_upper(st.u, eig="dense", A=st.A_u)
            cols.offer_dual(st.u, lam, st.A_u)
            p = hinge_value(st.margins, nu)
            if p > best["p"]:
                best.update(p=p, source="slack", X=st.X_projected)
        new_gap = relative_gap(-best["p"], -cols.lam_best)
        sched.record(side, gap, new_gap, work)
        gap = new_gap
        if gap <= tol:
            reason = "converged"
            break
        if not added:
            sched.retire(side)
            if not sched.sides:
                reason = "stalled"
                break
    Xm = best["X"] if best["source"] == "slack" else column_point(best["cols"], best["w"])
    bound = BoostMetricCertifier(model, eig=eig, anchor_search=lambda_max_column_generation).bound(cols.u_best)
    return make_result("boostmetric-hinge-cg", objective=model.value(Xm), measure="certified_gap", tol=tol,
                       stop_reason=reason, M=Xm, w=cols.w, lower_bound=bound.lower,
                       multipliers=bound.multipliers, n_iter=cols.n_lp + (slack_cg.n_lp if slack_cg else 0),
                       history=c2 * np.asarray(cols.history), time=time.perf_counter() - t0,
                       info={"columns": cols.cols, "n_columns": int(cols.cols.shape[1]),
                             "n_mispriced": cols.n_mispriced, "lp_columns": cols.n_lp,
                             "lp_slack": slack_cg.n_lp if slack_cg else 0, "point_from": best["source"],
                             "certificate": bound.detail})

