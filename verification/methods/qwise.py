"""Qwise in the harness: the full-matrix model (subgradient engine, PDHG, PDHG on a working set) and the
vector model (Newton)."""
from __future__ import annotations

from cvxmetric.formulations.qwise import build_qwise, build_qwise_vector
from cvxmetric.solvers.qwise import solve_qwise, solve_qwise_vector

from ..kkt import hinge_kkt_fast, hinge_kkt_truth, vector_kkt, vector_kkt_truth
from ..registry import FastSolver, MethodSpec, Thresholds
from ..tolerances import GAP_FIRST_ORDER, GAP_NEWTON, KKT_FAST_FIRST_ORDER, KKT_FAST_NEWTON

#: The thresholds of Qwise's full-matrix solvers (``solve_qwise(method=...)``; "pdhg-ws" is PDHG on
#: a working set, ``working_set=True``, the result ``qwise-pdhg-ws``). The
#: fast-point KKT residual of the subgradient engine and of the working set is reported, not
#: checked (tolerances.KKT_FAST_FIRST_ORDER; the working set's reason is at its row below).
TOLERANCES = {"subgradient": Thresholds(GAP_FIRST_ORDER, None),
              "pdhg": Thresholds(GAP_FIRST_ORDER, KKT_FAST_FIRST_ORDER),
              "pdhg-ws": Thresholds(GAP_FIRST_ORDER, None)}


def _build(inst):
    if inst.method == "qwise_vector":
        return build_qwise_vector(inst.X, inst.constraints, **inst.params)
    return build_qwise(inst.X, inst.constraints, **inst.params)


def _fast(inst):
    if inst.method == "qwise_vector":
        return [FastSolver("qwise-vector-newton",
                           lambda i: solve_qwise_vector(i.X, i.constraints, **i.params),
                           GAP_NEWTON, KKT_FAST_NEWTON)]
    return [FastSolver("qwise-subgradient", lambda i: solve_qwise(i.X, i.constraints, method="subgradient",
                                                                  **i.params),
                       *TOLERANCES["subgradient"]),
            FastSolver("qwise-pdhg", lambda i: solve_qwise(i.X, i.constraints, method="pdhg", working_set=False,
                                                           **i.params),
                       *TOLERANCES["pdhg"]),
            # the working set stops as soon as the full problem's certified gap is within
            # tol, earlier than plain PDHG's residual test; at such points the
            # fast-point KKT residual of this nonsmooth problem is no optimality measure (syn-d20 seed 1: certified 4e-4, rel. gap 3e-4, KKT 0.13),
            # so, as for the subgradient row, it is reported and the certified gap is checked
            FastSolver("qwise-pdhg-ws",
                       lambda i: solve_qwise(i.X, i.constraints, method="pdhg", working_set=True, **i.params),
                       *TOLERANCES["pdhg-ws"])]


def _kkt_truth(form, sol):
    return vector_kkt_truth(form, sol) if form.point_name == "w" else hinge_kkt_truth(form, sol)


def _kkt_fast(form, point):
    if form.point_name == "w":
        return vector_kkt(form.model, point)
    return hinge_kkt_fast(form.model, point)


SPEC = MethodSpec(
    name="qwise",
    instance_methods=("qwise", "qwise_vector"),
    build=_build,
    fast_solvers=_fast,
    kkt_truth=_kkt_truth,
    kkt_fast=_kkt_fast,
    tolerances=TOLERANCES,
)
