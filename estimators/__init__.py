"""scikit-learn estimators that carry certificates (metric-learn's interface).

``from cvxmetric import LMNN`` (or ``from cvxmetric.estimators import LMNN``). Every estimator takes
``solver=`` (one of its fast solvers, or ``"cvxpy"`` for the exact certified solve) and, once
fitted, exposes ``result_`` (the solver's result contract), ``certificate_`` and ``verify()``
(the verification harness' row of the fitted problem). This layer sits on top of the others:
it calls the fast solvers, and imports cvxpy, the formulations and the verification harness only
when ``solver="cvxpy"`` or ``verify()`` is used.
"""
from ._base import Certificate
from .boostmetric import BoostMetric
from .lmnn import LMNN
from .orml import ORML
from .pairs import ITML, MMC, ITML_Supervised, MMC_Supervised
from ._priors import SingularPriorError
from .qwise import Qwise, Qwise_Supervised

__all__ = ["Certificate", "LMNN", "ITML", "ITML_Supervised", "MMC", "MMC_Supervised", "Qwise",
           "Qwise_Supervised", "BoostMetric", "ORML", "SingularPriorError"]
