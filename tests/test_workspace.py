"""tools/workspace.py: the student's copy of the course, and refreshing it safely."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import workspace  # noqa: E402


def course(tmp_path, monkeypatch, names=("00-a.ipynb", "01-b.ipynb")):
    notebooks, space = tmp_path / "notebooks", tmp_path / "workspace"
    notebooks.mkdir()
    (tmp_path / "lessons" / "solutions").mkdir(parents=True)
    for name in names:
        (notebooks / name).write_text(json.dumps({"cells": [], "metadata": {
            "kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}))
    (notebooks / "conftest.py").write_text("# nbval's, not the student's\n")
    monkeypatch.setattr(workspace, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(workspace, "WORKSPACE", space)
    monkeypatch.setattr(workspace, "ROOT", tmp_path)
    return notebooks, space


def test_first_use_copies_the_notebooks_with_local_metadata_and_links_solutions(
        tmp_path, monkeypatch):
    notebooks, space = course(tmp_path, monkeypatch)
    assert workspace.make() == ["added 00-a.ipynb", "added 01-b.ipynb"]
    assert sorted(p.name for p in space.glob("*.ipynb")) == ["00-a.ipynb", "01-b.ipynb"]
    assert not (space / "conftest.py").exists()
    assert (space / "solutions").resolve() == (tmp_path / "lessons" / "solutions").resolve()
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


def test_lab_settings_save_widget_state_and_install_the_save_hook(tmp_path):
    server = tmp_path / "etc" / "jupyter" / "jupyter_server_config.json"
    server.parent.mkdir(parents=True)
    server.write_text(json.dumps({"ServerApp": {"open_browser": False}}))
    settings, config = workspace.install_lab_settings(tmp_path)
    assert settings == tmp_path / "share/jupyter/lab/settings/overrides.d/hybridlab.json"
    data = json.loads(settings.read_text())
    assert data["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": True}
    hook = json.loads(config.read_text())["ContentsManager"]["pre_save_hook"]
    assert config == server
    assert json.loads(config.read_text())["ServerApp"] == {"open_browser": False}  # kept
    module, name = hook.rsplit(".", 1)
    import importlib

    assert callable(getattr(importlib.import_module(module), name))
