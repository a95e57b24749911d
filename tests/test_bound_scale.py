"""The bounds measured up to the full data (experiments.bound_scale) against dense in-memory computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from test_experiments import TINY

from ntk_core import bounds, data, experiments, infinite, noise
from ntk_core.experiments import bound_scale
from ntk_core.ntk import empirical_ntk
from ntk_core.nets import TwoLayerNet


@pytest.fixture
def cache(tmp_path, monkeypatch, shared_data):
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    return tmp_path / "cache"


def _run(**extra):
    return experiments.run("bound_scale", "quick", **{**TINY["bound_scale"], **extra})


def _inputs(task: str, n: int, seed: int):
    """The unit's training subset and the first 100 test images of its task (drawn here, not by the study)."""
    mnist, test = data.load_mnist("train"), data.load_mnist("test")
    binary = task.startswith("binary")
    pool = np.flatnonzero(np.isin(mnist.labels, (5, 8))) if binary else np.arange(len(mnist.labels))
    idx = pool[np.sort(np.random.default_rng(seed).choice(len(pool), size=n, replace=False))]
    t_idx = (np.flatnonzero(np.isin(test.labels, (5, 8))) if binary else np.arange(len(test.labels)))[:100]
    return (
        data.sphere_features(mnist.images[idx]),
        mnist.labels[idx],
        data.sphere_features(test.images[t_idx]),
        test.labels[t_idx],
    )


def test_every_unit_equals_the_dense_computation(cache):
    """Each task's numbers against K built whole in memory and the bounds' dense route (Cholesky of the
    whole K per λ), with the subsets drawn independently of the study's code."""
    table = _run().table
    assert set(table["task"]) == set(bound_scale.TASKS)
    assert sorted({(t, n) for t, n in zip(table["task"], table["n"])}) == [
        ("binary", 60),
        ("binary", 120),
        ("binary_empirical", 60),
        ("multiclass", 60),
        ("multiclass", 120),
    ]
    x, labels, x_test, labels_test = _inputs("binary", 120, 1)
    K = infinite.setting1_kernel(x)
    y = np.where(labels == 5, 1.0, -1.0)
    noisy = noise.flip_binary(y, 0.2, seed=1)
    K_test = infinite.setting1_kernel(x_test, x)
    rows = table[(table["task"] == "binary") & (table["n"] == 120) & (table["seed"] == 1)]
    assert rows["complexity"].iloc[0] == pytest.approx(y @ np.linalg.solve(K, y), rel=1e-10)
    assert rows["trace"].iloc[0] == pytest.approx(60.0, rel=1e-14)  # tr K = n/2 on the sphere
    for _, row in rows.iterrows():
        dense = bounds.theorem_5_2_bound(K, y, row["lam"], 0.2, 0.05)
        assert row["total"] == pytest.approx(dense.total, rel=1e-10)
        assert row["rademacher_signal"] == pytest.approx(dense.rescale * dense.additive.rademacher_signal, rel=1e-10)
        assert row["ridge"] == pytest.approx(y @ np.linalg.solve(K + row["lam"] ** 2 * np.eye(120), y), rel=1e-10)
        f = K_test @ np.linalg.solve(K + row["lam"] ** 2 * np.eye(120), noisy)
        assert row["test_error"] == np.mean(np.sign(f) != np.where(labels_test == 5, 1, -1))
    star = rows[rows["lam_kind"] == "leading"]["lam"].iloc[0]
    sigma = bounds.binary_noise_subgaussian_sigma(0.2) / 0.6
    assert star == pytest.approx(bounds.leading_lambda(y @ np.linalg.solve(K, y), 120, np.trace(K), sigma), rel=1e-10)

    x, labels, x_test, labels_test = _inputs("multiclass", 60, 0)
    K = infinite.setting1_kernel(x)
    rows = table[(table["task"] == "multiclass") & (table["n"] == 60) & (table["seed"] == 0)]
    P = noise.pairflip_transition(10, 0.2)
    pair = rows[rows["noise"] == "pair-flip 0.2"]
    noisy = np.eye(10)[noise.corrupt(labels, P, seed=0)]
    for _, row in pair.iterrows():
        assert row["total"] == pytest.approx(bounds.theorem_5_3_bound(K, labels, P, row["lam"], 0.05).total, rel=1e-10)
        f = infinite.setting1_kernel(x_test, x) @ np.linalg.solve(K + row["lam"] ** 2 * np.eye(60), noisy)
        assert row["test_error"] == np.mean(np.argmax(f, axis=1) != labels_test)
    Q = bounds.q_matrix(P, labels)
    assert pair["complexity"].iloc[0] == pytest.approx(np.einsum("hi,hi->", Q, np.linalg.solve(K, Q.T).T), rel=1e-10)

    x, labels, _, _ = _inputs("binary", 60, 0)
    net = TwoLayerNet(x.shape[1], 64, seed=0).double()
    K = empirical_ntk(net, torch.as_tensor(x)).numpy()
    y = np.where(labels == 5, 1.0, -1.0)
    rows = table[table["task"] == "binary_empirical"]
    assert rows["complexity"].iloc[0] == pytest.approx(y @ np.linalg.solve((K + K.T) / 2, y), rel=1e-8)


