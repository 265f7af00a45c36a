"""CachedOp: one program per signature, ONE engine op per call, gradients on the tape."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import aval, bias_relu_chain, has_ops, seed_mlp

import hybridlab as mx
from hybridlab import engine, nd, sym
from hybridlab.graph import ir, shapes
from hybridlab.graph.cached_op import CachedOp
from hybridlab.graph.evaluate import evaluate


def _nd(*shape: int, seed: int = 0) -> mx.nd.NDArray:
    return mx.nd.array(np.random.default_rng(seed).standard_normal(shape), dtype="float32")


def test_one_program_per_signature_with_hit_and_miss_counters():
    op = CachedOp(bias_relu_chain())
    assert "not compiled yet" in op.code
    op(_nd(4, 8), _nd(8))
    op(_nd(4, 8, seed=1), _nd(8))
    op(_nd(2, 8), _nd(8))
    assert op.stats == {"hits": 1, "misses": 2}
    assert "def forward(x, b, *, rt=()):" in op.code


def test_results_match_the_reference_interpreter():
    x, b = _nd(4, 8), _nd(8, seed=1)
    op = CachedOp(bias_relu_chain(), static_alloc=True, static_shape=True)
    for _ in range(2):
        y = op(x, b)
    expected = evaluate(bias_relu_chain(), x.asnumpy(), b.asnumpy())[0]
    np.testing.assert_allclose(y.asnumpy(), expected)


def test_a_call_pushes_exactly_one_engine_op():
    x, b = _nd(4, 8), _nd(8)
    x.wait_to_read()
    b.wait_to_read()
    op = CachedOp(bias_relu_chain())
    with engine.engine_scope("NaiveEngine"):
        current = engine.current()
        current.set_tracing(True)
        current.clear_trace()
        y = op(x, b)
        y.wait_to_read()
        names = [record.name for record in current.trace]
        current.set_tracing(False)
    assert names == ["CachedOp"]


def test_wrong_number_of_inputs_names_the_inputs():
    with pytest.raises(TypeError, match=r"takes 2 inputs \['x', 'b'\], got 1"):
        CachedOp(bias_relu_chain())(_nd(4, 8))


def test_recorded_call_is_one_tape_node_with_a_compiled_backward():
    x, b = _nd(4, 8), _nd(8, seed=1)
    x.attach_grad()
    b.attach_grad()
    op = CachedOp(bias_relu_chain())
    with mx.autograd.record():
        y = op(x, b)
    y.backward()
    mask = (x.asnumpy() + b.asnumpy()) > 0
    np.testing.assert_allclose(x.grad.asnumpy(), 2.0 * mask)
    np.testing.assert_allclose(b.grad.asnumpy(), (2.0 * mask).sum(axis=0))
    assert "def forward(" in op.code and "def backward(" in op.code  # one program each


@pytest.mark.skipif(not has_ops("FullyConnected"), reason="FullyConnected not registered yet")
def test_seed_mlp_trains_through_cached_op_like_the_tape():
    graph = seed_mlp(batch=8)
    arrays = [_nd(*n.aval[0].shape, seed=i) * 0.1 for i, n in enumerate(graph.inputs)]
    grads = []
    for hybrid in (False, True):
        xs = [a.copy() for a in arrays]
        for x in xs:
            x.attach_grad()
        with mx.autograd.record():
            out = CachedOp(graph, static_alloc=True)(*xs) if hybrid else _imperative_mlp(xs)
            loss = (out * out).sum()
        loss.backward()
        grads.append([x.grad.asnumpy() for x in xs])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.skipif(not has_ops("FullyConnected"), reason="FullyConnected not registered yet")
def test_backward_computes_only_the_gradients_that_are_read():
    """The data has no attach_grad: its ``dx = g . W`` is not computed, the weights' are."""
    graph = seed_mlp(batch=4)
    arrays = [_nd(*n.aval[0].shape, seed=i) * 0.1 for i, n in enumerate(graph.inputs)]
    grads = []
    for hybrid in (False, True):
        xs = [a.copy() for a in arrays]
        for x in xs[1:]:  # the parameters only
            x.attach_grad()
        op = CachedOp(graph)
        with mx.autograd.record():
            out = op(*xs) if hybrid else _imperative_mlp(xs)
            loss = (out * out).sum()
        loss.backward()
        grads.append([x.grad.asnumpy() for x in xs[1:]])
    backward = op.code.split("def backward")[1]
    # 3 weight gradients + 2 hidden-layer dx, no data dx (2-D dots call dot_c, the C function)
    assert backward.count("= dot(") + backward.count("= dot_c(") == 5
    assert xs[0].grad is None
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    plain = CachedOp(graph)
    with mx.autograd.record():  # nothing wants a gradient: the forward program only
        plain(*arrays)
    assert plain.code.count("def forward") == 1


