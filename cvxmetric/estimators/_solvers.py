"""How the estimators reach the solvers: one adapter per method, and the exact ``solver="cvxpy"``.

The fast solvers are the ``solve_<method>`` facades of :mod:`cvxmetric.solvers`; an estimator's
``solver=`` is the facade's ``method=``.

Every fit is stated as a :class:`cvxmetric.instances.Instance` (data, constraints, the model's
hyper-parameters under the names the harness reads), so that the fast solve, the exact solve and
``verify()`` see one and the same problem. This module is the only place that knows today's
solver entry points and parameter names:

* ``make_instance_<method>``: the estimator's parameters (the project's vocabulary:
  ``n_neighbors``, ``regularization``, ``reg_weight``, ``trace_weight``, ``rank``) turned into an
  Instance;
* ``run_<method>``: the fast solver of an Instance by one of its ``method=`` names;
* :func:`solve_exact`: ``solver="cvxpy"``, the method's cvxpy formulation solved by
  :func:`cvxmetric.formulations.ladder.solve_certified` and turned into the same result contract
  (lower bound = the certified interval's lower end). cvxpy and the formulations are imported
  only here and only when called, so ``import cvxmetric`` never loads cvxpy.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from cvxmetric.instances import Instance
from cvxmetric.solvers.result import SolverResult, make_result

__all__ = ["MethodSolvers", "SOLVERS", "EXACT", "solve", "solve_exact", "instance_name"]

#: The name of the exact solver of every estimator.
EXACT = "cvxpy"


@dataclass(frozen=True)
class MethodSolvers:
    """The fast solvers of one method (the first is the default) and how to run them.

    ``verify()`` holds a solver to the thresholds the harness applies to it, read from the
    harness' method module (``cvxmetric.verification.methods.<method>.TOLERANCES``, through
    ``get_spec(method).tolerances``): one place, so the two cannot drift.
    """

    methods: tuple
    run: Callable


def instance_name(kind: str, X: np.ndarray, *parts) -> str:
    """A name that identifies the fitted problem by its content (the harness caches by name)."""
    h = hashlib.sha1(np.ascontiguousarray(X).tobytes())
    for p in parts:
        if isinstance(p, np.ndarray):
            h.update(np.ascontiguousarray(p).tobytes())
        elif hasattr(p, "idx"):       # a ConstraintSet
            for a in (p.idx, p.delta, p.weight):
                h.update(np.ascontiguousarray(a).tobytes())
        elif isinstance(p, dict):
            for k in sorted(p):
                v = p[k]
                h.update(k.encode())
                h.update(np.ascontiguousarray(v).tobytes() if isinstance(v, np.ndarray) else repr(v).encode())
        else:
            h.update(repr(p).encode())
    return f"{kind}-fit-{h.hexdigest()[:12]}"


def _options(tol, max_iter, max_iter_name: Optional[str] = "max_iter", **options) -> dict:
    out = dict(options)
    if tol is not None:
        out["tol"] = tol
    if max_iter is not None:
        if max_iter_name is None:
            raise ValueError("max_iter is not used by this solver (it solves in closed form); leave max_iter=None")
        out[max_iter_name] = max_iter
    return out


# ---------------------------------------------------------------------------------------- LMNN
def make_instance_lmnn(X, y, *, n_neighbors: int, regularization: float, margin: float) -> Instance:
    params = {"n_neighbors": n_neighbors, "regularization": regularization, "margin": margin}
    return Instance("lmnn", instance_name("lmnn", X, y, params), X, None, params=params, y=y)


def run_lmnn(inst: Instance, method: str, *, tol, max_iter, options: dict, random_state) -> SolverResult:
    from cvxmetric.solvers import solve_lmnn
    return solve_lmnn(inst.X, inst.y, method=method, **inst.params, **_options(tol, max_iter, **options))


# ---------------------------------------------------------------------------------------- ITML
def make_instance_itml(X, constraints, *, gamma: float, prior) -> Instance:
    params = {"gamma": gamma} if prior is None else {"gamma": gamma, "prior": np.asarray(prior, dtype=np.float64)}
    return Instance("itml", instance_name("itml", X, constraints, params), X, constraints, params=params)


def run_itml(inst: Instance, method: str, *, tol, max_iter, options: dict, random_state) -> SolverResult:
    from cvxmetric.solvers import solve_itml
    opts = _options(tol, max_iter, **options)
    opts.setdefault("seed", random_state if random_state is not None else 0)
    return solve_itml(inst.X, inst.constraints, method=method, **inst.params, **opts)


# ----------------------------------------------------------------------------------------- MMC
def make_instance_mmc(X, constraints) -> Instance:
    return Instance("mmc", instance_name("mmc", X, constraints), X, constraints, params={})


def run_mmc(inst: Instance, method: str, *, tol, max_iter, options: dict, random_state) -> SolverResult:
    from cvxmetric.solvers import solve_mmc
    return solve_mmc(inst.X, inst.constraints, method=method, **_options(tol, max_iter, **options))


# --------------------------------------------------------------------------------------- Qwise
def make_instance_qwise(X, constraints, *, regularizer: str, reg_weight: float, C_Q: float, C_P: float,
                        rank, trace_weight: float) -> Instance:
    if regularizer == "fantope":
        params = {"rank": rank, "reg_weight": reg_weight, "trace_weight": trace_weight, "C_Q": C_Q, "C_P": C_P}
        return Instance("fantope", instance_name("fantope", X, constraints, params), X, constraints, params=params)
    params = {"regularizer": regularizer, "C_Q": C_Q, "C_P": C_P, "reg_weight": reg_weight}
    return Instance("qwise", instance_name("qwise", X, constraints, params), X, constraints, params=params)


def run_qwise(inst: Instance, method: str, *, tol, max_iter, options: dict, random_state) -> SolverResult:
    from cvxmetric.solvers import solve_qwise
    return solve_qwise(inst.X, inst.constraints, method=method, **inst.params, **_options(tol, max_iter, **options))


def run_fantope(inst: Instance, method: str, *, tol, max_iter, options: dict, random_state) -> SolverResult:
    from cvxmetric.solvers import solve_fantope
    opts = _options(tol, max_iter, **options)
    if method == "factor":
        opts.setdefault("seed", random_state if random_state is not None else 0)
    return solve_fantope(inst.X, inst.constraints, method=method, **inst.params, **opts)


def fantope_verify_instance(inst: Instance, result: SolverResult) -> Instance:
    """The instance the harness verifies a Fantope fit on: the convex bound at ``W(M)`` of the
    returned ``M`` (tight there), whose certified minimum is the critical-point test of ``M``."""
    from dataclasses import replace

    from cvxmetric.fantope import fantope_projector
    return replace(inst, extra={"W": fantope_projector(result.M, inst.d - inst.params["rank"])})


# --------------------------------------------------------------------------------- BoostMetric
def make_instance_boostmetric(X, y, *, loss: str, nu, n_neighbors: int, n_impostors: int) -> Instance:
    from cvxmetric.generators import triplets_from_labels
    from cvxmetric.instances.boostmetric import DEFAULT_NU, HINGE_TAIL
    triplets = triplets_from_labels(X, y, n_neighbors=n_neighbors, n_impostors=n_impostors)
    if nu is None:
        nu = 1.0 / max(1, int(round(HINGE_TAIL * len(triplets)))) if loss == "hinge" else DEFAULT_NU[loss]
    params = {"loss": loss, "nu": float(nu)}
    return Instance("boostmetric", instance_name("boostmetric", X, triplets, params), X, triplets,
                    params=params, y=y)


def run_boostmetric(inst: Instance, method: str, *, tol, max_iter, options: dict, random_state) -> SolverResult:
    from cvxmetric.solvers import solve_boostmetric
    return solve_boostmetric(inst.X, inst.constraints, method=method, **inst.params,
                             **_options(tol, max_iter, **options))


# ---------------------------------------------------------------------------------------- ORML
def make_instance_orml(X, pairs, relevant, session, *, n_neighbors: int, alpha: float, beta: float,
                       output_weight: float, n_components: int) -> Instance:
    params = {"n_neighbors": n_neighbors, "alpha": alpha, "beta": beta, "output_weight": output_weight,
              "r": n_components}
    extra = {"pairs": pairs, "relevant": relevant, "session": session}
    name = instance_name("orml", X, pairs, relevant, session if session is not None else "", params)
    return Instance("orml", name, X, None, params=params, extra=extra)


def orml_model_of(inst: Instance):
    from cvxmetric.orml import orml_model
    e = inst.extra
    return orml_model(inst.X, e["pairs"], e["relevant"], session=e["session"], **inst.params)


def run_orml(inst: Instance, method: str, *, tol, max_iter, options: dict, random_state) -> SolverResult:
    from cvxmetric.solvers import solve_orml
    e = inst.extra
    return solve_orml(inst.X, e["pairs"], e["relevant"], session=e["session"], method=method, **inst.params,
                      **_options(tol, max_iter, None, **options))


#: The fast solvers of each method (first: the default). ``verify()`` holds each to the harness'
#: thresholds of the same solver (``cvxmetric.verification.methods.<method>.TOLERANCES``).
SOLVERS = {
    # PDHG first: on separable data (30 blobs points, small optimum, many tight triplets) the
    # subgradient engine was measured to stop uncertified at its 20,000-iteration limit (3.8 s,
    # certified gap 3.6e-3) where PDHG certifies a 1.5e-7 gap in 0.07 s (one run, loaded machine)
    "lmnn": MethodSolvers(("pdhg", "subgradient"), run_lmnn),
    "itml": MethodSolvers(("bregman",), run_itml),
    "mmc": MethodSolvers(("ascent",), run_mmc),
    "qwise": MethodSolvers(("pdhg", "subgradient"), run_qwise),
    "fantope": MethodSolvers(("mm", "subgradient", "factor"), run_fantope),
    "boostmetric": MethodSolvers(("projected_gradient", "totally_corrective", "column_generation", "stagewise"),
                                 run_boostmetric),
    "orml": MethodSolvers(("pursuit",), run_orml),
}


def solve(inst: Instance, solver: str, *, tol=None, max_iter=None, options: Optional[dict] = None,
          random_state=None) -> SolverResult:
    """Solve ``inst`` by a fast solver of its method, or exactly (``solver="cvxpy"``)."""
    options = dict(options or {})
    if solver == EXACT:
        if options:
            raise ValueError(f"solver='cvxpy' takes no solver_options (got {sorted(options)}): the solve ladder "
                             "chooses the cvxpy solvers; only tol (the certified relative gap) applies")
        return solve_exact(inst, tol=tol, max_iter=max_iter)
    # the facade rejects an option the solver does not read (cvxmetric._checks.check_method_options)
    return SOLVERS[inst.method].run(inst, solver, tol=tol, max_iter=max_iter, options=options,
                                    random_state=random_state)


# ------------------------------------------------------------------------------ solver="cvxpy"
def _formulation(inst: Instance):
    """The cvxpy formulation of an instance (the harness' ground truth of the same problem)."""
    if inst.method == "lmnn":
        from cvxmetric.formulations.lmnn import build_lmnn
        return build_lmnn(inst.X, inst.y, **inst.params)
    if inst.method == "itml":
        from cvxmetric.formulations.itml import build_itml
        return build_itml(inst.X, inst.constraints, **inst.params)
    if inst.method == "mmc":
        from cvxmetric.formulations.mmc import build_mmc
        return build_mmc(inst.X, inst.constraints)
    if inst.method == "qwise":
        from cvxmetric.formulations.qwise import build_qwise
        return build_qwise(inst.X, inst.constraints, **inst.params)
    if inst.method == "boostmetric":
        from cvxmetric.formulations.boostmetric import build_boostmetric
        return build_boostmetric(inst.X, inst.constraints, **inst.params)
    if inst.method == "orml":
        from cvxmetric.formulations.orml import build_orml
        return build_orml(orml_model_of(inst))
    raise ValueError(f"no single convex formulation for method {inst.method!r}")


def default_exact_tol(method: str) -> float:
    """The relative width the harness requires of this method's certified ground truth."""
    from cvxmetric.verification.registry import get_spec
    from cvxmetric.verification.tolerances import TRUTH_RTOL
    spec = get_spec(method)
    return spec.truth_rtol if spec.truth_rtol is not None else TRUTH_RTOL


def solve_exact(inst: Instance, *, tol=None, max_iter=None) -> SolverResult:
    """``solver="cvxpy"``: the certified ground truth as a :class:`SolverResult`.

    The interval :math:`[\\ell, u]` of :func:`cvxmetric.formulations.ladder.solve_certified` gives
    ``objective = u`` (the value of its feasible point), ``lower_bound = \\ell`` and
    ``measure = "certified_gap"`` held to ``tol`` (default: the harness' ground-truth tolerance of
    the method). Fantope regularization is not convex: its exact solver is the reference
    majorization-minimization (every bound solved by the ladder), certified as a critical point
    by its fixed-point gap (``measure = "kkt_residual"``).
    """
    tol = default_exact_tol(inst.method) if tol is None else float(tol)
    if inst.method == "fantope":
        return _reference_mm(inst, tol, max_iter)
    if max_iter is not None:
        raise ValueError("max_iter is not used by solver='cvxpy' (the solve ladder sets the cvxpy solvers' "
                         "limits); leave max_iter=None")
    from cvxmetric.formulations.ladder import solve_certified
    form = _formulation(inst)
    truth = solve_certified(form, tol)
    point = truth.point
    info = {"rung": truth.rung, "attempts": [a.__dict__ for a in truth.attempts]}
    kw = {}
    if inst.method == "orml" and point is not None:
        from cvxmetric.formulations.orml import direction_values
        U = np.column_stack([Vd @ point[s] for Vd, s in zip(form.info["bases"], form.info["blocks"])])
        info.update({"U": U, "A": U @ U.T, "direction_values": direction_values(form, point)})
    if inst.method == "itml" and point is not None:
        kw["multipliers"] = form.model.multipliers(point)
    if inst.method == "mmc" and point is not None:
        # the max-form value of the point's ray (g is 1/2-homogeneous): g(M) / sqrt(<M, C_S>)
        info["p_max"] = form.model.dissimilar_sum(point) / np.sqrt(truth.bounds.upper)
    key = "w" if form.point_name == "w" else "M"
    return make_result(f"{inst.method}-cvxpy", objective=np.nan if truth.bounds.upper is None else truth.bounds.upper,
                       measure="certified_gap", tol=tol, stop_reason="converged" if truth.certified else "not_certified",
                       lower_bound=truth.bounds.lower, time=truth.time, info=info,
                       detail=f"solve ladder, certifying rung {truth.rung}", **{key: point}, **kw)


def _reference_mm(inst: Instance, tol: float, max_iter) -> SolverResult:
    from cvxmetric.fantope import fantope_model
    from cvxmetric.formulations.fantope import fantope_mm_reference
    model = fantope_model(inst.X, inst.constraints, **inst.params)
    kw = {} if max_iter is None else {"max_iter": max_iter}
    traj = fantope_mm_reference(model, tol=tol, **kw)
    return make_result("fantope-cvxpy-mm", objective=traj.objective, measure="kkt_residual", tol=tol,
                       stop_reason="converged" if traj.converged else "max_iter", M=traj.M,
                       measure_value=traj.fixed_point_gap, n_iter=len(traj.Ms), history=traj.phi, time=traj.time,
                       info={"statuses": traj.statuses, "W_final": traj.info.get("W_final")},
                       detail=f"reference MM, every step certified by the solve ladder: {traj.message}")

