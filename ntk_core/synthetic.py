r"""Synthetic inputs: points on the sphere of radius √d, and classes in cones around random directions.

The inputs of Remark 5.2's study (labels in the RKHS) and of the theory chapters' controlled examples, drawn so
that Σ⁽⁰⁾(x, x') = xᵀx'/d = cos∠(x, x') as for :func:`ntk_core.data.sphere_features`. Every function takes a seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ._checks import as_float64_array, check_count, check_interval

__all__ = ["cone_sample", "sphere_sample"]


def sphere_sample(
    n: int, d: int, seed: int | np.random.Generator, levels: Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs on the sphere of radius √d and their first coordinate s = e₁ᵀx/√d ∈ [−1, 1].

    With ``levels=None``, x/√d is uniform on the unit sphere S^{d−1}. With
    ``levels`` (values in (−1, 1)), s is drawn uniformly from ``levels`` and x/√d
    uniformly on the slice {u ∈ S^{d−1} : e₁ᵀu = s}: u = s e₁ + √(1 − s²) w with w
    uniform on the unit sphere of e₁⊥. Labels that are functions of s are then
    functions of x in the RKHS of :func:`~ntk_core.infinite.setting1_kernel` when they are
    polynomials in s of degree 1 or even degree on the support (Remark 5.2; see
    :func:`~ntk_core.infinite.setting1_power_coefficient`). Returns ``(x, s)``, shapes ``(n, d)``, ``(n,)``.

    Parameters
    ----------
    n : int
        Number of points.
    d : int
        Dimension.
    seed : int or numpy.random.Generator
        Seed of the draw.
    levels : sequence of float, optional
        Values of s to draw from.

    Returns
    -------
    x : numpy.ndarray, shape (n, d)
    s : numpy.ndarray, shape (n,)
    """
    n, d = check_count(n, "n"), check_count(d, "d", 2)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if levels is None:
        u = rng.standard_normal((n, d))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
    else:
        lv = as_float64_array(levels, "levels", ndim=1)
        if lv.size == 0 or np.any(np.abs(lv) >= 1.0):
            raise ValueError(f"levels must be a non-empty list of values in (-1, 1), got {list(lv)}")
        s = lv[rng.integers(0, lv.size, size=n)]
        w = rng.standard_normal((n, d - 1))
        w /= np.linalg.norm(w, axis=1, keepdims=True)
        u = np.concatenate([s[:, None], np.sqrt(1.0 - s[:, None] ** 2) * w], axis=1)
    return u * math.sqrt(d), u[:, 0].copy()


def cone_sample(n: int, d: int, k: int, theta: float, seed: int | np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A k-class distribution on the sphere of radius √d whose class indicators are in the Setting-1 RKHS.

    The class c is uniform on {0, …, k−1}; given c, u = x/√d = cos θ·e_c + sin θ·w with w
    uniform on the unit sphere of span(e_k, …, e_{d−1}) (needs d ≥ k + 2). On this
    support (e_hᵀu)² = cos²θ·1[c = h], so every function of the class,
    g(c) = Σ_h g_h 1[c = h], equals the quadratic Σ_h g_h (e_hᵀu)²/cos²θ, whose RKHS
    norm² is at most Σ_h g_h²/(a₂ cos⁴θ) (:func:`~ntk_core.infinite.setting1_power_coefficient`): the
    premise of Remark 5.2 holds with a constant known in advance. Returns
    ``(x, c)``, shapes ``(n, d)`` and ``(n,)`` (int).

    Parameters
    ----------
    n : int
        Number of points.
    d : int
        Dimension (≥ k + 2).
    k : int
        Number of classes.
    theta : float
        The angle θ.
    seed : int or numpy.random.Generator
        Seed of the draw.

    Returns
    -------
    x : numpy.ndarray, shape (n, d)
    c : numpy.ndarray, shape (n,)
    """
    k, d = check_count(k, "k", 2), check_count(d, "d", 2)
    if d < k + 2:
        raise ValueError(
            f"d must be an int >= k + 2 = {k + 2} (the sphere of the remaining axes must not be two points), got {d!r}"
        )
    theta = check_interval(theta, "theta", 0.0, math.pi / 2, low_open=True, high_open=True)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    w, _ = sphere_sample(n, d - k, rng)
    c = rng.integers(0, k, size=n)
    u = np.zeros((n, d))
    u[np.arange(n), c] = math.cos(theta)
    u[:, k:] = math.sin(theta) * w / math.sqrt(d - k)
    return u * math.sqrt(d), c
