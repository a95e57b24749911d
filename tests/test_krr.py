"""Tests for ntk_core.krr: kernel ridge regression and Theorem 4.1 (RDI = AUX = KRR)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.kernel_ridge import KernelRidge

from ntk_core import check_kernel_matrix
from ntk_core.krr import (
    KRRPath,
    gd_aux_kernel,
    gd_aux_params,
    gd_kernel_closed_form,
    gd_rdi_kernel,
    gd_rdi_params,
    gd_steps_to_fit,
    gd_unregularized_kernel,
    krr_coefficients,
    krr_path,
    krr_predict,
    learning_rate_bound,
    linear_rate,
)


def features(seed: int, n: int = 40, m: int = 15, P: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Random train/test feature matrices with rows φ(x)ᵀ, scaled so k = O(1)."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n + m, P)) / np.sqrt(P)
    return Z[:n], Z[n:]


def problem(seed: int, n: int = 40, m: int = 15, P: int = 60, outputs: int | None = None):
    Z, Zt = features(seed, n, m, P)
    rng = np.random.default_rng(seed + 1000)
    y = rng.normal(size=(n,) if outputs is None else (n, outputs))
    return Z, Zt, Z @ Z.T, Zt @ Z.T, y


# --------------------------------------------------------------------------- KRR against sklearn


@pytest.mark.parametrize("outputs", [None, 3])
@pytest.mark.parametrize("lam", [1e-2, 0.3, 1.0, 7.0])
def test_krr_predict_matches_sklearn(outputs: int | None, lam: float) -> None:
    _, _, K, Kt, y = problem(0, outputs=outputs)
    ref = KernelRidge(alpha=lam**2, kernel="precomputed").fit(K, y)
    np.testing.assert_allclose(krr_predict(K, y, lam), ref.predict(K), atol=1e-10, rtol=0)
    np.testing.assert_allclose(krr_predict(K, y, lam, Kt), ref.predict(Kt), atol=1e-10, rtol=0)
    assert krr_predict(K, y, lam, Kt).shape == ((15,) if outputs is None else (15, outputs))


def test_krr_multi_output_is_column_by_column() -> None:
    _, _, K, Kt, Y = problem(1, outputs=4)
    full = krr_predict(K, Y, 0.5, Kt)
    for h in range(4):
        np.testing.assert_allclose(full[:, h], krr_predict(K, Y[:, h], 0.5, Kt), atol=1e-12)


def test_krr_coefficients_solve_the_ridge_system() -> None:
    _, _, K, _, y = problem(2)
    alpha = krr_coefficients(K, y, 0.4)
    np.testing.assert_allclose((K + 0.16 * np.eye(K.shape[0])) @ alpha, y, atol=1e-10)


def test_krr_lambda_zero_is_interpolation_when_K_is_positive_definite() -> None:
    _, _, K, _, y = problem(3, n=20, P=60)  # n < P: K is positive definite
    np.testing.assert_allclose(krr_predict(K, y, 0.0), y, atol=1e-8)


def test_krr_singular_kernel_without_ridge_is_a_clear_error() -> None:
    _, _, K, _, y = problem(4, n=30, P=5)  # rank 5 < 30
    with pytest.raises(ValueError, match="not positive definite"):
        krr_predict(K, y, 0.0)
    krr_predict(K, y, 0.1)  # the ridge makes it solvable


def test_krr_not_psd_kernel_is_a_clear_error() -> None:
    K = np.array([[1.0, 0.0], [0.0, -3.0]])
    with pytest.raises(ValueError, match="not positive definite"):
        krr_predict(K, np.ones(2), 1.0)
    with pytest.raises(ValueError, match="not positive (semi-)?definite"):
        krr_path(K, np.ones(2), [1.0])


def test_krr_predict_is_invariant_under_kernel_and_ridge_scaling() -> None:
    # K -> aK, λ -> √a λ leaves K (K + λ²I)^{-1} unchanged: a property, not a number
    _, _, K, Kt, y = problem(5)
    a = 13.0
    np.testing.assert_allclose(krr_predict(a * K, y, np.sqrt(a) * 0.6, a * Kt), krr_predict(K, y, 0.6, Kt), atol=1e-10)


# --------------------------------------------------------------------------- λ path


@pytest.mark.parametrize("outputs", [None, 2])
def test_krr_path_matches_per_lambda_solves(outputs: int | None) -> None:
    _, _, K, Kt, y = problem(6, outputs=outputs)
    lams = np.geomspace(1e-2, 10.0, 9)
    train = krr_path(K, y, lams)
    test = krr_path(K, y, lams, Kt)
    assert train.shape == (9,) + y.shape
    assert test.shape == (9, 15) + y.shape[1:]
    for j, lam in enumerate(lams):
        np.testing.assert_allclose(train[j], krr_predict(K, y, lam), atol=1e-10)
        np.testing.assert_allclose(test[j], krr_predict(K, y, lam, Kt), atol=1e-10)


def test_krr_path_object_reuses_one_decomposition() -> None:
    _, _, K, Kt, y = problem(7)
    path = KRRPath(K, Kt)
    for lam in (0.05, 0.5, 5.0):
        np.testing.assert_allclose(path.coefficients(y, lam), krr_coefficients(K, y, lam), atol=1e-10)
    with pytest.raises(ValueError, match="K_test_train"):
        KRRPath(K).predict(y, [1.0], test=True)


# --------------------------------------------------------------------------- Theorem 4.1


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    lam=st.floats(0.05, 5.0),
    eta_factor=st.floats(0.05, 1.9),
    outputs=st.sampled_from([None, 2]),
)
def test_theorem_4_1_rdi_and_aux_iterates_are_identical(
    seed: int, lam: float, eta_factor: float, outputs: int | None
) -> None:
    """θ(t) = θ̄(t) for every t, for any η > 0 (the identity needs no step-size condition)."""
    Z, _, K, _, y = problem(seed, n=12, P=20, outputs=outputs)
    rng = np.random.default_rng(seed)
    theta0 = rng.normal(size=(20,) + y.shape[1:])
    eta = eta_factor * learning_rate_bound(K, lam)
    rdi = gd_rdi_params(Z, y, lam, eta, 60, theta0=theta0)
    aux = gd_aux_params(Z, y, lam, eta, 60, theta0=theta0)
    scale = max(1.0, float(np.max(np.abs(rdi.theta))))
    np.testing.assert_allclose(aux.theta, rdi.theta, atol=1e-10 * scale, rtol=0)
    # the key step of the proof: θ̄(t) = θ(0) + Zᵀ b(t) / λ
    assert aux.b is not None
    rebuilt = theta0 + np.einsum("np,tn...->tp...", Z, aux.b) / lam
    np.testing.assert_allclose(aux.theta, rebuilt, atol=1e-10 * scale, rtol=0)


def test_theorem_4_1_identity_survives_a_divergent_step_size() -> None:
    Z, _, K, _, y = problem(8, n=10, P=15)
    eta = 2.5 / (np.linalg.norm(K, 2) + 0.5**2)  # beyond 2/(‖K‖+λ²): GD diverges
    rdi = gd_rdi_params(Z, y, 0.5, eta, 30)
    aux = gd_aux_params(Z, y, 0.5, eta, 30)
    assert np.linalg.norm(rdi.theta[-1]) > 100 * np.linalg.norm(rdi.theta[1])  # it really diverges
    np.testing.assert_allclose(aux.theta, rdi.theta, rtol=1e-9, atol=0)


@pytest.mark.parametrize("lam", [0.3, 1.0])
def test_theorem_4_1_linear_convergence_to_krr(lam: float) -> None:
    Z, Zt, K, Kt, y = problem(9, n=30, P=50)
    rng = np.random.default_rng(9)
    theta0 = rng.normal(size=50)
    eta = learning_rate_bound(K, lam)
    assert eta == pytest.approx(1.0 / (np.linalg.norm(K, 2) + lam**2))
    rho = linear_rate(K, lam, eta)
    assert rho == pytest.approx(1.0 - eta * lam**2)
    steps = int(np.ceil(np.log(1e-13) / np.log(rho)))
    traj = gd_rdi_params(Z, y, lam, eta, steps, theta0=theta0)
    theta_star = theta0 + Z.T @ krr_coefficients(K, y, lam)
    err = np.linalg.norm(traj.theta - theta_star, axis=1)
    # the linear-rate inequality at every step
    assert np.all(err <= rho**traj.steps * err[0] * (1 + 1e-9) + 1e-12)
    # the limit's outputs are the KRR predictions, at training and at new points
    np.testing.assert_allclose(Z @ (traj.theta[-1] - theta0), krr_predict(K, y, lam), atol=1e-10)
    np.testing.assert_allclose(Zt @ (traj.theta[-1] - theta0), krr_predict(K, y, lam, Kt), atol=1e-10)


def test_linear_rate_says_when_gd_diverges() -> None:
    _, _, K, _, _ = problem(10)
    bound = learning_rate_bound(K, 0.5)
    top = np.linalg.norm(K, 2) + 0.25
    assert linear_rate(K, 0.5, bound) < 1
    assert linear_rate(K, 0.5, 1.99 / top) < 1
    assert linear_rate(K, 0.5, 2.01 / top) > 1


def test_function_space_gd_equals_parameter_space_gd() -> None:
    Z, Zt, K, Kt, y = problem(11, outputs=2)
    lam, eta = 0.4, 0.9 * learning_rate_bound(K, 0.4)
    par = gd_rdi_params(Z, y, lam, eta, 80, record_every=7)
    fun = gd_rdi_kernel(K, y, lam, eta, 80, K_test_train=Kt, record_every=7)
    np.testing.assert_array_equal(par.steps, fun.steps)
    assert par.steps[-1] == 80 and par.steps[1] == 7
    np.testing.assert_allclose(par.outputs(Z), fun.train, atol=1e-10)
    assert fun.test is not None
    np.testing.assert_allclose(par.outputs(Zt), fun.test, atol=1e-10)


def test_function_space_aux_matches_rdi_and_b_over_lambda() -> None:
    _, _, K, Kt, y = problem(12)
    lam, eta = 0.7, learning_rate_bound(K, 0.7)
    rdi = gd_rdi_kernel(K, y, lam, eta, 100, Kt)
    aux = gd_aux_kernel(K, y, lam, eta, 100, Kt)
    np.testing.assert_allclose(aux.alpha, rdi.alpha, atol=1e-10)
    assert aux.b is not None and rdi.b is None
    np.testing.assert_allclose(aux.alpha, aux.b / lam, atol=1e-10)


def test_function_space_gd_converges_to_krr() -> None:
    _, _, K, Kt, y = problem(13)
    lam = 0.5
    eta = learning_rate_bound(K, lam)
    steps = int(np.ceil(np.log(1e-12) / np.log(linear_rate(K, lam, eta))))
    fun = gd_rdi_kernel(K, y, lam, eta, steps, Kt, record_every=steps)
    assert fun.test is not None
    np.testing.assert_allclose(fun.test[-1], krr_predict(K, y, lam, Kt), atol=1e-9)


@pytest.mark.parametrize("lam", [0.0, 0.6])
def test_closed_form_matches_the_iteration(lam: float) -> None:
    _, _, K, Kt, y = problem(14, outputs=3)
    eta = learning_rate_bound(K, lam)
    it = gd_unregularized_kernel(K, y, eta, 50, Kt) if lam == 0 else gd_rdi_kernel(K, y, lam, eta, 50, Kt)
    for t in (0, 1, 17, 50):
        np.testing.assert_allclose(gd_kernel_closed_form(K, y, eta, t, lam), it.train[t], atol=1e-10)
        np.testing.assert_allclose(gd_kernel_closed_form(K, y, eta, t, lam, Kt), it.test[t], atol=1e-10)


def test_closed_form_tends_to_krr() -> None:
    _, _, K, _, y = problem(15)
    eta = learning_rate_bound(K, 0.8)
    np.testing.assert_allclose(gd_kernel_closed_form(K, y, eta, 100_000, 0.8), krr_predict(K, y, 0.8), atol=1e-10)
    # a step past the stability limit η < 2/(λ_max + λ²): said, with the limit, instead of NaN and warnings
    top = float(np.linalg.eigvalsh(K)[-1]) + 0.8**2
    with pytest.raises(ValueError, match=r"diverges: eta \(λ_max\(K\) \+ λ²\) = .* > 2.*take eta <"):
        gd_kernel_closed_form(K, y, 3.0 / top, 5_000, 0.8)
    assert np.all(np.isfinite(gd_kernel_closed_form(K, y, 3.0 / top, 3, 0.8)))  # a few steps: finite, returned


def test_unregularized_gd_fits_the_noisy_labels_eventually() -> None:
    """Early stopping matters: without a ridge the training error goes monotonically to 0."""
    _, _, K, _, y = problem(16, n=20, P=60)  # K positive definite
    eta = learning_rate_bound(K, 0.0)
    s_min = np.linalg.eigvalsh(K)[0]
    steps = int(np.ceil(np.log(1e-8) / np.log(1 - eta * s_min)))
    traj = gd_unregularized_kernel(K, y, eta, steps, record_every=max(1, steps // 50))
    train_err = np.linalg.norm(traj.train - y, axis=1)
    assert np.all(np.diff(train_err) <= 1e-12)
    assert train_err[-1] < 1e-7 * train_err[0]


# --------------------------------------------------------------------------- bad input


def test_bad_kernels_are_refused() -> None:
    y = np.ones(3)
    with pytest.raises(ValueError, match="square"):
        krr_predict(np.ones((3, 2)), y, 1.0)
    with pytest.raises(ValueError, match="symmetric"):
        krr_predict(np.array([[1.0, 0.5, 0], [0.0, 1.0, 0], [0, 0, 1]]), y, 1.0)
    bad = np.eye(3)
    bad[1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        krr_predict(bad, y, 1.0)
    bad[1, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        krr_path(bad, y, [1.0])
    with pytest.raises(TypeError, match="real numbers"):
        krr_predict(np.array([["a"]]), [1.0], 1.0)
    # a tiny float32-style asymmetry is tolerated and symmetrised
    K = np.eye(3) + 1e-12 * np.arange(9.0).reshape(3, 3)
    assert np.array_equal(check_kernel_matrix(K), check_kernel_matrix(K).T)


def test_shape_mismatches_are_refused() -> None:
    K = np.eye(4)
    with pytest.raises(ValueError, match="n = 4 rows"):
        krr_predict(K, np.ones(3), 1.0)
    with pytest.raises(ValueError, match=r"\(m, n\)"):
        krr_predict(K, np.ones(4), 1.0, K_test_train=np.ones((2, 3)))
    with pytest.raises(ValueError, match="dimension"):
        krr_predict(K, np.ones((4, 2, 2)), 1.0)
    with pytest.raises(ValueError, match="n = 4 rows"):
        gd_rdi_params(np.ones((4, 6)), np.ones(5), 1.0, 0.1, 3)
    with pytest.raises(ValueError, match="theta0"):
        gd_aux_params(np.ones((4, 6)), np.ones(4), 1.0, 0.1, 3, theta0=np.zeros(5))


def test_bad_lambda_eta_steps_are_refused() -> None:
    Z, _, K, _, y = problem(17, n=5, P=8)
    with pytest.raises(ValueError, match="lam must be >= 0"):
        krr_predict(K, y, -1.0)
    with pytest.raises(ValueError, match="lam must be > 0"):
        gd_rdi_params(Z, y, 0.0, 0.1, 3)
    with pytest.raises(ValueError, match="lam must be > 0"):
        gd_aux_kernel(K, y, -0.5, 0.1, 3)
    with pytest.raises(ValueError, match="eta must be > 0"):
        gd_rdi_kernel(K, y, 1.0, 0.0, 3)
    with pytest.raises(ValueError, match="steps must be an int >= 0"):
        gd_unregularized_kernel(K, y, 0.1, -1)
    with pytest.raises(TypeError, match="steps must be an int"):
        gd_aux_params(Z, y, 1.0, 0.1, 2.5)
    with pytest.raises(TypeError, match="lam must be a real number"):
        krr_predict(K, y, "1")
    with pytest.raises(ValueError, match="finite"):
        krr_predict(K, y, float("nan"))
    with pytest.raises(ValueError, match="NaN or infinite"):
        gd_rdi_params(np.full((5, 8), np.nan), y, 1.0, 0.1, 3)


# --------------------------------------------------------------------------- values by hand (λ ≠ 1)


def _tiny(seed: int = 7, n: int = 5, P: int = 8):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, P)) / np.sqrt(P)
    Zt = rng.normal(size=(3, P)) / np.sqrt(P)
    y = rng.normal(size=n)
    return Z, Zt, y


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_krr_by_value(lam: float) -> None:
    Z, Zt, y = _tiny()
    K, Kt = Z @ Z.T, Zt @ Z.T
    alpha = np.linalg.inv(K + lam * lam * np.eye(5)) @ y
    np.testing.assert_allclose(krr_coefficients(K, y, lam), alpha, rtol=1e-10)
    np.testing.assert_allclose(krr_predict(K, y, lam), K @ alpha, rtol=1e-10)
    np.testing.assert_allclose(krr_predict(K, y, lam, Kt), Kt @ alpha, rtol=1e-10)
    np.testing.assert_allclose(krr_path(K, y, [lam, 2 * lam], Kt)[0], Kt @ alpha, rtol=1e-10)
    np.testing.assert_allclose(KRRPath(K).coefficients(y, lam), alpha, rtol=1e-10)


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_learning_rate_and_rate_by_value(lam: float) -> None:
    Z, _, _ = _tiny()
    K = Z @ Z.T
    top = np.max(np.linalg.eigvalsh(K))
    assert learning_rate_bound(K, lam) == pytest.approx(1 / (top + lam * lam), rel=1e-12)
    eta = 0.9 / (top + lam * lam)
    assert linear_rate(K, lam, eta) == pytest.approx(1 - eta * lam * lam, rel=1e-12)
    big = 1.9 / (top + lam * lam)
    assert linear_rate(K, lam, big) == pytest.approx(max(1 - big * lam**2, big * (top + lam**2) - 1), rel=1e-12)


@pytest.mark.parametrize("lam", [0.7, 2.5])
def test_one_and_two_gd_steps_by_hand(lam: float) -> None:
    """Eqs. (6)/(7) in parameter space and their function-space forms, two steps written out."""
    Z, Zt, y = _tiny()
    K, Kt = Z @ Z.T, Zt @ Z.T
    eta = 0.3
    th0 = np.linspace(-1, 1, Z.shape[1])
    # RDI: θ ← θ − η(Zᵀ(Z(θ − θ0) − y) + λ²(θ − θ0))
    t1 = th0 - eta * (Z.T @ (-y))
    t2 = t1 - eta * (Z.T @ (Z @ (t1 - th0) - y) + lam**2 * (t1 - th0))
    rdi = gd_rdi_params(Z, y, lam, eta, 2, theta0=th0)
    np.testing.assert_allclose(rdi.theta, [th0, t1, t2], rtol=1e-12, atol=1e-14)
    # AUX: a = Z(θ̄ − θ0) + λb − y; θ̄ ← θ̄ − ηZᵀa, b ← b − ηλa
    a0 = -y
    u1, b1 = th0 - eta * Z.T @ a0, -eta * lam * a0
    a1 = Z @ (u1 - th0) + lam * b1 - y
    u2, b2 = u1 - eta * Z.T @ a1, b1 - eta * lam * a1
    aux = gd_aux_params(Z, y, lam, eta, 2, theta0=th0)
    np.testing.assert_allclose(aux.theta, [th0, u1, u2], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(aux.b, [np.zeros(5), b1, b2], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(aux.outputs(Zt)[2], Zt @ (u2 - th0), rtol=1e-12, atol=1e-14)
    # function space: α ← α − η(Kα − y + λ²α); AUX: ᾱ ← ᾱ − ηa, b ← b − ηλa
    al1 = eta * y
    al2 = al1 - eta * (K @ al1 - y + lam**2 * al1)
    fr = gd_rdi_kernel(K, y, lam, eta, 2, K_test_train=Kt)
    np.testing.assert_allclose(fr.alpha, [np.zeros(5), al1, al2], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fr.train[2], K @ al2, rtol=1e-12)
    np.testing.assert_allclose(fr.test[2], Kt @ al2, rtol=1e-12)
    c1, d1 = eta * y, eta * lam * y
    e1 = K @ c1 + lam * d1 - y
    c2, d2 = c1 - eta * e1, d1 - eta * lam * e1
    fa = gd_aux_kernel(K, y, lam, eta, 2)
    np.testing.assert_allclose(fa.alpha, [np.zeros(5), c1, c2], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fa.b, [np.zeros(5), d1, d2], rtol=1e-12, atol=1e-14)
    g2 = al1 - eta * (K @ al1 - y)  # no regulariser
    np.testing.assert_allclose(gd_unregularized_kernel(K, y, eta, 2).alpha[2], g2, rtol=1e-12)
    # closed form at t = 2: K(I − (I − η(K + λ²I))²)(K + λ²I)⁻¹ y = K α(2)
    M = np.eye(5) - eta * (K + lam**2 * np.eye(5))
    closed = K @ (np.eye(5) - M @ M) @ np.linalg.inv(K + lam**2 * np.eye(5)) @ y
    np.testing.assert_allclose(closed, K @ al2, rtol=1e-10)
    np.testing.assert_allclose(gd_kernel_closed_form(K, y, eta, 2, lam=lam), closed, rtol=1e-10)
    np.testing.assert_allclose(gd_kernel_closed_form(K, y, eta, 2, lam=lam, K_test_train=Kt), Kt @ al2, rtol=1e-10)


def _kernel_with_negative_eigenvalue(n: int, negative: float, seed: int = 0) -> np.ndarray:
    """Z Zᵀ (rank 20) minus ``negative`` u uᵀ for a unit u in its null space: eigenvalue -negative exactly."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 20)) / np.sqrt(20)
    u = rng.normal(size=n)
    u -= Z @ np.linalg.lstsq(Z, u, rcond=None)[0]
    u /= np.linalg.norm(u)
    return Z @ Z.T - negative * np.outer(u, u)


