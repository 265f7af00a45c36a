"""autograd: gradients from the registry's rules checked against central differences,
grad_req write/add/null, autograd.grad, retain_graph, the mode flags and their errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import autograd, engine, nd
from hybridlab.errors import (
    GraphReleasedError,
    MissingGradientError,
    MXNetError,
    NotRecordedError,
)

pytestmark = pytest.mark.timeout(120)  # pytest-timeout: a deadlocked wait fails fast


def _numeric_grad(fn, values: list[np.ndarray], index: int, eps: float = 1e-6) -> np.ndarray:
    """Central differences of sum(fn(*inputs)) with respect to input ``index`` (float64)."""
    grad = np.zeros_like(values[index])
    for position in np.ndindex(values[index].shape):
        total = []
        for sign in (1, -1):
            shifted = [v.copy() for v in values]
            shifted[index][position] += sign * eps
            total.append(fn(*[nd.array(v, dtype="float64") for v in shifted]).sum().asscalar())
        grad[position] = (total[0] - total[1]) / (2 * eps)
    return grad


def _assert_grads_match_central_differences(fn, values: list[np.ndarray], rtol: float) -> None:
    """Record ``fn`` on float64 copies of ``values``, backward, compare every input's grad."""
    arrays = [nd.array(v, dtype="float64") for v in values]
    for x in arrays:
        x.attach_grad()
    with autograd.record():
        y = fn(*arrays)
    y.backward()
    for index, x in enumerate(arrays):
        np.testing.assert_allclose(x.grad.asnumpy(), _numeric_grad(fn, values, index),
                                   rtol=rtol, atol=1e-6)


COMPOSITIONS = {
    "poly": (lambda x: x * x * x + 3 * x - 1, [(2, 3)]),
    "broadcast": (lambda x, y: (x + y) * x - y / 2, [(2, 3), (1, 3)]),
    "relu_exp": (lambda x, y: nd.relu(x) * nd.exp(y), [(3,), (3,)]),
    "tanh_sigmoid": (lambda x: nd.tanh(x) + nd.sigmoid(x) * x, [(4,)]),
    "reduce": (lambda x, y: nd.sum(x * y, axis=1, keepdims=True) * y, [(2, 3), (2, 3)]),
    "reuse": (lambda x: (x * x) + (x * x), [(3,)]),
    "softmax_log": (lambda x: nd.log_softmax(x) * nd.softmax(x), [(2, 4)]),
    "dot_index": (lambda x, y: nd.dot(x, y)[1:, 0] + x[0], [(3, 2), (2, 2)]),
    "division": (lambda x, y: x / (y * y + 1), [(2, 2), (2, 2)]),
}


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_gradients_match_central_differences(name):
    fn, shapes = COMPOSITIONS[name]
    rng = np.random.default_rng(0)
    values = [rng.normal(size=shape) + 0.5 for shape in shapes]
    _assert_grads_match_central_differences(fn, values, rtol=1e-5)


def test_gradients_are_the_same_on_every_engine():
    results = []
    for name in ["NaiveEngine", "ThreadedEngine", "StepEngine"]:
        with engine.engine_scope(name):
            x = nd.array([[1.0, -2.0, 3.0]])
            x.attach_grad()
            with autograd.record():
                y = (nd.relu(x) * x + nd.exp(x)).sum()
            y.backward()
            results.append(x.grad.asnumpy())
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


def test_grad_req_add_accumulates_and_null_ignores():
    x, z = nd.array([1.0, 2.0]), nd.array([3.0])
    x.attach_grad(grad_req="add")
    z.attach_grad(grad_req="null")
    for _ in range(3):
        with autograd.record():
            y = x * x * z
        y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 3 * 2 * np.array([1.0, 2.0]) * 3)
    np.testing.assert_array_equal(z.grad.asnumpy(), [0.0])
    x.attach_grad()  # back to 'write': a fresh zero buffer, then overwritten
    with autograd.record():
        y = x * 2
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 2.0])
    with pytest.raises(ValueError, match="grad_req must be one of"):
        x.attach_grad(grad_req="sum")


def test_head_gradient_and_multiple_heads():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = x * 3
        z = x * x
    y.backward(nd.array([1.0, 10.0]), retain_graph=True)
    np.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 30.0])
    autograd.backward([y, z], [None, nd.array([1.0, 1.0])])
    np.testing.assert_array_equal(x.grad.asnumpy(), [5.0, 7.0])
    with autograd.record():
        y = x * 3
    y.backward(head_grad=nd.array([2.0, 0.0]), retain_graph=True)  # the spelling
    np.testing.assert_array_equal(x.grad.asnumpy(), [6.0, 0.0])
    y.backward(out_grad=nd.array([0.0, 1.0]), retain_graph=True)  # MXNet's spelling
    np.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 3.0])
    with pytest.raises(TypeError, match="give the head gradient once"):
        y.backward(nd.ones((2,)), head_grad=nd.ones((2,)))


