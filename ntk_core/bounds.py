r"""Every term of the paper's generalization bounds (Section 5, Appendix C).

Conventions. ``K`` is the kernel matrix k(X, X) (n × n, symmetric), ``lam`` is
λ and the ridge is λ² I, ``delta`` is the failure probability δ ∈ (0, 1).
A real random variable ε is *sub-Gaussian with parameter σ* when
E exp(sε) ≤ exp(s²σ²/2) for every real s (so E ε = 0 and Var ε ≤ σ²); this
is the definition the Hsu–Kakade–Zhang bound, and hence the paper, uses.

What is here

* Data quantities: :func:`complexity` (yᵀK⁻¹y), :func:`ridge_complexity`
  (yᵀ(K + λ²I)⁻¹y), :func:`rkhs_norm`, :func:`krr_rkhs_norm`, :func:`gap`,
  :func:`q_matrix` (Q = P·Y of Theorem 5.3).
* Noise constants: :func:`centred_bernoulli_subgaussian_sigma`,
  :func:`binary_noise_subgaussian_sigma`, :func:`multiclass_noise_subgaussian_sigma`
  and the numerical check :func:`subgaussian_sigma_numeric`.
* The three tail/deterministic lemmas: :func:`hsu_kakade_zhang_bound`
  (eq. (12)), :func:`lemma_c1_bound`, :func:`lemma_c2_bound`.
* Theorems 5.1–5.3, each twice: ``theorem_5_x_printed`` (the O(·) form as
  printed, every hidden constant set to ``C``, default 1) and
  ``theorem_5_x_bound`` (every constant written out by following Appendix C;
  a rigorous bound, see the derivation in :func:`theorem_5_1_bound`).
  Theorems 5.2 and 5.3 are computed, as in the paper's proofs, as reductions
  to Theorem 5.1: they call the same machinery.

Kernel matrices on disk

Every function here that takes a kernel matrix ``K`` takes it through
:func:`ntk_core.kernel_matrix.as_kernel_matrix`: an array or a tensor (a
:class:`~ntk_core.kernel_matrix.dense.DenseKernel`), or one kept on disk and never
loaded whole: a ``.npy`` path, a ``numpy.memmap`` (e.g. the Gram matrix that
:func:`ntk_core.ntk.distributed.distributed_ntk` assembles) or a
:class:`ntk_core.kernel_matrix.on_disk.OnDiskKernel`. Memory is one block of rows of K
(``memory_budget``, default 256 MiB) plus vectors of length n. What each
quantity costs, in passes over a K on disk:

* K is validated once (square, finite, symmetric, as
  :func:`ntk_core._checks.check_kernel_matrix`; one pass), which also reads its
  diagonal, so tr K costs nothing more;
* yᵀ(K + λ²I)⁻¹y and yᵀK⁻¹y (λ = 0, K positive definite) come from
  :func:`ntk_core.kernel_matrix.on_disk.krr_solve_ooc`: preconditioned conjugate gradients,
  one pass per iteration, relative residual 1e-12 by default; Theorem 5.3
  solves for its K outputs together (K columns per pass);
* αᵀKα (:func:`rkhs_norm`) takes one pass, and :func:`krr_rkhs_norm` one more after its solve.

Wrap K in an :class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel` to choose the block size,
tolerance or preconditioner rank, to validate it only once over several calls,
and to read the passes afterwards (``.passes``). Only :func:`hsu_kakade_zhang_bound`
needs its matrix whole (every singular value of A) and refuses one on disk.

Where the proofs' constants differ from the printed text (σ_p of binary noise is not O(√p), the
RKHS ball of the Rademacher step, the size of the ε-net, the truncated loss of Theorem 5.3, Lemma C.1's 1/9)
is stated once, with its evidence, in the book's errata chapter; ``tests/test_bounds.py`` checks each.
"""

from __future__ import annotations

import abc
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

from ._checks import (
    as_float64_array,
    as_numpy,
    check_binary_labels,
    check_choice,
    check_class_labels,
    check_interval,
    check_lam,
    check_positive,
    check_probability,
    check_rows,
    check_rate,
    check_transition_matrix,
    check_unit_interval_open,
    symmetry_rtol,
)
from ._typing import ArrayLike
from .kernel_matrix import KernelMatrix, as_kernel_matrix, is_on_disk

__all__ = [
    "AdditiveNoiseBound",
    "BOUND_TERMS",
    "PrintedScaleWarning",
    "PRINTED_TRACE_RATIO",
    "RIDGE_TERMS",
    "BinaryBound",
    "LemmaC1Bound",
    "LemmaC2Bound",
    "MulticlassBound",
    "PrintedBound",
    "binary_noise_subgaussian_sigma",
    "centred_bernoulli_subgaussian_sigma",
    "complexity",
    "gap",
    "hsu_kakade_zhang_bound",
    "krr_rkhs_norm",
    "lemma_c1_bound",
    "lemma_c2_bound",
    "leading_lambda",
    "leading_minimum",
    "multiclass_noise_subgaussian_sigma",
    "q_matrix",
    "ramp_loss",
    "ridge_complexity",
    "rkhs_norm",
    "subgaussian_sigma_numeric",
    "theorem_5_1_bound",
    "theorem_5_1_printed",
    "theorem_5_2_bound",
    "theorem_5_2_printed",
    "theorem_5_3_bound",
    "theorem_5_3_printed",
    "non_vacuous_n",
]


# =========================================================================== validation


def _check_bounded_labels(y: np.ndarray, bound: float, name: str) -> None:
    worst = float(np.max(np.abs(y))) if y.size else 0.0
    if worst > bound * (1 + 1e-12):
        raise ValueError(
            f"{name} must lie in [-{bound:g}, {bound:g}] (Theorem 5.1 takes D over R^d x [-1, 1]), "
            f"got max |{name}| = {worst:.6g}"
        )


def _log_inv(delta: float) -> float:
    return math.log(1.0 / delta)


class PrintedScaleWarning(UserWarning):
    """A bound *as printed* (``theorem_5_x_printed``) on a kernel with tr K/n far from 1.

    The printed forms read every O(·) as a constant, which assumes tr K/n = O(1) (the paper's kernels have
    k(x, x) ≤ 1); the explicit constants carry √(tr K/n) (λ + 4√(tr K/n) and (5σ/(2λ))√(tr K/n); the errata chapter),
    so with, say, a network in standard parametrisation (tr K/n in the hundreds) the printed total is off by
    that factor. The explicit ``theorem_5_x_bound`` is right at any scale.
    """


#: The ``ridge`` choices of the explicit bounds: the ridge quadratic yᵀ(K + λ²I)⁻¹y solved, or bounded by yᵀK⁻¹y.
RIDGE_TERMS = ("exact", "complexity")

#: The printed forms warn (:class:`PrintedScaleWarning`) when tr K/n is outside [1/this, this].
PRINTED_TRACE_RATIO = 10.0


def _printed_scale(theorem: str, K: KernelMatrix) -> float:
    """tr K/n, with a :class:`PrintedScaleWarning` when it is far from O(1)."""
    ratio = K.trace() / K.shape[0]
    if not 1.0 / PRINTED_TRACE_RATIO <= ratio <= PRINTED_TRACE_RATIO:
        warnings.warn(
            f"Theorem {theorem} as printed reads its O(·) as constants, assuming tr K/n = O(1); here tr K/n = "
            f"{ratio:.3g}, and the explicit constants carry √(tr K/n) = {math.sqrt(ratio):.3g}, so the printed "
            f"terms are off by up to that factor. Use theorem_{theorem.replace('.', '_')}_bound (explicit "
            "constants, right at any scale) for a number to rely on.",
            PrintedScaleWarning,
            stacklevel=3,
        )
    return ratio


def _per_output_kernel(K: Any) -> Any:
    """Theorem 5.3's one kernel per output from a kernel of shape (n, n, O, O) (``empirical_ntk(...,
    output="full")``) when it has the form k ⊗ I that eq. (9) assumes; a kernel of another shape is returned
    as it is (for :func:`~ntk_core.kernel_matrix.as_kernel_matrix` to check)."""
    if is_on_disk(K) or np.ndim(K) != 4:
        return K
    A = np.asarray(K)
    n1, n2, o1, o2 = A.shape
    if n1 != n2 or o1 != o2:
        raise ValueError(f"a full kernel must have shape (n, n, O, O), got {A.shape}")
    A = A.astype(np.float64)
    diagonal = np.stack([A[:, :, h, h] for h in range(o1)])
    scale = float(np.abs(diagonal).max()) or 1.0
    off = max((float(np.abs(A[:, :, h, g]).max()) for h in range(o1) for g in range(o1) if h != g), default=0.0)
    spread = float(np.abs(diagonal - diagonal[0]).max())
    tol = symmetry_rtol(np.asarray(K).dtype)
    if off > tol * scale or spread > tol * scale:
        raise ValueError(
            "Theorem 5.3 (eq. (9)) fits every output by kernel ridge regression with one scalar kernel k, i.e. a "
            f"full kernel k ⊗ I; this (n, n, {o1}, {o1}) kernel is not of that form (its blocks between outputs "
            f"reach {off / scale:.2g} of its largest entry, its output blocks differ by {spread / scale:.2g}), "
            "as a finite network's is not. Pass one (n, n) kernel: for a network, its NTK per output, "
            "empirical_ntk(model, x, output='trace') / number_of_outputs (the mean of the output blocks, which "
            "is k at infinite width)."
        )
    return diagonal[0]


