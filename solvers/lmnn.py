r"""Fast LMNN (design §5.2): the projected subgradient engine, or PDHG on a working set.

.. math::
    \min_{M \succeq 0}\ \rho \sum_{(i, j) \in S} \langle M, C_{ij}\rangle
    + (1 - \rho) \sum_{(i, j, l) \in T} [\text{margin} + \langle M, C_{ij} - C_{il}\rangle]_+ ,

:math:`\rho` = ``regularization`` (metric-learn's meaning: the weight of the pull term).

The model is a :class:`~cvxmetric.models.HingeModel` (the "pull" linear term and weight
:math:`1 - \rho` on triplets); nothing here is a second engine.

* ``method="subgradient"``: :func:`cvxmetric.solvers.subgradient.projected_subgradient`. With
  ``impostors="search"`` (default) the triplet set is never materialised: the engine starts with
  no triplets and its constraint oracle (:func:`cvxmetric.lmnn.impostor_oracle`) adds every
  triplet violated at the current metric at each full re-check; the returned objective and
  ``info["model"]`` come from a search at the returned M (every triplet violated there).
  ``impostors="materialised"`` runs the engine on the full triplet set (small data). The working
  set holds per triplet its index row and a few scalars (margin, weight, coefficient, active flag),
  no d-vector and no d x d matrix: about 400 bytes per triplet whatever d. Measured as the peak
  of numpy's allocations (``tracemalloc``) over ``solve_lmnn(X, y, 3, method="subgradient",
  M0=coarse_start(X, y, 3), max_iter=40, tol=1e-2)`` divided by ``info["max_working_set"]``, on
  :func:`cvxmetric.generators.gaussian_classes` ``(n, d, 10, seed=0)``, one BLAS thread:
  20,000 x 50, 0.69 GB at a largest working set of 1.76e6 triplets, 393 bytes per triplet (the
  process's resident memory grew by 0.45 GB over the coarse start's); 2,000 points, d = 10, 50,
  100: 441, 408 and 418 bytes.
* ``method="pdhg"``: :func:`cvxmetric.solvers.working_set.solve_working_set`, restarted PDHG on a
  working set of triplets with full passes that add the triplets near or past the margin, drop
  long-inactive ones and certify the **full** problem (the lower bound is the full model's dual
  bound, on the span of the data's differences, so constant features such as digits' border
  pixels do not void it). ``impostors="search"``: the full set is LMNN's implicit triplet set,
  scanned by :class:`~cvxmetric.lmnn.ImpostorSearch` (:class:`~cvxmetric.solvers.working_set.ImpostorPool`);
  ``impostors="materialised"``: the rows of :func:`cvxmetric.lmnn.lmnn_model`
  (:class:`~cvxmetric.solvers.working_set.ModelPool`).

On many points (more than :data:`COARSE_MIN_POINTS`) the default start is the solution on a
class-stratified subsample (:func:`coarse_start`, recursively): from the Euclidean start the
first full passes meet a number of triplets near the margin that grows like n^2, near the optimum
about like n. The certificate is unchanged: the full objective comes from an exhaustive impostor
search at the returned M and the bound from the zero-padded multipliers, valid for the full
triplet set whatever the working set held. The working set's memory follows its triplets, not
the dimension: the restricted model applies K and K* through the points and a table of the
distinct pairs (:class:`cvxmetric.hinge.PairTable`; the cost model of :mod:`cvxmetric.hinge`
takes difference vectors only for fewer halves than about the number of points), and with PDHG's
vectors takes :data:`cvxmetric.lmnn.WORKING_SET_BYTES_PER_TRIPLET` bytes per triplet,
so :data:`cvxmetric.lmnn.MAX_WORKING_TRIPLETS` comes from a memory budget. Measured on
:func:`cvxmetric.generators.gaussian_classes` (``python -m benchmarks.lmnn_scale --sizes 20000 100000
--d 50 100 --cap 300``: tol 1e-2, one BLAS thread, CPU seconds end to end, peak resident memory
of the process, docs/benchmarks.md): 20,000 points (1.08e9 triplets), d = 50: certified gap
6.4e-3 after 32 PDHG iterations on the full data, 30.1 s, 0.88 GB; d = 100: gap 5.9e-3 after 32
iterations, 49.1 s, 1.43 GB. 100,000 points (2.7e10 triplets), d = 50: gap 5.4e-4 after 64
iterations, 311.7 s, 4.31 GB; d = 100: gap 1.9e-3 after 64 iterations, 646.9 s, 6.92 GB.

With ``whiten=True`` (default, both methods) the method runs in the coordinates where the pull
term is the trace (:class:`PullWhitening`): the same program, certificate and triplets, and the
result, the reported models and the callback's M are mapped back to the original coordinates
exactly. What changes is the geometry the method sees. For PDHG it no longer fights the pull
matrix's conditioning; for the subgradient engine (the same thesis algorithm, run on the whitened
data) it is what makes the certificate close: the ergodic multipliers are dual infeasible by
:math:`O(1/\sqrt T)` in Frobenius norm, and in the original coordinates that residual is large
next to the pull matrix's small eigenvalues, so the dual bound's repair costs most of the bound.
Measured on digits (``python -m benchmarks.lmnn_subgradient_whitening``: tol 1e-2, one BLAS
thread, one run): unwhitened, after 3,000 iterations (13 s) the best objective is 1479.8 but the
bound only 1349.9: the multipliers' :math:`\delta^\top \bar y` is 1488.8, yet they bend
:math:`R + K^*\bar y` negative by 120 % of R (:math:`\lambda_{\min}(L^{-1} U^\top (R + K^*\bar y) U
L^{-\top}) = -1.2`); the default ``step_scale`` does not change the picture (1472.8, bound 1380.1,
-0.65). Whitened, at the same step rule: certified at 1,300 iterations (4.4 s), objective 1461.4,
bound 1446.9 (-0.024); at the default step rule, 150 iterations (1.5 s).
"""
from __future__ import annotations


