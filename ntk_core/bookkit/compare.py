"""Quick, medium and the paper side by side: what the experiment chapters show for every figure and table.

The live ``quick`` run, the recorded ``medium`` run (``results/medium/``, see
``ntk_core/experiments/_record.py``) and the paper's own numbers go in one table, and the reader is told where
each number comes from: :func:`medium` loads a record (``None`` when there is none yet), :func:`record_line`
says in one line what the record is (or how to make it), :func:`side_by_side` joins per-scale summaries, and
:func:`config_table` shows a run's configuration as a small readable table rather than a hash. Across the
experiments, :func:`regime_gains` sets how far each regularised run leaves the NTK regime beside what it gains
over vanilla training, and :func:`regime_ranges` how far the runs of each experiment leave it.
"""

from __future__ import annotations

import dataclasses
import math
import json
import re
from typing import Any

import numpy as np
import pandas as pd

from ..experiments import RecordMissing, Result, recorded, records_root, refresh_command, units_in_progress

__all__ = [
    "medium",
    "trials",
    "record_line",
    "stale_note",
    "record_state",
    "side_by_side",
    "config_table",
    "run_details",
    "as_percent",
    "paired_text",
    "half_range_text",
    "regime_gains",
    "regime_ranges",
    "regime_display",
    "REGIME_COLUMNS",
    "test_images",
    "scale_text",
    "headline",
]

#: the NTK-regime columns of the experiments' tables (``experiments._shared.REGIME_COLUMNS``), as a table names them
REGIME_COLUMNS = {
    "kernel_drift_quarter": "kernel drift at ¼",
    "kernel_drift_half": "at ½",
    "kernel_drift": "at the end",
    "movement": "weights moved",
    "lin_agreement": "agreement with linearised",
    "lin_test_error": "linearised test error",
}

# readable names of config fields, for config_table (fields not listed keep their own name)
_FIELD_NAMES = {
    "n_train": "training images",
    "n_val": "validation images",
    "n_test": "test images (0: the whole split)",
    "width": "width",
    "pool": "average pooling (factor)",
    "noise_levels": "noise levels p",
    "noise": "noise level p",
    "lams": "λ grid",
    "lam": "λ",
    "steps": "GD steps",
    "lr_scale": "learning rate × (‖K‖ + λ²)",
    "lr": "learning rate",
    "eval_every": "evaluated every",
    "seeds": "seeds",
    "device": "device",
    "alphas": "α grid",
    "depth": "depth",
    "channels": "channels",
    "epochs": "epochs",
    "batch_size": "batch size",
    "samples_grid": "samples grid",
    "noise_grid": "noise grid",
    "width_grid": "width grid",
    "lam_grid": "λ grid (RDI)",
    "lr_grid": "learning-rate scales",
    "blocks": "ResNet blocks per stage",
    "losses": "losses",
    "lr_milestones": "learning-rate decay after epochs",
    "aux_weight_decay": "AUX weight decay",
    "augment": "augmentation",
    "curve_lam": "λ of the learning curves",
    "clean_lams": "λ on clean labels",
}
_HIDDEN = {"profile", "download", "spectrum", "relu_gain", "difference_trick"}


#: a data set's line as :meth:`ntk_core.data.ImageDataset.describe` and :meth:`ntk_core.data.BinaryTask.describe`
#: write it: "MNIST test: 10,000 images from …" and "'5' (+1, 892) vs '8' (-1, 974) cut from MNIST test: …"
_WHOLE_SPLIT = re.compile(r"^\S+ (?P<split>train|test): (?P<n>[\d,]+) images ")
_TWO_CLASSES = re.compile(
    r"^'.*' \(\+1, (?P<a>[\d,]+)\) vs '.*' \(-1, (?P<b>[\d,]+)\) cut from \S+ (?P<split>train|test): "
)


def test_images(result: Result | dict[str, Any]) -> int:
    """The number of test images a result's test errors were measured on: the config's ``n_test`` where it keeps a
    sample, else the size of the test split its ``meta["data"]`` names (the split actually loaded: 1,866 images of
    "5" vs "8" in MNIST, 200 in the embedded subset). The verdicts scale with it
    (:mod:`ntk_core.bookkit.sampling`)."""
    meta = result if isinstance(result, dict) else result.meta
    n_test = int(meta.get("config", {}).get("n_test") or 0)
    if n_test:
        return n_test
    sizes = []
    for line in meta.get("data", []):
        whole, two = _WHOLE_SPLIT.match(line), _TWO_CLASSES.match(line)
        if two is not None and two["split"] == "test":
            sizes.append(int(two["a"].replace(",", "")) + int(two["b"].replace(",", "")))
        elif two is None and whole is not None and whole["split"] == "test":
            sizes.append(int(whole["n"].replace(",", "")))
    if len(sizes) != 1:
        raise ValueError(
            f"expected the description of one test split in the result's data, found {len(sizes)}: {meta.get('data')}"
        )
    return sizes[0]


