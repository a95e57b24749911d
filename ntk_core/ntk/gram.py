r"""Empirical Neural Tangent Kernel engine.

The paper (Section 3.2, "Recap of NTK") defines the features
:math:`\phi(x) = \nabla_\theta f(\theta(0), x)` and the kernel
:math:`k(x, x') = \langle \phi(x), \phi(x') \rangle`. :func:`empirical_ntk`
computes the Gram matrix of that kernel for any ``torch.nn.Module`` at its
current parameters, with three exact methods (cost models after Novak,
Sohl-Dickstein & Schoenholz, "Fast Finite Width Neural Tangent Kernel",
ICML 2022):

``"jacobian"``
    Per-example Jacobians (``vmap(jacrev)``) contracted over parameters, as in
    the PyTorch ``torch.func`` NTK tutorial. Cost per pair ~ ``O P`` (trace).
``"ntvp"``
    NTK-vector products: column ``(j, o)`` of the Gram matrix is
    ``J(x1) (J(x2)^T e_{j,o})``, one VJP on ``x2_j`` then one JVP on the
    ``x1`` tile; the Jacobian of a tile is never formed.
``"structured"``
    Structured derivatives of the operations the model runs
    (:mod:`ntk_core.ntk.structured`, whatever the weight layout: ``nn.Linear``,
    ``nn.Conv2d``, raw parameters in ``x @ W.T``, ``x @ W``, ``F.linear``,
    ``F.conv1d/2d/3d``, ``einsum``; shared and partially frozen weights). For a
    use ``y_t = W u_t`` the parameter gradient of output ``o`` is
    ``sum_t δ^o_t u_t^T`` with ``δ^o_t`` the output cotangent, so the
    parameter's NTK contribution is
    ``sum_{t,s} <u_t(x), u_s(x')> <δ^o_t(x), δ^o_s(x')>``; for a dense layer
    on flat inputs this is ``(U U^T) ⊙ (Δ Δ^T)`` and never forms the
    ``d_out × d_in`` per-example gradients. Where that is dearer (large
    spatial maps, where the ``T^2`` position pairs dominate) the per-example
    gradients ``sum_t δ_t u_t^T`` are formed instead; a parameter that
    reaches an operation without a rule falls back to Jacobian contraction,
    for that parameter only. The routes are chosen per parameter by the cost
    model (see :func:`ntk_core.ntk.structured.plan_structured`).

``method="auto"`` takes the cheapest by estimated FLOPs within the memory
budget and logs its choice (INFO, logger ``ntk_core.ntk``): the estimates of
every method and, when it takes ``"structured"``, each parameter's route and
why.

Conventions
-----------
* ``output="trace"`` returns ``K[i, j] = sum_o <∇f_o(x1_i), ∇f_o(x2_j)>`` —
  **summed** over the O outputs, as the ``torch.func`` tutorial does
  (neural-tangents' ``trace_axes`` *averages*, i.e. divides by O).
  ``output="full"`` returns ``K[i, j, a, b] = <∇f_a(x1_i), ∇f_b(x2_j)>``.
  A model with one output per example (shape ``(b,)`` or ``(b, 1)``) gives
  ``(n1, n2)`` either way.
* Inputs: one tensor ``(n, *features)``, passed as ``model(x)``; a tuple (or
  list) of tensors, ``model(*x)``, e.g. ``(x, mask)``; a dict of tensors,
  ``model(**x)``. Every tensor holds the n examples along dimension 0.
  Floating tensors are cast to the compute dtype; integer and bool tensors
  (token ids, masks) are passed as they are.
* Only parameters with ``requires_grad=True`` are differentiated; the others
  (and buffers) are constants. The model is never modified (not even its
  mode). It must be one fixed function that treats examples independently: a
  model in training mode with an active Dropout (random output) or a
  BatchNorm (batch statistics couple the examples) is refused with a
  ``ValueError`` asking for ``model.eval()``; the model's mode is never
  switched silently. (Custom modules that branch on ``self.training`` cannot
  be detected: put such a model in the mode you mean.)
* The result is a CPU tensor (the Gram matrix of a whole data set may not fit
  on an accelerator) of dtype ``out_dtype`` (default: the compute dtype).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from .._checks import check_choice, check_count
from . import choices
from .cost import _estimate_jacobian, _estimate_ntvp, _jacobian_tile, CostEstimate, MethodChoice
from .engines import _Engine, _JacobianEngine, _NTVPEngine
from .problem import _forward_cost, _make_problem, _Problem, _resolve_dtype, InputsLike, METHODS, NTKMethod, Output
from .structured import _OperationEngine, _plan, StructuredPlan
from .tiles import _identity, _run_tiles, _TileStore

__all__ = ["empirical_ntk", "select_method", "structured_ntk"]


log = logging.getLogger(__name__)


def _estimates(prob: _Problem, structured: bool = True) -> tuple[dict[str, CostEstimate], StructuredPlan | None, int]:
    """Every method's estimate, the structured method's plan (routes per parameter) and the NTVP chunk.

    ``structured=True``: the plan's two taped forward passes also count the forward cost of an example (no
    separate counting pass unless the tape cannot count it). ``structured=False``: no plan (the model is not
    taped), the cost is counted by :func:`_forward_cost`, and there is no estimate for ``"structured"``.
    """
    plan = _plan(prob) if structured else None
    cost = plan._forward if plan is not None and plan._forward is not None else _forward_cost(prob)
    est = {"jacobian": _estimate_jacobian(prob, cost)}
    est["ntvp"], chunk = _estimate_ntvp(prob, cost)
    if plan is not None:
        est["structured"] = plan.estimate
    return est, plan, chunk


def _pick(estimates: dict[str, CostEstimate]) -> str:
    ok = [e for e in estimates.values() if e.feasible] or list(estimates.values())
    return min(ok, key=lambda e: (e.flops, e.memory)).method


def select_method(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None = None,
    *,
    output: Output = "trace",
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    memory_budget: int | None = None,
) -> MethodChoice:
    """The method ``empirical_ntk(..., method="auto")`` would use, with its FLOP and memory estimates.

    Each method's FLOPs follow the cost model of Novak et al. (2022):
    feature maps (forward/backward passes, per-example Jacobians) per example
    plus a per-pair contraction; memory is the working set of the tile size
    that fits ``memory_budget``. The cheapest method within the budget wins.
    ``print(select_method(...))`` shows the comparison. The choice follows the
    model's architecture and the sizes (n1, n2): a caller who computes many
    kernels of one model at one size (a kernel along training, say) can choose
    once and pass ``method=choice.method`` to :func:`empirical_ntk`, which
    returns ``method="auto"``'s kernel bit for bit, without choosing again
    (for ``"jacobian"``, without running the model under a tape at all).

    Parameters
    ----------
    model : torch.nn.Module
        The network, as for :func:`empirical_ntk`.
    x1, x2 : torch.Tensor, numpy.ndarray, tuple, list or dict, shape (n1, ...) and (n2, ...)
        The inputs, as for :func:`empirical_ntk`: one tensor (``model(x1)``), a
        tuple or list of tensors (``model(*x1)``) or a dict of tensors
        (``model(**x1)``), the examples along dimension 0 of each; integer and
        bool tensors (token ids, masks) are kept, floating ones cast to
        ``dtype`` (``x2=None``: ``x2 = x1``).
    output : {"trace", "full"}
        The kernel asked for, as for :func:`empirical_ntk`.
    dtype, device : torch.dtype, torch.device or str, optional
        Compute dtype and device (default: the model's).
    memory_budget : int, optional
        Bytes for features and per-tile workspace (default :data:`~ntk_core.ntk.problem.DEFAULT_MEMORY_BUDGET`).

    Returns
    -------
    MethodChoice
        The method, its tile size and every method's :class:`CostEstimate`.

    Examples
    --------
    >>> import torch
    >>> from ntk_core import TwoLayerNet, select_method
    >>> choice = select_method(TwoLayerNet(d=784, width=1000), torch.zeros(100, 784))
    >>> choice.method in ("jacobian", "ntvp", "structured")
    True
    >>> sorted(choice.estimates)
    ['jacobian', 'ntvp', 'structured']
    """
    prob = _make_problem(model, x1, x2, output, dtype, device, memory_budget)
    est, _, _ = _estimates(prob)
    best = _pick(est)
    return MethodChoice(best, est[best].tile_size, est)


def empirical_ntk(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None = None,
    *,
    method: NTKMethod = "auto",
    output: Output = "trace",
    tile_size: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    progress: bool = False,
    out_dtype: torch.dtype | None = None,
    memory_budget: int | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    callback: Callable[[int, int, bool], None] | None = None,
) -> Tensor:
    """Empirical NTK Gram matrix ``k(x, x') = <∇θ f(θ, x), ∇θ f(θ, x')>`` (paper, Section 3.2).

    Parameters
    ----------
    model : torch.nn.Module
        The network f at its current parameters θ. Only parameters with
        ``requires_grad=True`` are differentiated (frozen layers, as in the
        paper's Appendix D, are constants). The model is not modified, and its
        mode is used as it is: a kernel is a property of a fixed function, so a
        model in training mode with an active Dropout (p > 0) or any BatchNorm
        (or a BatchNorm without running statistics, in any mode) is refused;
        call ``model.eval()`` first. Models without such layers give the same
        kernel in either mode.
    x1, x2 : torch.Tensor, numpy.ndarray, tuple, list or dict, shape (n1, ...) and (n2, ...)
        The model's inputs, the examples along dimension 0: one tensor
        ``(n1, *features)``, passed as ``model(x1)``; a tuple or list of
        tensors, passed as positional arguments ``model(*x1)`` (e.g.
        ``(x, mask)``); or a dict of tensors, passed as keyword arguments
        ``model(**x1)``. Every tensor holds the same n1 examples. Floating
        tensors are cast to ``dtype``; integer and bool tensors (token ids for
        an ``nn.Embedding``, masks) are passed as they are. NaN and Inf are
        refused in floating tensors. ``x2`` has the structure of ``x1`` (the
        same tuple length or dict keys, and per entry the same feature shape
        and dtype, floating dtypes aside); ``x2=None`` means ``x2 = x1`` and
        only the upper triangle of tiles is computed.
    method : {"auto", "jacobian", "ntvp", "structured"}
        ``"jacobian"``, ``"ntvp"``, ``"structured"`` or ``"auto"`` (the cheapest
        by estimated FLOPs within the memory budget; see :func:`select_method`,
        and the INFO log of this module for what was picked). Choosing runs the
        model twice under a tape (2 and 3 examples): milliseconds, which only a
        kernel of milliseconds notices. ``"auto"`` keeps its choice per model
        (weakly) and signature (:mod:`ntk_core.ntk.choices`: the module tree and
        modes, which parameters are trained and their shapes, dtypes and devices,
        the inputs' structure and shapes, ``x2``, ``output``, ``dtype``,
        ``device``, ``memory_budget``), so a later kernel of the same signature —
        along training, say — names the kept method and tile without choosing
        again: the same kernel, bit for bit. A choice of ``"structured"`` is not
        kept (its plan is the computation). :func:`~ntk_core.ntk.choices.forget_choices`
        forgets them; :func:`~ntk_core.ntk.empirical_ntk_fn` keeps them in a
        function of its own, and ``method=select_method(model, x).method`` names
        one outright.
    output : {"trace", "full"}
        ``"trace"``: ``(n1, n2)``, **summed** over the O outputs (the
        ``torch.func`` tutorial's convention; neural-tangents averages).
        ``"full"``: ``(n1, n2, O, O)``. Scalar-output models give ``(n1, n2)``.
    tile_size : int, optional
        Rows/columns per tile (default: the largest that fits ``memory_budget``);
        the result does not depend on it.
    dtype, device : torch.dtype, torch.device or str, optional
        Compute dtype (float32/float64; default: the model's) and device
        (default: the model's). The model is evaluated with its parameters cast
        to ``dtype`` and moved to ``device``.
    progress : bool
        Show a tqdm progress bar over tiles.
    out_dtype : torch.dtype, optional
        dtype of the returned CPU tensor (default: ``dtype``); e.g. float32
        compute with a float64 result.
    memory_budget : int, optional
        Bytes for features and per-tile workspace (default 2 GiB), excluding the
        result. No ``(n, P)`` Jacobian of the whole data set is ever formed.
    checkpoint_dir : str or os.PathLike, optional
        If given, finished tiles are saved there (atomically, one checksummed
        file each, see :mod:`ntk_core._store`) with their identity: the model's
        class and architecture, the fingerprints of its parameters, buffers and
        of the inputs, the method, output, dtypes and tile geometry. A rerun
        after an interruption loads the tiles instead of recomputing them, after
        verifying identity and integrity: a tile of another identity is never
        used; a damaged one (truncated, altered, NaN, wrong shape or dtype) is
        named in a ``DamagedArtifactWarning``, moved aside and recomputed, so
        the result always equals an uninterrupted run's.
    callback : callable, optional
        Called as ``callback(i, j, computed)`` after tile ``(i, j)`` is placed;
        ``computed`` is False when it came from the checkpoint.

    Returns
    -------
    torch.Tensor
        On CPU, shape ``(n1, n2)`` or ``(n1, n2, O, O)``.

    Raises
    ------
    ValueError
        Bad inputs or options (entries of ``x1`` with different numbers of
        examples, ``x2`` of another structure or feature shape, NaN); a model
        that is not one fixed per-example function (Dropout or BatchNorm in
        training mode: call ``model.eval()``).
    TypeError
        Inputs that are not tensors or arrays (or a tuple, list or dict of
        them), complex inputs, ``x2`` of another kind or dtype than ``x1``.

    Examples
    --------
    The kernel of a two-layer network of Setting 1 on four inputs: a symmetric
    ``(4, 4)`` matrix, the same whichever exact method computes it.

    >>> import torch
    >>> from ntk_core import TwoLayerNet, empirical_ntk
    >>> net = TwoLayerNet(d=5, width=256, seed=0)
    >>> x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    >>> K = empirical_ntk(net, x)
    >>> K.shape, K.dtype
    (torch.Size([4, 4]), torch.float32)
    >>> torch.allclose(K, K.T)
    True
    >>> torch.allclose(K, empirical_ntk(net, x, method="jacobian"), atol=1e-5)
    True

    A test-versus-train block, computed in float64:

    >>> x_test = torch.randn(2, 5, generator=torch.Generator().manual_seed(1))
    >>> empirical_ntk(net, x_test, x, dtype=torch.float64).shape
    torch.Size([2, 4])

    Token ids and a padding mask, passed as ``model(ids, mask)``:

    >>> from torch import nn
    >>> class Bag(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.emb, self.head = nn.Embedding(10, 8), nn.Linear(8, 1)
    ...     def forward(self, ids, mask):
    ...         m = mask.unsqueeze(-1).to(self.head.weight.dtype)
    ...         return self.head((self.emb(ids) * m).sum(1) / m.sum(1))
    >>> ids = torch.tensor([[1, 2, 0], [3, 4, 5]])
    >>> mask = torch.tensor([[True, True, False], [True, True, True]])
    >>> empirical_ntk(Bag(), (ids, mask)).shape
    torch.Size([2, 2])
    """
    run = _prepare(model, x1, x2, method, output, tile_size, dtype, device, out_dtype, memory_budget)
    store = None
    if checkpoint_dir is not None:
        store = _TileStore(checkpoint_dir, _identity(run.prob, run.method, run.tile, run.out_dtype), run.meta(output))
    try:
        return _run_tiles(run.prob, run.engine(), run.tile, run.out_dtype, store, progress, callback)
    except NotImplementedError as exc:
        if run.method != "ntvp":
            raise
        raise NotImplementedError(
            f"method='ntvp' needs forward-mode derivatives (torch.func.jvp), which an operation of this model does "
            f"not have in torch ({exc}); use method='jacobian' (or 'auto', which takes the cheapest that runs)"
        ) from exc


@dataclass
class _Run:
    """One Gram matrix to compute: the problem, the method and its tile size, the result's dtype."""

    prob: _Problem
    method: str
    tile: int
    out_dtype: torch.dtype
    plan: StructuredPlan | None  # the structured method's routes (None for the other methods)
    chunk: int  # Gram columns per NTVP batch

    def engine(self) -> _Engine:
        """The chosen method's engine."""
        if self.method == "jacobian":
            return _JacobianEngine(self.prob)
        if self.method == "ntvp":
            return _NTVPEngine(self.prob, self.chunk)
        if self.plan is None:
            raise AssertionError("the structured method needs its plan")
        return _OperationEngine(self.prob, self.plan)

    def meta(self, output: str) -> dict[str, Any]:
        """What a checkpoint folder's ``meta.json`` shows (never read back)."""
        n1, n2 = self.prob.n1, self.prob.n2
        return {"method": self.method, "output": output, "tile_size": self.tile, "n1": n1, "n2": n2}


def _prepare(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None,
    method: str,
    output: str,
    tile_size: int | None,
    dtype: torch.dtype | None,
    device: torch.device | str | None,
    out_dtype: torch.dtype | None,
    memory_budget: int | None,
    announce: bool = True,
) -> _Run:
    """Check the arguments, estimate every method and choose one; ``announce``: log the choice (INFO)."""
    check_choice(method, "method", ("auto", *METHODS))
    prob = _make_problem(model, x1, x2, output, dtype, device, memory_budget)
    out_dt = _resolve_dtype(out_dtype, model, "out_dtype") if out_dtype is not None else prob.dtype
    if tile_size is not None:
        check_count(tile_size, "tile_size")
    if method == "jacobian":  # its tile needs no FLOP count: no extra forward pass, no tape
        return _Run(prob, method, tile_size or _jacobian_tile(prob)[0], out_dt, None, 0)
    if method == "auto" and (kept := choices.kept(prob)) is not None:
        log.debug("auto: %s kept for this model and signature (tile %d)", kept.method, kept.tile)
        return _Run(prob, kept.method, tile_size or kept.tile, out_dt, None, kept.chunk)
    # the model is taped for the structured rule only where that method may run
    est, plan, chunk = _estimates(prob, structured=method in ("auto", "structured"))
    chosen = _pick(est) if method == "auto" else method
    if method == "auto":
        choices.keep(prob, choices.Kept(chosen, est[chosen].tile_size, chunk))
        if announce:
            log.info("%s", MethodChoice(chosen, est[chosen].tile_size, est))
    if announce and chosen == "structured":
        log.info("%s", plan)
    return _Run(prob, chosen, tile_size or est[chosen].tile_size, out_dt, plan, chunk)


def structured_ntk(
    model: nn.Module,
    x1: InputsLike,
    x2: InputsLike | None = None,
    *,
    output: Output = "trace",
    tile_size: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    progress: bool = False,
    out_dtype: torch.dtype | None = None,
    memory_budget: int | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    callback: Callable[[int, int, bool], None] | None = None,
) -> Tensor:
    r"""``empirical_ntk(..., method="structured")``: the kernel by structured derivatives of the operations run.

    A thin alias kept for its name: the same parameters (without ``method``), result and errors as
    :func:`~ntk_core.ntk.empirical_ntk`; the method is described in :mod:`ntk_core.ntk.structured`, and
    :func:`~ntk_core.ntk.structured.plan_structured` shows the route it takes for each parameter.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from ntk_core.ntk import empirical_ntk, structured_ntk
    >>> class Raw(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         g = torch.Generator().manual_seed(0)
    ...         self.W = nn.Parameter(torch.randn(64, 5, generator=g))
    ...         self.a = nn.Parameter(torch.randn(64, generator=g))
    ...     def forward(self, x):
    ...         return torch.relu(x @ self.W.T / 5**0.5) @ self.a / 64**0.5
    >>> x = torch.randn(6, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    >>> K = structured_ntk(Raw(), x, dtype=torch.float64)
    >>> torch.allclose(K, empirical_ntk(Raw(), x, method="jacobian", dtype=torch.float64))
    True
    """
    return empirical_ntk(
        model,
        x1,
        x2,
        method="structured",
        output=output,
        tile_size=tile_size,
        dtype=dtype,
        device=device,
        progress=progress,
        out_dtype=out_dtype,
        memory_budget=memory_budget,
        checkpoint_dir=checkpoint_dir,
        callback=callback,
    )
