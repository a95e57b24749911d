r"""Structured NTK derivatives found from the operations a model runs, whatever the weight layout.

The ``"structured"`` method of :func:`ntk_core.ntk.empirical_ntk` (which
``method="auto"`` picks when its estimate is the cheapest) is this module's
engine. It finds its layers from the **operations** one forward pass runs, not
from module types: a :class:`torch.overrides.TorchFunctionMode`
watches every call that touches a trained parameter (a parameter with
``requires_grad=True``) and recognises

* bilinear uses ``h_out = h_in · W``: ``F.linear``, ``matmul`` / ``@`` (the
  parameter on either side, transposed or not: ``x @ W.T``, ``x @ W``,
  ``W @ x``), ``mm``, ``bmm`` and ``addmm``, two-operand ``einsum`` (including
  block-diagonal weights such as per-head matrices) and ``conv1d`` /
  ``conv2d`` / ``conv3d`` (any stride, padding, dilation and groups);
* additive uses (biases): ``h + b``, ``h - b``, the bias of ``linear``,
  ``addmm`` and convolutions;
* layout and scale steps between the parameter and its use (``.T``, ``.t()``,
  ``transpose``, ``permute``, ``reshape``, ``view``, indexing, ``chunk``,
  ``expand``, multiplication or division by a constant number, ...): they
  are followed by applying the same step to a tensor of element indices, so
  the use's weight is always known as ``scale * param.flatten()[idx]``.

For a bilinear use written in canonical form ``h_out[t, g, k] =
sum_d u[t, g, d] W[g, d, k]`` (``t`` positions shared by the weight — the
sequence positions of ``x @ W.T`` on ``(b, T, d)`` inputs, the patches of a
convolution —, ``g`` blocks of a block-diagonal weight), the gradient of
output ``o`` is ``sum_t u_t ⊗ δ^o_t`` with ``δ`` the cotangent at ``h_out``,
found for all examples at once by a zero "probe" added to ``h_out``. The
parameter's NTK contribution is then

.. math::
    \Theta_W(x, x')_{ab} &= \sum_g \sum_{t, s}
        \langle u_{tg}(x), u_{sg}(x') \rangle\\
        &\qquad\cdot\langle \delta^a_{tg}(x), \delta^b_{sg}(x') \rangle ,

for a dense layer on flat inputs ``(U U'^T) ⊙ (Δ Δ'^T)``: the per-example
Jacobians are never formed (route ``"gram"``). A parameter used several
times with the same layout (weight sharing) has its uses concatenated along
``t``, which gives the cross terms between the uses; uses of disjoint parts of
one parameter simply add. Where the ``T^2`` position pairs make the pairwise
rule dear (convolutions on large maps) — or where the uses of a parameter
overlap in other layouts, or it also has additive uses — the per-example
gradients ``sum_t u_t ⊗ δ_t`` are formed instead, by im2col for convolutions,
contracted in example chunks (route ``"grad"``, about one forward pass of that
layer per output). A cost model (Novak, Sohl-Dickstein & Schoenholz,
"Fast Finite Width Neural Tangent Kernel", ICML 2022) picks the route per
parameter. A trained parameter that reaches any other operation (an
elementwise function of it, a norm, a product of two parameters, an operand
without the example axis first, ...) is handled by per-example Jacobians
(``vmap(jacrev)``), for that parameter only (route ``"jacobian"``). Frozen
parameters and buffers are constants.

Conventions are those of :func:`ntk_core.ntk.empirical_ntk`: ``output="trace"``
gives ``(n1, n2)`` **summed** over the O outputs, ``output="full"`` gives
``(n1, n2, O, O)``; a one-output model gives ``(n1, n2)``; the model is
never modified and must be one fixed function that treats examples
independently (evaluation mode for Dropout/BatchNorm); the result is a CPU
tensor. The model's examples must travel along the leading axis of every
activation that meets a weight (checked on two batch sizes; a use where it
does not falls back to Jacobians).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from .cost import _n_rows_computed, _out_factor, _pairs, _tile_fit, CostEstimate
from .flops import flop_rule, func_name, parse_einsum
from .problem import (
    _contract_jacobians,
    _forward_cost,
    _ForwardCost,
    _leaf_output_hooks,
    _make_problem,
    _n_examples,
    _per_example_jacobians,
    _Problem,
    _rows,
    Inputs,
    InputsLike,
    Output,
)

__all__ = ["ROUTES", "ParameterRoute", "StructuredPlan", "plan_structured"]


#: The ways a trained parameter is differentiated, in order of preference (the pairwise structured rule,
#: per-example gradients from each use's input and cotangent, per-example Jacobians by ``vmap(jacrev)``).
ROUTES: tuple[str, ...] = ("gram", "grad", "jacobian")


class _Unsupported(Exception):
    """A tracked parameter meets an operation without a structured rule."""


@dataclass
class _Ref:
    """A tensor equal to ``scale * param.flatten()[idx]`` (idx has the tensor's shape)."""

    name: str
    idx: Tensor
    scale: float
    injective: bool = True  # no element of the parameter appears twice


@dataclass
class _Use:
    """One use of a parameter in a taped call.

    Bilinear: ``grad_W = scale * sum_t u_t ⊗ δ_t`` in the canonical layout
    ``idx (G, D, K)``; ``u(a) -> (b, T, G, D)``, ``g(cot) -> (b, T, G, O, K)``.
    Additive: ``grad = scale * g(cot)`` with ``g(cot) -> (b, O, numel(idx))``.
    """

    name: str
    kind: str  # "bilinear" or "additive"
    call: int
    idx: Tensor
    scale: float
    dims: tuple[int, int, int, int] = (1, 1, 1, 1)  # T, G, D, K (bilinear)
    act: Tensor | None = None  # raw activation operand (capture only)
    u_of: Callable[[Tensor], Tensor] | None = None
    g_of: Callable[[Tensor], Tensor] | None = None
    injective: bool = True
    grad_of: Callable[[Tensor, Tensor], Tensor] | None = None  # (act, cot) -> (b, O, G, D, K), if cheaper

    def signature(self) -> tuple[Any, ...]:
        return (self.kind, self.dims if self.kind == "bilinear" else tuple(self.idx.shape))


_LAYOUT = {
    "t",
    "T",
    "mT",
    "transpose",
    "swapaxes",
    "swapdims",
    "permute",
    "reshape",
    "view",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "contiguous",
    "expand",
    "expand_as",
    "__getitem__",
    "narrow",
    "select",
    "chunk",
    "split",
    "tensor_split",
    "unbind",
    "movedim",
    "moveaxis",
    "view_as",
    "reshape_as",
    "repeat",
    "tile",
    "flip",
    "roll",
    "clone",
    "broadcast_to",
}


_REPEATING = {"expand", "expand_as", "repeat", "tile", "broadcast_to"}


_CASTS = {"to", "float", "double", "type_as", "type"}


_MUL = {"mul", "__mul__", "__rmul__", "multiply"}


_DIV = {"div", "__truediv__", "true_divide", "divide"}


_NEG = {"neg", "__neg__", "negative"}


_ADD = {"add", "__add__", "__radd__"}


_SUB = {"sub", "__sub__", "subtract"}


_MATMUL = {"matmul", "__matmul__", "mm", "bmm"}


_CONV = {"conv1d": 1, "conv2d": 2, "conv3d": 3}


def _tensors(obj: Any) -> list[Tensor]:
    """The tensors in ``obj`` (nested tuples, lists and dicts, as torch functions take and return them), in order.

    Called on every operation of a taped forward pass: a plain recursion, several times faster than
    ``torch.utils._pytree.tree_flatten`` (40 % of a plan's time on the Setting 2 CNN).
    """
    found: list[Tensor] = []
    _collect(obj, found)
    return found


def _collect(obj: Any, found: list[Tensor]) -> None:
    if isinstance(obj, Tensor):
        found.append(obj)
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            _collect(item, found)
    elif isinstance(obj, dict):
        for item in obj.values():
            _collect(item, found)


class _Tape(TorchFunctionMode):
    """The tape of one forward pass: follows the trained parameters through it and keeps their uses.

    ``capture=True`` also keeps each use's activation operand and adds a zero
    probe (``requires_grad``) to the output of every call with a use of a
    parameter in ``keep``; the probe's gradient is the cotangent there.
    ``count=True`` also adds up the forward FLOPs of every call in ``flops``
    (see :func:`ntk_core.ntk.flops.flop_rule`; NaN where a call's FLOPs are not countable).
    """

    def __init__(
        self,
        params: dict[str, Tensor],
        aranges: dict[str, Tensor],
        batch: int,
        capture: bool = False,
        keep: set[str] | None = None,
        taps: bool = False,
        count: bool = False,
    ) -> None:
        super().__init__()
        self.taps = taps
        self.count = count
        self.flops = 0.0
        self.versions: list[int] = []
        self.refs: dict[int, tuple[Tensor, _Ref]] = {id(t): (t, _Ref(n, aranges[n], 1.0)) for n, t in params.items()}
        self.batch = batch
        self.capture = capture
        self.keep = keep
        self.uses: list[_Use] = []
        self.unsupported: dict[str, str] = {}
        self.probes: list[Tensor | None] = []
        self.out_shapes: list[tuple[int, ...]] = []

    # -- helpers
    def _ref(self, obj: Any) -> _Ref | None:
        if isinstance(obj, Tensor):
            hit = self.refs.get(id(obj))
            if hit is not None and hit[0] is obj:
                return hit[1]
        return None

    def _track(self, tensor: Tensor, ref: _Ref) -> None:
        self.refs[id(tensor)] = (tensor, ref)

    def _act(self, a: Any, what: str) -> Tensor:
        if not isinstance(a, Tensor) or self._ref(a) is not None:
            raise _Unsupported(f"{what}: the other operand is not an activation")
        if a.ndim < 1 or a.shape[0] != self.batch:
            raise _Unsupported(f"{what}: the activation operand does not carry the examples on its first axis")
        return a

    def _count(self, func: Any, args: Any, kwargs: Any, result: Any) -> None:
        rule = flop_rule(func)
        if rule is not None:
            try:
                self.flops += rule(args, kwargs, result)
            except Exception:  # noqa: BLE001 - a call whose FLOPs cannot be read: the count is not to be trusted
                self.flops = math.nan

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        refs = [r for r in (self._ref(t) for t in _tensors((args, kwargs))) if r is not None]
        if not refs:
            result = func(*args, **kwargs)
            if self.count:
                self._count(func, args, kwargs, result)
            return result
        name = func_name(func)
        result = func(*args, **kwargs)
        if self.count:
            self._count(func, args, kwargs, result)
        if not _tensors(result):
            return result  # metadata (shape, dtype, ...)
        try:
            return self._handle(name, func, args, kwargs, refs, result)
        except _Unsupported as why:
            for r in refs:
                self.unsupported.setdefault(r.name, str(why))
            return result
        except Exception as why:  # noqa: BLE001 - any failure to follow an op means "no rule"
            for r in refs:
                self.unsupported.setdefault(r.name, f"{name}: {type(why).__name__}: {why}")
            return result

    # -- dispatch
    def _handle(self, name: str, func: Any, args: Any, kwargs: Any, refs: list[_Ref], result: Any) -> Any:
        if name in _LAYOUT or name in _CASTS:
            return self._layout(name, func, args, kwargs, result)
        if name in _MUL | _DIV | _NEG:
            return self._scale(name, args, kwargs, result)
        if name in _ADD | _SUB:
            return self._add(name, args, kwargs, result)
        if name in _MATMUL:
            a, b = args[0], args[1]
            if len(args) > 2 or kwargs:
                raise _Unsupported(f"{name} with extra arguments")
            return self._matmul(name, a, b, result)
        if name == "linear":
            return self._linear(args, kwargs, result)
        if name == "addmm":
            return self._addmm(args, kwargs, result)
        if name == "einsum":
            return self._einsum(args, kwargs, result)
        if name in _CONV:
            return self._conv(_CONV[name], args, kwargs, result)
        if name in ("batch_norm", "layer_norm"):
            return self._norm(name, func, args, kwargs, result)
        raise _Unsupported(f"used by {name}, which has no structured rule")

    def _layout(self, name: str, func: Any, args: Any, kwargs: Any, result: Any) -> Any:
        src = self._ref(args[0])
        if src is None or any(self._ref(t) is not None for t in _tensors((args[1:], kwargs))):
            raise _Unsupported(f"{name} of a parameter by another parameter")
        outs = _tensors(result)
        if name in _CASTS:
            if len(outs) != 1 or outs[0].dtype != args[0].dtype or outs[0].shape != args[0].shape:
                raise _Unsupported(f"{name} changes the dtype of a parameter")
            self._track(outs[0], _Ref(src.name, src.idx, src.scale, src.injective))
            return result
        idx_out = _tensors(func(src.idx, *args[1:], **kwargs))
        if len(idx_out) != len(outs) or any(i.shape != o.shape for i, o in zip(idx_out, outs)):
            raise _Unsupported(f"{name} could not be followed")
        injective = src.injective and name not in _REPEATING
        if name == "__getitem__":
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            injective = injective and all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in index)
        for i, o in zip(idx_out, outs):
            self._track(o, _Ref(src.name, i, src.scale, injective))
        return result

    def _scale(self, name: str, args: Any, kwargs: Any, result: Tensor) -> Tensor:
        if kwargs:
            raise _Unsupported(f"{name} with keyword arguments")
        if name in _NEG:
            src, factor = self._ref(args[0]), -1.0
        else:
            x, y = args[0], args[1]
            src, other = (self._ref(x), y) if self._ref(x) is not None else (self._ref(y), x)
            if name in _DIV and self._ref(x) is None:
                raise _Unsupported("division by a parameter")
            if name in _MUL and isinstance(other, Tensor) and other.ndim > 0 and self._ref(other) is None:
                assert src is not None  # an elementwise product with an activation: a diagonal weight
                a = self._act(other, name)
                if tuple(a.shape) != tuple(result.shape):
                    raise _Unsupported(f"{name}: the parameter broadcasts the activation")
                aligned = (1,) * (a.ndim - src.idx.ndim) + tuple(src.idx.shape)
                return self._finish(result, [self._elementwise(src, a, aligned, 1.0)])
            if isinstance(other, Tensor):
                if other.ndim != 0 or other.requires_grad or self._ref(other) is not None:
                    raise _Unsupported(f"{name} of a parameter by a tensor")
                c = float(other)
            elif isinstance(other, (int, float)) and not isinstance(other, bool):
                c = float(other)
            else:
                raise _Unsupported(f"{name} of a parameter by {type(other).__name__}")
            factor = 1.0 / c if name in _DIV else c
        assert src is not None
        self._track(result, _Ref(src.name, src.idx, src.scale * factor, src.injective))
        return result

    # -- uses
    def _new_call(self, out: Tensor) -> int:
        self.probes.append(None)
        self.versions.append(-1)
        self.out_shapes.append(tuple(out.shape))
        return len(self.probes) - 1

    def modified(self) -> bool:
        """Whether a tapped output was changed in place after its call (its cotangent would be the wrong one)."""
        return any(p is not None and p._version != v for p, v in zip(self.probes, self.versions))

    def _finish(self, out: Tensor, uses: list[_Use]) -> Tensor:
        if out.ndim < 1 or out.shape[0] != self.batch:
            raise _Unsupported("the output of the use does not carry the examples on its first axis")
        call = self._new_call(out)
        kept = False
        for u in uses:
            u.call = call
            self.uses.append(u)
            kept = kept or self.keep is None or u.name in self.keep
        if self.capture and kept:
            if self.taps:  # the output itself is differentiated: no copy (see _GRADIENT_TAPS)
                if not out.requires_grad:
                    out.requires_grad_(True)  # a leaf: nothing before it is differentiated
                self.probes[call] = out
                self.versions[call] = out._version
                return out
            probe = torch.zeros_like(out, requires_grad=True)
            self.probes[call] = probe
            return out + probe
        for u in uses:
            if not self.capture or (self.keep is not None and u.name not in self.keep):
                u.act = None
        return out

    def _additive(self, ref: _Ref, b_shape: tuple[int, ...], out_shape: tuple[int, ...], scale: float) -> _Use:
        """A use ``out = ... + scale * B`` with ``B`` (shape b_shape, aligned right) broadcast over ``out``."""
        nd = len(out_shape)
        if len(b_shape) > nd:
            raise _Unsupported("a bias with more axes than the output")
        full = (1,) * (nd - len(b_shape)) + tuple(b_shape)
        if full[0] != 1:
            raise _Unsupported("an added parameter indexed by example")
        sum_dims = tuple(i + 1 for i in range(1, nd) if full[i] == 1 and out_shape[i] != 1)
        numel = ref.idx.numel()

        def g_of(cot: Tensor) -> Tensor:  # cot (b, O, *out[1:])
            red = cot.sum(dim=sum_dims, keepdim=True) if sum_dims else cot
            return red.reshape(cot.shape[0], cot.shape[1], numel)

        return _Use(ref.name, "additive", -1, ref.idx.reshape(-1), ref.scale * scale, g_of=g_of)

    def _bilinear(self, ref: _Ref, w_idx: Tensor, a: Tensor, sa: str, sw: str, so: str, scale: float) -> _Use:
        """A use ``out = einsum(sa, sw -> so)(a, W)`` with ``a`` the activation (example letter ``sa[0]``)."""
        for s in (sa, sw, so):
            if len(set(s)) != len(s):
                raise _Unsupported("an einsum with a repeated index")
        bl = sa[0]
        if not so or so[0] != bl or bl in sw:
            raise _Unsupported("the example axis is not the leading axis of the output")
        tl = [c for c in sa[1:] if c in so and c not in sw]
        gl = [c for c in sa[1:] if c in so and c in sw]
        dl = [c for c in sa[1:] if c not in so and c in sw]
        xl = [c for c in sa[1:] if c not in so and c not in sw]
        kl = [c for c in sw if c in so and c not in sa]
        if any(c not in sa and c not in so for c in sw):
            raise _Unsupported("an einsum that sums the weight over an index")
        size = {c: int(a.shape[i]) for i, c in enumerate(sa)}
        size.update({c: int(w_idx.shape[i]) for i, c in enumerate(sw)})
        t, g, d, k = (math.prod(size[c] for c in group) for group in (tl, gl, dl, kl))
        idx = w_idx.permute([sw.index(c) for c in gl + dl + kl]).reshape(g, d, k)
        a_perm = [0] + [sa.index(c) for c in tl + gl + dl + xl]
        n_x = len(xl)

        def u_of(act: Tensor) -> Tensor:
            v = act.permute(a_perm)
            if n_x:
                v = v.sum(dim=tuple(range(v.ndim - n_x, v.ndim)))
            return v.reshape(act.shape[0], t, g, d)

        g_perm = [0] + [so.index(c) + 1 for c in tl + gl] + [1] + [so.index(c) + 1 for c in kl]

        def g_of(cot: Tensor) -> Tensor:  # cot (b, O, *out[1:])
            return cot.permute(g_perm).reshape(cot.shape[0], t, g, cot.shape[1], k)

        return _Use(
            ref.name, "bilinear", -1, idx, ref.scale * scale, (t, g, d, k), a.detach(), u_of, g_of, ref.injective
        )

    def _elementwise(self, ref: _Ref, a: Tensor, aligned: tuple[int, ...], scale: float) -> _Use:
        """A use ``out = a * W`` with ``W`` (shape ``aligned``, as broadcast against ``a``): a diagonal weight."""
        nd = a.ndim
        if len(aligned) != nd or aligned[0] != 1 or any(w not in (1, s) for w, s in zip(aligned, a.shape)):
            raise _Unsupported("an elementwise product that broadcasts the activation or indexes the examples")
        letters = string.ascii_letters[:nd]
        keep = [i for i in range(1, nd) if aligned[i] != 1 or a.shape[i] == 1]
        w_idx = ref.idx.reshape([aligned[i] for i in keep])
        return self._bilinear(ref, w_idx, a, letters, "".join(letters[i] for i in keep), letters, scale)

    def _norm(self, name: str, func: Any, args: Any, kwargs: Any, result: Tensor) -> Tensor:
        """Evaluation-mode batch_norm and layer_norm: ``out = xhat * weight + bias`` with xhat free of parameters."""
        keys: tuple[str, ...]
        if name == "batch_norm":
            keys = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")
        else:
            keys = ("input", "normalized_shape", "weight", "bias", "eps")
        vals = dict(zip(keys, args)) | dict(kwargs)
        if name == "batch_norm" and bool(vals.get("training", False)):
            raise _Unsupported("batch_norm in training mode")
        x, w, b = vals["input"], vals.get("weight"), vals.get("bias")
        if any(self._ref(vals.get(k)) is not None for k in keys if k not in ("weight", "bias")):
            raise _Unsupported(f"{name} with a trained parameter as input or statistics")
        a = self._act(x, name)
        nd = a.ndim
        plain = dict(vals, weight=None, bias=None)
        xhat = func(*[plain[k] for k in keys if k in plain])
        uses = []
        rw, rb = self._ref(w), self._ref(b)
        for ref, additive in ((rw, False), (rb, True)):
            if ref is None:
                continue
            shape = tuple(ref.idx.shape)
            aligned = (1, shape[0]) + (1,) * (nd - 2) if name == "batch_norm" else (1,) * (nd - len(shape)) + shape
            if additive:
                uses.append(self._additive(ref, aligned[1:], tuple(result.shape), 1.0))
            else:
                uses.append(self._elementwise(ref, xhat, aligned, 1.0))
        return self._finish(result, uses)

    def _matmul(self, name: str, x: Any, y: Any, result: Tensor) -> Tensor:
        rx, ry = self._ref(x), self._ref(y)
        if rx is not None and ry is not None:
            raise _Unsupported(f"{name} of two parameters")
        right = ry is not None
        ref = ry if right else rx
        assert ref is not None
        a = self._act(x if right else y, name)
        sa, sw, so, w_idx = _matmul_letters(tuple(a.shape), ref.idx, right)
        return self._finish(result, [self._bilinear(ref, w_idx, a, sa, sw, so, 1.0)])

    def _linear(self, args: Any, kwargs: Any, result: Tensor) -> Tensor:
        names = ("input", "weight", "bias")
        vals = dict(zip(names, args)) | dict(kwargs)
        x, w, b = vals.get("input"), vals.get("weight"), vals.get("bias")
        a = self._act(x, "linear")
        uses = []
        rw, rb = self._ref(w), self._ref(b)
        if rw is not None:
            sw = "kd" if rw.idx.ndim == 2 else "d"
            mid = string.ascii_letters[26 : 26 + a.ndim - 2]
            sa = "b" + mid + "d"
            so = "b" + mid + ("k" if rw.idx.ndim == 2 else "")
            uses.append(self._bilinear(rw, rw.idx, a, sa, sw, so, 1.0))
        if rb is not None:
            uses.append(self._additive(rb, tuple(rb.idx.shape), tuple(result.shape), 1.0))
        return self._finish(result, uses)

    def _addmm(self, args: Any, kwargs: Any, result: Tensor) -> Tensor:
        vals = dict(zip(("input", "mat1", "mat2"), args)) | dict(kwargs)
        beta, alpha = float(vals.get("beta", 1.0)), float(vals.get("alpha", 1.0))
        inp, m1, m2 = vals["input"], vals["mat1"], vals["mat2"]
        uses = []
        if self._ref(m1) is not None:
            raise _Unsupported("addmm with the parameter as first matrix")
        r2 = self._ref(m2)
        if r2 is not None:
            a = self._act(m1, "addmm")
            sa, sw, so, w_idx = _matmul_letters(tuple(a.shape), r2.idx, True)
            uses.append(self._bilinear(r2, w_idx, a, sa, sw, so, alpha))
        ri = self._ref(inp)
        if ri is not None:
            uses.append(self._additive(ri, tuple(ri.idx.shape), tuple(result.shape), beta))
        elif isinstance(inp, Tensor) and inp.ndim == 2 and inp.shape[0] != 1:
            self._act(inp, "addmm")
        return self._finish(result, uses)

    def _add(self, name: str, args: Any, kwargs: Any, result: Tensor) -> Tensor:
        if set(kwargs) - {"alpha"} or len(args) != 2:
            raise _Unsupported(f"{name} with extra arguments")
        alpha = float(kwargs.get("alpha", 1.0))
        x, y = args
        rx, ry = self._ref(x), self._ref(y)
        if rx is not None and ry is not None:
            raise _Unsupported(f"{name} of two parameters")
        sign = -1.0 if name in _SUB else 1.0
        if rx is not None:
            ref, act, scale = rx, y, 1.0
        else:
            assert ry is not None
            ref, act, scale = ry, x, sign * alpha
        a = self._act(act, name)
        if tuple(a.shape) != tuple(result.shape):
            raise _Unsupported(f"{name}: the parameter broadcasts the activation")
        return self._finish(result, [self._additive(ref, tuple(ref.idx.shape), tuple(result.shape), scale)])

    def _einsum(self, args: Any, kwargs: Any, result: Tensor) -> Tensor:
        if kwargs or not isinstance(args[0], str):
            raise _Unsupported("einsum in sublist form")
        ops = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
        if len(ops) != 2:
            raise _Unsupported("einsum with other than two operands")
        terms, out = parse_einsum(args[0], [tuple(o.shape) for o in ops])
        r0, r1 = self._ref(ops[0]), self._ref(ops[1])
        if (r0 is None) == (r1 is None):
            raise _Unsupported("einsum of two parameters")
        wi = 0 if r0 is not None else 1
        ref = r0 if r0 is not None else r1
        assert ref is not None
        a = self._act(ops[1 - wi], "einsum")
        return self._finish(result, [self._bilinear(ref, ref.idx, a, terms[1 - wi], terms[wi], out, 1.0)])

    def _conv(self, nd: int, args: Any, kwargs: Any, result: Tensor) -> Tensor:
        names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
        vals = dict(zip(names, args)) | dict(kwargs)
        x, w, b = vals["input"], vals["weight"], vals.get("bias")
        if self._ref(x) is not None:
            raise _Unsupported("a parameter as convolution input")
        a = self._act(x, f"conv{nd}d")
        if a.ndim != nd + 2:
            raise _Unsupported("an unbatched convolution")
        uses = []
        rw, rb = self._ref(w), self._ref(b)
        if rw is not None:
            kernel = tuple(int(s) for s in rw.idx.shape[2:])
            stride, dil = _tuple(vals.get("stride", 1), nd), _tuple(vals.get("dilation", 1), nd)
            pad = _conv_padding(vals.get("padding", 0), kernel, dil, nd)
            groups = int(vals.get("groups", 1))
            uses.append(_conv_use(rw, a, kernel, stride, pad, dil, groups, tuple(result.shape)))
        if rb is not None:
            nd_out = result.ndim - 2
            uses.append(self._additive(rb, tuple(rb.idx.shape) + (1,) * nd_out, tuple(result.shape), 1.0))
            uses[-1].idx = rb.idx.reshape(-1)
        return self._finish(result, uses)


