"""``%%requires <module>``: a lesson cell that needs an optional framework skips itself in a
plain kernel -- saying so, showing the outputs the course saved for it, never failing the
run -- and runs as any cell where the module is installed (hybridlab.exercises.requires)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from hybridlab.exercises import requires

pytest.importorskip("IPython")
ROOT = Path(__file__).resolve().parent.parent
LESSON11 = ROOT / "notebooks" / "11-hybrid-modes-elsewhere.ipynb"
LESSON12 = ROOT / "notebooks" / "12-sequences.ipynb"
sys.path.insert(0, str(ROOT / "tools"))
import sync_notebooks  # noqa: E402


@pytest.fixture
def shell():
    """An in-process IPython with hybridlab.exercises imported (which registers the magic)."""
    from IPython.core.interactiveshell import InteractiveShell

    instance = InteractiveShell.instance()
    requires.register()
    try:
        yield instance
    finally:
        InteractiveShell.clear_instance()


def run(shell, source: str):
    """Run one cell; return (result, stdout, the rich outputs' data)."""
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = shell.run_cell(source)
    return result, captured.stdout, [output.data for output in captured.outputs]


def test_the_first_line_names_the_modules_and_the_tools_read_it_alike():
    import nbformat

    sources = ["%%requires torch onnxscript\nimport torch", "  %%requires jax\nx = 1",
               "import torch  # %%requires torch", "%%time\n%%requires torch", "1 + 1"]
    assert [requires.required_modules(s) for s in sources] == [
        ["torch", "onnxscript"], ["jax"], [], [], []]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    assert sync_notebooks.required_modules(notebook) == ["jax", "onnxscript", "torch"]
    assert requires.missing_modules("%%requires numpy not_a_module_here") == [
        "not_a_module_here"]


def test_a_cell_whose_module_is_missing_skips_itself_and_shows_its_saved_outputs(
        shell, tmp_path, monkeypatch):
    import nbformat

    body = "%%requires numpy not_a_module_here\nimport not_a_module_here\nprint('ran')"
    saved = [nbformat.v4.new_output("stream", name="stdout", text="saved print\n"),
             nbformat.v4.new_output("display_data", data={
                 "text/plain": "a saved drawing", "image/png": "iVBORw0KGgo=",
                 requires.WIDGET_VIEW: {"model_id": "0" * 32}})]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(body, outputs=saved)])
    nbformat.write(notebook, tmp_path / "99-example.ipynb")
    monkeypatch.setattr(requires, "COURSE_NOTEBOOKS", tmp_path)
    result, stdout, shown = run(shell, body + "\n")
    assert result.success and stdout == "saved print\n"
    assert "skipped: this cell needs not_a_module_here" in shown[0]["text/plain"]
    assert shown[0][requires.SKIP_MIME] == {"missing": ["not_a_module_here"],
                                            "saved_outputs": True}
    assert shown[1] == {"text/plain": "a saved drawing", "image/png": "iVBORw0KGgo="}
    after, stdout, _ = run(shell, "print('the next cell runs')")
    assert after.success and stdout == "the next cell runs\n"
    changed, stdout, shown = run(shell, body + "\nprint('edited by the student')")
    assert changed.success and stdout == ""
    assert "saved no outputs for this cell" in shown[0]["text/plain"]


def test_a_cell_whose_modules_are_installed_runs_as_any_cell(shell):
    result, stdout, _ = run(shell, "%%requires numpy\nimport numpy as np\nprint('in')\n"
                                   "total = int(np.arange(4).sum())\ntotal + 1")
    assert result.success and stdout.startswith("in\n") and result.result == 7  # displayed
    assert shell.user_ns["total"] == 6 and shell.user_ns["np"].__name__ == "numpy"
    failed, _, _ = run(shell, "%%requires numpy\nraise ValueError('a real error')")
    assert not failed.success and isinstance(failed.error_in_exec, ValueError)
    nothing, _, _ = run(shell, "%%requires numpy\nquiet = 1")
    assert nothing.success and nothing.result is None


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="torch is installed: the lessons' torch cells run for real")
@pytest.mark.parametrize("lesson, at_least", [(LESSON11, 10), (LESSON12, 1)],
                         ids=["lesson11", "lesson12"])
def test_lesson_torch_cells_show_their_saved_outputs_without_torch(shell, lesson, at_least):
    cells = [c for c in json.loads(lesson.read_text(encoding="utf-8"))["cells"]
             if c["cell_type"] == "code"
             and "torch" in requires.required_modules("".join(c["source"]))]
    assert len(cells) >= at_least
    for cell in cells:
        result, stdout, shown = run(shell, "".join(cell["source"]))
        assert result.success, "".join(cell["source"])[:80]
        assert shown[0][requires.SKIP_MIME]["saved_outputs"] is True
        saved = [o for o in cell["outputs"] if o["output_type"] == "stream"]
        assert stdout == "".join("".join(o["text"]) for o in saved)
        rich = [o for o in cell["outputs"] if o["output_type"] != "stream"]
        assert [d.get("text/plain") for d in shown[1:]] == [
            "".join(o["data"].get("text/plain", "")) or None for o in rich]
