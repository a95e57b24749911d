"""ntk_core.bookkit.ledger (the chapters' ledger of claims) and the book's glance extension that collects it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from ntk_core.bookkit.ledger import STATUSES, Claim, Ledger, load_ledgers

BOOK_EXT = Path(__file__).resolve().parents[1] / "book" / "_ext"


def test_check_records_a_claim_that_holds_and_fails_loudly_otherwise():
    ledger = Ledger("demo")
    ledger.check("Theorem 4.1", "RDI equals AUX", True, value="0.0", anchor="thm-4-1")
    ledger.check("Theorem 5.1", "bound above the loss", True, value="1.7 ≥ 0.3", status="vacuous")
    with pytest.raises(AssertionError, match=r"Figure 1a: RDI beats GD \(7% vs 5%\)"):
        ledger.check("Figure 1a", "RDI beats GD", False, value="7% vs 5%")
    assert [c.status for c in ledger.claims] == ["verified", "vacuous"]  # the failed claim is not recorded
    with pytest.raises(ValueError, match="use finding"):
        ledger.check("Table 1", "x", True, value="1", status="not reproduced")
    with pytest.raises(ValueError, match="status must be one of"):
        ledger.check("Table 1", "x", True, value="1", status="roughly")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reference and a statement"):
        ledger.check("", "x", True, value="1")


def test_finding_needs_its_evidence_and_not_run_says_why():
    ledger = Ledger("demo")
    ledger.finding("Figure 1b", "RDI is not better than SGD here", True, value="12% vs 11%")
    with pytest.raises(AssertionError, match="not supported by this build"):
        ledger.finding("Figure 1b", "RDI is worse", False, value="10% vs 11%")
    ledger.not_run("Table 1", "AUX last ≈ best", "no medium record yet")
    ledger.inconclusive("Figure 1b", "AUX beats SGD", value="+1.0 ± 2.0 points", why="within seed spread")
    with pytest.raises(ValueError, match="needs the reason"):
        ledger.inconclusive("Figure 1b", "AUX beats SGD", value="+1.0", why="")
    assert [(c.status, c.value) for c in ledger.claims] == [
        ("not reproduced", "12% vs 11%"),
        ("not run", "no medium record yet"),
        ("inconclusive", "+1.0 ± 2.0 points (within seed spread)"),
    ]
    assert set(c.status for c in ledger.claims) <= set(STATUSES)


def test_save_writes_only_where_the_build_asks_and_round_trips(tmp_path, monkeypatch):
    ledger = Ledger("binary")
    ledger.check("Theorem 5.2", "bound ≥ ramp loss", True, value="0.70 ≥ 0.11", paper="—", anchor="thm-5-2")
    monkeypatch.delenv("NTK_BOOK_LEDGER", raising=False)
    assert ledger.save() is None and not list(tmp_path.iterdir())
    monkeypatch.setenv("NTK_BOOK_LEDGER", str(tmp_path / "claims"))
    path = ledger.save()
    assert path == tmp_path / "claims" / "binary.json"
    assert load_ledgers(tmp_path / "claims") == {
        "binary": [Claim("Theorem 5.2", "bound ≥ ramp loss", "verified", "0.70 ≥ 0.11", "—", "thm-5-2", "binary")]
    }


def test_glance_extension_builds_the_table_from_the_saved_ledgers(tmp_path):
    pytest.importorskip("sphinx")
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(BOOK_EXT)!r})\nextensions = ['glance']\n")
    (src / "index.rst").write_text(
        "Home\n====\n\n.. results-at-a-glance::\n\n.. toctree::\n\n   one\n   two\n   three\n"
    )
    (src / "one.rst").write_text(
        ".. chapter-results::\n\n.. _sec-one:\n\nSection one\n===========\n\n.. verdict:: Lemma A.1\n\nText.\n"
    )
    (src / "two.rst").write_text("Two\n===\n\nA chapter with a ``{code-cell}`` that saved no ledger.\n")
    (src / "three.rst").write_text("Three\n=====\n\nA page without code (errata, say): nothing to record.\n")
    out = tmp_path / "build" / "html"

    def chapters_run(app, env, docnames):  # what the executed chapters do: save their ledgers
        ledger = Ledger("one")
        ledger.check("Lemma A.1", "zero initial output", True, value="max |f| = 0", paper="0", anchor="sec-one")
        ledger.not_run("Table 1", "AUX last ≈ best", "no medium record yet")
        ledger.headline("Lemma A.1", measured="max |f(0)| = 0", scale="width 64", sure="exact", anchor="sec-one")
        ledger.save()

    stale = tmp_path / "build" / "claims"
    stale.mkdir(parents=True)
    (stale / "old.json").write_text(json.dumps({"chapter": "old", "claims": []}))
    app = Sphinx(
        str(src), str(src), str(out), str(tmp_path / "doctrees"), "html", status=None, warning=sys.stderr, freshenv=True
    )
    app.connect("env-before-read-docs", chapters_run)
    app.build()
    html = (out / "index.html").read_text()
    assert "Lemma A.1" in html and "max |f| = 0" in html
    # grouped by chapter: one collapsed <details> whose summary counts the chapter's claims by status
    assert html.count('<details class="glance-group" id="glance-one">') == 1
    summary = re.search(r'<summary class="glance-summary">(.*?)</summary>', html, re.S).group(1)
    summary = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", summary))
    assert summary == "Section one — 2 claims: 1 verified 1 not run ", summary
    # the status as a short badge in the words of the verdicts, whose legend leads the page
    assert '<span class="glance-badge glance-verified">verified</span>' in html
    assert '<span class="glance-badge glance-not-run">not run</span>' in html and "no medium record yet" in html
    assert "checked exactly: a closed form or float64 arithmetic" in html
    # the paper's reference links to the section that shows the claim (its title as the tooltip)
    assert re.search(r'<a class="reference internal" href="one.html#sec-one" title="Section one">\s*Lemma A.1', html)
    chapter_table = html[html.index('<details class="glance-group" id="glance-one">') :]
    assert chapter_table.count("<tr") == 3  # header and two claims
    # first, one verdict per exhibit and statement of the paper: Table 1 (not run), Lemma A.1 (verified), the
    # headline's number and scale beside the paper's
    verdicts = re.search(r"<table[^>]*glance-verdicts.*?</table>", html, re.S).group(0)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", verdicts, re.S)[1:]
    first = [re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)[0]).strip() for r in rows]
    assert first == ["Table 1", "Lemma A.1"]  # the exhibits first, then the statements
    assert 'verdict-not-run">not run' in rows[0] and 'verdict-verified">verified' in rows[1]
    assert "max |f(0)| = 0" in rows[1] and "width 64" in rows[1] and "paper: exact" in rows[1]
    assert html.index("verdict-legend") < html.index("glance-verdicts") < html.index("glance-group")
    assert "2 claims checked in 1 chapter: " in html
    assert "No claims were recorded by: two." in html  # three has no code: not expected to record claims
    assert "glance.css" in html and (out / "_static" / "glance.css").exists()
    assert not (stale / "old.json").exists()  # ledgers of an earlier build are cleared first
    # the chapter opens with its results, and the section with its verdict box: the same verdicts as the glance
    one = (out / "one.html").read_text()
    box = re.search(r'<div class="chapter-results[^"]*">(.*?)</ul>', one, re.S).group(1)
    assert "Lemma A.1" in box and "Table 1" in box and 'verdict-verified">verified' in box
    lines = re.findall(r"<li>(.*?)</li>", box, re.S)  # one line per exhibit and statement, the exhibits first
    assert len(lines) == 2 and "Table 1" in lines[0] and "max |f(0)| = 0" in lines[1] and "paper: exact" in lines[1]
    section = re.search(r'<div class="verdict-box[^"]*">(.*?)</div>', one, re.S).group(1)
    assert "Lemma A.1: " in section and 'verdict-verified">verified' in section and "max |f(0)| = 0" in section


def test_premise_not_met_needs_its_evidence_and_says_which_premise():
    ledger = Ledger("t")
    ledger.premise_not_met("Table 2", "x does not depend on width", True, premise="a large width", value="20 %")
    (claim,) = ledger.claims
    assert claim.status == "premise not met" and "premise not met: a large width" in claim.value
    with pytest.raises(AssertionError, match="not shown to fail"):
        ledger.premise_not_met("Table 2", "x", False, premise="a large width", value="5 %")
    with pytest.raises(ValueError, match="the premise"):
        ledger.premise_not_met("Table 2", "x", True, premise="", value="5 %")


def test_claims_on_a_stale_record_are_stale_whatever_their_verdict():
    ledger = Ledger("t")
    stale = {"stale": True, "stale_reasons": ["code fingerprint differs"]}
    with ledger.on_record(stale):
        ledger.check("Figure 1a", "RDI beats GD", True, value="+5 points", status="medium")
        ledger.finding("Table 1", "AUX beats ES", True, value="-5 points")
        ledger.inconclusive("Figure 1b", "ES beats SGD", value="+1 point", why="within two standard errors")
    ledger.check("Figure 1a", "after the block", True, value="1", status="medium")
    with ledger.on_record({"stale": False, "stale_reasons": []}):
        ledger.check("Figure 1a", "on a current record", True, value="1", status="medium")
    with ledger.on_record(None):  # no record: nothing changes
        ledger.not_run("Figure 1a", "no record", "not recorded yet")
    statuses = [c.status for c in ledger.claims]
    assert statuses == ["stale", "stale", "stale", "medium", "medium", "not run"]
    assert "would be: medium" in ledger.claims[0].value and "code fingerprint differs" in ledger.claims[0].value
    assert "would be: not reproduced" in ledger.claims[1].value
    assert [c.scale for c in ledger.claims] == ["medium", "medium", "medium", "", "medium", ""]
    with pytest.raises(ValueError, match="on_record"):
        ledger.check("Figure 1a", "x", True, value="1", status="stale")  # type: ignore[arg-type]


def test_the_checks_list_writes_a_recurring_reason_and_paper_quote_once():
    """Shown to a reader, a reason that recurs becomes a numbered note and a paper quote equal to the row
    above's becomes "as above"; nested brackets stay whole; the saved ledger keeps every value in full."""
    ledger = Ledger("t")
    why = "differences of the size of the seed-to-seed noise (they change with the threads)"
    ledger.inconclusive("Table 1", "claim a", value="+1.0 ± 2.0 points", why=why, paper="87.81 vs 86.35 %")
    ledger.inconclusive("Table 1", "claim b", value="-0.5 ± 1.0 points", why=why, paper="87.81 vs 86.35 %")
    ledger.check("Table 1", "claim c", True, value="holds (short)", paper="another quote")
    ledger.inconclusive("Figure 1b", "claim d", value="+0.1 ± 0.2", why="a reason given once, long enough to count")
    rows, notes = ledger.compact_table()
    assert [r["this build"] for r in rows] == [
        "+1.0 ± 2.0 points [note 1]",
        "-0.5 ± 1.0 points [note 1]",
        "holds (short)",
        "+0.1 ± 0.2 (a reason given once, long enough to count)",
    ]
    assert notes == [f"[note 1] {why}"]
    assert [r["paper's number"] for r in rows] == ["87.81 vs 86.35 %", "as above", "another quote", ""]
    assert ledger.claims[1].value.endswith(f"({why})")  # what is saved is not shortened


