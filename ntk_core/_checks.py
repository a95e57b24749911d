"""Input validation shared by every module of ``ntk_core``.

Each helper raises ``ValueError`` or ``TypeError`` with a message that says
what was received and what is allowed, so that bad input fails loudly and
early (see the conventions in ARCHITECTURE.md). Nothing here computes mathematics.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._typing import ArrayLike


__all__ = [
    "as_float64_array",
    "as_labels",
    "as_numpy",
    "check_binary_labels",
    "check_choice",
    "check_class_labels",
    "check_count",
    "check_device",
    "check_each_in",
    "check_finite",
    "check_interval",
    "check_output_path",
    "check_kernel_matrix",
    "check_lam",
    "check_probability",
    "check_rows",
    "check_rate",
    "check_seed",
    "check_transition_matrix",
    "check_unit_interval_open",
    "check_positive",
    "json_written_with",
    "symmetry_rtol",
]


#: Relative tolerance of the symmetry check of kernel matrices (:func:`check_kernel_matrix`).
SYMMETRY_RTOL = 1e-8


def _describe(x: ArrayLike) -> str:
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is not None:
        return f"{type(x).__name__} of shape {tuple(shape)} and dtype {dtype}"
    return f"{type(x).__name__} {x!r}"


def as_numpy(x: ArrayLike) -> np.ndarray:
    """``x`` as a NumPy array of its own dtype; a torch tensor is detached and copied to the CPU first.

    Parameters
    ----------
    x : ArrayLike
        A NumPy array, a torch tensor (torch is not imported for this) or anything
        :func:`numpy.asarray` accepts.

    Returns
    -------
    numpy.ndarray
        The shape and dtype of ``x`` (no copy for an ndarray); a tensor of a dtype NumPy lacks (bfloat16, the
        float8 types) comes back as float32, which holds its values exactly.

    Examples
    --------
    >>> as_numpy([1, 2]).dtype
    dtype('int64')
    """
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor, without importing torch
        x = x.detach().cpu()
        if str(getattr(x, "dtype", "")) in ("torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2"):
            x = x.float()  # dtypes NumPy lacks: float32 holds their values exactly
        x = x.numpy()
    return np.asarray(x)


def as_float64_array(x: ArrayLike, name: str, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Return ``x`` (NumPy array, torch tensor or nested sequence) as a float64 ndarray.

    Raises ``TypeError`` for non-numeric input and ``ValueError`` for a wrong
    number of dimensions or for NaN/Inf entries.

    Parameters
    ----------
    x : ArrayLike
        The input.
    name : str
        Its name in error messages.
    ndim : int or tuple of int, optional
        The allowed numbers of dimensions.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``x``.
    """
    try:
        arr = as_numpy(x)
    except Exception as exc:  # pragma: no cover - numpy raises many kinds
        raise TypeError(f"{name} must be array-like, got {_describe(x)}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must hold real numbers, got {_describe(x)}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got complex dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if arr.ndim not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(f"{name} must have {want} dimension(s), got shape {arr.shape}")
    check_finite(arr, name)
    return arr


def check_finite(arr: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` if ``arr`` holds NaN or infinite values.

    Parameters
    ----------
    arr : numpy.ndarray
        The array.
    name : str
        Its name in the error message.
    """
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s); all entries must be finite")


def _check_real_scalar(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v!r}")
    return v


def check_choice(value: Any, name: str, allowed: Sequence[Any]) -> Any:
    """One of a fixed set of values, for example a method name.

    Parameters
    ----------
    value : object
        The value.
    name : str
        Its name in the error message.
    allowed : sequence
        The allowed values; ``value`` must equal one of them and have its type
        (so ``True`` is not the choice ``1``).

    Returns
    -------
    object
        ``value``, unchanged.

    Raises
    ------
    ValueError
        ``value`` is not one of ``allowed``.

    Examples
    --------
    >>> check_choice("mse", "loss", ("mse", "ce"))
    'mse'
    """
    for choice in allowed:
        if type(value) is type(choice) and value == choice:
            return choice
    raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")


def check_count(value: Any, name: str, minimum: int = 1) -> int:
    """An integer count that is at least ``minimum`` (``bool`` is refused).

    Parameters
    ----------
    value : int
        The count.
    name : str
        Its name in the error message.
    minimum : int
        The smallest allowed count.

    Returns
    -------
    int
        ``value`` as a Python ``int``.

    Raises
    ------
    TypeError
        Not an integer (a ``bool`` or a float included).
    ValueError
        Smaller than ``minimum``.

    Examples
    --------
    >>> check_count(3, "width")
    3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _interval(low: float, high: float, low_open: bool, high_open: bool) -> str:
    return f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def _inside(v: float, low: float, high: float, low_open: bool, high_open: bool) -> bool:
    return (v > low if low_open else v >= low) and (v < high if high_open else v <= high)


def check_interval(
    value: Any, name: str, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> float:
    """A finite real number in the interval from ``low`` to ``high``.

    Parameters
    ----------
    value : float
        The number.
    name : str
        Its name in the error message.
    low, high : float
        The ends of the interval (``high`` may be ``math.inf``).
    low_open, high_open : bool
        Whether each end is excluded (default: both included).

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    TypeError
        Not a real number (a ``bool`` included).
    ValueError
        Not finite, or outside the interval.

    Examples
    --------
    >>> check_interval(0.25, "p", 0.0, 0.5, high_open=True)
    0.25
    """
    v = _check_real_scalar(value, name)
    if not _inside(v, low, high, low_open, high_open):
        raise ValueError(f"{name} must lie in {_interval(low, high, low_open, high_open)}, got {v!r}")
    return v


def check_each_in(
    values: Any, name: str, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> tuple[float, ...]:
    """A non-empty sequence of real numbers, each in the interval from ``low`` to ``high``.

    Parameters
    ----------
    values : sequence of float
        The numbers, for example a grid of λ values.
    name : str
        Their name in the error message.
    low, high, low_open, high_open
        The interval, as in :func:`check_interval`.

    Returns
    -------
    tuple of float
        The values as floats, in order.

    Raises
    ------
    TypeError
        Not a sequence, or an entry that is not a real number (a ``bool`` included).
    ValueError
        Empty, or an entry outside the interval.

    Examples
    --------
    >>> check_each_in([0.1, 0.2], "noise level", 0.0, 0.5, high_open=True)
    (0.1, 0.2)
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__} {values!r}")
    if len(values) == 0:
        raise ValueError(f"{name} must hold at least one value")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"every {name} must be a real number, got {type(v).__name__} {v!r}")
        if not _inside(float(v), low, high, low_open, high_open):
            raise ValueError(f"every {name} must lie in {_interval(low, high, low_open, high_open)}, got {v!r}")
        out.append(float(v))
    return tuple(out)


def check_device(device: Any) -> str:
    """A PyTorch device name: ``"cpu"``, or ``"cuda"`` / ``"cuda:N"`` when PyTorch sees a GPU.

    Parameters
    ----------
    device : str
        The device name.

    Returns
    -------
    str
        ``device``, unchanged.

    Raises
    ------
    TypeError
        Not a string.
    ValueError
        Another name, or a CUDA device on a machine where PyTorch sees no GPU.

    Examples
    --------
    >>> check_device("cpu")
    'cpu'
    """
    if not isinstance(device, str):
        raise TypeError(f"device must be a str ('cpu', 'cuda' or 'cuda:N'), got {type(device).__name__} {device!r}")
    if device == "cpu":
        return device
    if not (device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    import torch  # only here: validating a CPU run needs no torch import

    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but PyTorch sees no CUDA GPU on this machine; use 'cpu'")
    return device


def check_probability(value: Any, name: str) -> float:
    """A probability in the closed interval [0, 1].

    Parameters
    ----------
    value, name
        As in :func:`check_interval`.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        Outside the range, or not a finite real number.
    """
    return check_interval(value, name, 0, 1)


def check_rate(value: Any, name: str = "p") -> float:
    """A binary flip rate p in [0, 1/2), the range of Section 3.1 of the paper.

    At p = 1/2 the noisy labels carry no information about the clean ones, and
    for p > 1/2 the classes are swapped, so the paper (and this library) refuses
    both.

    Parameters
    ----------
    value, name
        As in :func:`check_interval`.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        Outside the range, or not a finite real number.
    """
    v = _check_real_scalar(value, name)
    if not 0.0 <= v < 0.5:
        raise ValueError(
            f"{name} must lie in [0, 1/2) (the paper's binary flip rate; at 1/2 the labels "
            f"carry no information), got {v!r}"
        )
    return v


def check_unit_interval_open(value: Any, name: str) -> float:
    """A number in the open interval (0, 1), for example a failure probability δ.

    Parameters
    ----------
    value, name
        As in :func:`check_interval`.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        Outside the range, or not a finite real number.
    """
    return check_interval(value, name, 0, 1, low_open=True, high_open=True)


def check_positive(value: Any, name: str) -> float:
    """A strictly positive real number, for example λ where a formula divides by it.

    Parameters
    ----------
    value, name
        As in :func:`check_interval`.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        Outside the range, or not a finite real number.
    """
    v = _check_real_scalar(value, name)
    if not v > 0.0:
        raise ValueError(f"{name} must be > 0, got {v!r}")
    return v


def check_seed(seed: Any, name: str = "seed") -> np.random.Generator:
    """Turn an ``int`` seed or a ``numpy.random.Generator`` into a Generator.

    ``None`` is refused on purpose: every draw in ``ntk_core`` is reproducible.

    Parameters
    ----------
    seed : int or numpy.random.Generator
        The seed.
    name : str
        Its name in the error message.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    TypeError
        Not an ``int`` or a Generator (``None`` included).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"{name} must be an int or a numpy.random.Generator (draws are always seeded), "
            f"got {type(seed).__name__} {seed!r}"
        )
    if int(seed) < 0:
        raise ValueError(f"{name} must be a non-negative int, got {seed!r}")
    return np.random.default_rng(int(seed))


def check_transition_matrix(P: ArrayLike, name: str = "P", atol: float = 1e-8) -> np.ndarray:
    """A K×K column-stochastic matrix, ``P[c', c] = Pr[noisy label c' | clean label c]``.

    This is the paper's convention (Section 3.1): entry :math:`p_{c',c}` is the
    probability that label c is turned into c', so each *column* sums to 1.

    Parameters
    ----------
    P : ArrayLike, shape (K, K)
        The matrix.
    name : str
        Its name in error messages.
    atol : float
        Tolerance of the column sums.

    Returns
    -------
    numpy.ndarray, shape (K, K)
        float64.

    Raises
    ------
    ValueError
        Not square, negative entries, or a column that does not sum to 1.
    """
    arr = as_float64_array(P, name, ndim=2)
    k1, k2 = arr.shape
    if k1 != k2 or k1 < 2:
        raise ValueError(f"{name} must be a square K×K matrix with K >= 2, got shape {arr.shape}")
    if np.any(arr < -atol) or np.any(arr > 1 + atol):
        raise ValueError(f"{name} entries must be probabilities in [0, 1]; min {arr.min():.3g}, max {arr.max():.3g}")
    sums = arr.sum(axis=0)
    if not np.allclose(sums, 1.0, atol=atol, rtol=0.0):
        worst = int(np.argmax(np.abs(sums - 1.0)))
        row_sums_ok = np.allclose(arr.sum(axis=1), 1.0, atol=atol, rtol=0.0)
        hint = " (its rows sum to 1: did you pass the transpose? ntk_core uses P[noisy, clean])" if row_sums_ok else ""
        raise ValueError(
            f"{name} must be column-stochastic (each column sums to 1, P[c', c] = Pr[noisy c' | clean c]); "
            f"column {worst} sums to {sums[worst]:.6g}{hint}"
        )
    return np.clip(arr, 0.0, 1.0)


def symmetry_rtol(dtype: Any) -> float:
    """The relative symmetry tolerance for a kernel matrix stored in ``dtype``: ``SYMMETRY_RTOL`` (1e-8) for float64,
    else 100 times the dtype's machine epsilon (float32: 1.2e-5), since a matrix assembled from products
    ``J_a J_bᵀ`` rounded in float32 is symmetric only to a few float32 units in the last place."""
    try:
        eps = float(np.finfo(np.dtype(dtype)).eps) if np.issubdtype(np.dtype(dtype), np.floating) else 0.0
    except TypeError:
        eps = 0.0
    return max(SYMMETRY_RTOL, 100.0 * eps)


def check_symmetric(asym: float, scale: float, rtol: float, name: str = "K") -> None:
    """The one symmetry test of a kernel matrix, in memory or scanned in blocks from disk: raise unless
    ``max|K − Kᵀ| = asym`` is at most ``rtol`` times ``max|K| = scale``.

    Raises
    ------
    ValueError
        ``asym > rtol · scale``, with both numbers and the remedy for a K symmetric only up to its rounding.

    Examples
    --------
    >>> check_symmetric(1e-9, 1.0, 1e-8)
    >>> check_symmetric(1e-3, 1.0, 1e-8)
    Traceback (most recent call last):
    ...
    ValueError: K must be symmetric (a kernel matrix k(X, X)); max |K - K^T| = 0.001 exceeds 1e-08 x max |K| = 1e-08. If K is a kernel matrix computed in low precision, symmetric only up to its rounding, pass (K + K.T) / 2
    """
    limit = rtol * max(scale, float(np.finfo(np.float64).tiny))
    if asym > limit:
        raise ValueError(
            f"{name} must be symmetric (a kernel matrix k(X, X)); max |K - K^T| = {asym:.3g} "
            f"exceeds {rtol:g} x max |K| = {limit:.3g}. If K is a kernel matrix computed in low precision, "
            "symmetric only up to its rounding, pass (K + K.T) / 2"
        )


def check_kernel_matrix(K: ArrayLike, name: str = "K", rtol: float | None = None) -> np.ndarray:
    """Return ``K`` as a finite, square, symmetric float64 matrix, or raise.

    Symmetry is checked to a relative tolerance ``rtol`` of the largest entry, by default the one of the dtype
    ``K`` comes in (:func:`symmetry_rtol`: kernel matrices computed in float32 are symmetric only up to float32
    rounding); the returned matrix is exactly symmetrised, ``(K + Kᵀ)/2``.

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        The kernel matrix.
    name : str
        Its name in error messages.
    rtol : float, optional
        Relative symmetry tolerance (default: :func:`symmetry_rtol` of ``K``'s dtype).

    Returns
    -------
    numpy.ndarray, shape (n, n)
        float64, exactly symmetric.

    Raises
    ------
    ValueError
        Not square, not finite, or not symmetric within ``rtol``.
    """
    if rtol is None:
        try:
            rtol = symmetry_rtol(as_numpy(K).dtype)  # a torch tensor's dtype too
        except Exception:  # not array-like: as_float64_array says so below
            rtol = SYMMETRY_RTOL
    arr = as_float64_array(K, name, ndim=2)
    if arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square (n, n) kernel matrix, got shape {arr.shape}")
    check_symmetric(float(np.max(np.abs(arr - arr.T))), float(np.max(np.abs(arr))), rtol, name)
    return 0.5 * (arr + arr.T)


def check_lam(value: Any, name: str = "lam", *, positive: bool = False) -> float:
    """The paper's regularisation strength λ ≥ 0 (or λ > 0), whose ridge λ² I must be finite.

    Parameters
    ----------
    value : float
        λ (the ridge added to the kernel matrix is λ² I, eq. (8)).
    name : str
        Its name in error messages.
    positive : bool
        Refuse λ = 0 too (for the gradient-descent dynamics of Section 4).

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    TypeError
        Not a real number.
    ValueError
        Negative (or zero with ``positive``), not finite, or so large that λ² overflows.

    Examples
    --------
    >>> check_lam(0.5)
    0.5
    """
    if positive:
        v = check_positive(value, name)
    else:
        v = _check_real_scalar(value, name)
        if v < 0.0:
            raise ValueError(
                f"{name} must be >= 0 (it is λ and the ridge is λ² I; a negative λ gives the same "
                f"ridge and is refused to avoid sign confusion), got {v!r}"
            )
    if not math.isfinite(v * v):
        raise ValueError(
            f"{name} = λ = {v!r} is too large: the ridge λ² overflows float64 (λ must be below "
            f"{math.sqrt(np.finfo(np.float64).max):.3g}); for λ² far above ‖K‖ the KRR predictor is ≈ K ỹ / λ²"
        )
    return v


def as_labels(labels: ArrayLike, name: str = "labels") -> np.ndarray:
    """Integer labels (classes, or ±1) as an int64 vector.

    Parameters
    ----------
    labels : ArrayLike, shape (n,)
        Integer labels (floats with integral values are accepted).
    name : str
        Their name in error messages.

    Returns
    -------
    numpy.ndarray, shape (n,)
        int64.

    Raises
    ------
    TypeError
        Labels that are not integers.
    ValueError
        Not one-dimensional.

    Examples
    --------
    >>> as_labels([1.0, -1.0])
    array([ 1, -1])
    """
    arr = as_numpy(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of labels, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{name} must hold integer labels, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def check_class_labels(labels: ArrayLike, num_classes: int, name: str = "labels") -> np.ndarray:
    """Class labels c ∈ {0, …, K − 1} (Section 3.1), as an int64 vector.

    Parameters
    ----------
    labels : ArrayLike, shape (n,)
        Integer labels (floats with integral values are accepted).
    num_classes : int
        K.
    name : str
        Their name in error messages.

    Returns
    -------
    numpy.ndarray, shape (n,)
        int64.

    Raises
    ------
    TypeError
        Labels that are not integers.
    ValueError
        Not one-dimensional, or a label outside {0, …, K − 1}.

    Examples
    --------
    >>> check_class_labels([0, 2, 1], 3)
    array([0, 2, 1])
    """
    arr = as_labels(labels, name)
    if arr.size and (arr.min() < 0 or arr.max() >= num_classes):
        raise ValueError(
            f"{name} must lie in {{0, ..., {num_classes - 1}}} (K = {num_classes} classes), "
            f"found range [{arr.min()}, {arr.max()}]"
        )
    return arr


def check_binary_labels(y: np.ndarray, name: str = "y") -> None:
    """Binary labels in {−1, +1} (Section 3.1), of any numeric dtype.

    Parameters
    ----------
    y : numpy.ndarray
        The labels.
    name : str
        Their name in the error message.

    Raises
    ------
    ValueError
        A label other than −1 and +1 (the message lists up to five of them).

    Examples
    --------
    >>> check_binary_labels(np.array([1.0, -1.0]))
    """
    if y.size and not np.all(np.isin(y, (-1, 1))):
        bad = np.setdiff1d(np.unique(y), (-1, 1))
        raise ValueError(f"{name} must hold binary labels in {{-1, +1}}, found {bad[:5].tolist()}")


def check_rows(x: ArrayLike, n: int, name: str, ndim: int | tuple[int, ...] = (1, 2)) -> np.ndarray:
    """An array with one row per training point (targets y, coefficients α, a block V), as float64.

    Parameters
    ----------
    x : ArrayLike, shape (n,) or (n, k)
        The array.
    n : int
        The number of training points (the size of the kernel matrix).
    name : str
        Its name in error messages.
    ndim : int or tuple of int
        The allowed numbers of dimensions.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``x``.

    Raises
    ------
    ValueError
        Another number of rows or dimensions, or NaN/Inf entries.

    Examples
    --------
    >>> check_rows([1.0, -1.0], 2, "y").shape
    (2,)
    """
    arr = as_float64_array(x, name, ndim=ndim)
    if arr.shape[0] != n:
        raise ValueError(f"{name} must have n = {n} rows (one per training point, as K), got shape {arr.shape}")
    return arr


def check_output_path(
    path: str | os.PathLike[str],
    option: str,
    *,
    inputs: Mapping[str, str | os.PathLike[str] | None] | None = None,
    overwrite: bool = False,
    made_here: Callable[[Path], bool] | None = None,
) -> Path:
    """The file a command is about to write, checked before any work; returns it as a :class:`~pathlib.Path`.

    Refused (``ValueError`` naming ``option``): a path that is one of the command's ``inputs`` (by name or, where
    both exist, the same file under two names), whatever ``overwrite`` says; a folder; a path whose folder does not
    exist or cannot be written; an existing file, unless ``overwrite`` is true or ``made_here(path)`` says it is
    this command's own earlier output (told by its content, never by its name).

    Parameters
    ----------
    path : str or os.PathLike
        The output file.
    option : str
        The option that named it (``"--out"``), for the messages.
    inputs : mapping of str to path, optional
        The command's input files by option (``None`` values are skipped).
    overwrite : bool
        Whether the user asked to replace an existing file (``--overwrite``).
    made_here : callable, optional
        Tells whether an existing file is this command's own output (read from the file's content).
    """
    out = Path(path)
    for name, given in (inputs or {}).items():
        if given is None:
            continue
        same = out.resolve() == Path(given).resolve()
        if not same and out.exists() and Path(given).exists():
            same = os.path.samefile(out, given)
        if same:
            raise ValueError(
                f"{option} {out} is also {name}: writing it would replace the input it is computed from; "
                "choose another file"
            )
    if out.is_dir():
        raise ValueError(f"{option} {out} is a folder: give a file name")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise ValueError(f"{option} {out}: its folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {out}: its folder {folder} cannot be written")
    if out.exists() and not overwrite and not (made_here is not None and made_here(out)):
        raise ValueError(
            f"{option} {out} exists and was not written by this command: pass --overwrite to replace it, or "
            "choose another file"
        )
    return out


def json_written_with(keys: Collection[str]) -> Callable[[Path], bool]:
    """A ``made_here`` for :func:`check_output_path`: the file is a JSON object with every one of ``keys`` (the
    fields the command writes), i.e. an earlier output of the same command."""

    def made_here(path: Path) -> bool:
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return False
        return isinstance(found, dict) and all(key in found for key in keys)

    return made_here
