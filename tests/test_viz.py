"""Tests of hybridlab.viz: graph drawings (DOT/SVG), the missing-`dot` path, plot callbacks."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from hybridlab.errors import GraphvizNotFoundError
from hybridlab.graph import ir
from hybridlab.ops.registry import Aval
from hybridlab.viz import graph as vg
from hybridlab.viz import views

F32 = np.dtype("float32")
HAS_DOT = shutil.which("dot") is not None
pytestmark = pytest.mark.viz  # needs the notebooks extra (graphviz, matplotlib, ipywidgets)


def small_graph() -> ir.Graph:
    """relu(data + w) * 2 + 10, with ``w`` a parameter::

        data   w
           \\  /
        broadcast_add -> relu -> _mul_scalar --\\
                                 const 10 ---- broadcast_add -> output
    """
    data = ir.var("data", Aval((4, 8), F32))
    weight = ir.var("w", Aval((8,), F32))
    added = ir.call("broadcast_add", [data.out(), weight.out()])
    relu = ir.call("relu", [added.out()])
    doubled = ir.call("_mul_scalar", [relu.out()], {"scalar": 2.0})
    ten = ir.const(np.float32(10))
    return ir.Graph.from_outputs([ir.call("broadcast_add", [doubled.out(), ten.out()]).out()])


def test_dot_has_every_node_with_its_type_and_every_edge():
    source = vg.to_dot(small_graph(), params=["w"]).source
    for text in (r"data\nfloat32[4,8]", r"w\nfloat32[8]", r"relu\nfloat32[4,8]",
                 "scalar=2.0", r"const 10\nfloat32[]", "output 0"):
        assert text in source
    edges = [line.strip() for line in source.splitlines() if "->" in line]
    assert edges == ["n0 -> n2", "n1 -> n2", "n2 -> n3", "n3 -> n4", "n4 -> n6", "n5 -> n6",
                     "n6 -> out0"]


def test_inputs_params_consts_and_kinds_are_drawn_distinctly():
    source = vg.to_dot(small_graph(), params=["w"]).source
    line = {n: next(s for s in source.splitlines() if s.strip().startswith(n + " "))
            for n in ("n0", "n1", "n2", "n3", "n5")}
    assert "oval" in line["n0"] and "dashed" in line["n1"] and "note" in line["n5"]
    assert vg.KIND_COLOURS["broadcast"] in line["n2"]
    assert vg.KIND_COLOURS["elementwise"] in line["n3"]


def test_drawing_is_deterministic():
    assert vg.to_dot(small_graph()).source == vg.to_dot(small_graph()).source


def test_hide_weights_removes_parameters_and_their_edges():
    source = vg.to_dot(small_graph(), params=["w"], hide_weights=True).source
    assert r"w\n" not in source and "n1" not in source


def test_summary_is_stable_text():
    assert vg.summary(small_graph(), ["w"]) == (
        "Graph(nodes=7, inputs=1, params=1, ops=[broadcast_add x2, relu, _mul_scalar])")


@pytest.mark.skipif(not HAS_DOT, reason="graphviz 'dot' not installed")
def test_svg_contains_the_nodes():
    bundle = vg.Drawing(vg.to_dot(small_graph()), "text")._repr_mimebundle_()
    assert bundle["text/plain"] == "text"
    assert "<svg" in bundle["image/svg+xml"] and "relu" in bundle["image/svg+xml"]


def test_without_dot_rendering_gives_one_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    dot = vg.to_dot(small_graph())
    with pytest.raises(GraphvizNotFoundError, match="apt-get install graphviz") as info:
        dot.pipe(format="svg")
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert "relu" in dot.source  # the DOT text is still there


def test_without_dot_the_notebook_shows_text_and_the_hint(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    bundle = vg.Drawing(vg.to_dot(small_graph()), "Graph(...)")._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    assert bundle["text/plain"].startswith("Graph(...)\n") and "conda install" in bundle[
        "text/plain"]


def test_fused_groups_are_drawn_as_clusters_wired_to_the_outer_graph():
    from hybridlab.graph.passes import run_pipeline

    fused, _ = run_pipeline(small_graph())
    source = vg.to_dot(fused, params=["w"]).source
    assert "subgraph cluster_" in source and "fused:" in source
    assert source.count("->") == 7  # the same data flow as before fusion
    inside = source.split("subgraph cluster_", 1)[1].split("}", 1)[0]
    assert "relu" in inside and "label=\"data" not in inside  # inputs stay outside the box


def test_pass_view_shows_each_changing_pass_in_text_and_html():
    view = views.draw_passes(small_graph())
    lines = view.text.splitlines()
    assert lines[0].startswith("before the passes: Graph(nodes=7")
    assert any(line.startswith("fuse_elementwise (1 change)") for line in lines)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"} and "fuse_elementwise" in bundle["text/html"]


def test_source_view_shows_generated_code_next_to_the_graph():
    view = views.draw_with_source(small_graph())
    assert view.text.startswith("def forward(data, w")
    assert "<pre" in view.html and "def forward" in view.html


def fancy_symbol():
    from hybridlab import sym

    a, b, c, d = (sym.var(name) for name in "abcd")
    return (a + b) + (c + d)


def test_a_symbol_displays_as_its_graph():
    bundle = vg.mimebundle(fancy_symbol())
    assert bundle["text/plain"] == "Graph(nodes=7, inputs=4, params=0, ops=[broadcast_add x3])"
    if HAS_DOT:
        bundle = fancy_symbol()._repr_mimebundle_()  # what Jupyter calls
        assert bundle["image/svg+xml"].count("broadcast_add") >= 3


def test_plot_network_infers_types_from_the_data_shapes():
    import hybridlab as mx

    dot = mx.viz.plot_network(fancy_symbol(), shape={n: (2, 3) for n in "abcd"})
    assert dot.source.count(r"broadcast_add\nfloat32[2,3]") == 3
    assert dot.format == "pdf"  # MXNet's default save_format
    untyped = mx.viz.plot_network(fancy_symbol()).source
    assert "float32" not in untyped and "?" not in untyped


def test_parameters_are_found_through_the_registry_input_names():
    from hybridlab import sym

    data = sym.var("data")
    out = sym.broadcast_add(data, sym.var("w"))
    assert vg.as_graph(out)[1] == ()  # "w" feeds an input named rhs: not a parameter


def test_unknown_objects_get_a_clear_type_error():
    with pytest.raises(TypeError, match="cannot draw a int"):
        vg.draw(3)


# ---------------------------------------------------------------------------------------
# plots: the speed-up callback across the sliders' range
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_size,width,depth", [
    (1, 16, 1), (256, 16, 1), (1, 512, 8), (256, 512, 8), (16, 64, 4)])
def test_speedup_callback_across_the_slider_range(batch_size, width, depth):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hybridlab.viz import plots

    figure, text = plots.speedup_callback(batch_size, width, depth, repeats=1)
    (axes,) = figure.axes
    bars = [patch.get_width() for patch in axes.patches]
    assert len(bars) == 3 and all(b > 0 for b in bars)
    assert "µs" in axes.get_xlabel() and f"x Dense({width})" in axes.get_title()
    assert text.startswith(f"batch={batch_size} width={width} depth={depth}: imperative")
    plt.close(figure)


def test_slider_ranges_cover_the_tested_corners():
    from hybridlab.viz import plots

    assert plots.BATCH_RANGE == (1, 256) and plots.WIDTH_RANGE == (16, 512)
    assert plots.DEPTH_RANGE == (1, 8)


def test_timing_summary_names_units_and_ratio():
    from hybridlab.viz.plots import Timing

    text = str(Timing(300.0, 100.0, 50.0))
    assert "µs/call" in text and "x3.0" in text


def test_a_hybridized_block_draws_its_program_with_all_parameters():
    from hybridlab import nd, random
    from hybridlab.gluon import nn

    class Head(nn.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = nn.Dense(4, activation="relu")
            self.head_weight = self.params.get("head_weight", shape=(2, 4))

        def hybrid_forward(self, F, x, head_weight):  # noqa: N803 -- MXNet's signature
            return F.dot(self.dense(x), head_weight, transpose_b=True)

    random.seed(0)
    block = Head()
    block.initialize()
    with pytest.raises(TypeError, match="hybridized HybridBlock that has been called once"):
        vg.draw(block)
    block.hybridize()
    block(nd.ones((3, 5)))
    drawing = vg.draw(block)
    assert drawing.text == "Graph(nodes=7, inputs=1, params=3, ops=[FullyConnected, relu, dot])"
    assert r"dot\ntranspose_b=True\nfloat32[3,2]" in drawing.source
    assert drawing.source.count("dashed") == 3  # weight, bias and head_weight
    assert "def forward(data" in views.draw_with_source(block).text


def test_speedup_widget_prints_a_static_summary_and_redraws_on_change(capsys, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from hybridlab.viz import plots

    calls = []
    real = plots.speedup_callback

    def recording(batch_size, width, depth, repeats=1):
        calls.append((batch_size, width, depth))
        return real(batch_size, width, depth, repeats=1)

    monkeypatch.setattr(plots, "speedup_callback", recording)
    box = plots.speedup_widget(batch_size=4, width=32, depth=2)
    printed = capsys.readouterr().out.splitlines()  # outside a kernel Output() captures nothing
    assert printed[-1].startswith("batch=4 width=32 depth=2: imperative")
    box.children[2].value = 3  # the depth slider
    assert calls == [(4, 32, 2), (4, 32, 3)]


# ---------------------------------------------------------------------------------------
# gantt: simulated schedules and the chart
# ---------------------------------------------------------------------------------------

DIAMOND = (["a", "b", "mul", "add"], [[], [], [0, 1], [2]], [1.0, 1.0, 2.0, 1.0])


@pytest.mark.parametrize("workers,span", [(1, 5.0), (2, 4.0), (8, 4.0)])
def test_simulate_overlaps_independent_ops_only(workers, span):
    from hybridlab.viz import gantt

    records = gantt.simulate(*DIAMOND, workers=workers)
    by_name = {r.name: r for r in records}
    assert max(r.end for r in records) == span
    assert by_name["mul"].start >= max(by_name["a"].end, by_name["b"].end)
    assert by_name["add"].start >= by_name["mul"].end
    assert {r.worker for r in records} <= set(range(workers))


def test_simulate_rejects_bad_input():
    from hybridlab.viz import gantt

    with pytest.raises(ValueError, match="push order"):
        gantt.simulate(["x", "y"], [[1], []], [1.0, 1.0], workers=2)
    with pytest.raises(ValueError, match="at least one worker"):
        gantt.simulate(*DIAMOND, workers=0)


def test_gantt_draws_one_row_per_worker_with_units():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hybridlab.viz import gantt

    records = gantt.simulate(*DIAMOND, workers=2)
    assert gantt.describe(records) == (
        "4 ops on 2 worker(s): span 4000.000 ms, workers busy 62% of it")
    figure = gantt.gantt(records, "diamond")
    (axes,) = figure.axes
    assert [t.get_text() for t in axes.get_yticklabels()] == ["worker 0", "worker 1"]
    assert "(ms)" in axes.get_xlabel() and axes.get_title().startswith("diamond")
    assert sorted(t.get_text() for t in axes.texts) == ["a", "add", "b", "mul"]
    plt.close(figure)
    with pytest.raises(ValueError, match="tracing"):
        gantt.gantt([])


def test_a_bare_digraph_in_a_notebook_shows_the_hint_without_dot(monkeypatch):
    import hybridlab as mx

    monkeypatch.setenv("PATH", "/nonexistent")
    dot = mx.viz.plot_network(fancy_symbol())
    assert dot._repr_mimebundle_() == {"text/plain": vg.INSTALL_HINT}
    with pytest.raises(GraphvizNotFoundError, match="conda install python-graphviz"):
        dot.render("/tmp/never-written")


# ---------------------------------------------------------------------------------------
# Properties over random graphs and schedules
# ---------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402 -- grouped with the property tests
from hypothesis import strategies as st  # noqa: E402


@st.composite
def random_graphs(draw):
    """DAGs of relu / broadcast_add / _mul_scalar over two float32[3,4] inputs."""
    nodes = [ir.var("x", Aval((3, 4), F32)), ir.var("y", Aval((3, 4), F32))]
    for _ in range(draw(st.integers(1, 8))):
        pick = st.sampled_from(nodes)
        kind = draw(st.sampled_from(["relu", "broadcast_add", "_mul_scalar"]))
        if kind == "broadcast_add":
            nodes.append(ir.call(kind, [draw(pick).out(), draw(pick).out()]))
        else:
            attrs = {"scalar": 2.0} if kind == "_mul_scalar" else {}
            nodes.append(ir.call(kind, [draw(pick).out()], attrs))
    return ir.Graph.from_outputs([nodes[-1].out()], inputs=nodes[:2])


@settings(max_examples=40, deadline=None)
@given(random_graphs())
def test_every_node_and_every_input_edge_is_drawn_before_and_after_fusion(graph):
    from hybridlab.graph.passes import run_pipeline

    source = vg.to_dot(graph).source
    calls = [n for n in graph.nodes if n.kind == "call"]
    assert source.count("->") == sum(len(n.inputs) for n in calls) + 1
    assert source == vg.to_dot(graph).source  # deterministic
    fused, _ = run_pipeline(graph, disabled=["fold_constants"])
    inner = [m for n in fused.nodes for _, g in n.attrs if isinstance(g, ir.Graph)
             for m in g.nodes if m.kind == "call"]
    outer = [n for n in fused.nodes if n.kind == "call" and vg._subgraph(n) is None]
    drawn = vg.to_dot(fused).source
    assert drawn.count("shape=box style=\"rounded") == len(inner) + len(outer)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 5.0), st.integers(0, 3)), min_size=1, max_size=12),
       st.integers(1, 4))
def test_simulated_schedules_respect_dependencies_and_bounds(ops, workers):
    from hybridlab.viz import gantt

    deps = [[i - 1 - k for k in range(min(back, i))] for i, (_, back) in enumerate(ops)]
    durations = [d for d, _ in ops]
    records = gantt.simulate([f"op{i}" for i in range(len(ops))], deps, durations, workers)
    for record, needs in zip(records, deps):
        assert all(record.start >= records[d].end - 1e-12 for d in needs)
    span = max(r.end for r in records)
    assert span >= sum(durations) / workers - 1e-9
    assert span <= sum(durations) + 1e-9
    by_worker = {}
    for record in sorted(records, key=lambda r: r.start):  # no worker runs two ops at once
        assert record.start >= by_worker.get(record.worker, 0.0) - 1e-12
        by_worker[record.worker] = record.end
