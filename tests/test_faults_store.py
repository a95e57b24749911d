"""Fault injection and kill tests for the persisted artifacts of ntk.py (Gram tiles) and train.py (checkpoints).

Issue 10: every artifact carries its identity and its integrity, both verified on load. For each
store an artifact is damaged in several ways (truncated, bytes flipped, emptied, replaced by garbage,
re-written with a valid checksum but a NaN / a wrong dtype / a wrong shape, or taken from another
identity) and the next run must detect it, name the file (damage) or ignore it (another identity),
recompute, and end with exactly the result of a clean run. Kill tests stop a run with SIGTERM or
SIGKILL at random points in a subprocess and check that the resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from ntk_core import _store
from ntk_core.nets import MLP
from ntk_core.ntk import empirical_ntk
from ntk_core.train import TrainConfig, _checkpoint_identity, train
import damage

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- ways to damage a file


_truncate, _flip, _empty = damage.truncate, damage.flip, damage.empty


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(2000))


def _rewrite(path: Path, identity: dict[str, Any], change: Callable[[str, np.ndarray], np.ndarray]) -> None:
    """Re-save with a *valid* checksum but changed numbers: only the content checks can catch it."""
    found = _store.load(path, identity)
    assert found is not None
    arrays = {name: change(name, a) for name, a in found.arrays.items()}
    _store.save(path, identity, arrays=arrays, blobs=found.blobs, meta=found.meta)


def _nan(name: str, a: np.ndarray) -> np.ndarray:
    if a.dtype.kind != "f":
        return a
    b = a.copy()
    b.reshape(-1)[0] = np.nan
    return b


def _wrong_dtype(name: str, a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32 if a.dtype == np.float64 else np.float64) if a.dtype.kind == "f" else a


def _wrong_shape(name: str, a: np.ndarray) -> np.ndarray:
    return a[:-1] if a.ndim and a.shape[0] > 1 else a


BYTE_FAULTS = {"truncate": _truncate, "flip": _flip, "empty": _empty, "garbage": _garbage}
CONTENT_FAULTS = {"nan": _nan, "wrong_dtype": _wrong_dtype, "wrong_shape": _wrong_shape}


def _damage_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, _store.DamagedArtifactWarning)]


# --------------------------------------------------------------------------- Gram tiles


def _gram_problem() -> tuple[nn.Module, torch.Tensor, dict[str, Any]]:
    model = MLP(5, [16], 2, seed=2)
    x = torch.randn(10, 5, generator=torch.Generator().manual_seed(7))
    kwargs = dict(method="structured", dtype=torch.float64, tile_size=3)
    return model, x, kwargs


def _tile_run(
    model: nn.Module, x: torch.Tensor, folder: Path, **kwargs: Any
) -> tuple[torch.Tensor, list[tuple[int, int, bool]]]:
    seen: list[tuple[int, int, bool]] = []
    k = empirical_ntk(model, x, checkpoint_dir=folder, callback=lambda i, j, c: seen.append((i, j, c)), **kwargs)
    return k, seen


def _tile_identity(path: Path) -> dict[str, Any]:
    """The identity recorded in an intact tile file (what the engine will ask for)."""
    with np.load(path, allow_pickle=False) as npz:
        import json

        header = json.loads(npz["__header__"].tobytes().decode())
    return header["identity"]


@pytest.mark.parametrize("fault", [*BYTE_FAULTS, *CONTENT_FAULTS])
def test_damaged_tile_is_named_set_aside_and_recomputed(tmp_path: Path, fault: str) -> None:
    model, x, kwargs = _gram_problem()
    clean = empirical_ntk(model, x, **kwargs)
    _tile_run(model, x, tmp_path, **kwargs)
    tiles = sorted(tmp_path.rglob("tile_*.npz"))
    assert len(tiles) == 10
    [victim] = [t for t in tiles if t.name == "tile_00001_00002.npz"]  # off the diagonal: mirrored too
    if fault in BYTE_FAULTS:
        BYTE_FAULTS[fault](victim)
    else:
        _rewrite(victim, _tile_identity(victim), CONTENT_FAULTS[fault])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        k, seen = _tile_run(model, x, tmp_path, **kwargs)
    messages = _damage_warnings(record)
    assert len(messages) == 1 and str(victim) in messages[0], messages
    assert [c for *_, c in seen].count(True) == 1 and (1, 2, True) in seen
    assert torch.equal(k, clean)
    assert len(list(victim.parent.glob(f"{victim.name}.damaged-*"))) == 1  # kept for inspection, not reused
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the recomputed tile is intact
        k2, seen2 = _tile_run(model, x, tmp_path, **kwargs)
    assert not any(c for *_, c in seen2) and torch.equal(k2, clean)


@pytest.mark.parametrize("other", ["parameters", "inputs", "buffer"])
def test_tile_of_another_identity_is_never_mixed_in(tmp_path: Path, other: str) -> None:
    model, x, kwargs = _gram_problem()
    model2, x2 = MLP(5, [16], 2, seed=2), x.clone()
    if other == "parameters":
        with torch.no_grad():
            next(model2.parameters())[0, 0] += 1e-3
    elif other == "inputs":
        x2[3, 1] += 1e-6
    else:
        model2.register_buffer("scale_note", torch.ones(1))  # a constant of the function (unused, still identity)
    clean = empirical_ntk(model, x, **kwargs)
    _tile_run(model2, x2, tmp_path, **kwargs)
    # plant the other run's tiles where this run's would be: same file names, in this run's folder
    [folder2] = [p for p in tmp_path.iterdir() if p.is_dir()]
    _tile_run(model, x, tmp_path / "mine", **kwargs)
    [mine] = [p for p in (tmp_path / "mine").iterdir() if p.is_dir()]
    for tile in folder2.glob("tile_*.npz"):
        os.replace(tile, mine / tile.name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # another identity is not damage: no warning, just not used
        k, seen = _tile_run(model, x, tmp_path / "mine", **kwargs)
    assert all(c for *_, c in seen)  # every tile recomputed
    assert torch.equal(k, clean)


class _Net(nn.Module):
    """A user's model whose code (not its class name, repr or parameters) changes between two runs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(5, 8)
        self.out = nn.Linear(8, 1)
        torch.nn.init.normal_(self.fc.weight, generator=torch.Generator().manual_seed(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.fc(x)))


