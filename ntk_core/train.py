r"""One trainer for the paper's three settings: GD / SGD with RDI, AUX or early stopping.

Objectives (Section 4, with the loss written as in the paper, a *sum* over examples):

* vanilla, eq. (L):  :math:`L(\theta) = \tfrac12 \sum_i \lVert f(\theta, x_i) - \tilde y_i\rVert^2`
  (``loss="l2"``) or :math:`\sum_i \mathrm{CE}(f(\theta, x_i), \tilde c_i)` (``loss="ce"``);
* RDI, eq. (3): :math:`L(\theta) + \tfrac{\lambda^2}{2}\lVert\theta - \theta(0)\rVert^2`;
* AUX, eq. (4): the loss of :math:`f(\theta, x_i) + \lambda b_i` with one trainable
  :math:`b_i \in \mathbb R^K` per training example, :math:`b(0) = 0`; the
  auxiliary variables are used in training only, never at test time;
* early stopping: vanilla training; the reported test error is the one at the
  epoch of best validation error (the validation split is held out of training).

Mini-batches. A step on a batch :math:`B` of the :math:`n` training examples
minimises :math:`\tfrac12\sum_{i\in B}(\cdot)^2 + \tfrac{|B|}{n}\tfrac{\lambda^2}{2}\lVert\theta-\theta(0)\rVert^2`:
over one epoch the penalty is applied once in total, and with ``batch_size=None``
(full-batch GD, Setting 1) the step is exactly gradient descent on eq. (3).

Labels. A model with one output is a binary classifier with labels in
``{-1, +1}`` (the ℓ2 target is the label itself); a model with ``K > 1`` outputs
takes class indices ``0..K-1`` (the ℓ2 target is the one-hot vector, Section 3.1).

The regularisers are :mod:`ntk_core.regularizers`' pieces (:class:`~ntk_core.regularizers.RDIPenalty`,
:class:`~ntk_core.regularizers.AuxiliaryVariables`), which a loop of one's own (any optimiser, schedule, loss,
``DataLoader``) takes in a few lines; :func:`train` is the paper's recipe built from them.

Runs are deterministic on CPU for a fixed seed (the batch order of epoch ``e``
depends only on ``(seed, e)``), write atomic checkpoints, and resume from them.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal, get_args

import pandas as pd
import torch
from torch import nn

from . import _store
from ._checks import check_choice, check_count, check_interval, check_positive
from .regularizers import AuxiliaryVariables, RDIPenalty

__all__ = ["TrainingMethod", "TrainConfig", "TrainResult", "train", "predict", "classification_error", "batch_order"]

#: A training method, plain GD/SGD (``"vanilla"``), early stopping, RDI (eq. 3) or AUX (eq. 4).
TrainingMethod = Literal["vanilla", "early_stopping", "rdi", "aux"]
_METHODS: tuple[str, ...] = get_args(TrainingMethod)


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one training run (the methods of Section 4 and the schedules of Section 6).

    Attributes
    ----------
    method : str
        ``"vanilla"`` (GD/SGD), ``"early_stopping"`` (best validation epoch),
        ``"rdi"`` (eq. 3: + λ²/2 ‖θ − θ(0)‖²) or ``"aux"`` (eq. 4: f(θ, xᵢ) + λbᵢ).
    lam : float or None
        λ > 0 for RDI and AUX (the paper's regularisation strength), else unused.
    loss : str
        ``"l2"`` (the paper's squared loss ½Σ(f − ỹ)²) or ``"ce"`` (cross-entropy).
    epochs : int
        Number of passes over the training set.
    lr : float
        Learning rate η.
    batch_size : int or None
        Mini-batch size; ``None`` is full-batch GD. In a mini-batch the RDI
        penalty is scaled by ``|B|/n`` and only the batch's ``b_i`` move.
    momentum : float
        SGD momentum in [0, 1).
    weight_decay : float
        Weight decay ≥ 0 on the network's parameters.
    lr_milestones : tuple[int, ...]
        Epochs after which the learning rate (and ``aux_weight_decay``) is
        multiplied by ``lr_gamma`` (Setting 3: 0.1 after epochs 82 and 123 of 164).
    lr_gamma : float
        The factor at each milestone.
    aux_weight_decay : float
        Weight decay on the auxiliary variables of AUX.
    seed : int
        Seed of the mini-batch order (a new permutation each epoch).
    eval_every : int
        Evaluate (one history row) every this many epochs.

    Raises
    ------
    ValueError
        An unknown method or loss, RDI/AUX without λ > 0, or a non-positive
        count or rate.
    """

    method: TrainingMethod = "vanilla"
    lam: float | None = None
    loss: Literal["l2", "ce"] = "l2"
    epochs: int = 10
    lr: float = 0.1
    batch_size: int | None = None
    momentum: float = 0.0
    weight_decay: float = 0.0
    lr_milestones: tuple[int, ...] = ()
    lr_gamma: float = 0.1
    aux_weight_decay: float = 0.0
    seed: int = 0
    eval_every: int = 1

    def __post_init__(self) -> None:
        check_choice(self.method, "method", _METHODS)
        if self.method in ("rdi", "aux"):
            if self.lam is None:
                raise ValueError(f"method {self.method!r} needs lam = λ > 0 (the paper's regularisation strength)")
            check_positive(self.lam, "lam")
        check_choice(self.loss, "loss", ("l2", "ce"))
        for name in ("epochs", "eval_every"):
            check_count(getattr(self, name), name)
        if self.batch_size is not None:
            check_count(self.batch_size, "batch_size (an int, or None for the full batch)")
        check_positive(self.lr, "lr")
        check_interval(self.momentum, "momentum", 0.0, 1.0, high_open=True)
        check_interval(self.weight_decay, "weight_decay", 0.0, math.inf)
        check_interval(self.aux_weight_decay, "aux_weight_decay", 0.0, math.inf)
        if self.aux_weight_decay and self.method != "aux":
            raise ValueError("aux_weight_decay only applies to method='aux'")

    def key(self) -> str:
        """A short hash of every field: the identity of a run, for checkpoints and caches."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class TrainResult:
    """The trained model, its per-epoch history, and the early-stopping choice (returned by :func:`train`).

    Attributes
    ----------
    model : torch.nn.Module
        The trained network (the one passed to :func:`train`, trained in place).
    history : pandas.DataFrame
        One row per evaluated epoch with columns ``epoch``, ``loss``,
        ``train_error_noisy`` (with the auxiliary variables for AUX, as in the
        paper's figures), ``train_error_net`` (the network alone, without them:
        equal to ``train_error_noisy`` except for AUX), ``train_error_clean``
        (the network alone against the clean labels), ``val_error``, ``test_error``, and
        for each trained weight ``W`` the columns ``dist/<name>`` = ‖W − W(0)‖_F and
        ``norm/<name>`` = ‖W‖_F, plus ``dist/all`` = ‖θ − θ(0)‖.
    config : TrainConfig
        The configuration it ran with.
    aux : torch.Tensor or None
        The auxiliary variables b of AUX, shape ``(n, K)`` (K = 1 for one output).
    best_epoch : int or None
        The epoch of the lowest validation error (with a validation split).
    """

    model: nn.Module
    history: pd.DataFrame
    config: TrainConfig
    aux: torch.Tensor | None = None
    best_epoch: int | None = None

    @property
    def final(self) -> pd.Series:
        """The last evaluated epoch."""
        return self.history.iloc[-1]

    @property
    def best(self) -> pd.Series:
        """The epoch of lowest validation error (early stopping); the last one without validation data."""
        if self.best_epoch is None:
            return self.final
        return self.history.set_index("epoch").loc[self.best_epoch]

    @property
    def test_error(self) -> float:
        """The test error reported for the method, at the best validation epoch for early stopping, else the last."""
        row = self.best if self.config.method == "early_stopping" else self.final
        return float(row["test_error"])


# --------------------------------------------------------------------------- helpers


def _trained_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    params = {name: p for name, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise ValueError("the model has no trainable parameters (all have requires_grad=False)")
    return params


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """Network outputs ``f(θ, x)`` in evaluation mode, batched; no auxiliary variables.

    Parameters
    ----------
    model : torch.nn.Module
        The network.
    x : torch.Tensor, shape (n, ...)
        Inputs.
    batch_size : int
        Examples per forward pass.

    Returns
    -------
    torch.Tensor, shape (n,) or (n, K)
        The outputs, on the model's device, without gradients.
    """
    was_training = model.training
    model.eval()
    try:
        outs = [model(x[i : i + batch_size]) for i in range(0, len(x), batch_size)]
    finally:
        model.train(was_training)
    return torch.cat(outs) if outs else torch.empty(0)


def classification_error(outputs: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction misclassified: ``sign(f) ≠ y`` for one output (labels ±1), ``argmax f ≠ c`` for K outputs.

    Parameters
    ----------
    outputs : torch.Tensor, shape (n,) or (n, K)
        Network outputs f(θ, x).
    labels : torch.Tensor, shape (n,) or (n, K)
        Labels in {−1, +1} for one output, classes in {0, ..., K−1} for K outputs, or one-hot (or soft)
        targets of shape (n, K), whose argmax is the class.

    Returns
    -------
    float
        The error rate in [0, 1].

    Examples
    --------
    >>> import torch
    >>> from ntk_core.train import classification_error
    >>> classification_error(torch.tensor([0.3, -2.0, 0.1, 1.0]), torch.tensor([1, -1, -1, 1]))
    0.25
    """
    out = outputs.reshape(len(outputs), -1)
    if labels.ndim == 2:  # one-hot (or soft) targets, (n, K); a single column holds ±1 labels
        labels = labels[:, 0] if labels.shape[1] == 1 else labels.argmax(dim=1)
    if out.shape[1] == 1:
        pred = torch.where(out[:, 0] >= 0, 1, -1)
    else:
        pred = out.argmax(dim=1)
    return float((pred != labels.to(pred.device)).float().mean().item()) if len(labels) else float("nan")


