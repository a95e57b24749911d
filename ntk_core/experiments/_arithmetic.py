"""The floating-point arithmetic of a record: pinned, so that a CPU of the recording CPU's vendor with AVX2 replays it
bit for bit.

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

MKL honours ``MKL_CBWR=AVX2`` on Intel CPUs only: on any other CPU it runs its ``AUTO`` branch instead (its
documentation says so; on the AMD EPYC VMs of this project MKL reports ``AUTO`` with the pin set). So the branch
MKL *actually* runs is part of the arithmetic (``mkl_branch``, asked of MKL itself: :func:`mkl_branch`): the records
made on AMD CPUs (``AUTO``) cannot replay bit for bit on an Intel CPU (``AVX2``), and on CI's Intel VM their
training runs did differ from the second epoch on; such a replay now says that it cannot (exit 3) instead of failing.
A record made before ``mkl_branch`` was written gets it from the CPU it names (:func:`of_record`).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["LEGACY", "PINS", "current", "describe", "environment", "mismatch", "mkl_branch", "of_record", "pinned"]

#: the environment that holds ATen, oneDNN and MKL to AVX2 (read by each library when it starts)
PINS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",  # NumPy's and SciPy's OpenBLAS (eigenvalues, solves): AVX2 kernels
}


#: the arithmetic of the records made before it was recorded (until 2026-11-27): all were computed on the
#: project's development VM (AMD EPYC, AVX-512) with no pins, i.e. the libraries' own choice there, AVX-512
LEGACY: dict[str, Any] = {**{var: None for var in PINS}, "cpu_capability": "AVX512", "mkl_branch": "BRANCH_OFF"}

#: the names of MKL's conditional-numerical-reproducibility branches (``mkl_cbwr.h``), by their values
_MKL_BRANCHES: dict[int, str] = {
    **{0: "OFF", 1: "BRANCH_OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2"},
    **{9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"},
}
_MKL_CBWR_BRANCH = 1  # the setting asked of mkl_cbwr_get: the code branch
_MKL_CBWR_STRICT = 0x10000


def mkl_branch() -> str | None:
    """The code branch MKL runs in this process (``"AVX2"``, ``"AUTO"``, ``"BRANCH_OFF"``: no reproducible mode, …;
    ``+STRICT`` appended in strict mode), asked of the MKL inside PyTorch (``mkl_serv_cbwr_get``, what
    ``mkl_cbwr_get(MKL_CBWR_BRANCH)`` calls); ``None`` where PyTorch has no MKL or does not export it."""
    import ctypes

    import torch

    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    try:
        get = ctypes.CDLL(path).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    value = get(_MKL_CBWR_BRANCH)
    name = _MKL_BRANCHES.get(value & ~_MKL_CBWR_STRICT, f"unknown ({value & ~_MKL_CBWR_STRICT})")
    return name + ("+STRICT" if value & _MKL_CBWR_STRICT else "")


def _mkl_branch_of(arithmetic: dict[str, Any], processor: Any) -> str | None:
    """The MKL branch of a record written before ``mkl_branch`` was: ``MKL_CBWR=AVX2`` runs ``AVX2`` on an Intel
    CPU and ``AUTO`` on any other; without the pin, no reproducible mode (``BRANCH_OFF``); ``None`` (unknown)
    when the record does not name its CPU's maker."""
    if arithmetic.get("MKL_CBWR") is None:
        return "BRANCH_OFF"
    if arithmetic.get("MKL_CBWR") != "AVX2" or not isinstance(processor, str):
        return None
    if "intel" in processor.lower():
        return "AVX2"
    return "AUTO" if "amd" in processor.lower() else None


def of_record(provenance: dict[str, Any]) -> dict[str, Any]:
    """The arithmetic a record was computed in: its provenance's ``arithmetic``, else :data:`LEGACY`; where it
    has no ``mkl_branch`` (written before it was), the branch MKL ran on the CPU ``machine.processor`` names."""
    arithmetic = provenance.get("arithmetic")
    if not isinstance(arithmetic, dict):
        return dict(LEGACY)
    arithmetic = dict(arithmetic)
    if "mkl_branch" not in arithmetic:
        machine = provenance.get("machine")
        arithmetic["mkl_branch"] = _mkl_branch_of(
            arithmetic, machine.get("processor") if isinstance(machine, dict) else None
        )
    return arithmetic


def current() -> dict[str, Any]:
    """The arithmetic of this process: the value of each variable of :data:`PINS` (``None`` when unset), the
    instruction set ATen actually runs (``cpu_capability``, e.g. ``"AVX2"``, ``"AVX512"``, ``"DEFAULT"``) and the
    branch MKL actually runs (``mkl_branch``: :func:`mkl_branch`)."""
    import torch

    return {
        **{var: os.environ.get(var) for var in PINS},
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_branch": mkl_branch(),
    }


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
    another instruction set, or another MKL branch (MKL runs ``MKL_CBWR=AVX2`` as ``AUTO`` on a CPU not made by
    Intel; an MKL branch unknown on either side is not compared). Without pins (:data:`LEGACY`) the libraries
    choose for the CPU, so only a CPU whose choice matches the recorded instruction set can replay (and a CPU
    with the same instruction set whose libraries chose other kernels would still differ: a replay that differs
    says so)."""
    now = current() if now is None else now
    keys = [*PINS, "cpu_capability"]
    if recorded.get("mkl_branch") is not None and now.get("mkl_branch") is not None:
        keys.append("mkl_branch")
    differ = [f"{k} {recorded.get(k)!r} recorded, {now.get(k)!r} here" for k in keys if recorded.get(k) != now.get(k)]
    if "mkl_branch" in keys and recorded["mkl_branch"] != now["mkl_branch"]:
        differ[-1] += " (MKL_CBWR=AVX2 runs AVX2 on Intel CPUs, AUTO on others: a record replays on its CPU's maker)"
    return "; ".join(differ) or None


def describe(arithmetic: dict[str, Any]) -> str:
    """One line for people: the instruction set and the pins, or that the machine chose them."""
    pins = ", ".join(f"{var}={arithmetic.get(var)}" for var in PINS if arithmetic.get(var) is not None)
    branch = arithmetic.get("mkl_branch")
    return f"{arithmetic.get('cpu_capability')} ({pins or 'no pins: the CPU chose'}; MKL branch {branch or 'unknown'})"
