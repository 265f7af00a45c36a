"""NOTE [Concatenation in place] (graph/passes/plan_memory.py): each input of a Concat is
written straight into its slice of the concatenation's buffer, so the Concat copies
nothing -- nested ones (DenseNet) share the outermost buffer -- and the results are the
same bits as the copying program's."""

from __future__ import annotations

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import nd, sym
from hybridlab.gluon import nn
from hybridlab.graph import shapes
from hybridlab.graph.codegen import compile_graph
from hybridlab.graph.passes import run_pipeline
from hybridlab.lab.memory import live_bytes, live_profile, memory_notes, timeline
from hybridlab.ops.registry import Aval


class DenseBlock(nn.HybridBlock):
    """A stem, three layers each concatenated onto everything before, then a fire module
    (two branches, ReLU over each convolution, concatenated)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.stem = nn.Conv2D(8, 3, padding=1, in_channels=3)
        self.layers = nn.HybridSequential()
        for i in range(3):
            self.layers.add(nn.Conv2D(4, 3, padding=1, in_channels=8 + 4 * i))
        self.squeeze = nn.Conv2D(4, 1, in_channels=20)
        self.expand = nn.Conv2D(4, 3, padding=1, in_channels=20)

    def hybrid_forward(self, F, x):
        x = self.stem(x)
        for layer in self.layers:
            x = F.concat(x, layer(F.relu(x)), dim=1)
        return F.concat(F.relu(self.squeeze(x)), F.relu(self.expand(x)), dim=1)


def run(batch, static):
    mx.random.seed(0)
    net = DenseBlock()
    net.initialize()
    x = nd.random.normal(shape=(batch, 3, 6, 5))
    expected = net(x).asnumpy()
    net.hybridize(static_alloc=static, static_shape=static)
    return net, x, expected


@pytest.mark.parametrize("static", [False, True])
def test_a_dense_block_copies_nothing_and_computes_the_same_bits(static):
    net, x, expected = run(1, static)
    for _ in range(2):  # the second call reuses the arena (static_alloc)
        np.testing.assert_array_equal(net(x).asnumpy(), expected)
    program = net._cached_op.last_program
    plan = program.graph.meta["memory"]
    assert len(plan.concats) == 4  # the three growing ones and the fire module's
    assert "Concat(" not in program.source and "Concat_sized" not in program.source
    assert program.source.count("inputs are written into it") == 2  # the two outermost made
    assert program.source.count("inputs were written into it") == 2  # ... and named
    assert "4 concatenation(s) written in place by their inputs" in str(plan)
    # every layer's output went straight to its channels of the last growing concatenation
    slices = [line.split("out=")[1].split(")")[0] for line in program.source.splitlines()
              if "out=" in line and "[:," in line]
    assert slices[:4] == [f"denseblock{net.name[-1]}_concat2[:, {a}:{b}]"
                          for a, b in [(0, 8), (8, 12), (12, 16), (16, 20)]]


def test_a_batch_of_several_images_concatenates_by_copying():
    net, x, expected = run(2, False)
    np.testing.assert_array_equal(net(x).asnumpy(), expected)
    program = net._cached_op.last_program
    assert not program.graph.meta["memory"].concats and "Concat" in program.source


def compiled(outputs, inputs):
    graph = sym.Group(outputs).to_graph() if len(outputs) > 1 else outputs[0].to_graph()
    graph = shapes.infer_graph(graph, [Aval(a.shape, a.dtype) for a in inputs])
    final, _ = run_pipeline(graph)
    return final, compile_graph(final)


def test_an_input_read_after_the_concatenation_is_not_written_over_in_place():
    a, b = sym.var("a"), sym.var("b")
    left, right = sym.exp(a), sym.tanh(b)
    joined = sym.concat(left, right, dim=1)
    later = sym.relu(left)  # left's last read, after the concatenation: not in place
    arrays = [np.random.default_rng(i).normal(size=(1, 3, 4)).astype(np.float32)
              for i in range(2)]
    graph, program = compiled([joined, later * 2], arrays)
    assert graph.meta["memory"].concats
    got = program(*arrays)
    np.testing.assert_allclose(got[0], np.concatenate([np.exp(arrays[0]),
                                                       np.tanh(arrays[1])], 1), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.maximum(np.exp(arrays[0]), 0) * 2, rtol=1e-6)


def test_an_input_shared_or_returned_is_copied():
    a = sym.var("a")
    left = sym.exp(a)
    twice = [sym.concat(left, sym.tanh(a), dim=1), sym.concat(left, sym.sin(a), dim=1)]
    arrays = [np.random.default_rng(0).normal(size=(1, 2, 3)).astype(np.float32)]
    graph, program = compiled(twice, arrays)
    assert not graph.meta["memory"].concats  # left is read by two concatenations
    returned = [sym.concat(left, sym.tanh(a), dim=1), left]
    graph, program = compiled(returned, arrays)
    assert not graph.meta["memory"].concats  # left is an output: the caller keeps it
    np.testing.assert_allclose(program(*arrays)[1], np.exp(arrays[0]), rtol=1e-6)


def test_the_memory_explorer_draws_each_input_inside_its_concatenation():
    net, x, _ = run(1, False)
    net(x)
    boxes, plan = timeline(net)
    assert live_profile(boxes) == [live_bytes(boxes, s)
                                   for s in range(max(b.last for b in boxes) + 1)]
    outer = {b.name: b for b in boxes}
    roots = [outer[name] for name in outer if name.endswith("concat2")]
    inside = [b for b in boxes if roots[0].low <= b.low and b.high <= roots[0].high
              and b is not roots[0]]
    assert len(inside) >= 5  # the stem, three layers, two inner concatenations
    notes = memory_notes(net._cached_op.last_program.graph)
    assert sum("of its concatenation's buffer" in text for text in notes.values()) >= 6
