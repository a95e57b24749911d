"""ntk_core.regularizers: RDI and AUX in a loop of one's own, checked against kernel ridge regression (closed
form) and against the paper's sum-loss objective written out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ntk_core import TwoLayerNet, krr_predict
from ntk_core import regularizers as reg
from ntk_core import train as train_module
from ntk_core.train import TrainConfig
from ntk_core.regularizers import AuxiliaryVariables, RDIPenalty, with_indices


def _linear_problem(n=12, d=30, seed=0):
    """A linear model f(θ, x) = ⟨θ, x⟩ from θ(0) = 0: exactly its own NTK regime, K = X Xᵀ."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    xt = torch.randn(5, d, generator=g, dtype=torch.float64)
    y = torch.sign(torch.randn(n, generator=g, dtype=torch.float64))
    model = nn.Linear(d, 1, bias=False).to(torch.float64)
    nn.init.zeros_(model.weight)
    return model, x, xt, y


def _krr(x, xt, y, lam):
    return krr_predict((x @ x.T).numpy(), y.numpy(), lam, (xt @ x.T).numpy())


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_rdi_in_a_gd_loop_reaches_kernel_ridge_regression_with_lambda_squared(reduction):
    """GD on the sum loss with the sum penalty, or on the mean loss with the mean penalty (λ²/(2n)) and n times
    the step: both reach the KRR predictor with ridge λ² (eq. (8)), computed here in closed form."""
    lam = 1.3
    model, x, xt, y = _linear_problem()
    n = len(x)
    rdi = RDIPenalty(model, lam=lam, n=n, reduction=reduction)
    eta = 1.0 / (torch.linalg.matrix_norm(x, 2) ** 2 + lam**2)
    lr = float(eta) * (n if reduction == "mean" else 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(3000):
        opt.zero_grad()
        r = 0.5 * ((model(x)[:, 0] - y) ** 2)
        loss = (r.sum() if reduction == "sum" else r.mean()) + rdi()
        loss.backward()
        opt.step()
    with torch.no_grad():
        got = model(xt)[:, 0].numpy()
    np.testing.assert_allclose(got, _krr(x, xt, y, lam), rtol=1e-9, atol=1e-12)


def test_the_mean_penalty_with_the_sum_coefficient_misses_kernel_ridge_regression():
    """The check above bites: λ²/2 (the sum-loss coefficient) added to a mean loss is ridge n·λ², not λ²."""
    lam = 1.3
    model, x, xt, y = _linear_problem()
    n = len(x)
    rdi = RDIPenalty(model, lam=lam, n=n, reduction="sum")  # the wrong one for a mean loss
    opt = torch.optim.SGD(model.parameters(), lr=float(n / (torch.linalg.matrix_norm(x, 2) ** 2 + n * lam**2)))
    for _ in range(3000):
        opt.zero_grad()
        (0.5 * ((model(x)[:, 0] - y) ** 2).mean() + rdi()).backward()
        opt.step()
    with torch.no_grad():
        got = model(xt)[:, 0].numpy()
    assert np.abs(got - _krr(x, xt, y, lam)).max() > 0.1
    np.testing.assert_allclose(got, _krr(x, xt, y, lam * n**0.5), rtol=1e-8, atol=1e-12)


def test_aux_in_a_gd_loop_with_a_dataloader_reaches_kernel_ridge_regression():
    """AUX (eq. (4)) by GD from b = 0 reaches the same KRR predictor with ridge λ² (Theorem 4.1): GD from zero on
    the least squares of [X, λI] ends at its minimum-norm solution. The mean loss needs no conversion of λ (only
    the step is n times larger); the example ids come from a DataLoader over with_indices, one full batch."""
    lam = 0.7
    model, x, xt, y = _linear_problem()
    n = len(x)
    aux = AuxiliaryVariables(n, outputs=1, lam=lam, dtype=torch.float64)
    lr = n / float(torch.linalg.matrix_norm(x, 2) ** 2 + lam**2)
    opt = torch.optim.SGD([*model.parameters(), *aux.parameters()], lr=lr)
    loader = DataLoader(with_indices(TensorDataset(x, y)), batch_size=n, shuffle=True)
    for _ in range(4000):
        for i, xb, yb in loader:
            opt.zero_grad()
            (0.5 * ((aux(model(xb)[:, 0], i) - yb) ** 2).mean()).backward()
            opt.step()
    with torch.no_grad():
        got = model(xt)[:, 0].numpy()
    np.testing.assert_allclose(got, _krr(x, xt, y, lam), rtol=1e-8, atol=1e-11)


def test_a_users_loop_with_adam_cosine_dataloader_and_mean_cross_entropy_gets_rdi_in_two_lines():
    """Adam, a cosine schedule, mini-batches from a DataLoader and the mean cross-entropy: with RDIPenalty the loop
    ends at a stationary point of the paper's eq. (3) (sum loss + λ²/2 ‖θ − θ(0)‖², written out by hand here),
    which the penalty with the sum coefficient does not reach."""
    g = torch.Generator().manual_seed(1)
    n, lam = 96, 2.0
    x, y = torch.randn(n, 6, generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)

    def fit(coefficient_of_sum: bool) -> float:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 3)).to(torch.float64)
        theta0 = [p.detach().clone() for p in model.parameters()]
        rdi = RDIPenalty(model, lam=lam, n=n, reduction="sum" if coefficient_of_sum else "mean")
        opt = torch.optim.Adam(model.parameters(), lr=2e-2)
        epochs = 300
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
        loader = DataLoader(
            TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0)
        )
        for _ in range(epochs):
            for xb, yb in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(xb), yb) + rdi()
                loss.backward()
                opt.step()
            sched.step()
        # eq. (3), by hand: its gradient at the end, relative to the gradient of its loss term alone
        model.zero_grad()
        eq3 = nn.functional.cross_entropy(model(x), y, reduction="sum") + 0.5 * lam**2 * sum(
            ((p - p0) ** 2).sum() for p, p0 in zip(model.parameters(), theta0)
        )
        grads = torch.autograd.grad(eq3, list(model.parameters()))
        loss_grads = torch.autograd.grad(
            nn.functional.cross_entropy(model(x), y, reduction="sum"), list(model.parameters())
        )
        return float(
            torch.cat([g.reshape(-1) for g in grads]).norm() / torch.cat([g.reshape(-1) for g in loss_grads]).norm()
        )

    right, wrong = fit(coefficient_of_sum=False), fit(coefficient_of_sum=True)
    print(f"|grad eq. (3)| / |grad of its loss|: {right:.3g} with the mean coefficient, {wrong:.3g} with the sum's")
    assert right < 0.05 and wrong > 0.5


