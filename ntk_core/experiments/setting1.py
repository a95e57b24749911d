"""Setting 1 (Figure 1a): MNIST "5" vs "8", two-layer net, test error vs noise level.

For each noise level the training labels are corrupted (an exact fraction
``p`` flipped, Section 6), and the paper's methods are trained by full-batch GD
on the ℓ2 loss ``½ Σ (f − ỹ)²``:

* ``GD``: vanilla, the last step;
* ``GD+ES``: the same run, stopped at the step of best validation error;
* ``GD+RDI`` and ``GD+AUX`` for every λ of the grid;
* ``KRR``: kernel ridge regression (eq. 8) with the network's empirical NTK at
  initialisation, for every λ: the prediction Theorem 4.1 says RDI and AUX approach.

The network is the paper's two-layer ReLU net (``ntk_core.nets.TwoLayerNet``,
first layer trained, ±1 second layer frozen) wrapped in the difference trick of
Appendix A, so its initial output is 0. Inputs are scaled to ``‖x‖² = d``.
Every run uses ``η = lr_scale / (‖K‖ + λ²)`` (``λ = 0`` for GD): ``lr_scale = 1`` is Theorem 4.1's
sufficient condition; any ``lr_scale < 2`` keeps gradient descent on the linearised problem (a quadratic
whose Hessian has norm ‖K‖ + λ², for RDI and AUX alike) stable and converging to the same limit, at the
rate ``max(1 − ηλ², |1 − lr_scale|)`` per step. The λ of each regularised method is chosen by validation
error, ties broken by validation mean squared error (``selected``), as a practitioner would; the paper reports the best test
accuracy over its grid, which the table also allows (``test_error`` per λ).

**Selection** (the protocol of every experiment, ``experiments._shared``): the validation labels carry the
training labels' noise (an exact fraction ``p`` flipped, on a seed of their own), as a user's would;
``val_error`` and ``val_mse`` are measured against them and choose the stopping step and λ (``selected``),
``val_error_clean`` and ``val_mse_clean`` against the clean labels choose the oracle's (``selected_oracle``).
Early stopping has one row per protocol.

**The NTK regime**, in every training run (:mod:`ntk_core.regime`): ``kernel_drift`` (at the last step,
``kernel_drift_quarter`` and ``kernel_drift_half`` along the way) is the relative change of the empirical NTK
on the first ``n_probe`` test images, ``movement`` the relative movement of the trained weights, and
``lin_agreement`` the fraction of test images on which the network predicts the label that its
linearisation around θ(0), trained the same way (the closed form of :func:`ntk_core.krr.gd_kernel_closed_form`
with the NTK at initialisation; for AUX the network part, which follows RDI's path), predicts;
``lin_test_error`` is the linearisation's test error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd
import torch

from .. import data, noise
from .._checks import check_choice, check_each_in, check_interval
from ..data import mnist_features
from ..krr import gd_kernel_closed_form, krr_path
from ..nets import DifferenceTrick, TwoLayerNet
from ..ntk import empirical_ntk
from ..train import TrainConfig, TrainingMethod, classification_error, predict
from . import _shared
from ._runner import ExperimentConfig, RunContext
from ._shared import (
    REGIME_COLUMNS,
    RegimeTracker,
    Splits,
    bracket,
    load_features,
    make_split,
    mark_protocol,
    protocol_means,
    train_protocol,
)

__all__ = [
    "Config",
    "compute",
    "input_dim",
    "check_pool",
    "mnist_5_vs_8_features",
    "chosen",
    "protocol_table",
    "regime_table",
    "training_runs",
    "selection",
    "figure_table",
]


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """Sizes and grids of Setting 1; ``quick()`` fits 2 CPU cores, ``medium()`` about an hour on them (recorded),
    ``full()`` is the paper's scale."""

    profile: str = "quick"
    n_train: int = 400
    n_val: int = 200
    n_test: int = 0  # 0: the whole test split
    width: int = 512
    pool: int = 2
    noise_levels: tuple[float, ...] = (0.0, 0.2, 0.4)
    lams: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    steps: int = 400
    lr_scale: float = 1.8
    eval_every: int = 10
    difference_trick: bool = True
    n_probe: int = 128
    seeds: tuple[int, ...] = (0,)
    device: str = "cpu"

    @classmethod
    def quick(cls) -> "Config":
        """Width 512 on 300 training / 200 validation images pooled to 14×14 and the whole test split, noise
        0, 0.2, 0.4, λ ∈ {1/8, …, 8}, 400 GD steps at η = 1.8 / (‖K‖ + λ²) (close to the stability limit
        2 / (‖K‖ + λ²), so that vanilla GD gets far enough to memorise most flipped labels).

        300 training images for the book's time (full-batch GD costs ∝ n; a smaller n also fits the flipped labels
        in fewer steps, since η ∝ 1/‖K‖ and ‖K‖ ∝ n), and no fewer: at 250 the λ chosen on the noisy validation
        labels at noise 0.4 sits at the grid's top, so the grid no longer brackets it. How it was sized (trials, timings): ``benchmarks/README.md``."""
        return cls(n_train=300)

    @classmethod
    def medium(cls) -> "Config":
        """Width 1,000 on 1,000 training / 500 validation images pooled to 14×14 and the whole test split
        (1,866), all five noise levels 0–40 %, the paper's λ grid {1/4, …, 8} and 1/8 (so that the grid
        brackets the λ chosen on noisy validation labels at low noise too), 800 GD steps at η = 1.8 / (‖K‖ +
        λ²), 3 seeds: 225 training runs (per seed and noise: GD, 7 RDI, 7 AUX) plus KRR.

        How it was sized (trials, timings): ``results/medium/README.md``.
        """
        return cls(
            profile="medium",
            n_train=1_000,
            n_val=500,
            n_test=0,
            width=1_000,
            pool=2,
            noise_levels=(0.0, 0.1, 0.2, 0.3, 0.4),
            lams=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
            steps=800,
            lr_scale=1.8,
            eval_every=20,
            seeds=(0, 1, 2),
            device="cpu",
        )

    @classmethod
    def full(cls) -> "Config":
        """Width 10,000 on all 11,272 MNIST 5/8 training images (1,272 held out) and the 1,866 test images.

        About 4.8 GPU hours on one H100, extrapolated from a timed slice (``benchmarks/gpu_check.sh``; the
        measurement: ``benchmarks/README.md``)."""
        return cls(
            profile="full",
            n_train=10_000,
            n_val=1_272,
            n_test=0,
            width=10_000,
            pool=1,
            noise_levels=(0.0, 0.1, 0.2, 0.3, 0.4),
            lams=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
            steps=5_000,
            lr_scale=1.0,
            eval_every=50,
            seeds=(0, 1, 2),
            device="cuda",
        )

    counts = {"n_train": 1, "n_val": 1, "width": 1, "steps": 4, "eval_every": 1, "n_test": 0, "n_probe": 1}

    def _check(self) -> None:
        check_pool(self.pool)
        check_each_in(self.noise_levels, "noise level", 0.0, 0.5, high_open=True)
        check_each_in(self.lams, "λ (lams)", 0.0, math.inf, low_open=True, high_open=True)
        check_interval(self.lr_scale, "lr_scale", 0.0, 2.0, low_open=True)


