r"""Figure 4 (Appendix A): test error against the mixing coefficient α of the difference trick.

The network is :math:`f = \sqrt{\alpha}\,g(\theta_1, x) - \sqrt{1-\alpha}\,g(\theta_2, x)` with
:math:`\theta_1(0) = \theta_2(0)` (``ntk_core.nets.DifferenceTrick``), ``g`` the two-layer
ReLU net of Setting 1 with **both layers trained** (as in the figure), trained
by full-batch GD with a fixed learning rate on the ℓ2 loss on MNIST "5" vs "8".
Its NTK is that of ``g`` for every α, while its initial output is
:math:`(\sqrt\alpha - \sqrt{1-\alpha})\,g(\theta(0), x)`: largest at α = 0, zero at α = 1/2.
The paper observes that the test error drops as α grows to 1/2 "because the
scale of the initial output of the network goes down".

About the caption's formula: it prints :math:`\sqrt{\alpha/2}\,g(\theta_1) - \sqrt{(1-\alpha)/2}\,g(\theta_1)`.
With the extra ``/2`` the NTK is halved for every α, which contradicts the
caption's own "this parametrization preserves the NTK"; this experiment uses
the lemma's form (see the ``DifferenceTrick`` docstring for the derivation).

**The NTK regime**, in every run (:mod:`ntk_core.regime`): ``kernel_drift`` (at the end;
``kernel_drift_quarter`` and ``kernel_drift_half`` along the way) is the relative change of the empirical NTK on
the first ``n_probe`` test images, ``movement`` the relative movement of the weights, ``lin_agreement`` the
fraction of test images on which the network predicts the label that its linearisation around θ(0), trained
by the same GD steps, predicts, and ``lin_test_error`` the linearisation's test error. No hyper-parameter is
chosen: every α runs the same steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .._checks import check_each_in, check_interval
from ..nets import DifferenceTrick, TwoLayerNet
from ..ntk import empirical_ntk
from ..regime import linearised_outputs
from ..train import TrainConfig, predict, train
from ._runner import ExperimentConfig, RunContext
from ._shared import RegimeTracker, check_one_row_per_seed, make_split, paired_stats
from .setting1 import check_pool, input_dim, mnist_5_vs_8_features

__all__ = ["Config", "compute", "paired_effect"]


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """Sizes of the difference-trick study; ``quick()`` for 2 CPU cores, ``medium()`` about an hour on them
    (recorded), ``full()`` is the figure's scale."""

    profile: str = "quick"
    n_train: int = 100
    n_test: int = 0  # 0: the whole test split
    width: int = 512
    pool: int = 2
    alphas: tuple[float, ...] = (0.0, 0.1, 0.25, 0.4, 0.5)
    steps: int = 800
    lr_scale: float = 1.8
    noise: float = 0.0
    n_probe: int = 128
    seeds: tuple[int, ...] = (0, 1, 2)
    device: str = "cpu"

    @classmethod
    def quick(cls) -> "Config":
        """Width 512 on 100 images pooled to 14×14, 800 GD steps at η = 1.8/‖K‖, five α, three seeds.

        The figure compares networks that have fitted their training set (its caption: training loss below
        1e-4). 100 images and η close to the stability limit 2/‖K‖ let GD get there in the quick profile
        (mean training loss ≈ 1e-4, training error 0; with 400 images and 300 steps at η = 1/‖K‖ it stays
        near 5e-2); three seeds give the seed-to-seed spread the effect of α is judged against."""
        return cls()

    @classmethod
    def medium(cls) -> "Config":
        """Width 2,000 on 400 images pooled to 14×14, the whole test split, 6,000 GD steps at η = 1.8/‖K‖, the
        same five α and three seeds (15 training runs).

        How it was sized (trials, timings): ``results/medium/README.md``.
        """
        return cls(
            profile="medium",
            n_train=400,
            n_test=0,
            width=2_000,
            pool=2,
            alphas=(0.0, 0.1, 0.25, 0.4, 0.5),
            steps=6_000,
            lr_scale=1.8,
            noise=0.0,
            seeds=(0, 1, 2),
            device="cpu",
        )

    @classmethod
    def full(cls) -> "Config":
        """Width 10,000, all MNIST 5/8 images, 5,000 GD steps (the figure's caption). About 1 GPU-hour."""
        return cls(
            profile="full",
            n_train=11_272,
            n_test=0,
            width=10_000,
            pool=1,
            steps=5_000,
            lr_scale=1.0,
            seeds=(0, 1, 2),
            device="cuda",
        )

    counts = {"n_train": 1, "width": 1, "steps": 4, "n_test": 0, "n_probe": 1}

    def _check(self) -> None:
        check_pool(self.pool)
        check_each_in(self.alphas, "α (alphas)", 0.0, 1.0)
        check_interval(self.noise, "noise", 0.0, 0.5, high_open=True)
        check_interval(self.lr_scale, "lr_scale", 0.0, 2.0, low_open=True)


