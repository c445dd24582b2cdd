"""The defaults benchmark runs a row and writes its table into the docs' benchmarks page."""
from benchmarks import _report, defaults


def test_one_row_is_certified_and_printed(capsys):
    assert defaults.main(["--estimators", "MMC_Supervised", "--datasets", "iris", "--preprocessing", "standard"]) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("MMC_Supervised | iris | standard")]
    assert row and "| yes |" in row[0], out
    assert "1 of 1 fits certified" in out


def test_a_failing_fit_is_a_row_with_its_reason():
    row = defaults.run_row(("LMNN", "iris", "does not exist"))
    assert not row.certified and "KeyError" in row.error


def test_write_table_replaces_its_own_section_only(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nintro\n\n<!-- benchmark:other:start -->\nkeep\n<!-- benchmark:other:end -->\n")
    for value in ("1", "2"):
        _report.write_table("defaults", "python -m benchmarks.defaults", [["a", "b"], ["x", value]], page=page)
    text = page.read_text()
    assert "keep" in text and "intro" in text
    assert text.count("<!-- benchmark:defaults:start -->") == 1
    assert "| x | 2 |" in text and "| x | 1 |" not in text
    assert "numpy" in text and "python -m benchmarks.defaults" in text


def test_qwise_row_counts_the_barrier_newton_steps():
    row = defaults.run_row(("Qwise_Supervised", "iris", "standard"))
    assert row.certified and row.n_iter.endswith(" Newton + 0"), row