@pytest.mark.parametrize("n", [30, 400])  # the exact check, and Lanczos on the Cholesky factor
def test_clearly_negative_eigenvalue_is_refused_even_when_the_ridge_hides_it(n: int) -> None:
    from ntk_core.bounds import krr_rkhs_norm, ridge_complexity

    K = _kernel_with_negative_eigenvalue(n, 0.5)
    y = np.random.default_rng(1).normal(size=n)
    assert np.linalg.eigvalsh(K + np.eye(n))[0] > 0.4  # K + λ² I is positive definite for λ = 1
    calls = {
        "krr_predict": lambda: krr_predict(K, y, 1.0),
        "krr_coefficients": lambda: krr_coefficients(K, y, 1.0),
        "krr_path": lambda: krr_path(K, y, [1.0, 2.0]),
        "KRRPath": lambda: KRRPath(K),
        "gd_rdi_kernel": lambda: gd_rdi_kernel(K, y, 1.0, 0.01, 3),
        "gd_aux_kernel": lambda: gd_aux_kernel(K, y, 1.0, 0.01, 3),
        "gd_unregularized_kernel": lambda: gd_unregularized_kernel(K, y, 0.01, 3),
        "gd_kernel_closed_form": lambda: gd_kernel_closed_form(K, y, 0.01, 3, lam=1.0),
        "ridge_complexity": lambda: ridge_complexity(K, y, 1.0),
        "krr_rkhs_norm": lambda: krr_rkhs_norm(K, y, 1.0),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"not positive semi-definite: it has an eigenvalue .*-0\.5") as info:
            call()
        assert "tolerance" in str(info.value), name


