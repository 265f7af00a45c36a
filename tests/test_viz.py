"""Tests of hybridlab.viz: graph drawings (DOT/SVG), the missing-`dot` path, plot callbacks."""

from __future__ import annotations

import keyword
import shutil

import numpy as np
import pytest

from hybridlab.errors import GraphvizNotFoundError
from hybridlab.graph import ir
from hybridlab.lab import graphs as lab_graphs
from hybridlab.lab import schedule as schedule_model
from hybridlab.lab import timing
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


def small_mlp(outputs: int, batch: int):
    """Dense(4, relu) -> Dense(outputs), hybridized and called once on a (batch, 3) input."""
    from hybridlab import nd, random
    from hybridlab.gluon import nn

    random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(4, activation="relu"), nn.Dense(outputs))
    net.initialize()
    net.hybridize()
    net(nd.ones((batch, 3)))
    return net


def test_dot_has_every_node_with_its_type_and_every_edge():
    source = vg.to_dot(small_graph(), params=["w"]).source
    for text in (r"data\nfloat32[4,8]", r"w\nfloat32[8]", r"relu\nfloat32[4,8]",
                 "scalar=2.0", r"const 10\nfloat32[]", "output 0"):
        assert text in source
    edges = [line.strip() for line in source.splitlines() if "->" in line]
    assert edges == ["n0 -> n2", "n1 -> n2", "n2 -> n3", "n3 -> n4", "n4 -> n6", "n5 -> n6",
                     "n6 -> out0"]


def test_the_legend_names_exactly_the_kinds_drawn():
    source = vg.to_dot(small_graph(), params=["w"]).source
    legend = next(line for line in source.splitlines() if "operators:" in line)
    assert "labelloc=b" in source  # the graph's own label, at the bottom
    titled = vg.to_dot(small_graph(), "a title").source  # the label is taken: a key node
    assert "out0 -> legend [style=invis]" in titled and 'label="a title"' in titled
    drawn = {node.opdef.kind.value for node in small_graph().nodes if node.kind == "call"}
    for kind, words in vg.KIND_NAMES.items():
        assert (f">{words}</TD>" in legend) == (kind in drawn), kind
    assert vg.KIND_COLOURS[sorted(drawn)[0]] in legend
    data = ir.var("data", Aval((4, 8), F32))
    identity = ir.Graph((data,), (data,), (data.out(),))
    assert "operators:" not in vg.to_dot(identity).source  # no operator: nothing to explain


