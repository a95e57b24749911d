"""ntk_core.profile (quick/medium/full, run facts) and ntk_core.plots (figure helpers)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from ntk_core import plots
from ntk_core.profile import RunInfo, book_profile, default_device


def test_book_profile_reads_the_environment(monkeypatch):
    monkeypatch.delenv("NTK_BOOK_PROFILE", raising=False)
    assert book_profile() == "quick"
    monkeypatch.setenv("NTK_BOOK_PROFILE", "full")
    assert book_profile() == "full"
    monkeypatch.setenv("NTK_BOOK_PROFILE", "medium")
    assert book_profile() == "medium"
    assert book_profile("quick") == "quick"
    monkeypatch.setenv("NTK_BOOK_PROFILE", "fast")
    with pytest.raises(ValueError, match="NTK_BOOK_PROFILE"):
        book_profile()


def test_run_info_summary(monkeypatch):
    monkeypatch.setenv("NTK_BOOK_PROFILE", "quick")
    run = RunInfo()
    run.add_data("MNIST train: 60,000 images")
    text = run.summary()
    assert "profile: quick" in text and f"device: {default_device()}" in text
    assert "data: MNIST train: 60,000 images" in text and "wall time:" in text
    assert run.wall_time() >= 0


def test_image_grid_shows_grey_and_rgb_images():
    grey = np.zeros((5, 28, 28), dtype=np.uint8)
    fig = plots.image_grid(grey, [str(i) for i in range(5)], ncols=3)
    assert len(fig.axes) == 6 and fig.axes[0].get_title() == "0"
    rgb = np.zeros((2, 3, 32, 32), dtype=np.uint8)
    fig = plots.image_grid(rgb, ["a", "b"], ncols=2, suptitle="x")
    assert fig.axes[0].images[0].get_array().shape == (32, 32, 3)  # channels moved last for imshow
    with pytest.raises(ValueError, match="titles"):
        plots.image_grid(grey, ["a"])
    with pytest.raises(ValueError, match="shape"):
        plots.image_grid(np.zeros((2, 2)), ["a", "b"])