# =========================================================================== data quantities


def complexity(K: ArrayLike | KernelMatrix, y: ArrayLike) -> float | np.ndarray:
    """The data-dependent complexity yᵀ k(X, X)⁻¹ y of Theorems 5.1–5.3 (eq. (10)).

    For ``y`` of shape ``(n,)`` returns a float; for ``(n, K)`` returns the
    ``K`` values (y⁽ʰ⁾)ᵀK⁻¹y⁽ʰ⁾, one per column (Theorem 5.3 uses q⁽ʰ⁾). Needs
    K positive definite (in memory: Cholesky, float64); raises ``ValueError`` otherwise.

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite. A path to a
        ``.npy`` file, a memory map (e.g. the Gram matrix assembled by
        :func:`ntk_core.ntk.distributed.distributed_ntk`) or an
        :class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel` is solved out of core by
        :func:`ntk_core.kernel_matrix.on_disk.ridge_quadratic_ooc` with λ = 0 (conjugate
        gradients over row blocks; K is never loaded whole; the passes over K
        are counted by an ``OnDiskKernel``).
    y : ArrayLike, shape (n,) or (n, K)
        Labels (one column per output).

    Returns
    -------
    float or numpy.ndarray
        yᵀK⁻¹y, or one value per column, shape ``(K,)``.

    Raises
    ------
    ValueError
        K not positive definite (on disk: when conjugate gradients show it).
    RuntimeError
        K on disk so ill-conditioned that conjugate gradients do not converge
        (raise the ``OnDiskKernel``'s ``rank`` or ``max_iter``).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from ntk_core.bounds import complexity
    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> round(complexity(K, np.array([1.0, 1.0])), 10)
    0.6666666667
    >>> path = os.path.join(tempfile.mkdtemp(), "K.npy"); np.save(path, K)
    >>> round(complexity(path, np.array([1.0, 1.0])), 10)   # on disk, out of core
    0.6666666667
    """
    Km = as_kernel_matrix(K)
    return Km.ridge_quadratic(check_rows(y, Km.n, "y"), 0.0)


def ridge_complexity(K: ArrayLike | KernelMatrix, y: ArrayLike, lam: float) -> float:
    """yᵀ(k(X, X) + λ²I)⁻¹y, the signal part of Lemma C.2 (≤ :func:`complexity`; ridge λ² I as in eq. (8)).

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite; a ``.npy`` path, a
        memory map or an :class:`~ntk_core.kernel_matrix.on_disk.OnDiskKernel` is solved out of
        core (:func:`ntk_core.kernel_matrix.on_disk.ridge_quadratic_ooc`).
    y : ArrayLike, shape (n,)
        Labels.
    lam : float
        λ ≥ 0 (0 gives yᵀK⁻¹y, :func:`complexity`; K must then be positive definite).

    Returns
    -------
    float
    """
    Km = as_kernel_matrix(K)
    return float(Km.ridge_quadratic(check_rows(y, Km.n, "y", ndim=1), check_lam(lam, "lam")))


def rkhs_norm(K: ArrayLike | KernelMatrix, alpha: ArrayLike) -> float:
    """RKHS norm ‖f‖_H = √(αᵀ k(X, X) α) of f = αᵀk(·, X) (Appendix C, before Lemma C.2).

    For K on disk, K α is one pass over row blocks (after the validation pass).

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite; on disk it is read
        in blocks, never whole (see "Kernel matrices on disk" above).
    alpha : ArrayLike, shape (n,)
        Coefficients α.

    Returns
    -------
    float
        ‖f‖_H.
    """
    Km = as_kernel_matrix(K)
    a = check_rows(alpha, Km.n, "alpha", ndim=1)
    return math.sqrt(max(float(a @ Km.matvec(a)), 0.0))


def krr_rkhs_norm(K: ArrayLike | KernelMatrix, y_noisy: ArrayLike, lam: float) -> float:
    """‖f*‖_H of the KRR solution f* = k(·, X)ᵀ(K + λ²I)⁻¹ỹ (eq. (8)) — the left side of Lemma C.2.

    For K on disk, α = (K + λ²I)⁻¹ỹ and Kα come from one out-of-core solve
    (:func:`ntk_core.kernel_matrix.on_disk.krr_solve_ooc`) and ‖f*‖²_H = αᵀ(Kα).

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite; on disk it is read
        in blocks, never whole (see "Kernel matrices on disk" above).
    y_noisy : ArrayLike, shape (n,)
        The training labels ỹ.
    lam : float
        λ ≥ 0 (0: the minimum-norm interpolant K⁻¹ỹ; K must then be positive definite).

    Returns
    -------
    float
        ‖f*‖_H.
    """
    Km = as_kernel_matrix(K)
    return rkhs_norm(Km, Km.ridge_solve(check_rows(y_noisy, Km.n, "y_noisy", ndim=1), check_lam(lam, "lam")))


def gap(P: ArrayLike) -> float:
    """gap(P) = min over c ≠ c' of (p_{c,c} − p_{c',c}) (Theorem 5.3).

    ``P`` is column-stochastic with ``P[c', c] = Pr[noisy c' | clean c]``
    (Section 3.1). The value is returned as is, also when ≤ 0; the theorem
    functions refuse gap(P) ≤ 0 because then some class c is not identifiable
    from noisy labels (Section 3.1). For symmetric noise at rate r over K
    classes, gap = 1 − rK/(K − 1).

    Parameters
    ----------
    P : ArrayLike, shape (K, K)
        Column-stochastic transition matrix.

    Returns
    -------
    float
        gap(P), possibly ≤ 0.

    Examples
    --------
    >>> from ntk_core import gap, symmetric_transition
    >>> round(gap(symmetric_transition(10, 0.4)), 4)   # 1 − 0.4 · 10/9
    0.5556
    """
    Pm = check_transition_matrix(P)
    diag = np.diag(Pm)
    off = Pm - np.diag(np.full(Pm.shape[0], np.inf))  # exclude c' = c
    return float(np.min(diag - np.max(off, axis=0)))


def _require_positive_gap(P: np.ndarray) -> float:
    g = gap(P)
    if not g > 0.0:
        raise ValueError(
            f"gap(P) = {g:.6g} <= 0: some clean class c is turned into another class c' at least as "
            f"often as it is kept (p_cc <= p_c'c), so labels are not identifiable (Section 3.1)"
        )
    return g


def q_matrix(P: ArrayLike, labels: ArrayLike) -> np.ndarray:
    """Q = P·Y ∈ R^{K×n} of Theorem 5.3: column i is E[ỹ_i | c_i] = P[:, c_i].

    ``labels`` is either the clean classes, an integer array of shape ``(n,)``
    with values in {0, …, K−1}, or the one-hot matrix Y of shape ``(K, n)``
    (the paper's layout). Row h of Q is the vector q⁽ʰ⁾.

    Parameters
    ----------
    P : ArrayLike, shape (K, K)
        Column-stochastic transition matrix.
    labels : ArrayLike, shape (n,) or (K, n)
        Clean classes, or the one-hot matrix Y.

    Returns
    -------
    numpy.ndarray, shape (K, n)
        Q.
    """
    Pm = check_transition_matrix(P)
    k = Pm.shape[0]
    arr = as_numpy(labels)
    if arr.ndim == 2:
        Y = as_float64_array(arr, "labels", ndim=2)
        if Y.shape[0] != k:
            raise ValueError(f"one-hot labels Y must have shape (K, n) with K = {k}, got {Y.shape}")
        return Pm @ Y
    return Pm[:, check_class_labels(arr, k)]


# =========================================================================== sub-Gaussian constants


def centred_bernoulli_subgaussian_sigma(q: float) -> float:
    """Optimal sub-Gaussian parameter of B − q, B ~ Bernoulli(q).

    σ² = (1 − 2q) / (2 log((1 − q)/q)) for q ∉ {0, 1/2, 1}, σ² = 1/4 at q = 1/2
    (the limit; Hoeffding's range/2 bound is attained), σ = 0 at q ∈ {0, 1}
    (Kearns & Saul 1998; Buldygin & Moskvichova 2013). Symmetric in q ↔ 1 − q.
    Verified against :func:`subgaussian_sigma_numeric` in the tests.

    Parameters
    ----------
    q : float
        The Bernoulli parameter, in [0, 1].

    Returns
    -------
    float
        σ.
    """
    q = check_probability(q, "q")
    if q in (0.0, 1.0):
        return 0.0
    if abs(q - 0.5) < 1e-7:
        return 0.5
    return math.sqrt((1.0 - 2.0 * q) / (2.0 * (math.log1p(-q) - math.log(q))))


