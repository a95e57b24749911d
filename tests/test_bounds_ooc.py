"""The bound terms of ntk_core.bounds on a kernel matrix on disk (issue 15) against the in-memory float64 ones."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from ntk_core import bounds, symmetric_transition
from ntk_core.kernel_matrix import OnDiskKernel, is_on_disk

N = 150
LAM, SIGMA, DELTA = 0.5, 0.3, 0.05


def _rbf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


@pytest.fixture(scope="module")
def problem(tmp_path_factory) -> dict:
    """An RBF Gram matrix + 0.1 I on 150 points of R^3 (positive definite: yᵀK⁻¹y exists), saved as .npy."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 3))
    K = _rbf(x, x) + 0.1 * np.eye(N)
    path = tmp_path_factory.mktemp("bounds_ooc") / "K.npy"
    np.save(path, K)
    return {
        "K": K,
        "path": path,
        "y": np.sign(x[:, 0] + 0.01),  # ±1 labels (Theorem 5.2)
        "ybar": 0.5 * np.sign(x[:, 0] + 0.01),  # |y| <= 1 (Theorem 5.1, lemmas)
        "labels": rng.integers(0, 3, N),
        "P": symmetric_transition(3, 0.3),
    }


# Every function of ntk_core.bounds that takes a kernel matrix, reduced to numbers (all terms of the result).
TERMS = {
    "complexity": lambda K, d: bounds.complexity(K, d["y"]),
    "complexity_columns": lambda K, d: bounds.complexity(K, np.stack([d["y"], d["ybar"] ** 2], axis=1)),
    "ridge_complexity": lambda K, d: bounds.ridge_complexity(K, d["y"], LAM),
    "rkhs_norm": lambda K, d: bounds.rkhs_norm(K, d["ybar"]),
    "krr_rkhs_norm": lambda K, d: bounds.krr_rkhs_norm(K, d["y"], LAM),
    "lemma_c1_bound": lambda K, d: bounds.lemma_c1_bound(K, d["ybar"], LAM, SIGMA, DELTA),
    "lemma_c2_bound": lambda K, d: bounds.lemma_c2_bound(K, d["ybar"], LAM, SIGMA, DELTA),
    "theorem_5_1_bound": lambda K, d: bounds.theorem_5_1_bound(K, d["ybar"], LAM, SIGMA, DELTA),
    "theorem_5_1_printed": lambda K, d: bounds.theorem_5_1_printed(K, d["ybar"], LAM, SIGMA, DELTA),
    "theorem_5_2_bound": lambda K, d: bounds.theorem_5_2_bound(K, d["y"], LAM, 0.2, DELTA),
    "theorem_5_2_printed": lambda K, d: bounds.theorem_5_2_printed(K, d["y"], LAM, 0.2, DELTA),
    "theorem_5_3_bound": lambda K, d: bounds.theorem_5_3_bound(K, d["labels"], d["P"], LAM, DELTA),
    "theorem_5_3_printed": lambda K, d: bounds.theorem_5_3_printed(K, d["labels"], d["P"], LAM, DELTA),
}


def _numbers(value) -> np.ndarray:
    """Every number in a result: floats, arrays, and the fields (and total) of the result dataclasses."""
    if isinstance(value, (float, int, np.floating)):
        return np.array([float(value)])
    if isinstance(value, np.ndarray):
        return value.astype(np.float64).ravel()
    if isinstance(value, tuple):
        return np.concatenate([_numbers(v) for v in value])
    fields = [getattr(value, f) for f in value.__dataclass_fields__]
    return np.concatenate([_numbers(v) for v in fields if not isinstance(v, str)] + [_numbers(value.total)])


def _close(got, want, rtol: float = 1e-8) -> None:
    a, b = _numbers(got), _numbers(want)
    assert a.shape == b.shape
    err = np.abs(a - b) / np.maximum(np.abs(b), 1e-300)
    assert np.all(err <= rtol), f"relative error {float(np.max(err)):.3g}"


