"""Command line of the harness: ``python -m cvxmetric.verification`` (the project's main job).

Examples
--------
``python -m cvxmetric.verification``                         every method on its default instances
``python -m cvxmetric.verification --method qwise``          one method
``python -m cvxmetric.verification --method qwise --instance syn-d5 --json``
``python -m cvxmetric.verification --method qwise --instance syn-d5 --check-matrix M.npy``
``python -m cvxmetric.verification --list``                  methods and instances
``python -m cvxmetric.verification --seed 3``                every random default instance drawn anew
``python -m cvxmetric.verification --jobs 2``                cases in 2 processes (same rows, same order)
``python -m cvxmetric.verification --dask tcp://host:8786``  cases on a dask.distributed cluster
``python -m cvxmetric.verification --dask local``            cases on a LocalCluster of this machine
``python -m cvxmetric.verification check --problem lmnn --data d.npz --matrix M.npy``  a matrix on your data

Exit status: 0 when every row passes, 1 when a check fails (the table still prints, with the
reasons) or a row is undecided (only the oracle's own checks failed: the ground truth could not be
certified; the report says so, and says nothing about the fast solver; a report that cannot vouch
for every row does not exit 0), 2 for unusable input (an unknown name, an unreadable ``--check-matrix`` file, ``--dask``
without dask.distributed installed or with an unreachable scheduler).

Standard output carries the report (the table, or the JSON with ``--json``) and nothing else:
whatever a library or a worker writes to the process' stdout while the cases run goes to stderr.

``check`` is the problems' command (:mod:`cvxmetric.problems.cli`, started by this package's
``__main__``): it builds a :class:`cvxmetric.problems.Problem` from a data file and checks a point
against its certified optimum.

Parallel runs spread whole cases (method x instance) over processes or machines; one problem is
never split. The rows and their order are those of the serial run; only timings differ.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Optional, Sequence

import numpy as np

from cvxmetric import parallel
from cvxmetric._checks import argument_type
from cvxmetric._output import foreign_output_redirected

from .harness import VERDICTS, BLAS_THREADS, ReferenceCache, default_cases, score_point, verify_cases
from .registry import get_spec, list_methods

COLUMNS = (("method", "method", "{}"), ("instance", "instance", "{}"), ("solver", "fast solver", "{}"),
           ("d", "d", "{}"), ("n_constraints", "m", "{}"), ("p_star_upper", "p* (certified)", "{:.6g}"),
           ("truth_gap", "+/-", "{:.0e}"), ("truth_rung", "rung", "{}"),
           ("p_star_scs", "p* SCS", "{:.6g}"), ("f_fast", "f_fast", "{:.6g}"), ("rel_gap", "rel.gap", "{:.1e}"),
           ("certified_gap", "cert.gap", "{:.1e}"),
           ("kkt_truth", "KKT truth", "{:.1e}"), ("kkt_fast", "KKT fast", "{:.1e}"),
           ("time_truth", "t truth", "{:.2f}s"), ("time_fast", "t fast", "{:.3f}s"),
           ("speedup_scs", "x SCS", "{:.1f}"), ("verdict", "verdict", "{}"))


#: What an undecided row means (printed under the table and by ``--check-matrix``).
UNDECIDED_NOTE = ("the oracle could not certify the ground truth (only its own checks failed); "
                  "this is no verdict on the solver's point")


def _fmt(value, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "PASS" if value else "FAIL"
    if value in VERDICTS:
        return value.upper()
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def format_table(rows: list[dict]) -> str:
    """A plain-text table of report rows, followed by the failed checks."""
    head = [h for _, h, _ in COLUMNS]
    body = [[_fmt(r.get(k), f) for k, _, f in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    failed = [(r, name, c) for r in rows for name, c in r.get("checks", {}).items() if not c["passed"]]
    if failed:
        lines.append("")
        lines.append("Failed checks:")
        for r, name, c in failed:
            who = "oracle undecided: " if r.get("verdict") == "undecided" else ""
            lines.append(f"  {who}{r['method']}/{r['instance']}/{r['solver']}: {name} = {_fmt(c['value'], '{:.3g}')} "
                         f"(tol {c['tol']:.1g})")
    errors = [(r, e) for r in rows for e in dict.fromkeys(r.get("errors") or [])]
    if errors:
        lines.append("")
        lines.append("Errors (each failed its row):")
        for r, e in errors:
            lines.append(f"  {r['method']}/{r['instance']}/{r['solver']}: {e}")
    for r in rows:
        for w in r.get("warnings", []) or []:
            lines.append(f"  warning {r['method']}/{r['instance']}/{r['solver']}: {w}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cvxmetric.verification",
                                description="Verify fast metric-learning solvers against cvxpy ground truth.")
    p.add_argument("--method", action="append", help="method to verify (repeatable); default: all")
    p.add_argument("--instance", help="one named instance (default: the method's default instances)")
    p.add_argument("--json", action="store_true", help="print one JSON array of rows instead of a table")
    p.add_argument("--check-matrix", metavar="FILE",
                   help="score a user's point (M, or w for vector models) on --method/--instance; FILE is "
                        "a .npy file (numpy.save) or text rows (.txt, .csv, .tsv, .dat)")
    p.add_argument("--list", action="store_true", help="list methods and their default instances")
    p.add_argument("--seed", type=_seed, default=0,
                   help="instance seed: 0 (default) is the documented instances; S > 0 draws every random "
                        "default instance anew from seeds shifted by S")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parallel.add_arguments(p, what="cases (method x instance)")
    return p


#: ``--seed``: a non-negative integer.
_seed = argument_type(int, lambda v: v >= 0, "a non-negative integer", name="--seed")


#: Suffixes read as text (whitespace- or comma-separated numbers, one matrix row per line).
TEXT_SUFFIXES = (".txt", ".csv", ".tsv", ".dat")


def load_point(path: str, option: str = "--check-matrix") -> np.ndarray:
    """Read a point file (``option``, for messages): ``.npy`` (numpy's format) or text (``.txt``, ``.csv``, ...).

    Raises
    ------
    ValueError
        With a message naming the file and what is wrong with it (missing, empty, not a numeric
        array); the CLI turns it into exit status 2.
    """
    import os

    if not os.path.isfile(path):
        raise ValueError(f"{option} {path!r}: no such file")
    if os.path.getsize(path) == 0:
        raise ValueError(f"{option} {path!r} is empty; save M with numpy.save(path, M) or as text rows")
    if path.lower().endswith(TEXT_SUFFIXES):
        delimiter = "," if path.lower().endswith(".csv") else None
        try:
            point = np.loadtxt(path, delimiter=delimiter, ndmin=1)
        except ValueError as exc:
            raise ValueError(f"{option} {path!r} is not a numeric text matrix: {exc}") from None
    else:
        with open(path, "rb") as fh:
            magic = fh.read(6)
        if magic != b"\x93NUMPY":
            raise ValueError(f"{option} {path!r} is not a .npy file (numpy.save); text matrices need a "
                             f"suffix among {', '.join(TEXT_SUFFIXES)}")
        try:
            point = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{option} {path!r} could not be read as a .npy array: {exc}") from None
    if not np.issubdtype(point.dtype, np.number) or np.iscomplexobj(point):
        raise ValueError(f"{option} {path!r} must hold real numbers; got dtype {point.dtype}")
    return point


def main(argv: Optional[Sequence[str]] = None) -> int:
    from threadpoolctl import threadpool_limits

    argv = list(sys.argv[1:] if argv is None else argv)
    with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        return _main(argv)


def _main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # argparse printed its message; usage errors are exit 2
        return 0 if exc.code == 0 else 2
    try:
        for m in args.method or []:
            get_spec(m)
        methods = args.method or None
        if args.list:
            for m, im, name in default_cases(methods or list_methods()):
                print(f"{m:12s} {name:20s} ({im})")
            return 0
        if args.check_matrix:
            if args.instance and not methods:
                methods = [m for m, _, _ in default_cases(None, args.instance)]
            if not methods or len(methods) != 1 or not args.instance:
                raise ValueError("--check-matrix needs an --instance (and --method when several methods "
                                 "have an instance of that name)")
            point = load_point(args.check_matrix)
            with foreign_output_redirected(to=2):
                result = score_point(methods[0], args.instance, point, seed=args.seed)
            if args.json:
                print(json.dumps(result, indent=1))
            else:
                for k in ("method", "instance", "value", "p_star_lower", "p_star_upper", "rel_gap", "kkt",
                          "lambda_min", "feasible", "passed"):
                    print(f"{k:16s} {result[k]}")
                print(f"{'verdict':16s} {result['verdict']}")
                for name, c in result["checks"].items():
                    if not c["passed"]:
                        print(f"failed check: {name} = {c['value']} (tol {c['tol']:.1g})")
                if result["verdict"] == "undecided":
                    print(UNDECIDED_NOTE)
                for e in result["errors"]:
                    print(f"error: {e}")
            return 0 if result["passed"] else 1
        cases = default_cases(methods, args.instance)
        with foreign_output_redirected(to=2):
            rows = _run(cases, args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(format_table(rows))
        n_pass = sum(r["passed"] for r in rows)
        n_undecided = sum(r.get("verdict") == "undecided" for r in rows)
        print()
        if n_undecided:
            print(f"{n_undecided} of {len(rows)} rows undecided: {UNDECIDED_NOTE}")
        print(f"{n_pass} of {len(rows)} rows passed all checks")
    return 0 if all(r["passed"] for r in rows) else 1


def _run(cases: list, args) -> list[dict]:
    """The rows of ``cases``: serially, in local worker processes (``--jobs``), or on a dask
    cluster (``--dask``); the same rows in the same order in every case."""
    bar = not args.no_progress and sys.stderr.isatty()
    with contextlib.ExitStack() as stack:
        n_jobs, backend = stack.enter_context(parallel.backend_from_args(args))
        on_done = stack.enter_context(parallel.progress(len(cases), label=_case_label, bar=bar,
                                                        lines=not bar and not args.json, desc="verifying",
                                                        unit="case"))
        return verify_cases(cases, seed=args.seed, n_jobs=n_jobs, backend=backend, cache=ReferenceCache(),
                            on_done=on_done)


def _case_label(case) -> str:
    return f"{case[0]} / {case[2]}"
