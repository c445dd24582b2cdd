r"""Pictures of a learned metric, drawn in one figure style shared by the notebooks.

* :func:`use_style` — the project's figure style (size of the documentation's content column,
  fonts of at least :data:`SMALL_FONT_SIZE` points as rendered, constrained layout). Every
  notebook calls it once, after importing pyplot.
* :func:`panels` — a figure of ``n`` panels at the page's width, at most
  :data:`MAX_PANELS_PER_ROW` a row.
* :func:`plot_matrix` and :func:`plot_matrices` — heat maps of matrices on a symmetric, diverging
  colour scale whose limits are the data's largest magnitude, each with its colour bar.
* :func:`plot_spectrum` — the eigenvalues of :math:`M` (at unit trace) beside those of a
  reference: the target metric where one exists, otherwise the identity (the Euclidean metric,
  a flat spectrum). How many directions the metric uses, and how unevenly, reads off it.
* :func:`plot_embeddings` — the data in the best 2-D picture of each metric
  (:func:`cvxmetric.evaluation.metric_embedding`), side by side, coloured by class, with a
  legend naming the classes.

matplotlib is imported inside the functions, so ``import cvxmetric`` never needs it. Every
function draws on the axes it is given (or on new ones) and returns them; it never calls
``plt.show()``.

Notes
-----
The sizes follow from one rule: a figure is drawn at the width of the documentation's content
column, so the page shows it at its natural size and a font of ``s`` points in the figure is
``s`` points on the page. With :data:`FIGURE_DPI` = 96 pixels per inch (the CSS pixel density),
a figure :data:`PAGE_WIDTH` inches wide is ``96 * PAGE_WIDTH`` CSS pixels wide.
"""
from __future__ import annotations

import math

import numpy as np

from cvxmetric.evaluation import metric_embedding, normalized_spectrum

__all__ = ["use_style", "panels", "plot_matrix", "plot_matrices", "plot_spectrum", "plot_embeddings",
           "CONTENT_WIDTH", "PAGE_WIDTH", "FIGURE_DPI", "FONT_SIZE", "SMALL_FONT_SIZE", "MAX_PANELS_PER_ROW",
           "PANEL_HEIGHT", "MATRIX_CMAP", "SPECTRUM_FLOOR"]

#: Width (CSS pixels) of the documentation's content column: pydata-sphinx-theme in a browser
#: window 1280 pixels wide, measured on a screenshot. A wider image is shrunk to it.
CONTENT_WIDTH = 624

#: Width of a figure, inches: the content column is 6.5 inches at 96 dpi, and the notebooks'
#: inline backend saves a figure with a 0.1-inch margin on each side (``bbox_inches="tight"``);
#: 6.3 inches plus the margins fit, so a figure is shown at its natural size, not shrunk.
PAGE_WIDTH = 6.3

#: Pixels per inch of the rendered figures: the CSS pixel density, so that a point in the figure
#: is a point on the page (see the module's Notes).
FIGURE_DPI = 96

#: Font size (points) of titles and axis labels.
FONT_SIZE = 10

#: Font size (points) of tick labels, legends and annotations: the smallest text of a figure,
#: and the smallest a reader at arm's length reads without zooming.
SMALL_FONT_SIZE = 9

#: Panels in one row of a figure at most: at :data:`PAGE_WIDTH`, three panels are each about
#: 2 inches wide, the least in which ticks, a title and a colour bar stay legible.
MAX_PANELS_PER_ROW = 3

#: Height (inches) of one row of panels.
PANEL_HEIGHT = 2.6

#: Colour map of matrix heat maps: diverging, white at zero, so signs and zeros read off at once.
MATRIX_CMAP = "RdBu_r"

#: Smallest share of the trace drawn on the logarithmic axis of :func:`plot_spectrum`: eigenvalues
#: below it (zero ones, and round-off around 1e-16) are drawn at the floor, so a rank-deficient
#: metric shows its zero eigenvalues as a flat line instead of vanishing from the plot.
SPECTRUM_FLOOR = 1e-8


def use_style() -> None:
    """Set matplotlib's parameters to the project's figure style (see the module's Notes).

    Call it once per notebook. It imports pyplot first: a notebook's inline backend sets its own
    defaults when pyplot is first imported, and the parameters set here then override them.
    """
    import matplotlib as mpl
    import matplotlib.pyplot  # noqa: F401  (loads the backend first: its defaults are overridden below)

    mpl.rcParams.update({
        "figure.figsize": (PAGE_WIDTH, PANEL_HEIGHT + 0.6),
        "figure.dpi": FIGURE_DPI,
        "savefig.dpi": FIGURE_DPI,
        "figure.constrained_layout.use": True,
        "font.size": FONT_SIZE,
        "axes.titlesize": FONT_SIZE,
        "axes.labelsize": FONT_SIZE,
        "figure.titlesize": FONT_SIZE + 1,
        "xtick.labelsize": SMALL_FONT_SIZE,
        "ytick.labelsize": SMALL_FONT_SIZE,
        "legend.fontsize": SMALL_FONT_SIZE,
        "legend.title_fontsize": SMALL_FONT_SIZE,
        "axes.grid": False,
        "image.cmap": "viridis",
    })


