"""ntk_core.noise: realised rates match p and P, draws are reproducible, bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from ntk_core import noise

N = 200_000


def test_flip_rate_matches_p_within_binomial_error():
    y = np.where(np.random.default_rng(0).random(N) < 0.5, 1, -1)
    for i, p in enumerate([0.0, 0.05, 0.2, 0.35, 0.49]):
        flips = int((noise.flip_binary(y, p, seed=i) != y).sum())
        sd = np.sqrt(N * p * (1 - p))
        assert abs(flips - N * p) <= 5 * sd + 1e-9, (p, flips)


def test_flips_are_independent_of_the_label():
    y = np.repeat([1, -1], N // 2)
    flipped = noise.flip_binary(y, 0.3, seed=3) != y
    pos, neg = flipped[: N // 2].mean(), flipped[N // 2 :].mean()
    assert abs(pos - neg) < 5 * np.sqrt(2 * 0.3 * 0.7 / (N // 2))


def test_flip_binary_is_reproducible_and_seed_dependent():
    y = np.ones(1000, dtype=np.int64)
    a = noise.flip_binary(y, 0.3, seed=11)
    assert np.array_equal(a, noise.flip_binary(y, 0.3, seed=11))
    assert np.array_equal(a, noise.flip_binary(y, 0.3, seed=np.random.default_rng(11)))
    assert not np.array_equal(a, noise.flip_binary(y, 0.3, seed=12))
    assert a.dtype == np.int64 and set(np.unique(a)) <= {-1, 1}


def test_exact_mode_flips_exactly_round_pn():
    y = np.ones(1001, dtype=np.int64)
    for p in (0.0, 0.1, 0.25, 0.4):
        assert int((noise.flip_binary(y, p, seed=1, exact=True) == -1).sum()) == round(p * 1001)


@pytest.mark.parametrize("p", [-0.1, 0.5, 0.7, float("nan"), float("inf")])
def test_invalid_flip_rate_is_refused(p):
    with pytest.raises(ValueError, match=r"\[0, 1/2\)|finite"):
        noise.flip_binary(np.ones(3, dtype=int), p, seed=0)


def test_flip_binary_type_and_label_errors():
    with pytest.raises(TypeError, match="real number"):
        noise.flip_binary(np.ones(3, dtype=int), "0.1", seed=0)
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        noise.flip_binary(np.array([0, 1, 1]), 0.1, seed=0)
    with pytest.raises(TypeError, match="seeded"):
        noise.flip_binary(np.ones(3, dtype=int), 0.1, seed=None)
    with pytest.raises(ValueError, match="1-d"):
        noise.flip_binary(np.ones((3, 2), dtype=int), 0.1, seed=0)


def test_corrupt_matches_transition_matrix():
    K = 4
    P = np.array([[0.7, 0.1, 0.0, 0.25], [0.1, 0.6, 0.2, 0.25], [0.1, 0.3, 0.8, 0.25], [0.1, 0.0, 0.0, 0.25]])
    clean = np.repeat(np.arange(K), N // K)
    noisy = noise.corrupt(clean, P, seed=5)
    P_hat = noise.empirical_transition(clean, noisy, K)
    n_per_class = N // K
    for c in range(K):
        for c2 in range(K):
            k = int(round(P_hat[c2, c] * n_per_class))
            if P[c2, c] == 0:
                assert k == 0
            else:  # two-sided exact binomial test, Bonferroni over the 16 entries
                assert binomtest(k, n_per_class, P[c2, c]).pvalue > 1e-3 / K**2, (c2, c)


def test_corrupt_is_reproducible():
    clean = np.arange(10).repeat(50)
    P = noise.symmetric_transition(10, 0.5)
    assert np.array_equal(noise.corrupt(clean, P, seed=2), noise.corrupt(clean, P, seed=2))
    assert not np.array_equal(noise.corrupt(clean, P, seed=2), noise.corrupt(clean, P, seed=3))


def test_corrupt_rejects_bad_matrices_and_labels():
    clean = np.array([0, 1, 2])
    rows_stochastic = np.array([[0.8, 0.2, 0.0], [0.1, 0.8, 0.1], [0.5, 0.0, 0.5]])
    with pytest.raises(ValueError, match="column-stochastic.*transpose"):
        noise.corrupt(clean, rows_stochastic, seed=0)
    with pytest.raises(ValueError, match="square"):
        noise.corrupt(clean, np.ones((2, 3)) / 2, seed=0)
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        noise.corrupt(clean, np.array([[1.5, 0.0], [-0.5, 1.0]]), seed=0)
    with pytest.raises(ValueError, match="NaN"):
        noise.corrupt(clean, np.array([[np.nan, 0.0], [1.0, 1.0]]), seed=0)
    with pytest.raises(ValueError, match=r"\{0, ..., 1\}"):
        noise.corrupt(clean, np.eye(2), seed=0)
    with pytest.raises(TypeError, match="integer labels"):
        noise.corrupt(np.array([0.5, 1.0]), np.eye(2), seed=0)


def test_symmetric_transition_structure():
    P = noise.symmetric_transition(10, 0.4)
    np.testing.assert_allclose(P.sum(axis=0), 1.0)
    np.testing.assert_allclose(np.diag(P), 0.6)
    off = P[~np.eye(10, dtype=bool)]
    np.testing.assert_allclose(off, 0.4 / 9)
    # a corrupted label is never the clean one: it is uniform over the other classes
    clean = np.zeros(N, dtype=int)
    noisy = noise.corrupt(clean, P, seed=1)
    counts = np.bincount(noisy[noisy != 0], minlength=10)[1:]
    assert counts.min() > 0 and counts.max() / counts.min() < 1.1


@settings(max_examples=50, deadline=None)
@given(K=st.integers(2, 12), r=st.floats(0.0, 1.0))
def test_symmetric_gap_formula(K, r):
    P = noise.symmetric_transition(K, r)
    gap = min(P[c, c] - P[c2, c] for c in range(K) for c2 in range(K) if c2 != c)
    assert gap == pytest.approx(1 - r - r / (K - 1), abs=1e-12)


def test_pairflip_transition():
    P = noise.pairflip_transition(5, 0.3)
    np.testing.assert_allclose(P.sum(axis=0), 1.0)
    assert P[1, 0] == pytest.approx(0.3) and P[0, 4] == pytest.approx(0.3) and P[0, 0] == pytest.approx(0.7)
    with pytest.raises(ValueError, match="num_classes must be an int >= 2"):
        noise.pairflip_transition(1, 0.1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        noise.symmetric_transition(3, 1.2)


def test_empirical_transition_marks_absent_classes():
    P_hat = noise.empirical_transition([0, 0, 1], [0, 1, 1], 3)
    np.testing.assert_allclose(P_hat[:, 0], [0.5, 0.5, 0.0])
    assert np.all(np.isnan(P_hat[:, 2]))
    with pytest.raises(ValueError, match="same shape"):
        noise.empirical_transition([0, 1], [0], 2)


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (480, 1000)])
def test_wilson_interval_matches_scipy(k, n):
    low, high = noise.wilson_interval(k, n, confidence=0.99)
    ref = binomtest(k, n).proportion_ci(0.99, method="wilson")
    assert low == pytest.approx(ref.low, abs=1e-12) and high == pytest.approx(ref.high, abs=1e-12)
    with pytest.raises(ValueError):
        noise.wilson_interval(11, 10)


# --------------------------------------------------------------------------- values by hand


@pytest.mark.parametrize("n, p, flips", [(10, 0.37, 4), (20, 0.33, 7), (10, 0.12, 1), (7, 0.3, 2), (10, 0.45, 4)])
def test_exact_mode_rounds_to_nearest(n, p, flips):
    """round(p·n): 3.7 -> 4 and 6.6 -> 7 (floor would give 3, 6), 1.2 -> 1 (ceil: 2), 2.1 -> 2,
    and the tie 4.5 -> 4 (Python rounds half to even)."""
    y = np.where(np.arange(n) % 3 == 0, -1, 1)
    noisy = noise.flip_binary(y, p, seed=3, exact=True)
    assert int((noisy != y).sum()) == flips
    assert np.array_equal(np.abs(noisy), np.ones(n))  # only signs change


def test_corrupt_follows_columns_of_a_deterministic_P():
    """A 3-cycle permutation matrix, P[c', c] = 1 iff c' = (c + 1) mod 3: every label moves to c + 1.
    Reading P by rows (Pᵀ) would move it to c − 1, so the two are told apart."""
    P = np.zeros((3, 3))
    P[(np.arange(3) + 1) % 3, np.arange(3)] = 1.0
    clean = np.array([0, 1, 2, 2, 1, 0, 0])
    np.testing.assert_array_equal(noise.corrupt(clean, P, seed=0), (clean + 1) % 3)
    np.testing.assert_array_equal(noise.corrupt(clean, np.eye(3), seed=0), clean)


def test_symmetric_and_pairflip_matrices_by_value():
    r = 0.3
    np.testing.assert_allclose(
        noise.symmetric_transition(4, r),
        [[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]],
        atol=1e-15,
    )
    np.testing.assert_allclose(
        noise.pairflip_transition(3, r), [[0.7, 0.0, 0.3], [0.3, 0.7, 0.0], [0.0, 0.3, 0.7]], atol=1e-15
    )


def test_empirical_transition_by_value():
    clean = [0, 0, 0, 0, 1, 1, 2, 2, 2]
    noisy = [0, 1, 1, 2, 1, 0, 2, 2, 2]
    expected = np.array([[0.25, 0.5, 0.0], [0.50, 0.5, 0.0], [0.25, 0.0, 1.0]])  # [noisy, clean], columns sum to 1
    np.testing.assert_allclose(noise.empirical_transition(clean, noisy, 3), expected, atol=1e-15)