def test_the_bounds_premises_and_brackets_hold_in_every_row(cache):
    table = _run().table
    assert (table["leading_min"] <= table["total"] * (1 + 1e-12)).all()  # the leading terms are part of the bound
    assert (table["ridge"] <= table["complexity"] * (1 + 1e-12)).all()  # yᵀ(K + λ²I)⁻¹y ≤ yᵀK⁻¹y
    assert (table["comp_error"] < 1e-8).all()  # at these sizes yᵀK⁻¹y is exact to far below what the study reads
    assert (table["min_pivot"] > 0).all() and (table["kappa_lower"] >= 1).all()
    # beyond grid_max_n one factorisation: λ* alone, its ridge term bounded by the complexity, the total above
    # the exact one at the same λ and the leading minimum unchanged
    beyond = _run(grid_max_n=100).table
    big = beyond[beyond["n"] == 120]
    assert set(big["lam_kind"]) == {"leading"} and not big["ridge_exact"].any()
    assert big["test_error"].isna().all() and table["test_error"].notna().all()  # only where K + λ²I is factored
    exact = table[(table["n"] == 120) & (table["lam_kind"] == "leading")]
    merged = big.merge(exact, on=["task", "n", "seed", "noise"], suffixes=("_bounded", "_exact"))
    assert len(merged) == len(big) > 0
    assert (merged["total_bounded"] > merged["total_exact"]).all()
    np.testing.assert_allclose(merged["leading_min_bounded"], merged["leading_min_exact"], rtol=1e-12)
    np.testing.assert_allclose(merged["ridge_bounded"], merged["complexity_bounded"], rtol=1e-12)


def test_sizes_are_capped_by_the_data_and_the_full_set_has_one_unit():
    config = experiments.make_config("bound_scale", "quick", binary_sizes=(100, 10**6), seeds=(0, 1, 2))
    units = bound_scale._units(config, {"binary": 500, "multiclass": 2_000})
    assert [(t, n, s) for t, n, s in units if t == "binary"] == [
        ("binary", 100, 0),
        ("binary", 100, 1),
        ("binary", 100, 2),
        ("binary", 500, 0),
    ]
    medium = experiments.make_config("bound_scale", "medium")
    units = bound_scale._units(medium, {"binary": 11_272, "multiclass": 60_000})
    assert ("multiclass", 60_000, 0) in units and ("binary", 11_272, 0) in units
    assert [s for t, n, s in units if n == 32_000] == [0]  # one subset above one_subset_above
    assert [s for t, n, s in units if t == "multiclass" and n == 16_000] == [0, 1, 2]


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"binary_sizes": ()}, "binary_sizes must be a non-empty tuple"),
        ({"multiclass_sizes": (1,)}, "multiclass_sizes must be an int >= 2"),
        ({"lams": (0.0, 1.0)}, "every λ of lams must be > 0"),
        ({"p": 0.5}, r"p must lie in \[0.0, 0.5\)"),
        ({"empirical_n": -1}, "empirical_n"),
    ],
)
def test_bad_configuration_is_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        experiments.make_config("bound_scale", "quick", **overrides)


def test_a_finished_unit_leaves_no_factor_on_disk(cache):
    _run(binary_sizes=(60,), multiclass_sizes=(60,), empirical_n=0, seeds=(0,))
    assert not any((cache / "factors").rglob("*.npz"))
    assert _run(binary_sizes=(60,), multiclass_sizes=(60,), empirical_n=0, seeds=(0,)).meta["cached"]


