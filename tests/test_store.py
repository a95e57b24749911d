"""ntk_core._store: atomic writes, fingerprints, identity and integrity checks, locks."""

from __future__ import annotations

import io
import json
import os
import stat
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from ntk_core import _store
from ntk_core._store import DamagedArtifactWarning

IDENTITY = {"experiment": "demo", "config": {"lam": 0.5, "seeds": (0, 1)}, "code": "abc"}


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal((4, 3)),
        "n": np.arange(5, dtype=np.int32),
        "f32": rng.standard_normal(7).astype(np.float32),
    }


def _write(path: Path, **kw) -> None:
    _store.save(
        path,
        IDENTITY,
        arrays=kw.get("arrays", _arrays()),
        blobs=kw.get("blobs", {"b": b"\x00\x01raw"}),
        meta=kw.get("meta", {"note": "hi"}),
    )


def _damaged(path: Path, **kw) -> str:
    """Load, expect damage: None, a warning naming the file, the file moved aside. Returns the message."""
    with pytest.warns(DamagedArtifactWarning) as record:
        assert _store.load(path, IDENTITY, **kw) is None
    message = str(record[0].message)
    assert str(path) in message
    assert not path.exists()
    assert list(path.parent.glob(path.name + ".damaged-*"))
    return message


def test_round_trip_is_exact(tmp_path):
    path = tmp_path / "a.npz"
    arrays = _arrays()
    arrays["odd"] = np.array([0.1 + 0.2, -0.0, 1e-310, np.pi], dtype=np.float64)
    _store.save(path, IDENTITY, arrays=arrays, blobs={"b": b"\x00\xffx"}, meta={"when": 1.0, "nan": float("nan")})
    stored = _store.load(path, IDENTITY)
    assert stored is not None and stored.path == path
    assert set(stored.arrays) == set(arrays)
    for name, a in arrays.items():
        assert stored.arrays[name].dtype == a.dtype and stored.arrays[name].shape == a.shape
        assert stored.arrays[name].tobytes() == a.tobytes()  # every bit, including -0.0 and subnormals
    assert stored.blobs == {"b": b"\x00\xffx"}
    assert stored.meta["when"] == 1.0 and np.isnan(stored.meta["nan"])
    assert stored.identity == {"experiment": "demo", "config": {"lam": 0.5, "seeds": [0, 1]}, "code": "abc"}


def test_torch_tensors_are_stored_as_arrays(tmp_path):
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    _store.save(tmp_path / "t.npz", IDENTITY, arrays={"t": t})
    stored = _store.load(tmp_path / "t.npz", IDENTITY)
    assert stored is not None
    np.testing.assert_array_equal(stored.arrays["t"], t.numpy())


def test_missing_file_is_none(tmp_path):
    assert _store.load(tmp_path / "nope.npz", IDENTITY) is None


def test_another_identity_is_not_mine_and_the_file_is_left(tmp_path):
    path = tmp_path / "a.npz"
    _write(path)
    before = path.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _store.load(path, {**IDENTITY, "code": "xyz"}) is None
        assert _store.load(path, {**IDENTITY, "config": {"lam": 0.5, "seeds": (0, 2)}}) is None
    assert path.read_bytes() == before
    assert _store.load(path, IDENTITY) is not None


def test_fingerprint_is_canonical_and_sensitive():
    fp = _store.fingerprint
    assert fp({"a": 1, "b": (1, 2)}) == fp({"b": [1, 2], "a": 1})
    assert fp({"a": 1}) != fp({"a": 1.0000000000000002})
    assert fp(np.zeros(3)) != fp(np.zeros(3, dtype=np.float32))
    assert fp(np.zeros(3)) != fp(np.zeros((3, 1)))
    assert fp(np.arange(3.0)) == fp(torch.arange(3, dtype=torch.float64))
    assert fp({"x": np.arange(3.0)}) != fp({"x": np.arange(1.0, 4.0)})
    assert fp({"v": float("nan")}) == fp({"v": float("nan")})
    with pytest.raises(TypeError, match="canonical"):
        fp({"obj": object()})
    # a non-contiguous view fingerprints like its contiguous copy
    a = np.arange(12.0).reshape(3, 4)
    assert fp(a.T) == fp(np.ascontiguousarray(a.T))


@pytest.mark.parametrize("kind", ["empty", "truncate-half", "truncate-1", "garbage", "zero-page"])
def test_damaged_bytes_are_detected_named_and_set_aside(tmp_path, kind):
    path = tmp_path / "a.npz"
    _write(path)
    data = path.read_bytes()
    damaged = {
        "empty": b"",
        "truncate-half": data[: len(data) // 2],
        "truncate-1": data[:-1],
        "garbage": b"not an archive at all",
        "zero-page": data[:100] + bytes(200) + data[300:],
    }[kind]
    path.write_bytes(damaged)
    _damaged(path)
    _write(path)  # the caller recomputes and writes again: the resume is not blocked
    assert _store.load(path, IDENTITY) is not None


def test_every_single_byte_flip_is_detected(tmp_path):
    path = tmp_path / "a.npz"
    arrays = {"x": np.arange(6.0)}
    _store.save(path, IDENTITY, arrays=arrays, blobs={"b": b"blob"})
    data = path.read_bytes()
    for i in range(len(data)):
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1 :])
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            stored = _store.load(path, IDENTITY)
        assert stored is None, f"flip at byte {i} of {len(data)} not detected"
        assert any(issubclass(w.category, DamagedArtifactWarning) and str(path) in str(w.message) for w in record), i
        for p in tmp_path.glob("a.npz.damaged-*"):
            p.unlink()


