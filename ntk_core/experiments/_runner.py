"""What every experiment shares: configs with quick/medium/full profiles, results, caching, resumable units.

An experiment module defines

* ``Config``: a frozen dataclass derived from :class:`ExperimentConfig`, with ``quick()``, ``medium()``
  and ``full()`` class methods and the fields ``profile``, ``seeds`` and ``device`` (checked on
  construction, with the experiment's own checks);
* ``compute(config, ctx) -> pandas.DataFrame``: the tidy result table.

:func:`run_experiment` wraps ``compute`` with what a reader needs to trust and
reuse a result: metadata (profile, data sources and sizes, device, seeds, wall
time), a result cache and resumable units (``ctx.unit(key, fn)`` stores each
finished unit of work, one training run say, so that an interrupted experiment
restarts where it stopped). All files go through :mod:`ntk_core._store` (one
checksummed ``.npz`` each, written atomically, verified on load; a damaged file
is named in a :class:`~ntk_core._store.DamagedArtifactWarning`, moved aside and
recomputed).

Identity (what must match for a stored file to be reused):

* the **base identity** of a run: experiment name, every config field and the
  fingerprint of the ntk_core source code (:func:`config_hash` names the folder);
* a **unit** adds its key and the fingerprints (SHA-256 of the arrays) of every
  data set loaded so far (``ctx.add_dataset`` / ``ctx.add_data``), so that a unit
  computed on other data (the embedded MNIST subset, say, before full MNIST was
  installed) is "not mine" and recomputed, never mixed in;
* the **whole result** is stored under the base identity and records the data
  fingerprints it was computed from. Before it is reused, ``compute`` is started
  in a probe that stops as soon as the recorded data sets have been loaded again
  (before any training or kernel work) and compares their fingerprints: reuse
  only when they match, otherwise a full run. (The data enter the check through
  what the experiment actually loads, not through the data set's name.)

A run holds a lock (``<config hash>.lock``) for its whole duration: a second run
of the same experiment and config waits, then reuses the first one's result.
``use_cache=False`` reads nothing from the cache but still writes: it recomputes
and overwrites every unit and the result (the repair for a damaged cache).
Tables round-trip exactly: numeric columns are stored as arrays, others as JSON.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, TextIO

import numpy as np
import pandas as pd

from .. import _store
from .._checks import check_count, check_device
from ..data import readable
from ._code import code_fingerprint

__all__ = [
    "ExperimentConfig",
    "check_common",
    "Result",
    "RunContext",
    "run_experiment",
    "prefetch_units",
    "first_units",
    "cache_dir",
    "code_fingerprint",
    "config_hash",
    "data_fingerprint",
]


def cache_dir() -> Path:
    """Where results are cached: ``$NTK_CORE_CACHE``, else ``~/.cache/ntk_core/results``."""
    env = os.environ.get("NTK_CORE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ntk_core" / "results"


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def config_hash(name: str, config: Any) -> str:
    """A short hash of the experiment name, every config field, and the code fingerprint."""
    payload = json.dumps(
        {"experiment": name, "config": _jsonable(config), "code": code_fingerprint(name)}, sort_keys=True, default=str
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def data_fingerprint(dataset: Any) -> str:
    """SHA-256 of the arrays of ``dataset`` (anything that unpacks as ``x, y``: images and labels).

    Dtype, shape and every byte count: two data sets with the same name but other
    images (the embedded MNIST subset and full MNIST, say) have other fingerprints.
    """
    x, y = dataset
    return _store.fingerprint({"x": np.asarray(x), "y": np.asarray(y)})


def _cell(value: Any) -> Any:
    """JSON form of one table cell or unit value (NumPy scalars as Python numbers, exactly)."""
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "item") and callable(value.item):  # a one-element tensor
        return value.item()
    raise TypeError(f"cannot store a {type(value).__name__} in a result table: {value!r:.80}")


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, default=_cell, allow_nan=True).encode()


def _table_to_store(table: pd.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, bytes], list[dict[str, str]]]:
    """Numeric and boolean columns as arrays (bit for bit), text and object columns as one JSON list each."""
    arrays: dict[str, np.ndarray] = {}
    blobs: dict[str, bytes] = {}
    columns: list[dict[str, str]] = []
    for i, name in enumerate(table.columns):
        if not isinstance(name, str):
            raise TypeError(f"result table column names must be strings, got {name!r}")
        column = table[name]
        dtype = column.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "biufc":
            arrays[f"c{i}"] = column.to_numpy()
            columns.append({"name": name, "store": "array"})
        elif (isinstance(dtype, np.dtype) and dtype.kind == "O") or isinstance(dtype, pd.StringDtype):
            # pandas 3 gives text columns a string dtype; both come back as object columns
            blobs[f"c{i}"] = _json_bytes(column.tolist())
            columns.append({"name": name, "store": "json"})
        else:
            raise TypeError(f"result table column {name!r} has dtype {dtype}, which the cache does not store")
    return arrays, blobs, columns


def _table_from_store(stored: _store.Stored) -> pd.DataFrame:
    columns = stored.meta["columns"]
    data: dict[str, Any] = {}
    for i, spec in enumerate(columns):
        if spec["store"] == "array":
            data[spec["name"]] = stored.arrays[f"c{i}"]
        else:
            data[spec["name"]] = pd.Series(json.loads(stored.blobs[f"c{i}"]), dtype=object)
    return pd.DataFrame(data, columns=[c["name"] for c in columns])


def _round_trip(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` exactly as the cache will give it back (same columns, dtypes, values; a fresh index)."""
    arrays, blobs, columns = _table_to_store(table)
    return _table_from_store(_store.Stored(Path(), {}, arrays, blobs, {"columns": columns}))


