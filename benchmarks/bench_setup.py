"""Set-up cost of ``empirical_ntk(method="auto")``: the forward cost counted by the plan's trace vs by its own pass.

Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/bench_setup.py --threads 1    # Setting 2 CNN, n = 128
    python benchmarks/bench_setup.py --n 256 --depth 8 --rounds 5

Before it estimates anything, ``auto`` counts the forward cost of one example
(FLOPs and leaf-module outputs) and traces the model for the structured
method's plan (two forward passes, 2 and 3 examples). The old set-up counted
the cost in a separate pass under ``torch.utils.flop_counter.FlopCounterMode``
(``ntk_core.ntk_gram._forward_cost``); the new one counts it in the plan's traced
passes (``ntk_core.ntk.structured._taped_cost``). This script times, side by side
in one process (interleaved rounds, best time kept), on the Setting 2 CNN
(built as in ``bench_structured.py``):

* the pieces: one plain forward pass of one example, the FlopCounterMode
  pass, the plan's two traced passes without and with counting;
* the set-up of ``auto`` (argument checks, estimates, plan: ``_prepare``),
  old and new;
* the whole ``empirical_ntk(method="auto")``, old and new set-up, and the
  ``torch.func`` tutorial's Jacobian contraction (``bench_structured.py``'s
  ``tutorial_ntk``).

It also checks that the old and new set-ups give the same estimates.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_structured import setting2_net, tutorial_ntk  # noqa: E402

from ntk_core.ntk import cost as ntk_cost, gram as ntk_gram, problem as ntk_problem  # noqa: E402
from ntk_core.ntk import structured as st  # noqa: E402


def old_estimates(prob: Any, structured: bool = True) -> tuple[dict[str, Any], Any, int]:
    """``ntk_gram._estimates`` as it was: the forward cost by its own FlopCounterMode pass, then the plan."""
    cost = ntk_gram._forward_cost(prob)
    est = {"jacobian": ntk_cost._estimate_jacobian(prob, cost)}
    est["ntvp"], chunk = ntk_cost._estimate_ntvp(prob, cost)
    plan = st._plan(prob, cost) if structured else None
    if plan is not None:
        est["structured"] = plan.estimate
    return est, plan, chunk


NEW_ESTIMATES = ntk_gram._estimates


def with_estimates(estimates: Callable[..., Any], fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        ntk_gram._estimates = estimates  # type: ignore[assignment]
        try:
            return fn()
        finally:
            ntk_gram._estimates = NEW_ESTIMATES

    return run


def timed(rows: list[tuple[str, Callable[[], Any]]], rounds: int) -> dict[str, float]:
    """Best seconds of each function over interleaved rounds."""
    best = {name: math.inf for name, _ in rows}
    for _ in range(rounds):
        for name, fn in rows:
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=128, help="examples (default 128)")
    parser.add_argument("--depth", type=int, default=11, help="Setting 2 CNN depth (default 11)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of the set-up timings (default 20)")
    parser.add_argument("--ntk-rounds", type=int, default=5, help="rounds of the whole-kernel timings (default 5)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    model = setting2_net(args.depth).eval()
    x = torch.randn(args.n, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} threads "
        f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}), float32; Setting 2 CNN depth {args.depth}, "
        f"n = {args.n}; load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}"
    )
    prob = ntk_problem._make_problem(model, x, None, "trace", None, None, None)
    old_cost = ntk_gram._forward_cost(prob)
    new_plan = st._plan(prob)
    same_cost = new_plan._forward == old_cost
    old_est, new_est = old_estimates(prob)[0], ntk_gram._estimates(prob)[0]
    print(f"# forward cost: old {old_cost}, new {new_plan._forward}, equal: {same_cost}")
    print(f"# estimates equal: {old_est == new_est}; auto picks {ntk_gram._pick(new_est)}")
    if not same_cost or old_est != new_est:
        raise SystemExit("the new set-up does not reproduce the old estimates")

    def prepare() -> Any:
        return ntk_gram._prepare(model, x, None, "auto", "trace", None, None, None, None, None, announce=False)

    def plain_forward() -> None:
        with torch.no_grad():
            prob.forward(prob.params, x[:1])

    pieces = [
        ("plain forward, 1 example", plain_forward),
        ("FlopCounterMode pass + hooks (_forward_cost)", lambda: ntk_gram._forward_cost(prob)),
        ("plan, cost given (2 traced passes)", lambda: st._plan(prob, old_cost)),
        ("plan, counting in its passes", lambda: st._plan(prob)),
        ("auto set-up, old (_prepare)", with_estimates(old_estimates, prepare)),
        ("auto set-up, new (_prepare)", prepare),
    ]
    best = timed(pieces, args.rounds)
    print(f"\n| set-up piece (best of {args.rounds}) | ms |\n|---|---:|")
    for name, s in best.items():
        print(f"| {name} | {1e3 * s:.2f} |")

    whole = [
        ("tutorial vmap(jacrev)+einsum", lambda: tutorial_ntk(model, x)),
        ("empirical_ntk auto, old set-up", with_estimates(old_estimates, lambda: ntk_gram.empirical_ntk(model, x))),
        ("empirical_ntk auto, new set-up", lambda: ntk_gram.empirical_ntk(model, x)),
    ]
    ref = tutorial_ntk(model, x).double()
    for name, fn in whole[1:]:
        err = float((fn().double() - ref).norm() / ref.norm())
        print(f"# {name}: relative error vs tutorial {err:.1e}")
    best = timed(whole, args.ntk_rounds)
    t_ref = best[whole[0][0]]
    print(f"\n| whole kernel, n = {args.n} (best of {args.ntk_rounds}) | ms | / tutorial |\n|---|---:|---:|")
    for name, s in best.items():
        print(f"| {name} | {1e3 * s:.1f} | {s / t_ref:.2f}x |")


if __name__ == "__main__":
    main()
