r"""The bounds of Section 5 measured up to the full size of the data: every MNIST image, K out of core.

The tightness chapter asks when Theorem 5.2's explicit bound stops being vacuous on MNIST. Extrapolating
``yᵀK⁻¹y ≈ C₀nᵃ`` from n ≤ 4,000 to the n where it would is fragile (the exponent alone moves that n several
fold); this study **measures** the bound's terms at the largest n the data has, for the Setting-1 kernel (the
infinite-width NTK of the two-layer ReLU net with its first layer trained, :func:`ntk_core.infinite.setting1_kernel`,
on :func:`ntk_core.data.sphere_features`, so that tr K = n/2):

* ``task="binary"``: MNIST "5" vs "8" (every one of its 11,272 training images at the largest size), clean labels
  ±1, Theorem 5.2 with flip rate ``p``;
* ``task="multiclass"``: all ten digits (all 60,000 training images at the largest size), Theorem 5.3 with a
  symmetric and a pair-flip transition matrix P of rate ``rate``;
* ``task="binary_empirical"``: the binary task at ``empirical_n`` images with the **empirical** NTK of Setting 1's
  network at ``width`` (first layer trained; its NTK is the difference trick's, Lemma A.1), to show how far a
  finite network's complexity term is from the infinite one's.

Each unit is one (task, n, subset seed): K + λ²I is factored tile by tile (:mod:`ntk_core.kernel_matrix.factored`, K's tiles
computed from the inputs, never stored; a factor too large for memory kept under the cache folder while the unit
runs, so that a killed unit resumes, the others made in memory), at λ = 0 for ``yᵀK⁻¹y`` and, where ``n ≤ grid_max_n``, at every λ of ``lams`` and at the λ*
that minimises the bound's leading terms (:func:`ntk_core.bounds.leading_lambda`). Beyond ``grid_max_n`` (each
factorisation of n = 60,000 is about half an hour on 2 cores) only λ = 0 is factored: the bound at λ* is computed with
its ridge term ``yᵀ(K + λ²I)⁻¹y`` replaced by the larger ``yᵀK⁻¹y`` (``ridge_exact`` False), an upper bound on it,
while the leading terms' minimum is a lower bound at every λ, so the two bracket the bound. Every label matrix
of a unit at λ = 0 (the labels, or both noise models' clean outputs ``q⁽ʰ⁾`` and the one-hot labels) goes through
one forward pass over the factor (:meth:`ntk_core.kernel_matrix.factored.FactoredKernel.forwards`), and the conditioning's
error estimate adds a backward and a forward pass: beyond ``grid_max_n``, three reads of a factor that n = 60,000
makes 14.4 GB on disk. Its rows (one per noise
model and λ) hold tr K, the complexity, the ridge term, every term of the theorem (rescaled as in its total), the
total, the leading terms' minimum over λ, and the
conditioning of K: the relative error of yᵀK⁻¹y estimated by a step of iterative refinement (``comp_error``), the
smallest pivot (an upper bound on K's smallest eigenvalue) and the lower bound on K's condition number it gives.
Where K + λ²I is factored, the row also holds the clean test error of KRR trained on labels corrupted with the
unit's seed (``test_error``, on the first ``n_test`` test images of the task, 0: all): the error the bound bounds.
Subsets below the full size are drawn with the unit's seed (the full set has one unit).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import shutil
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import bounds, data, noise
from ..kernel_matrix import FactoredKernel, KernelMatrix, KernelSource, symmetrise_in_place
from ..infinite import setting1_kernel
from .._checks import check_count, check_each_in, check_interval
from ._runner import ExperimentConfig, RunContext, cache_dir

__all__ = ["Config", "TASKS", "TERMS", "compute"]

#: The units' tasks.
TASKS = ("binary", "multiclass", "binary_empirical")
#: The terms of the explicit bounds (Theorem 5.1's, shared by 5.2 and 5.3), in the order of the paper's proof.
TERMS = bounds.BOUND_TERMS


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """Sizes of the study; ``quick()`` for the book on 2 CPU cores, ``medium()`` the full data on them
    (recorded), ``full()`` more subsets per size."""

    profile: str = "quick"
    binary_sizes: tuple[int, ...] = (250, 500, 1_000)
    multiclass_sizes: tuple[int, ...] = (250, 500, 1_000)
    empirical_n: int = 500
    n_test: int = 500
    width: int = 1_000
    grid_max_n: int = 12_000
    one_subset_above: int = 20_000
    lams: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    p: float = 0.2
    rate: float = 0.2
    delta: float = 0.05
    memory_budget: int = 2 * 1024**3
    seeds: tuple[int, ...] = (0, 1, 2)
    device: str = "cpu"

    @classmethod
    def quick(cls) -> "Config":
        """n = 250, 500 and 1,000 for both tasks (three subsets each), the empirical NTK at width 1,000 on 500
        images, 500 test images."""
        return cls()

    @classmethod
    def medium(cls) -> "Config":
        """Up to the full data: every "5" and "8" (11,272) and every training image (60,000; its K would be
        28.8 GB in float64), the whole test split, the λ grid up to n = 12,000, the empirical NTK at width
        10,000 on all 11,272; one subset at n = 32,000 (each of its factorisations ≈ 10 minutes on 2 cores)."""
        return cls(
            profile="medium",
            binary_sizes=(1_000, 2_000, 4_000, 8_000, 11_272),
            multiclass_sizes=(1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000),
            empirical_n=11_272,
            width=10_000,
            n_test=0,
            seeds=(0, 1, 2),
        )

    @classmethod
    def full(cls) -> "Config":
        """The medium sizes with five subsets per size below the full data and the λ grid at every n."""
        return dataclasses.replace(
            cls.medium(), profile="full", grid_max_n=60_000, one_subset_above=60_000, seeds=(0, 1, 2, 3, 4)
        )

    counts = {"width": 1, "n_test": 0, "grid_max_n": 1, "one_subset_above": 1, "memory_budget": 1}

    def _check(self) -> None:
        for name in ("binary_sizes", "multiclass_sizes"):
            sizes = getattr(self, name)
            if not isinstance(sizes, tuple) or not sizes:
                raise ValueError(f"{name} must be a non-empty tuple of sizes >= 2, got {sizes!r}")
            for n in sizes:
                check_count(n, name, 2)
        check_count(self.empirical_n, "empirical_n (0: no empirical-NTK unit)", 0)
        check_each_in(self.lams, "λ (lams)", 0.0, math.inf)
        if any(lam <= 0 for lam in self.lams):
            raise ValueError(f"every λ of lams must be > 0 (λ = 0 is always computed), got {self.lams}")
        check_interval(self.p, "p", 0.0, 0.5, high_open=True)
        check_interval(self.rate, "rate", 0.0, 1.0, high_open=True)
        check_interval(self.delta, "delta", 0.0, 1.0, low_open=True, high_open=True)


def _kernel(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """Setting 1's kernel of a tile (a diagonal tile, ``x2 is x1``, has its diagonal exactly 1/2)."""
    return setting1_kernel(x1, x2)


