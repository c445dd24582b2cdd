"""Static checks of the teaching notebooks in notebooks/ (outputs are not stored in git).

The notebooks are *executed* once per test run, by the documentation build
(``tests/test_docs.py``: myst-nb runs every notebook top to bottom and the build fails on the
first cell that raises, naming the notebook and the cell). The checks here are the fast ones.
"""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebooks_exist():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for k, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name}, cell {k}: committed with outputs; strip them"
            assert cell.get("execution_count") is None, f"{path.name}, cell {k}: has an execution count; strip it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_has_a_title(path):
    """The documentation site names each notebook's page by its first heading."""
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0] if nb.cells else None
    assert first is not None and first.cell_type == "markdown" and first.source.lstrip().startswith("# "), (
        f"{path.name}: the first cell must be a markdown cell starting with a '# Title' heading")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_figures_use_the_project_style(path):
    """One figure style (cvxmetric.plotting): use_style() once, figures from panels(), no ad-hoc sizes."""
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    if "matplotlib" not in code:
        return
    assert code.count("use_style()") == 1, f"{path.name}: call cvxmetric.plotting.use_style() once, after importing pyplot"
    for adhoc in ("plt.subplots(", "plt.figure(", "figsize=", "tight_layout("):
        assert adhoc not in code, (f"{path.name}: {adhoc!r} sizes a figure outside the project style; "
                                   f"use cvxmetric.plotting.panels (page width, at most three panels a row)")
