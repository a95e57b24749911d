"""The book: strict configuration, every chapter built, and the built pages checked in a real browser.

The HTML must exist (``make book``; ``make test`` builds it first). ``$NTK_BOOK_SITE`` points the tests at
another build of the site (the ``html`` folder of ``jupyter-book build --path-output``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from browser import CHROMIUM, content_pages, inspect_site, search_snippets

REPO = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("NTK_BOOK_SITE") or REPO / "_build" / "html")
pytestmark = pytest.mark.book


def _toc_files() -> list[str]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            for part in entry.get("parts", []) if isinstance(entry, dict) else []:
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return files


@pytest.fixture(scope="module")
def site() -> Path:
    if not (SITE / "index.html").exists():
        pytest.fail("the book is not built: run `make book` (or `make test`, which builds it first)")
    return SITE


def test_config_is_strict_and_offline():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    execute = config["execute"]
    assert execute["execute_notebooks"] == "force"  # CI never reuses a stale cache
    assert execute["raise_on_error"] is True and execute["allow_errors"] is False
    assert config["sphinx"]["config"]["mathjax_path"].startswith("mathjax/")  # served locally
    assert not (REPO / "_static").exists(), "a root _static/ folder is added to every page by Jupyter Book 1"
    assert any(p.startswith(".") for p in config["exclude_patterns"])  # hidden folders (.pytest_cache) excluded


def test_every_chapter_is_built(site):
    for chapter in _toc_files():
        page = site / f"{chapter}.html"
        assert page.exists(), f"{chapter} is in _toc.yml but {page} was not built"
        assert "Traceback" not in page.read_text(encoding="utf-8"), f"{chapter} shows a traceback"
    assert "url=book/intro.html" in (site / "index.html").read_text()


#: The paper's figures, each shown by an experiment chapter under a caption that names it.
PAPER_FIGURES = ("1a", "1b", "2", "3", "4", "5", "6", "7", "8")
PAPER_TABLES = ("1", "2")


def test_every_paper_figure_is_captioned_with_its_paper_number(site):
    """Each of the paper's figures is a captioned figure with an image whose caption names its paper number, and
    no book number; the book's own figures are "Book fig. 1", "Book fig. 2", ... without gaps."""
    import re

    pages = {
        p.stem[len("experiments_") :]: p.read_text(encoding="utf-8") for p in (site / "book").glob("experiments_*.html")
    }
    assert {"mnist", "difference_trick", "distance", "cifar", "setting3"} <= set(pages), sorted(pages)
    html = "".join(pages.values())
    figures = re.findall(r"<figure[^>]*>(.*?)</figure>", html, flags=re.S)
    # a book built without CIFAR-10 (no data folder, no network) skips Settings 2 and 3 with a note: their figures
    # keep their captions, Table 1 (a table of their numbers) is not made
    no_cifar = "CIFAR-10 is not available on this machine" in pages["cifar"]
    for number in PAPER_FIGURES:
        found = [f for f in figures if re.search(rf"<strong>Paper Figure {number}</strong>", f)]
        assert len(found) == 1, f"paper Figure {number}: {len(found)} captioned figures"
        assert "<img" in found[0], f"paper Figure {number}: no image"
        # the paper's number only: no "Book fig. N" beside it (book/_ext/paper_exhibits.py)
        assert "caption-number" not in found[0], f"paper Figure {number} carries a book number"
    # the paper's tables: Table 1 and Table 2 as captioned tables, Table 2 also drawn as an unnumbered figure
    for number in PAPER_TABLES if not no_cifar else ("2",):
        assert re.search(rf"<caption>Paper Table {number}\b", html), f"paper Table {number}: no captioned table"
    drawn = [f for f in figures if re.search(r"<strong>Paper Table 2, drawn</strong>", f)]
    assert len(drawn) == 1 and "<img" in drawn[0] and "caption-number" not in drawn[0], drawn
    # the book's own figures are numbered 1, 2, ... without the gaps the exhibits would leave
    every = "".join(page.read_text(encoding="utf-8") for page in (site / "book").glob("*.html"))
    numbers = [int(n) for n in re.findall(r'caption-number">Book fig\. (\d+)', every)]
    assert sorted(numbers) == list(range(1, len(numbers) + 1)), sorted(numbers)
    # every figure's image says what it shows: its caption's first sentence as alt text (book/_ext/figure_alt.py)
    images = re.findall(r"<figure[^>]*>.*?(<img[^>]*>)", every, flags=re.S)
    assert images and all(re.search(r'alt="[^"]{10,}"', img) for img in images), [
        img for img in images if not re.search(r'alt="[^"]{10,}"', img)
    ][:3]


