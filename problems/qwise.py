"""Quadruplet-wise metric learning (thesis ch. 2-3): Qwise (trace / Frobenius regularizer) and
Fantope regularization, and vector Qwise (thesis eq. 2.10), as :class:`~cvxmetric.problems.Problem` objects."""
from __future__ import annotations

import dataclasses

import numpy as np

from cvxmetric._checks import as_data_matrix, as_index_array
from cvxmetric.constraints import ConstraintSet
from cvxmetric.instances import Instance

from cvxmetric.solvers.qwise import QWISE_DEFAULT_METHOD, QWISE_METHODS

from ._base import Problem, Run, instance_name, ordered_methods, solver_options

__all__ = ["Qwise", "QwiseVector", "Fantope", "QWISE_REGULARIZERS"]

#: The convex regularizers of :class:`Qwise` (Fantope regularization is :class:`Fantope`).
QWISE_REGULARIZERS = ("trace", "frobenius")


def quadruplet_constraints(X: np.ndarray, quadruplets, margin, weights) -> ConstraintSet:
    """Quadruplets ``(a, b, c, d)`` (indices into ``X``) asking ``D(c, d) >= D(a, b) + margin``."""
    idx = as_index_array(quadruplets, 4, "quadruplets", n=X.shape[0])
    if idx.shape[0] == 0:
        raise ValueError("quadruplets is empty; give at least one (a, b, c, d)")
    return ConstraintSet.from_quadruplets(idx, delta=margin, weight=1.0 if weights is None else weights)


class Qwise(Problem):
    r"""Full-matrix Qwise (thesis eq. 2.7) on quadruplets.

    Parameters
    ----------
    X : array_like, shape (n, d)
    quadruplets : array_like of int, shape (m, 4)
        ``(a, b, c, d)`` indices into ``X``: the pair (a, b) should be closer than (c, d).
    regularizer : {"trace", "frobenius"}
    reg_weight : float
        Weight of :math:`\Omega` (>= 0).
    C_Q : float
        Weight of the quadruplet hinge losses.
    margin : float
        The margin :math:`\delta` every quadruplet asks for.
    weights : array_like, shape (m,), optional
        Per-quadruplet weights :math:`w_q` (default 1).

    Notes
    -----
    .. math::
        \min_{M \succeq 0}\ \text{reg\_weight}\ \Omega(M) + C_Q \sum_q w_q\,
        [\text{margin} + D_M(a, b) - D_M(c, d)]_+

    with :math:`\Omega = \mathrm{tr}\,M` or :math:`\tfrac12\|M\|_F^2`. Algorithms: ``"pdhg"``
    (default) and ``"subgradient"`` (:func:`cvxmetric.solvers.solve_qwise`).
    """

    name = "qwise"
    # the facade's algorithms, its default (cvxmetric.solvers.qwise.QWISE_DEFAULT_METHOD) first
    methods = ordered_methods(QWISE_METHODS, QWISE_DEFAULT_METHOD)
    # solve(method="pdhg", working_set=True) runs PDHG on a working set: its result is held to the
    # harness' working-set row
    result_variants = {"qwise-pdhg-ws": "pdhg-ws"}
    data_keys = ("X", "quadruplets")
    optional_data_keys = ("weights",)

    def __init__(self, X, quadruplets, regularizer="trace", reg_weight=1.0, C_Q=1.0, margin=1.0, weights=None):
        if regularizer not in QWISE_REGULARIZERS:
            raise ValueError(f"regularizer must be one of {QWISE_REGULARIZERS} (Fantope regularization: "
                             f"cvxmetric.problems.Fantope); got {regularizer!r}")
        X = as_data_matrix(X, "X", min_rows=2)
        cons = quadruplet_constraints(X, quadruplets, margin, weights)
        params = {"regularizer": regularizer, "C_Q": C_Q, "C_P": 1.0, "reg_weight": reg_weight}
        super().__init__(Instance("qwise", instance_name("qwise", X, cons, params), X, cons, params=params))

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_qwise
        inst = self.instance
        return solve_qwise(inst.X, inst.constraints, method=method, **inst.params,
                           **solver_options(tol, max_iter, **options))

    def runs(self):
        """The subgradient engine (``"subgradient"``), PDHG on every constraint (``"pdhg"``,
        ``working_set=False``) and PDHG on a working set certified on every constraint
        (``"pdhg-ws"``, ``working_set=True``, held to the thresholds of that variant)."""
        return (Run("subgradient", "subgradient"), Run("pdhg", "pdhg", {"working_set": False}),
                Run("pdhg-ws", "pdhg", {"working_set": True}))

    def _build_formulation(self, instance):
        from cvxmetric.formulations.qwise import build_qwise
        return build_qwise(instance.X, instance.constraints, **instance.params)


