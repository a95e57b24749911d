"""Sphinx extension: the landing page's *Results at a glance*, generated from the chapters' own checks.

Each chapter records its claims with ``ntk_core.bookkit.ledger.Ledger`` and saves them, when it is executed during the
build, into the folder named by ``$NTK_BOOK_LEDGER``. This extension points that variable at
``<build>/claims`` before any chapter runs (the kernels inherit the environment), empties it, and replaces the
``{results-at-a-glance}`` directive, once every chapter has been read and executed, by the claims grouped by
chapter: a line with the number of claims of each status over the whole book, then one collapsed
``<details>`` per chapter whose summary counts its claims by status and whose table has one row per claim
(the paper's reference, linked to the section that shows it; the claim; its status as a short badge; the
number of this build; the paper's own number), then a legend of the badges. A chapter that recorded nothing
is named under the table, so a missing ledger cannot pass unnoticed.
"""

from __future__ import annotations


import os
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from ntk_core.bookkit.ledger import STATUS_BADGES, is_exhibit, paper_order

_ENV = "NTK_BOOK_LEDGER"
#: status -> (short badge, its meaning in the legend): shared with the chapters' Checks lists
_STATUS_WORDS = STATUS_BADGES
_COLUMNS = ["Paper", "Claim", "Status", "This build", "Paper's number"]


class glance_placeholder(nodes.General, nodes.Element):
    """Replaced by the table once all chapters have run."""


class glance_group(nodes.General, nodes.Element):
    """One chapter's claims: an HTML ``<details>`` (collapsed) holding its table."""


class glance_summary(nodes.General, nodes.TextElement):
    """The one-line summary of a chapter's claims: the ``<summary>`` of its :class:`glance_group`."""


def _visit_group(self: Any, node: glance_group) -> None:
    self.body.append(f'<details class="glance-group" id="glance-{node["chapter"]}">')


def _depart_group(self: Any, node: glance_group) -> None:
    self.body.append("</details>\n")


def _visit_summary(self: Any, node: glance_summary) -> None:
    self.body.append('<summary class="glance-summary">')


def _depart_summary(self: Any, node: glance_summary) -> None:
    self.body.append("</summary>\n")


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


def _cell(content: str | nodes.Node) -> nodes.entry:
    entry = nodes.entry()
    para = nodes.paragraph()
    para += nodes.Text(content) if isinstance(content, str) else content
    entry += para
    return entry


def _badge(status: str) -> nodes.inline:
    short = _STATUS_WORDS.get(status, (status, status))[0]
    return nodes.inline(text=short, classes=["glance-badge", "glance-" + status.replace(" ", "-")])


def _counts(claims: list[Any]) -> list[nodes.Node]:
    """Badges with the number of claims of each status, in the order of the legend."""
    out: list[nodes.Node] = []
    for status in list(_STATUS_WORDS) + sorted({c.status for c in claims} - set(_STATUS_WORDS)):
        n = sum(c.status == status for c in claims)
        if n:
            badge = _badge(status)
            badge.insert(0, nodes.Text(f"{n} "))
            out += [badge, nodes.Text(" ")]
    return out


def _empty_table(classes: list[str], columns: list[str], widths: tuple[int, ...]) -> tuple[nodes.table, nodes.tbody]:
    """A table with its header row, and its (empty) body to fill."""
    table = nodes.table(classes=classes)
    group = nodes.tgroup(cols=len(columns))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    row = nodes.row()
    for name in columns:
        row += _cell(name)
    head += row
    group += head
    body = nodes.tbody()
    group += body
    return table, body


def _chapter_table(app: Any, fromdoc: str, chapter: str, docs: dict[str, str], claims: list[Any]) -> nodes.table:
    labels = app.env.get_domain("std").labels
    table, body = _empty_table(["glance-table"], _COLUMNS, (12, 38, 12, 23, 15))
    for claim in claims:
        row = nodes.row()
        # the paper's reference links to the section of the book that shows the claim
        target = labels.get(claim.anchor) if claim.anchor else None
        if target is not None:
            uri = app.builder.get_relative_uri(fromdoc, target[0]) + "#" + target[1]
            ref = nodes.reference("", claim.ref, refuri=uri, internal=True, reftitle=target[2] or "")
        elif chapter in docs:
            ref = nodes.reference(
                "", claim.ref, refuri=app.builder.get_relative_uri(fromdoc, docs[chapter]), internal=True
            )
        else:
            ref = nodes.Text(claim.ref)
        row += _cell(ref)
        row += _cell(claim.statement)
        row += _cell(_badge(claim.status))
        row += _cell(claim.value)
        row += _cell(claim.paper or "—")
        body += row
    return table


