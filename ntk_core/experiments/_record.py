"""Recorded results: an experiment run once (the ``medium`` profile), kept in the repository with its provenance.

A record lives in ``<root>/<profile>/<experiment>/`` (``root``: the repository's
``results/`` folder, or ``$NTK_CORE_RECORDS``):

* ``table.csv``: the result table, floats written with ``repr`` precision (they
  read back bit for bit with ``float_precision="round_trip"``), readable in a diff;
* ``units.json``: one line per unit of work: its key, its compute time in
  seconds and its rows, so that single units can be replayed (:func:`replay`);
* ``canary.csv``: the record's canary, its configuration shrunk to seconds and computed whole
  (:mod:`~ntk_core.experiments._canary`), replayed bit for bit by ``make test``;
* ``provenance.json``: configuration and its hash, the code fingerprint of the recording (information),
  data sources and their fingerprints, machine, library versions, threads, wall time, the ``git`` commit,
  the SHA-256 of ``table.csv``, ``units.json`` and ``canary.csv`` (checked on load), sealed by the SHA-256 of
  the whole;
* ``work/``: the resumable unit store of the recording run (one checksummed
  ``.npz`` per finished unit, through :mod:`ntk_core._store`). Commit it while a
  recording is under way: an interrupted run continues where it stopped.

:func:`recorded` loads a record as a :class:`~ntk_core.experiments.Result`; its
``meta["stale"]`` is True when the profile's current configuration differs from the
recorded one, and ``meta["refresh"]`` is the command that records it again. A record
is current for the code because it replays: one unit of every unit class
(:func:`replay`) and its canary, bit for bit, in ``make test``; a change that moves no
recorded number needs nothing. Every file is written atomically through
:mod:`ntk_core._store`.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, TextIO

import numpy as np
import pandas as pd

from .. import _store
from . import _arithmetic
from ..data import readable
from ._runner import (
    Result,
    RunContext,
    _jsonable,
    _round_trip,
    code_fingerprint,
    config_hash,
    first_units,
    prefetch_units,
)

__all__ = [
    "RecordMissing",
    "record_dir",
    "records_root",
    "record_experiment",
    "recorded",
    "units_in_progress",
    "replay",
    "ReplayTooCostly",
    "ArithmeticDiffers",
    "check_table",
    "table_differences",
    "add_canary",
    "compute_fresh",
    "choose_units",
    "EpochCut",
    "CUT_EPOCHS",
    "cut_for",
    "cut_of_record",
    "RowCut",
    "choose_across",
    "unit_class",
    "UnitCheck",
    "compare_rows",
]

_REPO = Path(__file__).resolve().parents[2]


class RecordMissing(FileNotFoundError):
    """No record of this experiment and profile exists (yet)."""


def records_root() -> Path:
    """``$NTK_CORE_RECORDS`` if set, else the ``results/`` folder of the project checkout that holds the package.

    Raises :class:`RecordMissing` when neither exists: a package installed into ``site-packages`` has no
    checkout, and its records must not be written among the installed files.
    """
    env = os.environ.get("NTK_CORE_RECORDS")
    if env:
        return Path(env).expanduser()
    if (_REPO / "pyproject.toml").is_file() and (_REPO / "ntk_core" / "__init__.py").is_file():
        return _REPO / "results"
    raise RecordMissing(
        f"ntk_core is installed outside a project checkout ({_REPO / 'ntk_core'}), which has no results/ folder: "
        "set NTK_CORE_RECORDS to the folder that holds (or is to hold) the records, e.g. a checkout's results/"
    )


def record_dir(name: str, profile: str = "medium", root: str | os.PathLike[str] | None = None) -> Path:
    """The folder of the record of experiment ``name`` in ``profile``: ``<root>/<profile>/<name>``."""
    return (Path(root) if root is not None else records_root()) / profile / name


def refresh_command(name: str, profile: str) -> str:
    return f"python -m ntk_core run {name} --profile {profile} --record"


def _git_commit() -> dict[str, Any]:
    """``git rev-parse HEAD`` of the repository holding the code, and whether ntk_core differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=_REPO, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "status", "--porcelain", "--", "ntk_core"],
                cwd=_REPO,
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            != ""
        )
        return {"commit": head, "ntk_core_modified": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "ntk_core_modified": None}


def _versions() -> dict[str, str]:
    import scipy
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "scipy": scipy.__version__,
    }


def _cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else :func:`platform.processor`."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _machine() -> dict[str, Any]:
    import torch

    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def _table_csv(table: pd.DataFrame) -> bytes:
    # shortest repr that reads back bit for bit (``float_precision="round_trip"``)
    return table.to_csv(index=False, float_format=lambda v: repr(float(v))).encode()


def _units_json(units: list[dict[str, Any]]) -> bytes:
    lines = [json.dumps(u, sort_keys=True, allow_nan=True) for u in units]
    return ("[\n" + ",\n".join(lines) + "\n]\n").encode()


