r"""Table 2 (Section 6.2): distance to initialisation at convergence against the hyper-parameters.

The paper tracks :math:`\lVert\theta - \theta(0)\rVert` to judge whether a network is in the
NTK regime, and summarises (Table 2): the distance grows with the number of
samples and with the noise level, shrinks with the regularisation strength λ,
and does not depend on the width or the learning rate "as long as width is
sufficiently large and learning rate is sufficiently small".

Here one factor at a time moves around a base point, on the Setting 1 network
(two-layer ReLU net with the difference trick, first layer trained) trained by
full-batch GD on MNIST "5" vs "8":

* ``samples``, ``noise``, ``width``: vanilla GD (no regularisation);
* ``lam``: GD + RDI with ridge λ²;
* ``lr``: vanilla GD with ``η = lr_scale / ‖K‖``; the number of steps is scaled by
  ``1 / lr_scale`` so that every run gets the same optimisation "time" η·t.

For vanilla GD in the NTK regime the distance at convergence is
:math:`\sqrt{\tilde y^\top K^{-1} \tilde y}` (the minimum-norm interpolant), so the
table also reports that closed form (``predicted``) from the empirical NTK:
the measured distance approaches it as training converges. The per-layer weight
movement during training (Figures 3, 6–8) is recorded by ``setting2``.

**The NTK regime**, in every run (``experiments._shared.RegimeTracker``): ``kernel_drift`` (at the
end; ``kernel_drift_quarter`` and ``kernel_drift_half`` along the way) is the relative change of the empirical NTK
on the first ``n_probe`` test images, ``movement`` the relative movement of the trained weights (the distance
relative to ‖θ(0)‖), ``lin_agreement`` the fraction of test images on which the network predicts the label that
its linearisation around θ(0), trained by the same GD steps (RDI: with its λ), predicts
(:func:`ntk_core.regime.linearised_outputs`), and ``lin_test_error`` the linearisation's test error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .. import noise
from .._checks import check_count, check_each_in, check_kernel_matrix, symmetry_rtol
from ..krr import krr_coefficients
from ..nets import DifferenceTrick, TwoLayerNet
from ..ntk import empirical_ntk
from ..regime import linearised_outputs
from ..train import TrainConfig, train
from ._runner import ExperimentConfig, RunContext
from ._shared import RegimeTracker, make_split
from .setting1 import check_pool, input_dim, mnist_5_vs_8_features

__all__ = [
    "Config",
    "compute",
    "FACTORS",
    "trends",
    "seed_table",
    "tracking",
    "training_runs",
    "regime_by_factor",
    "width_drift",
]

FACTORS = ("samples", "noise", "width", "lam", "lr")
# Table 2 of the paper: +1 positive correlation, -1 negative, 0 none (wide net, small learning rate)
PAPER_TRENDS = {"samples": 1, "noise": 1, "width": 0, "lam": -1, "lr": 0}


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """Base point and the values each factor takes; ``quick()`` for 2 CPU cores, ``medium()`` about an hour
    on them (recorded), ``full()`` for a GPU."""

    profile: str = "quick"
    n_train: int = 100
    noise: float = 0.2
    width: int = 512
    pool: int = 2
    lam: float = 1.0
    steps: int = 7_000
    samples_grid: tuple[int, ...] = (50, 100, 200)
    noise_grid: tuple[float, ...] = (0.0, 0.2, 0.4)
    width_grid: tuple[int, ...] = (256, 512, 1024)
    lam_grid: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)
    lr_grid: tuple[float, ...] = (0.25, 0.5, 1.0)
    n_probe: int = 128
    seeds: tuple[int, ...] = (0,)
    device: str = "cpu"

    @classmethod
    def quick(cls) -> "Config":
        """Base point 100 images, width 512, noise 0.2, 7,000 GD steps (28,000 at lr scale 1/4); one seed.

        Table 2 is about the distance *at convergence*, so the steps are chosen for that precondition
        (:func:`ntk_core.bookkit.claims.table_2_precondition`): 7,000 steps bring every run below mean
        training loss 10⁻³ on full MNIST and on the embedded subset, with a margin; ≈ 5.5 minutes on one
        thread. How it was sized (trials, timings): ``benchmarks/README.md``.
        """
        return cls()

    @classmethod
    def medium(cls) -> "Config":
        """Base point 200 images (pooled to 14×14), width 512, noise 0.2, 15,000 GD steps (60,000 at lr scale
        1/4); samples 100–300, noise 0–40 %, width 256–2,048, λ ∈ {1/4, …, 4}, lr scale ∈ {1/4, 1/2, 1}; 3
        seeds.

        How it was sized (trials, timings): ``results/medium/README.md``.
        """
        return cls(
            profile="medium",
            n_train=200,
            noise=0.2,
            width=512,
            pool=2,
            lam=1.0,
            steps=15_000,
            samples_grid=(100, 200, 300),
            noise_grid=(0.0, 0.1, 0.2, 0.3, 0.4),
            width_grid=(256, 512, 1_024, 2_048),
            lam_grid=(0.25, 0.5, 1.0, 2.0, 4.0),
            lr_grid=(0.25, 0.5, 1.0),
            seeds=(0, 1, 2),
            device="cpu",
        )

    @classmethod
    def full(cls) -> "Config":
        """Up to 4,000 samples and width 10,000, 120,000 GD steps at lr scale 1 (960,000 at lr scale 1/8).

        Sized for the precondition (every run converged, mean training loss below 10⁻³) without a GPU, by the
        linearised dynamics and a lag measured on the medium record:

        * linearised GD with the infinite-width NTK (:func:`ntk_core.krr.gd_steps_to_fit`, η = 1/‖K‖, MNIST
          5 vs 8 at 28×28, three random subsets each) reaches mean loss 10⁻³ after 5,600–5,700 steps at 1,000
          images (noise 0.2; 6,100–6,300 at noise 0.4), 13,100–13,400 at 2,000 and 28,200–29,000 at 4,000;
        * the finite networks lag their own linearisation: on the medium record's vanilla runs (width
          256–2,048, 100–300 images) GD's measured loss after 15,000 steps is what the empirical NTK's
          linearised dynamics reach after 1/1.9 – 1/3.9 of those steps (mean lag 3, no clear trend with width);
        * so 4,000 images need ≈ 29,000 × 4 ≈ 116,000 steps: 120,000.

        Estimated (not measured) time: a GD step of Setting 1's network (10,000 images, width 10,000) took
        17.6 ms on one H100 (``benchmarks/gpu_check.sh``); scaled by images × width, ≈ 0.7 ms at the base
        point (1,000 images, width 4,096). The distinct runs of a seed cost ≈ 34 base-point runs (the lr scales
        1/8–1/2 run 8×, 4× and 2× the steps), ≈ 0.8–1 GPU-hour per seed with overhead, ≈ 3 for three. Check
        the precondition on the first units before recording all of them."""
        return cls(
            profile="full",
            n_train=1_000,
            width=4_096,
            pool=1,
            steps=120_000,
            samples_grid=(250, 500, 1_000, 2_000, 4_000),
            noise_grid=(0.0, 0.1, 0.2, 0.3, 0.4),
            width_grid=(1_024, 2_048, 4_096, 10_000),
            lam_grid=(0.25, 0.5, 1.0, 2.0, 4.0),
            lr_grid=(0.125, 0.25, 0.5, 1.0),
            seeds=(0, 1, 2),
            device="cuda",
        )

    counts = {"n_train": 1, "width": 1, "steps": 4, "n_probe": 1}  # steps: the drift is measured at a quarter

    def _check(self) -> None:
        check_pool(self.pool)
        for n in self.samples_grid:
            check_count(n, "samples_grid entry", minimum=2)
        for w in self.width_grid:
            check_count(w, "width_grid entry")
        check_each_in((self.noise, *self.noise_grid), "noise", 0.0, 0.5, high_open=True)
        check_each_in((self.lam, *self.lam_grid), "λ", 0.0, math.inf, low_open=True, high_open=True)
        check_each_in(self.lr_grid, "lr scale", 0.0, 2.0, low_open=True)

    def points(self) -> list[dict]:
        """Every (factor, value) run: the base point with one factor moved."""
        base = {"n_train": self.n_train, "noise": self.noise, "width": self.width, "lam": None, "lr_scale": 1.0}
        grids = {
            "samples": ("n_train", self.samples_grid),
            "noise": ("noise", self.noise_grid),
            "width": ("width", self.width_grid),
            "lam": ("lam", self.lam_grid),
            "lr": ("lr_scale", self.lr_grid),
        }
        return [
            {**base, field_: value, "factor": factor, "value": value}
            for factor, (field_, values) in grids.items()
            for value in values
        ]


def _one(config: Config, point: dict, seed: int, features: tuple, progress: bool) -> dict:
    x_train, y_train, x_test, y_test = features
    split = make_split(
        x_train,
        y_train,
        x_test,
        y_test,
        n_train=point["n_train"],
        n_val=0,
        n_test=200,
        seed=seed,
        what="distance (MNIST 5 vs 8)",
    )
    y_noisy = torch.as_tensor(noise.flip_binary(split.y_train.numpy(), point["noise"], seed=seed, exact=True))
    split = split.to(config.device)
    y_noisy = y_noisy.to(config.device)
    model = DifferenceTrick(TwoLayerNet(input_dim(config.pool), point["width"], seed=seed)).to(config.device)
    steps = int(round(config.steps / point["lr_scale"]))
    regime = RegimeTracker(model, split.x_test[: config.n_probe], steps)
    # K(X, X) of the float32 network: symmetric to float32 rounding (checked), then exactly
    K = empirical_ntk(model, split.x_train, out_dtype=torch.float64).numpy()
    K = check_kernel_matrix(K, "K(X, X)", rtol=symmetry_rtol(np.float32))
    eig = np.linalg.eigvalsh(K)
    lam = point["lam"]
    lr = point["lr_scale"] / (eig[-1] + (lam or 0.0) ** 2)
    cfg = TrainConfig(
        method="rdi" if lam else "vanilla", lam=lam, loss="l2", epochs=steps, lr=lr, eval_every=steps, seed=seed
    )
    result = train(
        model, split.x_train, y_noisy, cfg, test=(split.x_test, split.y_test), progress=progress, on_epoch_end=regime
    )
    # the linearised network trained by the same GD steps (RDI: with its λ), from the same θ(0)
    _, lin_test = linearised_outputs(
        regime.initial, split.x_train, y_noisy, split.x_test, eta=lr, steps=steps, lam=float(lam or 0.0)
    )
    y = y_noisy.cpu().numpy().astype(np.float64)
    # minimum-norm (λ = 0) or ridge (λ > 0) solution of the linearised problem: ‖θ* − θ(0)‖
    alpha = krr_coefficients(K, y, lam or 0.0)
    predicted = float(np.sqrt(alpha @ K @ alpha))
    return {
        "n_train": point["n_train"],
        "lam": float(lam or 0.0),
        "distance": float(result.final["dist/all"]),
        "predicted": predicted,
        "train_loss": float(result.final["loss"]),
        "test_error": float(result.final["test_error"]),
        "steps": steps,
        "lr": lr,
        **regime.columns(split.x_test, split.y_test, lin_test),
    }


def compute(config: Config, ctx: RunContext) -> pd.DataFrame:
    """One row per (seed, factor, value): measured distance and the linearised prediction."""
    # normalised once: every run below draws its own subset from these arrays
    features = mnist_5_vs_8_features(ctx, config.pool)
    rows = []
    for seed in config.seeds:
        for point in config.points():
            # the base point recurs in several factors: key the unit by the run itself, not by the factor
            run_key = {k: point[k] for k in ("n_train", "noise", "width", "lam", "lr_scale")}
            unit = ctx.unit({"seed": seed, **run_key}, lambda: _one(config, point, seed, features, ctx.progress))
            rows += [{"seed": seed, "factor": point["factor"], "value": point["value"], **r} for r in unit]
    return pd.DataFrame(rows)


def trends(table: pd.DataFrame) -> pd.DataFrame:
    """Spearman rank correlation of the measured distance with each factor, beside Table 2's sign."""
    from scipy.stats import spearmanr

    out = []
    for factor, group in table.groupby("factor", sort=False):
        mean = group.groupby("value")["distance"].mean()
        rho = float(spearmanr(mean.index, mean.values).statistic) if len(mean) > 1 else float("nan")
        spread = float((mean.max() - mean.min()) / mean.mean())
        out.append(
            {
                "factor": factor,
                "spearman": rho,
                "relative_spread": spread,
                "paper": {1: "positive", -1: "negative", 0: "none"}[PAPER_TRENDS[factor]],
            }
        )
    return pd.DataFrame(out)


