r"""The Cholesky factor of K + λ²I tile by tile, out of core and resumable: yᵀK⁻¹y at any n.

The complexity ``yᵀK⁻¹y`` of Theorems 5.1–5.3 (eq. (10)) and the ridge quadratic ``yᵀ(K + λ²I)⁻¹y`` of
Lemma C.2 need K + λ²I factored or solved. In memory that is one Cholesky; at n = 60,000 (every MNIST
training image) the float64 K alone is 28.8 GB. This module factors

.. math::

    K + \lambda^2 I = L L^\top,

    L_{jj} L_{jj}^\top = A_{jj} - \sum_{k<j} L_{jk} L_{jk}^\top,

    L_{ij} = \Big(A_{ij} - \sum_{k<j} L_{ik} L_{jk}^\top\Big) L_{jj}^{-\top} \quad (i > j),

with ``A = K + λ²I`` cut into b × b tiles, column of tiles by column of tiles (the left-looking order), so
that a finished tile of L is final:

* **The tiles of K come from a** :class:`~ntk_core.kernel_matrix.source.KernelSource`: a matrix (an array, a memory map, a ``.npy`` path,
  a :class:`~ntk_core.kernel_matrix.dense.DenseKernel` or :class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel`) read by blocks,
  or a kernel function ``k(X_I, X_J)`` evaluated tile by tile, so that K itself is never stored. Only the
  lower triangle of tiles is used, the diagonal tiles symmetrised, as LAPACK's ``potrf`` reads one triangle.
* **Every finished tile of L is one file** (:mod:`ntk_core._store`: checksummed, written atomically) in a
  folder named by what determines the factor (the source's identity, λ, the tile size): a factorisation that
  was killed resumes where it stopped, and a damaged tile is set aside and recomputed, with the same bits.
* **Cost**: the n³/3 flops of any Cholesky, ``n²/2`` entries of K once, about ``(n/b)³/6`` reads of tiles of
  L; memory about ``(n·b + 4b²) × 8`` bytes (``b`` from ``memory_budget``); disk ``n²/2 × 8`` bytes.

Then (:class:`TiledCholesky`) ``Yᵀ(K + λ²I)⁻¹Y = ‖L⁻¹Y‖²`` (one pass over L), solves ``L⁻ᵀ(L⁻¹Y)`` (two
passes), the log-determinant, and the **error of** ``yᵀ(K + λ²I)⁻¹y`` **estimated** by one step of iterative
refinement in float64 (:meth:`TiledCholesky.checked_quadratic`): ``α = (K + λ²I)⁻¹y``, ``r = y − (K + λ²I)α``
(one half pass over the tiles of K), ``δ = (K + λ²I)⁻¹r``, and ``|yᵀδ| / yᵀ(K + λ²I)⁻¹y`` is about the relative
error, which grows with the condition number of K + λ²I (λ → 0 is the hard case); ``yᵀδ = (L⁻¹y)ᵀ(L⁻¹r)``, so
that it costs three passes over L, two where ``L⁻¹y`` is at hand.

**Conditioning.** Every pivot ``L_ii²`` is at least the smallest eigenvalue μ_min of K + λ²I: it is
``1 / ((A_{1:i,1:i})⁻¹)_ii`` for the leading i × i block, whose eigenvalues interlace those of A. So
``min_i L_ii²`` is an upper bound on μ_min (:attr:`TiledCholesky.min_pivot`); with ``1ᵀK1/n ≤ μ_max(K)``
(:meth:`TiledCholesky.ones_rayleigh`, kept with the tiles), ``(1ᵀK1/n + λ²) / min_i L_ii²`` is a lower bound
on the condition number of K + λ²I.

:class:`FactoredKernel` puts it behind the :class:`~ntk_core.kernel_matrix.base.KernelMatrix` interface, factoring
K + λ²I on demand for each λ a solve asks for, so that every function of :mod:`ntk_core.bounds` takes it, and
keeps ``L⁻¹Y`` per (λ, labels): :meth:`FactoredKernel.forwards` takes every label matrix that a computation will
need at once through one pass over the factor (at n = 60,000 a pass reads and verifies its 14.4 GB).
Where they fit in its ``keep_memory`` (2 GiB each by default), it keeps K's lower tiles (a kernel function's:
evaluated once for every λ), the factor at λ = 0 and the last other factor used in memory between passes, and
makes those factors in memory only (writing, verifying and deleting them cost as much as computing them): n ≤
16,000 at the default tile size; beyond, every factor is written tile by tile and every pass reads it from
disk, as above.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.linalg
from tqdm import tqdm

from .. import _store
from .._checks import check_count, check_lam
from .._typing import ArrayLike
from .base import KernelMatrix
from .source import DEFAULT_CHOLESKY_MEMORY, KernelSource

__all__ = [
    "DEFAULT_KEEP_MEMORY",
    "FactoredKernel",
    "NotPositiveDefiniteError",
    "TiledCholesky",
    "tiled_cholesky",
]

#: The smallest tile side chosen from a memory budget (smaller tiles make BLAS slow and the folder large).
_MIN_TILE = 256
#: Bytes that a :class:`FactoredKernel` may keep in memory for each of K's lower tiles and one factor's tiles,
#: between passes (2 GiB each): where the whole of either fits, it is kept, so that K + λ²I factored at several
#: λ evaluates K's tiles once and the passes over a factor read no file; where it does not, nothing is kept.
DEFAULT_KEEP_MEMORY = 2 * 1024**3


class NotPositiveDefiniteError(ValueError):
    """K + λ²I has no Cholesky factor in float64: K is not positive definite to working precision at λ = 0 (or
    not positive semi-definite)."""


def _tile_from_budget(n: int, memory_budget: int) -> int:
    """The largest b with ``(n·b + 4b²) × 8 ≤ memory_budget`` (at least 256, at most n)."""
    return _store.tile_side(memory_budget, n, per_pair=32.0, per_row=4.0 * n, minimum=_MIN_TILE)


class TiledCholesky:
    """The factor L of K + λ²I = L Lᵀ, tile by tile in a folder (see the module docstring); built by
    :func:`tiled_cholesky`.

    Attributes
    ----------
    source : KernelSource
        Where K's tiles come from.
    lam : float
        λ (the ridge is λ² I).
    tile : int
        The side b of a tile.
    folder : pathlib.Path
        The factor's folder (one file per tile ``L_ij``, i ≥ j).
    persist : bool
        Whether the tiles are written to the folder (the default): a factor that is not is kept in memory only,
        and one whose tiles were dropped (:meth:`keep`) computes them again, with the same bits.
    """

    def __init__(
        self, source: KernelSource, lam: float, tile: int, root: Path, keep: bool = False, persist: bool = True
    ) -> None:
        self.source = source
        self.persist = persist
        self.lam = lam
        self.tile = tile
        self.n = source.n
        self.bounds = [slice(s, min(s + tile, self.n)) for s in range(0, self.n, tile)]
        self.identity = {"factor": "cholesky", "source": source.identity, "lam": lam, "tile": tile}
        self._files = _store.TileStore(root, self.identity, name="L_{i:04d}_{j:04d}.npz")
        self.folder = self._files.dir
        self.computed = 0  # tiles computed by this object (not found in the folder)
        # the tiles kept in memory once computed or read (``keep``; see :meth:`keep`), else None
        self._kept: dict[tuple[int, int], np.ndarray] | None = {} if keep or not persist else None
        # what each tile seen so far says beside L (its share of 1ᵀK1; a diagonal tile's K diagonal and pivots):
        # a few numbers per tile, so that the conditioning's quantities read no tile that a pass has read already
        self._sums: dict[tuple[int, int], float] = {}
        self._diagonals: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def keep(self, on: bool = True) -> None:
        """Keep the tiles in memory once computed or read (``on``), so that later passes read no file, or drop
        the kept ones (``on=False``). A kept tile is the array that was saved: the same bits as a reread one. A
        factor that is not persisted keeps the tiles it computes again after they were dropped."""
        if not on:
            self._kept = None if self.persist else {}
        elif self._kept is None:
            self._kept = {}

    def __repr__(self) -> str:
        return f"TiledCholesky(n={self.n}, lam={self.lam:g}, tile={self.tile}, tiles={len(self.bounds)})"

    # ---------------------------------------------------------------- tiles
    def _shape(self, i: int, j: int) -> tuple[int, int]:
        return (len(range(*self.bounds[i].indices(self.n))), len(range(*self.bounds[j].indices(self.n))))

    def _load(self, i: int, j: int) -> _store.Stored | None:
        if not self.persist:
            return None
        return self._files.load(i, j, expect={"L": (self._shape(i, j), np.float64)})

    def get(self, i: int, j: int) -> np.ndarray:
        """Tile ``L_ij`` (i ≥ j): kept in memory, else loaded (verified) or, if missing or damaged, computed and
        saved."""
        if self._kept is not None and (i, j) in self._kept:
            return self._kept[(i, j)]
        found = self._load(i, j)
        if found is None:
            return self._compute(i, j)
        self._note(i, j, found.arrays)
        return self._keep_tile(i, j, found.arrays["L"])

    def _note(self, i: int, j: int, arrays: dict[str, np.ndarray]) -> None:
        """Keep what tile ``(i, j)`` holds beside L (its ``k_sum``; on the diagonal ``k_diag`` and the pivots)."""
        self._sums[(i, j)] = float(arrays["k_sum"][0])
        if i == j:
            self._diagonals[j] = (arrays["k_diag"].copy(), np.diagonal(arrays["L"]) ** 2)

    def _stored(self, i: int, j: int) -> None:
        """Make sure tile ``(i, j)`` has been noted: loaded (or, if missing or damaged, computed) if not yet."""
        if (i, j) not in self._sums:
            found = self._load(i, j)
            if found is None:
                self._compute(i, j)
            else:
                self._note(i, j, found.arrays)

    def _keep_tile(self, i: int, j: int, L: np.ndarray) -> np.ndarray:
        if self._kept is not None:
            L.flags.writeable = False  # passes only read it: a kept tile must stay what was saved
            self._kept[(i, j)] = L
        return L

    def _compute(self, i: int, j: int, strip: list[np.ndarray] | None = None, diag: np.ndarray | None = None):
        """Compute ``L_ij`` from K's tile and the tiles of L left of it (``strip``: row j's tiles ``L_jk``,
        k < j, if at hand; ``diag``: ``L_jj``), save it and return it."""
        A = self.source.block(self.bounds[i], self.bounds[j])
        arrays: dict[str, np.ndarray] = {}
        if i == j:
            A = (A + A.T) / 2.0
            arrays["k_diag"] = np.diagonal(A).copy()
        arrays["k_sum"] = np.array([A.sum() * (1.0 if i == j else 2.0)])  # this tile's share of 1ᵀK1
        if i == j:
            A[np.diag_indices_from(A)] += self.lam**2
        for k in range(j):
            L_jk = strip[k] if strip is not None else self.get(j, k)
            L_ik = L_jk if i == j else self.get(i, k)
            A -= L_ik @ L_jk.T
        if i == j:
            try:
                L = scipy.linalg.cholesky(A, lower=True, check_finite=False)
            except np.linalg.LinAlgError as err:
                where = f"its diagonal tile {j} (rows {self.bounds[j].start}-{self.bounds[j].stop - 1})"
                k_diag = arrays["k_diag"]
                if np.any(k_diag < 0):  # named as the dense route names it
                    r = int(np.argmin(k_diag))
                    row = self.bounds[j].start + r
                    why = (
                        f"K is not positive semi-definite: its diagonal entry K[{row}, {row}] = {k_diag[r]:g} is "
                        "negative (a kernel matrix k(X, X) has k(x, x) >= 0)"
                    )
                elif self.lam == 0.0:
                    why = (
                        "K is singular to working precision (duplicated inputs, or more points than the kernel "
                        "separates) or not positive semi-definite: take λ > 0 where the computation allows"
                    )
                else:
                    why = f"K is not positive semi-definite (λ² = {self.lam**2:g} does not make K + λ²I definite)"
                what = "K (λ = 0: yᵀK⁻¹y factors K itself)" if self.lam == 0.0 else f"K + λ²I (λ = {self.lam:g})"
                raise NotPositiveDefiniteError(
                    f"{what} has no Cholesky factor in float64: {where} lost positive definiteness ({err}). {why}"
                ) from None
        else:
            L_jj = diag if diag is not None else self.get(j, j)
            L = scipy.linalg.solve_triangular(L_jj, A.T, lower=True, check_finite=False).T
        L = np.ascontiguousarray(L)
        arrays["L"] = L
        if self.persist:
            self._files.save(i, j, arrays)
        self._note(i, j, arrays)
        self.computed += 1
        return self._keep_tile(i, j, L)

    def factor(self, progress: bool = False) -> TiledCholesky:
        """Compute every tile that is not in the folder yet (or in memory, if not persisted; column by column);
        returns ``self``."""
        if self.persist:
            self.folder.mkdir(parents=True, exist_ok=True)
        T = len(self.bounds)
        bar = tqdm(total=T * (T + 1) // 2, desc=f"Cholesky n={self.n:,} λ={self.lam:g}", disable=not progress)
        for j in range(T):
            strip: list[np.ndarray] | None = None
            diag: np.ndarray | None = None
            for i in range(j, T):
                if not self._has(i, j):
                    if strip is None:
                        strip = [self.get(j, k) for k in range(j)]
                    if diag is None and i > j:
                        diag = self.get(j, j)
                    L = self._compute(i, j, strip, diag)
                    if i == j:
                        diag = L
                bar.update(1)
        bar.close()
        return self

    def _has(self, i: int, j: int) -> bool:
        """Whether tile ``(i, j)`` is made: in the folder, or (not persisted) in memory."""
        if self.persist:
            return self._files.has(i, j)
        return self._kept is not None and (i, j) in self._kept

    # ---------------------------------------------------------------- what the factor gives
    def _diagonal(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """K's diagonal and the pivots ``diag(L)²`` of diagonal tile j (read once, or kept from a pass)."""
        self._stored(j, j)
        return self._diagonals[j]

    def pivots(self) -> np.ndarray:
        """``diag(L)²``, shape (n,): each is at least the smallest eigenvalue of K + λ²I (module docstring)."""
        return np.concatenate([self._diagonal(j)[1] for j in range(len(self.bounds))])

    @property
    def min_pivot(self) -> float:
        """``min_i L_ii²``: an upper bound on the smallest eigenvalue of K + λ²I."""
        return float(self.pivots().min())

    def logdet(self) -> float:
        """``log det(K + λ²I) = 2 Σ_i log L_ii``."""
        return float(np.sum(np.log(self.pivots())))

    def k_diagonal(self) -> np.ndarray:
        """K's diagonal (kept with the diagonal tiles), shape (n,)."""
        return np.concatenate([self._diagonal(j)[0] for j in range(len(self.bounds))])

    def ones_rayleigh(self) -> float:
        """``1ᵀK1 / n``, the Rayleigh quotient of K at the vector of ones: a lower bound on K's largest
        eigenvalue (kept with the tiles: no pass over K; no tile read again that a pass has read)."""
        total = 0.0
        for i in range(len(self.bounds)):
            for j in range(i + 1):
                self._stored(i, j)
                total += self._sums[(i, j)]
        return total / self.n

    def _columns(self, Y: ArrayLike) -> tuple[np.ndarray, bool]:
        return _label_columns(Y, self.n), np.ndim(Y) == 1

    def forward(self, Y: ArrayLike) -> np.ndarray:
        """``Z = L⁻¹Y`` (one pass over L), the shape of Y."""
        Z, vector = self._columns(Y)
        for i, rows in enumerate(self.bounds):
            for k in range(i):
                Z[rows] -= self.get(i, k) @ Z[self.bounds[k]]
            Z[rows] = scipy.linalg.solve_triangular(self.get(i, i), Z[rows], lower=True, check_finite=False)
        return Z[:, 0] if vector else Z

    def backward(self, Z: ArrayLike) -> np.ndarray:
        """``X = L⁻ᵀZ`` (one pass over L), the shape of Z."""
        X, vector = self._columns(Z)
        for i in reversed(range(len(self.bounds))):
            rows = self.bounds[i]
            for k in range(i + 1, len(self.bounds)):
                X[rows] -= self.get(k, i).T @ X[self.bounds[k]]
            X[rows] = scipy.linalg.solve_triangular(self.get(i, i).T, X[rows], lower=False, check_finite=False)
        return X[:, 0] if vector else X

    def solve(self, Y: ArrayLike) -> np.ndarray:
        """``(K + λ²I)⁻¹Y = L⁻ᵀ(L⁻¹Y)`` (two passes over L), the shape of Y."""
        return self.backward(self.forward(Y))

    def quadratic(self, Y: ArrayLike) -> float | np.ndarray:
        """``Yᵀ(K + λ²I)⁻¹Y = ‖L⁻¹Y‖²`` per column (a float for a vector Y)."""
        Z = self.forward(Y)
        values = np.sum(Z * Z, axis=0)
        return float(values) if np.ndim(Z) == 1 else values

    def matvec(self, V: ArrayLike) -> np.ndarray:
        """``(K + λ²I) V`` from K's tiles (lower triangle mirrored, diagonal tiles symmetrised: the matrix
        that was factored); one half pass over the source."""
        X, vector = self._columns(V)
        out = self.lam**2 * X
        for i, rows in enumerate(self.bounds):
            for j in range(i + 1):
                B = self.source.block(rows, self.bounds[j])
                if i == j:
                    out[rows] += ((B + B.T) / 2.0) @ X[rows]
                else:
                    out[rows] += B @ X[self.bounds[j]]
                    out[self.bounds[j]] += B.T @ X[rows]
        return out[:, 0] if vector else out

    def checked_quadratic(
        self, Y: ArrayLike, forward: np.ndarray | None = None
    ) -> tuple[float | np.ndarray, float | np.ndarray]:
        r"""``Yᵀ(K + λ²I)⁻¹Y`` per column with an estimate of its relative error, by one step of iterative
        refinement.

        ``α = (K + λ²I)⁻¹Y``, ``R = Y − (K + λ²I)α`` (from K's tiles), ``δ = (K + λ²I)⁻¹R``: the correction
        ``Yᵀδ`` that refinement would add is the size of the error of ``Yᵀα``, so ``|Yᵀδ| / Yᵀ(K + λ²I)⁻¹Y``
        estimates the relative error of :meth:`quadratic` (within a small factor; it grows with the condition
        number of K + λ²I: about κ · 1e-16). With ``Z = L⁻¹Y`` it is computed as

        .. math::

            Y^\top\delta = (L^{-1} Y)^\top (L^{-1} R) = Z^\top W,

            \alpha = L^{-\top} Z, \qquad W = L^{-1} R,

        so that it costs three passes over L (``Z``, ``α``, ``L⁻¹R``; two if ``forward`` gives ``Z``, as
        :meth:`FactoredKernel.forwards` keeps it) and one half pass over K. The value returned is
        :meth:`quadratic`'s, ``‖Z‖²``, unrefined: a residual computed in float64 does not make it more accurate.

        Parameters
        ----------
        Y : ArrayLike, shape (n,) or (n, m)
            The labels.
        forward : numpy.ndarray, optional
            ``L⁻¹Y`` if already computed (the shape of ``Y``).
        """
        Yc, vector = self._columns(Y)
        if forward is None:
            Z = self.forward(Yc)
        else:
            Z = np.asarray(forward, dtype=np.float64)
            if Z.shape not in (Yc.shape, Yc.shape[:1] if vector else Yc.shape):
                raise ValueError(f"forward must be L⁻¹Y, of Y's shape {np.shape(Y)}, got shape {Z.shape}")
            Z = Z.reshape(Yc.shape)
        value = np.sum(Z * Z, axis=0)
        W = self.forward(Yc - self.matvec(self.backward(Z)))
        error = np.abs(np.sum(Z * W, axis=0)) / np.maximum(np.abs(value), np.finfo(np.float64).tiny)
        return (float(value[0]), float(error[0])) if vector else (value, error)


