"""sym.contrib.foreach as one operator holding its body (ops/control_flow.py): a loop in
the generated code, the body compiled once for every length, gradients through it."""

from __future__ import annotations

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, nd, sym
from hybridlab.gluon import nn
from hybridlab.ops import control_flow


def _step(row, states, free):
    out = row * 2 + states[0] + free
    return out, [out]


def test_foreach_is_one_node_whatever_the_length():
    x, s0, w = sym.var("x"), sym.var("s0"), sym.var("w")
    outs, states = sym.contrib.foreach(lambda r, s: _step(r, s, w), x, [s0])
    graph = sym.Group([outs, states[0]]).to_graph()
    loops = [n for n in graph.nodes if n.kind == "call"]
    assert [n.op for n in loops] == ["_foreach"]  # not one copy of the body per row
    body = loops[0].attr_dict["body"]
    assert [n.name for n in body.inputs] == ["foreach_data0", "foreach_state0", "foreach_free0"]
    assert sym.Group([outs, states[0]]).list_inputs() == ["x", "s0", "w"]


@pytest.mark.parametrize("length", [3, 1])
def test_foreach_forward_and_gradients_match_the_python_loop(length):
    values = np.arange(length * 2, dtype=np.float32).reshape(length, 2)
    x, s0, w = sym.var("x"), sym.var("s0"), sym.var("w")
    outs, states = sym.contrib.foreach(lambda r, s: _step(r, s, w), x, [s0])
    group = sym.Group([outs * 2, states[0]])
    arrays = {"x": nd.array(values), "s0": nd.array([1.0, -1.0]), "w": nd.array([0.5, 2.0])}
    grads = {k: nd.zeros(v.shape) for k, v in arrays.items()}
    executor = group.bind(mx.cpu(), arrays, args_grad=grads)
    got = [o.asnumpy() for o in executor.forward(is_train=True)]
    executor.backward([nd.ones((length, 2)), nd.ones((2,))])
    copies = {k: v.copy() for k, v in arrays.items()}
    for array in copies.values():
        array.attach_grad()
    with autograd.record():  # nd's foreach: a Python loop on the tape
        o, s = nd.contrib.foreach(lambda r, st: _step(r, st, copies["w"]), copies["x"],
                                  [copies["s0"]])
        total = (o * 2).sum() + s[0].sum()
    total.backward()
    np.testing.assert_allclose(got[0], o.asnumpy() * 2)
    np.testing.assert_allclose(got[1], s[0].asnumpy())
    for name in arrays:
        np.testing.assert_allclose(executor.grad_dict[name].asnumpy(),
                                   copies[name].grad.asnumpy(), rtol=1e-6)


class _Recurrent(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, states):
        def step(row, carried):
            h = F.tanh(self.dense(row) + carried[0])
            return h, [h]
        return F.contrib.foreach(step, x, states)


def test_a_hybridized_recurrent_block_loops_in_its_generated_code_and_trains():
    net = _Recurrent()
    net.initialize(mx.init.Uniform(0.5))
    x, h0 = nd.random.uniform(-1, 1, shape=(4, 2, 3)), nd.zeros((2, 3))

    def run():
        with autograd.record():
            out, (h,) = net(x, [h0])
            (out.sum() + h.sum()).backward()
        return out.asnumpy(), net.dense.weight.grad().asnumpy().copy()

    expected = run()
    net.hybridize()
    got = run()
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    source = net._cached_op.code
    assert "for " in source and "_step(" in source  # a real loop calling the body


def test_a_new_length_reuses_the_compiled_body():
    net = _Recurrent()
    net.initialize()
    net.hybridize()
    h0 = nd.zeros((2, 3))
    net(nd.ones((4, 2, 3)), [h0])[0].wait_to_read()  # compiles the program and the body
    known = {body: dict(functions) for body, functions in control_flow._COMPILED.items()}
    out, _ = net(nd.ones((7, 2, 3)), [h0])  # a new length: a new outer program ...
    assert out.shape == (7, 2, 3)
    assert len(net._cached_op._cache) == 2
    after = {body: dict(functions) for body, functions in control_flow._COMPILED.items()}
    assert after == known  # ... and no new body, nor a new compilation of it


