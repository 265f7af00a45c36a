"""Property tests: the geometry-heavy kernels against naive references on random shapes,
and the memory facts the planner takes from the registry (``kernel_out``, ``workspace``)
checked on the real kernels."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_registry_table import ROWS, _conv_ref, _inputs, _pool_ref

from hybridlab.ops import OPS, Aval, eager
from hybridlab.ops.shape import reshape_codes

pairs = st.tuples(st.integers(1, 3), st.integers(1, 3))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(4, 8), st.integers(4, 8),
       st.integers(1, 3), pairs, pairs, st.tuples(st.integers(0, 2), st.integers(0, 2)),
       pairs, st.integers(0, 1000))
def test_convolution_matches_the_loop_reference(n, c, h, w, f, kernel, stride, pad, dilate,
                                                seed):
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilate)]
    if reach[0] > h + 2 * pad[0] or reach[1] > w + 2 * pad[1]:
        return
    rng = np.random.default_rng(seed)
    x, weight = rng.normal(size=(n, c, h, w)), rng.normal(size=(f, c, *kernel))
    bias = rng.normal(size=f)
    out = eager.Convolution(x, weight, bias, kernel=kernel, stride=stride, pad=pad,
                            dilate=dilate, num_filter=f).asnumpy()
    expected = _conv_ref(x, weight, bias, stride=stride, pad=pad, dilate=dilate)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 8), st.integers(4, 8), pairs, pairs, st.sampled_from(["max", "avg"]),
       st.integers(0, 1000))
def test_pooling_matches_the_loop_reference(h, w, kernel, stride, pool_type, seed):
    pad = (kernel[0] // 2, kernel[1] // 2)
    x = np.random.default_rng(seed).normal(size=(2, 3, h, w))
    out = eager.Pooling(x, kernel=kernel, stride=stride, pad=pad, pool_type=pool_type).asnumpy()
    if pool_type == "max":
        expected = _pool_ref(x, kernel, stride, pad)
    else:
        expected = _pool_ref(x, kernel, stride, pad, _sum_without_inf) / (kernel[0] * kernel[1])
    # atol: a window whose values nearly cancel sums to ~1e-6 in another order than the loop
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-14)


def _sum_without_inf(patch, axis):
    return np.where(np.isinf(patch), 0, patch).sum(axis=axis)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3),
       st.lists(st.integers(1, 3), min_size=0, max_size=2), st.integers(1, 4), st.booleans())
def test_dot_contracts_last_axis_with_first(lead, tail, inner, transpose_b):
    rng = np.random.default_rng(0)
    lhs, rhs = rng.normal(size=(*lead, inner)), rng.normal(size=(inner, *tail))
    stored = rhs.transpose() if transpose_b else rhs
    out = eager.dot(lhs, stored, transpose_b=transpose_b).asnumpy()
    expected = np.tensordot(lhs, rhs, 1)
    np.testing.assert_allclose(out, expected.reshape(expected.shape or (1,)), rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=4))
def test_merge_and_split_codes_undo_each_other(shape):
    merged = reshape_codes(tuple(shape), (-3, -2))
    assert merged == (shape[0] * shape[1], *shape[2:])
    assert reshape_codes(merged, (-4, shape[0], -1, -2)) == tuple(shape)


# --- kernel_out: the same numbers, written into the buffer it is given ---------------------

_OUT_ROWS = [pytest.param(row, id=row.id) for row in ROWS if OPS[row.op].kernel_out is not None]


def _result_aval(row, arrays):
    op = OPS[row.op]
    return op.infer(*(Aval(a.shape, a.dtype) for a in arrays), **op.parse_attrs(row.attrs))[0]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("row", _OUT_ROWS)
def test_kernel_out_writes_the_kernels_exact_result_into_its_buffer(row, dtype):
    """Generated code calls ``kernel_out`` where ``nd`` calls ``kernel``: bit for bit the
    same result, in the very buffer given (so an arena slot really holds it). Integer
    inputs are -2..1, so some ops divide by zero: the warnings are not the point."""
    op, arrays = OPS[row.op], _inputs(row, np.dtype(dtype))
    attrs = op.parse_attrs(row.attrs)
    aval = _result_aval(row, arrays)
    out = np.full(aval.shape, 7, aval.dtype)  # not zeros: a kernel must not rely on them
    with np.errstate(all="ignore"):
        expected = op.kernel(*arrays, **attrs)
        assert op.kernel_out(*arrays, out=out, **attrs) is out
        np.testing.assert_array_equal(out, expected)
        if op.can_overwrite(attrs) and (arrays[0].shape, arrays[0].dtype) == (aval.shape,
                                                                             aval.dtype):
            first = arrays[0].copy()
            op.kernel_out(first, *arrays[1:], out=first, **attrs)  # over its own first input
            np.testing.assert_array_equal(first, expected)


# --- workspace: the scratch a kernel declares is the scratch it takes ------------------------

# numpy's ufuncs allocate iteration buffers of np.getbufsize() elements per operand when
# they loop over strided or cast operands; the declarations leave these out. Three such
# float64 buffers bound them, whatever the array sizes: that, and 2 %, is the tolerance.
SLACK = 3 * np.getbufsize() * 8

F32 = np.dtype("float32")
CONV_LAYERS = [  # (data shape, filters, geometry): batches past one chunk of ops/conv.py
    ((96, 1, 28, 28), 6, {"kernel": (5, 5)}),  # LeNet's first layer ...
    ((64, 6, 12, 12), 16, {"kernel": (5, 5)}),  # ... and its second
    ((160, 3, 20, 20), 8, {"kernel": (3, 3), "pad": (1, 2), "stride": (2, 1)}),
    ((160, 3, 16, 16), 8, {"kernel": (3, 3), "dilate": (2, 2), "pad": (2, 2)}),
]
POOL_LAYERS = [  # (data shape, attributes)
    ((512, 6, 24, 24), {"kernel": (2, 2), "stride": (2, 2)}),  # LeNet's, in 3 chunks
    ((160, 6, 24, 24), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    ((64, 6, 24, 24), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"}),
    ((64, 6, 24, 24), {"kernel": (2, 2), "stride": (2, 2), "pool_type": "sum"}),
    ((32, 6, 25, 25), {"kernel": (2, 2), "stride": (2, 2), "pool_type": "avg",
                       "pooling_convention": "full", "count_include_pad": False}),
]


def _result_shape(name, shapes, attrs):
    op = OPS[name]
    return op.infer(*(Aval(s, F32) for s in shapes), **op.parse_attrs(attrs))[0].shape


def _workspace_cases():
    for shape, filters, geometry in CONV_LAYERS:
        attrs = {**geometry, "num_filter": filters}
        weight = (filters, shape[1], *geometry["kernel"])
        grad = _result_shape("Convolution", [shape, weight], attrs)
        yield pytest.param("Convolution", [shape, weight, (filters,)], attrs, id=f"conv{shape}")
        yield pytest.param("_conv_data_grad", [grad, weight, shape], attrs, id=f"data{shape}")
        yield pytest.param("_conv_weight_grad", [grad, shape], attrs, id=f"weight{shape}")
    for shape, attrs in POOL_LAYERS:
        pooled = _result_shape("Pooling", [shape], attrs)
        yield pytest.param("Pooling", [shape], attrs, id=f"pool{attrs}")
        yield pytest.param("_pooling_grad", [pooled, shape], attrs, id=f"pool_grad{attrs}")


def _measured_scratch(name, arrays, attrs, out_form: bool) -> int:
    """Bytes the kernel allocates at its peak, beyond its inputs and its result."""
    op = OPS[name]
    parsed = op.parse_attrs(attrs)
    out = np.empty(_result_shape(name, [a.shape for a in arrays], attrs), F32)

    def run():
        return op.kernel_out(*arrays, out=out, **parsed) if out_form else op.kernel(*arrays,
                                                                                    **parsed)

    run()  # numpy's first call of a function may set up caches
    tracemalloc.start()
    try:
        result = run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - (0 if out_form else result.nbytes)


@pytest.mark.parametrize("out_form", [False, True], ids=["kernel", "kernel_out"])
@pytest.mark.parametrize(("name", "shapes", "attrs"), list(_workspace_cases()))
def test_declared_workspace_is_the_scratch_the_kernel_takes(name, shapes, attrs, out_form):
    """``OpDef.workspace`` is what the memory plan counts at the op's step; the real
    kernel, traced by ``tracemalloc``, takes that much and no more (within SLACK)."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(F32) for shape in shapes]
    op = OPS[name]
    declared = op.workspace(*(Aval(s, F32) for s in shapes), **op.parse_attrs(attrs))
    measured = _measured_scratch(name, arrays, attrs, out_form)
    assert abs(measured - declared) <= 0.02 * declared + SLACK, (declared, measured)


