"""The common part of every estimator: metric-learn's ``MahalanobisMixin`` API plus certificates.

A fitted estimator holds

* ``result_`` — the solver's :class:`~cvxmetric.solvers.result.SolverResult` (the one result contract);
* ``certificate_`` — a :class:`Certificate`: the optimality measure, its value and tolerance,
  the certified lower bound and whether the fit is certified;
* ``components_`` — the linear map ``L`` with ``M = L.T @ L`` (metric-learn's attribute);

and ``verify()`` returns the verification harness' row for the fitted problem: the same checks
``python -m cvxmetric.verification`` runs (certified cvxpy ground truth, gap, KKT, the
certificate re-checked against the ground truth's objective), without solving the fit again.
"""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from cvxmetric.linalg import eigh_descending

from cvxmetric.problems import EXACT

from ._inputs import check_preprocessor, ndim, points_from, random_source, tuples_from

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    def _validate_data(estimator, *args, **kwargs):
        return estimator._validate_data(*args, **kwargs)

__all__ = ["Certificate", "MetricLearner", "PointsLearner", "PairsClassifierMixin", "QuadrupletsClassifierMixin",
           "components_from_metric"]


#: metric-learn's deprecation warning of ``score_pairs``, word for word.
SCORE_PAIRS_DEPRECATION = ("score_pairs will be deprecated in release 0.7.0. Use pair_score to compute similarity "
                           "scores, or pair_distances to compute distances.")


@dataclass(frozen=True)
class Certificate:
    """What a fitted estimator can prove about its metric.

    Attributes
    ----------
    solver : str
        The algorithm that produced the fit (``result_.solver``).
    measure : str
        ``"certified_gap"`` (relative gap between the objective and a certified lower bound) or
        ``"kkt_residual"`` (a relative stationarity measure, where no global bound exists).
    value, tol : float
        The measure at the returned metric and the tolerance it was held to.
    objective : float
        The objective at the returned metric.
    lower_bound : float or None
        A certified lower bound on the optimal value (None for ``"kkt_residual"``).
    certified : bool
        ``value <= tol``: the solver's ``converged``, which means exactly this.
    status, message : str
        The solver's status and message.
    """

    solver: str
    measure: str
    value: float
    tol: float
    objective: float
    lower_bound: Optional[float]
    certified: bool
    status: str
    message: str

    @classmethod
    def of(cls, result) -> "Certificate":
        return cls(result.solver, result.measure, float(result.measure_value), float(result.tol),
                   float(result.objective), result.lower_bound, bool(result.converged), result.status,
                   result.message)

    def as_dict(self) -> dict:
        return asdict(self)


def components_from_metric(M: np.ndarray) -> np.ndarray:
    """``L`` (d, d) with ``L.T @ L`` = the PSD part of ``M``; rows by decreasing eigenvalue."""
    lam, V = eigh_descending(np.asarray(M, dtype=np.float64))
    return (V * np.sqrt(np.clip(lam, 0.0, None))).T.copy()


