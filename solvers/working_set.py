r"""Working sets with certificates for every hinge model: PDHG on the constraints that matter.

The problem is the :class:`~cvxmetric.models.HingeModel` program over a (possibly huge, possibly
implicit) constraint set :math:`\mathcal{C}`:

.. math::
    p^* = \min_{M \succeq 0}\ f(M) = \langle R, M\rangle + \tfrac q2 \|M\|_F^2
        + \sum_{c \in \mathcal{C}} c_c\,[t_c(M)]_+ , \qquad t_c(M) = \delta_c + \langle M, A_c\rangle .

At the optimum only the constraints near or past the margin carry a multiplier, so the solver
keeps a **working set** :math:`W \subseteq \mathcal{C}` and runs restarted PDHG
(:func:`cvxmetric.solvers.pdhg.pdhg`) on the restricted model :math:`f_W` (the same linear and
quadratic terms, hinge terms on :math:`W` only). PDHG's state carries over from round to round
(:meth:`cvxmetric.solvers.pdhg.PDHGState.rebind`: the iterate, its multipliers extended by zeros
for the added constraints, step size, primal weight, step-weighted average, restart and repair
bookkeeping), so a round continues the previous one instead of starting cold. Each round ends with
one **full pass** over :math:`\mathcal{C}` at the round's best point :math:`M` (a
:class:`ConstraintPool`'s ``scan``; the start gets one too):

* it computes the full objective :math:`f(M)` exactly (the upper bound);
* it **adds** the constraints outside :math:`W` with :math:`t_c(M) > -s\,\bar\delta` (``slack``
  :math:`s` times the margin scale :math:`\bar\delta = \max_c |\delta_c|`: near or past the
  margin), the largest :math:`t_c` first, at most ``max(max_add, |W|)`` per pass;
* it **drops** the constraints of :math:`W` that were far from the margin
  (:math:`t_c(M) \le -s\bar\delta`) with a zero multiplier at ``drop_after`` consecutive passes.
  A dropped constraint that becomes violated again is found, and re-added, by the next pass.

So the cost of a PDHG iteration follows :math:`|W|`, not :math:`|\mathcal{C}|`; the full pass
costs about one operator application over :math:`\mathcal{C}` and runs once per round
(``round_iter`` PDHG iterations, doubled whenever the pass found no violated constraint outside
:math:`W`: then only the accuracy of the restricted solve is missing).

**Certificate of the full problem.** For every multiplier :math:`y \in [0, c]^{\mathcal{C}}` and
every :math:`M \succeq 0`, :math:`c_c[t]_+ \ge y_c t` gives the weak-duality bound of
:meth:`cvxmetric.models.HingeModel.dual_bound`. PDHG's multipliers on :math:`W`, extended by
**zero outside** :math:`W`, are such a :math:`y`, and with zeros outside :math:`W` the dual
matrix :math:`S = R + K^* y` and :math:`\delta^\top y` are those of the restricted model: the bound
is the full model's dual bound at the zero-padded multiplier (:meth:`ConstraintPool.full_bound`,
with the full objective of the best point as ``upper``, so the trace bound is one of the full
problem). PDHG's own bound of the restricted problem is valid too, since
:math:`p^*_W \le p^*` (the restriction only drops non-negative terms). The best bound over all
rounds is kept (:math:`p^*` does not change), as is the point with the lowest full objective.
The result (:func:`cvxmetric.solvers.result.make_result`) has ``measure == "certified_gap"``:
:func:`cvxmetric.certificates.relative_gap` of that objective and that bound, held to
``tol``. The loop stops by PDHG's own rule, read on the full problem: the full
certified gap is at most ``min(residual_tol, tol)``, or the restricted solve stopped (its relative KKT
residual within ``residual_tol``), no constraint outside :math:`W` is violated and the full certified
gap is at most ``tol``. Where no bound exists (q = 0, R singular
on the data span and no repaired multiplier dual feasible; see
:mod:`cvxmetric.solvers.pdhg`) the measure is the restricted problem's relative KKT residual,
which equals the full problem's when no constraint outside :math:`W` is violated (each such
constraint adds :math:`c_c[t_c]_+ - 0 \cdot t_c = 0` to the Lagrangian gap); it is infinite otherwise.

Two pools exist: :class:`ModelPool` (the rows of an explicit HingeModel: Qwise, the Fantope
convex bound, LMNN's materialised model) and :class:`ImpostorPool` (LMNN's implicit triplet set,
listed by :class:`cvxmetric.lmnn.ImpostorSearch`); :func:`solve_working_set` is the one loop.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from cvxmetric._checks import (as_square_symmetric, check_int_in_range, check_nonnegative, check_positive,
                               keyword_options)
from cvxmetric.certificates import relative_gap
from cvxmetric.constraints import ConstraintSet
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.lmnn import ImpostorSearch, lmnn_pull_model, too_many_triplets_message
from cvxmetric.linalg import psd_factor
from cvxmetric.models import HingeModel

from .pdhg import DEFAULT_TOL, RESIDUAL_TOL_FRACTION, pdhg, start_state
from .result import ENGINE_HOOKS, SolverResult, make_result

__all__ = ["solve_working_set", "WORKING_SET_OPTIONS", "ConstraintPool", "ModelPool", "ImpostorPool", "Scan", "WorkingSet",
           "largest_margins", "positions", "sorted_union",
           "WS_SLACK", "DROP_AFTER", "ROUND_ITER", "MAX_ROUNDS", "MAX_ADD", "MAX_START_HALVINGS"]

#: A constraint counts as near the margin when :math:`t_c > -` ``WS_SLACK`` :math:`\bar\delta`:
#: such constraints tend to become violated in the next round; adding them early saves rounds.
WS_SLACK = 0.1
#: A constraint of W far from the margin with a zero multiplier at this many consecutive full
#: passes is dropped (0: never drop). Two passes keep a constraint that only briefly left the
#: margin (PDHG's iterates oscillate around the optimal face), while constraints left behind by the
#: first, rough rounds stop costing anything.
DROP_AFTER = 2
#: PDHG iterations of the first round; doubled after every round whose full pass found no
#: violated constraint outside W (only the restricted solve's accuracy is then missing). Short
#: first rounds pay: the restricted optimum of a small W lies far outside W's region (digits'
#: LMNN, tol 1e-2, PDHG checks every 16 iterations: 16 per round 86 s, 64 per round 135 s, on a
#: loaded machine; the work, sum over rounds of |W| x iterations, 11.1e6 vs 13.4e6).
ROUND_ITER = 16
#: Limit on the rounds (full passes).
MAX_ROUNDS = 50
#: Cap on the constraints one pass adds (the largest margins first; at least |W|, so W may double
#: per pass); 0 means no cap. Without a cap, LMNN's first pass on digits (the triplets violated at
#: the identity: 2,000; the restricted optimum then violates hundreds of thousands) makes one
#: PDHG iteration cost seconds. It also bounds the first working set of a start where every
#: constraint is violated (Qwise at M = 0).
MAX_ADD = 2000
#: A start at which no constraint is near the margin (LMNN with a large M0) is shrunk by halves
#: until one is, at most this many times (2^-200: any data scale a float holds); a relative rule.
MAX_START_HALVINGS = 200


@dataclass(frozen=True)
class Scan:
    """One full pass at a point: the constraints near or past the margin and the full objective.

    ``ids`` (sorted, int64) identify constraints of the pool, ``margins`` their
    :math:`t_c(M) = \\delta_c + \\langle M, A_c\\rangle` (aligned), ``value`` the full objective
    :math:`f(M)`. Every constraint with :math:`t_c > -` ``slack`` :math:`\\bar\\delta` is listed
    (the violated ones in particular, so ``value`` is exact).
    """

    ids: np.ndarray
    margins: np.ndarray
    value: float


class ConstraintPool:
    """The full constraint set of a hinge problem, as a working set sees it.

    Subclasses implement :meth:`scan`, :meth:`submodel`, :meth:`full_bound` and :meth:`initial`;
    ``slack`` and ``margin_scale`` (:math:`\\bar\\delta`) define "near the margin"; ``d`` is the dimension.
    """

    slack: float
    margin_scale: float
    d: int

    def scan(self, M: np.ndarray) -> Scan:
        raise NotImplementedError

    def submodel(self, ids: np.ndarray) -> HingeModel:
        """The restricted HingeModel over the constraints ``ids`` (rows in ``ids`` order)."""
        raise NotImplementedError

    def full_bound(self, sub: HingeModel, ids: np.ndarray, y: np.ndarray, upper: float) -> Optional[float]:
        """The full problem's dual bound at the multiplier ``y`` on the rows ``ids`` of ``sub``, zero elsewhere."""
        raise NotImplementedError

    def initial(self, M0: np.ndarray, scan: Scan, max_add: int) -> np.ndarray:
        """The first working set at the start ``M0`` (never empty), from the pass ``scan`` at ``M0``."""
        raise NotImplementedError

    def reference_value(self) -> float:
        """The full objective at M = 0 (every constraint at its margin): the scale a zero optimum is
        certified against (:func:`cvxmetric.certificates.relative_gap`'s ``reference``)."""
        raise NotImplementedError

    def trivial_bound(self) -> Optional[float]:
        """A lower bound known before any solve (the dual bound at y = 0), or None."""
        return None

    @property
    def threshold(self) -> float:
        """:math:`-s\\bar\\delta`: constraints with a larger margin value are near the margin."""
        return -self.slack * self.margin_scale


