"""cvxmetric: the shared core of the project (numpy/scipy only).

Constraint sets and their generators, difference-vector geometry and the hinge loss, the
models shared by formulations and fast solvers, PSD linear algebra, smooth losses, data sets
and the registry of named instances. The design is ``docs/design.md``.

The scikit-learn estimators (:mod:`cvxmetric.estimators`: ``LMNN``, ``ITML``, ``MMC``, ``Qwise``,
``BoostMetric``, ``ORML``, ...) are importable from here, loaded on first use (PEP 562), so that
``import cvxmetric`` stays light and never loads scikit-learn's estimator machinery or cvxpy.
They are thin layers on :mod:`cvxmetric.problems`: one problem object per method, built from the
user's data, that solves, certifies and checks any metric (``from cvxmetric import problems``).
"""
from .constraints import ConstraintSet
from .exceptions import ConvergenceWarning
from .hinge import HingeLoss, QuadrupletGeometry
from .linalg import eigh_descending, numerical_rank, project_psd, psd_factor, symmetrize
from .models import HingeModel, qwise_model

__all__ = ["ConstraintSet", "ConvergenceWarning", "HingeLoss", "QuadrupletGeometry", "HingeModel",
           "qwise_model", "project_psd", "psd_factor", "eigh_descending", "numerical_rank", "symmetrize"]

__version__ = "0.1.0"

#: Names served lazily from :mod:`cvxmetric.estimators` (the layer on top of everything else).
_ESTIMATORS = ("LMNN", "ITML", "ITML_Supervised", "MMC", "MMC_Supervised", "Qwise", "Qwise_Supervised",
               "BoostMetric", "ORML", "Certificate")


def __getattr__(name):
    if name in _ESTIMATORS:
        from . import estimators
        return getattr(estimators, name)
    raise AttributeError(f"module 'cvxmetric' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ESTIMATORS))
