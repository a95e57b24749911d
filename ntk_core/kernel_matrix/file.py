"""A kernel matrix written to a ``.npy`` file tile by tile, by several processes, resumably: :func:`write_kernel`.

K = k(X, X) of n inputs takes 8n² bytes in float64 (28.8 GB at n = 60,000): more than the memory of many
machines, not more than their disks. :func:`write_kernel` evaluates the lower tiles ``K[I, J]`` (``I ≥ J``) of a
:class:`~ntk_core.kernel_matrix.source.KernelSource` — a kernel function of the inputs, for example Setting 1's
infinite-width NTK — and writes each with its mirror ``K[J, I] = K[I, J]ᵀ`` into one ``.npy`` file, which
:class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel`, the bounds (``python -m ntk_core bound --kernel K.npy``) and the
out-of-core solvers read in blocks.

Reliability (the rules of :mod:`ntk_core._store`): the matrix grows in ``<path>.part`` beside a folder
``<path>.tiles/`` that holds the source's identity and one marker per tile, written only after the tile's rows
are on disk (``fsync``); a killed run resumes from the markers, a partial file of another source or tiling is
started again; at the end the file is flushed and renamed to ``path``, so that ``path`` only ever holds a whole K.
The free disk space is checked before anything is written.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import _store
from .._checks import check_count
from .source import DEFAULT_CHOLESKY_MEMORY, KernelSource

__all__ = ["WrittenKernel", "write_kernel"]


@dataclass(frozen=True)
class WrittenKernel:
    """What :func:`write_kernel` did: the file, n, the tile side, the lower tiles and how many it computed (the
    others were found finished by an earlier, interrupted run)."""

    path: Path
    n: int
    tile: int
    tiles: int
    computed: int


def _tiles(n: int, b: int) -> list[tuple[int, int]]:
    blocks = -(-n // b)
    return [(i, j) for i in range(blocks) for j in range(i + 1)]


def _write_tiles(
    source: KernelSource,
    part: Path,
    markers: Path,
    b: int,
    todo: list[tuple[int, int]],
    claim: Any,
    done: Callable[[], None] | None = None,
) -> None:
    """Write the tiles of ``todo`` that this process claims from the shared counter ``claim``, each row with
    ``os.pwrite``, then the tile's marker once its rows are on disk."""
    n = source.n
    offset = np.load(part, mmap_mode="r").offset  # the .npy header's length
    fd = os.open(part, os.O_WRONLY)
    try:
        while True:
            with claim.get_lock():
                k = claim.value
                claim.value += 1
            if k >= len(todo):
                return
            i, j = todo[k]
            rows, cols = slice(i * b, min((i + 1) * b, n)), slice(j * b, min((j + 1) * b, n))
            tile = source.block(rows, cols)  # a diagonal tile: x2 is x1, so that a kernel can treat k(x, x) exactly
            for block, r0, c0 in ((tile, rows.start, cols.start), (tile.T, cols.start, rows.start))[: 1 + (i != j)]:
                block = np.ascontiguousarray(block, dtype=np.float64)
                for r in range(block.shape[0]):
                    os.pwrite(fd, block[r].tobytes(), offset + ((r0 + r) * n + c0) * 8)
            os.fsync(fd)
            (markers / f"{i}_{j}").touch()
            if done is not None:
                done()
    finally:
        os.close(fd)


def _identity(source: KernelSource, b: int) -> dict[str, Any]:
    return {"format": 1, "n": source.n, "tile": b, "source": source.identity}


def _prepare(source: KernelSource, part: Path, markers: Path, b: int) -> None:
    """Keep a partial file of the same source and tiling; otherwise start one (after checking the disk)."""
    want = _identity(source, b)
    stamp = markers / "identity.json"
    if part.is_file() and stamp.is_file():
        try:
            if json.loads(stamp.read_text()) == json.loads(json.dumps(want, default=str)):
                return
        except ValueError:
            pass
    part.unlink(missing_ok=True)
    shutil.rmtree(markers, ignore_errors=True)
    need = 8 * source.n * source.n + 4096
    free = shutil.disk_usage(part.parent).free
    if free < need:
        raise OSError(
            f"not enough disk space for K ({source.n} x {source.n} float64): {need / 1e9:.2f} GB needed in "
            f"{part.parent}, {free / 1e9:.2f} GB free"
        )
    np.lib.format.open_memmap(part, mode="w+", dtype=np.float64, shape=(source.n, source.n)).flush()
    markers.mkdir(parents=True)
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(json.dumps(want, default=str))
    tmp.replace(stamp)


