"""The tiled out-of-core Cholesky (ntk_core.cholesky_ooc) against LAPACK's in-memory Cholesky, side by side.

For Setting 1's kernel on n MNIST images (``sphere_features``; random unit vectors without ``NTK_CORE_DATA``):

* **baseline**: K built whole in memory (``setting1_kernel``), then ``scipy.linalg.cholesky`` and one
  triangular solve for yᵀK⁻¹y;
* **tiled**: ``tiled_cholesky`` with K's tiles computed from the inputs (never stored), tile side b, the factor's
  tiles written to a temporary folder, then ``quadratic`` (one pass over L).

Printed per row: seconds of each, the ratio tiled / baseline, the relative difference of the two yᵀK⁻¹y, the peak
of traced memory (``tracemalloc``: NumPy's allocations) of each, and the factor's bytes on disk. The last line
extrapolates the tiled time to n = 60,000 by n³ from the largest n measured (the factorisation's flops; K's tiles
grow as n² and are a small share at these sizes).

    python benchmarks/bench_cholesky_ooc.py                 # n = 2,000 and 4,000; about a minute on 2 cores
    python benchmarks/bench_cholesky_ooc.py --n 8000 --tile 2000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.linalg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ntk_core import data, infinite  # noqa: E402
from ntk_core.cholesky_ooc import KernelSource, tiled_cholesky  # noqa: E402


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray, str]:
    if os.environ.get("NTK_CORE_DATA"):
        mnist = data.load_mnist("train")
        idx = np.random.default_rng(0).choice(len(mnist.labels), size=n, replace=False)
        x = data.sphere_features(mnist.images[idx])
        return x, np.where(mnist.labels[idx] % 2 == 0, 1.0, -1.0), "MNIST"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 784))
    x *= np.sqrt(784) / np.linalg.norm(x, axis=1, keepdims=True)
    return x, np.sign(rng.standard_normal(n)), "random"


def _timed(fn):
    tracemalloc.start()
    t = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return value, seconds, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[2_000, 4_000])
    parser.add_argument("--tile", type=int, default=None, help="tile side (default n/4)")
    args = parser.parse_args()
    print(
        f"{'n':>7} {'tile':>6} {'data':>7} {'baseline s':>11} {'tiled s':>8} {'ratio':>6} {'rel. diff':>9} "
        f"{'base MiB':>9} {'tiled MiB':>9} {'disk MiB':>9}"
    )
    last = None
    for n in args.n:
        x, y, source = _inputs(n)
        tile = args.tile or n // 4

        def baseline():
            K = infinite.setting1_kernel(x)
            L = scipy.linalg.cholesky(K, lower=True, overwrite_a=True, check_finite=False)
            z = scipy.linalg.solve_triangular(L, y, lower=True, check_finite=False)
            return float(z @ z)

        folder = Path(tempfile.mkdtemp(prefix="bench-chol-"))
        try:

            def tiled():
                src = KernelSource.from_function(infinite.setting1_kernel, x, name="setting1")
                return tiled_cholesky(src, folder, tile=tile).quadratic(y)

            exact, t_base, m_base = _timed(baseline)
            value, t_tiled, m_tiled = _timed(tiled)
            disk = sum(p.stat().st_size for p in folder.rglob("*.npz")) / 2**20
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        print(
            f"{n:>7,} {tile:>6,} {source:>7} {t_base:>11.1f} {t_tiled:>8.1f} {t_tiled / t_base:>6.2f} "
            f"{abs(value - exact) / exact:>9.1e} {m_base:>9.0f} {m_tiled:>9.0f} {disk:>9.0f}"
        )
        last = (n, t_tiled)
    if last is not None:
        n, t = last
        print(f"tiled at n = 60,000, extrapolated by n³ from n = {n:,}: {t * (60_000 / n) ** 3 / 60:.0f} minutes")


if __name__ == "__main__":
    main()
