"""The API pages' narratives: every Python example on a ``book/api`` page runs as written (they are static code in
the built book, so a wrong one would only be found by a reader)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGES = sorted((Path(__file__).resolve().parents[1] / "book" / "api").glob("*.md"))
EXAMPLES = [
    pytest.param(code, id=f"{page.stem}-{i}")
    for page in PAGES
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S))
]


def test_every_page_but_the_internals_opens_with_an_example_before_its_reference():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        if page.stem == "internals":
            continue
        assert "What it is for" in text and "```python" in text, page.stem
        assert text.index("```python") < text.index("```{eval-rst}"), page.stem


@pytest.mark.parametrize("code", EXAMPLES)
def test_an_api_example_runs(code):
    exec(compile(code, "book/api", "exec"), {})
