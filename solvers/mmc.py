r"""Fast MMC (design §5.1): projected gradient ascent on the max form with the exact projection.

Solves

.. math:: p^*_{\max} = \max_{M \in K} g(M) = \sum_D w_p \sqrt{\langle M, C_p\rangle},
          \qquad K = \{M \succeq 0,\ \langle M, C_S\rangle \le 1\},

and reports the min form (:mod:`cvxmetric.mmc`): :math:`M_{\min} = M / g(M)^2`, objective
:math:`\langle M_{\min}, C_S\rangle`, and :math:`p^*_{\min} = 1/(p^*_{\max})^2`.

Algorithm
---------
Projected gradient ascent :math:`M^+ = \Pi_K(M + t\,\nabla g(M))` with the *exact* projection
:func:`cvxmetric.linalg.project_psd_halfspace` (:math:`\Pi_{\mathbb{S}_+}(Y - \tau C_S)`, :math:`\tau`
by safeguarded root finding), Barzilai–Borwein trial steps and backtracking until the
sufficient-ascent condition :math:`g(M^+) \ge g(M) + \langle \nabla g, M^+ - M\rangle - \|M^+ - M\|^2/(2t)`
holds. :math:`g` is concave, smooth where every dissimilar distance is positive (the start
:math:`M_0 \propto` the projector on the range of :math:`C_S` has them all positive, and
:math:`\sqrt{\cdot}`'s infinite slope at 0 keeps them so).

Whitening (``whiten=True``, the default): MMC is invariant under invertible linear maps of the
data (:math:`M \mapsto A M A^\top`), and with :math:`B = Q_r \Lambda_r^{-1/2}` (eigenpairs of
:math:`C_S` on its range, :attr:`cvxmetric.mmc.MMCModel.range_basis`) the data :math:`XB` has
:math:`C_S = I_r`. The same ascent then runs on :math:`N` with :math:`M = B N B^\top`; its exact projection
onto :math:`\{N \succeq 0, \operatorname{tr} N \le 1\}` is still :math:`\Pi_{\mathbb{S}_+}(Y - \tau C_S)` with
:math:`C_S = I`. It is a preconditioner: on digits (64 pixels, :math:`C_S` with eigenvalues over
many decades) the unwhitened ascent stalls at a 1e-2 certified gap after 5,000 iterations.
``whiten=False`` runs the ascent in the original coordinates.

Stopping rule — a *certified* gap (:mod:`cvxmetric.mmc`): at every PSD M, concavity and
homogeneity of g give :math:`p^*_{\min} \ge \ell(M) = 1 / (2 g(M) \lambda(M))`
(:meth:`cvxmetric.mmc.MMCModel.lower_bound`, one generalized eigenvalue), and the tight rescaling
:math:`M / g(M)^2` has the min-form value :math:`f(M)/g(M)^2`. The solver stops when
:func:`cvxmetric.certificates.relative_gap` of these two numbers is within ``tol``; the returned
result is certified again from scratch in the original coordinates (``lower_bound``,
``certified_gap``), and only that decides ``converged``. The bound and the value depend on the ray
of M only, so the verdict is invariant under rescaling the data (and the point).
"""
from __future__ import annotations

import time

import numpy as np

from cvxmetric._checks import (as_square_symmetric, check_int_in_range, check_method_options,
                               check_positive, keyword_options)
from cvxmetric.certificates import relative_gap
from cvxmetric.constraints import ConstraintSet
from cvxmetric.linalg import project_psd_halfspace
from cvxmetric.mmc import DiagonalMMCModel, MMCModel

from .result import SolverResult, make_result

__all__ = ["solve_mmc", "mmc_ascent", "solve_mmc_diagonal", "mmc_diagonal_ascent", "project_capped_simplex",
           "DEFAULT_TOL", "CHECK_EVERY", "MMC_METHODS", "MMC_DIAGONAL_METHODS"]

#: Certified relative gap on the min-form objective at which the ascent stops (the harness
#: requires 1e-3 against the ground truth; the certificate is an upper bound on the true gap).
DEFAULT_TOL = 1e-5
#: Iterations between two certificates (each costs one eigendecomposition of size rank(C_S)).
CHECK_EVERY = 5
#: Smallest trial step relative to the first one before the line search gives up (stop reason
#: "stalled": the certificate then decides whether the point is good enough).
MIN_STEP_RATIO = 1e-14
#: Round-off slack of the sufficient-ascent test, relative to |g|.
ASCENT_SLACK = 1e-15


