"""Quadruplet-wise metric learning (thesis ch. 2-3) as scikit-learn estimators.

``Qwise`` learns from quadruplets like metric-learn's ``LSML`` (in ``(a, b, c, d)`` the pair
``(a, b)`` should be closer than ``(c, d)``); ``Qwise_Supervised`` from class labels.
"""
from __future__ import annotations

import warnings

import numpy as np

from cvxmetric import problems

from ._base import MetricLearner, PointsLearner, QuadrupletsClassifierMixin
from ._inputs import canonical_tuples
from ._labels import points_and_labels
from ._supervision import label_pairs

__all__ = ["Qwise", "Qwise_Supervised", "REGULARIZERS"]

#: The regularizers Omega of the estimators.
REGULARIZERS = ("trace", "frobenius", "fantope")

_DOC = r"""

    .. math::
        \min_{M \succeq 0}\ \text{reg\_weight}\ \Omega(M) + C_Q \sum_q w_q\,
        [\text{margin} + D_M(a, b) - D_M(c, d)]_+

    with :math:`\Omega = \mathrm{tr}\,M` (``"trace"``), :math:`\tfrac12\|M\|_F^2` (``"frobenius"``) or,
    for ``"fantope"``, the sum of the ``d - rank`` smallest eigenvalues of :math:`M` plus
    ``trace_weight`` :math:`\mathrm{tr}\,M` (Fantope regularization, thesis ch. 3: not convex; the
    fit is a certified critical point, measure ``"kkt_residual"``).

    The problem depends on the units of X: a fixed margin beside the regularizer makes it
    not invariant under :math:`X \to sX` (the optimum is not :math:`M^*/s^2`). As the scale shrinks,
    distances need a metric of size :math:`1/s^2` to reach the margin, whose regularizer outweighs the
    hinge losses, and :math:`M = 0` becomes optimal (objective :math:`C_Q \sum_q w_q\,` ``margin``);
    as it grows, the regularizer fades and the fit tends to the least-hinge metric. Features in
    mixed units weigh by their units (the trace costs each one alike). Standardize X (or choose
    ``margin`` and ``reg_weight`` in its units) for a scale-free fit. The PDHG solver itself copes
    with features in units orders of magnitude apart (:func:`cvxmetric.solvers.pdhg.equilibration`).

    Parameters
    ----------
    regularizer : {"trace", "frobenius", "fantope"}
    reg_weight : float
        Weight of :math:`\Omega` (>= 0).
    C_Q : float
        Weight of the quadruplet hinge losses.
    margin : float
        The margin :math:`\delta` every quadruplet asks for.
    rank : int, optional
        Target rank ``e`` of the Fantope regularizer (required for ``"fantope"``, ``1 <= rank < d``).
    trace_weight : float
        The extra :math:`\gamma\,\mathrm{tr}\,M` of Fantope + trace (``"fantope"`` only).
    solver : str or None
        ``"pdhg"`` (default) or ``"subgradient"`` for trace / frobenius; ``"mm"`` (default,
        majorization-minimization with PDHG inner solves), ``"subgradient"`` (thesis alg. 2) or
        ``"factor"`` (the non-convex baseline over ``L`` of rank ``rank``) for fantope; ``"cvxpy"``:
        the exact certified solve (fantope: the reference MM). The names are the ``method=`` values
        of :func:`cvxmetric.solvers.solve_qwise` and :func:`cvxmetric.solvers.solve_fantope`.
    tol, max_iter : optional
        The solver's tolerance and iteration limit (fantope ``"mm"``: outer iterations); None: defaults.
    solver_options : dict, optional
        Further options of the chosen solver (an option it does not take raises ValueError).
    preprocessor : array or callable, optional
        metric-learn's preprocessor: tuples (and points) may then be given as indices.
    random_state : None, int, RandomState or Generator
        Seed of every random choice (``Qwise_Supervised``: the quadruplets drawn from labels).
    prior : optional
        metric-learn's ``LSML`` parameter (the matrix its LogDet regularizer pulls towards): the
        regularizers here have no prior, so it is accepted, so that code written for ``LSML`` runs,
        and ignored with one ``UserWarning`` when set.
    verbose : bool
        Print the solver, its iterations and the certificate after the fit.
"""