def seed_table(table: pd.DataFrame, factor: str) -> pd.DataFrame:
    """The measured distance along one factor's grid, seed by seed: one row per seed, one column per value of the
    factor in increasing order (the input of a per-seed trend, :func:`ntk_core.bookkit.claims.judge_trend`)."""
    rows = table[table["factor"] == factor]
    if rows.empty:
        raise ValueError(f"no runs of the factor {factor!r} (factors: {sorted(table['factor'].unique())})")
    return rows.pivot_table(index="seed", columns="value", values="distance").sort_index(axis=1)


def tracking(table: pd.DataFrame, loss_tol: float = 1e-3, rate_tol: float = 0.01) -> pd.DataFrame:
    """How closely the measured distance follows the linearised prediction, run by run.

    Adds ``gap`` = (measured − predicted) / predicted and ``converged``: for vanilla GD the mean training
    loss ``train_loss / n_train`` is below ``loss_tol``; for GD + RDI (``lam`` > 0) Theorem 4.1's linear rate
    ``(1 − η λ²)^t`` is below ``rate_tol``. The prediction is the end point of training, so only converged
    runs are expected to match it.
    """
    t = table.copy()
    t["gap"] = (t["distance"] - t["predicted"]) / t["predicted"]
    rdi = t["lam"] > 0
    rate = np.abs(1 - t["lr"] * t["lam"] ** 2) ** t["steps"]
    t["converged"] = np.where(rdi, rate < rate_tol, t["train_loss"] / t["n_train"] < loss_tol)
    return t


