"""Models that take token ids or several inputs (issue 28, item 2): every method against the autograd oracle.

Integer inputs (token ids) and bool masks are passed as they are; a tuple of inputs is passed as
``model(*x)``, a dict as ``model(**x)``; the examples lie along dimension 0 of every entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from ntk_core import _store
from ntk_core.ntk import problem as ntk_problem, tiles as ntk_tiles
from ntk_core.ntk.distributed import distributed_ntk
from ntk_core.ntk import METHODS, empirical_ntk, select_method
from ntk_oracle import autograd_ntk

VOCAB, T, D = 13, 5, 6


def _init(model: nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)


class EmbedPool(nn.Module):
    """Token ids ``(b, T)`` -> Embedding -> mean over tokens -> Linear (3 outputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.head = nn.Embedding(VOCAB, D), nn.Linear(D, 3)
        _init(self, 1)

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(torch.tanh(self.emb(ids).mean(1)))


def _masked_mean(h: Tensor, mask: Tensor) -> Tensor:
    if mask.dtype != torch.bool:
        raise TypeError(f"the mask must stay bool, got {mask.dtype}")
    m = mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1)


class MaskedMean(nn.Module):
    """``forward(x, mask)``: float tokens ``(b, T, D)`` and a bool mask ``(b, T)``, a masked mean, 2 outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.head = nn.Linear(D, 8), nn.Linear(8, 2)
        _init(self, 2)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return self.head(_masked_mean(torch.tanh(self.lin(x)), mask))


class DictNet(nn.Module):
    """Keyword-only inputs ``ids`` (token ids) and ``feats`` (floats), one output."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.lin, self.head = nn.Embedding(VOCAB, D), nn.Linear(4, D), nn.Linear(2 * D, 1)
        _init(self, 3)

    def forward(self, *, ids: Tensor, feats: Tensor) -> Tensor:
        return self.head(torch.cat([self.emb(ids).mean(1), torch.tanh(self.lin(feats))], dim=-1))


