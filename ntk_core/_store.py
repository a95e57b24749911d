"""All persistence: atomic writes, fingerprints, identity and integrity, verified loads, locks.

Every artifact that ntk_core writes to disk (experiment results and units, Gram
tiles, training checkpoints) is ONE file written by :func:`save` and read back by
:func:`load`. The file is a NumPy ``.npz`` archive (never pickled) that holds

* the arrays and byte blobs the caller stored,
* a JSON header with the artifact's **identity** (everything that determines its
  content: config, code fingerprint, data fingerprints, model, inputs), the
  identity's SHA-256, and the **integrity** record of every array (SHA-256 of
  its bytes, shape, dtype) and blob (SHA-256, size), plus free ``meta``, and
* in the zip comment (the file's last 64 bytes), the SHA-256 of all the rest,
  so that a change of any byte anywhere is detected.

On :func:`load` both are verified:

* file missing, or identity differs ("not mine"): ``None``, the file is left as
  it is; the caller recomputes (and overwrites), never mixes;
* damaged (unreadable archive, bad checksum, wrong shape or dtype, NaN/Inf where
  finite numbers are required, a header that does not match its own checksum):
  the file is moved aside to ``<name>.damaged-<UTC time>``, a
  :class:`DamagedArtifactWarning` names the file and what was wrong, and
  ``None`` is returned so that the caller recomputes. A damaged file never
  blocks a resume and is never accepted.

Examples
--------
>>> import tempfile, numpy as np
>>> from pathlib import Path
>>> from ntk_core import _store
>>> path = Path(tempfile.mkdtemp()) / "unit.npz"
>>> _store.save(path, {"experiment": "demo", "seed": 0}, arrays={"w": np.arange(3.0)})
>>> _store.load(path, {"experiment": "demo", "seed": 0}).arrays["w"]
array([0., 1., 2.])
>>> _store.load(path, {"experiment": "demo", "seed": 1}) is None   # not mine
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import io
import json
import math
import os
import re
import secrets
import time
import warnings
import zipfile
import zlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePath
from typing import Any

import numpy as np

__all__ = [
    "FORMAT",
    "DamagedArtifactWarning",
    "Stored",
    "atomic_path",
    "atomic_write_bytes",
    "file_digest",
    "canonical",
    "fingerprint",
    "function_fingerprint",
    "sha256_bytes",
    "save",
    "load",
    "set_aside",
    "file_lock",
    "TileStore",
]

#: Version of the file layout written by :func:`save`; a file of another version is "not mine".
FORMAT = 1

_HEADER = "__header__"
_SEAL_LEN = 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class DamagedArtifactWarning(UserWarning):
    """A persisted file was damaged (its bytes, shape, dtype or values); it was moved aside and is recomputed."""


@dataclass
class Stored:
    """What :func:`load` returns for an intact file whose identity matches.

    Attributes
    ----------
    path : pathlib.Path
        The file read.
    identity : dict
        The identity recorded in the file (canonical JSON form: tuples as lists).
    arrays : dict[str, numpy.ndarray]
        The arrays, bit for bit as saved (same dtype and shape).
    blobs : dict[str, bytes]
        The byte blobs, as saved.
    meta : dict
        Free metadata stored beside the identity (not part of it, not compared).
    """

    path: Path
    identity: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- bytes on disk


def _remove_orphans(folder: Path, name: str) -> None:
    """Remove the temporary files of earlier writes of ``name`` in ``folder`` whose process is gone (killed
    mid-write, ``kill -9``: nothing could clean up then); those of a process still running are left alone."""
    for part in folder.glob(f".{_glob_escape(name)}.*.part"):
        pid = part.name[len(name) + 2 :].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                part.unlink()
        except PermissionError:  # another user's process, alive
            continue


def _glob_escape(name: str) -> str:
    """``name`` with the characters :meth:`pathlib.Path.glob` reads as patterns escaped."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _no_space(err: OSError, path: Path, needed: int | None) -> OSError:
    """A disk-full error that names the folder, what is free there and, where known, what was needed."""
    try:
        free = f"{os.statvfs(path.parent).f_bavail * os.statvfs(path.parent).f_frsize:,} bytes free"
    except OSError:
        free = "free space unknown"
    wanted = f", {needed:,} needed" if needed is not None else ""
    return OSError(
        errno.ENOSPC,
        f"no space left on the device of {path.parent} while writing {path.name} ({free}{wanted}); free space "
        "there or write elsewhere (the file was left as it was)",
        str(path),
    )


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, needed: int | None = None) -> Iterator[Path]:
    """A temporary path to write ``path`` through: a reader sees either the old file or the whole new one.

    The block writes the temporary file (for example a download, verified before
    the block ends); when it ends without an error the file is ``fsync``-ed and
    renamed over ``path`` with :func:`os.replace` (atomic on POSIX). On an
    error (a block that creates no file is one) ``path`` is left as it was and
    no temporary file is left. Missing parent folders are created.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file.
    needed : int, optional
        The bytes the file will take, for the message of a full disk (``OSError`` with ``errno.ENOSPC`` that names
        the folder, the bytes free and these).

    Yields
    ------
    pathlib.Path
        The temporary file, in the folder of ``path``; the block creates it. The temporary files of earlier
        writes of ``path`` whose process is gone (killed mid-write) are removed first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path.parent, path.name)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.part"
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            raise _no_space(err, path, needed) from err
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable; not all file systems allow it
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes | memoryview, *more: bytes | memoryview) -> None:
    """Write ``data`` (then each of ``more``, in order) to ``path`` so that a reader sees either the old file or
    the whole new one.

    Through :func:`atomic_path`: the bytes go to a temporary file in the same
    folder, are flushed and ``fsync``-ed, then renamed over ``path``. A failure
    at any point removes the temporary file. The file gets the mode of a
    normally created file (``0o666`` less the umask, usually ``0o644``), not
    ``mkstemp``'s ``0o600``. Missing parent folders are created.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file.
    data : bytes or memoryview
        The content, or its first part (parts are written as they are: a view of a large buffer is not copied).
    *more : bytes or memoryview
        The parts that follow it.
    """
    parts = (data, *more)
    with atomic_path(path, needed=sum(memoryview(p).nbytes for p in parts)) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as fh:
            for part in parts:
                fh.write(part)


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes, read in 1 MiB chunks (files larger than memory are fine).

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    algorithm : str
        A :mod:`hashlib` algorithm (``"md5"`` only to check a published checksum).

    Returns
    -------
    str
        Hex digits.
    """
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes | memoryview) -> str:
    """SHA-256 of ``data`` as 64 hex digits.

    Parameters
    ----------
    data : bytes or memoryview
        The bytes.

    Returns
    -------
    str
        64 hex digits.
    """
    return hashlib.sha256(data).hexdigest()


