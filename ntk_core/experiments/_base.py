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
import math
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
from ._code import code_fingerprint

__all__ = [
    "ExperimentConfig",
    "Result",
    "RunContext",
    "Splits",
    "train_on",
    "load_features",
    "run_experiment",
    "cache_dir",
    "code_fingerprint",
    "check_common",
    "make_split",
    "split_from",
    "config_hash",
    "data_fingerprint",
    "memorised_fraction",
    "paired_stats",
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
        lines += [f"data: {d}" for d in m.get("data", [])]
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
        name = hashlib.sha256(json.dumps(_jsonable(key), sort_keys=True).encode()).hexdigest()[:16]
        path = self.unit_dir / f"{name}.npz"
        identity = {**self.identity, "data": list(self.data_fingerprints), "unit": _jsonable(key)}
        if self.use_cache:
            stored = _store.load(path, identity)
            if stored is not None:
                rows = _unit_rows(stored)
                if rows is not None:
                    self.units_loaded += 1
                    self._log(key, stored.meta.get("seconds"), rows)
                    return rows
        start = time.perf_counter()
        fresh = fn()
        seconds = time.perf_counter() - start
        fresh = fresh if isinstance(fresh, list) else [fresh]
        if not fresh or not all(isinstance(r, dict) for r in fresh):
            raise ValueError(f"a unit must give at least one row (a dict), got {fresh!r:.200}")
        blob = _json_bytes(fresh)
        _store.save(path, identity, blobs={"rows": blob}, meta={"seconds": seconds})
        self.units_computed += 1
        rows = json.loads(blob)
        self._log(key, seconds, rows)
        return rows

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
) -> Result:
    """Run (or load from the cache) one experiment and return its :class:`Result`.

    See the module docstring for what is cached, how it is keyed and verified.
    ``use_cache=False`` recomputes everything and overwrites the cache.
    """
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
        result = _compute(name, key, identity, config, compute, folder, use_cache=use_cache, progress=progress)
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
) -> Result:
    import torch

    ctx = RunContext(unit_dir=folder / f"{key}.units", progress=progress, identity=identity, use_cache=use_cache)
    start = time.perf_counter()
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
        "cached": False,
    }
    return Result(table, meta)


# --------------------------------------------------------------------------- what every experiment config shares


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


# --------------------------------------------------------------------------- data splits shared by experiments


@dataclass
class Splits:
    """Train / validation / test tensors of one experiment run; ``y_*`` are clean labels (±1 or class indices).

    (Not ``ntk_core.data.Split``, the name of one split of a data set on disk.)

    The validation split is cut from the training split and held out of training
    (it is what early stopping and the λ grid search look at).
    """

    x_train: Any
    y_train: Any
    x_val: Any
    y_val: Any
    x_test: Any
    y_test: Any

    def to(self, device: str) -> "Splits":
        """The same tensors on ``device``."""
        return Splits(*(t.to(device) for t in dataclasses.astuple(self)))


def train_on(model: Any, splits: Splits, y_noisy: Any, config: Any, *, progress: bool) -> Any:
    """:func:`ntk_core.train.train` on the training split with labels ``y_noisy``, tracking every split.

    The errors against the clean training labels (``splits.y_train``), on the validation split and on
    the test split are recorded at every evaluation.

    Parameters
    ----------
    model : torch.nn.Module
        The network, on the device of ``splits``.
    splits : Splits
        The data.
    y_noisy : torch.Tensor, shape (n_train,)
        The training labels it is trained on (corrupted or not).
    config : ntk_core.train.TrainConfig
        Method, loss, optimiser and schedule.
    progress : bool
        Show a progress bar.

    Returns
    -------
    ntk_core.train.TrainResult
        The trained model and its history.
    """
    from ..train import train

    return train(
        model,
        splits.x_train,
        y_noisy,
        config,
        y_clean=splits.y_train,
        val=(splits.x_val, splits.y_val),
        test=(splits.x_test, splits.y_test),
        progress=progress,
    )


def load_features(ctx: RunContext, train: Any, test: Any, features: Callable[[Any], Any]) -> tuple[Any, Any, Any, Any]:
    """Report where ``train`` and ``test`` came from, and give ``(x_train, y_train, x_test, y_test)``.

    ``x_*`` are ``features`` of the images; ``train`` and ``test`` are :class:`ntk_core.data.ImageDataset`
    or :class:`ntk_core.data.BinaryTask` objects (both unpack as ``x, y``).
    """
    ctx.add_dataset(train)
    ctx.add_dataset(test)
    (x_train, y_train), (x_test, y_test) = train, test
    return features(x_train), y_train, features(x_test), y_test