class MetricLearner(BaseEstimator):
    """Base of every estimator: a thin layer on :mod:`cvxmetric.problems`, plus the Mahalanobis API.

    A subclass' ``fit`` builds the :class:`cvxmetric.problems.Problem` of its data and calls
    :meth:`_fit_problem`, which solves it with the chosen ``solver`` (the problem's ``method=``;
    None: the problem's default) and sets the fitted attributes; ``verify()`` is the problem's
    :meth:`~cvxmetric.problems.Problem.verify` of the fitted result.

    Attributes
    ----------
    problem_ : cvxmetric.problems.Problem
        The fitted problem (data, constraints, hyper-parameters): ``problem_.check(M)`` checks any
        other matrix on it.
    solver_ : str
        The algorithm that ran (the problem's ``method=``, or ``"cvxpy"``).
    result_ : SolverResult
        Its result; ``certificate_`` (:class:`Certificate`) what it proves.
    components_ : ndarray
        ``L`` with ``M = L.T @ L`` (metric-learn's attribute; the problem's
        :meth:`~cvxmetric.problems.Problem.components` of the result).
    n_iter_ : int
        Iterations of the solver.
    preprocessor_ : None or callable
        The checked ``preprocessor`` (an array becomes a row indexer), metric-learn's attribute.
    """

    # ---------------------------------------------------------------- fitting
    def _check_solver(self, problem) -> str:
        solver = problem.default_method() if self.solver is None else self.solver
        allowed = problem.available_methods() + (EXACT,)
        if not isinstance(solver, str) or solver not in allowed:
            raise ValueError(f"solver must be one of {allowed} for {type(self).__name__}"
                             f"{self._solver_context()}; got {solver!r}")
        return solver

    def _solver_context(self) -> str:
        return ""

    def _check_common(self) -> None:
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise ValueError(f"solver_options must be a dict of options of the chosen solver or None; "
                             f"got {type(self.solver_options).__name__}")
        for name in ("tol", "convergence_tol"):
            value = getattr(self, name, None)
            if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
                raise ValueError(f"{name} must be a positive number or None (the solver's default); got {value!r}")
        if self.max_iter is not None and (isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer))
                                          or self.max_iter < 1):
            raise ValueError(f"max_iter must be a positive integer or None (the solver's default); got {self.max_iter!r}")

    def _random_source(self):
        """The fit's source of randomness (:func:`~cvxmetric.estimators._inputs.random_source` of
        ``random_state``): taken once per ``fit`` and handed to every random choice of it."""
        return random_source(self.random_state)

    def _tol(self):
        """The certified tolerance: ``tol``, else metric-learn's ``convergence_tol`` where the estimator has it."""
        return self.tol if self.tol is not None else getattr(self, "convergence_tol", None)

    def _fit_problem(self, problem, random_state=None, start=None, start_option=None):
        """Solve ``problem`` (a :class:`cvxmetric.problems.Problem`) with the chosen solver and set
        the fitted attributes; ``random_state``: the fit's :meth:`_random_source` when it already
        drew from it (None: taken here); ``start``: the fast solver's start (None: its own), passed
        as its option ``start_option`` (default the problem's ``start_option``, the start itself);
        a start in ``solver_options`` takes precedence; the exact solve takes no start."""
        from ._metric_learn import report_fit
        solver = self._check_solver(problem)
        self._check_common()
        rs = self._random_source() if random_state is None else random_state
        options = dict(self.solver_options or {})
        if start is not None and solver != EXACT and problem.start_option not in options:
            options.setdefault(start_option or problem.start_option, start)
        res = problem.solve(solver, tol=self._tol(), max_iter=self.max_iter, random_state=rs, **options)
        self._check_preprocessor()
        self.problem_ = problem
        self.solver_ = solver
        self.result_ = res
        self.certificate_ = Certificate.of(res)
        self.components_ = problem.components(res)
        self.n_iter_ = res.n_iter
        if getattr(self, "verbose", False):
            report_fit(self)
        return self

    # ---------------------------------------------------------------- verification
    def verify(self, *, gap_tol: Optional[float] = None, kkt_tol: Optional[float] = None) -> dict:
        """The verification harness' row of the fitted problem (see ``python -m cvxmetric.verification``).

        The fitted result is scored against the certified cvxpy ground truth of the same problem
        (:meth:`cvxmetric.problems.Problem.verify`; the fit is not run again), with the thresholds
        the harness applies to the same solver unless ``gap_tol`` / ``kkt_tol`` are given.
        Returns the row dict; ``row["passed"]`` says whether every check passed, ``row["checks"]``
        and ``row["errors"]`` say which did not and why. Needs cvxpy (imported here, not before).
        """
        check_is_fitted(self, "result_")
        return self.problem_.verify(self.result_, method=self.solver_, gap_tol=gap_tol, kkt_tol=kkt_tol)

    # ---------------------------------------------------------------- Mahalanobis API (metric-learn)
    def _check_preprocessor(self):
        """Set and return ``preprocessor_``: the checked ``preprocessor`` (metric-learn's method and attribute)."""
        self.preprocessor_ = check_preprocessor(self.preprocessor)
        return self.preprocessor_

    def _points(self, X, *, reset: bool) -> np.ndarray:
        """Points (n, d) from ``X``; input of another number of dimensions raises metric-learn's message."""
        pre = check_preprocessor(self.preprocessor)
        if ndim(X) != 2:
            X = points_from(X, pre, estimator=self)     # keys with a preprocessor; else metric-learn's error
            if reset:
                self.n_features_in_ = X.shape[1]
            elif X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input")
            return X
        return _validate_data(self, X, reset=reset, dtype=np.float64)

    def _tuples(self, tuples, size: int, name: str, *, reset: bool = False) -> np.ndarray:
        """Tuples as points (m, size, d); ``reset`` (in ``fit``) sets ``n_features_in_``, else it is checked."""
        T = tuples_from(tuples, size, check_preprocessor(self.preprocessor), name, estimator=self)
        if reset:
            self.n_features_in_ = T.shape[2]
        elif hasattr(self, "n_features_in_") and T.shape[2] != self.n_features_in_:
            raise ValueError(f"{name} have {T.shape[2]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input")
        return T

    def transform(self, X):
        """Embed points: ``X @ components_.T`` (distances there are the learned distances).

        Parameters
        ----------
        X : array_like, shape (n, d), or 1-D indices with a ``preprocessor``

        Returns
        -------
        ndarray, shape (n, n_components)
        """
        check_is_fitted(self, "components_")
        return self._points(X, reset=False) @ self.components_.T

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """The learned PSD matrix ``M = components_.T @ components_`` (a copy)."""
        check_is_fitted(self, "components_")
        return self.components_.T @ self.components_

    def pair_distance(self, pairs) -> np.ndarray:
        """Learned distances :math:`\\sqrt{(x - x')^T M (x - x')}` of pairs (metric-learn's ``pair_distance``).

        Parameters
        ----------
        pairs : array_like, shape (m, 2, d), or (m, 2) indices with a ``preprocessor``
        """
        P = self._tuples(pairs, PairsClassifierMixin._tuple_size, "pairs")   # the input first, as metric-learn
        check_is_fitted(self, "components_")
        diff = (P[:, 1, :] - P[:, 0, :]) @ self.components_.T
        return np.sqrt(np.sum(diff ** 2, axis=1))

    def pair_score(self, pairs) -> np.ndarray:
        """``-pair_distance(pairs)``: a similarity, larger for closer pairs (metric-learn's ``pair_score``)."""
        return -self.pair_distance(pairs)

    def score_pairs(self, pairs) -> np.ndarray:
        """metric-learn's deprecated name of :meth:`pair_distance` (distances, not scores).

        Kept so that code written for metric-learn runs; it issues metric-learn's ``FutureWarning``
        word for word (code may filter on it), which points to :meth:`pair_score` (similarities)
        and to :meth:`pair_distance` (distances; the message spells it "pair_distances").
        """
        warnings.warn(SCORE_PAIRS_DEPRECATION, FutureWarning, stacklevel=2)
        return self.pair_distance(pairs)

    def get_metric(self):
        """A function ``metric(u, v, squared=False)`` of two points, independent of the estimator
        (it keeps a copy of ``components_``), e.g. for ``KNeighborsClassifier(metric=...)``."""
        check_is_fitted(self, "components_")
        L = np.atleast_2d(np.array(self.components_, dtype=np.float64))   # a 1-D L: one feature or one row

        def metric(u, v, squared: bool = False) -> float:
            diff = L @ (np.asarray(u, dtype=np.float64).ravel() - np.asarray(v, dtype=np.float64).ravel())
            dist = float(diff @ diff)
            return dist if squared else float(np.sqrt(dist))
        return metric