def scale_text(result: Result | dict[str, Any], data: str = "") -> str:
    """A result's scale in one line, for an exhibit's headline: its training and test images (``data`` names
    them, "MNIST 5 vs 8"), the network's size and the seeds, from its configuration.

    Examples
    --------
    >>> meta = {"config": {"n_train": 1000, "n_test": 500, "width": 1000, "seeds": [0, 1, 2], "pool": 2}}
    >>> scale_text(meta, "MNIST 5 vs 8")
    'MNIST 5 vs 8: 1,000 training / 500 test images (pooled 2×2), width 1,000, 3 seeds'
    """
    meta = result if isinstance(result, dict) else result.meta
    cfg = meta.get("config", {})
    parts = []
    if cfg.get("n_train"):
        try:
            images = f"{int(cfg['n_train']):,} training / {test_images(meta):,} test images"
        except ValueError:
            images = f"{int(cfg['n_train']):,} training images"
        if cfg.get("pool"):
            images += f" (pooled {cfg['pool']}×{cfg['pool']})"
        parts.append(f"{data}: {images}" if data else images)
    elif data:
        parts.append(data)
    if cfg.get("depth") and cfg.get("channels"):
        parts.append(f"{cfg['depth']} layers × {cfg['channels']} channels")
    elif cfg.get("width"):
        parts.append(f"width {int(cfg['width']):,}")
    seeds = len(cfg.get("seeds", [])) or 1
    parts.append(f"{seeds} seed{'s' if seeds != 1 else ''}")
    return ", ".join(parts)


def headline(ledger: Any, ref: str, result: Result | dict[str, Any], measured: str, *, data: str, sure: str,
             anchor: str) -> None:  # fmt: skip
    """``ledger.headline`` for an exhibit measured on ``result``: its scale from :func:`scale_text`."""
    ledger.headline(ref, measured=measured, scale=scale_text(result, data), sure=sure, anchor=anchor)


def medium(name: str) -> Result | None:
    """The recorded ``medium`` result of experiment ``name``, or ``None`` when it has not been recorded yet."""
    try:
        return recorded(name, "medium")
    except RecordMissing:
        return None


def trials(name: str) -> dict | None:
    """The trials that sized a medium profile, ``results/trials/<name>.json`` (written by the script beside it), or
    None where the checkout has no such file (an installed package has no ``results/``)."""
    try:
        path = records_root() / "trials" / f"{name}.json"
    except RecordMissing:
        return None
    return json.loads(path.read_text()) if path.is_file() else None


def divergence_line(gone: pd.DataFrame, runs: int) -> str:
    """One clause on the training runs that diverged (``experiments.setting3.divergences``' rows), grouped by
    loss, method and λ: how many runs of each, at which noise levels and in which epochs; ``runs`` is the number
    of runs that did not diverge."""
    if gone.empty:
        return f"no run diverged ({runs} runs)"
    parts = []
    for (loss, aux, lam), g in gone.groupby(["loss", "aux", "lam"], dropna=False, sort=True):
        what = f"{loss}+AUX at λ = {lam:g}" if aux else f"normal {loss}"
        epochs = (
            f"epoch {g['epoch'].min()}"
            if g["epoch"].nunique() == 1
            else (f"epochs {g['epoch'].min()}–{g['epoch'].max()}")
        )
        noise = ", ".join(f"{p:.0%}" for p in sorted(g["noise"].unique()))
        parts.append(f"{what}: {len(g)} run(s), noise {noise}, {epochs}")
    return (
        f"{len(gone)} of {len(gone) + runs} runs diverged (a mini-batch loss not finite; each counted with "
        f"validation error 1, so never chosen over a run that trained): " + "; ".join(parts)
    )


def _duration(meta: dict) -> str:
    """How long a record took: its units' compute time in all (which neither parallel workers nor a recording
    resumed over several sessions change), and the wall time of the command that wrote it where that differs."""
    wall = float(meta.get("wall_time_s", 0.0))
    units = meta.get("unit_seconds_total")

    def span(seconds: float) -> str:
        if seconds >= 5400:
            return f"{seconds / 3600:.1f} h"
        return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"

    if units is None or abs(float(units) - wall) < 0.1 * max(wall, 60.0):
        return span(wall)
    return f"{span(float(units))} of unit compute ({span(wall)} wall for the command that wrote it)"