class _QwiseBase(MetricLearner):
    def _solver_context(self) -> str:
        return f" with regularizer={self.regularizer!r}"

    def _fit_quadruplets(self, X, idx, weights=None, random_state=None):
        if self.prior is not None:
            warnings.warn(f"{type(self).__name__}: prior={self.prior!r} ignored: it is metric-learn's LSML prior (the "
                          "matrix of its LogDet regularizer), and Qwise's regularizers (trace, frobenius, fantope) "
                          "have none", UserWarning, stacklevel=3)
        if self.regularizer not in REGULARIZERS:
            raise ValueError(f"regularizer must be one of {REGULARIZERS}; got {self.regularizer!r}")
        if self.regularizer == "fantope":
            problem = problems.Fantope(X, idx, rank=self.rank, reg_weight=self.reg_weight,
                                       trace_weight=self.trace_weight, C_Q=self.C_Q, margin=self.margin,
                                       weights=weights)
            return self._fit_problem(problem, random_state)
        if self.rank is not None:
            raise ValueError(f"rank applies to regularizer='fantope' only; got rank={self.rank!r} with "
                             f"regularizer={self.regularizer!r} (leave rank=None)")
        if self.trace_weight:
            raise ValueError(f"trace_weight applies to regularizer='fantope' only (trace: use "
                             f"regularizer='trace' and reg_weight); got trace_weight={self.trace_weight!r}")
        return self._fit_problem(problems.Qwise(X, idx, regularizer=self.regularizer, reg_weight=self.reg_weight,
                                                C_Q=self.C_Q, margin=self.margin, weights=weights), random_state)


class Qwise(QuadrupletsClassifierMixin, _QwiseBase):
    __doc__ = ("Metric learning from quadruplets ``(a, b, c, d)``: the pair (a, b) should be closer than (c, d)."
               + _DOC)

    def __init__(self, regularizer="trace", reg_weight=1.0, C_Q=1.0, margin=1.0, rank=None, trace_weight=0.0,
                 solver=None, tol=None, max_iter=None, solver_options=None, preprocessor=None, random_state=None,
                 prior=None, verbose=False):
        self.regularizer = regularizer
        self.reg_weight = reg_weight
        self.C_Q = C_Q
        self.margin = margin
        self.rank = rank
        self.trace_weight = trace_weight
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state
        self.prior = prior
        self.verbose = verbose

    def fit(self, quadruplets, weights=None):
        """Learn from quadruplets ``(m, 4, d)`` (or ``(m, 4)`` indices with a preprocessor) and
        optional per-quadruplet ``weights`` (metric-learn's ``LSML.fit`` signature)."""
        Q = self._tuples(quadruplets, self._tuple_size, "quadruplets", reset=True)
        X, idx = canonical_tuples(Q)
        both = (idx[:, 0] == idx[:, 1]) & (idx[:, 2] == idx[:, 3])
        if np.any(both):
            # metric-learn accepts them; both distances are 0 under every metric, so such a
            # quadruplet only adds a constant to the objective
            warnings.warn(f"{int(both.sum())} of the {len(both)} quadruplets compare two pairs of identical points "
                          f"and constrain nothing: Qwise drops them (the first: quadruplets[{int(np.argmax(both))}])",
                          UserWarning, stacklevel=2)
            idx = idx[~both]
            if weights is not None and np.shape(weights) == both.shape:   # other shapes: the problem's message
                weights = np.asarray(weights)[~both]
            if len(idx) == 0:
                raise ValueError("every quadruplet compares two pairs of identical points; give quadruplets with at "
                                 "least one pair of distinct points")
        return self._fit_quadruplets(X, idx, weights)


class Qwise_Supervised(PointsLearner, _QwiseBase):
    __doc__ = ("Qwise from class labels: quadruplets (a, b, c, d) of a same-class pair (a, b) and a "
               "different-class pair (c, d), ``n_constraints`` of them drawn from ``y``." + _DOC + """
    n_constraints : int, optional
        Number of quadruplets (default ``20 * n_classes**2``, metric-learn's count of pairs).
    """)

    def __init__(self, regularizer="trace", reg_weight=1.0, C_Q=1.0, margin=1.0, rank=None, trace_weight=0.0,
                 n_constraints=None, solver=None, tol=None, max_iter=None, solver_options=None,
                 preprocessor=None, random_state=None, prior=None, verbose=False):
        self.regularizer = regularizer
        self.reg_weight = reg_weight
        self.C_Q = C_Q
        self.margin = margin
        self.rank = rank
        self.trace_weight = trace_weight
        self.n_constraints = n_constraints
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.solver_options = solver_options
        self.preprocessor = preprocessor
        self.random_state = random_state
        self.prior = prior
        self.verbose = verbose

    def fit(self, X, y):
        """Learn from points ``X`` (n, d) and class labels ``y``."""
        X, y = points_and_labels(self, X, y)
        rs = self._random_source()
        S, D = label_pairs(y, self.n_constraints, rs)
        m = min(len(S), len(D))
        return self._fit_quadruplets(X, np.hstack([S[:m], D[:m]]), random_state=rs)
