"""Settings 2 and 3 (CIFAR) end to end at a tiny size, their config validation, and the CIFAR ResNet."""

from __future__ import annotations

import math
import numpy as np
import pytest
import torch

from ntk_core.experiments import make_config, run
from ntk_core.experiments import setting2, setting3
from ntk_core.resnet import CifarResNet, RandomCropFlip, resnet34
from ntk_core.bookkit import compare

#: tiny end-to-end configurations
TINY = {
    "setting2": dict(
        n_train=40,
        n_val=20,
        n_test=40,
        depth=4,
        channels=4,
        epochs=4,
        eval_every=1,
        batch_size=10,
        lams=(0.3, 3.0),
        curve_lam=0.3,
        clean_lams=(0.3,),
        pool=4,
        seeds=(0,),
        download=False,
    ),
    "setting3": dict(
        n_train=64,
        n_val=32,
        n_test=64,
        n_probe=16,
        width=4,
        epochs=4,
        lr_milestones=(2, 3),
        batch_size=32,
        noise_levels=(0.0, 0.4),
        seeds=(0,),
        download=False,
    ),
}

# --------------------------------------------------------------------------- ResNet


def test_resnet34_has_the_standard_parameter_count() -> None:
    model = resnet34(10, seed=0)
    assert sum(p.numel() for p in model.parameters()) == 21_282_122  # the CIFAR ResNet-34, ≈ 21.3M
    assert [len(stage) for stage in model.stages] == [3, 4, 6, 3]


def test_resnet_output_shape_and_seeded_init() -> None:
    x = torch.randn(5, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    a, b, c = (CifarResNet((1, 1, 1, 1), 8, 10, seed=s) for s in (3, 3, 4))
    for m in (a, b, c):
        m.eval()
    assert a(x).shape == (5, 10)
    torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
    assert not torch.allclose(a(x), c(x))
    assert CifarResNet((1, 1, 1, 1), 4, 3, seed=0).eval()(x).shape == (5, 3)


def test_resnet_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="blocks"):
        CifarResNet((1, 1, 1), 8)
    with pytest.raises(ValueError, match="width"):
        CifarResNet((1, 1, 1, 1), 0)


def test_random_crop_flip_is_identity_in_eval_mode_and_a_crop_in_training() -> None:
    x = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).reshape(2, 3, 8, 8)
    aug = RandomCropFlip(padding=2, seed=0)
    aug.eval()
    assert torch.equal(aug(x), x)
    aug.train()
    y = aug(x)
    assert y.shape == x.shape
    # every output pixel is either a padding zero or an input pixel of the same image and channel
    for i in range(2):
        for ch in range(3):
            values = set(x[i, ch].flatten().tolist()) | {0.0}
            assert set(y[i, ch].flatten().tolist()) <= values
    # same seed, same augmentation
    torch.testing.assert_close(RandomCropFlip(padding=2, seed=1)(x), RandomCropFlip(padding=2, seed=1)(x))


# --------------------------------------------------------------------------- Setting 2 network


