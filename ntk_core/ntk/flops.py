"""FLOPs of one torch call from its operands' and result's shapes, with the conventions of ``FlopCounterMode``.

:func:`torch.utils.flop_counter.FlopCounterMode` counts aten operations (mm, addmm, bmm, baddbmm, convolutions,
attention kernels) at 2 FLOPs per multiply-add, and counts neither bias additions nor elementwise work. The
structured plan's taped forward passes (:mod:`ntk_core.ntk.structured`) see torch *functions*, one level above
aten; :func:`flop_rule` gives, per function, the rule that counts what aten will run for it, so that the tape
counts the forward FLOPs without a second, counting pass. A function that may run counted operations the tape
cannot see (a Python composite such as ``F.multi_head_attention_forward``, an LSTM, ``tensordot``, the fused CPU
attention kernel) has a rule that returns NaN: the caller then counts with ``FlopCounterMode`` instead.

Also the two helpers the tape and these rules share: :func:`func_name` and :func:`parse_einsum`.
"""

from __future__ import annotations

import math
import re
import string
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

__all__ = ["FlopRule", "flop_rule", "func_name", "parse_einsum"]


def func_name(func: Any) -> str:
    """The name a torch function, Tensor method or property (``W.T``) goes by, as the rules look it up."""
    owner = getattr(func, "__self__", None)
    if getattr(func, "__name__", "") == "__get__" and owner is not None:
        return str(getattr(owner, "__name__", "__get__"))  # a property such as W.T
    return str(getattr(func, "__name__", repr(func)))


def parse_einsum(eq: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """An einsum equation's input terms and output term, with ``...`` spelt out in letters the equation does not
    use (as many as the operands' ``shapes`` need) and the implicit output made explicit.

    Raises ``ValueError`` when the equation and the operands disagree in number.
    """
    eq = eq.replace(" ", "")
    lhs, out = eq.split("->") if "->" in eq else (eq, None)
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum equation {eq!r} has {len(terms)} operand terms, {len(shapes)} operands were given")
    free = [c for c in string.ascii_letters if c not in eq]
    n_ell = max([len(s) - (len(t) - 3) for t, s in zip(terms, shapes) if "..." in t], default=0)
    ell = "".join(free[:n_ell])
    terms = [
        t.replace("...", ell[n_ell - (len(s) - (len(t) - 3)) :]) if "..." in t else t for t, s in zip(terms, shapes)
    ]
    if out is None:
        joined = "".join(terms)
        out = ell + "".join(sorted(c for c in set(joined) if joined.count(c) == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return terms, out


def _arg(args: Any, kwargs: Any, i: int, name: str) -> Any:
    return args[i] if len(args) > i else kwargs[name]


def _matmul_flops(x: Tensor, y: Tensor, out: Tensor) -> float:
    """``x @ y``: ``2 · out elements · inner size``, where aten runs it as mm/bmm; a product with a vector runs as
    dot or mv (not counted) or, batched, as either mv or bmm depending on strides: not countable (NaN)."""
    if y.ndim == 1:
        return 0.0 if x.ndim <= 2 else math.nan
    if x.ndim == 1 and y.ndim > 2:
        return math.nan
    return 2.0 * out.numel() * x.shape[-1]


def _flops_matmul(args: Any, kwargs: Any, out: Tensor) -> float:
    return _matmul_flops(_arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "other"), out)


def _flops_rmatmul(args: Any, kwargs: Any, out: Tensor) -> float:
    return _matmul_flops(args[1], args[0], out)  # Tensor.__rmatmul__(self, other) is other @ self


def _flops_mm(args: Any, kwargs: Any, out: Tensor) -> float:  # mm, bmm: 2 · out elements · inner size
    return 2.0 * out.numel() * _arg(args, kwargs, 0, "input").shape[-1]


def _flops_addmm(args: Any, kwargs: Any, out: Tensor) -> float:  # the added input is not counted
    return 2.0 * out.numel() * _arg(args, kwargs, 1, "mat1").shape[-1]


def _flops_baddbmm(args: Any, kwargs: Any, out: Tensor) -> float:
    return 2.0 * out.numel() * _arg(args, kwargs, 1, "batch1").shape[-1]


def _flops_linear(args: Any, kwargs: Any, out: Tensor) -> float:
    """``F.linear``: ``2 · out elements · in_features`` (a one-dimensional weight runs as dot/mv: not countable)."""
    w = _arg(args, kwargs, 1, "weight")
    return 2.0 * out.numel() * w.shape[1] if w.ndim == 2 else math.nan


def _conv_flops(x: Tensor, w: Tensor, out: Tensor, transposed: bool) -> float:
    """A convolution: ``2 · weight elements`` per output position and example (per *input* position and example
    for a transposed one), i.e. ``2 · B · prod(S) · C_out · C_in/groups · prod(kernel)``."""
    positions = (x if transposed else out).numel() // w.shape[0] if w.shape[0] else 0  # B · prod(S)
    return 2.0 * positions * w.numel()


def _flops_conv(args: Any, kwargs: Any, out: Tensor) -> float:
    return _conv_flops(_arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "weight"), out, False)


def _flops_conv_transpose(args: Any, kwargs: Any, out: Tensor) -> float:
    return _conv_flops(_arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "weight"), out, True)


