"""One public problem object per method, built from the user's data: solve it, certify it, check any point.

>>> from cvxmetric.problems import LMNN
>>> problem = LMNN(X, y, n_neighbors=3)             # doctest: +SKIP
>>> result = problem.solve()                        # the fast default algorithm  # doctest: +SKIP
>>> problem.check(result.M, rtol=1e-3).verdict      # against the certified optimum  # doctest: +SKIP
'optimal'

Every class is a :class:`Problem` (see :mod:`cvxmetric.problems._base`) with ``solve``,
``truth``, ``objective``, ``check`` and ``verify``; its parameters have the names of the
estimator of the same method; :func:`bundled` gives the problem of a bundled instance. cvxpy is imported only by ``truth``, ``objective``, ``check``,
``verify`` and ``solve(method="cvxpy")``.
"""
from ._base import EXACT, CheckReport, Problem, Run, bundled, list_problems, problem_class, problem_of
from .boostmetric import BoostMetric
from .lmnn import LMNN
from .orml import ORML
from .pairs import ITML, MMC, MMCDiagonal
from .qwise import Fantope, Qwise, QwiseVector

__all__ = ["Problem", "CheckReport", "Run", "problem_class", "problem_of", "list_problems", "bundled", "EXACT", "LMNN",
           "ITML", "MMC", "MMCDiagonal", "Qwise", "QwiseVector", "Fantope", "BoostMetric", "ORML"]
