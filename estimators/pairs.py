"""ITML and MMC as scikit-learn estimators: from labelled pairs (metric-learn's ``ITML``, ``MMC``)
or from class labels (``ITML_Supervised``, ``MMC_Supervised``)."""
from __future__ import annotations

import warnings

import numpy as np

from cvxmetric import problems
from cvxmetric._checks import zero_length_mask

from ._base import MetricLearner, PairsClassifierMixin, PointsLearner
from ._inputs import canonical_tuples, pair_labels
from ._labels import points_and_labels
from ._metric_learn import start_from_metric, warn_ignored
from ._priors import prior_matrix

#: metric-learn's MMC parameter of its projection loop, with the default that means "not set".
_MMC_OPTIMISER_ONLY = {"max_proj": None}
from ._supervision import label_pairs

__all__ = ["ITML", "ITML_Supervised", "MMC", "MMC_Supervised"]

_COMMON = """solver_options : dict, optional
        Further options of the chosen solver (an option it does not take raises ValueError).
    preprocessor : array or callable, optional
        metric-learn's preprocessor: pairs (and points) may then be given as indices.
    random_state : None, int, RandomState or Generator
        Seed of every random choice (pairs drawn from labels, ITML's visiting order)."""


class _PairsLearner(PairsClassifierMixin, MetricLearner):
    """Fit from pairs ``(m, 2, d)`` (or indices with a preprocessor) labelled +1 / -1.

    A pair of identical points (metric-learn accepts them; a data set with duplicate rows, as
    iris, yields them) has a zero difference vector: a similar one constrains nothing, a
    dissimilar one no metric can satisfy (ITML's LogDet slack of a pair at distance 0 is
    infinite; MMC's sum gains 0 from it). Both are dropped with one ``UserWarning`` naming the
    first, as ``ITML_Supervised`` and ``MMC_Supervised`` drop such pairs drawn from labels; the
    certificate is that of the problem without them.
    """

    #: Whether a pair of (nearly) identical points (every feature equal up to round-off) counts as
    #: identical (ITML: its constraint is degenerate) rather than only a pair of one point twice.
    _reject_zero_length = False

    def _pairs_problem(self, pairs, y):
        P = self._tuples(pairs, self._tuple_size, "pairs", reset=True)
        similar = pair_labels(y, P.shape[0])
        X, idx = canonical_tuples(P)
        same = idx[:, 0] == idx[:, 1]
        if self._reject_zero_length:
            same |= zero_length_mask(X[idx[:, 0]] - X[idx[:, 1]], X)
        if np.any(same):
            k = int(np.argmax(same))
            warnings.warn(f"{int(same.sum())} of the {len(same)} pairs join two identical points: {type(self).__name__} "
                          f"drops them (the first: pairs[{k}], {'similar' if similar[k] else 'dissimilar'}); a similar "
                          "one constrains nothing and a dissimilar one no metric can satisfy", UserWarning, stacklevel=3)
        return X, idx[similar & ~same], idx[~similar & ~same]

    def fit(self, pairs, y, calibration_params=None):
        """Learn the metric from pairs and their labels (+1 similar, -1 dissimilar); then
        calibrate ``threshold_`` on them (``calibration_params`` go to :meth:`calibrate_threshold`)."""
        self._validate_calibration_params(**(calibration_params or {}))
        X, S, D = self._pairs_problem(pairs, y)
        self._fit_pairs(X, S, D)
        return self.calibrate_threshold(pairs, y, **(calibration_params or {}))


