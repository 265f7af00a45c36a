"""graph.shapes: the one shape and type inference, complete and partial (both ways)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest
from _helpers import random_graphs
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import sym
from hybridlab.errors import ShapeError
from hybridlab.graph import ir, shapes

PACKAGE = Path(mx.__file__).parent

# Modules allowed to call an operator's shape rule themselves, and why. Every *graph*
# is inferred by graph/shapes.py; these work on one operator at a time, below the graph
# layer (an NDArray gets its shape at once; eager and fused ops check their own kernels).
ONE_OP_AT_A_TIME = {
    "graph/shapes.py": "the inference of graphs",
    "ndarray.py": "an NDArray's shape, known at the call (one operator, no graph)",
    "ops/eager.py": "the registry's own check of a kernel's result on numpy arrays",
    "ops/fused.py": "the fused operator's rule: its steps' rules in order",
}


def _rule_calls(path: Path) -> list[str]:
    """``x.infer(...)``, ``x.infer_back(...)`` and ``x.infer_params(...)`` calls."""
    tree = ast.parse(path.read_text())
    return [node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("infer", "infer_back", "infer_params")]


def test_only_graph_shapes_runs_shape_rules_on_graphs():
    callers = {str(p.relative_to(PACKAGE)): _rule_calls(p) for p in PACKAGE.rglob("*.py")}
    callers = {k: v for k, v in callers.items() if v}
    assert set(callers) <= set(ONE_OP_AT_A_TIME), (
        f"{sorted(set(callers) - set(ONE_OP_AT_A_TIME))} run operators' shape rules "
        f"themselves; infer graphs with hybridlab.graph.shapes")
    # the backward rules and the parameter rules are graph knowledge: shapes.py only
    others = {k: v for k, v in callers.items() if k != "graph/shapes.py"}
    assert all(set(v) == {"infer"} for v in others.values()), others


def _arg_shapes(symbol, **given):
    args, _, _ = symbol.infer_shape(**given)
    assert args is not None, symbol.infer_shape_partial(**given)
    return dict(zip(symbol.list_arguments(), args))


def test_elementwise_inputs_complete_each_other():
    a, b = sym.var("a", shape=(0, 10)), sym.var("b", shape=(12, 0))
    assert _arg_shapes(a + b) == {"a": (12, 10), "b": (12, 10)}


def test_a_later_node_sizes_a_layer_data_backwards():
    a = sym.var("a", shape=(0, 10))
    fc = sym.FullyConnected(a, num_hidden=21, name="fc")
    found = _arg_shapes(fc + sym.var("c", shape=(5, 0)))
    assert found == {"a": (5, 10), "fc_weight": (21, 10), "fc_bias": (21,), "c": (5, 21)}


def test_convolution_data_sized_from_its_output_at_stride_one():
    a = sym.var("a", shape=(0, 10, 0, 0))
    conv = sym.Convolution(a, num_filter=21, kernel=(3, 3), pad=(1, 1), name="conv")
    found = _arg_shapes(conv + sym.var("c", shape=(5, 21, 32, 32)))
    assert found["a"] == (5, 10, 32, 32) and found["conv_weight"] == (21, 10, 3, 3)


def test_a_strided_convolution_leaves_the_data_size_open():
    a = sym.var("a", shape=(0, 10, 0, 0))
    conv = sym.Convolution(a, num_filter=4, kernel=(3, 3), stride=(2, 2))
    args, _, _ = (conv + sym.var("c", shape=(5, 4, 8, 8))).infer_shape_partial()
    assert args[0] == (5, 10, 0, 0)  # 17 or 18 rows both give 8: not decided


def test_concat_and_split_complete_their_parts():
    a, b = sym.var("a", shape=(0, 10)), sym.var("b", shape=(0, 5))
    d = sym.var("d", shape=(2, 0)) + sym.Concat(a, b, num_args=2, dim=1)
    assert _arg_shapes(d) == {"d": (2, 15), "a": (2, 10), "b": (2, 5)}
    parts = sym.SliceChannel(sym.var("x", shape=(0, 15, 0)), num_outputs=3)
    assert _arg_shapes(parts[1] + sym.var("y", shape=(3, 5, 2)))["x"] == (3, 15, 2)
    squeezed = sym.SliceChannel(sym.var("x", shape=(0, 10)), num_outputs=10, squeeze_axis=True)
    assert _arg_shapes(squeezed[1] + sym.var("y", shape=(5,)))["x"] == (5, 10)


def test_reshape_sizes_its_input_from_a_known_output():
    x = sym.var("x", shape=(0, 3))
    out = sym.FullyConnected(sym.Reshape(x, shape=(-1, 6)), num_hidden=2, flatten=False)
    found = _arg_shapes(out + sym.var("y", shape=(4, 2)))
    assert found["x"] == (8, 3)


def test_partial_sizes_pass_through_rules_only_where_they_decide():
    x, y = sym.var("x"), sym.var("y")
    _, out, _ = sym.dot(x, y).infer_shape_partial(x=(0, 3, 4), y=(4, 5))
    assert out == [(0, 3, 5)]
    _, out, _ = sym.batch_dot(x, y).infer_shape_partial(x=(0, 3, 4), y=(0, 0, 5))
    assert out == [()]  # the inner sizes cannot be checked: nothing is known
    with mx.np_shape(True):
        _, out, _ = sym.dot(x, y).infer_shape_partial(x=(-1, 3, 4), y=(4, 5))
        assert out == [(-1, 3, 5)]
        _, out, _ = sym.sin(sym.var("d")).infer_shape_partial()
        assert out == [None]


def test_a_slice_of_an_unknown_size_is_unknown_as_in_mxnet():
    """Begin and end would fix the size, but MXNet's rule keeps an unknown size unknown."""
    data = sym.var("data", shape=(10, 0))
    assert sym.slice_axis(data, axis=1, begin=0, end=5).infer_shape_partial()[1] == [(10, 0)]
    assert sym.slice_axis(data, axis=0, begin=0, end=5).infer_shape_partial()[1] == [(5, 0)]
    wide = sym.var("wide", shape=(0, 20))
    assert sym.slice(wide, begin=(None, 3), end=(5, 10)).infer_shape_partial()[1] == [(0, 7)]


