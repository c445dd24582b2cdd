r"""BoostMetric with the exponential and the logistic loss.

Reference: Shen et al. 2012, sec. 3.2–3.7.

Both losses are minimised over :math:`X = \sum_j w_j v_j v_j^\top \succeq 0` (:math:`w \ge 0`, unit :math:`v_j`):

.. math:: f(X) = \text{loss}(\rho(X)) + \nu\,\mathrm{tr}X, \qquad
          \text{loss} = \log\sum_r e^{-\rho_r}\ (\text{"exp"}, eq. 8)\ \text{or}\ \sum_r \log(1 + e^{-\rho_r})\ (\text{"logistic"}, eq. 19).

Every iteration finds the base learner :math:`v` = top eigenvector of :math:`\hat A(u) = \sum_r u_r A_r`
(eq. 17–18, matrix-free, see :meth:`cvxmetric.boostmetric.TripletGeometry.top_eigenpair`) at the
current dual weights :math:`u = -\nabla_\rho\text{loss}` (softmax(−ρ), eq. 13, or σ(−ρ), eq. 20).

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

Certificate (converged means certified)
---------------------------------------
:class:`cvxmetric.boostmetric.BoostMetricCertifier` turns the point's weights :math:`u(X)` into a
certified lower bound (entropy / binary-entropy Fenchel duals, repaired where
:math:`\hat A(u) \not\preceq \nu I`: logistic by scaling u, exponential by a bound on
:math:`\mathrm{tr}X^*` from an anchor :math:`u_0` with :math:`\lambda_{\max}(\hat A(u_0)) < \nu`). The result's
``converged`` is ``certified_gap <= tol`` (:func:`cvxmetric.solvers.result.make_result`); a test
:math:`\lambda_{\max} \le \nu + \text{tol}\,\lambda_0` would leave the totally-corrective solver 0.8 % off on
ill-conditioned data. The bound is only computed when its necessary part, the complementarity
gap :math:`\nu\,\mathrm{tr}X - u^\top\rho = \langle \nu I - \hat A(u), X\rangle`, is within tol (it is
the certified gap when :math:`\hat A(u) \preceq \nu I`).

Both solvers run on the problem with the data divided by a power of two and :math:`\nu` by its
square (:meth:`cvxmetric.boostmetric.BoostMetricModel.normalized`, the same problem exactly, points
divided by :math:`c^2`), so L-BFGS-B's absolute tolerances and the line search see numbers of
order one at every feature scale; the point and weights are mapped back.

The stage-wise method never lowers a weight, so its complementarity gap need not vanish: it
stops where no rank-one direction decreases f (:math:`\lambda_{\max}(\hat A(u)) - \nu` within
``STALL_RTOL`` of :math:`\nu` or within the round-off of :math:`\hat A(u)`, status ``"stalled"``) short of the optimum
(measured certified gaps 2e-3 .. 0.36 on the default instances). It reports that gap honestly
and is ``converged`` only when it happens to be within ``tol``: with the default tol expect
``converged=False`` and a ConvergenceWarning. The totally-corrective method converges to the
optimum (theorem 5).
"""
from __future__ import annotations

import time
import warnings
from typing import Callable

import numpy as np
from scipy.optimize import minimize

from cvxmetric._checks import as_data_matrix, as_labels, check_int_in_range, check_positive
from cvxmetric.boostmetric import (BoostMetricCertifier, BoostMetricModel, boostmetric_model,
                                   loss_weights)
from cvxmetric.certificates import relative_gap
from cvxmetric.generators import triplets_from_labels
from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.linalg import psd_factor

from .boostmetric_lp import lambda_max_column_generation
from .boostmetric_subspace import MU_SHRINK, MU_START, SubspaceMaster, whitened_basis
from .result import SolverResult, make_result

__all__ = ["boostmetric_stagewise", "boostmetric_totally_corrective", "boostmetric_multipass",
           "line_search_weight", "DEFAULT_TOL"]

#: Certified relative gap of the returned point (``converged`` iff within it). Measured: the
#: totally-corrective solver reaches it on every default instance and on features scaled by
#: 1e-4 .. 1e4 (with nu scaled alike) or made ill-conditioned; the stage-wise one does not (by design).
DEFAULT_TOL = 1e-6