@dataclass
class Result:
    """A tidy table (one row per measurement) and the metadata that makes it interpretable."""

    table: pd.DataFrame
    meta: dict[str, Any]

    def summary(self) -> str:
        m = self.meta
        lines = [
            f"experiment: {m['experiment']} (profile {m['profile']}, config {m['config_hash']})",
            f"device: {m['device']} ({m.get('machine', '?')})",
            f"seeds: {m['seeds']}",
        ]
        lines += [f"data: {readable(d)}" for d in m.get("data", [])]
        cached = " (loaded from the result cache)" if m.get("cached") else ""
        lines.append(f"wall time: {m['wall_time_s']:.1f} s{cached}")
        return "\n".join(lines)

    def save(self, path: Path) -> None:
        """Write ``<path>.csv`` and ``<path>.json`` atomically: the export for people and other tools."""
        _store.atomic_write_bytes(path.with_suffix(".csv"), self.table.to_csv(index=False).encode())
        _store.atomic_write_bytes(path.with_suffix(".json"), json.dumps(self.meta, indent=2, default=str).encode())

    @classmethod
    def load(cls, path: Path) -> "Result":
        """Read an export written by :meth:`save` (floats exactly as written); errors name the file."""
        csv, meta = path.with_suffix(".csv"), path.with_suffix(".json")
        try:
            table = pd.read_csv(csv, float_precision="round_trip")
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
            raise ValueError(f"{csv}: not a readable result table ({err})") from None
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{meta}: not readable JSON ({err})") from None
        return cls(table, data)


class _ProbeDone(BaseException):
    """Stops ``compute`` in the data probe; ``match`` says whether the data are those recorded."""

    def __init__(self, match: bool) -> None:
        super().__init__(match)
        self.match = match