class ModelPool(ConstraintPool):
    r"""The rows of an explicit :class:`~cvxmetric.models.HingeModel` (ids are row indices).

    A scan computes :math:`t = \delta + KM` for all rows (one operator pass, :math:`O(m d^2)`);
    the full bound is :meth:`HingeModel.certify` of the full model at the zero-padded multiplier
    (its :math:`K^* y` taken from the restricted model, :math:`O(|W| d^2)`).
    """

    def __init__(self, model: HingeModel, slack: float = WS_SLACK):
        if not isinstance(model, HingeModel):
            raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
        if model.m == 0:
            raise ValueError("model has no constraints; a working set needs at least one hinge term")
        self.model = model
        self.d = model.d
        self.slack = check_nonnegative(slack, "ws_slack")
        self.margin_scale = float(np.max(np.abs(model.constraints.delta)))

    def _near(self, t: np.ndarray) -> np.ndarray:
        # all margins zero (no scale): "near" means on or past the margin
        return t >= 0.0 if self.margin_scale == 0.0 else t > self.threshold

    def scan(self, M):
        t = self.model.margins(M)
        value = self.model.regularizer(M) + float(self.model.coef @ np.maximum(t, 0.0))
        ids = np.flatnonzero(self._near(t))
        return Scan(ids, t[ids], value)

    def submodel(self, ids):
        return self.model.subset(ids)

    def full_bound(self, sub, ids, y, upper):
        full = np.zeros(self.model.m)
        full[ids] = y
        Ky = sub.geometry.weighted_sum(np.clip(y, 0.0, sub.coef))
        return self.model.certify(full, upper, Ky=Ky, repair_steps=0)[0]

    def reference_value(self) -> float:
        return float(self.model.coef @ np.maximum(self.model.constraints.delta, 0.0))

    def initial(self, M0, scan, max_add):
        if scan.ids.size:
            return largest_margins(scan.ids, scan.margins, max_add)
        # nothing near the margin at M0: the largest margins of all rows (one more operator pass)
        return largest_margins(np.arange(self.model.m), self.model.margins(M0), max_add or self.model.m)