def test_train_is_built_from_the_pieces(monkeypatch):
    """train()'s RDI is RDIPenalty's: doubling the piece's coefficient changes what train() computes."""
    x = torch.randn(16, 5, generator=torch.Generator().manual_seed(0))
    y = torch.sign(x[:, 0])
    config = TrainConfig(method="rdi", lam=1.0, epochs=5, lr=0.05)
    before = train_module.train(TwoLayerNet(d=5, width=32, seed=0), x, y, config).final["dist/all"]
    coefficient = reg.RDIPenalty.coefficient
    monkeypatch.setattr(reg.RDIPenalty, "coefficient", lambda self, b=None: 2 * coefficient(self, b))
    after = train_module.train(TwoLayerNet(d=5, width=32, seed=0), x, y, config).final["dist/all"]
    assert after < before
    aux = train_module.train(TwoLayerNet(d=5, width=32, seed=0), x, y, TrainConfig(method="aux", lam=1.0, epochs=3))
    assert aux.aux is not None and aux.aux.shape == (16, 1) and bool(aux.aux.abs().sum() > 0)


def test_bad_input_is_named():
    model = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="lam"):
        RDIPenalty(model, lam=-1.0, n=4)
    with pytest.raises(ValueError, match="reduction"):
        RDIPenalty(model, lam=1.0, n=4, reduction="avg")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="initial"):
        RDIPenalty(model, lam=1.0, n=4, initial={"weight": torch.zeros(2, 3)})
    frozen = nn.Linear(3, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable"):
        RDIPenalty(frozen, lam=1.0, n=4)
    aux = AuxiliaryVariables(4, outputs=2, lam=1.0)
    out = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="with_indices"):
        aux(out, torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="integer"):
        aux(out, torch.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="do not match"):
        aux(torch.zeros(3, 5), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="there are n = 4 auxiliary variables"):
        aux(out, torch.tensor([0, 1, 4]))  # an index beyond n: named, not torch's raw IndexError
    with pytest.raises(TypeError, match="map-style"):
        with_indices(iter([1, 2]))  # type: ignore[arg-type]
    assert with_indices(TensorDataset(torch.arange(3)))[2] == (2, torch.tensor(2))


