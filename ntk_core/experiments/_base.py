"""What every experiment shares: configs with quick/full profiles, results, caching, resumable units.

An experiment module defines

* ``Config``: a frozen dataclass with ``quick()`` and ``full()`` class methods and
  the fields ``profile``, ``seeds`` and ``device``;
* ``compute(config, ctx) -> pandas.DataFrame``: the tidy result table.

:func:`run_experiment` wraps ``compute`` with what a reader needs to trust and
reuse a result: a cache keyed by a hash of the config *and of the ntk_core
source code* (so a result is never reused after the code that produced it
changed), metadata (profile, data sources and sizes, device, seeds, wall time),
and resumable units: ``ctx.unit(key, fn)`` stores each finished unit of work
(one training run, say) atomically, so an interrupted experiment restarts where
it stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, TextIO

import pandas as pd

__all__ = ["ExperimentConfig", "Result", "RunContext", "Split", "run_experiment", "cache_dir", "code_fingerprint",
           "check_common", "check_count", "check_device", "check_values", "make_split", "split_from",
           "config_hash", "memorised_fraction"]


class ExperimentConfig(Protocol):
    profile: str
    seeds: tuple[int, ...]
    device: str


def cache_dir() -> Path:
    """Where results are cached: ``$NTK_CORE_CACHE``, else ``~/.cache/ntk_core/results``."""
    env = os.environ.get("NTK_CORE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ntk_core" / "results"


def code_fingerprint() -> str:
    """SHA-256 (first 12 hex digits) of every ``.py`` file of the installed ``ntk_core`` package."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


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
    payload = json.dumps({"experiment": name, "config": _jsonable(config), "code": code_fingerprint()},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@dataclass
class Result:
    """A tidy table (one row per measurement) and the metadata that makes it interpretable."""

    table: pd.DataFrame
    meta: dict[str, Any]

    def summary(self) -> str:
        m = self.meta
        lines = [f"experiment: {m['experiment']} (profile {m['profile']}, config {m['config_hash']})",
                 f"device: {m['device']} ({m.get('machine', '?')})",
                 f"seeds: {m['seeds']}"]
        lines += [f"data: {d}" for d in m.get("data", [])]
        cached = " (loaded from the result cache)" if m.get("cached") else ""
        lines.append(f"wall time: {m['wall_time_s']:.1f} s{cached}")
        return "\n".join(lines)

    def save(self, path: Path) -> None:
        """Write ``<path>.csv`` and ``<path>.json`` atomically."""
        _atomic_write_text(path.with_suffix(".csv"), self.table.to_csv(index=False))
        _atomic_write_text(path.with_suffix(".json"), json.dumps(self.meta, indent=2, default=str))

    @classmethod
    def load(cls, path: Path) -> "Result":
        table = pd.read_csv(path.with_suffix(".csv"))
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        return cls(table, meta)


@dataclass
class RunContext:
    """Handed to ``compute``: records data sources and caches units of work for resumption."""

    unit_dir: Path
    progress: bool = False
    data: list[str] = field(default_factory=list)
    units_computed: int = 0
    units_loaded: int = 0

    def add_data(self, description: str) -> None:
        if description not in self.data:
            self.data.append(description)

    def unit(self, key: dict[str, Any], fn: Callable[[], dict[str, Any] | list[dict[str, Any]]]
             ) -> list[dict[str, Any]]:
        """Rows of one unit of work, computed by ``fn`` once and then read back from disk.

        ``key`` identifies the unit within the experiment (for example
        ``{"noise": 0.2, "method": "rdi", "lam": 4, "seed": 0}``).
        """
        name = hashlib.sha256(json.dumps(_jsonable(key), sort_keys=True).encode()).hexdigest()[:16]
        path = self.unit_dir / f"{name}.json"
        if path.exists():
            self.units_loaded += 1
            return json.loads(path.read_text(encoding="utf-8"))
        rows = fn()
        rows = rows if isinstance(rows, list) else [rows]
        _atomic_write_text(path, json.dumps(rows, default=float))
        self.units_computed += 1
        return rows


def run_experiment(name: str, config: ExperimentConfig,
                   compute: Callable[[Any, RunContext], pd.DataFrame], *,
                   use_cache: bool = True, progress: bool = False, out: TextIO | None = None) -> Result:
    """Run (or load from the cache) one experiment and return its :class:`Result`."""
    import torch

    key = config_hash(name, config)
    base = cache_dir() / name / key
    if use_cache and base.with_suffix(".json").exists():
        result = Result.load(base)
        result.meta["cached"] = True
        return result
    ctx = RunContext(unit_dir=cache_dir() / name / f"{key}.units", progress=progress)
    start = time.perf_counter()
    table = compute(config, ctx)
    wall = time.perf_counter() - start
    meta = {
        "experiment": name,
        "profile": config.profile,
        "config": _jsonable(config),
        "config_hash": key,
        "code": code_fingerprint(),
        "device": config.device,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU core(s), torch {torch.__version__}"
                   + (f", {torch.cuda.get_device_name()}" if config.device.startswith("cuda") else ""),
        "seeds": list(config.seeds),
        "data": ctx.data,
        "wall_time_s": wall,
        "units_computed": ctx.units_computed,
        "units_resumed": ctx.units_loaded,
        "cached": False,
    }
    result = Result(table, meta)
    if use_cache:
        result.save(base)
    if out is not None:
        print(f"{name}: {wall:.1f} s ({ctx.units_computed} units computed, {ctx.units_loaded} resumed)", file=out)
    return result


# --------------------------------------------------------------------------- config validation shared by experiments


def check_common(config: Any) -> None:
    """Validate the fields every experiment config has: profile, seeds, device.

    Raised before any data is loaded or any training starts.
    """
    from ..profile import book_profile

    book_profile(config.profile)
    if not config.seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in config.seeds):
        raise ValueError(f"seeds must be a non-empty tuple of non-negative ints, got {config.seeds!r}")
    check_device(config.device)


