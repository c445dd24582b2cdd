r"""Fast LMNN (DESIGN §5.2): the projected subgradient engine with impostors found on the fly.

.. math::
    \min_{M \succeq 0}\ (1 - \mu) \sum_{(i, j) \in S} \langle M, C_{ij}\rangle
    + \mu \sum_{(i, j, l) \in T} [\text{margin} + \langle M, C_{ij} - C_{il}\rangle]_+ .

The model is a :class:`~cvxmetric.models.HingeModel` (the "pull" linear term and weight
:math:`\mu` on triplets) and the solver is :func:`cvxmetric.solvers.subgradient.projected_subgradient`;
nothing here is a second engine. With ``impostors="search"`` (default) the triplet set is never
materialised: the engine starts with no triplets and its constraint oracle
(:func:`cvxmetric.lmnn.impostor_oracle`) adds every triplet violated at the current metric at
each full re-check; the returned objective is certified on the whole implicit set (a search at
the returned M finds no violated triplet outside the working set: ``info["certified"]``).
``impostors="materialised"`` runs the engine on the full triplet set (small data).

``method="pdhg"`` is constraint generation around the restarted PDHG solver
(:func:`cvxmetric.solvers.pdhg.pdhg`): a working set :math:`W` of triplets (start: those violated, or
within ``ws_slack * margin`` of violation, at ``M0``) defines the restricted model (the same
pull term, hinge terms on :math:`W` only), PDHG solves it warm-started from the previous
:math:`(M, y)` (new multipliers start at 0), and :class:`~cvxmetric.lmnn.ImpostorSearch` at the
solution adds every triplet violated (or near-active) outside :math:`W`; the loop stops when no
triplet outside :math:`W` is violated. Then the restricted and the full objective agree at
:math:`M`, and since the restricted problem drops only non-negative terms its optimum is
:math:`\le p^*`: a certified lower bound of the last restricted problem is one of the full problem.
The result (``make_result``) has ``measure == "certified_gap"``: the relative gap between the
objective over *all* triplets and that bound (:meth:`cvxmetric.models.HingeModel.dual_bound`, on
the span of the data's differences, so constant features such as digits' border pixels do not
void it), held to ``certificate_tol``; converged also requires no violated triplet outside W.
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from cvxmetric._checks import as_data_matrix, as_square_symmetric, check_int_in_range
from cvxmetric.lmnn import (MAX_WORKING_TRIPLETS, ImpostorSearch, check_lmnn_params, impostor_oracle,
                            lmnn_model, lmnn_pull_model, too_many_triplets_message)

from cvxmetric.certificates import relative_gap
from cvxmetric.constraints import ConstraintSet
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.linalg import psd_factor

from .pdhg import DEFAULT_CERTIFICATE_TOL as PDHG_CERTIFICATE_TOL
from .pdhg import DEFAULT_TOL as PDHG_TOL
from .pdhg import pdhg
from .result import SolverResult, make_result
from .subgradient import projected_subgradient

__all__ = ["solve_lmnn", "IMPOSTOR_MODES", "METHODS", "WS_SLACK", "MAX_ROUNDS", "ROUND_ITER", "MAX_ADD"]

#: How the triplet set is handled.
IMPOSTOR_MODES = ("search", "materialised")
#: The algorithms: the projected subgradient engine, or constraint generation around PDHG.
METHODS = ("subgradient", "pdhg")
#: Constraint generation adds the triplets within ``WS_SLACK * margin`` of violation too (they
#: tend to become violated in the next round; adding them early saves rounds).
WS_SLACK = 0.1
#: Default cap on the triplets one round adds (the most violated first; at least |W|, so W may
#: double per round); 0 means no cap. Without a cap, the first round on digits (W = the 2,000
#: triplets violated at the identity; its restricted optimum has objective 82,885 over all
#: triplets) adds hundreds of thousands of triplets and one PDHG iteration takes seconds.
MAX_ADD = 2000
#: Limit on the constraint-generation rounds of ``method="pdhg"``.
MAX_ROUNDS = 50
#: PDHG iterations per round; the budget doubles after a round whose search found no violated
#: triplet outside W (then only the PDHG accuracy is missing). A round whose point has a larger
#: objective over all triplets than the best so far is rejected (its triplets are kept, the
#: next round restarts from the best point). Solving the first restricted problems exactly
#: was measured to be a trap on digits: the triplets violated at the identity are a small
#: fraction of those active at the optimum, the restricted optimum shrinks M far too much
#: (objective over all triplets 84,859 vs 3,812 at M = I) and the next working set is huge.
ROUND_ITER = 64
#: An empty start (no triplet violated or near-active at M0) is shrunk by halves until one is, at
#: most this many times (2^-200: any data scale a float can hold); a relative rule, so data scaled
#: by 1e4 start like the original data.
MAX_START_HALVINGS = 200


def solve_lmnn(X, y, k: int = 3, *, mu: float = 0.5, margin: float = 1.0, impostors: str = "search",
               method: str = "subgradient", M0=None, max_triplets: int = MAX_WORKING_TRIPLETS,
               **options) -> SolverResult:
    r"""Solve LMNN by projected subgradient, generating impostor triplets on the fly.

    Parameters
    ----------
    X : array_like, shape (n, d)
    y : array_like, shape (n,)
        Labels: at least two classes, each with more than ``k`` points.
    k : int
        Target neighbours per point (same class, Euclidean, fixed).
    mu : float
        Push weight in (0, 1) (pull weight ``1 - mu``; metric-learn's ``regularization`` is
        ``1 - mu``).
    margin : float
        Triplet margin (> 0).
    impostors : {"search", "materialised"}
        On-the-fly impostor search (any size) or the full triplet set (small data). Ignored by
        ``method="pdhg"`` (always a search).
    method : {"subgradient", "pdhg"}
        The projected subgradient engine, or constraint generation around PDHG (module
        docstring).
    M0 : array_like, shape (d, d), optional
        PSD start (default: the identity, i.e. the Euclidean metric, where LMNN's target
        neighbours were chosen; at M = 0 every triplet is violated).
    max_triplets : int
        Bound on the working set of the search mode.
    **options
        ``method="subgradient"``: passed to :func:`cvxmetric.solvers.subgradient.projected_subgradient`
        (``max_iter``, ``tol``, ``recheck_every``, ...). ``method="pdhg"``: ``ws_slack``
        (default ``WS_SLACK``), ``max_rounds`` (default ``MAX_ROUNDS``), ``round_iter`` (PDHG
        iterations per round, doubled after a round that found no violated triplet outside W;
        default ``ROUND_ITER``), ``max_add`` (cap on the triplets added per round, at least |W|;
        default ``MAX_ADD``, 0: no cap), ``callback``
        (``callback(round, M, objective over all triplets)`` after every round) and the rest
        passed to every :func:`cvxmetric.solvers.pdhg.pdhg` call (``tol``, ``max_iter`` per round, ...).

    Returns
    -------
    SolverResult
        ``solver == "lmnn-subgradient"``; ``info`` holds the engine's entries plus
        ``n_triplets`` (size of the full triplet set), ``impostors`` and, in search mode,
        ``working_set_size``, ``certified`` and ``model`` (the grown model).
        ``method="pdhg"``: ``solver == "lmnn-pdhg"``, ``objective`` over *all* triplets,
        ``n_iter`` the total PDHG iterations, ``history`` that objective after each round, and
        ``info`` with ``rounds``, ``working_set_sizes`` (per round), ``working_set_size``,
        ``violated_outside_working_set`` (0 when converged), ``violated_at_solution``,
        ``certified`` (no violated triplet outside W), ``lower_bound`` / ``certified_gap``
        (PDHG's certificate of the last restricted problem, valid for the full problem, or None),
        ``pdhg_iterations`` (per round), ``y``, ``model`` (the last restricted model),
        ``n_triplets``, ``impostors``.
    """
    X = as_data_matrix(X)
    mu, margin = check_lmnn_params(mu, margin)
    if impostors not in IMPOSTOR_MODES:
        raise ValueError(f"impostors must be one of {IMPOSTOR_MODES}; got {impostors!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    d = X.shape[1]
    M0 = np.eye(d) if M0 is None else as_square_symmetric(M0, "M0", d=d, psd=True)
    search = ImpostorSearch(X, y, k, margin=margin)
    if method == "pdhg":
        return _constraint_generation(search, mu, M0, max_triplets, **options)
    if impostors == "materialised":
        model = lmnn_model(X, y, k, mu=mu, margin=margin)
        res = projected_subgradient(model, M0=M0, solver_name="lmnn-subgradient", **options)
    else:
        model = lmnn_pull_model(X, search.target_pairs, mu)
        oracle = impostor_oracle(search, mu, max_triplets=max_triplets)
        res = projected_subgradient(model, M0=M0, oracle=oracle, solver_name="lmnn-subgradient", **options)
    res.info.update({"n_triplets": search.n_triplets, "impostors": impostors})
    return res


def _constraint_generation(search: ImpostorSearch, mu: float, M0: np.ndarray, max_triplets: int, *,
                           ws_slack: float = WS_SLACK, max_rounds: int = MAX_ROUNDS,
                           round_iter: int = ROUND_ITER, max_add: int = MAX_ADD, callback=None,
                           tol: float = PDHG_TOL, certificate_tol: float = PDHG_CERTIFICATE_TOL,
                           **pdhg_options) -> SolverResult:
    """``method="pdhg"`` of :func:`solve_lmnn`: PDHG on a growing working set (module docstring)."""
    if isinstance(ws_slack, bool) or not isinstance(ws_slack, (int, float, np.floating)) or not ws_slack >= 0:
        raise ValueError(f"ws_slack must be a non-negative number; got {ws_slack!r}")
    max_rounds = check_int_in_range(max_rounds, "max_rounds", 1, 10**6)
    max_add = check_int_in_range(max_add, "max_add", 0, 10**9)
    round_iter = check_int_in_range(round_iter, "round_iter", 1, 10**9)
    max_iter = check_int_in_range(pdhg_options.pop("max_iter", 100_000), "max_iter", 1, 10**9)
    t_start = time.perf_counter()
    margin = search.margin
    # the same targets, a wider margin: lists the triplets within ws_slack * margin of violation
    wide = search
    if ws_slack > 0:
        wide = ImpostorSearch(search.X, search.y, search.k, margin=margin * (1.0 + ws_slack),
                              chunk_elements=search.chunk_elements)

    def candidates(L):
        """Codes violated or near-active at M = L^T L, their wide margins, and the strictly violated codes."""
        codes, marg = wide.violated_codes(L, return_margins=True)
        strict = marg > margin * ws_slack
        return codes, marg, codes[strict]

    def grow(model, codes):
        if model.m + codes.size > max_triplets:
            raise RuntimeError(too_many_triplets_message(
                search, psd_factor(M), model.m + int(codes.size), max_triplets,
                "the working set (the triplets violated or near-active at the iterates so far) would grow too large"))
        cons = ConstraintSet.from_triplets(search.decode(codes), delta=margin, weight=mu)
        return model.extended(cons, np.full(codes.size, mu))

    model = lmnn_pull_model(search.X, search.target_pairs, mu)
    M = M0
    scale = 1.0
    for _ in range(MAX_START_HALVINGS):  # an empty start (nothing near-active at M0): shrink it until something is
        codes, _, _ = candidates(psd_factor(scale * M0))
        if codes.size:
            break
        scale *= 0.5
    ws_codes = codes
    model = grow(model, codes)
    y = np.zeros(model.m)
    history, sizes, iters = [], [], []
    n_iter, res, outside, converged = 0, None, None, False
    budget = round_iter
    best = (np.inf, M, y)
    for rnd in range(1, max_rounds + 1):
        sizes.append(int(model.m))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            # warm start: previous multipliers, step size and primal weight (no new power iteration)
            warm = {} if res is None else {"step_size": res.info["step_size"],
                                           "primal_weight": res.info["primal_weight"]}
            res = pdhg(model, M0=M, y0=y, tol=tol, certificate_tol=certificate_tol, max_iter=budget,
                       solver_name="lmnn-pdhg", warn=False, **{**warm, **pdhg_options})
        for w in caught:
            if not issubclass(w.category, ConvergenceWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        n_iter += res.n_iter
        iters.append(res.n_iter)
        M, y = res.M, res.info["y"]
        codes, marg, strict = candidates(psd_factor(M))
        out = ~np.isin(codes, ws_codes)
        new, marg = codes[out], marg[out]
        if max_add and new.size > max(max_add, model.m):   # the most violated first (see MAX_ADD)
            new = np.sort(new[np.argsort(-marg, kind="stable")[:max(max_add, model.m)]])
        outside = int(np.sum(~np.isin(strict, ws_codes)))
        # objective over all triplets = the restricted one plus the violated triplets outside W
        f_all = search.objective(M, mu)
        history.append(f_all)
        if callback is not None:
            callback(rnd, M, f_all)
        if outside == 0 and (res.converged or budget == max_iter):
            converged = res.converged
            break
        if f_all > best[0]:   # safeguard: a restricted optimum far outside W; back to the best point
            M, y = best[1], np.concatenate([best[2], np.zeros(model.m - best[2].size)])
        else:
            best = (f_all, M, y)
        if outside == 0:   # W is right at this point: solve it further before the next search
            budget = min(2 * budget, max_iter)
        ws_codes = np.concatenate([ws_codes, new])
        model = grow(model, new)
        y = np.concatenate([y, np.zeros(model.m - y.size)])
    objective = history[-1] if converged else search.objective(M, mu)   # M may be a reverted point
    # the restricted problem drops non-negative terms: its certified bound is one of the full problem
    lb = res.lower_bound
    violated_at = int(search.violated_codes(psd_factor(M)).size)
    if converged:
        stop_reason = "converged"
    elif outside:
        stop_reason = "max_iter"
    else:
        stop_reason = res.status if res.status != "converged" else "not_certified"
    measure, measure_value, measure_tol = "certified_gap", None, certificate_tol
    if res.measure == "kkt_residual":   # no dual bound for the restricted problem (see cvxmetric.solvers.pdhg)
        measure, measure_value, measure_tol = "kkt_residual", (res.measure_value if outside == 0 else np.inf), tol
    return make_result("lmnn-pdhg", objective=objective, measure=measure, tol=measure_tol,
                       stop_reason=stop_reason, M=M, measure_value=measure_value, lower_bound=lb,
                       multipliers=y, n_iter=n_iter, history=history, time=time.perf_counter() - t_start,
                       detail=(f"{len(iters)} rounds, {outside} violated triplets outside the working set, "
                               f"last PDHG: {res.message}"),
                       info={"rounds": len(iters), "working_set_sizes": sizes, "working_set_size": int(model.m),
                             "violated_outside_working_set": outside, "violated_at_solution": violated_at,
                             "certified": outside == 0, "lower_bound": lb,
                             "certified_gap": None if lb is None else relative_gap(objective, lb),
                             "pdhg_iterations": iters, "pdhg_stop_reason": res.info["stop_reason"],
                             "y": y, "model": model, "n_triplets": search.n_triplets, "impostors": "search"})
