"""Symbols: composition through the registry, listing, shapes, teaching errors, running."""

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import errors, sym
from hybridlab.graph import ir
from hybridlab.name import NameManager, Prefix
from hybridlab.ops import registry

needs_fc = pytest.mark.skipif("FullyConnected" not in registry._BY_NAME,
                              reason="FullyConnected is not registered yet")


@pytest.fixture(autouse=True)
def fresh_names():
    with NameManager():
        yield


def test_repr_and_str_match_mxnet():
    x = sym.var("data")
    hidden = sym.relu(x)
    group = sym.Group([x, hidden])
    assert repr(x) == str(x) == "<Symbol data>"
    assert repr(hidden) == "<Symbol relu0>"
    assert repr(group) == str(group) == "<Symbol group [data, relu0]>"
    assert group.name is None and hidden.name == "relu0"


def test_seed_trace_prints_block_prefixed_names():
    x = sym.var("data")
    with Prefix("hybridnet0_"):
        hidden = sym.relu(sym.broadcast_add(x, sym.var("bias")))
        out = sym.relu(hidden)
    assert [repr(x), repr(hidden), repr(out)] == [
        "<Symbol data>", "<Symbol hybridnet0_relu0>", "<Symbol hybridnet0_relu1>"]


def test_arithmetic_is_mxnets_elementwise_and_scalar_ops():
    a, b = sym.var("a", shape=(2, 1)), sym.var("b", shape=(1, 3))
    with pytest.raises(errors.ShapeError, match=r"use F.broadcast_add\(lhs, rhs\)"):
        a + b  # MXNet's _Plus needs one shape (declared shapes are checked at once)
    assert (sym.var("c") + sym.var("d")).to_graph().nodes[-1].op == "elemwise_add"
    total = sym.broadcast_add(a, b)
    assert total.infer_shape()[1] == [(2, 3)]
    assert (a * 2).to_graph().nodes[-1].op == "_mul_scalar"
    assert (2 - a).to_graph().nodes[-1].op == "_rminus_scalar"
    assert (-a).to_graph().nodes[-1].attr_dict == {"scalar": -1.0}


def test_methods_mirror_the_namespace():
    x = sym.var("x", shape=(2, 3))
    assert x.relu().to_graph().nodes[-1].op == "relu"
    assert x.reshape((0, -1)).infer_shape()[1] == [(2, 3)]
    assert x.sum(axis=1).infer_shape()[1] == [(2,)]
    assert sym.Symbol.relu.__doc__ == sym.relu.__doc__
    assert x.astype("float16").infer_type()[1] == [np.float16]
    assert abs(x).to_graph().nodes[-1].op == "abs"


def test_list_arguments_follow_depth_first_input_order():
    a, b, c = sym.var("a"), sym.var("b"), sym.var("c")
    out = sym.relu(c * (b + a)) + a
    assert out.list_arguments() == ["c", "b", "a"]
    assert out.list_inputs() == ["c", "b", "a"]
    assert out.list_outputs() == [f"{out.name}_output"]
    assert sym.var("z").list_outputs() == ["z"]


def test_get_internals_and_indexing_a_group():
    x = sym.var("data")
    hidden = sym.relu(x, name="h")
    out = sym.relu(hidden * 2, name="out")
    internals = out.get_internals()
    assert internals.list_outputs() == ["data", "h_output", "_mulscalar0_output", "out_output"]
    picked = internals["h_output"]
    assert picked.name == "h" and picked.list_arguments() == ["data"]
    assert internals[0].name == "data" and internals[np.int64(-1)].name == "out"
    assert [s.name for s in internals] == ["data", "h", "_mulscalar0", "out"]
    assert len(internals) == 4
    with pytest.raises(ValueError, match="no output 'nope'"):
        internals["nope"]


def test_indexing_a_single_symbol_while_tracing_is_refused_with_a_fix():
    x = sym.var("data")
    with sym.traced():  # what gluon enters while it traces hybrid_forward
        with pytest.raises(errors.SymbolIndexError, match="slice_axis"):
            x[1]
        with pytest.raises(errors.SymbolIndexError, match="slice_axis"):
            x[0:1]
        with pytest.raises(errors.SymbolIndexError, match="len"):
            len(x)
        with pytest.raises(errors.SymbolIndexError, match="number of outputs"):
            list(x)


def test_outside_a_trace_a_symbol_indexes_its_outputs_as_mxnet():
    x = sym.relu(sym.var("data"))
    assert x[0].name == x.name and len(x) == 1 and [s.name for s in x] == [x.name]
    with pytest.raises(IndexError, match="1 outputs, so index 1 is out of range"):
        x[1]
    with pytest.raises(errors.SymbolIndexError, match="slice_axis"):
        x[0:1]  # a slice is an array's indexing, never MXNet's output index


