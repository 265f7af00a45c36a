"""Block and Parameter behaviours MXNet's Gluon has: hooks, apply, cast, None inputs,
deduplicated and legacy parameter files, constants, MXNet-style initializers, and the
normalisation and activation layers (each against a direct numpy computation)."""

import warnings

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, gluon, nd
from hybridlab.errors import BlockInputError
from hybridlab.gluon import nn


def test_forward_hooks_run_around_each_call_until_detached():
    seen = []
    for hybrid in (False, True):
        net = nn.Dense(2, in_units=3)
        net.initialize()
        net.hybridize(hybrid)
        pre = net.register_forward_pre_hook(lambda b, x: seen.append(("pre", b.name)))
        post = net.register_forward_hook(lambda b, x, y: seen.append(("post", y.shape)))
        net(nd.ones((4, 3)))
        assert seen == [("pre", net.name), ("post", (4, 2))]
        post.detach()
        net(nd.ones((4, 3)))
        pre.detach()
        net(nd.ones((4, 3)))
        assert len(seen) == 3
        seen.clear()


def test_apply_visits_children_first_then_the_block():
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(nn.Dense(2), nn.Dropout(0.5))
    names = []
    assert net.apply(lambda b: names.append(b.name)) is net
    assert names == ["net_dense0", "net_dropout0", "net"]


def test_cast_converts_parameters_and_recompiles():
    net = nn.Dense(3, in_units=4)
    net.initialize()
    net.hybridize()
    x = nd.ones((2, 4))
    before = net(x).asnumpy()
    net.cast("float64")
    assert net.weight.data().dtype == np.float64
    out = net(x.astype("float64"))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.asnumpy(), before, rtol=1e-6)
    with autograd.record():
        net(x.astype("float64")).sum().backward()
    assert net.weight.grad().dtype == np.float64


class _Optional(gluon.HybridBlock):
    def hybrid_forward(self, F, a, b=None):
        return a if b is None else a + b


def test_a_hybridized_block_takes_none_and_keeps_its_first_structure():
    x = nd.ones((3,))
    for first, again in [((x,), (x, None)), ((x, None), (x,))]:
        net = _Optional()
        net.hybridize()
        np.testing.assert_array_equal(net(*first).asnumpy(), net(*again).asnumpy())
        with pytest.raises(BlockInputError, match="keeps its first call's inputs"):
            net(x, x)
    net = _Optional()
    np.testing.assert_array_equal(net(x, 2).asnumpy(), [3, 3, 3])  # imperative: as MXNet
    net.hybridize()
    with pytest.raises(ValueError, match="must be NDArrays"):
        net(x, 2)
    with pytest.raises(ValueError):
        net(None, None)


class _SharedPair(gluon.Block):
    """Two children, one parameter set: b reads a's."""

    def __init__(self):
        super().__init__()
        self.a = nn.Dense(2, in_units=2)
        self.b = nn.Dense(2, in_units=2, params=self.a.collect_params())


def test_save_parameters_deduplicates_shared_parameters(tmp_path):
    net = _SharedPair()
    net.initialize()
    net.save_parameters(str(tmp_path / "one.params"), deduplicate=True)
    assert len(nd.load(str(tmp_path / "one.params"))) == 2  # weight and bias once
    net.save_parameters(str(tmp_path / "two.params"))
    assert len(nd.load(str(tmp_path / "two.params"))) == 4
    other = _SharedPair()
    other.load_parameters(str(tmp_path / "one.params"))
    np.testing.assert_array_equal(other.b.weight.data().asnumpy(), net.a.weight.data().asnumpy())


def test_legacy_save_params_round_trips_through_a_symbol_block(tmp_path):
    net = nn.HybridSequential(prefix="")
    with net.name_scope():
        net.add(nn.Dense(3))
    net.initialize()
    x = nd.ones((1, 4))
    expected = net(x).asnumpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        net.save_params(str(tmp_path / "net.params"))
        block = gluon.SymbolBlock(net(mx.sym.var("data")), mx.sym.var("data"))
        block.load_params(str(tmp_path / "net.params"))
    np.testing.assert_allclose(block(x).asnumpy(), expected, rtol=1e-6)


def test_a_constant_is_fed_to_hybrid_forward_and_never_trained():
    class Shift(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.const = self.params.get_constant("const", [[1, 2], [3, 4]])

        def hybrid_forward(self, F, x, const):
            return x + const

    net = Shift()
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0})
    x = nd.ones((2, 2))
    x.attach_grad()
    with autograd.record():
        y = net(x)
    y.backward()
    trainer.step(1)
    np.testing.assert_array_equal(y.asnumpy(), [[2, 3], [4, 5]])
    np.testing.assert_array_equal(net.const.data().asnumpy(), [[1, 2], [3, 4]])
    assert net.const.grad_req == "null"


