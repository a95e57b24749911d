r"""Empirical Neural Tangent Kernel engine.

The paper (Section 3.2, "Recap of NTK") defines the features
:math:`\phi(x) = \nabla_\theta f(\theta(0), x)` and the kernel
:math:`k(x, x') = \langle \phi(x), \phi(x') \rangle`. :func:`empirical_ntk`
computes the Gram matrix of that kernel for any ``torch.nn.Module`` at its
current parameters, with three exact methods (cost models after Novak,
Sohl-Dickstein & Schoenholz, "Fast Finite Width Neural Tangent Kernel",
ICML 2022):

``"jacobian"``
    Per-example Jacobians (``vmap(jacrev)``) contracted over parameters, as in
    the PyTorch ``torch.func`` NTK tutorial. Cost per pair ~ ``O P`` (trace).
``"ntvp"``
    NTK-vector products: column ``(j, o)`` of the Gram matrix is
    ``J(x1) (J(x2)^T e_{j,o})``, one VJP on ``x2_j`` then one JVP on the
    ``x1`` tile; the Jacobian of a tile is never formed.
``"structured"``
    Structured derivatives of the operations the model runs
    (:mod:`ntk_core.structured`, whatever the weight layout: ``nn.Linear``,
    ``nn.Conv2d``, raw parameters in ``x @ W.T``, ``x @ W``, ``F.linear``,
    ``F.conv1d/2d/3d``, ``einsum``; shared and partially frozen weights). For a
    use ``y_t = W u_t`` the parameter gradient of output ``o`` is
    ``sum_t δ^o_t u_t^T`` with ``δ^o_t`` the output cotangent, so the
    parameter's NTK contribution is
    ``sum_{t,s} <u_t(x), u_s(x')> <δ^o_t(x), δ^o_s(x')>``; for a dense layer
    on flat inputs this is ``(U U^T) ⊙ (Δ Δ^T)`` and never forms the
    ``d_out × d_in`` per-example gradients. Where that is dearer (large
    spatial maps, where the ``T^2`` position pairs dominate) the per-example
    gradients ``sum_t δ_t u_t^T`` are formed instead; a parameter that
    reaches an operation without a rule falls back to Jacobian contraction,
    for that parameter only. The routes are chosen per parameter by the cost
    model (see :func:`ntk_core.structured.plan_structured`).

``method="auto"`` takes the cheapest by estimated FLOPs within the memory
budget and logs its choice (INFO, logger ``ntk_core.ntk``): the estimates of
every method and, when it takes ``"structured"``, each parameter's route and
why.

Conventions
-----------
* ``output="trace"`` returns ``K[i, j] = sum_o <∇f_o(x1_i), ∇f_o(x2_j)>`` —
  **summed** over the O outputs, as the ``torch.func`` tutorial does
  (neural-tangents' ``trace_axes`` *averages*, i.e. divides by O).
  ``output="full"`` returns ``K[i, j, a, b] = <∇f_a(x1_i), ∇f_b(x2_j)>``.
  A model with one output per example (shape ``(b,)`` or ``(b, 1)``) gives
  ``(n1, n2)`` either way.
* Inputs: one tensor ``(n, *features)``, passed as ``model(x)``; a tuple (or
  list) of tensors, ``model(*x)``, e.g. ``(x, mask)``; a dict of tensors,
  ``model(**x)``. Every tensor holds the n examples along dimension 0.
  Floating tensors are cast to the compute dtype; integer and bool tensors
  (token ids, masks) are passed as they are.
* Only parameters with ``requires_grad=True`` are differentiated; the others
  (and buffers) are constants. The model is never modified (not even its
  mode). It must be one fixed function that treats examples independently: a
  model in training mode with an active Dropout (random output) or a
  BatchNorm (batch statistics couple the examples) is refused with a
  ``ValueError`` asking for ``model.eval()``; the model's mode is never
  switched silently. (Custom modules that branch on ``self.training`` cannot
  be detected: put such a model in the mode you mean.)
* The result is a CPU tensor (the Gram matrix of a whole data set may not fit
  on an accelerator) of dtype ``out_dtype`` (default: the compute dtype).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, jvp, vjp, vmap
from tqdm import tqdm  # the console bar: no ipywidgets needed in notebooks

from . import _store
from ._checks import check_choice, check_count
from ._typing import ArrayLike

__all__ = [
    "METHODS",
    "OUTPUTS",
    "DEFAULT_MEMORY_BUDGET",
    "CostEstimate",
    "MethodChoice",
    "empirical_ntk",
    "select_method",
]

log = logging.getLogger(__name__)

#: The exact methods of :func:`empirical_ntk` (``method="auto"`` picks one of them).
METHODS: tuple[str, ...] = ("jacobian", "ntvp", "structured")
#: What :func:`empirical_ntk` returns for K outputs, the trace (n1, n2) or the full (n1, n2, K, K) kernel.
OUTPUTS: tuple[str, ...] = ("trace", "full")
#: Bytes of working memory a tile of :func:`empirical_ntk` may use by default (2 GiB).
DEFAULT_MEMORY_BUDGET = 2 * 1024**3
_MAX_TILE = 4096
_ALLOWED_DTYPES = (torch.float32, torch.float64)

#: What a model takes: one tensor, called as ``model(x)``; a tuple of tensors, ``model(*x)``; a dict of tensors,
#: ``model(**x)``. Every tensor holds the examples along dimension 0.
Inputs = Tensor | tuple[Tensor, ...] | dict[str, Tensor]
#: The ``x1``, ``x2`` arguments: as :data:`Inputs`, with NumPy arrays for tensors and lists for tuples.
InputsLike = (
    Tensor | np.ndarray | tuple[Tensor | np.ndarray, ...] | list[Tensor | np.ndarray] | dict[str, Tensor | np.ndarray]
)

#: The ``method`` argument of :func:`empirical_ntk`.
NTKMethod = Literal["auto", "jacobian", "ntvp", "structured"]
Output = Literal["trace", "full"]


# --------------------------------------------------------------------------- problem set-up


@dataclass
class _Problem:
    """Everything a method needs: functional parameters, inputs, shapes."""

    model: nn.Module
    params: dict[str, Tensor]
    consts: dict[str, Tensor]
    x1: Inputs
    x2: Inputs
    symmetric: bool
    full: bool
    n_out: int
    dtype: torch.dtype
    device: torch.device
    budget: int

    @property
    def itemsize(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.params.values())

    @property
    def n1(self) -> int:
        return _n_examples(self.x1)

    @property
    def n2(self) -> int:
        return _n_examples(self.x2)

    def forward(self, params: dict[str, Tensor], x: Inputs) -> Tensor:
        """Model output as ``(b, O)``."""
        args, kwargs = _arguments(x)
        out = functional_call(self.model, (params, self.consts), args, kwargs)
        return out.reshape(_n_examples(x), -1)


# --------------------------------------------------------------------------- inputs: one tensor, a tuple, a dict


def _entries(x: Inputs) -> list[tuple[str, Tensor]]:
    """The tensors of ``x``, each with its label after the argument's name: ``""``, ``"[1]"``, ``"['mask']"``."""
    if isinstance(x, Tensor):
        return [("", x)]
    if isinstance(x, tuple):
        return [(f"[{i}]", t) for i, t in enumerate(x)]
    return [(f"[{k!r}]", t) for k, t in x.items()]


