"""A deliberately wrong ingredient must break each theorem chapter of the book, and a wrong analysis each experiment
chapter.

The book's promise is that a wrong result fails the build. For each chapter that
checks a theorem of Section 5 we plant one plausible bug at a time in ``ntk_core``
and run the chapter's own code cells (``tests/support/chapter.py``): one of its asserts
must fail. The bugs:

* **ridge λ for λ²** — kernel ridge regression solved with ``K + λ I`` instead of
  ``K + λ² I`` (paper eq. (8)), in both solvers of :mod:`ntk_core.krr`;
* **kernel × 2** — the infinite-width NTK of the Setting-1 network returned twice
  too large (a dropped ½ of the ReLU expectation).

Without a bug the same chapters pass: that is the book build itself (``make book``).
Measured on the development machine, the asserts that catch them: ridge λ for λ² —
the Monte Carlo checks of the proofs' mean-zero steps (E f*(X) = K(K + λ²I)⁻¹E ỹ with
E ỹ = y, (1 − 2p)y and Q; |z| of 30–100 against a threshold of 5), and in the chapter on Theorem 5.1 as n grows
the predictor f* against numpy's own solve of (K + λ²I)α = y (its checks are inequalities that a wrong ridge
leaves standing); kernel × 2 — the
identity k(t) = t/4 + t·arcsin(t)/(2π) from which each non-vacuous section reads its
a-priori constant for yᵀK⁻¹y, and (Theorem 5.1's chapter) the constant of its premise, tr K/n = k(x, x) = 1/2.
"""

from __future__ import annotations

import math

import pytest

from chapter import run_chapter
from ntk_core import infinite, krr, synthetic
from ntk_core.kernel_matrix import dense

pytestmark = pytest.mark.slow

THEOREM_CHAPTERS = {
    "Theorem 5.1": "additive_noise",
    "Theorem 5.1 as n grows": "additive_scaling",
    "Theorem 5.2": "binary",
    "Theorem 5.3": "multiclass",
}


def _ridge_lambda_not_squared(monkeypatch: pytest.MonkeyPatch) -> None:
    cholesky, flt = dense._cholesky_ridge, krr.KRRPath._filter
    monkeypatch.setattr(dense, "_cholesky_ridge", lambda K, lam: cholesky(K, math.sqrt(lam)))
    monkeypatch.setattr(krr.KRRPath, "_filter", lambda self, lam: flt(self, math.sqrt(float(lam))))


def _kernel_doubled(monkeypatch: pytest.MonkeyPatch) -> None:
    ntk = infinite.relu_ntk
    monkeypatch.setattr(infinite, "relu_ntk", lambda *args, **kwargs: 2.0 * ntk(*args, **kwargs))


MUTATIONS = {"ridge lambda for lambda^2": _ridge_lambda_not_squared, "kernel x 2": _kernel_doubled}


def test_the_mutations_change_what_they_claim_to():
    import numpy as np

    rng = np.random.default_rng(0)
    x, _ = synthetic.sphere_sample(30, 5, seed=1)
    y = rng.standard_normal(30)
    K = infinite.setting1_kernel(x)
    with pytest.MonkeyPatch.context() as mp:
        _ridge_lambda_not_squared(mp)
        wrong = krr.krr_predict(K, y, 2.0)
        wrong_path = krr.KRRPath(K).predict(y, [2.0])[0]
    with pytest.MonkeyPatch.context() as mp:
        _kernel_doubled(mp)
        assert np.allclose(infinite.setting1_kernel(x), 2 * K)
    right = K @ np.linalg.solve(K + 4.0 * np.eye(30), y)
    assert np.allclose(wrong, K @ np.linalg.solve(K + 2.0 * np.eye(30), y)) and np.allclose(wrong, wrong_path)
    assert not np.allclose(wrong, right)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("theorem", sorted(THEOREM_CHAPTERS))
def test_a_wrong_ingredient_fails_the_theorem_chapter(theorem, mutation, monkeypatch):
    MUTATIONS[mutation](monkeypatch)
    with pytest.raises(AssertionError):
        run_chapter(THEOREM_CHAPTERS[theorem])


# --------------------------------------------------------------------------- the experiment chapters
#
# The experiment chapters' training runs take minutes; their checks read the results. So these tests run a chapter
# on the results that the book's build left in its experiment cache ($NTK_CORE_CACHE, which `make test` points at
# _build/ntk_cache after building the book) and plant bugs in the analysis only. A unit that is not in the cache
# is never computed here: the test skips, naming the build that fills the cache.


class _NotCached(Exception):
    """An experiment unit of the chapter is not in the book's cache (the test would have to train it)."""


def _memorised_sign_flipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The share of flipped labels a network reproduces with the sign of (err_noisy − err_clean) / p flipped: a
    network that memorises every flipped label reads as one that memorised none."""
    from ntk_core.bookkit import claims
    from ntk_core.experiments import setting2

    def wrong(train_error_noisy: float, train_error_clean: float, noise_rate: float) -> float:
        return float((1.0 + (train_error_noisy - train_error_clean) / noise_rate) / 2.0)

    for module in (claims, setting2):
        monkeypatch.setattr(module, "memorised_fraction", wrong)


def _trends_reversed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Table 2's distances read against the factor's values in reverse order (every trend's sign flips), in the
    per-seed table the verdicts are judged on and in the summary of the means."""
    from ntk_core.experiments import distance

    trends, seed_table = distance.trends, distance.seed_table
    monkeypatch.setattr(distance, "trends", lambda table: trends(table).assign(spearman=lambda t: -t["spearman"]))
    monkeypatch.setattr(
        distance,
        "seed_table",
        lambda table, factor: (
            seed_table(table, factor).iloc[:, ::-1].set_axis(sorted(seed_table(table, factor).columns), axis=1)
        ),
    )


EXPERIMENT_MUTATIONS = {
    ("experiments_mnist", "memorised share, sign flipped"): _memorised_sign_flipped,
    ("experiments_distance", "Table 2 trends reversed"): _trends_reversed,
    ("experiments_cifar", "memorised share, sign flipped"): _memorised_sign_flipped,
}


@pytest.mark.parametrize(("chapter", "mutation"), sorted(EXPERIMENT_MUTATIONS))
def test_a_wrong_analysis_fails_the_experiment_chapter(chapter, mutation, monkeypatch, shared_data):
    """The precondition that the network fits the noisy labels (Figure 1a, Setting 2) and Table 2's trends are
    checked by the chapters' own asserts: with the bug planted, the chapter fails on the cached results."""
    from ntk_core.experiments import _runner

    def not_cached(self, *args, **kwargs):
        raise _NotCached(f"book/{chapter}.md needs a unit that is not in {_runner.cache_dir()}")

    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    monkeypatch.setattr(_runner.RunContext, "_compute_unit", not_cached)
    EXPERIMENT_MUTATIONS[(chapter, mutation)](monkeypatch)
    try:
        with pytest.raises(AssertionError):
            run_chapter(chapter)
    except _NotCached as missing:
        pytest.skip(f"{missing}: build the book first (make book; make test does)")
