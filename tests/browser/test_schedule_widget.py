"""Browser test: the schedule explorer in a real JupyterLab -- move the workers slider and
see the makespan change; switch the sums to a tree and see the span drop."""

from __future__ import annotations

import pytest
from labtools import STEP_MS, Lab, run_instrument

CELLS = ["""from hybridlab import engine, nd
from hybridlab.lab.schedule import TaskGraph
from hybridlab.viz.schedule import schedule_explorer
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


DEVICE_CELLS = ["""from hybridlab.viz.schedule import schedule_explorer
steps = {}
for i in range(4):
    steps[f"matmul{i}"] = (3.0, [f"matmul{i - 1}"] if i else [], "gpu")
    steps[f"copy{i}"] = (2.0, [f"matmul{i}"], "copy")
    steps[f"post{i}"] = (1.0, [f"copy{i}"], "cpu")
schedule_explorer(steps, workers=1, cost="measured", streams="typed")"""]


def test_devices_menu_serialises_the_copies(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    widget = run_instrument(page, lab, "devices.ipynb", DEVICE_CELLS,
                            "hybridlab-schedule-explorer", "the schedule explorer (devices)")
    numbers = widget.locator(".widget-html", has_text="makespan")
    expect(numbers).to_contain_text("on cpu, gpu, copy (typed)", timeout=STEP_MS)
    expect(numbers).to_contain_text("makespan 15 ", timeout=STEP_MS)
    image = widget.locator("img").first
    before = image.get_attribute("src")

    menu = widget.locator(".widget-dropdown", has_text="devices").locator("select")
    menu.select_option(label="typed, but copies share the compute stream (no overlap)")

    expect(numbers).to_contain_text("on cpu, gpu (serialised)", timeout=STEP_MS)
    expect(numbers).to_contain_text("makespan 21 ", timeout=STEP_MS)
    expect(image).not_to_have_attribute("src", before, timeout=STEP_MS)
