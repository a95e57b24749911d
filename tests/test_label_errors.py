"""Which labels are wrong: the scores of ``ntk_core.label_errors`` against independent computations (the
leave-one-out prediction by refitting without each example; the residual by a dense solve) and against planted
flips (a wrong sign or a dropped leave-one-out denominator fails here)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from ntk_core import label_errors
from ntk_core.infinite import setting1_kernel
from ntk_core.noise import corrupt, flip_binary, symmetric_transition
from ntk_core.train import TrainConfig, train


def _problem(n: int = 300, seed: int = 0, p: float = 0.15):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    clean = np.where(x[:, 0] + 0.3 * x[:, 1] > 0, 1.0, -1.0)
    noisy = flip_binary(clean, p, seed=seed, exact=True)
    return x, setting1_kernel(x), clean, noisy


def _loo_by_refitting(K: np.ndarray, Y: np.ndarray, lam: float) -> np.ndarray:
    """f₋ᵢ(xᵢ) for every i, each from a fit without example i (n solves: the independent route)."""
    n = len(K)
    out = np.empty(Y.shape)
    for i in range(n):
        keep = np.arange(n) != i
        alpha = np.linalg.solve(K[np.ix_(keep, keep)] + lam**2 * np.eye(n - 1), Y[keep])
        out[i] = K[i, keep] @ alpha
    return out


def test_the_leave_one_out_score_is_the_prediction_of_the_other_examples():
    _, K, _, noisy = _problem(n=60)
    lam = 0.7
    issues = label_errors.from_kernel(K, noisy, lam)
    np.testing.assert_allclose(issues.scores, -noisy * _loo_by_refitting(K, noisy, lam), rtol=1e-8, atol=1e-10)
    fit = K @ np.linalg.solve(K + lam**2 * np.eye(60), noisy)
    residual = label_errors.from_kernel(K, noisy, lam, method="residual")
    np.testing.assert_allclose(residual.scores, -noisy * fit, rtol=1e-9, atol=1e-12)
    # classes: the best other class's leave-one-out output minus the given class's
    classes = np.random.default_rng(1).integers(0, 3, size=60)
    loo = _loo_by_refitting(K, np.eye(3)[classes], lam)
    given = loo[np.arange(60), classes]
    loo[np.arange(60), classes] = -np.inf
    np.testing.assert_allclose(
        label_errors.from_kernel(K, classes, lam).scores, loo.max(axis=1) - given, rtol=1e-8, atol=1e-10
    )
    # the suggested label is the leave-one-out prediction's: its sign, its argmax
    refit = _loo_by_refitting(K, noisy, lam)
    np.testing.assert_array_equal(issues.suggested, np.where(refit >= 0, 1, -1))
    loo = _loo_by_refitting(K, np.eye(3)[classes], lam)
    np.testing.assert_array_equal(label_errors.from_kernel(K, classes, lam).suggested, loo.argmax(axis=1))
    np.testing.assert_array_equal(residual.suggested, np.where(fit >= 0, 1, -1))


def test_the_kernel_scores_find_planted_flips():
    """15 % of the labels flipped: the leave-one-out score ranks them first (AUROC well above chance), the
    flagged examples are mostly flipped ones, and the estimate of how many is near the truth."""
    _, K, clean, noisy = _problem()
    flipped = noisy != clean
    issues = label_errors.from_kernel(K, noisy, 0.5)
    assert roc_auc_score(flipped, issues.scores) > 0.9
    assert flipped[issues.top(int(flipped.sum()))].mean() > 3 * flipped.mean()  # precision at the true count
    assert abs(issues.n_wrong - flipped.sum()) < 0.5 * flipped.sum() and issues.n_wrong_source == "estimated"
    known = label_errors.from_kernel(K, noisy, 0.5, flip_rate=0.15)
    assert known.n_wrong == 45 and known.n_wrong_source == "flip rate"
    assert str(known).startswith("45 of 300 labels likely wrong (flip rate; score: leave-one-out)")


def test_a_kernel_on_disk_gives_the_residual_score(tmp_path):
    _, K, _, noisy = _problem(n=80)
    np.save(tmp_path / "K.npy", K)
    on_disk = label_errors.from_kernel(str(tmp_path / "K.npy"), noisy, 0.5, method="residual")
    in_memory = label_errors.from_kernel(K, noisy, 0.5, method="residual")
    np.testing.assert_allclose(on_disk.scores, in_memory.scores, rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="leave-one-out score needs the diagonal"):
        label_errors.from_kernel(str(tmp_path / "K.npy"), noisy, 0.5)


def test_aux_variables_find_planted_flips():
    """A network trained with AUX on labels with 20 % flips: ỹᵢbᵢ ranks the flipped labels first (measured AUROC
    0.998); the count from the network's own outputs is near the truth (44 for 40); classes too, with bᵢ[ỹᵢ]
    against the example's other entries (0.999)."""
    torch.manual_seed(0)
    x = torch.randn(200, 2)
    clean = torch.where(x[:, 0] > 0, 1.0, -1.0)
    noisy = torch.as_tensor(flip_binary(clean.numpy(), 0.2, seed=0, exact=True)).float()
    flipped = (noisy != clean).numpy()
    model = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    result = train(model, x, noisy, TrainConfig(method="aux", lam=1.0, lr=0.002, epochs=300))
    with torch.no_grad():
        outputs = model(x).squeeze(-1)
    issues = label_errors.from_aux(result.aux, noisy, outputs=outputs)
    assert roc_auc_score(flipped, issues.scores) > 0.95
    assert abs(issues.n_wrong - flipped.sum()) <= 0.25 * flipped.sum() and issues.n_wrong_source == "estimated"
    np.testing.assert_array_equal(issues.suggested, np.where(outputs.numpy() >= 0, 1, -1))
    # three classes, the given class's variable against the others'
    classes = torch.as_tensor((x[:, 0] > 0).long() + (x[:, 1] > 0.5).long())
    P = symmetric_transition(3, 0.2)
    given = torch.as_tensor(corrupt(classes.numpy(), P, seed=0))
    wrong = (given != classes).numpy()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3))
    result = train(model, x, given, TrainConfig(method="aux", lam=1.0, loss="ce", lr=0.002, epochs=300))
    issues = label_errors.from_aux(result.aux, given, transition=P)
    assert roc_auc_score(wrong, issues.scores) > 0.95 and issues.n_wrong_source == "transition matrix"
    assert issues.suggested is None  # no outputs: nothing to suggest


