"""ntk_core.regime: kernel drift, parameter movement and the linearised network, each against an independent
computation (the explicit float64 Jacobian; gradient descent on the linearised network in parameter space)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, jvp

from ntk_core import agreement, kernel_drift, linearised_outputs, parameter_movement
from ntk_core.krr import gd_kernel_closed_form, sgd_kernel_outputs, sgd_step_factors
from ntk_core.regime import DIVERGED_GROWTH, linearised_sgd, linearised_sgd_outputs
from ntk_core.train import TrainConfig, batch_order, train
from ntk_oracle import reference_ntk


def _mlp(seed: int = 0, width: int = 16) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, width), nn.Tanh(), nn.Linear(width, 1)).double()


def _data(n: int = 12, seed: int = 1) -> torch.Tensor:
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _perturbed(model: nn.Module, scale: float) -> nn.Module:
    moved = copy.deepcopy(model)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return moved


def test_kernel_drift_is_the_relative_frobenius_change_of_the_explicit_kernel():
    model, x = _mlp(), _data()
    moved = _perturbed(model, 0.3)
    k0, kt = reference_ntk(model, x, x, "trace"), reference_ntk(moved, x, x, "trace")
    expected = float(torch.linalg.vector_norm(kt - k0) / torch.linalg.vector_norm(k0))
    assert expected > 0.01  # the perturbation moves this kernel
    assert kernel_drift(moved, model, x) == pytest.approx(expected, rel=1e-9)
    assert kernel_drift(model, copy.deepcopy(model), x) == 0.0


def test_a_model_linear_in_its_parameters_has_no_kernel_drift():
    """f(θ, x) = Σ_j θ_j φ_j(x) has the constant kernel φ(x)ᵀφ(x'): whatever training does, no drift."""
    torch.manual_seed(0)
    linear = nn.Sequential(nn.Linear(3, 1)).double()
    assert kernel_drift(_perturbed(linear, 5.0), linear, _data()) == pytest.approx(0.0, abs=1e-12)


def test_parameter_movement_per_tensor_and_in_all():
    model = _mlp()
    theta0 = {n: p.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        model[0].weight.mul_(1.5)  # ‖Δ‖ = 0.5 ‖W‖
    moved = parameter_movement(model, theta0)
    assert moved["0.weight"] == pytest.approx(0.5) and moved["2.weight"] == 0.0 and moved["0.bias"] == 0.0
    w0 = float(torch.linalg.vector_norm(theta0["0.weight"]))
    total = float(np.sqrt(sum(float(torch.linalg.vector_norm(p)) ** 2 for p in theta0.values())))
    assert moved["all"] == pytest.approx(0.5 * w0 / total)


def test_movement_and_drift_refuse_networks_with_other_parameters():
    model = _mlp()
    with pytest.raises(ValueError, match="same trained parameters"):
        parameter_movement(model, {"0.weight": model[0].weight.detach()})
    other = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    with pytest.raises(ValueError, match="has shape"):
        kernel_drift(model, other, _data())


def _train_linearised(model: nn.Module, x, y, x_test, eta: float, steps: int, lam: float):
    """GD in parameter space on the linearised network f(θ0, x) + J(x)(θ − θ0), loss ½‖f − y‖² + λ²/2‖θ − θ0‖²."""
    theta0 = {n: p.detach().clone() for n, p in model.named_parameters()}
    delta = {n: torch.zeros_like(p) for n, p in theta0.items()}

    def lin(d, inputs):
        f = lambda p: functional_call(model, p, (inputs,)).reshape(-1)  # noqa: E731
        out, tangent = jvp(f, (theta0,), (d,))
        return out + tangent

    for _ in range(steps):
        d = {n: v.detach().requires_grad_(True) for n, v in delta.items()}
        r = lin(d, x) - y
        loss = 0.5 * (r**2).sum() + 0.5 * lam**2 * sum((v**2).sum() for v in d.values())
        grads = torch.autograd.grad(loss, list(d.values()))
        delta = {n: v.detach() - eta * g for (n, v), g in zip(d.items(), grads)}
    with torch.no_grad():
        return lin(delta, x).numpy(), lin(delta, x_test).numpy()


@pytest.mark.parametrize("lam", [0.0, 0.7])
def test_linearised_outputs_match_gradient_descent_on_the_linearised_network(lam):
    model, x, x_test = _mlp(), _data(12), _data(20, seed=3)
    y = torch.sign(torch.randn(12, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    eta, steps = 0.02, 60
    train, test = linearised_outputs(model, x, y, x_test, eta=eta, steps=steps, lam=lam)
    ref_train, ref_test = _train_linearised(model, x, y, x_test, eta, steps, lam)
    np.testing.assert_allclose(train, ref_train, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(test, ref_test, rtol=1e-9, atol=1e-10)
    f0 = model(x).detach().numpy()[:, 0]
    assert np.linalg.norm(train - y.numpy()) < 0.7 * np.linalg.norm(f0 - y.numpy())  # it trained


def test_linearised_outputs_refuse_bad_input():
    model, x = _mlp(), _data(6)
    with pytest.raises(ValueError, match="one target per training example"):
        linearised_outputs(model, x, np.ones(5), x, eta=0.1, steps=1)
    with pytest.raises(ValueError, match="eta"):
        linearised_outputs(model, x, np.ones(6), x, eta=0.0, steps=1)
    wide = nn.Sequential(nn.Linear(3, 2)).double()
    with pytest.raises(ValueError, match="one output per example"):
        linearised_outputs(wide, x, np.ones(6), x, eta=0.1, steps=1)


def test_agreement_counts_same_sign_or_same_class():
    assert agreement(np.array([1.0, -2.0, 0.5, -0.1]), np.array([3.0, -1.0, -0.5, -4.0])) == 0.75
    a = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    b = np.array([[0.9, 0.1], [1.0, 0.0], [3.0, 1.0]])
    assert agreement(a, b) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="one shape"):
        agreement(np.ones(3), np.ones(4))


def _train_linearised_sgd(model, x, y, x_test, lr, batches, regularizer, lam):
    """Mini-batch SGD on the linearised network in parameter space (torch.func.jvp), the reference for
    linearised_sgd_outputs: the summed batch loss, RDI's penalty in the share |B|/n, AUX's λ·b_i."""
    theta0 = {n: p.detach().clone() for n, p in model.named_parameters()}
    delta = {n: torch.zeros_like(p) for n, p in theta0.items()}
    b = torch.zeros(len(x), dtype=torch.float64)

    def lin(d, inputs):
        f = lambda p: functional_call(model, p, (inputs,)).reshape(-1)  # noqa: E731
        out, tangent = jvp(f, (theta0,), (d,))
        return out + tangent

    for idx in batches:
        d = {n: v.detach().requires_grad_(True) for n, v in delta.items()}
        bb = b.detach().requires_grad_(True)
        out = lin(d, x[idx]) + (lam * bb[idx] if regularizer == "aux" else 0.0)
        loss = 0.5 * ((out - y[idx]) ** 2).sum()
        if regularizer == "rdi":
            loss = loss + len(idx) / len(x) * 0.5 * lam**2 * sum((v**2).sum() for v in d.values())
        grads = torch.autograd.grad(loss, [*d.values(), bb], allow_unused=True)
        delta = {n: v.detach() - lr * g for (n, v), g in zip(d.items(), grads)}
        b = bb.detach() - lr * grads[-1] if grads[-1] is not None else bb.detach()
    with torch.no_grad():
        return lin(delta, x).numpy(), lin(delta, x_test).numpy()


@pytest.mark.parametrize("regularizer", ["none", "rdi", "aux"])
def test_linearised_sgd_outputs_match_sgd_on_the_linearised_network(regularizer):
    model, x, x_test = _mlp(), _data(12), _data(20, seed=3)
    y = torch.sign(torch.randn(12, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    rng = np.random.default_rng(0)
    batches = [rng.permutation(12)[:k] for k in (3, 3, 5, 1, 12, 4) * 6]
    lam, lr = 0.8, 0.05
    train, test = linearised_sgd_outputs(model, x, y, x_test, lr=lr, batches=batches, regularizer=regularizer, lam=lam)
    ref_train, ref_test = _train_linearised_sgd(model, x, y, x_test, lr, batches, regularizer, lam)
    np.testing.assert_allclose(train, ref_train, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(test, ref_test, rtol=1e-9, atol=1e-10)
    f0 = model(x).detach().numpy()[:, 0]
    assert np.linalg.norm(train - y.numpy()) < 0.8 * np.linalg.norm(f0 - y.numpy())  # it trained


@pytest.mark.parametrize("regularizer", ["none", "rdi"])
def test_full_batch_sgd_is_the_closed_form_of_gradient_descent(regularizer):
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((10, 6))
    K, r, K_test = Z @ Z.T, rng.standard_normal(10), rng.standard_normal((4, 6)) @ Z.T
    lam = 0.6 if regularizer == "rdi" else 0.0
    train, test = sgd_kernel_outputs(
        K, r, [np.arange(10)] * 25, 0.02, lam=lam, regularizer=regularizer, K_test_train=K_test
    )
    np.testing.assert_allclose(train, gd_kernel_closed_form(K, r, 0.02, 25, lam=lam), rtol=1e-10)
    np.testing.assert_allclose(test, gd_kernel_closed_form(K, r, 0.02, 25, lam=lam, K_test_train=K_test), rtol=1e-10)


@pytest.fixture
def float64_default():
    """train() keeps its targets and AUX's b in torch's default dtype: float64 here, for an exact comparison."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.mark.parametrize("method", ["vanilla", "rdi", "aux"])
def test_train_on_a_model_linear_in_its_parameters_is_its_linearisation(method, float64_default):
    """f(θ, x) = θᵀx is its own linearisation: train() with mini-batches, RDI or AUX must give exactly the
    outputs of linearised_sgd_outputs over batch_order's batches (which are therefore train()'s)."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1, bias=False).double()
    start = copy.deepcopy(model)
    x, x_test = _data(13), _data(7, seed=4)
    y = torch.sign(torch.randn(13, generator=torch.Generator().manual_seed(2), dtype=torch.float64))
    config = TrainConfig(
        method=method, lam=None if method == "vanilla" else 0.9, loss="l2", epochs=4, lr=0.05, batch_size=4, seed=3
    )
    train(model, x, y, config)
    regularizer = {"vanilla": "none", "rdi": "rdi", "aux": "aux"}[method]
    lin_train, lin_test = linearised_sgd_outputs(
        start, x, y, x_test, lr=0.05, batches=batch_order(13, config), regularizer=regularizer, lam=config.lam or 0.0
    )
    with torch.no_grad():
        np.testing.assert_allclose(model(x).numpy()[:, 0], lin_train, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(model(x_test).numpy()[:, 0], lin_test, rtol=1e-10, atol=1e-12)
    assert len(batch_order(13, config)) == 4 * 4 and [len(b) for b in batch_order(13, config, epochs=1)] == [4, 4, 4, 1]


def test_sgd_kernel_outputs_refuse_bad_input():
    K = np.eye(4)
    with pytest.raises(ValueError, match="regularizer"):
        sgd_kernel_outputs(K, np.ones(4), [[0, 1]], 0.1, regularizer="ridge")
    with pytest.raises(ValueError, match="indices in \\[0, 4\\)"):
        sgd_kernel_outputs(K, np.ones(4), [[0, 4]], 0.1)
    with pytest.raises(ValueError, match="residual must have shape"):
        sgd_kernel_outputs(K, np.ones((4, 2)), [[0, 1]], 0.1)


def test_with_batch_statistics_sets_the_running_statistics_of_the_data():
    """Each BatchNorm's running mean and variance are the averages over the passes of the batch statistics of its
    input (recomputed here from the layers before it), the model keeps its own, and the copy is in eval mode."""
    from ntk_core import with_batch_statistics

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 2))
    model.train()
    x = torch.randn(24, 3, 8, 8) * 2.0 + 1.0
    copy_ = with_batch_statistics(model, x, batch_size=10)  # passes of 10, 10 and 4 images
    assert not copy_.training and model.training
    with torch.no_grad():
        features = [model[0](x[i : i + 10]) for i in (0, 10, 20)]
    means = torch.stack([f.mean(dim=(0, 2, 3)) for f in features]).mean(0)
    variances = torch.stack([f.transpose(0, 1).reshape(4, -1).var(dim=1) for f in features]).mean(0)
    torch.testing.assert_close(copy_[1].running_mean, means)
    torch.testing.assert_close(copy_[1].running_var, variances)
    assert float(model[1].running_mean.abs().max()) == 0.0 and model[1].momentum == copy_[1].momentum == 0.1
    # the copy computes the same function as the model in eval mode once that holds the same statistics
    with torch.no_grad():
        model[1].running_mean.copy_(means)
        model[1].running_var.copy_(variances)
    model.eval()
    torch.testing.assert_close(copy_(x), model(x))
    # without BatchNorm: an eval-mode copy of the same function
    plain = nn.Sequential(nn.Linear(3, 2))
    torch.testing.assert_close(with_batch_statistics(plain, torch.randn(5, 3))(x[:, :, 0, 0]), plain(x[:, :, 0, 0]))
    with pytest.raises(ValueError, match="track_running_stats"):
        with_batch_statistics(nn.Sequential(nn.BatchNorm1d(3, track_running_stats=False)), torch.randn(5, 3))


@pytest.mark.parametrize("regularizer", ["none", "rdi", "aux"])
def test_sgd_step_factors_are_the_largest_curvature_of_each_batch_loss_in_parameter_space(regularizer):
    """η λ_max of the Hessian of each batch's loss, built from an explicit feature matrix Z (K = ZZᵀ) in the
    parameters (and, for AUX, the auxiliary variables b): JᵀJ + λ²|B|/n I for RDI, [Z_B, λE_B]ᵀ[Z_B, λE_B]."""
    rng = np.random.default_rng(3)
    n, p, lam, lr = 9, 5, 0.7, 0.05
    Z = rng.standard_normal((n, p))
    batches = [rng.permutation(n)[:k] for k in (2, 4, 4, 9, 1, 3)]
    expected = []
    for idx in batches:
        if regularizer == "aux":
            A = np.hstack([Z[idx], lam * np.eye(n)[idx]])  # d(output + λb)/d(θ, b) on the batch
            H = A.T @ A
        else:
            H = Z[idx].T @ Z[idx] + (lam**2 * len(idx) / n if regularizer == "rdi" else 0.0) * np.eye(p)
        expected.append(lr * np.linalg.eigvalsh(H)[-1])
    got = sgd_step_factors(Z @ Z.T, batches, lr, lam=lam, regularizer=regularizer)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    with pytest.raises(ValueError, match="indices in \\[0, 9\\)"):
        sgd_step_factors(Z @ Z.T, [[0, 9]], lr)
    with pytest.raises(ValueError, match="regularizer"):
        sgd_step_factors(Z @ Z.T, [[0, 1]], lr, regularizer="ridge")


def test_linearised_sgd_is_bounded_below_a_step_factor_of_two_and_diverges_above_it():
    """Full batches: the residual is multiplied by (I − ηK) per step, so it grows like |1 − ηλ_max(K)|^T once
    the step factor ηλ_max(K) passes 2, and never grows below it."""
    model, x, x_test = _mlp(), _data(12), _data(5, seed=3)
    y = torch.sign(torch.randn(12, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    top = float(np.linalg.eigvalsh(reference_ntk(model, x, x, "trace").numpy())[-1])
    for factor, steps in ((1.9, 200), (2.3, 60)):
        run = linearised_sgd(model, x, y, x_test, lr=factor / top, batches=[np.arange(12)] * steps)
        assert run.largest_step == pytest.approx(factor, rel=1e-8)
        f0 = model(x).detach().numpy()[:, 0]
        growth = np.linalg.norm(y.numpy() - run.train) / np.linalg.norm(y.numpy() - f0)
        assert run.residual_growth == pytest.approx(growth, rel=1e-12)
        if factor < 2:
            assert run.residual_growth <= 1.0 and not run.diverged
        else:  # the top eigen-direction alone grows by 1.3 per step: 1.3^60 ≈ 7·10⁶
            assert run.residual_growth > 1e3 * DIVERGED_GROWTH and run.diverged
    # the outputs are those of linearised_sgd_outputs, which is its shorthand
    train, test = linearised_sgd_outputs(model, x, y, x_test, lr=1.9 / top, batches=[np.arange(12)] * 200)
    np.testing.assert_array_equal(
        train, linearised_sgd(model, x, y, x_test, lr=1.9 / top, batches=[np.arange(12)] * 200).train
    )


def test_a_residual_that_ends_above_its_start_without_growing_is_not_a_divergence():
    """LinearisedSGD.diverged: non-finite outputs, or growth past DIVERGED_GROWTH; a run that merely ends above
    its initial residual (fails to fit) is not one."""
    from ntk_core.regime import LinearisedSGD

    ones = np.ones(3)
    assert not LinearisedSGD(ones, ones, residual_growth=1.6, largest_step=2.4).diverged
    assert LinearisedSGD(ones, ones, residual_growth=DIVERGED_GROWTH * 1.01, largest_step=2.4).diverged
    assert LinearisedSGD(ones, np.array([1.0, np.nan]), residual_growth=0.5, largest_step=2.4).diverged
    assert LinearisedSGD(np.array([np.inf, 1, 1]), ones, residual_growth=np.inf, largest_step=3.0).diverged
