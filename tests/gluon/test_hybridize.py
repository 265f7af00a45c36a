"""hybridize(): imperative == hybridized == exported-and-reimported, forward and backward."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import autograd, gluon, nd, sym
from hybridlab.errors import BlockInputError
from hybridlab.gluon import nn

LAYERS = {
    "dense": lambda: nn.Dense(5),
    "dense_relu": lambda: nn.Dense(4, activation="relu"),
    "dense_tanh": lambda: nn.Dense(3, activation="tanh"),
    "sigmoid": lambda: nn.Activation("sigmoid"),
    "leaky": lambda: nn.LeakyReLU(0.1),
    "dropout": lambda: nn.Dropout(0.5),  # identity when predicting
    "flatten": lambda: nn.Flatten(),
    "lambda": lambda: nn.HybridLambda(lambda F, x: F.relu(x) * 2 + 1),
}


# Image layers keep (N, C, H, W) with H, W >= 1 whatever their order: size-preserving
# convolutions and pools (3x3 windows, stride 1, padding 1) plus a global pool.
IMAGE_LAYERS = {
    "conv": lambda: nn.Conv2D(3, kernel_size=3, padding=1),
    "conv_relu": lambda: nn.Conv2D(2, kernel_size=(3, 1), padding=(1, 0), activation="relu"),
    "max_pool": lambda: nn.MaxPool2D(pool_size=3, strides=1, padding=1),
    "avg_pool": lambda: nn.AvgPool2D(pool_size=3, strides=1, padding=1),
    "global_pool": lambda: nn.GlobalAvgPool2D(),
    "batchnorm": lambda: nn.BatchNorm(),
    "relu": lambda: nn.Activation("relu"),
}


def build(names, layers=LAYERS, flatten=False):
    net = nn.HybridSequential()
    net.add(*[layers[name]() for name in names])
    if flatten:
        net.add(nn.Flatten())
    net.add(nn.Dense(2))
    net.initialize(mx.init.Xavier())
    return net


def forward_and_grads(net, x):
    with autograd.record(train_mode=False):  # predict mode: Dropout is the identity
        out = net(x)
        loss = (out * out).sum()
    loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()
             if p.grad_req != "null"}  # (not BatchNorm's running statistics)
    return out.asnumpy(), grads


def check_modes_agree(net, x, flags, tmp_path_factory):
    """Imperative == hybridized with ``flags`` == exported and re-imported; grads too."""
    expected, expected_grads = forward_and_grads(net, x)
    net.hybridize(**flags)
    got, grads = forward_and_grads(net, x)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert grads.keys() == expected_grads.keys()
    for key, grad in expected_grads.items():
        np.testing.assert_allclose(grads[key], grad, rtol=1e-4, atol=1e-6, err_msg=key)
    path = str(tmp_path_factory.mktemp("export") / "net")
    net.export(path)
    again = gluon.SymbolBlock.imports(path + "-symbol.json", ["data"], path + "-0000.params")
    np.testing.assert_allclose(again(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)


FLAGS = st.fixed_dictionaries({"static_alloc": st.booleans(), "static_shape": st.booleans()})


@settings(max_examples=15, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(LAYERS)), min_size=1, max_size=4),
       batch=st.integers(1, 5), flags=FLAGS)
def test_imperative_hybridized_and_reimported_agree(tmp_path_factory, names, batch, flags):
    net = build(names)
    x = nd.array(np.random.default_rng(batch).normal(size=(batch, 3, 2)).astype("float32"))
    check_modes_agree(net, x, flags, tmp_path_factory)


@settings(max_examples=15, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(IMAGE_LAYERS)), min_size=1, max_size=4),
       flatten=st.booleans(), batch=st.integers(1, 3), flags=FLAGS)
def test_image_stacks_agree_in_every_mode(tmp_path_factory, names, flatten, batch, flags):
    net = build(names, IMAGE_LAYERS, flatten)
    rng = np.random.default_rng(batch)
    x = nd.array(rng.normal(size=(batch, 2, 5, 4)).astype("float32"))
    net(x)  # sizes the parameters; then BatchNorm gets statistics that are not 0 and 1
    for name, param in net.collect_params().items():
        if "batchnorm" in name:
            param.set_data(rng.uniform(0.5, 2.0, size=param.shape).astype("float32"))
    check_modes_agree(net, x, flags, tmp_path_factory)


def test_a_new_input_shape_adds_a_program_only_with_static_shape():
    net = build(["dense_relu"])
    net.hybridize()
    net(nd.ones((1, 3)))
    net(nd.ones((4, 3)))
    assert len(net._traces) == 1  # one trace serves every shape
    net.hybridize(static_shape=True)
    net(nd.ones((1, 3)))
    net(nd.ones((4, 3)))
    assert len(net._traces) == 2


def test_a_new_input_dtype_adds_a_compiled_program():
    net = build(["dense_relu"])
    x = np.random.default_rng(0).normal(size=(2, 3))
    expected = net(nd.array(x, dtype="float64")).asnumpy()
    net.hybridize()
    single = net(nd.array(x, dtype="float32"))
    double = net(nd.array(x, dtype="float64"))
    op = net._cached_op
    assert op.stats["misses"] == 2  # one program per (shapes, dtypes) signature
    assert single.dtype == np.float32 and double.dtype == np.float64
    np.testing.assert_allclose(double.asnumpy(), expected, rtol=1e-12)
    net(nd.array(x, dtype="float32"))
    assert op.stats == {"hits": 1, "misses": 2}


def test_hybridize_false_returns_to_imperative(capsys):
    class Loud(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            print("running")
            return x * 2

    net = Loud()
    net.hybridize()
    net(nd.ones((1,)))
    net(nd.ones((1,)))
    assert capsys.readouterr().out.count("running") == 1
    net.hybridize(False)
    net(nd.ones((1,)))
    net(nd.ones((1,)))
    assert capsys.readouterr().out.count("running") == 2


def test_misspelled_hybridize_keyword_is_an_error():
    net = build(["dense"])
    with pytest.raises(TypeError, match="static_alloc"):
        net.hybridize(static_aloc=True)


def test_forward_style_without_F_is_traced_too():
    class Scale(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.fc = nn.Dense(3, in_units=2)

        def forward(self, x):
            return self.fc(x) * 3

    net = Scale()
    net.initialize()
    x = nd.array([[1.0, 2.0]])
    expected = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)
    assert net._traces


def test_forward_style_reads_its_parameters_with_data():
    class Scale(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.weight = self.params.get("weight", shape=(1, 2))

        def forward(self, x):
            return x * self.weight.data()

    net = Scale()
    net.initialize(mx.init.Constant(3.0))
    x = nd.array([[1.0, 2.0]])
    net.hybridize()
    with autograd.record():
        out = net(x)
    out.backward()
    np.testing.assert_allclose(out.asnumpy(), [[3.0, 6.0]])
    np.testing.assert_allclose(net.weight.grad().asnumpy(), [[1.0, 2.0]])
    assert "scale0_weight" in [n.name for n in net._cached_op.graph.inputs]


def test_hybridization_report_names_prints_branches_and_constants():
    class Quirky(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.use_relu = True
            self.scale = 2.0

        def hybrid_forward(self, F, x):
            print("tracing")
            if self.use_relu:
                x = F.relu(x)
            return x * self.scale

    net = Quirky()
    net.hybridize()
    with pytest.warns(UserWarning, match="hybridization report"):
        net(nd.ones((2,)))
    report = str(net.hybridization_report())
    assert "[print]" in report and 'print("tracing")' in report
    assert "[branch]" in report and "if self.use_relu:" in report
    assert "[constant]" in report and "self.scale = 2.0" in report
    assert "(self.use_relu = True)" in report  # the branch names the value it was decided on
    assert "self.use_relu = True is frozen" not in report  # ... once, as a branch


SCALE = 3.0


def entries_of(block, x):
    block.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        block(x)
    return [(kind, text) for kind, _, text in block.hybridization_report().entries]


def test_report_finds_globals_closures_subscripts_and_conditional_expressions():
    offset = 0.5

    class Captures(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.cfg = {"k": 4}
            self.flag = False
            self.steps = 2

        def hybrid_forward(self, F, x):
            local = 7.0  # computed here: not captured
            y = x * SCALE + offset * local
            y = y * self.cfg["k"]
            y = F.relu(y) if self.flag else (
                F.sigmoid(y))
            for _ in range(self.steps):
                y = y + 1
            return y

    block = Captures()
    entries = entries_of(block, nd.ones((2,)))
    (where,) = [w for kind, w, _ in block.hybridization_report().entries if kind == "branch"]
    assert where.endswith("`y = F.relu(y) if self.flag else (`")  # a statement's first line
    texts = " | ".join(text for _, text in entries)
    assert "SCALE = 3.0 is frozen" in texts
    assert "offset = 0.5 is frozen" in texts
    assert "self.cfg['k'] = 4 is frozen" in texts
    assert "self.steps = 2 is frozen" in texts
    assert "local" not in texts
    kinds = [kind for kind, _ in entries]
    assert kinds.count("branch") == 1 and kinds.count("loop") == 1
    branch = next(text for kind, text in entries if kind == "branch")
    assert "(self.flag = False)" in branch


def test_report_does_not_flag_a_branch_on_the_training_mode():
    class ModeAware(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            if autograd.is_training():  # one program per mode: not frozen
                return x * 2
            if not autograd.is_training():
                return x * 3
            return x

    block = ModeAware()
    assert entries_of(block, nd.ones((2,))) == []
    assert not block.hybridization_report()
    assert "nothing was dropped or frozen" in str(block.hybridization_report())


def test_batchnorm_running_stats_update_in_both_modes():
    def run(hybrid):
        mx.random.seed(1)
        net = nn.HybridSequential()
        net.add(nn.Dense(4), nn.BatchNorm(), nn.Dense(1))
        net.initialize()
        if hybrid:
            net.hybridize()
        x = nd.random.normal(shape=(8, 3))
        with autograd.record():
            net(x).backward()
        bn = net[1]
        return bn.running_mean.data().asnumpy(), net(x).asnumpy()

    imperative_mean, imperative_out = run(False)
    hybrid_mean, hybrid_out = run(True)
    assert np.abs(imperative_mean).max() > 0
    np.testing.assert_allclose(hybrid_mean, imperative_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hybrid_out, imperative_out, rtol=1e-4, atol=1e-5)


def test_symbol_block_from_outputs_inputs_and_params():
    net = build(["dense_relu"])
    x = nd.random.normal(shape=(2, 3))
    expected = net(x).asnumpy()
    data = mx.sym.var("data")
    block = gluon.SymbolBlock(net(data), data, net.collect_params())
    np.testing.assert_allclose(block(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert list(block.collect_params().keys()) == list(net.collect_params().keys())
    with autograd.record():
        block(x).sum().backward()
    assert np.abs(block.collect_params()["dense0_weight"].grad().asnumpy()).sum() > 0


def test_the_report_warning_is_shown_once_for_the_same_findings():
    import warnings

    class Talky(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            print("tracing")
            return x + 1

    net = Talky()
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        net(nd.ones((1,)))
        with autograd.record():  # training mode: a second trace, same findings
            net(nd.ones((1,)))
    assert sum("hybridization report" in str(w.message) for w in caught) == 1
    assert net.hybridization_report().entries[0][0] == "print"


def test_two_inputs_are_named_data0_and_data1():
    loss_fn = gluon.loss.L2Loss()
    loss_fn.hybridize()
    pred, label = nd.ones((2, 3)), nd.zeros((2, 3))
    np.testing.assert_allclose(loss_fn(pred, label).asnumpy(), [0.5, 0.5])
    assert [n.name for n in loss_fn._cached_op.graph.inputs] == ["data0", "data1"]
    assert repr(loss_fn(mx.sym.var("p"), mx.sym.var("l"))).startswith("<Symbol l2loss0_")


def test_export_after_training_only_saves_the_prediction_graph(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(4), nn.BatchNorm(), nn.Dense(2))
    net.initialize()
    net.hybridize()
    x = nd.random.normal(shape=(6, 3))
    with autograd.record():  # a training call: batch statistics, running stats updated
        net(x).backward()
    path = str(tmp_path / "bn")
    net.export(path)
    again = gluon.SymbolBlock.imports(path + "-symbol.json", ["data"], path + "-0000.params")
    np.testing.assert_allclose(again(x).asnumpy(), net(x).asnumpy(), rtol=1e-5, atol=1e-6)
    keys = nd.load(path + "-0000.params").keys()
    assert "aux:batchnorm0_running_mean" in keys and "arg:batchnorm0_gamma" in keys


def test_tuple_outputs_and_their_gradients():
    class Two(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(3, in_units=2)

        def hybrid_forward(self, F, x):
            y = self.fc(x)
            return y, F.relu(y)

    def grads(net):
        with autograd.record():
            first, second = net(x)
            (first.sum() + second.sum()).backward()
        return [first.asnumpy(), second.asnumpy(), net.fc.weight.grad().asnumpy().copy()]

    x = nd.array([[1.0, -2.0], [0.5, 0.5]])
    net = Two()
    net.initialize()
    expected = grads(net)
    net.hybridize()
    assert isinstance(net(x), list)  # MXNet's hybridized block gives its outputs as a list
    for got, want in zip(grads(net), expected):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_symbol_block_shares_the_parameter_objects():
    net = build(["dense_relu"])
    data = mx.sym.var("data")
    block = gluon.SymbolBlock(net(data), data, net.collect_params())
    for name, param in net.collect_params().items():
        assert block.collect_params()[name] is param
    x = nd.random.normal(shape=(2, 3))
    before = block(x).asnumpy()
    net[0].weight.set_data(net[0].weight.data() * 2)  # a later update to the source net
    after = block(x).asnumpy()
    np.testing.assert_allclose(after, net(x).asnumpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(after, before)


def test_symbol_block_sizes_parameters_the_source_net_has_not_sized_yet():
    net = build(["dense_relu", "dense"])  # deferred: no forward pass yet
    data = mx.sym.var("data")
    block = gluon.SymbolBlock(net(data), data, net.collect_params())
    x = nd.random.normal(shape=(2, 3))
    out = block(x).asnumpy()
    assert net[0].weight.shape == (4, 3)  # the same Parameter, now sized and drawn
    np.testing.assert_allclose(out, net(x).asnumpy(), rtol=1e-5, atol=1e-6)


class _Scale(gluon.HybridBlock):
    """A parameter only a primitive reads (broadcast_mul): no operator can size it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.gamma = self.params.get("gamma", shape=(0,), allow_deferred_init=True)

    def infer_shape(self, x, *args):
        self.gamma.shape = (x.shape[1],)

    def hybrid_forward(self, F, x, gamma):
        return F.broadcast_mul(x, gamma)


