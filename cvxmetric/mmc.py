r"""MMC's numpy model: the min form, the max form and their certificate.

Reference: Xing et al. 2002; thesis sec. 1.3.4.1, eq. 1.3; design §5.1.

Min form (the ground truth's statement)

.. math:: p^*_{\min} = \min_{M \succeq 0}\ f(M) = \sum_{S} w_p \langle M, C_p\rangle
          \quad\text{s.t.}\quad g(M) = \sum_{D} w_p \sqrt{\langle M, C_p\rangle} \ge 1 ,

max form (what the fast solver solves)

.. math:: p^*_{\max} = \max_{M \succeq 0}\ g(M) \quad\text{s.t.}\quad f(M) = \langle M, C_S\rangle \le 1,
          \qquad C_S = \sum_S w_p C_p .

:math:`f` is homogeneous of degree 1 and :math:`g` of degree 1/2, so :math:`M \mapsto M / g(M)^2` maps a
max-form solution to a min-form one and :math:`p^*_{\min} = 1 / (p^*_{\max})^2` (the *scale
identity*).

``value(M)`` (the min-form objective used by ``value_at``) is :math:`f(M)` at a feasible M
(:math:`g(M) \ge 1`); at an infeasible M with :math:`g(M) > 0` it is the objective at the smallest
feasible rescaling :math:`M / g(M)^2`, i.e. :math:`f(M) / g(M)^2`; with :math:`g(M) = 0` no
rescaling is feasible and it is :math:`+\infty`. In one formula:
:math:`f(M) / \min(1, g(M))^2`. The scale-free :math:`f(M) / g(M)^2` (the objective after the *best*
rescaling) is :meth:`MMCModel.scale_free_value`; it is how an M of arbitrary scale (e.g.
metric-learn's) is compared.

Certificate (scale-free): :math:`g` is concave, so for every :math:`M \succeq 0` with all dissimilar
distances positive and :math:`G = \nabla g(M)`, :math:`g(M') \le g(M) + \langle G, M' - M\rangle` for all
:math:`M'` (at *any* scale of M, not only on the feasible set). Over
:math:`K = \{M' \succeq 0, \langle M', C_S\rangle \le 1\}` this gives
:math:`p^*_{\max} \le g(M) - \langle G, M\rangle + \lambda(M)`, with
:math:`\lambda(M) = \max_{M' \in K}\langle G, M'\rangle = \lambda_{\max}^+(B^\top G B)` (the largest
generalized eigenvalue of :math:`(G, C_S)` on the range of :math:`C_S`, ``B = range_basis``). By
homogeneity :math:`\langle G, M\rangle = g(M)/2`, :math:`g(tM) = \sqrt t\, g(M)` and
:math:`\lambda(tM) = \lambda(M)/\sqrt t`; minimising the bound over the scale t gives

.. math:: p^*_{\max} \le \sqrt{2\, g(M)\, \lambda(M)}, \qquad
          p^*_{\min} \ge \ell(M) = \frac{1}{2\, g(M)\, \lambda(M)} ,

a function of the ray of M only (:meth:`MMCModel.lower_bound`). It is the Lagrangian dual bound of
the min form, :math:`\max_{\nu \ge 0}\ \nu - \nu^2 (p^*_{\max})^2 / 4 = 1 / (p^*_{\max})^2`, with
:math:`p^*_{\max}` bounded as above; at an optimal M it is exact. The matching upper bound is the
value at the tight rescaling :math:`f(M)/g(M)^2` (:meth:`MMCModel.make_feasible`), so both ends of the
certified interval :meth:`MMCModel.bounds` and its relative gap
:math:`1 - g(M) / (2 f(M) \lambda(M))` are invariant under :math:`M \to tM` and under invertible
linear maps of the data.

Relative tolerances (feature scales may span 1e-4..1e4): the range of :math:`C_S` and the "zero
length" of a difference are decided after an exact column equilibration of the differences
(each feature divided by a power of 2 near its largest absolute difference), so a per-feature
rescaling of X never changes a verdict.
"""
from __future__ import annotations

import math

import numpy as np

from ._checks import as_data_matrix, zero_length_mask
from .certificates import Bounds
from .constraints import ConstraintSet
from .linalg import power_of_two, project_psd, symmetrize

