"""Blocks: real networks drawn one box per residual / inception / dense block.

The light ONNX models name their operators by number only (``r38``), so their blocks are
found by structure (cut points) and named by the scope their weights share. A toy graph
checks the cut points themselves; the drawings check that a summary has one box per block
and that opening a block shows its operators.
"""

from __future__ import annotations

import os

import pytest

from hybridlab import sym
from hybridlab.lab.graphs import as_graph, blocks, cut_points

onnx = pytest.importorskip("onnx")

import hybridlab as mx  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def imported(name):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    symbol, _, _ = mx.contrib.onnx.import_model(path)
    (data, shape), = mx.contrib.onnx.get_model_metadata(path)["input_tensor_data"]
    return as_graph(symbol, {data: shape})[0]


def test_cut_points_are_where_every_path_passes():
    x = sym.var("x")
    a = sym.relu(x, name="a")  # cut
    b, c = sym.exp(a, name="b"), sym.sin(a, name="c")  # two branches: no cut
    d = sym.elemwise_add(b, c, name="d")  # cut: the branches meet
    graph = sym.tanh(d, name="e").to_graph()  # cut (the last)
    calls = [n.name for n in graph.nodes if n.kind == "call"]
    assert [calls[i] for i in cut_points(graph)] == ["a", "d", "e"]
    found = blocks(graph)
    assert [(b.kind, [n.name for n in b.nodes]) for b in found] == [
        ("chain", ["a"]), ("residual block", ["b", "c", "d", "e"])]


def test_resnet50_reads_as_sixteen_residual_blocks_a_stem_and_a_head():
    found = blocks(imported("resnet50"))
    assert [b.kind for b in found] == ["chain"] + ["residual block"] * 16 + ["chain"]
    assert [b.name for b in found[1:4]] == ["res2_0", "res2_1", "res2_2"]  # weights' scope
    assert found[0].name == "stem" and found[-1].name == "pred"
    assert sum(len(b.nodes) for b in found) == 176  # every operator in exactly one block


def test_inception_and_densenet_blocks_are_found_by_structure():
    inception = blocks(imported("inception_v1"))
    assert sum(b.kind == "inception block" for b in inception) == 9
    assert "inception_4e" in [b.name for b in inception]
    graph = imported("densenet121")
    layers = blocks(graph, most=1000)
    assert sum(b.kind == "dense layer" for b in layers) == 58  # 6 + 12 + 24 + 16
    stages = blocks(graph)  # more than 24 blocks: a stage of layers becomes one box
    assert [b.count for b in stages if b.kind == "dense layer"] == [6, 12, 24, 16]
    assert len(stages) <= 24
    assert sum(len(b.nodes) for b in stages) == sum(len(b.nodes) for b in layers)


def test_a_summary_drawing_has_one_box_per_block_and_opens_the_ones_asked():
    pytest.importorskip("graphviz")
    from hybridlab.viz.graph import to_block_dot

    graph = imported("resnet50")
    found = blocks(graph)
    closed = to_block_dot(graph, found).source
    assert closed.count("residual block: ") == 16 and "cluster" not in closed
    opened = to_block_dot(graph, found, expand=["res2_0"]).source
    assert opened.count("residual block: ") == 15 and "cluster_b1" in opened
    assert opened.count("Convolution\\n") >= 4  # its operators, each its own node
    with pytest.raises(ValueError, match="no such block"):
        to_block_dot(graph, found, expand=["res9_9"])


def test_a_weight_a_pass_derived_is_named_by_the_weights_it_comes_from():
    from hybridlab.graph.ir import Node
    from hybridlab.lab.graphs import source_names

    transposed = Node("var", name="fc0_weight_t", attrs=(("layout_of", "fc0_weight"),))
    folded = Node("var", name="r4_weight__folded", attrs=(
        ("folded_from", ("res2_0_w", "", "res2_0_bn_s")), ("part", "weight")))
    assert source_names(transposed) == ["fc0_weight"]
    assert source_names(folded) == ["res2_0_w", "res2_0_bn_s"]  # an absent bias: no name
    assert source_names(Node("var", name="data")) == ["data"]


def test_a_hybridized_symbol_block_is_typed_by_its_last_call():
    from hybridlab import gluon, nd
    from hybridlab.lab.memory import timeline

    data = sym.var("data")
    block = gluon.SymbolBlock(sym.relu(sym.FullyConnected(data, num_hidden=3, name="fc")), [data])
    block.initialize()
    block.hybridize()
    block(nd.ones((2, 4)))
    graph, params = as_graph(block)  # a SymbolBlock's graph comes untyped from its Symbol
    assert all(n.aval is not None for n in graph.nodes if n.kind == "call")
    assert "fc_weight" in params
    boxes, plan = timeline(block)  # so the memory explorer takes it as it is
    assert plan.bound > 0 and boxes


def test_the_pass_explorer_draws_a_real_network_by_blocks_and_opens_one_on_demand():
    pytest.importorskip("ipywidgets")
    from hybridlab.viz.pass_explorer import CLOSED, pass_explorer

    symbol, _, _ = mx.contrib.onnx.import_model(os.path.join(LIGHT, "light_resnet50.onnx"))
    (data, shape), = mx.contrib.onnx.get_model_metadata(
        os.path.join(LIGHT, "light_resnet50.onnx"))["input_tensor_data"]
    explorer = pass_explorer(symbol, shape={data: shape}, stage=0)
    assert explorer.block.options[:3] == (CLOSED, "stem", "res2_0")
    closed = explorer.snapshot_png()
    explorer.block.value = "res3_0"
    opened = explorer.snapshot_png()
    assert closed and opened and opened != closed
    assert ("res3_0" in explorer.block.options) and len(explorer._drawings) == 2
    explorer.slider.value = explorer.model.stage_index("fold_batchnorm")  # changed, and open
    stage = explorer.model.stages[explorer.slider.value]
    assert explorer.snapshot_png() and any(id(n) in stage.new for n in stage.graph.nodes)
    small = pass_explorer(sym.relu(sym.var("x")), shape={"x": (2, 3)})
    assert small.block.layout.display == "none"  # a small graph is drawn whole
