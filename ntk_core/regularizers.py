r"""RDI and AUX as pieces for any PyTorch training loop (Section 4, eqs. (3) and (4)).

The paper writes its objectives with a *sum* loss over the :math:`n` training examples,

* RDI, eq. (3): :math:`\sum_i \ell_i(\theta) + \tfrac{\lambda^2}{2}\lVert\theta - \theta(0)\rVert^2`;
* AUX, eq. (4): :math:`\sum_i \ell\big(f(\theta, x_i) + \lambda b_i,\ \tilde y_i\big)` with one trainable
  :math:`b_i` per training example, :math:`b(0) = 0`, used in training only.

Most loops use a *mean* loss (``reduction="mean"``, torch's default): dividing eq. (3) by :math:`n`, the
same minimiser is reached with :math:`\tfrac1n\sum_i \ell_i + \tfrac{\lambda^2}{2n}\lVert\theta-\theta(0)\rVert^2`.
On a mini-batch :math:`B` the batch mean :math:`\tfrac1{|B|}\sum_{i\in B}\ell_i` is an unbiased estimate of
:math:`\tfrac1n\sum_i\ell_i`, so the penalty stays :math:`\tfrac{\lambda^2}{2n}\lVert\cdot\rVert^2` at every step
whatever the batch size; with a *sum* over the batch it is :math:`\tfrac{|B|}{n}\tfrac{\lambda^2}{2}\lVert\cdot\rVert^2`,
so that one epoch applies the penalty of eq. (3) once. :class:`RDIPenalty` does both.

AUX needs no conversion: scaling the loss scales the gradients of :math:`\theta` and of :math:`b` alike, so
:math:`\lambda` keeps its meaning. It needs the *index* of each example in a batch, which a ``DataLoader``
gives with :func:`with_indices`.

Theorem 4.1's equivalence (both methods train an infinitely wide network into kernel ridge regression with
ridge :math:`\lambda^2`) is for gradient descent on the sum loss (or, equivalently, on the mean loss with the
learning rate multiplied by :math:`n`). With Adam or another adaptive optimiser the pieces still compute the
paper's objectives, but the equivalence, and the bounds of Section 5 that rest on it, no longer apply.

Examples
--------
A loop of one's own: Adam, a cosine schedule, a ``DataLoader`` and the mean cross-entropy, with RDI and AUX
(either alone is the usual choice; both are shown).

>>> import torch
>>> from torch import nn
>>> from torch.utils.data import DataLoader, TensorDataset
>>> from ntk_core.regularizers import AuxiliaryVariables, RDIPenalty, with_indices
>>> g = torch.Generator().manual_seed(0)
>>> x, y = torch.randn(64, 5, generator=g), torch.randint(0, 3, (64,), generator=g)
>>> torch.manual_seed(0) and None
>>> model = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 3))
>>> rdi = RDIPenalty(model, lam=0.1, n=len(x))                      # λ²/(2n) ‖θ − θ(0)‖², for a mean loss
>>> aux = AuxiliaryVariables(len(x), outputs=3, lam=0.1)           # one b_i per example, zero at the start
>>> opt = torch.optim.Adam([*model.parameters(), *aux.parameters()], lr=1e-2)
>>> sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
>>> loader = DataLoader(with_indices(TensorDataset(x, y)), batch_size=16, shuffle=True)
>>> for epoch in range(5):
...     for i, xb, yb in loader:
...         opt.zero_grad()
...         loss = nn.functional.cross_entropy(aux(model(xb), i), yb) + rdi()
...         loss.backward()
...         opt.step()
...     sched.step()
>>> rdi.distance() > 0, bool(aux.b.abs().sum() > 0)
(True, True)
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Literal, Mapping

import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from ._checks import check_choice, check_count, check_lam, check_positive

__all__ = ["RDIPenalty", "AuxiliaryVariables", "IndexedDataset", "IndexedIterable", "with_indices"]


def _named_trained(parameters: nn.Module | Mapping[str, nn.Parameter] | Iterable[nn.Parameter]) -> dict[str, Any]:
    if isinstance(parameters, nn.Module):
        named = {name: p for name, p in parameters.named_parameters() if p.requires_grad}
    elif isinstance(parameters, Mapping):
        named = dict(parameters)
    else:
        named = {str(i): p for i, p in enumerate(parameters)}
    if not named:
        raise ValueError("no trainable parameters to regularise (all have requires_grad=False)")
    for name, p in named.items():
        if not isinstance(p, torch.Tensor) or not p.requires_grad:
            raise TypeError(f"parameter {name!r} is not a tensor that requires a gradient")
    return named


class RDIPenalty(nn.Module):
    r"""The RDI penalty of eq. (3), :math:`c\,\tfrac{\lambda^2}{2}\lVert\theta - \theta(0)\rVert^2`, for any loop.

    A module without parameters of its own: :math:`\theta(0)` is in its ``state_dict`` (buffers ``theta0.<i>``,
    in the order of ``names``), so that saving and loading it with the model's resumes a run; the trained
    parameters are the model's, never registered here (``rdi.parameters()`` is empty: give the optimiser the
    model's). Given a module, the penalty checks at every call that the module's trained parameters are still the
    ones it was made with — a layer replaced or added, or a parameter frozen or unfrozen after construction, is an
    error (a penalty that silently skipped them would regularise only part of θ): make the penalty after the
    model is complete. ``lam = 0`` is RDI off (the penalty is 0), so that λ's grid can hold it.

    :math:`\theta(0)` is the parameters' value when the penalty is made (call it before training);
    :math:`c` matches the penalty to the loss it is added to (module docstring): :math:`c = 1/n` for a mean loss
    (``reduction="mean"``, every step), :math:`c = |B|/n` for a loss summed over a batch of :math:`|B|`
    examples (``reduction="sum"``; the full batch gives eq. (3) exactly).

    Parameters
    ----------
    parameters : torch.nn.Module, mapping of name to parameter, or iterable of parameters
        The trained parameters :math:`\theta` (a module's are those with ``requires_grad``).
    lam : float
        The paper's :math:`\lambda \ge 0` (0: off); the ridge of the equivalent kernel regression is
        :math:`\lambda^2`.
    n : int
        The number of training examples (the size of the sum in eq. (3)); a batch is at most this large.
    reduction : {"mean", "sum"}
        How the loss the penalty is added to reduces over a batch.
    initial : mapping of name to tensor, optional
        :math:`\theta(0)` by name (default: a copy of the parameters now). The mapping is kept, not copied, so
        that a caller restoring a checkpoint can update it in place.

    Raises
    ------
    ValueError
        ``lam`` negative, ``n`` not a positive count, an unknown ``reduction``, no trainable parameter, or
        ``initial`` whose names or shapes are not the parameters'; when called, a batch larger than ``n``, or a
        module whose trained parameters changed since the penalty was made.

    Examples
    --------
    A mean loss over ``n`` examples carries ``1/n`` of eq. (3)'s penalty:

    >>> import torch
    >>> from ntk_core.regularizers import RDIPenalty
    >>> w = torch.nn.Parameter(torch.zeros(3))
    >>> rdi = RDIPenalty([w], lam=2.0, n=4)
    >>> with torch.no_grad():
    ...     _ = w.add_(1.0)                                         # ‖θ − θ(0)‖² = 3
    >>> rdi().item(), RDIPenalty([w], lam=2.0, n=4, reduction="sum", initial={"0": torch.zeros(3)})().item()
    (1.5, 6.0)
    """

    params: dict[str, Any]
    initial: Mapping[str, torch.Tensor]
    _module: nn.Module | None

    def __init__(
        self,
        parameters: nn.Module | Mapping[str, nn.Parameter] | Iterable[nn.Parameter],
        lam: float,
        n: int,
        reduction: Literal["mean", "sum"] = "mean",
        initial: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        lam = check_lam(lam, "lam")
        check_count(n, "n (the number of training examples)")
        check_choice(reduction, "reduction", ("mean", "sum"))
        params = _named_trained(parameters)
        if initial is None:
            initial = {name: p.detach().clone() for name, p in params.items()}
        elif set(initial) != set(params) or any(tuple(initial[k].shape) != tuple(p.shape) for k, p in params.items()):
            raise ValueError("initial must give θ(0) for exactly the trained parameters, by name and shape")
        # plain attributes (a dict is not registered): the parameters stay the model's
        self.__dict__["params"] = params
        self.__dict__["initial"] = initial
        self.__dict__["_module"] = parameters if isinstance(parameters, nn.Module) else None
        self.names = list(params)
        for i, name in enumerate(self.names):  # the same tensors: a caller updating initial in place updates these
            self.register_buffer(f"theta0_{i}", initial[name])
        self.lam, self.n, self.reduction = float(lam), int(n), reduction

    def _check_unchanged(self) -> None:
        if self._module is None:
            return
        now = {name: p for name, p in self._module.named_parameters() if p.requires_grad}
        if now.keys() == self.params.keys() and all(now[k] is self.params[k] for k in now):
            return
        added, gone = sorted(now.keys() - self.params.keys()), sorted(self.params.keys() - now.keys())
        replaced = sorted(k for k in now.keys() & self.params.keys() if now[k] is not self.params[k])
        said = [f"{what}: {', '.join(names)}" for what, names in (("new or unfrozen", added), ("gone or frozen", gone),
                ("replaced", replaced)) if names]  # fmt: skip
        raise ValueError(
            "the model's trained parameters changed since the RDI penalty was made (" + "; ".join(said) + "): "
            "the penalty would leave them out; make it after the model is complete (and after freezing)"
        )

    def squared_distance(self) -> torch.Tensor:
        r""":math:`\lVert\theta - \theta(0)\rVert^2`, differentiable in :math:`\theta`."""
        self._check_unchanged()
        return sum(((p - self.initial[name]) ** 2).sum() for name, p in self.params.items())  # type: ignore[return-value]

    def distance(self) -> float:
        r""":math:`\lVert\theta - \theta(0)\rVert` now (a number, no gradient)."""
        with torch.no_grad():
            return float(self.squared_distance()) ** 0.5

    def coefficient(self, batch_size: int | None = None) -> float:
        r"""The factor :math:`c\,\lambda^2/2` of :math:`\lVert\theta-\theta(0)\rVert^2` for a batch of ``batch_size``
        (``None``: the full batch; a mean loss ignores it)."""
        if self.reduction == "mean":
            return 0.5 * self.lam**2 / self.n
        size = self.n if batch_size is None else batch_size
        return (size / self.n) * 0.5 * self.lam**2

    def forward(self, batch_size: int | None = None) -> torch.Tensor:
        """The penalty to add to the loss of a batch of ``batch_size`` examples (needed for ``reduction="sum"``
        on a mini-batch; ``None`` is the full batch): ``rdi(batch_size)``."""
        if batch_size is not None:
            check_count(batch_size, "batch_size")
            if batch_size > self.n:
                raise ValueError(
                    f"batch_size {batch_size} is larger than n = {self.n}, the training examples the penalty was "
                    "made for (a batch is a part of them)"
                )
        return self.coefficient(batch_size) * self.squared_distance()

    def extra_repr(self) -> str:
        return f"lam={self.lam:g}, n={self.n}, reduction={self.reduction!r}, parameters={len(self.names)}"


class AuxiliaryVariables(nn.Module):
    r"""AUX's auxiliary variables, eq. (4): one trainable :math:`b_i\in\mathbb R^K` per training example.

    ``aux(outputs, index)`` is :math:`f(\theta, x_i) + \lambda b_i` for the examples ``index`` of a batch: give it
    to the loss in training, and use the network's own outputs everywhere else (the variables only absorb the
    noise of the training labels). :math:`b(0) = 0`. Add ``aux.parameters()`` to the optimiser (with
    :meth:`param_group` to give them a weight decay of their own, as Setting 3 does, Appendix D).

    Only the batch's :math:`b_i` get a gradient, but an optimiser with momentum or running averages (Adam, AdamW,
    SGD with momentum) keeps moving the others after their example has left the batch. ``sparse=True`` gives the
    variables a sparse gradient (the batch's rows only), for an optimiser that steps only those rows:
    ``torch.optim.SparseAdam(aux.parameters())`` beside the model's own optimiser (or plain SGD, which steps a
    sparse gradient's rows alone); a variable whose example is not in the batch then does not move. SparseAdam has
    no weight decay: :meth:`param_group` refuses one for sparse variables.

    λ under Adam: Adam normalises the steps of the network and of the :math:`b_i` alike, so the λ that works does
    not rescale with the learning rate or the epochs; measured on MNIST (``benchmarks/bench_aux_lambda_adam.py``)
    it followed the model's output sensitivity :math:`\lVert\nabla_\theta f\rVert_1` at initialisation, and a
    log grid from about 0.02 to 5 times it bracketed every choice.

    Parameters
    ----------
    n : int
        Number of training examples (the indices run over ``0 .. n-1``).
    outputs : int
        The network's outputs K per example (1 for a binary classifier with one output).
    lam : float
        The paper's :math:`\lambda > 0`.
    dtype, device : optional
        Of the variables (default: torch's default dtype, the CPU); move them with ``.to()`` like any module.
    sparse : bool
        Give the variables a sparse gradient (the batch's rows only), for ``torch.optim.SparseAdam``.

    Attributes
    ----------
    b : torch.nn.Parameter
        The variables, one row per training example: shape ``(n, outputs)``.
    """

    def __init__(
        self,
        n: int,
        outputs: int,
        lam: float,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        sparse: bool = False,
    ) -> None:
        super().__init__()
        check_count(n, "n (the number of training examples)")
        check_count(outputs, "outputs")
        check_positive(lam, "lam")
        self.lam, self.sparse = float(lam), bool(sparse)
        self.b = nn.Parameter(torch.zeros(n, outputs, dtype=dtype, device=device))

    def forward(self, outputs: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """:math:`f(\\theta, x_i) + \\lambda b_i` for a batch: ``outputs`` of shape (B,) or (B, K), ``index`` (B,)."""
        if index.ndim != 1 or len(index) != len(outputs):
            raise ValueError(
                f"index must hold one example index per output row: got index of shape {tuple(index.shape)} for "
                f"outputs of shape {tuple(outputs.shape)} (wrap the dataset with with_indices to get them)"
            )
        self._check_index(index)
        index = index.to(self.b.device)
        b = nn.functional.embedding(index, self.b, sparse=True) if self.sparse else self.b[index]
        if outputs.ndim == 1:
            if self.b.shape[1] != 1:
                raise ValueError(f"outputs of shape (B,) need outputs=1 auxiliary variables, not {self.b.shape[1]}")
            return outputs + self.lam * b[:, 0]
        if outputs.shape[1:] != self.b.shape[1:]:
            raise ValueError(
                f"outputs of shape {tuple(outputs.shape)} do not match the variables' (n, {self.b.shape[1]})"
            )
        return outputs + self.lam * b

    def _check_index(self, index: torch.Tensor) -> None:
        """Example indices in 0..n−1, each at most once in a batch, as integers (not a mask, not labels)."""
        if index.dtype in (torch.bool, torch.uint8):
            raise TypeError(
                f"index must be integer example indices (int64), not a {index.dtype} mask: torch would read it as "
                "a mask over the variables (use mask.nonzero().squeeze(1) for the indices it selects)"
            )
        if torch.is_floating_point(index) or torch.is_complex(index):
            raise TypeError(
                f"index must be integer example indices, got dtype {index.dtype} (labels passed where the indices "
                "go? wrap the dataset with with_indices: its loader yields (index, x, y))"
            )
        if index.numel() == 0:
            return
        n = self.b.shape[0]
        low, high = int(index.min()), int(index.max())
        if low < 0:
            raise ValueError(f"index holds {low}: example indices run from 0 to n − 1 = {n - 1} (torch would wrap it)")
        if high >= n:
            raise ValueError(f"index holds {high}: there are n = {n} auxiliary variables, indices 0 to {n - 1}")
        if index.unique().numel() != index.numel():
            raise ValueError(
                "index holds an example twice in one batch: each example has one variable b_i (labels passed where "
                "the indices go? a sampler drawing with replacement? wrap the dataset with with_indices and sample "
                "without replacement)"
            )

    def param_group(self, weight_decay: float = 0.0) -> dict[str, Any]:
        """The variables as an optimiser parameter group with a weight decay of their own (Appendix D decays it
        with the learning rate: multiply ``group["weight_decay"]`` by the same factor at each milestone)."""
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
        if weight_decay and self.sparse:
            raise ValueError(
                "sparse variables (for SparseAdam, which has no weight decay) take no weight_decay: use sparse=False "
                "and an optimiser with weight decay, or leave it out"
            )
        return {"params": [self.b], "weight_decay": weight_decay}

    def extra_repr(self) -> str:
        return f"n={self.b.shape[0]}, outputs={self.b.shape[1]}, lam={self.lam:g}" + (", sparse" if self.sparse else "")


class IndexedDataset(Dataset):
    """A dataset whose items are ``(index, *item)``: the example ids AUX needs, from any ``DataLoader``."""

    def __init__(self, dataset: Dataset) -> None:
        if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise TypeError(
                "with_indices needs a map-style dataset (with __len__ and __getitem__) or an IterableDataset"
            )
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        item = self.dataset[i]
        return (i, *item) if isinstance(item, tuple) else (i, item)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return (self[i] for i in range(len(self)))


class IndexedIterable(IterableDataset):
    """An iterable dataset whose items are ``(index, *item)``, the index counting the items in the order the
    dataset yields them: the example ids AUX needs, valid when the dataset yields its examples in one order every
    epoch, in one loader process (``num_workers`` ≤ 1: workers would each count their own shard from 0)."""

    def __init__(self, dataset: IterableDataset) -> None:
        self.dataset = dataset

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        info = get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError(
                f"with_indices over an iterable dataset counts its items in one process; this DataLoader has "
                f"num_workers={info.num_workers}, whose workers would each count their own items from 0: use "
                "num_workers=0 or 1, or a map-style dataset"
            )
        for i, item in enumerate(self.dataset):
            yield (i, *item) if isinstance(item, tuple) else (i, item)


def with_indices(dataset: Dataset) -> IndexedDataset | IndexedIterable:
    """``dataset`` with each item preceded by its index, ``(i, x, y)``: a ``DataLoader`` over it yields the
    batch's example indices first, for :class:`AuxiliaryVariables`. A map-style dataset's index is its own; an
    iterable dataset's counts its items in the order it yields them (:class:`IndexedIterable`: one order every
    epoch, one loader process)."""
    if isinstance(dataset, IterableDataset):
        return IndexedIterable(dataset)
    return IndexedDataset(dataset)