def mmc_ascent(model: MMCModel, *, M0=None, tol: float = DEFAULT_TOL, max_iter: int = 5000,
               check_every: int = CHECK_EVERY, whiten: bool = True, callback=None) -> SolverResult:
    r"""Maximise :math:`g` over :math:`K` (see the module docstring); return the *min-form* point.

    Parameters
    ----------
    model : MMCModel
    M0 : array_like, shape (d, d), optional
        PSD start, scaled onto the boundary :math:`\langle M, C_S\rangle = 1` of K (only its ray
        matters); default :meth:`cvxmetric.mmc.MMCModel.default_start`.
    tol : float
        Certified relative gap of the min-form objective.
    max_iter : int
        Iteration limit (a :class:`~cvxmetric.exceptions.ConvergenceWarning` when reached).
    check_every : int
        Period of the certificate.
    whiten : bool
        Run the ascent in coordinates where :math:`C_S = I` (see the module docstring).
    callback : callable, optional
        ``callback(iteration, M, g)`` after every iteration, ``M`` in the ascent's coordinates
        (the whitened ``N``, where :math:`\langle N, C_S\rangle = \operatorname{tr} N`, when ``whiten``).

    Returns
    -------
    SolverResult
        ``M`` the min-form point :math:`M_{\max}/g^2` (the constraint tight), ``objective`` its
        min-form value, ``measure="certified_gap"``, ``lower_bound`` :math:`\ell(M)` (a certified
        lower bound on :math:`p^*_{\min}`), ``certified_gap`` their relative gap, ``multipliers``
        the dissimilar constraint's :math:`\nu = 2 f(M_{\min})` (exact at the optimum, by homogeneity),
        ``history`` the max-form value :math:`g` per iteration; ``info``: ``p_max`` (max-form
        value of the ray, :math:`g/\sqrt f`), ``p_max_upper`` (certified upper bound
        :math:`1/\sqrt{\ell}`), ``p_min_lower`` (= ``lower_bound``), ``M_max``, ``projections``,
        ``whiten``.
    """
    if not isinstance(model, MMCModel):
        raise TypeError(f"model must be an MMCModel; got {type(model).__name__}")
    tol = check_positive(tol, "tol")
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**9)
    check_every = check_int_in_range(check_every, "check_every", 1, 10**9)
    if not isinstance(whiten, bool):
        raise TypeError(f"whiten must be True or False; got {whiten!r}")
    t_start = time.perf_counter()
    if M0 is not None:
        M0 = as_square_symmetric(M0, "M0", d=model.d, psd=True)
    if whiten:
        B = model.range_basis
        inner = MMCModel(model.X @ B, model.constraints)
        Binv = np.linalg.pinv(B)
        N, info = _ascent(inner, None if M0 is None else Binv @ M0 @ Binv.T, tol, max_iter, check_every,
                          callback)
        M = B @ N @ B.T
        M = 0.5 * (M + M.T)
    else:
        M, info = _ascent(model, M0, tol, max_iter, check_every, callback)
    return _certified_result("mmc-ascent", model, M, info, tol, t_start,
                             lambda M_min, lower: {"p_max_upper": 1.0 / np.sqrt(lower) if lower > 0 else np.inf,
                                                   "p_min_lower": float(lower), "M_max": M,
                                                   "f_max_form": model.similar_sum(M), "whiten": whiten})


def _certified_result(name, model, point, info, tol, t_start, extra_info):
    """The result of an MMC ascent: the max-form ``point`` (a matrix, or the diagonal model's vector) moved onto
    the min form's feasible set and certified from scratch in the original coordinates
    (:class:`cvxmetric.mmc._RayModel`'s ``make_feasible``, ``value``, ``lower_bound``);
    ``extra_info(feasible point, lower bound)`` adds the solver's own ``info`` entries."""
    feasible = model.make_feasible(point)
    lower = model.lower_bound(feasible)
    return make_result(
        name, objective=model.value(feasible), measure="certified_gap", tol=tol, stop_reason=info["stop"],
        M=feasible if feasible.ndim == 2 else np.diag(feasible), lower_bound=lower,
        multipliers=np.array([2.0 * model.similar_sum(feasible)]),
        n_iter=info["n_iter"], history=info["history"], time=time.perf_counter() - t_start,
        info={"p_max": float(model.max_form_value(point)), "projections": info["projections"],
              **extra_info(feasible, lower)})


