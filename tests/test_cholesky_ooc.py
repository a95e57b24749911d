"""The tiled out-of-core Cholesky (ntk_core.kernel_matrix.factored) against dense float64 LAPACK, and its persistence."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from ntk_core import bounds, infinite
from ntk_core._store import DamagedArtifactWarning
from ntk_core.kernel_matrix.factored import (
    FactoredKernel,
    KernelSource,
    NotPositiveDefiniteError,
    TiledCholesky,
    tiled_cholesky,
)


@pytest.fixture(scope="module")
def mnist_like() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Setting 1's kernel on 300 points of the sphere in R^20 (n not a multiple of the tiles), labels ±1 and
    three real columns."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 20))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, np.sign(rng.standard_normal(300)), rng.standard_normal((300, 3))


@pytest.mark.parametrize("lam", [0.0, 0.3, 3.0])
@pytest.mark.parametrize("tile", [64, 300, 1000])
def test_quadratic_solve_and_logdet_match_dense_lapack(mnist_like, tmp_path: Path, lam: float, tile: int) -> None:
    x, y, Y = mnist_like
    K = infinite.setting1_kernel(x)
    A = K + lam**2 * np.eye(len(K))
    L = tiled_cholesky(K, tmp_path, lam=lam, tile=tile)
    exact = y @ np.linalg.solve(A, y)
    assert abs(L.quadratic(y) - exact) <= 1e-9 * exact
    np.testing.assert_allclose(L.quadratic(Y), np.einsum("ij,ij->j", Y, np.linalg.solve(A, Y)), rtol=1e-9)
    np.testing.assert_allclose(
        L.solve(Y), np.linalg.solve(A, Y), rtol=0, atol=1e-9 * np.abs(np.linalg.solve(A, Y)).max()
    )
    assert L.logdet() == pytest.approx(np.linalg.slogdet(A)[1], rel=1e-10)
    np.testing.assert_allclose(L.matvec(Y), A @ Y, rtol=1e-12, atol=1e-12)
    assert L.min_pivot >= np.linalg.eigvalsh(A)[0] * (1 - 1e-9)  # every pivot bounds μ_min from above
    np.testing.assert_array_equal(L.k_diagonal(), np.diagonal(K))
    ones = np.ones(len(K))
    assert L.ones_rayleigh() == pytest.approx(ones @ K @ ones / len(K), rel=1e-12)
    assert L.ones_rayleigh() <= np.linalg.eigvalsh(K)[-1]


def test_the_factor_is_lapacks_factor(mnist_like, tmp_path: Path) -> None:
    """The tiles assemble to the lower Cholesky factor of K (unique for a positive definite K)."""
    x, _, _ = mnist_like
    K = infinite.setting1_kernel(x)
    L = tiled_cholesky(K, tmp_path, tile=128)
    full = np.zeros_like(K)
    for i, rows in enumerate(L.bounds):
        for j in range(i + 1):
            full[rows, L.bounds[j]] = L.get(i, j)
    np.testing.assert_allclose(full, np.linalg.cholesky(K), rtol=0, atol=1e-10)


def test_a_function_source_never_stores_K_and_gives_the_same_factor(mnist_like, tmp_path: Path) -> None:
    x, y, _ = mnist_like
    src = KernelSource.from_function(infinite.setting1_kernel, x)
    L = tiled_cholesky(src, tmp_path, tile=100)
    exact = y @ np.linalg.solve(infinite.setting1_kernel(x), y)
    assert L.quadratic(y) == pytest.approx(exact, rel=1e-9)  # K by tiles rounds x xᵀ in another order
    assert sorted(p.name for p in L.folder.glob("*.npz")) == [
        f"L_{i:04d}_{j:04d}.npz" for i in range(3) for j in range(i + 1)
    ]
    other = KernelSource.from_function(infinite.setting1_kernel, x[::-1].copy())
    assert tiled_cholesky(other, tmp_path, tile=100).folder != L.folder  # other inputs: another factor


def test_two_lambdas_of_one_name_never_share_a_factor(mnist_like, tmp_path: Path) -> None:
    """Identity by content, not by name: two kernels made by lambdas (both named ``<lambda>``) with other
    constants, or by one closure over other values, factored into the same folder, each get their own factor, and
    yᵀ(K + λ²I)⁻¹y is each kernel's own (against a dense solve); the same function in the same folder is found
    again, and an explicit ``name`` is a key the caller vouches for."""
    x, y, _ = mnist_like
    x = x[:150]
    y = y[:150]

    def scaled(gamma: float):
        return lambda a, b: gamma * infinite.setting1_kernel(a, b)

    kernels = [
        lambda a, b: 1.0 * infinite.setting1_kernel(a, b),
        lambda a, b: 3.0 * infinite.setting1_kernel(a, b),
        scaled(2.0),
        scaled(5.0),
    ]
    folders = set()
    for k in kernels:
        L = tiled_cholesky(KernelSource.from_function(k, x), tmp_path, lam=0.5, tile=64)
        folders.add(L.folder)
        K = k(x, x)
        exact = y @ np.linalg.solve(K + 0.25 * np.eye(len(y)), y)
        assert L.quadratic(y) == pytest.approx(exact, rel=1e-9)
    assert len(folders) == 4
    again = tiled_cholesky(KernelSource.from_function(kernels[2], x), tmp_path, lam=0.5, tile=64)
    assert again.folder in folders and again.computed == 0  # the same closure: its factor found, nothing computed
    named = [KernelSource.from_function(k, x, name="mine").identity for k in kernels[:2]]
    assert named[0] == named[1]


def test_resumes_after_a_kill_with_the_same_bits(mnist_like, tmp_path: Path) -> None:
    x, y, _ = mnist_like
    K = infinite.setting1_kernel(x)
    whole = tiled_cholesky(K, tmp_path / "whole", tile=64)
    calls = {"n": 0}

    def dying(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt  # killed in the middle of the factorisation
        return infinite.setting1_kernel(a, b)

    src = KernelSource.from_function(dying, x, name="setting1")
    with pytest.raises(KeyboardInterrupt):
        tiled_cholesky(src, tmp_path / "killed", tile=64)
    resumed = tiled_cholesky(src, tmp_path / "killed", tile=64)
    assert 0 < resumed.computed < 15  # 15 tiles in all: the 7 finished before the kill are not recomputed
    again = tiled_cholesky(
        KernelSource.from_function(infinite.setting1_kernel, x, name="setting1"), tmp_path / "killed", tile=64
    )
    assert again.computed == 0
    fresh = tiled_cholesky(
        KernelSource.from_function(infinite.setting1_kernel, x, name="setting1"), tmp_path / "fresh", tile=64
    )
    for i in range(5):
        for j in range(i + 1):
            np.testing.assert_array_equal(resumed.get(i, j), fresh.get(i, j))
    assert resumed.quadratic(y) == pytest.approx(whole.quadratic(y), rel=1e-7)


def test_a_damaged_tile_is_set_aside_and_recomputed_bit_for_bit(mnist_like, tmp_path: Path) -> None:
    x, y, _ = mnist_like
    K = infinite.setting1_kernel(x)
    L = tiled_cholesky(K, tmp_path, tile=64)
    before = L.get(3, 1).copy()
    value = L.quadratic(y)
    path = L.folder / "L_0003_0001.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.warns(DamagedArtifactWarning, match="L_0003_0001"):
        again = tiled_cholesky(K, tmp_path, tile=64)
        assert again.quadratic(y) == value
    np.testing.assert_array_equal(again.get(3, 1), before)
    assert list(L.folder.glob("L_0003_0001.npz.damaged-*"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedArtifactWarning)
        assert tiled_cholesky(K, tmp_path, tile=64).computed == 0


def test_singular_and_indefinite_kernels_are_refused_with_the_way_out(mnist_like, tmp_path: Path) -> None:
    x, _, _ = mnist_like
    twice = np.concatenate([x[:50], x[:50]])  # duplicated inputs: K is singular
    with pytest.raises(NotPositiveDefiniteError, match="take λ > 0"):
        tiled_cholesky(KernelSource.from_function(infinite.setting1_kernel, twice), tmp_path, tile=32)
    assert tiled_cholesky(KernelSource.from_function(infinite.setting1_kernel, twice), tmp_path, lam=0.1, tile=32)
    indefinite = np.diag([1.0, 1.0, -5.0])
    with pytest.raises(
        NotPositiveDefiniteError, match=r"not positive semi-definite: its diagonal entry K\[2, 2\] = -5"
    ):
        tiled_cholesky(indefinite, tmp_path, lam=1.0, tile=2)
    # at λ = 0 (yᵀK⁻¹y), the message says why λ is 0 and still names the negative diagonal, not a singular K
    with pytest.raises(NotPositiveDefiniteError, match=r"K \(λ = 0: yᵀK⁻¹y factors K itself\).*K\[2, 2\] = -5"):
        tiled_cholesky(indefinite, tmp_path, lam=0.0, tile=2)
    rotated = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1: no negative diagonal, still indefinite
    with pytest.raises(NotPositiveDefiniteError, match=r"not positive semi-definite \(λ² = 0.25"):
        tiled_cholesky(rotated, tmp_path, lam=0.5, tile=2)


def test_bad_matrices_and_arguments_get_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\(K \+ K.T\) / 2"):
        KernelSource.from_matrix(np.array([[1.0, 0.5], [0.4, 1.0]]))
    KernelSource.from_matrix(np.array([[1.0, 0.5], [0.5 + 1e-16, 1.0]]))  # rounding is not asymmetry
    with pytest.raises(ValueError, match="square"):
        KernelSource.from_matrix(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        KernelSource.from_matrix(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(FileNotFoundError, match="no file"):
        KernelSource.from_matrix(tmp_path / "missing.npy")
    with pytest.raises(TypeError, match="function"):
        KernelSource.from_function("rbf", np.ones((3, 2)))  # type: ignore[arg-type]
    bad_shape = KernelSource.from_function(lambda a, b: np.ones((2, 2)), np.ones((3, 1)), name="bad")
    with pytest.raises(ValueError, match="shape"):
        tiled_cholesky(bad_shape, tmp_path, tile=3)
    L = tiled_cholesky(np.eye(3) * 2.0, tmp_path, tile=2)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        L.quadratic(np.ones(4))
    with pytest.raises(ValueError, match="lam"):
        tiled_cholesky(np.eye(3), tmp_path, lam=-1.0)


def test_a_matrix_on_disk_gives_the_in_memory_factor(mnist_like, tmp_path: Path) -> None:
    x, y, _ = mnist_like
    K = infinite.setting1_kernel(x)
    np.save(tmp_path / "K.npy", K)
    on_disk = tiled_cholesky(tmp_path / "K.npy", tmp_path / "f", tile=128, memory_budget=10**6)
    in_memory = tiled_cholesky(K, tmp_path / "f", tile=128)
    assert on_disk.folder == in_memory.folder and in_memory.computed == 0  # the same content, the same factor
    assert on_disk.quadratic(y) == in_memory.quadratic(y)


def _exact_quadratic(K: np.ndarray, y: np.ndarray) -> float:
    """yᵀK⁻¹y of the float64 numbers in K and y, by Gaussian elimination over the rationals (then rounded)."""
    from fractions import Fraction

    n = len(y)
    A = [[Fraction(float(v)) for v in row] + [Fraction(float(b))] for row, b in zip(K, y)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(A[r][c]))
        A[c], A[p] = A[p], A[c]
        for r in range(c + 1, n):
            f = A[r][c] / A[c][c]
            A[r] = [a - f * b for a, b in zip(A[r], A[c])]
    sol = [Fraction(0)] * n
    for r in reversed(range(n)):
        sol[r] = (A[r][n] - sum(A[r][k] * sol[k] for k in range(r + 1, n))) / A[r][r]
    return float(sum(Fraction(float(b)) * s for b, s in zip(y, sol)))


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_the_error_estimate_follows_the_error_that_conditioning_causes(tmp_path: Path, seed: int) -> None:
    """On kernels with condition number 1e11, yᵀK⁻¹y is off by 1e-7 to 1e-6 (against exact rational
    arithmetic), and the estimate is that error within a factor of 10; on a well-conditioned one both are tiny."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((24, 24)))
    y = rng.standard_normal(24)
    for smallest, worst in ((1e-11, None), (0.1, 1e-13)):
        K = (Q * np.geomspace(1.0, smallest, 24)) @ Q.T
        K = (K + K.T) / 2
        exact = _exact_quadratic(K, y)
        value, estimate = tiled_cholesky(K, tmp_path, tile=8).checked_quadratic(y)
        error = abs(value - exact) / exact
        if worst is None:
            assert error > 1e-9 and error / 10 < estimate < error * 10, (error, estimate)
        else:
            assert error < worst and estimate < worst, (error, estimate)


