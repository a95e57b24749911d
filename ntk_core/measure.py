r"""Measurements behind the book's theory chapters: numerical checks of Sections 3–5 and Appendices A–C.

Every loop or non-trivial computation that a theory chapter needs lives here,
so that a chapter is only prose, a call, a figure and an ``assert``. What goes
here and what goes in :mod:`ntk_core.experiments`: a measurement that takes
seconds, runs at one size and is recomputed by every build belongs here; a
study with ``quick``/``medium``/``full`` sizes, resumable units, a cache and
recorded results is an experiment. (This module was ``ntk_core.theory``: it
measures, it does not state the theory.) Nothing
here states a new bound: the bounds are in :mod:`ntk_core.bounds`, the solvers
in :mod:`ntk_core.krr`; this module *measures* (Monte Carlo over label-noise
draws, clean test errors over grids of p and λ, width sweeps of the empirical
NTK, the linearisation error of trained networks).

Contents

* Inputs and kernels: :func:`sphere_features` (pixels → vectors of norm √d, so
  that Σ⁽⁰⁾(x, x') = cos∠(x, x')), :func:`setting1_kernel` (the infinite-width
  NTK of the Setting-1 two-layer net), :func:`ntk_core.data.sample_classes`.
* Lemmas C.1 / C.2 and the Hsu–Kakade–Zhang bound: :func:`lemma_monte_carlo`;
  the Rademacher bound of Bartlett–Mendelson: :func:`rademacher_monte_carlo`.
* Clean errors of the KRR predictor trained on noisy labels:
  :func:`binary_error_grid` (Theorem 5.2), :func:`multiclass_error_grid`
  (Theorem 5.3), :func:`additive_test_loss` (Theorem 5.1).
* Noisy-label means: :func:`mean_noisy_onehot` (E[ỹ | c] = Q column, Theorem 5.3).
* Wide networks: :func:`ntk_width_sweep` (empirical vs infinite NTK),
  :func:`train_vs_krr` (RDI/AUX training of a real network against KRR, and
  the linearisation error), :class:`ntk_core.nets.CaptionDifference` (the formula printed in
  the caption of the paper's difference-trick figure), :func:`initial_output_effect`.
* :func:`loglog_slope`: least-squares slope of log y against log x.

All computations are float64; every function that draws takes ``seed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence, cast

import numpy as np
import torch
from torch import nn

from ._checks import (
    as_float64_array,
    check_choice,
    check_count,
    check_interval,
    check_kernel_matrix,
    check_positive,
    check_unit_interval_open,
)
from .bounds import hsu_kakade_zhang_bound, lemma_c1_bound, lemma_c2_bound
from .data import sphere_features
from .infinite import relu_kernels, relu_ntk
from .krr import KRRPath, krr_coefficients, krr_predict
from .noise import corrupt, flip_binary
from .ntk import _make_problem, _per_example_jacobians, empirical_ntk
from ._typing import ArrayLike

__all__ = [
    "LemmaC2Chain",
    "LemmaMonteCarlo",
    "TrainVsKRR",
    "WidthSweep",
    "additive_test_loss",
    "binary_error_grid",
    "initial_output_effect",
    "jacobian_features",
    "lemma_monte_carlo",
    "loglog_slope",
    "mean_noisy_onehot",
    "multiclass_error_grid",
    "ntk_width_sweep",
    "rademacher_monte_carlo",
    "cone_sample",
    "FitMonteCarlo",
    "fit_monte_carlo",
    "lemma_c1_pieces",
    "lemma_c2_chain",
    "ridge_fit",
    "setting1_kernel_arcsin",
    "setting1_power_coefficient",
    "sphere_sample",
    "setting1_kernel",
    "sphere_features",
    "train_vs_krr",
]


# =========================================================================== inputs and kernels


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


def jacobian_features(model: nn.Module, x: ArrayLike) -> np.ndarray:
    """The feature matrix Z of Section 4: row i is φ(x_i)ᵀ = ∇_θ f(θ(0), x_i)ᵀ over the trained parameters.

    Shape ``(n, P)``, float64, so that Z Zᵀ is the empirical NTK. Only for small
    models (the whole Jacobian is formed); use :func:`ntk_core.ntk.empirical_ntk`
    for Gram matrices.

    Parameters
    ----------
    model : torch.nn.Module
        A small network.
    x : ArrayLike, shape (n, ...)
        Inputs.

    Returns
    -------
    numpy.ndarray, shape (n, P)

    Raises
    ------
    ValueError
        A model with more than one output per example, or not one fixed
        per-example function (as for :func:`ntk_core.ntk.empirical_ntk`).
    """
    prob = _make_problem(model, torch.as_tensor(as_float64_array(x, "x")), None, "trace", torch.float64, "cpu", None)
    if prob.n_out != 1:
        raise ValueError(f"model must have one output per example (the features of f: R^d -> R), got {prob.n_out}")
    jac = _per_example_jacobians(prob, list(prob.params), prob.x1)  # name -> (n, 1, p)
    return torch.cat([j.reshape(j.shape[0], -1) for j in jac.values()], dim=1).numpy()


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
    >>> from ntk_core.measure import loglog_slope
    >>> round(loglog_slope([1, 10, 100], [1.0, 0.316227766, 0.1]), 6)   # y ∝ x^(-1/2)
    -0.5
    """
    xx, yy = as_float64_array(x, "x", ndim=1), as_float64_array(y, "y", ndim=1)
    if xx.shape != yy.shape or xx.size < 2 or np.any(xx <= 0) or np.any(yy <= 0):
        raise ValueError("x and y must be positive 1-D arrays of equal length >= 2")
    return float(np.polyfit(np.log(xx), np.log(yy), 1)[0])