def _conv_weight_grad(nd: int) -> Callable[..., Tensor]:
    from torch.nn import grad as nn_grad

    return {1: nn_grad.conv1d_weight, 2: nn_grad.conv2d_weight, 3: nn_grad.conv3d_weight}[nd]


_CONV_WEIGHT = {nd: _conv_weight_grad(nd) for nd in (1, 2, 3)}


#: Per-example convolution weight gradients by one grouped convolution (True) or by im2col and bmm (False).
_GROUPED_CONV_GRADIENTS = True


#: ... except for convolutions with at most this many input channels per group when torch runs on at least
#: ``_IM2COL_MIN_THREADS`` threads: there im2col and bmm are used. The grouped-convolution weight gradient on few
#: channels opens many short parallel regions and stalls when a thread is descheduled (the 3-channel first
#: layer of the 3-layer CNN on 32×32×3, n = 512, on a 2-core VM loaded by two other processes: 8-14 s grouped
#: against 0.11 s by im2col + bmm with 2 threads; with 1 thread 0.035 s grouped against 0.12 s).
_IM2COL_MAX_CHANNELS = 8


_IM2COL_MIN_THREADS = 2


def _tuple(v: Any, nd: int) -> tuple[int, ...]:
    return tuple(int(i) for i in v) if isinstance(v, (tuple, list)) else (int(v),) * nd