def _targets(labels: torch.Tensor, outputs: int) -> torch.Tensor:
    if labels.ndim == 2 and labels.shape[1] > 1 or labels.ndim > 2:
        if labels.ndim != 2 or labels.shape[1] != outputs:
            raise ValueError(
                f"targets of shape (n, K) need K = {outputs}, the model's outputs; got shape {tuple(labels.shape)}"
            )
        if not torch.is_floating_point(labels) and not bool(((labels == 0) | (labels == 1)).all()):
            raise ValueError("integer targets of shape (n, K) must be one-hot (0 or 1)")
        return labels.to(torch.get_default_dtype())
    labels = labels.reshape(-1)
    if outputs == 1:
        if not torch.all((labels == 1) | (labels == -1)):
            raise ValueError("a one-output model is a binary classifier: labels must be in {-1, +1}")
        return labels.to(torch.get_default_dtype()).reshape(-1, 1)
    if labels.min() < 0 or labels.max() >= outputs:
        raise ValueError(f"labels must be class indices in 0..{outputs - 1} for a {outputs}-output model")
    return nn.functional.one_hot(labels.long(), outputs).to(torch.get_default_dtype())


def _inputs_like_model(model: nn.Module, x: torch.Tensor, val: Any, test: Any) -> tuple[torch.Tensor, Any, Any]:
    """Floating-point inputs in the dtype of the model's parameters, as :func:`~ntk_core.ntk.empirical_ntk` takes
    them (a float64 model given float32 inputs would otherwise fail inside torch)."""
    dtypes = {p.dtype for p in model.parameters() if torch.is_floating_point(p)}
    if len(dtypes) != 1:
        return x, val, test
    (dtype,) = dtypes

    def cast(t: torch.Tensor) -> torch.Tensor:
        return t.to(dtype) if torch.is_floating_point(t) and t.dtype != dtype else t

    return (
        cast(x),
        None if val is None else (cast(val[0]), val[1]),
        None if test is None else (cast(test[0]), test[1]),
    )