__all__ = ["MMCModel", "DiagonalMMCModel", "min_form_value", "SPAN_RTOL", "RANGE_RTOL"]

#: A dissimilar difference counts as inside the range of C_S when its component outside that range
#: is at most SPAN_RTOL times its length (both in equilibrated coordinates). A difference that is
#: genuinely outside makes the problem degenerate (objective 0 along it); round-off of a
#: difference inside the range is ~1e-16 * cond, far below.
SPAN_RTOL = 1e-6

#: Singular values of the equilibrated, weighted similar differences at or below
#: RANGE_RTOL * max(p, d) * sigma_max are numerically zero (numpy.linalg.matrix_rank's rule with
#: a margin of 100 over machine epsilon): the range of C_S is spanned by the rest. Thresholding the
#: eigenvalues of C_S itself (squares of these) at a relative 1e-6 dropped genuine directions of
#: data whose feature scales differ by 1e3, and then called the problem "degenerate".
RANGE_RTOL = 100 * np.finfo(np.float64).eps

#: A dissimilar distance D_M(p) at or below this fraction of the largest one counts as 0 when a
#: certificate is evaluated at an arbitrary point (g is not differentiable there): the point is
#: then moved by this fraction towards the default start before the bound is computed.
CERT_MIX = 1e-9


def min_form_value(f: float, g: float) -> float:
    r"""The min-form objective from :math:`f = \langle M, C_S\rangle` and :math:`g = \sum_D w \sqrt{D_M}`.

    :math:`f / \min(1, g)^2`; :math:`+\infty` when :math:`g = 0` (see the module docstring).
    """
    if g <= 0:
        return float("inf")
    return float(f) / min(1.0, float(g)) ** 2


def _pair_differences(X, constraints):
    """``(X, US, wS, UD, wD)``: the validated data, and the differences and weights of the similar
    and of the dissimilar pairs of an MMC problem (ValueError for relative constraints or no
    similar pair)."""
    X = as_data_matrix(X)
    if not isinstance(constraints, ConstraintSet):
        raise TypeError(f"constraints must be a ConstraintSet of pairs; got {type(constraints).__name__}")
    constraints.validate(X.shape[0], name="constraints")
    if np.any(constraints.is_relative):
        q = int(np.argmax(constraints.is_relative))
        raise ValueError(f"MMC uses similar and dissimilar pairs only; constraint {q} = "
                         f"{tuple(constraints.idx[q])} is relative (a triplet or quadruplet)")
    idx, w = constraints.idx, np.asarray(constraints.weight, dtype=np.float64)
    sim, dis = constraints.is_similar, constraints.is_dissimilar
    if not np.any(sim):
        raise ValueError("MMC needs at least one similar pair (the objective sums their distances)")
    return (X, X[idx[sim, 0]] - X[idx[sim, 1]], w[sim], X[idx[dis, 2]] - X[idx[dis, 3]], w[dis])