def test_a_traced_hybrid_forward_still_meets_the_teaching_error():
    from hybridlab import nd
    from hybridlab.gluon import nn

    class SecondRow(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            return x[1]

    block = SecondRow()
    block.hybridize()
    with pytest.raises(errors.SymbolIndexError, match="in block"):
        block(nd.ones((2, 3)))


def test_output_zero_of_a_traced_symbol_is_itself_as_in_mxnet_with_a_warning():
    """MXNet reads ``x[0]`` on a Symbol as its output 0: the whole array. Code written for
    MXNet relies on it (a loop's single final state), so it works -- and warns, because
    imperatively the same line is row 0: the hybridized block computes something else."""
    from hybridlab import nd
    from hybridlab.gluon import nn

    class FirstRow(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            return x[0] * 1

    block = FirstRow()
    x = nd.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(block(x).asnumpy(), [1.0, 2.0])  # imperative: row 0
    block.hybridize()
    with pytest.warns(UserWarning, match=r"x\[0\] on .* is the Symbol itself"):
        np.testing.assert_array_equal(block(x).asnumpy(), x.asnumpy())  # MXNet: all of x


@pytest.mark.parametrize("key, written, fix", [
    ((slice(None), 0), "x[:, 0]", "F.slice_axis(x, axis=1, begin=0, end=1)"),
    (slice(1, 3), "x[1:3]", "F.slice_axis(x, axis=0, begin=1, end=3)"),
    ((slice(None), slice(None), slice(-3, None)), "x[:, :, -3:]",
     "F.slice_axis(x, axis=2, begin=-3, end=None)"),
    ((Ellipsis, -1), "x[..., -1]", "F.slice_axis(x, axis=-1, begin=-1, end=None)"),
    ((slice(None), [1, 2]), "x[:, [1, 2]]", "F.take(x, indices, axis=1)"),
    (slice(None, None, 2), "x[::2]", "F.slice(x, begin=..., end=..., step=...)"),
    ((slice(None), None), "x[:, None]", "F.expand_dims(x, axis=1)"),
])
def test_indexing_errors_show_the_key_as_written_and_the_right_axis(key, written, fix):
    with pytest.raises(errors.SymbolIndexError) as caught:
        sym.var("x")[key]
    message = str(caught.value)
    assert message.startswith(f"{written} on <Symbol x>") and f"Fix: {fix}" in message
    assert "slice(None" not in message


@st.composite
def _one_axis_keys(draw):
    """A shape and a key that takes every axis whole but one (written with or without
    ``...``), where it picks an index or a non-empty unit-step slice."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    axis = draw(st.integers(0, len(shape) - 1))
    size = shape[axis]
    bound = st.none() | st.integers(-size, size - 1)
    part = draw(st.integers(-size, size - 1) | st.builds(slice, bound, bound).filter(
        lambda piece: len(range(size)[piece]) > 0))  # MXNet has no empty arrays
    if draw(st.booleans()):  # counted from the end after an Ellipsis
        return shape, (Ellipsis, part) + (slice(None),) * (len(shape) - 1 - axis)
    return shape, (slice(None),) * axis + (part,)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(_one_axis_keys())
def test_the_suggested_slice_axis_selects_what_the_key_selects(case):
    """The fix in the message, run on an NDArray, gives what numpy's ``x[key]`` gives
    (an index keeps its axis, of length 1), and the key prints as numpy reads it back."""
    shape, key = case
    with pytest.raises(errors.SymbolIndexError) as caught:
        sym.var("x")[key]
    message = str(caught.value)
    written = message.split(" on <Symbol x>")[0]
    read_back = eval(f"np.s_{written[1:]}")  # the key as written reads back as itself
    assert (read_back if isinstance(read_back, tuple) else (read_back,)) == key
    fix = message.split("Fix: F.")[1].split(", F.take")[0]
    values = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x = mx.nd.array(values)
    if not fix.startswith("slice_axis("):
        assert fix == "identity(x)" and all(k == slice(None) for k in key[1:])
        return
    got = eval(f"mx.nd.{fix}", {"mx": mx, "x": x}).asnumpy()
    index, part = next((i, k) for i, k in enumerate(key)
                       if k is not Ellipsis and k != slice(None))
    axis = index if key[0] is not Ellipsis else index - len(key)
    expected = values[key]
    if isinstance(part, int):
        expected = np.expand_dims(expected, axis % len(shape))
    np.testing.assert_array_equal(got, expected)


def test_errors_name_a_notebook_cell_by_its_file_name_only(monkeypatch):
    """A notebook cell's file is /tmp/ipykernel_<pid>/<hash>.py: the directory changes
    with every kernel, so "created at" shows only ``<hash>.py:line``."""
    import linecache

    cell = "/tmp/ipykernel_9611/1234567.py"
    source = "x = sym.var('x') + 1\n"
    monkeypatch.setitem(linecache.cache, cell, (len(source), None, [source], cell))
    scope = {"sym": sym}
    exec(compile(source, cell, "exec"), scope)
    with pytest.raises(errors.SymbolIndexError) as caught:
        scope["x"][:, 0]  # an array index: refused everywhere, with where x was made
    assert "(created at 1234567.py:1 `x = sym.var('x') + 1`)" in str(caught.value)
    assert "ipykernel" not in str(caught.value)


def test_multi_output_operators_give_grouped_symbols():
    x = sym.var("x", shape=(4, 6))
    parts = sym.split(x, num_outputs=2, axis=1)
    assert len(parts) == 2
    assert parts.list_outputs() == [f"{parts[0].name}_output0", f"{parts[0].name}_output1"]
    assert parts[1].infer_shape()[1] == [(4, 3)]


def test_var_attributes_are_mxnet_strings():
    w = sym.var("w", shape=(3, 4), dtype="float16", lr_mult=2, __foo__="bar")
    assert w.attr("__shape__") == "(3, 4)"
    assert w.attr("__dtype__") == "float16"
    assert w.attr("__missing__") is None
    assert w.list_attr() == {"__shape__": "(3, 4)", "__dtype__": "float16",  # MXNet lists
                             "__lr_mult__": "2", "lr_mult": "2", "__foo__": "bar"}  # both
    with pytest.raises(ValueError, match="double underscores"):
        sym.var("w", foo=1)
    assert sym.Variable is sym.var


def test_op_attributes_are_listed_as_strings():
    out = sym.sum(sym.var("x"), axis=(0, 1), keepdims=True)
    assert out.attr("keepdims") == "True"
    assert out.attr("axis") == "(0, 1)"
    assert out.attr_dict() == {out.name: out.list_attr()}
    assert out.debug_str().splitlines()[-1] == "return %1"


def test_auxiliary_variables_are_listed_apart_from_arguments():
    x = sym.var("data")
    running = sym.var("bn_running_mean", __aux__=True)
    out = sym.broadcast_sub(x, running)
    assert out.list_arguments() == ["data"]
    assert out.list_auxiliary_states() == ["bn_running_mean"]
    assert out.list_inputs() == ["data", "bn_running_mean"]


def test_a_missing_input_becomes_a_variable_named_after_the_node_as_in_mxnet():
    fc = sym.FullyConnected(name="fc3", num_hidden=10)
    assert fc.list_arguments() == ["fc3_data", "fc3_weight", "fc3_bias"]
    assert sym.softmax(name="sm").list_arguments() == ["sm_data"]
    with pytest.raises(TypeError, match="expected a Symbol"):
        sym.relu("x")


def test_grouped_symbol_cannot_be_an_input():
    group = sym.Group([sym.var("a"), sym.var("b")])
    with pytest.raises(TypeError, match="pick one output"):
        sym.relu(group)


@needs_fc
def test_parameters_are_created_as_name_input():
    x = sym.var("data")
    fc = sym.FullyConnected(data=x, num_hidden=10, name="fc1")
    assert fc.list_arguments() == ["data", "fc1_weight", "fc1_bias"]
    assert sym.FullyConnected(x, num_hidden=3, no_bias=True).list_arguments() == [
        "data", "fullyconnected0_weight"]
    net = sym.relu(sym.FullyConnected(x, num_hidden=4))
    assert repr(net) == "<Symbol relu0>"
    assert net.list_arguments() == ["data", "fullyconnected1_weight", "fullyconnected1_bias"]


@needs_fc
def test_infer_shape_of_a_small_mlp_with_given_weights():
    x = sym.var("data")
    w = sym.var("fc1_weight", shape=(10, 5))
    fc = sym.FullyConnected(data=x, weight=w, num_hidden=10, name="fc1")
    args, outs, aux = fc.infer_shape(data=(2, 5), fc1_bias=(10,))
    assert args == [(2, 5), (10, 5), (10,)] and outs == [(2, 10)] and aux == []


@needs_fc
def test_parameter_shapes_follow_from_the_data_as_in_mxnet():
    net = sym.FullyConnected(sym.relu(sym.FullyConnected(sym.var("data"), num_hidden=8,
                                                         name="fc1")), num_hidden=2, name="fc2")
    args, outs, aux = net.infer_shape(data=(5, 4))
    assert dict(zip(net.list_arguments(), args)) == {
        "data": (5, 4), "fc1_weight": (8, 4), "fc1_bias": (8,),
        "fc2_weight": (2, 8), "fc2_bias": (2,)}
    assert outs == [(5, 2)] and aux == []


def test_conv_then_flatten_then_dense_parameter_shapes():
    conv = sym.Convolution(sym.var("data"), kernel=(3, 3), num_filter=4, name="c")
    net = sym.FullyConnected(sym.Flatten(conv), num_hidden=5, no_bias=True, name="f")
    args, outs, _ = net.infer_shape(data=(2, 3, 8, 8))
    assert dict(zip(net.list_arguments(), args)) == {
        "data": (2, 3, 8, 8), "c_weight": (4, 3, 3, 3), "c_bias": (4,), "f_weight": (5, 144)}
    assert outs == [(2, 5)]


@pytest.mark.parametrize("name, data, attrs", [
    ("FullyConnected", (3, 2, 5), {"num_hidden": 4}),
    ("FullyConnected", (3, 2, 5), {"num_hidden": 4, "flatten": False}),
    ("Convolution", (2, 3, 9, 7), {"kernel": (3, 2), "num_filter": 6, "stride": (2, 1)}),
])
def test_infer_params_shapes_satisfy_the_ops_own_shape_rule(name, data, attrs):
    op = registry.get(name)
    parsed = op.parse_attrs(attrs)
    x = registry.Aval(data, np.dtype("float32"))
    params = op.infer_params(x, **parsed)
    inputs = [x] + [registry.Aval(params[n], x.dtype) for n in op.input_names(parsed)[1:]]
    assert len(op.infer(*inputs, **parsed)) == 1  # raises ShapeError if the shapes disagree


def test_infer_shape_full_partial_and_positional():
    a, b = sym.var("a"), sym.var("b")
    out = sym.relu(sym.broadcast_add(a, b))
    assert out.infer_shape(a=(2, 3), b=(1, 3)) == ([(2, 3), (1, 3)], [(2, 3)], [])
    assert out.infer_shape((2, 3), (3,)) == ([(2, 3), (3,)], [(2, 3)], [])
    assert out.infer_shape(a=(2, 3)) == (None, None, None)  # incomplete: MXNet's answer
    assert out.infer_shape_partial(a=(2, 3)) == ([(2, 3), ()], [()], [])
    assert sym.var("x").infer_shape() == (None, None, None)
    assert out.infer_type(a="float16") == ([np.float16, np.float32], [np.float32], [])
    with pytest.raises(ValueError, match=r"\['c'\] are not inputs"):
        out.infer_shape(c=(1,))


def test_infer_shape_error_names_node_shapes_and_user_line():
    a, b = sym.var("a"), sym.var("b")
    bad = sym.broadcast_add(a, b, name="oops")  # the line the error must quote
    with pytest.raises(errors.ShapeError) as info:
        bad.infer_shape(a=(2, 3), b=(4, 5))
    message = str(info.value)
    assert "'oops'" in message and "float32[2,3], float32[4,5]" in message
    assert "test_symbol.py" in message and "bad = sym.broadcast_add(a, b" in message


def test_shape_errors_are_raised_on_the_building_line_when_shapes_are_known():
    a, b = sym.var("a", shape=(2, 3)), sym.var("b", shape=(4, 5))
    with pytest.raises(errors.ShapeError, match=r"cannot be broadcast.*\n.*test_symbol.py"):
        sym.broadcast_add(a, b)


def test_teaching_errors_for_what_a_symbol_cannot_do():
    x = sym.var("x")
    with pytest.raises(errors.SymbolBoolError, match="F.where"):
        if x:
            pass
    with pytest.raises(errors.SymbolValueError, match="hybridize"):
        x.asnumpy()
    with pytest.raises(errors.SymbolShapeError, match="static_shape=True"):
        _ = x.shape
    for what in ("dtype", "context", "size", "ndim"):
        with pytest.raises(errors.SymbolShapeError, match=f"has no {what}"):
            getattr(x, what)
    with pytest.raises(errors.SymbolInplaceError, match="x = x \\+ y"):
        x += 1
    with pytest.raises(errors.SymbolInplaceError):
        x[0] = 1
    assert issubclass(errors.SymbolShapeError, AttributeError)


def test_static_shapes_expose_traced_shapes():
    x = sym.var("x", shape=(2, 3))
    with sym.static_shapes():
        assert x.reshape((0, -1)).shape == (2, 3)
    with pytest.raises(AttributeError):
        _ = x.shape


def test_to_graph_is_the_compiler_ir():
    out = sym.relu(sym.var("data", shape=(1, 4)))
    graph = out.to_graph()
    assert isinstance(graph, ir.Graph) and out.graph.outputs == graph.outputs
    ir.verify(graph)
    assert str(graph).splitlines() == ["%0 = var data : float32[1,4]",
                                       "%1 = relu(%0) : float32[1,4]", "return %1"]


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' not installed")
def test_repr_mimebundle_draws_the_graph_and_keeps_the_mxnet_text_form():
    bundle = sym.relu(sym.var("data"))._repr_mimebundle_()
    assert bundle["text/plain"] == "<Symbol relu0>"
    assert set(bundle) == {"text/plain", "image/svg+xml", "image/png"}  # PNG: untrusted readers
    assert "relu" in bundle["image/svg+xml"]


def test_repr_mimebundle_without_dot_shows_the_text_and_the_install_hint(monkeypatch):
    from hybridlab.viz.graph import INSTALL_HINT

    monkeypatch.setenv("PATH", "/nonexistent")  # as tests/test_viz.py: no `dot` to find
    bundle = sym.relu(sym.var("data"))._repr_mimebundle_()
    assert bundle == {"text/plain": f"<Symbol relu0>\n{INSTALL_HINT}"}


# ---------------------------------------------------------------------------------------
# Running: eval / bind against numpy
# ---------------------------------------------------------------------------------------

def _needs_runtime():
    pytest.importorskip("hybridlab.ndarray")


def test_eval_equals_numpy():
    _needs_runtime()
    a, b = sym.var("a"), sym.var("b")
    out = sym.relu(sym.broadcast_mul(a, b) + 1) * 2
    x = np.array([[1.0, -2.0], [3.0, -4.0]], np.float32)
    y = np.array([0.5, 2.0], np.float32)
    (result,) = out.eval(a=mx.nd.array(x), b=mx.nd.array(y))
    np.testing.assert_allclose(result.asnumpy(), np.maximum(x * y + 1, 0) * 2)


def test_bind_forward_backward_matches_hand_gradients():
    _needs_runtime()
    a, b = sym.var("a"), sym.var("b")
    out = a * b + a
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([4.0, 5.0, 6.0], np.float32)
    exe = out.bind(None, {"a": mx.nd.array(x), "b": mx.nd.array(y)})
    (value,) = exe.forward(is_train=True)
    np.testing.assert_allclose(value.asnumpy(), x * y + x)
    exe.backward(mx.nd.array(np.full(3, 2.0, np.float32)))
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), 2 * (y + 1))
    np.testing.assert_allclose(exe.grad_dict["b"].asnumpy(), 2 * x)
    assert len(exe.grad_arrays) == 2
    exe.forward(a=mx.nd.array(2 * x))
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), 2 * x * y + 2 * x)


def test_grad_req_add_accumulates_and_args_grad_arrays_receive_values():
    _needs_runtime()
    a, b = sym.var("a"), sym.var("b")
    x = np.array([1.0, 2.0], np.float32)
    y = np.array([3.0, 4.0], np.float32)
    given = mx.nd.zeros((2,))
    exe = (a * b).bind(None, [mx.nd.array(x), mx.nd.array(y)], args_grad={"a": given},
                       grad_req={"a": "add", "b": "null"})
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward()
    np.testing.assert_allclose(given.asnumpy(), 2 * y)
    assert exe.grad_arrays[1] is None and list(exe.grad_dict) == ["a"]


_UNARY = {"relu": lambda v: np.maximum(v, 0), "neg": lambda v: -v,
          "mul3": lambda v: v * 3, "plus1": lambda v: v + 1}
_SYM_UNARY = {"relu": sym.relu, "neg": lambda s: -s, "mul3": lambda s: s * 3,
              "plus1": lambda s: s + 1}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(_UNARY)), st.booleans()), min_size=1,
                max_size=6))
@pytest.mark.slow
def test_random_programs_evaluate_like_numpy(steps):
    """Build the same expression with Symbols and numpy; eval must agree."""
    _needs_runtime()
    values = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    other = np.linspace(1, 3, 3, dtype=np.float32)
    x, y = sym.var("x"), sym.var("y")
    symbolic, expected = x, values
    for op_name, combine in steps:
        symbolic, expected = _SYM_UNARY[op_name](symbolic), _UNARY[op_name](expected)
        if combine:
            symbolic, expected = sym.broadcast_mul(symbolic, y), expected * other
    feed = {"x": mx.nd.array(values)}
    if "y" in symbolic.list_arguments():
        feed["y"] = mx.nd.array(other)
    (result,) = symbolic.eval(**feed)
    np.testing.assert_allclose(result.asnumpy(), expected, rtol=1e-6)


def test_seed_a_hybridized_mlp_called_on_a_symbol_returns_a_symbol():
    """The book's `x = sym.var('data'); net(x)` prints `<Symbol dense..._fwd>`."""
    gluon = pytest.importorskip("hybridlab.gluon")
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(2))
    net.initialize()
    net(mx.nd.ones((1, 4)))
    net.hybridize()
    out = net(sym.var("data"))
    assert repr(out) == f"<Symbol {net[1].name}_fwd>"
    assert out.list_arguments() == ["data"] + [
        f"{layer.name}_{p}" for layer in (net[0], net[1]) for p in ("weight", "bias")]
    assert out.infer_shape(data=(3, 4))[1] == [(3, 2)]


def test_eval_takes_auxiliary_states_by_name_too():
    _needs_runtime()
    out = sym.broadcast_sub(sym.var("data"), sym.var("running_mean", __aux__=True))
    (result,) = out.eval(data=mx.nd.array([3.0, 4.0]), running_mean=mx.nd.array([1.0, 1.0]))
    np.testing.assert_allclose(result.asnumpy(), [2.0, 3.0])
    assert out.list_inputs() is not out.list_inputs()  # callers get copies of the cache


def test_no_operator_spelling_hides_the_module_functions():
    for public in ("var", "Variable", "Group", "load", "load_json", "static_shapes"):
        assert getattr(sym, public).__module__ == "hybridlab.symbol", public


# One body, two modes: each function below is written once with ``F`` and must give the
# same numbers with F = nd (imperative) and F = sym (graph, evaluated through CachedOp).
SAME_IN_BOTH_MODES = {
    "relu": lambda F, x, w: F.relu(x),
    "dot_transpose_b": lambda F, x, w: F.dot(x, w, transpose_b=True),
    "fully_connected": lambda F, x, w: F.FullyConnected(x, w, num_hidden=5, no_bias=True),
    "broadcast_add": lambda F, x, w: F.broadcast_add(x, F.ones((1, 3))),
    "reshape_codes": lambda F, x, w: x.reshape((0, -1)).sum(axis=1),
    "scalar_dunders": lambda F, x, w: (2 - x) * 3 / 4 + x ** 2,
    "softmax": lambda F, x, w: F.softmax(x, axis=-1),
    "plus": lambda F, x, w: x + F.ones_like(x),
}


@pytest.mark.parametrize("key", sorted(SAME_IN_BOTH_MODES))
def test_the_same_F_code_gives_the_same_numbers_in_both_modes(key):
    _needs_runtime()
    body = SAME_IN_BOTH_MODES[key]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    imperative = body(mx.nd, mx.nd.array(x), mx.nd.array(w)).asnumpy()
    graph = body(sym, sym.var("x"), sym.var("w"))
    feed = {"x": mx.nd.array(x), "w": mx.nd.array(w)}
    (symbolic,) = graph.eval(**{k: v for k, v in feed.items() if k in graph.list_inputs()})
    np.testing.assert_allclose(symbolic.asnumpy(), imperative, rtol=1e-5, atol=1e-6)


def test_var_shapes_are_checked_when_declared():
    with pytest.raises(ValueError, match=r"shape \(-2, 3\) has a negative size; use 0"):
        mx.sym.var("z", shape=(-2, 3))
    with pytest.raises(TypeError, match=r"sym.var\('z'\): shape must be a tuple of ints"):
        mx.sym.var("z", shape="abc")
    assert mx.sym.var("z", shape="(2, 3)").infer_shape()[0] == [(2, 3)]


def test_a_shape_given_to_infer_shape_wins_over_the_declared_one_as_in_mxnet():
    declared = mx.sym.var("z", shape=(2, 3))
    assert declared.infer_shape(z=(4, 3))[0] == [(4, 3)]
    assert declared.infer_shape(z=(5, 6, 7))[0] == [(5, 6, 7)]
    assert declared.infer_shape()[0] == [(2, 3)]
    partial = mx.sym.var("z", shape=(0, 3))  # 0: not known yet, filled from the declaration
    assert partial.infer_shape(z=(4, 0))[0] == [(4, 3)]


def test_indexing_a_group_past_its_outputs_names_the_range():
    group = mx.sym.Group([mx.sym.var("a"), mx.sym.var("b")])
    with pytest.raises(IndexError, match=r"has 2 outputs, so index 5 is out of range; pick "
                                         r"0..1 or an output name \['a', 'b'\]"):
        group[5]
    assert group[-1].name == "b"


def test_a_symbol_meeting_an_array_raises_the_teaching_error():
    x = sym.var("x")
    for combine in (lambda: x + mx.nd.ones((1, 1)), lambda: mx.nd.ones((1, 1)) * x,
                    lambda: np.ones(2) - x, lambda: x > np.zeros(2)):
        with pytest.raises(errors.ArrayInTraceError, match=r"cannot hold an array.*F.ones"):
            combine()
    with pytest.raises(TypeError, match="unsupported operand"):  # other types: Python's error
        x + "a"


def test_an_ndarray_inside_a_traced_hybrid_forward_names_the_fix():
    class AddsAnArray(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return x + mx.nd.ones((1, 1))

    block = AddsAnArray()
    block.initialize()
    assert block(mx.nd.zeros((1, 1))).asnumpy().tolist() == [[1.0]]  # imperative: fine
    block.hybridize()
    with pytest.raises(errors.ArrayInTraceError, match=r"F.ones"):
        block(mx.nd.zeros((1, 1)))


def test_an_absent_bias_given_as_none_is_skipped_as_mxnet_does():
    x, w = sym.var("x"), sym.var("w")
    conv = sym.Convolution(x, w, None, no_bias=True, kernel=(3, 3), num_filter=4)
    assert conv.list_arguments() == ["x", "w"]
    out = mx.nd.FullyConnected(mx.nd.ones((2, 3)), mx.nd.ones((4, 3)), None, no_bias=True,
                               num_hidden=4)
    assert out.shape == (2, 4)


def test_get_children_are_the_inputs_of_the_head_node():
    data = sym.var("data")
    fc1 = sym.FullyConnected(data=data, name="fc1", num_hidden=10)
    fc2 = sym.FullyConnected(data=fc1, name="fc2", num_hidden=5)
    assert fc2.get_children().list_outputs() == ["fc1_output", "fc2_weight", "fc2_bias"]
    assert fc2.get_children().get_children().list_outputs() == ["data", "fc1_weight",
                                                                "fc1_bias"]
    assert fc2.get_children()["fc2_weight"].get_children() is None


def test_calling_a_symbol_composes_it():
    net1 = sym.FullyConnected(sym.var("data"), name="fc1", num_hidden=4)
    net2 = sym.FullyConnected(name="fc3", num_hidden=3)  # creates fc3_data
    composed = net2(fc3_data=net1, name="composed")
    assert composed.name == "composed"
    assert composed.list_arguments() == ["data", "fc1_weight", "fc1_bias", "fc3_weight",
                                         "fc3_bias"]
    assert composed.infer_shape(data=(2, 7))[1] == [(2, 3)]
    with pytest.raises(ValueError, match="not arguments"):
        net2(nothing=net1)


def test_bool_of_a_symbol_is_mxnets_not_implemented_for_symbol():
    with pytest.raises(mx.base.NotImplementedForSymbol):
        bool(sym.var("x"))


def test_partial_shape_inference_goes_through_elementwise_ops():
    x2h = sym.FullyConnected(sym.var("data"), name="x2h", num_hidden=8)
    h2h = sym.FullyConnected(sym.var("prev"), name="h2h", num_hidden=8)
    out = sym.Activation(sym.elemwise_add(x2h, h2h), act_type="relu")
    assert out.infer_shape(data=(3, 5)) == (None, None, None)
    args, outs, _ = out.infer_shape_partial(data=(3, 5))
    assert outs == [(3, 8)] and dict(zip(out.list_arguments(), args))["h2h_weight"] == ()
    declared = sym.var("d", shape=(1, 0, 0))
    assert sym.relu(declared).infer_shape_partial()[0] == [(1, 0, 0)]


def test_bind_skips_arguments_given_as_none():
    conv = sym.Convolution(sym.var("x"), sym.var("w"), None, no_bias=True, kernel=(1, 1),
                           num_filter=1)
    exe = conv.bind(mx.cpu(), {"x": mx.nd.ones((1, 1, 2, 2)), "w": mx.nd.ones((1, 1, 1, 1)),
                               "b": None})
    assert exe.forward()[0].asnumpy().sum() == 4


def test_monitor_callback_sees_inputs_and_outputs_by_name():
    seen = []
    exe = sym.clip(sym.var("data"), a_min=0, a_max=1, name="c").simple_bind(data=(2,))
    exe.set_monitor_callback(lambda name, array: seen.append((name, array.shape)),
                             monitor_all=True)
    exe.forward(data=mx.nd.array([-1.0, 2.0]))
    assert seen == [("data", (2,)), ("c_output", (2,))]


def test_softmax_dtype_sets_the_output_dtype():
    x = mx.nd.array([[1.0, 2.0, 3.0]], dtype="float16")
    assert mx.nd.softmax(x).dtype == np.float16
    y = mx.nd.softmax(x, dtype="float32")
    assert y.dtype == np.float32
    np.testing.assert_allclose(mx.nd.softmin(-x).asnumpy(), mx.nd.softmax(x).asnumpy(),
                               rtol=1e-3)
    exe = sym.softmax(sym.var("a"), dtype="float64").simple_bind(a=(1, 3))
    assert exe.forward(a=x)[0].dtype == np.float64


def test_executor_writes_its_outputs_in_place():
    exe = sym.abs(sym.var("x")).simple_bind(x=(3,))
    held = exe.outputs[0]
    exe.forward(is_train=True, x=mx.nd.array([-1.0, 2.0, -3.0]))
    assert exe.outputs[0] is held and held.asnumpy().tolist() == [1.0, 2.0, 3.0]
    exe.backward(mx.nd.ones((3,)))
    assert exe.grad_dict["x"].asnumpy().tolist() == [-1.0, 1.0, -1.0]


def test_partial_shapes_keep_their_unknown_zeros():
    data = sym.var("data", shape=(0, 20))
    assert sym.slice(data, begin=(None, 3), end=(None, 10)).infer_shape_partial()[1] == [(0, 7)]
    assert sym.slice_axis(data, axis=1, begin=2, end=5).infer_shape_partial()[1] == [(0, 3)]
    assert sym.FullyConnected(data, num_hidden=3).infer_shape() == (None, None, None)
    image = sym.var("image", shape=(1, 0, 0, 0))
    conv = sym.Convolution(image, sym.var("w"), kernel=(7, 7), num_filter=64, no_bias=True)
    assert conv.infer_shape_partial()[0] == [(1, 0, 0, 0), (64, 0, 7, 7)]


def test_grad_req_add_accumulates_onto_what_the_gradient_array_holds():
    y = sym.var("x") * 2
    g = mx.nd.array([10.0, 11.0])
    exe = y.bind(mx.cpu(), {"x": mx.nd.array([1.0, 2.0])}, args_grad={"x": g}, grad_req="add")
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((2,)))
    assert g.asnumpy().tolist() == [12.0, 13.0]
    exe = y.simple_bind(x=(2,), grad_req="add", mode="ignored: not a shape")
    exe.grad_dict["x"][:] = 5  # written after bind, as MXNet's tests do
    exe.forward(is_train=True, x=mx.nd.ones((2,)))
    exe.backward(mx.nd.ones((2,)))
    assert exe.grad_dict["x"].asnumpy().tolist() == [7.0, 7.0]


def test_softmax_output_takes_a_probability_label_of_the_data_shape():
    x = mx.nd.array([[0.5, -1.0, 2.0]])
    label = mx.nd.array([[0.2, 0.3, 0.5]])
    grad = mx.nd.zeros((1, 3))
    exe = sym.SoftmaxOutput(sym.var("X"), sym.var("L")).bind(
        mx.cpu(), args=[x, label], args_grad={"X": grad})
    exe.forward(is_train=True)
    exe.backward()
    expected = mx.nd.softmax(x).asnumpy() - label.asnumpy()
    np.testing.assert_allclose(grad.asnumpy(), expected, rtol=1e-6, atol=1e-7)


def test_infer_type_partial_leaves_undecided_arguments_unknown():
    data = sym.var("data")
    net = sym.SoftmaxOutput(sym.FullyConnected(sym.Cast(data, dtype="float32"), num_hidden=4,
                                               name="fc"), name="out")
    args, outs, _ = net.infer_type_partial()
    assert args == [None, np.float32, np.float32, np.float32] and outs == [np.float32]
    assert sym.FullyConnected(sym.var("x"), num_hidden=2).infer_type_partial()[:2] == (
        [None, None, None], [None])
    assert net.infer_type(data=np.float16)[0][0] == np.float16
    real = mx.base.mx_real_t  # MXNet's default real type, given as a dtype
    assert net.infer_type(data=real)[:2] == ([real] * 4, [real]) and real is np.float32


def test_squeeze_expand_dims_flatten_take_inplace_when_traced():
    from hybridlab import gluon

    class Squeeze(gluon.HybridBlock):
        def forward(self, x):  # F-less: x is a Symbol while traced
            return x.squeeze(inplace=True).expand_dims(0, inplace=True).flatten(inplace=True)

    block = Squeeze()
    block.hybridize()
    x = mx.nd.ones((3, 4, 1))
    assert block(x).shape == (1, 12)
    assert mx.sym.var("x").squeeze(inplace=False).list_arguments() == ["x"]


def test_infer_type_without_shapes_follows_the_ops_own_dtype_rule():
    cast = sym.Cast(sym.var("x", dtype="int32"), dtype="float32")
    assert cast.infer_type() == ([np.int32], [np.float32], [])
    exe = cast.simple_bind(x=(2, 2))
    assert (exe.arg_arrays[0].dtype, exe.outputs[0].dtype) == (np.int32, np.float32)


def test_parameter_shapes_are_inferred_through_casts():
    data = sym.var("d")
    net = sym.FullyConnected(sym.cast(data, dtype="float16"),
                             sym.cast(sym.var("w"), dtype="float16"), no_bias=True, num_hidden=3)
    assert net.infer_shape(d=(2, 5)) == ([(2, 5), (3, 5)], [(2, 3)], [])


def test_backward_with_every_grad_req_null_computes_nothing_as_mxnet():
    x = mx.sym.var("x")
    exe = (x * 2).bind(mx.cpu(), {"x": mx.nd.ones((2,))}, args_grad={"x": mx.nd.zeros((2,))},
                       grad_req="null")
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((2,)))  # no error: there is no gradient to give
    assert exe.grad_arrays == [None]