def record_line(name: str, result: Result | None) -> str:
    """One line for the reader: what the medium record is (when, on what, how long), or how to make it.

    A stale record (its configuration changed since it was recorded) says so, and gives the command that
    refreshes it. A current one is current because it replays: ``make test`` replays one unit of every unit
    class and its canary bit for bit, so a change of the code that moved a recorded number would fail there.
    """
    if result is None:
        try:
            units = units_in_progress(name, "medium")
        except RecordMissing:  # an installed package: no records at all
            units = 0
        if units:
            return (
                f"medium ({name}): being recorded, {units} units finished so far (kept in the record's unit store); "
                f"the same command resumes it: `{refresh_command(name, 'medium')}`"
            )
        return f"medium ({name}): not recorded yet; record it with `{refresh_command(name, 'medium')}`"
    m = result.meta
    machine = m.get("machine", {})
    when = str(m.get("recorded_at", "?"))[:10]
    line = (
        f"{m.get('profile', 'medium')} ({name}): recorded {when} on {machine.get('cpu_count', '?')} CPU core(s) "
        f"({machine.get('torch_threads', '?')} torch thread(s)), {_duration(m)}, "
        f"{m.get('units', '?')} units"
    )
    if m.get("stale"):
        line += f"; STALE ({'; '.join(m['stale_reasons'])}): refresh with `{m['refresh']}`"
    else:
        line += "; current (this build's configuration; its units and canary replay bit for bit in `make test`)"
    return line


def stale_note(result: Result | None) -> str:
    """The words that go before any verdict read from a medium record in the prose: ``""`` for a current record
    (or none), and for a stale one (its configuration changed since it was recorded) a warning that its
    verdicts count for nothing until it is re-recorded (the ledger marks its claims ``stale`` likewise:
    :meth:`~ntk_core.bookkit.ledger.Ledger.on_record`)."""
    if result is None or not result.meta.get("stale"):
        return ""
    return "STALE record (its configuration changed; these verdicts count for nothing until it is re-recorded): "


def record_state(result: Result | None) -> str:
    """``"current"``, ``"STALE"`` or ``"not recorded"``: a medium record's state in one word, for a table column."""
    if result is None:
        return "not recorded"
    return "STALE" if result.meta.get("stale") else "current"


def side_by_side(
    quick: pd.DataFrame,
    medium: pd.DataFrame | None,
    on: list[str],
    value: str,
    paper: pd.DataFrame | None = None,
    paper_value: str = "paper",
) -> pd.DataFrame:
    """One row per key ``on``: the ``value`` column of the quick summary, of the medium one and the paper's.

    Parameters
    ----------
    quick, medium : DataFrame
        Summaries with the key columns ``on`` and a column ``value``; ``medium`` may be ``None`` (no record):
        its column is then empty.
    on : list of str
        Key columns (for example ``["noise", "method"]``).
    value : str
        The column to compare.
    paper : DataFrame, optional
        The paper's numbers with the key columns and ``paper_value``.

    Returns
    -------
    DataFrame
        Columns ``on + ["quick", "medium"]`` (+ ``"paper"``), keys in the order of ``quick``, a key only the
        medium summary has placed after the key that precedes it there (so that a longer medium grid keeps
        its order).
    """
    missing = [c for c in [*on, value] if c not in quick.columns]
    if missing:
        raise ValueError(f"the quick summary has no column(s) {missing}")
    out = quick[[*on, value]].rename(columns={value: "quick"})
    if medium is not None:
        if any(c not in medium.columns for c in [*on, value]):
            raise ValueError(f"the medium summary needs the columns {[*on, value]}")
        out = out.merge(medium[[*on, value]].rename(columns={value: "medium"}), on=on, how="outer", sort=False)
        out = out.iloc[_merged_order(out, quick, medium, on)]  # an outer merge sorts its keys: undo that
    else:
        out = out.assign(medium=float("nan"))
    if paper is not None:
        out = out.merge(paper[[*on, paper_value]].rename(columns={paper_value: "paper"}), on=on, how="left", sort=False)
    return out.reset_index(drop=True)