class Attention(nn.Module):
    """Embeddings, one attention head with a key-padding mask (True: a real token), masked mean, 2 outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.pos = nn.Embedding(VOCAB, D), nn.Parameter(torch.zeros(T, D))
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, 2)
        _init(self, 4)

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        h = self.emb(ids) + self.pos
        scores = self.q(h) @ self.k(h).transpose(1, 2) / D**0.5  # (b, T, T)
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        h = self.norm(h + torch.softmax(scores, dim=-1) @ self.v(h))
        return self.head(_masked_mean(h, mask))


def _ids(n: int, seed: int) -> Tensor:
    return torch.randint(0, VOCAB, (n, T), generator=torch.Generator().manual_seed(seed))


def _mask(n: int, seed: int) -> Tensor:
    mask = torch.rand(n, T, generator=torch.Generator().manual_seed(seed)) < 0.6
    mask[:, 0] = True  # every example has a token
    return mask


def _floats(n: int, shape: tuple[int, ...], seed: int) -> Tensor:
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))


INPUTS: dict[str, tuple[Callable[[], nn.Module], Callable[[int, int], Any]]] = {
    "token ids": (EmbedPool, lambda n, s: _ids(n, s)),
    "(x, mask)": (MaskedMean, lambda n, s: (_floats(n, (T, D), s), _mask(n, s + 50))),
    "dict": (DictNet, lambda n, s: {"ids": _ids(n, s), "feats": _floats(n, (4,), s + 50)}),
    "attention": (Attention, lambda n, s: [_ids(n, s), _mask(n, s + 50)]),  # a list: positional too
}


def rel_err(k: Tensor, ref: Tensor) -> float:
    return float((k.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("name", list(INPUTS))
@pytest.mark.parametrize("method", [*METHODS, "auto"])
@pytest.mark.parametrize("output", ["trace", "full"])
def test_every_method_matches_the_autograd_oracle(name: str, method: str, output: str) -> None:
    make, data = INPUTS[name]
    model = make()
    x1, x2 = data(5, 0), data(4, 1)
    oracle = {"x2": autograd_ntk(model, _tuple(x1), _tuple(x2), output)}
    oracle["x1"] = autograd_ntk(model, _tuple(x1), _tuple(x1), output)
    for which, other in (("x2", x2), ("x1", None)):
        untiled = empirical_ntk(model, x1, other, method=method, output=output, dtype=torch.float64, tile_size=5)  # type: ignore[arg-type]
        assert untiled.shape == oracle[which].shape
        assert rel_err(untiled, oracle[which]) <= 1e-10, (which, rel_err(untiled, oracle[which]))
        tiled = empirical_ntk(model, x1, other, method=method, output=output, dtype=torch.float64, tile_size=2)  # type: ignore[arg-type]
        torch.testing.assert_close(tiled, untiled, rtol=1e-13, atol=1e-15)


def _tuple(x: Any) -> Any:
    return tuple(x) if isinstance(x, list) else x


def test_auto_picks_a_method_that_runs() -> None:
    for make, data in INPUTS.values():
        choice = select_method(make(), data(6, 0))
        assert choice.method in METHODS and set(choice.estimates) == set(METHODS)


def test_choosing_once_then_naming_the_method_gives_autos_kernel_bit_for_bit() -> None:
    """What the docstrings advise for many kernels of one model at one size: ``select_method`` once, then
    ``method=choice.method`` in each call (no choosing again); the same method and tile as ``auto``."""
    picked = set()
    for make, data in INPUTS.values():
        for n in (6, 64):
            model, x = make(), data(n, 0)
            method = select_method(model, x, memory_budget=256 * 1024).method
            picked.add(method)
            auto = empirical_ntk(model, x, memory_budget=256 * 1024)
            assert torch.equal(empirical_ntk(model, x, method=method, memory_budget=256 * 1024), auto)
    assert picked >= {"jacobian", "structured"}  # both kinds of choice are checked


def test_only_floating_inputs_take_the_compute_dtype() -> None:
    """float64 floats computed in float32: cast; the bool mask and the int64 ids are kept as they are."""
    seen: list[tuple[torch.dtype, ...]] = []

    class Spy(MaskedMean):
        def forward(self, x: Tensor, mask: Tensor) -> Tensor:  # type: ignore[override]
            seen.append((x.dtype, mask.dtype))
            return super().forward(x, mask)

    x, mask = _floats(4, (T, D), 0).double(), _mask(4, 1)
    k = empirical_ntk(Spy(), (x, mask), method="jacobian", dtype=torch.float32)
    assert k.dtype == torch.float32 and set(seen) == {(torch.float32, torch.bool)}
    ref = autograd_ntk(MaskedMean(), (x, mask), (x, mask), "trace")
    assert rel_err(k, ref) <= 1e-5
    ids = _ids(4, 2).to(torch.int32)
    k32 = empirical_ntk(EmbedPool(), ids, method="ntvp", dtype=torch.float64)
    assert rel_err(k32, autograd_ntk(EmbedPool(), ids.long(), ids.long(), "trace")) <= 1e-10


@pytest.mark.parametrize(
    ("x1", "x2", "error", "match"),
    [
        ((_floats(5, (T, D), 0), _mask(4, 0)), None, ValueError, r"x1\[1\] has 4 examples.*x1\[0\] has 5"),
        ({"ids": _ids(5, 0), "feats": _floats(3, (4,), 0)}, None, ValueError, r"x1\['feats'\] has 3 examples"),
        ((), None, ValueError, "x1 is an empty tuple"),
        ({}, None, ValueError, "x1 is an empty dict"),
        ({0: _ids(5, 0)}, None, TypeError, "keys of x1 must be str"),
        ((_floats(5, (T, D), 0), [[True]]), None, TypeError, r"x1 must be a torch.Tensor or numpy.ndarray, or a"),
        ((torch.full((5, T, D), float("nan")), _mask(5, 0)), None, ValueError, r"x1\[0\] contains NaN"),
        ((_floats(5, (T, D), 0), torch.zeros(())), None, ValueError, r"x1\[1\] must have shape \(n, \*features\)"),
        (torch.zeros(5, 3, dtype=torch.complex64), None, TypeError, "real dtype.*complex64"),
        ((_floats(5, (T, D), 0), _mask(5, 0)), _floats(4, (T, D), 0), TypeError, "same structure as x1"),
        ((_floats(5, (T, D), 0), _mask(5, 0)), (_floats(4, (T, D), 0),), ValueError, "2 entries.*1"),
        ({"ids": _ids(5, 0)}, {"tokens": _ids(4, 0)}, ValueError, r"keys.*\['ids'\].*\['tokens'\]"),
        ((_floats(5, (T, D), 0), _mask(5, 0)), (_floats(4, (T, D), 0), _mask(4, 0)[:, :3]), ValueError, "x2.1."),
        ((_floats(5, (T, D), 0), _mask(5, 0)), (_floats(4, (T, D), 0), _ids(4, 0)), TypeError, "same dtype"),
    ],
)
def test_bad_inputs_are_refused_with_clear_messages(x1: Any, x2: Any, error: type[Exception], match: str) -> None:
    for call in (empirical_ntk, select_method):
        with pytest.raises(error, match=match):
            call(MaskedMean(), x1, x2)


def test_a_feature_shape_that_differs_names_the_entry() -> None:
    x = (_floats(5, (T, D), 0), _mask(5, 0))
    with pytest.raises(ValueError, match=r"x1\[1\] and x2\[1\] must have the same feature shape"):
        empirical_ntk(MaskedMean(), x, (_floats(4, (T, D), 0), _mask(4, 0)[:, :3]))


def test_checkpoint_identity_covers_every_entry(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Saved tiles are reused only for the same inputs: a changed mask or token id is another identity."""
    model, ids, mask = Attention(), _ids(6, 0), _mask(6, 1)
    kwargs: dict[str, Any] = dict(method="ntvp", dtype=torch.float64, tile_size=2, checkpoint_dir=tmp_path)
    computed: list[bool] = []
    k = empirical_ntk(model, (ids, mask), callback=lambda i, j, c: computed.append(c), **kwargs)
    assert computed == [True] * 6
    again: list[bool] = []
    assert torch.equal(empirical_ntk(model, (ids, mask), callback=lambda i, j, c: again.append(c), **kwargs), k)
    assert again == [False] * 6
    other_mask, other_ids = mask.clone(), ids.clone()
    other_mask[-1, -1] = ~other_mask[-1, -1]
    other_ids[-1, -1] = (other_ids[-1, -1] + 1) % VOCAB
    for x in ((ids, other_mask), (other_ids, mask)):
        fresh: list[bool] = []
        empirical_ntk(model, x, callback=lambda i, j, c: fresh.append(c), **kwargs)
        assert fresh == [True] * 6


def test_a_single_tensor_keeps_its_tile_identity() -> None:
    """Tiles saved before multi-input models existed stay valid: one tensor is fingerprinted as it was."""
    x = _floats(4, (3,), 0)
    prob = ntk_problem._make_problem(nn.Linear(3, 2), x, None, "trace", torch.float64, "cpu", None)
    ident = ntk_tiles._identity(prob, "jacobian", 2, torch.float64)
    assert ident["x1"] == _store.fingerprint(prob.x1) and ident["x2"] == "x1"


def test_distributed_ntk_takes_several_inputs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model, x1, x2 = DictNet(), INPUTS["dict"][1](7, 0), INPUTS["dict"][1](3, 1)
    res = distributed_ntk(model, x1, x2, checkpoint_dir=tmp_path, tile_size=3, dtype=torch.float64)
    assert res.matrix is not None
    torch.testing.assert_close(res.matrix, empirical_ntk(model, x1, x2, tile_size=3, dtype=torch.float64))
    assert rel_err(res.matrix, autograd_ntk(model, x1, x2, "trace")) <= 1e-10
