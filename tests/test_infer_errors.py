"""A failed shape rule is worded once (graph.ir.infer_failure), for Symbol and graph IR."""

import pytest

from hybridlab import sym
from hybridlab.errors import ShapeError
from hybridlab.graph import ir
from hybridlab.ops.registry import Aval


def test_symbol_infer_shape_names_the_node_its_shapes_and_its_line():
    x, w = sym.var("x"), sym.var("w")
    out = sym.dot(x, w, name="product")
    with pytest.raises(ShapeError) as info:
        out.infer_shape(x=(2, 3), w=(4, 5))
    message = str(info.value)
    assert message.startswith("infer_shape failed in node 'product' (dot of ")
    assert "(2, 3)" in message and "(4, 5)" in message
    assert "created at" in message and "test_infer_errors.py" in message


def test_graph_ir_inference_uses_the_same_wording_without_the_prefix():
    x = ir.var("x", Aval((2, 3), "float32"))
    w = ir.var("w", Aval((4, 5), "float32"))
    with pytest.raises(ShapeError, match=r"^in node 'product' \(dot of float32\[2,3\], "
                       r"float32\[4,5\]\): dot: the last axis"):
        ir.call("dot", [x.out(), w.out()], name="product")  # a call infers its avals
