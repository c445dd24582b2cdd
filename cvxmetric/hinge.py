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
"""
from __future__ import annotations

import numpy as np

from ._checks import as_data_matrix, zero_length_mask
from .constraints import ConstraintSet

__all__ = ["QuadrupletGeometry", "HingeLoss"]

#: ``weighted_sum`` over explicit rows switches to the graph-Laplacian form X^T L X (cost
#: O(n d^2 + m d) instead of O(m d^2)) when there are at least this many rows per point and
#: d >= LAPLACIAN_MIN_D. Measured (one BLAS thread): d = 64, n = 1797, 10,000 rows: 4.4 ms vs
#: 7.7 ms; d = 50, n = 8000, 5,000 rows: 3.9 ms vs 2.4 ms; d = 20: always slower.
LAPLACIAN_MIN_ROWS_PER_POINT = 4
LAPLACIAN_MIN_D = 32


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
    U : ndarray, shape (m_u, d)
        :math:`x_i - x_j` for the constraints with ``i != j`` (rows ``u_rows``).
    V : ndarray, shape (m_v, d)
        :math:`x_k - x_l` for the constraints with ``k != l`` (rows ``v_rows``).
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
        self.u_rows = np.flatnonzero(idx[:, 0] != idx[:, 1])
        self.v_rows = np.flatnonzero(idx[:, 2] != idx[:, 3])
        self.U = X[idx[self.u_rows, 0]] - X[idx[self.u_rows, 1]]
        self.V = X[idx[self.v_rows, 2]] - X[idx[self.v_rows, 3]]
        # position of each constraint's u (v) vector in U (V), or -1 when degenerate
        self._u_pos = np.full(self.m, -1, dtype=np.int64)
        self._u_pos[self.u_rows] = np.arange(self.u_rows.size)
        self._v_pos = np.full(self.m, -1, dtype=np.int64)
        self._v_pos[self.v_rows] = np.arange(self.v_rows.size)

    def subset(self, rows) -> "QuadrupletGeometry":
        """Geometry of a subset of the constraints (no re-validation of ``X``)."""
        return QuadrupletGeometry(self.X, self.constraints.subset(rows), _validated=True)

    def extended(self, constraints: ConstraintSet) -> "QuadrupletGeometry":
        """Geometry of ``self.constraints + constraints`` on the same ``X``.

        The stored difference vectors are reused; only those of the new constraints are formed.
        """
        new = QuadrupletGeometry(self.X, constraints, _validated=True)
        out = object.__new__(QuadrupletGeometry)
        out.X = self.X
        out.constraints = ConstraintSet.concatenate(self.constraints, constraints)
        out.m, out.d = self.m + new.m, self.d
        out.u_rows = np.concatenate([self.u_rows, new.u_rows + self.m])
        out.v_rows = np.concatenate([self.v_rows, new.v_rows + self.m])
        out.U = np.concatenate([self.U, new.U])
        out.V = np.concatenate([self.V, new.V])
        out._u_pos = np.concatenate([self._u_pos, np.where(new._u_pos >= 0, new._u_pos + self.u_rows.size, -1)])
        out._v_pos = np.concatenate([self._v_pos, np.where(new._v_pos >= 0, new._v_pos + self.v_rows.size, -1)])
        return out

    def squared_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Squared Euclidean lengths :math:`\\|u_q\\|^2` and :math:`\\|v_q\\|^2`, shape (m,) each."""
        a = np.zeros(self.m)
        b = np.zeros(self.m)
        a[self.u_rows] = np.einsum("ij,ij->i", self.U, self.U)
        b[self.v_rows] = np.einsum("ij,ij->i", self.V, self.V)
        return a, b

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

    def distances(self, M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r""":math:`D_M(i, j)` and :math:`D_M(k, l)` for every constraint, shape (m,) each.

        Cost :math:`O((m_u + m_v) d^2)`: one matrix product per half. (Forming ``X @ M`` once per
        point and differencing per constraint was measured slower at every size tried: the row
        gathers cost more than the saved flops.)
        """
        a = np.zeros(self.m)
        b = np.zeros(self.m)
        if self.u_rows.size:
            a[self.u_rows] = np.einsum("ij,ij->i", self.U @ M, self.U)
        if self.v_rows.size:
            b[self.v_rows] = np.einsum("ij,ij->i", self.V @ M, self.V)
        return a, b

    def values(self, M: np.ndarray) -> np.ndarray:
        r""":math:`\langle M, C_{ij} - C_{kl}\rangle` for every constraint, shape (m,).

        Cost: see :meth:`distances`.
        """
        a, b = self.distances(np.asarray(M, dtype=np.float64))
        return a - b

    def values_factor(self, L: np.ndarray) -> np.ndarray:
        r"""Same as :meth:`values` for :math:`M = L^\top L` (L of shape (r, d)): cost :math:`O(m d r)`."""
        out = np.zeros(self.m)
        if self.u_rows.size:
            P = self.U @ L.T
            out[self.u_rows] += np.einsum("ij,ij->i", P, P)
        if self.v_rows.size:
            Q = self.V @ L.T
            out[self.v_rows] -= np.einsum("ij,ij->i", Q, Q)
        return out

    def weighted_sum(self, coef: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        r""":math:`\sum_q c_q (C_{ij} - C_{kl})` as a (d, d) matrix.

        Parameters
        ----------
        coef : ndarray, shape (m,) or (len(rows),)
            Coefficients :math:`c_q`.
        rows : ndarray of int, optional
            Restrict the sum to these constraints (then ``coef`` is aligned with ``rows``).
        """
        coef = np.asarray(coef, dtype=np.float64)
        if rows is None:
            # all rows: no gather of U/V (twice as fast; the PDHG solver calls this every iteration)
            if coef.shape != (self.m,):
                raise ValueError(f"coef must have shape ({self.m},); got {coef.shape}")
            if self._laplacian_pays(self.m):
                return self._weighted_sum_laplacian(coef, np.arange(self.m))
            G = (self.U * coef[self.u_rows, None]).T @ self.U
            G -= (self.V * coef[self.v_rows, None]).T @ self.V
            return 0.5 * (G + G.T)
        rows = np.asarray(rows, dtype=np.int64)
        if self._laplacian_pays(rows.size):
            return self._weighted_sum_laplacian(coef, rows)
        G = np.zeros((self.d, self.d))
        pu = self._u_pos[rows]
        ku = pu >= 0
        if np.any(ku):
            Uk = self.U[pu[ku]]
            G += (Uk * coef[ku, None]).T @ Uk
        pv = self._v_pos[rows]
        kv = pv >= 0
        if np.any(kv):
            Vk = self.V[pv[kv]]
            G -= (Vk * coef[kv, None]).T @ Vk
        return 0.5 * (G + G.T)

    def values_rank_one(self, V: np.ndarray) -> np.ndarray:
        r""":math:`\langle v_j v_j^\top, C_{ij} - C_{kl}\rangle` for every constraint and column ``v_j``.

        Parameters
        ----------
        V : ndarray, shape (d, J)
            Columns :math:`v_j`.

        Returns
        -------
        ndarray, shape (m, J)
            Entry (q, j) is :math:`(u_q^\top v_j)^2 - (w_q^\top v_j)^2` (cost :math:`O(m d J)`).
        """
        V = np.asarray(V, dtype=np.float64)
        if V.ndim != 2 or V.shape[0] != self.d:
            raise ValueError(f"V must have shape ({self.d}, J); got {V.shape}")
        out = np.zeros((self.m, V.shape[1]))
        if self.u_rows.size:
            out[self.u_rows] += (self.U @ V) ** 2
        if self.v_rows.size:
            out[self.v_rows] -= (self.V @ V) ** 2
        return out

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

    def _laplacian_pays(self, n_rows: int) -> bool:
        return n_rows >= LAPLACIAN_MIN_ROWS_PER_POINT * self.X.shape[0] and self.d >= LAPLACIAN_MIN_D

    def _weighted_sum_laplacian(self, coef: np.ndarray, rows: np.ndarray) -> np.ndarray:
        r"""The same sum as :math:`X^\top \mathcal{L} X` with the weighted graph Laplacian
        :math:`\mathcal{L} = \sum \pm c_q (e_a - e_b)(e_a - e_b)^\top` of the pairs: :math:`O(n d^2 + m d)`
        instead of :math:`O(m d^2)` when there are more constraints than points."""
        from scipy import sparse

        idx = self.constraints.idx[rows]
        a = np.concatenate([idx[:, 0], idx[:, 2]])
        b = np.concatenate([idx[:, 1], idx[:, 3]])
        w = np.concatenate([coef, -coef])
        n = self.X.shape[0]
        # (e_a - e_b)(e_a - e_b)^T = E_aa + E_bb - E_ab - E_ba; degenerate pairs (a == b) cancel
        lap = sparse.coo_matrix((np.concatenate([w, w, -w, -w]),
                                 (np.concatenate([a, b, a, b]), np.concatenate([a, b, b, a]))),
                                shape=(n, n)).tocsr()
        G = self.X.T @ (lap @ self.X)
        return 0.5 * (G + G.T)

    def svec_matrix(self) -> np.ndarray:
        r"""Rows :math:`a_q` with :math:`\langle M, A_q\rangle = a_q \cdot \mathrm{svec}(M)`, shape (m, d(d+1)/2)."""
        from .linalg import svec_outer

        A = np.zeros((self.m, self.d * (self.d + 1) // 2))
        if self.u_rows.size:
            A[self.u_rows] += svec_outer(self.U)
        if self.v_rows.size:
            A[self.v_rows] -= svec_outer(self.V)
        return A


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
