"""What a saved notebook holds for its widgets: a view whose model is missing gives way to
the PNG beside it (the server's pre-save hook, ``viz.bundle.pre_save_hook``), and every
display of an instrument saves its own moment (``viz.bundle.Instrument.moment``)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import engine, nd
from hybridlab.lab import queue
from hybridlab.viz import stepper
from hybridlab.viz.bundle import SNAPSHOT_NOTICE, TEXT, WIDGET_STATE, WIDGET_VIEW, pre_save_hook


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


# -- each display is its own moment ----------------------------------------------------
STEPS = st.lists(st.sampled_from(["push", "step", "display"]), max_size=14)


def tree(state: dict, model_id: str) -> list[dict]:
    """Every model under ``model_id`` in a saved widget state, depth first."""
    found, todo = [], [model_id]
    while todo:
        model = state[todo.pop(0)]
        found.append(model)
        children = model["state"].get("children", [])
        todo[:0] = [c.removeprefix("IPY_MODEL_") for c in children]
    return found


def counts_in(models: list[dict]) -> tuple[int, int]:
    """(pushed, done) as the saved counter line of a moment says them."""
    for model in models:
        value = model["state"].get("value", "")
        found = re.search(r"<b>(\d+)</b> pushed · <b>(\d+)</b> done", str(value))
        if found:
            return int(found[1]), int(found[2])
    raise AssertionError("no counter line in the saved moment")


@pytest.mark.slow
@pytest.mark.viz
@settings(max_examples=25, deadline=None)
@given(steps=STEPS)
def test_every_display_saves_the_state_it_showed(steps):
    """A random run of pushes, steps and displays: in the widget state a notebook would
    save, each display's view shows the counts and the drawing of its own moment, and
    only the latest display has controls."""
    widgets = pytest.importorskip("ipywidgets")
    arrays: dict = {}
    with engine.engine_scope(engine.StepEngine()) as eng:
        view = stepper.QueueStepper(queue.QueueModel(eng, lambda: arrays))
        shown = []  # (model id, (pushed, done) from the summary, the drawing then)
        for step in steps + ["display"]:
            if step == "push":
                arrays[f"v{len(arrays)}"] = nd.ones((2,)) * (len(arrays) + 1)
            elif step == "step":
                view.model.step()
            else:
                bundle = view._repr_mimebundle_()
                first = re.match(r"queue stepper: (\d+) pushed, (\d+) done", bundle[TEXT])
                shown.append((bundle[WIDGET_VIEW]["model_id"],
                              (int(first[1]), int(first[2])), view.drawing.value))
        state = widgets.Widget.get_manager_state(drop_defaults=False)["state"]
        assert len({model_id for model_id, _, _ in shown}) == len(shown)
        for index, (model_id, counts, drawing) in enumerate(shown):
            models = tree(state, model_id)
            assert counts_in(models) == counts
            assert any(m["state"].get("value") == drawing for m in models)
            buttons = [m for m in models if m["model_name"] == "ButtonModel"]
            assert bool(buttons) == (index == len(shown) - 1)
            notices = [m for m in models if "hybridlab-notice" in m["state"]["_dom_classes"]]
            assert len(notices) == 1 and SNAPSHOT_NOTICE in notices[0]["state"]["value"]
        view.close()
        eng.wait_all()



# -- legible in both themes ---------------------------------------------------------------
def test_ink_on_every_fill_of_the_palette_meets_wcag_aa():
    """Every fill is drawn under INK text (the stepper's chips set it explicitly, so the
    dark theme's white text never lands on a light fill): at least 4.5:1 on each."""
    from hybridlab.viz import palette

    assert palette.contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert palette.contrast_ratio("#777777", "#777777") == pytest.approx(1.0)
    fills = {**palette.STATE_COLOURS, **palette.KIND_COLOURS, **palette.DEVICE_COLOURS,
             "other": palette.OTHER_COLOUR, "background": palette.BACKGROUND}
    low = {name: round(palette.contrast_ratio(palette.INK, fill), 2)
           for name, fill in fills.items() if palette.contrast_ratio(palette.INK, fill) < 4.5}
    assert not low, f"fills too dark for INK text: {low}"
    assert palette.contrast_ratio("#ffffff", palette.STATE_COLOURS["ready"]) < 4.5  # why INK


@pytest.mark.viz
def test_chips_carry_ink_and_the_sync_menu_is_never_blank():
    pytest.importorskip("ipywidgets")
    from hybridlab.viz.palette import INK

    arrays: dict = {}
    with engine.engine_scope(engine.StepEngine()) as eng:
        view = stepper.QueueStepper(queue.QueueModel(eng, lambda: arrays))
        assert view.choice.value == stepper.NO_CHOICE and view.choice.disabled
        view.buttons["Sync on"].click()  # nothing to sync: said, not silently ignored
        assert "no pending task writes a named array" in view.message.value
        arrays["a"] = nd.ones((2,))
        arrays["b"] = arrays["a"] * 2
        view.refresh()
        assert f"color:{INK}" in view.queues.value
        view.choice.value = "b"
        view.buttons["Step"].click()
        assert view.choice.value == "b" and not view.choice.disabled  # kept after a click
        assert view.choice.description == "array"
        view.close()
        eng.wait_all()


def test_a_dropped_view_says_its_picture_is_a_snapshot_and_unshown_state_goes():
    nb = notebook(["kept", "child", "stale"], [view("kept"), view("gone")])
    state = nb["metadata"]["widgets"][WIDGET_STATE]["state"]
    state["kept"]["state"] = {"children": ["IPY_MODEL_child"]}
    state["stale"]["state"] = {"children": ["IPY_MODEL_kept"]}  # shown by no output
    pre_save_hook({"type": "notebook", "content": nb})
    kept, gone = (o["data"] for o in nb["cells"][0]["outputs"])
    assert WIDGET_VIEW in kept and "text/html" not in kept
    assert gone["text/html"].startswith(f'<p class="hybridlab-notice"><em>{SNAPSHOT_NOTICE}')
    assert '<img src="data:image/png;base64,iVBOR..."/>' in gone["text/html"]
    assert sorted(nb["metadata"]["widgets"][WIDGET_STATE]["state"]) == ["child", "kept"]