def test_the_bounds_take_a_factored_kernel(mnist_like, tmp_path: Path) -> None:
    x, y, Y = mnist_like
    K = infinite.setting1_kernel(x)
    FK = FactoredKernel(KernelSource.from_function(infinite.setting1_kernel, x), tmp_path, tile=100)
    # a diagonal tile is kernel(x1, x1) with the same object, so setting1_kernel takes cos = 1 exactly there (arccos
    # near 1 would turn a rounding of x·x in its last bit into √(2 · 2⁻⁵²) ≈ 2e-8 of π)
    assert FK.trace() == pytest.approx(np.trace(K), rel=1e-14)
    dense = bounds.theorem_5_2_bound(K, y, 1.0, 0.2, 0.05)
    tiled = bounds.theorem_5_2_bound(FK, y, 1.0, 0.2, 0.05)
    assert tiled.total == pytest.approx(dense.total, rel=1e-8)
    assert sorted(FK._factors) == [0.0, 1.0]  # λ = 0 for yᵀK⁻¹y, λ = 1 for the ridge term
    labels = np.argmax(Y, axis=1)
    P = np.full((3, 3), 0.1) + 0.7 * np.eye(3)
    multi = bounds.theorem_5_3_bound(FK, labels, P, 2.0, 0.05)
    assert multi.total == pytest.approx(bounds.theorem_5_3_bound(K, labels, P, 2.0, 0.05).total, rel=1e-8)
    np.testing.assert_allclose(FK.matvec(Y), K @ Y, rtol=0, atol=1e-12 * np.abs(Y).max())
    assert isinstance(FK.factor(0.0), TiledCholesky)


