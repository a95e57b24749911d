"""Tests for ntk_core.bounds: the terms of Theorems 5.1-5.3 and Lemmas C.1, C.2.

Monte Carlo acceptance rule (used by every `*_holds_*` test): with N independent
draws, the observed failure frequency must be at most δ + 3·√(δ(1−δ)/N), i.e.
δ plus three binomial standard errors (one-sided normal approximation; a
correct bound fails this with probability about 0.1%). "Power" tests show the
same check does fail when a constant is made too small.
"""

from __future__ import annotations

import math

import ntk_core.bounds as bounds
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ntk_core.bounds import (
    BOUND_TERMS,
    PrintedScaleWarning,
    binary_noise_subgaussian_sigma,
    centred_bernoulli_subgaussian_sigma,
    complexity,
    gap,
    hsu_kakade_zhang_bound,
    krr_rkhs_norm,
    lemma_c1_bound,
    lemma_c2_bound,
    multiclass_noise_subgaussian_sigma,
    q_matrix,
    ramp_loss,
    ridge_complexity,
    rkhs_norm,
    subgaussian_sigma_numeric,
    theorem_5_1_bound,
    theorem_5_1_printed,
    theorem_5_2_bound,
    theorem_5_2_printed,
    theorem_5_3_bound,
    theorem_5_3_printed,
)
from ntk_core.infinite import relu_ntk
from ntk_core.krr import krr_coefficients, krr_predict
from ntk_core.noise import symmetric_transition
from ntk_core.ntk import empirical_ntk

N_DRAWS = 4000


def kernel(seed: int = 0, n: int = 100, P: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, P)) / np.sqrt(P)
    return Z @ Z.T  # positive definite (P > n), tr K ≈ n


def binary_labels(seed: int, n: int = 100) -> np.ndarray:
    return np.where(np.random.default_rng(seed).random(n) < 0.5, -1.0, 1.0)


def symmetric_P(k: int, r: float) -> np.ndarray:
    return (1 - r) * np.eye(k) + r / (k - 1) * (np.ones((k, k)) - np.eye(k))


def max_failure_rate(delta: float, n: int = N_DRAWS) -> float:
    return delta + 3.0 * math.sqrt(delta * (1 - delta) / n)


def draw_noise(kind: str, shape: tuple[int, ...], seed: int, p: float = 0.05) -> tuple[np.ndarray, float]:
    """Mean-zero noise with independent coordinates and its sub-Gaussian parameter σ."""
    rng = np.random.default_rng(seed)
    if kind == "gaussian":
        return 0.7 * rng.normal(size=shape), 0.7
    if kind == "rademacher":  # values ±1: exactly 1-sub-Gaussian
        return rng.choice([-1.0, 1.0], size=shape), 1.0
    if kind == "uniform":  # in [-1, 1]: 1-sub-Gaussian by Hoeffding
        return rng.uniform(-1, 1, size=shape), 1.0
    if kind == "binary_flip":  # ε = ỹ − (1−2p)y for flips at rate p
        flips = rng.random(shape) < p
        return np.where(flips, -2 * (1 - p), 2 * p), binary_noise_subgaussian_sigma(p)
    raise AssertionError(kind)


# =========================================================================== Hsu–Kakade–Zhang


@pytest.mark.parametrize("kind", ["gaussian", "rademacher", "uniform", "binary_flip"])
@pytest.mark.parametrize("delta", [0.05, 0.3])
def test_hsu_kakade_zhang_holds_monte_carlo(kind: str, delta: float) -> None:
    rng = np.random.default_rng(1)
    K = kernel(1)
    matrices = {
        "random": rng.normal(size=(40, 100)) / 10,
        "smoother": K @ np.linalg.inv(K + 0.5 * np.eye(100)),
        "identity": np.eye(100),
    }
    eps, sigma = draw_noise(kind, (100, N_DRAWS), seed=2)
    for name, A in matrices.items():
        norms = np.linalg.norm(A @ eps, axis=0)
        failures = float(np.mean(norms > hsu_kakade_zhang_bound(A, sigma, delta)))
        assert failures <= max_failure_rate(delta), (name, failures)


def test_hsu_kakade_zhang_monte_carlo_has_power() -> None:
    """The check fails when σ is too small: 0.8σ for Gaussian noise, and the paper's √p for flips."""
    eps, sigma = draw_noise("gaussian", (100, N_DRAWS), seed=3)
    norms = np.linalg.norm(eps, axis=0)
    assert np.mean(norms > hsu_kakade_zhang_bound(np.eye(100), 0.8 * sigma, 0.1)) > max_failure_rate(0.1)
    p = 0.05
    eps, _ = draw_noise("binary_flip", (100, N_DRAWS), seed=4, p=p)
    norms = np.linalg.norm(eps, axis=0)
    # σ = √p (the proof's "O(√p)" with constant 1) is not a valid parameter: the tail bound breaks
    assert np.mean(norms > hsu_kakade_zhang_bound(np.eye(100), math.sqrt(p), 0.1)) > 0.5


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 1000),
    sigma=st.floats(0.01, 10.0),
    d1=st.floats(0.001, 0.99),
    d2=st.floats(0.001, 0.99),
    c=st.floats(-5.0, 5.0).filter(lambda v: abs(v) > 1e-3),
)
def test_hsu_kakade_zhang_invariants(seed: int, sigma: float, d1: float, d2: float, c: float) -> None:
    A = np.random.default_rng(seed).normal(size=(6, 9))
    lo, hi = sorted((d1, d2))
    # smaller δ -> larger bound; linear in σ; |c|-homogeneous in A; at least σ‖A‖_F
    assert hsu_kakade_zhang_bound(A, sigma, lo) >= hsu_kakade_zhang_bound(A, sigma, hi)
    assert hsu_kakade_zhang_bound(A, sigma, d1) == pytest.approx(sigma * hsu_kakade_zhang_bound(A, 1.0, d1))
    assert hsu_kakade_zhang_bound(c * A, sigma, d1) == pytest.approx(abs(c) * hsu_kakade_zhang_bound(A, sigma, d1))
    assert hsu_kakade_zhang_bound(A, sigma, d1) >= sigma * np.linalg.norm(A, "fro") * (1 - 1e-12)


# =========================================================================== Lemmas C.1 and C.2


