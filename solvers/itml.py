r"""ITML by cyclic Bregman projections (Davis et al. 2007, algorithm 1) with rank-one updates.

The problem (DESIGN §5.3, :mod:`cvxmetric.itml`) is a Bregman-divergence minimisation with
generator :math:`\varphi(M, \xi) = -\log\det M - \gamma\sum_c \log\xi_c` under the linear
inequalities :math:`s_c(\langle M, C_c\rangle - \xi_c) \le 0` (:math:`s_c = \pm 1` for similar /
dissimilar pairs). Bregman's method with Hildreth-type dual correction keeps a multiplier
:math:`\lambda_c \ge 0` per pair and the invariants

.. math::
    M^{-1} = M_0^{-1} + \sum_c s_c\lambda_c C_c,\qquad
    \frac1{\xi_c} = \frac1{\xi^0_c} - \frac{s_c\lambda_c}{\gamma}

(the two stationarity conditions of the Lagrangian), starting from :math:`M = M_0`,
:math:`\lambda = 0`. Visiting pair :math:`c` with :math:`v = x_i - x_j`, :math:`p = v^\top M v`, the
Bregman projection onto the hyperplane :math:`D_M(c) = \xi_c` adds :math:`\theta s_c C_c` to
:math:`M^{-1}` with

.. math::
    \theta^* = s_c\,\frac{\gamma}{\gamma + 1}\Big(\frac1{\xi_c} - \frac1p\Big),

(solve :math:`p/(1 + \theta s p) = 1/(1/\xi_c - \theta s/\gamma)`), and the dual correction clips
it so that the multiplier stays non-negative: :math:`\theta = \max(\theta^*, -\lambda_c)`,
:math:`\lambda_c \leftarrow \lambda_c + \theta`. By Sherman–Morrison,

.. math:: M \leftarrow M - \frac{\theta s_c}{1 + \theta s_c p}\,(Mv)(Mv)^\top ,

an :math:`O(d^2)` rank-one update (``dsymv`` + ``dsyr`` on the upper triangle: about 3 us per pair
at d = 13, against ~25 us for metric-learn's numpy loop); :math:`1 + \theta
s_c p > 0` for every :math:`\theta` between :math:`\theta^*` and 0, so :math:`M` stays positive definite. This is
exactly Davis et al.'s update with :math:`\alpha = -\theta` (metric-learn's ``gamma_proj``
form); their slack update :math:`\xi_c \leftarrow \gamma\xi_c/(\gamma + s_c\alpha\xi_c)` is the
second invariant above, so the slack is not stored separately.

Order of the projections: every sweep visits each pair once, in a fresh random permutation
(seeded). This "almost cyclic" control keeps the convergence guarantee of Bregman's method and
is dramatically faster than a fixed order: measured to a relative KKT residual of 1e-8, iris
(199 pairs) needs 40 sweeps instead of 2,940 and wine (300 pairs) 30 instead of 1,150 when the
pairs are visited similar-first in a fixed order, as metric-learn does.

What is vectorised per sweep: the stopping test. After each sweep the relative stationarity
residual :math:`\|\nabla F(M)\|_F` of the reduced objective
(:meth:`cvxmetric.itml.ITMLModel.kkt_residual`, with the closed-form multipliers
:math:`\lambda_c(M)`; one matrix product over all pairs and one inverse) and the objective are
computed; the solver stops when the residual is at most ``tol``. The Bregman multipliers are
returned too; at convergence they agree with :math:`\lambda(M)`.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.linalg import blas

from cvxmetric.itml import ITMLModel, itml_model
from cvxmetric._checks import as_rng, check_bool, check_int_in_range, check_positive

from .result import SolverResult, warn_not_converged

__all__ = ["solve_itml", "bregman_itml", "DEFAULT_TOL"]

#: Stopping threshold on the relative KKT residual after a sweep. Measured on the default
#: instances: 1e-8 costs 24-34 sweeps (1e-6: 17-25) and leaves |gap| < 4e-9 vs Clarabel at
#: 1e-10 (the gap is quadratic in the residual), far inside GAP_BREGMAN = 1e-5.
DEFAULT_TOL = 1e-8


def _sweep(M, V, rows, lam, inv_xi0, sign, gamma, gproj):
    """One cyclic pass of Bregman projections over ``rows`` (in place on M's upper triangle and lam)."""
    dsymv, ddot, dsyr = blas.dsymv, blas.ddot, blas.dsyr
    inv_g = 1.0 / gamma
    n_steps = 0
    for c in rows:
        v = V[c]
        Mv = dsymv(1.0, M, v)
        p = ddot(v, Mv)
        s = sign[c]
        lc = lam[c]
        ixi = inv_xi0[c] - s * lc * inv_g
        theta = s * gproj * (ixi - 1.0 / p)
        if theta < -lc:
            theta = -lc
        if theta == 0.0:
            continue
        lam[c] = lc + theta
        ts = theta * s
        dsyr(-ts / (1.0 + ts * p), Mv, a=M, overwrite_a=1)
        n_steps += 1
    return n_steps


def _full(M_upper: np.ndarray) -> np.ndarray:
    U = np.triu(M_upper)
    return U + np.triu(U, 1).T


def bregman_itml(model: ITMLModel, *, tol: float = DEFAULT_TOL, max_sweeps: int = 5_000, seed=0,
                 shuffle: bool = True, lam0=None, solver_name: str = "itml-bregman") -> SolverResult:
    r"""Cyclic Bregman projections for an :class:`~cvxmetric.itml.ITMLModel` (module docstring).

    Parameters
    ----------
    model : ITMLModel
    tol : float
        Stopping threshold for the relative KKT residual, checked after every sweep.
    max_sweeps : int
        Limit on sweeps over all pairs; hitting it warns (ConvergenceWarning).
    seed : None, int or numpy.random.Generator
        Seed of the per-sweep random order.
    shuffle : bool
        Visit the pairs in a fresh random order each sweep (default) or in their given order
        (similar pairs first; Davis et al.'s / metric-learn's order, much slower).
    lam0 : array_like, shape (m,), optional
        Warm-start multipliers (non-negative, with :math:`1/\xi^0_c - s_c\lambda_c/\gamma > 0`);
        :math:`M` is set from the invariant :math:`M^{-1} = M_0^{-1} + \sum_c s_c\lambda_c C_c`.

    Returns
    -------
    SolverResult
        ``M`` (d, d) positive definite; ``objective`` = ``model.value(M)``; ``history`` = the
        objective after each sweep; ``n_iter`` = sweeps; ``info``: ``lam`` (m,) the Bregman
        multipliers, ``slack`` (m,) the slack of the invariant, ``kkt`` the final relative KKT
        residual, ``kkt_history``, ``dual_change`` (relative l1 change of lambda per sweep),
        ``projections`` (number of non-zero updates).
    """
    if not isinstance(model, ITMLModel):
        raise TypeError(f"model must be an ITMLModel; got {type(model).__name__}")
    tol = check_positive(tol, "tol")
    max_sweeps = check_int_in_range(max_sweeps, "max_sweeps", 1, 10**9)
    shuffle = check_bool(shuffle, "shuffle")
    rng = as_rng(seed)
    t0 = time.perf_counter()
    m, gamma = model.m, model.gamma
    V = np.ascontiguousarray(model.V)
    sign = model.sign.tolist()
    inv_xi0_arr = 1.0 / model.xi0
    inv_xi0 = inv_xi0_arr.tolist()
    gproj = gamma / (gamma + 1.0)
    if lam0 is None:
        lam_arr = np.zeros(m)
        M = np.array(model.M0, dtype=np.float64, order="F")
    else:
        lam_arr = np.array(lam0, dtype=np.float64).reshape(-1)
        if lam_arr.shape != (m,) or not np.all(np.isfinite(lam_arr)) or np.any(lam_arr < 0):
            raise ValueError(f"lam0 must be a finite non-negative array of shape ({m},)")
        if np.any(inv_xi0_arr - model.sign * lam_arr / gamma <= 0):
            raise ValueError("lam0 makes some similar slack infinite (lam_c >= gamma / u); pass smaller multipliers")
        Minv = model.M0_inv + model.weighted_sum(model.sign * lam_arr)
        try:
            np.linalg.cholesky(Minv)
        except np.linalg.LinAlgError:
            raise ValueError("lam0 gives an indefinite M^{-1} = M0^{-1} + sum_c s_c lam_c C_c; pass "
                             "multipliers of a feasible Bregman iterate") from None
        M = np.array(np.linalg.inv(Minv), order="F")
    lam = lam_arr.tolist()
    order = np.arange(m)
    history, kkt_hist, dchange = [], [], []
    n_proj = 0
    converged = False
    kkt = np.inf
    sweeps = 0
    while sweeps < max_sweeps:
        if shuffle:
            rng.shuffle(order)
        lam_before = np.array(lam)
        n_proj += _sweep(M, V, order.tolist(), lam, inv_xi0, sign, gamma, gproj)
        sweeps += 1
        Mf = _full(M)
        lam_now = np.array(lam)
        kkt = model.kkt_residual(Mf)
        kkt_hist.append(kkt)
        history.append(model.value(Mf))
        dchange.append(float(np.abs(lam_now - lam_before).sum()) / max(1.0, float(np.abs(lam_now).sum())))
        if kkt <= tol:
            converged = True
            break
    M = _full(M)
    lam_arr = np.array(lam)
    if not converged:
        warn_not_converged(solver_name, sweeps, f"relative KKT residual {kkt:.2e} > tol {tol:.1e}")
    return SolverResult(
        solver=solver_name, M=M, w=None, objective=model.value(M), n_iter=sweeps, converged=converged,
        history=np.array(history), time=time.perf_counter() - t0,
        info={"lam": lam_arr, "slack": model.slack_from_multipliers(lam_arr), "kkt": kkt,
              "kkt_history": np.array(kkt_hist), "dual_change": np.array(dchange), "projections": n_proj},
    )


def solve_itml(X, pairs=None, dissimilar=None, *, u=None, l=None, gamma: float = 1.0, prior=None,
               **options) -> SolverResult:
    """ITML (DESIGN §5.3) by cyclic Bregman projections.

    Model arguments as in :func:`cvxmetric.itml.itml_model` (a pairwise ConstraintSet, or
    similar and dissimilar pair arrays); ``options`` go to :func:`bregman_itml`.
    """
    model = itml_model(X, pairs, dissimilar, u=u, l=l, gamma=gamma, prior=prior)
    return bregman_itml(model, **options)