def test_the_gradient_drawing_boxes_forward_and_backward_and_names_the_gradients():
    graph = small_graph()
    drawing = vg.draw_gradient(graph)
    source = drawing.source
    assert "subgraph cluster_forward" in source and "subgraph cluster_backward" in source
    forward = source.split("subgraph cluster_forward", 1)[1].split("}", 1)[0]
    assert "relu" in forward and "_greater_scalar" not in forward  # relu's mask: backward
    for name in ("data", "w"):
        assert f"d loss / d {name}" in source
    assert r"d loss / d output 0" in source and 'label="output 0"' in source
    assert drawing.text.startswith("Graph(")


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
    assert lab_graphs.summary(small_graph(), ["w"]) == (
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
    assert source.count("->") - source.count("-> legend") == 7  # the same flow as unfused
    inside = source.split("subgraph cluster_", 1)[1].split("}", 1)[0]
    assert "relu" in inside and "label=\"data" not in inside  # inputs stay outside the box


def test_pass_view_shows_each_changing_pass_in_text_and_html():
    view = views.draw_passes(small_graph())
    lines = view.text.splitlines()
    assert lines[0].startswith("before the passes: Graph(nodes=7")
    assert any(line.startswith("fuse_elementwise (1 change)") for line in lines)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain", "image/png"}  # PNG: for untrusted readers
    assert "fuse_elementwise" in bundle["text/html"]


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
    assert bundle["text/plain"] == "Graph(nodes=7, inputs=4, params=0, ops=[elemwise_add x3])"
    if HAS_DOT:
        bundle = fancy_symbol()._repr_mimebundle_()  # what Jupyter calls
        assert bundle["image/svg+xml"].count("elemwise_add") >= 3


def test_plot_network_infers_types_from_the_data_shapes():
    import hybridlab as mx

    dot = mx.viz.plot_network(fancy_symbol(), shape={n: (2, 3) for n in "abcd"})
    assert dot.source.count(r"elemwise_add\nfloat32[2,3]") == 3
    assert dot.format == "pdf"  # MXNet's default save_format
    untyped = mx.viz.plot_network(fancy_symbol()).source
    assert "float32" not in untyped and "?" not in untyped


def test_plot_network_names_each_node_and_hides_weights_as_mxnet():
    import hybridlab as mx
    from hybridlab import sym

    x = sym.var("data")
    fc1 = sym.FullyConnected(x, num_hidden=8, name="fc1")
    net = sym.Activation(fc1, act_type="relu", name="relu1")
    source = mx.viz.plot_network(net, shape={"data": (2, 4)}).source
    assert r"fc1\nFullyConnected\nnum_hidden=8" in source and "relu1" in source
    assert "fc1_weight" not in source  # hidden by default, as MXNet
    assert "fc1_weight" in mx.viz.plot_network(net, hide_weights=False).source
    assert r"fc1\nFullyConnected" not in mx.viz.draw(net).dot.source  # draw: operators only


def test_plot_network_warns_of_repeated_names_and_types_each_node_of_its_own():
    import hybridlab as mx
    from hybridlab import sym

    net = sym.FullyConnected(sym.var("data"), num_hidden=6, name="fc")
    net = sym.FullyConnected(net, num_hidden=3, name="fc")  # fc_weight twice, two shapes
    assert net.infer_shape(data=(2, 4))[0] == [(2, 4), (6, 4), (6,), (3, 6), (3,)]
    with pytest.warns(RuntimeWarning, match="same name in your graph: fc,fc_bias,fc_weight"):
        source = mx.viz.plot_network(net, shape={"data": (2, 4)}).source
    assert r"float32[2,6]" in source and r"float32[2,3]" in source


def test_print_summary_counts_parameters_of_layers_given_lr_mult(capsys):
    import hybridlab as mx
    from hybridlab import sym

    fc = sym.FullyConnected(sym.var("data"), num_hidden=3, name="fc", lr_mult=0)
    mx.viz.print_summary(fc, {"data": (1, 4)})
    assert "Total params: 15" in capsys.readouterr().out


def test_parameters_are_found_through_the_registry_input_names():
    from hybridlab import sym

    data = sym.var("data")
    out = sym.broadcast_add(data, sym.var("w"))
    assert lab_graphs.as_graph(out)[1] == ()  # "w" feeds an input named rhs: not a parameter


def test_unknown_objects_get_a_clear_type_error():
    with pytest.raises(TypeError, match="cannot draw a int"):
        vg.draw(3)


# ---------------------------------------------------------------------------------------
# plots: the speed-up callback across the sliders' range
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("batch_size,width,depth", [
    (1, 16, 1), (1024, 16, 1), (1, 512, 8), (256, 512, 8), (16, 64, 4)])
def test_the_speedup_model_measures_each_setting_once_across_the_slider_range(
        batch_size, width, depth, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from hybridlab.viz import plots

    model = timing.SpeedupModel(repeats=1)
    measured = []
    real = timing.network_point
    monkeypatch.setattr(timing, "network_point", lambda *a: measured.append(a) or real(*a))
    first = model.measure(timing.CUSTOM, batch_size, width, depth)
    assert model.measure(timing.CUSTOM, batch_size, width, depth) is first  # cached
    assert len(measured) == 1 and measured[0][:3] == (batch_size, width,
                                                      (width,) * depth + (timing.OUTPUTS,))
    assert 2 <= measured[0][3] <= model.repeats or model.repeats < 2
    name = timing.network_name(width, depth)
    figure = plots.draw_speedups(Figure(), model, name, batch_size)
    (axes,) = figure.axes
    assert [len(line.get_xdata()) for line in axes.get_lines()[:3]] == [1, 1, 1]
    assert "µs" in axes.get_ylabel() and name in axes.get_title()
    low, high = axes.get_ylim()
    assert low <= first.numpy_us and high >= first.imperative_us  # nothing clipped
    assert f"x{first.speedup:.1f}" in axes.texts[0].get_text()


def test_speedup_points_accumulate_and_the_seed_network_has_its_own_sizes():

    assert timing.network(timing.SEED) == (512, (256, 128, 2))
    assert timing.network(timing.CUSTOM, 32, 2) == (32, (32, 32, timing.OUTPUTS))
    with pytest.raises(ValueError, match="choose"):
        timing.network("resnet")
    model = timing.SpeedupModel(repeats=2)
    for batch in (4, 1):
        model.measure(timing.CUSTOM, batch, 16, 1)
    model.measure(timing.SEED, 1)
    assert [b for b, _ in model.series(timing.network_name(16, 1))] == [1, 4]
    assert [b for b, _ in model.series(timing.SEED)] == [1]
    # fewer calls per round for heavier settings, never fewer than 2
    assert model.calls_per_round(1, 16, (16, 10)) == 2 == model.calls_per_round(
        1024, 512, (512,) * 8)
    assert timing.SpeedupModel(repeats=30).calls_per_round(1, 16, (16, 10)) == 30


def test_the_numpy_floor_computes_what_the_network_computes():
    """The floor is only a floor if it does the network's arithmetic: same outputs, for
    every batch size (its buffers are per batch size) and depth."""
    from hybridlab import nd, random

    random.seed(3)
    for depth in (1, 3):
        net = timing.make_mlp(24, depth)
        net(nd.zeros((1, 24)))  # deferred initialisation: the floor copies the weights
        floor = timing.numpy_mlp(net)
        for batch in (1, 5, 1):
            x = nd.random.normal(shape=(batch, 24))
            np.testing.assert_allclose(floor(x.asnumpy()), net(x).asnumpy(), rtol=1e-5,
                                       atol=1e-6)


def test_slider_ranges_cover_the_tested_corners():

    assert timing.BATCH_RANGE == (1, 1024) and timing.WIDTH_RANGE == (16, 512)
    assert (min(timing.BATCHES), max(timing.BATCHES)) == timing.BATCH_RANGE
    assert timing.DEPTH_RANGE == (1, 8)


def test_timing_summary_names_units_and_ratio():
    from hybridlab.lab.timing import Timing

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

        def hybrid_forward(self, F, x, head_weight):
            return F.dot(self.dense(x), head_weight, transpose_b=True)

    random.seed(0)
    block = Head()
    block.initialize()
    with pytest.raises(TypeError, match="hybridized HybridBlock that has been called once"):
        vg.draw(block)
    block.hybridize()
    block(nd.ones((3, 5)))
    drawing = vg.draw(block)
    assert drawing.text == ("Graph(nodes=7, inputs=1, params=3, "
                            "ops=[FullyConnected, Activation, dot])")
    assert r"dot\ntranspose_b=True\nfloat32[3,2]" in drawing.source
    assert drawing.source.count("dashed") == 3  # weight, bias and head_weight
    assert "def forward(data" in views.draw_with_source(block).text


def test_draw_with_source_shows_the_backward_program_of_a_recorded_call():
    from hybridlab import autograd, nd

    net = small_mlp(1, batch=2)
    with pytest.raises(ValueError, match=r"no backward program.*autograd.record\(\)"):
        views.draw_with_source(net, which="backward")  # only predicted so far
    with pytest.raises(ValueError, match="'forward' or the 'backward'"):
        views.draw_with_source(net, which="grad")
    with autograd.record():
        loss = net(nd.ones((2, 3))).sum()
    loss.backward()
    view = views.draw_with_source(net, which="backward")
    assert view.text.startswith("def backward(") and "d_dot" in view.text
    assert "<img src=\"data:image/png;base64," in view.html or shutil.which("dot") is None
    assert views.draw_with_source(net).text.startswith("def forward(")
    with pytest.raises(ValueError, match="gradient_graph"):
        views.draw_with_source(small_graph(), which="backward")


def test_speedup_widget_displays_widget_png_and_summary_and_redraws_on_change(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from hybridlab.viz import plots

    calls = []
    real = timing.network_point

    def recording(batch_size, features, units, repeats=1):
        calls.append((batch_size, features, units))
        return real(batch_size, features, units, 1)

    monkeypatch.setattr(timing, "network_point", recording)
    view = plots.speedup_widget(batch_size=4, width=32, depth=2, network_kind=timing.CUSTOM)
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"].startswith("2 x Dense(32) + Dense(10), batch 4: imperative")
    assert bundle["image/png"].startswith("iVBOR")  # base64 of the PNG signature
    assert "application/vnd.jupyter.widget-view+json" in bundle
    first_png = bundle["image/png"]
    assert view.status.value.startswith("<code>2 x Dense(32)")  # the line above the sliders
    view.sliders["depth"].value = 3
    view.sliders["depth"].value = 2  # measured before: taken from the model, not re-timed
    assert calls == [(4, 32, (32, 32, 10)), (4, 32, (32, 32, 32, 10))]
    view.network.value = timing.SEED
    assert view.sliders["width"].layout.display == "none"  # the seeds' MLP: no width to set
    assert calls[-1] == (4, 512, (256, 128, 2))
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"].startswith("seed MLP 512-256-128-2, batch 4")
    assert bundle["image/png"] != first_png


# ---------------------------------------------------------------------------------------
# gantt: simulated schedules and the chart
# ---------------------------------------------------------------------------------------

DIAMOND = (["a", "b", "mul", "add"], [[], [], [0, 1], [2]], [1.0, 1.0, 2.0, 1.0])


@pytest.mark.parametrize("workers,span", [(1, 5.0), (2, 4.0), (8, 4.0)])
def test_simulate_overlaps_independent_ops_only(workers, span):

    records = schedule_model.simulate(*DIAMOND, workers=workers)
    by_name = {r.name: r for r in records}
    assert max(r.end for r in records) == span
    assert by_name["mul"].start >= max(by_name["a"].end, by_name["b"].end)
    assert by_name["add"].start >= by_name["mul"].end
    assert {r.worker for r in records} <= set(range(workers))


def test_simulate_takes_any_dag_order_and_rejects_bad_input():

    x, y = schedule_model.simulate(["x", "y"], [[1], []], [1.0, 1.0], workers=2)  # x needs y
    assert x.start == y.end == 1.0
    with pytest.raises(ValueError, match="at least one worker"):
        schedule_model.simulate(*DIAMOND, workers=0)


def test_gantt_draws_one_row_per_worker_with_units():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hybridlab.viz import gantt

    records = schedule_model.simulate(*DIAMOND, workers=2)
    assert schedule_model.describe(records) == (
        "4 ops on 2 worker(s): makespan 4000.000 ms, workers busy 62% of it")
    figure = gantt.gantt(records, "diamond")
    (axes,) = figure.axes
    assert [t.get_text() for t in axes.get_yticklabels()] == ["worker 0", "worker 1"]
    assert "(ms)" in axes.get_xlabel() and axes.get_title().startswith("diamond")
    assert sorted(t.get_text() for t in axes.texts) == ["a", "add", "b", "mul"]
    plt.close(figure)
    with pytest.raises(ValueError, match="tracing"):
        gantt.gantt([])


def test_a_bare_digraph_in_a_notebook_shows_the_hint_without_dot(monkeypatch, tmp_path):
    import hybridlab as mx

    monkeypatch.setenv("PATH", "/nonexistent")
    dot = mx.viz.plot_network(fancy_symbol())
    assert dot._repr_mimebundle_() == {"text/plain": vg.INSTALL_HINT}
    with pytest.raises(GraphvizNotFoundError, match="conda install python-graphviz"):
        dot.render(str(tmp_path / "never-written"))  # (a fixed /tmp path fails other users)


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs graphviz's dot")
def test_names_with_backslashes_and_quotes_are_drawn_as_written():
    import hybridlab as mx
    from hybridlab import symbol as sym

    x = sym.var("input\\")  # a name ending in a backslash
    y = sym.relu(x, name='say "hi" \\n not a newline\\')
    svg = mx.viz.plot_network(y).pipe(format="svg").decode()
    assert "input\\" in svg and "not a newline\\" in svg and "&quot;hi&quot;" in svg


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
    assert source.count("->") - source.count("-> legend") == sum(len(n.inputs) for n in calls) + 1
    assert source == vg.to_dot(graph).source  # deterministic
    fused, _ = run_pipeline(graph, disabled=["fold_constants"])
    inner = [m for n in fused.nodes for _, g in n.attrs if isinstance(g, ir.Graph)
             for m in g.nodes if m.kind == "call"]
    outer = [n for n in fused.nodes if n.kind == "call" and lab_graphs.fused_body(n) is None]
    drawn = vg.to_dot(fused).source
    assert drawn.count("shape=box style=\"rounded") == len(inner) + len(outer)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 5.0), st.integers(0, 3)), min_size=1, max_size=12),
       st.integers(1, 4))