def _members(path: Path) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(_store._unseal(path.read_bytes())), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _write_members(path: Path, members: dict[str, np.ndarray]) -> None:
    """Write an archive with a valid seal: what a buggy writer (not a damaged disk) might leave."""
    buffer = io.BytesIO()
    np.savez(buffer, **members)
    body, tail = _store._seal_parts(buffer.getvalue())
    path.write_bytes(bytes(body) + tail)


def _rewrite_member(path: Path, name: str, value: np.ndarray) -> None:
    """Replace one member of the archive, leaving the header (and its checksums) as they were."""
    members = _members(path)
    members[name] = value
    _write_members(path, members)


@pytest.mark.parametrize(
    "value,what",
    [
        (np.arange(12.0).reshape(3, 4), "shape"),
        (np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32), "dtype"),
        (np.full((4, 3), np.nan), "checksum"),
        (np.random.default_rng(1).standard_normal((4, 3)), "checksum"),
    ],
)
def test_wrong_shape_dtype_or_values_are_detected(tmp_path, value, what):
    path = tmp_path / "a.npz"
    _write(path)
    _rewrite_member(path, "a.x", value)
    assert what in _damaged(path)


def test_missing_member_and_edited_header_are_detected(tmp_path):
    path = tmp_path / "a.npz"
    _write(path)
    members = _members(path)
    del members["a.n"]
    _write_members(path, members)
    assert "missing" in _damaged(path)

    _write(path)
    header = _members(path)["__header__"].tobytes().replace(b'"note":"hi"', b'"note":"ho"')
    _rewrite_member(path, "__header__", np.frombuffer(header, dtype=np.uint8))
    assert "header" in _damaged(path)


def test_non_finite_values_are_damage_unless_allowed(tmp_path):
    path = tmp_path / "a.npz"
    _store.save(path, IDENTITY, arrays={"x": np.array([1.0, np.nan]), "ok": np.ones(2)})
    stored = _store.load(path, IDENTITY, finite=False)
    assert stored is not None and np.isnan(stored.arrays["x"][1])
    assert _store.load(path, IDENTITY, finite=["ok"]) is not None
    assert "NaN" in _damaged(path, finite=True)


def test_expected_shape_and_dtype(tmp_path):
    path = tmp_path / "a.npz"
    _write(path)
    assert _store.load(path, IDENTITY, expect={"x": ((4, None), np.float64)}) is not None
    assert "expected" in _damaged(path, expect={"x": ((5, 3), None)})
    _write(path)
    assert "expected" in _damaged(path, expect={"x": (None, np.float32)})
    _write(path)
    assert "missing" in _damaged(path, expect={"y": (None, None)})


