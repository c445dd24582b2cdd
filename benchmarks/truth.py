r"""Every method's certified ground truth at sizes a user calls small: where the time goes.

Run from the repository root::

    python -m benchmarks.truth                       # every case (several minutes)
    python -m benchmarks.truth --problems lmnn mmc   # some problems
    python -m benchmarks.truth --write-docs          # and write the table into docs/benchmarks.md

Each row builds one formulation (:mod:`cvxmetric.formulations`, through the case's
:class:`cvxmetric.problems.Problem`) and climbs the solve ladder
(:func:`cvxmetric.formulations.ladder.solve_certified`) at the problem's ground-truth tolerance
(:func:`cvxmetric.verification.registry.truth_rtol`), with one BLAS thread (threadpoolctl;
Clarabel's own linear algebra threads are its default). Printed per row: the data, the statement's
size (cvxpy's scalar variables and constraints, the hinge rows' form where there is one) and the
conic program the solvers receive (columns x rows, nonzeros of A), then every rung tried with its
compile + solve seconds, the solver's iterations and the relative width of its interval, the certified width and the total.

The cases:

* LMNN on the first 40 / 60 rows of breast_cancer (4 / 13 points in the smaller class), the first 10 / 30 features, standardized,
  ``n_neighbors=3``, ``regularization=0.5``, ``margin=1``;
* ITML and MMC on the first 60 rows of breast_cancer (10 / 30 features, standardized) with
  50 + 50 and 200 + 200 similar + dissimilar pairs from the labels;
* Qwise (trace regularizer) and the Fantope bound on thesis-style synthetic data, d = 10 / 20,
  200 / 1000 quadruplets;
* BoostMetric (exp and hinge losses) on 60 wine points, ORML on its default synthetic sessions.
"""
from __future__ import annotations

import argparse
import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from ._report import PAGE, write_table

PROBLEMS = ("lmnn", "itml", "mmc", "qwise", "fantope", "boostmetric", "orml")