def _loss(out: torch.Tensor, labels: torch.Tensor, targets: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "l2":
        return 0.5 * ((out - targets) ** 2).sum()
    if out.shape[1] == 1:
        raise ValueError("loss='ce' needs a model with K >= 2 outputs")
    if labels.ndim == 2:  # one-hot or soft targets: cross-entropy with class probabilities
        return nn.functional.cross_entropy(out, targets.to(out.dtype), reduction="sum")
    return nn.functional.cross_entropy(out, labels.long(), reduction="sum")


# --------------------------------------------------------------------------- checkpoints


def _checkpoint_identity(
    model: nn.Module,
    config: TrainConfig,
    x: torch.Tensor,
    y_noisy: torch.Tensor,
    y_clean: torch.Tensor | None,
    val: tuple[torch.Tensor, torch.Tensor] | None,
    test: tuple[torch.Tensor, torch.Tensor] | None,
) -> dict[str, Any]:
    """Everything that determines a run: config, the data actually used, the model — its class, what it computes
    and its initial state. What it computes enters twice, so that a ``forward`` changed under the same class name
    and weights (ReLU → tanh, a plain tensor attribute it reads) is another run: the code of every module class's
    ``forward`` (:func:`ntk_core._store.function_fingerprint`) and the model's outputs on the first training
    inputs, in evaluation mode (no state changes, no random numbers drawn)."""
    fp = _store.fingerprint
    forwards = {f"{type(m).__module__}.{type(m).__qualname__}": type(m).forward for m in model.modules()}
    return {
        "artifact": "training checkpoint",
        "config": asdict(config),
        "data": {
            "x": fp(x),
            "y_noisy": fp(y_noisy),
            "y_clean": None if y_clean is None else fp(y_clean),
            "val": None if val is None else [fp(val[0]), fp(val[1])],
            "test": None if test is None else [fp(test[0]), fp(test[1])],
        },
        "model": {
            "class": f"{type(model).__module__}.{type(model).__qualname__}",
            "architecture": fp(repr(model)),
            "trained": sorted(n for n, p in model.named_parameters() if p.requires_grad),
            "initial_state": {k: fp(v) for k, v in model.state_dict().items()},
            "forward": {name: _store.function_fingerprint(f) for name, f in sorted(forwards.items())},
            "outputs": fp(predict(model, x[:4]).detach().cpu()),
        },
    }


def _save_checkpoint(
    path: Path,
    identity: dict[str, Any],
    epoch: int,
    rows: list[dict[str, Any]],
    model: nn.Module,
    theta0: dict[str, torch.Tensor],
    optimizer: torch.optim.Optimizer,
    aux: torch.Tensor | None,
) -> None:
    arrays: dict[str, Any] = {f"model.{k}": v.detach().cpu() for k, v in model.state_dict().items()}
    arrays.update({f"theta0.{k}": v.detach().cpu() for k, v in theta0.items()})
    if aux is not None:
        arrays["aux"] = aux.detach().cpu()
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)  # tensors and plain data only: read back with weights_only=True
    columns = list(rows[0]) if rows else []
    meta = {"epoch": epoch, "columns": columns, "rows": [[r[c] for c in columns] for r in rows]}
    _store.save(path, identity, arrays=arrays, blobs={"optimizer": buffer.getvalue()}, meta=meta)


