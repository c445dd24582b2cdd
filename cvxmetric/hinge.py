r"""Difference-vector geometry and the one hinge loss of the project.

Everything that evaluates :math:`\langle M, C_{ij} - C_{kl}\rangle` for many constraints, or sums
:math:`\sum_q c_q (C_{ij} - C_{kl})`, goes through :class:`QuadrupletGeometry`. It stores the
difference vectors :math:`u_q = x_i - x_j` and :math:`v_q = x_k - x_l` only for the non-degenerate
halves of each constraint (a degenerate pair :math:`(i, i)` has :math:`C_{ii} = 0` and costs
nothing), and never forms a :math:`d \times d` matrix per constraint.

:class:`HingeLoss` is the hinge term :math:`\sum_q c_q [\delta_q + \langle M, A_q\rangle]_+`
(:math:`A_q = C_{ij} - C_{kl}`) with an *incremental* subgradient (thesis sec. 2.3.3): it keeps
:math:`G = \sum_{q \in \mathcal{N}^+} c_q A_q` and, when the violated set changes, adds and removes
only the constraints that changed side.

Two forms of the operators
--------------------------
:math:`K M = (\langle M, A_q\rangle)_q` and :math:`K^* c = \sum_q c_q A_q` have two exact forms,
chosen per call by a measured cost model (:func:`operator_costs`; ``path=`` forces one):

* ``"differences"``: one difference vector per non-degenerate half, :math:`\langle M, u u^\top\rangle
  = u^\top M u` and :math:`\sum c\, u u^\top = U^\top \mathrm{diag}(c) U`: :math:`O(m d^2)`.
* ``"points"``: the constraints' halves are endpoint pairs :math:`(a, b)` of the ``n`` points; the
  ``P`` distinct pairs are listed once (:class:`PairTable`). :math:`D_M(a, b) = h_a + h_b
  - 2 x_a^\top z_b` with :math:`Z = X M` (:math:`O(n d^2)`), :math:`h_a = x_a^\top z_a`, and one
  d-length dot product per pair (:math:`O(P d)`, or the entries of the Gram matrix :math:`Z X^\top`
  when :math:`n^2 < P`); :math:`K^* c = X^\top \mathcal{L}_c X` with the weighted graph Laplacian
  :math:`\mathcal{L}_c = \sum_p w_p (e_a - e_b)(e_a - e_b)^\top` (:math:`w_p` the signed sum of the
  coefficients of the halves on pair p), formed as :math:`X^\top \mathrm{diag}(\deg) X - T - T^\top`
  with :math:`T = X^\top (W X)` and the upper triangular weight matrix W, one stored entry per
  pair, whose sparsity pattern is built once: :math:`O(m + P d + n d^2)`; when the pairs fill a good part of the n x n matrix (10^6
  quadruplets on 2,000 points), a dense :math:`W_{ab} = w_p` kept between calls instead:
  :math:`O(m + P + n^2 d)` in one dense product. X is centred first (differences do not change, and the cancellation in
  :math:`h_a + h_b - 2 x_a^\top z_b` is then relative to the spread of the data, not its offset).
  For :math:`M = L^\top L` of rank r (:meth:`QuadrupletGeometry.values_factor`) the pairs read
  :math:`F = X L^\top`: :math:`O(n d r + P r)`.
"""
from __future__ import annotations

import math

import numpy as np

from ._checks import as_data_matrix, index_dtype, zero_length_mask
from .constraints import ConstraintSet

__all__ = ["QuadrupletGeometry", "HingeLoss", "PairTable", "operator_costs", "projection_costs", "normal_costs",
           "LOWRANK_MIN_EIGH_SHARE", "OPERATOR_PATHS", "COST_GEMM", "COST_DENSE"]

#: The two exact forms of K and K* (module docstring).
OPERATOR_PATHS = ("differences", "points")

# Cost model of the two paths, in seconds per unit, measured on one BLAS thread (OpenBLAS, 2-core
# x86-64 shared machine; ``python -m benchmarks.scale --calibrate`` prints model against measured
# times). Only ratios matter: the model picks the cheaper path, and both are exact. Measured (ms,
# path chosen first): n=8000, m=1e4, d=50: K 2.4 vs 3.3, K* 2.3 vs 3.7; n=8000, m=1e5: K 9.9 vs 76,
# K* 11 vs 67; n=2000, m=1e4, d=1000: K 330 vs 850, K* 156 vs 1280; n=2000, m=1000, d=20: K 0.06
# (differences) vs 0.13.
#: dense matrix product, per multiply-add (U @ M, X @ M, X^T (L X), Z X^T): 21-44 GFlop/s measured.
COST_GEMM = 8.0e-11
#: square dense kernels (a Gram matrix A^T A, a Cholesky factor), per multiply-add: measured 14 ms
#: for the Cholesky factor of order 1065 and 40 ms for the Gram matrix of a 2130 x 1065 block.
COST_DENSE = 3.5e-11
#: one gathered and multiplied double of the pair gathers (np.take of sorted pair rows + einsum).
COST_GATHER = 4.0e-10
#: one streamed double of an elementwise pass over an (m, d) or (n, n) array.
COST_STREAM = 1.5e-9
#: one stored entry times one column of a sparse (CSR) product L @ X.
COST_SPARSE = 6.0e-10
#: one scalar gather/scatter (np.bincount, fancy indexing of a length-m vector).
COST_SCALAR = 2.0e-9
#: fixed cost of one call (Python and allocation overhead) of each path (points: a dozen numpy
#: calls, the sparse matrix wrapper; measured 0.1-0.4 ms on small instances under load).
COST_CALL = {"differences": 2.0e-5, "points": 3.0e-4}
#: one entry of a (rows, J) block of ``rank_one_blocks``, per half and column (points path: two
#: gathered rows of the cache-resident F = X V, a difference and a square): measured 16 ms for 45,000
#: constraints (the support of a 10^5 multiplier) and J = 30 beside 26 ms for one K* (loaded machine).
COST_RANK_ONE = 2.0e-9
#: building a pair table, per half (two sorts of integer keys and the CSR pattern).
COST_BUILD = 1.5e-7
#: the sparse W of a sum over a subset of the rows, per pair (scipy's coordinates to CSR, with its
#: duplicates summed): measured on 2,000 points with 10^6 quadruplets (one BLAS thread, CPU time),
#: 10^4-4 x 10^5 rows in 1.6-65 ms, 3.3-3.8e-8 s per pair beyond the rest of the model; 10^5
#: quadruplets, 4.6e-8.
COST_SUBSET_PAIR = 4.0e-8
#: The Gram form of the points path stores an n x n matrix: not beyond this many points.
GRAM_MAX_POINTS = 4096
#: :meth:`QuadrupletGeometry.frobenius_norms` reads a row's products from Gram entries, each with a
#: rounding error of about :math:`\sqrt{d}\,\epsilon\,s` (s: the squared norms of the row's four
#: centred points), so :math:`\|A\|_F^2` carries an error of about :math:`16 \sqrt{d}\,\epsilon\,
#: s^2`; a row with :math:`\|A\|_F^2` below this fraction of :math:`s^2` is recomputed from its
#: difference vectors, so every row keeps a relative error below :math:`10^{-6}` up to
#: :math:`d = 10^5` (16 x 316 x 2.2e-16 / 1e-6 = 1.1e-6 at most; typically far less).
GRAM_CANCELLATION = 1.0e-6
#: Rows per chunk of the pair gathers (keeps the gathered blocks in cache).
GATHER_CHUNK = 8192
#: Arrays of at least this many doubles (32 MB, glibc's largest threshold for serving an allocation
#: by mmap) come fresh from the kernel at every allocation, each page faulted in and zeroed: the
#: pair table keeps its per-pair work arrays of this size between calls (one distance per pair,
#: one weight per pair). Measured: a fresh 80 MB result per elementwise product cost 40 ms of system
#: time against none into a kept array; the pair weights of 10^7 quadruplets over 1.9 x 10^7 pairs
#: 0.17 s per product accumulated into a kept array (``np.add.at``) against 0.44 s by
#: ``np.bincount`` into a fresh one. Below it ``np.bincount`` is faster (10^6 rows: 7 ms against 9).
KEPT_ARRAY_MIN = 1 << 22


