"""Kernel ridge regression and the linearised gradient-descent dynamics of Section 4.

Everything here follows the paper's convention (ARCHITECTURE.md): the ridge term is
**λ² I** and the argument ``lam`` is λ, so that the KRR solution (paper eq. (8)) is

.. math::  f^*(x) = k(x, X)^\\top (k(X, X) + \\lambda^2 I)^{-1} \\tilde y,

and, for ``K`` outputs with targets stacked as the columns of ``y`` of shape
``(n, K)``, the same formula column by column (paper eq. (9)).

Contents

* :func:`krr_predict`, :func:`krr_coefficients` — direct solves (float64, Cholesky).
* :class:`KRRPath`, :func:`krr_path` — many λ from one eigendecomposition,
  O(n³) once and then O(n²) per λ (per target column), for λ grid searches.
* :func:`gd_rdi_params`, :func:`gd_aux_params` — gradient descent on the
  linearised objectives :math:`\\tilde L^{RDI}_\\lambda` and
  :math:`\\tilde L^{AUX}_\\lambda` in parameter space, for an explicit feature
  matrix ``Z`` of shape ``(n, P)`` whose *rows* are :math:`\\phi(x_i)^\\top`
  (the paper's :math:`\\mathbf Z = (\\phi(x_1),\\dots,\\phi(x_n))` is its
  transpose), so that Theorem 4.1 can be checked iterate by iterate.
* :func:`gd_rdi_kernel`, :func:`gd_aux_kernel` — the same two dynamics in
  function space, for a kernel matrix only; :func:`gd_unregularized_kernel`
  (plain GD, for early stopping) and :func:`gd_kernel_closed_form` (the
  spectral closed form of any of them at step ``t``).
* :func:`learning_rate_bound` (Theorem 4.1's η ≤ 1/(‖K‖ + λ²)) and
  :func:`linear_rate` (the contraction factor of the iteration).

Every solver refuses a K with a clearly negative eigenvalue (below
``-PSD_RTOL * n * max|K_ij|``), whatever λ: the eigendecomposition-based ones
read it off their eigenvalues, the Cholesky solves run a few Lanczos steps
with their factor, the gradient-descent iterations one Cholesky of
``K + tol I``. A λ whose square overflows float64 is refused.

Only NumPy and SciPy are imported; torch tensors are accepted through
:func:`ntk_core._checks.as_float64_array`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from ._checks import as_float64_array, check_choice, check_count, check_lam, check_positive, check_rows
from ._typing import ArrayLike
from .kernel_matrix.base import IllConditionedWarning, KernelMatrix
from .kernel_matrix.dense import (
    dense_array,
    check_psd_direct,
    check_psd_eigenvalues,
    solve_ridge,
)

__all__ = [
    "IllConditionedWarning",
    "KRRPath",
    "KernelGDTrajectory",
    "ParamGDTrajectory",
    "gd_aux_kernel",
    "gd_aux_params",
    "gd_kernel_closed_form",
    "gd_rdi_kernel",
    "gd_rdi_params",
    "gd_steps_to_fit",
    "gd_unregularized_kernel",
    "sgd_kernel_outputs",
    "sgd_step_factors",
    "krr_coefficients",
    "krr_path",
    "krr_predict",
    "learning_rate_bound",
    "linear_rate",
]


# --------------------------------------------------------------------------- validation


def _check_cross_kernel(K_test_train: ArrayLike, n: int) -> np.ndarray:
    arr = as_float64_array(K_test_train, "K_test_train", ndim=2)
    if arr.shape[1] != n:
        raise ValueError(
            f"K_test_train must have shape (m, n) with n = {n} training points "
            f"(entry [j, i] = k(x_test_j, x_i)), got shape {arr.shape}"
        )
    return arr


# --------------------------------------------------------------------------- direct KRR


def krr_coefficients(K_train: ArrayLike | KernelMatrix, y: ArrayLike, lam: float) -> np.ndarray:
    """Dual coefficients α = (K + λ² I)⁻¹ ỹ of kernel ridge regression (paper eqs. (8)/(9)).

    ``y`` has shape ``(n,)`` or ``(n, K)`` (one column per output, e.g. one-hot
    targets); α has the same shape. ``lam`` = λ ≥ 0; λ = 0 is the unregularised
    kernel regression solution (eq. (2)) and needs ``K`` positive definite.
    Solved in float64 by Cholesky; raises ``ValueError`` when K + λ² I is not
    positive definite, when K has a clearly negative eigenvalue (below
    ``-PSD_RTOL * n * max|K|``: not a kernel matrix, even if K + λ² I happens
    to be positive definite; checked with the same factorisation), or when λ²
    overflows.

    Parameters
    ----------
    K_train : ArrayLike or DenseKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive semi-definite.
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ.
    lam : float
        λ ≥ 0.

    Returns
    -------
    numpy.ndarray
        α, float64, the shape of ``y``.

    Raises
    ------
    ValueError
        K + λ² I not positive definite, K with a clearly negative eigenvalue, or λ² overflowing.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core import krr_coefficients
    >>> krr_coefficients(np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([1.0, -1.0]), lam=1.0)
    array([ 0.5, -0.5])
    """
    K = dense_array(K_train, "K_train")
    return solve_ridge(K, check_rows(y, K.shape[0], "y"), check_lam(lam))


def krr_predict(
    K_train: ArrayLike | KernelMatrix, y: ArrayLike, lam: float, K_test_train: ArrayLike | None = None
) -> np.ndarray:
    r"""Kernel ridge regression predictions :math:`k(x, X)^\top (K + \lambda^2 I)^{-1} \tilde y`.

    This is the function the wide network learns under RDI or AUX (Theorem 4.1,
    eq. (8)); for targets of shape ``(n, K)`` each column ``h`` gives the output
    :math:`f^{(h)}` of eq. (9).

    Parameters
    ----------
    K_train : ArrayLike or DenseKernel, shape (n, n)
        Symmetric positive semi-definite kernel matrix k(X, X).
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ (one column per output for eq. (9)).
    lam : float
        λ ≥ 0; the ridge is λ² I (the paper's convention, never λ I).
    K_test_train : ArrayLike, shape (m, n), optional
        Entries k(x_test_j, x_i). When ``None`` the predictions at the training
        points, :math:`K (K + \lambda^2 I)^{-1} \tilde y`, are returned.

    Returns
    -------
    numpy.ndarray, shape (m,) or (m, K)
        float64 predictions (``m = n`` for training predictions).

    Raises
    ------
    ValueError
        K not square, symmetric, finite and positive semi-definite; shapes that
        do not match; λ < 0, or λ = 0 with a singular K.

    See Also
    --------
    KRRPath : the same predictions for many λ from one eigendecomposition.

    Examples
    --------
    With K = I each prediction is ỹ / (1 + λ²):

    >>> import numpy as np
    >>> from ntk_core import krr_predict
    >>> krr_predict(np.eye(3), np.array([1.0, -1.0, 1.0]), lam=1.0)
    array([ 0.5, -0.5,  0.5])

    Predictions at two test points from their kernel values against the
    training points:

    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> K_test = np.array([[1.0, 0.0], [2.0, 1.0]])
    >>> krr_predict(K, np.array([1.0, -1.0]), lam=1.0, K_test_train=K_test)
    array([0.5, 0.5])
    """
    K = dense_array(K_train, "K_train")
    yy = check_rows(y, K.shape[0], "y")
    lam = check_lam(lam)
    Kt = K if K_test_train is None else _check_cross_kernel(K_test_train, K.shape[0])
    return Kt @ solve_ridge(K, yy, lam, K_out=Kt)


# --------------------------------------------------------------------------- λ path


class KRRPath:
    r"""Kernel ridge regression for many λ from one eigendecomposition.

    With :math:`K = U\,\mathrm{diag}(s)\,U^\top` (computed once, O(n³)),

    .. math:: (K + \lambda^2 I)^{-1}\tilde y &= U\,\frac{U^\top\tilde y}{s + \lambda^2},\\
       K (K + \lambda^2 I)^{-1}\tilde y &= U\,\frac{s\,U^\top\tilde y}{s + \lambda^2},

    so each further λ costs O(n²) per target column (O(m n) for ``m`` test
    points, whose product ``K_test_train @ U`` is also formed once). This is what
    the λ grid searches of the experiments (Section 6) need; each prediction is
    that of eq. (8), :func:`krr_predict`, up to rounding.

    Parameters
    ----------
    K_train : ArrayLike or DenseKernel, shape (n, n)
        Symmetric positive semi-definite kernel matrix k(X, X).
    K_test_train : ArrayLike, shape (m, n), optional
        Kernel values k(x_test_j, x_i), for predictions at test points
        (``predict(..., test=True)``).

    Attributes
    ----------
    n : int
        Number of training points.
    eigenvalues : numpy.ndarray
        Eigenvalues s of K, ascending, shape ``(n,)``.
    eigenvectors : numpy.ndarray
        Orthonormal eigenvectors U (columns), shape ``(n, n)``.

    Raises
    ------
    ValueError
        K not square, symmetric, finite and positive semi-definite. Later, an
        eigenvalue with :math:`s_i + \lambda^2 \le n\,\epsilon_{mach}\max|s|`
        (K + λ² I numerically singular).

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core import KRRPath, krr_predict
    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> y = np.array([1.0, -1.0])
    >>> path = KRRPath(K)
    >>> path.predict(y, [0.0, 1.0, 3.0])
    array([[ 1. , -1. ],
           [ 0.5, -0.5],
           [ 0.1, -0.1]])
    >>> np.allclose(path.predict(y, [1.0])[0], krr_predict(K, y, lam=1.0))
    True
    >>> path.coefficients(y, lam=1.0)
    array([ 0.5, -0.5])
    """

    def __init__(self, K_train: ArrayLike | KernelMatrix, K_test_train: ArrayLike | None = None) -> None:
        K = dense_array(K_train, "K_train")
        self.n: int = K.shape[0]
        self.eigenvalues, self.eigenvectors = np.linalg.eigh(K)
        check_psd_eigenvalues(self.eigenvalues, K, "K_train")
        top = max(float(np.max(np.abs(self.eigenvalues))), np.finfo(np.float64).tiny)
        self._tol = self.n * np.finfo(np.float64).eps * top
        self._test_basis: np.ndarray | None = None
        if K_test_train is not None:
            self._test_basis = _check_cross_kernel(K_test_train, self.n) @ self.eigenvectors

    def _filter(self, lam: float) -> np.ndarray:
        lam = check_lam(lam)
        denom = self.eigenvalues + lam**2
        if np.min(denom) <= self._tol:
            raise ValueError(
                f"K + λ² I (λ = {lam!r}) is not positive definite (smallest eigenvalue "
                f"{np.min(denom):.3g}); K must be positive semi-definite and λ > 0"
            )
        return 1.0 / denom

    def _project(self, y: ArrayLike) -> tuple[np.ndarray, bool]:
        yy = check_rows(y, self.n, "y")
        return self.eigenvectors.T @ yy, yy.ndim == 1

    def coefficients(self, y: ArrayLike, lam: float) -> np.ndarray:
        """The coefficients α(λ) = (K + λ² I)⁻¹ ỹ of eq. (8).

        Parameters
        ----------
        y : ArrayLike, shape (n,) or (n, K)
            Training targets ỹ.
        lam : float
            λ ≥ 0.

        Returns
        -------
        numpy.ndarray
            α(λ), float64, the shape of ``y``.
        """
        c, _ = self._project(y)
        w = self._filter(lam)
        return self.eigenvectors @ (w[:, None] * c if c.ndim == 2 else w * c)

    def predict(self, y: ArrayLike, lams: Sequence[float] | np.ndarray, test: bool = False) -> np.ndarray:
        """Predictions for every λ in ``lams``.

        Parameters
        ----------
        y : ArrayLike, shape (n,) or (n, K)
            Training targets ỹ.
        lams : sequence of float or ArrayLike, shape (L,)
            The λ values (each ≥ 0).
        test : bool
            Predict at the test points given to the constructor (``K_test_train``)
            instead of the training points.

        Returns
        -------
        numpy.ndarray, shape (L, n) or (L, n, K); (L, m) or (L, m, K) when ``test``
            Row ``j`` is :func:`krr_predict` at ``lams[j]``.

        Raises
        ------
        ValueError
            ``test=True`` on a path built without ``K_test_train``; λ < 0; K + λ² I
            numerically singular.
        """
        if test and self._test_basis is None:
            raise ValueError("test=True needs the KRRPath to be built with K_test_train")
        lam_arr = as_float64_array(lams, "lams", ndim=(0, 1)).reshape(-1)
        c, one_d = self._project(y)
        c2 = c[:, None] if one_d else c
        basis = self._test_basis if test else self.eigenvectors * self.eigenvalues
        assert basis is not None
        out = np.empty((lam_arr.size, basis.shape[0], c2.shape[1]))
        for j, lam in enumerate(lam_arr):
            out[j] = basis @ (self._filter(float(lam))[:, None] * c2)
        return out[..., 0] if one_d else out


def krr_path(
    K_train: ArrayLike | KernelMatrix,
    y: ArrayLike,
    lams: Sequence[float] | np.ndarray,
    K_test_train: ArrayLike | None = None,
) -> np.ndarray:
    """:func:`krr_predict` for each λ in ``lams``, from one eigendecomposition (see :class:`KRRPath`).

    Parameters
    ----------
    K_train : ArrayLike or DenseKernel, shape (n, n)
        Symmetric positive semi-definite kernel matrix k(X, X).
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ.
    lams : sequence of float or ArrayLike, shape (L,)
        The λ values (each ≥ 0).
    K_test_train : ArrayLike, shape (m, n), optional
        Predict at test points instead of the training points.

    Returns
    -------
    numpy.ndarray, shape (L, m) or (L, m, K)
        Row ``j`` equals ``krr_predict(K_train, y, lams[j], K_test_train)`` up to
        rounding (``m = n`` without ``K_test_train``).
    """
    path = KRRPath(K_train, K_test_train)
    return path.predict(y, lams, test=K_test_train is not None)


# --------------------------------------------------------------------------- learning-rate facts


def learning_rate_bound(K: ArrayLike | KernelMatrix, lam: float) -> float:
    r"""Theorem 4.1's learning-rate condition: the largest η allowed, 1/(‖K‖ + λ²).

    ‖K‖ is the spectral norm of k(X, X) = Z Zᵀ; the Hessian of
    :math:`\tilde L^{RDI}_\lambda` is ZᵀZ + λ² I whose norm is ‖K‖ + λ², so
    η ≤ 1/(‖K‖ + λ²) is the classical step-size condition for GD on a smooth
    strongly convex quadratic (proof of Theorem 4.1, Appendix B).

    Parameters
    ----------
    K : ArrayLike or DenseKernel, shape (n, n)
        Kernel matrix k(X, X).
    lam : float
        λ ≥ 0.

    Returns
    -------
    float
        1/(‖K‖ + λ²).

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core import learning_rate_bound
    >>> round(learning_rate_bound(np.array([[2.0, 1.0], [1.0, 2.0]]), lam=1.0), 12)   # ‖K‖ = 3
    0.25
    """
    Km = dense_array(K, "K")
    lam = check_lam(lam)
    return 1.0 / (float(np.linalg.norm(Km, 2)) + lam**2)


def linear_rate(K: ArrayLike | KernelMatrix, lam: float, eta: float) -> float:
    """Contraction factor ρ = max(|1 − η λ²|, |1 − η(‖K‖ + λ²)|) of RDI/AUX gradient descent.

    Every eigenvalue h of the Hessian (ZᵀZ + λ² I in parameter space, K + λ² I
    in function space) lies in [λ², ‖K‖ + λ²], and the error is multiplied by
    1 − η h at each step, so ‖θ(t) − θ*‖ ≤ ρᵗ ‖θ(0) − θ*‖ (same for the
    function-space coefficients). Under Theorem 4.1's condition
    η ≤ 1/(‖K‖ + λ²), ρ = 1 − ηλ² < 1: linear convergence. Convergence holds
    exactly when ρ < 1, i.e. 0 < η < 2/(‖K‖ + λ²) (for λ > 0).

    Parameters
    ----------
    K : ArrayLike or DenseKernel, shape (n, n)
        Kernel matrix k(X, X).
    lam : float
        λ ≥ 0.
    eta : float
        Learning rate η > 0.

    Returns
    -------
    float
        ρ; the iterates converge when ρ < 1.
    """
    Km = dense_array(K, "K")
    lam = check_lam(lam)
    eta = check_positive(eta, "eta")
    top = float(np.linalg.norm(Km, 2)) + lam**2
    return max(abs(1.0 - eta * lam**2), abs(1.0 - eta * top))


# --------------------------------------------------------------------------- GD in parameter space


@dataclass(frozen=True)
class ParamGDTrajectory:
    """Recorded iterates of gradient descent in parameter space.

    ``steps[j]`` is the iteration number t of ``theta[j]`` (shape ``(P,)`` or
    ``(P, K)``); for AUX, ``b[j]`` holds the auxiliary variables b(t)
    (shape ``(n,)`` or ``(n, K)``), for RDI ``b`` is ``None``.

    Attributes
    ----------
    steps : numpy.ndarray
        Iteration numbers t, shape ``(T,)``.
    theta : numpy.ndarray
        θ(t), shape ``(T, P)`` or ``(T, P, K)``.
    b : numpy.ndarray or None
        AUX's auxiliary variables b(t), shape ``(T, n)`` or ``(T, n, K)``.
    """

    steps: np.ndarray
    theta: np.ndarray
    b: np.ndarray | None = None

    def outputs(self, Z: ArrayLike, theta0: ArrayLike | None = None) -> np.ndarray:
        """Linearised network outputs φ(x)ᵀ(θ(t) − θ(0)) for the rows of ``Z`` (eq. (5)).

        Parameters
        ----------
        Z : ArrayLike, shape (m, P)
            Features of the points to evaluate, rows φ(x)ᵀ.
        theta0 : ArrayLike, shape (P,) or (P, K), optional
            θ(0) (default: the first recorded iterate).

        Returns
        -------
        numpy.ndarray, shape (T, m) or (T, m, K)
            One row of outputs per recorded iterate.
        """
        Zm = as_float64_array(Z, "Z", ndim=2)
        if Zm.shape[1] != self.theta.shape[1]:
            raise ValueError(f"Z must have P = {self.theta.shape[1]} columns, got shape {Zm.shape}")
        t0 = self.theta[0] if theta0 is None else as_float64_array(theta0, "theta0")
        return np.einsum("np,tp...->tn...", Zm, self.theta - t0)


def _gd_setup(
    Z: ArrayLike, y: ArrayLike, lam: float, eta: float, steps: int, theta0: ArrayLike | None, record_every: int
) -> tuple[np.ndarray, np.ndarray, float, float, int, np.ndarray, int]:
    Zm = as_float64_array(Z, "Z", ndim=2)
    n, P = Zm.shape
    yy = check_rows(y, n, "y")
    lam = check_lam(lam, positive=True)
    eta = check_positive(eta, "eta")
    steps = check_count(steps, "steps", 0)
    record_every = check_count(record_every, "record_every")
    shape = (P,) + yy.shape[1:]
    if theta0 is None:
        th0 = np.zeros(shape)
    else:
        th0 = as_float64_array(theta0, "theta0")
        if th0.shape != shape:
            raise ValueError(f"theta0 must have shape {shape} (P parameters per output), got {th0.shape}")
    return Zm, yy, lam, eta, steps, th0, record_every


def _record_times(steps: int, record_every: int) -> np.ndarray:
    ts = list(range(0, steps + 1, record_every))
    if ts[-1] != steps:
        ts.append(steps)
    return np.asarray(ts, dtype=np.int64)


def _run_recorded(
    state: tuple[np.ndarray, ...], step: Callable[[tuple[np.ndarray, ...]], tuple[np.ndarray, ...]], times: np.ndarray
) -> list[np.ndarray]:
    """Apply ``step`` to ``state`` ``times[-1]`` times; the state at each t in ``times``, stacked per array."""
    recorded = [np.empty((times.size,) + s.shape) for s in state]
    steps = int(times[-1])
    j = 0
    for t in range(steps + 1):
        if t == times[j]:
            for r, s in zip(recorded, state):
                r[j] = s
            j += 1
        if t == steps:
            break
        state = step(state)
    return recorded


def gd_rdi_params(
    Z: ArrayLike,
    y: ArrayLike,
    lam: float,
    eta: float,
    steps: int,
    theta0: ArrayLike | None = None,
    record_every: int = 1,
) -> ParamGDTrajectory:
    r"""Gradient descent on the linearised RDI objective (Section 4, eq. (6)).

    .. math:: \tilde L^{RDI}_\lambda(\theta) &= \tfrac12\|Z(\theta-\theta(0)) - \tilde y\|^2\\
              &\quad + \tfrac{\lambda^2}{2}\|\theta-\theta(0)\|^2,

    .. math:: \theta(t+1) = \theta(t) - \eta\,\nabla\tilde L^{RDI}_\lambda(\theta(t)).

    ``Z`` has shape ``(n, P)`` with rows φ(x_i)ᵀ (so k(X, X) = Z Zᵀ); ``y`` is
    ``(n,)`` or ``(n, K)`` (then θ is ``(P, K)``: one linear model per output,
    sharing the features). ``lam`` = λ > 0, ``eta`` = η > 0; ``theta0``
    defaults to zeros. Iterates at t = 0, r, 2r, …, and the last step are kept
    (``r = record_every``). By Theorem 4.1 they coincide with those of
    :func:`gd_aux_params`, and for η ≤ 1/(‖K‖ + λ²) converge linearly to
    θ* = θ(0) + Zᵀ(K + λ² I)⁻¹ỹ.

    Parameters
    ----------
    Z : ArrayLike, shape (n, P)
        Features, rows φ(x_i)ᵀ (so k(X, X) = Z Zᵀ).
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ.
    lam : float
        λ > 0.
    eta : float
        Learning rate η > 0.
    steps : int
        Number of GD steps.
    theta0 : ArrayLike, shape (P,) or (P, K), optional
        θ(0) (default zeros).
    record_every : int
        Keep the iterates at t = 0, r, 2r, … and the last step.

    Returns
    -------
    ParamGDTrajectory
        The recorded θ(t).
    """
    Zm, yy, lam, eta, steps, th0, rec = _gd_setup(Z, y, lam, eta, steps, theta0, record_every)
    times = _record_times(steps, rec)

    def step(state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        (theta,) = state
        d = theta - th0
        grad = Zm.T @ (Zm @ d - yy) + lam**2 * d
        return (theta - eta * grad,)

    (out,) = _run_recorded((th0.copy(),), step, times)
    return ParamGDTrajectory(steps=times, theta=out)


def gd_aux_params(
    Z: ArrayLike,
    y: ArrayLike,
    lam: float,
    eta: float,
    steps: int,
    theta0: ArrayLike | None = None,
    record_every: int = 1,
) -> ParamGDTrajectory:
    r"""Gradient descent on the linearised AUX objective (Section 4, eq. (7)).

    .. math:: \tilde L^{AUX}_\lambda(\bar\theta, b) = \tfrac12\|Z(\bar\theta-\theta(0))
              + \lambda b - \tilde y\|^2,

    with simultaneous updates :math:`\bar\theta \leftarrow \bar\theta - \eta Z^\top a`,
    :math:`b \leftarrow b - \eta\lambda a`, where
    :math:`a = Z(\bar\theta - \theta(0)) + \lambda b - \tilde y`, from
    :math:`\bar\theta(0) = \theta(0)` and b(0) = 0. Arguments as in
    :func:`gd_rdi_params`. Theorem 4.1: :math:`\bar\theta(t) = \theta(t)` for
    every t, because :math:`\bar\theta(t) = \theta(0) + Z^\top b(t)/\lambda`
    (Appendix B).

    Parameters
    ----------
    Z, y, lam, eta, steps, theta0, record_every
        As in :func:`gd_rdi_params`.

    Returns
    -------
    ParamGDTrajectory
        The recorded θ(t) and b(t).
    """
    Zm, yy, lam, eta, steps, th0, rec = _gd_setup(Z, y, lam, eta, steps, theta0, record_every)
    times = _record_times(steps, rec)

    def step(state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        theta, b = state
        a = Zm @ (theta - th0) + lam * b - yy
        return theta - eta * (Zm.T @ a), b - eta * lam * a

    out, bout = _run_recorded((th0.copy(), np.zeros_like(yy)), step, times)
    return ParamGDTrajectory(steps=times, theta=out, b=bout)


# --------------------------------------------------------------------------- GD in function space


@dataclass(frozen=True)
class KernelGDTrajectory:
    """Recorded iterates of gradient descent in function space.

    With θ(t) − θ(0) = Zᵀ α(t) (representer form, exact for these dynamics
    since α(0) = 0), ``alpha[j]`` is α(t) at t = ``steps[j]``, ``train[j]`` the
    training outputs K α(t), ``test[j]`` the test outputs K_test_train α(t)
    (``None`` without test points) and, for AUX, ``b[j]`` the auxiliary
    variables b(t).

    Attributes
    ----------
    steps : numpy.ndarray
        Iteration numbers t of the recorded iterates, shape ``(T,)``.
    alpha : numpy.ndarray
        α(t), shape ``(T, n)`` or ``(T, n, K)``.
    train : numpy.ndarray
        Training outputs K α(t), the shape of ``alpha``.
    test : numpy.ndarray or None
        Test outputs k(x, X)ᵀ α(t), shape ``(T, m)`` or ``(T, m, K)``.
    b : numpy.ndarray or None
        AUX's auxiliary variables b(t), the shape of ``alpha`` (``None`` for RDI and plain GD).
    """

    steps: np.ndarray
    alpha: np.ndarray
    train: np.ndarray
    test: np.ndarray | None = None
    b: np.ndarray | None = None


def _kernel_gd_setup(
    K: ArrayLike | KernelMatrix, y: ArrayLike, eta: float, steps: int, K_test_train: ArrayLike | None, record_every: int
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None, np.ndarray]:
    Km = dense_array(K, "K")
    yy = check_rows(y, Km.shape[0], "y")
    eta = check_positive(eta, "eta")
    steps = check_count(steps, "steps", 0)
    rec = check_count(record_every, "record_every")
    check_psd_direct(Km, "K")
    Kt = None if K_test_train is None else _check_cross_kernel(K_test_train, Km.shape[0])
    return Km, yy, eta, Kt, _record_times(steps, rec)


def _run_kernel_gd(
    Km: np.ndarray,
    yy: np.ndarray,
    lam: float,
    eta: float,
    Kt: np.ndarray | None,
    times: np.ndarray,
    aux: bool,
) -> KernelGDTrajectory:
    def aux_step(state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        alpha, b = state
        a = Km @ alpha + lam * b - yy
        return alpha - eta * a, b - eta * lam * a

    def rdi_step(state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        (alpha,) = state
        return (alpha - eta * (Km @ alpha - yy + lam**2 * alpha),)

    bs: np.ndarray | None = None
    if aux:
        alphas, bs = _run_recorded((np.zeros_like(yy), np.zeros_like(yy)), aux_step, times)
    else:
        (alphas,) = _run_recorded((np.zeros_like(yy),), rdi_step, times)
    train = np.einsum("ij,tj...->ti...", Km, alphas)
    test = None if Kt is None else np.einsum("ij,tj...->ti...", Kt, alphas)
    return KernelGDTrajectory(steps=times, alpha=alphas, train=train, test=test, b=bs)


def gd_rdi_kernel(
    K: ArrayLike | KernelMatrix,
    y: ArrayLike,
    lam: float,
    eta: float,
    steps: int,
    K_test_train: ArrayLike | None = None,
    record_every: int = 1,
) -> KernelGDTrajectory:
    r"""RDI gradient descent (Theorem 4.1, eq. (6)) written in function space.

    Substituting θ(t) − θ(0) = Zᵀα(t) into the RDI update gives
    :math:`\alpha(t+1) = \alpha(t) - \eta\,(K\alpha(t) - \tilde y + \lambda^2\alpha(t))`,
    α(0) = 0, which needs only K = k(X, X). Training outputs are K α(t);
    test outputs k(x, X)ᵀα(t). For λ > 0 and η ≤ 1/(‖K‖ + λ²) the iterates
    converge linearly (rate :func:`linear_rate`) to α* = (K + λ² I)⁻¹ỹ, i.e. to
    :func:`krr_predict`.

    Parameters
    ----------
    K : ArrayLike or DenseKernel, shape (n, n)
        Kernel matrix k(X, X) = Z Zᵀ.
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ.
    lam : float
        λ > 0; the ridge is λ².
    eta : float
        Learning rate η > 0 (Theorem 4.1 assumes η ≤ 1/(‖K‖ + λ²), :func:`learning_rate_bound`).
    steps : int
        Number of GD steps.
    K_test_train : ArrayLike, shape (m, n), optional
        Kernel values k(x_test_j, x_i), to record test outputs.
    record_every : int
        Keep the iterates at t = 0, r, 2r, … and the last step (r = ``record_every``).

    Returns
    -------
    KernelGDTrajectory
        The recorded α(t), training (and test) outputs.

    Examples
    --------
    With η at Theorem 4.1's bound, the iterates approach the KRR predictor:

    >>> import numpy as np
    >>> from ntk_core import gd_rdi_kernel, krr_predict, learning_rate_bound
    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> y = np.array([1.0, -1.0])
    >>> eta = learning_rate_bound(K, lam=1.0)
    >>> traj = gd_rdi_kernel(K, y, lam=1.0, eta=eta, steps=200, record_every=100)
    >>> traj.steps
    array([  0, 100, 200])
    >>> np.allclose(traj.train[-1], krr_predict(K, y, lam=1.0))
    True
    """
    lam = check_lam(lam, positive=True)
    Km, yy, eta, Kt, times = _kernel_gd_setup(K, y, eta, steps, K_test_train, record_every)
    return _run_kernel_gd(Km, yy, lam, eta, Kt, times, aux=False)


def gd_aux_kernel(
    K: ArrayLike | KernelMatrix,
    y: ArrayLike,
    lam: float,
    eta: float,
    steps: int,
    K_test_train: ArrayLike | None = None,
    record_every: int = 1,
) -> KernelGDTrajectory:
    r"""AUX gradient descent (Theorem 4.1, eq. (7)) written in function space.

    With θ̄(t) − θ(0) = Zᵀᾱ(t): :math:`a = K\bar\alpha + \lambda b - \tilde y`,
    :math:`\bar\alpha \leftarrow \bar\alpha - \eta a`,
    :math:`b \leftarrow b - \eta\lambda a`, from ᾱ(0) = b(0) = 0. The proof of
    Theorem 4.1 (Appendix B) shows ᾱ(t) = b(t)/λ and ᾱ(t) = α(t) of
    :func:`gd_rdi_kernel` for every t.

    Parameters
    ----------
    K, y, lam, eta, steps, K_test_train, record_every
        As in :func:`gd_rdi_kernel`.

    Returns
    -------
    KernelGDTrajectory
        The recorded α(t), training (and test) outputs and b(t).
    """
    lam = check_lam(lam, positive=True)
    Km, yy, eta, Kt, times = _kernel_gd_setup(K, y, eta, steps, K_test_train, record_every)
    return _run_kernel_gd(Km, yy, lam, eta, Kt, times, aux=True)


def gd_unregularized_kernel(
    K: ArrayLike | KernelMatrix,
    y: ArrayLike,
    eta: float,
    steps: int,
    K_test_train: ArrayLike | None = None,
    record_every: int = 1,
) -> KernelGDTrajectory:
    r"""Plain gradient descent on ½‖f(X) − ỹ‖² in function space (no regulariser).

    :math:`\alpha(t+1) = \alpha(t) - \eta(K\alpha(t) - \tilde y)`, α(0) = 0: the
    NTK dynamics of unregularised training (Section 3.2), which interpolate the
    noisy labels as t → ∞ (eq. (2)); stopping at a finite t is *early
    stopping*, the baseline the paper compares RDI/AUX against (Section 6).
    For η ≤ 1/‖K‖ the step-t predictor applies the spectral filter
    1 − (1 − ηs)ᵗ to each eigen-direction of K, against s/(s + λ²) for ridge
    (see :func:`gd_kernel_closed_form`).

    Parameters
    ----------
    K : ArrayLike or DenseKernel, shape (n, n)
        Kernel matrix k(X, X) = Z Zᵀ.
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ.
    eta : float
        Learning rate η > 0 (Theorem 4.1 assumes η ≤ 1/(‖K‖ + λ²), :func:`learning_rate_bound`).
    steps : int
        Number of GD steps.
    K_test_train : ArrayLike, shape (m, n), optional
        Kernel values k(x_test_j, x_i), to record test outputs.
    record_every : int
        Keep the iterates at t = 0, r, 2r, … and the last step (r = ``record_every``).

    Returns
    -------
    KernelGDTrajectory
        The recorded α(t), training (and test) outputs.
    """
    Km, yy, eta, Kt, times = _kernel_gd_setup(K, y, eta, steps, K_test_train, record_every)
    return _run_kernel_gd(Km, yy, 0.0, eta, Kt, times, aux=False)


def gd_kernel_closed_form(
    K: ArrayLike, y: ArrayLike, eta: float, t: int, lam: float = 0.0, K_test_train: ArrayLike | None = None
) -> np.ndarray:
    r"""Closed form of the function-space GD outputs at step ``t`` (RDI, or plain GD when λ = 0).

    Unrolling :math:`\alpha(t+1) = (I - \eta(K + \lambda^2 I))\alpha(t) + \eta\tilde y`
    with :math:`K = U\mathrm{diag}(s)U^\top` gives

    .. math:: \alpha(t) = U\,\mathrm{diag}\Big(\frac{1 - (1 - \eta(s_i + \lambda^2))^t}{s_i + \lambda^2}\Big)U^\top\tilde y

    (the diagonal entry is ηt when s_i + λ² = 0). Returns K α(t) at the
    training points, or k(x, X)ᵀα(t) for ``K_test_train``; shapes as in
    :func:`krr_predict`. As t → ∞ with λ > 0 and a convergent η this tends to
    the KRR predictor.

    Parameters
    ----------
    K : ArrayLike or DenseKernel, shape (n, n)
        Kernel matrix, symmetric positive semi-definite.
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ.
    eta : float
        Learning rate η > 0.
    t : int
        The step, t ≥ 0.
    lam : float
        λ ≥ 0 (0: plain GD).
    K_test_train : ArrayLike, shape (m, n), optional
        Kernel values against the training points, for test outputs.

    Returns
    -------
    numpy.ndarray, shape (n,) or (n, K); (m,) or (m, K) with ``K_test_train``
        The outputs at step t.
    """
    Km = dense_array(K, "K")
    yy = check_rows(y, Km.shape[0], "y")
    eta = check_positive(eta, "eta")
    t = check_count(t, "t", 0)
    lam = check_lam(lam)
    s, U = np.linalg.eigh(Km)
    check_psd_eigenvalues(s, Km, "K")
    h = s + lam**2
    x = eta * h
    g = np.full_like(h, eta * t)  # the limit for h = 0
    nonzero = np.abs(h) > np.finfo(np.float64).tiny
    stable = nonzero & (x < 1.0)  # accurate form for small η h: -expm1(t log(1 - η h)) / h
    g[stable] = -np.expm1(t * np.log1p(-x[stable])) / h[stable]
    rest = nonzero & ~stable
    with np.errstate(over="ignore", invalid="ignore"):
        g[rest] = (1.0 - (1.0 - x[rest]) ** t) / h[rest]
    if not np.all(np.isfinite(g)):  # |1 − ηh| > 1 raised to the t-th power: GD diverged beyond float64
        limit = 2.0 / float(np.max(h))
        raise ValueError(
            f"gradient descent with eta = {eta:g} diverges: eta (λ_max(K) + λ²) = {eta * float(np.max(h)):.4g} > 2, "
            f"so the residual along the top eigenvector grows as |1 − eta h|^t and overflows float64 at t = {t}; "
            f"take eta < 2 / (λ_max(K) + λ²) = {limit:.4g}"
        )
    c = U.T @ yy
    alpha = U @ (g[:, None] * c if c.ndim == 2 else g * c)
    if K_test_train is None:
        return Km @ alpha
    return _check_cross_kernel(K_test_train, Km.shape[0]) @ alpha


def sgd_kernel_outputs(
    K: ArrayLike,
    residual: ArrayLike,
    batches: Iterable[ArrayLike],
    lr: float,
    *,
    lam: float = 0.0,
    regularizer: str = "none",
    K_test_train: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    r"""Mini-batch SGD on the linearised network, in function space: the change of its outputs after the batches.

    The loss of a batch B is summed, ½ Σ_{i∈B} (g_i − ỹ_i)², as in :func:`ntk_core.train.train`. With
    θ − θ(0) = Zᵀα (K = ZZᵀ) and the residual r = ỹ − f(θ(0), X), one step on B is

    * ``"none"`` (plain SGD): :math:`e_B = (K\alpha)_B - r_B`, :math:`\alpha_B \leftarrow \alpha_B - \eta e_B`;
    * ``"rdi"``: the penalty of eq. (3) carried by a batch in the share :math:`|B|/n`
      (:class:`ntk_core.regularizers.RDIPenalty` with ``reduction="sum"``) first shrinks every coefficient,
      :math:`\alpha \leftarrow (1 - \eta\lambda^2 |B|/n)\,\alpha`, then :math:`\alpha_B \leftarrow
      \alpha_B - \eta e_B` (e_B taken before the shrink);
    * ``"aux"`` (eq. (4)): :math:`e_B = (K\alpha)_B + \lambda b_B - r_B`, :math:`\alpha_B \leftarrow \alpha_B -
      \eta e_B`, :math:`b_B \leftarrow b_B - \eta\lambda e_B`.

    A full batch every step is gradient descent (:func:`gd_kernel_closed_form` for ``"none"`` and ``"rdi"``).

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        The NTK at θ(0) on the training inputs.
    residual : ArrayLike, shape (n,)
        ỹ − f(θ(0), X).
    batches : iterable of index arrays
        The batches in the order SGD visits them (e.g. :func:`ntk_core.train.batch_order`).
    lr : float
        The learning rate η > 0.
    lam : float
        λ of RDI or AUX (ignored for ``"none"``).
    regularizer : {"none", "rdi", "aux"}
        The method.
    K_test_train : ArrayLike, shape (m, n), optional
        Kernel values of test inputs against the training inputs.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray or None)
        The change of the network's outputs on the training inputs, Kα (n,), and on the test inputs, k(x, X)ᵀα
        (m,) (``None`` without ``K_test_train``); AUX's λb is not part of the network's outputs.
    """
    Km = dense_array(K, "K")
    n = Km.shape[0]
    r = check_rows(residual, n, "residual")
    if r.ndim != 1:
        raise ValueError(f"residual must have shape (n,) = ({n},), got {r.shape}")
    lr = check_positive(lr, "lr")
    lam = check_lam(lam)
    check_choice(regularizer, "regularizer", ("none", "rdi", "aux"))
    alpha, b = np.zeros(n), np.zeros(n)
    for batch in batches:
        idx = np.asarray(batch, dtype=np.int64).reshape(-1)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= n:
            raise ValueError(f"every batch must hold indices in [0, {n}), got {idx.tolist()[:8]}")
        e = Km[idx] @ alpha - r[idx]
        if regularizer == "aux":
            e += lam * b[idx]
            b[idx] -= lr * lam * e
        elif regularizer == "rdi":
            alpha *= 1.0 - lr * lam**2 * idx.size / n
        alpha[idx] -= lr * e
    test = None if K_test_train is None else _check_cross_kernel(K_test_train, n) @ alpha
    return Km @ alpha, test


def gd_steps_to_fit(
    K: ArrayLike | KernelMatrix, y: ArrayLike, eta: float, tol: float, max_steps: int = 10**9
) -> int | None:
    r"""The first step at which plain gradient descent in the NTK regime fits the targets to mean loss ``tol``.

    Linearised GD from f(0) = 0 (Section 3.2; the difference trick makes the initial output 0) leaves the
    residual :math:`r(t) = f(t) - \tilde y = -(I - \eta K)^t \tilde y`, so with :math:`K = U\mathrm{diag}(s)U^\top`
    and :math:`c = U^\top\tilde y` the mean training loss is

    .. math:: L(t) = \frac{1}{2n}\lVert r(t)\rVert^2 = \frac{1}{2n}\sum_i (1 - \eta s_i)^{2t} c_i^2,

    non-increasing in t for 0 < η ≤ 2/‖K‖. Returns the smallest t with L(t) ≤ ``tol`` (found by doubling and
    bisection on the closed form, not by iterating), or ``None`` when no step reaches it: the part of ỹ
    outside the range of K is never fitted, or more than ``max_steps`` steps are needed. This sizes
    experiments whose precondition is that GD has converged (e.g. :func:`ntk_core.experiments.distance.tracking`,
    mean loss below 10⁻³); a finite network is not exactly linear, so measure before relying on it.

    Parameters
    ----------
    K : ArrayLike or DenseKernel, shape (n, n)
        Kernel matrix k(X, X), symmetric positive semi-definite.
    y : ArrayLike, shape (n,) or (n, K)
        Training targets ỹ.
    eta : float
        Learning rate, 0 < η < 2/‖K‖ (GD diverges otherwise).
    tol : float
        The mean loss to reach, > 0.
    max_steps : int
        The largest step considered.

    Returns
    -------
    int or None
        The first step t with L(t) ≤ ``tol`` (0 when ỹ already has mean loss ≤ ``tol``), or ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntk_core.krr import gd_steps_to_fit
    >>> K = np.diag([1.0, 0.01])
    >>> y = np.array([1.0, 1.0])
    >>> t = gd_steps_to_fit(K, y, eta=1.0, tol=1e-4)  # the slow direction: 0.99^(2t) / 4 <= 1e-4
    >>> t, bool(0.99 ** (2 * t) / 4 <= 1e-4 < 0.99 ** (2 * (t - 1)) / 4)
    (390, True)
    """
    Km = dense_array(K, "K")
    yy = check_rows(y, Km.shape[0], "y")
    eta = check_positive(eta, "eta")
    tol = check_positive(tol, "tol")
    max_steps = check_count(max_steps, "max_steps", 0)
    s, U = np.linalg.eigh(Km)
    check_psd_eigenvalues(s, Km, "K")
    top = float(max(s.max(), 0.0))
    if top > 0 and eta * top >= 2.0:
        raise ValueError(f"eta must be below 2/‖K‖ = {2.0 / top:.6g} for gradient descent to converge, got {eta!r}")
    c = U.T @ yy
    weight = (c**2).reshape(len(s), -1).sum(axis=1) / (2.0 * Km.shape[0])  # per eigen-direction, at t = 0
    with np.errstate(divide="ignore"):
        log_q = np.log(np.abs(1.0 - eta * np.clip(s, 0.0, None)))  # |1 − η s| ≤ 1; −inf where η s = 1

    def loss(t: int) -> float:
        decay = np.exp(2.0 * t * log_q) if t else np.ones_like(weight)
        return float(np.sum(weight * decay))

    if loss(0) <= tol:
        return 0
    if loss(max_steps) > tol:
        return None
    lo, hi = 0, 1  # loss(lo) > tol >= loss(hi)
    while loss(hi) > tol:
        lo, hi = hi, min(2 * hi, max_steps)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if loss(mid) > tol else (lo, mid)
    return hi


def sgd_step_factors(
    K: ArrayLike,
    batches: Iterable[ArrayLike],
    lr: float,
    *,
    lam: float = 0.0,
    regularizer: str = "none",
) -> np.ndarray:
    r"""η times the largest curvature of each batch's loss: ≤ 2 on every batch keeps linearised SGD bounded.

    On the linearised network one step of :func:`sgd_kernel_outputs` on batch B is gradient descent on a
    quadratic in the parameters whose Hessian is :math:`H_B = J_B^\top J_B + cI` (:math:`J_B` the Jacobian of
    the batch's outputs at θ(0), :math:`J_B J_B^\top = K_{BB}`), with c = 0 (``"none"``), c = λ²|B|/n (``"rdi"``:
    the batch's share of the penalty λ²/2 ‖θ − θ(0)‖² of eq. (3)) or, for ``"aux"`` (eq. (4)), the Hessian in
    (θ, b) of ½‖J_Bθ + λ b_B − r_B‖², whose largest eigenvalue is that of :math:`K_{BB} + \lambda^2 I`. So the factor
    of batch B is

    .. math:: \eta\,\lambda_{\max}(H_B) = \eta\,\big(\lambda_{\max}(K_{BB}) + c\big).

    The step's linear part I − ηH_B is symmetric with norm ≤ 1 exactly when this factor is ≤ 2; then no step
    expands the distance between two runs and the iterates stay bounded, whatever the order of the batches. A
    factor above 2 on some batch expands along its top eigenvector (by |1 − factor| per visit), which other
    batches may or may not undo: linearised SGD *can* diverge only if some factor exceeds 2.

    Parameters
    ----------
    K : ArrayLike, shape (n, n)
        The NTK at θ(0) on the training inputs.
    batches : iterable of index arrays
        The batches in the order SGD visits them.
    lr : float
        The learning rate η > 0 of the summed batch loss.
    lam : float
        λ of RDI or AUX (ignored for ``"none"``).
    regularizer : {"none", "rdi", "aux"}
        The method.

    Returns
    -------
    numpy.ndarray, shape (number of batches,)
        η λ_max(H_B) per batch, in the order given.
    """
    Km = dense_array(K, "K")
    n = Km.shape[0]
    lr = check_positive(lr, "lr")
    lam = check_lam(lam)
    check_choice(regularizer, "regularizer", ("none", "rdi", "aux"))
    idx = [np.asarray(b, dtype=np.int64).reshape(-1) for b in batches]
    for i in idx:
        if i.size == 0 or i.min() < 0 or i.max() >= n:
            raise ValueError(f"every batch must hold indices in [0, {n}), got {i.tolist()[:8]}")
    top = np.empty(len(idx))
    for size in {i.size for i in idx}:  # one batched eigensolver call per batch size
        which = [k for k, i in enumerate(idx) if i.size == size]
        rows = np.stack([idx[k] for k in which])
        top[which] = np.linalg.eigvalsh(Km[rows[:, :, None], rows[:, None, :]])[:, -1]
    if regularizer == "aux":
        top += lam**2
    elif regularizer == "rdi":
        top += lam**2 * np.array([i.size for i in idx], dtype=np.float64) / n
    return lr * top
