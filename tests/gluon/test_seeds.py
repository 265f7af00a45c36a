"""The seed chapters' code, run with only the import changed (mxnet -> hybridlab)."""

import re

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import gluon, nd, sym
from hybridlab.errors import ShapeError
from hybridlab.gluon import nn


def get_net():
    net = nn.HybridSequential()  # the seed's three-layer MLP
    net.add(nn.Dense(256, activation="relu"),
            nn.Dense(128, activation="relu"),
            nn.Dense(2))
    net.initialize()
    return net


class HybridNet(nn.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = nn.Dense(10)
        self.output = nn.Dense(2)

    def hybrid_forward(self, F, x):
        print("F: ", F)
        print("x: ", x)
        x = F.relu(self.hidden(x))
        print("hidden: ", x)
        return self.output(x)


def test_mlp_same_output_before_and_after_hybridize():
    x = nd.random_normal(shape=(1, 512))
    net = get_net()
    before = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), before, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net(x).asnumpy(), before, rtol=1e-5, atol=1e-6)
    assert repr(net(x)).endswith("<NDArray 1x2 @cpu(0)>")


def test_symbol_input_names_the_last_dense_as_the_seed_shows():
    get_net()  # the seed built one net before: dense0..dense2
    net = get_net()  # dense3..dense5
    net(nd.random_normal(shape=(1, 512)))
    net.hybridize()
    net(nd.random_normal(shape=(1, 512)))
    assert repr(net(sym.var("data"))) == "<Symbol dense5_fwd>"


def test_hybridnet_prints_ndarrays_then_symbols_once(capsys):
    net = HybridNet()
    net.initialize()
    x = nd.random_normal(shape=(1, 4))
    first = net(x).asnumpy()
    imperative = capsys.readouterr().out
    assert "F:  <module 'hybridlab.ndarray'" in imperative
    assert "<NDArray 1x4 @cpu(0)>" in imperative and "<NDArray 1x10 @cpu(0)>" in imperative
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), first, rtol=1e-5, atol=1e-6)
    traced = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"F:  <module 'hybridlab\.symbol' from '.*'>", traced[0])
    assert traced[1:] == ["x:  <Symbol data>", "hidden:  <Symbol hybridnet0_relu0>"]
    net(nd.random_normal(shape=(1, 4)))
    assert capsys.readouterr().out == ""  # the compiled program runs no Python prints


def test_export_and_imports_reproduce_outputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    net = get_net()
    x = nd.random_normal(shape=(1, 512))
    net.hybridize()
    expected = net(x).asnumpy()
    net.export("my_mlp")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_mlp-0000.params",
                                                          "my_mlp-symbol.json"]
    net2 = gluon.SymbolBlock.imports("my_mlp-symbol.json", ["data"], "my_mlp-0000.params")
    np.testing.assert_array_equal(net2(x).asnumpy(), expected)
    keys = nd.load("my_mlp-0000.params").keys()
    assert all(k.startswith("arg:") for k in keys) and "arg:dense0_weight" in keys


def test_export_epoch_number_in_file_name(tmp_path):
    net = get_net()
    net.hybridize()
    net(nd.ones((2, 512)))
    net.export(str(tmp_path / "model"), epoch=1)
    assert (tmp_path / "model-0001.params").exists()
    assert (tmp_path / "model-symbol.json").exists()


class LeNet(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv1 = nn.Conv2D(6, kernel_size=5)
            self.pool1 = nn.MaxPool2D(pool_size=2)
            self.conv2 = nn.Conv2D(16, kernel_size=5)
            self.pool2 = nn.MaxPool2D(pool_size=2)
            self.fc1 = nn.Dense(120)
            self.fc2 = nn.Dense(84)
            self.fc3_weight = self.params.get("fc3_weight", shape=(10, 84))

    def hybrid_forward(self, F, x, fc3_weight):
        print(x)
        x = self.pool1(F.relu(self.conv1(x)))
        x = self.pool2(F.relu(self.conv2(x)))
        x = x.reshape((0, -1))
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.dot(x, fc3_weight, transpose_b=True)
        return x


def test_lenet_imperative_and_hybridized_agree(capsys):
    mx.random.seed(42)
    net = LeNet()
    net.initialize()
    x = mx.nd.random_normal(shape=(16, 1, 28, 28))
    expected = net(x).asnumpy()
    assert expected.shape == (16, 10)
    assert list(net.collect_params().keys())[:3] == ["lenet0_fc3_weight", "lenet0_conv0_weight",
                                                     "lenet0_conv0_bias"]
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-4, atol=1e-5)
    capsys.readouterr()
    net(mx.nd.random_normal(shape=(16, 1, 28, 28)))
    assert capsys.readouterr().out == ""
    net.hybridize(static_alloc=True, static_shape=True)
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-4, atol=1e-5)


def test_hybridizing_a_plain_block_hybridizes_its_children():
    class Wrapper(gluon.Block):
        def __init__(self):
            super().__init__()
            self.body = get_net()

        def forward(self, x):
            return self.body(x) * 2

    net = Wrapper()
    x = nd.ones((1, 512))
    expected = net(x).asnumpy()
    net.hybridize()
    assert net.body._active
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert net.body._traces  # the child compiled a program


def test_broadcasting_constants_work_in_both_modes_with_broadcast_add_only():
    class AddOnes(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.broadcast_add(x, F.ones((1, 1))) + F.broadcast_add(x, F.ones((1, 1)))

    class PlusOnes(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return x + F.ones((1, 1))  # seed 003: broadcasts on NDArrays, not on Symbols

    net, plus = AddOnes(), PlusOnes()
    x = nd.random_normal(shape=(3, 4))
    expected = 2 * x.asnumpy() + 2
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(plus(x).asnumpy(), x.asnumpy() + 1, rtol=1e-6)
    net.hybridize()
    plus.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)
    with pytest.raises(ShapeError, match=r"elemwise_add: .* use F.broadcast_add"):
        plus(x)


def test_imports_with_warnings_silenced_as_in_the_seed(tmp_path):
    import warnings

    mx.random.seed(42)
    net = get_net()
    net.hybridize()
    x = nd.random_normal(shape=(2, 512))
    expected = net(x).asnumpy()
    net.export(str(tmp_path / "model"), epoch=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net2 = gluon.SymbolBlock.imports(str(tmp_path / "model-symbol.json"), ["data"],
                                         str(tmp_path / "model-0001.params"))
    np.testing.assert_array_equal(net2(x).asnumpy(), expected)
    assert repr(net2(sym.var("data"))).startswith("<Symbol dense")
