"""Out-of-core kernel ridge regression (ntk_core.kernel_matrix.on_disk) against the in-memory solvers of ntk_core.krr."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from ntk_core import bounds
from ntk_core.krr import krr_coefficients, krr_predict
from ntk_core.kernel_matrix import is_on_disk, krr_predict_ooc, krr_solve_ooc, ridge_quadratic_ooc


def _rbf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


@pytest.fixture(scope="module")
def problem() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """An RBF Gram matrix on 300 points of R^3 (fast-decaying spectrum: ill-conditioned for small λ)."""
    rng = np.random.default_rng(0)
    x, x_test = rng.standard_normal((300, 3)), rng.standard_normal((40, 3))
    y = np.sign(x[:, 0]) + 0.1 * rng.standard_normal(300)
    return _rbf(x, x), _rbf(x_test, x), y, np.stack([y, x[:, 1]], axis=1)


def _on_disk(tmp_path: Path, name: str, a: np.ndarray) -> np.memmap:
    path = tmp_path / name
    np.save(path, a)
    return np.load(path, mmap_mode="r")


def _close(a: np.ndarray, b: np.ndarray, rtol: float = 1e-8) -> None:
    assert np.max(np.abs(a - b)) <= rtol * np.max(np.abs(b)), float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("lam", [0.01, 0.1, 1.0, 10.0])
def test_same_answers_as_krr_predict(problem, tmp_path, lam):
    K, Kt, y, _ = problem
    Kd, Ktd = _on_disk(tmp_path, "K.npy", K), _on_disk(tmp_path, "Kt.npy", Kt)
    sol = krr_solve_ooc(Kd, y, lam, block_rows=64)
    _close(sol.alpha, krr_coefficients(K, y, lam))
    _close(sol.fitted, krr_predict(K, y, lam))
    _close(sol.predict(Ktd, block_rows=7), krr_predict(K, y, lam, Kt))
    assert sol.residual <= 1e-10
    # one pass to validate, rank/n for the preconditioner, one per iteration, one for the true residual
    assert sol.passes == pytest.approx(2 + sol.rank / 300 + sol.iterations, abs=1e-9)


def test_multi_output_columns_and_paths(problem, tmp_path):
    K, Kt, _, Y = problem
    np.save(tmp_path / "K.npy", K)
    np.save(tmp_path / "Kt.npy", Kt)
    pred = krr_predict_ooc(tmp_path / "K.npy", Y, 0.1, str(tmp_path / "Kt.npy"), block_rows=50)
    assert pred.shape == (40, 2)
    _close(pred, krr_predict(K, Y, 0.1, Kt))
    _close(krr_predict_ooc(torch.from_numpy(K), Y, 0.1), krr_predict(K, Y, 0.1))


def test_small_lambda_needs_the_preconditioner(problem):
    """At λ = 0.01 (condition number ~7e5) plain CG does not converge in 300 iterations; PCG needs a few."""
    K, _, y, _ = problem
    with pytest.raises(RuntimeError, match="did not reach"):
        krr_solve_ooc(K, y, 0.01, rank=0, max_iter=300)
    sol = krr_solve_ooc(K, y, 0.01)
    assert sol.iterations <= 30 and sol.rank > 0


def test_lambda_zero_positive_definite(tmp_path):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((60, 60))
    K = A @ A.T / 60 + 0.5 * np.eye(60)
    y = rng.standard_normal(60)
    sol = krr_solve_ooc(_on_disk(tmp_path, "K.npy", K), y, 0.0, block_rows=16)
    _close(sol.alpha, krr_coefficients(K, y, 0.0))


def test_lambda_zero_full_rank_preconditioner(problem):
    """λ = 0 with a preconditioner of rank n (K ≈ L Lᵀ): a few iterations, not a hundred (the shift s is not
    the rounding-level tr(K − L Lᵀ)/n, whose P⁻¹ would amplify rounding errors by max eig / s)."""
    K, _, y, _ = problem
    Kpd = K[:120, :120] + 0.1 * np.eye(120)
    sol = krr_solve_ooc(Kpd, y[:120], 0.0, block_rows=16)
    assert sol.rank == 120 and sol.iterations <= 10, (sol.rank, sol.iterations)
    _close(sol.alpha, krr_coefficients(Kpd, y[:120], 0.0))


def test_float32_on_disk_nearly_symmetric(tmp_path):
    """A float32 K symmetric only up to rounding is used as (K + Kᵀ)/2, as check_kernel_matrix does."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((50, 8))
    K = (A @ A.T).astype(np.float32)
    K[3, 7] *= 1 + 1e-9  # asymmetric by less than the tolerance
    y = rng.standard_normal(50)
    sol = krr_solve_ooc(_on_disk(tmp_path, "K.npy", K), y, 0.5, block_rows=9)
    _close(sol.alpha, krr_coefficients(K, y, 0.5))