def test_symbol_block_sizes_layer_parameters_from_the_data():
    # FullyConnected and BatchNorm size their parameters from the data, as in MXNet
    net = nn.HybridSequential()
    net.add(nn.Dense(4), nn.BatchNorm(), nn.Dense(2))
    net.initialize()
    data = mx.sym.var("data")
    block = gluon.SymbolBlock(net(data), data, net.collect_params())
    out = block(nd.ones((2, 3)))
    assert net[1].gamma.shape == (4,) and net[0].weight.shape == (4, 3)
    np.testing.assert_allclose(out.asnumpy(), net(nd.ones((2, 3))).asnumpy(), rtol=1e-5,
                               atol=1e-6)


def test_symbol_block_says_when_the_graph_cannot_size_a_parameter():
    net = nn.HybridSequential()
    net.add(nn.Dense(4), _Scale(prefix="scale0_"), nn.Dense(2))
    net.initialize()
    data = mx.sym.var("data")
    block = gluon.SymbolBlock(net(data), data, net.collect_params())
    with pytest.raises(mx.errors.DeferredInitializationError,
                       match=r"scale0_gamma.*run the block the graph came from once"):
        block(nd.ones((2, 3)))
    net(nd.ones((2, 3)))  # the fix
    np.testing.assert_allclose(block(nd.ones((2, 3))).asnumpy(), net(nd.ones((2, 3))).asnumpy(),
                               rtol=1e-5, atol=1e-6)


