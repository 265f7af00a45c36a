"""Glued figures: ``{{name}}`` in a lesson becomes the figure its notebook measured, and
``sync_notebooks --check`` still compares the notebook with its source."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import sync_notebooks  # noqa: E402 -- a tool script, not a package

from hybridlab.exercises.glue import GLUE_MIME, ClaimError, claim, glue  # noqa: E402


def glue_output(name: str, text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("display_data", data={
        "text/plain": text, sync_notebooks.GLUE_MIME: {"name": name, "text": text}})


def executed(*outputs, prose="The loop took {{loop_ms}} per step; {{loop_ms}} again."):
    cell = nbformat.v4.new_code_cell("glue('loop_ms', ...)")
    cell.outputs = list(outputs)
    return nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_markdown_cell(prose)])


def test_the_tool_and_the_module_agree_on_the_mime_type():
    assert sync_notebooks.GLUE_MIME == GLUE_MIME


def test_placeholders_are_filled_with_the_glued_text():
    notebook = executed(glue_output("loop_ms", "3.1 ms"))
    assert sync_notebooks.fill_glue(notebook, "03-x.md") == 2
    assert notebook.cells[1].source == ("The loop took <!--glue:loop_ms-->3.1 ms<!--/glue--> "
                                        "per step; <!--glue:loop_ms-->3.1 ms<!--/glue--> again.")


def test_filling_again_replaces_the_old_value():
    notebook = executed(glue_output("loop_ms", "3.1 ms"))
    sync_notebooks.fill_glue(notebook, "03-x.md")
    notebook.cells[0].outputs = [glue_output("loop_ms", "2.9 ms")]
    sync_notebooks.fill_glue(notebook, "03-x.md")
    assert "2.9 ms" in notebook.cells[1].source and "3.1" not in notebook.cells[1].source


def test_check_compares_the_placeholder_not_the_value():
    source = executed(glue_output("loop_ms", "3.1 ms"))
    filled = executed(glue_output("loop_ms", "3.1 ms"))
    sync_notebooks.fill_glue(filled, "03-x.md")
    assert sync_notebooks.cell_sources(filled) == sync_notebooks.cell_sources(source)
    filled.cells[1].source = filled.cells[1].source.replace("per step", "per call")
    assert sync_notebooks.cell_sources(filled) != sync_notebooks.cell_sources(source)


def test_a_placeholder_nobody_glued_is_an_error_naming_lesson_and_name():
    notebook = executed(glue_output("other", "1"))
    with pytest.raises(sync_notebooks.GlueError, match=r"03-x.md.*\{\{loop_ms\}\}.*other"):
        sync_notebooks.fill_glue(notebook, "03-x.md")


def test_a_name_glued_twice_is_an_error():
    notebook = executed(glue_output("loop_ms", "3.1 ms"), glue_output("loop_ms", "2 ms"))
    with pytest.raises(sync_notebooks.GlueError, match="03-x.md.*'loop_ms' is glued twice"):
        sync_notebooks.fill_glue(notebook, "03-x.md")


def test_glue_formats_and_rejects_a_bad_name(capsys):
    assert glue("ratio", 1.8345, "{:.1f}x") == "1.8x"
    with pytest.raises(ValueError, match="not a valid name"):
        glue("two words", 1)


def test_claim_passes_silently_true_and_fails_loudly_false(capsys):
    claim(2 > 1, "two is more than one")
    assert "checked: two is more than one" in capsys.readouterr().out
    with pytest.raises(ClaimError, match="the lesson says: 'one is more'"):
        claim(1 > 2, "one is more")


def test_filled_text_renders_as_the_figure_alone_on_the_site():
    """nbconvert's markdown filter (what ``make site`` uses) keeps the comments as HTML
    comments, which a browser does not show."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    html = markdown2html_mistune("took <!--glue:t-->3.1 ms<!--/glue--> per step")
    assert "took <!--glue:t-->3.1 ms<!--/glue--> per step" in html


def test_a_prose_refresh_keeps_every_output_and_refuses_a_code_change(tmp_path, monkeypatch):
    """``--prose``: a changed sentence reaches the notebook without running it (the glued
    figure filled again); a changed code cell is refused."""
    lesson = tmp_path / "03-x.md"
    lesson.write_text("# 03 · x\n\nIt took {{loop_ms}}.\n\n```{code-cell} ipython3\n"
                      "glue('loop_ms', ...)\n```\n")
    monkeypatch.setattr(sync_notebooks, "NOTEBOOKS", tmp_path)
    notebook = sync_notebooks.read_lesson(lesson)
    notebook.cells[1].outputs = [glue_output("loop_ms", "3.1 ms")]
    sync_notebooks.fill_glue(notebook, lesson.name)
    nbformat.write(notebook, tmp_path / "03-x.ipynb")
    lesson.write_text(lesson.read_text().replace("It took", "Each step took"))
    sync_notebooks.refresh_prose(lesson)
    refreshed = nbformat.read(tmp_path / "03-x.ipynb", as_version=4)
    assert refreshed.cells[0].source.endswith(
        "Each step took <!--glue:loop_ms-->3.1 ms<!--/glue-->.")
    assert refreshed.cells[1].outputs == notebook.cells[1].outputs
    assert sync_notebooks.check([lesson]) == []
    lesson.write_text(lesson.read_text().replace("glue('loop_ms', ...)", "glue('loop_ms', 2)"))
    with pytest.raises(ValueError, match="code cells changed"):
        sync_notebooks.refresh_prose(lesson)