def _clean_labels(kind: str, seed: int) -> tuple[np.ndarray, float]:
    """(clean labels y ∈ [-1, 1]) for the noise kind: ±(1-2p) for binary flips."""
    y = binary_labels(seed)
    return ((1 - 2 * 0.05) * y, 0.05) if kind == "binary_flip" else (0.8 * y, 0.0)


@pytest.mark.parametrize("kind", ["gaussian", "binary_flip", "uniform"])
@pytest.mark.parametrize("lam", [0.3, 2.0])
def test_lemma_c1_holds_monte_carlo(kind: str, lam: float) -> None:
    K = kernel(5)
    y, _ = _clean_labels(kind, 6)
    eps, sigma = draw_noise(kind, (100, N_DRAWS), seed=7)
    noisy = y[:, None] + eps
    train = krr_predict(K, noisy, lam)  # all draws at once: one column per draw
    err = np.linalg.norm(train - y[:, None], axis=0)
    for delta in (0.05, 0.3):
        failures = float(np.mean(err > lemma_c1_bound(K, y, lam, sigma, delta).total))
        assert failures <= max_failure_rate(delta)


@pytest.mark.parametrize("kind", ["gaussian", "binary_flip", "rademacher"])
@pytest.mark.parametrize("lam", [0.3, 2.0])
def test_lemma_c2_holds_monte_carlo(kind: str, lam: float) -> None:
    K = kernel(8)
    y, _ = _clean_labels(kind, 9)
    eps, sigma = draw_noise(kind, (100, N_DRAWS), seed=10)
    alpha = krr_coefficients(K, y[:, None] + eps, lam)
    norms = np.sqrt(np.einsum("it,ij,jt->t", alpha, K, alpha))
    assert norms[0] == pytest.approx(krr_rkhs_norm(K, y + eps[:, 0], lam))
    for delta in (0.05, 0.3):
        failures = float(np.mean(norms > lemma_c2_bound(K, y, lam, sigma, delta).total))
        assert failures <= max_failure_rate(delta)


def test_lemma_c1_deterministic_part_is_exact_without_noise() -> None:
    """With σ = 0 the lemma is deterministic: ‖f*(X) − y‖ ≤ (λ/2)√(yᵀK⁻¹y), with near-equality possible."""
    K = kernel(11)
    y = 0.9 * binary_labels(12)
    for lam in (0.1, 1.0, 10.0):
        lhs = np.linalg.norm(krr_predict(K, y, lam) - y)
        assert lhs <= lemma_c1_bound(K, y, lam, 0.0, 0.5).total * (1 + 1e-12)
    # equality case of AM-GM: y along an eigenvector with eigenvalue s = λ²
    s, U = np.linalg.eigh(K)
    lam = math.sqrt(s[50])
    lhs = np.linalg.norm(krr_predict(K, U[:, 50], lam) - U[:, 50])
    assert lhs == pytest.approx(lemma_c1_bound(K, U[:, 50], lam, 0.0, 0.5).total, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(
    lam=st.floats(0.05, 20.0),
    sigma=st.floats(0.0, 3.0),
    d1=st.floats(0.001, 0.99),
    d2=st.floats(0.001, 0.99),
    a=st.floats(0.01, 100.0),
)
def test_lemma_invariants(lam: float, sigma: float, d1: float, d2: float, a: float) -> None:
    K = kernel(13, n=20, P=40)
    y = 0.5 * binary_labels(14, n=20)
    lo, hi = sorted((d1, d2))
    for lemma in (lemma_c1_bound, lemma_c2_bound):
        assert lemma(K, y, lam, sigma, lo).total >= lemma(K, y, lam, sigma, hi).total
        assert lemma(K, y, lam, sigma + 0.1, d1).total >= lemma(K, y, lam, sigma, d1).total
    c1 = lemma_c1_bound(K, y, lam, sigma, d1)
    c1_2 = lemma_c1_bound(K, y, 2 * lam, sigma, d1)
    assert c1_2.bias == pytest.approx(2 * c1.bias) and c1_2.noise == pytest.approx(c1.noise / 2)
    # (K, λ) -> (aK, √a λ): KRR predictions unchanged, Lemma C.1 unchanged, RKHS norms scale 1/√a
    assert lemma_c1_bound(a * K, y, math.sqrt(a) * lam, sigma, d1).total == pytest.approx(c1.total)
    c2 = lemma_c2_bound(K, y, lam, sigma, d1).total
    assert lemma_c2_bound(a * K, y, math.sqrt(a) * lam, sigma, d1).total == pytest.approx(c2 / math.sqrt(a))
    assert krr_rkhs_norm(a * K, y, math.sqrt(a) * lam) == pytest.approx(krr_rkhs_norm(K, y, lam) / math.sqrt(a))


# =========================================================================== data quantities


def test_complexity_matches_a_direct_solve_and_per_column() -> None:
    K = kernel(15, n=30, P=60)
    Y = np.random.default_rng(16).normal(size=(30, 3))
    direct = np.array([Y[:, h] @ np.linalg.solve(K, Y[:, h]) for h in range(3)])
    np.testing.assert_allclose(complexity(K, Y), direct, rtol=1e-10)
    assert complexity(K, Y[:, 1]) == pytest.approx(direct[1], rel=1e-10)
    assert complexity(7.0 * K, Y[:, 1]) == pytest.approx(direct[1] / 7.0, rel=1e-10)
    assert ridge_complexity(K, Y[:, 1], 0.5) < complexity(K, Y[:, 1])
    alpha = np.linalg.solve(K, Y[:, 0])
    assert rkhs_norm(K, alpha) ** 2 == pytest.approx(direct[0], rel=1e-9)


def test_complexity_needs_positive_definite_kernel() -> None:
    K = kernel(17, n=30, P=5)
    with pytest.raises(ValueError, match="positive definite"):
        complexity(K, np.ones(30))


def test_a_rank_deficient_kernel_is_diagnosed_with_its_rank_and_the_remedies(tmp_path) -> None:
    """An NTK-like K = Z Zᵀ with P = 12 features for n = 40 points (rank 12): the dense route and the out-of-core
    one both say K is singular, the dense one with its numerical rank against n (checked by NumPy's
    matrix_rank), both with the remedies; a ridge λ > 0 then works. A K with a negative eigenvalue is called not
    positive semi-definite instead."""
    Z = np.random.default_rng(0).normal(size=(40, 12))
    K = Z @ Z.T
    assert np.linalg.matrix_rank(K) == 12
    with pytest.raises(ValueError, match=r"numerical rank is 12 of n = 40.*P < n.*a ridge λ > 0"):
        complexity(K, np.ones(40))
    np.save(tmp_path / "K.npy", K)
    with pytest.raises(ValueError, match=r"singular to working precision.*P < n.*a ridge λ > 0"):
        complexity(str(tmp_path / "K.npy"), np.ones(40))
    assert ridge_complexity(K, np.ones(40), 1.0) > 0
    indefinite = K - 5.0 * np.eye(40)
    with pytest.raises(ValueError, match="not even positive semi-definite: its smallest eigenvalue is -5"):
        complexity(indefinite, np.ones(40))


@settings(max_examples=40, deadline=None)
@given(k=st.integers(2, 12), r=st.floats(0.0, 1.0))
def test_gap_symmetric_noise_formula(k: int, r: float) -> None:
    assert gap(symmetric_P(k, r)) == pytest.approx(1 - r * k / (k - 1), abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 8))