class ImpostorPool(ConstraintPool):
    r"""LMNN's implicit triplet set (ids are :class:`~cvxmetric.lmnn.ImpostorSearch` codes).

    A scan is an impostor search at the margin :math:`(1 + s)\,\text{margin}` (the triplets with
    :math:`t > -s\,\text{margin}`), from a factor of M; the full objective is the pull term plus the
    hinge terms of the violated triplets found. The restricted model is LMNN's pull model over
    the decoded triplets, built from the previous one (its rows kept, the new triplets appended,
    the rows put back in id order), so the rows' Frobenius norms are computed once per triplet.
    Its linear term and data are the full model's and LMNN's triplets contain no similar pair,
    so the restricted model's :meth:`HingeModel.certify` at ``upper = f(M)`` *is* the full model's dual bound at the zero-padded multiplier.
    """

    def __init__(self, search: ImpostorSearch, regularization: float, slack: float = WS_SLACK,
                 max_triplets: Optional[int] = None):
        self.search = search
        self.d = search.X.shape[1]
        self.regularization = float(regularization)
        self.slack = check_nonnegative(slack, "ws_slack")
        self.margin_scale = search.margin
        self.max_triplets = max_triplets
        self.wide = search if self.slack == 0 else ImpostorSearch(
            search.X, search.y, search.n_neighbors, margin=search.margin * (1.0 + self.slack),
            chunk_elements=search.chunk_elements, targets=search.targets)
        self._empty = lmnn_pull_model(search.X, search.target_pairs, self.regularization)
        self._last_factor = np.eye(search.X.shape[1])
        # the last restricted model and its ids: the next one reuses its rows (their Frobenius
        # norms, an O(d) gather per row, are PDHG's row scaling and do not change)
        self._last_sub = (None, np.zeros(0, dtype=np.int64))

    def scan(self, M):
        L = psd_factor(M)
        self._last_factor = L
        codes, wide = self.wide.violated_codes(L, return_margins=True)
        t = wide - self.slack * self.search.margin
        value = self._pull_value(L) + (1.0 - self.regularization) * float(np.sum(t[t > 0]))
        return Scan(codes, t, value)

    def submodel(self, ids):
        if self.max_triplets is not None and ids.size > self.max_triplets:
            raise RuntimeError(too_many_triplets_message(
                self.search, self._last_factor, int(ids.size), self.max_triplets,
                "the working set (the triplets near or past the margin at the iterates so far) would grow too large"))
        ids = np.asarray(ids, dtype=np.int64)
        prev, prev_ids = self._last_sub
        pos = positions(ids, prev_ids)
        kept = pos >= 0
        base = self._empty if prev is None else prev.subset(pos[kept])
        sub = base.extended(self._triplets(ids[~kept]), np.full(int(np.sum(~kept)), 1.0 - self.regularization))
        if prev is not None and not np.all(kept):   # kept rows first, then the new ones: back to ids order
            order = np.empty(ids.size, dtype=np.int64)
            order[kept] = np.arange(int(np.sum(kept)))
            order[~kept] = np.arange(int(np.sum(kept)), ids.size)
            sub = sub.subset(order)
        self._last_sub = (sub, ids)
        return sub

    def _triplets(self, ids: np.ndarray) -> ConstraintSet:
        """The LMNN triplets of the codes ``ids`` (margin, weight ``1 - regularization``)."""
        return ConstraintSet.from_triplets(self.search.decode(ids), delta=self.search.margin,
                                           weight=1.0 - self.regularization)

    def full_bound(self, sub, ids, y, upper):
        return sub.certify(y, upper, repair_steps=0)[0]

    def reference_value(self) -> float:
        return (1.0 - self.regularization) * self.search.margin * self.search.n_triplets

    def trivial_bound(self) -> float:
        # every term of LMNN's objective is nonnegative on the PSD cone (the dual bound at y = 0)
        return 0.0

    def _pull_value(self, L: np.ndarray) -> float:
        """The pull term at M = L^T L as rho * sum ||L (x_i - x_j)||^2 over the target pairs: never
        negative, where <R, M> through R's round-off could be (R is singular when n <= d, and M may
        grow along its null space at no cost)."""
        pairs = self.search.target_pairs
        diff = (self.search.X[pairs[:, 0]] - self.search.X[pairs[:, 1]]) @ L.T
        return self.regularization * float(np.einsum("ij,ij->", diff, diff))

    def initial(self, M0, scan, max_add):
        scale = 1.0
        for _ in range(MAX_START_HALVINGS):   # nothing near the margin at M0: shrink it until something is
            if scan.ids.size:
                break
            scale *= 0.5
            scan = self.scan(scale * M0)
        return largest_margins(scan.ids, scan.margins, max_add)