import dataclasses
import time
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from cvxmetric._checks import (as_data_matrix, as_labels, as_square_symmetric, check_bool, check_method_options,
                               keyword_options)
from cvxmetric.lmnn import (MAX_WORKING_TRIPLETS, ImpostorSearch, check_lmnn_params, impostor_oracle,
                            lmnn_model, lmnn_pull_model, lmnn_start)
from cvxmetric.certificates import ZERO_OPTIMUM_RTOL
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.linalg import symmetrize
from cvxmetric.models import HingeModel

from .result import ENGINE_HOOKS, SolverResult
from .subgradient import projected_subgradient
from .working_set import WORKING_SET_OPTIONS, WS_SLACK, ImpostorPool, ModelPool, solve_working_set

__all__ = ["solve_lmnn", "PullWhitening", "coarse_start", "stratified_subsample", "IMPOSTOR_MODES", "METHODS",
           "DEFAULT_METHOD", "PDHG_CHECK_EVERY", "PDHG_MAX_ADD", "COARSE_MIN_POINTS", "COARSE_FACTOR", "COARSE_TOL"]

#: How the triplet set is handled.
IMPOSTOR_MODES = ("search", "materialised")
#: The algorithms and the options each reads: the projected subgradient engine, or PDHG on a
#: working set (the loop's options and every PDHG round's).
METHODS = {
    "pdhg": (WORKING_SET_OPTIONS - {"M0"}) | {"whiten"},   # M0 is solve_lmnn's own parameter
    "subgradient": keyword_options(projected_subgradient, exclude=ENGINE_HOOKS | {"M0"}) | {"whiten"},
}
#: The default algorithm, of :func:`solve_lmnn` and of :class:`cvxmetric.problems.LMNN` (and so of the
#: estimator): PDHG. On separable data (30 blobs points, small optimum, many tight triplets) the
#: subgradient engine was measured to stop uncertified at its 20,000-iteration limit (3.8 s,
#: certified gap 3.6e-3) where PDHG certifies a 1.5e-7 gap in 0.07 s.
DEFAULT_METHOD = "pdhg"
#: PDHG's ``check_every`` in LMNN's working-set rounds (PDHG's own default is 16): each check
#: certifies, and while the bound is loose the certificate's repair (passes over W) costs more
#: than the iterations between checks. Measured on digits (tol 1e-2, one loaded run): 64 took
#: 52 s, 16 took 89 s, at the same certified gap.
PDHG_CHECK_EVERY = 64
#: ``max_add`` of LMNN's working-set loop (the loop's default,
#: :data:`cvxmetric.solvers.working_set.MAX_ADD`, is 2,000). Whitened (:class:`PullWhitening`),
#: the restricted optimum of a small first W lies less far out, and a larger first W and larger
#: additions save rounds: digits, tol 1e-2, one loaded run each: 2,000: 7 rounds, 128 PDHG
#: iterations, 3.7 s; 5,000: 5 rounds, 80 iterations, 2.0 s; 10,000: 2.1-2.5 s; 20,000: 2.3 s.
PDHG_MAX_ADD = 5000
#: Data with more points than this start (by default) from the solution on a subsample
#: (:func:`coarse_start`). At the identity start the number of triplets near the margin grows
#: like n^2 (every impostor within the unit-scale radius), while at the optimum it grows about
#: like n (measured on :func:`cvxmetric.generators.gaussian_classes`, d = 50: 53,408 violated
#: triplets at 2,000 points, 106,241 at 5,000), so the first passes from the identity dominate:
#: at 5,000 points they took 280 of 320 s (rounds 1-5, scans of millions of triplets). Near the
#: threshold the coarse start still pays (tol 1e-2, CPU seconds, one BLAS thread): 1,600 points
#: 3.8 s, 2 rounds against 4.9 s, 7 rounds from :func:`~cvxmetric.lmnn.lmnn_start`; 2,000 points
#: 10.5 s, 3 rounds against 14.2 s, 8 rounds.
COARSE_MIN_POINTS = 1500
#: A coarse level keeps one point in this many (per class).
COARSE_FACTOR = 4
#: The certified relative gap a coarse level is solved to: its M is only a start, and the next
#: level's optimum differs from it by more than this anyway (another sample).
COARSE_TOL = 5e-2


