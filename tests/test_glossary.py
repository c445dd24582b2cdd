"""One name per concept: every parameter of a facade, an estimator or a problem is in the
glossary of the user guide (``docs/guide.md``), where its one meaning is written down."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import cvxmetric.estimators as estimators
import cvxmetric.problems as problems
import cvxmetric.solvers as solvers

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide.md"


def glossary_names() -> set:
    """The names in the first column of the guide's glossary table."""
    section = GUIDE.read_text(encoding="utf-8").split("## Glossary", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


def _parameters(fn) -> list:
    skip = (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    return [p.name for p in inspect.signature(fn).parameters.values() if p.kind not in skip and p.name != "self"]


def _public_callables():
    for name in sorted(dir(solvers)):
        if name.startswith("solve_"):
            yield f"cvxmetric.solvers.{name}", getattr(solvers, name)
    for name in estimators.__all__:
        cls = getattr(estimators, name)
        if inspect.isclass(cls) and hasattr(cls, "fit"):
            yield f"cvxmetric.{name}", cls.__init__
    for name in problems.__all__:
        cls = getattr(problems, name)
        if inspect.isclass(cls) and issubclass(cls, problems.Problem) and cls is not problems.Problem:
            yield f"cvxmetric.problems.{name}", cls.__init__


CALLABLES = list(_public_callables())


def test_the_glossary_is_found_and_the_callables_are_many():
    assert {"X", "method", "tol", "n_neighbors"} <= glossary_names()
    assert len(CALLABLES) >= 20


@pytest.mark.parametrize("where, fn", CALLABLES, ids=[w for w, _ in CALLABLES])
def test_every_parameter_is_in_the_glossary(where, fn):
    missing = [p for p in _parameters(fn) if p not in glossary_names()]
    assert not missing, f"{where}: parameters {missing} are not in the glossary of docs/guide.md"
