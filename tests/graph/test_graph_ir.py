"""The IR: printing (golden), building, shape inference, verify, the interpreter."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from _helpers import aval, bias_relu_chain, check_golden, has_ops, seed_mlp

from hybridlab.errors import GraphError, ShapeError
from hybridlab.graph import ir, shapes
from hybridlab.graph.evaluate import evaluate


def test_printed_form_of_a_small_graph_matches_golden():
    check_golden("ir_bias_relu_chain", str(bias_relu_chain()))


def test_printed_form_numbers_nodes_and_shows_types():
    text = str(bias_relu_chain())
    assert text.splitlines()[0] == "%0 = var x : float32[4,8]"
    assert "%2 = broadcast_add(%0, %1) : float32[4,8]" in text
    assert "_mul_scalar(%3, scalar=2.0)" in text
    assert text.splitlines()[-1] == "return %4"


@pytest.mark.skipif(not has_ops("FullyConnected"), reason="FullyConnected not registered yet")
def test_seed_mlp_prints_as_golden():
    check_golden("ir_seed_mlp", str(seed_mlp()))


def test_unknown_shapes_print_as_question_mark_and_multi_outputs_use_dots():
    x = ir.var("x")
    node = ir.call("relu", [x.out()])
    assert str(ir.Graph.from_outputs([node.out()])).splitlines()[1] == "%1 = relu(%0) : ?"
    number = {id(node): 7}
    assert ir._format_value(ir.Value(node, 1), number) == "%7.1"


def test_const_prints_scalars_by_value():
    graph = ir.Graph.from_outputs([ir.const(np.float32(10.0)).out()])
    assert str(graph).splitlines()[0] == "%0 = const 10.0 : float32[]"


def test_call_parses_attrs_and_normalises_aliases():
    x = ir.var("x", aval(2))
    node = ir.call("_plus", [x.out(), x.out()])
    assert node.op == "elemwise_add"
    scaled = ir.call("_mul_scalar", [x.out()], {"scalar": "3"})
    assert scaled.attr_dict == {"scalar": 3.0}


def test_nodes_compare_by_identity_not_structure():
    x = ir.var("x", aval(2))
    first, second = ir.call("relu", [x.out()]), ir.call("relu", [x.out()])
    assert first != second and first == first


def test_infer_shapes_fills_avals_from_new_input_shapes():
    graph = shapes.infer_graph(bias_relu_chain(), {"x": aval(2, 8), "b": aval(8)})
    assert [str(n.aval[0]) for n in graph.nodes][-1] == "float32[2,8]"
    ir.verify(graph)


def test_shape_error_names_node_shapes_and_user_line():
    x, b = ir.var("x", aval(4, 8)), ir.var("b", aval(8))
    node = ir.call("broadcast_add", [x.out(), b.out()], name="add0", origin=ir.user_origin())
    graph = ir.Graph.from_outputs([node.out()])
    with pytest.raises(ShapeError, match=r"node 'add0' .*float32\[4,7\], float32\[8\].*"
                                         r"\n  created at .*test_graph_ir.py"):
        shapes.infer_graph(graph, [aval(4, 7), aval(8)])


def test_user_origin_points_outside_the_package_by_file_name():
    origin = ir.user_origin()
    assert origin.startswith("test_graph_ir.py:") and origin.endswith("ir.user_origin()`")


def test_verify_accepts_well_formed_graphs():
    assert ir.verify(bias_relu_chain()) is not None


def test_verify_reports_wrong_order_and_prints_graph():
    graph = bias_relu_chain()
    broken = ir.Graph(tuple(reversed(graph.nodes)), graph.inputs, graph.outputs)
    with pytest.raises(GraphError, match=r"(?s)not topological.*the graph:\n%0 = "):
        ir.verify(broken)


def test_verify_reports_double_assignment_and_bad_avals():
    graph = bias_relu_chain()
    doubled = ir.Graph(graph.nodes + graph.nodes[-1:], graph.inputs, graph.outputs)
    with pytest.raises(GraphError, match="assigned twice"):
        ir.verify(doubled)
    wrong = dataclasses.replace(graph.nodes[-1], aval=(aval(3),))
    lying = ir.Graph(graph.nodes[:-1] + (wrong,), graph.inputs, (wrong.out(),))
    with pytest.raises(GraphError, match=r"claims float32\[3\] but _mul_scalar gives"):
        ir.verify(lying)


def test_verify_reports_unknown_ops():
    x = ir.var("x", aval(2))
    bogus = ir.Node("call", "no_such_op", (x.out(),), name="bogus")
    with pytest.raises(GraphError, match="unknown operator 'no_such_op'"):
        ir.verify(ir.Graph((x, bogus), (x,), (bogus.out(),)))


def test_verify_reports_references_past_a_nodes_outputs():
    x = ir.var("x", aval(2))
    relu = ir.call("relu", [x.out()], name="r")
    reader = ir.Node("call", "relu", (ir.Value(x, 5),), name="reader")
    with pytest.raises(GraphError, match=r"reader\) reads \['%0.5'\]: past the outputs"):
        ir.verify(ir.Graph((x, reader), (x,), (reader.out(),)))
    with pytest.raises(GraphError, match=r"output r.3: the node has 1 output"):
        ir.verify(ir.Graph((x, relu), (x,), (ir.Value(relu, 3),)))


def test_verify_reports_wrong_arity_and_missing_types():
    x = ir.var("x", aval(2))
    lonely = ir.Node("call", "broadcast_add", (x.out(),), name="lonely")
    with pytest.raises(GraphError, match=r"broadcast_add takes inputs \['lhs', 'rhs'\], got 1"):
        ir.verify(ir.Graph((x, lonely), (x,), (lonely.out(),)))
    untyped = ir.Node("call", "relu", (x.out(),), name="untyped")  # not built by ir.call
    with pytest.raises(GraphError, match=r"untyped\) has no type although its inputs'"):
        ir.verify(ir.Graph((x, untyped), (x,), (untyped.out(),)))


def test_evaluate_runs_kernels_in_order():
    x = np.arange(32, dtype=np.float32).reshape(4, 8) - 16
    b = np.ones(8, np.float32)
    (result,) = evaluate(bias_relu_chain(), x, b)
    np.testing.assert_array_equal(result, np.maximum(x + b, 0) * 2)


def test_toposort_handles_deep_chains_without_recursion():
    value = ir.var("x", aval(1)).out()
    for _ in range(5000):
        value = ir.call("relu", [value]).out()
    assert len(ir.toposort([value.node])) == 5001


# --- display in Jupyter ----------------------------------------------------------------

@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' not installed")
def test_a_graph_displays_as_a_drawing_with_its_summary():
    graph = bias_relu_chain()
    bundle = graph._repr_mimebundle_()
    assert bundle["text/plain"].startswith("Graph(nodes=5, inputs=2")
    assert "<svg" in bundle["image/svg+xml"] and "relu" in bundle["image/svg+xml"]


def test_a_graph_without_dot_shows_its_summary_and_the_install_hint(monkeypatch):
    from hybridlab.viz.graph import INSTALL_HINT

    monkeypatch.setenv("PATH", "/nonexistent")  # as tests/test_viz.py: no `dot` to find
    bundle = bias_relu_chain()._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    summary, hint = bundle["text/plain"].split("\n")
    assert summary.startswith("Graph(nodes=5, inputs=2") and hint == INSTALL_HINT


def test_ipython_pretty_printing_still_shows_the_ir():
    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    assert pretty(bias_relu_chain()) == str(bias_relu_chain())


def test_rebuild_walks_each_node_a_bounded_number_of_times(monkeypatch):
    """rebuild must be O(nodes + edges): on a chain, the walk for the new nodes of each
    visit stops at what is already emitted (it used to re-walk the whole chain above)."""
    from hybridlab.graph import ir as ir_module

    walked = []
    real = ir_module.postorder

    def counting(roots, children):
        order = real(roots, children)
        walked.append(len(order))
        return order

    monkeypatch.setattr(ir_module, "postorder", counting)
    x = ir.var("x")
    value = x.out()
    for _ in range(400):
        value = ir.call("relu", [value]).out()
    graph = ir.Graph.from_outputs([value], [x])
    copied = ir.rebuild(graph, lambda node, inputs: ir.with_inputs(node, inputs))
    assert len(copied.nodes) == 401 and sum(walked) <= 2 * len(graph.nodes)
    # a visit that makes new nodes still emits them, inputs first
    doubled = ir.rebuild(graph, lambda node, inputs: [ir.call(
        "_mul_scalar", [ir.with_inputs(node, inputs).out()], {"scalar": 2.0}).out()]
        if node.kind == "call" else ir.with_inputs(node, inputs))
    ir.verify(doubled)
    assert len(doubled.nodes) == 801