def _map_inputs(fn: Callable[[Tensor], Any], x: Inputs) -> Any:
    """``fn`` applied to every tensor of ``x``, in the same structure."""
    if isinstance(x, Tensor):
        return fn(x)
    if isinstance(x, tuple):
        return tuple(fn(t) for t in x)
    return {k: fn(t) for k, t in x.items()}


def _n_examples(x: Inputs) -> int:
    return _entries(x)[0][1].shape[0]


def _rows(x: Inputs, index: slice | Tensor) -> Inputs:
    """The examples ``index`` of every entry."""
    return _map_inputs(lambda t: t[index], x)  # type: ignore[no-any-return]


def _batch_of_one(x: Inputs) -> Inputs:
    """One example (no batch dimension, as inside ``vmap``) as a batch of one."""
    return _map_inputs(lambda t: t.unsqueeze(0), x)  # type: ignore[no-any-return]


def _arguments(x: Inputs) -> tuple[tuple[Tensor, ...], dict[str, Tensor] | None]:
    """Positional and keyword arguments of the model: ``model(x)``, ``model(*x)`` or ``model(**x)``."""
    if isinstance(x, Tensor):
        return (x,), None
    return (x, None) if isinstance(x, tuple) else ((), x)


def _shapes(x: Inputs) -> str:
    """``of shape (2, 5)``, or the shape and dtype of every entry."""
    if isinstance(x, Tensor):
        return f"of shape {tuple(x.shape)}"
    return "of shapes " + ", ".join(f"{label}: {tuple(t.shape)} {t.dtype}" for label, t in _entries(x))


_INPUT_KINDS = (
    "a torch.Tensor or numpy.ndarray, or a tuple or list of them (passed as model(*x)) or a dict of them "
    "(passed as model(**x))"
)


def _as_tensor(x: ArrayLike, name: str) -> Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
    if x.is_complex():
        raise TypeError(
            f"{name} must have a real dtype: floating point (cast to the compute dtype), or integer or bool (kept "
            f"as they are: token ids, masks); got {x.dtype}"
        )
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError(f"{name} must have shape (n, *features) with n >= 1, got {tuple(x.shape)}")
    if torch.is_floating_point(x) and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or infinite values; all inputs must be finite")
    return x


def _as_inputs(x: InputsLike, name: str) -> Inputs:
    """One tensor, a tuple (from a tuple or list) or a dict of tensors, each checked, with the same n."""
    if isinstance(x, (Tensor, np.ndarray)):
        return _as_tensor(x, name)
    if not isinstance(x, (tuple, list, dict)):
        raise TypeError(f"{name} must be {_INPUT_KINDS}, got {type(x).__name__}")
    if not x:
        raise ValueError(f"{name} is an empty {type(x).__name__}: a model needs at least one input")
    if isinstance(x, dict) and not all(isinstance(k, str) for k in x):
        raise TypeError(f"the keys of {name} must be str (the names of the model's arguments), got {list(x)}")
    items = list(x.items()) if isinstance(x, dict) else list(enumerate(x))
    for key, t in items:
        if not isinstance(t, (Tensor, np.ndarray)):
            raise TypeError(f"{name} must be {_INPUT_KINDS}; {name}[{key!r}] is a {type(t).__name__}")
    tensors = {key: _as_tensor(t, f"{name}[{key!r}]") for key, t in items}
    inputs: Inputs = tensors if isinstance(x, dict) else tuple(tensors.values())  # type: ignore[assignment]
    (first, t0), *rest = _entries(inputs)
    for label, t in rest:
        if t.shape[0] != t0.shape[0]:
            raise ValueError(
                f"{name}{label} has {t.shape[0]} examples along dimension 0, but {name}{first} has {t0.shape[0]}: "
                f"every entry of {name} must hold the same n examples along dimension 0"
            )
    return inputs


def _describe_kind(x: Inputs) -> str:
    if isinstance(x, Tensor):
        return "one tensor"
    return f"a tuple of {len(x)} tensors" if isinstance(x, tuple) else f"a dict with keys {sorted(x)}"


def _check_like(t1: Inputs, t2: Inputs) -> None:
    """x2 has x1's structure (kind, length or keys) and, per entry, its feature shape and dtype."""
    if type(t1) is not type(t2):
        raise TypeError(
            f"x2 must have the same structure as x1: x1 is {_describe_kind(t1)}, x2 is {_describe_kind(t2)}"
        )
    if isinstance(t1, tuple) and len(t1) != len(t2):
        raise ValueError(f"x2 must have the same structure as x1: x1 has {len(t1)} entries, x2 has {len(t2)}")
    if isinstance(t1, dict) and isinstance(t2, dict) and set(t1) != set(t2):
        raise ValueError(f"x2 must have the same keys as x1: x1 has keys {sorted(t1)}, x2 has {sorted(t2)}")
    for (label, a), b in zip(_entries(t1), _aligned_entries(t1, t2)):
        if b.shape[1:] != a.shape[1:]:
            raise ValueError(
                f"x1{label} and x2{label} must have the same feature shape, got {tuple(a.shape[1:])} "
                f"and {tuple(b.shape[1:])}"
            )
        if a.dtype != b.dtype and not (torch.is_floating_point(a) and torch.is_floating_point(b)):
            raise TypeError(
                f"x1{label} and x2{label} must have the same dtype (floating dtypes may differ: both are cast to "
                f"the compute dtype), got {a.dtype} and {b.dtype}"
            )