def test_head_gradient_of_the_wrong_shape_blames_the_caller():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = nd.tanh(x)
    message = r"head gradient of shape \(3,\) was given for a head of shape \(2,\).*ones_like"
    with pytest.raises(ValueError, match=message):
        y.backward(nd.ones((3,)), retain_graph=True)
    with pytest.raises(ValueError, match=message):
        autograd.grad(y, x, head_grads=nd.ones((3,)), retain_graph=True)
    y.backward(nd.ones((2,)))  # the right shape still works after the refusal
    np.testing.assert_allclose(x.grad.asnumpy(), 1 - np.tanh([1.0, 2.0]) ** 2, rtol=1e-6)


def test_autograd_grad_leaves_dot_grad_alone():
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    (dx,) = autograd.grad(y, x)
    np.testing.assert_array_equal(dx.asnumpy(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0, 0.0])
    with autograd.record():
        hidden = x * 2
        y = (hidden * hidden).sum()
    dx, dh = autograd.grad([y], [x, hidden])  # an intermediate array works as a variable
    np.testing.assert_array_equal(dh.asnumpy(), [4.0, 8.0, 12.0])
    np.testing.assert_array_equal(dx.asnumpy(), [8.0, 16.0, 24.0])


def test_second_order_with_create_graph():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = x * x * x
        (dx,) = autograd.grad(y, x, create_graph=True)
    np.testing.assert_array_equal(dx.asnumpy(), [3.0, 12.0])
    dx.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [6.0, 12.0])


_X = np.arange(12.0).reshape(4, 3) - 5
_SELECTIONS = {  # f(x) and the mask of the elements of x it selects (once each)
    "slice": (lambda x: x[1:3], np.isin(np.arange(4), [1, 2])[:, None]),
    "slice_axis": (lambda x: nd.slice_axis(x, axis=1, begin=1, end=None),
                   np.arange(3)[None, :] > 0),
    "pick": (lambda x: nd.pick(x, nd.array([2, 0, 1, 2])), np.eye(3)[[2, 0, 1, 2]] > 0),
    "take": (lambda x: nd.take(x, nd.array([3, 0])), np.isin(np.arange(4), [3, 0])[:, None]),
    "concat": (lambda x: nd.concat(nd.ones((1, 3)), x, dim=0), np.ones((4, 3), bool)),
}


@pytest.mark.parametrize("name", sorted(_SELECTIONS))
def test_second_order_through_a_selection_backward(name):
    """d/dx sum((dL/dx)^2) for L = sum(f(x)^2): dL/dx = 2x where f selects, so the answer
    is 8x there. The backward ops (``_slice_grad``, ``_pick_grad``, ``_take_grad``,
    ``_concat_part``) are linear, so their own gradient rules give it (never zeros)."""
    select, mask = _SELECTIONS[name]
    x = nd.array(_X, dtype="float64")
    x.attach_grad()
    with autograd.record():
        (first,) = autograd.grad((select(x) ** 2).sum(), x, create_graph=True)
        penalty = (first * first).sum()
    penalty.backward()
    np.testing.assert_allclose(first.asnumpy(), 2 * _X * np.broadcast_to(mask, _X.shape))
    np.testing.assert_allclose(x.grad.asnumpy(), 8 * _X * np.broadcast_to(mask, _X.shape))


def test_second_order_through_fully_connected_matches_the_formula():
    """L = sum(x W^T + b): dL/dx has every row s = column sums of W, so
    P = sum((dL/dx)^2) = n * sum(s^2) and dP/dW[i, j] = 2 n s[j]."""
    x, w, b = (nd.array(v, dtype="float64") for v in (_X, _X[:2] / 3, np.ones(2)))
    for array in (x, w):
        array.attach_grad()
    with autograd.record():
        (first,) = autograd.grad(nd.FullyConnected(x, w, b, num_hidden=2).sum(), x,
                                 create_graph=True)
        penalty = (first * first).sum()
    penalty.backward()
    columns = (_X[:2] / 3).sum(axis=0)
    np.testing.assert_allclose(w.grad.asnumpy(), np.tile(2 * 4 * columns, (2, 1)))


