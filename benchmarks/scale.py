"""Scale benchmark: restarted PDHG (subspace generation at large d) on Qwise (trace) far beyond cvxpy, beside its per-iteration floor.

Run from the repository root::

    python -m benchmarks.scale                          # every default size, no peers
    python -m benchmarks.scale --sizes d5000-m1e5       # d = 5000 (named only: see SIZES)
    python -m benchmarks.scale --sizes d50-m1e4 --peers # with SCS and Clarabel (cap 600 s each)
    python -m benchmarks.scale --quick                  # a small smoke run (seconds)
    python -m benchmarks.scale --calibrate              # the operator cost model against measured times
    python -m benchmarks.scale --jobs 2                 # 2 sizes at once (each size whole in one process)

Instances: the harness' synthetic target-metric quadruplets (:func:`cvxmetric.instances.qwise.synthetic_qwise`:
x ~ U[0,1)^d, quadruplets labelled by a rank-10 target metric, 10 % flipped), trace regularizer,
C_Q = 1, trace weight 1 (``d5000-m1e5``: 10^4, below). ``d50-m1e4`` is the harness instance
``syn-d50-m10000`` (8,000 points); the larger sizes put many constraints on few points (2,000), the
setting of the shared-point operators; ``d50-m1e7`` puts 10^7 on 20,000 points (1.9 x 10^7 distinct
pairs of the 2 x 10^8 there are: the pair table then saves memory, not products).

``d5000-m1e5`` (5,000 points in d = 5000) has a target stated for a trace-regularized problem whose
solution has rank <= 100. Its trace weight is the smallest power of ten whose solve settles at rank
<= 100 (rank: W's eigenvalues above 1e-10 of its largest, ``info["ranks"]`` of the subspace
rounds). Measured by the rounds alone (one BLAS thread): at weight 1 the rank was 183 at a proven
gap of 1.6e-2 (14 rounds, k = 1,770); at 10, 205 after 9 rounds (k = 822); at 100, 205 after 9
rounds (k = 822, proven gap 0.48; 98.6 % of the quadruplets satisfied with slack, more than
the 90 % the target metric orders, and the hinge 0.2 of the objective 1,342); at 1,000, 198 after 8 rounds (k = 548) and
still growing. At 10^4 it settles at 59 from round 8 on and ends at 58 (certified 9.9e-4 after 15
rounds, k = 671, 582 CPU s): objective 78,688 against 10^5 at M = 0 (trace 3.08, so 30,750 of it;
hinge 47,940), 21 % of the quadruplets satisfied with slack, 0.4 % on the margin, 78.5 % inside it
(every margin is 1 at M = 0).

The solver is restarted PDHG, or subspace generation (:func:`cvxmetric.solvers.subspace.subspace`,
the point left as its factor) where :func:`cvxmetric.solvers.subspace.subspace_pays` chooses it; a
subspace row prints its rounds, final k and rank in place of the floor ("n/a": its iterations are
those of the small restricted problems, its CPU seconds are beside the wall-clock ones).

For each size it prints the build time (data, model, pair table), the solve time, the iterations,
the milliseconds per iteration beside the measured **floor** (the products one iteration cannot
avoid, each timed alone on the same model at the solver's last step size: the projection of one
step from the returned point, by the eigensolver the solver would choose; K M at the projected
point through its rank-r factor where the solver uses it; and K* y as the run's steps computed it,
the full product or the update over the multipliers that changed, in the run's proportions), their
ratio, the same floor
through difference vectors (one (d x d) product per constraint half; timed on at most
``DIFFERENCES_FLOOR_ROWS`` constraints and ``DIFFERENCES_FLOOR_MAX`` multiply-adds, scaled to
all), and the
certified relative gap (:func:`cvxmetric.certificates.relative_gap` of the objective and the
solver's own certified lower bound), and the seconds until the best point and bound so far first
certified 1e-3 (at a check), the certificate's complementarity polishes and targeted repairs
(counts, and their seconds together), the ratio per iteration / floor without the one-time work
(``steps x fl.``: the solve's time less the certificate's polishes and repairs and less the cold
start, whose power iteration sets the first step size), the ratio per iteration / floor in CPU
seconds of the process (robust to a loaded machine, where the wall-clock ratio is not: the floor is
the best of a few repeats, the solve pays every wait for a core), the peak resident memory of
the size (``ru_maxrss`` of a child process that builds, solves and times it alone, GB), and the
size's targets, met or not (build plus seconds to a certified 1e-3; peak memory). Where the
solver took the low-rank projection (:func:`cvxmetric.solvers.pdhg.pdhg`, ``projection``), the
floor's projection is one block Rayleigh-Ritz step and K* y is not formed (``floor``).

With ``--peers``, SCS (at its default accuracy, eps 1e-4, as a user runs it) and Clarabel (the
project's ground-truth settings) solve the cvxpy twin in a child
process killed after ``--peer-cap`` seconds; their rows give the time, our speed-up, and their
objective's gap to our certified lower bound. Sizes where a peer is known not to fit (measured:
cvxpy with SCS or Clarabel does not solve d = 100 with 10^4 constraints in 600 s, 12-15 GB) are
skipped, and the output says so.

BLAS thread pools are pinned to one thread (threadpoolctl) for every solver alike. On a shared
machine the absolute times move with the load; the ratios printed (per iteration / floor, peer /
ours) are measured in one run.
"""
from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import resource
import time
import warnings
from dataclasses import dataclass