def test_the_checks_list_reads_as_one_line_per_reference_of_the_paper():
    """Ledger.show's HTML: one <details> per reference, the paper's figures and tables first in the paper's order
    and then the other references as they first appear, its summary counting the group's claims by status (badges
    in the order of STATUSES), one escaped row per claim, a recurring reason written once as a note inside its
    group; every group collapsed (the chapter's verdicts open it; these are the checks behind them)."""
    ledger = Ledger("t")
    why = "differences of the size of the seed-to-seed noise (they change with the threads)"
    ledger.check("Theorem 4.1", "RDI and AUX agree", True, value="0")
    ledger.inconclusive("Table 1", "AUX <beats> normal", value="+1.0 ± 2.0", why=why, paper="87.81 vs 86.35 %")
    ledger.check("Figure 2", "the curve bends", True, value="yes")
    ledger.inconclusive("Table 1", "claim b", value="-0.5 ± 1.0", why=why, paper="87.81 vs 86.35 %")
    ledger.finding("Table 1", "claim c", evidence=True, value="the opposite (-5 points)")
    ledger.check("Figures 1a", "a figure", True, value="yes")
    ledger.check("Section 6.2", "a section", True, value="yes")
    html = ledger.checks_html()
    groups = re.findall(r"<details class=\"glance-group checks-group\"( open)?>(.*?)</details>", html, re.S)
    refs = [re.search(r'glance-chapter">([^<]*)<', body).group(1) for _, body in groups]
    assert refs == ["Figures 1a", "Figure 2", "Table 1", "Theorem 4.1", "Section 6.2"]
    assert not any(state for state, _ in groups)  # collapsed
    table_1 = groups[2][1]
    summary = table_1[: table_1.index("</summary>")]
    assert "3 checks" in summary
    assert summary.index("1 does not hold") < summary.index("2 cannot be tested at this scale")  # the order of STATUSES
    assert table_1.count("<tr>") == 4  # header and three claims, in the chapter's order
    assert table_1.index("AUX &lt;beats&gt; normal") < table_1.index("claim b") < table_1.index("claim c")
    assert "<beats>" not in html
    assert table_1.count("[note 1]") == 3 and table_1.count(why) == 1  # two markers and the note itself
    assert "the curve bends" in groups[1][1] and "the curve bends" not in table_1
    text = ledger.checks_text()
    assert text.splitlines()[0] == "Figures 1a:" and "Table 1:" in text and "<" not in text.replace("<beats>", "")
