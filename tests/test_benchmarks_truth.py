"""The ground-truth benchmark runs its tiny rows and writes its table into a benchmarks page."""
from benchmarks import truth


def test_tiny_rows_are_certified_and_written(tmp_path, capsys):
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n")
    assert truth.main(["--tiny", "--write-docs", "--page", str(page)]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 ground truths certified" in out, out
    text = page.read_text()
    assert "<!-- benchmark:truth:start -->" in text and "python -m benchmarks.truth" in text
    lmnn = [line for line in text.splitlines() if line.startswith("| lmnn |")]
    assert lmnn and "pairs" in lmnn[0] and "normalized/clarabel" in lmnn[0], text


def test_a_failing_case_is_a_row_with_its_reason():
    def build():
        raise ValueError("no data")
    row = truth.run_case(truth.Case("lmnn", "none", build))
    assert not row.certified and "ValueError: no data" in row.error
    assert "**failed**" in truth.cells(row)
