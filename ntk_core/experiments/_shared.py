"""What the experiments share besides the runner: the config base with its checks, data splits, training on a
split, measurements taken along a run (:class:`EpochProbe`, :func:`regime_measures`), the selection protocol
(:func:`mark_selected`) and the paired statistics their tables are summarised by.

**The selection protocol** (the same for every method of every experiment): a hyper-parameter (the
early-stopping step, RDI's and AUX's λ) is chosen on a validation split held out of the training data whose
labels carry the *same noise* as the training labels, which is what a user has (``selected``); the same
choice on the clean validation labels (``selected_oracle``) is reported beside it as the oracle the paper may
have used. Ties of the (coarse) validation error are broken by the validation mean squared error.

An experiment module defines ``Config``, a frozen dataclass derived from :class:`ExperimentConfig` (the fields
``profile``, ``seeds`` and ``device``, checked on construction by :func:`check_common` with the experiment's own
checks; ``quick()``, ``medium()`` and ``full()`` class methods), and ``compute(config, ctx)``, run by
:func:`ntk_core.experiments._runner.run_experiment`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd


from ._runner import RunContext

__all__ = [
    "Splits",
    "train_on",
    "load_features",
    "split_from",
    "make_split",
    "memorised_fraction",
    "check_one_row_per_seed",
    "paired_stats",
    "EpochProbe",
    "train_protocol",
    "validation_mse",
    "RegimeTracker",
    "mark_selected",
    "mark_protocol",
    "chosen",
    "protocol_means",
    "bracket",
    "regime_measures",
    "REGIME_COLUMNS",
]

#: the NTK-regime columns of every training run in an experiment's table (:func:`regime_measures` and the
#: linearisation's agreement), in the order they are shown
REGIME_COLUMNS = (
    "kernel_drift_quarter",
    "kernel_drift_half",
    "kernel_drift",
    "movement",
    "lin_agreement",
    "lin_test_error",
)


@dataclass
class Splits:
    """Train / validation / test tensors of one experiment run; ``y_*`` are clean labels (±1 or class indices).

    The validation split is cut from the training split and held out of training
    (it is what early stopping and the λ grid search look at).
    """

    x_train: Any
    y_train: Any
    x_val: Any
    y_val: Any
    x_test: Any
    y_test: Any

    def to(self, device: str) -> "Splits":
        """The same tensors on ``device``."""
        return Splits(*(t.to(device) for t in dataclasses.astuple(self)))


def train_on(model: Any, splits: Splits, y_noisy: Any, config: Any, *, progress: bool) -> Any:
    """:func:`ntk_core.train.train` on the training split with labels ``y_noisy``, tracking every split.

    The errors against the clean training labels (``splits.y_train``), on the validation split and on
    the test split are recorded at every evaluation.

    Parameters
    ----------
    model : torch.nn.Module
        The network, on the device of ``splits``.
    splits : Splits
        The data.
    y_noisy : torch.Tensor, shape (n_train,)
        The training labels it is trained on (corrupted or not).
    config : ntk_core.train.TrainConfig
        Method, loss, optimiser and schedule.
    progress : bool
        Show a progress bar.

    Returns
    -------
    ntk_core.train.TrainResult
        The trained model and its history.
    """
    from ..train import train

    return train(
        model,
        splits.x_train,
        y_noisy,
        config,
        y_clean=splits.y_train,
        val=(splits.x_val, splits.y_val),
        test=(splits.x_test, splits.y_test),
        progress=progress,
    )


def load_features(ctx: RunContext, train: Any, test: Any, features: Callable[[Any], Any]) -> tuple[Any, Any, Any, Any]:
    """Report where ``train`` and ``test`` came from, and give ``(x_train, y_train, x_test, y_test)``.

    ``x_*`` are ``features`` of the images; ``train`` and ``test`` are :class:`ntk_core.data.ImageDataset`
    or :class:`ntk_core.data.BinaryTask` objects (both unpack as ``x, y``).
    """
    ctx.add_dataset(train)
    ctx.add_dataset(test)
    (x_train, y_train), (x_test, y_test) = train, test
    return features(x_train), y_train, features(x_test), y_test


def split_from(
    ctx: RunContext,
    train: Any,
    test: Any,
    features: Callable[[Any], Any],
    *,
    n_train: int,
    n_val: int,
    n_test: int,
    seed: int,
    what: str,
) -> Splits:
    """:func:`make_split` on the :func:`load_features` of ``train`` and ``test``."""
    return make_split(
        *load_features(ctx, train, test, features),
        n_train=n_train,
        n_val=n_val,
        n_test=n_test,
        seed=seed,
        what=what,
    )


def make_split(
    x_train: Any, y_train: Any, x_test: Any, y_test: Any, *, n_train: int, n_val: int, n_test: int, seed: int, what: str
) -> Splits:
    """Shuffle with ``seed``, hold out ``n_val`` validation examples, keep ``n_train`` and ``n_test``.

    ``n_test = 0`` keeps the whole test split. Raises a ``ValueError`` that says
    how many examples exist when the data are too small for the sizes asked.
    """
    import numpy as np
    import torch

    if n_train + n_val > len(y_train):
        raise ValueError(
            f"{what}: n_train + n_val = {n_train + n_val} but the training split has only "
            f"{len(y_train)} examples; lower them or provide the full data set (NTK_CORE_DATA)"
        )
    if n_test > len(y_test):
        raise ValueError(f"{what}: n_test = {n_test} but the test split has only {len(y_test)} examples")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y_train))
    val_idx, train_idx = order[:n_val], order[n_val : n_val + n_train]
    test_idx = rng.permutation(len(y_test))[:n_test] if n_test else np.arange(len(y_test))

    def t(a: Any, idx: Any) -> Any:
        return torch.as_tensor(np.ascontiguousarray(a[idx]))

    return Splits(
        t(x_train, train_idx),
        t(y_train, train_idx),
        t(x_train, val_idx),
        t(y_train, val_idx),
        t(x_test, test_idx),
        t(y_test, test_idx),
    )


def memorised_fraction(train_error_noisy: float, train_error_clean: float, noise_rate: float) -> float:
    r"""The fraction of the *flipped* training labels that a classifier reproduces (predicts the wrong label).

    With ``F`` the flipped examples (``|F| = p n``) and ``m`` the fraction of ``F`` on which the classifier
    predicts the noisy label, the errors against the noisy and the clean labels differ only on ``F``:
    ``err_noisy − err_clean = p (1 − m) − p m``, so ``m = (1 − (err_noisy − err_clean) / p) / 2``.
    ``m = 1``: every flipped label is fitted (memorised); ``m`` equal to the error rate on clean examples:
    nothing of the noise was learnt. Both errors must be those of the same predictor (the network alone).
    """
    if not 0.0 < noise_rate < 0.5:
        raise ValueError(f"noise_rate must lie in (0, 1/2), got {noise_rate!r}")
    return float((1.0 - (train_error_noisy - train_error_clean) / noise_rate) / 2.0)


def check_one_row_per_seed(frame: pd.DataFrame, by: list[str], what: str) -> None:
    """Raise ``ValueError`` when two rows of ``frame`` share a seed within a group of the columns ``by``.

    Paired statistics count seeds: a seed listed twice (``--seeds 0 0 1``, or tables concatenated twice) would
    count its run twice and shrink the standard error of a single real seed towards zero.
    """
    dup = frame.duplicated(subset=["seed", *by], keep=False)
    if dup.any():
        seeds = sorted({int(v) for v in frame.loc[dup, "seed"]})
        raise ValueError(
            f"{what}: seed(s) {seeds} appear more than once per {', '.join(by) or 'table'}; paired statistics need "
            "each seed once (run the experiment with distinct seeds)"
        )


def paired_stats(differences: Any) -> dict[str, Any]:
    """Summary of per-seed paired differences ``d_s`` (same data, noisy labels and initialisation per seed).

    Returns ``differences`` (a list), their ``mean`` d̄, standard deviation ``std`` (ddof 1) and standard
    error ``sem`` = std / √S over the ``seeds`` S (both NaN for one seed). An effect counts as beyond the
    seed-to-seed spread when |d̄| > 2 sem.

    Examples
    --------
    >>> s = paired_stats([0.03, 0.05, 0.04])
    >>> round(s["mean"], 3), round(s["sem"], 4), s["seeds"]
    (0.04, 0.0058, 3)
    """
    diff = np.asarray(differences, dtype=float).ravel()
    if diff.size == 0 or not np.isfinite(diff).all():
        raise ValueError(f"paired differences must be finite and at least one, got {diff.tolist()!r}")
    std = float(np.std(diff, ddof=1)) if diff.size > 1 else math.nan
    return {
        "differences": diff.tolist(),
        "mean": float(diff.mean()),
        "std": std,
        "sem": std / math.sqrt(diff.size) if diff.size > 1 else math.nan,
        "seeds": int(diff.size),
    }


class EpochProbe:
    """An ``on_epoch_end`` callback for :func:`ntk_core.train.train` that measures the model at chosen epochs.

    ``measure(epoch)`` returns a dict of numbers; after training, :meth:`frame` holds one row per measured
    epoch (column ``epoch`` first). The callback only reads the model (under ``torch.no_grad`` where the
    measure needs it), so the training run is the same with or without it.
    """

    def __init__(self, measure: Callable[[int], dict[str, float]], epochs: Any) -> None:
        self.measure = measure
        self.epochs = frozenset(int(e) for e in epochs)
        self.rows: list[dict[str, float]] = []

    def __call__(self, epoch: int) -> None:
        if epoch in self.epochs:
            self.rows.append({"epoch": epoch, **self.measure(epoch)})

    def frame(self) -> pd.DataFrame:
        """The measurements so far, one row per measured epoch."""
        return pd.DataFrame(self.rows)


def mark_selected(table: pd.DataFrame, groups: list[str], order: list[str], flag: str) -> pd.DataFrame:
    """``table`` with a boolean column ``flag``: True on the row with the lowest ``order`` (compared in turn:
    the first column, ties broken by the next) within each group of ``groups``, the first such row on a tie.
    """
    table = table.copy()
    table[flag] = False
    for _, group in table.groupby(groups, sort=False):
        table.loc[group.sort_values(order, kind="stable").index[0], flag] = True
    return table


def regime_measures(model: Any, initial: Any, probe: Any) -> dict[str, float]:
    """How far a trained network has left the NTK regime (:mod:`ntk_core.regime`), on the inputs ``probe``.

    ``kernel_drift`` is ‖K(θ_T) − K(θ(0))‖_F / ‖K(θ(0))‖_F on the probe and ``movement`` the relative movement
    ‖θ_T − θ(0)‖ / ‖θ(0)‖ of all trained parameters; ``initial`` is the network at θ(0).
    """
    from ..regime import kernel_drift, parameter_movement

    start = {name: p.detach() for name, p in initial.named_parameters() if p.requires_grad}
    return {
        "kernel_drift": kernel_drift(model, initial, probe),
        "movement": parameter_movement(model, start)["all"],
    }


def _each(callbacks: tuple[Callable[[int], None], ...]) -> Callable[[int], None]:
    """One ``on_epoch_end`` callback for :func:`ntk_core.train.train` that calls each of ``callbacks`` in turn."""

    def call(epoch: int) -> None:
        for callback in callbacks:
            callback(epoch)

    return call


class RegimeTracker:
    """The NTK-regime columns (:data:`REGIME_COLUMNS`) of one training run, on a fixed probe set.

    Made before training (it keeps the network at θ(0)), passed to the trainer as an ``on_epoch_end`` callback
    (alone or through :func:`train_protocol`), it measures the kernel drift on ``probe`` after a quarter and
    after half of the ``epochs`` (steps, for full-batch GD); :meth:`columns` then adds the drift and the
    parameter movement at the end (:func:`regime_measures`) and, given the linearised network's test outputs,
    the agreement of the network's test predictions with them. It only reads the network, so the run is the
    same with or without it.

    Parameters
    ----------
    model : torch.nn.Module
        The network that will be trained, still at θ(0).
    probe : torch.Tensor
        The inputs on which the kernel drift is measured.
    epochs : int
        The number of epochs (or steps) of the run, at least 4.
    measured_as : callable, optional
        The fixed per-example function the kernel is measured on, made from the network at each measurement
        (a copy; the network is not changed): for a BatchNorm network,
        ``lambda m: with_batch_statistics(m, x_train, batch)`` (:func:`ntk_core.regime.with_batch_statistics`),
        so that the drift counts what training changed, the weights and the statistics they give. Default: the
        network itself.
    """

    def __init__(self, model: Any, probe: Any, epochs: int, *, measured_as: Callable[[Any], Any] | None = None):
        if epochs < 4:
            raise ValueError(
                f"the kernel drift is measured after a quarter of the run: it needs ≥ 4 epochs, got {epochs}"
            )
        self.model = model
        self.measured_as = measured_as
        self.initial = copy.deepcopy(model) if measured_as is None else measured_as(model)
        self.probe = probe
        self.at = {epochs // 4: "kernel_drift_quarter", epochs // 2: "kernel_drift_half"}
        self.along: dict[str, float] = {}

    def _measured(self) -> Any:
        return self.model if self.measured_as is None else self.measured_as(self.model)

    def __call__(self, epoch: int) -> None:
        from ..regime import kernel_drift

        if epoch in self.at:
            self.along[self.at[epoch]] = kernel_drift(self._measured(), self.initial, self.probe)

    def columns(self, x_test: Any = None, y_test: Any = None, lin_test: Any = None) -> dict[str, float]:
        """The regime columns of the trained network: ``kernel_drift`` (at the end, a quarter and half way) and
        ``movement``; with ``lin_test``, the linearised network's outputs on ``x_test``, also ``lin_agreement``
        (the fraction of ``x_test`` on which both predict the same label) and ``lin_test_error`` (the
        linearisation's error against ``y_test``)."""
        import torch

        from ..regime import agreement
        from ..train import classification_error, predict

        missing = sorted(set(self.at.values()) - set(self.along))
        if missing:
            raise RuntimeError(f"the run never reached the epochs of {missing}: was the tracker passed to the trainer?")
        out = {**regime_measures(self._measured(), self.initial, self.probe), **self.along}
        if lin_test is None:
            return out
        test_out = predict(self.model, x_test).reshape(-1).double().cpu().numpy()
        return {
            **out,
            "lin_agreement": agreement(test_out, lin_test),
            "lin_test_error": classification_error(torch.as_tensor(lin_test), y_test.cpu()),
        }


def validation_mse(outputs: Any, labels: Any) -> float:
    r"""The selection protocol's tie-break between equal validation errors: a mean squared error.

    One output (``outputs`` of shape (n,), labels ±1): :math:`\frac1n \sum_i (f_i - y_i)^2`, the squared loss of
    Settings 1 and 2. K outputs (shape (n, K), labels class indices): the Brier score
    :math:`\frac1n \sum_i \lVert \mathrm{softmax}(f_i) - e_{y_i} \rVert^2`, defined for the logits of a
    cross-entropy network and the outputs of a squared-loss one alike (lower is better for both).
    """
    import torch

    if outputs.dim() == 1:
        return float(((outputs - labels.to(outputs.dtype)) ** 2).mean())
    probs = torch.softmax(outputs.double(), dim=1)
    onehot = torch.nn.functional.one_hot(labels.long(), outputs.shape[1]).double()
    return float(((probs - onehot) ** 2).sum(dim=1).mean())


def train_protocol(
    model: Any,
    splits: Splits,
    y_noisy: Any,
    y_val_noisy: Any,
    config: Any,
    *,
    progress: bool,
    on_epoch_end: Callable[[int], None] | None = None,
) -> tuple[Any, pd.DataFrame]:
    """Train as :func:`train_on` does, with the validation labels of the selection protocol.

    The trainer's ``val_error`` is measured against ``y_val_noisy`` (validation labels as noisy as the training
    labels, what a user has); at every evaluated epoch an :class:`EpochProbe` adds ``val_error_clean`` (against
    the clean ``splits.y_val``), ``val_mse`` and ``val_mse_clean`` (the protocol's tie-break,
    :func:`validation_mse`). ``on_epoch_end`` (e.g. a :class:`RegimeTracker`) is called after the probe.

    Returns
    -------
    (ntk_core.train.TrainResult, pandas.DataFrame)
        The result and its history (one row per evaluated epoch) with the three columns added.
    """
    from ..train import classification_error, predict, train

    def measure(epoch: int) -> dict[str, float]:
        out = predict(model, splits.x_val)
        if out.dim() == 2 and out.shape[1] == 1:
            out = out.reshape(-1)
        return {
            "val_error_clean": classification_error(out, splits.y_val),
            "val_mse": validation_mse(out, y_val_noisy),
            "val_mse_clean": validation_mse(out, splits.y_val),
        }

    epochs, every = config.epochs, config.eval_every
    tracked = EpochProbe(measure, [e for e in range(1, epochs + 1) if e % every == 0 or e == epochs])
    callbacks = (tracked,) if on_epoch_end is None else (tracked, on_epoch_end)
    result = train(
        model,
        splits.x_train,
        y_noisy,
        config,
        y_clean=splits.y_train,
        val=(splits.x_val, y_val_noisy),
        test=(splits.x_test, splits.y_test),
        progress=progress,
        on_epoch_end=_each(callbacks),
    )
    return result, result.history.merge(tracked.frame(), on="epoch", validate="one_to_one")


#: the groups within which the protocol chooses a hyper-parameter: one choice per seed, noise level and method
PROTOCOL_GROUPS = ["seed", "noise", "method"]


def mark_protocol(table: pd.DataFrame, tuned: pd.Series) -> pd.DataFrame:
    """``table`` with the selection protocol's flags: on the rows ``tuned`` (a boolean mask: the runs of the
    methods whose λ is chosen), ``selected`` marks the λ of least ``val_error`` (noisy validation labels; ties
    broken by ``val_mse``) per (seed, noise, method), ``selected_oracle`` that of least ``val_error_clean`` (ties:
    ``val_mse_clean``); the other rows keep the flags they carry (a missing flag is False)."""
    picked = mark_selected(table[tuned], PROTOCOL_GROUPS, ["val_error", "val_mse"], "selected")
    picked = mark_selected(picked, PROTOCOL_GROUPS, ["val_error_clean", "val_mse_clean"], "selected_oracle")
    table = table.copy()
    for flag in ("selected", "selected_oracle"):
        table[flag] = table.get(flag, pd.Series(False, index=table.index)).astype("boolean").fillna(False).astype(bool)
        table.loc[tuned, flag] = picked[flag]
    return table


def chosen(table: pd.DataFrame, oracle: bool = False) -> pd.DataFrame:
    """The rows the selection protocol keeps (:func:`mark_protocol`): one per (seed, noise, method), chosen on the
    noisy validation labels (``oracle=False``, what a user has) or on the clean ones (the oracle)."""
    return table[table["selected_oracle" if oracle else "selected"]]


def protocol_means(table: pd.DataFrame) -> pd.DataFrame:
    """Mean test error over seeds per (noise, method) under both protocols: ``noisy`` (choices made on the noisy
    validation labels) and ``oracle`` (on the clean ones)."""
    noisy = chosen(table).groupby(["noise", "method"])["test_error"].mean().rename("noisy")
    oracle = chosen(table, oracle=True).groupby(["noise", "method"])["test_error"].mean().rename("oracle")
    return pd.concat([noisy, oracle], axis=1).reset_index()


def bracket(table: pd.DataFrame, oracle: bool = False) -> pd.DataFrame:
    """Does the λ grid bracket the best λ? One row per (seed, noise, method) of the tuned rows ``table``.

    ``lam`` is the λ the protocol selects (on the noisy validation labels, or on the clean ones with
    ``oracle``); ``bracketed`` is True when the validation error at *both* ends of the grid is strictly above
    its minimum, so that the best λ lies strictly inside the grid whichever way ties are broken.
    """
    flag, column = ("selected_oracle", "val_error_clean") if oracle else ("selected", "val_error")
    out = []
    for (seed, p, method), g in table.groupby(PROTOCOL_GROUPS):
        g = g.sort_values("lam")
        errors = g[column]
        out.append(
            {
                "seed": seed,
                "noise": p,
                "method": method,
                "lam": float(g.loc[g[flag], "lam"].iloc[0]),
                "val_error": float(errors.min()),
                "val_error_low_end": float(errors.iloc[0]),
                "val_error_high_end": float(errors.iloc[-1]),
                "bracketed": bool(min(errors.iloc[0], errors.iloc[-1]) > errors.min()),
            }
        )
    return pd.DataFrame(out)
