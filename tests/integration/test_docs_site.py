"""The documentation site as a reader meets it (issue 42): ``./dev docs`` builds it from scratch
with warnings as errors and prints the page to open; served on 127.0.0.1, its search finds the
guide's pages and its gallery lists examples that ran at build time, with the figures they drew
(seen failing with the gallery not executed, ``plot_gallery: False``).
Screenshots go to test-artifacts/."""

from __future__ import annotations

import functools
import re
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from _browser import browser
from _stack import ARTIFACTS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "docs" / "_build" / "html"
EXAMPLES = sorted(p.stem for p in (ROOT / "docs" / "examples").glob("plot_*.py"))


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """``./dev docs`` once, then the built folder served over HTTP on a free loopback port."""
    done = subprocess.run([str(ROOT / "dev"), "docs"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"./dev docs failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert f"file://{SITE}/index.html" in done.stdout, done.stdout
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _js(page, expression: str):
    return page.send("Runtime.evaluate", expression=expression,
                     returnByValue=True).get("result", {}).get("value")


@pytest.mark.parametrize("query, page_title", [("zeta", "Choosing the settings"),
                                               ("ledger", "The ledger and budgets")])
def test_search_finds_the_guide_pages(site: str, query: str, page_title: str) -> None:
    with browser({}) as page:
        page.goto(f"{site}/search.html?q={query}")
        text = page.wait_text(["Search Results", "Search finished"], timeout=60,
                              what=f"the search page for {query!r}")
        found = re.search(r"found (\d+) pages?", text)
        assert found and int(found.group(1)) > 0, text[:2000]
        titles = _js(page, "[...document.querySelectorAll('#search-results li a')]"
                           ".map(a => a.textContent.trim())")
        assert page_title in titles, titles
        page.screenshot(ARTIFACTS / f"docs_search_{query}.png")


def test_gallery_lists_executed_examples_with_their_figures(site: str) -> None:
    assert EXAMPLES, "no gallery sources in docs/examples"
    with browser({}) as page:
        page.goto(f"{site}/auto_examples/index.html")
        page.wait_text(["Gallery"], timeout=60, what="the gallery page")
        thumbs = _js(page, "[...document.querySelectorAll('.sphx-glr-thumbcontainer')].map(t => "
                           "({href: t.querySelector('a').getAttribute('href'), "
                           "img: t.querySelector('img').getAttribute('src'), "
                           "width: t.querySelector('img').naturalWidth}))")
        listed = sorted(Path(t["href"]).stem for t in thumbs)
        assert listed == EXAMPLES, thumbs
        # each thumbnail drawn from its example's own figure: sphinx-gallery's placeholder, given
        # to an example that drew nothing, would be the same image for every example
        assert all(t["width"] > 0 for t in thumbs), thumbs
        images = [urllib.request.urlopen(f"{site}/auto_examples/{t['img']}", timeout=10).read()
                  for t in thumbs]
        assert len(set(images)) == len(images), [t["img"] for t in thumbs]
        page.screenshot(ARTIFACTS / "docs_gallery.png")

        for name in EXAMPLES:
            page.goto(f"{site}/auto_examples/{name}.html")
            text = page.wait_text(["Go to the end"], timeout=60, what=f"the example {name}")
            # what only running it gives: the printed output and the drawn figures
            outputs = _js(page, "document.querySelectorAll('.sphx-glr-script-out').length")
            figures = _js(page, "[...document.querySelectorAll('img.sphx-glr-single-img, "
                                "img.sphx-glr-multi-img')].map(i => i.naturalWidth)")
            assert outputs and figures and all(w > 0 for w in figures), (name, outputs, figures)
            assert "Traceback" not in text, name
        page.screenshot(ARTIFACTS / f"docs_example_{EXAMPLES[-1]}.png")
