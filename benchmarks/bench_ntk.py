"""Benchmark of ntk_core.empirical_ntk against the PyTorch tutorial's Jacobian contraction.

Run from the repository root::

    python benchmarks/bench_ntk.py            # all models, then the MNIST 5-vs-8 Gram matrix
    python benchmarks/bench_ntk.py --quick    # smaller sizes, for a smoke test
    python benchmarks/bench_ntk.py --no-mnist

All methods run side by side in this process. The baseline is the
``torch.func`` NTK tutorial's recipe (``vmap(jacrev)`` per-example Jacobians
of both inputs, then an ``einsum`` over parameters), reimplemented below. The
slow methods (baseline, ``jacobian``, ``ntvp``) run on a small ``n``; runs
under 10 s are repeated once and the better time is kept. The baseline's
Jacobians (linear in n) and contraction (quadratic in n) are timed separately
at ``n_small`` and extrapolated to the large ``n`` with those powers.
"speed-up" divides that baseline time, at the row's n, by the row's time.

GFLOP are the cost-model estimates of :func:`ntk_core.ntk.select_method`
(the baseline is counted as the jacobian method on x1 != x2). Peak memory is
the largest increase of this process's resident set size over its value at the
start of the run, sampled every 5 ms (on CUDA: ``max_memory_allocated``).

MNIST: the 13,138 "5"/"8" images (11,272 train + 1,866 test) are read from
the official IDX files in ``$NTK_CORE_DATA`` (``mnist/`` below it or the
folder itself); without them random inputs of the same shape are used (the
two-layer network's cost does not depend on pixel values).
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap

from ntk_core.nets import MLP, ConvNet, TwoLayerNet
from ntk_core.ntk import empirical_ntk, select_method


# --------------------------------------------------------------------------- baseline


def tutorial_jacobians(model: nn.Module, x: Tensor) -> list[Tensor]:
    """The torch.func tutorial's per-example Jacobians (``vmap(jacrev)``), one ``(n, O, p)`` per parameter."""
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    consts = {k: v.detach() for k, v in model.named_parameters() if not v.requires_grad}

    def f_single(p: dict[str, Tensor], xi: Tensor) -> Tensor:
        return functional_call(model, (p, consts), (xi.unsqueeze(0),)).reshape(-1)

    return [t.flatten(2) for t in vmap(jacrev(f_single), (None, 0))(params, x).values()]


def tutorial_contract(j1: list[Tensor], j2: list[Tensor]) -> Tensor:
    """The tutorial's contraction ``einsum('Naf,Maf->NM')`` summed over parameters (trace over outputs)."""
    return torch.stack([torch.einsum("Naf,Maf->NM", a, b) for a, b in zip(j1, j2)]).sum(0)


def tutorial_ntk(model: nn.Module, x1: Tensor, x2: Tensor) -> Tensor:
    """The tutorial's empirical NTK: Jacobians of both inputs, then the contraction."""
    return tutorial_contract(tutorial_jacobians(model, x1), tutorial_jacobians(model, x2))


# --------------------------------------------------------------------------- measurement


class PeakRSS:
    """Largest resident-set increase while the context is open (sampled every 5 ms)."""

    def __enter__(self) -> PeakRSS:
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())

    @property
    def increase_mib(self) -> float:
        return (self.peak - self.start) / 2**20


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


#: where ntk_core's methods run (``--device``); the tutorial baseline always runs on the CPU
DEVICE = "cpu"


def _sync() -> None:
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], repeat_below: float = 10.0) -> tuple[float, float, object]:
    """Seconds and peak MiB of ``fn()``; runs shorter than ``repeat_below`` s are repeated, best of 2 kept."""
    best, peak = float("inf"), 0.0
    for _ in range(2):
        with PeakRSS() as mem:
            _sync()
            t0 = time.perf_counter()
            out = fn()
            _sync()
            seconds = time.perf_counter() - t0
        best, peak = min(best, seconds), max(peak, mem.increase_mib)
        if seconds >= repeat_below:
            break
    return best, peak, out


@dataclass
class Row:
    model: str
    n: int
    method: str
    seconds: float
    gflop: float
    peak_mib: float
    speedup: float = float("nan")
    note: str = ""


