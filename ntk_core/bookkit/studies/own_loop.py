r"""RDI and AUX in a training loop of one's own, on a task the paper does not run (book kit).

The book's chapter "RDI and AUX in your own training loop" runs this study: MNIST, all ten digits, with
pair-flip noise (:func:`~ntk_core.noise.pairflip_transition`: class :math:`c` becomes :math:`c+1 \bmod 10` with
probability ``noise``), a plain ``torch.nn`` MLP with PyTorch's default initialisation, and the loop a PyTorch
user writes (:func:`own_loop`: Adam, a cosine schedule, a ``DataLoader``, the mean cross-entropy), carrying RDI
or AUX through :mod:`ntk_core.regularizers`.

Every method gets its hyper-parameter by the same protocol, on a validation split carved from the *noisy*
training labels (what a user has): vanilla training is reported at its last epoch; early stopping at the epoch
of lowest noisy-validation error; RDI and AUX at the λ of their grid with the lowest noisy-validation error at
the last epoch. Beside it, the same selection on the clean labels of the same validation images (an oracle a
user does not have), and RDI at the λ the bound suggests before any validation
(:func:`~ntk_core.bounds.leading_lambda` on the network's empirical NTK at initialisation and the noisy labels).
The test error is always on clean test labels.
"""

from __future__ import annotations

import contextlib
import functools
import math
import multiprocessing
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ..._checks import check_choice, check_count, check_interval, check_positive
from ...bounds import complexity, leading_lambda, multiclass_noise_subgaussian_sigma
from ...data import load_mnist, mnist_features, sample_classes
from ...noise import corrupt, pairflip_transition, symmetric_transition
from ...ntk import empirical_ntk, output_sensitivity
from ...regularizers import AuxiliaryVariables, RDIPenalty, with_indices

__all__ = [
    "OwnLoopConfig",
    "OwnLoopStudy",
    "own_loop",
    "own_loop_study",
    "select_by_validation",
    "gain_over_vanilla",
    "summary_table",
    "bound_lambda",
    "initial_sensitivity",
]

CLASSES = 10


@dataclass(frozen=True)
class OwnLoopConfig:
    """Sizes and hyper-parameters of the study (the defaults are the book's, which runs its 30 runs — seed,
    method, λ — in two worker processes). 50 epochs are what the premise needs: with fewer, vanilla training no
    longer reproduces 90 % of the flipped labels, and the chapter's premise check fails. Timings and trials:
    ``benchmarks/README.md``.

    Attributes
    ----------
    per_class : int
        Training images of each digit (noisy labels); ``val_fraction`` of them are held out for validation.
    val_fraction : float
        The share of the noisy training set held out as the validation split.
    n_test : int
        Clean test images (from the official test split).
    noise : float
        The noise rate r: the share of labels changed (symmetric: to one of the other classes uniformly;
        pair-flip: to the next class), r in [0, 1/2) for pair-flip and in [0, 1 − 1/10) for symmetric noise.
    noise_kind : str
        ``"symmetric"`` or ``"pairflip"``: the transition matrix (:func:`~ntk_core.noise.symmetric_transition`,
        :func:`~ntk_core.noise.pairflip_transition`).
    pool : int
        Average-pooling of the images (2: 14×14, d = 196).
    width : int
        Hidden units of the MLP.
    epochs : int
        Epochs of Adam's loop (the cosine schedule runs over all of them).
    batch_size : int
        Mini-batch size.
    lr : float
        Initial learning rate.
    rdi_lams : tuple of float
        The λ grid of RDI (the selection asserts that it brackets the best λ).
    aux_lams : tuple of float
        The λ grid of AUX (likewise).
    seeds : tuple of int
        One seed per repetition: it draws the images, the noise, the split, the initialisation and the batches.
    """

    per_class: int = 250
    val_fraction: float = 0.2
    n_test: int = 2000
    noise: float = 0.4
    noise_kind: str = "symmetric"
    pool: int = 2
    width: int = 512
    epochs: int = 50
    batch_size: int = 64
    lr: float = 2e-3
    rdi_lams: tuple[float, ...] = (1.0, 4.0, 16.0, 64.0)
    aux_lams: tuple[float, ...] = (16.0, 64.0, 256.0, 1024.0)
    seeds: tuple[int, ...] = (0, 1, 2)

    def __post_init__(self) -> None:
        for name in ("per_class", "n_test", "pool", "width", "epochs", "batch_size"):
            check_count(getattr(self, name), name)
        check_interval(self.val_fraction, "val_fraction", 0.0, 1.0, low_open=True, high_open=True)
        check_choice(self.noise_kind, "noise_kind", ("symmetric", "pairflip"))
        top = 0.5 if self.noise_kind == "pairflip" else 1 - 1 / CLASSES
        check_interval(self.noise, f"noise (for {self.noise_kind} noise)", 0.0, top, high_open=True)
        check_positive(self.lr, "lr")
        for name in ("rdi_lams", "aux_lams"):
            lams = getattr(self, name)
            if len(lams) < 3 or any(not (lam > 0) for lam in lams) or list(lams) != sorted(set(lams)):
                raise ValueError(f"{name} must be at least 3 increasing λ > 0 (to bracket an optimum), got {lams!r}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {self.seeds!r}")


