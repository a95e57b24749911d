"""One unit of ``experiments.bound_scale`` with and without its reads kept, side by side in one process (issue 30).

A unit computes every term of Theorem 5.2 or 5.3 from tiled Cholesky factors on disk. Several things are asked
for again and again: ``tr K`` (once per class and λ by the bounds), beyond the grid (``n > grid_max_n``)
``yᵀK⁻¹y`` (the complexity and the ridge term bounded by it), on the grid K's tiles (one factorisation per λ)
and the factor's tiles (several passes per λ). ``FactoredKernel.diagonal`` now reads K's diagonal once,
``bound_scale._RidgeAtZero.ridge_quadratic`` solves once per labels, and ``FactoredKernel`` keeps K's tiles and
the tiles of the factor in use in memory where they fit (``keep_memory``); the baseline here re-reads,
re-evaluates and re-solves as the code before did (subclasses that drop what is kept). The rows must be equal bit for bit
(asserted); the times are the median of ``--repeat`` runs of each, interleaved.

    OMP_NUM_THREADS=2 python benchmarks/bench_bound_scale_unit.py                      # multiclass n = 2,000
    OMP_NUM_THREADS=2 python benchmarks/bench_bound_scale_unit.py --task binary --n 4000
    OMP_NUM_THREADS=2 python benchmarks/bench_bound_scale_unit.py --grid-max-n 1000    # the path beyond the grid
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from ntk_core import data
from ntk_core.cholesky_ooc import FactoredKernel
from ntk_core.experiments import bound_scale
from ntk_core.kernel_matrix import KernelMatrix


class _Before(FactoredKernel):
    """The baseline: nothing kept in memory (K's tiles evaluated for each factor and pass, the factor's tiles
    read from disk at every pass) and K's diagonal read from the factor's diagonal tiles at every call."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **{**kwargs, "keep_memory": 0})  # type: ignore[arg-type]

    def diagonal(self) -> np.ndarray:
        self._k_diagonal = None
        return super().diagonal()


class _ResolveAtZero(bound_scale._RidgeAtZero):
    """The baseline: a solve at λ = 0 for every ridge quadratic."""

    def ridge_quadratic(self, Y: np.ndarray, lam: float) -> float | np.ndarray:
        return KernelMatrix.ridge_quadratic(self, Y, lam)


def run_unit(config: bound_scale.Config, task: str, n: int, baseline: bool) -> tuple[float, pd.DataFrame]:
    """Seconds and rows of the unit (task, n, seed 0), its factors in a fresh folder."""
    mnist, mnist_test = data.load_mnist("train"), data.load_mnist("test")
    features = data.sphere_features(mnist.images)
    base = "binary" if task.startswith("binary") else "multiclass"
    classes = (5, 8) if base == "binary" else tuple(range(10))
    pool = np.flatnonzero(np.isin(mnist.labels, classes))
    test_pool = np.flatnonzero(np.isin(mnist_test.labels, classes))
    idx = pool[bound_scale._subset(len(pool), n, 0)]
    test = (data.sphere_features(mnist_test.images[test_pool]), mnist_test.labels[test_pool].astype(np.int64))
    folder = Path(tempfile.mkdtemp(prefix="bench-bound-scale-")) / "factors"
    patches = (
        [
            mock.patch.object(bound_scale, "FactoredKernel", _Before),
            mock.patch.object(bound_scale, "_RidgeAtZero", _ResolveAtZero),
        ]
        if baseline
        else []
    )
    for p in patches:
        p.start()
    try:
        start = time.perf_counter()
        rows = bound_scale._unit(config, task, features[idx], mnist.labels[idx].astype(np.int64), 0, test, folder)
        seconds = time.perf_counter() - start
    finally:
        for p in patches:
            p.stop()
    return seconds, pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="multiclass", choices=["binary", "multiclass"])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--grid-max-n", type=int, default=None, help="default: the medium profile's (12,000)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    config = bound_scale.Config.medium()
    if args.grid_max_n is not None:
        config = dataclasses.replace(config, grid_max_n=args.grid_max_n)
    times: dict[bool, list[float]] = {True: [], False: []}
    tables: dict[bool, pd.DataFrame] = {}
    for _ in range(args.repeat):
        for baseline in (True, False):
            seconds, tables[baseline] = run_unit(config, args.task, args.n, baseline)
            times[baseline].append(seconds)
    pd.testing.assert_frame_equal(tables[True], tables[False], check_exact=True)
    before, after = statistics.median(times[True]), statistics.median(times[False])
    where = "on the grid" if args.n <= config.grid_max_n else "beyond the grid (λ = 0 factored only)"
    print(f"| {args.task} | {args.n:,} | {where} | {before:.1f} s | {after:.1f} s | {before / after:.2f}x | equal |")


if __name__ == "__main__":
    main()
