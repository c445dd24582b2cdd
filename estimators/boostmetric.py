"""BoostMetric (Shen et al. 2012) as a scikit-learn estimator, supervised by class labels."""
from __future__ import annotations

from cvxmetric import problems
from cvxmetric.boostmetric import LOSSES

from ._base import PointsLearner
from ._labels import points_and_labels

__all__ = ["BoostMetric", "LOSSES"]


class BoostMetric(PointsLearner):
    r"""BoostMetric: a PSD metric as a weighted sum of rank-one matrices, from label triplets.

    Triplets :math:`(i, j, k)` ("i closer to j than to k") come from the labels as in the paper's
    experiments and the project's benchmarks: every point's ``n_neighbors`` nearest same-class
    neighbours ``j`` (targets) and ``n_impostors`` nearest other-class neighbours ``k``
    (:func:`cvxmetric.generators.triplets_from_labels`). With margins
    :math:`\rho_r = \langle A_r, M\rangle`, :math:`A_r = C_{ik} - C_{ij}`:

    * ``loss="exp"``: :math:`\min_{M \succeq 0} \log \sum_r e^{-\rho_r} + \nu\,\mathrm{tr}\,M` (eq. 8);
    * ``loss="logistic"``: :math:`\min_{M \succeq 0} \sum_r \log(1 + e^{-\rho_r}) + \nu\,\mathrm{tr}\,M` (eq. 19);
    * ``loss="hinge"``: :math:`\max \rho - \nu \sum_r \xi_r` s.t. :math:`\rho_r \ge \rho - \xi_r`,
      :math:`M \succeq 0`, :math:`\mathrm{tr}\,M = 1` (sec. 3.1).

    Parameters
    ----------
    loss : {"exp", "logistic", "hinge"}
    trace_weight : float, optional
        exp and logistic: the weight of tr M (the paper's :math:`\nu`). Default: the benchmarks'
        choice, 0.01 (exp), 1 (logistic). The exponential loss is bounded below only for a trace
        weight above the best worst margin (separable data need a larger one). Rejected for the hinge.
    slack_weight : float, optional
        The hinge: the weight of the slacks (the paper's :math:`\nu`, >= 1 / number of triplets).
        Default ``1 / (0.1 m)`` (the mean of the 10 % smallest margins). Rejected for exp and logistic.
    n_neighbors, n_impostors : int
        Neighbours per point that make the triplets (paper: 3 and 3).
    solver : {"projected_gradient", "totally_corrective", "stagewise", "column_generation", "cvxpy"} or None
        exp / logistic: accelerated projected gradient (default; certified), the totally-corrective
        solver (certified) or the paper's stage-wise algorithm (not optimal by design: it reports its honest gap and is usually not
        certified); hinge: column generation (the default for it). ``"cvxpy"``: the exact solve.
    tol, max_iter : optional
        The solver's certified gap and iteration limit; None: its defaults.
    solver_options : dict, optional
        Further options of the chosen solver (an option it does not take raises ValueError).
    preprocessor : array or callable, optional
        metric-learn's preprocessor: ``fit``/``transform`` then accept 1-D index arrays.
    random_state : None, int, RandomState or Generator
        Unused (the solvers are deterministic); kept for scikit-learn's API.

    Notes
    -----
    The exp and logistic problems depend on the data's units: scaling X by s scales the margins
    by :math:`s^2` while the loss and :math:`\nu` stay fixed. As s shrinks, :math:`M = 0` becomes
    optimal (no direction's margin gain pays its trace); as s grows, the trace weight becomes
    negligible and M grows. Scaling ``trace_weight`` by :math:`s^2` with the data gives the same problem. The
    hinge problem (trace one) does not depend on s. The default solver certifies its answer
    at every scale (it runs on the data divided by a power of two, an exact change of units).
    """

    def __init__(self, loss="logistic", trace_weight=None, slack_weight=None, n_neighbors=3, n_impostors=3, solver=None, tol=None, max_iter=None,
                 solver_options=None, preprocessor=None, random_state=None):
        self.loss = loss
        self.trace_weight = trace_weight
        self.slack_weight = slack_weight
        self.n_neighbors = n_neighbors
        self.n_impostors = n_impostors
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state

    def fit(self, X, y):
        """Learn from points ``X`` (n, d) and class labels ``y``."""
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}; got {self.loss!r}")
        X, y = points_and_labels(self, X, y)
        return self._fit_problem(problems.BoostMetric(X, y, loss=self.loss, trace_weight=self.trace_weight,
                                                      slack_weight=self.slack_weight, n_neighbors=self.n_neighbors,
                                                      n_impostors=self.n_impostors))