import numpy as np

from cvxmetric.certificates import relative_gap
from cvxmetric.instances.qwise import synthetic_qwise
from cvxmetric.models import qwise_model

from ._parallel import add_arguments, map_rows, positive_float

#: SCS at its own default accuracy (as a user runs it); Clarabel at the ground-truth settings.
SCS_USER_OPTIONS = {"eps_abs": 1e-4, "eps_rel": 1e-4, "max_iters": 100_000}
#: Default wall-clock cap of a peer solve (compile + solve), seconds.
PEER_CAP = 600.0
#: Default time limit of our solve, seconds.
TIME_LIMIT = 600.0
#: Repetitions of each floor product (the best is kept: the load only ever adds time).
FLOOR_REPEATS = 5
#: The floor through difference vectors is timed on at most this many constraints and scaled to all
#: of them (its cost is linear in the rows, O(m d^2)): the (m, d) difference vectors of all rows
#: would take 8 GB at 10^7 constraints and d = 50, more than the solve itself.
DIFFERENCES_FLOOR_ROWS = 100_000
#: ... and on at most this many multiply-adds of one product (rows x d^2): at d = 5000 one product
#: over 10^5 rows is 2.5e12 multiply-adds (minutes) and its difference vectors 4 GB.
DIFFERENCES_FLOOR_MAX = 2e11


#: PDHG's residual test in every row (its default at tol 1e-3; the d50-m1e4 row, certified to 1e-4,
#: keeps it too, so both rows stop by the same residual rule).
RESIDUAL_TOL = 1e-4


@dataclass(frozen=True)
class Size:
    """One benchmark size: dimension, points, quadruplets, and the tolerances of our solve; where
    the size has targets, the seconds of the build plus the solve to a certified 1e-3
    (``target_s``) and the peak memory (``target_gb``)."""

    d: int
    n: int
    m: int
    seed: int
    tol: float = 1e-3   # the certified relative gap PDHG's result is held to
    peers_fit: bool = False
    note: str = ""
    target_s: float | None = None    # wall-clock target of build + seconds to a certified 1e-3
    target_gb: float | None = None   # peak-memory target, GB
    in_default: bool = True          # run by a plain ``python -m benchmarks.scale`` (else only when named)
    reg_weight: float = 1.0          # the trace regularizer's weight r (``synthetic_qwise(reg_weight=)``)


_TOO_BIG = ("the cvxpy twin has {nnz:.1e} coefficient nonzeros, {times:.0f}x those of d = 100 with 10^4 "
            "constraints (5.1e7), which needs 12-15 GB and does not finish in 600 s (design §6)")
