"""``empirical_ntk(method="auto")`` against the ``torch.func`` tutorial on a zoo of models the tests did not tune for.

Issue 28: "``auto`` never slower than 1.1x the torch.func tutorial's Jacobian contraction on a zoo of models the
tests did not tune for (MLP with LayerNorm/GELU and several outputs, BatchNorm CNN with a depthwise convolution,
a ResNet block, an attention block with embeddings, a raw ``einsum`` layer)". For each model, at two sizes
("small": milliseconds per kernel; "medium": about a second), in one process, side by side:
``empirical_ntk(model, x, method="auto")`` and the tutorial's recipe written here
(per-example Jacobians by ``vmap(jacrev)``, then ``einsum`` over parameters, trace over the outputs; the Jacobians
computed once, since x2 = x1). Each time is the median of ``--repeat`` rounds (default 5) after a warm-up round;
a round runs auto (which keeps its choice per model and signature, ``ntk_core.ntk.choices``: the warm-up round
chooses, the timed calls name the kept choice), "auto, first call" (``forget_choices(model)`` and then auto: a lone
call that chooses, as the first kernel of a model does), the tutorial, ``select_method`` (the choice alone) and the chosen method named outright
("pinned": ``empirical_ntk(model, x, method=select_method(model, x).method)`` with the choice made once, before
the rounds, as a user computing many kernels of one model at one size would) and ``empirical_ntk_fn(model)``
("fn": the kernel as a function, made before the rounds; its first call, in the warm-up round, chooses, and the
timed calls name the kept choice) in turn, so that the load of a shared machine falls on all alike. The kernels must agree (relative Frobenius error < 1e-4, float32).
Then every method that runs on the model is named outright and timed the same way ("each method"; one whose
kernel of a quarter of the examples already takes more than 5× auto's time is shown with that time as a lower
bound, ">"), so that "auto / fastest" says how far auto's choice is
from the best method on the row (issue 59: within 1.1×).

    OMP_NUM_THREADS=1 python benchmarks/bench_zoo.py            # 3-8 minutes on one thread
    OMP_NUM_THREADS=1 python benchmarks/bench_zoo.py --repeat 1 # smoke test
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap

from ntk_core import empirical_ntk, empirical_ntk_fn, select_method
from ntk_core.ntk import forget_choices

Inputs = Any  # one tensor, or a tuple of tensors passed as model(*x)


# --------------------------------------------------------------------------- the zoo


class MLPNorm(nn.Module):
    """Linear -> LayerNorm -> GELU, twice, then 10 outputs."""

    def __init__(self, d: int = 64, h: int = 256, out: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d, h), nn.LayerNorm(h), nn.GELU(), nn.Linear(h, h), nn.LayerNorm(h), nn.GELU(), nn.Linear(h, out)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class DepthwiseCNN(nn.Module):
    """Conv-BN-ReLU, a depthwise 3x3 conv (groups = channels)-BN-ReLU, a pointwise conv, pooling, 10 outputs."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, c, 3, padding=1),
            nn.BatchNorm2d(c),
            nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1, groups=c),
            nn.BatchNorm2d(c),
            nn.ReLU(),
            nn.Conv2d(c, 2 * c, 1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(2 * c, 10),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class ResNetBlock(nn.Module):
    """A stem conv, one basic residual block (conv-BN-ReLU-conv-BN + identity, ReLU), pooling, 10 outputs."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.head = nn.Linear(c, 10)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.stem(x))
        h = F.relu(h + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(h))))))
        return self.head(h.mean((2, 3)))


class AttentionBlock(nn.Module):
    """Token and position embeddings, ``nn.MultiheadAttention`` with a key-padding mask, LayerNorm, an MLP,
    masked mean pooling, 4 outputs; called as ``model(ids, mask)``."""

    def __init__(self, vocab: int = 1000, t: int = 32, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Parameter(0.02 * torch.randn(t, d))
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, 4)

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        h = self.emb(ids) + self.pos
        a, _ = self.attn(h, h, h, key_padding_mask=~mask, need_weights=False)
        h = self.norm1(h + a)
        h = self.norm2(h + self.mlp(h))
        m = mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1))


class EinsumLayer(nn.Module):
    """Raw parameters in ``einsum``: tokens (b, T, d) -> ``btd,dh->bth`` -> tanh -> mean over T -> ``bh,ho->bo``."""

    def __init__(self, d: int = 32, h: int = 512, out: int = 3) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.randn(d, h) / d**0.5)
        self.V = nn.Parameter(torch.randn(h, out) / h**0.5)

    def forward(self, x: Tensor) -> Tensor:
        return torch.einsum("bh,ho->bo", torch.tanh(torch.einsum("btd,dh->bth", x, self.W)).mean(1), self.V)


class EncoderLayer(nn.Module):
    """Token embeddings, one ``nn.TransformerEncoderLayer`` (4 heads, no dropout) with a key-padding mask, masked
    mean pooling, 3 outputs; called as ``model(ids, mask)``."""

    def __init__(self, vocab: int = 100, d: int = 32, ff: int = 64) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layer = nn.TransformerEncoderLayer(d, 4, ff, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, 3)

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        h = self.layer(self.emb(ids), src_key_padding_mask=~mask)
        m = mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1))


def _ids_and_mask(n: int, t: int, vocab: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    ids = torch.randint(0, vocab, (n, t), generator=gen)
    lengths = torch.randint(t // 4, t + 1, (n, 1), generator=gen)
    return ids, torch.arange(t) < lengths  # True: a real token; every example has at least t // 4


def zoo(size: str, gen: torch.Generator) -> list[tuple[str, nn.Module, Inputs]]:
    """(name, model in eval mode, inputs) for each model of the issue: ``"small"`` (milliseconds per kernel) or
    ``"medium"`` (about a second per kernel on one thread)."""
    torch.manual_seed(0)
    small = size == "small"
    models: list[tuple[str, nn.Module, Inputs]] = [
        (
            "MLP LayerNorm/GELU, 10 outputs",
            MLPNorm(32, 64) if small else MLPNorm(64, 256),
            torch.randn(128 if small else 512, 32 if small else 64, generator=gen),
        ),
        (
            "BatchNorm CNN, depthwise conv",
            DepthwiseCNN(16 if small else 32),
            torch.randn(32 if small else 128, 3, 16, 16, generator=gen),
        ),
        (
            "ResNet block",
            ResNetBlock(16 if small else 32),
            torch.randn(32 if small else 128, 3, 12 if small else 16, 12 if small else 16, generator=gen),
        ),
        (
            "attention + embeddings, mask",
            AttentionBlock(100, 16, 32) if small else AttentionBlock(1000, 32, 64),
            _ids_and_mask(64, 16, 100, gen) if small else _ids_and_mask(256, 32, 1000, gen),
        ),
        (
            "attention over token ids (emb. 50×32, 12 tokens)",
            AttentionBlock(50, 12, 32),
            _ids_and_mask(64 if small else 256, 12, 50, gen),
        ),
        (
            "Transformer encoder layer, mask",
            EncoderLayer(100, 32, 64),
            _ids_and_mask(32 if small else 128, 16, 100, gen),
        ),
        (
            "raw einsum layer",
            EinsumLayer(24, 128) if small else EinsumLayer(32, 512),
            torch.randn(128 if small else 512, 8 if small else 16, 24 if small else 32, generator=gen),
        ),
    ]
    for _, model, _ in models:
        for m in model.modules():  # BatchNorm: running statistics that are not the identity
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                assert m.running_var is not None
                m.running_mean.uniform_(-0.5, 0.5, generator=gen)
                m.running_var.uniform_(0.5, 2.0, generator=gen)
        model.eval()
    return models


# --------------------------------------------------------------------------- the torch.func tutorial


def _one(x: Inputs) -> Inputs:
    return tuple(t.unsqueeze(0) for t in x) if isinstance(x, tuple) else x.unsqueeze(0)


def _args(x: Inputs) -> tuple[Tensor, ...]:
    return x if isinstance(x, tuple) else (x,)


def tutorial_ntk(model: nn.Module, x: Inputs) -> Tensor:
    """The torch.func NTK tutorial: ``vmap(jacrev)`` per-example Jacobians, ``einsum('Naf,Maf->NM')`` per
    parameter, summed (trace over the outputs). x2 = x1, so the Jacobians are computed once."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def fnet_single(p: dict[str, Tensor], xi: Inputs) -> Tensor:
        return functional_call(model, p, _args(_one(xi))).squeeze(0)

    jac = vmap(jacrev(fnet_single), (None, 0))(params, x)
    jac = [j.flatten(2) for j in jac.values()]
    return torch.stack([torch.einsum("Naf,Maf->NM", j, j) for j in jac]).sum(0)


# --------------------------------------------------------------------------- timing


def interleaved_medians(fns: list[Callable[[], Any]], repeat: int) -> tuple[list[float], list[Any]]:
    """Median wall time of each function over ``repeat`` rounds after one warm-up round, and its last result.
    Each round runs every function once, in turn, so that the load of a shared machine falls on all alike."""
    outs = [fn() for fn in fns]
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            outs[k] = fn()
            times[k].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times], outs


