"""Browser test: a notebook saved by JupyterLab (as its autosave does), closed and opened
again with a new kernel, shows every instrument it showed, as its picture marked "a saved
snapshot" -- never "Error displaying widget: model not found".

The lab runs with the settings ``make lab`` installs (``tools/workspace.py``): the widget
manager does not save widget state (NOTE [Clean on open] in ``viz/bundle.py``), and the
server's pre-save hook turns each output whose model is not saved into its PNG with the
snapshot notice, and keeps only the widget state an output still shows.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from labtools import STEP_MS, WIDGET_SECONDS, Lab, open_and_run, open_notebook, write_notebook

from hybridlab.viz.bundle import SNAPSHOT_NOTICE

VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
CELLS = ["""from hybridlab import nd
from hybridlab.viz.stepper import queue_stepper
stepper = queue_stepper()
a = nd.ones((2, 2))
b = a * 2
stepper""",
         """import ipywidgets
from IPython.display import display
from hybridlab.viz.bundle import widget_bundle
gone = ipywidgets.Button(description="closed before the save")
display(widget_bundle(gone, "a widget closed before the save", stepper.snapshot_png()),
        raw=True)
gone.close()"""]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def saved(lab: Lab, name: str) -> tuple[dict, list[dict]]:
    """The notebook file's widget state and the data of its outputs."""
    notebook = json.loads((lab.root / name).read_text(encoding="utf-8"))
    state = notebook["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    outputs = [o.get("data", {}) for c in notebook["cells"] for o in c.get("outputs", [])]
    return state, outputs


def shut_down_kernels(lab: Lab) -> None:
    with urllib.request.urlopen(f"{lab.url}/api/sessions?token={lab.token}") as response:
        sessions = json.load(response)
    for session in sessions:
        request = urllib.request.Request(
            f"{lab.url}/api/sessions/{session['id']}?token={lab.token}", method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()


def test_a_saved_notebook_reopens_with_its_widgets_or_their_pictures(page, browser,
                                                                      lab: Lab) -> None:
    from playwright.sync_api import expect

    name = write_notebook(lab, "saved.ipynb", CELLS)
    open_and_run(page, lab, name)
    expect(page.locator(".hybridlab-queue-stepper").first).to_be_visible(
        timeout=WIDGET_SECONDS * 1000)
    expect(page.locator(".jp-OutputArea-output")).to_have_count(2, timeout=STEP_MS)
    page.wait_for_function("() => window.jupyterapp.shell.currentWidget.sessionContext"
                           ".session.kernel.status === 'idle'", timeout=STEP_MS)
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                           timeout=STEP_MS)
    state, outputs = saved(lab, name)
    assert state == {} and not any(VIEW in data for data in outputs)  # the hook's work
    for data in outputs:
        assert "image/png" in data and SNAPSHOT_NOTICE in "".join(data["text/html"]), sorted(data)

    shut_down_kernels(lab)
    page.close()
    reopened = page.context.new_page()
    open_notebook(reopened, lab, name)  # a new kernel; the pictures come from the file
    for index in range(2):
        output = reopened.locator(".jp-Cell").nth(index).locator(".jp-OutputArea-output")
        expect(output.locator("img[src^='data:image/png']")).to_be_visible(timeout=STEP_MS)
        expect(output.get_by_text(SNAPSHOT_NOTICE)).to_be_visible(timeout=STEP_MS)
    dirty = reopened.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
    assert not dirty
    assert reopened.get_by_text("model not found").count() == 0
    assert reopened.get_by_text("Error displaying widget").count() == 0
