"""Where the tiles of a kernel matrix K come from (:class:`KernelSource`): a matrix read by blocks, or a kernel
function k(X_I, X_J) evaluated tile by tile so that K itself is never stored. The factored kind
(:mod:`ntk_core.kernel_matrix.factored`) and the kernel file (:mod:`ntk_core.kernel_matrix.file`) read it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import _store
from .._checks import check_symmetric, symmetry_rtol
from .._typing import ArrayLike
from .dense import DenseKernel
from .on_disk import OnDiskKernel

__all__ = ["DEFAULT_CHOLESKY_MEMORY", "KernelSource"]

#: Bytes of tiles held at once by default (a factorisation's row strip of L and three tiles; a matrix's strips
#: while it is checked): 2 GiB.
DEFAULT_CHOLESKY_MEMORY = 2 * 1024**3


class KernelSource:
    """Where the tiles of an (n, n) kernel matrix K come from: a matrix read by blocks, or a kernel function.

    Build it with :meth:`from_matrix` or :meth:`from_function`. :meth:`block` returns ``K[rows, cols]`` in
    float64; ``identity`` is what the tiles of K depend on (for a matrix the SHA-256 of its lower
    triangle, computed while its symmetry is checked; for a function its content — code, defaults,
    closure values — or the caller's ``name``, and the fingerprint of the inputs), and names the folder of a factor.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core.kernel_matrix.factored import KernelSource
    >>> x = np.linspace(-1.0, 1.0, 5)[:, None]
    >>> rbf = lambda a, b: np.exp(-((a - b.T) ** 2))
    >>> src = KernelSource.from_function(rbf, x, name="rbf")
    >>> src.n, src.block(slice(0, 2), slice(0, 1)).round(4).ravel().tolist()
    (5, [1.0, 0.7788])
    """

    def __init__(self, n: int, block: Callable[[slice, slice], np.ndarray], identity: dict[str, Any], name: str):
        self.n = n
        self._block = block
        self.identity = identity
        self.name = name

    def __repr__(self) -> str:
        return f"KernelSource({self.name}, n={self.n})"

    @classmethod
    def from_matrix(cls, K: Any, name: str = "K", *, rows_per_read: int | None = None) -> KernelSource:
        """A source that reads a matrix by blocks: an array or tensor, a memory map, a ``.npy`` path, a
        :class:`~ntk_core.kernel_matrix.dense.DenseKernel` or an :class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel`.

        K is read twice, by strips of ``rows_per_read`` rows and of as many columns (default from
        :data:`DEFAULT_CHOLESKY_MEMORY`), to check it square, finite and symmetric (to the tolerance of its
        dtype, :func:`ntk_core._checks.symmetry_rtol`) and to hash its lower triangle.
        """

        if isinstance(K, (str, os.PathLike)):
            path = Path(K)
            if not path.is_file():
                raise FileNotFoundError(f"{name}: no file {str(path)!r} (expected a .npy file of shape (n, n))")
            K = np.load(path, mmap_mode="r", allow_pickle=False)
        elif isinstance(K, DenseKernel):
            K = K.array
        elif isinstance(K, OnDiskKernel):
            K = K._blocks.K  # the matrix it reads (as OnDiskKernel(OnDiskKernel) does)
        elif hasattr(K, "detach") and hasattr(K, "cpu"):
            K = K.detach().cpu().numpy()
        elif not isinstance(K, np.ndarray):
            K = np.asarray(K)
        if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
            raise ValueError(f"{name} must be a non-empty square (n, n) matrix, got shape {tuple(K.shape)}")
        if K.dtype.kind not in "fiu":
            raise TypeError(f"{name} must hold real numbers, got dtype {K.dtype}")
        n = int(K.shape[0])
        rtol = symmetry_rtol(K.dtype)
        step = rows_per_read or max(1, min(n, DEFAULT_CHOLESKY_MEMORY // (16 * n)))
        digest = hashlib.sha256()
        scale = 0.0
        worst = 0.0
        for start in range(0, n, step):
            rows = np.array(K[start : start + step], dtype=np.float64)
            if not np.all(np.isfinite(rows)):
                i, j = np.argwhere(~np.isfinite(rows))[0]
                raise ValueError(f"{name} holds NaN or infinite values (K[{start + i}, {j}] = {rows[i, j]})")
            cols = np.array(K[:, start : start + step], dtype=np.float64).T
            scale = max(scale, float(np.abs(rows).max()))
            worst = max(worst, float(np.abs(rows - cols).max()))
            for r in range(rows.shape[0]):
                digest.update(rows[r, : start + r + 1].tobytes())
        check_symmetric(worst, scale, rtol, name)
        matrix = K

        def block(rows: slice, cols: slice) -> np.ndarray:
            return np.array(matrix[rows, cols], dtype=np.float64)

        return cls(n, block, {"kind": "matrix", "n": n, "lower_sha256": digest.hexdigest()}, name)

    @classmethod
    def from_function(
        cls, kernel: Callable[[np.ndarray, np.ndarray], Any], x: ArrayLike, *, name: str | None = None
    ) -> KernelSource:
        """A source that evaluates ``kernel(x[rows], x[cols])`` for each tile (K is never stored).

        Parameters
        ----------
        kernel : callable
            ``kernel(x1, x2)`` → the (len(x1), len(x2)) block k(x1, x2), for example
            :func:`ntk_core.infinite.setting1_kernel`. It must be deterministic. On a diagonal tile ``x2`` is
            ``x1`` itself (the same object), so that a kernel can treat k(x, x) exactly.
        x : ArrayLike, shape (n, ...)
            The inputs X (NumPy array or tensor), indexed along the first axis.
        name : str, optional
            Names the kernel in the factor's identity, as a key the caller vouches for: two kernels with the
            same name and inputs are taken to be the same matrix. Without it the identity is the function's
            content (:func:`ntk_core._store.function_fingerprint`: its code, defaults, closure values and the
            plain globals it reads), so that two lambdas with other constants never share a factor folder.
        """
        if not callable(kernel):
            raise TypeError(f"kernel must be a function k(x1, x2), got {type(kernel).__name__}")
        data = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
        if data.ndim < 1 or data.shape[0] == 0:
            raise ValueError(f"x must hold at least one input along its first axis, got shape {data.shape}")
        label = name or f"{getattr(kernel, '__module__', '?')}.{getattr(kernel, '__qualname__', repr(kernel))}"
        n = int(data.shape[0])

        def block(rows: slice, cols: slice) -> np.ndarray:
            x1 = data[rows]
            out = np.asarray(kernel(x1, x1 if rows == cols else data[cols]), dtype=np.float64)
            want = (len(range(*rows.indices(n))), len(range(*cols.indices(n))))
            if out.shape != want:
                raise ValueError(f"kernel {label} returned a block of shape {out.shape}, expected {want}")
            if not np.all(np.isfinite(out)):
                raise ValueError(f"kernel {label} returned NaN or infinite values for rows {rows}, columns {cols}")
            return out

        what = {"kernel": label} if name else {"kernel": label, "code": _store.function_fingerprint(kernel)}
        identity = {"kind": "function", **what, "n": n, "x": _store.fingerprint({"x": data})}
        return cls(n, block, identity, label)

    def block(self, rows: slice, cols: slice) -> np.ndarray:
        """``K[rows, cols]`` as a new float64 array."""
        return self._block(rows, cols)

    def kept(self) -> KernelSource:
        """This source with each block kept in memory once read or evaluated (and given as a copy): the same
        matrix, the same identity, for a caller that asks for the same tiles again (K + λ²I factored at several
        λ). The memory grows with the blocks asked for: at most K's lower tiles, ``n(n + b)/2 × 8`` bytes."""
        kept: dict[tuple[Any, ...], np.ndarray] = {}
        block = self._block

        def keeping(rows: slice, cols: slice) -> np.ndarray:
            key = (rows.start, rows.stop, rows.step, cols.start, cols.stop, cols.step)
            if key not in kept:
                kept[key] = block(rows, cols)
            return kept[key].copy()

        return KernelSource(self.n, keeping, self.identity, self.name)
