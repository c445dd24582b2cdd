"""cvxpy ground-truth formulations, one module per method (design §2, §5: ``docs/design.md``).

Every builder returns a :class:`~cvxmetric.formulations.base.Formulation`.
"""
from .base import Formulation, ReferenceSolution  # noqa: F401