def test_a_declared_float64_variable_still_passes_its_shape_on():
    """numpy reads None as float64 (``np.dtype('float64') == None``): a float64 that
    replaces an unknown dtype is still news."""
    data = sym.var("data1", dtype="float64")
    both = sym.broadcast_add(sym.exp(data), sym.exp(data))
    assert both.infer_shape_partial(data1=(3, 4))[1] == [(3, 4)]
    assert both.infer_type()[1] == [np.float64]


def test_two_different_sizes_for_one_value_name_the_node():
    a, b = sym.var("a", shape=(3, 10)), sym.var("b", shape=(4, 0))
    with pytest.raises(ShapeError, match="inconsistent"):
        (a + b).infer_shape()
    fc = sym.FullyConnected(sym.var("data"), num_hidden=8, name="fc1")
    with pytest.raises(ShapeError, match="fc1"):
        fc.infer_shape(data=(2, 5), fc1_weight=(1, 5))


def test_a_parameter_rule_is_a_default_not_a_constraint():
    """SoftmaxOutput's rule guesses class indices for the label; probabilities of the
    data's shape, when given, are kept."""
    out = sym.SoftmaxOutput(sym.var("x"), sym.var("label"))
    args, _, _ = out.infer_shape(x=(2, 3))
    assert args == [(2, 3), (2,)]
    args, _, _ = out.infer_shape(x=(2, 3), label=(2, 3))
    assert args == [(2, 3), (2, 3)]


@settings(max_examples=40, deadline=None)
@given(drawn=random_graphs(), data=st.data())
def test_partial_inference_agrees_with_complete_inference(drawn, data):
    """Every size ``infer_partial`` claims is the one ``infer_graph`` computes, whichever
    sizes of the inputs are hidden (a 0: not known yet)."""
    graph, _ = drawn
    complete = shapes.infer_graph(graph, [n.aval[0] for n in graph.inputs])
    hidden = {}
    for node in graph.inputs:
        shape = node.aval[0].shape
        hide = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
        hidden[node.name] = tuple(0 if h else d for d, h in zip(shape, hide))
    bare = ir.rebuild(graph, lambda node, inputs: node if node.kind == "const" else
                      dataclasses.replace(node, inputs=inputs, aval=None))  # types erased
    found = shapes.infer_partial(bare, hidden)
    for before, after in zip(complete.nodes, bare.nodes):
        for i in range(after.num_outputs):
            claimed = found.shape(after.out(i))
            truth = before.aval[i].shape
            if claimed is not None:
                assert len(claimed) == len(truth)
                assert all(c in (0, t) for c, t in zip(claimed, truth)), (claimed, truth)
