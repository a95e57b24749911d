"""Recorded results (results/medium/): the records cannot drift from the code, and the record/replay machinery.

``test_recorded_result_replays`` re-runs a few cheap units of every recorded result (chosen at random per run;
the seed is printed and can be fixed with ``NTK_REPLAY_SEED``) and checks they equal the recorded rows to 1e-6
(CPU runs are deterministic: same config and seed, same numbers). An experiment without a record is skipped
with the reason. The replay of each record has a budget in recorded compute seconds (``NTK_REPLAY_MAX_S``,
default 240 s, so that the suite stays well under 30 minutes): two units where two fit, else one; a record
whose every unit took longer than the budget when recorded is skipped, and ``NTK_REPLAY_MAX_S=inf`` replays it.
The other tests record a tiny configuration into a temporary folder.
"""

from __future__ import annotations

import json
import os
import random
import re

import pandas as pd
import pytest

from ntk_core import experiments
from ntk_core.__main__ import main
from ntk_core.experiments import _record
from ntk_core.experiments._record import DataDiffer, RecordMissing, ReplayTooCostly, record_dir, recorded, replay

#: the replay budget per record, in seconds of recorded compute time (NTK_REPLAY_MAX_S; "inf" replays any unit)
REPLAY_MAX_S = float(os.environ.get("NTK_REPLAY_MAX_S", "240"))

TINY = dict(n_train=40, n_val=20, n_test=40, width=16, steps=10, eval_every=5, noise_levels=(0.2,), lams=(0.5, 2.0))


@pytest.fixture
def data_env(monkeypatch, shared_data, tmp_path):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _record_tiny(root):
    return experiments.record("setting1", "quick", root=root, **TINY)


@pytest.mark.parametrize("name", experiments.EXPERIMENTS)
def test_recorded_result_replays(name, monkeypatch, shared_data):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    try:
        result = recorded(name, "medium")
    except RecordMissing as missing:
        pytest.skip(f"no recorded medium result of {name} yet: {missing}")
    seed = int(os.environ.get("NTK_REPLAY_SEED", random.SystemRandom().randrange(2**31)))
    print(f"replaying {name} with NTK_REPLAY_SEED={seed} (stale: {result.meta['stale']})")
    try:
        checks = replay(name, "medium", units=2, seed=seed, max_seconds=REPLAY_MAX_S)
    except DataDiffer as differ:
        pytest.skip(str(differ))
    except ReplayTooCostly as costly:  # e.g. Setting 3: every unit is a ResNet trained for 40 epochs
        pytest.skip(f"{costly}; replay it with NTK_REPLAY_MAX_S=inf pytest tests/test_recorded.py -k {name}")
    assert checks
    for check in checks:
        assert not check.problems, f"{name} unit {check.key} (NTK_REPLAY_SEED={seed}): {check.problems}"


def test_record_round_trips_and_replays(data_env):
    root = data_env / "records"
    fresh = _record_tiny(root)
    folder = record_dir("setting1", "quick", root)
    assert sorted(p.name for p in folder.iterdir()) == ["provenance.json", "table.csv", "units.json", "work"]
    again = recorded("setting1", "quick", root=root)
    pd.testing.assert_frame_equal(again.table, fresh.table, check_exact=True)
    # the same numbers as an ordinary run of the same config, bit for bit
    ordinary = experiments.run("setting1", "quick", **TINY)
    pd.testing.assert_frame_equal(again.table, ordinary.table, check_exact=True, check_dtype=False)
    meta = again.meta
    for field in (
        "config",
        "config_hash",
        "code",
        "git",
        "data",
        "data_fingerprints",
        "machine",
        "versions",
        "wall_time_s",
        "recorded_at",
        "files",
    ):
        assert field in meta, field
    assert meta["units"] == 1 + 2 * 2 and meta["units_computed"] == 5 and meta["units_resumed"] == 0
    # a quick config overridden is not the quick profile: stale, with the command that refreshes it
    assert meta["stale"] and "configuration" in meta["stale_reasons"][0]
    assert meta["refresh"] == "python -m ntk_core run setting1 --profile quick --record"
    # every unit replays to the recorded rows
    checks = replay("setting1", "quick", units=5, root=root, seed=0)
    assert len(checks) == 5 and all(not c.problems for c in checks)
    # a replay budget below every unit's recorded time chooses nothing, and says so
    with pytest.raises(ReplayTooCostly, match="over the replay budget of 0 s"):
        replay("setting1", "quick", units=2, root=root, seed=0, max_seconds=0.0)
    # the budget holds the chosen units together: one unit fits in 1.5 times the cheapest, two do not
    cheapest = min(u["seconds"] for u in json.loads((folder / "units.json").read_text()))
    one = replay("setting1", "quick", units=2, root=root, seed=0, max_seconds=1.5 * cheapest)
    assert len(one) == 1 and not one[0].problems


