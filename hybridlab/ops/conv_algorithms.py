"""Two more ways to compute a convolution: Winograd's F(2x2, 3x3) and a direct depthwise one.

What this module teaches
------------------------
im2col (``conv.py``) turns a convolution into one big matrix product: every output pixel
costs ``C * kh * kw`` multiplications per filter. For a 3x3 kernel with stride 1 there is
a cheaper way (Lavin & Gray, 2016). Cut the output into 2x2 tiles; each tile needs the
4x4 patch ``d`` of the input around it, and for one channel and one filter ``g``::

    Y = A^T [ (G g G^T)  *  (B^T d B) ] A        (* : elementwise, 4x4)

``U = G g G^T`` depends on the filter alone, so it is computed once per weight (a
*derived input*, NOTE [Derived inputs]); ``V = B^T d B`` and the final ``A^T M A`` only add
and subtract (the entries of ``B`` and ``A`` are 0 and +-1). What is left to multiply is
16 numbers per tile per channel and filter, where im2col multiplies 4 x 9 = 36: 2.25
times fewer. Summed over the channels, the 16 elementwise products are 16 independent
matrix products ``M[xi] = U[xi] (K, C) @ V[xi] (C, tiles)`` -- the work goes to BLAS again.

What it costs: the transforms are memory passes over arrays 4x the input (V) and 4x the
output (M), which numpy runs as separate elementwise operations. So Winograd wins where
the products dominate (many channels, VGG's wide layers) and loses where they do not (a
thin first layer); a measurement decides for each convolution (``graph/autotune.py``,
``graph/passes/choose_convolutions.py``), as cuDNN's algorithm search does. Its numbers
agree with im2col's to float32 rounding, not bit for bit (sums in another order).

A *depthwise* convolution (one group per channel, MXNet's ``num_group = C``) is a poor
fit for im2col, which runs one tiny matrix product per channel in a Python loop: here
every channel's windows are gathered at once and one stacked product (numpy's matmul
over the channels) weighs each channel's windows by its own filter.

The two operators here are internal: only ``choose_convolutions`` writes them, into
inference programs (they have no gradient rule; a training program keeps Convolution).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.conv import (
    _CONV_ATTRS,
    _conv_infer,
    allocating,
    chunk_scratch,
    chunks,
    pad_image,
    slabs,
)
from hybridlab.ops.registry import Aval, Kind, OpDef, register

# F(2x2, 3x3): Y = A^T [(G g G^T) * (B^T d B)] A, for a 4x4 input tile d and a 3x3 filter g
B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]])
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]])


def winograd_filter(weight: np.ndarray) -> np.ndarray:
    """``U = G g G^T`` for every filter and channel of a ``(K, C, 3, 3)`` weight, as the
    16 matrices the products read: ``(16, K, C)``, ``U[4 i + j] = U_ij`` (in its dtype:
    G's entries are halves, exact in float32)."""
    g = G.astype(weight.dtype)
    u = np.einsum("ai,kcij,bj->abkc", g, weight, g)
    return np.ascontiguousarray(u.reshape(16, *weight.shape[:2]))


def _tiles(x: Aval | np.ndarray, pad: Any) -> tuple[int, int, int, int]:
    """(OH, OW, tile rows, tile columns) of a 3x3, stride-1 convolution of ``x``."""
    height, width = x.shape[2] + 2 * pad[0] - 2, x.shape[3] + 2 * pad[1] - 2
    return height, width, -(-height // 2), -(-width // 2)


def _winograd_out(x: np.ndarray, u: np.ndarray, b: np.ndarray | None = None, *,
                  out: np.ndarray, pad: Any, **unused: Any) -> np.ndarray:
    """The convolution of ``x`` by the filters whose transform is ``u``, a chunk of images
    at a time (the scratch stays bounded, as im2col's)."""
    for part in chunks(len(x), _per_image(x, u, pad)):
        _winograd_chunk(x[part], u, b, out[part], pad)
    return out


def _winograd_chunk(x: np.ndarray, u: np.ndarray, b: np.ndarray | None, out: np.ndarray,
                    pad: Any) -> None:
    n, channels = x.shape[:2]
    filters = u.shape[1]
    height, width, rows, cols = _tiles(x, pad)
    v = _input_transform(x, pad, rows, cols)  # (16, C, n * rows * cols)
    m = np.matmul(u, v)  # the 16 products: (16, K, tiles)
    del v
    if b is not None:  # every output element reads M[1][1] once: the bias, added once
        m[5] += b.reshape(-1, 1)
    m4 = m.reshape(4, 4, filters, n, rows, cols)
    s = np.empty((2, 4, filters, n, rows, cols), m.dtype)  # A^T applied to the rows
    np.add(m4[0], m4[1], out=s[0])
    s[0] += m4[2]
    np.subtract(m4[1], m4[2], out=s[1])
    s[1] -= m4[3]
    del m, m4
    y = np.empty((filters, n, rows, cols), s.dtype)
    for a in range(2):  # ... then to the columns: each result is one of a tile's 4 pixels
        np.add(s[a, 0], s[a, 1], out=y)
        y += s[a, 2]
        _place(out, y, a, 0)
        np.subtract(s[a, 1], s[a, 2], out=y)
        y -= s[a, 3]
        _place(out, y, a, 1)


def _place(out: np.ndarray, y: np.ndarray, row: int, column: int) -> None:
    """Pixel (row, column) of every 2x2 tile, ``y`` (K, n, tile rows, tile columns), into
    ``out`` (n, K, OH, OW); a last tile that hangs over an odd edge is cut."""
    part = out[:, :, row::2, column::2]
    part[...] = y.transpose(1, 0, 2, 3)[:, :, :part.shape[2], :part.shape[3]]


def _input_transform(x: np.ndarray, pad: Any, rows: int, cols: int) -> np.ndarray:
    """``V = B^T d B`` for every 4x4 tile of the padded images (tiles step by 2), as the
    16 matrices the products read: ``(16, C, n * rows * cols)``. The padded image is
    split into its even and odd columns first, so every slice below has unit stride."""
    n, channels, height, width = x.shape
    half = cols + 1
    parts = np.zeros((2, n, channels, 2 * rows + 2, half), x.dtype)  # even, odd columns
    for parity in (0, 1):
        first = (parity - pad[1]) % 2  # the first column of x that lands on this parity
        count = len(range(first, width, 2))
        start = (first + pad[1]) // 2
        parts[parity][:, :, pad[0]:pad[0] + height, start:start + count] = x[..., first::2]
    t = np.empty((2, 4, n, channels, rows, half), x.dtype)  # B^T applied to the rows
    for parity in (0, 1):
        r = [parts[parity][:, :, k:k + 2 * rows:2] for k in range(4)]
        np.subtract(r[0], r[2], out=t[parity, 0])
        np.add(r[1], r[2], out=t[parity, 1])
        np.subtract(r[2], r[1], out=t[parity, 2])
        np.subtract(r[1], r[3], out=t[parity, 3])
    v = np.empty((16, channels, n, rows, cols), x.dtype)
    for i in range(4):  # ... and to the columns: column k of tile j is 2j + k
        even, odd = t[0, i], t[1, i]
        c0, c1, c2, c3 = even[..., :cols], odd[..., :cols], even[..., 1:], odd[..., 1:]
        into = v[4 * i:4 * i + 4].transpose(0, 2, 1, 3, 4)  # (4, n, C, rows, cols)
        np.subtract(c0, c2, out=into[0])
        np.add(c1, c2, out=into[1])
        np.subtract(c2, c1, out=into[2])
        np.subtract(c1, c3, out=into[3])
    return v.reshape(16, channels, n * rows * cols)


def _per_image(x: Aval | np.ndarray, u: Aval | np.ndarray, pad: Any) -> int:
    """Bytes of scratch for one image: the split padded image, the row transform, V, M
    and the row-transformed M (all alive at the worst moment, a slight over-estimate)."""
    _, _, rows, cols = _tiles(x, pad)
    channels, filters = x.shape[1], u.shape[1]
    floats = channels * (2 + 8) * (2 * rows + 2) * (cols + 1) // 2 + 16 * channels * rows * cols \
        + (16 + 8 + 1) * filters * rows * cols
    return int(floats * np.dtype(x.dtype).itemsize)


def _winograd_infer(x: Aval, u: Aval, b: Aval | None = None, **attrs: Any) -> list[Aval]:
    if len(x.shape) != 4 or len(u.shape) != 3 or u.shape[0] != 16 or u.shape[2] != x.shape[1] \
            or attrs["num_group"] != 1 or tuple(attrs["kernel"]) != (3, 3) \
            or any(s != 1 for s in attrs["stride"]) or any(d != 1 for d in attrs["dilate"]):
        raise ShapeError(f"_conv_winograd: F(2x2, 3x3) takes NCHW data, a transformed weight "
                         f"(16, K, C), a 3x3 kernel, stride and dilation 1 and one group; got "
                         f"data {x.shape}, weight {u.shape}, attributes {attrs}")
    return _conv_infer(x, Aval((u.shape[1], u.shape[2], 3, 3), u.dtype), b, **attrs)


def _depthwise_out(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                   out: np.ndarray, kernel: Any, stride: Any, dilate: Any, pad: Any,
                   **unused: Any) -> np.ndarray:
    """Each channel's windows side by side, ``(C, kh * kw, OH * OW)`` per image, then one
    stacked product: channel c's ``kh * kw`` weights times its own windows (a chunk of
    images at a time: the scratch stays bounded)."""
    n, channels = x.shape[:2]
    taps = kernel[0] * kernel[1]
    weights = w.reshape(1, channels, 1, taps).astype(out.dtype, copy=False)
    rows = out.reshape(n, channels, 1, out.shape[2] * out.shape[3])  # a view: written into
    for part in chunks(n, taps * rows.shape[3] * channels * out.itemsize):
        padded = pad_image(x[part], pad)
        windows = np.empty((len(padded), channels, taps, *out.shape[2:]), out.dtype)
        for i, j, slab in slabs(kernel, stride, dilate, out.shape[2:]):
            windows[:, :, i * kernel[1] + j] = padded[slab]
        np.matmul(weights, windows.reshape(*windows.shape[:3], -1), out=rows[part])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def _depthwise_scratch(x: Aval, w: Aval, b: Aval | None = None, **attrs: Any) -> int:
    """A chunk's windows and its padded copy (when there is padding)."""
    result = _depthwise_infer(x, w, b, **attrs)[0]
    taps = attrs["kernel"][0] * attrs["kernel"][1]
    padded = (x.shape[2] + 2 * attrs["pad"][0]) * (x.shape[3] + 2 * attrs["pad"][1]) \
        if any(attrs["pad"]) else 0
    per_image = x.shape[1] * (taps * result.shape[2] * result.shape[3] * np.dtype(
        result.dtype).itemsize + padded * np.dtype(x.dtype).itemsize)
    return chunk_scratch(x.shape[0], per_image)


def _depthwise_infer(x: Aval, w: Aval, b: Aval | None = None, **attrs: Any) -> list[Aval]:
    if len(x.shape) != 4 or not attrs["num_group"] == attrs["num_filter"] == x.shape[1]:
        raise ShapeError(f"_conv_depthwise: takes NCHW data and one filter per channel "
                         f"(num_group = num_filter = channels); got data {x.shape} and "
                         f"num_group={attrs['num_group']}, num_filter={attrs['num_filter']}")
    return _conv_infer(x, w, b, **attrs)


def _inputs(attrs: dict[str, Any]) -> tuple[str, ...]:
    return ("data", "weight") if attrs["no_bias"] else ("data", "weight", "bias")


_WHY = "an inference kernel: a program that computes gradients keeps Convolution"
register(OpDef(
    name="_conv_winograd", kernel=allocating(_winograd_out, _winograd_infer),
    kernel_out=_winograd_out, infer=_winograd_infer, grad=None, grad_missing=_WHY,
    workspace=lambda x, u, b=None, **attrs: chunk_scratch(x.shape[0],
                                                          _per_image(x, u, attrs["pad"])),
    kind=Kind.OPAQUE, attrs=_CONV_ATTRS, inputs=_inputs,
    doc="A 3x3, stride-1 Convolution by Winograd's F(2x2, 3x3): ``weight`` is the filter "
        "transform ``winograd_filter(w)``, (16, K, C). Written by choose_convolutions."))
register(OpDef(
    name="_conv_depthwise", kernel=allocating(_depthwise_out, _depthwise_infer),
    kernel_out=_depthwise_out, infer=_depthwise_infer, grad=None, grad_missing=_WHY,
    workspace=lambda x, w, b=None, **attrs: _depthwise_scratch(x, w, b, **attrs),
    kind=Kind.OPAQUE, attrs=_CONV_ATTRS, inputs=_inputs,
    doc="A depthwise Convolution (one filter per channel): every channel's windows "
        "gathered at once, one stacked product. Written by choose_convolutions."))
