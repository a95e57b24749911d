r"""Kernel ridge regression for a kernel matrix that does not fit in memory.

The same problem as :func:`ntk_core.krr.krr_predict`, in the paper's convention
(ridge **λ² I**, eq. (8); one column per output, eq. (9)),

.. math::  (K + \lambda^2 I)\,\alpha = \tilde y, \qquad f^*(x) = k(x, X)^\top \alpha,

for a Gram matrix ``K`` of shape ``(n, n)`` kept on disk, typically the
memory-mapped ``.npy`` that :func:`ntk_core.ntk.distributed.distributed_ntk`
assembles (``numpy.load(path, mmap_mode="r")``), and never loaded whole.

Method: preconditioned conjugate gradients (PCG) that stream row blocks of K,
one pass over K per iteration, with a pivoted-Cholesky preconditioner
``P = L Lᵀ + s I`` (``L`` of shape ``(n, r)``, built from ``r`` rows of K,
i.e. ``r / n`` of a pass; ``s = λ²``), applied through the eigendecomposition of
``L Lᵀ`` (the approach of GPyTorch, Gardner et al. 2018; Falkon uses Nyström
centres instead). At λ = 0 (K positive definite, e.g. the complexity
``yᵀK⁻¹y``) ``s`` is the mean residual diagonal ``tr(K − L Lᵀ)/n`` but at least
``1e-8`` times the largest eigenvalue of ``L Lᵀ`` (so that applying ``P⁻¹``
does not amplify rounding errors), and ``1e-3`` times its smallest when
``r = n``. Every solve reads K

* once to validate it (square, finite, symmetric to the same relative tolerance
  as :func:`ntk_core._checks.check_kernel_matrix`, and its diagonal; an
  :class:`OnDiskKernel` is validated once over all its solves),
* ``r / n`` of a pass for the preconditioner,
* once per PCG iteration, and once more to compute the true residual
  ``ỹ − (K + λ² I) α`` and the training predictions ``K α`` (PCG is restarted
  from α if the true residual has drifted above the tolerance),

and reports the number of passes (entries read / n²). Memory: the row block
(``block_rows × n`` float64 entries, from ``memory_budget``), ``L``, and a few
vectors of length n per target column; never an ``(n, n)`` array.

A K that is symmetric only up to rounding is used as ``(K + Kᵀ)/2``, as the in-memory
solvers do (its products with K and Kᵀ come from the same pass). A K that is not
positive semi-definite is refused when the proof shows up: a pivoted-Cholesky
residual diagonal entry below ``-PSD_RTOL · n · max|K|`` (a Schur complement of a
PSD matrix has a nonnegative diagonal), or a PCG direction p with
``pᵀ(K + λ² I)p ≤ 0``. Unlike the in-memory solvers, a slightly indefinite K
(smallest eigenvalue between −λ² and that tolerance) can go unnoticed.

Contents

* :func:`krr_solve_ooc` — α with its statistics (:class:`OutOfCoreKRR`);
* :func:`krr_predict_ooc` — predictions, from a ``K_test_train`` streamed by row blocks;
* :func:`ridge_quadratic_ooc` — ``ỹᵀ(K + λ² I)⁻¹ỹ`` (λ = 0: the complexity
  ``yᵀK⁻¹y`` of Theorems 5.1–5.3), used by :func:`ntk_core.bounds.complexity` and
  :func:`ntk_core.bounds.ridge_complexity` for a K on disk;
* :class:`OnDiskKernel` — a K on disk with the solver's options, validated once
  (:meth:`OnDiskKernel.check`), its trace from diagonal tiles, its products with
  vectors, and a running count of the passes over K; every function of
  :mod:`ntk_core.bounds` that takes a kernel matrix accepts it (and a bare path
  or memory map);
* :func:`~ntk_core.kernel_matrix.is_on_disk` — whether those functions take the out-of-core route.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import _store
from .._checks import (
    as_float64_array,
    check_count,
    check_interval,
    check_lam,
    check_rows,
    check_symmetric,
    symmetry_rtol,
)
from .._typing import ArrayLike
from .base import ACCURACY_RTOL, PSD_RTOL, IllConditionedWarning, KernelMatrix
from .dense import DenseKernel

__all__ = [
    "DEFAULT_OOC_MEMORY",
    "OnDiskKernel",
    "OutOfCoreKRR",
    "krr_predict_ooc",
    "krr_solve_ooc",
    "ridge_quadratic_ooc",
]

#: Bytes that one row block of K (and one scan tile pair) may take by default (256 MiB).
DEFAULT_OOC_MEMORY = 256 * 1024**2
_DEFAULT_RANK = 200
_MAX_RESTARTS = 5


# --------------------------------------------------------------------------- the matrix on disk


class _Blocks:
    """A matrix read by blocks (a memory map, an array, or anything with ``shape`` and slicing); counts reads."""

    def __init__(self, K: Any, name: str) -> None:
        self.name = name
        if isinstance(K, (str, os.PathLike)):
            path = Path(K)
            if not path.is_file():
                raise FileNotFoundError(f"{name}: no file {str(path)!r} (expected a .npy file of shape (n, n))")
            try:
                K = np.load(path, mmap_mode="r", allow_pickle=False)
            except (ValueError, EOFError) as exc:  # EOFError: an empty or truncated file
                why = exc if str(exc) else "the file ends before its header"
                raise ValueError(f"{name}: {str(path)!r} is not a readable .npy array file: {why}") from None
            if not isinstance(K, np.ndarray):
                raise TypeError(f"{name}: {str(path)!r} holds an archive of arrays (.npz), not one .npy array")
        elif isinstance(K, DenseKernel):  # validated in memory already
            K = K.array
        elif hasattr(K, "detach") and hasattr(K, "cpu"):  # torch.Tensor (in memory; no copy of the whole)
            K = K.detach().cpu().numpy()
        elif isinstance(K, (list, tuple)):
            K = as_float64_array(K, name, ndim=2)
        shape = getattr(K, "shape", None)
        if shape is None or not hasattr(K, "__getitem__"):
            raise TypeError(
                f"{name} must be a path to a .npy file, a numpy.memmap / numpy.ndarray, a torch.Tensor, or an "
                f"object with .shape and 2-D slicing; got {type(K).__name__}"
            )
        dtype = np.dtype(getattr(K, "dtype", np.float64))
        if dtype.kind not in "fiu":
            raise TypeError(f"{name} must hold real numbers, got dtype {dtype}")
        if len(shape) != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(shape)}")
        self.K = K
        self.dtype = dtype
        self.shape = (int(shape[0]), int(shape[1]))
        self.entries_read = 0
        self.max_block_entries = 0

    def read(self, rows: slice, cols: slice | None = None) -> np.ndarray:
        block = self.K[rows] if cols is None else self.K[rows, cols]
        out = np.array(block, dtype=np.float64, copy=True)
        self.entries_read += out.size
        self.max_block_entries = max(self.max_block_entries, out.size)
        return out

    def diagonal(self, side: int) -> np.ndarray:
        """The diagonal from the square tiles ``K[I, I]`` of ``side`` rows: ``n · side`` entries, ``side / n`` of a pass."""
        n = self.shape[0]
        diag = np.empty(n)
        for r in _slices(n, side):
            tile = self.read(r, r)
            diag[r] = np.diagonal(tile)
        if not np.all(np.isfinite(diag)):
            i = int(np.flatnonzero(~np.isfinite(diag))[0])
            raise ValueError(f"{self.name} holds NaN or infinite values on its diagonal (K[{i}, {i}] = {diag[i]})")
        return diag


def _block_rows(n: int, columns: int, block_rows: int | None, memory_budget: int | None) -> int:
    if block_rows is not None:
        return min(check_count(block_rows, "block_rows", 1), n)
    budget = DEFAULT_OOC_MEMORY if memory_budget is None else check_count(memory_budget, "memory_budget", 1)
    return _store.tile_side(budget, n, per_pair=0.0, per_row=4.0 * max(columns, 1))


def _slices(n: int, size: int) -> list[slice]:
    return [slice(s, min(s + size, n)) for s in range(0, n, size)]


@dataclass
class _Scan:
    diag: np.ndarray
    scale: float
    asym: float


def _read_finite(K: _Blocks, rows: slice, cols: slice) -> np.ndarray:
    """The tile K[rows, cols], refused if it holds NaN or infinite values."""
    tile = K.read(rows, cols)
    if not np.all(np.isfinite(tile)):
        raise ValueError(
            f"{K.name} holds NaN or infinite values in rows {rows.start}:{rows.stop}, "
            f"columns {cols.start}:{cols.stop}; all entries must be finite"
        )
    return tile


def _scan(K: _Blocks, side: int) -> _Scan:
    """One pass over K in pairs of tiles (I, J), (J, I): finiteness, max|K|, max|K − Kᵀ|, the diagonal."""
    n = K.shape[0]
    diag = np.empty(n)
    scale = asym = 0.0
    blocks = _slices(n, side)
    for a, rows in enumerate(blocks):
        for cols in blocks[a:]:
            upper = _read_finite(K, rows, cols)
            scale = max(scale, float(np.max(np.abs(upper))))
            if cols == rows:
                diag[rows] = np.diagonal(upper)
                asym = max(asym, float(np.max(np.abs(upper - upper.T))))
                continue
            lower = _read_finite(K, cols, rows)
            scale = max(scale, float(np.max(np.abs(lower))))
            asym = max(asym, float(np.max(np.abs(upper - lower.T))))
    return _Scan(diag, scale, asym)


def _open_square(K: Any, name: str) -> _Blocks:
    Kb = _Blocks(K, name)
    n, m = Kb.shape
    if n != m or n == 0:
        raise ValueError(f"{name} must be a non-empty square (n, n) kernel matrix, got shape {Kb.shape}")
    return Kb


def _validate(Kb: _Blocks, rows: int, block_rows: int | None, memory_budget: int | None) -> _Scan:
    """The validation pass: tiles of ``rows`` rows if given, else the largest two that fit the budget."""
    n = Kb.shape[0]
    budget = DEFAULT_OOC_MEMORY if memory_budget is None else memory_budget
    side = rows if block_rows is not None else max(rows, _store.tile_side(budget, n, per_pair=16.0))
    scan = _scan(Kb, side)
    check_symmetric(scan.asym, scan.scale, symmetry_rtol(Kb.dtype), Kb.name)
    return scan


def _matvec(K: _Blocks, V: np.ndarray, rows: int, symmetrize: bool) -> np.ndarray:
    """K V (or (K + Kᵀ) V / 2) in one pass over row blocks of K; V of shape (n, k)."""
    out = np.zeros_like(V)
    other = np.zeros_like(V) if symmetrize else None
    for r in _slices(K.shape[0], rows):
        block = K.read(r)
        out[r] = block @ V
        if other is not None:
            other += block.T @ V[r]
    if other is not None:
        out = 0.5 * (out + other)
    return out


class OnDiskKernel(KernelMatrix):
    r"""A kernel matrix :math:`K = k(X, X)` kept on disk, read in blocks and never loaded whole.

    Wraps what :func:`krr_solve_ooc` reads (a ``.npy`` path, opened with
    ``mmap_mode="r"``; a memory map; any object with ``.shape`` and 2-D slicing)
    together with the solver's options, so that every function of
    :mod:`ntk_core.bounds` that takes a kernel matrix can take it, and counts the
    entries of K that all of them read together (:attr:`passes`). K is validated
    once (:meth:`check`: square, finite, symmetric; one pass) and the result is
    kept, so later solves on the same object skip that pass.

    Parameters
    ----------
    K : str, os.PathLike, numpy.memmap or ArrayLike, shape (n, n)
        The kernel matrix, as :func:`krr_solve_ooc` takes it.
    tol : float
        Default relative residual of the solves on this K (see :func:`krr_solve_ooc`).
    max_iter, rank : int, optional
        Default PCG iteration limit and preconditioner rank of the solves.
    block_rows : int, optional
        Rows of K per block read (default: as many as ``memory_budget`` allows).
    memory_budget : int, optional
        Bytes of K held at once (default :data:`DEFAULT_OOC_MEMORY`).

    Attributes
    ----------
    n : int
        The number of rows (and columns) of K.
    entries_read : int
        Entries of K read so far by everything that used this object.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from ntk_core.kernel_matrix.on_disk import OnDiskKernel
    >>> path = os.path.join(tempfile.mkdtemp(), "K.npy")
    >>> np.save(path, np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]]))
    >>> K = OnDiskKernel(path, block_rows=2)
    >>> K.trace(), K.entries_read        # the diagonal tiles K[0:2, 0:2] and K[2:3, 2:3]
    (6.0, 5)
    >>> K.matvec(np.ones(3))              # validates K first (one pass), then one pass
    array([3., 4., 3.])
    >>> K.passes
    2.5555555555555554
    """

    def __init__(
        self,
        K: Any,
        *,
        tol: float = 1e-12,
        max_iter: int | None = None,
        rank: int | None = None,
        block_rows: int | None = None,
        memory_budget: int | None = None,
    ) -> None:
        if isinstance(K, OnDiskKernel):
            K = K._blocks.K
        self.tol = check_interval(tol, "tol", 0.0, 1.0, low_open=True, high_open=True)
        self.max_iter = None if max_iter is None else check_count(max_iter, "max_iter", 1)
        self.rank = None if rank is None else check_count(rank, "rank", 0)
        self.block_rows = None if block_rows is None else check_count(block_rows, "block_rows", 1)
        self.memory_budget = None if memory_budget is None else check_count(memory_budget, "memory_budget", 1)
        self._blocks: _Blocks = _open_square(K, "K")
        self.n = self._blocks.shape[0]
        self._rows = _block_rows(self.n, self.n, self.block_rows, self.memory_budget)
        self._scan: _Scan | None = None
        self._diag: np.ndarray | None = None

    def __repr__(self) -> str:
        return f"OnDiskKernel(n={self.n}, block_rows={self._rows}, passes={self.passes:.3g})"

    @property
    def entries_read(self) -> int:
        return self._blocks.entries_read

    @property
    def passes(self) -> float:
        """Entries of K read so far divided by n² (all uses of this object together)."""
        return self._blocks.entries_read / float(self.n * self.n)

    @property
    def max_block_entries(self) -> int:
        """The most entries of K held at once so far (a block or a tile), never n² unless a block is all of K."""
        return self._blocks.max_block_entries

    def check(self) -> OnDiskKernel:
        """Validate K once (square, finite, symmetric to the tolerance of its dtype; one pass); returns ``self``.

        Raises
        ------
        ValueError
            K not finite or not symmetric.
        """
        self._checked()
        return self

    def _checked(self) -> _Scan:
        if self._scan is None:
            self._scan = _validate(self._blocks, self._rows, self.block_rows, self.memory_budget)
            self._diag = self._scan.diag
        return self._scan

    def diagonal(self) -> np.ndarray:
        """The diagonal k(x_i, x_i): from the validation pass if it ran, else from the diagonal tiles.

        The tiles ``K[I, I]`` of ``block_rows`` rows hold ``n · block_rows``
        entries (``block_rows / n`` of a pass); the result is kept.

        Returns
        -------
        numpy.ndarray, shape (n,)
        """
        if self._diag is None:
            self._diag = self._blocks.diagonal(self._rows)
        return self._diag.copy()

    def trace(self) -> float:
        r""":math:`\operatorname{tr} K = \sum_i k(x_i, x_i)`, from :meth:`diagonal` (no whole pass over K).

        Returns
        -------
        float
        """
        return float(np.sum(self.diagonal()))

    def matvec(self, V: ArrayLike) -> np.ndarray:
        """:math:`K V` in one pass over row blocks (after :meth:`check`).

        A K symmetric only up to rounding is used as ``(K + Kᵀ)/2``, as the solver does.

        Parameters
        ----------
        V : ArrayLike, shape (n,) or (n, k)

        Returns
        -------
        numpy.ndarray, the shape of ``V``
        """
        scan = self._checked()
        W = check_rows(V, self.n, "V")
        return _matvec(self._blocks, W.reshape(self.n, -1), self._rows, scan.asym > 0.0).reshape(W.shape)

    def _ridge_solve(self, Y: np.ndarray, lam: float) -> np.ndarray:
        """α = (K + λ² I)⁻¹ Y by :func:`krr_solve_ooc`, with this object's solver options."""
        return krr_solve_ooc(self, Y, lam).alpha