def check_device(device: str) -> None:
    """``"cpu"``, or ``"cuda"`` / ``"cuda:N"`` when PyTorch sees that GPU."""
    import torch

    if device == "cpu":
        return
    if not (device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but PyTorch sees no CUDA GPU on this machine; use 'cpu'")


def check_values(values: Any, name: str, low: float, high: float, *, high_open: bool = False,
                 low_open: bool = False) -> None:
    """Each of ``values`` lies in the interval [low, high] (ends opened as asked), and there is at least one."""
    if not values:
        raise ValueError(f"{name} must hold at least one value")
    for v in values:
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not ok:
            lo = "(" if low_open else "["
            hi = ")" if high_open else "]"
            raise ValueError(f"every {name} must lie in {lo}{low}, {high}{hi}, got {v!r}")


def check_count(value: Any, name: str, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


# --------------------------------------------------------------------------- data splits shared by experiments


@dataclass
class Split:
    """Train / validation / test tensors; ``y_*`` are clean labels (±1 or class indices).

    The validation split is cut from the training split and held out of training
    (it is what early stopping and the λ grid search look at).
    """

    x_train: Any
    y_train: Any
    x_val: Any
    y_val: Any
    x_test: Any
    y_test: Any

    def to(self, device: str) -> "Split":
        return Split(*(t.to(device) for t in dataclasses.astuple(self)))


def split_from(ctx: RunContext, train: Any, test: Any, features: Callable[[Any], Any], *, n_train: int,
               n_val: int, n_test: int, seed: int, what: str) -> Split:
    """Report where ``train`` and ``test`` came from, then :func:`make_split` on their ``features``.

    ``train`` and ``test`` are :class:`ntk_core.data.ImageDataset` or
    :class:`ntk_core.data.BinaryTask` objects (both unpack as ``x, y``).
    """
    ctx.add_data(train.describe())
    ctx.add_data(test.describe())
    (x_train, y_train), (x_test, y_test) = train, test
    return make_split(features(x_train), y_train, features(x_test), y_test, n_train=n_train, n_val=n_val,
                      n_test=n_test, seed=seed, what=what)


def make_split(x_train: Any, y_train: Any, x_test: Any, y_test: Any, *, n_train: int, n_val: int, n_test: int,
               seed: int, what: str) -> Split:
    """Shuffle with ``seed``, hold out ``n_val`` validation examples, keep ``n_train`` and ``n_test``.

    ``n_test = 0`` keeps the whole test split. Raises a ``ValueError`` that says
    how many examples exist when the data are too small for the sizes asked.
    """
    import numpy as np
    import torch

    if n_train + n_val > len(y_train):
        raise ValueError(f"{what}: n_train + n_val = {n_train + n_val} but the training split has only "
                         f"{len(y_train)} examples; lower them or provide the full data set (NTK_CORE_DATA)")
    if n_test > len(y_test):
        raise ValueError(f"{what}: n_test = {n_test} but the test split has only {len(y_test)} examples")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y_train))
    val_idx, train_idx = order[:n_val], order[n_val:n_val + n_train]
    test_idx = rng.permutation(len(y_test))[:n_test] if n_test else np.arange(len(y_test))

    def t(a: Any, idx: Any) -> Any:
        return torch.as_tensor(np.ascontiguousarray(a[idx]))

    return Split(t(x_train, train_idx), t(y_train, train_idx), t(x_train, val_idx), t(y_train, val_idx),
                 t(x_test, test_idx), t(y_test, test_idx))


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
