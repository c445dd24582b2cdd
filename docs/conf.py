"""Sphinx configuration of the cvxmetric documentation site.

Build (from the repository root; warnings are errors, as in CI's ``tests/test_docs.py``)::

    python -m pip install -e ".[docs]" && python -m sphinx -W -b html docs docs/_build/html

The build is the one place that executes the teaching notebooks (``notebooks/*.ipynb``, seen
here through the symbolic link ``docs/notebooks``): myst-nb runs every notebook top to bottom
in a fresh kernel, and the build fails on the first cell that raises, naming the notebook (with
``-T``, also the cell and its traceback). ``-D nb_execution_mode=off`` skips the execution while
editing prose.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import cvxmetric

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
if Path(cvxmetric.__file__).resolve().parent != ROOT / "cvxmetric":
    # the API pages and the notebooks would show another installation, not this checkout
    raise RuntimeError(f"cvxmetric is imported from {cvxmetric.__file__}, not from this checkout ({ROOT}); "
                       f"install the checkout first: python -m pip install -e \".[docs]\"")

# The notebook kernels inherit this environment: one BLAS thread, as in the tests and the report
# (the notebooks' matrices are small; multi-threaded BLAS only spins on a shared 2-core machine).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

project = "cvxmetric"
author = "the cvxmetric developers"
copyright = "the cvxmetric developers"
release = version = cvxmetric.__version__

extensions = [
    "myst_nb",                  # MyST markdown pages and the executed notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",                 # the project's docstrings are numpydoc
    "sphinx.ext.mathjax",
]
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# -- HTML ------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"cvxmetric {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path: list[str] = []

# -- MyST and the notebooks ------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3            # headings get anchors the pages link to (guide.md#glossary)
nb_execution_mode = "force"         # every notebook runs once per build (CI: once per run)
nb_execution_raise_on_error = True  # a failing cell fails the build ...
nb_execution_show_tb = True         # ... and its traceback (notebook, cell) is printed
#: Seconds one cell may take; the notebooks run small instances (each says which).
nb_execution_timeout = 600
nb_execution_in_temp = True         # files a notebook writes land in a temporary directory
nb_merge_streams = True

# -- API reference (docs/api.rst) ------------------------------------------------------------
autosummary_generate = True
autodoc_member_order = "bysource"
autodoc_typehints = "none"          # numpydoc's Parameters sections state the types
numpydoc_show_class_members = False  # autodoc's :members: lists them once (no duplicate entries)
numpydoc_class_members_toctree = False


def _check_notebook_kernels() -> None:
    """Fail early unless every notebook's kernel runs *this* interpreter.

    The notebooks must import the cvxmetric under test (the checkout installed in this
    environment), not another installation; a kernelspec that names ``python`` is launched with
    the running interpreter by jupyter_client, one that names another absolute path is not.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    names = {json.loads(p.read_text())["metadata"].get("kernelspec", {}).get("name", "python3")
             for p in (ROOT / "notebooks").glob("*.ipynb")}
    manager = KernelSpecManager()
    plain = {"python", f"python{sys.version_info[0]}", "python%d.%d" % sys.version_info[:2]}
    for name in sorted(names):
        exe = manager.get_kernel_spec(name).argv[0]
        if exe not in plain and os.path.abspath(exe) != os.path.abspath(sys.executable):
            raise RuntimeError(f"the notebook kernel {name!r} runs {exe}, not this interpreter "
                               f"({sys.executable}); install one for it with: "
                               f"{sys.executable} -m ipykernel install --sys-prefix --name {name}")


_check_notebook_kernels()


# -- Docstrings: "|" is plain text ------------------------------------------------------------
# The project's docstrings and ``#:`` comments write absolute values and norms in plain text
# (``max |x|``, ``||M||_2``) and never use reST substitutions; reST would read ``|x|`` as an
# (undefined) substitution and fail the -W build. Outside math, inline literals and literal
# blocks every "|" is therefore escaped before docutils parses the docstring: one rule here
# instead of notation edits in some twenty docstrings that the whole team edits, and future
# docstrings stay safe.

#: Inline spans left untouched: ``literal`` and `interpreted text` (roles such as :math:`...`).
_INLINE_SPAN = re.compile(r"(``.*?``|`[^`]*`)", re.DOTALL)


def _block_lines(lines: list[str]) -> set[int]:
    """Indices of lines inside a directive (``.. math::``) or a literal block (after ``::``)."""
    inside: set[int] = set()
    opener_indent = None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if opener_indent is not None:
            if not stripped or indent > opener_indent:
                inside.add(i)
                continue
            opener_indent = None
        if stripped.startswith(".. "):
            inside.add(i)
            opener_indent = indent
        elif stripped.endswith("::"):
            opener_indent = indent
    return inside


def _escape_bars(app, what, name, obj, options, lines: list[str]) -> None:
    """autodoc-process-docstring: escape "|" in prose (see the comment above)."""
    inside = _block_lines(lines)
    i = 0
    while i < len(lines):
        if i in inside:
            i += 1
            continue
        j = i
        while j < len(lines) and j not in inside:
            j += 1
        text = "\n".join(lines[i:j])
        parts = _INLINE_SPAN.split(text)
        text = "".join(part if k % 2 else part.replace("|", r"\|") for k, part in enumerate(parts))
        lines[i:j] = text.split("\n")
        i = j


# -- Members: only this project's code ---------------------------------------------------------
# scikit-learn attaches generated methods to every estimator subclass (``set_fit_request`` and the
# other metadata-routing setters); they are scikit-learn's API, documented there, and their
# docstrings cite scikit-learn's glossary, which does not exist here (warnings under -W).

def _skip_foreign_members(app, what, name, obj, skip, options):
    """autodoc-skip-member: skip members whose code is scikit-learn's (see the comment above)."""
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and module.split(".")[0] == "sklearn":
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _escape_bars)
    app.connect("autodoc-skip-member", _skip_foreign_members)
