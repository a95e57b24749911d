"""Experiments checked by value, against quantities recomputed here independently.

Setting 1: the KRR rows are kernel ridge regression (eq. (8), ridge λ²) on the *noisy* labels with the
network's NTK at initialisation (built here from explicit Jacobians, not ``ntk_core.ntk``), and every run's
learning rate is Theorem 4.1's ``lr_scale / (‖K‖ + λ²)``. Distance study: the predicted distance is
‖θ* − θ(0)‖ of the ridge solution and the step count is ``round(steps / lr_scale)``. Setting 3: the
trainer's hyper-parameters are the batch-mean ones rescaled for the summed loss, exact label corruption
flips ``round(rate · n)`` labels, and the network augments in training mode only. Configs are overridden
here, so the tests do not depend on the profiles' grids.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ntk_core import data, experiments, noise
from ntk_core.experiments import distance, setting1, setting3
from ntk_core.experiments._shared import make_split
from ntk_oracle import reference_ntk


@pytest.fixture
def cache(tmp_path, monkeypatch, shared_data):
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    return tmp_path / "cache"


def _kernel(model: torch.nn.Module, x: torch.Tensor) -> np.ndarray:
    """K = J Jᵀ, J the explicit float64 Jacobian of the single output over every trained parameter."""
    return reference_ntk(model, x, x, "trace").numpy()


def _features(images: np.ndarray, config) -> np.ndarray:
    """The experiment's input features; ``pool`` (average pooling) where the config has one."""
    pool = getattr(config, "pool", 1)
    return data.mnist_features(images) if pool == 1 else data.mnist_features(images, pool)


def _mnist_split(config, n_train: int, n_val: int, n_test: int, seed: int):
    """The MNIST 5-vs-8 split an experiment with ``config`` draws (its features, :func:`make_split`)."""
    train_task, test_task = data.mnist_5_vs_8("train"), data.mnist_5_vs_8("test")
    features = (_features(train_task.x, config), train_task.y, _features(test_task.x, config), test_task.y)
    return make_split(*features, n_train=n_train, n_val=n_val, n_test=n_test, seed=seed, what="test")


def _errors(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.where(pred >= 0, 1, -1) != y))


SETTING1 = dict(
    n_train=60,
    n_val=30,
    n_test=60,
    width=32,
    steps=20,
    eval_every=5,
    noise_levels=(0.41,),
    lams=(0.7, 2.5),
    lr_scale=0.8,
)


