"""The README's promises: two quick-start commands in one block, and its Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_quick_start_has_exactly_two_commands():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    commands = [line.split("#")[0].strip() for line in blocks[0].splitlines() if line.split("#")[0].strip()]
    assert commands == ["make book", "make test"]
    assert "make test" in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()


def test_python_example_runs(shared_data, monkeypatch):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 2  # the kernel and bound example, RDI and AUX in a loop of one's own
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