# =========================================================================== Lemmas C.1, C.2 and HKZ


def _draw_noise(rng: np.random.Generator, shape: tuple[int, ...], sigma: float, kind: str) -> np.ndarray:
    if check_choice(kind, "noise", ("gaussian", "rademacher")) == "gaussian":
        return sigma * rng.standard_normal(shape)  # N(0, σ²) is sub-Gaussian with parameter exactly σ
    return sigma * (2.0 * rng.integers(0, 2, size=shape) - 1.0)  # ±σ: sub-Gaussian with parameter exactly σ


@dataclass(frozen=True)
class LemmaMonteCarlo:
    """Monte Carlo draws of the quantities bounded by Lemmas C.1, C.2 and eq. (12).

    Per draw of the noise ε (σ-sub-Gaussian, independent coordinates):
    ``train_dist`` = ‖f*(X) − y‖ (Lemma C.1), ``rkhs`` = ‖f*‖_H (Lemma C.2),
    ``hkz`` = ‖Aε‖ with A = K(K + λ²I)⁻¹ (eq. (12)); the bounds at confidence
    1 − δ are ``c1_bound``, ``c2_bound``, ``hkz_bound``.

    Attributes
    ----------
    lam : float
        λ.
    sigma : float
        σ.
    delta : float
        δ.
    noise : str
        The noise distribution, ``"gaussian"`` or ``"rademacher"`` (±σ).
    train_dist : numpy.ndarray
        ‖f*(X) − y‖ per draw, shape ``(draws,)``.
    rkhs : numpy.ndarray
        ‖f*‖_H per draw.
    hkz : numpy.ndarray
        ‖Aε‖ per draw.
    c1_bound : float
        Lemma C.1's bound.
    c2_bound : float
        Lemma C.2's bound.
    hkz_bound : float
        Eq. (12)'s bound.
    """

    lam: float
    sigma: float
    delta: float
    noise: str
    train_dist: np.ndarray
    rkhs: np.ndarray
    hkz: np.ndarray
    c1_bound: float
    c2_bound: float
    hkz_bound: float

    @property
    def freq_c1(self) -> float:
        return float(np.mean(self.train_dist <= self.c1_bound))

    @property
    def freq_c2(self) -> float:
        return float(np.mean(self.rkhs <= self.c2_bound))

    @property
    def freq_hkz(self) -> float:
        return float(np.mean(self.hkz <= self.hkz_bound))


