"""Tests for the forward cost counted by the structured plan's taped passes (ntk_core.ntk.flops, ntk_core.ntk.structured).

The plan's two taped forward passes (2 and 3 examples) also count the
forward FLOPs and leaf-module outputs of one example, which ``method="auto"``
and ``select_method`` start from. The count must equal what
``torch.utils.flop_counter.FlopCounterMode`` counts on one example (the old
path, ``ntk_core.ntk_gram._forward_cost``), to the last FLOP: otherwise ``auto``
could choose differently. Where the tape cannot count (a composite it cannot
see inside), the old path must be taken.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from ntk_core.ntk import cost as ntk_cost, gram as ntk_gram
from ntk_core.ntk import structured as st
from ntk_core.ntk import select_method
from ntk_core.ntk.problem import _ForwardCost, _make_problem, _Problem


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, seed: int = 0) -> Tensor:
    return torch.randn(*shape, generator=gen(seed))


# --------------------------------------------------------------------------- models


class TwoLayer(nn.Module):
    """a · relu(W x / √d) in the layouts of benchmarks/bench_structured.py; readout by a vector (an mv, which
    FlopCounterMode does not count) or by a (m, 1) matrix (an mm)."""

    def __init__(self, layout: str, vector_readout: bool, d: int = 6, m: int = 20) -> None:
        super().__init__()
        self.layout, self.d = layout, d
        w = randn(m, d, seed=1)
        if layout == "nn.Linear":
            self.lin = nn.Linear(d, m, bias=False)
        else:
            self.W = nn.Parameter(w.T.contiguous() if layout == "x @ W" else w)
        self.a = nn.Parameter(randn(m, seed=2) if vector_readout else randn(m, 1, seed=2))

    def forward(self, x: Tensor) -> Tensor:
        if self.layout == "x @ W.T":
            h = x @ self.W.T
        elif self.layout == "x @ W":
            h = x @ self.W
        elif self.layout == "F.linear":
            h = F.linear(x, self.W)
        else:
            h = self.lin(x)
        return torch.relu(h / math.sqrt(self.d)) @ self.a


class SharedMLP(nn.Module):
    """W used twice (weight sharing), a bias added by addmm, a vector readout."""

    def __init__(self) -> None:
        super().__init__()
        self.W0 = nn.Parameter(randn(8, 5, seed=10))
        self.W = nn.Parameter(randn(8, 8, seed=11) / 3)
        self.b = nn.Parameter(randn(8, seed=12))
        self.v = nn.Parameter(randn(8, seed=13))

    def forward(self, x: Tensor) -> Tensor:
        h = torch.tanh(torch.addmm(self.b, x, self.W0.T))
        h = torch.tanh(h @ self.W.T)
        h = torch.tanh(torch.mm(h, self.W.T))
        return h @ self.v


class RawConvs(nn.Module):
    """Raw conv parameters: stride, padding, 'same', dilation, groups, bias; conv1d, conv3d, a transposed conv."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Parameter(randn(4, 3, 3, 3, seed=20) / 3)
        self.w2 = nn.Parameter(randn(4, 2, 3, 3, seed=21) / 3)  # groups = 2
        self.b2 = nn.Parameter(randn(4, seed=22))
        self.wt = nn.Parameter(randn(4, 3, 2, 2, seed=23) / 2)  # transposed, groups = 2: 4 -> 6 channels
        self.w1d = nn.Parameter(randn(2, 6, 3, seed=24))
        self.w3d = nn.Parameter(randn(2, 1, 2, 2, 2, seed=25))
        self.r = nn.Parameter(randn(2, seed=26))

    def forward(self, x: Tensor) -> Tensor:
        h = torch.relu(F.conv2d(x, self.w1, stride=2, padding=1))  # 9x9 -> 5x5
        h = torch.relu(F.conv2d(h, self.w2, self.b2, padding="same", dilation=2, groups=2))
        h = torch.relu(F.conv_transpose2d(h, self.wt, stride=2, output_padding=1, groups=2))  # 6 x 11 x 11
        g = F.conv1d(h.flatten(2), self.w1d, stride=5)  # (b, 2, 25)
        v = F.conv3d(h[:, None, :2], self.w3d, stride=(1, 3, 3))  # (b, 2, 1, 4, 4)
        return g.mean(-1) @ self.r + v.flatten(1).sum(1)


