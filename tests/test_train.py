"""ntk_core.train: the semantics of RDI, AUX and early stopping on hand-checkable cases, resume, determinism."""

from __future__ import annotations

import re

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
    assert classification_error(with_aux, y) == 0.0  # the paper's training error with aux
    assert result.final["train_error_noisy"] == 0.0
    assert classification_error(predict(model, x), y) > 0.0  # the network alone does not fit
    assert result.final["train_error_net"] == classification_error(predict(model, x), y)
    assert result.final["train_error_clean"] != result.final["train_error_clean"]  # NaN: no clean labels given


def test_early_stopping_reports_the_best_validation_epoch():
    model, x, y = _linear_problem(n=30, d=8, seed=1)
    xv, yv = x[:10] + 0.5, y[:10]
    result = train(
        model, x, y, TrainConfig(method="early_stopping", lr=0.01, epochs=20), val=(xv, yv), test=(x[10:], -y[10:])
    )
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

        cfg = TrainConfig(
            method="aux",
            lam=0.5,
            lr=0.01,
            epochs=6,
            batch_size=16,
            momentum=0.9,
            lr_milestones=(3,),
            aux_weight_decay=1e-3,
        )
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


class _Act(nn.Module):
    """A network whose nonlinearity is chosen by its ``forward`` alone (the same class, the same weights)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(6, 16), nn.Linear(16, 1)
        self.scale = torch.ones(())  # a plain tensor attribute the forward reads (not a buffer)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).squeeze(-1) * self.scale


def test_a_checkpoint_is_resumed_only_by_the_same_function_not_the_same_class_name(tmp_path):
    """A finished checkpoint of a ReLU network is not taken for a run of the same class with the same initial
    weights whose ``forward`` computes another function (tanh), nor one whose plain tensor attribute changed: each
    trains afresh and ends where its own uninterrupted run ends."""
    x = torch.randn(40, 6, generator=torch.Generator().manual_seed(1))
    y = torch.where(x[:, 0] > 0, 1, -1)
    cfg = TrainConfig(lr=0.002, epochs=3, batch_size=8)
    path = tmp_path / "ckpt.pt"
    relu = train(_Act(), x, y, cfg, checkpoint=path)

    class _Tanh(_Act):
        def forward(self, x):
            return self.b(torch.tanh(self.a(x))).squeeze(-1) * self.scale

    _Tanh.__name__ = _Tanh.__qualname__ = "_Act"  # the same class name, module and weights
    _Tanh.__module__ = _Act.__module__
    tanh_alone = train(_Tanh(), x, y, cfg)
    tanh = train(_Tanh(), x, y, cfg, checkpoint=path)
    assert tanh.history.equals(tanh_alone.history) and not tanh.history.equals(relu.history)
    scaled, scaled_alone = _Act(), _Act()
    scaled.scale = scaled_alone.scale = torch.full((), 2.0)
    doubled = train(scaled, x, y, cfg, checkpoint=path)
    assert doubled.history.equals(train(scaled_alone, x, y, cfg).history)
    assert not doubled.history.equals(relu.history)
    assert train(_Act(), x, y, cfg, checkpoint=tmp_path / "again.pt").history.equals(relu.history)


def test_deterministic_for_a_fixed_seed():
    results = []
    for _ in range(2):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 8, bias=False), nn.Tanh(), nn.Linear(8, 1, bias=False))
        x = torch.randn(20, 3, generator=torch.Generator().manual_seed(5))
        y = torch.where(x[:, 1] > 0, 1, -1)
        results.append(train(model, x, y, TrainConfig(lr=0.05, epochs=3, batch_size=7, seed=4)).history)
    assert results[0].equals(results[1])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"method": "rdi"}, "needs lam"),
        ({"method": "aux", "lam": 0.0}, "lam must be > 0"),
        ({"method": "aux", "lam": -1.0}, "lam must be > 0"),
        ({"method": "sam"}, "method must be one of"),
        ({"loss": "hinge"}, "loss must be"),
        ({"epochs": 0}, "epochs must be an int >= 1"),
        ({"momentum": 1.0}, r"momentum must lie in \[0.0, 1.0\)"),
        ({"weight_decay": -0.1}, "weight_decay must lie in"),
        ({"batch_size": 0}, "batch_size"),
        ({"aux_weight_decay": 0.1}, "only applies"),
    ],
)
def test_bad_configuration_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)


def test_bad_labels_are_refused():
    model, x, _ = _linear_problem()
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        train(model, x, torch.zeros(len(x), dtype=torch.long), TrainConfig())
    with pytest.raises(ValueError, match="K >= 2 outputs"):
        train(model, x, torch.ones(len(x), dtype=torch.long), TrainConfig(loss="ce"))


# --------------------------------------------------------------------------- mini-batch steps by hand


def _tiny_net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4, bias=False), nn.Tanh(), nn.Linear(4, 1, bias=False))


def _tiny_data(n=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g)
    y = torch.tensor([1, -1, -1, 1, 1, -1])[:n]
    return x, y


def _batches(n, batch, seed, epoch):
    """The trainer's documented batch order: a permutation that depends only on (seed, epoch)."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    return [order[s : s + batch] for s in range(0, n, batch)]