# --------------------------------------------------------------------------- preconditioner


@dataclass
class _Preconditioner:
    """``P = U diag(e) Uᵀ + s I`` with orthonormal U (n, r): ``P⁻¹ v = v / s + U ((1/(e+s) − 1/s) ⊙ Uᵀ v)``."""

    U: np.ndarray
    e: np.ndarray
    shift: float

    @property
    def rank(self) -> int:
        return int(self.U.shape[1])

    def solve(self, V: np.ndarray) -> np.ndarray:
        out = V / self.shift
        if self.rank:
            coef = 1.0 / (self.e + self.shift) - 1.0 / self.shift
            out += self.U @ (coef[:, None] * (self.U.T @ V))
        return out


def _pivoted_cholesky(K: _Blocks, scan: _Scan, lam2: float, max_rank: int, name: str) -> _Preconditioner:
    """Greedy pivoted Cholesky ``K ≈ L Lᵀ`` from ``rank`` rows of K; stops when ``tr(K − L Lᵀ) ≤ λ²/100``."""
    n = K.shape[0]
    d = scan.diag.copy()
    tol_psd = PSD_RTOL * n * max(scan.scale, float(np.finfo(np.float64).tiny))
    if float(np.min(d)) < -tol_psd:
        i = int(np.argmin(d))
        raise ValueError(
            f"{name} is not positive semi-definite: its diagonal entry K[{i}, {i}] = {d[i]:.6g} is "
            f"negative (a kernel matrix k(X, X) has k(x, x) >= 0)"
        )
    L = np.zeros((n, max_rank))
    k = 0
    stop = 1e-2 * lam2 if lam2 > 0 else 0.0
    while k < max_rank:
        residual = float(np.sum(np.clip(d, 0.0, None)))
        p = int(np.argmax(d))
        if d[p] <= max(tol_psd * 1e-6, 0.0) or residual <= stop:
            break
        row = K.read(slice(p, p + 1))[0]
        col = (row - L[:, :k] @ L[p, :k]) / math.sqrt(d[p])
        L[:, k] = col
        d -= col * col
        d[p] = 0.0
        k += 1
        low = float(np.min(d))
        if low < -tol_psd:
            raise ValueError(
                f"{name} is not positive semi-definite: after {k} pivoted-Cholesky steps the Schur complement "
                f"has the diagonal entry {low:.6g}, below -{tol_psd:.3g} (= -{PSD_RTOL:g} x n x max|K|); the "
                f"Schur complement of a PSD matrix has a nonnegative diagonal, so this is not a kernel matrix"
            )
    L = L[:, :k]
    trace_left = float(np.sum(np.clip(d, 0.0, None)))
    shift = lam2 if lam2 > 0 else max(trace_left / n, 1e-14 * max(scan.scale, 1e-300))
    if k == 0:
        return _Preconditioner(np.zeros((n, 0)), np.zeros(0), shift)
    U, sv, _ = np.linalg.svd(L, full_matrices=False)
    e = sv * sv
    if lam2 == 0.0:
        # P⁻¹v = v/s + U((1/(e+s) − 1/s) ⊙ Uᵀv) cancels terms of size |v|/s: rounding errors of relative size
        # ε·max(e)/s. A shift of at least 1e-8·max(e) keeps them at 1e-8; with k = n (nothing outside span U)
        # s = min(e) is safe too and makes P ≈ K + min(e) I, whose P⁻¹K has its spectrum in [1/2, 1].
        floor = 1e-8 * float(e[0])
        if k == n:
            floor = max(floor, 1e-3 * float(e[-1]))
        shift = max(shift, floor)
    return _Preconditioner(U, e, shift)


