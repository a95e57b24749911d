"""Issue 14, fourth round: ``empirical_ntk(method="jacobian")`` and ``method="auto"`` against the tutorial.

The ``torch.func`` tutorial's recipe (``bench_structured.tutorial_ntk``: ``vmap(jacrev)`` of the whole
batch, then ``einsum``) and ``empirical_ntk`` with ``method="jacobian"`` and ``method="auto"``, timed
side by side in one process (interleaved, best of ``--rounds``), on the 3-layer 64-channel CNN (raw
``F.conv2d`` and ``nn.Conv2d``, 32×32×3), on the Setting 2 CNN (depth 11, quick width) and on a bias-free ReLU MLP (``ntk_core.nets.MLP``)::

    OMP_NUM_THREADS=1 python benchmarks/bench_jacobian.py --threads 1 --n 128 512
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_structured import ModuleCNN, RawCNN, setting2_net, tutorial_ntk  # noqa: E402

from ntk_core.nets import MLP  # noqa: E402
from ntk_core.ntk import empirical_ntk, select_method  # noqa: E402


def best_of(fns: dict[str, Callable[[], Tensor]], rounds: int) -> dict[str, float]:
    """Best wall time of each function, the functions interleaved round by round."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def row(title: str, model: nn.Module, x: Tensor, rounds: int) -> None:
    """Time the three methods on one model and print a table row (ratios: time / tutorial's)."""
    ref = tutorial_ntk(model, x)
    for method in ("jacobian", "auto"):
        k = empirical_ntk(model, x, method=method)
        err = float((k - ref).abs().max() / ref.abs().max())
        if err > 1e-4:
            raise AssertionError(f"{title}: {method} differs from the tutorial by {err:.1e}")
    fns = {
        "tutorial": lambda: tutorial_ntk(model, x),
        "jacobian": lambda: empirical_ntk(model, x, method="jacobian"),
        "auto": lambda: empirical_ntk(model, x, method="auto"),
    }
    t = best_of(fns, rounds)
    pick = select_method(model, x).method
    tut = t["tutorial"]
    print(
        f"| {title} | {x.shape[0]} | {tut:.3f} | {t['jacobian']:.3f} ({t['jacobian'] / tut:.2f}×) "
        f"| {t['auto']:.3f} ({t['auto'] / tut:.2f}×) | {pick} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[128, 512], help="numbers of examples")
    parser.add_argument("--rounds", type=int, default=5, help="repeats (best of)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    parser.add_argument("--models", nargs="+", default=["cnn", "setting2", "mlp"], choices=("cnn", "setting2", "mlp"))
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} "
        f"threads, float32; load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}"
    )
    print("| model | n | tutorial s | jacobian s (ratio) | auto s (ratio) | auto's pick |")
    print("|---|---:|---:|---:|---:|---|")
    g = torch.Generator().manual_seed(1)
    raw = RawCNN(64)
    mlp = MLP(784, [512, 512], seed=0)
    for n in args.n:
        if "cnn" in args.models:
            xc = torch.randn(n, 3, 32, 32, generator=g)
            row("CNN 3 conv x64, raw F.conv2d", raw, xc, args.rounds)
            row("CNN 3 conv x64, nn.Conv2d", ModuleCNN(raw), xc, args.rounds)
        if "setting2" in args.models:
            row(
                "Setting 2 CNN, depth 11, 16 ch, 8x8x3",
                setting2_net(11),
                torch.randn(n, 3, 8, 8, generator=g),
                args.rounds,
            )
        if "mlp" in args.models:
            row("MLP 784-512-512-1", mlp, torch.randn(n, 784, generator=g), args.rounds)
    print(f"# load average at the end {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
