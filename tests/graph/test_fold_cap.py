"""Constant folding leaves constants above MAX_FOLD_BYTES as runtime ops."""

import importlib

import numpy as np

from hybridlab.graph import ir
from hybridlab.graph.passes import fold_constants

fold_module = importlib.import_module("hybridlab.graph.passes.fold_constants")


def test_a_huge_declared_constant_is_not_materialised_at_compile_time():
    huge = ir.call("_zeros", [], {"shape": (100000, 100000, 100000)}).out()
    graph = ir.Graph.from_outputs([ir.call("relu", [huge]).out()])
    folded, changes = fold_constants(graph)  # would need 4 PB if it folded
    assert changes == []
    assert [n.kind for n in folded.nodes] == ["call", "call"]


def test_the_cap_is_the_boundary(monkeypatch):
    small = ir.call("_ones", [], {"shape": (4,)}).out()
    graph = ir.Graph.from_outputs([ir.call("relu", [small]).out()])
    monkeypatch.setattr(fold_module, "MAX_FOLD_BYTES", 15)  # 4 float32 = 16 bytes
    assert fold_constants(graph)[1] == []
    monkeypatch.setattr(fold_module, "MAX_FOLD_BYTES", 16)
    folded, changes = fold_constants(graph)
    assert len(changes) == 2
    np.testing.assert_array_equal(folded.outputs[0].node.value, np.ones(4, np.float32))
