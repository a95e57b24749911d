"""Which labels are wrong, measured: :mod:`ntk_core.label_errors` against cleanlab on the same model, and what
cleaning the flagged labels buys.

The model throughout is kernel ridge regression (eq. (8), ridge λ²) on a kernel K: what RDI and AUX train in the
NTK regime (Theorem 4.1). Every method's λ is chosen by one protocol on the noisy labels a user has
(:func:`lam_by_leave_one_out`), and the methods are scored against the labels the noise actually changed.

* :func:`cleanlab_scores`: cleanlab's documented recipe (out-of-sample predicted probabilities from K-fold
  cross-validation of the same model, then ``cleanlab.rank.get_label_quality_scores`` and
  ``cleanlab.filter.find_label_issues``); cleanlab is imported only here (a dependency of the book and the
  benchmark, not of the library);
* :func:`ranking_metrics`: average precision, AUROC and precision at the true number of wrong labels;
* :func:`compare_finders`: the leave-one-out and residual scores of :func:`ntk_core.label_errors.from_kernel`
  and cleanlab's, with the seconds each took;
* :func:`ap_difference_se`: the sampling error of a difference of two average precisions on the same labels
  (paired bootstrap over the examples);
* :func:`ap_gain_cell`: that difference and its error for the leave-one-out score against cleanlab's;
* :func:`results_file`: where a benchmark's JSON lies in a project checkout (``benchmarks/results/``);
* :func:`benchmark_summary`: the table of ``benchmarks/bench_label_errors.py --json``, one row per setting;
* :func:`aux_band_summary`: the table of ``benchmarks/bench_label_errors_aux.py --json`` (AUX's variables of
  one network run against cleanlab's folds of the same network, λ over a band), one row per setting and λ;
* :func:`full_run`: ``benchmarks/bench_label_errors_full.py --json`` (all 60,000 MNIST images, out of core);
* :func:`after_cleaning`: the clean test error of the model trained on the noisy labels as given (RDI/AUX's
  predictor), with the flagged examples removed, and with them relabelled to the suggested label.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score
from tqdm import TqdmWarning

from ... import label_errors
from ...krr import krr_predict
from ..sampling import paired_error_se

__all__ = [
    "LAM_GRID",
    "FinderScores",
    "lam_by_leave_one_out",
    "cleanlab_scores",
    "ranking_metrics",
    "compare_finders",
    "ap_difference_se",
    "ap_gain_cell",
    "after_cleaning",
    "cleaning_cells",
    "results_file",
    "benchmark_summary",
    "aux_band_summary",
    "full_run",
]

#: λ² = t · tr K / n for t in this grid: from a kernel that interpolates to one that only averages
LAM_GRID = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
#: the floor of cleanlab's probabilities (KRR outputs are not probabilities: clipped, then normalised)
PROBABILITY_FLOOR = 1e-4


def lam_by_leave_one_out(K: np.ndarray, labels: np.ndarray, grid: tuple[float, ...] = LAM_GRID) -> tuple[float, bool]:
    """The λ of the grid (λ² = t · tr K/n, t in ``grid``) whose exact leave-one-out predictions contradict the
    fewest of ``labels`` (noisy ones: what a user has), and whether it lies at the grid's edge (then the grid does
    not bracket the optimum and the caller should say so)."""
    scale = float(np.trace(K)) / len(K)
    lams = [float(np.sqrt(t * scale)) for t in grid]
    errors = [label_errors.from_kernel(K, labels, lam).n_wrong for lam in lams]
    best = int(np.argmin(errors))
    return lams[best], best in (0, len(lams) - 1)


def cleanlab_scores(
    K: np.ndarray, labels: np.ndarray, lam: float, *, folds: int = 5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """cleanlab's recipe on KRR: out-of-sample outputs from ``folds``-fold cross-validation (``folds`` fits on
    (folds − 1)/folds of the data), turned into probabilities (±1 outputs f: p(+1) = (1 + f)/2; classes: the
    outputs), clipped at :data:`PROBABILITY_FLOOR` and normalised; then cleanlab's self-confidence quality.

    Returns
    -------
    scores : numpy.ndarray, shape (n,)
        1 − cleanlab's label quality (higher: more likely wrong).
    flagged : numpy.ndarray of bool, shape (n,)
        ``cleanlab.filter.find_label_issues``'s set (pruned by its estimated noise rate).
    """
    with warnings.catch_warnings():  # cleanlab imports tqdm.auto, which warns in a notebook without ipywidgets
        warnings.simplefilter("ignore", TqdmWarning)
        from cleanlab.filter import find_label_issues
        from cleanlab.rank import get_label_quality_scores

    Y, classes, binary = label_errors.label_targets(labels)
    n = len(classes)
    out = np.zeros_like(Y)
    for held in np.array_split(np.random.default_rng(seed).permutation(n), folds):
        fit = np.setdiff1d(np.arange(n), held)
        out[held] = krr_predict(K[np.ix_(fit, fit)], Y[fit], lam, K[np.ix_(held, fit)])
    probs = np.hstack([(1 - out) / 2, (1 + out) / 2]) if binary else out
    probs = np.clip(probs, PROBABILITY_FLOOR, None)
    probs /= probs.sum(axis=1, keepdims=True)
    return 1.0 - get_label_quality_scores(classes, probs), np.asarray(find_label_issues(classes, probs))


def ranking_metrics(scores: np.ndarray, wrong: np.ndarray) -> dict[str, float]:
    """Average precision and AUROC of ``scores`` against the wrong labels (``wrong``, bool), and the precision of
    the top k, k the true number of wrong labels (then also the recall there)."""
    wrong = np.asarray(wrong, dtype=bool)
    top = np.argsort(-scores, kind="stable")[: int(wrong.sum())]
    return {
        "ap": float(average_precision_score(wrong, scores)),
        "auroc": float(roc_auc_score(wrong, scores)),
        "precision_at_k": float(wrong[top].mean()),
    }


@dataclass(frozen=True)
class FinderScores:
    """One method's scores of every training label, its metrics against the wrong labels and its seconds."""

    method: str
    scores: np.ndarray
    metrics: dict[str, float]
    seconds: float

    def curve(self, wrong: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(recall, precision) of the ranking, for a precision–recall plot."""
        precision, recall, _ = precision_recall_curve(np.asarray(wrong, dtype=bool), self.scores)
        return recall, precision


def compare_finders(
    K: np.ndarray, labels: np.ndarray, wrong: np.ndarray, lam: float, *, seed: int = 0
) -> list[FinderScores]:
    """The leave-one-out and residual scores of :func:`ntk_core.label_errors.from_kernel` and cleanlab's
    (:func:`cleanlab_scores`), all at the same λ, each with its metrics and the seconds it took."""
    rows = []
    for method, score in (
        ("leave-one-out", lambda: label_errors.from_kernel(K, labels, lam).scores),
        ("residual", lambda: label_errors.from_kernel(K, labels, lam, method="residual").scores),
        ("cleanlab (5 folds)", lambda: cleanlab_scores(K, labels, lam, seed=seed)[0]),
    ):
        start = time.perf_counter()
        scores = score()
        rows.append(FinderScores(method, scores, ranking_metrics(scores, wrong), time.perf_counter() - start))
    return rows


def ap_difference_se(
    scores_a: np.ndarray, scores_b: np.ndarray, wrong: np.ndarray, *, draws: int = 200, seed: int = 0
) -> float:
    """The standard error of AP(a) − AP(b), two rankings of the same labels, by a paired bootstrap: the n examples
    drawn with replacement ``draws`` times, both APs computed on each draw (the labels themselves are the sample)."""
    wrong = np.asarray(wrong, dtype=bool)
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(draws):
        pick = rng.integers(0, len(wrong), len(wrong))
        if wrong[pick].any() and not wrong[pick].all():
            w = wrong[pick]
            diffs.append(average_precision_score(w, scores_a[pick]) - average_precision_score(w, scores_b[pick]))
    return float(np.std(diffs, ddof=1))


def ap_gain_cell(finders: list[FinderScores], wrong: np.ndarray, *, seed: int = 0) -> tuple[float, float]:
    """(AP(leave-one-out) − AP(cleanlab), its paired-bootstrap standard error) of one :func:`compare_finders`."""
    loo, cl = (next(f for f in finders if f.method.startswith(m)) for m in ("leave-one-out", "cleanlab"))
    return loo.metrics["ap"] - cl.metrics["ap"], ap_difference_se(loo.scores, cl.scores, wrong, seed=seed)


def results_file(name: str) -> Path:
    """``benchmarks/results/<name>`` of the project checkout that holds the package; ``FileNotFoundError`` when
    it is not there (an installed package has no benchmarks)."""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / name
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark result {name} in this installation")
    return path


def benchmark_summary(path: str | Path) -> pd.DataFrame:
    """``benchmarks/bench_label_errors.py --json``'s file as a table: one row per (dataset, noise, rate), the mean
    over seeds of each method's average precision, the smallest per-seed AP(leave-one-out) − AP(cleanlab), and on
    how many seeds the chosen λ lay at the grid's edge (the grid then does not bracket it)."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))["rows"]
    out = []
    for row in rows:
        seeds = row["seeds"]
        ap = {m: float(np.mean([s[m]["ap"] for s in seeds])) for m in ("loo", "res", "cl")}
        out.append(
            {
                "dataset": row["dataset"],
                "n": row["n"],
                "noise": row["noise"],
                "rate": row["rate"],
                "seeds": len(seeds),
                "AP leave-one-out": ap["loo"],
                "AP residual": ap["res"],
                "AP cleanlab": ap["cl"],
                "smallest gain over cleanlab": min(s["loo"]["ap"] - s["cl"]["ap"] for s in seeds),
                "λ at the grid's edge": sum(s["t"].endswith("†") for s in seeds),
            }
        )
    return pd.DataFrame(out)


def aux_band_summary(path: str | Path) -> pd.DataFrame:
    """``benchmarks/bench_label_errors_aux.py --json``'s file as a table: one row per (dataset, noise, λ ratio),
    the ratio λ / ‖∇θ f‖₁ at initialisation; the mean over seeds of the average precision of AUX's variables
    (``from_aux``), of the AUX-trained network's own per-example loss and of cleanlab's folds, and on how many
    seeds each of the first two reached cleanlab's."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))
    table = pd.DataFrame(
        {
            "dataset": r["dataset"],
            "noise": r["noise"],
            "λ ratio": r["lam_ratio"],
            "seed": r["seed"],
            **{f"AP {m}": r["metrics"][m]["ap"] for m in ("aux", "loss", "cleanlab")},
        }
        for r in rows
    )
    table["aux ≥ cleanlab"] = table["AP aux"] >= table["AP cleanlab"]
    table["loss ≥ cleanlab"] = table["AP loss"] >= table["AP cleanlab"]
    grouped = table.groupby(["dataset", "noise", "λ ratio"], sort=False)
    out = grouped[["AP aux", "AP loss", "AP cleanlab"]].mean()
    out["seeds"] = grouped.size()
    out["aux ≥ cleanlab"] = grouped["aux ≥ cleanlab"].sum()
    out["loss ≥ cleanlab"] = grouped["loss ≥ cleanlab"].sum()
    return out.reset_index()


def full_run(path: str | Path) -> dict[str, object]:
    """``benchmarks/bench_label_errors_full.py --json``'s file: the finder on all 60,000 MNIST training images,
    its metrics, seconds and the bound study's n = 60,000 unit's seconds beside them."""
    out: dict[str, object] = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = {"n", "flipped", "seconds", "bound_unit_seconds", "full_residual", "subset_scores"} - set(out)
    if missing:
        raise ValueError(f"{path} is not a bench_label_errors_full.py result: it lacks {sorted(missing)}")
    return out


def _mistakes(
    K: np.ndarray, K_test: np.ndarray, labels: np.ndarray, clean_test: np.ndarray, lam: float | None = None
) -> np.ndarray:
    """Which clean test examples KRR trained on ``labels`` gets wrong, λ by :func:`lam_by_leave_one_out` on them
    unless given."""
    if lam is None:
        lam, _ = lam_by_leave_one_out(K, labels)
    Y, _, binary = label_errors.label_targets(labels)
    out = krr_predict(K, Y, lam, K_test).reshape(len(K_test), -1)
    predicted = np.where(out[:, 0] >= 0, 1, -1) if binary else out.argmax(axis=1)
    return np.asarray(predicted != clean_test)


def after_cleaning(
    K: np.ndarray,
    K_test: np.ndarray,
    labels: np.ndarray,
    clean_test: np.ndarray,
    issues: label_errors.LabelIssues,
    lam: float | None = None,
) -> dict[str, np.ndarray]:
    """Which clean test examples KRR gets wrong (λ re-chosen on each training set's own labels, as a user would)
    trained on

    * ``"as given"``: the noisy labels (what RDI and AUX train to, Theorem 4.1);
    * ``"flagged removed"``: without the ``issues.n_wrong`` most suspicious examples;
    * ``"flagged relabelled"``: those examples given ``issues.suggested``.

    The mean of each array is that model's clean test error; :func:`cleaning_cells` pairs them. ``lam``: the λ
    already chosen on ``labels`` (:func:`lam_by_leave_one_out`), to not choose it again for ``"as given"``.
    """
    if issues.suggested is None:
        raise ValueError(
            "relabelling needs the issues' suggested labels: score with from_kernel, or from_aux with outputs"
        )
    flagged = issues.flagged
    keep = np.setdiff1d(np.arange(len(labels)), flagged)
    relabelled = np.asarray(labels).copy()
    relabelled[flagged] = issues.suggested[flagged]
    return {
        "as given": _mistakes(K, K_test, labels, clean_test, lam),
        "flagged removed": _mistakes(K[np.ix_(keep, keep)], K_test[:, keep], labels[keep], clean_test),
        "flagged relabelled": _mistakes(K, K_test, relabelled, clean_test),
    }


def cleaning_cells(mistakes: dict[str, np.ndarray], cleaned: str) -> tuple[float, float]:
    """(error as given − error of ``cleaned``, its standard error) on the same test examples: the difference of
    two error rates, whose variance is at most their disagreement rate over n (``sampling.paired_error_se``)."""
    a, b = mistakes["as given"], mistakes[cleaned]
    return float(a.mean() - b.mean()), paired_error_se(float(a.mean()), float(b.mean()), len(a), float(np.mean(a != b)))