def operator_costs(n_points: int, n_pairs: int, n_rows: int, n_halves: int, d: int, r: int | None = None,
                   build: bool = False, subset: bool | None = None) -> dict:
    r"""Modelled seconds of one :math:`K M` and one :math:`K^* c` on each path (module constants).

    Parameters
    ----------
    n_points : int
        Points touched by the constraints (``n``).
    n_pairs : int
        Distinct endpoint pairs ``P``.
    n_rows : int
        Constraints ``m``.
    n_halves : int
        Non-degenerate halves (rows of ``U`` and ``V`` together).
    d : int
        Dimension.
    r : int, optional
        Rank of a factor :math:`M = L^\top L` (:meth:`QuadrupletGeometry.values_factor`); the
        products with M then cost r instead of d columns.
    build : bool
        Add the cost of building the pair table to the points path (a one-off sum over a subset of
        rows; the table of all rows is built once and cached).
    subset : bool, optional
        A sum over a subset of the rows (default: ``build``): K* then takes the sparse W on the
        rows' pairs (the dense n x n form is kept only for the table of all rows), built per call.

    Returns
    -------
    dict
        ``{"differences": (K, K*), "points": (K, K*)}`` in seconds, ``"dense"``: whether the points
        path forms :math:`K^*` through a dense n x n Laplacian (:meth:`PairTable.laplacian_form`), and
        ``"gram"``: whether the
        points path reads its pair values from the Gram matrix (cheaper than the pair gathers).
    """
    k = d if r is None else r
    diff_K = n_halves * (d * k * COST_GEMM + (k + d) * COST_STREAM)
    diff_Kt = n_halves * (d * d * COST_GEMM + 2 * d * COST_STREAM)
    gather = n_pairs * 2 * k * COST_GATHER
    # the Gram matrix of a factor (K through a rank-k factor) is one triangular product (syrk: half
    # the multiply-adds of a full one); of a dense M, Z X^T in full
    gram_k = k / 2 if r is not None else k
    gram = n_points * n_points * (gram_k * COST_GEMM + COST_STREAM) + n_pairs * COST_SCALAR
    use_gram = n_points <= GRAM_MAX_POINTS and gram < gather
    pts_K = n_points * d * k * COST_GEMM + (gram if use_gram else gather) + 2 * n_rows * COST_SCALAR
    # W X (sparse: one stored entry per pair; dense: n^2 d) and X^T Y; the last term of pts_Kt is
    # Y = (deg / 2) X - W X
    laplacian_sparse = n_pairs * d * COST_SPARSE + n_points * d * d * COST_GEMM
    # the dense W is strictly upper triangular: W X is one triangular product (trmm, n^2 d / 2)
    laplacian_dense = (n_points * n_points * d / 2 * COST_GEMM + n_pairs * COST_SCALAR
                       + n_points * d * d * COST_GEMM)
    # the dense form keeps an n x n matrix between calls: only for the cached table of all rows
    subset = build if subset is None else subset
    use_dense = not subset and n_points <= GRAM_MAX_POINTS and laplacian_dense < laplacian_sparse
    pts_Kt = (2 * n_rows + 4 * n_pairs) * COST_SCALAR + (laplacian_dense if use_dense else laplacian_sparse) \
        + n_points * d * COST_STREAM
    if subset:   # the sparse W of the rows' pairs, built per call (coordinates to rows, duplicates summed)
        pts_Kt += COST_SUBSET_PAIR * n_pairs
    if build:
        extra = n_halves * COST_BUILD + n_points * d * COST_STREAM
        pts_K, pts_Kt = pts_K + extra, pts_Kt + extra
    cd, cp = COST_CALL["differences"], COST_CALL["points"]
    return {"differences": (diff_K + cd, diff_Kt + cd), "points": (pts_K + cp, pts_Kt + cp), "gram": use_gram,
            "dense": use_dense}


#: A dense symmetric eigenproblem of order d, per d^3 (LAPACK dsyevr on the positive eigenvalues,
#: ~6 % of them; ``cvxmetric.linalg.positive_eigenpairs``), measured on one BLAS thread at load ~4:
#: 0.18 s at d = 1000, 1.30 s at d = 2000 (1.6-1.8e-10); the small Rayleigh-Ritz problems of
#: order 180: 1.8 ms (3e-10).
COST_EIGH = 1.8e-10
COST_EIGH_SMALL = 3.0e-10
#: fixed cost of one low-rank projection step (two dozen numpy calls, the sparse Laplacian):
#: measured at d = 20 (100 points, 600 quadruplets), 1.7 ms per PDHG iteration against 1.2 ms dense.
COST_CALL_LOWRANK = 6.0e-4
#: The low-rank projection is inexact (one Rayleigh-Ritz step on a warm basis), and its inexact
#: steps lengthen the run; it is taken only where the dense step's ``eigh`` is at least this share
#: of the dense step, i.e. where the step it replaces is dominated by the d x d work, not by the
#: products over the constraints (which the low-rank step pays too, column by column). Measured
#: (``python -m benchmarks.scale``, one BLAS thread, dense against cost-model choice without this
#: rule): d = 50 with 10^4 quadruplets 144 against 176 iterations, 10^6 128 against 160 (the
#: low-rank steps were taken on a few early steps at small rank, eigh share 0.000-0.006 of the
#: dense step); d = 500-2000 with 10^4 the share is 0.30-0.68, and the low-rank path pays there
#: (d = 1000: 199 of 208 steps). Any value between the two groups chooses alike at these sizes.
LOWRANK_MIN_EIGH_SHARE = 0.1


def projection_costs(n_points: int, n_pairs: int, d: int, r: int, k: int, kt_dense: float,
                     k_factor: float) -> dict:
    r"""Modelled seconds of one PDHG projection step on each path (module constants).

    Parameters
    ----------
    n_points, n_pairs : int
        Points and distinct pairs of the pair table (the matrix-free :math:`K^* y`).
    d : int
        Dimension.
    r : int
        Rank of the current iterate (its factor :math:`M = V \mathrm{diag}(w) V^\top`).
    k : int
        Columns of the tracked basis of the low-rank path.
    kt_dense, k_factor : float
        Modelled seconds of one full :math:`K^* y` (d x d) and one :math:`K M` through a rank-r
        factor (:meth:`QuadrupletGeometry.product_cost`).

    Returns
    -------
    dict
        ``{"dense": s, "lowrank": s}``. Dense: :math:`K^* y` as a d x d matrix, one ``eigh`` of
        order d (``COST_EIGH``), :math:`K M^+` through the factor. Low-rank: two products of the
        step operator :math:`B \mapsto M B - \tau (R B + X^\top \mathcal{L}_y X B)` with blocks of
        at most 2k columns (:math:`2 n d` multiply-adds per column through the data, the sparse
        Laplacian, :math:`2 d r` through the factor), the block Gram-Schmidt and Rayleigh-Ritz
        problem of order 2k, the d x d iterate :math:`V \mathrm{diag}(w) V^\top` (kept for the
        checks), and :math:`K M^+` through the factor. ``"eigh"``: the dense step's
        eigendecomposition alone (its share of the dense step decides whether the low-rank step
        may be taken at all: :data:`LOWRANK_MIN_EIGH_SHARE`).
    """
    per_col = 2 * n_points * d * COST_GEMM + (n_points + 2 * n_pairs) * COST_SPARSE + 2 * d * r * COST_GEMM
    # AB on k columns and AZ on at most k (Z spans (I - BB^T) AB); Gram-Schmidt, QR and the Ritz
    # vectors ~8 d k^2 multiply-adds
    ritz = 8 * d * k * k * COST_GEMM + (2 * k) ** 3 * COST_EIGH_SMALL
    lowrank = 2 * k * per_col + ritz + d * d * r * COST_GEMM + k_factor + COST_CALL_LOWRANK
    eigh = d ** 3 * COST_EIGH
    dense = kt_dense + eigh + k_factor
    return {"dense": dense, "lowrank": lowrank, "eigh": eigh}


#: The Gram form of :meth:`QuadrupletGeometry.normal_operator` stores an n x n matrix (and one
#: product of the same size): not beyond this many points (2 x 512 MB).
NORMAL_GRAM_MAX_POINTS = 8192


