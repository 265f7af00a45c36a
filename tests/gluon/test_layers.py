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
    assert net[0]._traces and not hasattr(net[1], "_traces")


def test_max_pool_and_leaky_relu_values():
    x = nd.array(np.arange(16, dtype="float32").reshape(1, 1, 4, 4) - 8)
    pooled = nn.MaxPool2D(pool_size=2)(x).asnumpy()
    np.testing.assert_array_equal(pooled.ravel(), [-3, -1, 5, 7])
    leaky = nn.LeakyReLU(0.1)(nd.array([-2.0, 3.0])).asnumpy()
    np.testing.assert_allclose(leaky, [-0.2, 3.0], rtol=1e-6)


# -- calling a block on a Symbol with no shape (MXNet's net(sym.var('data'))) -------------


def test_symbol_call_leaves_deferred_parameters_deferred():
    dense = nn.Dense(3)
    dense.initialize()
    out = dense(mx.sym.var("data"))
    assert repr(out) == "<Symbol dense0_fwd>"
    assert dense.weight.shape == (3, 0)  # still deferred: the Symbol has no shape
    assert out.list_arguments() == ["data", "dense0_weight", "dense0_bias"]
    arg_shapes, out_shapes, _ = out.infer_shape(data=(2, 5))
    assert arg_shapes[1] == (3, 5) and out_shapes == [(2, 3)]


def test_symbol_call_of_a_batchnorm_net_builds_the_prediction_graph():
    net = conv_net()
    out = net(mx.sym.var("data"))  # no shape: BatchNorm must not need the input's ndim
    assert out.list_auxiliary_states() == ["hybridsequential0_batchnorm0_running_mean",
                                           "hybridsequential0_batchnorm0_running_var"]
    x = nd.array(np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype("float32"))
    expected = net(x).asnumpy()  # sizes the parameters, predict mode
    values = {name: p.data() for name, p in net.collect_params().items()}
    got = out.eval(data=x, **values)[0].asnumpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def batchnorm_reference(x, axis, gamma, beta, eps=1e-5):
    others = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
    mean, var = x.mean(axis=others, keepdims=True), x.var(axis=others, keepdims=True)
    along = [1] * x.ndim
    along[axis] = -1
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(along) + beta.reshape(along), \
        mean.ravel()


@pytest.mark.parametrize("axis", [1, 2, -1, -3, 0])
@pytest.mark.parametrize("hybrid", [False, True])
def test_batchnorm_normalises_along_any_axis(axis, hybrid):
    x = np.random.default_rng(2).normal(size=(3, 4, 5, 2)).astype("float32") * 3 + 1
    channels = x.shape[axis]
    bn = nn.BatchNorm(axis=axis, momentum=0.75)
    bn.initialize()
    if hybrid:
        bn.hybridize()
    gamma = np.arange(1, channels + 1, dtype="float32")
    beta = np.linspace(-1, 1, channels).astype("float32")
    with autograd.record():  # training: batch statistics, running stats updated
        bn(nd.array(x))
    bn.gamma.set_data(gamma)
    bn.beta.set_data(beta)
    with autograd.record():
        out = bn(nd.array(x)).asnumpy()
    expected, batch_mean = batchnorm_reference(x, axis, gamma, beta)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    # two training calls from running_mean = 0: 0.25 * mean, then 0.75 * that + 0.25 * mean
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(), 0.4375 * batch_mean,
                               rtol=1e-5, atol=1e-6)


def test_batchnorm_on_1d_input_says_what_shape_it_needs():
    bn = nn.BatchNorm()
    bn.initialize()
    with pytest.raises(ValueError, match=r"axis=1 is the channel axis, but the input has "
                                         r"shape \(5,\).*x.reshape\(\(-1, 1\)\)"):
        bn(nd.ones((5,)))


def test_reprs_match_mxnet():
    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu", in_units=512), nn.Dense(2), nn.LeakyReLU(0.1))
    assert repr(net) == ("HybridSequential(\n"
                         "  (0): Dense(512 -> 256, Activation(relu))\n"
                         "  (1): Dense(None -> 2, linear)\n"
                         "  (2): LeakyReLU(0.1)\n"
                         ")")


def test_conv_pool_norm_reprs_match_mxnet():
    """The text MXNet 1.x prints for these layers; in_channels appear once inferred."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(6, kernel_size=5, activation="relu"), nn.MaxPool2D(pool_size=2),
            nn.Conv2D(3, 3, strides=2, padding=1, dilation=2, use_bias=False, in_channels=6),
            nn.BatchNorm(scale=False), nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dropout(0.5))
    lines = repr(net).splitlines()[1:-1]
    assert lines == [
        "  (0): Conv2D(None -> 6, kernel_size=(5, 5), stride=(1, 1), Activation(relu))",
        "  (1): MaxPool2D(size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=False, "
        "global_pool=False, pool_type=max, layout=NCHW)",
        "  (2): Conv2D(6 -> 3, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
        "dilation=(2, 2), bias=False)",
        "  (3): BatchNorm(axis=1, eps=1e-05, momentum=0.9, fix_gamma=True, "
        "use_global_stats=False, in_channels=None)",
        "  (4): GlobalAvgPool2D(size=(1, 1), stride=(1, 1), padding=(0, 0), ceil_mode=True, "
        "global_pool=True, pool_type=avg, layout=NCHW)",
        "  (5): Flatten",
        "  (6): Dropout(p = 0.5, axes=())"]
    net.initialize()
    net(nd.ones((1, 3, 28, 28)))
    assert repr(net[0]).startswith("Conv2D(3 -> 6,") and "in_channels=3)" in repr(net[3])


@pytest.mark.parametrize("container", [nn.Sequential, nn.HybridSequential])
def test_slicing_a_sequential_gives_a_container_of_the_same_children(container):
    net = container()
    net.add(nn.Dense(4, in_units=3), nn.Activation("relu"), nn.Dense(2, in_units=4),
            nn.Activation("tanh"))
    net.initialize()
    middle = net[1:3]
    assert type(middle) is container and len(middle) == 2
    assert middle[0] is net[1] and middle[1] is net[2]
    assert list(middle.collect_params()) == [name for name in net.collect_params()
                                             if "dense1" in name]
    x = nd.array([[1.0, -2.0, 3.0, -4.0]])
    np.testing.assert_allclose(middle(x).asnumpy(), net[2](net[1](x)).asnumpy(), rtol=1e-6)


def test_grouped_convolution_layer_equals_one_convolution_per_group():
    mx.random.seed(1)
    layer = nn.Conv2D(4, kernel_size=3, groups=2, in_channels=4)
    layer.initialize()
    x = mx.nd.random.uniform(shape=(1, 4, 5, 5))
    w, b = layer.weight.data(), layer.bias.data()
    halves = [mx.nd.Convolution(x[:, 2 * i:2 * i + 2], w[2 * i:2 * i + 2], b[2 * i:2 * i + 2],
                                kernel=(3, 3), num_filter=2) for i in range(2)]
    np.testing.assert_allclose(layer(x).asnumpy(), mx.nd.concat(*halves, dim=1).asnumpy(),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="groups=3 must divide"):
        nn.Conv2D(4, kernel_size=3, groups=3)


