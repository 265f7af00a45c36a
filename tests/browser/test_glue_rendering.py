"""Browser test: a figure glued into a lesson's prose shows as the figure alone.

``tools/sync_notebooks.py`` writes a measured figure into the markdown as
``<!--glue:name-->TEXT<!--/glue-->`` (CONTRIBUTING.md, "Lessons: the truth rule"). In
JupyterLab the comments must vanish and the text read as a plain sentence.
"""

from __future__ import annotations

import nbformat
import pytest
from labtools import STEP_MS, Lab, open_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_a_filled_placeholder_renders_as_its_text_only(page, lab: Lab) -> None:
    from playwright.sync_api import expect

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "The loop took <!--glue:loop_ms-->3.1 ms<!--/glue--> per step.")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}})
    nbformat.write(notebook, lab.root / "glued.ipynb")
    open_notebook(page, lab, "glued.ipynb")
    rendered = page.locator(".jp-MarkdownOutput").first
    expect(rendered).to_contain_text("The loop took 3.1 ms per step.", timeout=STEP_MS)
    assert "glue" not in rendered.inner_text()