def _imperative_mlp(xs: list) -> mx.nd.NDArray:
    value = xs[0]
    for i in range(3):
        value = mx.nd.FullyConnected(value, xs[1 + 2 * i], xs[2 + 2 * i],
                                     num_hidden=xs[1 + 2 * i].shape[0])
        if i < 2:
            value = mx.nd.relu(value)
    return value


def test_graph_with_unknown_input_shapes_is_inferred_per_call():
    x = ir.var("x")
    graph = ir.Graph.from_outputs([ir.call("relu", [x.out()]).out()])
    op = CachedOp(graph)
    assert op(_nd(3)).shape == (3,) and op(_nd(2, 2)).shape == (2, 2)
    assert aval(3) == shapes.infer_graph(graph, [aval(3)]).outputs[0].aval


def test_random_nodes_draw_the_imperative_stream_so_hybridize_keeps_the_numbers():
    """Each random node gets its own generator, drawn at push time in node order --
    the generators ``nd`` would have drawn for the same ops, one by one."""
    x = ir.var("x", aval(4, 5))
    first = ir.call("_dropout_mask", [x.out()], {"p": 0.5}, name="mask0")
    second = ir.call("_dropout_mask", [x.out()], {"p": 0.3}, name="mask1")
    product = ir.call("broadcast_mul", [first.out(), second.out()], name="both")
    graph = ir.Graph.from_outputs([product.out()])
    data = _nd(4, 5)
    results = []
    for hybrid in (False, True):
        mx.random.seed(7)
        with mx.autograd.train_mode():
            if hybrid:
                results.append(CachedOp(graph)(data).asnumpy())
            else:
                masks = mx.nd._dropout_mask(data, p=0.5), mx.nd._dropout_mask(data, p=0.3)
                results.append((masks[0] * masks[1]).asnumpy())
    np.testing.assert_array_equal(results[0], results[1])
    assert len(np.unique(results[0])) > 1  # it really dropped something


def test_debug_flag_prints_each_compiled_program(capsys):
    from hybridlab import config

    with config.Context(DEBUG=1):
        CachedOp(bias_relu_chain())(_nd(4, 8), _nd(8))
    printed = capsys.readouterr().out
    assert printed.startswith("# <hybridlab-forward-") and "def forward(x, b, *, rt=()):" in printed


INTEGER_PROGRAMS = {
    "sqrt": lambda F, x: F.sqrt(x),
    "exp-sqrt-div": lambda F, x: F.exp(F.sqrt(x)) / 2,
    "relu-div-plus": lambda F, x: F.relu(x) / 3 + 1.5,
    "rdiv-rminus": lambda F, x: 1 - 7 / (x + 1),
}


@pytest.mark.parametrize("static_alloc", [False, True])
@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("name", sorted(INTEGER_PROGRAMS))
def test_integer_maths_compiled_equals_imperative(name, static_alloc, fuse):
    """Every path keeps the node's dtype: int32 in, int32 out, truncated like nd does."""
    build = INTEGER_PROGRAMS[name]
    x = mx.nd.array(np.arange(6), dtype="int32")
    expected = build(mx.nd, x)
    disabled = () if fuse else ("fuse_elementwise",)
    op = CachedOp(build(mx.sym, mx.sym.var("x")), static_alloc=static_alloc,
                  disabled_passes=disabled)
    for _ in range(2):  # the second call reuses static buffers
        got = op(x)
        assert got.dtype == np.int32 and got.asnumpy().dtype == np.int32
        np.testing.assert_array_equal(got.asnumpy(), expected.asnumpy())
    graph = op._last.forward.graph
    assert np.dtype(evaluate(graph, x.asnumpy())[0].dtype) == np.int32