def training_runs(table: pd.DataFrame, config: dict) -> pd.DataFrame:
    """One row per trained network: the base run recurs under several factors (the samples, noise, width and
    learning-rate grids each contain the base point), so its row is kept once, under the first factor.

    ``config`` is the run's config as a dict (``result.meta["config"]``), which gives the base point.
    """
    base = {"samples": config["n_train"], "noise": config["noise"], "width": config["width"], "lr": 1.0}
    is_base = pd.Series([base.get(f) == v for f, v in zip(table["factor"], table["value"])], index=table.index)
    keep = ~is_base
    keep[table[is_base].drop_duplicates(subset=["seed"]).index] = True  # the base run once per seed
    return table[keep]


def regime_by_factor(table: pd.DataFrame) -> pd.DataFrame:
    """The kernel drift, weight movement and agreement with the linearised network, mean over the seeds, per
    (factor, value): every value of each factor's grid (the base run under each factor it belongs to)."""
    columns = [c for c in ("kernel_drift", "movement", "lin_agreement") if c in table.columns]
    return table.groupby(["factor", "value"], sort=False)[columns].mean().reset_index()


def width_drift(table: pd.DataFrame) -> dict:
    """How the kernel drift (``kernel_drift``, the relative change of the empirical NTK on the probe) changes with
    the width, on the rows of the ``width`` factor.

    Returns ``by_width`` (mean drift over the seeds per width), ``falls_every_seed`` (the drift falls strictly
    from each width to the next on every seed) and ``slope``, the least-squares slope of log(mean drift) on
    log(width): −½ for the O(1/√m) change of the kernel of a width-m network in the NTK parametrisation.
    """
    rows = table[table["factor"] == "width"]
    if rows.empty or "kernel_drift" not in rows.columns:
        raise ValueError("the table has no width factor with a kernel_drift column (a record made before it)")
    wide = rows.pivot_table(index="value", columns="seed", values="kernel_drift").sort_index()
    mean = wide.mean(axis=1)
    slope = float(np.polyfit(np.log(mean.index.to_numpy(float)), np.log(mean.to_numpy()), 1)[0])
    return {
        "by_width": {float(w): float(d) for w, d in mean.items()},
        "falls_every_seed": bool((wide.diff().iloc[1:] < 0).all().all()),
        "slope": slope,
    }
