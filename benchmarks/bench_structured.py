"""Benchmark of ntk_core.ntk.structured_ntk (structured derivatives found from the operations) — issue 14.

Run from the repository root::

    python benchmarks/bench_structured.py            # two-layer n = 512 (4 layouts), CNN n = 128
    python benchmarks/bench_structured.py --big      # also the two-layer net at n = 2,000
    python benchmarks/bench_structured.py --quick    # small sizes, a smoke test
    python benchmarks/bench_structured.py --cnn-only # only the two CNN models
    python benchmarks/bench_structured.py --models two-layer --width 10000 --n 512 2000 --no-tutorial
    python benchmarks/bench_structured.py --models cnn --n 512            # the 3-layer CNN at n = 512
    python benchmarks/bench_structured.py --models setting2 --n 256       # the Setting 2 CNN (11 layers)

Everything runs side by side in this process, float32, on the CPU with
torch's default threads. For each model it times

* ``closed form``: the hand-written NTK where one exists (two-layer net with
  the first layer trained: ``Θ = (X X'^T / d) ⊙ (S S'^T / m)``,
  ``S = relu'(X W^T / √d) · a``);
* ``structured_ntk``: this engine (``ntk_core.ntk.structured``);
* ``tutorial``: the ``torch.func`` NTK tutorial's recipe, written below:
  per-example Jacobians ``vmap(jacrev)`` of the whole batch, then ``einsum``
  over every parameter (x2 = x1, so the Jacobian is computed once);
* ``empirical_ntk auto``: ``ntk_core.ntk.empirical_ntk(method="auto")``, which
  takes this engine (its ``"structured"`` method) or another method by the
  cost model (the note names its pick).

Each result is checked against the first one of its model (relative
Frobenius error printed). ``ratio`` is the row's time over the reference
(the closed form where there is one, else the tutorial). ``LB`` is the FLOP
lower bound of a Jacobian contraction, ``3 × forward FLOPs × n + 2 n² N``
(N trained parameters), with the forward FLOPs counted analytically from the
shapes of every convolution and matrix product the model runs
(:func:`forward_flops`: ``2 × output elements × (C_in / groups) × kernel
size`` for a convolution, ``2 × output elements × inner size`` for
``linear`` / ``matmul`` / ``mm`` / ``bmm`` / ``addmm``; elementwise work is
not counted). ``LB rate`` = LB / seconds, and ``% peak`` divides it by the
GFLOP/s of a 2048² float32 matrix product measured in this process (the best
of one measurement per round, so 100 %
would be a Jacobian contraction running at matmul speed; the structured rules
do fewer FLOPs than LB and can exceed 100 %); ``x LB`` = seconds / (LB /
sgemm rate), the time as a multiple of the lower bound's time (its inverse is
``% peak``): a method that does LB's FLOPs at sgemm speed can be at most
``x LB`` times faster than the row. The methods of one model run interleaved,
three rounds (a method that took 10 s or more runs once), best time kept: the
machine is shared, and a slow minute should hit every method of a model alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap
from torch.overrides import TorchFunctionMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ntk_core.experiments.setting2 import Config as Setting2Config  # noqa: E402
from ntk_core.experiments.setting2 import network as setting2_network  # noqa: E402
from ntk_core.ntk import empirical_ntk, select_method  # noqa: E402
from ntk_core.ntk import plan_structured, structured_ntk  # noqa: E402


# --------------------------------------------------------------------------- models


class TwoLayer(nn.Module):
    """f(x) = a · relu(W x / √d) / √m, W trained, a frozen (paper, Setting 1), in one of four layouts."""

    def __init__(self, layout: str, d: int, m: int, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(m, d, generator=g)
        self.layout, self.d, self.m = layout, d, m
        if layout == "nn.Linear":
            self.lin = nn.Linear(d, m, bias=False)
            with torch.no_grad():
                self.lin.weight.copy_(w)
        else:
            self.W = nn.Parameter(w.T.contiguous() if layout == "x @ W" else w)
        self.a = nn.Parameter(torch.randint(0, 2, (m,), generator=g).float() * 2 - 1, requires_grad=False)

    def weight(self) -> Tensor:
        """W as (m, d)."""
        w = self.lin.weight if self.layout == "nn.Linear" else self.W
        return (w.T if self.layout == "x @ W" else w).detach()

    def forward(self, x: Tensor) -> Tensor:
        if self.layout == "x @ W.T":
            h = x @ self.W.T
        elif self.layout == "x @ W":
            h = x @ self.W
        elif self.layout == "F.linear":
            h = F.linear(x, self.W)
        else:
            h = self.lin(x)
        return torch.relu(h / math.sqrt(self.d)) @ self.a / math.sqrt(self.m)


def closed_form(net: TwoLayer, x: Tensor) -> Tensor:
    """Θ(x, x') = (x·x'/d) (1/m) Σ_r a_r² 1[w_r·x > 0] 1[w_r·x' > 0], by two matrix products."""
    s = (x @ net.weight().T > 0).to(x.dtype) * net.a
    return (x @ x.T / net.d) * (s @ s.T / net.m)


class RawCNN(nn.Module):
    """3 conv layers of 64 channels (3×3; strides 1, 2, 2; padding 1), ReLU, raw readout: raw parameters."""

    def __init__(self, channels: int = 64, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w1 = nn.Parameter(torch.randn(channels, 3, 3, 3, generator=g))
        self.w2 = nn.Parameter(torch.randn(channels, channels, 3, 3, generator=g))
        self.w3 = nn.Parameter(torch.randn(channels, channels, 3, 3, generator=g))
        self.r = nn.Parameter(torch.randn(channels * 8 * 8, generator=g))
        self.c = channels

    def forward(self, x: Tensor) -> Tensor:
        h = torch.relu(F.conv2d(x, self.w1, padding=1) / math.sqrt(27))
        h = torch.relu(F.conv2d(h, self.w2, stride=2, padding=1) / math.sqrt(9 * self.c))
        h = torch.relu(F.conv2d(h, self.w3, stride=2, padding=1) / math.sqrt(9 * self.c))
        return h.flatten(1) @ self.r / math.sqrt(self.r.numel())


class ModuleCNN(nn.Module):
    """The same network with nn.Conv2d / nn.Linear modules (weights copied from a RawCNN)."""

    def __init__(self, raw: RawCNN) -> None:
        super().__init__()
        c = raw.c
        self.c1 = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.c2 = nn.Conv2d(c, c, 3, stride=2, padding=1, bias=False)
        self.c3 = nn.Conv2d(c, c, 3, stride=2, padding=1, bias=False)
        self.out = nn.Linear(c * 64, 1, bias=False)
        with torch.no_grad():
            for mod, w in ((self.c1, raw.w1), (self.c2, raw.w2), (self.c3, raw.w3)):
                mod.weight.copy_(w)
            self.out.weight.copy_(raw.r[None])
        self.c = c

    def forward(self, x: Tensor) -> Tensor:
        h = torch.relu(self.c1(x) / math.sqrt(27))
        h = torch.relu(self.c2(h) / math.sqrt(9 * self.c))
        h = torch.relu(self.c3(h) / math.sqrt(9 * self.c))
        return self.out(h.flatten(1)).squeeze(-1) / math.sqrt(self.out.weight.numel())


# --------------------------------------------------------------------------- the tutorial's recipe


def tutorial_ntk(model: nn.Module, x: Tensor) -> Tensor:
    """torch.func tutorial: per-example Jacobians by vmap(jacrev), then einsum over parameters (trace)."""
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    consts = {k: v.detach() for k, v in model.named_parameters() if not v.requires_grad}
    consts.update(dict(model.named_buffers()))

    def f_single(p: dict[str, Tensor], xi: Tensor) -> Tensor:
        return functional_call(model, (p, consts), (xi.unsqueeze(0),)).reshape(-1)

    jac = vmap(jacrev(f_single), (None, 0))(params, x)
    blocks = [j.flatten(2) for j in jac.values()]
    return torch.stack([torch.einsum("Naf,Maf->NM", j, j) for j in blocks]).sum(0)


# --------------------------------------------------------------------------- measurement


def gemm_gflops() -> float:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    t0 = time.perf_counter()
    for _ in range(3):
        a @ b
    return 3 * 2 * 2048**3 / (time.perf_counter() - t0) / 1e9


class _FlopCount(TorchFunctionMode):
    """Counts the multiply-adds (× 2) of every convolution and matrix product from the shapes of its operands."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0.0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name in ("conv1d", "conv2d", "conv3d"):
            w = args[1] if len(args) > 1 else kwargs["weight"]
            # output elements × (C_in / groups) × kernel size; w is (C_out, C_in / groups, *kernel)
            self.flops += 2.0 * out.numel() * math.prod(w.shape[1:])
        elif name == "linear":
            self.flops += 2.0 * out.numel() * args[0].shape[-1]
        elif name in ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm"):
            a = args[0] if name != "__rmatmul__" else args[1]
            self.flops += 2.0 * out.numel() * a.shape[-1]
        elif name == "addmm":
            self.flops += 2.0 * out.numel() * args[1].shape[-1]
        return out


def forward_flops(model: nn.Module, x: Tensor) -> float:
    """Forward FLOPs of one example, counted analytically from the shapes of its convolutions and products."""
    with torch.no_grad(), _FlopCount() as counter:
        model(x[:1])
    return counter.flops


def lower_bound(model: nn.Module, x: Tensor) -> float:
    """``3 × forward FLOPs × n + 2 n² N`` (issue 14), N the trained parameters."""
    n = x.shape[0]
    p = sum(q.numel() for q in model.parameters() if q.requires_grad)
    return 3 * forward_flops(model, x) * n + 2.0 * n * n * p


#: Skip timing ``empirical_ntk(method="auto")`` where it picks per-example Jacobians (``--auto-no-jacobian``).
AUTO_SKIPS_JACOBIAN = False


def run_case(
    title: str,
    model: nn.Module,
    x: Tensor,
    peak: float,
    closed: Callable[[], Tensor] | None,
    tutorial: bool,
    auto: bool,
) -> list[str]:
    model.eval()
    lb = lower_bound(model, x)
    methods: list[tuple[str, Callable[[], Tensor], str]] = []
    if closed is not None:
        methods.append(("closed form", closed, ""))
    plan = plan_structured(model, x)
    routes = ", ".join(f"{n}:{r.route}" for n, r in plan.routes.items())
    if len(routes) > 80:  # many parameters: count them by route
        counts = {r: len(plan.names(r)) for r in ("gram", "grad", "jacobian") if plan.names(r)}
        routes = ", ".join(f"{c} x {r}" for r, c in counts.items())
    methods.append(("structured_ntk", lambda: structured_ntk(model, x), routes))
    if tutorial:
        methods.append(("tutorial vmap(jacrev)+einsum", lambda: tutorial_ntk(model, x), ""))
    if auto:
        choice = select_method(model, x).method
        if choice == "jacobian" and AUTO_SKIPS_JACOBIAN:
            print(f"# {title}, n = {x.shape[0]}: empirical_ntk auto picks jacobian, not timed (--auto-no-jacobian)")
        else:
            methods.append(("empirical_ntk auto", lambda: empirical_ntk(model, x), f"picked {choice}"))
    # interleaved: round r runs every method once, so that a slow minute of the shared machine hits all of them
    best = [math.inf] * len(methods)
    results: list[Tensor | None] = [None] * len(methods)
    for r in range(3):
        peak = max(peak, gemm_gflops())  # the sgemm rate, best of the rounds (a slow minute lowers one)
        for i, (_, fn, _) in enumerate(methods):
            if r > 0 and best[i] >= 10.0:
                continue
            t0 = time.perf_counter()
            results[i] = fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    rows = [(name, best[i], results[i], note) for i, (name, _, note) in enumerate(methods)]
    ref_t, ref_k = rows[0][1], rows[0][2].double()  # type: ignore[union-attr]
    lb_time = lb / (peak * 1e9)
    print(f"# {title}, n = {x.shape[0]}: sgemm {peak:.1f} GFLOP/s (best of this model's rounds)")
    lines = []
    for name, s, k, note in rows:
        err = float((k.double() - ref_k).norm() / ref_k.norm())  # type: ignore[union-attr]
        rate = lb / s / 1e9
        lines.append(
            f"| {title} | {x.shape[0]} | {name} | {s:.3f} | {s / ref_t:.2f}x | {lb / 1e9:.1f} | {rate:.1f} | "
            f"{100 * rate / peak:.0f}% | {s / lb_time:.2f} | {err:.1e} | {note} |"
        )
        print(lines[-1], flush=True)
    return lines


def setting2_net(depth: int) -> nn.Module:
    """The Setting 2 network (difference trick of a bias-free ReLU CNN, first conv and readout frozen) at the
    quick profile's width (16 channels, 8×8 inputs, output scale 4, ReLU gain) with ``depth`` layers."""
    return setting2_network(dataclasses.replace(Setting2Config.quick(), depth=depth), seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--big", action="store_true", help="also the two-layer net at n = 2,000")
    parser.add_argument("--cnn-only", action="store_true", help="only the CNN rows")
    parser.add_argument(
        "--models",
        nargs="+",
        choices=("two-layer", "cnn", "setting2"),
        help="run only these models (default: two-layer and cnn), at the sizes --n / --width give",
    )
    parser.add_argument("--n", type=int, nargs="+", help="numbers of examples (default: 512 two-layer, 128 CNN)")
    parser.add_argument("--width", type=int, default=None, help="two-layer width m (default 2,000)")
    parser.add_argument("--depth", type=int, default=11, help="Setting 2 CNN depth (default 11; quick profile: 8)")
    parser.add_argument("--no-tutorial", action="store_true", help="skip the tutorial's Jacobian contraction")
    parser.add_argument("--no-auto", action="store_true", help="skip empirical_ntk(method='auto')")
    parser.add_argument(
        "--auto-no-jacobian", action="store_true", help="time auto only where it does not pick per-example Jacobians"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    global AUTO_SKIPS_JACOBIAN
    AUTO_SKIPS_JACOBIAN = args.auto_no_jacobian
    torch.manual_seed(0)
    d, m, n, n_big, n_cnn, ch = (784, 2000, 512, 2000, 128, 64) if not args.quick else (50, 100, 32, 64, 8, 8)
    m = args.width or m
    tut, aut = not args.no_tutorial, not args.no_auto
    peak = gemm_gflops()
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, float32; 2048^2 sgemm: {peak:.1f} GFLOP/s; "
        f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}"
    )
    print("| model | n | method | seconds | ratio | LB GFLOP | LB rate GFLOP/s | % peak | x LB | rel. error | note |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    g = torch.Generator().manual_seed(1)
    if args.models is not None:
        for model_name in args.models:
            for size in args.n or ([n] if model_name == "two-layer" else [n_cnn]):
                if model_name == "two-layer":
                    x = torch.randn(size, d, generator=g)
                    for layout in ("x @ W.T", "x @ W", "F.linear", "nn.Linear"):
                        net = TwoLayer(layout, d, m)
                        closed = lambda net=net, x=x: closed_form(net, x)  # noqa: E731
                        run_case(f"two-layer {layout}, d={d}, m={m}", net, x, peak, closed, tut, aut)
                        del net
                elif model_name == "cnn":
                    xc = torch.randn(size, 3, 32, 32, generator=g)
                    raw = RawCNN(ch)
                    run_case(f"CNN 3 conv x{ch}, 32x32x3, raw F.conv2d", raw, xc, peak, None, tut, aut)
                    run_case(f"CNN 3 conv x{ch}, 32x32x3, nn.Conv2d", ModuleCNN(raw), xc, peak, None, tut, aut)
                else:
                    xs = torch.randn(size, 3, 8, 8, generator=g)
                    title = f"Setting 2 CNN, depth {args.depth}, 16 ch, 8x8x3"
                    run_case(title, setting2_net(args.depth), xs, peak, None, tut, aut)
        return
    x = torch.randn(n, d, generator=g)
    for layout in ("x @ W.T", "x @ W", "F.linear", "nn.Linear") if not args.cnn_only else ():
        net = TwoLayer(layout, d, m)
        run_case(f"two-layer {layout}, d={d}, m={m}", net, x, peak, lambda: closed_form(net, x), True, True)
    if args.big and not args.cnn_only:
        xb = torch.randn(n_big, d, generator=g)
        for layout in ("x @ W.T", "nn.Linear"):
            net = TwoLayer(layout, d, m)
            run_case(
                f"two-layer {layout}, d={d}, m={m}",
                net,
                xb,
                peak,
                lambda: closed_form(net, xb),
                False,
                layout == "nn.Linear",
            )
    xc = torch.randn(n_cnn, 3, 32, 32, generator=g)
    raw = RawCNN(ch)
    run_case(f"CNN 3 conv x{ch}, 32x32x3, raw F.conv2d", raw, xc, peak, None, True, True)
    run_case(f"CNN 3 conv x{ch}, 32x32x3, nn.Conv2d", ModuleCNN(raw), xc, peak, None, True, True)


if __name__ == "__main__":
    main()