def _subset(available: int, n: int, seed: int) -> np.ndarray:
    """``n`` of ``available`` indices drawn with ``seed``, in increasing order (all of them when n = available)."""
    if n >= available:
        return np.arange(available)
    return np.sort(np.random.default_rng(seed).choice(available, size=n, replace=False))


def _units(config: Config, available: dict[str, int]) -> list[tuple[str, int, int]]:
    """(task, n, seed) of every unit: sizes capped by the data; one subset (the first seed) at the full size and
    above ``one_subset_above``."""
    sizes = {
        "binary": config.binary_sizes,
        "multiclass": config.multiclass_sizes,
        "binary_empirical": (config.empirical_n,) if config.empirical_n else (),
    }
    units = []
    for task in TASKS:
        base = "binary" if task == "binary_empirical" else task
        for n in sorted({min(n, available[base]) for n in sizes[task]}):
            for seed in config.seeds if n <= min(config.one_subset_above, available[base] - 1) else config.seeds[:1]:
                units.append((task, n, seed))
    return units


def _conditioning(FK: FactoredKernel, Y: np.ndarray) -> dict[str, float]:
    L0 = FK.factor(0.0)
    _, error = FK.checked_quadratic(Y, 0.0)
    min_pivot = L0.min_pivot
    rayleigh = L0.ones_rayleigh()
    return {
        "comp_error": float(np.max(error)),
        "min_pivot": min_pivot,
        "mu_max_lower": rayleigh,
        "kappa_lower": rayleigh / min_pivot,
    }