def normal_costs(n_points: int, n_pairs: int, d: int, steps: int, k_dense: float, kt_dense: float) -> dict:
    r"""Modelled seconds of ``steps`` products :math:`K K^*` on each path.

    ``"dense"``: one :math:`K^*` (d x d) and one K per step (``k_dense``, ``kt_dense``: the model of
    :meth:`QuadrupletGeometry.product_cost`); ``"gram"``: the Gram matrix of the points once
    (:math:`n^2 d`), then per step the sparse Laplacian times it, its transpose, and two gathered
    rows of length n per pair (:meth:`QuadrupletGeometry.normal_operator`); ``inf`` beyond
    ``NORMAL_GRAM_MAX_POINTS``.
    """
    dense = steps * (k_dense + kt_dense)
    if n_points > NORMAL_GRAM_MAX_POINTS:
        return {"dense": dense, "gram": math.inf}
    per_step = ((n_points + 2 * n_pairs) * n_points * COST_SPARSE + 2 * n_points * n_points * COST_STREAM
                + 2 * n_pairs * n_points * COST_GATHER + COST_CALL["points"])
    return {"dense": dense, "gram": n_points * n_points * d * COST_GEMM + steps * per_step}


#: Bits of a packed sort key (a non-negative int64): :func:`distinct_keys` sorts ``key << b | position``
#: (one fast sort of values) when both fit, else it takes a stable argsort (measured on 2 x 10^7
#: keys: 0.8 s for the sort of values, 9 s for the argsort).
PACKED_KEY_BITS = 63


