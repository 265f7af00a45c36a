"""Browser test: the static course site (``make site``) works offline.

The site is built once per session from the tracked notebooks into a temporary folder
(``tools/build_site.py``; the widget manager, require.js and MathJax come from npm on the
first build and are cached in ``build/site-vendor/``). Chromium opens it from disk in an
*offline* context, follows the contents to every lesson, and checks that each lesson shows
its navigation and its first picture, and that saved widgets come back drawn by the
vendored widget manager (the queue stepper of lesson 03 with its SVG drawing, each display
saying it is a saved snapshot, its buttons hidden). A crawler
follows every link of every page (no broken link, no file: path of the building machine),
widget text is in one font family, and the notebook downloads from disk and over HTTP.
"""

from __future__ import annotations

import json
import shutil
import sys
from functools import partial
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from urllib.parse import unquote, urlsplit

import pytest

from hybridlab.viz.bundle import SNAPSHOT_NOTICE

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
STATE = "application/vnd.jupyter.widget-state+json"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if shutil.which("npm") is None and not (ROOT / "build" / "site-vendor" / "require.js").exists():
        pytest.skip("npm is needed once to fetch the site's widget manager (apt-get install npm)")
    sys.path.insert(0, str(ROOT / "tools"))
    import build_site

    out = tmp_path_factory.mktemp("site")
    build_site.build(out)
    return out