def _terms(bound: bounds.AdditiveNoiseBound, scale: float) -> dict[str, float]:
    return {t: scale * getattr(bound, t) for t in TERMS}


def _test_error(
    K: KernelMatrix, K_test: np.ndarray | None, Y_noisy: np.ndarray, lam: float, clean: np.ndarray, ridge: str
) -> float:
    """Clean test error of KRR on the noisy labels (eq. (8), one column per output as eq. (9)): sign or argmax of
    ``k(X_test, X)(K + λ²I)⁻¹Ỹ`` against the clean test labels; NaN where K + λ²I was not factored."""
    if K_test is None or ridge != "exact":
        return math.nan
    f = K_test @ K.ridge_solve(Y_noisy, lam)
    predicted = np.sign(f) if f.ndim == 1 else np.argmax(f, axis=1)
    return float(np.mean(predicted != clean))


def _binary_rows(config: Config, FK: FactoredKernel, y: np.ndarray, n: int, test: tuple, seed: int) -> list[dict]:
    K_test, y_test = test
    y_noisy = noise.flip_binary(y, config.p, seed=seed)
    trace = FK.trace()
    comp = float(bounds.complexity(FK, y))
    sigma_eff = bounds.binary_noise_subgaussian_sigma(config.p) / (1 - 2 * config.p)
    lam_star = bounds.leading_lambda(comp, n, trace, sigma_eff)
    lead = bounds.leading_minimum(comp, n, trace, sigma_eff)
    rows = []
    for lam, kind, ridge in _lambdas(config, n, lam_star):
        b = bounds.theorem_5_2_bound(FK, y, lam, config.p, config.delta, ridge=ridge)
        rows.append(
            {
                "noise": f"flip {config.p:g}",
                "lam": lam,
                "lam_kind": kind,
                "ridge_exact": ridge == "exact",
                "trace": trace,
                "complexity": comp,
                "ridge": float(bounds.ridge_complexity(FK, y, lam)) if ridge == "exact" else comp,
                **_terms(b.additive, b.rescale),
                "total": b.total,
                "leading_min": lead,
                "test_error": _test_error(FK, K_test, y_noisy, lam, y_test, ridge),
            }
        )
    return rows


def _on_grid(config: Config, n: int) -> bool:
    """Whether a unit of size ``n`` factors K + λ²I at every λ of the grid (``n ≤ grid_max_n``) or brackets the
    bound with the factor at λ = 0 alone: the two run different code, so the flag is part of the unit's key."""
    return n <= config.grid_max_n


def _lambdas(config: Config, n: int, lam_star: float) -> list[tuple[float, str, str]]:
    """(λ, kind, ridge) of a unit's rows: the grid and λ* with exact ridge terms up to ``grid_max_n``; beyond it
    λ* alone, its ridge term bounded by the complexity (``ridge="complexity"`` of the bounds: one factorisation,
    at λ = 0, for the whole unit)."""
    if _on_grid(config, n):
        return [(lam, "grid", "exact") for lam in config.lams] + [(lam_star, "leading", "exact")]
    return [(lam_star, "leading", "complexity")]