@pytest.mark.parametrize("name", sorted(TERMS))
@pytest.mark.parametrize("form", ["memmap", "path", "OnDiskKernel"])
def test_on_disk_equals_in_memory(problem, name, form):
    on_disk = {
        "memmap": lambda p: np.load(p, mmap_mode="r"),
        "path": str,
        "OnDiskKernel": lambda p: OnDiskKernel(p, block_rows=32),
    }[form](problem["path"])
    assert is_on_disk(on_disk)
    _close(TERMS[name](on_disk, problem), TERMS[name](problem["K"], problem))


def test_independent_float64_values(problem):
    """The quantities themselves, computed directly in float64 (no ntk_core solver)."""
    K, y, path = problem["K"], problem["y"], problem["path"]
    Kd = OnDiskKernel(path, block_rows=32)
    _close(bounds.complexity(Kd, y), float(y @ np.linalg.solve(K, y)))
    _close(bounds.ridge_complexity(Kd, y, LAM), float(y @ np.linalg.solve(K + LAM**2 * np.eye(N), y)))
    _close(Kd.trace(), float(np.trace(K)))
    _close(bounds.rkhs_norm(Kd, y), float(np.sqrt(y @ K @ y)))
    alpha = np.linalg.solve(K + LAM**2 * np.eye(N), y)
    _close(bounds.krr_rkhs_norm(Kd, y, LAM), float(np.sqrt(alpha @ K @ alpha)))
    c1 = bounds.lemma_c1_bound(Kd, problem["ybar"], LAM, SIGMA, DELTA)
    _close(c1.noise, SIGMA / (2 * LAM) * float(np.sqrt(np.trace(K))))


def test_float32_on_disk(problem, tmp_path):
    """A float32 K on disk (as distributed_ntk writes it) gives what the same float32 K gives in memory."""
    K32 = problem["K"].astype(np.float32)
    np.save(tmp_path / "K32.npy", K32)
    for name in ("complexity", "theorem_5_1_bound", "theorem_5_3_bound"):
        _close(TERMS[name](tmp_path / "K32.npy", problem), TERMS[name](K32, problem))


def test_passes_reported(problem):
    """An OnDiskKernel counts the passes of everything that uses it; K is validated once, tr K costs no read."""
    Kd = OnDiskKernel(problem["path"], block_rows=32)
    assert Kd.trace() == pytest.approx(np.trace(problem["K"]), rel=1e-14)
    assert Kd.entries_read == sum(min(32, N - s) ** 2 for s in range(0, N, 32))  # the diagonal tiles only
    Kd = OnDiskKernel(problem["path"], block_rows=32).check()
    assert Kd.passes == pytest.approx(1.0)
    Kd.trace()
    assert Kd.passes == pytest.approx(1.0)  # the diagonal came with the validation pass
    bound = bounds.theorem_5_1_bound(Kd, problem["ybar"], LAM, SIGMA, DELTA)
    after_51 = Kd.passes
    assert 3.0 < after_51 < 400.0 and bound.total > 0
    bounds.rkhs_norm(Kd, problem["ybar"])
    assert Kd.passes == pytest.approx(after_51 + 1.0)  # αᵀKα: one pass, no second validation
    # Theorem 5.3 solves for its 3 outputs together (3 columns per pass): fewer passes than 3 separate solves.
    fresh = OnDiskKernel(problem["path"], block_rows=32)
    bounds.theorem_5_3_bound(fresh, problem["labels"], problem["P"], LAM, DELTA)
    assert fresh.passes < 3 * (after_51 - 1.0)


def test_never_holds_K_whole(tmp_path):
    """K of 8 MB read with a 320 kB block budget: blocks within the budget, heap peak far below n² floats."""
    rng = np.random.default_rng(3)
    n = 1000
    x = rng.standard_normal((n, 4))
    path = tmp_path / "K.npy"
    np.save(path, _rbf(x, x) + 0.1 * np.eye(n))
    y = 0.5 * np.sign(x[:, 0])
    budget = 40 * n * 8  # K is 25 times larger
    tracemalloc.start()
    try:
        Kd = OnDiskKernel(path, memory_budget=budget, rank=100)
        bound = bounds.theorem_5_1_bound(Kd, y, LAM, SIGMA, DELTA)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert Kd.max_block_entries * 8 <= budget
    assert peak < n * n * 8 / 4, peak  # K is 8 MB; the bound held < 2 MB (the preconditioner is 0.8 MB)
    _close(bound, bounds.theorem_5_1_bound(np.load(path), y, LAM, SIGMA, DELTA))


