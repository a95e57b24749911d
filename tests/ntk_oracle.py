"""The tests' NTK oracle: the explicit float64 Jacobian of all trained parameters, contracted by einsum."""

from __future__ import annotations

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
