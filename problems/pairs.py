"""ITML and MMC, problems on labelled pairs, as :class:`~cvxmetric.problems.Problem` objects."""
from __future__ import annotations

import numpy as np

from cvxmetric._checks import as_data_matrix, as_index_array
from cvxmetric.constraints import ConstraintSet
from cvxmetric.instances import Instance

from ._base import Problem, Run, instance_name, solver_options

__all__ = ["ITML", "MMC", "MMCDiagonal", "pair_split", "positive_pairs"]


def positive_pairs(labels, m: int) -> np.ndarray:
    """The pairs labelled +1 as a bool mask, from ``labels`` +1 / -1 (metric-learn's convention;
    booleans also taken)."""
    lab = np.asarray(labels)
    if lab.shape != (m,):
        raise ValueError(f"labels must have one entry per pair, shape ({m},); got {lab.shape}")
    if lab.dtype == bool:
        return lab.copy()
    if lab.dtype.kind in "iuf" and np.all(np.isin(lab, (-1, 1))):
        return lab == 1
    raise ValueError("labels must hold +1 (similar / relevant pair) or -1 (dissimilar / not relevant) for every "
                     f"pair; got the values {np.unique(lab)[:5].tolist()}")


def pair_split(X: np.ndarray, pairs, labels) -> tuple[np.ndarray, np.ndarray]:
    """``(S, D)``: the similar and dissimilar pairs of index ``pairs`` (m, 2) into ``X`` with
    ``labels`` +1 (similar) / -1 (dissimilar)."""
    idx = as_index_array(pairs, 2, "pairs", n=X.shape[0])
    similar = positive_pairs(labels, idx.shape[0])
    return idx[similar], idx[~similar]


def _bounds(bounds) -> tuple[float, float]:
    """``bounds = (u, l)`` validated: two finite numbers with ``0 < u < l``."""
    try:
        arr = np.array(bounds, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"bounds must be a pair of numbers (u, l); got {bounds!r}") from None
    if arr.shape != (2,):
        raise ValueError(f"bounds must be a pair (u, l) of bounds on squared distances; got shape {arr.shape}")
    u, l = float(arr[0]), float(arr[1])
    if not (np.all(np.isfinite(arr)) and 0.0 < u < l):
        raise ValueError(f"bounds must be finite with 0 < u < l (similar pairs closer than u, dissimilar pairs "
                         f"farther than l, in squared distance); got bounds=({u:.6g}, {l:.6g})")
    return u, l


class ITML(Problem):
    r"""Information-theoretic metric learning (Davis et al. 2007) on labelled pairs.

    Parameters
    ----------
    X : array_like, shape (n, d)
    pairs : array_like of int, shape (m, 2)
        Indices into ``X``.
    labels : array_like, shape (m,)
        +1 (similar) or -1 (dissimilar) per pair.
    bounds : (u, l), optional
        Bounds on **squared** distances; default their 5th/95th percentiles over the pairs.
    gamma : float
        Slack trade-off (> 0).
    prior : array (d, d), optional
        The prior metric :math:`M_0` (positive definite; default the identity).

    Notes
    -----
    .. math::
        \min_{M \succ 0, \xi}\ D_{ld}(M, M_0) + \gamma \sum_c \Big(\frac{\xi_c}{\xi^0_c}
        - \log\frac{\xi_c}{\xi^0_c} - 1\Big)
        \ \text{s.t.}\ D_M(p) \le \xi_c\ (p\ \text{similar}),\ D_M(p) \ge \xi_c\ (p\ \text{dissimilar}),

    :math:`\xi^0 = u` on similar and :math:`l` on dissimilar pairs. Algorithm: ``"bregman"``
    (cyclic Bregman projections, :func:`cvxmetric.solvers.solve_itml`).

    Attributes
    ----------
    bounds : (float, float)
        The bounds ``(u, l)`` of the problem (the given ones, or the default percentiles).
    """

    name = "itml"
    methods = ("bregman",)
    data_keys = ("X", "pairs", "labels")

    def __init__(self, X, pairs, labels, bounds=None, gamma=1.0, prior=None):
        from cvxmetric.itml import itml_model

        X = as_data_matrix(X, "X", min_rows=2)
        S, D = pair_split(X, pairs, labels)
        u, l = (None, None) if bounds is None else _bounds(bounds)
        # the problem as stated (default bounds computed, not passed): its checks, the scale check
        # of the solver's twin included, name only what the user passed
        model = itml_model(X, S, D, u=u, l=l, gamma=gamma, prior=prior)
        model.scaled_twin()
        cons = (ConstraintSet.from_pairs(S, similar=True, bound=model.u)
                + ConstraintSet.from_pairs(D, similar=False, bound=model.l))
        self.bounds = (float(model.u), float(model.l))
        params = {"gamma": gamma} if prior is None else {"gamma": gamma, "prior": np.asarray(prior, dtype=np.float64)}
        super().__init__(Instance("itml", instance_name("itml", X, cons, params), X, cons, params=params))

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_itml
        inst = self.instance
        opts = solver_options(tol, max_iter, **options)
        opts.setdefault("seed", random_state if random_state is not None else 0)
        return solve_itml(inst.X, inst.constraints, method=method, **inst.params, **opts)

    def _exact_fields(self, form, point):
        return {}, {"multipliers": form.model.multipliers(point)}

    def _build_formulation(self, instance):
        from cvxmetric.formulations.itml import build_itml
        return build_itml(instance.X, instance.constraints, **instance.params)