class PointsLearner(TransformerMixin, MetricLearner):
    """A learner from labelled points (``fit(X, y)``): a scikit-learn transformer, so that
    ``fit_transform`` and pipelines apply. The learners from tuples are not: their ``fit`` takes
    tuples and ``transform`` takes points, so a pipeline's ``transform`` of its training input
    has no meaning for them (metric-learn's tuple learners are not scikit-learn transformers either).
    """


def _classifier_tags(tags):
    """``tags`` (scikit-learn >= 1.6) marked as a binary classifier's."""
    from sklearn.utils import ClassifierTags
    tags.estimator_type = "classifier"
    tags.classifier_tags = ClassifierTags(multi_class=False)
    return tags


class _TupleClassifier:
    """A classifier of tuples for scikit-learn (``is_classifier`` is True, on every version), so
    classifier scorers such as ``"roc_auc"`` and stratified cross-validation apply to tuples
    labelled -1 / +1: ``_estimator_type`` for scikit-learn < 1.6, ``__sklearn_tags__`` after."""

    _estimator_type = "classifier"
    classes_ = np.array([-1, 1])

    def __sklearn_tags__(self):
        return _classifier_tags(super().__sklearn_tags__())


class PairsClassifierMixin(_TupleClassifier):
    """metric-learn's pair classifier: similar (+1) when the learned distance is at most ``threshold_``."""

    #: Points per tuple (metric-learn's attribute name).
    _tuple_size = 2

    @staticmethod
    def _validate_calibration_params(strategy="accuracy", min_rate=None, beta=1.0) -> None:
        """metric-learn's name of :func:`~cvxmetric.estimators._calibration.check_calibration_params`."""
        from ._calibration import check_calibration_params
        check_calibration_params(strategy, min_rate, beta)

    def decision_function(self, pairs) -> np.ndarray:
        """``-pair_distance``: high for similar pairs."""
        return self.pair_score(pairs)

    def predict(self, pairs) -> np.ndarray:
        """+1 (similar) where ``pair_distance <= threshold_``, else -1."""
        check_is_fitted(self, "threshold_")
        return np.where(-self.decision_function(pairs) <= self.threshold_, 1, -1)

    def score(self, pairs, y) -> float:
        """ROC AUC of ``decision_function`` against the pair labels (metric-learn's score)."""
        from sklearn.metrics import roc_auc_score
        return float(roc_auc_score(y, self.decision_function(pairs)))

    def set_threshold(self, threshold):
        """Set the distance threshold of :meth:`predict`."""
        check_is_fitted(self, "components_")
        try:
            self.threshold_ = float(threshold)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"threshold must be a real number; got {threshold!r}") from exc
        return self

    def calibrate_threshold(self, pairs_valid, y_valid, strategy: str = "accuracy", min_rate=None, beta=1.0):
        """Choose ``threshold_`` maximising ``strategy`` on the validation pairs (metric-learn's strategies).

        Parameters
        ----------
        pairs_valid : array_like, shape (m, 2, d), or (m, 2) indices with a ``preprocessor``
        y_valid : array_like, shape (m,)
            +1 (similar) or -1 (dissimilar) per pair.
        strategy : {"accuracy", "f_beta", "max_tpr", "max_tnr"}
            The accuracy; the F-beta score (``beta``); the true positive rate with a true negative
            rate of at least ``min_rate``; the true negative rate with a true positive rate of at
            least ``min_rate``.
        min_rate : float in [0, 1], optional
            Required by ``"max_tpr"`` and ``"max_tnr"``.
        beta : float
            Weight of recall in ``"f_beta"``.

        Notes
        -----
        The candidates, formulas and tie rules are those of
        :func:`cvxmetric.estimators._calibration.best_threshold`.
        """
        from ._calibration import best_threshold, check_calibration_params
        from ._inputs import pair_labels
        check_calibration_params(strategy, min_rate, beta)
        dist = self.pair_distance(pairs_valid)
        similar = pair_labels(y_valid, dist.shape[0])
        self.threshold_ = best_threshold(dist, similar, strategy, min_rate=min_rate, beta=beta)
        return self


class QuadrupletsClassifierMixin(_TupleClassifier):
    """metric-learn's quadruplet classifier: +1 when the first pair is the closer one."""

    #: Points per tuple (metric-learn's attribute name).
    _tuple_size = 4

    def decision_function(self, quadruplets) -> np.ndarray:
        """``pair_distance(c, d) - pair_distance(a, b)``: positive when (a, b) is the closer pair."""
        check_is_fitted(self, "components_")
        Q = self._tuples(quadruplets, self._tuple_size, "quadruplets")
        return self.pair_score(Q[:, :2]) - self.pair_score(Q[:, 2:])

    def predict(self, quadruplets) -> np.ndarray:
        return np.sign(self.decision_function(quadruplets))

    def score(self, quadruplets) -> float:
        """Share of quadruplets whose first pair is predicted closer (metric-learn's score)."""
        return float(self.predict(quadruplets).mean() / 2 + 0.5)