def _conv_padding(pad: Any, kernel: tuple[int, ...], dil: tuple[int, ...], nd: int) -> tuple[tuple[int, int], ...]:
    if isinstance(pad, str):
        if pad == "valid":
            return ((0, 0),) * nd
        if pad == "same":
            tot = [d * (k - 1) for d, k in zip(dil, kernel)]
            return tuple((t // 2, t - t // 2) for t in tot)
        raise _Unsupported(f"padding {pad!r}")
    return tuple((p, p) for p in _tuple(pad, nd))


def _patches(
    a: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], pad: tuple[tuple[int, int], ...], dil: tuple[int, ...]
) -> Tensor:
    """im2col for any number of spatial axes: ``a (b, C, *S)`` -> ``(b, T, C * prod(kernel))``."""
    nd = len(kernel)
    flat_pad = [p for pair in reversed(pad) for p in pair]
    if any(flat_pad):
        a = F.pad(a, flat_pad)
    for i in range(nd):
        span = dil[i] * (kernel[i] - 1) + 1
        a = a.unfold(2 + i, span, stride[i])
        if dil[i] > 1:
            a = a[..., :: dil[i]]
    b, c = a.shape[:2]
    s_out = a.shape[2 : 2 + nd]
    perm = [0, *range(2, 2 + nd), 1, *range(2 + nd, 2 + 2 * nd)]
    return a.permute(perm).reshape(b, math.prod(s_out), c * math.prod(kernel))


def _conv_use(
    ref: _Ref,
    a: Tensor,
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    pad: tuple[tuple[int, int], ...],
    dil: tuple[int, ...],
    groups: int,
    out_shape: tuple[int, ...],
) -> _Use:
    c_out, c_g = int(ref.idx.shape[0]), int(ref.idx.shape[1])
    kk = math.prod(kernel)
    g, k_g, d = groups, c_out // groups, c_g * kk
    t = math.prod(out_shape[2:])
    idx = ref.idx.reshape(g, k_g, d).permute(0, 2, 1)

    def u_of(act: Tensor) -> Tensor:  # im2col by Tensor.unfold (faster here than F.unfold's im2col kernel)
        return _patches(act, kernel, stride, pad, dil).reshape(act.shape[0], t, g, d)

    def g_of(cot: Tensor) -> Tensor:  # (b, O, C_out, *S) -> (b, T, G, O, K)
        b, o = cot.shape[:2]
        return cot.reshape(b, o, g, k_g, t).permute(0, 4, 2, 1, 3)

    def grad_of(act: Tensor, cot: Tensor) -> Tensor:
        """Per-example weight gradients as one grouped convolution (the examples and outputs as groups)."""
        b, o = cot.shape[:2]
        flat_pad = [p for pair in reversed(pad) for p in pair]
        sym = all(p0 == p1 for p0, p1 in pad)
        x = act if sym or not any(flat_pad) else F.pad(act, flat_pad)
        padding = tuple(p0 for p0, _ in pad) if sym else (0,) * len(kernel)
        weight_grad = _CONV_WEIGHT[len(kernel)]
        gw = weight_grad(
            x.reshape(1, -1, *x.shape[2:]),
            (b * o * c_out, c_g, *kernel),
            cot.reshape(1, b * o * c_out, *cot.shape[3:]),
            stride,
            padding,
            dil,
            b,
        )
        return gw.reshape(b, o, 1, c_out, d).transpose(3, 4)  # (b, O, G=1, D, K)

    use = _Use(ref.name, "bilinear", -1, idx, ref.scale, (t, g, d, k_g), a.detach(), u_of, g_of, ref.injective)
    im2col = c_g <= _IM2COL_MAX_CHANNELS and torch.get_num_threads() >= _IM2COL_MIN_THREADS
    grouped = groups == 1 and _GROUPED_CONV_GRADIENTS and not im2col
    use.grad_of = grad_of if grouped else None
    return use


def _matmul_letters(a_shape: tuple[int, ...], w_idx: Tensor, w_right: bool) -> tuple[str, str, str, Tensor]:
    """Einsum letters of ``a @ W`` (``w_right``) or ``W @ a``, with broadcast weight axes removed from ``W``."""
    na, nw = len(a_shape), w_idx.ndim
    if na < 2:
        raise _Unsupported("matmul with a one-dimensional activation")
    letters = iter(string.ascii_letters)
    if w_right:
        m, d, k = next(letters), next(letters), next(letters)
        a_mat, w_mat, o_mat = m + d, (d + k if nw >= 2 else d), (m + k if nw >= 2 else m)
    else:
        m, d, k = next(letters), next(letters), next(letters)
        a_mat, w_mat, o_mat = d + k, (m + d if nw >= 2 else d), (m + k if nw >= 2 else k)
    nba, nbw = na - 2, max(nw - 2, 0)
    if nbw > nba:
        raise _Unsupported("matmul whose weight has more batch axes than the activation")
    batch = [next(letters) for _ in range(nba)]
    sa = "".join(batch) + a_mat
    sw_batch = ""
    idx = w_idx
    drop: list[int] = []
    for j in range(nbw):
        ai = nba - nbw + j
        wsize, asize = int(w_idx.shape[j]), int(a_shape[ai])
        if wsize == 1 or (ai == 0 and bool((w_idx == w_idx.select(j, 0).unsqueeze(j)).all())):
            drop.append(j)  # broadcast (or an expand over the examples)
        elif wsize == asize:
            sw_batch += batch[ai]
        else:
            raise _Unsupported("matmul whose weight broadcasts the activation")
    for j in reversed(drop):
        idx = idx.select(j, 0)
    return sa, sw_batch + w_mat, "".join(batch) + o_mat, idx


@dataclass(frozen=True)
class ParameterRoute:
    """How one trained parameter is differentiated (see :func:`plan_structured`).

    Attributes
    ----------
    name : str
        The parameter's name, as in ``model.named_parameters()``.
    route : str
        One of :data:`ROUTES`: ``"gram"`` (pairwise structured rule),
        ``"grad"`` (per-example gradients from the operations' inputs and
        cotangents) or ``"jacobian"`` (per-example Jacobians, ``vmap(jacrev)``).
    uses : str
        The recognised uses, e.g. ``"2 x bilinear (T=1, G=1, D=784, K=2000)"``.
    reason : str
        Why this route: the cheaper estimate, or the operation without a rule.
    flops : float
        Estimated FLOPs of this parameter's part of the Gram matrix.
    """

    name: str
    route: str
    uses: str
    reason: str
    flops: float


@dataclass
class StructuredPlan:
    """The routes of every trained parameter and the cost estimate of the whole Gram matrix.

    ``print(plan)`` shows one line per parameter.

    Attributes
    ----------
    routes : dict[str, ParameterRoute]
        By parameter name.
    estimate : ntk_core.ntk.CostEstimate
        FLOPs, memory and tile size of :func:`~ntk_core.ntk.structured_ntk` on this problem
        (method name ``"structured"``), comparable with
        :func:`ntk_core.ntk.select_method`'s estimates.
    cache_columns : bool
        Whether the features of the column examples are kept between row tiles.
    """

    routes: dict[str, ParameterRoute]
    estimate: CostEstimate
    cache_columns: bool
    _uses: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict, repr=False)
    _aranges: dict[str, Tensor] = field(default_factory=dict, repr=False)
    _forward: _ForwardCost | None = field(default=None, repr=False)  # the forward cost of one example

    def names(self, route: str) -> list[str]:
        """Parameters on ``route`` (one of :data:`ROUTES`), in the model's order."""
        return [n for n, r in self.routes.items() if r.route == route]

    def __str__(self) -> str:
        e = self.estimate
        head = f"structured: {e.flops / 1e9:.2f} GFLOP, {e.memory / 2**20:.1f} MiB, tile {e.tile_size}" + (
            "" if e.feasible else " (over memory budget)"
        )
        rows = [
            f"  {r.name:<24} {r.route:<8} {r.flops / 1e9:10.3f} GFLOP  {r.uses}; {r.reason}"
            for r in self.routes.values()
        ]
        return "\n".join([head, *rows])


