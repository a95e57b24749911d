"""How many torch threads a book chapter should use: quick-profile units timed at 1 and 2 threads, on an
idle machine and beside busy processes.

Run from the repository root (the CIFAR-10 units need ``$NTK_CORE_DATA/cifar10``)::

    NTK_CORE_DATA=/path/to/data python benchmarks/bench_threads.py            # ~3 min on 2 cores
    NTK_CORE_DATA=/path/to/data python benchmarks/bench_threads.py --busy 0 2 --rounds 2

Each workload runs in a fresh subprocess with ``torch.set_num_threads(t)`` and ``OMP_NUM_THREADS=t`` (the
thread count of a process is fixed once its first parallel region has run), so the rows are independent. The
busy processes are plain Python loops, one core each, started before a round and stopped after it: the
"busy laptop" of the developers' guide (two other processes sharing the 2 cores). The workloads are the
book's heavy cells, shrunk:

* ``setting2``: one Setting 2 training run of the quick profile's CNN (SGD, 30 of its 150 epochs);
* ``setting3``: one Setting 3 training run of the quick ResNet (CCE, 10 of its 30 epochs);
* ``setting1``: the Setting 1 quick NTK Gram matrix of the two-layer network and its KRR (one noise level).

For each workload and number of busy processes it prints the best wall time per thread count and the ratio
``2 threads / 1 thread`` (below 1: two threads are faster). ``ntk_core.experiments.profile.book_threads``
chooses the count from such ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

WORKLOADS = {
    "setting2": 'experiments.run("setting2", "quick", seeds=(0,), lams=(4.0,), clean_lams=(4.0,), epochs=30, use_cache=False)',
    "setting3": 'experiments.run("setting3", "quick", seeds=(0,), noise_levels=(0.4,), losses=("ce",), epochs=10, '
    "lr_milestones=(5, 8), use_cache=False)",
    "setting1": 'experiments.run("setting1", "quick", seeds=(0,), noise_levels=(0.4,), use_cache=False)',
}

_CHILD = """
import os, sys, tempfile, time
os.environ["NTK_CORE_CACHE"] = tempfile.mkdtemp()
import torch
torch.set_num_threads({threads})
from ntk_core import experiments
start = time.perf_counter()
{call}
print(time.perf_counter() - start)
"""

_BUSY = "while True:\n    pass\n"


def timed(workload: str, threads: int, extra_env: dict[str, str]) -> float:
    """Wall seconds of one workload in a fresh process with ``threads`` torch and OpenMP threads."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=os.getcwd(), **extra_env)
    code = _CHILD.format(threads=threads, call=WORKLOADS[workload])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--busy", nargs="+", type=int, default=[0, 2], help="numbers of busy processes beside")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--rounds", type=int, default=1, help="rounds per cell (the best is kept)")
    parser.add_argument(
        "--env",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="environment of the timed processes, e.g. OMP_WAIT_POLICY=PASSIVE",
    )
    args = parser.parse_args()
    extra_env = dict(item.split("=", 1) for item in args.env)
    import torch

    print(
        f"machine: {os.cpu_count()} CPU cores, torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}, "
        f"environment {extra_env or 'as is'}"
    )
    print("| workload | busy processes | " + " | ".join(f"{t} thread(s), s" for t in args.threads) + " | ratio |")
    print("|---|---:|" + "---:|" * len(args.threads) + "---:|")
    for busy in args.busy:
        hogs = [subprocess.Popen([sys.executable, "-c", _BUSY]) for _ in range(busy)]
        try:
            time.sleep(1.0 if busy else 0.0)
            for w in args.workloads:
                best = {t: min(timed(w, t, extra_env) for _ in range(args.rounds)) for t in args.threads}
                ratio = best[args.threads[-1]] / best[args.threads[0]]
                cells = " | ".join(f"{best[t]:.1f}" for t in args.threads)
                print(f"| {w} | {busy} | {cells} | {ratio:.2f} |", flush=True)
        finally:
            for h in hogs:
                h.kill()
                h.wait()


if __name__ == "__main__":
    main()