def test_gap_invariant_under_relabelling(seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    P = rng.random((k, k)) + 3 * np.eye(k)
    P /= P.sum(axis=0)
    perm = rng.permutation(k)
    assert gap(P[np.ix_(perm, perm)]) == pytest.approx(gap(P), abs=1e-12)
    brute = min(P[c, c] - P[d, c] for c in range(k) for d in range(k) if d != c)
    assert gap(P) == pytest.approx(brute, abs=1e-12)


def test_gap_pair_flip() -> None:
    k, r = 5, 0.3
    P = (1 - r) * np.eye(k) + r * np.roll(np.eye(k), 1, axis=0)
    assert gap(P) == pytest.approx(1 - 2 * r)


def test_q_matrix_is_p_times_one_hot() -> None:
    P = symmetric_P(4, 0.2)
    labels = np.array([0, 3, 1, 1, 2])
    Y = np.eye(4)[:, labels]  # one-hot columns, the paper's K × n layout
    np.testing.assert_allclose(q_matrix(P, labels), P @ Y)
    np.testing.assert_allclose(q_matrix(P, Y), P @ Y)
    np.testing.assert_allclose(q_matrix(P, labels).sum(axis=0), 1.0)


# =========================================================================== sub-Gaussian constants


@settings(max_examples=30, deadline=None)
@given(p=st.floats(1e-8, 0.4999))
def test_binary_sigma_closed_form_matches_the_mgf(p: float) -> None:
    numeric = subgaussian_sigma_numeric([2 * p, -2 * (1 - p)], [1 - p, p])
    assert binary_noise_subgaussian_sigma(p) == pytest.approx(numeric, rel=1e-6)
    # and it is a valid parameter: the MGF inequality holds on a grid of s
    sigma = binary_noise_subgaussian_sigma(p)
    s = np.linspace(-40, 40, 801)
    log_mgf = np.logaddexp(np.log1p(-p) + 2 * p * s, np.log(p) - 2 * (1 - p) * s)
    assert np.all(log_mgf <= s**2 * sigma**2 / 2 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(p1=st.floats(0.0, 0.4999), p2=st.floats(0.0, 0.4999))
def test_binary_sigma_bounds_and_monotonicity(p1: float, p2: float) -> None:
    lo, hi = sorted((p1, p2))
    s_lo, s_hi = binary_noise_subgaussian_sigma(lo), binary_noise_subgaussian_sigma(hi)
    assert s_lo <= s_hi + 1e-12
    std = 2 * math.sqrt(lo * (1 - lo))
    assert std - 1e-12 <= s_lo <= 1.0  # at least the standard deviation, at most range/2 (Hoeffding)


def test_binary_sigma_is_not_order_sqrt_p() -> None:
    """The paper's σ = O(√p) fails: σ_p/√p grows without bound, σ_p ~ √(2/log(1/p))."""
    ps = np.array([1e-2, 1e-4, 1e-8, 1e-16])
    sig = np.array([binary_noise_subgaussian_sigma(p) for p in ps])
    ratio = sig / np.sqrt(ps)
    assert np.all(np.diff(ratio) > 0) and ratio[-1] > 1e6
    np.testing.assert_allclose(sig / np.sqrt(2 / np.log(1 / ps)), 1.0, atol=0.02)
    assert binary_noise_subgaussian_sigma(0.0) == 0.0
    assert binary_noise_subgaussian_sigma(0.4999999) == pytest.approx(1.0, abs=1e-6)


@settings(max_examples=30, deadline=None)
@given(q=st.floats(1e-9, 1 - 1e-9))
def test_centred_bernoulli_sigma_symmetry_and_hoeffding(q: float) -> None:
    # (the range keeps 1 - q distinct from 1 in floating point: σ -> 0 only like 1/√log(1/q))
    s = centred_bernoulli_subgaussian_sigma(q)
    assert s == pytest.approx(centred_bernoulli_subgaussian_sigma(1 - q), rel=1e-6)
    assert math.sqrt(q * (1 - q)) - 1e-12 <= s <= 0.5


def test_multiclass_sigma_is_at_most_one_half() -> None:
    P = symmetric_P(4, 0.3)
    sig = multiclass_noise_subgaussian_sigma(P)
    assert np.all(sig <= 0.5) and sig.shape == (4,)
    # each coordinate is a centred Bernoulli: check against the MGF numerically
    q = 0.7
    assert sig[0] == pytest.approx(subgaussian_sigma_numeric([1 - q, -q], [q, 1 - q]), rel=1e-6)
    half = np.array([[0.5, 0.2], [0.5, 0.8]])
    assert multiclass_noise_subgaussian_sigma(half)[0] == pytest.approx(0.5)


# =========================================================================== Theorems 5.1–5.3


def test_theorem_5_1_explicit_constants_match_the_printed_shape() -> None:
    K = kernel(20)
    y = 0.7 * binary_labels(21)
    lam, sigma, delta = 2.0, 0.4, 0.1
    b = theorem_5_1_bound(K, y, lam, sigma, delta)
    n, tr = 100, np.trace(K)
    c = complexity(K, y)
    # λ + O(1) with O(1) = 4√(tr K / n)
    assert b.train_bias + b.rademacher_signal <= (lam + 4 * math.sqrt(tr / n)) / 2 * math.sqrt(c / n) * (1 + 1e-12)
    # O(σ/λ) = (5σ/(2λ))√(tr K / n)
    assert b.train_noise + b.rademacher_noise == pytest.approx(5 * sigma / (2 * lam) * math.sqrt(tr / n))
    assert b.net_size == math.ceil(math.sqrt(n) / lam) + 1
    assert b.total == pytest.approx(sum(getattr(b, f) for f in BOUND_TERMS))  # total adds exactly these


@settings(max_examples=25, deadline=None)
@given(
    lam=st.floats(0.1, 30.0),
    sigma=st.floats(0.0, 2.0),
    d1=st.floats(0.001, 0.99),
    d2=st.floats(0.001, 0.99),
)
def test_theorem_5_1_monotone_in_delta_and_sigma(lam: float, sigma: float, d1: float, d2: float) -> None:
    K = kernel(22, n=30, P=60)
    y = 0.5 * binary_labels(23, n=30)
    lo, hi = sorted((d1, d2))
    for f in (theorem_5_1_bound, theorem_5_1_printed):
        assert f(K, y, lam, sigma, lo).total >= f(K, y, lam, sigma, hi).total - 1e-12
        assert f(K, y, lam, sigma + 0.1, d1).total >= f(K, y, lam, sigma, d1).total
    pr1, pr2 = theorem_5_1_printed(K, y, lam, sigma, d1), theorem_5_1_printed(K, y, 2 * lam, sigma, d1)
    assert pr2.leading - pr1.leading == pytest.approx(lam / 2 * math.sqrt(complexity(K, y) / 30))
    assert pr2.noise == pytest.approx(pr1.noise / 2)


@settings(max_examples=40, deadline=None)
@given(p=st.floats(0.0, 0.49), u1=st.floats(-3, 3), u2=st.floats(-3, 3), y=st.sampled_from([-1.0, 1.0]))
def test_ramp_loss_properties(p: float, u1: float, u2: float, y: float) -> None:
    """The facts Appendix C.2 needs: 1-Lipschitz, ℓ(ȳ, ȳ) = 0, range [0, 1−2p], dominates (1−2p)·0-1 loss."""
    s = 1 - 2 * p
    l1, l2 = float(ramp_loss(u1, y, p)), float(ramp_loss(u2, y, p))
    assert abs(l1 - l2) <= abs(u1 - u2) * (1 + 1e-9) + 1e-12
    assert float(ramp_loss(s * y, y, p)) == pytest.approx(0.0, abs=1e-12)
    assert 0.0 <= l1 <= s
    assert l1 >= s * float(np.sign(u1) != y) - 1e-12


def test_theorem_5_2_reduces_to_5_1_without_noise() -> None:
    K = kernel(24)
    y = binary_labels(25)
    b = theorem_5_2_bound(K, y, 1.5, 0.0, 0.1)
    assert b.sigma == 0.0 and b.rescale == 1.0
    assert b.total == pytest.approx(theorem_5_1_bound(K, y, 1.5, 0.0, 0.1).total)


def test_theorem_5_2_uses_the_true_sigma_and_rescaling() -> None:
    K = kernel(26)
    y = binary_labels(27)
    p = 0.2
    b = theorem_5_2_bound(K, y, 3.0, p, 0.05)
    assert b.sigma == pytest.approx(binary_noise_subgaussian_sigma(p)) and b.sigma > b.sigma_paper
    assert b.rescale == pytest.approx(1 / (1 - 2 * p))
    ref = theorem_5_1_bound(K, (1 - 2 * p) * y, 3.0, b.sigma, 0.05)
    # the same training/Rademacher terms as Theorem 5.1 on the rescaled labels; the
    # ramp loss has range 1-2p so only the concentration (and the net size) differ
    assert b.additive.train_noise == pytest.approx(ref.train_noise)
    assert b.additive.rademacher_signal == pytest.approx(ref.rademacher_signal)
    assert b.additive.concentration < ref.concentration
    printed = theorem_5_2_printed(K, y, 3.0, p, 0.05)
    assert printed.noise == pytest.approx(math.sqrt(p) / 3.0 / (1 - 2 * p))
    assert printed.noise_tail == 0.0


def test_theorem_5_3_is_a_sum_of_theorem_5_1_over_outputs() -> None:
    K = kernel(28)
    labels = np.random.default_rng(29).integers(0, 3, size=100)
    P = symmetric_P(3, 0.3)
    b = theorem_5_3_bound(K, labels, P, 2.0, 0.1)
    Q = q_matrix(P, labels)
    expect = sum(theorem_5_1_bound(K, Q[h], 2.0, float(b.sigmas[h]), 0.1 / 3).total for h in range(3))
    assert b.gap == pytest.approx(1 - 0.3 * 3 / 2)
    assert b.total == pytest.approx(expect / b.gap)
    printed = theorem_5_3_printed(K, labels, P, 2.0, 0.1)
    assert printed.noise == pytest.approx(3 / 2.0 / b.gap)
    lead = sum(math.sqrt(c / 100) for c in complexity(K, Q.T)) * (2.0 + 1) / 2 / b.gap
    assert printed.leading == pytest.approx(lead)


def test_theorem_5_3_gets_worse_as_gap_shrinks() -> None:
    K = kernel(30)
    labels = np.random.default_rng(31).integers(0, 4, size=100)
    totals = [theorem_5_3_printed(K, labels, symmetric_P(4, r), 2.0, 0.1).total for r in (0.0, 0.3, 0.6, 0.74)]
    assert np.all(np.diff(totals) > 0)


# =========================================================================== bad input


def test_bad_input_is_refused_with_clear_errors() -> None:
    K = kernel(32, n=10, P=20)
    y = binary_labels(33, n=10)
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\)"):
        theorem_5_1_bound(K, 0.5 * y, 1.0, 0.5, 1.0)
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\)"):
        hsu_kakade_zhang_bound(np.eye(3), 1.0, 0.0)
    with pytest.raises(ValueError, match=r"\[0, 1/2\)"):
        theorem_5_2_bound(K, y, 1.0, 0.5, 0.1)
    with pytest.raises(ValueError, match=r"\[0, 1/2\)"):
        binary_noise_subgaussian_sigma(-0.1)
    with pytest.raises(ValueError, match="lam must be > 0"):
        lemma_c1_bound(K, y, 0.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="lam must be > 0"):
        theorem_5_1_printed(K, 0.5 * y, -2.0, 1.0, 0.1)
    with pytest.raises(ValueError, match=r"sigma must lie in \[0.0, inf\]"):
        lemma_c2_bound(K, y, 1.0, -1.0, 0.1)
    with pytest.raises(ValueError, match="symmetric"):
        complexity(K + np.triu(np.ones((10, 10)), 1), y)
    with pytest.raises(ValueError, match="square"):
        complexity(np.ones((10, 9)), y)
    bad = K.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        lemma_c1_bound(bad, y, 1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match=r"y must have n = 10 rows"):
        lemma_c2_bound(K, np.ones(9), 1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        theorem_5_1_bound(K, 2 * y, 1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        theorem_5_2_bound(K, 0.5 * y, 1.0, 0.1, 0.1)


def test_bad_transition_matrices_are_refused() -> None:
    K = kernel(34, n=10, P=20)
    labels = np.arange(10) % 3
    with pytest.raises(ValueError, match="column-stochastic.*transpose"):
        gap(np.array([[0.9, 0.1], [0.3, 0.7]]))
    with pytest.raises(ValueError, match="not identifiable"):
        theorem_5_3_bound(K, labels % 2, np.full((2, 2), 0.5), 1.0, 0.1)  # gap exactly 0
    with pytest.raises(ValueError, match="not identifiable"):
        theorem_5_3_printed(K, labels, symmetric_P(3, 0.9), 1.0, 0.1)
    assert gap(symmetric_P(3, 0.9)) < 0  # gap itself reports the value
    with pytest.raises(ValueError, match=r"labels must lie in"):
        theorem_5_3_bound(K, labels + 1, symmetric_P(3, 0.1), 1.0, 0.1)
    with pytest.raises(TypeError, match="integer"):
        q_matrix(symmetric_P(3, 0.1), labels + 0.5)
    np.testing.assert_array_equal(  # integral floats are labels (as in ntk_core.noise)
        q_matrix(symmetric_P(3, 0.1), labels.astype(float)), q_matrix(symmetric_P(3, 0.1), labels)
    )
    with pytest.raises(ValueError, match="n = 10 entries"):
        theorem_5_3_bound(K, labels[:5], symmetric_P(3, 0.1), 1.0, 0.1)


# =========================================================================== values by hand
#
# Each term of each bound against an independent numpy transcription of its formula (Appendix C),
# on a small case chosen so that confusable things differ: λ ∉ {1} (λ vs λ²), δ/3 vs δ,
# ε-net sizes where ceil and floor differ, a non-symmetric P (P vs Pᵀ, rows vs columns).


def _small_case(seed: int = 40, n: int = 5, P: int = 9) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, P))
    K = Z @ Z.T / P + 0.1 * np.eye(n)  # positive definite, tr K ≠ n
    y = np.array([0.9, -0.4, 0.7, -1.0, 0.2])[:n]
    return K, y


