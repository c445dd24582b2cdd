"""Architecture rules of design §2: the layering, one import namespace, and that the packages
come from this repository."""
import ast
import importlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Installed name -> folder of the repository (pyproject's package-dir).
PACKAGES = {"cvxmetric": "cvxmetric", "cvxmetric.formulations": "formulations",
            "cvxmetric.solvers": "solvers", "cvxmetric.verification": "verification",
            "cvxmetric.problems": "problems", "cvxmetric.estimators": "estimators"}

BLOCK_CVXPY = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "cvxpy" or name.startswith("cvxpy."):
            raise ImportError("cvxpy is blocked in this test")
        return None
sys.meta_path.insert(0, _Block())
import cvxmetric, cvxmetric.solvers as solvers
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
    assert Path(mod.__file__).resolve().parent == ROOT / PACKAGES[name]


def test_layers_are_not_top_level_modules():
    """Outside the repository only ``cvxmetric`` imports: no generic top-level names."""
    code = ("import importlib.util, cvxmetric.verification\n"
            "print([n for n in ('formulations', 'solvers', 'verification', 'benchmarks')"
            " if importlib.util.find_spec(n) is not None])")
    r = subprocess.run([sys.executable, "-c", code], cwd=Path.home(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_wheel_installs_exactly_one_top_level_package(tmp_path):
    """``pip install`` puts ``cvxmetric`` (and its metadata) into site-packages, nothing else."""
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                        "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = tmp_path.glob("cvxmetric-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"cvxmetric"}, top
    for sub in ("formulations/ladder.py", "solvers/pdhg.py", "verification/__main__.py",
                "verification/methods/qwise.py", "instances/qwise.py", "problems/_base.py", "estimators/lmnn.py"):
        assert f"cvxmetric/{sub}" in names, sub


#: The problem objects and the estimators on them (design §2) are the top layers, in their own
#: folders: they call the fast solvers and import cvxpy, the formulations and the verification
#: harness only lazily, inside the functions that need them (``truth``, ``check``, ``verify()``,
#: ``solver="cvxpy"``), so that they import without cvxpy. The harness runs the problems (each
#: instance it verifies is a Problem, which builds its formulation and runs its fast solvers).
ESTIMATORS = ROOT / "estimators"
PROBLEMS = ROOT / "problems"
TOP_LAYERS = (ESTIMATORS, PROBLEMS)

#: What each layer below the top must never mention (a grep, no exemptions): the layers after it in
#: design §2's order (core, solvers, formulations, problems, verification, estimators); the
#: problems reach the formulations and the harness lazily (the test below).
ABOVE = {"cvxmetric": ("cvxmetric.formulations", "cvxmetric.solvers", "cvxmetric.verification",
                       "cvxmetric.problems", "cvxmetric.estimators"),
         "formulations": ("cvxmetric.verification", "cvxmetric.problems", "cvxmetric.estimators"),
         "solvers": ("cvxmetric.formulations", "cvxmetric.verification", "cvxmetric.problems",
                     "cvxmetric.estimators"),
         "verification": ("cvxmetric.estimators",)}


def _layer_files(pkg):
    """A layer's modules; a program (``__main__.py``, ``python -m ...``) is no layer and may start any."""
    return [p for p in (ROOT / pkg).rglob("*.py") if p.name != "__main__.py"]


@pytest.mark.parametrize("pkg", sorted(ABOVE))
def test_lower_layers_do_not_import_the_layers_above(pkg):
    for path in _layer_files(pkg):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")):
                assert not any(f" {name}" in stripped or stripped.startswith(f"from {name}")
                               for name in ABOVE[pkg]), f"{path}: {line}"


@pytest.mark.parametrize("pkg", ["cvxmetric", "solvers"])
def test_numpy_layers_never_mention_cvxpy_imports(pkg):
    for path in _layer_files(pkg):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            assert not stripped.startswith(("import cvxpy", "from cvxpy")), f"{path}: {line}"


def _module_level_imports(path: Path) -> list[str]:
    """Modules imported at module level (not inside a function) by one file, absolute names."""
    tree = ast.parse(path.read_text())
    package = "cvxmetric.estimators"
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    return names


def test_estimator_layer_imports_cvxpy_formulations_and_verification_lazily():
    """The problems and estimators sit on top: their cvxpy / formulations / verification imports
    are inside functions."""
    lazy = ("cvxpy", "cvxmetric.formulations", "cvxmetric.verification")
    files = sorted(f for top in TOP_LAYERS for f in top.rglob("*.py"))
    assert files
    for path in files:
        for name in _module_level_imports(path):
            assert not name.startswith(lazy), f"{path}: module-level import of {name}"


BLOCK_CVXPY_ESTIMATORS = BLOCK_CVXPY.replace('print("ok")', """
import numpy as np
from cvxmetric import LMNN, ITML_Supervised, MMC_Supervised, Qwise_Supervised, BoostMetric, ORML
rng = np.random.default_rng(0)
X = rng.standard_normal((24, 3)); y = np.repeat([0, 1, 2], 8)
est = LMNN(n_neighbors=2).fit(X, y)
assert est.certificate_.certified
assert "cvxpy" not in sys.modules and "cvxmetric.verification" not in sys.modules
print("ok")
""")


def test_estimators_import_and_fit_without_cvxpy():
    """``import cvxmetric`` serves the estimators lazily; a fast fit never loads cvxpy or verification."""
    r = subprocess.run([sys.executable, "-c", BLOCK_CVXPY_ESTIMATORS], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")


def test_import_cvxmetric_does_not_load_the_estimators():
    code = "import sys, cvxmetric; print('cvxmetric.estimators' in sys.modules, 'sklearn.base' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]
