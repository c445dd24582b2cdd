"""The two statements of a hinge problem are one problem, and the ladder's refinement certifies it.

* ``hinge_form="pairs"`` (shared endpoint pairs' distances) and ``"rows"`` (one dense row per
  constraint) give the same ``value_at`` at random points (also with degenerate halves, i == j)
  and the same certified optimum; the
  default picks pairs for LMNN (triplets share their pairs) and rows for random quadruplets;
* ``Formulation.refine`` returns every named dual with cvxpy's signs and units (it agrees with
  Clarabel's duals), and the ladder's refining rung reuses the Clarabel solve and certifies;
* the attempts report their compile and solve seconds.
"""
import numpy as np
import pytest

from cvxmetric.certificates import relative_difference
from cvxmetric.instances import get_instance
from cvxmetric.linalg import random_psd
from cvxmetric.lmnn import lmnn_model
from cvxmetric.models import qwise_model
from cvxmetric.formulations.hinge import build_hinge_problem, hinge_rows
from cvxmetric.formulations.ladder import LADDER, Rung, solve_certified

#: ``value_at`` of the two forms agree to round-off: the same numbers summed in another order
#: (measured ~1e-15 relative).
VALUE_RTOL = 1e-9
#: Certified ground-truth width of these tests, and the agreement of two certified optima
#: (each interval is within TRUTH_RTOL, so their upper ends differ by at most about twice that).
TRUTH_RTOL = 1e-7
#: Clarabel solves to a relative gap of 1e-7 (``SOLVER_OPTIONS``); its duals and the refinement's
#: agree to ~5e-5 relative (measured on iris-sub: the multipliers of a degenerate LP-SDP are not
#: unique to more than the solve's accuracy). The test checks signs and units, not accuracy.
DUAL_AGREEMENT = 1e-3


@pytest.fixture(scope="module")
def lmnn():
    inst = get_instance("lmnn", "iris-sub")
    return lmnn_model(inst.X, inst.y, 2)


@pytest.fixture(scope="module")
def mixed():
    """Quadruplets and pairs (a pair is a quadruplet with a degenerate half, i == j)."""
    inst = get_instance("qwise", "iris-mixed")
    idx = inst.constraints.idx
    assert np.any(idx[:, 0] == idx[:, 1]) and np.any(idx[:, 2] == idx[:, 3])
    return qwise_model(inst.X, inst.constraints, **inst.params)


@pytest.fixture(scope="module")
def quadruplets():
    inst = get_instance("qwise", "syn-d5")
    return qwise_model(inst.X, inst.constraints, regularizer="trace", C_Q=10.0)


def test_default_form_has_fewer_dense_rows(lmnn, quadruplets):
    form, B, S = hinge_rows(lmnn)
    assert form == "pairs" and B.shape[0] < lmnn.m and S.shape == (lmnn.m, B.shape[0])
    form, B, S = hinge_rows(quadruplets)
    assert form == "rows" and B.shape[0] == quadruplets.m and S is None
    with pytest.raises(ValueError, match="hinge_form"):
        hinge_rows(lmnn, "triplets")


@pytest.mark.parametrize("which", ["lmnn", "quadruplets", "mixed"])
def test_both_forms_have_the_same_value_everywhere(which, request):
    model = request.getfixturevalue(which)
    pairs = build_hinge_problem(model, hinge_form="pairs")
    rows = build_hinge_problem(model, hinge_form="rows")
    assert pairs.info["hinge_form"] == "pairs" and rows.info["hinge_form"] == "rows"
    assert "pair_distance" in pairs.constraints and "pair_distance" not in rows.constraints
    for seed in range(3):
        M = random_psd(model.d, seed=seed)
        assert relative_difference(pairs.value_at(M), rows.value_at(M)) <= VALUE_RTOL
        assert relative_difference(pairs.value_at(M), model.value(M)) <= VALUE_RTOL


def test_both_forms_have_the_same_certified_optimum(lmnn):
    truths = [solve_certified(build_hinge_problem(lmnn, hinge_form=f), TRUTH_RTOL) for f in ("pairs", "rows")]
    assert all(t.certified for t in truths), [t.attempts for t in truths]
    assert relative_difference(truths[0].p_star, truths[1].p_star) <= 2 * TRUTH_RTOL


def test_refine_returns_every_named_dual_in_cvxpys_convention(lmnn):
    form = build_hinge_problem(lmnn).normalize().formulation
    sol = form.solve("CLARABEL")
    refined = form.refine(sol, TRUTH_RTOL)
    assert set(refined.duals) == set(form.constraints) and set(refined.aux) == {"xi"}
    for name, dual in sol.duals.items():
        err = np.linalg.norm(refined.duals[name] - dual) / np.linalg.norm(dual)
        assert err <= DUAL_AGREEMENT, (name, err)
    assert form.lower_bound(refined) <= form.value_at(refined.point)


def test_refining_rung_reuses_the_solve_and_certifies(lmnn):
    ladder = (Rung("clarabel", "CLARABEL", {"max_iter": 3}), Rung("clarabel+refine", "CLARABEL", refine=True))
    truth = solve_certified(build_hinge_problem(lmnn), TRUTH_RTOL, ladder=ladder)
    assert truth.certified and truth.rung == "clarabel+refine", truth.attempts
    first, refined = truth.attempts
    assert first.time_compile > 0 and first.time_solve > 0
    assert refined.time_compile == 0.0 and refined.time_solve > 0    # the solve was reused
    assert first.time >= first.time_compile and refined.time >= refined.time_solve


def test_refining_rung_is_skipped_without_a_refinement():
    from cvxmetric.formulations.mmc import build_mmc
    inst = get_instance("mmc", "iris")
    form = build_mmc(inst.X, inst.constraints)
    assert form.refine is None
    truth = solve_certified(form, 1e-6, ladder=(Rung("clarabel+refine", "CLARABEL", refine=True),) + LADDER[:1])
    assert [a.rung for a in truth.attempts] == [LADDER[0].name]
