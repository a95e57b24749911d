"""ntk_core.experiments: Setting 1, the distance study and the difference trick end to end at tiny sizes,
plus the cache, resumption after an interruption, the command line, and bad configurations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from ntk_core import data, experiments
from ntk_core.__main__ import main
from ntk_core.experiments import difference_trick, distance, setting1
from ntk_core.experiments._shared import mark_protocol

TINY = {
    "setting1": dict(
        n_train=60, n_val=30, n_test=60, width=32, steps=30, eval_every=5, noise_levels=(0.0, 0.4), lams=(0.5, 2.0)
    ),
    "difference_trick": dict(n_train=60, n_test=60, width=32, steps=20, alphas=(0.0, 0.25, 0.5), seeds=(0,)),
    "distance": dict(
        n_train=40,
        width=32,
        steps=20,
        samples_grid=(20, 40),
        noise_grid=(0.0, 0.4),
        width_grid=(32, 64),
        lam_grid=(0.5, 2.0),
        lr_grid=(0.5, 1.0),
    ),
    "bound_scale": dict(
        binary_sizes=(60, 120),
        multiclass_sizes=(60, 120),
        empirical_n=60,
        width=64,
        n_test=100,
        lams=(0.5, 2.0),
        seeds=(0, 1),
    ),
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
    # one row per (seed, noise, method) kept by each protocol: least validation error (noisy labels for
    # `selected`, clean ones for `selected_oracle`), ties to the least validation MSE of the same labels
    for flag, err, mse in (
        ("selected", "val_error", "val_mse"),
        ("selected_oracle", "val_error_clean", "val_mse_clean"),
    ):
        for _, g in t.groupby(["seed", "noise", "method"]):
            assert g[flag].sum() == 1, (flag, g)
            if g["method"].iloc[0] in ("GD+RDI", "GD+AUX", "KRR"):
                chosen = g[g[flag]].iloc[0]
                ties = g[g[err] == g[err].min()]
                assert chosen[err] == g[err].min() and chosen[mse] == ties[mse].min()
    # the validation labels are as noisy as the training labels: the noisy and clean validation errors differ
    noisy_val = t[(t.noise == 0.4) & (t.method == "KRR")]
    assert (noisy_val["val_error"] != noisy_val["val_error_clean"]).any()
    clean_val = t[t.noise == 0.0]
    np.testing.assert_array_equal(clean_val["val_error"], clean_val["val_error_clean"])
    # the NTK regime, measured in every training run: drift and movement positive and growing along the run
    # for vanilla GD, predictions agreeing with the linearised network's on most test images
    runs = t[t.method.isin(["GD", "GD+RDI", "GD+AUX"])]
    assert (runs["kernel_drift"] > 0).all() and (runs["movement"] > 0).all()
    assert runs["lin_agreement"].between(0.5, 1.0).all() and runs["lin_test_error"].between(0, 1).all()
    gd = runs[runs.method == "GD"]
    assert (gd["kernel_drift_quarter"] <= gd["kernel_drift"]).all()
    # the network alone is the network: for GD and RDI (no auxiliary variables) it scores as the trainer did
    plain = t[t.method.isin(["GD", "GD+RDI"])]
    np.testing.assert_array_equal(plain["train_error_net"], plain["train_error_noisy"])
    # early stopping picks an evaluated step of the run
    es = t[t.method == "GD+ES"]
    assert ((es["stopped_at"] % TINY["setting1"]["eval_every"] == 0) & es["stopped_at"].between(1, 30)).all()
    for flag, err in (("selected", "val_error"), ("selected_oracle", "val_error_clean")):  # ES on each protocol
        picked = es[es[flag]]
        assert len(picked) == 2 and (picked[err] <= es.groupby("noise")[err].transform("min")[picked.index]).all()
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
    chosen = setting1.selection(t)
    assert len(chosen) == 2 * 3 and not chosen["bracketed"].any()  # a grid of two λ has no inside


def test_selection_brackets_only_strictly_inside_the_grid():
    rows = []
    for method in ("GD+RDI", "KRR"):
        for lam, err, mse in ((0.5, 0.2, 0.9), (1.0, 0.1, 0.5), (2.0, 0.1, 0.4), (4.0, 0.3, 1.0)):
            row = {"method": method, "lam": lam, "val_error": err, "val_mse": mse}
            rows.append({"seed": 0, "noise": 0.2, **row, "val_error_clean": err / 2, "val_mse_clean": -mse})
    frame = pd.DataFrame(rows)
    t = mark_protocol(frame, frame["method"].isin(["GD+RDI", "KRR"]))
    # the oracle reads the clean columns only: least clean error at λ = 1 and 2, the tie to λ = 1's lower MSE
    oracle = setting1.selection(t, oracle=True)
    assert list(oracle["lam"]) == [1.0, 1.0] and oracle["bracketed"].all()
    chosen = setting1.selection(t)
    assert list(chosen["lam"]) == [2.0, 2.0] and chosen["bracketed"].all()  # the tie goes to the lower MSE
    edge = t.assign(val_mse=np.where(t["lam"] == 4.0, 0.0, t["val_mse"]), val_error=0.1)
    assert not setting1.selection(mark_protocol(edge, edge["method"].isin(["GD+RDI", "KRR"])))["bracketed"].any()


def test_memorised_fraction_counts_reproduced_flips():
    rng = np.random.default_rng(0)
    clean = rng.choice([-1, 1], size=1000)
    noisy = clean.copy()
    flipped = rng.choice(1000, size=200, replace=False)
    noisy[flipped] *= -1
    pred = clean.copy()
    pred[flipped[:150]] = noisy[flipped[:150]]  # reproduces 150 of the 200 flips
    pred[np.setdiff1d(np.arange(1000), flipped)[:40]] *= -1  # and errs on 40 clean examples
    m = experiments.memorised_fraction(np.mean(pred != noisy), np.mean(pred != clean), 0.2)
    assert m == pytest.approx(0.75)
    with pytest.raises(ValueError, match="noise_rate"):
        experiments.memorised_fraction(0.1, 0.1, 0.0)


def test_difference_trick_initial_output_scales_as_the_lemma_says(cache):
    t = _run("difference_trick").table
    for _, g in t.groupby("seed"):
        g = g.sort_values("alpha")
        rms = g["initial_output_rms"].to_numpy()
        # f(θ(0)) = (√α − √(1−α)) g(θ(0)): the RMS is that factor times the RMS of g (the α = 0 run)
        np.testing.assert_allclose(rms / rms[0], g["initial_scale"].to_numpy(), rtol=1e-5, atol=1e-7)
    assert t["test_error"].between(0, 1).all() and (t["train_loss"] >= 0).all()


def test_difference_trick_paired_effect():
    t = pd.DataFrame(
        {"seed": [0, 0, 1, 1, 2, 2], "alpha": [0.0, 0.5] * 3, "test_error": [0.10, 0.06, 0.12, 0.07, 0.09, 0.06]}
    )
    e = difference_trick.paired_effect(t)
    np.testing.assert_allclose(e["differences"], [0.04, 0.05, 0.03])
    assert e["mean"] == pytest.approx(0.04) and e["std"] == pytest.approx(0.01)
    assert e["sem"] == pytest.approx(0.01 / np.sqrt(3)) and e["seeds"] == 3
    with pytest.raises(ValueError, match="no runs"):
        difference_trick.paired_effect(t, 0.0, 0.25)


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


@pytest.mark.parametrize("name", ["setting1", "difference_trick", "distance"])
def test_worker_processes_give_the_table_of_one_process(cache, name, monkeypatch):
    """Units computed in forked workers are the units a sequential run computes, bit for bit (each runs on one
    thread, as a sequential run here does), and they count as computed, not resumed."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = _run(name, use_cache=False)
        monkeypatch.setenv("NTK_CORE_CACHE", str(cache.parent / "cache_workers"))  # nothing of `one` to find
        two = _run(name, use_cache=False, workers=2)
    finally:
        torch.set_num_threads(before)
    pd.testing.assert_frame_equal(one.table, two.table, check_exact=True)
    assert two.meta["units_computed"] == one.meta["units_computed"] > 1 and two.meta["units_resumed"] == 0
    assert two.meta["units_from_workers"] == two.meta["units_computed"] and one.meta["units_from_workers"] == 0
    again = _run(name, workers=2)  # the whole result from the cache
    assert again.meta["cached"] and again.table.equals(two.table)