def test_second_order_through_a_missing_rule_is_an_error_not_zeros():
    """dot's backward ops have no gradient rule (``OpDef.grad_missing``): differentiating
    a gradient through them raises, where it used to leave zeros in ``w.grad``."""
    x, w = nd.array(_X, dtype="float64"), nd.array(_X.T[:, :2], dtype="float64")
    for array in (x, w):
        array.attach_grad()
    with autograd.record():
        (first,) = autograd.grad(nd.dot(x, w).sum(), x, create_graph=True)
        penalty = (first * first).sum()
    with pytest.raises(MissingGradientError, match=r"cannot differentiate '_dot_grad_lhs': "
                                                   r"dot's backward has no second order"):
        penalty.backward()
    assert issubclass(MissingGradientError, MXNetError)


def test_second_backward_needs_retain_graph():
    x = nd.array([1.0])
    x.attach_grad()
    with autograd.record():
        y = x * x
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [2.0])
    with pytest.raises(GraphReleasedError, match="retain_graph=True"):
        y.backward()
    assert issubclass(GraphReleasedError, MXNetError)


def test_backward_without_record_is_a_clear_error():
    x = nd.array([1.0])
    x.attach_grad()
    y = x * 2  # not recorded
    with pytest.raises(NotRecordedError, match=r"autograd.record\(\)"):
        y.backward()
    with pytest.raises(NotRecordedError, match="attach_grad"):
        autograd.grad(x * 1, nd.array([1.0]))


def test_mode_flags_and_scopes():
    assert not autograd.is_recording() and not autograd.is_training()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
        with autograd.predict_mode():
            assert autograd.is_recording() and not autograd.is_training()
    with autograd.record(train_mode=False):
        assert not autograd.is_training()
    with autograd.train_mode():
        assert autograd.is_training() and not autograd.is_recording()
    assert autograd.set_recording(True) is False
    assert autograd.set_recording(False) is True
    assert autograd.set_training(True) is False
    assert autograd.set_training(False) is True


def test_paused_ops_are_constants():
    x = nd.array([2.0])
    x.attach_grad()
    with autograd.record():
        with autograd.pause():
            scale = x * 10  # not on the tape: treated as a constant
        y = x * scale
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [20.0])


def test_dropout_follows_training_flag_at_push_time():
    x = nd.ones((1000,))
    with autograd.record():
        dropped = nd.Dropout(x, p=0.5)
    kept = nd.Dropout(x, p=0.5)
    values = dropped.asnumpy()
    assert set(np.unique(values)) == {0.0, 2.0}
    np.testing.assert_array_equal(kept.asnumpy(), x.asnumpy())


_SMOOTH_UNARY = {
    "tanh": nd.tanh, "sigmoid": nd.sigmoid, "square": nd.square,
    "scale": lambda x: x * 0.5 - 1, "sin": nd.sin, "softmax": nd.softmax,
}
_SMOOTH_BINARY = {"mul": lambda x, y: x * y, "add": lambda x, y: x + y,
                  "sub": lambda x, y: y - x}


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(_SMOOTH_UNARY) + sorted(_SMOOTH_BINARY)),
                          st.integers(0, 9)), min_size=1, max_size=6),
       st.integers(0, 1000))
def test_random_smooth_programs_match_central_differences(program, seed):
    """Each step applies an op to the last value (and an earlier one for binary ops)."""
    def run(x, w):
        values = [x, w]
        for name, pick in program:
            last, other = values[-1], values[pick % len(values)]
            if name in _SMOOTH_UNARY:
                values.append(_SMOOTH_UNARY[name](last))
            else:
                values.append(_SMOOTH_BINARY[name](last, other))
        return values[-1]

    rng = np.random.default_rng(seed)
    inputs = [rng.normal(size=(2, 3)) * 0.5, rng.normal(size=(1, 3)) * 0.5]
    _assert_grads_match_central_differences(run, inputs, rtol=1e-4)