class BatchNormCNN(nn.Module):
    """nn.Conv2d with BatchNorm (eval), max pooling, adaptive average pooling, a biased nn.Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1),
            nn.BatchNorm2d(6),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 8, 3, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 3),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.body(x)


class Einsums(nn.Module):
    """Per-head einsum weights, an implicit output with an ellipsis, an outer product (no contraction, no FLOPs
    counted), a one-operand einsum and a list of operands."""

    def __init__(self) -> None:
        super().__init__()
        self.P = nn.Parameter(randn(5, 2, 3, seed=30))
        self.Q = nn.Parameter(randn(2, 3, 4, seed=31))
        self.R = nn.Parameter(randn(4, seed=32))
        self.S = nn.Parameter(randn(3, seed=33))

    def forward(self, x: Tensor) -> Tensor:  # x (b, 3, 5)
        h = torch.tanh(torch.einsum("bsd,dhe->bshe", x, self.P))
        h = torch.tanh(torch.einsum("bshe,hek->bshk", h, self.Q))
        y = torch.einsum("...k,k", h, self.R).sum((1, 2))  # (b,)
        o = torch.einsum("bs,t->bst", x[..., 0], self.S)  # outer product
        d = torch.einsum("bss->bs", o)  # diagonal
        return y + torch.einsum("bs,bs->b", [d, x[..., 1]])


class Attention(nn.Module):
    """A single-head and a two-head F.scaled_dot_product_attention (one causal, one with a mask, different key
    and value widths), the projections by nn.Linear and raw parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(4, 8)
        self.k = nn.Linear(4, 8)
        self.V = nn.Parameter(randn(4, 6, seed=40))
        self.out = nn.Linear(6, 1)

    def forward(self, x: Tensor) -> Tensor:  # x (b, 5, 4)
        q, k, v = self.q(x), self.k(x), x @ self.V
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, 5, 6)
        b = x.shape[0]
        qh, kh = q.view(b, 5, 2, 4).transpose(1, 2), k.view(b, 5, 2, 4).transpose(1, 2)
        vh = v.view(b, 5, 2, 3).transpose(1, 2)
        mask = torch.ones(5, 5, dtype=torch.bool).tril()
        c = F.scaled_dot_product_attention(qh, kh[:, :, :4], vh[:, :, :4], attn_mask=mask[:, :4])  # (b, 2, 5, 3)
        return self.out(a + c.transpose(1, 2).reshape(b, 5, 6)).sum((1, 2))


class BatchIndependent(nn.Module):
    """A product of two parameters (no example in it): work that does not grow with the batch, which
    FlopCounterMode counts on its one example."""

    def __init__(self) -> None:
        super().__init__()
        self.A = nn.Parameter(randn(6, 4, seed=50))
        self.B = nn.Parameter(randn(4, 6, seed=51))

    def forward(self, x: Tensor) -> Tensor:
        return (x @ (self.A @ self.B)).sum(-1)


def setting2_cnn() -> nn.Module:
    """The Setting 2 CNN as benchmarks/bench_structured.py builds it (quick profile, depth 11)."""
    from ntk_core.experiments.setting2 import Config, network

    return network(dataclasses.replace(Config.quick(), depth=11), seed=0)


def tiny_resnet() -> nn.Module:
    from ntk_core.resnet import CifarResNet

    return CifarResNet((1, 1, 1, 1), width=4, num_classes=2, in_channels=2, seed=0)


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    **{
        f"two-layer {layout}, {'vector' if vec else 'matrix'} readout": (functools.partial(TwoLayer, layout, vec), (6,))
        for layout in ("x @ W.T", "x @ W", "F.linear", "nn.Linear")
        for vec in (True, False)
    },
    "shared-weight MLP": (SharedMLP, (5,)),
    "raw convs": (RawConvs, (3, 9, 9)),
    "nn.Conv2d + BatchNorm": (BatchNormCNN, (3, 8, 8)),
    "Setting 2 CNN": (setting2_cnn, (3, 8, 8)),
    "tiny ResNet": (tiny_resnet, (2, 8, 8)),
    "einsum": (Einsums, (3, 5)),
    "scaled_dot_product_attention": (Attention, (5, 4)),
    "batch-independent work": (BatchIndependent, (6,)),
}