def _noise_models(config: Config, labels: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, P, Qᵀ) of the two noise models of Theorem 5.3: symmetric and pair-flip P of rate ``config.rate``,
    and the (n, 10) clean labels q⁽ʰ⁾ of each output (:func:`ntk_core.bounds.q_matrix`, transposed)."""
    return [
        (name, P, np.ascontiguousarray(bounds.q_matrix(P, labels).T))
        for name, P in (
            (f"symmetric {config.rate:g}", noise.symmetric_transition(10, config.rate)),
            (f"pair-flip {config.rate:g}", noise.pairflip_transition(10, config.rate)),
        )
    ]


def _multiclass_rows(
    config: Config, FK: FactoredKernel, labels: np.ndarray, models: list, n: int, test, seed: int
) -> list[dict]:
    """The rows of a ten-class unit: one per noise model of ``models`` (:func:`_noise_models`) and λ, in that
    order. They are computed λ by λ, every noise model's at each λ together, so that each factor of K + λ²I is
    made and used once (where the factors are kept in memory only, coming back to a λ would compute its
    factor again); each row comes from the same computations in either order."""
    K_test, labels_test = test
    trace = FK.trace()
    plans = []
    for name, P, QT in models:
        comps = np.atleast_1d(bounds.complexity(FK, QT))
        sigmas = bounds.multiclass_noise_subgaussian_sigma(P)
        lam_star = bounds.leading_lambda(comps, n, trace, sigmas)
        plans.append(
            {
                "noise": name,
                "P": P,
                "QT": QT,
                "comps": comps,
                "noisy": np.eye(10)[noise.corrupt(labels, P, seed=seed)],
                "lead": bounds.leading_minimum(comps, n, trace, sigmas) / bounds.gap(P),
                "lambdas": _lambdas(config, n, lam_star),
            }
        )
    order = [lam for plan in plans for lam, _, _ in plan["lambdas"]]
    cells: dict[tuple[int, float, str], dict] = {}
    for lam in sorted(set(order), key=order.index):
        for m, plan in enumerate(plans):
            for at, kind, ridge in plan["lambdas"]:
                if at != lam:
                    continue
                b = bounds.theorem_5_3_bound(FK, labels, plan["P"], lam, config.delta, ridge=ridge)
                ridges = plan["comps"] if ridge == "complexity" else np.atleast_1d(FK.ridge_quadratic(plan["QT"], lam))
                cells[(m, lam, kind)] = {
                    "noise": plan["noise"],
                    "lam": lam,
                    "lam_kind": kind,
                    "ridge_exact": ridge == "exact",
                    "trace": trace,
                    "complexity": float(np.sum(plan["comps"])),
                    "ridge": float(np.sum(ridges)),
                    **{t: sum(getattr(o, t) for o in b.per_output) / b.gap for t in TERMS},
                    "total": b.total,
                    "leading_min": plan["lead"],
                    "test_error": _test_error(FK, K_test, plan["noisy"], lam, labels_test, ridge),
                }
    return [cells[(m, lam, kind)] for m, plan in enumerate(plans) for lam, kind, _ in plan["lambdas"]]


def _empirical(
    config: Config, x: np.ndarray, x_test: np.ndarray | None, seed: int
) -> tuple[KernelSource, np.ndarray | None]:
    """The empirical NTK of Setting 1's network (first layer trained) at ``config.width``, in memory (float64:
    K is factored at λ = 0), and its test-by-train block (if ``x_test`` is given)."""
    import torch

    from ..nets import TwoLayerNet
    from ..ntk import empirical_ntk

    net = TwoLayerNet(x.shape[1], config.width, seed=seed).double()
    xt = torch.as_tensor(x, dtype=torch.float64)
    K = empirical_ntk(net, xt).numpy()
    K_test = None if x_test is None else empirical_ntk(net, torch.as_tensor(x_test, dtype=torch.float64), xt).numpy()
    return KernelSource.from_matrix(symmetrise_in_place(K), name=f"empirical NTK, width {config.width}"), K_test


def _unit(config: Config, task: str, x: np.ndarray, labels: np.ndarray, seed: int, test, folder) -> list[dict]:
    """The rows of one (task, n, seed): ``test`` holds the test inputs and their clean labels."""
    n = len(labels)
    x_test, labels_test = test
    factored = _on_grid(config, n)  # K + λ²I factored at λ > 0: KRR's test error can be measured
    K_test: np.ndarray | None
    if task == "binary_empirical":
        source, K_test = _empirical(config, x, x_test if factored else None, seed)
    else:
        source = KernelSource.from_function(_kernel, x, name="setting1_kernel")
        K_test = _kernel(x_test, x) if factored else None
    FK = FactoredKernel(source, folder, memory_budget=config.memory_budget)
    if task == "multiclass":
        Y = np.eye(10)[labels]
        models = _noise_models(config, labels)
        FK.forwards([*(QT for _, _, QT in models), Y], 0.0)  # every label matrix at λ = 0 in one pass
    else:
        Y = np.where(labels == 5, 1.0, -1.0)
        FK.forwards([Y], 0.0)
    conditioning = _conditioning(FK, Y)  # first: the factor at λ = 0 is then done with but for yᵀK⁻¹y
    if task == "multiclass":
        rows = _multiclass_rows(config, FK, labels, models, n, (K_test, labels_test), seed)
    else:
        rows = _binary_rows(config, FK, Y, n, (K_test, np.where(labels_test == 5, 1.0, -1.0)), seed)
    shutil.rmtree(folder, ignore_errors=True)  # kept until the unit is done: a killed unit resumes its factors
    return [{**row, **conditioning} for row in rows]


def _grid_cut(config: Config) -> Config:
    """``config`` with its λ grid cut to the first λ (:data:`REPLAY_ROWS`)."""
    return dataclasses.replace(config, lams=config.lams[:1])


#: What a cheaper replay of a unit computes and compares (``experiments._record.RowCut``): its rows at the leading
#: λ*, with the grid cut to one λ, so that K + λ²I is factored at λ = 0, that λ and λ* instead of at every λ of the
#: grid. λ* and the leading terms' minimum do not depend on the grid: those rows are the recorded ones.
REPLAY_ROWS = {"column": "lam_kind", "keep": ("leading",), "cut": _grid_cut, "what": "the λ grid cut to its first λ"}


def compute(config: Config, ctx: RunContext) -> pd.DataFrame:
    """One row per (task, n, subset seed, noise model, λ): the bound's terms (see the module docstring)."""
    mnist, mnist_test = data.load_mnist("train"), data.load_mnist("test")
    ctx.add_dataset(mnist)
    ctx.add_dataset(mnist_test)
    features = data.sphere_features(mnist.images)
    is_5_or_8 = np.flatnonzero(np.isin(mnist.labels, (5, 8)))
    available = {"binary": len(is_5_or_8), "multiclass": len(mnist.labels)}
    test_pools = {
        "binary": np.flatnonzero(np.isin(mnist_test.labels, (5, 8))),
        "multiclass": np.arange(len(mnist_test.labels)),
    }
    tests = {}
    for base, pool in test_pools.items():  # the first n_test of each test pool (0: all of it)
        idx = pool[: config.n_test or len(pool)]
        tests[base] = (data.sphere_features(mnist_test.images[idx]), mnist_test.labels[idx].astype(np.int64))
    rows = []
    for task, n, seed in _units(config, available):
        base = "binary" if task.startswith("binary") else "multiclass"
        pool = is_5_or_8 if base == "binary" else np.arange(len(mnist.labels))
        idx = pool[_subset(len(pool), n, seed)]
        key = {"task": task, "n": n, "seed": seed, "grid": _on_grid(config, n)}
        folder = cache_dir() / "factors" / f"bound_scale-{task}-{n}-{seed}"
        train = (features[idx], mnist.labels[idx].astype(np.int64))
        unit = ctx.unit(key, functools.partial(_unit, config, task, *train, seed, tests[base], folder))
        rows += [{"task": task, "n": n, "seed": seed, **r} for r in unit]
    return pd.DataFrame(rows)
