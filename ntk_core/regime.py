r"""How far a trained network is from the NTK regime that the paper's theory assumes.

The theory of Sections 3–5 holds for a network that stays close to its linearisation around the
initialisation θ(0),

.. math:: f_{\mathrm{lin}}(\theta, x) = f(\theta(0), x) + \langle \nabla_\theta f(\theta(0), x),\, \theta - \theta(0)\rangle,

whose kernel is the NTK at θ(0) and does not move. Three measures of how far a training run left that
regime, for any model and training loop:

* :func:`kernel_drift`: the relative change of the empirical NTK on a probe set,
  ‖K(θ_T) − K(θ(0))‖_F / ‖K(θ(0))‖_F (0 in the regime: the kernel is constant, Section 3.2);
* :func:`parameter_movement`: the relative distance ‖θ_T − θ(0)‖ / ‖θ(0)‖ of each trained parameter
  tensor and of all of them (Table 2 reports the absolute distance; the regime needs it small relative to
  the initial weights);
* :func:`linearised_outputs` with :func:`agreement`: the outputs of the linearised network trained on the
  same objective (gradient descent on ½‖f − ỹ‖², with RDI's λ²/2 ‖θ − θ(0)‖² when λ > 0, Theorem 4.1),
  in closed form through the NTK at θ(0) (:func:`ntk_core.krr.gd_kernel_closed_form`), and how often the
  trained network's test predictions agree with them; :func:`linearised_sgd` does the same for
  mini-batch SGD (plain, RDI or AUX) visiting the same batches as the network, and says whether that SGD
  stayed stable (:class:`LinearisedSGD`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn

from ._checks import check_count, check_kernel_matrix, check_positive, symmetry_rtol
from .krr import gd_kernel_closed_form, sgd_kernel_outputs, sgd_step_factors
from .ntk import InputsLike, NTKMethod, empirical_ntk

__all__ = [
    "DIVERGED_GROWTH",
    "LinearisedSGD",
    "agreement",
    "kernel_drift",
    "linearised_outputs",
    "linearised_sgd",
    "linearised_sgd_outputs",
    "parameter_movement",
    "with_batch_statistics",
]


def _trained(model: nn.Module) -> dict[str, Tensor]:
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def _same_parameters(model: nn.Module, initial: Mapping[str, Tensor], what: str) -> dict[str, Tensor]:
    now = _trained(model)
    if set(now) != set(initial):
        missing, extra = sorted(set(now) - set(initial)), sorted(set(initial) - set(now))
        raise ValueError(
            f"{what} must hold the same trained parameters as the model: missing {missing}, not in the model {extra}"
        )
    for name, p in now.items():
        if tuple(initial[name].shape) != tuple(p.shape):
            raise ValueError(
                f"parameter {name!r} has shape {tuple(p.shape)} in the model and {tuple(initial[name].shape)} in {what}"
            )
    return now


def kernel_drift(
    model: nn.Module,
    initial: nn.Module,
    x: InputsLike,
    *,
    method: NTKMethod = "auto",
    output: Literal["trace", "full"] = "trace",
) -> float:
    r"""Relative change of the empirical NTK on the probe inputs ``x``: ‖K(θ_T) − K(θ(0))‖_F / ‖K(θ(0))‖_F.

    Parameters
    ----------
    model : torch.nn.Module
        The trained network, at θ_T.
    initial : torch.nn.Module
        The same network at its initialisation θ(0) (e.g. a ``copy.deepcopy`` made before training), with the
        same trained parameters (names and shapes).
    x : InputsLike
        Probe inputs (any layout :func:`ntk_core.ntk.empirical_ntk` takes); a few hundred suffice.
    method, output
        As for :func:`ntk_core.ntk.empirical_ntk`; both kernels are computed in float64.

    Returns
    -------
    float
        0 when the kernel did not move (a model linear in its parameters, or the infinite-width limit).

    Raises
    ------
    ValueError
        The two networks have different trained parameters, or the initial kernel is zero.

    Examples
    --------
    A model linear in its parameters keeps its kernel however far its weights move:

    >>> import copy, torch
    >>> from torch import nn
    >>> from ntk_core import kernel_drift
    >>> net = nn.Linear(3, 1)
    >>> start = copy.deepcopy(net)
    >>> with torch.no_grad():
    ...     _ = net.weight.add_(10.0)
    >>> kernel_drift(net, start, torch.randn(5, 3))
    0.0
    """
    _same_parameters(model, _trained(initial), "initial")
    k0 = empirical_ntk(initial, x, method=method, output=output, out_dtype=torch.float64)
    kt = empirical_ntk(model, x, method=method, output=output, out_dtype=torch.float64)
    norm0 = float(torch.linalg.vector_norm(k0))
    if norm0 == 0.0:
        raise ValueError("the initial NTK is zero on the probe inputs: its relative drift is undefined")
    return float(torch.linalg.vector_norm(kt - k0)) / norm0


def parameter_movement(model: nn.Module, initial: Mapping[str, Tensor]) -> dict[str, float]:
    r"""Relative movement ‖θ_T − θ(0)‖ / ‖θ(0)‖ of each trained parameter tensor, and of all of them (``"all"``).

    Parameters
    ----------
    model : torch.nn.Module
        The trained network (only parameters with ``requires_grad`` count).
    initial : mapping of str to torch.Tensor
        θ(0) by parameter name, e.g. ``{n: p.detach().clone() for n, p in model.named_parameters()}`` taken
        before training.

    Returns
    -------
    dict of str to float
        One entry per trained parameter and ``"all"``; NaN for a tensor that started at zero (a bias, say).
    """
    now = _same_parameters(model, initial, "initial")
    out: dict[str, float] = {}
    moved_sq = start_sq = 0.0
    for name, p in now.items():
        p0 = initial[name].detach().to(p.device, torch.float64)
        d = float(torch.linalg.vector_norm(p.double() - p0))
        n0 = float(torch.linalg.vector_norm(p0))
        out[name] = d / n0 if n0 > 0 else float("nan")
        moved_sq += d * d
        start_sq += n0 * n0
    out["all"] = float(np.sqrt(moved_sq / start_sq)) if start_sq > 0 else float("nan")
    return out


def with_batch_statistics(model: nn.Module, x: Tensor, batch_size: int = 256) -> nn.Module:
    r"""A copy of ``model`` in evaluation mode whose BatchNorm layers hold the statistics of ``x`` at its weights.

    The empirical NTK needs one fixed per-example function, so a BatchNorm network is measured in evaluation
    mode, where each BatchNorm normalises with its running mean and variance. At initialisation those are the
    defaults (mean 0, variance 1), not the statistics the network normalises its training batches with, so
    :func:`kernel_drift` between a trained network and such a copy would count the change of the statistics
    as well as the movement of the weights. This copy recomputes them: each BatchNorm's running mean and
    (unbiased) variance become the average over the batches of ``x`` (``momentum=None``, a cumulative
    average) of the batch statistics it sees in training mode, at the model's current parameters. The model
    itself is not changed; layers in training mode that draw random numbers (Dropout, an augmentation) draw
    them in the copy only.

    Parameters
    ----------
    model : torch.nn.Module
        The network (any mode).
    x : torch.Tensor
        Inputs whose statistics the copy takes, e.g. the training set, on the model's device.
    batch_size : int
        Examples per forward pass (the batch statistics are averaged over the passes).

    Returns
    -------
    torch.nn.Module
        The copy, in evaluation mode; models without BatchNorm come back as an evaluation-mode copy.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from ntk_core.regime import with_batch_statistics
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    >>> x = torch.randn(64, 3) + 5.0
    >>> copy = with_batch_statistics(net, x, batch_size=64)
    >>> bool(torch.allclose(copy[1].running_mean, net[0](x).mean(0).detach()))
    True
    >>> float(net[1].running_mean.abs().max())  # the model keeps its own statistics
    0.0
    """
    import copy as _copy

    check_count(batch_size, "batch_size")
    out = _copy.deepcopy(model)
    norms = [m for m in out.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        if not m.track_running_stats:
            raise ValueError("a BatchNorm built with track_running_stats=False has no running statistics to set")
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the passes below
    if norms:
        out.train()
        with torch.no_grad():
            for start in range(0, len(x), batch_size):
                out(x[start : start + batch_size])
        for m, original in zip(norms, [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]):
            m.momentum = original.momentum
    return out.eval()


def _outputs(model: nn.Module, x: Tensor) -> np.ndarray:
    """The model's outputs as float64, shape (n,) for one output per example, else (n, K)."""
    with torch.no_grad():
        out = model(x).detach().double().cpu().numpy()
    out = out.reshape(len(out), -1)
    return out[:, 0] if out.shape[1] == 1 else out


