r"""Setting 2 (Figures 1b and 5; weight curves of Figures 3, 6–8): CIFAR airplane vs automobile, CNN, SGD.

CIFAR-10 "airplane" (+1) vs "automobile" (−1), a fraction ``noise`` of the
training labels flipped (exactly, Section 6). The network is the paper's
bias-free ReLU CNN (:class:`ntk_core.nets.ConvNet`, ``depth`` layers of
``channels`` channels, first and last layer frozen, Appendix D) wrapped in the
difference trick (:class:`ntk_core.nets.DifferenceTrick`, Appendix A), trained by
mini-batch SGD with a fixed learning rate on the ℓ2 loss ``½ Σ (f − ỹ)²``
(no momentum, no batch norm, no augmentation: Appendix D):

* ``SGD``: vanilla; ``SGD+ES``: the same run at its (evaluated) epoch of least validation error;
* ``SGD+AUX`` and ``SGD+RDI`` for every λ of ``lams`` (Figure 5: λ ∈ {0.25, 0.5, 1, 2, 4, 8};
  Figure 1b is λ = ``curve_lam`` = 4);
* at noise 0, ``SGD``, ``SGD+AUX`` and ``SGD+RDI`` for every λ of ``clean_lams``
  (λ = 2: the weight curves of Figures 7–8).

The table (long format, column ``part``):

* ``curves``: one row per (run, evaluated epoch): ``train_error`` against the noisy
  labels (measured *with* the auxiliary variables for AUX, as in the paper's
  figures), ``train_error_clean``, ``val_error`` (noisy validation labels), ``val_error_clean``,
  ``test_error``, ``loss``, ``dist`` = ‖θ − θ(0)‖;
* ``layers``: one row per (run, epoch, layer, copy), epoch 0 being the initialisation: ``norm`` = ‖W^(l)‖_F and
  ``dist`` = ‖W^(l) − W^(l)(0)‖_F of every trained layer ``l`` (1-based, layer 1
  is the frozen first convolution; ``depth`` is the frozen readout) of both
  copies (``copy`` 1, 2) of the difference trick: Figures 3 and 6 (layers 4
  and 7, noise 0.2, λ = 4) and 7–8 (noise 0, λ = 2), so ``depth`` ≥ 8 for layer 7 to be
  a trained one (:func:`layer_curves` joins the two copies into the layer of f);
* ``spectrum`` (with ``spectrum=True``): the eigenvalues of the training-set NTK of f at
  initialisation and the share of the noisy labels' ‖ỹ‖² along each eigenvector
  (:func:`fitted_by_linear_sgd`: what linearised SGD can fit in the epochs given);
* ``summary``: one row per (run, reported method): the last epoch's errors,
  or for ``SGD+ES`` those at its stopping epoch (``epoch``), one row per protocol (below);
  ``train_error_net`` is the last epoch's training error (noisy labels) of the
  network alone, without auxiliary variables; the flags ``selected`` and ``selected_oracle``
  and the NTK-regime columns (below) of every run.

**Selection** (the protocol of every experiment, ``experiments._shared``): the validation labels carry the
training labels' noise (an exact fraction ``p`` flipped, on a seed of their own), as a user's would;
``val_error`` and ``val_mse`` are measured against them and choose the early-stopping epoch and the λ of
SGD+AUX and SGD+RDI (``selected``), ``val_error_clean`` and ``val_mse_clean`` against the clean labels choose
the oracle's (``selected_oracle``). The choice is made at the evaluated epochs (every ``eval_every``).

**The NTK regime**, in every training run (``experiments._shared.RegimeTracker``):
``kernel_drift`` (at the last epoch; ``kernel_drift_quarter`` and ``kernel_drift_half`` along the way) is the
relative change of the empirical NTK of f on the first ``n_probe`` test images, ``movement`` the relative
movement of all trained weights (part ``layers`` has it per layer), and ``lin_agreement`` the fraction of test
images on which the network predicts the label that its linearisation around θ(0), trained by the same SGD steps
on the same batches (:func:`ntk_core.regime.linearised_sgd` over :func:`ntk_core.train.batch_order`;
RDI with its |B|/n share of the penalty, AUX's network part), predicts; ``lin_test_error`` is the
linearisation's test error. ``lin_step`` is the largest step factor of that linearised SGD over the batches it
visits, ``lr · (λ_max(K_BB) + c)`` with ``c = λ²`` for AUX, ``λ² |B| / n`` for RDI and 0 for SGD
(:func:`ntk_core.krr.sgd_step_factors`: at most 2 keeps it bounded), and ``lin_growth`` its final training
residual over its initial one. Where it diverges at the network's learning rate (``lin_diverged``: outputs not
finite, or the residual grown more than :data:`ntk_core.regime.DIVERGED_GROWTH` times; the network can lower its
own kernel as it trains, the linearisation cannot) its agreement and test error are NaN.

Choices the paper does not state (it gives neither learning rate, batch size,
number of epochs nor input normalisation for Setting 2):

* inputs are standardised per channel (CIFAR-10 mean and std), and in the quick profile
  average-pooled to 8×8 (``pool=4``), which makes a depth-8 network cheap on a CPU;
* ReLU gain √2 (``relu_gain=True``): ``ConvNet`` draws N(0, 1) weights scaled by
  ``1/sqrt(fan_in)``, so each ReLU layer halves the signal's second moment and
  the NTK shrinks like ``2^{-depth}`` (diagonal ≈ 0.001 at depth 11). For a
  bias-free ReLU net, multiplying every layer by √2 (the ``c_σ = 2`` of the
  standard NTK parametrization, Arora et al. 2019) equals multiplying the
  output by ``2^{(depth−1)/2}`` exactly (positive homogeneity), which is what is
  done here; it brings the NTK diagonal to O(1) at every depth so that the
  paper's λ grid {0.25, …, 8} is on the scale of the kernel;
* a further output factor ``output_scale`` (the NTK scales with its square; 1 in the full
  profile, 4 in the quick one): the eigenvalues of the training-set NTK grow with the number of
  training images, and with 100 instead of 9,000 images and lr capped by AUX (below), SGD could not
  fit the noisy labels in a CPU budget without it (see :meth:`Config.quick`). A larger output
  factor also makes training lazier (the weights move less for the same change of f);
* a fixed learning rate ``lr`` for the *summed* mini-batch loss (the trainer's
  convention): stable when ``lr · λ_max(K_batch) < 2`` and, for AUX, ``lr · λ² < 2``
  for every λ of the grid (λ = 8: lr < 1/32); ``batch_size`` 128 at lr 0.01 (full;
  λ_max(K_batch) ≈ 120 at depth 11) and 4 at lr 0.025 (quick; λ_max(K_batch) ≈ 4 · 0.87 · 16 ≈ 56 at
  depth 8, 16 channels, 8×8 inputs, output scale 4);
* a validation split held out of training, its labels as noisy as the training labels (for the protocol).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Literal, cast

import numpy as np
import pandas as pd
import torch
from torch import nn

from .. import data, noise
from .._checks import check_choice, check_each_in, check_interval
from ..nets import ConvNet, DifferenceTrick, OutputScale
from ..ntk import empirical_ntk
from ..regime import linearised_sgd
from ..train import TrainConfig, TrainingMethod, TrainResult, batch_order
from . import _shared
from ._runner import ExperimentConfig, RunContext
from ._shared import (
    REGIME_COLUMNS,
    RegimeTracker,
    Splits,
    bracket,
    mark_protocol,
    memorised_fraction,
    protocol_means,
    train_protocol,
    split_from,
)

__all__ = [
    "Config",
    "compute",
    "network",
    "features",
    "figure_curves",
    "layer_curves",
    "weight_figure_ends",
    "weight_figures",
    "sweep",
    "memorised_fraction",
    "fitted_by_linear_sgd",
    "chosen",
    "protocol_table",
    "selection",
    "regime_table",
    "training_runs",
    "seed_verdict",
]

#: the parts of the table with one row per evaluated epoch of a training run (the learning curves and the
#: per-layer norms): a partial replay of a unit trains its first epochs only and compares these rows
#: (``experiments._record.EpochCut``)
EPOCH_PARTS = ("curves", "layers")

_LABELS = {"early_stopping": "SGD", "aux": "SGD+AUX", "rdi": "SGD+RDI"}
_TUNED = ["SGD+AUX", "SGD+RDI"]  # the methods whose λ is chosen on validation


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """Sizes, λ grids and optimiser of Setting 2; ``quick()`` fits 2 CPU cores, ``full()`` is the paper's scale."""

    profile: str = "quick"
    n_train: int = 100
    n_val: int = 100
    n_test: int = 0
    depth: int = 8
    channels: int = 16
    pool: int = 4
    noise: float = 0.2
    lams: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    curve_lam: float = 4.0
    clean_lams: tuple[float, ...] = (2.0,)
    epochs: int = 150
    batch_size: int = 4
    lr: float = 0.025
    eval_every: int = 10
    spectrum: bool = True
    n_probe: int = 128
    relu_gain: bool = True
    output_scale: float = 4.0
    download: bool = True
    seeds: tuple[int, ...] = (0,)
    device: str = "cpu"

    @classmethod
    def quick(cls) -> "Config":
        """Depth 8 (layers 2–7 trained, so that layers 4 and 7 of Figures 3, 6–8 exist), 16 channels, the
        images average-pooled to 8×8, 64 training / 100 validation images and all 192 airplane/automobile
        test images of the partial CIFAR-10, ``output_scale`` 4, 150 epochs of batch 4 at lr 0.025,
        evaluated every 10 epochs, the paper's λ grid {0.25, …, 8}, one seed. The verdict rule needs three
        seeds, so the quick run's paired comparisons are inconclusive with one or two; a second seed would double the
        book's longest cell. 64 training images for the book's time (a run's cost is the per-step overhead of
        small tensors), and no fewer: at 60, RDI at λ = 4 (at most one NTK eigenvalue above λ²) stays within 5
        points of vanilla SGD, and the chapter's check that such a λ leaves RDI nothing to classify with fails.
        20 % of 64 is 13 flips (20.3 %): the chapter counts memorised labels against those.

        Chosen so that the paper's precondition holds: vanilla SGD fits the noisy training labels. With
        the ReLU gain alone the training-set NTK has one large (nearly constant) eigenvalue and a bulk
        near 0.02 (100 images), and lr is capped by AUX at λ = 8 (``lr · λ² < 2``: lr < 1/32), so
        linearised SGD would need ≈ 1/(lr · 0.02) = 2,000 epochs; measured, 300 images × 40 epochs
        reproduced only ≈ 40% of the flipped labels. ``output_scale`` 4 multiplies the NTK by 16 (this also
        stands in for the 150× fewer images than the paper's 9,000), and batch 4 keeps the per-step stability
        ``lr · λ_max(K_batch) < 2`` (≈ 0.025 · 4 · 0.87 · 16 ≈ 1.4); then SGD reaches training error ≈ 1% on
        the noisy labels in 120–150 epochs. A longer training of a small network, not a short one of a big one;
        fewer epochs save little and thin the premise. How it was sized (trials, timings): ``benchmarks/README.md``.
        """
        return cls(n_train=64)

    @classmethod
    def medium(cls) -> "Config":
        """The quick network (depth 8, 16 channels, 8×8 inputs, output factor 4) on four times the images (400
        trained, 150 for validation, of the 762 airplane/automobile training images of the partial CIFAR-10; all
        192 test images), 200 epochs of batch 4 at lr 0.025, the paper's λ grid, three seeds.

        How it was sized (trials, timings): ``results/medium/README.md``.
        """
        return cls(
            profile="medium",
            n_train=400,
            n_val=150,
            n_test=0,
            depth=8,
            channels=16,
            pool=4,
            epochs=200,
            batch_size=4,
            lr=0.025,
            eval_every=10,
            seeds=(0, 1, 2),
        )

    @classmethod
    def full(cls) -> "Config":
        """The paper's network (11 layers, 192 channels) on all 10,000 airplane/automobile training
        images (1,000 held out for validation) at 32×32 and the 2,000 test images, λ ∈ {0.25, 0.5, 1, 2, 4, 8}.

        About 3.3 GPU hours per seed on one H100, scaled by image passes from a timed slice
        (``benchmarks/gpu_check.sh``; the measurement: ``benchmarks/README.md``).
        """
        return cls(
            profile="full",
            n_train=9_000,
            n_val=1_000,
            n_test=0,
            depth=11,
            channels=192,
            pool=1,
            lams=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
            curve_lam=4.0,
            clean_lams=(2.0,),
            epochs=100,
            batch_size=128,
            lr=0.01,
            eval_every=1,
            spectrum=False,
            output_scale=1.0,
            seeds=(0,),
            device="cuda",
        )

    counts = {
        "n_train": 1,
        "n_val": 1,
        "channels": 1,
        "epochs": 4,  # the kernel drift is measured after a quarter of the run
        "batch_size": 1,
        "eval_every": 1,
        "n_test": 0,
        "depth": 3,
        "n_probe": 1,
    }

    def _check(self) -> None:
        check_choice(self.pool, "pool (a divisor of the 32-pixel side)", (1, 2, 4, 8))
        check_interval(self.noise, "noise", 0.0, 0.5, high_open=True)
        check_each_in(self.lams, "λ (lams)", 0.0, math.inf, low_open=True, high_open=True)
        if self.clean_lams:
            check_each_in(self.clean_lams, "λ (clean_lams)", 0.0, math.inf, low_open=True, high_open=True)
        if self.curve_lam not in self.lams:
            raise ValueError(f"curve_lam = {self.curve_lam!r} (the λ of Figure 1b) must be one of lams = {self.lams}")
        check_interval(self.lr, "lr", 0.0, math.inf, low_open=True, high_open=True)
        check_interval(self.output_scale, "output_scale", 0.0, math.inf, low_open=True, high_open=True)
        unstable = [lam for lam in (*self.lams, *self.clean_lams) if self.lr * lam**2 >= 2.0]
        if unstable:
            raise ValueError(
                f"lr = {self.lr} is unstable for AUX with λ = {unstable}: SGD on the auxiliary "
                "variables needs lr · λ² < 2; lower lr or λ"
            )


