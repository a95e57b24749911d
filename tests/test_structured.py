"""Tests for ntk_core.ntk.structured: every rule against an explicit float64 Jacobian contraction.

The oracle differentiates the whole batch with ``torch.func.jacrev`` (no
per-example trick, no structure) and contracts with ``einsum``; each model is
also compared with ``ntk_core.ntk.empirical_ntk(method="jacobian")``. The
routes each parameter takes are asserted too, so that a rule silently falling
back to Jacobians is caught.
"""

from __future__ import annotations

import dataclasses
import doctest
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ntk_core.ntk import structured as st
from ntk_core.ntk import empirical_ntk
from ntk_core.ntk.problem import _make_problem
from ntk_core.ntk import ROUTES, plan_structured, structured_ntk
from ntk_oracle import reference_ntk as oracle

F64 = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, seed: int = 0) -> Tensor:
    return torch.randn(*shape, generator=gen(seed), dtype=F64)


def check(
    model: nn.Module,
    x1: Tensor,
    x2: Tensor | None = None,
    output: str = "trace",
    routes: dict[str, str] | None = None,
    **kw: object,
) -> Tensor:
    """structured_ntk == oracle == empirical_ntk(method="jacobian") to 1e-10 (relative), routes as expected."""
    model = model.double()
    k = structured_ntk(model, x1, x2, output=output, dtype=F64, **kw)  # type: ignore[arg-type]
    ref = oracle(model, x1, x1 if x2 is None else x2, output)
    assert k.shape == ref.shape and k.dtype == F64
    scale = float(ref.abs().max())
    assert scale > 0
    assert float((k - ref).abs().max()) <= 1e-10 * scale
    jac = empirical_ntk(model, x1, x2, method="jacobian", output=output, dtype=F64)  # type: ignore[arg-type]
    assert float((k - jac).abs().max()) <= 1e-10 * scale
    if routes is not None:
        plan = plan_structured(model, x1, x2, output=output, dtype=F64)  # type: ignore[arg-type]
        assert {n: r.route for n, r in plan.routes.items()} == routes, str(plan)
    return k


# --------------------------------------------------------------------------- models


class TwoLayer(nn.Module):
    """f(x) = a . relu(W x / sqrt(d)) / sqrt(m) in one of four layouts of W."""

    def __init__(self, layout: str, d: int = 6, m: int = 40, outputs: int = 1) -> None:
        super().__init__()
        self.layout = layout
        w = randn(m, d, seed=1)
        self.d, self.m = d, m
        if layout == "module":
            self.lin = nn.Linear(d, m, bias=False, dtype=F64)
            with torch.no_grad():
                self.lin.weight.copy_(w)
        else:
            self.W = nn.Parameter(w.T.clone() if layout == "x@W" else w)
        self.a = nn.Parameter(randn(m, outputs, seed=2))

    def forward(self, x: Tensor) -> Tensor:
        if self.layout == "x@W.T":
            h = x @ self.W.T
        elif self.layout == "x@W":
            h = x @ self.W
        elif self.layout == "F.linear":
            h = F.linear(x, self.W)
        else:
            h = self.lin(x)
        return (torch.relu(h / math.sqrt(self.d)) @ self.a / math.sqrt(self.m)).squeeze(-1)


@pytest.mark.parametrize("layout", ["x@W.T", "x@W", "F.linear", "module"])
def test_two_layer_every_layout(layout: str) -> None:
    net = TwoLayer(layout)
    wname = "lin.weight" if layout == "module" else "W"
    x1, x2 = randn(7, 6, seed=3), randn(4, 6, seed=4)
    check(net, x1, routes={wname: "gram", "a": "gram"})
    check(net, x1, x2)


def test_two_layer_layouts_agree_with_each_other() -> None:
    x = randn(5, 6, seed=5)
    ks = [structured_ntk(TwoLayer(l).double(), x, dtype=F64) for l in ("x@W.T", "x@W", "F.linear", "module")]
    for k in ks[1:]:
        torch.testing.assert_close(k, ks[0], rtol=1e-12, atol=1e-12)