@pytest.mark.parametrize("module", ["engine", "autograd", "random", "ndarray"])
def test_foundation_modules_import_nothing_above_them(module):
    """ARCHITECTURE.md: no module imports one above it (graph, symbol, gluon, viz...)."""
    import ast
    import pathlib

    import hybridlab

    source = pathlib.Path(hybridlab.__file__).with_name(f"{module}.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
    above = ("symbol", "graph", "gluon", "viz", "profiler", "contrib", "initializer")
    assert not [m for m in imported if m.split(".")[:2] in [["hybridlab", a] for a in above]]


def test_an_integer_modulo_has_a_zero_gradient_and_a_cast_passes_gradients():
    a, b = nd.array([5.0, 7.0]), nd.array([3.0, 2.0])
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        c = a.astype("int32") % b.astype("int32") + a * 2
    c.backward()
    np.testing.assert_array_equal(a.grad.asnumpy(), [2.0, 2.0])
    np.testing.assert_array_equal(b.grad.asnumpy(), [0.0, 0.0])
    with autograd.record():
        d = a.astype("int32") * 3  # a cast to int32 still passes its gradient back (MXNet)
    d.backward()
    np.testing.assert_array_equal(a.grad.asnumpy(), [3.0, 3.0])


def test_function_subclass_records_its_own_backward():
    class Scale(autograd.Function):
        def forward(self, x, y):
            self.save_for_backward(x, y)
            return x * y, x + y

        def backward(self, d_product, d_sum):
            x, y = self.saved_tensors
            return d_product * y * 10 + d_sum, d_product * x + d_sum  # x's scaled on purpose

    x, y = nd.array([1.0, 2.0]), nd.array([3.0, 4.0])
    x.attach_grad()
    y.attach_grad()
    with autograd.record():
        product, total = Scale()(x, y)
    autograd.backward([product, total])
    np.testing.assert_array_equal(x.grad.asnumpy(), [31.0, 41.0])
    np.testing.assert_array_equal(y.grad.asnumpy(), [2.0, 3.0])


def test_get_symbol_turns_the_tape_into_a_graph():
    x, z = nd.ones((1,)), nd.ones((1,))
    x.attach_grad()
    z.attach_grad()
    with autograd.record():
        y = x * x + 2 * z - 1
    symbol = autograd.get_symbol(y)
    assert symbol.list_arguments() == ["var0", "var1"]
    result = symbol.eval(var0=nd.array([3.0]), var1=nd.array([2.0]))[0]
    assert result.asscalar() == 12.0


def test_fresh_grad_says_whether_a_backward_wrote_the_gradient():
    x, y = nd.ones((2,)), nd.ones((2,))
    autograd.mark_variables([x, y], [nd.zeros((2,)), nd.zeros((2,))])
    assert not x._fresh_grad
    with autograd.record():
        out = (x + 2).detach() + y
    out.backward()
    assert y._fresh_grad and not x._fresh_grad


def test_star_import_gives_mxnets_autograd_names():
    names: dict = {}
    exec("from hybridlab.autograd import *", names)
    assert {"NDArray", "Function", "get_symbol", "record", "mark_variables"} <= set(names)


def test_float32_exp_is_correctly_rounded():
    assert nd.exp(nd.ones((3,))).asnumpy()[0] == np.float32(np.exp(1.0))


def test_an_array_freed_by_a_backward_is_a_constant_of_the_next_graph():
    x = nd.array([3.0])
    x.attach_grad()
    with autograd.record():
        y = x * x
        y.backward()  # frees y's graph
        z = y * x  # y is a constant here (MXNet cleared its history): dz/dx = y
    z.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [9.0])


def test_grad_of_one_variable_is_a_list_as_in_mxnet():
    """MXNet 1.9.1 returns a list even for one NDArray, so ``grad(y, x)[0]`` is the whole
    gradient (it used to be its first row)."""
    x = nd.array([[1.0, 2.0], [3.0, 4.0]])
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    result = autograd.grad(y, x)
    assert isinstance(result, list) and len(result) == 1
    np.testing.assert_array_equal(result[0].asnumpy(), [[2.0, 4.0], [6.0, 8.0]])


@pytest.mark.parametrize("op", ["relu", "radians"])
def test_second_derivative_of_a_piecewise_linear_op_is_zeros(op):
    """relu's and radians' first derivatives are constant in x (almost everywhere):
    differentiating them again gives zeros, as MXNet's, not an error."""
    x = nd.array([0.5, -1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        (first,) = autograd.grad(getattr(nd, op)(x), x, head_grads=nd.array([1.0, 2.0, 3.0]),
                                 create_graph=True)
    first.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0, 0.0])
    expected = [1.0, 0.0, 3.0] if op == "relu" else np.array([1.0, 2.0, 3.0]) * np.pi / 180
    np.testing.assert_allclose(first.asnumpy(), expected, rtol=1e-6)


def test_second_derivative_of_arcsinh_is_the_true_one():
    """d2/dx2 arcsinh(x) = -x / (1 + x^2)^(3/2). MXNet 1.9.1's rule drops the minus sign
    (README: deviations); hybridlab keeps the derivative a student can check by hand."""
    values = np.array([0.5, -1.0, 2.0])
    x = nd.array(values, dtype="float64")
    x.attach_grad()
    with autograd.record():
        (first,) = autograd.grad(nd.arcsinh(x), x, create_graph=True)
    first.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), -values / (1 + values**2) ** 1.5)