SIZES = {
    # the harness instance syn-d50-m10000; certified to 1e-4, the accuracy of the SCS comparison
    "d50-m1e4": Size(50, 8000, 10_000, seed=0, tol=1e-4, peers_fit=True),   # registry seed
    "d50-m1e5": Size(50, 2000, 100_000, seed=5001, note=_TOO_BIG.format(nnz=1.275e8, times=2.5)),
    "d50-m1e6": Size(50, 2000, 1_000_000, seed=5002, note=_TOO_BIG.format(nnz=1.275e9, times=25), target_s=10.0),
    "d500-m1e4": Size(500, 2000, 10_000, seed=5003, note=_TOO_BIG.format(nnz=1.25e9, times=25)),
    "d1000-m1e4": Size(1000, 2000, 10_000, seed=5004, note=_TOO_BIG.format(nnz=5.0e9, times=98), target_s=20.0),
    "d2000-m1e4": Size(2000, 2000, 10_000, seed=5005, note=_TOO_BIG.format(nnz=2.0e10, times=392), target_s=60.0),
    # named only (with d5000-m1e5): about 200 iterations of 1-1.5 s each (K and K* over 1.9e7 pairs)
    "d50-m1e7": Size(50, 20_000, 10_000_000, seed=5010, note=_TOO_BIG.format(nnz=1.275e10, times=250),
                     target_s=60.0, target_gb=8.0, in_default=False),
    # its checks are matrix-free (Ritz scores through the data); a proven bound forms one K* y and
    # factors the 5000 x 5000 dual matrix once (one n d^2 product and one Cholesky, ~15 s of CPU).
    # Its target is stated for a solution of rank <= 100: the trace weight is the smallest power of
    # ten whose solve settles at rank <= 100 (10^4: rank 58; 10^3: 198 and growing; module docstring).
    # Measured (``--sizes d5000-m1e5 --time-limit 1800``, one BLAS thread, load ~3 on 2 cores): the
    # subspace rounds alone certify 6.1e-4 in 13 rounds (k = 705, rank 58, 1,536 inner iterations),
    # build + solve 494.5 s of wall time (383.6 CPU s), peak 2.10 GB
    "d5000-m1e5": Size(5000, 5000, 100_000, seed=5006, note=_TOO_BIG.format(nnz=1.25e12, times=24500),
                       target_s=600.0, target_gb=4.0, in_default=False, reg_weight=1e4),
}
QUICK = {"quick-d10": Size(10, 200, 3000, seed=7, peers_fit=True)}


def build(name: str, size: Size):
    """The instance and its HingeModel (with the pair table built when the solver will use it)."""
    if name == "d50-m1e4":
        from cvxmetric.instances import get_instance

        inst = get_instance("qwise", "syn-d50-m10000")
    else:
        inst = synthetic_qwise(size.d, min(10, size.d), size.n, size.m, seed=size.seed, name=name,
                               reg_weight=size.reg_weight)
    model = qwise_model(inst.X, inst.constraints, **inst.params)
    if "points" in (model.geometry.operator_path("K")[0], model.geometry.operator_path("Kt")[0]):
        model.geometry.pair_table()
    return inst, model


