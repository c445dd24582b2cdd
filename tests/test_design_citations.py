"""The design lives in the repository: every citation of it resolves, nothing points outside.

Code, docs and notebooks cite the design page ``docs/design.md`` as "design §N" or "design §N.M".
Each such citation must name a section heading of that page, and no tracked file may point at a
design file or at papers outside the repository.
"""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"

#: A citation of the design page: "design §5.6" (also "design §2, §5": every § after "design").
CITATION = re.compile(r"\bdesign (§\s?[0-9]+(?:\.[0-9]+)?(?:\s*(?:,|and)\s*§\s?[0-9]+(?:\.[0-9]+)?)*)", re.I)
SECTION_NUMBER = re.compile(r"§\s?([0-9]+(?:\.[0-9]+)?)")
#: A numbered heading of the design page: "## 5. Methods", "### 5.6 BoostMetric, ...".
HEADING = re.compile(r"^#{2,4} ([0-9]+(?:\.[0-9]+)?)\.? ", re.M)
#: References that leave the repository: the founders' shared folder, a design file elsewhere.
OUTSIDE = re.compile(r"\.\./shared|/work/shared|DESIGN\.md")

SELF = Path(__file__).relative_to(ROOT).as_posix()


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [ROOT / p for p in out.decode().split("\0") if p and p != SELF]
    return [p for p in paths if p.is_file() and b"\0" not in p.read_bytes()[:8192]]


def design_sections() -> set[str]:
    return set(HEADING.findall(DESIGN.read_text(encoding="utf-8")))


def test_design_page_has_the_numbered_sections():
    sections = design_sections()
    assert {str(n) for n in range(1, 9)} <= sections
    assert {f"5.{n}" for n in range(1, 8)} <= sections


def test_design_page_is_in_the_docs_toctree():
    assert re.search(r"^design$", (ROOT / "docs" / "index.md").read_text(encoding="utf-8"), re.M)


def test_every_design_citation_names_a_section():
    sections, unresolved, n_citations = design_sections(), [], 0
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITATION.finditer(text):
            for number in SECTION_NUMBER.findall(match.group(1)):
                n_citations += 1
                if number not in sections:
                    line = text.count("\n", 0, match.start()) + 1
                    unresolved.append(f"{path.relative_to(ROOT)}:{line}: design §{number}")
    assert n_citations > 20, "the code cites the design page"
    assert not unresolved, "citations of sections docs/design.md does not have:\n" + "\n".join(unresolved)


def test_nothing_points_outside_the_repository():
    found = []
    for path in tracked_text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "references outside the repository:\n" + "\n".join(found)