#: the tallest a page may be at 1280 px, in px
MAX_PAGE_PX = 12_000


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (make test installs it)")
def test_pages_in_headless_chromium(site):
    pages = content_pages(site)
    assert {f"{c}.html" for c in _toc_files()} <= set(pages)
    reports = inspect_site(site, pages)
    # every page, API reference included, fits at 1280 px and at a phone's 375 px
    problems = {r.path: found for r in reports if (found := r.problems())}
    assert not problems, problems
    by_path = {r.path: r for r in reports}
    # a reader finds what a page says without scrolling through screens of it: at most MAX_PAGE_PX at 1280 px (the
    # API reference apart)
    tall = {r.path: r.height for r in reports if not r.path.startswith("book/api") and r.height > MAX_PAGE_PX}
    assert not tall, tall
    # pages with equations show MathJax output, and the chapters' figures are real images
    assert by_path["book/intro.html"].typeset_elements > 0
    assert by_path["book/setting.html"].typeset_elements > 0
    assert by_path["book/setting.html"].images >= 3


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (make test installs it)")
def test_search_snippets_read_as_prose(site):
    """A search hit's snippet is cut from the page's text, where equations are raw TeX until MathJax runs:
    book/_static/search_snippets.js puts "…" in their place (without it, "complexity" shows TeX)."""
    snippets = search_snippets(site, "complexity")
    assert len(snippets) >= 3
    tex = [s for s in snippets if any(mark in s for mark in ("\\(", "\\[", "\\frac", "\\top", "\\lambda"))]
    assert not tex, tex[:3]


