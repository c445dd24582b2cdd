"""Benchmarks write their tables into docs/benchmarks.md: the command's output, or its recorded file."""
import re
from pathlib import Path

from benchmarks import _report

ROOT = Path(__file__).resolve().parents[1]
PAGE_TEXT = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
SECTION = re.compile(r"<!-- benchmark:([a-z0-9_]+):start -->\n(.*?)\n?<!-- benchmark:\1:end -->", re.S)


def _fake_main(argv):
    print("size  seconds")
    print(f"10    {len(argv)}")
    return 0


def test_write_docs_writes_the_printed_output_with_the_command(tmp_path, capsys):
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\n<!-- benchmark:other:start -->\nkeep\n<!-- benchmark:other:end -->\n")
    assert _report.run_main("fake", _fake_main, ["--sizes", "10", "--write-docs"], page=page) == 0
    assert "size  seconds" in capsys.readouterr().out          # still printed
    sections = dict(SECTION.findall(page.read_text()))
    assert sections["other"] == "keep"
    fake = sections["fake"]
    assert fake.startswith("`python -m benchmarks.fake --sizes 10` (one BLAS thread per row), measured ")
    assert "numpy" in fake and "```text\nsize  seconds\n10    2\n```" in fake   # --write-docs not passed on


def test_without_write_docs_the_page_is_untouched(tmp_path):
    page = tmp_path / "benchmarks.md"
    assert _report.run_main("fake", _fake_main, ["--sizes", "10"], page=page) == 0
    assert not page.exists()


def test_recorded_outputs_exist_and_are_written_with_their_command(tmp_path):
    page = tmp_path / "benchmarks.md"
    for name, (command, filename) in _report.RECORDED.items():
        assert (ROOT / "benchmarks" / filename).is_file(), filename
        _report.write_recorded(name, page=page)
    sections = dict(SECTION.findall(page.read_text()))
    assert set(sections) == set(_report.RECORDED)
    for name, (command, filename) in _report.RECORDED.items():
        assert sections[name].startswith(f"`{command}`, recorded in `benchmarks/{filename}`")


def test_every_section_of_the_page_is_a_benchmark():
    modules = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_")}
    names = [name for name, _ in SECTION.findall(PAGE_TEXT)]
    assert len(names) == len(set(names)), "a benchmark has two sections"
    assert set(names) <= modules | set(_report.RECORDED)
    assert {"defaults", "scale", "working_set", "qwise_speed", "eigh", "hierarchy"} <= set(names)
    empty = [name for name, body in SECTION.findall(PAGE_TEXT) if not body.strip()]
    assert not empty, f"sections without a table: {empty}"
