r"""The unified constraint set: every supervision signal as a weighted quadruplet.

Reference: thesis ch. 2, sec. 2.2.1; design §4.

Every supervision signal is a weighted quadruplet :math:`q = (i, j, k, l)` with margin
:math:`\delta_q` and weight :math:`w_q`, asking

.. math:: D_M(x_k, x_l) \ge D_M(x_i, x_j) + \delta_q .

Pairs and triplets are quadruplets with a repeated index:

* triplet :math:`(i, j, k)` ("i is closer to j than to k") is :math:`(i, j, i, k)`;
* similar pair :math:`(i, j)` with upper bound :math:`u` is :math:`(i, j, i, i)`, :math:`\delta = -u`;
* dissimilar pair :math:`(i, j)` with lower bound :math:`l` is :math:`(i, i, i, j)`, :math:`\delta = l`.

A degenerate pair :math:`(i, i)` has :math:`C_{ii} = 0`, so the *kind* of a constraint is a
property of its indices, not extra state: ``k == l`` makes a similar pair, ``i == j`` a dissimilar
pair, anything else is a relative (triplet/quadruplet) constraint. Models that weigh pairs and
relative constraints differently (:math:`C_P` and :math:`C_Q` in Qwise) read these masks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import as_index_array, broadcast_vector, check_bool

__all__ = ["ConstraintSet"]


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class ConstraintSet:
    r"""An immutable set of weighted quadruplet constraints.

    Parameters
    ----------
    idx : ndarray of int, shape (m, 4)
        Rows ``(i, j, k, l)`` indexing the rows of a data matrix ``X``; stored as int32 when every
        index is below 2^31 (:func:`cvxmetric._checks.index_dtype`), else int64.
    delta : ndarray of float, shape (m,)
        Margins :math:`\delta_q`.
    weight : ndarray of float, shape (m,)
        Non-negative weights :math:`w_q`.

    Notes
    -----
    The hinge loss of the set at :math:`M` is

    .. math:: \ell(M) = \sum_q w_q\,[\delta_q + \langle M, C_{ij} - C_{kl}\rangle]_+ ,
              \qquad C_{ij} = (x_i - x_j)(x_i - x_j)^\top .

    Build sets with :meth:`from_quadruplets`, :meth:`from_triplets`, :meth:`from_pairs` and
    combine them with :meth:`concatenate` (or ``+``). Arrays are stored read-only. Arithmetic on
    indices that can overflow int32 (a key ``(i * n + j) * n + l``) casts to int64 first.
    """

    idx: np.ndarray
    delta: np.ndarray
    weight: np.ndarray

    def __post_init__(self):
        idx = as_index_array(self.idx, 4, "idx", compact=True)
        m = idx.shape[0]
        delta = broadcast_vector(self.delta, m, "delta")
        weight = broadcast_vector(self.weight, m, "weight")
        if np.any(weight < 0):
            q = int(np.argmax(weight < 0))
            raise ValueError(f"weight must be non-negative; constraint {q} has weight {weight[q]}")
        both = (idx[:, 0] == idx[:, 1]) & (idx[:, 2] == idx[:, 3])
        if np.any(both):
            q = int(np.argmax(both))
            raise ValueError(
                f"constraint {q} = {tuple(idx[q].tolist())} compares two zero-length pairs and constrains "
                "nothing; remove it"
            )
        object.__setattr__(self, "idx", _readonly(idx))
        object.__setattr__(self, "delta", _readonly(delta))
        object.__setattr__(self, "weight", _readonly(weight))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_quadruplets(cls, quadruplets, delta=1.0, weight=1.0) -> "ConstraintSet":
        """Quadruplets ``(i, j, k, l)`` asking ``D(k, l) >= D(i, j) + delta``."""
        return cls(as_index_array(quadruplets, 4, "quadruplets", compact=True), delta, weight)

    @classmethod
    def from_triplets(cls, triplets, delta=1.0, weight=1.0) -> "ConstraintSet":
        """Triplets ``(i, j, k)``: "i is closer to j than to k", i.e. ``D(i, k) >= D(i, j) + delta``."""
        t = as_index_array(triplets, 3, "triplets", compact=True)
        return cls(np.column_stack([t[:, 0], t[:, 1], t[:, 0], t[:, 2]]), delta, weight)

    @classmethod
    def from_pairs(cls, pairs, *, similar: bool, bound, weight=1.0) -> "ConstraintSet":
        """Similar pairs (``D(i, j) <= bound``) or dissimilar pairs (``D(i, j) >= bound``)."""
        similar = check_bool(similar, "similar")
        p = as_index_array(pairs, 2, "pairs", compact=True)
        if np.any(p[:, 0] == p[:, 1]):
            q = int(np.argmax(p[:, 0] == p[:, 1]))
            raise ValueError(f"pair {q} = {tuple(p[q].tolist())} joins a point to itself; remove it")
        b = broadcast_vector(bound, p.shape[0], "bound")
        if similar:
            idx = np.column_stack([p[:, 0], p[:, 1], p[:, 0], p[:, 0]])
            return cls(idx, -b, weight)
        idx = np.column_stack([p[:, 0], p[:, 0], p[:, 0], p[:, 1]])
        return cls(idx, b, weight)

    @classmethod
    def concatenate(cls, *sets: "ConstraintSet") -> "ConstraintSet":
        """Union (as a multiset) of several constraint sets, in order."""
        if not sets:
            raise ValueError("concatenate needs at least one ConstraintSet")
        for s in sets:
            if not isinstance(s, ConstraintSet):
                raise TypeError(f"concatenate takes ConstraintSet objects; got {type(s).__name__}")
        return cls(np.concatenate([s.idx for s in sets]),
                   np.concatenate([s.delta for s in sets]),
                   np.concatenate([s.weight for s in sets]))

    def __add__(self, other: "ConstraintSet") -> "ConstraintSet":
        return ConstraintSet.concatenate(self, other)

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        return int(self.idx.shape[0])

    @property
    def n_constraints(self) -> int:
        return len(self)

    @property
    def is_similar(self) -> np.ndarray:
        """Mask of similar-pair constraints ``(i, j, i, i)``-like rows (``k == l``)."""
        return self.idx[:, 2] == self.idx[:, 3]

    @property
    def is_dissimilar(self) -> np.ndarray:
        """Mask of dissimilar-pair constraints (``i == j``)."""
        return self.idx[:, 0] == self.idx[:, 1]

    @property
    def is_pair(self) -> np.ndarray:
        """Mask of pairwise (similar or dissimilar) constraints."""
        return self.is_similar | self.is_dissimilar

    @property
    def is_relative(self) -> np.ndarray:
        """Mask of relative (triplet/quadruplet) constraints."""
        return ~self.is_pair

    def subset(self, rows) -> "ConstraintSet":
        """The constraints selected by a boolean mask or an index array."""
        rows = np.asarray(rows)
        if rows.dtype.kind == "b":
            if rows.shape != (len(self),):
                raise ValueError(f"a boolean mask of rows must have shape ({len(self)},); got {rows.shape}")
        else:
            rows = as_index_array(rows.reshape(-1, 1), 1, "rows", n=len(self))[:, 0]
        return ConstraintSet(self.idx[rows], self.delta[rows], self.weight[rows])

    def with_weight(self, weight) -> "ConstraintSet":
        """The same constraints with new weights."""
        return ConstraintSet(self.idx, self.delta, weight)

    def validate(self, n: int, *, name: str = "constraints", allow_empty: bool = False) -> "ConstraintSet":
        """Check the set against a data matrix with ``n`` rows; return ``self``.

        Raises
        ------
        ValueError
            If the set is empty (unless ``allow_empty``) or an index is ``>= n``.
        """
        if not isinstance(self, ConstraintSet):
            raise TypeError(f"{name} must be a ConstraintSet")
        allow_empty = check_bool(allow_empty, "allow_empty")
        if len(self) == 0 and not allow_empty:
            raise ValueError(f"{name} is empty; give at least one constraint")
        if len(self) and int(self.idx.max()) >= n:
            q = int(np.argmax(self.idx.max(axis=1) >= n))
            raise ValueError(
                f"{name}: constraint {q} = {tuple(self.idx[q].tolist())} indexes a row >= n = {n} "
                "(X has only n rows)"
            )
        return self

    def __repr__(self) -> str:
        return (f"ConstraintSet(m={len(self)}, relative={int(self.is_relative.sum())}, "
                f"similar={int(self.is_similar.sum())}, dissimilar={int(self.is_dissimilar.sum())})")
