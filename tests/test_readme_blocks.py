"""The README is the front door: every python block runs as pasted, in a fresh interpreter.

Each ```python block is run alone in its own subprocess (so a block that needs a name from an
earlier block fails here as it would for a reader), from a temporary directory, with one BLAS
thread. The set-up commands are the ones ``.ci/run`` runs, and the README stays short.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

#: A fenced block: its language and its text.
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
PYTHON_BLOCKS = [text for lang, text in FENCE.findall(README) if lang == "python"]

#: The README is a front door, not a manual (the manual is docs/guide.md).
MAX_README_LINES = 250

#: Seconds one block may take: the README shows small, fast examples (measured 2-10 s each on the
#: 2-core machine, most of it imports and one cvxpy solve); the margin is for a loaded machine.
BLOCK_TIMEOUT = 180


def test_readme_has_python_blocks_and_stays_short():
    assert len(PYTHON_BLOCKS) >= 3
    assert len(README.splitlines()) <= MAX_README_LINES


def test_readme_set_up_commands_are_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = 'python -m pip install -e ".[test]" && python -m pytest'
    assert test_command in ci and test_command in README
    assert "python -m pip install -e . && python -m cvxmetric.verification" in README


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"block{i}" for i in range(len(PYTHON_BLOCKS))])
def test_readme_python_block_runs_as_pasted(block, tmp_path):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT)
    assert proc.returncode == 0, f"README block failed:\n{block}\n--- stderr ---\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), "a README block prints its result"
