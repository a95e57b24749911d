r"""The empirical NTK Gram matrix on many processes: the tiles of :func:`~ntk_core.ntk.empirical_ntk` over torch.distributed.

:func:`distributed_ntk` computes the same matrix as
:func:`ntk_core.ntk.empirical_ntk` (paper, Section 3.2: ``k(x, x') = <∇θ f(θ, x), ∇θ f(θ, x')>``)
with N processes started by ``torchrun`` (or any ``torch.distributed`` process
group: ``gloo`` on CPUs, ``nccl`` with one GPU per rank), possibly on many
machines:

* **Same tiles, keyed by content.** The matrix is cut into the tiles that
  ``empirical_ntk`` uses (same method, same tile size, upper triangle only when
  ``x2`` is ``None``), and every finished tile goes to the same checkpoint store
  (:mod:`ntk_core._store`: one checksummed file per tile, written atomically,
  under a folder named by the hash of everything that determines the tiles:
  model, parameters, buffers, inputs, method, dtypes, geometry). A tile is
  named by its position in that folder, never by the rank that computed it.
* **Claimed dynamically.** Ranks take the next unclaimed tile from a counter in
  the ``torch.distributed`` store (the rendezvous ``TCPStore``), so a slow rank
  or a slow tile does not hold the others up; no collective operation is used,
  so the backend only carries the rendezvous.
* **Resumable with any number of processes.** A tile already in the folder is
  loaded (identity and integrity verified) instead of computed, so a run that
  was killed resumes with a different process count, or with plain
  ``empirical_ntk(..., checkpoint_dir=...)`` on one process, and a killed rank
  loses at most the tile it was computing.
* **Assembled on disk.** Rank 0 writes the matrix tile by tile into a
  memory-mapped ``.npy`` (temporary name, then an atomic rename), and returns
  it as a tensor as well when it is small.

The result is bit-identical to single-process ``empirical_ntk`` on the same
inputs, method and tile size (each tile is computed from the same slices by the
same code; on the same kind of device).

Launch: ``torchrun --nproc_per_node=N -m ntk_core gram ...`` (see
``python -m ntk_core gram --help``), or from Python inside an initialised
process group. Without a process group (and without torchrun's environment) it
runs on one process.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn
from tqdm import tqdm

from .. import _store
from .._checks import check_choice, check_interval
from .gram import _prepare
from .problem import METHODS, OUTPUTS, InputsLike
from .tiles import _blocks, _compute_tile, _FeatureSource, _identity, _tile_pairs, _TileStore

__all__ = ["BACKENDS", "GramResult", "distributed_ntk", "init_from_env"]

#: The torch.distributed backends: ``gloo`` for CPU processes, ``nccl`` for one GPU per rank.
BACKENDS: tuple[str, ...] = ("gloo", "nccl")
_RETURN_BYTES = 256 * 1024**2
_POLL = 0.02
_CALLS: dict[str, int] = {}


@dataclass
class GramResult:
    """What :func:`distributed_ntk` returns on every rank.

    Attributes
    ----------
    path : pathlib.Path
        The assembled Gram matrix, a ``.npy`` file (open it with
        ``numpy.load(path, mmap_mode="r")``, or :meth:`open`).
    shape : tuple of int
        ``(n1, n2)``, or ``(n1, n2, O, O)`` for ``output="full"``.
    method : str
        The exact method used (as chosen by rank 0 for ``method="auto"``).
    tile_size : int
        Rows/columns per tile.
    tiles : int
        Tiles of the matrix (the upper triangle of the tile grid when ``x2`` is ``None``).
    computed : int
        Tiles this rank computed.
    loaded : int
        Tiles this rank found finished in the checkpoint folder (a resumed run).
    rank : int
        This process.
    world_size : int
        The number of processes.
    seconds : float
        Wall time of this rank in the call.
    matrix : torch.Tensor or None
        The matrix on rank 0 when it is small (``return_matrix``), else ``None``.
    """

    path: Path
    shape: tuple[int, ...]
    method: str
    tile_size: int
    tiles: int
    computed: int
    loaded: int
    rank: int
    world_size: int
    seconds: float
    matrix: Tensor | None = None

    def open(self) -> np.ndarray:
        """The assembled matrix as a read-only memory map (nothing is loaded until it is read).

        Returns
        -------
        numpy.ndarray
            A ``numpy.memmap`` of shape ``shape``.
        """
        return np.load(self.path, mmap_mode="r", allow_pickle=False)


def init_from_env(backend: str | None = None, timeout: float = 1800.0) -> bool:
    """Join the process group that ``torchrun`` describes in the environment, if any.

    With ``WORLD_SIZE``, ``RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set (as
    torchrun sets them) and no process group yet, initialise one
    (``init_method="env://"``); with ``nccl``, also select GPU ``LOCAL_RANK``.

    Parameters
    ----------
    backend : {"gloo", "nccl"}, optional
        Default: ``nccl`` when CUDA is available, else ``gloo``.
    timeout : float
        Seconds for the rendezvous and the store's blocking operations.

    Returns
    -------
    bool
        True if this call initialised a process group (the caller should
        ``torch.distributed.destroy_process_group()`` at the end).

    Examples
    --------
    Outside torchrun there is nothing to join:

    >>> import os
    >>> from ntk_core.ntk.distributed import init_from_env
    >>> "WORLD_SIZE" in os.environ or init_from_env()
    False
    """
    if dist.is_initialized() or "WORLD_SIZE" not in os.environ:
        return False
    chosen = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    check_choice(chosen, "backend", BACKENDS)
    if chosen == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(chosen, init_method="env://", timeout=timedelta(seconds=timeout))
    return True


def _group() -> tuple[int, int, Any]:
    """(rank, world size, store) of the default process group, or of a single process."""
    if dist.is_available() and dist.is_initialized():
        from torch.distributed.distributed_c10d import _get_default_store

        return dist.get_rank(), dist.get_world_size(), _get_default_store()
    return 0, 1, dist.HashStore()


def _default_device(device: torch.device | str | None, model: nn.Module) -> torch.device | str | None:
    """With an nccl process group and no device given: this rank's GPU."""
    if device is not None or not (dist.is_initialized() and dist.get_backend() == "nccl"):
        return device
    return torch.device("cuda", torch.cuda.current_device())