def _best_time(fn, repeats: int = FLOOR_REPEATS, clock=time.perf_counter) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def floor(model, M: np.ndarray, y: np.ndarray, step: tuple, adjoint: tuple = (1, 0, 0.0),
          lowrank: float = 0.0) -> dict:
    """Seconds of the products of one iteration, each timed alone, at the solver's own last step:
    the projection of A = (M - tau (R + K'* y')) / (1 + tau q), with tau = eta / omega from
    ``step = (eta, omega)``, by the eigensolver PDHG would choose (the rank hint is the
    projection's own rank); K' at the projected point through its eigenpairs (the rank-r factor
    where the cost model takes it); and K'* y' as the solver's steps computed it, from
    ``adjoint = (steps, updates, mean rows)`` of the run (``info["adjoint_updates"]``,
    ``info["adjoint_update_rows"]``): the full product for the steps that took it, the update over
    that many changed multipliers (at random rows) for the others, averaged over the steps. The
    rank printed is the projection's number of positive eigenvalues (not a count of the round-off
    eigenvalues of the returned M). ``lowrank``: the share of the run's steps that took the
    low-rank projection (``info["lowrank_steps"]``); for those the projection is one block
    Rayleigh-Ritz step at the returned point (basis: the projection's eigenvectors and the extra
    columns the solver keeps, M through its factor), which applies K'* y' through the data itself,
    so their K'* y is 0 in the floor."""
    from cvxmetric.linalg import project_psd
    from cvxmetric.solvers.pdhg import _ScaledOperator

    op = _ScaledOperator(model)
    eta, omega = step
    tau = eta / omega
    y_scaled = np.asarray(y) * op.s
    R = np.asarray(model.R, dtype=np.float64)
    KTy = op.adjoint(y_scaled)
    A = (M - tau * (R + KTy)) / (1.0 + tau * float(model.q))
    Mp, lam, V = project_psd(A, return_eig=True, partial=None)
    r = int(np.count_nonzero(lam > 0))

    def project():
        return project_psd(A, return_eig=True, partial=None, rank_hint=r)

    n_steps, n_updates, mean_rows = adjoint
    n_steps = max(int(n_steps), 1)
    share = min(int(n_updates), n_steps) / n_steps
    k = min(max(int(round(mean_rows)), 1), model.m)
    y_new = y_scaled.copy()
    rows = np.random.default_rng(0).choice(model.m, k, replace=False)
    y_new[rows] += 1.0

    def adjoint_step(clock=time.perf_counter):
        full = _best_time(lambda: op.adjoint(y_scaled), clock=clock)
        update = _best_time(lambda: op.adjoint_update(KTy, y_scaled, y_new), clock=clock) if share else 0.0
        return (1.0 - share) * full + share * update

    path_Kt = model.geometry.operator_path("Kt")[0]
    if share:
        path_Kt += f", {share:.0%} updates over {k / model.m:.0%}"
    if lowrank:
        path_Kt += f", {lowrank:.0%} low-rank steps"
    lowrank_project = _lowrank_projection_step(model, Mp, lam, V, y, step) if lowrank else None
    t_K = _best_time(lambda: op.apply(Mp, eig=(lam, V)))
    dense = lowrank < 1.0      # a run whose every step was low-rank has no dense product in its floor
    t_Kt = (1.0 - lowrank) * adjoint_step() if dense else 0.0
    t_eig = ((1.0 - lowrank) * _best_time(project) if dense else 0.0) \
        + (lowrank * _best_time(lowrank_project) if lowrank else 0.0)
    # the same products through one difference vector per constraint (O(m d^2), the other exact form),
    # on at most DIFFERENCES_FLOOR_ROWS rows and DIFFERENCES_FLOOR_MAX multiply-adds, scaled to all
    rows = min(model.m, DIFFERENCES_FLOOR_ROWS, int(DIFFERENCES_FLOOR_MAX // model.d ** 2))
    if rows > 0:
        geom, y_rows = model.geometry.subset(np.arange(rows)), np.asarray(y)[:rows]
        t_diff = (_best_time(lambda: geom.values(Mp, path="differences"), 2)
                  + _best_time(lambda: geom.weighted_sum(y_rows, path="differences"), 2)) * (model.m / rows)
    else:
        t_diff = math.nan
    # the same three in CPU seconds of this process (one BLAS thread): the time waiting for a core on
    # a loaded machine is left out of both the floor and the solve's CPU time per iteration
    cpu = time.process_time
    t_cpu = (_best_time(lambda: op.apply(Mp, eig=(lam, V)), clock=cpu)
             + ((1.0 - lowrank) * (adjoint_step(cpu) + _best_time(project, clock=cpu)) if dense else 0.0)
             + (lowrank * _best_time(lowrank_project, clock=cpu) if lowrank else 0.0))
    return {"K": t_K, "Kt": t_Kt, "eig": t_eig, "total": t_K + t_Kt + t_eig, "cpu_total": t_cpu, "rank": r,
            "differences": t_diff + t_eig,
            "path_K": model.geometry.operator_path("K")[0], "path_Kt": path_Kt}


def _lowrank_projection_step(model, Mp: np.ndarray, lam: np.ndarray, V: np.ndarray, y: np.ndarray, step: tuple):
    """One low-rank projection as the solver takes it at the point (Mp, y): a PDHG state at that
    point whose tracked basis is the projection's eigenvectors plus the solver's extra columns."""
    from cvxmetric.solvers.pdhg import start_state

    eta, omega = step
    state = start_state(model, M0=Mp, y0=np.clip(y, 0.0, model.coef), step_size=eta, primal_weight=omega,
                        projection="lowrank")
    pos = lam > 0
    state._factor = (lam[pos], V[:, pos])
    state.rank = int(np.count_nonzero(pos))
    extra = np.random.default_rng(0).standard_normal((model.d, state._block_size(state.rank) - state.rank))
    basis = np.hstack([V[:, pos], extra])

    def project():
        state._basis = basis
        return state._lowrank_projection(eta / omega)

    return project


def run_ours(name: str, size: Size, time_limit: float) -> dict:
    """Our solve of one size by the solver of choice: subspace generation where
    :func:`cvxmetric.solvers.subspace.subspace_pays` says so (its row has no per-iteration floor: its
    iterations are those of small restricted problems, not of the full one), else PDHG."""
    from cvxmetric.solvers.subspace import subspace_pays

    t0 = time.perf_counter()
    inst, model = build(name, size)
    t_build = time.perf_counter() - t0
    run = _run_subspace if subspace_pays(model) else _run_pdhg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), time.process_time()
        row = run(model, size, time_limit)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    res = row.pop("result")
    gap = None if res.lower_bound is None else relative_gap(res.objective, res.lower_bound)
    row.update({"name": name, "size": size, "inst": inst, "build": t_build, "time": elapsed, "iters": res.n_iter,
                "ms_iter": 1e3 * elapsed / max(res.n_iter, 1), "gap": gap, "status": res.status,
                "objective": res.objective, "lower": res.lower_bound, "converged": res.converged,
                "cpu": cpu, "cpu_ms_iter": 1e3 * cpu / max(res.n_iter, 1)})
    return row


def _run_pdhg(model, size: Size, time_limit: float) -> dict:
    """PDHG's solve, its floor and its seconds to a certified 1e-3 (from its trace)."""
    from cvxmetric.solvers.pdhg import pdhg

    res = pdhg(model, tol=size.tol, residual_tol=RESIDUAL_TOL, time_limit=time_limit)
    steps = res.n_iter - res.info["rejected_steps"]
    fl = floor(model, res.M, res.multipliers, (res.info["step_size"], res.info["primal_weight"]),
               (steps, res.info["adjoint_updates"], res.info["adjoint_update_rows"]),
               lowrank=res.info["lowrank_steps"] / max(steps, 1))
    # seconds to the first check whose best objective and best bound so far certify 1e-3
    best_f, best_lb, t_1e3 = math.inf, None, None
    for row in res.info["trace"]:
        best_f = min(best_f, row[2], row[3], row[9])   # row[9]: the best objective, rays included
        if row[4] is not None and (best_lb is None or row[4] > best_lb):
            best_lb = row[4]
        if t_1e3 is None and relative_gap(best_f, best_lb) <= 1e-3:
            t_1e3 = row[1]
    return {"result": res, "solver": "pdhg", "floor": fl, "t_1e3": t_1e3, "repairs": res.info["repairs"],
            "polishes": res.info["polishes"], "repair_s": res.info["repair_seconds"],
            "start_s": res.info["start_seconds"]}


def _run_subspace(model, size: Size, time_limit: float) -> dict:
    """Subspace generation's solve (``M`` left as its factor) and its seconds to a certified 1e-3
    (from its rounds' trace: seconds, k, inner iterations, objective, Ritz value, estimate, proven bound)."""
    from cvxmetric.solvers.subspace import subspace

    res = subspace(model, tol=size.tol, time_limit=time_limit, form_M=False)
    best_lb, t_1e3 = None, None
    for seconds, _, _, f, _, _, proven in res.info["trace"]:
        if proven is not None and (best_lb is None or proven > best_lb):
            best_lb = proven
        if t_1e3 is None and relative_gap(f, best_lb) <= 1e-3:
            t_1e3 = seconds
    return {"result": res, "solver": "subspace", "floor": None, "t_1e3": t_1e3, "repairs": 0, "polishes": 0,
            "repair_s": 0.0, "start_s": 0.0, "rounds": res.info["rounds"], "k": res.info["k"][-1] if res.info["k"] else 0,
            "rank": res.info["factor"].shape[1], "fallback": res.info["fallback_iterations"]}


def _ours_child(name: str, size: Size, time_limit: float, queue) -> None:
    row = {k: v for k, v in run_ours(name, size, time_limit).items() if k != "inst"}
    row["peak_gb"] = peak_memory_gb()
    queue.put(row)


def peak_memory_gb() -> float:
    """Peak resident memory of this process so far, GB (``ru_maxrss``, kilobytes on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run_measured(name: str, size: Size, time_limit: float) -> dict:
    """:func:`run_ours` in a forked child process, with its peak resident memory (``"peak_gb"``): the
    size's own, whatever ran before it in this process. A daemon worker (``--dask``) may not start
    children: there the row runs in the worker and its peak is the worker's so far."""
    if multiprocessing.current_process().daemon:
        row = {k: v for k, v in run_ours(name, size, time_limit).items() if k != "inst"}
        row["peak_gb"] = peak_memory_gb()
        return row
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_ours_child, args=(name, size, time_limit, queue))
    proc.start()
    try:
        while True:
            try:
                row = queue.get(timeout=5.0)
                break
            except Exception:   # queue.Empty: still running, unless the child died (e.g. out of memory)
                if not proc.is_alive():
                    raise RuntimeError(f"the child process of size {name} exited with code {proc.exitcode} "
                                       "before its row was sent") from None
    finally:
        proc.join()
    return row