def _run(config: Config, split, alpha: float, seed: int, lr: float, progress: bool) -> dict:
    g = TwoLayerNet(input_dim(config.pool), config.width, seed=seed, train_second=True)
    model = DifferenceTrick(g, alpha=alpha).to(config.device)
    regime = RegimeTracker(model, split.x_test[: config.n_probe], config.steps)
    initial = predict(model, split.x_test)
    # the linearised network trained the same way (plain GD, Theorem 4.1 with λ = 0), from the same θ(0)
    _, lin_test = linearised_outputs(
        regime.initial, split.x_train, split.y_train, split.x_test, eta=lr, steps=config.steps
    )
    cfg = TrainConfig(method="vanilla", loss="l2", epochs=config.steps, lr=lr, eval_every=config.steps, seed=seed)
    result = train(
        model,
        split.x_train,
        split.y_train,
        cfg,
        test=(split.x_test, split.y_test),
        progress=progress,
        on_epoch_end=regime,
    )
    return {
        "initial_output_rms": float(initial.pow(2).mean().sqrt()),
        "initial_scale": abs(math.sqrt(alpha) - math.sqrt(1 - alpha)),
        "train_loss": float(result.final["loss"]),
        "train_error": float(result.final["train_error_noisy"]),
        "test_error": float(result.final["test_error"]),
        "dist": float(result.final["dist/all"]),
        "lr": lr,
        **regime.columns(split.x_test, split.y_test, lin_test),
    }


def compute(config: Config, ctx: RunContext) -> pd.DataFrame:
    """One row per (seed, α): initial-output scale, final training loss, test error."""
    from .. import noise

    features = mnist_5_vs_8_features(ctx, config.pool)
    rows = []
    for seed in config.seeds:
        n_train = min(config.n_train, len(features[1]))
        split = make_split(
            *features,
            n_train=n_train,
            n_val=0,
            n_test=config.n_test,
            seed=seed,
            what="difference_trick (MNIST 5 vs 8)",
        )
        if config.noise:
            split.y_train = torch.as_tensor(
                noise.flip_binary(split.y_train.numpy(), config.noise, seed=seed, exact=True)
            )
        split = split.to(config.device)
        # NTK of f equals the NTK of g (Lemma A.1); the learning rate follows Theorem 4.1 with λ = 0
        g = TwoLayerNet(input_dim(config.pool), config.width, seed=seed, train_second=True).to(config.device)
        norm_K = float(np.linalg.eigvalsh(empirical_ntk(g, split.x_train, out_dtype=torch.float64).numpy())[-1])
        lr = config.lr_scale / norm_K
        for alpha in config.alphas:
            unit = ctx.unit({"seed": seed, "alpha": alpha}, lambda: _run(config, split, alpha, seed, lr, ctx.progress))
            rows += [{"seed": seed, "alpha": alpha, **r} for r in unit]
    return pd.DataFrame(rows)


def paired_effect(table: pd.DataFrame, low: float = 0.0, high: float = 0.5) -> dict:
    """Test error at α = ``low`` minus that at α = ``high``, paired by seed (same data, same g(θ(0))).

    Returns the per-seed differences, their mean, their standard deviation (ddof 1; NaN for one seed) and
    the standard error of the mean: the effect of α is "beyond seed-to-seed spread" when the mean exceeds
    two standard errors.
    """
    check_one_row_per_seed(table, ["alpha"], "the difference trick's table")
    wide = table.pivot_table(index="seed", columns="alpha", values="test_error")
    if low not in wide.columns or high not in wide.columns:
        raise ValueError(f"the table has no runs at α = {low} and α = {high} (has {sorted(wide.columns)})")
    return paired_stats((wide[low] - wide[high]).to_numpy())
