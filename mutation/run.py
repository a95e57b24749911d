"""Mutation run: plant each bug of ``mutation/mutants.py`` in a copy of the repository and run the fast tests.

Usage (from the repository root; ``make mutation`` does this)::

    .venv/bin/python mutation/run.py [--only NAME ...] [--timeout 300] [--jobs 1]

The working tree (without ``.venv``, ``_build``, ``.git`` and other build output) is
copied once to a snapshot, so that edits made while the run goes on do not mix in. For
each mutant: copy the snapshot to a temporary folder, replace the snippet (which must
occur exactly once in the snapshot, else the run fails before any mutant runs), and run the mutant's test files there with this
repository's virtualenv python (``pytest -x -q -p no:cacheprovider``, one timeout per
mutant). A mutant is *killed* when the tests fail or time out, *survived* when they pass.
Prints a table and the score (killed / non-equivalent mutants) and exits non-zero when a
mutant that must be killed survives, or when the unmutated tests do not pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "mutation"))

from mutants import MUTANTS, Mutant  # noqa: E402

IGNORE = shutil.ignore_patterns(
    ".venv",
    "_build",
    ".build",
    ".git",
    ".hypothesis",
    ".pytest_cache",
    "__pycache__",
    "mathjax",
    "*.egg-info",
    ".mypy_cache",
)


def check_snippets(mutants: tuple[Mutant, ...] | list[Mutant] = MUTANTS, root: Path = REPO) -> list[str]:
    """Problems with the list: a snippet not found exactly once, a no-op replacement, a duplicate name."""
    problems = []
    names = [m.name for m in mutants]
    problems += [f"duplicate mutant name {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
    for m in mutants:
        path = root / m.file
        if not path.is_file():
            problems.append(f"{m.name}: {m.file} does not exist")
            continue
        count = path.read_text(encoding="utf-8").count(m.original)
        if count != 1:
            problems.append(f"{m.name}: snippet found {count} times in {m.file} (must be exactly once): {m.original!r}")
        if m.original == m.replacement:
            problems.append(f"{m.name}: replacement equals the original")
        for t in m.test_files:
            if not (root / t).is_file():
                problems.append(f"{m.name}: test file {t} does not exist")
    return problems


def _copy_repo(dest: Path, source: Path = REPO) -> None:
    shutil.copytree(source, dest, ignore=IGNORE, symlinks=True)


def _pytest(workdir: Path, tests: tuple[str, ...], timeout: float) -> tuple[str, float, str]:
    env = dict(os.environ)
    shared = REPO.parent / "shared" / "data"  # the tests' default data folder is beside the checkout, not the copy
    if "NTK_CORE_DATA" not in env and (shared / "mnist").is_dir():
        env["NTK_CORE_DATA"] = str(shared)
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONPATH=str(workdir),
        PYTHONDONTWRITEBYTECODE="1",
        NTK_CORE_CACHE=str(workdir / "_cache"),
    )
    cmd = [str(REPO / ".venv" / "bin" / "python"), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start, ""
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    return ("passed" if proc.returncode == 0 else "failed"), time.perf_counter() - start, tail[-1] if tail else ""


def _check_import(workdir: Path) -> None:
    """The copy's ntk_core must be the one imported (not the editable install of this checkout)."""
    env = dict(os.environ, PYTHONPATH=str(workdir))
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-c", "import ntk_core; print(ntk_core.__file__)"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(out).resolve().is_relative_to(workdir.resolve()):
        raise SystemExit(f"mutation run: the copy imports ntk_core from {out}, not from {workdir}")


def run_one(m: Mutant | None, tests: tuple[str, ...], timeout: float, snapshot: Path) -> tuple[str, float, str]:
    with tempfile.TemporaryDirectory(prefix="ntk-mutant-") as tmp:
        work = Path(tmp) / "repo"
        _copy_repo(work, snapshot)
        if m is None:
            _check_import(work)
        else:
            path = work / m.file
            text = path.read_text(encoding="utf-8")
            if text.count(m.original) != 1:
                raise SystemExit(f"mutant {m.name}: snippet not found exactly once in {m.file}")
            path.write_text(text.replace(m.original, m.replacement), encoding="utf-8")
        return _pytest(work, tests, timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run only these mutants (by name)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant (a timeout kills it)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run in parallel")
    args = parser.parse_args(argv)

    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.only and len(mutants) != len(set(args.only)):
        print(f"unknown mutant(s): {sorted(set(args.only) - {m.name for m in mutants})}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ntk-mutation-snapshot-") as tmp:
        snapshot = Path(tmp) / "repo"
        _copy_repo(snapshot)
        problems = check_snippets(mutants, snapshot)
        if problems:
            print("mutation list is stale:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 2
        return _run_all(mutants, snapshot, args.timeout, args.jobs)


def _run_all(mutants: list[Mutant], snapshot: Path, timeout: float, jobs: int) -> int:
    """The baseline, then every mutant on copies of ``snapshot``; prints the table; 1 if one must-kill survived."""
    start = time.perf_counter()
    files = tuple(dict.fromkeys(t for m in mutants for t in m.test_files))
    status, secs, tail = run_one(None, files, timeout * 4, snapshot)
    print(f"baseline (no mutant) on {len(files)} test files: {status} in {secs:.0f} s  {tail}", flush=True)
    if status != "passed":
        print("the unmutated tests must pass before mutants can be judged", file=sys.stderr)
        return 2

    def job(m: Mutant) -> tuple[Mutant, str, float, str]:
        return (m, *run_one(m, m.test_files, timeout, snapshot))

    results = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for m, st, secs, tail in pool.map(job, mutants):
            verdict = "survived" if st == "passed" else ("killed (timeout)" if st == "timeout" else "killed")
            results.append((m, verdict, secs))
            flag = "  [equivalent]" if m.equivalent else ""
            print(f"{verdict:17s} {secs:6.1f} s  {m.name:32s} {m.file}: {m.description}{flag}", flush=True)
            if tail:
                print(f"{'':27s}pytest: {tail}", flush=True)

    killed = [m for m, v, _ in results if v.startswith("killed")]
    survived = [m for m, v, _ in results if v == "survived"]
    must = [m for m in survived if not m.equivalent]
    eq = [m for m in results if m[0].equivalent]
    non_eq = len(results) - len(eq)
    killed_non_eq = sum(1 for m in killed if not m.equivalent)
    print()
    print(
        f"{len(results)} mutants: {len(killed)} killed, {len(survived)} survived "
        f"({len(eq)} marked equivalent); wall time {time.perf_counter() - start:.0f} s"
    )
    print(
        f"mutation score: {killed_non_eq}/{non_eq} non-equivalent mutants killed = "
        f"{100.0 * killed_non_eq / max(non_eq, 1):.1f}%"
    )
    for m in survived:
        why = f"equivalent: {m.equivalent}" if m.equivalent else "MUST BE KILLED"
        print(f"  survived: {m.name} ({m.file}): {why}")
    return 1 if must else 0


if __name__ == "__main__":
    raise SystemExit(main())
