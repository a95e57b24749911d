"""`make lab`: a chapter opens as a notebook in JupyterLab (jupytext) and its first cells run; the built
book offers each chapter as .md and executed .ipynb.

Starts the documented command on a free localhost port with a token, serving a copy of one fast
chapter (so that an autosave can never rewrite the book), drives JupyterLab in headless Chromium,
runs the chapter's first code cells against the installed ``ntk_core``, checks that their output
appears without an error, and shuts the server down through its REST API.
"""

from __future__ import annotations

import importlib.util
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from browser import CHROMIUM, CHROMIUM_ARGS

REPO = Path(__file__).resolve().parents[1]
CHAPTER = "book/setting.md"
CODE_CELLS_TO_RUN = 2  # the imports, then loading MNIST (prints where the images came from)

pytestmark = pytest.mark.slow


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (Debian package `chromium`; `make test` installs it)"
    for module in ("jupyterlab", "jupytext", "playwright"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pinned in requirements.txt: run `make venv`)"
    if shutil.which("make") is None:
        return "`make` is not on PATH"
    if not (Path(sys.prefix) / "bin" / "jupyter").exists():
        return f"no `jupyter` command in {sys.prefix}/bin"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_server(url: str, proc: subprocess.Popen, log: Path, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"`make lab` exited with {proc.returncode}:\n{log.read_text(errors='replace')[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(1.0)
    pytest.fail(f"JupyterLab did not answer within {timeout:.0f} s:\n{log.read_text(errors='replace')[-4000:]}")


def _shutdown(base: str, token: str, proc: subprocess.Popen) -> None:
    request = urllib.request.Request(f"{base}api/shutdown", method="POST", headers={"Authorization": f"token {token}"})
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except OSError:
        pass
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:  # pragma: no cover - only if the REST shutdown failed
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_make_lab_opens_and_runs_a_chapter(tmp_path: Path) -> None:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    root = tmp_path / "lab"
    (root / "book").mkdir(parents=True)
    shutil.copy(REPO / CHAPTER, root / CHAPTER)
    port, token = _free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}/"
    env = dict(os.environ)
    env.update(
        {
            "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
            "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        }
    )
    lab_args = " ".join(
        [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
        ]
    )
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        # `-o .venv/.installed`: use the environment as it is (never reinstall from inside a test).
        proc = subprocess.Popen(
            [
                "make",
                "--no-print-directory",
                "-o",
                ".venv/.installed",
                "lab",
                f"LAB_DIR={root}",
                f"LAB_ARGS={lab_args}",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_server(f"{base}api/status?token={token}", proc, log)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                outside: list[str] = []

                def route(r, request):
                    if request.url.startswith((base, "data:", "blob:")):
                        r.continue_()
                    else:
                        outside.append(request.url)
                        r.abort()

                page.route("**/*", route)
                page.goto(f"{base}lab/tree/{CHAPTER}?token={token}", wait_until="load")
                # A double click's viewer for MyST Markdown is jupytext's notebook (make lab's overrides).
                page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell", timeout=180_000)
                cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-CodeCell")
                cells.nth(CODE_CELLS_TO_RUN - 1).wait_for(timeout=60_000)  # cells are rendered progressively
                assert "import ntk_core" in cells.nth(0).inner_text()
                # The kernel of the chapter's kernelspec (python3: this environment's) has started.
                page.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle")).wait_for(timeout=180_000)
                for i in range(CODE_CELLS_TO_RUN):
                    cell = cells.nth(i)
                    prompt = cell.locator(".jp-InputArea-prompt")
                    deadline = time.monotonic() + 240
                    # "[ ]:" before, "[*]:" while queued or running, "[n]:" when done.
                    while not re.fullmatch(r"\[\d+\]:", prompt.inner_text().strip()):
                        assert time.monotonic() < deadline, f"code cell {i + 1} did not finish: {prompt.inner_text()!r}"
                        if prompt.inner_text().strip() == "[ ]:":  # not sent yet (or the keypress came too early)
                            cell.locator(".jp-InputArea-editor").click()
                            page.keyboard.press("Control+Enter")
                        page.wait_for_timeout(1000)
                    errors = cell.locator('[data-mime-type="application/vnd.jupyter.error"]')
                    assert errors.count() == 0, f"code cell {i + 1} raised:\n{errors.first.inner_text()}"
                output = cells.nth(CODE_CELLS_TO_RUN - 1).locator(".jp-OutputArea")
                text = output.inner_text()
                assert "MNIST" in text, f"no data description in the output: {text[:500]!r}"
                assert not outside, f"requests outside the local server: {outside}"
            finally:
                browser.close()
    finally:
        _shutdown(base, token, proc)
    assert proc.returncode is not None, "the server did not stop"


def test_built_book_offers_each_chapter_for_download() -> None:
    """Each notebook chapter of the built book links its .md source and executed .ipynb, both local files."""
    import json

    site = REPO / "_build" / "html"
    if not (site / "index.html").exists():
        pytest.skip("the book is not built (make book; make test builds it first)")
    chapters = [
        p for p in sorted((REPO / "book").glob("*.md")) if p.read_text(encoding="utf-8").startswith("---\njupytext:")
    ]
    assert chapters
    for source in chapters:
        page = site / "book" / f"{source.stem}.html"
        if not page.exists():
            continue  # not in _toc.yml (test_book checks that every toc entry is built)
        html = page.read_text(encoding="utf-8")
        for suffix in (".md", ".ipynb"):
            assert f'href="{source.stem}{suffix}" download' in html, f"{page.name}: no link to its {suffix}"
            assert (page.parent / f"{source.stem}{suffix}").is_file(), f"{source.stem}{suffix} is not in the site"
        assert (page.parent / f"{source.stem}.md").read_text(encoding="utf-8") == source.read_text(encoding="utf-8")
        notebook = json.loads((page.parent / f"{source.stem}.ipynb").read_text(encoding="utf-8"))
        code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        assert code and any(c.get("outputs") for c in code), f"{source.stem}.ipynb has no executed outputs"
