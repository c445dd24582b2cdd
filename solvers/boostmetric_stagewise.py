r"""BoostMetric with the exponential and the logistic loss (Shen et al. 2012, sec. 3.2–3.7).

Both losses are minimised over :math:`X = \sum_j w_j v_j v_j^\top \succeq 0` (:math:`w \ge 0`, unit :math:`v_j`):

.. math:: f(X) = \text{loss}(\rho(X)) + \nu\,\mathrm{tr}X, \qquad
          \text{loss} = \log\sum_r e^{-\rho_r}\ (\text{"exp"}, eq. 8)\ \text{or}\ \sum_r \log(1 + e^{-\rho_r})\ (\text{"logistic"}, eq. 19).

Every iteration finds the base learner :math:`v` = top eigenvector of :math:`\hat A(u) = \sum_r u_r A_r`
(eq. 17–18, matrix-free, see :meth:`cvxmetric.boostmetric.TripletGeometry.top_eigenpair`) at the
current dual weights :math:`u = -\nabla_\rho\text{loss}` (softmax(−ρ), eq. 13, or σ(−ρ), eq. 20), and stops
when :math:`\lambda_{\max}(\hat A(u)) \le \nu + \text{tol}\cdot\max(1, \nu, \lambda_0)` with :math:`\lambda_0` the
first iteration's :math:`\lambda_{\max}` (the gradient's scale: the logistic loss sums m terms), i.e.
the gradient :math:`\nu I - \hat A(u)` is PSD up to tol: no rank-one direction decreases f.

* :func:`boostmetric_stagewise` (algorithm 3): the new weight :math:`w_j` minimises
  :math:`f(X + w_j v v^\top)` exactly, by bisection on the derivative (algorithm 2: eq. 15 for the
  exponential loss, eq. 22 for the logistic loss); earlier weights are frozen. The weights are
  then updated AdaBoost-style (eq. 16 / eq. 21), carried out in the log domain as
  :math:`\rho \leftarrow \rho + w_j H_{:j}` followed by :math:`u = u(\rho)`: in exact arithmetic this is the
  same update, and it cannot underflow.
* :func:`boostmetric_totally_corrective` (algorithm 4): after each new column, all weights are
  re-optimised by L-BFGS-B over :math:`w \ge 0` (sec. 3.6), warm-started.
* :func:`boostmetric_multipass` (sec. 3.7): regenerate the triplets in the learned metric and
  learn again, ``passes`` times.

Certificate: when :math:`\lambda_{\max}(\hat A(u)) \le \nu`, :math:`u` is dual feasible and
:math:`f(X) - f^* \le \nu\,\mathrm{tr}X - u^\top\rho` (:func:`cvxmetric.boostmetric.smooth_certificate`),
reported as ``info["certified_gap"]`` (None otherwise). The stage-wise method never lowers a
weight, so its complementarity term :math:`\langle \nabla f, X\rangle` need not vanish and it can stop short
of the optimum; the totally-corrective one converges to it (theorem 5).
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
from scipy.optimize import minimize

from cvxmetric._checks import as_data_matrix, as_labels, check_int_in_range, check_positive
from cvxmetric.boostmetric import BoostMetricModel, boostmetric_model, smooth_certificate
from cvxmetric.generators import triplets_from_labels
from cvxmetric.linalg import psd_factor

from .result import SolverResult, warn_not_converged

__all__ = ["boostmetric_stagewise", "boostmetric_totally_corrective", "boostmetric_multipass",
           "line_search_weight", "DEFAULT_TOL"]

#: Stop when lambda_max(A(u)) <= nu + DEFAULT_TOL * max(1, nu, lambda_0) (lambda_0: the first
#: pricing's eigenvalue, the gradient's scale). Measured (logistic, 540 triplets): L-BFGS-B's inner
#: accuracy keeps lambda_max - nu around 5e-6 on circles (lambda_0 ~ 1e2) with the objective within
#: 1e-7 of Clarabel's; 1e-6 * lambda_0 stopped wine at a 1.6e-4 gap, 1e-7 * lambda_0 reaches 1e-7.
#: Exponential loss: L-BFGS-B leaves lambda_max - nu ~ 1.5e-6 on wine (lambda_0 ~ 20), so 1e-7 never
#: stops there, while 1e-6 reaches a 3e-8 gap. Hence a per-loss default.
DEFAULT_TOL = {"exp": 1e-6, "logistic": 1e-7}

#: Bisection (algorithm 2) stops when the bracket is this small relative to its upper end.
BISECTION_RTOL = 1e-13


def _smooth_model(X, triplets, loss: str, nu: float) -> BoostMetricModel:
    if loss not in ("exp", "logistic"):
        raise ValueError(f"loss must be 'exp' or 'logistic' (the hinge problem has its own solver, "
                         f"solvers.boostmetric_cg); got {loss!r}")
    return boostmetric_model(X, triplets, loss=loss, nu=nu)


def _derivative(loss: str, rho: np.ndarray, h: np.ndarray, nu: float, w: float) -> float:
    r""":math:`\frac{d}{dw} f(\rho + w h) = \nu - h^\top u(\rho + w h)` (minus the l.h.s. of eq. 15 / 22, up to a positive factor)."""
    from cvxmetric.boostmetric import loss_weights

    return nu - float(h @ loss_weights(loss, rho + w * h))


def line_search_weight(loss: str, rho: np.ndarray, h: np.ndarray, nu: float) -> float:
    r"""Exact minimiser :math:`w \ge 0` of :math:`\text{loss}(\rho + w h) + \nu w` by bisection (algorithm 2).

    Parameters
    ----------
    loss : {"exp", "logistic"}
    rho : ndarray, shape (m,)
        Current margins.
    h : ndarray, shape (m,)
        The new column :math:`H_{:j}`.
    nu : float

    Raises
    ------
    ValueError
        Exponential loss with :math:`\min_r h_r \ge \nu`: the direction satisfies every triplet with
        margin at least :math:`\nu` per unit trace, so f decreases without bound along it.
    """
    if _derivative(loss, rho, h, nu, 0.0) >= 0.0:
        return 0.0
    if loss == "exp" and float(np.min(h)) >= nu:
        raise ValueError(
            f"the exponential-loss problem is unbounded below: a rank-one direction gives every triplet a "
            f"margin >= nu = {nu:.3g} per unit trace (the triplets are separable); increase nu above "
            f"{float(np.min(h)):.3g} or use the logistic loss"
        )
    scale = float(np.max(np.abs(h)))
    hi = 1.0 / scale
    while _derivative(loss, rho, h, nu, hi) < 0.0:
        hi *= 2.0
        if not np.isfinite(hi) or hi > 1e300:
            raise RuntimeError("line search: no sign change of the derivative found")
    lo = 0.0
    while hi - lo > BISECTION_RTOL * hi:
        mid = 0.5 * (lo + hi)
        if _derivative(loss, rho, h, nu, mid) < 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _finish(name, model, cols, w, n_iter, converged, history, t0, lam, resid, extra=None):
    geom = model.geometry
    keep = w > 0
    M = (cols[:, keep] * w[keep]) @ cols[:, keep].T if np.any(keep) else np.zeros((model.d, model.d))
    M = 0.5 * (M + M.T)
    rho = geom.margins(M)
    tr = float(np.trace(M))
    obj = model.value_from_margins(rho, tr)
    u = model.weights(rho)
    cert = smooth_certificate(model.nu, tr, rho, u, lam + resid)
    info = {"columns": cols, "u": u, "lambda_max": float(lam), "eig_residual": float(resid), "certified_gap": cert,
            "certified_gap_rel": None if cert is None else cert / max(1.0, abs(obj)), "n_columns": int(cols.shape[1])}
    info.update(extra or {})
    if not converged:
        warn_not_converged(name, n_iter, f"lambda_max - nu = {lam - model.nu:.3g}")
    return SolverResult(name, M, w, obj, n_iter, converged, np.asarray(history), time.perf_counter() - t0, info)


def boostmetric_stagewise(X, triplets, *, loss: str = "exp", nu: float = 1e-7, max_iter: int = 500,
                          tol: float | None = None, eig: str = "auto") -> SolverResult:
    r"""Stage-wise BoostMetric (algorithm 3) with the exponential or the logistic loss.

    Parameters
    ----------
    X : array_like, shape (n, d)
    triplets : ConstraintSet or array_like of int, shape (m, 3)
    loss : {"exp", "logistic"}
    nu : float
        Trace weight (the paper uses 1e-7).
    max_iter : int
        Maximum number of base learners J (the paper uses 500).
    tol : float
        Stop when :math:`\lambda_{\max}(\hat A(u)) \le \nu + \text{tol}\max(1, \nu, \lambda_0)` (module
        docstring); default ``DEFAULT_TOL[loss]``.
    eig : {"auto", "dense", "lanczos"}

    Returns
    -------
    SolverResult
        ``M`` = :math:`X`, ``w`` = weights of ``info["columns"]`` (d, J), ``objective`` = f(X),
        ``history`` = f after each stage; ``info`` also holds ``u``, ``lambda_max``,
        ``certified_gap`` (None when :math:`\lambda_{\max} > \nu`).
    """
    t0 = time.perf_counter()
    model = _smooth_model(X, triplets, loss, nu)
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**7)
    tol = DEFAULT_TOL[loss] if tol is None else check_positive(tol, "tol")
    geom, nu = model.geometry, model.nu
    rho = np.zeros(model.m)
    cols = np.zeros((model.d, 0))
    w = np.zeros(0)
    history = []
    converged = False
    n_iter = 0
    trace = 0.0
    for n_iter in range(1, max_iter + 1):
        u = model.weights(rho)
        lam, V, resid = geom.top_eigenpair(u, method=eig)
        if n_iter == 1:
            scale = max(1.0, nu, float(lam[0]))
        if lam[0] <= nu + tol * scale:
            converged = True
            break
        v = V[:, :1]
        h = geom.columns(v)[:, 0]
        wj = line_search_weight(loss, rho, h, nu)
        rho = rho + wj * h
        trace += wj
        cols = np.column_stack([cols, v])
        w = np.append(w, wj)
        history.append(model.value_from_margins(rho, trace))
    else:
        u = model.weights(rho)
        lam, V, resid = geom.top_eigenpair(u, method=eig)
        converged = bool(lam[0] <= nu + tol * scale)
    return _finish(f"boostmetric-{loss}-stagewise", model, cols, w, n_iter, converged, history, t0,
                   float(lam[0]), resid)


def boostmetric_totally_corrective(X, triplets, *, loss: str = "exp", nu: float = 1e-7, max_iter: int = 500,
                                   tol: float | None = None, eig: str = "auto", n_columns: int = 1,
                                   lbfgs_gtol: float = 1e-10, lbfgs_ftol: float = 1e-13,
                                   lbfgs_maxiter: int = 15000) -> SolverResult:
    r"""Totally-corrective BoostMetric (algorithm 4): every weight re-optimised by L-BFGS-B.

    Stops when :math:`\lambda_{\max}(\hat A(u)) \le \nu + \text{tol}\max(1, \nu)` and the complementarity
    term :math:`\langle \nabla f, X\rangle = \sum_j w_j(\nu - H_{:j}^\top u)` is at most :math:`\text{tol}\max(1, |f|)`
    (an iteration restarts L-BFGS-B without a new column when only the latter fails).
    Parameters as in :func:`boostmetric_stagewise`, and

    n_columns : int
        Add up to this many leading eigenvectors of :math:`\hat A(u)` per iteration (those with
        eigenvalue above :math:`\nu`); 1 is the paper's algorithm 4.
    lbfgs_gtol, lbfgs_ftol, lbfgs_maxiter
        Options of ``scipy.optimize.minimize(method="L-BFGS-B")`` for the restricted primal (9) / (19):
        :math:`\min_{w \ge 0} \text{loss}(H w) + \nu 1^\top w` with gradient :math:`\nu 1 - H^\top u(Hw)`.

    Returns
    -------
    SolverResult
        As :func:`boostmetric_stagewise`; ``history`` = f after each corrective step.
    """
    t0 = time.perf_counter()
    model = _smooth_model(X, triplets, loss, nu)
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**7)
    tol = DEFAULT_TOL[loss] if tol is None else check_positive(tol, "tol")
    geom, nu = model.geometry, model.nu
    cols = np.zeros((model.d, 0))
    H = np.zeros((model.m, 0))
    w = np.zeros(0)
    rho = np.zeros(model.m)
    history = []
    converged = False
    n_iter = 0

    def fun(wv):
        r = H @ wv
        return model.value_from_margins(r, wv.sum()), nu - H.T @ model.weights(r)

    n_columns = check_int_in_range(n_columns, "n_columns", 1, 10**4)
    for n_iter in range(1, max_iter + 1):
        u = model.weights(rho)
        lam, V, resid = geom.top_eigenpair(u, method=eig, k=min(n_columns, model.d))
        if n_iter == 1:
            scale = max(1.0, nu, float(lam[0]))
        if lam[0] <= nu + tol * scale:
            # complementarity <grad f, X> = sum_j w_j (nu - H_j'u): L-BFGS-B may stop early on an
            # ill-conditioned restricted problem; restart it (no new column) until it is small
            comp = float(w @ (nu - H.T @ u)) if w.size else 0.0
            fval = model.value_from_margins(rho, w.sum())
            if abs(comp) <= tol * max(1.0, abs(fval)):
                converged = True
                break
            res = minimize(fun, w, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * w.size,
                           options={"gtol": lbfgs_gtol, "ftol": lbfgs_ftol, "maxiter": lbfgs_maxiter, "maxcor": 30})
            w = np.maximum(res.x, 0.0)
            rho = H @ w
            history.append(model.value_from_margins(rho, w.sum()))
            continue
        new = V[:, lam > nu]
        hn = geom.columns(new)
        w_first = line_search_weight(loss, rho, hn[:, 0], nu)  # raises when the problem is unbounded
        cols = np.column_stack([cols, new])
        H = np.column_stack([H, hn])
        w0 = np.concatenate([w, [w_first], np.zeros(new.shape[1] - 1)])
        res = minimize(fun, w0, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * w0.size,
                       options={"gtol": lbfgs_gtol, "ftol": lbfgs_ftol, "maxiter": lbfgs_maxiter, "maxcor": 30})
        w = np.maximum(res.x, 0.0)
        rho = H @ w
        history.append(model.value_from_margins(rho, w.sum()))
    else:
        u = model.weights(rho)
        lam, V, resid = geom.top_eigenpair(u, method=eig)
        converged = bool(lam[0] <= nu + tol * scale)
    return _finish(f"boostmetric-{loss}-tc", model, cols, w, n_iter, converged, history, t0, float(lam[0]), resid)


def boostmetric_multipass(X, y, *, fit: Callable = boostmetric_stagewise, passes: int = 2, k_target: int = 3,
                          k_impostor: int = 3, **fit_options) -> SolverResult:
    r"""Multi-pass BoostMetric (sec. 3.7): regenerate the triplets in the learned metric and refit.

    Pass 1 generates triplets from labels in the Euclidean metric
    (:func:`cvxmetric.generators.triplets_from_labels`) and fits :math:`X_1`. Pass p > 1 factors
    the metric learned so far, :math:`M = L L^\top`, generates triplets from the transformed points
    :math:`L^\top x`, fits :math:`X_p` there and composes :math:`M \leftarrow L X_p L^\top`.

    Parameters
    ----------
    X : array_like, shape (n, d)
    y : array_like, shape (n,)
    fit : callable
        ``fit(Z, triplets, **fit_options) -> SolverResult`` (any BoostMetric solver).
    passes : int
    k_target, k_impostor : int
        Triplet generation (the paper's k = 3).

    Returns
    -------
    SolverResult
        ``M`` in the original coordinates; ``objective`` = the last pass's objective (in its own
        coordinates and triplets); ``info["passes"]`` = the per-pass results.
    """
    t0 = time.perf_counter()
    X = as_data_matrix(X)
    y = as_labels(y, X.shape[0])
    passes = check_int_in_range(passes, "passes", 1, 100)
    L = np.eye(X.shape[1])
    results = []
    M = None
    for _ in range(passes):
        Z = X @ L
        res = fit(Z, triplets_from_labels(Z, y, k_target=k_target, k_impostor=k_impostor), **fit_options)
        results.append(res)
        M = L @ res.M @ L.T
        M = 0.5 * (M + M.T)
        Lp = psd_factor(res.M).T
        if Lp.shape[1] == 0:
            break
        L = L @ Lp
    last = results[-1]
    return SolverResult(f"{last.solver}-mp{passes}", M, None, last.objective, sum(r.n_iter for r in results),
                        all(r.converged for r in results), np.concatenate([r.history for r in results]),
                        time.perf_counter() - t0, {"passes": results})
