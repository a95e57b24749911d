"""The cross-experiment regime tables of ``ntk_core.bookkit.compare``, on small tables with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ntk_core.bookkit import compare


def _runs() -> pd.DataFrame:
    rows = []
    for seed in (0, 1):
        for noise in (0.0, 0.2):
            rows.append({"seed": seed, "noise": noise, "method": "GD", "lam": 0.0, "test_error": 0.30 + 0.02 * seed})
            for lam, drop in ((1.0, 0.05), (4.0, -0.02)):
                rows.append(
                    {
                        "seed": seed,
                        "noise": noise,
                        "method": "GD+RDI",
                        "lam": lam,
                        "test_error": 0.30 + 0.02 * seed - drop,
                    }
                )
            rows.append({"seed": seed, "noise": noise, "method": "GD+ES", "lam": 0.0, "test_error": 0.1})
    t = pd.DataFrame(rows)
    t["kernel_drift"] = 0.01 + 0.1 * t["lam"] + 0.001 * t["seed"]
    t["movement"], t["lin_agreement"] = 0.02, 0.99
    return t


def test_regime_gains_pair_each_run_with_vanilla_at_its_seed_and_noise():
    g = compare.regime_gains(_runs(), "GD", ["GD+RDI"]).set_index(["method", "lam"])
    assert set(g["noise"]) == {0.2}  # noise 0 has nothing to gain from
    assert g.loc[("GD+RDI", 1.0), "gain"] == pytest.approx(0.05) and g.loc[("GD+RDI", 4.0), "gain"] == pytest.approx(
        -0.02
    )
    assert g.loc[("GD", 0.0), "gain"] == 0.0 and "GD+ES" not in g.index.get_level_values("method")
    assert g.loc[("GD+RDI", 4.0), "kernel_drift"] == pytest.approx(0.4105) and (g["seeds"] == 2).all()
    t = _runs()
    with pytest.raises(ValueError, match="no GD run"):
        compare.regime_gains(t[~((t.method == "GD") & (t.seed == 1))], "GD", ["GD+RDI"])


def test_regime_ranges_span_each_experiment():
    t = _runs()
    r = compare.regime_ranges({"a": t, "b": t[t.lam == 0]}).set_index("experiment")
    assert r.loc["a", "runs"] == len(t) and r.loc["a", "kernel_drift_max"] == pytest.approx(0.411)
    assert r.loc["b", "kernel_drift_min"] == pytest.approx(0.01) and r.loc["b", "lin_agreement_max"] == 0.99
    assert r.loc["a", "lin_diverged"] == 0  # a table without the column: none counted
    t["lin_diverged"] = t["lam"] == 4.0
    t.loc[t["lin_diverged"], "lin_agreement"] = float("nan")  # the experiments leave it NaN where it diverged
    r = compare.regime_ranges({"a": t}).set_index("experiment")
    assert r.loc["a", "lin_diverged"] == 4 and r.loc["a", "lin_agreement_min"] == 0.99
    # an experiment that trains no linearisation (Setting 3): its agreement and divergence count are NaN
    r = compare.regime_ranges({"c": t.drop(columns=["lin_agreement", "lin_diverged"])}).set_index("experiment")
    assert (
        r.loc["c", "runs"] == len(t)
        and np.isnan(r.loc["c", "lin_agreement_max"])
        and np.isnan(r.loc["c", "lin_diverged"])
    )
    assert r.loc["c", "kernel_drift_max"] == pytest.approx(0.411)


def test_regime_display_formats_for_a_narrow_page():
    t = _runs().assign(lin_diverged=False, lin_step=[2.3456, 0.5] * (len(_runs()) // 2))
    shown = compare.regime_display(
        t[["lam", "kernel_drift", "movement", "lin_agreement", "lin_diverged", "lin_step"]].head(2)
    )
    assert list(shown.columns) == ["λ", "end", "moved", "agrees with lin.", "lin. diverged", "lin. step"]
    assert shown["lin. step"].tolist() == ["2.35", "0.50"]
    assert shown["λ"].tolist() == ["0", "1"] and shown["end"].iloc[1] == "0.11" and shown["moved"].iloc[0] == "2 %"


def test_record_duration_counts_the_units_compute_not_only_the_wall_of_the_last_command():
    from ntk_core.bookkit.compare import _duration

    assert _duration({"wall_time_s": 3000.0, "unit_seconds_total": 3050.0}) == "50 min"
    assert _duration({"wall_time_s": 3000.0}) == "50 min"
    # written from units computed over several sessions (or by parallel workers): both, each in its unit
    assert _duration({"wall_time_s": 3.0, "unit_seconds_total": 9937.3}) == (
        "2.8 h of unit compute (3 s wall for the command that wrote it)"
    )
    assert _duration({"wall_time_s": 3921.0, "unit_seconds_total": 7791.0}) == (
        "2.2 h of unit compute (65 min wall for the command that wrote it)"
    )


def test_divergence_line_groups_the_runs_that_diverged():
    gone = pd.DataFrame(
        {
            "seed": [0, 1, 2, 0],
            "noise": [0.0, 0.4, 0.4, 0.4],
            "loss": ["MSE", "MSE", "MSE", "CCE"],
            "aux": [True, True, True, True],
            "lam": [64.0, 64.0, 64.0, 64.0],
            "epoch": [4, 4, 5, 9],
        }
    )
    line = compare.divergence_line(gone, runs=68)
    assert line.startswith("4 of 72 runs diverged")
    assert "CCE+AUX at λ = 64: 1 run(s), noise 40%, epoch 9" in line
    assert "MSE+AUX at λ = 64: 3 run(s), noise 0%, 40%, epochs 4–5" in line
    assert compare.divergence_line(gone.iloc[:0], runs=72) == "no run diverged (72 runs)"


def test_run_details_fold_the_provenance_under_one_line(monkeypatch):
    """A run's summary and configuration are shown, escaped, inside one collapsed ``<details>``."""
    import IPython.display

    from ntk_core.experiments import Result

    meta = {"experiment": "setting1", "profile": "quick", "config_hash": "abc", "device": "cpu", "seeds": [0],
            "data": ["MNIST <train>: 60,000 images"], "wall_time_s": 12.3, "config": {"n_train": 1000, "lams": [0.5, 2.0]}}  # fmt: skip
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda payload, raw=False: shown.append(payload))
    compare.run_details(Result(pd.DataFrame(), meta))
    (payload,) = shown
    html = payload["text/html"]
    assert html.startswith('<details class="run-details"><summary>Run details: setting1, quick profile, 12 s</summary>')
    assert "MNIST &lt;train&gt;: 60,000 images" in html and "wall time: 12.3 s" in html
    assert "<td>0.5, 2</td>" in html and html.endswith("</details>")
    assert "wall time: 12.3 s" in payload["text/plain"]