@dataclass(frozen=True)
class PullWhitening:
    r"""LMNN in the coordinates where its pull term is the trace: :math:`M = W M' W^\top`.

    With :math:`U` (d x r) the orthonormal basis of the data span of the pull model's certificate
    (:meth:`cvxmetric.models.HingeModel.span_basis`) and :math:`U^\top R U = LL^\top` (the pull
    matrix, positive definite on the span), :math:`W = U L^{-\top}` and :math:`V = UL`
    (:math:`W^\top V = I`). Every difference vector lies in the span, so with whitened data
    :math:`x' = W^\top x`

    .. math::
        \langle R, M\rangle = \mathrm{tr}\, M', \qquad
        (x_i - x_j)^\top M (x_i - x_j) = (x'_i - x'_j)^\top M' (x'_i - x'_j),
        \qquad M' = V^\top M V ,

    and :math:`M' \mapsto W M' W^\top` maps the r x r PSD cone onto the PSD matrices on the span
    (directions outside it change no term, and R vanishes there). LMNN over the whitened data with
    the *original* target neighbours is therefore the same program: same optimal value, same
    triplets (ids, margins, multipliers), objective values equal at corresponding points, and every
    lower bound of one is a lower bound of the other. What changes is the geometry PDHG sees: the
    linear term is the identity instead of a pull matrix whose eigenvalues spread over many orders
    (digits: the optimum has eigenvalues from 1e-3 to 1e3 in the original coordinates).
    """

    W: np.ndarray
    V: np.ndarray

    @classmethod
    def of(cls, pull: HingeModel) -> Optional["PullWhitening"]:
        """The whitening of an LMNN pull model, or None when its pull matrix is singular on the span."""
        U, R_U, L_inv = pull.span_basis()
        if L_inv is None or R_U.size == 0:
            return None
        U = np.eye(pull.d) if U is None else U
        return cls(W=U @ L_inv.T, V=U @ np.linalg.cholesky(R_U))

    def data(self, X: np.ndarray) -> np.ndarray:
        """Whitened data :math:`X W` (rows :math:`x'^\top`)."""
        return X @ self.W

    def to_white(self, M: np.ndarray) -> np.ndarray:
        """:math:`M' = V^\top M V` (PSD when M is)."""
        return symmetrize(self.V.T @ M @ self.V)

    def from_white(self, Mw: np.ndarray) -> np.ndarray:
        """:math:`M = W M' W^\top` (PSD when M' is)."""
        return symmetrize(self.W @ Mw @ self.W.T)


