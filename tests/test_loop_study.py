"""ntk_core.bookkit.studies.own_loop: the selection protocol on a history with a known answer, the bound's λ against an explicit
Jacobian, a tiny study end to end, and bad configurations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from ntk_core.bookkit.studies import own_loop as ls
from ntk_core.bounds import complexity, leading_lambda, multiclass_noise_subgaussian_sigma
from ntk_core.noise import symmetric_transition


def _history(rows):
    cols = ["seed", "method", "lam", "epoch", "train_error_noisy", "memorised", "val_error_noisy",
            "val_error_clean", "test_error"]  # fmt: skip
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_selection_follows_the_protocol_on_noisy_or_clean_labels():
    config = ls.OwnLoopConfig(epochs=2, rdi_lams=(1.0, 2.0, 3.0), aux_lams=(1.0, 2.0, 3.0), seeds=(7,))
    nan = math.nan
    rows = [
        (7, "vanilla", nan, 1, 0.3, 0.1, 0.40, 0.20, 0.21),
        (7, "vanilla", nan, 2, 0.0, 1.0, 0.45, 0.30, 0.31),
        *[(7, "rdi", lam, 2, 0.1, 0.5, v, c, t) for lam, v, c, t in ((1.0, 0.5, 0.1, 0.11), (2.0, 0.4, 0.2, 0.12), (3.0, 0.6, 0.3, 0.13))],
        *[(7, "aux", lam, 2, 0.1, 0.5, v, c, t) for lam, v, c, t in ((1.0, 0.3, 0.4, 0.14), (2.0, 0.3, 0.2, 0.15), (3.0, 0.6, 0.3, 0.16))],
        (7, "rdi_bound", 2.5, 2, 0.1, 0.5, 0.9, 0.9, 0.17),
    ]  # fmt: skip
    study = ls.OwnLoopStudy(_history(rows), {7: 2.5}, config, 1_000)
    noisy = ls.select_by_validation(study, "noisy").set_index("method")
    assert noisy.loc["vanilla", "epoch"] == 2 and noisy.loc["vanilla", "test_error"] == 0.31
    assert noisy.loc["early stopping", "epoch"] == 1 and noisy.loc["early stopping", "test_error"] == 0.21
    assert noisy.loc["RDI", "lam"] == 2.0 and not noisy.loc["RDI", "grid_edge"]
    assert noisy.loc["AUX", "lam"] == 1.0 and noisy.loc["AUX", "grid_edge"]  # a tie: the smallest λ, at the edge
    assert noisy.loc["RDI (bound's λ)", "test_error"] == 0.17
    clean = ls.select_by_validation(study, "clean").set_index("method")
    assert clean.loc["RDI", "lam"] == 1.0 and clean.loc["AUX", "lam"] == 2.0
    with pytest.raises(ValueError, match="noisy"):
        ls.select_by_validation(study, "oracle")


def test_bound_lambda_is_the_leading_lambda_of_the_explicit_jacobian_kernel():
    torch.manual_seed(0)
    model = ls.make_model(6, 16, seed=0).double()
    x = torch.randn(12, 6, dtype=torch.float64)
    noisy = torch.arange(12) % 10
    P = symmetric_transition(10, 0.3)
    # K per output: (1/10) Σ_h J_h J_hᵀ, from the Jacobian of every output by autograd, one example at a time
    params = list(model.parameters())
    rows = []
    for i in range(12):
        out = model(x[i : i + 1])[0]
        rows.append(
            torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(out[h], params, retain_graph=True)]) for h in range(10)])
        )  # fmt: skip
    J = torch.stack(rows)  # (n, outputs, parameters)
    K = torch.einsum("ihp,jhp->ij", J, J).numpy() / 10
    onehot = np.eye(10)[noisy.numpy()]
    C = [complexity(K, onehot[:, h]) for h in range(10)]
    expected = leading_lambda(C, 12, float(np.trace(K)), multiclass_noise_subgaussian_sigma(P))
    assert ls.bound_lambda(model, x, noisy, P) == pytest.approx(expected, rel=1e-8)


def test_a_tiny_study_runs_every_method_on_every_seed(shared_data, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    config = ls.OwnLoopConfig(per_class=6, n_test=50, width=16, epochs=2, batch_size=8, seeds=(0, 1))
    study = ls.own_loop_study(config)
    h = study.history
    runs = 1 + len(config.rdi_lams) + 1 + len(config.aux_lams)
    assert len(h) == len(config.seeds) * runs * config.epochs
    assert set(h["method"]) == {"vanilla", "rdi", "rdi_bound", "aux"}
    assert h[["train_error_noisy", "val_error_noisy", "test_error"]].apply(lambda c: c.between(0, 1)).all().all()
    picks = ls.select_by_validation(study)
    assert len(picks) == 2 * 5 and set(picks["seed"]) == {0, 1}
    # the same seed draws the same task and the same runs
    again = ls.own_loop_study(ls.OwnLoopConfig(per_class=6, n_test=50, width=16, epochs=2, batch_size=8, seeds=(1,)))
    pd.testing.assert_frame_equal(h[h["seed"] == 1].reset_index(drop=True), again.history)


def test_two_worker_processes_give_the_history_of_one(shared_data, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    config = ls.OwnLoopConfig(per_class=6, n_test=50, width=16, epochs=2, batch_size=8, seeds=(0, 1, 2))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers' thread count, so that both sum in the same order
    try:
        one = ls.own_loop_study(config)
    finally:
        torch.set_num_threads(threads)
    lines: list[str] = []
    two = ls.own_loop_study(config, progress=lines.append, workers=2)
    pd.testing.assert_frame_equal(one.history, two.history)
    assert one.bound_lams == two.bound_lams and lines == ["seed 0: done", "seed 1: done", "seed 2: done"]
    with pytest.raises(ValueError, match="workers"):
        ls.own_loop_study(config, workers=0)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(noise=0.5, noise_kind="pairflip"), "noise"),
        (dict(noise=0.95), "noise"),
        (dict(noise_kind="uniform"), "noise_kind"),
        (dict(rdi_lams=(1.0, 2.0)), "at least 3"),
        (dict(aux_lams=(4.0, 2.0, 8.0)), "increasing"),
        (dict(seeds=(0, 0)), "distinct"),
        (dict(val_fraction=1.0), "val_fraction"),
        (dict(epochs=0), "epochs"),
    ],
)
def test_bad_configurations_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        ls.OwnLoopConfig(**bad)


def test_gain_over_vanilla_and_the_summary_table():
    picks = pd.DataFrame(
        [
            {"seed": s, "method": m, "lam": lam, "epoch": 10, "test_error": e, "grid_edge": False}
            for s, (v, r) in enumerate(((0.30, 0.10), (0.32, 0.14), (0.28, 0.12)))
            for m, lam, e in (("vanilla", math.nan, v), ("RDI", 16.0, r))
        ]
    )
    gain = ls.gain_over_vanilla(picks, "RDI", n_test=1_000)
    assert gain["seeds"] == 3 and gain["mean"] == pytest.approx(0.18)
    assert gain["n_test"] == 1_000 and gain["test_se"] == pytest.approx(((0.30 + 0.12) / 1_000) ** 0.5)
    table = ls.summary_table(picks).set_index("method")
    assert table.loc["RDI", "λ per seed"] == "16, 16, 16" and table.loc["vanilla", "λ per seed"] == ""
    assert table.loc["vanilla", "test error (%)"] == "30.0 ± 2.0"
