"""Networks in NTK parametrization, and the difference trick of Appendix A.

Every layer follows the convention of ARCHITECTURE.md: weights are drawn from
N(0, 1) and the layer's input is multiplied by ``1/sqrt(fan_in)``. The scaling
is a separate, parameter-free step in front of a plain ``nn.Linear`` /
``nn.Conv2d`` (see :class:`NTKLinear`), so the weight-carrying module is a
standard PyTorch layer that :func:`ntk_core.ntk.empirical_ntk` recognises for
its structured derivatives. No network here has biases (paper, Appendix D:
"We do not have biases in these two networks").

Networks returning one number per example return shape ``(b,)``: the paper's
``f: R^d -> R`` of Section 3.1.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ._checks import check_count, check_probability

__all__ = [
    "NTKLinear",
    "NTKConv2d",
    "TwoLayerNet",
    "MLP",
    "ConvNet",
    "DifferenceTrick",
    "CaptionDifference",
    "OutputScale",
    "as_generator",
]


def as_generator(seed: int | torch.Generator, name: str = "seed") -> torch.Generator:
    """Turn an ``int`` seed or a ``torch.Generator`` into a (CPU) ``torch.Generator``.

    Parameters
    ----------
    seed : int or torch.Generator
        The seed, or a generator returned as it is.
    name : str
        The parameter's name in error messages.

    Returns
    -------
    torch.Generator
    """
    if isinstance(seed, torch.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{name} must be an int or a torch.Generator (draws are always seeded), got {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative int, got {seed}")
    return torch.Generator().manual_seed(seed)


def _standard_normal_(param: Tensor, gen: torch.Generator) -> None:
    with torch.no_grad():
        param.copy_(torch.randn(param.shape, generator=gen, dtype=param.dtype))


class NTKLinear(nn.Module):
    """Dense layer ``y = W x / sqrt(d_in)`` with ``W_ij ~ N(0, 1)``, no bias.

    The weight lives in ``self.linear`` (a plain ``nn.Linear``); the
    ``1/sqrt(d_in)`` factor is applied to the input first.

    Parameters
    ----------
    d_in, d_out : int
        Input and output sizes.
    seed : int or torch.Generator
        Draws W.
    trainable : bool
        ``False`` freezes W (``requires_grad=False``).
    """

    def __init__(self, d_in: int, d_out: int, *, seed: int | torch.Generator = 0, trainable: bool = True) -> None:
        super().__init__()
        self.d_in = check_count(d_in, "d_in")
        self.d_out = check_count(d_out, "d_out")
        self.scale = 1.0 / math.sqrt(d_in)
        self.linear = nn.Linear(d_in, d_out, bias=False)
        _standard_normal_(self.linear.weight, as_generator(seed))
        self.linear.weight.requires_grad_(trainable)

    @property
    def weight(self) -> Tensor:
        return self.linear.weight

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x * self.scale)


class NTKConv2d(nn.Module):
    """Convolution ``y = W * x / sqrt(c_in k^2)`` with ``W ~ N(0, 1)``, no bias.

    ``padding`` defaults to ``kernel_size // 2`` ("same" size for odd kernels).

    Parameters
    ----------
    c_in, c_out : int
        Input and output channels.
    kernel_size : int
        k (square kernels).
    stride : int
        Stride.
    padding : int, optional
        Zero padding (default ``kernel_size // 2``).
    seed : int or torch.Generator
        Draws W.
    trainable : bool
        ``False`` freezes W.
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        kernel_size: int = 3,
        *,
        stride: int = 1,
        padding: int | None = None,
        seed: int | torch.Generator = 0,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        check_count(c_in, "c_in")
        check_count(c_out, "c_out")
        check_count(kernel_size, "kernel_size")
        pad = kernel_size // 2 if padding is None else padding
        self.scale = 1.0 / math.sqrt(c_in * kernel_size * kernel_size)
        self.conv = nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=pad, bias=False)
        _standard_normal_(self.conv.weight, as_generator(seed))
        self.conv.weight.requires_grad_(trainable)

    @property
    def weight(self) -> Tensor:
        return self.conv.weight

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x * self.scale)


def _squeeze_scalar(out: Tensor) -> Tensor:
    return out.squeeze(-1) if out.shape[-1] == 1 else out