class WorkingSet:
    """The working set W: sorted constraint ids, and for each how many passes it sat idle.

    A constraint is idle at a pass when it is far from the margin (not in the scan) and its
    multiplier is 0; ``drop_after`` consecutive idle passes drop it. ``dropped`` keeps every id
    ever dropped, so re-additions are counted (``readded``).
    """

    def __init__(self, ids: np.ndarray, drop_after: int):
        self.ids = np.asarray(ids, dtype=np.int64)
        self.idle = np.zeros(self.ids.size, dtype=np.int64)
        self.drop_after = drop_after
        self.dropped = np.zeros(0, dtype=np.int64)
        self.n_dropped = 0
        self.readded = 0

    def __len__(self) -> int:
        return int(self.ids.size)

    def outside(self, scan: Scan) -> tuple[np.ndarray, np.ndarray]:
        """Ids and margins of the scanned constraints not in W."""
        out = ~np.isin(scan.ids, self.ids, assume_unique=True)
        return scan.ids[out], scan.margins[out]

    def update(self, scan: Scan, y: np.ndarray, max_add: int) -> tuple[np.ndarray, int, int]:
        """Drop the long-idle constraints (``y``: the multipliers on W), add the scanned ones outside W.

        Returns ``(rows, number added, number dropped)``: ``rows[i]`` is the position in the old W
        of the new W's i-th id, -1 for an added one (:func:`positions`).
        """
        near = np.isin(self.ids, scan.ids, assume_unique=True)
        self.idle = np.where(near | (y > 0), 0, self.idle + 1)
        keep = self.idle < self.drop_after if self.drop_after else np.ones(self.ids.size, dtype=bool)
        if not keep.any() and not np.any(~np.isin(scan.ids, self.ids, assume_unique=True)):
            # a point beyond every margin (a zero optimum): W never empties, it keeps its constraints
            keep[:] = True
        n_drop = int(np.sum(~keep))
        self.dropped = sorted_union(self.dropped, self.ids[~keep])
        self.n_dropped += n_drop
        new, marg = self.outside(scan)
        new = largest_margins(new, marg, max(max_add, int(np.sum(keep))) if max_add else 0)   # see MAX_ADD
        self.readded += int(np.sum(np.isin(new, self.dropped, assume_unique=True)))
        old_ids, old_idle = self.ids, self.idle[keep]
        self.ids = sorted_union(old_ids[keep], new)
        self.idle = np.zeros(self.ids.size, dtype=np.int64)
        self.idle[np.searchsorted(self.ids, old_ids[keep])] = old_idle
        return positions(self.ids, old_ids), int(new.size), n_drop


