"""The floating-point arithmetic of a record: pinned, so that another CPU with AVX2 replays it bit for bit.

PyTorch's CPU kernels are chosen when the process starts, for the CPU it finds: ATen's vectorised kernels
(AVX2 or AVX-512), oneDNN's convolutions and MKL's matrix products each take the widest instruction set the
CPU has, and each sums in another order with another width; so do the OpenBLAS of NumPy and SciPy and NumPy's
own SIMD loops. The same code, data and seed therefore give other last bits on another CPU, and training a
network for many steps turns last bits into visible differences. A record is therefore computed with the five
libraries held to AVX2 (:data:`PINS`: environment variables each library reads once, when it starts, so the
process must start with them: ``python -m ntk_core run --record`` and ``python -m ntk_core replay`` re-execute
themselves with them) and a fixed thread count (``machine.torch_threads``; a replay also starts with the
record's ``OMP_NUM_THREADS``, which sets OpenBLAS's threads). The arithmetic a record was made in is written to
its provenance (``arithmetic``), and a replay runs in exactly that arithmetic.

MKL's "conditional numerical reproducibility" branch is the one pin that depends on the CPU's maker: MKL honours
``MKL_CBWR=AVX2`` on Intel CPUs only and runs its ``AUTO`` branch on any other, while ``MKL_CBWR=COMPATIBLE`` runs
one branch on both (its documentation says so; this module asks MKL which branch it runs: :func:`mkl_branch`).
``COMPATIBLE`` costs 3.5–3.9 times the time of a large matrix product and 0–6 % of a canary's
(``benchmarks/bench_mkl_branch.py``; ``benchmarks/README.md``), so records, whose cost is large products and
factorisations, are made with ``MKL_CBWR=AVX2`` and their canaries with ``COMPATIBLE`` (:data:`CANARY_PINS`):
a canary replays bit for bit on Intel and AMD CPUs alike, and a unit replayed on the other maker's CPU, whose
only difference is MKL's branch (:func:`only_mkl_branch_differs`), is compared to its experiment's
:data:`CROSS_BRANCH_TOL` instead of bit for bit.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    *["PINS", "CROSS_BRANCH_TOL", "current", "describe", "environment", "mismatch", "mkl_branch", "numpy_simd"],
    *["CANARY_PINS", "of_record", "only_mkl_branch_differs", "pinned"],
]

#: NumPy's dispatch targets above AVX2 (NumPy 2.3's ``__cpu_dispatch__``), all switched off by its pin
_NUMPY_ABOVE_AVX2 = "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"

#: the environment that holds ATen, oneDNN, MKL, OpenBLAS and NumPy to AVX2 (read by each library when it starts)
PINS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "AVX2",  # MKL's AVX2 branch on Intel CPUs, AUTO on others
    "OPENBLAS_CORETYPE": "Haswell",  # NumPy's and SciPy's OpenBLAS (eigenvalues, solves): AVX2 kernels
    # NumPy's own SIMD loops (arccos, exp, log1p, sums, ...): every dispatch target above AVX2 switched off (a name
    # the CPU lacks is ignored); see the module's last paragraph for what it changes
    "NPY_DISABLE_CPU_FEATURES": _NUMPY_ABOVE_AVX2,
}
#: the canaries' arithmetic: :data:`PINS` with MKL's ``COMPATIBLE`` branch, one branch on Intel and AMD CPUs alike
CANARY_PINS: dict[str, str] = {**PINS, "MKL_CBWR": "COMPATIBLE"}
#: how :func:`describe` shows a pin whose value is too long to read
_SHOWN = {"NPY_DISABLE_CPU_FEATURES": "NumPy above AVX2 off"}


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


def numpy_simd() -> str | None:
    """The widest SIMD target NumPy's dispatched loops run in this process (``"AVX2"``, ``"AVX512_SKX"``, …): the
    last of NumPy's dispatch targets that is enabled (on the CPU and not switched off by
    ``NPY_DISABLE_CPU_FEATURES``); ``None`` where NumPy does not say (a build without dispatch)."""
    import importlib

    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")  # NumPy 2
    except ImportError:  # pragma: no cover - NumPy 1.26
        umath = importlib.import_module("numpy.core._multiarray_umath")
    dispatch = getattr(umath, "__cpu_dispatch__", None)
    features = getattr(umath, "__cpu_features__", None)
    if not dispatch or not isinstance(features, dict):
        return None
    enabled = [target for target in dispatch if features.get(target)]
    return enabled[-1] if enabled else "baseline"


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
    """The arithmetic a record was computed in: its provenance's ``arithmetic``; where it has no ``mkl_branch``
    (written before it was), the branch MKL ran on the CPU ``machine.processor`` names."""
    arithmetic = dict(provenance["arithmetic"])
    if "mkl_branch" not in arithmetic:
        machine = provenance.get("machine")
        arithmetic["mkl_branch"] = _mkl_branch_of(
            arithmetic, machine.get("processor") if isinstance(machine, dict) else None
        )
    return arithmetic


def current() -> dict[str, Any]:
    """The arithmetic of this process: the value of each variable of :data:`PINS` (``None`` when unset), the
    instruction set ATen actually runs (``cpu_capability``, e.g. ``"AVX2"``, ``"AVX512"``, ``"DEFAULT"``), the
    branch MKL actually runs (``mkl_branch``: :func:`mkl_branch`) and the widest SIMD target of NumPy's loops
    (``numpy_simd``: :func:`numpy_simd`)."""
    import torch

    return {
        **{var: os.environ.get(var) for var in PINS},
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_branch": mkl_branch(),
        "numpy_simd": numpy_simd(),
    }


def pinned(pins: dict[str, str] = PINS) -> bool:
    """Whether this process was started with every variable of ``pins`` (:data:`PINS`) at its value."""
    return all(os.environ.get(var) == value for var, value in pins.items())


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


def _differences(recorded: dict[str, Any], now: dict[str, Any]) -> dict[str, str]:
    keys = [*PINS, "cpu_capability"]
    keys += [k for k in ("numpy_simd", "mkl_branch") if recorded.get(k) is not None and now.get(k) is not None]
    return {k: f"{k} {recorded.get(k)!r} recorded, {now.get(k)!r} here" for k in keys if recorded.get(k) != now.get(k)}


def mismatch(recorded: dict[str, Any], now: dict[str, Any] | None = None) -> str | None:
    """Why this process cannot compute in the arithmetic ``recorded`` (``None`` when it can): a pin set otherwise,
    another instruction set, another SIMD target of NumPy's loops, or another MKL branch (MKL runs
    ``MKL_CBWR=AVX2`` as ``AUTO`` on a CPU not made by Intel; a NumPy target or MKL branch unknown on either side
    is not compared: a record made before it was written replays with NumPy's own choice, as it was computed)."""
    differ = _differences(recorded, current() if now is None else now)
    if "mkl_branch" in differ and recorded.get("MKL_CBWR") == "AVX2":
        differ["mkl_branch"] += " (MKL_CBWR=AVX2 runs AVX2 on Intel CPUs, AUTO on others)"
    return "; ".join(differ.values()) or None


