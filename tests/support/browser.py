"""Drive the built HTML book in headless Chromium (Playwright) and report what a reader would see.

Each page is opened at a desktop width (:data:`DESKTOP`, 1280 px) and then a phone width (:data:`PHONE`,
375 px). Besides console errors, requests, images and raw TeX, the report names every MathJax display
wider than the column that holds it (a display the reader would have to scroll, or would see cut off) and
every local file path of the machine that built the book (:data:`LOCAL_PATH`) found in the page's text,
and every block of a cell's output that scrolls sideways at the desktop width. A display too wide at either
width is a problem (the book's stylesheet, ``book/_static/book.css``, lets MathJax use the text's own size
and keeps the tag's width on one side only on a phone; displays too long for that are broken into lines).

Used by ``tests/test_book.py``; runnable alone for a quick look:
``python tests/support/browser.py _build/html``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ntk_core.bookkit.plots import DPI, PIXEL_DENSITY

CHROMIUM = "/usr/bin/chromium"
#: Viewport widths (px) at which the display widths are checked.
DESKTOP, PHONE = 1280, 375
#: Folders of a build machine that must never show in a page (JavaScript regular expression).
LOCAL_PATH = r"(/work/|/root/|/home/|/tmp/)"
# Flags for a sandbox with no network: no background connections, no first-run work.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@dataclass
class PageReport:
    """Everything the browser test checks on one page."""

    path: str
    console_errors: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    math_elements: int = 0  # elements that should be typeset (.math, MathJax-processed)
    typeset_elements: int = 0  # MathJax 3 output (mjx-container)
    raw_tex: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    images: int = 0
    wide_displays: list[str] = field(default_factory=list)  # at DESKTOP: "<display> (<w> px in <avail> px)"
    phone_wide_displays: list[str] = field(default_factory=list)  # the same at PHONE
    wide_outputs: list[str] = field(default_factory=list)  # at DESKTOP: output blocks that scroll sideways
    wide_code: list[str] = field(default_factory=list)  # at DESKTOP: code cells whose lines are cut off
    raw_headers: list[str] = field(default_factory=list)  # output-table column names such as ``train_error``
    small_text: list[str] = field(default_factory=list)  # at DESKTOP: figures shrunk so far that text is < 9 px
    reprs: list[str] = field(default_factory=list)  # Python reprs in the page's text (np.float64(3.4), <Figure ...>)
    local_paths: list[str] = field(default_factory=list)  # page text around a local file path
    math_errors: list[str] = field(default_factory=list)  # MathJax's own errors (mjx-merror), e.g. a bad \\tag
    tall_tables: list[str] = field(default_factory=list)  # at DESKTOP: output tables taller than MAX_TABLE_PX
    phone_wide_code: list[str] = field(default_factory=list)  # at PHONE: code listings whose lines are cut off
    phone_labels: list[str] = field(default_factory=list)  # at PHONE: a stacked table cell labelled as another column
    height: int = 0  # the page's height at DESKTOP, px

    def problems(self) -> list[str]:
        out = [f"console error: {e}" for e in self.console_errors]
        out += [f"request outside the built site: {u}" for u in self.outside_requests]
        out += [f"failed request: {u}" for u in self.failed_requests]
        out += [f"broken image: {s}" for s in self.broken_images]
        if self.math_elements and self.typeset_elements == 0:
            out.append(f"{self.math_elements} math element(s) but no MathJax output (raw TeX shown)")
        out += [f"raw TeX left on the page: {t!r}" for t in self.raw_tex]
        out += [f"display math wider than its column at {DESKTOP} px: {w}" for w in self.wide_displays]
        out += [f"display math wider than its column at {PHONE} px: {w}" for w in self.phone_wide_displays]
        out += [f"cell output scrolls sideways at {DESKTOP} px: {w}" for w in self.wide_outputs]
        out += [f"code cell cut off at {DESKTOP} px (scroll sideways to read it): {w}" for w in self.wide_code]
        out += [f"table shows a raw column name: {h!r}" for h in self.raw_headers]
        out += [f"figure text under {MIN_TEXT_PX} px at {DESKTOP} px: {s}" for s in self.small_text]
        out += [f"a Python repr leaks into the page: {r!r}" for r in self.reprs]
        out += [f"local file path in the page: {t!r}" for t in self.local_paths]
        out += [f"MathJax error: {t!r}" for t in self.math_errors]
        out += [
            f"table in a cell's output taller than {MAX_TABLE_PX} px at {DESKTOP} px: {t}" for t in self.tall_tables
        ]
        out += [f"code listing cut off at {PHONE} px (scroll sideways to read it): {w}" for w in self.phone_wide_code]
        out += [f"a cell labelled as another column at {PHONE} px: {t}" for t in self.phone_labels]
        return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on a free localhost port for the duration of the block; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


_INSPECT_JS = """
() => {
  const imgs = Array.from(document.images);
  const broken = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
  const math = document.querySelectorAll('.math, div.math, span.math').length;
  const typeset = document.querySelectorAll('mjx-container').length;
  // Visible text outside code and MathJax output that still looks like TeX.
  const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT);
  const raw = [];
  const pattern = /(\\$\\$|\\\\\\(|\\\\\\[|\\\\(frac|lambda|sum|mathrm|tilde|begin)\\b)/;
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const el = node.parentElement;
    if (!el || el.closest('pre, code, mjx-container, script, style, .highlight, .cell_output, .output')) continue;
    if (el.offsetParent === null) continue;
    if (pattern.test(node.textContent)) raw.push(node.textContent.trim().slice(0, 80));
  }
  return {images: imgs.length, broken, math, typeset, raw};
}
"""


# Every MathJax display (mjx-container[display="true"]) whose content is wider than the column it sits in:
# the block that holds it (Sphinx's div.math, or the cell output) scrolls or clips what is wider.
_WIDE_JS = """
() => Array.from(document.querySelectorAll('mjx-container[display="true"]')).flatMap(c => {
  const holder = c.parentElement;
  if (!holder || c.offsetParent === null) return [];
  const math = c.querySelector('mjx-math');
  const width = Math.max(c.scrollWidth, c.getBoundingClientRect().width, math ? math.getBoundingClientRect().width : 0);
  const avail = holder.clientWidth;
  if (width <= avail + 1 && c.scrollWidth <= c.clientWidth + 1) return [];
  const text = (c.getAttribute('aria-label') || c.textContent || '').replace(/\\s+/g, ' ').slice(0, 60);
  return [`${text} (${Math.round(width)} px in ${avail} px)`];
})
"""

# Every block inside a cell's output (printed text, a table, an image) that the reader would have to scroll
# sideways: content wider than the box, and the box scrolls (overflow-x auto or scroll) or clips it (hidden).
_WIDE_OUTPUT_JS = """
() => Array.from(document.querySelectorAll('.cell_output, .cell_output *')).flatMap(el => {
  if (el.offsetParent === null || el.closest('mjx-container')) return [];
  const over = el.scrollWidth - el.clientWidth;
  if (over <= 1 || el.clientWidth === 0) return [];
  const style = getComputedStyle(el).overflowX;
  if (!['auto', 'scroll', 'hidden'].includes(style)) return [];
  const text = (el.textContent || el.tagName).replace(/\\s+/g, ' ').trim().slice(0, 60);
  return [`${el.tagName.toLowerCase()} ${text} (${el.scrollWidth} px in ${el.clientWidth} px)`];
})
"""

# Every code listing wider than its box (the reader would scroll sideways to read a line): a cell's source, a
# listing in the prose, an example on an API page.
_WIDE_CODE_JS = """
() => Array.from(document.querySelectorAll('.cell_input pre, div.highlight pre')).flatMap(el => {
  if (el.offsetParent === null || el.clientWidth === 0 || el.scrollWidth - el.clientWidth <= 1) return [];
  const line = (el.textContent || '').split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
  return [`${line.trim().slice(0, 60)} (${el.scrollWidth} px in ${el.clientWidth} px)`];
})
"""

# Phones: a table stacked one cell a line labels each cell with its column's name (CSS ::before); the label must
# be that column's (the header's first word), not another's.
_PHONE_LABELS_JS = r"""
() => Array.from(document.querySelectorAll('table.glance-table')).flatMap(t => {
  const heads = Array.from(t.querySelectorAll('thead th')).map(th => th.textContent.trim());
  const rows = Array.from(t.querySelectorAll('tbody tr')).slice(0, 3);
  return rows.flatMap(tr => Array.from(tr.children).flatMap((td, i) => {
    const raw = getComputedStyle(td, '::before').content;
    if (!raw || raw === 'none' || raw === 'normal' || !heads[i]) return [];
    const label = raw.replace(/^["']|["']$/g, '').replace(/:\s*$/, '').trim();
    const word = label.split(/[\s']/)[0];
    return heads[i].split(/[\s·]/)[0].startsWith(word) ? [] : [`"${label}" on the column "${heads[i]}"`];
  }));
})
"""

# Column names of a table in a cell's output that are identifiers (``train_error``), not words for a reader.
_RAW_HEADERS_JS = """
() => Array.from(document.querySelectorAll('.cell_output table th'))
  .map(th => (th.textContent || '').trim())
  .filter(text => /^[a-z][a-z0-9]*(_[a-z0-9]+)+$/.test(text))
"""

# A figure's smallest text as shown: the book's figures are PNGs at ``FIGURE_DPI`` (their displayed
# resolution times the pixel density they are stored at) with no text under
# ``MIN_FIGURE_PT`` (the style's smallest size is 9.5 pt; a chapter may set 8 pt, never less: test_profile_plots),
# and the page shrinks a figure wider than its column, its text with it.
FIGURE_DPI = DPI * PIXEL_DENSITY
MIN_TEXT_PX = 9
MIN_FIGURE_PT = 8
_SMALL_TEXT_JS = """
([dpi, pt, minPx]) => Array.from(document.querySelectorAll('.cell_output img, figure img')).flatMap(img => {
  if (!img.naturalWidth || img.offsetParent === null) return [];
  const shown = pt * dpi / 72 * img.clientWidth / img.naturalWidth;
  if (shown >= minPx) return [];
  const name = (img.getAttribute('src') || '').split('/').pop().slice(0, 16);
  return [`${name} (${img.naturalWidth} px shown at ${img.clientWidth} px: ${pt} pt text at ${shown.toFixed(1)} px)`];
})
"""

# A table in a cell's output that, as shown (a collapsed <details> hides its table), is taller than two screens:
# a reader scrolls past it rather than reads it (the Checks lists group their rows by the paper's reference).
MAX_TABLE_PX = 1600
_TALL_TABLES_JS = """
(maxPx) => Array.from(document.querySelectorAll('.cell_output table')).flatMap(t => {
  if (t.offsetParent === null || t.closest('details:not([open])')) return [];
  const h = t.getBoundingClientRect().height;
  if (h <= maxPx) return [];
  const head = (t.querySelector('th, td') || t).textContent.replace(/\\s+/g, ' ').trim().slice(0, 40);
  return [`${head}: ${Math.round(h)} px, ${t.querySelectorAll('tbody tr').length} rows`];
})
"""

# Python reprs that a reader should never see: NumPy scalars printed inside a container, figure or object reprs.
_REPRS_JS = """
() => {
  const text = document.body ? document.body.innerText : '';
  const re = /np\\.(float|int|bool)_?\\d*\\([^)]{0,30}\\)|<Figure size [^>]{0,40}>|<[A-Za-z_.]+ object at 0x[0-9a-f]+>/g;
  return Array.from(new Set(text.match(re) || [])).slice(0, 5);
}
"""

# Local file paths anywhere in the page's text (rendered text, code and outputs included).
_PATHS_JS = """
(pattern) => {
  const text = document.body ? document.body.innerText : '';
  const re = new RegExp(pattern, 'g');
  const found = [];
  let m;
  while ((m = re.exec(text)) !== null && found.length < 10) {
    found.push(text.slice(Math.max(0, m.index - 30), m.index + 50).replace(/\\s+/g, ' '));
  }
  return found;
}
"""


def _local(url: str, base: str) -> bool:
    return url.startswith((base, "data:", "blob:")) or url == "about:blank"


def _route(route, base: str, report: PageReport) -> None:
    if _local(route.request.url, base):
        route.continue_()
    else:
        report.outside_requests.append(route.request.url)
        route.abort()


def inspect_site(root: Path, pages: list[str]) -> list[PageReport]:
    """Open each page of the built site in Chromium and collect a :class:`PageReport` for it."""
    from playwright.sync_api import sync_playwright

    reports = []
    with serve(root) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for rel in pages:
                report = PageReport(rel)
                page = browser.new_page(viewport={"width": DESKTOP, "height": 900})
                page.on(
                    "console",
                    lambda msg, r=report: (
                        r.console_errors.append(f"{msg.text} [{msg.location.get('url', '')}]")
                        if msg.type == "error"
                        else None
                    ),
                )
                page.on("pageerror", lambda exc, r=report: r.console_errors.append(str(exc)))
                # Requests for anything outside the built site are recorded and aborted before
                # they leave the machine; the page must work without them.
                page.route("**/*", lambda route, request, r=report: _route(route, base, r))
                page.on(
                    "requestfailed",
                    lambda req, r=report: r.failed_requests.append(req.url) if req.url.startswith(base) else None,
                )
                page.on(
                    "response",
                    lambda resp, r=report: (
                        r.failed_requests.append(f"{resp.status} {resp.url}") if resp.status >= 400 else None
                    ),
                )
                page.goto(base + rel, wait_until="load")
                # MathJax 3 typesets asynchronously: wait for its startup promise when it is on the page.
                page.evaluate("""async () => {
                    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
                        await MathJax.startup.promise;
                    }
                }""")
                page.wait_for_load_state("networkidle")
                found = page.evaluate(_INSPECT_JS)
                report.images = found["images"]
                report.broken_images = found["broken"]
                report.math_elements = found["math"]
                report.typeset_elements = found["typeset"]
                report.raw_tex = found["raw"]
                report.local_paths = page.evaluate(_PATHS_JS, LOCAL_PATH)
                report.math_errors = page.evaluate(
                    "() => Array.from(document.querySelectorAll('mjx-merror')).map(e => "
                    "(e.getAttribute('data-mjx-error') || e.textContent).slice(0, 80))"
                )
                report.wide_displays = page.evaluate(_WIDE_JS)
                report.wide_outputs = page.evaluate(_WIDE_OUTPUT_JS)
                report.wide_code = page.evaluate(_WIDE_CODE_JS)
                report.raw_headers = page.evaluate(_RAW_HEADERS_JS)
                report.reprs = page.evaluate(_REPRS_JS)
                report.small_text = page.evaluate(_SMALL_TEXT_JS, [FIGURE_DPI, MIN_FIGURE_PT, MIN_TEXT_PX])
                report.tall_tables = page.evaluate(_TALL_TABLES_JS, MAX_TABLE_PX)
                report.height = int(page.evaluate("() => document.documentElement.scrollHeight"))
                page.set_viewport_size({"width": PHONE, "height": 800})
                page.wait_for_timeout(50)
                report.phone_wide_displays = page.evaluate(_WIDE_JS)
                report.phone_wide_code = page.evaluate(_WIDE_CODE_JS)
                report.phone_labels = page.evaluate(_PHONE_LABELS_JS)
                page.close()
                reports.append(report)
        finally:
            browser.close()
    return reports


def search_snippets(root: Path, query: str) -> list[str]:
    """The text of the snippets that the built site's search page shows for ``query``."""
    from playwright.sync_api import sync_playwright

    with serve(root) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(base + f"search.html?q={query}", wait_until="load")
            count = "document.querySelectorAll('p.context').length"
            page.wait_for_function(f"{count} > 0", timeout=60_000)
            # the snippets arrive one hit at a time (each page is fetched): wait until their number settles
            seen = -1
            while (now := page.evaluate(count)) != seen:
                seen = now
                page.wait_for_timeout(1_000)
            return page.evaluate("Array.from(document.querySelectorAll('p.context')).map(p => p.textContent)")
        finally:
            browser.close()


def is_redirect(page: Path) -> bool:
    """True for the small pages Jupyter Book writes that only redirect (``<meta http-equiv="Refresh">``)."""
    head = page.read_text(encoding="utf-8", errors="replace")[:2000].lower()
    return 'http-equiv="refresh"' in head


def content_pages(site: Path) -> list[str]:
    """Paths, relative to ``site``, of every HTML page a reader can open (redirects and assets excluded)."""
    return sorted(
        str(p.relative_to(site))
        for p in site.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts and not is_redirect(p)
    )


if __name__ == "__main__":  # pragma: no cover - manual use
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "_build/html")
    pages = content_pages(site)
    for rep in inspect_site(site, pages):
        print(rep.path, f"images={rep.images} math={rep.math_elements} typeset={rep.typeset_elements}")
        for problem in rep.problems():
            print("   ", problem)