def tiled_cholesky(
    source: KernelSource | Any,
    folder: str | os.PathLike[str],
    *,
    lam: float = 0.0,
    tile: int | None = None,
    memory_budget: int | None = None,
    progress: bool = False,
    keep: bool = False,
    persist: bool = True,
) -> TiledCholesky:
    """Factor K + λ²I = L Lᵀ tile by tile into ``folder`` (or resume), out of core.

    Parameters
    ----------
    source : KernelSource or matrix
        Where K's tiles come from (a matrix is wrapped by :meth:`~ntk_core.kernel_matrix.source.KernelSource.from_matrix`).
    folder : str or os.PathLike
        Where the factors go: each in a sub-folder named by its identity (source, λ, tile), so that one folder
        holds the factors of several λ and several matrices, and a run resumes from the tiles found there.
    lam : float
        λ ≥ 0 (the ridge λ² I of eq. (8)); λ = 0 needs K positive definite.
    tile : int, optional
        The side b of a tile (default: the largest that ``memory_budget`` allows, at least 256).
    memory_budget : int, optional
        Bytes of tiles held at once (default :data:`~ntk_core.kernel_matrix.source.DEFAULT_CHOLESKY_MEMORY`): about ``(n·b + 4b²) × 8``.
    progress : bool
        A progress bar over the tiles.
    keep : bool
        Keep the factor's tiles in memory as they are computed or read (:meth:`TiledCholesky.keep`), for a
        factor whose ``n(n + b)/2 × 8`` bytes fit in memory and that is passed over several times.
    persist : bool
        Write the tiles to ``folder`` (the default: a killed factorisation resumes from them). ``False`` keeps
        the factor in memory only, for one that is cheaper to compute again than to write and delete.

    Returns
    -------
    TiledCholesky

    Raises
    ------
    NotPositiveDefiniteError
        K + λ²I is not positive definite in float64 (λ = 0 and K singular to working precision, or K not PSD).

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from ntk_core.kernel_matrix.factored import tiled_cholesky
    >>> K = np.array([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    >>> L = tiled_cholesky(K, tempfile.mkdtemp(), tile=2)
    >>> y = np.array([1.0, -1.0, 2.0])
    >>> bool(np.isclose(L.quadratic(y), y @ np.linalg.solve(K, y)))
    True
    >>> L.computed, tiled_cholesky(K, L.folder.parent, tile=2).computed   # the second call finds the tiles
    (3, 0)
    """
    src = source if isinstance(source, KernelSource) else KernelSource.from_matrix(source)
    lam = check_lam(lam)
    budget = DEFAULT_CHOLESKY_MEMORY if memory_budget is None else check_count(memory_budget, "memory_budget")
    b = _tile_from_budget(src.n, budget) if tile is None else min(check_count(tile, "tile"), src.n)
    return TiledCholesky(src, lam, b, Path(folder), keep=keep, persist=persist).factor(progress=progress)