def test_setting2_output_scale_is_the_relu_gain_of_every_layer() -> None:
    """Folding √2 into each layer after a ReLU equals one output factor 2^((depth-1)/2) (positive homogeneity)."""
    import copy
    import math

    from ntk_core.nets import ConvNet, OutputScale

    depth = 4
    g = ConvNet(3, 5, depth, 1, freeze_first_last=True, seed=2)
    gained = copy.deepcopy(g)
    convs = [m for m in gained.features if hasattr(m, "scale")]
    for layer in (*convs[1:], gained.readout):  # every layer whose input went through a ReLU
        layer.scale *= math.sqrt(2.0)
    x = torch.randn(3, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(OutputScale(g, 2.0 ** ((depth - 1) / 2))(x), gained(x))
    model = setting2.network(make_config("setting2", "quick", depth=depth, channels=5), seed=2)
    assert torch.allclose(model(x), torch.zeros(3), atol=1e-6)  # difference trick: f(θ(0), x) = 0
    # output_scale multiplies each copy's output on top of the ReLU gain (the NTK by its square)
    for scale, gain in ((4.0, True), (1.0, True), (3.0, False)):
        net = setting2.network(
            make_config("setting2", "quick", depth=depth, channels=5, output_scale=scale, relu_gain=gain), seed=2
        )
        expected = scale * (2.0 ** ((depth - 1) / 2) if gain else 1.0)
        torch.testing.assert_close(net.g1(x), expected * g(x))
    plain = setting2.network(
        make_config("setting2", "quick", depth=depth, channels=5, output_scale=1.0, relu_gain=False), seed=2
    )
    assert isinstance(plain.g1, ConvNet)  # no factor at all: the bare network


# --------------------------------------------------------------------------- configs


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"noise": 0.5}, "noise"),
        ({"noise": -0.1}, "noise"),
        ({"lams": (0.0, 1.0), "curve_lam": 1.0}, "lams"),
        ({"lams": (-1.0,), "curve_lam": -1.0}, "lams"),
        ({"curve_lam": 3.0}, "curve_lam"),
        ({"depth": 2}, "depth"),
        ({"lr": 1.0, "lams": (2.0,), "curve_lam": 2.0}, "unstable"),
        ({"lr": 0.05}, "unstable"),  # λ = 8 of the paper's grid needs lr < 1/32
        ({"pool": 3}, "pool"),
        ({"eval_every": 0}, "eval_every"),
        ({"output_scale": 0.0}, "output_scale"),
        ({"output_scale": float("inf")}, "output_scale"),
    ],
)
def test_setting2_rejects_bad_configs(overrides, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_config("setting2", "quick", **overrides)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"noise_levels": (0.9,)}, "noise"),
        ({"noise_levels": (-0.1,)}, "noise"),
        ({"noise_levels": ()}, "noise"),
        ({"lam_grid": (0.0,)}, "lam_grid"),
        ({"lam_grid": (4.0, 1.0)}, "lam_grid"),
        ({"lam_grid": ()}, "lam_grid"),
        ({"n_probe": 0}, "n_probe"),
        ({"n_test": 10, "n_probe": 20}, "n_probe"),
        ({"epochs": 3, "lr_milestones": (1, 2)}, "epochs"),
        ({"losses": ("hinge",)}, "losses"),
        ({"lr_milestones": (3, 2)}, "milestones"),
        ({"lr_milestones": (30,)}, "milestones"),  # must lie before the last epoch (quick: 30)
        ({"blocks": (1, 1, 1)}, "blocks"),
    ],
)
def test_setting3_rejects_bad_configs(overrides, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_config("setting3", "quick", **overrides)


def test_full_profiles_are_the_papers_scale(monkeypatch) -> None:
    import ntk_core.experiments._runner as base

    monkeypatch.setattr(base, "check_device", lambda device: device)  # full() asks for CUDA
    f2, f3 = setting2.Config.full(), setting3.Config.full()
    assert (f2.depth, f2.channels, f2.noise, f2.device, f2.pool) == (11, 192, 0.2, "cuda", 1)
    q2 = setting2.Config.quick()
    assert q2.depth >= 8 and q2.lams == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0) and q2.curve_lam == 4.0  # layer 7 trained
    assert q2.clean_lams == (2.0,)
    assert f2.lams == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0) and f2.curve_lam == 4.0 and f2.clean_lams == (2.0,)
    assert f2.output_scale == 1.0 and f2.relu_gain
    assert (f3.blocks, f3.width, f3.epochs, f3.lr_milestones) == ((3, 4, 6, 3), 64, 164, (82, 123))
    assert (f3.lr, f3.momentum, f3.weight_decay, f3.batch_size) == (0.1, 0.9, 5e-4, 128)
    assert f3.noise_levels == (0.0, 0.2, 0.4, 0.6) and f3.augment and f3.aux_weight_decay == 5e-4


def test_quick_and_medium_profiles_of_settings_2_and_3() -> None:
    """The quick sizes chosen so that vanilla training can fit the noisy labels, and the medium ones."""
    q2, m2 = setting2.Config.quick(), setting2.Config.medium()
    assert (q2.n_train, q2.pool, q2.depth, q2.channels, q2.output_scale) == (64, 4, 8, 16, 4.0)
    assert (q2.epochs, q2.batch_size, q2.lr, q2.seeds) == (150, 4, 0.025, (0,))
    # per-step stability with the NTK scaled by output_scale² (constant mode ≈ 0.87 per pair) and AUX at λ = 8
    assert q2.lr * q2.batch_size * 0.87 * q2.output_scale**2 < 2 and q2.lr * max(q2.lams) ** 2 < 2
    assert m2.profile == "medium" and m2.n_train + m2.n_val <= 762  # airplane/auto in the partial CIFAR-10
    # the quick network on more images, trained longer, three seeds (sized by trials: setting2.Config.medium)
    assert (m2.depth, m2.channels, m2.pool, m2.output_scale) == (q2.depth, q2.channels, q2.pool, q2.output_scale)
    assert m2.n_train >= 4 * q2.n_train and m2.epochs > q2.epochs and len(m2.seeds) == 3
    assert make_config("setting2", "medium") == m2
    q3, m3 = setting3.Config.quick(), setting3.Config.medium()
    assert (q3.n_train, q3.epochs, q3.lr_milestones, q3.augment, q3.seeds) == (256, 30, (15, 25), False, (0,))
    assert q3.n_test == 250 and q3.n_probe <= q3.n_test
    # c = λ² / (aux_weight_decay · n) of the full profile kept: 5e-4 · 45,000 / n
    for c in (q3, m3):
        assert c.aux_weight_decay * c.n_train == pytest.approx(5e-4 * 45_000, rel=0.02)
    assert m3.profile == "medium" and m3.n_train + m3.n_val <= 4_000 and m3.width > q3.width
    assert make_config("setting3", "medium") == m3
    # a factor 16 beyond the first record's (1, 4, 16) on both sides: it chose the top on every seed at noise 0.4
    assert m3.lam_grid == (0.25, 1.0, 4.0, 16.0, 64.0)


# --------------------------------------------------------------------------- end to end, tiny