def _functional(model):
    names = [k for k, _ in model.named_parameters()]
    theta = {k: v.detach().clone() for k, v in model.named_parameters()}

    def f(params, xs):
        return torch.func.functional_call(model, params, (xs,)).reshape(len(xs))

    return names, theta, f


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_minibatch_rdi_steps_match_the_hand_computed_penalised_gradient(lam):
    """Each step on a batch B minimises ½Σ_{i∈B}(f(θ, x_i) − ỹ_i)² + (|B|/n)(λ²/2)‖θ − θ(0)‖² (trainer
    docstring): over an epoch the penalty of eq. (3) is applied once. Batches of 4 and 2 (|B|/n differs),
    two epochs so that θ ≠ θ(0) when the penalty acts; gradients by torch.func.grad."""
    x, y = _tiny_data()
    n, batch, eta, seed = 6, 4, 0.1, 3
    model = _tiny_net()
    names, theta, f = _functional(model)
    theta0 = {k: v.clone() for k, v in theta.items()}

    def objective(params, idx):
        r = f(params, x[idx]) - y[idx].to(torch.float64)
        dist = sum(((params[k] - theta0[k]) ** 2).sum() for k in names)
        return 0.5 * (r**2).sum() + len(idx) / n * lam**2 / 2 * dist

    for epoch in range(2):
        for idx in _batches(n, batch, seed, epoch):
            g = torch.func.grad(objective)(theta, idx)
            theta = {k: theta[k] - eta * g[k] for k in names}
    train(model, x, y, TrainConfig(method="rdi", lam=lam, lr=eta, epochs=2, batch_size=batch, seed=seed))
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), theta[k], atol=1e-12, rtol=0)


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_minibatch_aux_steps_match_hand_computation(lam):
    """AUX (eq. (4)): the output on example i is f(θ, x_i) + λ b_i, b(0) = 0; a step on batch B moves θ
    and only the b_i with i ∈ B (plain SGD, no auxiliary weight decay)."""
    x, y = _tiny_data()
    n, batch, eta, seed = 6, 4, 0.1, 5
    model = _tiny_net(2)
    names, theta, f = _functional(model)
    b = torch.zeros(n)

    def objective(params, bvec, idx):
        r = f(params, x[idx]) + lam * bvec[idx] - y[idx].to(torch.float64)
        return 0.5 * (r**2).sum()

    first_batch_b = None
    for epoch in range(2):
        for idx in _batches(n, batch, seed, epoch):
            g_theta, g_b = torch.func.grad(objective, argnums=(0, 1))(theta, b, idx)
            outside = torch.ones(n, dtype=torch.bool)
            outside[idx] = False
            assert torch.all(g_b[outside] == 0)
            theta = {k: theta[k] - eta * g_theta[k] for k in names}
            b = b - eta * g_b
            if first_batch_b is None:
                first_batch_b = (b.clone(), outside)
    result = train(model, x, y, TrainConfig(method="aux", lam=lam, lr=eta, epochs=2, batch_size=batch, seed=seed))
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), theta[k], atol=1e-12, rtol=0)
    torch.testing.assert_close(result.aux[:, 0], b, atol=1e-12, rtol=0)
    # after one batch, the b_i outside it are still exactly 0
    model1 = _tiny_net(2)
    one = train(model1, x, y, TrainConfig(method="aux", lam=lam, lr=eta, epochs=1, batch_size=n, seed=seed))
    assert one.aux.abs().min() > 0  # a full batch moves every b_i
    b1, outside = first_batch_b
    assert torch.all(b1[outside] == 0) and torch.all(b1[~outside] != 0)