# --------------------------------------------------------------------------- the solver


@dataclass
class OutOfCoreKRR:
    r"""The out-of-core KRR solution :math:`\alpha = (K + \lambda^2 I)^{-1}\tilde y` and how it was found.

    Attributes
    ----------
    alpha : numpy.ndarray
        Dual coefficients, float64, the shape of ``y``: ``(n,)`` or ``(n, K)``.
    fitted : numpy.ndarray
        ``K α``, the predictions at the training points (eq. (8) at x = x_i), the shape of ``y``.
    lam : float
        λ (the ridge is λ² I).
    iterations : int
        PCG iterations (one pass over K each).
    passes : float
        Entries of K read by this solve divided by n²: validation (not repeated
        for an :class:`OnDiskKernel` already checked), preconditioner, iterations,
        final residual.
    residual : float
        Largest relative true residual ``‖ỹ − (K + λ² I) α‖ / ‖ỹ‖`` over the columns.
    rank : int
        Rank of the pivoted-Cholesky preconditioner.
    block_rows : int
        Rows of K per block read.
    max_block_entries : int
        The most entries of K held at once (a block), never n² unless ``block_rows = n``.
    """

    alpha: np.ndarray
    fitted: np.ndarray
    lam: float
    iterations: int
    passes: float
    residual: float
    rank: int
    block_rows: int
    max_block_entries: int

    def predict(
        self, K_test_train: Any = None, *, block_rows: int | None = None, memory_budget: int | None = None
    ) -> np.ndarray:
        """Predictions :math:`k(x, X)^\\top \\alpha` from ``K_test_train`` streamed by row blocks.

        Parameters
        ----------
        K_test_train : path, numpy.memmap, ArrayLike, shape (m, n), optional
            Entries k(x_test_j, x_i) (``None``: the training predictions, ``fitted``).
        block_rows, memory_budget : int, optional
            Rows per block, or bytes per block (default :data:`DEFAULT_OOC_MEMORY`).

        Returns
        -------
        numpy.ndarray, shape (m,) or (m, K)
        """
        if K_test_train is None:
            return self.fitted.copy()
        Kt = _Blocks(K_test_train, "K_test_train")
        m, n = Kt.shape
        if n != self.alpha.shape[0]:
            raise ValueError(
                f"K_test_train must have shape (m, n) with n = {self.alpha.shape[0]} training points "
                f"(entry [j, i] = k(x_test_j, x_i)), got shape {Kt.shape}"
            )
        rows = _block_rows(m, n, block_rows, memory_budget)
        A = self.alpha.reshape(n, -1)
        out = np.empty((m, A.shape[1]))
        for r in _slices(m, rows):
            block = Kt.read(r)
            if not np.all(np.isfinite(block)):
                raise ValueError(f"K_test_train holds NaN or infinite values in rows {r.start}:{r.stop}")
            out[r] = block @ A
        return out[:, 0] if self.alpha.ndim == 1 else out


