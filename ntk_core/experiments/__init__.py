"""The paper's experiments as code: one module each, its ``Config`` (quick/medium/full) and ``compute``; :func:`run` -> ``Result``.

=====================  ==========================================================
``setting1``           Figure 1a: MNIST "5" vs "8", two-layer net, GD / ES / RDI / AUX / KRR vs noise
``setting2``           Figures 1b, 5 and 3, 6–8: CIFAR airplane vs automobile, CNN, SGD / AUX / RDI, λ sweep
``setting3``           Table 1 and Figure 2: CIFAR-10, ResNet-34, CCE / MSE with and without AUX
``distance``           Table 2: distance to initialisation (per-layer curves, Figures 3, 6–8: ``setting2``)
``difference_trick``   Figure 4: test error vs the mixing coefficient α (Appendix A)
=====================  ==========================================================

Run one from Python (``ntk_core.experiments.run("setting1", profile="quick")``)
or from the shell (``python -m ntk_core run setting1 --profile quick``).

The ``medium`` profile is run once and recorded in the repository
(``python -m ntk_core run setting1 --profile medium --record`` writes
``results/medium/setting1/``); :func:`recorded` loads such a record and
``python -m ntk_core show setting1 --profile medium`` prints it (see
``ntk_core/experiments/_record.py``).
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType
from typing import Any

from .profile import PROFILES
from ._runner import Result, run_experiment
from ._shared import check_one_row_per_seed, memorised_fraction, paired_stats
from ._record import (
    RecordMissing,
    record_dir,
    recorded,
    records_root,
    refresh_command,
    unit_seconds,
    units_in_progress,
)

__all__ = [
    "EXPERIMENTS",
    "get",
    "make_config",
    "run",
    "record",
    "recorded",
    "unit_seconds",
    "record_dir",
    "records_root",
    "RecordMissing",
    "Result",
    "memorised_fraction",
    "paired_stats",
    "check_one_row_per_seed",
    "refresh_command",
    "units_in_progress",
]

#: The names of the experiments, in the order of the paper.
EXPERIMENTS: tuple[str, ...] = ("setting1", "setting2", "setting3", "distance", "difference_trick", "bound_scale")


def get(name: str) -> ModuleType:
    """The module of experiment ``name``.

    Parameters
    ----------
    name : str
        One of :data:`EXPERIMENTS`.

    Returns
    -------
    types.ModuleType
        ``ntk_core.experiments.<name>``, with its ``Config`` and ``compute``.

    Raises
    ------
    ValueError
        An unknown experiment.
    """
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    return importlib.import_module(f"{__name__}.{name}")


def make_config(name: str, profile: str = "quick", **overrides: Any) -> Any:
    """The ``quick()``, ``medium()`` or ``full()`` config of experiment ``name``, with fields replaced by ``overrides``.

    Parameters
    ----------
    name : str
        One of :data:`EXPERIMENTS`.
    profile : {"quick", "medium", "full"}
        Which profile's config.
    **overrides
        Config fields to replace.

    Returns
    -------
    Config
        The experiment's frozen ``Config`` dataclass.

    Raises
    ------
    ValueError
        An unknown experiment, profile or field, or a seed given twice; an
        experiment without a ``medium()`` profile yet says so.

    Examples
    --------
    >>> from ntk_core import experiments
    >>> config = experiments.make_config("setting1", "quick", seeds=(0,))
    >>> config.profile, config.seeds
    ('quick', (0,))
    """
    module = get(name)
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(map(repr, PROFILES))}, got {profile!r}")
    factory = getattr(module.Config, profile, None)
    if factory is None:
        raise ValueError(
            f"experiment {name!r} has no {profile!r} profile yet (its Config has no {profile}() "
            f"class method); available: "
            f"{', '.join(p for p in PROFILES if hasattr(module.Config, p))}"
        )
    config = factory()
    unknown = set(overrides) - {f.name for f in dataclasses.fields(config)}
    if unknown:
        raise ValueError(f"{name} has no config field(s) {sorted(unknown)}")
    config = dataclasses.replace(config, **overrides)
    seeds = list(getattr(config, "seeds", ()))
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:  # a seed run twice would count twice in every paired statistic
        raise ValueError(f"seeds must be distinct, got {tuple(seeds)} (seed(s) {repeated} repeated)")
    return config


def run(
    name: str,
    profile: str = "quick",
    *,
    use_cache: bool = True,
    progress: bool = False,
    workers: int = 1,
    **overrides: Any,
) -> Result:
    """Run experiment ``name`` (or load its cached result) and return the :class:`Result`.

    The config is the experiment's ``quick()``, ``medium()`` or ``full()`` with
    the fields in ``overrides`` replaced (:func:`make_config`). The result is
    cached under ``$NTK_CORE_CACHE`` by a hash of the config and of the code,
    and its units of work (one per training run) as they finish, so an
    interrupted run resumes where it stopped.

    Parameters
    ----------
    name : str
        One of :data:`EXPERIMENTS`.
    profile : {"quick", "medium", "full"}
        The size (ARCHITECTURE.md, "Conventions"); ``full`` is the paper's scale.
    use_cache : bool
        Reuse a cached result and cached units; ``False`` recomputes everything
        (and overwrites the cache).
    progress : bool
        Show progress bars.
    workers : int
        Processes that compute the units of work (training runs) at once, each on one torch thread; 1 (the
        default) computes them in this process. On a CUDA device units always run in this process.
    **overrides
        Config fields to replace, e.g. ``seeds=(0,)`` or ``width=64``.

    Returns
    -------
    Result
        ``table``, a tidy ``pandas.DataFrame`` (one row per measurement), and
        ``meta``: config, profile, device, seeds, data sources and their
        fingerprints, wall time; ``summary()`` prints them.

    Raises
    ------
    ValueError
        An unknown experiment, profile or config field, or an invalid value.

    Examples
    --------
    The difference trick of Appendix A (Figure 4), shrunk to seconds: with
    α = 1/2 the network's output at initialisation is exactly zero.

    >>> from ntk_core import experiments
    >>> result = experiments.run("difference_trick", n_train=20, n_test=100, width=64,
    ...                          alphas=(0.0, 0.5), steps=20, seeds=(0,))
    >>> result.table["alpha"].tolist()
    [0.0, 0.5]
    >>> float(result.table.loc[result.table["alpha"] == 0.5, "initial_output_rms"].iloc[0])
    0.0
    >>> result.meta["experiment"], result.meta["profile"]
    ('difference_trick', 'quick')
    """
    config = make_config(name, profile, **overrides)
    module = get(name)
    return run_experiment(name, config, module.compute, use_cache=use_cache, progress=progress, workers=workers)


def record(
    name: str,
    profile: str = "medium",
    *,
    root: Any = None,
    use_cache: bool = True,
    progress: bool = False,
    out: Any = None,
    workers: int = 1,
    first: list[dict[str, Any]] | None = None,
    **overrides: Any,
) -> Result:
    """Run experiment ``name`` and record its result with provenance under ``<root>/<profile>/<name>/``.

    ``root`` defaults to the repository's ``results/`` folder. Units are stored in the record's folder as
    they finish, so an interrupted recording resumes where it stopped (see ``ntk_core/experiments/_record.py``).

    Parameters
    ----------
    name : str
        One of :data:`EXPERIMENTS`.
    profile : {"quick", "medium", "full"}
        Which profile (records are kept for ``medium``).
    root : str or os.PathLike, optional
        Folder of the records (default: the repository's ``results/``).
    use_cache : bool
        Reuse cached units.
    progress : bool
        Show progress bars.
    out : file-like, optional
        Where to print progress lines.
    workers : int
        Processes that compute the units at once, as for :func:`run`.
    first : list of dict, optional
        Parts of unit keys (``[{"n": 60000}]``) whose units are computed before the others: a long unit first,
        so that a recording stopped at a session's end loses a short one. The record does not depend on it.
    **overrides
        Config fields to replace.

    Returns
    -------
    Result
        As :func:`run`, with provenance in ``meta``.
    """
    from ._canary import canary_config
    from ._record import record_experiment

    config = make_config(name, profile, **overrides)
    return record_experiment(
        name,
        config,
        get(name).compute,
        root=root,
        use_cache=use_cache,
        progress=progress,
        out=out,
        workers=workers,
        first=first,
        canary=canary_config(name, config),
    )
