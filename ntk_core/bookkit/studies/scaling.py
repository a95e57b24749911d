r"""Power-law fits of measured curves (how a bound's terms grow with n), and the growth of the bounds measured
up to the full data (:mod:`ntk_core.experiments.bound_scale`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..._checks import as_float64_array
from ..._typing import ArrayLike

__all__ = [
    "COMPLEXITY_RTOL",
    "GROWTH_COLUMNS",
    "bound_growth",
    "full_data_claims",
    "full_data_finding",
    "full_data_lines",
    "growth_fit",
    "magnitude",
    "loglog_slope",
    "record_cost",
]


def loglog_slope(x: ArrayLike, y: ArrayLike) -> float:
    """Least-squares slope of log y against log x (x, y > 0).

    Parameters
    ----------
    x, y : ArrayLike, shape (k,)
        Positive values.

    Returns
    -------
    float

    Examples
    --------
    >>> from ntk_core.bookkit.studies import loglog_slope
    >>> round(loglog_slope([1, 10, 100], [1.0, 0.316227766, 0.1]), 6)   # y ∝ x^(-1/2)
    -0.5
    """
    xx, yy = as_float64_array(x, "x", ndim=1), as_float64_array(y, "y", ndim=1)
    if xx.shape != yy.shape or xx.size < 2 or np.any(xx <= 0) or np.any(yy <= 0):
        raise ValueError("x and y must be positive 1-D arrays of equal length >= 2")
    return float(np.polyfit(np.log(xx), np.log(yy), 1)[0])


#: The columns of :func:`bound_growth`, one row per (task, noise model, n).
GROWTH_COLUMNS = (
    "task",
    "noise",
    "n",
    "subsets",
    "complexity",
    "complexity / n",
    "leading_min",
    "bound",
    "bound_exact",
    "best_grid_bound",
    "test_error",
    "kappa_lower",
    "comp_error",
)


def bound_growth(table: pd.DataFrame) -> pd.DataFrame:
    """The growth of a bound's terms with n, from a table of :mod:`ntk_core.experiments.bound_scale`.

    One row per (task, noise model, n), means over the subsets: the complexity yᵀK⁻¹y (for Theorem 5.3 the sum
    over outputs) and its ratio to n, the leading terms' minimum over λ (a lower bound on the bound at every λ),
    the bound at the leading λ* (``bound_exact`` False: its ridge term bounded by the complexity, an upper bound),
    the smallest bound over the λ grid where there is one, KRR's clean test error at λ*, and the worst
    conditioning over the subsets (the smallest lower bound on the condition number; the largest estimated
    relative error of yᵀK⁻¹y).
    """
    star = table[table["lam_kind"] == "leading"]
    grid = table[table["lam_kind"] == "grid"].groupby(["task", "noise", "n", "seed"])["total"].min()
    rows = []
    for (task, noise, n), part in star.groupby(["task", "noise", "n"], sort=True):
        best = grid.loc[task, noise, n] if (task, noise, n) in grid.index.droplevel("seed") else None
        rows.append(
            {
                "task": task,
                "noise": noise,
                "n": int(n),
                "subsets": len(part),
                "complexity": float(part["complexity"].mean()),
                "complexity / n": float((part["complexity"] / part["n"]).mean()),
                "leading_min": float(part["leading_min"].mean()),
                "bound": float(part["total"].mean()),
                "bound_exact": bool(part["ridge_exact"].all()),
                "best_grid_bound": float(best.mean()) if best is not None else math.nan,
                "test_error": float(part["test_error"].mean()),
                "kappa_lower": float(part["kappa_lower"].min()),
                "comp_error": float(part["comp_error"].max()),
            }
        )
    return pd.DataFrame(rows, columns=list(GROWTH_COLUMNS))


def growth_fit(
    table: pd.DataFrame,
    task: str,
    noise: str,
    column: str,
    *,
    n_from: int = 0,
    n_to: float = math.inf,
    boot: int = 2000,
    seed: int = 0,
) -> dict:
    """Fit ``column ≈ c nᵇ`` (least squares in log-log) over the sizes ``n_from ≤ n ≤ n_to`` of one (task, noise model)
    of a :mod:`~ntk_core.experiments.bound_scale` table, at the leading λ*, with a bootstrap over the subsets.

    Each bootstrap replicate resamples, at every size, its subsets with replacement, averages the log of
    ``column`` per size and fits the line. A size with one subset (the full data) has nothing to resample, and a
    bootstrap that kept it fixed would understate the fit's uncertainty: where the range has one, the quantiles
    below are NaN (no interval) and ``single`` lists such sizes. Returns ``b``, ``c``
    (the fit of the means of the logs), ``b_lo``, ``b_hi`` (the 2.5 and 97.5 % quantiles of b), ``sizes``, and,
    for a decreasing column (b < 0), ``n_at_1``: where the fit reaches 1, ``(1/c)^(1/b)``, with its quantiles
    ``n_at_1_lo``, ``n_at_1_hi`` (``inf`` in a replicate whose b ≥ 0).

    Examples
    --------
    >>> import pandas as pd
    >>> rows = [{"task": "binary", "noise": "flip 0.2", "lam_kind": "leading", "n": n, "seed": s,
    ...          "leading_min": 4.0 * n ** -0.25 * (1 + 0.01 * s)} for n in (100, 400, 1600) for s in (0, 1)]
    >>> fit = growth_fit(pd.DataFrame(rows), "binary", "flip 0.2", "leading_min", boot=200)
    >>> round(fit["b"], 3), f"{fit['n_at_1']:.0f}"
    (-0.25, '261')
    """
    part = table[(table["task"] == task) & (table["noise"] == noise) & (table["lam_kind"] == "leading")]
    part = part[(part["n"] >= n_from) & (part["n"] <= n_to)]
    logs = {int(n): np.log(g[column].to_numpy(dtype=float)) for n, g in part.groupby("n")}
    if len(logs) < 2 or any(not np.all(np.isfinite(v)) for v in logs.values()):
        raise ValueError(f"{column} of {task}, {noise}: need positive values at >= 2 sizes from n = {n_from}")
    sizes = np.array(sorted(logs))
    x = np.log(sizes)

    def fit(means: np.ndarray) -> tuple[float, float]:
        b, log_c = np.polyfit(x, means, 1)
        return float(b), float(np.exp(log_c))

    def at_1(b: float, c: float) -> float:
        log_n = -math.log(c) / b if b < 0 else math.inf
        return math.exp(log_n) if log_n < 700.0 else math.inf  # beyond e^700: never, for any data set

    b, c = fit(np.array([logs[n].mean() for n in sizes]))
    rng = np.random.default_rng(seed)
    reps = np.array(
        [fit(np.array([rng.choice(logs[n], size=len(logs[n])).mean() for n in sizes])) for _ in range(boot)]
    )
    crossings = np.array([at_1(bb, cc) for bb, cc in reps])
    single = [int(n) for n in sizes if len(logs[n]) < 2]
    nan = float("nan")
    return {
        "b": b,
        "c": c,
        "b_lo": nan if single else float(np.quantile(reps[:, 0], 0.025)),
        "b_hi": nan if single else float(np.quantile(reps[:, 0], 0.975)),
        "sizes": [int(n) for n in sizes],
        "single": single,
        "n_at_1": at_1(b, c),
        "n_at_1_lo": nan if single else float(np.quantile(crossings, 0.025, method="lower")),  # some may be inf
        "n_at_1_hi": nan if single else float(np.quantile(crossings, 0.975, method="higher")),
    }


def magnitude(n: float) -> str:
    """An extrapolated size as its order of magnitude, without false digits ("10^24"), or "never" for ``inf``.

    Examples
    --------
    >>> magnitude(4.9e24), magnitude(float("inf"))
    ('10^25', 'never')
    """
    return "never" if not math.isfinite(n) else f"10^{math.log10(n):.0f}"


def _interval(lo: float, hi: float, fmt: Any = "{:.2f}".format) -> str:
    return "" if math.isnan(lo) else f" [{fmt(lo)}, {fmt(hi)}]"


#: The largest estimated relative error of yᵀK⁻¹y that the full-data verdicts accept (a premise: the complexity
#: is measured, not a rounding artefact of an ill-conditioned K).
COMPLEXITY_RTOL = 1e-6


def full_data_claims(ledger: Any, table: pd.DataFrame, anchor: str = "ti-full") -> tuple[pd.DataFrame, dict]:
    """Check the tightness chapter's findings on a :mod:`~ntk_core.experiments.bound_scale` table, into ``ledger``.

    Premise (raises ``AssertionError``): at every n, yᵀK⁻¹y is accurate to :data:`COMPLEXITY_RTOL`
    (``comp_error``, one step of iterative refinement). Then, for binary (Theorem 5.2) and for ten classes
    (Theorem 5.3, every noise model): at the largest n measured the leading terms alone exceed 1 (status
    ``vacuous``: the bound is above the trivial value at every λ), with the bound at λ* and the measured test
    error as values; and the growth of the complexity (the exponent a of yᵀK⁻¹y ≈ C₀nᵃ over the whole range,
    with its bootstrap interval) and the n where the leading terms' fit over the far end of the range (the
    three largest sizes) reaches 1.

    Returns the :func:`bound_growth` table and the numbers the chapter's prose quotes, keyed by task (and
    noise model for ten classes).
    """
    growth = bound_growth(table)
    worst = float(growth["comp_error"].max())
    assert worst < COMPLEXITY_RTOL, f"yᵀK⁻¹y is measured to {worst:.1e} only: K too ill-conditioned to judge"
    numbers: dict[str, dict] = {}
    refs = {"binary": "Theorem 5.2", "multiclass": "Theorem 5.3", "binary_empirical": "Theorem 5.2"}
    for (task, noise), rows in growth.groupby(["task", "noise"], sort=False):
        last = rows.sort_values("n").iloc[-1]
        sizes = sorted(rows["n"])
        # the exponent over the sizes with several subsets (something to resample), its interval from them; the
        # local exponent between the two largest sizes beside it (a power law need not hold over the range)
        resampled = [n for n in sizes if int(rows.loc[rows["n"] == n, "subsets"].iloc[0]) > 1]
        whole = growth_fit(table, task, noise, "complexity", n_to=resampled[-1]) if len(resampled) >= 2 else None
        if whole is not None:
            top = rows.sort_values("n").tail(2)
            whole["local"] = float(loglog_slope(top["n"], top["complexity / n"] * top["n"]))
            whole["local_sizes"] = [int(v) for v in top["n"]]
        far = growth_fit(table, task, noise, "leading_min", n_from=sizes[-3]) if len(sizes) >= 3 else None
        key = task if task != "multiclass" else f"{task}, {noise}"
        numbers[key] = {"last": last.to_dict(), "whole": whole, "far": far}
        kernel = "the empirical NTK of Setting 1's network" if task == "binary_empirical" else "the Setting-1 kernel"
        bound = f"{last['bound']:.2f}" + ("" if last["bound_exact"] else " (an upper bound: its ridge term by yᵀK⁻¹y)")
        value = (
            f"leading terms ≥ {last['leading_min']:.2f} at n = {int(last['n']):,}; bound at λ* {bound}; "
            f"yᵀK⁻¹y/n = {last['complexity / n']:.2f}"
        )
        if not math.isnan(last["test_error"]):
            value += f"; measured clean test error {last['test_error']:.3f}"
        if whole is not None:
            value += f"; a = {whole['b']:.2f}{_interval(whole['b_lo'], whole['b_hi'])} over n = "
            value += f"{whole['sizes'][0]:,}–{whole['sizes'][-1]:,}, {whole['local']:.2f} between the two largest n"
        ledger.check(
            refs[task],
            f"measured ({task.replace('_', ' ')}, {noise}, {kernel}): at the largest n the data has, the explicit "
            "bound's leading terms alone exceed 1, so the bound is above the trivial value at every λ",
            last["leading_min"] > 1,
            status="vacuous",
            value=value,
            anchor=anchor,
        )
    return growth, numbers


def full_data_lines(numbers: dict) -> list[str]:
    """One line per (task, noise model) of :func:`full_data_claims`' numbers for the reader: the largest n, the
    complexity's ratio to n and its exponent over the whole range, and where the fit of the leading terms over
    the far end of the range reaches 1 (with their bootstrap intervals)."""
    lines = []
    for key, num in numbers.items():
        last, whole, far = num["last"], num["whole"], num["far"]
        line = f"{key}: at n = {int(last['n']):,}, yᵀK⁻¹y / n = {last['complexity / n']:.2f}"
        if whole is not None:
            line += (
                f"; yᵀK⁻¹y ∝ n^{whole['b']:.2f}{_interval(whole['b_lo'], whole['b_hi'])} over n = "
                f"{whole['sizes'][0]:,}–{whole['sizes'][-1]:,} (several subsets each), n^{whole['local']:.2f} between "
                f"n = {whole['local_sizes'][0]:,} and {whole['local_sizes'][1]:,}"
            )
        if far is not None:
            line += f"; {_far_text(far)}"
        lines.append(line)
    return lines


def _far_text(far: dict) -> str:
    """Where the fit of the leading terms over the largest sizes reaches 1: an order of magnitude, with its
    bootstrap interval only where every size of the fit has several subsets."""
    text = f"the leading terms' fit over n ≥ {far['sizes'][0]:,} reaches 1 near n ≈ {magnitude(far['n_at_1'])}"
    if far["single"]:
        one = " and ".join(f"{n:,}" for n in far["single"])
        each = "has one subset" if len(far["single"]) == 1 else "have one subset each"
        return text + f" (no interval: n = {one} {each}, nothing to resample)"
    return text + _interval(far["n_at_1_lo"], far["n_at_1_hi"], magnitude)


def full_data_finding(numbers: dict | None) -> str:
    """The chapter's finding restated from what was measured at the largest n (:func:`full_data_claims`' numbers;
    ``None``: no record yet, and the finding rests on the extrapolation alone): per task and noise model the
    leading terms' minimum over λ, the bound at λ* and, where K + λ²I was factored there, the measured clean test
    error, and where the fit of the leading terms over the largest sizes reaches 1 (Markdown)."""
    if numbers is None:
        return "The `bound_scale` medium record is not made yet, so the finding above rests on the extrapolation alone."
    what = {
        "binary": "on all {n} “5”s and “8”s (Theorem 5.2, the Setting-1 kernel)",
        "binary_empirical": "with the empirical NTK of Setting 1's network on the same {n} images (Theorem 5.2)",
        "multiclass": "with ten classes on {n} training images, {noise} (Theorem 5.3)",
    }
    sentences = []
    for key, num in numbers.items():
        last, far = num["last"], num["far"]
        task = "multiclass" if key.startswith("multiclass") else key
        where = what[task].format(n=f"{int(last['n']):,}", noise=last["noise"])
        bound = ("" if last["bound_exact"] else "at most ") + f"{last['bound']:.2f}"
        text = f"Measured {where}: the leading terms alone are {last['leading_min']:.2f}, the bound at λ* {bound}"
        if not math.isnan(last["test_error"]):
            text += f", against a clean test error of {last['test_error']:.3f}"
        if far is not None:
            text += f"; {_far_text(far)}"
        sentences.append(text + ".")
    vacuous = all(num["last"]["leading_min"] > 1 for num in numbers.values())
    verdict = (
        "At the full size of the data the explicit bounds are above the trivial value 1 at every λ: measured, "
        "not extrapolated."
        if vacuous
        else "At the full size of the data some bound falls below the trivial value 1 (see the checks)."
    )
    return " ".join(sentences + [verdict])


def growth_figure(growth: pd.DataFrame) -> Any:
    """Two panels from a :func:`bound_growth` table, against n (log axes): yᵀK⁻¹y / n per task and noise model;
    and, per task and noise model, the leading terms' minimum over λ (a lower bound on the bound at every λ,
    solid), the bound at λ* (dashed; hollow markers where its ridge term is bounded by yᵀK⁻¹y, an upper bound)
    and the measured clean test error (dotted), with the trivial value 1. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.2, 9.0))
    for i, ((task, noise), rows) in enumerate(growth.groupby(["task", "noise"], sort=False)):
        rows = rows.sort_values("n")
        color, label = f"C{i}", f"{task.replace('_', ' ')}, {noise}"
        top.plot(rows["n"], rows["complexity / n"], "o-", color=color, label=label)
        bottom.plot(rows["n"], rows["leading_min"], "o-", color=color, label=label)
        exact = rows["bound_exact"].to_numpy()
        bottom.plot(rows["n"], rows["bound"], "--", color=color)
        bottom.plot(rows["n"][exact], rows["bound"][exact], "s", color=color)
        bottom.plot(rows["n"][~exact], rows["bound"][~exact], "s", color=color, markerfacecolor="none")
        if rows["test_error"].notna().any():
            bottom.plot(rows["n"], rows["test_error"], ":", marker=".", color=color)
    sizes = sorted(set(growth["n"]))
    for ax in (top, bottom):
        ax.set_xscale("log")
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes], rotation=45, ha="right")
        ax.minorticks_off()
    top.set(xlabel="training set size $n$", ylabel=r"$y^\top K^{-1} y \,/\, n$")
    top.legend(fontsize=9)
    bottom.axhline(1.0, color="grey", lw=1)
    bottom.set(yscale="log", xlabel="training set size $n$", ylabel="bound on the clean error")
    bottom.set_title("solid: leading terms (a lower bound); dashed: the bound at λ*; dotted: measured", fontsize=9)
    fig.tight_layout()
    return fig


def record_cost(seconds: pd.DataFrame) -> str:
    """What a ``bound_scale`` record's units cost, in a line for the reader: their computing time in all and that
    of the largest unit, from :func:`ntk_core.experiments.unit_seconds` (a unit resumed without its time is
    counted as missing, never as zero).

    Examples
    --------
    >>> import pandas as pd
    >>> units = pd.DataFrame({"task": ["binary", "multiclass"], "n": [1000, 60000], "seconds": [30.0, 3570.0]})
    >>> print(record_cost(units))
    the record's 2 units took 1.0 h of computing; its largest (multiclass, n = 60,000) took 60 minutes of it
    """
    total = float(np.nansum(seconds["seconds"].to_numpy(dtype=float)))
    largest = seconds.loc[seconds["n"].idxmax()]
    missing = int(seconds["seconds"].isna().sum())
    text = f"the record's {len(seconds)} units took {total / 3600:.1f} h of computing"
    if missing:
        text += f" ({missing} of them resumed without their time)"
    return text + (
        f"; its largest ({largest['task']}, n = {int(largest['n']):,}) took {largest['seconds'] / 60:.0f} minutes of it"
    )
