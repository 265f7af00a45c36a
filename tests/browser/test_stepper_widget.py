"""Browser test: the queue stepper in a real JupyterLab -- click Step and see a task turn
done; choose an array in "Sync on", click, and see only the tasks it needs run.

The drawing is graphviz SVG inside the widget; a task's state is its fill colour (the
shared palette), so the test counts the SVG shapes filled with the ``done`` colour (one of
them is the legend's) and reads the counter line above the drawing. In the dark theme, the
per-array queue chips keep a text contrast of at least 4.5:1 (WCAG AA), computed from the
colours the browser applies.
"""

from __future__ import annotations

import re

import pytest
from labtools import STEP_MS, Lab, run_instrument, wait_kernel_idle

from hybridlab.viz.palette import STATE_COLOURS, contrast_ratio

CELLS = ["""from hybridlab import nd
from hybridlab.viz.stepper import queue_stepper
stepper = queue_stepper()
a = nd.ones((2, 2))          # #0
b = a * 2                    # #1: needs a
stepper""",
         """c = nd.ones((2, 2)) + 1   # #2, #3, pushed by a later cell; independent of a, b"""]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_step_and_sync_change_the_drawing(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    widget = run_instrument(page, lab, "stepper.ipynb", CELLS, "hybridlab-queue-stepper",
                            "the queue stepper")
    done_shapes = widget.locator(f"svg [fill='{STATE_COLOURS['done']}']")
    counter = widget.locator(".widget-html", has_text="pushed")
    # the second cell's tasks appear without re-running the first (the post_run_cell hook)
    expect(counter).to_contain_text("4 pushed · 0 done", timeout=STEP_MS)
    expect(done_shapes).to_have_count(1, timeout=STEP_MS)  # only the legend's
    # every click waits for the kernel to be idle -- both cells run, the last click handled
    # and the widget redrawn -- so a slow kernel never has a click land on a stale drawing
    wait_kernel_idle(page, lab)

    widget.get_by_role("button", name="Step").click()

    expect(counter).to_contain_text("1 done", timeout=STEP_MS)
    expect(done_shapes).to_have_count(2, timeout=STEP_MS)  # a's task is drawn done
    wait_kernel_idle(page, lab)

    select = widget.locator("select")
    select.select_option("c")
    expect(select).to_have_value("c", timeout=STEP_MS)  # not reset by a late redraw
    wait_kernel_idle(page, lab)
    widget.get_by_role("button", name="Sync on").click()

    expect(counter).to_contain_text("3 done", timeout=STEP_MS)  # c's two tasks, not b's
    expect(done_shapes).to_have_count(4, timeout=STEP_MS)
    expect(counter).to_contain_text("1 pending", timeout=STEP_MS)


def rgb_hex(css: str) -> str:
    """``rgb(r, g, b)`` (a computed style) as ``#rrggbb``."""
    r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def test_queue_chips_keep_their_contrast_in_the_dark_theme(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    widget = run_instrument(page, lab, "chips.ipynb", CELLS, "hybridlab-queue-stepper",
                            "the queue stepper")
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme',"
                  " {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'",
                           timeout=STEP_MS)
    chips = widget.locator(".hybridlab-chip")
    expect(chips.first).to_be_visible(timeout=STEP_MS)
    colours = chips.evaluate_all("""chips => chips.map(c => {
        const style = getComputedStyle(c);
        return [style.color, style.backgroundColor];
    })""")
    assert len(colours) >= 4
    widget.screenshot(path=str(lab.root / "dark-stepper.png"))
    for text, fill in colours:
        ratio = contrast_ratio(rgb_hex(text), rgb_hex(fill))
        assert ratio >= 4.5, f"chip text {text} on {fill}: contrast {ratio:.2f} < 4.5"
