"""Sphinx extension: the landing page's *Results at a glance*, generated from the chapters' own checks.

Each chapter records its claims with ``ntk_core.report.Ledger`` and saves them, when it is executed during the
build, into the folder named by ``$NTK_BOOK_LEDGER``. This extension points that variable at
``<build>/claims`` before any chapter runs (the kernels inherit the environment), empties it, and replaces the
``{results-at-a-glance}`` directive, once every chapter has been read and executed, by one table row per claim:
the paper's reference, the claim, its status, the number of this build, the paper's own number, and a link to
the section that shows it. A chapter that recorded nothing is named under the table, so a missing ledger
cannot pass unnoticed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

_ENV = "NTK_BOOK_LEDGER"
_STATUS_WORDS = {
    "verified": "verified exactly",
    "vacuous": "holds, but vacuous",
    "quick": "reproduced at quick scale",
    "medium": "reproduced at medium scale",
    "not reproduced": "not reproduced (finding)",
    "inconclusive": "inconclusive at this scale",
    "not run": "not run",
}


class glance_placeholder(nodes.General, nodes.Element):
    """Replaced by the table once all chapters have run."""


class ResultsAtAGlance(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        return [glance_placeholder()]


def _ledger_dir(app: Any) -> Path:
    return Path(app.outdir).parent / "claims"


def _start(app: Any) -> None:
    folder = _ledger_dir(app)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json"):
        old.unlink()
    os.environ[_ENV] = str(folder)


def _chapters_in_order(app: Any) -> list[str]:
    env = app.env
    order: list[str] = []

    def walk(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(app.config.root_doc)
    return order


def _cell(text: str) -> nodes.entry:
    entry = nodes.entry()
    entry += nodes.paragraph(text=text)
    return entry


def _table(app: Any, fromdoc: str) -> list[nodes.Node]:
    from ntk_core.report import load_ledgers

    ledgers = load_ledgers(_ledger_dir(app))
    labels = app.env.get_domain("std").labels
    docs = {Path(d).name: d for d in _chapters_in_order(app)}
    columns = ["Paper", "Claim", "Status", "This build", "Paper's number", "Where"]
    table = nodes.table(classes=["glance-table"])
    group = nodes.tgroup(cols=len(columns))
    table += group
    for width in (10, 34, 12, 22, 14, 8):
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    row = nodes.row()
    for name in columns:
        row += _cell(name)
    head += row
    group += head
    body = nodes.tbody()
    group += body
    ordered = [c for c in docs if c in ledgers] + sorted(set(ledgers) - set(docs))
    for chapter in ordered:
        for claim in ledgers[chapter]:
            row = nodes.row()
            for text in (claim.ref, claim.statement, _STATUS_WORDS.get(claim.status, claim.status), claim.value,
                         claim.paper or "—"):
                row += _cell(text)
            where = nodes.entry()
            para = nodes.paragraph()
            target = labels.get(claim.anchor) if claim.anchor else None
            if target is not None:
                uri = app.builder.get_relative_uri(fromdoc, target[0]) + "#" + target[1]
                para += nodes.reference("", target[2] or "section", refuri=uri, internal=True)
            elif chapter in docs:
                para += nodes.reference("", chapter, refuri=app.builder.get_relative_uri(fromdoc, docs[chapter]),
                                        internal=True)
            else:
                para += nodes.Text(chapter)
            where += para
            row += where
            body += row
    out: list[nodes.Node] = [table]
    silent = [d for d in docs.values()
              if d != fromdoc and Path(d).name not in ledgers and _has_code(app, d)]
    if silent:
        out.append(nodes.paragraph(text="No claims were recorded by: " + ", ".join(sorted(silent)) + "."))
    return out


def _has_code(app: Any, docname: str) -> bool:
    """Whether a page is an executed chapter (a MyST notebook with code cells), so that it should record claims."""
    try:
        return "{code-cell}" in Path(app.env.doc2path(docname)).read_text(encoding="utf-8")
    except OSError:
        return False


def _add_static(app: Any, config: Any) -> None:
    config.html_static_path.append(str(Path(__file__).with_name("glance_static")))


def _resolve(app: Any, doctree: nodes.document, docname: str) -> None:
    for node in list(doctree.findall(glance_placeholder)):
        node.replace_self(_table(app, docname))


def setup(app: Any) -> dict[str, Any]:
    app.add_node(glance_placeholder)
    app.add_directive("results-at-a-glance", ResultsAtAGlance)
    app.connect("config-inited", _add_static)
    app.add_css_file("glance.css")
    app.connect("builder-inited", _start)
    app.connect("doctree-resolved", _resolve)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