def test_a_unit_that_fails_in_a_worker_fails_the_run_with_its_own_error(cache, monkeypatch):
    """A worker that fails leaves its unit to the real run, which raises the unit's error; the units that
    succeeded are stored and reused by the next run."""
    real = difference_trick._run

    def broken(config, split, alpha, *args, **kwargs):
        if alpha == 0.25:
            raise FloatingPointError("planted failure at alpha 0.25")
        return real(config, split, alpha, *args, **kwargs)

    monkeypatch.setattr(difference_trick, "_run", broken)
    with pytest.raises(FloatingPointError, match="planted failure"):
        _run("difference_trick", workers=2)
    monkeypatch.setattr(difference_trick, "_run", real)
    fixed = _run("difference_trick", workers=2)
    assert fixed.meta["units_resumed"] == 2 and fixed.meta["units_computed"] == 1
    assert fixed.meta["units_from_workers"] == 1  # the repaired unit, computed in a worker this time


def test_workers_must_be_a_positive_count(cache):
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        _run("difference_trick", workers=0)


@pytest.mark.parametrize(
    "name, overrides, match",
    [
        ("setting1", {"noise_levels": (0.1, 0.5)}, r"noise level must lie in \[0.0, 0.5\)"),
        ("setting1", {"lams": (0.0,)}, r"λ \(lams\) must lie in \(0.0"),
        ("setting1", {"width": 0}, "width must be an int >= 1"),
        ("setting1", {"pool": 3}, r"pool \(a divisor of 28\) must be one of \(1, 2, 4, 7, 14, 28\)"),
        ("distance", {"pool": 5}, r"pool \(a divisor of 28\)"),
        ("difference_trick", {"alphas": (1.5,)}, r"α \(alphas\)"),
        ("distance", {"lam_grid": (-1.0,)}, "λ"),
        ("setting1", {"seeds": ()}, "seeds"),
        ("setting1", {"device": "tpu"}, "device must be"),
    ],
)
def test_bad_configuration_is_refused_before_training(name, overrides, match):
    with pytest.raises(ValueError, match=match):
        experiments.make_config(name, "quick", **overrides)