def test_aux_indices_are_checked_with_clear_errors():
    """Indices torch would take silently are refused with the reason: a negative one (torch wraps it to b_{n−1}),
    one past the end, a bool or uint8 mask, float labels, an example twice in a batch (labels passed as indices
    repeat); the right ones pass."""
    aux = AuxiliaryVariables(8, outputs=1, lam=1.0)
    out = torch.zeros(3)
    assert aux(out, torch.tensor([0, 1, 7])).shape == (3,)
    for index, error, match in [
        (torch.tensor([0, 1, -1]), ValueError, "holds -1: example indices run from 0 to n − 1 = 7"),
        (torch.tensor([0, 1, 8]), ValueError, "holds 8: there are n = 8 auxiliary variables"),
        (torch.tensor([True, False, True]), TypeError, "not a torch.bool mask"),
        (torch.tensor([1, 0, 1], dtype=torch.uint8), TypeError, "not a torch.uint8 mask"),
        (torch.tensor([0.0, 1.0, 2.0]), TypeError, "labels passed where the indices go"),
        (torch.tensor([3, 3, 5]), ValueError, "an example twice in one batch"),
    ]:
        with pytest.raises(error, match=match):
            aux(out, index)


def test_with_indices_takes_an_iterable_dataset():
    from torch.utils.data import DataLoader, IterableDataset

    class Stream(IterableDataset):
        def __iter__(self):
            return iter([(torch.tensor([float(k)]), torch.tensor(k % 2)) for k in range(10)])

    batches = list(DataLoader(with_indices(Stream()), batch_size=4))
    assert torch.equal(torch.cat([b[0] for b in batches]), torch.arange(10))
    assert torch.equal(torch.cat([b[1] for b in batches])[:, 0], torch.arange(10, dtype=torch.float32))
    with pytest.raises(RuntimeError, match="num_workers=2"):
        list(DataLoader(with_indices(Stream()), batch_size=4, num_workers=2))


