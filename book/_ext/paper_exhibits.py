"""Sphinx extension for this book: the paper's exhibits carry the paper's number only.

The book numbers its own figures "Book fig. N" (``numfig_format`` in ``_config.yml``). A figure whose caption
starts with "Paper Figure" or "Paper Table" (the paper's Figures 1a–8 and Table 2, drawn by the chapters) keeps the paper's number in its
caption and gets no book number: after Sphinx has numbered the figures (its toctree collector, on
``env-get-updated``), these figures are taken out of the numbering and the book's own figures are numbered
again without gaps. A figure without a number is written without one, and without a warning, by Sphinx's
HTML writer.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes

#: the caption prefixes of a paper exhibit
PREFIXES = ("Paper Figure", "Paper Table")


def _is_exhibit(figure: nodes.figure) -> bool:
    caption = next(iter(figure.findall(nodes.caption)), None)
    return caption is not None and caption.astext().startswith(PREFIXES)


def unnumber_exhibits(app: Any, env: Any) -> list[str]:
    """Take the paper's exhibits out of ``env.toc_fignumbers`` and renumber the book's own figures in order."""
    numbered = {doc: kinds["figure"] for doc, kinds in env.toc_fignumbers.items() if kinds.get("figure")}
    for docname, figures in numbered.items():
        for figure in env.get_doctree(docname).findall(nodes.figure):
            if figure["ids"] and _is_exhibit(figure):
                figures.pop(figure["ids"][0], None)
    counters: dict[tuple[int, ...], int] = {}
    entries = sorted((number, doc, fid) for doc, figures in numbered.items() for fid, number in figures.items())
    for number, docname, figure_id in entries:
        section = tuple(number[:-1])
        counters[section] = counters.get(section, 0) + 1
        numbered[docname][figure_id] = (*section, counters[section])
    return []


def setup(app: Any) -> dict[str, Any]:
    app.connect("env-get-updated", unnumber_exhibits, priority=900)  # after the toctree collector (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
