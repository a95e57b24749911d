"""One unit of ``experiments.bound_scale`` with its passes over the factor shared, against each label matrix
passed on its own, side by side in one process (issue 30).

A unit computes every term of Theorem 5.2 or 5.3 from tiled Cholesky factors; beyond the grid
(``n > grid_max_n``, n = 32,000 and 60,000 in the medium profile) the factor at λ = 0 does not fit in memory and
every pass over it reads and verifies it from disk (14.4 GB at n = 60,000). Now every label matrix of the unit at
λ = 0 (both noise models' clean outputs and the one-hot labels) goes through **one** forward pass
(``FactoredKernel.forwards``), the error estimate is ``Zᵀ(L⁻¹R)`` from that pass (a backward and a forward pass
more, not five passes), the pivots and ``1ᵀK1/n`` come from what the tiles said as a pass read them, and a
factor that fits in memory (n ≤ 16,000) is made there without being written to disk, verified and deleted. The
baseline does what the code before did: every factor written, a forward pass per label matrix, a solve of two
passes for each ridge quadratic at λ = 0 and each ridge solve, the five-pass error estimate, and every
tile read again for the conditioning (subclasses and patches). The rows agree to rounding (the passes round differently: the largest
relative difference is printed and must be below 1e-12); the tile reads after the factorisation and the times
are printed, the times the median of ``--repeat`` interleaved runs of each.

    OMP_NUM_THREADS=2 python benchmarks/bench_bound_scale_unit.py --n 4000 --grid-max-n 1000 --keep-memory 0
    OMP_NUM_THREADS=2 python benchmarks/bench_bound_scale_unit.py --task binary --n 4000
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from ntk_core import data
from ntk_core.kernel_matrix import factored
from ntk_core.kernel_matrix.factored import FactoredKernel, TiledCholesky, array_key
from ntk_core.experiments import bound_scale
from ntk_core.kernel_matrix import KernelMatrix


class _SeparatePasses(FactoredKernel):
    """The baseline: every factor written to disk (also those kept in memory), one forward pass per label matrix
    (kept per labels, as the quadratics were), a solve of two passes for every ridge solve, the error estimate of
    five passes."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **{**kwargs, "persist": True})  # type: ignore[arg-type]
        self._kept: dict[tuple, float | np.ndarray] = {}

    def _ridge_quadratic(self, Y: np.ndarray, lam: float) -> float | np.ndarray:
        """yᵀK⁻¹y by a solve (two passes) once per labels, not from the forward pass; other λ as before."""
        if lam != 0.0:
            return super()._ridge_quadratic(Y, lam)
        key = array_key(np.asarray(Y))
        if key not in self._kept:
            self._kept[key] = KernelMatrix._ridge_quadratic(self, np.asarray(Y), lam)
        value = self._kept[key]
        return value.copy() if isinstance(value, np.ndarray) else value

    def _forwards_of(self, Ys, lam):  # type: ignore[no-untyped-def]
        return [super(_SeparatePasses, self)._forwards_of([Y], lam)[0] for Y in Ys]

    def _ridge_solve(self, Y: np.ndarray, lam: float) -> np.ndarray:
        return self.factor(lam).solve(Y)

    def checked_quadratic(self, Y: np.ndarray, lam: float):  # type: ignore[no-untyped-def]
        L = self.factor(lam)
        value = self.ridge_quadratic(Y, lam)
        delta = L.solve(Y - L.matvec(L.solve(Y)))
        return value, np.abs(np.sum(Y * delta, axis=0)) / np.maximum(np.abs(value), np.finfo(np.float64).tiny)


def _read_again(self: TiledCholesky, i: int, j: int) -> None:
    """The baseline: the conditioning reads every tile it needs again."""
    found = self._load(i, j)
    if found is None:
        self._compute(i, j)
    else:
        self._note(i, j, found.arrays)


