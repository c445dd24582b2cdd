"""LMNN (Weinberger & Saul 2009) as a scikit-learn estimator, metric-learn's ``LMNN`` interface."""
from __future__ import annotations

from cvxmetric import problems

from ._base import MetricLearner
from ._labels import points_and_labels

__all__ = ["LMNN"]


class LMNN(MetricLearner):
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
        Target neighbours per point; every class needs more than ``n_neighbors`` points.
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
    preprocessor : array or callable, optional
        metric-learn's preprocessor: ``fit``/``transform`` then accept 1-D index arrays.
    random_state : None, int, RandomState or Generator
        Unused by the deterministic LMNN solvers; kept for scikit-learn's API.

    Attributes
    ----------
    components_, result_, certificate_, problem_, solver_, n_iter_
        See :class:`cvxmetric.estimators._base.MetricLearner`; ``problem_`` is the
        :class:`cvxmetric.problems.LMNN` of the fit.
    """

    def __init__(self, n_neighbors=3, regularization=0.5, margin=1.0, solver=None, tol=None, max_iter=None,
                 solver_options=None, preprocessor=None, random_state=None):
        self.n_neighbors = n_neighbors
        self.regularization = regularization
        self.margin = margin
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y):
        """Learn the metric from points ``X`` (n, d) and class labels ``y`` (n,)."""
        X, y = points_and_labels(self, X, y)
        return self._fit_problem(problems.LMNN(X, y, n_neighbors=self.n_neighbors,
                                               regularization=self.regularization, margin=self.margin))
