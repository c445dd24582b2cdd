r"""LMNN's model and its impostor search.

Reference: Weinberger & Saul 2009; thesis sec. 1.3.4.4; design §5.2.

.. math::
    \min_{M \succeq 0}\ \rho \sum_{(i, j) \in S} \langle M, C_{ij}\rangle
    + (1 - \rho) \sum_{(i, j, l) \in T} [\text{margin} + \langle M, C_{ij} - C_{il}\rangle]_+ ,

with :math:`\rho` = ``regularization`` (metric-learn's name and meaning: the weight of the pull
term; the thesis' push weight is :math:`\mu = 1 - \rho`), :math:`S` the :math:`k_i` target
neighbours of every point (same class, Euclidean, fixed; :math:`k_i = \min(k, n_{y_i} - 1)` with
:math:`k` = ``n_neighbors`` and :math:`n_c` the size of class :math:`c`, so a point alone in its
class has none and acts only as an impostor) and :math:`T` all :math:`(i, j, l)`,
:math:`(i, j) \in S`, :math:`y_l \ne y_i`. It is a :class:`~cvxmetric.models.HingeModel` with the
"pull" linear term :math:`R = \rho \sum_S C_{ij}` and hinge coefficients :math:`1 - \rho` on the triplets.

:math:`|T| = \sum_i k_i (n - n_{y_i})` is millions for scikit-learn's
digits, so the fast solver never forms it: :class:`ImpostorSearch` lists the triplets violated at
a given :math:`M` (``margin + D_M(i, j) - D_M(i, l) > 0``) from a factor :math:`M = L^\top L`, chunk by
chunk, and :func:`impostor_oracle` turns it into the constraint oracle of
:func:`cvxmetric.solvers.subgradient.projected_subgradient`.
"""
from __future__ import annotations

import numpy as np

from ._checks import as_data_matrix, as_labels, as_square_symmetric, check_bool, check_positive
from .constraints import ConstraintSet
from .generators import NO_TARGET, lmnn_constraints, target_neighbors, target_pairs
from .hinge import QuadrupletGeometry
from .linalg import psd_factor
from .models import HingeModel, pull_matrix

__all__ = ["lmnn_model", "lmnn_pull_model", "lmnn_start", "check_lmnn_params", "ImpostorSearch", "impostor_oracle",
           "too_many_triplets_message", "CHUNK_ELEMENTS", "CANDIDATE_ROUNDINGS",
           "MAX_WORKING_TRIPLETS", "WORKING_SET_BYTES_PER_TRIPLET", "WORKING_SET_MEMORY", "DIAGNOSIS_POINTS"]

#: Entries of one (rows x n) block of squared distances in the impostor search (16 MB of float32).
CHUNK_ELEMENTS = 2 ** 22
#: The block distances come from the expansion ||a||^2 + ||b||^2 - 2 a.b with the product a.b in
#: single precision (half the time and memory traffic of the search's one O(n^2 r) step). For
#: r-vectors the product's error is at most r u ||a|| ||b|| (u = float32's unit round-off;
#: Higham, Accuracy and Stability, eq. 3.5) and rounding a, b and the sum to float32 adds a few u
#: (||a||^2 + ||b||^2); candidates are kept up to ``(r + CANDIDATE_ROUNDINGS) * eps32`` times
#: ``||a||^2 + ||b||^2 + margin`` (eps32 = 2u) and then re-measured with exact float64 differences,
#: so no violated triplet is lost to round-off and every reported margin is exact.
CANDIDATE_ROUNDINGS = 8
#: Bytes of memory one triplet of a working set takes, whatever the dimension: the restricted model
#: stores the triplet's indices and its pair-table entries (the points form of K and K*,
#: :class:`~cvxmetric.hinge.PairTable`: no difference vector per triplet) and PDHG a dozen float64
#: vectors over the rows. Measured on :func:`~cvxmetric.generators.gaussian_classes`: the live
#: numpy arrays (tracemalloc's peak over a whole ``solve_lmnn(method="pdhg")`` from its coarse start,
#: 5,000 points) 434 bytes per triplet of the largest working set at d = 50 (5.7e5 triplets), 420
#: at d = 100 (1.5e6). Rounded up. The peak resident memory of a whole process is a coarser upper
#: figure, the data, the impostor search's blocks, the interpreter and the allocator's slack
#: included: 4.19 GB at 100,000 points, d = 50 (``benchmarks.lmnn_scale``'s problem, tol 1e-2),
#: whose final working set holds 5.6e6 triplets, i.e. 741 bytes per triplet if all of it were
#: counted against them.
WORKING_SET_BYTES_PER_TRIPLET = 600
#: Memory a working set may take: 12 GB, half of a 24 GB machine (the rest for the data, the
#: impostor search's blocks, the certificate's d-dependent work and what runs beside).
WORKING_SET_MEMORY = 12 * 10**9
#: The oracle and the working set refuse to grow beyond this many triplets: the memory budget
#: over the bytes per triplet (2e7). Reaching it usually means the metric is small next
#: to the margin (e.g. M0 = I on data at a small scale, or a start near M = 0, where every triplet
#: is violated); :func:`too_many_triplets_message` measures which cause applies.
MAX_WORKING_TRIPLETS = WORKING_SET_MEMORY // WORKING_SET_BYTES_PER_TRIPLET