def run_unit(config: bound_scale.Config, task: str, n: int, baseline: bool) -> tuple[float, int, pd.DataFrame]:
    """Seconds, tile reads after the factorisation at λ = 0, and rows of the unit (task, n, seed 0)."""
    mnist, mnist_test = data.load_mnist("train"), data.load_mnist("test")
    features = data.sphere_features(mnist.images)
    base = "binary" if task.startswith("binary") else "multiclass"
    classes = (5, 8) if base == "binary" else tuple(range(10))
    pool = np.flatnonzero(np.isin(mnist.labels, classes))
    test_pool = np.flatnonzero(np.isin(mnist_test.labels, classes))
    idx = pool[bound_scale._subset(len(pool), n, 0)]
    test = (data.sphere_features(mnist_test.images[test_pool]), mnist_test.labels[test_pool].astype(np.int64))
    folder = Path(tempfile.mkdtemp(prefix="bench-bound-scale-")) / "factors"
    reads: list[int] = []
    made: list[int] = []
    load, factor = TiledCholesky._load, TiledCholesky.factor

    def counted_load(self: TiledCholesky, i: int, j: int):  # type: ignore[no-untyped-def]
        reads.append(1)
        return load(self, i, j)

    def counted_factor(self: TiledCholesky, **options: object) -> TiledCholesky:
        out = factor(self, **options)  # type: ignore[arg-type]
        if self.lam == 0.0:
            made.append(len(reads))
        return out

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(TiledCholesky, "_load", counted_load))
        stack.enter_context(mock.patch.object(TiledCholesky, "factor", counted_factor))
        if baseline:
            stack.enter_context(mock.patch.object(bound_scale, "FactoredKernel", _SeparatePasses))
            stack.enter_context(mock.patch.object(TiledCholesky, "_stored", _read_again))
        start = time.perf_counter()
        rows = bound_scale._unit(config, task, features[idx], mnist.labels[idx].astype(np.int64), 0, test, folder)
        seconds = time.perf_counter() - start
    after = len(reads) - made[0] if made else len(reads)
    return seconds, after, pd.DataFrame(rows)


def _largest_difference(a: pd.DataFrame, b: pd.DataFrame) -> tuple[float, str]:
    """The largest relative difference between the numeric columns of two unit tables (``comp_error`` aside: it
    is an estimate of rounding itself)."""
    worst, where = 0.0, ""
    for col in a.columns:
        if col == "comp_error" or not pd.api.types.is_float_dtype(a[col]):
            continue
        x, y = a[col].to_numpy(), b[col].to_numpy()
        ok = np.isfinite(x) & np.isfinite(y)
        rel = np.abs(x[ok] - y[ok]) / np.maximum(np.abs(x[ok]), np.finfo(np.float64).tiny)
        if rel.size and rel.max() > worst:
            worst, where = float(rel.max()), col
    return worst, where


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="multiclass", choices=["binary", "multiclass"])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--grid-max-n", type=int, default=None, help="default: the medium profile's (12,000)")
    parser.add_argument("--keep-memory", type=int, default=None, help="bytes kept between passes (0: the disk path)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    config = bound_scale.Config.medium()
    if args.grid_max_n is not None:
        config = dataclasses.replace(config, grid_max_n=args.grid_max_n)
    keep = factored.DEFAULT_KEEP_MEMORY if args.keep_memory is None else args.keep_memory
    times: dict[bool, list[float]] = {True: [], False: []}
    reads: dict[bool, int] = {}
    tables: dict[bool, pd.DataFrame] = {}
    with mock.patch.object(factored, "DEFAULT_KEEP_MEMORY", keep):
        for _ in range(args.repeat):
            for baseline in (True, False):
                seconds, reads[baseline], tables[baseline] = run_unit(config, args.task, args.n, baseline)
                times[baseline].append(seconds)
    worst, column = _largest_difference(tables[True], tables[False])
    assert worst < 1e-12, f"the rows differ by {worst:.2g} relative in {column}"
    before, after = statistics.median(times[True]), statistics.median(times[False])
    where = "on the grid" if args.n <= config.grid_max_n else "beyond the grid (λ = 0 factored only)"
    print(
        f"| {args.task} | {args.n:,} | {where} | keep {keep:,} B | {reads[True]} → {reads[False]} tile reads | "
        f"{before:.1f} s | {after:.1f} s | {before / after:.2f}x | {worst:.1e} ({column or '-'}) |"
    )


if __name__ == "__main__":
    main()