#: Stage-wise stop ("stalled"): lambda_max(A(u)) at most (1 + STALL_RTOL) nu, or within the
#: round-off of A(u) (TripletGeometry.roundoff) of nu: algorithm 3's test lambda_max <= nu, up to
#: a relative 1e-7 of nu. The test is relative to nu, the number it compares lambda_max with:
#: a floor relative to the size of A(u) instead (TripletGeometry.weight_scale) is in the data's
#: units against nu, and with nu below it (features x 1e4 at a fixed nu, iris and circles,
#: logistic) the method stopped at lambda_max = 124 nu, where the logistic certificate scales u
#: by 1/124 (certified gaps 0.97, 0.998). A stopping rule, not a proof: the certificate decides
#: ``converged``.
STALL_RTOL = 1e-7

#: L-BFGS-B's projected-gradient tolerance on the restricted problem (column-scaled weights).
LBFGS_GTOL = 1e-12

#: Subspace master (:mod:`.boostmetric_subspace`): the last barrier stage's gap mu k is at most
#: MU_FINAL times tol times the objective's size, so the barrier uses a hundredth of the
#: certified gap allowed and the rest is left to the directions outside the span.
MU_FINAL = 0.01

#: When no direction is left to add but the certificate is not yet within tol, the barrier
#: weight shrinks further, down to MU_FLOOR times the nominal final weight (six more decades:
#: beyond them round-off in the objective, about 1e-16 relative, is larger than the barrier's gap).
MU_FLOOR = 1e-6

#: A priced direction whose part orthogonal to the span has norm below this is already in it
#: (the eigenvectors are unit vectors; 1e-8 is well above their round-off, ~1e-15).
ORTHO_RTOL = 1e-8

#: A new span's master starts from the previous point plus START_SHIFT times the isotropic
#: first step: inside the cone by a margin of the data's scale, a tenth so that the previous
#: point's progress is kept.
START_SHIFT = 0.1

#: Bisection (algorithm 2) stops when the bracket is this small relative to its upper end.
BISECTION_RTOL = 1e-13


def _smooth_model(X, triplets, loss: str, nu: float) -> BoostMetricModel:
    if loss not in ("exp", "logistic"):
        raise ValueError(f"loss must be 'exp' or 'logistic' (the hinge problem has its own solver, "
                         f"cvxmetric.solvers.boostmetric_cg); got {loss!r}")
    return boostmetric_model(X, triplets, loss=loss, nu=nu)


def _derivative(loss: str, rho: np.ndarray, h: np.ndarray, nu: float, w: float) -> float:
    r""":math:`\frac{d}{dw} f(\rho + w h) = \nu - h^\top u(\rho + w h)` (minus the l.h.s. of eq. 15 / 22, up to a positive factor)."""
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


