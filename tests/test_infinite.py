"""Tests for ntk_core.infinite: closed forms and the empirical NTK converging to them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ntk_core.infinite import relu_kernels, relu_nngp, relu_ntk
from ntk_core.nets import MLP, TwoLayerNet
from ntk_core.ntk import empirical_ntk


def _inputs(n: int = 12, d: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_setting1_first_layer_closed_form() -> None:
    x = _inputs()
    k = relu_ntk(x, depth=1, trained="first")
    xn = x.numpy()
    cos = np.clip(xn @ xn.T / np.outer(np.linalg.norm(xn, axis=1), np.linalg.norm(xn, axis=1)), -1, 1)
    ref = xn @ xn.T / 8 * (math.pi - np.arccos(cos)) / (2 * math.pi)
    np.testing.assert_allclose(k, ref, rtol=1e-7)  # arccos near cos = 1 is ill-conditioned
    off = ~np.eye(12, dtype=bool)
    np.testing.assert_allclose(k[off], ref[off], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.diag(k), np.sum(xn**2, 1) / 8 / 2, rtol=1e-12)  # angle exactly 0


def test_all_layers_is_recursion_and_nngp() -> None:
    x = _inputs()
    ntk1, nngp1 = relu_kernels(x, depth=1)
    np.testing.assert_allclose(ntk1, relu_ntk(x, depth=1, trained="first") + nngp1, rtol=1e-12)
    ntk3 = relu_ntk(x, depth=3)
    assert np.allclose(ntk3, ntk3.T) and np.linalg.eigvalsh(ntk3).min() > -1e-10
    # the diagonal of Σ^(L) halves per ReLU layer (N(0, 1) weights)
    np.testing.assert_allclose(np.diag(relu_nngp(x, depth=3)), np.sum(x.numpy() ** 2, 1) / 8 / 8, rtol=1e-12)
    assert relu_ntk(x[:5], x[5:], depth=2).shape == (5, 7)


def test_nngp_matches_wide_hidden_layer() -> None:
    """E[f(x) f(x')] over the ±1 readout is (1/m) sum_r relu(w_r.x/√d) relu(w_r.x'/√d) -> Σ^(1)."""
    x = _inputs(4, 6)
    net = TwoLayerNet(6, 200_000, seed=0).double()
    with torch.no_grad():
        h = torch.relu(net.hidden(x))
    np.testing.assert_allclose((h @ h.T / h.shape[1]).numpy(), relu_nngp(x, depth=1), atol=0.01)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="depth"):
        relu_ntk(_inputs(), depth=0)
    with pytest.raises(ValueError, match="trained"):
        relu_ntk(_inputs(), trained="last")
    with pytest.raises(ValueError, match="1..3"):
        relu_ntk(_inputs(), depth=2, trained=[4])
    with pytest.raises(ValueError, match="feature size"):
        relu_ntk(_inputs(d=8), _inputs(d=9))
    with pytest.raises(ValueError, match="NaN"):
        relu_ntk(np.full((2, 3), np.nan))


def _relative_errors(make, kinf: np.ndarray, x: torch.Tensor, widths: list[int], seeds: int) -> list[float]:
    errs = []
    for m in widths:
        e = [np.linalg.norm(empirical_ntk(make(m, s), x, dtype=torch.float64).numpy() - kinf) for s in range(seeds)]
        errs.append(float(np.mean(e)) / float(np.linalg.norm(kinf)))
    return errs


@pytest.mark.parametrize(
    ("depth", "trained", "make"),
    [
        (1, "first", lambda m, s: TwoLayerNet(8, m, seed=s)),
        (2, "all", lambda m, s: MLP(8, [m, m], seed=s)),
        (2, [1, 3], lambda m, s: MLP(8, [m, m], frozen=[1], seed=s)),
    ],
)
def test_empirical_converges_like_inverse_sqrt_width(depth: int, trained, make) -> None:
    x = _inputs()
    widths = [64, 256, 1024, 4096]
    errs = _relative_errors(make, relu_ntk(x, depth=depth, trained=trained), x, widths, seeds=6)
    assert all(a > b for a, b in zip(errs, errs[1:])), errs
    slope = np.polyfit(np.log(widths), np.log(errs), 1)[0]
    assert -0.75 < slope < -0.3, (slope, errs)
    assert errs[-1] < 0.08


# --------------------------------------------------------------------------- values by hand at a point


def _arccos_layer(s11: float, s12: float, s22: float) -> tuple[float, float]:
    """Σ and Σ̇ of one ReLU layer (Cho & Saul) from the 2×2 covariance of the previous layer."""
    r = math.sqrt(s11 * s22)
    t = math.acos(max(-1.0, min(1.0, s12 / r)))
    return r / (2 * math.pi) * (math.sin(t) + (math.pi - t) * math.cos(t)), (math.pi - t) / (2 * math.pi)


def test_depth_two_kernels_at_a_point_by_hand() -> None:
    """Two inputs of different norms (so that Σ(x, x) ≠ Σ(x', x') and their halving matters)."""
    x = np.array([[1.0, 2.0, -0.5]])
    xp = np.array([[0.3, -1.0, 2.5]])
    d = 3
    a, b, c = float(x[0] @ x[0]) / d, float(xp[0] @ xp[0]) / d, float(x[0] @ xp[0]) / d
    s1, dot1 = _arccos_layer(a, c, b)
    s2, dot2 = _arccos_layer(a / 2, s1, b / 2)  # Σ^(1)(x, x) = Σ^(0)(x, x) / 2 for N(0, 1) weights
    expected = {
        "all": c * dot1 * dot2 + s1 * dot2 + s2,
        (1, 3): c * dot1 * dot2 + s2,
        (2,): s1 * dot2,
        (3,): s2,
        "first": c * dot1 * dot2,
    }
    for trained, value in expected.items():
        t = list(trained) if isinstance(trained, tuple) else trained
        ntk, nngp = relu_kernels(x, xp, depth=2, trained=t)
        assert ntk[0, 0] == pytest.approx(value, rel=1e-12), trained
        assert nngp[0, 0] == pytest.approx(s2, rel=1e-12)
    # depth 1, trained first: (xᵀx'/d)(π − ϑ)/(2π)
    assert relu_ntk(x, xp, depth=1, trained="first")[0, 0] == pytest.approx(c * dot1, rel=1e-12)


def test_arccos_formulas_against_monte_carlo() -> None:
    """E[relu(u)relu(v)] and E[1(u>0)1(v>0)] for (u, v) ~ N(0, Σ^(0)) at one pair of points, 2·10⁶ draws."""
    x = np.array([[1.0, 2.0, -0.5], [0.3, -1.0, 2.5]])
    cov = x @ x.T / 3
    rng = np.random.default_rng(0)
    uv = rng.multivariate_normal(np.zeros(2), cov, size=2_000_000)
    relu = np.maximum(uv, 0.0)
    prod = relu[:, 0] * relu[:, 1]
    step = (uv[:, 0] > 0) & (uv[:, 1] > 0)
    ntk1, nngp1 = relu_kernels(x, depth=1)
    se = prod.std() / math.sqrt(len(prod))
    assert abs(nngp1[0, 1] - prod.mean()) < 5 * se
    assert abs(nngp1[0, 0] - np.mean(relu[:, 0] ** 2)) < 5 * np.std(relu[:, 0] ** 2) / math.sqrt(len(prod))
    sdot = relu_ntk(x, depth=1, trained="first")[0, 1] / cov[0, 1]  # Σ^(0) Σ̇^(1) / Σ^(0)
    assert abs(sdot - step.mean()) < 5 * math.sqrt(0.25 / len(prod))
    assert ntk1[0, 1] == pytest.approx(cov[0, 1] * sdot + nngp1[0, 1], rel=1e-12)
