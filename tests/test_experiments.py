"""ntk_core.experiments: Setting 1, the distance study and the difference trick end to end at tiny sizes,
plus the cache, resumption after an interruption, the command line, and bad configurations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ntk_core import data, experiments
from ntk_core.__main__ import main
from ntk_core.experiments import difference_trick, distance, setting1

TINY = {
    "setting1": dict(n_train=60, n_val=30, n_test=60, width=32, steps=30, eval_every=5,
                     noise_levels=(0.0, 0.4), lams=(0.5, 2.0)),
    "difference_trick": dict(n_train=60, n_test=60, width=32, steps=20, alphas=(0.0, 0.25, 0.5)),
    "distance": dict(n_train=40, width=32, steps=20, samples_grid=(20, 40), noise_grid=(0.0, 0.4),
                     width_grid=(32, 64), lam_grid=(0.5, 2.0), lr_grid=(0.5, 1.0)),
}


@pytest.fixture
def cache(tmp_path, monkeypatch, shared_data):
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    return tmp_path / "cache"


def _run(name, **extra):
    return experiments.run(name, "quick", **{**TINY[name], **extra})


def test_setting1_end_to_end(cache):
    result = _run("setting1")
    t = result.table
    assert set(t["method"]) == {"GD", "GD+ES", "GD+RDI", "GD+AUX", "KRR"}
    assert set(t["noise"]) == {0.0, 0.4}
    assert t["test_error"].between(0, 1).all() and t["val_error"].between(0, 1).all()
    # exactly one selected λ per (seed, noise, method), the one with the lowest validation error
    for _, g in t.groupby(["seed", "noise", "method"]):
        assert g["selected"].sum() == 1
        assert g.loc[g["selected"], "val_error"].iloc[0] == g["val_error"].min()
    # early stopping looks at validation error, so it can never be worse there than the last step
    for _, g in t.groupby(["seed", "noise"]):
        es, gd = g[g.method == "GD+ES"].iloc[0], g[g.method == "GD"].iloc[0]
        assert es["val_error"] <= gd["val_error"]
    # AUX's training error is measured with its auxiliary variables and fits the noisy labels better
    noisy = t[(t.noise == 0.4) & t.method.isin(["GD+AUX", "GD+RDI"])]
    for lam, g in noisy.groupby("lam"):
        aux, rdi = g[g.method == "GD+AUX"].iloc[0], g[g.method == "GD+RDI"].iloc[0]
        assert aux["train_error_noisy"] <= rdi["train_error_noisy"]
    meta = result.meta
    assert meta["profile"] == "quick" and meta["device"] == "cpu" and meta["seeds"] == [0]
    assert any("MNIST train" in d for d in meta["data"]) and meta["wall_time_s"] > 0
    summary = setting1.figure_table(t)
    assert set(summary.columns) >= {"noise", "method", "mean"}


def test_difference_trick_initial_output_vanishes_at_half(cache):
    t = _run("difference_trick").table.sort_values("alpha")
    rms = t["initial_output_rms"].to_numpy()
    assert rms[-1] == 0.0 and np.all(np.diff(rms) < 0)  # (√α − √(1−α)) g(θ(0)) shrinks to 0 at α = 1/2
    np.testing.assert_allclose(rms[:-1] / rms[0], t["initial_scale"].to_numpy()[:-1], rtol=1e-5)
    assert t["test_error"].between(0, 1).all()


def test_distance_study(cache):
    t = _run("distance").table
    assert set(t["factor"]) == set(distance.FACTORS)
    lam = t[t.factor == "lam"].sort_values("value")
    assert np.all(np.diff(lam["predicted"].to_numpy()) < 0)  # ridge solutions move less as λ grows
    assert np.all(np.diff(lam["distance"].to_numpy()) < 0)
    trend = distance.trends(t)
    assert list(trend["factor"]) == list(distance.FACTORS) and trend["spearman"].between(-1, 1).all()


def test_result_cache_is_keyed_by_config(cache):
    first = _run("difference_trick")
    again = _run("difference_trick")
    assert again.meta["cached"] and not first.meta["cached"]
    pd.testing.assert_frame_equal(first.table, again.table, check_dtype=False)
    other = _run("difference_trick", steps=21)
    assert not other.meta["cached"]


def test_interrupted_experiment_resumes_where_it_stopped(cache, monkeypatch):
    reference = _run("difference_trick", seeds=(1,)).table
    real = difference_trick._run
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(difference_trick, "_run", flaky)
    with pytest.raises(KeyboardInterrupt):
        _run("difference_trick", seeds=(1,), lr_scale=0.9)
    monkeypatch.setattr(difference_trick, "_run", real)
    resumed = _run("difference_trick", seeds=(1,), lr_scale=0.9)
    assert resumed.meta["units_resumed"] == 2 and resumed.meta["units_computed"] == 1
    uninterrupted = _run("difference_trick", seeds=(1,), lr_scale=0.9, use_cache=False)
    pd.testing.assert_frame_equal(resumed.table, uninterrupted.table, check_dtype=False)
    assert not reference.equals(resumed.table)  # another learning rate, another result


@pytest.mark.parametrize("name, overrides, match", [
    ("setting1", {"noise_levels": (0.1, 0.5)}, r"noise level must lie in \[0.0, 0.5\)"),
    ("setting1", {"lams": (0.0,)}, r"λ \(lams\) must lie in \(0.0"),
    ("setting1", {"width": 0}, "width must be an int >= 1"),
    ("difference_trick", {"alphas": (1.5,)}, r"α \(alphas\)"),
    ("distance", {"lam_grid": (-1.0,)}, "λ"),
    ("setting1", {"seeds": ()}, "seeds"),
    ("setting1", {"device": "tpu"}, "device must be"),
])
def test_bad_configuration_is_refused_before_training(name, overrides, match):
    with pytest.raises(ValueError, match=match):
        experiments.make_config(name, "quick", **overrides)


def test_unknown_experiment_field_and_profile():
    with pytest.raises(ValueError, match="profile must be"):
        experiments.make_config("setting1", "medium")
    with pytest.raises(ValueError, match="unknown experiment"):
        experiments.get("setting9")
    with pytest.raises(ValueError, match="no config field"):
        experiments.make_config("setting1", "quick", widht=3)


def test_missing_data_is_a_clear_error_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", str(tmp_path))          # nothing there
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data, "MNIST_MIRRORS", ["file:///nonexistent/"])  # no network in tests
    with pytest.raises(ValueError, match="only 800 examples.*NTK_CORE_DATA"):
        experiments.run("setting1", "quick", n_train=2000)


def test_command_line(cache, tmp_path, capsys):
    code = main(["run", "difference_trick", "--out", str(tmp_path / "out"),
                 *[f"--set={k}={v!r}" for k, v in TINY["difference_trick"].items()]])
    assert code == 0
    table = pd.read_csv(tmp_path / "out" / "difference_trick-quick.csv")
    assert len(table) == 3 and "test_error" in table
    assert "wall time" in capsys.readouterr().out
    assert main(["run", "setting1", "--set", "noise_levels=(0.7,)"]) == 2
    assert "noise level" in capsys.readouterr().err
    assert main(["list"]) == 0