class _Run:
    """The normalized problem of one smooth solve, its certifier and the map back (shared by the solvers)."""

    def __init__(self, X, triplets, loss, nu, eig, tol):
        self.t0 = time.perf_counter()
        self.model = _smooth_model(X, triplets, loss, nu)
        self.tol = check_positive(tol, "tol")
        self.twin, self.c2 = self.model.normalized()
        self.geom, self.nu, self.eig = self.twin.geometry, self.twin.nu, eig
        self.certifier = BoostMetricCertifier(self.twin, eig=eig, anchor_search=lambda_max_column_generation)
        self.cols = np.zeros((self.model.d, 0))

    def gap(self, rho, w, *, force=False):
        """(certified relative gap, DualBound or None) of the point with margins rho and weights w."""
        f = self.twin.value_from_margins(rho, w.sum())
        u = self.twin.weights(rho)
        comp = self.nu * float(w.sum()) - float(u @ rho)   # <nu I - A(u), X>: the gap when A(u) <= nu I
        if not force and relative_gap(f, f - comp) > self.tol:
            return np.inf, None
        bound = self.certifier.bound(u, upper=f, columns=self.cols)
        return relative_gap(f, bound.lower), bound

    def columns_to_add(self, rho, w, n_columns: int):
        """Algorithm 4's pricing at the point with margins rho and weights w: None when its certified
        gap is within tol, else the top eigenvectors of A(u(rho)) (at most ``n_columns``) whose
        eigenvalue exceeds nu beyond round-off (the columns that lower the objective)."""
        gap, _ = self.gap(rho, w)
        if gap <= self.tol:
            return None
        u = self.twin.weights(rho)
        lam, V, _ = self.geom.top_eigenpair(u, eig=self.eig, n_vectors=min(n_columns, self.twin.d))
        return V[:, lam - self.nu > self.geom.roundoff(u)]

    def line_search(self, loss, rho, h) -> float:
        """:func:`line_search_weight` on the normalized problem, its error stated in the caller's units."""
        if loss == "exp" and float(np.min(h)) >= self.nu and h @ self.twin.weights(rho) > self.nu:
            raise ValueError(
                f"the exponential-loss problem is unbounded below: a rank-one direction gives every triplet a "
                f"margin >= nu = {self.model.nu:.3g} per unit trace (the triplets are separable); increase nu "
                f"above {float(np.min(h)) * self.c2:.3g} or use the logistic loss")
        return line_search_weight(loss, rho, h, self.nu)

    def result(self, name, w, n_iter, stop_reason, history, extra=None):
        w_orig = w / self.c2                                 # exact: c2 is a power of four
        keep = w_orig > 0
        cols = self.cols
        M = (cols[:, keep] * w_orig[keep]) @ cols[:, keep].T if np.any(keep) else np.zeros((self.model.d,) * 2)
        M = 0.5 * (M + M.T)
        rho_twin = self.geom.columns(cols) @ w if w.size else np.zeros(self.model.m)
        _, bound = self.gap(rho_twin, w, force=True)
        info = {"columns": cols, "n_columns": int(cols.shape[1]), "certificate": bound.detail}
        info.update(extra or {})
        return make_result(name, objective=self.model.value(M), measure="certified_gap", tol=self.tol,
                           stop_reason=stop_reason, M=M, w=w_orig, lower_bound=bound.lower,
                           multipliers=bound.multipliers, n_iter=n_iter, history=history,
                           time=time.perf_counter() - self.t0, info=info)


