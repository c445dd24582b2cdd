r"""ORML orthogonal pursuit (Liu, Hoi & Liu 2008, eqs. 18-21) by linear solves.

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

from cvxmetric._checks import check_positive
from cvxmetric.certificates import relative_gap
from cvxmetric.orml import ORMLModel, direction_problem, pursuit_basis

from .result import make_result

__all__ = ["solve_orml", "direction_bound", "ORML_TOL"]

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


def solve_orml(model: ORMLModel, *, tol: float = ORML_TOL):
    """Run the orthogonal pursuit on an :class:`cvxmetric.orml.ORMLModel`.

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