def test_bound_outputs_have_the_operators_dtype_before_the_first_forward():
    exe = sym.shape_array(sym.var("data")).simple_bind(mx.cpu(), data=(5, 4), grad_req="null")
    held = exe.outputs[0]
    assert held.dtype == np.int64 and held.shape == (2,)
    exe.forward()
    assert held.asnumpy().tolist() == [5, 4]  # written in place, as MXNet's executor


def test_tiling_operators_are_methods_of_both_front_ends():
    x = sym.var("x")
    for name, kw in [("tile", {"reps": (2, 1)}), ("repeat", {"repeats": 2, "axis": 0}),
                     ("pad", {"mode": "edge", "pad_width": (1, 0, 0, 1)}),
                     ("argmax_channel", {})]:
        assert getattr(x, name)(**kw).infer_shape(x=(2, 3))[1] == [
            getattr(mx.nd.ones((2, 3)), name)(**kw).shape]
    with pytest.raises(errors.ShapeError, match="pad_width .* needs two sizes"):
        mx.nd.pad(mx.nd.ones((2, 3)), pad_width=(1, 1))


def test_backward_ignores_the_head_gradient_of_an_output_that_passes_no_gradient():
    """argmax passes no gradient, so MXNet never reads its head gradient (not even its
    shape); a differentiable output's head gradient is still checked."""
    a = mx.sym.var("a")
    exe = mx.sym.argmax(a, axis=1, keepdims=True).simple_bind(mx.cpu(), a=(2, 3))
    exe.forward(is_train=True)
    exe.backward([mx.nd.ones((2, 3))])
    assert not exe.grad_dict["a"].asnumpy().any()
    exe = (a * 2).simple_bind(mx.cpu(), a=(2, 3))
    exe.forward(is_train=True)
    with pytest.raises(ValueError, match="a head gradient of shape"):
        exe.backward([mx.nd.ones((3, 2))])