def _hand_5_1(K, y, lam, sigma, delta, eps, label_bound=1.0, loss_bound=1.0) -> dict:
    """Theorem 5.1's terms written out from the proof in Appendix C.1 (δ split in three)."""
    n = K.shape[0]
    tr = float(np.trace(K))
    L3 = math.log(3.0 / delta)
    c = float(y @ np.linalg.inv(K) @ y)
    r = float(y @ np.linalg.inv(K + lam * lam * np.eye(n)) @ y)
    N = math.ceil(label_bound * math.sqrt(n) / (lam * eps))
    return {
        "train_bias": lam / 2 * math.sqrt(c / n),
        "train_noise": sigma / (2 * lam) * math.sqrt(tr / n),
        "train_tail": sigma * math.sqrt(2 * L3 / n),
        "rademacher_signal": 2 * math.sqrt(tr) / n * math.sqrt(r),
        "rademacher_noise": 2 * math.sqrt(tr) / n * sigma * math.sqrt(n) / lam,
        "rademacher_tail": 2 * math.sqrt(tr) / n * sigma / lam * math.sqrt(2 * L3),
        "rademacher_net": 2 * math.sqrt(tr) / n * eps,
        "concentration": 3 * loss_bound * math.sqrt(math.log(6 * (N + 1) / delta) / (2 * n)),
        "net_size": N + 1,
        "trace": tr,
    }