def _load_checkpoint(
    path: Path,
    identity: dict[str, Any],
    model: nn.Module,
    theta0: dict[str, torch.Tensor],
    optimizer: torch.optim.Optimizer,
    aux: torch.Tensor | None,
    epochs: int,
) -> tuple[int, list[dict[str, Any]]] | None:
    """Restore the state saved in ``path`` into model, optimizer and aux; ``(epoch, rows)`` or None.

    None when there is no checkpoint, when it belongs to another run (other
    config, data, model or initial parameters: it is left alone and overwritten
    by this run's), or when it is damaged (then :mod:`ntk_core._store` has moved
    it aside with a ``DamagedArtifactWarning`` naming it): the run starts afresh.
    """
    state = model.state_dict()
    expect: dict[str, tuple[tuple[int | None, ...] | None, Any]] = {
        f"model.{k}": (tuple(v.shape), v.detach().cpu().numpy().dtype) for k, v in state.items()
    }
    expect.update({f"theta0.{k}": (tuple(v.shape), v.detach().cpu().numpy().dtype) for k, v in theta0.items()})
    if aux is not None:
        expect["aux"] = (tuple(aux.shape), aux.detach().cpu().numpy().dtype)
    found = _store.load(path, identity, expect=expect)
    if found is None:
        return None
    before = {k: v.detach().clone() for k, v in state.items()}
    try:
        opt_state = torch.load(io.BytesIO(found.blobs["optimizer"]), weights_only=True)
        epoch, columns, values = int(found.meta["epoch"]), found.meta["columns"], found.meta["rows"]
        if not 0 < epoch <= epochs or any(len(v) != len(columns) for v in values):
            raise ValueError(f"epoch {epoch} / rows inconsistent with a run of {epochs} epochs")
        rows = [dict(zip(columns, v)) for v in values]
        new_theta0 = {k: torch.from_numpy(found.arrays[f"theta0.{k}"].copy()).to(v.device) for k, v in theta0.items()}
        model.load_state_dict(
            {k: torch.from_numpy(found.arrays[f"model.{k}"].copy()).to(v.device) for k, v in state.items()}
        )
        optimizer.load_state_dict(opt_state)
    except Exception as err:  # verified bytes that still do not restore: damage too; nothing is half-applied
        model.load_state_dict(before)
        _store.set_aside(path, f"cannot restore the training state ({type(err).__name__}: {err})")
        return None
    theta0.update(new_theta0)
    if aux is not None:
        with torch.no_grad():
            aux.copy_(torch.from_numpy(found.arrays["aux"]))
    return epoch, rows


