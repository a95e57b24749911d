"""The built book's *Results at a glance*: generated from the chapters' saved ledgers, and agreeing with them.

Needs the built HTML (``make book``; ``make test`` builds it first) and the ledgers the build saved beside it
(``<build>/claims/*.json``). ``$NTK_BOOK_SITE`` points at another build's ``html`` folder.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

from ntk_core.bookkit.ledger import load_ledgers

REPO = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("NTK_BOOK_SITE") or REPO / "_build" / "html")
pytestmark = pytest.mark.book

# pages that are not chapters with claims of the paper to check
NO_CLAIMS = {"intro", "errata", "api"}


@pytest.fixture(scope="module")
def built():
    import yaml

    landing = SITE / (yaml.safe_load((REPO / "_toc.yml").read_text())["root"] + ".html")  # index.html redirects
    if not landing.exists():
        pytest.fail("the book is not built: run `make book` (or `make test`, which builds it first)")
    return landing.read_text(encoding="utf-8"), load_ledgers(SITE.parent / "claims")


def _chapters() -> list[str]:
    import yaml

    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    return [Path(c["file"]).name for part in toc["parts"] for c in part["chapters"]]


def test_every_chapter_records_its_claims(built):
    _, ledgers = built
    expected = [c for c in _chapters() if c not in NO_CLAIMS]
    missing = [c for c in expected if not ledgers.get(c)]
    assert not missing, f"chapters that saved no claims: {missing}"


def _text(fragment: str) -> str:
    text = html.unescape(re.sub(r"<[^>]+>", " ", fragment))  # tags first: a claim may contain "<"
    return re.sub(r"\s+", " ", text)


def test_the_glance_table_shows_every_saved_claim(built):
    page, ledgers = built
    found = re.findall(r'<details class="glance-group" id="glance-([^"]+)">(.*?)</details>', page, re.S)
    assert found, "no Results at a glance on the landing page"
    assert sorted(c for c, _ in found) == sorted(ledgers)  # one collapsed group per chapter that saved claims
    groups = [g for _, g in found]
    rows = 0
    for chapter, group in found:
        tables = re.findall(r"<table[^>]*glance-table.*?</table>", group, re.S)
        assert len(tables) == 1, "one table per chapter"
        assert tables[0].count("<tr") - 1 == len(ledgers[chapter]), chapter  # minus the header row
        rows += tables[0].count("<tr") - 1
    claims = [c for chapter in ledgers.values() for c in chapter]
    assert rows == len(claims) > 0
    text = _text("".join(groups))
    for claim in claims:
        assert re.sub(r"\s+", " ", claim.statement) in text, claim
        assert re.sub(r"\s+", " ", claim.value) in text, claim
    assert "No claims were recorded by" not in page


def test_each_chapter_summary_counts_its_claims(built):
    """The one-line summary of each chapter's group agrees with its saved ledger, status by status."""
    from collections import Counter

    from ntk_core.bookkit.ledger import STATUS_BADGES

    page, ledgers = built
    short = {status: badge for status, (badge, _) in STATUS_BADGES.items()}
    found = re.findall(
        r'<details class="glance-group" id="glance-([^"]+)">\s*<summary class="glance-summary">'
        r"(.*?)</summary>",
        page,
        re.S,
    )
    assert sorted(c for c, _ in found) == sorted(ledgers)
    for chapter, summary in found:
        m = re.search(r"— (\d+) claims?: (.*)$", _text(summary).strip())
        assert m, summary
        badges: Counter[str] = Counter()
        for n, word in re.findall(r"(\d+) ([a-z][a-z ()]*?)(?= \d|$)", m.group(2).strip()):
            badges[word] += int(n)
        counts = Counter(short[c.status] for c in ledgers[chapter])
        assert int(m.group(1)) == len(ledgers[chapter]) == sum(badges.values()), chapter
        assert badges == counts, chapter


def test_the_glance_gives_each_exhibit_and_statement_one_verdict(built):
    """Before the chapters, one row per exhibit and statement of the paper that a chapter checked, exhibits first
    in the paper's order: exactly one verdict each, the one :func:`ntk_core.bookkit.verdicts.verdict` gives on the
    saved claims of every chapter, with the scale it was judged at; the legend of the verdicts above the table."""
    from ntk_core.bookkit.ledger import VERDICTS, load_headlines
    from ntk_core.bookkit.verdicts import row_refs, verdict

    page, ledgers = built
    claims = [c for chapter in ledgers.values() for c in chapter]
    (table,) = re.findall(r"<table[^>]*glance-verdicts.*?</table>", page, re.S)
    assert page.index("verdict-legend") < page.index("glance-verdicts") < page.index('class="glance-group"')
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)[1:]
    refs = row_refs(claims, load_headlines(SITE.parent / "claims"))
    shown = [_text(re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[0]).strip() for row in rows]
    assert shown == refs and len(refs) >= 15, shown
    for ref, row in zip(refs, rows):
        badges = re.findall(r'class="glance-badge verdict-[^"]*">([^<]*)<', row)
        v = verdict([c for c in claims if c.ref == ref])
        assert badges == [v.word] and v.word in VERDICTS, (ref, badges, v.word)
        assert {"medium": "on the medium record", "quick": "at the quick scale", "exact": "exact"}[v.scale] in row
    # every exhibit of the paper the chapters check has its row (with or without data, each says what it is)
    expected = {"Figure 1a", "Figure 4", "Table 2", "Theorem 4.1", "Theorem 5.1", "Theorem 5.2", "Theorem 5.3"}
    assert expected <= set(shown)
