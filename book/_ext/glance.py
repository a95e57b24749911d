"""Sphinx extension: the landing page's *Results at a glance* and each chapter's results, generated from the
chapters' own checks.

Each chapter records its claims (and a headline per exhibit: the number measured, the scale, how sure) with
``ntk_core.bookkit.ledger.Ledger`` and saves them, when it is executed during the build, into the folder named by
``$NTK_BOOK_LEDGER``. This extension points that variable at ``<build>/claims`` before any chapter runs (the
kernels inherit the environment) and empties it. Once every chapter has been read and executed it replaces:

``{results-at-a-glance}``
    by the legend of the verdicts, then one row per exhibit and statement of the paper
    (:data:`ntk_core.bookkit.verdicts.PAPER`): its claim, one verdict (:func:`ntk_core.bookkit.verdicts.verdict`)
    with the scale it was judged at, the number measured beside the paper's, the sizes and how sure; then every
    check, one collapsed ``<details>`` per chapter (a chapter that recorded nothing is named, so a missing
    ledger cannot pass unnoticed);
``{chapter-results}``
    (a chapter's head) by the same rows for the exhibits and statements the chapter checks;
``{verdict} Figure 1a``
    (an exhibit's section head) by that exhibit's verdict box.

The verdicts are judged over the whole book's claims, so a chapter's box and the glance cannot disagree.
"""

from __future__ import annotations


import os
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from ntk_core.bookkit.ledger import STATUS_BADGES

_ENV = "NTK_BOOK_LEDGER"
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
    short = STATUS_BADGES.get(status, (status, status))[0]
    return nodes.inline(text=short, classes=["glance-badge", "glance-" + status.replace(" ", "-")])


def _counts(claims: list[Any]) -> list[nodes.Node]:
    """Badges with the number of claims that show each, in the order of the legend."""
    from ntk_core.bookkit.ledger import badge_counts

    out: list[nodes.Node] = []
    for status, n in badge_counts(claims):
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


def _link(app: Any, fromdoc: str, text: str, anchor: str) -> nodes.Node:
    """``text`` linked to the section labelled ``anchor`` (plain text when there is no such label)."""
    target = app.env.get_domain("std").labels.get(anchor) if anchor else None
    if target is None:
        return nodes.Text(text)
    uri = app.builder.get_relative_uri(fromdoc, target[0]) + "#" + target[1]
    return nodes.reference("", text, refuri=uri, internal=True)


def _verdict_badge(word: str) -> nodes.inline:
    return nodes.inline(text=word, classes=["glance-badge", "verdict-" + word.replace(" ", "-")])


def _row_facts(ref: str, claims: list[Any], headlines: list[Any]) -> dict[str, Any]:
    """What one row says about ``ref``: its verdict (:func:`ntk_core.bookkit.verdicts.verdict`), the headline at
    the verdict's scale (else any, else the first counted claim's value) and the paper's side."""
    from ntk_core.bookkit.verdicts import PAPER, verdict

    mine = [c for c in claims if c.ref == ref]
    v = verdict(mine)
    level = "medium" if v.scale == "medium" else ""
    heads = [h for h in headlines if h.ref == ref]
    head = next((h for h in heads if h.level == level), heads[0] if heads else None)
    lead = v.counted[0] if v.counted else (mine[0] if mine else None)
    # the section that shows the verdict: the headline's, else the first counted claim's
    anchor = (head.anchor if head and head.anchor else "") or (lead.anchor if lead else "")
    return {
        "verdict": v,
        "paper": PAPER[ref],
        "measured": head.measured if head else (lead.value if lead else "—"),
        "scale": head.scale if head else "",
        "sure": head.sure if head else "",
        "anchor": anchor,
    }


def _scale_words(scale: str) -> str:
    return {"medium": "on the medium record", "quick": "at the quick scale (live)", "exact": "exact, any scale"}[scale]


def _verdict_cell(facts: dict[str, Any]) -> nodes.inline:
    v = facts["verdict"]
    cell = nodes.inline()
    cell += _verdict_badge(v.word)
    n = len([c for c in v.counted if c.status != "not run"])
    counted = f"; {v.held} of {n} claims hold" if n > 1 and v.word not in ("verified", "holds") else ""
    cell += nodes.Text(f" {_scale_words(v.scale)}{counted}")
    if v.reasons and v.word != "not run":
        cell += nodes.inline(text=" — " + "; ".join(v.reasons), classes=["glance-why"])
    return cell


def _measured(facts: dict[str, Any]) -> nodes.inline:
    """The number measured beside the paper's, as the glance and a chapter's results show it."""
    measured = nodes.inline()
    measured += nodes.Text(facts["measured"])
    measured += nodes.inline(text=f" · paper: {facts['paper'].number}", classes=["glance-paper"])
    return measured


