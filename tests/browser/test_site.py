"""Browser test: the static course site (``make site``) works offline.

The site is built once per session from the tracked notebooks into a temporary folder
(``tools/build_site.py``; the widget manager, require.js and MathJax come from npm on the
first build and are cached in ``build/site-vendor/``). Chromium opens it from disk in an
*offline* context, follows the contents to every lesson, and checks that each lesson shows
its navigation and its first picture, and that saved widgets come back drawn by the
vendored widget manager (the queue stepper of lesson 03 with its SVG drawing).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

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
    links = page.locator(".hl-page li > a:not([download])")
    expect(links).to_have_count(len(NOTEBOOKS))
    for index, notebook in enumerate(NOTEBOOKS):
        page.goto((site / "index.html").as_uri())
        page.locator(".hl-page li > a:not([download])").nth(index).click()
        expect(page).to_have_url((site / f"{notebook.stem}.html").as_uri())
        expect(page.locator(".hl-nav .hl-here")).to_be_visible()
        expect(page.locator(f".hl-nav a[href='notebooks/{notebook.name}']")).to_have_count(1)
        if has_pictures(notebook):
            first_picture = page.locator(".jp-OutputArea-output img").first
            expect(first_picture).to_be_visible()
            assert first_picture.evaluate("img => img.naturalWidth") > 0, notebook.name
        if has_widgets(notebook):  # drawn from saved state by the vendored widget manager
            expect(page.locator(".jp-OutputArea-output .widget-box").first).to_be_visible()
    page.goto((site / "03-lazy-evaluation.html").as_uri())
    stepper = page.locator(".hybridlab-queue-stepper").first
    expect(stepper).to_be_visible()
    expect(stepper.locator("svg").first).to_be_visible()
    expect(stepper.get_by_role("button", name="Step")).to_be_visible()
    page.locator(".hl-nav a", has_text="next:").click()  # previous/next links work
    expect(page).not_to_have_url((site / "03-lazy-evaluation.html").as_uri())
