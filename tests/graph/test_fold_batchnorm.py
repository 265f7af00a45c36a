"""BatchNorm folding (``fold_batchnorm``): exact in inference, never in training, only
where the convolution's output goes nowhere else."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import autograd, nd, sym
from hybridlab.gluon import nn
from hybridlab.graph import ir, shapes
from hybridlab.graph.evaluate import evaluate
from hybridlab.graph.passes import (
    PREDICTION,
    PassContext,
    PassResult,
    derived_values,
    fold_batchnorm,
    run_pipeline,
)
from hybridlab.graph.passes.fold_batchnorm import FOLDED_FROM

F32 = np.dtype("float32")


def conv_bn(batch=2, channels=4, size=6, filters=6, kernel=3, stride=1, pad=1, groups=1,
            eps=1e-3, no_bias=False, fix_gamma=False, extra_reader=False):
    """``BatchNorm(Convolution(data))`` as a typed graph, and random values for its inputs
    (positive variances)."""
    data = sym.var("data")
    conv = sym.Convolution(data, kernel=(kernel, kernel), stride=(stride, stride),
                           pad=(pad, pad), num_filter=filters, num_group=groups,
                           no_bias=no_bias, name="conv")
    out = sym.BatchNorm(conv, eps=eps, fix_gamma=fix_gamma, name="bn")
    if extra_reader:  # the convolution's output is also read by something else
        out = sym.Group([out, sym.relu(conv)])
    sizes = {"data": (batch, channels, size, size),
              "conv_weight": (filters, channels // groups, kernel, kernel),
              "conv_bias": (filters,), **{f"bn_{n}": (filters,) for n in
                                           ("gamma", "beta", "moving_mean", "moving_var")}}
    graph = out.to_graph()
    graph = shapes.infer_graph(graph, [ir.Aval(sizes[n.name], F32) for n in graph.inputs])
    rng = np.random.default_rng(batch * 1000 + channels * 100 + filters)
    values = {name: (rng.uniform(0.2, 2.0, shape) if name.endswith(("gamma", "var"))
                     else rng.normal(size=shape)).astype(np.float32)
              for name, shape in sizes.items()}
    return graph, values


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.sampled_from([1, 2, 4]), st.integers(1, 3), st.integers(1, 2),
       st.integers(0, 1), st.floats(1e-6, 1e-1), st.booleans(), st.booleans())
def test_folding_computes_what_convolution_then_batchnorm_computed(
        batch, groups, kernel, stride, pad, eps, no_bias, fix_gamma):
    graph, values = conv_bn(batch, channels=4, filters=2 * groups, kernel=kernel,
                            stride=stride, pad=pad, groups=groups, eps=eps, no_bias=no_bias,
                            fix_gamma=fix_gamma)
    folded, changes, _ = fold_batchnorm(graph, PassContext(training=False))
    ir.verify(folded)
    assert changes == ["folded bn (BatchNorm) into conv (Convolution): reads "
                       "conv_weight__folded and conv_bias__folded"]
    assert [n.op for n in folded.nodes if n.kind == "call"] == ["Convolution"]
    expected = evaluate(graph, *[values[n.name] for n in graph.inputs])[0]
    got = evaluate(folded, *derived_values(folded, values))[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


def test_training_mode_folds_nothing():
    graph, _ = conv_bn()
    assert fold_batchnorm(graph, PassContext(training=True)) == PassResult(graph, [])
    optimised, records = run_pipeline(graph, context=PassContext(training=True))
    assert records[0].name == "fold_batchnorm" and records[0].changes == []
    assert not any(FOLDED_FROM in dict(n.attrs) for n in optimised.inputs)


def test_a_convolution_read_by_another_node_is_not_folded():
    graph, _ = conv_bn(extra_reader=True)
    assert fold_batchnorm(graph, PREDICTION) == PassResult(graph, [])


def test_a_returned_convolution_is_not_folded():
    graph, _ = conv_bn()
    returned = ir.Graph(graph.nodes, graph.inputs,
                        graph.outputs + (graph.outputs[0].node.inputs[0],))
    assert fold_batchnorm(returned, PREDICTION) == PassResult(returned, [])


def test_statistics_computed_in_the_graph_are_not_folded():
    graph, _ = conv_bn()
    norm = graph.outputs[0].node
    doubled = ir.call("_mul_scalar", [norm.inputs[3]], {"scalar": 2.0})  # mean * 2
    inputs = (*norm.inputs[:3], doubled.out(), norm.inputs[4])
    changed = ir.rebuild(graph, lambda n, i: ir.with_inputs(n, inputs if n is norm else i))
    assert fold_batchnorm(changed, PREDICTION) == PassResult(changed, [])


def small_net():
    mx.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"),
            nn.Conv2D(4, 1, use_bias=False), nn.BatchNorm())
    net.initialize()
    x = nd.random.normal(shape=(2, 3, 6, 6))
    net(x)
    for name, p in net.collect_params().items():  # statistics unlike the initial ones
        if name.endswith(("gamma", "beta", "running_mean", "running_var")):
            p.set_data(nd.random.uniform(0.5, 1.5, shape=p.shape))
    return net, x


def test_a_hybridized_network_predicts_as_the_imperative_one_and_refolds_new_weights():
    net, x = small_net()
    expected = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    code = net._cached_op.code
    assert "__folded" in code and "BatchNorm" not in code and "sqrt" not in code
    layouts = net._cached_op._last.layouts
    made = layouts.held[1]
    net(x).wait_to_read()
    assert all(a is b for a, b in zip(made, layouts.held[1]))  # kept: the same buffers
    gamma = net[1].gamma
    gamma.set_data(gamma.data() * 3)  # a new buffer: the first pair is folded again
    changed = net(x).asnumpy()
    net.hybridize(False)
    np.testing.assert_allclose(changed, net(x).asnumpy(), rtol=1e-5, atol=1e-6)
    assert layouts.held[1][0] is not made[0] and layouts.held[1][2] is made[2]


def test_training_a_hybridized_network_never_folds():
    net, x = small_net()
    net.hybridize()
    with autograd.record():
        y = net(x)
    y.backward()
    assert "__folded" not in net._cached_op.code
    with autograd.train_mode():  # training without recording: the batch's statistics
        net(x).wait_to_read()
    assert "__folded" not in net._cached_op.code


def test_the_pass_can_be_disabled():
    net, x = small_net()
    net.hybridize(disabled_passes=["fold_batchnorm"])
    net(x).wait_to_read()
    assert "__folded" not in net._cached_op.code


def test_imported_resnet50_gives_the_same_logits_folded_or_not():
    onnx = pytest.importorskip("onnx")
    from test_onnx_import import LIGHT, randomized

    model = randomized(onnx.load(f"{LIGHT}/light_resnet50.onnx"))
    x = nd.array(np.random.default_rng(1).normal(size=(1, 3, 224, 224)).astype(np.float32))
    results = {}
    for disabled in ((), ("fold_batchnorm",)):
        net = mx.contrib.onnx.import_to_gluon(model)
        net.hybridize(disabled_passes=disabled)
        results[disabled] = net(x).asnumpy()
        inputs = net._cached_op.last_program.graph.inputs
        folds = sum(n.name.endswith("_weight__folded") for n in inputs)
        assert folds == (53 if not disabled else 0)  # every Conv -> BatchNorm of ResNet-50
    expected = results[("fold_batchnorm",)]
    assert np.std(expected) > 0
    np.testing.assert_allclose(results[()], expected, rtol=1e-4,
                               atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("static_alloc", [False, True])
def test_folding_works_with_the_layout_choice_and_the_arena(static_alloc):
    """Both candidate programs of NOTE [Layout by measurement] read the folded inputs."""
    mx.random.seed(1)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.Flatten(),
            nn.Dense(10))
    net.initialize()
    x = nd.random.normal(shape=(4, 3, 6, 6))
    expected = net(x).asnumpy()
    net.hybridize(static_alloc=static_alloc, autotune=True)
    for _ in range(3):  # the first call measures both layouts, the others run the faster
        np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert net._cached_op.layout is not None and "__folded" in net._cached_op.code
