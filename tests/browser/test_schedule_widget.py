"""Browser test: the schedule explorer in a real JupyterLab -- move the workers slider and
see the makespan change; switch the sums to a tree and see the span drop."""

from __future__ import annotations

import pytest
from labtools import STEP_MS, Lab, run_instrument

CELLS = ["""from hybridlab import engine, nd
from hybridlab.viz.schedule import TaskGraph, schedule_explorer
held = engine.StepEngine()
with engine.engine_scope(held):
    xs = [nd.ones((2,)) * i for i in range(8)]
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    graph = TaskGraph.from_tasks(held.tasks)
    held.run()
schedule_explorer(graph, workers=2)"""]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_workers_slider_and_reduction_switch_change_the_schedule(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    widget = run_instrument(page, lab, "schedule.ipynb", CELLS, "hybridlab-schedule-explorer",
                            "the schedule explorer")
    numbers = widget.locator(".widget-html", has_text="makespan")
    expect(numbers).to_contain_text("23 tasks on 2 worker(s)", timeout=STEP_MS)
    expect(numbers).to_contain_text("makespan 12 ", timeout=STEP_MS)
    image = widget.locator("img").first
    before = image.get_attribute("src")

    slider = widget.locator(".widget-hslider", has_text="workers")
    slider.locator(".noUi-handle").press("ArrowRight")  # 2 -> 3 workers

    expect(numbers).to_contain_text("on 3 worker(s)", timeout=STEP_MS)
    expect(numbers).to_contain_text("makespan 9 ", timeout=STEP_MS)
    expect(image).not_to_have_attribute("src", before, timeout=STEP_MS)

    widget.get_by_role("button", name="tree").click()

    expect(numbers).to_contain_text("tree reductions", timeout=STEP_MS)
    expect(numbers).to_contain_text("span 5,", timeout=STEP_MS)
