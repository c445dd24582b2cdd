"""LMNN in the harness: the projected subgradient engine with on-the-fly impostors, the same
engine on the materialised triplet set, and PDHG on a working set of the implicit triplet set
(certified on the full set), against the cvxpy hinge formulation."""
from __future__ import annotations

import numpy as np

from ..kkt import hinge_kkt_fast, hinge_kkt_truth
from ..registry import MethodSpec, Thresholds
from ..tolerances import GAP_FIRST_ORDER

#: The thresholds of LMNN's solvers (``solve_lmnn(method=...)``). Both stop on the certified gap of
#: the full triplet set, so the fast-point KKT residual is reported, not checked
#: (tolerances.KKT_FAST_FIRST_ORDER): PDHG's working set stops at its first point certified within
#: tol, and with the complementarity polish of its certificate that comes before its
#: residual test (iris-sub seed 0: 64 iterations, certified 6.7e-4, gap to the truth 5.5e-4, fast
#: KKT residual 0.14), as for Qwise's working set (``qwise.TOLERANCES["pdhg-ws"]``).
TOLERANCES = {"subgradient": Thresholds(GAP_FIRST_ORDER, None),
              "pdhg": Thresholds(GAP_FIRST_ORDER, None)}


def _kkt_fast(form, point):
    return hinge_kkt_fast(form.model, point)


def _extra_checks(form, inst, res, truth):
    """Certification on the full triplet set, by brute force over the formulation's triplets:
    the number of triplets violated at the returned M that are missing from the working set
    (``result.working_set``: lmnn-search and lmnn-pdhg grow one)."""
    if res.working_set is None:
        return {}
    n = inst.X.shape[0]

    def codes(idx):
        idx = idx.astype(np.int64)   # the key exceeds int32 beyond 1,290 points
        return (idx[:, 0] * n + idx[:, 1]) * n + idx[:, 3]

    violated = form.model.constraints.idx[form.model.margins(res.M) > 0]
    working = res.working_set.idx
    missing = int(np.sum(~np.isin(codes(violated), codes(working)))) if violated.size else 0
    return {"violated_outside_working_set": (float(missing), 0.0)}


SPEC = MethodSpec(
    name="lmnn",
    instance_methods=("lmnn",),
    kkt_truth=hinge_kkt_truth,
    kkt_fast=_kkt_fast,
    extra_checks=_extra_checks,
    tolerances=TOLERANCES,
    report_order=2,
)
