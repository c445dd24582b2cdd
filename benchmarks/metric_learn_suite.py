r"""metric-learn's own test suite, run against cvxmetric's estimators.

Run from the repository root::

    python -m benchmarks.metric_learn_suite                      # builds the environment on first use
    python -m benchmarks.metric_learn_suite --venv /tmp/venv-mlsuite --workdir /tmp/mlsuite
    python -m benchmarks.metric_learn_suite --records /tmp/mlsuite/records.json   # the table of a finished run
    python -m benchmarks.metric_learn_suite --examples <metric-learn checkout>/examples   # its examples too

metric-learn 0.7.0's helpers need scikit-learn < 1.6, so the suite runs in its own virtual
environment (``--venv``; made when missing: scikit-learn 1.5.2, pytest < 8, metric-learn 0.7.0, matplotlib and
this repository, editable). Its source distribution is downloaded from the package registry at run
time (``pip download --no-binary :all:``) and only its ``test/`` folder is used; nothing of
metric-learn is kept in this repository. The plugin :mod:`benchmarks._metric_learn_plugin`
becomes that folder's ``conftest.py``: it points metric-learn's ``LMNN``, ``ITML``,
``ITML_Supervised``, ``MMC``, ``MMC_Supervised`` at cvxmetric's classes and ``LSML``,
``LSML_Supervised`` at ``Qwise``, ``Qwise_Supervised``, deselects the tests parametrized by
metric-learn's other estimators only, and records which cvxmetric estimators each test touched.

``--examples DIR`` also runs metric-learn's example scripts (``DIR/plot_*.py``; they are in
metric-learn's repository, ``examples/`` at tag v0.7.0, not in its source distribution) with only
the import changed, cell by cell (:mod:`benchmarks._metric_learn_examples`): a cell that constructs
an estimator cvxmetric does not have is skipped and listed.

Printed: the tests that exercise a cvxmetric estimator, passed / failed / skipped per test file and
per estimator, and every remaining failure grouped by its reason (the exception's first line).
Tests that touch no cvxmetric estimator (metric-learn's private helpers and mock classes) are
counted apart.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from benchmarks._report import run_main

REPO = Path(__file__).resolve().parent.parent
PLUGIN = Path(__file__).resolve().parent / "_metric_learn_plugin.py"
NAMES = Path(__file__).resolve().parent / "_metric_learn_names.py"
EXAMPLES = Path(__file__).resolve().parent / "_metric_learn_examples.py"

#: The metric-learn release whose suite runs, and the scikit-learn its helpers need (< 1.6).
METRIC_LEARN = "metric-learn==0.7.0"
SCIKIT_LEARN = "scikit-learn==1.5.2"
#: metric-learn's suite calls ``pytest.warns(None)``, which pytest 8 rejects (a TypeError in every such test).
PYTEST = "pytest<8"
#: metric-learn's examples draw with matplotlib (its Agg backend here).
MATPLOTLIB = "matplotlib"


def _run(cmd: list[str], **kwargs) -> None:
    print("$ " + " ".join(str(c) for c in cmd), file=sys.stderr, flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)


def ensure_venv(venv: Path) -> Path:
    """The suite's interpreter; the environment is created when ``venv`` has none."""
    python = venv / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", venv])
        _run([python, "-m", "pip", "install", "-q", SCIKIT_LEARN, PYTEST, METRIC_LEARN, MATPLOTLIB])
        _run([python, "-m", "pip", "install", "-q", "-e", REPO, SCIKIT_LEARN])
    return python


