"""ntk_core.experiments.profile (quick/medium/full, run facts) and ntk_core.bookkit.plots (figure helpers)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from ntk_core.experiments.profile import RunInfo, book_profile, default_device
from ntk_core.bookkit import plots


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


def test_book_threads_and_workers_come_from_the_environment(monkeypatch):
    """A chapter runs torch on one thread unless told otherwise (no thrashing on a busy machine) and uses the
    cores through worker processes; bad values are refused with the variable's name."""
    import torch

    from ntk_core.experiments.profile import book_threads, book_workers

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("NTK_BOOK_THREADS", raising=False)
        monkeypatch.delenv("NTK_BOOK_WORKERS", raising=False)
        assert book_threads() == 1 and 1 <= book_workers() <= 2
        from threadpoolctl import threadpool_info

        RunInfo()
        blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert torch.get_num_threads() == 1 and blas and all(p["num_threads"] == 1 for p in blas)
        monkeypatch.setenv("NTK_BOOK_THREADS", "2")
        monkeypatch.setenv("NTK_BOOK_WORKERS", "3")
        run = RunInfo()
        assert (run.threads, run.workers) == (2, 3) and torch.get_num_threads() == 2
        blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 2 for p in blas)  # numpy's BLAS follows
        assert "2 torch thread(s) per process, 3 worker process(es)" in run.summary()
        for bad in ("0", "two", "-1"):
            monkeypatch.setenv("NTK_BOOK_WORKERS", bad)
            with pytest.raises(ValueError, match="NTK_BOOK_WORKERS must be a positive whole number"):
                book_workers()
    finally:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(before)
        threadpool_limits(before)


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


def test_style_is_colour_blind_safe_and_readable():
    import matplotlib as mpl

    plots.set_style()
    cycle = [c.lower() for c in mpl.rcParams["axes.prop_cycle"].by_key()["color"]]
    assert cycle[:5] == [
        plots.OKABE_ITO[k].lower() for k in ("blue", "orange", "bluish green", "reddish purple", "sky blue")
    ]
    assert plots.OKABE_ITO["vermilion"].lower() not in cycle  # never orange and vermilion in one figure
    sizes = [mpl.rcParams[k] for k in ("font.size", "axes.labelsize", "legend.fontsize", "xtick.labelsize")]
    assert min(float(s) for s in sizes) >= 9
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(plots.MAX_WIDTH, 4))
    assert plots.displayed_font_scale(fig) == 1.0  # shown at its own size in the text column
    assert plots.displayed_font_scale(plt.figure(figsize=(12, 4))) < 0.55
    plt.close("all")


def test_one_colour_per_method_across_the_book():
    for opt in ("GD", "SGD"):
        rdi, aux, plain = plots.method_style(f"{opt}+RDI"), plots.method_style(f"{opt}+AUX"), plots.method_style(opt)
        es = plots.method_style(f"{opt}+ES")
        assert len({rdi["color"], aux["color"], plain["color"], es["color"]}) == 4  # RDI and AUX told apart
        assert len({rdi["marker"], aux["marker"], plain["marker"], es["marker"]}) == 4
        # the same method has the same colour whatever its setting or label
        assert rdi["color"] == plots.method_color("RDI") == plots.method_style(f"{opt}+RDI (λ = 4)")["color"]
    assert plots.method_color("CCE+AUX") == plots.method_color("SGD+AUX") == plots.method_color("AUX")
    assert plots.method_color("Normal CCE") == plots.method_color("vanilla") == plots.method_color("SGD")


def test_a_short_log_axis_gets_two_tick_labels():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([2.0, 3.0, 6.0], [0.2, 0.3, 0.25])
    ax.set(xscale="log", yscale="log")
    fig.canvas.draw()
    plots.readable_log_axes(fig)
    fig.canvas.draw()
    for axis in (ax.xaxis, ax.yaxis):
        low, high = sorted(axis.get_view_interval())
        labels = [
            t.get_text()
            for t in axis.get_ticklabels()
            if t.get_text() and low <= t.get_position()[0 if axis is ax.xaxis else 1] <= high
        ]
        assert len(labels) >= 2, labels
    plt.close(fig)


def test_glue_figure_hands_the_figure_over_and_closes_it(monkeypatch):
    import warnings

    import matplotlib
    import matplotlib.pyplot as plt
    import myst_nb
    from IPython.core.pylabtools import print_figure

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.update({name: (value, display)}))
    fig, ax = plt.subplots()
    plots.glue_figure("fig_x", fig)
    assert glued["fig_x"] == (fig, False) and not plt.fignum_exists(fig.number)
    with matplotlib.rc_context():
        plots.set_style()  # as in a chapter: its tight layout applies to the placeholder
        plots.glue_placeholder("fig_y", "not computed: no CIFAR-10")
        placeholder, display = glued["fig_y"]
        assert not display
        assert [t.get_text() for a in placeholder.axes for t in a.texts] == ["not computed: no CIFAR-10"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning would be printed on the page
            # an image (IPython draws none of a figure without axes: the page showed the figure's repr)
            assert print_figure(placeholder, "png", bbox_inches="tight")


def test_no_figure_text_below_the_browser_checks_floor():
    """The browser test assumes no figure text under MIN_FIGURE_PT (it computes the shown size of the smallest
    text from it): the style's sizes and every explicit text size (``fontsize=``, ``labelsize=``, ``"size":``) of the chapters and the book kit."""
    import re
    from pathlib import Path

    import matplotlib as mpl

    from browser import MIN_FIGURE_PT

    plots.set_style()
    keys = ["font.size", "axes.labelsize", "axes.titlesize", "xtick.labelsize", "ytick.labelsize", "legend.fontsize"]
    assert min(float(mpl.rcParams[k]) for k in keys) >= MIN_FIGURE_PT
    repo = Path(__file__).resolve().parents[1]
    sources = [*repo.glob("book/*.md"), *(repo / "ntk_core" / "bookkit").rglob("*.py")]
    found = {
        f"{path.name}: text size {size}"
        for path in sources
        for size in re.findall(
            r"(?:fontsize=|labelsize=|\"size\": *)([0-9.]+|\"[a-z-]+\")", path.read_text(encoding="utf-8")
        )
        if size.startswith('"') or float(size) < MIN_FIGURE_PT
    }
    assert not found, found


def test_a_folded_table_opens_from_its_caption(monkeypatch):
    """show_table(folded=True): the table inside a collapsed <details> whose summary is the (escaped) caption,
    with a plain-text view; a folded table without a caption is refused (nothing to click)."""
    import IPython.display
    import pandas as pd

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append(obj))
    plots.show_table(
        pd.DataFrame({"λ": [0.5, 1.0], "test error": [0.1234, 0.2]}), caption="Medium <record>", folded=True
    )
    html = shown[-1]["text/html"]
    assert (
        html.startswith('<details class="folded-table"><summary>Medium &lt;record&gt;</summary>') and "<table" in html
    )
    assert " open" not in html.split(">", 1)[0] and html.endswith("</details>")
    assert "0.123" in html and "0.1234" not in html
    assert shown[-1]["text/plain"].startswith("Medium <record>\n")
    plots.show_table(pd.DataFrame({"a": [1]}), caption="shown")
    assert not isinstance(shown[-1], dict)  # not folded: the styled table itself
    with pytest.raises(ValueError, match="needs a caption"):
        plots.show_table(pd.DataFrame({"a": [1]}), folded=True)