def stratified_subsample(y: np.ndarray, factor: int) -> np.ndarray:
    """Indices (sorted) of every ``factor``-th point of each class, in index order: one in
    ``factor`` points of every class (at least one), deterministic."""
    keep = [np.flatnonzero(y == c)[::factor] for c in np.unique(y)]
    return np.sort(np.concatenate(keep))


def coarse_start(X, y, n_neighbors: int = 3, *, regularization: float = 0.5, margin: float = 1.0,
                 direction=None) -> np.ndarray:
    r"""A start for LMNN on many points: the solution on a class-stratified subsample.

    The subsample keeps one point in :data:`COARSE_FACTOR` of every class
    (:func:`stratified_subsample`); its LMNN problem (its own target neighbours) is solved by
    ``method="pdhg"`` to the certified gap :data:`COARSE_TOL`, itself started by this rule while it
    has more than :data:`COARSE_MIN_POINTS` points, else from :func:`cvxmetric.lmnn.lmnn_start`
    (of ``direction``, a PSD matrix (d, d); default the Euclidean metric). LMNN's optimum depends on the sample mostly through its density, so the subsample's metric lies
    near the full one's: the first full pass meets about as many triplets near the margin as the
    optimum has, instead of the millions of the Euclidean start (see :data:`COARSE_MIN_POINTS`).
    Only the start changes; the program and its certificate do not. A ``direction`` (e.g. a
    metric-learn ``init``) enters at the smallest level only: started there from it, the levels
    above start from the level below, so the full problem starts near its optimum whatever the
    direction (a low-rank one, such as an LDA map, puts most impostors inside the margin: started
    from it on the full data, the first passes meet a number of triplets near the margin that grows
    like n^2).

    Returns
    -------
    ndarray, shape (d, d)
        A PSD matrix; :func:`cvxmetric.lmnn.lmnn_start` when the data has at most
        :data:`COARSE_MIN_POINTS` points.
    """
    X = as_data_matrix(X)
    y = as_labels(y, X.shape[0])
    if X.shape[0] <= COARSE_MIN_POINTS:
        search = ImpostorSearch(X, y, n_neighbors, margin=margin)
        return lmnn_start(X, search.target_pairs, margin, direction=direction)
    sub = stratified_subsample(y, COARSE_FACTOR)
    with warnings.catch_warnings():   # an uncertified coarse level is still a start
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_lmnn(X[sub], y[sub], n_neighbors, regularization=regularization, margin=margin,
                         method="pdhg", tol=COARSE_TOL, residual_tol=COARSE_TOL, start_direction=direction)
    return res.M


def _search_in(wh: Optional[PullWhitening], X, y, n_neighbors, margin, search: ImpostorSearch) -> ImpostorSearch:
    """The impostor search in the loop's coordinates: over the whitened data when ``wh`` is given,
    with the targets of the original data."""
    if wh is None:
        return search
    return ImpostorSearch(wh.data(X), y, n_neighbors, margin=margin, targets=search.targets,
                          chunk_elements=search.chunk_elements)


def _materialised_model(wh: Optional[PullWhitening], X, y, n_neighbors, regularization, margin,
                        search: ImpostorSearch) -> HingeModel:
    """The full triplet model in the loop's coordinates (whitened data when ``wh`` is given; the
    triplets stay those of the original data)."""
    full = lmnn_model(X, y, n_neighbors, regularization=regularization, margin=margin)
    return full if wh is None else lmnn_pull_model(wh.data(X), search.target_pairs, regularization,
                                                   full.constraints)