def test_numpy_shape_mode_spells_an_unknown_size_minus_one():
    with mx.np_shape():
        data = mx.sym.var("data", shape=(-1, 20))
        out = mx.sym.slice(data, begin=(None, 2), end=(None, 10), step=(None, 2))
        assert out.infer_shape_partial()[1] == [(-1, 4)]
    with pytest.raises(ValueError, match="negative size"):  # outside it, 0 is the unknown
        mx.sym.var("data", shape=(-1, 20))


def test_get_optimized_symbol_shows_the_executors_common_subexpressions_merged(monkeypatch):
    a, b = sym.var("a"), sym.var("b")
    both = sym.Group([a * b + 1, a * b + 1])  # the same value twice
    merged = both.simple_bind(mx.cpu(), a=(2,), b=(2,)).get_optimized_symbol()
    # a, b, one product, one +1, and a _copy so the two outputs stay apart (as MXNet)
    assert len(merged.get_internals().list_outputs()) == 5
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "0")
    exe = both.simple_bind(mx.cpu(), a=(2,), b=(2,))
    assert len(exe.get_optimized_symbol().get_internals().list_outputs()) == 6
    assert [o.asnumpy().tolist() for o in exe.forward(a=mx.nd.ones(2), b=mx.nd.ones(2))] == [
        [2.0, 2.0], [2.0, 2.0]]
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "yes")
    with pytest.raises(ValueError, match="MXNET_ELIMINATE_COMMON_EXPR='yes' is not a whole"):
        both.simple_bind(mx.cpu(), a=(2,), b=(2,))