def _assert_terms(bound, hand: dict) -> None:
    for name, value in hand.items():
        got = getattr(bound, name)
        assert got == pytest.approx(value, rel=1e-10, abs=1e-14), f"{name}: {got!r} != {value!r}"
    terms = [v for k, v in hand.items() if k not in ("net_size", "trace")]
    assert bound.total == pytest.approx(sum(terms), rel=1e-10)


def _bern_sigma(q: float) -> float:
    """Optimal sub-Gaussian parameter of Bernoulli(q) − q, q ∉ {0, 1/2, 1} (Kearns–Saul)."""
    return math.sqrt((1 - 2 * q) / (2 * math.log((1 - q) / q)))


@pytest.mark.parametrize("sigma, delta", [(1.3, 0.1), (0.4, 0.02)])
def test_hsu_kakade_zhang_identity_by_value(sigma: float, delta: float) -> None:
    """Eq. (12) with A = I (n × n): σ√(n + 2√(n log(1/δ)) + 2 log(1/δ))."""
    n, L = 6, math.log(1 / delta)
    expected = sigma * math.sqrt(n + 2 * math.sqrt(n * L) + 2 * L)
    assert hsu_kakade_zhang_bound(np.eye(n), sigma, delta) == pytest.approx(expected, rel=1e-12)