class QwiseVector(Problem):
    r"""Vector Qwise (thesis eq. 2.10, Huber losses): a diagonal metric or a linear model.

    Parameters
    ----------
    X : array_like, shape (n, d)
    quadruplets : array_like of int, shape (m, 4)
        ``(a, b, c, d)`` indices into ``X``: the pair (a, b) should be closer than (c, d).
    pairs : array_like of int, shape (p, 2), optional
        Labelled pairs (indices into ``X``), with ``labels``.
    labels : array_like, shape (p,), optional
        +1 (similar) or -1 (dissimilar) per pair; the model learns their threshold :math:`b`.
    diagonal : bool
        ``True``: :math:`M = \mathrm{Diag}(w)`, :math:`w \ge 0`; ``False``: the linear model
        :math:`M = w w^\top`, :math:`w` free.
    C_Q, C_P : float
        Weights of the quadruplet and the pair losses.
    h : float
        Huber width in (0, 0.5].
    margin : float
        The margin :math:`\delta` every quadruplet asks for.
    weights : array_like, shape (m,), optional
        Per-quadruplet weights (default 1).

    Notes
    -----
    With :math:`\omega = [w; b]` (:math:`\omega \ge 0` when ``diagonal``), :math:`\Psi_{ij}` the
    squared (diagonal) or plain (linear) differences and :math:`\ell_h` the Huber-smoothed hinge:

    .. math::
        \min_\omega\ \tfrac12\|\omega\|^2 + C_Q \sum_{(a,b,c,d)} w_q\,
        \ell_h(\beta_q - [\Psi_{cd} - \Psi_{ab}; 0]^\top\omega)
        + C_P \sum_{\text{pairs}} \ell_h(1 \pm [\Psi_{ij}; -1]^\top\omega),

    :math:`\beta_q` = ``margin`` (or :math:`-h` when it is 0). The point of :meth:`objective` and
    :meth:`check` is :math:`\omega` (a result's ``w``). Algorithm: ``"newton"`` (projected Newton,
    :func:`cvxmetric.solvers.solve_qwise_vector`).
    """

    name = "qwise_vector"
    methods = ("newton",)
    data_keys = ("X", "quadruplets")
    optional_data_keys = ("pairs", "labels", "weights")
    start_option = "w0"

    def __init__(self, X, quadruplets, pairs=None, labels=None, diagonal=True, C_Q=1.0, C_P=1.0, h=None, margin=1.0,
                 weights=None):
        from cvxmetric.losses import DEFAULT_HUBER_H

        from .pairs import pair_split

        X = as_data_matrix(X, "X", min_rows=2)
        cons = quadruplet_constraints(X, quadruplets, margin, weights)
        if (pairs is None) != (labels is None):
            raise ValueError("pairs and labels go together: pass both (labelled pairs) or neither")
        if pairs is not None:
            S, D = pair_split(X, pairs, labels)
            # the model learns the pairs' threshold b: the bounds are not read
            cons = (cons + ConstraintSet.from_pairs(S, similar=True, bound=0.0)
                    + ConstraintSet.from_pairs(D, similar=False, bound=0.0))
        params = {"diagonal": diagonal, "C_Q": C_Q, "C_P": C_P, "h": DEFAULT_HUBER_H if h is None else h}
        super().__init__(Instance("qwise_vector", instance_name("qwise_vector", X, cons, params), X, cons,
                                  params=params))

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_qwise_vector
        inst = self.instance
        return solve_qwise_vector(inst.X, inst.constraints, method=method, **inst.params,
                                  **solver_options(tol, max_iter, **options))

    def _build_formulation(self, instance):
        from cvxmetric.formulations.qwise import build_qwise_vector
        return build_qwise_vector(instance.X, instance.constraints, **instance.params)