def _aligned_entries(t1: Inputs, t2: Inputs) -> list[Tensor]:
    """The tensors of ``t2`` in the order of ``t1``'s entries (a dict's keys in ``t1``'s order)."""
    if isinstance(t1, dict) and isinstance(t2, dict):
        return [t2[k] for k in t1]
    return [t for _, t in _entries(t2)]


def _to_compute(x: Inputs, device: torch.device, dtype: torch.dtype) -> Inputs:
    """Every entry on ``device``; floating entries cast to the compute ``dtype``, the others kept."""
    return _map_inputs(  # type: ignore[no-any-return]
        lambda t: t.to(device=device, dtype=dtype) if torch.is_floating_point(t) else t.to(device=device), x
    )


def _resolve_dtype(dtype: torch.dtype | None, model: nn.Module, name: str = "dtype") -> torch.dtype:
    if dtype is None:
        first = next((p for p in model.parameters() if p.requires_grad), None)
        dtype = first.dtype if first is not None else torch.get_default_dtype()
    if dtype not in _ALLOWED_DTYPES:
        raise ValueError(f"{name} must be torch.float32 or torch.float64, got {dtype}")
    return dtype


def _resolve_device(device: torch.device | str | None, model: nn.Module) -> torch.device:
    if device is None:
        first = next(iter(model.parameters()), None)
        return first.device if first is not None else torch.device("cpu")
    return torch.device(device)


def _split_parameters(
    model: nn.Module, dtype: torch.dtype, device: torch.device
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Trainable parameters vs constants (frozen parameters and buffers), detached copies."""

    def cast(t: Tensor) -> Tensor:
        t = t.detach()
        return t.to(device=device, dtype=dtype) if torch.is_floating_point(t) else t.to(device)

    params = {n: cast(p) for n, p in model.named_parameters() if p.requires_grad}
    consts = {n: cast(p) for n, p in model.named_parameters() if not p.requires_grad}
    consts.update({n: cast(b) for n, b in model.named_buffers()})
    return params, consts


def _make_problem(
    model: Any,
    x1: InputsLike,
    x2: InputsLike | None,
    output: str,
    dtype: torch.dtype | None,
    device: torch.device | str | None,
    memory_budget: int | None,
) -> _Problem:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_choice(output, "output", OUTPUTS)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters (all have requires_grad=False); the NTK would be zero")
    _check_fixed_function(model)
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else check_count(memory_budget, "memory_budget")
    dt = _resolve_dtype(dtype, model)
    dev = _resolve_device(device, model)
    t1 = _as_inputs(x1, "x1")
    t2 = t1 if x2 is None else _as_inputs(x2, "x2")
    _check_like(t1, t2)
    params, consts = _split_parameters(model, dt, dev)
    t1 = _to_compute(t1, dev, dt)
    t2 = t1 if x2 is None else _to_compute(t2, dev, dt)
    prob = _Problem(model, params, consts, t1, t2, x2 is None, False, 0, dt, dev, budget)
    prob.n_out = _output_dim(prob)
    prob.full = output == "full" and prob.n_out > 1
    return prob


def _check_fixed_function(model: nn.Module) -> None:
    """Refuse a model whose output is random or couples the examples of a batch.

    A kernel is a property of one fixed function ``x -> f(θ, x)``. In training
    mode Dropout draws a new mask at every call and BatchNorm normalises with the
    statistics of the batch, so "the NTK" of such a model is not defined: it
    would change from call to call, from method to method and from one tile
    size to another. The model is not switched to evaluation mode behind the
    caller's back (that would silently change the function, e.g. BatchNorm from
    batch to running statistics); the caller decides, with ``model.eval()``.
    """
    for name, m in model.named_modules():
        label = f"{name or 'model'} ({type(m).__name__})"
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.training and m.p > 0:
            raise ValueError(
                f"model is in training mode and {label} is a Dropout with p={m.p}: its output is random, so "
                f"it has no NTK; call model.eval() first (the kernel is then that of the deterministic "
                f"evaluation-mode network)"
            )
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and (m.training or not m.track_running_stats):
            why = "in training mode" if m.training else "built with track_running_stats=False"
            raise ValueError(
                f"{label} is a BatchNorm {why}: it normalises with the statistics of the batch, so an "
                f"example's output depends on the other examples and there is no kernel; call model.eval() "
                f"first (BatchNorm then uses its running statistics and every example is treated alone)"
                + ("" if m.track_running_stats else "; a BatchNorm without running statistics has no such mode")
            )


def _output_dim(prob: _Problem) -> int:
    b = min(2, prob.n1)
    probe = _rows(prob.x1, slice(None, b))
    args, kwargs = _arguments(probe)
    try:
        with torch.no_grad():
            out = functional_call(prob.model, (prob.params, prob.consts), args, kwargs)
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        raise ValueError(
            f"the model could not be applied to the first inputs x1[:{b}], {_shapes(probe)} "
            f"({type(exc).__name__}: {exc}); inputs must hold the examples along their first "
            "dimension, (n, *input_shape); a tuple is passed as model(*x1), a dict as model(**x1)"
        ) from exc
    if not isinstance(out, Tensor) or out.ndim < 1 or out.shape[0] != b:
        shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(
            f"model must map a batch of b inputs to a tensor of shape (b,) or (b, *out); for b={b} it returned {shape}"
        )
    return int(out[0].numel())


# --------------------------------------------------------------------------- forward cost


@dataclass
class _ForwardCost:
    """What one example costs the model's forward pass: the numbers the cost models of the methods start from."""

    flops: float  # per example (at least 2 per trained parameter)
    activations: float  # numbers output by leaf modules, per example

    @classmethod
    def of(cls, prob: _Problem, flops: float, activations: float) -> _ForwardCost:
        """The cost from counted FLOPs and leaf-module outputs of one example (floors: 2 FLOPs per trained
        parameter, 1 activation)."""
        return cls(max(flops, 2.0 * prob.n_params), float(max(activations, 1)))