def _aranges(prob: _Problem) -> dict[str, Tensor]:
    return {n: torch.arange(p.numel(), device=p.device).reshape(p.shape) for n, p in prob.params.items()}


#: Cotangents at the taped outputs by differentiating the outputs themselves ("taps", True) or zero probes
#: added to them (False). Taps copy nothing; probes cost a fill and an add per output (0.06 s of a 0.28 s
#: forward on the 3-layer CNN at n = 128). Where the model changes a tapped output in place afterwards (an
#: in-place ReLU), the forward pass is run again with probes.
_GRADIENT_TAPS = True


def _tape_pass(
    prob: _Problem,
    aranges: dict[str, Tensor],
    x: Inputs,
    capture: bool,
    keep: set[str] | None = None,
    taps: bool = False,
    count: bool = False,
) -> tuple[_Tape, Tensor]:
    rec = _Tape(prob.params, aranges, _n_examples(x), capture, keep, taps, count)
    with rec:
        out = prob.forward(prob.params, x)
    return rec, out


def _tape_cotangents(prob: _Problem, aranges: dict[str, Tensor], x: Inputs, keep: set[str]) -> tuple[_Tape, Tensor]:
    """The capturing forward pass: with taps if they are safe for this model, else with probes."""
    if _GRADIENT_TAPS:
        try:
            rec, out = _tape_pass(prob, aranges, x, capture=True, keep=keep, taps=True)
        except RuntimeError:  # e.g. an in-place operation on a tapped output that is a leaf
            pass
        else:
            if not rec.modified():
                return rec, out
    return _tape_pass(prob, aranges, x, capture=True, keep=keep)