def _exhibits_table(app: Any, fromdoc: str, claims: list[Any]) -> nodes.table:
    """One row per exhibit of the paper, in the paper's order (figures, then tables): the live build's verdicts,
    the recorded medium run's, and the paper's own number."""
    labels = app.env.get_domain("std").labels
    refs = sorted({c.ref for c in claims if is_exhibit(c.ref)}, key=paper_order)
    columns = ["Paper", "This build (live)", "Medium record", "Paper's number"]
    table, body = _empty_table(["glance-table", "glance-exhibits"], columns, (14, 30, 30, 26))
    for ref in refs:
        mine = [c for c in claims if c.ref == ref]
        medium = [c for c in mine if c.scale == "medium" or c.status == "medium"]
        live = [c for c in mine if c not in medium]
        first = next((c for c in mine if c.anchor and labels.get(c.anchor)), None)
        row = nodes.row()
        if first is not None:
            target = labels[first.anchor]
            uri = app.builder.get_relative_uri(fromdoc, target[0]) + "#" + target[1]
            row += _cell(nodes.reference("", ref, refuri=uri, internal=True))
        else:
            row += _cell(ref)
        for group_claims in (live, medium):
            para = nodes.inline()
            for node in _counts(group_claims) or [nodes.Text("—")]:
                para += node
            row += _cell(para)
        row += _cell(next((c.paper for c in mine if c.paper), "—"))
        body += row
    return table


def _table(app: Any, fromdoc: str) -> list[nodes.Node]:
    from ntk_core.bookkit.ledger import load_ledgers

    ledgers = load_ledgers(_ledger_dir(app))
    docs = {Path(d).name: d for d in _chapters_in_order(app)}
    ordered = [c for c in docs if c in ledgers] + sorted(set(ledgers) - set(docs))
    everything = [c for chapter in ordered for c in ledgers[chapter]]
    total = nodes.paragraph(classes=["glance-total"])
    total += nodes.strong(
        text=f"{len(everything)} claim{'s' if len(everything) != 1 else ''} checked in "
        f"{len(ordered)} chapter{'s' if len(ordered) != 1 else ''}: "
    )
    total += _counts(everything)
    exhibits = [c for c in everything if is_exhibit(c.ref)]
    lead = nodes.paragraph(classes=["glance-lead"])
    lead += nodes.strong(text="The paper's experiments")
    lead += nodes.Text(
        f" ({len(exhibits)} claims): per figure and table, the verdicts of this build's live run and of the "
        "recorded medium run (results/medium/), beside the paper's own number."
    )
    theory = [c for c in everything if not is_exhibit(c.ref)]
    rest = nodes.paragraph(classes=["glance-theory"])
    rest += nodes.strong(text="The theory and its proofs")
    rest += nodes.Text(f" (theorems, lemmas, remarks, sections; {len(theory)} claims): ")
    rest += _counts(theory)
    out: list[nodes.Node] = [lead, _exhibits_table(app, fromdoc, everything), rest, total]
    for chapter in ordered:
        claims = ledgers[chapter]
        details = glance_group(chapter=chapter)
        summary = glance_summary()
        title = app.env.titles.get(docs[chapter]).astext() if chapter in docs else chapter
        summary += nodes.inline(text=title, classes=["glance-chapter"])
        summary += nodes.inline(text=f" — {len(claims)} claim{'s' if len(claims) != 1 else ''}: ", classes=["glance-n"])
        summary += _counts(claims)
        details += summary
        details += _chapter_table(app, fromdoc, chapter, docs, claims)
        if chapter in docs:
            para = nodes.paragraph(classes=["glance-more"])
            para += nodes.Text("In the chapter: ")
            para += nodes.reference(
                "", title, refuri=app.builder.get_relative_uri(fromdoc, docs[chapter]), internal=True
            )
            para += nodes.Text(" (its “Checks” list at the end).")
            details += para
        out.append(details)
    legend = nodes.paragraph(classes=["glance-legend"])
    legend += nodes.Text("Status: ")
    for i, (status, (_, meaning)) in enumerate(_STATUS_WORDS.items()):
        if i:
            legend += nodes.Text("; ")
        legend += _badge(status)
        legend += nodes.Text(f" {meaning}")
    legend += nodes.Text(
        ". Click a chapter to open its claims; the paper's reference links to the section that shows the check."
    )
    out.append(legend)
    silent = [d for d in docs.values() if d != fromdoc and Path(d).name not in ledgers and _has_code(app, d)]
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
    app.add_node(glance_group, html=(_visit_group, _depart_group))
    app.add_node(glance_summary, html=(_visit_summary, _depart_summary))
    app.add_directive("results-at-a-glance", ResultsAtAGlance)
    app.connect("config-inited", _add_static)
    app.add_css_file("glance.css")
    app.connect("builder-inited", _start)
    app.connect("doctree-resolved", _resolve)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