def tile_side(
    budget: float, n_max: int, *, per_pair: float, per_row: float = 0.0, fixed: float = 0.0, minimum: int = 1
) -> int:
    """The side t of the largest tile (or block of rows) whose working memory fits a budget: the largest t with
    ``fixed + 2·t·per_row + t²·per_pair ≤ budget`` (bytes), between ``min(minimum, n_max)`` and ``n_max``.

    The one memory-budget → tile-size rule of the package: the NTK's tiles (``per_pair`` the bytes of a pair of
    examples, ``per_row`` those of one example's Jacobian), the factor's tiles (``(n·t + 4t²) × 8`` bytes), the
    kernel file's tiles and the out-of-core solver's blocks of rows (``per_pair = 0``).

    Examples
    --------
    >>> tile_side(16 * 1000**2, 10_000, per_pair=16)      # a float64 tile and its mirror: 16 t² bytes
    1000
    >>> tile_side(8 * 1000 * 50, 10_000, per_pair=0, per_row=4 * 50)   # rows of 50 float64 columns
    1000
    """
    avail = budget - fixed
    if avail <= 0:
        t = 0.0
    elif per_pair > 0:
        b = 2.0 * per_row
        t = (-b + math.sqrt(b * b + 4.0 * per_pair * avail)) / (2.0 * per_pair)
    else:
        t = avail / max(2.0 * per_row, 1.0)
    return int(max(min(minimum, n_max), min(n_max, math.floor(t))))


# --------------------------------------------------------------------------- fingerprints