def test_simulated_schedules_respect_dependencies_and_bounds(ops, workers):

    deps = [[i - 1 - k for k in range(min(back, i))] for i, (_, back) in enumerate(ops)]
    durations = [d for d, _ in ops]
    records = schedule_model.simulate([f"op{i}" for i in range(len(ops))], deps, durations, workers)
    for record, needs in zip(records, deps):
        assert all(record.start >= records[d].end - 1e-12 for d in needs)
    span = max(r.end for r in records)
    assert span >= sum(durations) / workers - 1e-9
    assert span <= sum(durations) + 1e-9
    by_worker = {}
    for record in sorted(records, key=lambda r: r.start):  # no worker runs two ops at once
        assert record.start >= by_worker.get(record.worker, 0.0) - 1e-12
        by_worker[record.worker] = record.end


# ---------------------------------------------------------------------------------------
# Notebook display: repeated displays, objects with nothing to draw, missing graphviz
# ---------------------------------------------------------------------------------------

def test_displaying_a_drawing_again_does_not_repeat_the_hint(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    drawing = vg.draw(small_graph())
    texts = [drawing._repr_mimebundle_()["text/plain"] for _ in range(3)]
    assert texts[0] == texts[2] and texts[0].count("apt-get install graphviz") == 1
    assert drawing.text == repr(drawing) == lab_graphs.summary(small_graph())


def test_mimebundle_keeps_the_callers_text_and_adds_the_hint_without_dot(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    bundle = vg.mimebundle(fancy_symbol(), text="<Symbol _plus2>")
    assert bundle == {"text/plain": f"<Symbol _plus2>\n{vg.INSTALL_HINT}"}


def test_mimebundle_without_the_graphviz_package_says_what_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_graphviz(name, *args, **kwargs):
        if name == "graphviz":
            raise ImportError("No module named 'graphviz'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(vg, "_DIGRAPH", None)
    monkeypatch.setattr(builtins, "__import__", no_graphviz)
    bundle = vg.mimebundle(small_graph())
    assert set(bundle) == {"text/plain"}
    assert bundle["text/plain"].startswith("Graph(nodes=7") and "pip install graphviz" in bundle[
        "text/plain"]


def test_a_block_with_nothing_to_draw_yet_shows_its_repr():
    from hybridlab.gluon import nn

    block = nn.Dense(3)
    assert vg.mimebundle(block) == {"text/plain": repr(block)}
    assert vg.mimebundle(block, text="Dense") == {"text/plain": "Dense"}


@pytest.mark.skipif(not HAS_DOT, reason="graphviz 'dot' not installed")
def test_graphs_and_hybridized_blocks_display_inline_with_a_summary():
    bundle = vg.mimebundle(small_graph())
    assert bundle["text/plain"].startswith("Graph(nodes=7, ") and "<svg" in bundle[
        "image/svg+xml"]
    net = small_mlp(2, batch=1)
    bundle = vg.mimebundle(net)
    assert bundle["text/plain"] == ("Graph(nodes=8, inputs=1, params=4, "
                                    "ops=[FullyConnected x2, Activation])")
    assert bundle["image/svg+xml"].count("FullyConnected") == 2
    shown = net._repr_mimebundle_()  # what Jupyter calls: the drawing, the layers as text
    assert shown["text/plain"] == repr(net) and "Dense(3 -> 4" in shown["text/plain"]
    assert shown["image/svg+xml"] == bundle["image/svg+xml"]


def test_vars_declared_learnable_are_drawn_as_parameters():
    import hybridlab as mx
    from hybridlab import sym

    weight = sym.var("w", shape=(4, 4), init=mx.init.Normal(0.01))
    scale = sym.var("s", shape=(4,), lr_mult=0.5)
    out = sym.broadcast_mul(sym.dot(sym.var("x", shape=(2, 4)), weight), scale)
    assert lab_graphs.as_graph(out)[1] == ("w", "s")
    assert vg.draw(out).text == "Graph(nodes=5, inputs=1, params=2, ops=[dot, broadcast_mul])"


def test_unused_nodes_are_dotted_and_disconnected_pieces_packed():
    from hybridlab import sym
    from hybridlab.graph.passes import PREDICTION, fold_constants

    program = sum((sym.full(shape=(1,), val=v) for v in (2.0, 3.0, 4.0)), sym.full(shape=(1,),
                                                                                     val=1.0))
    folded, _, _ = fold_constants(program.to_graph(), PREDICTION)
    source = vg.to_dot(folded).source
    assert source.count("unused") == 6 and source.count("dotted") == 6
    assert "pack=true" in source and "packmode=array_3" in source
    assert lab_graphs.summary(folded).endswith("ops=[], unused=6)")


def test_fused_clusters_are_labelled_in_the_drawing_font_at_the_bottom():
    from hybridlab.graph.passes import run_pipeline

    source = vg.to_dot(run_pipeline(small_graph())[0]).source
    cluster = source.split("subgraph cluster_", 1)[1]
    assert "fontname=Helvetica" in cluster and "labelloc=b" in cluster
    assert r'label="fused:\r' in cluster


# ---------------------------------------------------------------------------------------
# views: pass captions, the memory plan, source under the graph
# ---------------------------------------------------------------------------------------

def test_pass_view_captions_changes_and_shows_the_memory_plan():
    view = views.draw_passes(small_graph())
    assert "fused [" in view.html  # the pass's own change list is shown under its name
    plan = [line for line in view.text.splitlines() if line.startswith("plan_memory")]
    assert len(plan) == 1
    drawn = view.panels[-1][1].source  # the plan_memory panel's drawing (a PNG in the HTML)
    assert view.panels[-1][0].startswith("plan_memory")
    assert "fused:" in drawn and "own buffer 1 (output)" in drawn  # the fused result


def test_memory_notes_place_every_result():
    r"""Both kinds of place: ``b`` is live while ``a`` is, so it gets arena bytes; ``a``
    is overwritten in place by the sum, which is the output::

        data --relu--> a --+
          \--exp---> b ---+--> c = a + b   (output)
    """
    from hybridlab.graph.passes import run_pipeline

    data = ir.var("data", Aval((4, 8), np.dtype("float32")))
    a = ir.call("relu", [data.out()], {})
    b = ir.call("exp", [data.out()], {})
    c = ir.call("broadcast_add", [a.out(), b.out()], {})
    graph = ir.Graph.from_outputs([c.out()], [data])
    planned, _ = run_pipeline(graph, disabled=["fuse_elementwise"])
    notes = views.memory_notes(planned)
    assert set(notes) == {id(a), id(b), id(c)}
    assert notes[id(c)] == "own buffer 1 (output)"
    assert notes[id(a)] == "in place in buffer 1 (the output's)"
    assert notes[id(b)] == "arena bytes 0-128"


def test_a_pass_that_only_annotates_nothing_is_not_drawn_twice():
    from hybridlab import sym

    program = sym.full(shape=(1,), val=1.0) + sym.full(shape=(1,), val=2.0)
    view = views.draw_passes(program)
    assert "only annotates it" in view.html
    if HAS_DOT:  # every panel but plan_memory's has its picture
        assert view.html.count("<img ") == view.html.count("<b>") - 1


def test_source_view_puts_wrapped_source_under_the_graph():
    view = views.draw_with_source(small_graph())
    assert view.html.index("<b>graph</b>") < view.html.index("<b>generated source</b>")
    assert "white-space:pre;" in view.html and "overflow-x:auto" in view.html


GENERATED = [
    "def forward(data, dense0_weight, dense0_bias, dense1_weight, dense1_bias, "
    "dense2_weight, dense2_bias, *, rt):",
    "    dense1_fwd = FullyConnected(dense0_relu_fwd, dense1_weight, dense1_bias, flatten=True, "
    "no_bias=False, num_hidden=128); dense0_relu_fwd = None",
    "    # a_comment_that_is_long: fused broadcast_add -> relu -> broadcast_mul -> "
    "broadcast_add in one buffer",
]


@pytest.mark.parametrize("line", GENERATED)
def test_wrapped_source_stays_python_and_never_splits_a_name(line):
    wrapped = views.wrap_source(line, width=60)
    assert "".join(wrapped.split()) == "".join(line.split())  # only whitespace changed
    assert set(wrapped.replace(",", " ").split()) == set(line.replace(",", " ").split())
    if not line.lstrip().startswith("#"):  # comments are left whole (they scroll)
        assert all(len(row) <= 60 or ", " not in row for row in wrapped.splitlines())
    program = wrapped if wrapped.startswith("def") else "def f():\n" + wrapped
    compile(program + "\n    pass", "<wrapped>", "exec")


IDENTIFIERS = st.from_regex(r"[a-z_][a-z0-9_]{0,14}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name))


@settings(max_examples=60, deadline=None)
@given(st.lists(IDENTIFIERS, max_size=8), st.lists(IDENTIFIERS, max_size=6, unique=True),
       st.integers(20, 100))
@pytest.mark.slow
def test_wrapping_any_call_keeps_its_tokens_and_validity(positional, keywords, width):
    arguments = positional + [f"{name}=1" for name in keywords]
    line = f"    result_name = SomeOperator({', '.join(arguments)})"
    wrapped = views.wrap_source(line, width)
    assert "".join(wrapped.split()) == "".join(line.split())  # only whitespace changed
    compile("def f():\n" + wrapped, "<wrapped>", "exec")
    for row in wrapped.splitlines():
        assert len(row) <= width or ", " not in row  # too long only if it cannot break
    for row in wrapped.splitlines()[1:]:
        assert row.startswith(" " * len("    result_name = SomeOperator("))


# ---------------------------------------------------------------------------------------
# gantt: colours by kind, a legend, labels that fit
# ---------------------------------------------------------------------------------------

def test_gantt_colours_each_op_by_kind_the_same_in_every_chart_with_a_legend():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from hybridlab.viz import gantt

    def colours(records):
        figure = gantt.gantt(records)
        (axes,) = figure.axes
        found = {}
        (bars,) = axes.collections  # one collection: a bar per record, in order
        for face, record in zip(bars.get_facecolors(), records):
            found.setdefault(record.name, set()).add(to_hex(face))
        legend = [t.get_text() for t in figure.legends[0].get_texts()]
        plt.close(figure)
        return found, legend

    simulate = schedule_model.simulate
    first, legend1 = colours(simulate(["dot", "broadcast_add"], [[], [0]], [1, 1], 1))
    second, legend2 = colours(simulate(["_ones", "relu", "dot", "broadcast_add", "CachedOp"],
                                       [[], [0], [1], [2], []], [1] * 5, 2))
    assert first["dot"] == second["dot"] == {vg.KIND_COLOURS["opaque"]}
    assert first["broadcast_add"] == second["broadcast_add"] == {vg.KIND_COLOURS["broadcast"]}
    assert second["relu"] == {vg.KIND_COLOURS["elementwise"]}
    assert second["CachedOp"] == {gantt.OTHER_COLOUR}
    assert legend1 == ["broadcast: broadcast_add", "opaque: dot"]
    assert "opaque: _ones, dot" in legend2 and "other: CachedOp" in legend2


def test_gantt_labels_only_bars_they_fit_in():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hybridlab.viz import gantt

    names = ["broadcast_add", "dot", "broadcast_add", "relu"]
    records = schedule_model.simulate(names, [[], [0], [1], [2]], [5.0, 0.05, 3.0, 0.02], workers=1)
    figure = gantt.gantt(records)
    (axes,) = figure.axes
    renderer = figure.canvas.get_renderer()
    labelled = {t.get_text() for t in axes.texts}
    assert labelled == {"broadcast_add"}  # the two slivers carry no label
    for text in axes.texts:
        x = text.get_position()[0]
        record = next(r for r in records if abs((r.start + r.end) / 2 * 1e3 - x) < 1e-9)
        x0, x1 = axes.transData.transform([(record.start * 1e3, 0), (record.end * 1e3, 0)])[:, 0]
        assert text.get_window_extent(renderer).width <= x1 - x0
    plt.close(figure)


# ---------------------------------------------------------------------------------------
# plots: a fair protocol and readable axes
# ---------------------------------------------------------------------------------------

def test_every_curve_is_timed_on_one_worker_with_one_blas_thread(monkeypatch):
    from threadpoolctl import threadpool_info

    from hybridlab import engine, nd, random

    seen = []
    real = timing._round

    def recording(way, *args):
        blas = {info["num_threads"] for info in threadpool_info()
                if info["user_api"] == "blas"}
        seen.append((engine.current().__class__.__name__, blas))
        return real(way, *args)

    monkeypatch.setattr(timing, "_round", recording)
    before = engine.current()
    random.seed(0)
    net = timing.make_mlp(16, 2)
    measured = timing.measure_speedup(net, nd.ones((2, 16)), repeats=2, rounds=2)
    blas_found = any(info["user_api"] == "blas" for info in threadpool_info())
    assert len(seen) == 6 and all(blas == ({1} if blas_found else set()) for _, blas in seen)
    assert {name for name, _ in seen} == {"NaiveEngine"}  # one thread, as the floor
    assert engine.current() is before and net._active  # back to the default, left hybridized
    assert measured.imperative_us > 0 and measured.numpy_us > 0


@pytest.mark.parametrize("values,limits", [([14.7, 261.2], (10, 500)), ([0.3, 0.9], (0.2, 1)),
                                           ([200.0], (200, 200)), ([1.5, 21.0], (1, 50))])
def test_nice_limits_put_a_labelled_tick_at_both_ends(values, limits):
    from hybridlab.viz import plots

    low, high = plots.nice_limits(values)
    assert low == pytest.approx(limits[0]) and high == pytest.approx(limits[1])



def _dag(durations, raw):
    """Random dependencies on earlier ops only (a DAG in push order, as engines make)."""
    return [sorted({d % i for d in needs}) if i else [] for i, needs in enumerate(raw)]


DAGS = st.integers(1, 14).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0.1, 5.0), min_size=n, max_size=n),
    st.lists(st.lists(st.integers(0, 13), max_size=3), min_size=n, max_size=n)))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(DAGS, st.integers(1, 5))
