"""Is a change to the code the experiments reach a pure refactor? Tiny runs of every experiment, compared bit for bit.

Any edit of a statement that an experiment reaches changes its code fingerprint and makes its recorded results
stale (``ntk_core/experiments/_code.py``), even when no number changes. Before such an edit, save tiny runs of
every experiment with the code as it is; after each step, check that they are still equal, bit for bit::

    OMP_NUM_THREADS=1 .venv/bin/python tests/support/identity.py save     # before the change (about 10 s)
    OMP_NUM_THREADS=1 .venv/bin/python tests/support/identity.py check    # after each step: IDENTICAL or DIFFERS

The tiny configurations are those of the end-to-end tests, on the data of ``$NTK_CORE_DATA`` (set it, as the
Makefile does, to the folder holding the official MNIST and CIFAR-10 files). The references go to ``_build/identity.pkl``
(``--file`` to change it). ``check`` exits with 1 when a table differs and says by how much.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "support")]


def tiny_tables(names: list[str]) -> dict:
    """The result table of each experiment's tiny run (computed afresh: a private, empty cache)."""
    os.environ["NTK_CORE_CACHE"] = tempfile.mkdtemp(prefix="ntk-identity-")
    import torch
    from test_experiments import TINY
    from test_experiments_cifar import TINY as CIFAR_TINY

    from ntk_core import experiments

    torch.set_num_threads(1)
    configs = {**TINY, **CIFAR_TINY}
    return {name: experiments.run(name, "quick", **configs[name]).table for name in names}


def main(argv: list[str] | None = None) -> int:
    from ntk_core.experiments import EXPERIMENTS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("save", "check"))
    parser.add_argument("names", nargs="*", help=f"experiments (default: all of {list(EXPERIMENTS)})")
    parser.add_argument("--file", type=Path, default=REPO / "_build" / "identity.pkl")
    args = parser.parse_args(argv)
    names = args.names or list(EXPERIMENTS)
    tables = tiny_tables(names)
    if args.mode == "save":
        saved = pickle.loads(args.file.read_bytes()) if args.file.exists() else {}
        from ntk_core._store import atomic_write_bytes

        atomic_write_bytes(args.file, pickle.dumps({**saved, **tables}))
        print(f"saved the tiny runs of {names} in {args.file}")
        return 0
    import pandas as pd

    reference = pickle.loads(args.file.read_bytes())
    differ = 0
    for name, table in tables.items():
        if name not in reference:
            print(f"{name}: no reference in {args.file} (run `save` first, before the change)")
            differ += 1
            continue
        try:
            pd.testing.assert_frame_equal(table, reference[name], check_exact=True)
            print(f"{name}: IDENTICAL")
        except AssertionError as err:
            differ += 1
            print(f"{name}: DIFFERS\n{str(err)[:800]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
