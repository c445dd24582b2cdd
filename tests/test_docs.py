"""The documentation site builds with warnings as errors, executing every notebook once.

This is the one place where the notebooks in notebooks/ are run in CI: myst-nb executes each in
a fresh kernel (docs/conf.py: ``nb_execution_mode = "force"``, a per-cell timeout, errors
raised), so a failing cell fails this test with the notebook and the cell's traceback in the
message. The static notebook checks are in ``tests/test_notebooks.py``.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: Lines of the build's output shown when it fails for another reason than a notebook.
OUTPUT_TAIL = 80

#: Terminal colour codes in a kernel's traceback.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def _failure_report(proc: subprocess.CompletedProcess) -> str:
    """The failing cell and its traceback when a notebook failed, else the end of the output."""
    text = ANSI_ESCAPE.sub("", proc.stdout + "\n" + proc.stderr)
    cell = text.find("CellExecutionError: An error occurred while executing the following cell")
    if cell >= 0:
        end = text.find("The above exception was the direct cause", cell)
        notebook = re.findall(r"ExecutionError: (\S+\.ipynb)", text)
        return f"notebook {notebook[-1] if notebook else '?'} failed:\n{text[cell:end if end > 0 else None]}"
    problems = [line for line in text.splitlines() if "WARNING" in line or "ERROR" in line]
    return "\n".join((problems + ["..."] + text.splitlines()[-10:])[-OUTPUT_TAIL:])


def test_docs_build_without_warnings(tmp_path):
    html = tmp_path / "html"
    # -T: a failing notebook's cell and traceback are printed (else only its path)
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-T", "-b", "html",
           "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(html)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"sphinx-build failed (exit {proc.returncode}):\n{_failure_report(proc)}"

    # every notebook has a page, rendered from its execution (cells with outputs)
    for path in NOTEBOOKS:
        page = html / "notebooks" / f"{path.stem}.html"
        assert page.is_file(), f"no page for {path.name}"
        assert re.search(r'class="cell_output', page.read_text(encoding="utf-8")), (
            f"{page.name} shows no cell output: was {path.name} executed?")
    # every notebook figure fits the content column, so it is shown at its natural size (fonts >= 9 pt)
    from PIL import Image

    from cvxmetric.plotting import CONTENT_WIDTH

    for path in NOTEBOOKS:
        page = (html / "notebooks" / f"{path.stem}.html").read_text(encoding="utf-8")
        for src in re.findall(r'<img[^>]*src="\.\./(_images/[^"]+\.png)"', page):
            width = Image.open(html / src).size[0]
            assert width <= CONTENT_WIDTH, (f"{path.name}: a figure is {width} px wide, wider than the "
                                            f"{CONTENT_WIDTH}-px content column; draw it with cvxmetric.plotting.panels")
    # the API reference documents the public modules
    for module in ("cvxmetric.certificates", "cvxmetric.solvers.result", "cvxmetric.formulations.ladder",
                   "cvxmetric.verification.harness", "cvxmetric.estimators"):
        assert (html / "generated" / f"{module}.html").is_file(), f"no API page for {module}"