class SharedMLP(nn.Module):
    """Raw parameters; W is used twice (h2 = relu(h1 W^T), h3 = relu(h2 W^T)): weight sharing."""

    def __init__(self, tied_transposed: bool = False) -> None:
        super().__init__()
        self.W0 = nn.Parameter(randn(8, 5, seed=10))
        self.W = nn.Parameter(randn(8, 8, seed=11) / 3)
        self.v = nn.Parameter(randn(8, seed=12))
        self.tied = tied_transposed

    def forward(self, x: Tensor) -> Tensor:
        h = torch.tanh(x @ self.W0.T)
        h = torch.tanh(h @ self.W.T)
        h = torch.tanh(h @ (self.W if self.tied else self.W.T))
        return h @ self.v


def test_shared_weight_cross_terms() -> None:
    x1, x2 = randn(6, 5, seed=13), randn(3, 5, seed=14)
    check(SharedMLP(), x1, routes={"W0": "gram", "W": "gram", "v": "gram"})
    check(SharedMLP(), x1, x2)
    plan = plan_structured(SharedMLP().double(), x1, dtype=F64)
    assert plan.routes["W"].uses.startswith("2 x bilinear")


def test_shared_weight_in_two_layouts_uses_per_example_gradients() -> None:
    x = randn(6, 5, seed=15)
    check(SharedMLP(tied_transposed=True), x, routes={"W0": "gram", "W": "grad", "v": "gram"})


class Biased(nn.Module):
    """Biases added by +, by F.linear, by addmm (with alpha/beta) and by a convolution's bias."""

    def __init__(self) -> None:
        super().__init__()
        self.W1 = nn.Parameter(randn(7, 4, seed=20))
        self.b1 = nn.Parameter(randn(7, seed=21))
        self.W2 = nn.Parameter(randn(7, 6, seed=22))
        self.b2 = nn.Parameter(randn(6, seed=23))
        self.W3 = nn.Parameter(randn(3, 6, seed=24))
        self.b3 = nn.Parameter(randn(3, seed=25))
        self.b4 = nn.Parameter(randn(1, 3, seed=26))

    def forward(self, x: Tensor) -> Tensor:
        h = torch.tanh(x @ self.W1.T + self.b1)
        h = torch.tanh(torch.addmm(self.b2, h, self.W2, beta=0.5, alpha=2.0))
        return F.linear(h, self.W3, self.b3) - self.b4


def test_biases() -> None:
    x1, x2 = randn(5, 4, seed=27), randn(3, 4, seed=28)
    routes = {"W1": "gram", "b1": "grad", "W2": "gram", "b2": "grad", "W3": "gram", "b3": "grad", "b4": "grad"}
    check(Biased(), x1, routes=routes)
    check(Biased(), x1, x2, output="full")


def test_frozen_parameter_and_buffer_are_constants() -> None:
    net = Biased().double()
    net.W2.requires_grad_(False)
    net.register_buffer("shift", randn(3, seed=29))
    orig = net.forward
    net.forward = lambda x: orig(x) + net.shift  # type: ignore[method-assign]
    x = randn(5, 4, seed=30)
    plan = plan_structured(net, x, dtype=F64)
    assert "W2" not in plan.routes
    check(net, x)


class Unsupported(nn.Module):
    """v goes through tanh and s through an elementwise square: Jacobians for those two only."""

    def __init__(self) -> None:
        super().__init__()
        self.W = nn.Parameter(randn(9, 4, seed=40))
        self.v = nn.Parameter(randn(9, seed=41))
        self.s = nn.Parameter(randn(9, seed=42))

    def forward(self, x: Tensor) -> Tensor:
        h = torch.relu(x @ self.W.T) * self.s**2
        return h @ torch.tanh(self.v)


def test_unsupported_op_falls_back_for_that_parameter_only() -> None:
    x1 = randn(6, 4, seed=43)
    check(Unsupported(), x1, routes={"W": "gram", "v": "jacobian", "s": "jacobian"})
    plan = plan_structured(Unsupported().double(), x1, dtype=F64)
    assert "tanh" in plan.routes["v"].reason and "pow" in plan.routes["s"].reason


@pytest.mark.parametrize("output", ["trace", "full"])
def test_multi_output_head(output: str) -> None:
    net = TwoLayer("x@W.T", outputs=3)
    x1, x2 = randn(5, 6, seed=50), randn(4, 6, seed=51)
    k = check(net, x1, x2, output=output, routes={"W": "gram", "a": "gram"})
    assert k.shape == ((5, 4, 3, 3) if output == "full" else (5, 4))
    check(net, x1, output=output, tile_size=2)


