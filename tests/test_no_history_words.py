"""The repository speaks of itself only: no words about how it was developed.

Code, docs, notebooks and comments state the current figure and the command that produces it
(design §8). Numbered work rounds, issue numbers, merges, commit hashes, work dates and narratives
of earlier runs or reverted trials belong in the version history, not in the files. This test
greps every tracked text file for such words.

The one date allowed is a benchmark's run date: in the metadata line of its section of
``docs/benchmarks.md`` ("measured YYYY-MM-DD on ..."), and in the header comment ("# ...") of a
recorded output (``benchmarks/*.txt``, also shown on that page). It says when the current figure
was taken.
"""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Words about how the project was developed, each with what it catches.
HISTORY_PATTERNS = {
    "issue number": re.compile(r"\bissues? #?[0-9]+\b", re.I),
    "numbered work session or round": re.compile(r"\b(session|work round|merge round) [0-9]+\b", re.I),
    "merge": re.compile(r"\bmerg(e|ed|es|ing)\b", re.I),
    "before/after an issue or change": re.compile(r"\b(before|after|since) (issue|this change|the change)\b", re.I),
    "named earlier run": re.compile(r"\b[Rr]un [A-Z](?=[:,;)]|\s*\(|\s*$)"),
    "earlier run": re.compile(r"\b(an|the|in) earlier run\b|\bearlier runs\b", re.I),
    "narrative of the past": re.compile(r"\b(previously|formerly|used to be|was reverted|reverted trial|"
                                        r"now faster than)\b", re.I),
    "work date": re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b"),
    "commit hash": re.compile(r'(?<![0-9a-zA-Z_.x#/"-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b'),
}

#: The benchmarks page's metadata line of a section: its run date is the current figure's date.
BENCHMARK_DATE_LINE = re.compile(r"^`python -m benchmarks\.[a-z0-9_]+[^`]*`.*, measured 20[0-9]{2}-[01][0-9]-[0-3][0-9] on ")
#: A recorded benchmark output's header comment (its run's machine, settings and date).
RECORDED_HEADER_LINE = re.compile(r"^# ")


def _is_run_date(rel: str, line: str) -> bool:
    """Whether a date on ``line`` of file ``rel`` is a benchmark's run date."""
    if rel == "docs/benchmarks.md" and BENCHMARK_DATE_LINE.match(line):
        return True
    recorded = rel == "docs/benchmarks.md" or (rel.startswith("benchmarks/") and rel.endswith(".txt"))
    return recorded and bool(RECORDED_HEADER_LINE.match(line))

#: This file names the patterns it looks for.
SELF = Path(__file__).relative_to(ROOT).as_posix()


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [ROOT / p for p in out.decode().split("\0") if p and p != SELF]
    return [p for p in paths if p.is_file() and b"\0" not in p.read_bytes()[:8192]]


def history_words(path: Path) -> list[str]:
    """``path:line: [kind] text`` for every line of ``path`` that speaks of the project's history."""
    found = []
    rel = path.relative_to(ROOT).as_posix()
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        for kind, pattern in HISTORY_PATTERNS.items():
            if kind == "work date" and _is_run_date(rel, line):
                continue
            if pattern.search(line):
                found.append(f"{rel}:{number}: [{kind}] {line.strip()[:160]}")
    return found


def test_the_scan_sees_the_repository():
    files = {p.relative_to(ROOT).as_posix() for p in tracked_text_files()}
    assert {"README.md", "docs/design.md", "cvxmetric/__init__.py"} <= files
    assert any(f.endswith(".ipynb") for f in files)


# (the examples here and below are split into literals so that a plain grep of the repository
# for these words does not find this file)
@pytest.mark.parametrize("line, kind", [
    ("see issue" " 8 for the measurement", "issue number"),
    ("after the merge of both branches", "merge"),
    ("1.21x in run" " L", "named earlier run"),
    ("## Run" " E (measured on two cores)", "named earlier run"),
    ("1.21x in an earlier run", "earlier run"),
    ("Re-run on 2026-11-22", "work date"),
    ("fixed in e177d3a", "commit hash"),
    ("the solver previously stalled", "narrative of the past"),
    ("today's path before " "issue" " 9", "before/after an issue or change"),
])
def test_each_pattern_catches_its_kind(line, kind):
    assert HISTORY_PATTERNS[kind].search(line)


@pytest.mark.parametrize("line", [
    "re-run" " L-BFGS-B from the last point",  # an algorithm's name after "run"
    "nb_merge_streams = True",                 # a configuration key
    "digits' 4.3 million triplets, 1e-12",     # numbers
    "100 log sessions x 20 judged images",     # ORML's retrieval sessions
    "hash 0x7fffffff and colour #a1b2c3d",     # hexadecimal literals
    '"id": "897f43f5",',                      # a notebook cell's id
    "run" " N {what} at once",                 # a metavariable
])
def test_ordinary_words_pass(line):
    assert not any(p.search(line) for p in HISTORY_PATTERNS.values())


def test_no_words_about_how_the_project_was_developed():
    found = [hit for path in tracked_text_files() for hit in history_words(path)]
    assert not found, "words about the project's history (state the current figure instead):\n" + "\n".join(found)
