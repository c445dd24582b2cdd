"""ORML, output regularized metric learning (Liu, Hoi & Liu 2008), as a scikit-learn estimator."""
from __future__ import annotations

import numpy as np

from cvxmetric import problems

from ._base import MetricLearner, PairsClassifierMixin
from ._inputs import _ArrayIndexer, canonical_tuples, check_preprocessor, pair_labels

__all__ = ["ORML"]


class ORML(PairsClassifierMixin, MetricLearner):
    r"""Output regularized metric learning from judged (query, image) pairs.

    ``fit(pairs, y, session=None)``: ``pairs[:, 0]`` is a query and ``pairs[:, 1]`` an image its
    user judged relevant (``y = +1``, a similar pair) or not (``y = -1``); ``session`` (optional)
    groups the judgements by log session (default: one session per query). The model
    (:mod:`cvxmetric.orml`) uses the Euclidean ``n_neighbors``-nearest-neighbour graph of the point
    set and its PCA, so the point set matters: with an **array preprocessor** the pairs index it and
    every one of its points takes part (the paper's semi-supervised set-up); pairs given as points
    ``(m, 2, d)`` (or through a callable preprocessor) use the distinct points of the pairs.

    The learned metric is :math:`A = U U^\top` with the ``n_components`` directions ``U`` of the
    orthogonal pursuit (eqs. 18-21), each the exact solution of a least-squares problem (eq. 20)
    with a certified gap; ``components_ = U.T``.

    Parameters
    ----------
    n_neighbors : int
        Neighbours of the graph weights W (eq. 4; paper 6).
    alpha, beta : float
        Weights of similar and dissimilar judged pairs in W (paper 1 and 2).
    output_weight : float
        Weight :math:`\gamma` of the output loss (paper 9).
    n_components : int, optional
        Number of directions r (default ``min(15, d, n - 1)``; at most the rank of the centered points).
    solver : {"pursuit", "cvxpy"} or None
    tol : float, optional
        Certified relative gap of each direction.
    max_iter : None
        Not used (closed form); must stay None.
    solver_options : dict, optional
    preprocessor : array or callable, optional
    random_state : None
        Unused (deterministic); kept for scikit-learn's API.
    """

    def __init__(self, n_neighbors=6, alpha=1.0, beta=2.0, output_weight=9.0, n_components=None, solver=None, tol=None,
                 max_iter=None, solver_options=None, preprocessor=None, random_state=None):
        self.n_neighbors = n_neighbors
        self.alpha = alpha
        self.beta = beta
        self.output_weight = output_weight
        self.n_components = n_components
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, pairs, y, session=None, calibration_params=None):
        """Learn from judged pairs (+1 relevant, -1 not); then calibrate ``threshold_`` on them."""
        pre = check_preprocessor(self.preprocessor)
        arr = np.asarray(pairs)
        if isinstance(pre, _ArrayIndexer) and arr.ndim == 2:
            self._tuples(pairs, 2, "pairs", reset=True)   # validates the indices against the array
            X, idx = pre.X, np.asarray(pairs, dtype=np.int64)
        else:
            X, idx = canonical_tuples(self._tuples(pairs, 2, "pairs", reset=True))
        relevant = pair_labels(y, idx.shape[0])
        problem = problems.ORML(X, idx, relevant, session=session, n_neighbors=self.n_neighbors, alpha=self.alpha,
                                beta=self.beta, output_weight=self.output_weight, n_components=self.n_components)
        self._fit_problem(problem)
        return self.calibrate_threshold(pairs, y, **(calibration_params or {}))
