"""The shared validation helpers of ``ntk_core._checks``: what each accepts, returns and refuses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ntk_core._checks import check_choice, check_count, check_device, check_each_in, check_interval


def test_check_choice_returns_the_value_and_refuses_others():
    assert check_choice("mse", "loss", ("mse", "ce")) == "mse"
    assert check_choice(2, "k", (1, 2)) == 2
    with pytest.raises(ValueError, match=r"loss must be one of \('mse', 'ce'\), got 'l1'"):
        check_choice("l1", "loss", ("mse", "ce"))
    with pytest.raises(ValueError, match="must be one of"):
        check_choice(True, "k", (1, 2))  # a bool is not the choice 1
    with pytest.raises(ValueError, match="must be one of"):
        check_choice(None, "loss", ("mse",))


def test_check_count():
    assert check_count(3, "width") == 3
    assert check_count(np.int64(0), "n", minimum=0) == 0 and type(check_count(np.int64(0), "n", 0)) is int
    with pytest.raises(ValueError, match="width must be an int >= 1, got 0"):
        check_count(0, "width")
    with pytest.raises(ValueError, match="depth must be an int >= 3"):
        check_count(2, "depth", minimum=3)
    for bad in (True, 2.0, "3", None):
        with pytest.raises(TypeError, match="width must be an int"):
            check_count(bad, "width")


@pytest.mark.parametrize(
    "value, low_open, high_open, ok",
    [(0.0, False, False, True), (0.0, True, False, False), (1.0, False, True, False), (0.5, True, True, True)],
)
def test_check_interval_ends(value, low_open, high_open, ok):
    if ok:
        assert check_interval(value, "x", 0.0, 1.0, low_open=low_open, high_open=high_open) == value
    else:
        with pytest.raises(ValueError, match=r"x must lie in [\[(]0.0, 1.0[\])], got"):
            check_interval(value, "x", 0.0, 1.0, low_open=low_open, high_open=high_open)


def test_check_interval_types_and_infinite_end():
    assert check_interval(np.float32(2.5), "lam", 0.0, math.inf, low_open=True, high_open=True) == 2.5
    assert isinstance(check_interval(1, "lam", 0.0, 2.0), float)
    with pytest.raises(TypeError, match="lam must be a real number"):
        check_interval("1", "lam", 0.0, 2.0)
    with pytest.raises(TypeError):
        check_interval(True, "lam", 0.0, 2.0)
    with pytest.raises(ValueError, match="finite"):
        check_interval(math.nan, "lam", 0.0, 2.0)


def test_check_each_in():
    assert check_each_in([0.1, 0], "noise level", 0.0, 0.5, high_open=True) == (0.1, 0.0)
    with pytest.raises(ValueError, match=r"every noise level must lie in \[0.0, 0.5\), got 0.5"):
        check_each_in((0.1, 0.5), "noise level", 0.0, 0.5, high_open=True)
    with pytest.raises(ValueError, match=r"every λ \(lams\) must lie in \(0.0, inf\)"):
        check_each_in((0.0,), "λ (lams)", 0.0, math.inf, low_open=True, high_open=True)
    with pytest.raises(ValueError, match="seeds must hold at least one value"):
        check_each_in((), "seeds", 0, 10)
    with pytest.raises(TypeError, match="every lr must be a real number"):
        check_each_in((0.1, True), "lr", 0.0, 1.0)
    with pytest.raises(TypeError, match="must be a sequence"):
        check_each_in(0.1, "lr", 0.0, 1.0)
    with pytest.raises(ValueError, match="every lr must lie"):
        check_each_in((math.nan,), "lr", 0.0, 1.0)


def test_check_device():
    import torch

    assert check_device("cpu") == "cpu"
    for bad in ("tpu", "cuda:", "cuda:x", "CPU"):
        with pytest.raises(ValueError, match="device must be 'cpu', 'cuda' or 'cuda:N'"):
            check_device(bad)
    with pytest.raises(TypeError, match="device must be a str"):
        check_device(0)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA GPU"):
            check_device("cuda:0")
    else:  # pragma: no cover - a GPU machine
        assert check_device("cuda") == "cuda"


def test_check_lam():
    from ntk_core._checks import check_lam

    assert check_lam(0) == 0.0 and check_lam(2.5, positive=True) == 2.5
    with pytest.raises(ValueError, match="lam must be >= 0"):
        check_lam(-1.0)
    with pytest.raises(ValueError, match="lam must be > 0"):
        check_lam(0.0, positive=True)
    with pytest.raises(ValueError, match="λ² overflows"):
        check_lam(1e200)
    with pytest.raises(TypeError, match="lam must be a real number"):
        check_lam("1")


def test_labels_and_class_labels():
    import torch

    from ntk_core._checks import as_labels, as_numpy, check_class_labels

    t = torch.tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(as_numpy(t), [1.0, 2.0])
    assert as_labels(torch.tensor([1, -1])).dtype == np.int64
    np.testing.assert_array_equal(as_labels(np.array([2.0, 0.0])), [2, 0])
    with pytest.raises(TypeError, match="y must hold integer labels"):
        as_labels([0.5], "y")
    with pytest.raises(ValueError, match="1-d"):
        as_labels(np.zeros((2, 2), dtype=int))
    np.testing.assert_array_equal(check_class_labels([0, 2], 3), [0, 2])
    with pytest.raises(ValueError, match=r"labels must lie in \{0, ..., 2\}"):
        check_class_labels([0, 3], 3)
    with pytest.raises(ValueError, match=r"found range \[-1, 0\]"):
        check_class_labels([-1, 0], 3)


def test_check_binary_labels():
    from ntk_core._checks import check_binary_labels

    check_binary_labels(np.array([1, -1, 1]))
    check_binary_labels(np.array([1.0, -1.0]))
    check_binary_labels(np.array([]))
    with pytest.raises(ValueError, match=r"y must hold binary labels in \{-1, \+1\}, found \[0, 2\]"):
        check_binary_labels(np.array([1, 0, 2, -1]))


def test_check_rows():
    from ntk_core._checks import check_rows

    assert check_rows(np.ones((3, 2), dtype=np.float32), 3, "V").dtype == np.float64
    with pytest.raises(ValueError, match=r"y must have n = 4 rows .*got shape \(3,\)"):
        check_rows(np.ones(3), 4, "y")
    with pytest.raises(ValueError, match="dimension"):
        check_rows(np.ones((4, 1)), 4, "y", ndim=1)


def test_a_float32_kernel_is_symmetric_within_float32_rounding():
    """K assembled in float32 from the blocks J_a J_bᵀ (asymmetric by ~1e-7 relative) was refused as "not
    symmetric" by every bound and solver; float64 keeps its tight tolerance, and the message says the fix."""
    import torch

    from ntk_core import theorem_5_2_bound
    from ntk_core._checks import check_kernel_matrix

    gen = torch.Generator().manual_seed(0)
    J = torch.randn(200, 5000, generator=gen)
    K = J @ J.T  # float32; each entry then rounded once more, independently of its mirror (another sum order)
    K = K * (1 + torch.randint(-1, 2, K.shape, generator=gen) * 2.0**-23)
    asym = float((K - K.T).abs().max() / K.abs().max())
    assert 0 < asym < 1e-6
    y = np.sign(np.random.default_rng(0).standard_normal(200))
    assert np.isfinite(theorem_5_2_bound(K, y, lam=1.0, p=0.1, delta=0.05).total)
    assert np.array_equal(check_kernel_matrix(K.numpy()), check_kernel_matrix(K))  # numpy and torch alike
    with pytest.raises(ValueError, match=r"pass \(K \+ K.T\) / 2"):  # cast to float64: the float64 tolerance
        check_kernel_matrix(K.double())
    with pytest.raises(ValueError, match="must be symmetric"):  # far beyond float32 rounding
        check_kernel_matrix((K + 1e-3 * K.abs().max() * torch.triu(torch.ones(200, 200), 1)).numpy())
