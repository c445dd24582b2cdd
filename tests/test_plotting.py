"""cvxmetric.plotting: the figure style (page width, font sizes), panels and matrix heat maps."""
import io

import numpy as np
import pytest


@pytest.fixture
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context():
        from cvxmetric.plotting import use_style

        use_style()
        yield plt
        plt.close("all")


def _texts(fig):
    """Every visible, non-empty text of a figure: titles, labels, ticks, legends, annotations."""
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _labelled_data(seed=0, n=60, d=4, n_classes=3):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n // n_classes)
    X = rng.standard_normal((n, d)) + y[:, None]
    return X, y


def test_style_fits_the_page_and_fonts_are_9_pt_or_more(plt):
    from PIL import Image

    from cvxmetric.plotting import (CONTENT_WIDTH, FIGURE_DPI, PAGE_WIDTH, SMALL_FONT_SIZE, panels, plot_embeddings,
                                    plot_matrices, plot_spectrum)

    assert SMALL_FONT_SIZE >= 9
    X, y = _labelled_data()
    fig, axes = panels(3)
    plot_spectrum(np.diag([3.0, 1.0, 0.5, 0.0]), ax=axes[0])
    plot_embeddings(X, y, {"Euclidean": None, "learned": np.diag([1.0, 0, 0, 0])}, axes=axes[1:])
    fig2 = plot_matrices({"A": np.eye(4), "B": -np.eye(4)})[0].figure
    for f in (fig, fig2):
        assert f.get_figwidth() == pytest.approx(PAGE_WIDTH)
        assert f.dpi == FIGURE_DPI
        f.canvas.draw()
        sizes = [t.get_fontsize() for t in _texts(f)]
        assert sizes and min(sizes) >= SMALL_FONT_SIZE, f"text below {SMALL_FONT_SIZE} pt: {min(sizes)}"
        # saved as a notebook's inline backend saves it, the image fits the content column
        buffer = io.BytesIO()
        f.savefig(buffer, format="png", dpi=f.dpi, bbox_inches="tight")
        buffer.seek(0)
        assert Image.open(buffer).size[0] <= CONTENT_WIDTH


def test_panels_wrap_at_three_a_row(plt):
    from cvxmetric.plotting import MAX_PANELS_PER_ROW, PANEL_HEIGHT, panels

    fig, axes = panels(5)
    assert len(axes) == 5 and len(fig.axes) == 5          # the sixth cell of the 2 x 3 grid is removed
    assert fig.get_figheight() == pytest.approx(2 * PANEL_HEIGHT)
    assert axes[3].get_subplotspec().rowspan.start == 1   # the fourth panel starts the second row
    fig, ax = panels(1)
    assert not isinstance(ax, np.ndarray)
    with pytest.raises(ValueError, match="ncols"):
        panels(4, ncols=MAX_PANELS_PER_ROW + 1)
    with pytest.raises(ValueError, match="n_panels"):
        panels(0)
    with pytest.raises(ValueError, match="width"):
        panels(2, width=20.0)


def test_plot_matrix_symmetric_scale_shows_small_values(plt):
    from cvxmetric.plotting import plot_matrix

    M = np.array([[0.0, 0.03], [-0.01, 0.02]])   # small entries: a fixed [0, 1] scale would draw one colour
    image = plot_matrix(M, title="M")
    assert image.get_clim() == pytest.approx((-0.03, 0.03))
    assert len(image.axes.figure.axes) == 2       # the heat map and its colour bar
    assert image.axes.get_title() == "M"
    assert plot_matrix(np.zeros((3, 3)), colorbar=False).get_clim() == (-1.0, 1.0)
    with pytest.raises(ValueError, match="2-D"):
        plot_matrix(np.ones(3))
    with pytest.raises(ValueError, match="vmax"):
        plot_matrix(M, vmax=0.0)


def test_plot_matrices_share_one_scale_and_one_colour_bar(plt):
    from cvxmetric.plotting import plot_matrices

    mats = {"A": np.diag([1.0, -2.0]), "B": np.diag([0.5, 0.5]), "C": np.zeros((2, 2)), "D": np.eye(2)}
    before = {"A": mats["A"].copy()}
    axes = plot_matrices(mats)
    assert len(axes) == 4
    fig = axes[0].figure
    assert len(fig.axes) == 5                       # four heat maps, one colour bar
    for ax in axes:
        assert ax.images[0].get_clim() == pytest.approx((-2.0, 2.0))
    np.testing.assert_array_equal(mats["A"], before["A"])   # inputs are not modified
    with pytest.raises(TypeError, match="dict"):
        plot_matrices([np.eye(2)])
    with pytest.raises(ValueError, match="one per matrix"):
        plot_matrices(mats, axes=axes[:2])


def test_plot_embeddings_names_the_classes_in_a_legend(plt):
    from cvxmetric.plotting import plot_embeddings

    X, y = _labelled_data()
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    axes = plot_embeddings(X, labels, {"Euclidean": None}, legend_title="species")
    legend = axes[0].figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["setosa", "versicolor", "virginica"]
    assert legend.get_title().get_text() == "species"
    colours = {tuple(np.round(c.get_facecolor()[0], 6)) for c in axes[0].collections}
    assert len(colours) == 3                        # one colour per class
