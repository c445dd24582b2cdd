"""ORML, output regularized metric learning (Liu, Hoi & Liu 2008), as a :class:`~cvxmetric.problems.Problem`."""
from __future__ import annotations

import numpy as np

from cvxmetric._checks import as_data_matrix, as_index_array
from cvxmetric.instances import Instance

from ._base import Problem, instance_name, solver_options

__all__ = ["ORML"]


class ORML(Problem):
    r"""ORML on points ``X`` and judged (query, image) pairs.

    Parameters
    ----------
    X : array_like, shape (n, d)
    pairs : array_like of int, shape (m, 2)
        ``(query, image)`` indices into ``X``.
    labels : array_like, shape (m,)
        +1 (the user judged the image relevant) or -1.
    session : array_like, shape (m,), optional
        Log session of each judgement (default: one session per query).
    n_neighbors, alpha, beta, output_weight
        The model's graph neighbours, similar / dissimilar weights and output-loss weight
        (:func:`cvxmetric.orml.orml_model`).
    n_components : int, optional
        Number of directions r (default ``min(15, d, n - 1)``).

    Notes
    -----
    The learned metric is :math:`A = U U^\top` with the ``n_components`` directions ``U`` of the
    orthogonal pursuit (eqs. 18-21), each the exact solution of a least-squares problem (eq. 20).
    The point of :meth:`objective` and :meth:`check` is ``w``, the directions' coefficients stacked
    (a result's ``w``). Algorithm: ``"pursuit"`` (:func:`cvxmetric.solvers.solve_orml`).
    """

    name = "orml"
    methods = ("pursuit",)
    data_keys = ("X", "pairs", "labels")
    optional_data_keys = ("session",)

    def __init__(self, X, pairs, labels, session=None, n_neighbors=6, alpha=1.0, beta=2.0, output_weight=9.0,
                 n_components=None):
        from .pairs import positive_pairs

        X = as_data_matrix(X, "X", min_rows=2)
        idx = as_index_array(pairs, 2, "pairs", n=X.shape[0])
        relevant = positive_pairs(labels, idx.shape[0])
        r = n_components if n_components is not None else min(15, X.shape[1], X.shape[0] - 1)
        params = {"n_neighbors": n_neighbors, "alpha": alpha, "beta": beta, "output_weight": output_weight, "r": r}
        session = None if session is None else np.asarray(session)
        extra = {"pairs": idx, "relevant": relevant, "session": session}
        name = instance_name("orml", X, idx, relevant, session if session is not None else "", params)
        super().__init__(Instance("orml", name, X, None, params=params, extra=extra))

    def model(self):
        """The :class:`cvxmetric.orml.ORMLModel` of the problem."""
        return _model_of(self.instance)

    def _build_formulation(self, instance):
        from cvxmetric.formulations.orml import build_orml
        return build_orml(_model_of(instance))

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_orml
        e = self.instance.extra
        return solve_orml(self.X, e["pairs"], e["relevant"], session=e["session"], method=method, **self.params,
                          **solver_options(tol, max_iter, max_iter_name=None, **options))

    def components(self, result) -> np.ndarray:
        """``U.T``: the directions of the pursuit rebuilt from the result's coefficients ``w``."""
        from cvxmetric.solvers.orml import pursuit_directions
        return pursuit_directions(self.model(), result.w).T.copy()


def _model_of(instance):
    """The :class:`cvxmetric.orml.ORMLModel` of an ORML instance (its judgements in ``extra``)."""
    from cvxmetric.orml import orml_model
    e = instance.extra
    return orml_model(instance.X, e["pairs"], e["relevant"], session=e["session"], **instance.params)