def test_replay_detects_a_changed_value(data_env):
    root = data_env / "records"
    _record_tiny(root)
    folder = record_dir("setting1", "quick", root)
    units = json.loads((folder / "units.json").read_text())
    units[0]["rows"][0]["test_error"] += 1e-3
    (folder / "units.json").write_text(json.dumps(units))
    with pytest.raises(ValueError, match="SHA-256 differs"):  # edited without updating the provenance
        replay("setting1", "quick", root=root, keys=[units[0]["key"]])
    prov = json.loads((folder / "provenance.json").read_text())
    prov["files"]["units.json"] = _record._store.sha256_bytes((folder / "units.json").read_bytes())
    (folder / "provenance.json").write_text(json.dumps(prov))
    checks = replay("setting1", "quick", root=root, keys=[units[0]["key"]])
    assert len(checks) == 1 and any("test_error" in p for p in checks[0].problems)


def test_interrupted_recording_resumes_and_code_change_is_stale(data_env, monkeypatch):
    root = data_env / "records"
    _record_tiny(root)
    folder = record_dir("setting1", "quick", root)
    (folder / "provenance.json").unlink()  # as if killed before the end: the units are in work/
    with pytest.raises(RecordMissing, match="--record"):
        recorded("setting1", "quick", root=root)
    again = _record_tiny(root)
    assert again.meta["units_resumed"] == 5 and again.meta["units_computed"] == 0
    monkeypatch.setattr(_record, "code_fingerprint", lambda name=None: "0123456789ab")
    stale = recorded("setting1", "quick", root=root)
    assert stale.meta["stale"] and "code fingerprint" in stale.meta["stale_reasons"][0]


def test_a_new_record_removes_the_unit_stores_of_earlier_configurations(data_env):
    root = data_env / "records"
    _record_tiny(root)
    work = record_dir("setting1", "quick", root) / "work"
    (first,) = work.glob("*.units")
    experiments.record("setting1", "quick", root=root, **{**TINY, "steps": 12})
    (second,) = work.glob("*.units")  # the first configuration's units are gone, the new ones stay
    assert second != first and any(second.iterdir())
    # a store whose lock is held (a recording under way) is left alone
    busy = work / "feedfeedfeedfeed.units"
    busy.mkdir()
    with _record._store.file_lock(work / "feedfeedfeedfeed.lock"):
        _record_tiny(root)
    assert busy.is_dir() and len(list(work.glob("*.units"))) == 2


def test_show_prints_a_record_and_names_a_missing_one(data_env, monkeypatch, capsys):
    root = data_env / "records"
    monkeypatch.setenv("NTK_CORE_RECORDS", str(root))
    assert main(["show", "setting1", "--profile", "medium"]) == 2
    assert "--profile medium --record" in capsys.readouterr().err
    _record_tiny(root)
    assert main(["show", "setting1", "--profile", "quick"]) == 0
    out = capsys.readouterr().out
    assert "experiment: setting1" in out and "STALE" in out and "GD+RDI" in out


def test_cli_record(data_env, monkeypatch, capsys):
    root = data_env / "records"
    monkeypatch.setenv("NTK_CORE_RECORDS", str(root))
    args = [f"--set={k}={v!r}" for k, v in TINY.items()]
    assert main(["run", "setting1", "--profile", "quick", "--record", *args]) == 0
    assert "record:" in capsys.readouterr().out
    assert (record_dir("setting1", "quick", root) / "provenance.json").exists()


def test_medium_profile_and_an_experiment_without_one(monkeypatch):
    for name in ("setting1", "distance", "difference_trick"):
        config = experiments.make_config(name, "medium")
        assert config.profile == "medium" and config.device == "cpu" and len(config.seeds) == 3

    class Config:
        @classmethod
        def quick(cls):
            return None

    class Module:
        pass

    Module.Config = Config  # type: ignore[attr-defined]
    monkeypatch.setattr(experiments, "get", lambda name: Module)
    with pytest.raises(ValueError, match="has no 'medium' profile yet"):
        experiments.make_config("setting2", "medium")