def test_the_config_base_checks_the_shared_fields_then_the_counts_then_the_experiments_own():
    from ntk_core._checks import check_interval
    from ntk_core.experiments._runner import ExperimentConfig, _jsonable

    @dataclasses.dataclass(frozen=True)
    class Toy(ExperimentConfig):
        profile: str = "quick"
        n: int = 2
        x: float = 0.5
        seeds: tuple[int, ...] = (0,)
        device: str = "cpu"
        counts = {"n": 2}

        def _check(self) -> None:
            check_interval(self.x, "x", 0.0, 1.0)

    # the base adds no field: field order, values (and so the config hashes) are the subclass's own
    assert [f.name for f in dataclasses.fields(Toy)] == ["profile", "n", "x", "seeds", "device"]
    assert _jsonable(Toy()) == {"profile": "quick", "n": 2, "x": 0.5, "seeds": [0], "device": "cpu"}
    for bad, error, match in [
        ({"profile": "huge"}, ValueError, "profile"),
        ({"seeds": ()}, ValueError, "seeds must be a non-empty tuple"),
        ({"seeds": (-1,)}, ValueError, "every seed must be an int >= 0"),
        ({"device": "tpu"}, ValueError, "device must be"),
        ({"n": 1}, ValueError, "n must be an int >= 2"),
        ({"n": 2.0}, TypeError, "n must be an int"),
        ({"x": 1.5}, ValueError, r"x must lie in \[0.0, 1.0\]"),
        ({"n": 1, "x": 1.5}, ValueError, "n must be"),  # the counts before the experiment's own checks
    ]:
        with pytest.raises(error, match=match):
            Toy(**bad)
    for name in experiments.EXPERIMENTS:
        config = experiments.make_config(name, "quick")
        assert list(_jsonable(config)) == [f.name for f in dataclasses.fields(config)]


def test_unknown_experiment_field_and_profile():
    with pytest.raises(ValueError, match="profile must be"):
        experiments.make_config("setting1", "huge")
    with pytest.raises(ValueError, match="unknown experiment"):
        experiments.get("setting9")
    with pytest.raises(ValueError, match="no config field"):
        experiments.make_config("setting1", "quick", widht=3)


def test_missing_data_is_a_clear_error_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", str(tmp_path))  # nothing there
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data, "MNIST_MIRRORS", ["file:///nonexistent/"])  # no network in tests
    with pytest.raises(ValueError, match="only 800 examples.*NTK_CORE_DATA"):
        experiments.run("setting1", "quick", n_train=2000)


def test_command_line(cache, tmp_path, capsys):
    code = main(
        [
            "run",
            "difference_trick",
            "--out",
            str(tmp_path / "out"),
            *[f"--set={k}={v!r}" for k, v in TINY["difference_trick"].items()],
        ]
    )
    assert code == 0
    table = pd.read_csv(tmp_path / "out" / "difference_trick-quick.csv")
    assert len(table) == 3 and "test_error" in table
    assert "wall time" in capsys.readouterr().out
    assert main(["run", "setting1", "--set", "noise_levels=(0.7,)"]) == 2
    assert "noise level" in capsys.readouterr().err
    assert main(["list"]) == 0


def test_result_table_text_columns_round_trip_in_either_pandas_dtype():
    """pandas 3 gives text columns a ``str`` dtype (pandas 2: ``object``); the cache stores both alike."""
    from ntk_core.experiments._runner import _round_trip

    for dtype in (object, "string"):
        table = pd.DataFrame({"method": pd.Series(["GD", "GD+RDI"], dtype=dtype), "error": [0.25, 0.125]})
        back = _round_trip(table)
        assert back["method"].tolist() == ["GD", "GD+RDI"] and back["error"].tolist() == [0.25, 0.125]
    with pytest.raises(TypeError, match="which the cache does not store"):
        _round_trip(pd.DataFrame({"when": pd.to_datetime(["2020-01-01"])}))
