"""Tests for ntk_core.nets: parametrization, freezing, seeds, the difference trick (Appendix A)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ntk_core.nets import MLP, ConvNet, DifferenceTrick, NTKConv2d, NTKLinear, OutputScale, TwoLayerNet
from ntk_core.ntk import empirical_ntk


def test_ntk_linear_is_scaled_standard_normal() -> None:
    layer = NTKLinear(400, 300, seed=0)
    w = layer.weight.detach()
    assert abs(w.mean().item()) < 0.02 and abs(w.std().item() - 1.0) < 0.02
    x = torch.randn(3, 400)
    torch.testing.assert_close(layer(x), x @ w.T / math.sqrt(400))


def test_ntk_conv_scaling() -> None:
    conv = NTKConv2d(3, 5, 3, seed=1)
    x = torch.randn(2, 3, 6, 6)
    ref = torch.nn.functional.conv2d(x, conv.weight, padding=1) / math.sqrt(27)
    torch.testing.assert_close(conv(x), ref)


def test_two_layer_net_formula_and_freezing() -> None:
    net = TwoLayerNet(5, 64, seed=3)
    assert net.hidden.weight.requires_grad and not net.readout.weight.requires_grad
    a = net.readout.weight.detach()[0]
    assert set(a.unique().tolist()) == {-1.0, 1.0}
    x = torch.randn(4, 5)
    w = net.hidden.weight.detach()
    ref = torch.relu(x @ w.T / math.sqrt(5)) @ a / math.sqrt(64)
    torch.testing.assert_close(net(x), ref)
    assert net(x).shape == (4,)
    assert TwoLayerNet(5, 8, train_second=True).readout.weight.requires_grad


def test_seeds_are_reproducible() -> None:
    a, b, c = MLP(4, [8, 8], 2, seed=7), MLP(4, [8, 8], 2, seed=7), MLP(4, [8, 8], 2, seed=8)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb)
    assert not all(torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))
    gen = torch.Generator().manual_seed(5)
    assert isinstance(TwoLayerNet(3, 4, seed=gen), nn.Module)


def test_mlp_frozen_layers_and_shapes() -> None:
    net = MLP(6, [10, 12, 9], 3, frozen=[0, 2])
    flags = [m.weight.requires_grad for m in net.modules() if isinstance(m, NTKLinear)]
    assert flags == [False, True, False, True]
    assert net(torch.randn(5, 6)).shape == (5, 3)
    assert MLP(6, [10], 1)(torch.randn(5, 6)).shape == (5,)


def test_convnet_shapes_and_freezing() -> None:
    net = ConvNet(3, 8, depth=4, out_dim=2, freeze_first_last=True)
    assert net(torch.randn(2, 3, 8, 8)).shape == (2, 2)
    trainable = [n for n, p in net.named_parameters() if p.requires_grad]
    assert len(trainable) == 2 and "readout" not in " ".join(trainable)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="width"):
        TwoLayerNet(3, 0)
    with pytest.raises(TypeError, match="seed"):
        MLP(3, [4], seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="frozen"):
        MLP(3, [4], frozen=[5])
    with pytest.raises(ValueError, match="alpha"):
        DifferenceTrick(TwoLayerNet(3, 4), alpha=1.5)
    with pytest.raises(TypeError, match="Module"):
        DifferenceTrick(lambda x: x)  # type: ignore[arg-type]


@pytest.mark.parametrize("alpha", [0.5, 0.2])
def test_difference_trick_lemma(alpha: float) -> None:
    """Lemma A.1: f(θ(0), x) = 0 (at α = 1/2) and the NTK of f equals the NTK of g (any α)."""
    g = MLP(5, [16, 16], 2, frozen=[0], seed=4)
    f = DifferenceTrick(g, alpha=alpha)
    x = torch.randn(6, 5, dtype=torch.float64)
    out = f.double()(x)
    if alpha == 0.5:
        assert torch.count_nonzero(out) == 0
    else:
        torch.testing.assert_close(out, (math.sqrt(alpha) - math.sqrt(1 - alpha)) * g.double()(x))
    for output in ("trace", "full"):
        kf = empirical_ntk(f, x, output=output, dtype=torch.float64)
        kg = empirical_ntk(g, x, output=output, dtype=torch.float64)
        torch.testing.assert_close(kf, kg, rtol=1e-12, atol=1e-12)


def test_difference_trick_caption_formula_halves_the_ntk() -> None:
    """The caption of the paper's Figure (Appendix A), sqrt(α/2) g(θ₁) − sqrt((1−α)/2) g(θ₂), gives K_g / 2."""
    g = TwoLayerNet(4, 32, seed=2, train_second=True).double()
    f = DifferenceTrick(g, alpha=0.3)
    x = torch.randn(5, 4, dtype=torch.float64)

    class CaptionForm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = f

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x) / math.sqrt(2.0)

    torch.testing.assert_close(empirical_ntk(CaptionForm(), x), empirical_ntk(g, x) / 2)


def test_output_scale_multiplies_the_output_and_the_ntk_by_c_squared() -> None:
    g = TwoLayerNet(4, 16, seed=3).double()
    f = OutputScale(g, 3.0)
    x = torch.randn(5, 4, dtype=torch.float64)
    torch.testing.assert_close(f(x), 3.0 * g(x))
    torch.testing.assert_close(empirical_ntk(f, x), 9.0 * empirical_ntk(g, x))