def test_code_fingerprint_follows_the_code_an_experiment_runs(tmp_path):
    """Docstrings, comments, annotations and code the experiment never reaches leave its fingerprint; code
    that it runs does not."""
    import shutil
    from pathlib import Path

    from ntk_core.experiments import _code

    package = tmp_path / "ntk_core"
    shutil.copytree(Path(_code.__file__).resolve().parents[1], package, ignore=shutil.ignore_patterns("__pycache__"))
    fp = lambda name="distance": _code.code_fingerprint(name, package)  # noqa: E731
    assert fp() == _code.code_fingerprint("distance") != _code.code_fingerprint("setting3")
    before, whole = fp(), fp(None)

    def edit(name, old, new, count=1):
        path = package / name
        text = path.read_text()
        assert text.count(old) >= count, (name, old)
        path.write_text(text.replace(old, new, count))

    # documentation, comments and annotations (and the import of a type alias used only in annotations)
    krr = package / "krr.py"
    krr.write_text(
        re.sub(
            r"def check_kernel_matrix\(K: [^,]+,", "def check_kernel_matrix(K: 'SomeArray',", krr.read_text(), count=1
        )
    )
    edit(
        "krr.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom ._typing import ArrayLike  # a type alias\n",
    )
    (package / "_typing.py").write_text("import numpy\nArrayLike = numpy.ndarray\n")
    edit("experiments/setting1.py", '"""', '"""Reworded. ')
    # a new function in a module distance imports from, that distance does not call
    (package / "experiments" / "setting1.py").write_text(
        (package / "experiments" / "setting1.py").read_text() + "\n\ndef headline(table):\n    return table.mean()\n"
    )
    (package / "measure.py").write_text((package / "measure.py").read_text() + "\nX = 1\n")
    # sizing a profile: its constructor only chooses config values, which enter a result's identity apart
    edit("experiments/distance.py", "steps=120_000,", "steps=150_000,")
    assert _code.PROFILE_METHODS == experiments.PROFILES
    assert fp() == before
    assert fp(None) != whole  # the whole package did change
    # ... but a new config field does
    edit("experiments/distance.py", "    counts = {", "    other_default: int = 1\n\n    counts = {")
    assert fp() != before
    edit("experiments/distance.py", "    other_default: int = 1\n\n", "")
    assert fp() == before
    # code that distance runs: the signature of data.mnist_features
    edit("data.py", "def mnist_features(", "def mnist_features(*_unused, ")
    assert fp() != before
    with pytest.raises(ValueError, match="no experiment module"):
        _code.code_fingerprint("setting9", package)


def test_side_by_side_and_record_line(data_env):
    from ntk_core.experiments import compare

    quick = pd.DataFrame({"noise": [0.0, 0.2], "method": ["GD", "GD"], "mean": [0.05, 0.2]})
    medium = pd.DataFrame({"noise": [0.2, 0.4], "method": ["GD", "GD"], "mean": [0.15, 0.3]})
    paper = pd.DataFrame({"noise": [0.2], "method": ["GD"], "paper": ["≈ 0.1"]})
    both = compare.side_by_side(quick, medium, ["noise", "method"], "mean", paper)
    assert both.columns.tolist() == ["noise", "method", "quick", "medium", "paper"]
    row = both[both["noise"] == 0.2].iloc[0]
    assert (row["quick"], row["medium"], row["paper"]) == (0.2, 0.15, "≈ 0.1")
    assert both[both["noise"] == 0.4]["quick"].isna().all() and len(both) == 3
    assert both["noise"].tolist() == [0.0, 0.2, 0.4]
    # keys keep the quick order, and a medium-only key follows its predecessor there (no lexicographic sort)
    q = pd.DataFrame({"run": ["λ = 2", "λ = 10", "width 512", "width 1024"], "v": [1.0, 2.0, 3.0, 4.0]})
    m = pd.DataFrame({"run": ["λ = 2", "λ = 10", "λ = 40", "width 512", "width 1024", "width 2048"], "v": 6 * [0.0]})
    order = compare.side_by_side(q, m, ["run"], "v")["run"].tolist()
    assert order == ["λ = 2", "λ = 10", "λ = 40", "width 512", "width 1024", "width 2048"]
    alone = compare.side_by_side(quick, None, ["noise", "method"], "mean")
    assert alone["medium"].isna().all()
    with pytest.raises(ValueError, match="no column"):
        compare.side_by_side(quick, None, ["noise", "seed"], "mean")

    assert "not recorded yet" in compare.record_line("setting1", None)
    root = data_env / "records"
    fresh = _record_tiny(root)  # a tiny config: stale against the quick profile's own
    assert "STALE" in compare.record_line("setting1", fresh)
    current = experiments.Result(fresh.table, dict(fresh.meta, stale=False, stale_reasons=[]))
    assert "current" in compare.record_line("setting1", current)
    stale = dict(fresh.meta, stale=True, stale_reasons=["code fingerprint differs"])
    line = compare.record_line("setting1", experiments.Result(fresh.table, stale))
    assert "STALE" in line and "--record" in line
    rows = compare.config_table(fresh).set_index("parameter")["value"]
    assert rows["width"] == "16" and rows["λ grid"] == "0.5, 2" and "profile" not in rows.index