def test_hsu_kakade_zhang_general_matrix_by_value() -> None:
    """Eq. (12) for a non-square, non-symmetric A, with Σ = AᵀA (not AAᵀ: traces agree, ‖·‖ too, so check
    against Σ built by hand and also a case where tr Σ, tr Σ², ‖Σ‖ all differ from A's own)."""
    A = np.array([[2.0, 0.5, 0.0], [0.0, -1.0, 3.0]])
    sigma, delta = 0.7, 0.1
    L = math.log(1 / delta)
    S = A.T @ A
    expected = sigma * math.sqrt(np.trace(S) + 2 * math.sqrt(np.trace(S @ S) * L) + 2 * np.linalg.norm(S, 2) * L)
    assert hsu_kakade_zhang_bound(A, sigma, delta) == pytest.approx(expected, rel=1e-12)
    # the same number written without the matrix: tr Σ = Σ a_ij², and for A = diag(a): Σ a⁴ and max a²
    a = np.array([0.5, 2.0, 1.5])
    expected_diag = sigma * math.sqrt(np.sum(a**2) + 2 * math.sqrt(np.sum(a**4) * L) + 2 * np.max(a**2) * L)
    assert hsu_kakade_zhang_bound(np.diag(a), sigma, delta) == pytest.approx(expected_diag, rel=1e-12)


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_lemma_c1_and_c2_by_value(lam: float) -> None:
    K, y = _small_case()
    sigma, delta, n = 0.6, 0.1, 5
    L = math.log(1 / delta)
    c1 = lemma_c1_bound(K, y, lam, sigma, delta)
    assert c1.bias == pytest.approx(lam / 2 * math.sqrt(y @ np.linalg.inv(K) @ y), rel=1e-12)
    assert c1.noise == pytest.approx(sigma / (2 * lam) * math.sqrt(np.trace(K)), rel=1e-12)
    assert c1.tail == pytest.approx(sigma * math.sqrt(2 * L), rel=1e-12)
    assert c1.total == pytest.approx(c1.bias + c1.noise + c1.tail)
    c2 = lemma_c2_bound(K, y, lam, sigma, delta)
    assert c2.signal == pytest.approx(math.sqrt(y @ np.linalg.inv(K + lam**2 * np.eye(n)) @ y), rel=1e-12)
    assert c2.noise == pytest.approx(sigma * math.sqrt(n) / lam, rel=1e-12)
    assert c2.tail == pytest.approx(sigma / lam * math.sqrt(2 * L), rel=1e-12)
    assert c2.total == pytest.approx(c2.signal + c2.noise + c2.tail)


def test_data_quantities_by_value() -> None:
    K, y = _small_case()
    lam = 0.7
    Kinv = np.linalg.inv(K)
    R = np.linalg.inv(K + lam**2 * np.eye(5))
    assert complexity(K, y) == pytest.approx(y @ Kinv @ y, rel=1e-12)
    assert ridge_complexity(K, y, lam) == pytest.approx(y @ R @ y, rel=1e-12)
    # λ = 0 is the documented end of the range: the unregularised yᵀK⁻¹y, by an independent solve
    assert ridge_complexity(K, y, 0.0) == pytest.approx(y @ np.linalg.solve(K, y), rel=1e-10)
    alpha = np.array([0.3, -1.0, 0.2, 0.0, 0.5])
    assert rkhs_norm(K, alpha) == pytest.approx(math.sqrt(alpha @ K @ alpha), rel=1e-12)
    assert krr_rkhs_norm(K, y, lam) == pytest.approx(math.sqrt(y @ R @ K @ R @ y), rel=1e-12)


@pytest.mark.parametrize("lam, eps_net", [(0.7, 1.0), (2.5, 1.0), (0.7, 0.3), (2.5, 0.45)])
def test_theorem_5_1_every_term_by_value(lam: float, eps_net: float) -> None:
    K, y = _small_case()
    sigma, delta = 0.6, 0.1
    b = theorem_5_1_bound(K, y, lam, sigma, delta, eps_net=eps_net)
    assert (b.n, b.lam, b.sigma, b.delta) == (5, lam, sigma, delta)
    _assert_terms(b, _hand_5_1(K, y, lam, sigma, delta, eps_net))


def test_theorem_5_1_net_size_rounds_up() -> None:
    """N = ⌈√n/(λε)⌉: with √5/(0.7·0.3) = 10.65, N + 1 = 12 (floor would give 11, round 12, so also 0.45)."""
    K, y = _small_case()
    assert theorem_5_1_bound(K, y, 0.7, 0.6, 0.1, eps_net=0.3).net_size == 12
    assert math.sqrt(5) / (2.5 * 0.45) == pytest.approx(1.98762, rel=1e-5)
    assert theorem_5_1_bound(K, y, 2.5, 0.6, 0.1, eps_net=0.45).net_size == 3  # ⌈1.99⌉ + 1 (floor: 2)
    assert theorem_5_1_bound(K, y, 2.5, 0.6, 0.1, eps_net=0.8).net_size == 3  # ⌈1.118⌉ + 1 (round: 2)


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_theorem_5_2_every_term_by_value(lam: float) -> None:
    K, _ = _small_case()
    y = np.array([1.0, -1.0, -1.0, 1.0, 1.0])
    p, delta = 0.2, 0.1
    b = theorem_5_2_bound(K, y, lam, p, delta, eps_net=0.3)
    sigma_p = math.sqrt(2 * (1 - 2 * p) / math.log((1 - p) / p))
    assert b.p == p and b.sigma == pytest.approx(sigma_p, rel=1e-12)
    assert b.sigma_paper == pytest.approx(math.sqrt(p)) and b.rescale == pytest.approx(1 / (1 - 2 * p))
    s = 1 - 2 * p
    _assert_terms(b.additive, _hand_5_1(K, s * y, lam, sigma_p, delta, 0.3, label_bound=s, loss_bound=s))
    assert b.total == pytest.approx(b.additive.total / s, rel=1e-12)


def test_ramp_loss_by_value() -> None:
    p = 0.2  # s = 0.6, linear part for 0 < u ȳ < s² = 0.36, slope 1/s on ȳ = s y
    u = np.array([-1.0, 0.0, 0.1, 0.3, 0.6, 2.0])
    expected = np.array([0.6, 0.6, 0.6 - 0.1 * 0.6 / 0.6, 0.6 - 0.3, 0.0, 0.0])
    np.testing.assert_allclose(ramp_loss(u, 1.0, p), expected, atol=1e-12)
    np.testing.assert_allclose(ramp_loss(-u, -1.0, p), expected, atol=1e-12)