def distinct_keys(keys: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The sorted distinct values of ``keys`` (non-negative, below ``bound``) and the position of
    each key among them: ``np.unique(keys, return_inverse=True)``, through one sort of packed keys.

    Parameters
    ----------
    keys : ndarray of int, shape (h,)
    bound : int
        Every key is in ``[0, bound)``.

    Returns
    -------
    distinct : ndarray of int64, shape (P,)
    inverse : ndarray of int, shape (h,)
        ``distinct[inverse] == keys``; int32 when ``P`` fits (:func:`cvxmetric._checks.index_dtype`).

    Notes
    -----
    With :math:`b` the bits of a position :math:`< h`, the packed key :math:`k 2^b + t` of the key
    :math:`k` at position :math:`t` sorts by key, then position; one sort of these values (numpy's
    vectorized sort of integers) replaces the argsort of ``np.unique``, and a key starts a new
    group where it differs from its predecessor. When the packed key does not fit in
    ``PACKED_KEY_BITS`` bits, a stable argsort of the keys gives the same groups.
    """
    keys = np.asarray(keys, dtype=np.int64)
    h = keys.size
    pos_bits = max(int(h - 1).bit_length(), 1)
    if max(int(bound - 1).bit_length(), 1) + pos_bits <= PACKED_KEY_BITS:
        packed = np.sort((keys << pos_bits) | np.arange(h, dtype=np.int64))
        order = packed & ((1 << pos_bits) - 1)
        packed >>= pos_bits
        sorted_keys = packed
    else:
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
    starts = np.ones(h, dtype=bool)
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=starts[1:])
    distinct = sorted_keys[starts]
    group = np.cumsum(starts, dtype=index_dtype(distinct.size))
    group -= 1
    inverse = np.empty(h, dtype=group.dtype)
    inverse[order] = group
    return distinct, inverse


class PairTable:
    r"""The distinct endpoint pairs of a list of halves, and the pattern of their weight matrix.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Data (validated).
    a, b : ndarray of int, shape (h,)
        Endpoints of the ``h`` halves (``a != b``).

    Attributes
    ----------
    Xc : ndarray, shape (n_used, d)
        The points that occur in a pair, centred (differences are translation invariant).
    pa, pb : ndarray of int32 (int64 beyond 2^31 points), shape (P,)
        Endpoints of the distinct pairs in ``Xc`` (``pa < pb``, sorted by ``(pa, pb)``: the gathers
        of ``Xc[pa]`` stream, and the pairs are the rows of the CSR matrix W in order).
    half_pair : ndarray of int32 (int64 beyond 2^31 pairs), shape (h,), or None
        The pair of each half (None in the table of :meth:`QuadrupletGeometry.pair_table`, which
        keeps it per constraint instead).

    Notes
    -----
    Built in :math:`O(n + h \log h)` without a Python object per half: the used points by a mask
    over the rows of X, the pairs by one sort of the packed keys ``lo * n_used + hi``
    (:func:`distinct_keys`), and W's CSR pattern directly from the sorted pairs (row pointers
    by a count per row; no permutation).
    """

    def __init__(self, X: np.ndarray, a: np.ndarray, b: np.ndarray):
        present = np.zeros(X.shape[0], dtype=bool)
        present[a] = True
        present[b] = True
        used = np.flatnonzero(present)
        n = used.size
        renumber = np.zeros(X.shape[0], dtype=index_dtype(n))
        renumber[used] = np.arange(n, dtype=renumber.dtype)
        ua, ub = renumber[a], renumber[b]
        lo = np.minimum(ua, ub).astype(np.int64)
        lo *= n
        lo += np.maximum(ua, ub)
        del ua, ub
        keys, self.half_pair = distinct_keys(lo, n * n)
        del lo
        self.pa, self.pb = (keys // n).astype(renumber.dtype), (keys % n).astype(renumber.dtype)
        Xu = X[used]
        self.Xc = Xu - Xu.mean(axis=0)
        self.n, self.P = n, keys.size
        # CSR pattern of the strictly upper triangular W (W_ab = w_p at pair p = (a, b)): the pairs
        # in key order are its entries in row order
        self._indptr = np.zeros(n + 1, dtype=index_dtype(self.P))
        # pairs per first endpoint: h[pa] is np.repeat(h, counts) (pa is sorted), a stream instead
        # of a gather (measured at P = 1.26 x 10^6: 0.5 ms against 5 ms)
        self._counts = np.bincount(self.pa, minlength=n)
        np.cumsum(self._counts, out=self._indptr[1:])
        self._W = None   # the dense form of laplacian_form, allocated on first use
        self._flat = None   # _flat_index, computed on first use
        # per-pair work arrays of P + 1 entries (the last one a zero slot for degenerate halves),
        # allocated on first use and kept: distances, and weights where P + 1 >= KEPT_ARRAY_MIN
        self._dist = self._weights = None

    def _distance_array(self) -> np.ndarray:
        """The kept (P + 1,) array the distances are written to; its last entry stays 0."""
        if self._dist is None:
            self._dist = np.empty(self.P + 1)
            self._dist[self.P] = 0.0
        return self._dist

    def pair_weights(self, pu: np.ndarray, pv: np.ndarray, coef: np.ndarray) -> np.ndarray:
        r"""The weight of each pair, :math:`w_p = \sum_{c: u_c = p} c_c - \sum_{c: v_c = p} c_c`
        (shape (P,)) for the pair ``pu``, ``pv`` of each row (P for a degenerate half): by
        ``np.bincount``, or accumulated into a kept array where P + 1 >= ``KEPT_ARRAY_MIN`` (then
        the result is a view of that array, overwritten by the next call)."""
        if self.P + 1 < KEPT_ARRAY_MIN:
            w = np.bincount(pu, coef, self.P + 1)[:self.P]
            w -= np.bincount(pv, coef, self.P + 1)[:self.P]
            return w
        if self._weights is None:
            self._weights = np.empty(self.P + 1)
        w = self._weights
        w.fill(0.0)
        np.add.at(w, pu, coef)
        np.subtract.at(w, pv, coef)
        return w[:self.P]

    def _flat_index(self) -> np.ndarray:
        """Position of each pair in a flattened (n, n) matrix (int64: ``n^2`` may exceed int32);
        kept after the first call (the Gram and dense forms, ``n <= GRAM_MAX_POINTS``, read it at
        every call)."""
        if self._flat is None:
            self._flat = self.pa.astype(np.int64) * self.n + self.pb
        return self._flat

    def squared_distances(self, M: np.ndarray, gram: bool, kept: bool = False) -> np.ndarray:
        r""":math:`D_M(a, b)` for every pair, shape (P,): :math:`h_a + h_b - 2 x_a^\top M x_b`.
        ``kept``: written to the table's kept array, returned with its zero slot (shape (P + 1,),
        overwritten by the next call)."""
        Z = self.Xc @ M
        h = np.einsum("ij,ij->i", self.Xc, Z)
        out = self._distance_array() if kept else np.empty(self.P)
        D = out[:self.P]
        if gram:
            np.take((Z @ self.Xc.T).ravel(), self._flat_index(), out=D)
        else:
            for s in range(0, self.P, GATHER_CHUNK):
                sl = slice(s, s + GATHER_CHUNK)
                D[sl] = np.einsum("ij,ij->i", np.take(self.Xc, self.pa[sl], axis=0),
                                  np.take(Z, self.pb[sl], axis=0))
        D *= -2.0
        self._add_endpoint_values(D, h)
        return out

    def factor_distances(self, F: np.ndarray, gram: bool, kept: bool = False) -> np.ndarray:
        r""":math:`\|f_a - f_b\|^2` per pair (shape (P,)) for a factor image ``F = Xc L^T`` (n, r).
        ``kept``: as in :meth:`squared_distances`."""
        out = self._distance_array() if kept else np.empty(self.P)
        D = out[:self.P]
        if not gram:
            for s in range(0, self.P, GATHER_CHUNK):
                sl = slice(s, s + GATHER_CHUNK)
                B = np.take(F, self.pa[sl], axis=0) - np.take(F, self.pb[sl], axis=0)
                D[sl] = np.einsum("ij,ij->i", B, B)
            return out
        from scipy.linalg.blas import dsyrk

        h = np.einsum("ij,ij->i", F, F)
        # the lower triangle of F F^T (half the multiply-adds of F @ F.T), Fortran-ordered: its entry
        # (hi, lo) sits at lo * n + hi, the flat index of pair (lo, hi)
        np.take(np.ravel(dsyrk(-2.0, F, lower=1), order="F"), self._flat_index(), out=D)
        self._add_endpoint_values(D, h)
        return out

    def _add_endpoint_values(self, D: np.ndarray, h: np.ndarray) -> None:
        """``D += h[pa]; D += h[pb]`` over the table's pairs: the first endpoints, sorted, by
        ``np.repeat`` of h over their counts; the second by gathers in blocks of ``GATHER_CHUNK``
        (the indices cast to ``intp`` a block at a time, in cache: a gather through int32 indices
        casts all of them first, measured 6 ms against 2 ms at P = 1.26 x 10^6)."""
        D += np.repeat(h, self._counts)
        for s in range(0, self.pb.size, GATHER_CHUNK):
            D[s:s + GATHER_CHUNK] += np.take(h, self.pb[s:s + GATHER_CHUNK])

    def laplacian_form(self, w: np.ndarray, dense: bool = False) -> np.ndarray:
        r""":math:`X^\top \mathcal{L}_w X = \sum_p w_p (x_a - x_b)(x_a - x_b)^\top` (d, d), symmetric.

        Through the weight matrix :math:`W` (:math:`W_{ab} = w_p` for pair p = (a, b), a < b) and the
        weighted degrees :math:`\deg = W 1 + W^\top 1`: :math:`\mathcal{L}_w = \mathrm{diag}(\deg) - W
        - W^\top`, so with :math:`Y = (\tfrac12 \mathrm{diag}(\deg) - W) X`,
        :math:`X^\top \mathcal{L}_w X = X^\top Y + Y^\top X`: one :math:`n d^2` product
        :math:`X^\top Y` and its transpose. W is sparse (CSR on the table's pattern, :math:`O(P d)`), or
        with ``dense`` an (n, n) matrix kept between calls (only its P entries are rewritten): one
        dense :math:`n^2 d` product, cheaper when the pairs fill a good part of the n x n matrix
        (:func:`operator_costs`)."""
        if dense:
            if self._W is None:
                self._W = np.zeros((self.n, self.n))
            from scipy.linalg.blas import dtrmm

            self._W.ravel()[self._flat_index()] = w
            # the degrees as row and column sums of W (streams: 3.3 ms together at n = 2000, where
            # the two weighted bincounts over P = 1.26 x 10^6 pairs cost 11 ms)
            deg = self._W.sum(axis=1)
            deg += self._W.sum(axis=0)
            # W is strictly upper triangular: W X as a triangular product (half the multiply-adds);
            # the transposed view of the C-ordered W is the Fortran-ordered W^T, lower triangular
            WX = dtrmm(1.0, self._W.T, self.Xc, lower=1, trans_a=1)
        else:
            from scipy import sparse

            deg = self._row_sums(w)
            deg += np.bincount(self.pb, w, self.n)
            WX = sparse.csr_matrix((w, self.pb, self._indptr), shape=(self.n, self.n)) @ self.Xc
        Y = np.multiply(self.Xc, 0.5 * deg[:, None])
        Y -= WX
        G = self.Xc.T @ Y
        G += G.T
        return G

    def _row_sums(self, w: np.ndarray) -> np.ndarray:
        """:math:`W 1` (shape (n,)): the sums of the weights over each first endpoint's pairs, a
        contiguous run of w (the pairs are sorted by it), by ``np.add.reduceat``."""
        out = np.zeros(self.n)
        rows = np.flatnonzero(self._counts)
        if rows.size:
            out[rows] = np.add.reduceat(w, self._indptr[rows])
        return out

    def pairs_form(self, pairs: np.ndarray, w: np.ndarray) -> np.ndarray:
        r""":math:`\sum_i w_i (x_{a_i} - x_{b_i})(x_{a_i} - x_{b_i})^\top` (d, d) over the listed
        pairs of the table (``pairs``: pair indices, repeats summed): :meth:`laplacian_form` with a
        sparse W on those pairs alone, :math:`O(k d + n d^2)` for k listed pairs, no table of their own."""
        from scipy import sparse

        a, b = self.pa[pairs], self.pb[pairs]
        deg = np.bincount(a, w, self.n) + np.bincount(b, w, self.n)
        WX = sparse.csr_matrix((w, (a, b)), shape=(self.n, self.n)) @ self.Xc
        Y = np.multiply(self.Xc, 0.5 * deg[:, None])
        Y -= WX
        G = self.Xc.T @ Y
        G += G.T
        return G

    def laplacian(self, w: np.ndarray, deg: np.ndarray | None = None):
        r"""The weighted Laplacian :math:`\mathcal{L}_w = \mathrm{diag}(\deg) - W - W^\top` (n x n,
        scipy CSR) on the table's pattern; ``deg``: its diagonal, when the caller has it."""
        from scipy import sparse

        if deg is None:
            deg = np.bincount(self.pa, w, self.n) + np.bincount(self.pb, w, self.n)
        W = sparse.csr_matrix((w, self.pb, self._indptr), shape=(self.n, self.n))
        return (sparse.diags(deg, format="csr") - W - W.T).tocsr()


class QuadrupletGeometry:
    r"""Difference vectors of a constraint set on a data matrix.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row.
    constraints : ConstraintSet
        ``m`` constraints indexing rows of ``X``.

    Attributes
    ----------
    m, d : int
        Number of constraints and dimension.
    u_rows, v_rows : ndarray of int
        The constraints with ``i != j`` (resp. ``k != l``), in order.
    U : ndarray, shape (m_u, d)
        :math:`x_i - x_j` for the constraints ``u_rows``; formed on first use.
    V : ndarray, shape (m_v, d)
        :math:`x_k - x_l` for the constraints ``v_rows``; formed on first use.

    Notes
    -----
    The difference vectors take :math:`8 (m_u + m_v) d` bytes (8 GB at 10^7 quadruplets and
    d = 50); the points path (:class:`PairTable`) never forms them, and the passes over all
    constraints that need them (:meth:`squared_lengths`, :meth:`frobenius_norms`) gather them in
    blocks of ``GATHER_CHUNK`` rows. Row positions are int32 below 2^31 constraints
    (:func:`cvxmetric._checks.index_dtype`). The products write their per-pair and per-row
    intermediates into work arrays kept by the geometry and its pair table (``KEPT_ARRAY_MIN``),
    so one geometry serves one thread at a time.
    """

    def __init__(self, X, constraints: ConstraintSet, *, _validated: bool = False):
        if not isinstance(constraints, ConstraintSet):
            raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
        X = X if _validated else as_data_matrix(X)
        constraints.validate(X.shape[0], allow_empty=True)
        idx = constraints.idx
        self.X = X
        self.constraints = constraints
        self.m, self.d = len(constraints), X.shape[1]
        rows = index_dtype(self.m)
        self.u_rows = np.flatnonzero(idx[:, 0] != idx[:, 1]).astype(rows)
        self.v_rows = np.flatnonzero(idx[:, 2] != idx[:, 3]).astype(rows)
        # position of each constraint's u (v) vector in U (V), or -1 when degenerate
        self._u_pos = self._positions(self.u_rows)
        self._v_pos = self._positions(self.v_rows)
        self._U = self._V = None   # the difference vectors, formed on first use (U, V)
        self._pairs = None   # (PairTable, pair of each u half, pair of each v half), built on first use
        self._ends = None    # per constraint, the pair table endpoints of its halves (_pair_ends)
        self._norms = None   # frobenius_norms, computed on first use
        self._rows_work = None   # a kept (m,) work array (_row_array)
        self._gram = None   # the Gram matrix of the pair table's points (points_gram), formed on request

    def _positions(self, rows: np.ndarray) -> np.ndarray:
        pos = np.full(self.m, -1, dtype=index_dtype(self.m))
        pos[rows] = np.arange(rows.size, dtype=pos.dtype)
        return pos

    @property
    def U(self) -> np.ndarray:
        """:math:`x_i - x_j` of the constraints ``u_rows``, shape (m_u, d) (formed once, on first use)."""
        if self._U is None:
            self._U = self._half_differences(self.u_rows, 0)
        return self._U

    @property
    def V(self) -> np.ndarray:
        """:math:`x_k - x_l` of the constraints ``v_rows``, shape (m_v, d) (formed once, on first use)."""
        if self._V is None:
            self._V = self._half_differences(self.v_rows, 2)
        return self._V

    def _half_differences(self, rows: np.ndarray, first: int) -> np.ndarray:
        """``X[idx[rows, first]] - X[idx[rows, first + 1]]``, shape (len(rows), d), formed in place
        block by block (exactly 0 for a degenerate half)."""
        idx = self.constraints.idx
        out = np.empty((rows.size, self.d))
        for s in range(0, rows.size, GATHER_CHUNK):
            r = rows[s:s + GATHER_CHUNK]
            block = out[s:s + r.size]
            np.take(self.X, idx[r, first], axis=0, out=block)
            block -= np.take(self.X, idx[r, first + 1], axis=0)
        return out

    def subset(self, rows) -> "QuadrupletGeometry":
        """Geometry of a subset of the constraints (no re-validation of ``X``); the Frobenius norms,
        when computed, go with their rows (:meth:`frobenius_norms`)."""
        out = QuadrupletGeometry(self.X, self.constraints.subset(rows), _validated=True)
        if self._norms is not None:
            out._norms = self._norms[np.asarray(rows)]
        return out

    def permuted(self, order) -> "QuadrupletGeometry":
        """The geometry of the same constraints in another order: row i is row ``order[i]`` of this
        one (``order`` a permutation of ``range(m)``). The pair table, when built, is this one's
        (the same halves have the same pairs; only the pair of each row moves), as are the points'
        Gram matrix and the Frobenius norms: the two geometries then share the table's kept work
        arrays, so only one of them is used at a time."""
        order = np.asarray(order)
        if order.shape != (self.m,) or not np.issubdtype(order.dtype, np.integer):
            raise ValueError(f"order must be a permutation of range({self.m}) (integers, shape ({self.m},)); "
                             f"got shape {order.shape}, dtype {order.dtype}")
        seen = np.zeros(self.m, dtype=bool)
        if self.m and (order.min() < 0 or order.max() >= self.m):
            raise ValueError(f"order must be a permutation of range({self.m}); it has entries outside it")
        seen[order] = True
        if not np.all(seen):
            raise ValueError(f"order must be a permutation of range({self.m}); it repeats rows")
        out = self.subset(order)
        if self._pairs is not None:
            table, pu, pv = self._pairs
            out._pairs = (table, pu[order], pv[order])
        out._gram = self._gram
        return out

    def pair_order(self) -> np.ndarray:
        """The permutation of the constraints that sorts them by the pair of their u half (stable;
        degenerate halves last): in that order :meth:`values` reads the pair values of the u halves
        and :meth:`weighted_sum` accumulates their weights as streams instead of random accesses
        (builds the pair table)."""
        return np.argsort(self.pair_table()[1], kind="stable")

    def extended(self, constraints: ConstraintSet) -> "QuadrupletGeometry":
        """Geometry of ``self.constraints + constraints`` on the same ``X``.

        The stored difference vectors and Frobenius norms are reused; only those of the new
        constraints are formed (the norms at once when this geometry's are computed: a caller that
        reads them reads them again, e.g. PDHG on a working set that grows round by round).
        """
        new = QuadrupletGeometry(self.X, constraints, _validated=True)
        out = object.__new__(QuadrupletGeometry)
        out.X = self.X
        out.constraints = ConstraintSet.concatenate(self.constraints, constraints)
        out.m, out.d = self.m + new.m, self.d
        rows = index_dtype(out.m)
        out.u_rows = np.concatenate([self.u_rows, new.u_rows.astype(rows) + self.m]).astype(rows)
        out.v_rows = np.concatenate([self.v_rows, new.v_rows.astype(rows) + self.m]).astype(rows)
        out._u_pos = out._positions(out.u_rows)
        out._v_pos = out._positions(out.v_rows)
        # the difference vectors formed so far are reused; the new rows' are formed with them
        out._U = None if self._U is None else np.concatenate([self._U, new.U])
        out._V = None if self._V is None else np.concatenate([self._V, new.V])
        out._pairs = out._ends = out._rows_work = None
        out._gram = None   # the pair table (and its points) are those of the extended rows
        out._norms = None if self._norms is None else np.concatenate([self._norms, new.frobenius_norms()])
        return out

    # ------------------------------------------------------------------ operator paths
    def pair_table(self) -> tuple[PairTable, np.ndarray, np.ndarray]:
        """The :class:`PairTable` of all halves (built once), and per constraint the pair of its
        ``u`` and ``v`` half (``P``, a zero slot, for a degenerate half)."""
        if self._pairs is None:
            idx = self.constraints.idx
            table = PairTable(self.X, np.concatenate([idx[self.u_rows, 0], idx[self.v_rows, 2]]),
                              np.concatenate([idx[self.u_rows, 1], idx[self.v_rows, 3]]))
            # intp, not the table's int32: K and K* gather and bincount through pu and pv at every
            # call, and numpy casts other index dtypes to intp per call (measured: +7 ms per 10^6)
            pu = np.full(self.m, table.P, dtype=np.intp)
            pv = np.full(self.m, table.P, dtype=np.intp)
            pu[self.u_rows] = table.half_pair[:self.u_rows.size]
            pv[self.v_rows] = table.half_pair[self.u_rows.size:]
            table.half_pair = None   # read through pu and pv from here on
            self._pairs = (table, pu, pv)
        return self._pairs

    def _costs(self, r: int | None, n_rows: int | None, which: str = "K") -> tuple[dict, int]:
        halves = self.u_rows.size + self.v_rows.size
        full = n_rows is None
        n_rows = self.m if full else n_rows
        halves = halves if full else min(halves, 2 * n_rows)
        n_points, n_pairs = min(self.X.shape[0], 2 * halves), halves
        # K* over a subset of rows reads the table of all rows where the full K* runs on the points
        # path (that table is then built once, by the first full product); otherwise it builds one
        build = not full and not (which == "Kt" and self._full_table_for_rows())
        costs = operator_costs(n_points, n_pairs, n_rows, halves, self.d, r, build=build, subset=not full)
        return costs, halves

    def _full_table_for_rows(self) -> bool:
        """Whether :meth:`weighted_sum` over a subset of rows reads the pair table of all rows (the
        full K* runs on the points path): a function of the sizes alone, like every path choice."""
        return self.operator_path("Kt")[0] == "points"

    def product_cost(self, which: str = "K", *, r: int | None = None, n_rows: int | None = None) -> float:
        """Modelled seconds of ``K`` (values; of a rank-``r`` factor when given) or ``"Kt"`` on the
        path :meth:`operator_path` chooses (:func:`operator_costs`), over all constraints or over
        ``n_rows`` of them (``rows=`` of :meth:`weighted_sum`, whose points path reads the table of
        all rows where the full K* is on the points path, and builds a pair table for the call
        otherwise)."""
        costs, _ = self._costs(r, n_rows, which)
        k = 0 if which == "K" else 1
        return min(costs["points"][k], costs["differences"][k])

    def rank_one_cost(self, J: int, n_rows: int | None = None) -> float:
        """Modelled seconds of :meth:`values_rank_one` with ``J`` columns over ``n_rows`` of the
        constraints (default all), on the cheaper path."""
        halves = self.u_rows.size + self.v_rows.size
        if n_rows is not None:
            halves = min(halves, 2 * n_rows)
        n_points = min(self.X.shape[0], 2 * halves)
        diff = halves * J * (self.d * COST_GEMM + COST_RANK_ONE)
        points = n_points * self.d * J * COST_GEMM + 2 * halves * J * COST_RANK_ONE + COST_CALL["points"]
        return min(diff, points)

    def operator_path(self, which: str = "K", *, r: int | None = None, n_rows: int | None = None,
                      path: str | None = None) -> tuple[str, bool]:
        """The cheaper path of :func:`operator_costs` for ``K`` (values) or ``"Kt"`` (weighted sums),
        and whether the points path reads the Gram matrix (``K``) or forms the dense Laplacian
        (``"Kt"``). ``path`` forces a path (tests, benchmarks).

        The counts are bounded from above without building the pair table (points ``min(n, 2 h)``,
        pairs ``h`` for ``h`` halves), so the choice is a function of the sizes alone: the same
        whether or not the table has been built, hence the same iterates in every run.
        """
        costs, halves = self._costs(r, n_rows, which)
        if path is None:
            k = 0 if which == "K" else 1
            path = "points" if halves and costs["points"][k] < costs["differences"][k] else "differences"
        elif path not in OPERATOR_PATHS:
            raise ValueError(f"path must be one of {OPERATOR_PATHS} or None; got {path!r}")
        return path, bool(costs["gram"] if which == "K" else costs["dense"])

    def squared_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Squared Euclidean lengths :math:`\\|u_q\\|^2` and :math:`\\|v_q\\|^2`, shape (m,) each."""
        a, b, _ = self._length_products(cross=False)
        return a, b

    def points_gram(self) -> np.ndarray:
        r"""The Gram matrix :math:`G = X_c X_c^\top` (n x n) of the pair table's centred points
        (:meth:`pair_table`), formed on the first call and kept while the geometry lives (the
        power iteration of :meth:`normal_operator` and the row norms of :meth:`frobenius_norms` read
        the same one)."""
        if self._gram is None:
            Xc = self.pair_table()[0].Xc
            self._gram = Xc @ Xc.T
        return self._gram

    def _length_products(self, cross: bool) -> tuple:
        r""":math:`\|u_q\|^2`, :math:`\|v_q\|^2` and (with ``cross``) :math:`u_q^\top v_q` per
        constraint, shape (m,) each, in one pass over blocks of ``GATHER_CHUNK`` rows
        (:meth:`difference_vectors`: no (m, d) array); ``None`` for the product without ``cross``."""
        return self._gathered_length_products(np.arange(self.m), cross)

    def _gathered_length_products(self, rows: np.ndarray, cross: bool) -> tuple:
        """:meth:`_length_products` of ``rows`` (ints)."""
        a, b = np.empty(rows.size), np.empty(rows.size)
        uv = np.empty(rows.size) if cross else None
        for s in range(0, rows.size, GATHER_CHUNK):
            sl = slice(s, min(s + GATHER_CHUNK, rows.size))
            Du, Dv = self.difference_vectors(rows[sl])
            a[sl] = np.einsum("ij,ij->i", Du, Du)
            b[sl] = np.einsum("ij,ij->i", Dv, Dv)
            if cross:
                uv[sl] = np.einsum("ij,ij->i", Du, Dv)
        return a, b, uv

    def zero_length(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Masks, shape (m,) each, of the constraints whose :math:`u_q` (resp. :math:`v_q`) is zero.

        A half is zero when its indices repeat (:math:`i = j`, a pair constraint's empty half) or
        when its two points are duplicates by the project's relative test
        :func:`cvxmetric._checks.zero_length_mask` (per feature, relative to that feature's
        magnitude: the verdict is the same for ``X``, ``s * X`` and feature scales 1e-4..1e4).
        Methods that cannot use such a constraint (BoostMetric, ITML, MMC) reject or skip it with
        these masks.
        """
        zu = np.ones(self.m, dtype=bool)
        zv = np.ones(self.m, dtype=bool)
        zu[self.u_rows] = zero_length_mask(self.U, self.X)
        zv[self.v_rows] = zero_length_mask(self.V, self.X)
        return zu, zv

    def distances(self, M: np.ndarray, *, path: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        r""":math:`D_M(i, j)` and :math:`D_M(k, l)` for every constraint, shape (m,) each.

        ``path`` (default: the cost model, :meth:`operator_path`): ``"differences"``, one product
        per half, :math:`O((m_u + m_v) d^2)`; ``"points"``, :math:`O(n d^2 + P d)` through the
        distinct endpoint pairs (module docstring).
        """
        path, gram = self.operator_path("K", path=path)
        if path == "points":
            table, pu, pv = self.pair_table()
            D = table.squared_distances(M, gram, kept=True)
            return np.take(D, pu), np.take(D, pv)   # np.take: faster than D[pu] on 1-D arrays
        a = np.zeros(self.m)
        b = np.zeros(self.m)
        if self.u_rows.size:
            a[self.u_rows] = np.einsum("ij,ij->i", self.U @ M, self.U)
        if self.v_rows.size:
            b[self.v_rows] = np.einsum("ij,ij->i", self.V @ M, self.V)
        return a, b

    def values(self, M: np.ndarray, *, path: str | None = None) -> np.ndarray:
        r""":math:`\langle M, C_{ij} - C_{kl}\rangle` for every constraint, shape (m,): :math:`K M`.

        Cost and ``path``: see :meth:`distances`.
        """
        M = np.asarray(M, dtype=np.float64)
        path, gram = self.operator_path("K", path=path)
        if path == "points":
            return self._row_differences(self.pair_table()[0].squared_distances(M, gram, kept=True))
        a, b = self.distances(M, path=path)
        a -= b
        return a

    def _row_differences(self, D: np.ndarray) -> np.ndarray:
        """``D[pu] - D[pv]`` per constraint (a fresh (m,) array) for pair values ``D`` with the zero slot."""
        _, pu, pv = self.pair_table()
        out = np.take(D, pu)
        out -= np.take(D, pv, out=self._row_array())
        return out

    def _row_array(self) -> np.ndarray:
        """A kept (m,) work array (the subtrahend of :meth:`_row_differences`)."""
        if self._rows_work is None:
            self._rows_work = np.empty(self.m)
        return self._rows_work

    def values_factor(self, L: np.ndarray, *, path: str | None = None) -> np.ndarray:
        r"""Same as :meth:`values` for :math:`M = L^\top L` (L of shape (r, d)): cost :math:`O(m d r)`
        (``"differences"``) or :math:`O(n d r + P r)` (``"points"``)."""
        L = np.asarray(L, dtype=np.float64)
        path, gram = self.operator_path("K", r=L.shape[0], path=path)
        if path == "points":
            table = self.pair_table()[0]
            return self._row_differences(table.factor_distances(table.Xc @ L.T, gram, kept=True))
        out = np.zeros(self.m)
        if self.u_rows.size:
            P = self.U @ L.T
            out[self.u_rows] += np.einsum("ij,ij->i", P, P)
        if self.v_rows.size:
            Q = self.V @ L.T
            out[self.v_rows] -= np.einsum("ij,ij->i", Q, Q)
        return out

    def weighted_sum(self, coef: np.ndarray, rows: np.ndarray | None = None, *,
                     path: str | None = None) -> np.ndarray:
        r""":math:`\sum_q c_q (C_{ij} - C_{kl})` as a (d, d) matrix: :math:`K^* c`.

        Parameters
        ----------
        coef : ndarray, shape (m,) or (len(rows),)
            Coefficients :math:`c_q`.
        rows : ndarray of int, optional
            Restrict the sum to these constraints (then ``coef`` is aligned with ``rows``).
        path : {"differences", "points"}, optional
            Default: the cost model (:meth:`operator_path`). ``"differences"``:
            :math:`U^\top \mathrm{diag}(c) U - V^\top \mathrm{diag}(c) V`, :math:`O(m d^2)`;
            ``"points"``: :math:`X^\top \mathcal{L}_c X`, :math:`O(m + P d + n d^2)` (module
            docstring; over ``rows``, the rows' pairs in the table of all rows where the full
            product is on the points path (:meth:`PairTable.pairs_form`), else a pair table of those
            rows built for the call).
        """
        coef = np.asarray(coef, dtype=np.float64)
        if rows is None:
            if coef.shape != (self.m,):
                raise ValueError(f"coef must have shape ({self.m},); got {coef.shape}")
            path, dense = self.operator_path("Kt", path=path)
            if path == "points":
                table, pu, pv = self.pair_table()
                return table.laplacian_form(table.pair_weights(pu, pv, coef), dense)
            # all rows: no gather of U/V (twice as fast; the PDHG solver calls this every iteration)
            G = (self.U * coef[self.u_rows, None]).T @ self.U
            G -= (self.V * coef[self.v_rows, None]).T @ self.V
            return 0.5 * (G + G.T)
        rows = np.asarray(rows, dtype=np.int64)
        path, _ = self.operator_path("Kt", n_rows=rows.size, path=path)
        pu = self._u_pos[rows]
        ku = pu >= 0
        pv = self._v_pos[rows]
        kv = pv >= 0
        if path == "points":
            if not (np.any(ku) or np.any(kv)):
                return np.zeros((self.d, self.d))
            if self._full_table_for_rows():   # the pairs of these rows in the table of all rows
                _, pair_u, pair_v = self.pair_table()
                return self._pairs[0].pairs_form(np.concatenate([pair_u[rows[ku]], pair_v[rows[kv]]]),
                                                 np.concatenate([coef[ku], -coef[kv]]))
            idx = self.constraints.idx[rows]
            table = PairTable(self.X, np.concatenate([idx[ku, 0], idx[kv, 2]]),
                              np.concatenate([idx[ku, 1], idx[kv, 3]]))
            w = np.bincount(table.half_pair, np.concatenate([coef[ku], -coef[kv]]), table.P)
            return table.laplacian_form(w)
        G = np.zeros((self.d, self.d))
        if np.any(ku):
            Uk = self._half_differences(rows[ku], 0)
            G += (Uk * coef[ku, None]).T @ Uk
        if np.any(kv):
            Vk = self._half_differences(rows[kv], 2)
            G -= (Vk * coef[kv, None]).T @ Vk
        return 0.5 * (G + G.T)

    def adjoint_operator(self, coef: np.ndarray):
        r"""The map :math:`B \mapsto (K^* c) B` for (d, k) blocks B, without the d x d matrix.

        Parameters
        ----------
        coef : ndarray, shape (m,)
            Coefficients :math:`c_q`.

        Returns
        -------
        callable
            ``apply(B)`` with B of shape (d, k): :math:`X^\top (\mathcal{L}_c (X B))` through the
            pair table (``Xc`` centred, :math:`\mathcal{L}_c` sparse, built once here), cost
            :math:`O(n d k + (n + 2P) k)` per call (:func:`projection_costs`).
        """
        coef = np.asarray(coef, dtype=np.float64)
        if coef.shape != (self.m,):
            raise ValueError(f"coef must have shape ({self.m},); got {coef.shape}")
        table, pu, pv = self.pair_table()
        lap, Xc = table.laplacian(table.pair_weights(pu, pv, coef)), table.Xc

        def apply(B: np.ndarray) -> np.ndarray:
            return Xc.T @ (lap @ (Xc @ B))

        return apply

    def normal_operator(self):
        r"""The map :math:`c \mapsto K K^* c` (length m) through the Gram matrix of the points.

        Returns
        -------
        callable
            ``apply(coef)`` with coef of shape (m,).

        Notes
        -----
        With :math:`G = X X^\top` (the centred points, n x n, formed once here) and :math:`K^* c =
        X^\top \mathcal{L}_c X`, the value of :math:`K^* c` on the pair (a, b) is
        :math:`(x_a - x_b)^\top X^\top \mathcal{L}_c X (x_a - x_b) = (g_a - g_b)^\top (t_a - t_b)`
        with :math:`g_a` row a of G and :math:`t_a` row a of :math:`T = G \mathcal{L}_c` (G and the
        Laplacian are symmetric), :math:`= h_a + h_b - 2 g_a^\top t_b` with :math:`h_a = g_a^\top t_a`
        (:math:`g_a^\top t_b = (G \mathcal{L}_c G)_{ab}` is symmetric in a, b). Per call :math:`O((n + 2P) n)` sparse and :math:`O(P n)` gathered
        work, no d-dimensional product: the power iteration of :math:`\|K\|_2` at large d
        (:func:`normal_costs`).
        """
        table, pu, pv = self.pair_table()
        G = self.points_gram()
        rows = max(1, (1 << 20) // max(table.n, 1))   # gathered blocks of about 8 MB

        def apply(coef: np.ndarray) -> np.ndarray:
            coef = np.asarray(coef, dtype=np.float64)
            w = table.pair_weights(pu, pv, coef)
            # rows of G L = (L G)^T (both symmetric), made contiguous: the gathers below read rows
            T = np.ascontiguousarray(np.asarray(table.laplacian(w) @ G).T)
            h = np.einsum("ij,ij->i", G, T)       # g_a . t_a
            D = np.zeros(table.P + 1)
            for s in range(0, table.P, rows):
                a, b = table.pa[s:s + rows], table.pb[s:s + rows]
                # g_a . t_b = (G L G)_ab = g_b . t_a (symmetric)
                D[s:s + a.size] = h[a] + h[b] - 2.0 * np.einsum("ij,ij->i", G[a], T[b])
            out = D[pu]
            out -= D[pv]
            return out

        return apply

    def values_rank_one(self, V: np.ndarray, rows: np.ndarray | None = None, *,
                        path: str | None = None) -> np.ndarray:
        r""":math:`\langle v_j v_j^\top, C_{ij} - C_{kl}\rangle` for every constraint and column ``v_j``.

        Parameters
        ----------
        V : ndarray, shape (d, J)
            Columns :math:`v_j`.
        rows : ndarray of int, optional
            Only these constraints (default: all).
        path : {"differences", "points"}, optional
            Default: the cost model.

        Returns
        -------
        ndarray, shape (m, J) or (len(rows), J)
            Entry (q, j) is :math:`(u_q^\top v_j)^2 - (w_q^\top v_j)^2` (cost :math:`O(m d J)`, or
            :math:`O(n d J + m J)` on the points path: :math:`F = X V` once, then four gathered rows
            of F per constraint).
        """
        V = np.asarray(V, dtype=np.float64)
        rows = np.arange(self.m) if rows is None else np.asarray(rows, dtype=np.int64)
        out = np.empty((rows.size, V.shape[1] if V.ndim == 2 else 0))
        for sl, block in self.rank_one_blocks(V, rows, path=path):
            out[sl] = block
        return out

    def rank_one_blocks(self, V: np.ndarray, rows: np.ndarray, *, path: str | None = None,
                        chunk: int = GATHER_CHUNK):
        r""":meth:`values_rank_one` of ``rows`` in consecutive blocks of at most ``chunk`` rows.

        Yields ``(slice into rows, block of shape (len, J))``; a block is a fresh array the caller
        may overwrite. Working block by block keeps the (rows, J) values in cache (the certificate's
        repair passes over them twice, :meth:`cvxmetric.models.HingeModel.dual_bound`).
        """
        V = np.asarray(V, dtype=np.float64)
        if V.ndim != 2 or V.shape[0] != self.d:
            raise ValueError(f"V must have shape ({self.d}, J); got {V.shape}")
        rows = np.asarray(rows, dtype=np.int64)
        path, _ = self.operator_path("K", r=V.shape[1], path=path)
        if path == "points":
            table, _, _ = self.pair_table()
            F = table.Xc @ V
            ua, ub, va, vb = self._pair_ends()
        for s in range(0, rows.size, chunk):
            sl = slice(s, min(s + chunk, rows.size))
            r = rows[sl]
            if path == "points":
                Du = np.take(F, ua[r], axis=0)
                Du -= np.take(F, ub[r], axis=0)
                Dv = np.take(F, va[r], axis=0)
                Dv -= np.take(F, vb[r], axis=0)
                Du *= Du
                Dv *= Dv
                Du -= Dv
                yield sl, Du
                continue
            Du, Dv = self.difference_vectors(r)
            block = Du @ V
            block *= block
            Dv = Dv @ V
            Dv *= Dv
            block -= Dv
            yield sl, block

    def _pair_ends(self) -> tuple:
        """Per constraint, the endpoints in the pair table's ``Xc`` of its u and v half (both 0,
        a zero difference, for a degenerate half); built once."""
        if self._ends is None:
            table, pu, pv = self.pair_table()
            slot = np.zeros(1, dtype=table.pa.dtype)   # the zero slot P of a degenerate half
            pa, pb = np.concatenate([table.pa, slot]), np.concatenate([table.pb, slot])
            self._ends = (pa[pu], pb[pu], pa[pv], pb[pv])
        return self._ends

    def difference_vectors(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""The difference vectors :math:`u = x_i - x_j` and :math:`w = x_k - x_l` of ``rows``
        (:math:`A_q = u u^\top - w w^\top`), each of shape (len(rows), d), gathered from ``X``; a
        degenerate half (:math:`x_i - x_i`) is exactly 0."""
        rows = np.asarray(rows, dtype=np.intp)
        return self._half_differences(rows, 0), self._half_differences(rows, 2)

    def frobenius_norms(self) -> np.ndarray:
        r""":math:`\|A_q\|_F = \|u u^\top - v v^\top\|_F = \sqrt{|u|^4 + |v|^4 - 2 (u^\top v)^2}`
        per constraint, shape (m,) (0 for an empty row); computed once (a copy is returned).

        Notes
        -----
        When the points' Gram matrix has been formed (:meth:`points_gram`), the three products come
        from its entries: with the pair table's endpoints :math:`u = x_i - x_j`, :math:`v = x_k - x_l`,

        .. math::
            \|u\|^2 = G_{ii} + G_{jj} - 2 G_{ij}, \qquad
            u^\top v = G_{ik} - G_{il} - G_{jk} + G_{jl},

        :math:`O(m)` gathers and no d-dimensional work per row (a degenerate half has both endpoints
        at the same point: exactly 0). The rows where these differences cancel
        (``GRAM_CANCELLATION``) are recomputed from their difference vectors. Without a formed Gram
        matrix, one pass over blocks of ``GATHER_CHUNK`` rows of difference vectors.
        """
        if self._norms is None:
            if self._gram is None:
                a, b, uv = self._length_products(cross=True)
                self._norms = _norms_from_products(a, b, uv)
            else:
                self._norms = self._gram_frobenius_norms()
        return self._norms.copy()

    def _gram_frobenius_norms(self) -> np.ndarray:
        """:meth:`frobenius_norms` from the kept Gram matrix, the cancelling rows from their
        difference vectors."""
        G = self._gram
        n = G.shape[0]
        flat, diag = G.ravel(), np.diagonal(G)
        i, j, k, l = (np.asarray(e, dtype=np.int64) for e in self._pair_ends())

        def entry(p, q):
            return flat[p * n + q]

        scale = diag[i] + diag[j] + diag[k] + diag[l]   # the squared norms the entries carry
        a = diag[i] + diag[j] - 2.0 * entry(i, j)
        b = diag[k] + diag[l] - 2.0 * entry(k, l)
        uv = entry(i, k) - entry(i, l) - entry(j, k) + entry(j, l)
        norms = _norms_from_products(np.maximum(a, 0.0), np.maximum(b, 0.0), uv)
        scale *= scale
        redo = np.flatnonzero(norms * norms < GRAM_CANCELLATION * scale)
        if redo.size:
            norms[redo] = _norms_from_products(*self._gathered_length_products(redo, cross=True))
        return norms

    def apply(self, coef: np.ndarray, v: np.ndarray) -> np.ndarray:
        r"""Matrix-free product :math:`\big(\sum_q c_q (C_{ij} - C_{kl})\big) v` (no d x d matrix).

        Parameters
        ----------
        coef : ndarray, shape (m,)
        v : ndarray, shape (d,) or (d, k)

        Notes
        -----
        :math:`U^\top (c \circ U v) - V^\top (c \circ V v)`: cost :math:`O(m d k)`, the operator a
        Lanczos eigensolver needs for large d.
        """
        coef = np.asarray(coef, dtype=np.float64)
        v = np.asarray(v, dtype=np.float64)
        out = np.zeros(v.shape)
        cu = coef[self.u_rows].reshape((-1,) + (1,) * (v.ndim - 1))
        cv = coef[self.v_rows].reshape((-1,) + (1,) * (v.ndim - 1))
        if self.u_rows.size:
            out += self.U.T @ (cu * (self.U @ v))
        if self.v_rows.size:
            out -= self.V.T @ (cv * (self.V @ v))
        return out

    def svec_matrix(self) -> np.ndarray:
        r"""Rows :math:`a_q` with :math:`\langle M, A_q\rangle = a_q \cdot \mathrm{svec}(M)`, shape (m, d(d+1)/2)."""
        from .linalg import svec_outer

        A = np.zeros((self.m, self.d * (self.d + 1) // 2))
        if self.u_rows.size:
            A[self.u_rows] += svec_outer(self.U)
        if self.v_rows.size:
            A[self.v_rows] -= svec_outer(self.V)
        return A


def _norms_from_products(a: np.ndarray, b: np.ndarray, uv: np.ndarray) -> np.ndarray:
    r""":math:`\sqrt{a^2 + b^2 - 2 uv^2}` (clipped at 0), written over ``a``."""
    a *= a
    b *= b
    a += b
    uv *= uv
    a -= 2.0 * uv
    return np.sqrt(np.maximum(a, 0.0, out=a), out=a)


class HingeLoss:
    r"""Weighted hinge loss of a constraint set, with an incremental subgradient.

    Parameters
    ----------
    geometry : QuadrupletGeometry
        Difference vectors of the ``m`` constraints.
    coef : ndarray, shape (m,)
        Non-negative coefficients :math:`c_q` (constraint weight times the model's
        :math:`C_Q`/:math:`C_P`).

    Notes
    -----
    .. math:: \ell(M) = \sum_q c_q\,[\delta_q + \langle M, A_q\rangle]_+ , \qquad
              \partial \ell(M) \ni \sum_{q:\ \delta_q + \langle M, A_q\rangle > 0} c_q A_q .

    :meth:`update` evaluates the margins of a set of rows, and moves the stored subgradient
    :math:`G` by the rows whose side changed, at cost :math:`O(|\text{changed}|\, d^2)` instead of
    :math:`O(|\mathcal{N}^+| d^2)`.
    """

    def __init__(self, geometry: QuadrupletGeometry, coef: np.ndarray):
        coef = np.asarray(coef, dtype=np.float64)
        if coef.shape != (geometry.m,):
            raise ValueError(f"coef must have shape ({geometry.m},); got {coef.shape}")
        if np.any(coef < 0) or not np.all(np.isfinite(coef)):
            raise ValueError("coef must be finite and non-negative")
        self.geometry = geometry
        self.coef = coef
        self.delta = np.asarray(geometry.constraints.delta, dtype=np.float64)
        self.active = np.zeros(geometry.m, dtype=bool)
        self.G = np.zeros((geometry.d, geometry.d))

    @property
    def m(self) -> int:
        return self.geometry.m

    def extended(self, geometry: QuadrupletGeometry, coef: np.ndarray) -> "HingeLoss":
        """A loss over a grown geometry (``self``'s rows first) that keeps the active set and G.

        The appended rows start inactive; the next :meth:`update` that checks them adds those
        that are violated to G.
        """
        if geometry.m < self.m:
            raise ValueError("the new geometry must extend this loss's rows, not drop any")
        out = HingeLoss(geometry, coef)
        out.active[:self.m] = self.active
        out.G = self.G.copy()
        return out

    def margins(self, M: np.ndarray) -> np.ndarray:
        r""":math:`\delta_q + \langle M, A_q\rangle` for all constraints."""
        return self.delta + self.geometry.values(M)

    def value(self, M: np.ndarray) -> float:
        """The loss at ``M``."""
        return float(self.coef @ np.maximum(self.margins(M), 0.0))

    def reset(self) -> None:
        """Forget the stored violated set and subgradient."""
        self.active[:] = False
        self.G[:] = 0.0

    def recompute(self) -> np.ndarray:
        """Rebuild :math:`G` from scratch from the stored active set (removes round-off drift)."""
        rows = np.flatnonzero(self.active)
        self.G = self.geometry.weighted_sum(self.coef[rows], rows)
        return self.G

    def update(self, M: np.ndarray, rows: np.ndarray | None = None,
               rows_geometry: QuadrupletGeometry | None = None) -> tuple[float, np.ndarray]:
        r"""Re-check ``rows`` (default: all) at ``M``; update the active set and :math:`G`.

        Rows outside ``rows`` keep their previous side. ``rows_geometry`` may pass the cached
        ``geometry.subset(rows)`` (a working set re-checked at every iteration). Returns the loss
        of the checked rows and their margins.
        """
        if rows is None:
            marg = self.margins(M)
            new = marg > 0
            changed = np.flatnonzero(new != self.active)
            sign = np.where(new[changed], 1.0, -1.0)
            self.active = new
            loss = float(self.coef @ np.maximum(marg, 0.0))
        else:
            rows = np.asarray(rows, dtype=np.int64)
            sub = rows_geometry if rows_geometry is not None else self.geometry.subset(rows)
            marg = self.delta[rows] + sub.values(M)
            new = marg > 0
            ch = np.flatnonzero(new != self.active[rows])
            changed = rows[ch]
            sign = np.where(new[ch], 1.0, -1.0)
            self.active[rows] = new
            loss = float(self.coef[rows] @ np.maximum(marg, 0.0))
        if changed.size:
            self.G = self.G + self.geometry.weighted_sum(sign * self.coef[changed], changed)
        return loss, marg
