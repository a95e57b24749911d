"""Run profiles (``quick`` / ``medium`` / ``full``) and the run facts every chapter and experiment reports.

The profile is read from ``$NTK_BOOK_PROFILE`` (ARCHITECTURE.md, "Conventions"):
``quick`` (default) sizes everything for 2 CPU cores (the whole book in minutes),
``medium`` is the largest that runs in about an hour per experiment on 2 CPU
cores (run once with ``python -m ntk_core run <exp> --profile medium --record``
and recorded under ``results/medium/``), ``full`` is the paper's scale, meant
for a CUDA GPU.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from typing import Literal

from .._checks import check_choice
from ..data import readable

__all__ = ["Profile", "PROFILES", "book_profile", "book_threads", "book_workers", "default_device", "RunInfo"]

#: A run profile, ``"quick"`` (2 CPU cores, minutes), ``"medium"`` (about an hour) or ``"full"`` (the paper's scale).
Profile = Literal["quick", "medium", "full"]
#: The profiles, smallest first.
PROFILES: tuple[Profile, ...] = ("quick", "medium", "full")
_PROFILES = PROFILES


def book_profile(value: str | None = None) -> Profile:
    """The active profile: ``value`` if given, else ``$NTK_BOOK_PROFILE``, else ``"quick"``.

    Parameters
    ----------
    value : str, optional
        An explicit profile.

    Returns
    -------
    str
        ``"quick"``, ``"medium"`` or ``"full"``.

    Raises
    ------
    ValueError
        An unknown profile.
    """
    chosen = value if value is not None else os.environ.get("NTK_BOOK_PROFILE", "quick")
    check_choice(chosen, "profile (argument or NTK_BOOK_PROFILE)", _PROFILES)
    return chosen  # type: ignore[return-value]


def default_device() -> str:
    """``"cuda"`` when PyTorch sees a GPU, else ``"cpu"``.

    Returns
    -------
    str
    """
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _positive_env(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    return int(value)


def book_threads() -> int:
    """Torch threads of a chapter's process: ``$NTK_BOOK_THREADS``, else 1.

    One thread, because a chapter must not thrash on a busy machine: with two threads on two cores beside two
    busy processes, a quick Setting 2 run took 4.5 times as long as with one (numpy's OpenBLAS: an
    eigendecomposition and solves 6.2 times), while on idle cores two threads saved at most 28 % (37 % for
    OpenBLAS; ``benchmarks/bench_threads.py``, README "Threads and workers"). The cores are used by worker
    processes instead (:func:`book_workers`).
    """
    return _positive_env("NTK_BOOK_THREADS", 1)


def book_workers() -> int:
    """Worker processes for a chapter's experiments (``workers`` of :func:`ntk_core.experiments.run`):
    ``$NTK_BOOK_WORKERS``, else the number of CPU cores, at most 2."""
    return _positive_env("NTK_BOOK_WORKERS", max(1, min(2, os.cpu_count() or 1)))


@dataclass
class RunInfo:
    """What a reader needs to judge a computed result: profile, data, device, wall time.

    Create it at the start of a chapter or experiment; :meth:`summary` at the end
    reports the wall time since creation. Creating it sets the thread count of torch and of numpy's BLAS to
    ``threads``.

    Attributes
    ----------
    profile : str
        The profile (:func:`book_profile`).
    device : str
        ``"cuda"`` or ``"cpu"`` (:func:`default_device`).
    data : list[str]
        One line per data set used (``ImageDataset.describe()``), added with :meth:`add_data`.
    started : float
        ``time.perf_counter()`` at creation.
    threads : int
        Torch threads of this process (:func:`book_threads`).
    workers : int
        Processes for the experiments' units of work (:func:`book_workers`).
    """

    profile: Profile = field(default_factory=book_profile)
    device: str = field(default_factory=default_device)
    data: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    threads: int = field(default_factory=book_threads)
    workers: int = field(default_factory=book_workers)

    def __post_init__(self) -> None:
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(self.threads)
        threadpool_limits(self.threads)  # numpy's BLAS (OpenBLAS) as well: it thrashes beside busy processes too

    def add_data(self, description: str) -> None:
        """Record one data source (for example ``ImageDataset.describe()``); one already recorded is not
        repeated."""
        description = readable(description)  # printed in the book: no path of this machine's Python installation
        if description not in self.data:
            self.data.append(description)

    def wall_time(self) -> float:
        """Seconds since this object was created."""
        return time.perf_counter() - self.started

    def summary(self) -> str:
        """A few lines: profile, device and machine, data sources, wall time."""
        import torch

        machine = f"{platform.machine()}, {os.cpu_count()} CPU core(s), torch {torch.__version__}"
        lines = [
            f"profile: {self.profile}",
            f"device: {self.device} ({machine}; {self.threads} torch thread(s) per process, "
            f"{self.workers} worker process(es))",
        ]
        lines += [f"data: {d}" for d in self.data] or ["data: none"]
        lines.append(f"wall time: {self.wall_time():.1f} s")
        return "\n".join(lines)