_P3 = np.array(
    [[0.55, 0.10, 0.05], [0.05, 0.80, 0.15], [0.40, 0.10, 0.80]]
)  # column-stochastic, not symmetric; P[c', c] = Pr[noisy c' | clean c]


def test_gap_q_and_sigmas_with_a_non_symmetric_P() -> None:
    P = _P3
    # gap = min over c of p_cc − max_{c' ≠ c} p_c'c: columns: 0.55−0.40, 0.8−0.1, 0.8−0.15 -> 0.15
    assert gap(P) == pytest.approx(0.15, abs=1e-12)
    rowwise = min(P[c, c] - max(P[c, d] for d in range(3) if d != c) for c in range(3))
    assert rowwise != pytest.approx(0.15)  # the row-wise reading differs: the test tells them apart
    labels = np.array([0, 2, 1, 2, 0])
    Q = q_matrix(P, labels)
    np.testing.assert_allclose(Q, np.stack([P[:, c] for c in labels], axis=1), atol=0)
    Y = np.eye(3)[:, labels]
    np.testing.assert_allclose(q_matrix(P, Y), P @ Y, atol=0)
    sig = multiclass_noise_subgaussian_sigma(P)
    expected = [max(_bern_sigma(P[h, c]) for c in range(3)) for h in range(3)]
    np.testing.assert_allclose(sig, expected, rtol=1e-12)
    assert not np.allclose(expected, [max(_bern_sigma(P[c, h]) for c in range(3)) for h in range(3)])
    assert centred_bernoulli_subgaussian_sigma(0.2) == pytest.approx(math.sqrt(0.6 / (2 * math.log(4))))
    assert binary_noise_subgaussian_sigma(0.2) == pytest.approx(2 * math.sqrt(0.6 / (2 * math.log(4))))


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_theorem_5_3_every_term_by_value(lam: float) -> None:
    K, _ = _small_case()
    P, labels, delta, k = _P3, np.array([0, 2, 1, 2, 0]), 0.1, 3
    b = theorem_5_3_bound(K, labels, P, lam, delta, eps_net=0.3)
    assert b.gap == pytest.approx(0.15, abs=1e-12)
    sig = [max(_bern_sigma(P[h, c]) for c in range(3)) for h in range(3)]
    np.testing.assert_allclose(b.sigmas, sig, rtol=1e-12)
    assert len(b.per_output) == k
    for h in range(k):
        q = np.array([P[h, c] for c in labels])  # row h of P·Y
        _assert_terms(b.per_output[h], _hand_5_1(K, q, lam, sig[h], delta / k, 0.3))
        assert b.per_output[h].delta == pytest.approx(delta / k)
    assert b.total == pytest.approx(sum(o.total for o in b.per_output) / 0.15, rel=1e-12)


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_printed_forms_by_value(lam: float) -> None:
    K, yr = _small_case()
    n, delta, C = 5, 0.1, 1.7
    L = math.log(1 / delta)
    Kinv = np.linalg.inv(K)
    sigma = 0.6
    pr = theorem_5_1_printed(K, yr, lam, sigma, delta, C=C)
    assert pr.theorem == "5.1" and pr.constant == C
    assert pr.leading == pytest.approx((lam + C) / 2 * math.sqrt(yr @ Kinv @ yr / n), rel=1e-12)
    assert pr.noise == pytest.approx(C * sigma / lam, rel=1e-12)
    assert pr.tail == pytest.approx(C * sigma * math.sqrt(L / n), rel=1e-12)
    assert pr.noise_tail == pytest.approx(C * sigma / lam * math.sqrt(L / n), rel=1e-12)
    assert pr.net == pytest.approx(C * math.sqrt(math.log(n / (delta * lam)) / n), rel=1e-12)
    assert pr.total == pytest.approx(pr.leading + pr.noise + pr.tail + pr.noise_tail + pr.net)

    y = np.array([1.0, -1.0, -1.0, 1.0, 1.0])
    p = 0.2
    r = 1 / (1 - 2 * p)
    p2 = theorem_5_2_printed(K, y, lam, p, delta, C=C)
    assert p2.leading == pytest.approx((lam + C) / 2 * math.sqrt(y @ Kinv @ y / n), rel=1e-12)
    assert p2.noise == pytest.approx(r * C * math.sqrt(p) / lam, rel=1e-12)
    assert p2.tail == pytest.approx(r * C * math.sqrt(p * L / n), rel=1e-12)
    assert p2.noise_tail == 0.0
    assert p2.net == pytest.approx(r * C * math.sqrt(math.log(n / (delta * lam)) / n), rel=1e-12)

    labels, k, g = np.array([0, 2, 1, 2, 0]), 3, 0.15
    Lk = math.log(k / delta)
    p3 = theorem_5_3_printed(K, labels, _P3, lam, delta, C=C)
    lead = sum(math.sqrt(q @ Kinv @ q / n) for q in (np.array([_P3[h, c] for c in labels]) for h in range(k)))
    assert p3.leading == pytest.approx((lam + C) / 2 * lead / g, rel=1e-12)
    assert p3.noise == pytest.approx(k * C / lam / g, rel=1e-12)
    assert p3.tail == pytest.approx(k * C * math.sqrt(Lk / n) / g, rel=1e-12)
    assert p3.noise_tail == 0.0
    assert p3.net == pytest.approx(k * C * math.sqrt(math.log(n * k / (delta * lam)) / n) / g, rel=1e-12)


def test_printed_net_term_is_clipped_at_zero() -> None:
    K, y = _small_case()
    assert theorem_5_1_printed(K, y, 80.0, 0.6, 0.1).net == 0.0  # n/(δλ) = 0.625 < 1


# --------------------------------------------------------------------------- issue 28: scale and kernel of the printed forms