# --------------------------------------------------------------------------- the trainer


def batch_order(n: int, config: TrainConfig, epochs: int | None = None) -> list[torch.Tensor]:
    """The mini-batches :func:`train` visits with ``config`` on ``n`` examples, in order (its first ``epochs``
    epochs; default all): each epoch is a permutation of the examples drawn with the seed
    ``config.seed · 100003 + epoch``, cut into batches of ``config.batch_size`` (the last one shorter).

    With :func:`ntk_core.regime.linearised_sgd_outputs` it gives the linearised network of a run.
    """
    check_count(n, "n")
    batch = n if config.batch_size is None else min(config.batch_size, n)
    out = []
    for epoch in range(config.epochs if epochs is None else check_count(epochs, "epochs", 0)):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(config.seed * 100_003 + epoch))
        out += [order[start : start + batch] for start in range(0, n, batch)]
    return out


def train(
    model: nn.Module,
    x: torch.Tensor,
    y_noisy: torch.Tensor,
    config: TrainConfig,
    *,
    y_clean: torch.Tensor | None = None,
    val: tuple[torch.Tensor, torch.Tensor] | None = None,
    test: tuple[torch.Tensor, torch.Tensor] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    progress: bool = False,
    on_epoch_end: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train ``model`` in place on ``(x, y_noisy)`` with the method of ``config``.

    The methods are those of Section 4: plain GD/SGD on the squared loss
    (``"vanilla"``), early stopping at the best validation epoch, RDI, eq. (3),
    the loss plus ``λ²/2 ‖θ − θ(0)‖²``, and AUX, eq. (4), the loss of
    ``f(θ, x_i) + λ b_i`` with one trainable auxiliary variable ``b_i`` per
    example (initialised at 0). In the NTK regime both regularisers train the
    network into the kernel ridge regression predictor of eq. (8) (Theorem 4.1).

    Parameters
    ----------
    model : torch.nn.Module
        The network, trained in place (its parameters at the call are θ(0)).
    x : torch.Tensor, shape (n, ...)
        Training inputs, examples along the first dimension (floating-point inputs are cast to the dtype of
        the model's parameters, as :func:`~ntk_core.ntk.empirical_ntk` does).
    y_noisy : torch.Tensor, shape (n,) or (n, K)
        The (noisy) training targets the network is fitted to: ±1 labels for a one-output model, class indices
        for K outputs, or one-hot (or soft) targets of shape (n, K) (the l2 loss fits them, ``ce`` takes them
        as class probabilities, errors are counted on their argmax).
    config : TrainConfig
        Method, λ, loss, epochs, learning rate and schedule, batch size, seed.
    y_clean : torch.Tensor, shape (n,) or (n, K), optional
        Clean labels, only to report the training error on them.
    val, test : tuple of torch.Tensor, optional
        ``(inputs, labels)`` of a validation split (early stopping picks its best
        epoch) and of a test split, evaluated every ``config.eval_every`` epochs.
    checkpoint : str or os.PathLike, optional
        A file path: the state after each epoch is written there atomically (one
        checksummed file, :mod:`ntk_core._store`; no pickle: the optimizer state
        is read back with ``torch.load(..., weights_only=True)``), and a later
        call with the same path resumes from it when it was written by the same
        run: same config, same data (fingerprints of ``x``, the labels and the
        validation/test splits), same model class, architecture and *initial*
        parameters and buffers. A checkpoint of another run is never resumed
        from: this run starts afresh and overwrites it. A damaged checkpoint
        (truncated, altered bytes, NaN, wrong shapes) is named in a
        ``DamagedArtifactWarning``, moved aside, and the run starts from scratch;
        its result equals an uninterrupted run's.
    progress : bool
        Show a tqdm progress bar over epochs.
    on_epoch_end : callable, optional
        Called as ``on_epoch_end(epoch)`` after each completed epoch (after the
        checkpoint is written).

    Returns
    -------
    TrainResult
        The per-epoch ``history`` (losses, errors, distances to initialisation),
        the final and best-validation rows and the config.

    Raises
    ------
    TypeError
        ``model`` is not a ``torch.nn.Module``.
    ValueError
        Inputs and labels of different lengths, or another inconsistent input.
    FloatingPointError
        Training diverged: a mini-batch loss, or the training loss evaluated at the end of an epoch, was NaN
        or infinite. Raised at the end of the first epoch where that happened, before it is checkpointed
        (the last checkpoint stays the last finite state).

    Examples
    --------
    RDI on 16 points on the sphere with a two-layer network of Setting 1: the
    network fits the labels, and the history records how far the weights moved.

    >>> import torch
    >>> from ntk_core import TwoLayerNet
    >>> from ntk_core.train import TrainConfig, train
    >>> x = torch.randn(16, 5, generator=torch.Generator().manual_seed(0))
    >>> x = x / x.norm(dim=1, keepdim=True) * 5 ** 0.5          # ‖x‖² = d
    >>> y = torch.sign(x[:, 0])
    >>> net = TwoLayerNet(d=5, width=64, seed=0)
    >>> result = train(net, x, y, TrainConfig(method="rdi", lam=0.1, epochs=50, lr=1.0))
    >>> len(result.history), float(result.final["train_error_noisy"])
    (50, 0.0)
    >>> float(result.final["dist/all"]) > 0
    True
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if len(x) != len(y_noisy) or (y_clean is not None and len(y_clean) != len(x)):
        raise ValueError(
            f"x, y_noisy (and y_clean) must have the same length, got {len(x)}, {len(y_noisy)}"
            + (f", {len(y_clean)}" if y_clean is not None else "")
        )
    if config.method == "early_stopping" and val is None:
        raise ValueError("method='early_stopping' needs a validation split (val=(x_val, y_val)) held out of training")
    x, val, test = _inputs_like_model(model, x, val, test)
    n = len(x)
    params = _trained_parameters(model)
    path = Path(checkpoint) if checkpoint is not None else None
    identity = _checkpoint_identity(model, config, x, y_noisy, y_clean, val, test) if path is not None else {}
    theta0 = {name: p.detach().clone() for name, p in params.items()}
    try:
        probe = predict(model, x[:1])
        outputs = probe.reshape(1, -1).shape[1]
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ValueError(
            f"the model could not be applied to the first training input x[:1], of shape {tuple(x[:1].shape)} "
            f"({type(exc).__name__}: {exc}); x must hold the examples along its first dimension, "
            "(n, *input_shape)"
        ) from exc
    targets = _targets(y_noisy, outputs)  # in the model's output dtype (a float64 model: float64 targets and AUX)
    if torch.is_floating_point(probe) and targets.dtype != probe.dtype:
        targets = targets.to(probe.dtype)
    if config.loss == "ce" and outputs == 1:
        raise ValueError("loss='ce' needs a model with K >= 2 outputs")

    lam = float(config.lam) if config.lam is not None else 0.0  # validated > 0 for RDI and AUX
    # the library's pieces (ntk_core.regularizers), as a user's own loop takes them: the sum loss of eq. (3)
    aux_vars = (
        AuxiliaryVariables(n, outputs, lam, dtype=targets.dtype, device=x.device) if config.method == "aux" else None
    )
    aux = aux_vars.b if aux_vars is not None else None
    rdi = RDIPenalty(params, lam, n, reduction="sum", initial=theta0) if config.method == "rdi" else None
    groups = [{"params": list(params.values()), "weight_decay": config.weight_decay}]
    if aux_vars is not None:
        groups.append(aux_vars.param_group(config.aux_weight_decay))
    optimizer = torch.optim.SGD(groups, lr=config.lr, momentum=config.momentum)
    batch = n if config.batch_size is None else min(config.batch_size, n)

    start_epoch, rows = 0, []  # type: tuple[int, list[dict[str, Any]]]
    if path is not None:
        resumed = _load_checkpoint(path, identity, model, theta0, optimizer, aux, config.epochs)
        if resumed is not None:
            start_epoch, rows = resumed

    epochs = range(start_epoch, config.epochs)
    if progress:
        from tqdm import tqdm

        epochs = tqdm(epochs, initial=start_epoch, total=config.epochs, desc=f"{config.method}", leave=False)
    for epoch in epochs:
        decays = sum(epoch >= m for m in config.lr_milestones)
        for g, base_wd in zip(optimizer.param_groups, [config.weight_decay, config.aux_weight_decay]):
            g["lr"] = config.lr * config.lr_gamma**decays
            if g is optimizer.param_groups[-1] and aux is not None:
                g["weight_decay"] = config.aux_weight_decay * config.lr_gamma**decays
        order = torch.randperm(n, generator=torch.Generator().manual_seed(config.seed * 100_003 + epoch))
        model.train()
        finite = torch.ones((), dtype=torch.bool, device=x.device)  # on the device: no sync per step
        for start in range(0, n, batch):
            idx = order[start : start + batch].to(x.device)
            optimizer.zero_grad(set_to_none=True)
            out = model(x[idx]).reshape(len(idx), -1)
            if aux_vars is not None:
                out = aux_vars(out, idx)
            loss = _loss(out, y_noisy[idx], targets[idx], config.loss)
            if rdi is not None:  # |B|/n of eq. (3)'s penalty on a batch of |B|: once in total over an epoch
                loss = loss + rdi(len(idx))
            finite &= torch.isfinite(loss.detach())
            loss.backward()
            optimizer.step()
        done = epoch + 1
        if not bool(finite):
            raise _diverged("a mini-batch loss", done, config)
        if done % config.eval_every == 0 or done == config.epochs:
            rows.append(_evaluate(model, params, theta0, x, y_noisy, targets, y_clean, val, test, aux, config, done))
            if not math.isfinite(rows[-1]["loss"]):
                raise _diverged("the training loss at the end of the epoch", done, config)
        if path is not None:
            _save_checkpoint(path, identity, done, rows, model, theta0, optimizer, aux)
        if on_epoch_end is not None:
            on_epoch_end(done)

    history = pd.DataFrame(rows)
    best_epoch = None
    if val is not None and len(history):
        best_epoch = int(history.loc[history["val_error"].idxmin(), "epoch"])
    return TrainResult(model, history, config, aux.detach() if aux is not None else None, best_epoch)


def _diverged(what: str, epoch: int, config: TrainConfig) -> FloatingPointError:
    return FloatingPointError(
        f"training diverged: {what} was not finite in epoch {epoch} of {config.epochs} (method "
        f"{config.method!r}, loss {config.loss!r}, lr {config.lr:g}, momentum {config.momentum:g}); lower the "
        "learning rate (or the loss scale)"
    )


@torch.no_grad()
def _evaluate(model, params, theta0, x, y_noisy, targets, y_clean, val, test, aux, config, epoch) -> dict:
    out = predict(model, x).reshape(len(x), -1)
    train_out = out + float(config.lam or 0.0) * aux if aux is not None else out
    row: dict[str, float] = {
        "epoch": epoch,
        "loss": float(_loss(train_out, y_noisy, targets, config.loss)),
        "train_error_noisy": classification_error(train_out, y_noisy),
        "train_error_net": classification_error(out, y_noisy),
        "train_error_clean": classification_error(out, y_clean) if y_clean is not None else math.nan,
        "val_error": classification_error(predict(model, val[0]), val[1]) if val is not None else math.nan,
        "test_error": classification_error(predict(model, test[0]), test[1]) if test is not None else math.nan,
    }
    total = 0.0
    for name, p in params.items():
        dist = float(torch.linalg.vector_norm(p - theta0[name]))
        row[f"dist/{name}"] = dist
        row[f"norm/{name}"] = float(torch.linalg.vector_norm(p))
        total += dist**2
    row["dist/all"] = math.sqrt(total)
    return row
