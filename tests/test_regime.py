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
