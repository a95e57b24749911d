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


def test_the_main_pages_open_with_an_example():
    pages = {m.stem for m in PAGES if "```python" in m.read_text(encoding="utf-8")}
    assert {"bounds", "ntk", "krr", "noise", "train"} <= pages


@pytest.mark.parametrize("code", EXAMPLES)
def test_an_api_example_runs(code):
    exec(compile(code, "book/api", "exec"), {})
