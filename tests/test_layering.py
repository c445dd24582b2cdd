"""Architecture rules of DESIGN §2: the layering, and that packages come from this repository."""
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cvxmetric", "formulations", "solvers", "verification")

BLOCK_CVXPY = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "cvxpy" or name.startswith("cvxpy."):
            raise ImportError("cvxpy is blocked in this test")
        return None
sys.meta_path.insert(0, _Block())
import cvxmetric, solvers
import cvxmetric.instances, cvxmetric.models, cvxmetric.generators, cvxmetric.datasets
import pkgutil, importlib
for pkg in (cvxmetric, solvers):
    for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(mod.name)
cvxmetric.instances.list_instances()
assert "cvxpy" not in sys.modules
print("ok")
"""


def test_core_and_solvers_import_without_cvxpy():
    r = subprocess.run([sys.executable, "-c", BLOCK_CVXPY], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")


@pytest.mark.parametrize("name", PACKAGES)
def test_package_is_imported_from_this_repository(name):
    mod = importlib.import_module(name)
    assert Path(mod.__file__).resolve().parent == ROOT / name


@pytest.mark.parametrize("pkg", ["cvxmetric", "formulations", "solvers"])
def test_lower_layers_do_not_import_verification(pkg):
    for path in (ROOT / pkg).rglob("*.py"):
        text = path.read_text()
        assert "import verification" not in text and "from verification" not in text, path


@pytest.mark.parametrize("pkg", ["cvxmetric", "solvers"])
def test_numpy_layers_never_mention_cvxpy_imports(pkg):
    for path in (ROOT / pkg).rglob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            assert not stripped.startswith(("import cvxpy", "from cvxpy")), f"{path}: {line}"