def sorted_union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct ids of two sorted id arrays (``np.union1d`` of sorted input).

    One stable sort of the concatenation (two sorted runs: linear time) and a comparison with the
    predecessor. ``np.union1d`` takes a hash-based ``np.unique`` instead: measured on 2e6 and 5e5
    sorted int64 ids (one BLAS thread, loaded machine), 17.7 s against 0.09 s.
    """
    c = np.concatenate([np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)])
    c.sort(kind="stable")
    first = np.empty(c.size, dtype=bool)
    first[:1] = True
    np.not_equal(c[1:], c[:-1], out=first[1:])
    return c[first]


def largest_margins(ids: np.ndarray, margins: np.ndarray, cap: int) -> np.ndarray:
    """The ids (sorted) of the ``cap`` largest ``margins`` (aligned with ``ids``; ties in ``ids``
    order); all of them when ``cap`` is 0 or not exceeded. The one selection rule of a working set:
    its first ids, and the ids one pass adds (see :data:`MAX_ADD`)."""
    ids = np.asarray(ids, dtype=np.int64)
    if cap and ids.size > cap:
        ids = ids[np.argsort(-np.asarray(margins), kind="stable")[:cap]]
    return np.sort(ids)


def positions(ids: np.ndarray, old_ids: np.ndarray) -> np.ndarray:
    """For each of ``ids``, its position in the sorted ``old_ids``, or -1 where it is not there."""
    out = np.full(ids.size, -1, dtype=np.int64)
    if old_ids.size:
        pos = np.minimum(np.searchsorted(old_ids, ids), old_ids.size - 1)
        hit = old_ids[pos] == ids
        out[hit] = pos[hit]
    return out


def _take(v: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``v[rows]`` with 0 where ``rows`` is -1 (multipliers moved onto another working set)."""
    out = np.zeros(rows.size)
    hit = rows >= 0
    out[hit] = v[rows[hit]]
    return out


