"""Every teaching error: its class, its built-in base, and a message with what/where/fix."""

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, errors, gluon, nd
from hybridlab.gluon import nn


def traced(body):
    """A hybridized one-input block whose hybrid_forward is ``body(F, x)``."""

    class Body(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            return body(F, x)

    net = Body()
    net.hybridize()
    return net


def run(body):
    traced(body)(nd.ones((2, 3)))


def branch(F, x):
    if x:  # user line: branch
        return x
    return -x


def while_loop(F, x):
    while x > 0:  # user line: while
        x = x - 1
    return x


def reads_value(F, x):
    return x * float(x.asnumpy().sum())  # user line: asnumpy


def reads_scalar(F, x):
    return x * x.sum().asscalar()  # user line: asscalar


def reads_shape(F, x):
    return x.reshape((x.shape[0], -1))  # user line: shape


def reads_context(F, x):
    return x * 0 if x.context else x  # user line: context


def reads_dtype(F, x):
    return F.zeros((2,), dtype=x.dtype)  # user line: dtype


def waits(F, x):
    x.wait_to_read()  # user line: wait_to_read
    return x


def converts_to_float(F, x):
    return x * float(x)  # user line: float


def converts_to_int(F, x):
    return x * int(x.sum())  # user line: int


def asks_bool(F, x):
    return x * bool(x)  # user line: bool


def assigns_one_item(F, x):
    x[0] = 0  # user line: setitem 0
    return x


OUTSIDE = nd.ones((2, 3))


def adds_an_outside_ndarray(F, x):
    return x + OUTSIDE  # user line: Symbol + NDArray


def adds_in_place(F, x):
    x += 1  # user line: iadd
    return x


def assigns_items(F, x):
    x[:] = 2  # user line: setitem
    return x


def indexes(F, x):
    return x[0:1]  # user line: getitem


def takes_len(F, x):
    return x * len(x)  # user line: len


def makes_array(F, x):
    return x + nd.array([1.0, 2.0, 3.0])  # user line: nd.array


CASES = [
    (branch, errors.SymbolBoolError, TypeError, "if x:", "F.where"),
    (asks_bool, errors.SymbolBoolError, TypeError, "bool(x)", "F.where"),
    (while_loop, errors.SymbolBoolError, TypeError, "while x > 0:", "F.contrib.while_loop"),
    (reads_value, errors.SymbolValueError, AttributeError, "x.asnumpy()", "hybridize(False)"),
    (reads_scalar, errors.SymbolValueError, AttributeError, "asscalar()", "hybridize(False)"),
    (reads_shape, errors.SymbolShapeError, AttributeError, "x.shape[0]", "static_shape=True"),
    pytest.param(reads_scalar, errors.SymbolValueError, AttributeError, "asscalar()",
                 "asscalar() on <Symbol", id="names_asscalar"),
    pytest.param(waits, errors.SymbolValueError, AttributeError, "x.wait_to_read()",
                 "wait_to_read() on <Symbol", id="waits"),
    pytest.param(converts_to_float, errors.SymbolNumberError, TypeError, "float(x)",
                 "F.where", id="converts_to_float"),
    pytest.param(converts_to_int, errors.SymbolNumberError, TypeError, "int(x.sum())",
                 "hybridize(False)", id="converts_to_int"),
    pytest.param(reads_context, errors.SymbolShapeError, AttributeError, "x.context",
                 "F.zeros_like(x)", id="context_fix"),
    pytest.param(reads_dtype, errors.SymbolShapeError, AttributeError, "x.dtype",
                 "static_shape=True) does not help", id="dtype_fix"),
    (reads_dtype, errors.SymbolShapeError, AttributeError, "x.dtype", "F.*_like"),
    (adds_in_place, errors.SymbolInplaceError, TypeError, "x += 1", "x = x + y"),
    (assigns_items, errors.SymbolInplaceError, TypeError, "x[:] = 2", "F.where"),
    (assigns_one_item, errors.SymbolInplaceError, TypeError, "x[0] = 0", "x = x + y"),
    (indexes, errors.SymbolIndexError, TypeError, "x[0:1]", "F.slice_axis"),
    (takes_len, errors.SymbolIndexError, TypeError, "len(x)", "F.slice_axis"),
    (makes_array, errors.ArrayInTraceError, TypeError, "nd.array([1.0, 2.0, 3.0])", "F.ones"),
    pytest.param(adds_an_outside_ndarray, errors.ArrayInTraceError, TypeError, "x + OUTSIDE",
                 "NDArray", id="adds_an_outside_ndarray"),
]


@pytest.mark.parametrize("body, error, builtin, line, fix", CASES,
                         ids=[getattr(case, "id", None) or case[0].__name__ for case in CASES])
def test_teaching_error_names_block_line_and_fix(body, error, builtin, line, fix):
    with pytest.raises(error) as caught:
        run(body)
    assert isinstance(caught.value, builtin)
    message = str(caught.value)
    assert "body0" in message  # the block
    assert f"test_errors.py:{body.__code__.co_firstlineno + 1}" in message  # the user line
    assert line in message
    assert fix in message


def test_the_same_bodies_work_imperatively():
    for body in (branch, reads_value, reads_shape, adds_in_place, indexes, takes_len):
        net = traced(body)
        net.hybridize(False)
        net(nd.ones((1, 1)))


def test_shape_is_available_under_static_shape():
    net = traced(reads_shape)
    net.hybridize(static_shape=True)
    assert net(nd.ones((2, 3))).shape == (2, 3)


def test_non_hybrid_child_inside_a_hybrid_block():
    class Child(nn.Block):
        def forward(self, x):
            return x

    class Parent(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.child = Child()  # user line: non-hybrid child

    with pytest.raises(errors.NonHybridChildError, match="make Child a HybridBlock") as caught:
        Parent()
    assert isinstance(caught.value, ValueError)
    assert "self.child = Child()" in str(caught.value)


def test_misspelled_hybridize_flag_suggests_the_right_one():
    with pytest.raises(TypeError, match="did you mean 'static_shape'"):
        nn.Dense(2).hybridize(static_shap=True)


def test_deferred_parameter_error_says_how_to_fix():
    net = nn.Dense(3)
    net.initialize()
    with pytest.raises(errors.DeferredInitializationError, match="run one forward pass"):
        net.weight.data()


# -- bad input: a clear error at the call, not a crash deep inside -----------------------


@pytest.mark.parametrize("result", [3.0, [1, 2]], ids=["number", "list"])
def test_hybrid_forward_returning_a_python_value(result):
    with pytest.raises(errors.TraceOutputError, match=r"in block 'body0': Body.hybrid_forward "
                                                      r"returned .* F.ones_like\(x\) \* 3.0"):
        run(lambda F, x: result if isinstance(result, float) else [x, *result])


@pytest.mark.parametrize("hybrid", [False, True])
@pytest.mark.parametrize("args, kinds, fix", [
    ((np.ones((2, 3), "float32"),), r"\(ndarray\)", r"net\(nd.array\(x\)\)"),
    (([[1.0, 2.0, 3.0]],), r"\(list\)", r"net\(nd.array\(x\)\)"),
    ((), r"\(no input\)", r"pass the input: net\(x\)"),
    ((nd.ones((2, 3)), mx.sym.var("label")), r"\(NDArray, Symbol\)", "all NDArrays"),
], ids=["numpy", "list", "nothing", "mixed"])
def test_calling_a_block_with_something_else_than_arrays(hybrid, args, kinds, fix):
    net = nn.HybridSequential()
    net.add(nn.Dense(2))
    net.initialize()
    net.hybridize(hybrid)
    with pytest.raises(ValueError, match=rf"'hybridsequential0' was called with {kinds}.*{fix}"):
        net(*args)
    with pytest.raises(errors.BlockInputError):
        net(*args)


def test_a_parameter_assigned_as_an_attribute_is_registered():
    class Scaled(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.w = gluon.Parameter("w", shape=(3,))  # not made through self.params.get

        def hybrid_forward(self, F, x, w):
            return F.broadcast_mul(x, w)

    net = Scaled()
    assert list(net.collect_params()) == ["w"]
    net.initialize(mx.init.Constant(2.0))
    x = nd.ones((2, 3))
    expected = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_array_equal(net(x).asnumpy(), expected)
    np.testing.assert_array_equal(expected, np.full((2, 3), 2.0))


@pytest.mark.parametrize("flags", [{"active": "yes"}, {"static_alloc": "no"},
                                   {"static_shape": 1}])
def test_hybridize_flags_must_be_booleans(flags):
    key, value = next(iter(flags.items()))
    with pytest.raises(TypeError, match=f"{key} must be True or False, got {value!r}"):
        nn.Dense(2).hybridize(**flags)


def test_dataloader_batch_size_must_be_positive():
    dataset = gluon.data.ArrayDataset(np.ones(4))
    for bad in (0, -1, 2.5, "8"):
        with pytest.raises(ValueError, match=f"batch_size must be a positive integer, "
                                             f"got {bad!r}"):
            gluon.data.DataLoader(dataset, batch_size=bad)


@pytest.mark.parametrize("make, text", [
    (lambda: mx.init.Uniform("a"), r"mx.init.Uniform\(scale\) must be a number, got 'a'"),
    (lambda: mx.init.Normal(None), r"mx.init.Normal\(sigma\) must be a number, got None"),
    (lambda: mx.init.Constant("1"), r"mx.init.Constant\(value\) must be a number"),
    (lambda: mx.init.Xavier(magnitude="3"), r"mx.init.Xavier\(magnitude\) must be a number"),
])
def test_initializer_arguments_must_be_numbers(make, text):
    with pytest.raises(TypeError, match=text):
        make()


def test_trainer_hyperparameters_must_be_numbers():
    net = nn.Dense(2, in_units=2)
    net.initialize()
    with pytest.raises(TypeError, match=r"sgd learning_rate must be a number, got '0.1' \(str\)"):
        gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": "0.1"})
    trainer = gluon.Trainer(net.collect_params(), "adam")
    with pytest.raises(TypeError, match="learning_rate must be a number, got None"):
        trainer.set_learning_rate(None)
    with pytest.raises(ValueError, match="must be positive, got 0"):
        trainer.step(0)


def reads_grad(F, x):
    return x * x.grad  # user line: grad


def misspells(F, x):
    return x.resahpe((0, -1))  # user line: typo


def test_an_ndarray_only_attribute_teaches_but_a_typo_stays_a_plain_attribute_error():
    with pytest.raises(errors.SymbolShapeError, match=r"(?s)test_errors.py:\d+ `return x \* x.grad"
                                                      r".*no grad.*after the call"):
        run(reads_grad)
    with pytest.raises(AttributeError, match="resahpe") as caught:
        run(misspells)
    assert not isinstance(caught.value, errors.HybridizeError)


def test_each_symbol_attribute_has_its_own_fix():
    shape = errors.attribute_message("shape", "<Symbol data>")
    assert shape.startswith(".shape of <Symbol data>") and "static_shape=True" in shape
    assert "does not help" in errors.attribute_message("dtype", "<Symbol data>")
    assert "F.zeros_like(x)" in errors.attribute_message("context", "<Symbol data>")
    assert "asscalar() on <Symbol x>" in errors.value_message("asscalar()", "<Symbol x>")


def test_gradient_of_a_gradient_through_a_hybridized_block_says_how_to_get_it():
    """The compiled backward is one engine op the tape cannot differentiate: refusing beats
    a later 'no recorded operation' error (or a silent zero); the imperative block works."""
    net = nn.HybridSequential()
    net.add(nn.Dense(3, activation="tanh", in_units=4), nn.Dense(1))
    net.initialize()
    x = nd.random.normal(shape=(2, 4))
    x.attach_grad()

    def gradient_norm_gradient():
        with autograd.record():
            (g,) = autograd.grad(net(x).sum(), [x], create_graph=True)
            z = (g * g).sum()
        z.backward()
        return x.grad.asnumpy().copy()

    imperative = gradient_norm_gradient()
    assert np.abs(imperative).max() > 0
    net.hybridize()
    with pytest.raises(errors.MissingGradientError, match=r"create_graph=True.*hybridize\(False\)"):
        gradient_norm_gradient()
    with autograd.record():  # first-order gradients through the compiled block still work
        loss = net(x).sum()
    loss.backward()
    net.hybridize(False)
    np.testing.assert_allclose(gradient_norm_gradient(), imperative, rtol=1e-5)
