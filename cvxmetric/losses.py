r"""Smooth losses: the Huber-smoothed hinge of the thesis' appendix B.2.

.. math::
    \ell_h(s) = \begin{cases} 0 & s < -h \\ \dfrac{(s + h)^2}{4h} & |s| \le h \\ s & s > h \end{cases}

:math:`\ell_h` is the Moreau envelope of :math:`[\cdot]_+` (parameter :math:`2h`) shifted by
:math:`h`: :math:`\ell_h(s) = \min_v [v]_+ + (s + h - v)^2 / (4h)`, it is :math:`C^1`, and
:math:`0 \le \ell_h(s) - [s]_+ \le h/4`. The thesis' losses are
:math:`L^h_1(y, t) = \ell_h(1 - yt)` and :math:`L^h_0(y, t) = \ell_h(-h - yt)`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["huber_hinge", "huber_hinge_grad", "huber_hinge_curvature", "DEFAULT_HUBER_H"]

#: The thesis' smoothing width (appendix B.2: "In all our experiments, we set h = 0.05").
DEFAULT_HUBER_H = 0.05


def huber_hinge(s, h: float = DEFAULT_HUBER_H) -> np.ndarray:
    r""":math:`\ell_h(s)`, elementwise."""
    s = np.asarray(s, dtype=np.float64)
    return np.where(s > h, s, np.where(s < -h, 0.0, (s + h) ** 2 / (4 * h)))


def huber_hinge_grad(s, h: float = DEFAULT_HUBER_H) -> np.ndarray:
    r""":math:`\ell_h'(s)`: 0, :math:`(s + h)/(2h)` or 1."""
    s = np.asarray(s, dtype=np.float64)
    return np.clip((s + h) / (2 * h), 0.0, 1.0)


def huber_hinge_curvature(s, h: float = DEFAULT_HUBER_H) -> np.ndarray:
    r""":math:`\ell_h''(s)`: :math:`1/(2h)` on the quadratic zone :math:`|s| \le h`, else 0."""
    s = np.asarray(s, dtype=np.float64)
    return np.where(np.abs(s) <= h, 1.0 / (2 * h), 0.0)
