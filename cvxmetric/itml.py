r"""The ITML model, numpy only.

Reference: Davis et al. 2007; thesis sec. 1.3.4.5; design §5.3.

Information-theoretic metric learning minimises, over :math:`M \succ 0` and one slack per pair,

.. math::
    \min_{M \succ 0,\ \xi > 0}\ D_{\ell d}(M, M_0)
        + \gamma \sum_c w_c \Big(\frac{\xi_c}{\xi^0_c} - \log\frac{\xi_c}{\xi^0_c} - 1\Big)
    \quad\text{s.t.}\quad
    \langle M, C_c\rangle \le \xi_c\ (c \in \mathcal S),\qquad
    \langle M, C_c\rangle \ge \xi_c\ (c \in \mathcal D),

with :math:`D_{\ell d}(M, M_0) = \mathrm{tr}(M M_0^{-1}) - \log\det(M M_0^{-1}) - d`,
:math:`C_c = (x_i - x_j)(x_i - x_j)^\top` and :math:`\xi^0_c = u` on similar pairs, :math:`l` on
dissimilar pairs (:math:`0 < u < l`), and per-pair weights :math:`w_c > 0` (default 1; a
ConstraintSet's weights). With unit weights the slack term is :math:`\gamma D_{\ell d}(\mathrm{Diag}\,\xi,
\mathrm{Diag}\,\xi^0)` (Davis et al.); a weight :math:`w_c` multiplies the penalty of pair :math:`c`'s
slack, i.e. :math:`\gamma_c = \gamma w_c` replaces :math:`\gamma` for that pair everywhere below (the
model, the cvxpy formulation, the Bregman solver and the certificate read the same ``gamma_pair``).

For a fixed :math:`M` the slack problem separates and :math:`h(t) = t - \log t - 1` is convex with
its minimum at :math:`t = 1`, so the optimal slack is in closed form:
:math:`\xi_c = \max(D_M(c), \xi^0_c)` on :math:`\mathcal S` and :math:`\min(D_M(c), \xi^0_c)` on
:math:`\mathcal D`. Substituting it gives the reduced objective

.. math:: F(M) = D_{\ell d}(M, M_0) + \sum_c \gamma_c h\big(\xi_c(M) / \xi^0_c\big),

which is convex and *continuously differentiable* on :math:`\mathbb S^d_{++}` (the derivative of
each slack term vanishes where the max/min switches):

.. math::
    \nabla F(M) = M_0^{-1} - M^{-1} + \sum_c s_c \lambda_c(M)\, C_c,\qquad
    s_c\lambda_c(M) = \gamma_c\Big(\frac1{\xi^0_c} - \frac1{\xi_c(M)}\Big),

with :math:`s_c = +1` on :math:`\mathcal S` and :math:`-1` on :math:`\mathcal D`, so that
:math:`\lambda_c(M) \ge 0` is exactly the KKT multiplier of constraint :math:`c` (see
:mod:`cvxmetric.formulations.itml`). :class:`ITMLModel` is the single numpy definition of :math:`F` read by
the cvxpy formulation and the Bregman solver.

Certificate: :meth:`ITMLModel.dual_bound` turns any multipliers into a lower bound on
:math:`F^*` (the Lagrange dual, after repair to exact dual feasibility), shared by the
formulation's ``dual_bound`` hook (cvxpy's duals) and the Bregman solver (its own multipliers).

Invariances (exact): :math:`X \to sX` with :math:`u, l \to s^2 u, s^2 l` leaves :math:`F` and its
minimiser unchanged; so does the congruence :math:`M_0 = L L^\top`, :math:`X \to X L`,
:math:`M_0 \to I`, :math:`M \to L^{-1} M L^{-\top}` (whitening). The numerics use both: the
zero-length test is relative, the LogDet part and the certificate are computed in whitened
coordinates.

Default bounds: the 5th and 95th percentiles of the **squared** Euclidean lengths of the given
pairs (similar and dissimilar together). Davis et al. take percentiles of the distance
distribution; metric-learn 0.7.0 uses *unsquared* distances of all pairs of constrained points,
which compares a squared Mahalanobis distance with an unsquared bound (a known peer bug).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from ._checks import as_data_matrix, as_square_symmetric, broadcast_vector, check_positive, zero_length_mask
from .constraints import ConstraintSet
from .linalg import power_of_two

__all__ = ["ITMLModel", "ITMLDualBound", "itml_model", "default_bounds", "slack_term",
           "DEFAULT_PERCENTILES", "DUAL_DOMAIN_MARGIN", "SCALE_LIMIT"]

#: Percentiles of the pairs' squared lengths used as (u, l) when no bounds are given.
DEFAULT_PERCENTILES = (5.0, 95.0)

#: Below this spectral norm of E, log det(I + E) is computed from the eigenvalues of E (log1p),
#: above it from a Cholesky factor of I + E (see _logdet_identity_plus).
NEAR_IDENTITY = 0.5

#: The Bregman solver runs on the whitened problem divided by a power of two sigma (the median
#: pair's largest whitened coordinate, :meth:`ITMLModel.scaled_twin`), so that its distances are
#: about 1 at any scale of X and the prior. sigma^2, and the bounds divided by it, must lie within
#: [1 / SCALE_LIMIT, SCALE_LIMIT]: float64's normal numbers span 2^-1022..2^1024, and the margin
#: of 2^22 keeps sums over millions of pairs and products with gamma inside them. Outside it the
#: slacks and multipliers of the answer (scales sigma^2 and 1 / sigma^2 times the twin's) are not
#: representable, and the model says which input (X, prior, u/l) carries the scale.
SCALE_LIMIT = 2.0 ** 1000

#: The dual certificate keeps its repaired multipliers strictly inside the dual domain:
#: every eigenvalue of :math:`I + \theta K` and every slack factor :math:`1 - \theta t_c` is at
#: least this (the eigenvalues are computed with an absolute error ~1e-16 ||K||, far below it).
DUAL_DOMAIN_MARGIN = 1e-9


def slack_term(t: np.ndarray) -> np.ndarray:
    r""":math:`h(t) = t - \log t - 1` elementwise (the scalar LogDet divergence of ``t`` from 1).

    Evaluated as :math:`\delta - \log(1 + \delta)`, :math:`\delta = t - 1` (``log1p``), which keeps
    its relative accuracy near :math:`t = 1`, where :math:`h \approx \delta^2/2` and the direct
    formula cancels.
    """
    delta = np.asarray(t, dtype=np.float64) - 1.0
    return delta - np.log1p(delta)


def _slack_terms(xi: np.ndarray, xi0: np.ndarray) -> np.ndarray:
    r""":math:`h(\xi_c / \xi^0_c)` for positive slacks, accurate at every ratio.

    Near 1 (:math:`|\delta| \le` :data:`NEAR_IDENTITY`, :math:`\delta = \xi/\xi^0 - 1` formed
    without rounding the ratio first) as :math:`\delta - \log(1 + \delta)`; elsewhere as
    :math:`\xi/\xi^0 - 1 - (\log\xi - \log\xi^0)`, whose logarithm keeps its accuracy for
    ratios far from 1 (e.g. 1e-300, where :math:`\log(1 + \delta)` rounds to :math:`-\infty`).
    """
    delta = (xi - xi0) / xi0
    near = np.abs(delta) <= NEAR_IDENTITY
    safe = np.where(near, delta, 0.0)
    return np.where(near, safe - np.log1p(safe), delta - (np.log(xi) - np.log(xi0)))


def _logdet_identity_plus(E: np.ndarray, A: np.ndarray | None = None) -> tuple[float, float]:
    r"""``(log det(I + E), tr E)`` for symmetric E with I + E positive definite; log det is -inf otherwise.

    Two regimes, each accurate where the other is not: near the identity
    (:math:`\|E\|_2 \le` :data:`NEAR_IDENTITY`) from the eigenvalues of E with ``log1p``
    (relative accuracy of divergences ~:math:`\|E\|^2` that a Cholesky factor of :math:`I + E`,
    rounded at 1e-16 absolute, would lose); otherwise from a Cholesky factor of :math:`I + E`,
    which keeps the accuracy of every diagonal-scaled direction of an ill-conditioned matrix (the
    eigenvalues carry absolute errors ~1e-16 :math:`\|E\|`, fatal for the small ones). ``A``,
    when given, is :math:`I + E` as stored by the caller (forming it from E would round its small
    eigen-directions away); positive definiteness is decided by its Cholesky factorisation.
    """
    mu = np.linalg.eigvalsh(E)
    if max(-mu[0], mu[-1]) <= NEAR_IDENTITY:
        return float(np.sum(np.log1p(mu))), float(np.sum(mu))
    try:
        C = np.linalg.cholesky(np.eye(E.shape[0]) + E if A is None else A)
    except np.linalg.LinAlgError:
        return -np.inf, float(np.trace(E))
    return float(2.0 * np.sum(np.log(np.diag(C)))), float(np.trace(E))


def _as_pairs(pairs, name: str) -> np.ndarray:
    if pairs is None:
        return np.zeros((0, 2), dtype=np.int64)
    arr = np.asarray(pairs)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{name} must have shape (p, 2) (one row (i, j) per pair); got {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{name} must hold integer row indices of X; got dtype {arr.dtype}")
    return np.array(arr, dtype=np.int64, copy=True)


def _split_constraints(constraints: ConstraintSet):
    """Similar and dissimilar pair arrays, their margins as bounds, and their weights (similar first)."""
    if not isinstance(constraints, ConstraintSet):
        raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
    if np.any(constraints.is_relative):
        q = int(np.argmax(constraints.is_relative))
        raise ValueError(
            f"ITML takes pairwise constraints only; constraint {q} = {tuple(constraints.idx[q])} is a "
            "triplet/quadruplet (build the set with ConstraintSet.from_pairs)"
        )
    sim, dis = constraints.is_similar, constraints.is_dissimilar
    S = constraints.idx[sim][:, :2]
    D = constraints.idx[dis][:, 2:]
    weight = np.concatenate([constraints.weight[sim], constraints.weight[dis]])
    return S, D, -constraints.delta[sim], constraints.delta[dis], weight


def _as_pair_weights(weight, m: int) -> np.ndarray:
    """Per-pair weights: None -> ones; else finite and > 0, shape (m,) (similar pairs first)."""
    if weight is None:
        return np.ones(m)
    w = broadcast_vector(weight, m, "weight (similar pairs first)")
    if np.any(w <= 0):
        k = int(np.argmax(w <= 0))
        raise ValueError(f"weight must be > 0 for every pair; pair {k} has weight {w[k]:.3g} (a pair of weight "
                         "0 has a free slack and constrains nothing: drop it from the pairs)")
    return w


def _order_message(u: float, l: float, u_default: bool, l_default: bool) -> str:
    """The message for bounds with ``u >= l``, naming only the bounds the caller passed."""
    def default(name: str, q: float, value: float) -> str:
        return f"the default {name}, the {q:g}th percentile of the squared lengths of the pairs of X ({value:.6g})"

    if u_default:
        return (f"l={l:.6g} must be above u, and it is not above {default('u', DEFAULT_PERCENTILES[0], u)}: "
                "pass a larger l, or u as well")
    if l_default:
        return (f"u={u:.6g} must be below l, and it is not below {default('l', DEFAULT_PERCENTILES[1], l)}: "
                "pass a smaller u, or l as well")
    return (f"ITML needs bounds u < l (similar below u, dissimilar above l); got u={u:.6g}, l={l:.6g}: "
            "pass u < l")


@dataclass(frozen=True)
class ITMLDualBound:
    r"""A certified lower bound on the ITML optimum (see :meth:`ITMLModel.dual_bound`).

    Attributes
    ----------
    value : float
        :math:`g(\theta\lambda_+) \le F^*`.
    multipliers : ndarray, shape (m,)
        The repaired multipliers :math:`\theta\lambda_+` (exactly dual feasible).
    theta : float
        The scaling :math:`\theta \in [0, 1]` applied to the clipped multipliers.
    """

    value: float
    multipliers: np.ndarray
    theta: float


def default_bounds(X, similar, dissimilar, percentiles=DEFAULT_PERCENTILES) -> tuple[float, float]:
    r"""ITML's default bounds: percentiles of the **squared** Euclidean lengths of the pairs.

    Parameters
    ----------
    X : array_like, shape (n, d)
    similar, dissimilar : array_like of int, shape (p, 2) and (q, 2)
    percentiles : tuple of two floats
        Default (5, 95).

    Returns
    -------
    (u, l) : tuple of float
        Lower and upper percentile of :math:`\|x_i - x_j\|^2` over all given pairs.

    Raises
    ------
    ValueError
        Without pairs, or when the two percentiles are equal (the pairs all have one length):
        the message names the pairs of X, not the bounds, which the caller did not pass.
    """
    X = as_data_matrix(X)
    P = np.concatenate([_as_pairs(similar, "similar"), _as_pairs(dissimilar, "dissimilar")])
    if P.shape[0] == 0:
        raise ValueError("default_bounds needs at least one pair")
    diff = X[P[:, 0]] - X[P[:, 1]]
    sq = np.einsum("ij,ij->i", diff, diff)
    u, l = np.percentile(sq, percentiles)
    if not u < l:
        raise ValueError(
            f"the default bounds of ITML, the {percentiles[0]:g}th and {percentiles[1]:g}th percentiles of the "
            f"squared lengths of the {P.shape[0]} given pairs of X, are equal ({u:.6g}): the pairs all have the "
            "same length, so they cannot separate similar from dissimilar pairs; pass the bounds explicitly "
            "(u < l), or pairs of different lengths"
        )
    return float(u), float(l)


class ITMLModel:
    r"""The ITML objective on one data set (see the module docstring for the program).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row (finite).
    similar, dissimilar : array_like of int, shape (p, 2) and (q, 2)
        Row indices of the similar and dissimilar pairs; ``p + q >= 1``. A pair whose points
        coincide (:func:`cvxmetric._checks.zero_length_mask`: every feature equal up to a
        *relative* round-off) is rejected: its dissimilar slack would have to
        vanish (infinite objective) and a similar one constrains nothing.
    u, l : float, optional
        Bounds :math:`0 < u < l` (similar pairs: :math:`D_M \le u`; dissimilar: :math:`D_M \ge l`).
        Default: :func:`default_bounds` (5th/95th percentiles of the squared pair lengths).
    gamma : float
        Slack weight :math:`\gamma > 0`.
    prior : array_like, shape (d, d), optional
        :math:`M_0`, symmetric positive definite (default identity).
    weight : float or array_like, shape (p + q,), optional
        Per-pair weights :math:`w_c > 0` (similar pairs first), multiplying the pair's slack
        penalty: :math:`\gamma w_c h(\xi_c/\xi^0_c)`. Default 1. A ConstraintSet's weights are
        used (:meth:`from_constraints`). Zero weights are rejected: such a pair constrains nothing.

    Attributes
    ----------
    V : ndarray, shape (m, d)
        Difference vectors :math:`x_i - x_j`, similar pairs first (rows ``0 .. p-1``).
    W : ndarray, shape (m, d)
        Whitened difference vectors :math:`L^\top v_c` (rows of :math:`V L`), where
        :math:`M_0 = L L^\top` (Cholesky): :math:`D_M(c) = w_c^\top \tilde M w_c` with
        :math:`\tilde M = L^{-1} M L^{-\top}` (see :meth:`whiten`).
    sign : ndarray, shape (m,)
        :math:`s_c = +1` (similar) or :math:`-1` (dissimilar).
    xi0 : ndarray, shape (m,)
        :math:`\xi^0_c` (``u`` or ``l``).
    weight : ndarray, shape (m,)
        :math:`w_c`.
    gamma_pair : ndarray, shape (m,)
        :math:`\gamma_c = \gamma w_c`, the slack weight of each pair.
    pairs : ndarray of int, shape (m, 2)
        The pairs in the order of ``V``.
    M0, M0_inv, prior_factor : ndarray, shape (d, d)
        Prior, its inverse, and its lower Cholesky factor :math:`L`.
    logdet_M0 : float
    n_similar, n_dissimilar, m, d : int
    given : frozenset of str
        Which of ``u``, ``l``, ``prior`` the caller passed (the others are defaults): the
        messages about the bounds' scale name only these (:meth:`scaled_twin`).

    Notes
    -----
    .. math::
        F(M) = \mathrm{tr}(M M_0^{-1}) - \log\det M + \log\det M_0 - d
               + \gamma \sum_c w_c \big(\xi_c/\xi^0_c - \log(\xi_c/\xi^0_c) - 1\big),

    :math:`\xi_c = \max(D_M(c), u)` on :math:`\mathcal S`, :math:`\min(D_M(c), l)` on :math:`\mathcal D`.
    :math:`F = +\infty` outside :math:`\mathbb S^d_{++}`.

    The LogDet part is evaluated in *whitened* coordinates, :math:`D_{\ell d}(M, M_0) =
    D_{\ell d}(\tilde M, I) = \mathrm{tr}\tilde M - \log\det\tilde M - d`, by triangular solves
    with :math:`L`: with a prior of condition :math:`10^{11}` the explicit
    :math:`\langle M, M_0^{-1}\rangle` cancels catastrophically. ITML is the same problem in the
    whitened coordinates (prior :math:`I`, differences :math:`W`), which the Bregman solver and
    the certificate use.
    """

    def __init__(self, X, similar=None, dissimilar=None, *, u=None, l=None, gamma: float = 1.0, prior=None,
                 weight=None):
        X = as_data_matrix(X)
        n, d = X.shape
        S = _as_pairs(similar, "similar")
        D = _as_pairs(dissimilar, "dissimilar")
        if S.shape[0] + D.shape[0] == 0:
            raise ValueError("ITML needs at least one similar or dissimilar pair; both are empty")
        for P, name in ((S, "similar"), (D, "dissimilar")):
            if P.size and (P.min() < 0 or P.max() >= n):
                k = int(np.argmax((P.min(axis=1) < 0) | (P.max(axis=1) >= n)))
                raise ValueError(f"{name} pair {k} = {tuple(P[k])} indexes a row outside [0, {n}) of X")
        gamma = check_positive(gamma, "gamma")
        pairs = np.concatenate([S, D])
        V = X[pairs[:, 0]] - X[pairs[:, 1]]
        sq = np.einsum("ij,ij->i", V, V)
        zero = zero_length_mask(V, X)
        if np.any(zero):
            k = int(np.argmax(zero))
            kind, pos = ("similar", k) if k < S.shape[0] else ("dissimilar", k - S.shape[0])
            i, j = pairs[k]
            raise ValueError(
                f"{kind} pair {pos} = ({i}, {j}) has zero length: rows {i} and {j} of X are identical "
                f"(squared distance {sq[k]:.3g}, largest pair {sq.max():.3g}), so its constraint is "
                "degenerate (a dissimilar pair could never be pushed apart); remove duplicate points or "
                "drop the pair"
            )
        weight = _as_pair_weights(weight, pairs.shape[0])
        u_given, l_given = u, l
        if u is None or l is None:
            du, dl = default_bounds(X, S, D)
            u = du if u is None else u
            l = dl if l is None else l
        u = check_positive(u, "u")
        l = check_positive(l, "l")
        if not u < l:
            raise ValueError(_order_message(u, l, u_given is None, l_given is None))
        if prior is None:
            M0 = np.eye(d)
        else:
            M0 = as_square_symmetric(prior, "prior", d=d)
        try:
            Lc = np.linalg.cholesky(M0)
        except np.linalg.LinAlgError:
            lam = float(np.linalg.eigvalsh(M0)[0])
            raise ValueError(f"prior must be symmetric positive definite (smallest eigenvalue {lam:.3g}); "
                             "pass e.g. the identity or a regularised covariance inverse") from None
        lam = np.linalg.eigvalsh(M0)
        if lam[0] <= 1e-12 * lam[-1]:
            raise ValueError(f"prior is numerically singular (eigenvalues {lam[0]:.3g} .. {lam[-1]:.3g}); "
                             "pass a well-conditioned positive definite prior")
        self._store(X, pairs, gamma, S.shape[0], u, l, weight, M0, Lc)
        self.given: frozenset = frozenset(name for name, value in (("u", u_given), ("l", l_given), ("prior", prior))
                               if value is not None)

    def _store(self, X, pairs, gamma, n_similar, u, l, weight, M0, Lc) -> None:
        """Set every attribute from validated inputs (shared by ``__init__`` and :meth:`normalized_twin`)."""
        self.X = X
        self.d = X.shape[1]
        self.gamma = gamma
        self.n_similar = int(n_similar)
        self.n_dissimilar = int(pairs.shape[0] - n_similar)
        self.m = int(pairs.shape[0])
        self.pairs = pairs
        self.V = X[pairs[:, 0]] - X[pairs[:, 1]]
        self.sq_lengths = np.einsum("ij,ij->i", self.V, self.V)
        self.sign = np.concatenate([np.ones(self.n_similar), -np.ones(self.n_dissimilar)])
        self.u, self.l = u, l
        self.xi0 = np.concatenate([np.full(self.n_similar, u), np.full(self.n_dissimilar, l)])
        self.weight = weight
        self.gamma_pair = gamma * weight
        self.M0 = M0
        M0_inv = np.linalg.inv(M0)
        self.M0_inv = 0.5 * (M0_inv + M0_inv.T)
        self.prior_factor = Lc
        self.W = self.V @ Lc
        self.logdet_M0 = float(2.0 * np.sum(np.log(np.diag(Lc))))
        self.given = frozenset()   # which of u, l, prior the caller passed (set by __init__)
        for a in (self.X, self.pairs, self.V, self.W, self.sq_lengths, self.sign, self.xi0, self.weight,
                  self.gamma_pair, self.M0, self.M0_inv, self.prior_factor):
            a.setflags(write=False)

    def normalized_twin(self) -> tuple["ITMLModel", np.ndarray, float]:
        r"""A well-scaled twin of this model: ``(twin, T, s)`` with :math:`F(T P T) = F_{\rm twin}(P)`.

        With the prior's eigendecomposition :math:`M_0 = Q\,\mathrm{diag}(\mu)\,Q^\top` and the
        data's metric scale :math:`\mu_* = \sqrt{ul} / \mathrm{median}_c \|v_c\|^2` (the multiple of
        the identity that puts a typical pair between the bounds),

        .. math::
            T = Q\,\mathrm{diag}\big(\min(\mu, \mu_*)\big)^{1/2} Q^\top,\qquad
            M_0^{\rm twin} = T^{-1} M_0 T^{-1} = Q\,\mathrm{diag}\big(\max(1, \mu/\mu_*)\big) Q^\top,

        and the twin has data :math:`X T / s`, bounds :math:`u/s^2, l/s^2`, prior
        :math:`M_0^{\rm twin}` and the same :math:`\gamma` and weights; :math:`s` is the power of
        two nearest :math:`(ul)^{1/4}` (division by it is exact), which puts the bounds around 1.
        Exact: :math:`D_{\ell d}` is invariant under the congruence by :math:`T` and the distances
        and bounds are divided by the same :math:`s^2`.

        *Partial* whitening: the prior's directions below the data's scale are whitened (their
        :math:`M_0^{-1}` coefficients would be huge, e.g. 1e11), the ones above it are only
        rescaled (whitening them would make the optimum, which the data shrink there, tiny in the
        twin). Measured with priors of condition 1e11 on iris (small, large and log-spaced
        eigenvalues, axis-aligned and rotated): 9 of 10 certified to 1e-8 by the first Clarabel
        rung in 0.1 s, against 5 of 10 with full whitening (the others took 90 s or failed) and 4
        of 10 for the original problem. With an identity prior :math:`T` is a multiple of
        :math:`I`, a plain rescaling. The twin is built from this model's validated pairs without
        re-testing them (a congruence is not a scaling, so a relative zero-length test could read
        differently on the twin).
        """
        mu, Q = np.linalg.eigh(self.M0)
        mu_star = math.sqrt(self.u * self.l) / float(np.median(self.sq_lengths))
        T = (Q * np.sqrt(np.minimum(mu, mu_star))) @ Q.T
        T = 0.5 * (T + T.T)
        prior = (Q * np.maximum(1.0, mu / mu_star)) @ Q.T
        prior = 0.5 * (prior + prior.T)
        s = power_of_two((self.u * self.l) ** 0.25)
        twin = object.__new__(type(self))
        twin._store((self.X @ T) / s, self.pairs, self.gamma, self.n_similar, self.u / s**2, self.l / s**2,
                    self.weight, prior, np.linalg.cholesky(prior))
        return twin, T, s

    def scaled_twin(self) -> tuple["ITMLModel", float]:
        r"""The whitened problem divided by a power of two: ``(twin, sigma)``, for the Bregman solver.

        The twin has prior :math:`I`, difference vectors :math:`w_c / \sigma` (the whitened
        differences, rows of ``W``, held as data rows ``c`` and a zero row ``m``) and bounds
        :math:`u/\sigma^2, l/\sigma^2`, with :math:`\sigma` the power of two nearest the median
        over the pairs of :math:`\|w_c\|_\infty`: its distances are about 1 whatever the scale of
        X and of the prior. Exact (division by a power of two): the twin's whitened iterate
        :math:`\tilde M`, objective and dual bound are this model's, its multipliers are
        :math:`\sigma^2\lambda` and its slacks :math:`\xi / \sigma^2`.

        Raises
        ------
        ValueError
            When :math:`\sigma^2` or the twin's bounds leave :math:`[2^{-1000}, 2^{1000}]`
            (:data:`SCALE_LIMIT`): float64 cannot hold the answer's slacks or multipliers. The
            message names the input that carries the scale (the prior, or the bounds u and l when
            they were passed) and the factor to rescale it by.
        """
        sigma = float(power_of_two(np.median(np.max(np.abs(self.W), axis=1))))
        u, l = self.u / sigma / sigma, self.l / sigma / sigma
        self._check_scales(sigma, u, l)
        m, d = self.m, self.d
        twin = object.__new__(type(self))
        twin._store(np.vstack([self.W / sigma, np.zeros((1, d))]),
                    np.column_stack([np.arange(m), np.full(m, m)]), self.gamma, self.n_similar, u, l,
                    self.weight, np.eye(d), np.eye(d))
        return twin, sigma

    def _check_scales(self, sigma: float, u: float, l: float) -> None:
        """ValueError (see :meth:`scaled_twin`) when sigma^2 or the scaled bounds are not representable."""
        def inside(x: float) -> bool:
            return 1.0 / SCALE_LIMIT <= x <= SCALE_LIMIT

        length = 2.0 * math.log10(sigma)    # log10 of the pairs' typical squared whitened length
        if not inside(sigma * sigma):
            raise ValueError(
                f"prior gives the pairs of X squared lengths near 1e{length:+.0f} (the distances ITML works with), "
                f"outside the scales float64 holds with margin (2^-1000..2^1000); rescale the prior or X so that "
                "the pairs' squared lengths under the prior are nearer 1")
        bad = [(name, value) for name, value, scaled in (("u", self.u, u), ("l", self.l, l)) if not inside(scaled)]
        if not bad:
            return
        passed = [(name, value) for name, value in bad if name in self.given]
        name, value = (passed or bad)[0]
        ratio = math.log10(value) - length     # log10 of the bound over the pairs' squared lengths
        if passed:
            where = " under the prior" if "prior" in self.given else ""
            raise ValueError(
                f"the bound {name}={value:.3g} is about 1e{ratio:+.0f} times the squared lengths of the pairs of "
                f"X{where} (near 1e{length:+.0f}): float64 cannot hold the slacks and multipliers of that problem; "
                f"pass {name} on the scale of the pairs' squared distances")
        raise ValueError(
            f"prior makes the squared lengths of the pairs of X about 1e{-ratio:+.0f} times their Euclidean ones, "
            "from which the default bounds come: float64 cannot hold the slacks and multipliers of that "
            f"problem; scale the prior by about 1e{ratio:+.0f}, or pass the bounds")

    @classmethod
    def from_constraints(cls, X, constraints: ConstraintSet, *, u=None, l=None, gamma: float = 1.0,
                         prior=None) -> "ITMLModel":
        """The model of a pairwise :class:`~cvxmetric.constraints.ConstraintSet`.

        The set's margins are its bounds (similar rows carry ``delta = -u``, dissimilar rows
        ``delta = l``) and must be equal within each kind; explicit ``u``/``l`` override them.
        The set's weights are the per-pair weights (similar pairs first in the model, in their
        order within the set). Triplet/quadruplet rows are rejected.
        """
        S, D, us, ls, weight = _split_constraints(constraints)
        for b, name, given in ((us, "u", u), (ls, "l", l)):
            if given is None and b.size and np.ptp(b) > 0:
                raise ValueError(f"the similar/dissimilar margins of constraints differ between pairs; ITML "
                                 f"uses one bound per kind: pass {name}= explicitly")
        u = u if u is not None or us.size == 0 else float(us[0])
        l = l if l is not None or ls.size == 0 else float(ls[0])
        return cls(X, S, D, u=u, l=l, gamma=gamma, prior=prior, weight=weight)

    # ------------------------------------------------------------------ coordinates
    def _matrix(self, M) -> np.ndarray:
        return as_square_symmetric(M, "M", d=self.d)

    def whiten(self, M) -> np.ndarray:
        r""":math:`\tilde M = L^{-1} M L^{-\top}` (two triangular solves; symmetric)."""
        L = self.prior_factor
        A = solve_triangular(L, np.asarray(M, dtype=np.float64), lower=True)
        P = solve_triangular(L, A.T, lower=True)
        return 0.5 * (P + P.T)

    def unwhiten(self, P) -> np.ndarray:
        r""":math:`M = L \tilde M L^\top`, the inverse of :meth:`whiten`."""
        L = self.prior_factor
        M = L @ np.asarray(P, dtype=np.float64) @ L.T
        return 0.5 * (M + M.T)

    # ------------------------------------------------------------------ evaluation
    def distances(self, M) -> np.ndarray:
        r""":math:`D_M(c) = \langle M, C_c\rangle` for every pair, shape (m,)."""
        M = np.asarray(M, dtype=np.float64)
        return np.einsum("ij,ij->i", self.V @ M, self.V)

    def whitened_distances(self, P) -> np.ndarray:
        r""":math:`D_M(c) = w_c^\top \tilde M w_c` from the whitened matrix :math:`\tilde M`."""
        P = np.asarray(P, dtype=np.float64)
        return np.einsum("ij,ij->i", self.W @ P, self.W)

    def slack(self, M) -> np.ndarray:
        r"""Optimal slack at fixed M: :math:`\max(D_M, u)` on S, :math:`\min(D_M, l)` on D; shape (m,)."""
        return self.slack_from_distances(self.distances(M))

    def slack_from_distances(self, dist: np.ndarray) -> np.ndarray:
        """The closed-form slack for given distances (see :meth:`slack`)."""
        dist = np.asarray(dist, dtype=np.float64)
        s = self.n_similar
        return np.concatenate([np.maximum(dist[:s], self.xi0[:s]), np.minimum(dist[s:], self.xi0[s:])])

    def slack_value(self, xi) -> float:
        r""":math:`\sum_c \gamma_c h(\xi_c / \xi^0_c)` (``inf`` if some :math:`\xi_c \le 0`)."""
        xi = np.asarray(xi, dtype=np.float64)
        if np.any(xi <= 0):
            return np.inf
        return float(np.sum(self.gamma_pair * _slack_terms(xi, self.xi0)))

    def whitened_divergence(self, P) -> float:
        r""":math:`D_{\ell d}(\tilde M, I) = \mathrm{tr}(\tilde M - I) - \log\det\tilde M` (``inf`` unless PD).

        Through :math:`E = \tilde M - I` (:func:`_logdet_identity_plus`), so that a point near the
        prior keeps the relative accuracy of its (small) divergence.
        """
        P = np.asarray(P, dtype=np.float64)
        logdet, trace = _logdet_identity_plus(P - np.eye(self.d), P)
        if not np.isfinite(logdet):
            return np.inf
        return trace - logdet

    def logdet_divergence(self, M) -> float:
        r""":math:`D_{\ell d}(M, M_0)` (``inf`` unless M is positive definite), via :meth:`whiten`."""
        return self.whitened_divergence(self.whiten(self._matrix(M)))

    def value(self, M) -> float:
        """The reduced objective :math:`F(M)` (slacks minimised in closed form)."""
        M = self._matrix(M)
        ld = self.logdet_divergence(M)
        if not np.isfinite(ld):
            return np.inf
        return ld + self.slack_value(self.slack(M))

    def whitened_value(self, P) -> float:
        r""":math:`F(L \tilde M L^\top)` computed from :math:`\tilde M` alone (no round trip)."""
        ld = self.whitened_divergence(P)
        if not np.isfinite(ld):
            return np.inf
        return ld + self.slack_value(self.slack_from_distances(self.whitened_distances(P)))

    def multipliers(self, M) -> np.ndarray:
        r"""KKT multipliers implied by M: :math:`\lambda_c = s_c\gamma_c(1/\xi^0_c - 1/\xi_c(M)) \ge 0`."""
        return self.multipliers_from_slack(self.slack(M))

    def multipliers_from_slack(self, xi) -> np.ndarray:
        r""":math:`\lambda_c = s_c \gamma_c (1/\xi^0_c - 1/\xi_c)`, the slack-stationarity multipliers."""
        return self.sign * self.gamma_pair * (1.0 / self.xi0 - 1.0 / np.asarray(xi, dtype=np.float64))

    def slack_from_multipliers(self, lam) -> np.ndarray:
        r"""The slack stationarity inverted: :math:`1/\xi_c = 1/\xi^0_c - s_c \lambda_c / \gamma_c`."""
        return 1.0 / (1.0 / self.xi0 - self.sign * np.asarray(lam, dtype=np.float64) / self.gamma_pair)

    def weighted_sum(self, coef) -> np.ndarray:
        r""":math:`\sum_c a_c C_c` as a symmetric (d, d) matrix."""
        coef = np.asarray(coef, dtype=np.float64)
        G = (self.V * coef[:, None]).T @ self.V
        return 0.5 * (G + G.T)

    def whitened_sum(self, coef) -> np.ndarray:
        r""":math:`\sum_c a_c w_c w_c^\top = L^\top (\sum_c a_c C_c) L` as a symmetric (d, d) matrix."""
        coef = np.asarray(coef, dtype=np.float64)
        G = (self.W * coef[:, None]).T @ self.W
        return 0.5 * (G + G.T)

    def gradient(self, M) -> np.ndarray:
        r""":math:`\nabla F(M) = M_0^{-1} - M^{-1} + \sum_c s_c \lambda_c(M) C_c` (M positive definite)."""
        M = self._matrix(M)
        Minv = np.linalg.inv(M)
        return self.M0_inv - 0.5 * (Minv + Minv.T) + self.weighted_sum(self.sign * self.multipliers(M))

    def kkt_residual(self, M) -> float:
        r"""Relative stationarity residual of a positive definite M, in whitened coordinates.

        The gradient congruent to whitened coordinates, :math:`L^\top \nabla F(M) L = I -
        \tilde M^{-1} + K`, :math:`K = \sum_c s_c\lambda_c(M) w_c w_c^\top`, in Frobenius norm
        divided by the largest of the three terms it balances, :math:`\max(\sqrt d,
        \|\tilde M^{-1}\|_F, \|K\|_F)`. Invariant under :math:`X \to sX` (bounds times
        :math:`s^2`) and under any congruence of the prior, so neither the data's scale nor a
        prior's conditioning can hide a residual (dividing the raw gradient by
        :math:`\|M_0^{-1}\|_F` hid a 114 % error with a prior of condition 1e11). ``inf`` when M
        is not positive definite (F is then infinite). This is a diagnostic: the solver's
        verdict rests on the certified gap (:meth:`dual_bound`).
        """
        return self.whitened_kkt_residual(self.whiten(self._matrix(M)))

    def whitened_kkt_residual(self, P) -> float:
        r""":meth:`kkt_residual` of :math:`M = L\tilde M L^\top` computed from :math:`\tilde M` alone."""
        P = np.asarray(P, dtype=np.float64)
        try:
            np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            return np.inf
        Pinv = np.linalg.inv(P)
        Pinv = 0.5 * (Pinv + Pinv.T)
        xi = self.slack_from_distances(self.whitened_distances(P))
        K = self.whitened_sum(self.sign * self.multipliers_from_slack(xi))
        R = np.eye(self.d) - Pinv + K
        scale = max(float(np.sqrt(self.d)), float(np.linalg.norm(Pinv)), float(np.linalg.norm(K)))
        return float(np.linalg.norm(R)) / scale

    # ------------------------------------------------------------------ certificate
    def dual_bound(self, lam) -> ITMLDualBound:
        r"""A certified lower bound on :math:`F^*` from any multipliers (one per pair).

        Parameters
        ----------
        lam : array_like, shape (m,)
            Candidate multipliers of the pair constraints (similar pairs first), e.g. cvxpy's
            duals or the Bregman solver's :math:`\lambda`. They need not be feasible.

        Returns
        -------
        ITMLDualBound
            The bound, the repaired multipliers and the scaling :math:`\theta`.

        Notes
        -----
        The Lagrangian of the program (module docstring) with multipliers :math:`\lambda \ge 0`,
        :math:`B = M_0^{-1} + \sum_c s_c\lambda_c C_c`, minimised over :math:`M \succ 0`
        (:math:`\min_M \mathrm{tr}(MB) - \log\det M = d + \log\det B`, needs :math:`B \succ 0`)
        and over each :math:`\xi_c > 0` (:math:`\min_\xi \gamma_c h(\xi/\xi^0_c) - s_c\lambda_c\xi
        = \gamma_c\log(1 - t_c)`, :math:`t_c = s_c\lambda_c\xi^0_c/\gamma_c`, needs
        :math:`t_c < 1`) gives the dual function

        .. math::
            g(\lambda) = \log\det(I + K) + \sum_c \gamma_c \log(1 - t_c), \qquad
            K = L^\top \Big(\sum_c s_c\lambda_c C_c\Big) L = \sum_c s_c\lambda_c w_c w_c^\top,

        (:math:`\log\det(M_0 B) = \log\det(L^\top B L)`), and :math:`g(\lambda) \le F^*` for
        every :math:`\lambda` in its domain (weak duality). Repair: clip
        :math:`\lambda_+ = \max(\lambda, 0)`; along :math:`\theta\lambda_+`,
        :math:`g(\theta) = \sum_i \log(1 + \theta\mu_i) + \sum_c\gamma_c\log(1 - \theta t_c)` with
        :math:`\mu` the eigenvalues of :math:`K` is concave and its domain is an interval
        :math:`[0, \theta_{\max})`; :math:`\theta \in [0, 1]` is chosen to maximise it (bisection on
        :math:`g'`) with :math:`1 + \theta\mu_i \ge` :data:`DUAL_DOMAIN_MARGIN` and
        :math:`1 - \theta t_c \ge` :data:`DUAL_DOMAIN_MARGIN`, so :math:`\theta\lambda_+` is
        exactly dual feasible and the bound is :math:`g(\theta)`. :math:`\theta = 0` gives
        :math:`g = 0 \le F^*`. Everything is evaluated in whitened coordinates, so the prior's
        conditioning does not enter.
        """
        lam = np.asarray(lam, dtype=np.float64).reshape(-1)
        if lam.shape != (self.m,):
            raise ValueError(f"lam must have shape ({self.m},) (one multiplier per pair); got {lam.shape}")
        if not np.all(np.isfinite(lam)):
            raise ValueError("lam contains NaN or inf; pass finite multipliers")
        lam = np.maximum(lam, 0.0)
        mu = np.linalg.eigvalsh(self.whitened_sum(self.sign * lam))
        t = self.sign * lam * self.xi0 / self.gamma_pair
        g_c = self.gamma_pair
        theta_max = 1.0
        if mu[0] < 0:
            theta_max = min(theta_max, (1.0 - DUAL_DOMAIN_MARGIN) / -mu[0])
        if t.size and t.max() > 0:
            theta_max = min(theta_max, (1.0 - DUAL_DOMAIN_MARGIN) / float(t.max()))

        def g(th: float) -> float:
            return float(np.sum(np.log1p(th * mu)) + np.sum(g_c * np.log1p(-th * t)))

        def dg(th: float) -> float:
            return float(np.sum(mu / (1.0 + th * mu)) - np.sum(g_c * t / (1.0 - th * t)))

        if dg(theta_max) >= 0.0:
            theta = theta_max
        elif dg(0.0) <= 0.0:
            theta = 0.0
        else:
            lo, hi = 0.0, theta_max
            for _ in range(100):          # g' is decreasing: bisect its root
                mid = 0.5 * (lo + hi)
                if dg(mid) > 0.0:
                    lo = mid
                else:
                    hi = mid
                if hi - lo <= 1e-15 * hi:
                    break
            theta = lo
        value = self._dual_value(theta * lam)
        if not value >= 0.0:              # g(0) = 0 is always a valid bound
            theta, value = 0.0, 0.0
        return ITMLDualBound(value=value, multipliers=theta * lam, theta=float(theta))

    def _dual_value(self, lam: np.ndarray) -> float:
        r""":math:`g(\lambda)` at dual-feasible multipliers (``-inf`` outside the domain).

        :math:`\log\det(I + K)` by :func:`_logdet_identity_plus`: from the eigenvalues of
        :math:`K` alone they overstated the bound by 2e-9 absolute for an ill-conditioned
        :math:`I + K` (a prior of condition 1e11), more than the gap being certified.
        """
        logdet, _ = _logdet_identity_plus(self.whitened_sum(self.sign * lam))
        t = self.sign * lam * self.xi0 / self.gamma_pair
        return float(logdet + np.sum(self.gamma_pair * np.log1p(-t)))

    def svec_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Rows :math:`a_c` with :math:`D_M(c) = a_c\cdot\mathrm{svec}(M)`: (similar, dissimilar)."""
        from .linalg import svec_outer

        A = svec_outer(self.V)
        return A[: self.n_similar], A[self.n_similar:]

    def __repr__(self) -> str:
        return (f"ITMLModel(d={self.d}, similar={self.n_similar}, dissimilar={self.n_dissimilar}, "
                f"u={self.u:.4g}, l={self.l:.4g}, gamma={self.gamma:.4g})")