def test_the_list_scheduler_is_work_conserving_and_within_brents_bounds(dag, workers):

    durations, raw = dag
    deps = _dag(durations, raw)
    names = [f"op{i}" for i in range(len(deps))]
    records = schedule_model.simulate(names, deps, durations, workers)
    work, span = schedule_model.work_and_span(deps, durations)
    makespan = max(r.end for r in records)
    assert max(work / workers, span) - 1e-9 <= makespan <= work / workers + span + 1e-9
    assert records == schedule_model.simulate(names, deps, durations, workers)  # deterministic
    # work-conserving: at every start time, if a worker is idle, no op is ready
    eps = 1e-9  # sums of float durations: two ends meant to be equal may differ by an ulp
    for moment in sorted({r.start for r in records}):
        busy = sum(r.start <= moment + eps < r.end for r in records)
        ready = [i for i, r in enumerate(records) if r.start > moment + eps
                 and all(records[d].end <= moment + eps for d in deps[i])]
        assert busy == workers or not ready, (moment, busy, ready)


@settings(max_examples=60, deadline=None)
@given(DAGS)
def test_one_worker_takes_the_work_and_enough_workers_take_the_span(dag):

    durations, raw = dag
    deps = _dag(durations, raw)
    names = [f"op{i}" for i in range(len(deps))]
    work, span = schedule_model.work_and_span(deps, durations)
    one = schedule_model.simulate(names, deps, durations, 1)
    assert max(r.end for r in one) == pytest.approx(work)
    many = schedule_model.simulate(names, deps, durations, len(deps))
    assert max(r.end for r in many) == pytest.approx(span)


