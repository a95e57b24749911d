"""The book's figure style and small plotting helpers (matplotlib / seaborn).

Conventions every figure of the book follows (:func:`set_style` sets them):

* a colour-blind-safe palette, Okabe & Ito's (:data:`OKABE_ITO`), in an order that never puts orange
  and vermilion in one figure of up to seven lines (vermilion is left out of the cycle);
* text at least 9 pt *as displayed*: the book's text column is about 690 px wide at a 1280 px window,
  and a figure is drawn at :data:`DPI` dots per inch, so a figure :data:`MAX_WIDTH` inches wide or less
  is shown at its own size and its 9.5-10 pt legends and tick labels stay readable
  (:func:`displayed_font_scale` gives the shrink factor of a wider one);
* the regularisers of the experiment chapters share a colour per training method and differ by marker:
  RDI and AUX of one optimiser in one colour, circle and square (:func:`method_style`);
* every log axis shows at least two tick labels (:func:`readable_log_axes`);
* a figure is handed to the page through myst-nb's ``glue`` and shown by a ``{glue:figure}`` directive
  with its caption (:func:`glue_figure`), so no ``<matplotlib.legend.Legend at 0x...>`` repr is left in
  the output.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = [
    "set_style",
    "image_grid",
    "learning_curves",
    "weight_panels",
    "show_table",
    "METHOD_COLORS",
    "METHOD_MARKERS",
    "FAMILY_COLORS",
    "FAMILY_MARKERS",
    "method_family",
    "method_color",
    "OKABE_ITO",
    "DPI",
    "PIXEL_DENSITY",
    "MAX_WIDTH",
    "method_style",
    "readable_log_axes",
    "displayed_font_scale",
    "glue_figure",
    "glue_placeholder",
]

#: Okabe & Ito's colour-blind-safe palette, by name.
OKABE_ITO = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "bluish green": "#009E73",
    "reddish purple": "#CC79A7",
    "sky blue": "#56B4E9",
    "vermilion": "#D55E00",
    "yellow": "#F0E442",
    "black": "#000000",
}
#: The colour cycle C0, C1, ...: Okabe-Ito without vermilion (no orange/vermilion pair), black last.
CYCLE = [OKABE_ITO[k] for k in ("blue", "orange", "bluish green", "reddish purple", "sky blue", "black", "yellow")]
#: Resolution of the book's figures (dots per inch) at their displayed size.
DPI = 110
#: Pixels per displayed pixel of the book's PNGs: 2, "retina" (a figure of w × h displayed pixels is stored
#: at 2w × 2h and declared w × h, so it stays sharp on high-density screens and when zoomed).
PIXEL_DENSITY = 2
#: Widest figure (inches) shown at its own size in the book's text column (about 690 px at 1280 px).
MAX_WIDTH = 6.25
_COLUMN_PX = 688


def set_style() -> None:
    """One look for every figure of the book: whitegrid, the Okabe-Ito cycle, text of 9.5-11 pt, PNG at
    :data:`DPI` dpi displayed (stored at :data:`PIXEL_DENSITY` times that in a notebook), 6.2 × 4 inches by
    default."""
    import matplotlib as mpl
    import seaborn as sns
    from cycler import cycler

    sns.set_theme(style="whitegrid", context="notebook", palette=CYCLE)
    mpl.rcParams.update(
        {
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
            "figure.autolayout": True,
            "figure.figsize": (6.2, 4.0),
            "axes.prop_cycle": cycler(color=CYCLE),
            "font.size": 10.5,
            "axes.labelsize": 10.5,
            "axes.titlesize": 11,
            "figure.titlesize": 11.5,
            "xtick.labelsize": 10,
            "ytick.labelsize": 10,
            "legend.fontsize": 9.5,
            "legend.title_fontsize": 9.5,
            "legend.framealpha": 0.9,
            "lines.markersize": 5,
        }
    )
    _notebook_png_density()


def _notebook_png_density() -> None:
    """In a notebook kernel, show figures as PNGs of :data:`PIXEL_DENSITY` × their displayed pixels."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # no IPython: a script saves its figures itself
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina" if PIXEL_DENSITY == 2 else "png")


def displayed_font_scale(fig: Any, column_px: int = _COLUMN_PX) -> float:
    """Factor by which the book's text column shrinks ``fig`` (1 when it fits): a font of ``s`` pt is
    displayed at ``s ×`` this factor."""
    width_px = fig.get_figwidth() * fig.dpi
    return min(1.0, column_px / width_px)