def _flops_convolution(args: Any, kwargs: Any, out: Tensor) -> float:  # torch.convolution / torch._convolution
    transposed = bool(_arg(args, kwargs, 6, "transposed"))
    return _conv_flops(_arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "weight"), out, transposed)


def _flops_attention(args: Any, kwargs: Any, out: Tensor) -> float:
    """``scaled_dot_product_attention``: the two products ``Q K^T`` and ``A V``, ``2 · B · L · S · (E + E_v)``
    (the mask, softmax and scale not counted), where the backend that runs it is counted (the math backend, or
    a fused one on CUDA); the fused CPU kernel (which FlopCounterMode does not count) and other backends: not
    countable."""
    backend = int(torch._fused_sdp_choice(*args, **kwargs))  # 0: math; 1, 2, 3: flash, efficient, cuDNN
    q, k = _arg(args, kwargs, 0, "query"), _arg(args, kwargs, 1, "key")
    if backend != 0 and not (q.device.type == "cuda" and backend in (1, 2, 3)):
        return math.nan
    return 2.0 * math.prod(out.shape[:-1]) * k.shape[-2] * (q.shape[-1] + out.shape[-1])


def _flops_einsum(args: Any, kwargs: Any, out: Tensor) -> float:
    """A two-operand ``einsum``, as aten runs it: one bmm over the indices both operands share and the output
    drops, ``2 · out elements · their sizes``, or an elementwise product (0) when there are none; indices only one
    operand has are summed first. One operand: permutes, diagonals and sums (0). Other forms (sublists, three or
    more operands, whose pairing aten chooses, a contracted index broadcast from size 1): not countable."""
    if kwargs or not args or not isinstance(args[0], str):
        return math.nan
    ops = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
    if len(ops) == 1:
        return 0.0
    if len(ops) != 2:
        return math.nan
    terms, kept = parse_einsum(args[0], [tuple(o.shape) for o in ops])
    sizes = [dict(zip(t, o.shape)) for t, o in zip(terms, ops)]
    inner = 1
    contracted = False
    for c in set(terms[0]) & set(terms[1]) - set(kept):
        if sizes[0][c] != sizes[1][c]:
            return math.nan
        inner *= sizes[0][c]
        contracted = True
    return 2.0 * out.numel() * inner if contracted else 0.0


def _not_countable(args: Any, kwargs: Any, out: Any) -> float:
    return math.nan


FlopRule = Callable[[Any, Any, Any], float]

#: FLOP rules by function name (functions and Tensor methods alike take the operands in the same places).
_FLOP_RULES: dict[str, FlopRule] = {
    "matmul": _flops_matmul,
    "__matmul__": _flops_matmul,
    "__rmatmul__": _flops_rmatmul,
    "mm": _flops_mm,
    "bmm": _flops_mm,
    "_scaled_mm": _flops_mm,
    "addmm": _flops_addmm,
    "baddbmm": _flops_baddbmm,
    "linear": _flops_linear,
    "conv1d": _flops_conv,
    "conv2d": _flops_conv,
    "conv3d": _flops_conv,
    "conv_transpose1d": _flops_conv_transpose,
    "conv_transpose2d": _flops_conv_transpose,
    "conv_transpose3d": _flops_conv_transpose,
    "convolution": _flops_convolution,
    "_convolution": _flops_convolution,
    "scaled_dot_product_attention": _flops_attention,
    "einsum": _flops_einsum,
}

