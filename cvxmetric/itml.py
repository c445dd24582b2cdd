r"""The ITML model (Davis et al. 2007; thesis sec. 1.3.4.5; DESIGN §5.3), numpy only.

Information-theoretic metric learning minimises, over :math:`M \succ 0` and one slack per pair,

.. math::
    \min_{M \succ 0,\ \xi > 0}\ D_{\ell d}(M, M_0)
        + \gamma \sum_c \Big(\frac{\xi_c}{\xi^0_c} - \log\frac{\xi_c}{\xi^0_c} - 1\Big)
    \quad\text{s.t.}\quad
    \langle M, C_c\rangle \le \xi_c\ (c \in \mathcal S),\qquad
    \langle M, C_c\rangle \ge \xi_c\ (c \in \mathcal D),

with :math:`D_{\ell d}(M, M_0) = \mathrm{tr}(M M_0^{-1}) - \log\det(M M_0^{-1}) - d`,
:math:`C_c = (x_i - x_j)(x_i - x_j)^\top` and :math:`\xi^0_c = u` on similar pairs, :math:`l` on
dissimilar pairs (:math:`0 < u < l`). The slack term is :math:`\gamma D_{\ell d}(\mathrm{Diag}\,\xi,
\mathrm{Diag}\,\xi^0)`.

For a fixed :math:`M` the slack problem separates and :math:`h(t) = t - \log t - 1` is convex with
its minimum at :math:`t = 1`, so the optimal slack is in closed form:
:math:`\xi_c = \max(D_M(c), \xi^0_c)` on :math:`\mathcal S` and :math:`\min(D_M(c), \xi^0_c)` on
:math:`\mathcal D`. Substituting it gives the reduced objective

.. math:: F(M) = D_{\ell d}(M, M_0) + \gamma \sum_c h\big(\xi_c(M) / \xi^0_c\big),

which is convex and *continuously differentiable* on :math:`\mathbb S^d_{++}` (the derivative of
each slack term vanishes where the max/min switches):

.. math::
    \nabla F(M) = M_0^{-1} - M^{-1} + \sum_c s_c \lambda_c(M)\, C_c,\qquad
    s_c\lambda_c(M) = \gamma\Big(\frac1{\xi^0_c} - \frac1{\xi_c(M)}\Big),

with :math:`s_c = +1` on :math:`\mathcal S` and :math:`-1` on :math:`\mathcal D`, so that
:math:`\lambda_c(M) \ge 0` is exactly the KKT multiplier of constraint :math:`c` (see
:mod:`formulations.itml`). :class:`ITMLModel` is the single numpy definition of :math:`F` read by
the cvxpy formulation and the Bregman solver.

Default bounds: the 5th and 95th percentiles of the **squared** Euclidean lengths of the given
pairs (similar and dissimilar together). Davis et al. take percentiles of the distance
distribution; metric-learn 0.7.0 uses *unsquared* distances of all pairs of constrained points,
which compares a squared Mahalanobis distance with an unsquared bound (a known peer bug).
"""
from __future__ import annotations

import numpy as np

from ._checks import as_data_matrix, as_square_symmetric, check_positive
from .constraints import ConstraintSet
from .tolerances import ZERO_LENGTH_TOL

__all__ = ["ITMLModel", "itml_model", "default_bounds", "slack_term", "DEFAULT_PERCENTILES"]

#: Percentiles of the pairs' squared lengths used as (u, l) when no bounds are given.
DEFAULT_PERCENTILES = (5.0, 95.0)