def check_lmnn_params(regularization, margin) -> tuple[float, float]:
    """Validate LMNN's ``regularization`` (pull weight, in (0, 1)) and ``margin`` (> 0)."""
    regularization = check_positive(regularization, "regularization")
    if not regularization < 1.0:
        raise ValueError("regularization must be in (0, 1) (the weight of the pull term; the impostor hinge "
                         f"term has weight 1 - regularization); got {regularization}")
    return regularization, check_positive(margin, "margin")


def lmnn_pull_model(X, targets: np.ndarray, regularization: float,
                    constraints: ConstraintSet | None = None) -> HingeModel:
    r"""The LMNN :class:`HingeModel` over ``constraints`` (default: none yet).

    ``R = regularization * sum_S C_ij`` over the target pairs ``targets`` (shape (p, 2)); the
    hinge coefficients are the constraint weights (``1 - regularization`` for LMNN triplets).
    """
    X = as_data_matrix(X)
    if constraints is None:
        constraints = ConstraintSet(np.zeros((0, 4), dtype=np.int64), 0.0, 0.0)
    geometry = QuadrupletGeometry(X, constraints, _validated=True)
    R = regularization * pull_matrix(X, targets)
    return HingeModel(geometry, np.array(constraints.weight, dtype=np.float64), R, 0.0, name="lmnn")


def lmnn_start(X, targets, margin: float, direction=None) -> np.ndarray:
    r"""The start of the LMNN solvers: a direction (default the identity) scaled to the data's units.

    :math:`M_0 = \alpha D` with :math:`\alpha = \text{margin} / \overline{(x_i - x_j)^\top D (x_i - x_j)}`,
    the mean over the target pairs ``targets``: under :math:`M_0` a target neighbour lies at squared
    distance ``margin`` on average, where the hinge terms start to act. LMNN is invariant under
    :math:`X \to sX,\ M \to M / s^2` and so is this start (:math:`\alpha \to \alpha / s^2`), so
    the solvers take the same path at every scale of the data; the plain identity starts a
    factor :math:`s^2` away from the optimum's scale (measured: digits' pixels 0..16, 368 PDHG
    iterations and 37 s from the identity, against 176 iterations and 1.2 s at pixels / 16).
    The default direction is the Euclidean metric, under which the target neighbours were chosen;
    ``direction`` (a PSD matrix (d, d)) is another one, e.g. a metric-learn ``init``. Targets at
    distance 0 under the direction (mean 0) give the direction unscaled.
    """
    X = as_data_matrix(X)
    diff = X[targets[:, 0]] - X[targets[:, 1]]
    if direction is None:
        D, lengths = np.eye(X.shape[1]), np.einsum("ij,ij->i", diff, diff)
    else:
        D = as_square_symmetric(direction, "direction", d=X.shape[1], psd=True)
        lengths = np.einsum("ij,jk,ik->i", diff, D, diff)
    mean = float(np.mean(lengths)) if len(diff) else 0.0
    alpha = margin / mean if mean > 0 else 1.0
    return alpha * D


def lmnn_model(X, y, n_neighbors: int = 3, *, regularization: float = 0.5, margin: float = 1.0) -> HingeModel:
    r"""LMNN with its full triplet set materialised (small data only; see the module docstring).

    Parameters
    ----------
    X : array_like, shape (n, d)
    y : array_like, shape (n,)
        Class labels (at least two classes, some class with two or more points).
    n_neighbors : int
        Target neighbours per point, capped at the point's class size minus one
        (:func:`cvxmetric.generators.target_neighbors`).
    regularization : float
        Weight of the pull term, in (0, 1); the impostor hinge term has weight ``1 - regularization``.
    margin : float
        Margin of the triplet hinge (> 0).

    Returns
    -------
    HingeModel
        Rows ordered by (i, target rank, l); ``name == "lmnn"``.
    """
    regularization, margin = check_lmnn_params(regularization, margin)
    X = as_data_matrix(X)
    tg, triplets = lmnn_constraints(X, y, n_neighbors, regularization=regularization, margin=margin)
    return lmnn_pull_model(X, tg, regularization, triplets)


