"""ntk_core.train: the semantics of RDI, AUX and early stopping on hand-checkable cases, resume, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from ntk_core.train import TrainConfig, classification_error, predict, train



@pytest.fixture(autouse=True)
def float64():
    """These checks compare against closed forms to 1e-8 or better: run them in float64, then restore."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def _linear_problem(n=12, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    y = torch.where(torch.randn(n, generator=g) > 0, 1, -1)
    model = nn.Linear(d, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.randn(1, d, generator=g))
    return model, x, y


def _krr_closed_form(x, y, f0, lam, x_eval, f0_eval):
    """Theorem 4.1 with non-zero initial output: f0(x) + k(x, X)(K + λ²I)^{-1}(y − f0(X)), k = linear kernel."""
    K = (x @ x.T).numpy()
    alpha = np.linalg.solve(K + lam**2 * np.eye(len(K)), y.numpy().astype(float) - f0)
    return f0_eval + (x_eval @ x.T).numpy() @ alpha


@pytest.mark.parametrize("method", ["rdi", "aux"])
def test_linear_model_reaches_krr_with_ridge_lambda_squared(method):
    model, x, y = _linear_problem()
    lam = 0.7
    f0 = predict(model, x)[:, 0].numpy()
    x_eval = torch.randn(4, x.shape[1], generator=torch.Generator().manual_seed(9))
    f0_eval = predict(model, x_eval)[:, 0].numpy()
    eta = 1.0 / (torch.linalg.matrix_norm(x @ x.T, ord=2).item() + lam**2)  # Theorem 4.1's condition
    result = train(model, x, y, TrainConfig(method=method, lam=lam, lr=eta, epochs=3000, eval_every=3000))
    expected = _krr_closed_form(x, y, f0, lam, x_eval, f0_eval)
    np.testing.assert_allclose(predict(result.model, x_eval)[:, 0].numpy(), expected, atol=1e-8)


def test_rdi_and_aux_iterates_coincide_for_a_linear_model():
    """Theorem 4.1 on the trainer itself: a linear model is its own linearisation, so θ(t) = θ̄(t)."""
    lam, eta = 0.5, 0.01
    model_r, x, y = _linear_problem(seed=3)
    model_a, _, _ = _linear_problem(seed=3)
    train(model_r, x, y, TrainConfig(method="rdi", lam=lam, lr=eta, epochs=25))
    train(model_a, x, y, TrainConfig(method="aux", lam=lam, lr=eta, epochs=25))
    torch.testing.assert_close(model_r.weight, model_a.weight, atol=1e-12, rtol=0)


def test_rdi_gradient_includes_lambda_squared_times_distance():
    model, x, y = _linear_problem()
    lam, eta = 2.0, 0.05
    w0 = model.weight.detach().clone()
    with torch.no_grad():  # move away from θ(0) first so the penalty's gradient is non-zero
        model.weight.add_(0.3)
    # the trainer records θ(0) at the start of train(), so run the comparison by hand:
    # one full-batch step from θ with θ(0) = current θ has zero penalty gradient ...
    w_start = model.weight.detach().clone()
    train(model, x, y, TrainConfig(method="rdi", lam=lam, lr=eta, epochs=1))
    residual = (x @ w_start.T)[:, 0] - y
    vanilla_step = w_start - eta * (residual[:, None] * x).sum(0)
    torch.testing.assert_close(model.weight, vanilla_step, atol=1e-12, rtol=0)
    # ... and over two steps the second one includes λ²(θ(1) − θ(0))
    model2, _, _ = _linear_problem()
    with torch.no_grad():
        model2.weight.copy_(w_start)
    train(model2, x, y, TrainConfig(method="rdi", lam=lam, lr=eta, epochs=2))
    w1 = vanilla_step
    r1 = (x @ w1.T)[:, 0] - y
    expected = w1 - eta * ((r1[:, None] * x).sum(0) + lam**2 * (w1 - w_start))
    torch.testing.assert_close(model2.weight, expected, atol=1e-12, rtol=0)
    assert not torch.allclose(w0, w_start)


