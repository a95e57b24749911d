r"""Monte Carlo checks of the proofs: Lemmas C.1 and C.2, the Hsu–Kakade–Zhang tail bound, the Rademacher bound.

Each function draws the label noise many times (Gaussian or Rademacher, sub-Gaussian with parameter σ) and
measures what a lemma bounds, so that a chapter can compare the two; :func:`ridge_fit` is the closed form
``K(K + λ²I)⁻¹ y`` written independently of :mod:`ntk_core.krr`, for the proofs' "mean-zero noise" steps.
All float64; every function that draws takes ``seed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..._checks import (
    as_float64_array,
    check_choice,
    check_count,
    check_kernel_matrix,
    check_positive,
    check_unit_interval_open,
)
from ..._typing import ArrayLike
from ...bounds import hsu_kakade_zhang_bound, lemma_c1_bound, lemma_c2_bound
from ...krr import krr_coefficients, krr_predict

__all__ = [
    "LemmaMonteCarlo",
    "lemma_monte_carlo",
    "rademacher_monte_carlo",
    "ridge_fit",
    "FitMonteCarlo",
    "fit_monte_carlo",
    "lemma_c1_pieces",
    "LemmaC2Chain",
    "lemma_c2_chain",
]


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
