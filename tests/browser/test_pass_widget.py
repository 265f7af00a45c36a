"""Browser test: the pass explorer in a real JupyterLab -- move the stage slider and see
the drawing and the headline change."""

from __future__ import annotations

import pytest
from labtools import STEP_MS, Lab, run_instrument

CELLS = ["""from hybridlab import sym
from hybridlab.viz.pass_explorer import pass_explorer
x = sym.var("x")
y = (sym.relu(x) + sym.relu(x)) * 3.0 + 1.0
pass_explorer(y, shape={"x": (2, 3)})"""]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_the_stage_slider_changes_the_drawing(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    widget = run_instrument(page, lab, "passes.ipynb", CELLS, "hybridlab-pass-explorer",
                            "the pass explorer")
    headline = widget.locator(".widget-html", has_text="stage")
    expect(headline).to_contain_text("stage 7/7: plan_memory", timeout=STEP_MS)
    before = widget.locator("svg").first.evaluate("svg => svg.outerHTML")

    widget.locator(".noUi-handle").press("Home")  # the first stage: the input graph

    expect(headline).to_contain_text("stage 0/7: the input graph", timeout=STEP_MS)
    page.wait_for_function("""before => {
        const drawing = document.querySelector(".hybridlab-pass-explorer svg");
        return drawing !== null && drawing.outerHTML !== before;
    }""", arg=before, timeout=STEP_MS)