def slack_term(t: np.ndarray) -> np.ndarray:
    r""":math:`h(t) = t - \log t - 1` elementwise (the scalar LogDet divergence of ``t`` from 1)."""
    t = np.asarray(t, dtype=np.float64)
    return t - np.log(t) - 1.0


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
    """Similar and dissimilar pair arrays, and their margins as bounds, of a pair ConstraintSet."""
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
    return S, D, -constraints.delta[sim], constraints.delta[dis]


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
    """
    X = as_data_matrix(X)
    P = np.concatenate([_as_pairs(similar, "similar"), _as_pairs(dissimilar, "dissimilar")])
    if P.shape[0] == 0:
        raise ValueError("default_bounds needs at least one pair")
    diff = X[P[:, 0]] - X[P[:, 1]]
    sq = np.einsum("ij,ij->i", diff, diff)
    u, l = np.percentile(sq, percentiles)
    return float(u), float(l)


class ITMLModel:
    r"""The ITML objective on one data set (see the module docstring for the program).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row (finite).
    similar, dissimilar : array_like of int, shape (p, 2) and (q, 2)
        Row indices of the similar and dissimilar pairs; ``p + q >= 1``. A pair whose points
        coincide (squared length ``<= ZERO_LENGTH_TOL``) is rejected: its dissimilar slack would
        have to vanish (infinite objective) and a similar one constrains nothing.
    u, l : float, optional
        Bounds :math:`0 < u < l` (similar pairs: :math:`D_M \le u`; dissimilar: :math:`D_M \ge l`).
        Default: :func:`default_bounds` (5th/95th percentiles of the squared pair lengths).
    gamma : float
        Slack weight :math:`\gamma > 0`.
    prior : array_like, shape (d, d), optional
        :math:`M_0`, symmetric positive definite (default identity).

    Attributes
    ----------
    V : ndarray, shape (m, d)
        Difference vectors :math:`x_i - x_j`, similar pairs first (rows ``0 .. p-1``).
    sign : ndarray, shape (m,)
        :math:`s_c = +1` (similar) or :math:`-1` (dissimilar).
    xi0 : ndarray, shape (m,)
        :math:`\xi^0_c` (``u`` or ``l``).
    pairs : ndarray of int, shape (m, 2)
        The pairs in the order of ``V``.
    M0, M0_inv : ndarray, shape (d, d)
        Prior and its inverse.
    logdet_M0 : float
    n_similar, n_dissimilar, m, d : int

    Notes
    -----
    .. math::
        F(M) = \mathrm{tr}(M M_0^{-1}) - \log\det M + \log\det M_0 - d
               + \gamma \sum_c \big(\xi_c/\xi^0_c - \log(\xi_c/\xi^0_c) - 1\big),

    :math:`\xi_c = \max(D_M(c), u)` on :math:`\mathcal S`, :math:`\min(D_M(c), l)` on :math:`\mathcal D`.
    :math:`F = +\infty` outside :math:`\mathbb S^d_{++}`.
    """

    def __init__(self, X, similar=None, dissimilar=None, *, u=None, l=None, gamma: float = 1.0, prior=None):
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
        self.gamma = check_positive(gamma, "gamma")
        pairs = np.concatenate([S, D])
        V = X[pairs[:, 0]] - X[pairs[:, 1]]
        sq = np.einsum("ij,ij->i", V, V)
        zero = sq <= ZERO_LENGTH_TOL
        if np.any(zero):
            k = int(np.argmax(zero))
            kind, pos = ("similar", k) if k < S.shape[0] else ("dissimilar", k - S.shape[0])
            i, j = pairs[k]
            raise ValueError(
                f"{kind} pair {pos} = ({i}, {j}) has zero length: rows {i} and {j} of X are identical "
                f"(squared distance {sq[k]:.3g}), so its constraint is degenerate (a dissimilar pair "
                "could never be pushed apart); remove duplicate points or drop the pair"
            )
        if u is None or l is None:
            du, dl = default_bounds(X, S, D)
            u = du if u is None else u
            l = dl if l is None else l
        u = check_positive(u, "u")
        l = check_positive(l, "l")
        if not u < l:
            raise ValueError(f"ITML needs bounds u < l (similar below u, dissimilar above l); got u={u:.6g}, "
                             f"l={l:.6g}: pass u < l explicitly")
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
        self.X = X
        self.d = d
        self.n_similar, self.n_dissimilar = int(S.shape[0]), int(D.shape[0])
        self.m = self.n_similar + self.n_dissimilar
        self.pairs = pairs
        self.V = V
        self.sq_lengths = sq
        self.sign = np.concatenate([np.ones(self.n_similar), -np.ones(self.n_dissimilar)])
        self.u, self.l = u, l
        self.xi0 = np.concatenate([np.full(self.n_similar, u), np.full(self.n_dissimilar, l)])
        self.M0 = M0
        M0_inv = np.linalg.inv(M0)
        self.M0_inv = 0.5 * (M0_inv + M0_inv.T)
        self.logdet_M0 = float(2.0 * np.sum(np.log(np.diag(Lc))))
        for a in (self.X, self.pairs, self.V, self.sq_lengths, self.sign, self.xi0, self.M0, self.M0_inv):
            a.setflags(write=False)

    @classmethod
    def from_constraints(cls, X, constraints: ConstraintSet, *, u=None, l=None, gamma: float = 1.0,
                         prior=None) -> "ITMLModel":
        """The model of a pairwise :class:`~cvxmetric.constraints.ConstraintSet`.

        The set's margins are its bounds (similar rows carry ``delta = -u``, dissimilar rows
        ``delta = l``) and must be equal within each kind; explicit ``u``/``l`` override them.
        Triplet/quadruplet rows are rejected.
        """
        S, D, us, ls = _split_constraints(constraints)
        for b, name, given in ((us, "u", u), (ls, "l", l)):
            if given is None and b.size and np.ptp(b) > 0:
                raise ValueError(f"the similar/dissimilar margins of constraints differ between pairs; ITML "
                                 f"uses one bound per kind: pass {name}= explicitly")
        u = u if u is not None or us.size == 0 else float(us[0])
        l = l if l is not None or ls.size == 0 else float(ls[0])
        return cls(X, S, D, u=u, l=l, gamma=gamma, prior=prior)

    # ------------------------------------------------------------------ evaluation
    def _matrix(self, M) -> np.ndarray:
        return as_square_symmetric(M, "M", d=self.d)

    def distances(self, M) -> np.ndarray:
        r""":math:`D_M(c) = \langle M, C_c\rangle` for every pair, shape (m,)."""
        M = np.asarray(M, dtype=np.float64)
        return np.einsum("ij,ij->i", self.V @ M, self.V)

    def slack(self, M) -> np.ndarray:
        r"""Optimal slack at fixed M: :math:`\max(D_M, u)` on S, :math:`\min(D_M, l)` on D; shape (m,)."""
        return self.slack_from_distances(self.distances(M))

    def slack_from_distances(self, dist: np.ndarray) -> np.ndarray:
        """The closed-form slack for given distances (see :meth:`slack`)."""
        dist = np.asarray(dist, dtype=np.float64)
        s = self.n_similar
        return np.concatenate([np.maximum(dist[:s], self.xi0[:s]), np.minimum(dist[s:], self.xi0[s:])])

    def slack_value(self, xi) -> float:
        r""":math:`\gamma \sum_c h(\xi_c / \xi^0_c)` (``inf`` if some :math:`\xi_c \le 0`)."""
        xi = np.asarray(xi, dtype=np.float64)
        if np.any(xi <= 0):
            return np.inf
        return self.gamma * float(np.sum(slack_term(xi / self.xi0)))

    def logdet_divergence(self, M) -> float:
        r""":math:`D_{\ell d}(M, M_0)` (``inf`` unless M is positive definite)."""
        M = np.asarray(M, dtype=np.float64)
        sign, logdet = np.linalg.slogdet(M)
        if sign <= 0 or not np.isfinite(logdet):
            return np.inf
        return float(np.vdot(M, self.M0_inv) - logdet + self.logdet_M0 - self.d)

    def value(self, M) -> float:
        """The reduced objective :math:`F(M)` (slacks minimised in closed form)."""
        M = self._matrix(M)
        ld = self.logdet_divergence(M)
        if not np.isfinite(ld):
            return np.inf
        return ld + self.slack_value(self.slack(M))

    def multipliers(self, M) -> np.ndarray:
        r"""KKT multipliers implied by M: :math:`\lambda_c = s_c\gamma(1/\xi^0_c - 1/\xi_c(M)) \ge 0`."""
        return self.multipliers_from_slack(self.slack(M))

    def multipliers_from_slack(self, xi) -> np.ndarray:
        r""":math:`\lambda_c = s_c \gamma (1/\xi^0_c - 1/\xi_c)`, the slack-stationarity multipliers."""
        return self.sign * self.gamma * (1.0 / self.xi0 - 1.0 / np.asarray(xi, dtype=np.float64))

    def slack_from_multipliers(self, lam) -> np.ndarray:
        r"""The slack stationarity inverted: :math:`1/\xi_c = 1/\xi^0_c - s_c \lambda_c / \gamma`."""
        return 1.0 / (1.0 / self.xi0 - self.sign * np.asarray(lam, dtype=np.float64) / self.gamma)

    def weighted_sum(self, coef) -> np.ndarray:
        r""":math:`\sum_c a_c C_c` as a symmetric (d, d) matrix."""
        coef = np.asarray(coef, dtype=np.float64)
        G = (self.V * coef[:, None]).T @ self.V
        return 0.5 * (G + G.T)

    def gradient(self, M) -> np.ndarray:
        r""":math:`\nabla F(M) = M_0^{-1} - M^{-1} + \sum_c s_c \lambda_c(M) C_c` (M positive definite)."""
        M = self._matrix(M)
        Minv = np.linalg.inv(M)
        return self.M0_inv - 0.5 * (Minv + Minv.T) + self.weighted_sum(self.sign * self.multipliers(M))

    def kkt_residual(self, M) -> float:
        r"""Relative stationarity residual :math:`\|\nabla F(M)\|_F` of a positive definite M.

        Normalised by :math:`\max(1, \|M_0^{-1}\|_F, \|M^{-1}\|_F, \|\sum_c s_c\lambda_c C_c\|_F)`;
        ``inf`` when M is not positive definite (F is then infinite). Since F is smooth on the
        open cone, this is the whole KKT system of the reduced problem.
        """
        M = self._matrix(M)
        try:
            np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            return np.inf
        Minv = np.linalg.inv(M)
        Minv = 0.5 * (Minv + Minv.T)
        G = self.weighted_sum(self.sign * self.multipliers(M))
        R = self.M0_inv - Minv + G
        scale = max(1.0, float(np.linalg.norm(self.M0_inv)), float(np.linalg.norm(Minv)), float(np.linalg.norm(G)))
        return float(np.linalg.norm(R)) / scale

    def svec_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Rows :math:`a_c` with :math:`D_M(c) = a_c\cdot\mathrm{svec}(M)`: (similar, dissimilar)."""
        from .linalg import svec_outer

        A = svec_outer(self.V)
        return A[: self.n_similar], A[self.n_similar:]

    def __repr__(self) -> str:
        return (f"ITMLModel(d={self.d}, similar={self.n_similar}, dissimilar={self.n_dissimilar}, "
                f"u={self.u:.4g}, l={self.l:.4g}, gamma={self.gamma:.4g})")


def itml_model(X, pairs=None, dissimilar=None, *, u=None, l=None, gamma: float = 1.0, prior=None) -> ITMLModel:
    """Build an :class:`ITMLModel` from a pairwise ConstraintSet or from explicit pair arrays.

    Parameters
    ----------
    X : array_like, shape (n, d)
    pairs : ConstraintSet or array_like of int, shape (p, 2)
        Either a ConstraintSet of similar/dissimilar pairs (its margins give u and l, see
        :meth:`ITMLModel.from_constraints`; then ``dissimilar`` must be None) or the similar pairs.
    dissimilar : array_like of int, shape (q, 2), optional
        The dissimilar pairs (explicit-array form).
    u, l, gamma, prior
        See :class:`ITMLModel`.
    """
    if isinstance(pairs, ConstraintSet):
        if dissimilar is not None:
            raise ValueError("pass either a ConstraintSet or explicit (similar, dissimilar) arrays, not both")
        return ITMLModel.from_constraints(X, pairs, u=u, l=l, gamma=gamma, prior=prior)
    return ITMLModel(X, pairs, dissimilar, u=u, l=l, gamma=gamma, prior=prior)
