"""Tests for ntk_core.ntk.empirical_ntk: every method against an explicit full Jacobian."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from ntk_core.ntk import gram as ntk_gram
from ntk_core.ntk import structured
from ntk_core.nets import MLP, ConvNet, TwoLayerNet
from ntk_core.ntk import METHODS, empirical_ntk, select_method
from ntk_oracle import reference_ntk

ALL_METHODS = (*METHODS, "auto")
TOL = {torch.float64: 1e-10, torch.float32: 1e-4}


def rel_err(k: Tensor, ref: Tensor) -> float:
    return float((k.double() - ref).norm() / ref.norm())


class MixedNet(nn.Module):
    """Linear over a token axis (T > 1), a conv with bias, and a LayerNorm (fallback parameters)."""

    def __init__(self) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(11)
        self.conv = nn.Conv2d(2, 3, 3, stride=2, padding=1)
        self.tok = nn.Linear(4, 5)
        self.norm = nn.LayerNorm(5)
        self.head = nn.Linear(5 * 9, 2)
        for p in self.parameters():
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)

    def forward(self, x: Tensor) -> Tensor:
        h = torch.tanh(self.conv(x))  # (b, 3, 3, 3)
        h = h.flatten(2).transpose(1, 2)  # (b, 9, 3)
        h = torch.cat([h, h[..., :1]], dim=-1)  # (b, 9, 4)
        h = self.norm(torch.relu(self.tok(h)))  # (b, 9, 5)
        return self.head(h.flatten(1))


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "two_layer": (lambda: TwoLayerNet(7, 40, seed=1), (7,)),
    "mlp3_frozen": (lambda: MLP(6, [16, 20, 12], 3, frozen=[1, 3], seed=2), (6,)),
    "cnn": (lambda: ConvNet(2, 4, depth=3, out_dim=2, seed=3), (2, 6, 6)),
    "mixed": (MixedNet, (2, 6, 6)),
}


def _data(shape: tuple[int, ...], n: int, seed: int) -> Tensor:
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("output", ["trace", "full"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_every_method_matches_explicit_jacobian(name: str, output: str, dtype: torch.dtype) -> None:
    make, shape = MODELS[name]
    model = make()
    x1, x2 = _data(shape, 5, 0), _data(shape, 4, 1)
    ref12, ref11 = reference_ntk(model, x1, x2, output), reference_ntk(model, x1, x1, output)
    for method in ALL_METHODS:
        k12 = empirical_ntk(model, x1, x2, method=method, output=output, dtype=dtype, tile_size=3)
        k11 = empirical_ntk(model, x1, method=method, output=output, dtype=dtype, tile_size=2)
        assert k12.shape == ref12.shape and k11.shape == ref11.shape
        assert k12.dtype == dtype
        assert rel_err(k12, ref12) <= TOL[dtype], (method, rel_err(k12, ref12))
        assert rel_err(k11, ref11) <= TOL[dtype], (method, rel_err(k11, ref11))


@pytest.mark.parametrize("route", ["gram", "grad"])
@pytest.mark.parametrize("name", ["cnn", "mixed"])
def test_both_structured_routes_are_exact(monkeypatch: pytest.MonkeyPatch, route: str, name: str) -> None:
    """Every parameter with a structured rule forced onto one route: both give the oracle's kernel."""
    original = structured._plan

    def forced(prob, *args) -> structured.StructuredPlan:  # type: ignore[no-untyped-def]
        plan = original(prob, *args)
        rec, _ = structured._tape_pass(prob, structured._aranges(prob), prob.x1[:2], capture=False)
        for n, r in plan.routes.items():
            uses = [u for u in rec.uses if u.name == n]
            if r.route != "jacobian" and (route == "grad" or structured._gram_groups(uses) is not None):
                plan.routes[n] = dataclasses.replace(r, route=route)
        return plan

    monkeypatch.setattr(ntk_gram, "_plan", forced)
    make, shape = MODELS[name]
    model = make()
    x1, x2 = _data(shape, 4, 2), _data(shape, 3, 3)
    k = empirical_ntk(model, x1, x2, method="structured", dtype=torch.float64)
    assert rel_err(k, reference_ntk(model, x1, x2, "trace")) <= 1e-10


