r"""Closed-form infinite-width NTK and NNGP kernels of bias-free ReLU MLPs.

The network is the one of :class:`ntk_core.nets.MLP` (NTK parametrization,
ARCHITECTURE.md): with ``L`` hidden layers of widths ``m_1 .. m_L``,

.. math::
    h^1 &= W^1 x / \sqrt d,\qquad f = h^{L+1},\\
    h^{l+1} &= W^{l+1} \mathrm{relu}(h^l) / \sqrt{m_l},\\
    W^l_{ij} &\sim N(0, 1).

As all widths grow (Jacot et al. 2018; Arora et al. 2019, the limit quoted in
Section 3.2 of the paper) the pre-activations become Gaussian processes with

.. math::
    \Sigma^{(0)}(x, x') &= x^\top x' / d,\\
    \Sigma^{(l)} &= \mathbb E[\mathrm{relu}(u)\mathrm{relu}(v)],\\
    \dot\Sigma^{(l)} &= \mathbb E[\mathrm{relu}'(u)\mathrm{relu}'(v)],

:math:`(u, v) \sim N(0, [[\Sigma^{(l-1)}(x,x), \Sigma^{(l-1)}(x,x')], [\cdot, \Sigma^{(l-1)}(x',x')]])`,
given by the arc-cosine kernels (Cho & Saul 2009) with
:math:`\cos\vartheta = \Sigma^{(l-1)}(x,x') / \sqrt{\Sigma^{(l-1)}(x,x)\Sigma^{(l-1)}(x',x')}`:

.. math::
    \Sigma^{(l)} &= \frac{\sqrt{\Sigma^{(l-1)}(x,x)\Sigma^{(l-1)}(x',x')}}{2\pi}\\
    &\qquad\cdot\big(\sin\vartheta + (\pi - \vartheta)\cos\vartheta\big),\\
    \dot\Sigma^{(l)} &= \frac{\pi - \vartheta}{2\pi}.

The gradient with respect to ``W^l`` (l = 1 .. L+1) contributes
:math:`\Sigma^{(l-1)} \prod_{k=l}^{L} \dot\Sigma^{(k)}` to the NTK, so the NTK
with trained layers ``S`` is the sum of those terms over ``l ∈ S``; all layers
trained gives the usual recursion :math:`\Theta^{(l+1)} = \Theta^{(l)}\dot\Sigma^{(l)} + \Sigma^{(l)}`.
The NNGP kernel (covariance of the initial output f(θ(0), ·), Appendix A) is
:math:`\Sigma^{(L)}`.

Normalisation. No input normalisation is assumed: the kernels depend on the
raw inner products ``x^T x' / d``; for inputs with ``||x||^2 = d`` (e.g.
standardized pixels) ``Σ^(0)`` is the cosine similarity. Because weights are
N(0, 1) rather than He-scaled, the diagonal halves at each ReLU layer:
``Σ^(l)(x, x) = Σ^(0)(x, x) / 2^l``.

Setting 1 (``depth=1, trained="first"``): for
:class:`ntk_core.nets.TwoLayerNet`,
``f = (1/√m) Σ_r a_r relu(w_r^T x / √d)`` with the ±1 second layer frozen,

.. math::
    k(x, x') = \frac{x^\top x'}{d}\cdot\frac{\pi - \vartheta(x, x')}{2\pi},

with ``ϑ`` the angle between x and x'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ._checks import as_float64_array, check_count
from ._typing import ArrayLike

__all__ = [
    "relu_ntk",
    "relu_nngp",
    "relu_kernels",
    "setting1_kernel",
    "setting1_kernel_arcsin",
    "setting1_power_coefficient",
]


def _inputs(x1: ArrayLike, x2: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    a = as_float64_array(x1, "x1")
    if a.ndim < 2:
        raise ValueError(f"x1 must have shape (n, *features) with at least 2 dimensions, got {a.shape}")
    a = a.reshape(a.shape[0], -1)
    if x2 is None:
        return a, a
    b = as_float64_array(x2, "x2")
    if b.ndim < 2 or math.prod(b.shape[1:]) != a.shape[1]:
        raise ValueError(f"x2 must have the feature size of x1 ({a.shape[1]}), got shape {b.shape}")
    return a, b.reshape(b.shape[0], -1)


def _trained_layers(trained: str | Sequence[int], depth: int) -> set[int]:
    """Layer indices 1 .. depth+1 (the readout is depth+1) whose weights are trained."""
    if trained == "all":
        return set(range(1, depth + 2))
    if trained == "first":
        return {1}
    if isinstance(trained, str):
        raise ValueError(f"trained must be 'all', 'first' or a sequence of layer indices, got {trained!r}")
    layers = {int(t) for t in trained}
    bad = sorted(t for t in layers if not 1 <= t <= depth + 1)
    if not layers or bad:
        raise ValueError(
            f"trained layer indices must lie in 1..{depth + 1} (readout = {depth + 1}), got {list(trained)}"
        )
    return layers


def _arccos_step(
    cov: np.ndarray, diag1: np.ndarray, diag2: np.ndarray, same: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One ReLU layer: (Σ^(l), Σ̇^(l)) and Σ^(l) on each side's diagonal.

    ``same`` (x2 is x1): the diagonal angle is set to exactly 0, since arccos is
    ill-conditioned at 1 (rounding would give angles ~1e-8).
    """
    norms = np.sqrt(np.outer(diag1, diag2))
    safe = np.where(norms > 0, norms, 1.0)
    cos = np.clip(np.where(norms > 0, cov / safe, 0.0), -1.0, 1.0)
    if same:
        np.fill_diagonal(cos, 1.0)
    theta = np.arccos(cos)
    sigma = norms / (2 * math.pi) * (np.sin(theta) + (math.pi - theta) * cos)
    sigma_dot = (math.pi - theta) / (2 * math.pi)
    return sigma, sigma_dot, diag1 / 2.0, diag2 / 2.0


