"""Each exhibit's key numbers in one line, for its row of *Results at a glance* and its verdict box.

One function per exhibit, each reading the numbers its chapter already computed for the claims
(:mod:`ntk_core.bookkit.claims`), so that the headline and the verdict rest on the same numbers. Differences are
in percentage points, paired by seed, with their standard error over the seeds.
"""

from __future__ import annotations

import pandas as pd

__all__ = [
    "figure_1a",
    "figure_2",
    "figure_4",
    "figure_5",
    "figures_3_6_8",
    "section_6_2",
    "table_2",
    "figure_1b",
    "table_1",
    "points",
]


def points(stats: dict, sign: str = "+") -> str:
    """A paired difference in points: mean ± its standard error over the seeds (``stats``: ``paired_stats``).

    Examples
    --------
    >>> points({"mean": 0.0278, "sem": 0.0106, "seeds": 3})
    '+2.8 ± 1.1 points (3 seeds)'
    """
    k = stats["seeds"]
    spread = f" ± {100 * stats['sem']:.1f}" if k > 1 else ""
    mean = f"{100 * stats['mean']:{sign}.1f}".replace("-", "−")
    return f"{mean}{spread} points ({k} seed{'s' if k != 1 else ''})"


def _signed(x: float) -> str:
    """A signed number with a true minus sign: ``+1.5``, ``−0.1``."""
    return f"{x:+.1f}".replace("-", "−")


def figure_1a(q: dict) -> str:
    """Figure 1a (:func:`ntk_core.bookkit.claims.figure_1a`'s numbers): the test errors at the largest noise level,
    and the smallest margin of RDI and AUX over vanilla GD at any noise level."""
    level, margin = min(
        ((lv, min(r["GD"] - r["GD+RDI"], r["GD"] - r["GD+AUX"])) for lv, r in q["by_noise"].items()),
        key=lambda x: x[1],
    )
    return (
        f"test error at noise {q['noise']:.0%}: GD {q['GD']:.1%}, GD+ES {q['GD+ES']:.1%}, GD+RDI {q['GD+RDI']:.1%}, "
        f"GD+AUX {q['GD+AUX']:.1%}; smallest margin over GD {_signed(100 * margin)} points (noise {level:.0%})"
    )


def figure_4(q: dict) -> str:
    """Figure 4 (:func:`ntk_core.bookkit.claims.figure_4`'s numbers): the test error at α = 0 and 1/2."""
    return f"test error {q['first']:.2%} at α = 0, {q['last']:.2%} at α = 1/2: {points(q['effect'])} lower"


def table_2(trend: pd.DataFrame) -> str:
    """Table 2 (:func:`ntk_core.bookkit.claims.table_2`): each factor's Spearman ρ with the distance, and the
    relative spread of the two that should not matter."""
    t = trend.set_index("factor")
    names = {"samples": "samples", "noise": "noise", "lam": "λ", "width": "width", "lr": "learning rate"}
    trends = ", ".join(
        f"{names.get(f, f)} {t.loc[f, 'spearman']:+.2f}" for f in ("samples", "noise", "lam") if f in t.index
    )
    flat = ", ".join(f"{names.get(f, f)} {t.loc[f, 'relative_spread']:.1%}" for f in ("width", "lr") if f in t.index)
    return f"Spearman ρ: {trends}; spread: {flat}"


def figure_1b(q: dict) -> str:
    """Figure 1b (:func:`ntk_core.bookkit.claims.figure_1b`'s numbers): each method's margin over vanilla SGD."""
    lam = q["SGD+AUX"]["lam"]
    return (
        f"SGD − method at noise {q['noise']:.0%}: AUX (λ = {lam:g}) {points(q['SGD+AUX'])}, RDI {points(q['SGD+RDI'])}, "
        f"ES {points(q['SGD+ES'])}; SGD's test error {q['test']['SGD']:.1%}"
    )


def _per_loss(q: dict, part: str) -> str:
    """One paired difference of :func:`ntk_core.bookkit.claims.table_1_numbers` for each loss, by its name."""
    return "; ".join(f"{loss} {points(c[part])}" for loss, c in q["losses"].items())


def table_1(q: dict) -> str:
    """Table 1 (:func:`ntk_core.bookkit.claims.table_1_numbers`): AUX's last epoch minus normal training's
    early-stopped one, per loss."""
    return f"AUX (last) − normal (early stop) at noise {q['noise']:.0%}: {_per_loss(q, 'gain')}"


def figure_2(q: dict) -> str:
    """Figure 2 (:func:`ntk_core.bookkit.claims.table_1_numbers`): how much normal training loses from its
    early-stopped epoch to its last, and how much less AUX loses, per loss."""
    over, less = _per_loss(q, "overfit"), _per_loss(q, "less_overfit")
    return f"normal training's early stop − last epoch at noise {q['noise']:.0%}: {over}; AUX loses less by: {less}"


def figure_5(out: dict) -> str:
    """Figure 5 (:func:`ntk_core.bookkit.claims.check_figure_5`'s result): ‖θ − θ(0)‖ at the ends of the λ grid."""
    parts = [
        f"{m} {out[m]['dist'][0]:.3g} → {out[m]['dist'][-1]:.3g}" for m in ("RDI", "AUX") if m in out and out[m]["dist"]
    ]
    lams = out["RDI"]["lams"]
    return f"‖θ − θ(0)‖ from λ = {lams[0]:g} to {lams[-1]:g}: " + ", ".join(parts)


def figures_3_6_8(ends: pd.DataFrame) -> str:
    """Figures 3, 6–8 (:func:`ntk_core.experiments.setting2.weight_figure_ends`): the largest distance of a tracked
    layer to its initialisation, relative to its initial norm, per method."""
    return "largest movement of a tracked layer, relative to its initial norm: " + ", ".join(
        f"{m} {ends[m].max():.1%}" for m in ("SGD", "SGD+RDI", "SGD+AUX") if m in ends
    )


def section_6_2(drift: dict[str, tuple[float, float]]) -> str:
    """Section 6.2: the relative kernel drift at the end of training, least–largest, per setting."""
    return "kernel drift (relative, on the probe): " + "; ".join(
        f"{name} {lo:.2f}–{hi:.2f}" for name, (lo, hi) in drift.items()
    )