def test_int32_plus_float32_is_float32_in_every_mode():
    a, b = mx.nd.array([1, 2], dtype="int32"), mx.nd.array([0.5, 0.25])
    assert (a + b).dtype == np.float32 and (a + b).asnumpy().dtype == np.float32
    total = mx.sym.var("a") + mx.sym.var("b")
    assert total.infer_type(a="int32", b="float32")[1] == [np.float32]
    got = CachedOp(total)(a, b)
    assert got.asnumpy().dtype == np.float32
    np.testing.assert_array_equal(got.asnumpy(), [1.5, 2.25])


def test_the_last_signature_fast_path_still_notices_every_change():
    """Hits reuse the entry of the last call; a new shape, dtype, number of inputs or
    training flag must still go to its own program (NOTE [The last signature first])."""
    op = CachedOp(bias_relu_chain())
    x, b = _nd(4, 8), _nd(8)
    for _ in range(3):
        op(x, b)
    op(_nd(2, 8), b)  # new shape
    op(x.astype("float64"), b.astype("float64"))  # new dtype
    with mx.autograd.train_mode():  # new training flag
        op(x, b)
    op(mx.nd.array(x.asnumpy()), b)  # equal shape and dtype, a fresh aval object: a hit
    assert op.stats == {"hits": 3, "misses": 4}
    assert op(_nd(2, 8), b).shape == (2, 8) and op(x, b).shape == (4, 8)
    with pytest.raises(TypeError, match=r"takes 2 inputs \['x', 'b'\], got 3"):
        op(x, b, b)
    expected = evaluate(bias_relu_chain(), x.asnumpy(), b.asnumpy())[0]
    np.testing.assert_allclose(op(x, b).asnumpy(), expected)


def test_an_input_that_is_not_an_ndarray_is_a_clear_error():
    wanted = r"inputs \['x', 'b'\] must be NDArrays, got \(ndarray, NDArray\)"
    with pytest.raises(TypeError, match=wanted):
        CachedOp(bias_relu_chain())(np.ones((4, 8), np.float32), _nd(8))


def _failed_array(shape: tuple) -> mx.nd.NDArray:
    """An NDArray whose op failed, the failure already reported (its buffer stays None)."""
    from hybridlab.errors import MXNetError
    from hybridlab.ops.registry import Aval, Kind, OpDef

    def failing(data):
        raise FloatingPointError("boom")
    op = OpDef("broken_kernel", failing, lambda a: [Aval(a.shape, a.dtype)], None,
               Kind.ELEMENTWISE)
    broken = mx.nd._apply(op, [mx.nd.ones(shape)], {})
    with pytest.raises(MXNetError, match="operator 'broken_kernel' failed"):
        broken.wait_to_read()  # reported once; from now on it just has no values
    return broken


@pytest.mark.parametrize("engine_name", ["ThreadedEngine", "StepEngine"])
def test_an_input_whose_op_failed_gets_ndarrays_error_not_a_crash_in_numpy(engine_name):
    from hybridlab.errors import MXNetError

    with engine.engine_scope(engine_name):
        bad, op = _failed_array((4, 8)), CachedOp(bias_relu_chain())
        never = r"(?s)shape \(4, 8\) has no values: operator 'broken_kernel'.*boom"
        with pytest.raises(MXNetError, match=never) as info:
            op(bad, _nd(8)).wait_to_read()  # the program refuses when it runs
        cause = info.value
        while cause.__cause__ is not None:
            cause = cause.__cause__
        assert isinstance(cause, FloatingPointError)
        assert op(_nd(4, 8), _nd(8)).asnumpy().shape == (4, 8)  # the op itself is fine


def test_zero_dimensional_results_are_arrays():
    """A ufunc on a 0-d array returns a numpy scalar: only the outputs of shape () are
    converted, the others are passed on as they are (NOTE [0-d results] in codegen)."""
    from hybridlab.ndarray import from_numpy
    from hybridlab.ops.registry import get

    x = mx.sym.var("x")
    op = CachedOp(mx.sym.Group([mx.sym.relu(x), mx.sym.relu(mx.sym.var("y"))]))
    zero_d = from_numpy(np.array(-1.5, np.float32))
    assert not isinstance(get("relu").kernel(zero_d.asnumpy()), np.ndarray)  # the hazard
    scalar, vector = op(zero_d, _nd(5))
    assert type(scalar.asnumpy()) is np.ndarray and scalar.asnumpy().shape == ()
    assert type(vector.asnumpy()) is np.ndarray and vector.shape == (5,)
    assert op._last.forward.scalar_outputs == (0,)