def test_aux_reported_training_error_uses_lambda_times_b():
    """``train_error_noisy`` and ``loss`` of AUX are measured on f(θ, x_i) + λ b_i (with λ ≠ 1, so that
    f + b would give other numbers); ``train_error_net`` and ``train_error_clean`` on the network alone."""
    lam = 2.5
    g = torch.Generator().manual_seed(4)
    x = torch.randn(30, 2, generator=g)
    y_clean = torch.where(x[:, 0] > 0, 1, -1)
    y = y_clean.clone()
    y[:9] = -y[:9]  # noisy labels the linear model cannot fit
    model = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.5, -0.2]]))
    result = train(model, x, y, TrainConfig(method="aux", lam=lam, lr=0.02, epochs=4, eval_every=4), y_clean=y_clean)
    f = predict(model, x)
    with_aux = f + lam * result.aux
    row = result.final
    assert row["train_error_noisy"] == pytest.approx(classification_error(with_aux, y))
    assert row["loss"] == pytest.approx(0.5 * float(((with_aux[:, 0] - y) ** 2).sum()), rel=1e-12)
    assert row["train_error_clean"] == pytest.approx(classification_error(f, y_clean))
    assert row["train_error_net"] == pytest.approx(classification_error(f, y))
    # the test has power: λ b and b (and no b at all) give different numbers here
    assert classification_error(f + result.aux, y) != classification_error(with_aux, y)
    assert classification_error(f, y) != classification_error(with_aux, y)


# --------------------------------------------------------------------------- augmentation: training mode only


def _candidates(img, p):
    """Every crop (after zero padding by p) of one (C, H, W) image, flipped or not: what augmentation may give."""
    c, h, w = img.shape
    padded = torch.zeros(c, h + 2 * p, w + 2 * p)
    padded[:, p : p + h, p : p + w] = img
    out = []
    for oy in range(2 * p + 1):
        for ox in range(2 * p + 1):
            crop = padded[:, oy : oy + h, ox : ox + w]
            out += [crop, crop.flip(2)]
    return out


def test_random_crop_flip_changes_images_in_training_mode_only():
    from ntk_core.resnet import RandomCropFlip

    x = torch.randn(8, 3, 6, 6, generator=torch.Generator().manual_seed(0))
    aug = RandomCropFlip(padding=2, seed=1)
    aug.train()
    out = aug(x)
    assert out.shape == x.shape
    changed = 0
    for img, o in zip(x, out):
        assert any(torch.equal(o, cand) for cand in _candidates(img, 2))  # a crop/flip of this very image
        changed += not torch.equal(o, img)
    assert changed >= 6  # 8 images, P(unchanged) = 1/50 each
    aug.eval()
    assert torch.equal(aug(x), x)


class _Spy(nn.Module):
    """Records the inputs it sees, separately in training and evaluation mode."""

    def __init__(self):
        super().__init__()
        self.seen = {True: [], False: []}

    def forward(self, x):
        self.seen[self.training].append(x.detach().clone())
        return x


def test_trainer_augments_training_batches_but_not_evaluation():
    """The trainer puts the model in training mode for its steps (augmentation runs) and evaluates in
    evaluation mode (train/val/test errors on the original images)."""
    from ntk_core.resnet import RandomCropFlip

    x = torch.randn(12, 3, 6, 6, generator=torch.Generator().manual_seed(2))
    y = torch.arange(12) % 3
    spy = _Spy()
    torch.manual_seed(0)
    model = nn.Sequential(RandomCropFlip(padding=2, seed=3), spy, nn.Flatten(), nn.Linear(108, 3, bias=False))
    train(model, x, y, TrainConfig(loss="ce", lr=0.01, epochs=2, batch_size=4), test=(x[:5], y[:5]))
    assert len(spy.seen[True]) == 6  # 2 epochs × 3 batches
    training_inputs = torch.cat(spy.seen[True])
    originals = x.reshape(12, -1)
    rows_equal_to_some_original = sum(bool((originals == t.reshape(1, -1)).all(1).any()) for t in training_inputs)
    assert rows_equal_to_some_original < len(training_inputs) // 2  # most training inputs are augmented
    for batch in spy.seen[False]:  # evaluation saw only original images
        assert all(bool((originals == t.reshape(1, -1)).all(1).any()) for t in batch)
    assert sum(len(b) for b in spy.seen[False]) >= 2 * (12 + 5)


def test_learning_rate_milestones_by_value():
    """After each milestone the learning rate is multiplied by lr_gamma: two full-batch steps by hand."""
    model, x, y = _linear_problem(n=8, d=3, seed=6)
    w0 = model.weight.detach().clone()
    eta, gamma = 0.05, 0.3

    def grad(w):
        return (((x @ w.T)[:, 0] - y)[:, None] * x).sum(0)

    w1 = w0 - eta * grad(w0)
    w2 = w1 - gamma * eta * grad(w1)
    train(model, x, y, TrainConfig(lr=eta, epochs=2, lr_milestones=(1,), lr_gamma=gamma))
    torch.testing.assert_close(model.weight.detach(), w2, atol=1e-12, rtol=0)


