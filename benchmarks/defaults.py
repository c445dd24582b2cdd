r"""Every estimator's default fit on real data, as users preprocess it.

Run from the repository root::

    python -m benchmarks.defaults                       # everything (a few minutes)
    python -m benchmarks.defaults --estimators LMNN --datasets digits
    python -m benchmarks.defaults --jobs 2              # two rows at once

Each row is ``Estimator().fit(X, y)`` with the constructor's defaults (``random_state=0`` where the
estimator draws constraints) on one of scikit-learn's bundled data sets (iris, wine, breast_cancer,
digits, raw as loaded), preprocessed as a user would: ``raw``, ``StandardScaler``,
``MinMaxScaler``, and the standardized data times 1e-3 and 1e3 (units). Printed: the fit's seconds
(one BLAS thread), iterations (``N Newton + k``: the Newton steps of the dual barrier method
that starts Qwise's PDHG on few constraints, and PDHG's iterations), whether its own certificate holds (``converged``), the measure's
value against its tolerance, and the objective. For a method whose problem is invariant under
``X -> s X`` (LMNN, ITML with its bounds scaled by ``s^2``, MMC, and every estimator whose
defaults are chosen in the data's units) the three standardized rows solve one problem: their
objectives agree and their times should too.

The table goes to stdout and, with ``--write-docs``, into ``docs/benchmarks.md`` between the
markers of this benchmark (with the command, machine and package versions).
"""
from __future__ import annotations

import argparse
import importlib
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from threadpoolctl import threadpool_limits

from cvxmetric.datasets import DATASETS
from cvxmetric.exceptions import ConvergenceWarning

from ._parallel import add_arguments, map_rows
from ._report import write_table

ESTIMATORS = ("LMNN", "ITML_Supervised", "MMC_Supervised", "Qwise_Supervised", "BoostMetric")
PREPROCESSING = ("raw", "standard", "minmax", "std x 1e-3", "std x 1e3")


@dataclass(frozen=True)
class Row:
    estimator: str
    dataset: str
    preprocessing: str
    n: int
    d: int
    seconds: float
    n_iter: object
    certified: bool
    measure: str
    value: float
    tol: float
    objective: float
    error: str = ""


def prepared(dataset: str, preprocessing: str) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's data set ``dataset`` as loaded, preprocessed by ``preprocessing``."""
    from sklearn import datasets as skd

    bunch = getattr(skd, f"load_{dataset}")()
    X, y = np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target)
    if preprocessing == "raw":
        return X, y
    if preprocessing == "minmax":
        return MinMaxScaler().fit_transform(X), y
    Z = StandardScaler().fit_transform(X)
    scale = {"standard": 1.0, "std x 1e-3": 1e-3, "std x 1e3": 1e3}[preprocessing]
    return Z * scale, y


def estimator(name: str):
    import cvxmetric

    cls = getattr(cvxmetric, name)
    params = cls().get_params()
    return cls(random_state=0) if "random_state" in params else cls()


def run_row(task: tuple[str, str, str]) -> Row:
    """One default fit."""
    name, dataset, preprocessing = task
    shape, start = (0, 0), time.perf_counter()
    try:
        X, y = prepared(dataset, preprocessing)
        shape, est = X.shape, estimator(name)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X, y)
    except Exception as exc:   # a row that fails says why; the table goes on
        return Row(name, dataset, preprocessing, *shape, time.perf_counter() - start, "-", False, "-",
                   np.nan, np.nan, np.nan, f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    res = est.result_
    return Row(name, dataset, preprocessing, *shape, seconds, iterations(res), bool(res.converged), res.measure,
               float(res.measure_value), float(res.tol), float(res.objective))


def iterations(res) -> object:
    """The result's iterations, with the Newton steps of the dual barrier method where plain PDHG
    started from its pair (:func:`cvxmetric.solvers.solve_qwise`, ``barrier_start``)."""
    newton = res.info.get("barrier_newton_steps") if isinstance(res.info, dict) else None
    return res.n_iter if newton is None else f"{newton} Newton + {res.info['pdhg_iterations']}"


COLUMNS = ("estimator", "data", "preprocessing", "n x d", "seconds", "iterations", "certified",
           "measure (value / tol)", "objective")


def cells(row: Row) -> list[str]:
    if row.error:
        return [row.estimator, row.dataset, row.preprocessing, f"{row.n} x {row.d}", f"{row.seconds:.2f}", "-",
                "**failed**", row.error[:80], "-"]
    return [row.estimator, row.dataset, row.preprocessing, f"{row.n} x {row.d}", f"{row.seconds:.2f}",
            str(row.n_iter), "yes" if row.certified else "**no**",
            f"{row.measure} {row.value:.1e} / {row.tol:.0e}", f"{row.objective:.6g}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.defaults", description=__doc__.splitlines()[0])
    parser.add_argument("--estimators", nargs="+", choices=ESTIMATORS, default=list(ESTIMATORS))
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--preprocessing", nargs="+", choices=PREPROCESSING, default=list(PREPROCESSING))
    parser.add_argument("--write-docs", action="store_true",
                        help="write the table into docs/benchmarks.md (its section of this benchmark)")
    add_arguments(parser, "fits")
    args = parser.parse_args(argv)
    tasks = [(e, ds, p) for e in args.estimators for ds in args.datasets for p in args.preprocessing]
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):   # the serial loop too: one BLAS thread per fit
        for row in map_rows(run_row, tasks, args, label=lambda t: " ".join(t)):
            rows.append(row)
            print(" | ".join(cells(row)), flush=True)
    table = [list(COLUMNS)] + [cells(r) for r in rows]
    if args.write_docs:
        write_table("defaults", "python -m benchmarks.defaults", table)
    n_bad = sum(not r.certified for r in rows)
    print(f"{len(rows) - n_bad} of {len(rows)} fits certified")
    return 0


if __name__ == "__main__":
    raise SystemExit(importlib.import_module(__spec__.name).main())