def _grid(n_panels: int, ncols: int | None) -> tuple[int, int]:
    """Rows and columns of a figure of ``n_panels`` panels (at most MAX_PANELS_PER_ROW a row)."""
    if not isinstance(n_panels, (int, np.integer)) or n_panels < 1:
        raise ValueError(f"n_panels must be a positive integer, got {n_panels!r}")
    if ncols is None:
        ncols = min(n_panels, MAX_PANELS_PER_ROW)
    if not isinstance(ncols, (int, np.integer)) or not 1 <= ncols <= MAX_PANELS_PER_ROW:
        raise ValueError(f"ncols must be an integer from 1 to {MAX_PANELS_PER_ROW} "
                         f"(at most {MAX_PANELS_PER_ROW} panels a row stay legible), got {ncols!r}")
    return math.ceil(n_panels / ncols), ncols


def panels(n_panels: int = 1, *, ncols: int | None = None, height: float = PANEL_HEIGHT,
           width: float = PAGE_WIDTH, **subplot_kw):
    """A new figure of ``n_panels`` axes at the page's width, at most three a row.

    Parameters
    ----------
    n_panels : int
        Number of axes.
    ncols : int or None
        Panels a row, at most :data:`MAX_PANELS_PER_ROW`; None: ``min(n_panels, 3)``.
    height : float
        Height of one row, inches.
    width : float
        Width of the figure, inches; at most :data:`PAGE_WIDTH` (a narrower figure for a single
        small panel).
    **subplot_kw
        Passed to ``plt.subplots`` (``sharex``, ``subplot_kw``, ...).

    Returns
    -------
    fig : matplotlib Figure
    axes : matplotlib Axes, or ndarray of Axes of shape (n_panels,)
        One Axes when ``n_panels == 1``. Cells of the last row beyond ``n_panels`` are removed.
    """
    import matplotlib.pyplot as plt

    nrows, ncols = _grid(n_panels, ncols)
    if not 0 < width <= PAGE_WIDTH:
        raise ValueError(f"width must be in (0, {PAGE_WIDTH}] inches (the page's width), got {width!r}")
    if not height > 0:
        raise ValueError(f"height must be positive (inches), got {height!r}")
    fig, grid = plt.subplots(nrows, ncols, figsize=(width, height * nrows), squeeze=False,
                             layout="constrained", **subplot_kw)
    flat = grid.ravel()
    for ax in flat[n_panels:]:
        ax.remove()
    return fig, (flat[0] if n_panels == 1 else flat[:n_panels])


def _axes(ax):
    """``ax``, or the one panel of a new figure (:func:`panels`)."""
    if ax is not None:
        return ax
    _, ax = panels(1)
    return ax


def _symmetric_limit(matrices) -> float:
    """The largest magnitude of the matrices (1 when they are all zero: a colour scale needs a range)."""
    vmax = max(float(np.max(np.abs(A))) if np.size(A) else 0.0 for A in matrices)
    return vmax if vmax > 0 and np.isfinite(vmax) else 1.0


def _as_matrix(M, name: str = "M") -> np.ndarray:
    A = np.asarray(M, dtype=float)
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (a matrix), got shape {A.shape}")
    return A


def plot_matrix(M, *, ax=None, title: str | None = None, vmax: float | None = None,
                colorbar: bool = True, cmap: str = MATRIX_CMAP):
    r"""A heat map of the matrix ``M`` on the symmetric colour scale :math:`[-v, v]`, with its colour bar.

    Parameters
    ----------
    M : array_like of shape (m, n)
    ax : matplotlib Axes or None
    title : str or None
    vmax : float or None
        The scale's limit :math:`v > 0`; None: :math:`\max_{ij} |M_{ij}|` (1 for a zero matrix),
        so the scale shows the data.
    colorbar : bool
        Attach a colour bar to ``ax``.
    cmap : str
        A diverging colour map (white at zero).

    Returns
    -------
    image : matplotlib AxesImage
    """
    A = _as_matrix(M)
    v = _symmetric_limit([A]) if vmax is None else float(vmax)
    if not v > 0:
        raise ValueError(f"vmax must be positive, got {vmax!r}")
    ax = _axes(ax)
    image = ax.imshow(A, cmap=cmap, vmin=-v, vmax=v, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    if title is not None:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.85)
    return image


