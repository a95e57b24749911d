r"""Label-noise processes of Section 3.1 of the paper.

Binary classification
    Draw :math:`(x, y) \sim \mathcal D` with :math:`y \in \{\pm 1\}` and flip the
    sign of :math:`y` with probability :math:`p`, :math:`0 \le p < 1/2`
    (:func:`flip_binary`).

K-class classification
    A transition matrix :math:`P \in \mathbb R^{K \times K}` whose entry
    :math:`p_{c',c} = \Pr[\tilde c = c' \mid c]` is the probability that the
    clean label :math:`c` is turned into :math:`c'`. Its **columns** sum to 1
    (:func:`corrupt`). In the experiments (Section 6) a corrupted label is drawn
    uniformly from the *other* classes (:func:`symmetric_transition`).

Every function that draws takes a ``seed`` (an ``int`` or a
``numpy.random.Generator``): the same seed gives the same labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import (
    as_labels,
    check_binary_labels,
    check_class_labels,
    check_count,
    check_probability,
    check_rate,
    check_seed,
    check_transition_matrix,
    check_unit_interval_open,
)

__all__ = [
    "flip_binary",
    "corrupt",
    "symmetric_transition",
    "pairflip_transition",
    "empirical_transition",
    "wilson_interval",
]


def flip_binary(y: Any, p: float, seed: int | np.random.Generator, *, exact: bool = False) -> np.ndarray:
    r"""Flip the sign of each ±1 label with probability ``p`` (Section 3.1).

    .. math:: \tilde y_i = \begin{cases} -y_i & \text{with probability } p,\\ y_i & \text{otherwise,}\end{cases}

    with :math:`0 \le p < \tfrac12`.

    Parameters
    ----------
    y : ArrayLike, shape (n,)
        Clean labels in ``{-1, +1}``, shape ``(n,)``.
    p : float
        Flip rate in ``[0, 1/2)``.
    seed : int or numpy.random.Generator
        ``int`` or ``numpy.random.Generator``.
    exact : bool
        ``False`` (default) flips each label independently, the paper's
        i.i.d. process of Section 3.1. ``True`` flips exactly
        ``round(p * n)`` labels chosen uniformly at random, the "fraction of
        corrupted labels" of the experiments in Section 6.

    Returns
    -------
    numpy.ndarray
        Noisy labels, int64 in ``{-1, +1}``, shape ``(n,)``.

    Raises
    ------
    ValueError
        Labels not in ``{-1, +1}``, or p outside ``[0, 1/2)``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core import flip_binary
    >>> y = np.array([1, 1, 1, 1, 1, -1, -1, -1, -1, -1])
    >>> y_noisy = flip_binary(y, 0.2, seed=0, exact=True)   # exactly round(0.2 n) = 2 flips
    >>> int((y_noisy != y).sum())
    2
    >>> np.array_equal(y_noisy, flip_binary(y, 0.2, seed=0, exact=True))   # same seed, same labels
    True
    >>> bool(np.all(np.abs(flip_binary(y, 0.2, seed=1)) == 1))   # only signs change
    True
    """
    arr = as_labels(y, "y")
    check_binary_labels(arr, "y")
    p = check_rate(p, "p")
    rng = check_seed(seed)
    n = arr.size
    if exact:
        flip = np.zeros(n, dtype=bool)
        flip[rng.choice(n, size=int(round(p * n)), replace=False)] = True
    else:
        flip = rng.random(n) < p
    return np.where(flip, -arr, arr).astype(np.int64)


def corrupt(labels: Any, P: Any, seed: int | np.random.Generator) -> np.ndarray:
    r"""Replace each clean label ``c`` by a noisy label drawn from column ``c`` of ``P``.

    .. math:: \Pr[\tilde c_i = c' \mid c_i = c] = p_{c', c} \qquad (\text{Section 3.1}).

    Parameters
    ----------
    labels : ArrayLike, shape (n,)
        Clean labels in ``{0, ..., K-1}``, shape ``(n,)``.
    P : ArrayLike, shape (K, K)
        Column-stochastic ``(K, K)`` matrix, ``P[c', c] = Pr[noisy c' | clean c]``.
        It need not be identifiable (``gap(P) <= 0`` is allowed here so that the
        failure of identifiability can be demonstrated).
    seed : int or numpy.random.Generator
        ``int`` or ``numpy.random.Generator``.

    Returns
    -------
    numpy.ndarray
        Noisy labels, int64, shape ``(n,)``.

    Raises
    ------
    ValueError
        P not a column-stochastic square matrix, or labels outside ``{0, ..., K-1}``.

    Examples
    --------
    Pair-flip noise of rate 1/4 on three classes: each class keeps its label
    with probability 3/4 and otherwise moves to the next class.

    >>> import numpy as np
    >>> from ntk_core import corrupt, pairflip_transition
    >>> P = pairflip_transition(3, 0.25)
    >>> P
    array([[0.75, 0.  , 0.25],
           [0.25, 0.75, 0.  ],
           [0.  , 0.25, 0.75]])
    >>> clean = np.repeat(np.arange(3), 1000)
    >>> noisy = corrupt(clean, P, seed=0)
    >>> noisy.shape, noisy.dtype
    ((3000,), dtype('int64'))
    >>> bool(np.all((noisy == clean) | (noisy == (clean + 1) % 3)))   # only the pair flip happens
    True
    >>> bool(abs(np.mean(noisy != clean) - 0.25) < 0.03)             # the rate asked for
    True
    """
    arr = as_labels(labels)
    P = check_transition_matrix(P)
    arr = check_class_labels(arr, P.shape[0])
    rng = check_seed(seed)
    # Inverse-CDF sampling, one uniform per example: column c of the cumulative P.
    cdf = np.cumsum(P, axis=0)
    cdf[-1, :] = 1.0
    u = rng.random(arr.size)
    noisy = (u[:, None] >= cdf[:, arr].T).sum(axis=1)
    return noisy.astype(np.int64)


def symmetric_transition(num_classes: int, rate: float) -> np.ndarray:
    r"""Symmetric noise: a corrupted label is uniform over the *other* classes.

    .. math:: p_{c,c} = 1 - r, \qquad p_{c',c} = \frac{r}{K-1} \quad (c' \ne c),

    the noise of Setting 3 ("a corrupted label is chosen uniformly from the
    other 9 classes"). Then :math:`\mathrm{gap}(P) = 1 - r - r/(K-1)`, which is
    positive (labels identifiable, Section 3.1) exactly when :math:`r < (K-1)/K`.
    Rates up to 1 are accepted so that non-identifiable noise can be studied.

    Parameters
    ----------
    num_classes : int
        K ≥ 2.
    rate : float
        r ∈ [0, 1], the probability that a label is corrupted.

    Returns
    -------
    numpy.ndarray, shape (K, K)
        Column-stochastic float64 matrix, ``P[c', c]`` = Pr[noisy c' | clean c].

    Examples
    --------
    >>> from ntk_core import symmetric_transition
    >>> symmetric_transition(3, 0.3)
    array([[0.7 , 0.15, 0.15],
           [0.15, 0.7 , 0.15],
           [0.15, 0.15, 0.7 ]])
    """
    K = check_count(num_classes, "num_classes", minimum=2)
    r = check_probability(rate, "rate")
    P = np.full((K, K), r / (K - 1))
    np.fill_diagonal(P, 1.0 - r)
    return P


def pairflip_transition(num_classes: int, rate: float) -> np.ndarray:
    r"""Asymmetric "pair-flip" noise: class ``c`` is turned into ``c + 1 (mod K)`` with probability ``rate``.

    .. math:: p_{c,c} = 1 - r, \qquad p_{(c+1) \bmod K,\, c} = r .

    :math:`\mathrm{gap}(P) = 1 - 2r`, so the labels stay identifiable only for
    :math:`r < 1/2`.

    Parameters
    ----------
    num_classes : int
        K ≥ 2.
    rate : float
        r ∈ [0, 1].

    Returns
    -------
    numpy.ndarray, shape (K, K)
        Column-stochastic float64 matrix, ``P[c', c]`` = Pr[noisy c' | clean c].
    """
    K = check_count(num_classes, "num_classes", minimum=2)
    r = check_probability(rate, "rate")
    P = (1.0 - r) * np.eye(K)
    P[(np.arange(K) + 1) % K, np.arange(K)] += r
    return P


def empirical_transition(clean: Any, noisy: Any, num_classes: int) -> np.ndarray:
    """Estimate the transition matrix P from paired clean and noisy labels.

    ``P_hat[c', c] = #{i : c_i = c, c̃_i = c'} / #{i : c_i = c}``, the empirical
    version of Pr[c̃ = c' | c] of Section 3.1. A column whose clean class does not
    occur is ``NaN``.

    Parameters
    ----------
    clean, noisy : ArrayLike, shape (n,)
        Clean and noisy labels in ``{0, ..., K-1}``.
    num_classes : int
        K.

    Returns
    -------
    numpy.ndarray, shape (K, K)
        float64 estimate, columns summing to 1 (or ``NaN``).
    """
    K = check_count(num_classes, "num_classes", minimum=2)
    c = as_labels(clean, "clean")
    t = as_labels(noisy, "noisy")
    if c.shape != t.shape:
        raise ValueError(f"clean and noisy must have the same shape, got {c.shape} and {t.shape}")
    c, t = check_class_labels(c, K, "clean"), check_class_labels(t, K, "noisy")
    counts = np.zeros((K, K))
    np.add.at(counts, (t, c), 1.0)
    totals = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts / totals[None, :]


def wilson_interval(successes: Any, trials: Any, confidence: float = 0.999) -> tuple[np.ndarray, np.ndarray]:
    r"""Wilson score interval for a binomial proportion, element-wise.

    With :math:`\hat q = k/n` and :math:`z` the two-sided normal quantile of ``confidence``,

    .. math:: \frac{\hat q + \frac{z^2}{2n} \pm z\sqrt{\frac{\hat q(1-\hat q)}{n} + \frac{z^2}{4n^2}}}{1 + z^2/n}.

    Used to check that realised flip rates and transition frequencies agree with
    the ``p`` and ``P`` they were drawn from.

    Parameters
    ----------
    successes, trials : ArrayLike
        Counts k and n (broadcast together), n ≥ 1.
    confidence : float
        Two-sided confidence level in (0, 1).

    Returns
    -------
    low, high : numpy.ndarray
        The interval's ends, element-wise, in [0, 1].

    Examples
    --------
    >>> from ntk_core.noise import wilson_interval
    >>> low, high = wilson_interval(200, 1000, confidence=0.999)
    >>> bool(low < 0.2 < high), round(float(low), 3), round(float(high), 3)
    (True, 0.162, 0.245)
    """
    from scipy.stats import norm

    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= successes <= trials and trials > 0")
    conf = check_unit_interval_open(confidence, "confidence")
    z = norm.ppf(0.5 + conf / 2.0)
    q = k / n
    centre = (q + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * np.sqrt(q * (1 - q) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    # exact end points at k = 0 and k = n (the formula gives them only up to rounding)
    low = np.where(k == 0, 0.0, np.clip(centre - half, 0.0, 1.0))
    high = np.where(k == n, 1.0, np.clip(centre + half, 0.0, 1.0))
    return low, high
