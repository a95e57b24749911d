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