def boostmetric_stagewise(X, triplets, *, loss: str = "exp", nu: float = 1e-7, max_iter: int = 500,
                          tol: float = DEFAULT_TOL, eig: str = "auto") -> SolverResult:
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
        Certified relative gap for ``converged`` (module docstring). The iteration is the paper's
        (it runs until no rank-one direction decreases f, or ``max_iter``); the certificate of
        the point it stops at decides ``converged``. The stage-wise method is not optimal by
        design, so with the default it usually ends ``converged=False`` (status ``"stalled"``)
        with its honest certified gap and a ConvergenceWarning; pass a looser tol (e.g. 0.5) to
        accept its answer.
    eig : {"auto", "dense", "lanczos"}

    Returns
    -------
    SolverResult
        ``M`` = :math:`X`, ``w`` = weights of ``info["columns"]`` (d, J), ``objective`` = f(X),
        ``lower_bound``, ``certified_gap``, ``multipliers`` (the repaired u), ``history`` = f after
        each stage.
    """
    run = _Run(X, triplets, loss, nu, eig, tol)
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**7)
    geom, twin, nu = run.geom, run.twin, run.nu
    rho = np.zeros(twin.m)
    w = np.zeros(0)
    history = []
    stop_reason = "max_iter"
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        u = twin.weights(rho)
        lam, V, resid = geom.top_eigenpair(u, eig=eig)
        if lam[0] - nu <= max(STALL_RTOL * nu, geom.roundoff(u)):
            stop_reason = "stalled"
            break
        v = V[:, :1]
        h = geom.columns(v)[:, 0]
        wj = run.line_search(loss, rho, h)
        rho = rho + wj * h
        run.cols = np.column_stack([run.cols, v])
        w = np.append(w, wj)
        history.append(twin.value_from_margins(rho, w.sum()))
    return run.result(f"boostmetric-{loss}-stagewise", w, n_iter, stop_reason, history)


def boostmetric_totally_corrective(X, triplets, *, loss: str = "exp", nu: float = 1e-7, max_iter: int = 500,
                                   tol: float = DEFAULT_TOL, eig: str = "auto", n_columns: int | None = None,
                                   master: str = "subspace", lbfgs_gtol: float = LBFGS_GTOL,
                                   lbfgs_ftol: float = 0.0, lbfgs_maxiter: int = 15000) -> SolverResult:
    r"""Totally-corrective BoostMetric (algorithm 4): every weight re-optimised after each pricing.

    ``master="subspace"`` (default): the corrective step optimises over every PSD matrix on the
    span of the columns found so far, by a barrier Newton method in whitened coordinates
    (:mod:`.boostmetric_subspace`); each iteration adds the eigenvectors of :math:`\hat A(u)` above
    :math:`\nu` (up to ``n_columns``, default d), and the answer is the eigen-decomposition of the
    point (unit columns, weights its eigenvalues). It converges in a few pricing rounds on raw,
    standardized and min-max scaled features alike. ``master="conic"``: the paper's master over
    the cone of the rank-one columns, by L-BFGS-B, as follows.

    Each iteration (conic master): if the certified gap is within ``tol``, stop (converged). Otherwise price
    :math:`\hat A(u)`; add its leading eigenvectors with eigenvalue above :math:`\nu` (by more than
    round-off, :meth:`~cvxmetric.boostmetric.TripletGeometry.roundoff`) as columns, or, when there is none, re-run L-BFGS-B from the
    current weights (it may stop early on an ill-conditioned restricted problem); a re-run that
    does not lower f ends the loop (``"stalled"``). Parameters as in :func:`boostmetric_stagewise`, and

    n_columns : int, optional
        Add up to this many leading eigenvectors of :math:`\hat A(u)` per iteration; 1 is the paper's
        algorithm 4 (the conic master's default), d the subspace master's.
    master : {"subspace", "conic"}
        The corrective step (above).
    lbfgs_gtol, lbfgs_ftol, lbfgs_maxiter
        Conic master only: options of ``scipy.optimize.minimize(method="L-BFGS-B")`` for the restricted primal (9) / (19):
        :math:`\min_{w \ge 0} \text{loss}(H w) + \nu 1^\top w` with gradient :math:`\nu 1 - H^\top u(Hw)`,
        solved on the normalized problem (numbers of order one) over column-scaled weights. The
        defaults (gtol 1e-12 on the scaled gradient, no ftol test) let L-BFGS-B run until its
        line search fails: measured, ftol = 1e-13 stopped it with a complementarity gap of 1e-6
        relative (500 outer iterations without certificate on iris, 30 points; on ill-conditioned
        features a 3e-4 gap), while these reach the 1e-6 certified gap in 31 and 48 iterations.

    Returns
    -------
    SolverResult
        As :func:`boostmetric_stagewise`; ``history`` = f after each corrective step.
    """
    run = _Run(X, triplets, loss, nu, eig, tol)
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**7)
    if master not in ("subspace", "conic"):
        raise ValueError(f"master must be 'subspace' or 'conic'; got {master!r}")
    if master == "subspace":
        n_columns = run.model.d if n_columns is None else check_int_in_range(n_columns, "n_columns", 1, 10**4)
        return _subspace_loop(run, loss, max_iter, n_columns)
    n_columns = 1 if n_columns is None else check_int_in_range(n_columns, "n_columns", 1, 10**4)
    geom, twin, nu = run.geom, run.twin, run.nu
    H = np.zeros((twin.m, 0))
    w = np.zeros(0)
    rho = np.zeros(twin.m)
    history = []
    stop_reason = "max_iter"
    n_iter = 0

    def corrective(w0):
        # L-BFGS-B over omega = s * w with s_j = max_r |H_rj|: every column of H / s has entries of
        # order one (a diagonal preconditioner; on ill-conditioned features the columns of H span
        # twelve orders of magnitude and L-BFGS-B made no progress on w itself)
        s = np.max(np.abs(H), axis=0)
        Hs = H / s

        def fun(om):
            r = Hs @ om
            return twin.value_from_margins(r, float(np.sum(om / s))), nu / s - Hs.T @ twin.weights(r)

        res = minimize(fun, w0 * s, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * w0.size,
                       options={"gtol": lbfgs_gtol, "ftol": lbfgs_ftol, "maxiter": lbfgs_maxiter, "maxcor": 30})
        return np.maximum(res.x, 0.0) / s

    for n_iter in range(1, max_iter + 1):
        new = run.columns_to_add(rho, w, n_columns)
        if new is None:
            stop_reason = "converged"
            break
        if new.shape[1] == 0:
            f_old = twin.value_from_margins(rho, w.sum())
            w = corrective(w)
            rho = H @ w
            history.append(twin.value_from_margins(rho, w.sum()))
            if not history[-1] < f_old:
                stop_reason = "stalled"
                break
            continue
        hn = geom.columns(new)
        w_first = run.line_search(loss, rho, hn[:, 0])  # raises when the problem is unbounded
        run.cols = np.column_stack([run.cols, new])
        H = np.column_stack([H, hn])
        w = corrective(np.concatenate([w, [w_first], np.zeros(new.shape[1] - 1)]))
        # drop the columns L-BFGS-B left at zero (the same X without them; pricing re-adds a
        # direction when it is needed). Measured on wine, logistic, seeds 0 / 1 / 3: 78 / 121 / 190
        # iterations and 0.6 / 1.1 / 3.0 s with pruning, 291 / 498 / 446 and 6.8 / 18 / 18.5 s without
        keep = w > 0
        run.cols, H, w = run.cols[:, keep], H[:, keep], w[keep]
        rho = H @ w
        history.append(twin.value_from_margins(rho, w.sum()))
    return run.result(f"boostmetric-{loss}-tc", w, n_iter, stop_reason, history)


def _new_directions(Q: np.ndarray, V: np.ndarray) -> np.ndarray:
    """The parts of the columns of V orthogonal to span(Q), orthonormalized; those that are
    round-off (norm below ORTHO_RTOL after projection) are dropped."""
    R = V - Q @ (Q.T @ V) if Q.shape[1] else V
    R = R - Q @ (Q.T @ R) if Q.shape[1] else R   # twice is enough (Giraud et al. 2005)
    out = np.zeros((Q.shape[0], 0))
    for r in R.T:
        r = r - out @ (out.T @ r)
        norm = float(np.linalg.norm(r))
        if norm > ORTHO_RTOL:
            out = np.column_stack([out, r / norm])
    return out


def _point(Q: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q W Q^T as rank-one learners: (unit columns, weights >= 0), from the eigenpairs of W."""
    if W.size == 0:
        return np.zeros((Q.shape[0], 0)), np.zeros(0)
    lam, E = np.linalg.eigh(0.5 * (W + W.T))
    return Q @ E, np.maximum(lam, 0.0)


def _objective_scale(f: float, nu: float, trace: float) -> float:
    """The size of the objective, in which the barrier weight is set (the larger of |f| and nu tr W)."""
    return max(abs(f), nu * trace, np.finfo(np.float64).tiny)


def _start(run: "_Run", loss: str, rho: np.ndarray, Q: np.ndarray, W: np.ndarray, new: np.ndarray, f: float):
    r"""The span with the new directions, the master on it and its starting point.

    The first new direction's stage-wise weight (algorithm 2) is computed for its check alone: it
    raises when the exponential-loss problem is unbounded. The master works in whitened
    coordinates (:func:`~.boostmetric_subspace.whitened_basis`, :math:`B = Q T`); its start is the
    previous point plus ``START_SHIFT`` times the isotropic first step
    (:meth:`~.boostmetric_subspace.SubspaceMaster.isotropic_weight`), strictly inside the cone and
    of the data's scale, and the barrier restarts at ``MU_START`` of the objective's scale.
    """
    run.line_search(loss, rho, run.geom.columns(new[:, :1])[:, 0])
    k0, k1 = W.shape[0], new.shape[1]
    Q = np.column_stack([Q, new])
    W = np.block([[W, np.zeros((k0, k1))], [np.zeros((k1, k0)), np.zeros((k1, k1))]])
    sub, Wt = _master(run, loss, Q, W)
    Wt = Wt + START_SHIFT * sub.isotropic_weight() * np.eye(k0 + k1)
    mu0 = MU_START * _objective_scale(f, run.nu, float(np.sum(sub.gram * Wt))) / (k0 + k1)
    return Q, sub, Wt, mu0


def _master(run: "_Run", loss: str, Q: np.ndarray, W: np.ndarray):
    """The master on span(Q) in whitened coordinates and W (given in Q's coordinates) in them."""
    B = whitened_basis(Q, run.second_moment)
    Tinv = np.linalg.inv(Q.T @ B)   # B = Q T with T symmetric positive definite
    return SubspaceMaster(run.geom, loss, run.nu, B), Tinv @ W @ Tinv.T


def _subspace_loop(run: "_Run", loss: str, max_iter: int, n_columns: int) -> SolverResult:
    """Algorithm 4 with the master over the PSD span of the columns (:mod:`.boostmetric_subspace`)."""
    geom, twin, nu = run.geom, run.twin, run.nu
    run.second_moment = (geom.geometry.U.T @ geom.geometry.U + geom.geometry.V.T @ geom.geometry.V) / (2 * twin.m)
    Q, W = np.zeros((twin.d, 0)), np.zeros((0, 0))
    rho, w = np.zeros(twin.m), np.zeros(0)
    history, stop_reason, n_iter, mu, n_newton, sub = [], "max_iter", 0, None, 0, None
    for n_iter in range(1, max_iter + 1):
        new = run.columns_to_add(rho, w, n_columns)
        if new is None:
            stop_reason = "converged"
            break
        new = _new_directions(Q, new)
        f = twin.value_from_margins(rho, w.sum())
        mu_final = MU_FINAL * run.tol * _objective_scale(f, nu, w.sum()) / max(1, Q.shape[1] + new.shape[1])
        if new.shape[1] == 0:
            if sub is None or mu <= MU_FLOOR * mu_final:
                stop_reason = "stalled"
                break
            mu0, mu_final = mu, mu * MU_SHRINK   # nothing to add: continue the barrier path below its nominal end
        else:
            Q, sub, Wt, mu0 = _start(run, loss, rho, Q, W, new, f)
        Wt, rho, mu = sub.solve(Wt, max(mu0, mu_final), mu_final)
        n_newton += sub.n_newton
        sub.n_newton = 0
        T = Q.T @ sub.B
        W = T @ Wt @ T.T
        run.cols, w = _point(Q, W)
        rho = geom.columns(run.cols) @ w
        history.append(twin.value_from_margins(rho, w.sum()))
    return run.result(f"boostmetric-{loss}-tc", w, n_iter, stop_reason, history,
                      extra={"master": "subspace", "newton_steps": n_newton})


def boostmetric_multipass(X, y, *, fit: Callable = boostmetric_stagewise, passes: int = 2, n_neighbors: int = 3,
                          n_impostors: int = 3, **fit_options) -> SolverResult:
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
    n_neighbors, n_impostors : int
        Triplet generation (the paper's k = 3).

    Returns
    -------
    SolverResult
        ``M`` in the original coordinates; ``objective``, ``lower_bound`` and ``multipliers`` =
        the last pass's (in its own coordinates and triplets); the measure is the largest
        certified gap over the passes (each pass is its own problem), so ``converged`` means every
        pass is certified within its tol; ``info["passes"]`` = the per-pass results.
    """
    t0 = time.perf_counter()
    X = as_data_matrix(X)
    y = as_labels(y, X.shape[0])
    passes = check_int_in_range(passes, "passes", 1, 100)
    L = np.eye(X.shape[1])
    results = []
    M = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)   # reported once, by the outer result
        for _ in range(passes):
            Z = X @ L
            res = fit(Z, triplets_from_labels(Z, y, n_neighbors=n_neighbors, n_impostors=n_impostors), **fit_options)
            results.append(res)
            M = L @ res.M @ L.T
            M = 0.5 * (M + M.T)
            Lp = psd_factor(res.M).T
            if Lp.shape[1] == 0:
                break
            L = L @ Lp
    last = results[-1]
    worst = max(results, key=lambda r: r.measure_value / r.tol)
    return make_result(f"{last.solver}-mp{passes}", objective=last.objective, measure="certified_gap",
                       tol=worst.tol, stop_reason="converged" if worst.converged else worst.status,
                       M=M, measure_value=worst.measure_value, lower_bound=last.lower_bound,
                       multipliers=last.multipliers, n_iter=sum(r.n_iter for r in results),
                       history=np.concatenate([r.history for r in results]), time=time.perf_counter() - t0,
                       info={"passes": results})