class _RayModel:
    r"""What the min and max forms of MMC share over either cone (PSD matrices M, or the
    non-negative diagonals a): values, the feasible rescaling and the certificate, from a
    subclass's :meth:`similar_sum`, ``dissimilar_distances``, ``gradient``, ``linear_max``,
    ``default_start`` and :meth:`cone_part` (the module docstring states the certificate)."""

    def cone_part(self, x) -> np.ndarray:
        """The point of the cone near ``x`` (PSD part, or non-negative part)."""
        raise NotImplementedError

    def dissimilar_sum(self, x) -> float:
        r""":math:`g(x) = \sum_D w_p \sqrt{D_x(p)}`."""
        return float(self.wD @ np.sqrt(self.dissimilar_distances(x)))

    def value(self, x) -> float:
        """Min-form objective ``f(x) / min(1, g(x))**2`` (see the module docstring)."""
        return min_form_value(self.similar_sum(x), self.dissimilar_sum(x))

    def scale_free_value(self, x) -> float:
        r""":math:`f(x) / g(x)^2`: the min-form objective after the best rescaling of ``x``."""
        g = self.dissimilar_sum(x)
        return float("inf") if g <= 0 else self.similar_sum(x) / g ** 2

    def max_form_value(self, x) -> float:
        r"""The max-form value of ``x``'s ray, :math:`g(x) / \sqrt{f(x)}` (:math:`g` is
        1/2-homogeneous, so every point of the ray has it); 0 when :math:`f(x) = 0`."""
        f = self.similar_sum(x)
        return self.dissimilar_sum(x) / np.sqrt(f) if f > 0 else 0.0

    def make_feasible(self, x) -> np.ndarray:
        r"""Any ``x`` mapped onto the min form's boundary: :math:`P / g(P)^2`, P = :meth:`cone_part` (x).

        The constraint :math:`g \ge 1` is then tight, so ``value(make_feasible(x))`` is
        :meth:`scale_free_value` of the projected point: a point of any scale (too large and
        feasible, or too small and infeasible) is scored by its ray. With :math:`g(P) = 0` no
        rescaling is feasible and P is returned (its value is :math:`+\infty`).
        """
        P = self.cone_part(x)
        g = self.dissimilar_sum(P)
        return P / g ** 2 if g > 0 else P

    def ray_bound(self, g: float, G) -> float:
        r""":math:`1 / (2 g \lambda)` from :math:`g = g(x)` and :math:`G = \nabla g(x)` at a point of the cone."""
        lam = self.linear_max(G)
        return 1.0 / (2.0 * g * lam) if g > 0 and lam > 0 else 0.0

    def lower_bound(self, x) -> float:
        r"""Certified lower bound :math:`\ell(x) = 1 / (2 g(x) \lambda(x)) \le p^*_{\min}` from any ``x``.

        ``x`` is replaced by its :meth:`cone_part`; where a dissimilar distance is 0 (g not
        differentiable) it is first moved by the fraction :data:`CERT_MIX` towards
        ``default_start`` (still a valid point: the bound holds at every point). Returns 0 (a
        trivial bound) when no point gives a finite one.
        """
        P = self.cone_part(x)
        D = self.dissimilar_distances(P)
        if np.any(D <= CERT_MIX * float(np.max(D, initial=0.0))):
            f = self.similar_sum(P)
            P = (1.0 - CERT_MIX) * P + CERT_MIX * (f if f > 0 else 1.0) * self.default_start()
            D = self.dissimilar_distances(P)
        if np.any(D <= 0):
            return 0.0
        return self.ray_bound(float(self.wD @ np.sqrt(D)), self.gradient(P, D))

    def bounds(self, x) -> Bounds:
        r"""The certified interval of ``x``'s ray: ``upper`` = :meth:`scale_free_value` (the value of
        :meth:`make_feasible` (x)), ``lower`` = :meth:`lower_bound` (x)."""
        P = self.cone_part(x)
        return Bounds(lower=self.lower_bound(P), upper=self.scale_free_value(P))


