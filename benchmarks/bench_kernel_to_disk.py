"""Setting 1's kernel on every MNIST training image (n = 60,000: 28.8 GB in float64) written to disk, tile by tile.

The ``bound_scale`` study never stores K: its tiled Cholesky (``ntk_core.kernel_matrix.factored``) evaluates each tile of K
when the factorisation needs it. This script measures what storing it would cost, for a reader who wants K on
disk (``python -m ntk_core bound --kernel K.npy`` reads such a file in blocks):

* ``ntk_core.kernel_matrix.file.write_kernel`` (what ``python -m ntk_core kernel`` runs): the lower tiles (i ≥ j) of
  K = ``infinite.setting1_kernel`` on ``sphere_features`` of the images, side b, shared among ``--processes``
  worker processes (one thread each), each tile and its mirror written into one ``.npy`` file row by row and
  synced, one marker per finished tile (resumable), the file renamed into place when whole;
* **baseline**: one tile timed alone in this process before the workers start, times the number of tiles and
  divided by the processes: what perfect scaling of that tile would give.

Printed: the wall time, its ratio to the baseline, the file's size, the largest peak resident memory of the
workers (``ru_maxrss`` of the children) and the largest difference of a sample of entries (the diagonal and random ones) from the same
kernel evaluated on those pairs alone. The file is removed at the end unless ``--keep``.

    NTK_CORE_DATA=/path/to/data python benchmarks/bench_kernel_to_disk.py --n 60000 --processes 2 --dir /big/disk
    python benchmarks/bench_kernel_to_disk.py --n 4000            # random unit vectors without NTK_CORE_DATA
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per worker, set before NumPy starts its BLAS

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ntk_core import data, infinite  # noqa: E402
from ntk_core.kernel_matrix import KernelSource  # noqa: E402
from ntk_core.kernel_matrix.file import write_kernel  # noqa: E402


def _inputs(n: int) -> tuple[np.ndarray, str]:
    if os.environ.get("NTK_CORE_DATA"):
        images = data.load_mnist("train").images
        if n > len(images):
            raise SystemExit(f"--n {n}: MNIST has {len(images)} training images")
        return data.sphere_features(images[:n]), "MNIST"
    x = np.random.default_rng(0).standard_normal((n, 784))
    return x * (np.sqrt(784) / np.linalg.norm(x, axis=1, keepdims=True)), "random"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60_000)
    parser.add_argument("--tile", type=int, default=3_750, help="tile side b (default 3,750: 16 tiles a side)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None, help="folder for the file (default: the temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the file (its path is printed)")
    args = parser.parse_args()
    x, where = _inputs(args.n)
    print(f"inputs: {where}")
    source = KernelSource.from_function(infinite.setting1_kernel, x, name="setting1")
    n, b = len(x), min(args.tile, args.n)
    blocks = -(-n // b)
    tiles = blocks * (blocks + 1) // 2
    t = time.perf_counter()
    source.block(slice(b, 2 * b), slice(0, b))
    one_tile = time.perf_counter() - t
    baseline = one_tile * tiles / args.processes
    folder = Path(tempfile.mkdtemp(prefix="bench-k-", dir=args.dir))
    path = folder / "K.npy"
    try:
        wall, peak, error = _write(path, source, x, b, args.processes)
        size = path.stat().st_size / 1e9
    finally:
        if not args.keep:  # nothing is left behind, also when interrupted (the part file and its tile markers)
            shutil.rmtree(folder, ignore_errors=True)
    print(
        f"wall {wall / 60:.1f} min (one tile {one_tile:.2f} s; baseline {baseline / 60:.1f} min, ratio "
        f"{wall / baseline:.2f}); file {size:.1f} GB; largest worker peak RSS {peak:.2f} GiB"
        + f"; largest difference on {len(range(0, n, 997)) + 200} sampled entries {error:.1e}"
        + (f"; kept: {path}" if args.keep else "")
    )


def _write(path: Path, source: KernelSource, x: np.ndarray, b: int, processes: int) -> tuple[float, float, float]:
    """Write K into ``path`` with ``processes`` workers; (seconds, the workers' largest peak RSS in GiB, the largest
    difference of the sampled entries from the kernel evaluated on those pairs alone)."""
    n = source.n
    print(f"n = {n:,}, tiles of {b:,}, {processes} processes, file {path}", flush=True)
    start = time.perf_counter()
    write_kernel(source, path, tile=b, processes=processes)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB → GiB
    K = np.load(path, mmap_mode="r")
    rng = np.random.default_rng(1)
    diagonal = np.arange(0, n, 997)
    a, c = rng.integers(0, n, 200), rng.integers(0, n, 200)
    direct = [infinite.setting1_kernel(x[k : k + 1])[0, 0] for k in diagonal]
    direct += [infinite.setting1_kernel(x[p : p + 1], x[q : q + 1])[0, 0] for p, q in zip(a, c)]
    i, j = np.concatenate([diagonal, a]), np.concatenate([diagonal, c])
    error = float(np.max(np.abs(np.asarray(K[i, j]) - np.array(direct))))
    del K
    return wall, peak, error


if __name__ == "__main__":
    main()
