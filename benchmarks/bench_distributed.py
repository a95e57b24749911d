"""Benchmark of issue 15: the distributed Gram matrix (1 vs 2 processes) and the out-of-core KRR solver.

Run from the repository root::

    NTK_CORE_DATA=/path/to/data python benchmarks/bench_distributed.py          # ~3 min on 2 cores
    python benchmarks/bench_distributed.py --quick                              # smoke test

Part 1, distributed Gram. Setting 2's CNN (depth 8, 32 channels, 16 x 16 inputs)
on the first ``n`` CIFAR airplane/automobile
training images, float32, is computed by ``python -m ntk_core gram`` under
``torchrun --nproc_per_node=1`` and ``=2`` (gloo, one thread per process), each
from an empty checkpoint folder, side by side with in-process
``empirical_ntk`` on 1 thread (the baseline; ``--two-threads`` adds 2 threads, which
on a loaded 2-core machine was 13x slower than 1: OpenMP threads wait on each other). Reported: wall
time of the command (process start, imports, rendezvous included) and of
``distributed_ntk`` itself (the slowest rank's ``seconds``: plan, tiles,
assembly), time per tile, peak RSS per rank, and ratios to the baseline; best of
two runs (the 2-thread baseline: one run). The two .npy files are checked to be equal bit for bit.

What 2 cores can show: that the tiles are shared (each rank computes about
half), that nothing is lost to coordination (the tile loop's wall time with 2
processes against 1), and the fixed cost of starting processes. What they
cannot show: scaling beyond 2, inter-node traffic (there is none to speak of:
ranks exchange only a counter and tiles go to the shared folder), or GPU
behaviour. On a shared machine (other jobs on the cores) the 2-process time
depends on what else runs; the script prints the load average.

Part 2, out-of-core KRR. The infinite-width ReLU NTK (depth 2) of ``n`` random
points on the sphere is written to a ``.npy``; ``krr_coefficients`` (in memory,
Cholesky) and ``krr_solve_ooc`` (memory map, PCG over row blocks of 256 rows)
solve ``(K + λ² I) α = y`` for several λ. Reported: seconds, passes over K,
iterations, max |Δα| / max |α|, and the peak of heap allocations
(``tracemalloc``, which sees NumPy's buffers; the memory map's page cache is
not counted: it is the file system's and can be evicted). Then Theorem 5.1's
explicit bound (``theorem_5_1_bound``, λ = 1, σ = 0.3, δ = 0.05, labels ±1/2)
on the same K, in memory and on disk (``OnDiskKernel``, blocks of 256 rows):
seconds, passes over K (validation, yᵀK⁻¹y and yᵀ(K + λ²I)⁻¹y by PCG), the
relative difference of the totals and the heap peaks.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import torch

from ntk_core.infinite import relu_ntk
from ntk_core.krr import krr_coefficients
from ntk_core.bounds import theorem_5_1_bound
from ntk_core.kernel_matrix.on_disk import OnDiskKernel, krr_solve_ooc
from ntk_core.ntk import empirical_ntk

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gram_command(nproc: int, n: int, tile: int, folder: Path) -> tuple[float, str, str]:
    args = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        f"--master_port={_free_port()}",
        "-m",
        "ntk_core",
        "gram",
        "--model",
        "cnn",
        "--depth",
        "8",
        "--width",
        "32",
        "--pool",
        "2",
        "--data",
        "cifar2",
        "--n-images",
        str(n),
        "--tile-size",
        str(tile),
        "--backend",
        "gloo",
        "--checkpoint-dir",
        str(folder),
        "--out",
        str(folder / "gram.npy"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"gram with {nproc} process(es) failed:\n{done.stderr[-3000:]}")
    return wall, done.stdout, done.stderr


def _ranks(stderr: str) -> list[tuple[int, int, float, float]]:
    """(rank, tiles computed, seconds, peak MiB) from the command's rank lines."""
    found = re.findall(r"rank (\d+)/\d+: (\d+) tiles computed, \d+ loaded, ([\d.]+) s, peak RSS (\d+) MiB", stderr)
    return sorted((int(r), int(c), float(s), float(m)) for r, c, s, m in found)


