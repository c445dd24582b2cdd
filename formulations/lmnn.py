r"""LMNN in cvxpy: the pull term and the triplet hinge over the target neighbours and impostors.

Reference: Weinberger & Saul 2009; thesis eq. 1.5; design §5.2.

.. math::
    \min_{M \succeq 0, \xi}\ \rho \sum_{(i, j) \in S} \langle M, C_{ij}\rangle + (1 - \rho) \sum_{t \in T} \xi_t
    \quad\text{s.t.}\quad \xi_t \ge \text{margin} + \langle M, C_{ij} - C_{il}\rangle,\ \xi_t \ge 0 ,

:math:`\rho` = ``regularization`` (the weight of the pull term, metric-learn's meaning),
:math:`S` = the ``n_neighbors`` same-class Euclidean nearest neighbours of every point (fixed;
capped at the point's class size minus one, :func:`cvxmetric.generators.target_neighbors`),
:math:`T` = every :math:`(i, j, l)` with :math:`(i, j) \in S` and :math:`y_l \ne y_i`.
:math:`\rho = 1/2` is the thesis' eq. 1.5 up to a factor 2. The full triplet set is materialised, so this is for small
data (the instances keep :math:`|T| \le 2000`). The statement is
:func:`cvxmetric.formulations.hinge.build_hinge_problem` of :func:`cvxmetric.lmnn.lmnn_model`, the same
model the fast solver reads.
"""
from __future__ import annotations

from cvxmetric.lmnn import lmnn_model

from .base import Formulation
from .hinge import build_hinge_problem

__all__ = ["build_lmnn"]


def build_lmnn(X, y, n_neighbors: int = 3, *, regularization: float = 0.5, margin: float = 1.0) -> Formulation:
    """The LMNN problem with named constraints and a closed-form ``value_at``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    y : array_like, shape (n,)
    n_neighbors : int
        Target neighbours per point.
    regularization : float
        Weight of the pull term, in (0, 1); the impostor hinge term has weight ``1 - regularization``.
    margin : float
        Triplet margin (> 0).

    Returns
    -------
    Formulation
        Variables ``M`` (d, d) and ``xi`` (|T|,); constraints ``psd``, ``hinge`` (one per
        triplet, in :func:`cvxmetric.generators.lmnn_constraints` order), ``slack_nonneg``.
        ``value_at(M)`` is the LMNN objective with the slacks at their closed-form optimum
        ``xi = [margin + <M, C_ij - C_il>]_+``.
    """
    return build_hinge_problem(lmnn_model(X, y, n_neighbors, regularization=regularization, margin=margin), method="lmnn")