def _label_columns(Y: ArrayLike, n: int) -> np.ndarray:
    """``Y`` as a new float64 (n, m) array, checked: shape (n,) or (n, m), finite."""
    V = np.asarray(Y, dtype=np.float64)
    if V.shape[:1] != (n,) or V.ndim not in (1, 2):
        raise ValueError(f"Y must have shape ({n},) or ({n}, m), got {V.shape}")
    if not np.all(np.isfinite(V)):
        raise ValueError("Y holds NaN or infinite values")
    return (V[:, None] if V.ndim == 1 else V).copy()


def array_key(Y: np.ndarray) -> tuple[tuple[int, ...], str, str]:
    """``Y``'s shape, dtype and the SHA-256 of its bytes: the key under which a quantity computed from ``Y`` (a
    ridge quadratic) is kept, so that a second request for the same labels is not another pass over a factor."""
    return (Y.shape, Y.dtype.str, hashlib.sha256(np.ascontiguousarray(Y).tobytes()).hexdigest())


class FactoredKernel(KernelMatrix):
    """A kernel matrix whose ridge solves come from tiled Cholesky factors (one per λ, made on demand and kept
    in ``folder``): what :mod:`ntk_core.bounds` takes at any n.

    Parameters
    ----------
    source : KernelSource or matrix
        Where K's tiles come from.
    folder : str or os.PathLike
        Where the factors are kept (see :func:`tiled_cholesky`).
    tile, memory_budget, progress
        As for :func:`tiled_cholesky`.
    keep_memory : int, optional
        Bytes that may be kept in memory between passes for each of K's lower tiles, the factor at λ = 0 and
        one other factor (default :data:`DEFAULT_KEEP_MEMORY`; 0: nothing kept). Where the lower tiles of a
        kernel function's K fit, each is evaluated once for every λ (a matrix's tiles are read again: a copy
        would only add memory); where a factor fits, the one at λ = 0 (yᵀK⁻¹y, which a bound asks for at every
        λ) stays in memory, and so does the last other one used, until a solve turns to a third λ. The numbers
        are the same either way.
    persist : bool, optional
        Whether the factors' tiles are written to ``folder`` (where a killed factorisation resumes from them).
        Default: only the factors that do not fit in ``keep_memory``; one that fits is made in memory (writing,
        verifying and deleting it would cost about as much as computing it) and computed again if it is needed
        after it was dropped.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from ntk_core.kernel_matrix.factored import FactoredKernel
    >>> from ntk_core.bounds import complexity
    >>> K = FactoredKernel(np.array([[2.0, 1.0], [1.0, 2.0]]), tempfile.mkdtemp())
    >>> round(complexity(K, np.array([1.0, 1.0])), 10), K.trace()
    (0.6666666667, 4.0)
    """

    def __init__(
        self,
        source: KernelSource | Any,
        folder: str | os.PathLike[str],
        *,
        tile: int | None = None,
        memory_budget: int | None = None,
        progress: bool = False,
        keep_memory: int | None = None,
        persist: bool | None = None,
    ) -> None:
        self.source = source if isinstance(source, KernelSource) else KernelSource.from_matrix(source)
        self.n = self.source.n
        self.folder = Path(folder)
        self.tile = tile
        self.memory_budget = memory_budget
        self.progress = progress
        self.keep_memory = (
            DEFAULT_KEEP_MEMORY if keep_memory is None else check_count(keep_memory, "keep_memory", minimum=0)
        )
        self._factors: dict[float, TiledCholesky] = {}
        self._forwards: dict[tuple, np.ndarray] = {}  # L⁻¹Y per (λ, Y), read-only (see :meth:`forwards`)
        self._k_diagonal: np.ndarray | None = None
        b = self._tile()
        # K's lower tiles and one factor's tiles take n(n + b)/2 × 8 bytes each at most; K's tiles are kept where
        # they are evaluated (a kernel function), not where they are read from a matrix (a copy would only add)
        self._fits = 4 * self.n * (self.n + b) <= self.keep_memory
        evaluated = self.source.identity.get("kind") == "function"
        self._tiles = self.source.kept() if self._fits and evaluated else self.source
        self.persist = not self._fits if persist is None else bool(persist)
        self._other: float | None = None  # the λ > 0 whose factor's tiles are kept beside λ = 0's

    def __repr__(self) -> str:
        return f"FactoredKernel({self.source.name}, n={self.n}, factored at λ = {sorted(self._factors)})"

    def factor(self, lam: float) -> TiledCholesky:
        """The factor of K + λ²I (computed, or resumed from the folder, the first time)."""
        return self._factor(check_lam(lam))

    def _factor(self, lam: float) -> TiledCholesky:
        if self._fits and lam != 0.0 and self._other != lam:  # keep λ = 0's and this one's; drop the previous
            if self._other in self._factors:
                self._factors[self._other].keep(False)
            if lam in self._factors:
                self._factors[lam].keep()
            self._other = lam
        if lam not in self._factors:
            self._factors[lam] = tiled_cholesky(
                self._tiles,
                self.folder,
                lam=lam,
                tile=self.tile,
                memory_budget=self.memory_budget,
                progress=self.progress,
                keep=self._fits,
                persist=self.persist,
            )
        return self._factors[lam]

    def diagonal(self) -> np.ndarray:
        """K's diagonal: kept with a factor's diagonal tiles, else read from the source's diagonal tiles; read
        once and kept (it does not depend on λ, and a bound asks for tr K once per class and λ: each read of the
        diagonal tiles of a factor far larger than memory loads and verifies gigabytes)."""
        if self._k_diagonal is None:
            if self._factors:
                self._k_diagonal = next(iter(self._factors.values())).k_diagonal()
            else:
                b = self._tile()
                self._k_diagonal = np.concatenate(
                    [np.diagonal(self._tiles.block(slice(s, s + b), slice(s, s + b))) for s in range(0, self.n, b)]
                )
        return self._k_diagonal.copy()

    def trace(self) -> float:
        return float(np.sum(self.diagonal()))

    def matvec(self, V: ArrayLike) -> np.ndarray:
        """``K V`` from the source's tiles (no factor needed)."""
        return TiledCholesky(self._tiles, 0.0, self._tile(), self.folder).matvec(V)

    def _tile(self) -> int:
        if self.tile is not None:
            return min(check_count(self.tile, "tile"), self.n)
        return _tile_from_budget(self.n, self.memory_budget or DEFAULT_CHOLESKY_MEMORY)

    def forwards(self, Ys: Sequence[ArrayLike], lam: float) -> list[np.ndarray]:
        """``L⁻¹Y`` for each ``Y`` of ``Ys`` (L the factor of K + λ²I), those not computed yet **in one pass** over
        the factor, their columns side by side; each kept (as many numbers as ``Y`` has) for the quadratics, solves
        and error estimates that ask for the same labels later.

        Every quantity of a unit of the bounds at one λ (each noise model's ``yᵀK⁻¹y`` per output, the ridge
        term, the error estimate of :meth:`checked_quadratic`) starts from ``L⁻¹Y``: asked for together, they
        cost one pass over a factor that may be far larger than memory instead of one pass (or two) each.

        Parameters
        ----------
        Ys : sequence of ArrayLike, each shape (n,) or (n, m)
            The label vectors or matrices.
        lam : float
            λ ≥ 0.

        Returns
        -------
        list of numpy.ndarray
            ``L⁻¹Y`` for each, the shape of ``Y`` (new arrays).
        """
        return self._forwards_of(Ys, check_lam(lam))

    def _forwards_of(self, Ys: Sequence[ArrayLike], lam: float) -> list[np.ndarray]:
        arrays = [np.asarray(Y) for Y in Ys]
        keys = [(lam, *array_key(Y)) for Y in arrays]
        missing: dict[tuple, np.ndarray] = {}
        for key, Y in zip(keys, arrays):
            if key not in self._forwards and key not in missing:
                missing[key] = _label_columns(Y, self.n)
        if missing:  # only then is the factor needed (asking for it makes it the one kept in memory)
            Z = self._factor(lam).forward(np.hstack(list(missing.values())))
            start = 0
            for key, Y in missing.items():
                part = Z[:, start : start + Y.shape[1]]
                start += Y.shape[1]
                part = np.ascontiguousarray(part[:, 0] if len(key[1]) == 1 else part)
                part.flags.writeable = False
                self._forwards[key] = part
        return [self._forwards[key].copy() for key in keys]

    def _ridge_solve(self, Y: np.ndarray, lam: float) -> np.ndarray:
        """``(K + λ²I)⁻¹Y = L⁻ᵀ(L⁻¹Y)``: one pass over the factor where :meth:`forwards` has ``L⁻¹Y``, else two."""
        return self._factor(lam).backward(self._forwards_of([Y], lam)[0])

    def _ridge_quadratic(self, Y: np.ndarray, lam: float) -> float | np.ndarray:
        """``Yᵀ(K + λ²I)⁻¹Y = ‖L⁻¹Y‖²`` per column, from :meth:`forwards` (a pass over a factor that may be far
        larger than memory, once per (λ, Y): a bound asks for the same ones again, yᵀK⁻¹y and the ridge term at
        each λ)."""
        Z = self._forwards_of([Y], lam)[0]
        values = np.sum(Z * Z, axis=0)
        return float(values) if Z.ndim == 1 else values

    def checked_quadratic(self, Y: np.ndarray, lam: float) -> tuple[float | np.ndarray, float | np.ndarray]:
        """:meth:`TiledCholesky.checked_quadratic` of the factor of K + λ²I, from the ``L⁻¹Y`` that
        :meth:`forwards` keeps (two passes over the factor and a half pass over K beyond it)."""
        lam = check_lam(lam)
        return self._factor(lam).checked_quadratic(Y, forward=self._forwards_of([Y], lam)[0])
