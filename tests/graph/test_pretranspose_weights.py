"""The layout pass (pretranspose_weights) and the transposed weights CachedOp keeps."""

from __future__ import annotations

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, gluon, nd, sym
from hybridlab.gluon import nn
from hybridlab.graph import ir, shapes
from hybridlab.graph.cached_op import CachedOp
from hybridlab.graph.evaluate import evaluate
from hybridlab.graph.passes import PREDICTION, PassResult, run_pipeline
from hybridlab.graph.passes.pretranspose_weights import LAYOUT_OF, pretranspose_weights
from hybridlab.lab.graphs import cached_op_of


def mlp(batch=4, features=6):
    mx.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.Dense(3, use_bias=False))
    net.initialize()
    x = nd.random.normal(shape=(batch, features))
    net(x)
    return net, x


def test_the_pass_reads_each_weight_transposed_from_a_new_marked_input():
    net, x = mlp()
    graph = net(sym.var("data", shape=x.shape)).graph
    rewritten, changes, _ = pretranspose_weights(graph, PREDICTION)
    first, second = net[0].weight.name, net[1].weight.name
    assert len(changes) == 2 and f"FullyConnected(x, {first}) -> dot(x, " in changes[0]
    assert [n.op for n in rewritten.nodes if n.kind == "call"].count("FullyConnected") == 0
    extra = rewritten.inputs[len(graph.inputs):]
    assert [dict(n.attrs)[LAYOUT_OF] for n in extra] == [first, second]
    weights = {n.name: n.aval[0].shape for n in graph.inputs}
    assert [n.aval[0].shape for n in extra] == [weights[first][::-1], weights[second][::-1]]
    arrays = [np.random.default_rng(i).standard_normal(n.aval[0].shape).astype(np.float32)
              for i, n in enumerate(graph.inputs)]
    transposed = [np.ascontiguousarray(arrays[[n.name for n in graph.inputs].index(
        dict(n.attrs)[LAYOUT_OF])].T) for n in extra]
    expected = evaluate(graph, *arrays)[0]
    np.testing.assert_allclose(evaluate(rewritten, *arrays, *transposed)[0], expected,
                               rtol=1e-5, atol=1e-6)
    ir.verify(run_pipeline(rewritten)[0])  # the rest of the pipeline takes it
    # nothing left to rewrite
    assert pretranspose_weights(rewritten, PREDICTION) == PassResult(rewritten, [])


def test_the_pass_leaves_what_it_cannot_rewrite():
    data = sym.var("x", shape=(2, 3, 4))  # 3-D data: flatten would change the product
    out = sym.FullyConnected(data, sym.var("w", shape=(5, 12)), sym.var("b", shape=(5,)),
                             num_hidden=5)
    graph = shapes.infer_graph(out.to_graph(), [ir.Aval((2, 3, 4), np.dtype("float32")),
                                             ir.Aval((5, 12), np.dtype("float32")),
                                             ir.Aval((5,), np.dtype("float32"))])
    assert pretranspose_weights(graph, PREDICTION) == PassResult(graph, [])


def test_cached_op_keeps_one_transposed_copy_per_weight_buffer():
    net, x = mlp()
    graph = net(sym.var("data", shape=x.shape))
    params = net.collect_params()
    inputs = [x if n == "data" else params[n].data() for n in graph.list_inputs()]
    plain, layout = CachedOp(graph), CachedOp(graph, passes=[pretranspose_weights])
    expected = plain(*inputs).asnumpy()
    np.testing.assert_allclose(layout(*inputs).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert f"dot_c(data, {net[0].weight.name}__T)" in layout.code
    layouts = layout._last.layouts
    first = list(layouts.held[1])
    layout(*inputs).wait_to_read()  # the same buffers: the copies are reused
    assert all(a is b for a, b in zip(first, layouts.held[1]))
    weight = params[net[0].weight.name]
    weight.set_data(weight.data() * 2)  # a new buffer: the copy is made again
    inputs = [x if n == "data" else params[n].data() for n in graph.list_inputs()]
    np.testing.assert_allclose(layout(*inputs).asnumpy(), plain(*inputs).asnumpy(),
                               rtol=1e-5, atol=1e-6)
    assert layouts.held[1][0] is not first[0] and layouts.held[1][1] is first[1]


def test_hybridize_takes_passes_and_training_stays_correct():
    net, x = mlp()
    expected = net(x).asnumpy()
    net.hybridize(passes=[pretranspose_weights])
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    reference, _ = mlp()
    reference.hybridize()
    other = gluon.Trainer(reference.collect_params(), "sgd", {"learning_rate": 0.1})
    for _ in range(2):  # each step makes new weight buffers: the copies follow
        for block, step in ((net, trainer), (reference, other)):
            with autograd.record():
                loss = (block(x) ** 2).mean()
            loss.backward()
            step.step(x.shape[0])
    np.testing.assert_allclose(net(x).asnumpy(), reference(x).asnumpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="passes must be a list of pass functions"):
        net.hybridize(passes=["pretranspose_weights"])
    with pytest.raises(TypeError, match="disabled_passes must be a list of pass names"):
        net.hybridize(disabled_passes="fuse_elementwise")
    net.hybridize(disabled_passes=["fuse_elementwise"])
    net(x).wait_to_read()
    assert "fused" not in cached_op_of(net).code
