"""bookkit.verdicts: one verdict per exhibit of the paper, by a rule stated once, on claims whose answer is known."""

from __future__ import annotations

import pytest

from ntk_core.bookkit.ledger import STATUS_BADGES, STATUS_VERDICT, STATUSES, VERDICTS, Claim, Ledger
from ntk_core.bookkit.verdicts import PAPER, row_refs, verdict


def _c(status: str, scale: str = "", kind: str = "claim", ref: str = "Figure 1a", what: str = "x") -> Claim:
    return Claim(ref, what, status, f"value of {what}", scale=scale, kind=kind)


@pytest.mark.parametrize(
    "statuses, word",
    [
        (["quick", "quick"], "holds"),
        (["verified", "verified"], "verified"),
        (["verified", "quick"], "holds"),
        (["verified", "vacuous", "quick"], "vacuous"),
        (["quick", "not reproduced"], "holds in part"),
        (["quick", "inconclusive"], "holds in part"),
        (["quick", "premise not met"], "holds in part"),
        (["not reproduced", "inconclusive"], "does not hold"),
        (["inconclusive", "premise not met"], "cannot be tested at this scale"),
        (["not run"], "not run"),
        (["quick", "not run"], "holds"),  # a claim not run counts for nothing
    ],
)
def test_each_verdict_word_from_the_paper_claims(statuses, word):
    v = verdict([_c(s, what=f"c{i}") for i, s in enumerate(statuses)])
    assert v.word == word and word in VERDICTS
    short = [c for c in v.counted if STATUS_VERDICT[c.status] not in ("holds", "verified", "vacuous", "not run")]
    assert (v.why != "") == bool(short) or word == "vacuous" or word == "not run"
    for c in short:  # short of "holds": each claim that falls short is named, with its value
        assert c.statement in v.why and c.value in v.why


def test_the_books_own_checks_do_not_count():
    claims = [_c("quick"), _c("inconclusive", kind="check", what="a premise of the book")]
    assert verdict(claims).word == "holds"
    # ... and the same check as a claim of the paper would
    assert verdict([_c("quick"), _c("inconclusive", what="a premise of the book")]).word == "holds in part"


def test_judged_at_the_largest_scale_that_tested_it_exact_checks_at_any():
    live = [_c("quick", what="RDI beats GD")]
    medium = [_c("not reproduced", "medium", what="RDI beats GD")]
    exact = [_c("verified", what="the NTK is preserved")]
    v = verdict(live + medium + exact)
    assert (v.word, v.scale, v.others) == ("holds in part", "medium", "quick: holds")
    assert {c.statement for c in v.counted} == {"RDI beats GD", "the NTK is preserved"}
    assert all(c.scale == "medium" or c.status == "verified" for c in v.counted)
    # no record: the live build is judged, and says the record is missing
    v = verdict(live + [_c("not run", "medium")])
    assert (v.word, v.scale) == ("holds", "quick") and v.others.startswith("medium: ")
    # only exact checks: no scale
    assert verdict(exact).scale == "exact"


def test_a_stale_record_counts_for_nothing():
    live = [_c("inconclusive")]
    stale = [_c("stale", "medium"), _c("stale", "medium")]
    v = verdict(live + stale)
    assert (v.word, v.scale) == ("cannot be tested at this scale", "quick")
    assert "stale" in v.others


def test_statuses_are_shown_in_the_verdict_words_defined_once():
    assert set(STATUS_VERDICT) == set(STATUSES)
    assert set(STATUS_VERDICT.values()) <= set(VERDICTS)
    for status, (badge, meaning) in STATUS_BADGES.items():
        assert badge.startswith(STATUS_VERDICT[status]) and meaning.startswith(VERDICTS[STATUS_VERDICT[status]])


def test_one_row_per_exhibit_and_statement_in_the_papers_order():
    refs = ["Theorem 5.1", "Table 1", "Figure 4", "Eq. (12)", "Figure 1a", "Section 6.2", "Lemma A.1"]
    rows = row_refs([_c("quick", ref=r) for r in refs])
    assert rows == ["Figure 1a", "Figure 4", "Table 1", "Section 6.2", "Theorem 5.1", "Lemma A.1"]
    assert "Eq. (12)" not in PAPER  # a reference without a row of its own is in its chapter's Checks list


def test_a_headline_is_kept_at_its_scale_and_needs_its_numbers(tmp_path):
    from ntk_core.bookkit.ledger import load_headlines

    ledger = Ledger("ch")
    ledger.headline("Figure 1a", measured="GD − RDI = 11 points", scale="1,000 images", sure="3 seeds")
    with ledger.on_record({"stale": False}):
        ledger.headline("Figure 1a", measured="GD − RDI = 10 points", scale="2,000 images")
    with pytest.raises(ValueError, match="needs the paper's reference, the number measured and the scale"):
        ledger.headline("Figure 1a", measured="", scale="x")
    ledger.save(tmp_path)
    heads = load_headlines(tmp_path)
    assert [(h.level, h.measured, h.chapter) for h in heads] == [
        ("", "GD − RDI = 11 points", "ch"),
        ("medium", "GD − RDI = 10 points", "ch"),
    ]


def test_a_verdict_short_of_holds_says_why_in_a_few_words():
    claims = [
        _c("quick", what="a"),
        Claim("Figure 1a", "b", "premise not met", "13 % (premise not met: early stopping's grid brackets its step)"),
        Claim("Figure 1a", "c", "inconclusive", "-0.1 points; within 2.9 sampling errors"),
        Claim("Figure 1a", "d", "inconclusive", "+1 (one seed; the rule needs at least 3 seed(s))"),
        Claim("Figure 1a", "e", "not reproduced", "62 %"),
    ]
    assert verdict(claims).reasons == (
        "premise not met: early stopping's grid brackets its step",
        "within the sampling error",
        "too few seeds to measure the spread",
        "fails: e",
    )
    assert verdict(claims[:1]).reasons == ()
