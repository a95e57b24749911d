"""ntk_core: Neural Tangent Kernels for learning from noisy labels.

An executable companion to Hu, Li & Yu, "Simple and Effective Regularization
Methods for Training on Noisily Labeled Data with Generalization Guarantee"
(ICLR 2020). This module only re-exports the public API of the submodules.
"""

from .data import (
    BinaryTask,
    DataError,
    DataNotFoundError,
    ImageDataset,
    cifar_airplane_vs_automobile,
    load_cifar10,
    load_mnist,
    mnist_5_vs_8,
)
from .noise import corrupt, empirical_transition, flip_binary, pairflip_transition, symmetric_transition

__version__ = "0.1.0"

__all__ = [
    "BinaryTask",
    "DataError",
    "DataNotFoundError",
    "ImageDataset",
    "cifar_airplane_vs_automobile",
    "corrupt",
    "empirical_transition",
    "flip_binary",
    "load_cifar10",
    "load_mnist",
    "mnist_5_vs_8",
    "pairflip_transition",
    "symmetric_transition",
]
