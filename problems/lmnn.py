"""LMNN (Weinberger & Saul 2009) as a :class:`~cvxmetric.problems.Problem`."""
from __future__ import annotations

from cvxmetric._checks import as_data_matrix, as_labels

from cvxmetric.instances import Instance
from cvxmetric.solvers.lmnn import DEFAULT_METHOD, METHODS as LMNN_METHODS

from ._base import Problem, Run, instance_name, ordered_methods, solver_options

__all__ = ["LMNN"]


class LMNN(Problem):
    r"""The convex LMNN problem on points ``X`` with class labels ``y``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    y : array_like, shape (n,)
        Class labels: at least two classes, some class with two or more points.
    n_neighbors : int
        Fixed Euclidean target neighbours per point (same class), capped at the point's class
        size minus one; a point alone in its class has none and acts only as an impostor.
    regularization : float in (0, 1)
        Weight of the pull term; the hinge term has ``1 - regularization``.
    margin : float
        Triplet margin (> 0).

    Notes
    -----
    .. math::
        \min_{M \succeq 0}\ \text{regularization} \sum_{(i, j) \in S} \langle M, C_{ij}\rangle
        + (1 - \text{regularization}) \sum_{(i, j, l)} [\text{margin} + \langle M, C_{ij} - C_{il}\rangle]_+

    over the target pairs ``S`` and every impostor ``l`` (another class). Algorithms: ``"pdhg"``
    (default: constraint generation around PDHG) and ``"subgradient"`` (the projected subgradient
    engine, impostors found on the fly); :func:`cvxmetric.solvers.solve_lmnn`.
    """

    name = "lmnn"
    # the facade's algorithms, its default (cvxmetric.solvers.lmnn.DEFAULT_METHOD) first
    methods = ordered_methods(LMNN_METHODS, DEFAULT_METHOD)
    data_keys = ("X", "y")

    def __init__(self, X, y, n_neighbors=3, regularization=0.5, margin=1.0):
        X = as_data_matrix(X, "X", min_rows=2)
        y = as_labels(y, X.shape[0], "y")
        reg = regularization
        if isinstance(reg, bool) or not isinstance(reg, (int, float)) or not 0.0 < reg < 1.0:
            raise ValueError(f"regularization must be a number in (0, 1) (the pull weight); got {reg!r}")
        params = {"n_neighbors": n_neighbors, "regularization": float(reg), "margin": margin}
        super().__init__(Instance("lmnn", instance_name("lmnn", X, y, params), X, None, params=params, y=y))

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_lmnn
        inst = self.instance
        return solve_lmnn(inst.X, inst.y, method=method, **inst.params, **solver_options(tol, max_iter, **options))

    def runs(self):
        """The subgradient engine with impostors found by search (``"search"``) and on the
        materialised triplet set (``"materialised"``), and PDHG on a working set of the implicit
        triplet set (``"pdhg"``), each certified on the full triplet set."""
        return (Run("search", "subgradient", {"impostors": "search"}),
                Run("materialised", "subgradient", {"impostors": "materialised"}),
                Run("pdhg", "pdhg"))

    def _build_formulation(self, instance):
        from cvxmetric.formulations.lmnn import build_lmnn
        return build_lmnn(instance.X, instance.y, **instance.params)
