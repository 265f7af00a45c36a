"""What a saved notebook holds for its widgets: a view whose model is missing gives way to
the PNG beside it (the server's pre-save hook, ``viz.bundle.pre_save_hook``)."""

from __future__ import annotations

from hybridlab.viz.bundle import WIDGET_STATE, WIDGET_VIEW, pre_save_hook


def notebook(saved_models: list[str], outputs: list[dict]) -> dict:
    state = {m: {"model_name": "VBoxModel", "state": {}} for m in saved_models}
    return {"metadata": {"widgets": {WIDGET_STATE: {"state": state}}},
            "cells": [{"cell_type": "code", "outputs": outputs}]}


def view(model_id: str, png: bool = True) -> dict:
    data = {WIDGET_VIEW: {"model_id": model_id}, "text/plain": "stepper"}
    if png:
        data["image/png"] = "iVBOR..."
    return {"output_type": "display_data", "data": data}


def test_a_view_of_a_missing_model_is_dropped_and_its_png_kept():
    nb = notebook(["kept"], [view("kept"), view("gone"), view("gone-no-png", png=False)])
    nb["cells"][0]["outputs"][2]["data"].pop("text/plain")
    pre_save_hook({"type": "notebook", "content": nb})
    kept, gone, alone = (o["data"] for o in nb["cells"][0]["outputs"])
    assert WIDGET_VIEW in kept  # its model is saved: untouched
    assert WIDGET_VIEW not in gone and "image/png" in gone  # JupyterLab shows the PNG
    assert WIDGET_VIEW in alone  # nothing else to show: left as it was


def test_a_notebook_without_widget_state_and_other_files_pass_through():
    nb = {"metadata": {}, "cells": [{"cell_type": "code", "outputs": [view("m")]}]}
    pre_save_hook({"type": "notebook", "content": nb})
    assert WIDGET_VIEW not in nb["cells"][0]["outputs"][0]["data"]
    text = {"type": "file", "content": "hello"}
    pre_save_hook(text)
    assert text == {"type": "file", "content": "hello"}