def _describe(sigs: list[tuple[Any, ...]]) -> str:
    parts: dict[str, int] = {}
    for kind, dims in sigs:
        key = f"{kind} (T={dims[0]}, G={dims[1]}, D={dims[2]}, K={dims[3]})" if kind == "bilinear" else kind
        parts[key] = parts.get(key, 0) + 1
    return ", ".join(f"{c} x {k}" if c > 1 else k for k, c in parts.items()) or "no use"


def _gram_groups(uses: list[_Use], check_disjoint: bool = True) -> list[list[_Use]] | None:
    """Uses grouped by identical layout, if the pairwise rule applies: bilinear only, groups disjoint."""
    if any(u.kind != "bilinear" for u in uses):
        return None
    groups: list[list[_Use]] = []
    for u in uses:
        for grp in groups:
            if grp[0].idx.shape == u.idx.shape and torch.equal(grp[0].idx, u.idx):
                grp.append(u)
                break
        else:
            groups.append([u])
    if check_disjoint and not (len(groups) == 1 and all(u.injective for u in uses)):
        flat = torch.cat([grp[0].idx.reshape(-1) for grp in groups])
        seen = torch.zeros(int(flat.max()) + 1, dtype=torch.bool, device=flat.device)
        seen[flat] = True
        if int(seen.sum()) != flat.numel():
            return None  # overlapping layouts (e.g. W and W.T of one matrix): per-example gradients
    return groups


