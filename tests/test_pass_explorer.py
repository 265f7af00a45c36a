"""The pass explorer: its stages are the pipeline's, and a user's pass joins it."""

from __future__ import annotations

import numpy as np
import pytest

from hybridlab import nd, sym
from hybridlab.graph.evaluate import evaluate
from hybridlab.graph.ir import Graph, Node, Value, rebuild, with_inputs
from hybridlab.graph.passes import Note, PassContext, PassResult, run_pipeline
from hybridlab.lab.graphs import as_graph
from hybridlab.lab.passes import PassModel
from hybridlab.viz.bundle import PNG, TEXT, WIDGET_VIEW
from hybridlab.viz.pass_explorer import pass_explorer


def drop_times_one(graph: Graph, context: PassContext) -> tuple[Graph, list[str]]:
    """An algebraic simplification a student writes: ``x * 1 -> x``."""
    changes: list[str] = []

    def visit(node: Node, inputs: tuple[Value, ...]) -> Node | list[Value]:
        node = with_inputs(node, inputs)
        if node.kind == "call" and node.op == "_mul_scalar" and dict(node.attrs)["scalar"] == 1:
            changes.append(f"{node.name}: x * 1 -> x")
            return [inputs[0]]
        return node

    return rebuild(graph, visit), changes


def program():
    x = sym.var("x")
    twice = sym.relu(x) + sym.relu(x)  # a common subexpression
    return sym.broadcast_mul(twice, sym.full(shape=(1,), val=2.0) + sym.full(shape=(1,), val=3.0)
                             ) * 1.0


def test_the_stages_are_the_pipelines_intermediate_graphs():
    symbol = program()
    model = PassModel(symbol, shape={"x": (2, 3)})
    graph, _ = as_graph(symbol, {"x": (2, 3)})
    _, records = run_pipeline(graph)
    assert [s.name for s in model.stages] == ["input graph"] + [r.name for r in records]
    for stage, record in zip(model.stages[1:], records):
        assert str(stage.graph) == str(record.after) and stage.changes == record.changes
    assert [s.name for s in model.stages[1:3]] == ["fold_batchnorm", "lower_operators"]
    assert model.stages[1].changes == model.stages[2].changes == []
    assert model.note(1) == ""  # nothing folded: no arithmetic to show
    cse = model.stages[model.stage_index("eliminate_common_subexpressions")]
    assert len(cse.changes) == 1 and len(cse.new) == 1  # relu twice: the add is rewritten
    assert [n.op for n in cse.graph.nodes if id(n) in cse.new] == ["elemwise_add"]
    assert "-%2 = relu(%0)" in model.diff(model.stage_index("eliminate_common_subexpressions"))
    assert model.headline(6).startswith("stage 6/7: fuse_elementwise: 1 change(s); 1 node(s)")
    assert model.source.startswith("def forward(")


def test_a_user_pass_appears_as_a_stage_before_the_memory_plan_and_keeps_the_results():
    symbol = program()
    model = PassModel(symbol, passes=[drop_times_one], shape={"x": (2, 3)})
    names = [s.name for s in model.stages]
    assert names[-3:] == ["drop_times_one", "fuse_elementwise", "plan_memory"]
    stage = model.stages[-3]
    assert stage.changes and stage.changes[0].endswith("x * 1 -> x")
    graph, _ = as_graph(symbol, {"x": (2, 3)})
    x = np.array([[1.0, -2.0, 3.0], [-1.0, 0.5, 2.0]], np.float32)
    before = evaluate(graph, x)
    after = evaluate(model.stages[-1].graph, x)
    np.testing.assert_allclose(after[0], before[0])


def test_bad_user_passes_are_named():
    with pytest.raises(TypeError, match="must be a named function"):
        PassModel(program(), passes=["not a pass"])

    def broken(graph, context):
        return graph

    with pytest.raises(TypeError, match="pass broken must return \\(Graph, list of changes\\)"):
        PassModel(program(), passes=[broken])

    def one_argument(graph):
        return graph, []

    with pytest.raises(TypeError, match="pass one_argument must take \\(graph, context\\)"):
        PassModel(program(), passes=[one_argument])

    def wrong_inside(graph, context):
        return len(graph, context)  # a TypeError of the pass's own: not the calling convention

    with pytest.raises(TypeError, match="len\\(\\) takes exactly one argument"):
        PassModel(program(), passes=[wrong_inside])


def test_a_passs_notes_reach_the_explorer_through_its_result():
    """The explorer shows any pass's notes, with their numbers when values are given."""
    def annotate(graph, context):
        def numbers(values, channel):
            return None if "x" not in values else f"x[{channel}] = {values['x'][channel]:g}"

        return PassResult(graph, [], (Note("a note", numbers),))

    model = PassModel(program(), passes=[annotate], shape={"x": (2, 3)}, channel=1,
                      values={"x": np.float32([5, 7])})
    assert model.note(model.stage_index("annotate")) == "a note\nx[1] = 7"
    empty = PassModel(program(), passes=[annotate], shape={"x": (2, 3)}, values={})
    assert "give the parameters' values" in empty.note(empty.stage_index("annotate"))


@pytest.mark.viz
def test_the_explorer_widget_moves_through_the_stages():
    pytest.importorskip("ipywidgets")
    from hybridlab.gluon import nn

    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.Dense(2))
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 4)))
    view = pass_explorer(net)
    bundle = view._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and bundle[PNG].startswith("iVBOR")
    assert bundle[TEXT].startswith(f"stage {view.slider.max}/{view.slider.max}: plan_memory")
    assert "# generated source" in view.text.value
    first_picture = view.picture.value
    view.slider.value = 0
    assert view.summary().startswith("stage 0/") and view.picture.value != first_picture


def test_the_folding_stage_shows_its_arithmetic_on_the_blocks_numbers():
    from hybridlab import nd
    from hybridlab.gluon import nn
    from hybridlab.graph.passes.fold_batchnorm import scale

    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3), nn.BatchNorm())
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 2, 5, 5)))
    params = {name: p for name, p in net.collect_params().items()}
    name = next(n for n in params if n.endswith("gamma"))
    params[name].set_data(nd.array([1.0, 2.0, 4.0, 8.0]))
    model = PassModel(net, channel=2)
    index = model.stage_index("fold_batchnorm")
    note = model.note(index)
    var = params[name.replace("gamma", "running_var")].data().asnumpy()
    s = scale(np.float32([1.0, 2.0, 4.0, 8.0]), var, 1e-5, False)
    assert "output channel 2" in note and f"= {s[2]:.6g}" in note and "sqrt(" in note
    assert note in model.summary(index)
    assert "give the parameters' values" in PassModel(net, values={}).note(index)


@pytest.mark.viz
def test_the_channel_box_is_shown_only_where_a_stage_shows_a_channels_numbers():
    pytest.importorskip("ipywidgets")
    from hybridlab.gluon import nn

    plain = pass_explorer(program(), shape={"x": (2, 3)})  # no BatchNorm to fold
    assert plain.channel.layout.display == "none"
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3), nn.BatchNorm())
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 2, 5, 5)))
    assert pass_explorer(net, values={}).channel.layout.display == "none"  # no numbers
    folding = pass_explorer(net, stage="fold_batchnorm")
    assert folding.channel.layout.display != "none"
    before = folding.text.value
    folding.channel.value = 2
    assert folding.text.value != before  # it changes what the stage shows
