"""The book's record of what it checked: one :class:`Claim` per statement of the paper, kept in a :class:`Ledger`.

Every chapter checks the paper's statements on the numbers it has just computed. Instead of a bare ``assert``
it calls :meth:`Ledger.check` (the claim holds: the check fails the build if it does not),
:meth:`Ledger.finding` (the claim does *not* hold under its preconditions, and the evidence for that is
asserted) or :meth:`Ledger.not_run`. At the end of the chapter :meth:`Ledger.show` prints its "Checks" list
and :meth:`Ledger.save` writes the claims as JSON into the folder named by ``$NTK_BOOK_LEDGER`` (the book's
Sphinx extension sets it for the build; unset, nothing is written). The landing page's *Results at a glance*
is generated from those files, so it cannot disagree with the chapters.

A claim's status (:data:`STATUSES`) says how it was checked; a reader sees it in the words of :data:`VERDICTS`
(:data:`STATUS_VERDICT`, the one place those words are defined): ``verified`` and ``vacuous`` (exact checks),
``quick`` and ``medium`` (the claim holds at that scale), ``not reproduced`` (it does not hold:
:meth:`Ledger.finding`), ``premise not met`` and ``inconclusive`` (it cannot be tested at this scale: a premise
fails, or the difference lies within the sampling error), ``not run`` and ``stale`` (a recorded run whose
configuration changed since: :meth:`Ledger.on_record`). A claim is the paper's (``kind="claim"``) or the book's own premise or
sanity check (``kind="check"``); only the paper's count towards the one verdict per exhibit
(:mod:`ntk_core.bookkit.verdicts`). A :class:`Headline` gives an exhibit's row its key number, scale and how sure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from html import escape
from pathlib import Path
from typing import Any, Iterator, Literal

from .. import _store

__all__ = [
    "STATUSES",
    "STATUS_BADGES",
    "STATUS_VERDICT",
    "VERDICTS",
    "Status",
    "Claim",
    "Headline",
    "Ledger",
    "load_ledgers",
    "load_headlines",
    "is_exhibit",
    "paper_order",
]

Status = Literal[
    "verified", "vacuous", "quick", "medium", "not reproduced", "premise not met", "inconclusive", "not run", "stale"
]
STATUSES: tuple[str, ...] = (
    "verified",
    "vacuous",
    "quick",
    "medium",
    "not reproduced",
    "premise not met",
    "inconclusive",
    "not run",
    "stale",
)
#: the six verdicts (and two states of a row that has none), each with its meaning: the one place they are defined
VERDICTS: dict[str, str] = {
    "holds": "every claim of the paper checked here holds, beyond the sampling error of its test (seeds and test "
    "images)",
    "holds in part": "some of the paper's claims hold; the others fail or cannot be tested at this scale (the row "
    "says which)",
    "does not hold": "under the paper's premises the claim fails here, beyond the sampling error of its test",
    "cannot be tested at this scale": "a premise the claim needs fails at this scale, or the difference lies "
    "within the sampling error of its test: the outcome says nothing either way (the row says why)",
    "vacuous": "the bound holds but is above the trivial value (1 for a 0-1 error), so it says nothing",
    "verified": "checked exactly: a closed form or float64 arithmetic to machine precision, or a Monte Carlo "
    "frequency within its own standard error",
    "not run": "not checked in this build (no data or no record); the row says why",
    "stale record": "checked on a recorded run whose configuration changed since: counts for nothing until re-recorded",
}

#: a claim's status (:data:`ntk_core.bookkit.ledger.STATUSES`) in the words of :data:`VERDICTS`
STATUS_VERDICT: dict[str, str] = {
    "verified": "verified",
    "vacuous": "vacuous",
    "quick": "holds",
    "medium": "holds",
    "not reproduced": "does not hold",
    "premise not met": "cannot be tested at this scale",
    "inconclusive": "cannot be tested at this scale",
    "not run": "not run",
    "stale": "stale record",
}

#: status -> (its short badge, its meaning in a legend): the words of *Results at a glance* and the Checks lists,
#: which are the words of :data:`VERDICTS` (a reproduced claim says at which scale)
STATUS_BADGES: dict[str, tuple[str, str]] = {
    status: (
        word + {"quick": " (quick)", "medium": " (medium)"}.get(status, ""),
        VERDICTS[word]
        + {"quick": ", at the quick scale of the live build", "medium": ", on the recorded medium run"}.get(status, ""),
    )
    for status, word in STATUS_VERDICT.items()
}
_LEDGER_ENV = "NTK_BOOK_LEDGER"


@dataclass(frozen=True)
class Claim:
    """One statement of the paper and what this build found.

    Attributes
    ----------
    ref : str
        The paper's name for it ("Theorem 4.1", "Figure 1a", "Table 2").
    statement : str
        What was checked, in one sentence.
    status : str
        One of :data:`STATUSES`.
    value : str
        The key number of this build ("GD+RDI 7.1 % vs GD 14.3 % test error").
    paper : str
        The paper's own number or statement beside it ("" when the paper gives none).
    anchor : str
        The book label of the section that shows it (a MyST target such as ``exp-figure-1a``).
    chapter : str
        The chapter that checked it.
    scale : str
        ``"medium"`` for a claim checked on a recorded result (inside :meth:`Ledger.on_record`), else ``""``
        (the live build's own computation).
    kind : str
        ``"claim"`` (the paper's) or ``"check"`` (the book's own premise or sanity check, which does not count
        towards the exhibit's verdict).
    """

    ref: str
    statement: str
    status: str
    value: str
    paper: str = ""
    anchor: str = ""
    chapter: str = ""
    scale: str = ""
    kind: str = "claim"


@dataclass(frozen=True)
class Headline:
    """What an exhibit's row of *Results at a glance* says beside its verdict, at one scale.

    Attributes
    ----------
    ref : str
        The paper's name for the exhibit or statement.
    measured : str
        The key number this build measured, to stand beside the paper's ("GD − RDI = 6.9 ± 0.8 points").
    scale : str
        The sizes it was measured at, beside the paper's ("1,000 of 11,272 images, width 1,000").
    sure : str
        How sure: seeds, test images, the test ("3 seeds × 500 test images; paired, 2 standard errors").
    anchor : str
        The label of the section that shows it.
    chapter : str
        The chapter that gave it.
    level : str
        ``"medium"`` inside :meth:`Ledger.on_record`, else ``""`` (the live build).
    """

    ref: str
    measured: str
    scale: str
    sure: str = ""
    anchor: str = ""
    chapter: str = ""
    level: str = ""


@dataclass
class Ledger:
    """The claims one chapter checks, in order.

    Parameters
    ----------
    chapter : str
        The chapter's name (its file name without ``.md``); it names the saved JSON file.

    Examples
    --------
    >>> ledger = Ledger("demo")
    >>> ledger.check("Theorem 4.1", "RDI and AUX give the same predictor", 0.0 <= 1e-12,
    ...              value="max difference 0", anchor="thm-4-1")
    >>> ledger.claims[0].status
    'verified'
    >>> try:
    ...     ledger.check("Theorem 4.1", "a claim that fails", False, value="1.0")
    ... except AssertionError as failed:
    ...     print(failed)
    Theorem 4.1: a claim that fails (1.0)
    """

    chapter: str
    claims: list[Claim] = field(default_factory=list)
    headlines: list[Headline] = field(default_factory=list)
    _stale: str | None = field(default=None, repr=False)
    _on_record: bool = field(default=False, repr=False)

    def _add(
        self, ref: str, statement: str, status: str, value: str, paper: str, anchor: str, kind: str = "claim"
    ) -> None:
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        if not ref or not statement:
            raise ValueError("a claim needs the paper's reference and a statement")
        if self._stale is not None:  # on a stale record: the verdict is kept in the value, and counts for nothing
            value, status = f"{value} [would be: {status}; the record is stale: {self._stale}]", "stale"
        scale = "medium" if self._on_record else ""
        if kind not in ("claim", "check"):
            raise ValueError(f"kind must be 'claim' (the paper's) or 'check' (the book's own), got {kind!r}")
        self.claims.append(Claim(ref, statement, status, str(value), paper, anchor, self.chapter, scale, kind))

    def headline(self, ref: str, *, measured: str, scale: str, sure: str = "", anchor: str = "") -> None:
        """Give ``ref``'s row of *Results at a glance* its key number, its scale and how sure (:class:`Headline`),
        at the live build's scale, or at the medium scale inside :meth:`on_record`."""
        if not ref or not measured or not scale:
            raise ValueError("a headline needs the paper's reference, the number measured and the scale")
        level = "medium" if self._on_record else ""
        self.headlines.append(Headline(ref, measured, scale, sure, anchor, self.chapter, level))

    @contextlib.contextmanager
    def on_record(self, meta: dict[str, Any] | None) -> Iterator[None]:
        """Claims checked inside the block are on a recorded result with this ``meta``
        (:func:`ntk_core.experiments.recorded`'s): when it is stale, each is recorded with status ``stale`` (its
        verdict kept in its value), so that a stale record's verdicts show as stale wherever they appear."""
        previous = self._stale, self._on_record
        if meta is not None and meta.get("stale"):
            self._stale = "; ".join(meta.get("stale_reasons") or ["its configuration changed"])
        self._on_record = self._on_record or meta is not None
        try:
            yield
        finally:
            self._stale, self._on_record = previous

    def check(
        self,
        ref: str,
        statement: str,
        holds: Any,
        *,
        value: str,
        paper: str = "",
        anchor: str = "",
        status: Status = "verified",
        own: bool = False,
    ) -> None:
        """Record that the claim holds; raise ``AssertionError`` (failing the build) if ``holds`` is false.

        ``status`` says how it holds: ``verified`` (default), ``vacuous``, ``quick`` or ``medium``. ``own``: the
        book's own premise or sanity check rather than a claim of the paper (it does not count towards the
        exhibit's verdict).
        """
        if status in ("not reproduced", "premise not met", "inconclusive", "not run", "stale"):
            raise ValueError(
                f"check() records a claim that holds; use finding(), premise_not_met(), inconclusive(), not_run() "
                f"or on_record() for {status!r}"
            )
        if not bool(holds):
            raise AssertionError(f"{ref}: {statement} ({value})")
        self._add(ref, statement, status, value, paper, anchor, _kind(own))

    def finding(
        self,
        ref: str,
        statement: str,
        evidence: Any,
        *,
        value: str,
        paper: str = "",
        anchor: str = "",
        own: bool = False,
    ) -> None:
        """Record that the claim does not hold here; ``evidence`` (that it fails, measured) must be true."""
        if not bool(evidence):
            raise AssertionError(f"{ref}: the finding '{statement}' is not supported by this build ({value})")
        self._add(ref, statement, "not reproduced", value, paper, anchor, _kind(own))

    def premise_not_met(
        self,
        ref: str,
        statement: str,
        evidence: Any,
        *,
        premise: str,
        value: str,
        paper: str = "",
        anchor: str = "",
        own: bool = False,
    ) -> None:
        """Record that the claim is not tested here because its ``premise`` (as the paper states it) fails at this
        scale; ``evidence`` (that it fails, measured) must be true."""
        if not premise:
            raise ValueError("premise_not_met needs the premise that fails")
        if not bool(evidence):
            raise AssertionError(f"{ref}: the premise '{premise}' is not shown to fail by this build ({value})")
        self._add(ref, statement, "premise not met", f"{value} (premise not met: {premise})", paper, anchor, _kind(own))

    def inconclusive(
        self,
        ref: str,
        statement: str,
        *,
        value: str,
        why: str,
        paper: str = "",
        anchor: str = "",
        own: bool = False,
    ) -> None:
        """Record a claim measured here whose outcome is within the noise of this scale; ``why`` says which."""
        if not why:
            raise ValueError("an inconclusive claim needs the reason (which noise it is within)")
        self._add(ref, statement, "inconclusive", f"{value} ({why})", paper, anchor, _kind(own))

    def not_run(
        self, ref: str, statement: str, why: str, *, paper: str = "", anchor: str = "", own: bool = False
    ) -> None:
        """Record that the claim is not checked in this build, and why."""
        self._add(ref, statement, "not run", why, paper, anchor, _kind(own))

    def table(self, claims: list[Claim] | None = None) -> list[dict[str, str]]:
        """The claims (default: all of them) as rows for :func:`ntk_core.bookkit.plots.show_table`."""
        return [
            {"paper": c.ref, "claim": c.statement, "status": c.status, "this build": c.value, "paper's number": c.paper}
            for c in (self.claims if claims is None else claims)
        ]

    def compact_table(
        self, min_length: int = 40, claims: list[Claim] | None = None
    ) -> tuple[list[dict[str, str]], list[str]]:
        """:meth:`table` for a reader: a text that recurs is written out once.

        A "paper's number" equal to the row above's becomes "as above"; a bracketed reason at the end of a
        value ("… (why)", at least ``min_length`` characters) that an earlier row already gave becomes a note
        marker "[note k]". Returns the rows and the notes ("[note k] why"), in order of first use.
        """
        claims = self.claims if claims is None else claims
        rows = self.table(claims)
        whys = [_trailing_reason(c.value) for c in claims]
        repeated = {w for w in whys if len(w) >= min_length and whys.count(w) > 1}
        notes: list[str] = []
        previous_paper = None
        for row, why in zip(rows, whys):
            if why in repeated:
                if why not in notes:
                    notes.append(why)
                row["this build"] = f"{row['this build'][: -len(why) - 3]} [note {notes.index(why) + 1}]"
            paper = row["paper's number"]
            if paper and paper == previous_paper:
                row["paper's number"] = "as above"
            previous_paper = paper
        return rows, [f"[note {k}] {why}" for k, why in enumerate(notes, 1)]

    def groups(self) -> list[tuple[str, list[Claim]]]:
        """The claims grouped by the paper's reference: the paper's figures and tables first, in the paper's order
        (:func:`paper_order`), then the other references (theorems, lemmas, sections) in the order each first
        appears; within a group, the chapter's order."""
        refs = list(dict.fromkeys(c.ref for c in self.claims))
        exhibits = sorted((r for r in refs if is_exhibit(r)), key=paper_order)
        refs = exhibits + [r for r in refs if not is_exhibit(r)]
        return [(ref, [c for c in self.claims if c.ref == ref]) for ref in refs]

    def checks_html(self) -> str:
        """The "Checks" list as HTML: one ``<details>`` per reference of the paper (:meth:`groups`), whose summary
        counts its claims by status (the badges of *Results at a glance*) and whose table (:meth:`compact_table`
        of the group, its notes below) has one row per claim. The groups are collapsed, so that the list reads
        as one line per reference of the paper: each chapter opens with its verdicts, and these are the checks
        behind them."""
        parts = ['<div class="checks-list">']
        for ref, claims in self.groups():
            rows, notes = self.compact_table(claims=claims)
            n = len(claims)
            parts.append('<details class="glance-group checks-group"><summary class="glance-summary">')
            parts.append(f'<span class="glance-chapter">{escape(ref)}</span>')
            parts.append(f'<span class="glance-n"> — {n} check{"s" if n != 1 else ""}: </span>')
            parts.append(" ".join(_badge_html(s, n) for s, n in badge_counts(claims)))
            parts.append("</summary>")
            parts.append('<table class="glance-table checks-table"><thead><tr>')
            parts.append("".join(f"<th>{name}</th>" for name in ("Claim", "Status", "This build", "Paper's number")))
            parts.append("</tr></thead><tbody>")
            for row in rows:
                cells = [
                    escape(row["claim"]),
                    _badge_html(row["status"]),
                    escape(row["this build"]),
                    escape(row["paper's number"] or "—"),
                ]
                parts.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
            parts.append("</tbody></table>")
            parts += [f'<p class="checks-note">{escape(note)}</p>' for note in notes]
            parts.append("</details>")
        parts.append("</div>")
        return "\n".join(parts)

    def checks_text(self) -> str:
        """The "Checks" list as plain text (a terminal's view of :meth:`checks_html`)."""
        lines = []
        for ref, claims in self.groups():
            rows, notes = self.compact_table(claims=claims)
            lines.append(f"{ref}:")
            for row in rows:
                quote = row["paper's number"]
                paper = f" [paper: {quote}]" if quote else ""
                lines.append(f"  - {row['claim']}: {row['status']}; {row['this build']}{paper}")
            lines += [f"    {note}" for note in notes]
        return "\n".join(lines)

    def show(self) -> None:
        """Display the chapter's "Checks" list (:meth:`checks_html`; as text outside a notebook) and save it in
        full (see :meth:`save`)."""
        from IPython.display import display

        display({"text/html": self.checks_html(), "text/plain": self.checks_text()}, raw=True)
        self.save()

    def save(self, folder: str | os.PathLike[str] | None = None) -> Path | None:
        """Write the claims to ``<folder>/<chapter>.json`` (default ``$NTK_BOOK_LEDGER``; unset: no file)."""
        target = folder if folder is not None else os.environ.get(_LEDGER_ENV)
        if not target:
            return None
        path = Path(target) / f"{self.chapter}.json"
        payload = {
            "chapter": self.chapter,
            "claims": [asdict(c) for c in self.claims],
            "headlines": [asdict(h) for h in self.headlines],
        }
        _store.atomic_write_bytes(path, (json.dumps(payload, indent=1, ensure_ascii=False) + "\n").encode())
        return path


def _kind(own: bool) -> str:
    return "check" if own else "claim"


def is_exhibit(ref: str) -> bool:
    """A figure or table of the paper (its experiments), as opposed to a theorem, lemma, remark or section."""
    return ref.startswith(("Figure", "Table"))


def paper_order(ref: str) -> tuple[int, int, str, str]:
    """A sort key: where an exhibit stands in the paper, its figures in number order (1a before 1b, "Figures 3,
    6–8" at 3), then its tables; any other reference after them, by name."""
    match = re.match(r"(Figure|Table)s? (\d+)([a-z]?)", ref)
    if match is None:
        return (2, 0, "", ref)
    return (0 if match.group(1) == "Figure" else 1, int(match.group(2)), match.group(3), ref)


def badge_counts(claims: list[Claim]) -> list[tuple[str, int]]:
    """How many of ``claims`` show each badge (:data:`STATUS_BADGES`: two statuses may share one, e.g. a failed
    premise and a difference within the sampling error both "cannot be tested at this scale"), in the order of
    :data:`STATUSES`: ``(the first status with that badge, count)``."""
    word = {s: STATUS_BADGES.get(s, (s, s))[0] for s in STATUSES}
    out: list[tuple[str, int]] = []
    for status in STATUSES:
        if word[status] in (word[s] for s, _ in out):
            continue
        n = sum(word.get(c.status, c.status) == word[status] for c in claims)
        if n:
            out.append((status, n))
    return out


def _badge_html(status: str, count: int | None = None) -> str:
    """A status as the badge of *Results at a glance* (with a count in front when given)."""
    word = STATUS_BADGES.get(status, (status, status))[0]
    text = word if count is None else f"{count} {word}"
    return f'<span class="glance-badge glance-{status.replace(" ", "-")}">{escape(text)}</span>'


def _trailing_reason(value: str) -> str:
    """The text of the bracket that ends ``value`` ("… (why)" gives "why", brackets inside it kept), or ""."""
    if not value.endswith(")"):
        return ""
    depth = 0
    for i in range(len(value) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(value[i], 0)
        if depth == 0:
            return value[i + 1 : -1] if i > 0 and value[i - 1] == " " else ""
    return ""


def load_ledgers(folder: str | os.PathLike[str]) -> dict[str, list[Claim]]:
    """The saved claims of every chapter in ``folder``: ``{chapter: [Claim, ...]}``."""
    out: dict[str, list[Claim]] = {}
    for path in sorted(Path(folder).glob("*.json")):
        payload = json.loads(path.read_text(encoding="utf-8"))
        out[payload["chapter"]] = [Claim(**c) for c in payload["claims"]]
    return out


def load_headlines(folder: str | os.PathLike[str]) -> list[Headline]:
    """The saved headlines of every chapter in ``folder``, chapter by chapter (file name order)."""
    out: list[Headline] = []
    for path in sorted(Path(folder).glob("*.json")):
        payload = json.loads(path.read_text(encoding="utf-8"))
        out += [Headline(**h) for h in payload.get("headlines", [])]
    return out
