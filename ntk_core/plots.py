"""The book's figure style and small plotting helpers (matplotlib / seaborn)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["set_style", "image_grid"]


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