def test_an_initializer_written_the_mxnet_way_fills_weights_by_name():
    class Threes(mx.init.Initializer):
        def _init_weight(self, name, arr):
            arr[:] = 3

    net = nn.BatchNorm(in_channels=2)
    dense = nn.Dense(2, in_units=2, bias_initializer=None)
    for block in (net, dense):
        block.initialize(Threes())
    np.testing.assert_array_equal(dense.weight.data().asnumpy(), np.full((2, 2), 3))
    np.testing.assert_array_equal(dense.bias.data().asnumpy(), [0, 0])  # MXNet's _init_bias
    assert mx.init.Constant(-10) == mx.init.Constant(-10)
    assert mx.init.Constant(-10) != mx.init.Constant(10)


def _reference_norm(x, axes, eps=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def test_layer_instance_and_group_norm_match_their_formulas():
    x = nd.random.uniform(shape=(2, 6, 3, 4))
    xs = x.asnumpy()
    cases = [(nn.LayerNorm(), _reference_norm(xs, (3,))),
             (nn.InstanceNorm(), _reference_norm(xs, (2, 3))),
             (nn.GroupNorm(num_groups=3),
              _reference_norm(xs.reshape(2, 3, -1), (2,)).reshape(xs.shape))]
    for layer, expected in cases:
        layer.initialize()
        for hybrid in (False, True):
            layer.hybridize(hybrid)
            np.testing.assert_allclose(layer(x).asnumpy(), expected, rtol=1e-4, atol=1e-5)
    layer = nn.LayerNorm(in_channels=10)
    layer.initialize()
    with pytest.raises(mx.base.MXNetError):
        layer(nd.ones((2, 11)))


def test_activation_layers_match_their_formulas():
    x = nd.array([-0.5, -0.1, 0.0, 0.1, 2.0])
    xs = x.asnumpy()
    scale, alpha = 1.0507009873554805, 1.6732632423543772
    prelu = nn.PReLU()
    prelu.initialize()
    for layer, expected in [(nn.Swish(), xs / (1 + np.exp(-xs))),
                            (nn.ELU(), np.where(xs > 0, xs, np.expm1(xs))),
                            (nn.SELU(), scale * np.where(xs >= 0, xs, alpha * np.expm1(xs))),
                            (prelu, np.where(xs >= 0, xs, 0.25 * xs))]:
        np.testing.assert_allclose(layer(x).asnumpy(), expected, rtol=1e-6, atol=1e-7)


def test_embedding_rows_and_their_gradient():
    layer = nn.Embedding(10, 4)
    layer.initialize()
    x = nd.array([3, 4, 2, 3])
    for hybrid in (False, True):
        layer.hybridize(hybrid)
        with autograd.record():
            y = layer(x)
        y.backward()
        np.testing.assert_array_equal(y.asnumpy(), layer.weight.data().asnumpy()[[3, 4, 2, 3]])
        np.testing.assert_array_equal(layer.weight.grad().asnumpy()[:, 0],
                                      [0, 0, 1, 2, 1, 0, 0, 0, 0, 0])


def test_hybridize_accepts_inline_limit_and_concurrent_concatenates():
    from hybridlab.gluon.contrib.nn import HybridConcurrent
    net = HybridConcurrent(axis=1)
    net.add(nn.Dense(2, in_units=3), nn.Dense(3, in_units=3))
    net.initialize()
    x = nd.ones((2, 3))
    expected = net(x).asnumpy()
    assert expected.shape == (2, 5)
    net.hybridize(inline_limit=0)
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)
    with pytest.raises(TypeError, match="inline_limit must be an integer"):
        net.hybridize(inline_limit=-1)


def test_one_input_read_twice_by_one_operator_differentiates_hybridized():
    net = nn.HybridLambda(lambda F, x: F.concat(x, x, dim=1))
    net.hybridize()
    x = nd.ones((2, 3))
    x.attach_grad()
    with autograd.record():
        y = net(x)
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((2, 3), 2))


def test_a_required_input_given_as_none_reaches_hybrid_forward():
    class Either(gluon.HybridBlock):
        def hybrid_forward(self, F, a, b):
            return a * 2 if b is None else a + b

    x = nd.ones((3,))
    for hybrid in (False, True):
        net = Either()
        net.hybridize(hybrid)
        np.testing.assert_array_equal(net(x, None).asnumpy(), [2, 2, 2])


