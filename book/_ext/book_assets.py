"""Sphinx extension for this book: its stylesheet, the paper's exhibits without book numbers, and the script tags
that sphinx-thebe adds twice removed.

Every page gets ``book.css`` (from ``book/_static``): output text that wraps, MathJax displays sized to fit
a phone's column.

A figure of class ``paper-exhibit`` (``:figclass: paper-exhibit``: one of the paper's Figures 1a-8, whose
caption names its paper number) gets no "Book fig." number: Sphinx numbers every captioned figure that has an
id, and gives one to each (``AutoNumbering``), so the ids of these figures are taken away right after.

With Sphinx 7 (pinned by Jupyter Book 1.x), sphinx-thebe 0.3.1 registers its
configuration script on every ``env-before-read-docs`` event, so each page
carries ``const THEBE_JS_URL = ...`` twice and the browser logs
"Identifier 'THEBE_JS_URL' has already been declared". Keeping the first copy
of every identical script tag fixes that without touching anything else.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.transforms import SphinxTransform


class UnnumberedPaperExhibits(SphinxTransform):
    """Take the ids of ``paper-exhibit`` figures away after ``AutoNumbering`` (priority 210) gave them one."""

    default_priority = 211

    def apply(self, **kwargs: Any) -> None:
        for figure in self.document.findall(nodes.figure):
            if "paper-exhibit" in figure["classes"]:
                for node_id in figure["ids"]:
                    self.document.ids.pop(node_id, None)
                figure["ids"] = []


def _script_key(js: Any) -> tuple[str, str]:
    attributes = getattr(js, "attributes", {}) or {}
    return (getattr(js, "filename", str(js)) or "", str(attributes.get("body", "")))


def drop_duplicate_scripts(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple[str, str]] = set()
    unique = []
    for js in scripts:
        key = _script_key(js)
        if key in seen:
            continue
        seen.add(key)
        unique.append(js)
    context["script_files"] = unique


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    app.add_css_file("book.css")
    app.add_transform(UnnumberedPaperExhibits)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
