"""metric-learn's example scripts run with cvxmetric's estimators, only the import changed.

Run by ``python -m benchmarks.metric_learn_suite --examples DIR`` in the suite's environment
(``python benchmarks/_metric_learn_examples.py RECORDS SCRIPT...``). Before a script runs, the
module ``metric_learn`` is replaced by a namespace holding cvxmetric's estimators under
metric-learn's names (:data:`benchmarks._metric_learn_names.SUBSTITUTES`; ``LSML`` is ``Qwise``):
``import metric_learn`` and ``from metric_learn import ...`` in the script then give cvxmetric's
classes, and nothing else of the script changes. metric-learn's estimators that cvxmetric does not
have are stand-ins whose construction raises :class:`MissingEstimator`.

A script is run cell by cell (sphinx-gallery's cells: a line of 20 or more ``#`` starts one), all
cells in one namespace, with ``__name__ == "__main__"`` and matplotlib's non-interactive ``Agg``
backend. A cell that constructs a missing estimator is *skipped* and listed with that estimator;
any other exception *fails* the cell (its first line is recorded); the next cells still run.
Records (one per cell: script, cell, outcome, reason, seconds) are written as JSON to RECORDS.
"""
from __future__ import annotations

import json
import re
import sys
import time
import traceback
import types
from pathlib import Path

try:    # imported as benchmarks._metric_learn_examples, or run as a script from its folder
    from ._metric_learn_names import OTHERS, SUBSTITUTES
except ImportError:
    from _metric_learn_names import OTHERS, SUBSTITUTES

#: A sphinx-gallery cell starts at a line of at least this many ``#``.
CELL_SEPARATOR = re.compile(r"^#{20,}\s*$")


class MissingEstimator(Exception):
    """A metric-learn estimator that cvxmetric does not have was constructed."""


def _missing(name: str) -> type:
    def __init__(self, *args, **kwargs):
        raise MissingEstimator(name)
    return type(name, (), {"__init__": __init__})


def metric_learn_namespace() -> types.ModuleType:
    """A module standing for ``metric_learn``: cvxmetric's estimators under metric-learn's names."""
    import cvxmetric
    module = types.ModuleType("metric_learn")
    for ml_name, ours in SUBSTITUTES.items():
        setattr(module, ml_name, getattr(cvxmetric, ours))
    for name in OTHERS:
        setattr(module, name, _missing(name))
    return module


def cells(source: str) -> list[str]:
    """The script's cells; lines of a cell keep their line numbers (blank lines before them)."""
    lines = source.splitlines(keepends=True)
    starts = [0] + [i for i, line in enumerate(lines) if CELL_SEPARATOR.match(line) and i > 0]
    bounds = list(zip(starts, starts[1:] + [len(lines)]))
    return ["\n" * a + "".join(lines[a:b]) for a, b in bounds]


def run_script(path: Path) -> list[dict]:
    """Run one example cell by cell (module docstring); one record per cell."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    previous = sys.modules.get("metric_learn")
    sys.modules["metric_learn"] = metric_learn_namespace()
    try:
        return _run_cells(path, plt)
    finally:    # the stand-in module is taken out again
        if previous is None:
            del sys.modules["metric_learn"]
        else:
            sys.modules["metric_learn"] = previous


def _run_cells(path: Path, plt) -> list[dict]:
    namespace = {"__name__": "__main__", "__file__": str(path)}
    records = []
    for k, cell in enumerate(cells(path.read_text())):
        if not cell.strip():
            continue
        t0 = time.perf_counter()
        outcome, reason = "passed", ""
        try:
            exec(compile(cell, str(path), "exec"), namespace)
        except MissingEstimator as exc:
            outcome, reason = "skipped", f"metric-learn's {exc.args[0]} (not in cvxmetric)"
        except Exception as exc:   # noqa: BLE001 - a failing cell is a record, the next cells still run
            outcome = "failed"
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            where = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
            if where:
                reason += f" (line {where[-1].lineno})"
        records.append({"script": path.name, "cell": k, "outcome": outcome, "reason": reason[:300],
                        "seconds": round(time.perf_counter() - t0, 2)})
        plt.close("all")
    return records


def main(argv: list[str]) -> int:
    out, scripts = Path(argv[0]), [Path(p) for p in argv[1:]]
    records = [r for script in scripts for r in run_script(script)]
    out.write_text(json.dumps(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
