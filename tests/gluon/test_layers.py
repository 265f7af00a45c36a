"""Layer coverage: conv/pool/BatchNorm/Lambda stacks agree imperatively and hybridized."""

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, nd
from hybridlab.gluon import nn


def conv_net():
    mx.random.seed(3)
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(4, kernel_size=3, padding=1, activation="relu"),
                nn.BatchNorm(),
                nn.AvgPool2D(pool_size=2),
                nn.Conv2D(6, kernel_size=(2, 2), strides=1, use_bias=False),
                nn.GlobalAvgPool2D(),
                nn.Flatten(),
                nn.Dense(3))
    net.initialize(mx.init.Xavier())
    return net


def run(net, x, training):
    with autograd.record(train_mode=training):
        out = net(x)
        loss = (out * out).sum()
    loss.backward()
    grads = [p.grad().asnumpy().copy() for p in net.collect_params().values()
             if p.grad_req != "null"]
    return out.asnumpy(), grads


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("static", [False, True])
def test_conv_bn_pool_stack_agrees(training, static):
    x = nd.array(np.random.default_rng(0).normal(size=(2, 3, 8, 8)).astype("float32"))
    reference = conv_net()
    expected, expected_grads = run(reference, x, training)
    net = conv_net()
    net.hybridize(static_alloc=static, static_shape=static)
    got, grads = run(net, x, training)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert len(grads) == len(expected_grads) == 7
    for grad, expected_grad in zip(grads, expected_grads):
        np.testing.assert_allclose(grad, expected_grad, rtol=1e-3, atol=1e-5)
    names = list(reference.collect_params())
    assert names[:3] == ["hybridsequential0_conv0_weight", "hybridsequential0_conv0_bias",
                         "hybridsequential0_batchnorm0_gamma"]


def test_sequential_with_lambda_and_hybridized_children():
    net = nn.Sequential()
    net.add(nn.Dense(4, in_units=3), nn.Lambda(lambda x: x * 3), nn.HybridLambda("relu"))
    net.initialize()
    x = nd.array([[1.0, -2.0, 3.0]])
    expected = net(x).asnumpy()
    np.testing.assert_allclose(expected, np.maximum(
        3 * (x.asnumpy() @ net[0].weight.data().asnumpy().T), 0), rtol=1e-6)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)
    assert net[0]._programs and not hasattr(net[1], "_programs")


def test_max_pool_and_leaky_relu_values():
    x = nd.array(np.arange(16, dtype="float32").reshape(1, 1, 4, 4) - 8)
    pooled = nn.MaxPool2D(pool_size=2)(x).asnumpy()
    np.testing.assert_array_equal(pooled.ravel(), [-3, -1, 5, 7])
    leaky = nn.LeakyReLU(0.1)(nd.array([-2.0, 3.0])).asnumpy()
    np.testing.assert_allclose(leaky, [-0.2, 3.0], rtol=1e-6)
