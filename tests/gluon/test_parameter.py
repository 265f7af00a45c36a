"""Parameters: deferred initialisation, collect_params order/select, save/load, grads."""

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, gluon, nd
from hybridlab.errors import DeferredInitializationError
from hybridlab.gluon import nn


def test_dense_weight_shape_is_deferred_until_the_first_forward():
    net = nn.Dense(256)
    net.initialize()
    assert net.weight.shape == (256, 0)
    with pytest.raises(DeferredInitializationError, match="in_units=512"):
        net.weight.data()
    net(nd.ones((2, 512)))
    assert net.weight.shape == (256, 512)
    assert net.weight.data().shape == (256, 512)


def test_default_init_is_uniform_007_and_bias_is_zero():
    net = nn.Dense(64, in_units=100)
    net.initialize()
    weight = net.weight.data().asnumpy()
    assert np.abs(weight).max() <= 0.07 and np.abs(weight).max() > 0.05
    assert (net.bias.data().asnumpy() == 0).all()


def test_initialize_with_a_given_initializer_and_force_reinit():
    net = nn.Dense(3, in_units=4)
    net.initialize(mx.init.Constant(2.0))
    assert (net.weight.data().asnumpy() == 2).all()
    with pytest.warns(UserWarning) as caught:
        net.initialize(mx.init.One())  # already initialised: ignored, with MXNet's warning
    assert [str(w.message) for w in caught] == [
        f"Parameter 'dense0_{name}' is already initialized, ignoring. Set force_reinit=True "
        f"to re-initialize." for name in ("weight", "bias")]
    assert {w.filename for w in caught} == {__file__}  # the user's line, not hybridlab's
    assert (net.weight.data().asnumpy() == 2).all()
    net.initialize(mx.init.One(), force_reinit=True)
    assert (net.weight.data().asnumpy() == 1).all()


def test_initializer_precedence_is_mxnets():
    """param.initialize(init) > the parameter's own init > net.initialize(init) > Uniform."""
    own = gluon.Parameter("own", shape=(2,), init=mx.init.Constant(1.0))
    own.initialize(mx.init.Constant(5.0))  # given to this parameter: wins over its own
    np.testing.assert_array_equal(own.data().asnumpy(), [5, 5])
    net = nn.Dense(2, in_units=2, bias_initializer=mx.init.Constant(3.0))
    net.initialize(mx.init.Constant(7.0))  # the default: only where a parameter has none
    np.testing.assert_array_equal(net.bias.data().asnumpy(), [3, 3])
    np.testing.assert_array_equal(net.weight.data().asnumpy(), np.full((2, 2), 7.0))


def test_xavier_and_normal_have_the_expected_spread():
    xavier = mx.init.Xavier()(shape=(200, 300)).asnumpy()
    assert np.abs(xavier).max() <= np.sqrt(3 / 250) + 1e-6
    normal = mx.initializer.Normal(0.01)(shape=(300, 300)).asnumpy()
    assert abs(normal.std() - 0.01) < 0.001


