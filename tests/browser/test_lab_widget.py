"""Browser test: lesson 02's speed-up widget works in a real JupyterLab.

A unit test can call :func:`hybridlab.viz.plots.speedup_callback`, but only a browser shows
that the sliders render (ipywidgets' JavaScript extension is installed and matches the kernel's
ipywidgets) and that moving one makes the kernel redraw the plot. So this test opens a tiny
notebook in the session's JupyterLab (``conftest.py``), runs it, presses an arrow key on the
depth slider and checks that the slider's readout, the summary line and the image all change.
"""

from __future__ import annotations

import re
import sys

import pytest
from labtools import STEP_MS, WIDGET_SECONDS, Lab, cell_output_text, open_and_run, write_notebook

# The smallest network the sliders allow, so each redraw measures in well under a second.
CELL = """import sys
print(sys.executable)
from hybridlab.lab import timing
from hybridlab.viz import plots
plots.speedup_widget(batch_size=1, width=16, depth=1, network_kind=timing.CUSTOM)"""

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_depth_slider_redraws_the_plot(page, lab: Lab) -> None:  # page first: skips early
    from playwright.sync_api import expect

    open_and_run(page, lab, write_notebook(lab, "speedup.ipynb", [CELL]))
    depth = page.locator(".widget-hslider", has_text="depth")
    try:
        expect(depth).to_be_visible(timeout=WIDGET_SECONDS * 1000)
    except AssertionError:
        pytest.fail("the speed-up widget's sliders did not render in JupyterLab (is ipywidgets "
                    "installed in the kernel and its lab extension in the server's environment?)"
                    f"\ncell output:\n{cell_output_text(page)}\nserver log:\n{lab.log_tail()}")
    kernel_python = page.locator(".jp-OutputArea-output", has_text=sys.executable)
    expect(kernel_python, "the kernel is not this interpreter").to_have_count(1, timeout=STEP_MS)
    readout = depth.locator(".widget-readout")
    widget = page.locator(".hybridlab-speedup").first
    line = widget.locator(".widget-html").first  # the summary line above the controls
    expect(readout).to_have_text("1", timeout=STEP_MS)
    expect(line).to_contain_text("1 x Dense(16) + Dense(10), batch 1:", timeout=STEP_MS)
    image = widget.locator("img").last
    expect(image).to_have_attribute("src", re.compile(r"^blob:"), timeout=STEP_MS)  # an Image
    before = image.get_attribute("src")

    depth.locator(".noUi-handle").press("ArrowRight")  # one step: depth 1 -> 2

    expect(readout).to_have_text("2", timeout=STEP_MS)
    expect(line).to_contain_text("2 x Dense(16) + Dense(10), batch 1:",  # the kernel redrew
                                 timeout=WIDGET_SECONDS * 1000)
    expect(image).not_to_have_attribute("src", before, timeout=STEP_MS)
