"""Type aliases shared by the whole package.

``ArrayLike`` is the type of every array parameter: a ``numpy.ndarray``, a ``torch.Tensor``, or
anything ``numpy.asarray`` accepts (a list of numbers, a scalar). Functions document the shape they
expect in their *Parameters* section, e.g. ``K : ArrayLike, shape (n, n)``.

Importing this module does not import torch (the tensor type is a forward reference), so the
NumPy-only modules import ``ArrayLike`` like any other name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias, Union

import numpy.typing as npt

if TYPE_CHECKING:
    import torch

__all__ = ["ArrayLike"]

#: An array argument, a ``numpy.ndarray``, a ``torch.Tensor`` or anything ``numpy.asarray`` accepts.
ArrayLike: TypeAlias = Union[npt.ArrayLike, "torch.Tensor"]
