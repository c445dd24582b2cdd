r"""The projected subgradient engine (thesis alg. 1 with sec. 2.3.3), for every hinge model.

It minimises

.. math:: F(M) = f(M) + e(M), \qquad M \succeq 0,

where :math:`f` is a :class:`~cvxmetric.models.HingeModel` (linear/quadratic term plus weighted
hinge loss: Qwise, LMNN, the Fantope bound) and :math:`e` an optional extra term given by its
value and a (super)gradient computed from the eigendecomposition of :math:`M` (the Fantope
term :math:`\mu R(M)` of thesis alg. 2 uses it; then :math:`F` is not convex).

Algorithm
---------
Iteration: :math:`M \leftarrow \Pi_{\mathbb{S}^d_+}\big(M - \eta_t\, g / \|g\|_F\big)` with
:math:`g = \nabla(\text{linear/quadratic}) + G_{\text{hinge}} + \nabla e`. Per iteration the cost is
one ``eigh`` (the projection, whose eigenvectors are reused by :math:`e`) plus one pass over the
checked constraints:

* **incremental subgradient** — :math:`G_{\text{hinge}} = \sum_{q \in \mathcal{N}^+} c_q A_q` is kept
  and moved only by the constraints that changed side (:class:`~cvxmetric.hinge.HingeLoss`);
* **active set** (LMNN-style) — between full re-checks (every ``recheck_every`` iterations) only
  the working set, the union of the constraints found violated at any full check, is
  evaluated; the returned point is always scored on the full set;
* **step size** — normalized steps :math:`\eta_t = \eta_0 / \sqrt{t}` in epochs of doubling length
  (``first_epoch``, 2x, 4x, ...); each epoch restarts from the best point found with
  :math:`\eta_0 = \text{step\_scale} \cdot \max(\|M_{\text{best}}\|_F, s_0)`, so the step adapts to the
  scale of the solution (:math:`s_0` is the scale at which a typical constraint value
  :math:`\langle sI, A_q\rangle` matches a typical margin);
* **stopping rule** — two consecutive epochs improving the best objective by less than ``tol``
  (relative to :math:`\max(1, |F|)`). The thesis' rule :math:`\|M_t - M_{t-1}\|_F^2 \le \epsilon` is not
  used: with normalized steps the step length is :math:`\eta_t` by construction, whatever the
  distance to the optimum.

The best point seen (by its full objective) is returned, as subgradient methods are not
descent methods.

Implicit constraint sets
------------------------
When a constraint set is too large to materialise (LMNN's impostor triplets on digits:
millions), pass ``oracle``: ``oracle(M, lam, V) -> (constraints, coef)`` (or ``None``) must
return *every* constraint of the implicit set that is violated at ``M`` (margin > 0). The
model's own rows (possibly none) are always kept; the implicit part of the working set is
*reset* to the oracle's answer at the start of every epoch (at the epoch's starting point,
the best point so far) and *grows* by the oracle's answer at every full re-check (every
``recheck_every`` iterations; constraints with the same indices as a working one are not
added twice); between re-checks only the working set is evaluated, as in LMNN's own solver.
Resetting per epoch keeps the working set from carrying, for the whole run, the constraints
violated by the large early steps. Every objective used to pick the best point is a full one: a full re-check,
or a candidate scored by one more oracle call. The returned objective is computed from an
oracle call at the returned point, so it is the objective over the whole implicit set;
``info["model"]`` is the model with the constraints violated there.
"""
from __future__ import annotations

import time
from typing import Callable, Optional

import numpy as np

from cvxmetric._checks import as_square_symmetric, check_int_in_range, check_positive
from cvxmetric.linalg import project_psd
from cvxmetric.models import HingeModel

from .result import SolverResult, warn_not_converged

__all__ = ["projected_subgradient", "STEP_SCALE", "FIRST_EPOCH", "DEFAULT_TOL", "RECHECK_EVERY",
           "AUTO_ACTIVE_SET_MIN"]

