"""The Gram matrix in tiles: the tile grid, the checkpoint store of finished tiles, and the loop that fills it.

Tiles of a symmetric kernel (``x2=None``) are computed on and above the diagonal and mirrored. A finished tile
can be saved under a folder named by the hash of everything that determines it (model, parameters, buffers,
inputs, method, dtypes, geometry) and is verified when loaded (:mod:`ntk_core._store`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm  # the console bar: no ipywidgets needed in notebooks

from .. import _store
from .engines import _Engine
from .problem import _map_inputs, _Problem, _rows


def _blocks(n: int, tile: int) -> list[slice]:
    return [slice(s, min(s + tile, n)) for s in range(0, n, tile)]


def _tile_pairs(n_rows: int, n_cols: int, symmetric: bool) -> Iterator[tuple[int, int]]:
    for i in range(n_rows):
        for j in range(i if symmetric else 0, n_cols):
            yield i, j


def _probe(prob: _Problem, k: int = 4) -> str:
    """Fingerprint of the function the model computes: its outputs f(θ, x) on the first ``k`` inputs and the
    gradient of Σ v·f (a fixed v), rounded to 24 significant bits so that other kernels' last bits agree.

    The class name and ``repr`` of a model do not change when its ``forward`` does (a factor, relu → tanh), nor
    do its parameters; what it computes does, in value or in gradient.
    """
    with torch.enable_grad():
        params = {n: p.detach().clone().requires_grad_(True) for n, p in prob.params.items()}
        out = prob.forward(params, _rows(prob.x1, slice(None, k)))
        v = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype, device=out.device).reshape(out.shape)
        grads = torch.autograd.grad((out * v).sum(), list(params.values()), allow_unused=True)
    parts = [out.detach()] + [g for g in grads if g is not None]
    flat = np.concatenate([t.detach().double().cpu().numpy().ravel() for t in parts])
    mantissa, exponent = np.frexp(flat)
    return _store.fingerprint(np.ldexp(np.round(mantissa * 2.0**24) / 2.0**24, exponent))


def _tensor_attributes(model: torch.nn.Module) -> dict[str, str]:
    """Fingerprints of the plain tensor attributes of the model and its submodules (``self.scale = tensor``: not a
    parameter, not a buffer, read by ``forward`` all the same)."""
    return {
        f"{prefix}.{name}" if prefix else name: _store.fingerprint(value)
        for prefix, module in model.named_modules()
        for name, value in sorted(vars(module).items())
        if isinstance(value, torch.Tensor)
    }


def _identity(prob: _Problem, method: str, tile: int, out_dtype: torch.dtype) -> dict[str, Any]:
    """Everything that determines the tiles: model (and what it computes: outputs and gradients on the first
    inputs), parameters, buffers and other constants, the plain tensor attributes of every submodule, inputs,
    method, dtypes, geometry. Not covered but through what the model computes on its first inputs: tensors the
    forward reads from outside the model (a global, a closure)."""
    return {
        "artifact": "empirical_ntk tile",
        "model": {
            "class": f"{type(prob.model).__module__}.{type(prob.model).__qualname__}",
            "architecture": _store.fingerprint(repr(prob.model)),
            "function": _probe(prob),
        },
        "params": {n: _store.fingerprint(t) for n, t in sorted(prob.params.items())},
        "consts": {n: _store.fingerprint(t) for n, t in sorted(prob.consts.items())},
        "attributes": _tensor_attributes(prob.model),
        "x1": _map_inputs(_store.fingerprint, prob.x1),  # one tensor: its fingerprint, as before multiple inputs
        "x2": "x1" if prob.symmetric else _map_inputs(_store.fingerprint, prob.x2),
        "method": method,
        "full": prob.full,
        "n_out": prob.n_out,
        "dtype": str(prob.dtype),
        "out_dtype": str(out_dtype),
        "tile_size": tile,
        "n1": prob.n1,
        "n2": prob.n2,
    }


class _TileStore:
    """The finished tiles of an empirical NTK as tensors, in a :class:`ntk_core._store.TileStore` (one verified
    file each, under a folder named by the identity's hash): a tile of another identity is recomputed (never
    mixed in); a damaged tile (truncated, altered bytes, NaN, wrong shape or dtype) is named in a
    :class:`~ntk_core._store.DamagedArtifactWarning`, moved aside and recomputed.
    """

    def __init__(self, root: str | os.PathLike[str], identity: dict[str, Any], meta: dict[str, Any]) -> None:
        self.store = _store.TileStore(root, identity, meta=meta)
        self.dir = self.store.dir

    def load(self, i: int, j: int, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor | None:
        np_dtype = torch.empty((), dtype=dtype).numpy().dtype
        found = self.store.load(i, j, expect={"tile": (shape, np_dtype)})
        return None if found is None else torch.from_numpy(found.arrays["tile"].copy())

    def save(self, i: int, j: int, tile: Tensor) -> None:
        self.store.save(i, j, {"tile": tile.cpu().numpy()})


def _place(result: Tensor, rows: slice, cols: slice, tile: Tensor, mirror: bool) -> None:
    result[rows, cols] = tile
    if mirror:
        result[cols, rows] = tile.transpose(0, 1).transpose(2, 3) if tile.ndim == 4 else tile.T


@dataclass
class _FeatureSource:
    """Features of row/column tiles, computed lazily, columns kept if the engine caches them."""

    engine: _Engine
    prob: _Problem
    rows: list[slice]
    cols: list[slice]
    _row: tuple[int, Any] | None = None
    _cols: dict[int, Any] = field(default_factory=dict)

    def row(self, i: int) -> Any:
        if self._row is None or self._row[0] != i:
            cached = self._cols.get(i) if self.prob.symmetric else None
            feats = cached if cached is not None else self.engine.features(_rows(self.prob.x1, self.rows[i]))
            self._row = (i, feats)
        return self._row[1]

    def col(self, j: int) -> Any:
        if self.prob.symmetric and self._row is not None and self._row[0] == j:
            feats = self._row[1]
        elif j in self._cols:
            return self._cols[j]
        else:
            feats = self.engine.features(_rows(self.prob.x2, self.cols[j]))
        if self.engine.cache_columns:
            self._cols[j] = feats
        return feats


def _compute_tile(source: _FeatureSource, i: int, j: int, out_dtype: torch.dtype) -> Tensor:
    """Tile ``(i, j)`` of the Gram matrix as a CPU tensor of ``out_dtype``; NaN or Inf is an error."""
    with torch.enable_grad():
        block = source.engine.kernel(source.row(i), source.col(j)).to(device="cpu", dtype=out_dtype)
    if not bool(torch.isfinite(block).all()):
        raise ValueError(
            f"tile ({i}, {j}) of the Gram matrix holds NaN or Inf: the model's output or its "
            f"gradient is not finite on these inputs (at dtype {source.prob.dtype})"
        )
    return block


def _run_tiles(
    prob: _Problem,
    engine: _Engine,
    tile: int,
    out_dtype: torch.dtype,
    store: _TileStore | None,
    progress: bool,
    callback: Callable[[int, int, bool], None] | None,
) -> Tensor:
    n1, n2 = prob.n1, prob.n2
    shape = (n1, n2, prob.n_out, prob.n_out) if prob.full else (n1, n2)
    extra = shape[2:]
    result = torch.empty(shape, dtype=out_dtype)
    rows, cols = _blocks(n1, tile), _blocks(n2, tile)
    pairs = list(_tile_pairs(len(rows), len(cols), prob.symmetric))
    source = _FeatureSource(engine, prob, rows, cols)
    bar = tqdm(pairs, desc=f"empirical_ntk[{engine.name}]", unit="tile", disable=not progress)
    with torch.no_grad():
        for i, j in bar:
            tile_shape = (rows[i].stop - rows[i].start, cols[j].stop - cols[j].start, *extra)
            block = store.load(i, j, tile_shape, out_dtype) if store is not None else None
            computed = block is None
            if block is None:
                block = _compute_tile(source, i, j, out_dtype)
                if store is not None:
                    store.save(i, j, block)
            _place(result, rows[i], cols[j], block, prob.symmetric and i != j)
            if callback is not None:
                callback(i, j, computed)
    return result
