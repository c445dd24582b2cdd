r"""Projected subgradient on the Fantope-regularized objective (DC, not convex).

Reference: thesis alg. 2.

.. math:: \min_{M \succeq 0}\ \varphi(M) = \mu R(M) + \gamma\,\mathrm{tr}\,M + \ell(M).

Each iteration steps along :math:`\gamma I + \mu W(M^n) + G_{\text{hinge}}(M^n)` (thesis eq. 3.8 with the
trace term) and projects onto :math:`\mathbb{S}^d_+`. :math:`W(M^n)` — a supergradient of :math:`R`, the
gradient when the eigengap is positive — is read from the eigendecomposition the projection
already computed (:meth:`cvxmetric.fantope.FantopeModel.extra_term`), so the Fantope term costs no
extra ``eigh``. The engine is :func:`cvxmetric.solvers.subgradient.projected_subgradient` (incremental
subgradient, active set, epoch steps, best point kept).

Optimality measure (``measure="kkt_residual"``)
-----------------------------------------------
On this non-convex objective no certificate of a global minimum exists; the result certifies a
**critical point** of the DC program instead, by the *majorizer gap*. For :math:`W \in \mathbb{F}_k`
let :math:`\hat\varphi(\cdot; W) = \mu\langle W, \cdot\rangle + \gamma\,\mathrm{tr} + \ell \ge \varphi`
(Ky Fan) and :math:`L_W \le \min_{M' \succeq 0} \hat\varphi(M'; W)` its hinge dual bound
(:meth:`cvxmetric.models.HingeModel.dual_bound`, multipliers repaired to exact dual feasibility).
Then

.. math::
    \rho(M; W) = \frac{\hat\varphi(M; W) - L_W}{\max(|\hat\varphi(M; W)|, |L_W|)} \ \ge 0,

and :math:`\hat\varphi(M; W) - L_W = \mu(\langle W, M\rangle - R(M)) + (\varphi(M) - L_W)`, a sum of
two non-negative terms up to the second's slack: :math:`\rho(M; W) = 0` iff :math:`W \in \partial R(M)`
(:math:`\langle W, M\rangle = R(M)`) **and** :math:`M` minimises :math:`\hat\varphi(\cdot; W)`, i.e.
:math:`0 \in \gamma I + \mu W + \partial\ell(M) + N_{\mathbb{S}_+}(M)` for a supergradient :math:`W` of
:math:`R` at :math:`M` — the critical-point condition of the DC program (with a zero eigengap any
:math:`W` of the superdifferential face qualifies). The measure of a point is
:math:`\min \rho(M; W)` over two candidates: :math:`W(M)` (for which :math:`\rho` is the MM
fixed-point gap of :mod:`cvxmetric.solvers.fantope_mm`: the decrease one exact MM step could still
achieve, relative) and :math:`\bar W`, the engine's ergodic average of the supergradients it
stepped along, with the ergodic hinge multipliers :math:`\bar y` of the same iterations (the
engine's identity :math:`\gamma I + \mu\bar W + K^*\bar y \succeq -O(1/\sqrt T)` makes this pair
nearly dual feasible; :math:`\bar W \in \mathbb{F}_k` as an average of projectors). It is invariant
under every scaling of the weights and the data, and computed apart from the stopping
heuristics (a dual bound of a convex problem and a closed-form eigenvalue sum).
"""
from __future__ import annotations

import math

import numpy as np

from cvxmetric.certificates import relative_gap
from cvxmetric.fantope import FantopeModel, fantope_terms_from_eig, fantope_violation
from cvxmetric.linalg import symmetrize
from cvxmetric.tolerances import FANTOPE_TOL

from .result import SolverResult
from .subgradient import projected_subgradient

__all__ = ["fantope_subgradient", "majorizer_residual", "stationarity_hook"]


def majorizer_residual(model: FantopeModel, M, W, y) -> float:
    r""":math:`\rho(M; W)` at hinge multipliers ``y`` (module docstring; ``inf`` without a bound)."""
    bound = model.bound(W)
    lower = bound.dual_bound(y)
    return math.inf if lower is None else relative_gap(bound.value(M), lower)


def stationarity_hook(model: FantopeModel):
    r"""The engine's ``stationarity`` hook: :math:`\min(\rho(M; W(M)), \rho(M; \bar W))` (module docstring)."""
    def residual(base, y, ebar, M, lam, V) -> float:
        rho = majorizer_residual(model, M, fantope_terms_from_eig(lam, V, model.k)[1], y)
        if model.reg_weight > 0 and ebar is not None and np.ndim(ebar) == 2:
            W_bar = symmetrize(np.asarray(ebar) / model.reg_weight)
            if fantope_violation(W_bar, model.k) <= FANTOPE_TOL:
                rho = min(rho, majorizer_residual(model, M, W_bar, y))
        return rho
    return residual


def fantope_subgradient(model: FantopeModel, *, M0=None, **options) -> SolverResult:
    r"""Minimise :math:`\varphi` by thesis alg. 2.

    Parameters
    ----------
    model : FantopeModel
    M0 : array_like, shape (d, d), optional
        PSD start (default 0; there :math:`W(0)` is LAPACK's arbitrary projector, a valid
        supergradient since every projector is one at 0).
    **options
        Passed to :func:`cvxmetric.solvers.subgradient.projected_subgradient` (``max_iter``, ``tol`` — the
        tolerance of the majorizer gap :math:`\rho` —, ``time_limit``, ...).

    Returns
    -------
    SolverResult
        ``objective`` = :math:`\varphi(M)` (numpy: ``model.value``), ``measure = "kkt_residual"``
        with ``measure_value`` = :math:`\min_W \rho(M; W)` (module docstring), ``lower_bound``
        None (no bound on the global minimum), ``multipliers`` the hinge multipliers of that
        residual, ``history`` = :math:`\varphi` per iteration (over the
        working set between full checks), ``info["k"]``.
    """
    if not isinstance(model, FantopeModel):
        raise TypeError(f"model must be a FantopeModel; got {type(model).__name__}")
    options.setdefault("solver_name", "fantope-subgradient")
    options.setdefault("stationarity", stationarity_hook(model))
    res = projected_subgradient(model.base, extra=model.extra_term, M0=M0, **options)
    res.info["k"] = model.k
    return res