def write_kernel(
    source: KernelSource | Any,
    path: str | os.PathLike[str],
    *,
    tile: int | None = None,
    processes: int = 1,
    memory_budget: int | None = None,
    progress: bool = False,
) -> WrittenKernel:
    """Write the (n, n) kernel matrix of ``source`` into the ``.npy`` file ``path``, tile by tile, resumably.

    The lower tiles ``K[I, J]``, ``I ≥ J``, of side b are evaluated (``source.block``; a diagonal tile with
    ``x2 is x1``) and each is written with its mirror, so the file is symmetric bit for bit; n(n + b)/2 entries
    are evaluated instead of n². See the module docstring for what happens on disk and on a rerun.

    Parameters
    ----------
    source : KernelSource or matrix
        Where K's tiles come from, usually :meth:`~ntk_core.kernel_matrix.source.KernelSource.from_function` (a matrix is wrapped by
        :meth:`~ntk_core.kernel_matrix.source.KernelSource.from_matrix`).
    path : str or os.PathLike
        The ``.npy`` file to write (replaced if it exists, once the new one is whole).
    tile : int, optional
        The side b of a tile (default: the largest whose tile and mirror fit in ``memory_budget``).
    processes : int
        Worker processes that share the tiles (``os.fork``; 1: this process). Each evaluates the kernel on its
        own thread(s): set ``OMP_NUM_THREADS`` so that processes × threads fits the cores.
    memory_budget : int, optional
        Bytes of tiles each process holds at once (default :data:`~ntk_core.kernel_matrix.source.DEFAULT_CHOLESKY_MEMORY`).
    progress : bool
        A progress bar over the tiles.

    Returns
    -------
    WrittenKernel

    Raises
    ------
    ValueError
        A path that does not end in ``.npy``; ``processes`` or ``tile`` below 1.
    OSError
        Not enough free disk space (nothing is written), or another error of the file system.
    RuntimeError
        A worker process failed (its tiles so far are kept: rerun to resume).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from ntk_core import infinite
    >>> from ntk_core.kernel_matrix.factored import KernelSource
    >>> from ntk_core.kernel_matrix.file import write_kernel
    >>> x = np.random.default_rng(0).standard_normal((10, 3))
    >>> x *= np.sqrt(3) / np.linalg.norm(x, axis=1, keepdims=True)
    >>> source = KernelSource.from_function(infinite.setting1_kernel, x)
    >>> out = write_kernel(source, os.path.join(tempfile.mkdtemp(), "K.npy"), tile=4)
    >>> K = np.load(out.path)
    >>> out.tiles, out.computed, K.shape, bool(np.array_equal(K, K.T))
    (6, 6, (10, 10), True)
    >>> bool(np.allclose(K, infinite.setting1_kernel(x), rtol=1e-14, atol=0))
    True
    """
    src = source if isinstance(source, KernelSource) else KernelSource.from_matrix(source)
    target = Path(path)
    if target.suffix != ".npy":
        raise ValueError(f"path must name a .npy file, got {str(target)!r}")
    processes = check_count(processes, "processes")
    if processes > 1 and not hasattr(os, "fork"):
        raise ValueError("processes > 1 needs os.fork (Linux, macOS); use processes=1 here")
    budget = DEFAULT_CHOLESKY_MEMORY if memory_budget is None else check_count(memory_budget, "memory_budget")
    b = min(check_count(tile, "tile"), src.n) if tile is not None else _store.tile_side(budget, src.n, per_pair=16.0)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = target.with_name(f".{target.name}.lock")  # held while writing; removed once the file is whole
    try:
        with _store.file_lock(lock, timeout=0):
            part, markers = target.with_name(target.name + ".part"), target.with_name(target.name + ".tiles")
            try:
                _prepare(src, part, markers, b)
            except BaseException:  # refused before anything was written (a full disk): nothing left behind
                if not part.exists() and not markers.exists():
                    lock.unlink(missing_ok=True)
                raise
            every = _tiles(src.n, b)
            todo = [t for t in every if not (markers / f"{t[0]}_{t[1]}").exists()]
            ctx = mp.get_context("fork") if processes > 1 else mp.get_context()
            claim = ctx.Value("l", 0)
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=len(every), initial=len(every) - len(todo), desc="K tiles", unit="tile")
            if processes == 1 or len(todo) <= 1:
                _write_tiles(src, part, markers, b, todo, claim, None if bar is None else lambda: bar.update())
            else:
                workers = [
                    ctx.Process(target=_write_tiles, args=(src, part, markers, b, todo, claim))  # type: ignore[attr-defined]
                    for _ in range(min(processes, len(todo)))
                ]
                for w in workers:
                    w.start()
                while any(w.is_alive() for w in workers):
                    if bar is not None:
                        bar.n = len(every) - sum(1 for t in todo if not (markers / f"{t[0]}_{t[1]}").exists())
                        bar.refresh()
                    time.sleep(0.2)
                failed = [w.exitcode for w in workers if w.exitcode]
                if failed:
                    raise RuntimeError(
                        f"a worker process failed (exit code {failed[0]}); its finished tiles are kept: rerun"
                    )
            if bar is not None:
                bar.n = len(every)
                bar.close()
            missing = [t for t in every if not (markers / f"{t[0]}_{t[1]}").exists()]
            if missing:
                raise RuntimeError(f"{len(missing)} tiles were not written (the first {missing[0]}); rerun to resume")
            with open(part, "rb+") as f:
                os.fsync(f.fileno())
            part.replace(target)
            shutil.rmtree(markers, ignore_errors=True)
            lock.unlink(missing_ok=True)  # still held: a writer that opened it now fails at once
            return WrittenKernel(target, src.n, b, len(every), len(todo))
    except TimeoutError:
        raise ValueError(
            f"another process is writing {target} (it holds {lock}): wait for it to finish, or write elsewhere"
        ) from None
