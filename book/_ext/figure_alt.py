"""Sphinx extension for this book: every figure's image says what it shows to a reader who cannot see it.

A chapter's figure is a ``{glue:figure}`` (an image the notebook made) with a caption; the image itself has no
``alt`` text. Once the page is resolved, each image inside a figure without one gets the figure's caption as its
``alt`` (its first sentence, at most 300 characters), so that a screen reader, a text browser or a failed image
load says what the figure is.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes

MAX_ALT = 300


def alt_text(caption: str) -> str:
    """The first sentence of a caption, whitespace collapsed, cut at :data:`MAX_ALT` characters.

    Examples
    --------
    >>> alt_text("Paper Figure 1b (Setting 2): the curves.  Dashed: training.")
    'Paper Figure 1b (Setting 2): the curves.'
    """
    text = " ".join(caption.split())
    end = text.find(". ")
    first = text if end < 0 else text[: end + 1]
    return first if len(first) <= MAX_ALT else first[: MAX_ALT - 1].rstrip() + "…"


def _add_alt(app: Any, doctree: nodes.document, docname: str) -> None:
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None:
            continue
        for image in figure.findall(nodes.image):
            if not image.get("alt"):
                image["alt"] = alt_text(caption.astext())


def setup(app: Any) -> dict[str, Any]:
    app.connect("doctree-resolved", _add_alt)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
