"""Which labels are wrong, on all 60,000 MNIST training images: the kernel finder out of core (issue 60's target).

Ten classes, 20 % symmetric noise (one draw, ``--seed``), kernel ridge regression with the infinite-width NTK of a
one-hidden-layer ReLU network (``infinite.relu_ntk`` on features with ‖x‖² = d, as in
``bench_label_errors.py``). K (28.8 GB in float64 at n = 60,000) is never held: its tiles are evaluated from
the inputs and K + λ²I is factored tile by tile into ``--dir`` (``kernel_matrix.FactoredKernel``, resumable: a
killed run goes on from the factor's finished tiles), and ``label_errors.from_kernel(..., method="residual")``
scores every label against the fit (what a K out of core gives: the leave-one-out form needs the inverse's
diagonal).

λ: leave-one-out over the book's grid (λ² = t · tr K/n) on a random subset of ``--subset`` images with the
same noisy labels (what a user can afford), carried to n = 60,000 as the same t. The subset's own scores
(leave-one-out and residual) are printed beside the full run's, so the gain from 30 times the data is measured
too. The full run's time is set beside the bound study's n = 60,000 unit (the medium ``bound_scale`` record's,
one factorisation of the same size), the issue's yardstick.

    NTK_CORE_DATA=/path/to/data OMP_NUM_THREADS=2 python benchmarks/bench_label_errors_full.py \\
        --dir /big/disk/finder --json benchmarks/results/label_errors_full.json   # about 45 min on 2 cores
    ... --n 6000 --dir /tmp/finder-small                                          # a smoke test, a minute
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import ntk_core as nc
from ntk_core import label_errors
from ntk_core.bookkit.studies.label_errors import LAM_GRID, lam_by_leave_one_out, ranking_metrics
from ntk_core.kernel_matrix.factored import FactoredKernel, KernelSource
from ntk_core.data import load_mnist, sphere_features
from ntk_core.experiments import RecordMissing, unit_seconds
from ntk_core.infinite import relu_ntk


def _kernel(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    return relu_ntk(x1, x2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60000, help="training images (the first n of MNIST's 60,000)")
    parser.add_argument("--rate", type=float, default=0.2, help="symmetric flip rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--subset", type=int, default=2000, help="images for λ's leave-one-out choice")
    parser.add_argument("--dir", type=Path, required=True, help="folder for the factor's tiles (about 8n²/2 bytes)")
    parser.add_argument("--memory", type=float, default=2.0, help="GiB the factorisation may hold")
    parser.add_argument("--json", type=Path, help="also write the results to this new file")
    args = parser.parse_args(argv)
    if args.json is not None and args.json.exists():
        parser.error(f"--json {args.json} exists: name a new file (this script writes over nothing)")

    mnist = load_mnist("train")
    x = sphere_features(mnist.images[: args.n])
    clean = mnist.labels[: args.n].astype(np.int64)
    noisy = np.asarray(nc.corrupt(clean, nc.symmetric_transition(10, args.rate), seed=args.seed))
    wrong = noisy != clean
    print(f"n = {args.n:,}, {int(wrong.sum()):,} labels flipped ({wrong.mean():.1%})", flush=True)

    rng = np.random.default_rng(args.seed)
    sub = np.sort(rng.choice(args.n, size=args.subset, replace=False))
    start = time.perf_counter()
    K_sub = relu_ntk(x[sub])
    lam_sub, at_edge = lam_by_leave_one_out(K_sub, noisy[sub])
    t = lam_sub**2 / (float(np.trace(K_sub)) / args.subset)
    subset_rows = {}
    for method in ("leave-one-out", "residual"):
        found = label_errors.from_kernel(K_sub, noisy[sub], lam_sub, method=method)
        subset_rows[method] = ranking_metrics(found.scores, wrong[sub])
    choose_seconds = time.perf_counter() - start
    print(
        f"λ by leave-one-out on {args.subset:,} images: t = λ²n/tr K = {t:g}"
        f"{' (at the grid edge)' if at_edge else ''}, {choose_seconds:.0f} s; grid {LAM_GRID[0]:g}..{LAM_GRID[-1]:g}",
        flush=True,
    )

    start = time.perf_counter()
    source = KernelSource.from_function(_kernel, x, name="relu_ntk")
    FK = FactoredKernel(source, args.dir, memory_budget=int(args.memory * 1024**3), progress=True)
    lam = float(np.sqrt(t * FK.trace() / args.n))
    found = label_errors.from_kernel(FK, noisy, lam, method="residual", flip_rate=args.rate)
    seconds = time.perf_counter() - start
    full = ranking_metrics(found.scores, wrong)
    print(f"n = {args.n:,}, residual: {full}, {seconds:.0f} s (factor and solve)", flush=True)
    for method, row in subset_rows.items():
        print(f"n = {args.subset:,} subset, {method}: {row}")
    contradicted = int(np.sum(found.scores > 0))
    print(
        f"labels the fit contradicts: {contradicted:,}; expected from the rate {found.n_wrong:,}; planted {int(wrong.sum()):,}"
    )

    try:
        units = unit_seconds("bound_scale")
        yardstick = float(units.loc[units["n"] == units["n"].max(), "seconds"].max())
        print(f"the bound study's n = {int(units['n'].max()):,} unit: {yardstick:.0f} s; this run {seconds:.0f} s")
    except RecordMissing:
        yardstick = float("nan")
    if args.json is not None:
        out = {
            "n": args.n,
            "rate": args.rate,
            "seed": args.seed,
            "flipped": int(wrong.sum()),
            "subset": args.subset,
            "t": t,
            "t_at_edge": bool(at_edge),
            "lam": lam,
            "choose_seconds": choose_seconds,
            "seconds": seconds,
            "bound_unit_seconds": yardstick,
            "full_residual": full,
            "subset_scores": subset_rows,
            "contradicted": contradicted,
            "expected_wrong": int(found.n_wrong),
        }
        with open(args.json, "x") as f:
            json.dump(out, f, indent=1, default=float)


if __name__ == "__main__":
    main()
