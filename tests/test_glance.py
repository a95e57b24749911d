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

    page, ledgers = built
    short = {
        "verified": "verified",
        "vacuous": "vacuous",
        "quick": "quick scale",
        "medium": "medium scale",
        "not reproduced": "not reproduced",
        "premise not met": "premise not met",
        "inconclusive": "inconclusive",
        "not run": "not run",
        "stale": "stale record",
    }
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
        for n, word in re.findall(r"(\d+) ([a-z][a-z ]*?)(?= \d|$)", m.group(2).strip()):
            badges[word] += int(n)
        counts = Counter(short[c.status] for c in ledgers[chapter])
        assert int(m.group(1)) == len(ledgers[chapter]) == sum(badges.values()), chapter
        assert badges == counts, chapter


def test_the_glance_leads_with_the_papers_exhibits(built):
    """Before the chapters, one row per figure and table of the paper: the live build's verdicts and the medium
    record's (claims checked on a record: scale "medium"), counted status by status as in the saved ledgers."""
    from collections import Counter

    page, ledgers = built
    claims = [c for chapter in ledgers.values() for c in chapter]
    (table,) = re.findall(r"<table[^>]*glance-exhibits.*?</table>", page, re.S)
    assert page.index("glance-exhibits") < page.index('class="glance-group"')  # it leads
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)[1:]
    exhibits = {c.ref for c in claims if c.ref.startswith(("Figure", "Table"))}
    assert len(rows) == len(exhibits) > 0
    # in the paper's order: its figures 1a, 1b, 2, ..., 8, then its tables
    paper = ["Figure 1a", "Figure 1b", *(f"Figure {k}" for k in range(2, 9)), "Table 1", "Table 2"]
    shown = [_text(re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[0]).strip() for row in rows]
    place = [
        max(i for i, name in enumerate(paper) if ref.replace("Figures", "Figure").startswith(name)) for ref in shown
    ]
    assert place == sorted(place), shown
    short = {"quick": "quick scale", "medium": "medium scale", "not reproduced": "not reproduced",
             "premise not met": "premise not met", "inconclusive": "inconclusive", "not run": "not run",
             "stale": "stale record", "verified": "verified", "vacuous": "vacuous"}  # fmt: skip

    def counted(cell: str) -> Counter[str]:
        found: Counter[str] = Counter()
        for n, word in re.findall(r"(\d+) ([a-z][a-z ]*?)(?= \d|$)", _text(cell).strip()):
            found[word] += int(n)
        return found

    for row in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ref = _text(cells[0]).strip()
        mine = [c for c in claims if c.ref == ref]
        medium = [c for c in mine if c.scale == "medium" or c.status == "medium"]
        live = [c for c in mine if c not in medium]
        assert counted(cells[1]) == Counter(short[c.status] for c in live), ref
        assert counted(cells[2]) == Counter(short[c.status] for c in medium), ref