#: Step length of an epoch as a fraction of the current solution's Frobenius norm. Measured on
#: the default instances: 0.25 reaches 1e-4 relative gaps in ~1,500 iterations; 1.0 oscillates
#: at a larger radius, 0.05 crawls.
STEP_SCALE = 0.25
#: Length of the first epoch; later epochs double.
FIRST_EPOCH = 100
#: Relative improvement of the best objective per epoch below which an epoch counts as stalled.
#: Measured on the default instances, the best objective's gap shrinks by about sqrt(2) per
#: (doubling) epoch, the O(1/sqrt(T)) rate, so the gap left when an epoch improves by ``tol`` is
#: about tol / (1 - 1/sqrt(2)) ~ 3.4 tol: 1e-4 stops near a 3e-4 relative gap.
DEFAULT_TOL = 1e-4
#: Full re-check period of the active set (thesis: "every 10-20 iterations").
RECHECK_EVERY = 10
#: ``active_set="auto"`` uses a working set from this many constraints on.
AUTO_ACTIVE_SET_MIN = 5000
#: Consecutive stalled epochs that stop the method.
STALLED_EPOCHS = 2

ExtraTerm = Callable[[np.ndarray, np.ndarray, np.ndarray], "tuple[float, np.ndarray]"]
ConstraintOracle = Callable[[np.ndarray, np.ndarray, np.ndarray], "tuple[object, np.ndarray] | None"]