def _peer_child(name: str, size: Size, solver: str, queue) -> None:
    from threadpoolctl import threadpool_limits

    from cvxmetric.formulations.qwise import build_qwise

    with threadpool_limits(limits=1, user_api="blas"):
        inst, _ = build(name, size)
        t0 = time.perf_counter()
        form = build_qwise(inst.X, inst.constraints, **inst.params)
        sol = form.solve(solver, **(SCS_USER_OPTIONS if solver == "SCS" else {}))
        elapsed = time.perf_counter() - t0
        value = form.value_at(form.feasible_point(sol.point)) if sol.point is not None else None
    queue.put({"time": elapsed, "value": value, "status": sol.status})


def run_peer(name: str, size: Size, solver: str, cap: float) -> dict:
    """Solve the cvxpy twin in a child process; None fields when it does not finish within ``cap``."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peer_child, args=(name, size, solver, queue))
    t0 = time.perf_counter()
    proc.start()
    out = None
    try:
        out = queue.get(timeout=cap)
    except Exception:   # queue.Empty: the cap was reached
        out = None
    proc.join(timeout=5)
    if proc.is_alive():
        proc.kill()
        proc.join()
    if out is None:
        return {"time": time.perf_counter() - t0, "value": None, "status": f"not finished in {cap:.0f} s"}
    return out


def print_table(rows: list[dict]) -> None:
    print(f"\n{'size':12s} {'n':>6s} {'m':>8s} {'d':>5s} {'build s':>8s} {'time s':>8s} {'iters':>6s} "
          f"{'ms/iter':>8s} {'floor ms':>9s} {'x floor':>8s} {'steps x fl.':>11s} {'diff. floor':>11s} {'cert. gap':>10s} {'s to 1e-3':>9s} {'pol./rep. (s)':>13s} {'CPU x floor':>11s} {'peak GB':>7s} {'CPU s':>8s}  status  "
          f"(pdhg floor: K M [path, rank] + K* y [path] + eigh; subspace: rounds, final k, rank)")
    for r in rows:
        s, fl = r["size"], r["floor"]
        gap = "-" if r["gap"] is None else f"{r['gap']:.1e}"
        t13 = "-" if r["t_1e3"] is None else f"{r['t_1e3']:.1f}"
        rep = f"{r['polishes']}/{r['repairs']} ({r['repair_s']:.1f})"
        head = (f"{r['name']:12s} {s.n:6d} {s.m:8d} {s.d:5d} {r['build']:8.2f} {r['time']:8.2f} "
                f"{r['iters']:6d} {r['ms_iter']:8.2f} ")
        if fl is None:   # subspace generation: no per-iteration floor of the full problem
            print(head + f"{'n/a':>9s} {'n/a':>8s} {'n/a':>11s} {'n/a':>11s} {gap:>10s} {t13:>9s} {rep:>13s} "
                  f"{'n/a':>11s} {r['peak_gb']:7.2f} {r['cpu']:8.2f}  {r['status']}  (subspace: {r['rounds']} rounds, final k = "
                  f"{r['k']}, rank {r['rank']}, fallback iterations {r['fallback']}; floor n/a: the iterations are "
                  f"those of the restricted problems){targets(r)}", flush=True)
            continue
        cpu_ratio = r["cpu_ms_iter"] / (1e3 * fl["cpu_total"]) if fl["cpu_total"] > 0 else math.inf
        steps_s = (r["time"] - r["repair_s"] - r["start_s"]) / max(r["iters"], 1)
        steps_ratio = steps_s / fl["total"] if fl["total"] > 0 else math.inf
        print(head + f"{1e3 * fl['total']:9.2f} {r['ms_iter'] / (1e3 * fl['total']):8.2f} "
              f"{steps_ratio:11.2f} "
              f"{1e3 * fl['differences']:11.2f} {gap:>10s} {t13:>9s} {rep:>13s} {cpu_ratio:11.2f} {r['peak_gb']:7.2f} {r['cpu']:8.2f}  "
              f"{r['status']}  ({1e3 * fl['K']:.1f} [{fl['path_K']}, r={fl['rank']}] + {1e3 * fl['Kt']:.1f} "
              f"[{fl['path_Kt']}] + {1e3 * fl['eig']:.1f}){targets(r)}", flush=True)


def targets(r: dict) -> str:
    """The row's targets, met or not: build + seconds to a certified 1e-3, and peak memory."""
    s, out = r["size"], []
    if s.target_s is not None:
        took = math.inf if r["t_1e3"] is None else r["build"] + r["t_1e3"]
        out.append(f"build + s to 1e-3 = {took:.1f} s {'<=' if took <= s.target_s else '>'} {s.target_s:g} s")
    if s.target_gb is not None:
        out.append(f"peak {r['peak_gb']:.2f} GB {'<=' if r['peak_gb'] <= s.target_gb else '>'} {s.target_gb:g} GB")
    return f"  target: {'; '.join(out)}" if out else ""


