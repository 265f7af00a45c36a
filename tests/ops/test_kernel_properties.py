"""Property tests: the geometry-heavy kernels against naive references on random shapes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_registry_table import _conv_ref, _pool_ref

from hybridlab.ops import eager
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
    np.testing.assert_allclose(out, expected, rtol=1e-12)


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
