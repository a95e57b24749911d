"""The book's preexecute extension: chapters executed before Sphinx reads them, two at a time, each exactly once.

A small Sphinx project with myst-nb and the extension (no Jupyter Book, no ``ntk_core`` computation): its
notebooks log when their code ran, in which process and with which ``NTK_BOOK_WORKERS``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BOOK_EXT = Path(__file__).resolve().parents[1] / "book" / "_ext"
sys.path.insert(0, str(BOOK_EXT))

from preexecute import Job, _order, schedule  # noqa: E402

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
{extra}---

# {name}

```{{code-cell}} ipython3
import json, os, time
start = time.time()
time.sleep({sleep})
{body}
with open({log!r}, "a") as f:
    f.write(json.dumps({{"name": {name!r}, "start": start, "end": time.time(),
                        "workers": os.environ.get("NTK_BOOK_WORKERS")}}) + "\\n")
print("workers:", os.environ.get("NTK_BOOK_WORKERS"))
{after}
```
"""


def _project(tmp_path: Path, chapters: dict[str, dict]) -> tuple[Path, Path]:
    src, log = tmp_path / "src", tmp_path / "ran.jsonl"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(BOOK_EXT)!r})\n"
        "extensions = ['myst_nb', 'preexecute']\nnb_execution_mode = 'force'\nnb_execution_raise_on_error = True\n"
        "exclude_patterns = ['_build']\n"
    )
    (src / "index.md").write_text("# Home\n\n```{toctree}\n" + "\n".join(chapters) + "\n```\n")
    for name, spec in chapters.items():
        extra = "book_execution:\n  alone: true\n" if spec.get("alone") else ""
        text = HEADER.format(
            extra=extra,
            name=name,
            sleep=spec.get("sleep", 2),
            body=spec.get("body", ""),
            log=str(log),
            after=spec.get("after", ""),
        )
        (src / f"{name}.md").write_text(text)
    return src, log


def _build(src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NTK_BOOK_WORKERS": "2"}  # two cores' worth, whatever the machine has
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", str(src), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _runs(log: Path) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        runs.setdefault(entry["name"], []).append(entry)
    return runs


def _overlap(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


@pytest.mark.slow
def test_chapters_run_two_at_a_time_once_each_and_the_alone_one_by_itself(tmp_path):
    src, log = _project(tmp_path, {"one": {}, "two": {}, "three": {"alone": True}})
    out = tmp_path / "out" / "html"
    result = _build(src, out)
    assert result.returncode == 0, result.stderr
    runs = _runs(log)
    assert sorted(runs) == ["one", "three", "two"]
    assert all(len(r) == 1 for r in runs.values()), runs  # myst-nb took every chapter from the cache
    one, two, three = runs["one"][0], runs["two"][0], runs["three"][0]
    assert _overlap(one, two)  # the two light chapters ran at once
    assert not _overlap(three, one) and not _overlap(three, two)  # the alone one by itself
    assert three["end"] <= min(one["start"], two["start"])  # and first
    assert (one["workers"], two["workers"], three["workers"]) == ("1", "1", "2")
    page = (out / "one.html").read_text()
    assert "workers: 1" in page  # the cached outputs are rendered
    executed = json.loads((out.parent / "jupyter_execute" / "one.ipynb").read_text())  # what a download offers
    (cell,) = [c for c in executed["cells"] if c["cell_type"] == "code"]
    assert "workers: 1" in "".join(cell["outputs"][0]["text"]) and cell["execution_count"] == 1
    times = json.loads((out.parent / "execution_times.json").read_text())
    assert sorted(times) == ["one", "three", "two"]
    assert all(t["seconds"] >= 2 and t["slowest_cell_seconds"] >= 2 for t in times.values())
    assert all(len(t["code_cells"]) == 1 and t["code_cells"][0][1] >= 2 for t in times.values())


@pytest.mark.slow
def test_a_failing_chapter_stops_the_build_with_its_error_and_runs_once(tmp_path):
    src, log = _project(
        tmp_path, {"bad": {"sleep": 0, "after": "assert False, 'a planted failure'"}, "good": {"sleep": 0}}
    )
    result = _build(src, tmp_path / "out" / "html")
    assert result.returncode != 0
    assert "a planted failure" in result.stderr and "bad.md" in result.stderr
    assert len(_runs(log)["bad"]) == 1  # myst-nb did not run it again


def test_schedule_keeps_to_the_cores_and_never_lets_a_job_overtake():
    import threading
    import time

    jobs = [
        Job(f"j{i}", Path("x"), None, alone, 2 if alone else 1)
        for i, alone in enumerate([True, False, False, True, False])
    ]
    lock, busy, peak, started = threading.Lock(), [0], [0], []

    def run_one(job: Job) -> None:
        with lock:
            started.append(job.docname)
            busy[0] += job.cores
            peak[0] = max(peak[0], busy[0])
            assert busy[0] <= 2
        time.sleep(0.05)
        with lock:
            busy[0] -= job.cores

    schedule(jobs, 2, run_one, stop=lambda: False)
    assert started == ["j0", "j1", "j2", "j3", "j4"] and peak[0] == 2
    stopped: list[str] = []
    schedule(jobs, 2, lambda j: stopped.append(j.docname), stop=lambda: len(stopped) >= 1)
    assert stopped == ["j0"]  # once asked to stop, nothing else starts


def test_order_puts_alone_first_then_longest_first_and_keeps_reading_order_when_unknown():
    jobs = [Job(n, Path(n), None, alone, 1) for n, alone in [("a", False), ("b", True), ("c", False), ("d", False)]]
    assert [j.docname for j in _order(jobs, {})] == ["b", "a", "c", "d"]
    assert [j.docname for j in _order(jobs, {"a": 5.0, "c": 50.0, "d": 20.0})] == ["b", "c", "d", "a"]
    assert [j.docname for j in _order(jobs, {"a": 5.0})] == ["b", "c", "d", "a"]  # unknown first: could be long


def test_the_experiment_chapters_run_alone():
    """The chapters whose experiments start worker processes are marked; the others must not start any."""
    book = BOOK_EXT.parent
    for chapter in sorted(book.glob("*.md")):
        text = chapter.read_text(encoding="utf-8")
        marked = "book_execution:\n  alone: true" in text.split("\n---\n", 1)[0]
        assert marked == ("workers=run.workers" in text), chapter.name