def krr_solve_ooc(
    K_train: Any,
    y: ArrayLike,
    lam: float,
    *,
    tol: float | None = None,
    max_iter: int | None = None,
    rank: int | None = None,
    block_rows: int | None = None,
    memory_budget: int | None = None,
) -> OutOfCoreKRR:
    r"""Solve :math:`(K + \lambda^2 I)\alpha = \tilde y` (paper eq. (8)/(9)) without loading K whole.

    Preconditioned conjugate gradients streaming row blocks of K (see the module
    text for the method, the passes over K and the checks).

    Parameters
    ----------
    K_train : str, os.PathLike, numpy.memmap, OnDiskKernel or ArrayLike, shape (n, n)
        The kernel matrix k(X, X): a ``.npy`` path (opened with ``mmap_mode="r"``),
        a memory map, an array, or any object with ``.shape`` and 2-D slicing
        (e.g. an HDF5 dataset). Symmetric PSD; any real dtype (computed in float64).
        An :class:`OnDiskKernel` supplies the defaults of the options below, is
        validated only once over all solves, and counts their passes.
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ, one column per output (eq. (9)); held in memory.
    lam : float
        λ ≥ 0 (the ridge is λ² I, never λ I); λ = 0 needs K positive definite.
    tol : float, optional
        Relative residual ``‖ỹ − (K + λ² I)α‖ / ‖ỹ‖`` to reach (default 1e-12), per column (checked
        on the true residual, not only PCG's recurrence), or the floor that
        float64 rounding allows, ``2 ε (‖K + λ² I‖ ‖α‖ + ‖ỹ‖) / ‖ỹ‖``, if
        that is larger (ill-conditioned K + λ² I).
    max_iter : int, optional
        PCG iterations at most, all restarts together (default ``n + 50``).
    rank : int, optional
        Most rows of K in the pivoted-Cholesky preconditioner (default ``min(n, 200)``;
        0: no preconditioner, ``s = λ²``).
    block_rows : int, optional
        Rows of K per block (default: as many as ``memory_budget`` allows).
    memory_budget : int, optional
        Bytes of K held at once (default :data:`DEFAULT_OOC_MEMORY`).

    Returns
    -------
    OutOfCoreKRR
        α, ``K α``, and the iterations, passes over K, residual and preconditioner rank.

    Raises
    ------
    ValueError
        K not square, finite and symmetric (relative tolerance :func:`~ntk_core._checks.symmetry_rtol` of its dtype), or
        shown not PSD; ``y`` of the wrong length; λ < 0; ``tol`` not in (0, 1).
    FileNotFoundError
        A path that does not exist.
    TypeError
        An argument of the wrong type.
    RuntimeError
        PCG did not reach ``tol`` in ``max_iter`` iterations (raise ``rank`` or λ).

    Examples
    --------
    A kernel matrix on disk, memory-mapped, solved in row blocks of 2:

    >>> import numpy as np, tempfile, os
    >>> from ntk_core.kernel_matrix.on_disk import krr_solve_ooc
    >>> path = os.path.join(tempfile.mkdtemp(), "K.npy")
    >>> np.save(path, np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]]))
    >>> sol = krr_solve_ooc(np.load(path, mmap_mode="r"), np.array([1.0, 0.0, -1.0]), lam=1.0, block_rows=2)
    >>> np.round(sol.alpha, 6)
    array([ 0.333333,  0.      , -0.333333])
    >>> sol.residual < 1e-12, sol.max_block_entries < 9
    (True, True)
    """
    lam = check_lam(lam)
    disk = K_train if isinstance(K_train, OnDiskKernel) else None
    if disk is not None:
        tol = disk.tol if tol is None else tol
        max_iter = disk.max_iter if max_iter is None else max_iter
        rank = disk.rank if rank is None else rank
    tol = check_interval(1e-12 if tol is None else tol, "tol", 0.0, 1.0, low_open=True, high_open=True)
    yy = as_float64_array(y, "y", ndim=(1, 2))
    if disk is not None:
        Kb = disk._blocks
        n = disk.n
        start = Kb.entries_read
        if block_rows is None and memory_budget is None:
            rows = disk._rows
        else:
            rows = _block_rows(n, n, block_rows, memory_budget)
        check_rows(yy, n, "y")
        scan = disk._checked()
    else:
        Kb = _open_square(K_train, "K_train")
        n = Kb.shape[0]
        start = 0
        check_rows(yy, n, "y")
        rows = _block_rows(n, n, block_rows, memory_budget)
        scan = _validate(Kb, rows, block_rows, memory_budget)
    iters_max = n + 50 if max_iter is None else check_count(max_iter, "max_iter", 1)
    r_max = min(n, _DEFAULT_RANK) if rank is None else min(check_count(rank, "rank", 0), n)
    lam2 = lam * lam
    precond = _pivoted_cholesky(Kb, scan, lam2, r_max, "K_train")
    symmetrize = scan.asym > 0.0
    Y = yy.reshape(n, -1)
    X = np.zeros_like(Y)
    ynorm = np.linalg.norm(Y, axis=0)

    def apply_K(V: np.ndarray) -> np.ndarray:
        return _matvec(Kb, V, rows, symmetrize)

    iterations = 0
    fitted = np.zeros_like(Y)
    rel = reach = np.zeros(Y.shape[1])
    norm_K = max(float(precond.e[0]) if precond.rank else 0.0, float(np.max(scan.diag)))
    for _ in range(_MAX_RESTARTS + 1):
        KX = _matvec(Kb, X, rows, symmetrize) if iterations else np.zeros_like(Y)
        R = Y - KX - lam2 * X
        fitted = KX
        rel = np.linalg.norm(R, axis=0) / np.where(ynorm > 0, ynorm, 1.0)
        reach = np.maximum(tol, _attainable(X, ynorm, norm_K + lam2, n))
        if not (rel > reach).any() or iterations >= iters_max:
            break
        iterations = _pcg(
            apply_K,
            precond,
            X,
            R,
            ynorm,
            lambda: 0.5 * np.maximum(tol, _attainable(X, ynorm, norm_K + lam2, n)),
            iters_max,
            iterations,
            "K_train",
            lam,
            max(scan.scale, 1e-300),
        )
    if bool((rel > reach).any()):
        raise RuntimeError(
            f"conjugate gradients did not reach the relative residual tol = {tol:g} in {iterations} iterations "
            f"(reached {float(np.max(rel)):.3g}); K + λ² I (λ = {lam!r}) is too ill-conditioned for this "
            f"preconditioner: raise rank (now {precond.rank}), max_iter, λ, or tol"
        )
    worst = float(np.max(rel)) if rel.size else 0.0
    if worst > max(tol, ACCURACY_RTOL):  # stopped at the floor rounding allows, far above what was asked
        warnings.warn(
            IllConditionedWarning(
                f"out-of-core kernel ridge regression with λ = {lam:g} reached a relative residual of only "
                f"{worst:.1e} (asked: {tol:g}): K + λ² I is so ill-conditioned that float64 rounding allows no "
                "better, and the coefficients and predictions are at least that inaccurate. Use a larger λ"
            ),
            stacklevel=2,
        )
    shape = yy.shape
    return OutOfCoreKRR(
        alpha=X.reshape(shape),
        fitted=fitted.reshape(shape),
        lam=lam,
        iterations=iterations,
        passes=(Kb.entries_read - start) / float(n * n),
        residual=float(np.max(rel)) if rel.size else 0.0,
        rank=precond.rank,
        block_rows=rows,
        max_block_entries=Kb.max_block_entries,
    )