def test_the_simulator_refuses_cycles_and_bad_dependencies():

    with pytest.raises(ValueError, match="form a cycle"):
        schedule_model.simulate(["a", "b"], [[1], [0]], [1.0, 1.0], 2)
    with pytest.raises(ValueError, match="depends on 5, which is not an op"):
        schedule_model.simulate(["a"], [[5]], [1.0], 1)
    with pytest.raises(ValueError, match="at least one worker"):
        schedule_model.simulate(["a"], [[]], [1.0], 0)


def test_the_gradient_drawing_keeps_a_lowered_forward_in_the_forward_box():
    from hybridlab import nd, sym
    from hybridlab.gluon import nn

    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.Dense(1))
    net.initialize()
    net(nd.ones((4, 3)))
    source = vg.draw_gradient(net(sym.var("data", shape=(4, 3))).graph).source
    forward = source.split("subgraph cluster_forward", 1)[1].split("}", 1)[0]
    backward = source.split("subgraph cluster_backward", 1)[1].split("}", 1)[0]
    assert forward.count("FullyConnected") == 2 and "relu" in forward
    assert "FullyConnected" not in backward and "_relu_grad" in backward  # relu's VJP


def test_a_gantt_legend_of_many_operators_keeps_the_chart_laptop_wide():
    import struct

    from hybridlab.engine import TaskRecord
    from hybridlab.viz import gantt
    from hybridlab.viz.bundle import figure_png

    names = ["FullyConnected", "Convolution", "relu", "broadcast_add", "broadcast_mul", "sum",
             "mean", "_copyto", "Pooling", "softmax", "log_softmax", "exp", "sigmoid", "tanh",
             "Reshape", "transpose", "dot", "batch_dot", "SoftmaxOutput", "negative"]
    records = [TaskRecord(name, i % 3, i * 1e-3, i * 1e-3 + 8e-4, (), ())
               for i, name in enumerate(names * 2)]
    png = figure_png(gantt.gantt(records, "one training step"))
    width = struct.unpack(">I", png[16:20])[0]
    assert width <= 1000  # a 1280-pixel window's output area (one row of labels: 2179 px)


