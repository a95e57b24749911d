"""The book's figure style and small plotting helpers (matplotlib / seaborn)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["set_style", "image_grid", "learning_curves", "weight_panels", "show_table", "METHOD_COLORS"]


def set_style() -> None:
    """One look for every figure of the book: seaborn's whitegrid, readable sizes, PNG at 110 dpi."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    mpl.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "figure.autolayout": True})


def image_grid(images: np.ndarray, titles: Sequence[str], ncols: int = 8, scale: float = 1.3,
               suptitle: str | None = None):
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


#: one colour per method across the experiment figures (seaborn's colorblind palette order)
METHOD_COLORS = {"SGD": "C0", "SGD+AUX": "C1", "SGD+RDI": "C2", "GD": "C0", "GD+AUX": "C1", "GD+RDI": "C2",
                 "GD+ES": "C3", "SGD+ES": "C3", "KRR": "C4"}


def learning_curves(ax, curves, title: str | None = None, legend: bool = True) -> None:
    """Training (dashed) and test (solid) error in % against the epoch, one colour per method, as in the
    paper's Figures 1b and 5. ``curves`` has columns ``method``, ``epoch``, ``train_error``, ``test_error``."""
    for method, g in curves.groupby("method"):
        color = METHOD_COLORS.get(str(method))
        ax.plot(g["epoch"], 100 * g["train_error"], "--", color=color)
        ax.plot(g["epoch"], 100 * g["test_error"], "-", color=color, label=str(method))
    ax.set(xlabel="epoch", ylabel="error (%)")
    if title:
        ax.set_title(title)
    if legend:
        ax.legend()


def weight_panels(curves, layer: int, suptitle: str | None = None):
    """Two panels, as in the paper's Figures 3 and 6–8: ``‖W⁽ˡ⁾‖_F`` (left) and ``‖W⁽ˡ⁾ − W⁽ˡ⁾(0)‖_F`` (right)
    against the epoch, one line per method. ``curves`` has columns ``method``, ``epoch``, ``norm``, ``dist``
    (:func:`ntk_core.experiments.setting2.layer_curves`). Returns the figure."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for method, g in curves.groupby("method"):
        color = METHOD_COLORS.get(str(method))
        left.plot(g["epoch"], g["norm"], "-o", ms=3, color=color, label=str(method))
        right.plot(g["epoch"], g["dist"], "-o", ms=3, color=color, label=str(method))
    left.set(xlabel="epoch", ylabel=rf"$\|W^{{({layer})}}\|_F$")
    right.set(xlabel="epoch", ylabel=rf"$\|W^{{({layer})}} - W^{{({layer})}}(0)\|_F$")
    right.legend()
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def show_table(rows, digits: int = 3) -> None:
    """Display a table for a reader: a DataFrame or a list of dicts (one per row), floats rounded to
    ``digits``, without the pandas index (in a notebook, as HTML; elsewhere, as text)."""
    import pandas as pd
    from IPython.display import display

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    cells = [("padding", "0.2em 0.9em"), ("text-align", "right")]
    display(df.style.hide(axis="index").format(precision=digits, thousands=",")
            .set_table_styles([{"selector": "th", "props": cells}, {"selector": "td", "props": cells}]))