def test_rounding_level_negative_eigenvalues_of_a_float32_gram_are_accepted() -> None:
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(300, 40)).astype(np.float32)
    K = (Z @ Z.T).astype(np.float64)  # rank 40, float32 rounding
    K = 0.5 * (K + K.T)
    assert np.linalg.eigvalsh(K)[0] < 0  # rounding makes some of the zero eigenvalues negative
    y = rng.normal(size=300)
    ref = KRRPath(K).predict(y, [1.0])[0]
    np.testing.assert_allclose(krr_predict(K, y, 1.0), ref, rtol=1e-6, atol=1e-8)
    gd_rdi_kernel(K, y, 1.0, 1e-3, 2)
    gd_kernel_closed_form(K, y, 1e-3, 2, lam=1.0)


def test_lambda_whose_square_overflows_is_a_clear_error() -> None:
    _, _, K, _, y = problem(0, n=10)
    for call in (
        lambda lam: krr_predict(K, y, lam),
        lambda lam: krr_path(K, y, [1.0, lam]),
        lambda lam: gd_rdi_kernel(K, y, lam, 0.1, 2),
        lambda lam: gd_aux_params(np.eye(10), y, lam, 0.1, 2),
        lambda lam: learning_rate_bound(K, lam),
    ):
        with pytest.raises(ValueError, match="λ² overflows float64"):
            call(1e155)
    big = krr_predict(K, y, 1e150)  # λ² = 1e300 is finite: predictions ≈ K ỹ / λ²
    np.testing.assert_allclose(big, K @ y / 1e300, rtol=1e-9)


