r"""Fantope regularization in cvxpy: bound, LMO, MM, theorem checks.

Reference: thesis ch. 3; design §5.5.

* :func:`build_fantope_bound` — the convex bound at a fixed :math:`W \in \mathbb{F}_k`,

  .. math::
      \min_{M \succeq 0}\ \hat\varphi(M; W) = \mu\langle W, M\rangle + \gamma\,\mathrm{tr}\,M
      + \sum_q c_q [\delta_q + \langle M, C_{ij} - C_{kl}\rangle]_+ ,

  stated by :func:`cvxmetric.formulations.hinge.build_hinge_problem` (named constraints "psd", "hinge",
  "slack_nonneg"), so the hinge KKT checks apply unchanged;
* :func:`build_fantope_lmo` — the linear minimisation oracle over the Fantope,
  :math:`\min_A \langle M, A\rangle` s.t. :math:`A \succeq 0` ("lower"), :math:`I - A \succeq 0` ("upper"),
  :math:`\mathrm{tr}\,A = k` ("trace"), whose value is :math:`R(M)` (Ky Fan) and whose solution set is
  :math:`\partial R(M)`; independent of the eigen formula;
* :func:`build_lmo_face_spread` — the largest :math:`k - \langle W, A\rangle` over the
  :math:`\varepsilon`-optimal face of the LMO: 0 iff the face is :math:`\{W\}`;
* :func:`build_supergradient_gap` — the adversarial supergradient test
  :math:`\min_X R(M) + \langle F, X - M\rangle - R(X)` over :math:`\{X \succeq 0, \mathrm{tr}\,X \le \tau\}`
  (convex: :math:`-R` is convex), :math:`\ge 0` iff :math:`F` is a supergradient on that set;
* :func:`fantope_mm_reference` — the reference DC solver, majorization–minimization (thesis
  alg. 3): :math:`M^{n+1} \in \mathrm{argmin}_{M \succeq 0} \hat\varphi(M; W(M^n))`, one certified
  solve per step (:func:`cvxmetric.formulations.ladder.solve_certified`), stopped by the certified MM
  fixed-point gap.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

import cvxpy as cp
import numpy as np

from cvxmetric._checks import as_square_symmetric, check_int_in_range, check_positive
from cvxmetric.certificates import relative_gap
from cvxmetric.fantope import FantopeModel, check_k, fantope_center, fantope_projector, sum_smallest_eigenvalues
from cvxmetric.linalg import project_psd

from .base import Formulation, symmetric_parameter
from .hinge import build_hinge_problem
from .ladder import solve_certified

__all__ = ["build_fantope_bound", "build_fantope_lmo", "build_lmo_face_spread", "build_supergradient_gap",
           "MMTrajectory", "fantope_mm_reference", "MM_TOL", "MM_STEP_RTOL", "MM_MAX_ITER"]

#: Tolerance of the reference MM's fixed-point gap rho(M) = relative_gap(phi(M), L), L the certified
#: lower bound of the bound at W(M) (see :func:`fantope_mm_reference`): the harness' fixed-point
#: tolerance (cvxmetric.verification.tolerances.MM_FIXED_POINT_RTOL).
MM_TOL = 1e-5
#: Relative width of the certified interval each MM step asks :func:`cvxmetric.formulations.ladder.solve_certified`
#: for: rho(M^n) is that width plus the decrease left, so it must be below MM_TOL. Clarabel
#: certifies ~1e-8 on the default instances at the first rung.
MM_STEP_RTOL = 1e-6
#: Iteration limit of the reference MM (measured: the default instances stop in 3-7 steps).
MM_MAX_ITER = 30


def build_fantope_bound(model: FantopeModel, W) -> Formulation:
    r"""cvxpy statement of the convex bound :math:`\hat\varphi(\cdot; W)` (see the module docstring).

    Parameters
    ----------
    model : FantopeModel
    W : array_like, shape (d, d)
        A point of the Fantope :math:`\mathbb{F}_k` (``ValueError`` otherwise).

    Returns
    -------
    Formulation
        ``method="fantope"``, variables ``M`` and ``xi``; ``model`` is the bound's
        :class:`~cvxmetric.models.HingeModel`; ``info["W"]`` the validated ``W``.
    """
    if not isinstance(model, FantopeModel):
        raise TypeError(f"model must be a FantopeModel; got {type(model).__name__}")
    W = model.check_w(W)
    form = build_hinge_problem(model.bound(W), method="fantope")
    form.info["W"] = W
    form.info["fantope_model"] = model
    return form


def _lmo_set(A: cp.Variable, k: int) -> dict:
    d = A.shape[0]
    return {"lower": A >> 0, "upper": np.eye(d) - A >> 0, "trace": cp.trace(A) == k}


def build_fantope_lmo(M, k: int) -> Formulation:
    r"""The Fantope LMO :math:`\min_{A \in \mathbb{F}_k} \langle M, A\rangle` as an SDP.

    Parameters
    ----------
    M : array_like, shape (d, d)
        Symmetric (not necessarily PSD).
    k : int
        ``1 <= k <= d``.

    Returns
    -------
    Formulation
        ``point_name="A"``; named constraints "lower" (:math:`A \succeq 0`), "upper"
        (:math:`I - A \succeq 0`), "trace" (:math:`\mathrm{tr} A = k`); ``value_at(A) = <M, A>``.
    """
    M = as_square_symmetric(M, "M")
    d = M.shape[0]
    k = check_k(k, d)
    A = cp.Variable((d, d), symmetric=True, name="A")
    cons = _lmo_set(A, k)
    problem = cp.Problem(cp.Minimize(cp.trace(M @ A)), list(cons.values()))

    def evaluate(point) -> float:
        return float(np.vdot(M, as_square_symmetric(point, "A", d=d)))

    return Formulation(method="fantope_lmo", problem=problem, variables={"A": A}, constraints=cons,
                       point_name="A", evaluate=evaluate, info={"M": M, "k": k})


def _matrix_pair(M, k, B, b_name: str, t, t_name: str):
    """Validated (M, k, B, t, R(M)) for the two-matrix theorem problems."""
    M = as_square_symmetric(M, "M")
    k = check_k(k, M.shape[0])
    B = as_square_symmetric(B, b_name, d=M.shape[0])
    return M, k, B, check_positive(t, t_name), sum_smallest_eigenvalues(M, k)


def build_lmo_face_spread(M, k: int, W, eps: float) -> Formulation:
    r"""Largest distance from ``W`` over the :math:`\varepsilon`-optimal face of the LMO.

    .. math::
        \max_{A \in \mathbb{F}_k}\ k - \langle W, A\rangle \quad\text{s.t.}\quad
        \langle M, A\rangle \le R(M) + \varepsilon \ (\text{"face"}).

    For a rank-k projector ``W`` and :math:`A \in \mathbb{F}_k`, :math:`k - \langle W, A\rangle \ge 0` with
    equality iff :math:`A = W`. If :math:`W = W(M)` and the eigengap :math:`g` is positive,
    :math:`\langle M, A\rangle - R(M) \ge g\,(k - \langle W, A\rangle)`, so the optimal value is at most
    :math:`\varepsilon / g` (the LMO solution is unique); with a zero eigengap it is bounded
    away from 0 (the superdifferential is not a singleton).
    """
    M, k, W, eps, R = _matrix_pair(M, k, W, "W", eps, "eps")
    d = M.shape[0]
    A = cp.Variable((d, d), symmetric=True, name="A")
    cons = _lmo_set(A, k)
    cons["face"] = cp.trace(M @ A) <= R + eps
    problem = cp.Problem(cp.Maximize(k - cp.trace(W @ A)), list(cons.values()))
    return Formulation(method="fantope_face", problem=problem, variables={"A": A}, constraints=cons,
                       point_name="A", evaluate=lambda P: float(k - np.vdot(W, P)),
                       info={"M": M, "k": k, "W": W, "eps": eps, "R": R})


def build_supergradient_gap(M, F, k: int, tau: float) -> Formulation:
    r"""Adversarial supergradient test of ``F`` at ``M``: a convex problem in ``X``.

    .. math::
        \min_{X}\ R(M) + \langle F, X - M\rangle - R(X) \quad\text{s.t.}\quad
        X \succeq 0\ (\text{"psd"}),\ \mathrm{tr}\,X \le \tau\ (\text{"trace"}),

    with :math:`R(X)` = ``cvxpy.lambda_sum_smallest(X, k)`` (concave, so the objective is convex).
    :math:`F` is a supergradient of :math:`R` at :math:`M` on this set iff the value is :math:`\ge 0`
    (it is 0 at :math:`X = M` when :math:`\mathrm{tr}\,M \le \tau`). For any :math:`F \in \mathbb{F}_k`,
    :math:`\langle F, X\rangle \ge R(X)` with equality at :math:`X = 0`, so the value is exactly
    :math:`R(M) - \langle F, M\rangle`: 0 on the LMO's argmin, negative off it.
    """
    M, k, F, tau, RM = _matrix_pair(M, k, F, "F", tau, "tau")
    d = M.shape[0]
    X = cp.Variable((d, d), symmetric=True, name="X")
    cons = {"psd": X >> 0, "trace": cp.trace(X) <= tau}
    objective = RM + cp.trace(F @ (X - M)) - cp.lambda_sum_smallest(X, k)
    problem = cp.Problem(cp.Minimize(objective), list(cons.values()))
    P = symmetric_parameter(d, "X_eval")
    value_expr = RM + cp.trace(F @ (P - M)) - cp.lambda_sum_smallest(P, k)

    def evaluate(point) -> float:
        P.value = as_square_symmetric(point, "X", d=d)
        return float(value_expr.value)

    return Formulation(method="fantope_supergradient", problem=problem, variables={"X": X},
                       constraints=cons, point_name="X", evaluate=evaluate,
                       info={"M": M, "F": F, "k": k, "tau": tau, "R_M": RM})


@dataclass
class MMTrajectory:
    r"""The path of a majorization–minimization run.

    Attributes
    ----------
    M : ndarray, shape (d, d) or None
        The returned iterate: the last one whose fixed-point gap was certified, else the last
        iterate (None when the first step already failed).
    phi : ndarray, shape (N,)
        :math:`\varphi(M^n)`, n = 1..N (non-increasing up to the certified accuracy of the steps).
    bound_values : ndarray, shape (N,)
        Upper end of each step's certified interval: :math:`\hat\varphi(M^{n}; W^{n-1})` at the step's
        feasible point, :math:`\ge \min \hat\varphi(\cdot; W^{n-1})`.
    lower_bounds : ndarray, shape (N,)
        Lower end of each step's certified interval (nan where the ladder gave none).
    Ms, Ws : list of ndarray
        Iterates :math:`M^n` and the bound points :math:`W^{n-1}` used to compute them.
    statuses : list of str
        Per step: the ladder rung that certified it, or ``"not certified: ..."`` with the attempts.
    fixed_point_gaps : list of float
        :math:`\rho(M^{n})` for each iterate whose bound at :math:`W(M^n)` was solved.
    converged : bool
        Whether :math:`\rho` of the returned iterate is at most ``tol`` (a certified critical point).
    message : str
        Why the run stopped (never an exception: a failed step ends the run with its reason).
    time : float
    info : dict
    """

    M: Optional[np.ndarray]
    phi: np.ndarray
    bound_values: np.ndarray
    Ms: list
    Ws: list
    statuses: list
    converged: bool
    time: float
    info: dict = field(default_factory=dict)
    lower_bounds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    fixed_point_gaps: list = field(default_factory=list)
    message: str = ""

    @property
    def objective(self) -> float:
        """:math:`\varphi` of the returned iterate (nan when there is none)."""
        return float(self.info.get("phi_out", np.nan))

    @property
    def fixed_point_gap(self) -> float:
        """:math:`\rho` of the returned iterate (inf when it was not measured)."""
        return float(self.info.get("rho_out", np.inf))

    @property
    def W(self) -> np.ndarray:
        """The bound point at the returned iterate, :math:`W(M)`."""
        return self.info["W_final"]


def _certified_step(model: FantopeModel, W, rtol: float):
    """One MM step: the bound at W solved by the ladder; never raises."""
    try:
        truth = solve_certified(build_fantope_bound(model, W), rtol)
    except Exception as exc:     # a failure is a stopped run with its reason, not a traceback
        return None, f"not certified: {type(exc).__name__}: {exc}"
    if truth.point is None:
        tried = "; ".join(f"{a.rung}: {a.status}" for a in truth.attempts)
        return None, f"not certified: no feasible point ({tried})"
    if truth.rung is None:
        tried = "; ".join(f"{a.rung}: {a.status}, gap {a.gap:.2g}" for a in truth.attempts)
        return truth, f"not certified: interval gap {truth.gap:.3g} > {rtol:.3g} ({tried})"
    return truth, truth.rung


def fantope_mm_reference(model: FantopeModel, *, W0=None, M0=None, max_iter: int = MM_MAX_ITER,
                         tol: float = MM_TOL, step_rtol: float = MM_STEP_RTOL,
                         solver: str | None = None) -> MMTrajectory:
    r"""Reference majorization–minimization (thesis alg. 3), every bound solved by the ladder.

    Parameters
    ----------
    model : FantopeModel
    W0 : array_like, shape (d, d), optional
        First bound point (in :math:`\mathbb{F}_k`). Default: :math:`W(M_0)` if ``M0`` is given, else the
        Fantope's barycentre :math:`(k/d) I` (so the first step is trace-regularized and no
        arbitrary eigenvector choice at :math:`M = 0` enters).
    M0 : array_like, shape (d, d), optional
        A PSD start; its bound point is :math:`W(M_0)`.
    max_iter : int
        Number of bound solves allowed.
    tol : float
        Tolerance of the fixed-point gap :math:`\rho` (Notes).
    step_rtol : float
        Width of the certified interval required of every step (:func:`cvxmetric.formulations.ladder.solve_certified`).
    solver : None
        Kept for backward compatibility and ignored: the ladder chooses the solvers.

    Returns
    -------
    MMTrajectory
        Never raises for a solver failure: a step that cannot be certified ends the run
        (``converged=False``, the reason in ``message`` and ``statuses``).

    Notes
    -----
    Step n solves :math:`\min_{M \succeq 0} \hat\varphi(M; W^n)` by
    :func:`cvxmetric.formulations.ladder.solve_certified`: a certified interval :math:`[L_n, U_n]` (a dual
    bound repaired to exact feasibility, and the value of a PSD point) whatever the cvxpy status
    (``optimal_inaccurate`` on rank-deficient data is fine when the interval is tight). The next
    iterate is that PSD point, so :math:`\varphi(M^{n+1}) \le U_n` exactly, and
    :math:`U_n \le \varphi(M^n) + (U_n - L_n)` (non-increasing up to the certified width).

    Stopping rule: with :math:`W^n = W(M^n)`, :math:`L_n` also certifies :math:`M^n` by the MM
    fixed-point gap

    .. math:: \rho(M^n) = \frac{\varphi(M^n) - L_n}{\max(|\varphi(M^n)|, |L_n|)} \le \text{tol},

    which is 0 iff :math:`M^n` minimises its own majorizer: a critical point of the DC objective
    (the measure of :func:`cvxmetric.solvers.fantope_mm.fantope_mm`). The run returns that :math:`M^n`.
    """
    if not isinstance(model, FantopeModel):
        raise TypeError(f"model must be a FantopeModel; got {type(model).__name__}")
    max_iter = check_int_in_range(max_iter, "max_iter", 1, 10**6)
    tol = check_positive(tol, "tol")
    step_rtol = check_positive(step_rtol, "step_rtol")
    t0 = time.perf_counter()
    if W0 is not None and M0 is not None:
        raise ValueError("give at most one of W0 and M0")
    M = None
    if M0 is not None:
        M = as_square_symmetric(M0, "M0", d=model.d, psd=True)
        W = fantope_projector(M, model.k)
    elif W0 is not None:
        W = model.check_w(W0, "W0")
    else:
        W = fantope_center(model.d, model.k)
    tight = M is not None
    phi, bounds, lowers, Ms, Ws, statuses, rhos = [], [], [], [], [], [], []
    out = None               # (M, phi, rho) of the last iterate whose fixed-point gap was measured
    message = f"stopped after {max_iter} steps without a certified fixed point"
    for _ in range(max_iter):
        truth, status = _certified_step(model, W, step_rtol)
        lower = None if truth is None else truth.bounds.lower
        if tight and lower is not None:
            phi_M = model.value(M)
            rho = relative_gap(phi_M, lower)
            rhos.append(rho)
            out = (M, phi_M, rho)
            if rho <= tol:
                message = f"certified fixed point: rho = {rho:.3g} <= tol {tol:.3g}"
                break
        if truth is None or truth.rung is None:
            statuses.append(status)
            message = f"step {len(statuses)} {status}"
            break
        M = project_psd(truth.point)
        Ms.append(M)
        Ws.append(W)
        bounds.append(truth.bounds.upper)
        lowers.append(np.nan if lower is None else lower)
        statuses.append(status)
        phi.append(model.value(M))
        W, tight = fantope_projector(M, model.k), True
    if out is None and M is not None:
        out = (M, model.value(M), np.inf)
    M_out, phi_out, rho_out = out if out is not None else (None, np.nan, np.inf)
    converged = bool(rho_out <= tol)
    info = {"W_final": None if M_out is None else fantope_projector(M_out, model.k), "phi_out": phi_out,
            "rho_out": rho_out, "step_rtol": step_rtol}
    return MMTrajectory(M=M_out, phi=np.asarray(phi), bound_values=np.asarray(bounds), Ms=Ms, Ws=Ws,
                        statuses=statuses, converged=converged, time=time.perf_counter() - t0, info=info,
                        lower_bounds=np.asarray(lowers), fixed_point_gaps=rhos, message=message)