def test_a_gradient_through_an_operator_without_one_is_refused_at_bind():
    x, idx = sym.var("x"), sym.var("idx")
    taken = sym.batch_take(x, idx)
    types = {"x": np.float32, "idx": np.int32}
    with pytest.raises(errors.MissingGradientError, match="bind: gradients of .* batch_take"):
        taken.simple_bind(mx.cpu(), x=(3, 4), idx=(3,), type_dict=types)
    exe = sym.BlockGrad(taken).simple_bind(mx.cpu(), x=(3, 4), idx=(3,), type_dict=types)
    exe.arg_dict["x"][:] = np.arange(12).reshape(3, 4)
    exe.arg_dict["idx"][:] = np.array([1, 9, -2])  # clipped into 0..3, as MXNet
    assert exe.forward()[0].asnumpy().tolist() == [1.0, 7.0, 8.0]
    exe.backward()
    assert exe.grad_dict["x"].asnumpy().sum() == 0


def test_debug_str_counts_the_memory_the_backward_keeps():
    import re

    x = sym.var("x")
    y = x
    for _ in range(6):
        y = y * y  # each product is kept for the backward

    def total(s, **kwargs):
        text = s.simple_bind(mx.cpu(), x=(1024, 256), **kwargs).debug_str()
        assert "memory plan:" in text and "elemwise_mul" in text
        return int(re.search(r"Total (\d+) MB allocated", text).group(1))

    training, predicting = total(y), total(y, grad_req="null")
    assert training > predicting == total(sym.BlockGrad(y))  # BlockGrad: nothing kept