def _leaf_output_hooks(model: nn.Module, sizes: list[int]) -> list[Any]:
    """Forward hooks on the leaf modules of ``model`` that append the size of each tensor output to ``sizes``
    (0 for another output); the caller removes them."""
    return [
        m.register_forward_hook(lambda m, inp, out: sizes.append(out.numel() if isinstance(out, Tensor) else 0))
        for m in model.modules()
        if not list(m.children())
    ]


def _forward_cost(prob: _Problem) -> _ForwardCost:
    """Run one example through the model, counting its FLOPs (``FlopCounterMode``) and the outputs of its leaf
    modules.

    The path without a trace (and the fallback where the structured plan's trace cannot count the FLOPs, see
    :func:`ntk_core.structured._traced_cost`).
    """
    sizes: list[int] = []
    handles = _leaf_output_hooks(prob.model, sizes)
    try:
        flops = _count_flops(prob, _rows(prob.x1, slice(None, 1)))
    finally:
        for h in handles:
            h.remove()
    return _ForwardCost.of(prob, flops, sum(sizes))


def _count_flops(prob: _Problem, x: Inputs) -> float:
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            prob.forward(prob.params, x)
        return float(counter.get_total_flops())
    except Exception:  # pragma: no cover - the counter is best effort
        with torch.no_grad():
            prob.forward(prob.params, x)
        return 0.0


# --------------------------------------------------------------------------- contractions (shared)


def _contract_jacobians(j1: Tensor, j2: Tensor, full: bool) -> Tensor:
    """``J1: (b1, O, p)``, ``J2: (b2, O, p)`` -> ``(b1, b2)`` summed over O, or ``(b1, b2, O, O)``."""
    if full:
        return torch.einsum("iap,jbp->ijab", j1, j2)
    return j1.reshape(j1.shape[0], -1) @ j2.reshape(j2.shape[0], -1).T


# --------------------------------------------------------------------------- methods


class _Engine(Protocol):
    name: str
    cache_columns: bool

    def features(self, x: Inputs) -> Any: ...

    def kernel(self, f1: Any, f2: Any) -> Tensor: ...


def _per_example_jacobians(prob: _Problem, names: list[str], x: Inputs) -> dict[str, Tensor]:
    """``vmap(jacrev)`` Jacobians of the named parameters: name -> ``(b, O, p)``."""
    diff = {n: prob.params[n] for n in names}
    rest = {n: t for n, t in prob.params.items() if n not in diff}

    def f_one(p: dict[str, Tensor], xi: Inputs) -> Tensor:
        return prob.forward({**rest, **p}, _batch_of_one(xi))[0]

    jac = vmap(jacrev(f_one), in_dims=(None, 0))(diff, x)
    return {n: j.reshape(_n_examples(x), prob.n_out, -1) for n, j in jac.items()}


@dataclass
class _JacobianEngine:
    """Method "jacobian": per-example Jacobians of all parameters, contracted."""

    prob: _Problem
    name: str = "jacobian"
    cache_columns: bool = False

    def features(self, x: Inputs) -> dict[str, Tensor]:
        return _per_example_jacobians(self.prob, list(self.prob.params), x)

    def kernel(self, f1: dict[str, Tensor], f2: dict[str, Tensor]) -> Tensor:
        return sum(_contract_jacobians(f1[n], f2[n], self.prob.full) for n in f1)  # type: ignore[return-value]


@dataclass
class _NTVPEngine:
    """Method "ntvp": NTK-vector products, one VJP + one JVP per Gram column."""

    prob: _Problem
    chunk: int
    name: str = "ntvp"
    cache_columns: bool = False

    def features(self, x: Inputs) -> Inputs:
        return x

    def kernel(self, x1: Inputs, x2: Inputs) -> Tensor:
        prob, params = self.prob, self.prob.params

        def column(xj: Inputs, cot: Tensor) -> Tensor:
            pullback = vjp(lambda p: prob.forward(p, _batch_of_one(xj))[0], params)[1]
            (tangent,) = pullback(cot)
            return jvp(lambda p: prob.forward(p, x1), (params,), (tangent,))[1]

        basis = torch.eye(prob.n_out, dtype=prob.dtype, device=prob.device)
        cols = vmap(vmap(column, in_dims=(None, 0)), in_dims=(0, None), chunk_size=self.chunk)(x2, basis)
        k = cols.permute(2, 0, 3, 1)  # (j, b, i, a) -> (i, j, a, b)
        return k if prob.full else torch.diagonal(k, dim1=2, dim2=3).sum(-1)


# --------------------------------------------------------------------------- cost model


@dataclass(frozen=True)
class CostEstimate:
    """Estimated work of one NTK method on one problem (see :func:`select_method`).

    Attributes
    ----------
    method : str
        One of :data:`METHODS`.
    flops : float
        Estimated floating-point operations for the whole Gram matrix.
    memory : int
        Peak working memory in bytes at ``tile_size`` (the result excluded).
    tile_size : int
        Rows/columns per tile that fit the memory budget.
    feasible : bool
        Whether the method fits the budget at all.
    """

    method: str
    flops: float
    memory: int
    tile_size: int
    feasible: bool


@dataclass(frozen=True)
class MethodChoice:
    """What ``empirical_ntk(..., method="auto")`` picked, and the estimates it compared.

    ``print(choice)`` shows the comparison as a table.

    Attributes
    ----------
    method : str
        The method picked: the cheapest feasible one, one of :data:`METHODS`.
    tile_size : int
        Its tile size.
    estimates : dict[str, CostEstimate]
        The estimate of every method, by name.
    """

    method: str
    tile_size: int
    estimates: dict[str, CostEstimate]

    def __str__(self) -> str:
        rows = [
            f"  {e.method:<10} {e.flops / 1e9:12.2f} GFLOP  {e.memory / 2**20:9.1f} MiB  tile {e.tile_size}"
            + ("" if e.feasible else "  (over memory budget)")
            for e in self.estimates.values()
        ]
        return f"auto -> {self.method} (tile {self.tile_size})\n" + "\n".join(rows)