class TwoLayerNet(nn.Module):
    r"""The two-layer ReLU network of Setting 1 (paper, Section 6 and Appendix D).

    .. math::
        f(\theta, x) &= \frac{1}{\sqrt m} \sum_{r=1}^m a_r\,
        \mathrm{relu}\Big(\frac{w_r^\top x}{\sqrt d}\Big),\\
        w_r &\sim N(0, I_d),\qquad a_r \sim \mathrm{Unif}\{\pm 1\}.

    By default only the first layer ``W = (w_1, ..., w_m)`` is trained and the
    second layer ``a`` is frozen (``requires_grad=False``), as in the paper
    ("we freeze ... the second layer of the fully-connected net"); its NTK is
    then :func:`ntk_core.infinite.relu_ntk` with ``depth=1, trained="first"``.
    ``train_second=True`` trains both layers (the setting of the
    difference-trick figure of Appendix A).

    Parameters
    ----------
    d : int
        Input dimension.
    width : int
        m, the number of hidden units (the paper's Setting 1 uses 10,000).
    seed : int or torch.Generator
        Draws W and a.
    train_second : bool
        Also train the second layer a.

    Examples
    --------
    Inputs of shape ``(n, d)`` give outputs of shape ``(n,)``; only W is trained:

    >>> import torch
    >>> from ntk_core import TwoLayerNet
    >>> net = TwoLayerNet(d=784, width=100, seed=0)
    >>> net(torch.zeros(3, 784)).shape
    torch.Size([3])
    >>> [name for name, w in net.named_parameters() if w.requires_grad]
    ['hidden.linear.weight']
    """

    def __init__(self, d: int, width: int, *, seed: int | torch.Generator = 0, train_second: bool = False) -> None:
        super().__init__()
        gen = as_generator(seed)
        self.d = check_count(d, "d")
        self.width = check_count(width, "width")
        self.hidden = NTKLinear(d, width, seed=gen)
        self.act = nn.ReLU()
        self.readout = NTKLinear(width, 1, seed=gen, trainable=train_second)
        signs = torch.randint(0, 2, (1, width), generator=gen).to(self.readout.weight.dtype) * 2 - 1
        with torch.no_grad():
            self.readout.weight.copy_(signs)

    def forward(self, x: Tensor) -> Tensor:
        return self.readout(self.act(self.hidden(x.flatten(1)))).squeeze(-1)


class MLP(nn.Module):
    """Deep ReLU MLP in NTK parametrization without biases.

    ``h^1 = W^1 x / sqrt(d)``, ``h^{l+1} = W^{l+1} relu(h^l) / sqrt(m_l)``,
    ``f = h^{L+1}`` with ``L = len(widths)`` hidden layers. ``frozen`` lists
    the indices (0 = first layer, ``L`` = readout) of layers whose weights are
    constants. Shape ``(b,)`` if ``out_dim == 1`` else ``(b, out_dim)``.

    Parameters
    ----------
    d : int
        Input dimension (inputs of shape ``(b, d)``).
    widths : sequence of int
        Hidden widths m_1, …, m_L.
    out_dim : int
        Number of outputs.
    frozen : sequence of int
        Indices of the layers whose weights are not trained.
    seed : int or torch.Generator
        Draws the weights.
    """

    def __init__(
        self,
        d: int,
        widths: Sequence[int],
        out_dim: int = 1,
        *,
        frozen: Sequence[int] = (),
        seed: int | torch.Generator = 0,
    ) -> None:
        super().__init__()
        gen = as_generator(seed)
        dims = [check_count(d, "d"), *[check_count(w, "width") for w in widths], check_count(out_dim, "out_dim")]
        bad = [i for i in frozen if not 0 <= i < len(dims) - 1]
        if bad:
            raise ValueError(f"frozen layer indices must lie in [0, {len(dims) - 2}], got {bad}")
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            if i > 0:
                layers.append(nn.ReLU())
            layers.append(NTKLinear(a, b, seed=gen, trainable=i not in frozen))
        self.body = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return _squeeze_scalar(self.body(x.flatten(1)))


class ConvNet(nn.Module):
    """Bias-free ReLU CNN in NTK parametrization, after Setting 2 (Appendix D).

    ``depth`` layers in all: ``depth - 1`` 3x3 "same" convolutions with
    ``channels`` channels and ReLU, global average pooling, then a dense
    readout. The paper gives only depth (11) and width (192); the pooling and
    readout are this library's assumptions. ``freeze_first_last=True`` freezes
    the first convolution and the readout, as the paper does.

    Parameters
    ----------
    in_channels : int
        Input channels (inputs of shape ``(b, in_channels, H, W)``).
    channels : int
        Channels of every convolution (Setting 2: 192).
    depth : int
        Layers in all, convolutions and readout (Setting 2: 11).
    out_dim : int
        Number of outputs; the output has shape ``(b,)`` for one, else ``(b, out_dim)``.
    freeze_first_last : bool
        Freeze the first convolution and the readout.
    seed : int or torch.Generator
        Draws the weights.
    """

    def __init__(
        self,
        in_channels: int = 3,
        channels: int = 192,
        depth: int = 11,
        out_dim: int = 1,
        *,
        freeze_first_last: bool = False,
        seed: int | torch.Generator = 0,
    ) -> None:
        super().__init__()
        gen = as_generator(seed)
        if check_count(depth, "depth") < 2:
            raise ValueError(f"depth must be >= 2 (at least one convolution and the readout), got {depth}")
        layers: list[nn.Module] = []
        c = in_channels
        for i in range(depth - 1):
            layers += [NTKConv2d(c, channels, 3, seed=gen, trainable=not (freeze_first_last and i == 0)), nn.ReLU()]
            c = channels
        self.features = nn.Sequential(*layers)
        self.readout = NTKLinear(channels, out_dim, seed=gen, trainable=not freeze_first_last)

    def forward(self, x: Tensor) -> Tensor:
        return _squeeze_scalar(self.readout(self.features(x).mean(dim=(2, 3))))