def _row_keys(idx: np.ndarray) -> np.ndarray:
    """One hashable (void) key per constraint row, for set operations on index rows."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    return idx.view(np.dtype((np.void, idx.dtype.itemsize * idx.shape[1]))).ravel()


def _initial_scale(model: HingeModel) -> float:
    a, b = model.geometry.squared_lengths()
    spread = float(np.median(a + b)) if model.m else 0.0
    margin = float(np.median(np.abs(model.constraints.delta))) if model.m else 0.0
    if spread <= 0 or margin <= 0:
        return 1.0
    return margin / spread * np.sqrt(model.d)


def projected_subgradient(model: HingeModel, *, extra: Optional[ExtraTerm] = None, M0=None,
                          max_iter: int = 20000, tol: float = DEFAULT_TOL,
                          step_scale: float = STEP_SCALE, first_epoch: int = FIRST_EPOCH,
                          active_set="auto", recheck_every: int = RECHECK_EVERY,
                          solver_name: str = "projected-subgradient",
                          oracle: Optional[ConstraintOracle] = None,
                          callback: Optional[Callable[[int, np.ndarray, float], None]] = None) -> SolverResult:
    r"""Minimise a hinge model (plus an optional extra term) over the PSD cone.

    Parameters
    ----------
    model : HingeModel
        :math:`f(M) = \langle R, M\rangle + \tfrac q2\|M\|_F^2 + \sum_c c_c [\delta_c + \langle M, A_c\rangle]_+`.
    extra : callable, optional
        ``extra(M, lam, V) -> (value, grad)`` with ``lam, V = eigh(M)`` (ascending); adds a
        term to the objective and its (super)gradient to the step direction.
    M0 : array_like, shape (d, d), optional
        PSD starting point (default: 0).
    max_iter : int
        Iteration limit; a :class:`~cvxmetric.exceptions.ConvergenceWarning` is issued when it
        stops the method.
    tol : float
        Stopping tolerance (relative improvement per epoch, see the module docstring).
    step_scale : float
        Epoch step length relative to :math:`\|M_{\text{best}}\|_F`.
    first_epoch : int
        Iterations of the first epoch.
    active_set : bool or "auto"
        Use the LMNN-style working set (``"auto"``: when there are at least
        ``AUTO_ACTIVE_SET_MIN`` constraints).
    recheck_every : int
        Full re-check period of the working set (and of the oracle's search).
    oracle : callable, optional
        ``oracle(M, lam, V) -> (ConstraintSet, coef) | None``: all constraints of an implicit
        constraint set violated at M (see "Implicit constraint sets" in the module docstring);
        ``lam, V = eigh(M)`` ascending, so a factor of M is free.
    callback : callable, optional
        ``callback(iteration, M, objective)`` after every iteration.

    Returns
    -------
    SolverResult
        ``M`` is the best point found; ``objective`` its full objective;
        ``history`` the objective at each iterate (over the working set between full checks);
        ``info`` holds ``epochs``, ``full_checks``, ``working_set_size``, ``step0``; with an
        ``oracle`` also ``model`` (the model's rows plus the constraints violated at ``M``),
        ``oracle_calls``, ``max_working_set`` and ``violated_at_solution``.
    """
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**9)
    first_epoch = check_int_in_range(first_epoch, "first_epoch", 1, 10**9)
    recheck_every = check_int_in_range(recheck_every, "recheck_every", 1, 10**9)
    tol = check_positive(tol, "tol")
    step_scale = check_positive(step_scale, "step_scale")
    if active_set not in (True, False, "auto"):
        raise ValueError(f"active_set must be True, False or 'auto'; got {active_set!r}")
    use_ws = active_set is True or (active_set == "auto" and model.m >= AUTO_ACTIVE_SET_MIN)
    if oracle is not None:
        if not callable(oracle):
            raise TypeError(f"oracle must be callable; got {type(oracle).__name__}")
        use_ws = False  # the model rows are the working set; the oracle is the full check

    t_start = time.perf_counter()
    d = model.d
    if M0 is None:
        M = np.zeros((d, d))
    else:
        M = as_square_symmetric(M0, "M0", d=d, psd=True)
    M, lam, V = project_psd(M, return_eig=True)
    lam = np.maximum(lam, 0.0)

    def extra_at(M, lam, V):
        if extra is None:
            return 0.0, 0.0
        val, grad = extra(M, lam, V)
        return float(val), grad

    hinge = model.hinge()
    base_model = model
    oracle_calls, max_ws = 0, 0

    def with_oracle(M, lam, V) -> HingeModel:
        """The model's own rows plus every implicit constraint violated at M."""
        nonlocal oracle_calls, max_ws
        oracle_calls += 1
        found = oracle(M, lam, V)
        full = base_model if found is None or len(found[0]) == 0 else base_model.extended(*found)
        max_ws = max(max_ws, full.m)
        return full

    def refresh(M, lam, V) -> None:
        """Reset the working set to the constraints violated at M."""
        nonlocal model, hinge
        if oracle is not None:
            model = with_oracle(M, lam, V)
            hinge = model.hinge()

    def grow(M, lam, V) -> None:
        """Add the constraints violated at M that the working set lacks."""
        nonlocal model, hinge, oracle_calls, max_ws
        oracle_calls += 1
        found = oracle(M, lam, V)
        if found is None or len(found[0]) == 0:
            return
        cons, coef = found
        have = _row_keys(model.constraints.idx)
        new = ~np.isin(_row_keys(cons.idx), have)
        if np.any(new):
            model = model.extended(cons.subset(new), np.asarray(coef)[new])
            hinge = hinge.extended(model.geometry, model.coef)
            max_ws = max(max_ws, model.m)

    def full_value(M, lam, V) -> float:
        m = model if oracle is None else with_oracle(M, lam, V)
        return m.value(M) + extra_at(M, lam, V)[0]

    refresh(M, lam, V)
    loss, marg = hinge.update(M)
    ext_val, _ = extra_at(M, lam, V)
    best_f = model.regularizer(M) + loss + ext_val
    best = (M, lam, V)
    working = marg > 0
    ws_rows = np.flatnonzero(working)
    ws_geom = model.geometry.subset(ws_rows) if use_ws else None

    s0 = _initial_scale(model)
    history: list[float] = []
    n_iter, epochs, full_checks, stalled = 0, 0, 1, 0
    epoch_len = first_epoch
    converged = False
    zero_subgradient = False
    step0 = None
    while n_iter < max_iter and not converged:
        M, lam, V = best
        step0 = step_scale * max(float(np.linalg.norm(M)), s0)
        refresh(M, lam, V)
        hinge.update(M)
        hinge.recompute()
        _, ext_grad = extra_at(M, lam, V)
        f_epoch_start = best_f
        cand_f, cand = np.inf, None
        epochs += 1
        for t in range(1, epoch_len + 1):
            if n_iter >= max_iter:
                break
            g = model.regularizer_grad(M) + hinge.G + ext_grad
            gnorm = float(np.linalg.norm(g))
            if gnorm == 0.0:
                # 0 is a subgradient on the checked rows: optimal if they are all the rows
                # (with an oracle: if the working set was refreshed at this very point).
                if oracle is not None:
                    refresh(M, lam, V)
                    hinge.update(M)
                    if np.linalg.norm(model.regularizer_grad(M) + hinge.G + ext_grad) > 0:
                        continue
                    zero_subgradient = True
                elif not use_ws or np.all(working):
                    zero_subgradient = True
                break
            M, lam, V = project_psd(M - (step0 / np.sqrt(t)) * (g / gnorm), return_eig=True)
            lam = np.maximum(lam, 0.0)
            n_iter += 1
            full = (not use_ws and oracle is None) or (n_iter % recheck_every == 0)
            if oracle is not None:
                if full:
                    grow(M, lam, V)
                    full_checks += 1
                loss, marg = hinge.update(M)
            elif full:
                loss, marg = hinge.update(M)
                full_checks += 1
                if use_ws:
                    grown = working | (marg > 0)
                    if grown.sum() != working.sum():
                        working = grown
                        ws_rows = np.flatnonzero(working)
                        ws_geom = model.geometry.subset(ws_rows)
            else:
                loss, _ = hinge.update(M, rows=ws_rows, rows_geometry=ws_geom)
            ext_val, ext_grad = extra_at(M, lam, V)
            f = model.regularizer(M) + loss + ext_val
            history.append(f)
            if full:
                if cand is not None:
                    cf = full_value(*cand)
                    if cf < best_f:
                        best_f, best = cf, cand
                    cand_f, cand = np.inf, None
                if f < best_f:
                    best_f, best = f, (M, lam, V)
            elif f < min(cand_f, best_f):
                cand_f, cand = f, (M, lam, V)
            if callback is not None:
                callback(n_iter, M, f)
        if cand is not None:
            cf = full_value(*cand)
            if cf < best_f:
                best_f, best = cf, cand
        if zero_subgradient:
            converged = True
            break
        improvement = (f_epoch_start - best_f) / max(1.0, abs(best_f))
        stalled = stalled + 1 if improvement < tol else 0
        if stalled >= STALLED_EPOCHS:
            converged = True
        epoch_len *= 2

    M_best, lam_b, V_b = best
    if oracle is not None:
        model = with_oracle(M_best, lam_b, V_b)  # the objective over the whole implicit set
    objective = model.value(M_best) + extra_at(M_best, lam_b, V_b)[0]
    elapsed = time.perf_counter() - t_start
    if not converged:
        warn_not_converged(solver_name, n_iter, f"best objective {objective:.6g}")
    return SolverResult(solver=solver_name, M=M_best, w=None, objective=float(objective), n_iter=n_iter,
                        converged=converged, history=np.asarray(history), time=elapsed,
                        info={"epochs": epochs, "full_checks": full_checks, "active_set": use_ws,
                              "working_set_size": int(model.m if oracle is not None else working.sum()),
                              "step0": step0, "zero_subgradient": zero_subgradient,
                              **({"model": model, "oracle_calls": oracle_calls, "max_working_set": max_ws,
                                  "violated_at_solution": model.m - base_model.m}
                                 if oracle is not None else {})})