def plot_matrices(matrices: dict, *, axes=None, vmax: float | None = None, cmap: str = MATRIX_CMAP,
                  ncols: int | None = None):
    r"""Heat maps of several matrices on one symmetric colour scale, with one colour bar.

    Parameters
    ----------
    matrices : dict of str to array_like of shape (m, n)
        ``{title: matrix}``, drawn in order, at most three a row.
    axes : sequence of matplotlib Axes or None
        One per matrix; None: a new figure (:func:`panels`).
    vmax : float or None
        The common scale :math:`[-v, v]`; None: the largest magnitude over all the matrices.
    ncols : int or None
        Panels a row of a new figure (see :func:`panels`).

    Returns
    -------
    axes : ndarray of matplotlib Axes

    Notes
    -----
    One scale for all panels makes the matrices comparable entry by entry; the colour bar is
    drawn once, beside the whole group.
    """
    if not isinstance(matrices, dict) or not matrices:
        raise TypeError("matrices must be a non-empty dict {title: matrix}")
    arrays = {title: _as_matrix(A, f"matrices[{title!r}]") for title, A in matrices.items()}
    if axes is None:
        height = PAGE_WIDTH / _grid(len(arrays), ncols)[1] * 0.85
        _, axes = panels(len(arrays), ncols=ncols, height=height)
    axes = np.atleast_1d(axes)
    if len(axes) != len(arrays):
        raise ValueError(f"axes holds {len(axes)} axes for {len(arrays)} matrices; pass one per matrix")
    v = _symmetric_limit(arrays.values()) if vmax is None else float(vmax)
    image = None
    for ax, (title, A) in zip(axes, arrays.items()):
        image = plot_matrix(A, ax=ax, title=title, vmax=v, colorbar=False, cmap=cmap)
    axes[0].figure.colorbar(image, ax=list(axes), shrink=0.85)
    return axes


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
    ax.legend()
    return ax


def _class_colors(n_classes: int, cmap: str):
    """One colour per class: a qualitative map's own colours, else evenly spaced samples."""
    import matplotlib as mpl

    colormap = mpl.colormaps[cmap]
    if getattr(colormap, "N", 256) >= n_classes and colormap.N < 256:   # a qualitative (listed) map
        return [colormap(i) for i in range(n_classes)]
    return [colormap(t) for t in np.linspace(0.0, 1.0, n_classes)]


def plot_embeddings(X, y, metrics: dict, *, axes=None, s: float = 12, cmap: str = "tab10",
                    legend_title: str = "class"):
    r"""The data in the best 2-D picture of each metric, coloured by class, with a class legend.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
        Class labels (the colours; integers or any labels), named in the legend.
    metrics : dict of str to ndarray of shape (d, d) or None
        ``{title: M}``; ``None`` is the Euclidean metric (PCA of ``X``).
    axes : sequence of matplotlib Axes or None
        One per metric; None: a new figure at the page's width (:func:`panels`).
    s : float
        Marker area (points squared).
    cmap : str
        Colour map of the classes: a qualitative one (``"tab10"``, ten colours) when there are at
        most ten classes.
    legend_title : str
        Title of the legend, drawn once for the figure: outside the panels, on the right, when
        the figure has a layout engine (figures of :func:`panels` have the constrained layout),
        else at the figure's right edge.

    Returns
    -------
    axes : ndarray of matplotlib Axes

    Notes
    -----
    Each panel is :func:`~cvxmetric.evaluation.metric_embedding`: PCA of the points mapped by
    :math:`L` (:math:`M = L^\top L`); its title gives the share of the squared distances the
    picture keeps. Axes have equal units, so relative spreads are comparable within a panel.
    """
    if not isinstance(metrics, dict) or not metrics:
        raise TypeError("metrics must be a non-empty dict {title: M or None}")
    if axes is None:
        _, axes = panels(len(metrics))
    axes = np.atleast_1d(axes)
    if len(axes) != len(metrics):
        raise ValueError(f"axes holds {len(axes)} axes for {len(metrics)} metrics; pass one per metric")
    classes, codes = np.unique(np.asarray(y), return_inverse=True)
    colors = _class_colors(len(classes), cmap)
    for ax, (title, M) in zip(axes, metrics.items()):
        Z, kept = metric_embedding(X, M)
        for k, label in enumerate(classes):
            on = codes == k
            ax.scatter(Z[on, 0], Z[on, 1], color=colors[k], s=s, label=str(label), linewidths=0)
        ax.set_title(f"{title}\n(2-D picture keeps {100 * kept:.0f}%)", fontsize=SMALL_FONT_SIZE)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xticks([])
        ax.set_yticks([])
    handles, names = axes[0].get_legend_handles_labels()
    fig = axes[0].figure
    loc = "outside right center" if fig.get_layout_engine() is not None else "center right"
    fig.legend(handles, names, title=legend_title, loc=loc, markerscale=1.5, handletextpad=0.2,
               ncols=1 if len(classes) <= 12 else 2)
    return axes