def _merged_order(out: pd.DataFrame, first: pd.DataFrame, second: pd.DataFrame, on: list[str]) -> list[int]:
    """Row positions of ``out`` in the order of ``first``'s keys, with ``second``'s other keys inserted after
    the key that precedes them in ``second``."""
    keys = lambda frame: list(frame[on].itertuples(index=False, name=None))  # noqa: E731
    order = list(dict.fromkeys(keys(first)))
    previous = None
    for key in keys(second):
        if key not in order:
            order.insert(0 if previous is None else order.index(previous) + 1, key)
        previous = key
    rank = {key: i for i, key in enumerate(order)}
    out_keys = keys(out)
    return sorted(range(len(out)), key=lambda i: rank[out_keys[i]])


def config_table(result: Result | Any) -> pd.DataFrame:
    """A run's configuration as rows (parameter, value), with readable names, for the top of a chapter."""
    config = result.meta["config"] if isinstance(result, Result) else result
    if not isinstance(config, dict):
        config = dataclasses.asdict(config)
    rows = []
    for key, val in config.items():
        if key in _HIDDEN:
            continue
        if isinstance(val, (list, tuple)):
            text = ", ".join(
                f"{v:,}" if isinstance(v, int) else f"{v:g}" if isinstance(v, float) else str(v) for v in val
            )
        elif isinstance(val, bool):
            text = "yes" if val else "no"
        elif isinstance(val, int):
            text = f"{val:,}"
        elif isinstance(val, float):
            text = f"{val:g}"
        else:
            text = str(val)
        rows.append({"parameter": _FIELD_NAMES.get(key, key.replace("_", " ")), "value": text})
    return pd.DataFrame(rows)


def run_details(result: Result) -> None:
    """Show a run's provenance (its summary: experiment, device, seeds, data, wall time; and its configuration)
    folded under one "Run details" line, so that it is there for whoever checks and out of the reading flow."""
    from html import escape

    from IPython.display import display

    table = config_table(result)
    rows = "".join(
        f"<tr><td>{escape(str(r.parameter))}</td><td>{escape(str(r.value))}</td></tr>" for r in table.itertuples()
    )
    m = result.meta
    html = (
        f'<details class="run-details"><summary>Run details: {escape(m["experiment"])}, {escape(m["profile"])} '
        f"profile, {m['wall_time_s']:.0f} s</summary><pre>{escape(result.summary())}</pre>"
        f"<table><thead><tr><th>parameter</th><th>value</th></tr></thead><tbody>{rows}</tbody></table></details>"
    )
    display({"text/html": html, "text/plain": result.summary()}, raw=True)


def as_percent(frame: pd.DataFrame, columns: list[str], digits: int = 1) -> pd.DataFrame:
    """A copy of ``frame`` with ``columns`` (fractions) written as percentages, "—" where missing."""
    out = frame.copy()
    for column in columns:
        out[column] = [f"{100 * v:.{digits}f} %" if pd.notna(v) else "—" for v in out[column]]
    return out


def paired_text(stats: dict[str, Any], digits: int = 1) -> str:
    """A paired difference of fractions (:func:`ntk_core.experiments._shared.paired_stats`) in percentage points for
    a reader: "+1.2 ± 0.5" (mean ± standard error over the seeds), or "+1.2 (one seed)" where one seed leaves no
    standard error.

    Examples
    --------
    >>> paired_text({"mean": 0.012, "sem": 0.005, "seeds": 3}), paired_text({"mean": -0.02, "sem": float("nan"), "seeds": 1})
    ('+1.2 ± 0.5', '-2.0 (one seed)')
    """
    mean = f"{100 * stats['mean']:+.{digits}f}"
    return f"{mean} ± {100 * stats['sem']:.{digits}f}" if math.isfinite(stats["sem"]) else f"{mean} (one seed)"


def half_range_text(differences: Any, digits: int = 1) -> str:
    """Per-seed differences of fractions in percentage points for a reader: "+1.2 ± 0.5" (mean ± half the range
    over the seeds), or "+1.2 (one seed)".

    Examples
    --------
    >>> half_range_text([0.01, 0.02]), half_range_text([0.068])
    ('+1.5 ± 0.5', '+6.8 (one seed)')
    """
    d = np.asarray(differences, dtype=float).ravel()
    mean = f"{100 * d.mean():+.{digits}f}"
    return f"{mean} ± {100 * np.ptp(d) / 2:.{digits}f}" if d.size > 1 else f"{mean} (one seed)"