def test_tiling_invariance_and_symmetry() -> None:
    model = MLP(5, [12, 12], 2, frozen=[0], seed=5)
    x = _data((5,), 11, 4)
    for method in METHODS:
        untiled = empirical_ntk(model, x, method=method, dtype=torch.float64, tile_size=11)
        for tile in (1, 3, 4, 7):
            torch.testing.assert_close(
                empirical_ntk(model, x, method=method, dtype=torch.float64, tile_size=tile), untiled, rtol=1e-13, atol=0
            )
        full = empirical_ntk(model, x, method=method, output="full", dtype=torch.float64, tile_size=4)
        torch.testing.assert_close(full, full.permute(1, 0, 3, 2))
        torch.testing.assert_close(torch.diagonal(full, dim1=2, dim2=3).sum(-1), untiled)


def test_frozen_parameters_are_excluded() -> None:
    model = MLP(4, [10, 10], seed=6)
    x = _data((4,), 6, 5)
    k_all = empirical_ntk(model, x, dtype=torch.float64)
    model.body[0].weight.requires_grad_(False)
    k_frozen = empirical_ntk(model, x, dtype=torch.float64)
    assert rel_err(k_frozen, reference_ntk(model, x, x, "trace")) < 1e-12
    assert rel_err(k_all, k_frozen) > 0.05
    model.body[0].weight.requires_grad_(True)
    torch.testing.assert_close(empirical_ntk(model, x, dtype=torch.float64), k_all)


def test_float32_compute_float64_result_and_numpy_input() -> None:
    model = TwoLayerNet(6, 30, seed=0)
    x = _data((6,), 5, 6).numpy()
    k = empirical_ntk(model, x, dtype=torch.float32, out_dtype=torch.float64)
    assert k.dtype == torch.float64
    ref = reference_ntk(model, torch.from_numpy(x), torch.from_numpy(x), "trace")
    assert rel_err(k, ref) < 1e-5
    assert isinstance(np.asarray(k), np.ndarray)


