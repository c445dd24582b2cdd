r"""The Fantope supergradient theorem as executable checks with numbers.

Reference: thesis sec. 3.3; design §6.

Every function returns a dict of plain floats (residuals, gaps, values) that the harness
(``verification/methods/fantope.py``) turns into pass/fail checks against
``cvxmetric.verification.tolerances`` and that the tests assert on. Residuals are relative to
:math:`\|M\|_2` (the largest spectral norm involved) unless a docstring says otherwise; relative
gaps of values use :func:`cvxmetric.certificates.relative_difference` (the project's one
denominator, :math:`\max(|a|, |b|)`). No check raises: an SDP that cannot be solved makes the
function return ``{"error": reason}`` (:func:`never_raises`), which the harness reports as a
failed check with that reason.

1. :func:`lmo_checks` — :math:`W(M) \in \mathbb{F}_k` and
   :math:`\langle W(M), M\rangle = R(M) = \min_{A \in \mathbb{F}_k}\langle M, A\rangle` (SDP)
   :math:`=` ``cvxpy.lambda_sum_smallest`` (atom value and its SDP canonicalisation).
2. :func:`supergradient_checks` — :math:`R(M) + \langle F, X - M\rangle \ge R(X)` on random PSD and
   indefinite :math:`X`, and adversarially (a convex cvxpy problem over
   :math:`\{X \succeq 0, \mathrm{tr}\,X \le \tau\}`) for :math:`F = W(M)` and the SDP's LMO solution;
   strictly violated for the projector onto the :math:`k` largest eigenvectors.
3. :func:`uniqueness_checks` (positive eigengap: the LMO solution is :math:`W(M)` and the
   :math:`\varepsilon`-optimal face has spread :math:`\le \varepsilon / g`) and :func:`zero_gap_checks`
   (repeated eigenvalue at the cut: distinct supergradients, a non-singleton face, and one-sided
   directional derivatives equal to :math:`\min_{A \in \partial R(M)} \langle A, D\rangle`).
4. :func:`mm_checks` — MM monotone, fixed point, fast MM vs cvxpy MM.
"""
from __future__ import annotations

import functools

import numpy as np

from cvxmetric._checks import as_rng, as_square_symmetric
from cvxmetric.certificates import relative_difference
from cvxmetric.fantope import (FantopeModel, check_k, eigengap, fantope_projector, fantope_regularizer,
                               fantope_violation, sum_smallest_eigenvalues)
from cvxmetric.linalg import random_psd
from cvxmetric.formulations.base import SOLVER_OPTIONS
from cvxmetric.formulations.ladder import solve_certified
from cvxmetric.formulations.fantope import (build_fantope_bound, build_fantope_lmo, build_lmo_face_spread,
                                  build_supergradient_gap, fantope_mm_reference)
from cvxmetric.solvers.fantope_mm import fantope_mm
from cvxmetric.solvers.fantope_subgradient import fantope_subgradient

from . import tolerances as tol

__all__ = ["lmo_checks", "supergradient_checks", "uniqueness_checks", "zero_gap_matrix", "zero_gap_checks",
           "superdifferential_min", "directional_derivative", "random_orthogonal", "mm_checks",
           "top_projector"]


class CheckFailure(RuntimeError):
    """An SDP of a check could not be solved (reported as a failed check, never raised)."""