def test_gd_steps_to_fit_is_the_first_step_of_iterated_gd_below_the_tolerance():
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((12, 30)) / np.sqrt(30)
    K = Z @ Z.T
    for y, eta_scale, tol in (
        (rng.choice([-1.0, 1.0], 12), 1.0, 1e-3),
        (rng.standard_normal((12, 3)), 0.5, 1e-5),  # several outputs: the loss sums over them
        (rng.choice([-1.0, 1.0], 12), 1.9, 1e-4),  # 1 < η‖K‖ < 2: the top direction oscillates, still converges
    ):
        eta = eta_scale / np.linalg.eigvalsh(K)[-1]
        t = gd_steps_to_fit(K, y, eta, tol)
        # independent: iterate α ← α − η(Kα − ỹ) and read the mean loss ½‖Kα − ỹ‖²/n step by step
        traj = gd_unregularized_kernel(K, y, eta, t + 5)
        mean_loss = [0.5 * float(np.sum((f - y) ** 2)) / len(y) for f in traj.train]
        first = next(i for i, v in enumerate(mean_loss) if v <= tol)
        assert t == first and mean_loss[t - 1] > tol
    y = rng.choice([-1.0, 1.0], 12)
    assert gd_steps_to_fit(K, y, 0.5, 1.0) == 0  # mean loss ½ at t = 0
    assert gd_steps_to_fit(K, y, 0.5, 1e-3, max_steps=3) is None
    # targets outside the range of K are never fitted: the loss levels off above the tolerance
    K_low = Z[:, :3] @ Z[:, :3].T  # rank 3
    assert gd_steps_to_fit(K_low, y, 0.5, 1e-3) is None
    with pytest.raises(ValueError, match="eta must be below 2/‖K‖"):
        gd_steps_to_fit(K, y, 2.01 / np.linalg.eigvalsh(K)[-1], 1e-3)
    with pytest.raises(ValueError, match="tol"):
        gd_steps_to_fit(K, y, 0.5, 0.0)