def relu_kernels(
    x1: ArrayLike, x2: ArrayLike | None = None, *, depth: int = 1, trained: str | Sequence[int] = "all"
) -> tuple[np.ndarray, np.ndarray]:
    """``(NTK, NNGP)`` of the infinite-width bias-free ReLU MLP with ``depth`` hidden layers.

    The limits, as every hidden width grows, of :func:`ntk_core.ntk.empirical_ntk`
    and of the covariance of the initial output for :class:`ntk_core.nets.MLP`
    (NTK parametrization), computed by the arc-cosine recursion of the module
    docstring. Inputs of shape ``(n, *features)`` are flattened.

    Parameters
    ----------
    x1 : ArrayLike, shape (n1, ...)
        Inputs.
    x2 : ArrayLike, shape (n2, ...), optional
        Second inputs (default: ``x1``), with the feature size of ``x1``. ``None`` or ``x1`` itself (the same
        object) gives k(X, X), whose diagonal angles are exactly 0.
    depth : int
        Number of hidden layers (≥ 1); Setting 1's two-layer net has depth 1.
    trained : "all", "first" or sequence of int
        The trained layers: all, only the first (Setting 1 of the paper), or
        layer indices in ``1..depth+1``. Untrained layers add nothing to the NTK.

    Returns
    -------
    ntk, nngp : numpy.ndarray, shape (n1, n2)
        float64 kernels.

    Raises
    ------
    ValueError
        Inputs of fewer than 2 dimensions or different feature sizes, depth < 1,
        or a bad ``trained``.

    Examples
    --------
    On the sphere ‖x‖² = d, the NTK of a two-layer net with only its first
    layer trained (Setting 1) is 1/2 on the diagonal and 0 between orthogonal
    inputs:

    >>> import numpy as np
    >>> from ntk_core import relu_kernels
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> x = x / np.linalg.norm(x, axis=1, keepdims=True) * np.sqrt(2)
    >>> ntk, nngp = relu_kernels(x, trained="first")
    >>> ntk.shape, nngp.shape
    ((3, 3), (3, 3))
    >>> np.round(ntk[:2, :2], 4)
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    same = x2 is None or x2 is x1
    a, b = _inputs(x1, None if same else x2)
    depth = check_count(depth, "depth (number of hidden ReLU layers)")
    layers = _trained_layers(trained, depth)
    d = a.shape[1]
    sigma = a @ b.T / d  # Σ^(0)
    diag1, diag2 = np.einsum("ij,ij->i", a, a) / d, np.einsum("ij,ij->i", b, b) / d
    sigmas, dots = [sigma], []
    for _ in range(depth):
        sigma, sigma_dot, diag1, diag2 = _arccos_step(sigma, diag1, diag2, same)
        sigmas.append(sigma)
        dots.append(sigma_dot)
    ntk = np.zeros_like(sigma)
    for layer in layers:  # W^layer sees Σ^(layer-1), then Σ̇^(layer) ... Σ̇^(depth)
        term = sigmas[layer - 1].copy()
        for sigma_dot in dots[layer - 1 :]:
            term *= sigma_dot
        ntk += term
    return ntk, sigmas[depth]


def relu_ntk(
    x1: ArrayLike, x2: ArrayLike | None = None, *, depth: int = 1, trained: str | Sequence[int] = "all"
) -> np.ndarray:
    """Infinite-width NTK of the bias-free ReLU MLP, the first element of :func:`relu_kernels`.

    Parameters
    ----------
    x1 : ArrayLike, shape (n1, ...)
        Inputs.
    x2 : ArrayLike, shape (n2, ...), optional
        Second inputs (default: ``x1``).
    depth : int
        Number of hidden layers.
    trained : "all", "first" or sequence of int
        The trained layers (see :func:`relu_kernels`).

    Returns
    -------
    numpy.ndarray, shape (n1, n2)
        float64 kernel matrix.
    """
    return relu_kernels(x1, x2, depth=depth, trained=trained)[0]


def relu_nngp(x1: ArrayLike, x2: ArrayLike | None = None, *, depth: int = 1) -> np.ndarray:
    """Infinite-width NNGP kernel, the covariance of the initial output f(θ(0), ·).

    Parameters
    ----------
    x1, x2, depth
        As in :func:`relu_ntk`.

    Returns
    -------
    numpy.ndarray, shape (n1, n2)
        float64 kernel matrix.
    """
    return relu_kernels(x1, x2, depth=depth)[1]


def setting1_kernel(x1: ArrayLike, x2: ArrayLike | None = None) -> np.ndarray:
    """Infinite-width NTK of the Setting-1 net (two-layer ReLU, only the first layer trained).

    k(x, x') = (xᵀx'/d)(π − ϑ)/(2π) (:func:`ntk_core.infinite.relu_ntk` with
    ``depth=1, trained="first"``); float64 ``(n1, n2)``.

    Parameters
    ----------
    x1 : ArrayLike, shape (n1, d)
        Inputs of norm √d.
    x2 : ArrayLike, shape (n2, d), optional
        Second inputs (default ``x1``).

    Returns
    -------
    numpy.ndarray, shape (n1, n2)
    """
    return relu_ntk(x1, x2, depth=1, trained="first")


def setting1_kernel_arcsin(x1: ArrayLike, x2: ArrayLike | None = None) -> np.ndarray:
    """The Setting-1 NTK written through arcsin: k = t/4 + t·arcsin(t)/(2π), t = xᵀx'/d.

    Equal to :func:`setting1_kernel` (t(π − arccos t)/(2π)) because
    arccos t = π/2 − arcsin t; computed here independently, as the first step of
    the power series behind :func:`setting1_power_coefficient`.

    Parameters
    ----------
    x1, x2 : ArrayLike, shapes (n1, d) and (n2, d)
        As for :func:`setting1_kernel` (inputs of norm √d; ``x2`` defaults to ``x1``).

    Returns
    -------
    numpy.ndarray, shape (n1, n2)
    """
    a = as_float64_array(x1, "x1", ndim=2)
    b = a if x2 is None else as_float64_array(x2, "x2", ndim=2)
    t = np.clip(a @ b.T / a.shape[1], -1.0, 1.0)
    return t / 4.0 + t * np.arcsin(t) / (2.0 * math.pi)


def setting1_power_coefficient(j: int) -> float:
    """Coefficient a_j of t^j in the Setting-1 NTK k(t) = Σ_j a_j t^j on the sphere (Remark 5.2).

    From k(t) = t/4 + t·arcsin(t)/(2π) and arcsin t = Σ_m (2m)!/(4^m (m!)² (2m+1)) t^{2m+1}:
    a₁ = 1/4, a_{2m+2} = (2m)!/(4^m (m!)² (2m+1))/(2π) (a₂ = 1/(2π), a₄ = 1/(12π)),
    and a_j = 0 for j = 0 and every odd j ≥ 3. Hence for a unit vector β the
    function u ↦ (βᵀu)^j (u = x/√d) has RKHS norm² ‖(βᵀu)^j‖²_H ≤ 1/a_j when a_j > 0
    (its feature-space representer is β^{⊗j} in the t^j part of the kernel), so
    yᵀK⁻¹y ≤ 1/a_j for y_i = (βᵀu_i)^j at every n — the O(1) of Remark 5.2 — while
    for odd j ≥ 3 the function is not in the RKHS.

    Parameters
    ----------
    j : int
        The power, j ≥ 0.

    Returns
    -------
    float
        a_j.

    Examples
    --------
    >>> import math
    >>> from ntk_core.infinite import setting1_power_coefficient
    >>> setting1_power_coefficient(1), math.isclose(setting1_power_coefficient(2), 1 / (2 * math.pi))
    (0.25, True)
    """
    j = check_count(j, "j", 0)
    if j == 1:
        return 0.25
    if j == 0 or j % 2 == 1:
        return 0.0
    m = (j - 2) // 2
    return math.comb(2 * m, m) / (4.0**m * (2 * m + 1)) / (2.0 * math.pi)
