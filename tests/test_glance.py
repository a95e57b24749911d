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

from ntk_core.report import load_ledgers

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


def test_the_glance_table_shows_every_saved_claim(built):
    page, ledgers = built
    table = re.search(r'<table[^>]*glance-table.*?</table>', page, re.S)
    assert table, "no Results at a glance table on the landing page"
    text = html.unescape(re.sub(r"<[^>]+>", " ", table.group(0)))  # tags first: a claim may contain "<"
    text = re.sub(r"\s+", " ", text)
    rows = table.group(0).count("<tr") - 1  # minus the header row
    claims = [c for chapter in ledgers.values() for c in chapter]
    assert rows == len(claims) > 0
    for claim in claims:
        assert re.sub(r"\s+", " ", claim.statement) in text, claim
        assert re.sub(r"\s+", " ", claim.value) in text, claim
    assert "No claims were recorded by" not in page