def _pdhg_pool(X, y, n_neighbors, regularization, margin, impostors, search, slack, max_triplets,
               wh: Optional[PullWhitening]):
    """The working-set pool of ``method="pdhg"``, in the loop's coordinates."""
    if impostors == "materialised":
        return ModelPool(_materialised_model(wh, X, y, n_neighbors, regularization, margin, search), slack)
    return ImpostorPool(_search_in(wh, X, y, n_neighbors, margin, search), regularization, slack,
                        max_triplets=max_triplets)


def _run_subgradient(X, y, n_neighbors, regularization, margin, impostors, search, max_triplets,
                     wh: Optional[PullWhitening], M0, options) -> SolverResult:
    """``method="subgradient"``, in the loop's coordinates: the engine on the materialised model,
    or on the pull model with the impostor oracle of the (whitened) search."""
    if impostors == "materialised":
        model = _materialised_model(wh, X, y, n_neighbors, regularization, margin, search)
        return projected_subgradient(model, M0=M0, solver_name="lmnn-subgradient", **options)
    Xc = X if wh is None else wh.data(X)
    model = lmnn_pull_model(Xc, search.target_pairs, regularization)
    oracle = impostor_oracle(_search_in(wh, X, y, n_neighbors, margin, search), regularization,
                             max_triplets=max_triplets)
    return projected_subgradient(model, M0=M0, oracle=oracle, solver_name="lmnn-subgradient", **options)


def _whitened_options(options: dict, wh: PullWhitening) -> dict:
    """The options of a whitened run: the caller's ``callback(it, M, f)`` sees M in its own coordinates."""
    user_callback = options.get("callback")
    if user_callback is None:
        return options
    return {**options, "callback": lambda it, Mw, f: user_callback(it, wh.from_white(Mw), f)}


def _unwhiten(res: SolverResult, wh: PullWhitening, pull: HingeModel) -> SolverResult:
    """A whitened run's result in the original coordinates: M, and every model it reports (the same
    rows and weights over the original data; the multipliers, bound and objective are unchanged)."""
    info = dict(res.info)
    for key in ("model", "certificate_model"):
        if key in info:
            info[key] = pull.extended(info[key].constraints, info[key].coef)
    info["whitened"] = True
    return dataclasses.replace(res, M=wh.from_white(res.M), info=info)


