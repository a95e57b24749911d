"""The two generic methods of :func:`ntk_core.ntk.empirical_ntk`: per-example Jacobians, and NTK-vector products.

``"jacobian"`` forms ``J(x)`` per tile and contracts ``K = J(x1) J(x2)^T`` over the parameters; ``"ntvp"`` never
forms a tile's Jacobian: column ``(j, o)`` of the Gram matrix is ``J(x1) (J(x2_j)^T e_o)``, one VJP then one JVP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor
from torch.func import jvp, vjp, vmap

from .problem import _batch_of_one, _contract_jacobians, _per_example_jacobians, _Problem, Inputs


class _Engine(Protocol):
    name: str
    cache_columns: bool

    def features(self, x: Inputs) -> Any: ...

    def kernel(self, f1: Any, f2: Any) -> Tensor: ...


@dataclass
class _JacobianEngine:
    """Method "jacobian": per-example Jacobians of all parameters, contracted."""

    prob: _Problem
    name: str = "jacobian"
    cache_columns: bool = False

    def features(self, x: Inputs) -> dict[str, Tensor]:
        return _per_example_jacobians(self.prob, list(self.prob.params), x)

    def kernel(self, f1: dict[str, Tensor], f2: dict[str, Tensor]) -> Tensor:
        return sum(_contract_jacobians(f1[n], f2[n], self.prob.full) for n in f1)  # type: ignore[return-value]


@dataclass
class _NTVPEngine:
    """Method "ntvp": NTK-vector products, one VJP + one JVP per Gram column."""

    prob: _Problem
    chunk: int
    name: str = "ntvp"
    cache_columns: bool = False

    def features(self, x: Inputs) -> Inputs:
        return x

    def kernel(self, x1: Inputs, x2: Inputs) -> Tensor:
        prob, params = self.prob, self.prob.params

        def column(xj: Inputs, cot: Tensor) -> Tensor:
            pullback = vjp(lambda p: prob.forward(p, _batch_of_one(xj))[0], params)[1]
            (tangent,) = pullback(cot)
            return jvp(lambda p: prob.forward(p, x1), (params,), (tangent,))[1]

        basis = torch.eye(prob.n_out, dtype=prob.dtype, device=prob.device)
        cols = vmap(vmap(column, in_dims=(None, 0)), in_dims=(0, None), chunk_size=self.chunk)(x2, basis)
        k = cols.permute(2, 0, 3, 1)  # (j, b, i, a) -> (i, j, a, b)
        return k if prob.full else torch.diagonal(k, dim1=2, dim2=3).sum(-1)
