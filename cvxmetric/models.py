r"""The hinge model shared by Qwise, LMNN and the Fantope convex bound.

All three minimise, over :math:`M \in \mathbb{S}^d_+`,

.. math::
    f(M) = \langle R, M\rangle + \tfrac{q}{2}\|M\|_F^2
           + \sum_{c} c_c\,[\delta_c + \langle M, C_{ij} - C_{kl}\rangle]_+ ,

with a symmetric linear-term matrix :math:`R`, a quadratic weight :math:`q \ge 0` and
per-constraint coefficients :math:`c_c \ge 0`:

* Qwise (thesis eq. 2.7): :math:`\Omega = \mathrm{tr}\,M` (:math:`R = I`), :math:`\tfrac12\|M\|_F^2`
  (:math:`q = 1`) or :math:`\langle M, \sum_S C_p\rangle` ("pull", :math:`R = \sum_S C_p`), times
  ``reg_weight``; :math:`c_c = w_c C_Q` on relative constraints and :math:`w_c C_P` on pairs.
* LMNN: "pull" with weight :math:`1 - \mu` and :math:`c = \mu` on the triplets.
* Fantope bound: :math:`R = \mu W + \gamma I`.

A :class:`HingeModel` is the single definition of this objective: the cvxpy builder
(``formulations``) and the fast solvers (``solvers``) both read it, so they cannot drift apart.
It also holds the one certified lower bound of the family (:meth:`HingeModel.dual_bound`, computed
by :mod:`cvxmetric.hinge_certificates`), read by the PDHG solver, LMNN's constraint generation and the
ground truth's solve ladder, and its exact rescaling (:meth:`HingeModel.rescaled`,
:meth:`HingeModel.normalization`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from . import hinge_certificates as _cert
from ._checks import as_data_matrix, as_index_array, as_square_symmetric, check_nonnegative, check_positive
from .constraints import ConstraintSet
from .hinge import HingeLoss, QuadrupletGeometry
from .hinge_certificates import POLISH_FREE_FACTOR, REPAIR_STEPS, PolishPlan, _Span
from .linalg import power_of_two

__all__ = ["HingeModel", "HingeRescaling", "HingeCongruence", "qwise_model", "pull_matrix", "first_crossing", "REGULARIZERS"]

#: Names of the Qwise regularizers Omega(M) (thesis eq. 2.7 and footnote 19).
REGULARIZERS = ("trace", "frobenius", "pull")
#: :meth:`HingeModel.restricted` accepts P when every entry of :math:`P^\top P - I` is at most this:
#: a QR factor's orthonormality error is ~k eps (1e-13 at k = 500); a basis off by more would make
#: the restricted Frobenius term and the identity linear term differ from the full model's.
ORTHONORMAL_RTOL = 1e-10


@dataclass(frozen=True)
class HingeRescaling:
    r"""An exactly rescaled twin of a :class:`HingeModel` (see :meth:`HingeModel.rescaled`).

    ``original.value(point_scale * M) == value_scale * model.value(M)`` for every ``M``; a bound
    ``b`` of the twin is the bound ``value_scale * b`` of the original.
    """

    model: "HingeModel"
    point_scale: float
    value_scale: float
    data_scale: float
    margin_scale: float

    @property
    def description(self) -> str:
        return (f"X x {self.data_scale:.6g}, margins / {self.margin_scale:.6g}, values / "
                f"{self.value_scale:.6g}, M = {self.point_scale:.6g} M'")


@dataclass(frozen=True)
class HingeCongruence:
    r"""A congruent twin of a :class:`HingeModel` with :math:`q = 0` (see :meth:`HingeModel.congruent`).

    The twin has data :math:`X \mathrm{Diag}(D)` and linear term :math:`DRD` (``D`` the diagonal),
    so :math:`A_c' = D A_c D` and ``original.value(point(M')) == model.value(M')`` for every
    :math:`M'`; :math:`M \mapsto D^{-1} M D^{-1}` maps the PSD cone onto itself, so both problems
    have the same optimal value, every bound of the twin bounds the original, and the hinge rows
    and multipliers are the same. Exact in floating point when every :math:`D_a` is a power of two.
    """

    original: "HingeModel"
    model: "HingeModel"
    D: np.ndarray

    def point(self, M_twin: np.ndarray) -> np.ndarray:
        r"""The original's point :math:`D M' D` of the twin's point :math:`M'` (a new array)."""
        return M_twin * np.outer(self.D, self.D)

    def twin_point(self, M: np.ndarray) -> np.ndarray:
        r"""The twin's point :math:`D^{-1} M D^{-1}` of the original's point :math:`M` (a new array)."""
        return M / np.outer(self.D, self.D)



@dataclass(frozen=True, eq=False)
class HingeModel:
    r"""A linear/quadratic term plus a weighted hinge loss over the PSD cone.

    Attributes
    ----------
    geometry : QuadrupletGeometry
        Data and constraints (difference vectors).
    coef : ndarray, shape (m,)
        Hinge coefficients :math:`c_c \ge 0`.
    R : ndarray, shape (d, d)
        Symmetric linear term.
    q : float
        Weight of :math:`\tfrac12 \|M\|_F^2`.
    name : str
        For reports.
    """

    geometry: QuadrupletGeometry
    coef: np.ndarray
    R: np.ndarray
    q: float = 0.0
    name: str = "hinge"
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def d(self) -> int:
        return self.geometry.d

    @property
    def m(self) -> int:
        return self.geometry.m

    @property
    def constraints(self) -> ConstraintSet:
        return self.geometry.constraints

    def with_linear_term(self, R: np.ndarray) -> "HingeModel":
        """The same model with another linear term (e.g. a refreshed Fantope bound)."""
        return HingeModel(self.geometry, self.coef, np.asarray(R, dtype=np.float64), self.q, self.name)

    def extended(self, constraints: ConstraintSet, coef) -> "HingeModel":
        r"""The same model with ``constraints`` (hinge coefficients ``coef``) appended.

        Used by solvers that generate constraints on the fly (e.g. LMNN impostors): the rows of
        ``self`` keep their positions, the new ones follow. The new constraints must index rows
        of the same data matrix.
        """
        if not isinstance(constraints, ConstraintSet):
            raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
        coef = np.asarray(coef, dtype=np.float64)
        if coef.shape != (len(constraints),):
            raise ValueError(f"coef must have shape ({len(constraints)},); got {coef.shape}")
        if np.any(coef < 0) or not np.all(np.isfinite(coef)):
            raise ValueError("coef must be finite and non-negative")
        constraints.validate(self.geometry.X.shape[0], name="constraints", allow_empty=True)
        return self._with_rows(self.geometry.extended(constraints), np.concatenate([self.coef, coef]))

    def subset(self, index) -> "HingeModel":
        r"""The same model restricted to the constraints ``index`` (a boolean mask or row indices).

        Used by working sets (:mod:`cvxmetric.solvers.working_set`): the restricted objective drops
        non-negative hinge terms only, so its optimum is at most the full one.
        """
        rows = np.arange(self.m)[np.asarray(index)]
        return self._with_rows(self.geometry.subset(rows), self.coef[rows])

    def permuted(self, order) -> "HingeModel":
        """The same model with its constraints in another order: row i is row ``order[i]`` (a
        permutation of ``range(m)``; :meth:`cvxmetric.hinge.QuadrupletGeometry.permuted`, which keeps
        the pair table). Its objective, bound and data span are this model's; multipliers ``y``
        of this model are ``y[order]`` of the permuted one."""
        geometry = self.geometry.permuted(order)
        out = self._with_rows(geometry, self.coef[np.asarray(order)])
        if "span" in self._cache:   # a function of the rows as a set
            out._cache["span"] = self._cache["span"]
        return out

    def restricted(self, P) -> "HingeModel":
        r"""The same model on the subspace spanned by the orthonormal columns of ``P``: :math:`M = P W P^\top`.

        Parameters
        ----------
        P : array_like, shape (d, k)
            Orthonormal columns (:math:`P^\top P = I` to ``ORTHONORMAL_RTOL``).

        Returns
        -------
        HingeModel
            The model over :math:`W \in \mathbb{S}^k_+` on the projected points :math:`X P`, with
            linear term :math:`P^\top R P` (exactly :math:`r I_k` where R is :math:`r I`), the same
            q, rows, coefficients and offsets, so that ``restricted(P).value(W) ==
            value(P @ W @ P.T)`` (up to round-off).

        Notes
        -----
        :math:`\langle A_c, P W P^\top\rangle = \langle P^\top A_c P, W\rangle` and
        :math:`P^\top (x_i - x_j) = (XP)_i - (XP)_j`, so the constraint matrices of the restricted
        model are those of the points :math:`XP`; :math:`\langle R, P W P^\top\rangle = \langle P^\top
        R P, W\rangle`, and :math:`\|P W P^\top\|_F = \|W\|_F` for orthonormal P.
        """
        P = np.asarray(P, dtype=np.float64)
        if P.ndim != 2 or P.shape[0] != self.d or P.shape[1] == 0 or not np.all(np.isfinite(P)):
            raise ValueError(f"P must be a finite (d, k) array with d = {self.d} and k >= 1; got shape {P.shape}")
        k = P.shape[1]
        if float(np.max(np.abs(P.T @ P - np.eye(k)))) > ORTHONORMAL_RTOL:
            raise ValueError("P must have orthonormal columns (P.T @ P = I); orthonormalize it first, "
                             "e.g. np.linalg.qr(P)[0]")
        scalar = self._identity_multiple()
        R_k = scalar * np.eye(k) if scalar is not None else 0.5 * (P.T @ (self.R + self.R.T) @ P)
        geometry = QuadrupletGeometry(self.geometry.X @ P, self.constraints, _validated=True)
        return HingeModel(geometry, self.coef, R_k, self.q, self.name)

    def value_factor(self, F) -> float:
        r"""The objective :math:`f(F F^\top)` of a PSD point given by a factor F (d x r), never forming
        the d x d matrix: :math:`\langle R, FF^\top\rangle = \langle RF, F\rangle` (:math:`r\|F\|_F^2`
        where R is :math:`rI`), :math:`\|FF^\top\|_F^2 = \|F^\top F\|_F^2`, and :math:`K(FF^\top)`
        through the factor (:meth:`~cvxmetric.hinge.QuadrupletGeometry.values_factor`)."""
        F = np.asarray(F, dtype=np.float64)
        if F.ndim != 2 or F.shape[0] != self.d:
            raise ValueError(f"F must be a (d, r) factor with d = {self.d}; got shape {F.shape}")
        scalar = self._identity_multiple()
        linear = scalar * float(np.vdot(F, F)) if scalar is not None else float(np.vdot(self.R @ F, F))
        quad = 0.5 * self.q * float(np.sum((F.T @ F) ** 2)) if self.q else 0.0
        margins = self.constraints.delta + self.geometry.values_factor(F.T)
        return linear + quad + float(self.coef @ np.maximum(margins, 0.0))

    def _identity_multiple(self) -> Optional[float]:
        """r where the linear term is exactly :math:`rI`, else None (no d x d identity formed: 200 MB
        at d = 5000)."""
        R = np.asarray(self.R, dtype=np.float64)
        r = float(R[0, 0]) if R.size else 0.0
        diag = np.diagonal(R)
        return r if np.count_nonzero(R) == np.count_nonzero(diag) and np.all(diag == r) else None

    def _with_rows(self, geometry: QuadrupletGeometry, coef: np.ndarray) -> "HingeModel":
        """The same linear and quadratic terms over other constraint rows on the same data (the one
        mechanism of :meth:`extended` and :meth:`subset`): same X and R, so the data span
        (:meth:`_basis`) is passed on through the cache."""
        out = HingeModel(geometry, coef, self.R, self.q, self.name)
        if "basis" in self._cache:
            out._cache["basis"] = self._cache["basis"]
        return out

    # ------------------------------------------------------------------ certificate
    # (computed by :mod:`cvxmetric.hinge_certificates`; the model caches the data span)
    def _span(self) -> _Span:
        if "span" not in self._cache:
            self._cache["span"] = _cert.compute_span(self)
        return self._cache["span"]

    def _basis(self):
        """``(U, R_s, chol_inv)`` of :class:`~cvxmetric.hinge_certificates._Span`: they depend on X and R only, so
        :meth:`extended` (same X and R) passes them on through the cache."""
        if "basis" not in self._cache:
            self._cache["basis"] = _cert.compute_basis(self)
        return self._cache["basis"]

    def span_basis(self) -> tuple:
        r"""``(U, R_U, L_inv)`` of the certificate (:meth:`dual_bound`, Notes): an orthonormal basis
        ``U`` (d, r) of the data span (None when the whole space is used), :math:`R_U = U^\top R U`,
        and the inverse Cholesky factor of :math:`R_U` when it is positive definite (to
        ``PD_RTOL``; else None). Depends on X and R only. Copies: the cached arrays behind every
        later bound of this model stay untouched."""
        return tuple(None if a is None else np.array(a) for a in self._basis())

    @property
    def has_certificate(self) -> bool:
        """Whether :meth:`dual_bound` gives a finite bound for *every* multiplier in the box
        (q > 0, or R positive definite on the data span, or a trace bound given ``upper``)."""
        span = self._span()
        return self.q > 0 or span.chol_inv is not None or bool(span.trace_sources)

    def trace_bound(self, upper: float) -> Optional[float]:
        r"""A bound :math:`T \ge \mathrm{tr}(U^\top M U)` for every PSD M with :math:`f(M) \le` ``upper``.

        None when no fixed multiplier makes the dual matrix positive definite on the span (see
        :meth:`dual_bound`).
        """
        return _cert.trace_bound(self, upper)

    def dual_bound(self, y, upper: Optional[float] = None, *, Ky: Optional[np.ndarray] = None,
                   repair_steps: int = REPAIR_STEPS) -> Optional[float]:
        r"""Certified lower bound on :math:`p^* = \inf_{M \succeq 0} f(M)` from hinge multipliers.

        Parameters
        ----------
        y : array_like, shape (m,)
            Hinge multipliers (the "hinge" duals of a cvxpy solve, PDHG's dual iterate, ...).
            They are repaired, not trusted: clipped into the box :math:`[0, c]` first.
        upper : float, optional
            The objective of any PSD point (an upper bound on :math:`p^*`); it enables the trace
            bound of the case :math:`q = 0` with a singular linear term.
        Ky : ndarray, shape (d, d), optional
            :math:`K^* y = \sum_c y_c A_c` of the (already clipped) ``y``, when the caller has it.
        repair_steps : int
            Steps of the targeted repair (q = 0, Notes); 0 switches it off.

        Returns
        -------
        float or None
            A number :math:`\le p^*` in exact arithmetic (up to the documented round-off
            guards), or None when no certificate exists for these multipliers.

        Notes
        -----
        For every :math:`y \in [0, c]` and every :math:`M \succeq 0`,
        :math:`c_c[t]_+ \ge y_c t` gives

        .. math::
            f(M) \ge \delta^\top y + \langle S, M\rangle + \tfrac q2 \|M\|_F^2, \qquad
            S = R + K^* y = R + \textstyle\sum_c y_c A_c ,

        so :math:`p^* \ge \delta^\top y + \inf_{M \succeq 0} (\langle S, M\rangle + \tfrac q2\|M\|_F^2)`.

        * :math:`q > 0`: the infimum is :math:`-\|\Pi_{\mathbb{S}_+}(-S)\|_F^2 / (2q)` (closed form).
        * :math:`q = 0`. Let :math:`U` (d x r) be an orthonormal basis of the span of the data's
          difference vectors :math:`x_i - x_j` (from an SVD of :math:`X - x_0`, rank at numpy's
          ``matrix_rank`` tolerance) and :math:`P = UU^\top`. Every :math:`A_c` satisfies
          :math:`A_c = P A_c P`. When :math:`R` does not couple the span to its complement and is
          PSD on the complement (checked to ``CROSS_RTOL``; true for pull matrices, built from
          data differences, and for multiples of the identity), then
          :math:`\langle S, M\rangle \ge \langle S_U, U^\top M U\rangle` with
          :math:`S_U = U^\top S U`, and directions outside the span change nothing: constant
          features (digits' border pixels) no longer make a "pull" term singular. Otherwise,
          and where R is a positive multiple of the identity (on the complement S = R is then
          positive definite, so :math:`\lambda_{\min}(S) = \min(r, \lambda_{\min}(S_U))` and no
          rule loses anything; the SVD is skipped), :math:`U = I`. Then the bound is the largest of those that apply:

          - :math:`S_U \succeq 0` (smallest eigenvalue, less its ``EIG_ROUNDOFF``, non-negative):
            :math:`\delta^\top y` (y is exactly dual feasible);
          - :math:`R_U = U^\top R U \succ 0` (to ``PD_RTOL``): with :math:`\theta \in [0, 1]` the
            largest value such that :math:`R_U + \theta U^\top K^* y\, U \succeq 0` (from the
            smallest eigenvalue of :math:`L^{-1} S_U L^{-\top}`, :math:`R_U = LL^\top`, times
            ``THETA_SAFETY``), :math:`\theta y \in [0, c]` is dual feasible and
            :math:`\max(0, \theta\,\delta^\top y)` is a bound (0 is the value of y = 0);
          - a trace bound :math:`T \ge \mathrm{tr}(U^\top M^* U)` (:meth:`trace_bound`, needs
            ``upper``): :math:`\delta^\top y + T \min(0, \lambda_{\min}(S_U))`. T comes from a
            fixed :math:`y'` with :math:`B = U^\top(R + K^* y')U \succ 0`
            (:math:`\beta = \lambda_{\min}(B) > 0`; y' = 0, and y' = c on the similar pairs,
            whose :math:`A_c = C_p \succeq 0`): every M with :math:`f(M) \le` ``upper`` has
            :math:`\mathrm{upper} \ge \delta^\top y' + \beta\, \mathrm{tr}(U^\top M U)`.

          With none of them (R singular on the span, no usable y', S_U not PSD), None.

          **Targeted repair** (q = 0, :math:`S_U` not PSD; up to ``repair_steps`` steps): theta
          shrinks every multiplier alike, which costs much where R is ill-conditioned on the span
          (digits). Instead, with :math:`(\lambda_k, v_k)` the negative eigenpairs of :math:`S_U`
          (:math:`v_k` mapped back by U) and :math:`g_{ck} = [\langle A_c, v_k v_k^\top\rangle]_-`,
          each step sets :math:`y_c \leftarrow y_c (1 - \min(1, \max_k \beta_k |g_{ck}|))`,
          :math:`\beta_k` = ``REPAIR_OVERSHOOT`` :math:`|\lambda_k| / \sum_c y_c g_{ck}^2`: the
          multipliers that bend :math:`S` negative shrink in proportion to how much they do
          (for one direction the least loss of :math:`\delta^\top y` per unit of curvature,
          by Cauchy-Schwarz). The repaired multiplier stays in :math:`[0, c]`, and its bound is
          computed by the same three rules above, so the result is a certificate whatever the
          heuristic did; the larger of the two bounds is returned.

        Each bound is invariant, up to the same factor as the objective, under every positive
        scaling of the weights (R, q and c together) and under X -> sX with R scaled by s^2.
        """
        return self.certify(y, upper, Ky=Ky, repair_steps=repair_steps)[0]

    def certify(self, y, upper: Optional[float] = None, *, Ky: Optional[np.ndarray] = None,
                repair_steps: int = REPAIR_STEPS, dual_eigvals: Optional[np.ndarray] = None,
                lambda_min_estimate: Optional[tuple] = None) -> tuple:
        """:meth:`dual_bound` and the multipliers it was computed from: ``(bound or None, y_used)``.

        ``y_used`` is in :math:`[0, c]`: the clipped ``y`` (closed form, exact feasibility, trace
        bound), :math:`\\theta y` (theta rule), or the repaired multiplier.

        ``dual_eigvals``, when the caller has them: ``numpy.linalg.eigvalsh`` of the full-space
        dual matrix ``sym(R) + sym(Ky)`` (``sym(A) = (A + A.T) / 2``, formed in that order), which
        replace the eigendecomposition of the bound where it works on the whole space (q > 0, or
        q = 0 with ``U = I``); ignored elsewhere. They are trusted (the bound is only as valid as
        they are); only their shape is checked.

        ``lambda_min_estimate``, when the caller has one: ``(theta, ||S x - theta x||)`` of a unit
        Ritz pair of the dual matrix S near its smallest eigenvalue (e.g. from products with S
        through the data). Where every rule reads the smallest eigenvalue alone (R a positive
        multiple of the identity on the span), the bound then reads the safe shift
        (:func:`cvxmetric.linalg.lambda_min_lower_bound`: one Cholesky factorization proves it)
        chosen from that estimate instead of an eigendecomposition; it is not trusted: a poor
        estimate gives a weaker bound, never an invalid one. Ignored elsewhere.
        """
        return _cert.certify(self, y, upper, Ky=Ky, repair_steps=repair_steps, dual_eigvals=dual_eigvals,
                             lambda_min_estimate=lambda_min_estimate)

    # ------------------------------------------------------------------ complementarity polish
    def polish_plan(self, M, free_factor: float = POLISH_FREE_FACTOR,
                    max_cost: Optional[float] = None) -> Optional["PolishPlan"]:
        """The sizes, modelled cost and memory of :meth:`complementary_multipliers` at the PSD point
        ``M`` (the range of M on the data span, at ``POLISH_RANK_RTOL``), or None where it does not
        apply: q > 0, M = 0, fewer than ``free_factor`` constraints per equation, a memory above
        the cap (:func:`~cvxmetric.hinge_certificates.polish_memory_cap`: the equations number up to
        d(d+1)/2, and the polish's arrays grow as d^4), or a modelled cost above ``max_cost``
        (seconds; None: any). The cost (``plan.cost``, seconds of the cost model of
        :mod:`cvxmetric.hinge`: the free constraints' coordinates, the equations' Gram matrix and its
        downdates, a Cholesky factor of n_eq^3/3 multiply-adds per round, all in double precision:
        a conservative price of the single-precision pass, ``POLISH_SINGLE_PRECISION``) grows with
        the rank, so a proven lower bound on the rank that already costs too much declines the
        polish without an eigendecomposition. A caller prices it against what it would save and
        passes the plan on to :meth:`complementary_multipliers`."""
        return _cert.polish_plan(self, M, free_factor, max_cost)

    def complementary_multipliers(self, M, y, *, Ky: Optional[np.ndarray] = None,
                                  margins: Optional[np.ndarray] = None, free_factor: float = POLISH_FREE_FACTOR,
                                  plan: Optional["PolishPlan"] = None) -> Optional[np.ndarray]:
        r"""Multipliers near ``y`` in complementarity with the PSD point ``M``: a candidate for
        :meth:`certify`, which judges it (this is a heuristic; a bound is only ever a certificate).

        Parameters
        ----------
        M : array_like, shape (d, d)
            A PSD point near the optimum (e.g. PDHG's iterate).
        y : array_like, shape (m,)
            Multipliers near the optimal ones (e.g. PDHG's dual iterate); clipped into the box.
        Ky : ndarray, shape (d, d), optional
            :math:`K^* y` of the clipped ``y``, when the caller has it.
        margins : ndarray, shape (m,), optional
            :math:`t = \delta + K M`, when the caller has them (else one K pass).
        free_factor : float
            Free multipliers per equation (at least 1). More constraints sit near their margin
            when m is large: a caller whose polish failed may retry with a larger factor.
        plan : PolishPlan, optional
            :meth:`polish_plan` of this M (and ``free_factor``, then not read), when the caller
            priced it.

        Returns
        -------
        ndarray of shape (m,) in :math:`[0, c]`, or None
            None where the polish does not apply (:math:`q > 0`, whose closed-form bound needs no
            feasibility; M = 0; fewer than ``free_factor`` constraints per equation).

        Notes
        -----
        With :math:`q = 0` the bound of ``y`` is :math:`\delta^\top y` once :math:`S = R + K^* y`
        is PSD (on the data span), and the certificate of an approximate multiplier lags because
        S is not: the trace bound or the repair pay for its negative curvature. At a solution,
        :math:`S^* \succeq 0` and :math:`S^* M^* = 0`. Let :math:`Q = [V\; W]` be an orthonormal
        basis of the span (:meth:`dual_bound`) with V the range of M (eigenvalues above
        ``POLISH_RANK_RTOL`` times the largest) of dimension r. For a PSD S, :math:`S V = 0` is

        .. math:: E(y) = \big(\mathrm{svec}(V^\top S V),\ \mathrm{vec}(W^\top S V)\big) = 0 ,

        :math:`r(r+1)/2 + r(k-r)` linear equations in y. The multipliers of constraints far from
        their margin sit at a bound at the solution and keep their value; ``free_factor``
        (default ``POLISH_FREE_FACTOR``) times as many constraints with the smallest distance
        :math:`|t_c| / \|A_c\|_F` of M to their margin (:math:`t = \delta + K M`) form the free
        set F. On F the least change that solves the equations,

        .. math:: y_F \leftarrow y_F + B_F (B_F^\top B_F + \mu I)^{-1} (-E(y)) ,

        (:math:`B_F` the equations' coefficients of the free multipliers, :math:`\mu` =
        ``POLISH_RIDGE`` times the mean diagonal), is taken; multipliers that leave :math:`[0, c]`
        are clamped to the box and leave F, and the step repeats on the rest (at most
        ``POLISH_ROUNDS`` rounds). A solve that failed is corrected, at most
        ``POLISH_CORRECTIONS`` times (:func:`~cvxmetric.hinge_certificates.polish_corrected`):
        equations left unsolved grow F by ``POLISH_GROWTH``, and negative curvature of the solved
        dual matrix off V moves those directions into V. Near a solution with strict complementarity (W^T S W positive
        definite) the result is exactly dual feasible, and its bound :math:`\delta^\top y` is
        within the primal error of p*: measured on syn-d50-m10000 (PDHG at a relative error of
        the objective of 2.4e-4), 5e-5 below p*, where the targeted repair of the same multiplier
        reached 1e-2.

        Every step uses relative quantities only (an eigenvalue ratio, a ranking of normalized
        margins, a relative ridge), so the result scales with y under every scaling of the weights
        and the data.
        """
        return _cert.complementary_multipliers(self, M, y, Ky=Ky, margins=margins, free_factor=free_factor,
                                               plan=plan)

    # ------------------------------------------------------------------ rescaling
    def rescaled(self, data_scale: float, margin_scale: float = 1.0, value_scale: float = 1.0) -> HingeRescaling:
        r"""The same problem in rescaled units: X -> aX, margins / kappa, values / v.

        Parameters
        ----------
        data_scale : float
            :math:`a > 0`: the twin's data is :math:`aX` (so :math:`A_c' = a^2 A_c`).
        margin_scale : float
            :math:`\kappa > 0`: the twin's margins are :math:`\delta / \kappa`.
        value_scale : float
            :math:`v > 0`: the twin's objective is :math:`f / v`.

        Returns
        -------
        HingeRescaling
            The twin with :math:`R' = a^2 \kappa R / v`, :math:`q' = a^4 \kappa^2 q / v`,
            :math:`c' = \kappa c / v`, and ``point_scale`` :math:`b = a^2 \kappa`:
            :math:`f(bM') = v f'(M')` for every :math:`M'` (exact when a, kappa, v are powers of 2).
        """
        a, kappa, v = (float(t) for t in (data_scale, margin_scale, value_scale))
        for name, t in (("data_scale", a), ("margin_scale", kappa), ("value_scale", v)):
            if not (math.isfinite(t) and t > 0):
                raise ValueError(f"{name} must be a positive finite number; got {t!r}")
        cons = self.constraints
        twin_cons = ConstraintSet(cons.idx, np.asarray(cons.delta) / kappa, cons.weight)
        geometry = QuadrupletGeometry(a * self.geometry.X, twin_cons, _validated=True)
        twin = HingeModel(geometry, self.coef * (kappa / v), self.R * (a * a * kappa / v),
                          self.q * (a ** 4 * kappa ** 2 / v), self.name)
        return HingeRescaling(twin, a * a * kappa, v, a, kappa)

    def congruent(self, D) -> HingeCongruence:
        r"""The same problem in the coordinates :math:`M = D M' D` (``D`` a positive diagonal).

        Parameters
        ----------
        D : array_like, shape (d,)
            Positive finite diagonal; powers of two make the twin exact in floating point.

        Returns
        -------
        HingeCongruence
            The twin on data :math:`X \mathrm{Diag}(D)` with linear term :math:`D R D`, the same
            constraints, margins and coefficients.

        Notes
        -----
        .. math::
            f'(M') = \langle DRD, M'\rangle + \sum_c c_c\,[\delta_c + \langle D A_c D, M'\rangle]_+
            = f(D M' D),

        since :math:`\langle D A D, M'\rangle = \langle A, D M' D\rangle`. The Frobenius term is
        not congruence-invariant (:math:`\|D M' D\|_F \ne \|M'\|_F`), so :math:`q > 0` is a
        ValueError.
        """
        if self.q != 0:
            raise ValueError(f"congruent applies to q = 0 only (||D M' D||_F is not ||M'||_F); got q={self.q!r}")
        D = np.asarray(D, dtype=np.float64)
        if D.shape != (self.d,) or not np.all(np.isfinite(D)) or np.any(D <= 0):
            raise ValueError(f"D must be {self.d} positive finite numbers; got shape {D.shape}")
        geometry = QuadrupletGeometry(self.geometry.X * D, self.constraints, _validated=True)
        twin = HingeModel(geometry, self.coef, self.R * np.outer(D, D), 0.0, self.name)
        return HingeCongruence(self, twin, D.copy())

    def _median_squared_length(self) -> float:
        sq_u, sq_v = self.geometry.squared_lengths()
        sq = np.concatenate([sq_u, sq_v])
        sq = sq[sq > 0]
        return float(np.median(sq)) if sq.size else 0.0

    @property
    def metric_scale(self) -> float:
        r"""The natural size of a metric for this model: :math:`\max_c |\delta_c|` over the median
        positive squared length of the difference vectors (the multiple of the identity that moves
        a typical constraint value by the largest margin). It scales like the optimal M under
        X -> sX and margins -> kappa delta, so residuals measured against it stay scale-free where
        the optimum is M = 0 and a relative measure has no size to refer to. 0 when undefined."""
        med = self._median_squared_length()
        dmax = float(np.max(np.abs(self.constraints.delta))) if self.m else 0.0
        return dmax / med if med > 0 else 0.0

    def normalization(self) -> HingeRescaling:
        r"""The rescaled twin (:meth:`rescaled`) whose numbers are of order one.

        Notes
        -----
        :math:`a` makes the median positive squared length of the constraints' difference vectors
        about 1 (so :math:`|\langle M', A_c'\rangle|` is O(1) for an O(1) metric), :math:`\kappa`
        the largest margin magnitude about 1, :math:`v = \kappa \max_c c_c` the largest hinge
        coefficient about 1. Each factor is rounded to a power of two, so the twin's data are the
        original's bits with shifted exponents and every value maps back exactly; the twin of
        :math:`X \cdot 2^k` is then the twin of X, bit for bit (LMNN's invariance made exact).
        """
        med = self._median_squared_length()
        a = power_of_two(1.0 / math.sqrt(med)) if med > 0 else 1.0
        dmax = float(np.max(np.abs(self.constraints.delta))) if self.m else 0.0
        kappa = power_of_two(dmax) if dmax > 0 else 1.0
        cmax = float(np.max(self.coef)) if self.m else 0.0
        v = kappa * (power_of_two(cmax) if cmax > 0 else 1.0)
        return self.rescaled(a, kappa, v)

    def regularizer(self, M: np.ndarray) -> float:
        r""":math:`\langle R, M\rangle + \tfrac q2 \|M\|_F^2`."""
        return float(np.vdot(self.R, M) + (0.5 * self.q * np.vdot(M, M) if self.q else 0.0))

    def regularizer_grad(self, M: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`regularizer`: ``R + q M``."""
        return self.R + self.q * M if self.q else self.R.copy()

    def hinge(self) -> HingeLoss:
        """A fresh incremental hinge-loss evaluator for this model."""
        return HingeLoss(self.geometry, self.coef)

    def margins(self, M: np.ndarray) -> np.ndarray:
        r""":math:`\delta_c + \langle M, A_c\rangle` for every constraint."""
        return self.geometry.constraints.delta + self.geometry.values(M)

    def value(self, M: np.ndarray) -> float:
        """The objective :math:`f(M)` (numpy; the cvxpy twin is ``formulations``' ``value_at``)."""
        M = np.asarray(M, dtype=np.float64)
        return self.regularizer(M) + float(self.coef @ np.maximum(self.margins(M), 0.0))

    def ray_minimum(self, linear: float, values: np.ndarray) -> tuple[float, float]:
        r"""The best multiple of a PSD point on its ray, for q = 0: :math:`\min_{\alpha \ge 0} f(\alpha M)`.

        Parameters
        ----------
        linear : float
            :math:`\langle R, M\rangle`.
        values : ndarray, shape (m,)
            :math:`K M = (\langle M, A_c\rangle)_c`.

        Returns
        -------
        (alpha, value) : (float, float)
            A minimizer :math:`\alpha^\star` and :math:`f(\alpha^\star M)` (computed from ``linear``
            and ``values``, so it equals ``value(alpha * M)`` up to round-off).

        Notes
        -----
        With q = 0, :math:`\phi(\alpha) = f(\alpha M) = \alpha \langle R, M\rangle + \sum_c c_c
        [\delta_c + \alpha v_c]_+` is convex and piecewise linear in :math:`\alpha \ge 0`, with kinks
        at :math:`\alpha_c = -\delta_c / v_c > 0`. Its minimum is at 0 or at the first kink where the
        right slope :math:`\langle R, M\rangle + \sum_{c \text{ active}} c_c v_c` turns
        non-negative: a weighted selection of the kinks (:func:`first_crossing`, :math:`O(m)`). Every :math:`\alpha M` is PSD, so the value is
        an upper bound on p* as good as any scored point's (no certificate rests on the point).
        Where :math:`\phi` decreases without end (the model is unbounded below along the ray) the
        returned :math:`\alpha` is 1.
        """
        if self.q != 0:
            raise ValueError("ray_minimum is for q = 0 (a piecewise-linear ray); this model has q > 0")
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (self.m,):
            raise ValueError(f"values must have shape ({self.m},) (K M); got {v.shape}")
        coef, delta = self.coef, np.asarray(self.constraints.delta, dtype=np.float64)

        def phi(a: float) -> float:
            return a * linear + float(coef @ np.maximum(delta + a * v, 0.0))

        active = (delta > 0) | ((delta == 0) & (v > 0))     # the active set just right of 0
        slope = linear + float(coef[active] @ v[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            kinks = -delta / v
        if slope >= 0.0:
            return 0.0, phi(0.0)
        cross = np.flatnonzero((v != 0) & (kinks > 0) & np.isfinite(kinks))
        # at a kink, a constraint with v < 0 leaves the active set and one with v > 0 enters it:
        # either way the slope grows by c |v|
        alpha = first_crossing(kinks[cross], coef[cross] * np.abs(v[cross]), -slope, near=1.0)
        if alpha is None:
            return 1.0, phi(1.0)
        return alpha, phi(alpha)


#: :func:`first_crossing` sorts its candidates once at most this many are left (a sort of a few
#: thousand keys costs less than another selection pass over them).
SELECTION_SORT_MAX = 4096


#: The windows of :func:`first_crossing` around its ``near`` key (powers of two of its relative
#: width), narrowest last. The ray minimum of a point near a solution sits next to 1: measured with
#: ``python -m benchmarks.scale --sizes d50-m1e6`` at PDHG's checks, 0.998-1.003 from iteration 96 on
#: (1.15-1.7 earlier), with about 8.9 x 10^5 kinks: the selection 40 ms by medians alone.
CROSSING_WINDOWS = (4, 8, 12)


def first_crossing(keys: np.ndarray, weights: np.ndarray, need: float, near: Optional[float] = None) -> Optional[float]:
    r"""The smallest key :math:`k` with :math:`\sum_{i: \text{keys}_i \le k} \text{weights}_i \ge`
    ``need`` (weights non-negative), or None where all weights together stay below ``need``.

    The candidates are halved around their median key (``np.partition``), keeping the half that
    holds the crossing and carrying the weight of the keys left of it, until at most
    ``SELECTION_SORT_MAX`` remain, which are sorted: :math:`O(n)` expected, where one sort of all
    keys is :math:`O(n \log n)` (measured: 10^6 keys in 0.15 s). ``near``: a positive key the caller
    expects the crossing next to; the first splits are then at ``near`` and at ``near`` times
    :math:`1 \pm 2^{-j}` (``CROSSING_WINDOWS``, on the side that holds the crossing), each one
    comparison pass and no partition (the answer is the same; only the work differs).
    """
    keys = np.asarray(keys, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    left_weight = 0.0
    pivots = [] if near is None else [near]
    while keys.size > SELECTION_SORT_MAX:
        hinted = bool(pivots)
        if hinted:
            pivot = pivots.pop(0)
        else:
            mid = keys.size // 2
            pivot = np.partition(keys, mid)[mid]
        left = keys <= pivot
        below = float(weights[left].sum())
        if left_weight + below >= need:
            if left.all() and not hinted:   # ties at the pivot fill the candidates: sort them
                break
            keys, weights = keys[left], weights[left]
            side = -1.0
        else:
            left_weight += below
            keys, weights = keys[~left], weights[~left]
            side = 1.0
        if hinted and near is not None and len(pivots) == 0 and pivot == near:
            pivots = [near * (1.0 + side * 2.0 ** -j) for j in CROSSING_WINDOWS]
    order = np.argsort(keys, kind="stable")
    turn = np.flatnonzero(left_weight + np.cumsum(weights[order]) >= need)
    return float(keys[order[turn[0]]]) if turn.size else None


def pull_matrix(X, pairs) -> np.ndarray:
    r""":math:`\sum_{(i, j)} C_{ij}` over ``pairs`` (shape (p, 2)), computed from difference vectors."""
    X = as_data_matrix(X)
    P = as_index_array(pairs, 2, "pull_pairs", n=X.shape[0])
    Dv = X[P[:, 0]] - X[P[:, 1]]
    G = Dv.T @ Dv
    return 0.5 * (G + G.T)


def qwise_model(X, constraints: ConstraintSet, *, regularizer: str = "trace", C_Q: float = 1.0,
                C_P: float = 1.0, reg_weight: float = 1.0, pull_pairs=None,
                linear_term=None) -> HingeModel:
    r"""The full-matrix Qwise model (thesis eq. 2.7) as a :class:`HingeModel`.

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Relative constraints (weighted by ``C_Q``) and pairs (weighted by ``C_P``).
    regularizer : {"trace", "frobenius", "pull"}
        :math:`\Omega(M)`: :math:`\mathrm{tr} M`, :math:`\frac12 \|M\|_F^2` or
        :math:`\langle M, \sum_{(i,j) \in \text{pull\_pairs}} C_{ij}\rangle`.
    C_Q, C_P : float
        Non-negative weights of the relative and pairwise hinge terms.
    reg_weight : float
        Positive factor in front of :math:`\Omega`.
    pull_pairs : array_like, shape (p, 2), optional
        Required for ``"pull"``: the similar pairs :math:`S` of :math:`\Omega`.
    linear_term : array_like, shape (d, d), optional
        An extra symmetric matrix added to :math:`R` (e.g. :math:`\mu W` of a Fantope bound).
    """
    X = as_data_matrix(X)
    if not isinstance(constraints, ConstraintSet):
        raise TypeError(f"constraints must be a ConstraintSet; got {type(constraints).__name__}")
    constraints.validate(X.shape[0], name="constraints")
    if not isinstance(regularizer, str) or regularizer not in REGULARIZERS:
        raise ValueError(f"regularizer must be one of {REGULARIZERS}; got {regularizer!r}")
    C_Q = check_nonnegative(C_Q, "C_Q")
    C_P = check_nonnegative(C_P, "C_P")
    reg_weight = check_positive(reg_weight, "reg_weight")
    d = X.shape[1]
    geometry = QuadrupletGeometry(X, constraints, _validated=True)
    coef = constraints.weight * np.where(constraints.is_pair, C_P, C_Q)
    q = 0.0
    R = np.zeros((d, d))
    if regularizer == "trace":
        R = reg_weight * np.eye(d)
    elif regularizer == "frobenius":
        q = reg_weight
    else:
        if pull_pairs is None:
            raise ValueError("regularizer='pull' needs pull_pairs, the similar pairs S of Omega")
        R = reg_weight * pull_matrix(X, pull_pairs)
    if pull_pairs is not None and regularizer != "pull":
        raise ValueError("pull_pairs is only used with regularizer='pull'")
    if linear_term is not None:
        R = R + as_square_symmetric(linear_term, "linear_term", d=d)
    return HingeModel(geometry, coef, R, q, name=f"qwise[{regularizer}]")
