"""``_fused`` is an operator like the others: registered when the ops load, not by the pass."""

from __future__ import annotations

import importlib

import numpy as np
from _helpers import bias_relu_chain

from hybridlab import nd, sym
from hybridlab.graph.passes import PREDICTION, fuse_elementwise
from hybridlab.ops import fused, registry


def test_fused_is_registered_by_the_operators_not_by_the_pass():
    op = registry.get("_fused")
    rules = (op.kernel, op.kernel_out, op.infer, op.grad)
    assert {r.__module__ for r in rules} == {"hybridlab.ops.fused"}
    module = importlib.import_module("hybridlab.graph.passes.fuse_elementwise")
    assert not hasattr(module, "register")  # the pass only rewrites graphs


def test_nd_and_sym_have_the_internal_fused_function():
    assert registry.get("_fused").kernel is fused._kernel
    assert callable(nd._fused) and callable(sym._fused)
    assert not hasattr(nd.NDArray, "_fused")  # internal: no method


def test_nd_fused_runs_a_program_the_pass_built():
    graph, _, _ = fuse_elementwise(bias_relu_chain(), PREDICTION)
    (node,) = [n for n in graph.nodes if n.kind == "call"]
    program = node.attr_dict["program"]
    x = np.arange(32, dtype=np.float32).reshape(4, 8) - 16
    b = np.linspace(-1, 1, 8, dtype=np.float32)
    got = nd._fused(nd.array(x), nd.array(b), program=program)
    np.testing.assert_allclose(got.asnumpy(), np.maximum(x + b, 0) * 2, rtol=1e-6)
