r"""ORML in cvxpy: every direction's least-squares problem.

Reference: Liu, Hoi & Liu 2008, eq. 20; design §5.7.

The full ORML problem (eqs. 9-10, :math:`U^T U = \Sigma`) is non-convex; the ground truth is the
sequence of per-direction problems of the orthogonal pursuit. For the bases
:math:`V^{(1)}, \dots, V^{(r)}` of eq. 18 along the exact pursuit
(:func:`cvxmetric.orml.pursuit_bases`, from ``lstsq`` solves independent of the fast solver's
Cholesky), direction ``d`` is

.. math::

    \min_{b_d}\ f_d(b_d) = \|F V^{(d)} b_d\|^2 + \gamma\,\|X_l V^{(d)} b_d - y^{(d)}\|^2
    = \|G_d b_d - h_d\|^2

(project convention: rows are points, ``S = F^T F = Xc^T M Xc``; see :mod:`cvxmetric.orml`).
The blocks are independent, so they are stated as one problem in the stacked point
``w = (b_1, ..., b_r)`` (length r(r+1)/2): its optimum is the sum of the directions' optima and
its minimiser is every direction's minimiser. With the residual as its own variable:

.. math::

    \min_{w, z}\ \|z\|^2 \quad \text{s.t.}\quad z = G w - h \qquad (\text{"residual"}),

``G = blockdiag(G_d)``.

Certification hooks (:mod:`cvxmetric.formulations.ladder`):

* ``make_feasible``: the identity (no constraint on ``w``).
* ``dual_bound``: for any :math:`\nu` with :math:`G^T\nu = 0` the Lagrangian dual function is
  :math:`g(\nu) = -\|\nu\|^2/4 - h^T\nu` (weak duality), and it separates by block. The duals of
  "residual" are repaired to exact dual feasibility per block by projecting onto
  :math:`\ker G_d^T` (``lstsq``); both signs are valid dual points (cvxpy's sign convention of an
  equality dual does not matter), and the larger bound of each block is kept. At the optimum
  :math:`\nu = \pm 2 z^*` and the bound is tight.
* ``normalize``: ``G`` and ``h`` multiplied by the power of 2 nearest to :math:`1/\|h\|`
  (exact): the same point, ``value_scale`` its inverse square.

``info["blocks"]`` holds each direction's slice of ``w``; ``info["G"]``, ``info["h"]`` the
per-direction data, so :func:`direction_values` scores any ``w`` direction by direction.
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from scipy.linalg import lstsq

from cvxmetric.linalg import power_of_two
from cvxmetric.orml import ORMLModel, direction_problem, pursuit_bases

from .base import Formulation, Normalization

__all__ = ["build_orml", "direction_values", "direction_dual_bounds"]


def direction_values(form: Formulation, w) -> np.ndarray:
    r""":math:`f_d(b_d)` for every direction of a stacked point ``w`` (numpy)."""
    w = np.asarray(w, dtype=np.float64)
    return np.array([float(np.sum((G @ w[s] - h) ** 2))
                     for G, h, s in zip(form.info["G"], form.info["h"], form.info["blocks"])])


def direction_dual_bounds(form: Formulation, nu) -> np.ndarray:
    """Per-direction certified lower bounds from a residual dual ``nu`` (module docstring)."""
    nu = np.asarray(nu, dtype=np.float64).reshape(-1)
    out = []
    for G, h, s in zip(form.info["G"], form.info["h"], form.info["rows"]):
        v = nu[s]
        v = v - G @ lstsq(G, v, lapack_driver="gelsd")[0]
        out.append(max(-(v @ v) / 4.0 - h @ v, -(v @ v) / 4.0 + h @ v))
    return np.array(out)


def _build(Gs, hs, method: str, model, *, scale: float = 1.0) -> Formulation:
    Gs = [scale * G for G in Gs]
    hs = [scale * h for h in hs]
    sizes = [G.shape[1] for G in Gs]
    nrows = [G.shape[0] for G in Gs]
    cols = np.cumsum([0] + sizes)
    rows = np.cumsum([0] + nrows)
    blocks = [slice(int(a), int(b)) for a, b in zip(cols[:-1], cols[1:])]
    row_blocks = [slice(int(a), int(b)) for a, b in zip(rows[:-1], rows[1:])]
    G = sp.block_diag(Gs, format="csr")
    h = np.concatenate(hs)
    w = cp.Variable(int(cols[-1]), name="w")
    z = cp.Variable(int(rows[-1]), name="z")
    cons = {"residual": z == G @ w - h}
    problem = cp.Problem(cp.Minimize(cp.sum_squares(z)), list(cons.values()))
    wp = cp.Parameter(int(cols[-1]), name="w_eval")
    f_expr = cp.sum_squares(G @ wp - h)

    def evaluate(point) -> float:
        point = np.asarray(point, dtype=np.float64).reshape(-1)
        if point.shape != (int(cols[-1]),) or not np.all(np.isfinite(point)):
            raise ValueError(f"w must be a finite vector of length {int(cols[-1])} (the stacked b_1..b_r); "
                             f"got shape {point.shape}")
        wp.value = point
        return float(f_expr.value)

    form = Formulation(method=method, problem=problem, variables={"w": w, "z": z}, constraints=cons,
                       point_name="w", evaluate=evaluate, model=model,
                       info={"G": Gs, "h": hs, "blocks": blocks, "rows": row_blocks},
                       make_feasible=lambda p: np.asarray(p, dtype=np.float64))

    def dual_bound(solution) -> float | None:
        nu = solution.duals.get("residual")
        if nu is None or not np.all(np.isfinite(nu)):
            return None
        return float(np.sum(direction_dual_bounds(form, nu)))

    form.dual_bound = dual_bound
    return form


def build_orml(model: ORMLModel) -> Formulation:
    """The per-direction problems of eq. 20, stacked (see the module docstring).

    Parameters
    ----------
    model : cvxmetric.orml.ORMLModel

    Returns
    -------
    Formulation
        Point ``w`` (the stacked ``b_1..b_r``), auxiliary ``z``, constraint ``residual``; hooks
        ``dual_bound``, ``make_feasible``, ``normalize`` as in the module docstring.
    """
    bases = pursuit_bases(model)
    Gs, hs = zip(*(direction_problem(model, Vd, d) for d, Vd in enumerate(bases)))
    form = _build(list(Gs), list(hs), "orml", model)
    form.info["bases"] = bases
    c = float(power_of_two(1.0 / max(float(np.linalg.norm(np.concatenate(hs))), np.finfo(float).tiny)))

    def normalize() -> Normalization:
        twin = _build(list(Gs), list(hs), "orml", model, scale=c)
        return Normalization(formulation=twin, point_back=lambda p: np.asarray(p, dtype=np.float64),
                             value_scale=1.0 / (c * c), description=f"G and h x {c:.3g}")

    form.normalize = normalize
    return form