def _check_options(drop_after, round_iter, max_rounds, max_add, max_iter):
    return (check_int_in_range(drop_after, "drop_after", 0, 10**6),
            check_int_in_range(round_iter, "round_iter", 1, 10**9),
            check_int_in_range(max_rounds, "max_rounds", 1, 10**6),
            check_int_in_range(max_add, "max_add", 0, 10**9),
            check_int_in_range(max_iter, "max_iter", 1, 10**9))


@dataclass
class _Best:
    """The best point (lowest full objective, with its pass) and the best bound (with its multipliers)."""

    f: float = math.inf
    M: Optional[np.ndarray] = None
    y: Optional[np.ndarray] = None
    ids: Optional[np.ndarray] = None
    scan: Optional[Scan] = None
    lb: Optional[float] = None
    lb_y: Optional[np.ndarray] = None
    lb_ids: Optional[np.ndarray] = None

    def offer_point(self, scan: Scan, M: np.ndarray, y: np.ndarray, ids: np.ndarray) -> bool:
        if scan.value < self.f:
            self.f, self.M, self.y, self.ids, self.scan = scan.value, M, y, ids, scan
            return True
        return False

    def offer_bound(self, lb: Optional[float], y: np.ndarray, ids: np.ndarray) -> None:
        if lb is not None and (self.lb is None or lb > self.lb):
            self.lb, self.lb_y, self.lb_ids = float(lb), y, ids


#: The options of PDHG's cold start (:func:`~cvxmetric.solvers.pdhg.start_state`, from its signature:
#: ``step_size``, ``primal_weight``, ``adaptive_step``, ``seed``): read once, by the first round.
_COLD_START = keyword_options(start_state, exclude={"M0", "y0"})


