"""A deliberately wrong ingredient must break each theorem chapter of the book.

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
E ỹ = y, (1 − 2p)y and Q; |z| of 30–100 against a threshold of 5); kernel × 2 — the
identity k(t) = t/4 + t·arcsin(t)/(2π) from which each non-vacuous section reads its
a-priori constant for yᵀK⁻¹y.
"""

from __future__ import annotations

import math

import pytest

from chapter import run_chapter
from ntk_core import infinite, kernel_matrix, krr, synthetic

pytestmark = pytest.mark.slow

THEOREM_CHAPTERS = {"Theorem 5.1": "additive_noise", "Theorem 5.2": "binary", "Theorem 5.3": "multiclass"}


def _ridge_lambda_not_squared(monkeypatch: pytest.MonkeyPatch) -> None:
    cholesky, flt = kernel_matrix._cholesky_ridge, krr.KRRPath._filter
    monkeypatch.setattr(kernel_matrix, "_cholesky_ridge", lambda K, lam: cholesky(K, math.sqrt(lam)))
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