def exported_mlp(tmp_path):
    net = build(["dense_relu"])
    net.hybridize()
    net(nd.ones((1, 3)))
    path = str(tmp_path / "mlp")
    net.export(path)
    return path + "-symbol.json", path + "-0000.params"


def test_imports_with_a_wrong_input_name_names_the_real_one(tmp_path):
    symbol_file, param_file = exported_mlp(tmp_path)
    with pytest.raises(ValueError, match=r"\['x'\] are not variables of .*mlp-symbol.json. "
                                         r"Its variables that are not parameters are \['data'\]"):
        gluon.SymbolBlock.imports(symbol_file, ["x"], param_file)
    with pytest.raises(ValueError, match=r"\['x'\] are not variables of the graph"):
        gluon.SymbolBlock(mx.sym.load(symbol_file), mx.sym.var("x"))


def test_imports_lists_the_arguments_the_params_file_lacks(tmp_path):
    symbol_file, param_file = exported_mlp(tmp_path)
    arrays = nd.load(param_file)
    del arrays["arg:dense1_bias"]
    nd.save(param_file, arrays)
    with pytest.raises(ValueError, match="not one export"):  # the JSON's digest says so
        gluon.SymbolBlock.imports(symbol_file, ["data"], param_file)
    sym.load(symbol_file).save(symbol_file)  # as MXNet writes it: no digest to compare
    with pytest.raises(ValueError, match=r"no values for \['dense1_bias'\]"):
        gluon.SymbolBlock.imports(symbol_file, ["data"], param_file)


