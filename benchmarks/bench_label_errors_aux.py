"""Which labels are wrong, from one network training run: AUX's variables against cleanlab's K network fits (issue 60).

The model is a user's network (an MLP with PyTorch's default initialisation, Adam, mean cross-entropy,
mini-batches), not a kernel. Methods, each scoring every training label (higher: more likely wrong):

* **AUX** (``label_errors.from_aux``): one training run with AUX's variables (eq. (4), ``sparse=True`` with
  ``SparseAdam``), λ = ``--lam-ratio`` × the model's output sensitivity ‖∇θ f‖₁ at initialisation (the rule of
  thumb of ``bench_aux_lambda_adam.py``: a working λ lies at 0.02–5 times it; no validation run), scored by
  bᵢ[ỹᵢ] against the example's other entries;
* **loss** (the per-example-loss baseline): the cross-entropy of each given label under the same AUX-trained
  network's own outputs (without the variables);
* **cleanlab**: its documented recipe, out-of-sample predicted probabilities from 5-fold cross-validation of the
  same network trained the same way without AUX (5 training runs on 4/5 of the data), ranked by
  ``cleanlab.rank.get_label_quality_scores`` (self-confidence).

Metrics against the labels the noise changed: average precision, AUROC, precision at the true count, seconds.

    OMP_NUM_THREADS=1 python benchmarks/bench_label_errors_aux.py          # about 10 minutes on one core
    OMP_NUM_THREADS=1 python benchmarks/bench_label_errors_aux.py --lam-ratio 0.03 0.1 0.3 1 3 \\
        --json benchmarks/results/label_errors_aux.json                      # the band: about 15 minutes
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import ntk_core as nc
from ntk_core import label_errors
from ntk_core.bookkit.studies.label_errors import ranking_metrics
from ntk_core.data import load_mnist, mnist_features, sample_classes

CLASSES = 10


def dataset(name: str, n: int, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    """(float32 features, clean classes) of ``n`` examples, ``n // 10`` per class."""
    if name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        idx = sample_classes(d.target, range(CLASSES), n // CLASSES, seed)
        x = d.images[idx].reshape(len(idx), -1) / 16.0
        return torch.as_tensor(x, dtype=torch.float32), d.target[idx].astype(np.int64)
    ds = load_mnist("train")
    idx = sample_classes(ds.labels, range(CLASSES), n // CLASSES, seed)
    x = mnist_features(ds.images[idx], pool=2).reshape(len(idx), -1)
    return torch.as_tensor(x, dtype=torch.float32), ds.labels[idx].astype(np.int64)


def make_model(d: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d, 512), torch.nn.ReLU(), torch.nn.Linear(512, CLASSES))


def train(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, epochs: int, seed: int, lam: float | None = None
) -> nc.AuxiliaryVariables | None:
    """A user's loop: Adam (lr 1e-3), mean cross-entropy, batches of 64; with AUX's variables when ``lam``."""
    aux = nc.AuxiliaryVariables(len(x), outputs=CLASSES, lam=lam, sparse=True) if lam is not None else None
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt_aux = torch.optim.SparseAdam(aux.parameters(), lr=1e-3) if aux is not None else None
    batches = DataLoader(
        nc.with_indices(TensorDataset(x, y)), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    for _ in range(epochs):
        for i, xb, yb in batches:
            opt.zero_grad()
            out = model(xb)
            if aux is not None and opt_aux is not None:
                opt_aux.zero_grad()
                out = aux(out, i)
            F.cross_entropy(out, yb).backward()
            opt.step()
            if opt_aux is not None:
                opt_aux.step()
    return aux


def cleanlab_scores(x: torch.Tensor, noisy: np.ndarray, *, epochs: int, seed: int, folds: int = 5) -> np.ndarray:
    """1 − cleanlab's label quality from out-of-sample softmax outputs of ``folds`` network fits."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from cleanlab.rank import get_label_quality_scores

    probs = np.zeros((len(noisy), CLASSES))
    y = torch.as_tensor(noisy)
    for k, held in enumerate(np.array_split(np.random.default_rng(seed).permutation(len(noisy)), folds)):
        fit = np.setdiff1d(np.arange(len(noisy)), held)
        model = make_model(x.shape[1], seed + 100 * (k + 1))
        train(model, x[fit], y[fit], epochs=epochs, seed=seed)
        with torch.no_grad():
            probs[held] = torch.softmax(model(x[held]), dim=1).numpy()
    return 1.0 - get_label_quality_scores(noisy, probs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument(
        "--lam-ratio", type=float, nargs="+", default=[0.3], help="λ / ‖∇θ f‖₁ at initialisation (several: a band)"
    )
    parser.add_argument("--datasets", nargs="+", default=["mnist 10 classes", "digits"])
    parser.add_argument("--json", type=Path, help="also write the rows, every seed's metrics, to this new file")
    args = parser.parse_args(argv)
    if args.json is not None and args.json.exists():
        parser.error(f"--json {args.json} exists: name a new file (this script writes over nothing)")
    torch.set_num_threads(1)
    print(
        "| dataset | n | noise | seed | λ (× ‖∇θ f‖₁) | AP: AUX / loss / cleanlab | AUROC: AUX / loss / cleanlab "
        "| P@flips: AUX / loss / cleanlab | seconds: AUX / cleanlab |"
    )
    print("|---|---:|---|---:|---|---|---|---|---|")
    rows = []
    for name in args.datasets:
        for kind in ("symmetric", "pair-flip"):
            P = (nc.symmetric_transition if kind == "symmetric" else nc.pairflip_transition)(CLASSES, 0.3)
            for seed in args.seeds:
                x, clean = dataset(name, args.n, seed)
                noisy = np.asarray(nc.corrupt(clean, P, seed=seed))
                wrong = noisy != clean
                start = time.perf_counter()
                cl = cleanlab_scores(x, noisy, epochs=args.epochs, seed=seed)
                t_cl = time.perf_counter() - start
                for ratio in args.lam_ratio:
                    model = make_model(x.shape[1], seed)
                    lam = ratio * nc.output_sensitivity(model, x[:200])
                    start = time.perf_counter()
                    aux = train(model, x, torch.as_tensor(noisy), epochs=args.epochs, seed=seed, lam=lam)
                    with torch.no_grad():
                        outputs = model(x)
                    found = label_errors.from_aux(aux, noisy, outputs=outputs)
                    t_aux = time.perf_counter() - start
                    loss = F.cross_entropy(outputs, torch.as_tensor(noisy), reduction="none").numpy()
                    m = dict(
                        zip(("aux", "loss", "cleanlab"), (ranking_metrics(s, wrong) for s in (found.scores, loss, cl)))
                    )
                    cells = [
                        " / ".join(f"{r[key]:.3f}" for r in m.values()) for key in ("ap", "auroc", "precision_at_k")
                    ]
                    print(
                        f"| {name} | {len(x)} | {kind} 30 % | {seed} | {lam:.3g} ({ratio:g}) | {cells[0]} | "
                        f"{cells[1]} | {cells[2]} | {t_aux:.1f} / {t_cl:.1f} |",
                        flush=True,
                    )
                    rows.append(
                        {
                            "dataset": name,
                            "n": len(x),
                            "noise": kind,
                            "rate": 0.3,
                            "seed": seed,
                            "lam": lam,
                            "lam_ratio": ratio,
                            "metrics": m,
                            "seconds": {"aux": t_aux, "cleanlab": t_cl},
                        }
                    )
    if args.json is not None:
        with open(args.json, "x") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
