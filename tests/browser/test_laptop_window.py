"""Browser test: every instrument and code view fits a 1280 x 800 laptop window -- no
output scrolls sideways, no picture is wider than its output area or shrunk below 9-pixel
text, no HTML text is smaller than 9 px, and no instrument is taller than the screen.

Checked twice: the instruments run live (``gallery.py``), and the lessons' saved outputs
as a student opens them (trusted, not run): what ``make notebooks`` stored.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gallery import CELLS
from labtools import WIDGET_SECONDS, Lab, jupyter_env, open_and_run, open_notebook, write_notebook

ROOT = Path(__file__).resolve().parents[2]
STATE = "application/vnd.jupyter.widget-state+json"
WITH_WIDGETS = [path for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
                if json.loads(path.read_text(encoding="utf-8"))["metadata"].get(
                    "widgets", {}).get(STATE, {}).get("state")]
SMALLEST_TEXT = 9  # px
DRAWN_TEXT = 12  # px: the drawings' smallest text at their natural size (9 pt at 96 dpi)
pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

MISFITS = f"""() => {{
    const found = [];
    for (const output of document.querySelectorAll(".jp-OutputArea-output")) {{
        const width = output.clientWidth;
        if (output.scrollWidth > width + 1) {{
            found.push(`output scrolls sideways: ${{output.scrollWidth}} > ${{width}} px`);
        }}
        for (const element of output.querySelectorAll("*")) {{
            if (element.offsetParent === null) continue;
            if (element.scrollWidth > element.clientWidth + 1 &&
                    getComputedStyle(element).overflowX !== "visible" &&
                    element.closest(".jp-OutputArea-output") === output &&
                    element.tagName !== "PRE") {{
                const inside = [...element.children].map(c => `${{c.className.split(" ")
                    .filter(n => n.startsWith("widget-") || n.startsWith("hybridlab"))
                    .join(".")}}:${{c.scrollWidth}}`).join(", ");
                found.push(`${{element.tagName}}.${{element.className.split(" ").pop()}} `
                           + `scrolls sideways (${{element.scrollWidth}} > `
                           + `${{element.clientWidth}} px; inside: ${{inside}})`);
            }}
        }}
        for (const image of output.querySelectorAll("img")) {{
            if (image.offsetParent === null || !image.naturalWidth) continue;
            const shown = image.getBoundingClientRect().width;
            if (shown > width + 1) found.push(`image ${{shown}} px wide in ${{width}} px`);
            const text = {DRAWN_TEXT} * shown / image.naturalWidth;
            if (text < {SMALLEST_TEXT}) {{
                found.push(`image shrunk to ${{(100 * shown / image.naturalWidth).toFixed(0)}}%`
                           + ` (its text ${{text.toFixed(1)}} px)`);
            }}
        }}
        for (const element of output.querySelectorAll("*")) {{
            if (element.offsetParent === null || element.closest("svg")) continue;
            const own = [...element.childNodes]
                .some(n => n.nodeType === 3 && n.textContent.trim());
            const size = parseFloat(getComputedStyle(element).fontSize);
            if (own && size < {SMALLEST_TEXT}) {{
                found.push(`text ${{size}} px: ${{element.tagName}}`);
            }}
        }}
        for (const widget of output.querySelectorAll(":scope .jupyter-widgets.widget-vbox")) {{
            const height = widget.getBoundingClientRect().height;
            if (!widget.parentElement.closest(".jupyter-widgets") && height > 800) {{
                const parts = [...widget.querySelectorAll(":scope > *")].map(c =>
                    `${{c.className.split(" ").pop()}}:${{c.getBoundingClientRect().height
                        .toFixed(0)}}`).join(", ");
                found.push(`an instrument ${{height.toFixed(0)}} px tall (${{parts}})`);
            }}
        }}
    }}
    return found;
}}"""
ALL_RAN = """() => window.jupyterapp.shell.currentWidget.content.widgets
    .filter(cell => cell.model.type === "code")
    .every(cell => cell.model.executionCount !== null)"""


@pytest.fixture
def laptop(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        yield page
    finally:
        context.close()


def test_every_instrument_fits_a_laptop_window_when_run(laptop, lab: Lab) -> None:
    open_and_run(laptop, lab, write_notebook(lab, "laptop.ipynb", CELLS))
    laptop.wait_for_function(ALL_RAN, timeout=WIDGET_SECONDS * 4000)
    laptop.locator(".hybridlab-speedup img").first.wait_for(timeout=WIDGET_SECONDS * 1000)
    laptop.wait_for_timeout(2000)
    misfits = laptop.evaluate(MISFITS)
    assert misfits == [], "\n".join(misfits)


@pytest.mark.parametrize("source", WITH_WIDGETS, ids=[p.stem[:2] for p in WITH_WIDGETS])
def test_every_saved_instrument_fits_a_laptop_window(laptop, lab: Lab, source: Path) -> None:
    target = lab.root / f"laptop-{source.name}"
    target.write_bytes(source.read_bytes())
    subprocess.run([sys.executable, "-m", "jupyter", "trust", str(target)],
                   env=jupyter_env(lab.root), check=True, capture_output=True)
    open_notebook(laptop, lab, target.name)
    laptop.locator(".jp-OutputArea-output .jupyter-widgets").first.wait_for(
        state="attached", timeout=WIDGET_SECONDS * 1000)
    laptop.wait_for_timeout(3000)
    misfits = laptop.evaluate(MISFITS)
    assert misfits == [], "\n".join(misfits)