def test_the_growth_summary_and_fit_read_the_table(cache):
    from ntk_core.bookkit.studies.scaling import bound_growth, growth_figure, growth_fit
    from ntk_core.bookkit.studies.scaling import GROWTH_COLUMNS

    table = _run(grid_max_n=100).table  # n = 120 beyond the grid: its bound at λ* is an upper bound
    growth = bound_growth(table)
    assert list(growth.columns) == list(GROWTH_COLUMNS)
    assert len(growth) == 2 + 2 * 2 + 1  # binary: 2 sizes; multiclass: 2 noise models x 2 sizes; empirical: 1
    row = growth[(growth["task"] == "binary") & (growth["n"] == 60)].iloc[0]
    part = table[(table["task"] == "binary") & (table["n"] == 60) & (table["lam_kind"] == "leading")]
    assert row["subsets"] == 2 and row["complexity"] == part["complexity"].mean() and row["bound_exact"]
    grid = table[(table["task"] == "binary") & (table["n"] == 60) & (table["lam_kind"] == "grid")]
    assert row["best_grid_bound"] == grid.groupby("seed")["total"].min().mean()
    big = growth[growth["n"] == 120]
    assert not big["bound_exact"].any() and big["best_grid_bound"].isna().all() and big["test_error"].isna().all()
    assert (growth["leading_min"] <= growth["bound"]).all()
    # the fit: an exact power law is recovered, and one subset per size leaves no spread
    fit = growth_fit(table, "binary", "flip 0.2", "complexity")
    assert fit["sizes"] == [60, 120] and fit["b_lo"] <= fit["b"] <= fit["b_hi"]
    exact = table.assign(leading_min=3.0 * table["n"].astype(float) ** -0.5)
    law = growth_fit(exact, "multiclass", "symmetric 0.2", "leading_min", boot=50)
    assert law["b"] == pytest.approx(-0.5, abs=1e-12) and law["n_at_1"] == pytest.approx(9.0, rel=1e-9)
    assert law["b_lo"] == pytest.approx(law["b_hi"], abs=1e-12)
    fig = growth_figure(growth)
    top, bottom = fig.axes
    assert len(top.lines) == 4 and [ln.get_label() for ln in top.lines][0] == "binary, flip 0.2"
    hollow = [ln for ln in bottom.lines if ln.get_markerfacecolor() == "none" and len(ln.get_xdata())]
    assert sorted(int(x) for ln in hollow for x in ln.get_xdata()) == [120, 120, 120]  # beyond the grid: upper
    with pytest.raises(ValueError, match="need positive values at >= 2 sizes"):
        growth_fit(table, "binary", "flip 0.2", "complexity", n_from=100)
    # a size with one subset has nothing to resample: no interval, rather than one that understates the spread
    one = table[(table["n"] != 120) | (table["seed"] == table["seed"].min())]
    fit1 = growth_fit(one, "binary", "flip 0.2", "complexity")
    assert fit1["single"] == [120] and math.isnan(fit1["b_lo"]) and math.isnan(fit1["n_at_1_hi"])
    assert fit1["b"] == pytest.approx(growth_fit(one, "binary", "flip 0.2", "complexity", boot=10)["b"])


def test_the_full_data_claims_hold_on_a_run_and_bite_on_a_changed_one(cache):
    from ntk_core.bookkit.ledger import Ledger
    from ntk_core.bookkit.studies.scaling import full_data_claims, full_data_finding, full_data_lines

    table = _run(binary_sizes=(40, 80, 120)).table
    ledger = Ledger("test")
    growth, numbers = full_data_claims(ledger, table)
    assert {c.status for c in ledger.claims} == {"vacuous"} and len(ledger.claims) == 4  # binary, 2 P, empirical
    assert numbers["binary"]["last"]["n"] == 120 and numbers["binary"]["far"]["sizes"] == [40, 80, 120]
    assert numbers["multiclass, pair-flip 0.2"]["far"] is None  # two sizes: no far-end fit
    lines = full_data_lines(numbers)
    assert len(lines) == 4 and lines[0].startswith("binary: at n = 120, yᵀK⁻¹y / n = ") and "reaches 1 near" in lines[0]
    finding = full_data_finding(numbers)
    assert finding.startswith("Measured on all 120 “5”s and “8”s (Theorem 5.2, the Setting-1 kernel): the leading")
    assert finding.count("Measured") == 4 and finding.endswith("measured, not extrapolated.")
    lead = numbers["binary"]["last"]["leading_min"]
    assert f"the leading terms alone are {lead:.2f}" in finding
    assert "not made yet" in full_data_finding(None)
    with pytest.raises(AssertionError, match="ill-conditioned"):
        full_data_claims(Ledger("test"), table.assign(comp_error=1e-3))
    tiny = table.copy()
    tiny.loc[(tiny["task"] == "binary") & (tiny["n"] == 120), "leading_min"] = 0.5  # a bound that is informative
    with pytest.raises(AssertionError):
        full_data_claims(Ledger("test"), tiny)


def test_a_unit_key_says_whether_it_factors_on_the_grid(cache, monkeypatch):
    """Units on the λ grid and units beyond ``grid_max_n`` run different code: their keys differ by more than
    numbers, so that a replay of one unit of every class replays both."""
    from ntk_core.experiments._record import unit_class
    from ntk_core.experiments._runner import RunContext

    keys = []
    unit = RunContext.unit
    monkeypatch.setattr(RunContext, "unit", lambda self, key, fn: keys.append(key) or unit(self, key, fn))
    _run(grid_max_n=100)
    assert {(k["task"], k["n"], k["grid"]) for k in keys} == {
        ("binary", 60, True),
        ("binary", 120, False),
        ("binary_empirical", 60, True),
        ("multiclass", 60, True),
        ("multiclass", 120, False),
    }
    assert len({unit_class(k) for k in keys}) == 5