def binary_noise_subgaussian_sigma(p: float) -> float:
    r"""True sub-Gaussian parameter of the binary label noise ε = ỹ − (1 − 2p)y (Theorem 5.2).

    Given y, ε = −2(B − p) with B ~ Bernoulli(p) the flip indicator: ε = 2p with
    probability 1 − p and −2(1 − p) with probability p. Scaling
    :func:`centred_bernoulli_subgaussian_sigma` by 2,

    .. math:: \sigma_p &= \sqrt{\frac{2(1-2p)}{\log((1-p)/p)}},\\
              \sigma_0 &= 0,\ \sigma_{1/2} = 1.

    **The paper claims σ = O(√p); this is false.** σ_p ≥ 2√(p(1−p)) (the
    standard deviation, which *is* O(√p)) but as p → 0,
    σ_p ~ √(2/log(1/p)) and σ_p/√p → ∞: σ_p = 0.380 at p = 1e−6 (√p = 0.001),
    0.653 at p = 0.01 (√p = 0.1), 0.782 at p = 0.05, 0.853 at p = 0.1
    (√p = 0.316), 0.972 at p = 0.3. So Theorem 5.2, by the paper's proof, holds
    with σ_p in place of √p (:func:`theorem_5_2_bound` uses σ_p).

    Parameters
    ----------
    p : float
        Flip rate in [0, 1/2].

    Returns
    -------
    float
        σ_p.

    Examples
    --------
    >>> from ntk_core import binary_noise_subgaussian_sigma
    >>> round(binary_noise_subgaussian_sigma(0.1), 3), round(0.1 ** 0.5, 3)   # σ_p against the paper's √p
    (0.853, 0.316)
    """
    p = check_rate(p, "p")
    return 2.0 * centred_bernoulli_subgaussian_sigma(p)


def multiclass_noise_subgaussian_sigma(P: ArrayLike) -> np.ndarray:
    """Per-output sub-Gaussian parameters of the one-hot noise ỹ_i − q_i (Theorem 5.3).

    Coordinate h of ỹ_i − q_i, given c_i = c, is a centred Bernoulli(p_{h,c}),
    so its optimal parameter is :func:`centred_bernoulli_subgaussian_sigma`
    (p_{h,c}); over classes, σ_h = max_c of that. Every σ_h ≤ 1/2 (Hoeffding:
    a variable in an interval of length 1 is 1/2-sub-Gaussian), so the paper's
    "bounded by 1 so subgaussian with parameter 1" is valid but twice too large.

    Parameters
    ----------
    P : ArrayLike, shape (K, K)
        Column-stochastic transition matrix.

    Returns
    -------
    numpy.ndarray, shape (K,)
        σ_h for each output h.
    """
    Pm = check_transition_matrix(P)
    sig = np.vectorize(centred_bernoulli_subgaussian_sigma, otypes=[float])(Pm)
    return np.max(sig, axis=1)


def subgaussian_sigma_numeric(values: ArrayLike, probs: ArrayLike) -> float:
    """Optimal sub-Gaussian parameter of a finite distribution, by maximising over s.

    σ² = sup_{s≠0} 2ψ(s)/s², ψ(s) = log E exp(s(X − EX)) (computed with
    log-sum-exp): the smallest σ with E e^{s(X−EX)} ≤ e^{s²σ²/2} for all s. The
    supremum is found on a log grid of s of both signs and refined by a bounded
    scalar search. Used to check the closed forms above.

    Parameters
    ----------
    values : ArrayLike, shape (k,)
        The values the variable takes.
    probs : ArrayLike, shape (k,)
        Their probabilities (summing to 1).

    Returns
    -------
    float
        σ.
    """
    v = as_float64_array(values, "values", ndim=1)
    w = as_float64_array(probs, "probs", ndim=1)
    if v.shape != w.shape or v.size == 0:
        raise ValueError(f"values and probs must be non-empty with equal shapes, got {v.shape} and {w.shape}")
    if np.any(w < 0) or not math.isclose(float(w.sum()), 1.0, abs_tol=1e-9):
        raise ValueError("probs must be non-negative and sum to 1")
    keep = w > 0
    v, logw = v[keep], np.log(w[keep])
    x = v - float(np.exp(logw) @ v)
    scale = float(np.max(np.abs(x)))
    if scale == 0.0:
        return 0.0

    def ratio(s: float) -> float:
        return 2.0 * float(logsumexp(logw + s * x)) / (s * s)

    grid = np.sort(np.concatenate([-np.geomspace(1e-3, 1e3, 600), np.geomspace(1e-3, 1e3, 600)])) / scale
    vals = np.array([ratio(s) for s in grid])
    i = int(np.argmax(vals))
    lo, hi = sorted((grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]))
    if lo < 0 < hi:  # the maximiser is at s -> 0 (the variance)
        return math.sqrt(max(vals[i], float(np.exp(logw) @ x**2)))
    res = minimize_scalar(lambda s: -ratio(s), bounds=(lo, hi), method="bounded", options={"xatol": 1e-12 / scale})
    return math.sqrt(max(vals[i], -float(res.fun)))


# =========================================================================== lemmas


def hsu_kakade_zhang_bound(A: ArrayLike, sigma: float, delta: float) -> float:
    r"""Hsu, Kakade & Zhang (2012, Thm 1) tail bound for ‖Aε‖, paper eq. (12).

    If ε ∈ Rⁿ has independent coordinates, each mean zero and σ-sub-Gaussian,
    then for any matrix A (m × n), with Σ = AᵀA, with probability ≥ 1 − δ

    .. math:: \|A\varepsilon\| &\le \sigma\sqrt{s}, \quad\text{where}\\
              s &= \mathrm{tr}\,\Sigma + 2\sqrt{\mathrm{tr}(\Sigma^2)\log(1/\delta)}\\
              &\quad + 2\|\Sigma\|\log(1/\delta).

    (The paper writes A² for symmetric A.) Returns the right-hand side σ√s.
    It needs every singular value of A, so A must be in memory: a matrix on
    disk raises ``TypeError`` (:func:`lemma_c1_bound` bounds the same term
    through tr K and takes K on disk).

    Parameters
    ----------
    A : ArrayLike, shape (m, n)
        The matrix.
    sigma : float
        σ ≥ 0.
    delta : float
        δ ∈ (0, 1).

    Returns
    -------
    float
        The bound on ‖Aε‖.

    Raises
    ------
    TypeError
        A on disk (a ``.npy`` path, a memory map or an ``OnDiskKernel``).
    """
    if is_on_disk(A):
        raise TypeError(
            "hsu_kakade_zhang_bound needs every singular value of A (an SVD of the whole matrix), so A must be "
            "in memory, not on disk; for a kernel matrix on disk use lemma_c1_bound, which bounds the same "
            "noise term through tr K (streamed) and takes K on disk, or load A with numpy.load if it fits"
        )
    Am = as_float64_array(A, "A", ndim=2)
    sigma = check_interval(sigma, "sigma", 0.0, math.inf)
    L = _log_inv(check_unit_interval_open(delta, "delta"))
    sv = np.linalg.svd(Am, compute_uv=False) ** 2  # eigenvalues of Σ = AᵀA
    inside = sv.sum() + 2.0 * math.sqrt(float(np.sum(sv**2)) * L) + 2.0 * float(sv.max(initial=0.0)) * L
    return sigma * math.sqrt(inside)


@dataclass(frozen=True)
class LemmaC1Bound:
    """Lemma C.1: ‖f*(X) − y‖ ≤ bias + noise + tail with probability ≥ 1 − δ.

    ``bias`` = (λ/2)√(yᵀK⁻¹y), ``noise`` = (σ/(2λ))√tr K, ``tail`` = σ√(2 log(1/δ)).

    Attributes
    ----------
    bias : float
        The bias term (see above); ``total`` sums the three.
    noise : float
        The noise term (see above); ``total`` sums the three.
    tail : float
        The tail term (see above); ``total`` sums the three.
    """

    bias: float
    noise: float
    tail: float

    @property
    def total(self) -> float:
        return self.bias + self.noise + self.tail


@dataclass(frozen=True)
class LemmaC2Bound:
    """Lemma C.2: ‖f*‖_H ≤ signal + noise + tail with probability ≥ 1 − δ.

    ``signal`` = √(yᵀ(K + λ²I)⁻¹y), ``noise`` = σ√n/λ, ``tail`` = (σ/λ)√(2 log(1/δ)).

    Attributes
    ----------
    signal : float
        The signal term (see above); ``total`` sums the three.
    noise : float
        The noise term (see above); ``total`` sums the three.
    tail : float
        The tail term (see above); ``total`` sums the three.
    """

    signal: float
    noise: float
    tail: float

    @property
    def total(self) -> float:
        return self.signal + self.noise + self.tail


def _lemma_inputs(
    K: ArrayLike | KernelMatrix, y: ArrayLike, lam: float, sigma: float, delta: float
) -> tuple[KernelMatrix, np.ndarray, float, float, float]:
    Km = as_kernel_matrix(K)
    yy = check_rows(y, Km.shape[0], "y", ndim=1)
    lam, sigma = check_positive(lam, "lam"), check_interval(sigma, "sigma", 0.0, math.inf)
    return Km, yy, lam, sigma, check_unit_interval_open(delta, "delta")