class RawCNN(nn.Module):
    """Raw conv parameters: stride, padding, dilation, groups, 'same' padding, bias; a raw readout."""

    def __init__(self, outputs: int = 2) -> None:
        super().__init__()
        self.w1 = nn.Parameter(randn(4, 3, 3, 3, seed=60) / 3)
        self.w2 = nn.Parameter(randn(4, 2, 3, 3, seed=61) / 3)  # groups=2
        self.b2 = nn.Parameter(randn(4, seed=62))
        self.w3 = nn.Parameter(randn(6, 4, 2, 2, seed=63) / 2)
        self.r = nn.Parameter(randn(6 * 3 * 3, outputs, seed=64) / 5)

    def forward(self, x: Tensor) -> Tensor:
        h = torch.relu(F.conv2d(x, self.w1, stride=2, padding=1))  # 9x9 -> 5x5
        h = torch.relu(F.conv2d(h, self.w2, self.b2, padding="same", dilation=2, groups=2))  # 5x5
        h = torch.relu(F.conv2d(h, self.w3, stride=(2, 1), padding=(1, 0)))  # 5x5 -> 3x4
        return h[:, :, :, :3].flatten(1) @ self.r


@pytest.mark.parametrize("output", ["trace", "full"])
def test_raw_cnn(output: str) -> None:
    x1, x2 = randn(4, 3, 9, 9, seed=65), randn(3, 3, 9, 9, seed=66)
    k = check(RawCNN(), x1, x2, output=output)
    assert k.shape[:2] == (4, 3)
    plan = plan_structured(RawCNN().double(), x1, dtype=F64)
    assert all(r.route in ("gram", "grad") for r in plan.routes.values()), str(plan)


def test_nn_conv2d_and_conv1d_conv3d() -> None:
    class Convs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c2 = nn.Conv2d(2, 3, 3, stride=2, padding=1, padding_mode="reflect")
            self.c1 = nn.Conv1d(3, 2, 2, dilation=2)
            self.w3 = nn.Parameter(randn(2, 1, 2, 2, 2, seed=70))

        def forward(self, x: Tensor) -> Tensor:
            h = torch.tanh(self.c2(x))  # (b, 3, 3, 3)
            g = torch.tanh(self.c1(h.flatten(2)))  # (b, 2, 7)
            v = F.conv3d(h[:, None], self.w3, stride=(1, 2, 1))  # (b, 2, 2, 1, 2)
            return g.sum((1, 2)) + v.flatten(1).sum(1)

    torch.manual_seed(0)
    x = randn(4, 2, 6, 6, seed=71)
    check(Convs(), x)
    plan = plan_structured(Convs().double(), x, dtype=F64)
    assert all(r.route != "jacobian" for r in plan.routes.values()), str(plan)


def test_einsum_layouts() -> None:
    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.P = nn.Parameter(randn(5, 2, 3, seed=80))  # d -> (heads, d_head)
            self.Q = nn.Parameter(randn(2, 3, 4, seed=81))  # per-head block (G = 2)
            self.R = nn.Parameter(randn(4, seed=82))

        def forward(self, x: Tensor) -> Tensor:
            h = torch.tanh(torch.einsum("bsd,dhe->bshe", x, self.P))
            h = torch.tanh(torch.einsum("bshe,hek->bshk", h, self.Q))
            return torch.einsum("...k,k", h, self.R).sum((1, 2))

    x1, x2 = randn(4, 3, 5, seed=83), randn(2, 3, 5, seed=84)
    check(Heads(), x1, x2)
    plan = plan_structured(Heads().double(), x1, dtype=F64)
    assert all(r.route != "jacobian" for r in plan.routes.values()), str(plan)
    assert "G=2" in plan.routes["Q"].uses