def test_convolution_scratch_stays_bounded_whatever_the_batch():
    """The kernels walk the batch in chunks: LeNet's first layer at batch 1024 takes the
    scratch it takes at batch 96 (a whole-batch im2col would be 59 MB)."""
    attrs = {"kernel": (5, 5), "num_filter": 6}
    small, large = [OPS["Convolution"].workspace(Aval((n, 1, 28, 28), F32),
                                                 Aval((6, 1, 5, 5), F32),
                                                 **OPS["Convolution"].parse_attrs(attrs))
                    for n in (96, 1024)]
    assert small == large < 1024 * 25 * 24 * 24 * 4 / 16
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(F32) for s in [(1024, 1, 28, 28), (6, 1, 5, 5)]]
    assert _measured_scratch("Convolution", arrays, attrs, out_form=True) <= large + SLACK


def test_convolution_kernels_take_an_empty_batch():
    """Zero images: empty results, and a zero weight gradient (nothing to sum)."""
    attrs = OPS["Convolution"].parse_attrs({"kernel": (3, 3), "num_filter": 2, "pad": (1, 1)})
    x, w = np.zeros((0, 1, 8, 8), F32), np.ones((2, 1, 3, 3), F32)
    g = np.zeros((0, 2, 8, 8), F32)
    assert OPS["Convolution"].kernel(x, w, **attrs).shape == (0, 2, 8, 8)
    assert OPS["_conv_data_grad"].kernel(g, w, x, **attrs).shape == (0, 1, 8, 8)
    np.testing.assert_array_equal(OPS["_conv_weight_grad"].kernel(g, x, **attrs), 0 * w)