def _one_example(at2: float, at3: float) -> float | None:
    """A count at one example, extrapolated from batches of 2 and 3 as ``2 c(2) - c(3)``: exact where the count
    is affine in the batch (per-example work plus batch-independent work), as the counts of a model that treats
    examples independently are. None if the count is not finite, or its slope or value at one example negative."""
    slope = at3 - at2
    one = at2 - slope
    return one if math.isfinite(one) and slope >= 0 and one >= 0 else None


def _taped_cost(prob: _Problem, runs: list[_Tape], sizes: tuple[int, int]) -> _ForwardCost | None:
    """The forward cost of one example from the plan's counting passes (2 and 3 examples; ``sizes``: the sums of
    the leaf modules' outputs in each), equal to :func:`ntk_core.ntk._forward_cost`'s; None where the tape's
    count cannot be trusted (a call whose FLOPs it cannot count, counts not affine in the batch)."""
    flops = _one_example(runs[0].flops, runs[1].flops)
    activations = _one_example(float(sizes[0]), float(sizes[1]))
    if flops is None or activations is None:
        return None
    return _ForwardCost.of(prob, flops, activations)


def _plan(prob: _Problem, cost: _ForwardCost | None = None) -> StructuredPlan:
    """Run the model on two small batches under the tape, find each parameter's uses and choose its route.

    ``cost``: the model's forward cost per example, if counted already; else the two taped passes count it too
    (FLOPs and leaf-module outputs, :func:`_taped_cost`), or, where they cannot,
    :func:`ntk_core.ntk._forward_cost` does. The plan keeps it (``_forward``).
    """
    aranges = _aranges(prob)
    n1 = prob.n1
    runs = []
    measure = cost is None
    sizes: list[int] = []
    ends: list[int] = []
    handles = _leaf_output_hooks(prob.model, sizes) if measure else []
    try:
        with torch.no_grad():
            for b in (2, 3):
                x = _rows(prob.x1, torch.arange(b, device=prob.device) % n1)
                runs.append(_tape_pass(prob, aranges, x, capture=False, count=measure)[0])
                ends.append(len(sizes))
    finally:
        for h in handles:
            h.remove()
    if cost is None:
        taped = _taped_cost(prob, runs, (sum(sizes[: ends[0]]), sum(sizes[ends[0] :])))
        cost = taped if taped is not None else _forward_cost(prob)
    unsupported = dict(runs[0].unsupported)
    for n, why in runs[1].unsupported.items():
        unsupported.setdefault(n, why)
    by_name: dict[str, list[_Use]] = {n: [] for n in prob.params}
    sigs: dict[str, list[list[tuple[Any, ...]]]] = {n: [[], []] for n in prob.params}
    for k, rec in enumerate(runs):
        for u in rec.uses:
            sigs[u.name][k].append(u.signature())
            if k == 1:
                by_name[u.name].append(u)
    for n in prob.params:
        if n not in unsupported and sigs[n][0] != sigs[n][1]:
            unsupported[n] = "its uses differ between batch sizes (the examples do not lead every axis)"
        if n not in unsupported and not by_name[n]:
            unsupported[n] = "no recognised use (it reaches the output by another path, or not at all)"

    forward = max(cost.flops, 2.0 * prob.n_params)
    o, of, e, full = prob.n_out, _out_factor(prob), prob.itemsize, prob.full
    pairs = _pairs(prob)
    rows_est = float(prob.n1 if prob.symmetric else prob.n1 + prob.n2)
    routes: dict[str, ParameterRoute] = {}
    per_row_flops, per_pair_flops, per_row_bytes, pair_bytes = 0.0, 0.0, 0.0, 0.0
    structured_any, jac_numel = False, 0
    for n, p in prob.params.items():
        uses = by_name[n]
        desc = _describe(sigs[n][1])
        if n in unsupported:
            jac_numel += p.numel()
            flops = rows_est * 2.0 * o * forward / max(len(prob.params), 1) + pairs * 2.0 * of * p.numel()
            routes[n] = ParameterRoute(n, "jacobian", desc, unsupported[n], flops)
            continue
        structured_any = True
        grad_row = sum(2.0 * o * math.prod(u.dims) for u in uses if u.kind == "bilinear")
        grad_row += sum(2.0 * o * u.idx.numel() for u in uses if u.kind == "additive")
        grad_pair = 2.0 * of * p.numel()
        grad_cost = rows_est * grad_row + pairs * grad_pair
        groups = _gram_groups(uses)
        gram_cost, gram_pair, gram_bytes, gram_tt = math.inf, 0.0, 0.0, 0.0
        if groups is not None:
            for grp in groups:
                t = sum(u.dims[0] for u in grp)
                _, g, d, k = grp[0].dims
                gram_pair += 2.0 * g * t * t * (d + of * k) + (g * t * t * of if t * g > 1 else 0.0)
                gram_bytes += t * g * (d + o * k) * e
                gram_tt = max(gram_tt, float(t * t * g * (of if full else 1)))
            gram_cost = pairs * gram_pair
        if gram_cost <= grad_cost:
            why = f"pairwise rule {gram_cost / 1e9:.3g} <= per-example gradients {grad_cost / 1e9:.3g} GFLOP"
            routes[n] = ParameterRoute(n, "gram", desc, why, gram_cost)
            per_pair_flops += gram_pair
            per_row_bytes += gram_bytes
            pair_bytes = max(pair_bytes, 3.0 * e * gram_tt if gram_tt > 1 else 0.0)
        else:
            why = (
                (
                    "an additive use (bias): its per-example gradient is the cotangent"
                    if any(u.kind == "additive" for u in uses)
                    else "its uses overlap in different layouts"
                )
                if groups is None
                else f"per-example gradients {grad_cost / 1e9:.3g} < pairwise rule {gram_cost / 1e9:.3g} GFLOP"
            )
            routes[n] = ParameterRoute(n, "grad", desc, why, grad_cost)
            per_row_flops += grad_row
            per_pair_flops += grad_pair
            per_row_bytes += o * p.numel() * e
    if structured_any:
        per_row_flops += (1 + o) * forward
    if jac_numel:
        per_row_flops += (1 + 2 * o) * forward
        per_pair_flops += 2.0 * of * jac_numel
        per_row_bytes += 2.0 * o * jac_numel * e
    per_pair_mem = pair_bytes + 2.0 * e * (of if full else 1)
    n_max = max(prob.n1, prob.n2)
    col_bytes = prob.n2 * per_row_bytes
    cached = col_bytes <= prob.budget / 2
    tile = _tile_fit(col_bytes if cached else 0.0, per_row_bytes, per_pair_mem, prob.budget, n_max)
    rows = _n_rows_computed(prob, tile, cached)
    flops = rows * per_row_flops + pairs * per_pair_flops
    mem = int((col_bytes if cached else 0) + 2 * tile * per_row_bytes + tile * tile * per_pair_mem)
    estimate = CostEstimate("structured", flops, mem, tile, mem <= prob.budget)
    return StructuredPlan(routes, estimate, cached, {n: sigs[n][1] for n in prob.params}, aranges, cost)