class DifferenceTrick(nn.Module):
    r"""Difference trick (paper, footnote 2 and Appendix A), with mixing ``alpha``.

    .. math::
        f(\theta_1, \theta_2, x) &= \sqrt{\alpha}\, g(\theta_1, x)\\
        &\quad - \sqrt{1-\alpha}\, g(\theta_2, x),\\
        \theta_1(0) &= \theta_2(0).

    ``alpha = 1/2`` is the paper's form ``(√2/2) g(θ₁) − (√2/2) g(θ₂)``. Then
    (Lemma A.1) ``f(θ(0), x) = 0`` for every x and the NTK of f at
    initialization equals the NTK of g: the two copies contribute
    ``α K_g + (1 − α) K_g = K_g``. For any ``alpha`` the NTK is preserved; the
    initial output is ``(√α − √(1−α)) g(θ₁(0), x)``, zero only at α = 1/2.

    About the caption of the paper's difference-trick figure: it prints
    ``f = sqrt(α/2) g(θ₁, x) − sqrt((1−α)/2) g(θ₁, x)``. Read literally (both
    terms on θ₁) f is one network scaled by ``(√α − √(1−α))/√2``; reading the
    second θ₁ as θ₂, the NTK of f is ``(α/2 + (1−α)/2) K_g = K_g / 2`` for every
    α, so the caption's claim "this parametrization preserves the NTK" does not
    hold for its formula, and at α = 1/2 it gives ``g/2 − g/2`` instead of the
    lemma's ``(√2/2) g − (√2/2) g``. Dropping the ``/2`` (as here) makes both
    the lemma's α = 1/2 case and the NTK-preservation claim hold.

    ``g`` is deep-copied twice, so both copies start from identical
    parameters, frozen ones included; ``g`` itself is left untouched.

    Parameters
    ----------
    g : torch.nn.Module
        The network to mix.
    alpha : float
        α ∈ [0, 1].

    Examples
    --------
    >>> import torch
    >>> from ntk_core import DifferenceTrick, TwoLayerNet
    >>> f = DifferenceTrick(TwoLayerNet(d=5, width=32, seed=0))   # α = 1/2
    >>> f(torch.randn(4, 5)).abs().max().item()                    # zero output at initialisation
    0.0
    """

    def __init__(self, g: nn.Module, alpha: float = 0.5) -> None:
        super().__init__()
        if not isinstance(g, nn.Module):
            raise TypeError(f"g must be a torch.nn.Module, got {type(g).__name__}")
        self.alpha = check_probability(alpha, "alpha")
        self.g1 = copy.deepcopy(g)
        self.g2 = copy.deepcopy(g)

    def forward(self, x: Tensor) -> Tensor:
        return math.sqrt(self.alpha) * self.g1(x) - math.sqrt(1.0 - self.alpha) * self.g2(x)


class CaptionDifference(nn.Module):
    """The network printed in the caption of the paper's difference-trick figure (Appendix A).

    f = √(α/2) g(θ₁, x) − √((1 − α)/2) g(θ₂, x), with θ₁(0) = θ₂(0) (the
    caption writes θ₁ twice; the second is read as θ₂). Its NTK is
    (α/2 + (1 − α)/2) K_g = K_g/2 for every α. Compare
    :class:`ntk_core.nets.DifferenceTrick` (no /2), whose NTK is K_g.

    Parameters
    ----------
    g : torch.nn.Module
        The network to mix (deep-copied twice).
    alpha : float
        α ∈ [0, 1].
    """

    def __init__(self, g: nn.Module, alpha: float = 0.5) -> None:
        super().__init__()
        self.alpha = check_probability(alpha, "alpha")
        self.g1 = copy.deepcopy(g)
        self.g2 = copy.deepcopy(g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return math.sqrt(self.alpha / 2) * self.g1(x) - math.sqrt((1 - self.alpha) / 2) * self.g2(x)


class OutputScale(nn.Module):
    """``c · g(x)`` for a constant ``c``: the √2 ReLU gain of every layer of a bias-free ReLU net, in one factor.

    Scaling the output by c scales the NTK by c² (Setting 2 uses it for the ReLU gain
    and for its ``output_scale``).

    Parameters
    ----------
    g : torch.nn.Module
        The network.
    scale : float
        The constant c.

    Examples
    --------
    >>> import torch
    >>> from ntk_core.nets import OutputScale
    >>> OutputScale(torch.nn.Identity(), 2.0)(torch.ones(2)).tolist()
    [2.0, 2.0]
    """

    def __init__(self, g: nn.Module, scale: float) -> None:
        super().__init__()
        self.g, self.scale = g, float(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * self.g(x)