def test_rdi_is_a_module_that_keeps_theta0_and_follows_its_model():
    """RDIPenalty is an nn.Module: θ(0) in its state_dict (a run resumed from it penalises the distance to the
    first θ(0), not to the resumed weights), no parameters of its own; λ = 0 is off; a batch larger than n is
    refused; a layer replaced or added, or a parameter unfrozen after construction, is named instead of silently
    left out of the penalty."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    rdi = RDIPenalty(model, lam=2.0, n=10)
    assert isinstance(rdi, nn.Module) and list(rdi.parameters()) == []
    state = rdi.state_dict()
    assert len(state) == 4 and torch.equal(state["theta0_0"], model[0].weight.detach())
    with torch.no_grad():
        for q in model.parameters():
            q.add_(1.0)
    expected = 0.5 * 4.0 / 10 * sum(q.numel() for q in model.parameters())  # every entry moved by 1
    assert rdi().item() == pytest.approx(expected, rel=1e-6)
    # a resumed run: a new penalty made from the moved model, then θ(0) loaded from the first one's state
    resumed = RDIPenalty(model, lam=2.0, n=10)
    assert resumed().item() == 0.0
    resumed.load_state_dict(state)
    assert resumed().item() == pytest.approx(expected, rel=1e-6)
    assert RDIPenalty(model, lam=0.0, n=10)().item() == 0.0  # λ = 0: off
    with pytest.raises(ValueError, match="batch_size 11 is larger than n = 10"):
        RDIPenalty(model, lam=1.0, n=10, reduction="sum")(11)
    model[2] = nn.Linear(4, 1)  # a layer replaced after construction
    with pytest.raises(ValueError, match="replaced: 2.bias, 2.weight"):
        rdi()
    grown = nn.Sequential(nn.Linear(3, 4))
    penalty = RDIPenalty(grown, lam=1.0, n=10)
    grown.append(nn.Linear(4, 1))  # a layer added
    with pytest.raises(ValueError, match="new or unfrozen: 1.bias, 1.weight"):
        penalty()
    frozen = nn.Linear(3, 1)
    frozen.bias.requires_grad_(False)
    penalty = RDIPenalty(frozen, lam=1.0, n=10)
    frozen.bias.requires_grad_(True)
    with pytest.raises(ValueError, match="new or unfrozen: bias"):
        penalty()


@pytest.mark.parametrize("optimiser", ["adam", "adamw"])
def test_aux_variables_of_examples_out_of_the_batch_stay_put_with_sparse_adam(optimiser):
    """Under Adam (or AdamW) the variables' running averages move b_0 in steps where example 0 is not in the batch
    (the issue's 0.017 → 0.029 → 0.038); with sparse=True and SparseAdam for the variables (the model keeps its
    Adam/AdamW), b_0 does not move while its example is absent, and moves when it is present."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 3), torch.randint(0, 2, (8,))
    first, rest = torch.arange(0, 4), torch.arange(4, 8)

    def run(sparse: bool) -> list[torch.Tensor]:
        model = nn.Linear(3, 2)
        aux = AuxiliaryVariables(8, outputs=2, lam=1.0, sparse=sparse)
        make = torch.optim.Adam if optimiser == "adam" else torch.optim.AdamW
        opts = [make(model.parameters(), lr=0.05)]
        opts.append(torch.optim.SparseAdam(aux.parameters(), lr=0.05) if sparse else make(aux.parameters(), lr=0.05))
        seen = []
        for index in (first, rest, rest, rest):  # example 0 in the first batch only
            for opt in opts:
                opt.zero_grad()
            nn.functional.cross_entropy(aux(model(x[index]), index), y[index]).backward()
            for opt in opts:
                opt.step()
            seen.append(aux.b[0].detach().clone())
        return seen

    dense, sparse = run(False), run(True)
    assert not torch.equal(dense[1], dense[0]) and not torch.equal(dense[3], dense[1])  # moves while absent
    assert sparse[0].abs().sum() > 0  # it moved when its example was in the batch
    assert all(torch.equal(s, sparse[0]) for s in sparse[1:])  # and not after
    with pytest.raises(ValueError, match="take no weight_decay"):
        AuxiliaryVariables(8, outputs=2, lam=1.0, sparse=True).param_group(weight_decay=1e-3)


def test_output_sensitivity_is_the_mean_l1_norm_of_each_outputs_gradient():
    """``output_sensitivity`` (the scale AUX's λ follows under Adam) against autograd, one example and output at a
    time: mean over both of ‖∇θ f_c(θ, x_i)‖₁, the frozen parameters left out, with token ids and a mask."""
    import ntk_core as nc

    torch.manual_seed(0)

    class Tokens(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.head = torch.nn.Embedding(7, 4), torch.nn.Linear(4, 3)

        def forward(self, ids, mask):
            return self.head((self.emb(ids) * mask.unsqueeze(-1)).mean(1))

    model = Tokens()
    model.emb.weight.requires_grad_(False)  # frozen: not part of θ
    ids, mask = torch.randint(0, 7, (5, 6)), torch.rand(5, 6) > 0.3
    expected = []
    for i in range(5):
        out = model(ids[i : i + 1], mask[i : i + 1])[0]
        for c in range(3):
            grads = torch.autograd.grad(out[c], [p for p in model.parameters() if p.requires_grad], retain_graph=True)
            expected.append(sum(float(g.abs().sum()) for g in grads))
    got = nc.output_sensitivity(model, (ids, mask), chunk=2)
    assert got == pytest.approx(np.mean(expected), rel=1e-6)
    with pytest.raises(ValueError, match="chunk"):
        nc.output_sensitivity(model, (ids, mask), chunk=0)