@dataclass
class _Features:
    grams: list[tuple[Tensor, Tensor]] = field(default_factory=list)  # u (b, T, G, D), g (b, T, G, O, K)
    jacobians: list[Tensor] = field(default_factory=list)  # (b, O, p)


def _axis_order(idx: Tensor) -> tuple[int, ...] | None:
    """The axis order ``p`` with ``idx.permute(p)`` = ``arange`` in the parameter's layout, if there is one."""
    for p in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        v = idx.permute(p)
        flat = v.reshape(-1)
        if int(flat[0]) == 0 and bool((flat[1:] - flat[:-1] == 1).all()):
            return p
    return None


def _example_chunk(b: int, per_example: float, budget: int) -> int:
    return int(max(1, min(b, budget // max(per_example, 1.0))))


@dataclass
class _OperationEngine:
    """Features and tile kernels for :func:`ntk_core.ntk._run_tiles` (the ``_Engine`` protocol)."""

    prob: _Problem
    plan: StructuredPlan
    name: str = "structured"
    cache_columns: bool = False
    _aranges: dict[str, Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cache_columns = self.plan.cache_columns
        self._aranges = self.plan._aranges or _aranges(self.prob)

    def features(self, x: Inputs) -> _Features:
        prob, plan = self.prob, self.plan
        feats = _Features()
        keep = set(plan.names("gram")) | set(plan.names("grad"))
        if keep:
            with torch.enable_grad():
                rec, out = _tape_cotangents(prob, self._aranges, x, keep)
                uses: dict[str, list[_Use]] = {n: [] for n in keep}
                for u in rec.uses:
                    if u.name in keep:
                        uses[u.name].append(u)
                for n in keep:
                    if [u.signature() for u in uses[n]] != plan._uses[n] or n in rec.unsupported:
                        raise RuntimeError(
                            f"the operations that use parameter {n!r} changed between batches "
                            f"({_describe([u.signature() for u in uses[n]])} instead of {_describe(plan._uses[n])}); "
                            f"the model must run the same operations for every batch"
                        )
                cots = _cotangents(out, rec.probes, prob.n_out)
            for n in plan.names("gram"):
                self._gram_features(uses[n], cots, feats)
            for n in plan.names("grad"):
                feats.jacobians.append(self._grad_features(n, uses[n], cots, _n_examples(x)))
        jac = plan.names("jacobian")
        if jac:
            feats.jacobians += _per_example_jacobians(prob, jac, x).values()
        return feats

    def _gram_features(self, uses: list[_Use], cots: list[Tensor | None], feats: _Features) -> None:
        groups = _gram_groups(uses, check_disjoint=False)  # checked by the plan
        assert groups is not None
        for grp in groups:
            us, gs = [], []
            for u in grp:
                assert u.u_of is not None and u.g_of is not None and u.act is not None
                cot = cots[u.call]
                assert cot is not None
                us.append(u.u_of(u.act) * u.scale if u.scale != 1.0 else u.u_of(u.act))
                gs.append(u.g_of(cot))
            feats.grams.append((torch.cat(us, 1) if len(us) > 1 else us[0], torch.cat(gs, 1) if len(gs) > 1 else gs[0]))

    def _grad_features(self, name: str, uses: list[_Use], cots: list[Tensor | None], b: int) -> Tensor:
        """Per-example gradients ``(b, O, numel)`` of one parameter: ``sum_t u_t ⊗ δ_t`` per use, summed."""
        prob = self.prob
        o, numel = prob.n_out, prob.params[name].numel()
        orders = [_axis_order(u.idx) if u.kind == "bilinear" and u.idx.numel() == numel else None for u in uses]
        # the first use covers the whole parameter in a permuted layout: written, not added (no zero fill)
        direct = bool(uses) and orders[0] is not None
        jac = (torch.empty if direct else torch.zeros)(b, o, numel, dtype=prob.dtype, device=prob.device)

        def place(
            rows: slice, grad: Tensor, order: tuple[int, ...] | None, flat: Tensor, scale: float, first: bool
        ) -> None:
            c = grad.shape[0]
            if order is None:
                jac[rows].index_add_(2, flat, grad.reshape(c, o, -1), alpha=scale)
                return
            src = grad.permute(0, 1, *(2 + i for i in order))  # (c, O, *parameter layout)
            dst = jac[rows].view(c, o, *src.shape[2:])
            if first:
                dst.copy_(src)  # one pass, whatever src's strides
                if scale != 1.0:
                    dst.mul_(scale)
            else:
                dst.add_(src, alpha=scale)

        for ui, u in enumerate(uses):
            cot = cots[u.call]
            assert cot is not None and u.g_of is not None
            if u.kind == "additive":
                jac.index_add_(2, u.idx, u.g_of(cot), alpha=u.scale)
                continue
            assert u.u_of is not None and u.act is not None
            t, g, d, k = u.dims
            step = _example_chunk(b, float(t * g * (d + o * k) * prob.itemsize), prob.budget // 8)
            order, first = orders[ui], direct and ui == 0
            flat = u.idx.reshape(-1)
            for s in range(0, b, step):
                rows = slice(s, s + step)
                if u.grad_of is not None:  # a convolution: grouped-convolution weight gradients, no im2col
                    place(rows, u.grad_of(u.act[rows], cot[rows]), order, flat, u.scale, first)
                    continue
                uu = u.u_of(u.act[s : s + step])  # (c, T, G, D): im2col for convolutions
                gg = u.g_of(cot[s : s + step])  # (c, T, G, O, K)
                c = uu.shape[0]
                if g == 1:  # one batched matrix product over positions: (c, D, T) @ (c, T, O K)
                    grad = torch.bmm(uu[:, :, 0].transpose(1, 2), gg[:, :, 0].reshape(c, t, o * k))
                    grad = grad.reshape(c, 1, d, o, k).permute(0, 3, 1, 2, 4)  # (c, O, G, D, K)
                else:
                    grad = torch.einsum("ctgd,ctgok->cogdk", uu, gg)
                place(rows, grad, order, flat, u.scale, first)  # no scatter where the use covers the parameter
        return jac

    def kernel(self, f1: _Features, f2: _Features) -> Tensor:
        full, same = self.prob.full, f1 is f2  # same: a diagonal tile of a symmetric Gram matrix
        terms = [
            _gram_term(u1, g1, u2, g2, full, self.prob.budget, same) for (u1, g1), (u2, g2) in zip(f1.grams, f2.grams)
        ]
        if same and not full:  # products of the per-example gradients with themselves: upper blocks only
            terms += [_self_gram(j.reshape(j.shape[0], -1)) for j in f1.jacobians]
        else:
            terms += [_contract_jacobians(j1, j2, full) for j1, j2 in zip(f1.jacobians, f2.jacobians)]
        total = terms[0]
        for term in terms[1:]:
            total = total + term if total is terms[0] else total.add_(term)
        return total


def _cotangents(out: Tensor, probes: list[Tensor | None], n_out: int) -> list[Tensor | None]:
    """Per call: the cotangent ``(b, O, *out[1:])`` of every output at the call's output (None if no probe)."""
    live = [p for p in probes if p is not None]
    per_o: list[list[Tensor]] = []
    if not out.requires_grad:  # no taped use reaches the output
        per_o = [[torch.zeros_like(p) for p in live] for _ in range(n_out)]
    for o in range(n_out if out.requires_grad else 0):
        grads = torch.autograd.grad(out[:, o].sum(), live, retain_graph=o < n_out - 1, allow_unused=True)
        per_o.append([torch.zeros_like(p) if g is None else g for g, p in zip(grads, live)])
    result: list[Tensor | None] = []
    k = 0
    for p in probes:
        if p is None:
            result.append(None)
        else:
            result.append(per_o[0][k].unsqueeze(1) if n_out == 1 else torch.stack([c[k] for c in per_o], dim=1))
            k += 1
    return result


#: Rows per block of :func:`_self_gram` (a product ``A Aᵀ`` is formed block row by block row, upper part only).
_SYM_BLOCK = 128


def _self_gram(a: Tensor) -> Tensor:
    """``a @ a.T`` for ``a (n, p)``, computing only the blocks on and above the diagonal (about half the FLOPs
    for large n) and mirroring the rest; the diagonal blocks are computed whole."""
    n = a.shape[0]
    h = _SYM_BLOCK
    if n <= h:
        return a @ a.T
    out = torch.empty(n, n, dtype=a.dtype, device=a.device)
    for s in range(0, n, h):
        e = min(s + h, n)
        blk = a[s:e] @ a[s:].T  # (e - s, n - s)
        out[s:e, s:] = blk
        out[e:, s:e] = blk[:, e - s :].T
    return out


def _gram_term(u1: Tensor, g1: Tensor, u2: Tensor, g2: Tensor, full: bool, budget: int, same: bool = False) -> Tensor:
    """``K[i, j, a, b] = sum_g sum_{t,s} <u1_itg, u2_jsg> <g1_itg^a, g2_jsg^b>`` (summed over a = b for trace).

    ``same``: the two feature sets are one (a diagonal tile), so flat products are formed as symmetric ones.
    """
    b1, t1, gg, _ = u1.shape
    b2, t2 = u2.shape[:2]
    o = g1.shape[3]
    if t1 == 1 and t2 == 1 and gg == 1:
        if same and not full:
            return _self_gram(u1[:, 0, 0]) * _self_gram(g1.reshape(b1, -1))
        uu = u1[:, 0, 0] @ u2[:, 0, 0].T
        if full:
            return uu[:, :, None, None] * torch.einsum("iak,jbk->ijab", g1[:, 0, 0], g2[:, 0, 0])
        return uu * (g1.reshape(b1, -1) @ g2.reshape(b2, -1).T)
    per_row = float(b2 * t1 * t2 * gg * (o * o if full else 1) * u1.element_size() * 3)
    step = _example_chunk(b1, per_row, budget // 4)
    blocks = []
    for s in range(0, b1, step):
        uu = torch.einsum("itgd,jsgd->ijtsg", u1[s : s + step], u2)
        if full:
            blocks.append(torch.einsum("ijtsg,itgak,jsgbk->ijab", uu, g1[s : s + step], g2))
        else:
            gp = torch.einsum("itgx,jsgx->ijtsg", g1[s : s + step].flatten(3), g2.flatten(3))
            blocks.append((uu * gp).sum(dim=(2, 3, 4)))
    return torch.cat(blocks, 0)


def plan_structured(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None = None,
    *,
    output: Output = "trace",
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    memory_budget: int | None = None,
) -> StructuredPlan:
    """How :func:`~ntk_core.ntk.structured_ntk` will differentiate each trained parameter, and what it will cost.

    One forward pass on two small batches (2 and 3 examples) is taped; each
    trained parameter's uses are recognised (see the module description) and
    its route chosen by estimated FLOPs: the pairwise rule ``"gram"``,
    per-example gradients ``"grad"``, or per-example Jacobians
    ``"jacobian"`` when some operation it reaches has no rule.

    Parameters
    ----------
    model, x1, x2, output, dtype, device, memory_budget
        As for :func:`ntk_core.ntk.select_method`: the network, the inputs ``(n1, ...)`` and ``(n2, ...)``
        (``x2=None``: ``x2 = x1``), the kernel asked for, compute dtype and device, bytes for features and
        per-tile workspace.

    Returns
    -------
    StructuredPlan
        One :class:`ParameterRoute` per trained parameter and the estimate.

    Raises
    ------
    ValueError, TypeError
        Bad inputs or options, as for :func:`ntk_core.ntk.empirical_ntk`.

    Examples
    --------
    A raw weight used as ``x @ W.T``, a bias, and a parameter passed through
    ``tanh`` (no structured rule: per-example Jacobians for it alone):

    >>> import torch
    >>> from torch import nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.W = nn.Parameter(torch.randn(50, 5))
    ...         self.b = nn.Parameter(torch.zeros(50))
    ...         self.v = nn.Parameter(torch.randn(50))
    ...     def forward(self, x):
    ...         return torch.relu(x @ self.W.T + self.b) @ torch.tanh(self.v)
    >>> plan = plan_structured(Net(), torch.randn(8, 5))
    >>> {name: r.route for name, r in plan.routes.items()}
    {'W': 'gram', 'b': 'grad', 'v': 'jacobian'}
    """
    prob = _make_problem(model, x1, x2, output, dtype, device, memory_budget)
    return _plan(prob)
