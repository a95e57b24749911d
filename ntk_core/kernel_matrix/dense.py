r"""A kernel matrix in memory (:class:`DenseKernel`): a validated float64 array, solved by Cholesky, with the
checks that a solve needs (positive semi-definiteness, an estimate of the answer's error).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from .._checks import check_count, check_kernel_matrix
from .._typing import ArrayLike
from .base import ACCURACY_RTOL, PSD_RTOL, IllConditionedWarning, KernelMatrix

__all__ = [
    "DenseKernel",
    "check_psd_direct",
    "check_psd_eigenvalues",
    "dense_array",
    "solve_ridge",
    "symmetrise_in_place",
]


#: Up to this size the PSD check of the Cholesky solvers is an exact symmetric
#: eigenvalue computation (negligible at this size); above it, Lanczos iterations
#: on the Cholesky factor that the solve computes anyway (O(n²) each, no new O(n³)).
_EXACT_PSD_CHECK_MAX_N = 256


# --------------------------------------------------------------------------- PSD checks and the dense solve


def symmetrise_in_place(K: np.ndarray, block: int = 1024) -> np.ndarray:
    """Replace the square matrix ``K`` by its symmetric part ``(K + Kᵀ) / 2``, in place, block by block.

    Each entry is ``(K[i, j] + K[j, i]) / 2``, the value ``(K + K.T) / 2.0`` gives, bit for bit (a sum of two
    floats does not depend on their order), without the two further (n, n) matrices that expression makes: a
    kernel matrix assembled in floating point from products ``J_a J_bᵀ`` is symmetric only to its rounding.

    Parameters
    ----------
    K : numpy.ndarray, shape (n, n)
        A writable floating-point matrix; overwritten.
    block : int
        Rows and columns per block (the work space is two blocks).

    Returns
    -------
    numpy.ndarray
        ``K`` itself, now exactly symmetric.

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[1.0, 2.0, 3.0], [2.5, 1.0, 0.0], [3.0, 1.0, 2.0]])
    >>> expected = (K + K.T) / 2.0
    >>> np.array_equal(symmetrise_in_place(K, block=2), expected)
    True
    """
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square (n, n) matrix, got shape {K.shape}")
    if K.dtype.kind != "f" or not K.flags.writeable:
        raise ValueError(
            f"K must be a writable floating-point matrix, got dtype {K.dtype} (writeable: {K.flags.writeable})"
        )
    check_count(block, "block")
    n = K.shape[0]
    for i in range(0, n, block):
        for j in range(i, n, block):
            half = (K[i : i + block, j : j + block] + K[j : j + block, i : i + block].T) / 2.0
            K[i : i + block, j : j + block] = half
            K[j : j + block, i : i + block] = half.T
    return K


def _psd_tolerance(K: np.ndarray) -> float:
    """The largest negative eigenvalue magnitude accepted in a kernel matrix: ``PSD_RTOL * n * max|K_ij|``."""
    scale = max(float(np.max(np.abs(K))), float(np.finfo(np.float64).tiny))
    return PSD_RTOL * K.shape[0] * scale


def _refuse_not_psd(name: str, smallest: float, tol: float, how: str) -> None:
    raise ValueError(
        f"{name} is not positive semi-definite: it has an eigenvalue {how} {smallest:.6g}, below the "
        f"tolerance -{tol:.3g} (= -{PSD_RTOL:g} x n x max|K|); a kernel matrix k(X, X) is PSD, so this one is "
        f"wrong (e.g. not a Gram matrix, or computed wrongly) and the ridge λ² I would only hide it"
    )


def check_psd_eigenvalues(eigenvalues: np.ndarray, K: np.ndarray, name: str) -> None:
    """Refuse ``K`` (named ``name`` in the error) unless it is positive semi-definite, from its ``eigenvalues``
    already computed (no extra cost): ``ValueError`` when the smallest is below ``-PSD_RTOL · n · max|K|``."""
    tol = _psd_tolerance(K)
    smallest = float(np.min(eigenvalues))
    if smallest < -tol:
        _refuse_not_psd(name, smallest, tol, "of")


def check_psd_direct(K: np.ndarray, name: str) -> None:
    """Refuse ``K`` (named ``name`` in the error) unless it is positive semi-definite, for solvers that factorise
    nothing: one Cholesky of ``K + tol I`` (it fails exactly when λ_min < −tol, tol = ``PSD_RTOL · n · max|K|``)."""
    tol = _psd_tolerance(K)
    try:
        scipy.linalg.cho_factor(K + tol * np.eye(K.shape[0]), lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        smallest = float(scipy.linalg.eigh(K, eigvals_only=True, subset_by_index=[0, 0])[0])
        _refuse_not_psd(name, smallest, tol, "of")


def _check_psd_with_factor(K: np.ndarray, factor: tuple[np.ndarray, bool], lam: float, name: str) -> None:
    """PSD check of K given the Cholesky factor of ``K + λ² I`` that the solver computed.

    ``K + λ² I`` positive definite only shows ``λ_min(K) > -λ²``. Lanczos
    iterations on ``(K + λ² I)⁻¹`` (O(n²) each, with the factor) find the
    direction of the smallest eigenvalue; its Rayleigh quotient ``vᵀKv/vᵀv`` is
    an upper bound on ``λ_min(K)``, so a value below the tolerance proves that K
    is not PSD. Small matrices are checked exactly.
    """
    n = K.shape[0]
    if n <= _EXACT_PSD_CHECK_MAX_N:
        check_psd_eigenvalues(scipy.linalg.eigh(K, eigvals_only=True, subset_by_index=[0, 0]), K, name)
        return
    op = scipy.sparse.linalg.LinearOperator(
        (n, n), matvec=lambda v: scipy.linalg.cho_solve(factor, v, check_finite=False), dtype=np.float64
    )
    v0 = np.random.default_rng(0).standard_normal(n)
    try:
        _, vecs = scipy.sparse.linalg.eigsh(op, k=1, which="LA", v0=v0, ncv=min(n, 16), maxiter=4, tol=1e-6)
    except scipy.sparse.linalg.ArpackNoConvergence as exc:
        vecs = exc.eigenvectors
    if vecs is None or vecs.size == 0:
        return
    v = vecs[:, 0]
    rq = float(v @ (K @ v)) / float(v @ v)
    tol = _psd_tolerance(K)
    if rq < -tol:
        _refuse_not_psd(name, rq, tol, "at most")


def _cholesky_ridge(K: np.ndarray, lam: float) -> tuple[np.ndarray, bool]:
    n = K.shape[0]
    try:
        return scipy.linalg.cho_factor(K + lam**2 * np.eye(n), lower=True, check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise ValueError(
            f"K + λ² I (λ = {lam!r}) is not positive definite, so the KRR system has no unique "
            f"solution; K must be positive semi-definite and λ > 0 (or K positive definite when λ = 0)"
        ) from exc


def solve_ridge(
    K: np.ndarray, y: np.ndarray, lam: float, name: str = "K_train", K_out: np.ndarray | None = None
) -> np.ndarray:
    """α = (K + λ² I)⁻¹ y by Cholesky (eq. (8)'s ridge), K checked positive semi-definite for λ > 0 (Lanczos on
    the factor), with an :class:`~ntk_core.kernel_matrix.base.IllConditionedWarning` when the answer
    (``K_out @ α``; α itself if ``K_out`` is None) is inaccurate beyond ``ACCURACY_RTOL``, its error estimated by
    one step of iterative refinement."""
    factor = _cholesky_ridge(K, lam)
    if lam > 0.0:  # with λ = 0 the factorisation itself proved K positive definite
        _check_psd_with_factor(K, factor, lam, name)
    alpha = scipy.linalg.cho_solve(factor, y, check_finite=False)
    error = _relative_error(K, factor, lam, y, alpha, K_out)
    if error > ACCURACY_RTOL:
        warnings.warn(
            IllConditionedWarning(
                f"kernel ridge regression with λ = {lam:g}: K + λ² I is ill-conditioned, and the "
                f"{'coefficients' if K_out is None else 'predictions'} are accurate only to about {error:.1e} "
                f"(relative; estimated by a step of iterative refinement). Use a larger λ: the ridge λ² should "
                "not be many orders of magnitude below the largest eigenvalue of K"
            ),
            stacklevel=3,
        )
    return alpha


def _relative_error(
    K: np.ndarray,
    factor: tuple[np.ndarray, bool],
    lam: float,
    y: np.ndarray,
    alpha: np.ndarray,
    K_out: np.ndarray | None,
) -> float:
    """Estimated relative error of ``K_out @ α`` (α if ``K_out`` is None), α the Cholesky solution of
    ``(K + λ² I) α = y``: the correction δ = (K + λ² I)⁻¹ r of one step of iterative refinement, r = y − (K + λ² I) α
    computed in float64. A backward-stable solve leaves a residual of rounding size ε ‖K + λ² I‖ ‖α‖, which the
    solve of δ amplifies by the condition number: ‖K_out δ‖ / ‖K_out α‖ measures the error that matters,
    O(n²) beside the O(n³) factorisation."""
    r = y - (K @ alpha + lam**2 * alpha)
    delta = scipy.linalg.cho_solve(factor, r, check_finite=False)
    out, err = (alpha, delta) if K_out is None else (K_out @ alpha, K_out @ delta)
    scale = float(np.linalg.norm(out))
    return float(np.linalg.norm(err)) / scale if scale > 0.0 else 0.0


def _cholesky_pd(K: np.ndarray, what: str) -> tuple[np.ndarray, bool]:
    try:
        return scipy.linalg.cho_factor(K, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        raise ValueError(_not_definite(K, what)) from None


def _not_definite(K: np.ndarray, what: str) -> str:
    """Why ``K`` has no Cholesky factor, from its eigenvalues: a negative one (not a kernel matrix), or its
    numerical rank below n (eigenvalues under n·eps·λ_max), with the remedies."""
    eig = np.linalg.eigvalsh(K)
    n, top = K.shape[0], max(float(eig[-1]), 0.0)
    tol = n * float(np.finfo(np.float64).eps) * top
    if eig[0] < -tol:
        return (
            f"K must be positive definite to compute {what}, and it is not even positive semi-definite: its "
            f"smallest eigenvalue is {eig[0]:.3g} (below -{tol:.3g}, rounding's reach): not a kernel matrix k(X, X)"
        )
    rank = int(np.sum(eig > tol))
    return (
        f"K must be positive definite to compute {what} (the paper assumes k(X, X) invertible), and it is singular: "
        f"its numerical rank is {rank} of n = {n} (eigenvalues below {tol:.3g} = n·eps·λ_max count as 0). An "
        f"empirical NTK has rank at most its model's number of trained parameters P, so P < n gives this. "
        f"Remedies: a ridge λ > 0 (ridge_complexity, krr with lam > 0: (K + λ²I) is invertible), a model with "
        f"more parameters than examples (P ≥ n), or the infinite-width kernel"
    )


class DenseKernel(KernelMatrix):
    """A kernel matrix in memory: a float64 copy of K, checked symmetric (within its dtype's rounding) and finite.

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        The kernel matrix (NumPy array or torch tensor).
    name : str
        How errors name it.

    Examples
    --------
    >>> import numpy as np
    >>> K = DenseKernel(np.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> K.trace(), round(K.ridge_quadratic(np.array([1.0, 1.0]), 0.0), 10)   # yᵀK⁻¹y = 2/3
    (4.0, 0.6666666667)
    """

    def __init__(self, K: ArrayLike, name: str = "K") -> None:
        self.array = check_kernel_matrix(K, name)
        self.name = name
        self.n = self.array.shape[0]

    def __repr__(self) -> str:
        return f"DenseKernel(n={self.n})"

    def trace(self) -> float:
        return float(np.trace(self.array))

    def diagonal(self) -> np.ndarray:
        return np.diag(self.array).copy()

    def matvec(self, V: ArrayLike) -> np.ndarray:
        return self.array @ np.asarray(V, dtype=np.float64)

    def _ridge_solve(self, Y: np.ndarray, lam: float) -> np.ndarray:
        """Cholesky of K + λ² I, with the PSD check of K for λ > 0 and a warning when ill-conditioned."""
        if lam == 0.0:
            return scipy.linalg.cho_solve(_cholesky_pd(self.array, "K⁻¹y"), Y, check_finite=False)
        return solve_ridge(self.array, Y, lam, self.name)


def dense_array(K: ArrayLike | KernelMatrix, name: str) -> np.ndarray:
    """K in memory as a validated float64 array: a :class:`DenseKernel`'s own array (checked when it was made),
    else checked as a kernel matrix (square, finite, symmetric within its dtype's rounding); a kernel matrix on
    disk is refused with a ``TypeError`` that names the out-of-core route."""
    if isinstance(K, DenseKernel):
        return K.array
    if isinstance(K, KernelMatrix):
        raise TypeError(
            f"{name} is a kernel matrix on disk ({K!r}); this solver factorises K in memory. Use the out-of-core "
            "solvers of ntk_core.kernel_matrix.on_disk (krr_solve_ooc, krr_predict_ooc), which read it in blocks"
        )
    return check_kernel_matrix(K, name)