def regime_display(frame: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """A regime table (the columns :data:`REGIME_COLUMNS`, ``lam``, ``lin_diverged``, ``lin_step`` where present) for a
    narrow page: drifts to ``digits`` decimals, movement, agreement and test error as percentages, λ as given,
    and short headers ("lin." is the linearised network)."""
    out = as_percent(frame, [c for c in ("movement", "lin_agreement", "lin_test_error") if c in frame], digits=0)
    for column in ("kernel_drift_quarter", "kernel_drift_half", "kernel_drift", "lin_step"):
        if column in out:
            out[column] = [f"{v:.{digits}f}" for v in out[column]]
    if "lam" in out:
        out["lam"] = [f"{v:g}" for v in out["lam"]]
    short = {
        "lam": "λ",
        "kernel_drift_quarter": "kernel drift ¼",
        "kernel_drift_half": "½",
        "kernel_drift": "end",
        "movement": "moved",
        "lin_agreement": "agrees with lin.",
        "lin_test_error": "lin. test error",
        "lin_diverged": "lin. diverged",
        "lin_step": "lin. step",
    }
    return out.rename(columns=short)


def lam_choices_display(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`ntk_core.experiments.setting3.lam_choices` written for a page: noise as a percentage, the λ of each
    seed as a list, "k of n" seeds bracketed, readable headers."""
    lams = lambda values: ", ".join(f"{v:g}" for v in values)  # noqa: E731
    return pd.DataFrame(
        {
            "noise p": [f"{p:.0%}" for p in frame["noise"]],
            "method": frame["method"],
            "λ by seed (noisy validation)": frame["lam"].map(lams),
            "λ by seed (oracle)": frame["lam_oracle"].map(lams),
            "grid brackets it": [f"{b} of {n}" for b, n in zip(frame["bracketed"], frame["seeds"])],
        }
    )


def regime_gains(table: pd.DataFrame, vanilla: str, methods: list[str]) -> pd.DataFrame:
    """How far each regularised run leaves the NTK regime, beside what it gains over vanilla training.

    ``table`` holds one row per training run (``seed``, ``noise``, ``method``, ``lam``, ``test_error`` and the
    regime columns :data:`REGIME_COLUMNS`); ``vanilla`` names the unregularised method (its rows have λ = 0) and
    ``methods`` the regularised ones. Returns one row per (noise, method, λ) of ``methods`` at noise > 0 and of
    ``vanilla``: the regime columns averaged over the seeds, and ``gain``, the mean over seeds of vanilla's test
    error minus the method's at the same seed and noise (positive: the method ends lower; 0 for ``vanilla``).
    """
    runs = table[table["method"].isin([vanilla, *methods]) & (table["noise"] > 0)]
    base = runs[runs["method"] == vanilla].set_index(["seed", "noise"])["test_error"]
    if base.index.has_duplicates:
        raise ValueError(f"{vanilla} must have one run per (seed, noise); found repeated ones")
    missing = runs.set_index(["seed", "noise"]).index.difference(base.index)
    if len(missing):
        raise ValueError(f"no {vanilla} run for (seed, noise) {sorted(missing)[:3]}: the gain needs one")
    runs = runs.assign(
        gain=base.reindex(pd.MultiIndex.from_frame(runs[["seed", "noise"]])).to_numpy() - runs["test_error"]
    )
    columns = [c for c in REGIME_COLUMNS if c in runs.columns] + ["gain", "test_error"]
    out = runs.groupby(["noise", "method", "lam"])[columns].mean()
    return out.join(runs.groupby(["noise", "method", "lam"]).size().rename("seeds")).reset_index()


def regime_ranges(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """How far the runs of each experiment leave the NTK regime: per named table of training runs (rows with
    ``kernel_drift``), the number of runs and the least and largest kernel drift at the end, weight movement and
    agreement with the linearised network (over the runs whose linearisation converged; ``lin_diverged`` counts
    the others, where the table has that column). An experiment that trains no linearisation (no
    ``lin_agreement`` column) has NaN agreement and ``lin_diverged``."""
    out = []
    for name, runs in tables.items():
        runs = runs.dropna(subset=["kernel_drift"])
        row: dict = {"experiment": name, "runs": len(runs)}
        for column in ("kernel_drift", "movement", "lin_agreement"):
            values = runs[column] if column in runs else pd.Series(dtype=float)
            row[f"{column}_min"], row[f"{column}_max"] = float(values.min()), float(values.max())
        if "lin_agreement" not in runs:
            row["lin_diverged"] = math.nan
        else:
            row["lin_diverged"] = int(runs["lin_diverged"].astype(bool).sum()) if "lin_diverged" in runs else 0
        out.append(row)
    return pd.DataFrame(out)