def _initial_kernels(
    initial: nn.Module, x_train: Tensor, x_test: Tensor, method: NTKMethod
) -> tuple[np.ndarray, np.ndarray]:
    """The NTK at θ(0), float64: K(X, X) (:func:`_symmetric_ntk`) and K(x_test, X)."""
    K_test = empirical_ntk(initial, x_test, x_train, method=method, out_dtype=torch.float64).numpy()
    return _symmetric_ntk(initial, x_train, method), K_test


def _symmetric_ntk(model: nn.Module, x: Tensor, method: NTKMethod = "auto") -> np.ndarray:
    """K(X, X) of ``model`` as a float64 array, exactly symmetric: checked symmetric to the rounding of the
    model's parameters' dtype, then ``(K + Kᵀ)/2``. A product ``J Jᵀ`` computed in float32 is symmetric bit for bit
    only where the BLAS sums ``(a, b)`` and ``(b, a)`` in one order, which MKL's ``COMPATIBLE`` branch does not (off
    by 10⁻⁷ relative, over the float64 symmetry check of every consumer)."""
    dtype = next((p.dtype for p in model.parameters()), torch.float64)
    K = empirical_ntk(model, x, method=method, out_dtype=torch.float64).numpy()
    return check_kernel_matrix(K, "K(X, X)", rtol=symmetry_rtol(torch.empty(0, dtype=dtype).numpy().dtype))


