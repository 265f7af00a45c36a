"""Browser test: the bucket explorer in a real JupyterLab -- move the buckets slider and see
the programs, the padding and the picture change; switch the way to foreach and see the
cheaper compiles."""

from __future__ import annotations

import pytest
from labtools import STEP_MS, Lab, run_instrument

# lengths 1..8, twice each; a compile costs 1 s + 0.1 s per token unrolled, 0.5 s foreach
CELLS = ["""from hybridlab.lab.buckets import Costs, LineCost
from hybridlab.viz.buckets import bucket_explorer
costs = {"unrolled": Costs(LineCost(1.0, 0.1), LineCost(0.01, 0.001)),
         "foreach": Costs(LineCost(0.5, 0.0), LineCost(0.01, 0.001))}
bucket_explorer(list(range(1, 9)) * 2, costs, buckets=2, batch_size=4)"""]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_buckets_slider_and_way_change_the_numbers(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    widget = run_instrument(page, lab, "buckets.ipynb", CELLS,
                            "hybridlab-bucket-explorer", "the bucket explorer")
    numbers = widget.locator(".widget-html", has_text="programs compiled")
    # keys 4 and 8: each bucket pads (3+2+1+0) x 2 = 12 tokens, 24 of the 8 x 4 + 8 x 8 = 96
    # computed: 25.0%; compiles (1 + 0.1 x 4) + (1 + 0.1 x 8) = 3.2 s
    expect(numbers).to_contain_text("keys [4, 8]: 2 programs compiled, 25.0% of the tokens "
                                    "are padding; compiles 3.2 s", timeout=STEP_MS)
    image = widget.locator("img").first
    before = image.get_attribute("src")

    slider = widget.locator(".widget-hslider", has_text="buckets")
    slider.locator(".noUi-handle").press("ArrowRight")  # 2 -> 3 buckets: keys 3, 6, 8

    # padding (2+1+0 + 2+1+0 + 1+0) x 2 = 14 of 6 x 3 + 6 x 6 + 4 x 8 = 86 tokens: 16.3%;
    # compiles 1.3 + 1.6 + 1.8 = 4.7 s
    expect(numbers).to_contain_text("keys [3, 6, 8]: 3 programs compiled, 16.3%",
                                    timeout=STEP_MS)
    expect(numbers).to_contain_text("compiles 4.7 s", timeout=STEP_MS)
    expect(image).not_to_have_attribute("src", before, timeout=STEP_MS)

    widget.get_by_role("button", name="foreach").click()

    expect(numbers).to_contain_text("foreach; keys [3, 6, 8]: 3 programs compiled",
                                    timeout=STEP_MS)
    expect(numbers).to_contain_text("compiles 1.5 s", timeout=STEP_MS)