def _pairs(prob: _Problem) -> float:
    n1, n2 = prob.n1, prob.n2
    return n1 * (n1 + 1) / 2 if prob.symmetric else float(n1 * n2)


def _out_factor(prob: _Problem) -> int:
    return prob.n_out**2 if prob.full else prob.n_out


def _tile_fit(fixed: float, per_row: float, per_pair: float, budget: int, n_max: int) -> int:
    """Largest t <= n_max with ``fixed + 2 t per_row + t^2 per_pair <= budget`` (at least 1)."""
    avail = budget - fixed
    if avail <= 0:
        return 1
    a, b = per_pair, 2.0 * per_row
    t = (-b + math.sqrt(b * b + 4 * a * avail)) / (2 * a) if a > 0 else avail / max(b, 1.0)
    return int(max(1, min(n_max, _MAX_TILE, math.floor(t))))


def _n_rows_computed(prob: _Problem, tile: int, cached: bool) -> float:
    """Examples pushed through the feature map: columns once if cached, else once per row tile."""
    n1, n2 = prob.n1, prob.n2
    if cached:
        return n1 if prob.symmetric else n1 + n2
    row_tiles = math.ceil(n1 / tile)
    return n1 + (row_tiles * (row_tiles - 1) / 2 * tile if prob.symmetric else row_tiles * n2)


def _jacobian_tile(prob: _Problem) -> tuple[int, int]:
    """Per-example Jacobians: the tile that fits the budget and its working memory in bytes (no FLOP count)."""
    e, o, p = prob.itemsize, prob.n_out, prob.n_params
    n_max = max(prob.n1, prob.n2)
    per_row = 2.0 * o * p * e  # Jacobian plus its reverse-mode workspace
    per_pair = 2.0 * e * (prob.n_out**2 if prob.full else 1)
    tile = _tile_fit(0, per_row, per_pair, prob.budget, n_max)
    return tile, int(2 * tile * per_row + tile * tile * per_pair)


def _estimate_jacobian(prob: _Problem, cost: _ForwardCost) -> CostEstimate:
    tile, mem = _jacobian_tile(prob)
    rows = _n_rows_computed(prob, tile, cached=False)
    flops = rows * (1 + 2 * prob.n_out) * cost.flops + _pairs(prob) * 2.0 * prob.n_params * _out_factor(prob)
    return CostEstimate("jacobian", flops, mem, tile, mem <= prob.budget)


