"""``empirical_ntk(..., method="auto")`` keeps its choice per model and signature (ntk_core.ntk.choices)."""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

from ntk_core import empirical_ntk
from ntk_core.ntk import choices, forget_choices, gram
from ntk_oracle import autograd_ntk


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class _Attention(nn.Module):
    """Token ids through an embedding and ``nn.MultiheadAttention`` (``auto`` takes ``"jacobian"``); as many
    outputs as its attribute ``outputs`` says, which its ``forward`` reads (2 of 3)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.attn, self.head = (
            nn.Embedding(12, 8),
            nn.MultiheadAttention(8, 2, batch_first=True),
            nn.Linear(8, 3),
        )
        self.outputs = 2

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        z = self.emb(ids)
        return self.head(self.attn(z, z, z, need_weights=False)[0].mean(1))[:, : self.outputs]


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 12, (n, 4), generator=_gen(seed))


@pytest.fixture
def chosen(monkeypatch):
    """The methods chosen afresh (each call of ``gram._estimates`` by ``auto``)."""
    made = []
    estimates = gram._estimates

    def counting(prob, structured=True):
        result = estimates(prob, structured)
        made.append(gram._pick(result[0]))
        return result

    monkeypatch.setattr(gram, "_estimates", counting)
    return made


def test_a_later_kernel_of_the_same_signature_names_the_kept_method_bit_for_bit(chosen):
    model, x = _Attention(), _ids(9)
    first = empirical_ntk(model, x, method="jacobian")
    forget_choices()
    K = empirical_ntk(model, x)
    assert chosen == ["jacobian"]  # attention: the tutorial's contraction
    assert torch.equal(K, first)
    with torch.no_grad():
        model.head.weight.mul_(1.5)  # a training step: new values, the same signature
    K2 = empirical_ntk(model, x)
    assert chosen == ["jacobian"], "the kept choice was not used"
    assert torch.equal(K2, empirical_ntk(model, x, method="jacobian"))
    assert not torch.equal(K2, K)


@pytest.mark.parametrize(
    "change",
    ["size", "x2", "output", "dtype", "budget", "mode", "frozen", "other model"],
)
def test_another_signature_chooses_again(chosen, change):
    model, x = _Attention(), _ids(9)
    empirical_ntk(model, x)
    kwargs: dict = {}
    args: tuple = (model, x)
    if change == "size":
        args = (model, x[:5])
    elif change == "x2":
        args = (model, x, x[:4])
    elif change == "output":
        kwargs = {"output": "full"}
    elif change == "dtype":
        kwargs = {"dtype": torch.float64}
    elif change == "budget":
        kwargs = {"memory_budget": 2**20}
    elif change == "mode":
        model.eval()
    elif change == "frozen":
        model.head.bias.requires_grad_(False)
    else:
        args = (_Attention(), x)
    empirical_ntk(*args, **kwargs)
    assert len(chosen) == 2, f"{change}: the first model's choice was used"
    empirical_ntk(*args, **kwargs)
    assert len(chosen) == 2, f"{change}: the second choice was not kept"


def test_outputs_counted_at_every_call_choose_again_and_give_the_right_kernel(chosen):
    model, x = _Attention(), _ids(6, 3)
    empirical_ntk(model, x)
    model.outputs = 3
    K = empirical_ntk(model, x)
    assert chosen == ["jacobian", "jacobian"]
    assert K.shape == (6, 6)
    torch.testing.assert_close(K.double(), autograd_ntk(model, x, x, "trace"), rtol=1e-5, atol=1e-6)


def test_structured_is_chosen_at_every_call(chosen):
    # a wide two-layer net on many examples: the structured rule wins, and its plan is the computation
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(30, 400), nn.ReLU(), nn.Linear(400, 1))
    x = torch.randn(64, 30, generator=_gen(4))
    K = empirical_ntk(model, x)
    assert chosen == ["structured"]
    assert torch.equal(empirical_ntk(model, x), K)
    assert chosen == ["structured", "structured"]
    assert not choices._KEPT.get(model)


def test_entries_go_with_their_models_and_forget_choices(chosen):
    model, x = _Attention(), _ids(9)
    empirical_ntk(model, x)
    other = _Attention()
    empirical_ntk(other, x)
    assert len(choices._KEPT) == 2
    forget_choices(other)
    assert len(choices._KEPT) == 1
    empirical_ntk(model, x)
    assert len(chosen) == 2
    forget_choices(model)
    empirical_ntk(model, x)
    assert len(chosen) == 3
    del model, other
    gc.collect()
    assert len(choices._KEPT) == 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_inputs_are_checked_finite_by_their_sum_first_and_element_wise_where_it_is_not(bad):
    model = nn.Sequential(nn.Linear(3, 2))
    x = torch.randn(4, 3, generator=_gen())
    x[2, 1] = bad
    with pytest.raises(ValueError, match=r"x1 contains NaN or infinite values"):
        empirical_ntk(model, x)
    with pytest.raises(ValueError, match=r"x2 contains NaN or infinite values"):
        empirical_ntk(model, torch.zeros(2, 3), x)
    # finite entries whose sum overflows float32: accepted (the element-wise test decides)
    from ntk_core.ntk.problem import _as_tensor

    big = torch.full((4, 3), 3e38)
    assert torch.isinf(big.sum())
    assert _as_tensor(big, "x1") is big
