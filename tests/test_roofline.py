"""The roofline's arithmetic: operations and bytes read off a compiled graph's types."""

from __future__ import annotations

import pytest

from hybridlab import sym
from hybridlab.lab.graphs import as_graph
from hybridlab.lab.roofline import operator_costs, ridge, roof


def test_a_convolution_a_product_and_an_elementwise_chain_are_counted_exactly():
    x = sym.var("x")
    conv = sym.Convolution(x, sym.var("w"), sym.var("b"), kernel=(3, 3), num_filter=8, pad=(1, 1))
    dense = sym.FullyConnected(sym.flatten(conv), sym.var("fw"), sym.var("fb"), num_hidden=4)
    graph, _ = as_graph(sym.relu(dense) * 2.0, {"x": (2, 3, 5, 5)})
    costs = {c.op: c for c in operator_costs(graph)}
    # 2 x 8 x 5 x 5 outputs, each 3 x 3 x 3 multiply-adds
    assert costs["Convolution"].flops == 2 * (2 * 8 * 5 * 5) * (3 * 3 * 3)
    assert costs["Convolution"].bytes == 4 * (2 * 3 * 5 * 5 + 8 * 3 * 3 * 3 + 8 + 2 * 8 * 5 * 5)
    assert costs["FullyConnected"].flops == 2 * (2 * 4) * 200
    assert costs["relu"].flops == 2 * 4 and costs["relu"].intensity == pytest.approx(8 / 64)
    assert "flatten" not in costs and "Reshape" not in costs  # views do no arithmetic


def test_a_fused_group_counts_one_operation_per_element_and_step():
    x = sym.var("x")
    graph, _ = as_graph(sym.exp(sym.relu(x) * 2.0 + 1.0), {"x": (4, 4)})
    from hybridlab.graph.passes import run_pipeline

    compiled, _ = run_pipeline(graph)
    (fused,) = [c for c in operator_costs(compiled) if c.op == "_fused"]
    steps = 4  # relu, * 2, + 1, exp
    assert fused.flops == steps * 16 and fused.bytes == 2 * 16 * 4


def test_the_roof_is_memory_below_the_ridge_and_the_peak_above():
    assert ridge(100e9, 10e9) == 10
    assert roof(1.0, 100e9, 10e9) == 10e9 and roof(50.0, 100e9, 10e9) == 100e9