def _estimate_ntvp(prob: _Problem, cost: _ForwardCost) -> tuple[CostEstimate, int]:
    """NTVP: ``c`` Gram columns at a time, each a parameter tangent and a JVP through the x1 tile.

    Memory ``c O (2 P + 3 t A) e + t^2 e`` for tile t, chunk c, A activations per example.
    """
    e, o, p, act = prob.itemsize, prob.n_out, prob.n_params, cost.activations
    n_max = max(prob.n1, prob.n2)
    per_pair = (prob.n_out**2 if prob.full else 1) * e
    tile = _tile_fit(2.0 * o * p * e, 1.5 * o * act * e, per_pair, prob.budget, n_max)
    per_column = o * (2.0 * p + 3.0 * tile * act) * e
    chunk = int(max(1, min(tile, (prob.budget - tile * tile * per_pair) // per_column)))
    column_flops = 3.0 * o * cost.flops
    flops = _pairs(prob) * column_flops + _n_rows_computed(prob, tile, False) * column_flops
    mem = int(chunk * per_column + tile * tile * per_pair)
    return CostEstimate("ntvp", flops, mem, tile, mem <= prob.budget), chunk


def _estimates(
    prob: _Problem, structured: bool = True
) -> tuple[dict[str, CostEstimate], _structured.StructuredPlan | None, int]:
    """Every method's estimate, the structured method's plan (routes per parameter) and the NTVP chunk.

    ``structured=True``: the plan's two traced forward passes also count the forward cost of an example (no
    separate counting pass unless the trace cannot count it). ``structured=False``: no plan (the model is not
    traced), the cost is counted by :func:`_forward_cost`, and there is no estimate for ``"structured"``.
    """
    plan = _structured._plan(prob) if structured else None
    cost = plan._forward if plan is not None and plan._forward is not None else _forward_cost(prob)
    est = {"jacobian": _estimate_jacobian(prob, cost)}
    est["ntvp"], chunk = _estimate_ntvp(prob, cost)
    if plan is not None:
        est["structured"] = plan.estimate
    return est, plan, chunk


def _pick(estimates: dict[str, CostEstimate]) -> str:
    ok = [e for e in estimates.values() if e.feasible] or list(estimates.values())
    return min(ok, key=lambda e: (e.flops, e.memory)).method


def select_method(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None = None,
    *,
    output: Output = "trace",
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    memory_budget: int | None = None,
) -> MethodChoice:
    """The method ``empirical_ntk(..., method="auto")`` would use, with its FLOP and memory estimates.

    Each method's FLOPs follow the cost model of Novak et al. (2022):
    feature maps (forward/backward passes, per-example Jacobians) per example
    plus a per-pair contraction; memory is the working set of the tile size
    that fits ``memory_budget``. The cheapest method within the budget wins.
    ``print(select_method(...))`` shows the comparison.

    Parameters
    ----------
    model : torch.nn.Module
        The network, as for :func:`empirical_ntk`.
    x1, x2 : torch.Tensor, numpy.ndarray, tuple, list or dict, shape (n1, ...) and (n2, ...)
        The inputs, as for :func:`empirical_ntk`: one tensor (``model(x1)``), a
        tuple or list of tensors (``model(*x1)``) or a dict of tensors
        (``model(**x1)``), the examples along dimension 0 of each; integer and
        bool tensors (token ids, masks) are kept, floating ones cast to
        ``dtype`` (``x2=None``: ``x2 = x1``).
    output : {"trace", "full"}
        The kernel asked for, as for :func:`empirical_ntk`.
    dtype, device : torch.dtype, torch.device or str, optional
        Compute dtype and device (default: the model's).
    memory_budget : int, optional
        Bytes for features and per-tile workspace (default :data:`DEFAULT_MEMORY_BUDGET`).

    Returns
    -------
    MethodChoice
        The method, its tile size and every method's :class:`CostEstimate`.

    Examples
    --------
    >>> import torch
    >>> from ntk_core import TwoLayerNet, select_method
    >>> choice = select_method(TwoLayerNet(d=784, width=1000), torch.zeros(100, 784))
    >>> choice.method in ("jacobian", "ntvp", "structured")
    True
    >>> sorted(choice.estimates)
    ['jacobian', 'ntvp', 'structured']
    """
    prob = _make_problem(model, x1, x2, output, dtype, device, memory_budget)
    est, _, _ = _estimates(prob)
    best = _pick(est)
    return MethodChoice(best, est[best].tile_size, est)


# --------------------------------------------------------------------------- tiles, checkpoints


def _blocks(n: int, tile: int) -> list[slice]:
    return [slice(s, min(s + tile, n)) for s in range(0, n, tile)]


def _tile_pairs(n_rows: int, n_cols: int, symmetric: bool) -> Iterator[tuple[int, int]]:
    for i in range(n_rows):
        for j in range(i if symmetric else 0, n_cols):
            yield i, j


def _probe(prob: _Problem, k: int = 4) -> str:
    """Fingerprint of the function the model computes: its outputs f(θ, x) on the first ``k`` inputs and the
    gradient of Σ v·f (a fixed v), rounded to 24 significant bits so that other kernels' last bits agree.

    The class name and ``repr`` of a model do not change when its ``forward`` does (a factor, relu → tanh), nor
    do its parameters; what it computes does, in value or in gradient.
    """
    with torch.enable_grad():
        params = {n: p.detach().clone().requires_grad_(True) for n, p in prob.params.items()}
        out = prob.forward(params, _rows(prob.x1, slice(None, k)))
        v = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype, device=out.device).reshape(out.shape)
        grads = torch.autograd.grad((out * v).sum(), list(params.values()), allow_unused=True)
    parts = [out.detach()] + [g for g in grads if g is not None]
    flat = np.concatenate([t.detach().double().cpu().numpy().ravel() for t in parts])
    mantissa, exponent = np.frexp(flat)
    return _store.fingerprint(np.ldexp(np.round(mantissa * 2.0**24) / 2.0**24, exponent))


def _identity(prob: _Problem, method: str, tile: int, out_dtype: torch.dtype) -> dict[str, Any]:
    """Everything that determines the tiles: model (and what it computes), parameters, constants, inputs,
    method, dtypes, geometry."""
    return {
        "artifact": "empirical_ntk tile",
        "model": {
            "class": f"{type(prob.model).__module__}.{type(prob.model).__qualname__}",
            "architecture": _store.fingerprint(repr(prob.model)),
            "function": _probe(prob),
        },
        "params": {n: _store.fingerprint(t) for n, t in sorted(prob.params.items())},
        "consts": {n: _store.fingerprint(t) for n, t in sorted(prob.consts.items())},
        "x1": _map_inputs(_store.fingerprint, prob.x1),  # one tensor: its fingerprint, as before multiple inputs
        "x2": "x1" if prob.symmetric else _map_inputs(_store.fingerprint, prob.x2),
        "method": method,
        "full": prob.full,
        "n_out": prob.n_out,
        "dtype": str(prob.dtype),
        "out_dtype": str(out_dtype),
        "tile_size": tile,
        "n1": prob.n1,
        "n2": prob.n2,
    }


class _TileStore:
    """Finished tiles, one :mod:`ntk_core._store` file each, under a folder named by the identity's hash.

    Every tile file carries the full identity (plus its index) and the checksum,
    shape, dtype and finiteness of its numbers, all verified when it is loaded:
    a tile of another identity is recomputed (never mixed in); a damaged tile
    (truncated, altered bytes, NaN, wrong shape or dtype) is named in a
    :class:`~ntk_core._store.DamagedArtifactWarning`, moved aside and recomputed.
    """

    def __init__(self, root: str | os.PathLike[str], identity: dict[str, Any], meta: dict[str, Any]) -> None:
        self.identity = identity
        self.dir = Path(root) / _store.fingerprint(identity)[:32]
        self.dir.mkdir(parents=True, exist_ok=True)
        meta_path = self.dir / "meta.json"
        if not meta_path.exists():  # for people browsing the folder; never read back
            _store.atomic_write_bytes(meta_path, json.dumps(meta, indent=1).encode())

    def _path(self, i: int, j: int) -> Path:
        return self.dir / f"tile_{i:05d}_{j:05d}.npz"

    def load(self, i: int, j: int, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor | None:
        np_dtype = torch.empty((), dtype=dtype).numpy().dtype
        found = _store.load(self._path(i, j), {**self.identity, "tile": [i, j]}, expect={"tile": (shape, np_dtype)})
        return None if found is None else torch.from_numpy(found.arrays["tile"].copy())

    def save(self, i: int, j: int, tile: Tensor) -> None:
        _store.save(self._path(i, j), {**self.identity, "tile": [i, j]}, arrays={"tile": tile.cpu().numpy()})


def _place(result: Tensor, rows: slice, cols: slice, tile: Tensor, mirror: bool) -> None:
    result[rows, cols] = tile
    if mirror:
        result[cols, rows] = tile.transpose(0, 1).transpose(2, 3) if tile.ndim == 4 else tile.T


@dataclass
class _FeatureSource:
    """Features of row/column tiles, computed lazily, columns kept if the engine caches them."""

    engine: _Engine
    prob: _Problem
    rows: list[slice]
    cols: list[slice]
    _row: tuple[int, Any] | None = None
    _cols: dict[int, Any] = field(default_factory=dict)

    def row(self, i: int) -> Any:
        if self._row is None or self._row[0] != i:
            cached = self._cols.get(i) if self.prob.symmetric else None
            feats = cached if cached is not None else self.engine.features(_rows(self.prob.x1, self.rows[i]))
            self._row = (i, feats)
        return self._row[1]

    def col(self, j: int) -> Any:
        if self.prob.symmetric and self._row is not None and self._row[0] == j:
            feats = self._row[1]
        elif j in self._cols:
            return self._cols[j]
        else:
            feats = self.engine.features(_rows(self.prob.x2, self.cols[j]))
        if self.engine.cache_columns:
            self._cols[j] = feats
        return feats


def _compute_tile(source: _FeatureSource, i: int, j: int, out_dtype: torch.dtype) -> Tensor:
    """Tile ``(i, j)`` of the Gram matrix as a CPU tensor of ``out_dtype``; NaN or Inf is an error."""
    with torch.enable_grad():
        block = source.engine.kernel(source.row(i), source.col(j)).to(device="cpu", dtype=out_dtype)
    if not bool(torch.isfinite(block).all()):
        raise ValueError(
            f"tile ({i}, {j}) of the Gram matrix holds NaN or Inf: the model's output or its "
            f"gradient is not finite on these inputs (at dtype {source.prob.dtype})"
        )
    return block


def _run_tiles(
    prob: _Problem,
    engine: _Engine,
    tile: int,
    out_dtype: torch.dtype,
    store: _TileStore | None,
    progress: bool,
    callback: Callable[[int, int, bool], None] | None,
) -> Tensor:
    n1, n2 = prob.n1, prob.n2
    shape = (n1, n2, prob.n_out, prob.n_out) if prob.full else (n1, n2)
    extra = shape[2:]
    result = torch.empty(shape, dtype=out_dtype)
    rows, cols = _blocks(n1, tile), _blocks(n2, tile)
    pairs = list(_tile_pairs(len(rows), len(cols), prob.symmetric))
    source = _FeatureSource(engine, prob, rows, cols)
    bar = tqdm(pairs, desc=f"empirical_ntk[{engine.name}]", unit="tile", disable=not progress)
    with torch.no_grad():
        for i, j in bar:
            tile_shape = (rows[i].stop - rows[i].start, cols[j].stop - cols[j].start, *extra)
            block = store.load(i, j, tile_shape, out_dtype) if store is not None else None
            computed = block is None
            if block is None:
                block = _compute_tile(source, i, j, out_dtype)
                if store is not None:
                    store.save(i, j, block)
            _place(result, rows[i], cols[j], block, prob.symmetric and i != j)
            if callback is not None:
                callback(i, j, computed)
    return result


# --------------------------------------------------------------------------- public entry point


def empirical_ntk(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None = None,
    *,
    method: NTKMethod = "auto",
    output: Output = "trace",
    tile_size: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    progress: bool = False,
    out_dtype: torch.dtype | None = None,
    memory_budget: int | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    callback: Callable[[int, int, bool], None] | None = None,
) -> Tensor:
    """Empirical NTK Gram matrix ``k(x, x') = <∇θ f(θ, x), ∇θ f(θ, x')>`` (paper, Section 3.2).

    Parameters
    ----------
    model : torch.nn.Module
        The network f at its current parameters θ. Only parameters with
        ``requires_grad=True`` are differentiated (frozen layers, as in the
        paper's Appendix D, are constants). The model is not modified, and its
        mode is used as it is: a kernel is a property of a fixed function, so a
        model in training mode with an active Dropout (p > 0) or any BatchNorm
        (or a BatchNorm without running statistics, in any mode) is refused;
        call ``model.eval()`` first. Models without such layers give the same
        kernel in either mode.
    x1, x2 : torch.Tensor, numpy.ndarray, tuple, list or dict, shape (n1, ...) and (n2, ...)
        The model's inputs, the examples along dimension 0: one tensor
        ``(n1, *features)``, passed as ``model(x1)``; a tuple or list of
        tensors, passed as positional arguments ``model(*x1)`` (e.g.
        ``(x, mask)``); or a dict of tensors, passed as keyword arguments
        ``model(**x1)``. Every tensor holds the same n1 examples. Floating
        tensors are cast to ``dtype``; integer and bool tensors (token ids for
        an ``nn.Embedding``, masks) are passed as they are. NaN and Inf are
        refused in floating tensors. ``x2`` has the structure of ``x1`` (the
        same tuple length or dict keys, and per entry the same feature shape
        and dtype, floating dtypes aside); ``x2=None`` means ``x2 = x1`` and
        only the upper triangle of tiles is computed.
    method : {"auto", "jacobian", "ntvp", "structured"}
        ``"jacobian"``, ``"ntvp"``, ``"structured"`` or ``"auto"`` (the cheapest
        by estimated FLOPs within the memory budget; see :func:`select_method`,
        and the INFO log of this module for what was picked).
    output : {"trace", "full"}
        ``"trace"``: ``(n1, n2)``, **summed** over the O outputs (the
        ``torch.func`` tutorial's convention; neural-tangents averages).
        ``"full"``: ``(n1, n2, O, O)``. Scalar-output models give ``(n1, n2)``.
    tile_size : int, optional
        Rows/columns per tile (default: the largest that fits ``memory_budget``);
        the result does not depend on it.
    dtype, device : torch.dtype, torch.device or str, optional
        Compute dtype (float32/float64; default: the model's) and device
        (default: the model's). The model is evaluated with its parameters cast
        to ``dtype`` and moved to ``device``.
    progress : bool
        Show a tqdm progress bar over tiles.
    out_dtype : torch.dtype, optional
        dtype of the returned CPU tensor (default: ``dtype``); e.g. float32
        compute with a float64 result.
    memory_budget : int, optional
        Bytes for features and per-tile workspace (default 2 GiB), excluding the
        result. No ``(n, P)`` Jacobian of the whole data set is ever formed.
    checkpoint_dir : str or os.PathLike, optional
        If given, finished tiles are saved there (atomically, one checksummed
        file each, see :mod:`ntk_core._store`) with their identity: the model's
        class and architecture, the fingerprints of its parameters, buffers and
        of the inputs, the method, output, dtypes and tile geometry. A rerun
        after an interruption loads the tiles instead of recomputing them, after
        verifying identity and integrity: a tile of another identity is never
        used; a damaged one (truncated, altered, NaN, wrong shape or dtype) is
        named in a ``DamagedArtifactWarning``, moved aside and recomputed, so
        the result always equals an uninterrupted run's.
    callback : callable, optional
        Called as ``callback(i, j, computed)`` after tile ``(i, j)`` is placed;
        ``computed`` is False when it came from the checkpoint.

    Returns
    -------
    torch.Tensor
        On CPU, shape ``(n1, n2)`` or ``(n1, n2, O, O)``.

    Raises
    ------
    ValueError
        Bad inputs or options (entries of ``x1`` with different numbers of
        examples, ``x2`` of another structure or feature shape, NaN); a model
        that is not one fixed per-example function (Dropout or BatchNorm in
        training mode: call ``model.eval()``).
    TypeError
        Inputs that are not tensors or arrays (or a tuple, list or dict of
        them), complex inputs, ``x2`` of another kind or dtype than ``x1``.

    Examples
    --------
    The kernel of a two-layer network of Setting 1 on four inputs: a symmetric
    ``(4, 4)`` matrix, the same whichever exact method computes it.

    >>> import torch
    >>> from ntk_core import TwoLayerNet, empirical_ntk
    >>> net = TwoLayerNet(d=5, width=256, seed=0)
    >>> x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    >>> K = empirical_ntk(net, x)
    >>> K.shape, K.dtype
    (torch.Size([4, 4]), torch.float32)
    >>> torch.allclose(K, K.T)
    True
    >>> torch.allclose(K, empirical_ntk(net, x, method="jacobian"), atol=1e-5)
    True

    A test-versus-train block, computed in float64:

    >>> x_test = torch.randn(2, 5, generator=torch.Generator().manual_seed(1))
    >>> empirical_ntk(net, x_test, x, dtype=torch.float64).shape
    torch.Size([2, 4])

    Token ids and a padding mask, passed as ``model(ids, mask)``:

    >>> from torch import nn
    >>> class Bag(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.emb, self.head = nn.Embedding(10, 8), nn.Linear(8, 1)
    ...     def forward(self, ids, mask):
    ...         m = mask.unsqueeze(-1).to(self.head.weight.dtype)
    ...         return self.head((self.emb(ids) * m).sum(1) / m.sum(1))
    >>> ids = torch.tensor([[1, 2, 0], [3, 4, 5]])
    >>> mask = torch.tensor([[True, True, False], [True, True, True]])
    >>> empirical_ntk(Bag(), (ids, mask)).shape
    torch.Size([2, 2])
    """
    run = _prepare(model, x1, x2, method, output, tile_size, dtype, device, out_dtype, memory_budget)
    store = None
    if checkpoint_dir is not None:
        store = _TileStore(checkpoint_dir, _identity(run.prob, run.method, run.tile, run.out_dtype), run.meta(output))
    try:
        return _run_tiles(run.prob, run.engine(), run.tile, run.out_dtype, store, progress, callback)
    except NotImplementedError as exc:
        if run.method != "ntvp":
            raise
        raise NotImplementedError(
            f"method='ntvp' needs forward-mode derivatives (torch.func.jvp), which an operation of this model does "
            f"not have in torch ({exc}); use method='jacobian' (or 'auto', which takes the cheapest that runs)"
        ) from exc


@dataclass
class _Run:
    """One Gram matrix to compute: the problem, the method and its tile size, the result's dtype."""

    prob: _Problem
    method: str
    tile: int
    out_dtype: torch.dtype
    plan: _structured.StructuredPlan | None  # the structured method's routes (None for the other methods)
    chunk: int  # Gram columns per NTVP batch

    def engine(self) -> _Engine:
        """The chosen method's engine."""
        if self.method == "jacobian":
            return _JacobianEngine(self.prob)
        if self.method == "ntvp":
            return _NTVPEngine(self.prob, self.chunk)
        if self.plan is None:
            raise AssertionError("the structured method needs its plan")
        return _structured._OperationEngine(self.prob, self.plan)

    def meta(self, output: str) -> dict[str, Any]:
        """What a checkpoint folder's ``meta.json`` shows (never read back)."""
        n1, n2 = self.prob.n1, self.prob.n2
        return {"method": self.method, "output": output, "tile_size": self.tile, "n1": n1, "n2": n2}


def _prepare(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None,
    method: str,
    output: str,
    tile_size: int | None,
    dtype: torch.dtype | None,
    device: torch.device | str | None,
    out_dtype: torch.dtype | None,
    memory_budget: int | None,
    announce: bool = True,
) -> _Run:
    """Check the arguments, estimate every method and choose one; ``announce``: log the choice (INFO)."""
    check_choice(method, "method", ("auto", *METHODS))
    prob = _make_problem(model, x1, x2, output, dtype, device, memory_budget)
    out_dt = _resolve_dtype(out_dtype, model, "out_dtype") if out_dtype is not None else prob.dtype
    if tile_size is not None:
        check_count(tile_size, "tile_size")
    if method == "jacobian":  # its tile needs no FLOP count: no extra forward pass, no trace
        return _Run(prob, method, tile_size or _jacobian_tile(prob)[0], out_dt, None, 0)
    # the model is traced for the structured rule only where that method may run
    est, plan, chunk = _estimates(prob, structured=method in ("auto", "structured"))
    chosen = _pick(est) if method == "auto" else method
    if announce and method == "auto":
        log.info("%s", MethodChoice(chosen, est[chosen].tile_size, est))
    if announce and chosen == "structured":
        log.info("%s", plan)
    return _Run(prob, chosen, tile_size or est[chosen].tile_size, out_dt, plan, chunk)


# The structured method's engine lives in structured.py, which builds on this module's problem set-up, cost
# models and tiles; imported last (at module level, so that code fingerprints follow it), once those exist.
from . import structured as _structured  # noqa: E402