def part_gram(n: int, tile: int, two_threads: bool = False) -> None:
    from ntk_core.__main__ import _gram_inputs

    ns = argparse.Namespace(model="cnn", width=32, depth=8, seed=0, data="cifar2", split="train", n=n, pool=2)
    model, x, what = _gram_inputs(ns)
    blocks = -(-n // tile)
    tiles = blocks * (blocks + 1) // 2
    print(f"\n== Part 1: distributed Gram ({what}; tile {tile}, {tiles} tiles, float32)")
    rows: list[tuple[str, float, float | None, str]] = []
    empirical_ntk(model, x[: 2 * tile], tile_size=tile)  # warm-up (first-call costs are not the baseline's)
    for threads, repeats in ((1, 2), *(((2, 1),) if two_threads else ())):
        torch.set_num_threads(threads)
        best = math.inf
        for _ in range(repeats):
            start = time.perf_counter()
            ref = empirical_ntk(model, x, tile_size=tile)
            best = min(best, time.perf_counter() - start)
        rows.append((f"empirical_ntk in process, {threads} thread(s)", best, None, ""))
    torch.set_num_threads(1)
    base = rows[0][1]
    outputs = {}
    for nproc in (1, 2):
        best_run: tuple[float, float, list] = (math.inf, math.inf, [])
        for _ in range(2):  # best of two, each from an empty checkpoint folder
            folder = Path(tempfile.mkdtemp(prefix=f"bench_gram{nproc}_"))
            try:
                wall, _, err = _gram_command(nproc, n, tile, folder)
                ranks = _ranks(err)
                outputs[nproc] = np.load(folder / "gram.npy")
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            loop = max(r[2] for r in ranks)
            if loop < best_run[1]:
                best_run = (wall, loop, ranks)
        wall, loop, ranks = best_run
        share = " + ".join(str(r[1]) for r in ranks)
        peaks = ", ".join(f"{r[3]:.0f}" for r in ranks)
        rows.append(
            (
                f"torchrun --nproc_per_node={nproc} (command wall)",
                wall,
                None,
                f"tiles per rank {share}; peak RSS per rank {peaks} MiB",
            )
        )
        rows.append((f"torchrun --nproc_per_node={nproc} (distributed_ntk)", loop, loop / tiles, ""))
    print(f"{'run':48s} {'seconds':>9s} {'s/tile':>8s} {'baseline / run':>15s}  notes")
    for name, sec, per_tile, note in rows:
        pt = f"{per_tile:8.3f}" if per_tile is not None else " " * 8
        print(f"{name:48s} {sec:9.2f} {pt} {base / sec:14.2f}x  {note}")
    print(
        f"2-process .npy equals 1-process .npy bit for bit: {np.array_equal(outputs[1], outputs[2])}; "
        f"equals in-process empirical_ntk: {np.array_equal(outputs[1], ref.numpy())}"
    )


#: Assumed effective FP32 rate of one H100 on this workload (about 30% of the SXM part's 67 TFLOP/s FP32
#: peak; per-example Jacobians of a 3x3 convolution stack are far from peak). A projection, not a measurement.
H100_FLOPS = 20e12


def part_scale(tile: int) -> None:
    """Paper-scale plan: Setting 2's full CNN on all airplane/automobile images and a CNN on all CIFAR-10."""
    import dataclasses

    from ntk_core.experiments import setting2
    from ntk_core.ntk import select_method

    torch.set_num_threads(1)
    cfg = dataclasses.replace(setting2.Config.quick(), depth=11, channels=192, pool=1)
    net = setting2.network(cfg, 0)
    params = sum(p.numel() for p in net.parameters() if p.requires_grad)
    print(
        f"\n== Part 3: paper scale (Setting 2's full CNN: depth 11, 192 channels, 32 x 32 inputs, "
        f"{params:,} trained parameters; float32)"
    )
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2 * tile, 3, 32, 32, generator=gen)
    cost = select_method(net, x[:tile], x[tile:], memory_budget=2 * 1024**3).estimates["jacobian"]
    empirical_ntk(net, x[:1], x[1:2], method="jacobian")  # warm-up
    start = time.perf_counter()
    empirical_ntk(net, x[:tile], x[tile:], method="jacobian", tile_size=tile)
    sec = time.perf_counter() - start
    rate = cost.flops / sec
    print(
        f"measured here: one {tile} x {tile} tile (jacobian method), {sec:.2f} s on 1 thread, cost model "
        f"{cost.flops / 1e9:.0f} GFLOP -> {rate / 1e9:.1f} GFLOP/s"
    )
    budget = 40 * 1024**3
    print(
        f"projected (cost model of select_method, memory budget 40 GiB per GPU, {H100_FLOPS / 1e12:.0f} TFLOP/s "
        f"effective per H100 assumed):"
    )
    print(
        f"{'data':40s} {'n':>7s} {'tile':>5s} {'tiles':>6s} {'PFLOP':>7s} {'GiB/rank':>9s} "
        f"{'s/tile GPU':>10s} {'h, 1 GPU':>9s} {'h, 8 GPUs':>9s} {'h, 32 GPUs':>10s} {'K float32 GB':>12s}"
    )
    for what, n in (("CIFAR airplane/automobile (train)", 10_000), ("all CIFAR-10 (train)", 50_000)):
        xs = torch.zeros(1, 3, 32, 32).expand(n, 3, 32, 32)
        choice = select_method(net, xs, memory_budget=budget)
        est = choice.estimates[choice.method]
        blocks = -(-n // est.tile_size)
        tiles = blocks * (blocks + 1) // 2
        hours = est.flops / H100_FLOPS / 3600
        print(
            f"{what:40s} {n:7d} {est.tile_size:5d} {tiles:6d} {est.flops / 1e15:7.1f} {est.memory / 2**30:9.1f} "
            f"{est.flops / tiles / H100_FLOPS:10.1f} {hours:9.2f} {hours / 8:9.2f} {hours / 32:10.3f} "
            f"{n * n * 4 / 1e9:12.1f}"
        )


def _peak(fn):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def part_krr(n: int, lams: tuple[float, ...]) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 20))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.sign(x[:, 0] + 0.3 * rng.standard_normal(n))
    folder = Path(tempfile.mkdtemp(prefix="bench_krr_"))
    try:
        path = folder / "K.npy"
        K = relu_ntk(x, depth=2)
        np.save(path, K)
        del K
        print(
            f"\n== Part 2: out-of-core KRR (infinite ReLU NTK, depth 2, n = {n}; K is "
            f"{n * n * 8 / 2**20:.0f} MiB float64 on disk; blocks of 256 rows = {256 * n * 8 / 2**20:.1f} MiB)"
        )
        print(
            f"{'λ':>6s} {'in-memory s':>12s} {'ooc s':>8s} {'ooc/mem':>8s} {'passes':>7s} {'iters':>6s} "
            f"{'rank':>5s} {'max|Δα|/max|α|':>15s} {'peak MiB mem':>13s} {'peak MiB ooc':>13s}"
        )
        krr_coefficients(np.load(path)[:300, :300], y[:300], 1.0)  # warm-up
        krr_solve_ooc(np.load(path)[:300, :300], y[:300], 1.0)
        for lam in lams:
            start = time.perf_counter()
            a_mem = krr_coefficients(np.load(path), y, lam)
            t_mem = time.perf_counter() - start
            start = time.perf_counter()
            sol = krr_solve_ooc(np.load(path, mmap_mode="r"), y, lam, block_rows=256)
            t_ooc = time.perf_counter() - start
            _, p_mem = _peak(lambda: krr_coefficients(np.load(path), y, lam))
            _, p_ooc = _peak(lambda: krr_solve_ooc(np.load(path, mmap_mode="r"), y, lam, block_rows=256))
            err = float(np.max(np.abs(sol.alpha - a_mem)) / np.max(np.abs(a_mem)))
            print(
                f"{lam:6g} {t_mem:12.2f} {t_ooc:8.2f} {t_ooc / t_mem:7.2f}x {sol.passes:7.1f} {sol.iterations:6d} "
                f"{sol.rank:5d} {err:15.1e} {p_mem / 2**20:13.0f} {p_ooc / 2**20:13.1f}"
            )
        part_bounds(path, 0.5 * y)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def part_bounds(path: Path, y: np.ndarray) -> None:
    """Theorem 5.1's explicit bound with K in memory (Cholesky) and on disk (PCG over row blocks)."""
    args = (y, 1.0, 0.3, 0.05)
    print("\n== Part 2b: theorem_5_1_bound (λ = 1, σ = 0.3, δ = 0.05) on the same K, in memory and on disk")
    start = time.perf_counter()
    b_mem = theorem_5_1_bound(np.load(path), *args)
    t_mem = time.perf_counter() - start
    start = time.perf_counter()
    Kd = OnDiskKernel(path, block_rows=256)
    b_ooc = theorem_5_1_bound(Kd, *args)
    t_ooc = time.perf_counter() - start
    _, p_mem = _peak(lambda: theorem_5_1_bound(np.load(path), *args))
    _, p_ooc = _peak(lambda: theorem_5_1_bound(OnDiskKernel(path, block_rows=256), *args))
    rel = abs(b_ooc.total - b_mem.total) / abs(b_mem.total)
    print(
        f"{'in-memory s':>12s} {'ooc s':>8s} {'ooc/mem':>8s} {'passes':>7s} {'total':>9s} {'|Δ|/total':>10s} "
        f"{'peak MiB mem':>13s} {'peak MiB ooc':>13s}"
    )
    print(
        f"{t_mem:12.2f} {t_ooc:8.2f} {t_ooc / t_mem:7.2f}x {Kd.passes:7.1f} {b_mem.total:9.4f} {rel:10.1e} "
        f"{p_mem / 2**20:13.0f} {p_ooc / 2**20:13.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--no-gram", action="store_true")
    parser.add_argument("--no-krr", action="store_true")
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument(
        "--two-threads",
        action="store_true",
        help="also time in-process empirical_ntk on 2 threads (pathologically slow on a loaded machine)",
    )
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPU(s), torch {torch.__version__}, "
        f"load average {os.getloadavg()[0]:.1f} (other jobs on the cores slow the 2-process runs)"
    )
    if not args.no_gram:
        part_gram(32 if args.quick else 128, 8 if args.quick else 16, args.two_threads)
    if not args.no_scale:
        part_scale(2 if args.quick else 4)
    if not args.no_krr:
        part_krr(800 if args.quick else 4000, (0.1, 1.0) if args.quick else (0.03, 0.1, 1.0))


if __name__ == "__main__":
    main()
