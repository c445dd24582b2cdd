r"""cvxpy statement of a :class:`~cvxmetric.models.HingeModel` (Qwise, LMNN, Fantope bound).

.. math::
    \min_{M, \xi}\ \langle R, M\rangle + \tfrac q2 \|M\|_F^2 + \sum_c c_c \xi_c
    \quad\text{s.t.}\quad
    \xi_c \ge \delta_c + \langle M, A_c\rangle\ (\text{"hinge"}),\quad
    \xi \ge 0\ (\text{"slack\_nonneg"}),\quad
    M \succeq 0\ (\text{"psd"}).

Every :math:`\langle M, A_c\rangle = D_M(u_c) - D_M(v_c)` is a difference of two squared
distances, each linear in :math:`\mathrm{svec}(M)` (upper triangle with the off-diagonal
coefficients doubled; cvxpy compiles that markedly faster than the full :math:`d \times d` form).
The hinge rows are stated in one of two exactly equivalent forms, whichever gives the conic solver
fewer dense rows (``info["hinge_form"]``):

* ``"rows"``: one dense row per constraint, ``A_svec @ svec(M)`` (:math:`m` rows of length
  :math:`d(d+1)/2`);
* ``"pairs"``, when the constraints share endpoint pairs (fewer distinct pairs :math:`P` than
  constraints :math:`m`, e.g. LMNN: every target pair and impostor pair recurs in many
  triplets): a variable ``D`` of the :math:`P` distinct pairs' squared distances, pinned by the
  equality ``"pair_distance"``: ``D == B @ svec(M)`` (:math:`P` dense rows), and hinge rows
  ``S @ D`` with :math:`S` the sparse :math:`m \times P` incidence (+1 at the pair of
  :math:`u_c`, -1 at that of :math:`v_c`). LMNN on the first 60 breast-cancer points with 30
  features (``n_neighbors=3``) has :math:`m = 3666` triplets on :math:`P = 741` pairs: the conic
  program has 360,165 nonzeros instead of 1,712,450, and a Clarabel iteration takes 0.17 s
  instead of 2.3 s (one BLAS thread; ``python -m benchmarks.truth``).

The duals of "hinge" are the hinge multipliers :math:`\alpha_c \in [0, c_c]` in both forms, the
dual of "psd" is the matrix :math:`Z \succeq 0`.

Certification hooks (``cvxmetric.formulations.ladder``):

* ``dual_bound(solution)`` — :meth:`cvxmetric.models.HingeModel.dual_bound` of the "hinge" duals
  (clipped into :math:`[0, c]`, repaired to exact dual feasibility there), with the objective of
  the solver's point projected onto the PSD cone as the ``upper`` value its trace bound needs;
  the same function certifies PDHG and LMNN's constraint generation;
* ``normalize()`` — the problem of :meth:`~cvxmetric.models.HingeModel.normalization`: data,
  margins and weights multiplied by powers of two so that difference vectors, margins and hinge
  coefficients are O(1); :math:`M = b M'` and :math:`f = v f'` map back exactly;
* ``refine(solution, rtol)`` — :func:`cvxmetric.solvers.pdhg.pdhg` on the same model, warm-started
  from the solve's PSD-projected point and its "hinge" duals clipped into :math:`[0, c]`, run until
  its certified gap is within ``REFINE_RTOL_FRACTION * rtol`` (or ``REFINE_TIME_LIMIT``). The
  interior-point solves of LMNN stall short of the ground-truth tolerance (on the 60 x 30 case
  above Clarabel stops with "AlmostSolved" after 34 iterations at a certified width of 2e-4,
  whatever its regularisation, refinement, equilibration or step settings), while the
  first-order method, started there, certifies 5e-7 in 7,136 iterations (11-22 s). The result carries every named dual of the statement, from the
  KKT conditions of :mod:`cvxmetric.verification.kkt` at its point: :math:`\alpha` the multipliers,
  :math:`\beta = c - \alpha`, :math:`\xi = [\delta + \langle M, A\rangle]_+`,
  :math:`Z = R + qM + \sum_c \alpha_c A_c`, and in the pairs form the multipliers
  :math:`-S^\top \alpha` of "pair_distance" (cvxpy's sign convention). The interval it gives
  is certified like a cvxpy solve's: ``value_at`` of its point, ``dual_bound`` of its multipliers.
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np
from scipy import sparse

from cvxmetric._checks import as_square_symmetric
from cvxmetric.linalg import project_psd, svec, svec_outer
from cvxmetric.models import HingeModel
from cvxmetric.solvers.pdhg import pdhg

from .base import Formulation, Normalization, ReferenceSolution, symmetric_parameter

__all__ = ["build_hinge_problem", "hinge_rows", "svec_expr", "svec_weights", "REFINE_RTOL_FRACTION",
           "REFINE_TIME_LIMIT"]

#: ``refine`` holds its certified gap to this fraction of the ladder's tolerance: the ladder
#: recomputes the interval with cvxpy's ``value_at`` and a fresh ``dual_bound``, which agree with
#: the solver's own numbers to round-off (~1e-12 relative), so half the tolerance leaves a margin
#: of orders of magnitude.
REFINE_RTOL_FRACTION = 0.5

#: Wall-clock seconds ``refine`` may spend (one PDHG run): on the 60 x 30 LMNN case of the module
#: docstring, warm-started from Clarabel, it certified 5e-7 in 7,136 iterations (11-22 s, one BLAS
#: thread, on a loaded 2-core machine), and 1e-8 in 12,064 (24 s); a cold start needed 21,920
#: iterations for 1e-8.
REFINE_TIME_LIMIT = 120.0


def svec_expr(M: cp.Expression) -> cp.Expression:
    """Upper triangle (diagonal included, row-major) of a (d, d) cvxpy expression."""
    return M[np.triu_indices(M.shape[0])]


def svec_weights(R: np.ndarray) -> np.ndarray:
    r"""Coefficients ``r`` with :math:`\langle R, M\rangle = r \cdot \mathrm{svec}(M)` for symmetric R, M."""
    r = svec(R)
    i, j = np.triu_indices(R.shape[0])
    return np.where(i == j, r, 2.0 * r)


def _objective(model: HingeModel, M: cp.Expression, hinge_part: cp.Expression) -> cp.Expression:
    sv = svec_expr(M)
    obj = svec_weights(model.R) @ sv + model.coef @ hinge_part
    if model.q:
        obj = obj + 0.5 * model.q * cp.sum_squares(M)
    return obj


def hinge_rows(model: HingeModel, hinge_form: str | None = None):
    r"""The linear map :math:`M \mapsto (\langle M, A_c\rangle)_c` in one of its two forms.

    Parameters
    ----------
    model : HingeModel
    hinge_form : {"pairs", "rows"} or None
        The form (module docstring); None chooses the one with fewer dense rows ("pairs" when
        there are fewer distinct pairs than constraints).

    Returns
    -------
    form : str
        ``"pairs"`` or ``"rows"`` (module docstring).
    B : ndarray, shape (P, d(d+1)/2) or (m, d(d+1)/2)
        Dense rows on :math:`\mathrm{svec}(M)`: squared distances of the distinct pairs
        (``"pairs"``) or the constraints' own rows (``"rows"``).
    S : scipy.sparse.csr_matrix, shape (m, P), or None
        The incidence with :math:`\langle M, A_c\rangle = (S B\,\mathrm{svec}(M))_c` (``"pairs"``).
    """
    if hinge_form not in (None, "pairs", "rows"):
        raise ValueError(f"hinge_form must be 'pairs', 'rows' or None (the one with fewer dense rows); "
                         f"got {hinge_form!r}")
    geom = model.geometry
    table, pu, pv = geom.pair_table()
    if hinge_form == "rows" or table.P == 0 or (hinge_form is None and table.P >= geom.m):
        return "rows", geom.svec_matrix(), None
    rows = np.arange(geom.m)
    u, v = pu < table.P, pv < table.P   # a degenerate half (i == j) sits at the zero slot P
    S = sparse.csr_matrix((np.concatenate([np.ones(u.sum()), -np.ones(v.sum())]),
                           (np.concatenate([rows[u], rows[v]]), np.concatenate([pu[u], pv[v]]))),
                          shape=(geom.m, table.P))
    return "pairs", svec_outer(table.Xc[table.pa] - table.Xc[table.pb]), S


def build_hinge_problem(model: HingeModel, *, method: str = "qwise", hinge_form: str | None = None) -> Formulation:
    """The cvxpy problem of ``model`` with named constraints and a closed-form ``value_at``.

    Parameters
    ----------
    model : HingeModel
    method : str
        The problem family's name, recorded in ``Formulation.method``.
    hinge_form : {"pairs", "rows"} or None
        How the hinge rows are stated (module docstring; :func:`hinge_rows`); None (the default)
        chooses the form with fewer dense rows. Both state the same problem; the twin of
        ``normalize()`` keeps the form.

    Returns
    -------
    Formulation
        ``variables = {"M", "xi"}`` (and ``"D"`` in the pairs form), ``constraints = {"psd",
        "hinge", "slack_nonneg"}`` (and ``"pair_distance"`` in the pairs form), ``info =
        {"hinge_form": "pairs" or "rows"}``, and the hooks ``dual_bound`` and ``normalize``
        (module docstring).
    """
    if not isinstance(model, HingeModel):
        raise TypeError(f"model must be a HingeModel; got {type(model).__name__}")
    d, m = model.d, model.m
    hinge_form, B, S = hinge_rows(model, hinge_form)
    delta = np.asarray(model.constraints.delta, dtype=np.float64)
    M = cp.Variable((d, d), symmetric=True, name="M")
    xi = cp.Variable(m, name="xi")
    variables = {"M": M, "xi": xi}
    cons = {"psd": M >> 0}
    if S is None:
        lin = B @ svec_expr(M)
    else:
        D = variables["D"] = cp.Variable(B.shape[0], name="D")
        cons["pair_distance"] = D == B @ svec_expr(M)
        lin = S @ D
    cons["hinge"] = xi >= delta + lin
    cons["slack_nonneg"] = xi >= 0
    problem = cp.Problem(cp.Minimize(_objective(model, M, xi)), list(cons.values()))

    P = symmetric_parameter(d)
    lin_P = B @ svec_expr(P) if S is None else S @ (B @ svec_expr(P))
    value_expr = _objective(model, P, cp.pos(delta + lin_P))

    def evaluate(point) -> float:
        P.value = as_square_symmetric(point, "M", d=d)
        return float(value_expr.value)

    def dual_bound(solution: ReferenceSolution):
        alpha = solution.duals.get("hinge")
        if alpha is None:
            return None
        alpha = np.asarray(alpha, dtype=np.float64).reshape(-1)
        if alpha.shape != (m,) or not np.all(np.isfinite(alpha)):
            return None
        upper = None
        if solution.point is not None and np.all(np.isfinite(solution.point)):
            upper = model.value(project_psd(solution.point))
        return model.dual_bound(alpha, upper=upper)

    def refine(solution: ReferenceSolution, rtol: float) -> ReferenceSolution:
        return _refine(model, cons, S, solution, rtol)

    def normalize() -> Normalization:
        tw = model.normalization()
        b = tw.point_scale
        return Normalization(formulation=build_hinge_problem(tw.model, method=method, hinge_form=hinge_form),
                             point_back=lambda P: b * np.asarray(P, dtype=np.float64),
                             value_scale=tw.value_scale, description=tw.description)

    return Formulation(method=method, problem=problem, variables=variables,
                       constraints=cons, point_name="M", evaluate=evaluate, model=model,
                       info={"hinge_form": hinge_form}, dual_bound=dual_bound, normalize=normalize,
                       refine=refine, reference_value=float(model.value(np.zeros((d, d)))))


def _refine(model: HingeModel, cons: dict, S, solution: ReferenceSolution, rtol: float) -> ReferenceSolution:
    """``Formulation.refine`` of a hinge problem (module docstring)."""
    M0 = y0 = None
    if solution.point is not None and np.all(np.isfinite(solution.point)):
        M0 = project_psd(solution.point)
    alpha = solution.duals.get("hinge")
    if alpha is not None and np.all(np.isfinite(alpha)):
        y0 = np.clip(np.asarray(alpha, dtype=np.float64).reshape(-1), 0.0, model.coef)
    target = REFINE_RTOL_FRACTION * float(rtol)
    res = pdhg(model, M0=M0, y0=y0, tol=target, residual_tol=target, time_limit=REFINE_TIME_LIMIT,
               solver_name="pdhg-refine", warn=False)
    M, alpha = res.M, np.asarray(res.multipliers, dtype=np.float64)
    duals = {"psd": model.regularizer_grad(M) + model.geometry.weighted_sum(alpha),
             "hinge": alpha, "slack_nonneg": model.coef - alpha}
    if "pair_distance" in cons:
        duals["pair_distance"] = -(S.T @ alpha)
    xi = np.maximum(0.0, np.asarray(model.constraints.delta, dtype=np.float64) + model.geometry.values(M))
    status = "optimal" if res.converged else f"not certified ({res.status})"
    return ReferenceSolution("PDHG", status, float(res.objective) if res.converged else None, M,
                             0.0, float(res.time), {k: duals[k] for k in cons}, {"xi": xi},
                             int(res.n_iter))