def make_model(d: int, width: int, seed: int) -> nn.Module:
    """The user's model: ``Linear(d, width) → ReLU → Linear(width, 10)``, PyTorch's default initialisation."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, width), nn.ReLU(), nn.Linear(width, CLASSES))


def own_loop(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    rdi_lam: float | None = None,
    aux_lam: float | None = None,
    on_epoch_end: Callable[[int], None] | None = None,
) -> None:
    """A PyTorch user's loop (Adam, cosine schedule, ``DataLoader``, mean cross-entropy), with RDI or AUX.

    RDI adds :math:`\\tfrac{\\lambda^2}{2n}\\lVert\\theta-\\theta(0)\\rVert^2` to the mean loss (eq. (3) divided by
    n); AUX trains on :math:`f(\\theta, x_i) + \\lambda b_i` (eq. (4)). ``on_epoch_end(epoch)`` is called after each
    epoch (the study evaluates there).
    """
    rdi = RDIPenalty(model, lam=rdi_lam, n=len(x)) if rdi_lam is not None else None
    aux = AuxiliaryVariables(len(x), outputs=CLASSES, lam=aux_lam) if aux_lam is not None else None
    params = [*model.parameters(), *(aux.parameters() if aux is not None else [])]
    optimizer = torch.optim.Adam(params, lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    batches = DataLoader(
        with_indices(TensorDataset(x, y)),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    for epoch in range(1, epochs + 1):
        model.train()
        for i, xb, yb in batches:
            optimizer.zero_grad()
            out = model(xb)
            loss = nn.functional.cross_entropy(aux(out, i) if aux is not None else out, yb)
            if rdi is not None:
                loss = loss + rdi()
            loss.backward()
            optimizer.step()
        schedule.step()
        if on_epoch_end is not None:
            on_epoch_end(epoch)


@dataclass
class _Split:
    x: torch.Tensor
    clean: torch.Tensor
    noisy: torch.Tensor


def transition(config: OwnLoopConfig) -> np.ndarray:
    """The study's transition matrix P (``P[c', c]`` = Pr[noisy c' | clean c])."""
    make = pairflip_transition if config.noise_kind == "pairflip" else symmetric_transition
    return make(CLASSES, config.noise)


@functools.lru_cache(maxsize=2)  # every run of a seed trains on the same task (not changed by training)
def _task(config: OwnLoopConfig, seed: int) -> tuple[_Split, _Split, _Split]:
    """Noisy training and validation splits (the noise of ``config``), and a clean test split, for one seed."""
    train = load_mnist("train")
    test = load_mnist("test")
    picked = sample_classes(train.labels, range(CLASSES), config.per_class, seed)
    x = torch.from_numpy(mnist_features(train.images[picked], pool=config.pool))
    clean = torch.from_numpy(train.labels[picked]).long()
    P = transition(config)
    noisy = torch.from_numpy(np.asarray(corrupt(clean.numpy(), P, seed))).long()
    n_val = int(round(config.val_fraction * len(x)))
    fit, val = slice(n_val, None), slice(0, n_val)  # sample_classes shuffles: the first n_val are a random split
    rng = np.random.default_rng(seed)
    test_idx = rng.choice(len(test.labels), size=min(config.n_test, len(test.labels)), replace=False)
    xt = torch.from_numpy(mnist_features(test.images[test_idx], pool=config.pool))
    yt = torch.from_numpy(test.labels[test_idx]).long()
    return (
        _Split(x[fit], clean[fit], noisy[fit]),
        _Split(x[val], clean[val], noisy[val]),
        _Split(xt, yt, yt),
    )


@torch.no_grad()
def _error(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    return float((model(x).argmax(dim=1) != y).float().mean())


def bound_lambda(model: nn.Module, x: torch.Tensor, noisy: torch.Tensor, P: np.ndarray) -> float:
    r"""The λ of the bound's leading terms (:func:`~ntk_core.bounds.leading_lambda`, Theorem 5.3's form) for the
    network at initialisation, from what a user has: its empirical NTK per output (the trace kernel over the
    outputs divided by their number), :math:`C_h = \tilde y_h^\top K^{-1}\tilde y_h` of the *noisy* one-hot labels,
    and :math:`\sigma_h` of the transition matrix ``P``."""
    K = empirical_ntk(model, x, dtype=torch.float64).numpy() / CLASSES
    onehot = np.eye(CLASSES)[noisy.numpy()]
    C = np.array([complexity(K, onehot[:, h]) for h in range(CLASSES)])
    sigma = multiclass_noise_subgaussian_sigma(P)
    return leading_lambda(C, len(x), float(np.trace(K)), sigma)


def initial_sensitivity(config: OwnLoopConfig, seed: int, examples: int = 200) -> float:
    """:func:`~ntk_core.ntk.problem.output_sensitivity` (mean ‖∇θ f_c‖₁, the scale AUX's λ follows under Adam) of the
    seed's model at initialisation, on its first ``examples`` training inputs."""
    fit, _, _ = _task(config, seed)
    return output_sensitivity(make_model(fit.x.shape[1], config.width, seed), fit.x[:examples])


@dataclass
class OwnLoopStudy:
    """What :func:`own_loop_study` measured.

    Attributes
    ----------
    history : pandas.DataFrame
        One row per seed, run (``method``: ``vanilla``, ``rdi``, ``aux``, or ``rdi_bound`` at the bound's λ;
        ``lam``) and epoch: ``train_error_noisy`` (the network alone against
        the noisy training labels), ``memorised`` (the share of the flipped training labels it predicts),
        ``val_error_noisy``, ``val_error_clean`` (the same validation images, noisy and clean labels) and
        ``test_error`` (clean).
    bound_lams : dict
        The bound's λ of each seed (:func:`bound_lambda`).
    config : OwnLoopConfig
        The configuration.
    n_test : int
        The clean test images each seed is tested on (``config.n_test``, or the whole test split where it has
        fewer: the embedded subset's 1,000).
    """

    history: pd.DataFrame
    bound_lams: dict[int, float]
    config: OwnLoopConfig
    n_test: int


def _runs(config: OwnLoopConfig) -> list[tuple[str, float | None]]:
    """The study's runs on each seed, in order: (method, λ); the bound's λ (``rdi_bound``) is found per seed."""
    runs: list[tuple[str, float | None]] = [("vanilla", None)]
    runs += [("rdi", lam) for lam in config.rdi_lams] + [("rdi_bound", None)]
    return runs + [("aux", lam) for lam in config.aux_lams]


def _run(config: OwnLoopConfig, seed: int, method: str, lam: float | None) -> tuple[list[dict[str, Any]], float | None]:
    """One method of the study on one seed: its per-epoch rows, and for ``rdi_bound`` the bound's λ it used."""
    rows: list[dict[str, Any]] = []
    train, val, test = _task(config, seed)
    flipped = train.noisy != train.clean
    if method == "rdi_bound":
        lam = bound_lambda(make_model(train.x.shape[1], config.width, seed), train.x, train.noisy, transition(config))
    model = make_model(train.x.shape[1], config.width, seed)

    def evaluate(epoch: int) -> None:
        model.eval()
        with torch.no_grad():
            pred = model(train.x).argmax(dim=1)
        rows.append(
            {
                "seed": seed,
                "method": method,
                "lam": math.nan if lam is None else float(lam),
                "epoch": epoch,
                "train_error_noisy": float((pred != train.noisy).float().mean()),
                "memorised": float((pred[flipped] == train.noisy[flipped]).float().mean()),
                "val_error_noisy": _error(model, val.x, val.noisy),
                "val_error_clean": _error(model, val.x, val.clean),
                "test_error": _error(model, test.x, test.clean),
            }
        )

    own_loop(
        model,
        train.x,
        train.noisy,
        epochs=config.epochs,
        batch_size=config.batch_size,
        lr=config.lr,
        seed=seed,
        rdi_lam=lam if method in ("rdi", "rdi_bound") else None,
        aux_lam=lam if method == "aux" else None,
        on_epoch_end=evaluate,
    )
    return rows, lam if method == "rdi_bound" else None


def _run_one_thread(args: tuple[OwnLoopConfig, int, str, float | None]) -> tuple[list[dict[str, Any]], float | None]:
    torch.set_num_threads(1)  # a worker process: one thread, as the book's processes (no oversubscription)
    return _run(*args)


def own_loop_study(
    config: OwnLoopConfig | None = None, progress: Callable[[str], None] | None = None, workers: int = 1
) -> OwnLoopStudy:
    """Run every method of the study on every seed (module docstring); returns the per-epoch history.

    ``workers > 1`` runs the (seed, method, λ) runs in that many forked processes of one torch thread each (the
    runs are independent and each is seeded, so the history is the same as with one worker at one thread; runs,
    not seeds, so that the processes stay busy to the end). ``progress`` is called with a line per finished seed.
    """
    config = config or OwnLoopConfig()
    check_count(workers, "workers")
    jobs = [(config, seed, method, lam) for seed in config.seeds for method, lam in _runs(config)]
    parallel = workers > 1 and len(jobs) > 1
    pool = multiprocessing.get_context("fork").Pool(min(workers, len(jobs))) if parallel else None
    rows: list[dict[str, Any]] = []
    bound_lams: dict[int, float] = {}
    with pool or contextlib.nullcontext():
        done = pool.imap(_run_one_thread, jobs) if pool else (_run(*job) for job in jobs)
        per_seed = len(_runs(config))
        for i, ((_, seed, _, _), (run_rows, bound_lam)) in enumerate(zip(jobs, done), 1):
            rows += run_rows
            if bound_lam is not None:
                bound_lams[seed] = bound_lam
            if progress is not None and i % per_seed == 0:
                progress(f"seed {seed}: done")
    n_test = len(_task(config, config.seeds[0])[2].clean)
    return OwnLoopStudy(pd.DataFrame(rows), bound_lams, config, n_test)


def select_by_validation(study: OwnLoopStudy, labels: str = "noisy") -> pd.DataFrame:
    """Each method's result per seed, its hyper-parameter chosen on the validation split's ``labels``.

    ``labels="noisy"`` is the protocol a user can follow; ``"clean"`` the oracle. Returns one row per seed and
    method (``vanilla``: last epoch; ``early stopping``: epoch of lowest validation error, the earliest of ties;
    ``RDI``/``AUX``: the grid's λ of lowest validation error at the last epoch, the smallest of ties;
    ``RDI (bound's λ)``: last epoch, no selection) with ``lam``, ``epoch``, ``test_error`` and ``grid_edge``
    (the λ chosen is the smallest or the largest of the grid).
    """
    if labels not in ("noisy", "clean"):
        raise ValueError(f"labels must be 'noisy' or 'clean', got {labels!r}")
    val = f"val_error_{labels}"
    h = study.history
    last = h[h["epoch"] == study.config.epochs]
    out = []
    for seed, runs in h.groupby("seed"):
        van = runs[runs["method"] == "vanilla"]
        end = last[(last["seed"] == seed)]
        best_epoch = van.loc[van[val].idxmin()]  # idxmin: the first (earliest) of ties
        out.append(_row(seed, "vanilla", end[end["method"] == "vanilla"].iloc[0], False))
        out.append(_row(seed, "early stopping", best_epoch, False))
        for method, grid in (("rdi", study.config.rdi_lams), ("aux", study.config.aux_lams)):
            cands = end[end["method"] == method].sort_values("lam")
            pick = cands.loc[cands[val].idxmin()]
            out.append(_row(seed, method.upper(), pick, pick["lam"] in (grid[0], grid[-1])))
        bound = end[end["method"] == "rdi_bound"]
        out.append(_row(seed, "RDI (bound's λ)", bound.iloc[0], False))
    return pd.DataFrame(out)


def gain_over_vanilla(picks: pd.DataFrame, method: str, n_test: int) -> dict[str, Any]:
    """Vanilla's test error minus ``method``'s, paired by seed (:func:`select_by_validation`'s rows), as
    :func:`~ntk_core.experiments._shared.paired_stats`; positive: the method is better. Each seed tests on
    ``n_test`` images drawn from one test split (all of it where it has no more, as the embedded subset's 1,000):
    ``test_se`` is the sampling error of the difference on them
    (:func:`~ntk_core.bookkit.sampling.paired_error_se` of the mean errors), which the seeds do not average away
    where they share the images, and which :func:`~ntk_core.bookkit.claims.judge` counts."""
    from ...experiments import paired_stats
    from ..sampling import paired_error_se

    base = picks[picks["method"] == "vanilla"].set_index("seed")["test_error"]
    other = picks[picks["method"] == method].set_index("seed")["test_error"]
    test_se = paired_error_se(float(base.mean()), float(other.mean()), n_test)
    return {**paired_stats((base - other.reindex(base.index)).to_numpy()), "test_se": test_se, "n_test": int(n_test)}


def summary_table(picks: pd.DataFrame) -> pd.DataFrame:
    """One row per method of :func:`select_by_validation`'s rows: the λ and epoch of each seed, and the test error
    in % as mean ± standard deviation over the seeds."""
    rows = []
    for method, g in picks.groupby("method", sort=False):
        lams = g["lam"].dropna()
        rows.append(
            {
                "method": method,
                "λ per seed": ", ".join(f"{v:.3g}" for v in lams) if len(lams) else "",
                "epoch per seed": ", ".join(str(e) for e in g["epoch"]),
                "test error (%)": f"{100 * g['test_error'].mean():.1f} ± {100 * g['test_error'].std(ddof=1):.1f}",
            }
        )
    return pd.DataFrame(rows)


def _row(seed: Any, method: str, r: pd.Series, edge: bool) -> dict[str, Any]:
    return {
        "seed": int(seed),
        "method": method,
        "lam": float(r["lam"]),
        "epoch": int(r["epoch"]),
        "test_error": float(r["test_error"]),
        "grid_edge": bool(edge),
    }


def config_dict(config: OwnLoopConfig) -> dict[str, Any]:
    """The configuration as a plain dict (for the chapter's printout)."""
    return asdict(config)