class Views(nn.Module):
    """Left matmul over positions, scaled views, disjoint halves, an expanded bmm weight, a partial slice."""

    def __init__(self) -> None:
        super().__init__()
        self.W = nn.Parameter(randn(6, 4, seed=90))
        self.U = nn.Parameter(randn(3, 6, seed=91))
        self.S = nn.Parameter(randn(6, 6, seed=92) / 3)
        self.B = nn.Parameter(randn(6, 2, seed=93))

    def forward(self, x: Tensor) -> Tensor:  # x (b, 4, 5): features then positions
        h = torch.tanh(self.W @ x / 2)  # left matmul, T = 5
        h = h.transpose(1, 2)  # (b, 5, 6)
        top, bottom = self.S.chunk(2, dim=0)  # disjoint halves of one parameter
        h = torch.tanh(torch.cat([h @ (top.T * 0.5), h @ (-bottom).T / 3], -1))  # scaled weights
        h = torch.bmm(h, self.B.unsqueeze(0).expand(h.shape[0], 6, 2))  # expanded over examples
        return (h.reshape(h.shape[0], -1) @ self.U.flatten()[:10]).unsqueeze(-1)


def test_views_scales_left_matmul_bmm_and_disjoint_slices() -> None:
    x1, x2 = randn(4, 4, 5, seed=94), randn(3, 4, 5, seed=95)
    check(Views(), x1, x2)
    plan = plan_structured(Views().double(), x1, dtype=F64)
    assert all(r.route != "jacobian" for r in plan.routes.values()), str(plan)
    assert plan.routes["S"].uses.startswith("2 x bilinear")