def problem(name: str, n: int = 4) -> _Problem:
    factory, shape = MODELS[name]
    model = factory().eval()
    return _make_problem(model, randn(n, *shape, seed=99), None, "trace", torch.float32, None, None)


def flop_counter(prob: _Problem, x: Tensor) -> float:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        prob.forward(prob.params, x)
    return float(counter.get_total_flops())


def taped_flops(prob: _Problem) -> float | None:
    """The FLOPs of one example from the two counting passes the plan makes (2 and 3 examples)."""
    aranges = st._aranges(prob)
    with torch.no_grad():
        runs = [st._tape_pass(prob, aranges, prob.x1[:b], capture=False, count=True)[0] for b in (2, 3)]
    return st._one_example(runs[0].flops, runs[1].flops)


@pytest.fixture
def old_path_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls of the FlopCounterMode path (ntk_gram._forward_cost) made by the plan."""
    calls: list[int] = []
    old = st._forward_cost

    def spy(prob: _Problem) -> _ForwardCost:
        calls.append(1)
        return old(prob)

    monkeypatch.setattr(st, "_forward_cost", spy)
    return calls


# --------------------------------------------------------------------------- the models


@pytest.mark.parametrize("name", list(MODELS))
def test_taped_count_equals_flop_counter(name: str, old_path_calls: list[int]) -> None:
    prob = problem(name)
    counted = flop_counter(prob, prob.x1[:1])
    assert taped_flops(prob) == counted
    if name != "two-layer x @ W.T, vector readout":
        assert counted > 0
    plan = st._plan(prob)
    assert not old_path_calls  # no separate counting pass
    assert plan._forward == ntk_gram._forward_cost(prob)  # FLOPs and activations, exactly


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_takes_the_flop_counter(batch_first: bool, old_path_calls: list[int]) -> None:
    """nn.MultiheadAttention's inner products run inside F.multi_head_attention_forward, one call for the tape
    (batch_first=True: FlopCounterMode sees the fused kernel, which it does not count)."""

    class MHA(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.att = nn.MultiheadAttention(8, 2, batch_first=batch_first)

        def forward(self, x: Tensor) -> Tensor:
            x = x if batch_first else x.transpose(0, 1)
            return self.att(x, x, x, need_weights=False)[0].sum((-1, -2 if batch_first else 0))

    prob = _make_problem(MHA().eval(), randn(4, 5, 8, seed=60), None, "trace", torch.float32, None, None)
    assert taped_flops(prob) is None
    plan = st._plan(prob)
    assert old_path_calls == [1]
    assert plan._forward == ntk_gram._forward_cost(prob)
    assert (flop_counter(prob, prob.x1[:1]) > 0) == (not batch_first)


@pytest.mark.parametrize("name", ["Setting 2 CNN", "tiny ResNet", "two-layer nn.Linear, matrix readout", "einsum"])
def test_select_method_estimates_are_unchanged(name: str) -> None:
    """Every method's estimate from the tape's count equals the one from the FlopCounterMode path."""
    prob = problem(name, n=16)
    old = ntk_gram._forward_cost(prob)
    before = {
        "jacobian": ntk_cost._estimate_jacobian(prob, old),
        "ntvp": ntk_cost._estimate_ntvp(prob, old)[0],
        "structured": st._plan(prob, old).estimate,
    }
    after, _, _ = ntk_gram._estimates(prob)
    assert after == before
    choice = select_method(prob.model, prob.x1, dtype=torch.float32)
    assert choice.estimates == before


# --------------------------------------------------------------------------- the rules, one call at a time


def count_call(fn: Callable[[], object]) -> tuple[float, float]:
    """(the tape's count, FlopCounterMode's count) of one call."""
    rec = st._Tape({}, {}, 1, count=True)
    with torch.no_grad():
        with rec:
            fn()
        with FlopCounterMode(display=False) as counter:
            fn()
    return rec.flops, float(counter.get_total_flops())


r = randn

CALLS: dict[str, Callable[[], object]] = {
    "2d @ 2d": lambda: r(3, 4) @ r(4, 5),
    "3d @ 2d": lambda: r(2, 3, 4) @ r(4, 5),
    "2d @ 3d": lambda: torch.matmul(r(3, 4), r(2, 4, 5)),
    "broadcast 4d @ 3d": lambda: r(2, 1, 3, 4).matmul(r(3, 4, 5)),
    "1d @ 2d": lambda: r(4) @ r(4, 5),
    "2d @ 1d": lambda: r(3, 4) @ r(4),
    "1d @ 1d": lambda: r(4) @ r(4),
    "__rmatmul__": lambda: r(4, 5).__rmatmul__(r(3, 4)),
    "mm": lambda: torch.mm(r(3, 4), r(4, 5)),
    "bmm": lambda: r(2, 3, 4).bmm(r(2, 4, 5)),
    "addmm": lambda: torch.addmm(r(5), r(3, 4), r(4, 5), beta=0.5),
    "addmm keywords": lambda: torch.addmm(r(3, 5), mat1=r(3, 4), mat2=r(4, 5)),
    "baddbmm": lambda: torch.baddbmm(r(2, 3, 5), r(2, 3, 4), r(2, 4, 5)),
    "linear 1d": lambda: F.linear(r(4), r(5, 4)),
    "linear 2d bias": lambda: F.linear(r(3, 4), r(5, 4), r(5)),
    "linear 3d bias": lambda: F.linear(r(2, 3, 4), r(5, 4), r(5)),
    "linear 4d strided": lambda: F.linear(r(2, 3, 6, 4).transpose(1, 2), r(5, 4)),
    "conv1d": lambda: F.conv1d(r(2, 4, 9), r(6, 2, 3), stride=2, groups=2),
    "conv2d unbatched": lambda: F.conv2d(r(3, 7, 7), r(5, 3, 3, 3), padding=1),
    "conv2d dilated": lambda: F.conv2d(r(2, 3, 9, 9), r(4, 3, 3, 3), dilation=2, padding="same"),
    "conv3d": lambda: F.conv3d(r(2, 2, 5, 5, 5), r(3, 2, 2, 2, 2), stride=(1, 2, 2)),
    "conv_transpose1d": lambda: F.conv_transpose1d(r(2, 4, 6), r(4, 3, 3), stride=2),
    "conv_transpose2d": lambda: F.conv_transpose2d(r(2, 4, 5, 5), r(4, 3, 3, 3), stride=2, output_padding=1, groups=2),
    "conv_transpose3d": lambda: F.conv_transpose3d(r(1, 2, 3, 3, 3), r(2, 2, 2, 2, 2), dilation=2),
    "convolution": lambda: torch.convolution(
        r(2, 3, 6, 6), r(4, 3, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1
    ),
    "convolution transposed": lambda: torch.convolution(
        r(2, 4, 5, 5), r(4, 3, 3, 3), None, [2, 2], [0, 0], [1, 1], True, [0, 0], 1
    ),
    "sdpa 3d": lambda: F.scaled_dot_product_attention(r(2, 5, 8), r(2, 7, 8), r(2, 7, 6)),
    "sdpa 4d masked": lambda: F.scaled_dot_product_attention(
        r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 6), attn_mask=torch.ones(5, 7, dtype=torch.bool)
    ),
    "sdpa 2d dropout": lambda: F.scaled_dot_product_attention(r(5, 8), r(7, 8), r(7, 8), dropout_p=0.5),
    "einsum matmul": lambda: torch.einsum("ij,jk->ik", r(3, 4), r(4, 5)),
    "einsum batched": lambda: torch.einsum("bij,bjk->bik", r(2, 3, 4), r(2, 4, 5)),
    "einsum implicit": lambda: torch.einsum("ij,jk", r(3, 4), r(4, 5)),
    "einsum full contraction": lambda: torch.einsum("ij,ij->", r(3, 4), r(3, 4)),
    "einsum summed first": lambda: torch.einsum("ij,jk->k", r(3, 4), r(4, 5)),
    "einsum outer": lambda: torch.einsum("i,j->ij", r(3), r(4)),
    "einsum diagonal": lambda: torch.einsum("ii,i->", r(3, 3), r(3)),
    "einsum ellipsis": lambda: torch.einsum("...ij,jk->...ik", r(2, 2, 3, 4), r(4, 5)),
    "einsum one operand": lambda: torch.einsum("bij->bj", r(2, 3, 4)),
    "einsum list": lambda: torch.einsum("bi,i->b", [r(3, 4), r(4)]),
    "einsum sublists": lambda: torch.einsum(r(3, 4), [0, 1], r(4, 5), [1, 2]),
    "relu, softmax, norms, pooling": lambda: F.max_pool2d(
        F.batch_norm(F.relu(r(2, 3, 4, 4)), r(3), r(3).abs(), r(3), r(3)), 2
    ).softmax(-1),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_each_rule_counts_as_flop_counter(name: str) -> None:
    ours, theirs = count_call(CALLS[name])
    assert ours == theirs


def _custom_composite(x: Tensor, w: Tensor) -> Tensor:
    """A Python function dispatched as one call (as torch's own composites are): the mode cannot see inside."""
    from torch.overrides import handle_torch_function, has_torch_function

    if has_torch_function((x, w)):
        return handle_torch_function(_custom_composite, (x, w), x, w)  # type: ignore[no-any-return]
    return x @ w


NOT_COUNTABLE: dict[str, Callable[[], object]] = {
    "3d @ 1d (mv or bmm, by strides)": lambda: r(2, 3, 4) @ r(4),
    "1d @ 3d": lambda: r(4) @ r(2, 4, 5),
    "linear with a vector weight": lambda: F.linear(r(2, 3, 4), r(4)),
    "tensordot": lambda: torch.tensordot(r(3, 4), r(4, 5), 1),
    "inner": lambda: torch.inner(r(3, 4), r(5, 4)),
    "multi_dot": lambda: torch.linalg.multi_dot([r(3, 4), r(4, 5), r(5, 2)]),
    "in-place addmm_": lambda: r(3, 5).addmm_(r(3, 4), r(4, 5)),
    "einsum of three operands": lambda: torch.einsum("ij,jk,kl->il", r(3, 4), r(4, 5), r(5, 2)),
    "einsum broadcasting a contracted index": lambda: torch.einsum("bi,bi->b", r(3, 4), r(3, 1)),
    "sdpa grouped query, fused CPU kernel": lambda: F.scaled_dot_product_attention(
        r(1, 4, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 8), enable_gqa=True
    ),
    "sdpa on the fused CPU kernel": lambda: F.scaled_dot_product_attention(r(1, 2, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 8)),
    "torch.ops": lambda: torch.ops.aten.mm(r(3, 4), r(4, 5)),
    "lstm": lambda: nn.LSTM(4, 5)(r(3, 2, 4)),
    "multi_head_attention_forward": lambda: nn.MultiheadAttention(4, 2)(r(3, 2, 4), r(3, 2, 4), r(3, 2, 4)),
    "a user's composite": lambda: _custom_composite(r(3, 4), r(4, 5)),
}


@pytest.mark.parametrize("name", list(NOT_COUNTABLE))
def test_calls_that_may_hide_flops_are_not_counted(name: str) -> None:
    ours, _ = count_call(NOT_COUNTABLE[name])
    assert math.isnan(ours)


def test_one_example_extrapolation() -> None:
    assert st._one_example(10.0, 14.0) == 6.0  # 2 + 4 b
    assert st._one_example(8.0, 12.0) == 4.0  # 4 b
    assert st._one_example(12.0, 8.0) is None  # decreasing
    assert st._one_example(2.0, 7.0) is None  # negative at one example
    assert st._one_example(math.nan, 1.0) is None