def prepare_tests(python: Path, workdir: Path) -> Path:
    """metric-learn's ``test/`` folder from its downloaded sdist, with the plugin as its conftest."""
    download = workdir / "sdist"
    download.mkdir(parents=True, exist_ok=True)
    _run([python, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", METRIC_LEARN, "-d", download])
    archive = next(download.glob("metric*learn-*.tar.gz"))
    tests = workdir / "test"
    shutil.rmtree(tests, ignore_errors=True)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if "/test/" in m.name and m.isfile()]
        for m in members:
            m.name = "test/" + m.name.split("/test/", 1)[1]
        tar.extractall(workdir, members=members, filter="data")
    (tests / "__init__.py").touch()       # "test" as a package, ahead of the standard library's
    shutil.copy(PLUGIN, tests / "conftest.py")
    shutil.copy(NAMES, tests / NAMES.name)
    return tests


def run_suite(python: Path, workdir: Path, records: Path) -> None:
    env = dict(os.environ, CVXMETRIC_SUITE_RECORDS=str(records), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    subprocess.run([str(python), "-m", "pytest", "test", "-q", "-p", "no:cacheprovider", "-W", "ignore"],
                   cwd=workdir, env=env, stdout=subprocess.DEVNULL, check=False)


def run_examples(python: Path, folder: Path, records: Path) -> list[dict]:
    """metric-learn's example scripts in ``folder`` run by :mod:`benchmarks._metric_learn_examples`; its records."""
    scripts = sorted(folder.glob("plot_*.py"))
    if not scripts:
        raise SystemExit(f"--examples {folder}: no plot_*.py there (metric-learn's examples/ folder, e.g. of a "
                         "checkout of its repository at tag v0.7.0)")
    env = dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    subprocess.run([str(python), str(EXAMPLES), str(records), *map(str, scripts)], cwd=records.parent, env=env,
                   stdout=subprocess.DEVNULL, check=True)
    return json.loads(records.read_text())


def summarize_examples(records: list[dict]) -> str:
    """Per example script: cells passed / failed / skipped, and each skipped or failed cell's reason."""
    header = f"{'':<42} {'cells':>5} {'passed':>7} {'failed':>7} {'skipped':>8}"
    lines = ["metric-learn's examples, only the import changed (cells; sphinx-gallery cells)", header]
    by_script = defaultdict(Counter)
    for r in records:
        by_script[r["script"]][r["outcome"]] += 1
    lines += [_count_row(name, by_script[name]) for name in sorted(by_script)]
    notes = [f"  {r['script']} cell {r['cell']}: {r['outcome']}: {r['reason']}" for r in records
             if r["outcome"] != "passed"]
    return "\n".join(lines + (["", "cells not run to the end"] + notes if notes else []))


def _count_row(label: str, outcomes: Counter) -> str:
    total = sum(outcomes.values())
    return (f"{label:<42} {total:>5} {outcomes['passed']:>7} {outcomes['failed']:>7} {outcomes['skipped']:>8}")


def summarize(records: list[dict]) -> str:
    """The tables: per test file and per estimator, then the failures by reason."""
    exercising = [r for r in records if r["estimators"]]
    others = Counter(r["outcome"] for r in records if not r["estimators"])
    header = f"{'':<42} {'tests':>5} {'passed':>7} {'failed':>7} {'skipped':>8}"
    lines = ["tests that exercise a cvxmetric estimator, per file", header]
    by_file = defaultdict(Counter)
    by_estimator = defaultdict(Counter)
    for r in exercising:
        by_file[r["file"]][r["outcome"]] += 1
        for name in r["estimators"]:
            by_estimator[name][r["outcome"]] += 1
    lines += [_count_row(f, by_file[f]) for f in sorted(by_file)]
    total = Counter(r["outcome"] for r in exercising)
    lines.append(_count_row("all", total))
    lines += ["", "per estimator (a test touching several counts for each)", header]
    lines += [_count_row(n, by_estimator[n]) for n in sorted(by_estimator)]
    ran = total["passed"] + total["failed"]
    if ran:
        lines += ["", f"passed {total['passed']} of {ran} that ran ({100.0 * total['passed'] / ran:.1f} %); "
                      f"tests touching no cvxmetric estimator (metric-learn's helpers and mock classes): "
                      f"{sum(others.values())} ({others['passed']} passed, {others['failed']} failed)"]
    reasons = defaultdict(list)
    for r in exercising:
        if r["outcome"] == "failed":
            reasons[r["reason"]].append(r["nodeid"])
    if reasons:
        lines += ["", "failures by reason (count, reason, first tests)"]
        for reason, ids in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"{len(ids):>4}  {reason}")
            lines += [f"        {i}" for i in ids[:3]]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metric_learn_suite",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "venv-mlsuite",
                        help="the suite's virtual environment (created when missing)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "mlsuite",
                        help="where the sdist, its test folder and the records go")
    parser.add_argument("--records", type=Path, default=None,
                        help="print the tables of these records of a finished run instead of running the suite")
    parser.add_argument("--examples", type=Path, default=None,
                        help="also run metric-learn's example scripts of this folder (its repository's examples/)")
    args = parser.parse_args(argv)
    records = args.records
    if records is None:
        python = ensure_venv(args.venv)
        args.workdir.mkdir(parents=True, exist_ok=True)
        prepare_tests(python, args.workdir)
        records = args.workdir / "records.json"
        run_suite(python, args.workdir, records)
    print(f"metric-learn's test suite ({METRIC_LEARN}, {SCIKIT_LEARN}) against cvxmetric's estimators")
    print(summarize(json.loads(records.read_text())))
    if args.examples is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        print()
        print(summarize_examples(run_examples(ensure_venv(args.venv), args.examples.resolve(),
                                              args.workdir / "examples.json")))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main("metric_learn_suite", main))
