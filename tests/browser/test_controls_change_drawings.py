"""Browser test: every control of every instrument changes the drawing itself -- its
picture differs after the change -- not only a line of text. A control that could change
nothing drawn (a menu of one choice, costs that give the same schedule, a chain/tree
switch for a graph without chains of sums) is not shown at all.

The instruments run live (``gallery.py``); each visible control is changed once and the
instrument's pictures (its images and SVG) are compared before and after.
"""

from __future__ import annotations

import time

import pytest
from gallery import CELLS
from labtools import STEP_MS, WIDGET_SECONDS, Lab, open_and_run, wait_kernel_idle, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
INSTRUMENTS = ["hybridlab-pass-explorer", "hybridlab-schedule-explorer",
               "hybridlab-memory-explorer", "hybridlab-allreduce-explorer", "hybridlab-speedup"]
PICTURE = """root => [...root.querySelectorAll("img")].map(image => image.src).join("|")
    + [...root.querySelectorAll("svg")].map(svg => svg.outerHTML).join("|")"""
ALL_RAN = """() => window.jupyterapp.shell.currentWidget.content.widgets
    .filter(cell => cell.model.type === "code")
    .every(cell => cell.model.executionCount !== null)"""


def changed(page, lab: Lab, root, before: str) -> bool:
    """Whether the instrument's picture differs from ``before`` once the kernel is done."""
    deadline = time.monotonic() + STEP_MS / 1000
    while time.monotonic() < deadline:
        wait_kernel_idle(page, lab)
        if root.evaluate(PICTURE) != before:
            return True
        page.wait_for_timeout(250)
    return False


def controls(root) -> list[tuple[str, object]]:
    """Every visible control of an instrument, as (what it is, how to change it); toggles
    last, since one may hide controls that only its other choice uses."""
    found = []
    for handle in root.locator(".widget-hslider:visible .noUi-handle").all():
        label = handle.locator("xpath=ancestor::div[contains(@class,'widget-hslider')]")
        name = label.locator(".widget-label").first.inner_text()
        at_end = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        key = "ArrowLeft" if at_end else "ArrowRight"
        found.append((f"slider {name!r}", lambda h=handle, k=key: h.press(k)))
    for select in root.locator(".widget-dropdown select:visible").all():
        options = select.locator("option").all_inner_texts()
        current = select.evaluate("s => s.options[s.selectedIndex].text")
        for other in [o for o in options if o != current] + [current]:  # each choice in turn
            found.append((f"menu to {other!r}",
                          lambda s=select, o=other: s.select_option(label=o)))
    for box in root.locator(".widget-checkbox input:visible").all():
        found.append(("checkbox", box.click))
    for number in root.locator(".widget-text input:visible").all():
        found.append(("number box", lambda n=number: (n.fill("1"), n.press("Enter"))))
    for button in root.locator(".widget-toggle-buttons button:visible").all():
        if "mod-active" not in (button.get_attribute("class") or ""):
            found.append((f"toggle {button.inner_text()!r}", button.click))
    return found


def test_every_control_changes_the_drawing(page, lab: Lab) -> None:
    open_and_run(page, lab, write_notebook(lab, "controls.ipynb", CELLS))
    page.wait_for_function(ALL_RAN, timeout=WIDGET_SECONDS * 4000)
    page.locator(".hybridlab-speedup img").first.wait_for(timeout=WIDGET_SECONDS * 1000)
    wait_kernel_idle(page, lab)
    inert, tried = [], 0
    for css in INSTRUMENTS:
        for root in page.locator(f".{css}").all():
            for what, change in controls(root):
                before = root.evaluate(PICTURE)
                change()
                tried += 1
                if not changed(page, lab, root, before):
                    inert.append(f"{css}: {what}")
    assert tried >= 15 and inert == [], inert


def test_each_stepper_button_changes_the_queue_drawing(page, lab: Lab) -> None:
    cells = ["""from hybridlab import nd
from hybridlab.viz.stepper import queue_stepper
stepper = queue_stepper()
a = nd.ones((2, 2))
b = a * 2
stepper""", "c = nd.ones((2, 2)) + 1"]
    open_and_run(page, lab, write_notebook(lab, "stepper-buttons.ipynb", cells[:1]))
    root = page.locator(".hybridlab-queue-stepper").first
    root.wait_for(timeout=WIDGET_SECONDS * 1000)
    wait_kernel_idle(page, lab)
    steps = [("Step", lambda: root.get_by_role("button", name="Step").click()),
             ("Sync on b", lambda: (root.locator("select").select_option(label="b"),
                                    root.get_by_role("button", name="Sync on").click())),
             ("Reset", lambda: root.get_by_role("button", name="Reset").click())]
    for what, act in steps:
        before = root.evaluate(PICTURE)
        act()
        assert changed(page, lab, root, before), what
