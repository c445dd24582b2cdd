"""Benchmarks write their current table into the documentation's benchmarks page.

``docs/benchmarks.md`` holds one section per benchmark between two markers::

    <!-- benchmark:NAME:start -->
    ... (written by the benchmark: command, machine, versions, date, table)
    <!-- benchmark:NAME:end -->

:func:`write_table` replaces what lies between the markers of ``NAME`` (appending the markers if
they are missing), so the page shows the current figure of every benchmark and nothing typed by
hand inside a section.
"""
from __future__ import annotations

import datetime
import os
import platform
import re
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


def section(name: str, command: str, rows: list[list[str]], note: str = "") -> str:
    """The text of one benchmark's section (without its markers)."""
    today = datetime.date.today().isoformat()
    parts = [f"`{command}` (one BLAS thread per row), measured {today} on {machine()}; {versions()}.", ""]
    if note:
        parts += [note, ""]
    parts.append(markdown_table(rows))
    return "\n".join(parts)


def write_table(name: str, command: str, rows: list[list[str]], note: str = "", page: Path = PAGE) -> None:
    """Replace the section of benchmark ``name`` in ``page`` by the current table."""
    start, end = f"<!-- benchmark:{name}:start -->", f"<!-- benchmark:{name}:end -->"
    text = page.read_text() if page.exists() else "# Benchmarks\n"
    block = f"{start}\n{section(name, command, rows, note)}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + f"\n\n{block}\n"
    page.write_text(text)
