r"""ORML's orthogonal pursuit by linear solves.

Reference: Liu, Hoi & Liu 2008, eqs. 18-21.

For ``d = 1..r``: :math:`V^{(d)} = (I - QQ^T)[v_d..v_r]` (eq. 18; ``Q`` an orthonormal basis of
the previous directions, projected twice so that orthogonality holds to round-off), then the
normal equations of eq. 20, :math:`H b = c` with
:math:`H = V^{(d)T}(S + \gamma X_l^T X_l)V^{(d)} = G^T G`, :math:`c = G^T h`
(:func:`cvxmetric.orml.direction_problem`), solved by a Cholesky factorization
(``scipy.linalg.cho_factor``/``cho_solve``; never an explicit inverse), and
:math:`u_d = V^{(d)} b^*` (eq. 21).

Certificate
-----------
Each :math:`f_d(b) = \|Gb - h\|^2` is a least-squares problem: for any :math:`\nu` with
:math:`G^T\nu = 0`, weak duality gives :math:`f_d^* \ge -\|\nu\|^2/4 - h^T\nu`. With the
residual :math:`z = Gb - h`, :math:`\nu = 2\,\Pi z` (``Pi`` the projection onto
:math:`\ker G^T`, computed with ``lstsq``) is that dual point repaired to exact feasibility, so
:math:`\ell_d = -\|\Pi z\|^2 - 2 h^T \Pi z` is a lower bound, tight at the optimum
(:math:`G^T z^* = 0`). The result's objective is :math:`\sum_d f_d(b_d)` (eq. 17 at ``U``), its
lower bound :math:`\sum_d \ell_d` (``certified_gap`` is their relative gap), and its measure the
*largest per-direction* relative gap ``max_d relative_gap(f_d, l_d)`` (``info["direction_gaps"]``):
every direction is certified, not only their sum.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.linalg import cho_factor, cho_solve, lstsq

from cvxmetric._checks import check_method_options, check_positive, keyword_options
from cvxmetric.certificates import relative_gap
from cvxmetric.orml import ORMLModel, direction_problem, orml_model, pursuit_basis

from .result import SolverResult, make_result

__all__ = ["solve_orml", "orml_pursuit", "direction_bound", "ORML_TOL", "ORML_METHODS", "pursuit_directions"]

#: Certified relative gap required: each direction is solved exactly up to round-off (a Cholesky
#: solve leaves gaps of ~1e-15..1e-13 on well-conditioned directions).
ORML_TOL = 1e-10


def direction_bound(G: np.ndarray, h: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """``(f(b), lower bound)`` of ``||G b - h||^2`` from the repaired dual of the residual (module docstring)."""
    z = G @ b - h
    f = float(z @ z)
    coef = lstsq(G, z, lapack_driver="gelsd")[0]
    nu = z - G @ coef
    return f, float(-(nu @ nu) - 2.0 * (h @ nu))


def orml_pursuit(model: ORMLModel, *, tol: float = ORML_TOL) -> SolverResult:
    """Run the orthogonal pursuit on an :class:`cvxmetric.orml.ORMLModel` (the facade from data is
    :func:`solve_orml`).

    Returns
    -------
    SolverResult
        ``w``: the coefficients ``b_1, ..., b_r`` stacked (length r(r+1)/2, the point of
        :func:`cvxmetric.formulations.orml.build_orml`); ``info["U"]``: the directions (d, r);
        ``info["A"] = U U^T``; ``info["direction_values"]``, ``info["direction_lower"]``,
        ``info["direction_gaps"]``; ``multipliers``: the repaired duals stacked.

    Notes
    -----
    Direction ``d`` solves :math:`\\min_b \\|F V^{(d)} b\\|^2 + \\gamma \\|X_l V^{(d)} b - y^{(d)}\\|^2`
    (eq. 20) for the bases :math:`V^{(d)}` of eq. 18.
    """
    if not isinstance(model, ORMLModel):
        raise TypeError(f"model must be an ORMLModel (build it with cvxmetric.orml.orml_model); "
                        f"got {type(model).__name__}")
    tol = check_positive(tol, "tol")
    t0 = time.perf_counter()
    V = model.V
    r = model.r
    U = np.zeros((model.d, r))
    blocks, values, lowers = [], [], []
    for d in range(r):
        Vd = pursuit_basis(V, U[:, :d], d)
        G, h = direction_problem(model, Vd, d)
        H = G.T @ G
        c = G.T @ h
        b = cho_solve(cho_factor(0.5 * (H + H.T)), c)
        f, low = direction_bound(G, h, b)
        U[:, d] = Vd @ b
        blocks.append(b)
        values.append(f)
        lowers.append(low)
    w = np.concatenate(blocks)
    objective = float(np.sum(values))
    gaps = [relative_gap(f, lo) for f, lo in zip(values, lowers)]
    info = {"U": U, "A": U @ U.T, "direction_values": np.array(values), "direction_lower": np.array(lowers),
            "direction_gaps": np.array(gaps)}
    return make_result("orml-pursuit", objective=objective, measure="certified_gap", tol=tol,
                       stop_reason="not_certified", w=w, measure_value=max(gaps),
                       lower_bound=float(np.sum(lowers)), n_iter=r, time=time.perf_counter() - t0, info=info)



def pursuit_directions(model: ORMLModel, w) -> np.ndarray:
    r"""The directions ``U`` (d, r) of the pursuit whose stacked coefficients are ``w`` (a result's ``w``).

    Direction ``d`` is :math:`u_d = V^{(d)} b_d`, :math:`V^{(d)}` the basis of eq. 18 built from the
    directions before it and :math:`b_d` the next ``r - d`` entries of ``w``.
    """
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    U = np.zeros((model.d, model.r))
    start = 0
    for d in range(model.r):
        Vd = pursuit_basis(model.V, U[:, :d], d)
        stop = start + Vd.shape[1]
        if stop > w.size:
            raise ValueError(f"w has {w.size} entries; the pursuit's {model.r} directions need more")
        U[:, d] = Vd @ w[start:stop]
        start = stop
    if start != w.size:
        raise ValueError(f"w has {w.size} entries; the pursuit's {model.r} directions take {start}")
    return U

#: Algorithms of :func:`solve_orml` (one: the orthogonal pursuit) and their options.
ORML_METHODS = {"pursuit": keyword_options(orml_pursuit)}


def solve_orml(X, pairs, relevant, *, session=None, n_neighbors: int = 6, alpha: float = 1.0, beta: float = 2.0,
               output_weight: float = 9.0, r: int = 15, method: str = "pursuit", **options) -> SolverResult:
    r"""ORML (Liu, Hoi & Liu 2008) on data and log-session judgements, by the orthogonal pursuit.

    Builds the model with :func:`cvxmetric.orml.orml_model` and runs :func:`orml_pursuit`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row (centered internally, never modified).
    pairs, relevant, session
        The judgements: ``(query, image)`` index pairs, whether each image was judged relevant,
        and the session of each pair (:func:`cvxmetric.orml.as_judgements`).
    n_neighbors : int
        Size of the Euclidean neighbourhood graph of eq. 4 (the paper's k = 6; 0: none).
    alpha, beta : float
        Weights of similar and dissimilar pairs in eq. 4 (paper: 1, 2).
    output_weight : float
        Weight :math:`\gamma > 0` of the output loss (paper: 9).
    r : int
        Number of directions (the rank of :math:`A = U U^\top`), at most the rank of the centered data.
    method : {"pursuit"}
        The orthogonal pursuit of eqs. 18-21 (the one algorithm).
    **options
        ``tol``: the certified relative gap every direction must reach (default ``ORML_TOL``).
        Any other option is a ValueError.

    Returns
    -------
    SolverResult
        The result contract (``measure="certified_gap"``, ``lower_bound``, ``multipliers``); the
        point ``w`` (the coefficients of every direction), ``info["U"]`` (d, r) and
        ``info["A"] = U U^T``, the learned metric (see :func:`orml_pursuit`).

    Notes
    -----
    For :math:`d = 1, \dots, r`, with :math:`V^{(d)}` the PCA directions :math:`v_d, \dots, v_r`
    projected off :math:`u_1, \dots, u_{d-1}` (eq. 18):

    .. math::
        b_d = \arg\min_b\ \|F V^{(d)} b\|^2 + \gamma\,\|X_l V^{(d)} b - y^{(d)}\|^2 ,
        \qquad u_d = V^{(d)} b_d ,

    with :math:`F^\top F = S = X_c^\top (L + 2T) X_c` (eqs. 4-8), the log samples :math:`X_l`, the
    ideal output :math:`y^{(d)}` (eqs. 12-15) and :math:`\gamma` = ``output_weight``; the result's
    objective is :math:`\sum_d` of these minima (eq. 17 at :math:`U`).
    """
    method = check_method_options("solve_orml", method, options, ORML_METHODS)
    model = orml_model(X, pairs, relevant, session=session, n_neighbors=n_neighbors, alpha=alpha, beta=beta,
                       output_weight=output_weight, r=r)
    return orml_pursuit(model, **options)