def network(config: Config, seed: int) -> nn.Module:
    """The CNN of Setting 2 (first and last layer frozen) in the difference trick, with the ReLU gain if asked,
    its output multiplied by ``output_scale``."""
    g: nn.Module = ConvNet(3, config.channels, config.depth, 1, freeze_first_last=True, seed=seed)
    scale = config.output_scale * (2.0 ** ((config.depth - 1) / 2) if config.relu_gain else 1.0)
    if scale != 1.0:
        g = OutputScale(g, scale)
    return DifferenceTrick(g, alpha=0.5)


def features(config: Config) -> Callable[[np.ndarray], np.ndarray]:
    """Standardised CIFAR images (:func:`ntk_core.data.cifar_features`), average-pooled ``pool × pool``."""

    def feats(images: np.ndarray) -> np.ndarray:
        x = data.cifar_features(images)
        if config.pool == 1:
            return x
        n, c, h, w = x.shape
        p = config.pool
        return x.reshape(n, c, h // p, p, w // p, p).mean(axis=(3, 5)).astype(x.dtype)

    return feats


def _load(config: Config, seed: int, ctx: RunContext) -> Splits:
    return split_from(
        ctx,
        data.cifar_airplane_vs_automobile("train", download=config.download),
        data.cifar_airplane_vs_automobile("test", download=config.download),
        features(config),
        n_train=config.n_train,
        n_val=config.n_val,
        n_test=config.n_test,
        seed=seed,
        what="setting2 (CIFAR airplane vs automobile)",
    )


_PARAM = re.compile(r"g(?P<copy>[12])\..*features\.(?P<index>\d+)\.conv\.weight$")


def _layer_rows(result: TrainResult, initial: dict[str, float]) -> list[dict]:
    """Per-layer ‖W‖_F and ‖W − W(0)‖_F per epoch, from the trainer's ``norm/`` and ``dist/`` columns;
    epoch 0 is the initialisation (``initial``: ‖W(0)‖_F by parameter name)."""
    rows = []
    history = result.history
    for column in history.columns:
        if not column.startswith("norm/"):
            continue
        name = column[len("norm/") :]
        match = _PARAM.search(name)
        if match is None:  # only convolutions are trained (the readout is frozen)
            continue
        layer = int(match["index"]) // 2 + 1  # features = [conv, relu, conv, relu, ...]
        epochs = [0, *history["epoch"]]
        norms = [initial[name], *history[column]]
        dists = [0.0, *history[f"dist/{name}"]]
        for epoch, norm, dist in zip(epochs, norms, dists):
            rows.append(
                {
                    "epoch": int(epoch),
                    "layer": layer,
                    "copy": int(match["copy"]),
                    "norm": float(norm),
                    "dist": float(dist),
                }
            )
    return rows


def _run(
    config: Config,
    split: Splits,
    y_noisy: torch.Tensor,
    y_val_noisy: torch.Tensor,
    method: str,
    lam: float | None,
    seed: int,
    progress: bool,
) -> list[dict]:
    model = network(config, seed).to(config.device)
    initial = {
        name: float(torch.linalg.vector_norm(p.detach())) for name, p in model.named_parameters() if p.requires_grad
    }
    regime = RegimeTracker(model, split.x_test[: config.n_probe], config.epochs)
    cfg = TrainConfig(
        method=cast(TrainingMethod, method),
        lam=lam,
        loss="l2",
        epochs=config.epochs,
        lr=config.lr,
        batch_size=config.batch_size,
        seed=seed,
        eval_every=config.eval_every,
    )
    result, h = train_protocol(model, split, y_noisy, y_val_noisy, cfg, progress=progress, on_epoch_end=regime)
    # the linearised network trained by the same SGD steps (same batches, same objective; AUX: its network part)
    lin = linearised_sgd(
        regime.initial,
        split.x_train,
        y_noisy,
        split.x_test,
        lr=config.lr,
        batches=batch_order(len(split.x_train), cfg),
        regularizer="none" if method == "early_stopping" else cast(Literal["rdi", "aux"], method),
        lam=lam or 0.0,
    )
    rows: list[dict] = []
    for _, r in h.iterrows():
        rows.append(
            {
                "part": "curves",
                "epoch": int(r["epoch"]),
                "train_error": float(r["train_error_noisy"]),
                "train_error_clean": float(r["train_error_clean"]),
                "val_error": float(r["val_error"]),
                "val_error_clean": float(r["val_error_clean"]),
                "test_error": float(r["test_error"]),
                "loss": float(r["loss"]),
                "dist": float(r["dist/all"]),
            }
        )
    rows += [{"part": "layers", **r} for r in _layer_rows(result, initial)]
    label = _LABELS[method]

    def at(row: pd.Series) -> dict:
        return {
            "part": "summary",
            "epoch": int(row["epoch"]),
            "train_error": float(row["train_error_noisy"]),
            "train_error_clean": float(row["train_error_clean"]),
            "val_error": float(row["val_error"]),
            "val_error_clean": float(row["val_error_clean"]),
            "val_mse": float(row["val_mse"]),
            "val_mse_clean": float(row["val_mse_clean"]),
            "test_error": float(row["test_error"]),
            "dist": float(row["dist/all"]),
        }

    last = h.iloc[-1]
    summary = {
        **at(last),
        "method": label,
        "train_error_net": float(last["train_error_net"]),
        **regime.columns(split.x_test, split.y_test, lin.test),
        "lin_diverged": lin.diverged,
        "lin_growth": lin.residual_growth,
        "lin_step": lin.largest_step,
    }
    if lin.diverged:  # no linearised network to compare with
        summary.update(lin_agreement=math.nan, lin_test_error=math.nan)
    if method == "early_stopping":  # vanilla SGD has nothing to choose
        summary.update(selected=True, selected_oracle=True)
    rows.append(summary)
    if method == "early_stopping":
        # early stopping: the first evaluated epoch of least validation error, on the noisy and on the clean labels
        for column, flags in (("val_error", (True, False)), ("val_error_clean", (False, True))):
            stop = h.loc[h[column].idxmin()]
            rows.append({**at(stop), "method": "SGD+ES", "selected": flags[0], "selected_oracle": flags[1]})
    for r in rows:
        r.setdefault("method", label)
    return rows


def _spectrum(config: Config, split: Splits, y_noisy: torch.Tensor, seed: int) -> list[dict]:
    """Eigenvalues μ_k of the empirical NTK of f at initialisation on the training set (float64), and the
    share of ‖ỹ‖² along each eigenvector (``energy``, sums to 1): part ``spectrum``, one row per k."""
    model = network(config, seed).to(config.device)
    K = empirical_ntk(model, split.x_train, out_dtype=torch.float64).cpu().numpy()
    mu, vectors = np.linalg.eigh(K)
    y = y_noisy.cpu().numpy().astype(np.float64)
    energy = (vectors.T @ y) ** 2 / float(y @ y)
    order = np.argsort(mu)[::-1]
    return [
        {"part": "spectrum", "index": int(k), "eigenvalue": float(mu[i]), "energy": float(energy[i])}
        for k, i in enumerate(order)
    ]


def fitted_by_linear_sgd(table: pd.DataFrame, config: dict, seed: int = 0) -> dict:
    """How much of the noisy labels linearised (NTK) training can have fitted in the epochs of the run.

    One epoch of SGD on the summed loss moves the residual along eigenvector k of the training-set NTK by
    a factor ≈ ``1 − lr μ_k`` (the batches together apply ``lr K`` once), so after ``E`` epochs only
    directions with ``lr μ_k E ≳ 1`` are fitted. Returns the number of such directions (``directions``),
    the share of ‖ỹ‖² they carry (``energy``) and the share of ‖ỹ‖² removed by the linearised dynamics,
    ``Σ_k energy_k (1 − (1 − lr μ_k)^{2E})`` (``fitted``), from part ``spectrum`` of the table.
    """
    s = table[(table["part"] == "spectrum") & (table["seed"] == seed)]
    if s.empty:
        raise ValueError("the table has no NTK spectrum (run with spectrum=True)")
    lr, epochs = float(config["lr"]), int(config["epochs"])
    mu, energy = s["eigenvalue"].to_numpy(), s["energy"].to_numpy()
    fitted_dirs = lr * mu * epochs >= 1.0
    shrink = np.clip(1.0 - lr * np.clip(mu, 0.0, None), -1.0, 1.0) ** (2 * epochs)
    return {
        "directions": int(fitted_dirs.sum()),
        "n": int(len(mu)),
        "energy": float(energy[fitted_dirs].sum()),
        "fitted": float((energy * (1.0 - shrink)).sum()),
        "threshold": 1.0 / (lr * epochs),
    }


def compute(config: Config, ctx: RunContext) -> pd.DataFrame:
    """The tables behind Figures 1b, 3, 5–8: parts ``curves``, ``layers`` and ``summary`` (see the module docstring)."""
    rows: list[dict] = []
    for seed in config.seeds:
        split = _load(config, seed, ctx).to(config.device)
        plan = [(config.noise, config.lams)]
        if config.clean_lams and config.noise != 0.0:
            plan.append((0.0, config.clean_lams))
        elif config.clean_lams:
            plan = [(0.0, tuple(dict.fromkeys((*config.lams, *config.clean_lams))))]
        for p_index, (p, lams) in enumerate(plan):
            y_noisy = torch.as_tensor(
                noise.flip_binary(split.y_train.cpu().numpy(), p, seed=1000 * seed + p_index, exact=True)
            ).to(config.device)
            y_val_noisy = torch.as_tensor(
                noise.flip_binary(split.y_val.cpu().numpy(), p, seed=1000 * seed + 500 + p_index, exact=True)
            ).to(config.device)
            if config.spectrum and p_index == 0:
                unit = ctx.unit(
                    {"seed": seed, "noise": p, "spectrum": True}, lambda: _spectrum(config, split, y_noisy, seed)
                )
                rows += [{"seed": seed, "noise": p, "method": "", "lam": 0.0, **r} for r in unit]
            runs = [("early_stopping", None)] + [(m, lam) for lam in lams for m in ("aux", "rdi")]
            for method, lam in runs:
                key = {"seed": seed, "noise": p, "method": method, "lam": lam}
                unit = ctx.unit(key, lambda: _run(config, split, y_noisy, y_val_noisy, method, lam, seed, ctx.progress))
                rows += [{"seed": seed, "noise": p, "lam": lam if lam is not None else 0.0, **r} for r in unit]
    columns = [
        "part",
        "seed",
        "noise",
        "method",
        "lam",
        "epoch",
        "train_error",
        "train_error_clean",
        "val_error",
        "val_error_clean",
        "val_mse",
        "val_mse_clean",
        "test_error",
        "train_error_net",
        "loss",
        "dist",
        *REGIME_COLUMNS,
        "lin_diverged",
        "lin_growth",
        "lin_step",
        "selected",
        "selected_oracle",
        "layer",
        "copy",
        "norm",
        "index",
        "eigenvalue",
        "energy",
    ]
    table = pd.DataFrame(rows)
    table = mark_protocol(table, (table["part"] == "summary") & table["method"].isin(_TUNED))
    return table[[c for c in columns if c in table.columns]]


def figure_curves(table: pd.DataFrame, noise_rate: float = 0.2, lam: float = 4.0) -> pd.DataFrame:
    """Figure 1b and each panel of Figure 5: per-epoch train/test error of SGD, SGD+AUX, SGD+RDI at (noise, λ),
    averaged over seeds (columns ``method``, ``epoch``, ``train_error``, ``test_error``)."""
    curves = table[(table["part"] == "curves") & (table["noise"] == noise_rate)]
    chosen = curves[(curves["method"] == "SGD") | (curves["lam"] == lam)]
    if not (chosen["method"] != "SGD").any():
        raise ValueError(f"no SGD+AUX / SGD+RDI run at noise {noise_rate} and λ = {lam} in the table")
    return chosen.groupby(["method", "epoch"])[["train_error", "test_error"]].mean().reset_index()


def layer_curves(table: pd.DataFrame, noise_rate: float, lam: float, layer: int) -> pd.DataFrame:
    """Figures 3, 6–8: ‖W⁽ˡ⁾‖_F and ‖W⁽ˡ⁾ − W⁽ˡ⁾(0)‖_F per epoch of SGD, SGD+AUX, SGD+RDI at (noise, λ).

    ``W⁽ˡ⁾`` is layer ``l`` of the whole network f, i.e. the layer-``l`` weights of both copies of the
    difference trick together: ``norm = √(‖W₁‖² + ‖W₂‖²)`` and ``dist`` likewise. Averaged over seeds;
    columns ``method``, ``epoch`` (0 = initialisation), ``norm``, ``dist``, ``relative`` = dist / ‖W⁽ˡ⁾(0)‖_F.
    """
    rows = table[(table["part"] == "layers") & (table["noise"] == noise_rate) & (table["layer"] == layer)]
    rows = rows[(rows["method"] == "SGD") | (rows["lam"] == lam)]
    if rows.empty:
        raise ValueError(
            f"no weights of layer {layer} recorded at noise {noise_rate}, λ = {lam} (layers 2..depth-1 are trained)"
        )
    squared = rows.assign(norm2=rows["norm"] ** 2, dist2=rows["dist"] ** 2)
    both = squared.groupby(["seed", "method", "epoch"])[["norm2", "dist2"]].sum()
    both = (both**0.5).rename(columns={"norm2": "norm", "dist2": "dist"}).groupby(["method", "epoch"]).mean()
    out = both.reset_index()
    init = out[out["epoch"] == 0].set_index("method")["norm"]  # epoch 0: W(0), recorded before training
    out["relative"] = out["dist"] / out["method"].map(init)
    return out


def weight_figures(config: dict) -> list[tuple[str, float, float, int]]:
    """The paper's weight-movement figures as (figure, noise, λ, layer) for a run's ``config`` (a dict, e.g.
    ``result.meta["config"]``): Figures 3 and 6 are layers 4 and 7 at the run's noise and ``curve_lam``, Figures
    7 and 8 the same layers at noise 0 and the first of ``clean_lams``."""
    noisy, clean = float(config["noise"]), float(config["clean_lams"][0])
    curve = float(config["curve_lam"])
    return [("Figure 3", noisy, curve, 4), ("Figure 6", noisy, curve, 7), ("Figure 7", 0.0, clean, 4),
            ("Figure 8", 0.0, clean, 7)]  # fmt: skip


def weight_figure_ends(table: pd.DataFrame, config: dict) -> pd.DataFrame:
    """Figures 3, 6–8 in numbers: per figure of :func:`weight_figures`, each method's distance of the layer to its
    initialisation at the last epoch, relative to its initial norm (:func:`layer_curves`, mean over the seeds).
    Columns ``figure``, ``noise``, ``lam``, ``layer`` and one per method (SGD, SGD+AUX, SGD+RDI)."""
    rows = []
    for figure, p, lam, layer in weight_figures(config):
        curves = layer_curves(table, p, lam, layer)
        end = curves[curves["epoch"] == curves["epoch"].max()].set_index("method")["relative"]
        rows.append({"figure": figure, "noise": p, "lam": lam, "layer": layer, **end.to_dict()})
    return pd.DataFrame(rows)


def sweep(table: pd.DataFrame, noise_rate: float) -> pd.DataFrame:
    """Figure 5 in numbers: the last epoch of every SGD+AUX / SGD+RDI run at ``noise_rate``, per λ, averaged
    over seeds, beside vanilla SGD (``lam`` 0): train error with and without the auxiliary variables, test
    error, distance to initialisation."""
    s = table[
        (table["part"] == "summary")
        & (table["noise"] == noise_rate)
        & table["method"].isin(["SGD", "SGD+AUX", "SGD+RDI"])
    ]
    cols = ["train_error", "train_error_net", "train_error_clean", "test_error", "dist"]
    return s.groupby(["method", "lam"])[cols].mean().reset_index()


def chosen(table: pd.DataFrame, oracle: bool = False) -> pd.DataFrame:
    """The summary rows the selection protocol keeps: one per (seed, noise, method), SGD+ES's epoch and the λ
    of SGD+AUX and SGD+RDI chosen on the noisy validation labels (``oracle=False``, what a user has) or on the
    clean ones (the oracle); SGD's last epoch under both."""
    return _shared.chosen(table[table["part"] == "summary"], oracle)


def protocol_table(table: pd.DataFrame) -> pd.DataFrame:
    """Mean test error over seeds per noise level and method under both protocols: ``noisy`` (early-stopping
    epoch and λ chosen on the noisy validation labels) and ``oracle`` (chosen on the clean ones)."""
    return protocol_means(table[table["part"] == "summary"])


def selection(table: pd.DataFrame, oracle: bool = False) -> pd.DataFrame:
    """Does the λ grid bracket the best λ? One row per (seed, noise, method) of SGD+AUX and SGD+RDI
    (``experiments._shared.bracket``: ``lam`` the λ the protocol selects, ``bracketed`` whether the
    validation error at both ends of the grid is strictly above its minimum)."""
    s = table[(table["part"] == "summary") & table["method"].isin(_TUNED)]
    return bracket(s, oracle)


def training_runs(table: pd.DataFrame) -> pd.DataFrame:
    """The summary rows of trained networks at their last epoch (SGD, SGD+AUX, SGD+RDI at every λ): the rows with
    the regime columns."""
    return table[(table["part"] == "summary") & table["method"].isin(["SGD", *_TUNED])]


def regime_table(table: pd.DataFrame) -> pd.DataFrame:
    """How far the trained networks leave the NTK regime: the regime columns (module docstring) of every run's
    last epoch, mean over seeds, per noise level, method and λ (vanilla SGD: λ = 0); the linearisation's
    agreement and test error over the seeds where it did not diverge, ``lin_diverged`` the number of seeds
    where it did and ``lin_step`` its largest step factor over the seeds (above 2: some step expands)."""
    groups = training_runs(table).groupby(["noise", "method", "lam"])
    out = groups[list(REGIME_COLUMNS)].mean()  # the linearisation's columns over the seeds where it converged
    out["lin_diverged"] = groups["lin_diverged"].apply(lambda v: int(v.astype(bool).sum()))
    out["lin_step"] = groups["lin_step"].max()
    return out.reset_index()


def linearisation_stability(table: pd.DataFrame) -> dict[str, int]:
    """How the linearised SGD of each trained run (:func:`training_runs`) fared against its step factors.

    Returns the number of ``runs``; ``diverged`` (``lin_diverged``); ``expanding``, the runs with a step factor
    above 2 on some batch (``lin_step``, :func:`ntk_core.krr.sgd_step_factors`); ``expanding_bounded``, those of
    them that did not diverge (other batches undid the expansion); and ``diverged_contracting``, runs flagged as
    diverged although every step contracts: such a run is bounded, so a count above 0 means the flag's growth
    criterion (:data:`ntk_core.regime.DIVERGED_GROWTH`) or a computation misfires.
    """
    runs = training_runs(table)
    diverged, expanding = runs["lin_diverged"].astype(bool), runs["lin_step"] > 2
    return {
        "runs": len(runs),
        "diverged": int(diverged.sum()),
        "expanding": int(expanding.sum()),
        "expanding_bounded": int((expanding & ~diverged).sum()),
        "diverged_contracting": int((diverged & ~expanding).sum()),
    }


def seed_verdict(differences: np.ndarray) -> str:
    """How SGD's test error minus a method's compares across seeds (positive: the method is lower)."""
    d = np.asarray(differences, dtype=float)
    if (d > 0).all():
        return "lower than SGD's on every seed"
    if (d < 0).all():
        return "higher than SGD's on every seed"
    return "lower on some seeds and higher on others"