def test_model_is_not_modified() -> None:
    model = MLP(4, [8], 2, seed=1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    empirical_ntk(model, _data((4,), 3, 0), dtype=torch.float64, method="structured")
    for n, p in model.named_parameters():
        assert p.dtype == torch.float32 and torch.equal(p, before[n])
    assert not model._forward_hooks and not model.body[0].linear._forward_hooks


def test_auto_explains_and_prefers_structured_for_wide_net() -> None:
    model = TwoLayerNet(784, 2000, seed=0)
    x = _data((784,), 64, 0)
    choice = select_method(model, x)
    assert choice.method == "structured"
    assert choice.estimates["jacobian"].flops > 10 * choice.estimates["structured"].flops
    assert "auto -> structured" in str(choice)


def test_memory_budget_bounds_tile_size() -> None:
    model = MLP(8, [64, 64], 2, seed=3)
    x = _data((8,), 40, 1)
    budget = 256 * 1024
    for method in METHODS:
        est = select_method(model, x, memory_budget=budget).estimates[method]
        assert est.feasible and est.memory <= budget
        assert est.tile_size < 40 or method == "structured"
    ref = empirical_ntk(model, x, dtype=torch.float64, tile_size=40)
    k = empirical_ntk(model, x, dtype=torch.float64, memory_budget=budget, method="jacobian")
    torch.testing.assert_close(k, ref)


def test_jacobian_method_takes_its_estimated_tile_without_counting_flops(monkeypatch: pytest.MonkeyPatch) -> None:
    """method="jacobian" needs no FLOP count (no extra forward pass) and tiles as its estimate says."""
    model = MLP(8, [64, 64], 2, seed=3)
    x = _data((8,), 40, 1)
    budget = 1024 * 1024
    tile = select_method(model, x, dtype=torch.float64, memory_budget=budget).estimates["jacobian"].tile_size
    tiles: list[tuple[int, int]] = []
    monkeypatch.setattr(ntk_gram, "_forward_cost", lambda *a: (_ for _ in ()).throw(AssertionError("counted")))
    k = empirical_ntk(
        model,
        x,
        dtype=torch.float64,
        memory_budget=budget,
        method="jacobian",
        callback=lambda i, j, c: tiles.append((i, j)),
    )
    assert 1 < tile < 40 and len(tiles) == (-(-40 // tile)) * (-(-40 // tile) + 1) // 2
    assert rel_err(k, reference_ntk(model, x, x, "trace")) <= 1e-10


def test_checkpoint_resume_recomputes_only_missing_tiles(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = MLP(5, [16], 2, seed=2)
    x = _data((5,), 10, 7)
    kwargs = dict(
        method="structured", dtype=torch.float32, out_dtype=torch.float64, tile_size=3, checkpoint_dir=tmp_path
    )
    n_tiles = 10  # 4 row blocks, upper triangle
    seen: list[tuple[int, int, bool]] = []

    def interrupt_after_4(i: int, j: int, computed: bool) -> None:
        seen.append((i, j, computed))
        if len(seen) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        empirical_ntk(model, x, callback=interrupt_after_4, **kwargs)
    assert not list(tmp_path.rglob(".*.part"))
    resumed: list[tuple[int, int, bool]] = []
    k = empirical_ntk(model, x, callback=lambda i, j, c: resumed.append((i, j, c)), progress=True, **kwargs)
    assert len(resumed) == n_tiles
    assert [c for *_, c in resumed].count(False) == 4 and [c for *_, c in resumed].count(True) == 6
    fresh = empirical_ntk(model, x, **{**kwargs, "checkpoint_dir": None})
    assert torch.equal(k, fresh)
    again: list[bool] = []
    empirical_ntk(model, x, callback=lambda i, j, c: again.append(c), **kwargs)
    assert again == [False] * n_tiles
    # a different model (or input, method, tile size) gets a different key
    other: list[bool] = []
    empirical_ntk(MLP(5, [16], 2, seed=3), x, callback=lambda i, j, c: other.append(c), **kwargs)
    assert all(other)


class _Masked(nn.Module):
    """A network reading a plain tensor attribute (not a parameter, not a buffer) that only some inputs feel."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(3, 8), nn.Linear(8, 1)
        self.mask = torch.ones(3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x * self.mask))).squeeze(-1)


def test_stored_tiles_follow_every_tensor_the_forward_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A plain tensor attribute changed where the first inputs (the identity's probe) do not feel it: the stored
    tiles are not reused, and the kernel is the new model's."""
    x = torch.randn(12, 3, generator=torch.Generator().manual_seed(0))
    x[:6, 0] = 0.0  # the probe's inputs have no first feature: a change of its mask leaves their outputs alone
    model = _Masked()
    kwargs = dict(dtype=torch.float64, tile_size=4, checkpoint_dir=tmp_path)
    empirical_ntk(model, x, **kwargs)
    model.mask = torch.tensor([5.0, 1.0, 1.0])
    computed: list[bool] = []
    k = empirical_ntk(model, x, callback=lambda i, j, c: computed.append(c), **kwargs)
    assert all(computed)
    assert rel_err(k, reference_ntk(model, x, x, "trace")) <= TOL[torch.float64]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_matches_reference(dtype: torch.dtype) -> None:
    model = ConvNet(2, 4, depth=3, out_dim=2, seed=3)
    x1, x2 = _data((2, 6, 6), 5, 0), _data((2, 6, 6), 4, 1)
    for output in ("trace", "full"):
        ref = reference_ntk(model, x1, x2, output)
        for method in ALL_METHODS:
            k = empirical_ntk(model, x1, x2, method=method, output=output, dtype=dtype, device="cuda", tile_size=3)
            assert k.device.type == "cpu" and rel_err(k, ref) <= TOL[dtype]


def test_bad_input_is_refused_with_clear_messages() -> None:
    model = TwoLayerNet(4, 8)
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match="same feature shape"):
        empirical_ntk(model, x, torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"could not be applied.*of shape \(2, 4\)"):  # integers are kept (token ids)
        empirical_ntk(nn.Linear(4, 1), torch.ones(3, 4, dtype=torch.int64))
    with pytest.raises(TypeError, match="torch.Tensor or numpy"):
        empirical_ntk(model, [[1.0, 2.0, 3.0, 4.0]])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN"):
        empirical_ntk(model, torch.full((2, 4), float("nan")))
    frozen = TwoLayerNet(4, 8)
    frozen.hidden.weight.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        empirical_ntk(frozen, x)
    with pytest.raises(ValueError, match="method must be one of"):
        empirical_ntk(model, x, method="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="output must be one of"):
        empirical_ntk(model, x, output="diag")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tile_size"):
        empirical_ntk(model, x, tile_size=0)
    with pytest.raises(ValueError, match="float32 or torch.float64"):
        empirical_ntk(model, x, dtype=torch.float16)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        empirical_ntk(lambda t: t, x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory_budget"):
        empirical_ntk(model, x, memory_budget=0)
    with pytest.raises(ValueError, match=r"shape \(b,\)"):
        empirical_ntk(_SumOverBatch(), x)


class _SumOverBatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x: Tensor) -> Tensor:
        return (x * self.w).sum()


@pytest.mark.parametrize("method", ALL_METHODS)
def test_training_mode_dropout_and_batchnorm_are_refused_eval_mode_is_exact(method: str) -> None:
    """A kernel belongs to a fixed per-example function: Dropout / BatchNorm in training mode are refused."""
    torch.manual_seed(0)
    x = _data((4,), 6, 3)
    dropout = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 1))
    batchnorm = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    for model, what in ((dropout, "Dropout"), (batchnorm, "BatchNorm")):
        assert model.training
        with pytest.raises(ValueError, match=rf"(?s){what}.*model\.eval\(\)"):
            empirical_ntk(model, x, method=method, dtype=torch.float64)
        assert model.training  # the mode is left as it was
        model.eval()
        k = empirical_ntk(model, x, method=method, dtype=torch.float64)
        torch.testing.assert_close(k, reference_ntk(model, x, x, "trace"), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(k, empirical_ntk(model, x, method=method, dtype=torch.float64))
        assert not model.training
    no_stats = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8, track_running_stats=False), nn.Linear(8, 1)).eval()
    with pytest.raises(ValueError, match="track_running_stats=False"):
        empirical_ntk(no_stats, x, method=method)
    # a model without mode-dependent layers gives the same kernel in either mode; Dropout(p=0) is the identity
    plain = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.0), nn.Tanh(), nn.Linear(8, 1))
    k_train = empirical_ntk(plain.train(), x, method=method, dtype=torch.float64)
    torch.testing.assert_close(k_train, empirical_ntk(plain.eval(), x, method=method, dtype=torch.float64))