def test_aux_variables_are_used_in_training_and_dropped_at_test_time():
    model, x, y = _linear_problem(n=40, d=3)  # n >> d: the linear model cannot fit the labels alone
    result = train(model, x, y, TrainConfig(method="aux", lam=1.0, lr=0.02, epochs=500, eval_every=500))
    assert result.aux is not None and result.aux.shape == (40, 1) and result.aux.abs().max() > 0.1
    with_aux = predict(model, x) + result.aux
    assert classification_error(with_aux, y) == 0.0                      # the paper's training error with aux
    assert result.final["train_error_noisy"] == 0.0
    assert classification_error(predict(model, x), y) > 0.0               # the network alone does not fit
    assert result.final["train_error_clean"] != result.final["train_error_clean"]  # NaN: no clean labels given


def test_early_stopping_reports_the_best_validation_epoch():
    model, x, y = _linear_problem(n=30, d=8, seed=1)
    xv, yv = x[:10] + 0.5, y[:10]
    result = train(model, x, y, TrainConfig(method="early_stopping", lr=0.01, epochs=20),
                   val=(xv, yv), test=(x[10:], -y[10:]))
    h = result.history
    assert result.best_epoch == int(h.loc[h["val_error"].idxmin(), "epoch"])
    assert result.test_error == pytest.approx(float(h.set_index("epoch").loc[result.best_epoch, "test_error"]))
    with pytest.raises(ValueError, match="validation split"):
        train(model, x, y, TrainConfig(method="early_stopping"))


def test_history_tracks_distances_per_layer():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16, bias=False), nn.ReLU(), nn.Linear(16, 3, bias=False))
    model[2].weight.requires_grad_(False)  # frozen layers are not tracked
    x = torch.randn(50, 4)
    labels = torch.randint(0, 3, (50,))
    result = train(model, x, labels, TrainConfig(loss="ce", lr=0.01, epochs=4, batch_size=16), y_clean=labels)
    cols = set(result.history.columns)
    assert {"dist/0.weight", "norm/0.weight", "dist/all"} <= cols and "dist/2.weight" not in cols
    assert (result.history["dist/all"] > 0).all() and len(result.history) == 4


def test_resume_after_interruption_equals_uninterrupted(tmp_path):
    def run(checkpoint=None, stop_after=None):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 32, bias=False), nn.ReLU(), nn.Linear(32, 1, bias=False))
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(64, 6, generator=gen)
        y = torch.where(x[:, 0] > 0, 1, -1)

        def interrupt(epoch):
            if stop_after is not None and epoch == stop_after:
                raise KeyboardInterrupt

        cfg = TrainConfig(method="aux", lam=0.5, lr=0.01, epochs=6, batch_size=16, momentum=0.9,
                          lr_milestones=(3,), aux_weight_decay=1e-3)
        return train(model, x, y, cfg, checkpoint=checkpoint, on_epoch_end=interrupt)

    reference = run()
    path = tmp_path / "ckpt.pt"
    with pytest.raises(KeyboardInterrupt):
        run(checkpoint=path, stop_after=4)
    resumed = run(checkpoint=path)
    for a, b in zip(reference.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert reference.history.equals(resumed.history)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary files left


def test_deterministic_for_a_fixed_seed():
    results = []
    for _ in range(2):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 8, bias=False), nn.Tanh(), nn.Linear(8, 1, bias=False))
        x = torch.randn(20, 3, generator=torch.Generator().manual_seed(5))
        y = torch.where(x[:, 1] > 0, 1, -1)
        results.append(train(model, x, y, TrainConfig(lr=0.05, epochs=3, batch_size=7, seed=4)).history)
    assert results[0].equals(results[1])


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "rdi"}, "needs lam"),
    ({"method": "aux", "lam": 0.0}, "lam must be > 0"),
    ({"method": "aux", "lam": -1.0}, "lam must be > 0"),
    ({"method": "sam"}, "method must be one of"),
    ({"loss": "hinge"}, "loss must be"),
    ({"epochs": 0}, "epochs must be a positive int"),
    ({"batch_size": 0}, "batch_size"),
    ({"aux_weight_decay": 0.1}, "only applies"),
])
def test_bad_configuration_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)


def test_bad_labels_are_refused():
    model, x, _ = _linear_problem()
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        train(model, x, torch.zeros(len(x), dtype=torch.long), TrainConfig())
    with pytest.raises(ValueError, match="K >= 2 outputs"):
        train(model, x, torch.ones(len(x), dtype=torch.long), TrainConfig(loss="ce"))