def test_code_boxes_carry_their_own_ink_on_their_own_fill():
    from hybridlab.viz import palette

    assert f"background:{palette.PANEL}" in palette.CODE_STYLE
    assert f"color:{palette.INK}" in palette.CODE_STYLE
    assert palette.contrast_ratio(palette.INK, palette.PANEL) >= 4.5


def test_print_summary_counts_each_layers_parameters(capsys):
    import hybridlab as mx

    data = mx.sym.var("data")
    hidden = mx.sym.FullyConnected(data, name="fc1", num_hidden=10)
    out = mx.sym.FullyConnected(mx.sym.relu(hidden), name="fc2", num_hidden=4)
    mx.viz.print_summary(out, {"data": (2, 8)}, line_length=80)
    text = capsys.readouterr().out
    assert "fc1(FullyConnected)" in text and "2x10" in text
    assert "Total params: 134" in text  # 8*10 + 10, then 10*4 + 4
    mx.viz.print_summary(out)  # without shapes: '?' and no count, but no error
    assert "fc2(FullyConnected)" in capsys.readouterr().out


def test_plot_network_takes_dtypes_by_name_as_mxnet():
    import hybridlab as mx

    out = mx.sym.FullyConnected(mx.sym.var("data"), name="fc", num_hidden=3)
    dot = mx.viz.plot_network(out, shape={"data": (2, 4)}, dtype={"data": np.float64})
    assert "float64[2,3]" in dot.source