def input_dim(pool: int) -> int:
    """d of :func:`ntk_core.data.mnist_features` with ``pool``: 784, 196 (pool 2) or 49 (pool 4)."""
    return (28 // pool) ** 2


def check_pool(pool: int) -> None:
    """``pool`` must divide the 28-pixel side: 1, 2, 4, 7, 14 or 28."""
    check_choice(pool, "pool (a divisor of 28)", (1, 2, 4, 7, 14, 28))


def _network(config: Config, seed: int) -> torch.nn.Module:
    g = TwoLayerNet(input_dim(config.pool), config.width, seed=seed)
    return DifferenceTrick(g, alpha=0.5) if config.difference_trick else g


def mnist_5_vs_8_features(ctx: RunContext, pool: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """MNIST "5" vs "8" as the MNIST experiments use it, the data sets reported to ``ctx``.

    Parameters
    ----------
    ctx : RunContext
        The run's context (records the data sets and their fingerprints).
    pool : int
        Average ``pool × pool`` pixel blocks first (:func:`check_pool`).

    Returns
    -------
    tuple of numpy.ndarray
        ``(x_train, y_train, x_test, y_test)``: :func:`ntk_core.data.mnist_features` rows, shape
        ``(N, input_dim(pool))``, and ±1 labels ("5" is +1), shape ``(N,)``.
    """
    return load_features(
        ctx, data.mnist_5_vs_8("train"), data.mnist_5_vs_8("test"), lambda images: mnist_features(images, pool)
    )


def _load(config: Config, seed: int, ctx: RunContext) -> Splits:
    return make_split(
        *mnist_5_vs_8_features(ctx, config.pool),
        n_train=config.n_train,
        n_val=config.n_val,
        n_test=config.n_test,
        seed=seed,
        what="setting1 (MNIST 5 vs 8)",
    )


def _train_rows(
    config: Config,
    split: Splits,
    y_noisy: torch.Tensor,
    y_val_noisy: torch.Tensor,
    method: str,
    lam: float | None,
    lr: float,
    seed: int,
    lin_test: np.ndarray,
    progress: bool,
) -> list[dict]:
    model = _network(config, seed).to(config.device)
    regime = RegimeTracker(model, split.x_test[: config.n_probe], config.steps)
    cfg = TrainConfig(
        method=cast(TrainingMethod, "early_stopping" if method == "GD" else method),
        lam=lam,
        loss="l2",
        epochs=config.steps,
        lr=lr,
        eval_every=config.eval_every,
        seed=seed,
    )
    result, history = train_protocol(model, split, y_noisy, y_val_noisy, cfg, progress=progress, on_epoch_end=regime)
    last = history.iloc[-1]
    base = {
        "lam": lam if lam is not None else 0.0,
        "steps": config.steps,
        "lr": lr,
        "dist": float(last["dist/all"]),
        "train_error_noisy": float(last["train_error_noisy"]),
        "train_error_net": float(last["train_error_net"]),  # the network alone, without AUX's b
        "train_loss": float(last["loss"]),
        "train_error_clean": float(last["train_error_clean"]),
    }
    run = regime.columns(split.x_test, split.y_test, lin_test)

    def at(row: pd.Series) -> dict:
        return {
            "val_error": float(row["val_error"]),
            "val_error_clean": float(row["val_error_clean"]),
            "val_mse": float(row["val_mse"]),
            "val_mse_clean": float(row["val_mse_clean"]),
            "test_error": float(row["test_error"]),
        }

    if method == "GD":
        rows = [{**base, **run, "method": "GD", **at(last), "selected": True, "selected_oracle": True}]
        # early stopping: the first step of least validation error, on the noisy and on the clean labels
        for column, flags in (("val_error", (True, False)), ("val_error_clean", (False, True))):
            stop = history.loc[history[column].idxmin()]
            rows.append(
                {
                    **base,
                    "method": "GD+ES",
                    **at(stop),
                    "stopped_at": int(stop["epoch"]),
                    "selected": flags[0],
                    "selected_oracle": flags[1],
                }
            )
        return rows
    label = {"rdi": "GD+RDI", "aux": "GD+AUX"}[method]
    return [{**base, **run, "method": label, **at(last)}]


def compute(config: Config, ctx: RunContext) -> pd.DataFrame:
    """The table behind Figure 1a: one row per (seed, noise, method, λ), two for early stopping (its step
    chosen on the noisy and on the clean validation labels)."""
    rows: list[dict] = []
    for seed in config.seeds:
        split = _load(config, seed, ctx).to(config.device)
        model = _network(config, seed).to(config.device)
        # NTK at initialisation (Section 3.2), float64 for the solves; the same for both copies of the trick
        x_all = torch.cat([split.x_train, split.x_val, split.x_test])
        K_all = empirical_ntk(model, x_all, out_dtype=torch.float64).numpy()
        n, nv = len(split.x_train), len(split.x_val)
        K, K_eval = K_all[:n, :n], K_all[n:, :n]
        norm_K = float(np.linalg.eigvalsh(K)[-1])
        f0 = predict(model, x_all).reshape(-1).double().cpu().numpy()  # 0 with the difference trick
        for p_index, p in enumerate(config.noise_levels):
            y_noisy = torch.as_tensor(
                noise.flip_binary(split.y_train.cpu().numpy(), p, seed=1000 * seed + p_index, exact=True)
            ).to(config.device)
            y_val_noisy = torch.as_tensor(
                noise.flip_binary(split.y_val.cpu().numpy(), p, seed=1000 * seed + 500 + p_index, exact=True)
            ).to(config.device)
            common = {"seed": seed, "noise": p}
            runs = [("GD", None)] + [(m, lam) for m in ("rdi", "aux") for lam in config.lams]
            for method, lam in runs:
                lr = config.lr_scale / (norm_K + (lam or 0.0) ** 2)

                def work(method: str = method, lam: float | None = lam, lr: float = lr) -> list[dict]:
                    # the linearised network trained the same way (GD, RDI's λ; AUX's network follows RDI's
                    # linearised path, Theorem 4.1's proof): its test outputs, to compare predictions with
                    residual = y_noisy.cpu().numpy().astype(np.float64) - f0[:n]
                    lin = f0[n + nv :] + gd_kernel_closed_form(
                        K, residual, lr, config.steps, lam=lam or 0.0, K_test_train=K_eval[nv:]
                    )
                    return _train_rows(config, split, y_noisy, y_val_noisy, method, lam, lr, seed, lin, ctx.progress)

                unit = ctx.unit({**common, "method": method, "lam": lam}, work)
                rows += [{**common, **r} for r in unit]
            y_krr = y_noisy.cpu().numpy().astype(np.float64)
            preds = krr_path(K, y_krr, config.lams, K_eval)
            for lam, pred_np in zip(config.lams, preds):
                pred = torch.as_tensor(pred_np)
                rows.append(
                    {
                        **common,
                        "method": "KRR",
                        "lam": lam,
                        "val_error": classification_error(pred[:nv], y_val_noisy.cpu()),
                        "val_error_clean": classification_error(pred[:nv], split.y_val.cpu()),
                        "val_mse": float(((pred[:nv] - y_val_noisy.cpu().to(pred.dtype)) ** 2).mean()),
                        "val_mse_clean": float(((pred[:nv] - split.y_val.cpu().to(pred.dtype)) ** 2).mean()),
                        "test_error": classification_error(pred[nv:], split.y_test.cpu()),
                        "norm_K": norm_K,
                    }
                )
    table = pd.DataFrame(rows)
    return mark_protocol(table, table["method"].isin(_TUNED))


_TUNED = ["GD+RDI", "GD+AUX", "KRR"]  # the methods whose λ is chosen on validation


def chosen(table: pd.DataFrame, oracle: bool = False) -> pd.DataFrame:
    """The rows the selection protocol keeps: one per (seed, noise, method), chosen on the noisy validation
    labels (``oracle=False``, what a user has) or on the clean ones (the oracle)."""
    return _shared.chosen(table, oracle)


def figure_table(table: pd.DataFrame, oracle: bool = False) -> pd.DataFrame:
    """Figure 1a's numbers: mean and spread over seeds of the :func:`chosen` rows, per noise level and method."""
    rows = chosen(table, oracle)
    return rows.groupby(["noise", "method"])["test_error"].agg(["mean", "std", "count"]).reset_index()


def protocol_table(table: pd.DataFrame) -> pd.DataFrame:
    """Figure 1a's mean test errors under both protocols: ``noisy`` (stopping step and λ chosen on the noisy
    validation labels, what a user has) and ``oracle`` (chosen on the clean ones), per noise level and method."""
    return protocol_means(table)


def training_runs(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of trained networks (GD, GD+RDI, GD+AUX at every λ): the rows with the regime columns."""
    return table[table["method"].isin(["GD", "GD+RDI", "GD+AUX"])]


def regime_table(table: pd.DataFrame) -> pd.DataFrame:
    """How far the trained networks leave the NTK regime: mean over seeds, per noise level, of GD's last step and
    of RDI and AUX at the λ chosen on noisy validation labels (the columns of the module's docstring)."""
    runs = training_runs(chosen(table))
    return runs.groupby(["noise", "method"])[list(REGIME_COLUMNS)].mean().reset_index()


def selection(table: pd.DataFrame, oracle: bool = False) -> pd.DataFrame:
    """Does the λ grid bracket the best λ? One row per (seed, noise, method) of GD+RDI, GD+AUX and KRR
    (``experiments._shared.bracket``): ``lam`` is the λ the protocol selects (on the noisy
    validation labels, or on the clean ones with ``oracle``; ties broken by the validation mean squared error),
    ``bracketed`` whether the validation error at both ends of the grid is strictly above its minimum."""
    return bracket(table[table["method"].isin(_TUNED)], oracle)