def _fmt(rows: list[Row]) -> str:
    head = "| model | n | method | seconds | GFLOP (est.) | GFLOP/s | peak MiB | speed-up vs baseline | note |"
    lines = [head, "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(
            f"| {r.model} | {r.n} | {r.method} | {r.seconds:.3f} | {r.gflop:.1f} | {r.gflop / r.seconds:.1f} "
            f"| {r.peak_mib:.0f} | {'n/a' if r.speedup != r.speedup else f'{r.speedup:.1f}x'} | {r.note} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- one model


@dataclass
class Case:
    name: str
    model: nn.Module
    shape: tuple[int, ...]
    n_small: int
    n_large: int


def _inputs(shape: tuple[int, ...], n: int, seed: int = 0) -> Tensor:
    return torch.rand(n, *shape, generator=torch.Generator().manual_seed(seed))


def _baseline_fit(case: Case, x: Tensor) -> tuple[Callable[[int], float], list[Row]]:
    """Time the tutorial at n_small; return t(n) = t_jac n / n_small + t_contract (n / n_small)^2.

    The Jacobians (linear in n) and the contraction (quadratic) are timed
    separately, so neither part is extrapolated with the wrong power of n.
    """
    n = case.n_small
    xs = x[:n]
    t_total, mib, _ = timed(lambda: tutorial_ntk(case.model, xs, xs))
    t_jac, _, jacs = timed(lambda: tutorial_jacobians(case.model, xs))  # type: ignore[arg-type, return-value]
    t_con, _, _ = timed(lambda: tutorial_contract(jacs, jacs))  # type: ignore[arg-type]  # noqa: F821 (called before del)
    del jacs
    gflop = select_method(case.model, xs, xs.clone(), output="trace").estimates["jacobian"].flops / 1e9
    note = f"Jacobians 2 x {t_jac:.3f} s + contraction {t_con:.3f} s"
    rows = [Row(case.name, n, "baseline (tutorial)", t_total, gflop, mib, 1.0, note)]
    scale = t_total / max(2 * t_jac + t_con, 1e-12)  # keep the measured total at n_small
    return (lambda m: scale * (2 * t_jac * m / n + t_con * (m / n) ** 2)), rows


def run_case(case: Case, methods_small: list[str], methods_large: list[str]) -> list[Row]:
    x = _inputs(case.shape, max(case.n_small, case.n_large))
    base, rows = _baseline_fit(case, x)
    for n, methods in ((case.n_small, methods_small), (case.n_large, methods_large)):
        xs = x[:n]
        choice = select_method(case.model, xs)
        for method in methods:
            seconds, mib, _ = timed(lambda: empirical_ntk(case.model, xs, method=method, device=DEVICE))
            picked = choice.method if method == "auto" else method
            note = f"picked {picked}" if method == "auto" else ""
            if n != case.n_small:
                note = (note + "; " if note else "") + "baseline extrapolated"
            rows.append(
                Row(case.name, n, method, seconds, choice.estimates[picked].flops / 1e9, mib, base(n) / seconds, note)
            )
            print(_fmt(rows[-1:]).splitlines()[-1], flush=True)
    return rows


# --------------------------------------------------------------------------- MNIST


def _read_idx(path: Path) -> np.ndarray:
    raw = gzip.decompress(path.read_bytes())
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def mnist_5_vs_8() -> tuple[Tensor, str]:
    root = os.environ.get("NTK_CORE_DATA")
    for folder in [Path(root) / "mnist", Path(root)] if root else []:
        if (folder / "train-images-idx3-ubyte.gz").exists():
            parts = []
            for prefix in ("train", "t10k"):
                images = _read_idx(folder / f"{prefix}-images-idx3-ubyte.gz")
                labels = _read_idx(folder / f"{prefix}-labels-idx1-ubyte.gz")
                parts.append(images[(labels == 5) | (labels == 8)])
            x = np.concatenate(parts).reshape(-1, 784).astype(np.float32) / 255.0
            return torch.from_numpy(x), f"real MNIST from {folder}"
    return _inputs((784,), 13_138), "random inputs of MNIST shape (NTK_CORE_DATA not set)"


def run_mnist() -> Row:
    x, source = mnist_5_vs_8()
    model = TwoLayerNet(784, 10_000, seed=0)
    est = select_method(model, x)

    def run() -> Tensor:
        return empirical_ntk(model, x, method="auto", out_dtype=torch.float64, progress=True, device=DEVICE)

    seconds, mib, k = timed(run, repeat_below=0.0)
    assert k.shape == (x.shape[0], x.shape[0]) and k.dtype == torch.float64
    return Row(
        "two-layer w=10k, MNIST 5v8",
        x.shape[0],
        f"auto ({est.method}), f32->f64",
        seconds,
        est.estimates[est.method].flops / 1e9,
        mib,
        float("nan"),
        source,
    )


# --------------------------------------------------------------------------- main


def cases(quick: bool) -> list[Case]:
    s = 4 if quick else 1
    return [
        Case(
            "two-layer d=784 w=10k (1st layer trained)",
            TwoLayerNet(784, 10_000, seed=0),
            (784,),
            24 // (2 if quick else 1),
            2000 // s,
        ),
        Case(
            "MLP d=784 4x1024 (all trained)", MLP(784, [1024] * 4, seed=0), (784,), 64 // (2 if quick else 1), 2000 // s
        ),
        Case("CNN 3x16x16, 4 conv x32 + readout", ConvNet(3, 32, depth=5, seed=0), (3, 16, 16), 128 // s, 512 // s),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    parser.add_argument("--no-mnist", action="store_true", help="skip the 13,138-point MNIST Gram matrix")
    parser.add_argument(
        "--device",
        default="cpu",
        help="where ntk_core's methods run: cpu (default) or cuda (the baseline stays on the CPU; "
        "on cuda 'peak MiB' is the host process's, not the GPU's)",
    )
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no CUDA GPU on this machine")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {DEVICE}"
        + (f" ({torch.cuda.get_device_name()})" if DEVICE.startswith("cuda") else ""),
        flush=True,
    )
    rows: list[Row] = []
    all_cases = cases(args.quick)
    for case in all_cases:
        rows += run_case(case, ["jacobian", "ntvp", "structured", "auto"], ["structured", "auto"])
    print()
    print(_fmt(rows))
    for case in all_cases:
        for n in (case.n_small, case.n_large):
            same = {
                r.method: r.seconds for r in rows if r.model == case.name and r.n == n and "baseline" not in r.method
            }
            print(f"{case.name}, n={n}: auto / best method = {same['auto'] / min(same.values()):.2f}")
    if not args.no_mnist:
        print()
        print(_fmt([run_mnist()]))


if __name__ == "__main__":
    main()