def test_never_holds_K_whole(tmp_path):
    """Blocks smaller than K, and a memory peak far below n² float64 numbers."""
    rng = np.random.default_rng(3)
    n = 1000
    x = rng.standard_normal((n, 4))
    path = tmp_path / "K.npy"
    np.save(path, _rbf(x, x))
    y = rng.standard_normal(n)
    tracemalloc.start()
    try:
        sol = krr_solve_ooc(path, y, 1.0, block_rows=40, rank=100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sol.max_block_entries == 40 * n
    assert sol.block_rows == 40
    assert peak < n * n * 8 / 4, peak  # K is 8 MB; the solver held < 2 MB (the preconditioner is 0.8 MB)
    _close(sol.alpha, krr_coefficients(np.load(path), y, 1.0))


class _CountingRows:
    """A matrix that records every read: no read may cover more rows than asked for."""

    def __init__(self, a: np.ndarray) -> None:
        self.a, self.shape, self.dtype, self.rows_read, self.max_rows = a, a.shape, a.dtype, 0, 0

    def __getitem__(self, key):
        rows = key[0] if isinstance(key, tuple) else key
        count = len(range(*rows.indices(self.shape[0])))
        self.rows_read += count
        self.max_rows = max(self.max_rows, count)
        return self.a[key]


def test_counts_rows_read(problem):
    K, _, y, _ = problem
    counted = _CountingRows(K)
    sol = krr_solve_ooc(counted, y, 1.0, block_rows=25)
    assert counted.max_rows == 25
    assert sol.passes > 3 and sol.max_block_entries == 25 * 300
    _close(sol.alpha, krr_coefficients(K, y, 1.0))


def test_bad_input(problem, tmp_path):
    K, Kt, y, _ = problem
    with pytest.raises(ValueError, match="square"):
        krr_solve_ooc(_on_disk(tmp_path, "rect.npy", K[:, :10]), y, 1.0)
    asym = K.copy()
    asym[0, 5] += 1e-3
    with pytest.raises(ValueError, match="symmetric"):
        krr_solve_ooc(_on_disk(tmp_path, "asym.npy", asym), y, 1.0)
    with pytest.raises(ValueError, match="lam must be >= 0"):
        krr_solve_ooc(K, y, -1.0)
    with pytest.raises(ValueError, match="n = 300 rows"):
        krr_solve_ooc(K, y[:-1], 1.0)
    with pytest.raises(ValueError, match="NaN"):
        bad = K.copy()
        bad[10, 10] = np.nan
        krr_solve_ooc(bad, y, 1.0)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        krr_solve_ooc(np.array([[1.0, 2.0], [2.0, 1.0]]), np.ones(2), 0.1)
    with pytest.raises(ValueError, match="singular to working precision"):
        krr_solve_ooc(np.array([[1.0, 1.0], [1.0, 1.0]]), np.array([1.0, -1.0]), 0.0)
    with pytest.raises(FileNotFoundError, match="no file"):
        krr_solve_ooc(tmp_path / "missing.npy", y, 1.0)
    with pytest.raises(TypeError, match="path to a .npy"):
        krr_solve_ooc(object(), y, 1.0)
    for broken in (b"", np.lib.format.magic(1, 0)):  # empty, or cut after the magic string: named, no EOFError
        (tmp_path / "broken.npy").write_bytes(broken)
        with pytest.raises(ValueError, match="broken.npy' is not a readable .npy array file"):
            krr_solve_ooc(tmp_path / "broken.npy", y, 1.0)
    with pytest.raises(ValueError, match="tol"):
        krr_solve_ooc(K, y, 1.0, tol=0.0)
    with pytest.raises(ValueError, match="block_rows"):
        krr_solve_ooc(K, y, 1.0, block_rows=0)
    sol = krr_solve_ooc(K, y, 1.0)
    with pytest.raises(ValueError, match="n = 300 training points"):
        sol.predict(Kt[:, :-1])
    with pytest.raises(TypeError, match="unexpected option"):
        krr_predict_ooc(K, y, 1.0, tolerance=1e-3)


def test_bounds_complexity_on_disk(problem, tmp_path):
    K, _, y, Y = problem
    Kpd = K + 0.05 * np.eye(300)
    path = tmp_path / "K.npy"
    np.save(path, Kpd)
    assert is_on_disk(path) and is_on_disk(np.load(path, mmap_mode="r")) and not is_on_disk(Kpd)
    assert bounds.complexity(path, y) == pytest.approx(bounds.complexity(Kpd, y), rel=1e-9)
    np.testing.assert_allclose(bounds.complexity(np.load(path, mmap_mode="r"), Y), bounds.complexity(Kpd, Y), rtol=1e-9)
    assert bounds.ridge_complexity(path, y, 0.3) == pytest.approx(bounds.ridge_complexity(Kpd, y, 0.3), rel=1e-9)
    assert ridge_quadratic_ooc(K, y, 0.3) == pytest.approx(float(y @ krr_coefficients(K, y, 0.3)), rel=1e-9)


def test_an_unattainable_residual_is_reported_and_a_huge_ridge_is_not_called_not_psd() -> None:
    """K = XXᵀ of rank 20 and λ = 1e-6: the solver stopped at a residual of 0.1 (its "attainable floor") and the
    predictions were 45 % off, in silence. λ = 1e150: K was called "not positive semi-definite" (pᵀKp read as
    pᵀ(K + λ² I)p − λ² pᵀp, all cancellation), while the in-memory solver answers."""
    import warnings

    from ntk_core.krr import IllConditionedWarning, krr_predict

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((300, 20)), rng.standard_normal(300)
    K = X @ X.T
    with pytest.warns(IllConditionedWarning, match="reached a relative residual of only"):
        sol = krr_solve_ooc(K, y, 1e-6)
    assert sol.residual > 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a well-conditioned solve says nothing
        krr_solve_ooc(K, y, 1.0)
        huge = krr_predict_ooc(K, y, 1e150)
    np.testing.assert_allclose(huge, krr_predict(K, y, 1e150), rtol=1e-12, atol=0)