class RawTwoLayer(nn.Module):
    """The two-layer net with raw parameters: ``x @ W.T`` or ``x @ W`` (stax layout), ``F.linear``; a shared
    weight used twice; a partially frozen weight (a frozen copy of half the rows next to a trained half)."""

    def __init__(self, layout: str, d: int = 20, m: int = 300) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(21)
        self.layout = layout
        shape = (d, m) if layout == "x@W" else (m, d)
        self.W = nn.Parameter(torch.randn(shape, generator=gen))
        self.a = nn.Parameter(torch.randn(m, generator=gen))
        if layout == "shared":
            self.S = nn.Parameter(torch.randn(m, m, generator=gen) / m**0.5)
        self.register_buffer("frozen", torch.randn(m, d, generator=gen))

    def forward(self, x: Tensor) -> Tensor:
        if self.layout == "x@W.T":
            h = x @ self.W.T
        elif self.layout == "x@W":
            h = x @ self.W
        elif self.layout == "linear":
            h = torch.nn.functional.linear(x, self.W)
        elif self.layout == "shared":
            h = torch.relu(x @ self.W.T) @ self.S.T @ self.S.T
        else:  # "frozen half": rows of the buffer (a constant) next to the trained rows
            h = torch.cat([x @ self.W[: self.W.shape[0] // 2].T, x @ self.frozen[self.W.shape[0] // 2 :].T], dim=1)
        return torch.relu(h / x.shape[1] ** 0.5) @ self.a / self.a.shape[0] ** 0.5


@pytest.mark.parametrize("layout", ["x@W.T", "x@W", "linear", "shared", "frozen half"])
def test_auto_takes_the_structured_rule_for_raw_parameters(layout: str, caplog: pytest.LogCaptureFixture) -> None:
    """Raw-parameter layouts reach the operation-level structured rule through ``method="auto"`` (issue 14):
    the choice and every parameter's route are logged, and the kernel equals the float64 oracle to 1e-10."""
    model = RawTwoLayer(layout)
    x1, x2 = _data((20,), 40, 30), _data((20,), 7, 31)
    choice = select_method(model, x1, dtype=torch.float64)
    assert choice.method == "structured", str(choice)
    with caplog.at_level(logging.INFO, logger="ntk_core.ntk"):
        k = empirical_ntk(model, x1, x2, dtype=torch.float64)
    assert "auto -> structured" in caplog.text and "W" in caplog.text and "gram" in caplog.text
    assert rel_err(k, reference_ntk(model, x1, x2, "trace")) <= 1e-10


def test_structured_ntk_is_the_structured_method() -> None:
    """One implementation: structured.structured_ntk is empirical_ntk(method="structured"), bit for bit."""
    model = ConvNet(2, 4, depth=3, out_dim=2, seed=3)
    x = _data((2, 6, 6), 5, 8)
    for output in ("trace", "full"):
        a = ntk_gram.structured_ntk(model, x, output=output, dtype=torch.float64)
        assert torch.equal(a, empirical_ntk(model, x, method="structured", output=output, dtype=torch.float64))


def test_jacobian_and_ntvp_do_not_trace_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only "auto" and "structured" plan the structured rule (trace the model's operations)."""

    def refuse(*args: object) -> None:
        raise AssertionError("traced")

    monkeypatch.setattr(ntk_gram, "_plan", refuse)
    model = MLP(4, [8], 2, seed=1)
    x = _data((4,), 3, 0)
    ref = reference_ntk(model, x, x, "trace")
    for method in ("jacobian", "ntvp"):
        assert rel_err(empirical_ntk(model, x, method=method, dtype=torch.float64), ref) <= 1e-10  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="traced"):
        empirical_ntk(model, x)


def test_an_input_without_its_batch_dimension_is_named() -> None:
    with pytest.raises(ValueError, match=r"x1\[:2\], of shape \(2,\).*examples along their first dimension"):
        empirical_ntk(nn.Linear(784, 1), torch.randn(784))


def test_ntvp_on_an_operation_without_forward_derivatives_says_which_method_to_use() -> None:
    """torch's bare NotImplementedError (here: a custom autograd.Function without jvp, as attention layers of
    some torch builds) now names the fix; jacobian and auto compute the kernel."""

    class Square(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x: Tensor) -> Tensor:  # type: ignore[override]
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def, override]
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[no-untyped-def, override]
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(5, 3), nn.Linear(3, 1)

        def forward(self, x: Tensor) -> Tensor:
            return self.b(Square.apply(self.a(x)))

    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 5)
    with pytest.raises(
        NotImplementedError, match="method='ntvp' needs forward-mode derivatives.*use method='jacobian'"
    ):
        empirical_ntk(net, x, method="ntvp")
    assert torch.allclose(empirical_ntk(net, x, method="jacobian"), empirical_ntk(net, x, method="auto"))
