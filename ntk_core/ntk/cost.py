"""Cost models of the empirical NTK's methods: FLOPs and memory per tile, the tile size that fits the budget.

After Novak, Sohl-Dickstein & Schoenholz, "Fast Finite Width Neural Tangent Kernel" (ICML 2022). ``method="auto"``
takes the method with the smallest estimate (:func:`ntk_core.ntk.select_method`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


from .. import _store
from .problem import _ForwardCost, _MAX_TILE, _Problem

__all__ = ["CostEstimate", "MethodChoice"]


@dataclass(frozen=True)
class CostEstimate:
    """Estimated work of one NTK method on one problem (see :func:`select_method`).

    Attributes
    ----------
    method : str
        One of :data:`~ntk_core.ntk.problem.METHODS`.
    flops : float
        Estimated floating-point operations for the whole Gram matrix.
    memory : int
        Peak working memory in bytes at ``tile_size`` (the result excluded).
    tile_size : int
        Rows/columns per tile that fit the memory budget.
    feasible : bool
        Whether the method fits the budget at all.
    """

    method: str
    flops: float
    memory: int
    tile_size: int
    feasible: bool


@dataclass(frozen=True)
class MethodChoice:
    """What ``empirical_ntk(..., method="auto")`` picked, and the estimates it compared.

    ``print(choice)`` shows the comparison as a table.

    Attributes
    ----------
    method : str
        The method picked: the cheapest feasible one, one of :data:`~ntk_core.ntk.problem.METHODS`.
    tile_size : int
        Its tile size.
    estimates : dict[str, CostEstimate]
        The estimate of every method, by name.
    """

    method: str
    tile_size: int
    estimates: dict[str, CostEstimate]

    def __str__(self) -> str:
        rows = [
            f"  {e.method:<10} {e.flops / 1e9:12.2f} GFLOP  {e.memory / 2**20:9.1f} MiB  tile {e.tile_size}"
            + ("" if e.feasible else "  (over memory budget)")
            for e in self.estimates.values()
        ]
        return f"auto -> {self.method} (tile {self.tile_size})\n" + "\n".join(rows)


def _pairs(prob: _Problem) -> float:
    n1, n2 = prob.n1, prob.n2
    return n1 * (n1 + 1) / 2 if prob.symmetric else float(n1 * n2)


def _out_factor(prob: _Problem) -> int:
    return prob.n_out**2 if prob.full else prob.n_out


def _tile_fit(fixed: float, per_row: float, per_pair: float, budget: int, n_max: int) -> int:
    """Largest t <= n_max (and <= the NTK's largest tile) with ``fixed + 2 t per_row + t^2 per_pair <= budget``
    (at least 1): :func:`ntk_core._store.tile_side`."""
    return _store.tile_side(budget, min(n_max, _MAX_TILE), per_pair=per_pair, per_row=per_row, fixed=fixed)


def _n_rows_computed(prob: _Problem, tile: int, cached: bool) -> float:
    """Examples pushed through the feature map: columns once if cached, else once per row tile."""
    n1, n2 = prob.n1, prob.n2
    if cached:
        return n1 if prob.symmetric else n1 + n2
    row_tiles = math.ceil(n1 / tile)
    return n1 + (row_tiles * (row_tiles - 1) / 2 * tile if prob.symmetric else row_tiles * n2)


def _jacobian_tile(prob: _Problem) -> tuple[int, int]:
    """Per-example Jacobians: the tile that fits the budget and its working memory in bytes (no FLOP count)."""
    e, o, p = prob.itemsize, prob.n_out, prob.n_params
    n_max = max(prob.n1, prob.n2)
    per_row = 2.0 * o * p * e  # Jacobian plus its reverse-mode workspace
    per_pair = 2.0 * e * (prob.n_out**2 if prob.full else 1)
    tile = _tile_fit(0, per_row, per_pair, prob.budget, n_max)
    return tile, int(2 * tile * per_row + tile * tile * per_pair)


def _estimate_jacobian(prob: _Problem, cost: _ForwardCost) -> CostEstimate:
    tile, mem = _jacobian_tile(prob)
    rows = _n_rows_computed(prob, tile, cached=False)
    flops = rows * (1 + 2 * prob.n_out) * cost.flops + _pairs(prob) * 2.0 * prob.n_params * _out_factor(prob)
    return CostEstimate("jacobian", flops, mem, tile, mem <= prob.budget)


def _estimate_ntvp(prob: _Problem, cost: _ForwardCost) -> tuple[CostEstimate, int]:
    """NTVP: ``c`` Gram columns at a time, each a parameter tangent and a JVP through the x1 tile.

    Memory ``c O (2 P + 3 t A) e + t^2 e`` for tile t, chunk c, A activations per example.
    """
    e, o, p, act = prob.itemsize, prob.n_out, prob.n_params, cost.activations
    n_max = max(prob.n1, prob.n2)
    per_pair = (prob.n_out**2 if prob.full else 1) * e
    tile = _tile_fit(2.0 * o * p * e, 1.5 * o * act * e, per_pair, prob.budget, n_max)
    per_column = o * (2.0 * p + 3.0 * tile * act) * e
    chunk = int(max(1, min(tile, (prob.budget - tile * tile * per_pair) // per_column)))
    column_flops = 3.0 * o * cost.flops
    flops = _pairs(prob) * column_flops + _n_rows_computed(prob, tile, False) * column_flops
    mem = int(chunk * per_column + tile * tile * per_pair)
    return CostEstimate("ntvp", flops, mem, tile, mem <= prob.budget), chunk
