"""Sphinx extension for this book: its stylesheet, and the script tags that sphinx-thebe adds twice removed.

Every page gets ``book.css`` (from ``book/_static``): output text that wraps, MathJax displays sized to fit
a phone's column.

With Sphinx 7 (pinned by Jupyter Book 1.x), sphinx-thebe 0.3.1 registers its
configuration script on every ``env-before-read-docs`` event, so each page
carries ``const THEBE_JS_URL = ...`` twice and the browser logs
"Identifier 'THEBE_JS_URL' has already been declared". Keeping the first copy
of every identical script tag fixes that without touching anything else.
"""

from __future__ import annotations

from typing import Any


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
    return {"parallel_read_safe": True, "parallel_write_safe": True}