METHODS = ("jacobian", "ntvp", "structured")
#: a method whose kernel of a quarter of the examples takes this many times auto's is not run on all of them
HOPELESS = 5.0


def runnable_methods(model: nn.Module, x: Inputs) -> list[str]:
    """The methods that compute this model's kernel (``ntvp`` needs forward-mode derivatives of every op), tried
    on two examples."""
    two = tuple(t[:2] for t in x) if isinstance(x, tuple) else x[:2]
    found = []
    for method in METHODS:
        try:
            empirical_ntk(model, two, method=method)  # type: ignore[arg-type]
        except NotImplementedError:
            continue
        found.append(method)
    return found


def _head(x: Inputs, k: int) -> Inputs:
    return tuple(t[:k] for t in x) if isinstance(x, tuple) else x[:k]


def method_times(
    model: nn.Module, x: Inputs, methods: list[str], t_auto: float, repeat: int
) -> tuple[dict[str, float], set[str]]:
    """Each method named outright: the median of ``repeat`` rounds after a warm-up. A method whose kernel of the
    first quarter of the examples (less work than the whole) already takes more than :data:`HOPELESS` times
    auto's time is not run on the whole: its entry is that time, a lower bound, shown with ">"."""
    times: dict[str, float] = {}
    hopeful = []
    n = (x[0] if isinstance(x, tuple) else x).shape[0]
    for method in methods:
        start = time.perf_counter()
        empirical_ntk(model, _head(x, max(2, n // 4)), method=method)  # type: ignore[arg-type]
        times[method] = time.perf_counter() - start
        if times[method] <= HOPELESS * t_auto:
            hopeful.append(method)
    medians, _ = interleaved_medians(
        [lambda m=m: empirical_ntk(model, x, method=m) for m in hopeful],  # type: ignore[misc]
        repeat,
    )
    times.update(zip(hopeful, medians))
    return times, set(methods) - set(hopeful)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds (median), after a warm-up round")
    parser.add_argument("--sizes", nargs="+", default=["small", "medium"], choices=["small", "medium"])
    args = parser.parse_args(argv)
    logging.getLogger("ntk_core").setLevel(logging.WARNING)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), float32, median of {args.repeat}")
    print(
        "| size | model | n | trained params | outputs | auto picked | auto s | fastest (s) | auto / fastest "
        "| auto / tutorial | first call s | first / tutorial | of which choosing s | tutorial s | fn / tutorial "
        "| each method s | rel. err |"
    )
    print("|---|---|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    started = time.perf_counter()
    for size in args.sizes:
        for name, model, x in zoo(size, torch.Generator().manual_seed(0)):
            n = (x[0] if isinstance(x, tuple) else x).shape[0]
            pinned = select_method(model, x).method
            kernel = empirical_ntk_fn(model)
            (t_auto, t_first, t_tut, t_pick, t_pin, t_fn), (k_auto, k_first, k_tut, choice, k_pin, k_fn) = (
                interleaved_medians(
                    [
                        lambda: empirical_ntk(model, x, method="auto"),  # noqa: B023
                        lambda: forget_choices(model) or empirical_ntk(model, x, method="auto"),  # noqa: B023
                        lambda: tutorial_ntk(model, x),  # noqa: B023
                        lambda: select_method(model, x),  # noqa: B023
                        lambda: empirical_ntk(model, x, method=pinned),  # noqa: B023
                        lambda: kernel(x),  # noqa: B023
                    ],
                    args.repeat,
                )
            )
            assert choice.method == pinned, f"{name}: select_method chose {choice.method}, then {pinned}"
            err = float((k_auto.double() - k_tut.double()).norm() / k_tut.double().norm())
            assert err < 1e-4, f"{name}: the kernels differ (relative error {err:.1e})"
            assert torch.equal(k_pin, k_auto), f"{name}: the pinned method's kernel is not auto's"
            assert torch.equal(k_first, k_auto), f"{name}: a fresh choice gives another kernel than the kept one"
            assert torch.equal(k_fn, k_auto) and len(kernel.choices) == 1, f"{name}: empirical_ntk_fn is not auto"
            each, bounded = method_times(model, x, runnable_methods(model, x), t_auto, args.repeat)
            each[pinned] = min(each.get(pinned, t_pin), t_pin)  # the chosen method, also timed beside auto
            fastest = min(each, key=each.__getitem__)
            n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
            n_out = model(*_args(tuple(t[:1] for t in x) if isinstance(x, tuple) else x[:1])).numel()
            shown = ", ".join(f"{m} {'>' if m in bounded else ''}{t:.3f}" for m, t in each.items())
            print(
                f"| {size} | {name} | {n} | {n_params:,} | {n_out} | {choice.method} | {t_auto:.3f} | "
                f"{fastest} ({each[fastest]:.3f}) | {t_auto / each[fastest]:.2f}x | {t_auto / t_tut:.2f}x | "
                f"{t_first:.3f} | {t_first / t_tut:.2f}x | {t_pick:.3f} | {t_tut:.3f} | {t_fn / t_tut:.2f}x | "
                f"{shown} | {err:.1e} |",
                flush=True,
            )
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