def test_a_reshaped_variable_is_sized_backwards_from_a_known_partner():
    """MXNet infers shapes both ways: elemwise_add's known side sizes the Reshape's result,
    and the Reshape's input variable with one unknown (0) size is its quotient."""
    data = mx.sym.var("data")
    net = mx.sym.elemwise_add(data.reshape((0, -1)), mx.sym.ones(shape=(2, 75)))
    assert net.infer_shape(data=(2, 0, 5, 5))[:2] == ([(2, 3, 5, 5)], [(2, 75)])


def test_reshape_takes_mxnets_deprecated_target_shape():
    net = mx.sym.Reshape(mx.sym.var("data"), target_shape=(2, 0))
    assert mx.sym.load_json(net.tojson()).infer_shape(data=(2, 3, 5, 5))[1] == [(2, 75)]
    kept = mx.nd.Reshape(mx.nd.ones((2, 3, 4)), target_shape=(7, 0), keep_highest=True)
    assert kept.shape == (2, 12)


def test_executor_reshape_shares_weights_and_the_first_rows():
    import hybridlab as mx
    from hybridlab import nd

    out = sym.FullyConnected(sym.var("x"), num_hidden=4, name="fc")
    exe = out.simple_bind(mx.cpu(), x=(5, 4), grad_req="null")
    exe.arg_dict["x"][:] = 1
    exe.arg_dict["fc_weight"][:] = nd.ones((4, 4))
    exe.arg_dict["fc_bias"][:] = 0
    smaller = exe.reshape(x=(3, 4))
    assert smaller.arg_dict["fc_weight"] is exe.arg_dict["fc_weight"]  # shared
    smaller.forward()
    np.testing.assert_array_equal(smaller.outputs[0].asnumpy(), np.full((3, 4), 4.0))
    np.testing.assert_array_equal(exe.outputs[0].asnumpy()[:3], np.full((3, 4), 4.0))
    with pytest.raises(ValueError, match="allow_up_sizing=True"):
        exe.reshape(x=(6, 4))
    larger = exe.reshape(allow_up_sizing=True, x=(6, 4))
    larger.arg_dict["x"][:] = 0
    np.testing.assert_array_equal(exe.arg_dict["x"].asnumpy(), np.ones((5, 4)))