@dataclass
class RunContext:
    """Handed to ``compute``: records the data used (with fingerprints) and caches units of work.

    ``identity`` is the run's base identity (experiment, config, code); each unit
    is stored with it, its key and the fingerprints of the data loaded so far.
    With ``use_cache=False`` units are recomputed (and written) even if stored.
    """

    unit_dir: Path
    progress: bool = False
    data: list[str] = field(default_factory=list)
    data_fingerprints: list[str] = field(default_factory=list)
    units_computed: int = 0
    units_loaded: int = 0
    identity: dict[str, Any] = field(default_factory=dict)
    use_cache: bool = True
    #: when a list, every unit appends ``{"key", "seconds", "rows"}`` to it (what a recorded result keeps)
    log: list[dict[str, Any]] | None = None
    #: names of the units computed for this run before it (by the worker processes of ``prefetch_units``, or by
    #: ``first_units``): read back even when ``use_cache`` is False, and counted as computed
    fresh: set[str] = field(default_factory=set)
    #: how many of the units computed were computed ahead of the run (by those workers or ``first_units``)
    units_from_workers: int = 0

    def add_data(self, description: str, fingerprint: str) -> None:
        """Record a data set used: ``description`` for people, ``fingerprint`` (:func:`data_fingerprint`) for the cache."""
        if not isinstance(fingerprint, str) or len(fingerprint) != 64:
            raise ValueError(f"add_data needs the SHA-256 fingerprint of the arrays, got {fingerprint!r}")
        if fingerprint not in self.data_fingerprints:
            self.data_fingerprints.append(fingerprint)
        if description not in self.data:
            self.data.append(description)

    def add_dataset(self, dataset: Any) -> None:
        """:meth:`add_data` for an :class:`~ntk_core.data.ImageDataset` or :class:`~ntk_core.data.BinaryTask`."""
        self.add_data(dataset.describe(), data_fingerprint(dataset))

    def unit(
        self, key: dict[str, Any], fn: Callable[[], dict[str, Any] | list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """Rows of one unit of work, computed by ``fn`` once and then read back from disk.

        ``key`` identifies the unit within the experiment (for example
        ``{"noise": 0.2, "method": "rdi", "lam": 4, "seed": 0}``). A stored unit is
        reused only if it was computed with the same experiment, config, code and
        data; the rows come back exactly as a fresh computation gives them.
        """
        name, path, identity = self._where(key)
        if self.use_cache or name in self.fresh:
            stored = _store.load(path, identity)
            if stored is not None:
                rows = _unit_rows(stored)
                if rows is not None:
                    if name in self.fresh:  # (a unit that recurs is read back each time)
                        self.units_computed += 1
                        self.units_from_workers += 1
                    else:
                        self.units_loaded += 1
                    self._log(key, stored.meta.get("seconds"), rows)
                    return rows
        seconds, rows = self._compute_unit(path, identity, fn)
        self.units_computed += 1
        self._log(key, seconds, rows)
        return rows

    def _where(self, key: dict[str, Any]) -> tuple[str, Path, dict[str, Any]]:
        """A unit's name, file and identity (its key and the data loaded so far)."""
        name = hashlib.sha256(json.dumps(_jsonable(key), sort_keys=True).encode()).hexdigest()[:16]
        identity = {**self.identity, "data": list(self.data_fingerprints), "unit": _jsonable(key)}
        return name, self.unit_dir / f"{name}.npz", identity

    @staticmethod
    def _compute_unit(
        path: Path, identity: dict[str, Any], fn: Callable[[], dict[str, Any] | list[dict[str, Any]]]
    ) -> tuple[float, list[dict[str, Any]]]:
        """Run ``fn``, store its rows (atomically) and return the seconds it took and the rows as stored."""
        start = time.perf_counter()
        fresh = fn()
        seconds = time.perf_counter() - start
        fresh = fresh if isinstance(fresh, list) else [fresh]
        if not fresh or not all(isinstance(r, dict) for r in fresh):
            raise ValueError(f"a unit must give at least one row (a dict), got {fresh!r:.200}")
        blob = _json_bytes(fresh)
        _store.save(path, identity, blobs={"rows": blob}, meta={"seconds": seconds})
        return seconds, json.loads(blob)

    def _log(self, key: dict[str, Any], seconds: Any, rows: list[dict[str, Any]]) -> None:
        if self.log is not None:
            self.log.append(
                {"key": _jsonable(key), "seconds": seconds if isinstance(seconds, float) else None, "rows": rows}
            )


def _unit_rows(stored: _store.Stored) -> list[dict[str, Any]] | None:
    """The rows of a stored unit, or ``None`` (the file set aside, with a warning) if they are not rows."""
    try:
        rows = json.loads(stored.blobs["rows"])
    except (KeyError, ValueError) as err:
        _store.set_aside(stored.path, f"no readable rows ({type(err).__name__}: {err})")
        return None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        _store.set_aside(stored.path, f"the unit holds {str(rows)[:60]!r}, not a non-empty list of rows")
        return None
    return rows


@dataclass
class _Prefetch(RunContext):
    """Runs ``compute`` ahead of the real run, forking each unit that is not stored yet into a worker process.

    A unit's function runs in a child made by ``os.fork`` at the moment ``compute`` asks for the unit, so it
    sees exactly the state (data, labels, loop variables, random generators) that a sequential run would hand
    it; the child stores the unit's rows like :meth:`RunContext.unit` and exits. The parent does not wait: it
    hands ``compute`` an empty list in place of the rows and goes on to the next unit, with at most ``workers``
    children at a time. Stored units are read back as usual, so ``compute`` sees their rows.
    """

    workers: int = 2
    children: dict[int, str] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def unit(
        self, key: dict[str, Any], fn: Callable[[], dict[str, Any] | list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        import sys

        import torch

        name, path, identity = self._where(key)
        if self.use_cache:
            stored = _store.load(path, identity)
            rows = _unit_rows(stored) if stored is not None else None
            if rows is not None:
                return rows
        if name in self.done or name in self.children.values():
            return []
        while len(self.children) >= self.workers:
            self._reap(wait=True)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker: one thread (the parent's thread pool does not survive a fork), then exit
            status = 1
            try:
                torch.set_num_threads(1)
                self._compute_unit(path, identity, fn)
                status = 0
            finally:
                os._exit(status)
        self.children[pid] = name
        return []

    def _reap(self, wait: bool) -> None:
        """Collect the workers that have finished; with ``wait``, at least one."""
        while True:
            for pid in list(self.children):
                finished, status = os.waitpid(pid, os.WNOHANG)
                if finished:
                    name = self.children.pop(pid)
                    if os.waitstatus_to_exitcode(status) == 0:
                        self.done.add(name)  # a failed unit is left to the real run, which raises its error
            if not wait or len(self.children) < self.workers:
                return
            time.sleep(0.02)

    def finish(self, kill: bool = False) -> None:
        """Wait for every worker (after terminating them when ``kill``)."""
        if kill:
            for pid in self.children:
                os.kill(pid, 15)
        while self.children:
            self._reap(wait=False)
            if self.children:
                time.sleep(0.02)


def prefetch_units(
    compute: Callable[[Any, RunContext], pd.DataFrame], config: Any, ctx: RunContext, workers: int
) -> None:
    """Compute the units of ``compute`` that ``ctx`` does not hold yet in up to ``workers`` processes at once.

    A no-op for one worker, on a CUDA device (a forked process cannot use CUDA) or where ``os.fork`` does not
    exist. The work between units (loading data, a kernel shared by several units) runs once here and once
    in the real run that follows, which reads every unit back. ``compute`` may fail on the empty rows it is
    handed here (a later step that needs a unit's rows, say): the units started until then are still
    computed, and the real run does the rest and raises any genuine error.
    """
    check_count(workers, "workers", 1)
    if workers == 1 or not hasattr(os, "fork") or str(config.device).startswith("cuda"):
        return
    pre = _Prefetch(unit_dir=ctx.unit_dir, identity=ctx.identity, use_cache=ctx.use_cache, workers=workers)
    try:
        compute(config, pre)
    except Exception:  # noqa: BLE001  (see the docstring: the real run raises what is real)
        pass
    except BaseException:
        pre.finish(kill=True)
        raise
    pre.finish()
    ctx.fresh |= pre.done


@dataclass
class _First(RunContext):
    """Runs ``compute``, computing (in this process) only the units whose key holds every item of one of
    ``first``; the others get an empty list of rows, as :class:`_Prefetch` hands them."""

    first: tuple[dict[str, Any], ...] = ()
    computed: set[str] = field(default_factory=set)
    example: dict[str, Any] | None = None  # the first key seen, for the error message of a first that matches none

    def unit(
        self, key: dict[str, Any], fn: Callable[[], dict[str, Any] | list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        plain = _jsonable(key)
        self.example = self.example or plain
        if not any(all(k in plain and plain[k] == v for k, v in want.items()) for want in self.first):
            return []
        before = self.units_computed
        rows = super().unit(key, fn)
        if self.units_computed > before:
            self.computed.add(self._where(key)[0])
        return rows


def first_units(
    compute: Callable[[Any, RunContext], pd.DataFrame], config: Any, ctx: RunContext, first: list[dict[str, Any]]
) -> int:
    """Compute the units of ``compute`` whose key holds every item of one of ``first`` before all the others.

    A unit's key does not depend on when it is computed, so a long unit can go first: a recording that a
    session's end stops loses only the unit it was computing, and that should be a short one. The units are
    computed in this process in the order ``compute`` reaches them; ``compute`` then runs as usual and reads
    them back. A ``first`` that matches no unit is an error (a misspelt key would otherwise pass silently).

    Returns
    -------
    int
        The number of units matched (computed now, or found already stored).
    """
    if not first:
        return 0
    for want in first:
        if not isinstance(want, dict) or not want:
            raise ValueError(f"each first unit must be a non-empty dict of key items, got {want!r}")
    pre = _First(unit_dir=ctx.unit_dir, identity=ctx.identity, use_cache=ctx.use_cache, first=tuple(first))
    stopped = ""
    try:
        compute(config, pre)
    except Exception as err:  # noqa: BLE001  (compute may fail on the empty rows; the real run raises what is real)
        stopped = f" (compute stopped early on the empty rows of the other units: {type(err).__name__}: {err})"
    matched = pre.units_computed + pre.units_loaded
    if not matched:
        raise ValueError(
            f"no unit's key holds {first}; a unit key of this experiment looks like {pre.example}{stopped}"
        )
    ctx.fresh |= pre.computed
    return matched


class _DataProbe(RunContext):
    """Runs ``compute`` only until the recorded data sets are loaded again; raises :class:`_ProbeDone`."""

    expected: list[str]

    def add_data(self, description: str, fingerprint: str) -> None:
        super().add_data(description, fingerprint)
        if fingerprint not in self.expected:
            raise _ProbeDone(False)
        if set(self.data_fingerprints) >= set(self.expected):
            raise _ProbeDone(True)

    def unit(
        self, key: dict[str, Any], fn: Callable[[], dict[str, Any] | list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        raise _ProbeDone(False)  # work starts before every recorded data set was loaded: not the same run


def _same_data(compute: Callable[[Any, RunContext], pd.DataFrame], config: Any, recorded: list[str]) -> bool:
    """Whether ``compute`` would load exactly the data sets (by fingerprint) that ``recorded`` lists."""
    if not recorded:
        return True  # an experiment that loads no data (loading some would be a code change: another key)
    probe = _DataProbe(unit_dir=Path(os.devnull))
    probe.expected = list(recorded)
    try:
        compute(config, probe)
    except _ProbeDone as done:
        return done.match
    return False


def run_experiment(
    name: str,
    config: ExperimentConfig,
    compute: Callable[[Any, RunContext], pd.DataFrame],
    *,
    use_cache: bool = True,
    progress: bool = False,
    out: TextIO | None = None,
    workers: int = 1,
) -> Result:
    """Run (or load from the cache) one experiment and return its :class:`Result`.

    See the module docstring for what is cached, how it is keyed and verified.
    ``use_cache=False`` recomputes everything and overwrites the cache. ``workers`` > 1 computes the units
    in that many processes at once (``prefetch_units`` in ``_runner.py``).
    """
    check_count(workers, "workers", 1)
    key = config_hash(name, config)
    folder = cache_dir() / name
    identity = {"experiment": name, "config": _jsonable(config), "code": code_fingerprint(name)}
    with _store.file_lock(folder / f"{key}.lock"):
        # a run killed while writing leaves its temporary file; this config's writers all hold the lock
        for stale in [*folder.glob(f".{key}.npz.*.part"), *(folder / f"{key}.units").glob(".*.part")]:
            stale.unlink(missing_ok=True)
        if use_cache:
            cached = _load_result(folder / f"{key}.npz", identity, compute, config)
            if cached is not None:
                return cached
        result = _compute(
            name, key, identity, config, compute, folder, use_cache=use_cache, progress=progress, workers=workers
        )
        arrays, blobs, columns = _table_to_store(result.table)
        _store.save(
            folder / f"{key}.npz",
            identity,
            arrays=arrays,
            blobs=blobs,
            meta={"columns": columns, "result": result.meta},
        )
    if out is not None:
        m = result.meta
        print(
            f"{name}: {m['wall_time_s']:.1f} s ({m['units_computed']} units computed, {m['units_resumed']} resumed)",
            file=out,
        )
    return result


def _load_result(
    path: Path, identity: dict[str, Any], compute: Callable[[Any, RunContext], pd.DataFrame], config: Any
) -> Result | None:
    stored = _store.load(path, identity, finite=False)  # a table may hold NaN (a column not every row has)
    if stored is None:
        return None
    try:
        table = _table_from_store(stored)
        meta = dict(stored.meta["result"])
        recorded = list(meta["data_fingerprints"])
    except (KeyError, TypeError, ValueError) as err:
        _store.set_aside(path, f"not a result ({type(err).__name__}: {err})")
        return None
    if not _same_data(compute, config, recorded):
        return None  # computed from other data: run again (the new result replaces this one)
    meta["cached"] = True
    return Result(table, meta)


def _compute(
    name: str,
    key: str,
    identity: dict[str, Any],
    config: Any,
    compute: Callable[[Any, RunContext], pd.DataFrame],
    folder: Path,
    *,
    use_cache: bool,
    progress: bool,
    workers: int = 1,
) -> Result:
    import torch

    ctx = RunContext(unit_dir=folder / f"{key}.units", progress=progress, identity=identity, use_cache=use_cache)
    start = time.perf_counter()
    prefetch_units(compute, config, ctx, workers)
    table = _round_trip(compute(config, ctx))
    wall = time.perf_counter() - start
    meta = {
        "experiment": name,
        "profile": config.profile,
        "config": _jsonable(config),
        "config_hash": key,
        "code": identity["code"],
        "device": config.device,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU core(s), torch {torch.__version__}"
        + (f", {torch.cuda.get_device_name()}" if config.device.startswith("cuda") else ""),
        "seeds": list(config.seeds),
        "data": ctx.data,
        "data_fingerprints": ctx.data_fingerprints,
        "wall_time_s": wall,
        "units_computed": ctx.units_computed,
        "units_resumed": ctx.units_loaded,
        "units_from_workers": ctx.units_from_workers,
        "cached": False,
    }
    return Result(table, meta)


class ExperimentConfig:
    """Base of every experiment's ``Config``: the fields all configs have, and construction-time checks.

    Each experiment's ``Config`` is a frozen dataclass that derives from this class. It declares its own
    fields, ``profile``, ``seeds`` and ``device`` among them (in its own order and with its own defaults:
    the field values key the result cache and the records), the class methods ``quick()``, ``medium()``
    and ``full()``, the smallest value of each count field in :attr:`counts`, and any other check in
    ``_check``. Constructing a config validates it, before any data are loaded or any training starts:
    :func:`check_common` (profile, seeds, device), then the counts, then ``_check``.
    """

    profile: str
    seeds: tuple[int, ...]
    device: str
    #: the int fields of the config, each with the smallest value it may take
    counts: ClassVar[Mapping[str, int]] = {}

    def __post_init__(self) -> None:
        check_common(self)
        for name, minimum in self.counts.items():
            check_count(getattr(self, name), name, minimum)
        self._check()

    def _check(self) -> None:
        """The experiment's own checks, after the shared ones (none here)."""


def check_common(config: Any) -> None:
    """Validate the fields every experiment config has: profile, seeds, device.

    Raised before any data is loaded or any training starts.

    Parameters
    ----------
    config : ExperimentConfig
        The config.

    Raises
    ------
    ValueError
        An unknown profile, no seeds or a negative one, or an unknown or unavailable device.
    TypeError
        A seed that is not an int.
    """
    from .profile import book_profile

    book_profile(config.profile)
    if not isinstance(config.seeds, (tuple, list)) or not config.seeds:
        raise ValueError(f"seeds must be a non-empty tuple of non-negative ints, got {config.seeds!r}")
    for seed in config.seeds:
        check_count(seed, "every seed", minimum=0)
    check_device(config.device)
