"""Run a book chapter's code cells in this process, for tests that mutate an ingredient.

A chapter is a MyST notebook (``book/*.md``) whose ```` ```{code-cell} ```` blocks hold its
computation and its asserts. :func:`run_chapter` executes those blocks in order, in one
namespace, with matplotlib on the non-interactive backend and ``myst_nb.glue`` made silent,
so that a test can patch an ingredient of ``ntk_core`` (``monkeypatch``) and check that one
of the chapter's own asserts then fails.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)
_OPTION = re.compile(r"^:[a-z_-]+:.*$|^---\n.*?\n---\n", re.M | re.S)


def chapter_cells(name: str) -> list[str]:
    """The code cells of ``book/<name>.md``, in order, without their MyST options."""
    text = (REPO / "book" / f"{name}.md").read_text()
    cells = []
    for body in _CELL.findall(text):
        lines = [ln for ln in body.splitlines() if not re.match(r"^:[a-z_-]+:", ln)]
        cells.append("\n".join(lines).replace("%matplotlib inline", ""))
    if not cells:
        raise ValueError(f"book/{name}.md has no code cells")
    return cells


def glue_keys(name: str) -> set[str]:
    """The glue keys the text of ``book/<name>.md`` refers to (``{glue:text}`key```, ``{glue:}`key```,
    ``{glue:figure} key``): each must be glued by the chapter's cells, or the strict build fails."""
    text = (REPO / "book" / f"{name}.md").read_text()
    inline = re.findall(r"\{glue(?::[a-z]+)?\}`([^`]+)`", text)
    figures = re.findall(r"^```\{glue:figure\}\s+(\S+)", text, re.M)
    return {key.split(":")[0] for key in inline} | set(figures)


def run_chapter(name: str, upto: int | None = None) -> dict[str, Any]:
    """Execute the first ``upto`` code cells of ``book/<name>.md`` (all by default); return the namespace, with the
    names the cells glued under ``"__glued__"``.

    Raises whatever a cell raises, in particular the ``AssertionError`` of a failed claim.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import myst_nb

    glued: set[str] = set()
    namespace: dict[str, Any] = {"__name__": f"chapter_{name}", "__glued__": glued}
    original_glue = myst_nb.glue
    myst_nb.glue = lambda key, *args, **kwargs: glued.add(key)  # type: ignore[assignment]
    try:
        for i, cell in enumerate(chapter_cells(name)[:upto]):
            exec(compile(cell, f"book/{name}.md[cell {i}]", "exec"), namespace)
            plt.close("all")
    finally:
        myst_nb.glue = original_glue
    return namespace