@pytest.fixture
def cifar_env(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    # tiny networks gain nothing from two threads, and on a shared 2-core machine two threads can
    # be 5-10x slower than one (measured): run these end-to-end tests single-threaded, then restore
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield shared_data
    torch.set_num_threads(threads)


def test_setting2_tiny_end_to_end(cifar_env) -> None:
    result = run("setting2", "quick", use_cache=False, **TINY["setting2"])
    t = result.table
    assert set(t["part"]) == {"curves", "layers", "summary", "spectrum"}
    assert set(t["noise"]) == {0.0, 0.2}
    summary = t[t["part"] == "summary"]
    for p in (0.0, 0.2):
        assert set(summary[summary["noise"] == p]["method"]) == {"SGD", "SGD+ES", "SGD+AUX", "SGD+RDI"}
    curves = t[t["part"] == "curves"]
    assert len(curves) == (1 + 2 * 2 + 3) * 4  # noise 0.2: SGD + 2 λ x (AUX, RDI); noise 0: 3 runs; 4 epochs
    for col in ("train_error", "train_error_clean", "val_error", "test_error"):
        assert curves[col].between(0, 1).all(), col
    # AUX: the training error measured with the auxiliary variables is at most that of the network alone
    aux = summary[summary["method"] == "SGD+AUX"]
    assert (aux["train_error"] <= aux["train_error_net"] + 1e-12).all()
    # early stopping picks the epoch of least validation error of the SGD run
    for p in (0.0, 0.2):
        sgd = curves[(curves["method"] == "SGD") & (curves["noise"] == p)]
        es = summary[(summary["method"] == "SGD+ES") & (summary["noise"] == p)].iloc[0]
        assert es["val_error"] == sgd["val_error"].min()
    layers = t[t["part"] == "layers"]
    # depth 4: layers 2 and 3 trained (1 and the readout frozen), two copies of the difference trick
    assert set(layers["layer"]) == {2, 3} and set(layers["copy"]) == {1, 2}
    assert (layers["norm"] > 0).all() and (layers[layers["epoch"] == 0]["dist"] == 0).all()
    first = layers[layers["epoch"] == 1]
    assert (first["dist"] > 0).all()  # every trained layer moved
    # ‖W(0)‖_F of a 4-channel 3x3 NTK convolution: N(0, 1) weights, 4·4·9 of them, both copies identical
    init = layers[layers["epoch"] == 0]["norm"]
    assert init.between(0.5 * 12, 1.5 * 12).all()
    assert (
        layers[layers["epoch"] == 0].groupby(["seed", "noise", "method", "lam", "layer"])["norm"].nunique().eq(1).all()
    )
    # layer_curves joins the two copies: √(‖W₁‖² + ‖W₂‖²), and relative = dist / ‖W(0)‖
    lc = setting2.layer_curves(t, 0.2, 0.3, 3)
    raw = layers[
        (layers["noise"] == 0.2) & (layers["layer"] == 3) & (layers["method"] == "SGD") & (layers["epoch"] == 2)
    ]
    got = lc[(lc["method"] == "SGD") & (lc["epoch"] == 2)].iloc[0]
    assert got["norm"] == pytest.approx(float(np.sqrt((raw["norm"] ** 2).sum())))
    assert got["dist"] == pytest.approx(float(np.sqrt((raw["dist"] ** 2).sum())))
    assert (lc[lc["epoch"] == 0]["relative"] == 0).all() and (lc[lc["epoch"] > 0]["relative"] > 0).all()
    with pytest.raises(ValueError, match="layer 7"):
        setting2.layer_curves(t, 0.2, 0.3, 7)
    # λ sweep: a larger λ keeps θ closer to θ(0) for both regularisers
    sw = setting2.sweep(t, 0.2).set_index(["method", "lam"])["dist"]
    assert sw[("SGD+RDI", 3.0)] < sw[("SGD+RDI", 0.3)] and sw[("SGD+AUX", 3.0)] < sw[("SGD+AUX", 0.3)]
    # the protocol's tables: one choice per (noise, method), a bracket row per tuned (seed, noise, method)
    prot = setting2.protocol_table(t)
    assert len(prot) == 2 * 4 and set(prot["method"]) == {"SGD", "SGD+ES", "SGD+AUX", "SGD+RDI"}
    assert (prot.loc[prot["method"] == "SGD", "noisy"] == prot.loc[prot["method"] == "SGD", "oracle"]).all()
    assert len(setting2.selection(t)) == 2 * 2 and len(setting2.chosen(t)) == 2 * 4
    # the regime table: every run's regime columns, the linearisation's over the seeds where it converged
    reg = setting2.regime_table(t)
    assert len(reg) == (1 + 2 * 2) + 3 and reg["kernel_drift"].gt(0).all() and reg["lin_diverged"].between(0, 1).all()
    runs = setting2.training_runs(t).set_index(["noise", "method", "lam"])["lin_step"]
    assert reg.set_index(["noise", "method", "lam"])["lin_step"].sort_index().equals(runs.sort_index())  # one seed
    assert runs.gt(0).all()
    # spectrum of the training-set NTK: the labels' energy is split over the eigenvectors
    spec = t[t["part"] == "spectrum"]
    assert len(spec) == 40 and spec["energy"].sum() == pytest.approx(1.0)
    assert (np.diff(spec["eigenvalue"].to_numpy()) <= 0).all() and spec["eigenvalue"].min() > -1e-6
    lin = setting2.fitted_by_linear_sgd(t, result.meta["config"])
    assert 0 <= lin["directions"] <= 40 and 0.0 <= lin["fitted"] <= 1.0
    assert "PARTIAL" in " ".join(result.meta["data"])  # the partial CIFAR-10 is reported as such


def test_setting3_tiny_end_to_end(cifar_env) -> None:
    result = run("setting3", "quick", use_cache=False, **TINY["setting3"])
    t = result.table
    grid = result.meta["config"]["lam_grid"]
    assert set(t["part"]) == {"curves", "summary"}
    summary = t[t["part"] == "summary"]
    expected = {
        "Normal CCE (early stop)",
        "Normal MSE (early stop)",
        "Normal CCE (last)",
        "Normal MSE (last)",
        "CCE+AUX (last)",
        "CCE+AUX (best)",
        "MSE+AUX (last)",
        "MSE+AUX (best)",
    }
    for p in (0.0, 0.4):
        assert set(summary[summary["noise"] == p]["method"]) == expected
    for col in ("test_acc", "val_acc", "best_test_acc"):
        assert summary[col].between(0, 1).all()
    assert (summary["best_test_acc"] >= summary["test_acc"]).all()
    noise_actual = summary.groupby("noise")["noise_actual"].first()
    assert noise_actual[0.0] == 0.0 and noise_actual[0.4] == 26 / 64  # exactly round(0.4 · 64) labels corrupted
    curves = t[t["part"] == "curves"]
    assert len(curves) == 2 * 2 * (1 + len(grid)) * 4  # noise × loss × (normal + AUX at each λ) × epochs
    assert curves[curves["epoch"] == 1]["lr"].unique().tolist() == pytest.approx([0.1])
    assert sorted(curves["lr"].unique()) == pytest.approx([0.001, 0.01, 0.1])
    for col in ("train_acc", "train_acc_clean", "val_acc", "val_acc_clean", "test_acc"):
        assert curves[col].between(0, 1).all(), col
    assert np.isfinite(curves["train_loss"]).all()
    # the protocol's validation labels: clean at noise 0, corrupted (exactly round(0.4 · 32) = 13) at noise 0.4
    clean_val = curves[curves["noise"] == 0.0]
    assert (clean_val["val_acc"] == clean_val["val_acc_clean"]).all()
    assert (curves[curves["noise"] == 0.4]["val_acc"] != curves[curves["noise"] == 0.4]["val_acc_clean"]).any()
    # one choice per (seed, noise, method) and protocol; recomputed from the curves of each run
    for flag, column, by in (("selected", "val_acc", "noisy"), ("selected_oracle", "val_acc_clean", "clean")):
        kept = summary[summary[flag]]
        assert kept.groupby(["seed", "noise", "method"]).size().eq(1).all() and len(kept) == 2 * 8
        for r in kept.itertuples():
            run_curves = curves[
                (curves["noise"] == r.noise)
                & (curves["loss"] == r.loss)
                & (curves["aux"] == r.aux)
                & ((curves["lam"] == r.lam) | (curves["lam"].isna() & (r.lam != r.lam)))
            ]
            if r.method.endswith("(last)"):
                assert r.epoch == 4
            else:  # the first epoch of best validation accuracy on the protocol's labels
                assert r.epoch == int(run_curves.loc[run_curves[column].idxmax(), "epoch"])
            if r.aux:  # λ: no other λ of the grid does better on the same labels at its chosen epoch
                rivals = summary[(summary["noise"] == r.noise) & (summary["method"] == r.method)]
                rivals = rivals[rivals["stop"].isna() | (rivals["stop"] == by)]
                assert sorted(rivals["lam"]) == sorted(grid)
                error = "val_error" if by == "noisy" else "val_error_clean"
                assert getattr(r, error) == rivals[error].min()
    assert (setting3.chosen(t)["part"] == "curves").sum() == 2 * 2 * 2 * 4  # the chosen λ's curves only
    # the NTK regime on every run's last row, nowhere else
    last = summary[summary["method"].str.endswith("(last)")]
    regime = setting3.regime_table(t)
    assert len(regime) == len(last) == 2 * 2 * (1 + len(grid))
    for col in ("kernel_drift_quarter", "kernel_drift_half", "kernel_drift", "movement"):
        assert (regime[col] > 0).all() and np.isfinite(regime[col]).all(), col
        assert summary[~summary["method"].str.endswith("(last)")][col].isna().all()
    # the same runs for the cross-setting comparison: the method without "(last)", λ = 0 for normal training
    runs = setting3.training_runs(t)
    assert len(runs) == len(last) and (runs["test_error"].to_numpy() == 1 - last["test_acc"].to_numpy()).all()
    assert set(runs["method"]) == {"Normal CCE", "CCE+AUX", "Normal MSE", "MSE+AUX"}
    assert (runs.loc[runs["method"].str.startswith("Normal"), "lam"] == 0).all()
    assert (runs["kernel_drift"].to_numpy() == regime["kernel_drift"].to_numpy()).all()
    gains = compare.regime_gains(runs[runs["loss"] == "CCE"], "Normal CCE", ["CCE+AUX"])
    assert len(gains) == 1 + len(grid) and (gains.loc[gains["method"] == "Normal CCE", "gain"] == 0).all()
    table = setting3.table1(t)
    assert list(table.columns) == [0.0, 0.4] and len(table) == 8
    assert len(setting3.selection(t)) == 2 * 4  # per noise: (last) and (best) for each loss
    choices = setting3.lam_choices(t).set_index(["noise", "method"])
    for r in summary[summary["aux"] & summary["selected"]].itertuples():
        assert choices.loc[(r.noise, r.method), "lam"] == [r.lam]
    for r in summary[summary["aux"] & summary["selected_oracle"]].itertuples():
        assert choices.loc[(r.noise, r.method), "lam_oracle"] == [r.lam]
    assert (choices["seeds"] == 1).all() and choices["bracketed"].between(0, 1).all()
    top = summary[summary["aux"] & summary["selected"]]  # the noisy-label choices, one per (noise, method)
    assert setting3.choices_at_top(setting3.lam_choices(t), grid) == (int((top["lam"] == max(grid)).sum()), len(top))
    shown = compare.lam_choices_display(setting3.lam_choices(t))
    assert list(shown.columns) == [
        "noise p",
        "method",
        "λ by seed (noisy validation)",
        "λ by seed (oracle)",
        "grid brackets it",
    ]
    assert set(shown["noise p"]) == {"0%", "40%"} and shown["grid brackets it"].str.endswith("of 1").all()
    means = setting3.regime_means(t)
    assert len(means) == 2 * 2 * (1 + len(grid)) and "lam" not in means
    assert set(means["run"]) == {"normal", *(f"AUX, λ = {v:g}" for v in grid)}
    assert means["kernel_drift"].tolist() == pytest.approx(
        regime.groupby(["noise", "loss", "lam"], dropna=False)["kernel_drift"].mean().tolist()
    )


def test_setting3_keeps_a_diverged_run_as_a_finding(cifar_env) -> None:
    """AUX at a λ so large that its auxiliary variables overshoot: the run diverges, and the record keeps it."""
    tiny = {**TINY["setting3"], "noise_levels": (0.4,), "losses": ("mse",), "lam_grid": (1.0, 1e3)}
    t = run("setting3", "quick", use_cache=False, **tiny).table
    gone = setting3.divergences(t)
    assert len(gone) == 1 and gone.loc[0, "lam"] == 1e3 and bool(gone.loc[0, "aux"])
    assert 1 <= gone.loc[0, "epoch"] <= tiny["epochs"]
    lost = t[t["lam"] == 1e3]
    assert len(lost) == 3 and set(lost["part"]) == {"summary"}  # (last) and the two stops; no curves
    assert lost["diverged"].all() and lost["test_acc"].isna().all() and (lost["val_error"] == 1.0).all()
    assert not lost["selected"].any() and not lost["selected_oracle"].any()
    assert not t.loc[t["lam"] != 1e3, "diverged"].astype(bool).any()
    # no network to measure: the regime tables and the cross-setting runs leave it out
    assert 1e3 not in set(setting3.regime_table(t)["lam"]) and len(setting3.training_runs(t)) == 2
    # a grid whose top diverged: its high end is the worst validation error, the choice is the λ below
    sel = setting3.selection(t)
    assert (sel["val_error_high_end"] == 1.0).all() and (sel["lam"] == 1.0).all()
    assert setting3.divergences(t[t["lam"] != 1e3]).empty


def test_setting3_regime_tracker_only_reads_the_network(monkeypatch) -> None:
    """The same run with the regime measures switched off gives the same numbers bit for bit, and the drift
    is the relative change of the NTK of evaluation-mode copies with the training images' BatchNorm statistics."""
    from ntk_core import empirical_ntk, with_batch_statistics
    from ntk_core.experiments._shared import REGIME_COLUMNS, RegimeTracker, Splits

    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (48,), generator=g)
    split = Splits(x[:32], y[:32], x[32:40], y[32:40], x[40:], y[40:])
    config = setting3.Config(
        n_train=32, n_val=8, n_test=8, n_probe=4, width=4, epochs=4, lr_milestones=(2, 3), batch_size=8, download=False
    )
    y_val_noisy = (y[32:40] + 1) % 10
    seen = {}
    original = RegimeTracker.columns

    def spy(self, *args):
        # recompute the last drift from its definition, on the network as the tracker measures it
        now, start = with_batch_statistics(self.model, split.x_train, 8), self.initial
        k_t = empirical_ntk(now, split.x_test[:4], output="trace", out_dtype=torch.float64)
        k_0 = empirical_ntk(start, split.x_test[:4], output="trace", out_dtype=torch.float64)
        seen["drift"] = float(torch.linalg.norm(k_t - k_0) / torch.linalg.norm(k_0))
        return original(self, *args)

    monkeypatch.setattr(RegimeTracker, "columns", spy)
    rows = setting3._run(config, split, y[:32], y_val_noisy, "ce", 4.0, 0, False)
    last = next(r for r in rows if r["method"] == "CCE+AUX (last)")
    assert last["kernel_drift"] == pytest.approx(seen["drift"], rel=1e-12)
    assert [k for k in last if k in REGIME_COLUMNS] == list(REGIME_COLUMNS[:4])  # the table's order
    monkeypatch.setattr(RegimeTracker, "__call__", lambda self, epoch: None)
    monkeypatch.setattr(RegimeTracker, "columns", lambda self, *a: dict.fromkeys(REGIME_COLUMNS, math.nan))
    bare = setting3._run(config, split, y[:32], y_val_noisy, "ce", 4.0, 0, False)
    for a, b in zip(rows, bare):
        for key in set(b) - set(REGIME_COLUMNS):
            assert a[key] == b[key] or (a[key] != a[key] and b[key] != b[key]), key