def test_collect_params_lists_own_parameters_first_then_children():
    class Net(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.scale = self.params.get("scale", shape=(1,))
                self.fc = nn.Dense(2)

        def hybrid_forward(self, F, x, scale):
            return F.broadcast_mul(self.fc(x), scale)

    net = Net()
    assert list(net.collect_params().keys()) == ["net0_scale", "net0_dense0_weight",
                                                 "net0_dense0_bias"]
    assert list(net.collect_params(".*weight").keys()) == ["net0_dense0_weight"]


def test_save_and_load_parameters_round_trip(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    net.initialize()
    x = nd.random.normal(shape=(3, 5))
    expected = net(x).asnumpy()
    path = str(tmp_path / "mlp.params")
    net.save_parameters(path)
    other = nn.HybridSequential()
    other.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    other.load_parameters(path)
    np.testing.assert_array_equal(other(x).asnumpy(), expected)


def test_load_parameters_names_missing_values(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    path = str(tmp_path / "one.params")
    net.save_parameters(path)
    bigger = nn.HybridSequential()
    bigger.add(nn.Dense(2, in_units=3))
    with pytest.raises(ValueError, match="0.weight"):
        bigger.load_parameters(path)


def test_grad_req_null_and_add_and_zero_grad():
    net = nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(mx.init.One())
    net.weight.grad_req = "add"
    x = nd.array([[1.0, 2.0]])
    for _ in range(2):
        with autograd.record():
            y = net(x)
        y.backward()
    np.testing.assert_allclose(net.weight.grad().asnumpy(), [[2.0, 4.0]])
    net.collect_params().zero_grad()
    np.testing.assert_allclose(net.weight.grad().asnumpy(), [[0.0, 0.0]])
    net.weight.grad_req = "null"
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        net.weight.grad()


def test_set_data_and_var():
    param = gluon.Parameter("w", shape=(2, 2))
    param.initialize()
    param.set_data(nd.ones((2, 2)))
    np.testing.assert_array_equal(param.data().asnumpy(), np.ones((2, 2)))
    assert param.var().name == "w"
    with pytest.raises(ValueError, match="shape"):
        param.set_data(nd.ones((3, 2)))


@pytest.mark.parametrize("hybrid", [False, True])
def test_params_argument_shares_parameters_and_their_gradients_add_up(hybrid):
    net = nn.HybridSequential()
    with net.name_scope():
        first = nn.Dense(2, in_units=2)
        second = nn.Dense(2, in_units=2, params=first.params)
        net.add(first, second)
    assert second.weight is first.weight and second.bias is first.bias
    assert list(net.collect_params()) == ["hybridsequential0_dense0_weight",
                                          "hybridsequential0_dense0_bias"]
    net.initialize(mx.init.Xavier())
    if hybrid:
        net.hybridize()
    x = nd.array([[1.0, -2.0], [0.5, 3.0]])
    with autograd.record():
        net(x).sum().backward()
    # the same computation by hand, with one weight used twice
    weight, bias = first.weight.data().copy(), first.bias.data().copy()
    weight.attach_grad()
    with autograd.record():
        hidden = nd.dot(x, weight, transpose_b=True) + bias
        (nd.dot(hidden, weight, transpose_b=True) + bias).sum().backward()
    np.testing.assert_allclose(first.weight.grad().asnumpy(), weight.grad.asnumpy(),
                               rtol=1e-5)


def test_params_argument_at_top_level_shares_too():
    first = nn.Dense(3, in_units=2)
    second = nn.Dense(3, in_units=2, params=first.params)
    assert second.weight is first.weight and second.prefix == "dense1_"


def _offsets(net):
    """Where each parameter's buffer starts, modulo 64 bytes (0: aligned)."""
    nd.waitall()
    return {name: p.data()._data.ctypes.data % 64 for name, p in net.collect_params().items()}


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_parameter_buffers_stay_64_byte_aligned(tmp_path, optimizer):
    """NOTE [Aligned weights]: initialisation, set_data, loading, every Trainer step and a
    hybridized BatchNorm's running statistics leave each buffer at a 64-byte boundary
    (numpy alone puts large arrays 16 bytes past one), with the values unchanged."""
    from hybridlab.gluon.parameter import aligned, aligned_empty

    net = nn.Dense(256, in_units=512)  # 512 KiB: an array numpy's allocator misaligns
    net.initialize()
    assert set(_offsets(net).values()) == {0}
    raw = np.empty(512 * 256 * 4 + 64, np.uint8)
    start = (16 - raw.ctypes.data) % 64  # values start 16 bytes past a 64-byte boundary
    values = raw[start:start + 512 * 256 * 4].view(np.float32).reshape(256, 512)
    assert values.ctypes.data % 64 == 16
    values[...] = np.arange(values.size, dtype=np.float32).reshape(256, 512)
    net.weight.set_data(nd.from_numpy(values))
    assert _offsets(net)["dense0_weight"] == 0
    np.testing.assert_array_equal(net.weight.data().asnumpy(), values)
    net.save_parameters(str(tmp_path / "p.params"))
    net.load_parameters(str(tmp_path / "p.params"))
    assert set(_offsets(net).values()) == {0}
    trainer = gluon.Trainer(net.collect_params(), optimizer, {"learning_rate": 0.1})
    for _ in range(2):
        with autograd.record():
            loss = net(nd.ones((3, 512))).sum()
        loss.backward()
        trainer.step(3)
        assert set(_offsets(net).values()) == {0}
    buffer = aligned_empty((3, 5), np.float64)
    assert buffer.ctypes.data % 64 == 0 and buffer.shape == (3, 5) and aligned(buffer) is buffer
    norm = nn.BatchNorm(in_channels=1000)  # hybridized: the program returns the new
    norm.initialize()                       # running statistics, which it stores
    norm.hybridize()
    for _ in range(2):
        with autograd.record():
            norm(nd.array(np.arange(3000.0).reshape(3, 1000)))
        assert set(_offsets(norm).values()) == {0}
