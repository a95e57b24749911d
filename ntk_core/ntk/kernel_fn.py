"""A model's empirical NTK as a function of the inputs that chooses its method once: :func:`empirical_ntk_fn`.

``empirical_ntk(model, x, method="auto")`` keeps its choice per model and signature in a store shared by every
caller (:mod:`ntk_core.ntk.choices`). The function keeps its own instead, in view (``k.choices``) and under the
caller's control (``k.clear()``), in neural-tangents' style: it chooses at its first call for each signature
(the model's modules and modes, its parameters' names, shapes, dtypes and whether they are trained, the
inputs' structure, shapes and dtypes, ``x2`` or its absence) and names the chosen method and tile in every
later call, which gives ``method="auto"``'s kernel bit for bit.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Hashable

import torch
from torch import Tensor, nn

from .._checks import check_choice, check_count
from .choices import inputs_signature, model_signature
from .cost import MethodChoice
from .gram import empirical_ntk, select_method
from .problem import METHODS, OUTPUTS, InputsLike, NTKMethod, Output

__all__ = ["KernelFn", "empirical_ntk_fn"]


class KernelFn:
    """``k(x1, x2=None)``: the empirical NTK of one model, its method chosen once per signature.

    Made by :func:`empirical_ntk_fn`, which says what it computes.

    Parameters
    ----------
    model : torch.nn.Module
        The network, as for :func:`~ntk_core.ntk.empirical_ntk`.
    method : {"auto", "jacobian", "ntvp", "structured"}
        ``"auto"`` (chosen once per signature) or a method named for every call.
    output, tile_size, dtype, device, out_dtype, memory_budget
        As for :func:`~ntk_core.ntk.empirical_ntk`.

    Attributes
    ----------
    model : torch.nn.Module
        The network; each call takes its parameters as they are then.
    choices : dict
        The choice (:class:`~ntk_core.ntk.MethodChoice`) made for each signature so far (empty for a named
        ``method``); :meth:`clear` forgets them.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        method: NTKMethod = "auto",
        output: Output = "trace",
        tile_size: int | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        out_dtype: torch.dtype | None = None,
        memory_budget: int | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.method = check_choice(method, "method", ("auto", *METHODS))
        self.output = check_choice(output, "output", OUTPUTS)
        self.tile_size = None if tile_size is None else check_count(tile_size, "tile_size")
        self.dtype, self.device, self.out_dtype, self.memory_budget = dtype, device, out_dtype, memory_budget
        self.choices: dict[Hashable, MethodChoice] = {}

    def __repr__(self) -> str:
        return f"KernelFn({type(self.model).__name__}, method={self.method!r}, {len(self.choices)} choices kept)"

    def clear(self) -> None:
        """Forget the choices: the next call of each signature chooses again."""
        self.choices.clear()

    def choice(self, x1: InputsLike, x2: InputsLike | None = None) -> MethodChoice | None:
        """The choice for these inputs (made now if it is their signature's first), or None for a named method."""
        if self.method != "auto":
            return None
        key = (model_signature(self.model), inputs_signature(x1), inputs_signature(x2))
        if key not in self.choices:
            self.choices[key] = select_method(
                self.model,
                x1,
                x2,
                output=self.output,
                dtype=self.dtype,
                device=self.device,
                memory_budget=self.memory_budget,
            )
        return self.choices[key]

    def __call__(
        self,
        x1: InputsLike,
        x2: InputsLike | None = None,
        *,
        progress: bool = False,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        callback: Callable[[int, int, bool], None] | None = None,
    ) -> Tensor:
        """The kernel ``k(x1, x2)`` (``x2=None``: ``k(x1, x1)``), as :func:`~ntk_core.ntk.empirical_ntk` gives it;
        ``progress``, ``checkpoint_dir`` and ``callback`` as there."""
        chosen = self.choice(x1, x2)
        return empirical_ntk(
            self.model,
            x1,
            x2,
            method=self.method if chosen is None else chosen.method,  # type: ignore[arg-type]
            output=self.output,
            tile_size=self.tile_size or (None if chosen is None else chosen.tile_size),
            dtype=self.dtype,
            device=self.device,
            progress=progress,
            out_dtype=self.out_dtype,
            memory_budget=self.memory_budget,
            checkpoint_dir=checkpoint_dir,
            callback=callback,
        )


def empirical_ntk_fn(model: nn.Module, **options: Any) -> KernelFn:
    """The empirical NTK of ``model`` as a function ``k(x1, x2=None)``, for many kernels of one model.

    ``k(x1, x2)`` is ``empirical_ntk(model, x1, x2, ...)`` (paper, Section 3.2: the Gram matrix of
    ``<∇θ f(θ, x), ∇θ f(θ, x')>`` at the model's parameters θ *at the time of the call*), bit for bit. With
    ``method="auto"`` the function chooses the method (:func:`~ntk_core.ntk.select_method`: the cheapest exact
    one by estimated FLOPs within the memory budget) at its first call for each signature and names it, with
    its tile, in the later ones, which skips the choice's taped forward passes and FLOP count. The signature is
    the model's module tree with each module's mode, its parameters' and buffers' names, shapes, dtypes and
    devices, which parameters are trained, and the inputs' structure, shapes and dtypes (``x2`` included):
    another batch size, ``model.eval()``, a frozen layer or another input chooses again; new parameter values
    (a training step) do not. The choice is a matter of speed only: every method is exact.

    Parameters
    ----------
    model : torch.nn.Module
        The network, as for :func:`~ntk_core.ntk.empirical_ntk`.
    **options
        ``method`` (``"auto"``: chosen once per signature, or a method named for every call), ``output``,
        ``tile_size``, ``dtype``, ``device``, ``out_dtype``, ``memory_budget``: as for
        :func:`~ntk_core.ntk.empirical_ntk` (see :class:`KernelFn`).

    Returns
    -------
    KernelFn
        Called as ``k(x1, x2=None, *, progress=False, checkpoint_dir=None, callback=None)``; its ``choices``
        show what was chosen.

    Raises
    ------
    TypeError
        ``model`` is not a ``torch.nn.Module``.
    ValueError
        An unknown ``method`` or ``output``, a ``tile_size`` below 1. The inputs are checked at each call, as
        by :func:`~ntk_core.ntk.empirical_ntk`.

    Examples
    --------
    >>> import torch
    >>> from ntk_core import TwoLayerNet, empirical_ntk, empirical_ntk_fn
    >>> net = TwoLayerNet(d=5, width=64, seed=0)
    >>> x = torch.randn(8, 5, generator=torch.Generator().manual_seed(0))
    >>> k = empirical_ntk_fn(net)
    >>> torch.equal(k(x), empirical_ntk(net, x))
    True
    >>> with torch.no_grad():
    ...     _ = net.hidden.weight.mul_(1.1)  # a step: new values
    >>> torch.equal(k(x), empirical_ntk(net, x)), len(k.choices)
    (True, 1)
    >>> k(x[:3], x).shape, len(k.choices)  # a new signature
    (torch.Size([3, 8]), 2)
    """
    return KernelFn(model, **options)
