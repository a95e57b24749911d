"""Which labels are wrong: ``ntk_core.label_errors`` against cleanlab, on the same model (issue 60).

The model is kernel ridge regression (eq. (8), ridge λ²) with the infinite-width NTK of a one-hidden-layer ReLU
network (``infinite.relu_ntk``) on features scaled to ‖x‖² = d: what RDI and AUX train in the NTK regime
(Theorem 4.1). λ is chosen once per row, for every method alike, by the noisy-label leave-one-out error of the
model over a grid (λ² = t · tr K / n, t ∈ ``LAM_GRID``): a user has only the noisy labels.

Methods, each scoring every training label (higher: more likely wrong):

* **leave-one-out** (``label_errors.from_kernel``, default): the label against the exact leave-one-out
  prediction of the other n − 1 examples, from one factorisation of K + λ²I;
* **residual** (``method="residual"``): the label against the in-sample fit (the per-example-loss baseline of
  the model: what a K on disk gives);
* **cleanlab**: cleanlab's documented recipe, out-of-sample predicted probabilities from 5-fold
  cross-validation of the same model (5 fits on 4/5 of the data), the KRR outputs turned into probabilities by
  clipping at 10⁻⁴ and normalising (±1 outputs: p(+1) = (1 + f)/2); ranked by
  ``cleanlab.rank.get_label_quality_scores`` (self-confidence), and its flagged set from
  ``cleanlab.filter.find_label_issues`` (prune by noise rate).

λ at the grid's edge is marked † (the count still falling there). Metrics against the planted flips: AUROC, average precision, precision at the true number of flips (= recall
there), cleanlab's flagged set's precision and recall, and the seconds of each method (λ's selection aside: it
is shared).

    OMP_NUM_THREADS=2 python benchmarks/bench_label_errors.py            # about 15 minutes on 2 cores
    OMP_NUM_THREADS=2 python benchmarks/bench_label_errors.py --n 500 --seeds 0 --rates 0.2   # smoke test
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import ntk_core as nc
from ntk_core import label_errors
from ntk_core.bookkit.studies.label_errors import cleanlab_scores, lam_by_leave_one_out, ranking_metrics
from ntk_core.data import load_cifar10, load_mnist, sample_classes, sphere_features
from ntk_core.infinite import relu_ntk


def dataset(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(features with ‖x‖² = d, clean labels: ±1 for the binary task, else classes) of ``n`` examples."""
    if name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        idx = np.random.default_rng(seed).permutation(len(d.target))[:n]
        return sphere_features(d.images[idx]), d.target[idx].astype(np.int64)
    if name == "cifar10":
        ds = load_cifar10("train")
        idx = sample_classes(ds.labels, range(10), n // 10, seed)
        return sphere_features(ds.images[idx].astype(np.float64) - 127.5), ds.labels[idx].astype(np.int64)
    ds = load_mnist("train")
    classes = (5, 8) if name == "mnist 5 vs 8" else tuple(range(10))
    idx = sample_classes(ds.labels, classes, n // len(classes), seed)
    labels = ds.labels[idx].astype(np.int64)
    if name == "mnist 5 vs 8":
        labels = np.where(labels == 5, 1, -1)
    return sphere_features(ds.images[idx]), labels


def noisy_labels(labels: np.ndarray, kind: str, rate: float, seed: int) -> np.ndarray:
    if labels.min() < 0:  # ±1: a flip is the only noise
        return np.asarray(nc.flip_binary(labels, rate, seed=seed))
    make = nc.symmetric_transition if kind == "symmetric" else nc.pairflip_transition
    return np.asarray(nc.corrupt(labels, make(10, rate), seed=seed))


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="training examples per dataset (digits: at most 1,797)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.4])
    parser.add_argument("--datasets", nargs="+", default=["mnist 5 vs 8", "mnist 10 classes", "cifar10", "digits"])
    parser.add_argument("--json", type=Path, help="also write the rows, every seed's metrics, to this new file")
    args = parser.parse_args(argv)
    if args.json is not None and args.json.exists():
        parser.error(f"--json: {args.json} exists; name a new file (this command does not write over one)")
    table: list[dict] = []
    kernels: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
    print(
        "| dataset | n | noise | rate | seeds | λ²·n/tr K | AP: leave-one-out / residual / cleanlab "
        "| AUROC: leave-one-out / residual / cleanlab | P@flips: leave-one-out / residual / cleanlab "
        "| cleanlab's set: precision / recall | seconds: leave-one-out / residual / cleanlab |"
    )
    print("|---|---:|---|---:|---:|---|---|---|---|---|---|")
    for name in args.datasets:
        kinds = ["flip"] if name == "mnist 5 vs 8" else ["symmetric", "pair-flip"]
        for kind in kinds:
            for rate in args.rates:
                per_seed = []
                for seed in args.seeds:
                    if (name, seed) not in kernels:
                        x, clean = dataset(name, args.n, seed)
                        kernels[(name, seed)] = relu_ntk(x), clean
                    K, clean = kernels[(name, seed)]
                    noisy = noisy_labels(clean, "symmetric" if kind == "symmetric" else "pairflip", rate, seed)
                    wrong = (noisy != clean).astype(np.int64)
                    lam, edge = lam_by_leave_one_out(K, noisy)
                    loo, t_loo = timed(lambda: label_errors.from_kernel(K, noisy, lam))  # noqa: B023
                    res, t_res = timed(lambda: label_errors.from_kernel(K, noisy, lam, method="residual"))  # noqa: B023
                    (cl, flagged), t_cl = timed(lambda: cleanlab_scores(K, noisy, lam, seed=seed))  # type: ignore[misc]  # noqa: B023
                    per_seed.append(
                        {
                            "t": f"{lam**2 * len(K) / np.trace(K):g}" + ("†" if edge else ""),
                            "loo": ranking_metrics(loo.scores, wrong),  # type: ignore[attr-defined]
                            "res": ranking_metrics(res.scores, wrong),  # type: ignore[attr-defined]
                            "cl": ranking_metrics(cl, wrong),
                            "cl_p": float(wrong[flagged].mean()) if flagged.any() else float("nan"),
                            "cl_r": float(flagged[wrong == 1].mean()),
                            "sec": (t_loo, t_res, t_cl),
                        }
                    )

                def mean(path: Callable[[dict], float], rows: list[dict] = per_seed) -> float:
                    return float(np.mean([path(r) for r in rows]))

                cells = [
                    " / ".join(f"{mean(lambda r, m=m, key=key: r[m][key]):.3f}" for m in ("loo", "res", "cl"))  # type: ignore[misc]
                    for key in ("ap", "auroc", "precision_at_k")
                ]
                ts = sorted({r["t"] for r in per_seed})
                secs = " / ".join(f"{mean(lambda r, i=i: r['sec'][i]):.2f}" for i in range(3))  # type: ignore[misc]
                print(
                    f"| {name} | {len(K)} | {kind} | {rate:g} | {len(per_seed)} | {', '.join(ts)} | {cells[0]} | "
                    f"{cells[1]} | {cells[2]} | {mean(lambda r: r['cl_p']):.3f} / {mean(lambda r: r['cl_r']):.3f} "
                    f"| {secs} |",
                    flush=True,
                )
                table.append({"dataset": name, "n": len(K), "noise": kind, "rate": rate, "seeds": per_seed})
    if args.json is not None:
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps({"command": "benchmarks/bench_label_errors.py", "rows": table}, indent=1))
        tmp.replace(args.json)


if __name__ == "__main__":
    main()
