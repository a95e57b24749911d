"""What AUX's λ means under Adam: a measured rule of thumb (issue 59).

Eq. (4) trains f(θ, xᵢ) + λbᵢ. Under plain gradient descent on a sum loss, λ is the ridge of Theorem 4.1 and its
scale is the kernel's. Under Adam (``SparseAdam`` for the bᵢ, README's loop) every step is normalised: while
example i is in the batch, bᵢ moves by at most about the learning rate per step, and so does each of the
network's parameters. Two readings follow. (a) λbᵢ can move by about λ·lr·E in E epochs, so the λ that works
would scale like 1/(lr·E). (b) What matters is the race between λbᵢ and the network's own output f(θ, xᵢ),
which a step of Adam moves by up to about lr·‖∇θ f(θ, xᵢ)‖₁ (every parameter by ~lr, in the direction that
helps): both scale with lr and with E, so the λ that works would not depend on lr or E but on the model,
about ‖∇θ f‖₁, which grows with the width.

This script tells them apart on MNIST, ten classes, symmetric noise, README's loop (a ReLU MLP with PyTorch's
default initialisation, Adam for the model, ``SparseAdam`` for the bᵢ, mean cross-entropy, a cosine schedule,
minibatches of 64): for several (lr, E, width) it trains AUX at each λ of ``--lams`` and reports the error on a
*noisy* validation split (what a user selects with) and the clean test error, with the mean ‖∇θ f_c(θ(0), x)‖₁
over outputs c and 200 training images at initialisation.

    OMP_NUM_THREADS=1 python benchmarks/bench_aux_lambda_adam.py          # about 10 minutes on one thread
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, jacrev, vmap
from torch.utils.data import DataLoader, TensorDataset

import ntk_core as nc
from ntk_core.data import load_mnist, mnist_features, sample_classes

CLASSES = 10


def task(per_class: int, noise: float, seed: int) -> tuple[tuple, tuple, tuple]:
    """(x, noisy y) for training and for validation (a fifth), and a clean test split of 2,000 images."""
    train, test = load_mnist("train"), load_mnist("test")
    picked = sample_classes(train.labels, range(CLASSES), per_class, seed)
    x = torch.from_numpy(mnist_features(train.images[picked], pool=2))
    noisy = nc.corrupt(train.labels[picked], nc.symmetric_transition(CLASSES, noise), seed=seed)
    y = torch.from_numpy(np.asarray(noisy)).long()
    n_val = len(x) // 5
    rng = np.random.default_rng(seed)
    t = rng.choice(len(test.labels), size=2000, replace=False)
    x_test = torch.from_numpy(mnist_features(test.images[t], pool=2))
    y_test = torch.from_numpy(test.labels[t]).long()
    return (x[n_val:], y[n_val:]), (x[:n_val], y[:n_val]), (x_test, y_test)


def make_model(d: int, width: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, width), nn.ReLU(), nn.Linear(width, CLASSES))


def gradient_l1(model: nn.Module, x: torch.Tensor) -> float:
    """Mean over examples and outputs of ‖∇θ f_c(θ, x)‖₁: how far one sign step of size 1 moves an output."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    J = vmap(jacrev(lambda p, xi: functional_call(model, p, (xi[None],))[0]), (None, 0))(params, x)
    return float(sum(j.abs().flatten(2).sum(-1) for j in J.values()).mean())


def train_aux(x: torch.Tensor, y: torch.Tensor, lam: float, lr: float, epochs: int, width: int, seed: int) -> nn.Module:
    """README's loop: AUX with ``sparse=True`` and ``SparseAdam``, Adam for the model, cosine schedule."""
    model = make_model(x.shape[1], width, seed)
    aux = nc.AuxiliaryVariables(len(x), outputs=CLASSES, lam=lam, sparse=True)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    opt_aux = torch.optim.SparseAdam(list(aux.parameters()), lr=lr)
    schedules = [torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=epochs) for o in (opt, opt_aux)]
    batches = DataLoader(
        nc.with_indices(TensorDataset(x, y)), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    for _ in range(epochs):
        model.train()
        for i, xb, yb in batches:
            opt.zero_grad()
            opt_aux.zero_grad()
            nn.functional.cross_entropy(aux(model(xb), i), yb).backward()
            opt.step()
            opt_aux.step()
        for s in schedules:
            s.step()
    return model.eval()


@torch.no_grad()
def error(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return float((model(x).argmax(dim=1) != y).float().mean())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=300)
    parser.add_argument("--noise", type=float, default=0.4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lams", type=float, nargs="+", default=[10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["2e-3:40:512", "5e-4:40:512", "2e-3:10:512", "2e-3:10:128", "2e-3:10:2048"],
        help="lr:epochs:width",
    )
    args = parser.parse_args(argv)
    (x, y), (xv, yv), (xt, yt) = task(args.per_class, args.noise, args.seed)
    print(
        f"MNIST, 10 classes, {len(x)} training images ({args.noise:.0%} symmetric noise), {len(xv)} noisy validation, "
        f"{len(xt)} clean test; torch {torch.__version__}, {torch.get_num_threads()} thread(s)"
    )
    print("| lr | epochs | width | λ | noisy validation error | clean test error | seconds |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    picks = []
    for setting in args.settings:
        lr_text, epochs_text, width_text = setting.split(":")
        lr, epochs, width = float(lr_text), int(epochs_text), int(width_text)
        l1 = gradient_l1(make_model(x.shape[1], width, args.seed), x[:200])
        rows = []
        for lam in args.lams:
            start = time.perf_counter()
            model = train_aux(x, y, lam, lr, epochs, width, args.seed)
            seconds = time.perf_counter() - start
            rows.append((lam, error(model, xv, yv), error(model, xt, yt)))
            print(f"| {lr:g} | {epochs} | {width} | {lam:g} | {rows[-1][1]:.3f} | {rows[-1][2]:.3f} | {seconds:.0f} |")
        picked = min(rows, key=lambda r: r[1])
        best = min(rows, key=lambda r: r[2])
        picks.append((lr, epochs, width, l1, picked, best))
    print()
    print(
        "| lr | epochs | width | ‖∇θ f‖₁ at θ(0) | picked λ (noisy val.) | its clean test error "
        "| best λ on clean test | its error | picked λ / ‖∇θ f‖₁ |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for lr, epochs, width, l1, picked, best in picks:
        print(
            f"| {lr:g} | {epochs} | {width} | {l1:.0f} | {picked[0]:g} | {picked[2]:.3f} | {best[0]:g} | "
            f"{best[2]:.3f} | {picked[0] / l1:.2f} |"
        )


if __name__ == "__main__":
    main()
