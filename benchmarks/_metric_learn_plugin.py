"""pytest plugin: metric-learn's own test suite run against cvxmetric's estimators.

Loaded as the ``conftest.py`` of metric-learn's ``test/`` folder by
``python -m benchmarks.metric_learn_suite`` (which copies it there). Before the test modules are
imported it points metric-learn's estimator names at cvxmetric's classes (``LSML`` at ``Qwise``);
during the run it records, per test, which cvxmetric estimators the test touched (constructed,
fitted or queried, metric-learn's private ``_validate_calibration_params`` included) and how the
test ended, and writes the records as JSON to the path in the
environment variable ``CVXMETRIC_SUITE_RECORDS``. A test that touches no cvxmetric estimator
(metric-learn's other classes, its private helpers, its mock estimators) is recorded with an
empty set and reported apart.
"""
from __future__ import annotations

import functools
import inspect
import json
import os
import re

import metric_learn

import cvxmetric

# SUBSTITUTES: metric-learn's estimator name -> the cvxmetric estimator that stands in for it;
# OTHERS: metric-learn's estimators that cvxmetric does not provide: a test parametrized by one of
# them alone (and by none of SUBSTITUTES) runs metric-learn's own class and is deselected.
from ._metric_learn_names import OTHERS, SUBSTITUTES

#: The methods whose call marks a test as exercising an estimator.
_TRACKED = ("__init__", "fit", "fit_transform", "transform", "predict", "decision_function", "score",
            "calibrate_threshold", "set_threshold", "pair_distance", "pair_score", "score_pairs",
            "get_mahalanobis_matrix", "get_metric", "_validate_calibration_params")

_touched: set = set()
_records: list = []


def _tracked(cls, name):
    original = getattr(cls, name)

    @functools.wraps(original)
    def method(self, *args, **kwargs):
        _touched.add(type(self).__name__)
        return original(self, *args, **kwargs)
    return method


def _tracked_static(cls, name):
    """A static method's tracker: it has no instance, so the class it is installed on is recorded."""
    original = getattr(cls, name)

    @functools.wraps(original)
    def function(*args, **kwargs):
        _touched.add(cls.__name__)
        return original(*args, **kwargs)
    return staticmethod(function)


def _install() -> None:
    for ml_name, ours in SUBSTITUTES.items():
        cls = getattr(cvxmetric, ours)
        for name in _TRACKED:
            if hasattr(cls, name):
                static = isinstance(inspect.getattr_static(cls, name), staticmethod)
                setattr(cls, name, (_tracked_static if static else _tracked)(cls, name))
        setattr(metric_learn, ml_name, cls)


_install()


def _names_in(nodeid: str) -> set:
    params = nodeid.partition("[")[2]
    return set(re.findall(r"[A-Za-z_]+", params))


def pytest_collection_modifyitems(config, items):
    ours = set(SUBSTITUTES.values())
    kept, dropped = [], []
    for item in items:
        names = _names_in(item.nodeid)
        (dropped if names & set(OTHERS) and not names & ours else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_runtest_setup(item):
    _touched.clear()


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        reason = ""
        if report.outcome == "failed":
            crash = getattr(report.longrepr, "reprcrash", None)
            reason = crash.message.splitlines()[0] if crash is not None else str(report.longrepr).splitlines()[-1]
        elif report.outcome == "skipped" and isinstance(report.longrepr, tuple):
            reason = report.longrepr[2]
        _records.append({"nodeid": report.nodeid, "file": report.nodeid.split("::")[0],
                         "outcome": report.outcome, "estimators": sorted(_touched), "reason": reason[:300]})


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("CVXMETRIC_SUITE_RECORDS")
    if path:
        with open(path, "w") as fh:
            json.dump(_records, fh)
