r"""The BoostMetric facade: :func:`solve_boostmetric`, one entry over the loss and its algorithms.

Which algorithm applies depends on the loss (Shen et al. 2012):

* ``loss="hinge"`` (eq. 5, an SDP with :math:`\mathrm{tr}\,X = 1`): ``"column_generation"`` — LP column
  generation with a certified duality gap (:func:`cvxmetric.solvers.boostmetric_cg.boostmetric_hinge_cg`);
* ``loss="exp"`` (eq. 8) and ``loss="logistic"`` (eq. 19): ``"projected_gradient"`` (default;
  FISTA with backtracking and adaptive restart over the PSD cone, certified by the same bound,
  :func:`cvxmetric.solvers.boostmetric_gradient.boostmetric_projected_gradient`),
  ``"totally_corrective"`` (algorithm 4, converges to the certified optimum,
  :func:`cvxmetric.solvers.boostmetric_stagewise.boostmetric_totally_corrective`) or ``"stagewise"``
  (the paper's algorithm 3, never lowers a weight, so it stops short of the optimum by design and
  reports its honest certified gap, :func:`cvxmetric.solvers.boostmetric_stagewise.boostmetric_stagewise`).

Multi-pass BoostMetric (sec. 3.7) regenerates the triplets from labels and is therefore not a
method of this facade (which takes triplets): see
:func:`cvxmetric.solvers.boostmetric_stagewise.boostmetric_multipass`.
"""
from __future__ import annotations

from cvxmetric._checks import check_method_options, check_positive, keyword_options
from cvxmetric.boostmetric import LOSSES

from .boostmetric_cg import boostmetric_hinge_cg
from .boostmetric_gradient import boostmetric_projected_gradient
from .boostmetric_stagewise import boostmetric_stagewise, boostmetric_totally_corrective
from .result import SolverResult

__all__ = ["solve_boostmetric", "BOOSTMETRIC_METHODS", "LOSS_METHODS", "paper_nu", "weight_keyword"]

#: The algorithms of :func:`solve_boostmetric` and the options each reads (their signatures minus
#: the triplets, the loss and nu, which the facade passes).
BOOSTMETRIC_METHODS = {
    "column_generation": keyword_options(boostmetric_hinge_cg, exclude={"triplets", "nu"}),
    "totally_corrective": keyword_options(boostmetric_totally_corrective, exclude={"triplets", "loss", "nu"}),
    "stagewise": keyword_options(boostmetric_stagewise, exclude={"triplets", "loss", "nu"}),
    "projected_gradient": keyword_options(boostmetric_projected_gradient, exclude={"triplets", "loss", "nu"}),
}

#: The methods that apply to each loss, the default first.
#: exp / logistic default to "projected_gradient": measured with the estimator's defaults (one BLAS
#: thread; python -m benchmarks.defaults), 5-9x faster than "totally_corrective" on breast_cancer
#: (569 x 30, 5121 triplets: 0.4-1.0 s against 3.7-6.2 s) and 80-140x on digits (1797 x 64, 16173
#: triplets: 2.4-3.0 s against 234-331 s), and certified on wine and digits standardized x 1e3,
#: where the totally-corrective solver stops at certified gaps of 1.7e-3 and 1.3e-2; on
#: breast_cancer standardized x 1e3 (a negligible trace weight) both take about 5 s.
LOSS_METHODS = {"hinge": ("column_generation",), "exp": ("projected_gradient", "totally_corrective", "stagewise"),
                "logistic": ("projected_gradient", "totally_corrective", "stagewise")}


def paper_nu(loss: str, trace_weight=None, slack_weight=None) -> float:
    r"""The paper's :math:`\nu` of a loss from the facade's two weights (one meaning per name).

    ``trace_weight`` is the weight of :math:`\mathrm{tr}\,X` (exp, logistic), ``slack_weight`` the
    weight of the hinge SDP's slacks (its dual caps every triplet weight at it); each loss takes
    exactly its own.
    """
    if loss == "hinge":
        if trace_weight is not None:
            raise ValueError("loss='hinge' has no trace weight (its X has trace one): pass slack_weight, not "
                             "trace_weight")
        if slack_weight is None:
            raise ValueError("loss='hinge' needs slack_weight (the weight of the slacks, >= 1 / number of triplets)")
        return check_positive(slack_weight, "slack_weight")
    if slack_weight is not None:
        raise ValueError(f"loss={loss!r} has no slacks: pass trace_weight (the weight of tr X), not slack_weight")
    if trace_weight is None:
        raise ValueError(f"loss={loss!r} needs trace_weight (the weight of tr X; the paper uses 1e-7)")
    return check_positive(trace_weight, "trace_weight")


def weight_keyword(loss: str, nu: float) -> dict:
    """The facade keyword that carries the paper's ``nu`` for ``loss`` (the inverse of :func:`paper_nu`)."""
    return {"slack_weight" if loss == "hinge" else "trace_weight": nu}


