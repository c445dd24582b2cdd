"""Problems that are the same in other units take the same path: iteration counts across scales.

Qwise is not invariant under X -> sX by itself (a fixed margin beside the regularizer), but with
the regularizer's weight scaled alike it is the same problem in other units: with M~ = s^2 M,
``reg_weight * s^2 * tr M`` (trace) or ``reg_weight * s^4 * ||M||^2 / 2`` (Frobenius) beside the
margins of ``s X`` is the problem of ``X`` at M~. Each fast solver must then take the same number
of iterations (counts, not timings) and reach the same certified objective.
"""
import warnings

import numpy as np
import pytest

from cvxmetric.exceptions import ConvergenceWarning
from cvxmetric.instances import get_instance
from cvxmetric.solvers import solve_qwise

SCALES = (2.0 ** -10, 1.0, 2.0 ** 10)
#: The regularizer's weight that makes s X the same problem: s^2 for the trace, s^4 for the Frobenius.
POWER = {"trace": 2, "frobenius": 4}


@pytest.mark.parametrize("method", ["pdhg", "subgradient"])
@pytest.mark.parametrize("regularizer", ["trace", "frobenius"])
def test_qwise_takes_the_same_path_in_other_units(method, regularizer):
    inst = get_instance("qwise", "syn-d5")
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for s in SCALES:
            runs.append(solve_qwise(inst.X * s, inst.constraints, regularizer=regularizer, method=method,
                                    reg_weight=s ** POWER[regularizer], tol=1e-3, max_iter=20_000))
    counts = [r.n_iter for r in runs]
    assert max(counts) <= 1.5 * min(counts), counts
    objectives = np.array([r.objective for r in runs])
    assert np.ptp(objectives) <= 2e-3 * np.max(np.abs(objectives)), objectives
