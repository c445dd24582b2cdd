"""The metric-learn suite benchmark's tables, from records of a run (the run itself needs its own
environment: ``python -m benchmarks.metric_learn_suite``)."""
from benchmarks.metric_learn_suite import summarize


def _record(nodeid, outcome, estimators, reason=""):
    return {"nodeid": nodeid, "file": nodeid.split("::")[0], "outcome": outcome, "estimators": estimators,
            "reason": reason}


def test_summary_counts_per_file_and_estimator_and_groups_failures():
    records = [_record("test/a.py::t[ITML]", "passed", ["ITML"]),
               _record("test/a.py::t[MMC]", "failed", ["MMC"], "ValueError: bad"),
               _record("test/b.py::u", "failed", ["ITML", "MMC"], "ValueError: bad"),
               _record("test/b.py::v", "skipped", ["LMNN"]),
               _record("test/c.py::helper", "failed", [], "AttributeError: private")]
    text = summarize(records)
    lines = text.splitlines()
    assert any(line.split() == ["test/a.py", "2", "1", "1", "0"] for line in lines)
    assert any(line.split() == ["all", "4", "1", "2", "1"] for line in lines)
    assert any(line.split() == ["MMC", "2", "0", "2", "0"] for line in lines)
    assert "passed 1 of 3 that ran (33.3 %)" in text
    assert "1 (0 passed, 1 failed)" in text                      # the test touching no estimator, apart
    assert any(line.split()[:3] == ["2", "ValueError:", "bad"] for line in lines)
    assert "AttributeError: private" not in text
