r"""Webpage change detection: a seeded page simulator and its constraint generators.

Reference: thesis ch. 4.

The page
--------
A page is a grid of regions, each of one kind (:data:`REGION_KINDS`):

* ``"content"`` — a news story. Its descriptor drifts a little at every version (a Gaussian random
  walk, step ``drift``) and, with probability ``replace_prob`` per version, the story is *replaced*
  by a fresh one (descriptor redrawn from :math:`N(0, I)`). A replacement is the only semantic
  change of the simulator.
* ``"menu"`` — static: one descriptor for all versions (distance exactly 0 between any two versions).
* ``"ad"`` — an advertisement that flickers periodically: ``period`` creatives (period drawn from
  ``ad_periods``, scale ``ad_scale``) shown in turn, one per version, from a random phase, so the
  ad of :math:`v_t` comes back at :math:`v_{t + \text{period}}`.

Each version :math:`v` has one descriptor :math:`f_r(v) \in \mathbb{R}^k` per region (``n_bins``
"GIST bins" per grid cell, as in thesis 4.3.1), and the per-region distance vector of two versions is

.. math:: d_{regions}(v_i, v_j)_r = \frac1k \|f_r(v_i) - f_r(v_j)\|^2 ,

the squared :math:`\ell_2` distance between the bins of the same cell (mean over the k bins, so
its scale does not depend on k). The ground truth is each region's *importance of change*
(``importance``: 1 for content, 0 for menus and ads) and, for a pair of versions, its *semantic
change*: the number of content stories replaced between them (:meth:`PageHistory.semantic_change`).

Version-pair rows
-----------------
The metrics of the thesis act on :math:`d_{regions}`, which is not a difference of two points.
:class:`VersionPairs` turns a table of version pairs into a data matrix ``X`` whose row 0 is the
origin and whose row :math:`1 + p` is :math:`c_p = d_{regions}(p)^{\circ 1/2}` (the element-wise
square root of eq. 4.6). A version pair :math:`p` is then the point pair :math:`(1 + p, 0)` of ``X``:

* full matrix (eq. 4.6): :math:`x_{1+p} - x_0 = c_p`, so :math:`\langle M, C_{1+p,0}\rangle = c_p^\top M c_p`;
* diagonal (eq. 4.5, vector model ``diagonal=True``): :math:`\Psi = (x_{1+p} - x_0)^{\circ 2} = d_{regions}(p)`
  (up to one rounding of the square root), so :math:`w^\top \Psi = \mathcal{D}_w`.

Every constraint of the chapter is a :class:`~cvxmetric.constraints.ConstraintSet` over these rows.

Constraints
-----------
Monotony of changes (:func:`monotony_constraints`, eqs. 4.1–4.2), for a change period
:math:`\gamma \ge 2` (the parameter ``change_period``), quadruplets :math:`(v_t, v_{t+1}, v_r, v_s)` with
:math:`r \le t < s`,
:math:`(r, s) \ne (t, t + 1)`, inside the thesis' sampling window :math:`t - r \le` ``max_back``,
:math:`s - t \le` ``max_ahead`` (thesis 4.4.4: 6 and 7):

* :math:`\mathcal{A}` (:math:`\delta = 1`): :math:`s \ge r + \gamma \ge t + 1`, asking
  :math:`D(v_t, v_{t+1}) + 1 \le D(v_r, v_s)` (eq. 4.2);
* :math:`\mathcal{B}` (:math:`\delta = 0`): the others, asking :math:`D(v_t, v_{t+1}) \le D(v_r, v_s)` (eq. 4.1).

Similar / dissimilar version pairs (:func:`threshold_pairs`, eqs. 4.3–4.4): :math:`D(v_r, v_s) + 1 \le b`
and :math:`b + 1 \le D(v_r, v_s)` with a learned threshold :math:`b`. This *is* the vector model's
bias: :mod:`cvxmetric.vector_model` writes a similar pair as :math:`L^h_1(-1, w^\top\Psi - b)`
(zero loss iff :math:`w^\top\Psi \le b - 1`, up to the Huber width) and a dissimilar pair as
:math:`L^h_1(1, w^\top\Psi - b)` (:math:`w^\top\Psi \ge b + 1`), with :math:`\omega = [w; b]`. So
eqs. 4.3–4.5 are ``qwise_vector_model(pairs.X, constraints, diagonal=True)`` and the learned
threshold is ``omega[-1]``. (The full-matrix Qwise model has no bias: there a pair's stored bound
is a fixed threshold; pass ``u`` and ``l``.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import (as_index_array, as_rng, check_int_in_range, check_nonnegative, check_positive)
from .constraints import ConstraintSet

__all__ = ["REGION_KINDS", "PageHistory", "VersionPairs", "default_layout", "simulate_page",
           "monotony_quadruplets", "monotony_constraints", "threshold_pairs", "successive_pairs"]

REGION_KINDS = ("content", "menu", "ad")


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def default_layout(rows: int = 4, cols: int = 5) -> np.ndarray:
    """A news-page grid: a menu bar on top and down the left, ads down the right, content inside.

    Returns an array of shape (rows, cols) of strings from :data:`REGION_KINDS`.
    """
    rows = check_int_in_range(rows, "rows", 2)
    cols = check_int_in_range(cols, "cols", 3)
    kinds = np.full((rows, cols), "content", dtype=object)
    kinds[0, :] = "menu"
    kinds[1:, 0] = "menu"
    kinds[1:, -1] = "ad"
    return kinds.astype(str)


def _as_layout(layout) -> np.ndarray:
    try:
        arr = np.array(layout, dtype=object)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"layout must be a 2-D grid of region kinds {REGION_KINDS}; got {type(layout).__name__}") from exc
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"layout must be a non-empty 2-D grid (rows, cols) of region kinds; got shape {arr.shape}")
    bad = [(i, j) for (i, j), v in np.ndenumerate(arr) if not (isinstance(v, str) and v in REGION_KINDS)]
    if bad:
        i, j = bad[0]
        raise ValueError(f"layout[{i}, {j}] = {arr[i, j]!r} is not a region kind; use one of {REGION_KINDS}")
    if not np.any(arr == "content"):
        raise ValueError("layout has no 'content' region, so no version ever changes semantically; add one")
    return arr.astype(str)


def _as_periods(ad_periods) -> tuple:
    try:
        p = np.array(ad_periods).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise TypeError("ad_periods must be a sequence of integers >= 2") from exc
    if p.size == 0:
        raise ValueError("ad_periods is empty; give at least one period (an integer >= 2)")
    return tuple(check_int_in_range(v.item() if isinstance(v, np.generic) else v, "ad_periods entry", 2) for v in p)


@dataclass(frozen=True, eq=False)
class PageHistory:
    r"""Successive versions of a simulated page (module docstring).

    Attributes
    ----------
    descriptors : ndarray, shape (n_versions, n_regions, n_bins)
        :math:`f_r(v_t)`, regions in row-major grid order.
    layout : ndarray of str, shape (rows, cols)
        The kind of every region.
    story : ndarray of int, shape (n_versions, n_regions)
        The story shown by each content region (a new id at every replacement); -1 elsewhere.
    importance : ndarray, shape (n_regions,)
        Ground-truth importance of each region's change: 1 for content, 0 for menus and ads.
    """

    descriptors: np.ndarray
    layout: np.ndarray
    story: np.ndarray
    importance: np.ndarray

    @property
    def n_versions(self) -> int:
        return int(self.descriptors.shape[0])

    @property
    def n_regions(self) -> int:
        return int(self.descriptors.shape[1])

    @property
    def grid_shape(self) -> tuple:
        return tuple(self.layout.shape)

    @property
    def kinds(self) -> np.ndarray:
        """Kind of each region in row-major order, shape (n_regions,)."""
        return self.layout.reshape(-1)

    def _pairs(self, pairs) -> np.ndarray:
        return as_index_array(pairs, 2, "pairs", n=self.n_versions)

    def region_distances(self, pairs) -> np.ndarray:
        r""":math:`d_{regions}(v_i, v_j)` for version pairs ``(i, j)``, shape (m, n_regions) (module docstring)."""
        p = self._pairs(pairs)
        diff = self.descriptors[p[:, 0]] - self.descriptors[p[:, 1]]
        return np.mean(diff * diff, axis=2)

    def semantic_change(self, pairs) -> np.ndarray:
        """Ground truth: importance-weighted count of content stories replaced between the two versions."""
        p = self._pairs(pairs)
        changed = self.story[p[:, 0]] != self.story[p[:, 1]]
        return changed.astype(np.float64) @ self.importance

    def version_pairs(self, pairs) -> "VersionPairs":
        """The :class:`VersionPairs` table of the given version pairs (distances computed here)."""
        p = self._pairs(pairs)
        return VersionPairs(p, self.region_distances(p))


def simulate_page(n_versions: int, *, layout=None, n_bins: int = 4, replace_prob: float = 0.06,
                  drift: float = 0.15, ad_periods=(2, 3), ad_scale: float = 1.5, seed=None) -> PageHistory:
    r"""Simulate ``n_versions`` successive versions of a page (module docstring).

    Parameters
    ----------
    n_versions : int
        Number of versions, >= 2 (one per crawl, e.g. hourly).
    layout : array_like of str, shape (rows, cols), optional
        Region kinds (:data:`REGION_KINDS`); default :func:`default_layout` (4 x 5).
    n_bins : int
        Descriptor length k per region.
    replace_prob : float in (0, 1)
        Probability that a content story is replaced at a version.
    drift : float >= 0
        Standard deviation of the per-version random-walk step of a content descriptor.
    ad_periods : sequence of int >= 2
        Each ad draws its period (number of creatives shown in turn) from these.
    ad_scale : float > 0
        Scale of the ad creatives' descriptors (content and menus have scale 1).
    seed : None, int or numpy.random.Generator
        Every random choice (stories, replacement times, drift, ads, menus) comes from it.

    Returns
    -------
    PageHistory
    """
    n_versions = check_int_in_range(n_versions, "n_versions", 2)
    layout = default_layout() if layout is None else _as_layout(layout)
    n_bins = check_int_in_range(n_bins, "n_bins", 1)
    replace_prob = check_positive(replace_prob, "replace_prob")
    if not replace_prob < 1:
        raise ValueError(f"replace_prob must be in (0, 1); got {replace_prob}")
    drift = check_nonnegative(drift, "drift")
    periods = _as_periods(ad_periods)
    ad_scale = check_positive(ad_scale, "ad_scale")
    rng = as_rng(seed)
    kinds = layout.reshape(-1)
    R = kinds.size
    F = np.empty((n_versions, R, n_bins))
    story = np.full((n_versions, R), -1, dtype=np.int64)
    next_story = 0
    for r, kind in enumerate(kinds):
        if kind == "menu":
            F[:, r] = rng.standard_normal(n_bins)
        elif kind == "ad":
            period = periods[int(rng.integers(len(periods)))]
            creatives = ad_scale * rng.standard_normal((period, n_bins))
            phase = int(rng.integers(period))
            F[:, r] = creatives[(np.arange(n_versions) + phase) % period]
        else:
            replaced = rng.random(n_versions) < replace_prob
            replaced[0] = True
            fresh = rng.standard_normal((n_versions, n_bins))
            steps = drift * rng.standard_normal((n_versions, n_bins))
            f = fresh[0]
            for t in range(n_versions):
                if replaced[t]:
                    f, next_story = fresh[t], next_story + 1
                elif t:
                    f = f + steps[t]
                F[t, r] = f
                story[t, r] = next_story
    importance = (kinds == "content").astype(np.float64)
    return PageHistory(_readonly(F), _readonly(layout.copy()), _readonly(story), _readonly(importance))


@dataclass(frozen=True, eq=False)
class VersionPairs:
    r"""A table of version pairs and their per-region distances, as rows of a data matrix.

    Attributes
    ----------
    pairs : ndarray of int, shape (P, 2)
        Version pairs ``(r, s)``, each at most once (order inside a pair ignored).
    d_regions : ndarray, shape (P, n_regions)
        Their :math:`d_{regions}` (non-negative).

    Notes
    -----
    ``X`` (shape (P + 1, n_regions)) has the origin as row 0 and :math:`c_p = d_{regions}(p)^{\circ 1/2}`
    as row :math:`1 + p`; version pair ``p`` is the point pair ``(row(p), 0)`` (module docstring).
    """

    pairs: np.ndarray
    d_regions: np.ndarray

    def __post_init__(self):
        p = as_index_array(self.pairs, 2, "pairs")
        d = np.array(self.d_regions, dtype=np.float64, copy=True)
        if d.ndim != 2 or d.shape[0] != p.shape[0] or d.shape[1] == 0:
            raise ValueError(f"d_regions must have shape ({p.shape[0]}, n_regions), one row per pair; got {d.shape}")
        if not np.all(np.isfinite(d)) or np.any(d < 0):
            raise ValueError("d_regions must be finite and non-negative (they are distances)")
        if np.any(p[:, 0] == p[:, 1]):
            q = int(np.argmax(p[:, 0] == p[:, 1]))
            raise ValueError(f"pairs row {q} = {tuple(p[q].tolist())} joins a version to itself; remove it")
        key = np.sort(p, axis=1)
        if np.unique(key, axis=0).shape[0] != key.shape[0]:
            raise ValueError("pairs lists a version pair twice; give each pair once")
        object.__setattr__(self, "pairs", _readonly(p))
        object.__setattr__(self, "d_regions", _readonly(d))
        object.__setattr__(self, "_row", {(int(a), int(b)): q + 1 for q, (a, b) in enumerate(key)})

    @property
    def X(self) -> np.ndarray:
        """The data matrix: the origin, then :math:`\\sqrt{d_{regions}}` row by row."""
        return np.vstack([np.zeros((1, self.d_regions.shape[1])), np.sqrt(self.d_regions)])

    def rows(self, pairs, name: str = "pairs") -> np.ndarray:
        """Row of ``X`` of each version pair (ValueError naming the first pair not in the table)."""
        p = as_index_array(pairs, 2, name)
        out = np.empty(p.shape[0], dtype=np.int64)
        for q, (a, b) in enumerate(np.sort(p, axis=1)):
            row = self._row.get((int(a), int(b)))
            if row is None:
                raise ValueError(f"{name} row {q}: version pair {tuple(p[q].tolist())} is not in the table; "
                                 "build the VersionPairs with every pair the constraints need")
            out[q] = row
        return out


def successive_pairs(n_versions: int) -> np.ndarray:
    """The pairs ``(t, t + 1)``, shape (n_versions - 1, 2)."""
    n_versions = check_int_in_range(n_versions, "n_versions", 2)
    t = np.arange(n_versions - 1)
    return np.column_stack([t, t + 1])


def monotony_quadruplets(n_versions: int, change_period: int, *, max_back: int = 6,
                         max_ahead: int = 7) -> tuple[np.ndarray, np.ndarray]:
    r"""All version quadruplets :math:`(t, t + 1, r, s)` of eqs. 4.1–4.2 (module docstring).

    Parameters
    ----------
    n_versions : int
        Versions :math:`0, \dots, n - 1`.
    change_period : int >= 2
        Change period :math:`\gamma` (thesis notation).
    max_back, max_ahead : int
        Sampling window :math:`t - r \le` ``max_back``, :math:`s - t \le` ``max_ahead`` (thesis: 6, 7).

    Returns
    -------
    quads : ndarray of int, shape (m, 4)
        Rows ``(t, t + 1, r, s)`` with :math:`r \le t < s`, :math:`(r, s) \ne (t, t + 1)`.
    in_A : ndarray of bool, shape (m,)
        Membership of :math:`\mathcal{A}` (:math:`s \ge r + \gamma \ge t + 1`); the rest is :math:`\mathcal{B}`.
    """
    n_versions = check_int_in_range(n_versions, "n_versions", 2)
    gamma = check_int_in_range(change_period, "change_period", 2)
    max_back = check_int_in_range(max_back, "max_back", 0)
    max_ahead = check_int_in_range(max_ahead, "max_ahead", 1)
    rows = []
    for t in range(n_versions - 1):
        for r in range(max(0, t - max_back), t + 1):
            for s in range(t + 1, min(n_versions - 1, t + max_ahead) + 1):
                if (r, s) != (t, t + 1):
                    rows.append((t, t + 1, r, s))
    quads = np.array(rows, dtype=np.int64).reshape(-1, 4)
    r, s, t = quads[:, 2], quads[:, 3], quads[:, 0]
    in_A = (s >= r + gamma) & (r + gamma >= t + 1)
    if not np.any(in_A):
        raise ValueError(f"no quadruplet of set A exists (it needs s - r >= change_period = {gamma} inside the window "
                         f"max_back={max_back}, max_ahead={max_ahead} and {n_versions} versions): "
                         "lower change_period, or widen the window / add versions")
    return quads, in_A


def monotony_constraints(pairs: VersionPairs, change_period: int, *, max_back: int = 6, max_ahead: int = 7,
                         weight: float = 1.0) -> ConstraintSet:
    r"""The monotony-of-change sets :math:`\mathcal{A}` (:math:`\delta = 1`) and :math:`\mathcal{B}`
    (:math:`\delta = 0`) as a ConstraintSet over ``pairs.X`` (eqs. 4.1–4.2, module docstring).

    The versions are those of ``pairs`` (``0 .. pairs.pairs.max()``); every version pair the window
    needs must be in the table (ValueError otherwise). Rows: all of :math:`\mathcal{A}` then all of
    :math:`\mathcal{B}`, each quadruplet :math:`(v_t, v_{t+1}, v_r, v_s)` as the row quadruplet
    ``(row(t, t+1), 0, row(r, s), 0)``: :math:`D(v_r, v_s) \ge D(v_t, v_{t+1}) + \delta`.
    """
    if not isinstance(pairs, VersionPairs):
        raise TypeError(f"pairs must be a VersionPairs table (PageHistory.version_pairs); got {type(pairs).__name__}")
    n_versions = int(pairs.pairs.max()) + 1
    quads, in_A = monotony_quadruplets(n_versions, change_period, max_back=max_back, max_ahead=max_ahead)
    quads = np.concatenate([quads[in_A], quads[~in_A]])
    delta = np.concatenate([np.ones(int(in_A.sum())), np.zeros(int((~in_A).sum()))])
    near = pairs.rows(quads[:, :2], "the window's successive pairs")
    far = pairs.rows(quads[:, 2:], "the window's pairs (r, s)")
    zero = np.zeros_like(near)
    return ConstraintSet.from_quadruplets(np.column_stack([near, zero, far, zero]), delta=delta, weight=weight)


def threshold_pairs(pairs: VersionPairs, *, similar=(), dissimilar=(), u: float = 0.0, l: float = 0.0,
                    weight: float = 1.0) -> ConstraintSet:
    r"""Similar and dissimilar version pairs against the threshold (eqs. 4.3–4.4) over ``pairs.X``.

    Similar pair ``(r, s)`` → ``(row, 0, row, row)``, dissimilar → ``(row, row, row, 0)``
    (:meth:`ConstraintSet.from_pairs`). In the vector model (``qwise_vector_model(..., diagonal=True)``)
    they read :math:`\mathcal{D}_w(v_r, v_s) + 1 \le b` and :math:`b + 1 \le \mathcal{D}_w(v_r, v_s)` with the
    learned threshold :math:`b = \omega_{-1}`, and the stored bounds ``u``, ``l`` are not used; a full-matrix
    model has no bias and reads them as fixed thresholds (give ``0 <= u <= l`` then).
    """
    if not isinstance(pairs, VersionPairs):
        raise TypeError(f"pairs must be a VersionPairs table (PageHistory.version_pairs); got {type(pairs).__name__}")
    u = check_nonnegative(u, "u")
    l = check_nonnegative(l, "l")
    if not u <= l:
        raise ValueError(f"u must be <= l; got u={u}, l={l}")
    sim = pairs.rows(similar, "similar")
    dis = pairs.rows(dissimilar, "dissimilar")
    if sim.size + dis.size == 0:
        raise ValueError("give at least one similar or dissimilar version pair")
    zero_s, zero_d = np.zeros_like(sim), np.zeros_like(dis)
    sets = []
    if sim.size:
        sets.append(ConstraintSet.from_pairs(np.column_stack([sim, zero_s]), similar=True, bound=u, weight=weight))
    if dis.size:
        sets.append(ConstraintSet.from_pairs(np.column_stack([dis, zero_d]), similar=False, bound=l, weight=weight))
    return ConstraintSet.concatenate(*sets)