def _attainable(X: np.ndarray, ynorm: np.ndarray, norm_A: float, n: int) -> np.ndarray:
    """The relative residual that rounding allows, ``2 ε (‖A‖ ‖x‖ + ‖ỹ‖) / ‖ỹ‖`` per column.

    Even the exact solution rounded to float64 has a residual of about
    ``ε ‖A‖ ‖x‖`` (``A = K + λ² I``), which exceeds ``tol ‖ỹ‖`` when A is
    ill-conditioned; a direct (Cholesky) solve stops at the same floor.
    """
    eps = float(np.finfo(np.float64).eps)
    safe = np.where(ynorm > 0, ynorm, 1.0)
    return 2.0 * eps * (norm_A * np.linalg.norm(X, axis=0) + ynorm) / safe


def _pcg(
    apply_K: Any,
    precond: _Preconditioner,
    X: np.ndarray,
    R: np.ndarray,
    ynorm: np.ndarray,
    target: Any,
    iters_max: int,
    iterations: int,
    name: str,
    lam: float,
    scale: float,
) -> int:
    """PCG on ``K + λ² I`` for all columns at once, from X with residual R (both updated in place); returns the
    iteration count. ``apply_K`` is the product with K alone, so that the PSD test reads pᵀKp directly (as
    pᵀ(K + λ² I)p − λ² pᵀp it would be lost to cancellation when λ² dwarfs K)."""
    safe = np.where(ynorm > 0, ynorm, 1.0)
    n = X.shape[0]
    psd_tol = PSD_RTOL * n * scale
    singular_tol = n * float(np.finfo(np.float64).eps) * scale  # pᵀKp / pᵀp at rounding level: K singular
    active = np.linalg.norm(R, axis=0) / safe > target()
    Z = precond.solve(R)
    P = Z.copy()
    rz = np.sum(R * Z, axis=0)
    while active.any() and iterations < iters_max:
        KP = apply_K(P)
        AP = KP + (lam * lam) * P
        iterations += 1
        pap = np.sum(P * AP, axis=0)
        pp = np.sum(P * P, axis=0)
        rayleigh = np.where(pp > 0, np.sum(P * KP, axis=0) / np.where(pp > 0, pp, 1.0), 0.0)  # pᵀKp / pᵀp
        shown = active & (rayleigh < -psd_tol)
        if shown.any():
            raise ValueError(
                f"{name} is not positive semi-definite: conjugate gradients found a direction p with "
                f"pᵀKp / pᵀp = {float(np.min(rayleigh[shown])):.6g}, below -{psd_tol:.3g} (= -{PSD_RTOL:g} x n x "
                f"max|K|), so K has an eigenvalue at least that negative and is not a kernel matrix"
            )
        singular = active & (lam == 0.0) & (rayleigh <= singular_tol)
        if singular.any():
            raise ValueError(
                f"{name} must be positive definite here (λ = 0: yᵀK⁻¹y needs K invertible), and it is singular to "
                f"working precision: conjugate gradients found a direction p with pᵀKp / pᵀp = "
                f"{float(np.min(rayleigh[singular])):.3g}, at rounding level (below {singular_tol:.3g} = n·eps·max|K|). "
                "An empirical NTK has rank at most its model's number of trained parameters P, so P < n gives this. "
                "Remedies: a ridge λ > 0 (ridge_complexity, krr with lam > 0), a model with more parameters than "
                "examples (P ≥ n), or the infinite-width kernel"
            )
        bad = active & (pap <= 0.0)
        if bad.any():
            raise ValueError(
                f"{name} + λ² I (λ = {lam!r}) is not positive definite: conjugate gradients found a direction p "
                f"with pᵀ(K + λ² I)p = {float(np.min(pap[bad])):.3g} <= 0; K must be positive semi-definite and "
                f"λ > 0 (or K positive definite when λ = 0)"
            )
        step = np.where(active, rz / np.where(pap > 0, pap, 1.0), 0.0)
        X += step * P
        R -= step * AP
        # half the target, so that the true residual checked afterwards is below it too
        active = active & (np.linalg.norm(R, axis=0) / safe > target())
        Z = precond.solve(R)
        rz_new = np.sum(R * Z, axis=0)
        beta = np.where(active, rz_new / np.where(rz != 0, rz, 1.0), 0.0)
        P = Z + beta * P
        rz = rz_new
    return iterations


