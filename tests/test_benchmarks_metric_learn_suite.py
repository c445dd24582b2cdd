"""The metric-learn suite benchmark's tables, from records of a run (the run itself needs its own
environment: ``python -m benchmarks.metric_learn_suite``)."""
import sys

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


def test_examples_table_counts_cells_and_lists_the_ones_not_run():
    from benchmarks.metric_learn_suite import summarize_examples
    records = [{"script": "plot_a.py", "cell": 0, "outcome": "passed", "reason": "", "seconds": 0.1},
               {"script": "plot_a.py", "cell": 1, "outcome": "skipped", "reason": "metric-learn's NCA (not in cvxmetric)",
                "seconds": 0.0},
               {"script": "plot_b.py", "cell": 0, "outcome": "failed", "reason": "TypeError: x (line 3)",
                "seconds": 0.0}]
    lines = summarize_examples(records).splitlines()
    assert any(line.split() == ["plot_a.py", "2", "1", "0", "1"] for line in lines)
    assert any(line.split() == ["plot_b.py", "1", "0", "1", "0"] for line in lines)
    assert "  plot_a.py cell 1: skipped: metric-learn's NCA (not in cvxmetric)" in lines


def test_example_runner_splits_cells_and_skips_missing_estimators(tmp_path):
    from benchmarks._metric_learn_examples import cells, run_script
    script = tmp_path / "plot_x.py"
    script.write_text("import metric_learn\nX = 1\n" + "#" * 30 + "\nmetric_learn.NCA()\n" + "#" * 30 + "\n"
                      "est = metric_learn.LSML_Supervised()\nname = type(est).__name__\n" + "#" * 30 + "\n1 / 0\n")
    assert len(cells(script.read_text())) == 4
    before = sys.modules.get("metric_learn")
    records = run_script(script)
    assert [r["outcome"] for r in records] == ["passed", "skipped", "passed", "failed"]
    assert records[1]["reason"] == "metric-learn's NCA (not in cvxmetric)"
    assert sys.modules.get("metric_learn") is before             # the stand-in module is taken out again
    assert records[3]["reason"].startswith("ZeroDivisionError: division by zero (line 9)")