def _sphere_kernel(n=60, d=8, seed=0):
    """The infinite-width ReLU NTK on the sphere ‖x‖² = d (tr K/n = O(1)) and ±1 labels."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    x *= np.sqrt(d) / np.linalg.norm(x, axis=1, keepdims=True)
    return relu_ntk(x), np.sign(x[:, 0])


def test_the_printed_forms_warn_when_tr_k_over_n_is_far_from_one():
    K, y = _sphere_kernel()
    n = len(y)
    assert 0.1 <= np.trace(K) / n <= 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the paper's scale: silent
        ok = theorem_5_2_printed(K, y, lam=1.0, p=0.1, delta=0.05)
    assert ok.trace_per_n == pytest.approx(np.trace(K) / n)
    big = 334 / (np.trace(K) / n) * K  # tr K/n = 334, as a network in standard parametrisation
    with pytest.warns(PrintedScaleWarning, match=r"tr K/n = 334.*theorem_5_2_bound"):
        printed = theorem_5_2_printed(big, y, lam=1.0, p=0.1, delta=0.05)
    explicit = theorem_5_2_bound(big, y, lam=1.0, p=0.1, delta=0.05)
    assert printed.total < 1 < explicit.total  # what the warning is about: the printed total looks non-vacuous
    labels = (y > 0).astype(int)
    with pytest.warns(PrintedScaleWarning, match="Theorem 5.3"):
        theorem_5_3_printed(K / 100, labels, symmetric_transition(2, 0.1), lam=1.0, delta=0.05)
    with pytest.warns(PrintedScaleWarning, match="Theorem 5.1"):
        theorem_5_1_printed(big, y, lam=1.0, sigma=0.5, delta=0.05)


def test_theorem_5_3_takes_a_full_kernel_of_the_form_k_kron_identity_and_says_which_kernel_otherwise():
    K, y = _sphere_kernel(n=40)
    labels = (np.arange(40) % 3).astype(int)
    P = symmetric_transition(3, 0.2)
    expected = theorem_5_3_bound(K, labels, P, lam=1.0, delta=0.05).total
    full = np.einsum("ij,hg->ijhg", K, np.eye(3))  # k ⊗ I, as at infinite width
    assert theorem_5_3_bound(full, labels, P, lam=1.0, delta=0.05).total == expected
    # a finite network's full NTK is not k ⊗ I: refused, naming the kernel to pass; that kernel works
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3)).double()
    x = torch.randn(40, 8, dtype=torch.float64)
    network_full = empirical_ntk(net, x, output="full").numpy()
    with pytest.raises(ValueError, match=r"output='trace'\) / number_of_outputs"):
        theorem_5_3_bound(network_full, labels, P, lam=1.0, delta=0.05)
    per_output = empirical_ntk(net, x, output="trace").numpy() / 3
    np.testing.assert_allclose(per_output, np.einsum("ijhh->ij", network_full) / 3, rtol=1e-12)
    assert np.isfinite(theorem_5_3_bound(per_output, labels, P, lam=1.0, delta=0.05).total)


def test_a_bound_says_whether_it_means_anything():
    """The printed form of every theorem's result leads with its total and verdict; the lower limit is the
    leading terms' minimum over λ (an independent route: leading_minimum with the theorem's C and σ), below the
    total at every λ of a grid; "vacuous at every λ" exactly when that limit is ≥ 1; the factor that would make it
    non-vacuous is the limit to the fourth power, checked by shrinking yᵀK⁻¹y/n by it."""
    from ntk_core import infinite
    from ntk_core.noise import symmetric_transition

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 10))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    K = infinite.setting1_kernel(x)
    y = np.sign(x[:, 0] + 0.01)
    n, trace, p = 300, float(np.trace(K)), 0.2
    b = bounds.theorem_5_2_bound(K, y, 1.0, p, 0.05)
    expected = bounds.leading_minimum(
        complexity(K, y), n, trace, bounds.binary_noise_subgaussian_sigma(p) / (1 - 2 * p)
    )
    assert b.lower_limit == pytest.approx(expected, rel=1e-12)
    grid = [bounds.theorem_5_2_bound(K, y, lam, p, 0.05).total for lam in np.geomspace(0.05, 50, 40)]
    assert min(grid) >= b.lower_limit
    assert b.lower_limit >= 1 and b.vacuous and b.verdict == "vacuous at every λ"
    text = str(b)
    assert text.startswith(f"Theorem 5.2: Pr[sgn f*(x) ≠ y] ≤ {b.total:.4g}: vacuous at every λ")
    factor = b.lower_limit**4
    assert f"{factor:.3g} times smaller" in text
    # the limit scales as (yᵀK⁻¹y/n)^(1/4): labels scaled by 1/√factor (C by 1/factor) put it exactly at 1
    t1 = bounds.theorem_5_1_bound(K, 0.5 * y, 1.0, 0.2, 0.05)
    shrunk = bounds.theorem_5_1_bound(K, 0.5 * y / math.sqrt(t1.lower_limit**4), 1.0, 0.2, 0.05)
    assert shrunk.lower_limit == pytest.approx(1.0, rel=1e-9)
    assert "measured 0.085: the bound holds (says nothing: the bound is vacuous)" in b.report(measured=0.085)
    # a bound vacuous only at this λ says another λ may help; a non-vacuous one says so
    assert t1.verdict == "vacuous at this λ" and "another λ may help" in str(t1)
    small = bounds.theorem_5_1_bound(K, 0.01 * y, 0.1, 0.001, 0.05)
    assert not small.vacuous and small.verdict == "non-vacuous"
    assert str(small).splitlines()[0].endswith(": non-vacuous")
    assert "VIOLATED" in small.report(measured=small.total + 0.1)
    c = np.arange(n) % 3
    P = symmetric_transition(3, 0.2)
    m = bounds.theorem_5_3_bound(K, c, P, 1.0, 0.05)
    Q = bounds.q_matrix(P, c)
    expected = bounds.leading_minimum(
        complexity(K, Q.T), n, trace, bounds.multiclass_noise_subgaussian_sigma(P)
    ) / bounds.gap(P)
    assert m.lower_limit == pytest.approx(expected, rel=1e-12) and str(m).startswith("Theorem 5.3")


def test_non_vacuous_n_reads_the_growth_off_measured_sizes():
    # a limit falling like n^(-1/4) from 2 at n = 1,000 reaches 1 at 16,000
    ns = [1000, 2000, 4000]
    limits = [2.0 * (k / 1000) ** -0.25 for k in ns]
    assert bounds.non_vacuous_n(ns, limits) == pytest.approx(16_000, rel=1e-9)
    assert bounds.non_vacuous_n([100, 200], [0.9, 0.8]) == 100
    assert bounds.non_vacuous_n([100, 200], [2.0, 2.1]) == math.inf
    with pytest.raises(ValueError, match="at least two increasing"):
        bounds.non_vacuous_n([100], [2.0])