def _lemma_inputs(K: ArrayLike, y: ArrayLike, lam: float, sigma: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The checked inputs of the Lemma C.1/C.2 measurements: kernel matrix, targets, λ > 0, σ > 0."""
    Km = check_kernel_matrix(K)
    yy = as_float64_array(y, "y", ndim=1)
    if yy.shape[0] != Km.shape[0]:
        raise ValueError(f"y must have one entry per row of K ({Km.shape[0]}), got {yy.shape[0]}")
    return Km, yy, check_positive(lam, "lam"), check_positive(sigma, "sigma")


def lemma_monte_carlo(
    K: ArrayLike, y: ArrayLike, lam: float, sigma: float, delta: float, draws: int, seed: int, noise: str = "gaussian"
) -> LemmaMonteCarlo:
    """Draw ``draws`` noise vectors ε, train KRR on ỹ = y + ε, and measure what Lemmas C.1/C.2 bound.

    One eigendecomposition K = U diag(s) Uᵀ serves every draw: with c = Uᵀỹ,
    f*(X) = U (s c/(s + λ²)), ‖f*‖²_H = Σ s c²/(s + λ²)², and Aε = U (s/(s+λ²) Uᵀε).

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        Kernel matrix k(X, X) on the training points.
    y : ArrayLike, shape (n,)
        Clean targets.
    lam : float
        λ > 0.
    sigma : float
        σ of the noise.
    delta : float
        δ ∈ (0, 1) of the bounds.
    draws : int
        Number of noise draws.
    seed : int
        Seed of the draws.
    noise : str
        The distribution of ε_i, ``"gaussian"`` or ``"rademacher"`` (±σ).

    Returns
    -------
    LemmaMonteCarlo
    """
    Km, yy, lam, sigma = _lemma_inputs(K, y, lam, sigma)
    delta, draws = check_unit_interval_open(delta, "delta"), check_count(draws, "draws")
    s, U = np.linalg.eigh(Km)
    s = np.clip(s, 0.0, None)
    n = Km.shape[0]
    rng = np.random.default_rng(seed)
    eps = _draw_noise(rng, (draws, n), sigma, noise)
    cy, ce = U.T @ yy, eps @ U  # (n,), (draws, n)
    filt = s / (s + lam**2)
    fit_coef = filt * (cy + ce)  # coordinates of f*(X) in the eigenbasis
    train_dist = np.linalg.norm(fit_coef - cy, axis=1)
    rkhs = np.sqrt(np.sum(s * (cy + ce) ** 2 / (s + lam**2) ** 2, axis=1))
    hkz = np.linalg.norm(filt * ce, axis=1)
    A = (U * filt) @ U.T
    return LemmaMonteCarlo(
        lam=lam,
        sigma=sigma,
        delta=delta,
        noise=noise,
        train_dist=train_dist,
        rkhs=rkhs,
        hkz=hkz,
        c1_bound=lemma_c1_bound(Km, yy, lam, sigma, delta).total,
        c2_bound=lemma_c2_bound(Km, yy, lam, sigma, delta).total,
        hkz_bound=hsu_kakade_zhang_bound(A, sigma, delta),
    )


def rademacher_monte_carlo(K: ArrayLike, draws: int, seed: int) -> tuple[float, float]:
    """Empirical Rademacher complexity of the unit RKHS ball, by Monte Carlo, and its bound.

    For F₁ = {f ∈ H : ‖f‖_H ≤ 1}, sup_{f∈F₁} Σ γ_i f(x_i) = √(γᵀKγ) exactly
    (Cauchy–Schwarz in H), so R̂_S(F₁) = E_γ √(γᵀKγ)/n. Returns
    ``(estimate, bound)`` with bound = √tr K / n (Bartlett & Mendelson 2002,
    the inequality used in the proof of Theorem 5.1; it is Jensen's inequality).

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        Kernel matrix k(X, X) on the training points.
    draws : int
        Number of Rademacher vectors γ.
    seed : int
        Seed of the draws.

    Returns
    -------
    estimate, bound : float
    """
    Km = check_kernel_matrix(K)
    n = Km.shape[0]
    rng = np.random.default_rng(seed)
    g = 2.0 * rng.integers(0, 2, size=(draws, n)) - 1.0
    vals = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", g, Km, g), 0.0, None))
    return float(vals.mean() / n), math.sqrt(float(np.trace(Km))) / n


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


# =========================================================================== classification errors


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
    from .bounds import ramp_loss

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


# =========================================================================== wide networks


@dataclass(frozen=True)
class WidthSweep:
    """Relative Frobenius distance ‖K_m − K_∞‖_F / ‖K_∞‖_F of the empirical NTK at width m.

    ``errors[i, s]`` is width ``widths[i]``, seed ``s``.

    Attributes
    ----------
    widths : numpy.ndarray
        The widths m, shape ``(W,)``.
    errors : numpy.ndarray
        Relative errors, shape ``(W, S)`` (S seeds).
    """

    widths: np.ndarray
    errors: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.errors.mean(axis=1)

    @property
    def slope(self) -> float:
        """The log-log slope of the mean error against the width (the theory predicts −1/2)."""
        return loglog_slope(self.widths, self.mean)


def ntk_width_sweep(
    x: ArrayLike, widths: Sequence[int], seeds: Sequence[int], train_second: bool = False
) -> WidthSweep:
    """Empirical NTK of :class:`~ntk_core.nets.TwoLayerNet` at each width and seed against the infinite one.

    ``train_second=False`` is Setting 1 (NTK ``relu_ntk(depth=1, trained="first")``);
    ``True`` trains both layers (``trained="all"``). Computed in float64.

    Parameters
    ----------
    x : ArrayLike, shape (n, d)
        Inputs (norm √d).
    widths : sequence of int
        The widths m.
    seeds : sequence of int
        Initialisation seeds.
    train_second : bool
        Also train the second layer.

    Returns
    -------
    WidthSweep
    """
    from .nets import TwoLayerNet

    xx = torch.as_tensor(as_float64_array(x, "x", ndim=2))
    K_inf = relu_ntk(xx.numpy(), depth=1, trained="all" if train_second else "first")
    errs = np.empty((len(widths), len(seeds)))
    for i, m in enumerate(widths):
        for j, s in enumerate(seeds):
            net = TwoLayerNet(xx.shape[1], int(m), seed=int(s), train_second=train_second).double()
            K_m = empirical_ntk(net, xx, dtype=torch.float64).numpy()
            errs[i, j] = np.linalg.norm(K_m - K_inf) / np.linalg.norm(K_inf)
    return WidthSweep(np.asarray(widths, dtype=np.int64), errs)


@dataclass(frozen=True)
class TrainVsKRR:
    """Trained wide networks against kernel ridge regression with the infinite-width NTK.

    For each width (rows) and method (``methods``): ``dist_krr[i, j]`` is the
    relative distance ‖f_net(X_test) − f_KRR(X_test)‖ / ‖f_KRR(X_test)‖ after
    training; ``dist_lin[i, j]`` the relative distance to the *linearised*
    network trained by the same GD (function-space GD with the empirical NTK of
    the initial network, :func:`ntk_core.krr.gd_rdi_kernel` /
    :func:`~ntk_core.krr.gd_aux_kernel`); ``kernel_err[i]`` the relative
    Frobenius distance of the initial empirical NTK (train block) to the
    infinite one; ``rdi_vs_aux[i]`` the relative distance between the two
    trained networks' test outputs; ``move[i, j]`` = ‖θ − θ(0)‖/‖θ(0)‖.

    Attributes
    ----------
    widths : numpy.ndarray
        The widths, shape ``(W,)``.
    methods : tuple[str, ...]
        The methods (``"rdi"``, ``"aux"``), M of them.
    dist_krr : numpy.ndarray
        Shape ``(W, M)``.
    dist_lin : numpy.ndarray
        Shape ``(W, M)``.
    kernel_err : numpy.ndarray
        Shape ``(W,)``.
    rdi_vs_aux : numpy.ndarray
        Shape ``(W,)``.
    move : numpy.ndarray
        Shape ``(W, M)``.
    krr_test : numpy.ndarray
        The KRR predictor's test outputs, shape ``(m,)``.
    """

    widths: np.ndarray
    methods: tuple[str, ...]
    dist_krr: np.ndarray
    dist_lin: np.ndarray
    kernel_err: np.ndarray
    rdi_vs_aux: np.ndarray
    move: np.ndarray
    krr_test: np.ndarray


def train_vs_krr(
    x: ArrayLike,
    y: ArrayLike,
    x_test: ArrayLike,
    widths: Sequence[int],
    lam: float,
    steps: int,
    seed: int = 0,
    methods: Sequence[str] = ("rdi", "aux"),
    lr: float | None = None,
) -> TrainVsKRR:
    """Train :class:`~ntk_core.nets.DifferenceTrick` (Setting-1 two-layer net) with RDI/AUX by full-batch GD.

    The network is f = (√2/2) g(θ₁) − (√2/2) g(θ₂), g the Setting-1
    :class:`~ntk_core.nets.TwoLayerNet` (first layer trained), so f(θ(0), ·) = 0
    and its NTK is g's (Lemma A.1): Theorem 4.1 then predicts that for large width
    the trained network computes f*(x) = k(x, X)ᵀ(K + λ²I)⁻¹ỹ. Training uses
    :func:`ntk_core.train.train` (``batch_size=None``: exactly GD on eq. (3) / (4))
    for ``steps`` epochs with learning rate ``lr`` (default: Theorem 4.1's
    largest allowed η = 1/(‖K‖ + λ²), with the infinite-width K).

    Parameters
    ----------
    x : ArrayLike, shape (n, d)
        Training inputs (norm √d).
    y : ArrayLike, shape (n,)
        Training targets.
    x_test : ArrayLike, shape (m, d)
        Test inputs.
    widths : sequence of int
        Widths of the network.
    lam : float
        λ > 0.
    steps : int
        GD steps (epochs of full-batch GD).
    seed : int
        Initialisation seed.
    methods : sequence of str
        ``"rdi"`` and/or ``"aux"``.
    lr : float, optional
        Learning rate (default 1/(‖K‖ + λ²)).

    Returns
    -------
    TrainVsKRR
    """
    from .krr import gd_aux_kernel, gd_kernel_closed_form, gd_rdi_kernel, gd_unregularized_kernel, learning_rate_bound
    from .nets import DifferenceTrick, TwoLayerNet
    from .train import predict

    X = torch.as_tensor(as_float64_array(x, "x", ndim=2))
    Xt = torch.as_tensor(as_float64_array(x_test, "x_test", ndim=2))
    yy = torch.as_tensor(as_float64_array(y, "y", ndim=1))
    K_inf = setting1_kernel(X.numpy())
    Kt_inf = setting1_kernel(Xt.numpy(), X.numpy())
    krr_test = krr_predict(K_inf, yy.numpy(), lam, Kt_inf)
    eta = learning_rate_bound(K_inf, lam) if lr is None else check_positive(lr, "lr")
    methods = tuple(methods)
    shape = (len(widths), len(methods))
    dist_krr, dist_lin, move = np.empty(shape), np.empty(shape), np.empty(shape)
    kernel_err, rdi_vs_aux = np.empty(len(widths)), np.full(len(widths), np.nan)
    old_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the trainer builds its targets in the default dtype
    try:
        for i, m in enumerate(widths):
            g = TwoLayerNet(X.shape[1], int(m), seed=seed + i).double()
            base = DifferenceTrick(g)
            K0 = empirical_ntk(base, X, dtype=torch.float64).numpy()
            K0t = empirical_ntk(base, Xt, X, dtype=torch.float64).numpy()
            kernel_err[i] = np.linalg.norm(K0 - K_inf) / np.linalg.norm(K_inf)
            outs = {}
            for j, method in enumerate(methods):
                net = DifferenceTrick(g)
                theta0 = torch.cat([p.detach().reshape(-1).clone() for p in net.parameters() if p.requires_grad])
                _train_binary(net, X, yy, method, lam, eta, steps)
                out = predict(net, Xt).numpy().astype(np.float64)
                outs[method] = out
                if method == "vanilla":  # plain GD: eq. (2) stopped at step `steps`, no ridge
                    lin = _final_test(
                        gd_unregularized_kernel(K0, yy.numpy(), eta, steps, K_test_train=K0t, record_every=steps)
                    )
                    ref = gd_kernel_closed_form(K_inf, yy.numpy(), eta, steps, 0.0, K_test_train=Kt_inf)
                else:
                    gd = gd_rdi_kernel if method == "rdi" else gd_aux_kernel
                    lin = _final_test(gd(K0, yy.numpy(), lam, eta, steps, K_test_train=K0t, record_every=steps))
                    ref = krr_test
                dist_krr[i, j] = np.linalg.norm(out - ref) / np.linalg.norm(ref)
                dist_lin[i, j] = np.linalg.norm(out - lin) / np.linalg.norm(lin)
                theta = torch.cat([p.detach().reshape(-1) for p in net.parameters() if p.requires_grad])
                move[i, j] = float(torch.linalg.vector_norm(theta - theta0) / torch.linalg.vector_norm(theta0))
            if "rdi" in outs and "aux" in outs:
                rdi_vs_aux[i] = np.linalg.norm(outs["rdi"] - outs["aux"]) / np.linalg.norm(outs["rdi"])
    finally:
        torch.set_default_dtype(old_dtype)
    return TrainVsKRR(
        np.asarray(widths, dtype=np.int64), methods, dist_krr, dist_lin, kernel_err, rdi_vs_aux, move, krr_test
    )


def _train_binary(
    net: nn.Module, X: torch.Tensor, y: torch.Tensor, method: str, lam: float, eta: float, steps: int
) -> None:
    """Full-batch GD on eq. (3) (RDI) or eq. (4) (AUX) with ±1 labels, by the library trainer."""
    from .train import TrainConfig, TrainingMethod, train

    labels = torch.where(y >= 0, 1, -1)
    if not torch.equal(labels.to(y.dtype), y):
        raise ValueError("train_vs_krr trains on binary labels in {-1, +1}")
    cfg = TrainConfig(
        method=cast(TrainingMethod, method),
        lam=None if method == "vanilla" else lam,
        loss="l2",
        epochs=steps,
        lr=eta,
        batch_size=None,
        eval_every=steps,
    )
    train(net, X, labels, cfg)


def _final_test(trajectory: Any) -> np.ndarray:
    """Test outputs at the last recorded step of a kernel-GD trajectory run with ``K_test_train``."""
    assert trajectory.test is not None, "the trajectory was run without K_test_train"
    return trajectory.test[-1]


def initial_output_effect(
    x: ArrayLike, y: ArrayLike, x_test: ArrayLike, y_test: ArrayLike, lam: float, draws: int, seed: int
) -> tuple[np.ndarray, float]:
    """What the initial output f(θ(0), ·) does to the NTK predictor (Appendix A), at infinite width.

    For the two-layer net with both layers trained, f(θ(0), ·) is a centred
    Gaussian process with covariance Σ⁽¹⁾ (the NNGP kernel) and the linearised
    network after training is f₀(x) + k(x, X)ᵀ(K + λ²I)⁻¹(ỹ − f₀(X)): kernel
    regression with correlated Gaussian noise on both the training targets and
    the test outputs. Draws f₀ jointly on train and test points ``draws`` times
    and returns the clean test errors ``(draws,)`` with f₀, and the error
    without it (the difference trick, f₀ = 0).

    Parameters
    ----------
    x : ArrayLike, shape (n, d)
        Training inputs (norm √d).
    y : ArrayLike, shape (n,)
        Training labels in {−1, +1}.
    x_test : ArrayLike, shape (m, d)
        Test inputs.
    y_test : ArrayLike, shape (m,)
        Test labels.
    lam : float
        λ > 0.
    draws : int
        Number of draws of f₀.
    seed : int
        Seed of the draws.

    Returns
    -------
    errors : numpy.ndarray, shape (draws,)
        Clean test errors with the initial output.
    error_without : float
        The error with f₀ = 0.
    """
    X = as_float64_array(x, "x", ndim=2)
    Xt = as_float64_array(x_test, "x_test", ndim=2)
    yy, yt = as_float64_array(y, "y", ndim=1), as_float64_array(y_test, "y_test", ndim=1)
    allx = np.concatenate([X, Xt])
    ntk_all, nngp_all = relu_kernels(allx, depth=1, trained="all")
    n = X.shape[0]
    K, Kt = ntk_all[:n, :n], ntk_all[n:, :n]
    path = KRRPath(K, Kt)
    clean = path.predict(yy, [lam], test=True)[0]
    base_err = float(np.mean(np.sign(clean) != yt))
    w, V = np.linalg.eigh(nngp_all)
    L = V * np.sqrt(np.clip(w, 0.0, None))
    rng = np.random.default_rng(seed)
    errs = np.empty(draws)
    for r in range(draws):
        f0 = L @ rng.standard_normal(allx.shape[0])
        pred = f0[n:] + path.predict(yy - f0[:n], [lam], test=True)[0]
        errs[r] = np.mean(np.sign(pred) != yt)
    return errs, base_err


# =========================================================================== Remark 5.2: labels in the RKHS


def sphere_sample(
    n: int, d: int, seed: int | np.random.Generator, levels: Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs on the sphere of radius √d and their first coordinate s = e₁ᵀx/√d ∈ [−1, 1].

    With ``levels=None``, x/√d is uniform on the unit sphere S^{d−1}. With
    ``levels`` (values in (−1, 1)), s is drawn uniformly from ``levels`` and x/√d
    uniformly on the slice {u ∈ S^{d−1} : e₁ᵀu = s}: u = s e₁ + √(1 − s²) w with w
    uniform on the unit sphere of e₁⊥. Labels that are functions of s are then
    functions of x in the RKHS of :func:`setting1_kernel` when they are
    polynomials in s of degree 1 or even degree on the support (Remark 5.2; see
    :func:`setting1_power_coefficient`). Returns ``(x, s)``, shapes ``(n, d)``, ``(n,)``.

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
    norm² is at most Σ_h g_h²/(a₂ cos⁴θ) (:func:`setting1_power_coefficient`): the
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
    >>> from ntk_core.measure import setting1_power_coefficient
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


# =========================================================================== proof steps, independently


def ridge_fit(K: ArrayLike, targets: ArrayLike, lam: float) -> np.ndarray:
    """K(K + λ²I)⁻¹·targets by an eigendecomposition of K, written independently of :mod:`ntk_core.krr`.

    The training-point values of the KRR predictor (eq. (8)) for ``targets`` of
    shape ``(n,)`` or ``(n, k)``; used as the closed-form side of the Monte Carlo
    checks of the proofs' "mean-zero noise" steps.

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        Kernel matrix k(X, X) on the training points.
    targets : ArrayLike, shape (n,) or (n, k)
        The targets.
    lam : float
        λ.

    Returns
    -------
    numpy.ndarray
        The shape of ``targets``.
    """
    Km = check_kernel_matrix(K)
    lam = check_positive(lam, "lam")
    s, U = np.linalg.eigh(Km)
    t = as_float64_array(targets, "targets", ndim=(1, 2))
    filt = np.clip(s, 0.0, None) / (np.clip(s, 0.0, None) + lam * lam)
    c = U.T @ t
    return U @ (filt[:, None] * c if c.ndim == 2 else filt * c)


@dataclass(frozen=True)
class FitMonteCarlo:
    """Mean and standard error, over draws of the noisy labels, of the package's KRR fit at the training points.

    Attributes
    ----------
    mean : numpy.ndarray
        Mean fit f*(X), shape ``(n,)`` or ``(n, k)``.
    stderr : numpy.ndarray
        Its standard error, the same shape.
    draws : int
        R, the number of draws.
    """

    mean: np.ndarray
    stderr: np.ndarray
    draws: int

    def max_z(self, expected: ArrayLike) -> float:
        """Largest |mean − expected| / stderr over the entries (≈ N(0, 1) each when ``expected`` is right)."""
        e = np.asarray(expected, dtype=np.float64)
        return float(np.max(np.abs(self.mean - e) / np.maximum(self.stderr, 1e-300)))


def fit_monte_carlo(K: ArrayLike, noisy_draws: ArrayLike, lam: float) -> FitMonteCarlo:
    """Train the package's KRR (:func:`ntk_core.krr.krr_predict`) on each row of ``noisy_draws`` (R × n[× k]).

    Returns the mean fit f*(X) over the R draws and its standard error, for a
    comparison with the proofs' closed form E f*(X) = K(K + λ²I)⁻¹ E ỹ
    (:func:`ridge_fit`): E ỹ = y (Theorem 5.1), (1 − 2p)y (Theorem 5.2), q⁽ʰ⁾ (Theorem 5.3).

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        Kernel matrix k(X, X) on the training points.
    noisy_draws : ArrayLike, shape (R, n) or (R, n, k)
        One row of noisy labels per draw.
    lam : float
        λ.

    Returns
    -------
    FitMonteCarlo
    """
    Y = as_float64_array(noisy_draws, "noisy_draws", ndim=(2, 3))
    R, n = Y.shape[0], Y.shape[1]
    if R < 2:
        raise ValueError(f"need at least 2 draws for a standard error, got {R}")
    cols = np.moveaxis(Y, 0, -1).reshape(n, -1)  # (n, R·k): one solve for all draws
    fits = krr_predict(K, cols, lam).reshape((n,) + Y.shape[2:] + (R,))
    fits = np.moveaxis(fits, -1, 0)
    return FitMonteCarlo(fits.mean(axis=0), fits.std(axis=0, ddof=1) / math.sqrt(R), R)


def lemma_c1_pieces(K: ArrayLike, y: ArrayLike, lam: float, sigma: float) -> dict[str, float]:
    """The two pieces of Lemma C.1's proof, exactly, with the inequalities that bound them.

    f*(X) − y = Aε − λ²(K + λ²I)⁻¹y with A = K(K + λ²I)⁻¹ (eq. (11) of the proof):

    * ``bias`` = λ²‖(K + λ²I)⁻¹y‖ and its bound ``bias_bound`` = (λ/2)√(yᵀK⁻¹y) (eq. (14));
    * ``noise_ms`` = E‖Aε‖² = σ² tr A² for independent ε_i of variance σ² (Gaussian:
      sub-Gaussian parameter σ), and ``noise_ms_bound`` = σ² tr K/(4λ²) (eq. (13));
    * ``trA4`` = tr A⁴ and ``trA4_bound`` = tr K/(9λ²).

    All from one eigendecomposition of K (K positive definite).

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        Kernel matrix, positive definite.
    y : ArrayLike, shape (n,)
        Clean targets.
    lam : float
        λ > 0.
    sigma : float
        σ.

    Returns
    -------
    dict[str, float]
        The keys listed above.
    """
    Km, yy, lam, sigma = _lemma_inputs(K, y, lam, sigma)
    s, U = np.linalg.eigh(Km)
    if s.min() <= 0:
        raise ValueError("K must be positive definite for y^T K^-1 y")
    c = U.T @ yy
    a = s / (s + lam**2)
    return {
        "bias": lam**2 * float(np.linalg.norm(c / (s + lam**2))),
        "bias_bound": lam / 2.0 * math.sqrt(float(np.sum(c**2 / s))),
        "noise_ms": sigma**2 * float(np.sum(a**2)),
        "noise_ms_bound": sigma**2 * float(np.sum(s)) / (4.0 * lam**2),
        "trA4": float(np.sum(a**4)),
        "trA4_bound": float(np.sum(s)) / (9.0 * lam**2),
    }


@dataclass(frozen=True)
class LemmaC2Chain:
    """Each step of the proof of Lemma C.2, per draw of the noise (arrays of shape ``(draws,)``).

    ``rkhs`` = ‖f*‖_H of the package's KRR fit; ``step1`` = √(ỹᵀ(K+λ²I)⁻¹ỹ)
    (since (K+λ²I)⁻¹K(K+λ²I)⁻¹ ⪯ (K+λ²I)⁻¹); ``step2`` = √(yᵀ(K+λ²I)⁻¹y) + √(εᵀ(K+λ²I)⁻¹ε)
    (triangle inequality); ``step3`` = √(yᵀ(K+λ²I)⁻¹y) + ‖ε‖/λ; ``bound`` = Lemma C.2
    at confidence 1 − δ. ``noise_quad`` = εᵀ(K+λ²I)⁻¹ε and ``noise_quad_mean`` its exact
    mean σ² Σ_i 1/(s_i + λ²) for noise of variance σ².

    Attributes
    ----------
    rkhs : numpy.ndarray
        ‖f*‖_H per draw.
    step1 : numpy.ndarray
        First step of the chain per draw.
    step2 : numpy.ndarray
        Second step per draw.
    step3 : numpy.ndarray
        Third step per draw.
    bound : float
        Lemma C.2 at confidence 1 − δ.
    noise_quad : numpy.ndarray
        εᵀ(K+λ²I)⁻¹ε per draw.
    noise_quad_mean : float
        Its exact mean.
    """

    rkhs: np.ndarray
    step1: np.ndarray
    step2: np.ndarray
    step3: np.ndarray
    bound: float
    noise_quad: np.ndarray
    noise_quad_mean: float


def lemma_c2_chain(
    K: ArrayLike, y: ArrayLike, lam: float, sigma: float, delta: float, draws: int, seed: int
) -> LemmaC2Chain:
    """Draw Gaussian noise ε ~ N(0, σ²I), fit KRR with :func:`ntk_core.krr.krr_coefficients`, and
    evaluate every step of the proof of Lemma C.2 (see :class:`LemmaC2Chain`).

    Parameters
    ----------
    K, y, lam, sigma, delta, draws, seed
        As for :func:`lemma_monte_carlo` (Gaussian noise): kernel matrix ``(n, n)``, clean targets ``(n,)``,
        λ > 0, σ > 0, δ ∈ (0, 1) of the bound, the number of noise draws and their seed.

    Returns
    -------
    LemmaC2Chain
    """
    Km, yy, lam, sigma = _lemma_inputs(K, y, lam, sigma)
    delta, draws = check_unit_interval_open(delta, "delta"), check_count(draws, "draws")
    n = Km.shape[0]
    eps = sigma * np.random.default_rng(seed).standard_normal((n, draws))
    alpha = krr_coefficients(Km, yy[:, None] + eps, lam)  # (n, draws), the package's solver
    s, U = np.linalg.eigh(Km)
    w = 1.0 / (np.clip(s, 0.0, None) + lam**2)  # eigenvalues of (K + λ²I)⁻¹
    cy, ce = U.T @ yy, U.T @ eps
    quad_y = float(np.sum(w * cy**2))
    noise_quad = np.sum(w[:, None] * ce**2, axis=0)
    return LemmaC2Chain(
        rkhs=np.sqrt(np.clip(np.einsum("id,ij,jd->d", alpha, Km, alpha), 0.0, None)),
        step1=np.sqrt(np.sum(w[:, None] * (cy[:, None] + ce) ** 2, axis=0)),
        step2=math.sqrt(quad_y) + np.sqrt(noise_quad),
        step3=math.sqrt(quad_y) + np.linalg.norm(eps, axis=0) / lam,
        bound=lemma_c2_bound(Km, yy, lam, sigma, delta).total,
        noise_quad=noise_quad,
        noise_quad_mean=sigma**2 * float(np.sum(w)),
    )
