"""Fast solvers (numpy/scipy only), one ``solve_<method>`` facade per method.

Every facade takes the data and the method's parameters, chooses the algorithm with
``method=``, rejects options that algorithm does not read (a ValueError naming the option and
the method) and returns the one result contract, :class:`cvxmetric.solvers.result.SolverResult`:

========================  ==============================================  ==================
facade                    ``method=``                                     default
========================  ==============================================  ==================
``solve_qwise``           ``"subgradient"``, ``"pdhg"``, ``"subspace"``   ``"subgradient"``
``solve_qwise_vector``    ``"newton"``                                    ``"newton"``
``solve_fantope``         ``"mm"``, ``"subgradient"``, ``"factor"``       ``"mm"``
``solve_lmnn``            ``"subgradient"``, ``"pdhg"``                   ``"subgradient"``
``solve_mmc``             ``"ascent"``                                    ``"ascent"``
``solve_mmc_diagonal``    ``"ascent"``                                    ``"ascent"``
``solve_itml``            ``"bregman"``                                   ``"bregman"``
``solve_boostmetric``     ``"column_generation"`` (hinge loss),           per loss
                          ``"projected_gradient"``,
                          ``"totally_corrective"``, ``"stagewise"``
                          (exp, logistic)
``solve_orml``            ``"pursuit"``                                   ``"pursuit"``
========================  ==============================================  ==================

The algorithms themselves (``pdhg``, ``projected_subgradient``, ``fantope_mm``, ``bregman_itml``,
``mmc_ascent``, ``orml_pursuit``, ...) take a model object and live in their modules.
"""
from .boostmetric import solve_boostmetric
from .fantope import solve_fantope
from .itml import solve_itml
from .lmnn import solve_lmnn
from .mmc import solve_mmc, solve_mmc_diagonal
from .orml import solve_orml
from .qwise import solve_qwise, solve_qwise_vector
from .result import SolverResult

__all__ = ["solve_qwise", "solve_qwise_vector", "solve_fantope", "solve_lmnn", "solve_mmc", "solve_mmc_diagonal", "solve_itml",
           "solve_boostmetric", "solve_orml", "SolverResult"]
