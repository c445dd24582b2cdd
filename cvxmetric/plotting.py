r"""Pictures of a learned metric, shared by the notebooks.

* :func:`plot_spectrum` — the eigenvalues of :math:`M` (at unit trace) beside those of a
  reference: the target metric where one exists, otherwise the identity (the Euclidean metric,
  a flat spectrum). How many directions the metric uses, and how unevenly, reads off it.
* :func:`plot_embeddings` — the data in the best 2-D picture of each metric
  (:func:`cvxmetric.evaluation.metric_embedding`), side by side and coloured by class.

matplotlib is imported inside the functions, so ``import cvxmetric`` never needs it. Every
function draws on the axes it is given (or on new ones) and returns them; it never calls
``plt.show()``.
"""
from __future__ import annotations

import numpy as np

from cvxmetric.evaluation import metric_embedding, normalized_spectrum

__all__ = ["plot_spectrum", "plot_embeddings", "SPECTRUM_FLOOR"]

#: Smallest share of the trace drawn on the logarithmic axis of :func:`plot_spectrum`: eigenvalues
#: below it (zero ones, and round-off around 1e-16) are drawn at the floor, so a rank-deficient
#: metric shows its zero eigenvalues as a flat line instead of vanishing from the plot.
SPECTRUM_FLOOR = 1e-8


def _axes(ax, ncols: int = 1, size=(4.0, 3.2)):
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax
    _, axes = plt.subplots(1, ncols, figsize=(size[0] * ncols, size[1]), squeeze=False)
    return axes[0, 0] if ncols == 1 else axes[0]


def plot_spectrum(M, reference=None, *, labels=("learned M", "identity"), log: bool = True, ax=None):
    r"""Eigenvalues of ``M`` and of ``reference``, non-increasing, each divided by its trace.

    Parameters
    ----------
    M : ndarray of shape (d, d) or dict of str to ndarray
        A PSD metric, or several (``{label: M}``), drawn as lines with markers.
    reference : ndarray of shape (d, d) or None
        The metric to compare with (drawn dashed): a target metric, or None for the identity.
    labels : (str, str)
        Legend entries of ``M`` (ignored when ``M`` is a dict) and of ``reference``.
    log : bool
        Logarithmic axis (eigenvalues below :data:`SPECTRUM_FLOOR` drawn at the floor): shows
        the numerical rank. ``False`` draws the shares on a linear axis.
    ax : matplotlib Axes or None

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = _axes(ax)
    metrics = M if isinstance(M, dict) else {labels[0]: M}
    first = next(iter(metrics.values()))
    d = np.shape(first)[0]
    ref = normalized_spectrum(np.eye(d) if reference is None else reference)
    idx = np.arange(1, d + 1)
    floor = SPECTRUM_FLOOR if log else 0.0
    ax.plot(idx, np.maximum(ref, floor), "k--", lw=1.2, label=labels[1])
    for name, A in metrics.items():
        ax.plot(idx, np.maximum(normalized_spectrum(A), floor), marker="o", ms=3.5, lw=1, label=name)
    if log:
        ax.set_yscale("log")
        ax.set_ylim(SPECTRUM_FLOOR / 3, 1.5)
    ax.set_xlabel("eigenvalue index (largest first)")
    ax.set_ylabel(r"$\lambda_i(M)\,/\,\mathrm{tr}\,M$")
    ax.legend(fontsize=8)
    return ax


def plot_embeddings(X, y, metrics: dict, *, axes=None, s: float = 12, cmap: str = "viridis"):
    r"""The data in the best 2-D picture of each metric, coloured by class.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
        Class labels (the colours; integers or any labels).
    metrics : dict of str to ndarray of shape (d, d) or None
        ``{title: M}``; ``None`` is the Euclidean metric (PCA of ``X``).
    axes : sequence of matplotlib Axes or None
        One per metric.

    Returns
    -------
    axes : sequence of matplotlib Axes

    Notes
    -----
    Each panel is :func:`~cvxmetric.evaluation.metric_embedding`: PCA of the points mapped by
    :math:`L` (:math:`M = L^\top L`); its title gives the share of the squared distances the
    picture keeps. Axes have equal units, so relative spreads are comparable within a panel.
    """
    if not isinstance(metrics, dict) or not metrics:
        raise TypeError("metrics must be a non-empty dict {title: M or None}")
    axes = _axes(axes, ncols=len(metrics)) if axes is None else axes
    axes = np.atleast_1d(axes)
    if len(axes) != len(metrics):
        raise ValueError(f"axes holds {len(axes)} axes for {len(metrics)} metrics; pass one per metric")
    _, codes = np.unique(np.asarray(y), return_inverse=True)
    for ax, (title, M) in zip(axes, metrics.items()):
        Z, kept = metric_embedding(X, M)
        ax.scatter(Z[:, 0], Z[:, 1], c=codes, cmap=cmap, s=s)
        ax.set_title(f"{title}\n(2-D keeps {100 * kept:.0f}% of squared distances)", fontsize=9)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xticks([])
        ax.set_yticks([])
    return axes