def test_setting2_weight_figures_are_the_papers_and_their_ends_the_last_epoch() -> None:
    import pandas as pd

    config = {"noise": 0.2, "curve_lam": 4.0, "clean_lams": [2.0, 8.0]}
    assert setting2.weight_figures(config) == [
        ("Figure 3", 0.2, 4.0, 4),
        ("Figure 6", 0.2, 4.0, 7),
        ("Figure 7", 0.0, 2.0, 4),
        ("Figure 8", 0.0, 2.0, 7),
    ]
    rows = []
    for p, lam in ((0.2, 4.0), (0.0, 2.0)):
        for layer in (4, 7):
            for method, m_lam in (("SGD", 0.0), ("SGD+AUX", lam), ("SGD+RDI", lam), ("SGD+AUX", 99.0)):
                for epoch, dist in ((0, 0.0), (1, 0.5), (2, 1.0 + layer / 10 + m_lam / 100)):
                    rows.append(
                        {
                            "part": "layers",
                            "seed": 0,
                            "noise": p,
                            "layer": layer,
                            "method": method,
                            "lam": m_lam,
                            "epoch": epoch,
                            "copy": 1,
                            "norm": 10.0,
                            "dist": dist,
                        }
                    )
    ends = setting2.weight_figure_ends(pd.DataFrame(rows), config).set_index("figure")
    # the relative distance at the last epoch of each method at the figure's λ (the other λ is left out)
    assert ends.loc["Figure 6", "SGD"] == pytest.approx(1.7 / 10) and ends.loc["Figure 3", "SGD+AUX"] == pytest.approx(
        (1.4 + 0.04) / 10
    )
    assert ends.loc["Figure 8", "SGD+RDI"] == pytest.approx((1.7 + 0.02) / 10) and ends.loc["Figure 7", "lam"] == 2.0


