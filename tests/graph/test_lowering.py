"""Layer operators: kept whole in graphs and files, lowered by the compiler's first pass."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, gluon, nd, sym
from hybridlab.errors import GraphError, ShapeError
from hybridlab.gluon import nn
from hybridlab.graph import ir, shapes
from hybridlab.graph.cached_op import CachedOp
from hybridlab.graph.evaluate import evaluate
from hybridlab.graph.passes import (
    PIPELINE,
    PassContext,
    fold_batchnorm,
    lower_operators,
    run_pipeline,
)
from hybridlab.ops import OPS

LAYER_OPS = sorted(name for name, op in OPS.items() if op.lower is not None)
RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 3, 5)).astype(np.float32)


def test_the_layer_operators_are_mxnets():
    assert LAYER_OPS == ["Activation", "BatchNorm", "Dropout", "Embedding", "LRN", "RNN",
                         "log_softmax", "softmax"]
    # lowering comes first, after the one pass that reads a layer operator whole
    assert PIPELINE[:2] == (fold_batchnorm, lower_operators)


# one call per layer operator: (build with F, the inputs)
CASES = {
    "Activation": (lambda F, x: F.Activation(x, act_type="softrelu"), [X]),
    "softmax": (lambda F, x: F.softmax(x, axis=1, temperature=2.0), [X]),
    "log_softmax": (lambda F, x: F.log_softmax(x), [X]),
    "Dropout": (lambda F, x: F.Dropout(x, p=0.5), [X]),
    "LRN": (lambda F, x: F.LRN(x, nsize=3, alpha=0.5), [X]),
    "RNN": (lambda F, x, p, h: F.RNN(x, p, h, state_size=2, num_layers=1, mode="rnn_tanh"),
            [X, RNG.normal(size=18).astype(np.float32), np.zeros((1, 3, 2), np.float32)]),
    "Embedding": (lambda F, i, w: F.Embedding(i, w, input_dim=4, output_dim=3),
                  [np.array([[2.0, 0.0], [3.0, 3.0]], np.float32),
                   RNG.normal(size=(4, 3)).astype(np.float32)]),
    "BatchNorm": (lambda F, x, g, b, m, v: F.BatchNorm(x, g, b, m, v, fix_gamma=False),
                  [X, RNG.normal(size=3).astype(np.float32),
                   RNG.normal(size=3).astype(np.float32), RNG.normal(size=3).astype(np.float32),
                   RNG.uniform(0.5, 2, size=3).astype(np.float32)]),
}


def test_every_layer_operator_has_a_case():
    assert sorted(CASES) == LAYER_OPS


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_one_node_in_the_graph_the_same_numbers_compiled_and_imperative(name, training):
    build, arrays = CASES[name]
    variables = [sym.var(f"in{i}") for i in range(len(arrays))]
    symbol = build(sym, *variables)
    graph = symbol.to_graph()
    assert [n.op for n in graph.nodes if n.kind == "call"] == [name]  # kept whole
    assert json.loads(symbol.tojson())["nodes"][-1]["op"] == name
    lowered, changes, _ = lower_operators(shapes.infer_graph(
        graph, [ir.Aval(a.shape, np.dtype(a.dtype)) for a in arrays]),
        PassContext(training=training))
    assert name not in {n.op for n in lowered.nodes} and changes[0].startswith(
        f"lowered {graph.outputs[0].node.name} ({name}) to ")
    mx.random.seed(3)
    with autograd.train_mode() if training else autograd.predict_mode():
        imperative = build(nd, *[nd.array(a) for a in arrays]).asnumpy()
    mx.random.seed(3)
    with autograd.train_mode() if training else autograd.predict_mode():
        compiled = CachedOp(symbol)(*[nd.array(a) for a in arrays]).asnumpy()
    np.testing.assert_allclose(compiled, imperative, rtol=1e-5, atol=1e-6)
    if name == "Dropout" and training:
        assert (imperative == 0).any() and not np.array_equal(imperative, X)


def test_the_lowered_node_keeps_the_layers_name_and_the_code_names_it(tmp_path):
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 3)))
    net.export(str(tmp_path / "net"))
    nodes = json.loads((tmp_path / "net-symbol.json").read_text())["nodes"]
    assert {"op": "Activation", "name": "net_dense0_relu_fwd", "attrs": {"act_type": "relu"},
            "inputs": [[3, 0, 0]]} in nodes  # the file holds MXNet's operator
    assert "relu" not in [n["op"] for n in nodes]
    assert "net_dense0_relu_fwd = relu_out(" in net._cached_op.code


def test_a_hybridized_batchnorm_trains_and_moves_its_statistics_as_the_imperative_one():
    def build():
        mx.random.seed(0)
        net = nn.HybridSequential()
        net.add(nn.Conv2D(4, 3), nn.BatchNorm(momentum=0.5), nn.Activation("relu"))
        net.initialize()
        return net

    x = nd.array(RNG.normal(2, 3, size=(6, 2, 5, 5)).astype(np.float32))
    results = []
    for hybrid in (False, True):
        net = build()
        if hybrid:
            net.hybridize()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        for _ in range(2):
            with autograd.record():
                loss = (net(x) ** 2).mean()
            loss.backward()
            trainer.step(1)
        bn = net[1]
        results.append([bn.running_mean.data().asnumpy(), bn.running_var.data().asnumpy(),
                        net[0].weight.data().asnumpy(), net(x).asnumpy()])
    assert not np.allclose(results[0][0], 0)  # the statistics did move
    for imperative, hybridized in zip(*results):
        np.testing.assert_allclose(hybridized, imperative, rtol=1e-4, atol=1e-5)


def test_softmax_output_trains_with_the_cross_entropy_gradient_hybridized_or_not():
    data, label = sym.var("data"), sym.var("softmax_label")
    out = sym.SoftmaxOutput(sym.FullyConnected(data, num_hidden=3, name="fc"), label,
                            name="softmax")
    assert out.list_arguments() == ["data", "fc_weight", "fc_bias", "softmax_label"]
    x = nd.array(RNG.normal(size=(4, 5)).astype(np.float32))
    y = nd.array([0, 2, 1, 2])
    grads = []
    for hybrid in (False, True):
        mx.random.seed(1)
        block = gluon.SymbolBlock(out, [data, label])
        block.initialize()
        if hybrid:
            block.hybridize()
        with autograd.record():
            prob = block(x, y)
        prob.backward()
        grads.append(block.collect_params()["fc_bias"].grad().asnumpy())
    expected = (prob.asnumpy() - np.eye(3)[[0, 2, 1, 2]]).sum(axis=0)
    np.testing.assert_allclose(grads[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[1], expected, rtol=1e-5, atol=1e-6)


def test_infer_shape_completes_what_the_operators_determine():
    a, b = sym.var("a"), sym.var("b")
    assert sym.elemwise_add(a, b).infer_shape(b=(2, 3))[0] == [(2, 3), (2, 3)]
    assert sym.broadcast_add(a, b).infer_shape_partial(b=(2, 3))[0] == [(), (2, 3)]
    data = sym.var("data")
    net = sym.FullyConnected(data, num_hidden=4, name="fc1")
    net = sym.BatchNorm(net, name="bn")
    net = sym.SoftmaxOutput(sym.Activation(net, act_type="relu"), name="softmax")
    args, outs, aux = net.infer_shape(data=(5, 3))
    assert dict(zip(net.list_arguments(), args)) == {
        "data": (5, 3), "fc1_weight": (4, 3), "fc1_bias": (4,), "bn_gamma": (4,),
        "bn_beta": (4,), "softmax_label": (5,)}
    assert outs == [(5, 4)] and aux == [(4,), (4,)]
    conv = sym.BatchNorm(sym.Convolution(data, kernel=(3, 3), num_filter=8, name="c"),
                         name="bn2")
    args, _, aux = conv.infer_shape(data=(1, 2, 8, 8))
    assert args[1:] == [(8, 2, 3, 3), (8,), (8,), (8,)] and aux == [(8,), (8,)]


def test_clear_errors():
    with pytest.raises(ShapeError, match=r"elemwise_add: lhs \(2, 3\) and rhs \(3,\) must "
                                         r"have one shape"):
        nd.elemwise_add(nd.ones((2, 3)), nd.ones((3,)))
    graph = sym.Activation(sym.var("x"), act_type="relu").to_graph()
    with pytest.raises(GraphError, match="Activation is a layer operator: it runs as its "
                                         "lowering"):
        list(ir.interpret(graph, [np.ones(2, np.float32)], ir.RunContext()))
    assert evaluate(graph, np.array([-1.0, 2.0], np.float32))[0].tolist() == [0.0, 2.0]
    with pytest.raises(ShapeError, match=r"SoftmaxOutput: data \(4, 3\) needs .* label of "
                                         r"shape \(4,\)"):
        nd.SoftmaxOutput(nd.ones((4, 3)), nd.ones((5,)))


def test_the_pass_explorer_pipeline_shows_the_lowering_first():
    x = sym.var("x")
    graph = shapes.infer_graph(sym.softmax(sym.Activation(x, act_type="tanh")).to_graph(),
                            [ir.Aval((2, 3), np.dtype("float32"))])
    final, records = run_pipeline(graph)
    assert records[0].name == "fold_batchnorm" and records[0].after is graph  # no BatchNorm
    lowering = records[1]
    assert lowering.name == "lower_operators" and len(lowering.changes) == 2
    assert {n.op for n in lowering.before.nodes} >= {"Activation", "softmax"}
    assert {"tanh", "exp", "max", "sum"} <= {n.op for n in lowering.after.nodes}
    np.testing.assert_allclose(evaluate(final, np.zeros((2, 3), np.float32))[0], 1 / 3,
                               rtol=1e-6)


def test_lrn_differentiates_through_its_lowering_like_central_differences():
    """LRN has no gradient rule of its own: its lowering's primitives (the channel-window
    sum is its own adjoint) must give the derivative central differences measure."""
    x = RNG.normal(size=(2, 5, 3)).astype(np.float64)
    weights = RNG.normal(size=x.shape)

    def loss(values):
        out = nd.LRN(nd.array(values, dtype="float64"), nsize=3, alpha=0.5, knorm=1.5)
        return float((out.asnumpy() * weights).sum())

    data = nd.array(x, dtype="float64")
    data.attach_grad()
    with autograd.record():
        out = nd.LRN(data, nsize=3, alpha=0.5, knorm=1.5)
    out.backward(nd.array(weights, dtype="float64"))
    numeric = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = 1e-6
        numeric[index] = (loss(x + step) - loss(x - step)) / 2e-6
    np.testing.assert_allclose(data.grad.asnumpy(), numeric, rtol=1e-5, atol=1e-7)