def test_new_parameter_values_reach_the_compiled_program():
    """The compiled call keeps the list of its parameters' NDArrays (NOTE [Parameters
    gathered once]); set_data and force_reinit copy into those same NDArrays, so the
    next call computes with the new values."""
    net = build(["dense_relu"])
    x = nd.array(np.random.default_rng(0).normal(size=(2, 3)))
    net.hybridize()
    before = net(x).asnumpy()
    weights = [p for p in net.collect_params().values() if p.name.endswith("weight")]
    kept = [p.data() for p in weights]
    weights[0].set_data(np.full(weights[0].shape, 0.5, np.float32))
    halves = net(x).asnumpy()
    net.initialize(mx.init.One(), force_reinit=True)
    ones = net(x).asnumpy()
    assert all(p.data() is k for p, k in zip(weights, kept))  # one NDArray per Parameter
    hidden = np.maximum(x.asnumpy().sum(axis=1, keepdims=True), 0)  # 4 equal units
    np.testing.assert_allclose(ones, np.repeat(4 * hidden, 2, axis=1), rtol=1e-5)  # bias 0
    assert not np.allclose(before, halves) and not np.allclose(halves, ones)


def test_a_parameter_never_initialised_is_named_at_every_hybridized_call():
    net = nn.Dense(2, in_units=3)
    net.hybridize()
    for _ in range(2):  # the failed first call keeps nothing: the second says it again
        with pytest.raises(RuntimeError, match=r"'dense\d+_weight' has not been initialized"):
            net(nd.ones((1, 3)))
    net.initialize()
    assert net(nd.ones((1, 3))).shape == (1, 2)


