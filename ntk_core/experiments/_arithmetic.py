"""The floating-point arithmetic of a record: pinned, so that any x86-64 CPU with AVX2 replays it bit for bit.

PyTorch's CPU kernels are chosen when the process starts, for the CPU it finds: ATen's vectorised kernels
(AVX2 or AVX-512), oneDNN's convolutions and MKL's matrix products each take the widest instruction set the
CPU has, and each sums in another order with another width; so does the OpenBLAS of NumPy and SciPy (its
"SkylakeX" kernels on the development VM, "Haswell" on an AVX2 CPU). The same code, data and seed therefore give other
last bits on another CPU, and training a network for many steps turns last bits into visible differences: on
the development VM (AVX-512) the tiny runs of ``tests/identity.py`` differ from themselves as soon as any one of
the libraries is held to AVX2. A record made on one CPU then fails its replay on another, although both
are right.

A record is therefore computed with the four libraries held to AVX2 (:data:`PINS`: environment variables each
library reads once, when it starts, so the process must start with them: ``python -m ntk_core run --record``
and ``python -m ntk_core replay`` re-execute themselves with them). MKL's "conditional numerical
reproducibility" mode ``AVX2`` promises the same bits on every processor with AVX2 for a fixed thread count,
which the record also keeps (``machine.torch_threads``; a replay also starts with the record's
``OMP_NUM_THREADS``, which sets OpenBLAS's threads). MKL without that mode also depends on the memory alignment
of its arrays, so that even one machine gives other last bits in another process. The arithmetic a record was made in is written to its
provenance (``arithmetic``), and a replay runs in exactly that arithmetic or says that it cannot.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["LEGACY", "PINS", "current", "describe", "environment", "mismatch", "of_record", "pinned"]

#: the environment that holds ATen, oneDNN and MKL to AVX2 (read by each library when it starts)
PINS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",  # NumPy's and SciPy's OpenBLAS (eigenvalues, solves): AVX2 kernels
}


#: the arithmetic of the records made before it was recorded (until 2026-11-27): all were computed on the
#: project's development VM (AMD EPYC, AVX-512) with no pins, i.e. the libraries' own choice there, AVX-512
LEGACY: dict[str, Any] = {**{var: None for var in PINS}, "cpu_capability": "AVX512"}


def of_record(provenance: dict[str, Any]) -> dict[str, Any]:
    """The arithmetic a record was computed in: its provenance's ``arithmetic``, else :data:`LEGACY`."""
    arithmetic = provenance.get("arithmetic")
    return dict(arithmetic) if isinstance(arithmetic, dict) else dict(LEGACY)


def current() -> dict[str, Any]:
    """The arithmetic of this process: the value of each variable of :data:`PINS` (``None`` when unset) and the
    instruction set ATen actually runs (``cpu_capability``, e.g. ``"AVX2"``, ``"AVX512"``, ``"DEFAULT"``)."""
    import torch

    return {**{var: os.environ.get(var) for var in PINS}, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def pinned() -> bool:
    """Whether this process was started with every variable of :data:`PINS` at its value."""
    return all(os.environ.get(var) == value for var, value in PINS.items())


def environment(arithmetic: dict[str, Any] | None, base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) with the variables of :data:`PINS` as ``arithmetic`` has them:
    set where it gives a value, removed where it gives ``None`` (``None`` for ``arithmetic`` removes them all:
    the machine's own choice)."""
    env = dict(os.environ if base is None else base)
    for var in PINS:
        value = (arithmetic or {}).get(var)
        if value is None:
            env.pop(var, None)
        else:
            env[var] = str(value)
    return env


def mismatch(recorded: dict[str, Any], now: dict[str, Any] | None = None) -> str | None:
    """Why this process cannot compute in the arithmetic ``recorded`` (``None`` when it can): a pin set otherwise,
    or another instruction set. Without pins (:data:`LEGACY`) the libraries choose for the CPU, so only a CPU whose
    choice matches the recorded instruction set can replay (and a CPU with the same instruction set whose
    libraries chose other kernels would still differ: a replay that differs says so)."""
    now = current() if now is None else now
    differ = [f"{k} {recorded.get(k)!r} recorded, {now.get(k)!r} here" for k in (*PINS, "cpu_capability")]
    differ = [d for d, k in zip(differ, (*PINS, "cpu_capability")) if recorded.get(k) != now.get(k)]
    return "; ".join(differ) or None


def describe(arithmetic: dict[str, Any]) -> str:
    """One line for people: the instruction set and the pins, or that the machine chose them."""
    pins = ", ".join(f"{var}={arithmetic.get(var)}" for var in PINS if arithmetic.get(var) is not None)
    return f"{arithmetic.get('cpu_capability')} ({pins or 'no pins: the CPU chose'})"
