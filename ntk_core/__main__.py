"""Command line: ``python -m ntk_core run <experiment> --profile quick|medium|full [--device cuda] [--seeds 0 1 2]``.

``--set field=value`` (repeatable) overrides any field of the experiment's
config, for example ``--set width=2048 --set noise_levels="(0.0, 0.3)"``.
``run ... --record`` writes the result with its provenance under
``results/<profile>/<experiment>/`` (kept in the repository; resumable unit by
unit); ``show <experiment> --profile medium`` prints a recorded result.
"""

from __future__ import annotations

import argparse
import ast
import math
import sys
import typing
from pathlib import Path
from typing import Any

from .experiments import EXPERIMENTS, get, make_config
from .experiments._base import run_experiment
from .experiments._record import RecordMissing, record_experiment, recorded, summary
from .profile import PROFILES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ntk_core", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one of the paper's experiments and write its table")
    run.add_argument("experiment", choices=EXPERIMENTS)
    run.add_argument("--profile", choices=PROFILES, default="quick")
    run.add_argument("--device", default=None, help="cpu (default) or cuda")
    run.add_argument("--seeds", type=int, nargs="+", default=None)
    run.add_argument("--out", type=Path, default=Path("results"), help="folder for <experiment>-<profile>.csv/.json")
    run.add_argument("--no-cache", action="store_true", help="recompute even if a cached result exists")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                     help="override a config field (Python literal value); repeatable")
    run.add_argument("--record", action="store_true",
                     help="record the result with provenance under results/<profile>/<experiment>/ (resumable; "
                          "commit that folder)")
    show = sub.add_parser("show", help="print a recorded result (table and provenance)")
    show.add_argument("experiment", choices=EXPERIMENTS)
    show.add_argument("--profile", choices=PROFILES, default="medium")
    sub.add_parser("list", help="list the experiments")
    args = parser.parse_args(argv)

    if args.command == "show":
        try:
            shown = recorded(args.experiment, args.profile)
        except (RecordMissing, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(summary(shown))
        import pandas as pd

        with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200):
            print(shown.table)
        print(f"record: {shown.meta['record_dir']}")
        return 0

    if args.command == "list":
        for name in EXPERIMENTS:
            print(f"{name:18s} {(get(name).__doc__ or '').strip().splitlines()[0]}")
        return 0
    try:
        overrides = dict(_parse_override(text) for text in args.overrides)
        overrides = {k: _check_type(args.experiment, k, v) for k, v in overrides.items()}
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.device is not None:
        overrides["device"] = args.device
    if args.seeds is not None:
        overrides["seeds"] = tuple(args.seeds)
    try:
        try:
            config = make_config(args.experiment, args.profile, **overrides)
        except TypeError as err:  # a value of a type that the config's own checks did not foresee
            raise ValueError(f"bad --set value: {err}") from None
        if args.record:
            result = record_experiment(args.experiment, config, get(args.experiment).compute,
                                       use_cache=not args.no_cache, progress=True, out=sys.stderr)
        else:
            result = run_experiment(args.experiment, config, get(args.experiment).compute,
                                    use_cache=not args.no_cache, progress=True, out=sys.stderr)
    except (ValueError, FileNotFoundError) as err:  # bad configuration or missing data: no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.record:
        print(summary(result))
        print(f"record: {result.meta['record_dir']} (commit it: git add {result.meta['record_dir']})")
        return 0
    path = args.out / f"{args.experiment}-{args.profile}"
    result.save(path)
    print(result.summary())
    print(f"table: {path.with_suffix('.csv')}")
    return 0


def _parse_override(text: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise ValueError(f"--set takes FIELD=VALUE, got {text!r}")
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value  # a bare string such as cpu
    return name, tuple(parsed) if isinstance(parsed, list) else parsed


def _check_type(experiment: str, name: str, value: Any) -> Any:
    """``value`` as the type of config field ``name`` declares it, or a ``ValueError`` saying what it takes.

    ``float`` fields take finite numbers (ints are widened), ``int`` fields ints,
    ``bool`` fields ``True``/``False``, tuple fields tuples of their element type.
    Unknown fields pass through (``make_config`` names them).
    """
    hints = typing.get_type_hints(get(experiment).Config)
    if name not in hints:
        return value
    try:
        return _as_type(value, hints[name])
    except ValueError as err:
        raise ValueError(f"--set {name}={value!r}: {name} takes {err}") from None


def _as_type(value: Any, hint: Any) -> Any:
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError("a finite number, such as 0.5")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("an int, such as 3")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError("True or False")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ValueError("a string")
        return value
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        element = args[0] if args else Any
        example = {float: "(0.0, 0.5)", int: "(0, 1)", str: "('a', 'b')"}.get(element, "(...)")
        if not isinstance(value, tuple):
            raise ValueError(f"a tuple, such as {example}; a single value is written {example.split(',')[0]},)")
        if element is Any:
            return value
        try:
            return tuple(_as_type(v, element) for v in value)
        except ValueError as err:
            raise ValueError(f"a tuple whose every item is {err}") from None
    return value


if __name__ == "__main__":
    sys.exit(main())