def test_a_hybridized_block_refuses_anything_but_ndarrays_or_symbols():


    net = build(["dense_relu"])
    net.hybridize()
    net(nd.ones((1, 3)))
    with pytest.raises(BlockInputError, match=r"called with \(ndarray\).*nd\.array\(x\)"):
        net(np.ones((1, 3)))
    with pytest.raises(BlockInputError, match="no input"):
        net()
    assert isinstance(net(mx.sym.var("data")), mx.sym.Symbol)


class _Nested(nn.HybridBlock):
    """Takes a list of states and returns nested lists, as MXNet's recurrent blocks do."""

    def hybrid_forward(self, F, x, states):
        return [x + states[0]], [states[0] * 2, [x - states[1]]]


@pytest.mark.parametrize("hybridized", [False, True])
def test_a_block_takes_lists_and_returns_nested_lists(hybridized):
    """MXNet flattens list inputs into the program and gives the outputs back in the
    structure hybrid_forward returned, as lists."""
    net = _Nested()
    if hybridized:
        net.hybridize()
    x, states = nd.array([1.0, 2.0]), [nd.array([3.0, 4.0]), nd.array([0.5, 0.5])]
    for _ in range(2):  # the compiled call, and the cached one
        out, (doubled, [diff]) = net(x, states)
    assert type(out) is list and len(out) == 1
    np.testing.assert_array_equal(out[0].asnumpy(), [4.0, 6.0])
    np.testing.assert_array_equal(doubled.asnumpy(), [6.0, 8.0])
    np.testing.assert_array_equal(diff.asnumpy(), [0.5, 1.5])
    if hybridized:
        with pytest.raises(BlockInputError, match="nested as"):
            net(x, states[0])


def test_a_hybridized_block_may_leave_an_input_unread():
    class SecondOnly(nn.HybridBlock):
        def hybrid_forward(self, F, unused, x):
            return x * 2

    net = SecondOnly()
    net.hybridize()
    np.testing.assert_array_equal(net(nd.ones((2,)), nd.array([1.0, 3.0])).asnumpy(), [2, 6])
