"""The method ``auto`` chose, kept per model and signature, so that a model's later kernels skip the choice.

``empirical_ntk(model, x, method="auto")`` chooses the cheapest exact method by estimated FLOPs
(:func:`~ntk_core.ntk.select_method`: two taped forward passes and a FLOP count, a few milliseconds). The
choice depends on the model's architecture and the problem's sizes, never on the parameters' values, so it is
kept here, per model (weakly: the entries go with the model) and per signature (``problem_signature``: the
model's and the inputs' signatures, the kernel asked for, the output count, dtype, device and memory budget),
and a later call with the same signature names the kept method and tile instead of choosing again. Every method
is exact: the choice is a matter of speed, and a kept choice gives the kernel a fresh one gives, bit for bit.

A choice of ``"structured"`` is not kept: that method's plan (its routes per parameter) is the computation
itself and is made at every call, with the other methods' estimates beside it.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from torch import nn

from .problem import _Problem

__all__ = ["forget_choices", "inputs_signature", "model_signature"]


def inputs_signature(x: Any) -> Hashable:
    """The structure of ``x`` (a tensor or array, or a tuple, list or dict of them) with each entry's shape,
    dtype and device: what the choice of method depends on besides the model."""
    if x is None:
        return None
    if isinstance(x, dict):
        return ("dict", tuple((key, inputs_signature(value)) for key, value in x.items()))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(inputs_signature(value) for value in x))
    return (tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x).__name__)), str(getattr(x, "device", "")))


def model_signature(model: nn.Module) -> Hashable:
    """The model's module tree with each module's mode, and its parameters' and buffers' names, shapes, dtypes,
    devices and (parameters) whether they are trained: what the choice depends on besides the inputs; the
    parameters' values are not part of it (a kernel along training keeps its choice)."""
    return (
        tuple((name, type(module).__name__, module.training) for name, module in model.named_modules()),
        tuple(
            (name, tuple(p.shape), str(p.dtype), str(p.device), p.requires_grad) for name, p in model.named_parameters()
        ),
        tuple((name, tuple(b.shape), str(b.dtype), str(b.device)) for name, b in model.named_buffers()),
    )


def problem_signature(prob: _Problem) -> Hashable:
    """Everything ``auto``'s choice depends on: the model's signature, the inputs' (``x2`` or its absence), the
    kernel asked for, the number of outputs (counted at every call: a ``forward`` that reads an attribute may
    change it), the compute dtype and device, and the memory budget."""
    return (
        model_signature(prob.model),
        inputs_signature(prob.x1),
        None if prob.symmetric else inputs_signature(prob.x2),
        prob.full,
        prob.n_out,
        str(prob.dtype),
        str(prob.device),
        prob.budget,
    )


@dataclass(frozen=True)
class Kept:
    """A kept choice: the method, its tile size and (``"ntvp"``) the Gram columns per batch."""

    method: str
    tile: int
    chunk: int


_KEPT: weakref.WeakKeyDictionary[nn.Module, dict[Hashable, Kept]] = weakref.WeakKeyDictionary()


def kept(prob: _Problem) -> Kept | None:
    """The choice kept for this problem's model and signature, or None."""
    return _KEPT.get(prob.model, {}).get(problem_signature(prob))


def keep(prob: _Problem, choice: Kept) -> None:
    """Keep ``choice`` for this problem's model and signature (a ``"structured"`` choice is not kept)."""
    if choice.method != "structured":
        _KEPT.setdefault(prob.model, {})[problem_signature(prob)] = choice


def forget_choices(model: nn.Module | None = None) -> None:
    """Forget the methods ``empirical_ntk(..., method="auto")`` kept for ``model`` (``None``: for every model),
    so that its next kernel of each signature chooses again.

    Examples
    --------
    >>> import torch
    >>> from ntk_core import TwoLayerNet, empirical_ntk
    >>> from ntk_core.ntk import forget_choices
    >>> net = TwoLayerNet(d=5, width=64, seed=0)
    >>> x = torch.randn(8, 5, generator=torch.Generator().manual_seed(0))
    >>> K = empirical_ntk(net, x)  # chooses, and keeps the choice
    >>> forget_choices(net)
    >>> torch.equal(empirical_ntk(net, x), K)  # chooses again: the same kernel
    True
    """
    if model is None:
        _KEPT.clear()
    else:
        _KEPT.pop(model, None)