def _array_fingerprint(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    if a.dtype.hasobject:
        raise TypeError("cannot fingerprint an object array")
    h = hashlib.sha256()
    h.update(a.dtype.str.encode())
    h.update(repr(tuple(int(n) for n in a.shape)).encode())
    h.update(a.reshape(-1).view(np.uint8).data)  # the bytes in place: no copy of a large array
    return h.hexdigest()


def _as_numpy(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "detach") and hasattr(value, "numpy"):
        return np.asarray(value.detach().cpu().resolve_conj().resolve_neg().numpy())
    return None


def canonical(value: Any) -> Any:
    """``value`` as plain JSON data: the form in which identities are compared and stored.

    Dataclasses become dicts, tuples lists, dict keys strings, paths strings,
    NumPy scalars Python numbers, and arrays / tensors ``{"array": <fingerprint>}``.
    Anything else (an arbitrary object whose ``str`` might hold a memory address)
    raises ``TypeError``: an identity must be exact.

    Parameters
    ----------
    value : object
        Plain data, dataclasses, paths, arrays or tensors.

    Returns
    -------
    object
        JSON-serialisable data.

    Raises
    ------
    TypeError
        For a value that has no canonical form.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, np.generic):
        return canonical(value.item())
    array = _as_numpy(value)
    if array is not None:
        return {"array": _array_fingerprint(array)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": sha256_bytes(bytes(value))}
    if type(value).__module__ == "torch" and type(value).__name__ in ("dtype", "device"):
        return str(value)
    raise TypeError(f"no canonical (JSON) form for a {type(value).__name__}: {value!r:.80}")


def _dumps(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces; floats by ``repr`` (exact); NaN/Inf as strings."""

    def fix(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return {"float": repr(v)}
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    return json.dumps(fix(canonical(value)), sort_keys=True, separators=(",", ":"), allow_nan=False)


def fingerprint(obj: Any) -> str:
    """SHA-256 (64 hex digits) that changes whenever ``obj`` changes.

    For a NumPy array or a torch tensor: of its dtype, shape and bytes (so
    ``float32`` and ``float64`` copies of the same values differ). For plain data
    (dicts, lists, tuples, numbers, strings, dataclasses, possibly holding arrays):
    of its canonical JSON (:func:`canonical`; key order does not matter, a tuple
    and a list with the same items are equal).

    Parameters
    ----------
    obj : object
        An array, a tensor, or plain data (see :func:`canonical`).

    Returns
    -------
    str
        64 hex digits.

    Examples
    --------
    >>> fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": (1, 2), "a": 1})
    True
    >>> import numpy as np
    >>> fingerprint(np.zeros(2)) == fingerprint(np.zeros(2, dtype=np.float32))
    False
    """
    array = _as_numpy(obj)
    if array is not None:
        return _array_fingerprint(array)
    return sha256_bytes(_dumps(obj).encode())


# --------------------------------------------------------------------------- save / load


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{what} name must match {_NAME.pattern}, got {name!r}")


def save(
    path: str | os.PathLike[str],
    identity: Mapping[str, Any],
    arrays: Mapping[str, Any] | None = None,
    blobs: Mapping[str, bytes] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> None:
    """Write one artifact: ``arrays`` and ``blobs`` with their ``identity`` and checksums, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        Destination (conventionally ``*.npz``); replaced atomically if it exists.
    identity : mapping
        Everything that determines the content (see :func:`canonical` for what it may hold).
    arrays : mapping of str to array-like, optional
        Numeric arrays (NumPy arrays or torch tensors; no object dtype). Saved bit for bit.
    blobs : mapping of str to bytes, optional
        Opaque byte strings (for example a ``torch.save`` buffer; never a pickle to be unpickled).
    meta : mapping, optional
        Free JSON metadata that is stored but not part of the identity.

    Raises
    ------
    TypeError
        An object array, a non-bytes blob, or an identity/meta without a JSON form.
    ValueError
        An array or blob name that is not a plain file-name token.
    """
    arrays = dict(arrays or {})
    blobs = dict(blobs or {})
    members: dict[str, np.ndarray] = {}
    record_arrays: dict[str, Any] = {}
    for name, value in arrays.items():
        _check_name(name, "array")
        a = _as_numpy(value)
        a = np.ascontiguousarray(a if a is not None else np.asarray(value))
        if a.dtype.hasobject:
            raise TypeError(f"array {name!r} has dtype object; only numeric arrays are stored (no pickle)")
        record_arrays[name] = {"sha256": _array_fingerprint(a), "shape": list(a.shape), "dtype": a.dtype.str}
        members[f"a.{name}"] = a
    record_blobs: dict[str, Any] = {}
    for name, blob in blobs.items():
        _check_name(name, "blob")
        if not isinstance(blob, (bytes, bytearray)):
            raise TypeError(f"blob {name!r} must be bytes, got {type(blob).__name__}")
        record_blobs[name] = {"sha256": sha256_bytes(bytes(blob)), "size": len(blob)}
        members[f"b.{name}"] = np.frombuffer(bytes(blob), dtype=np.uint8)
    header: dict[str, Any] = {
        "format": FORMAT,
        "identity": json.loads(_dumps(identity)),
        "identity_sha256": fingerprint(identity),
        "arrays": record_arrays,
        "blobs": record_blobs,
        "meta": json.loads(_dumps(meta or {})),
    }
    header["header_sha256"] = sha256_bytes(_dumps(header).encode())
    members[_HEADER] = np.frombuffer(_dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **members)  # type: ignore[arg-type]
    archive = buffer.getbuffer()  # the archive in place: a tile of a factor is hundreds of MB
    body, tail = _seal_parts(archive)
    atomic_write_bytes(path, body, tail)
    del body, archive  # release the buffer's export


def _seal_parts(archive: bytes | memoryview) -> tuple[memoryview, bytes]:
    """The sealed file as two parts: the archive without its last two bytes (a view, not a copy) and the new
    end, the comment length and the SHA-256 of the whole archive as its zip comment (the file's last 64 bytes).

    A zip archive ends with its end-of-central-directory record, whose last two
    bytes give the length of the comment that follows. The seal covers every
    byte of the archive, so that any change anywhere in the file is detected.
    """
    view = memoryview(archive)
    if bytes(view[-2:]) != b"\x00\x00":
        raise ValueError("unexpected archive layout: it already has a comment")
    return view[:-2], _SEAL_LEN.to_bytes(2, "little") + sha256_bytes(view).encode()


def _unseal(data: bytes) -> bytes:
    if len(data) < 22 + _SEAL_LEN or data[-_SEAL_LEN - 2 : -_SEAL_LEN] != _SEAL_LEN.to_bytes(2, "little"):
        raise _Damaged("the file is truncated or has no checksum seal")
    h = hashlib.sha256(memoryview(data)[: -_SEAL_LEN - 2])  # the archive as sealed, hashed in place (no copy)
    h.update(b"\x00\x00")
    if h.hexdigest().encode() != data[-_SEAL_LEN:]:
        raise _Damaged("checksum mismatch: the file's bytes changed")
    return data  # a zip reader skips the comment: the sealed file is read as it is


class _Damaged(Exception):
    pass


def _undump(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"float"} and value["float"] in ("nan", "inf", "-inf"):
            return float(value["float"])
        return {k: _undump(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_undump(v) for v in value]
    return value


def _read(
    path: Path,
    identity_sha: str,
    finite: bool | Collection[str],
    expect: Mapping[str, tuple[tuple[int | None, ...] | None, Any]] | None,
) -> Stored | None:
    data = path.read_bytes()
    if not data:
        raise _Damaged("the file is empty")
    archive = _unseal(data)
    try:
        with np.load(io.BytesIO(archive), allow_pickle=False) as npz:
            members = {name: npz[name] for name in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, zlib.error) as err:
        raise _Damaged(f"not a readable archive ({type(err).__name__}: {err})") from None
    if _HEADER not in members:
        raise _Damaged("no header")
    try:
        header = json.loads(members.pop(_HEADER).tobytes().decode())
        claimed = header.pop("header_sha256")
    except (ValueError, UnicodeDecodeError, KeyError, AttributeError, TypeError) as err:
        raise _Damaged(f"unreadable header ({err})") from None
    if sha256_bytes(_dumps(header).encode()) != claimed:
        raise _Damaged("the header does not match its checksum")
    if header.get("format") != FORMAT or header.get("identity_sha256") != identity_sha:
        return None  # another identity (or layout): not mine
    arrays: dict[str, np.ndarray] = {}
    for name, rec in header["arrays"].items():
        a = members.pop(f"a.{name}", None)
        if a is None:
            raise _Damaged(f"array {name!r} is missing")
        if list(a.shape) != rec["shape"] or a.dtype.str != rec["dtype"]:
            raise _Damaged(
                f"array {name!r} has shape {a.shape} dtype {a.dtype.str}, recorded {tuple(rec['shape'])} {rec['dtype']}"
            )
        if _array_fingerprint(a) != rec["sha256"]:
            raise _Damaged(f"array {name!r}: checksum mismatch (bytes changed)")
        arrays[name] = a
    blobs: dict[str, bytes] = {}
    for name, rec in header["blobs"].items():
        b = members.pop(f"b.{name}", None)
        if b is None:
            raise _Damaged(f"blob {name!r} is missing")
        raw = b.tobytes()
        if len(raw) != rec["size"] or sha256_bytes(raw) != rec["sha256"]:
            raise _Damaged(f"blob {name!r}: checksum mismatch (bytes changed)")
        blobs[name] = raw
    if members:
        raise _Damaged(f"unrecorded members {sorted(members)}")
    check = set(arrays) if finite is True else set() if finite is False else set(finite)
    for name in sorted(check & set(arrays)):
        a = arrays[name]
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            raise _Damaged(f"array {name!r} holds NaN or Inf")
    for name, (shape, dtype) in (expect or {}).items():
        if name not in arrays:
            raise _Damaged(f"expected array {name!r} is missing")
        a = arrays[name]
        if shape is not None and (
            len(shape) != a.ndim or any(s is not None and s != n for s, n in zip(shape, a.shape))
        ):
            raise _Damaged(f"array {name!r} has shape {a.shape}, expected {tuple(shape)}")
        if dtype is not None and a.dtype != np.dtype(dtype):
            raise _Damaged(f"array {name!r} has dtype {a.dtype}, expected {np.dtype(dtype)}")
    return Stored(
        path=path, identity=_undump(header["identity"]), arrays=arrays, blobs=blobs, meta=_undump(header["meta"])
    )


def load(
    path: str | os.PathLike[str],
    identity: Mapping[str, Any],
    *,
    finite: bool | Collection[str] = True,
    expect: Mapping[str, tuple[tuple[int | None, ...] | None, Any]] | None = None,
) -> Stored | None:
    """Read back an artifact written by :func:`save`, verifying its identity and integrity.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    identity : mapping
        The identity the caller needs; compared through :func:`fingerprint`.
    finite : bool or collection of str, default True
        Require finite values (no NaN/Inf) in every floating array (``True``), in
        none (``False``), or in the arrays named.
    expect : mapping of str to (shape, dtype), optional
        Arrays that must be present with this shape (``None`` entries: any
        length; ``None``: any shape) and dtype (``None``: any).

    Returns
    -------
    Stored or None
        The content; ``None`` when the file is missing, belongs to another
        identity (the file is left alone), or is damaged (then it is moved aside
        to ``<name>.damaged-<UTC time>`` and a :class:`DamagedArtifactWarning`
        names it and says what was wrong). On ``None`` the caller recomputes.
    """
    path = Path(path)
    try:
        return _read(path, fingerprint(identity), finite, expect)
    except FileNotFoundError:
        return None
    except _Damaged as err:
        set_aside(path, str(err))
        return None
    except (IsADirectoryError, PermissionError, MemoryError):  # not the file's fault
        raise
    except Exception as err:  # any other failure to parse is damage too
        set_aside(path, f"unreadable ({type(err).__name__}: {err})")
        return None


class TileStore:
    """The finished tiles (i, j) of one tiled computation, one :func:`save` file each, in a folder named by the
    hash of everything that determines them (``identity``): the store behind the empirical NTK's checkpointed
    tiles and the tiled Cholesky factor's.

    A killed computation resumes from the tiles on disk; a tile of another identity is never read (its folder
    is another), and a damaged one is set aside with a :class:`DamagedArtifactWarning` and reported missing, so
    that the caller computes it again. Every file carries the identity and its tile index.

    Parameters
    ----------
    root : str or os.PathLike
        The folder under which the store's own folder is made.
    identity : mapping
        What determines the tiles (through :func:`fingerprint`).
    name : str
        The file name of tile (i, j), a format string of ``i`` and ``j``.
    meta : mapping, optional
        Written once to ``meta.json`` for people browsing the folder (never read back).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        identity: Mapping[str, Any],
        *,
        name: str = "tile_{i:05d}_{j:05d}.npz",
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.identity = dict(identity)
        self.dir = Path(root) / fingerprint(self.identity)[:32]
        self._name = name
        if meta is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
            meta_path = self.dir / "meta.json"
            if not meta_path.exists():
                atomic_write_bytes(meta_path, json.dumps(meta, indent=1, default=str).encode())

    def path(self, i: int, j: int) -> Path:
        """The file of tile (i, j)."""
        return self.dir / self._name.format(i=i, j=j)

    def has(self, i: int, j: int) -> bool:
        """Whether tile (i, j) has a file (not yet verified: :meth:`load` does that)."""
        return self.path(i, j).exists()

    def load(self, i: int, j: int, expect: Mapping[str, tuple[tuple[int | None, ...] | None, Any]]) -> Stored | None:
        """Tile (i, j), verified (:func:`load`, with ``expect``), or None: missing or damaged (set aside)."""
        return load(self.path(i, j), {**self.identity, "tile": [i, j]}, expect=expect)

    def save(self, i: int, j: int, arrays: Mapping[str, np.ndarray]) -> None:
        """Write tile (i, j) (:func:`save`: atomically, with the identity and the tile index)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        save(self.path(i, j), {**self.identity, "tile": [i, j]}, arrays=dict(arrays))


def set_aside(path: str | os.PathLike[str], reason: str) -> Path | None:
    """Move a damaged ``path`` to ``<name>.damaged-<UTC time>`` and warn, naming the file and ``reason``.

    Used by :func:`load`; other readers of files (downloads) call it for the same behaviour.

    Parameters
    ----------
    path : str or os.PathLike
        The damaged file.
    reason : str
        What is wrong with it (in the warning).

    Returns
    -------
    pathlib.Path or None
        The new path (``None`` if the file could only be deleted, or was gone).
    """
    path = Path(path)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    moved: Path | None = target
    try:
        os.replace(path, target)
        where = f"moved aside to {target.name}"
    except FileNotFoundError:
        moved, where = None, "already gone"
    except OSError:
        moved = None
        try:
            path.unlink()
            where = "deleted (could not be moved aside)"
        except OSError as err:
            where = f"could not be moved or deleted ({err})"
    warnings.warn(
        f"damaged file {path}: {reason}; {where}; it will be recomputed", DamagedArtifactWarning, stacklevel=3
    )
    return moved


# --------------------------------------------------------------------------- locks


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str], *, timeout: float | None = None, poll: float = 0.05) -> Iterator[Path]:
    """Hold an exclusive ``fcntl.flock`` on ``path`` (conventionally ``<something>.lock``) while inside.

    Another process (or another open of the same file in this process) that asks
    for the same lock waits until it is released; the lock is released on exit,
    on an exception and when the process dies (the kernel drops it). The lock file
    is created if missing and left in place (deleting it would race with waiters).

    Parameters
    ----------
    path : str or os.PathLike
        The lock file.
    timeout : float, optional
        Seconds to wait before ``TimeoutError``; ``None`` waits forever.
    poll : float
        Seconds between attempts when ``timeout`` is given.

    Raises
    ------
    TimeoutError
        When ``timeout`` seconds pass without getting the lock.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as err:
                    if err.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"could not lock {path} within {timeout} s") from None
                    time.sleep(poll)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def function_fingerprint(fn: Any) -> str:
    """SHA-256 of what a function computes, by its content: its code (bytecode, constants and names, nested
    functions' code included), its default arguments, the values its closure holds and the values of the module
    globals it reads that are plain data or arrays (numbers, strings, tuples, arrays: a ``GAMMA = 3`` it uses), and,
    for a ``functools.partial``, the wrapped function's with the bound arguments. Two lambdas with other constants
    or closures therefore differ though their names are the same; the same function in two processes agrees.

    A callable whose code cannot be read (a builtin, an object with ``__call__``) is fingerprinted by its ``repr``,
    which names its address: never taken for another one, at the price of never being recognised in another
    process either."""
    import functools
    import types

    def plain(value: Any) -> Any:
        if _as_numpy(value) is not None:
            return {"array": fingerprint(value)}
        if isinstance(value, (bool, int, float, str, type(None))):
            return value
        if isinstance(value, (tuple, list)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if callable(value):
            return {"function": function_fingerprint(value)}
        return {"repr": repr(value)}

    def code(c: types.CodeType) -> Any:
        consts = [code(k) if isinstance(k, types.CodeType) else repr(k) for k in c.co_consts]
        return {"bytes": c.co_code.hex(), "consts": consts, "names": list(c.co_names), "name": c.co_qualname}

    if isinstance(fn, functools.partial):
        content: Any = {"partial": function_fingerprint(fn.func), "args": plain(fn.args), "kw": plain(fn.keywords)}
    elif isinstance(fn, types.FunctionType):
        reads = {
            name: plain(fn.__globals__[name])
            for name in fn.__code__.co_names
            if name in fn.__globals__
            and (
                isinstance(fn.__globals__[name], (bool, int, float, str, tuple))
                or _as_numpy(fn.__globals__[name]) is not None
            )
        }
        content = {
            "module": fn.__module__,
            "code": code(fn.__code__),
            "defaults": plain(fn.__defaults__),
            "kwdefaults": plain(fn.__kwdefaults__),
            "closure": [plain(cell.cell_contents) for cell in fn.__closure__ or ()],
            "globals": reads,
        }
    else:
        content = {"repr": repr(fn)}
    return sha256_bytes(_dumps(content).encode())
