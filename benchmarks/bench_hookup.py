"""Old module-type structured NTK against the operation-level engine, on the experiments' own networks.

Run from the repository root::

    python benchmarks/bench_hookup.py OLD_NTK_PY            # quick sizes: K differences (float64 out)
    python benchmarks/bench_hookup.py OLD_NTK_PY --medium   # medium sizes: timings, ratios new / old
    python benchmarks/bench_hookup.py OLD_NTK_PY --readme   # the networks of the top-level README's table

``OLD_NTK_PY`` is a copy of ``ntk_core/ntk.py`` from before the hook-up (e.g.
``git show 8f9b2d4:ntk_core/ntk.py > /tmp/ntk_old.py``); it is loaded as a
module of the package, so both versions run side by side in this process.
Each network is the one an experiment builds (``setting1``, ``distance``,
``difference_trick``: two-layer nets, the first two in the difference trick;
``setting2``: the CNN of Setting 2 in the difference trick, first and last
layers frozen), at the experiment's quick or medium size, with
``empirical_ntk(model, x, out_dtype=torch.float64)`` as the experiments call
it. ``--readme`` runs instead the networks of the performance table of the
top-level README (``bench_ntk.py``'s). Printed per model: whether the two kernels are bit-identical, the maximal
relative difference ``max |K_new - K_old| / max |K_old|``, the best of three
times of each and the ratio new / old.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

from ntk_core import ntk
from ntk_core.experiments import setting2
from ntk_core.nets import MLP, ConvNet, DifferenceTrick, TwoLayerNet


def load_old(path: str) -> object:
    spec = importlib.util.spec_from_file_location("ntk_core._ntk_before_hookup", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def models(medium: bool) -> dict[str, tuple[nn.Module, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    d = 196  # 28×28 images pooled 2×2
    # (n, width) of Config.quick / Config.medium; setting1 uses train + val + test images
    sizes = {
        "setting1": (1000 + 500 + 1866, 1000) if medium else (400 + 200 + 1866, 512),
        "distance": (300, 2048) if medium else (100, 512),
        "difference_trick": (400, 2000) if medium else (100, 512),
    }
    out: dict[str, tuple[nn.Module, torch.Tensor]] = {}
    for name, (n, width) in sizes.items():
        g = TwoLayerNet(d, width, seed=0, train_second=name == "difference_trick")
        model = g if name == "difference_trick" else DifferenceTrick(g, alpha=0.5)
        out[name] = (model, torch.randn(n, d, generator=gen))
    cfg = setting2.Config.medium() if medium else setting2.Config.quick()
    side = 32 // cfg.pool
    out["setting2"] = (setting2.network(cfg, 0), torch.randn(cfg.n_train, 3, side, side, generator=gen))
    return out


def readme_models() -> dict[str, tuple[nn.Module, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return {
        "two-layer w=10000": (TwoLayerNet(784, 10_000, seed=0), torch.randn(2000, 784, generator=gen)),
        "MLP 4x1024": (MLP(784, [1024] * 4, seed=0), torch.randn(2000, 784, generator=gen)),
        "CNN 4 conv x32": (ConvNet(3, 32, depth=5, seed=0), torch.randn(512, 3, 16, 16, generator=gen)),
    }


def best_time(fn: Callable[[], torch.Tensor], rounds: int) -> tuple[float, torch.Tensor]:
    best, result = float("inf"), torch.empty(0)
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", help="path of ntk.py before the hook-up")
    parser.add_argument("--medium", action="store_true", help="the experiments' medium sizes (timings)")
    parser.add_argument("--readme", action="store_true", help="the top-level README's networks")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    old = load_old(args.old)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"{'model':<18} {'n':>5} {'identical':>9} {'max rel diff':>12} {'old s':>8} {'new s':>8} {'new/old':>8}")
    for name, (model, x) in (readme_models() if args.readme else models(args.medium)).items():
        if args.only and name not in args.only:
            continue
        t_new, k_new = best_time(lambda: ntk.empirical_ntk(model, x, out_dtype=torch.float64), args.rounds)
        t_old, k_old = best_time(lambda: old.empirical_ntk(model, x, out_dtype=torch.float64), args.rounds)
        same = torch.equal(k_new, k_old)
        rel = float((k_new - k_old).abs().max() / k_old.abs().max())
        print(f"{name:<18} {x.shape[0]:>5} {str(same):>9} {rel:12.3g} {t_old:8.3f} {t_new:8.3f} {t_new / t_old:8.3f}")


if __name__ == "__main__":
    main()