def lemma_c1_bound(K: ArrayLike | KernelMatrix, y: ArrayLike, lam: float, sigma: float, delta: float) -> LemmaC1Bound:
    r"""Lemma C.1: training error of the KRR solution against the *clean* labels.

    With ỹ = y + ε, ε independent, mean zero, σ-sub-Gaussian (given X, y), with
    probability ≥ 1 − δ

    .. math:: \|f^*(X) - y\| \le{} &\frac\lambda2\sqrt{y^\top K^{-1}y}\\
              &+ \frac{\sigma}{2\lambda}\sqrt{\mathrm{tr}K}\\
              &+ \sigma\sqrt{2\log(1/\delta)}.

    Derivation (checked): f*(X) − y = Aε − λ²(K+λ²I)⁻¹y with A = K(K+λ²I)⁻¹.
    (i) λ²‖(K+λ²I)⁻¹y‖ ≤ (λ/2)√(yᵀK⁻¹y) since (s+λ²)² ≥ 4sλ² (AM–GM).
    (ii) HKZ (:func:`hsu_kakade_zhang_bound`) with tr A² ≤ tr K/(4λ²),
    tr A⁴ ≤ (27/256) tr K/λ² ≤ tr K/(9λ²) (AM–GM on λ² + 3·s/3) and ‖A²‖ ≤ 1;
    then √(a² + 2ab' + b²) ≤ a + b with a = σ√tr K/(2λ), b = σ√(2 log(1/δ))
    because 2√(tr K·log(1/δ)/(9λ²)) ≤ 2ab/σ². ``y`` has shape (n,); K must be
    positive definite.

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite; on disk it is read
        in blocks, never whole (see "Kernel matrices on disk" above).
    y : ArrayLike, shape (n,)
        Clean labels.
    lam : float
        λ > 0.
    sigma : float
        σ ≥ 0.
    delta : float
        δ ∈ (0, 1).

    Returns
    -------
    LemmaC1Bound
        The three terms; ``total`` is their sum.
    """
    Km, yy, lam, sigma, delta = _lemma_inputs(K, y, lam, sigma, delta)
    return _lemma_c1(float(complexity(Km, yy)), Km.trace(), lam, sigma, delta)


def _lemma_c1(comp: float, trace: float, lam: float, sigma: float, delta: float) -> LemmaC1Bound:
    return LemmaC1Bound(
        bias=0.5 * lam * math.sqrt(max(comp, 0.0)),
        noise=sigma / (2.0 * lam) * math.sqrt(max(trace, 0.0)),
        tail=sigma * math.sqrt(2.0 * _log_inv(delta)),
    )


def lemma_c2_bound(K: ArrayLike | KernelMatrix, y: ArrayLike, lam: float, sigma: float, delta: float) -> LemmaC2Bound:
    r"""Lemma C.2: RKHS norm of the KRR solution trained on noisy labels.

    With probability ≥ 1 − δ,

    .. math:: &\|f^*\|_{\mathcal H} \le \sqrt{y^\top(K+\lambda^2I)^{-1}y}\\
              &\quad + \frac{\sigma}{\lambda}\big(\sqrt n + \sqrt{2\log(1/\delta)}\big).

    Derivation (checked): ‖f*‖²_H = ỹᵀ(K+λ²I)⁻¹K(K+λ²I)⁻¹ỹ ≤ ỹᵀ(K+λ²I)⁻¹ỹ;
    the triangle inequality in that norm splits y and ε; ε-part ≤ ‖ε‖/λ; HKZ
    with A = I gives ‖ε‖ ≤ σ√(n + 2√(n log) + 2 log) ≤ σ(√n + √(2 log(1/δ))).
    Does not need K invertible.

    Parameters
    ----------
    K, y, lam, sigma, delta
        As in :func:`lemma_c1_bound`.

    Returns
    -------
    LemmaC2Bound
        The three terms; ``total`` is their sum.
    """
    Km, yy, lam, sigma, delta = _lemma_inputs(K, y, lam, sigma, delta)
    return _lemma_c2(ridge_complexity(Km, yy, lam), Km.shape[0], lam, sigma, delta)


def _lemma_c2(ridge: float, n: int, lam: float, sigma: float, delta: float) -> LemmaC2Bound:
    return LemmaC2Bound(
        signal=math.sqrt(max(ridge, 0.0)),
        noise=sigma * math.sqrt(n) / lam,
        tail=sigma / lam * math.sqrt(2.0 * _log_inv(delta)),
    )


# =========================================================================== Theorem 5.1 machinery


#: The terms of Theorem 5.1's explicit bound (the fields of :class:`AdditiveNoiseBound` that its ``total`` adds),
#: in the order of the proof; Theorems 5.2 and 5.3 rescale the same terms.
BOUND_TERMS: tuple[str, ...] = (
    "train_bias",
    "train_noise",
    "train_tail",
    "rademacher_signal",
    "rademacher_noise",
    "rademacher_tail",
    "rademacher_net",
    "concentration",
)


class _Verdict(abc.ABC):
    """What a theorem's bound means, for people: its total first, then whether it says anything.

    A bound on a probability (or on a loss in [0, 1], Theorem 5.1's setting) says nothing at 1 or above: it is
    **vacuous**. Its lower limit is the minimum over λ of its leading terms (:func:`leading_minimum`), below the
    whole bound at every λ: when that limit is ≥ 1 no λ can help. The leading terms' limit scales like
    (yᵀK⁻¹y/n)^{1/4} (with tr K/n and σ fixed), so it falls under 1 once yᵀK⁻¹y/n shrinks by the factor
    ``lower_limit⁴``; labels a kernel fits at a bounded RKHS norm (Remark 5.2) have yᵀK⁻¹y/n ∝ 1/n, so n must grow
    by that factor. :func:`non_vacuous_n` reads the growth off bounds measured at several n instead.
    """

    #: what the total bounds, for the report
    _bounds_what = ""
    #: the factor between the summed terms and the total, named for the report ("" when there is none)
    _scale_name = ""

    @abc.abstractmethod
    def _additives(self) -> tuple[AdditiveNoiseBound, ...]:
        """The Theorem 5.1 bounds the total is made of (one for 5.1 and 5.2, one per class for 5.3)."""

    def _leading_factor(self) -> float:
        return 1.0

    @property
    @abc.abstractmethod
    def total(self) -> float:
        """The bound's value."""

    @property
    def lower_limit(self) -> float:
        """min over λ of the leading terms (train_bias + train_noise + rademacher_noise at their best λ), scaled as
        the total is: a lower bound on the total at every λ."""
        parts = self._additives()
        a = sum(2.0 * b.train_bias / b.lam for b in parts)  # Σ_h √(C_h/n)
        b_ = sum(5.0 * math.sqrt(b.trace / b.n) * b.sigma for b in parts)
        return self._leading_factor() * math.sqrt(a * b_)

    @property
    def vacuous(self) -> bool:
        """Whether the bound says nothing: its total is ≥ 1, the largest value of what it bounds."""
        return not self.total < 1.0

    @property
    def verdict(self) -> str:
        """``"non-vacuous"``, ``"vacuous at this λ"`` (another λ may help: the lower limit is under 1) or
        ``"vacuous at every λ"``."""
        if not self.vacuous:
            return "non-vacuous"
        return "vacuous at every λ" if self.lower_limit >= 1.0 else "vacuous at this λ"

    def report(self, measured: float | None = None) -> str:
        """The bound for people: the total and its verdict first, what would change the verdict, the measured
        error beside it where given (``measured``), then every term."""
        lines = [f"{self._bounds_what} ≤ {self.total:.4g}: {self.verdict}"]
        low = self.lower_limit
        if self.verdict == "vacuous at every λ":
            lines.append(
                f"  no λ brings it under 1: its leading terms alone are {low:.4g} at their best λ. They fall under 1 "
                f"once yᵀK⁻¹y/n is {low**4:.3g} times smaller (tr K/n and σ as here): for labels the kernel fits "
                f"at a bounded norm (yᵀK⁻¹y/n ∝ 1/n), at {low**4:.3g} times the samples"
            )
        elif self.verdict == "vacuous at this λ":
            lines.append(f"  another λ may help: the leading terms' minimum over λ is {low:.4g} < 1 (leading_lambda)")
        if measured is not None:
            holds = "holds" if measured <= self.total else "VIOLATED"
            meaning = " (says nothing: the bound is vacuous)" if self.vacuous else ""
            lines.append(f"  measured {measured:.4g}: the bound {holds}{meaning}")
        if self._additives()[0].ridge == "complexity":
            lines.append(
                "  computed with yᵀK⁻¹y for the ridge quadratic yᵀ(K + λ²I)⁻¹y (ridge='complexity'): above the exact bound"
            )
        lines.append("  terms: " + ", ".join(f"{k} {v:.4g}" for k, v in self._shown_terms()))
        return "\n".join(lines)

    def _shown_terms(self) -> list[tuple[str, float]]:
        parts = self._additives()
        shown = [(name, sum(float(getattr(b, name)) for b in parts)) for name in BOUND_TERMS]
        scale = [(self._scale_name, self._leading_factor())] if self._scale_name else []
        return [("lam", parts[0].lam), ("lower_limit", self.lower_limit), *scale, *shown]

    def __str__(self) -> str:
        return self.report()


def non_vacuous_n(ns: ArrayLike, lower_limits: ArrayLike) -> float:
    """The n at which a bound's lower limit (``lower_limit`` of the bounds at each n of ``ns``) falls under 1,
    read off its measured growth: a power law fitted to the last two sizes, extrapolated. ``inf`` when it does not
    fall with n; the smallest n given when it is under 1 there already.

    Parameters
    ----------
    ns : ArrayLike
        Sample sizes, at least two, increasing.
    lower_limits : ArrayLike
        The lower limit at each (``BinaryBound.lower_limit`` and the like).

    Returns
    -------
    float
        The extrapolated n (the fitted exponent is the slope of log limit against log n).
    """
    n = as_float64_array(ns, "ns", ndim=1)
    low = as_float64_array(lower_limits, "lower_limits", ndim=1)
    if n.size < 2 or n.size != low.size or np.any(np.diff(n) <= 0) or np.any(n <= 0) or np.any(low <= 0):
        raise ValueError("ns must be at least two increasing sizes > 0, with one lower limit > 0 each")
    below = np.flatnonzero(low < 1.0)
    if below.size:
        return float(n[below[0]])
    slope = math.log(low[-1] / low[-2]) / math.log(n[-1] / n[-2])
    if slope >= 0:
        return math.inf
    return float(n[-1] * low[-1] ** (-1.0 / slope))