def _start_on_boundary(model: MMCModel, M0: np.ndarray) -> np.ndarray:
    r"""A PSD ``M0`` scaled onto the boundary :math:`\langle M, C_S\rangle = 1` of K (``M0`` if that is 0).

    The ascent's start on M0's ray: g is homogeneous and the certificate reads the ray only, so
    the start, and with it every iterate, follows the data's scale (:math:`M \to M/s^2` for
    :math:`X \to sX`) whatever the scale of M0. (The exact projection of an M0 far outside K,
    :math:`\Pi_{\mathbb S_+}(M_0 - \tau C_S)`, would remove whole directions: an identity start on
    data scaled by 1e30 would lose every dissimilar pair.)
    """
    f = model.similar_sum(M0)
    return M0 / f if f > 0 else M0


def _ascent(model: MMCModel, M0, tol, max_iter, check_every, callback):
    """The projected gradient ascent of :func:`mmc_ascent` in the model's own coordinates.

    Returns the last iterate and a dict with ``stop`` ("converged" when the certificate held at a
    check, "stalled" when the line search found no ascent, else "max_iter").
    """
    CS = model.CS
    M = model.default_start() if M0 is None else _start_on_boundary(model, M0)
    D = model.dissimilar_distances(M)
    if np.any(D <= 0):
        q = int(np.argmax(D <= 0))
        raise ValueError(f"the starting point gives dissimilar pair {q} distance 0, where g is not "
                         "differentiable: its difference lies in the null space of M0; pass an M0 whose range "
                         "contains every dissimilar difference (e.g. positive definite), or M0=None")

    def gap(M, g, G):
        return relative_gap(model.similar_sum(M) / g ** 2, model.ray_bound(g, G))

    return _projected_ascent(M, D, model.wD, lambda Y: project_psd_halfspace(Y, CS), model.dissimilar_distances,
                             model.gradient, gap, tol, max_iter, check_every, callback)


def _projected_ascent(x, D, wD, project, distances, gradient, gap, tol, max_iter, check_every, on_step):
    r"""Projected gradient ascent of :math:`g(x) = \sum_D w_p \sqrt{D_x(p)}` over a convex set, the one
    engine of the full and the diagonal MMC.

    ``project`` is the Euclidean projection onto the set, ``distances(x)`` the dissimilar distances
    (``D`` those of the start ``x``, all positive), ``gradient(x, D)`` :math:`\nabla g`, and
    ``gap(x, g, G)`` the certified relative gap of ``x``'s ray, read every ``check_every``
    iterations. Steps: Barzilai-Borwein lengths with a backtracking sufficient-ascent test (the
    quadratic lower model of a concave g, relaxed by ``ASCENT_SLACK``); a step below
    ``MIN_STEP_RATIO`` of the first is "stalled" (a reason to stop, not a proof).

    Returns the last iterate and a dict with ``stop`` ("converged" when the certificate held at a
    check, "stalled", else "max_iter"), ``n_iter``, ``history`` (g per iteration), ``projections``.
    """
    g = float(wD @ np.sqrt(D))
    G = gradient(x, D)
    t = float(np.linalg.norm(x)) / max(float(np.linalg.norm(G)), 1e-300)
    t_first = t
    history, n_iter, projections, stop = [g], 0, 0, "max_iter"
    while n_iter < max_iter:
        if n_iter % check_every == 0 and gap(x, g, G) <= tol:
            stop = "converged"
            break
        while True:
            xn = project(x + t * G)
            projections += 1
            Dn = distances(xn)
            gn = float(wD @ np.sqrt(np.maximum(Dn, 0.0)))
            S = xn - x
            ss = float(np.vdot(S, S))
            if np.all(Dn > 0) and gn >= g + float(np.vdot(G, S)) - ss / (2.0 * t) - ASCENT_SLACK * abs(g):
                break
            t *= 0.5
            if t < MIN_STEP_RATIO * t_first:
                break
        if t < MIN_STEP_RATIO * t_first or ss == 0.0:
            stop = "stalled"
            break
        Gn = gradient(xn, Dn)
        sy = -float(np.vdot(S, Gn - G))  # >= 0 for concave g
        x, D, g, G = xn, Dn, gn, Gn
        t = ss / sy if sy > 0 else 2.0 * t
        n_iter += 1
        history.append(g)
        if on_step is not None:
            on_step(n_iter, x, g)
    return x, {"n_iter": n_iter, "history": np.asarray(history), "projections": projections, "stop": stop}