class MMC(Problem):
    r"""Mahalanobis metric for clustering (Xing et al. 2002) on labelled pairs.

    Parameters
    ----------
    X : array_like, shape (n, d)
    pairs : array_like of int, shape (m, 2)
        Indices into ``X``; at least one similar and one dissimilar pair.
    labels : array_like, shape (m,)
        +1 (similar) or -1 (dissimilar) per pair.

    Notes
    -----
    .. math::
        \min_{M \succeq 0}\ \sum_{S} D_M(p) \quad \text{s.t.}\quad \frac{1}{|D|}\sum_{D} \sqrt{D_M(p)} \ge 1

    (the dissimilar weights are :math:`1/|D|`: the *mean* dissimilar distance is 1 at the solution,
    which fixes MMC's scale). Algorithm: ``"ascent"`` (projected gradient ascent on the max form,
    :func:`cvxmetric.solvers.solve_mmc`). :meth:`check` rescales a point onto the constraint, MMC's
    solution being defined up to that scale.
    """

    name = "mmc"
    methods = ("ascent",)
    data_keys = ("X", "pairs", "labels")

    def __init__(self, X, pairs, labels):
        X = as_data_matrix(X, "X", min_rows=2)
        S, D = pair_split(X, pairs, labels)
        if len(S) == 0 or len(D) == 0:
            raise ValueError("MMC needs at least one similar and one dissimilar pair in labels")
        cons = (ConstraintSet.from_pairs(S, similar=True, bound=0.0)
                + ConstraintSet.from_pairs(D, similar=False, bound=0.0, weight=1.0 / len(D)))
        super().__init__(Instance("mmc", instance_name("mmc", X, cons), X, cons, params={}))

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_mmc
        return solve_mmc(self.X, self.constraints, method=method, **solver_options(tol, max_iter, **options))

    def runs(self):
        """The ascent in whitened coordinates (the default, ``"ascent"``) and in the original ones
        (``"ascent-raw"``, ``whiten=False``). Without the whitening preconditioner the ascent is
        slow on an ill-conditioned :math:`C_S` (wine, seed 2: certified gap 3e-5 after 5,000
        iterations), so that run asks for a tenth of the first-order gap threshold
        (``cvxmetric.verification.tolerances.GAP_FIRST_ORDER``), to which its row holds it."""
        from cvxmetric.verification.tolerances import GAP_FIRST_ORDER
        return (Run("ascent", "ascent"), Run("ascent-raw", "ascent", {"whiten": False, "tol": GAP_FIRST_ORDER / 10}))

    def _build_formulation(self, instance):
        from cvxmetric.formulations.mmc import build_mmc
        return build_mmc(instance.X, instance.constraints)


class MMCDiagonal(MMC):
    r"""MMC over diagonal metrics :math:`M = \operatorname{diag}(a)` (metric-learn's ``MMC(diagonal=True)``).

    Parameters
    ----------
    As :class:`MMC`.

    Notes
    -----
    .. math::
        \min_{a \ge 0}\ \sum_{S} D_{\operatorname{diag}(a)}(p) \quad \text{s.t.}\quad
        \frac{1}{|D|}\sum_{D} \sqrt{D_{\operatorname{diag}(a)}(p)} \ge 1 ,

    convex (a linear objective, a concave constraint function). Algorithm: ``"ascent"``
    (projected gradient ascent on the max form over the capped simplex,
    :func:`cvxmetric.solvers.solve_mmc_diagonal`), certified as the full MMC
    (:class:`cvxmetric.mmc.DiagonalMMCModel`). metric-learn's diagonal objective has the same
    minimiser up to a scale set by its ``diagonal_c``
    (:meth:`~cvxmetric.mmc.DiagonalMMCModel.metric_learn_scale`).
    """

    name = "mmc_diagonal"
    start_option = "a0"     # the start is the diagonal

    def __init__(self, X, pairs, labels):
        super().__init__(X, pairs, labels)
        inst = self.instance
        self.instance = Instance("mmc_diagonal", instance_name("mmc_diagonal", inst.X, inst.constraints), inst.X,
                                 inst.constraints, params={})

    def _run(self, method, tol, max_iter, random_state, options):
        from cvxmetric.solvers import solve_mmc_diagonal
        return solve_mmc_diagonal(self.X, self.constraints, method=method, **solver_options(tol, max_iter, **options))

    def runs(self):
        """The ascent at its defaults (``"ascent"``)."""
        return Problem.runs(self)

    def _build_formulation(self, instance):
        from cvxmetric.formulations.mmc import build_mmc_diagonal
        return build_mmc_diagonal(instance.X, instance.constraints)