def _quiet_pdhg(sub: HingeModel, **kw) -> SolverResult:
    """One restricted PDHG solve; its ConvergenceWarning is the outer loop's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return pdhg(sub, warn=False, **kw)


def solve_working_set(pool: ConstraintPool, M0: np.ndarray, *, drop_after: int = DROP_AFTER,
                      round_iter: int = ROUND_ITER, max_rounds: int = MAX_ROUNDS, max_add: int = MAX_ADD,
                      max_iter: int = 100_000, tol: float = DEFAULT_TOL,
                      residual_tol: Optional[float] = None, time_limit: Optional[float] = None,
                      callback: Optional[Callable[[int, np.ndarray, float], None]] = None,
                      solver_name: str = "pdhg-working-set", **pdhg_options) -> SolverResult:
    r"""Minimise a hinge model by PDHG on a working set, certified on the full constraint set.

    Parameters
    ----------
    pool : ConstraintPool
        The full constraint set (:class:`ModelPool` or :class:`ImpostorPool`; its ``slack``
        defines "near the margin").
    M0 : ndarray, shape (d, d)
        PSD start.
    drop_after : int
        Consecutive idle passes after which a constraint leaves W (0: never).
    round_iter : int
        PDHG iterations of the first round (doubled after a round with no violated constraint
        outside W).
    max_rounds : int
        Limit on the rounds.
    max_add : int
        Cap on the constraints added per pass (at least |W|; 0: no cap).
    max_iter : int
        Limit on the total PDHG iterations.
    tol : float
        What ``converged`` is held to: the certified relative gap of the *full* problem (module
        docstring); each round's PDHG is held to it too.
    residual_tol : float, optional
        PDHG's residual test (each round, and the loop's rule read on the full problem, module
        docstring); default ``RESIDUAL_TOL_FRACTION * tol``.
    time_limit : float, optional
        Wall-clock limit in seconds.
    callback : callable, optional
        ``callback(round, M, full objective)`` after every full pass.
    solver_name : str
        Name recorded in the result.
    **pdhg_options
        Passed to every :func:`cvxmetric.solvers.pdhg.pdhg` call (``check_every``, ...).

    Returns
    -------
    SolverResult
        Built by :func:`cvxmetric.solvers.result.make_result`: ``M`` the point with the lowest
        full objective over the rounds, ``objective`` that objective, ``lower_bound`` the best
        bound of the full problem, ``measure == "certified_gap"`` held to ``tol``
        (``"kkt_residual"`` without a bound, module docstring), ``n_iter`` the total PDHG
        iterations, ``history`` the full objective after each round, ``multipliers`` the bound's
        multipliers: over all rows for a :class:`ModelPool`, over ``info["multiplier_ids"]``
        otherwise. ``info``: ``rounds``, ``working_set_sizes`` (per round), ``working_set_size``,
        ``working_set`` (the last W's ids), ``model`` (the last restricted model),
        ``violated_outside_working_set`` (at the last pass), ``violated_at_solution``,
        ``added`` / ``dropped`` (per pass), ``readded`` (dropped constraints added again),
        ``pdhg_iterations`` (per round), ``pdhg_stop_reason``, ``lower_bound``, ``certified_gap``,
        ``y``, ``multiplier_ids``, and ``trace``: per round (round, seconds, PDHG iterations so far,
        |W|, full objective at the pass, best full objective, best bound or None, certified gap).

    Notes
    -----
    The program, the rounds and the certificate are in the module docstring
    (:mod:`cvxmetric.solvers.working_set`).
    """
    if not isinstance(pool, ConstraintPool):
        raise TypeError(f"pool must be a ConstraintPool; got {type(pool).__name__}")
    drop_after, round_iter, max_rounds, max_add, max_iter = _check_options(
        drop_after, round_iter, max_rounds, max_add, max_iter)
    for name in ("M0", "y0", "warn", "state"):
        if name in pdhg_options:
            raise ValueError(f"{name} is set by the working-set loop; pass M0 to the solver, not to each PDHG round")
    M0 = as_square_symmetric(M0, "M0", d=pool.d, psd=True)
    tol = check_positive(tol, "tol")
    residual_tol = RESIDUAL_TOL_FRACTION * tol if residual_tol is None else check_positive(residual_tol, "residual_tol")
    t_start = time.perf_counter()
    scan = pool.scan(M0)   # the one pass at the start: the first W and f(M0)
    reference = pool.reference_value()
    ws = WorkingSet(pool.initial(M0, scan, max_add), drop_after)
    M, y, rows = M0, np.zeros(len(ws)), None
    best = _Best()
    best.offer_point(scan, M, y, ws.ids)   # the start competes too: rounds that end worse revert to it
    best.offer_bound(pool.trivial_bound(), np.zeros(len(ws)), ws.ids)
    history, sizes, iters, added, dropped, trace = [], [], [], [], [], []
    n_iter, budget, state = 0, round_iter, None
    stop_reason = "max_iter"
    for rnd in range(1, max_rounds + 1):
        sub = pool.submodel(ws.ids)
        sizes.append(len(ws))
        remaining = None if time_limit is None else max(time_limit - (time.perf_counter() - t_start), 1e-3)
        run = {"tol": tol, "residual_tol": residual_tol, "max_iter": min(budget, max_iter - n_iter),
               "time_limit": remaining, "solver_name": solver_name, **pdhg_options}
        if state is None:
            state = start_state(sub, M0=M, y0=np.clip(y, 0.0, sub.coef),
                                **{k: pdhg_options[k] for k in _COLD_START if k in pdhg_options})
        else:   # the previous round's state, moved onto the new W (a warm start, not a cold one)
            state = state.rebind(sub, M, y, rows)
        before = state.n_iter
        res = _quiet_pdhg(sub, state=state, **run)   # advances the state
        n_round = state.n_iter - before
        n_iter += n_round
        iters.append(n_round)
        M, y = state.M, state.y / state.s   # the iterate the next round continues from
        scan = pool.scan(res.M)   # the full pass, at the round's best point
        history.append(scan.value)
        if callback is not None:
            callback(rnd, res.M, scan.value)
        outside = int(np.sum(ws.outside(scan)[1] > 0))
        if not best.offer_point(scan, res.M, y, ws.ids):
            # a restricted optimum far outside W (worse over all constraints): back to the best point
            M, y = best.M, _take(best.y, positions(ws.ids, best.ids))
        # two bounds of the full problem: PDHG's of the restricted one (p*_W <= p*), and the full
        # model's dual bound at the zero-padded multiplier, with the best full objective as upper
        best.offer_bound(res.lower_bound, res.multipliers, ws.ids)
        best.offer_bound(pool.full_bound(sub, ws.ids, res.multipliers, best.f), res.multipliers, ws.ids)
        # PDHG's stopping rule, for the full problem: a certified gap within tol, or the restricted
        # solve stopped (its KKT test) with nothing violated outside W and the gap within tol
        gap = relative_gap(best.f, best.lb, reference)
        trace.append((rnd, time.perf_counter() - t_start, n_iter, len(ws), scan.value, best.f, best.lb, gap))
        settled = outside == 0 and res.status == "converged"
        if gap <= min(residual_tol, tol) or (settled and (gap <= tol or best.lb is None)):
            stop_reason = "converged"
            break
        if n_iter >= max_iter or rnd == max_rounds:
            break
        if time_limit is not None and time.perf_counter() - t_start > time_limit:
            stop_reason = "time_limit"
            break
        if outside == 0:   # W is right at this point: solve it further before the next pass
            budget = 2 * budget
        rows, n_add, n_drop = ws.update(scan, y, max_add)
        y = _take(y, rows)
        added.append(n_add)
        dropped.append(n_drop)
    return _result(pool, solver_name, best, res, ws, sub, outside, stop_reason, tol,
                   n_iter, history, t_start, reference,
                   {"working_set_sizes": sizes, "pdhg_iterations": iters, "added": added, "dropped": dropped,
                    "trace": trace})


def _result(pool, solver_name, best, res, ws, sub, outside, stop_reason, tol, n_iter,
            history, t_start, reference, info) -> SolverResult:
    """The result contract of :func:`solve_working_set` (see its Returns)."""
    if best.lb is not None:
        measure, measure_value = "certified_gap", None
    else:   # no bound at all: the restricted KKT residual, the full one only if nothing outside W is
        # violated, and only when it was measured at the point returned (not at a later, worse round)
        measure = "kkt_residual"
        at_best = best.M is res.M
        measure_value = (res.measure_value if (outside == 0 and at_best and res.measure == "kkt_residual")
                         else math.inf)
    if best.lb is not None:
        mult, mult_ids = best.lb_y, best.lb_ids
    else:   # the multipliers the residual was measured at (the last round's), else the best point's
        mult, mult_ids = (res.multipliers, ws.ids) if best.M is res.M else (best.y, best.ids)
    if isinstance(pool, ModelPool):   # multipliers over all rows of the full model
        full = np.zeros(pool.model.m)
        full[mult_ids] = mult
        mult, mult_ids = full, np.arange(pool.model.m)
    violated_at = int(np.sum(best.scan.margins > 0))
    detail = (f"{len(history)} rounds, working set {len(ws)}, {outside} violated constraints outside it at the "
              f"last pass; last PDHG: {res.message}")
    info.update({"rounds": len(history), "working_set_size": len(ws), "working_set": ws.ids, "model": sub,
                 "violated_outside_working_set": outside, "violated_at_solution": violated_at,
                 "readded": ws.readded, "pdhg_stop_reason": res.info["stop_reason"], "lower_bound": best.lb,
                 "certified_gap": None if best.lb is None else relative_gap(best.f, best.lb, reference),
                 "y": mult, "multiplier_ids": mult_ids})
    return make_result(solver_name, objective=best.f, measure=measure, tol=tol, stop_reason=stop_reason,
                       M=best.M, measure_value=measure_value, lower_bound=best.lb, multipliers=mult,
                       n_iter=n_iter, history=history, time=time.perf_counter() - t_start, detail=detail,
                       info=info, reference=reference)


#: The options :func:`solve_working_set` reads through a facade: its own (``M0`` included), the
#: pools' ``ws_slack`` and every PDHG round's options (``y0`` and ``warn`` are the loop's business;
#: the rounds continue one state, which is never equilibrated: ``equilibrate`` is not read).
WORKING_SET_OPTIONS = (keyword_options(solve_working_set, exclude=ENGINE_HOOKS)
                       | keyword_options(pdhg, exclude=ENGINE_HOOKS | {"M0", "y0", "warn", "state", "equilibrate"})
                       | {"ws_slack"})