@dataclass(frozen=True)
class AdditiveNoiseBound(_Verdict):
    """Theorem 5.1 with every constant explicit; ``total`` bounds E ℓ(f*(x), y).

    Terms (τ = √tr K, L₃ = log(3/δ), ε the net spacing, M the loss range):

    * ``train_bias``  = (λ/2)√(yᵀK⁻¹y / n)          — Lemma C.1 / √n
    * ``train_noise`` = (σ/(2λ)) τ/√n                — Lemma C.1 / √n
    * ``train_tail``  = σ√(2L₃/n)                    — Lemma C.1 / √n
    * ``rademacher_signal`` = 2τ/n · √(yᵀ(K+λ²I)⁻¹y)  — 2R̂, Lemma C.2 signal
    * ``rademacher_noise``  = 2τ/n · σ√n/λ             — 2R̂, Lemma C.2 noise
    * ``rademacher_tail``   = 2τ/n · (σ/λ)√(2L₃)       — 2R̂, Lemma C.2 tail
    * ``rademacher_net``    = 2τ/n · ε                 — net rounding B ≤ B' + ε
    * ``concentration`` = 3M√(log(6(N+1)/δ)/(2n)), N = ⌈ȳ√n/(λε)⌉ — union bound

    Attributes
    ----------
    n : int
        Sample size.
    lam : float
        λ, the ridge is λ².
    sigma : float
        σ, the sub-Gaussian parameter of the noise.
    delta : float
        δ, the failure probability.
    trace : float
        tr K.
    train_bias : float
        (λ/2)√(yᵀK⁻¹y / n), from Lemma C.1.
    train_noise : float
        (σ/(2λ))√tr K/√n, from Lemma C.1.
    train_tail : float
        σ√(2 log(3/δ)/n), from Lemma C.1.
    rademacher_signal : float
        2√tr K/n · √(yᵀ(K+λ²I)⁻¹y), from Lemma C.2.
    rademacher_noise : float
        2√tr K/n · σ√n/λ, from Lemma C.2.
    rademacher_tail : float
        2√tr K/n · (σ/λ)√(2 log(3/δ)), from Lemma C.2.
    rademacher_net : float
        2√tr K/n · ε, the rounding of the ε-net.
    concentration : float
        The uniform-convergence term.
    net_size : int
        N + 1, the points of the ε-net.
    ridge : str
        ``"exact"``: ``rademacher_signal`` reads yᵀ(K+λ²I)⁻¹y; ``"complexity"``: it reads its upper bound
        yᵀK⁻¹y instead (see ``ridge`` of :func:`theorem_5_1_bound`), and ``total`` is an upper bound on the
        exact one.
    """

    n: int
    lam: float
    sigma: float
    delta: float
    trace: float
    train_bias: float
    train_noise: float
    train_tail: float
    rademacher_signal: float
    rademacher_noise: float
    rademacher_tail: float
    rademacher_net: float
    concentration: float
    net_size: int
    ridge: str = "exact"

    _bounds_what = "Theorem 5.1: E ℓ(f*(x), y)"

    def _additives(self) -> tuple[AdditiveNoiseBound, ...]:
        return (self,)

    @property
    def total(self) -> float:
        return (
            self.train_bias
            + self.train_noise
            + self.train_tail
            + self.rademacher_signal
            + self.rademacher_noise
            + self.rademacher_tail
            + self.rademacher_net
            + self.concentration
        )


def _additive_bound(
    K: KernelMatrix,
    y: np.ndarray,
    lam: float,
    sigma: float,
    delta: float,
    eps_net: float,
    label_bound: float,
    loss_bound: float,
    comp: float | None = None,
    ridge: float | None = None,
    ridge_term: str = "exact",
) -> AdditiveNoiseBound:
    """Shared machinery of Theorems 5.1–5.3 (validated inputs; see theorem_5_1_bound).

    ``comp`` = yᵀK⁻¹y and ``ridge`` = yᵀ(K + λ²I)⁻¹y if already known (Theorem 5.3
    on disk solves for all outputs at once), else computed here; with ``ridge_term="complexity"``
    the ridge quadratic is yᵀK⁻¹y, its upper bound.
    """
    _check_bounded_labels(y, label_bound, "y")
    n = K.shape[0]
    trace = K.trace()
    if not trace > 0.0:
        raise ValueError(f"tr K must be > 0 for a kernel matrix, got {trace:.6g}")
    tau = math.sqrt(trace)
    comp = float(complexity(K, y)) if comp is None else comp
    if ridge is None:
        ridge = comp if ridge_term == "complexity" else float(K.ridge_quadratic(y, lam))
    lc1 = _lemma_c1(comp, trace, lam, sigma, delta / 3.0)
    lc2 = _lemma_c2(ridge, n, lam, sigma, delta / 3.0)
    rad = 2.0 * tau / n
    N = math.ceil(label_bound * math.sqrt(n) / (lam * eps_net))
    return AdditiveNoiseBound(
        n=n,
        lam=lam,
        sigma=sigma,
        delta=delta,
        trace=trace,
        train_bias=lc1.bias / math.sqrt(n),
        train_noise=lc1.noise / math.sqrt(n),
        train_tail=lc1.tail / math.sqrt(n),
        rademacher_signal=rad * lc2.signal,
        rademacher_noise=rad * lc2.noise,
        rademacher_tail=rad * lc2.tail,
        rademacher_net=rad * eps_net,
        concentration=3.0 * loss_bound * math.sqrt(math.log(6.0 * (N + 1) / delta) / (2.0 * n)),
        net_size=N + 1,
        ridge=ridge_term,
    )


def theorem_5_1_bound(
    K: ArrayLike | KernelMatrix,
    y: ArrayLike,
    lam: float,
    sigma: float,
    delta: float,
    eps_net: float = 1.0,
    ridge: str = "exact",
) -> AdditiveNoiseBound:
    """Theorem 5.1 (additive label noise) with every constant written out.

    Setting: D over R^d × [−1, 1]; ỹ = y + ε with ε mean zero, σ-sub-Gaussian
    given (x, y); ℓ : R × R → [0, 1], 1-Lipschitz in its first argument,
    ℓ(y, y) = 0. Then with probability ≥ 1 − δ over the sample,
    E ℓ(f*(x), y) ≤ ``total`` (see :class:`AdditiveNoiseBound` for the terms).

    Derivation, following Appendix C.1, with δ split in three:

    1. *Training error* (prob. 1 − δ/3): (1/n)Σℓ(f*(x_i), y_i) ≤ (1/n)Σ|f*(x_i) − y_i|
       ≤ ‖f*(X) − y‖/√n ≤ Lemma C.1(δ/3)/√n.
    2. *RKHS norm* (prob. 1 − δ/3): ‖f*‖_H ≤ B' = Lemma C.2(δ/3).
    3. *Uniform convergence* (prob. 1 − δ/3): for the ball F_B = {f ∈ H : ‖f‖_H ≤ B}
       (the whole ball, not the span of k(·, X) used in the paper, which depends
       on the sample — see the errata chapter),
       R̂_S(F_B) ≤ B√tr K / n (Bartlett & Mendelson 2002, Lemma 22), Talagrand's
       contraction (constant 1) passes it to the loss class, and for losses in
       [0, M] (Mohri et al. 2012, Thm 3.3)
       E ℓ ≤ Ê ℓ + 2R̂_S + 3M√(log(2/δ₀)/(2n)).
    4. *ε-net*: B' ∈ [b₀, b₀ + ‖y‖/λ] with b₀ = (σ/λ)(√n + √(2 log(3/δ)))
       data independent and ‖y‖ ≤ √n; the grid b₀ + jε, j = 0..N,
       N = ⌈√n/(λε)⌉, contains a B with B' ≤ B ≤ B' + ε. A union bound over its
       N + 1 points with δ₀ = δ/(3(N+1)) gives the ``concentration`` term
       3√(log(6(N+1)/δ)/(2n)) and 2R̂_S(F_B) ≤ 2(B' + ε)√tr K / n.

    ``eps_net`` is ε (the paper takes 1). ``lam`` > 0, ``sigma`` ≥ 0, |y| ≤ 1,
    K positive definite (for yᵀK⁻¹y). Uses the actual tr K (no tr K = O(n)
    assumption is needed). Setting tr K = O(n) recovers the printed form with
    λ + O(1) = λ + 4√(tr K/n) and O(σ/λ) = (5σ/(2λ))√(tr K/n).

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite; on disk it is read
        in blocks, never whole (see "Kernel matrices on disk" above).
    y : ArrayLike, shape (n,)
        Clean targets, ``|y_i| ≤ 1``.
    lam : float
        λ > 0; the predictor is KRR with ridge λ² I (eq. 8).
    sigma : float
        σ ≥ 0, the sub-Gaussian parameter of the additive noise ε.
    delta : float
        Failure probability δ ∈ (0, 1).
    eps_net : float
        ε > 0 of the ε-net over the RKHS-norm radius (the paper takes 1).
    ridge : {"exact", "complexity"}
        The ridge quadratic yᵀ(K + λ²I)⁻¹y of Lemma C.2's signal term: ``"exact"`` (default) solves
        with K + λ²I; ``"complexity"`` reads its upper bound yᵀK⁻¹y (the quadratic does not increase
        with λ), so ``total`` bounds the exact bound from above, from the one solve the complexity
        needs — half the work for a large K on disk.

    Returns
    -------
    AdditiveNoiseBound
        Every term of eq. (10) with its constant; ``total`` is the bound on
        E ℓ(f*(x), y).

    Raises
    ------
    ValueError
        λ ≤ 0, σ < 0, δ ∉ (0, 1), ε ≤ 0, ``|y_i| > 1``, or K not symmetric
        positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core import theorem_5_1_bound
    >>> x = np.linspace(-1, 1, 8)
    >>> K = np.exp(-(x[:, None] - x[None, :]) ** 2) + 0.1 * np.eye(8)   # a positive definite kernel
    >>> y = 0.5 * np.sign(x + 0.01)
    >>> bound = theorem_5_1_bound(K, y, lam=1.0, sigma=0.1, delta=0.05)
    >>> round(bound.total, 3)      # vacuous (> 1) at n = 8: the terms shrink like 1/√n
    4.126
    >>> bound.n, bound.net_size
    (8, 4)
    """
    Km = as_kernel_matrix(K)
    yy = check_rows(y, Km.shape[0], "y", ndim=1)
    return _additive_bound(
        Km,
        yy,
        check_positive(lam, "lam"),
        check_interval(sigma, "sigma", 0.0, math.inf),
        check_unit_interval_open(delta, "delta"),
        check_positive(eps_net, "eps_net"),
        label_bound=1.0,
        loss_bound=1.0,
        ridge_term=check_choice(ridge, "ridge", RIDGE_TERMS),
    )