def test_each_quadratic_is_one_pass_over_its_factor(mnist_like, tmp_path: Path, monkeypatch) -> None:
    """A bound asks for yᵀK⁻¹y and its ridge term again and again (at each λ, then the ridge term alone): each
    (λ, Y) costs one pass over its factor, and the values are those of the passes."""
    x, y, Y = mnist_like
    FK = FactoredKernel(KernelSource.from_function(infinite.setting1_kernel, x), tmp_path, tile=100)
    passes: list[float] = []
    forward = TiledCholesky.forward
    monkeypatch.setattr(TiledCholesky, "forward", lambda self, V: passes.append(self.lam) or forward(self, V))
    for _ in range(2):  # the second round finds every value
        for lam in (0.5, 1.0):
            bounds.theorem_5_2_bound(FK, y, lam, 0.2, 0.05)  # on ȳ = 0.6 y: yᵀK⁻¹y and the ridge term
            ridge = bounds.ridge_complexity(FK, y, lam)
        complexity = bounds.complexity(FK, y)
    # ȳ at λ = 0, 0.5, 1, y at the same: one pass each
    assert sorted(passes) == [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]
    assert (ridge, complexity) == (FK.factor(1.0).quadratic(y), FK.factor(0.0).quadratic(y))
    first = FK.ridge_quadratic(Y, 1.0)
    first[0] = -1.0  # a copy: the kept value cannot be changed through it
    np.testing.assert_array_equal(FK.ridge_quadratic(Y, 1.0), FK.factor(1.0).quadratic(Y))
    assert FK.ridge_quadratic(y[::-1].copy(), 1.0) == FK.factor(1.0).quadratic(y[::-1])  # other labels: computed