def krr_predict_ooc(
    K_train: Any,
    y: ArrayLike,
    lam: float,
    K_test_train: Any = None,
    **options: Any,
) -> np.ndarray:
    r"""Kernel ridge regression predictions :math:`k(x, X)^\top (K + \lambda^2 I)^{-1}\tilde y`, out of core.

    :func:`krr_solve_ooc` then :meth:`OutOfCoreKRR.predict`: the same answers as
    :func:`ntk_core.krr.krr_predict` (to the solver's tolerance), with K and
    ``K_test_train`` read in row blocks.

    Parameters
    ----------
    K_train : str, os.PathLike, numpy.memmap or ArrayLike, shape (n, n)
        The kernel matrix k(X, X) (see :func:`krr_solve_ooc`).
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ.
    lam : float
        λ ≥ 0; the ridge is λ² I.
    K_test_train : str, os.PathLike, numpy.memmap or ArrayLike, shape (m, n), optional
        Entries k(x_test_j, x_i); ``None``: predictions at the training points.
    **options
        ``tol``, ``max_iter``, ``rank``, ``block_rows``, ``memory_budget`` of :func:`krr_solve_ooc`.

    Returns
    -------
    numpy.ndarray, shape (m,) or (m, K)
        float64 predictions.

    Raises
    ------
    ValueError, TypeError, FileNotFoundError, RuntimeError
        As :func:`krr_solve_ooc`; ``K_test_train`` of the wrong shape.

    Examples
    --------
    With K = I each prediction is ỹ / (1 + λ²):

    >>> import numpy as np
    >>> from ntk_core.kernel_matrix.on_disk import krr_predict_ooc
    >>> krr_predict_ooc(np.eye(3), np.array([1.0, -1.0, 1.0]), lam=1.0, block_rows=1)
    array([ 0.5, -0.5,  0.5])
    """
    known = {"tol", "max_iter", "rank", "block_rows", "memory_budget"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"krr_predict_ooc got unexpected option(s) {unknown}; allowed: {sorted(known)}")
    sol = krr_solve_ooc(K_train, y, lam, **options)
    return sol.predict(K_test_train, block_rows=options.get("block_rows"), memory_budget=options.get("memory_budget"))


