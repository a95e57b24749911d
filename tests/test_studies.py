"""Tests of the book kit's studies (ntk_core.bookkit.studies) and of the closed forms and samplers that came with them
(ntk_core.infinite, ntk_core.synthetic), on small synthetic inputs (fast: no data files)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ntk_core import bounds, data, infinite, krr, noise, ntk, synthetic
from ntk_core.nets import CaptionDifference, DifferenceTrick, TwoLayerNet
from ntk_core.ntk import empirical_ntk
from ntk_core.bookkit import studies


def _data(n=40, d=20, seed=0):
    rng = np.random.default_rng(seed)
    x = data.sphere_features(rng.standard_normal((n, d)))
    w = rng.standard_normal(d)
    y = np.where(x @ w >= 0, 1.0, -1.0)
    return x, y


def test_sphere_features_and_kernel():
    x, _ = _data()
    assert np.allclose(np.linalg.norm(x, axis=1), math.sqrt(x.shape[1]))
    K = infinite.setting1_kernel(x)
    assert np.allclose(np.diag(K), 0.5)
    imgs = np.arange(2 * 28 * 28, dtype=np.float64).reshape(2, 28, 28) + 1
    assert data.sphere_features(imgs, pool=2).shape == (2, 196)
    with pytest.raises(ValueError):
        data.sphere_features(np.zeros((2, 4, 4)))
    with pytest.raises(ValueError):
        data.sphere_features(imgs, pool=3)


def test_loglog_slope_and_sampling():
    w = np.array([10.0, 100.0, 1000.0])
    assert studies.loglog_slope(w, 3 * w**-0.5) == pytest.approx(-0.5)
    labels = np.repeat(np.arange(3), 10)
    idx = data.sample_classes(labels, [0, 2], 4, seed=1)
    assert len(idx) == 8 and set(labels[idx]) == {0, 2}
    assert np.array_equal(idx, data.sample_classes(labels, [0, 2], 4, seed=1))
    with pytest.raises(ValueError):
        data.sample_classes(labels, [0], 11, seed=0)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_lemma_monte_carlo_matches_direct_krr(kind):
    x, y = _data()
    K = infinite.setting1_kernel(x)
    mc = studies.lemma_monte_carlo(K, y, 0.7, 0.4, 0.1, 300, seed=3, noise=kind)
    assert mc.freq_c1 >= 0.9 and mc.freq_c2 >= 0.9 and mc.freq_hkz >= 0.9
    # redo the first draw by hand
    rng = np.random.default_rng(3)
    eps = 0.4 * (
        rng.standard_normal((300, len(y))) if kind == "gaussian" else 2.0 * rng.integers(0, 2, size=(300, len(y))) - 1.0
    )
    f = krr.krr_predict(K, y + eps[0], 0.7)
    assert mc.train_dist[0] == pytest.approx(np.linalg.norm(f - y), rel=1e-8)
    assert mc.rkhs[0] == pytest.approx(bounds.krr_rkhs_norm(K, y + eps[0], 0.7), rel=1e-6)
    A = K @ np.linalg.inv(K + 0.49 * np.eye(len(y)))
    assert mc.hkz[0] == pytest.approx(np.linalg.norm(A @ eps[0]), rel=1e-8)
    with pytest.raises(ValueError):
        studies.lemma_monte_carlo(K, y, 0.7, 0.4, 0.1, 10, seed=0, noise="uniform")


def test_rademacher_monte_carlo_between_szarek_and_jensen():
    x, _ = _data()
    est, bound = studies.rademacher_monte_carlo(infinite.setting1_kernel(x), 500, seed=0)
    assert bound / math.sqrt(2) <= est <= bound


def test_error_grids():
    x, y = _data(60)
    xt, yt = x[40:], y[40:]
    x, y = x[:40], y[:40]
    K, Kt = infinite.setting1_kernel(x), infinite.setting1_kernel(xt, x)
    lams = [0.1, 1.0]
    err, ramp = studies.binary_error_grid(K, Kt, y.astype(int), yt, [0.0, 0.3], lams, 2, seed=0)
    assert err.shape == (2, 2, 2) and np.all(ramp >= err - 1e-12)
    direct = np.mean(np.sign(krr.krr_predict(K, y, 1.0, Kt)) != yt)
    assert err[0, 1, 0] == pytest.approx(direct)  # p = 0: no flips, the plain KRR error
    labels = (y > 0).astype(int)
    e = studies.multiclass_error_grid(K, Kt, labels, (yt > 0).astype(int), [np.eye(2)], lams, 1, seed=0)
    pred = krr.krr_predict(K, np.eye(2)[labels], 1.0, Kt).argmax(axis=1)
    assert e[0, 1, 0] == pytest.approx(np.mean(pred != (yt > 0)))
    loss = studies.additive_test_loss(K, Kt, y, yt, lams, 0.1, 3, seed=0)
    assert loss.shape == (3, 2) and np.all((loss >= 0) & (loss <= 1))


def test_mean_noisy_onehot_estimates_q():
    labels = np.repeat(np.arange(3), 20)
    P = noise.symmetric_transition(3, 0.3)
    Qh = studies.mean_noisy_onehot(labels, P, 2000, seed=0)
    assert np.abs(Qh - bounds.q_matrix(P, labels)).max() < 0.06


def test_width_sweep_and_difference_tricks():
    x, _ = _data(8, 12)
    sweep = studies.ntk_width_sweep(x, [64, 4096], seeds=[0, 1])
    assert sweep.errors.shape == (2, 2) and sweep.mean[1] < sweep.mean[0]
    X = torch.as_tensor(x)
    g = TwoLayerNet(12, 32, seed=0, train_second=True).double()
    Kg = empirical_ntk(g, X, dtype=torch.float64)
    half = empirical_ntk(CaptionDifference(g, 0.3), X, dtype=torch.float64)
    assert torch.allclose(half, Kg / 2)
    assert torch.allclose(empirical_ntk(DifferenceTrick(g), X, dtype=torch.float64), Kg)
    Z = ntk.jacobian_features(g, x)
    assert np.allclose(Z @ Z.T, Kg.numpy())
    with pytest.raises(ValueError):
        CaptionDifference(g, 1.5)


def test_train_vs_krr_small():
    x, y = _data(30, 16)
    res = studies.train_vs_krr(x[:20], y[:20], x[20:], [64, 2048], lam=1.5, steps=30, seed=0)
    assert res.dist_krr.shape == (2, 2)
    assert np.all(res.dist_krr[1] < res.dist_krr[0])
    assert np.all(res.rdi_vs_aux < 0.05)
    with pytest.raises(ValueError):
        studies.train_vs_krr(x[:20], y[:20] * 0.5, x[20:], [16], lam=1.0, steps=1)


def test_initial_output_effect():
    x, y = _data(50)
    errs, base = studies.initial_output_effect(x[:30], y[:30], x[30:], y[30:], 0.5, 20, seed=0)
    assert errs.shape == (20,) and 0 <= base <= 1 and errs.mean() >= base - 0.05


def test_available_pairs_is_the_rarest_class():

    labels = np.array([5, 5, 5, 8, 8, 3])
    assert data.available_pairs(labels, [5, 8]) == 2
    assert data.available_pairs(labels, [5, 8, 3]) == 1


# --------------------------------------------------------------------------- Remark 5.2 and the proof steps


def test_sphere_and_cone_samples():
    x, s = synthetic.sphere_sample(200, 6, seed=0)
    assert x.shape == (200, 6) and np.allclose(np.linalg.norm(x, axis=1), math.sqrt(6))
    assert np.allclose(s, x[:, 0] / math.sqrt(6))
    x2, s2 = synthetic.sphere_sample(200, 6, seed=0)
    assert np.array_equal(x, x2)  # same seed, same sample
    xl, sl = synthetic.sphere_sample(300, 4, seed=1, levels=[-0.5, 0.25])
    assert set(np.round(sl, 12)) == {-0.5, 0.25} and np.allclose(np.linalg.norm(xl, axis=1), 2.0)
    xc, c = synthetic.cone_sample(300, 6, 3, 0.4, seed=2)
    u = xc / math.sqrt(6)
    assert np.allclose(np.linalg.norm(u, axis=1), 1.0)
    # (e_h^T u)^2 = cos^2(theta) 1[c = h]: the class indicators are quadratics on the support
    assert np.allclose(u[:, :3] ** 2, math.cos(0.4) ** 2 * np.eye(3)[c])
    assert np.bincount(c, minlength=3).min() > 70
    with pytest.raises(ValueError, match="d must be"):
        synthetic.cone_sample(10, 4, 3, 0.4, seed=0)
    with pytest.raises(ValueError, match="theta"):
        synthetic.cone_sample(10, 6, 3, 2.0, seed=0)
    with pytest.raises(ValueError, match="levels"):
        synthetic.sphere_sample(10, 4, seed=0, levels=[1.0])


def test_power_series_of_the_setting1_kernel():
    # the coefficients against a numerical Taylor expansion of t (pi - arccos t) / (2 pi)
    t = np.linspace(-0.5, 0.5, 41)
    k = t * (np.pi - np.arccos(t)) / (2 * np.pi)
    series = sum(infinite.setting1_power_coefficient(j) * t**j for j in range(0, 40))
    assert np.allclose(series, k, atol=1e-12)
    assert infinite.setting1_power_coefficient(1) == 0.25
    assert infinite.setting1_power_coefficient(2) == pytest.approx(1 / (2 * np.pi))
    assert infinite.setting1_power_coefficient(4) == pytest.approx(1 / (12 * np.pi))
    assert all(infinite.setting1_power_coefficient(j) == 0.0 for j in (0, 3, 5, 7))
    x, _ = synthetic.sphere_sample(50, 5, seed=3)
    assert np.allclose(infinite.setting1_kernel_arcsin(x), infinite.setting1_kernel(x), atol=1e-13)


def test_remark_5_2_constants_hold_and_are_nearly_attained():
    x, s = synthetic.sphere_sample(400, 4, seed=4)
    K = infinite.setting1_kernel(x)
    c1 = bounds.complexity(K, s)
    c2 = bounds.complexity(K, s**2)
    assert 3.5 < c1 <= 4.0 / 1.0 and c2 <= 2 * np.pi
    assert bounds.complexity(K, s**3) > 5 * c1  # not in the RKHS: far larger already at n = 400


def test_ridge_fit_and_fit_monte_carlo_against_a_direct_solve():
    rng = np.random.default_rng(5)
    x, s = synthetic.sphere_sample(40, 5, seed=5)
    K = infinite.setting1_kernel(x)
    lam = 1.7  # lam != lam^2
    direct = K @ np.linalg.solve(K + lam**2 * np.eye(40), s)
    assert np.allclose(studies.ridge_fit(K, s, lam), direct)
    Y = np.stack([s, -s], axis=1)
    assert np.allclose(studies.ridge_fit(K, Y, lam), np.stack([direct, -direct], axis=1))
    draws = s + 0.3 * rng.standard_normal((3000, 40))
    mc = studies.fit_monte_carlo(K, draws, lam)
    assert mc.draws == 3000 and mc.mean.shape == (40,)
    assert mc.max_z(direct) < 4.5  # the mean fit is K (K + lam^2 I)^-1 E[y~]
    assert mc.max_z(K @ np.linalg.solve(K + lam * np.eye(40), s)) > 10  # and not the lam fit
    # the standard error is that of the fits: sd of (K (K + lam^2 I)^-1 eps)_i / sqrt(R)
    A = K @ np.linalg.inv(K + lam**2 * np.eye(40))
    assert np.allclose(mc.stderr, 0.3 * np.linalg.norm(A, axis=1) / np.sqrt(3000), rtol=0.1)
    multi = studies.fit_monte_carlo(K, np.stack([draws, -draws], axis=2), lam)
    assert multi.mean.shape == (40, 2) and np.allclose(multi.mean[:, 1], -mc.mean)
    with pytest.raises(ValueError, match="at least 2"):
        studies.fit_monte_carlo(K, draws[:1], lam)


def test_lemma_c1_pieces_by_value():
    rng = np.random.default_rng(6)
    Z = rng.standard_normal((6, 9))
    K = Z @ Z.T / 9
    y = rng.standard_normal(6)
    lam, sigma = 0.6, 0.4
    M = np.linalg.inv(K + lam**2 * np.eye(6))
    A = K @ M
    piece = studies.lemma_c1_pieces(K, y, lam, sigma)
    assert piece["bias"] == pytest.approx(lam**2 * np.linalg.norm(M @ y))
    assert piece["bias_bound"] == pytest.approx(lam / 2 * np.sqrt(y @ np.linalg.solve(K, y)))
    assert piece["noise_ms"] == pytest.approx(sigma**2 * np.trace(A @ A))
    assert piece["noise_ms_bound"] == pytest.approx(sigma**2 * np.trace(K) / (4 * lam**2))
    assert piece["trA4"] == pytest.approx(np.trace(A @ A @ A @ A))
    assert piece["trA4_bound"] == pytest.approx(np.trace(K) / (9 * lam**2))
    assert piece["bias"] <= piece["bias_bound"] and piece["trA4"] <= piece["trA4_bound"]


# --------------------------------------------------------------------------- the λ trade-off in closed form


def test_leading_lambda_and_minimum_against_the_bound_terms_and_a_numerical_minimum():
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(11)
    Z = rng.standard_normal((30, 60))
    K = Z @ Z.T / 60
    y = np.sign(rng.standard_normal(30))
    n, T, C = 30, float(np.trace(K)), float(bounds.complexity(K, y))
    for sigma in (0.2, 0.7):
        lam = bounds.leading_lambda(C, n, T, sigma)
        g = bounds.leading_minimum(C, n, T, sigma)
        b = bounds.theorem_5_1_bound(K, y, lam, sigma, 0.1)
        assert b.train_bias + b.train_noise + b.rademacher_noise == pytest.approx(g, rel=1e-12)

        def f(t):
            return np.exp(t) / 2 * np.sqrt(C / n) + 5 * sigma * np.sqrt(T / n) / (2 * np.exp(t))

        res = minimize_scalar(f, bounds=(-6, 6), method="bounded", options={"xatol": 1e-10})
        assert np.exp(res.x) == pytest.approx(lam, rel=1e-4) and res.fun == pytest.approx(g, rel=1e-8)
        assert all(bounds.theorem_5_1_bound(K, y, l, sigma, 0.1).total > g for l in np.geomspace(0.05, 50, 30))
    # Theorem 5.2: sigma_eff = sigma_p / (1 - 2p) makes the closed form match the bound's rescaled terms
    p = 0.15
    lam = bounds.leading_lambda(C, n, T, bounds.binary_noise_subgaussian_sigma(p) / (1 - 2 * p))
    g = bounds.leading_minimum(C, n, T, bounds.binary_noise_subgaussian_sigma(p) / (1 - 2 * p))
    b2 = bounds.theorem_5_2_bound(K, y, lam, p, 0.1)
    assert b2.rescale * (
        b2.additive.train_bias + b2.additive.train_noise + b2.additive.rademacher_noise
    ) == pytest.approx(g)
    # several outputs: sums of sqrt(C_h / n) and of sigma_h
    lam3 = bounds.leading_lambda([1.0, 4.0], 10, 5.0, [0.1, 0.3])
    assert lam3 == pytest.approx(np.sqrt(5 * np.sqrt(0.5) * 0.4 / (np.sqrt(0.1) + np.sqrt(0.4))))
    with pytest.raises(ValueError, match="no optimum"):
        bounds.leading_lambda(C, n, T, 0.0)
    with pytest.raises(ValueError):
        bounds.leading_minimum(-1.0, n, T, 0.2)


def test_lemma_c2_chain_by_value():
    rng = np.random.default_rng(7)
    Z = rng.standard_normal((8, 12))
    K = Z @ Z.T / 12
    y = np.clip(rng.standard_normal(8), -1, 1)
    lam, sigma = 1.3, 0.5
    ch = studies.lemma_c2_chain(K, y, lam, sigma, 0.1, draws=5, seed=3)
    eps = sigma * np.random.default_rng(3).standard_normal((8, 5))  # the same draws
    M = np.linalg.inv(K + lam**2 * np.eye(8))
    for d in range(5):
        yt = y + eps[:, d]
        a = M @ yt
        assert ch.rkhs[d] == pytest.approx(np.sqrt(a @ K @ a))
        assert ch.step1[d] == pytest.approx(np.sqrt(yt @ M @ yt))
        assert ch.step2[d] == pytest.approx(np.sqrt(y @ M @ y) + np.sqrt(eps[:, d] @ M @ eps[:, d]))
        assert ch.step3[d] == pytest.approx(np.sqrt(y @ M @ y) + np.linalg.norm(eps[:, d]) / lam)
    assert ch.noise_quad_mean == pytest.approx(sigma**2 * np.trace(M))
    assert ch.bound == pytest.approx(bounds.lemma_c2_bound(K, y, lam, sigma, 0.1).total)


def test_the_five_vs_eight_task_is_balanced_nested_capped_and_registered(monkeypatch):
    """studies.five_vs_eight: half 5s (+1) and half 8s (−1), the pool's first n a sample of the first n's draw with
    the same seed as data.sample_classes makes it, features of norm √784, sizes capped by the data at hand (here a
    fake MNIST with 30 "5"s and 50 "8"s), the sources added to the run; bad sizes refused."""
    rng = np.random.default_rng(0)

    def fake(split):
        counts = {5: 30, 8: 50, 1: 20} if split == "train" else {5: 7, 8: 9}
        labels = np.concatenate([np.full(k, c) for c, k in counts.items()]).astype(np.int64)
        images = rng.integers(1, 256, (len(labels), 28, 28)).astype(np.uint8)
        return data.ImageDataset(images, labels, "MNIST", split, "data_dir", "here", len(labels), False)

    loaded = {s: fake(s) for s in ("train", "test")}
    monkeypatch.setattr(data, "load_mnist", lambda split="train", **kw: loaded[split])

    class Run:
        sources: list = []

        def add_data(self, d):
            self.sources.append(d)

    run = Run()
    task = studies.five_vs_eight(100, 40, run)
    assert task.available == 60 and task.n == 60 and len(task.y_test) == 14  # capped by the rarer digit
    assert len(run.sources) == 2
    assert sorted(np.unique(task.y)) == [-1.0, 1.0] and task.y.sum() == 0 and task.y_test.sum() == 0
    assert np.allclose(np.linalg.norm(task.x, axis=1), 28.0) and task.x.shape == (60, 784)
    idx = data.sample_classes(loaded["train"].labels, [5, 8], 30, seed=0)
    assert np.array_equal(task.images, loaded["train"].images[idx])
    assert np.array_equal(task.y, np.where(loaded["train"].labels[idx] == 5, 1.0, -1.0))
    small = studies.five_vs_eight(20)
    assert small.n == 20 and len(small.y_test) == 0
    x2, y2 = task.resample(3)
    assert x2.shape == task.x.shape and y2.sum() == 0 and not np.array_equal(x2, task.x)
    with pytest.raises(ValueError, match="at least 2 images"):
        studies.five_vs_eight(1)