def test_loading_with_the_saved_dtype_changes_the_parameter_dtype(tmp_path):
    net = nn.Dense(2, in_units=2)
    net.initialize()
    net.cast("float16")
    net.save_parameters(str(tmp_path / "half.params"))
    net.cast("float32")
    net.load_parameters(str(tmp_path / "half.params"), cast_dtype=True, dtype_source="saved")
    assert net.weight.dtype == np.float16 and net.weight.dtype == "float16"
    assert net.weight.data().dtype == np.float16


def test_gelu_reflection_padding_and_reset_arrays():
    import math
    x = nd.array(np.linspace(-4, 4, 41))
    expected = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.asnumpy().tolist()]
    np.testing.assert_allclose(nn.GELU()(x).asnumpy(), expected, atol=1e-6)
    image = np.arange(16.0).reshape(1, 1, 4, 4)
    pad = nn.ReflectionPad2D(2)
    for hybrid in (False, True):
        pad.hybridize(hybrid)
        np.testing.assert_array_equal(pad(nd.array(image)).asnumpy(),
                                      np.pad(image, [(0, 0), (0, 0), (2, 2), (2, 2)], "reflect"))
    with pytest.raises(ValueError, match="needs more than 4"):
        nn.ReflectionPad2D(4)(nd.array(image))
    arrays = [nd.ones((2, 3)), nd.ones((4,), dtype="float16")]
    nd.reset_arrays(*arrays, num_arrays=2)
    assert all((a.asnumpy() == 0).all() for a in arrays)
    assert nn.SymbolBlock is gluon.SymbolBlock


class _Backbone(gluon.HybridBlock):
    """A SymbolBlock cut from a network not run yet, inside a hybridized parent."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            source = nn.HybridSequential()
            source.add(nn.Dense(4, activation="relu"), nn.Dense(2))
            data = mx.sym.var("data")
            self.features = gluon.SymbolBlock(source(data), data,
                                              params=source.collect_params())
            self.head = nn.Dense(3)

    def hybrid_forward(self, F, x):
        return self.head(self.features(x))


def test_a_symbol_block_inside_a_hybridized_net_sizes_its_parameters_and_reloads(tmp_path):
    net = _Backbone()
    net.initialize()
    net.hybridize()
    x = nd.random.uniform(shape=(2, 5))
    expected = net(x).asnumpy()
    net.save_parameters(str(tmp_path / "net.params"))
    keys = set(nd.load(str(tmp_path / "net.params")))
    assert "features.0_weight" in keys  # ..._dense0_weight less the common "..._dense" (MXNet)
    other = _Backbone()  # another instance: other prefixes, the same structural keys
    other.load_parameters(str(tmp_path / "net.params"))
    np.testing.assert_allclose(other(x).asnumpy(), expected, rtol=1e-6)


def test_a_file_loaded_into_a_network_never_initialised_can_be_saved_again(tmp_path):
    net = _SharedPair()
    net.initialize()
    net.save_parameters(str(tmp_path / "once.params"), deduplicate=True)
    fresh = _SharedPair()  # not initialised: the file is its first value
    fresh.load_parameters(str(tmp_path / "once.params"))
    fresh.save_parameters(str(tmp_path / "both.params"))
    assert len(nd.load(str(tmp_path / "both.params"))) == 4
    assert fresh.b.weight.list_ctx() == [mx.current_context()]


def test_a_hybridized_block_refuses_inputs_on_two_devices():
    class Add(gluon.HybridBlock):
        def hybrid_forward(self, F, a, b):
            return a + b

    net = Add()
    net.hybridize()
    with pytest.raises(ValueError, match="on one device"):
        net(nd.ones((2,), ctx=mx.cpu(1)), nd.ones((2,), ctx=mx.cpu(2)))
    np.testing.assert_array_equal(net(nd.ones((2,), ctx=mx.cpu(1)),
                                      nd.ones((2,), ctx=mx.cpu(1))).asnumpy(), [2, 2])


def test_sync_batchnorm_on_one_device_is_batchnorm_and_refuses_several():
    from hybridlab.gluon.contrib.nn import SyncBatchNorm

    x = nd.array(np.random.RandomState(0).uniform(size=(6, 3, 4)))
    plain, synced = nn.BatchNorm(in_channels=3), SyncBatchNorm(in_channels=3, num_devices=1)
    plain.initialize()
    synced.initialize()
    with autograd.record():
        expected, got = plain(x), synced(x)
    np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(synced.running_mean.data().asnumpy(),
                               0.1 * x.asnumpy().mean(axis=(0, 2)), rtol=1e-5)
    with pytest.raises(ValueError, match="one device only"):
        SyncBatchNorm(in_channels=3, num_devices=2)