def solve_boostmetric(X, triplets, *, loss: str = "exp", trace_weight: float | None = None,
                      slack_weight: float | None = None, method: str | None = None, **options) -> SolverResult:
    r"""BoostMetric (Shen et al. 2012) on triplets, by the algorithm that fits the loss.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row.
    triplets : ConstraintSet or array_like of int, shape (m, 3)
        Rows ``(i, j, k)``: ":math:`x_i` is closer to :math:`x_j` than to :math:`x_k`" (e.g.
        :func:`cvxmetric.generators.triplets_from_labels`).
    loss : {"exp", "logistic", "hinge"}
        The loss of the margins :math:`\rho_r = \langle A_r, X\rangle`.
    trace_weight : float
        exp and logistic (required there, rejected for the hinge): the weight :math:`\nu > 0` of
        :math:`\mathrm{tr}\,X` (the paper's :math:`\nu`; it uses 1e-7).
    slack_weight : float
        The hinge loss (required there, rejected otherwise): the weight :math:`\nu \ge 1/m` of the
        slacks of the trace-one SDP (the paper's :math:`\nu`; in the dual, the cap on every triplet
        weight).
    method : {"column_generation", "totally_corrective", "stagewise", "projected_gradient"}, optional
        Default per loss: ``"column_generation"`` for the hinge loss (its only method),
        ``"projected_gradient"`` (accelerated projected gradient over the PSD cone) for exp and
        logistic (``"totally_corrective"``: algorithm 4; ``"stagewise"``: the paper's algorithm 3).
        A method that does not apply to the loss is a ValueError.
    **options
        Options of the chosen algorithm (``tol``, ``max_iter``, ``eig``, ``n_columns``; column
        generation also ``smoothing``, ``slack``, ``warm`` and ``working_set``, totally corrective the ``lbfgs_*``
        settings and ``master``; projected gradient ``tol``, ``max_iter``, ``eig``). An option the method does not read is a ValueError.

    Returns
    -------
    SolverResult
        The result contract, ``measure="certified_gap"`` for every method: ``M`` = :math:`X`,
        ``w`` the weights of the rank-one base learners, ``lower_bound`` a certified bound
        (minimisation form; the hinge ``objective`` is :math:`-p(X)`).

    Notes
    -----
    With :math:`A_r = C_{ik} - C_{ij}` for triplet :math:`r = (i, j, k)`,
    :math:`\rho_r(X) = \langle A_r, X\rangle`, :math:`C_{ij} = (x_i - x_j)(x_i - x_j)^\top`:

    .. math::
        \text{exp:}\quad &\min_{X \succeq 0}\ \log \sum_r e^{-\rho_r(X)} + \nu\,\mathrm{tr}\,X
        \quad\text{(eq. 8)},\\
        \text{logistic:}\quad &\min_{X \succeq 0}\ \sum_r \log(1 + e^{-\rho_r(X)}) + \nu\,\mathrm{tr}\,X
        \quad\text{(eq. 19)},\\
        \text{hinge:}\quad &\min_{X \succeq 0,\ \mathrm{tr} X = 1,\ \rho,\ \xi \ge 0}\ -\rho + \nu \sum_r \xi_r
        \quad\text{s.t.}\quad \rho_r(X) \ge \rho - \xi_r \quad\text{(eq. 5, negated)}.

    Units: the exp and logistic problems are not invariant under :math:`X \to sX`. The margins
    scale by :math:`s^2` beside a fixed loss and a fixed :math:`\nu`, so data scaled by s with
    :math:`\nu` scaled by :math:`s^2` is the same problem (the point divided by :math:`s^2`), but at a
    fixed :math:`\nu` a small s makes :math:`X = 0` optimal (once :math:`\lambda_{\max}(\hat A(u(0))) \le \nu`)
    and a large s makes the trace weight negligible (the point grows, the loss tends to its
    infimum). The hinge problem (trace one) is invariant up to the factor :math:`s^2` on its value.
    """
    if not isinstance(loss, str) or loss not in LOSSES:
        raise ValueError(f"solve_boostmetric: loss must be one of {LOSSES}; got {loss!r}")
    nu = paper_nu(loss, trace_weight, slack_weight)
    applicable = LOSS_METHODS[loss]
    if method is None:
        method = applicable[0]
    elif isinstance(method, str) and method in BOOSTMETRIC_METHODS and method not in applicable:
        raise ValueError(f"solve_boostmetric: method={method!r} does not apply to loss={loss!r}; "
                         f"the methods for it are {applicable}")
    method = check_method_options("solve_boostmetric", method, options,
                                  {m: BOOSTMETRIC_METHODS[m] for m in applicable})
    if method == "column_generation":
        return boostmetric_hinge_cg(X, triplets, nu, **options)
    solver = {"totally_corrective": boostmetric_totally_corrective, "stagewise": boostmetric_stagewise,
              "projected_gradient": boostmetric_projected_gradient}[method]
    return solver(X, triplets, loss=loss, nu=nu, **options)
