"""tools/workspace.py: the student's copy of the course, and refreshing it safely."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import workspace

trusted: list[str] = []


def course(tmp_path, monkeypatch, names=("00-a.ipynb", "01-b.ipynb")):
    notebooks, space = tmp_path / "notebooks", tmp_path / "workspace"
    notebooks.mkdir()
    solutions = tmp_path / "lessons" / "solutions"
    solutions.mkdir(parents=True)
    (solutions / "00_a.py").write_text("answer = 1\n")
    for name in names:
        (notebooks / name).write_text(json.dumps({"cells": [], "metadata": {
            "kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}))
    (notebooks / "conftest.py").write_text("# nbval's, not the student's\n")
    monkeypatch.setattr(workspace, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(workspace, "WORKSPACE", space)
    monkeypatch.setattr(workspace, "SOLUTIONS", solutions)
    # `jupyter trust` starts a process per notebook (seconds on a loaded machine); what it
    # does is Jupyter's business, that the workspace asks for it is checked here
    monkeypatch.setattr(workspace, "trust", lambda target: trusted.append(target.name))
    monkeypatch.setattr(workspace, "ROOT", tmp_path)
    return notebooks, space


def test_first_use_copies_the_notebooks_with_local_metadata_and_the_solutions(
        tmp_path, monkeypatch):
    notebooks, space = course(tmp_path, monkeypatch)
    trusted.clear()
    assert workspace.make() == ["added 00-a.ipynb", "added 01-b.ipynb",
                                "added solutions/00_a.py"]
    assert trusted == ["00-a.ipynb", "01-b.ipynb"]
    assert sorted(p.name for p in space.glob("*.ipynb")) == ["00-a.ipynb", "01-b.ipynb"]
    assert not (space / "conftest.py").exists()
    solution = space / "solutions" / "00_a.py"
    assert not (space / "solutions").is_symlink() and not solution.is_symlink()
    solution.write_text("answer = 2  # the student's try\n")  # never reaches lessons/
    assert (tmp_path / "lessons" / "solutions" / "00_a.py").read_text() == "answer = 1\n"
    meta = json.loads((space / "00-a.ipynb").read_text())["metadata"]
    assert meta["language_info"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert meta["kernelspec"]["display_name"] == "Python 3 (ipykernel)"
    assert workspace.make() == []  # made already: nothing to do


def test_refresh_updates_untouched_copies_and_keeps_edited_ones_aside(tmp_path, monkeypatch):
    notebooks, space = course(tmp_path, monkeypatch)
    workspace.make()
    (space / "01-b.ipynb").write_text('{"cells": ["my answer"]}')  # the student's edit
    for name in ("00-a.ipynb", "01-b.ipynb"):  # the course changes both
        data = json.loads((notebooks / name).read_text())
        data["cells"] = [{"cell_type": "markdown", "source": "new", "metadata": {}}]
        (notebooks / name).write_text(json.dumps(data))
    done = workspace.make(refresh=True)
    assert done[0] == "updated 00-a.ipynb"
    assert done[1].startswith("kept your edited 01-b.ipynb in workspace/kept/")
    kept = next((space / "kept").glob("*/01-b.ipynb"))
    assert kept.read_text() == '{"cells": ["my answer"]}'
    assert json.loads((space / "01-b.ipynb").read_text())["cells"][0]["source"] == "new"


def test_refresh_brings_in_changed_solutions_and_keeps_edited_ones(tmp_path, monkeypatch):
    notebooks, space = course(tmp_path, monkeypatch)
    workspace.make()
    (space / "solutions" / "00_a.py").write_text("mine\n")
    (tmp_path / "lessons" / "solutions" / "00_a.py").write_text("answer = 3\n")
    done = workspace.make(refresh=True)
    assert done[0].startswith("kept your edited solutions/00_a.py in workspace/kept/")
    assert (space / "solutions" / "00_a.py").read_text() == "answer = 3\n"
    assert next((space / "kept").glob("*/solutions/00_a.py")).read_text() == "mine\n"


def test_an_old_solutions_link_even_dangling_becomes_a_copy(tmp_path, monkeypatch):
    notebooks, space = course(tmp_path, monkeypatch)
    space.mkdir()
    (space / "solutions").symlink_to(tmp_path / "gone")
    done = workspace.make()
    assert done[0] == "replaced the solutions link with your own copy"
    assert (space / "solutions" / "00_a.py").read_text() == "answer = 1\n"
    assert not (tmp_path / "gone").exists()


def test_refresh_never_writes_through_links_it_did_not_make(tmp_path, monkeypatch):
    notebooks, space = course(tmp_path, monkeypatch)
    workspace.make()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    for name in ("00-a.ipynb.partial", "01-b.ipynb.partial", ".course-versions.partial",
                 ".partial-x"):
        (space / name).symlink_to(outside)
    data = json.loads((notebooks / "00-a.ipynb").read_text())
    data["cells"] = [{"cell_type": "markdown", "source": "new", "metadata": {}}]
    (notebooks / "00-a.ipynb").write_text(json.dumps(data))
    assert workspace.make(refresh=True) == ["updated 00-a.ipynb"]
    assert outside.read_text() == "precious"


@pytest.mark.parametrize("odd", ["kept file", "lesson folder", "lesson link", "stamps",
                                 "solutions file"])
def test_odd_files_in_the_workspace_give_a_message_not_a_traceback(tmp_path, monkeypatch,
                                                                   capsys, odd):
    notebooks, space = course(tmp_path, monkeypatch)
    workspace.make()
    if odd == "kept file":
        (space / "kept").write_text("a note")
    elif odd == "lesson folder":
        (space / "00-a.ipynb").unlink()
        (space / "00-a.ipynb").mkdir()
    elif odd == "lesson link":
        (space / "00-a.ipynb").unlink()
        (space / "00-a.ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    elif odd == "stamps":
        (space / workspace.STAMPS).write_text("{not json")
    else:
        shutil.rmtree(space / "solutions")
        (space / "solutions").write_text("oops")
    assert workspace.main(["--refresh"]) == 1
    message = capsys.readouterr().err
    assert message.startswith("workspace: ") and "Traceback" not in message
    assert "run this again" in message
    assert not (tmp_path / "elsewhere.ipynb").exists()


def test_lab_settings_save_widget_state_and_install_the_save_hook(tmp_path):
    server = tmp_path / "etc" / "jupyter" / "jupyter_server_config.json"
    server.parent.mkdir(parents=True)
    server.write_text(json.dumps({"ServerApp": {"open_browser": False}}))
    settings, config = workspace.install_lab_settings(tmp_path)
    assert settings == tmp_path / "share/jupyter/lab/settings/overrides.d/hybridlab.json"
    data = json.loads(settings.read_text())
    assert data["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": False}
    hook = json.loads(config.read_text())["ContentsManager"]["pre_save_hook"]
    assert config == server
    assert json.loads(config.read_text())["ServerApp"] == {"open_browser": False}  # kept
    module, name = hook.rsplit(".", 1)
    import importlib

    assert callable(getattr(importlib.import_module(module), name))


def test_first_use_says_which_notebook_it_is_copying(tmp_path, monkeypatch, capsys):
    course(tmp_path, monkeypatch, names=("00-a.ipynb", "01-b.ipynb", "02-c.ipynb"))
    workspace.make()
    progress = capsys.readouterr().err.splitlines()
    assert progress == [f"workspace: copying and trusting {name} ({n} of 3)"
                        for n, name in enumerate(["00-a.ipynb", "01-b.ipynb", "02-c.ipynb"], 1)]


def test_a_copy_is_trusted_in_this_process_as_jupyter_trust_would(tmp_path, monkeypatch):
    import nbformat
    from nbformat.sign import NotebookNotary

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "n.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), path)
    assert not NotebookNotary().check_signature(nbformat.read(path, as_version=4))
    workspace.trust(path)
    assert NotebookNotary().check_signature(nbformat.read(path, as_version=4))