def itml_model(X, pairs=None, dissimilar=None, *, u=None, l=None, gamma: float = 1.0, prior=None,
               weight=None) -> ITMLModel:
    """Build an :class:`ITMLModel` from a pairwise ConstraintSet or from explicit pair arrays.

    Parameters
    ----------
    X : array_like, shape (n, d)
    pairs : ConstraintSet or array_like of int, shape (p, 2)
        Either a ConstraintSet of similar/dissimilar pairs (its margins give u and l and its
        weights the per-pair weights, see :meth:`ITMLModel.from_constraints`; then ``dissimilar``
        and ``weight`` must be None) or the similar pairs.
    dissimilar : array_like of int, shape (q, 2), optional
        The dissimilar pairs (explicit-array form).
    u, l, gamma, prior, weight
        See :class:`ITMLModel`.
    """
    if isinstance(pairs, ConstraintSet):
        if dissimilar is not None:
            raise ValueError("pass either a ConstraintSet or explicit (similar, dissimilar) arrays, not both")
        if weight is not None:
            raise ValueError("a ConstraintSet carries its own weights; pass weight= only with explicit pair "
                             "arrays (or build the set with ConstraintSet.from_pairs(..., weight=w))")
        return ITMLModel.from_constraints(X, pairs, u=u, l=l, gamma=gamma, prior=prior)
    return ITMLModel(X, pairs, dissimilar, u=u, l=l, gamma=gamma, prior=prior, weight=weight)
