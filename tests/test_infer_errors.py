"""A failed shape rule is worded once (graph.shapes.infer_failure), for Symbol and graph IR."""

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


def test_shapes_whose_sizes_overflow_int64_are_refused_not_wrapped(tmp_path):
    import pytest

    from hybridlab import nd, sym
    from hybridlab.errors import ModelFileError

    with pytest.raises(TypeError, match="more than 2\\*\\*60 elements"):
        sym.var("x", shape=(2**32, 2**32))
    with pytest.raises(ValueError, match="more than 2\\*\\*60 elements"):
        nd.reshape(nd.ones((4,)), shape=(2**62 + 1, 4))  # wrapped to 4 elements before
    with pytest.raises(ValueError, match="more than 2\\*\\*60 elements"):
        nd.ones((2**31, 2**31))
    # a tiny file declaring a huge variable: refused by the loader, not by the planner
    text = ('{"nodes": [{"op": "null", "name": "x", "attrs": {"__shape__": '
            '"(4294967296, 4294967296)"}, "inputs": []}, {"op": "relu", "name": "r", '
            '"inputs": [[0, 0, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]}')
    path = tmp_path / "huge-symbol.json"
    path.write_text(text)
    with pytest.raises(ModelFileError, match="more than 2\\*\\*60 elements"):
        sym.load(str(path))
    # what fits still works, and -1 is computed in exact integers
    assert nd.reshape(nd.ones((6,)), shape=(-1, 3)).shape == (2, 3)
    assert sym.var("y", shape=(2**20, 2**20)).reshape((-1, 2**10)).infer_shape()[1] == [
        (2**30, 2**10)]


def test_an_exported_shape_with_surrounding_whitespace_loads(tmp_path):
    from hybridlab import gluon, nd, sym
    from hybridlab.gluon import nn

    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 3)))
    net.export(str(tmp_path / "m"))
    graph = sym.load(str(tmp_path / "m-symbol.json"))
    text = graph.tojson().replace('"__shape__": "(2, 3)"', '"__shape__": "\\n(2, 3)\\n"')
    assert "\\n(2, 3)\\n" in text
    (tmp_path / "m-symbol.json").write_text(text)  # (no digest: compared as MXNet's file)
    block = gluon.SymbolBlock.imports(str(tmp_path / "m-symbol.json"), "data",
                                      str(tmp_path / "m-0000.params"))
    assert block(nd.ones((1, 3))).shape == (1, 2)