@pytest.mark.parametrize("route", ["gram", "grad"])
def test_both_routes_on_positions_and_groups(route: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Force every structured parameter onto one route: both rules are exact (T > 1, G > 1, full output)."""
    plan_fn = st._plan

    def forced(prob: object, *args: object) -> st.StructuredPlan:
        plan = plan_fn(prob, *args)  # type: ignore[arg-type]
        for n, r in plan.routes.items():
            if r.route != "jacobian" and (route == "grad" or st._gram_groups(_uses(prob, n)) is not None):
                plan.routes[n] = dataclasses.replace(r, route=route)
        return plan

    monkeypatch.setattr(st, "_plan", forced)
    x1, x2 = randn(3, 3, 9, 9, seed=96), randn(2, 3, 9, 9, seed=97)
    check(RawCNN(), x1, x2, output="full")
    check(RawCNN(outputs=1), x1)
    check(SharedMLP(), randn(4, 5, seed=98))
    check(Views(), randn(3, 4, 5, seed=99), randn(2, 4, 5, seed=100))
    check(CifarResNetSmall(), randn(2, 2, 8, 8, seed=101))


def CifarResNetSmall() -> nn.Module:  # noqa: N802 - a factory named like the class it builds
    from ntk_core.resnet import CifarResNet

    return CifarResNet((1, 1, 1, 1), width=4, num_classes=2, in_channels=2, seed=0).double().eval()


def _uses(prob: object, name: str) -> list[object]:
    p = prob  # a _Problem
    rec, _ = st._tape_pass(p, st._aranges(p), p.x1[:2], capture=False)  # type: ignore[attr-defined,arg-type]
    return [u for u in rec.uses if u.name == name]


def test_example_axis_not_leading_falls_back() -> None:
    class Transposed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.W = nn.Parameter(randn(5, 4, seed=100))

        def forward(self, x: Tensor) -> Tensor:
            return torch.tanh(self.W @ x.T).sum(0)  # (5, b): the examples are the columns

    x = randn(5, 4, seed=101)
    check(Transposed(), x, routes={"W": "jacobian"})


def test_float32_and_tiles_and_numpy_inputs() -> None:
    net = TwoLayer("x@W.T", d=6, m=30, outputs=2).float()
    x = np.random.default_rng(0).standard_normal((9, 6)).astype(np.float32)
    k = structured_ntk(net, x, tile_size=4, out_dtype=F64)
    ref = oracle(net, torch.from_numpy(x), torch.from_numpy(x), "trace")
    assert k.dtype == F64
    assert float((k - ref).abs().max()) <= 1e-4 * float(ref.abs().max())
    torch.testing.assert_close(k, k.T)


def test_checkpoint_and_callback(tmp_path: object) -> None:
    net = TwoLayer("x@W").double()
    x = randn(6, 6, seed=110)
    seen: list[tuple[int, int, bool]] = []
    k1 = structured_ntk(
        net,
        x,
        dtype=F64,
        tile_size=3,
        checkpoint_dir=tmp_path,  # type: ignore[arg-type]
        callback=lambda i, j, c: seen.append((i, j, c)),
    )
    k2 = structured_ntk(
        net,
        x,
        dtype=F64,
        tile_size=3,
        checkpoint_dir=tmp_path,  # type: ignore[arg-type]
        callback=lambda i, j, c: seen.append((i, j, c)),
    )
    torch.testing.assert_close(k1, k2)
    assert [c for *_, c in seen] == [True] * 3 + [False] * 3


def test_operations_that_change_with_the_batch_are_refused() -> None:
    class Moody(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.W = nn.Parameter(randn(4, 3, seed=120))

        def forward(self, x: Tensor) -> Tensor:
            h = x @ self.W.T
            if x.shape[0] > 3:
                h = h + x @ self.W.T
            return h.sum(1)

    with pytest.raises(RuntimeError, match="changed between batches"):
        structured_ntk(Moody(), randn(5, 3, seed=121), dtype=F64)


def test_plan_prints_and_routes_are_known() -> None:
    plan = plan_structured(Unsupported(), randn(4, 4, seed=130).float())
    text = str(plan)
    assert text.startswith("structured:") and "jacobian" in text and "gram" in text
    assert {r.route for r in plan.routes.values()} <= set(ROUTES)
    assert plan.estimate.method == "structured" and plan.estimate.flops > 0
    assert plan.names("jacobian") == ["v", "s"]


def test_estimate_is_comparable_with_select_method() -> None:
    from ntk_core.ntk import select_method

    net, x = TwoLayer("module", d=20, m=200), torch.randn(50, 20)
    ours = plan_structured(net, x).estimate
    theirs = select_method(net, x).estimates["structured"]
    assert 0.2 < ours.flops / theirs.flops < 5


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"output": "diag"}, ValueError, "output must be one of"),
        ({"tile_size": 0}, ValueError, "tile_size must be an int >= 1"),
        ({"dtype": torch.float16}, ValueError, "dtype must be torch.float32 or torch.float64"),
        ({"memory_budget": -1}, ValueError, "memory_budget must be an int >= 1"),
        ({"x1": [[1.0]]}, TypeError, "x1 must be a torch.Tensor"),
        ({"x1": torch.full((2, 6), float("nan"))}, ValueError, "NaN"),
        ({"x2": torch.zeros(2, 5)}, ValueError, "same feature shape"),
        ({"model": "net"}, TypeError, "model must be a torch.nn.Module"),
    ],
)
def test_bad_input(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    args: dict[str, object] = {"model": TwoLayer("x@W.T"), "x1": torch.zeros(3, 6)}
    args.update(kwargs)
    model, x1 = args.pop("model"), args.pop("x1")
    with pytest.raises(error, match=match):
        structured_ntk(model, x1, **args)  # type: ignore[arg-type]
    if "tile_size" not in kwargs:
        with pytest.raises(error, match=match):
            plan_structured(model, x1, **args)  # type: ignore[arg-type]


def test_models_that_are_not_a_fixed_function_are_refused() -> None:
    net = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1))
    with pytest.raises(ValueError, match="model.eval"):
        structured_ntk(net, torch.zeros(2, 3))
    frozen = nn.Linear(3, 1).requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        structured_ntk(frozen, torch.zeros(2, 3))


def test_docstring_examples_run() -> None:
    for obj in (structured_ntk, plan_structured):
        finder = doctest.DocTestFinder()
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        for test in finder.find(obj, globs={"structured_ntk": structured_ntk, "plan_structured": plan_structured}):
            runner.run(test)
        assert runner.failures == 0 and runner.tries > 0


def test_problem_helpers_are_shared_with_ntk() -> None:
    """The engine plugs into ntk.py's tiles: its features/kernel protocol on a problem built there."""
    net = TwoLayer("x@W.T").double()
    x = randn(4, 6, seed=140)
    prob = _make_problem(net, x, None, "trace", F64, None, None)
    engine = st._OperationEngine(prob, st._plan(prob))
    f = engine.features(x)
    torch.testing.assert_close(engine.kernel(f, f), oracle(net, x, x, "trace"), rtol=1e-10, atol=1e-12)


def test_the_projects_networks() -> None:
    """nets.py / resnet.py models: same kernel as the oracle; eval-mode BatchNorm's affine parameters are structured."""
    from ntk_core.nets import MLP, ConvNet, DifferenceTrick, TwoLayerNet
    from ntk_core.resnet import CifarResNet

    check(TwoLayerNet(d=6, width=30, seed=0, train_second=True), randn(5, 6, seed=150))
    check(MLP(6, [12, 10], out_dim=3, frozen=[1], seed=0), randn(4, 6, seed=151), output="full")
    check(DifferenceTrick(ConvNet(2, 4, depth=3, seed=0)), randn(3, 2, 6, 6, seed=152))
    resnet = CifarResNet((1, 1, 1, 1), width=4, num_classes=2, in_channels=2, seed=0).double().eval()
    x = randn(3, 2, 8, 8, seed=153)
    check(resnet, x)
    routes = {n: r.route for n, r in plan_structured(resnet, x, dtype=F64).routes.items()}
    assert all(r != "jacobian" for r in routes.values()), routes


def test_norm_affine_and_elementwise_scales() -> None:
    """LayerNorm / BatchNorm (eval) affine parameters and ``h * s`` gains: diagonal weights (G > 1, D = K = 1)."""

    class Normed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1).double()
            self.bn = nn.BatchNorm2d(3).double().eval()
            with torch.no_grad():
                self.bn.running_mean.copy_(randn(3, seed=160))
                self.bn.running_var.copy_(randn(3, seed=161).abs() + 0.5)
                self.bn.weight.copy_(randn(3, seed=162))
                self.bn.bias.copy_(randn(3, seed=163))
            self.ln = nn.LayerNorm([3, 4, 4]).double()
            with torch.no_grad():
                self.ln.weight.copy_(randn(3, 4, 4, seed=164))
                self.ln.bias.copy_(randn(3, 4, 4, seed=165))
            self.gain = nn.Parameter(randn(3, 1, 4, seed=166))
            self.head = nn.Parameter(randn(48, 2, seed=167) / 7)

        def forward(self, x: Tensor) -> Tensor:
            h = torch.tanh(self.bn(self.conv(x)))
            h = torch.tanh(self.ln(h) * self.gain)
            return h.flatten(1) @ self.head

    net = Normed().eval()
    x1, x2 = randn(4, 2, 4, 4, seed=168), randn(3, 2, 4, 4, seed=169)
    check(net, x1, x2, output="full")
    check(net, x1)
    plan = plan_structured(net, x1, dtype=F64)
    assert all(r.route != "jacobian" for r in plan.routes.values()), str(plan)


