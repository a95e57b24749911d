r"""Clean errors of the KRR predictor trained on noisy labels, over grids of the noise level and of λ.

:func:`additive_test_loss` (Theorem 5.1), :func:`binary_error_grid` (Theorem 5.2), :func:`multiclass_error_grid`
(Theorem 5.3) and :func:`mean_noisy_onehot` (the mean of a noisy one-hot label, E[ỹ | c] = the Q column).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..._checks import (
    as_float64_array,
)
from ..._typing import ArrayLike
from ...krr import KRRPath
from ...noise import corrupt, flip_binary

__all__ = ["additive_test_loss", "binary_error_grid", "multiclass_error_grid", "mean_noisy_onehot"]


def additive_test_loss(
    K: ArrayLike,
    K_test: ArrayLike,
    y: ArrayLike,
    y_test: ArrayLike,
    lams: Sequence[float],
    sigma: float,
    draws: int,
    seed: int,
) -> np.ndarray:
    """Theorem 5.1's left side, measured: mean over test points of min(|f*(x) − y|, 1).

    f* is KRR on ỹ = y + ε, ε ~ N(0, σ²) i.i.d.; returns an array
    ``(draws, len(lams))``.

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        Kernel matrix k(X, X) on the training points.
    K_test : ArrayLike, shape (m, n)
        Kernel values k(x_test_j, x_i).
    y : ArrayLike, shape (n,)
        Clean training targets in [−1, 1].
    y_test : ArrayLike, shape (m,)
        Clean test targets.
    lams : sequence of float
        The λ values (ridge λ²).
    sigma : float
        σ of the Gaussian noise.
    draws : int
        Number of noise draws.
    seed : int
        Seed of the draws.

    Returns
    -------
    numpy.ndarray, shape (draws, len(lams))
    """
    path = KRRPath(K, K_test)
    yy = as_float64_array(y, "y", ndim=1)
    yt = as_float64_array(y_test, "y_test", ndim=1)
    rng = np.random.default_rng(seed)
    out = np.empty((draws, len(lams)))
    for r in range(draws):
        pred = path.predict(yy + sigma * rng.standard_normal(yy.shape), lams, test=True)
        out[r] = np.minimum(np.abs(pred - yt[None, :]), 1.0).mean(axis=1)
    return out


def binary_error_grid(
    K: ArrayLike,
    K_test: ArrayLike,
    y: ArrayLike,
    y_test: ArrayLike,
    ps: Sequence[float],
    lams: Sequence[float],
    draws: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Clean test error and clean-test ramp loss of KRR trained on labels flipped with rate p.

    For each p in ``ps`` and each of ``draws`` flip draws (``noise.flip_binary``),
    the KRR predictor f* = k(·, X)ᵀ(K + λ²I)⁻¹ỹ is evaluated on the test points
    for every λ in ``lams`` (one eigendecomposition in all). Returns
    ``(error, ramp)`` of shape ``(len(ps), len(lams), draws)``: the fraction of
    test points with sgn f*(x) ≠ y, and the mean ramp loss
    ℓ^ramp(f*(x), (1 − 2p)y) of Appendix C.2 divided by 1 − 2p (which bounds
    the error from above pointwise).

    Parameters
    ----------
    K, K_test : ArrayLike, shapes (n, n) and (m, n)
        Kernel matrices k(X, X) and k(X_test, X).
    y, y_test : ArrayLike, shapes (n,) and (m,)
        Clean training and test labels in {−1, +1}.
    ps : sequence of float
        Flip rates in [0, 1/2).
    lams : sequence of float
        The λ values (ridge λ²).
    draws : int
        Number of noise draws.
    seed : int
        Seed of the draws.

    Returns
    -------
    error, ramp : numpy.ndarray, shape (len(ps), len(lams), draws)
    """
    from ...bounds import ramp_loss

    path = KRRPath(K, K_test)
    yy = np.asarray(y)
    yt = as_float64_array(y_test, "y_test", ndim=1)
    err = np.empty((len(ps), len(lams), draws))
    ramp = np.empty_like(err)
    rng = np.random.default_rng(seed)
    for i, p in enumerate(ps):
        for r in range(draws):
            noisy = flip_binary(yy, p, seed=rng)
            pred = path.predict(noisy.astype(np.float64), lams, test=True)  # (L, m)
            err[i, :, r] = np.mean(np.where(pred >= 0, 1.0, -1.0) != yt[None, :], axis=1)
            ramp[i, :, r] = ramp_loss(pred, yt[None, :], p).mean(axis=1) / (1.0 - 2.0 * p)
    return err, ramp


def multiclass_error_grid(
    K: ArrayLike,
    K_test: ArrayLike,
    labels: ArrayLike,
    labels_test: ArrayLike,
    Ps: Sequence[Any],
    lams: Sequence[float],
    draws: int,
    seed: int,
) -> np.ndarray:
    """Clean top-1 test error of K-output KRR on one-hot noisy labels, per transition matrix and λ.

    For each P in ``Ps`` and each of ``draws`` draws of ỹ (``noise.corrupt``),
    f⁽ʰ⁾ = k(·, X)ᵀ(K + λ²I)⁻¹ỹ⁽ʰ⁾ (eq. (8)) and the error is the fraction of
    test points with argmax_h f⁽ʰ⁾(x) ≠ c. Returns shape ``(len(Ps), len(lams), draws)``.

    Parameters
    ----------
    K, K_test, lams, draws, seed
        As for :func:`binary_error_grid`: kernel matrices ``(n, n)`` and ``(m, n)``, the λ values, the number
        of noise draws and their seed.
    labels, labels_test : ArrayLike, shapes (n,) and (m,)
        Clean training and test classes.
    Ps : sequence of ArrayLike
        Transition matrices, each ``(K, K)``.

    Returns
    -------
    numpy.ndarray, shape (len(Ps), len(lams), draws)
    """
    path = KRRPath(K, K_test)
    lab = np.asarray(labels)
    lt = np.asarray(labels_test)
    err = np.empty((len(Ps), len(lams), draws))
    rng = np.random.default_rng(seed)
    for i, P in enumerate(Ps):
        k = np.shape(P)[0]
        for r in range(draws):
            noisy = corrupt(lab, P, seed=rng)
            onehot = np.eye(k)[noisy]
            pred = path.predict(onehot, lams, test=True)  # (L, m, K)
            err[i, :, r] = np.mean(pred.argmax(axis=2) != lt[None, :], axis=1)
    return err


def mean_noisy_onehot(labels: ArrayLike, P: ArrayLike, draws: int, seed: int) -> np.ndarray:
    """Average of the one-hot noisy labels over ``draws`` draws: estimates E[ỹ_i | c_i] (shape (K, n)).

    Theorem 5.3's proof uses E[ỹ_i | c_i] = P[:, c_i], i.e. E[Ỹ] = Q = P·Y.

    Parameters
    ----------
    labels : ArrayLike, shape (n,)
        Clean classes.
    P : ArrayLike, shape (K, K)
        Column-stochastic transition matrix.
    draws : int
        Number of noise draws.
    seed : int
        Seed of the draws.

    Returns
    -------
    numpy.ndarray, shape (K, n)
    """
    lab = np.asarray(labels)
    k = np.shape(P)[0]
    rng = np.random.default_rng(seed)
    acc = np.zeros((k, lab.size))
    for _ in range(draws):
        acc[corrupt(lab, P, seed=rng), np.arange(lab.size)] += 1.0
    return acc / draws