class MMCModel(_RayModel):
    r"""Similar and dissimilar pairs of an MMC problem on a data matrix.

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Pairs only: similar pairs (``k == l`` rows) form :math:`S`, dissimilar pairs (``i == j``)
        form :math:`D`. Their bounds are ignored (MMC has none); weights :math:`w_p` multiply the
        terms. Dissimilar pairs of zero length (:func:`cvxmetric._checks.zero_length_mask`; they
        contribute 0) are dropped.

    Attributes
    ----------
    US : ndarray, shape (p, d)
        Similar differences :math:`x_i - x_j`, with weights ``wS``.
    UD : ndarray, shape (q, d)
        Dissimilar differences, with weights ``wD``.
    CS : ndarray, shape (d, d)
        :math:`C_S = \sum_S w_p C_p`.
    feature_scale : ndarray, shape (d,)
        The powers of 2 the features are divided by for the rank and length tests (exact).
    range_basis : ndarray, shape (d, r)
        ``B`` with :math:`B^\top C_S B = I_r` and range(B) = range(C_S):
        :math:`\max_{M \succeq 0, \langle M, C_S\rangle \le 1}\langle G, M\rangle = \lambda_{\max}^+(B^\top G B)`
        for G with range in range(C_S). Computed from the SVD of the equilibrated, weighted similar
        differences (never from the eigenvalues of :math:`C_S`, which square the conditioning).

    Raises
    ------
    ValueError
        If the set holds relative constraints, has no similar or no (non-zero) dissimilar pair,
        or a dissimilar difference leaves the range of :math:`C_S` (then :math:`M = t\,vv^\top`
        with :math:`C_S v = 0` reaches objective 0: the problem is degenerate).
    """

    def __init__(self, X, constraints: ConstraintSet):
        X, self.US, self.wS, UD, wD = _pair_differences(X, constraints)
        self.X, self.d, self.constraints = X, X.shape[1], constraints
        # exact (power-of-2) column equilibration: every test below is invariant under per-feature scaling
        self.feature_scale = power_of_two(np.max(np.abs(np.vstack([self.US, UD])), axis=0))
        US_eq, UD_eq = self.US / self.feature_scale, UD / self.feature_scale
        keep = ~zero_length_mask(UD, X)   # the project's one duplicate-point test
        self.UD, self.wD = UD[keep], wD[keep]
        UD_eq = UD_eq[keep]
        lengths = np.linalg.norm(UD_eq, axis=1)
        if self.UD.shape[0] == 0 or not np.any(self.wD > 0):
            raise ValueError("MMC needs at least one dissimilar pair of distinct points with positive weight")
        self.CS = symmetrize((self.US * self.wS[:, None]).T @ self.US)
        A = US_eq * np.sqrt(np.maximum(self.wS, 0.0))[:, None]
        _, sig, Vt = np.linalg.svd(A, full_matrices=False)
        rank = int(np.sum(sig > RANGE_RTOL * max(A.shape) * (sig[0] if sig.size else 0.0)))
        if rank == 0:
            raise ValueError("the similar pairs all have zero length (or weight): C_S = 0 and MMC is unbounded")
        Vr = Vt[:rank].T
        out = UD_eq - (UD_eq @ Vr) @ Vr.T
        ratio = np.linalg.norm(out, axis=1) / lengths
        if np.any(ratio > SPAN_RTOL):
            q = int(np.argmax(ratio))
            raise ValueError(
                f"MMC is degenerate: dissimilar pair {q} has a difference outside the span of the similar "
                f"pairs' differences (relative component {ratio[q]:.2g} outside), so M = t v v^T (C_S v = 0) "
                "reaches objective 0; add similar pairs that span the data (or reduce the dimension first)"
            )
        # C_S = Dinv A^T A Dinv with Dinv = diag(1/feature_scale): B = Dinv V_r Sigma_r^{-1}
        self.range_basis = (Vr / sig[:rank]) / self.feature_scale[:, None]
        self.rank = rank

    # ------------------------------------------------------------------ values
    def similar_sum(self, M) -> float:
        r""":math:`f(M) = \langle M, C_S\rangle`."""
        return float(np.vdot(self.CS, M))

    def dissimilar_distances(self, M) -> np.ndarray:
        r""":math:`D_M(p)` of the dissimilar pairs, shape (q,), clipped at 0 (round-off of a PSD M)."""
        M = np.asarray(M, dtype=np.float64)
        return np.maximum(np.einsum("ij,ij->i", self.UD @ M, self.UD), 0.0)

    def to_min_form(self, M) -> np.ndarray:
        r"""The min-form point :math:`M / g(M)^2` (feasible with :math:`g = 1`)."""
        g = self.dissimilar_sum(M)
        if g <= 0:
            raise ValueError("g(M) = 0: no rescaling of M satisfies the dissimilar constraint")
        return np.asarray(M, dtype=np.float64) / g ** 2

    def psd_part(self, M) -> np.ndarray:
        r"""A PSD matrix near symmetric M, computed in equilibrated coordinates:
        :math:`F^{-1}\Pi_{\mathbb{S}_+}(F M F)F^{-1}`, ``F = diag(feature_scale)`` (exact powers of 2).

        The identity on PSD matrices up to round-off *relative to each entry's scale*; a plain
        :func:`~cvxmetric.linalg.project_psd` of an M whose entries span 1e-8..1e8 (features scaled
        1e-4..1e4) perturbs the small ones by 1e-16 times the largest, i.e. destroys them.
        """
        F = self.feature_scale
        return project_psd(np.asarray(M, dtype=np.float64) * F[:, None] * F[None, :]) / F[:, None] / F[None, :]

    cone_part = psd_part

    def default_start(self) -> np.ndarray:
        r""":math:`B B^\top / r` (``B = range_basis``): :math:`\langle M_0, C_S\rangle = 1`, positive definite on
        range(C_S), so every dissimilar distance is positive; it transforms with the data under
        linear maps (unlike the orthogonal projector on the range)."""
        B = self.range_basis
        return symmetrize(B @ B.T) / self.rank

    def gradient(self, M, distances: np.ndarray | None = None) -> np.ndarray:
        r""":math:`\nabla g(M) = \sum_D \frac{w_p}{2\sqrt{D_M(p)}} C_p` (requires every :math:`D_M(p) > 0`)."""
        D = self.dissimilar_distances(M) if distances is None else distances
        if np.any(D <= 0):
            raise ValueError("g is not differentiable where a dissimilar distance is 0")
        coef = self.wD / (2.0 * np.sqrt(D))
        return symmetrize((self.UD * coef[:, None]).T @ self.UD)

    def linear_max(self, G) -> float:
        r""":math:`\max_{M \succeq 0, \langle M, C_S\rangle \le 1} \langle G, M\rangle` for G with range(G) in range(C_S)."""
        B = self.range_basis
        return max(0.0, float(np.linalg.eigvalsh(symmetrize(B.T @ G @ B))[-1]))

    def certificate(self, M) -> tuple[float, float]:
        r"""``(g(M), upper)`` with ``upper`` :math:`= \sqrt{2 g(M) \lambda(M)} \ge p^*_{\max}` (module docstring).

        Valid at any PSD M with positive dissimilar distances (``upper = inf`` otherwise); M is
        scaled onto :math:`\langle M, C_S\rangle \le 1` first, so that ``g`` is a max-form value.
        """
        M = np.asarray(M, dtype=np.float64)
        f = self.similar_sum(M)
        if f > 1.0:
            M = M / f
        D = self.dissimilar_distances(M)
        g = float(self.wD @ np.sqrt(D))
        if np.any(D <= 0):
            return g, float("inf")
        lam = self.linear_max(self.gradient(M, D))
        return g, math.sqrt(2.0 * g * lam)