def test_an_ill_conditioned_ridge_solve_says_how_inaccurate_it_is() -> None:
    """K = XXᵀ of rank 20 (n = 300) with λ = 1e-6: K + λ² I has condition number ~1e14 and the predictions are
    off by ~15 %, which was returned in silence. The exact answer comes from the 20 × 20 system of the push-through
    identity X_t Xᵀ(XXᵀ + λ² I)⁻¹ y = X_t (XᵀX + λ² I)⁻¹ Xᵀ y, which is well conditioned."""
    import warnings

    from ntk_core.krr import IllConditionedWarning

    rng = np.random.default_rng(0)
    X, Xt, y = rng.standard_normal((300, 20)), rng.standard_normal((50, 20)), rng.standard_normal(300)
    K, Kt = X @ X.T, Xt @ X.T
    for lam, warns in ((1e-6, True), (1e-5, True), (1e-3, False), (1.0, False)):
        exact = Xt @ np.linalg.solve(X.T @ X + lam**2 * np.eye(20), X.T @ y)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pred = krr_predict(K, y, lam, Kt)
        true_error = np.linalg.norm(pred - exact) / np.linalg.norm(exact)
        said = [w.message for w in caught if issubclass(w.category, IllConditionedWarning)]
        assert bool(said) == warns, (lam, true_error)
        if warns:  # the error it states is the error it has, within a factor 3
            stated = float(str(said[0]).split("accurate only to about ")[1].split(" ")[0])
            assert true_error / 3 < stated < 3 * true_error, (stated, true_error)
        else:
            assert true_error < 1e-6


def test_a_bfloat16_kernel_is_taken_as_its_values():
    """A kernel matrix held in bfloat16 (a GPU's Gram, say) is a documented input: taken at its values (float32
    holds them exactly), not refused as 'not array-like'; the prediction is the float64 one of those values."""
    import torch

    rng = np.random.default_rng(0)
    Z = rng.normal(size=(10, 20))
    K = torch.tensor(Z @ Z.T / 20 + np.eye(10), dtype=torch.bfloat16)
    y = np.sign(rng.normal(size=10))
    exact = K.double().numpy()
    np.testing.assert_allclose(krr_predict(K, y, lam=1.0), exact @ np.linalg.solve(exact + np.eye(10), y), rtol=1e-9)
