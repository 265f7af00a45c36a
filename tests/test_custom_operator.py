"""mx.operator: an operator written in Python (CustomOp/CustomOpProp), run by nd.Custom,
differentiated by its own backward, and shown in the profiler's Custom Operator domain."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, nd, profiler


class _Cube(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.seen_training = is_train
        self.assign(out_data[0], req[0], in_data[0] ** 3)
        nd.zeros((2, 2))  # an op its Python code pushes: named Cube::_zeros

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], 3 * in_data[0] ** 2 * out_grad[0])


@mx.operator.register("Cube")
class _CubeProp(mx.operator.CustomOpProp):
    made: list = []

    def create_operator(self, ctx, in_shapes, in_dtypes):
        self.made.append(_Cube())
        return self.made[-1]


def test_a_python_operator_computes_and_differentiates_with_its_own_code():
    x = nd.array([1.0, -2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = nd.Custom(x, op_type="Cube")
        (y * nd.array([1.0, 10.0, 100.0])).sum().backward()
    assert y.asnumpy().tolist() == [1.0, -8.0, 27.0]
    assert x.grad.asnumpy().tolist() == [3.0, 120.0, 2700.0]
    assert _CubeProp.made[-1].seen_training is True
    assert nd.Custom(x, op_type="Cube").asnumpy().tolist() == [1.0, -8.0, 27.0]
    assert _CubeProp.made[-1].seen_training is False  # outside record(): predicting


def test_the_profiler_shows_a_python_operator_and_the_ops_its_code_pushes():
    profiler.set_state("run")
    try:
        profiler.dumps(reset=True)
        x = nd.ones((3,))
        x.attach_grad()
        with autograd.record():
            y = nd.Custom(x, op_type="Cube")
        y.backward()
        nd.waitall()
        time = json.loads(profiler.dumps(format="json", reset=True))["Time"]
    finally:
        profiler.set_state("stop")
    assert {"Cube::pure_python", "_backward_Cube::pure_python", "Cube::_zeros"} <= set(
        time["Custom Operator"])
    assert not any("::" in name for name in time.get("operator", {}))


def test_custom_says_what_is_wrong_with_a_call():
    with pytest.raises(ValueError, match="no operator registered as 'Cbe'"):
        nd.Custom(nd.ones((2,)), op_type="Cbe")
    with pytest.raises(TypeError, match="takes 1 input"):
        nd.Custom(nd.ones((2,)), nd.ones((2,)), op_type="Cube")
    with pytest.raises(TypeError, match="subclass of mx.operator.CustomOpProp"):
        mx.operator.register("bad")(object)
    assert np.array_equal(nd.Custom(nd.zeros((2,)), op_type="Cube").asnumpy(), [0.0, 0.0])


def test_a_python_operator_is_one_node_of_a_graph_with_its_gradient():
    net = mx.sym.Custom(data=mx.sym.var("a"), op_type="Cube", name="cube")
    assert net.list_arguments() == ["a"] and net.infer_shape(a=(3,))[1] == [(3,)]
    grad = nd.zeros((3,))
    exe = net.bind(mx.cpu(), {"a": nd.array([1.0, 2.0, -1.0])}, args_grad={"a": grad})
    assert exe.forward(is_train=True)[0].asnumpy().tolist() == [1.0, 8.0, -1.0]
    exe.backward(nd.array([1.0, 1.0, 2.0]))
    assert grad.asnumpy().tolist() == [3.0, 12.0, 6.0]
    with pytest.raises(mx.base.MXNetError, match="no operator registered as 'Nope'"):
        mx.sym.Custom(data=mx.sym.var("a"), op_type="Nope")
