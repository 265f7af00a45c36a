"""The display hook: core objects draw through viz without importing it (issue 13)."""

from hybridlab import display, sym
from hybridlab.viz import graph as vg


def test_viz_installs_its_renderer_when_imported():
    assert display._renderer is vg.mimebundle


def test_without_a_renderer_core_objects_show_their_text(monkeypatch):
    monkeypatch.setattr(display, "_renderer", None)
    s = sym.relu(sym.var("data"))
    assert s._repr_mimebundle_() == {"text/plain": repr(s)}
    graph = s.to_graph()
    assert graph._repr_mimebundle_() == {"text/plain": repr(graph)}


def test_the_hook_passes_the_callers_text_to_the_renderer(monkeypatch):
    seen = []
    monkeypatch.setattr(display, "_renderer", lambda obj, text=None: seen.append(text) or {})
    s = sym.relu(sym.var("data"))
    s._repr_mimebundle_()
    assert seen == [repr(s)]
