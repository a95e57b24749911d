"""What MKL's ``COMPATIBLE`` branch costs against the branch the records were made in.

A record replays bit for bit only in the arithmetic it was made in (``ntk_core.experiments._arithmetic``).
``MKL_CBWR=AVX2`` runs MKL's ``AVX2`` branch on Intel CPUs and its ``AUTO`` branch on every other CPU, so a
record made on an AMD CPU cannot replay bit for bit on an Intel one; ``MKL_CBWR=COMPATIBLE`` runs one branch on
both makers. This script measures what that branch costs, on this machine. Run from the repository root::

    NTK_CORE_DATA=/path/to/data python benchmarks/bench_mkl_branch.py             # ~3 min on 2 cores
    python benchmarks/bench_mkl_branch.py --rounds 1 --workloads sgemm dgemm       # seconds

MKL reads ``MKL_CBWR`` once, when the process starts, so the two branches cannot share a process: each
workload runs in a fresh subprocess per branch, the two branches alternating round by round (so that a
machine growing busier or quieter moves both), with every other pin of the records' arithmetic set
(``_arithmetic.PINS``) and one thread. It prints each workload's best time per branch and the ratio
``COMPATIBLE / AVX2`` (above 1: ``COMPATIBLE`` is slower). The workloads:

* ``sgemm``, ``dgemm``: one 1,024 × 1,024 matrix product (float32, float64), the BLAS alone;
* ``conv``: forward and backward of a 3×3, 16-channel convolution over 64 images of 16 × 16 (oneDNN, and MKL
  where oneDNN calls it);
* ``canary-<experiment>``: a record's canary, computed whole (the records' own code paths, seconds each).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ntk_core.experiments import _arithmetic

BRANCHES = ("AVX2", "COMPATIBLE")

_BLAS = """
import time, torch
a = torch.randn(1024, 1024, dtype=torch.{dtype}, generator=torch.Generator().manual_seed(0))
a @ a
best = float("inf")
for _ in range(5):
    start = time.perf_counter(); a @ a; best = min(best, time.perf_counter() - start)
print(best)
"""

_CONV = """
import time, torch
g = torch.Generator().manual_seed(0)
conv = torch.nn.Conv2d(16, 16, 3, padding=1)
x = torch.randn(64, 16, 16, 16, generator=g)
best = float("inf")
for _ in range(5):
    start = time.perf_counter(); conv(x).square().sum().backward(); best = min(best, time.perf_counter() - start)
print(best)
"""

_CANARY = """
import time
from ntk_core.experiments import _canary, _record
name = "{name}"
provenance = _record._provenance(_record.record_dir(name, "medium", None), name, "medium")
config = _canary.canary_config(name, _record._config_from(name, provenance))
_, seconds = _record.compute_fresh(name, provenance, config)
print(seconds)
"""

WORKLOADS = {
    "sgemm": _BLAS.format(dtype="float32"),
    "dgemm": _BLAS.format(dtype="float64"),
    "conv": _CONV,
    **{f"canary-{n}": _CANARY.format(name=n) for n in ("setting1", "setting2", "setting3", "bound_scale")},
}


def _time(code: str, branch: str) -> float:
    env = _arithmetic.environment({**_arithmetic.PINS, "MKL_CBWR": branch})
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", "import torch; torch.set_num_threads(1)\n" + code],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"workload failed under MKL_CBWR={branch}:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="subprocesses per workload and branch (best kept)")
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    env = _arithmetic.environment({**_arithmetic.PINS, "MKL_CBWR": "COMPATIBLE"})
    probe = subprocess.run(
        [sys.executable, "-c", "from ntk_core.experiments._arithmetic import mkl_branch; print(mkl_branch())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"MKL branch with MKL_CBWR=COMPATIBLE: {probe.stdout.strip()}; cores: {os.cpu_count()}")
    print(f"{'workload':<22} {'AVX2 (s)':>10} {'COMPATIBLE (s)':>15} {'ratio':>7}")
    for name in args.workloads:
        best = {b: float("inf") for b in BRANCHES}
        for _ in range(args.rounds):
            for branch in BRANCHES:
                best[branch] = min(best[branch], _time(WORKLOADS[name], branch))
        ratio = best["COMPATIBLE"] / best["AVX2"]
        print(f"{name:<22} {best['AVX2']:>10.4f} {best['COMPATIBLE']:>15.4f} {ratio:>7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