def test_bad_input_is_named():
    _, K, _, noisy = _problem(n=20)
    with pytest.raises(ValueError, match="20 entries, K is 10 x 10"):
        label_errors.from_kernel(K[:10, :10], noisy, 0.5)
    with pytest.raises(ValueError, match="'leave-one-out' or 'residual'"):
        label_errors.from_kernel(K, noisy, 0.5, method="loo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        label_errors.expected_wrong(noisy, flip_rate=0.1, transition=np.eye(2))
    with pytest.raises(ValueError, match="give outputs .* or the noise process"):
        label_errors.from_aux(np.zeros((20, 3)), np.arange(20) % 3)
    with pytest.raises(ValueError, match="goes with ±1 labels"):
        label_errors.from_aux(np.zeros(20), np.arange(20) % 3, flip_rate=0.1)
    with pytest.raises(TypeError, match="class indices"):
        label_errors.from_kernel(K, np.linspace(0, 1, 20), 0.5)


def test_the_command_ranks_the_labels_of_a_kernel_file(tmp_path, capsys):
    from ntk_core.__main__ import main

    _, K, clean, noisy = _problem()
    np.save(tmp_path / "K.npy", K)
    np.save(tmp_path / "y.npy", noisy.astype(float))
    args = ["label-errors", "--kernel", str(tmp_path / "K.npy"), "--labels", str(tmp_path / "y.npy"), "--lam", "0.5"]
    assert main([*args, "--flip-rate", "0.15", "--top", "3", "--json", str(tmp_path / "le.json")]) == 0
    out = capsys.readouterr().out
    expected = label_errors.from_kernel(K, noisy, 0.5, flip_rate=0.15)
    assert out.startswith(str(expected)) and f"example {int(expected.ranking[0]):>7}" in out
    import json

    found = json.loads((tmp_path / "le.json").read_text())
    assert found["ranking"] == expected.ranking.tolist() and found["n_wrong"] == 45
    assert found["suggested"] == expected.suggested.tolist()
    top = int(expected.ranking[0])
    assert f"label {noisy[top]:g}  suggested {expected.suggested[top]:g}" in out
    assert main([*args, "--json", str(tmp_path / "y.npy")]) == 2  # never over an input
    assert "is also --labels" in capsys.readouterr().err
    assert main([*args, "--method", "residual", "--noise", "symmetric:0.2", "--top", "0"]) == 2  # ±1 labels
    assert main([*args, "--lam", "-1"]) == 2


# --------------------------------------------------------------------------- the book's study of the finder


def test_lambda_by_leave_one_out_counts_what_refitting_counts():
    """The grid's λ with the fewest labels contradicted by their leave-one-out prediction, each prediction from a
    refit without the example (the independent route); the edge flag where the grid's end wins."""
    from ntk_core.bookkit.studies import label_errors as finder

    _, K, _, noisy = _problem(n=50, p=0.2)
    grid = (0.01, 0.3, 10.0, 1000.0)
    scale = np.trace(K) / len(K)
    counts = [int(np.sum(noisy * _loo_by_refitting(K, noisy, np.sqrt(t * scale)) < 0)) for t in grid]
    lam, edge = finder.lam_by_leave_one_out(K, noisy, grid)
    assert lam == pytest.approx(np.sqrt(grid[int(np.argmin(counts))] * scale))
    assert edge == (int(np.argmin(counts)) in (0, len(grid) - 1))


def test_the_finders_and_cleaning_on_planted_flips():
    """On 15 % planted flips every finder ranks far above chance, cleanlab's recipe is run as documented (its
    flagged set mostly flipped labels), and the cleaned models are the ones scikit-learn's kernel ridge regression
    fits on the kept or relabelled examples (an independent solver; the λ chosen on those labels)."""
    from ntk_core.bookkit.studies import label_errors as finder

    x, K, clean, noisy = _problem(n=300, seed=2)
    wrong = noisy != clean
    lam, _ = finder.lam_by_leave_one_out(K, noisy)
    rows = finder.compare_finders(K, noisy, wrong, lam)
    assert [r.method for r in rows] == ["leave-one-out", "residual", "cleanlab (5 folds)"]
    assert all(r.metrics["ap"] > 3 * wrong.mean() and r.metrics["auroc"] > 0.85 for r in rows), rows
    _, flagged = finder.cleanlab_scores(K, noisy, lam)
    assert wrong[flagged].mean() > 0.5
    rng = np.random.default_rng(5)
    x_test = rng.normal(size=(400, 8))
    x_test /= np.linalg.norm(x_test, axis=1, keepdims=True)
    y_test = np.where(x_test[:, 0] + 0.3 * x_test[:, 1] > 0, 1, -1)
    issues = label_errors.from_kernel(K, noisy, lam, flip_rate=0.15)
    mistakes = finder.after_cleaning(K, setting1_kernel(x_test, x), noisy, y_test, issues)
    from sklearn.kernel_ridge import KernelRidge

    K_test = setting1_kernel(x_test, x)
    keep = np.setdiff1d(np.arange(300), issues.flagged)
    relabelled = noisy.copy()
    relabelled[issues.flagged] = issues.suggested[issues.flagged]
    for name, rows_, labels in (
        ("flagged removed", keep, noisy[keep]),
        ("flagged relabelled", np.arange(300), relabelled),
    ):
        lam_c, _ = finder.lam_by_leave_one_out(K[np.ix_(rows_, rows_)], labels)
        ridge = KernelRidge(alpha=lam_c**2, kernel="precomputed").fit(K[np.ix_(rows_, rows_)], labels)
        np.testing.assert_array_equal(mistakes[name], np.where(ridge.predict(K_test[:, rows_]) >= 0, 1, -1) != y_test)
    assert not np.array_equal(mistakes["flagged removed"], mistakes["as given"])
    diff, se = finder.cleaning_cells(mistakes, "flagged removed")
    a, b = mistakes["as given"], mistakes["flagged removed"]
    assert diff == pytest.approx(a.mean() - b.mean()) and se == pytest.approx(np.sqrt(np.mean(a != b) / len(a)))
    # the bootstrap error of an AP difference: zero for a ranking against itself, positive against another
    assert finder.ap_difference_se(rows[0].scores, rows[0].scores, wrong) == 0.0
    assert 0 < finder.ap_difference_se(rows[0].scores, rows[2].scores, wrong) < 0.1


def test_the_benchmark_writes_a_table_the_chapter_reads_and_never_overwrites(tmp_path, monkeypatch):
    import importlib.util
    from pathlib import Path

    from ntk_core.bookkit.studies import label_errors as finder

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_label_errors.py"
    spec = importlib.util.spec_from_file_location("bench_label_errors", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "le.json"
    bench.main(["--n", "200", "--seeds", "0", "--rates", "0.2", "--datasets", "digits", "--json", str(out)])
    table = finder.benchmark_summary(out)
    assert list(table["noise"]) == ["symmetric", "pair-flip"] and (table["n"] == 200).all()
    assert ((table["AP leave-one-out"] > 0.5) & (table["AP cleanlab"] <= 1)).all()
    with pytest.raises(SystemExit):  # an existing file is refused, not written over
        bench.main(["--n", "200", "--seeds", "0", "--datasets", "digits", "--json", str(out)])


def _load_benchmark(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_aux_benchmark_writes_a_band_the_chapter_reads(tmp_path):
    from ntk_core.bookkit.studies import label_errors as finder

    bench = _load_benchmark("bench_label_errors_aux")
    out = tmp_path / "aux.json"
    args = ["--n", "200", "--seeds", "0", "--epochs", "2", "--lam-ratio", "0.3", "3", "--datasets", "digits"]
    bench.main([*args, "--json", str(out)])
    band = finder.aux_band_summary(out)
    assert list(band["noise"]) == ["symmetric", "symmetric", "pair-flip", "pair-flip"]
    assert list(band["λ ratio"]) == [0.3, 3.0, 0.3, 3.0] and (band["seeds"] == 1).all()
    # one seed: the count is whether AUX's AP reached cleanlab's on it
    assert list(band["aux ≥ cleanlab"]) == list((band["AP aux"] >= band["AP cleanlab"]).astype(int))
    assert ((band["AP cleanlab"] > 0) & (band["AP cleanlab"] <= 1)).all()
    with pytest.raises(SystemExit):  # an existing file is refused, not written over
        bench.main([*args, "--json", str(out)])


def test_the_full_benchmark_writes_a_run_the_chapter_reads(tmp_path, capsys):
    import json

    from ntk_core.bookkit.studies import label_errors as finder

    bench = _load_benchmark("bench_label_errors_full")
    out = tmp_path / "full.json"
    bench.main(["--n", "600", "--subset", "300", "--dir", str(tmp_path / "factor"), "--json", str(out)])
    run = finder.full_run(out)
    assert run["n"] == 600 and run["flipped"] > 60 and run["seconds"] > 0
    assert 0.5 < run["full_residual"]["ap"] <= 1 and set(run["subset_scores"]) == {"leave-one-out", "residual"}
    assert "residual" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--n", "600", "--subset", "300", "--dir", str(tmp_path / "factor"), "--json", str(out)])
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"n": 600, "rows": []}))
    with pytest.raises(ValueError, match="lacks"):
        finder.full_run(other)


def test_a_missing_benchmark_result_is_named():
    from ntk_core.bookkit.studies import label_errors as finder

    assert finder.results_file("label_errors.json").name == "label_errors.json"
    with pytest.raises(FileNotFoundError, match="no_such.json"):
        finder.results_file("no_such.json")