# =========================================================================== printed O(·) forms


@dataclass(frozen=True)
class PrintedBound:
    """A theorem's bound as printed, with every O(·) replaced by ``constant`` × its argument.

    ``leading`` is the (λ + C)/2 √(complexity/n) term, ``noise`` the O(σ/λ)
    term, ``tail`` the σ√(log(1/δ)/n) term, ``noise_tail`` the
    (σ/λ)√(log(1/δ)/n) term (Theorem 5.1 only; 0 elsewhere) and ``net`` the
    √(log(n/(δλ))/n) term, each with the theorem's prefactors (1/(1−2p),
    K/gap). log(n/(δλ)) < 0 (λ > n/δ) is clipped to 0.

    Attributes
    ----------
    theorem : str
        ``"5.1"``, ``"5.2"`` or ``"5.3"``.
    constant : float
        C, the value each O(·) is read as.
    leading : float
        The ``leading`` term described above; ``total`` sums the five.
    noise : float
        The ``noise`` term described above; ``total`` sums the five.
    tail : float
        The ``tail`` term described above; ``total`` sums the five.
    noise_tail : float
        The ``noise_tail`` term described above; ``total`` sums the five.
    net : float
        The ``net`` term described above; ``total`` sums the five.
    trace_per_n : float
        tr K/n: the printed form assumes it is O(1), and warns (:class:`PrintedScaleWarning`) when it is not.
    """

    theorem: str
    constant: float
    leading: float
    noise: float
    tail: float
    noise_tail: float
    net: float
    trace_per_n: float = math.nan

    @property
    def total(self) -> float:
        return self.leading + self.noise + self.tail + self.noise_tail + self.net


def _printed_terms(
    sqrt_complexity_over_n: float, n: int, lam: float, sigma: float, delta: float, C: float
) -> tuple[float, float, float, float, float]:
    """The five terms of eq. (10) with O(·) := C·(·): leading, noise, tail, noise_tail, net."""
    L = _log_inv(delta)
    return (
        0.5 * (lam + C) * sqrt_complexity_over_n,
        C * sigma / lam,
        C * sigma * math.sqrt(L / n),
        C * sigma / lam * math.sqrt(L / n),
        C * math.sqrt(max(math.log(n / (delta * lam)), 0.0) / n),
    )


def theorem_5_1_printed(
    K: ArrayLike | KernelMatrix, y: ArrayLike, lam: float, sigma: float, delta: float, C: float = 1.0
) -> PrintedBound:
    r"""Theorem 5.1, eq. (10), as printed:

    .. math:: &\frac{\lambda + O(1)}{2}\sqrt{\frac{y^\top K^{-1}y}{n}} + O\Big(\frac\sigma\lambda\Big)\\
              &+ O\Big(\sigma\sqrt{\tfrac{\log(1/\delta)}{n}}\\
              &\qquad + \frac\sigma\lambda\sqrt{\tfrac{\log(1/\delta)}{n}}\\
              &\qquad + \sqrt{\tfrac{\log\frac{n}{\delta\lambda}}{n}}\Big)

    with each O(·) read as C·(·). This is *not* a rigorous bound for any
    particular C; use :func:`theorem_5_1_bound` for one.

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite; on disk it is read
        in blocks, never whole (see "Kernel matrices on disk" above). Its tr K/n should be O(1): the
        printed form warns (:class:`PrintedScaleWarning`) otherwise.
    y : ArrayLike, shape (n,)
        Clean targets.
    lam : float
        λ > 0.
    sigma : float
        σ ≥ 0.
    delta : float
        δ ∈ (0, 1).
    C : float
        The constant every O(·) is read as.

    Returns
    -------
    PrintedBound
        The printed form's terms; ``total`` is their sum.
    """
    Km = as_kernel_matrix(K)
    yy = check_rows(y, Km.shape[0], "y", ndim=1)
    lam, sigma = check_positive(lam, "lam"), check_interval(sigma, "sigma", 0.0, math.inf)
    delta, C = check_unit_interval_open(delta, "delta"), check_interval(C, "C", 0.0, math.inf)
    n = Km.shape[0]
    terms = _printed_terms(math.sqrt(max(float(complexity(Km, yy)), 0.0) / n), n, lam, sigma, delta, C)
    return PrintedBound("5.1", C, *terms, trace_per_n=_printed_scale("5.1", Km))


# =========================================================================== Theorem 5.2


@dataclass(frozen=True)
class BinaryBound(_Verdict):
    """Theorem 5.2 with explicit constants: Pr[sgn f*(x) ≠ y] ≤ ``total``.

    ``total`` = ``rescale`` × ``additive.total``, where ``additive`` is
    Theorem 5.1 for the clean labels (1 − 2p)y, noise parameter ``sigma`` =
    σ_p (the true one), the ramp loss (range M = 1 − 2p) and ``rescale`` =
    1/(1 − 2p). ``sigma_paper`` = √p is the value the paper's proof asserts
    (not a valid sub-Gaussian parameter; see
    :func:`binary_noise_subgaussian_sigma`).

    Attributes
    ----------
    p : float
        The flip rate.
    sigma : float
        σ_p, the true sub-Gaussian parameter of the noise.
    sigma_paper : float
        √p, the paper's value.
    rescale : float
        1/(1 − 2p).
    additive : AdditiveNoiseBound
        Theorem 5.1 for the clean labels (1 − 2p)y.
    """

    p: float
    sigma: float
    sigma_paper: float
    rescale: float
    additive: AdditiveNoiseBound

    _bounds_what = "Theorem 5.2: Pr[sgn f*(x) ≠ y]"
    _scale_name = "rescale"

    def _additives(self) -> tuple[AdditiveNoiseBound, ...]:
        return (self.additive,)

    def _leading_factor(self) -> float:
        return self.rescale

    @property
    def total(self) -> float:
        return self.rescale * self.additive.total


def _binary_inputs(
    K: ArrayLike | KernelMatrix, y: ArrayLike, lam: float, p: float, delta: float
) -> tuple[KernelMatrix, np.ndarray, float, float, float]:
    Km = as_kernel_matrix(K)
    yy = check_rows(y, Km.shape[0], "y", ndim=1)
    check_binary_labels(yy, "y")
    return Km, yy, check_positive(lam, "lam"), check_rate(p, "p"), check_unit_interval_open(delta, "delta")


def ramp_loss(u: ArrayLike, y: ArrayLike, p: float) -> np.ndarray:
    r"""The ramp loss of the proof of Theorem 5.2 (Appendix C.2), with ȳ = (1 − 2p)y.

    .. math:: \ell^{ramp}(u, \bar y) &= \min\Big(1-2p,\ \max\big(0,\\
              &\quad (1-2p) - \frac{u\bar y}{1-2p}\big)\Big),

    i.e. 1 − 2p for uȳ ≤ 0, linear for 0 < uȳ < (1 − 2p)², 0 beyond. It is
    1-Lipschitz in u, ℓ(ȳ, ȳ) = 0, takes values in [0, 1 − 2p] and
    ℓ(u, ȳ) ≥ (1 − 2p)·1[sgn(u) ≠ y]. ``y`` holds clean labels in {−1, +1}
    (broadcast against ``u``).

    Parameters
    ----------
    u : ArrayLike
        Predictions.
    y : ArrayLike
        Clean labels in {−1, +1}, broadcast against ``u``.
    p : float
        Flip rate in [0, 1/2).

    Returns
    -------
    numpy.ndarray
        The loss, element-wise, in [0, 1 − 2p].
    """
    uu = as_float64_array(u, "u")
    yy = as_float64_array(y, "y")
    check_binary_labels(yy, "y")
    s = 1.0 - 2.0 * check_rate(p, "p")
    return np.clip(s - uu * (s * yy) / s, 0.0, s)