class _Failed(RuntimeError):
    pass


def _wait(store: Any, ready: Callable[[], bool], failed_key: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if store.check([failed_key]):
            raise _Failed(f"another rank failed: {store.get(failed_key).decode()}")
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"waited {timeout:g} s for {what}; a rank may have died (its finished tiles are kept: rerun the "
                f"same command, with any number of processes, to resume)"
            )
        time.sleep(_POLL)


def _counter(store: Any, key: str) -> int:
    return int(store.add(key, 0))


def distributed_ntk(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None = None,
    *,
    checkpoint_dir: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    method: str = "auto",
    output: str = "trace",
    tile_size: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    out_dtype: torch.dtype | None = None,
    memory_budget: int | None = None,
    return_matrix: bool | None = None,
    progress: bool = False,
    callback: Callable[[int, int, bool], None] | None = None,
    timeout: float = 1800.0,
) -> GramResult:
    """Empirical NTK Gram matrix computed by all ranks of the process group, tile by tile.

    Every rank calls it with the same model (same parameters) and the same
    inputs; rank 0 decides the method and tile size (as
    :func:`~ntk_core.ntk.empirical_ntk` would) and the others check that their
    model and inputs are the same. Each rank then claims tiles from a shared
    counter until none is left, computing the tiles that are not yet in the
    checkpoint folder; rank 0 assembles the matrix into a ``.npy`` file.

    Parameters
    ----------
    model : torch.nn.Module
        Any network, as for :func:`~ntk_core.ntk.empirical_ntk` (one fixed
        per-example function: ``model.eval()`` for Dropout/BatchNorm).
    x1, x2 : torch.Tensor, numpy.ndarray, tuple, list or dict, shape (n1, ...) and (n2, ...)
        The inputs, as for :func:`ntk_core.ntk.empirical_ntk` (one tensor, a tuple or list passed as
        ``model(*x1)``, a dict passed as ``model(**x1)``; integer and bool tensors kept) (``x2=None``:
        ``x2 = x1``, only the upper triangle of tiles is computed).
    checkpoint_dir : str or os.PathLike
        Folder shared by all ranks (on several machines: a shared file
        system) for the finished tiles; the same folder as ``empirical_ntk``'s
        ``checkpoint_dir`` (either can resume the other's run).
    out : str or os.PathLike, optional
        Where rank 0 writes the assembled ``.npy`` (default ``gram.npy`` in the
        tile folder).
    method, output, tile_size, dtype, device, out_dtype, memory_budget
        As for :func:`~ntk_core.ntk.empirical_ntk` (``device`` defaults to this
        rank's GPU with ``nccl``, else the model's device).
    return_matrix : bool, optional
        Return the matrix as a tensor on rank 0 (default: when it takes at most 256 MiB).
    progress : bool
        A tqdm bar over the tiles this rank takes.
    callback : callable, optional
        ``callback(i, j, computed)`` after this rank has finished tile ``(i, j)``
        (saved it, or found it in the folder: ``computed`` False).
    timeout : float
        Seconds a rank waits for the others (for rank 0's plan, for the last
        tiles, for the assembly) before a ``TimeoutError``.

    Returns
    -------
    GramResult
        The path and shape of the matrix, the tiles this rank computed and
        loaded, and on rank 0 the matrix itself when small.

    Raises
    ------
    ValueError, TypeError
        Bad inputs or options (as ``empirical_ntk``); ranks with different models
        or inputs; a tile with NaN/Inf.
    TimeoutError
        Other ranks did not finish within ``timeout`` (a dead rank): rerun to resume.
    RuntimeError
        Another rank failed (its message is repeated).

    Examples
    --------
    On one process (no process group) it is ``empirical_ntk`` with checkpoints,
    assembled on disk:

    >>> import tempfile, torch
    >>> from ntk_core import TwoLayerNet, empirical_ntk
    >>> from ntk_core.ntk.distributed import distributed_ntk
    >>> net = TwoLayerNet(d=5, width=64, seed=0)
    >>> x = torch.randn(10, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> res = distributed_ntk(net, x, checkpoint_dir=tempfile.mkdtemp(), tile_size=4, dtype=torch.float64)
    >>> res.shape, res.tiles, res.computed, res.world_size
    ((10, 10), 6, 6, 1)
    >>> torch.equal(res.matrix, empirical_ntk(net, x, tile_size=4, dtype=torch.float64))
    True
    >>> res.open().shape
    (10, 10)

    With N processes: ``torchrun --nproc_per_node=N -m ntk_core gram ...``, or
    ``torch.distributed.init_process_group(...)`` then the same call on every rank.
    """
    started = time.monotonic()
    check_choice(method, "method", ("auto", *METHODS))
    check_choice(output, "output", OUTPUTS)
    if checkpoint_dir is None:
        raise ValueError("checkpoint_dir is required: the ranks share their finished tiles through it")
    timeout = check_interval(timeout, "timeout (seconds)", 0.0, math.inf, low_open=True)
    rank, world, store = _group()
    dev = _default_device(device, model)
    run = _prepare(model, x1, x2, method, output, tile_size, dtype, dev, out_dtype, memory_budget, announce=rank == 0)
    prob, out_dt, chosen, tile = run.prob, run.out_dtype, run.method, run.tile

    # one plan for all ranks: rank 0's method and tile size, and the hash of what determines the tiles
    # keys of this call: every rank makes the same calls in the same order, so the n-th call has one prefix
    call = _CALLS["calls"] = _CALLS.get("calls", -1) + 1
    prefix = f"ntk_core.gram/{call}"
    failed = f"{prefix}/failed"
    try:
        if rank == 0:
            identity = _identity(prob, chosen, tile, out_dt)
            plan = {"method": chosen, "tile": tile, "identity": _store.fingerprint(identity), "run": uuid.uuid4().hex}
            store.set(f"{prefix}/plan", json.dumps(plan))
        else:
            _wait(store, lambda: bool(store.check([f"{prefix}/plan"])), failed, timeout, "rank 0's plan")
            plan = json.loads(store.get(f"{prefix}/plan").decode())
            chosen, tile = plan["method"], int(plan["tile"])
            identity = _identity(prob, chosen, tile, out_dt)
            if _store.fingerprint(identity) != plan["identity"]:
                raise ValueError(
                    f"rank {rank} has a different model, parameters, inputs or dtype than rank 0 (the "
                    f"fingerprints of the tiles differ): every rank must build the same model (same seed) "
                    f"and the same inputs"
                )
        run = dataclasses.replace(run, method=chosen, tile=tile)  # rank 0's choice
        engine = run.engine()
        tiles = _TileStore(checkpoint_dir, identity, run.meta(output))
        n1, n2 = prob.n1, prob.n2
        rows, cols = _blocks(n1, tile), _blocks(n2, tile)
        pairs = list(_tile_pairs(len(rows), len(cols), prob.symmetric))
        extra = (prob.n_out, prob.n_out) if prob.full else ()
        shape = (n1, n2, *extra)
        source = _FeatureSource(engine, prob, rows, cols)

        def tile_of(k: int) -> tuple[Tensor, bool]:
            i, j = pairs[k]
            tile_shape = (rows[i].stop - rows[i].start, cols[j].stop - cols[j].start, *extra)
            block = tiles.load(i, j, tile_shape, out_dt)
            if block is not None:
                return block, False
            block = _compute_tile(source, i, j, out_dt)
            tiles.save(i, j, block)
            return block, True

        computed = loaded = 0
        bar = tqdm(total=len(pairs), desc=f"gram[{chosen}] rank {rank}/{world}", unit="tile", disable=not progress)
        with torch.no_grad():
            while True:
                k = int(store.add(f"{prefix}/next", 1)) - 1
                if k >= len(pairs):
                    break
                _, fresh = tile_of(k)
                computed += fresh
                loaded += not fresh
                store.add(f"{prefix}/done", 1)
                bar.update(1)
                if callback is not None:
                    callback(*pairs[k], fresh)
        bar.close()

        path = Path(out) if out is not None else tiles.dir / "gram.npy"
        matrix: Tensor | None = None
        if rank == 0:
            _wait(
                store,
                lambda: _counter(store, f"{prefix}/done") >= len(pairs),
                failed,
                timeout,
                "the other ranks' last tiles",
            )
            with torch.no_grad():
                _assemble(path, shape, out_dt, pairs, rows, cols, prob.symmetric, tile_of)
            store.set(f"{prefix}/assembled", str(path))
            itemsize = torch.empty((), dtype=out_dt).element_size()
            small = math.prod(shape) * itemsize <= _RETURN_BYTES
            if return_matrix if return_matrix is not None else small:
                matrix = torch.from_numpy(np.load(path, allow_pickle=False))
            # the store lives in rank 0's process under env:// rendezvous: wait until the others are done with it
            try:
                _wait(
                    store,
                    lambda: _counter(store, f"{prefix}/ack") >= world - 1,
                    failed,
                    min(timeout, 60.0),
                    "the other ranks to finish",
                )
            except TimeoutError:
                pass
        else:
            _wait(
                store,
                lambda: bool(store.check([f"{prefix}/assembled"])),
                failed,
                timeout,
                "rank 0 to assemble the matrix",
            )
            store.add(f"{prefix}/ack", 1)
    except _Failed as exc:
        raise RuntimeError(str(exc)) from None
    except BaseException as exc:
        try:
            store.set(failed, f"rank {rank}: {type(exc).__name__}: {exc}")
        except Exception:  # the store may be gone already
            pass
        raise
    return GramResult(
        path, shape, chosen, tile, len(pairs), computed, loaded, rank, world, time.monotonic() - started, matrix
    )


