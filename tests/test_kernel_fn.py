"""empirical_ntk_fn: a model's kernel as a function that chooses its method once per signature."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ntk_core import KernelFn, empirical_ntk, empirical_ntk_fn
from ntk_core.ntk import kernel_fn


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class _Bag(nn.Module):
    """Token ids and a mask, passed as ``model(ids, mask)``; two outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.head = nn.Embedding(12, 6), nn.Linear(6, 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask.unsqueeze(-1).to(self.head.weight.dtype)
        return self.head((self.emb(ids) * m).sum(1) / m.sum(1))


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(7, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))


def _cnn() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 1)
    ).eval()


def _bag_inputs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, 12, (n, 4), generator=_gen(seed))
    mask = torch.ones(n, 4, dtype=torch.bool)
    mask[:, -1] = torch.rand(n, generator=_gen(seed + 1)) > 0.5
    return ids, mask


CASES = {
    "mlp": (_mlp, lambda n, s: torch.randn(n, 7, generator=_gen(s))),
    "cnn": (_cnn, lambda n, s: torch.randn(n, 2, 5, 5, generator=_gen(s))),
    "bag": (lambda: _Bag(), _bag_inputs),
}


@pytest.fixture
def counted(monkeypatch):
    """The number of choices made (calls of select_method through the kernel function)."""
    calls = []
    choose = kernel_fn.select_method

    def counting(*args, **kwargs):
        calls.append(1)
        return choose(*args, **kwargs)

    monkeypatch.setattr(kernel_fn, "select_method", counting)
    return calls


@pytest.mark.parametrize("name", sorted(CASES))
def test_it_chooses_once_per_signature_and_gives_autos_kernel_bit_for_bit(name, counted, monkeypatch):
    make, inputs = CASES[name]
    model = make()
    x, x_test = inputs(6, 0), inputs(3, 5)
    named = []
    compute = kernel_fn.empirical_ntk
    monkeypatch.setattr(
        kernel_fn, "empirical_ntk", lambda *a, **kw: named.append((kw["method"], kw["tile_size"])) or compute(*a, **kw)
    )
    k = empirical_ntk_fn(model)
    for _ in range(3):
        assert torch.equal(k(x), empirical_ntk(model, x))
    assert torch.equal(k(x_test, x), empirical_ntk(model, x_test, x))
    assert len(counted) == 2 and len(k.choices) == 2  # (x) and (x_test, x): two signatures, one choice each
    chosen = [(c.method, c.tile_size) for c in k.choices.values()]
    assert named == [chosen[0]] * 3 + [chosen[1]]  # every call names the kept method and tile: no second choice


def test_a_training_step_keeps_the_choice_and_the_kernel_follows_the_parameters(counted):
    model = _mlp()
    x = torch.randn(5, 7, generator=_gen(2))
    k = empirical_ntk_fn(model, dtype=torch.float64)
    before = k(x)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=_gen(3)))
    after = k(x)
    assert len(counted) == 1
    assert not torch.allclose(before, after)
    assert torch.equal(after, empirical_ntk(model, x, dtype=torch.float64))


def test_another_size_dtype_mode_or_frozen_layer_chooses_again(counted):
    model = _mlp()
    x = torch.randn(6, 7, generator=_gen(4))
    k = empirical_ntk_fn(model)
    k(x)
    k(x[:4])  # another batch size
    k(x.double())  # another input dtype
    model.eval()  # another mode (the same function here, but the signature cannot know that)
    k(x)
    model[0].weight.requires_grad_(False)  # a frozen layer: other parameters, other costs
    frozen = k(x)
    assert len(counted) == 5 and len(k.choices) == 5
    assert torch.equal(frozen, empirical_ntk(model, x))
    k(x)
    assert len(counted) == 5
    k.clear()
    k(x)
    assert len(counted) == 6


def test_a_named_method_never_chooses_and_is_that_methods_kernel(counted):
    model = _mlp()
    x = torch.randn(4, 7, generator=_gen(6))
    for method in ("jacobian", "ntvp", "structured"):
        k = empirical_ntk_fn(model, method=method, output="full")
        assert torch.equal(k(x), empirical_ntk(model, x, method=method, output="full"))
        assert k.choice(x) is None and not k.choices
    assert not counted


def test_bad_arguments_are_refused_at_once():
    with pytest.raises(TypeError, match="torch.nn.Module"):
        empirical_ntk_fn(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method"):
        empirical_ntk_fn(_mlp(), method="exact")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="output"):
        empirical_ntk_fn(_mlp(), output="diag")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tile_size"):
        empirical_ntk_fn(_mlp(), tile_size=0)
    k = empirical_ntk_fn(_mlp())
    assert isinstance(k, KernelFn) and "0 choices kept" in repr(k)
    with pytest.raises(ValueError):  # the inputs are checked at the call, as by empirical_ntk
        k(torch.full((3, 7), float("nan")))
