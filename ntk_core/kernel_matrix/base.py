r"""The kernel-matrix type: what kernel ridge regression and the bounds take, whatever holds K.

A :class:`KernelMatrix` has a size, a trace and a diagonal, products ``K V``, ridge solves
``α = (K + λ² I)⁻¹ Y`` (the ridge λ² I of eq. (8)) and quadratic forms ``Yᵀ(K + λ² I)⁻¹ Y`` (λ = 0: the
complexity yᵀK⁻¹y of eq. (10)); the kinds of :mod:`ntk_core.kernel_matrix` implement it. Here too are the
tolerances every kind uses: when K counts as positive semi-definite, and when a solve is called inaccurate.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .._checks import check_lam
from .._typing import ArrayLike

__all__ = ["ACCURACY_RTOL", "PSD_RTOL", "IllConditionedWarning", "KernelMatrix"]


#: Positive semi-definiteness: an (n, n) kernel matrix is refused when it has an eigenvalue
#: below ``-PSD_RTOL * n * max|K_ij|``. An entrywise rounding error of relative size ε moves
#: the eigenvalues by at most ``n ε max|K_ij|``, so this admits float32 Gram matrices
#: (ε ≈ 1.2e-7, with a margin of 8) and refuses a clearly negative eigenvalue.
PSD_RTOL = 1e-6

#: A direct KRR solve warns (:class:`IllConditionedWarning`) when its answer's estimated relative error
#: is above this: float64 data are exact to 1e-16, an answer off by more than 1e-6 is not what it seems.
ACCURACY_RTOL = 1e-6


class IllConditionedWarning(UserWarning):
    """A kernel ridge regression answer is much less accurate than float64: ``K + λ² I`` is ill-conditioned
    (λ too small for the spread of K's eigenvalues), and rounding errors grow by its condition number."""


class KernelMatrix(ABC):
    """A symmetric positive semi-definite kernel matrix k(X, X), shape (n, n), in memory or on disk."""

    #: The number of rows (and columns) n.
    n: int

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, n)``."""
        return (self.n, self.n)

    @abstractmethod
    def trace(self) -> float:
        """tr K."""

    @abstractmethod
    def diagonal(self) -> np.ndarray:
        """The diagonal k(x_i, x_i), shape (n,)."""

    @abstractmethod
    def matvec(self, V: ArrayLike) -> np.ndarray:
        """K V for V of shape (n,) or (n, m)."""

    def ridge_solve(self, Y: np.ndarray, lam: float) -> np.ndarray:
        """α = (K + λ² I)⁻¹ Y (eq. (8)); λ ≥ 0, and λ = 0 needs K positive definite. Y of shape (n,) or (n, m).

        λ is checked here, once; a kind of kernel matrix implements ``_ridge_solve``, which trusts it.
        """
        return self._ridge_solve(Y, check_lam(lam))

    def ridge_quadratic(self, Y: np.ndarray, lam: float) -> float | np.ndarray:
        """Yᵀ(K + λ² I)⁻¹Y per column of Y (λ = 0: the complexity yᵀK⁻¹y of eq. (10)); a float for 1-D Y.

        λ is checked here, once; a kind may implement ``_ridge_quadratic`` (default: from its ridge solve).
        """
        return self._ridge_quadratic(Y, check_lam(lam))

    @abstractmethod
    def _ridge_solve(self, Y: np.ndarray, lam: float) -> np.ndarray:
        """:meth:`ridge_solve` for a λ already checked (finite, ≥ 0)."""

    def _ridge_quadratic(self, Y: np.ndarray, lam: float) -> float | np.ndarray:
        """:meth:`ridge_quadratic` for a λ already checked."""
        vals = np.sum(Y * self._ridge_solve(Y, lam), axis=0)
        return float(vals) if Y.ndim == 1 else vals
