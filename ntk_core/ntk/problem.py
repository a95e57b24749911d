"""The empirical NTK's base: inputs, the problem of one Gram matrix, the forward cost and per-example Jacobians.

Every method of :func:`ntk_core.ntk.empirical_ntk` starts here: the inputs checked and brought to one form
(one tensor, a tuple or a dict of tensors, examples along dimension 0), the trained parameters split from the
constants, the model checked to be one fixed per-example function, the cost of one forward pass, and the
per-example Jacobians ``J(x) = ∇θ f(θ, x)`` (``vmap(jacrev)``) that the ``"jacobian"`` method contracts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap

from .._checks import as_float64_array, check_choice, check_count
from .._typing import ArrayLike

__all__ = [
    *["METHODS", "OUTPUTS", "DEFAULT_MEMORY_BUDGET", "Inputs", "InputsLike", "NTKMethod", "jacobian_features"],
    "output_sensitivity",
    *["SelectedOutput", "select_output"],
]


#: The exact methods of :func:`~ntk_core.ntk.empirical_ntk` (``method="auto"`` picks one of them).
METHODS: tuple[str, ...] = ("jacobian", "ntvp", "structured")


#: What :func:`~ntk_core.ntk.empirical_ntk` returns for K outputs, the trace (n1, n2) or the full (n1, n2, K, K) kernel.
OUTPUTS: tuple[str, ...] = ("trace", "full")


#: Bytes of working memory a tile of :func:`~ntk_core.ntk.empirical_ntk` may use by default (2 GiB).
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


#: The ``method`` argument of :func:`~ntk_core.ntk.empirical_ntk`.
NTKMethod = Literal["auto", "jacobian", "ntvp", "structured"]


Output = Literal["trace", "full"]


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
    # a NaN or an infinity anywhere makes the sum NaN or infinite: one pass where the sum is finite (the
    # common case), the element-wise test only where the sum is not (a NaN, an infinity, or an overflow)
    if torch.is_floating_point(x) and not (bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all())):
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

    The path without a tape (and the fallback where the structured plan's tape cannot count the FLOPs, see
    :func:`ntk_core.ntk.structured._taped_cost`).
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


def _contract_jacobians(j1: Tensor, j2: Tensor, full: bool) -> Tensor:
    """``J1: (b1, O, p)``, ``J2: (b2, O, p)`` -> ``(b1, b2)`` summed over O, or ``(b1, b2, O, O)``."""
    if full:
        return torch.einsum("iap,jbp->ijab", j1, j2)
    return j1.reshape(j1.shape[0], -1) @ j2.reshape(j2.shape[0], -1).T


def _per_example_jacobians(prob: _Problem, names: list[str], x: Inputs) -> dict[str, Tensor]:
    """``vmap(jacrev)`` Jacobians of the named parameters: name -> ``(b, O, p)``."""
    diff = {n: prob.params[n] for n in names}
    rest = {n: t for n, t in prob.params.items() if n not in diff}

    def f_one(p: dict[str, Tensor], xi: Inputs) -> Tensor:
        return prob.forward({**rest, **p}, _batch_of_one(xi))[0]

    jac = vmap(jacrev(f_one), in_dims=(None, 0))(diff, x)
    return {n: j.reshape(_n_examples(x), prob.n_out, -1) for n, j in jac.items()}


def jacobian_features(model: nn.Module, x: ArrayLike) -> np.ndarray:
    """The feature matrix Z of Section 4: row i is φ(x_i)ᵀ = ∇_θ f(θ(0), x_i)ᵀ over the trained parameters.

    Shape ``(n, P)``, float64, so that Z Zᵀ is the empirical NTK. Only for small
    models (the whole Jacobian is formed); use :func:`ntk_core.ntk.empirical_ntk`
    for Gram matrices.

    Parameters
    ----------
    model : torch.nn.Module
        A small network.
    x : ArrayLike, shape (n, ...)
        Inputs.

    Returns
    -------
    numpy.ndarray, shape (n, P)

    Raises
    ------
    ValueError
        A model with more than one output per example, or not one fixed
        per-example function (as for :func:`ntk_core.ntk.empirical_ntk`).
    """
    prob = _make_problem(model, torch.as_tensor(as_float64_array(x, "x")), None, "trace", torch.float64, "cpu", None)
    if prob.n_out != 1:
        raise ValueError(f"model must have one output per example (the features of f: R^d -> R), got {prob.n_out}")
    jac = _per_example_jacobians(prob, list(prob.params), prob.x1)  # name -> (n, 1, p)
    return torch.cat([j.reshape(j.shape[0], -1) for j in jac.values()], dim=1).numpy()


def output_sensitivity(model: nn.Module, x: InputsLike, *, chunk: int = 16) -> float:
    """Mean over examples and outputs of ‖∇_θ f_c(θ, x_i)‖₁: how far one sign step of every trained parameter
    moves an output — the scale AUX's λ follows under Adam.

    Adam normalises every step, so while example i is in the batch a parameter moves by about the learning rate
    whatever its gradient, and an output by up to lr·‖∇_θ f_c‖₁; λb_i (eq. (4)) races that. Measured on MNIST
    (``benchmarks/bench_aux_lambda_adam.py``), the λ chosen for AUX under Adam lay between 0.02 and 5 times this
    value at initialisation, and did not rescale with the learning rate or the epochs.

    Parameters
    ----------
    model : torch.nn.Module
        The network at initialisation (any inputs :func:`ntk_core.ntk.empirical_ntk` takes).
    x : torch.Tensor, numpy.ndarray, tuple, list or dict, shape (n, ...)
        A few hundred training inputs.
    chunk : int
        Examples whose Jacobians are formed at once (float32 memory: ``chunk`` × outputs × parameters × 4 bytes).

    Returns
    -------
    float

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Linear(3, 2, bias=False)
    >>> x = torch.tensor([[1.0, -2.0, 0.5]])
    >>> output_sensitivity(net, x)       # ∇_W f_c = x in row c: ‖x‖₁ = 3.5 for each output
    3.5
    """
    chunk = check_count(chunk, "chunk")
    prob = _make_problem(model, x, None, "trace", None, None, None)
    n = _n_examples(prob.x1)
    total = 0.0
    for start in range(0, n, chunk):
        jac = _per_example_jacobians(prob, list(prob.params), _rows(prob.x1, slice(start, start + chunk)))
        total += float(sum(j.abs().sum(dtype=torch.float64) for j in jac.values()))
    return total / (n * prob.n_out)


class SelectedOutput(nn.Module):
    """A model returning a tuple or dict of outputs, restricted to one of them (:func:`select_output`)."""

    def __init__(self, model: nn.Module, key: int | str) -> None:
        super().__init__()
        self.model, self.key = model, key

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        out = self.model(*args, **kwargs)
        if isinstance(out, Tensor):
            raise TypeError(f"the model returns one tensor: there is no output {self.key!r} to select")
        try:
            picked = out[self.key]
        except (KeyError, IndexError, TypeError):
            have = list(out) if isinstance(out, dict) else f"indices 0 to {len(out) - 1}"
            raise ValueError(f"the model's outputs have no {self.key!r}: it has {have}") from None
        if not isinstance(picked, Tensor):
            raise TypeError(f"the model's output {self.key!r} is a {type(picked).__name__}, not a tensor")
        return picked

    def extra_repr(self) -> str:
        return f"key={self.key!r}"


def select_output(model: nn.Module, key: int | str) -> SelectedOutput:
    """``model`` with one of its outputs: for a model that returns a tuple (``key`` an index) or a dict (``key`` a
    name) of tensors, the module whose output is ``model(...)[key]``, whose NTK
    :func:`~ntk_core.ntk.empirical_ntk` computes.
    The parameters are the model's own (shared, not copied).

    Examples
    --------
    >>> import torch
    >>> from ntk_core.ntk import empirical_ntk, select_output
    >>> class TwoHeads(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.body, self.a, self.b = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1), torch.nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         h = torch.tanh(self.body(x))
    ...         return {"score": self.a(h), "logits": self.b(h)}
    >>> empirical_ntk(select_output(TwoHeads(), "logits"), torch.randn(5, 3)).shape
    torch.Size([5, 5])
    """
    if not isinstance(key, (int, str)) or isinstance(key, bool):
        raise TypeError(f"key must be an output's index (int) or name (str), got {key!r}")
    return SelectedOutput(model, key)
