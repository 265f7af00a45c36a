"""Browser test: opening a lesson that holds saved widgets does not modify it.

JupyterLab restores a notebook's widgets from its saved state when it opens it. Nothing
about that may mark the notebook changed -- no dot on its tab, no "Save changes?" on
close, no autosave rewriting the student's copy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from labtools import STEP_MS, Lab, jupyter_env, open_notebook

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import workspace  # noqa: E402

STATE = "application/vnd.jupyter.widget-state+json"
WITH_WIDGETS = [path for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
                if json.loads(path.read_text(encoding="utf-8"))["metadata"].get(
                    "widgets", {}).get(STATE, {}).get("state")]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.mark.parametrize("source", WITH_WIDGETS, ids=[p.stem[:2] for p in WITH_WIDGETS])
def test_a_lesson_with_saved_widgets_opens_unmodified(page, lab: Lab, source: Path,
                                                      monkeypatch) -> None:
    from playwright.sync_api import expect

    monkeypatch.setenv("JUPYTER_DATA_DIR", jupyter_env(lab.root)["JUPYTER_DATA_DIR"])
    assert len(WITH_WIDGETS) >= 6
    name = f"clean-{source.stem[:2]}.ipynb"
    workspace.write_new(lab.root / name, workspace.notebook_copy(source))
    workspace.trust(lab.root / name)
    before = (lab.root / name).read_bytes()
    open_notebook(page, lab, name)
    page.locator(".jp-OutputArea-output .jupyter-widgets").first.wait_for(
        state="attached", timeout=STEP_MS)
    page.wait_for_timeout(3000)  # the widget manager restores every model
    tab = page.locator(".lm-TabBar-tab", has_text=name)
    expect(tab).to_be_visible(timeout=STEP_MS)
    dirty = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
    assert not dirty and "jp-mod-dirty" not in (tab.get_attribute("class") or ""), \
        "marked changed on open"
    assert (lab.root / name).read_bytes() == before
