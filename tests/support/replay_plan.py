"""The replay of the medium records as a pytest plugin (loaded by ``tests/conftest.py``): its processes start with the
session's first test, so that they run beside the rest of the suite, and ``tests/test_recorded.py`` collects them.

Which units: one of **every** unit class of every record (``unit_class``: units of one class run the same code with
other numbers), so that a record that does not reproduce fails every run, not the runs that happen to draw its
class; the unit of each class is drawn among its cheapest half with the seed ``NTK_REPLAY_SEED`` (drawn and printed
by ``conftest.py`` unless given). A unit of an experiment with per-epoch rows (Settings 2 and 3) is replayed as a
**cut**: its first epochs only, compared bit for bit (``experiments._record.EpochCut``), and a unit of
``bound_scale`` by its rows at the leading λ (``experiments._record.RowCut``: two or three factorisations of
K + λ²I instead of one per λ of the grid), which is what makes every class affordable in ``make test``;
``NTK_REPLAY_WHOLE=1`` (``make replay``) replays whole units instead. ``NTK_REPLAY_MAX_S`` (seconds of recorded
compute over all records, a cut counted by its share of the run) replays a sample of the classes within that
budget instead of all of them. Each unit is replayed by ``python -m ntk_core replay`` in a process of its own, one
thread each, two at a time, longest first; each record's ``table.csv`` is checked too, and each record's
**canary** (its configuration shrunk to seconds: every code path, late epochs and rows computed beside the units
included) is computed whole and compared byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

#: the replay budget of this run (``NTK_REPLAY_MAX_S``, seconds of recorded compute over all records; unset: one
#: unit of every class of every record)
REPLAY_MAX_S = float(os.environ.get("NTK_REPLAY_MAX_S", "inf"))
#: whole units (``NTK_REPLAY_WHOLE=1``, ``make replay``) instead of the units with per-epoch rows cut to their first epochs
REPLAY_WHOLE = os.environ.get("NTK_REPLAY_WHOLE", "0") == "1"
#: the test that reads the replays (``tests/test_recorded.py``)
REPLAY_TEST = "test_recorded_result_replays"


def replay_seed() -> int:
    """The seed that draws the unit of each class (``NTK_REPLAY_SEED``, set by ``conftest.py``)."""
    return int(os.environ["NTK_REPLAY_SEED"])


#: the key of a record's canary job (``key=None`` is its table check)
CANARY = "canary"


def _replay_cli(name: str, key: dict | str | None, out: str, env: dict[str, str]) -> tuple[int, dict, str]:
    """``python -m ntk_core replay <name> --key <key>`` (``key=None``: ``--table``; :data:`CANARY`: ``--canary``)
    in a process of its own: exit status, its JSON, its stderr."""
    if key is None or key == CANARY:
        which = ["--table" if key is None else "--canary"]
    else:
        which = ["--key", json.dumps(key), *([] if REPLAY_WHOLE else ["--cut"])]
    done = subprocess.run(
        [sys.executable, "-m", "ntk_core", "replay", name, *which, "--json", out],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    result = json.loads(open(out, encoding="utf-8").read()) if os.path.exists(out) else {}
    return done.returncode, result, done.stderr[-3000:]


@pytest.fixture(scope="session")
def replays(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    """The chosen units of every record, replayed two at a time, longest first: {name: [(key, future)]} (or a
    reason), each record's table check (key ``None``) and canary (key :data:`CANARY`) included."""
    from ntk_core import experiments
    from ntk_core.experiments._record import RecordMissing, choose_across, cut_of_record, record_dir, recorded

    env = {**os.environ, "NTK_CORE_DATA": str(shared_data), "OMP_NUM_THREADS": "1"}
    env.pop("NTK_CORE_CACHE", None)
    folder = tmp_path_factory.mktemp("replays")
    plans: dict[str, object] = {}
    units_by_record: dict[str, list[dict]] = {}
    for name in experiments.EXPERIMENTS:
        try:
            recorded(name, "medium")
        except RecordMissing as missing:
            plans[name] = f"no recorded medium result of {name} yet: {missing}"
            continue
        units = json.loads((record_dir(name, "medium") / "units.json").read_text())
        cut = None if REPLAY_WHOLE else cut_of_record(name, "medium")
        units_by_record[name] = units if cut is None else cut.costs(units)  # a cut's share of the time
    chosen = choose_across(units_by_record, seed=replay_seed(), max_seconds=REPLAY_MAX_S)
    jobs = []
    for name, units in chosen.items():
        plans[name] = []
        canary = recorded(name, "medium").meta.get("canary") or {}
        jobs += [(u["seconds"] or 0.0, name, u["key"]) for u in units] + [(0.0, name, None)]  # None: its table
        jobs.append((float(canary.get("seconds", 0.0)), name, CANARY))
    pool = ThreadPoolExecutor(max_workers=2)
    for i, (_, name, key) in enumerate(sorted(jobs, key=lambda j: -j[0])):
        future: Future = pool.submit(_replay_cli, name, key, str(folder / f"{name}-{i}.json"), env)
        plans[name].append((key, future))  # type: ignore[union-attr]
    yield plans
    pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture(scope="session", autouse=True)
def _replays_start_with_the_session(request: pytest.FixtureRequest) -> None:
    """Start the replays with the first test when the session runs the replay test (and has the data), so that
    they run beside the other tests instead of after them."""
    from conftest import _shared_data_dir

    if _shared_data_dir() is not None and any(
        getattr(item, "originalname", "") == REPLAY_TEST for item in request.session.items
    ):
        request.getfixturevalue("replays")
