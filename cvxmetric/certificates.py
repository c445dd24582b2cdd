r"""Certified intervals and the one relative gap of the project.

Nothing the project reports rests on a solver's status label: an optimal value is an interval
:math:`[\ell, u]` with :math:`u` the objective of a feasible point and :math:`\ell` a dual bound
computed by project code (from multipliers repaired to exact dual feasibility). The width of that
interval, relative to the size of the values it brackets, is *the* relative gap:

.. math::
    \mathrm{gap}(u, \ell) = \frac{u - \ell}{\max(|u|, |\ell|)}, \qquad \mathrm{gap}(0, 0) = 0 .

The denominator is the larger magnitude of the two values, never :math:`\max(1, \cdot)`: a
denominator floored at 1 turns the gap into an absolute one whenever :math:`|p^*| \ll 1`, where
an 8.8 % error then passes a 1e-3 test, and it changes the verdict when the objective is
multiplied by a constant. With this denominator the gap is invariant under every positive scaling
of the objective (all weights times :math:`c`, and the data scalings the methods are invariant
under). Its one blind spot is an optimum that is itself zero, where no relative measure exists:
there the caller passes the problem's reference value (its objective at M = 0), and an interval
within ``ZERO_OPTIMUM_RTOL`` of that value of zero certifies p* = 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

__all__ = ["relative_gap", "relative_difference", "Bounds", "WRONG_CERTIFICATE_RTOL", "ZERO_OPTIMUM_RTOL"]

#: A certified lower bound may exceed the value of a feasible point by this much, relatively: the
#: round-off of evaluating both (an objective through sums or cvxpy, a bound through eigenvalues).
#: More means a wrong certificate or an infeasible point, never an optimum (used by the solvers'
#: result contract, the solve ladder and the harness).
WRONG_CERTIFICATE_RTOL = 1e-9


#: A certified interval whose two ends are within ZERO_OPTIMUM_RTOL times the problem's reference
#: value of zero certifies a zero optimum: the gap's denominator is floored at that size (see
#: :func:`relative_gap`). The reference is the objective at a trivial point (a hinge model's value at
#: M = 0: every constraint at its margin), so the floor scales with the objective and the verdict
#: stays scale invariant. 1e-9 sits far above the round-off of evaluating an objective of that
#: size (~1e-16 relative per term) and far below any optimum the methods resolve otherwise.
ZERO_OPTIMUM_RTOL = 1e-9


def relative_gap(upper: Optional[float], lower: Optional[float], reference: Optional[float] = None) -> float:
    r"""Relative width :math:`(u - \ell) / \max(|u|, |\ell|)` of a certified interval.

    Parameters
    ----------
    upper : float or None
        Objective of a feasible point (an upper bound on a minimum).
    lower : float or None
        A certified lower bound on the same minimum.
    reference : float, optional
        The problem's reference value (its objective at a trivial point, e.g. M = 0). Given, the
        denominator is at least ``ZERO_OPTIMUM_RTOL * |reference|``: an optimum that is zero (a
        separable LMNN problem with n <= d) has no relative measure of its own, and an interval
        within ``ZERO_OPTIMUM_RTOL * |reference|`` of zero then certifies it.

    Returns
    -------
    float
        The relative gap; ``inf`` when either bound is missing or not finite. A negative value
        means ``lower > upper``: a wrong certificate or an infeasible point (callers check it).
    """
    if upper is None or lower is None:
        return math.inf
    upper, lower = float(upper), float(lower)
    if not (math.isfinite(upper) and math.isfinite(lower)):
        return math.inf
    if upper == lower:
        return 0.0
    floor = 0.0 if reference is None else ZERO_OPTIMUM_RTOL * abs(float(reference))
    return (upper - lower) / max(abs(upper), abs(lower), floor)


def relative_difference(value: float, reference: float) -> float:
    r"""Signed :math:`(v - r) / \max(|v|, |r|)`: the same denominator as :func:`relative_gap`.

    Used where two numbers that should agree are compared (a fast objective against the best
    known value, two solvers' optima, a solver's own objective against ``value_at``).
    """
    return relative_gap(value, reference)


@dataclass(frozen=True)
class Bounds:
    """A certified interval ``[lower, upper]`` on an optimal value.

    Attributes
    ----------
    lower : float or None
        Dual bound computed by project code (None: no certificate).
    upper : float or None
        Objective of a feasible point (None: no feasible point).
    """

    lower: Optional[float]
    upper: Optional[float]

    @property
    def gap(self) -> float:
        """:func:`relative_gap` of the interval (``inf`` when a bound is missing)."""
        return relative_gap(self.upper, self.lower)

    def certifies(self, rtol: float) -> bool:
        """Whether the interval is a valid certificate at relative width ``rtol``:
        ``-WRONG_CERTIFICATE_RTOL <= gap <= rtol``."""
        return -WRONG_CERTIFICATE_RTOL <= self.gap <= rtol

    def contains(self, value: float, rtol: float) -> bool:
        """Whether ``value`` lies in the interval widened by ``rtol`` relative."""
        if self.lower is None or self.upper is None:
            return False
        scale = max(abs(self.lower), abs(self.upper), abs(value))
        return self.lower - rtol * scale <= value <= self.upper + rtol * scale
