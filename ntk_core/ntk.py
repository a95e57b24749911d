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
    For a layer ``y_t = W u_t`` (``nn.Linear``; ``nn.Conv2d`` through its
    patches ``u_t = unfold(a)_t``) the parameter gradient of output ``o`` is
    ``sum_t g^o_t u_t^T`` with ``g^o_t`` the output cotangent, so the
    layer's NTK contribution is
    ``sum_{t,s} <u_t(x), u_s(x')> <g^o_t(x), g^o_s(x')>``; for a dense layer
    on flat inputs this is ``(U U^T) ⊙ (G G^T)`` and never forms the
    ``d_out × d_in`` per-example gradients. Where that is dearer (large
    spatial maps, where the ``T^2`` position pairs dominate) the layer, like
    every trainable parameter without a structured rule, falls back to
    Jacobian contraction, for those parameters only.

Conventions
-----------
* ``output="trace"`` returns ``K[i, j] = sum_o <∇f_o(x1_i), ∇f_o(x2_j)>`` —
  **summed** over the O outputs, as the ``torch.func`` tutorial does
  (neural-tangents' ``trace_axes`` *averages*, i.e. divides by O).
  ``output="full"`` returns ``K[i, j, a, b] = <∇f_a(x1_i), ∇f_b(x2_j)>``.
  A model with one output per example (shape ``(b,)`` or ``(b, 1)``) gives
  ``(n1, n2)`` either way.
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
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, jacrev, jvp, vjp, vmap
from tqdm import tqdm  # the console bar: no ipywidgets needed in notebooks

from . import _store

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the alias is for annotations only (never imported at run time)
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

Method = Literal["auto", "jacobian", "ntvp", "structured"]
Output = Literal["trace", "full"]


# --------------------------------------------------------------------------- problem set-up


@dataclass
class _Problem:
    """Everything a method needs: functional parameters, inputs, shapes."""

    model: nn.Module
    params: dict[str, Tensor]
    consts: dict[str, Tensor]
    x1: Tensor
    x2: Tensor
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

    def forward(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        """Model output as ``(b, O)``."""
        out = functional_call(self.model, (params, self.consts), (x,))
        return out.reshape(x.shape[0], -1)


def _as_tensor(x: ArrayLike, name: str) -> Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(f"{name} must have a floating-point dtype (float32 or float64), got {x.dtype}")
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError(f"{name} must have shape (n, *features) with n >= 1, got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or infinite values; all inputs must be finite")
    return x


def _check_choice(value: Any, name: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


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
    x1: ArrayLike,
    x2: ArrayLike | None,
    output: str,
    dtype: torch.dtype | None,
    device: torch.device | str | None,
    memory_budget: int | None,
) -> _Problem:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    _check_choice(output, "output", OUTPUTS)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters (all have requires_grad=False); the NTK would be zero")
    _check_fixed_function(model)
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"memory_budget must be a positive int (bytes), got {memory_budget!r}")
    dt = _resolve_dtype(dtype, model)
    dev = _resolve_device(device, model)
    t1 = _as_tensor(x1, "x1")
    t2 = t1 if x2 is None else _as_tensor(x2, "x2")
    if t2.shape[1:] != t1.shape[1:]:
        raise ValueError(
            f"x1 and x2 must have the same feature shape, got {tuple(t1.shape[1:])} and {tuple(t2.shape[1:])}"
        )
    params, consts = _split_parameters(model, dt, dev)
    t1 = t1.to(device=dev, dtype=dt)
    t2 = t1 if x2 is None else t2.to(device=dev, dtype=dt)
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
    probe = prob.x1[: min(2, prob.x1.shape[0])]
    with torch.no_grad():
        out = functional_call(prob.model, (prob.params, prob.consts), (probe,))
    if not isinstance(out, Tensor) or out.ndim < 1 or out.shape[0] != probe.shape[0]:
        shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(
            f"model must map a batch of b inputs to a tensor of shape (b,) or (b, *out); "
            f"for b={probe.shape[0]} it returned {shape}"
        )
    return int(out[0].numel())


# --------------------------------------------------------------------------- model profile


@dataclass
class _Layer:
    """A Linear/Conv2d module handled by structured derivatives: ``y_t = W u_t (+ b)``."""

    name: str
    module: nn.Module
    weight: str | None  # functional name of the weight if trainable
    bias: str | None  # functional name of the bias if trainable
    positions: int = 1  # T, the number of positions t sharing W
    d_in: int = 0
    d_out: int = 0
    route: str = "gram"  # "gram": (U U^T)(G G^T); "grad": per-example Jacobians (vmap(jacrev))


@dataclass
class _Profile:
    layers: list[_Layer]
    fallback: list[str]
    forward_flops: float  # per example
    activations: float  # numbers output by leaf modules, per example


def _plain_linear(m: nn.Module) -> bool:
    return isinstance(m, nn.Linear) and type(m).forward is nn.Linear.forward


def _plain_conv(m: nn.Module) -> bool:
    return (
        isinstance(m, nn.Conv2d)
        and type(m).forward is nn.Conv2d.forward
        and m.groups == 1
        and m.padding_mode == "zeros"
        and isinstance(m.padding, tuple)
    )


def _candidate_layers(prob: _Problem) -> list[_Layer]:
    """Linear/Conv2d modules with a trainable parameter, not sharing parameters with others."""
    owners: dict[int, int] = {}
    for _, m in prob.model.named_modules(remove_duplicate=False):
        for p in m.parameters(recurse=False):
            owners[id(p)] = owners.get(id(p), 0) + 1
    layers = []
    for name, m in prob.model.named_modules():
        if not (_plain_linear(m) or _plain_conv(m)):
            continue
        if any(owners[id(p)] > 1 for p in m.parameters(recurse=False)):
            continue
        prefix = f"{name}." if name else ""
        w = prefix + "weight" if prefix + "weight" in prob.params else None
        b = prefix + "bias" if m.bias is not None and prefix + "bias" in prob.params else None
        if w or b:
            layers.append(_Layer(name, m, w, b))
    return layers


def _profile(prob: _Problem) -> _Profile:
    """Run one example through the model to find layer shapes, call counts and FLOPs."""
    layers = _candidate_layers(prob)
    calls: dict[str, list[tuple[torch.Size, torch.Size]]] = {l.name: [] for l in layers}
    handles = [
        l.module.register_forward_hook(lambda m, inp, out, _n=l.name: calls[_n].append((inp[0].shape, out.shape)))
        for l in layers
    ]
    sizes: list[int] = []
    handles += [
        m.register_forward_hook(lambda m, inp, out: sizes.append(out.numel() if isinstance(out, Tensor) else 0))
        for m in prob.model.modules()
        if not list(m.children())
    ]
    try:
        flops = _count_flops(prob, prob.x1[:1])
    finally:
        for h in handles:
            h.remove()
    kept = []
    for l in layers:
        if len(calls[l.name]) != 1:
            continue  # called several times (or never): weight sharing, use the fallback
        in_shape, out_shape = calls[l.name][0]
        _set_layer_shape(l, in_shape, out_shape)
        kept.append(l)
    owned = {n for l in kept for n in (l.weight, l.bias) if n}
    fallback = [n for n in prob.params if n not in owned]
    return _Profile(kept, fallback, max(flops, 2.0 * prob.n_params), float(max(sum(sizes), 1)))


def _set_layer_shape(layer: _Layer, in_shape: torch.Size, out_shape: torch.Size) -> None:
    m = layer.module
    if isinstance(m, nn.Linear):
        layer.d_in, layer.d_out = m.in_features, m.out_features
        layer.positions = math.prod(out_shape[1:-1]) if len(out_shape) > 2 else 1
    else:
        assert isinstance(m, nn.Conv2d)
        layer.d_in = m.in_channels * math.prod(m.kernel_size)
        layer.d_out = m.out_channels
        layer.positions = math.prod(out_shape[2:])


def _count_flops(prob: _Problem, x: Tensor) -> float:
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


def _contract_gram(u1: Tensor, g1: Tensor, u2: Tensor, g2: Tensor, full: bool) -> Tensor:
    """Structured contribution of one layer from patches ``u (b, T, d_in)`` and cotangents ``g (b, T, O, d_out)``.

    ``K[i, j, a, b] = sum_{t, s} <u1_it, u2_js> <g1_it^a, g2_js^b>``.
    """
    if u1.shape[1] == 1:
        uu = u1[:, 0] @ u2[:, 0].T
        if full:
            return uu[:, :, None, None] * torch.einsum("iac,jbc->ijab", g1[:, 0], g2[:, 0])
        return uu * (g1.reshape(g1.shape[0], -1) @ g2.reshape(g2.shape[0], -1).T)
    if full:  # _plan never routes T > 1 layers here in full mode
        raise AssertionError("full output with T > 1 uses per-example gradients")
    uu = torch.einsum("itd,jsd->ijts", u1, u2)
    gg = torch.einsum("itk,jsk->ijts", g1.flatten(2), g2.flatten(2))
    return (uu * gg).sum(dim=(2, 3))


# --------------------------------------------------------------------------- methods


class _Engine(Protocol):
    name: str
    cache_columns: bool

    def features(self, x: Tensor) -> Any: ...

    def kernel(self, f1: Any, f2: Any) -> Tensor: ...


def _per_example_jacobians(prob: _Problem, names: list[str], x: Tensor) -> dict[str, Tensor]:
    """``vmap(jacrev)`` Jacobians of the named parameters: name -> ``(b, O, p)``."""
    diff = {n: prob.params[n] for n in names}
    rest = {n: t for n, t in prob.params.items() if n not in diff}

    def f_one(p: dict[str, Tensor], xi: Tensor) -> Tensor:
        return prob.forward({**rest, **p}, xi.unsqueeze(0))[0]

    jac = vmap(jacrev(f_one), in_dims=(None, 0))(diff, x)
    return {n: j.reshape(x.shape[0], prob.n_out, -1) for n, j in jac.items()}


@dataclass
class _JacobianEngine:
    """Method "jacobian": per-example Jacobians of all parameters, contracted."""

    prob: _Problem
    name: str = "jacobian"
    cache_columns: bool = False

    def features(self, x: Tensor) -> dict[str, Tensor]:
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

    def features(self, x: Tensor) -> Tensor:
        return x

    def kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        prob, params = self.prob, self.prob.params

        def column(xj: Tensor, cot: Tensor) -> Tensor:
            pullback = vjp(lambda p: prob.forward(p, xj.unsqueeze(0))[0], params)[1]
            (tangent,) = pullback(cot)
            return jvp(lambda p: prob.forward(p, x1), (params,), (tangent,))[1]

        basis = torch.eye(prob.n_out, dtype=prob.dtype, device=prob.device)
        cols = vmap(vmap(column, in_dims=(None, 0)), in_dims=(0, None), chunk_size=self.chunk)(x2, basis)
        k = cols.permute(2, 0, 3, 1)  # (j, b, i, a) -> (i, j, a, b)
        return k if prob.full else torch.diagonal(k, dim1=2, dim2=3).sum(-1)


@dataclass
class _LayerFeatures:
    grams: list[tuple[Tensor, Tensor]] = field(default_factory=list)  # (U, G) per gram-route layer
    jacobians: list[Tensor] = field(default_factory=list)  # (b, O, p) blocks


@dataclass
class _StructuredEngine:
    """Method "structured": layer inputs and output cotangents, fallback Jacobians."""

    prob: _Problem
    profile: _Profile
    cache_columns: bool = False
    name: str = "structured"

    def features(self, x: Tensor) -> _LayerFeatures:
        feats = _LayerFeatures()
        layers = _gram_layers(self.profile)
        if layers:
            for layer, (u, g) in zip(layers, _capture_layers(self.prob, layers, x)):
                _layer_features(layer, u, g, feats)
        jac_names = _jacobian_parameters(self.prob, self.profile)
        if jac_names:
            feats.jacobians += _per_example_jacobians(self.prob, jac_names, x).values()
        return feats

    def kernel(self, f1: _LayerFeatures, f2: _LayerFeatures) -> Tensor:
        full = self.prob.full
        terms = [_contract_gram(u1, g1, u2, g2, full) for (u1, g1), (u2, g2) in zip(f1.grams, f2.grams)]
        terms += [_contract_jacobians(j1, j2, full) for j1, j2 in zip(f1.jacobians, f2.jacobians)]
        return torch.stack(terms).sum(0) if len(terms) > 1 else terms[0]


def _gram_layers(profile: _Profile) -> list[_Layer]:
    return [l for l in profile.layers if l.route == "gram"]


def _jacobian_parameters(prob: _Problem, profile: _Profile) -> list[str]:
    """Parameters handled by Jacobian contraction: no structured rule, or layers routed to "grad"."""
    grad_layers = {n for l in profile.layers if l.route == "grad" for n in (l.weight, l.bias) if n}
    return [n for n in prob.params if n in grad_layers or n in profile.fallback]


def _capture_layers(prob: _Problem, layers: list[_Layer], x: Tensor) -> list[tuple[Tensor, Tensor]]:
    """Per layer: patches ``u (b, T, d_in)`` and output cotangents ``g (b, T, O, d_out)``.

    A forward hook records each layer's input and adds a zero "probe" tensor to
    its output; the gradient of ``sum_i f_o(x_i)`` with respect to the probe is
    the cotangent of output o for every example at once (examples do not
    interact). No parameter gradient is computed.
    """
    store: dict[str, tuple[Tensor, Tensor]] = {}

    def hook(name: str) -> Callable[..., Tensor]:
        def fn(module: nn.Module, inputs: tuple[Tensor, ...], out: Tensor) -> Tensor:
            probe = torch.zeros_like(out, requires_grad=True)
            store[name] = (inputs[0].detach(), probe)
            return out + probe

        return fn

    handles = [l.module.register_forward_hook(hook(l.name)) for l in layers]
    try:
        with torch.enable_grad():
            out = prob.forward(prob.params, x)
            probes = [store[l.name][1] for l in layers]
            cots = [_cotangents(out[:, o], probes, o < prob.n_out - 1) for o in range(prob.n_out)]
    finally:
        for h in handles:
            h.remove()
    result = []
    for k, layer in enumerate(layers):
        g = torch.stack([c[k] for c in cots], dim=1)  # (b, O, *out_shape)
        result.append((_patches(layer, store[layer.name][0]), _positions_last(layer, g)))
    return result


def _cotangents(out_o: Tensor, probes: list[Tensor], retain: bool) -> list[Tensor]:
    grads = torch.autograd.grad(out_o.sum(), probes, retain_graph=retain, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for g, p in zip(grads, probes)]


def _patches(layer: _Layer, a: Tensor) -> Tensor:
    """Layer input as ``(b, T, d_in)``: ``y_t = W u_t``."""
    m = layer.module
    if isinstance(m, nn.Linear):
        return a.reshape(a.shape[0], -1, layer.d_in)
    assert isinstance(m, nn.Conv2d) and isinstance(m.padding, tuple)  # _plain_conv: numeric padding only
    cols = F.unfold(a, m.kernel_size, dilation=m.dilation, padding=m.padding, stride=m.stride)
    return cols.transpose(1, 2)


def _positions_last(layer: _Layer, g: Tensor) -> Tensor:
    """Cotangents ``(b, O, *out)`` as ``(b, T, O, d_out)``."""
    b, o = g.shape[:2]
    if isinstance(layer.module, nn.Linear):
        return g.reshape(b, o, -1, layer.d_out).transpose(1, 2)
    return g.reshape(b, o, layer.d_out, -1).permute(0, 3, 1, 2)


def _layer_features(layer: _Layer, u: Tensor, g: Tensor, feats: _LayerFeatures) -> None:
    if layer.weight is not None:
        feats.grams.append((u, g))
    if layer.bias is not None:  # the bias gradient is sum_t g_t
        feats.jacobians.append(g.sum(dim=1))


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
    n1, n2 = prob.x1.shape[0], prob.x2.shape[0]
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
    n1, n2 = prob.x1.shape[0], prob.x2.shape[0]
    if cached:
        return n1 if prob.symmetric else n1 + n2
    row_tiles = math.ceil(n1 / tile)
    return n1 + (row_tiles * (row_tiles - 1) / 2 * tile if prob.symmetric else row_tiles * n2)


def _estimate_jacobian(prob: _Problem, prof: _Profile) -> CostEstimate:
    e, o, p = prob.itemsize, prob.n_out, prob.n_params
    n_max = max(prob.x1.shape[0], prob.x2.shape[0])
    per_row = 2.0 * o * p * e  # Jacobian plus its reverse-mode workspace
    per_pair = 2.0 * e * (prob.n_out**2 if prob.full else 1)
    tile = _tile_fit(0, per_row, per_pair, prob.budget, n_max)
    rows = _n_rows_computed(prob, tile, cached=False)
    flops = rows * (1 + 2 * o) * prof.forward_flops + _pairs(prob) * 2.0 * p * _out_factor(prob)
    mem = int(2 * tile * per_row + tile * tile * per_pair)
    return CostEstimate("jacobian", flops, mem, tile, mem <= prob.budget)


def _estimate_ntvp(prob: _Problem, prof: _Profile) -> tuple[CostEstimate, int]:
    """NTVP: ``c`` Gram columns at a time, each a parameter tangent and a JVP through the x1 tile.

    Memory ``c O (2 P + 3 t A) e + t^2 e`` for tile t, chunk c, A activations per example.
    """
    e, o, p, act = prob.itemsize, prob.n_out, prob.n_params, prof.activations
    n_max = max(prob.x1.shape[0], prob.x2.shape[0])
    per_pair = (prob.n_out**2 if prob.full else 1) * e
    tile = _tile_fit(2.0 * o * p * e, 1.5 * o * act * e, per_pair, prob.budget, n_max)
    per_column = o * (2.0 * p + 3.0 * tile * act) * e
    chunk = int(max(1, min(tile, (prob.budget - tile * tile * per_pair) // per_column)))
    column_flops = 3.0 * o * prof.forward_flops
    flops = _pairs(prob) * column_flops + _n_rows_computed(prob, tile, False) * column_flops
    mem = int(chunk * per_column + tile * tile * per_pair)
    return CostEstimate("ntvp", flops, mem, tile, mem <= prob.budget), chunk


def _plan_routes(prob: _Problem, prof: _Profile) -> None:
    """Per layer, pick ``(U U^T) ⊙ (G G^T)`` or per-example gradients, whichever costs fewer FLOPs."""
    n1, n2 = prob.x1.shape[0], prob.x2.shape[0]
    pairs, rows, o = _pairs(prob), (n1 if prob.symmetric else n1 + n2), prob.n_out
    for l in prof.layers:
        t, di, do = l.positions, l.d_in, l.d_out
        if t > 1 and prob.full:
            l.route = "grad"
            continue
        gram = pairs * 2.0 * t * t * (di + _out_factor(prob) * do)
        grad = rows * 2.0 * o * t * di * do + pairs * 2.0 * _out_factor(prob) * di * do  # as Jacobian rows
        l.route = "gram" if gram <= grad else "grad"


def _structured_sizes(prob: _Problem, prof: _Profile) -> tuple[float, float, float]:
    """(FLOPs per example of features, bytes per example of features, FLOPs per pair)."""
    o, e, of = prob.n_out, prob.itemsize, _out_factor(prob)
    feat_flops, feat_bytes, pair_flops = 0.0, 0.0, 0.0
    grams = _gram_layers(prof)
    if grams:
        feat_flops += (1 + o) * prof.forward_flops  # forward with hooks, O backward passes to activations
    for l in grams:
        t, di, do = l.positions, l.d_in, l.d_out
        feat_bytes += t * (di + o * do) * e  # captured u and g
        pair_flops += 2.0 * t * t * (di + of * do) if l.weight is not None else 0.0
        pair_flops += 2.0 * of * do if l.bias is not None else 0.0
    n_jac = sum(prob.params[n].numel() for n in _jacobian_parameters(prob, prof))
    if n_jac:
        feat_flops += (1 + 2 * o) * prof.forward_flops
        feat_bytes += 2.0 * o * n_jac * e
        pair_flops += 2.0 * of * n_jac
    return feat_flops, feat_bytes, pair_flops


def _estimate_structured(prob: _Problem, prof: _Profile) -> tuple[CostEstimate, bool]:
    _plan_routes(prob, prof)
    feat_flops, feat_bytes, pair_flops = _structured_sizes(prob, prof)
    e = prob.itemsize
    n_max = max(prob.x1.shape[0], prob.x2.shape[0])
    per_pair = e * (4.0 * max((l.positions**2 for l in prof.layers if l.route == "gram"), default=1))
    per_pair += e * 2 * (prob.n_out**2 if prob.full else 1)
    col_bytes = prob.x2.shape[0] * feat_bytes
    cached = col_bytes <= prob.budget / 2
    tile = _tile_fit(col_bytes if cached else 0.0, feat_bytes, per_pair, prob.budget, n_max)
    rows = _n_rows_computed(prob, tile, cached)
    flops = rows * feat_flops + _pairs(prob) * pair_flops
    mem = int((col_bytes if cached else 0) + 2 * tile * feat_bytes + tile * tile * per_pair)
    return CostEstimate("structured", flops, mem, tile, mem <= prob.budget), cached


def _estimates(prob: _Problem) -> tuple[dict[str, CostEstimate], _Profile, int, bool]:
    prof = _profile(prob)
    jac = _estimate_jacobian(prob, prof)
    ntvp, chunk = _estimate_ntvp(prob, prof)
    struct, cached = _estimate_structured(prob, prof)
    return {"jacobian": jac, "ntvp": ntvp, "structured": struct}, prof, chunk, cached


def _pick(estimates: dict[str, CostEstimate]) -> str:
    ok = [e for e in estimates.values() if e.feasible] or list(estimates.values())
    return min(ok, key=lambda e: (e.flops, e.memory)).method


def select_method(
    model: nn.Module,
    x1: Tensor | np.ndarray,
    x2: Tensor | np.ndarray | None = None,
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
    x1, x2 : torch.Tensor or numpy.ndarray, shape (n1, ...) and (n2, ...)
        The inputs (``x2=None``: ``x2 = x1``).
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
    est, _, _, _ = _estimates(prob)
    best = _pick(est)
    return MethodChoice(best, est[best].tile_size, est)


# --------------------------------------------------------------------------- tiles, checkpoints


def _blocks(n: int, tile: int) -> list[slice]:
    return [slice(s, min(s + tile, n)) for s in range(0, n, tile)]


def _tile_pairs(n_rows: int, n_cols: int, symmetric: bool) -> Iterator[tuple[int, int]]:
    for i in range(n_rows):
        for j in range(i if symmetric else 0, n_cols):
            yield i, j


def _identity(prob: _Problem, method: str, tile: int, out_dtype: torch.dtype) -> dict[str, Any]:
    """Everything that determines the tiles: model, parameters, constants, inputs, method, dtypes, geometry."""
    return {
        "artifact": "empirical_ntk tile",
        "model": {
            "class": f"{type(prob.model).__module__}.{type(prob.model).__qualname__}",
            "architecture": _store.fingerprint(repr(prob.model)),
        },
        "params": {n: _store.fingerprint(t) for n, t in sorted(prob.params.items())},
        "consts": {n: _store.fingerprint(t) for n, t in sorted(prob.consts.items())},
        "x1": _store.fingerprint(prob.x1),
        "x2": "x1" if prob.symmetric else _store.fingerprint(prob.x2),
        "method": method,
        "full": prob.full,
        "n_out": prob.n_out,
        "dtype": str(prob.dtype),
        "out_dtype": str(out_dtype),
        "tile_size": tile,
        "n1": prob.x1.shape[0],
        "n2": prob.x2.shape[0],
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
            feats = cached if cached is not None else self.engine.features(self.prob.x1[self.rows[i]])
            self._row = (i, feats)
        return self._row[1]

    def col(self, j: int) -> Any:
        if self.prob.symmetric and self._row is not None and self._row[0] == j:
            feats = self._row[1]
        elif j in self._cols:
            return self._cols[j]
        else:
            feats = self.engine.features(self.prob.x2[self.cols[j]])
        if self.engine.cache_columns:
            self._cols[j] = feats
        return feats


def _run_tiles(
    prob: _Problem,
    engine: _Engine,
    tile: int,
    out_dtype: torch.dtype,
    store: _TileStore | None,
    progress: bool,
    callback: Callable[[int, int, bool], None] | None,
) -> Tensor:
    n1, n2 = prob.x1.shape[0], prob.x2.shape[0]
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
                with torch.enable_grad():
                    block = engine.kernel(source.row(i), source.col(j)).to(device="cpu", dtype=out_dtype)
                if not bool(torch.isfinite(block).all()):
                    raise ValueError(
                        f"tile ({i}, {j}) of the Gram matrix holds NaN or Inf: the model's output or its "
                        f"gradient is not finite on these inputs (at dtype {prob.dtype})"
                    )
                if store is not None:
                    store.save(i, j, block)
            _place(result, rows[i], cols[j], block, prob.symmetric and i != j)
            if callback is not None:
                callback(i, j, computed)
    return result


# --------------------------------------------------------------------------- public entry point


def empirical_ntk(
    model: nn.Module,
    x1: Tensor | np.ndarray,
    x2: Tensor | np.ndarray | None = None,
    *,
    method: Method = "auto",
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
    x1, x2 : ArrayLike, shape (n1, ...) and (n2, ...)
        Inputs of shape ``(n1, *features)`` and ``(n2, *features)``; ``x2=None``
        means ``x2 = x1`` and only the upper triangle of tiles is computed.
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
        Bad inputs or options; a model that is not one fixed per-example
        function (Dropout or BatchNorm in training mode: call ``model.eval()``).

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
    """
    method = _check_choice(method, "method", ("auto", *METHODS))  # type: ignore[assignment]
    prob = _make_problem(model, x1, x2, output, dtype, device, memory_budget)
    out_dt = _resolve_dtype(out_dtype, model, "out_dtype") if out_dtype is not None else prob.dtype
    if tile_size is not None and (isinstance(tile_size, bool) or not isinstance(tile_size, int) or tile_size < 1):
        raise ValueError(f"tile_size must be a positive int or None, got {tile_size!r}")
    est, prof, chunk, cached = _estimates(prob)
    chosen = _pick(est) if method == "auto" else method
    if method == "auto":
        log.info("%s", MethodChoice(chosen, est[chosen].tile_size, est))
    tile = tile_size or est[chosen].tile_size
    engine = _make_engine(chosen, prob, prof, chunk, cached)
    store = None
    if checkpoint_dir is not None:
        identity = _identity(prob, chosen, tile, out_dt)
        meta = {"method": chosen, "output": output, "tile_size": tile, "n1": prob.x1.shape[0], "n2": prob.x2.shape[0]}
        store = _TileStore(checkpoint_dir, identity, meta)
    return _run_tiles(prob, engine, tile, out_dt, store, progress, callback)


def _make_engine(method: str, prob: _Problem, prof: _Profile, chunk: int, cached: bool) -> _Engine:
    if method == "jacobian":
        return _JacobianEngine(prob)
    if method == "ntvp":
        return _NTVPEngine(prob, chunk)
    return _StructuredEngine(prob, prof, cache_columns=cached)