def _check_targets(targets, y: np.ndarray, n_neighbors: int) -> np.ndarray:
    """Given target neighbours: shape (n, n_neighbors), indices of other points of the same class.

    A row may end with :data:`~cvxmetric.generators.NO_TARGET` entries (a point of a small class).
    """
    T = np.asarray(targets)
    n = y.shape[0]
    if T.shape != (n, n_neighbors) or not np.issubdtype(T.dtype, np.integer):
        raise ValueError(f"targets must be an integer array of shape ({n}, {n_neighbors}); got "
                         f"{T.dtype} of shape {T.shape}")
    if T.size and (T.min() < NO_TARGET or T.max() >= n):
        raise ValueError(f"targets must index the {n} points (0 .. {n - 1}) or be {NO_TARGET} (no target)")
    real = T != NO_TARGET
    if not real.any():
        raise ValueError(f"targets lists no target pair (every entry is {NO_TARGET}); give some point a target")
    if np.any(real[:, 1:] & ~real[:, :-1]):
        raise ValueError(f"targets must list a point's targets first and pad the row's end with {NO_TARGET}")
    i, r = np.nonzero(real)
    if np.any(T[i, r] == i) or np.any(y[T[i, r]] != y[i]):
        raise ValueError("targets must be other points of the same class (a point is not its own target)")
    return T.astype(np.int64)