def test_setting3_corrupts_an_exact_fraction_to_other_classes() -> None:
    clean = np.repeat(np.arange(10), 100)
    noisy = setting3.corrupt_exact(clean, 0.37, 10, seed=3)
    changed = noisy != clean
    assert changed.sum() == 370  # exactly round(0.37 · 1000)
    counts = np.bincount((noisy[changed] - clean[changed]) % 10, minlength=10)
    assert counts[0] == 0 and counts[1:].min() > 20  # every other class is reachable, never the clean one
    np.testing.assert_array_equal(noisy, setting3.corrupt_exact(clean, 0.37, 10, seed=3))
    assert (setting3.corrupt_exact(clean, 0.0, 10, seed=0) == clean).all()
    with pytest.raises(ValueError, match="labels"):
        setting3.corrupt_exact(np.array([0, 10]), 0.5, 10, seed=0)


def test_setting3_paired_gain() -> None:
    import pandas as pd

    rows = [
        {"part": "summary", "noise": 0.4, "seed": seed, "method": m, "test_acc": acc}
        for seed, a, b in ((0, 0.30, 0.25), (1, 0.28, 0.26), (2, 0.33, 0.27))
        for m, acc in (("CCE+AUX (last)", a), ("Normal CCE (early stop)", b))
    ]
    g = setting3.paired_gain(pd.DataFrame(rows), 0.4, "CCE+AUX (last)", "Normal CCE (early stop)")
    np.testing.assert_allclose(g["differences"], [0.05, 0.02, 0.06])
    assert g["mean"] == pytest.approx(13 / 300) and g["std"] == pytest.approx(np.std([0.05, 0.02, 0.06], ddof=1))
    assert g["sem"] == pytest.approx(g["std"] / np.sqrt(3))
    with pytest.raises(ValueError, match="MSE"):
        setting3.paired_gain(pd.DataFrame(rows), 0.4, "MSE+AUX (last)", "Normal CCE (early stop)")