def record_experiment(
    name: str,
    config: Any,
    compute: Callable[[Any, RunContext], pd.DataFrame],
    *,
    root: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    progress: bool = False,
    out: TextIO | None = None,
    workers: int = 1,
    first: list[dict[str, Any]] | None = None,
    canary: Any = None,
) -> Result:
    """Run ``compute`` on ``config`` with its units stored in the record's ``work/`` folder, then write the record.

    ``canary``: the record's canary configuration (:func:`ntk_core.experiments._canary.canary_config`), computed
    whole after the record and written beside it (``canary.csv``: :func:`add_canary`).

    ``workers`` > 1 computes the units in that many processes at once (``prefetch_units`` in ``_runner.py``).
    ``first``: parts of unit keys (``[{"n": 60000}]``) whose units are computed before all the others
    (``first_units``), so that a long unit does not run when a session ends; the record is the same.

    Units already in ``work/`` (same experiment, config, code and data) are reused: an interrupted recording
    resumes unit by unit. Returns the :class:`Result` as :func:`recorded` will load it.
    """
    profile = config.profile
    folder = record_dir(name, profile, root)
    key = config_hash(name, config)
    arithmetic = _arithmetic.current()
    # the arithmetic is part of a recorded unit's identity: units computed on another CPU are not mixed in
    identity = {
        "experiment": name,
        "config": _jsonable(config),
        "code": code_fingerprint(name),
        "arithmetic": arithmetic,
    }
    work = folder / "work"
    with _store.file_lock(work / f"{key}.lock"):
        for stale in (work / f"{key}.units").glob(".*.part"):
            stale.unlink(missing_ok=True)
        log: list[dict[str, Any]] = []
        ctx = RunContext(
            unit_dir=work / f"{key}.units", progress=progress, identity=identity, use_cache=use_cache, log=log
        )
        start = time.perf_counter()
        first_units(compute, config, ctx, first or [])
        prefetch_units(compute, config, ctx, workers)
        table = _round_trip(compute(config, ctx))
        wall = time.perf_counter() - start
        unique: dict[str, dict[str, Any]] = {}
        for entry in log:  # a unit that recurs (distance's base point, say) is listed once
            unique.setdefault(_canon(entry["key"]), entry)
        log = list(unique.values())
        unit_seconds = [u["seconds"] for u in log if u["seconds"] is not None]
        table_bytes, units_bytes = _table_csv(table), _units_json(log)
        provenance = {
            "experiment": name,
            "profile": profile,
            "config": _jsonable(config),
            "config_hash": key,
            "code": identity["code"],
            "git": _git_commit(),
            "data": ctx.data,
            "data_fingerprints": ctx.data_fingerprints,
            "device": config.device,
            "seeds": list(config.seeds),
            "machine": _machine(),
            "arithmetic": arithmetic,
            "versions": _versions(),
            "wall_time_s": wall,
            "unit_seconds_total": float(sum(unit_seconds)),
            "units": len(log),
            "units_computed": ctx.units_computed,
            "units_resumed": ctx.units_loaded,
            "rows": len(table),
            "recorded_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(
                [
                    "python -m ntk_core" if Path(sys.argv[0]).name == "__main__.py" else Path(sys.argv[0]).name,
                    *sys.argv[1:],
                ]
            ),
            "files": {"table.csv": _store.sha256_bytes(table_bytes), "units.json": _store.sha256_bytes(units_bytes)},
        }
        _store.atomic_write_bytes(folder / "table.csv", table_bytes)
        _store.atomic_write_bytes(folder / "units.json", units_bytes)
        (folder / "canary.csv").unlink(missing_ok=True)  # an earlier record's: this record's own replaces it
        if canary is not None:  # the canary that make test replays in seconds, made with the record
            add_canary(folder, provenance, name, canary)
        # provenance last: a record is complete (and checks) only once it is written
        _write_provenance(folder / "provenance.json", provenance)
        pruned = _prune_work(work, keep=key)
    if out is not None:
        print(
            f"{name}: {wall:.1f} s ({ctx.units_computed} units computed, {ctx.units_loaded} resumed); "
            f"recorded in {folder}"
            + (f"; removed the unit stores of {len(pruned)} earlier configuration(s)" if pruned else ""),
            file=out,
        )
    return recorded(name, profile, root=root)