def test_a_shape_constraint_lets_inference_reach_a_weight_backwards():
    w, shift = sym.var("w"), sym.var("shift", shape=(1,))
    tied = sym._internal._identity_with_attr_like_rhs(sym.broadcast_add(w, shift), w)
    fc = sym.FullyConnected(sym.var("data"), weight=tied, num_hidden=11, no_bias=True)
    args, _, _ = fc.infer_shape(data=(7, 100))
    assert dict(zip(fc.list_arguments(), args))["w"] == (11, 100)
    with pytest.raises(mx.base.MXNetError, match="inconsistent"):
        sym._internal._identity_with_attr_like_rhs(sym.var("a"), sym.var("b")).infer_shape(
            a=(2, 3), b=(3, 2))


def test_where_decides_no_shape_before_its_condition_is_fully_known():
    where = sym.where(sym.var("c"), sym.var("x"), sym.var("y"))
    assert where.infer_shape_partial(c=(0, 2), x=(0, 2), y=(0, 2))[1] == [()]
    assert where.infer_shape_partial(c=(0,), x=(2, 2), y=(2, 2))[1] == [()]
    assert where.infer_shape_partial(c=(2, 2), x=(2, 2), y=(2, 2))[1] == [(2, 2)]
    assert where.infer_type(c="float32", x="float64", y="float64")[1] == [np.float64]
