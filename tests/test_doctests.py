"""The docstrings' examples: every entry point has a runnable Examples section, and `make test` runs them.

The examples themselves run in ``make test`` as ``pytest --doctest-modules ntk_core`` (a few seconds).
"""

from __future__ import annotations

import doctest
import importlib
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The names a user starts from (issue 13): each has an Examples section with code that runs.
ENTRY_POINTS = [
    "ntk_core.ntk.empirical_ntk",
    "ntk_core.ntk.distributed.distributed_ntk",
    "ntk_core.krr.krr_predict",
    "ntk_core.krr.KRRPath",
    "ntk_core.kernel_matrix.on_disk.krr_solve_ooc",
    "ntk_core.kernel_matrix.on_disk.OnDiskKernel",
    "ntk_core.bounds.theorem_5_1_bound",
    "ntk_core.bounds.theorem_5_2_bound",
    "ntk_core.bounds.theorem_5_3_bound",
    "ntk_core.noise.flip_binary",
    "ntk_core.noise.corrupt",
    "ntk_core.train.train",
    "ntk_core.experiments.run",
    "ntk_core.data.load_mnist",
]


def _resolve(dotted: str):
    module_name, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module_name), name)


@pytest.mark.parametrize("dotted", ENTRY_POINTS)
def test_entry_point_has_runnable_example(dotted):
    obj = _resolve(dotted)
    doc = obj.__doc__ or ""
    assert "\nExamples\n" in doc.replace("    ", ""), f"{dotted}: no numpydoc Examples section"
    examples = doctest.DocTestParser().get_examples(doc)
    assert len(examples) >= 2, f"{dotted}: the Examples section has no runnable code"
    for section in ("Parameters",) if isinstance(obj, type) else ("Parameters", "Returns"):
        assert f"\n{section}\n" in doc.replace("    ", ""), f"{dotted}: no numpydoc {section} section"


def test_make_test_runs_the_doctests():
    dry_run = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "-o", "book", "-o", "/usr/bin/chromium", "test"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pytest -q --doctest-modules ntk_core" in dry_run