def _remove_dead_temporaries(path: Path) -> list[Path]:
    """Delete ``.<name>.<pid>.<hex>.tmp`` files of ``path`` whose process no longer runs (a killed assembly)."""
    removed = []
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        parts = tmp.name[len(path.name) + 2 :].split(".")
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        try:
            os.kill(int(parts[0]), 0)
            continue  # still running (an assembly of this output under way)
        except ProcessLookupError:
            pass
        except PermissionError:  # a live process of another user
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def _reserve(tmp: Path, path: Path) -> None:
    """Allocate every block of ``tmp`` now (``posix_fallocate``), so that writes through its map cannot fail."""
    if not hasattr(os, "posix_fallocate"):  # not on macOS: the free-space check has to do
        return
    fd = os.open(tmp, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OSError(
                err.errno, f"the disk filled while reserving the Gram matrix {path}: {err.strerror}"
            ) from None
        if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system without it: the check has to do
            raise
    finally:
        os.close(fd)


def _assemble(
    path: Path,
    shape: tuple[int, ...],
    out_dt: torch.dtype,
    pairs: list[tuple[int, int]],
    rows: list[slice],
    cols: list[slice],
    symmetric: bool,
    tile_of: Callable[[int], tuple[Tensor, bool]],
) -> None:
    """Write the tiles into a ``.npy`` memory map under a temporary name, then rename it to ``path``.

    Temporaries of ``path`` left by an assembly that was killed (their process is gone) are removed first; the
    file's whole size is checked against the free space and then reserved (``posix_fallocate``), so that a full
    disk is an ``OSError`` that says how much is missing, never a ``SIGBUS`` from a write into a sparse map.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_temporaries(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    np_dtype = torch.empty((), dtype=out_dt).numpy().dtype
    needed = math.prod(shape) * np_dtype.itemsize + 4096  # data and the .npy header (128 bytes; a page to spare)
    free = shutil.disk_usage(path.parent).free
    if free < needed:
        raise OSError(
            errno.ENOSPC,
            f"not enough disk space for the Gram matrix {path}: it needs {needed:,} bytes "
            f"({needed / 2**30:.2f} GiB), {free:,} are free in {path.parent}; free space or give another --out",
        )
    try:
        result = np.lib.format.open_memmap(tmp, mode="w+", dtype=np_dtype, shape=shape)
        _reserve(tmp, path)
        for k, (i, j) in enumerate(pairs):
            block = tile_of(k)[0].numpy()  # loaded and verified (recomputed if damaged)
            result[rows[i], cols[j]] = block
            if symmetric and i != j:
                result[cols[j], rows[i]] = block.transpose(1, 0, 3, 2) if block.ndim == 4 else block.T
        result.flush()
        del result
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