def test_no_pickle_ever(tmp_path):
    with pytest.raises(TypeError, match="object"):
        _store.save(tmp_path / "a.npz", IDENTITY, arrays={"o": np.array([{}, 1], dtype=object)})
    with pytest.raises(TypeError, match="bytes"):
        _store.save(tmp_path / "a.npz", IDENTITY, blobs={"b": "text"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="name"):
        _store.save(tmp_path / "a.npz", IDENTITY, arrays={"../x": np.ones(1)})
    assert not (tmp_path / "a.npz").exists()


def test_file_mode_is_that_of_a_normal_file(tmp_path):
    path = tmp_path / "a.npz"
    old = os.umask(0o022)
    try:
        _write(path)
        _store.atomic_write_bytes(tmp_path / "b.bin", b"x")
    finally:
        os.umask(old)
    for p in (path, tmp_path / "b.bin"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o644


def test_atomic_write_of_parts_writes_them_in_order_without_copying_a_view(tmp_path):
    big = bytearray(b"abc" * 1000)
    view = memoryview(big)[1:-1]
    _store.atomic_write_bytes(tmp_path / "p.bin", view, b"|", b"end")
    assert (tmp_path / "p.bin").read_bytes() == bytes(big[1:-1]) + b"|end"
    # a sealed file written from views of its archive is read back, and any byte changed in it is found
    path = tmp_path / "a.npz"
    _write(path, arrays={"x": np.arange(5.0)})
    assert _store.load(path, IDENTITY).arrays["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.warns(_store.DamagedArtifactWarning):
        assert _store.load(path, IDENTITY) is None


def test_a_crash_mid_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "a.npz"
    _write(path)
    before = path.read_bytes()

    def crash(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="disk gone"):
        _write(path, arrays={"x": np.zeros(3)})
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz"]
    assert path.read_bytes() == before

    def interrupted(src, dst):  # noqa: ANN001
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _store.atomic_write_bytes(tmp_path / "new.bin", b"data")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz"]


def test_file_lock_excludes_and_releases(tmp_path):
    lock = tmp_path / "x.lock"
    order: list[str] = []
    with _store.file_lock(lock):
        with pytest.raises(TimeoutError, match="x.lock"):
            with _store.file_lock(lock, timeout=0.1):
                pass

        def other() -> None:
            with _store.file_lock(lock):
                order.append("other")

        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(0.2)
        order.append("first")
    thread.join(5)
    assert order == ["first", "other"]
    with _store.file_lock(lock, timeout=0.1):  # released after an exception too
        pass


def test_atomic_path_renames_only_a_finished_file(tmp_path):
    target = tmp_path / "sub" / "f.bin"
    with _store.atomic_path(target) as tmp:
        assert tmp.parent == target.parent and not target.exists()
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new"
    with pytest.raises(RuntimeError, match="verify failed"):
        with _store.atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("verify failed")
    assert target.read_bytes() == b"new" and sorted(p.name for p in target.parent.iterdir()) == ["f.bin"]
    with pytest.raises(FileNotFoundError):  # a block that writes nothing replaces nothing
        with _store.atomic_path(target):
            pass
    assert target.read_bytes() == b"new"


def test_file_digest_matches_hashlib(tmp_path):
    import hashlib

    payload = os.urandom(3 * (1 << 20) + 5)  # more than one chunk
    (tmp_path / "x").write_bytes(payload)
    assert _store.file_digest(tmp_path / "x") == hashlib.sha256(payload).hexdigest() == _store.sha256_bytes(payload)
    assert _store.file_digest(tmp_path / "x", "md5") == hashlib.md5(payload).hexdigest()


def test_a_killed_writes_temporary_file_is_removed_by_the_next_write_there(tmp_path):
    """``kill -9`` mid-write leaves ``.<name>.<pid>.<token>.part``; the next write of that file removes it when its
    process is gone, and leaves the temporary file of a process still running (a concurrent writer) alone."""
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    orphan = tmp_path / f".K.npz.{gone.pid}.0badf00d.part"
    orphan.write_bytes(b"half a tile")
    alive = tmp_path / f".K.npz.{os.getppid()}.0badf00d.part"  # this test's parent process: running
    alive.write_bytes(b"another writer's")
    other = tmp_path / f".L.npz.{gone.pid}.0badf00d.part"  # another file's: not this write's business
    other.write_bytes(b"x")
    _store.atomic_write_bytes(tmp_path / "K.npz", b"whole")
    assert not orphan.exists() and alive.exists() and other.exists()
    assert (tmp_path / "K.npz").read_bytes() == b"whole"


def test_a_full_disk_names_the_folder_and_the_bytes(tmp_path, monkeypatch):
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "K.npy").write_bytes(b"old")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(
        OSError, match=r"no space left on the device of .* while writing K.npy \(.*bytes free, 5 needed\)"
    ) as err:
        _store.atomic_write_bytes(tmp_path / "K.npy", b"12345")
    assert err.value.errno == errno.ENOSPC and (tmp_path / "K.npy").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["K.npy"]  # no temporary file left


def test_a_tile_store_keeps_each_identity_apart_and_sets_a_damaged_tile_aside(tmp_path):
    from ntk_core._store import DamagedArtifactWarning, TileStore

    store = TileStore(tmp_path, {"kernel": "a", "n": 4}, name="T_{i}_{j}.npz", meta={"what": "a test"})
    assert json.loads((store.dir / "meta.json").read_text()) == {"what": "a test"}
    tile = np.arange(6.0).reshape(2, 3)
    assert not store.has(1, 0) and store.load(1, 0, expect={"t": ((2, 3), np.float64)}) is None
    store.save(1, 0, {"t": tile})
    assert store.has(1, 0) and store.path(1, 0).name == "T_1_0.npz"
    np.testing.assert_array_equal(store.load(1, 0, expect={"t": ((2, 3), np.float64)}).arrays["t"], tile)
    other = TileStore(tmp_path, {"kernel": "b", "n": 4}, name="T_{i}_{j}.npz")
    assert other.dir != store.dir and not other.has(1, 0)  # another identity never sees these tiles
    # a tile file copied under another index is refused (the index is part of what each file carries)
    store.path(0, 0).write_bytes(store.path(1, 0).read_bytes())
    assert store.load(0, 0, expect={"t": ((2, 3), np.float64)}) is None
    data = bytearray(store.path(1, 0).read_bytes())
    data[len(data) // 2] ^= 0xFF
    store.path(1, 0).write_bytes(bytes(data))
    with pytest.warns(DamagedArtifactWarning):
        assert store.load(1, 0, expect={"t": ((2, 3), np.float64)}) is None
    assert not store.has(1, 0) and list(store.dir.glob("T_1_0.npz.damaged-*"))
