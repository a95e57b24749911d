"""write_kernel: a kernel matrix written to a .npy file tile by tile, by several processes, resumably."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ntk_core import infinite
from ntk_core.kernel_matrix import KernelSource, write_kernel
from ntk_core.kernel_matrix import file as kernel_file


def _sphere(n: int, d: int = 6, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x * (np.sqrt(d) / np.linalg.norm(x, axis=1, keepdims=True))


def _counted(x: np.ndarray) -> tuple[KernelSource, list[tuple[int, int]]]:
    """Setting 1's kernel as a source that notes the shape of every tile it evaluates."""
    calls: list[tuple[int, int]] = []

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        calls.append((len(a), len(b)))
        return infinite.setting1_kernel(a, b if b is not a else None)

    return KernelSource.from_function(kernel, x, name="counted"), calls


@pytest.mark.parametrize("processes", [1, 2])
def test_the_file_is_the_kernel_tile_for_tile_and_symmetric(tmp_path: Path, processes: int) -> None:
    x = _sphere(45)
    source = KernelSource.from_function(infinite.setting1_kernel, x, name="setting1")
    out = write_kernel(source, tmp_path / "K.npy", tile=16, processes=processes)
    K = np.load(out.path)
    assert (out.n, out.tile, out.tiles, out.computed) == (45, 16, 6, 6)
    assert np.array_equal(K, K.T)  # the mirror is written, not evaluated again
    for i, j in [(0, 0), (1, 0), (2, 1), (2, 2)]:  # each lower tile is the source's tile bit for bit
        rows, cols = slice(16 * i, 16 * (i + 1)), slice(16 * j, 16 * (j + 1))
        assert np.array_equal(K[rows, cols], source.block(rows, cols))
    np.testing.assert_allclose(K, infinite.setting1_kernel(x), rtol=1e-13, atol=0)  # an independent evaluation
    assert sorted(p.name for p in tmp_path.iterdir()) == ["K.npy"]  # no part file or markers left


def test_a_killed_run_resumes_with_the_tiles_it_finished(tmp_path: Path, monkeypatch) -> None:
    x = _sphere(40, seed=1)
    whole = np.load(
        write_kernel(KernelSource.from_function(infinite.setting1_kernel, x), tmp_path / "a.npy", tile=10).path
    )
    source, calls = _counted(x)
    touch = Path.touch
    written = []

    def dying(self: Path, *args, **kwargs) -> None:  # the process dies after its fourth tile is on disk
        touch(self, *args, **kwargs)
        if self.parent.name.endswith(".tiles"):
            written.append(self.name)
            if len(written) == 4:
                raise KeyboardInterrupt

    monkeypatch.setattr(Path, "touch", dying)
    with pytest.raises(KeyboardInterrupt):
        write_kernel(source, tmp_path / "K.npy", tile=10)
    monkeypatch.setattr(Path, "touch", touch)
    assert not (tmp_path / "K.npy").exists() and (tmp_path / "K.npy.part").exists()  # never a partial K.npy
    calls.clear()
    again = write_kernel(source, tmp_path / "K.npy", tile=10)
    assert (again.tiles, again.computed, len(calls)) == (10, 6, 6)  # only the six tiles left are evaluated
    assert np.array_equal(np.load(again.path), whole)


def test_a_partial_file_of_another_kernel_or_tiling_is_started_again(tmp_path: Path, monkeypatch) -> None:
    x = _sphere(30, seed=2)
    source, calls = _counted(x)
    stop = {"after": 2}
    original = kernel_file._write_tiles

    def partial(*args, **kwargs):  # write only the first tiles, as a run killed early would
        todo = args[4]
        return original(*args[:4], todo[: stop["after"]], *args[5:], **kwargs)

    monkeypatch.setattr(kernel_file, "_write_tiles", partial)
    with pytest.raises(RuntimeError, match="not written.*rerun"):
        write_kernel(source, tmp_path / "K.npy", tile=10)
    monkeypatch.setattr(kernel_file, "_write_tiles", original)
    calls.clear()
    other = write_kernel(source, tmp_path / "K.npy", tile=15)  # another tiling: nothing of the part is reused
    assert (other.tiles, other.computed, len(calls)) == (3, 3, 3)
    np.testing.assert_allclose(np.load(other.path), infinite.setting1_kernel(x), rtol=1e-13, atol=0)


def test_bad_arguments_and_a_full_disk_are_clear_errors(tmp_path: Path, monkeypatch) -> None:
    source = KernelSource.from_function(infinite.setting1_kernel, _sphere(8))
    with pytest.raises(ValueError, match=r"\.npy"):
        write_kernel(source, tmp_path / "K.bin")
    with pytest.raises(ValueError, match="processes"):
        write_kernel(source, tmp_path / "K.npy", processes=0)
    with pytest.raises(ValueError, match="tile"):
        write_kernel(source, tmp_path / "K.npy", tile=0)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 100, 100))
    with pytest.raises(OSError, match="not enough disk space.*needed"):
        write_kernel(source, tmp_path / "K.npy")
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_kernel_command_writes_what_bound_reads(tmp_path: Path, capsys) -> None:
    from ntk_core.__main__ import main

    x = _sphere(30, seed=3)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.where(np.arange(30) % 2 == 0, 1.0, -1.0))
    args = ["kernel", "--infinite", "setting1", "--inputs", str(tmp_path / "x.npy"), "--out", str(tmp_path / "K.npy")]
    assert main([*args, "--processes", "2", "--tile", "8"]) == 0
    assert "10 tiles of 8 (10 computed now)" in capsys.readouterr().out
    np.testing.assert_allclose(np.load(tmp_path / "K.npy"), infinite.setting1_kernel(x), rtol=1e-13, atol=0)
    bound = ["bound", "--theorem", "5.2", "--labels", str(tmp_path / "y.npy"), "--p", "0.1", "--lam", "1"]
    assert main([*bound, "--kernel", str(tmp_path / "K.npy")]) == 0
    from_file = capsys.readouterr().out
    assert (
        main([*bound, "--infinite", "setting1", "--inputs", str(tmp_path / "x.npy"), "--factored", str(tmp_path / "f")])
        == 0
    )
    assert from_file.splitlines()[-1] == capsys.readouterr().out.splitlines()[-1]  # the same total either way
    assert main([*args[:3], "--inputs", str(tmp_path / "missing.npy"), "--out", str(tmp_path / "K2.npy")]) == 2
    assert "missing.npy" in capsys.readouterr().err


def test_a_second_writer_of_the_same_file_is_told_another_process_holds_it(tmp_path: Path) -> None:
    """Two writers of one output: the second is refused at once with the reason (the first holds the file's lock),
    instead of failing on a tile the first removed; the first's file is whole."""
    import subprocess
    import sys
    import textwrap

    out = tmp_path / "K.npy"
    holder = textwrap.dedent(
        f"""
        import sys, time
        from ntk_core import _store
        with _store.file_lock({str(tmp_path / ".K.npy.lock")!r}):
            print("held", flush=True)
            sys.stdin.readline()
        """
    )
    first = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "held"
        x = np.random.default_rng(0).normal(size=(20, 4))
        with pytest.raises(ValueError, match=r"another process is writing .*K.npy \(it holds .*\.K\.npy\.lock\)"):
            write_kernel(KernelSource.from_function(infinite.setting1_kernel, x), out, tile=8)
        assert not out.exists()
    finally:
        first.communicate("\n")
    written = write_kernel(KernelSource.from_function(infinite.setting1_kernel, x), out, tile=8)
    assert written.computed == written.tiles and np.load(out).shape == (20, 20)