def test_the_diagonal_is_read_once_and_given_as_a_copy(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((30, 30))
    K = A @ A.T + 30 * np.eye(30)
    reads = []
    k_diagonal = TiledCholesky.k_diagonal

    def counted(self):
        reads.append(self.lam)
        return k_diagonal(self)

    monkeypatch.setattr(TiledCholesky, "k_diagonal", counted)
    FK = FactoredKernel(K, tmp_path, tile=8)
    FK.factor(0.5)
    traces = [FK.trace() for _ in range(4)] + [bounds.theorem_5_2_bound(FK, np.sign(K[:, 0]), 1.0, 0.1, 0.05).total]
    assert len(reads) == 1, "tr K read the diagonal tiles more than once"
    assert traces[:4] == [float(np.trace(K))] * 4
    d = FK.diagonal()
    d[:] = 0.0  # the caller's copy: the kept diagonal is not changed
    assert np.array_equal(FK.diagonal(), np.diag(K))
    # without a factor the diagonal comes from the source's diagonal tiles, once as well
    FK2 = FactoredKernel(K, tmp_path / "other", tile=8)
    assert np.array_equal(FK2.diagonal(), np.diag(K)) and FK2.trace() == float(np.trace(K))


def test_kept_tiles_evaluate_k_once_read_no_file_in_passes_and_give_the_same_bits(tmp_path, monkeypatch):
    from ntk_core import _store

    rng = np.random.default_rng(7)
    x = rng.standard_normal((90, 6))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    calls = []

    def kernel(a, b):
        calls.append(1)
        return infinite.setting1_kernel(a, b)

    y = np.sign(rng.standard_normal(90))
    Y = rng.standard_normal((90, 3))
    loads = []
    load = _store.load
    monkeypatch.setattr(_store, "load", lambda *a, **k: loads.append(1) or load(*a, **k))

    def unit(folder, keep_memory):
        FK = FactoredKernel(KernelSource.from_function(kernel, x, name="k"), folder, tile=32, keep_memory=keep_memory)
        out = []
        for lam in (0.0, 0.5, 2.0):
            out += [FK.ridge_solve(Y, lam), FK.ridge_quadratic(y, lam), FK.factor(lam).solve(Y)]
        out.append(FK.factor(0.0).checked_quadratic(y)[1])
        out.append(FK.matvec(Y))
        return FK, out

    calls.clear(), loads.clear()
    FK, kept = unit(tmp_path / "kept", None)
    kept_calls, kept_loads = len(calls), len(loads)
    calls.clear(), loads.clear()
    _, plain = unit(tmp_path / "plain", 0)
    assert all(np.array_equal(a, b) for a, b in zip(kept, plain)), "keeping changed a number"
    tiles = 3 * 4 // 2  # 3 tiles of 32 (the last of 26): 6 lower tiles of K
    assert kept_calls == tiles, "K's tiles were evaluated more than once"
    assert len(calls) > 3 * tiles  # without keeping: once per λ, and again for each matvec
    assert len(loads) > kept_loads
    # λ = 0's factor and the last other one used are kept: turning to a third λ dropped the previous one's tiles
    assert FK._factors[0.0]._kept and FK._factors[0.5]._kept == {} and FK._factors[2.0]._kept
    # factors that fit are made in memory only (no file written, verified and deleted); the others are persisted
    assert not list((tmp_path / "kept").rglob("*.npz")) and len(list((tmp_path / "plain").rglob("*.npz"))) == 18
    computed = FK._factors[0.5].computed
    assert np.array_equal(FK.factor(0.5).solve(Y), kept[5]), "a dropped factor made again gave other bits"
    assert FK._factors[0.5].computed == computed + 6 and FK._factors[2.0]._kept == {}
    tile = FK._factors[0.0].get(1, 0)
    with pytest.raises(ValueError):
        tile[0, 0] = 1.0  # a kept tile is read-only: it stays what was saved
    # a source kept alone: one evaluation per block, each given as a copy
    src = KernelSource.from_function(kernel, x, name="k").kept()
    calls.clear()
    a = src.block(slice(0, 10), slice(0, 10))
    a[:] = 0.0
    assert np.array_equal(src.block(slice(0, 10), slice(0, 10)), infinite.setting1_kernel(x[:10], x[:10]))
    assert len(calls) == 1
    with pytest.raises(ValueError, match="keep_memory"):
        FactoredKernel(KernelSource.from_function(kernel, x), tmp_path, keep_memory=-1)


def test_several_label_matrices_are_one_forward_pass_and_each_is_kept(mnist_like, tmp_path: Path, monkeypatch):
    """``forwards`` gives L⁻¹Y for every Y asked for (vectors and matrices, a repeated one once) from one pass
    over the factor, equal to a dense triangular solve; the quadratics, the solve and the error estimate of
    the same labels then need no forward pass of Y again (the estimate one for its residual)."""
    import scipy.linalg

    x, y, Y = mnist_like
    FK = FactoredKernel(KernelSource.from_function(infinite.setting1_kernel, x), tmp_path, tile=100, keep_memory=0)
    passes: list[tuple[str, int]] = []
    for name in ("forward", "backward"):
        method = getattr(TiledCholesky, name)
        monkeypatch.setattr(
            TiledCholesky, name, lambda self, V, m=method, k=name: passes.append((k, np.shape(V)[1:])) or m(self, V)
        )
    z_y, z_Y, z_again = FK.forwards([y, Y, y.copy()], 0.0)
    assert passes == [("forward", (4,))], "one pass for the four distinct columns"
    L = np.linalg.cholesky(infinite.setting1_kernel(x))
    np.testing.assert_allclose(z_y, scipy.linalg.solve_triangular(L, y, lower=True), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(z_Y, scipy.linalg.solve_triangular(L, Y, lower=True), rtol=1e-10, atol=1e-10)
    assert z_y.shape == (300,) and z_Y.shape == (300, 3) and np.array_equal(z_again, z_y)
    kept = z_Y.copy()
    z_Y[:] = 0.0  # a copy: the kept one is unchanged
    assert np.array_equal(FK.forwards([Y], 0.0)[0], kept)
    passes.clear()
    assert FK.ridge_quadratic(y, 0.0) == float(np.sum(z_y * z_y))
    np.testing.assert_allclose(FK.ridge_solve(Y, 0.0), np.linalg.solve(L @ L.T, Y), rtol=1e-9)
    _, error = FK.checked_quadratic(Y, 0.0)
    assert passes == [("backward", (3,)), ("backward", (3,)), ("forward", (3,))], passes
    assert np.all(error < 1e-10)
    with pytest.raises(ValueError, match=r"shape \(300,\) or \(300, m\)"):
        FK.forwards([y, np.ones(7)], 0.0)
    with pytest.raises(ValueError, match="forward must be"):
        FK.factor(0.0).checked_quadratic(Y, forward=z_y)


def test_the_conditioning_reads_no_tile_that_a_pass_has_read(mnist_like, tmp_path: Path, monkeypatch) -> None:
    """After the factorisation, the pivots, K's diagonal and 1ᵀK1/n come from what the tiles said as they were
    computed or read: no file is read for them, and they are the numbers a fresh reader of the folder gets."""
    from ntk_core import _store

    x, _, _ = mnist_like
    L = tiled_cholesky(KernelSource.from_function(infinite.setting1_kernel, x), tmp_path, tile=64)
    loads = []
    load = _store.load
    monkeypatch.setattr(_store, "load", lambda *a, **k: loads.append(1) or load(*a, **k))
    noted = (L.pivots(), L.k_diagonal(), L.ones_rayleigh(), L.min_pivot)
    assert loads == []
    fresh = TiledCholesky(L.source, L.lam, L.tile, tmp_path)
    read = (fresh.pivots(), fresh.k_diagonal(), fresh.ones_rayleigh(), fresh.min_pivot)
    assert len(loads) == 15, "a fresh reader loads each of the 5 · 6 / 2 tiles once"
    assert all(np.array_equal(a, b) for a, b in zip(noted, read))
    K = infinite.setting1_kernel(x)
    assert noted[2] == pytest.approx(K.sum() / len(K), rel=1e-12)