#: Names of other functions that run, or may run, matrix products or convolutions inside (in-place ``addmm_``,
#: ``inner``, ``tensordot``, ``addmv``, LSTM/GRU/RNN cells, ``bilinear``, ``torch.linalg``, ``cdist``, fused
#: attention, ...): their FLOPs are not countable from the call.
_HIDES_FLOPS = re.compile(
    r"mm|matmul|mv|dot|inner|addr|conv|linear|einsum|attention|lstm|gru|rnn|linalg|matrix_power|matrix_exp|"
    r"cdist|affine_grid|pinverse"
)

#: Python-level torch functions (dispatched as one call) that run no counted operation: activations, norms,
#: pooling, dropout, losses, padding and resampling, and the Python methods of torch.Tensor.
_FLOP_FREE = frozenset(
    """relu relu6 elu selu celu leaky_relu rrelu hardtanh hardsigmoid hardswish silu mish glu threshold _threshold
    tanhshrink softsign softmin softmax log_softmax gumbel_softmax dropout alpha_dropout dropout1d dropout2d
    dropout3d feature_alpha_dropout batch_norm instance_norm layer_norm rms_norm group_norm local_response_norm
    normalize embedding embedding_bag pad interpolate grid_sample fold unfold
    _max_pool1d _max_pool2d _max_pool3d max_pool1d_with_indices max_pool2d_with_indices max_pool3d_with_indices
    _adaptive_max_pool1d _adaptive_max_pool2d _adaptive_max_pool3d adaptive_max_pool1d_with_indices
    adaptive_max_pool2d_with_indices adaptive_max_pool3d_with_indices adaptive_avg_pool2d adaptive_avg_pool3d
    max_pool1d max_pool2d max_pool3d adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d
    fractional_max_pool2d fractional_max_pool3d lp_pool1d lp_pool2d lp_pool3d max_unpool1d max_unpool2d max_unpool3d _fractional_max_pool2d
    _fractional_max_pool3d fractional_max_pool2d_with_indices fractional_max_pool3d_with_indices
    nll_loss cross_entropy binary_cross_entropy binary_cross_entropy_with_logits mse_loss l1_loss smooth_l1_loss
    huber_loss kl_div poisson_nll_loss gaussian_nll_loss
    broadcast_tensors split _meshgrid _unique_torch_function _unique_consecutive_torch_function cartesian_prod
    block_diag atleast_1d atleast_2d atleast_3d norm unravel_index stft
    __deepcopy__ __reduce_ex__ __setstate__ __repr__ __format__ __len__ __iter__ __reversed__ __contains__ __dir__
    __array__ __array_wrap__ __rsub__ __rdiv__ __rtruediv__ __rmod__ __rpow__ __floordiv__ __rfloordiv__
    __rlshift__ __rrshift__ storage storage_type is_shared unflatten unique unique_consecutive dim_order
    resize resize_as istft register_hook""".split()
)

_BUILTIN_TYPES = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
    types.GetSetDescriptorType,
)

_RULE_CACHE: dict[Any, FlopRule | None] = {}


def flop_rule(func: Any) -> FlopRule | None:
    """How the tape counts the FLOPs of a call of ``func``: a rule, or None where it runs none.

    A builtin (C) function is counted by its name's rule, or not countable if its name is one of
    :data:`_HIDES_FLOPS`, else free. A Python function (a composite the tape cannot see inside: torch's own
    in ``torch.nn.functional``, ``torch.functional`` and ``torch.Tensor``, a user's, an operator overload) is
    free only if it is a torch function of :data:`_FLOP_FREE`, counted if it has a rule, else not countable.
    Cached per function (this runs on every operation of the plan's taped passes).
    """
    try:
        return _RULE_CACHE[func]
    except KeyError:
        pass
    except TypeError:  # an unhashable callable
        return _new_flop_rule(func)
    rule = _RULE_CACHE[func] = _new_flop_rule(func)
    return rule


def _new_flop_rule(func: Any) -> FlopRule | None:
    name = func_name(func)
    if isinstance(func, _BUILTIN_TYPES):
        rule = _FLOP_RULES.get(name)
        return rule if rule is not None else (_not_countable if _HIDES_FLOPS.search(name) else None)
    module = str(getattr(func, "__module__", None) or "")
    if not isinstance(func, types.FunctionType) or not module.startswith("torch."):
        return _not_countable
    if name in _FLOP_FREE:
        return None
    return _FLOP_RULES.get(name, _not_countable)