def test_setting3_memorisation_follows_the_network_alone_at_the_largest_noise() -> None:
    import pandas as pd

    rows = [
        {
            "part": "curves",
            "noise": p,
            "noise_actual": 0.4 if p else 0.0,
            "seed": seed,
            "loss": "CCE",
            "aux": aux,
            "epoch": e,
            "train_acc_clean": 0.9 - 0.1 * e - 0.05 * aux + 0.01 * seed - p,
            "train_acc_net": 0.5 + 0.2 * e + 0.1 * aux + 0.02 * seed + p,
            "test_acc": 0.3 + 0.01 * seed,
        }
        for p in (0.0, 0.4)
        for seed in (0, 1, 2)
        for aux in (False, True)
        for e in (1, 2)
    ] + [
        {
            "part": "summary",
            "noise": 0.4,
            "noise_actual": 0.4,
            "seed": 0,
            "loss": "CCE",
            "aux": True,
            "epoch": 9,
            "train_acc_clean": 5.0,
            "test_acc": 5.0,
        }
    ]
    m = setting3.memorisation(pd.DataFrame(rows))
    assert m[["loss", "aux", "epoch"]].values.tolist() == [
        ["CCE", False, 1],
        ["CCE", False, 2],
        ["CCE", True, 1],
        ["CCE", True, 2],
    ]
    # mean over seeds at noise 0.4 only (curves, not summary rows): 0.9 − 0.1e − 0.05·aux + 0.01 − 0.4
    np.testing.assert_allclose(m["clean_fit"], [0.41, 0.31, 0.36, 0.26])
    np.testing.assert_allclose(m["clean_fit_std"], 0.01)
    np.testing.assert_allclose(m["noisy_fit"], [1.12, 1.32, 1.22, 1.42])  # 0.5 + 0.2e + 0.1·aux + 0.02 + 0.4
    np.testing.assert_allclose(m["noisy_fit_std"], 0.02)
    # records made before train_acc_net existed: noisy_fit is NaN, the rest unchanged
    old = setting3.memorisation(pd.DataFrame(rows).drop(columns="train_acc_net"))
    assert old["noisy_fit"].isna().all()
    np.testing.assert_allclose(old["clean_fit"], m["clean_fit"])
    np.testing.assert_allclose(m["test_acc"], 0.31)
    np.testing.assert_allclose(m["memorised_level"], 0.6)
    # paired by seed at the last epoch: AUX − normal = −0.05 on every seed
    g = setting3.memorisation_gain(pd.DataFrame(rows), "CCE")
    np.testing.assert_allclose(g["differences"], [-0.05, -0.05, -0.05])
    assert g["seeds"] == 3 and g["level"] == pytest.approx(0.6)
    np.testing.assert_allclose(g["aux_last"], [0.25, 0.26, 0.27])
    np.testing.assert_allclose(g["normal_last"], [0.3, 0.31, 0.32])
    assert not g["memorised"]  # 0.3 and 0.25 are far from 1 − p = 0.6
    # the epoch from which the curve stays at 1 − p: rising from below, dipping away once, never reaching it
    memo = pd.DataFrame(
        {
            "loss": "CCE",
            "aux": [False] * 5 + [True] * 5,
            "epoch": [1, 2, 3, 4, 5] * 2,
            "clean_fit": [0.1, 0.6, 0.5, 0.601, 0.6, 0.1, 0.2, 0.3, 0.4, 0.5],
            "memorised_level": 0.6,
        }
    )
    assert setting3.memorised_from(memo) == {("CCE", False): 4, ("CCE", True): None}
    np.testing.assert_allclose(g["aux_noisy_last"], [1.4, 1.42, 1.44])  # at epoch 2: 0.5 + 0.4 + 0.1 + 0.02s + 0.4
    np.testing.assert_allclose(g["normal_noisy_last"], [1.3, 1.32, 1.34])
    at_level = pd.DataFrame(rows).assign(train_acc_clean=lambda t: 0.6 + 0.001 * t["seed"], train_acc_net=1.0)
    assert setting3.memorisation_gain(at_level, "CCE")["memorised"]
    assert not setting3.memorisation_gain(at_level, "CCE", tol=0.001)["memorised"]
    # at 1 − p on the clean labels but missing noisy labels (predicting a third class on some): not memorised
    third = at_level.assign(train_acc_net=lambda t: 1.0 - 0.02 * t["aux"])
    assert not setting3.memorisation_gain(third, "CCE")["memorised"]
    # records without train_acc_net: judged on the clean labels alone
    legacy = setting3.memorisation_gain(at_level.drop(columns="train_acc_net"), "CCE")
    assert legacy["memorised"] and legacy["aux_noisy_last"] is None
    with pytest.raises(ValueError, match="no curves for loss 'MSE'"):
        setting3.memorisation_gain(pd.DataFrame(rows), "MSE")