@pytest.mark.parametrize(("im2col_channels", "sym_block"), [(0, 2), (1000, 3)])
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
def test_conv_gradients_both_ways_and_symmetric_blocks(
    im2col_channels: int, sym_block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-example conv weight gradients by grouped convolution (threshold 0) and by im2col + bmm (threshold
    1000, on any number of threads), with diagonal tiles formed block row by block row (``_SYM_BLOCK`` 2 or 3; the other tests form
    them whole): all exact."""
    monkeypatch.setattr(st, "_IM2COL_MAX_CHANNELS", im2col_channels)
    monkeypatch.setattr(st, "_IM2COL_MIN_THREADS", 1)  # whatever the threads of the test run
    monkeypatch.setattr(st, "_SYM_BLOCK", sym_block)

    class Convs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c2 = nn.Conv2d(2, 3, 3, stride=2, padding=1)
            self.c1 = nn.Conv1d(3, 2, 2, dilation=2, bias=False)
            self.w3 = nn.Parameter(randn(2, 1, 2, 2, 2, seed=170))
            self.w4 = nn.Parameter(randn(3, 3, 2, 2, seed=171))  # padding (0, 1) on one side only: "same"

        def forward(self, x: Tensor) -> Tensor:
            h = torch.tanh(self.c2(x))  # (b, 3, 3, 3)
            g = torch.tanh(self.c1(h.flatten(2)))  # (b, 2, 7)
            v = F.conv3d(h[:, None], self.w3 * 0.5, stride=(1, 2, 1))  # (b, 2, 2, 1, 2); a scaled weight
            w = F.conv2d(h, self.w4, padding="same")  # (b, 3, 3, 3)
            return g.sum((1, 2)) + v.flatten(1).sum(1) + torch.tanh(w).flatten(1).sum(1)

    for net in (Convs(), RawCNN(outputs=1)):
        plan = plan_structured(net.double(), randn(2, *((2, 6, 6) if isinstance(net, Convs) else (3, 9, 9))))
        assert all(r.route != "jacobian" for r in plan.routes.values()), str(plan)
    check(Convs(), randn(5, 2, 6, 6, seed=172))
    check(Convs(), randn(5, 2, 6, 6, seed=173), randn(3, 2, 6, 6, seed=174))
    check(RawCNN(outputs=1), randn(5, 3, 9, 9, seed=175))
    check(RawCNN(outputs=2), randn(5, 3, 9, 9, seed=176), tile_size=3)
    check(RawCNN(outputs=2), randn(4, 3, 9, 9, seed=177), output="full")
    check(TwoLayer("x@W.T", outputs=3), randn(7, 6, seed=178))  # pairwise rule with T = 1 on a diagonal tile
    check(SharedMLP(), randn(5, 5, seed=179))
    uses = [
        u
        for u in _uses(_make_problem(Convs().double(), randn(2, 2, 6, 6), None, "trace", F64, None, None), "c2.weight")
    ]
    assert (uses[0].grad_of is None) == (im2col_channels >= 2)  # type: ignore[attr-defined]


def test_self_gram_blocks() -> None:
    a = randn(11, 7, seed=180)
    for block in (1, 2, 3, 5, 11, 20):
        old, st._SYM_BLOCK = st._SYM_BLOCK, block
        try:
            torch.testing.assert_close(st._self_gram(a), a @ a.T, rtol=1e-13, atol=1e-13)
        finally:
            st._SYM_BLOCK = old


def test_conv_gradient_path_depends_on_channels_and_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """im2col + bmm only for few input channels and several threads; the grouped convolution otherwise."""
    net = nn.Conv2d(3, 4, 3, bias=False).double()
    x = randn(2, 3, 5, 5, seed=181)
    prob = _make_problem(net, x, None, "trace", F64, None, None)
    threads = torch.get_num_threads()
    try:
        for n_threads, max_channels, im2col in ((1, 8, False), (2, 8, True), (2, 2, False)):
            torch.set_num_threads(n_threads)
            monkeypatch.setattr(st, "_IM2COL_MAX_CHANNELS", max_channels)
            (use,) = _uses(prob, "weight")
            assert (use.grad_of is None) == im2col, (n_threads, max_channels)  # type: ignore[attr-defined]
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("taps", [True, False])
def test_gradient_taps_and_in_place_outputs(taps: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cotangents by differentiating the taped outputs themselves (taps) or zero probes: both exact; an
    output changed in place later (a leaf: refused by autograd; a non-leaf: its version moves) runs the
    forward pass again with probes."""
    monkeypatch.setattr(st, "_GRADIENT_TAPS", taps)
    calls: list[bool] = []
    record = st._tape_pass

    def spy(*args: object, **kwargs: object) -> object:
        if kwargs.get("capture", args[3] if len(args) > 3 else False):
            calls.append(bool(kwargs.get("taps", False)))
        return record(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(st, "_tape_pass", spy)

    class InPlace(nn.Module):
        def __init__(self, where: str) -> None:
            super().__init__()
            self.where = where
            self.c1 = nn.Conv2d(2, 3, 3, padding=1)
            self.c2 = nn.Conv2d(3, 3, 3)
            self.head = nn.Parameter(randn(12, 2, seed=190) / 3)

        def forward(self, x: Tensor) -> Tensor:
            h = self.c1(x)  # x is not differentiated: with taps this output is a leaf
            h = F.relu(h, inplace=True) if self.where == "leaf" else torch.tanh(h)
            h = self.c2(h)
            h = h.relu_() if self.where == "later" else torch.relu(h)
            return h.flatten(1) @ self.head

    x1, x2 = randn(4, 2, 4, 4, seed=191), randn(3, 2, 4, 4, seed=192)
    for where, retried in (("none", False), ("leaf", True), ("later", True)):
        calls.clear()
        check(InPlace(where), x1, output="full")
        assert calls == ([True, False] if taps and retried else [taps]), (where, calls)
        check(InPlace(where), x1, x2)
    check(RawCNN(), randn(3, 3, 9, 9, seed=193))
    check(TwoLayer("x@W.T", outputs=3), randn(5, 6, seed=194), output="full")
    check(SharedMLP(), randn(4, 5, seed=195))
