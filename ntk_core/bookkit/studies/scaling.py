r"""Power-law fits of measured curves (how a bound's terms grow with n)."""

from __future__ import annotations


import numpy as np

from ..._checks import (
    as_float64_array,
)
from ..._typing import ArrayLike

__all__ = ["loglog_slope"]


def loglog_slope(x: ArrayLike, y: ArrayLike) -> float:
    """Least-squares slope of log y against log x (x, y > 0).

    Parameters
    ----------
    x, y : ArrayLike, shape (k,)
        Positive values.

    Returns
    -------
    float

    Examples
    --------
    >>> from ntk_core.bookkit.studies import loglog_slope
    >>> round(loglog_slope([1, 10, 100], [1.0, 0.316227766, 0.1]), 6)   # y ∝ x^(-1/2)
    -0.5
    """
    xx, yy = as_float64_array(x, "x", ndim=1), as_float64_array(y, "y", ndim=1)
    if xx.shape != yy.shape or xx.size < 2 or np.any(xx <= 0) or np.any(yy <= 0):
        raise ValueError("x and y must be positive 1-D arrays of equal length >= 2")
    return float(np.polyfit(np.log(xx), np.log(yy), 1)[0])