def test_a_loop_round_trips_through_json_with_its_body_as_a_subgraph():
    x, s0, w = sym.var("x"), sym.var("s0"), sym.var("w")
    outs, states = sym.contrib.foreach(lambda r, s: _step(r, s, w), x, [s0])
    text = sym.Group([outs, states[0]]).tojson()
    loaded = sym.load_json(text)
    assert loaded.tojson() == text and '"subgraphs"' in text
    arrays = {"x": nd.ones((2, 2)), "s0": nd.zeros((2,)), "w": nd.ones((2,))}
    got = [o.asnumpy() for o in loaded.bind(mx.cpu(), arrays).forward()]
    np.testing.assert_allclose(got[1], [6.0, 6.0])  # (0 + 2 + 1), then (3 + 2 + 1)
    broken = text.replace('"subgraphs"', '"no_subgraphs"')
    with pytest.raises(mx.errors.ModelFileError, match=r"_foreach needs 1 subgraph"):
        sym.load_json(broken)


class _Count(nn.HybridBlock):
    def hybrid_forward(self, F, i, total):
        return F.contrib.while_loop(lambda i, s: i <= 100, lambda i, s: (i, (i + 1, s + i)),
                                    [i, total], max_iterations=1000)


@pytest.mark.parametrize("hybridized", [False, True])
def test_while_loop_is_one_node_that_stops_when_cond_fails(hybridized):
    net = _Count()
    if hybridized:
        net.hybridize()
    steps, (i, total) = net(nd.array([1], dtype="int64"), nd.array([0], dtype="int64"))
    assert steps.shape == (1000, 1) and (i.asscalar(), total.asscalar()) == (101, 5050)
    np.testing.assert_array_equal(steps.asnumpy()[:100, 0], np.arange(1, 101))
    assert not steps.asnumpy()[100:].any()  # MXNet's padding: zero rows after the stop
    if hybridized:
        graph = net._cached_op._last.forward.graph
        assert [n.op for n in graph.nodes if n.kind == "call"] == ["_while_loop"]


def test_while_loop_gradient_is_refused_with_the_fix_not_zeros():
    x = sym.var("x", shape=(2,))
    _, final = sym.contrib.while_loop(lambda v: v.sum() < 10, lambda v: (None, [v * 2]), [x],
                                      max_iterations=5)
    with pytest.raises(mx.errors.MissingGradientError, match="while_loop.s gradient is not"):
        final[0].bind(mx.cpu(), {"x": nd.ones((2,))}, args_grad={"x": nd.zeros((2,))})


def test_a_body_that_ignores_a_state_is_refused_as_in_mxnet():
    with pytest.raises(mx.errors.UnusedLoopInputError, match="never reads its state 1"):
        sym.contrib.foreach(lambda row, s: (row, [s[0] + 1, s[0] + 2]), sym.var("x"),
                            [sym.var("a"), sym.var("b")])
    assert issubclass(mx.errors.UnusedLoopInputError, AssertionError)


def test_nested_states_keep_their_structure():
    outs, (first, [second]) = sym.contrib.foreach(
        lambda row, s: (row + s[0], [s[0] * 2, [s[1][0] + row]]), sym.var("x"),
        [sym.var("a"), [sym.var("b")]])
    arrays = {"x": nd.ones((3, 2)), "a": nd.ones((2,)), "b": nd.zeros((2,))}
    got = sym.Group([outs, first, second]).bind(mx.cpu(), arrays).forward()
    np.testing.assert_allclose(got[1].asnumpy(), [8.0, 8.0])
    np.testing.assert_allclose(got[2].asnumpy(), [3.0, 3.0])
