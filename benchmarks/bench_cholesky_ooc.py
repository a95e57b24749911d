"""The tiled out-of-core Cholesky (ntk_core.kernel_matrix.factored) against LAPACK's in-memory Cholesky, side by side.

For Setting 1's kernel on n MNIST images (``sphere_features``; random unit vectors without ``NTK_CORE_DATA``),
or on every "5" and "8" of MNIST's training split (``--five-eight``: n = 11,272, y = ±1, the binary task of the
``bound_scale`` study), at each λ of ``--lams`` (default λ = 0 only):

* **baseline**: K built whole in memory once (``setting1_kernel``; its time and memory in the first λ's row), then
  for each λ ``scipy.linalg.cholesky`` of K + λ²I and one triangular solve for yᵀ(K + λ²I)⁻¹y;
* **tiled**: ``FactoredKernel`` with K's tiles computed from the inputs (never stored), tile side b, one factor
  per λ written to a temporary folder, then ``ridge_quadratic`` (one pass over L).

Printed per (n, λ): seconds of each, the ratio tiled / baseline, the relative difference of the two
yᵀ(K + λ²I)⁻¹y, the peak of traced memory (``tracemalloc``: NumPy's allocations) of each, and the factor's bytes
on disk. The last line extrapolates the tiled time at the first λ to n = 60,000 by n³ from the largest n measured
(the factorisation's flops; K's tiles grow as n² and are a small share at these sizes).

    python benchmarks/bench_cholesky_ooc.py                 # n = 2,000 and 4,000; about a minute on 2 cores
    python benchmarks/bench_cholesky_ooc.py --n 8000 --tile 2000
    python benchmarks/bench_cholesky_ooc.py --five-eight --lams 0 0.25 1 4 16   # n = 11,272: about 10 minutes
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
from ntk_core.kernel_matrix import FactoredKernel, KernelSource  # noqa: E402


def _inputs(n: int | None) -> tuple[np.ndarray, np.ndarray, str]:
    """n random MNIST images with y = ±1 by parity, or (``n=None``) every "5" and "8" with y = +1 for "5"."""
    if n is None:
        mnist = data.load_mnist("train")
        idx = np.flatnonzero(np.isin(mnist.labels, (5, 8)))
        return data.sphere_features(mnist.images[idx]), np.where(mnist.labels[idx] == 5, 1.0, -1.0), "MNIST 5/8"
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
    parser.add_argument("--five-eight", action="store_true", help="every 5 and 8 of MNIST (n = 11,272) instead")
    parser.add_argument("--lams", type=float, nargs="+", default=[0.0], help="the λ of K + λ²I (default 0)")
    parser.add_argument("--tile", type=int, default=None, help="tile side (default n/4)")
    args = parser.parse_args()
    if args.five_eight and not os.environ.get("NTK_CORE_DATA"):
        parser.error("--five-eight needs MNIST: set NTK_CORE_DATA")
    print(
        f"{'n':>7} {'λ':>6} {'tile':>6} {'data':>9} {'baseline s':>11} {'tiled s':>8} {'ratio':>6} {'rel. diff':>9} "
        f"{'base MiB':>9} {'tiled MiB':>9} {'disk MiB':>9}"
    )
    last = None
    worst = 0.0
    for n in [None] if args.five_eight else args.n:
        x, y, source = _inputs(n)
        n = len(y)
        tile = args.tile or n // 4
        K = None
        folder = Path(tempfile.mkdtemp(prefix="bench-chol-"))
        try:
            for i, lam in enumerate(args.lams):

                def baseline():
                    nonlocal K
                    if K is None:
                        K = infinite.setting1_kernel(x)
                    A = K + lam**2 * np.eye(n)
                    L = scipy.linalg.cholesky(A, lower=True, overwrite_a=True, check_finite=False)
                    z = scipy.linalg.solve_triangular(L, y, lower=True, check_finite=False)
                    return float(z @ z)

                def tiled():
                    src = KernelSource.from_function(infinite.setting1_kernel, x, name="setting1")
                    return float(FactoredKernel(src, folder, tile=tile).ridge_quadratic(y, lam))

                exact, t_base, m_base = _timed(baseline)
                value, t_tiled, m_tiled = _timed(tiled)
                disk = sum(p.stat().st_size for p in folder.rglob("*.npz")) / 2**20
                shutil.rmtree(folder, ignore_errors=True)
                worst = max(worst, abs(value - exact) / exact)
                print(
                    f"{n:>7,} {lam:>6g} {tile:>6,} {source:>9} {t_base:>11.1f} {t_tiled:>8.1f} {t_tiled / t_base:>6.2f} "
                    f"{abs(value - exact) / exact:>9.1e} {m_base:>9.0f} {m_tiled:>9.0f} {disk:>9.0f}",
                    flush=True,
                )
                if i == 0:
                    last = (n, t_tiled)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"largest relative difference: {worst:.1e}")
    if last is not None:
        n, t = last
        print(f"tiled at n = 60,000, extrapolated by n³ from n = {n:,}: {t * (60_000 / n) ** 3 / 60:.0f} minutes")


if __name__ == "__main__":
    main()
