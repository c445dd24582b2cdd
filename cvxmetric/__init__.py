"""cvxmetric: the shared core of the project (numpy/scipy only).

Constraint sets and their generators, difference-vector geometry and the hinge loss, the
models shared by formulations and fast solvers, PSD linear algebra, smooth losses, data sets
and the registry of named instances. See ``../shared/DESIGN.md``.
"""
from .constraints import ConstraintSet
from .exceptions import ConvergenceWarning
from .hinge import HingeLoss, QuadrupletGeometry
from .linalg import eigh_descending, numerical_rank, project_psd, psd_factor, symmetrize
from .models import HingeModel, qwise_model

__all__ = ["ConstraintSet", "ConvergenceWarning", "HingeLoss", "QuadrupletGeometry", "HingeModel",
           "qwise_model", "project_psd", "psd_factor", "eigh_descending", "numerical_rank", "symmetrize"]

__version__ = "0.1.0"
