"""Browser test: a student's workspace copy is not marked changed when its kernel starts.

JupyterLab compares a notebook's kernelspec and ``language_info`` with the kernel it
starts, and marks the notebook changed (the dot on its tab) when they differ -- then asks
to save on close, and autosave rewrites the file. ``tools/workspace.py`` writes each copy
with this machine's kernel metadata, so opening one leaves it clean.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from labtools import STEP_MS, Lab, open_notebook

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import workspace  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_a_workspace_copy_stays_clean_when_its_kernel_starts(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    source = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))[0]
    workspace.write_new(lab.root / "clean.ipynb", workspace.notebook_copy(source))
    open_notebook(page, lab, "clean.ipynb")  # returns once the kernel is idle
    page.wait_for_timeout(2000)  # let the kernel info reach the notebook model
    tab = page.locator(".lm-TabBar-tab", has_text="clean.ipynb")
    expect(tab).to_be_visible(timeout=STEP_MS)
    assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), "marked changed on open"