def _pairs_and_labels(S, D) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs and their +1 / -1 labels from the similar ``S`` and dissimilar ``D`` pairs."""
    return np.vstack([S, D]), np.r_[np.ones(len(S), dtype=np.int64), -np.ones(len(D), dtype=np.int64)]


class _ITMLBase(MetricLearner):
    def _fit_itml(self, X, S, D, bounds, random_state):
        pairs, labels = _pairs_and_labels(S, D)
        prior = prior_matrix(self.prior, X, random_state)
        problem = problems.ITML(X, pairs, labels, bounds=bounds, gamma=self.gamma, prior=prior)
        self.bounds_ = np.array(problem.bounds)
        return self._fit_problem(problem, random_state)


class ITML(_PairsLearner, _ITMLBase):
    r"""Information-theoretic metric learning (Davis et al. 2007) from labelled pairs.

    .. math::
        \min_{M \succ 0, \xi}\ D_{ld}(M, M_0) + \gamma \sum_c \Big(\frac{\xi_c}{\xi^0_c}
        - \log\frac{\xi_c}{\xi^0_c} - 1\Big)
        \ \text{s.t.}\ D_M(p) \le \xi_c\ (p\ \text{similar}),\ D_M(p) \ge \xi_c\ (p\ \text{dissimilar}),

    :math:`\xi^0 = u` on similar and :math:`l` on dissimilar pairs. ``bounds`` (``fit``) are
    ``(u, l)`` on **squared** distances; default their 5th/95th percentiles over the pairs
    (metric-learn uses unsquared distances there). ``fit(pairs, y)``: ``y`` is +1 / -1.

    Parameters
    ----------
    gamma : float
        Slack trade-off (> 0).
    prior : {"identity", "covariance", "random"}, array (d, d) or None
        The prior metric :math:`M_0` (metric-learn's names; None: the identity): ``"covariance"``
        the inverse covariance of the distinct points of the pairs (``ITML_Supervised``: of X),
        ``"random"`` a random positive definite matrix drawn with ``random_state``, or a positive
        definite array. A prior that is not positive definite raises
        :class:`~cvxmetric.estimators.SingularPriorError` (a ``numpy.linalg.LinAlgError`` and a
        ``ValueError``).
    solver : {"bregman", "cvxpy"} or None
        Cyclic Bregman projections (default) or the exact certified cvxpy solve.
    tol, max_iter : optional
        Certified relative gap and sweep limit of the solver; None: its defaults.
    {common}
    """

    _reject_zero_length = True

    def __init__(self, gamma=1.0, prior=None, solver=None, tol=None, max_iter=None, solver_options=None,
                 preprocessor=None, random_state=None):
        self.gamma = gamma
        self.prior = prior
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, pairs, y, bounds=None, calibration_params=None):
        """Learn from pairs and labels (+1 / -1); ``bounds = (u, l)`` on squared distances."""
        self._validate_calibration_params(**(calibration_params or {}))
        X, S, D = self._pairs_problem(pairs, y)
        self._fit_itml(X, S, D, bounds, self._random_source())
        return self.calibrate_threshold(pairs, y, **(calibration_params or {}))


class ITML_Supervised(PointsLearner, _ITMLBase):
    r"""ITML from class labels: ``n_constraints`` similar and as many dissimilar pairs drawn from ``y``.

    Pairs joining identical points are dropped (ITML rejects zero-length pairs). Parameters as in
    :class:`ITML`, plus ``n_constraints`` (default ``20 * n_classes**2``, metric-learn's).
    """

    def __init__(self, gamma=1.0, n_constraints=None, prior=None, solver=None, tol=None, max_iter=None,
                 solver_options=None, preprocessor=None, random_state=None):
        self.gamma = gamma
        self.n_constraints = n_constraints
        self.prior = prior
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y, bounds=None):
        """Learn from points ``X`` (n, d) and labels ``y``; ``bounds = (u, l)`` on squared distances."""
        X, y = points_and_labels(self, X, y)
        rs = self._random_source()
        S, D = label_pairs(y, self.n_constraints, rs)
        S = S[~zero_length_mask(X[S[:, 0]] - X[S[:, 1]], X)]
        D = D[~zero_length_mask(X[D[:, 0]] - X[D[:, 1]], X)]
        if len(S) == 0 or len(D) == 0:
            raise ValueError("every similar (or every dissimilar) pair drawn from y joins identical points; "
                             "ITML needs pairs of distinct points")
        return self._fit_itml(X, S, D, bounds, rs)


class _MMCBase(MetricLearner):
    def _fit_mmc(self, X, S, D, random_state):
        if not isinstance(self.diagonal, (bool, np.bool_)):
            raise TypeError(f"diagonal must be True (a diagonal metric) or False (a full one); got {self.diagonal!r}")
        warn_ignored(self, _MMC_OPTIMISER_ONLY)
        if self.diagonal:
            _check_diagonal_c(self)
        if len(S) == 0 or len(D) == 0:
            raise ValueError("MMC needs at least one similar and one dissimilar pair")
        start = start_from_metric(self.init, X, random_state)
        if self.diagonal:
            problem = problems.MMCDiagonal(X, *_pairs_and_labels(S, D))
            start = None if start is None else np.diag(start).copy()
        else:
            problem = problems.MMC(X, *_pairs_and_labels(S, D))
        return self._fit_problem(problem, random_state, start=start)


def _check_diagonal_c(est) -> None:
    """``diagonal_c`` is a positive number; set away from 1 it is ignored with one warning: it only
    scales metric-learn's diagonal metric (:meth:`cvxmetric.mmc.DiagonalMMCModel.metric_learn_scale`)."""
    c = est.diagonal_c
    if isinstance(c, bool) or not isinstance(c, (int, float, np.integer, np.floating)) or not c > 0:
        raise ValueError(f"diagonal_c must be a positive number; got {c!r}")
    if c != 1.0:
        warnings.warn(f"{type(est).__name__}: diagonal_c={c!r} ignored: in metric-learn's diagonal objective it only "
                      "scales the metric (by diagonal_c / 2); the certified diagonal metric keeps MMC's scale (mean "
                      "dissimilar distance 1)", UserWarning, stacklevel=4)


_MMC_PARAMS = """init : {"identity", "covariance", "random"}, array (d, d) or None
        metric-learn's initial Mahalanobis matrix, used as the solver's start ``M0`` (None: the
        solver's own; ``"covariance"``: the inverse covariance of the points; ``"random"``: a
        random positive definite matrix drawn with ``random_state``). The problem is convex: the
        start changes the iterations, not the certified optimum. Ignored by ``solver="cvxpy"``.
    diagonal : bool
        False: the full MMC; True: metric-learn's diagonal MMC, the same problem over diagonal
        ``M = diag(a)``, ``a >= 0`` (convex too; :class:`cvxmetric.problems.MMCDiagonal`, solved by
        projected gradient ascent to a certified gap, ``solver="cvxpy"`` exactly). ``init`` then
        starts from its diagonal, as in metric-learn.
    diagonal_c : float
        Weight of the log term of metric-learn's diagonal objective. It only scales metric-learn's
        diagonal metric (by ``diagonal_c / 2``,
        :meth:`cvxmetric.mmc.DiagonalMMCModel.metric_learn_scale`); the certified metric here keeps
        MMC's scale, so a value other than 1 is ignored with one ``UserWarning``.
    max_proj : optional
        Projection count of metric-learn's optimiser: no counterpart, ignored with one
        ``UserWarning`` when set.
    verbose : bool
        Print the solver, its iterations and the certificate after the fit.
    """

_MMC_DOC = r"""

    .. math::
        \min_{M \succeq 0}\ \sum_{S} D_M(p) \quad \text{s.t.}\quad \frac{1}{|D|}\sum_{D} \sqrt{D_M(p)} \ge 1

    (Xing et al. 2002; the mean dissimilar distance is 1 at the solution, which fixes MMC's scale).
    Solved in the equivalent max form by projected gradient ascent with the exact projection and a
    certified gap (``solver="ascent"``, default) or exactly (``"cvxpy"``).
"""


class MMC(_PairsLearner, _MMCBase):
    __doc__ = ("Mahalanobis metric for clustering from labelled pairs (``fit(pairs, y)``, ``y`` +1 / -1)."
               + _MMC_DOC + """
    Parameters
    ----------
    solver : {"ascent", "cvxpy"} or None
    tol, max_iter : optional
        Certified relative gap and iteration limit; None: the solver's defaults.
    """ + _MMC_PARAMS + _COMMON)

    def __init__(self, solver=None, tol=None, max_iter=None, solver_options=None, init=None, diagonal=False,
                 diagonal_c=1.0, max_proj=None, verbose=False, preprocessor=None, random_state=None):
        self.init = init
        self.diagonal = diagonal
        self.diagonal_c = diagonal_c
        self.max_proj = max_proj
        self.verbose = verbose
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state

    def _fit_pairs(self, X, S, D):
        return self._fit_mmc(X, S, D, self._random_source())


class MMC_Supervised(PointsLearner, _MMCBase):
    __doc__ = ("MMC from class labels: ``n_constraints`` similar and as many dissimilar pairs drawn from ``y``."
               + _MMC_DOC + """
    Parameters
    ----------
    n_constraints : int, optional
        Pairs of each kind (default ``20 * n_classes**2``, metric-learn's).
    solver, tol, max_iter
        As in :class:`MMC`.
    """ + _MMC_PARAMS + _COMMON)

    def __init__(self, n_constraints=None, solver=None, tol=None, max_iter=None, solver_options=None, init=None,
                 diagonal=False, diagonal_c=1.0, max_proj=None, verbose=False, preprocessor=None,
                 random_state=None):
        self.init = init
        self.diagonal = diagonal
        self.diagonal_c = diagonal_c
        self.max_proj = max_proj
        self.verbose = verbose
        self.n_constraints = n_constraints
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y):
        """Learn from points ``X`` (n, d) and class labels ``y``."""
        X, y = points_and_labels(self, X, y)
        rs = self._random_source()
        S, D = label_pairs(y, self.n_constraints, rs)
        return self._fit_mmc(X, S, D, rs)


ITML.__doc__ = ITML.__doc__.replace("{common}", _COMMON)
