r"""Kernel matrices k(X, X): one type, whatever holds K — what kernel ridge regression and the bounds take.

Every function of :mod:`ntk_core.krr` and :mod:`ntk_core.bounds` that takes a kernel matrix takes a
:class:`~ntk_core.kernel_matrix.base.KernelMatrix`: a size, a trace and a diagonal, products ``K V``, ridge solves
``α = (K + λ² I)⁻¹ Y`` (the ridge λ² I of eq. (8)) and quadratic forms ``Yᵀ(K + λ² I)⁻¹ Y`` (λ = 0: the
complexity yᵀK⁻¹y of eq. (10)). The kinds, one module each:

* :mod:`~ntk_core.kernel_matrix.dense` — :class:`~ntk_core.kernel_matrix.dense.DenseKernel`, a validated float64
  array in memory, solved by Cholesky, positive semi-definiteness checked where a solve needs it;
* :mod:`~ntk_core.kernel_matrix.on_disk` — :class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel`, a ``.npy`` file or
  a memory map read in row blocks, validated in one pass, solved by preconditioned conjugate gradients
  (:func:`~ntk_core.kernel_matrix.on_disk.krr_solve_ooc`);
* :mod:`~ntk_core.kernel_matrix.factored` — :class:`~ntk_core.kernel_matrix.factored.FactoredKernel`, K + λ²I
  factored tile by tile out of core and resumably (the complexity at any n), its tiles of K read from a
  :class:`~ntk_core.kernel_matrix.source.KernelSource` (:mod:`~ntk_core.kernel_matrix.source`: a matrix read by
  blocks, or a kernel function evaluated tile by tile so that K is never stored);
* :mod:`~ntk_core.kernel_matrix.file` — :func:`~ntk_core.kernel_matrix.file.write_kernel`, K written tile by tile
  into one ``.npy`` by several processes, resumably, for the on-disk kind to read.

:func:`as_kernel_matrix` turns what a user passes (an array, a tensor, a ``.npy`` path, a memory map, or any
kind) into one of them: the only place that tells in memory from on disk (here, where every kind is importable).
The factored kind keeps its tiles in one ``_store.TileStore``, as the empirical NTK keeps its checkpointed tiles;
the kernel file writes its tiles into the ``.npy`` itself, with one marker per tile whose rows are synced.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .base import ACCURACY_RTOL, PSD_RTOL, IllConditionedWarning, KernelMatrix
from .dense import DenseKernel, symmetrise_in_place
from .factored import DEFAULT_KEEP_MEMORY, FactoredKernel, NotPositiveDefiniteError, TiledCholesky, tiled_cholesky
from .file import WrittenKernel, write_kernel
from .on_disk import DEFAULT_OOC_MEMORY, OnDiskKernel, OutOfCoreKRR, krr_predict_ooc, krr_solve_ooc, ridge_quadratic_ooc
from .source import DEFAULT_CHOLESKY_MEMORY, KernelSource

__all__ = [
    "ACCURACY_RTOL",
    "DEFAULT_CHOLESKY_MEMORY",
    "DEFAULT_KEEP_MEMORY",
    "DEFAULT_OOC_MEMORY",
    "PSD_RTOL",
    "DenseKernel",
    "FactoredKernel",
    "IllConditionedWarning",
    "KernelMatrix",
    "KernelSource",
    "NotPositiveDefiniteError",
    "OnDiskKernel",
    "OutOfCoreKRR",
    "TiledCholesky",
    "WrittenKernel",
    "as_kernel_matrix",
    "is_on_disk",
    "krr_predict_ooc",
    "krr_solve_ooc",
    "ridge_quadratic_ooc",
    "symmetrise_in_place",
    "tiled_cholesky",
    "write_kernel",
]


def is_on_disk(K: Any) -> bool:
    """Whether ``K`` is a ``.npy`` path, a ``numpy.memmap`` or an :class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel` (the out-of-core route).

    Parameters
    ----------
    K : object
        A kernel matrix argument.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core.kernel_matrix import is_on_disk
    >>> is_on_disk(np.eye(2)), is_on_disk("gram.npy")
    (False, True)
    """
    return isinstance(K, (str, os.PathLike, np.memmap, OnDiskKernel))


def as_kernel_matrix(K: Any, name: str = "K") -> KernelMatrix:
    """K as the :class:`~ntk_core.kernel_matrix.base.KernelMatrix` that the bounds and solvers take.

    The one place that tells a kernel matrix in memory from one on disk: a ``.npy`` path, a memory map or an
    :class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel` becomes a validated one (one pass over K, once per object); an
    array or a tensor becomes a :class:`~ntk_core.kernel_matrix.dense.DenseKernel` (symmetric within its dtype's
    rounding, finite); a ``KernelMatrix`` is returned as it is.

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or KernelMatrix, shape (n, n)
        The kernel matrix k(X, X).
    name : str
        How errors name it.

    Returns
    -------
    KernelMatrix

    Raises
    ------
    ValueError
        K not square, not finite or not symmetric.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core.kernel_matrix import as_kernel_matrix
    >>> as_kernel_matrix(np.eye(3))
    DenseKernel(n=3)
    """
    if isinstance(K, OnDiskKernel):
        return K.check()
    if isinstance(K, KernelMatrix):
        return K
    if is_on_disk(K):
        return OnDiskKernel(K).check()
    return DenseKernel(K, name)