def ridge_quadratic_ooc(K: Any, y: ArrayLike, lam: float = 0.0, **options: Any) -> float | np.ndarray:
    r""":math:`\tilde y^\top (K + \lambda^2 I)^{-1} \tilde y` for a K on disk, one value per column of ``y``.

    With λ = 0 this is the complexity :math:`y^\top K^{-1} y` of Theorems 5.1–5.3
    (:func:`ntk_core.bounds.complexity`), which needs K positive definite.

    Parameters
    ----------
    K : str, os.PathLike, numpy.memmap or ArrayLike, shape (n, n)
        The kernel matrix (see :func:`krr_solve_ooc`).
    y : ArrayLike, shape (n,) or (n, K)
        Labels.
    lam : float
        λ ≥ 0.
    **options
        ``tol``, ``max_iter``, ``rank``, ``block_rows``, ``memory_budget`` of :func:`krr_solve_ooc`.

    Returns
    -------
    float or numpy.ndarray, shape (K,)

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core.kernel_matrix.on_disk import ridge_quadratic_ooc
    >>> round(ridge_quadratic_ooc(np.diag([1.0, 4.0]), np.array([1.0, 2.0])), 10)
    2.0
    """
    yy = as_float64_array(y, "y", ndim=(1, 2))
    sol = krr_solve_ooc(K, yy, lam, **options)
    vals = np.sum(yy.reshape(yy.shape[0], -1) * sol.alpha.reshape(yy.shape[0], -1), axis=0)
    return float(vals[0]) if yy.ndim == 1 else vals