def theorem_5_2_bound(
    K: ArrayLike | KernelMatrix,
    y: ArrayLike,
    lam: float,
    p: float,
    delta: float,
    eps_net: float = 1.0,
    ridge: str = "exact",
) -> BinaryBound:
    """Theorem 5.2 (binary classification, flip rate p) with explicit constants.

    Reduction to Theorem 5.1 as in Appendix C.2: the clean labels are
    ȳ = (1 − 2p)y ∈ {±(1 − 2p)}, so that ε = ỹ − ȳ has mean zero; its
    sub-Gaussian parameter is σ_p = :func:`binary_noise_subgaussian_sigma` (p),
    *not* O(√p). The ramp loss ℓ^ramp(u, ȳ) (1 − 2p for uȳ ≤ 0, linear down to
    0 at uȳ = (1 − 2p)²) is 1-Lipschitz, vanishes at u = ȳ, takes values in
    [0, 1 − 2p] — so the concentration term carries M = 1 − 2p — and
    ℓ^ramp ≥ (1 − 2p)·1[sgn u ≠ y]. Dividing by 1 − 2p gives the error bound.
    In the ε-net, ‖ȳ‖ ≤ (1 − 2p)√n. ``y`` holds the clean labels in {−1, +1}.

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite; on disk it is read
        in blocks, never whole (see "Kernel matrices on disk" above).
    y : ArrayLike, shape (n,)
        Clean labels in {−1, +1}.
    lam : float
        λ > 0; the predictor is KRR with ridge λ² I on the noisy labels (eq. 8).
    p : float
        Flip rate p ∈ [0, 1/2).
    delta : float
        Failure probability δ ∈ (0, 1).
    eps_net : float
        ε > 0 of the ε-net (the paper takes 1).
    ridge : {"exact", "complexity"}
        The ridge quadratic solved or bounded by yᵀK⁻¹y, as for :func:`theorem_5_1_bound`.

    Returns
    -------
    BinaryBound
        The terms of Theorem 5.2; ``total`` bounds the clean classification
        error Pr[sgn f*(x) ≠ y].

    Raises
    ------
    ValueError
        p ∉ [0, 1/2), labels not ±1, or the checks of :func:`theorem_5_1_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core import theorem_5_2_bound
    >>> x = np.linspace(-1, 1, 8)
    >>> K = np.exp(-(x[:, None] - x[None, :]) ** 2) + 0.1 * np.eye(8)   # a positive definite kernel
    >>> y = np.sign(x + 0.01)
    >>> bound = theorem_5_2_bound(K, y, lam=1.0, p=0.2, delta=0.05)
    >>> round(bound.total, 3)
    13.872
    >>> round(bound.rescale, 4)    # 1 / (1 − 2p)
    1.6667
    """
    Km, yy, lam, p, delta = _binary_inputs(K, y, lam, p, delta)
    scale = 1.0 - 2.0 * p
    sigma = binary_noise_subgaussian_sigma(p)
    add = _additive_bound(
        Km,
        scale * yy,
        lam,
        sigma,
        delta,
        check_positive(eps_net, "eps_net"),
        label_bound=scale,
        loss_bound=scale,
        ridge_term=check_choice(ridge, "ridge", RIDGE_TERMS),
    )
    return BinaryBound(p=p, sigma=sigma, sigma_paper=math.sqrt(p), rescale=1.0 / scale, additive=add)


def theorem_5_2_printed(
    K: ArrayLike | KernelMatrix, y: ArrayLike, lam: float, p: float, delta: float, C: float = 1.0
) -> PrintedBound:
    r"""Theorem 5.2 as printed, O(·) := C·(·):

    .. math:: &\frac{\lambda + O(1)}{2}\sqrt{\frac{y^\top K^{-1}y}{n}}\\
              &+ \frac{1}{1-2p} O\Big(\frac{\sqrt p}{\lambda} + \sqrt{\tfrac{p\log(1/\delta)}{n}}\\
              &\qquad + \sqrt{\tfrac{\log\frac{n}{\delta\lambda}}{n}}\Big)

    i.e. Theorem 5.1's printed terms with σ = √p, the (σ/λ)√(log(1/δ)/n) term
    dropped (as in the paper) and the non-leading terms divided by 1 − 2p.
    Note that σ = √p is the paper's claim; the true parameter is larger
    (:func:`binary_noise_subgaussian_sigma`).

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive definite; on disk it is read
        in blocks, never whole (see "Kernel matrices on disk" above). Its tr K/n should be O(1): the
        printed form warns (:class:`PrintedScaleWarning`) otherwise.
    y : ArrayLike, shape (n,)
        Clean labels in {−1, +1}.
    lam : float
        λ > 0.
    p : float
        Flip rate in [0, 1/2).
    delta : float
        δ ∈ (0, 1).
    C : float
        The constant every O(·) is read as.

    Returns
    -------
    PrintedBound
        The printed form's terms; ``total`` is their sum.
    """
    Km, yy, lam, p, delta = _binary_inputs(K, y, lam, p, delta)
    C = check_interval(C, "C", 0.0, math.inf)
    n = Km.shape[0]
    lead, noise, tail, _, net = _printed_terms(
        math.sqrt(max(float(complexity(Km, yy)), 0.0) / n), n, lam, math.sqrt(p), delta, C
    )
    r = 1.0 / (1.0 - 2.0 * p)
    return PrintedBound("5.2", C, lead, r * noise, r * tail, 0.0, r * net, trace_per_n=_printed_scale("5.2", Km))


# =========================================================================== Theorem 5.3


@dataclass(frozen=True)
class MulticlassBound(_Verdict):
    """Theorem 5.3 with explicit constants: top-1 error ≤ ``total`` = Σ_h per_output[h].total / gap.

    ``per_output[h]`` is Theorem 5.1 for output h with clean labels q⁽ʰ⁾,
    noise parameter ``sigmas[h]`` (≤ 1/2; the paper uses 1) and confidence δ/K.

    Attributes
    ----------
    gap : float
        gap(P) > 0.
    sigmas : numpy.ndarray
        σ_h per output, shape ``(K,)``.
    per_output : tuple[AdditiveNoiseBound, ...]
        Theorem 5.1 for each output h.
    """

    gap: float
    sigmas: np.ndarray
    per_output: tuple[AdditiveNoiseBound, ...]

    _bounds_what = "Theorem 5.3: the top-1 error"
    _scale_name = "1/gap"

    def _additives(self) -> tuple[AdditiveNoiseBound, ...]:
        return self.per_output

    def _leading_factor(self) -> float:
        return 1.0 / self.gap

    @property
    def total(self) -> float:
        return sum(b.total for b in self.per_output) / self.gap


def _multiclass_inputs(
    K: ArrayLike | KernelMatrix, labels: ArrayLike, P: ArrayLike, lam: float, delta: float
) -> tuple[KernelMatrix, np.ndarray, np.ndarray, float, float, float]:
    Pm = check_transition_matrix(P)
    Km = as_kernel_matrix(_per_output_kernel(K))
    c = check_class_labels(labels, Pm.shape[0])
    if c.shape[0] != Km.shape[0]:
        raise ValueError(f"labels must have n = {Km.shape[0]} entries to match K, got {c.shape[0]}")
    g = _require_positive_gap(Pm)
    return Km, Pm, Pm[:, c], g, check_positive(lam, "lam"), check_unit_interval_open(delta, "delta")