@pytest.mark.parametrize("static_alloc", [False, True])
def test_a_fused_group_never_overwrites_a_buffer_it_also_reads_through_a_view(static_alloc):
    """exp(y) + y.reshape(...) fuses into one group whose first input is y; the group must
    not write exp(y) over y while its second step still reads y through the reshape."""
    x = sym.var("x")
    y = sym.relu(x)
    out = sym.tanh(sym.exp(y) + y.reshape((0, -1)))
    values = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    got = CachedOp(out, static_alloc=static_alloc)(nd.array(values)).asnumpy()
    kept = np.maximum(values, 0)
    np.testing.assert_allclose(got, np.tanh(np.exp(kept) + kept), rtol=1e-6)


def test_nd_cached_op_runs_a_symbol_with_mxnets_call_and_out():
    import hybridlab as mx

    op = mx.nd.CachedOp(mx.sym.var("a") * 2 + mx.sym.var("b"))  # inputs in list_inputs order
    a, b = mx.nd.array([1.0, 2.0]), mx.nd.array([10.0, 20.0])
    assert op(a, b).asnumpy().tolist() == [12.0, 24.0]
    out = mx.nd.zeros((2,))
    assert op(a, b, out=out) is out and out.asnumpy().tolist() == [12.0, 24.0]
    a.attach_grad()
    with mx.autograd.record():
        op(a, b).sum().backward()
    assert a.grad.asnumpy().tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="unknown flags"):
        mx.nd.CachedOp(mx.sym.var("a"), flags=[("inline_limit", 2)])


def test_a_short_program_runs_in_the_caller_of_an_idle_threaded_engine(monkeypatch):
    """NOTE [Run now]: a threaded engine times a program's first calls; once it is known
    short, a call on the idle engine computes its result itself (values before any wait),
    and one known long still goes to a worker."""
    from hybridlab.graph import cached_op

    x, b = _nd(4, 8), _nd(8, seed=1)
    expected = evaluate(bias_relu_chain(), x.asnumpy(), b.asnumpy())[0]
    for threshold, short in ((10.0, True), (0.0, False)):
        monkeypatch.setattr(cached_op, "SHORT", threshold)  # the verdict, not the clock
        op = CachedOp(bias_relu_chain())
        with engine.engine_scope("ThreadedEngine"):
            for _ in range(cached_op.TIMED_CALLS):
                assert op._last is None or op._last.short is None
                op(x, b).wait_to_read()
            assert op._last.short is short
            y = op(x, b)
            if short:
                assert y._data is not None  # run by the call itself, nothing pushed
            np.testing.assert_allclose(y.asnumpy(), expected)


def test_an_error_in_a_program_run_at_once_reports_at_the_sync_point(monkeypatch):
    """A program run in the caller (NOTE [Run now]) that raises fails its result as a
    pushed op would: on a threaded engine at the next wait, with the error as its cause;
    the engine stays usable."""
    from hybridlab.errors import MXNetError
    from hybridlab.graph import cached_op

    monkeypatch.setattr(cached_op, "SHORT", 10.0)
    op = CachedOp(mx.sym.broadcast_div(mx.sym.var("x"), mx.sym.var("y")))
    x, zero, one = _nd(2, 3), mx.nd.zeros((2, 3)), mx.nd.ones((2, 3))
    with engine.engine_scope("ThreadedEngine"):
        for _ in range(cached_op.TIMED_CALLS):
            op(x, one).wait_to_read()
        with np.errstate(divide="raise"):
            y = op(x, zero)  # raises in the caller's thread, at once: reported later
        with pytest.raises(MXNetError, match="CachedOp") as info:
            y.wait_to_read()
        cause = info.value
        while cause.__cause__ is not None:
            cause = cause.__cause__
        assert isinstance(cause, FloatingPointError)
        np.testing.assert_allclose(op(x, one).asnumpy(), x.asnumpy())