@pytest.mark.slow
@pytest.mark.parametrize("ok", [True, False])
def test_a_failing_assert_breaks_the_build(tmp_path, ok):
    """The strict configuration really fails on an error in a cell (and only then)."""
    root = tmp_path / "mini"
    (root / "book").mkdir(parents=True)
    shutil.copy(REPO / "_config.yml", root / "_config.yml")
    for name in ("_static", "_ext", "references.bib", "favicon.svg"):
        os.symlink(REPO / "book" / name, root / "book" / name)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
    (root / "book" / "page.md").write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n  name: python3\n"
        "  display_name: Python 3\n---\n\n# Mini\n\n```{code-cell} ipython3\n"
        f"assert {ok}, 'the claim does not hold'\n```\n"
    )
    jb = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run(
        [str(jb), "build", str(root), "-W", "-n", "--keep-going"], capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    if ok:
        assert result.returncode == 0, output[-3000:]
    else:
        assert result.returncode != 0 and "the claim does not hold" in output


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (make test installs it)")
def test_browser_check_catches_what_it_should(tmp_path):
    """The checker itself: raw TeX, a broken image, an outside request, a script error, a display wider than
    its column at 1280 px or at 375 px, a cell output or a code cell that scrolls sideways, an output table's raw
    column name, a figure shrunk until its text is under 9 px, a leaked Python repr, a local file path and an
    output table taller than two screens, a listing cut off on a phone and a phone's table cell labelled as another
    column are all reported; an output or a code listing that wraps is not, nor a tall table folded in a collapsed
    ``<details>``, nor a cell labelled as its own column."""
    (tmp_path / "bad.html").write_text(
        "<html><head><script>undefinedFunction();</script></head><body><main>"
        "<p>Untypeset: \\(\\lambda^2\\) and $$x$$</p><div class='math'>\\frac{1}{2}</div>"
        "<img src='missing.png'><img src='http://outside.invalid/outside.png'>"
        "<pre>written to /work/main/_build/ntk_cache</pre>"
        "<pre>moves: {(0.0, 4): np.float64(3.433)} and &lt;Figure size 640x480 with 1 Axes&gt;</pre>"
        "<div class='cell_output'><pre style='width: 300px; overflow-x: auto; white-space: pre'>"
        + "a long printed line "
        * 40
        + "</pre>"
        "<pre style='width: 300px; overflow-x: auto; white-space: pre-wrap'>" + "wrapped line " * 40 + "</pre>"
        "</div><div class='cell_input'><pre style='width: 300px; overflow-x: auto; white-space: pre'>"
        + "x = call("
        + "argument, " * 30
        + ")</pre>"
        "<pre style='width: 300px; overflow-x: auto; white-space: pre-wrap'>" + "y = wrapped(code) " * 20 + "</pre>"
        "</div><div class='cell_output'><table><tr><th>method</th><th>train_error</th><th>test error</th></tr>"
        "</table>"
        "<img src='wide.png' style='width: 600px'><img src='narrow.png' style='width: 600px'></div>"
        "<div class='cell_output'><table><tr><th>a tall table</th></tr>" + "<tr><td>row</td></tr>" * 80 + "</table>"
        "<details><summary>folded</summary><table><tr><th>a folded table</th></tr>"
        + "<tr><td>row</td></tr>" * 80
        + "</table></details></div></main></body></html>"
    )
    (tmp_path / "wide.html").write_text(
        "<html><body><main>"
        "<div style='width: 600px; overflow-x: auto'><mjx-container display='true' aria-label='too wide'>"
        "<mjx-math style='display: inline-block; width: 900px'>x</mjx-math></mjx-container></div>"
        "<div style='width: 50%; overflow-x: auto'><mjx-container display='true' aria-label='fits a desktop'>"
        "<mjx-math style='display: inline-block; width: 400px'>y</mjx-math></mjx-container></div>"
        "<mjx-container display='true'><mjx-math><mjx-merror data-mjx-error='Multiple \\tag'>"
        "\\tag{1}</mjx-merror></mjx-math></mjx-container>"
        # a listing in the prose that fits at 1280 px and not at 375 px; one that wraps
        "<div class='highlight'><pre style='overflow-x: auto; white-space: pre'>" + "z = 1; " * 12 + "</pre></div>"
        "<div class='highlight'><pre style='overflow-x: auto; white-space: pre-wrap'>" + "w = 2; " * 12 + "</pre></div>"
        # phones: a stacked table whose cell is labelled as another column (as the glance once was), and one right
        "<style>@media (max-width: 640px) { .glance-table td:nth-child(2)::before { content: 'This build: '; }"
        " .right td:nth-child(2)::before { content: 'Paper: '; } }</style>"
        "<table class='glance-table'><thead><tr><th>Claim</th><th>Paper's number</th></tr></thead>"
        "<tbody><tr><td>a</td><td>b</td></tr></tbody></table>"
        "<table class='glance-table right'><thead><tr><th>Claim</th><th>Paper's number</th></tr></thead>"
        "<tbody><tr><td>a</td><td>b</td></tr></tbody></table></main></body></html>"
    )
    from PIL import Image

    # PNGs stored at twice their displayed pixels, as the book's are: one shrunk to half its width, one not
    Image.new("RGB", (2400, 600), "white").save(tmp_path / "wide.png")
    Image.new("RGB", (1300, 600), "white").save(tmp_path / "narrow.png")
    reports = inspect_site(tmp_path, ["bad.html", "wide.html"])
    text = "\n".join(p for r in reports for p in r.problems())
    phone = "\n".join(reports[1].phone_wide_displays)
    assert "undefinedFunction" in text
    assert "broken image: missing.png" in text
    assert "outside the built site: http://outside.invalid/outside.png" in text
    assert "no MathJax output" in text and "raw TeX" in text
    assert "wider than its column at 1280 px: too wide (900 px in 600 px)" in text
    assert "1280 px: fits a desktop" not in text and "375 px: fits a desktop" in text
    assert "fits a desktop" in phone and "too wide" in phone
    assert "cell output scrolls sideways at 1280 px: pre a long printed line" in text
    assert "wrapped line" not in text
    assert "code cell cut off at 1280 px (scroll sideways to read it): x = call(argument" in text
    assert "wrapped(code)" not in text
    assert "table shows a raw column name: 'train_error'" in text
    assert "'method'" not in text and "'test error'" not in text
    assert "figure text under 9 px at 1280 px: wide.png (2400 px shown at 600 px" in text  # 8 pt at 6.1 px
    assert "narrow.png" not in text
    assert "a Python repr leaks into the page: 'np.float64(3.433)'" in text
    assert "a Python repr leaks into the page: '<Figure size 640x480 with 1 Axes>'" in text
    assert "MathJax error: 'Multiple \\\\tag'" in text
    assert "local file path in the page: " in text and "/work/main/_build" in text
    assert "taller than 1600 px at 1280 px: a tall table" in text and "a folded table" not in text
    assert "code listing cut off at 375 px (scroll sideways to read it): z = 1;" in text and "w = 2" not in text
    assert text.count("labelled as another column") == 1
    assert 'a cell labelled as another column at 375 px: "This build" on the column "Paper\'s number"' in text
