"""Browser test: every tracked notebook, opened untrusted and not run, shows its pictures.

A fresh clone's notebooks are untrusted, so JupyterLab renders neither their SVG and HTML
outputs nor widgets from saved state; it falls back to the richest *safe* form of each
output. Every graph, panel and instrument of the course therefore carries an ``image/png``
in the same bundle (``hybridlab.viz.bundle``). This test copies each notebook into the
session's lab (where nothing is trusted), opens it without running it, and checks that
every output bundle holding a rich form shows its PNG as an image.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labtools import STEP_MS, Lab, open_notebook

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
RICH = ("image/svg+xml", "text/html", "application/vnd.jupyter.widget-view+json")

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def rich_outputs(path: Path) -> tuple[int, int]:
    """(outputs with a rich form, how many of them carry an image/png too)."""
    rich = with_png = 0
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if any(mime in data for mime in RICH):
                rich += 1
                with_png += "image/png" in data
    return rich, with_png


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")))
def test_an_unopened_untrusted_notebook_shows_every_picture(page, lab: Lab, name: str) -> None:
    from playwright.sync_api import expect

    rich, with_png = rich_outputs(NOTEBOOKS / name)
    assert with_png == rich, f"{name}: {rich - with_png} rich output(s) without an image/png"
    # a copy no other test of the session can have trusted: Jupyter trusts a notebook by
    # its content's signature, and the laptop-window and moments tests open these same
    # lessons trusted in this lab
    notebook = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    notebook["metadata"]["hybridlab_untrusted_copy"] = True
    (lab.root / name).write_text(json.dumps(notebook), encoding="utf-8")
    open_notebook(page, lab, name)
    # Every output that carries a PNG shows a picture: the PNG itself (SVG and widgets are
    # not shown untrusted), or, for an HTML panel (shown sanitised), its embedded PNGs.
    pictures = page.locator(".jp-OutputArea-output:has(img[src^='data:image/png'])")
    plots = sum(1 for cell in json.loads((NOTEBOOKS / name).read_text())["cells"]
                for output in cell.get("outputs", []) if "image/png" in output.get("data", {}))
    expect(pictures).to_have_count(plots, timeout=STEP_MS)
    assert page.locator(".jp-OutputArea-output svg").count() == 0  # untrusted: no SVG drawn
