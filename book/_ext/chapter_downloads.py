"""Sphinx extension for this book: each chapter offers its source for download, from the site itself.

For every page built from a notebook (a MyST Markdown chapter with a kernel), the HTML output gets
two files beside the page, ``<chapter>.md`` (the source, as in ``book/``) and ``<chapter>.ipynb``
(the notebook as executed for this build, with its outputs; myst-nb writes it to
``_build/jupyter_execute/``), and the page gets a line of links to them under its title.
Everything is local: no request leaves the built site (the theme's own download button, which
adds external links, stays disabled in ``_config.yml``).
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path
from typing import Any

from sphinx.util import logging

logger = logging.getLogger(__name__)

_STYLE = "margin: 0.2rem 0 1.2rem; font-size: 0.9rem; color: var(--pst-color-text-muted, #555);"


def _executed_notebook(app: Any, docname: str) -> Path:
    config = getattr(app.env, "mystnb_config", None)
    folder = Path(getattr(config, "output_folder", "") or Path(app.outdir).parent / "jupyter_execute")
    return folder.joinpath(*(docname + ".ipynb").split("/"))


def _links(pagename: str) -> str:
    stem = html.escape(pagename.rsplit("/", 1)[-1])
    return (
        f'<p class="chapter-downloads" style="{_STYLE}">Download this chapter: '
        f'<a class="reference download" href="{stem}.md" download>{stem}.md</a> (MyST Markdown; '
        f"opens as a notebook with jupytext, e.g. <code>make lab</code>) &middot; "
        f'<a class="reference download" href="{stem}.ipynb" download>{stem}.ipynb</a> '
        f"(executed notebook, with the outputs shown here)</p>"
    )


def add_downloads(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if doctree is None or app.builder.format != "html":
        return
    source = Path(app.env.doc2path(pagename))
    notebook = _executed_notebook(app, pagename)
    if source.suffix != ".md" or not notebook.is_file():
        return  # not a notebook chapter (plain Markdown pages have no kernel and no .ipynb)
    target = Path(app.outdir).joinpath(*pagename.split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target.with_suffix(".md"))
    shutil.copyfile(notebook, target.with_suffix(".ipynb"))
    body = context.get("body", "")
    links = _links(pagename)
    head, sep, rest = body.partition("</h1>")
    context["body"] = head + sep + links + rest if sep else links + body


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", add_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