def test_setting2_fitted_by_linear_sgd_reads_the_spectrum() -> None:
    import pandas as pd

    table = pd.DataFrame(
        {"part": "spectrum", "seed": 0, "index": [0, 1, 2], "eigenvalue": [100.0, 1.0, 0.01], "energy": [0.5, 0.3, 0.2]}
    )
    lin = setting2.fitted_by_linear_sgd(table, {"lr": 0.01, "epochs": 10})
    # lr μ E = 10, 0.1, 0.001: one direction fitted; shrink (1 − lr μ)^{2E} = 0, 0.99^20, 0.9999^20
    assert lin["directions"] == 1 and lin["energy"] == pytest.approx(0.5) and lin["threshold"] == pytest.approx(10)
    expected = 0.5 + 0.3 * (1 - 0.99**20) + 0.2 * (1 - 0.9999**20)
    assert lin["fitted"] == pytest.approx(expected)


def test_setting3_trainer_settings_equal_batch_mean_sgd() -> None:
    config = make_config("setting3", "quick", mse_scale=0.5)
    ce = setting3._train_config(config, "ce", 4.0, 0)
    mse = setting3._train_config(config, "mse", None, 0)
    mse_aux = setting3._train_config(config, "mse", 4.0, 0)
    b = config.batch_size
    assert ce.lr * b == pytest.approx(0.1) and ce.weight_decay * ce.lr == pytest.approx(0.1 * 5e-4)
    # lr × weight decay per step: the batch-mean one, with the squared loss's auxiliary weight decay × mse_scale
    assert ce.aux_weight_decay * ce.lr == pytest.approx(0.1 * config.aux_weight_decay)
    assert mse_aux.aux_weight_decay * mse_aux.lr == pytest.approx(0.1 * 0.5 * config.aux_weight_decay)
    assert ce.lam == 4.0 and ce.momentum == 0.9 and ce.lr_milestones == config.lr_milestones
    assert mse.lr * b == pytest.approx(0.05) and mse.weight_decay * mse.lr == pytest.approx(0.1 * 5e-4)
    assert mse.method == "early_stopping" and mse.loss == "l2" and mse.aux_weight_decay == 0.0