def _verdicts_table(app: Any, fromdoc: str, refs: list[str], claims: list[Any], headlines: list[Any]) -> nodes.table:
    """One row per exhibit and statement of the paper: its claim, one verdict with the scale it was judged at,
    the number measured beside the paper's, the sizes beside the paper's and how sure."""
    columns = ["Paper", "Paper's claim", "Verdict", "Measured · paper", "Scale · how sure"]
    table, body = _empty_table(["glance-table", "glance-verdicts"], columns, (10, 28, 20, 22, 20))
    for ref in refs:
        facts = _row_facts(ref, claims, headlines)
        v, paper = facts["verdict"], facts["paper"]
        row = nodes.row()
        row += _cell(_link(app, fromdoc, ref, facts["anchor"]))
        row += _cell(paper.claim)
        row += _cell(_verdict_cell(facts))
        row += _cell(_measured(facts))
        scale = nodes.inline()
        scale += nodes.Text(facts["scale"] or _scale_words(v.scale))
        scale += nodes.inline(text=f" (paper: {paper.scale})", classes=["glance-paper"])
        if facts["sure"]:
            scale += nodes.Text(f"; {facts['sure']}")
        if v.others:
            scale += nodes.inline(text=f". Other scale — {v.others}", classes=["glance-other"])
        row += _cell(scale)
        body += row
    return table


def _verdicts_list(app: Any, fromdoc: str, refs: list[str], claims: list[Any], headlines: list[Any]) -> nodes.Node:
    """A chapter's results: one line per exhibit and statement it checks — the verdict with its scale, the
    number measured beside the paper's, the other scale's verdict. The paper's claim in full, the sizes and how
    sure are in the section's own box (:func:`_verdict_box`) and on the glance."""
    items = nodes.bullet_list(classes=["chapter-verdicts"])
    for ref in refs:
        facts = _row_facts(ref, claims, headlines)
        v = facts["verdict"]
        line = nodes.paragraph()
        line += nodes.strong("", "", _link(app, fromdoc, ref, facts["anchor"]))
        line += nodes.Text(": ")
        line += _verdict_cell(facts)
        line += nodes.Text(". Measured: ")
        line += _measured(facts)
        line += nodes.Text(".")
        if v.others:
            line += nodes.inline(text=f" Other scale — {v.others}.", classes=["glance-other"])
        items += nodes.list_item("", line)
    return items


def _verdict_box(app: Any, fromdoc: str, ref: str, claims: list[Any], headlines: list[Any]) -> nodes.Node:
    """The box under an exhibit's heading: its verdict, the number beside the paper's, the scale, how sure and,
    short of "holds", which claims fall short."""
    facts = _row_facts(ref, claims, headlines)
    v, paper = facts["verdict"], facts["paper"]
    box = nodes.container(classes=["verdict-box"])
    head = nodes.paragraph(classes=["verdict-head"])
    head += nodes.strong(text=f"{ref}: ")
    head += _verdict_cell(facts)
    box += head
    para = nodes.paragraph()
    para += nodes.strong(text="Paper: ")
    para += nodes.Text(f"{paper.claim} ({paper.number}; {paper.scale}). ")
    para += nodes.strong(text="Measured: ")
    para += nodes.Text(facts["measured"])
    if facts["scale"]:
        para += nodes.Text(f" ({facts['scale']})")
    para += nodes.Text(". ")
    if facts["sure"]:
        para += nodes.strong(text="How sure: ")
        para += nodes.Text(facts["sure"] + ". ")
    if v.others:
        para += nodes.Text(f"Other scale — {v.others}.")
    box += para
    if v.why:
        why = nodes.paragraph(classes=["verdict-why"])
        why += nodes.strong(text="Short of “holds”: ")
        why += nodes.Text(v.why)
        box += why
    return box


class VerdictBox(SphinxDirective):
    """``{verdict} Figure 1a``: the verdict box of one exhibit or statement, filled in once every chapter has run."""

    required_arguments = 1
    final_argument_whitespace = True

    def run(self) -> list[nodes.Node]:
        from ntk_core.bookkit.verdicts import PAPER

        ref = self.arguments[0].strip()
        if ref not in PAPER:
            raise self.error(f"{{verdict}} needs one of the paper's references {sorted(PAPER)}, got {ref!r}")
        return [verdict_placeholder(ref=ref)]


class ChapterResults(SphinxDirective):
    """``{chapter-results}``: a chapter's results box, one row per exhibit and statement it checks."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        return [chapter_placeholder(chapter=Path(self.env.docname).name)]


class verdict_placeholder(nodes.General, nodes.Element):
    """Replaced by :func:`_verdict_box` once all chapters have run."""


class chapter_placeholder(nodes.General, nodes.Element):
    """Replaced by the chapter's rows of the verdicts table once all chapters have run."""


def _saved(app: Any) -> tuple[dict[str, list[Any]], list[Any]]:
    """Every chapter's saved claims and headlines, read once per build: pages are resolved only after every
    chapter has been read (and executed), so the folder no longer changes."""
    if getattr(app, "_glance_saved", None) is None:
        from ntk_core.bookkit.ledger import load_headlines, load_ledgers

        app._glance_saved = (load_ledgers(_ledger_dir(app)), load_headlines(_ledger_dir(app)))
    return app._glance_saved


