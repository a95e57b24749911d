"""``python -m ntk_core``: the command line, :func:`ntk_core.experiments.cli.main` (``python -m ntk_core --help``)."""

import sys

from .experiments.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main(reexec=True))