def theorem_5_3_bound(
    K: ArrayLike | KernelMatrix,
    labels: ArrayLike,
    P: ArrayLike,
    lam: float,
    delta: float,
    eps_net: float = 1.0,
    ridge: str = "exact",
) -> MulticlassBound:
    """Theorem 5.3 (K-class, transition matrix P) with explicit constants.

    Reduction to Theorem 5.1 as in Appendix C.3: for each output h, the clean
    labels are q⁽ʰ⁾ (row h of Q = P·Y, in [0, 1]) and ỹ⁽ʰ⁾ − q⁽ʰ⁾ is mean zero
    with parameter σ_h = :func:`multiclass_noise_subgaussian_sigma` (P)[h].
    Theorem 5.1 at confidence δ/K for the truncated loss min(|u − v|, 1)
    (the paper uses |u − v|, which is not bounded by 1 — see the errata chapter) and a
    union bound over h hold together with probability ≥ 1 − δ. If
    c ∉ argmax_h f⁽ʰ⁾(x), some h' ≠ c has f⁽ʰ'⁾ ≥ f⁽ᶜ⁾ and then
    Σ_h min(|f⁽ʰ⁾(x) − p_{h,c}|, 1) ≥ min(p_cc − p_h'c, 1) ≥ gap, so Markov's
    inequality bounds the error by Σ_h E min(|f⁽ʰ⁾ − p_{h,c}|, 1) / gap.

    ``labels`` are the clean classes (ints in 0..K−1), ``P[c', c]`` =
    Pr[noisy c' | clean c]; raises ``ValueError`` when gap(P) ≤ 0.

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n) or (n, n, O, O)
        The one kernel k(X, X) that eq. (9) uses for every output, symmetric positive definite; on disk it is
        read in blocks, never whole (see "Kernel matrices on disk" above). For a network with O outputs pass
        its NTK per output, ``empirical_ntk(model, x, output="trace") / O`` (the mean of its output blocks: k
        itself at infinite width, where the full NTK is k ⊗ I). A full kernel ``(n, n, O, O)`` is accepted when
        it has that form k ⊗ I (to the symmetry tolerance of its dtype); a finite network's is not, and is
        refused with this advice.
    labels : ArrayLike, shape (n,)
        Clean classes, ints in 0..K−1.
    P : ArrayLike, shape (K, K)
        Column-stochastic transition matrix, ``P[c', c]`` = Pr[noisy c' | clean c].
    lam : float
        λ > 0; the predictor is multi-output KRR with ridge λ² I (eq. 9).
    delta : float
        Failure probability δ ∈ (0, 1).
    eps_net : float
        ε > 0 of the ε-net (the paper takes 1).
    ridge : {"exact", "complexity"}
        The ridge quadratic solved or bounded by yᵀK⁻¹y, as for :func:`theorem_5_1_bound`.

    Returns
    -------
    MulticlassBound
        ``gap`` = gap(P), the per-output bounds of Theorem 5.1 and ``total``, the
        bound on the clean classification error.

    Raises
    ------
    ValueError
        gap(P) ≤ 0, P not column-stochastic, labels outside 0..K−1, or the checks
        of :func:`theorem_5_1_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core import theorem_5_3_bound
    >>> x = np.linspace(-1, 1, 8)
    >>> K = np.exp(-(x[:, None] - x[None, :]) ** 2) + 0.1 * np.eye(8)   # a positive definite kernel
    >>> from ntk_core import symmetric_transition
    >>> labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    >>> bound = theorem_5_3_bound(K, labels, symmetric_transition(3, 0.3), lam=1.0, delta=0.05)
    >>> round(bound.gap, 2), len(bound.per_output)
    (0.55, 3)
    >>> round(bound.total, 2)
    36.73
    """
    Km, Pm, Q, g, lam, delta = _multiclass_inputs(K, labels, P, lam, delta)
    eps_net = check_positive(eps_net, "eps_net")
    ridge = check_choice(ridge, "ridge", RIDGE_TERMS)
    k = Pm.shape[0]
    sigmas = multiclass_noise_subgaussian_sigma(Pm)
    for h in range(k):  # then one solve for all K outputs (K columns per pass over a K on disk), not one each
        _check_bounded_labels(Q[h], 1.0, "y")
    comps = [float(c) for c in np.atleast_1d(complexity(Km, Q.T))]
    ridges = comps if ridge == "complexity" else np.atleast_1d(Km.ridge_quadratic(np.ascontiguousarray(Q.T), lam))
    per = tuple(
        _additive_bound(
            Km,
            Q[h],
            lam,
            float(sigmas[h]),
            delta / k,
            eps_net,
            label_bound=1.0,
            loss_bound=1.0,
            comp=comps[h],
            ridge=float(ridges[h]),
            ridge_term=ridge,
        )
        for h in range(k)
    )
    return MulticlassBound(gap=g, sigmas=sigmas, per_output=per)


def theorem_5_3_printed(
    K: ArrayLike | KernelMatrix, labels: ArrayLike, P: ArrayLike, lam: float, delta: float, C: float = 1.0
) -> PrintedBound:
    r"""Theorem 5.3 as printed, O(·) := C·(·), δ' = δ/K:

    .. math:: &\frac{1}{\mathrm{gap}}\Big(\\
              &\quad \frac{\lambda + O(1)}{2}\sum_{h=1}^K \sqrt{\frac{q^{(h)\top}K^{-1}q^{(h)}}{n}}\\
              &\quad + K\cdot O\Big(\frac1\lambda + \sqrt{\tfrac{\log(1/\delta')}{n}}\\
              &\qquad\quad + \sqrt{\tfrac{\log\frac{n}{\delta'\lambda}}{n}}\Big)\Big)

    i.e. Theorem 5.1's printed terms with σ = 1 (the paper's value), summed
    over the K outputs and divided by gap(P).

    Parameters
    ----------
    K : ArrayLike, str, os.PathLike, numpy.memmap or OnDiskKernel, shape (n, n) or (n, n, O, O)
        The one kernel k(X, X) of every output, as for :func:`theorem_5_3_bound` (a full kernel only of the
        form k ⊗ I). Its tr K/n should be O(1): the printed form warns (:class:`PrintedScaleWarning`) otherwise.
    labels : ArrayLike, shape (n,)
        Clean classes.
    P : ArrayLike, shape (K, K)
        Column-stochastic transition matrix.
    lam : float
        λ > 0.
    delta : float
        δ ∈ (0, 1).
    C : float
        The constant every O(·) is read as.

    Returns
    -------
    PrintedBound
        The printed form's terms; ``total`` is their sum.
    """
    Km, Pm, Q, g, lam, delta = _multiclass_inputs(K, labels, P, lam, delta)
    C = check_interval(C, "C", 0.0, math.inf)
    n, k = Km.shape[0], Pm.shape[0]
    comps = np.atleast_1d(complexity(Km, Q.T))
    lead = sum(_printed_terms(math.sqrt(max(float(c), 0.0) / n), n, lam, 1.0, delta / k, C)[0] for c in comps)
    _, noise, tail, _, net = _printed_terms(0.0, n, lam, 1.0, delta / k, C)
    ratio = _printed_scale("5.3", Km)
    return PrintedBound("5.3", C, lead / g, k * noise / g, k * tail / g, 0.0, k * net / g, trace_per_n=ratio)


# =========================================================================== the λ trade-off in closed form


def _leading_ab(complexity: ArrayLike, n: int, trace: float, sigma: ArrayLike) -> tuple[float, float]:
    C = as_float64_array(complexity, "complexity", ndim=(0, 1)).reshape(-1)
    s = as_float64_array(sigma, "sigma", ndim=(0, 1)).reshape(-1)
    if np.any(C <= 0) or np.any(s < 0):
        raise ValueError("complexity must be > 0 and sigma >= 0")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    T = check_positive(trace, "trace")
    return float(np.sum(np.sqrt(C / n))), 5.0 * math.sqrt(T / n) * float(np.sum(s))


def leading_lambda(complexity: ArrayLike, n: int, trace: float, sigma: ArrayLike) -> float:
    r"""The λ that minimises the λ-dependent leading terms of :func:`theorem_5_1_bound`.

    Those terms are ``train_bias + train_noise + rademacher_noise``,

    .. math:: g(\lambda) &= \frac{\lambda}{2}\sum_h\sqrt{\frac{C_h}{n}}\\
              &\quad + \frac{5\sqrt{\operatorname{tr}K/n}}{2\lambda}\sum_h\sigma_h ,\\
              \lambda^\star &= \sqrt{\frac{5\sqrt{\operatorname{tr}K/n}\,\sum_h\sigma_h}{\sum_h\sqrt{C_h/n}}} ,

    with C = yᵀK⁻¹y (a scalar; for Theorem 5.3 one value per output h with its
    σ_h). For Theorem 5.2 pass C = yᵀK⁻¹y of the ±1 labels and
    σ = σ_p/(1 − 2p): the (1 − 2p) of ȳ cancels the rescaling in the signal term
    and stays in the noise term. Passing an a-priori upper bound on C (e.g.
    Remark 5.2's constant) gives a λ fixed before the sample is seen.

    Parameters
    ----------
    complexity : ArrayLike
        C = yᵀK⁻¹y, a scalar or one value per output.
    n : int
        Sample size.
    trace : float
        tr K.
    sigma : ArrayLike
        σ, a scalar or one value per output.

    Returns
    -------
    float

    Examples
    --------
    A λ fixed by the leading terms, for 20 % of flipped ±1 labels (Theorem 5.2: σ = σ_p/(1 − 2p)). The explicit
    bound's other terms depend on λ too, so this λ minimises the leading terms, not the whole bound; their
    minimum (:func:`leading_minimum`) is a lower bound on the whole bound at every λ:

    >>> import numpy as np
    >>> from ntk_core import binary_noise_subgaussian_sigma, complexity, leading_lambda
    >>> K = np.array([[1.0, 0.2, 0.1], [0.2, 1.0, 0.3], [0.1, 0.3, 1.0]])
    >>> y, p = np.array([1.0, -1.0, 1.0]), 0.2
    >>> sigma = binary_noise_subgaussian_sigma(p) / (1 - 2 * p)
    >>> round(leading_lambda(complexity(K, y), 3, float(np.trace(K)), sigma), 3)
    2.557
    """
    a, b = _leading_ab(complexity, n, trace, sigma)
    if b == 0.0:
        raise ValueError("with sigma = 0 the leading terms decrease as lambda -> 0: there is no optimum")
    return math.sqrt(b / a)


def leading_minimum(complexity: ArrayLike, n: int, trace: float, sigma: ArrayLike) -> float:
    """min over λ of the leading terms g(λ) of :func:`leading_lambda`: g(λ*) = √(A·B).

    With A = Σ_h √(C_h/n) and B = 5√(tr K/n) Σ_h σ_h. Every other term of the
    explicit bound is ≥ 0, so for Theorems 5.1/5.2 this is a lower bound on the
    whole bound at *every* λ (divide by gap(P) for Theorem 5.3). With
    C = C₀n^a and tr K = n/2 it falls like n^{(a−1)/4}.

    Parameters
    ----------
    complexity : ArrayLike
        C = yᵀK⁻¹y, a scalar or one value per output.
    n : int
        Sample size.
    trace : float
        tr K.
    sigma : ArrayLike
        σ, a scalar or one value per output.

    Returns
    -------
    float
    """
    a, b = _leading_ab(complexity, n, trace, sigma)
    return math.sqrt(a * b)