class Fantope(Problem):
    r"""Fantope-regularized metric learning (thesis ch. 3) on quadruplets: a metric of rank ``rank``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    quadruplets : array_like of int, shape (m, 4)
        As in :class:`Qwise`.
    rank : int
        Target rank ``e`` (``1 <= rank < d``).
    reg_weight : float
        Weight of the Fantope regularizer (the sum of the ``d - rank`` smallest eigenvalues).
    trace_weight : float
        The extra :math:`\gamma\,\mathrm{tr}\,M`.
    C_Q, margin, weights
        As in :class:`Qwise`.

    Notes
    -----
    .. math::
        \min_{M \succeq 0}\ \text{reg\_weight} \sum_{i > \text{rank}} \lambda_i^{\uparrow}(M)
        + \text{trace\_weight}\,\mathrm{tr}\,M + C_Q \sum_q w_q [\text{margin} + D_M(a, b) - D_M(c, d)]_+

    is not convex: a point is certified as a critical point. The convex bound
    :math:`\hat\varphi(\cdot; W(M))` at the Fantope point :math:`W(M)` of ``M`` is tight at ``M``,
    and ``M`` is critical exactly when it minimises that bound: :meth:`truth` and :meth:`check`
    certify the bound at ``W(at)``. Algorithms: ``"mm"`` (default), ``"subgradient"``, ``"factor"``
    (:func:`cvxmetric.solvers.solve_fantope`); ``"cvxpy"``: the reference MM, every step certified.
    """

    name = "fantope"
    methods = ("mm", "subgradient", "factor")
    exact_thresholds = "mm"   # the reference MM is held as the fast MM
    # solve_bound's results: the convex bound at a fixed W, a hinge problem held as Qwise's
    result_variants = {f"fantope-bound-{m}": f"bound-{m}" for m in ("subgradient", "pdhg")}
    data_keys = ("X", "quadruplets")
    optional_data_keys = ("weights",)

    def __init__(self, X, quadruplets, rank, reg_weight=1.0, trace_weight=0.0, C_Q=1.0, margin=1.0, weights=None):
        X = as_data_matrix(X, "X", min_rows=2)
        d = X.shape[1]
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 1 <= rank < d:
            raise ValueError(f"Fantope regularization needs rank, an integer in [1, d) = [1, {d}) (the target rank "
                             f"of M); got rank={rank!r}")
        cons = quadruplet_constraints(X, quadruplets, margin, weights)
        params = {"rank": int(rank), "reg_weight": reg_weight, "trace_weight": trace_weight, "C_Q": C_Q, "C_P": 1.0}
        super().__init__(Instance("fantope", instance_name("fantope", X, cons, params), X, cons, params=params))

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_fantope
        opts = solver_options(tol, max_iter, **options)
        if method == "factor":
            opts.setdefault("seed", random_state if random_state is not None else 0)
        return solve_fantope(self.X, self.constraints, method=method, **self.params, **opts)

    def model(self):
        """The :class:`cvxmetric.fantope.FantopeModel` of the problem."""
        return _model_of(self.instance)

    def runs(self):
        """The harness' runs, on the convex bound at the instance's fixed Fantope point ``W``
        (:meth:`solve_bound`): the projected subgradient engine (``"bound-subgradient"``) and
        restarted PDHG (``"bound-pdhg"``). The non-convex problem's own algorithms are checked by
        the Fantope method's theorem rows."""
        return tuple(Run(f"bound-{m}", m, entry="solve_bound") for m in ("subgradient", "pdhg"))

    def solve_bound(self, method: str = "pdhg", *, at=None, **options):
        r"""Solve the convex bound :math:`\hat\varphi(\cdot; W)` at the Fantope point ``W = W(at)``
        (``at`` None: the instance's fixed ``W``, as a bundled instance carries), a hinge problem.

        Parameters
        ----------
        method : {"pdhg", "subgradient"}
            Restarted PDHG (:func:`cvxmetric.solvers.pdhg.pdhg`) or the projected subgradient
            engine (:func:`cvxmetric.solvers.subgradient.projected_subgradient`).
        at : array_like, shape (d, d), optional
            The matrix whose Fantope point the bound is taken at.
        **options
            Options of the engine (``tol``, ``max_iter``, ...).

        Returns
        -------
        SolverResult
            Labelled ``"fantope-bound-<method>"``; ``info["bound_W"]`` is the Fantope point ``W`` of
            the program solved, which :meth:`verify` checks the result on (not ``W`` of the
            result's M).
        """
        from cvxmetric.solvers.pdhg import pdhg
        from cvxmetric.solvers.subgradient import projected_subgradient
        engines = {"pdhg": pdhg, "subgradient": projected_subgradient}
        if method not in engines:
            raise ValueError(f"method must be one of {tuple(engines)} for the convex bound; got {method!r}")
        instance = self._bound_at(at)
        W = instance.extra["W"]
        res = engines[method](_model_of(instance).bound(W), solver_name=f"fantope-bound-{method}", **options)
        return dataclasses.replace(res, info={**res.info, "bound_W": W.copy()})

    def _bound_at(self, at) -> Instance:
        """The instance of the bound at ``W(at)``, or the instance itself when it carries ``W``."""
        if at is not None:
            return self.bound_instance(at)
        if "W" not in self.instance.extra:
            raise ValueError("Fantope regularization is not convex: the convex bound is taken at W(M); pass at=M, "
                             "the matrix whose critical-point test you want (the instance carries no fixed "
                             "Fantope point W)")
        return self.instance

    def _build_formulation(self, instance):
        from cvxmetric.formulations.fantope import build_fantope_bound
        return build_fantope_bound(_model_of(instance), instance.extra["W"])

    def objective(self, point) -> float:
        """The (non-convex) objective :math:`\\varphi(M)` (equal to its bound at ``W(M)``)."""
        M = np.array(point, dtype=np.float64)
        if M.shape != (self.d, self.d):
            raise ValueError(f"M must have shape ({self.d}, {self.d}); got {M.shape}")
        return float(self.model().value(M))

    def bound_instance(self, M) -> Instance:
        """The instance of the convex bound at the Fantope point ``W(M)`` of ``M``."""
        from cvxmetric.fantope import fantope_projector
        M = np.array(M, dtype=np.float64)
        if M.shape != (self.d, self.d) or not np.all(np.isfinite(M)):
            raise ValueError(f"M must be a finite ({self.d}, {self.d}) matrix; got shape {M.shape}")
        W = fantope_projector(0.5 * (M + M.T), self.d - self.params["rank"])
        return self._instance_with_W(W)

    def _instance_with_W(self, W) -> Instance:
        """The instance of the convex bound at the Fantope point ``W``."""
        return dataclasses.replace(self.instance, name=instance_name(self.instance.name, W), extra={"W": W})

    def truth(self, rtol=None, *, at=None):
        """The certified interval of the convex bound at ``W(at)`` (``at``: a matrix; it may be
        omitted when the instance carries a fixed Fantope point ``W``): ``at`` is a critical point
        when its objective equals that bound's minimum."""
        return self._truth_of(self._bound_at(at), rtol)

    def formulation(self, *, at=None):
        """The cvxpy formulation of the convex bound at ``W(at)`` (see :meth:`truth`); ``at`` may be
        omitted when the instance carries a fixed Fantope point ``W`` (a bundled instance)."""
        instance = self._bound_at(at)
        return super().formulation() if instance is self.instance else self._build_formulation(instance)

    def _check_instance(self, point) -> Instance:
        return self.bound_instance(point)

    def _verification_instance(self, result) -> Instance:
        """A result of :meth:`solve_bound` is checked on the bound it solved (its ``info["bound_W"]``);
        any other result on the bound at ``W(result.M)``, its critical-point test."""
        if "bound_W" in result.info:
            return self._instance_with_W(np.array(result.info["bound_W"], dtype=np.float64))
        return self.bound_instance(result.M)

    def exact(self, *, tol=None, max_iter=None):
        """The reference majorization-minimization (every bound solved by the solve ladder), certified
        as a critical point by its fixed-point gap (``measure = "kkt_residual"``)."""
        from cvxmetric.formulations.fantope import fantope_mm_reference
        from cvxmetric.solvers.result import make_result
        tol = self.default_truth_rtol() if tol is None else float(tol)
        kw = {} if max_iter is None else {"max_iter": max_iter}
        traj = fantope_mm_reference(self.model(), tol=tol, **kw)
        return make_result("fantope-cvxpy-mm", objective=traj.objective, measure="kkt_residual", tol=tol,
                           stop_reason="converged" if traj.converged else "max_iter", M=traj.M,
                           measure_value=traj.fixed_point_gap, n_iter=len(traj.Ms), history=traj.phi,
                           time=traj.time, info={"statuses": traj.statuses, "W_final": traj.info.get("W_final")},
                           detail=f"reference MM, every step certified by the solve ladder: {traj.message}")


def _model_of(instance):
    """The :class:`cvxmetric.fantope.FantopeModel` of a Fantope instance."""
    from cvxmetric.fantope import fantope_model
    return fantope_model(instance.X, instance.constraints, **instance.params)