#: per experiment, the tolerance of a replay whose only difference from its record is MKL's branch (a record made
#: with ``MKL_CBWR=AVX2`` on an AMD CPU, replayed on an Intel one), relative or absolute
#: (:func:`ntk_core.experiments._record.compare_rows`): where the experiment computes in float64 without training,
#: so that another branch moves its numbers by a few units in the last place of what it factorises; 100 times the
#: largest difference measured between the ``AUTO`` and ``COMPATIBLE`` branches on one unit of every unit class
#: of its medium record (``benchmarks/README.md``). An experiment that trains networks has none: training turns
#: the last bits into other results within an epoch (Setting 3's test accuracy 3 points apart after one), so no
#: tolerance tells a change of the code from the arithmetic; its canary, made in ``COMPATIBLE``, is its check there.
CROSS_BRANCH_TOL: dict[str, float] = {"bound_scale": 1e-9}


def only_mkl_branch_differs(recorded: dict[str, Any], now: dict[str, Any] | None = None) -> bool:
    """Whether this process computes in the arithmetic ``recorded`` but for MKL's branch (and the ``MKL_CBWR``
    that chose it; every other pin, the instruction set and NumPy's target the same): a record made with
    ``MKL_CBWR=AVX2`` on the other CPU maker, say, which replays to :data:`CROSS_BRANCH_TOL` instead of bit for
    bit."""
    differ = _differences(recorded, current() if now is None else now)
    return "mkl_branch" in differ and set(differ) <= {"mkl_branch", "MKL_CBWR"}


def describe(arithmetic: dict[str, Any]) -> str:
    """One line for people: the instruction set and the pins, or that the machine chose them."""
    values = {var: arithmetic.get(var) for var in PINS}
    shown = [_SHOWN[var] if var in _SHOWN and v == PINS[var] else f"{var}={v}" for var, v in values.items() if v]
    pins = ", ".join(shown)
    branch, simd = arithmetic.get("mkl_branch"), arithmetic.get("numpy_simd")
    return (
        f"{arithmetic.get('cpu_capability')} ({pins or 'no pins: the CPU chose'}; MKL branch {branch or 'unknown'}; "
        f"NumPy SIMD {simd or 'unknown'})"
    )