def compute_fresh(name: str, provenance: dict[str, Any], config: Any) -> tuple[bytes, float]:
    """``config`` of the record's experiment computed whole, every unit fresh, with the record's torch thread
    count: its table as a record writes it (CSV bytes) and the compute seconds (a canary, :func:`add_canary`)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ntk_fresh_") as tmp:
        ctx = RunContext(unit_dir=Path(tmp), use_cache=False, identity={"experiment": name, "fresh": True})
        start = time.perf_counter()
        table = _compute_as_recorded(name, provenance, config, ctx)
        seconds = time.perf_counter() - start
    return _table_csv(_round_trip(table)), seconds


def add_canary(folder: Path, provenance: dict[str, Any], name: str, canary: Any) -> float:
    """Compute the record's canary (the configuration ``canary``) whole, in this process's arithmetic (the
    command's: :data:`~ntk_core.experiments._arithmetic.PINS`, which replays on every CPU maker), write ``canary.csv`` into
    ``folder`` and describe it in ``provenance`` (its SHA-256 in ``files``, its configuration, seconds and
    arithmetic under ``canary``), which the caller then writes, sealed. Returns the canary's compute seconds."""
    table, seconds = compute_fresh(name, provenance, canary)
    _store.atomic_write_bytes(folder / "canary.csv", table)
    provenance["files"]["canary.csv"] = _store.sha256_bytes(table)
    canary_meta = {"config": _jsonable(canary), "seconds": round(seconds, 2), "arithmetic": _arithmetic.current()}
    provenance["canary"] = canary_meta
    return seconds


def _prune_work(work: Path, keep: str) -> list[str]:
    """Delete from ``work/`` the unit stores of every other key than ``keep``; returns the keys removed.

    A unit store is keyed by the configuration and code it was computed with. Once the record of ``keep``
    is written, the stores of earlier configurations or code are of no use (the record holds its own rows,
    and a recording of an older key would not be current); left in place they would grow the repository
    with every re-recording. A store whose lock another process holds (a recording still running) is kept.
    """
    removed = []
    for units in sorted(work.glob("*.units")):
        other = units.name[: -len(".units")]
        if other == keep:
            continue
        try:
            with _store.file_lock(work / f"{other}.lock", timeout=0):
                shutil.rmtree(units)
        except TimeoutError:
            continue
        removed.append(other)
    return removed


def _read_verified(folder: Path, file: str, provenance: dict[str, Any]) -> bytes:
    path = folder / file
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{path}: missing (the record in {folder} is incomplete)") from None
    expected = provenance.get("files", {}).get(file)
    if _store.sha256_bytes(data) != expected:
        again = refresh_command(str(provenance.get("experiment")), str(provenance.get("profile")))
        raise ValueError(
            f"{path}: SHA-256 differs from the one in provenance.json (damaged or edited by hand); "
            f"record it again: {again}"
        )
    return data


def unit_seconds(name: str, profile: str = "medium", *, root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The seconds of computing of each unit of a record: one row per unit, its key's items and ``seconds``
    (NaN where a unit was resumed without its time), read from the record's verified ``units.json``.

    Raises :class:`RecordMissing` when there is no record, ``ValueError`` when ``units.json`` is damaged.
    """
    folder = record_dir(name, profile, root)
    provenance = _provenance(folder, name, profile)
    units_list = json.loads(_read_verified(folder, "units.json", provenance))
    rows = [{**u["key"], "seconds": math.nan if u.get("seconds") is None else float(u["seconds"])} for u in units_list]
    return pd.DataFrame(rows)


def units_in_progress(name: str, profile: str = "medium", *, root: str | os.PathLike[str] | None = None) -> int:
    """How many finished units of the current code and ``profile`` config the record's unit store (``work/``)
    holds: a recording that has not written its record yet keeps them there (commit them as they come), and the
    same ``--record`` command resumes from them. 0 when there are none or the profile has no config here."""
    from . import make_config

    try:
        key = config_hash(name, make_config(name, profile))
    except ValueError:
        return 0
    return sum(1 for _ in (record_dir(name, profile, root) / "work" / f"{key}.units").glob("*.npz"))


def _provenance(folder: Path, name: str, profile: str) -> dict[str, Any]:
    path = folder / "provenance.json"
    if not path.exists():
        units = units_in_progress(name, profile, root=folder.parent.parent)
        started = f" (a recording is under way: {units} finished units in {folder / 'work'}, resumed by the command)"
        raise RecordMissing(
            f"no recorded {profile} result of {name!r} in {folder}{started if units else ''}; "
            f"record it with `{refresh_command(name, profile)}`"
        )
    try:
        provenance = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not readable JSON ({err})") from None
    if not isinstance(provenance, dict) or provenance.get("experiment") != name:
        raise ValueError(f"{path}: not the provenance of experiment {name!r}")
    again = refresh_command(name, profile)
    for field, kind in _PROVENANCE_FIELDS.items():
        if not isinstance(provenance.get(field), kind):
            raise ValueError(
                f"{path}: field {field!r} is missing or not a {kind.__name__} (damaged or edited); "
                f"record it again: {again}"
            )
    seal = provenance.get("seal")
    if seal is None:  # every record carries one
        raise ValueError(f"{path}: its seal is missing (edited by hand?); record it again: {again}")
    if seal != _seal_of(provenance):
        raise ValueError(
            f"{path}: its contents do not match its seal (SHA-256 of the other fields): damaged or edited by hand; "
            f"record it again: {again}"
        )
    return provenance


#: fields every provenance has, and their JSON types (checked before anything is read from it)
_PROVENANCE_FIELDS: dict[str, type] = {
    "profile": str,
    "config": dict,
    "code": str,
    "files": dict,
    "machine": dict,
    "seeds": list,
    "data": list,
    "data_fingerprints": list,
}


def _seal_of(provenance: dict[str, Any]) -> str:
    """SHA-256 of the provenance without its ``seal`` (canonical JSON): an edit of any field shows."""
    body = {k: v for k, v in provenance.items() if k != "seal"}
    return _store.sha256_bytes(json.dumps(body, sort_keys=True, allow_nan=True).encode())


def _write_provenance(path: Path, provenance: dict[str, Any]) -> None:
    """Write ``provenance`` atomically, sealed (:func:`_seal_of`)."""
    sealed = {**{k: v for k, v in provenance.items() if k != "seal"}, "seal": _seal_of(provenance)}
    _store.atomic_write_bytes(path, (json.dumps(sealed, indent=2, sort_keys=True, allow_nan=True) + "\n").encode())


def recorded(name: str, profile: str = "medium", *, root: str | os.PathLike[str] | None = None) -> Result:
    """The recorded result of experiment ``name`` in ``profile``: table and provenance (``meta``).

    ``meta["stale"]`` is True when the profile's current configuration differs from the recorded one
    (``meta["stale_reasons"]`` says so); ``meta["refresh"]`` is the command that records it again. Whether the
    current code computes the recorded numbers is not decided here but by replaying them (``python -m ntk_core replay``, the
    record's canary: ``make test``); the code fingerprint of the recording (``meta["code"]``) is information.
    Raises :class:`RecordMissing` when there is no record, ``ValueError`` when it is damaged (its seal, or the
    SHA-256 of ``table.csv`` or ``units.json``, does not match).
    """
    from . import get

    get(name)
    folder = record_dir(name, profile, root)
    provenance = _provenance(folder, name, profile)
    table_bytes = _read_verified(folder, "table.csv", provenance)
    table = pd.read_csv(io.BytesIO(table_bytes), float_precision="round_trip")
    _read_verified(folder, "units.json", provenance)  # an edited or missing units.json shows here too
    if "canary.csv" in provenance["files"]:
        _read_verified(folder, "canary.csv", provenance)
    reasons = []
    try:
        from . import make_config

        current = _jsonable(make_config(name, profile))
        if current != provenance.get("config"):
            reasons.append(f"the {profile} configuration of {name} changed since it was recorded")
    except ValueError:
        pass
    meta = {
        **provenance,
        "stale": bool(reasons),
        "stale_reasons": reasons,
        "refresh": refresh_command(name, profile),
        "recorded": True,
        "cached": True,
        "record_dir": str(folder),
    }
    return Result(table, meta)


def summary(result: Result) -> str:
    """Lines for people: what was recorded, where, when, on what, and whether it is stale."""
    m = result.meta
    lines = [
        f"experiment: {m['experiment']} (profile {m['profile']}, config {m['config_hash']}; code fingerprint at "
        f"recording {m['code']})",
        f"recorded: {m.get('recorded_at')} at git commit {m.get('git', {}).get('commit')}",
        f"device: {m['device']} ({m['machine'].get('processor')}, {m['machine'].get('cpu_count')} CPU core(s), "
        f"{m['machine'].get('torch_threads')} torch thread(s))",
        "versions: " + ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items()),
        f"arithmetic: {_arithmetic.describe(_arithmetic.of_record(m))}"
        + ("" if isinstance(m.get("arithmetic"), dict) else " (recorded before pins: the recording VM's own choice)"),
        f"seeds: {m['seeds']}",
    ]
    lines += [f"data: {readable(d)}" for d in m.get("data", [])]
    lines.append(
        f"wall time: {m['wall_time_s']:.1f} s (units: {m['units']}, {m['unit_seconds_total']:.1f} s "
        f"of unit compute in all)"
    )
    canary = m.get("canary")
    lines.append(
        f"canary: {canary['seconds']:.1f} s to compute, replayed byte for byte by `python -m ntk_core replay "
        f"{m['experiment']} --canary`"
        if isinstance(canary, dict)
        else f"canary: none yet (made before canaries): `python -m ntk_core replay {m['experiment']} --canary --record`"
    )
    if m["stale"]:
        lines.append("STALE: " + "; ".join(m["stale_reasons"]) + f". Refresh: {m['refresh']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- replay


def _tupled(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


def unit_class(key: dict[str, Any]) -> str:
    """The class of a unit: its key with every number replaced by ``"#"``, e.g. ``{"lam": "#", "method": "rdi",
    "noise": "#", "seed": "#"}``. Units of one class run the same code with other numbers; units of two classes
    (a method, a loss, a part of an experiment, or a field that is ``None`` in one and a number in the other)
    run different code."""
    return _canon({k: v if v is None or isinstance(v, (str, bool)) else "#" for k, v in key.items()})


def _cheap_classes(units: list[dict[str, Any]], cheapest: float) -> list[list[dict[str, Any]]]:
    """The units of each :func:`unit_class` (in order of first appearance by recorded time), each class cut to
    its ``cheapest`` fraction by recorded compute time (at least one unit; units without a time last)."""
    classes: dict[str, list[dict[str, Any]]] = {}
    for u in sorted(units, key=lambda u: (u["seconds"] is None, u["seconds"] or 0.0)):
        classes.setdefault(unit_class(u["key"]), []).append(u)
    return [group[: max(1, int(len(group) * cheapest))] for group in classes.values()]


def choose_units(
    units_list: list[dict[str, Any]],
    *,
    name: str = "",
    units: int = 2,
    seed: int | None = None,
    cheapest: float = 0.5,
    max_seconds: float | None = None,
    per_class: bool = False,
) -> list[dict[str, Any]]:
    """The units of a record (``units.json``'s entries) that :func:`replay` re-runs.

    Without ``per_class``: ``units`` drawn with ``seed`` among the ``cheapest`` fraction by recorded compute time.
    With ``per_class``: one unit of every :func:`unit_class`, drawn with ``seed`` among the ``cheapest`` fraction
    of its class, so that every code path of the record is replayed whatever the seed. ``max_seconds`` bounds the
    recorded compute time of the units chosen together (classes are taken cheapest first, and those that do not
    fit are left out); :class:`ReplayTooCostly` when not even one unit fits.
    """
    rng = random.Random(seed)
    timed = sorted(units_list, key=lambda u: (u["seconds"] is None, u["seconds"] or 0.0))
    if max_seconds is not None:
        affordable = [u for u in timed if u["seconds"] is not None and u["seconds"] <= max_seconds]
        if not affordable:
            fastest = timed[0]["seconds"] if timed else None
            raise ReplayTooCostly(
                f"the cheapest unit of the {name} record took {fastest if fastest is None else round(fastest)} s "
                f"when recorded, over the replay budget of {max_seconds:g} s"
            )
    if per_class:
        drawn = [rng.choice(group) for group in _cheap_classes(timed, cheapest)]
        limit = len(drawn)
    else:
        pool = timed[: max(units, int(len(timed) * cheapest))]
        drawn = rng.sample(pool, len(pool))
        limit = units
    if max_seconds is None:
        return drawn[:limit]
    picked: list[dict[str, Any]] = []
    spent = 0.0
    for u in drawn:
        if len(picked) < limit and u["seconds"] is not None and spent + u["seconds"] <= max_seconds:
            picked.append(u)
            spent += u["seconds"]
    return picked


def choose_across(
    units_by_record: dict[str, list[dict[str, Any]]],
    *,
    seed: int | None = None,
    max_seconds: float = math.inf,
    cheapest: float = 0.5,
) -> dict[str, list[dict[str, Any]]]:
    """One unit of each of several :func:`unit_class` es of several records, within one budget.

    Every (record, class) pair is a candidate; the pairs are taken in an order drawn with ``seed``, and each
    adds one unit drawn among the ``cheapest`` fraction of its class (by recorded compute time) that still fits
    in ``max_seconds`` of recorded compute time together with those already taken. With no budget
    (``max_seconds = inf``) that is every class of every record, as :func:`choose_units` with ``per_class``;
    with a budget, a sample of the classes whose draw changes with the seed, so that successive seeds replay
    every class in turn (a class whose cheapest units exceed the budget is never drawn: say so).

    Returns ``{record: [unit, ...]}`` with an entry (possibly empty) for every record.
    """
    rng = random.Random(seed)
    candidates = [(name, group) for name, units in units_by_record.items() for group in _cheap_classes(units, cheapest)]
    rng.shuffle(candidates)
    chosen: dict[str, list[dict[str, Any]]] = {name: [] for name in units_by_record}
    spent = 0.0
    for name, group in candidates:
        fits = [u for u in group if spent + (u["seconds"] or 0.0) <= max_seconds]
        if fits:
            unit = rng.choice(fits)
            chosen[name].append(unit)
            spent += unit["seconds"] or 0.0
    return chosen


def _config_from(name: str, provenance: dict[str, Any]) -> Any:
    from . import get

    return get(name).Config(**{k: _tupled(v) for k, v in provenance["config"].items()})


def _canon(key: Any) -> str:
    return json.dumps(key, sort_keys=True)


def compare_rows(recorded_rows: list[dict[str, Any]], fresh_rows: list[dict[str, Any]], tol: float = 1e-6) -> list[str]:
    """Differences between two lists of rows: numbers beyond ``tol`` (absolute and relative), other values unequal."""
    problems = []
    if len(recorded_rows) != len(fresh_rows):
        return [f"{len(recorded_rows)} recorded rows, {len(fresh_rows)} replayed"]
    for i, (a, b) in enumerate(zip(recorded_rows, fresh_rows)):
        if set(a) != set(b):
            problems.append(f"row {i}: columns {sorted(a)} recorded, {sorted(b)} replayed")
            continue
        for col in a:
            x, y = a[col], b[col]
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
            if numeric:
                if not (np.isnan(x) and np.isnan(y)) and not np.isclose(x, y, rtol=tol, atol=tol):
                    problems.append(f"row {i} {col}: recorded {x!r}, replayed {y!r}")
            elif x != y:
                problems.append(f"row {i} {col}: recorded {x!r}, replayed {y!r}")
    return problems


@dataclass
class UnitCheck:
    """One replayed unit: its key, the recorded and the replayed rows, and their differences."""

    key: dict[str, Any]
    recorded: list[dict[str, Any]]
    replayed: list[dict[str, Any]]
    problems: list[str]
    #: an epoch cut: the epochs trained (its per-epoch rows up to them compared); None: no epochs cut
    epochs: int | None = None


class DataDiffer(Exception):
    """The data this machine loads are not those the record was computed from (replay is meaningless)."""


#: set in a process that ``python -m ntk_core`` restarted with a record's arithmetic, so that it never restarts again
REEXEC_ENV = "NTK_CORE_REEXEC"


class ArithmeticDiffers(Exception):
    """This process computes in another floating-point arithmetic than the record (another CPU instruction set,
    or other pins): its numbers would differ in the last bits, and training amplifies them."""


def require_arithmetic(name: str, provenance: dict[str, Any]) -> float:
    """The tolerance of a replay in this process: 0 (bit for bit) where it computes in the record's arithmetic,
    the experiment's :data:`~ntk_core.experiments._arithmetic.CROSS_BRANCH_TOL` where only MKL's branch differs (a
    record made with ``MKL_CBWR=AVX2`` on the other CPU maker) and the experiment has one. Else raise :class:`ArithmeticDiffers`, saying what a user can do:
    in Python, run the command (it restarts itself with the record's pins); from the command, which did that
    already, only a CPU like the recording's can."""
    recorded_arithmetic = _arithmetic.of_record(provenance)
    why = _arithmetic.mismatch(recorded_arithmetic)
    if why is None:
        return 0.0
    branch_only = _arithmetic.only_mkl_branch_differs(recorded_arithmetic)
    if branch_only and name in _arithmetic.CROSS_BRANCH_TOL:
        return _arithmetic.CROSS_BRANCH_TOL[name]
    if branch_only:
        why += (
            f"; {name} trains networks, which turn another branch's last bits into other results within an "
            "epoch, so it has no cross-branch tolerance (its canary, made in MKL's COMPATIBLE branch, replays "
            "bit for bit on either maker's CPU)"
        )
    cpu = provenance.get("machine", {}).get("processor") or "CPU"
    if os.environ.get(REEXEC_ENV):  # the command restarted in the record's pins already: the CPU differs
        advice = f"replay it on a machine like the recording's ({cpu})"
    else:
        advice = f"`python -m ntk_core replay {name}` restarts itself with the record's pins; failing that, replay it on a machine like the recording's ({cpu})"
    raise ArithmeticDiffers(f"this process cannot compute in the arithmetic of the {name} record ({why}): {advice}")


class ReplayTooCostly(Exception):
    """Every unit that :func:`replay` could choose took longer than its ``max_seconds`` budget when recorded."""


class _ReplayDone(BaseException):
    pass


#: the fewest epochs an epoch cut trains (the configs of Settings 2 and 3 need at least 4)
CUT_EPOCHS = 4


@dataclass(frozen=True)
class EpochCut:
    """A partial replay of a training unit: train it for its first ``epochs`` epochs only and compare its per-epoch rows (those of
    the table ``parts`` an experiment names in its module's ``EPOCH_PARTS``) up to that epoch, **bit for bit**.

    The first epochs of a run are the same computation whatever its length: the learning-rate schedule, the
    weight decays and the order of the mini-batches depend on the epoch alone, and the measures taken along the
    way only read the network. So a config with ``epochs`` cut (and the learning-rate milestones after the cut
    left out) trains exactly the first epochs of the recorded run. Differences of arithmetic have not been
    amplified by training yet after a few epochs, so the comparison is exact, not within a tolerance: a last-bit
    difference of the weights shows in the losses and distances of the rows. What an epoch cut does not check
    is what only the later epochs run (the end of the run, the measures at its quarter, half and end, the
    selection among epochs): a whole replay (:func:`replay` without ``partial``) and the canary do.
    """

    parts: tuple[str, ...]
    epochs: int
    of: int

    def rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The per-epoch rows up to :attr:`epochs`."""
        return [r for r in rows if r.get("part") in self.parts and int(r.get("epoch", self.epochs + 1)) <= self.epochs]

    def costs(self, units_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``units.json``'s entries with the recorded compute time of each cut to the cut's share of the run."""
        share = self.epochs / self.of
        return [{**u, "seconds": None if u["seconds"] is None else u["seconds"] * share} for u in units_list]

    def config(self, config: Any) -> Any:
        """``config`` for the first :attr:`epochs` epochs: the learning-rate milestones after them left out."""
        changes: dict[str, Any] = {"epochs": self.epochs}
        if hasattr(config, "lr_milestones"):
            changes["lr_milestones"] = tuple(m for m in config.lr_milestones if m < self.epochs)
        return dataclasses.replace(config, **changes)

    #: the comparison is bit for bit
    exact = True

    def describe(self) -> str:
        return f"their first {self.epochs} of {self.of} epochs"


@dataclass(frozen=True)
class RowCut:
    """A partial replay of an experiment without per-epoch rows whose units compute rows of several kinds, most of
    the time going to kinds a cheaper config leaves out (``bound_scale``: one factorisation of K + λ²I per λ of
    the grid, of which the rows at the leading λ* need none): the config that ``cut`` makes of the recorded one
    computes, of each unit, the rows whose ``column`` is one of ``keep`` by the same arithmetic as the whole
    config, and those rows are compared (within the replay's tolerance, as a whole unit's: BLAS may split a
    factorisation otherwise on another thread count). An experiment declares it in its module as a dict
    ``REPLAY_ROWS = {"column": ..., "keep": (...), "cut": function of the config, "what": what the cut leaves}``. What it does not check is what
    only the left-out rows run: a whole replay (:func:`replay` without ``partial``) and the canary do.
    """

    column: str
    keep: tuple[str, ...]
    cut: Callable[[Any], Any]
    what: str
    #: no epochs: the rows kept are whole rows of the unit
    epochs = None
    exact = False

    def rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows of the kinds kept."""
        return [r for r in rows if r.get(self.column) in self.keep]

    def costs(self, units_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``units.json``'s entries with the recorded compute time of each cut to an estimate of the cut's share:
        ``(rows kept + 1) / (rows + 1)`` (the one for the work every row shares)."""
        return [
            {
                **u,
                "seconds": None
                if u["seconds"] is None
                else u["seconds"] * (len(self.rows(u["rows"])) + 1) / (len(u["rows"]) + 1),
            }
            for u in units_list
        ]

    def config(self, config: Any) -> Any:
        """The cut config."""
        return self.cut(config)

    def describe(self) -> str:
        return f"their rows with {self.column} in {list(self.keep)} ({self.what})"


def cut_for(name: str, config: Any, units_list: list[dict[str, Any]]) -> EpochCut | RowCut | None:
    """The :class:`EpochCut` of a record: its first evaluated epoch from :data:`CUT_EPOCHS` on; for an experiment
    that declares ``REPLAY_ROWS`` its :class:`RowCut`; None when the experiment records no per-epoch rows (its
    module has no ``EPOCH_PARTS``) or that epoch ends the run."""
    from . import get

    declared = getattr(get(name), "REPLAY_ROWS", None)
    if declared is not None:
        return RowCut(declared["column"], tuple(declared["keep"]), declared["cut"], declared["what"])
    parts = tuple(getattr(get(name), "EPOCH_PARTS", ()))
    total = getattr(config, "epochs", None)
    if not parts or not isinstance(total, int):
        return None
    evaluated = {int(r["epoch"]) for u in units_list for r in u["rows"] if r.get("part") in parts and "epoch" in r}
    later = sorted(e for e in evaluated if CUT_EPOCHS <= e < total)
    return EpochCut(parts, later[0], total) if later else None


@dataclass
class _ReplayContext(RunContext):
    recorded_units: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    chosen: set[str] = dataclasses.field(default_factory=set)
    expected_data: list[str] = dataclasses.field(default_factory=list)
    checks: list[UnitCheck] = dataclasses.field(default_factory=list)
    done: set[str] = dataclasses.field(default_factory=set)
    tol: float = 1e-6
    cut: EpochCut | RowCut | None = None

    def add_data(self, description: str, fingerprint: str) -> None:
        super().add_data(description, fingerprint)
        if fingerprint not in self.expected_data:
            raise DataDiffer(
                f"this machine loads other data than the record ({description}); "
                f"install the recorded data (NTK_CORE_DATA) to replay it"
            )

    def unit(
        self, key: dict[str, Any], fn: Callable[[], dict[str, Any] | list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        canon = _canon(_jsonable(key))
        if canon not in self.recorded_units:
            raise ValueError(f"the record has no unit {canon}: the experiment's units changed")
        rows = self.recorded_units[canon]
        if canon in self.chosen and canon not in self.done:
            self.done.add(canon)
            fresh = fn()
            fresh_rows = json.loads(
                json.dumps(fresh if isinstance(fresh, list) else [fresh], default=_cell_default, allow_nan=True)
            )
            cut = self.cut
            kept = [] if cut is None else cut.rows(rows)
            if cut is not None and kept:  # a training unit for the cut's epochs, or the rows a row cut keeps
                fresh_kept = cut.rows(fresh_rows)
                problems = compare_rows(kept, fresh_kept, self.tol)
                check = UnitCheck(json.loads(canon), kept, fresh_kept, problems, cut.epochs)
            else:  # whole (a unit without per-epoch rows, e.g. Setting 2's spectrum, is the same under the cut config)
                check = UnitCheck(json.loads(canon), rows, fresh_rows, compare_rows(rows, fresh_rows, self.tol))
            self.checks.append(check)
            if len(self.checks) == len(self.chosen):
                raise _ReplayDone()
        return json.loads(json.dumps(rows))


def _cell_default(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    raise TypeError(f"cannot compare a {type(value).__name__}: {value!r:.80}")


def cut_of_record(
    name: str, profile: str = "medium", root: str | os.PathLike[str] | None = None
) -> EpochCut | RowCut | None:
    """The :class:`EpochCut` (or :class:`RowCut`) that a partial replay of the record of ``name`` computes
    (:func:`cut_for`)."""
    folder = record_dir(name, profile, root)
    provenance = _provenance(folder, name, profile)
    units_list = json.loads(_read_verified(folder, "units.json", provenance))
    return cut_for(name, _config_from(name, provenance), units_list)


def replay(
    name: str,
    profile: str = "medium",
    *,
    units: int = 2,
    seed: int | None = None,
    root: str | os.PathLike[str] | None = None,
    cheapest: float = 0.5,
    tol: float = 1e-6,
    keys: list[dict[str, Any]] | None = None,
    max_seconds: float | None = None,
    per_class: bool = False,
    partial: bool = False,
) -> list[UnitCheck]:
    """Re-run ``units`` units of the record of ``name`` (chosen at random with ``seed`` among the ``cheapest``
    fraction by recorded compute time, or exactly ``keys``) and compare them with the recorded rows.

    ``partial=True``: where the experiment records per-epoch rows, train each chosen unit for its first epochs only
    and compare those rows bit for bit (:class:`EpochCut`; ``tol`` is then 0, and a unit without per-epoch rows,
    such as Setting 2's spectrum, is compared whole, bit for bit, under the cut config); an experiment without
    per-epoch rows is replayed whole. ``max_seconds`` then counts a cut's share of the unit's recorded time.

    The other units are not computed: their recorded rows are handed back, and the run stops as soon as every
    chosen unit is replayed. The torch thread count is set to the recorded one while replaying (float sums in
    another order could differ in the last bits). Raises :class:`DataDiffer` when this machine loads other
    data than the record. ``max_seconds`` is a budget for the replay, in recorded compute seconds: the chosen
    units together took at most that long when recorded (units are drawn in random order and kept while they
    fit, so fewer than ``units`` may be replayed, but at least one), and :class:`ReplayTooCostly` is raised
    when no single unit fits (an experiment whose every unit is a long training run: the test suite's time
    budget cannot hold it; replay it on purpose with a larger budget). ``per_class=True`` replays one unit of
    every :func:`unit_class` instead (see :func:`choose_units`). Raises :class:`ArithmeticDiffers` when this
    process does not compute in the record's arithmetic (:mod:`~ntk_core.experiments._arithmetic`), but for
    MKL's branch, whose replay compares to the experiment's :data:`~ntk_core.experiments._arithmetic.CROSS_BRANCH_TOL`
    where it has one.
    """

    folder = record_dir(name, profile, root)
    provenance = _provenance(folder, name, profile)
    cross = require_arithmetic(name, provenance)
    units_list = json.loads(_read_verified(folder, "units.json", provenance))
    recorded_units = {_canon(u["key"]): u["rows"] for u in units_list}
    config = _config_from(name, provenance)
    cut = cut_for(name, config, units_list) if partial else None
    if cut is not None:
        config, units_list = cut.config(config), cut.costs(units_list)
        tol = 0.0 if cut.exact else tol
    tol = max(tol, cross)
    if keys is not None:
        chosen = {_canon(_jsonable(k)) for k in keys}
    else:
        picked = choose_units(
            units_list,
            name=name,
            units=units,
            seed=seed,
            cheapest=cheapest,
            max_seconds=max_seconds,
            per_class=per_class,
        )
        chosen = {_canon(u["key"]) for u in picked}
    ctx = _ReplayContext(
        unit_dir=Path(os.devnull),
        recorded_units=recorded_units,
        chosen=chosen,
        expected_data=list(provenance.get("data_fingerprints", [])),
        tol=tol,
        cut=cut,
    )
    try:
        _compute_as_recorded(name, provenance, config, ctx)
    except _ReplayDone:
        pass
    if len(ctx.checks) != len(chosen):
        raise ValueError(f"replay of {name}: {len(chosen) - len(ctx.checks)} chosen unit(s) never came up")
    return ctx.checks


def _compute_as_recorded(name: str, provenance: dict[str, Any], config: Any, ctx: RunContext) -> pd.DataFrame:
    """The experiment's ``compute`` with the torch thread count of the record (float sums in another order could
    differ in the last bits)."""
    import torch

    from . import get

    threads = torch.get_num_threads()
    wanted = provenance.get("machine", {}).get("torch_threads")
    try:
        if isinstance(wanted, int) and wanted > 0:
            torch.set_num_threads(wanted)
        return get(name).compute(config, ctx)
    finally:
        torch.set_num_threads(threads)


def check_table(name: str, profile: str = "medium", *, root: str | os.PathLike[str] | None = None) -> list[str]:
    """Differences between a record's ``table.csv`` and the table its ``units.json`` gives (``[]``: none).

    The experiment's ``compute`` runs with every unit's rows handed back as recorded (nothing is trained), so
    that its own code assembles the table, with whatever it computes beside its units (Setting 1's kernel ridge
    regression, say), in the record's arithmetic; the result must be ``table.csv`` byte for byte. A number edited
    in ``table.csv`` (its checksum updated or not) is found here, since the units and replays never read it.
    Raises :class:`ArithmeticDiffers` like :func:`replay` (and compares to its tolerance where only MKL's branch
    differs).
    """
    folder = record_dir(name, profile, root)
    provenance = _provenance(folder, name, profile)
    rtol = require_arithmetic(name, provenance)
    units_list = json.loads(_read_verified(folder, "units.json", provenance))
    table_bytes = _read_verified(folder, "table.csv", provenance)
    ctx = _ReplayContext(
        unit_dir=Path(os.devnull),
        recorded_units={_canon(u["key"]): u["rows"] for u in units_list},
        expected_data=list(provenance.get("data_fingerprints", [])),
    )
    table = _round_trip(_compute_as_recorded(name, provenance, _config_from(name, provenance), ctx))
    header = table_bytes.split(b"\n", 1)[0].decode().split(",")
    if sorted(header) == sorted(map(str, table.columns)):  # rows read back from JSON have their keys sorted
        table = table[header]
    return table_differences(table_bytes, _table_csv(table), rtol=rtol)


def _cell_text(value: Any) -> str:
    """A table cell for people: a number as Python writes a float (every digit that reads back), else its repr."""
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    return repr(value)


def table_differences(recorded_csv: bytes, fresh_csv: bytes, rtol: float = 0.0) -> list[str]:
    """Differences between two tables written as a record writes its ``table.csv`` (``[]``: none): nothing when
    they are equal byte for byte, else their shapes, or each cell whose numbers differ beyond ``rtol`` (relative
    and absolute, as :func:`compare_rows`) or whose other values differ (at most 20)."""
    if recorded_csv == fresh_csv:
        return []
    old = pd.read_csv(io.BytesIO(recorded_csv), float_precision="round_trip")
    new = pd.read_csv(io.BytesIO(fresh_csv), float_precision="round_trip")
    if list(old.columns) != list(new.columns) or old.shape != new.shape:
        return [
            f"the recorded table has columns {list(old.columns)} and {len(old)} rows, this code gives "
            f"{list(new.columns)} and {len(new)} rows"
        ]
    problems = []
    for col in old.columns:
        a_, b_ = old[col].to_numpy(), new[col].to_numpy()
        if pd.api.types.is_numeric_dtype(old[col]) and pd.api.types.is_numeric_dtype(new[col]):
            bad = ~np.isclose(a_.astype(float), b_.astype(float), rtol=rtol, atol=rtol, equal_nan=True)
        else:
            bad = np.array([x != y and not (pd.isna(x) and pd.isna(y)) for x, y in zip(a_, b_)], dtype=bool)
        problems += [
            f"row {i} {col}: recorded {_cell_text(a_[i])}, this code gives {_cell_text(b_[i])}"
            for i in np.flatnonzero(bad)
        ]
    if not problems and rtol == 0.0:  # equal numbers written differently (a number's format, say)
        problems = ["the tables hold the same values but are not written byte for byte alike"]
    return problems[:20]
