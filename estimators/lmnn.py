"""LMNN (Weinberger & Saul 2009) as a scikit-learn estimator, metric-learn's ``LMNN`` interface."""
from __future__ import annotations

import numpy as np

from cvxmetric import problems

from ._base import PointsLearner
from ._labels import points_and_labels
from ._metric_learn import check_n_components, initial_components, truncated_components, warn_ignored

#: metric-learn's parameters of its gradient descent over L, with the defaults that mean "not set".
_OPTIMISER_ONLY = {"learn_rate": None, "min_iter": None}

__all__ = ["LMNN"]


def _start_direction(init, X, y, n_components, random_state):
    """The direction ``L0.T @ L0`` of metric-learn's initial map ``init``, or None for the full
    identity (the solver's own default direction). The solver scales it to the data's units
    (:func:`cvxmetric.lmnn.lmnn_start`), and on many points starts the smallest level of its
    coarse start from it (:func:`cvxmetric.solvers.lmnn.coarse_start`), so that the full problem
    starts near its optimum whatever ``init`` is."""
    L0 = initial_components(init, X, y, n_components, random_state)
    if L0.shape == (X.shape[1],) * 2 and np.array_equal(L0, np.eye(X.shape[1])):
        return None
    return L0.T @ L0


class LMNN(PointsLearner):
    r"""Large margin nearest neighbour metric learning, solved to a certified gap.

    .. math::
        \min_{M \succeq 0}\ \text{regularization} \sum_{(i, j) \in S} \langle M, C_{ij}\rangle
        + (1 - \text{regularization}) \sum_{(i, j, l)} [\text{margin} + \langle M, C_{ij} - C_{il}\rangle]_+

    with ``n_neighbors`` fixed Euclidean target neighbours ``S`` per point (same class) and every
    impostor ``l`` (another class). Unlike metric-learn's LMNN (gradient descent over ``L``, not
    convex) this is the convex problem over ``M``, solved by constraint generation around PDHG
    (``solver="pdhg"``, default), the projected subgradient engine with impostors found on the fly
    (``"subgradient"``) or exactly (``"cvxpy"``, small data).

    Parameters
    ----------
    n_neighbors : int
        Target neighbours per point, capped at the point's class size minus one (a class of
        exactly ``n_neighbors`` points gives each point the others; a point alone in its class
        has no target and acts only as an impostor).
    regularization : float in (0, 1)
        Weight of the pull term (metric-learn's name and meaning); the hinge term has ``1 - regularization``.
    margin : float
        Triplet margin (> 0).
    solver : {"pdhg", "subgradient", "cvxpy"} or None
        ``None``: the default fast solver.
    tol, max_iter : optional
        The solver's tolerance (a certified relative gap) and iteration limit; None: its defaults.
    solver_options : dict, optional
        Further options of the chosen solver (an option it does not take raises ValueError).
    n_components : int, optional
        Rows of ``components_``: the leading eigen-directions of the certified ``M``, so that
        ``transform`` embeds in ``n_components`` dimensions (``get_mahalanobis_matrix`` is then the
        best rank-``n_components`` approximation of ``M``, not an optimum of the non-convex
        rank-constrained problem; ``certificate_`` is the full ``M``'s). None: all ``d``.
    init : {"auto", "identity", "random", "pca", "lda"} or array (k, d)
        metric-learn's initial map ``L0`` (``k = n_components``, or ``d``), used as the solver's
        start: the direction ``L0.T @ L0`` scaled to the data's units (a target neighbour at squared
        distance ``margin`` on average, :func:`cvxmetric.lmnn.lmnn_start`; the solver's
        ``start_direction``). On more than :data:`cvxmetric.solvers.lmnn.COARSE_MIN_POINTS` points
        it starts the smallest subsample of the solver's coarse start instead
        (:func:`cvxmetric.solvers.lmnn.coarse_start`): the fit on 20,000 points takes the same
        path whatever ``init`` is. ``"auto"`` is
        metric-learn's rule (:func:`~cvxmetric.estimators._metric_learn.auto_init`): ``"lda"``
        when ``k <= min(d, n_classes - 1)``, else ``"pca"`` when ``k < min(d, n_samples)``, else
        ``"identity"`` (the solver's own start). The problem is convex: the start changes the
        iterations, not the certified optimum. Ignored by ``solver="cvxpy"``.
    convergence_tol : float, optional
        metric-learn's stopping tolerance, taken as ``tol`` when ``tol`` is None.
    learn_rate, min_iter : optional
        Step size and least iteration count of metric-learn's gradient descent over ``L``; the
        certified convex solve has no counterpart: accepted so metric-learn's code runs, ignored
        with one ``UserWarning`` when set.
    verbose : bool
        Print the solver, its iterations and the certificate after the fit.
    preprocessor : array or callable, optional
        metric-learn's preprocessor: ``fit``/``transform`` then accept 1-D arrays of keys.
    random_state : None, int, RandomState or Generator
        Seed of ``init="random"``; the LMNN solvers are deterministic.

    Attributes
    ----------
    components_, result_, certificate_, problem_, solver_, n_iter_
        See :class:`cvxmetric.estimators._base.MetricLearner`; ``problem_`` is the
        :class:`cvxmetric.problems.LMNN` of the fit.

    Notes
    -----
    ``fit`` solves :class:`cvxmetric.problems.LMNN` with the engine of
    :func:`cvxmetric.solvers.solve_lmnn` (``result_.solver == "lmnn-pdhg"``: the implicit triplet
    set, never listed; a working set of the triplets near the margin; on more than
    :data:`~cvxmetric.solvers.lmnn.COARSE_MIN_POINTS` points the coarse start), and the
    certificate covers the full triplet set: ``certificate_.value`` is the certified relative gap
    (``certificate_.measure == "certified_gap"``), ``certificate_.lower_bound`` the bound.
    Measured (``python -m benchmarks.lmnn_estimator``: ``LMNN(n_neighbors=3).fit(X, y)`` with
    its defaults, 20,000 points, one BLAS thread, CPU seconds, peak resident memory of the process):
    10 Gaussian classes, d = 50 (1.08e9 triplets): 32.3 s, 64 PDHG iterations, gap 5.7e-7, 0.91 GB;
    the same with half the columns x 1e3: 28.8 s, gap 8.0e-7; digits tiled to 20,000 points and
    standardized (d = 64): 35.1 s, 192 iterations, gap 7.4e-5, 1.43 GB; ``n_components=5`` (the
    ``"auto"`` init is then LDA's rank-5 map): 33.6 s, gap 5.8e-7.
    """

    def __init__(self, n_neighbors=3, regularization=0.5, margin=1.0, solver=None, tol=None, max_iter=None,
                 solver_options=None, n_components=None, init="auto", convergence_tol=None, learn_rate=None,
                 min_iter=None, verbose=False, preprocessor=None, random_state=None):
        self.n_neighbors = n_neighbors
        self.regularization = regularization
        self.margin = margin
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.n_components = n_components
        self.init = init
        self.convergence_tol = convergence_tol
        self.learn_rate = learn_rate
        self.min_iter = min_iter
        self.verbose = verbose
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y):
        """Learn the metric from points ``X`` (n, d) and class labels ``y`` (n,)."""
        X, y = points_and_labels(self, X, y)
        warn_ignored(self, _OPTIMISER_ONLY)
        k = check_n_components(self.n_components, X.shape[1])
        rs = self._random_source()
        problem = problems.LMNN(X, y, n_neighbors=self.n_neighbors, regularization=self.regularization,
                                margin=self.margin)
        direction = _start_direction(self.init, X, y, k, rs)
        self._fit_problem(problem, rs, start=direction, start_option="start_direction")
        self.components_ = truncated_components(self.components_, k)
        return self