class _CountingRows:
    """A matrix that records every read (an object with .shape and 2-D slicing, as OnDiskKernel takes)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a, self.shape, self.dtype, self.max_rows = a, a.shape, a.dtype, 0

    def __getitem__(self, key):
        rows = key[0] if isinstance(key, tuple) else key
        self.max_rows = max(self.max_rows, len(range(*rows.indices(self.shape[0]))))
        return self.a[key]


def test_counts_rows_read(problem):
    counted = _CountingRows(problem["K"])
    Kd = OnDiskKernel(counted, block_rows=25)
    _close(
        bounds.lemma_c2_bound(Kd, problem["ybar"], LAM, SIGMA, DELTA),
        bounds.lemma_c2_bound(problem["K"], problem["ybar"], LAM, SIGMA, DELTA),
    )
    assert counted.max_rows == 25


def test_bad_input(problem, tmp_path):
    K, y, path = problem["K"], problem["y"], problem["path"]
    np.save(tmp_path / "rect.npy", K[:, :10])
    with pytest.raises(ValueError, match="square"):
        bounds.theorem_5_1_bound(tmp_path / "rect.npy", problem["ybar"], LAM, SIGMA, DELTA)
    asym = K.copy()
    asym[0, 5] += 1e-3
    np.save(tmp_path / "asym.npy", asym)
    with pytest.raises(ValueError, match="symmetric"):
        bounds.lemma_c1_bound(tmp_path / "asym.npy", problem["ybar"], LAM, SIGMA, DELTA)
    nan = K.copy()
    nan[3, 3] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    with pytest.raises(ValueError, match="NaN"):
        bounds.rkhs_norm(tmp_path / "nan.npy", y)
    with pytest.raises(ValueError, match="NaN"):
        OnDiskKernel(tmp_path / "nan.npy").trace()
    with pytest.raises(ValueError, match=r"y must have n = 150 rows"):
        bounds.theorem_5_1_bound(path, problem["ybar"][:-1], LAM, SIGMA, DELTA)
    with pytest.raises(ValueError, match="n = 150"):
        bounds.theorem_5_3_bound(path, problem["labels"][:-1], problem["P"], LAM, DELTA)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        bounds.theorem_5_1_bound(path, 2 * y, LAM, SIGMA, DELTA)
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        bounds.theorem_5_2_bound(path, problem["ybar"], LAM, 0.2, DELTA)
    with pytest.raises(ValueError, match="lam must be > 0"):
        bounds.theorem_5_1_bound(path, problem["ybar"], 0.0, SIGMA, DELTA)
    np.save(tmp_path / "singular.npy", np.ones((4, 4)))
    with pytest.raises(ValueError, match="singular to working precision"):
        bounds.complexity(tmp_path / "singular.npy", np.array([1.0, -1.0, 1.0, -1.0]))
    with pytest.raises(FileNotFoundError, match="no file"):
        bounds.complexity(tmp_path / "missing.npy", y)
    np.savez(tmp_path / "two.npz", a=K, b=K)
    with pytest.raises(TypeError, match="npz"):
        bounds.complexity(tmp_path / "two.npz", y)
    with pytest.raises(TypeError, match="in memory, not on disk"):
        bounds.hsu_kakade_zhang_bound(np.load(path, mmap_mode="r"), SIGMA, DELTA)
    with pytest.raises(ValueError, match="block_rows"):
        OnDiskKernel(path, block_rows=0)
    with pytest.raises(ValueError, match="tol"):
        OnDiskKernel(path, tol=2.0)
    with pytest.raises(ValueError, match="V must have n = 150 rows"):
        OnDiskKernel(path).matvec(np.ones(3))
