"""The mutation list (mutation/mutants.py) matches the current code: every planted bug's snippet occurs
exactly once in its file, so ``make mutation`` cannot silently skip a mutant after a refactor."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_mutant_snippet_is_found_exactly_once():
    sys.path.insert(0, str(REPO / "mutation"))
    try:
        from run import check_snippets
        from mutants import MUTANTS
    finally:
        sys.path.remove(str(REPO / "mutation"))
    assert len(MUTANTS) >= 40
    problems = check_snippets()
    assert not problems, "mutation/mutants.py is stale:\n" + "\n".join(problems)
    for m in MUTANTS:
        assert m.description and (m.equivalent is None or len(m.equivalent) > 20), m.name