def _chapter_results(app: Any, fromdoc: str, chapter: str) -> list[nodes.Node]:
    from ntk_core.bookkit.verdicts import row_refs

    ledgers, headlines = _saved(app)
    everything = [c for cs in ledgers.values() for c in cs]
    mine = ledgers.get(chapter, [])
    refs = row_refs(mine, [h for h in headlines if h.chapter == chapter])
    box = nodes.container(classes=["chapter-results"])
    title = nodes.paragraph(classes=["verdict-head"])
    title += nodes.strong(text="Results of this chapter")
    title += nodes.Text(
        " (one verdict per exhibit and statement, judged over the whole book; each section opens "
        "with its own, and the scale and how sure: "
    )
    title += _link(app, fromdoc, "how verdicts are given", "results-at-a-glance")
    title += nodes.Text(")")
    box += title
    if refs:
        box += _verdicts_list(app, fromdoc, refs, everything, headlines)
    else:
        box += nodes.paragraph(text="This chapter checks no exhibit or statement of the paper by itself.")
    return [box]


def _table(app: Any, fromdoc: str) -> list[nodes.Node]:
    from ntk_core.bookkit.verdicts import row_refs

    ledgers, headlines = _saved(app)
    docs = {Path(d).name: d for d in _chapters_in_order(app)}
    ordered = [c for c in docs if c in ledgers] + sorted(set(ledgers) - set(docs))
    everything = [c for chapter in ordered for c in ledgers[chapter]]
    total = nodes.paragraph(classes=["glance-total"])
    total += nodes.strong(
        text=f"{len(everything)} claim{'s' if len(everything) != 1 else ''} checked in "
        f"{len(ordered)} chapter{'s' if len(ordered) != 1 else ''}: "
    )
    total += _counts(everything)
    refs = row_refs(everything, headlines)
    out: list[nodes.Node] = [_verdict_legend(), _verdicts_table(app, fromdoc, refs, everything, headlines)]
    checks = nodes.paragraph(classes=["glance-lead"])
    checks += nodes.strong(text="Every check, chapter by chapter")
    checks += nodes.Text(
        " (the paper's claims and the book's own premises and sanity checks, which do not count towards the "
        "verdicts above; click a chapter to open them):"
    )
    out += [checks, total]
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
    legend += nodes.Text(
        "A check's status is in the words of the verdicts above; “(quick)” and “(medium)” say at which scale a "
        "claim holds. The paper's reference links to the section that shows the check."
    )
    out.append(legend)
    silent = [d for d in docs.values() if d != fromdoc and Path(d).name not in ledgers and _has_code(app, d)]
    if silent:
        out.append(nodes.paragraph(text="No claims were recorded by: " + ", ".join(sorted(silent)) + "."))
    return out


def _verdict_legend() -> nodes.Node:
    """The six verdicts and what each means (:data:`ntk_core.bookkit.ledger.VERDICTS`), above the table."""
    from ntk_core.bookkit.ledger import VERDICTS

    legend = nodes.paragraph(classes=["glance-legend", "verdict-legend"])
    legend += nodes.strong(text="One verdict per exhibit and statement of the paper. ")
    legend += nodes.Text(
        "Each is judged at the largest scale that tested it (the recorded medium run, else this build's quick "
        "run; exact checks have no scale), from the paper's claims alone: "
    )
    for i, (word, meaning) in enumerate(VERDICTS.items()):
        if i:
            legend += nodes.Text("; ")
        legend += _verdict_badge(word)
        legend += nodes.Text(f" {meaning}")
    legend += nodes.Text(".")
    return legend


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
    found = list(doctree.findall(verdict_placeholder)) + list(doctree.findall(chapter_placeholder))
    if not found:
        return
    ledgers, headlines = _saved(app)
    claims = [c for cs in ledgers.values() for c in cs]
    for node in found:
        if isinstance(node, verdict_placeholder):
            node.replace_self(_verdict_box(app, docname, node["ref"], claims, headlines))
        else:
            node.replace_self(_chapter_results(app, docname, node["chapter"]))


def setup(app: Any) -> dict[str, Any]:
    app.add_node(glance_placeholder)
    app.add_node(glance_group, html=(_visit_group, _depart_group))
    app.add_node(glance_summary, html=(_visit_summary, _depart_summary))
    app.add_directive("results-at-a-glance", ResultsAtAGlance)
    app.add_node(verdict_placeholder)
    app.add_node(chapter_placeholder)
    app.add_directive("verdict", VerdictBox)
    app.add_directive("chapter-results", ChapterResults)
    app.connect("config-inited", _add_static)
    app.add_css_file("glance.css")
    app.connect("builder-inited", _start)
    app.connect("doctree-resolved", _resolve)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