@pytest.mark.parametrize("edit", ["twice the output", "tanh for relu"])
def test_tiles_are_recomputed_when_the_models_code_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str):
    x = torch.randn(10, 5, generator=torch.Generator().manual_seed(7))
    kwargs = dict(method="jacobian", dtype=torch.float64, tile_size=3)
    model = _Net()
    before, _ = _tile_run(model, x, tmp_path, **kwargs)
    again, seen = _tile_run(model, x, tmp_path, **kwargs)
    assert not any(c for *_, c in seen) and torch.equal(again, before)  # same code: every tile loaded
    if edit == "twice the output":
        monkeypatch.setattr(_Net, "forward", lambda self, x: 2 * self.out(torch.relu(self.fc(x))))
    else:
        monkeypatch.setattr(_Net, "forward", lambda self, x: self.out(torch.tanh(self.fc(x))))
    after, seen = _tile_run(model, x, tmp_path, **kwargs)
    assert all(c for *_, c in seen)  # every tile computed afresh, none of the old function's loaded
    assert torch.equal(after, empirical_ntk(model, x, **kwargs)) and not torch.allclose(after, before)
    if edit == "twice the output":
        assert torch.allclose(after, 4 * before)


def test_tile_of_a_different_geometry_is_not_used(tmp_path: Path) -> None:
    model, x, kwargs = _gram_problem()
    clean = empirical_ntk(model, x, **kwargs)
    _, first = _tile_run(model, x, tmp_path, **kwargs)
    k, seen = _tile_run(model, x, tmp_path, **{**kwargs, "tile_size": 4})
    assert all(c for *_, c in seen)
    torch.testing.assert_close(k, clean, rtol=1e-12, atol=1e-12)  # other tiles: equal up to rounding
    _, again = _tile_run(model, x, tmp_path, **kwargs)
    assert not any(c for *_, c in again)


# --------------------------------------------------------------------------- training checkpoints


def _train_setup(seed_data: int = 1, seed_model: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor, TrainConfig]:
    torch.manual_seed(seed_model)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1, bias=False)).double()
    gen = torch.Generator().manual_seed(seed_data)
    x = torch.randn(48, 6, generator=gen, dtype=torch.float64)
    y = torch.where(x[:, 0] > 0, 1, -1)
    cfg = TrainConfig(method="aux", lam=0.5, lr=0.01, epochs=5, batch_size=16, momentum=0.9, lr_milestones=(3,))
    return model, x, y, cfg


def _train(path: Path | None, stop_after: int | None = None, **setup: int) -> tuple[Any, list[int]]:
    model, x, y, cfg = _train_setup(**setup)
    epochs: list[int] = []

    def on_epoch_end(epoch: int) -> None:
        epochs.append(epoch)
        if stop_after is not None and epoch == stop_after:
            raise KeyboardInterrupt

    return train(model, x, y, cfg, y_clean=y, checkpoint=path, on_epoch_end=on_epoch_end), epochs


def _same_result(a: Any, b: Any) -> None:
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert a.history.equals(b.history)
    torch.testing.assert_close(a.aux, b.aux, rtol=0, atol=0)


@pytest.mark.parametrize("fault", [*BYTE_FAULTS, *CONTENT_FAULTS])
def test_damaged_checkpoint_is_named_set_aside_and_the_run_restarts(tmp_path: Path, fault: str) -> None:
    reference, _ = _train(None)
    path = tmp_path / "run.ckpt"
    with pytest.raises(KeyboardInterrupt):
        _train(path, stop_after=3)
    if fault in BYTE_FAULTS:
        BYTE_FAULTS[fault](path)
    else:
        model, x, y, cfg = _train_setup()
        _rewrite(path, _checkpoint_identity(model, cfg, x, y, y, None, None), CONTENT_FAULTS[fault])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result, epochs = _train(path)
    messages = _damage_warnings(record)
    assert len(messages) == 1 and str(path) in messages[0], messages
    assert epochs == [1, 2, 3, 4, 5]  # from scratch: the damaged state was not used
    _same_result(result, reference)
    assert len(list(tmp_path.glob("run.ckpt.damaged-*"))) == 1


