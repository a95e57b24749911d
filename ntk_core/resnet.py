r"""CIFAR-style ResNet (ResNet-34 by default) for Setting 3, and a random crop/flip augmentation module.

Architecture (the "CIFAR ResNet" of He et al., 2016, as used by the CIFAR-10
noisy-label baselines the paper compares with, e.g. Zhang & Sabuncu, 2018)::

    x (3 x 32 x 32)
    stem:    conv3x3(3 -> w), stride 1, no bias  ->  BN  ->  ReLU       (no max-pool)
    stage 1: blocks[0] x BasicBlock(w),   stride 1                       32 x 32
    stage 2: blocks[1] x BasicBlock(2w),  first block stride 2           16 x 16
    stage 3: blocks[2] x BasicBlock(4w),  first block stride 2            8 x  8
    stage 4: blocks[3] x BasicBlock(8w),  first block stride 2            4 x  4
    global average pool  ->  linear(8w -> num_classes, with bias)

    BasicBlock(c_out, stride):  conv3x3(stride) -> BN -> ReLU -> conv3x3 -> BN, plus the shortcut
    (identity, or conv1x1(stride) -> BN when the shape changes), then ReLU.

``blocks=(3, 4, 6, 3)`` and ``width=64`` (widths 64/128/256/512) is ResNet-34:
21,282,122 parameters for 10 classes. ``blocks=(2, 2, 2, 2)`` is ResNet-18. The
quick profile of Setting 3 uses a tiny version (``blocks=(1, 1, 1, 1)``, ``width=16``).

Unlike :mod:`ntk_core.nets`, this network is in the *standard* parametrization
with batch normalization: the paper notes that the ResNet-34 of Setting 3 is
likely not in the NTK regime. Initialization is seeded (``seed`` or a
``torch.Generator``): convolutions He-normal (fan-out, ReLU gain), batch-norm
scale 1 and shift 0, the linear head PyTorch's default
``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` for weight and bias.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ._checks import check_count
from .nets import as_generator

__all__ = ["BasicBlock", "CifarResNet", "resnet34", "RandomCropFlip"]


def _conv3x3(c_in: int, c_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a residual connection (He et al., 2016).

    Parameters
    ----------
    c_in, c_out : int
        Input and output channels (a 1x1 projection joins the shortcut when they differ or ``stride`` > 1).
    stride : int
        Stride of the first convolution.
    """

    def __init__(self, c_in: int, c_out: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = _conv3x3(c_in, c_out, stride)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = _conv3x3(c_out, c_out)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: Tensor) -> Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """CIFAR ResNet with :class:`BasicBlock` stages; see the module docstring for the architecture.

    Output shape ``(b, num_classes)`` (logits).

    Parameters
    ----------
    blocks : sequence of int
        Blocks per stage.
    width : int
        Channels of the first stage (doubled at each later stage).
    num_classes : int
        Number of outputs.
    in_channels : int
        Input channels (inputs of shape ``(b, in_channels, 32, 32)``).
    seed : int or torch.Generator
        Draws the initial weights.
    """

    def __init__(
        self,
        blocks: Sequence[int] = (3, 4, 6, 3),
        width: int = 64,
        num_classes: int = 10,
        *,
        in_channels: int = 3,
        seed: int | torch.Generator = 0,
    ) -> None:
        super().__init__()
        blocks = tuple(blocks)
        if len(blocks) != 4:
            raise ValueError(f"blocks must be four positive ints (blocks per stage), got {blocks!r}")
        for b in blocks:
            check_count(b, "blocks per stage")
        for name, value in (("width", width), ("num_classes", num_classes), ("in_channels", in_channels)):
            check_count(value, name)
        gen = as_generator(seed)
        self.blocks, self.width, self.num_classes = blocks, width, num_classes
        self.stem = nn.Sequential(_conv3x3(in_channels, width), nn.BatchNorm2d(width), nn.ReLU())
        stages: list[nn.Module] = []
        c = width
        for i, n_blocks in enumerate(blocks):
            c_out = width * 2**i
            layers = []
            for j in range(n_blocks):
                layers.append(BasicBlock(c, c_out, stride=2 if (i > 0 and j == 0) else 1))
                c = c_out
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(c, num_classes)
        self._init(gen)

    @torch.no_grad()
    def _init(self, gen: torch.Generator) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.out_channels * m.kernel_size[0] * m.kernel_size[1]
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.fill_(1.0)
                m.bias.zero_()
            elif isinstance(m, nn.Linear):
                bound = 1.0 / math.sqrt(m.in_features)
                m.weight.copy_((torch.rand(m.weight.shape, generator=gen) * 2 - 1) * bound)
                m.bias.copy_((torch.rand(m.bias.shape, generator=gen) * 2 - 1) * bound)

    def forward(self, x: Tensor) -> Tensor:
        out = self.stages(self.stem(x))
        return self.head(out.mean(dim=(2, 3)))


def resnet34(num_classes: int = 10, *, seed: int | torch.Generator = 0) -> CifarResNet:
    """The standard CIFAR ResNet-34: blocks (3, 4, 6, 3), widths 64/128/256/512.

    Parameters
    ----------
    num_classes : int
        Number of outputs.
    seed : int or torch.Generator
        Draws the initial weights.

    Returns
    -------
    CifarResNet
    """
    return CifarResNet((3, 4, 6, 3), 64, num_classes, seed=seed)


class RandomCropFlip(nn.Module):
    """The standard CIFAR augmentation as a module: random crop after zero padding, random horizontal flip.

    Active only in training mode (``model.train()``); in evaluation mode
    (``model.eval()``, used by :func:`ntk_core.train.predict`) it is the identity,
    so training error, validation and test error are measured on the original
    images. Draws come from its own seeded CPU generator, so a run is
    reproducible. Wrap a network as ``nn.Sequential(RandomCropFlip(seed=s), net)``.

    Parameters
    ----------
    padding : int
        Zero padding before the random crop back to the original size (0: no crop).
    flip : bool
        Flip horizontally with probability 1/2.
    seed : int or torch.Generator
        Seeds the module's generator.
    """

    def __init__(self, padding: int = 4, flip: bool = True, *, seed: int | torch.Generator = 0) -> None:
        super().__init__()
        check_count(padding, "padding", minimum=0)
        self.padding, self.flip = padding, bool(flip)
        self.gen = as_generator(seed)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return x
        b, _, h, w = x.shape
        p = self.padding
        if p:
            padded = nn.functional.pad(x, (p, p, p, p))
            oy = torch.randint(0, 2 * p + 1, (b,), generator=self.gen)
            ox = torch.randint(0, 2 * p + 1, (b,), generator=self.gen)
            rows = (oy[:, None] + torch.arange(h)).to(x.device)  # (b, h)
            cols = (ox[:, None] + torch.arange(w)).to(x.device)  # (b, w)
            batch = torch.arange(b, device=x.device)[:, None, None]
            # advanced indexing: (b, h, w, c) -> (b, c, h, w)
            x = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)
        if self.flip:
            mirror = (torch.rand(b, generator=self.gen) < 0.5).to(x.device)
            x = torch.where(mirror[:, None, None, None], x.flip(3), x)
        return x.contiguous()
