"""Tests for ntk_core.bounds: the terms of Theorems 5.1-5.3 and Lemmas C.1, C.2.

Monte Carlo acceptance rule (used by every `*_holds_*` test): with N independent
draws, the observed failure frequency must be at most δ + 3·√(δ(1−δ)/N), i.e.
δ plus three binomial standard errors (one-sided normal approximation; a
correct bound fails this with probability about 0.1%). "Power" tests show the
same check does fail when a constant is made too small.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntk_core.bounds import (
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
from ntk_core.krr import krr_coefficients, krr_predict

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
    assert b.total == pytest.approx(
        sum(
            getattr(b, f)
            for f in (
                "train_bias", "train_noise", "train_tail", "rademacher_signal",
                "rademacher_noise", "rademacher_tail", "rademacher_net", "concentration",
            )
        )
    )


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
    with pytest.raises(ValueError, match="open interval"):
        theorem_5_1_bound(K, 0.5 * y, 1.0, 0.5, 1.0)
    with pytest.raises(ValueError, match="open interval"):
        hsu_kakade_zhang_bound(np.eye(3), 1.0, 0.0)
    with pytest.raises(ValueError, match=r"\[0, 1/2\)"):
        theorem_5_2_bound(K, y, 1.0, 0.5, 0.1)
    with pytest.raises(ValueError, match=r"\[0, 1/2\)"):
        binary_noise_subgaussian_sigma(-0.1)
    with pytest.raises(ValueError, match="lam must be > 0"):
        lemma_c1_bound(K, y, 0.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="lam must be > 0"):
        theorem_5_1_printed(K, 0.5 * y, -2.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        lemma_c2_bound(K, y, 1.0, -1.0, 0.1)
    with pytest.raises(ValueError, match="symmetric"):
        complexity(K + np.triu(np.ones((10, 10)), 1), y)
    with pytest.raises(ValueError, match="square"):
        complexity(np.ones((10, 9)), y)
    bad = K.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        lemma_c1_bound(bad, y, 1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match=r"shape \(n,\)"):
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
        q_matrix(symmetric_P(3, 0.1), labels.astype(float))
    with pytest.raises(ValueError, match="n = 10 entries"):
        theorem_5_3_bound(K, labels[:5], symmetric_P(3, 0.1), 1.0, 0.1)
