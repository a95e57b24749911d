"""Tests of ntk_core.theory on small synthetic inputs (fast: no data files)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ntk_core import bounds, krr, noise, theory
from ntk_core.nets import DifferenceTrick, TwoLayerNet
from ntk_core.ntk import empirical_ntk


def _data(n=40, d=20, seed=0):
    rng = np.random.default_rng(seed)
    x = theory.sphere_features(rng.standard_normal((n, d)))
    w = rng.standard_normal(d)
    y = np.where(x @ w >= 0, 1.0, -1.0)
    return x, y


def test_sphere_features_and_kernel():
    x, _ = _data()
    assert np.allclose(np.linalg.norm(x, axis=1), math.sqrt(x.shape[1]))
    K = theory.setting1_kernel(x)
    assert np.allclose(np.diag(K), 0.5)
    imgs = np.arange(2 * 28 * 28, dtype=np.float64).reshape(2, 28, 28) + 1
    assert theory.sphere_features(imgs, pool=2).shape == (2, 196)
    with pytest.raises(ValueError):
        theory.sphere_features(np.zeros((2, 4, 4)))
    with pytest.raises(ValueError):
        theory.sphere_features(imgs, pool=3)


def test_loglog_slope_and_sampling():
    w = np.array([10.0, 100.0, 1000.0])
    assert theory.loglog_slope(w, 3 * w**-0.5) == pytest.approx(-0.5)
    labels = np.repeat(np.arange(3), 10)
    idx = theory.sample_classes(labels, [0, 2], 4, seed=1)
    assert len(idx) == 8 and set(labels[idx]) == {0, 2}
    assert np.array_equal(idx, theory.sample_classes(labels, [0, 2], 4, seed=1))
    with pytest.raises(ValueError):
        theory.sample_classes(labels, [0], 11, seed=0)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_lemma_monte_carlo_matches_direct_krr(kind):
    x, y = _data()
    K = theory.setting1_kernel(x)
    mc = theory.lemma_monte_carlo(K, y, 0.7, 0.4, 0.1, 300, seed=3, noise=kind)
    assert mc.freq_c1 >= 0.9 and mc.freq_c2 >= 0.9 and mc.freq_hkz >= 0.9
    # redo the first draw by hand
    rng = np.random.default_rng(3)
    eps = 0.4 * (rng.standard_normal((300, len(y))) if kind == "gaussian"
                 else 2.0 * rng.integers(0, 2, size=(300, len(y))) - 1.0)
    f = krr.krr_predict(K, y + eps[0], 0.7)
    assert mc.train_dist[0] == pytest.approx(np.linalg.norm(f - y), rel=1e-8)
    assert mc.rkhs[0] == pytest.approx(bounds.krr_rkhs_norm(K, y + eps[0], 0.7), rel=1e-6)
    A = K @ np.linalg.inv(K + 0.49 * np.eye(len(y)))
    assert mc.hkz[0] == pytest.approx(np.linalg.norm(A @ eps[0]), rel=1e-8)
    with pytest.raises(ValueError):
        theory.lemma_monte_carlo(K, y, 0.7, 0.4, 0.1, 10, seed=0, noise="uniform")


def test_rademacher_monte_carlo_between_szarek_and_jensen():
    x, _ = _data()
    est, bound = theory.rademacher_monte_carlo(theory.setting1_kernel(x), 500, seed=0)
    assert bound / math.sqrt(2) <= est <= bound


def test_error_grids():
    x, y = _data(60)
    xt, yt = x[40:], y[40:]
    x, y = x[:40], y[:40]
    K, Kt = theory.setting1_kernel(x), theory.setting1_kernel(xt, x)
    lams = [0.1, 1.0]
    err, ramp = theory.binary_error_grid(K, Kt, y.astype(int), yt, [0.0, 0.3], lams, 2, seed=0)
    assert err.shape == (2, 2, 2) and np.all(ramp >= err - 1e-12)
    direct = np.mean(np.sign(krr.krr_predict(K, y, 1.0, Kt)) != yt)
    assert err[0, 1, 0] == pytest.approx(direct)   # p = 0: no flips, the plain KRR error
    labels = (y > 0).astype(int)
    e = theory.multiclass_error_grid(K, Kt, labels, (yt > 0).astype(int), [np.eye(2)], lams, 1, seed=0)
    pred = krr.krr_predict(K, np.eye(2)[labels], 1.0, Kt).argmax(axis=1)
    assert e[0, 1, 0] == pytest.approx(np.mean(pred != (yt > 0)))
    loss = theory.additive_test_loss(K, Kt, y, yt, lams, 0.1, 3, seed=0)
    assert loss.shape == (3, 2) and np.all((loss >= 0) & (loss <= 1))


def test_mean_noisy_onehot_estimates_q():
    labels = np.repeat(np.arange(3), 20)
    P = noise.symmetric_transition(3, 0.3)
    Qh = theory.mean_noisy_onehot(labels, P, 2000, seed=0)
    assert np.abs(Qh - bounds.q_matrix(P, labels)).max() < 0.06


def test_width_sweep_and_difference_tricks():
    x, _ = _data(8, 12)
    sweep = theory.ntk_width_sweep(x, [64, 4096], seeds=[0, 1])
    assert sweep.errors.shape == (2, 2) and sweep.mean[1] < sweep.mean[0]
    X = torch.as_tensor(x)
    g = TwoLayerNet(12, 32, seed=0, train_second=True).double()
    Kg = empirical_ntk(g, X, dtype=torch.float64)
    half = empirical_ntk(theory.CaptionDifference(g, 0.3), X, dtype=torch.float64)
    assert torch.allclose(half, Kg / 2)
    assert torch.allclose(empirical_ntk(DifferenceTrick(g), X, dtype=torch.float64), Kg)
    Z = theory.jacobian_features(g, x)
    assert np.allclose(Z @ Z.T, Kg.numpy())
    with pytest.raises(ValueError):
        theory.CaptionDifference(g, 1.5)


def test_train_vs_krr_small():
    x, y = _data(30, 16)
    res = theory.train_vs_krr(x[:20], y[:20], x[20:], [64, 2048], lam=1.5, steps=30, seed=0)
    assert res.dist_krr.shape == (2, 2)
    assert np.all(res.dist_krr[1] < res.dist_krr[0])
    assert np.all(res.rdi_vs_aux < 0.05)
    with pytest.raises(ValueError):
        theory.train_vs_krr(x[:20], y[:20] * 0.5, x[20:], [16], lam=1.0, steps=1)


def test_initial_output_effect():
    x, y = _data(50)
    errs, base = theory.initial_output_effect(x[:30], y[:30], x[30:], y[30:], 0.5, 20, seed=0)
    assert errs.shape == (20,) and 0 <= base <= 1 and errs.mean() >= base - 0.05


def test_available_pairs_is_the_rarest_class():
    from ntk_core import theory

    labels = np.array([5, 5, 5, 8, 8, 3])
    assert theory.available_pairs(labels, [5, 8]) == 2
    assert theory.available_pairs(labels, [5, 8, 3]) == 1
