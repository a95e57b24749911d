"""Trials for Setting 3's medium profile: can a profile that 2 CPU cores run in about an hour meet Appendix D's
premises?

The AUX recipe of Appendix D rests on two observations about *normal* training (without AUX): it fits the noisy
training labels in the end (there is memorisation for AUX to prevent), and it shows "little over-fitting to
noise in the first stage of training" (before the first learning-rate decay), which is why AUX's auxiliary
variables are held back by weight decay in that stage. This script trains candidate profiles of Setting 3 at
noise 0.4 with cross-entropy, with and without AUX, and keeps each run's curves, so that the book can measure
both premises on them with :func:`ntk_core.experiments.setting3.first_stage` (``book/experiments_setting3.md``,
section "Can a 2-core profile meet the premise?").

Run from the repository root (one worker process per run; on a GPU several share it)::

    NTK_CORE_DATA=/path/to/data python results/trials/setting3_premise.py --device cuda --workers 9
    NTK_CORE_DATA=/path/to/data python results/trials/setting3_premise.py --device cpu --workers 1 --only medium

The output, ``results/trials/setting3_premise.json`` (written whole at each finished run, through a temporary
file), holds per run: the candidate's name and config overrides, the seed, the wall seconds and, for normal
training and for AUX, the per-epoch learning rate, test accuracy, training accuracy on the noisy labels (the
network alone) and validation accuracy, and the test accuracy at the epoch of best validation accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

#: The candidates: overrides of Setting 3's medium profile (noise 0.4 and CCE only are set for every one).
#: The partial CIFAR-10 has 4,000 training images: 3,500 trained on and 500 for validation is the most it gives.
CANDIDATES: dict[str, dict] = {
    "medium": {"n_train": 2000, "n_val": 500},
    "n3500": {"n_train": 3500, "n_val": 500},
    "n3500_aug": {"n_train": 3500, "n_val": 500, "augment": True},
    "n3500_aug_e60": {"n_train": 3500, "n_val": 500, "augment": True, "epochs": 60, "lr_milestones": (30, 45)},
    "n3500_aug_e80": {"n_train": 3500, "n_val": 500, "augment": True, "epochs": 80, "lr_milestones": (40, 60)},
    "n3500_aug_w32": {"n_train": 3500, "n_val": 500, "augment": True, "width": 32},
    "n3500_aug_w32_e60": {
        "n_train": 3500,
        "n_val": 500,
        "augment": True,
        "width": 32,
        "epochs": 60,
        "lr_milestones": (30, 45),
    },
    "n3500_aug_b128_e60": {
        "n_train": 3500,
        "n_val": 500,
        "augment": True,
        "batch_size": 128,
        "epochs": 60,
        "lr_milestones": (30, 45),
    },
    "n3500_aug_lr0.02": {"n_train": 3500, "n_val": 500, "augment": True, "lr": 0.02},
}

OUT = Path(__file__).with_suffix(".json")


def overrides(name: str) -> dict:
    """The candidate's config overrides; AUX's weight decay keeps the full profile's balance (5e-4 · 45,000 / n)."""
    over = dict(CANDIDATES[name])
    over.setdefault("aux_weight_decay", 5e-4 * 45_000 / over["n_train"])
    return over


def one(job: tuple[str, int, str]) -> dict:
    """Train one candidate (normal and AUX, CCE, noise 0.4) on one seed; its curves."""
    name, seed, device = job
    os.environ.setdefault("NTK_CORE_CACHE", tempfile.mkdtemp())
    import torch

    torch.set_num_threads(1)
    from ntk_core import experiments

    start = time.perf_counter()
    from ntk_core.experiments import setting3

    # AUX at λ = 4 only, as the trials were made (before the selection protocol chose λ from a grid)
    table = experiments.run(
        "setting3",
        "medium",
        device=device,
        noise_levels=(0.4,),
        losses=("ce",),
        seeds=(seed,),
        lam_grid=(4.0,),
        **overrides(name),
    ).table
    # the epoch of best validation accuracy on the clean validation labels (the oracle), as the trials measured it
    table = setting3.chosen(table, oracle=True)
    out: dict = {"name": name, "overrides": overrides(name), "seed": seed, "seconds": time.perf_counter() - start}
    for aux in (False, True):
        curves = table[(table["part"] == "curves") & (table["aux"] == aux)].sort_values("epoch")
        summary = table[(table["part"] == "summary") & (table["aux"] == aux)]
        chosen = summary[summary["method"].str.contains("early stop|best", regex=True)]
        out["aux" if aux else "normal"] = {
            **{c: [round(float(v), 4) for v in curves[c]] for c in ("lr", "test_acc", "train_acc_net", "val_acc")},
            "early_stop_test_acc": float(chosen["test_acc"].iloc[0]),
        }
    return out


def write(results: list[dict], meta: dict) -> None:
    """The whole JSON, through a temporary file: never half-written."""
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"meta": meta, "runs": results}, indent=1) + "\n")
    tmp.replace(OUT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--only", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES))
    args = parser.parse_args()
    import multiprocessing as mp

    import torch

    device_name = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "CPU"
    meta = {
        "device": f"{args.device} ({device_name})",
        "torch": torch.__version__,
        "workers": args.workers,
        "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    jobs = [(name, seed, args.device) for seed in args.seeds for name in args.only]
    results: list[dict] = []
    with mp.get_context("spawn").Pool(args.workers) as pool:
        for done in pool.imap_unordered(one, jobs):
            results.append(done)
            write(results, meta)
            print(
                f"{len(results)}/{len(jobs)}: {done['name']} seed {done['seed']} ({done['seconds']:.0f} s)", flush=True
            )


if __name__ == "__main__":
    main()