class ImpostorSearch:
    r"""All LMNN triplets violated at a metric, found without materialising the triplet set.

    Parameters
    ----------
    X : array_like, shape (n, d)
    y : array_like, shape (n,)
    n_neighbors : int
        Target neighbours per point, capped at the point's class size minus one
        (:func:`cvxmetric.generators.target_neighbors`).
    margin : float
    chunk_elements : int
        Size of one block of pairwise distances (memory bound of a search).
    targets : array_like of int, shape (n, n_neighbors), optional
        Target neighbours chosen elsewhere (default: :func:`cvxmetric.generators.target_neighbors`
        of ``X``). A search over transformed data (e.g. the whitened data of
        :class:`cvxmetric.solvers.lmnn.PullWhitening`) keeps the targets of the original data.

    Notes
    -----
    With :math:`M = L^\top L` and :math:`z_i = L x_i`, triplet :math:`(i, j, l)` is violated iff
    :math:`\|z_i - z_l\|^2 < \|z_i - z_j\|^2 + \text{margin}`. For a block of points :math:`i` of
    one class the squared distances to every point of the later classes are one matrix product
    (single precision, with a proven round-off band: :data:`CANDIDATE_ROUNDINGS`); only the pairs
    inside either point's largest radius :math:`\max_j \|z_i - z_j\|^2 + \text{margin}` are kept,
    re-measured exactly in double precision, and tested against each target. The search is
    exhaustive: every triplet of the implicit set is decided, none sampled. Cost per search
    :math:`O(n^2 r + n d r)` time, :math:`O(\text{chunk} + |\text{found}|)` memory (no n x n matrix;
    measured at 20,000 points, d = r = 50: 1.9 CPU seconds).

    A triplet is identified by the code :math:`((i k + \text{rank}_j) n + l)` (:math:`k` = ``n_neighbors``), which orders
    triplets exactly as :func:`cvxmetric.generators.lmnn_constraints` does.
    """

    def __init__(self, X, y, n_neighbors: int = 3, *, margin: float = 1.0, chunk_elements: int = CHUNK_ELEMENTS,
                 targets=None):
        self.X = as_data_matrix(X)
        self.y = as_labels(y, self.X.shape[0])
        self.targets = (target_neighbors(self.X, self.y, n_neighbors) if targets is None
                        else _check_targets(targets, self.y, n_neighbors))
        self.n_neighbors = int(n_neighbors)
        self.margin = check_positive(margin, "margin")
        if isinstance(chunk_elements, bool) or not isinstance(chunk_elements, (int, np.integer)) \
                or chunk_elements < 1:
            raise ValueError(f"chunk_elements must be a positive integer; got {chunk_elements!r}")
        self.chunk_elements = int(chunk_elements)
        _, self._label_id = np.unique(self.y, return_inverse=True)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def target_pairs(self) -> np.ndarray:
        """The pairs ``(i, j)``, j a target of i, shape (p, 2) (the padding left out)."""
        return target_pairs(self.targets)

    @property
    def n_triplets(self) -> int:
        """Size of the full (implicit) triplet set."""
        counts = np.bincount(self._label_id)
        k_i = np.count_nonzero(self.targets != NO_TARGET, axis=1)
        return int(np.sum(k_i * (self.n - counts[self._label_id])))

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Triplets ``(i, j, l)`` (shape (t, 3)) of triplet codes."""
        codes = np.asarray(codes, dtype=np.int64)
        n, k = self.n, self.n_neighbors
        l = codes % n
        q = codes // n
        i, rank = q // k, q % k
        return np.column_stack([i, self.targets[i, rank], l])

    def violated_codes(self, L: np.ndarray, *, return_margins: bool = False):
        r"""Sorted codes of the triplets with ``margin + D(i, j) - D(i, l) > 0`` at :math:`M = L^\top L`.

        Parameters
        ----------
        L : ndarray, shape (r, d)
            A factor of the metric (``r`` may be smaller than ``d``).
        return_margins : bool
            Also return the margins of the violated triplets (aligned with the codes).

        Notes
        -----
        Each unordered pair of differently-labelled points is measured once (class ``c``
        against the classes after it) and tested in both directions (either point as anchor).
        """
        return_margins = check_bool(return_margins, "return_margins")
        L = np.asarray(L, dtype=np.float64)
        if L.ndim != 2 or L.shape[1] != self.X.shape[1]:
            raise ValueError(f"L must have shape (r, {self.X.shape[1]}); got {L.shape}")
        n, k, T = self.n, self.n_neighbors, self.targets
        Z = self.X @ L.T
        Z -= Z.mean(axis=0)   # distances do not change; smaller norms make the expansion's round-off smaller
        sq = np.einsum("ij,ij->i", Z, Z)
        diff_t = Z[:, None, :] - Z[T]
        dt = np.einsum("ikr,ikr->ik", diff_t, diff_t)  # (n, k) target distances
        dt[T == NO_TARGET] = -np.inf  # a missing target is violated by no impostor
        radius = dt.max(axis=1) + self.margin
        codes, margins = [], []

        def collect(anchor, other):
            if anchor.size == 0:
                return
            diff = Z[anchor] - Z[other]
            dil = np.einsum("ij,ij->i", diff, diff)
            marg = self.margin + dt[anchor] - dil[:, None]  # (c, k)
            ci, cr = np.nonzero(marg > 0)
            codes.append((anchor[ci] * k + cr) * n + other[ci])
            margins.append(marg[ci, cr])

        # the block's round-off (CANDIDATE_ROUNDINGS) is at most the per-point widening below (max
        # |z|^2 in place of the partner's): candidates within it are re-measured exactly by collect,
        # so the widening loses nothing and costs no pass over the block
        rtol = (L.shape[0] + CANDIDATE_ROUNDINGS) * float(np.finfo(np.float32).eps)
        wide = (radius + rtol * (sq + sq.max(initial=0.0) + self.margin)).astype(np.float32)
        Z32, sq32 = Z.astype(np.float32), sq.astype(np.float32)
        order = np.argsort(self._label_id, kind="stable")
        bounds = np.searchsorted(self._label_id[order], np.arange(self._label_id.max() + 2))
        for c in range(len(bounds) - 2):
            rows_c, cols = order[bounds[c]:bounds[c + 1]], order[bounds[c + 1]:]
            Zc, sq_c = Z32[cols], sq32[cols]
            step = max(1, self.chunk_elements // max(cols.size, 1))
            for start in range(0, rows_c.size, step):
                rows = rows_c[start:start + step]
                D = Zc @ Z32[rows].T   # (cols, rows): squared distances, built in place
                D *= -2.0
                D += sq32[rows]
                D += sq_c[:, None]
                b, a = np.nonzero(D < wide[rows])   # anchor in class c
                collect(rows[a], cols[b])
                b, a = np.nonzero(D < wide[cols, None])   # anchor in a later class
                collect(cols[b], rows[a])
        if not codes:
            empty = np.zeros(0, dtype=np.int64)
            return (empty, np.zeros(0)) if return_margins else empty
        codes, margins = np.concatenate(codes), np.concatenate(margins)
        srt = np.argsort(codes)
        return (codes[srt], margins[srt]) if return_margins else codes[srt]

    def objective(self, M, regularization: float) -> float:
        r"""The LMNN objective at a PSD ``M`` over the *full* implicit triplet set.

        :math:`\rho \sum_S D_M(i, j) + (1 - \rho) \sum_{T} [\text{margin} + D_M(i, j) - D_M(i, l)]_+`
        (:math:`\rho` = ``regularization``),
        the violated triplets found by the search (nothing is materialised).
        """
        L = psd_factor(M)
        _, marg = self.violated_codes(L, return_margins=True)
        P = self.target_pairs
        Z = self.X @ L.T
        diff = Z[P[:, 0]] - Z[P[:, 1]]
        return float(regularization * np.einsum("ij,ij->", diff, diff) + (1.0 - regularization) * marg.sum())

    def violated(self, M) -> np.ndarray:
        """Triplets ``(i, j, l)`` violated at a PSD matrix ``M`` (shape (t, 3), code order)."""
        return self.decode(self.violated_codes(psd_factor(M)))


#: Points used (an evenly strided subset) to estimate the typical squared distance between
#: differently-labelled points when explaining an oversized triplet set (a diagnosis only).
DIAGNOSIS_POINTS = 1000


def too_many_triplets_message(search: ImpostorSearch, L: np.ndarray, count: int, max_triplets: int,
                              what: str) -> str:
    r"""Say why ``count`` LMNN triplets exceed ``max_triplets`` at :math:`M = L^\top L`, naming the cause.

    The cause is measured, not assumed: if the median squared distance at ``M`` between points of
    different classes is below the margin, the metric is small next to the margin (typically a
    start ``M0 = I`` on data at a small scale: LMNN is invariant under ``X -> sX`` only with
    ``M -> M / s^2``) and nearly every triplet is violated; otherwise the data simply has that
    many triplets near violation and only a larger cap (memory) or fewer targets help.
    """
    X, y = search.X, search.y
    sub = np.arange(0, search.n, max(1, search.n // DIAGNOSIS_POINTS))
    Z = X[sub] @ np.asarray(L, dtype=np.float64).T
    iu, ju = np.triu_indices(sub.size, 1)
    other = y[sub][iu] != y[sub][ju]
    diff = Z[iu[other]] - Z[ju[other]]
    med = float(np.median(np.einsum("ij,ij->i", diff, diff))) if diff.size else 0.0
    gb = WORKING_SET_BYTES_PER_TRIPLET * count / 1e9
    head = f"{what} ({count} > max_triplets = {max_triplets}, of {search.n_triplets} LMNN triplets)"
    if med < search.margin:
        factor = "" if med == 0 else f" by at least {search.margin / med:.3g}"
        return (f"{head}: the metric is small next to the margin (median squared distance between points "
                f"of different classes {med:.3g} < margin {search.margin:.3g}), so nearly every triplet "
                f"is violated; scale M0 up to the data{factor} (M0 = I is too small for data at a small "
                "scale) or rescale X")
    return (f"{head}: the metric's scale matches the margin (median squared distance between points of "
            f"different classes {med:.3g} >= margin {search.margin:.3g}), the data just has this many "
            f"triplets near violation; raise max_triplets if memory allows (about {gb:.2g} GB) or use "
            "fewer target neighbours n_neighbors")


def impostor_oracle(search: ImpostorSearch, regularization: float, *, max_triplets: int = MAX_WORKING_TRIPLETS):
    r"""The constraint oracle of :func:`cvxmetric.solvers.subgradient.projected_subgradient` for LMNN.

    Returns ``oracle(M, lam, V) -> (ConstraintSet, coef) | None``: every LMNN triplet violated
    at ``M`` (weight and coefficient ``1 - regularization``, margin ``search.margin``), in code order. The factor
    comes from the eigendecomposition the engine already did:
    :math:`L = \mathrm{diag}(\sqrt{\lambda_+})\, V^\top`. Raises ``RuntimeError`` when more than
    ``max_triplets`` triplets are violated (the message names the cause:
    :func:`too_many_triplets_message`).
    """
    def oracle(M, lam, V):
        pos = lam > 0
        L = (V[:, pos] * np.sqrt(lam[pos])).T
        codes = search.violated_codes(L)
        if codes.size == 0:
            return None
        if codes.size > max_triplets:
            raise RuntimeError(too_many_triplets_message(
                search, L, int(codes.size), max_triplets, "too many triplets are violated at the current metric"))
        push = 1.0 - regularization
        return (ConstraintSet.from_triplets(search.decode(codes), delta=search.margin, weight=push),
                np.full(codes.size, push))

    return oracle
