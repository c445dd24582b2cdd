"""BoostMetric (Shen et al. 2012) as a :class:`~cvxmetric.problems.Problem`."""
from __future__ import annotations

from cvxmetric._checks import as_data_matrix, as_labels
from cvxmetric.boostmetric import LOSSES
from cvxmetric.instances import Instance

from ._base import Problem, Run, instance_name, solver_options

__all__ = ["BoostMetric"]


class BoostMetric(Problem):
    r"""BoostMetric on local triplets drawn from class labels.

    Parameters
    ----------
    X : array_like, shape (n, d)
    y : array_like, shape (n,)
        Class labels.
    loss : {"exp", "logistic", "hinge"}
    trace_weight : float, optional
        exp and logistic: the weight :math:`\nu` of :math:`\mathrm{tr}\,M` (default
        :data:`cvxmetric.instances.boostmetric.DEFAULT_NU`); rejected for the hinge.
    slack_weight : float, optional
        The hinge: the weight :math:`\nu \ge 1/m` of the slacks (default ``1 / round(HINGE_TAIL * m)``);
        rejected for exp and logistic.
    n_neighbors, n_impostors : int
        Same-class targets and other-class impostors per point
        (:func:`cvxmetric.generators.triplets_from_labels`).

    Notes
    -----
    Over the triplets :math:`(i, j, l)` with margins :math:`\rho_r = \langle M, C_{il} - C_{ij}\rangle`:
    exp :math:`\min_{M \succeq 0} \log\sum_r e^{-\rho_r} + \nu\,\mathrm{tr}\,M`, logistic
    :math:`\sum_r \log(1 + e^{-\rho_r}) + \nu\,\mathrm{tr}\,M`, hinge the soft-margin LP over
    :math:`\mathrm{tr}\,M = 1` (:mod:`cvxmetric.boostmetric`). Algorithms per loss
    (:data:`cvxmetric.solvers.boostmetric.LOSS_METHODS`, the default first).
    """

    name = "boostmetric"
    methods = ("projected_gradient", "totally_corrective", "column_generation", "stagewise")
    data_keys = ("X", "y")

    def __init__(self, X, y, loss="logistic", trace_weight=None, slack_weight=None, n_neighbors=3, n_impostors=3):
        from cvxmetric.generators import triplets_from_labels
        from cvxmetric.instances.boostmetric import DEFAULT_NU, HINGE_TAIL
        from cvxmetric.solvers.boostmetric import paper_nu

        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}; got {loss!r}")
        X = as_data_matrix(X, "X", min_rows=2)
        y = as_labels(y, X.shape[0], "y")
        triplets = triplets_from_labels(X, y, n_neighbors=n_neighbors, n_impostors=n_impostors)
        if loss == "hinge" and slack_weight is None and trace_weight is None:
            slack_weight = 1.0 / max(1, int(round(HINGE_TAIL * len(triplets))))
        elif loss != "hinge" and trace_weight is None and slack_weight is None:
            trace_weight = DEFAULT_NU[loss]
        # the instance keeps the paper's nu (the harness' name); the facade takes it by its meaning
        params = {"loss": loss, "nu": paper_nu(loss, trace_weight, slack_weight)}
        super().__init__(Instance("boostmetric", instance_name("boostmetric", X, triplets, params), X, triplets,
                                  params=params, y=y))

    @property
    def label(self) -> str:
        """``"boostmetric-<loss>"``: the loss names the harness' rows."""
        return f"{self.name}-{self.params['loss']}"

    def runs(self):
        """The harness' runs of the loss' algorithms: column generation (``"cg"``, hinge), the
        totally-corrective solver with 3 columns a round and at most 1,000 rounds (``"tc"``), the
        stage-wise algorithm 3 with at most 2,000 stages held to its own certified gap
        (``"stagewise"``, ``tol = GAP_BOOSTMETRIC_STAGEWISE`` of
        :mod:`cvxmetric.verification.tolerances`: it is not optimal by design), and the accelerated
        projected gradient (``"fista"``)."""
        from cvxmetric.verification.tolerances import GAP_BOOSTMETRIC_STAGEWISE
        runs = (Run("cg", "column_generation"),
                Run("tc", "totally_corrective", {"n_columns": 3, "max_iter": 1000}),
                Run("stagewise", "stagewise", {"max_iter": 2000, "tol": GAP_BOOSTMETRIC_STAGEWISE}),
                Run("fista", "projected_gradient"))
        return tuple(run for run in runs if run.method in self.available_methods())

    def _build_formulation(self, instance):
        from cvxmetric.formulations.boostmetric import build_boostmetric
        return build_boostmetric(instance.X, instance.constraints, **instance.params)

    def available_methods(self) -> tuple:
        from cvxmetric.solvers.boostmetric import LOSS_METHODS
        return tuple(LOSS_METHODS[self.params["loss"]])

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_boostmetric
        from cvxmetric.solvers.boostmetric import weight_keyword
        loss, nu = self.params["loss"], self.params["nu"]
        return solve_boostmetric(self.X, self.constraints, loss=loss, method=method, **weight_keyword(loss, nu),
                                 **solver_options(tol, max_iter, **options))
