"""Sphinx extension: the chapters that are about to be read are executed first, as many at once as the cores allow.

With ``execute_notebooks: force`` myst-nb executes each chapter while Sphinx reads it, one chapter after the
other. Most chapters compute in one process of one torch thread (``ntk_core.experiments.profile.book_threads``),
so one of the two cores of the machine the book is built for waits while they run. This extension executes the
chapters *before* the read (event ``env-before-read-docs``, after every ``builder-inited`` handler, so after the
glance extension has emptied the claims folder and named it in the environment the kernels inherit):

* at most ``book_workers()`` cores' worth at once (``$NTK_BOOK_WORKERS``, else the CPU count, at most 2; the
  same number the chapters give their experiments' worker processes);
* a chapter whose front matter says ``book_execution: {alone: true}`` (its experiments run in worker processes
  on every core) runs by itself; every other chapter runs beside one other, in a kernel whose
  ``NTK_BOOK_WORKERS`` is 1, so that it cannot start worker processes onto the core its neighbour uses and no
  cell is slowed by the pairing;
* the chapters that run alone go first, the others longest first by the previous build's times
  (``<build>/execution_times.json``, which also gets every chapter's time and each of its cells'), in the order
  Sphinx reads them when no earlier time is known.

Every executed notebook goes into a jupyter-cache that is emptied at the start of every build (nothing of an
earlier build can be reused: ``force``'s promise holds), and myst-nb, switched to ``execution_mode = "cache"`` for
this build, takes its outputs from there (and this extension writes the executed notebook where myst-nb's
``force`` mode would, ``jupyter_execute/<chapter>.ipynb``). A chapter that fails stops the build with its cell's
error, as myst-nb's ``raise_on_error`` would; one that myst-nb executed again anyway (its notebook did not match
the pre-executed one) is a warning, which fails the strict build. Nothing happens unless the configured mode is
``force``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable

from sphinx.errors import ExtensionError
from sphinx.util import logging

from ntk_core._store import atomic_write_bytes

LOGGER = logging.getLogger(__name__)
#: the front-matter key of a chapter (``book_execution: {alone: true}``)
METADATA_KEY = "book_execution"
TIMES_FILE = "execution_times.json"
#: docname -> executed notebook of this build (kept out of the pickled environment)
_EXECUTED: dict[str, Any] = {}


@dataclass
class Job:
    """One chapter to execute: its docname, the cores it takes and what its execution produced."""

    docname: str
    path: Path
    notebook: Any
    alone: bool
    cores: int
    seconds: float = math.nan
    cell_seconds: list[tuple[int, float]] = field(default_factory=list)  # (index in the notebook, seconds)
    error: str | None = None
    executed: Any = None


def schedule(jobs: list[Job], capacity: int, run_one: Callable[[Job], None], stop: Callable[[], bool]) -> None:
    """Run ``run_one(job)`` for every job in the given order, with at most ``capacity`` cores' worth at once.

    A job starts as soon as the cores it takes are free and every job before it has started (no job overtakes
    another, so a job that needs every core is never starved). ``stop()`` is asked before each start: once it is
    true no further job starts and the running ones are waited for.
    """
    running: dict[Future[None], Job] = {}
    pending = list(jobs)
    with ThreadPoolExecutor(max_workers=max(1, capacity)) as pool:
        while pending or running:
            while pending and not stop() and sum(j.cores for j in running.values()) + pending[0].cores <= capacity:
                job = pending.pop(0)
                running[pool.submit(run_one, job)] = job
            if stop():
                pending.clear()
            if not running:
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                running.pop(future)
                future.result()  # an error of run_one itself (not of the notebook) ends the build


def _cell_seconds(cell: Any) -> float:
    timing = cell.get("metadata", {}).get("execution", {})
    try:
        start = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return math.nan
    return (end - start).total_seconds()


def execute(job: Job, nb_config: Any) -> Any:
    """Execute ``job.notebook`` as myst-nb's ``force`` mode would (same working folder, timeout, error rule),
    in a kernel whose ``NTK_BOOK_WORKERS`` is 1 unless the job runs alone; return the executed notebook, whose cells keep the
    metadata they were read with (so that it hashes like the notebook myst-nb reads)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = copy.deepcopy(job.notebook)
    timeout, allow_errors = nb_config.execution_timeout, nb_config.execution_allow_errors
    overrides = notebook.metadata.get("execution", {})  # as jupyter-cache's single_nb_execution reads them
    timeout, allow_errors = overrides.get("timeout", timeout), overrides.get("allow_errors", allow_errors)
    folder = tempfile.TemporaryDirectory() if nb_config.execution_in_temp else nullcontext(str(job.path.parent))
    start = time.perf_counter()
    with folder as cwd:
        client = NotebookClient(
            notebook,
            timeout=timeout,
            allow_errors=allow_errors,
            record_timing=True,
            resources={"metadata": {"path": os.path.abspath(cwd)}},
        )
        try:
            beside = {} if job.alone else {"NTK_BOOK_WORKERS": "1"}  # no worker processes onto the neighbour's core
            client.execute(env={**os.environ, **beside})
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
            job.error = f"{type(err).__name__}: {err}"
    job.seconds = time.perf_counter() - start
    job.cell_seconds = [(i, _cell_seconds(c)) for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
    for executed, read in zip(notebook.cells, job.notebook.cells):
        executed.metadata = copy.deepcopy(read.metadata)
    return notebook


def _read_notebook(app: Any, docname: str) -> tuple[Path, Any] | None:
    """The notebook myst-nb will read for ``docname`` (same reader, same configuration), or None."""
    from myst_nb.core.read import create_nb_reader

    path = Path(app.env.doc2path(docname))
    text = path.read_text(encoding=app.config.source_encoding)
    reader = create_nb_reader(str(path), app.env.myst_config, app.env.mystnb_config, text)
    if reader is None:
        return None
    notebook = reader.read(text)
    if not any(cell.cell_type == "code" for cell in notebook.cells):
        return None
    return path, notebook


def _wanted(app: Any, path: Path) -> bool:
    patterns = app.env.mystnb_config.execution_excludepatterns or []
    return not any(PurePosixPath(path.as_posix()).match(p) for p in patterns)


def _times_path(app: Any) -> Path:
    return Path(app.outdir).parent / TIMES_FILE


def _previous_times(app: Any) -> dict[str, float]:
    try:
        return {doc: float(v["seconds"]) for doc, v in json.loads(_times_path(app).read_text()).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _order(jobs: Iterable[Job], previous: dict[str, float]) -> list[Job]:
    """Alone first, then longest first by the previous build's seconds (unknown: Sphinx's reading order)."""
    return sorted(jobs, key=lambda j: (not j.alone, -previous.get(j.docname, math.inf)))


def _before_read(app: Any, env: Any, docnames: list[str]) -> None:
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    from ntk_core.experiments.profile import book_workers

    env.book_preexecuted = None
    _EXECUTED.clear()
    config = env.mystnb_config
    if config.execution_mode != "force":
        return
    capacity = book_workers()
    jobs = []
    for docname in docnames:
        read = _read_notebook(app, docname)
        if read is None or not _wanted(app, read[0]):
            continue
        path, notebook = read
        alone = bool(dict(notebook.metadata.get(METADATA_KEY, {})).get("alone", False))
        jobs.append(Job(docname, path, notebook, alone, capacity if alone else 1))
    cache_path = Path(config.execution_cache_path)
    shutil.rmtree(cache_path, ignore_errors=True)  # a new cache at every build: nothing of an earlier one is reused
    env.mystnb_config = config.copy(execution_mode="cache")
    cache = get_cache(str(cache_path))
    jobs = _order(jobs, _previous_times(app))
    LOGGER.info(f"executing {len(jobs)} chapters, {capacity} core(s) at once: " + ", ".join(j.docname for j in jobs))
    start = time.perf_counter()

    def run_one(job: Job) -> None:
        LOGGER.info(f"executing {job.docname} ({'alone' if job.alone else 'beside another'})")
        job.executed = execute(job, config)
        cell, seconds = _slowest(job)
        outcome = "failed" if job.error else "executed"
        LOGGER.info(f"{outcome} {job.docname} in {job.seconds:.0f} s (slowest: cell {cell}, {seconds:.0f} s)")

    raising = bool(config.execution_raise_on_error)
    schedule(jobs, capacity, run_one, stop=lambda: raising and any(j.error for j in jobs))
    wall = time.perf_counter() - start
    ran = [j for j in jobs if j.executed is not None]
    LOGGER.info(
        f"executed {len(ran)} chapters in {wall:.0f} s (their times add up to {sum(j.seconds for j in ran):.0f} s)"
    )
    failed = [j for j in ran if j.error]
    if failed and raising:
        raise ExtensionError("\n\n".join(f"Executing {j.path} failed:\n{j.error}" for j in failed))
    records = set()
    for job in ran:
        if not job.error:  # a failed chapter is left to myst-nb, which executes it again and reports it as usual
            bundle = CacheBundleIn(job.executed, str(job.path), data={"execution_seconds": job.seconds})
            records.add(cache.cache_notebook_bundle(bundle, check_validity=False, overwrite=True).pk)
            _EXECUTED[job.docname] = job.executed
    _write_times(app, [j for j in ran if not j.error])
    env.book_preexecuted = (records, {str(j.path) for j in failed})


def _slowest(job: Job) -> tuple[int, float]:
    """(index in the notebook, seconds) of the chapter's slowest code cell; (-1, nan) if no cell was timed."""
    timed = [c for c in job.cell_seconds if not math.isnan(c[1])]
    return max(timed, key=lambda c: c[1]) if timed else (-1, math.nan)


def _write_times(app: Any, done: list[Job]) -> None:
    """``<build>/execution_times.json``: per chapter its seconds, its slowest cell and every code cell's seconds
    (cells counted from 0 in the notebook, Markdown cells included, as in ``jupyter_execute/<chapter>.ipynb``)."""
    times = {}
    for j in done:
        cell, seconds = _slowest(j)
        times[j.docname] = {
            "seconds": round(j.seconds, 1),
            "slowest_cell": cell,
            "slowest_cell_seconds": round(seconds, 1),
            "code_cells": [[i, round(t, 1)] for i, t in j.cell_seconds],
        }
    atomic_write_bytes(_times_path(app), (json.dumps(times, indent=1, sort_keys=True) + "\n").encode())


def _write_executed(app: Any, doctree: Any) -> None:
    """Write the executed notebook to myst-nb's output folder (``jupyter_execute/<docname>.ipynb``, what the
    chapter downloads offer): in cache mode myst-nb 1.4 writes the notebook it read there, without the outputs."""
    import nbformat

    notebook = _EXECUTED.get(app.env.docname)
    if notebook is None:
        return
    path = Path(app.env.mystnb_config.output_folder).joinpath(*(app.env.docname + ".ipynb").split("/"))
    atomic_write_bytes(path, nbformat.writes(notebook).encode("utf-8"))


def _check_reused(app: Any, env: Any) -> None:
    """Warn about every chapter that myst-nb executed itself after all (a cache record this extension did not add)."""
    from jupyter_cache import get_cache

    if getattr(env, "book_preexecuted", None) is None:
        return
    ours, failed = env.book_preexecuted
    records = get_cache(env.mystnb_config.execution_cache_path).list_cache_records()
    for uri in sorted({r.uri for r in records if r.pk not in ours} - failed):
        LOGGER.warning(f"{uri} was executed twice: myst-nb did not find its pre-executed notebook in the cache")


def setup(app: Any) -> dict[str, Any]:
    app.connect("env-before-read-docs", _before_read)
    app.connect("doctree-read", _write_executed)
    app.connect("env-updated", _check_reused)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
