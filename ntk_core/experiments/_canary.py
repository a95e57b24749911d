"""Canaries: each record's configuration shrunk to seconds, recorded with the record and replayed bit for bit.

A record is current because it replays. The replays of ``make test`` re-run one unit of every unit class (or its
first epochs); what they cannot reach — a late epoch, a learning-rate decay, the rows an experiment computes beside
its units (Setting 1's kernel ridge regression, a selection protocol, a table) — the canary does: the record's own
configuration with its sizes shrunk (:data:`SHRINK`), so that it runs the same code paths (every method, loss, kind
of λ, schedule, regime measure and table) in a few seconds, computed whole and compared with ``canary.csv`` byte
for byte. A change of the code that moves any of those numbers fails ``make test``; a change that moves none
needs nothing.

The canary is written beside the record (``canary.csv``, its SHA-256, config and arithmetic in the sealed
provenance): by :func:`~ntk_core.experiments.record` with every record, or by :func:`record_canary` for a record
made before canaries (once; it never writes over one unless told to). It is computed in its own arithmetic, the
pins of :data:`~ntk_core.experiments._arithmetic.PINS` (MKL's ``COMPATIBLE`` branch), so that it replays bit for
bit on Intel and AMD CPUs alike, whatever the arithmetic of the record's units.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from .. import _store
from . import _record

__all__ = ["SHRINK", "canary_config", "record_canary", "check_canary", "CanaryMissing"]


def _ends(values: Any) -> tuple[Any, ...]:
    """The smallest and the largest of a grid (every kind of grid point a record's grid has at its two ends)."""
    ordered = sorted(values)
    return tuple(dict.fromkeys((ordered[0], ordered[-1])))


#: per experiment: the fields of the record's config that the canary replaces, as values or as functions of the
#: record's config; the fields not named (methods, losses, noise levels, schedules' shape, scales) stay as recorded
SHRINK: dict[str, dict[str, Any]] = {
    "setting1": dict(
        n_train=60, n_val=30, n_test=60, n_probe=16, width=32, steps=30, eval_every=5, seeds=(0,),
        lams=lambda c: _ends(c.lams), noise_levels=lambda c: _ends(c.noise_levels),
    ),
    "setting2": dict(
        n_train=40, n_val=20, n_test=40, n_probe=16, depth=4, channels=4, epochs=4, eval_every=1, batch_size=10,
        seeds=(0,), lams=lambda c: tuple(sorted({*_ends(c.lams), c.curve_lam, *c.clean_lams})),
    ),
    "setting3": dict(
        n_train=64, n_val=32, n_test=64, n_probe=16, width=4, epochs=4, batch_size=32, seeds=(0,),
        lr_milestones=lambda c: (2, 3)[: len(c.lr_milestones)], lam_grid=lambda c: _ends(c.lam_grid),
    ),
    "distance": dict(
        n_train=40, n_probe=16, width=32, steps=20, seeds=(0,), samples_grid=(20, 40),
        noise_grid=lambda c: tuple(sorted({*_ends(c.noise_grid), c.noise})), width_grid=(32, 64),
        lam_grid=lambda c: tuple(sorted({*_ends(c.lam_grid), c.lam})),
        lr_grid=lambda c: _ends(c.lr_grid),
    ),
    "difference_trick": dict(
        n_train=60, n_test=60, n_probe=16, width=32, steps=20, seeds=(0,), alphas=lambda c: _ends(c.alphas),
    ),
    "bound_scale": dict(
        binary_sizes=(60, 120), multiclass_sizes=(60, 120, 180), empirical_n=60, width=64, n_test=100,
        seeds=(0, 1), lams=lambda c: _ends(c.lams), grid_max_n=60, one_subset_above=120,
        memory_budget=1 << 20,
    ),
}  # fmt: skip


class CanaryMissing(FileNotFoundError):
    """The record has no canary yet (made before canaries): :func:`record_canary` adds one."""


def canary_config(name: str, config: Any) -> Any:
    """The canary of a record's ``config``: its fields of :data:`SHRINK` replaced (functions applied to ``config``)."""
    if name not in SHRINK:
        raise ValueError(f"no canary is defined for experiment {name!r}; experiments with one: {sorted(SHRINK)}")
    unknown = set(SHRINK[name]) - {f.name for f in dataclasses.fields(config)}
    if unknown:
        raise ValueError(f"SHRINK[{name!r}] names fields its Config does not have: {sorted(unknown)}")
    changes = {k: (v(config) if callable(v) else v) for k, v in SHRINK[name].items()}
    return dataclasses.replace(config, **changes)


def record_canary(
    name: str,
    profile: str = "medium",
    *,
    root: str | os.PathLike[str] | None = None,
    replace: bool = False,
) -> float:
    """Add its canary to a record made before canaries: compute it in this process's arithmetic (the command
    ``replay NAME --canary --record`` starts in :data:`~ntk_core.experiments._arithmetic.PINS`), write
    ``canary.csv`` and describe it in the sealed provenance (:func:`_record.add_canary`). Returns the canary's
    compute seconds.

    ``replace=True`` records a canary again over the record's own, for a record whose canary was made in another
    arithmetic (check first that the old one still replays: ``python -m ntk_core replay NAME --canary``; a
    canary made with the current code in the current pins is the same bytes).

    Raises ``FileExistsError`` when the record has a canary already and ``replace`` is false (a record and its
    canary are made together by :func:`~ntk_core.experiments.record`) and
    """
    folder = _record.record_dir(name, profile, root)
    with _store.file_lock(folder / "provenance.lock"):
        provenance = _record._provenance(folder, name, profile)
        if ("canary" in provenance or (folder / "canary.csv").exists()) and not replace:
            raise FileExistsError(
                f"the {name} record has a canary already ({folder / 'canary.csv'}): a canary is made with its record "
                f"and never written over; `python -m ntk_core replay {name} --canary` checks it"
            )
        canary = canary_config(name, _record._config_from(name, provenance))
        seconds = _record.add_canary(folder, provenance, name, canary)
        _record._write_provenance(folder / "provenance.json", provenance)
    return seconds


def check_canary(name: str, profile: str = "medium", *, root: str | os.PathLike[str] | None = None) -> list[str]:
    """Differences between the record's ``canary.csv`` and the canary the current code computes (``[]``: none),
    byte for byte. Raises :class:`CanaryMissing` when the record has none,
    :class:`~ntk_core.experiments._record.ArithmeticDiffers` when this process does not compute in the canary's
    arithmetic, ``ValueError`` when ``canary.csv`` was edited."""
    folder = _record.record_dir(name, profile, root)
    provenance = _record._provenance(folder, name, profile)
    if "canary" not in provenance:
        raise CanaryMissing(
            f"the {name} record has no canary (made before canaries): `python -m ntk_core replay {name} --canary "
            f"--record` adds one"
        )
    recorded_bytes = _record._read_verified(folder, "canary.csv", provenance)
    canary = canary_config(name, _record._config_from(name, provenance))
    if _record._jsonable(canary) != provenance["canary"].get("config"):
        return [
            "the canary's configuration (SHRINK) changed since it was recorded: "
            f"{json.dumps(provenance['canary'].get('config'), sort_keys=True)} then, "
            f"{json.dumps(_record._jsonable(canary), sort_keys=True)} now: record the experiment again"
        ]
    rtol = _record.require_arithmetic(name, provenance["canary"])
    fresh, _ = _record.compute_fresh(name, provenance, canary)
    return _record.table_differences(recorded_bytes, fresh, rtol=rtol)
