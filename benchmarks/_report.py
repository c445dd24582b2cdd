"""Benchmarks write their current table into the documentation's benchmarks page.

``docs/benchmarks.md`` holds one section per benchmark between two markers::

    <!-- benchmark:NAME:start -->
    ... (written by the benchmark: command, machine, versions, date, table)
    <!-- benchmark:NAME:end -->

:func:`write_table` (a markdown table) and :func:`write_output` (the command's printed output)
replace what lies between the markers of ``NAME`` (appending the markers if they are missing), so
the page shows the current figure of every benchmark and nothing typed by hand inside a section.

Every benchmark module runs through :func:`run_main` (its ``__main__`` block), which adds the
option ``--write-docs``: the command's standard output is then also written into its section,
with the command as given, the machine, the package versions and the date. Benchmarks that need
a second environment or run for long keep their recorded output in ``benchmarks/*_result.txt``;
``python -m benchmarks._report --recorded`` writes those files into their sections
(:data:`RECORDED`), stating that the figure is the recorded one.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"

#: Packages whose versions a table states (the ones the timings depend on).
PACKAGES = ("numpy", "scipy", "cvxpy", "clarabel", "scs", "highspy", "scikit-learn")


def versions() -> str:
    """``numpy 2.4.6, scipy 1.17.1, ...`` for the installed packages of :data:`PACKAGES`."""
    out = []
    for name in PACKAGES:
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(out)


def machine() -> str:
    """The CPU count, processor and Python this table was measured with."""
    cpu = platform.processor() or platform.machine()
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {platform.system()}"


def markdown_table(rows: list[list[str]]) -> str:
    """``rows[0]`` is the header."""
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in body]
    return "\n".join(lines)


def metadata_line(command: str) -> str:
    """The first line of a section: the command, today's date, the machine and the versions."""
    today = datetime.date.today().isoformat()
    return f"`{command}` (one BLAS thread per row), measured {today} on {machine()}; {versions()}."


def section(name: str, command: str, rows: list[list[str]], note: str = "") -> str:
    """The text of one benchmark's section with a markdown table (without its markers)."""
    return _section_text(metadata_line(command), markdown_table(rows), note)


def _section_text(first_line: str, body: str, note: str = "") -> str:
    parts = [first_line, ""]
    if note:
        parts += [note, ""]
    parts.append(body)
    return "\n".join(parts)


def _fenced(text: str) -> str:
    """``text`` as a fenced block (a longer fence when the text holds one)."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text.rstrip()}\n{fence}"


def write_table(name: str, command: str, rows: list[list[str]], note: str = "", page: Path = PAGE) -> None:
    """Replace the section of benchmark ``name`` in ``page`` by the current table."""
    _write_section(name, section(name, command, rows, note), page)


def write_output(name: str, command: str, output: str, note: str = "", page: Path = PAGE) -> None:
    """Replace the section of benchmark ``name`` in ``page`` by ``output``, the command's printed table."""
    _write_section(name, _section_text(metadata_line(command), _fenced(output), note), page)


def _write_section(name: str, body: str, page: Path) -> None:
    start, end = f"<!-- benchmark:{name}:start -->", f"<!-- benchmark:{name}:end -->"
    text = page.read_text() if page.exists() else "# Benchmarks\n"
    block = f"{start}\n{body}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + f"\n\n{block}\n"
    page.write_text(text)


class _Tee(io.TextIOBase):
    """Writes to a stream and keeps a copy."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text):
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


#: The option every benchmark's command takes through :func:`run_main`.
WRITE_DOCS = "--write-docs"


def run_main(name: str, main, argv: list[str] | None = None, page: Path = PAGE) -> int:
    """Run benchmark ``name``'s ``main(argv)``; with ``--write-docs``, also write its output into the page.

    ``--write-docs`` is taken out of ``argv`` (default: the command line) before ``main`` parses
    it; the section's command is ``python -m benchmarks.NAME`` with the remaining arguments.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(f"{WRITE_DOCS}: also write the printed output into docs/benchmarks.md (section {name!r})")
    if WRITE_DOCS not in argv:
        return main(argv) or 0
    argv = [a for a in argv if a != WRITE_DOCS]
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        status = main(argv) or 0
    command = " ".join(["python -m benchmarks." + name, *argv])
    write_output(name, command, tee.copy.getvalue(), page=page)
    return status


#: Benchmarks whose page section is their committed output file (a peer library in its own
#: environment, or many minutes a run): name -> (command, file).
RECORDED = {
    "peer_lmnn_mmc": ("CVXMETRIC_PEER_PYTHON=<peer venv python> python -m benchmarks.peer_lmnn_mmc",
                      "peer_lmnn_mmc_result.txt"),
    "boostmetric_table1": ("python -m benchmarks.boostmetric_table1", "boostmetric_table1_result.txt"),
    "boostmetric_table1_factors": ("python -m benchmarks.boostmetric_table1 (one factor changed a run: options in the file)",
                                   "boostmetric_table1_factors.txt"),
    "fantope_table31": ("python -m benchmarks.fantope_table31", "fantope_table31_result.txt"),
    "metric_learn_suite": ("python -m benchmarks.metric_learn_suite", "metric_learn_suite_result.txt"),
    "fantope_table31_factors": ("python -m benchmarks.fantope_table31 (one factor changed a run: options in the file)",
                                "fantope_table31_factors_result.txt"),
}


def write_recorded(name: str, page: Path = PAGE) -> None:
    """Write the committed output file of benchmark ``name`` (:data:`RECORDED`) into its section."""
    command, filename = RECORDED[name]
    path = Path(__file__).resolve().parent / filename
    first = (f"`{command}`, recorded in `benchmarks/{filename}` (its header states the run's machine, "
             f"settings and date; re-run with `--write-docs` to replace it by a current run).")
    _write_section(name, _section_text(first, _fenced(path.read_text())), page)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._report", description=__doc__.splitlines()[0])
    parser.add_argument("--recorded", nargs="*", choices=sorted(RECORDED), metavar="NAME",
                        help=f"write these recorded outputs into their sections (none named: all of {sorted(RECORDED)})")
    args = parser.parse_args(argv)
    if args.recorded is None:
        parser.error("nothing to do: pass --recorded [NAME ...]")
    for name in args.recorded or sorted(RECORDED):
        write_recorded(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
