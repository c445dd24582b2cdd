"""The ``check`` command: a metric learned on your own data against the certified optimum.

``python -m cvxmetric.verification check --problem lmnn --data d.npz --matrix M.npy [--rtol 1e-6]
[--param NAME=VALUE ...] [--json]`` builds the :class:`~cvxmetric.problems.Problem` of ``--problem``
from the arrays of the ``.npz`` file (X, y / pairs, labels / quadruplets, ...: the problem's
``data_keys``) and checks the point against its certified optimum (:meth:`Problem.check`). Exit
status: 0 when the verdict is "optimal", 1 for "suboptimal", "infeasible" or "undecided" (the
reason is printed), 2 for unusable input.

The command belongs to the problems (the layer above the harness, design §2); the harness' entry
point ``cvxmetric.verification.__main__`` hands ``check`` to :func:`main`.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import numpy as np

from cvxmetric._checks import argument_type
from cvxmetric._output import foreign_output_redirected

from ._base import list_problems, problem_class

__all__ = ["main", "check_main", "build_check_parser", "load_problem_data", "parse_param"]


def main(argv: Sequence[str] | None = None) -> int:
    """``check`` with the harness' BLAS thread limit (``cvxmetric.verification.harness.BLAS_THREADS``)."""
    from threadpoolctl import threadpool_limits

    from cvxmetric.verification.harness import BLAS_THREADS

    argv = list(sys.argv[1:] if argv is None else argv)
    with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        return check_main(argv)


def build_check_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cvxmetric.verification check",
                                description="Check a metric (M, or w for ORML) learned on your own data against "
                                            "the certified optimum of the same problem.")
    p.add_argument("--problem", required=True, choices=list_problems(), help="the problem family")
    keys = "; ".join(f"{name}: {', '.join(cls.data_keys)}"
                     + (f" (+{', '.join(cls.optional_data_keys)})" if cls.optional_data_keys else "")
                     for name, cls in ((n, problem_class(n)) for n in list_problems()))
    p.add_argument("--data", required=True, metavar="FILE.npz", help=f"numpy .npz with the problem's arrays ({keys})")
    p.add_argument("--matrix", required=True, metavar="FILE", help="the point: .npy or a text matrix")
    p.add_argument("--rtol", type=_rtol, default=1e-6, help="relative tolerance of the verdict (default 1e-6)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter of the problem (repeatable), e.g. n_neighbors=3 or bounds=(1.0,4.0)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


#: ``--rtol``: a positive number.
_rtol = argument_type(float, lambda v: v > 0 and np.isfinite(v), "a positive number", name="--rtol")


def parse_param(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` of ``--param``: VALUE is a Python literal (number, tuple, None, ...) or else a string."""
    import ast

    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier():
        raise ValueError(f"--param {text!r} must be NAME=VALUE, e.g. n_neighbors=3")
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        parsed = value.strip()
    return name.strip(), parsed


def load_problem_data(path: str, problem_cls) -> dict:
    """The arrays of ``--data``: the problem's required keys and the optional ones present.

    Raises
    ------
    ValueError
        A missing or unreadable file, or a missing key (named, with the keys the file holds).
    """
    import os

    if not os.path.isfile(path):
        raise ValueError(f"--data {path!r}: no such file")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"--data {path!r} could not be read as a .npz file (numpy.savez): {exc}") from None
    missing = [k for k in problem_cls.data_keys if k not in arrays]
    if missing:
        raise ValueError(f"--data {path!r} lacks {', '.join(missing)} for --problem {problem_cls.name} (it needs "
                         f"{', '.join(problem_cls.data_keys)}; it holds {', '.join(sorted(arrays)) or 'nothing'})")
    keys = problem_cls.data_keys + problem_cls.optional_data_keys
    return {k: arrays[k] for k in keys if k in arrays}


def check_main(argv: Sequence[str]) -> int:
    """``python -m cvxmetric.verification check ARGS``: see the module docstring (BLAS as the caller set it)."""
    import inspect

    from cvxmetric.verification.cli import load_point

    parser = build_check_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    try:
        cls = problem_class(args.problem)
        params = dict(parse_param(t) for t in args.param)
        accepted = [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
        unknown = sorted(set(params) - set(accepted) | (set(params) & set(cls.data_keys + cls.optional_data_keys)))
        if unknown:
            raise ValueError(f"--param {', '.join(unknown)}: not a parameter of --problem {args.problem}; its "
                             f"parameters are {', '.join(n for n in accepted if n not in cls.data_keys)}")
        data = load_problem_data(args.data, cls)
        point = load_point(args.matrix, option="--matrix")
        with foreign_output_redirected(to=2):
            problem = cls(**data, **params)
            report = problem.check(point, rtol=args.rtol)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_dict(), indent=1))
    else:
        print(report)
    return 0 if report.optimal else 1
