"""The distributed Gram matrix (ntk_core.ntk.distributed) on 2 gloo processes against single-process empirical_ntk.

The processes are started with ``torch.multiprocessing`` (fork) on a free port of 127.0.0.1, as torchrun
would start them; a rank that dies makes the others terminate, as under torchrun.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ntk_core import MLP, TwoLayerNet, empirical_ntk
from ntk_core.ntk.distributed import distributed_ntk

N, TILE, TILES = 40, 8, 15  # 5 tile rows: 15 tiles in the upper triangle


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(N, 6, generator=gen, dtype=torch.float64), torch.randn(12, 6, generator=gen, dtype=torch.float64)


def _worker(rank: int, world: int, port: int, folder: str, sleep: dict, kill_after: dict) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x, x2 = _inputs()
    done: list[tuple[int, int]] = []

    def callback(i: int, j: int, computed: bool) -> None:
        done.append((i, j))
        with open(Path(folder) / f"log{rank}.txt", "a") as fh:
            fh.write(f"{i} {j} {int(computed)}\n")
        if kill_after.get(rank) == len(done):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(sleep.get(rank, 0.0))

    res = distributed_ntk(
        TwoLayerNet(d=6, width=32, seed=1),
        x,
        checkpoint_dir=Path(folder) / "tiles",
        tile_size=TILE,
        dtype=torch.float64,
        callback=callback,
    )
    full = distributed_ntk(
        MLP(6, (16, 16), 3, seed=2),
        x,
        x2,
        checkpoint_dir=Path(folder) / "tiles",
        output="full",
        tile_size=TILE,
        dtype=torch.float64,
    )
    stats = {
        "computed": res.computed,
        "loaded": res.loaded,
        "path": str(res.path),
        "full": str(full.path),
        "full_computed": full.computed,
    }
    if rank == 0:
        assert res.matrix is not None and full.matrix is not None
        torch.save({"trace": res.matrix, "full": full.matrix}, Path(folder) / "rank0.pt")
    (Path(folder) / f"stats{rank}.json").write_text(json.dumps(stats))
    dist.destroy_process_group()


def _spawn(folder: Path, sleep: dict | None = None, kill_after: dict | None = None) -> None:
    # fork: the children start at once, without importing torch and ntk_core again (seconds on a busy CPU)
    mp.start_processes(
        _worker,
        args=(2, _free_port(), str(folder), sleep or {}, kill_after or {}),
        nprocs=2,
        join=True,
        start_method="fork",
    )


def _tile_files(folder: Path) -> set[tuple[int, int]]:
    found = set()
    for f in (folder / "tiles").glob("*/tile_*.npz"):
        _, i, j = f.stem.split("_")
        found.add((int(i), int(j)))
    return found


def test_two_gloo_processes_equal_single_process_bit_for_bit(tmp_path):
    _spawn(tmp_path, sleep={0: 0.02, 1: 0.02})
    x, x2 = _inputs()
    ref = empirical_ntk(TwoLayerNet(d=6, width=32, seed=1), x, tile_size=TILE, dtype=torch.float64)
    ref_full = empirical_ntk(MLP(6, (16, 16), 3, seed=2), x, x2, output="full", tile_size=TILE, dtype=torch.float64)
    got = torch.load(tmp_path / "rank0.pt", weights_only=True)
    assert torch.equal(got["trace"], ref) and torch.equal(got["full"], ref_full)
    stats = [json.loads((tmp_path / f"stats{r}.json").read_text()) for r in (0, 1)]
    assert stats[0]["computed"] + stats[1]["computed"] == TILES  # every tile once, by one rank or the other
    assert stats[0]["full_computed"] + stats[1]["full_computed"] == 5 * 2  # 5 x 2 tiles, no symmetry
    assert stats[0]["path"] == stats[1]["path"]
    on_disk = np.load(stats[0]["path"], mmap_mode="r")
    assert np.array_equal(np.asarray(on_disk), ref.numpy())
    assert np.array_equal(np.load(stats[0]["full"]), ref_full.numpy())


def test_killed_rank_then_resume_with_one_process(tmp_path):
    """Rank 1 is killed (SIGKILL) after its 2nd tile, the group is torn down; one process resumes."""
    with pytest.raises(mp.ProcessExitedException):  # the killed rank; the other is terminated
        _spawn(tmp_path, sleep={0: 0.3}, kill_after={1: 2})
    logged = set()
    for r in (0, 1):
        log = tmp_path / f"log{r}.txt"
        if log.exists():
            logged |= {tuple(int(v) for v in line.split()[:2]) for line in log.read_text().splitlines()}
    on_disk = _tile_files(tmp_path)
    assert logged <= on_disk  # every finished tile was saved before it was reported
    assert 2 <= len(on_disk) < TILES
    assert not (tmp_path / "rank0.pt").exists()

    x, _ = _inputs()
    net = TwoLayerNet(d=6, width=32, seed=1)
    res = distributed_ntk(net, x, checkpoint_dir=tmp_path / "tiles", tile_size=TILE, dtype=torch.float64)
    assert res.world_size == 1 and res.loaded == len(on_disk) and res.computed == TILES - len(on_disk)
    assert res.matrix is not None
    assert torch.equal(res.matrix, empirical_ntk(net, x, tile_size=TILE, dtype=torch.float64))


def test_resume_by_plain_empirical_ntk_and_bad_input(tmp_path):
    """The tile folder is empirical_ntk's: either resumes the other's tiles."""
    x, _ = _inputs()
    net = TwoLayerNet(d=6, width=32, seed=1)
    first = distributed_ntk(net, x, checkpoint_dir=tmp_path, tile_size=TILE, dtype=torch.float64)
    flags: list[bool] = []
    again = empirical_ntk(
        net,
        x,
        tile_size=TILE,
        dtype=torch.float64,
        checkpoint_dir=tmp_path,
        callback=lambda i, j, computed: flags.append(computed),
    )
    assert not any(flags) and len(flags) == TILES and torch.equal(again, first.matrix)
    with pytest.raises(ValueError, match="method"):
        distributed_ntk(net, x, checkpoint_dir=tmp_path, method="fast")
    with pytest.raises(ValueError, match="tile_size"):
        distributed_ntk(net, x, checkpoint_dir=tmp_path, tile_size=0)
    with pytest.raises(ValueError, match="timeout"):
        distributed_ntk(net, x, checkpoint_dir=tmp_path, timeout=0)
    with pytest.raises(TypeError, match="nn.Module"):
        distributed_ntk(lambda t: t, x, checkpoint_dir=tmp_path)  # type: ignore[arg-type]


def test_cli_under_torchrun_equals_one_process(tmp_path, shared_data):
    """``torchrun --nproc_per_node=2 -m ntk_core gram ...`` writes the same .npy as the one-process command."""
    import subprocess
    import sys

    from ntk_core.__main__ import main

    args = [
        "gram",
        "--model",
        "two-layer",
        "--width",
        "64",
        "--data",
        "mnist5v8",
        "--n-images",
        "24",
        "--dtype",
        "float64",
        "--tile-size",
        "8",
    ]
    env = {**os.environ, "NTK_CORE_DATA": str(shared_data), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={_free_port()}",
            "-m",
            "ntk_core",
            *args,
            "--backend",
            "gloo",
            "--checkpoint-dir",
            str(tmp_path / "two"),
            "--out",
            str(tmp_path / "two.npy"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 process(es)" in done.stdout and "rank 1/2" in done.stderr
    assert main([*args, "--checkpoint-dir", str(tmp_path / "one"), "--out", str(tmp_path / "one.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "two.npy"), np.load(tmp_path / "one.npy"))
    assert main(["gram", "--model", "cnn", "--data", "mnist5v8", "--checkpoint-dir", str(tmp_path)]) == 2


def test_assembly_removes_the_temporaries_of_a_killed_run_and_keeps_a_live_ones(tmp_path):
    import subprocess
    import sys

    x, _ = _inputs()
    net = TwoLayerNet(d=6, width=32, seed=1)
    out = tmp_path / "gram.npy"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is free now: a killed assembly's temporary
    killed = tmp_path / f".gram.npy.{dead.pid}.0badf00d.tmp"
    live = tmp_path / f".gram.npy.{os.getpid()}.0123abcd.tmp"  # an assembly still running
    other = tmp_path / f".other.npy.{dead.pid}.0badf00d.tmp"  # another output's
    for f in (killed, live, other):
        f.write_bytes(b"x" * 100)
    res = distributed_ntk(net, x, checkpoint_dir=tmp_path / "tiles", tile_size=TILE, dtype=torch.float64, out=out)
    assert not killed.exists() and live.exists() and other.exists()
    assert np.array_equal(np.load(out), res.matrix.numpy())


@pytest.fixture
def tiny_disk(tmp_path):
    """A 24 KiB tmpfs (needs the right to mount, e.g. root; skipped elsewhere)."""
    import subprocess

    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_is_a_clear_error_not_a_bus_error(tmp_path, tiny_disk):
    """40 × 40 float64 (12,800 bytes) fits a 24 KiB disk that is empty, not one with 16 KiB taken: named, and nothing
    is left on the disk."""
    x, _ = _inputs()
    net = TwoLayerNet(d=6, width=32, seed=1)
    (tiny_disk / "other").write_bytes(b"\0" * 16384)
    with pytest.raises(OSError, match=r"not enough disk space for the Gram matrix .*gram\.npy: it needs 16,896 bytes"):
        distributed_ntk(
            net, x, checkpoint_dir=tmp_path / "tiles", tile_size=TILE, dtype=torch.float64, out=tiny_disk / "gram.npy"
        )
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["other"]
    (tiny_disk / "other").unlink()
    res = distributed_ntk(
        net, x, checkpoint_dir=tmp_path / "tiles", tile_size=TILE, dtype=torch.float64, out=tiny_disk / "gram.npy"
    )
    assert res.loaded == TILES and np.array_equal(np.load(tiny_disk / "gram.npy"), res.matrix.numpy())


@pytest.mark.parametrize(
    "n, message", [("0", "positive number of images, got 0"), ("-5", "positive number"), ("99999", "between 1 and")]
)
def test_gram_cli_refuses_a_bad_image_count(tmp_path, shared_data, monkeypatch, capsys, n, message):
    from ntk_core.__main__ import main

    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    args = [
        "gram",
        "--width",
        "8",
        "--n-images",
        n,
        "--checkpoint-dir",
        str(tmp_path),
        "--out",
        str(tmp_path / "k.npy"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--n-images must be" in err and message in err and not (tmp_path / "k.npy").exists()
