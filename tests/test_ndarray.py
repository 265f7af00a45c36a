"""NDArray semantics: shapes at once, values at sync points, MXNet's repr, indexing,
in-place ordering on every engine, save/load without pickle, per-op errors."""

from __future__ import annotations

import pickle
from typing import Any, Callable

import _sync
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import autograd, engine, nd
from hybridlab.errors import (
    ArrayFileError,
    InplaceGradError,
    MXNetError,
    NoGPUError,
    NotScalarError,
    ShapeError,
)

ENGINES = ["NaiveEngine", "ThreadedEngine", "StepEngine"]
TIMEOUT = 60.0
pytestmark = pytest.mark.timeout(240)  # pytest-timeout: a deadlock fails this module fast


def within(fn: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    return _sync.within(fn, timeout)


@pytest.fixture(params=ENGINES)
def any_engine(request):
    with engine.engine_scope(request.param) as eng:
        yield eng


@pytest.fixture
def step_engine():
    with engine.engine_scope("StepEngine") as eng:
        yield eng


def test_repr_matches_mxnet():
    assert repr(nd.array([[3, 3]])) == "\n[[3. 3.]]\n<NDArray 1x2 @cpu(0)>"
    values = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    assert repr(nd.array(values)) == f"\n{values}\n<NDArray 3x4 @cpu(0)>"
    assert str(nd.array([1, 2], dtype="int32")) == "\n[1 2]\n<NDArray 2 @cpu(0)>"


@pytest.mark.parametrize("source, dtype, expected", [
    ([1, 2], None, np.float32),
    (np.arange(3.0), None, np.float32),  # float64 numpy data becomes float32, as in MXNet
    (np.arange(3), None, np.float32),
    ([1, 2], "int32", np.int32),
    (np.arange(3.0), "float64", np.float64),
])
def test_nd_array_dtype(source, dtype, expected):
    x = nd.array(source, dtype=dtype)
    assert x.dtype == expected
    np.testing.assert_array_equal(x.asnumpy(), np.asarray(source, dtype=expected))


def test_nd_array_from_ndarray_keeps_dtype_and_scalar_is_1d():
    x = nd.array(nd.array([1, 2], dtype="int32"))
    assert x.dtype == np.int32
    assert nd.array(5).shape == (1,)
    with pytest.raises(TypeError, match="nd.array: cannot make a numeric array"):
        nd.array([[1, 2], [3]])


def test_shape_known_before_any_op_runs(step_engine):
    y = nd.ones((2, 3)) * 2 + nd.ones((1, 3))
    assert (y.shape, y.dtype) == ((2, 3), np.float32)
    assert y.sum().shape == (1,)  # reductions give (1,), never a 0-d array
    assert step_engine.ready  # nothing ran yet: the ops wait in the queue
    np.testing.assert_array_equal(y.asnumpy(), np.full((2, 3), 3.0))


def test_shape_error_raised_at_the_call_naming_op_and_shapes(step_engine):
    a, b = nd.ones((2, 3)), nd.ones((4,))
    pushed = len(step_engine.tasks)
    with pytest.raises(ShapeError, match=r"broadcast_add.*\(2, 3\).*\(4,\)"):
        a + b
    with pytest.raises(ShapeError, match="dot"):
        nd.dot(a, a)
    assert len(step_engine.tasks) == pushed  # the failed calls pushed nothing


def test_input_errors_name_the_op_and_argument():
    x = nd.ones((2,))
    with pytest.raises(TypeError, match="broadcast_add: missing input 'rhs'"):
        nd.broadcast_add(x)
    with pytest.raises(TypeError, match="relu: input 'data' must be an NDArray, got list"):
        nd.relu([1.0, 2.0])
    with pytest.raises(TypeError, match="broadcast_add: input 'rhs' must be an NDArray"):
        nd.broadcast_add(x, np.ones(2))
    with pytest.raises(TypeError, match="relu takes 1 input"):
        nd.relu(x, x, x)


def test_unknown_names_suggest_the_nearest_operator():
    for name, message in [("sofmax", "no operator or function 'sofmax'; did you mean 'softmax'"),
                          ("FULLYCONNECTED", "did you mean 'FullyConnected'"),
                          ("nonexistent", "'nonexistent'; see dir\\(nd\\)")]:
        with pytest.raises(AttributeError, match=message):
            getattr(nd, name)
    assert not hasattr(nd, "__path__") and hasattr(nd, "softmax")


def test_asscalar_and_asnumpy():
    assert nd.array([2.5]).asscalar() == np.float32(2.5)
    assert isinstance(nd.array([2.5]).asscalar(), np.float32)
    with pytest.raises(NotScalarError, match=r"exactly one element, got shape \(2,\)"):
        nd.array([1, 2]).asscalar()
    x = nd.array([1, 2])
    values = x.asnumpy()
    values[0] = 100  # a copy: the array is unchanged
    assert x.asnumpy()[0] == 1


def test_python_protocols():
    x = nd.array([[1, -2], [3, 4]])
    assert (len(x), x.size, x.ndim) == (2, 4, 2)
    np.testing.assert_array_equal(np.stack([row.asnumpy() for row in x]), x.asnumpy())
    np.testing.assert_array_equal((-x).asnumpy(), -x.asnumpy())
    np.testing.assert_array_equal(abs(x).asnumpy(), np.abs(x.asnumpy()))
    np.testing.assert_array_equal(x.T.asnumpy(), x.asnumpy().T)
    assert bool(nd.array([1])) and not bool(nd.array([0]))
    with mx.np_shape():  # MXNet makes an empty array only with numpy's shapes on
        assert not bool(nd.zeros((0,)))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(x)
    np.testing.assert_array_equal((2 * x - 1).asnumpy(), 2 * x.asnumpy() - 1)
    np.testing.assert_array_equal((np.float32(2) * x).asnumpy(), 2 * x.asnumpy())
    assert float(nd.array([1.5])) == 1.5


def test_methods_mirror_operators():
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = nd.array(values)
    assert x.reshape((0, -1)).shape == (2, 3)
    assert x.reshape(3, 2).shape == (3, 2) and x.reshape(shape=(6,)).shape == (6,)
    np.testing.assert_array_equal(x.sum(axis=1, keepdims=True).asnumpy(),
                                  values.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(x.mean().asnumpy(), [values.mean()])
    np.testing.assert_array_equal(x.max(axis=0).asnumpy(), values.max(axis=0))
    np.testing.assert_array_equal(x.clip(1, 4).asnumpy(), values.clip(1, 4))
    np.testing.assert_allclose(x.exp().asnumpy(), np.exp(values), rtol=1e-6)
    np.testing.assert_array_equal(x.transpose(1, 0).asnumpy(), values.T)
    np.testing.assert_array_equal(x.flatten().asnumpy(), values.reshape(2, 3))
    assert x.expand_dims(axis=1).shape == (2, 1, 3)
    assert x.astype("int32").dtype == np.int32 and x.astype("float32", copy=False) is x
    assert x.argmax(axis=1).asnumpy().tolist() == [2, 2]


def test_context():
    x = nd.ones((2,))
    assert repr(mx.cpu()) == "cpu(0)" and mx.cpu(0) == mx.cpu() == x.context == x.ctx
    assert x.as_in_context(mx.cpu()) is x
    with pytest.raises(NoGPUError, match="CPU only"):
        mx.gpu()
    with pytest.raises(MXNetError):  # MXNet's try/except-MXNetError fallback still works
        nd.zeros((2,), ctx=mx.gpu(0))
    assert mx.context.num_gpus() == 0
    assert nd.zeros((2,), ctx=mx.cpu()).context == mx.cpu()
    np.testing.assert_array_equal(nd.empty((2, 1)).asnumpy(), np.zeros((2, 1)))
    with mx.cpu(0) as ctx:
        assert mx.context.current_context() is ctx


def test_copy_copyto_out_and_detach(any_engine):
    x = nd.array([1, 2])
    y = x.copy()
    x += 1
    np.testing.assert_array_equal(y.asnumpy(), [1, 2])
    target = nd.zeros((2,))
    assert x.copyto(target) is target
    np.testing.assert_array_equal(target.asnumpy(), [2, 3])
    out = nd.zeros((2,))
    assert nd.relu(x - 2.5, out=out) is out
    np.testing.assert_array_equal(out.asnumpy(), [0, 0.5])
    with pytest.raises(ValueError, match=r"relu: the result has shape \[\(2,\)\] but.*\(3,\)"):
        nd.relu(x, out=nd.zeros((3,)))
    with pytest.raises(ValueError, match="in-place ops cannot change a shape"):
        x += nd.ones((3, 2))
    np.testing.assert_array_equal(x.detach().asnumpy(), x.asnumpy())


INDEX_KEYS = [
    1, -1, slice(1, 3), slice(None, None, 2), (slice(None), 0), (1, 2), (1, slice(1, None)),
    (Ellipsis, 1), (slice(None, None, -1),), (slice(3, 0, -2), slice(None)), (),
]


@pytest.mark.parametrize("key", INDEX_KEYS)
def test_getitem_matches_numpy(key):
    values = np.arange(20, dtype=np.float32).reshape(4, 5)
    expected = values[key]
    got = nd.array(values)[key].asnumpy()
    np.testing.assert_array_equal(got, expected.reshape(-1) if expected.ndim == 0 else expected)


def test_kernel_failures_surface_at_the_sync_point(step_engine):
    from hybridlab.ops.registry import Aval, Kind, OpDef

    def failing(x):
        raise FloatingPointError("boom")

    same = lambda x: [Aval(x.shape, x.dtype)]  # noqa: E731
    broken = OpDef("broken_kernel", failing, same, None, Kind.ELEMENTWISE)
    wrong_shape = OpDef("wrong_shape", lambda x: x[:1], same, None, Kind.ELEMENTWISE)
    y = nd._apply(broken, [nd.ones((2,))], {})
    assert y.shape == (2,)  # nothing ran yet
    with pytest.raises(MXNetError, match="operator 'broken_kernel' failed with FloatingPointError"):
        y.asnumpy()
    z = nd._apply(wrong_shape, [nd.ones((2,))], {})
    with pytest.raises(MXNetError, match=r"kernel returned shape \(1,\).*registry bug"):
        z.wait_to_read()


def _broken(x):
    """An op whose kernel always fails (its output array is never computed)."""
    from hybridlab.ops.registry import Aval, Kind, OpDef

    def failing(data):
        raise FloatingPointError("boom")
    op = OpDef("broken_kernel", failing, lambda a: [Aval(a.shape, a.dtype)], None,
               Kind.ELEMENTWISE)
    return nd._apply(op, [x], {})


@pytest.mark.parametrize("engine_name", ["ThreadedEngine", "StepEngine"])
def test_an_array_whose_op_failed_keeps_saying_why_it_has_no_values(engine_name):
    with engine.engine_scope(engine_name):
        b = _broken(nd.ones((2,)))
        skipped = b * 2  # pushed before the failure is reported: skipped by the engine
        with pytest.raises(MXNetError, match="operator 'broken_kernel' failed"):
            b.asnumpy()  # the failure, reported once
        never = r"(?s)shape \([12],\) has no values: operator 'broken_kernel'.*boom.*pushed at"
        # reading b waits, then refuses; an op pushed on b fails when it runs -- the
        # failure is raised at the next sync point, like any op's (ARCHITECTURE.md, "The
        # engine after a failure"): never at the push, whose outcome would be timing
        for use in (repr, np.asarray, nd.NDArray.asnumpy, nd.NDArray.wait_to_read,
                    lambda x: x + 1, lambda x: nd.relu(x), lambda x: x.copyto(nd.zeros((2,))),
                    lambda x: nd.ones((2,)).__setitem__(0, x[0]),
                    lambda x: skipped.asnumpy()):  # b*2 was skipped: it names the root too
            with pytest.raises(MXNetError, match=never) as info:
                use(b)
                nd.waitall()
            assert _root_cause(info.value).__class__ is FloatingPointError
        b[0] = 1.0  # a partial write reads the rest of b: it fails when it runs
        with pytest.raises(MXNetError, match=never):
            nd.waitall()
        b[:] = 3.0  # a full overwrite heals it (the rule: after the report, b is healthy)
        np.testing.assert_array_equal(b.asnumpy(), [3, 3])
        np.testing.assert_array_equal((b + 1).asnumpy(), [4, 4])
        nd.waitall()


def _root_cause(error: BaseException) -> BaseException:
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def test_a_failed_inplace_op_keeps_the_old_values(step_engine):
    x, bad = nd.ones((2,)), _broken(nd.ones((2,)))
    x += bad  # skipped: x keeps its buffer
    with pytest.raises(MXNetError, match="'broken_kernel' failed"):
        x.asnumpy()
    np.testing.assert_array_equal(x.asnumpy(), [1, 1])  # as in MXNet: the old values
    nd.relu(x, out=bad)  # out= overwrites the failed array: healthy again
    np.testing.assert_array_equal(bad.asnumpy(), [1, 1])


@st.composite
def _shape_and_key(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    items = []
    for size in shape[:draw(st.integers(0, len(shape)))]:
        if draw(st.booleans()):
            items.append(draw(st.integers(-size, size - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-size - 1, size + 1))
            step = draw(st.sampled_from([None, 1, 2, -1, -2]))
            items.append(slice(draw(bound), draw(bound), step))
    return shape, tuple(items)


@settings(max_examples=60, deadline=None)
@given(_shape_and_key())
def test_getitem_and_setitem_match_numpy_on_random_keys(shape_and_key):
    shape, key = shape_and_key
    values = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    expected = values[key]
    x = nd.array(values)
    if expected.size == 0:  # MXNet's slice refuses empty results, and so does hybridlab
        with pytest.raises(ShapeError):
            x[key]
        return
    np.testing.assert_array_equal(x[key].asnumpy(), expected.reshape(x[key].shape))
    assert x[key].shape == (expected.shape or (1,))
    x[key] = -1.0
    values[key] = -1.0
    np.testing.assert_array_equal(x.asnumpy(), values)


def test_getitem_errors_and_array_index():
    x = nd.array(np.arange(6).reshape(2, 3))
    with pytest.raises(IndexError, match="index 2 is out of bounds for axis 0 with size 2"):
        x[2]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    np.testing.assert_array_equal(x[nd.array([1, 0])].asnumpy(), x.asnumpy()[[1, 0]])
    np.testing.assert_array_equal(x[[1, 1]].asnumpy(), x.asnumpy()[[1, 1]])
    np.testing.assert_array_equal(x[np.array([0])].asnumpy(), x.asnumpy()[[0]])
    everything = x[:]
    assert everything is not x  # a new array object ... that views x (NOTE [Views])
    x += 1
    np.testing.assert_array_equal(everything.asnumpy(), np.arange(6).reshape(2, 3) + 1)
    with pytest.raises(ShapeError, match="slice"):
        x[1:0]


@pytest.mark.parametrize("key, value", [
    (slice(None), 7.0), (0, 2.0), ((slice(1, 3), slice(None)), np.ones((2, 5))),
    ((slice(None), 1), np.arange(4)), ((Ellipsis, -1), 9.0), (1, "nd"),
])
def test_setitem_matches_numpy(any_engine, key, value):
    values = np.arange(20, dtype=np.float32).reshape(4, 5)
    x = nd.array(values)
    if isinstance(value, str):
        value = np.full(5, -1.0)
        x[key] = nd.array(value)
    else:
        x[key] = value
    values[key] = value
    np.testing.assert_array_equal(x.asnumpy(), values)


@pytest.mark.parametrize("call, error, message", [
    (lambda x, row: nd.transpose(x, axes=(3, 0)), ShapeError,
     r"axes \(3, 0\) are not a permutation.*0\.\.1 \(or -2\.\.-1\)"),
    (lambda x, row: nd.transpose(x, axes=(-3, -4)), ShapeError, "not a permutation"),
    (lambda x, row: nd.transpose(x, axes=(1,)), ShapeError, "not a permutation"),
    (lambda x, row: nd.transpose(x, axes=(0, 0)), ShapeError, "not a permutation"),
    (lambda x, row: nd.broadcast_to(row, shape=(-2, 3)), ShapeError,
     r"broadcast_to: target shape \(-2, 3\) has a negative size"),
    (lambda x, row: nd.broadcast_axis(row, axis=0, size=-2), ShapeError, "negative size"),
    (lambda x, row: nd.concat(dim=0), TypeError, "concat: needs at least one input array"),
    (lambda x, row: nd.stack(), TypeError, "stack: needs at least one input array"),
])
def test_bad_arguments_raise_at_the_call(step_engine, call, error, message):
    x, row = nd.ones((2, 3)), nd.ones((1, 3))
    pushed = len(step_engine.tasks)
    with pytest.raises(error, match=message):
        call(x, row)
    assert len(step_engine.tasks) == pushed  # refused before anything was pushed


def test_transpose_accepts_negative_axes(any_engine):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(nd.transpose(nd.array(values), axes=(-1, -2)).asnumpy(),
                                  values.T)


def test_split_into_one_part_gives_one_array(any_engine):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    part = nd.split(nd.array(values), num_outputs=1, axis=1)  # one output: an NDArray
    assert isinstance(part, nd.NDArray) and part.shape == (2, 3)
    np.testing.assert_array_equal(part.asnumpy(), values)


def test_setitem_shape_error_at_the_call():
    x = nd.zeros((2, 3))
    with pytest.raises(ValueError, match=r"cannot assign a value of shape \(4,\)"):
        x[0] = np.ones(4)


def test_inplace_ordering(any_engine):
    """Reads pushed before an in-place op see the old value, reads pushed after the new."""
    x = nd.array([1.0, 2.0])
    before = x * 1
    x += 10
    middle = x + 0
    x[0] = -1
    x *= 2
    after = x.copy()
    x[:] = nd.array([5.0, 6.0])
    x -= 1
    x /= 2
    np.testing.assert_array_equal(before.asnumpy(), [1, 2])
    np.testing.assert_array_equal(middle.asnumpy(), [11, 12])
    np.testing.assert_array_equal(after.asnumpy(), [-2, 24])
    np.testing.assert_array_equal(x.asnumpy(), [2, 2.5])


def test_inplace_under_record_is_refused():
    w = nd.ones((2,))
    w.attach_grad()
    with autograd.record():
        y = w * 2
        with pytest.raises(InplaceGradError, match=r"^Inplace operations \(\+=, -=, x\[:\]=, "
                           r"etc\) are not supported when recording with autograd: in-place "
                           r"write.*autograd.record"):
            w += 1
        with pytest.raises(InplaceGradError):
            y[0] = 3
    w += 1  # fine outside record (what Trainer.step does)
    np.testing.assert_array_equal(w.asnumpy(), [2, 2])


# --- save / load -------------------------------------------------------------------------
def test_save_load_round_trip(tmp_path):
    arrays = [nd.array([[1, 2]]), nd.array([3], dtype="int32")]
    fname = str(tmp_path / "arrays")
    nd.save(fname, arrays)
    assert (tmp_path / "arrays").exists() and not (tmp_path / "arrays.npz").exists()
    loaded = nd.load(fname)
    assert isinstance(loaded, list) and [a.dtype for a in loaded] == [np.float32, np.int32]
    for a, b in zip(arrays, loaded):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    params = {"net_dense0_weight": nd.ones((2, 3)), "file": nd.zeros((1,)), "a/b": nd.ones((1,))}
    nd.save(fname, params)
    loaded = nd.load(fname)
    assert list(loaded) == list(params)
    np.testing.assert_array_equal(loaded["net_dense0_weight"].asnumpy(), np.ones((2, 3)))
    nd.save(fname, nd.ones((2,)))
    assert len(nd.load(fname)) == 1
    plain = tmp_path / "plain.npz"  # the old .npz format is refused, saying how to convert
    np.savez(plain, w=np.ones((2, 2), np.float32), lr=np.float32(0.5))
    with pytest.raises(ArrayFileError, match="numpy .npz archive.*nd.save.*np.load"):
        nd.load(str(plain))


def test_save_rejects_bad_data(tmp_path):
    with pytest.raises(TypeError, match="must be an NDArray, list or dict"):
        nd.save(str(tmp_path / "x"), 3)
    with pytest.raises(TypeError, match="entry 'a' must be a str key and an NDArray"):
        nd.save(str(tmp_path / "x"), {"a": np.ones(2)})


class _Exploit:
    triggered = False

    def __reduce__(self):
        return (_set_triggered, ())


def _set_triggered():
    _Exploit.triggered = True
    return np.ones(1)


def test_load_malformed_files_never_run_pickle(tmp_path):
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"this is not an array file")
    with pytest.raises(ArrayFileError, match="not a file written by nd.save"):
        nd.load(str(garbage))
    evil = tmp_path / "evil.npz"
    np.savez(evil, weight=np.array([_Exploit()], dtype=object))
    with pytest.raises(ArrayFileError):
        nd.load(str(evil))
    assert not _Exploit.triggered
    pickled = tmp_path / "pickled"
    pickled.write_bytes(pickle.dumps(_Exploit()))
    with pytest.raises(ArrayFileError):
        nd.load(str(pickled))
    assert not _Exploit.triggered
    with pytest.raises(FileNotFoundError):
        nd.load(str(tmp_path / "missing"))


# --- the engines agree: random programs with in-place writes ------------------------------
_BINARY = ["__add__", "__sub__", "__mul__", "broadcast_maximum", "broadcast_minimum"]
_UNARY = ["relu", "tanh", "negative", "square", "sigmoid"]
_SHAPES = [(3, 4), (1, 4), (3, 1), (4,)]

_INDEX = st.integers(0, 199)  # which earlier array (modulo how many there are)
instruction = st.one_of(
    st.tuples(st.just("binary"), st.sampled_from(_BINARY), _INDEX, _INDEX),
    st.tuples(st.just("unary"), st.sampled_from(_UNARY), _INDEX, st.just(0)),
    st.tuples(st.just("scalar"), st.sampled_from(["__add__", "__mul__", "__rsub__"]),
              _INDEX, st.integers(-3, 3)),
    st.tuples(st.just("inplace"), st.sampled_from(["__iadd__", "__imul__", "__isub__"]),
              _INDEX, _INDEX),
    st.tuples(st.just("set_all"), st.sampled_from(["array", "scalar"]), _INDEX, _INDEX),
    st.tuples(st.just("set_row"), st.sampled_from(["array", "scalar"]), _INDEX, _INDEX),
    st.tuples(st.just("read"), st.just(""), _INDEX, st.just(0)),  # a sync point midway
)


def _broadcastable(*shapes: tuple) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def _fits(value: tuple, target: tuple) -> bool:
    """Can a value of shape ``value`` be written into a place of shape ``target``?"""
    return _broadcastable(value, target) and np.broadcast_shapes(value, target) == target


def _step(env: list, reads: list, kind: str, name: str, i: int, j: int) -> None:
    """One instruction on the arrays in ``env``; in-place ones overwrite ``env[i]``."""
    a, b = env[i % len(env)], env[j % len(env)]
    if kind == "binary" and _broadcastable(a.shape, b.shape):
        env.append(getattr(nd, name)(a, b) if name.startswith("b") else getattr(a, name)(b))
    elif kind == "unary":
        env.append(getattr(nd, name)(a))
    elif kind == "scalar":
        env.append(getattr(a, name)(float(j)))
    elif kind == "inplace" and _fits(b.shape, a.shape):
        getattr(a, name)(b)  # a += b: reads and overwrites a (b may be a itself)
    elif kind == "set_all":  # a[:] = v
        a[:] = b if name == "array" and _fits(b.shape, a.shape) else float(j % 7) - 3
    elif kind == "set_row":  # a[k] = v, for one index k of the first axis
        row_shape = a.shape[1:]
        use_b = name == "array" and len(b.shape) <= len(row_shape) and _fits(b.shape, row_shape)
        a[j % a.shape[0]] = b if use_b else float(j % 5) - 2
    elif kind == "read":
        reads.append(a.asnumpy())  # the current value, in the middle of the program


def _run_program(engine_name: Any, program: list, seed_values: list) -> list:
    with engine.engine_scope(engine_name):
        env = [nd.array(v) for v in seed_values]
        reads: list = []
        for kind, name, i, j in program:
            _step(env, reads, kind, name, i, j)
        results = reads + [x.asnumpy() for x in env]  # arrays made before a write keep
        nd.waitall()                                   # their old values
    return results


def _long_program(length: int = 200, seed: int = 0) -> list:
    """A fixed 200-op program (hypothesis mostly draws short lists) using every kind."""
    draw = np.random.default_rng(seed)
    kinds = {"binary": _BINARY, "unary": _UNARY, "scalar": ["__add__", "__mul__", "__rsub__"],
             "inplace": ["__iadd__", "__imul__", "__isub__"], "set_all": ["array", "scalar"],
             "set_row": ["array", "scalar"], "read": [""]}
    program = []
    for _ in range(length):
        kind = str(draw.choice(list(kinds)))
        program.append((kind, str(draw.choice(kinds[kind])), int(draw.integers(200)),
                        int(draw.integers(-3, 200))))
    return program


@settings(max_examples=20, deadline=None)
@given(st.lists(instruction, min_size=1, max_size=200), st.integers(0, 2**16))
@example(program=_long_program(), seed=1)
@example(program=_long_program(seed=2), seed=2)
def test_engines_agree_on_random_programs(program, seed):
    """Random programs of 1-200 ops with in-place writes (+=, x[:] = v, x[i] = v) and
    reads of overwritten arrays give bit-identical results on every engine."""
    rng = np.random.default_rng(seed)
    seed_values = [rng.normal(size=shape).astype(np.float32) for shape in _SHAPES]
    reference = within(lambda: _run_program("NaiveEngine", program, seed_values))
    for engine_name in ["StepEngine", engine.ThreadedEngine(1), engine.ThreadedEngine(2),
                        engine.ThreadedEngine(4)]:
        results = within(lambda name=engine_name: _run_program(name, program, seed_values))
        assert len(results) == len(reference)
        for expected, got in zip(reference, results):
            np.testing.assert_array_equal(got, expected)


def test_pickle_and_deepcopy_give_independent_arrays():
    a = nd.arange(6).reshape((2, 3)) + 1  # a view pickles as a plain array of its values
    for b in (pickle.loads(pickle.dumps(a)), __import__("copy").deepcopy(a)):
        np.testing.assert_array_equal(b.asnumpy(), a.asnumpy())
        assert b.context == mx.cpu(0) and (b + 0).shape == a.shape  # a whole NDArray
        b[:] = 0
        assert a.asnumpy().sum() == 21


def test_setstate_reads_mxnet_one_array_bytes():
    # MXNet's pickled state of arange(1) on a GPU: magic, dense, 1-d (1,), gpu 0, float32 0.0
    state = {"handle": bytearray(b"\xc9\xfa\x93\xf9" + bytes(4) + b"\x01\x00\x00\x00"
                                 + b"\x01" + bytes(7) + b"\x02" + bytes(3) + bytes(12))}
    array = nd.arange(5)  # (its pending op finishes first: nothing fails later, elsewhere)
    array.__setstate__(state)
    nd.waitall()
    assert array.shape == (1,) and array.asnumpy()[0] == 0.0
    with pytest.raises(mx.base.MXNetError, match="unexpected bytes"):
        array.__setstate__({"handle": bytes(state["handle"]) + b"\x00"})


@pytest.mark.parametrize("method, kwargs", [("squeeze", {"axis": 0}),
                                            ("expand_dims", {"axis": 1}), ("flatten", {})])
def test_inplace_shape_methods_share_memory(method, kwargs):
    data = nd.ones((1, 3, 2))
    copy = getattr(data, method)(**kwargs)
    view = getattr(data, method)(inplace=True, **kwargs)
    assert copy.shape == view.shape
    data[0] = -1
    assert copy.asnumpy().min() == 1 and view.asnumpy().max() == -1


@pytest.mark.parametrize("name, count, attrs", [
    ("sgd_mom_update", 3, {"momentum": 0.9}), ("adam_update", 4, {}),
    ("rmspropalex_update", 5, {}), ("ftrl_update", 4, {}), ("ftml_update", 5, {"t": 1}),
])
def test_update_operators_write_their_states_in_place(name, count, attrs):
    arrays = [nd.array(np.full((2, 3), 0.5 + i / 10)) for i in range(count)]
    before = [a.asnumpy() for a in arrays]
    result = getattr(nd, name)(*arrays, out=arrays[0], lr=0.1, **attrs)
    assert result is arrays[0]
    changed = [not np.array_equal(a.asnumpy(), b) for a, b in zip(arrays, before)]
    assert changed == [True, False] + [True] * (count - 2)  # weight and states, not grad


def test_ftrl_update_by_hand():
    w, g, z, n = nd.array([2.0]), nd.array([4.0]), nd.zeros((1,)), nd.zeros((1,))
    nd.ftrl_update(w, g, z, n, out=w, lr=0.5, lamda1=0.1, beta=1.0)
    # z = 4 - (sqrt(16) - 0) * 2 / 0.5 = -12; n = 16; w = (-0.1 + 12) / ((1 + 4) / 0.5)
    assert (z.asscalar(), n.asscalar()) == (-12.0, 16.0)
    assert w.asscalar() == pytest.approx(11.9 / 10)


def test_moveaxis_is_numpys():
    x = nd.zeros((4, 1, 2, 3))
    for source, destination in [(0, 2), (1, -1), ([0, 1], [2, 3]), ([3, 0], [1, 0])]:
        expected = np.moveaxis(np.zeros((4, 1, 2, 3)), source, destination).shape
        assert nd.moveaxis(x, source, destination).shape == expected
    for source, destination in [(4, 0), ([0, 0], [0, 1]), (0, [0, 1])]:
        with pytest.raises(ValueError, match="moveaxis"):
            nd.moveaxis(x, source, destination)
    assert x.tostype("default").shape == x.shape


def test_mxnets_older_row_functions():
    a, rows = nd.array(np.arange(6).reshape(2, 3)), nd.array([2, 0])
    assert nd.choose_element_0index(a, rows).asnumpy().tolist() == [2.0, 3.0]
    filled = nd.fill_element_0index(a, nd.array([9, 8]), rows)
    assert filled.asnumpy().tolist() == [[0, 1, 9], [8, 4, 5]]
    out = nd.zeros((2, 3))
    nd.onehot_encode(rows, out=out)
    assert out.asnumpy().tolist() == [[0, 0, 1], [1, 0, 0]]
    assert nd.concatenate([a, a], axis=1).shape == (2, 6)


def test_full_eye_and_linspace():
    out = nd.zeros((2, 2))
    nd.full((2, 2), 2, out=out)
    assert out.asnumpy().tolist() == [[2, 2], [2, 2]]
    np.testing.assert_array_equal(nd.eye(3, k=-1).asnumpy(), np.eye(3, k=-1))
    np.testing.assert_allclose(nd.linspace(10.5, 20.2, 7, dtype="int32").asnumpy(),
                               np.linspace(10.5, 20.2, 7, dtype="int32"))


def test_topk_gradient_goes_back_where_each_value_was_picked():
    a = nd.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    a.attach_grad()
    with autograd.record():
        top = nd.topk(a, k=2, ret_typ="value")
    top.backward(nd.array([[10.0, 20.0], [30.0, 40.0]]))
    assert top.asnumpy().tolist() == [[3.0, 2.0], [5.0, 4.0]]
    assert a.grad.asnumpy().tolist() == [[10.0, 0.0, 20.0], [0.0, 30.0, 40.0]]
    assert nd.topk(a, axis=None, k=2, ret_typ="mask").asnumpy().tolist() == [[0, 0, 0],
                                                                            [0, 1, 1]]


def test_runtime_features_are_all_disabled():
    features = mx.runtime.Features()
    assert not features.is_enabled("CUDA") and not features.is_enabled("int64_tensor_size")
    with pytest.raises(RuntimeError, match="unknown"):
        features.is_enabled("WARP_DRIVE")


def test_take_mode_raise_refuses_an_index_out_of_range():
    a = nd.arange(5)
    assert nd.take(a, nd.array([1, 4]), mode="raise").asnumpy().tolist() == [1.0, 4.0]
    for index in (7, -1):
        with pytest.raises(mx.base.MXNetError, match=f"index {index} is out of range"):
            nd.take(a, nd.array([index]), mode="raise").asnumpy()


def test_newaxis_and_index_lists_inside_a_tuple_index_as_numpy_does():
    values = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.float32)
    x = nd.array(values)
    for key in [None, (1, None, slice(1, 3)), (Ellipsis, None, 0),
                ([1, 0], slice(1, 3), [2, 3]), (1, [2, 0], np.array([[3], [1]])),
                (slice(None), None, nd.array([2, 0], dtype="int64"), [3, 1])]:
        np_key = tuple(k.asnumpy().astype(int) if isinstance(k, nd.NDArray) else k
                       for k in key) if isinstance(key, tuple) else key
        np.testing.assert_array_equal(x[key].asnumpy(), values[np_key])
    with pytest.raises(IndexError, match=r"shape \(2, 3, 4, 5\): index 7 is out of bounds"):
        x[0, [7]]


def test_an_advanced_index_scatters_its_gradient_back():
    x = nd.array(np.arange(12).reshape(3, 4))
    x.attach_grad()
    with autograd.record():
        y = x[[0, 2, 2], [1, 3, 3]]
    y.backward()
    expected = np.zeros((3, 4))
    expected[0, 1], expected[2, 3] = 1, 2  # picked twice: both gradients add up
    np.testing.assert_array_equal(x.grad.asnumpy(), expected)


def test_a_contiguous_basic_index_is_a_view_and_writes_through():
    x = nd.array(np.arange(2 * 3 * 4).reshape(2, 3, 4))
    assert nd.NDArray._basic_indexing_slice_is_contiguous((1, slice(1, 3)), (2, 3, 4))
    assert not nd.NDArray._basic_indexing_slice_is_contiguous((slice(None), 1), (2, 3, 4))
    block = x[1, 1:3]
    block[:] = -1
    assert (x.asnumpy()[1, 1:3] == -1).all() and x.asnumpy()[1, 0, 0] == 12
    column = x[:, 1]  # not contiguous: a copy, as in MXNet
    column[:] = 0
    assert x.asnumpy()[0, 1, 0] == 4


def test_crop_and_slice_assign_are_mxnets_operators():
    x = nd.ones((2, 3, 4))
    assert nd.crop(x, begin=(0, 1), end=(2, 3)).shape == (2, 2, 4)
    nd._internal._crop_assign(x, nd.zeros((2, 1, 3)), begin=(0, 0, 0), end=(2, 1, 3), out=x)
    assert x.asnumpy()[:, 0, :3].sum() == 0 and x.asnumpy().sum() == 24 - 6
    y = nd._internal._slice_assign_scalar(nd.ones((2, 2)), scalar=5, begin=(1,), end=(2,))
    assert y.asnumpy().tolist() == [[1, 1], [5, 5]]
    with pytest.raises(ShapeError, match=r"the value's shape \(3,\) is not the region's"):
        nd._internal._slice_assign(nd.ones((2, 2)), nd.ones(3), begin=(0,), end=(1,))
    a, b = nd.ones((2, 2)), nd.ones((1, 2))
    a.attach_grad(), b.attach_grad()
    with autograd.record():
        nd._internal._slice_assign(a, b * 3, begin=(0,), end=(1,)).sum().backward()
    assert a.grad.asnumpy().tolist() == [[0, 0], [1, 1]] and b.grad.asnumpy().tolist() == [[3, 3]]


def test_dlpack_capsules_carry_the_values_both_ways():
    x = nd.array(np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(nd.from_dlpack(x.to_dlpack_for_read()).asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(nd.from_dlpack(np.ones(3)).asnumpy(), np.ones(3))
    y = x.copy()
    shared = np.from_dlpack(nd._Capsule(nd.to_dlpack_for_write(y)))
    assert np.shares_memory(shared, y._values())  # a write through the capsule reaches y
    assert not np.shares_memory(y._values(), x._values())  # and y's buffer is its own
    capsule = nd.to_dlpack_for_read(x)
    nd.from_dlpack(capsule)
    with pytest.raises(ValueError, match="a capsule is read once"):
        nd.from_dlpack(capsule)
    with pytest.raises(TypeError, match="expected a DLPack capsule"):
        nd.from_dlpack([1, 2])


def test_numpy_reductions_all_and_any_read_the_values():
    big = nd.array([50000001], dtype="int32")
    assert np.all(big.round() == 50000001) and not np.any(big == 0)
    assert nd.array([[1, 0], [1, 1]]).all(axis=1).tolist() == [False, True]


def test_broadcast_like_on_chosen_axes():
    lhs = nd.ones((1, 2, 1))
    out = nd.broadcast_like(lhs, nd.zeros((5, 6, 7)), lhs_axes=(0, -1), rhs_axes=(2, 0))
    assert out.shape == (7, 2, 5)
    with pytest.raises(ShapeError, match="at least one"):
        nd.broadcast_like(lhs, nd.zeros((5, 6, 7)), lhs_axes=(), rhs_axes=())
    lhs.attach_grad()
    with autograd.record():
        nd.broadcast_like(lhs, nd.zeros((3, 1)), lhs_axes=(0,), rhs_axes=(0,)).sum().backward()
    assert lhs.grad.asnumpy().tolist() == [[[3], [3]]]


@pytest.mark.parametrize("training", [True, False])
def test_batchnorm_third_output_is_the_inverse_std_and_the_running_var_moves_by_the_var(training):
    """MXNet's BatchNorm(output_mean_var=True) returns 1 / sqrt(var + eps) as its third
    output (checked on MXNet 1.9.1: 3.4718 for a batch variance of 0.0820 and eps 1e-3;
    0.7069 = 1 / sqrt(2 + 1e-3) when predicting with a moving variance of 2), while the
    moving variance still moves towards the variance itself."""
    x = np.random.default_rng(0).random((4, 3, 2, 2)).astype(np.float32)
    moving_mean, moving_var = nd.zeros(3), nd.ones(3) * 2
    args = (nd.array(x), nd.ones(3), nd.zeros(3), moving_mean, moving_var)
    with autograd.record(train_mode=training):
        _, mean, invstd = nd.BatchNorm(*args, output_mean_var=True, eps=1e-3, fix_gamma=False)
    var = x.var(axis=(0, 2, 3)) if training else np.full(3, 2.0, np.float32)
    np.testing.assert_allclose(invstd.asnumpy(), 1 / np.sqrt(var + 1e-3), rtol=1e-5)
    np.testing.assert_allclose(mean.asnumpy(), x.mean(axis=(0, 2, 3)) if training else 0,
                               rtol=1e-5)
    expected = 0.9 * 2 + 0.1 * var if training else var  # momentum 0.9
    np.testing.assert_allclose(moving_var.asnumpy(), expected, rtol=1e-5)
