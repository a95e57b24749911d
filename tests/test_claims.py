"""experiments.claims: the experiment chapters' checks, on numbers where the answer is known."""

from __future__ import annotations

import pandas as pd
import pytest

from ntk_core.experiments import claims
from ntk_core.report import Ledger

FIG_1A = {"noise": 0.4, "GD": 0.27, "GD+ES": 0.10, "GD+RDI": 0.114, "GD+AUX": 0.121, "KRR": 0.11,
          "gd_memorised": 0.9, "es_stops_early": True, "rdi_aux": 0.007, "converged": 9, "krr_gap": 0.006,
          "lam_converged": 2.0, "aux_fits": True, "aux_net": 0.3, "aux_net_all": 0.7, "clean_max": 0.024}


def test_figure_1a_checks_record_every_claim_and_each_one_can_fail():
    ledger = Ledger("t")
    claims.check_figure_1a(ledger, FIG_1A, "quick")
    assert len(ledger.claims) == 6 and {c.status for c in ledger.claims} == {"quick"}
    assert {c.anchor for c in ledger.claims} == {"exp-figure-1a"}
    for broken, match in (({"gd_memorised": 0.5}, "precondition"),
                          ({"GD+ES": 0.3}, "early stopping beats it"),
                          ({"es_stops_early": False}, "early stopping beats it"),
                          ({"GD+RDI": 0.3}, "GD\\+RDI and GD\\+AUX beat GD"),
                          ({"GD+AUX": 0.16}, "match GD\\+ES within 5 points"),
                          ({"rdi_aux": 0.02}, "same test error within 1 point"),
                          ({"converged": 0}, "within 3 points of KRR"),
                          ({"krr_gap": 0.05}, "within 3 points of KRR"),
                          ({"aux_fits": False}, "auxiliary variables"),
                          ({"aux_net": 0.7}, "auxiliary variables"),
                          ({"clean_max": 0.2}, "clean labels")):
        with pytest.raises(AssertionError, match=match):
            claims.check_figure_1a(Ledger("t"), {**FIG_1A, **broken}, "medium")


def test_figure_4_check_needs_the_fit_and_an_effect_beyond_the_noise():
    numbers = {"train_loss": 1e-5, "fits": True, "first": 0.071, "last": 0.055,
               "effect": {"mean": 0.016, "sem": 0.003, "seeds": 3}}
    ledger = Ledger("t")
    claims.check_figure_4(ledger, numbers, "medium")
    assert ledger.claims[0].status == "medium" and "1.6 ± 0.3 points" in ledger.claims[0].value
    with pytest.raises(AssertionError, match="precondition"):
        claims.check_figure_4(Ledger("t"), {**numbers, "fits": False}, "quick")
    with pytest.raises(AssertionError, match="two standard errors"):
        claims.check_figure_4(Ledger("t"), {**numbers, "effect": {"mean": 0.004, "sem": 0.003, "seeds": 3}}, "quick")
    with pytest.raises(AssertionError, match="two standard errors"):
        claims.check_figure_4(Ledger("t"), {**numbers, "effect": {"mean": 0.016, "sem": 0.003, "seeds": 2}}, "quick")


def test_figure_4_numbers_from_a_table():
    table = pd.DataFrame({"seed": [0, 0, 1, 1, 2, 2], "alpha": [0.0, 0.5] * 3,
                          "test_error": [0.08, 0.05, 0.07, 0.06, 0.09, 0.05], "train_error": [0.0] * 6,
                          "train_loss": [0.01, 0.02, 0.01, 0.01, 0.03, 0.01]})
    numbers = claims.figure_4(table, n_train=100)
    assert numbers["fits"] and numbers["train_loss"] == pytest.approx(3e-4)
    assert numbers["first"] == pytest.approx(0.08) and numbers["last"] == pytest.approx(0.16 / 3)
    assert numbers["effect"]["mean"] == pytest.approx((0.03 + 0.01 + 0.04) / 3)


def test_table_1_puts_the_paper_beside_each_scale():
    rows = []
    for seed in (0, 1):
        for method in ("Normal CCE (early stop)", "CCE+AUX (last)"):
            for noise in (0.0, 0.4):
                rows.append({"part": "summary", "seed": seed, "method": method, "noise": noise,
                             "test_acc": 0.5 + 0.1 * seed - noise / 2})
    quick = pd.DataFrame(rows)
    both = claims.table_1(quick)
    assert both.columns.tolist() == ["method", "noise", "quick", "medium", "paper (ResNet-34)"]
    row = both[(both["method"] == "CCE+AUX (last)") & (both["noise"] == 0.4)].iloc[0]
    assert row["quick"] == "35.00 ± 7.07" and row["medium"] == "—" and row["paper (ResNet-34)"] == "87.81 ± 0.37"
    assert len(both) == 4
