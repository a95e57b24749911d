r"""Wide networks against their kernel: the empirical NTK's width sweep, and trained networks against KRR.

:func:`ntk_width_sweep` (empirical against infinite-width NTK, Section 3.2), :func:`train_vs_krr` (RDI/AUX
training of a real network against kernel ridge regression, Theorem 4.1, and the linearisation error) and
:func:`initial_output_effect` (the difference trick, Lemma A.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, cast

import numpy as np
import torch
from torch import nn

from ..._checks import (
    as_float64_array,
    check_positive,
)
from ..._typing import ArrayLike
from ...infinite import relu_kernels, relu_ntk, setting1_kernel
from ...krr import KRRPath, krr_predict
from .scaling import loglog_slope
from ...ntk import empirical_ntk

__all__ = ["WidthSweep", "ntk_width_sweep", "TrainVsKRR", "train_vs_krr", "initial_output_effect"]


@dataclass(frozen=True)
class WidthSweep:
    """Relative Frobenius distance ‖K_m − K_∞‖_F / ‖K_∞‖_F of the empirical NTK at width m.

    ``errors[i, s]`` is width ``widths[i]``, seed ``s``.

    Attributes
    ----------
    widths : numpy.ndarray
        The widths m, shape ``(W,)``.
    errors : numpy.ndarray
        Relative errors, shape ``(W, S)`` (S seeds).
    """

    widths: np.ndarray
    errors: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.errors.mean(axis=1)

    @property
    def slope(self) -> float:
        """The log-log slope of the mean error against the width (the theory predicts −1/2)."""
        return loglog_slope(self.widths, self.mean)


def ntk_width_sweep(
    x: ArrayLike, widths: Sequence[int], seeds: Sequence[int], train_second: bool = False
) -> WidthSweep:
    """Empirical NTK of :class:`~ntk_core.nets.TwoLayerNet` at each width and seed against the infinite one.

    ``train_second=False`` is Setting 1 (NTK ``relu_ntk(depth=1, trained="first")``);
    ``True`` trains both layers (``trained="all"``). Computed in float64.

    Parameters
    ----------
    x : ArrayLike, shape (n, d)
        Inputs (norm √d).
    widths : sequence of int
        The widths m.
    seeds : sequence of int
        Initialisation seeds.
    train_second : bool
        Also train the second layer.

    Returns
    -------
    WidthSweep
    """
    from ...nets import TwoLayerNet

    xx = torch.as_tensor(as_float64_array(x, "x", ndim=2))
    K_inf = relu_ntk(xx.numpy(), depth=1, trained="all" if train_second else "first")
    errs = np.empty((len(widths), len(seeds)))
    for i, m in enumerate(widths):
        for j, s in enumerate(seeds):
            net = TwoLayerNet(xx.shape[1], int(m), seed=int(s), train_second=train_second).double()
            K_m = empirical_ntk(net, xx, dtype=torch.float64).numpy()
            errs[i, j] = np.linalg.norm(K_m - K_inf) / np.linalg.norm(K_inf)
    return WidthSweep(np.asarray(widths, dtype=np.int64), errs)


@dataclass(frozen=True)
class TrainVsKRR:
    """Trained wide networks against kernel ridge regression with the infinite-width NTK.

    For each width (rows) and method (``methods``): ``dist_krr[i, j]`` is the
    relative distance ‖f_net(X_test) − f_KRR(X_test)‖ / ‖f_KRR(X_test)‖ after
    training; ``dist_lin[i, j]`` the relative distance to the *linearised*
    network trained by the same GD (function-space GD with the empirical NTK of
    the initial network, :func:`ntk_core.krr.gd_rdi_kernel` /
    :func:`~ntk_core.krr.gd_aux_kernel`); ``kernel_err[i]`` the relative
    Frobenius distance of the initial empirical NTK (train block) to the
    infinite one; ``rdi_vs_aux[i]`` the relative distance between the two
    trained networks' test outputs; ``move[i, j]`` = ‖θ − θ(0)‖/‖θ(0)‖.

    Attributes
    ----------
    widths : numpy.ndarray
        The widths, shape ``(W,)``.
    methods : tuple[str, ...]
        The methods (``"rdi"``, ``"aux"``), M of them.
    dist_krr : numpy.ndarray
        Shape ``(W, M)``.
    dist_lin : numpy.ndarray
        Shape ``(W, M)``.
    kernel_err : numpy.ndarray
        Shape ``(W,)``.
    rdi_vs_aux : numpy.ndarray
        Shape ``(W,)``.
    move : numpy.ndarray
        Shape ``(W, M)``.
    krr_test : numpy.ndarray
        The KRR predictor's test outputs, shape ``(m,)``.
    """

    widths: np.ndarray
    methods: tuple[str, ...]
    dist_krr: np.ndarray
    dist_lin: np.ndarray
    kernel_err: np.ndarray
    rdi_vs_aux: np.ndarray
    move: np.ndarray
    krr_test: np.ndarray


def train_vs_krr(
    x: ArrayLike,
    y: ArrayLike,
    x_test: ArrayLike,
    widths: Sequence[int],
    lam: float,
    steps: int,
    seed: int = 0,
    methods: Sequence[str] = ("rdi", "aux"),
    lr: float | None = None,
) -> TrainVsKRR:
    """Train :class:`~ntk_core.nets.DifferenceTrick` (Setting-1 two-layer net) with RDI/AUX by full-batch GD.

    The network is f = (√2/2) g(θ₁) − (√2/2) g(θ₂), g the Setting-1
    :class:`~ntk_core.nets.TwoLayerNet` (first layer trained), so f(θ(0), ·) = 0
    and its NTK is g's (Lemma A.1): Theorem 4.1 then predicts that for large width
    the trained network computes f*(x) = k(x, X)ᵀ(K + λ²I)⁻¹ỹ. Training uses
    :func:`ntk_core.train.train` (``batch_size=None``: exactly GD on eq. (3) / (4))
    for ``steps`` epochs with learning rate ``lr`` (default: Theorem 4.1's
    largest allowed η = 1/(‖K‖ + λ²), with the infinite-width K).

    Parameters
    ----------
    x : ArrayLike, shape (n, d)
        Training inputs (norm √d).
    y : ArrayLike, shape (n,)
        Training targets.
    x_test : ArrayLike, shape (m, d)
        Test inputs.
    widths : sequence of int
        Widths of the network.
    lam : float
        λ > 0.
    steps : int
        GD steps (epochs of full-batch GD).
    seed : int
        Initialisation seed.
    methods : sequence of str
        ``"rdi"`` and/or ``"aux"``.
    lr : float, optional
        Learning rate (default 1/(‖K‖ + λ²)).

    Returns
    -------
    TrainVsKRR
    """
    from ...krr import gd_aux_kernel, gd_kernel_closed_form, gd_rdi_kernel, gd_unregularized_kernel, learning_rate_bound
    from ...nets import DifferenceTrick, TwoLayerNet
    from ...train import predict

    X = torch.as_tensor(as_float64_array(x, "x", ndim=2))
    Xt = torch.as_tensor(as_float64_array(x_test, "x_test", ndim=2))
    yy = torch.as_tensor(as_float64_array(y, "y", ndim=1))
    K_inf = setting1_kernel(X.numpy())
    Kt_inf = setting1_kernel(Xt.numpy(), X.numpy())
    krr_test = krr_predict(K_inf, yy.numpy(), lam, Kt_inf)
    eta = learning_rate_bound(K_inf, lam) if lr is None else check_positive(lr, "lr")
    methods = tuple(methods)
    shape = (len(widths), len(methods))
    dist_krr, dist_lin, move = np.empty(shape), np.empty(shape), np.empty(shape)
    kernel_err, rdi_vs_aux = np.empty(len(widths)), np.full(len(widths), np.nan)
    old_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the trainer builds its targets in the default dtype
    try:
        for i, m in enumerate(widths):
            g = TwoLayerNet(X.shape[1], int(m), seed=seed + i).double()
            base = DifferenceTrick(g)
            K0 = empirical_ntk(base, X, dtype=torch.float64).numpy()
            K0t = empirical_ntk(base, Xt, X, dtype=torch.float64).numpy()
            kernel_err[i] = np.linalg.norm(K0 - K_inf) / np.linalg.norm(K_inf)
            outs = {}
            for j, method in enumerate(methods):
                net = DifferenceTrick(g)
                theta0 = torch.cat([p.detach().reshape(-1).clone() for p in net.parameters() if p.requires_grad])
                _train_binary(net, X, yy, method, lam, eta, steps)
                out = predict(net, Xt).numpy().astype(np.float64)
                outs[method] = out
                if method == "vanilla":  # plain GD: eq. (2) stopped at step `steps`, no ridge
                    lin = _final_test(
                        gd_unregularized_kernel(K0, yy.numpy(), eta, steps, K_test_train=K0t, record_every=steps)
                    )
                    ref = gd_kernel_closed_form(K_inf, yy.numpy(), eta, steps, 0.0, K_test_train=Kt_inf)
                else:
                    gd = gd_rdi_kernel if method == "rdi" else gd_aux_kernel
                    lin = _final_test(gd(K0, yy.numpy(), lam, eta, steps, K_test_train=K0t, record_every=steps))
                    ref = krr_test
                dist_krr[i, j] = np.linalg.norm(out - ref) / np.linalg.norm(ref)
                dist_lin[i, j] = np.linalg.norm(out - lin) / np.linalg.norm(lin)
                theta = torch.cat([p.detach().reshape(-1) for p in net.parameters() if p.requires_grad])
                move[i, j] = float(torch.linalg.vector_norm(theta - theta0) / torch.linalg.vector_norm(theta0))
            if "rdi" in outs and "aux" in outs:
                rdi_vs_aux[i] = np.linalg.norm(outs["rdi"] - outs["aux"]) / np.linalg.norm(outs["rdi"])
    finally:
        torch.set_default_dtype(old_dtype)
    return TrainVsKRR(
        np.asarray(widths, dtype=np.int64), methods, dist_krr, dist_lin, kernel_err, rdi_vs_aux, move, krr_test
    )


def _train_binary(
    net: nn.Module, X: torch.Tensor, y: torch.Tensor, method: str, lam: float, eta: float, steps: int
) -> None:
    """Full-batch GD on eq. (3) (RDI) or eq. (4) (AUX) with ±1 labels, by the library trainer."""
    from ...train import TrainConfig, TrainingMethod, train

    labels = torch.where(y >= 0, 1, -1)
    if not torch.equal(labels.to(y.dtype), y):
        raise ValueError("train_vs_krr trains on binary labels in {-1, +1}")
    cfg = TrainConfig(
        method=cast(TrainingMethod, method),
        lam=None if method == "vanilla" else lam,
        loss="l2",
        epochs=steps,
        lr=eta,
        batch_size=None,
        eval_every=steps,
    )
    train(net, X, labels, cfg)


def _final_test(trajectory: Any) -> np.ndarray:
    """Test outputs at the last recorded step of a kernel-GD trajectory run with ``K_test_train``."""
    assert trajectory.test is not None, "the trajectory was run without K_test_train"
    return trajectory.test[-1]


def initial_output_effect(
    x: ArrayLike, y: ArrayLike, x_test: ArrayLike, y_test: ArrayLike, lam: float, draws: int, seed: int
) -> tuple[np.ndarray, float]:
    """What the initial output f(θ(0), ·) does to the NTK predictor (Appendix A), at infinite width.

    For the two-layer net with both layers trained, f(θ(0), ·) is a centred
    Gaussian process with covariance Σ⁽¹⁾ (the NNGP kernel) and the linearised
    network after training is f₀(x) + k(x, X)ᵀ(K + λ²I)⁻¹(ỹ − f₀(X)): kernel
    regression with correlated Gaussian noise on both the training targets and
    the test outputs. Draws f₀ jointly on train and test points ``draws`` times
    and returns the clean test errors ``(draws,)`` with f₀, and the error
    without it (the difference trick, f₀ = 0).

    Parameters
    ----------
    x : ArrayLike, shape (n, d)
        Training inputs (norm √d).
    y : ArrayLike, shape (n,)
        Training labels in {−1, +1}.
    x_test : ArrayLike, shape (m, d)
        Test inputs.
    y_test : ArrayLike, shape (m,)
        Test labels.
    lam : float
        λ > 0.
    draws : int
        Number of draws of f₀.
    seed : int
        Seed of the draws.

    Returns
    -------
    errors : numpy.ndarray, shape (draws,)
        Clean test errors with the initial output.
    error_without : float
        The error with f₀ = 0.
    """
    X = as_float64_array(x, "x", ndim=2)
    Xt = as_float64_array(x_test, "x_test", ndim=2)
    yy, yt = as_float64_array(y, "y", ndim=1), as_float64_array(y_test, "y_test", ndim=1)
    allx = np.concatenate([X, Xt])
    ntk_all, nngp_all = relu_kernels(allx, depth=1, trained="all")
    n = X.shape[0]
    K, Kt = ntk_all[:n, :n], ntk_all[n:, :n]
    path = KRRPath(K, Kt)
    clean = path.predict(yy, [lam], test=True)[0]
    base_err = float(np.mean(np.sign(clean) != yt))
    w, V = np.linalg.eigh(nngp_all)
    L = V * np.sqrt(np.clip(w, 0.0, None))
    rng = np.random.default_rng(seed)
    errs = np.empty(draws)
    for r in range(draws):
        f0 = L @ rng.standard_normal(allx.shape[0])
        pred = f0[n:] + path.predict(yy - f0[:n], [lam], test=True)[0]
        errs[r] = np.mean(np.sign(pred) != yt)
    return errs, base_err