#: Algorithms of :func:`solve_mmc` (one: projected gradient ascent of the max form) and their options.
MMC_METHODS = {"ascent": keyword_options(mmc_ascent)}


def solve_mmc(X, constraints: ConstraintSet, *, method: str = "ascent", **options) -> SolverResult:
    r"""MMC (Xing et al. 2002; design §5.1) on ``X`` with the pairs of ``constraints``.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Data, one point per row.
    constraints : ConstraintSet
        Similar pairs :math:`S` and dissimilar pairs :math:`D` (their weights weight the sums; the
        bounds are not read: MMC's scale is its constraint).
    method : {"ascent"}
        Projected gradient ascent of the max form, :func:`mmc_ascent` (the one algorithm).
    **options
        ``M0``, ``tol``, ``max_iter``, ``check_every``, ``whiten``, ``callback``. Any other
        option is a ValueError.

    Returns
    -------
    SolverResult
        The result contract for the min form: ``measure="certified_gap"``, ``lower_bound``
        :math:`\ell(M)`, ``multipliers`` the constraint's multiplier (see :func:`mmc_ascent`).

    Notes
    -----
    .. math::
        \min_{M \succeq 0}\ \sum_{(i,j) \in S} w_{ij} \langle M, C_{ij}\rangle
        \quad\text{s.t.}\quad \sum_{(i,j) \in D} w_{ij} \sqrt{\langle M, C_{ij}\rangle} \ge 1 ,

    :math:`C_{ij} = (x_i - x_j)(x_i - x_j)^\top`; solved through the max form
    :math:`\max\{\sum_D w\sqrt{\langle M, C\rangle} : M \succeq 0,\ \sum_S w\langle M, C\rangle \le 1\}`
    and the scale identity :math:`p^*_{\min} = 1/(p^*_{\max})^2`.
    """
    method = check_method_options("solve_mmc", method, options, MMC_METHODS)
    return mmc_ascent(MMCModel(X, constraints), **options)


# ---------------------------------------------------------------------------- diagonal MMC
def project_capped_simplex(y: np.ndarray) -> np.ndarray:
    r"""Euclidean projection of ``y`` onto :math:`\{b \ge 0,\ \mathbf 1^\top b \le 1\}` (exact).

    :math:`\max(y, 0)` when its sum is at most 1; else the projection onto the simplex
    :math:`\max(y - \theta, 0)`, :math:`\theta` from the sorted entries (Held et al. 1974).
    """
    b = np.maximum(y, 0.0)
    if b.sum() <= 1.0:
        return b
    u = np.sort(y)[::-1]
    css = np.cumsum(u) - 1.0
    rho = int(np.nonzero(u - css / np.arange(1, u.size + 1) > 0)[0][-1])
    return np.maximum(y - css[rho] / (rho + 1), 0.0)


def mmc_diagonal_ascent(model: DiagonalMMCModel, *, a0=None, tol: float = DEFAULT_TOL, max_iter: int = 5000,
                        check_every: int = 1, callback=None) -> SolverResult:
    r"""The diagonal MMC (:class:`cvxmetric.mmc.DiagonalMMCModel`) by projected gradient ascent on its max form.

    In the coordinates :math:`b = s \circ a` (active features) the max form is
    :math:`\max\{\sum_D w_p \sqrt{r_p^\top b} : b \ge 0,\ \mathbf 1^\top b \le 1\}`, :math:`r_p = q_p / s`: the
    feasible set is the capped simplex, projected onto exactly (:func:`project_capped_simplex`), and
    the coordinates are invariant under per-feature scaling of the data. Steps as in
    :func:`mmc_ascent` (Barzilai-Borwein trial steps, backtracking to sufficient ascent).

    Stopping rule: the certified relative gap between the tight rescaling's value
    :math:`f/g^2` and :math:`\ell = 1/(2 g \lambda)` (:meth:`~cvxmetric.mmc.DiagonalMMCModel.lower_bound`)
    within ``tol``; the returned point is certified again from scratch and only that decides
    ``converged``.

    Parameters
    ----------
    model : DiagonalMMCModel
    a0 : array_like, shape (d,), optional
        Non-negative start (only its ray matters); default :meth:`~cvxmetric.mmc.DiagonalMMCModel.default_start`.
    tol : float
        Certified relative gap of the min-form objective.
    max_iter : int
        Iteration limit (a ConvergenceWarning when reached).
    check_every : int
        Period of the certificate (one pass over the dissimilar pairs: cheap).
    callback : callable, optional
        ``callback(iteration, a, g)`` after every iteration.

    Returns
    -------
    SolverResult
        ``M = diag(a)`` the min-form point (constraint tight), ``objective`` its value,
        ``measure="certified_gap"``, ``lower_bound`` :math:`\ell`, ``multipliers``
        :math:`\nu = 2 f` (exact at the optimum); ``info``: ``a`` (the diagonal), ``p_max``
        (max-form value of the ray), ``projections``.
    """
    if not isinstance(model, DiagonalMMCModel):
        raise TypeError(f"model must be a DiagonalMMCModel; got {type(model).__name__}")
    tol = check_positive(tol, "tol")
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**9)
    check_every = check_int_in_range(check_every, "check_every", 1, 10**9)
    t_start = time.perf_counter()
    act = model.active
    s = model.s[act]
    if a0 is None:
        start = model.default_start()
    else:
        start = np.asarray(a0, dtype=np.float64)
        if start.shape != (model.d,) or not np.all(np.isfinite(start)) or np.any(start < 0):
            raise ValueError(f"a0 must be a finite non-negative vector of shape ({model.d},); got "
                             f"{'shape ' + str(start.shape) if start.shape != (model.d,) else 'negative or non-finite entries'}")
    b = s * start[act]
    b = b / b.sum() if b.sum() > 0 else b
    R = model.QD[:, act] / s
    b, info = _diagonal_ascent(R, model.wD, b, tol, max_iter, check_every, callback, act, s, model.d)
    a = np.zeros(model.d)
    a[act] = b / s
    return _certified_result("mmc-diagonal-ascent", model, a, info, tol, t_start,
                             lambda a_min, lower: {"a": a_min})