def split_from(
    ctx: RunContext,
    train: Any,
    test: Any,
    features: Callable[[Any], Any],
    *,
    n_train: int,
    n_val: int,
    n_test: int,
    seed: int,
    what: str,
) -> Splits:
    """:func:`make_split` on the :func:`load_features` of ``train`` and ``test``."""
    return make_split(
        *load_features(ctx, train, test, features),
        n_train=n_train,
        n_val=n_val,
        n_test=n_test,
        seed=seed,
        what=what,
    )


def make_split(
    x_train: Any, y_train: Any, x_test: Any, y_test: Any, *, n_train: int, n_val: int, n_test: int, seed: int, what: str
) -> Splits:
    """Shuffle with ``seed``, hold out ``n_val`` validation examples, keep ``n_train`` and ``n_test``.

    ``n_test = 0`` keeps the whole test split. Raises a ``ValueError`` that says
    how many examples exist when the data are too small for the sizes asked.
    """
    import numpy as np
    import torch

    if n_train + n_val > len(y_train):
        raise ValueError(
            f"{what}: n_train + n_val = {n_train + n_val} but the training split has only "
            f"{len(y_train)} examples; lower them or provide the full data set (NTK_CORE_DATA)"
        )
    if n_test > len(y_test):
        raise ValueError(f"{what}: n_test = {n_test} but the test split has only {len(y_test)} examples")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y_train))
    val_idx, train_idx = order[:n_val], order[n_val : n_val + n_train]
    test_idx = rng.permutation(len(y_test))[:n_test] if n_test else np.arange(len(y_test))

    def t(a: Any, idx: Any) -> Any:
        return torch.as_tensor(np.ascontiguousarray(a[idx]))

    return Splits(
        t(x_train, train_idx),
        t(y_train, train_idx),
        t(x_train, val_idx),
        t(y_train, val_idx),
        t(x_test, test_idx),
        t(y_test, test_idx),
    )


# --------------------------------------------------------------------------- measures shared by experiments


def memorised_fraction(train_error_noisy: float, train_error_clean: float, noise_rate: float) -> float:
    r"""The fraction of the *flipped* training labels that a classifier reproduces (predicts the wrong label).

    With ``F`` the flipped examples (``|F| = p n``) and ``m`` the fraction of ``F`` on which the classifier
    predicts the noisy label, the errors against the noisy and the clean labels differ only on ``F``:
    ``err_noisy − err_clean = p (1 − m) − p m``, so ``m = (1 − (err_noisy − err_clean) / p) / 2``.
    ``m = 1``: every flipped label is fitted (memorised); ``m`` equal to the error rate on clean examples:
    nothing of the noise was learnt. Both errors must be those of the same predictor (the network alone).
    """
    if not 0.0 < noise_rate < 0.5:
        raise ValueError(f"noise_rate must lie in (0, 1/2), got {noise_rate!r}")
    return float((1.0 - (train_error_noisy - train_error_clean) / noise_rate) / 2.0)


def check_one_row_per_seed(frame: pd.DataFrame, by: list[str], what: str) -> None:
    """Raise ``ValueError`` when two rows of ``frame`` share a seed within a group of the columns ``by``.

    Paired statistics count seeds: a seed listed twice (``--seeds 0 0 1``, or tables concatenated twice) would
    count its run twice and shrink the standard error of a single real seed towards zero.
    """
    dup = frame.duplicated(subset=["seed", *by], keep=False)
    if dup.any():
        seeds = sorted({int(v) for v in frame.loc[dup, "seed"]})
        raise ValueError(
            f"{what}: seed(s) {seeds} appear more than once per {', '.join(by) or 'table'}; paired statistics need "
            "each seed once (run the experiment with distinct seeds)"
        )


def paired_stats(differences: Any) -> dict[str, Any]:
    """Summary of per-seed paired differences ``d_s`` (same data, noisy labels and initialisation per seed).

    Returns ``differences`` (a list), their ``mean`` d̄, standard deviation ``std`` (ddof 1) and standard
    error ``sem`` = std / √S over the ``seeds`` S (both NaN for one seed). An effect counts as beyond the
    seed-to-seed spread when |d̄| > 2 sem.

    Examples
    --------
    >>> s = paired_stats([0.03, 0.05, 0.04])
    >>> round(s["mean"], 3), round(s["sem"], 4), s["seeds"]
    (0.04, 0.0058, 3)
    """
    diff = np.asarray(differences, dtype=float).ravel()
    if diff.size == 0 or not np.isfinite(diff).all():
        raise ValueError(f"paired differences must be finite and at least one, got {diff.tolist()!r}")
    std = float(np.std(diff, ddof=1)) if diff.size > 1 else math.nan
    return {
        "differences": diff.tolist(),
        "mean": float(diff.mean()),
        "std": std,
        "sem": std / math.sqrt(diff.size) if diff.size > 1 else math.nan,
        "seeds": int(diff.size),
    }