def test_setting1_krr_rows_and_learning_rates_by_value(cache):
    config = experiments.make_config("setting1", "quick", **SETTING1)
    table = experiments.run("setting1", "quick", use_cache=False, **SETTING1).table
    seed, p = config.seeds[0], config.noise_levels[0]
    split = _mnist_split(config, config.n_train, config.n_val, config.n_test, seed)
    y_train = split.y_train.numpy()
    y_noisy = noise.flip_binary(y_train, p, seed=1000 * seed, exact=True)  # noise level index 0
    assert int((y_noisy != y_train).sum()) == round(p * config.n_train) == 25  # 24.6 -> 25
    x_all = torch.cat([split.x_train, split.x_val, split.x_test])
    K_all = _kernel(setting1._network(config, seed), x_all)
    n, nv = config.n_train, config.n_val
    K, K_eval = K_all[:n, :n], K_all[n:, :n]
    norm_K = float(np.linalg.norm(K, 2))
    y_val, y_test = split.y_val.numpy(), split.y_test.numpy()
    # the validation labels carry the training labels' noise, flipped on their own seed
    y_val_noisy = noise.flip_binary(y_val, p, seed=1000 * seed + 500, exact=True)
    assert int((y_val_noisy != y_val).sum()) == round(p * nv) == 12
    krr = table[table.method == "KRR"].set_index("lam")
    assert sorted(krr.index) == sorted(config.lams)
    differs_from_clean = False
    for lam in config.lams:
        pred = K_eval @ np.linalg.solve(K + lam**2 * np.eye(n), y_noisy.astype(float))
        row = krr.loc[lam]
        assert row["val_error"] == pytest.approx(_errors(pred[:nv], y_val_noisy), abs=1e-6), lam
        assert row["val_error_clean"] == pytest.approx(_errors(pred[:nv], y_val), abs=1e-6), lam
        assert row["test_error"] == pytest.approx(_errors(pred[nv:], y_test), abs=1e-6), lam
        assert row["norm_K"] == pytest.approx(norm_K, rel=1e-6)
        clean = K_eval @ np.linalg.solve(K + lam**2 * np.eye(n), y_train.astype(float))
        differs_from_clean |= (_errors(clean[:nv], y_val), _errors(clean[nv:], y_test)) != (
            row["val_error_clean"],
            row["test_error"],
        )
    assert differs_from_clean  # the check has power: fitting the clean labels gives other errors
    # Theorem 4.1's learning rate, with λ² (λ = 0 for plain GD)
    trained = table[table.method != "KRR"]
    assert set(trained.method) == {"GD", "GD+ES", "GD+RDI", "GD+AUX"}
    for _, row in trained.iterrows():
        assert row["lr"] == pytest.approx(config.lr_scale / (norm_K + row["lam"] ** 2), rel=1e-6), row["method"]
        assert row["steps"] == config.steps
    for _, group in table.groupby(["seed", "noise", "method"]):  # λ chosen by validation error
        assert group.loc[group["selected"], "val_error"].tolist() == [group["val_error"].min()]
    es = trained[trained.method == "GD+ES"].iloc[0]
    assert es["stopped_at"] % config.eval_every == 0 or es["stopped_at"] == config.steps
    # the linearised network, by explicit GD steps: with the difference trick f(θ(0)) = 0 and θ(t) − θ(0) = Jᵀα(t),
    # α(t+1) = α(t) − η((K + λ²I)α(t) − ỹ) for RDI (λ = 0: GD) and for AUX's network (b(t) = λα(t)); f = Kα
    for _, row in trained[trained.method.isin(["GD", "GD+RDI", "GD+AUX"])].iterrows():
        alpha = np.zeros(n)
        for _ in range(config.steps):
            alpha = alpha - row["lr"] * ((K + row["lam"] ** 2 * np.eye(n)) @ alpha - y_noisy)
        lin_test = K_eval[nv:] @ alpha
        assert row["lin_test_error"] == pytest.approx(_errors(lin_test, y_test), abs=1e-6), row["method"]