def test_divergence_stops_training_at_the_first_non_finite_loss(tmp_path):
    # plain GD on a linear model with a step far above 2 / (largest Hessian eigenvalue): the loss grows
    # geometrically, overflows float32 and turns NaN; training stops in that epoch instead of running on
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=gen)
    y = torch.where(x[:, 0] > 0, 1, -1)

    def run(epochs, **kwargs):
        torch.manual_seed(0)
        return train(nn.Linear(4, 1, bias=False), x, y, TrainConfig(method="vanilla", lr=5.0, epochs=epochs), **kwargs)

    seen: list[int] = []
    with pytest.raises(FloatingPointError, match=r"not finite in epoch \d+ of 200 .*lower the learning rate") as err:
        run(200, checkpoint=tmp_path / "ckpt.pt", on_epoch_end=seen.append)
    stopped = int(re.search(r"in epoch (\d+) of", str(err.value)).group(1))
    assert 1 < stopped < 200 and seen == list(range(1, stopped))  # no callback for the diverged epoch
    # the same run one epoch shorter ends finite: the stop is at the first non-finite epoch
    before = run(stopped - 1)
    assert np.isfinite(before.history["loss"]).all() and len(before.history) == stopped - 1
    # the checkpoint left behind holds the last finite state: resuming it diverges again in the same epoch,
    # without running any epoch before it
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]
    again: list[int] = []
    with pytest.raises(FloatingPointError, match=rf"in epoch {stopped} of 200"):
        run(200, checkpoint=tmp_path / "ckpt.pt", on_epoch_end=again.append)
    assert again == []
    # between evaluations the mini-batch losses are watched: no epoch runs on after the first non-finite one
    torch.manual_seed(0)
    sparse = TrainConfig(method="vanilla", lr=5.0, epochs=200, eval_every=100)
    with pytest.raises(FloatingPointError, match=rf"a mini-batch loss was not finite in epoch {stopped + 1} of"):
        train(nn.Linear(4, 1, bias=False), x, y, sparse)


def _three_class_problem():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(30, 4, generator=gen)
    classes = torch.randint(0, 3, (30,), generator=gen)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    return x, classes, net


@pytest.mark.parametrize("loss", ["l2", "ce"])
def test_one_hot_targets_train_as_the_documented_n_by_k_shape(loss):
    """y_noisy of shape (n, K) is documented; one-hot targets crashed with a bare torch shape error. They give
    the same run as the class indices (cross-entropy with class probabilities equals it on one-hot rows)."""
    x, classes, net = _three_class_problem()
    config = TrainConfig(method="rdi", lam=0.5, loss=loss, epochs=5, lr=0.01, seed=0)
    runs = []
    for targets in (classes, nn.functional.one_hot(classes, 3), nn.functional.one_hot(classes, 3).float()):
        model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
        model.load_state_dict(net.state_dict())
        runs.append(train(model, x, targets, config, y_clean=targets, test=(x, targets)).history)
    for other in runs[1:]:
        np.testing.assert_allclose(other["loss"], runs[0]["loss"], rtol=1e-5)
        assert other["train_error_noisy"].tolist() == runs[0]["train_error_noisy"].tolist()
        assert other["test_error"].tolist() == runs[0]["test_error"].tolist()
    with pytest.raises(ValueError, match=r"need K = 3, the model's outputs; got shape \(30, 4\)"):
        train(net, x, nn.functional.one_hot(classes, 4), config)
    with pytest.raises(ValueError, match="must be one-hot"):
        train(net, x, 2 * nn.functional.one_hot(classes, 3), config)


def test_inputs_follow_the_models_dtype_and_a_missing_batch_dimension_is_named():
    x, classes, net = _three_class_problem()
    config = TrainConfig(method="vanilla", loss="ce", epochs=2, lr=0.01, seed=0)
    result = train(net.double(), x, classes, config, test=(x, classes))  # float32 inputs, float64 model
    assert np.isfinite(result.history["loss"]).all()
    with pytest.raises(ValueError, match=r"x\[:1\], of shape \(1,\).*examples along its first dimension"):
        train(net, x[0], classes[:4], config)  # one example without its batch dimension (4 features)


def test_targets_and_auxiliary_variables_follow_the_models_dtype():
    """AUX's variables b and the targets take the dtype of the model's outputs, not torch's default (float64 in
    this module): a float32 model trains in float32 throughout, a float64 one in float64."""
    x, classes, net = _three_class_problem()
    config = TrainConfig(method="aux", loss="l2", lam=0.5, epochs=3, lr=0.01, seed=0)
    single = train(net.float(), x, classes, config)
    assert single.aux is not None and single.aux.dtype == torch.float32
    double = train(_three_class_problem()[2].double(), x, classes, config)
    assert double.aux is not None and double.aux.dtype == torch.float64
