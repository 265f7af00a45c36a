"""Browser test: the all-reduce explorer in a real JupyterLab -- move the devices slider and
see the ring's time and picture change; switch to the parameter server and see its formula
and its larger time."""

from __future__ import annotations

import pytest
from labtools import STEP_MS, Lab, run_instrument

CELLS = ["""from hybridlab.viz.allreduce import allreduce_explorer
allreduce_explorer("ring", n=4, size=4e6, alpha=50e-6, beta=1e-9)"""]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_devices_slider_and_way_change_the_all_reduce(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    widget = run_instrument(page, lab, "allreduce.ipynb", CELLS,
                            "hybridlab-allreduce-explorer", "the all-reduce explorer")
    numbers = widget.locator(".widget-html", has_text="all-reduce of")
    # ring: 2 (n - 1) (alpha + beta S / n) = 6 (50 us + 1 ms) = 6.3 ms on 4 devices
    expect(numbers).to_contain_text("ring all-reduce of 4e+06 bytes over 4 devices",
                                    timeout=STEP_MS)
    expect(numbers).to_contain_text("0.0063 s", timeout=STEP_MS)
    image = widget.locator("img").first
    before = image.get_attribute("src")

    slider = widget.locator(".widget-hslider", has_text="devices")
    slider.locator(".noUi-handle").press("ArrowRight")  # 4 -> 5 devices

    # 8 (50 us + 0.8 ms) = 6.8 ms
    expect(numbers).to_contain_text("over 5 devices", timeout=STEP_MS)
    expect(numbers).to_contain_text("0.0068 s", timeout=STEP_MS)
    expect(image).not_to_have_attribute("src", before, timeout=STEP_MS)

    widget.get_by_role("button", name="server").click()

    # 2 n (alpha + beta S) = 10 (50 us + 4 ms) = 40.5 ms: the server's port is the bottleneck
    expect(numbers).to_contain_text("server all-reduce", timeout=STEP_MS)
    expect(numbers).to_contain_text("0.0405 s = 2 n (alpha + beta S)", timeout=STEP_MS)
