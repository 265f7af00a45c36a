"""HybridBlock's call path: which compiled program a call runs (NOTE [The last program first])."""

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, nd
from hybridlab.gluon import nn

# the counter below is a Python attribute the trace freezes: the report says so, rightly
pytestmark = pytest.mark.filterwarnings("ignore:hybridization report")


class Counting(nn.HybridBlock):
    """Dropout after a Dense layer, counting how often ``hybrid_forward`` is traced."""

    def __init__(self) -> None:
        super().__init__()
        self.traces = 0
        with self.name_scope():
            self.dense = nn.Dense(4, in_units=3)
            self.drop = nn.Dropout(0.5)

    def hybrid_forward(self, F, x):
        self.traces += 1
        return self.drop(self.dense(x))


def _net() -> Counting:
    mx.random.seed(0)
    net = Counting()
    net.initialize()
    return net


def test_calls_alternating_between_modes_each_run_their_own_program():
    net = _net()
    x = nd.array(np.random.default_rng(0).uniform(1, 2, size=(64, 3)))
    expected = net(x).asnumpy()  # imperative prediction: Dropout is the identity
    net.hybridize()
    for _ in range(3):
        np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)
        with autograd.train_mode():
            dropped = net(x).asnumpy()
        assert (dropped == 0).any() and not np.allclose(dropped, expected)
    assert net.traces == 1 + 2  # the imperative call, then one trace per mode
    assert sorted(key[0] for key in net._traces) == [False, True]
    assert net._cached_op.stats == {"hits": 4, "misses": 2}  # one cache: the CachedOp's


def test_hybridize_again_forgets_the_program_the_last_call_ran():
    net = _net()
    x = nd.ones((2, 3))
    net.hybridize()
    first = net(x).asnumpy()
    net.hybridize()  # a new trace on the next call, even in the same mode
    np.testing.assert_allclose(net(x).asnumpy(), first)
    assert net.traces == 2
    net.hybridize(False)
    net(x)
    assert net.traces == 3  # imperative: hybrid_forward runs on every call
    net(x)
    assert net.traces == 4


@pytest.mark.parametrize("static_shape", [False, True])
def test_shapes_alternating_get_the_right_results(static_shape):
    """With static_shape the key holds the shapes: no shortcut may return the program
    traced for the other shape."""
    net = _net()
    small, large = nd.ones((1, 3)), nd.ones((5, 3))
    expected = {1: net(small).asnumpy(), 5: net(large).asnumpy()}
    net.hybridize(static_shape=static_shape)
    for _ in range(2):
        for x in (small, large, large, small):
            result = net(x)
            assert result.shape == (x.shape[0], 4)
            np.testing.assert_allclose(result.asnumpy(), expected[x.shape[0]], rtol=1e-6)
    assert len(net._traces) == (2 if static_shape else 1)
    assert net._cached_op.stats["misses"] == 2  # either way: a program per shape


class ScaleFirst(nn.HybridBlock):
    """Its graph lists the parameter before the data: the program reorders its inputs."""

    def __init__(self) -> None:
        super().__init__()
        with self.name_scope():
            self.scale = self.params.get("scale", shape=(3,))

    def hybrid_forward(self, F, x, scale):
        return F.broadcast_mul(scale, x) + 1.0


def test_a_program_whose_graph_reads_a_parameter_first_takes_the_data_first():
    mx.random.seed(0)
    net = ScaleFirst()
    net.initialize(mx.init.Uniform(2.0))
    x = nd.array(np.arange(6.0).reshape(2, 3))
    expected = net(x).asnumpy()
    net.hybridize()
    for _ in range(2):
        np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)
    graph = net._cached_op.graph  # the calling convention: the data, then the parameters
    assert [n.name for n in graph.inputs] == ["data", net.scale.name]
    assert net._cached_op.last_program is not None and net._cached_op._last.plain


@pytest.mark.parametrize("training", [False, True])
def test_a_symbol_block_runs_its_last_program_without_a_lookup(monkeypatch, training):
    """NOTE [The last signature first] holds for a SymbolBlock too, in both modes: after
    the first call (which traces and compiles), no call looks anything up again."""
    from hybridlab import gluon
    from hybridlab.graph.cached_op import CachedOp
    net = _net()
    data = mx.sym.var("data")
    block = gluon.SymbolBlock(net.dense(data), data, net.collect_params())
    lookups = []
    real = CachedOp._lookup
    monkeypatch.setattr(CachedOp, "_lookup",
                        lambda self, *args: lookups.append(1) or real(self, *args))
    x = nd.ones((2, 3))
    with autograd.train_mode() if training else autograd.predict_mode():
        for _ in range(3):
            block(x)
    assert len(lookups) == 1 and block._cached_op.stats == {"hits": 2, "misses": 1}
