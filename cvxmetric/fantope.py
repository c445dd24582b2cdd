r"""Fantope linear algebra and the Fantope-regularized model.

Reference: thesis ch. 3; design §5.5.

For a symmetric :math:`M \in \mathbb{S}^d` with eigenvalues :math:`\lambda_1 \ge \dots \ge \lambda_d`
and an integer :math:`1 \le k \le d`:

* :math:`R(M) = \sum_{i = d-k+1}^{d} \lambda_i` — the sum of the :math:`k` smallest eigenvalues
  (thesis eq. 3.2); on :math:`\mathbb{S}^d_+`, :math:`R(M) = 0 \Leftrightarrow \mathrm{rank}\,M \le d - k`,
  so :math:`k = d - e` for a target rank :math:`e`;
* :math:`W(M) = V_k V_k^\top` — the orthogonal projector onto eigenvectors of the :math:`k` smallest
  eigenvalues (eq. 3.4), so that :math:`\langle W(M), M\rangle = R(M)`;
* the Fantope :math:`\mathbb{F}_k = \{A \in \mathbb{S}^d : 0 \preceq A \preceq I,\ \mathrm{tr}\,A = k\}`
  (eq. 3.9). By Ky Fan, :math:`R(M) = \min_{A \in \mathbb{F}_k} \langle M, A\rangle`: :math:`R` is concave,
  :math:`W(M)` is a minimiser, hence a supergradient, and the superdifferential is the whole
  argmin face; it is a singleton (and :math:`R` is differentiable) iff the *eigengap*
  :math:`\lambda_{d-k} - \lambda_{d-k+1} > 0` (for :math:`k = d`, :math:`\mathbb{F}_d = \{I\}` and the gap is
  :math:`+\infty`).

:class:`FantopeModel` is the single numpy definition of the DC objective

.. math:: \varphi(M) = \mu R(M) + \gamma\,\mathrm{tr}\,M + \ell(M), \qquad M \succeq 0,

with :math:`\mu` = ``reg_weight``, :math:`\gamma` = ``trace_weight`` and :math:`k = d - ` ``rank``
(the public parameters of :func:`fantope_model`),
and of its convex upper bound at :math:`W \in \mathbb{F}_k`,
:math:`\hat\varphi(M; W) = \mu\langle W, M\rangle + \gamma\,\mathrm{tr}\,M + \ell(M) \ge \varphi(M)`, tight when
:math:`W = W(M)`. The bound is a :class:`~cvxmetric.models.HingeModel` with :math:`R = \mu W + \gamma I`,
read by both the cvxpy builder (``cvxmetric.formulations.fantope``) and the fast solvers
(``cvxmetric.solvers.fantope_subgradient``, ``cvxmetric.solvers.fantope_mm``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ._checks import as_square_symmetric, check_int_in_range, check_nonnegative
from .constraints import ConstraintSet
from .linalg import symmetrize
from .models import HingeModel, qwise_model
from .tolerances import FANTOPE_TOL

__all__ = [
    "check_k",
    "check_rank",
    "fantope_terms_from_eig",
    "sum_smallest_eigenvalues",
    "fantope_projector",
    "fantope_regularizer",
    "eigengap",
    "fantope_violation",
    "in_fantope",
    "fantope_center",
    "FantopeModel",
    "fantope_model",
]


def check_k(k, d: int, name: str = "k") -> int:
    """Validate the number of penalised eigenvalues: an integer with ``1 <= k <= d``."""
    try:
        return check_int_in_range(k, name, 1, d)
    except ValueError:
        raise ValueError(f"{name} must be an integer with 1 <= {name} <= d = {d} (k = d - e for a "
                         f"target rank e); got {k}") from None


def fantope_terms_from_eig(lam: np.ndarray, V: np.ndarray, k: int) -> tuple[float, np.ndarray]:
    r""":math:`R(M)` and :math:`W(M)` from an existing eigendecomposition (no extra ``eigh``).

    Parameters
    ----------
    lam : ndarray, shape (d,)
        Eigenvalues sorted **ascending** (as returned by ``numpy.linalg.eigh`` and by
        :func:`cvxmetric.linalg.project_psd` with ``return_eig=True``).
    V : ndarray, shape (d, d)
        Matching orthonormal eigenvectors (columns).
    k : int
        Number of smallest eigenvalues, ``1 <= k <= d``.

    Returns
    -------
    R : float
        :math:`\sum_{i \le k} \lambda_i` (ascending order).
    W : ndarray, shape (d, d)
        :math:`V_{:, :k} V_{:, :k}^\top`, a rank-k orthogonal projector in :math:`\mathbb{F}_k`.
    """
    lam = np.asarray(lam, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    d = lam.shape[0]
    if lam.ndim != 1 or V.shape != (d, d):
        raise ValueError(f"lam must have shape (d,) and V shape (d, d); got {lam.shape} and {V.shape}")
    k = check_k(k, d)
    if d > 1 and np.any(np.diff(lam) < 0):
        raise ValueError("lam must be sorted ascending (numpy.linalg.eigh order)")
    Vk = V[:, :k]
    W = Vk @ Vk.T
    return float(np.sum(lam[:k])), 0.5 * (W + W.T)


def sum_smallest_eigenvalues(M, k: int) -> float:
    r""":math:`R(M)`: the sum of the ``k`` smallest eigenvalues of a symmetric matrix (eq. 3.2)."""
    M = as_square_symmetric(M, "M")
    k = check_k(k, M.shape[0])
    return float(np.sum(np.linalg.eigvalsh(M)[:k]))


def fantope_projector(M, k: int) -> np.ndarray:
    r""":math:`W(M)`: projector onto eigenvectors of the ``k`` smallest eigenvalues (eq. 3.4).

    When the eigengap is zero the choice of eigenvectors inside the repeated eigenspace is
    LAPACK's; every such choice is a valid supergradient of :math:`R` at ``M``.
    """
    M = as_square_symmetric(M, "M")
    k = check_k(k, M.shape[0])
    lam, V = np.linalg.eigh(M)
    return fantope_terms_from_eig(lam, V, k)[1]


def fantope_regularizer(M, k: int) -> tuple[float, np.ndarray]:
    r""":math:`(R(M), W(M))` from one ``eigh``: the value and a supergradient of :math:`R` at ``M``."""
    M = as_square_symmetric(M, "M")
    k = check_k(k, M.shape[0])
    lam, V = np.linalg.eigh(M)
    return fantope_terms_from_eig(lam, V, k)


def eigengap(M, k: int) -> float:
    r""":math:`\lambda_{d-k}(M) - \lambda_{d-k+1}(M)` (eigenvalues non-increasing); ``inf`` for ``k = d``.

    Positive iff :math:`R` is differentiable at ``M`` with gradient :math:`W(M)` (thesis property 3.3.3).
    """
    M = as_square_symmetric(M, "M")
    d = M.shape[0]
    k = check_k(k, d)
    if k == d:
        return float("inf")
    lam = np.linalg.eigvalsh(M)  # ascending: lam[k-1] is lambda_{d-k+1}, lam[k] is lambda_{d-k}
    return float(lam[k] - lam[k - 1])


def fantope_violation(A, k: int) -> float:
    r"""How far a symmetric ``A`` is from :math:`\mathbb{F}_k`:
    :math:`\max(-\lambda_{\min}(A),\ \lambda_{\max}(A) - 1,\ |\mathrm{tr}\,A - k|, 0)`."""
    A = as_square_symmetric(A, "A")
    k = check_k(k, A.shape[0])
    lam = np.linalg.eigvalsh(A)
    return float(max(0.0, -lam[0], lam[-1] - 1.0, abs(float(np.trace(A)) - k)))


def in_fantope(A, k: int, *, tol: float = FANTOPE_TOL) -> bool:
    r"""Whether ``A`` lies in :math:`\mathbb{F}_k` up to ``tol`` (see :func:`fantope_violation`)."""
    return fantope_violation(A, k) <= tol


def fantope_center(d: int, k: int) -> np.ndarray:
    r""":math:`(k/d) I`, the barycentre of :math:`\mathbb{F}_k` (the bound there is trace regularization)."""
    k = check_k(k, d)
    return (k / d) * np.eye(d)


@dataclass(frozen=True, eq=False)
class FantopeModel:
    r"""The Fantope-regularized DC objective :math:`\varphi` and its convex bounds.

    Build it with :func:`fantope_model` (public parameters ``rank``, ``reg_weight``,
    ``trace_weight``).

    Attributes
    ----------
    base : HingeModel
        :math:`\gamma\,\mathrm{tr}\,M + \ell(M)` (linear term :math:`\gamma I`, no quadratic term).
    k : int
        Number of penalised (smallest) eigenvalues, ``1 <= k <= d``: the Ky Fan index of the
        mathematics, ``k = d - rank`` (the public parameter is :attr:`rank`).
    reg_weight : float
        Weight :math:`\mu \ge 0` of :math:`R`.
    trace_weight : float
        Weight :math:`\gamma \ge 0` of the trace.

    Notes
    -----
    .. math::
        \varphi(M) = \mu R(M) + \gamma\,\mathrm{tr}\,M + \ell(M), \qquad
        \hat\varphi(M; W) = \mu \langle W, M\rangle + \gamma\,\mathrm{tr}\,M + \ell(M),

    with :math:`\mu` = ``reg_weight``, :math:`\gamma` = ``trace_weight`` and
    :math:`\ell(M) = \sum_q c_q [\delta_q + \langle M, C_{ij} - C_{kl}\rangle]_+` (quadruplets and
    pairs alike). For :math:`W \in \mathbb{F}_k`, :math:`\hat\varphi(\cdot; W) \ge \varphi` with equality at
    every :math:`M` with :math:`W \in \partial R(M)`.
    """

    base: HingeModel
    k: int
    reg_weight: float
    trace_weight: float

    @property
    def d(self) -> int:
        return self.base.d

    @property
    def rank(self) -> int:
        """The target rank ``e = d - k``: :math:`R(M) = 0` on :math:`\\mathbb{S}^d_+` iff rank M <= e."""
        return self.base.d - self.k

    def regularizer(self, M) -> tuple[float, np.ndarray]:
        """``(R(M), W(M))`` (see :func:`fantope_regularizer`)."""
        return fantope_regularizer(M, self.k)

    def value(self, M) -> float:
        r""":math:`\varphi(M)`."""
        M = as_square_symmetric(M, "M", d=self.d)
        return self.base.value(M) + self.reg_weight * sum_smallest_eigenvalues(M, self.k)

    def extra_term(self, M: np.ndarray, lam: np.ndarray, V: np.ndarray) -> tuple[float, np.ndarray]:
        r"""``(mu R(M), mu W(M))`` (:math:`\mu` = ``reg_weight``) from the eigendecomposition the PSD
        projection already did.

        The ``extra`` hook of :func:`cvxmetric.solvers.subgradient.projected_subgradient` (thesis alg. 2).
        """
        R, W = fantope_terms_from_eig(lam, V, self.k)
        return self.reg_weight * R, self.reg_weight * W

    def check_w(self, W, name: str = "W") -> np.ndarray:
        """A validated symmetric copy of ``W``, which must lie in the Fantope :math:`F_k`."""
        W = as_square_symmetric(W, name, d=self.d)
        viol = fantope_violation(W, self.k)
        if viol > FANTOPE_TOL:
            raise ValueError(
                f"{name} is not in the Fantope F_k (k = {self.k}): it needs 0 <= eigenvalues <= 1 and "
                f"trace = k, violation {viol:.3g}; use cvxmetric.fantope.fantope_projector(M, k) "
                "or fantope_center(d, k)")
        return W

    def bound(self, W) -> HingeModel:
        r"""The convex bound :math:`\hat\varphi(\cdot; W)` as a hinge model (:math:`R = \mu W + \gamma I`)."""
        W = self.check_w(W)
        return replace(self.base, R=symmetrize(self.reg_weight * W + self.trace_weight * np.eye(self.d)),
                       name="fantope-bound")

    def bound_at(self, M) -> HingeModel:
        r""":math:`\hat\varphi(\cdot; W(M))`, the bound that is tight at ``M``."""
        return self.bound(fantope_projector(M, self.k))


def check_rank(rank, d: int, name: str = "rank") -> int:
    """Validate a target rank of the Fantope regularizer: an integer with ``0 <= rank <= d - 1``.

    The model penalises the ``k = d - rank`` smallest eigenvalues (``1 <= k <= d``); ``rank = 0``
    penalises all of them (:math:`R(M) = \\mathrm{tr}\\,M`).
    """
    try:
        return check_int_in_range(rank, name, 0, d - 1)
    except ValueError:
        raise ValueError(f"{name} is the target rank e of the Fantope regularizer, an integer with "
                         f"0 <= {name} <= d - 1 = {d - 1}; got {rank}") from None


def fantope_model(X, constraints: ConstraintSet, *, rank: int, reg_weight: float, trace_weight: float = 0.0,
                  C_Q: float = 1.0, C_P: float = 1.0) -> FantopeModel:
    r"""The Fantope-regularized model :math:`\varphi` (thesis eq. 3.1 with the trace term of 3.4.1).

    Parameters
    ----------
    X : array_like, shape (n, d)
    constraints : ConstraintSet
        Quadruplets, triplets and pairs; relative constraints are weighted by ``C_Q``,
        pairs by ``C_P`` (as in Qwise, :func:`cvxmetric.models.qwise_model`).
    rank : int
        Target rank :math:`e`, ``0 <= rank <= d - 1``: the model penalises the ``k = d - rank``
        smallest eigenvalues (the model's attribute ``k``).
    reg_weight : float
        Non-negative weight :math:`\mu` of :math:`R(M)`.
    trace_weight : float
        Non-negative weight :math:`\gamma` of :math:`\mathrm{tr}\,M` (default 0: Fantope alone).
    C_Q, C_P : float
        Non-negative weights of the hinge terms.

    Notes
    -----
    .. math::
        \varphi(M) = \mu R(M) + \gamma\,\mathrm{tr}\,M
        + C_Q \sum_{q} w_q [\delta_q + \langle M, C_{ij} - C_{kl}\rangle]_+
        + C_P \sum_{p} w_p [\delta_p \pm \langle M, C_p\rangle]_+,\qquad M \succeq 0,

    with :math:`R(M)` the sum of the :math:`k = d - e` smallest eigenvalues of :math:`M`.
    """
    reg_weight = check_nonnegative(reg_weight, "reg_weight")
    trace_weight = check_nonnegative(trace_weight, "trace_weight")
    base = qwise_model(X, constraints, regularizer="trace", C_Q=C_Q, C_P=C_P, reg_weight=1.0)
    k = base.d - check_rank(rank, base.d)
    base = replace(base, R=trace_weight * np.eye(base.d), name="fantope")
    return FantopeModel(base, k, reg_weight, trace_weight)
