"""Browser test: lesson 03, opened trusted and not run, shows each display of its queue
stepper as it was when that cell ran -- the widget views JupyterLab prefers, restored from
the saved widget state, not one model shown six times -- and says that each is a saved
snapshot, with no dead controls.

The expected counts are the first line of each display's saved text (what nbval pins):
``queue stepper: N pushed, M done, ...``; each restored view's counter line must say the
same ``N pushed · M done``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from labtools import STEP_MS, WIDGET_SECONDS, Lab, jupyter_env, open_notebook

from hybridlab.viz.bundle import SNAPSHOT_NOTICE

LESSON = Path(__file__).resolve().parents[2] / "notebooks" / "03-lazy-evaluation.ipynb"
VIEW = "application/vnd.jupyter.widget-view+json"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def saved_moments() -> list[tuple[int, int]]:
    """(pushed, done) of every stepper display in the lesson, from its saved text."""
    found = []
    for cell in json.loads(LESSON.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = "".join(data.get("text/plain", ""))
            match = re.match(r"queue stepper: (\d+) pushed, (\d+) done", text)
            if match and VIEW in data:
                found.append((int(match[1]), int(match[2])))
    return found


def test_lesson_03_unrun_and_trusted_shows_each_moment_as_a_snapshot(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    expected = saved_moments()
    assert len(expected) >= 6 and len(set(expected)) >= 5, expected
    target = lab.root / LESSON.name
    shutil.copy(LESSON, target)
    subprocess.run([sys.executable, "-m", "jupyter", "trust", str(target)],
                   env=jupyter_env(lab.root), check=True, capture_output=True)
    open_notebook(page, lab, LESSON.name)
    moments = page.locator(".jp-OutputArea-output .hybridlab-moment")
    expect(moments).to_have_count(len(expected), timeout=WIDGET_SECONDS * 1000)
    shown = []
    for index in range(len(expected)):
        moment = moments.nth(index)
        counter = moment.locator(".widget-html", has_text="pushed").first
        expect(counter).to_be_visible(timeout=STEP_MS)
        match = re.search(r"(\d+) pushed · (\d+) done", counter.inner_text())
        assert match, counter.inner_text()
        shown.append((int(match[1]), int(match[2])))
        expect(moment.get_by_text(SNAPSHOT_NOTICE)).to_be_visible()
        assert moment.get_by_role("button").count() == 0 or not any(
            b.is_visible() for b in moment.get_by_role("button").all())
    assert shown == expected
    assert page.get_by_text("model not found").count() == 0
    page.locator(".hybridlab-moment").nth(1).screenshot(path=str(lab.root / "moment.png"))
