"""bookkit.sampling: the sampling error of a test error and the rule that scales each verdict with it, checked by
Monte Carlo; compare.test_images: the size of the test split a result names."""

from __future__ import annotations

import numpy as np
import pytest

from ntk_core import data
from ntk_core.bookkit import compare
from ntk_core.bookkit.sampling import error_se, family_z, paired_error_se, sampling_text, within_tolerance


def test_error_se_is_the_spread_of_an_error_rate_over_draws_of_the_test_set():
    rng = np.random.default_rng(0)
    for e, n in ((0.05, 200), (0.05, 1866), (0.3, 500)):
        rates = rng.binomial(n, e, size=200_000) / n
        assert error_se(e, n) == pytest.approx(rates.std(), rel=0.01)


def test_paired_error_se_bounds_the_spread_of_a_difference_on_shared_images():
    rng = np.random.default_rng(1)
    n, draws = 200, 40_000
    # two classifiers that err on overlapping images: independent, nested and disjoint errors
    for overlap in ("independent", "nested", "disjoint"):
        u = rng.random((draws, n))
        a = u < 0.10
        b = {"independent": rng.random((draws, n)) < 0.12, "nested": u < 0.12, "disjoint": (u >= 0.10) & (u < 0.22)}[
            overlap
        ]
        spread = (a.mean(axis=1) - b.mean(axis=1)).std()
        assert spread <= paired_error_se(0.10, 0.12, n) * 1.01, overlap
    # the bound is attained when the errors are disjoint and rare
    assert paired_error_se(0.10, 0.12, n) == pytest.approx(np.sqrt(0.22 / n))


def test_family_z_keeps_the_chance_of_any_false_finding_at_alpha():
    rng = np.random.default_rng(2)
    for k in (1, 4, 48):
        z = family_z(k)
        false = (np.abs(rng.standard_normal((100_000, k))) > z).any(axis=1).mean()
        assert false <= 0.05 + 0.003 and false > 0.04, (k, false)
    with pytest.raises(ValueError, match="positive whole number"):
        family_z(0)
    with pytest.raises(ValueError, match="alpha"):
        family_z(3, alpha=1.5)


def test_within_tolerance_holds_exceeds_or_leaves_it_unresolved():
    assert within_tolerance(0.01, 0.01, 0.02, 2.0) == "holds"
    assert within_tolerance(0.025, 0.01, 0.0033, 2.0) == "exceeds"  # 2.5 points, ±0.33: beyond
    assert within_tolerance(0.025, 0.01, 0.033, 2.0) == "unresolved"  # 2.5 points on 200 images: sampling explains it
    with pytest.raises(ValueError, match="finite"):
        within_tolerance(float("nan"), 0.01, 0.01, 2.0)
    with pytest.raises(ValueError, match="error rate"):
        error_se(1.2, 10)
    with pytest.raises(ValueError, match="whole number of examples"):
        paired_error_se(0.1, 0.1, 0)
    assert sampling_text(0.0154, 200) == "sampling error ±1.5 points at n = 200 test images"


def _dataset(split: str, n: int, source: str = "embedded") -> data.ImageDataset:
    labels = np.arange(n) % 10
    official = 10_000 if split == "test" else 60_000
    return data.ImageDataset(np.zeros((n, 28, 28), np.uint8), labels, "MNIST", split, source, "here", official, True)


def test_test_images_reads_the_test_split_a_result_describes():
    train, test = _dataset("train", 4_000), _dataset("test", 1_000)
    task = data.binary_task(test, 5, 8)
    lines = [train.describe(), test.describe()]
    assert compare.test_images({"config": {"n_test": 0}, "data": lines}) == 1_000
    assert compare.test_images({"config": {"n_test": 250}, "data": lines}) == 250
    assert compare.test_images({"config": {}, "data": [train.describe(), task.describe()]}) == len(task) == 200
    with pytest.raises(ValueError, match="one test split"):
        compare.test_images({"config": {}, "data": [train.describe()]})
