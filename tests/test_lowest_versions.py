"""The lowest versions CI installs (.ci/lowest.txt) are the lower bounds pyproject.toml declares."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _core_lower_bounds() -> dict:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M).group(1)
    return {name.lower(): version for name, version in re.findall(r'"([A-Za-z0-9_.\-]+)>=([0-9][^",]*)"', block)}


def _pins() -> dict:
    pins = {}
    for line in (ROOT / ".ci" / "lowest.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    return pins


def _release(version: str) -> tuple:
    """(3, 2, 4) of '3.2.4.post1' (a post release of the bound is the bound's own code)."""
    return tuple(int(part) for part in re.match(r"[0-9.]+", version).group(0).rstrip(".").split("."))


def test_every_core_dependency_is_pinned_at_its_lower_bound():
    bounds, pins = _core_lower_bounds(), _pins()
    assert bounds, "no lower bounds found in pyproject.toml"
    for name, bound in bounds.items():
        assert name in pins, f"{name} has a lower bound in pyproject.toml but no pin in .ci/lowest.txt"
        pinned, declared = _release(pins[name]), _release(bound)
        width = max(len(pinned), len(declared))
        assert pinned + (0,) * (width - len(pinned)) == declared + (0,) * (width - len(declared)), (
            f"{name}: .ci/lowest.txt pins {pins[name]}, pyproject.toml declares >= {bound}")