def print_peers(r: dict, peers: dict) -> None:
    print(f"  peers of {r['name']} (ours: {r['time']:.2f} s, certified lower bound "
          f"{'none' if r['lower'] is None else format(r['lower'], '.10g')}):")
    for solver, p in peers.items():
        if p is None:
            print(f"    {solver:9s} not run at this size: {r['size'].note}")
            continue
        gap = "-" if p["value"] is None or r["lower"] is None else f"{relative_gap(p['value'], r['lower']):.1e}"
        speed = f"{p['time'] / r['time']:.1f}x ours" if p["value"] is not None else "-"
        print(f"    {solver:9s} {p['time']:8.2f} s  {speed:>12s}  gap to our lower bound {gap}  {p['status']}", flush=True)


def calibrate() -> None:
    """The cost model of :mod:`cvxmetric.hinge` against measured times of both paths."""
    from cvxmetric import ConstraintSet
    from cvxmetric.generators import sample_quadruplet_indices
    from cvxmetric.hinge import OPERATOR_PATHS, QuadrupletGeometry, operator_costs

    rng = np.random.default_rng(0)
    print(f"{'n':>6s} {'m':>8s} {'d':>5s} | {'K diff ms (model)':>20s} {'K points':>18s} | "
          f"{'K* diff':>18s} {'K* points':>18s}")
    for n, m, d in ((100, 200, 10), (2000, 1000, 20), (8000, 10_000, 50), (2000, 100_000, 50),
                    (500, 5000, 100), (2000, 10_000, 500)):
        X = rng.random((n, d))
        g = QuadrupletGeometry(X, ConstraintSet.from_quadruplets(sample_quadruplet_indices(n, m, rng)))
        table = g.pair_table()[0]
        M = rng.standard_normal((d, d))
        M = M + M.T
        c = rng.random(m)
        model = operator_costs(table.n, table.P, m, g.u_rows.size + g.v_rows.size, d)
        cells = []
        for k, fn in ((0, lambda p: g.values(M, path=p)), (1, lambda p: g.weighted_sum(c, path=p))):
            for p in OPERATOR_PATHS:
                t = _best_time(lambda: fn(p), 3)
                cells.append(f"{1e3 * t:8.2f} ({1e3 * model[p][k]:7.2f})")
        print(f"{n:6d} {m:8d} {d:5d} | {cells[0]:>20s} {cells[1]:>18s} | {cells[2]:>18s} {cells[3]:>18s}", flush=True)