def readable_log_axes(fig: Any) -> None:
    """Give every log-scaled axis of ``fig`` at least two tick labels.

    A log axis that spans less than a decade shows one labelled tick or none with matplotlib's default
    locator; there, label the 1-2-5 ticks with plain numbers instead.
    """
    from matplotlib.ticker import LogLocator, NullFormatter, NullLocator, ScalarFormatter

    for ax in fig.axes:
        for axis, scale, lim in (
            (ax.xaxis, ax.get_xscale(), ax.get_xlim()),
            (ax.yaxis, ax.get_yscale(), ax.get_ylim()),
        ):
            if scale != "log":
                continue
            low, high = sorted(lim)
            ticks = [t for t in axis.get_majorticklocs() if low <= t <= high]
            if len(ticks) >= 2:
                continue
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            fmt = ScalarFormatter()
            fmt.set_scientific(False)
            axis.set_major_formatter(fmt)
            axis.set_minor_locator(NullLocator())
            axis.set_minor_formatter(NullFormatter())


def glue_figure(name: str, fig: Any) -> None:
    """Hand ``fig`` to the page as myst-nb glue ``name`` (shown by a ``{glue:figure}`` directive with its
    caption) and close it, so that the cell itself displays nothing. Log axes are made readable first."""
    import matplotlib.pyplot as plt
    import myst_nb

    readable_log_axes(fig)
    myst_nb.glue(name, fig, display=False)
    plt.close(fig)


def glue_placeholder(name: str, why: str) -> None:
    """Glue a small figure that only says ``why`` under ``name``, for a ``{glue:figure}`` whose computation was
    skipped (data not on this machine, say): the page builds and says what is missing."""
    import matplotlib.pyplot as plt

    # one blank subplot: IPython renders no image of a figure without axes (its repr would show), and an axes
    # placed by hand warns under the book style's tight layout
    fig, ax = plt.subplots(figsize=(6, 0.8))
    ax.axis("off")
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
    glue_figure(name, fig)