def _initial_and_targets(
    initial: nn.Module, x_train: Tensor, y: np.ndarray | Tensor, x_test: Tensor
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f(θ(0), X), the targets as float64 and f(θ(0), x_test), checked: one output per example, one target each."""
    f0 = _outputs(initial, x_train)
    if f0.ndim != 1:
        raise ValueError(f"the linearised network needs one output per example, got {f0.shape[1]}")
    yy = np.asarray(y.detach().cpu() if isinstance(y, Tensor) else y, dtype=np.float64).reshape(-1)
    if yy.shape != f0.shape:
        raise ValueError(f"y must hold one target per training example ({len(f0)}), got shape {np.shape(y)}")
    return f0, yy, _outputs(initial, x_test)


def linearised_outputs(
    initial: nn.Module,
    x_train: Tensor,
    y: np.ndarray | Tensor,
    x_test: Tensor,
    *,
    eta: float,
    steps: int,
    lam: float = 0.0,
    method: NTKMethod = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    r"""Training and test outputs of the linearised network after ``steps`` of full-batch gradient descent.

    The linearisation around θ(0) trained by GD on ½‖f(X) − ỹ‖² (+ λ²/2 ‖θ − θ(0)‖², RDI, Theorem 4.1) with
    step η has, with K the empirical NTK at θ(0) and r = ỹ − f(θ(0), X) the initial residual,

    .. math:: f_{\mathrm{lin}}(t) = f(\theta(0), X) + K\,\alpha(t),

    .. math:: \alpha(t+1) = \alpha(t) - \eta\big((K + \lambda^2 I)\,\alpha(t) - r\big),

    α(0) = 0 (:func:`ntk_core.krr.gd_kernel_closed_form` gives α(t) in closed form); test outputs are
    f(θ(0), x) + k(x, X)ᵀα(t).

    Parameters
    ----------
    initial : torch.nn.Module
        The network at θ(0), one output per example (binary labels ±1 or regression targets).
    x_train, x_test : torch.Tensor
        Training and test inputs, examples along dimension 0.
    y : array, shape (n,)
        Training targets ỹ.
    eta : float
        Step size η in the convention above (one step multiplies the residual by I − ηK); a training loop on
        the *mean* squared loss ½/n ‖f − ỹ‖² with learning rate lr has η = lr / n.
    steps : int
        Number of GD steps, ≥ 0.
    lam : float
        RDI's λ (0: plain GD).
    method
        As for :func:`ntk_core.ntk.empirical_ntk`.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Training outputs (n,) and test outputs (m,) of the linearised network, float64.
    """
    eta = check_positive(eta, "eta")
    steps = check_count(steps, "steps", 0)
    f0, yy, f0_test = _initial_and_targets(initial, x_train, y, x_test)
    K, K_test = _initial_kernels(initial, x_train, x_test, method)
    residual = yy - f0
    train = f0 + gd_kernel_closed_form(K, residual, eta, steps, lam=lam)
    test = f0_test + gd_kernel_closed_form(K, residual, eta, steps, lam=lam, K_test_train=K_test)
    return train, test


#: Residual growth past which :class:`LinearisedSGD` calls a run diverged: ‖ỹ − g_T(X)‖ above this many times
#: ‖ỹ − f(θ(0), X)‖. Linearised SGD whose steps all contract (:func:`ntk_core.krr.sgd_step_factors` ≤ 2) stays
#: bounded; one that visits expanding steps may still end with a somewhat larger residual than it began with (a
#: run that fails to fit): an order of magnitude separates that from the exponential growth of a divergence.
DIVERGED_GROWTH = 10.0


@dataclass(frozen=True)
class LinearisedSGD:
    r"""The linearised network after mini-batch SGD, and whether that SGD stayed stable.

    Attributes
    ----------
    train : numpy.ndarray
        Outputs g_T on the training inputs, shape (n,), float64 (AUX: without λb).
    test : numpy.ndarray
        Outputs on the test inputs, shape (m,), float64.
    residual_growth : float
        ‖ỹ − g_T(X)‖ / ‖ỹ − f(θ(0), X)‖ (∞ when the outputs are not finite).
    largest_step : float
        The largest of :func:`ntk_core.krr.sgd_step_factors` over the batches visited: ≤ 2 guarantees a bounded
        run, above 2 some step expands.
    """

    train: np.ndarray
    test: np.ndarray
    residual_growth: float
    largest_step: float

    @property
    def diverged(self) -> bool:
        """Outputs not finite, or the training residual grown by more than :data:`DIVERGED_GROWTH`."""
        finite = bool(np.isfinite(self.train).all() and np.isfinite(self.test).all())
        return not finite or self.residual_growth > DIVERGED_GROWTH


def linearised_sgd(
    initial: nn.Module,
    x_train: Tensor,
    y: np.ndarray | Tensor,
    x_test: Tensor,
    *,
    lr: float,
    batches: Iterable[np.ndarray | Tensor],
    regularizer: Literal["none", "rdi", "aux"] = "none",
    lam: float = 0.0,
    method: NTKMethod = "auto",
) -> LinearisedSGD:
    r"""The linearised network after mini-batch SGD over ``batches``, with its stability.

    The linearisation around θ(0) is trained on the summed batch loss ½ Σ_{i∈B} (f_i − ỹ_i)² by SGD with
    learning rate ``lr`` (no momentum, no weight decay), plain or with RDI's penalty (its share |B|/n per
    batch) or AUX's variables (:func:`ntk_core.krr.sgd_kernel_outputs`, through the empirical NTK at θ(0)).
    Given the batches a training loop visited (for :func:`ntk_core.train.train`,
    :func:`ntk_core.train.batch_order`), it is the network the NTK regime predicts for that run. Its steps
    are measured too (:func:`ntk_core.krr.sgd_step_factors`): the linearisation can diverge where the network
    does not (a network's kernel may shrink early in training; the linearisation's cannot).

    Parameters
    ----------
    initial : torch.nn.Module
        The network at θ(0), one output per example.
    x_train, x_test : torch.Tensor
        Training and test inputs, examples along dimension 0.
    y : array, shape (n,)
        Training targets ỹ.
    lr : float
        The learning rate of the summed batch loss.
    batches : iterable of index arrays
        The batches in the order SGD visits them.
    regularizer : {"none", "rdi", "aux"}
        The method; ``lam`` is its λ.
    method
        As for :func:`ntk_core.ntk.empirical_ntk`.

    Returns
    -------
    LinearisedSGD
        Its outputs, residual growth and largest step factor.
    """
    f0, yy, f0_test = _initial_and_targets(initial, x_train, y, x_test)
    K, K_test = _initial_kernels(initial, x_train, x_test, method)
    batch_list = [np.asarray(b.detach().cpu() if isinstance(b, Tensor) else b) for b in batches]
    residual = yy - f0
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is reported, not warned about
        train, test = sgd_kernel_outputs(
            K, residual, batch_list, lr, lam=lam, regularizer=regularizer, K_test_train=K_test
        )
        growth = float(np.linalg.norm(residual - train) / np.linalg.norm(residual))
    steps = sgd_step_factors(K, batch_list, lr, lam=lam, regularizer=regularizer)
    return LinearisedSGD(
        train=f0 + train,
        test=f0_test + test,  # type: ignore[operator]
        residual_growth=growth if np.isfinite(growth) else math.inf,
        largest_step=float(steps.max()) if len(steps) else 0.0,
    )


def linearised_sgd_outputs(
    initial: nn.Module,
    x_train: Tensor,
    y: np.ndarray | Tensor,
    x_test: Tensor,
    *,
    lr: float,
    batches: Iterable[np.ndarray | Tensor],
    regularizer: Literal["none", "rdi", "aux"] = "none",
    lam: float = 0.0,
    method: NTKMethod = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Training and test outputs of :func:`linearised_sgd` (same parameters): the linearised network after
    mini-batch SGD over ``batches``, float64, (n,) and (m,) (AUX: without λb)."""
    run = linearised_sgd(
        initial, x_train, y, x_test, lr=lr, batches=batches, regularizer=regularizer, lam=lam, method=method
    )
    return run.train, run.test


def agreement(a: np.ndarray | Tensor, b: np.ndarray | Tensor) -> float:
    """Fraction of examples on which two sets of outputs predict the same label: the same sign for one output
    per example (binary, labels ±1), the same arg-max for several."""
    aa = np.asarray(a.detach().cpu() if isinstance(a, Tensor) else a, dtype=np.float64)
    bb = np.asarray(b.detach().cpu() if isinstance(b, Tensor) else b, dtype=np.float64)
    if aa.shape != bb.shape or aa.ndim not in (1, 2) or len(aa) == 0:
        raise ValueError(
            f"agreement needs two non-empty output arrays of one shape (n,) or (n, K), got {aa.shape}, {bb.shape}"
        )
    same = np.sign(aa) == np.sign(bb) if aa.ndim == 1 else aa.argmax(1) == bb.argmax(1)
    return float(np.mean(same))