def test_the_complexity_ridge_term_is_one_forward_pass_at_lambda_zero_and_bounds_the_exact_one(tmp_path, monkeypatch):
    """``ridge="complexity"`` (the units beyond the grid) reads yᵀK⁻¹y = ‖L⁻¹y‖² for the ridge quadratic: one
    forward pass at λ = 0 for the whole bound (Theorems 5.2 and 5.3), no factor at λ, equal to a float64 solve,
    and a total at least the exact one (the quadratic does not increase with λ)."""
    from ntk_core.kernel_matrix.factored import FactoredKernel, TiledCholesky

    rng = np.random.default_rng(5)
    A = rng.standard_normal((40, 40))
    K = A @ A.T + 40 * np.eye(40)
    y = np.sign(rng.standard_normal(40))
    FK = FactoredKernel(K, tmp_path, tile=16)
    passes = []
    forward = TiledCholesky.forward
    monkeypatch.setattr(TiledCholesky, "forward", lambda self, Y: passes.append(self.lam) or forward(self, Y))
    upper = bounds.theorem_5_2_bound(FK, y, 2.0, 0.2, 0.1, ridge="complexity")
    assert passes == [0.0], "one forward pass at λ = 0, none at λ"
    scale, tau = 0.6, np.sqrt(np.trace(K))
    np.testing.assert_allclose(
        upper.additive.rademacher_signal, 2 * tau / 40 * np.sqrt(scale**2 * y @ np.linalg.solve(K, y)), rtol=1e-12
    )
    exact = bounds.theorem_5_2_bound(K, y, 2.0, 0.2, 0.1)
    assert upper.additive.ridge == "complexity" and exact.additive.ridge == "exact"
    assert upper.total > exact.total
    assert "ridge='complexity'" in str(upper) and "ridge=" not in str(exact)
    assert upper.additive.train_bias == pytest.approx(exact.additive.train_bias, rel=1e-12)
    labels = rng.integers(0, 3, 40)
    P = np.full((3, 3), 0.1) + 0.7 * np.eye(3)
    passes.clear()
    multi = bounds.theorem_5_3_bound(FK, labels, P, 2.0, 0.1, ridge="complexity")
    assert passes == [0.0] and all(o.ridge == "complexity" for o in multi.per_output)
    assert multi.total > bounds.theorem_5_3_bound(K, labels, P, 2.0, 0.1).total
    with pytest.raises(ValueError, match=r"ridge must be one of \('exact', 'complexity'\), got 'upper'"):
        bounds.theorem_5_1_bound(K, y, 1.0, 0.5, 0.1, ridge="upper")


def test_a_unit_beyond_the_grid_passes_over_its_factor_three_times(tmp_path, monkeypatch):
    """Beyond the grid (K + λ²I factored at λ = 0 only, nothing kept in memory: n = 60,000), every label matrix of
    a ten-class unit (both noise models' Qᵀ and the one-hot labels of the conditioning) goes through one forward
    pass, and the error estimate adds a backward and a forward pass: three reads of the factor after it is made,
    the pivots and 1ᵀK1/n reading none."""
    from ntk_core.kernel_matrix import factored
    from ntk_core.kernel_matrix.factored import TiledCholesky

    monkeypatch.setattr(factored, "DEFAULT_KEEP_MEMORY", 0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 12))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = rng.integers(0, 10, 600)
    config = bound_scale.Config(grid_max_n=100, memory_budget=3 * 1024**2)  # tiles of 256: T = 3, 6 tiles
    loads, made = [], []
    load, factor = TiledCholesky._load, TiledCholesky.factor
    monkeypatch.setattr(TiledCholesky, "_load", lambda self, i, j: loads.append((i, j)) or load(self, i, j))

    def factoring(self, **options):
        out = factor(self, **options)
        made.append(len(loads))  # the tile reads up to the end of the factorisation
        return out

    monkeypatch.setattr(TiledCholesky, "factor", factoring)
    test = (x[:50], labels[:50])
    rows = bound_scale._unit(config, "multiclass", x, labels, 0, test, tmp_path / "factors")
    assert len(made) == 1 and {r["lam_kind"] for r in rows} == {"leading"} and not any(r["ridge_exact"] for r in rows)
    after = len(loads) - made[0]
    assert after == 3 * 6, f"{after} tile reads after the factorisation, not three passes over its 6 tiles"
    assert all(r["ridge"] == r["complexity"] for r in rows)  # beyond the grid the ridge term is yᵀK⁻¹y itself
