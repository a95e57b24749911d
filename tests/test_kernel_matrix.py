"""One kernel-matrix type (ntk_core.kernel_matrix): dense and on disk give the same answers, checked against
independent float64 computations (numpy.linalg.solve, explicit traces and products)."""

from __future__ import annotations

import numpy as np
import pytest

import ntk_core as nc
from ntk_core import bounds, krr
from ntk_core.kernel_matrix import DenseKernel, KernelMatrix
from ntk_core.kernel_matrix import OnDiskKernel, as_kernel_matrix


def _psd(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n + 5))
    return A @ A.T / n + 0.1 * np.eye(n)


@pytest.fixture
def kernels(tmp_path):
    K = _psd(40, 0)
    path = tmp_path / "K.npy"
    np.save(path, K)
    return K, as_kernel_matrix(K), as_kernel_matrix(str(path))


def test_as_kernel_matrix_tells_memory_from_disk(kernels, tmp_path):
    K, dense, disk = kernels
    assert isinstance(dense, DenseKernel) and isinstance(disk, OnDiskKernel)
    assert isinstance(dense, KernelMatrix) and isinstance(disk, KernelMatrix)
    assert as_kernel_matrix(dense) is dense and as_kernel_matrix(disk) is disk  # no second validation
    assert dense.n == disk.n == 40 and dense.shape == disk.shape == (40, 40)
    mm = np.load(tmp_path / "K.npy", mmap_mode="r")
    assert isinstance(as_kernel_matrix(mm), OnDiskKernel)
    torch = pytest.importorskip("torch")
    assert isinstance(as_kernel_matrix(torch.from_numpy(K)), DenseKernel)


@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_dense_and_disk_agree_with_an_independent_solve(kernels, lam):
    K, dense, disk = kernels
    rng = np.random.default_rng(1)
    Y = rng.standard_normal((40, 3))
    exact = np.linalg.solve(K + lam**2 * np.eye(40), Y)  # LU, not the package's Cholesky or CG
    for Km in (dense, disk):
        np.testing.assert_allclose(Km.ridge_solve(Y, lam), exact, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(Km.ridge_quadratic(Y, lam), np.einsum("ij,ij->j", Y, exact), rtol=1e-9)
        assert isinstance(Km.ridge_quadratic(Y[:, 0], lam), float)
        np.testing.assert_allclose(Km.matvec(Y), K @ Y, rtol=1e-12)
        assert Km.trace() == pytest.approx(float(np.sum(np.diag(K))), rel=1e-14)
        np.testing.assert_array_equal(Km.diagonal(), np.diag(K))


def test_the_bounds_and_krr_take_either_kind(kernels):
    K, dense, disk = kernels
    y = np.sign(np.random.default_rng(2).standard_normal(40))
    ref = float(y @ np.linalg.solve(K, y))
    for Km in (K, dense, disk):
        assert bounds.complexity(Km, y) == pytest.approx(ref, rel=1e-9)
        assert bounds.theorem_5_2_bound(Km, y, lam=1.0, p=0.1, delta=0.05).total == pytest.approx(
            bounds.theorem_5_2_bound(K, y, lam=1.0, p=0.1, delta=0.05).total, rel=1e-9
        )
    np.testing.assert_allclose(krr.krr_predict(dense, y, 0.5), krr.krr_predict(K, y, 0.5), rtol=0, atol=0)
    np.testing.assert_allclose(nc.krr_solve_ooc(dense, y, 0.5).alpha, krr.krr_coefficients(K, y, 0.5), rtol=1e-8)


def test_a_kernel_on_disk_is_refused_by_the_in_memory_solvers_with_its_route(kernels):
    _, _, disk = kernels
    with pytest.raises(TypeError, match="krr_solve_ooc"):
        krr.krr_predict(disk, np.ones(40), 0.5)


def test_a_dense_kernel_refuses_what_is_not_a_kernel_matrix():
    with pytest.raises(ValueError, match="symmetric"):
        DenseKernel(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="positive"):
        DenseKernel(np.array([[1.0, 2.0], [2.0, 1.0]])).ridge_solve(np.ones(2), 0.0)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        DenseKernel(np.diag([1.0, -0.1, 1.0])).ridge_solve(np.ones(3), 0.5)  # K + λ²I is PD, K is not PSD


@pytest.mark.parametrize("n, block", [(1, 4), (7, 3), (10, 10), (33, 8)])
def test_symmetrise_in_place_gives_the_symmetric_part_bit_for_bit(n, block):
    from ntk_core.kernel_matrix import symmetrise_in_place

    rng = np.random.default_rng(n)
    K = rng.standard_normal((n, n)) * 10.0 ** rng.integers(-8, 8, (n, n))  # sums that round
    expected = (K + K.T) / 2.0
    out = symmetrise_in_place(K, block=block)
    assert out is K
    assert np.array_equal(K, expected)


def test_symmetrise_in_place_refuses_what_it_cannot_overwrite():
    from ntk_core.kernel_matrix import symmetrise_in_place

    with pytest.raises(ValueError, match="square"):
        symmetrise_in_place(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="floating-point"):
        symmetrise_in_place(np.zeros((2, 2), dtype=int))
    K = np.zeros((2, 2))
    K.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        symmetrise_in_place(K)


def test_a_new_kind_implements_its_solve_and_gets_lambda_checked_and_the_bounds():
    """The operator interface: a kind implements trace, diagonal, matvec and ``_ridge_solve`` (trusting λ); the
    public ``ridge_solve`` / ``ridge_quadratic`` check λ once, and the bounds take the new kind."""

    class Diagonal(KernelMatrix):
        def __init__(self, d: list[float]) -> None:
            self.d = np.asarray(d, dtype=np.float64)
            self.n = len(self.d)

        def trace(self) -> float:
            return float(self.d.sum())

        def diagonal(self) -> np.ndarray:
            return self.d.copy()

        def matvec(self, V):
            V = np.asarray(V, dtype=np.float64)
            return self.d[:, None] * V if V.ndim == 2 else self.d * V

        def _ridge_solve(self, Y, lam):
            seen.append(lam)
            return Y / (self.d + lam**2) if Y.ndim == 1 else Y / (self.d + lam**2)[:, None]

    seen: list[float] = []
    K, y = Diagonal([1.0, 4.0]), np.array([1.0, -2.0])
    assert K.ridge_quadratic(y, 1.0) == pytest.approx(1 / 2 + 4 / 5) and seen == [1.0]
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="lam must be"):
            K.ridge_solve(y, bad)
    assert seen == [1.0]  # a bad λ never reached the kind's own solve
    assert bounds.complexity(K, y) == pytest.approx(1 + 1)  # yᵀK⁻¹y = 1/1 + 4/4
