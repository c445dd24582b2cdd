r"""BoostMetric's linear programs: the HiGHS master LP and the column generation of the hinge dual.

Reference: Shen et al. 2012 (JMLR); design §5.6.

:func:`lambda_max_column_generation` solves :math:`\min_{u \in U_c} \lambda_{\max}(\hat A(u))`,
:math:`U_c = \{1^\top u = 1, 0 \le u \le c\}`, by column generation: the restricted master LP
(:class:`MasterLP`, warm-started HiGHS; :func:`solve_restricted_lp` its one-shot form) over the
columns :math:`H_{rj} = \langle A_r, v_j v_j^\top\rangle` found so far, priced by the leading
eigenvectors of :math:`\hat A(u)` (:meth:`cvxmetric.boostmetric.TripletGeometry.top_eigenpair`),
stabilised by Wentges' dual smoothing or a line search (:class:`ColumnGeneration`). It is the hinge
solver's engine (:mod:`cvxmetric.solvers.boostmetric_cg`, cap :math:`\nu`) and the anchor search of
the exponential loss' certificate (cap 1; :class:`cvxmetric.boostmetric.BoostMetricCertifier`
takes it as ``anchor_search``). The geometry, losses and certificate it works with are the core's
(:mod:`cvxmetric.boostmetric`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import highspy
import numpy as np

from cvxmetric._output import foreign_output_redirected
from cvxmetric.boostmetric import TripletGeometry, hinge_value, power_of_two, project_capped_simplex

__all__ = ["LP_OPTIONS", "SMOOTHING", "CG_COLUMNS", "highs_lp", "MasterLP", "solve_restricted_lp",
           "ColumnGeneration", "column_point", "lambda_max_column_generation", "working_set_start",
           "working_set_limit", "check_working_set"]

#: HiGHS's feasibility tolerances are absolute (default 1e-7 on the rescaled LP, whose entries
#: are at most ~1): column generation stalls once the reduced costs of new columns fall below
#: them, measured at a certified gap of 2.9e-6 on iris (p* = 0.035 while max|H| ~ 8). At 1e-10
#: the LP keeps improving down to the round-off of H.
LP_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}

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