@pytest.fixture
def offline_page(browser):
    context = browser.new_context(offline=True, viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        yield page
    finally:
        context.close()


def has_pictures(notebook: Path) -> bool:
    return any("image/png" in output.get("data", {})
               for cell in json.loads(notebook.read_text())["cells"]
               for output in cell.get("outputs", []))


def has_widgets(notebook: Path) -> bool:
    state = json.loads(notebook.read_text())["metadata"].get("widgets", {}).get(STATE, {})
    return bool(state.get("state"))


def test_every_lesson_is_reachable_offline_with_its_pictures_and_widgets(site, offline_page):
    from playwright.sync_api import expect

    page = offline_page
    page.goto((site / "index.html").as_uri())
    links = page.locator(".hl-page li > a:first-child")
    expect(links).to_have_count(len(NOTEBOOKS))
    for index, notebook in enumerate(NOTEBOOKS):
        page.goto((site / "index.html").as_uri())
        # Wait for conditions, not for Playwright's default 5 s: a big lesson page (05's)
        # takes longer than that to load on a busy machine. The load event comes once the
        # page and its pictures are in; the widgets are drawn by scripts after it.
        with page.expect_navigation(url=(site / f"{notebook.stem}.html").as_uri(),
                                    wait_until="load"):
            page.locator(".hl-page li > a:first-child").nth(index).click()
        expect(page.locator(".hl-nav .hl-here")).to_be_visible()
        expect(page.locator(f".hl-nav a[download='{notebook.name}']")).to_have_count(1)
        if has_pictures(notebook):
            first_picture = page.locator(".jp-OutputArea-output img").first
            expect(first_picture).to_be_visible()
            assert first_picture.evaluate("img => img.complete && img.naturalWidth") > 0, \
                notebook.name
        if has_widgets(notebook):  # drawn from saved state by the vendored widget manager
            page.wait_for_selector(".jp-OutputArea-output .widget-box", state="visible")
        # no control that cannot compute: an instrument's buttons, menus, sliders are gone
        controls = page.locator(".hybridlab-moment :is(.widget-button, .widget-dropdown, "
                                ".widget-slider, .widget-toggle-buttons, .widget-checkbox)")
        assert not any(c.is_visible() for c in controls.all()), notebook.name
    page.goto((site / "03-lazy-evaluation.html").as_uri())
    stepper = page.locator(".hybridlab-queue-stepper").first
    stepper.locator("svg").first.wait_for(state="visible")  # drawn after the page loaded
    # saved, not live: each moment says so, and the controls that cannot compute are gone
    moments = page.locator(".hybridlab-moment")
    expect(moments.first).to_be_visible()
    for index in range(moments.count()):
        expect(moments.nth(index).get_by_text(SNAPSHOT_NOTICE)).to_be_visible()
    expect(stepper.get_by_role("button", name="Step")).to_be_hidden()
    with page.expect_navigation(wait_until="load"):  # previous/next links work
        page.locator(".hl-nav a", has_text="next:").click()
    expect(page).not_to_have_url((site / "03-lazy-evaluation.html").as_uri())


class Links(HTMLParser):
    """Every link target (href, src) and every anchor (id, name) of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []
        self.anchors: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("href", "src") and tag in ("a", "img", "script", "link", "iframe"):
                self.targets.append(value)
            if name == "id" or (name == "name" and tag == "a"):
                self.anchors.add(value)


def crawl(site: Path) -> tuple[set[Path], list[str]]:
    """Follow every local link from index.html: (pages reached, broken links found)."""
    parsed: dict[Path, Links] = {}
    broken: list[str] = []
    todo = [site / "index.html"]
    while todo:
        page = todo.pop()
        if page in parsed:
            continue
        parsed[page] = links = Links()
        links.feed(page.read_text(encoding="utf-8"))
        for target in links.targets:
            url = urlsplit(target)
            if url.scheme in ("data", "mailto", "http", "https") or target.startswith("//"):
                continue  # self-contained, or outside the site (never needed offline)
            if url.scheme:  # file: paths of the building machine, javascript:, ...
                broken.append(f"{page.name}: {target[:80]} (a {url.scheme}: link)")
                continue
            path = (page.parent / unquote(url.path)).resolve() if url.path else page
            if not path.is_file() or site.resolve() not in path.parents:
                broken.append(f"{page.name}: {target[:80]} (no such file in the site)")
            elif path.suffix == ".html":
                todo.append(path)
    for page, links in list(parsed.items()):  # fragments: the target page has that id
        for target in links.targets:
            url = urlsplit(target)
            if url.scheme or not url.fragment:
                continue
            path = (page.parent / unquote(url.path)).resolve() if url.path else page
            # as a browser does: the fragment as written, then percent-decoded
            found = {url.fragment, unquote(url.fragment)} & parsed.get(path, Links()).anchors
            if path in parsed and not found:
                broken.append(f"{page.name}: {target[:80]} (no such anchor)")
    return set(parsed), broken


def test_every_link_of_every_page_resolves(site) -> None:
    pages, broken = crawl(site)
    built = {p.resolve() for p in site.glob("*.html")}
    assert {p.resolve() for p in pages} == built, "pages no link reaches"
    assert not broken, f"{len(broken)} broken link(s):\n" + "\n".join(broken[:40])
    api = (site / "api.html").read_text(encoding="utf-8")
    assert ":class:`" not in api and ":func:`" not in api and "``" not in api  # no raw RST
    assert api.count('<div class="hl-api"') > 20  # the reference documents real names


def test_widget_text_uses_one_font_family(site, offline_page) -> None:

    page = offline_page
    page.goto((site / "03-lazy-evaluation.html").as_uri())
    page.locator(".hybridlab-queue-stepper").first.wait_for(state="visible")
    families = page.evaluate("""() => {
        const found = new Set();
        for (const el of document.querySelectorAll('.jupyter-widgets *:not(script):not(style)')) {
            if ([...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
                found.add(getComputedStyle(el).fontFamily);
        }
        return [...found];
    }""")
    assert len(families) == 1, families
    assert "serif" not in families[0].replace("sans-serif", ""), families


@pytest.mark.parametrize("over", ["disk", "http"])
def test_the_notebook_downloads(site, browser, over: str) -> None:
    notebook = ROOT / "notebooks" / "03-lazy-evaluation.ipynb"
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    server = None
    try:
        if over == "http":
            handler = partial(SimpleHTTPRequestHandler, directory=str(site))
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            Thread(target=server.serve_forever, daemon=True).start()
            page.goto(f"http://127.0.0.1:{server.server_port}/{notebook.stem}.html")
        else:
            page.goto((site / f"{notebook.stem}.html").as_uri())
        with page.expect_download(timeout=30_000) as download:
            page.locator("#hl-download").click()
        assert download.value.suggested_filename == notebook.name
        assert Path(download.value.path()).read_bytes() == notebook.read_bytes()
    finally:
        context.close()
        if server is not None:
            server.shutdown()
            server.server_close()