class DiagonalMMCModel(_RayModel):
    r"""MMC over diagonal metrics :math:`M = \operatorname{diag}(a)`, :math:`a \ge 0` (metric-learn's ``diagonal=True``).

    With :math:`q_p = u_p \circ u_p` (the squared coordinates of a difference :math:`u_p`) and
    :math:`s = \sum_S w_p q_p`, the min and max forms of :class:`MMCModel` restricted to diagonal
    matrices read

    .. math:: p^*_{\min} = \min_{a \ge 0}\ s^\top a \ \ \text{s.t.}\ \ g(a) = \sum_D w_p \sqrt{q_p^\top a} \ge 1,
              \qquad p^*_{\max} = \max_{a \ge 0,\ s^\top a \le 1} g(a),

    both convex, with the same scale identity :math:`p^*_{\min} = 1 / (p^*_{\max})^2`.

    Certificate: as for the full MMC (module docstring), with :math:`G = \nabla g(a)` and
    :math:`\lambda(a) = \max_{a' \ge 0, s^\top a' \le 1} G^\top a' = \max(0, \max_i G_i / s_i)` (a vertex
    :math:`e_i / s_i` of the feasible set, or 0): :math:`p^*_{\min} \ge \ell(a) = 1 / (2 g(a) \lambda(a))`
    at every :math:`a \ge 0` with positive dissimilar distances, a function of the ray of :math:`a`.

    metric-learn's diagonal MMC minimises :math:`s^\top w - c \log \sum_D \sqrt{q_p^\top w}` (``c`` =
    ``diagonal_c``). Writing :math:`w = t\,u` with :math:`s^\top u = 1` it is
    :math:`t - (c/2) \log t - c \log g(u)`: the best :math:`u` is the max form's solution and
    :math:`t = c/2`, so its minimiser is :math:`(c/2)\,a^* / s^\top a^*` (:meth:`metric_learn_scale`):
    the same metric up to a scale, which ``c`` alone sets.

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Similar and dissimilar pairs, as for :class:`MMCModel` (dissimilar pairs of zero length dropped).

    Attributes
    ----------
    s : ndarray, shape (d,)
        :math:`\sum_S w_p q_p`.
    QD : ndarray, shape (q, d)
        :math:`q_p` of the dissimilar pairs, with weights ``wD``.
    active : ndarray of bool, shape (d,)
        Features with :math:`s_i > 0`; the others have :math:`a_i = 0`.

    Raises
    ------
    ValueError
        As :class:`MMCModel` for the pairs; and when a feature is constant on every similar pair
        (:math:`s_i = 0`) but not on some dissimilar pair: :math:`a = t e_i` then reaches
        objective 0 (the problem is degenerate).
    """

    def __init__(self, X, constraints: ConstraintSet):
        X, US, wS, UD, wD = _pair_differences(X, constraints)
        self.X, self.d, self.constraints = X, X.shape[1], constraints
        keep = ~zero_length_mask(UD, X)
        self.QD, self.wD = UD[keep] ** 2, wD[keep]
        if self.QD.shape[0] == 0 or not np.any(self.wD > 0):
            raise ValueError("MMC needs at least one dissimilar pair of distinct points with positive weight")
        self.s = wS @ US ** 2
        self.active = self.s > 0
        if not np.any(self.active):
            raise ValueError("the similar pairs all have zero length (or weight): s = 0 and MMC is unbounded")
        outside = (self.QD[:, ~self.active] > 0) & (self.wD > 0)[:, None]
        if np.any(outside):
            q, col = (int(k[0]) for k in np.nonzero(outside))
            i = int(np.flatnonzero(~self.active)[col])
            raise ValueError(f"the diagonal MMC is degenerate: feature {i} is constant on every similar pair but "
                             f"not on dissimilar pair {q}, so a weight on that feature alone reaches objective 0; "
                             "remove the feature or add similar pairs that vary in it")

    # ------------------------------------------------------------------ values
    def similar_sum(self, a) -> float:
        r""":math:`f(a) = s^\top a`."""
        return float(self.s @ np.asarray(a, dtype=np.float64))

    def dissimilar_distances(self, a) -> np.ndarray:
        r""":math:`q_p^\top a` of the dissimilar pairs, clipped at 0."""
        return np.maximum(self.QD @ np.asarray(a, dtype=np.float64), 0.0)

    def nonneg_part(self, a) -> np.ndarray:
        """``a`` clipped at 0, with the features of ``s_i = 0`` set to 0 (they change no distance
        of a pair the problem reads except to make it degenerate, which the model rejects)."""
        return np.where(self.active, np.maximum(np.asarray(a, dtype=np.float64), 0.0), 0.0)

    cone_part = nonneg_part

    def default_start(self) -> np.ndarray:
        r""":math:`a_i = 1 / (k s_i)` on the ``k`` active features: :math:`s^\top a = 1`, every dissimilar distance positive."""
        return np.where(self.active, 1.0 / np.where(self.active, self.s, 1.0), 0.0) / int(self.active.sum())

    def metric_learn_scale(self, a, diagonal_c: float = 1.0) -> np.ndarray:
        r"""The point of ``a``'s ray that minimises metric-learn's diagonal objective (class docstring):
        :math:`(c/2)\, a / s^\top a`."""
        P = self.nonneg_part(a)
        return 0.5 * float(diagonal_c) * P / self.similar_sum(P)

    # ------------------------------------------------------------------ certificate
    def gradient(self, a, distances: np.ndarray | None = None) -> np.ndarray:
        r""":math:`\nabla g(a) = \sum_D \frac{w_p}{2\sqrt{q_p^\top a}} q_p` (requires every distance > 0)."""
        D = self.dissimilar_distances(a) if distances is None else distances
        if np.any(D <= 0):
            raise ValueError("g is not differentiable where a dissimilar distance is 0")
        return (self.wD / (2.0 * np.sqrt(D))) @ self.QD

    def linear_max(self, G) -> float:
        r""":math:`\max_{a \ge 0,\ s^\top a \le 1} G^\top a = \max(0, \max_i G_i / s_i)` over the active features."""
        return max(0.0, float(np.max(np.asarray(G)[self.active] / self.s[self.active])))