def image_grid(
    images: np.ndarray, titles: Sequence[str], ncols: int = 8, scale: float = 1.3, suptitle: str | None = None
):
    """Show uint8 images in a grid, one title under each.

    ``images`` is ``(N, H, W)`` (grey) or ``(N, 3, H, W)`` (RGB, channels first as
    returned by :func:`ntk_core.data.load_cifar10`). Returns the figure.
    """
    import matplotlib.pyplot as plt

    images = np.asarray(images)
    if images.ndim not in (3, 4):
        raise ValueError(f"images must be (N, H, W) or (N, 3, H, W), got shape {images.shape}")
    if len(titles) != len(images):
        raise ValueError(f"got {len(titles)} titles for {len(images)} images")
    nrows = int(np.ceil(len(images) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(scale * ncols, scale * nrows + 0.4), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, img, title in zip(axes.flat, images, titles):
        if img.ndim == 3:
            ax.imshow(np.transpose(img, (1, 2, 0)))
        else:
            ax.imshow(img, cmap="gray_r", vmin=0, vmax=255)
        ax.set_title(title, fontsize=9)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


#: one colour per method, the same in every figure of the book: vanilla training blue, RDI orange, AUX bluish
#: green, early stopping reddish purple, kernel ridge regression black (:func:`method_color` by family)
FAMILY_COLORS = {"vanilla": "C0", "RDI": "C1", "AUX": "C2", "ES": "C3", "KRR": "C5"}
#: the marker of each method family: vanilla a triangle, RDI a circle, AUX a square, ES a diamond, KRR a cross
FAMILY_MARKERS = {"vanilla": "^", "RDI": "o", "AUX": "s", "ES": "D", "KRR": "x"}
_FAMILY_OF = {
    "SGD": "vanilla", "GD": "vanilla", "SGD+AUX": "AUX", "GD+AUX": "AUX", "SGD+RDI": "RDI", "GD+RDI": "RDI",
    "GD+ES": "ES", "SGD+ES": "ES", "KRR": "KRR",
}  # fmt: skip
#: each training method of the experiments ("GD+RDI", "SGD+AUX", ...) by its colour (:data:`FAMILY_COLORS`)
METHOD_COLORS = {m: FAMILY_COLORS[f] for m, f in _FAMILY_OF.items()}
#: the marker of each method (:data:`FAMILY_MARKERS`)
METHOD_MARKERS = {m: FAMILY_MARKERS[f] for m, f in _FAMILY_OF.items()}


def method_family(method: str) -> str:
    """The family of a method's name: ``"RDI"``, ``"AUX"``, ``"ES"``, ``"KRR"`` or ``"vanilla"``.

    Examples
    --------
    >>> [method_family(m) for m in ("SGD+RDI (λ = 4)", "CCE+AUX", "GD+ES", "KRR", "Normal CCE", "vanilla")]
    ['RDI', 'AUX', 'ES', 'KRR', 'vanilla', 'vanilla']
    """
    name = str(method).split(" (")[0].upper()
    for family in ("RDI", "AUX", "KRR"):
        if family in name:
            return family
    return "ES" if name.endswith("+ES") or "EARLY STOP" in name else "vanilla"


def method_color(method: str) -> str:
    """The colour of a method, or of a family (``"RDI"``, ``"vanilla"``, …), the same in every figure."""
    return FAMILY_COLORS[method if method in FAMILY_COLORS else method_family(method)]


def method_style(method: str) -> dict[str, str]:
    """``color`` and ``marker`` of a training method (``"GD+RDI"``, ``"SGD+AUX"``, ...) for ``ax.plot``: one
    colour per method family across the book (:data:`FAMILY_COLORS`), its marker beside it."""
    family = method_family(method)
    return {"color": FAMILY_COLORS[family], "marker": FAMILY_MARKERS[family]}


def learning_curves(ax, curves, title: str | None = None, legend: bool = True) -> None:
    """Training (dashed) and test (solid) error in % against the epoch, one colour per method, as in the
    paper's Figures 1b and 5. ``curves`` has columns ``method``, ``epoch``, ``train_error``, ``test_error``."""
    for method, g in curves.groupby("method"):
        style = method_style(str(method))
        every = max(1, len(g) // 8)
        ax.plot(g["epoch"], 100 * g["train_error"], "--", markevery=every, fillstyle="none", **style)
        ax.plot(g["epoch"], 100 * g["test_error"], "-", markevery=every, label=str(method), **style)
    ax.set(xlabel="epoch", ylabel="error (%)")
    if title:
        ax.set_title(title)
    if legend:  # below the axes: off the curves
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)


def weight_panels(curves, layer: int, suptitle: str | None = None):
    """Two panels, as in the paper's Figures 3 and 6–8: ``‖W⁽ˡ⁾‖_F`` (left) and ``‖W⁽ˡ⁾ − W⁽ˡ⁾(0)‖_F`` (right)
    against the epoch, one line per method. ``curves`` has columns ``method``, ``epoch``, ``norm``, ``dist``
    (:func:`ntk_core.experiments.setting2.layer_curves`). Returns the figure."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(MAX_WIDTH, 3.4))  # the text column's width: not shrunk
    for method, g in curves.groupby("method"):
        style = method_style(str(method))
        left.plot(g["epoch"], g["norm"], "-", ms=4, label=str(method), **style)
        right.plot(g["epoch"], g["dist"], "-", ms=4, label=str(method), **style)
    left.set(xlabel="epoch", ylabel=rf"$\|W^{{({layer})}}\|_F$")
    right.set(xlabel="epoch", ylabel=rf"$\|W^{{({layer})}} - W^{{({layer})}}(0)\|_F$")
    fig.legend(*left.get_legend_handles_labels(), loc="lower center", ncol=3, frameon=False)
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout(rect=(0, 0.1, 1, 1))  # the legend below the panels, off the curves
    return fig


def show_table(rows, digits: int = 3, caption: str | None = None, folded: bool = False) -> None:
    """Display a table for a reader: a DataFrame or a list of dicts (one per row), floats rounded to
    ``digits``, a missing value as "–", without the pandas index, under a ``caption`` if given (in a notebook, as
    HTML; elsewhere, as text). A ``folded`` table is shown collapsed, its caption the line that opens it: the
    evidence behind a verdict stated above it, out of the reading flow."""
    from html import escape

    import pandas as pd
    from IPython.display import display

    if folded and not caption:
        raise ValueError("show_table: a folded table needs a caption, the line a reader clicks to open it")
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    cells = [("padding", "0.2em 0.9em"), ("text-align", "right")]
    title = [("text-align", "left"), ("font-weight", "bold"), ("padding", "0.8em 0 0.3em")]
    styled = (
        df.style.hide(axis="index")
        .format(precision=digits, thousands=",", na_rep="–")
        .set_table_styles(
            [
                {"selector": "th", "props": cells},
                {"selector": "td", "props": cells},
                {"selector": "caption", "props": title},
            ]
        )
    )
    if not folded:
        display(styled.set_caption(caption) if caption else styled)
        return
    html = f'<details class="folded-table"><summary>{escape(str(caption))}</summary>{styled.to_html()}</details>'
    text = f"{caption}\n{df.to_string(index=False)}"
    display({"text/html": html, "text/plain": text}, raw=True)
