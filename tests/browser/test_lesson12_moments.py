"""Browser test: lesson 12, opened trusted and not run, shows its bucket explorer and its
memory explorer as they were when their cells ran -- the saved widget views, each with the
numbers of its saved text -- and says that each is a saved snapshot, with no live controls.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from labtools import STEP_MS, WIDGET_SECONDS, Lab, jupyter_env, open_notebook

from hybridlab.viz.bundle import SNAPSHOT_NOTICE

LESSON = Path(__file__).resolve().parents[2] / "notebooks" / "12-sequences.ipynb"
VIEW = "application/vnd.jupyter.widget-view+json"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def saved_texts() -> dict[str, str]:
    """The saved text of the lesson's bucket explorer and memory explorer displays."""
    found = {}
    for cell in json.loads(LESSON.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = "".join(data.get("text/plain", ""))
            if VIEW in data and "programs compiled" in text:
                found["buckets"] = text
            elif VIEW in data and text.startswith("forward + backward: step"):
                found["memory"] = text
    return found


def test_lesson_12_unrun_and_trusted_shows_its_saved_instruments(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    saved = saved_texts()
    assert set(saved) == {"buckets", "memory"}, saved
    notebook = json.loads(LESSON.read_text(encoding="utf-8"))
    notebook["metadata"]["hybridlab_test"] = "the trusted copy of lesson 12's moments test"
    target = lab.root / "moments-12.ipynb"
    target.write_text(json.dumps(notebook), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "jupyter", "trust", str(target)],
                   env=jupyter_env(lab.root), check=True, capture_output=True)
    open_notebook(page, lab, target.name)
    moments = page.locator(".jp-OutputArea-output .hybridlab-moment")
    expect(moments).to_have_count(2, timeout=WIDGET_SECONDS * 1000)
    buckets = moments.filter(has_text="programs compiled")
    # the explorer's numbers line is its summary: the saved text, word for word
    expect(buckets.locator(".widget-html", has_text="programs compiled")).to_have_text(
        saved["buckets"], timeout=STEP_MS)
    memory = moments.filter(has_text="forward + backward: step")
    expect(memory.locator(".widget-html", has_text="results alive")).to_contain_text(
        saved["memory"].split(". memory plan")[0], timeout=STEP_MS)
    for moment in (buckets, memory):
        expect(moment.get_by_text(SNAPSHOT_NOTICE)).to_be_visible(timeout=STEP_MS)
        for control in (".widget-hslider", ".widget-toggle-buttons"):
            assert not any(c.is_visible() for c in moment.locator(control).all())
    assert page.get_by_text("model not found").count() == 0