def size_row(task) -> dict:
    """One row of the sweep: our solve of one size, its floor, and the peers at that size (printed);
    the row without its instance (a worker sends it back)."""
    name, size, time_limit, peers, peer_cap = task
    r = run_measured(name, size, time_limit)
    print_table([r])
    if peers:
        print_peers(r, {s: (run_peer(name, size, s, peer_cap) if size.peers_fit else None) for s in ("SCS", "CLARABEL")})
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=[k for k, v in SIZES.items() if v.in_default], choices=sorted(SIZES) + sorted(QUICK))
    p.add_argument("--quick", action="store_true", help="a small smoke run (seconds); overrides --sizes")
    p.add_argument("--peers", action="store_true", help="also run SCS and Clarabel where they fit")
    p.add_argument("--peer-cap", type=positive_float, default=PEER_CAP, help="wall-clock cap of a peer solve, s")
    p.add_argument("--time-limit", type=positive_float, default=TIME_LIMIT, help="time limit of our solve, s")
    p.add_argument("--calibrate", action="store_true", help="print the operator cost model against measured times")
    add_arguments(p, "sizes")
    args = p.parse_args(argv)
    if args.peers and args.dask:
        # a peer runs in a forked child (its memory and time are capped there); dask's workers are
        # daemon processes, which may not start children
        p.error("--peers cannot run on --dask workers (daemon processes cannot start the peer's capped "
                "child process); use --jobs N on one machine")
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        print(f"BLAS thread pools limited to 1 thread; load average {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores at the start")
        if args.calibrate:
            calibrate()
            return 0
        sizes = dict(QUICK) if args.quick else {k: SIZES[k] if k in SIZES else QUICK[k] for k in args.sizes}
        tasks = [(name, size, args.time_limit, args.peers, args.peer_cap) for name, size in sizes.items()]
        rows = list(map_rows(size_row, tasks, args, label=lambda task: task[0]))
        print_table(rows)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    import importlib

    # main() of the module imported by name (not this __main__ copy): worker processes load its rows by name
    from benchmarks._report import run_main

    raise SystemExit(run_main('scale', importlib.import_module(__spec__.name).main))