def never_raises(fn):
    """Decorate a check: any exception becomes ``{"error": "<what failed>"}`` (values absent).

    The harness turns a missing value into a failed check and prints the error (a failed SDP
    is a failed row with its reason, not a traceback).
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs) -> dict:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:   # noqa: BLE001 - reported, never hidden
            return {"error": f"{fn.__name__}: {type(exc).__name__}: {exc}"}
    return wrapper


def _scale(*mats) -> float:
    """Largest spectral norm of the matrices (1 for all-zero ones): residuals are relative to it."""
    return max([float(np.linalg.norm(A, 2)) for A in mats if A is not None] + [0.0]) or 1.0


def _solve_problem(prob, solver: str, what: str) -> float:
    try:
        prob.solve(solver=solver, **SOLVER_OPTIONS.get(solver, {}))
    except Exception as exc:
        raise CheckFailure(f"{what}: {solver} failed ({type(exc).__name__}: {exc})") from exc
    if prob.status != "optimal":
        raise CheckFailure(f"{what}: {solver} ended with status {prob.status!r}")
    return float(prob.value)


def _solve(form, solver: str = "CLARABEL"):
    sol = form.solve(solver)
    if not sol.ok or sol.point is None:
        raise CheckFailure(f"{form.method}: {solver} ended with status {sol.status!r}")
    return sol


def top_projector(M, k: int) -> np.ndarray:
    r"""Projector onto eigenvectors of the ``k`` **largest** eigenvalues: in :math:`\mathbb{F}_k`, but not in
    the LMO argmin unless the k largest and k smallest eigenvalues sum alike."""
    lam, V = np.linalg.eigh(as_square_symmetric(M, "M"))
    Vk = V[:, -k:]
    return Vk @ Vk.T


def random_orthogonal(d: int, seed=None) -> np.ndarray:
    """A Haar-random orthogonal matrix (QR of a Gaussian matrix with sign correction)."""
    rng = as_rng(seed)
    Q, Rq = np.linalg.qr(rng.standard_normal((d, d)))
    return Q * np.sign(np.diag(Rq))


@never_raises
def lmo_checks(M, k: int, *, solver: str = "CLARABEL") -> dict:
    r"""Check 1: :math:`W(M) \in \mathbb{F}_k`, :math:`\langle W, M\rangle = R(M) =` SDP LMO value
    :math:`=` ``lambda_sum_smallest``.

    Returns
    -------
    dict
        ``R``, ``w_fantope_violation``, ``w_value_err``, ``lmo_value_err``, ``lss_atom_err``
        (the atom's numeric value), ``lss_sdp_err`` (:math:`\max \lambda_{\text{sum smallest}}(X)` s.t.
        :math:`X = M`, through cvxpy's SDP canonicalisation), ``lmo_fantope_violation``,
        ``lmo_solution`` (the SDP's A), ``time_lmo``.
    """
    import cvxpy as cp

    M = as_square_symmetric(M, "M")
    d = M.shape[0]
    k = check_k(k, d)
    s = _scale(M)
    R, W = fantope_regularizer(M, k)
    sol = _solve(build_fantope_lmo(M, k), solver)
    X = cp.Variable((d, d), symmetric=True)
    prob = cp.Problem(cp.Maximize(cp.lambda_sum_smallest(X, k)), [X == M])
    _solve_problem(prob, solver, "lambda_sum_smallest SDP")
    atom = float(cp.lambda_sum_smallest(cp.Constant(M), k).value)
    return {"R": R, "w_fantope_violation": fantope_violation(W, k),
            "w_value_err": abs(float(np.vdot(W, M)) - R) / s,
            "lmo_value_err": abs(sol.value - R) / s,
            "lss_atom_err": abs(atom - R) / s, "lss_sdp_err": abs(float(prob.value) - R) / s,
            "lmo_fantope_violation": fantope_violation(0.5 * (sol.point + sol.point.T), k),
            "lmo_solution": 0.5 * (sol.point + sol.point.T), "time_lmo": sol.total_time}


def _random_slack(M, F, k, rng, n: int) -> float:
    R_M = sum_smallest_eigenvalues(M, k)
    d = M.shape[0]
    sM = float(np.linalg.norm(M, 2))
    worst = np.inf
    for t in range(n):
        scale = max(sM, 1.0) * 10.0 ** rng.uniform(-2, 1)
        if t % 2 == 0:
            X = random_psd(d, rank=int(rng.integers(1, d + 1)), seed=rng, scale=scale)
        else:
            G = rng.standard_normal((d, d))
            X = scale * 0.5 * (G + G.T) / np.sqrt(d)
        slack = R_M + float(np.vdot(F, X - M)) - sum_smallest_eigenvalues(X, k)
        worst = min(worst, slack / _scale(M, X))
    return float(worst)


@never_raises
def supergradient_checks(M, k: int, *, seed=None, n_random: int = 200, F_lmo=None,
                         solver: str = "CLARABEL") -> dict:
    r"""Check 2: the supergradient inequality, random and adversarial.

    Parameters
    ----------
    M : array_like, shape (d, d)
        PSD (the adversarial set contains :math:`X = M` with :math:`\tau = 2\,\mathrm{tr}\,M`).
    F_lmo : array_like, optional
        The SDP's LMO solution (:func:`lmo_checks`); tested like :math:`W(M)`.

    Returns
    -------
    dict
        ``random_min_W`` (min relative slack over ``n_random`` random X, half PSD, half
        indefinite, for F = W(M)), ``adv_W``, ``adv_lmo`` (adversarial optima, relative), ``adv_top``
        (for the top-k projector, relative; must be clearly negative), ``adv_top_closed_err``
        (|adv_top - (R(M) - <F, M>)|, the closed form), ``random_min_top``.
    """
    M = as_square_symmetric(M, "M", psd=True)
    k = check_k(k, M.shape[0])
    rng = as_rng(seed)
    s = _scale(M)
    W = fantope_projector(M, k)
    top = top_projector(M, k)
    tau = 2.0 * max(float(np.trace(M)), 1.0)
    out = {"random_min_W": _random_slack(M, W, k, rng, n_random),
           "random_min_top": _random_slack(M, top, k, rng, max(20, n_random // 10)), "tau": tau}
    for name, F in (("W", W), ("lmo", F_lmo), ("top", top)):
        if F is None:
            continue
        sol = _solve(build_supergradient_gap(M, F, k, tau), solver)
        out[f"adv_{name}"] = sol.value / s
        if name == "top":
            closed = sum_smallest_eigenvalues(M, k) - float(np.vdot(top, M))
            out["adv_top_closed_err"] = abs(sol.value - closed) / s
    return out


def superdifferential_min(M, k: int, D, *, cluster_rtol: float = 1e-9) -> float:
    r"""Closed form of :math:`\min_{A \in \partial R(M)} \langle A, D\rangle` (= :math:`R'(M; D)`).

    With :math:`c = \lambda_{d-k+1}(M)` (the k-th smallest), :math:`P` the projector on eigenvectors with
    eigenvalues :math:`< c`, :math:`V_c` those equal to :math:`c` (within ``cluster_rtol``) and
    :math:`j = k - \mathrm{rank}\,P`, the face is :math:`\{P + V_c B V_c^\top : B \in \mathbb{F}_j\}`, so the
    minimum is :math:`\langle P, D\rangle + ` (sum of the j smallest eigenvalues of :math:`V_c^\top D V_c`).
    """
    M = as_square_symmetric(M, "M")
    D = as_square_symmetric(D, "D", d=M.shape[0])
    k = check_k(k, M.shape[0])
    lam, V = np.linalg.eigh(M)
    c = lam[k - 1]
    band = cluster_rtol * _scale(M)
    below = lam < c - band
    cluster = np.abs(lam - c) <= band
    j = k - int(below.sum())
    Pb = V[:, below]
    Vc = V[:, cluster]
    inner = np.linalg.eigvalsh(Vc.T @ D @ Vc)[:j]
    return float(np.sum(Pb * (D @ Pb))) + float(np.sum(inner))


def directional_derivative(M, k: int, D, *, step: float = tol.FD_STEP) -> float:
    r"""Forward difference :math:`(R(M + tD) - R(M)) / t`, :math:`t` = ``step`` :math:`\|M\|_2 / \|D\|_2`."""
    M = as_square_symmetric(M, "M")
    D = as_square_symmetric(D, "D", d=M.shape[0])
    t = step * _scale(M) / max(float(np.linalg.norm(D, 2)), 1e-300)
    return (sum_smallest_eigenvalues(M + t * D, k) - sum_smallest_eigenvalues(M, k)) / t


def _face_min_cvxpy(M, k, D, eps, solver):
    import cvxpy as cp

    d = M.shape[0]
    A = cp.Variable((d, d), symmetric=True)
    R = sum_smallest_eigenvalues(M, k)
    cons = [A >> 0, np.eye(d) - A >> 0, cp.trace(A) == k, cp.trace(M @ A) <= R + eps]
    prob = cp.Problem(cp.Minimize(cp.trace(D @ A)), cons)
    return _solve_problem(prob, solver, "face minimisation")


@never_raises
def uniqueness_checks(M, k: int, *, lmo_solution=None, solver: str = "CLARABEL") -> dict:
    r"""Check 3, positive eigengap: the LMO solution equals :math:`W(M)` and the face is a point.

    Returns
    -------
    dict
        ``eigengap``, ``lmo_dist`` (:math:`\|A_{\text{LMO}} - W(M)\|_F`), ``face_spread`` (max of
        :math:`k - \langle W, A\rangle` over the ``FACE_EPS``-optimal face) and ``face_spread_bound``
        (:math:`\varepsilon / g`).
    """
    M = as_square_symmetric(M, "M")
    k = check_k(k, M.shape[0])
    g = eigengap(M, k)
    W = fantope_projector(M, k)
    if lmo_solution is None:
        lmo = lmo_checks(M, k, solver=solver)
        if "error" in lmo:
            raise CheckFailure(lmo["error"])
        lmo_solution = lmo["lmo_solution"]
    eps = tol.FACE_EPS * _scale(M)
    spread = _solve(build_lmo_face_spread(M, k, W, eps), solver).value if np.isfinite(g) else 0.0
    return {"eigengap": g, "lmo_dist": float(np.linalg.norm(lmo_solution - W)),
            "face_spread": float(spread), "face_spread_bound": eps / g if g > 0 else np.inf}


def zero_gap_matrix(d: int, k: int, *, seed=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""A PSD matrix with :math:`\lambda_{d-k} = \lambda_{d-k+1}` and two distinct supergradients.

    Eigenvalues (ascending) :math:`1, 2, \dots, d` with the :math:`(k+1)`-th set equal to the k-th, in a
    random orthonormal basis :math:`Q`. Returns ``(M, W1, W2)``: :math:`W_1` projects on the first
    :math:`k` columns of :math:`Q`, :math:`W_2` swaps column :math:`k` for column :math:`k+1` (both in the
    repeated eigenspace), :math:`\|W_1 - W_2\|_F = \sqrt 2`. Needs ``1 <= k < d``.
    """
    if not isinstance(d, (int, np.integer)) or d < 2:
        raise ValueError(f"d must be an integer >= 2 for a cut between eigenvalues; got {d}")
    if not 1 <= k < d:
        raise ValueError(f"k must satisfy 1 <= k < d = {d} for a zero eigengap to exist; got {k}")
    Q = random_orthogonal(d, seed)
    lam = np.arange(1.0, d + 1.0)
    lam[k] = lam[k - 1]
    M = (Q * lam) @ Q.T
    M = 0.5 * (M + M.T)
    V1 = Q[:, :k]
    V2 = Q[:, list(range(k - 1)) + [k]]
    return M, V1 @ V1.T, V2 @ V2.T


@never_raises
def zero_gap_checks(d: int, k: int, *, seed=None, n_directions: int = 3, solver: str = "CLARABEL") -> dict:
    r"""Check 3, zero eigengap: several supergradients and the directional derivatives of :math:`R`.

    Returns
    -------
    dict
        ``eigengap`` (0 up to round-off), ``w_fantope_violation`` and ``w_value_err`` (max over
        W1, W2), ``w_distance`` (:math:`\|W_1 - W_2\|_F`), ``adv_min`` (min adversarial optimum of
        W1, W2, relative), ``face_spread`` (from W1; must be clearly positive), and over random
        directions D: ``dd_fd_err`` (max |forward difference - closed form|),
        ``dd_cvxpy_above`` (max of (cvxpy minimum over the eps-optimal face - closed form) / ||D||:
        the eps-face contains the face, so this is <= 0 up to solver accuracy), ``dd_cvxpy_below``
        (max of (closed form - cvxpy) / ||D||, at most ``dd_cvxpy_below_bound`` =
        C sqrt(eps): near-optimal rotations by an angle theta cost theta^2 * gap in <M, A> but move
        <D, A> by O(theta ||D||)), ``kink`` (max of
        :math:`(R'(M; D) + R'(M; -D)) / \|D\|_2`, negative at a kink).
    """
    rng = as_rng(seed)
    M, W1, W2 = zero_gap_matrix(d, k, seed=rng)
    s = _scale(M)
    R = sum_smallest_eigenvalues(M, k)
    tau = 2.0 * float(np.trace(M))
    adv = [_solve(build_supergradient_gap(M, W, k, tau), solver).value / s for W in (W1, W2)]
    eps = tol.FACE_EPS * s
    spread = _solve(build_lmo_face_spread(M, k, W1, eps), solver).value
    eps_dir = tol.FACE_EPS_DIRECTIONAL * s
    fd_err, above, below, kink = 0.0, -np.inf, 0.0, -np.inf
    for _ in range(n_directions):
        G = rng.standard_normal((d, d))
        D = 0.5 * (G + G.T)
        nD = float(np.linalg.norm(D, 2))
        plus, minus = superdifferential_min(M, k, D), superdifferential_min(M, k, -D)
        fd_err = max(fd_err, abs(directional_derivative(M, k, D) - plus) / nD,
                     abs(directional_derivative(M, k, -D) - minus) / nD)
        cvx = _face_min_cvxpy(M, k, D, eps_dir, solver)
        above = max(above, (cvx - plus) / nD)
        below = max(below, (plus - cvx) / nD)
        kink = max(kink, (plus + minus) / nD)
    return {"eigengap": eigengap(M, k), "R": R,
            "w_fantope_violation": max(fantope_violation(W1, k), fantope_violation(W2, k)),
            "w_value_err": max(abs(float(np.vdot(W, M)) - R) for W in (W1, W2)) / s,
            "w_distance": float(np.linalg.norm(W1 - W2)), "adv_min": float(min(adv)),
            "face_spread": float(spread), "dd_fd_err": fd_err, "dd_cvxpy_above": float(above),
            "dd_cvxpy_below": float(below), "dd_cvxpy_below_bound": tol.FACE_DIRECTIONAL_C * np.sqrt(eps_dir),
            "kink": float(kink)}


@never_raises
def mm_checks(model: FantopeModel, *, solver: str = "CLARABEL", fast_options: dict | None = None,
              run_alg2: bool = True) -> dict:
    r"""Checks 4–5: MM monotone and at a certified fixed point; fast MM (and alg. 2) vs the reference MM.

    The reference is :func:`cvxmetric.formulations.fantope.fantope_mm_reference` (every step certified by
    :func:`cvxmetric.formulations.ladder.solve_certified`; ``solver`` is ignored). Every relative number
    uses :func:`~cvxmetric.certificates.relative_difference`.

    Returns
    -------
    dict
        ``phi_ref`` (trajectory), ``ref_max_increase`` and ``fast_max_increase`` (largest relative
        increase of :math:`\varphi` along each trajectory), ``fixed_point_gap`` (the reference's
        certified MM fixed-point gap :math:`\rho(M^*)` = relative gap between :math:`\varphi(M^*)`
        and the certified lower bound of :math:`\min \hat\varphi(\cdot; W(M^*))`; None when not
        certified), ``ref_message``, ``phi_star``, ``phi_fast``, ``fast_gap`` (relative
        difference), ``fast_rho`` (the fast MM's own fixed-point gap, from PDHG's bound),
        ``surrogate_gap`` (relative difference between :math:`\varphi(M_{\text{fast}})` = the
        bound at :math:`W(M_{\text{fast}})` evaluated there and that bound's certified optimum:
        the fast MM's fixed-point gap recomputed by the ladder; None when the ladder did not
        certify), ``surrogate_certificate_valid`` (``surrogate_gap - fast_rho``: > 0 beyond
        round-off means the fast certificate was wrong), ``surrogate_value_at_err`` (cvxpy
        ``value_at`` vs the fast inner objective), ``phi_alg2``, ``alg2_gap``, ``alg2_rho``,
        times, iterations, ``fast_converged``, ``alg2_converged``, ``ref_converged``,
        ``M_star``, ``M_fast``; ``errors`` lists what could not be computed.
    """
    errors: list[str] = []
    ref = fantope_mm_reference(model)
    phi_ref = ref.phi
    if not ref.converged:
        errors.append(f"reference MM: {ref.message}")

    def max_increase(phi):
        phi = np.asarray(phi, dtype=np.float64)
        if phi.size < 2:
            return 0.0
        return float(max(relative_difference(b, a) for a, b in zip(phi[:-1], phi[1:])))

    star = ref.objective if ref.M is not None else None
    fast = fantope_mm(model, **(fast_options or {}))
    W_last = fast.info["Ws"][-1]
    inner_obj = fast.info["bound_values"][-1]
    surr = build_fantope_bound(model, W_last)
    truth = solve_certified(surr, tol.MM_FIXED_POINT_RTOL / 10)
    surrogate_gap = None
    if truth.certified:
        surrogate_gap = relative_difference(inner_obj, truth.p_star)
    else:
        errors.append(f"bound at the fast MM's last W not certified (interval gap {truth.gap:.3g})")

    def rel(a, b):
        return None if a is None or b is None else relative_difference(a, b)

    out = {"phi_ref": phi_ref.tolist(), "ref_max_increase": max_increase(phi_ref),
           "fast_max_increase": max_increase(fast.history),
           "fixed_point_gap": ref.fixed_point_gap if ref.converged else None, "ref_message": ref.message,
           "phi_star": star, "phi_fast": fast.objective, "fast_gap": rel(fast.objective, star),
           "fast_rho": fast.measure_value, "surrogate_gap": surrogate_gap,
           "surrogate_certificate_valid": None if surrogate_gap is None else surrogate_gap - fast.measure_value,
           "surrogate_value_at_err": abs(relative_difference(surr.value_at(fast.M), inner_obj)),
           "phi_value_err": abs(relative_difference(model.value(fast.M), fast.objective)),
           "ref_iterations": len(phi_ref), "fast_outer": fast.n_iter, "fast_inner": fast.info["inner_iterations"],
           "time_ref": ref.time, "time_fast": fast.time, "fast_converged": fast.converged,
           "fast_message": fast.message, "ref_converged": ref.converged, "M_star": ref.M, "M_fast": fast.M,
           "errors": errors}
    if run_alg2:
        a2 = fantope_subgradient(model, **(fast_options or {}).get("inner_options", {}))
        out.update(phi_alg2=a2.objective, alg2_gap=rel(a2.objective, star), alg2_rho=a2.measure_value,
                   time_alg2=a2.time, alg2_converged=a2.converged, alg2_message=a2.message,
                   alg2_value_err=abs(relative_difference(model.value(a2.M), a2.objective)))
    return out