def solve_lmnn(X, y, n_neighbors: int = 3, *, regularization: float = 0.5, margin: float = 1.0,
               impostors: str = "search", method: str = DEFAULT_METHOD, M0=None, start_direction=None,
               max_triplets=None, whiten=None, **options) -> SolverResult:
    r"""Solve LMNN by projected subgradient or by PDHG on a working set (module docstring).

    Parameters
    ----------
    X : array_like, shape (n, d)
    y : array_like, shape (n,)
        Labels: at least two classes, some class with two or more points.
    n_neighbors : int
        Target neighbours per point (same class, Euclidean, fixed), capped at the point's class
        size minus one; a point alone in its class has none and acts only as an impostor.
    regularization : float
        Weight of the pull term, in (0, 1) (metric-learn's ``regularization``); the impostor hinge
        term has weight ``1 - regularization``.
    margin : float
        Triplet margin (> 0).
    impostors : {"search", "materialised"}
        The implicit triplet set, searched (any size), or the full triplet set (small data).
    method : {"pdhg", "subgradient"}
        PDHG on a working set (default, :data:`DEFAULT_METHOD`), or the projected subgradient engine
        (module docstring).
    M0 : array_like, shape (d, d), optional
        PSD start. Default: the Euclidean metric scaled to the data's units
        (:func:`cvxmetric.lmnn.lmnn_start`: a target neighbour at squared distance ``margin`` on
        average), so the solvers take the same path for X and s X; at M = 0 every triplet is
        violated. Above :data:`COARSE_MIN_POINTS` points the default is :func:`coarse_start` (the
        solution on a class-stratified subsample) and ``method="pdhg"``'s first working set holds
        every triplet near the margin there (``max_add`` default 0, no cap).
    start_direction : array_like, shape (d, d), optional
        A PSD direction for the default start instead of the Euclidean metric (with ``M0``: a
        ValueError): :func:`cvxmetric.lmnn.lmnn_start` of it, and above :data:`COARSE_MIN_POINTS`
        points the start of :func:`coarse_start`'s smallest level (``info["start"]`` is then
        ``"coarse_start"``). The estimator's metric-learn ``init`` arrives here.
    max_triplets : int, optional
        Bound on the working set of ``impostors="search"`` (default
        :data:`cvxmetric.lmnn.MAX_WORKING_TRIPLETS`); rejected with ``impostors="materialised"``.
    whiten : bool, optional
        Default True (both methods): run the method in the coordinates where the pull term is the
        trace (:class:`PullWhitening`; the same program and certificate; skipped when the pull
        matrix is singular on the data span). M, ``info["model"]``, ``info["certificate_model"]``
        and the callback's M are in the original coordinates. Measured on digits (tol 1e-2, one
        run each): PDHG 80 iterations instead of 1,712; the subgradient engine certifies in 150
        iterations where unwhitened it does not within 50,000 (module docstring).
    **options
        ``method="subgradient"``: passed to :func:`cvxmetric.solvers.subgradient.projected_subgradient`
        (``max_iter``, ``tol``, ``recheck_every``, ``callback``, ...). ``method="pdhg"``: passed to
        :func:`cvxmetric.solvers.working_set.solve_working_set` (``ws_slack``, default
        :data:`cvxmetric.solvers.working_set.WS_SLACK`; ``drop_after``, ``round_iter``,
        ``max_rounds``, ``max_add`` (default :data:`PDHG_MAX_ADD`), ``max_iter`` (total PDHG iterations), ``tol``,
        ``residual_tol``, ``time_limit``, ``callback(round, M, objective over all triplets)``)
        and the rest to every :func:`cvxmetric.solvers.pdhg.pdhg` call. An option of the other
        method is a ValueError.

    Returns
    -------
    SolverResult
        ``method="subgradient"``: ``solver == "lmnn-subgradient"``; ``info`` holds the engine's
        entries plus ``n_triplets`` (size of the full triplet set), ``impostors`` and, in search
        mode, ``working_set_size``, ``model`` (the pull model plus the triplets violated at M),
        ``oracle_calls``, ``max_working_set`` and ``violated_at_solution``, and
        ``whitened`` (whether the engine ran whitened). The models and M are in the original
        coordinates; the engine's step entries (``step0``) are those of the whitened run.
        ``method="pdhg"``: ``solver == "lmnn-pdhg"``, ``objective`` over *all* triplets, the
        certificate of the full problem (``lower_bound``, ``certified_gap``, ``measure ==
        "certified_gap"``), ``info`` as in :func:`~cvxmetric.solvers.working_set.solve_working_set`
        plus ``n_triplets``, ``impostors`` and ``whitened`` (whether the loop ran whitened).
        Both methods with ``impostors="search"``: ``working_set``, the triplets of ``info["model"]``.
        Both methods: ``start`` (``"given"``, ``"lmnn_start"`` or ``"coarse_start"``) and
        ``start_seconds`` (the seconds spent finding the start, counted in ``time``).

    Notes
    -----
    With target neighbours :math:`(i, j) \in S` (the ``n_neighbors`` nearest same-class points
    under the Euclidean metric) and the triplets :math:`(i, j, l)`, :math:`y_l \neq y_i`:

    .. math::
        \min_{M \succeq 0}\ \rho \sum_{(i,j) \in S} \langle M, C_{ij}\rangle
        + (1 - \rho) \sum_{(i,j) \in S,\ y_l \neq y_i}
        [\,\text{margin} + \langle M, C_{ij} - C_{il}\rangle\,]_+ ,

    with :math:`\rho` = ``regularization`` and :math:`C_{ij} = (x_i - x_j)(x_i - x_j)^\top`.
    """
    X = as_data_matrix(X)
    regularization, margin = check_lmnn_params(regularization, margin)
    if impostors not in IMPOSTOR_MODES:
        raise ValueError(f"impostors must be one of {IMPOSTOR_MODES}; got {impostors!r}")
    if whiten is not None:   # a method-specific parameter: checked only when given
        options["whiten"] = whiten
    method = check_method_options("solve_lmnn", method, options, METHODS)
    whiten = check_bool(options.pop("whiten", True), "whiten")
    if impostors == "materialised" and max_triplets is not None:
        raise ValueError("max_triplets bounds the searched working set; it does not apply to "
                         "impostors='materialised' (drop it)")
    max_triplets = MAX_WORKING_TRIPLETS if max_triplets is None else max_triplets
    d = X.shape[1]
    direction = _start_direction(start_direction, M0, d)
    search = ImpostorSearch(X, y, n_neighbors, margin=margin)
    coarse = M0 is None and X.shape[0] > COARSE_MIN_POINTS
    start, t_start = ("given" if M0 is not None else "coarse_start" if coarse else "lmnn_start"), time.perf_counter()
    if coarse:
        M0 = coarse_start(X, search.y, n_neighbors, regularization=regularization, margin=margin,
                          direction=direction)
        if method == "pdhg":
            # near the optimum, so the first W holds every triplet near the margin (a small first W
            # lets the restricted optimum collapse M: measured at 5,000 points, a first W of 5,000
            # triplets took the full objective to 6e2 times the optimum's, 3.4e7 against 5.3e4)
            options.setdefault("max_add", 0)
    elif M0 is None:
        M0 = lmnn_start(X, search.target_pairs, margin, direction=direction)
    else:
        M0 = as_square_symmetric(M0, "M0", d=d, psd=True)
    start_seconds = time.perf_counter() - t_start
    pull = lmnn_pull_model(X, search.target_pairs, regularization)
    wh = PullWhitening.of(pull) if whiten else None
    if wh is not None:
        options, M0 = _whitened_options(options, wh), wh.to_white(M0)
    if method == "pdhg":
        slack = options.pop("ws_slack", WS_SLACK)
        options.setdefault("check_every", PDHG_CHECK_EVERY)
        options.setdefault("max_add", PDHG_MAX_ADD)
        pool = _pdhg_pool(X, y, n_neighbors, regularization, margin, impostors, search, slack, max_triplets, wh)
        res = solve_working_set(pool, M0, solver_name="lmnn-pdhg", **options)
    else:
        res = _run_subgradient(X, y, n_neighbors, regularization, margin, impostors, search, max_triplets,
                               wh, M0, options)
    if wh is None:
        res.info["whitened"] = False
    else:
        res = _unwhiten(res, wh, pull)
    res.info.update({"n_triplets": search.n_triplets, "impostors": impostors, "start": start,
                     "start_seconds": start_seconds})
    res = dataclasses.replace(res, time=res.time + start_seconds)
    if impostors == "search":
        res = dataclasses.replace(res, working_set=res.info["model"].constraints)
    return _with_zero_optimum_note(res, (1.0 - regularization) * margin * search.n_triplets)


def _start_direction(start_direction, M0, d: int) -> Optional[np.ndarray]:
    """The checked ``start_direction`` of :func:`solve_lmnn` (None when not given)."""
    if start_direction is None:
        return None
    if M0 is not None:
        raise ValueError("give M0 (the start itself) or start_direction (the direction of the default start), "
                         "not both")
    return as_square_symmetric(start_direction, "start_direction", d=d, psd=True)


def _with_zero_optimum_note(res: SolverResult, reference: float) -> SolverResult:
    """``info["zero_optimum"]``, and the message says what a certified optimum of 0 means."""
    zero = (res.converged and res.lower_bound is not None and res.lower_bound <= 0.0
            and res.objective <= ZERO_OPTIMUM_RTOL * reference)
    res.info["zero_optimum"] = bool(zero)
    if not zero:
        return res
    note = ("the optimum is 0: every target pair can be collapsed and every impostor pushed beyond the margin "
            "(the training triplets are separable, as they typically are when n <= d); M is one of many optimal "
            "metrics, and a larger margin or more data gives a more informative one")
    return dataclasses.replace(res, message=f"{res.message}; {note}")
