"""The tests' NTK oracles: the explicit float64 Jacobian of all trained parameters, contracted by einsum."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev


def reference_ntk(model: nn.Module, x1: Tensor, x2: Tensor, output: str) -> Tensor:
    """Explicit float64 Jacobian of all trainable parameters, flattened, then contracted."""
    params = {n: p.detach().double() for n, p in model.named_parameters() if p.requires_grad}
    consts = {n: p.detach().double() for n, p in model.named_parameters() if not p.requires_grad}
    consts.update({n: b.detach().double() for n, b in model.named_buffers()})

    def f(p: dict[str, Tensor], x: Tensor) -> Tensor:
        return functional_call(model, (p, consts), (x.double(),)).reshape(x.shape[0], -1)

    def jac(x: Tensor) -> Tensor:
        n_out = f(params, x).shape[1]
        return torch.cat([j.reshape(x.shape[0], n_out, -1) for j in jacrev(f)(params, x).values()], dim=-1)

    k = torch.einsum("iap,jbp->ijab", jac(x1), jac(x2))
    if k.shape[-1] == 1:
        return k[..., 0, 0]
    return k if output == "full" else torch.diagonal(k, dim1=2, dim2=3).sum(-1)


def _call(model: nn.Module, x: Tensor | tuple[Tensor, ...] | dict[str, Tensor]) -> Tensor:
    if isinstance(x, dict):
        return model(**x)
    return model(*x) if isinstance(x, tuple) else model(x)


def _example(x: Tensor | tuple[Tensor, ...] | dict[str, Tensor], i: int) -> Any:
    """Example ``i`` as a batch of one, floating entries in float64, the others (token ids, masks) as they are."""

    def one(t: Tensor) -> Tensor:
        return t[i : i + 1].double() if torch.is_floating_point(t) else t[i : i + 1]

    if isinstance(x, dict):
        return {k: one(t) for k, t in x.items()}
    return tuple(one(t) for t in x) if isinstance(x, tuple) else one(x)


def autograd_ntk(model: nn.Module, x1: Any, x2: Any, output: str) -> Tensor:
    """The kernel from ``torch.autograd.grad`` per example and output, on a float64 copy of the model.

    Independent of ``functional_call`` and ``torch.func``: one ordinary forward pass per example (a tuple passed
    as ``model(*x)``, a dict as ``model(**x)``), one backward pass per output.
    """
    net = copy.deepcopy(model).double()
    params = [p for p in net.parameters() if p.requires_grad]

    def jac(x: Any) -> Tensor:
        first = next(iter(x.values())) if isinstance(x, dict) else x[0] if isinstance(x, tuple) else x
        rows = []
        for i in range(first.shape[0]):
            out = _call(net, _example(x, i)).reshape(-1)
            grads = []
            for o in range(out.numel()):
                g = torch.autograd.grad(out[o], params, retain_graph=True, allow_unused=True)
                grads.append(
                    torch.cat([(torch.zeros_like(p) if d is None else d).reshape(-1) for d, p in zip(g, params)])
                )
            rows.append(torch.stack(grads))
        return torch.stack(rows)  # (n, O, P)

    k = torch.einsum("iap,jbp->ijab", jac(x1), jac(x2))
    if k.shape[-1] == 1:
        return k[..., 0, 0]
    return k if output == "full" else torch.diagonal(k, dim1=2, dim2=3).sum(-1)
