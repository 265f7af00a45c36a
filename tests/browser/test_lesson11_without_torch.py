"""Browser test: lesson 11 in a course environment without PyTorch (the default set-up).
Run All in JupyterLab runs every cell: each ``%%requires torch`` cell skips itself,
saying so, and shows the outputs the course saved for it; the cells after it (JAX, the
table) run; and the saved notebook keeps the torch cells' outputs.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from labtools import Lab, open_and_run

from hybridlab.exercises.requires import SKIP_MIME, required_modules

LESSON = Path(__file__).resolve().parents[2] / "notebooks" / "11-hybrid-modes-elsewhere.ipynb"
RUN_ALL_SECONDS = 600  # timing cells on a loaded two-core machine

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                                 reason="torch is installed: nothing is skipped")]

ALL_RAN = """() => {
    const cells = window.jupyterapp.shell.currentWidget.content.widgets
        .filter(cell => cell.model.type === "code");
    return cells.every(cell => cell.model.executionCount !== null
                               && !cell.node.querySelector(".jp-InputArea-prompt")
                                   ?.textContent.includes("*"));
}"""
OUTPUTS = """() => window.jupyterapp.shell.currentWidget.content.widgets
    .filter(cell => cell.model.type === "code")
    .map(cell => ({source: cell.model.sharedModel.getSource(),
                   outputs: cell.model.outputs.toJSON()}))"""


def text_of(output: dict) -> str:
    if output["output_type"] == "stream":
        return "".join(output["text"])
    return "".join(output.get("data", {}).get("text/plain", ""))


def test_run_all_without_torch_runs_every_other_cell_and_keeps_the_torch_outputs(
        page, lab: Lab) -> None:
    saved = [cell for cell in json.loads(LESSON.read_text(encoding="utf-8"))["cells"]
             if cell["cell_type"] == "code"]
    shutil.copy(LESSON, lab.root / "lesson11.ipynb")
    open_and_run(page, lab, "lesson11.ipynb")
    page.wait_for_function(ALL_RAN, timeout=RUN_ALL_SECONDS * 1000)
    shown = page.evaluate(OUTPUTS)
    assert len(shown) == len(saved)
    errors = [(cell["source"][:60], o.get("ename")) for cell in shown
              for o in cell["outputs"] if o["output_type"] == "error"]
    assert errors == []
    skipped = 0
    for cell, original in zip(shown, saved):
        if "torch" not in required_modules(cell["source"]):
            assert cell["outputs"] or not original["outputs"], cell["source"][:60]
            continue
        skipped += 1
        notice, *rest = cell["outputs"]
        assert "torch" in notice["data"][SKIP_MIME]["missing"]
        assert notice["data"][SKIP_MIME]["saved_outputs"] is True
        assert "".join(text_of(o) for o in rest) == "".join(
            text_of(o) for o in original["outputs"]), cell["source"][:60]
    assert skipped >= 10
    # the comparison table is built after every torch cell, from what this run saw
    table = next(i for i, cell in enumerate(shown) if 'header = ("mechanism"' in cell["source"])
    assert all("torch" not in required_modules(cell["source"]) for cell in shown[table:])
    assert "mechanism" in text_of(shown[table]["outputs"][-1])
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                           timeout=30_000)
    written = [c for c in json.loads((lab.root / "lesson11.ipynb").read_text())["cells"]
               if c["cell_type"] == "code"]
    for cell, original in zip(written, saved):
        if required_modules("".join(cell["source"])):
            assert len(cell["outputs"]) == len(original["outputs"]) + 1  # + the notice
