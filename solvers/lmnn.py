r"""Fast LMNN (DESIGN §5.2): the projected subgradient engine with impostors found on the fly.

.. math::
    \min_{M \succeq 0}\ (1 - \mu) \sum_{(i, j) \in S} \langle M, C_{ij}\rangle
    + \mu \sum_{(i, j, l) \in T} [\text{margin} + \langle M, C_{ij} - C_{il}\rangle]_+ .

The model is a :class:`~cvxmetric.models.HingeModel` (the "pull" linear term and weight
:math:`\mu` on triplets) and the solver is :func:`solvers.subgradient.projected_subgradient`;
nothing here is a second engine. With ``impostors="search"`` (default) the triplet set is never
materialised: the engine starts with no triplets and its constraint oracle
(:func:`cvxmetric.lmnn.impostor_oracle`) adds every triplet violated at the current metric at
each full re-check; the returned objective is certified on the whole implicit set (a search at
the returned M finds no violated triplet outside the working set: ``info["certified"]``).
``impostors="materialised"`` runs the engine on the full triplet set (small data).
"""
from __future__ import annotations

import numpy as np

from cvxmetric._checks import as_data_matrix, as_square_symmetric
from cvxmetric.lmnn import (MAX_WORKING_TRIPLETS, ImpostorSearch, check_lmnn_params, impostor_oracle,
                            lmnn_model, lmnn_pull_model)

from .result import SolverResult
from .subgradient import projected_subgradient

__all__ = ["solve_lmnn", "IMPOSTOR_MODES"]

#: How the triplet set is handled.
IMPOSTOR_MODES = ("search", "materialised")


def solve_lmnn(X, y, k: int = 3, *, mu: float = 0.5, margin: float = 1.0, impostors: str = "search",
               M0=None, max_triplets: int = MAX_WORKING_TRIPLETS, **options) -> SolverResult:
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
        On-the-fly impostor search (any size) or the full triplet set (small data).
    M0 : array_like, shape (d, d), optional
        PSD start (default: the identity, i.e. the Euclidean metric, where LMNN's target
        neighbours were chosen; at M = 0 every triplet is violated).
    max_triplets : int
        Bound on the working set of the search mode.
    **options
        Passed to :func:`solvers.subgradient.projected_subgradient` (``max_iter``, ``tol``,
        ``recheck_every``, ...).

    Returns
    -------
    SolverResult
        ``solver == "lmnn-subgradient"``; ``info`` holds the engine's entries plus
        ``n_triplets`` (size of the full triplet set), ``impostors`` and, in search mode,
        ``working_set_size``, ``certified`` and ``model`` (the grown model).
    """
    X = as_data_matrix(X)
    mu, margin = check_lmnn_params(mu, margin)
    if impostors not in IMPOSTOR_MODES:
        raise ValueError(f"impostors must be one of {IMPOSTOR_MODES}; got {impostors!r}")
    d = X.shape[1]
    M0 = np.eye(d) if M0 is None else as_square_symmetric(M0, "M0", d=d, psd=True)
    search = ImpostorSearch(X, y, k, margin=margin)
    if impostors == "materialised":
        model = lmnn_model(X, y, k, mu=mu, margin=margin)
        res = projected_subgradient(model, M0=M0, solver_name="lmnn-subgradient", **options)
    else:
        model = lmnn_pull_model(X, search.target_pairs, mu)
        oracle = impostor_oracle(search, mu, max_triplets=max_triplets)
        res = projected_subgradient(model, M0=M0, oracle=oracle, solver_name="lmnn-subgradient", **options)
    res.info.update({"n_triplets": search.n_triplets, "impostors": impostors})
    return res