def test_distance_prediction_and_schedule_by_value(shared_data, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    config = distance.Config(n_train=30, width=32, steps=30)
    train_task, test_task = data.mnist_5_vs_8("train"), data.mnist_5_vs_8("test")
    features = (_features(train_task.x, config), train_task.y, _features(test_task.x, config), test_task.y)
    lam, lr_scale, seed = 0.7, 0.7, 0
    point = {"n_train": 30, "noise": 0.25, "width": 32, "lam": lam, "lr_scale": lr_scale}
    row = distance._one(config, point, seed, features, progress=False)
    split = make_split(*features, n_train=30, n_val=0, n_test=200, seed=seed, what="test")
    y = noise.flip_binary(split.y_train.numpy(), 0.25, seed=seed, exact=True).astype(float)
    from ntk_core.nets import DifferenceTrick, TwoLayerNet

    d = split.x_train.shape[1]  # 784, or fewer with pooling
    K = _kernel(DifferenceTrick(TwoLayerNet(d, 32, seed=seed)), split.x_train)
    alpha = np.linalg.solve(K + lam**2 * np.eye(30), y)
    assert row["predicted"] == pytest.approx(math.sqrt(alpha @ K @ alpha), rel=1e-6)
    assert row["lr"] == pytest.approx(lr_scale / (np.linalg.norm(K, 2) + lam**2), rel=1e-6)
    assert row["steps"] == 43  # round(30 / 0.7) = round(42.86)
    # the linearised network (its test error): explicit GD steps on RDI's objective through the explicit NTK
    K_all = _kernel(DifferenceTrick(TwoLayerNet(d, 32, seed=seed)), torch.cat([split.x_train, split.x_test]))
    a = np.zeros(30)
    for _ in range(43):
        a = a - row["lr"] * ((K_all[:30, :30] + lam**2 * np.eye(30)) @ a - y)
    assert row["lin_test_error"] == pytest.approx(_errors(K_all[30:, :30] @ a, split.y_test.numpy()), abs=1e-6)
    assert row["kernel_drift"] > 0 and row["kernel_drift_quarter"] > 0 and 0.5 <= row["lin_agreement"] <= 1


def test_setting3_train_config_is_the_batch_mean_one_rescaled():
    config = setting3.Config(
        batch_size=20,
        lr=0.3,
        weight_decay=1e-3,
        aux_weight_decay=0.05,
        lam_grid=(2.5,),
        mse_scale=3.0,
        momentum=0.8,
        epochs=6,
        lr_milestones=(2, 4),
    )
    b = 20
    for loss, s in (("ce", 1.0), ("mse", 3.0)):
        for lam in (None, 2.5):
            aux = lam is not None
            cfg = setting3._train_config(config, loss, lam, seed=7)
            assert cfg.method == ("aux" if aux else "early_stopping")
            assert cfg.loss == ("l2" if loss == "mse" else "ce")
            assert cfg.lam == lam
            assert cfg.lr == pytest.approx(0.3 * s / b)
            assert cfg.weight_decay == pytest.approx(1e-3 * b / s)
            # the batch-mean auxiliary weight decay is s · aux_weight_decay (trainer: × B / s), so that the
            # balance c ≈ s λ² / (wd_b n) = λ² / (aux_weight_decay · n) is the same for both losses
            assert cfg.aux_weight_decay == pytest.approx((s * 0.05) * b / s if aux else 0.0)
            assert (cfg.batch_size, cfg.momentum, cfg.lr_milestones, cfg.epochs, cfg.seed) == (b, 0.8, (2, 4), 6, 7)


@pytest.mark.parametrize("n, rate, flips", [(10, 0.35, 4), (20, 0.33, 7), (10, 0.12, 1)])
def test_setting3_exact_corruption_counts_and_targets(n, rate, flips):
    if not hasattr(setting3, "corrupt_exact"):
        pytest.skip("this version of Setting 3 has no exact corruption")
    clean = np.arange(n) % 10
    noisy = setting3.corrupt_exact(clean, rate, 10, seed=1)
    changed = noisy != clean
    assert int(changed.sum()) == flips  # round(rate · n): 3.5 -> 4, 6.6 -> 7, 1.2 -> 1
    assert np.all((noisy >= 0) & (noisy < 10))


def test_setting3_network_augments_in_training_mode_only():
    config = setting3.Config(augment=True)
    model = setting3.network(config, seed=0)
    net = model[1]
    seen = []
    net.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    model.eval()
    with torch.no_grad():
        model(x)
    assert torch.equal(seen[-1], x)
    model.train()
    with torch.no_grad():
        model(x)
    assert not torch.equal(seen[-1], x) and seen[-1].shape == x.shape
    plain = setting3.network(setting3.Config(augment=False), seed=0)
    assert not any(type(m).__name__ == "RandomCropFlip" for m in plain.modules())


def test_difference_trick_regime_columns_by_value(cache):
    """The linearised network's test error, recomputed from explicit Jacobians and explicit GD steps (its initial
    output is not 0 at α = 0), and the drift measured along the run."""
    from ntk_core.nets import DifferenceTrick, TwoLayerNet

    cfg = dict(n_train=30, n_test=50, width=24, steps=12, alphas=(0.0, 0.5), seeds=(0,), n_probe=20)
    config = experiments.make_config("difference_trick", "quick", **cfg)
    table = experiments.run("difference_trick", "quick", use_cache=False, **cfg).table
    split = _mnist_split(config, 30, 0, 50, 0)
    x_all = torch.cat([split.x_train, split.x_test])
    y = split.y_train.numpy().astype(float)
    for _, row in table.iterrows():
        g = TwoLayerNet(setting1.input_dim(config.pool), config.width, seed=0, train_second=True)
        model = DifferenceTrick(g, alpha=row["alpha"]).double()
        with torch.no_grad():
            f0 = model(x_all.double()).reshape(-1).numpy()
        K = _kernel(model, x_all)
        alpha = np.zeros(30)
        for _ in range(config.steps):
            alpha = alpha - row["lr"] * (K[:30, :30] @ alpha - (y - f0[:30]))
        lin_test = f0[30:] + K[30:, :30] @ alpha
        assert row["lin_test_error"] == pytest.approx(_errors(lin_test, split.y_test.numpy()), abs=1e-6)
        assert 0 < row["kernel_drift_quarter"] and row["kernel_drift"] > 0 and 0.5 <= row["lin_agreement"] <= 1


def test_setting2_protocol_and_linearisation_by_value(cache, monkeypatch):
    """Setting 2's labels (training and validation equally noisy, on seeds of their own), its selection protocol, and
    the linearised network's test error recomputed from explicit Jacobians and explicit SGD steps over the batches
    that train() visits (plain, RDI with its |B|/n share of the penalty, AUX with its variables)."""
    from ntk_core.experiments import setting2
    from ntk_core.train import TrainConfig, batch_order

    import ntk_core.train as train_module

    seen = []
    real_train = train_module.train

    def spy(model, x, y, config, **kwargs):
        seen.append((config.method, config.lam, y.clone(), kwargs["val"][1].clone()))
        return real_train(model, x, y, config, **kwargs)

    linearised = []
    real_lin = setting2.linearised_sgd

    def spy_lin(initial, x_train, y, x_test, **kwargs):
        linearised.append((np.asarray(y).copy(), kwargs))
        return real_lin(initial, x_train, y, x_test, **kwargs)

    monkeypatch.setattr(train_module, "train", spy)  # what the protocol's training calls
    monkeypatch.setattr(setting2, "linearised_sgd", spy_lin)
    cfg = dict(
        n_train=24, n_val=20, n_test=30, depth=4, channels=3, pool=8, epochs=10, eval_every=1, batch_size=5,
        lr=0.2, lams=(0.5, 2.0, 3.0), curve_lam=0.5, clean_lams=(), noise=0.2, spectrum=False, n_probe=10,
        seeds=(0,), download=False,
    )  # fmt: skip
    config = experiments.make_config("setting2", "quick", **cfg)
    table = experiments.run("setting2", "quick", use_cache=False, **cfg).table
    train_set = data.cifar_airplane_vs_automobile("train", download=False)
    test_set = data.cifar_airplane_vs_automobile("test", download=False)
    feats = setting2.features(config)
    split = make_split(
        feats(train_set.x), train_set.y, feats(test_set.x), test_set.y, n_train=24, n_val=20, n_test=30, seed=0,
        what="test",
    )  # fmt: skip
    y_noisy = noise.flip_binary(split.y_train.numpy(), 0.2, seed=0, exact=True)
    y_val_noisy = noise.flip_binary(split.y_val.numpy(), 0.2, seed=500, exact=True)
    assert int((y_val_noisy != split.y_val.numpy()).sum()) == 4  # an exact fraction 0.2 of 20
    assert len(seen) == len(linearised) == 1 + 2 * 3
    for (method, lam, y, y_val), (y_lin, lin) in zip(seen, linearised):
        np.testing.assert_array_equal(y.numpy(), y_noisy)
        np.testing.assert_array_equal(y_val.numpy(), y_val_noisy)
        # the linearisation is trained like the network: same labels, method, λ, learning rate and batches
        np.testing.assert_array_equal(np.asarray(y_lin), y_noisy)
        assert lin["regularizer"] == {"early_stopping": "none"}.get(method, method) and lin["lam"] == (lam or 0.0)
        tc = TrainConfig(method=method, lam=lam, loss="l2", epochs=10, lr=0.2, batch_size=5, seed=0)
        assert lin["lr"] == 0.2 and [b.tolist() for b in lin["batches"]] == [b.tolist() for b in batch_order(24, tc)]
    # the linearisation: K from explicit Jacobians at θ(0), then SGD on ½ Σ_B (Kα + λb − ỹ)² batch by batch
    model = setting2.network(config, 0)
    K = _kernel(model, torch.cat([split.x_train, split.x_test]))
    s = table[table["part"] == "summary"]
    runs = s[s["method"].isin(["SGD", "SGD+AUX", "SGD+RDI"])]
    assert len(runs) == 7
    grown = []
    for _, row in runs.iterrows():
        method = {"SGD": "early_stopping", "SGD+AUX": "aux", "SGD+RDI": "rdi"}[row["method"]]
        tc = TrainConfig(method=method, lam=row["lam"] or None, loss="l2", epochs=10, lr=0.2, batch_size=5, seed=0)
        alpha, b, lam = np.zeros(24), np.zeros(24), row["lam"]
        step = 0.0  # the largest lr (λ_max(K_BB) + c) over the batches, c = λ² (AUX), λ²|B|/n (RDI)
        with np.errstate(over="ignore", invalid="ignore"):
            for batch in batch_order(24, tc):
                i = batch.numpy()
                c = {"aux": lam**2, "rdi": lam**2 * len(i) / 24}.get(method, 0.0)
                step = max(step, 0.2 * (np.linalg.eigvalsh(K[np.ix_(i, i)])[-1] + c))
                e = K[i, :24] @ alpha + (lam * b[i] if method == "aux" else 0.0) - y_noisy[i]
                if method == "aux":
                    b[i] -= 0.2 * lam * e
                if method == "rdi":
                    alpha *= 1 - 0.2 * lam**2 * len(i) / 24
                alpha[i] -= 0.2 * e
        lin_train, lin_test = K[:24, :24] @ alpha, K[24:, :24] @ alpha
        growth = np.linalg.norm(y_noisy - lin_train) / np.linalg.norm(y_noisy)  # f(θ(0)) = 0: difference trick
        diverged = not np.isfinite(lin_test).all() or growth > 10
        # the run's kernel comes from the float32 network, this one from float64 Jacobians: float32 rounding
        # (measured: 3e-7 in the step, up to 5e-6 in the growth after 50 steps that multiply it by up to 4·10³)
        assert row["lin_step"] == pytest.approx(step, rel=1e-6) and row["lin_growth"] == pytest.approx(growth, rel=2e-5)
        # here AUX at λ = 3 has steps that expand and diverges (its residual grows ~10³-fold); the network trains
        assert row["lin_diverged"] == diverged == (method == "aux" and lam == 3.0), row
        assert step > 2 or not diverged  # bounded while every step contracts (krr.sgd_step_factors)
        grown.append(1 < growth < 10)
        if diverged:  # no linearised network to compare with
            assert np.isnan(row["lin_agreement"]) and np.isnan(row["lin_test_error"])
        else:
            assert row["lin_test_error"] == pytest.approx(_errors(lin_test, split.y_test.numpy()), abs=1e-6), row
            assert 0.0 <= row["lin_agreement"] <= 1.0
        assert row["kernel_drift"] > 0 and row["movement"] > 0
    assert any(grown)  # a linearisation that ends above its initial residual without diverging (not flagged)
    assert setting2.linearisation_stability(table) == {
        "runs": 7,
        "diverged": 1,
        "expanding": 7,
        "expanding_bounded": 6,
        "diverged_contracting": 0,
    }  # every step factor here is above 2 (2.9–4.7); only AUX at λ = 3 diverges
    # the protocol: λ of least validation error (MSE breaks ties) on the noisy labels, and on the clean ones
    tuned = s[s["method"].isin(["SGD+AUX", "SGD+RDI"])]
    for flag, err, mse in (
        ("selected", "val_error", "val_mse"),
        ("selected_oracle", "val_error_clean", "val_mse_clean"),
    ):
        for _, g in tuned.groupby("method"):
            best = g.sort_values([err, mse]).iloc[0]
            assert g[flag].sum() == 1 and bool(g.loc[best.name, flag]), (flag, g)
    # early stopping, once per protocol: the evaluated epoch of SGD's least validation error of each label set
    curves = table[(table["part"] == "curves") & (table["method"] == "SGD")].set_index("epoch")
    es = s[s["method"] == "SGD+ES"]
    assert curves["val_error"].idxmin() != curves["val_error_clean"].idxmin()  # the two protocols stop apart here
    for flag, err in (("selected", "val_error"), ("selected_oracle", "val_error_clean")):
        stop = es[es[flag]].iloc[0]
        assert stop["epoch"] == curves[err].idxmin() and stop["test_error"] == curves.loc[stop["epoch"], "test_error"]