def test_checkpoint_resume_continues_where_it_stopped(tmp_path: Path) -> None:
    reference, _ = _train(None)
    path = tmp_path / "run.ckpt"
    with pytest.raises(KeyboardInterrupt):
        _train(path, stop_after=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result, epochs = _train(path)
    assert epochs == [4, 5]
    _same_result(result, reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.ckpt"]


@pytest.mark.parametrize("other", [{"seed_data": 2}, {"seed_model": 3}])
def test_checkpoint_of_another_run_is_never_resumed(tmp_path: Path, other: dict[str, int]) -> None:
    """Different data or a different initialisation with the same TrainConfig: start afresh."""
    reference, _ = _train(None)
    path = tmp_path / "run.ckpt"
    with pytest.raises(KeyboardInterrupt):
        _train(path, stop_after=3, **other)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not mine is not damage
        result, epochs = _train(path)
    assert epochs == [1, 2, 3, 4, 5]
    _same_result(result, reference)
    _, resumed = _train(path)  # and the checkpoint is now this run's
    assert resumed == []


def test_checkpoint_holds_no_pickle(tmp_path: Path) -> None:
    path = tmp_path / "run.ckpt"
    _train(path)
    with np.load(path, allow_pickle=False) as npz:  # an npz of plain arrays: loads without pickle
        assert "__header__" in npz.files


# --------------------------------------------------------------------------- kill tests (subprocess)


_WORKER = textwrap.dedent(
    """
    import sys, time
    sys.path[:0] = [{tests!r}, {support!r}]
    import torch
    from test_faults_store import _gram_problem, _train
    from ntk_core.ntk import empirical_ntk
    from pathlib import Path

    kind, where = sys.argv[1], Path(sys.argv[2])
    if kind == "gram":
        model, x, kwargs = _gram_problem()
        def report(i, j, computed):
            print("tile", i, j, flush=True)
            time.sleep(0.05)
        empirical_ntk(model, x, checkpoint_dir=where, callback=report, **kwargs)
    else:
        import ntk_core.train as t
        real = t._save_checkpoint
        def slow_save(*args, **kw):
            real(*args, **kw)
            print("epoch", args[2], flush=True)
            time.sleep(0.05)
        t._save_checkpoint = slow_save
        _train(where)
    print("done", flush=True)
    """
)


def _run_and_kill(tmp_path: Path, kind: str, where: Path, after: int, sig: int, rng: random.Random) -> None:
    script = tmp_path / "worker.py"
    script.write_text(_WORKER.format(tests=str(REPO / "tests"), support=str(REPO / "tests" / "support")))
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, str(script), kind, str(where)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:
            if line.startswith(("tile", "epoch")):
                seen += 1
                if seen == after:
                    time.sleep(rng.uniform(0.0, 0.06))  # anywhere in the next step, writes included
                    proc.send_signal(sig)
                    break
            if line.startswith("done"):
                break
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -sig, (proc.returncode, proc.stderr.read() if proc.stderr else "")


@pytest.mark.parametrize("sig, after", [(signal.SIGKILL, 3), (signal.SIGTERM, 6)])
def test_killed_gram_resumes_to_the_uninterrupted_result(tmp_path: Path, sig: int, after: int) -> None:
    model, x, kwargs = _gram_problem()
    clean = empirical_ntk(model, x, **kwargs)
    where = tmp_path / "tiles"
    _run_and_kill(tmp_path, "gram", where, after, sig, random.Random(after))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # atomic writes: a kill leaves no damaged tile
        k, seen = _tile_run(model, x, where, **kwargs)
    assert all(p.name.startswith(".") for p in where.rglob("*.part"))  # a killed write leaves at most a hidden temp
    assert [c for *_, c in seen].count(False) >= after  # the finished tiles were reused
    torch.testing.assert_close(k, clean, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sig, after", [(signal.SIGKILL, 2), (signal.SIGTERM, 3)])
def test_killed_training_resumes_to_the_uninterrupted_result(tmp_path: Path, sig: int, after: int) -> None:
    reference, _ = _train(None)
    path = tmp_path / "run.ckpt"
    _run_and_kill(tmp_path, "train", path, after, sig, random.Random(after))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result, epochs = _train(path)
    assert epochs and epochs[0] >= after + 1 and epochs[-1] == 5
    for p, q in zip(result.model.parameters(), reference.model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)
    assert list(result.history.columns) == list(reference.history.columns)
    np.testing.assert_allclose(
        result.history.to_numpy(dtype=float), reference.history.to_numpy(dtype=float), rtol=1e-9, atol=1e-12
    )