def _diagonal_ascent(R, wD, b, tol, max_iter, check_every, callback, act, s, d):
    """The projected gradient ascent of :func:`mmc_diagonal_ascent` in the coordinates ``b``."""
    D = R @ b
    if np.any(D <= 0):
        q = int(np.argmax(D <= 0))
        raise ValueError(f"the starting point gives dissimilar pair {q} distance 0, where g is not differentiable: "
                         "pass a start positive on a feature where that pair differs (e.g. all positive), or None")

    def gradient(b, D):
        return (wD / (2.0 * np.sqrt(D))) @ R

    def gap(b, g, G):   # s^T a = sum(b); the linear maximiser over the capped simplex: max(0, max G)
        lam = max(0.0, float(G.max()))
        return relative_gap(float(b.sum()) / g ** 2, 1.0 / (2.0 * g * lam) if lam > 0 else 0.0)

    def on_step(n_iter, b, g):
        a = np.zeros(d)
        a[act] = b / s
        callback(n_iter, a, g)

    return _projected_ascent(b, D, wD, project_capped_simplex, lambda b: R @ b, gradient, gap, tol, max_iter,
                             check_every, None if callback is None else on_step)


#: Algorithms of :func:`solve_mmc_diagonal` (one: projected gradient ascent of the max form) and their options.
MMC_DIAGONAL_METHODS = {"ascent": keyword_options(mmc_diagonal_ascent)}


def solve_mmc_diagonal(X, constraints: ConstraintSet, *, method: str = "ascent", **options) -> SolverResult:
    r"""The diagonal MMC (metric-learn's ``MMC(diagonal=True)``) on ``X`` with the pairs of ``constraints``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Similar pairs :math:`S` and dissimilar pairs :math:`D` (weights weight the sums).
    method : {"ascent"}
        Projected gradient ascent of the max form, :func:`mmc_diagonal_ascent`.
    **options
        ``a0``, ``tol``, ``max_iter``, ``check_every``, ``callback``; any other is a ValueError.

    Notes
    -----
    .. math::
        \min_{a \ge 0}\ \sum_{(i,j) \in S} w_{ij} (x_i - x_j)^\top \operatorname{diag}(a) (x_i - x_j)
        \quad\text{s.t.}\quad \sum_{(i,j) \in D} w_{ij} \sqrt{(x_i - x_j)^\top \operatorname{diag}(a) (x_i - x_j)} \ge 1 ,

    the MMC of :func:`solve_mmc` over diagonal matrices; see :class:`cvxmetric.mmc.DiagonalMMCModel`
    for its certificate and its relation to metric-learn's objective (the same metric up to scale).
    """
    method = check_method_options("solve_mmc_diagonal", method, options, MMC_DIAGONAL_METHODS)
    return mmc_diagonal_ascent(DiagonalMMCModel(X, constraints), **options)
