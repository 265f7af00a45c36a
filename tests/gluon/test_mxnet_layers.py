"""Layers MXNet's Gluon has beyond the 2-D ones: Conv1D/Conv3D, 1-D and 3-D pooling,
channel-last layouts. Each is checked against a direct numpy computation, and its
hybridized form (value and input gradient) against its imperative one."""

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, nd
from hybridlab.gluon import nn


def _both_ways(layer, x):
    """The layer's output and input gradient, imperatively and hybridized (must agree)."""
    layer.initialize()
    results = []
    for hybrid in (False, True):
        layer.hybridize(hybrid)
        data = x.copy()
        data.attach_grad()
        with autograd.record():
            out = layer(data)
        out.backward()
        results.append((out.asnumpy(), data.grad.asnumpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return results[0][0]


def _windows(x, kernel, stride, pad, fill):
    """Every window of an (N, C, *spatial) array, as a list of (output index, window)."""
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad], constant_values=fill)
    sizes = [(padded.shape[2 + i] - kernel[i]) // stride[i] + 1 for i in range(len(kernel))]
    for index in np.ndindex(*sizes):
        cut = tuple(slice(i * s, i * s + k) for i, s, k in zip(index, stride, kernel))
        yield index, padded[(slice(None), slice(None)) + cut]


def test_conv3d_is_the_sum_over_its_kernel_window():
    mx.random.seed(0)
    layer = nn.Conv3D(4, (3, 2, 2), strides=(2, 1, 1), padding=(1, 1, 0), in_channels=2)
    x = nd.random.uniform(shape=(2, 2, 5, 4, 4))
    out = _both_ways(layer, x)
    w, b = layer.weight.data().asnumpy(), layer.bias.data().asnumpy()
    expected = np.zeros_like(out)
    for index, window in _windows(x.asnumpy(), (3, 2, 2), (2, 1, 1), (1, 1, 0), 0.0):
        expected[(slice(None), slice(None)) + index] = np.einsum("ncdhw,fcdhw->nf", window, w) + b
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_conv1d_is_a_sliding_dot_product_and_channel_last_layouts_transpose():
    mx.random.seed(0)
    layer = nn.Conv1D(6, 3, strides=2, groups=2, in_channels=4)
    x = nd.random.uniform(shape=(1, 4, 9))
    out = _both_ways(layer, x)
    w, b = layer.weight.data().asnumpy(), layer.bias.data().asnumpy()
    xs = x.asnumpy()
    for f in range(6):
        group = f // 3
        for t in range(out.shape[2]):
            window = xs[0, 2 * group:2 * group + 2, 2 * t:2 * t + 3]
            assert out[0, f, t] == pytest.approx((window * w[f]).sum() + b[f], rel=1e-5)
    last = nn.Conv1D(6, 3, layout="NWC", in_channels=4)
    last.initialize()
    first = nn.Conv1D(6, 3, in_channels=4)
    first.initialize()
    first.weight.set_data(last.weight.data())
    np.testing.assert_allclose(last(x.transpose((0, 2, 1))).asnumpy(),
                               first(x).asnumpy().transpose(0, 2, 1), rtol=1e-5)
    with pytest.raises(ValueError, match="layout='NCHW'"):
        nn.Conv1D(2, 3, layout="NCHW")


@pytest.mark.parametrize("kind, fill, combine", [("Max", -np.inf, np.max),
                                                 ("Avg", np.nan, np.nanmean)])
def test_3d_and_1d_pooling_equal_pooling_each_window(kind, fill, combine):
    x = nd.random.uniform(shape=(1, 2, 6, 6, 6))
    pool = getattr(nn, f"{kind}Pool3D")(3, 2, padding=1, count_include_pad=False)
    out = _both_ways(pool, x)
    for index, window in _windows(x.asnumpy(), (3, 3, 3), (2, 2, 2), (1, 1, 1), fill):
        np.testing.assert_allclose(out[(0, slice(None)) + index],
                                   combine(window[0].reshape(2, -1), axis=1), rtol=1e-5)
    x1 = nd.random.uniform(shape=(2, 3, 10))
    out1 = _both_ways(getattr(nn, f"{kind}Pool1D")(3, 2), x1)
    for index, window in _windows(x1.asnumpy(), (3,), (2,), (0,), fill):
        np.testing.assert_allclose(out1[(slice(None), slice(None)) + index],
                                   combine(window, axis=2), rtol=1e-5)
    glob = _both_ways(getattr(nn, f"Global{kind}Pool3D")(layout="NDHWC"),
                      x.transpose((0, 2, 3, 4, 1)))
    np.testing.assert_allclose(glob.reshape(2), combine(x.asnumpy().reshape(2, -1), axis=1),
                               rtol=1e-5)


def test_pooling_with_a_channel_last_layout_keeps_it():
    x = nd.random.uniform(shape=(2, 10, 10, 3))
    out = _both_ways(nn.MaxPool2D(3, ceil_mode=True, layout="NHWC"), x)
    assert out.shape == (2, 4, 4, 3)
    expected = nn.MaxPool2D(3, ceil_mode=True)(x.transpose((0, 3, 1, 2))).asnumpy()
    np.testing.assert_array_equal(out, expected.transpose(0, 2, 3, 1))
    assert _both_ways(nn.GlobalMaxPool2D(), x.transpose((0, 3, 1, 2))).shape == (2, 3, 1, 1)


def _transposed_reference(x, w, b, stride, pad, dilate, adj, groups):
    """Each input pixel adds itself times the kernel into the output window it maps to."""
    n, c, h, wd = x.shape
    filters = w.shape[1] * groups
    size = [(s - 1) * st - 2 * p + d * (k - 1) + 1 + a
            for s, st, p, d, k, a in zip((h, wd), stride, pad, dilate, w.shape[2:], adj)]
    full = np.zeros((n, filters, size[0] + 2 * pad[0] + 8, size[1] + 2 * pad[1] + 8))
    per = c // groups
    for ch in range(c):
        group = slice(ch // per * w.shape[1], (ch // per + 1) * w.shape[1])
        for i, j, u, v in np.ndindex(h, wd, *w.shape[2:]):
            full[:, group, i * stride[0] + u * dilate[0], j * stride[1] + v * dilate[1]] += (
                x[:, ch, i, j][:, None] * w[ch, :, u, v][None, :])
    return full[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1]] + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("options", [{}, {"groups": 2}, {"strides": 3}, {"dilation": 2},
                                     {"strides": (2, 3), "output_padding": (1, 2)},
                                     {"strides": 2, "padding": (1, 2)}])
def test_conv2d_transpose_spreads_each_pixel_over_its_window(options):
    mx.random.seed(0)
    layer = nn.Conv2DTranspose(6, (3, 2), in_channels=4, **options)
    x = nd.random.uniform(shape=(2, 4, 5, 4))
    out = _both_ways(layer, x)
    a = layer._attrs
    expected = _transposed_reference(x.asnumpy(), layer.weight.data().asnumpy(),
                                     layer.bias.data().asnumpy(), a["stride"], a["pad"],
                                     a["dilate"], layer._adj, a["num_group"])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert layer.weight.shape == (4, 6 // a["num_group"], 3, 2)  # MXNet's layout


def test_conv2d_transpose_refuses_what_has_no_output():
    with pytest.raises(ValueError, match="output_padding"):
        nn.Conv2DTranspose(2, 3, strides=2, output_padding=2)
    layer = nn.Conv2DTranspose(2, 3, padding=3, in_channels=1)
    layer.initialize()
    with pytest.raises(mx.errors.ShapeError, match="leaves no output"):
        layer(nd.ones((1, 1, 2, 2)))
