"""The sampling error of the numbers the chapters judge, and the rule that turns a measurement into a verdict.

A test error measured on ``n`` test images is an estimate of the error on the distribution; its standard error
is that of a binomial proportion, ``√(e(1 − e)/n)``: half a point at ``n = 1,866`` (MNIST "5" vs "8") for
e = 5 %, 1.5 points at ``n = 200`` (the embedded subset's test images). A check with a fixed tolerance ("within
1 point") is fair at one size only; the rules here scale with the sample actually used:

* a claim that a quantity stays **within a tolerance** (:func:`within_tolerance`) holds when the measured value
  does; it is *shown not to* (a finding) only when it exceeds the tolerance by more than ``z`` standard errors;
  anything between is unresolved at this sample size;
* a **difference** of two test errors on the same images (:func:`paired_error_se`) has a standard error of at most
  ``√(δ/n)``, δ a bound on the rate at which the two classifiers disagree: ``e₁ + e₂`` (they disagree only where
  one errs), or tighter, from how often each agrees with a common reference (the tables keep that, not the
  disagreements themselves);
* when a claim is judged over ``k`` cells at once ("at every λ and noise level"), ``z`` is the two-sided
  Bonferroni quantile for ``k`` comparisons (:func:`family_z`), so that the chance of a false finding over the
  whole family stays at ``alpha``.

The same rule at every size: at the full test split it resolves what it resolved before, and at the embedded
subset's it says "unresolved at n = 200" instead of failing on what sampling alone explains.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

__all__ = ["ALPHA", "Outcome", "error_se", "paired_error_se", "family_z", "within_tolerance", "sampling_text"]

#: The family-wise chance of a false finding that the book accepts for a claim judged over several cells.
ALPHA = 0.05

#: What :func:`within_tolerance` finds: the value is within the tolerance, beyond it by more than the sampling
#: error, or neither (unresolved at this sample size).
Outcome = Literal["holds", "exceeds", "unresolved"]


def error_se(error: float, n: int) -> float:
    """The standard error of an error rate ``error`` measured on ``n`` examples: ``√(e(1 − e)/n)``.

    Examples
    --------
    >>> round(100 * error_se(0.05, 200), 2), round(100 * error_se(0.05, 1866), 2)
    (1.54, 0.5)
    """
    _check_rate(error, "error")
    _check_n(n)
    return math.sqrt(error * (1.0 - error) / n)


def paired_error_se(error_1: float, error_2: float, n: int, disagreement: float | None = None) -> float:
    """An upper bound on the standard error of ``error_1 − error_2``, two classifiers' error rates on the same ``n``
    examples: ``√(min(e₁ + e₂, δ, 1)/n)``.

    The difference is the mean of ``dᵢ ∈ {−1, 0, 1}`` (``dᵢ ≠ 0`` where exactly one of them errs), whose variance
    is at most the rate at which they disagree, which is at most ``e₁ + e₂`` and at most ``disagreement`` (δ)
    where a tighter bound on it is known: two networks that each agree with one reference predictor (their
    common linearisation) on fractions ``a₁``, ``a₂`` of the images disagree on at most ``(1 − a₁) + (1 − a₂)``.

    Examples
    --------
    >>> round(100 * paired_error_se(0.10, 0.12, 200), 2)
    3.32
    >>> round(100 * paired_error_se(0.10, 0.12, 200, disagreement=0.03), 2)
    1.22
    """
    _check_rate(error_1, "error_1")
    _check_rate(error_2, "error_2")
    _check_n(n)
    bound = error_1 + error_2
    if disagreement is not None:
        if not 0.0 <= disagreement:
            raise ValueError(f"disagreement must be a rate >= 0, got {disagreement!r}")
        bound = min(bound, disagreement)
    return math.sqrt(min(bound, 1.0) / n)


def family_z(k: int, alpha: float = ALPHA) -> float:
    """The two-sided normal quantile that keeps the chance of any false finding among ``k`` comparisons at most
    ``alpha`` (Bonferroni): ``Φ⁻¹(1 − alpha/(2k))``.

    Examples
    --------
    >>> round(family_z(1), 2), round(family_z(48), 2)
    (1.96, 3.28)
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive whole number of comparisons, got {k!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return NormalDist().inv_cdf(1.0 - alpha / (2 * int(k)))


def within_tolerance(value: float, tolerance: float, se: float, z: float) -> Outcome:
    """Judge "``value`` is at most ``tolerance``" for a measured, non-negative ``value`` with standard error
    ``se``: ``"holds"`` when it is, ``"exceeds"`` when it is above the tolerance by more than ``z`` standard
    errors (sampling alone does not explain it), otherwise ``"unresolved"``.

    Examples
    --------
    >>> within_tolerance(0.008, 0.01, 0.005, 2.0), within_tolerance(0.025, 0.01, 0.03, 2.0)
    ('holds', 'unresolved')
    >>> within_tolerance(0.10, 0.01, 0.01, 2.0)
    'exceeds'
    """
    if not (math.isfinite(value) and math.isfinite(tolerance) and se >= 0 and z > 0):
        raise ValueError(f"needs a finite value and tolerance, se >= 0 and z > 0; got {value}, {tolerance}, {se}, {z}")
    if value <= tolerance:
        return "holds"
    return "exceeds" if value - z * se > tolerance else "unresolved"


def sampling_text(se: float, n: int, unit: str = "points", of: str = "test images") -> str:
    """How a check states its sampling error: "sampling error ±1.5 points at n = 200 test images" (``of``: what the
    n examples are)."""
    return f"sampling error ±{100 * se:.1f} {unit} at n = {n:,} {of}"


def _check_rate(rate: float, name: str) -> None:
    if not (isinstance(rate, (int, float)) and 0.0 <= rate <= 1.0):
        raise ValueError(f"{name} must be an error rate in [0, 1], got {rate!r}")


def _check_n(n: int) -> None:
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive whole number of examples, got {n!r}")