@pytest.mark.parametrize("name", ["setting2", "setting3"])
def test_missing_data_is_a_clear_error_before_training(name, empty_data_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match="CIFAR-10"):
        run(name, "quick", use_cache=False, download=False)
    assert not list((tmp_path / "cache").rglob("*.json"))  # no unit was trained


@pytest.mark.parametrize("name, sizes", [("setting2", {"n_train": 5_000}), ("setting3", {"n_train": 45_000})])
def test_sizes_beyond_the_partial_data_fail_before_training(name, sizes, cifar_env) -> None:
    with pytest.raises(ValueError, match="NTK_CORE_DATA"):
        run(name, "quick", use_cache=False, download=False, **sizes)


def test_plot_helpers_draw_the_papers_panels() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from ntk_core.bookkit import plots

    curves = pd.DataFrame(
        {
            "method": ["SGD"] * 3 + ["SGD+AUX"] * 3,
            "epoch": [0, 1, 2] * 2,
            "norm": [5.0, 5.1, 5.2, 5.0, 5.0, 5.05],
            "dist": [0.0, 0.2, 0.3, 0.0, 0.1, 0.1],
            "train_error": [0.5, 0.3, 0.1] * 2,
            "test_error": [0.5, 0.4, 0.45] * 2,
        }
    )
    fig = plots.weight_panels(curves, 4, suptitle="Figure 3")
    left, right = fig.axes
    assert [ln.get_label() for ln in right.get_lines()] == ["SGD", "SGD+AUX"]
    np.testing.assert_allclose(left.get_lines()[0].get_ydata(), [5.0, 5.1, 5.2])
    np.testing.assert_allclose(right.get_lines()[1].get_ydata(), [0.0, 0.1, 0.1])
    assert "W^{(4)}" in left.get_ylabel() and "W^{(4)}(0)" in right.get_ylabel()
    fig2, ax = plt.subplots()
    plots.learning_curves(ax, curves, title="λ = 4")
    lines = ax.get_lines()
    assert len(lines) == 4 and [ln.get_linestyle() for ln in lines[:2]] == ["--", "-"]  # train dashed, test solid
    np.testing.assert_allclose(lines[1].get_ydata(), [50.0, 40.0, 45.0])  # in percent
    plt.close("all")


def test_verdicts_of_the_paired_differences():
    from ntk_core.experiments import setting2

    assert setting2.seed_verdict([0.01, 0.02]) == "lower than SGD's on every seed"
    assert setting2.seed_verdict([-0.01, -0.02]) == "higher than SGD's on every seed"
    assert setting2.seed_verdict([-0.01, 0.02]) == "lower on some seeds and higher on others"
    from ntk_core.bookkit.claims import paired_verdict  # the book kit's one rule (a paired t-test at 5 %)

    assert paired_verdict({"mean": 0.09, "sem": 0.02, "seeds": 3}) == "holds"  # t = 4.5 > 4.30
    assert paired_verdict({"mean": -0.09, "sem": 0.02, "seeds": 3}) == "the opposite holds"
    assert paired_verdict({"mean": 0.05, "sem": 0.02, "seeds": 3}) == "inconclusive"  # t = 2.5: not at 2 dof
    assert paired_verdict({"mean": 0.09, "sem": 0.02, "seeds": 2}) == "inconclusive"  # the spread unmeasured
