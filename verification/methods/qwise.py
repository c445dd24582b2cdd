"""Qwise in the harness: the full-matrix model (subgradient engine, PDHG, PDHG on a working set:
:meth:`cvxmetric.problems.Qwise.runs`) and the vector model (Newton, :class:`cvxmetric.problems.QwiseVector`)."""
from __future__ import annotations

from ..kkt import hinge_kkt_fast, hinge_kkt_truth, vector_kkt, vector_kkt_truth
from ..registry import MethodSpec, Thresholds
from ..tolerances import GAP_FIRST_ORDER, GAP_NEWTON, KKT_FAST_FIRST_ORDER, KKT_FAST_NEWTON

#: The thresholds of Qwise's full-matrix solvers (``solve_qwise(method=...)``; "pdhg-ws" is PDHG on
#: a working set, ``working_set=True``, the result ``qwise-pdhg-ws``). The
#: fast-point KKT residual of the subgradient engine and of the working set is reported, not
#: checked (tolerances.KKT_FAST_FIRST_ORDER). The working set stops as soon as the full problem's
#: certified gap is within tol, earlier than plain PDHG's residual test; at such points the
#: fast-point KKT residual of this nonsmooth problem is no optimality measure (syn-d20 seed 1:
#: certified 4e-4, rel. gap 3e-4, KKT 0.13), so, as for the subgradient, it is reported and the
#: certified gap is checked; so for "subspace" (subspace generation, trace regularizer only), which
#: stops on the full problem's certified gap too. "newton": the vector model's projected Newton
#: (``solve_qwise_vector(method=...)``).
TOLERANCES = {"subgradient": Thresholds(GAP_FIRST_ORDER, None),
              "pdhg": Thresholds(GAP_FIRST_ORDER, KKT_FAST_FIRST_ORDER),
              "pdhg-ws": Thresholds(GAP_FIRST_ORDER, None),
              "subspace": Thresholds(GAP_FIRST_ORDER, None),
              "newton": Thresholds(GAP_NEWTON, KKT_FAST_NEWTON)}


def _kkt_truth(form, sol):
    return vector_kkt_truth(form, sol) if form.point_name == "w" else hinge_kkt_truth(form, sol)


def _kkt_fast(form, point):
    if form.point_name == "w":
        return vector_kkt(form.model, point)
    return hinge_kkt_fast(form.model, point)


SPEC = MethodSpec(
    name="qwise",
    instance_methods=("qwise", "qwise_vector"),
    kkt_truth=_kkt_truth,
    kkt_fast=_kkt_fast,
    tolerances=TOLERANCES,
    report_order=0,
)