def breast_cancer(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` rows and ``d`` features of breast_cancer, standardized."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X[:n, :d]), y[:n]


def lmnn_case(n: int, d: int):
    def build():
        from cvxmetric.problems import LMNN
        X, y = breast_cancer(n, d)
        return LMNN(X, y, n_neighbors=3, regularization=0.5, margin=1.0).formulation()
    return Case("lmnn", f"breast_cancer {n} x {d}, k = 3", build)


def itml_case(n: int, d: int, n_pairs: int):
    def build():
        from cvxmetric.instances.itml import itml_instance
        from cvxmetric.problems import problem_of
        X, y = breast_cancer(n, d)
        return problem_of(itml_instance("bench", X, y, n_similar=n_pairs, n_dissimilar=n_pairs, seed=0)).formulation()
    return Case("itml", f"breast_cancer {n} x {d}, {n_pairs} + {n_pairs} pairs", build)


def mmc_case(n: int, d: int, n_pairs: int):
    def build():
        from cvxmetric.instances import Instance
        from cvxmetric.instances.mmc import mmc_pairs
        from cvxmetric.problems import problem_of
        X, y = breast_cancer(n, d)
        return problem_of(Instance("mmc", "bench", X, mmc_pairs(y, n_pairs, n_pairs, seed=0), params={})).formulation()
    return Case("mmc", f"breast_cancer {n} x {d}, {n_pairs} + {n_pairs} pairs", build)


def qwise_case(d: int, m: int):
    def build():
        from cvxmetric.instances.qwise import synthetic_qwise
        from cvxmetric.problems import problem_of
        return problem_of(synthetic_qwise(d, 3, 200, m, seed=0)).formulation()
    return Case("qwise", f"synthetic d = {d}, {m} quadruplets", build)


def fantope_case(d: int, m: int):
    def build():
        from cvxmetric.instances.fantope import synthetic_fantope
        from cvxmetric.problems import problem_of
        # the instance carries its Fantope point W: its formulation is the convex bound at W
        return problem_of(synthetic_fantope(d, 3, 200, m, seed=0, reg_weight=1.0, trace_weight=0.1)).formulation()
    return Case("fantope", f"synthetic d = {d}, {m} quadruplets (the bound)", build)


def boostmetric_case(loss: str):
    def build():
        from cvxmetric.instances.boostmetric import boostmetric_instance
        from cvxmetric.problems import problem_of
        return problem_of(boostmetric_instance("wine", loss, n=60, seed=0)).formulation()
    return Case("boostmetric", f"wine 60 points, {loss} loss", build)


def orml_case():
    def build():
        from cvxmetric.problems import bundled
        return bundled("orml", "syn-sessions").formulation()
    return Case("orml", "syn-sessions (d = 10, 10 sessions)", build)


@dataclass(frozen=True)
class Case:
    problem: str
    data: str
    build: Callable


def cases(tiny: bool = False) -> list[Case]:
    """The benchmark's rows (``tiny``: one small row per problem, for a smoke test)."""
    if tiny:
        return [lmnn_case(40, 4), mmc_case(30, 4, 20)]
    return ([lmnn_case(n, d) for n in (40, 60) for d in (10, 30)]
            + [itml_case(60, d, p) for d in (10, 30) for p in (50, 200)]
            + [mmc_case(60, d, p) for d in (10, 30) for p in (50, 200)]
            + [qwise_case(d, m) for d in (10, 20) for m in (200, 1000)]
            + [fantope_case(d, m) for d in (10, 20) for m in (200, 1000)]
            + [boostmetric_case(loss) for loss in ("exp", "hinge")]
            + [orml_case()])


@dataclass
class Row:
    problem: str
    data: str
    size: str = ""
    conic: str = ""
    rungs: list = field(default_factory=list)
    width: float = float("nan")
    certified: bool = False
    seconds: float = float("nan")
    error: str = ""


def statement_size(form) -> str:
    """cvxpy's scalar variables and constraints of the statement (and the hinge rows' form)."""
    sm = form.problem.size_metrics
    cons = int(sm.num_scalar_eq_constr + sm.num_scalar_leq_constr)
    text = f"{int(sm.num_scalar_variables)} var, {cons} con"
    if "hinge_form" in form.info:
        text += f", {form.info['hinge_form']}"
    return text


def conic_size(form) -> str:
    """Columns x rows and nonzeros of the conic program Clarabel receives (one more compile)."""
    data = form.problem.get_problem_data("CLARABEL", canon_backend="SCIPY")[0]
    A = data["A"]
    return f"{A.shape[1]} x {A.shape[0]}, nnz {A.nnz}"


def run_case(case: Case) -> Row:
    """Build, certify, and measure one case."""
    from cvxmetric.verification.registry import truth_rtol
    from cvxmetric.formulations.ladder import solve_certified

    row = Row(case.problem, case.data)
    start = time.perf_counter()
    try:
        form = case.build()
        row.size = statement_size(form)
        truth = solve_certified(form, truth_rtol(case.problem))
        row.seconds = time.perf_counter() - start
        row.rungs = [(a.rung, a.time_compile, a.time_solve, a.iterations, a.gap) for a in truth.attempts]
        row.width, row.certified = truth.gap, truth.certified
        row.conic = conic_size(form)
    except Exception as exc:   # a row that fails says why; the table goes on
        row.seconds = time.perf_counter() - start
        row.error = f"{type(exc).__name__}: {exc}"
    return row


COLUMNS = ("problem", "data", "statement", "conic program (cols x rows)",
           "rungs: compile + solve seconds, iterations (width)",
           "certified width", "total s")


def cells(row: Row) -> list[str]:
    if row.error:
        return [row.problem, row.data, row.size, "-", row.error[:80], "**failed**", f"{row.seconds:.1f}"]
    rungs = "; ".join(f"{name} {c:.1f} + {s:.1f} s, {'?' if it is None else it} it ({g:.0e})"
                      for name, c, s, it, g in row.rungs)
    width = f"{row.width:.0e}" if row.certified else f"**{row.width:.0e}, not certified**"
    return [row.problem, row.data, row.size, row.conic, rungs, width, f"{row.seconds:.1f}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.truth", description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", choices=PROBLEMS, default=list(PROBLEMS))
    parser.add_argument("--tiny", action="store_true", help="one tiny row per problem kind (a smoke test)")
    parser.add_argument("--write-docs", action="store_true",
                        help="write the table into the benchmarks page (its section of this benchmark)")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page --write-docs writes (default: %(default)s)")
    args = parser.parse_args(argv)
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for case in cases(args.tiny):
            if case.problem not in args.problems:
                continue
            row = run_case(case)
            rows.append(row)
            print(" | ".join(cells(row)), flush=True)
    if args.write_docs:
        write_table("truth", "python -m benchmarks.truth", [list(COLUMNS)] + [cells(r) for r in rows],
                    note="Rungs are those of `cvxmetric.formulations.ladder.LADDER` tried until one certifies; "
                         "widths are relative (`relative_gap` of the interval).", page=args.page)
    n_bad = sum(not r.certified for r in rows)
    print(f"{len(rows) - n_bad} of {len(rows)} ground truths certified")
    return 0


if __name__ == "__main__":
    raise SystemExit(importlib.import_module(__spec__.name).main())
