"""2-D max / average / sum pooling (NCHW), forwards and backwards.

What this module teaches
------------------------
Pooling looks at the same windows as a convolution but combines each one with ``max``
or a mean instead of a dot product. Reducing a window *view* over its last two axes is
slow in numpy (tiny strided reductions); instead the kernel loops over the ``kh * kw``
offsets of a window (:func:`~hybridlab.ops.conv.slabs`) and combines whole strided
slabs elementwise -- ``np.maximum(out, slab, out=out)`` -- a few large vectorised ops.

Backwards, max pooling sends each window's gradient to its *first* largest element
(MXNet's choice; ties do not split it), average pooling shares it equally among the
elements it divided by (``count_include_pad`` decides whether padding counts). The
backward kernel is the internal op ``_pooling_grad``; it has no second-order gradient.
"""

from __future__ import annotations

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.conv import check_pairs, crop, out_size, pad_image, slabs
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

_POOL_ATTRS = {"kernel": Attr("shape", (), low=1),
               "pool_type": Attr("str", "max", ("max", "avg", "sum")),
               "stride": Attr("shape", (1, 1), low=1), "pad": Attr("shape", (0, 0), low=0),
               "global_pool": Attr("bool", False),
               "pooling_convention": Attr("str", "valid", ("valid", "full")),
               "count_include_pad": Attr("bool", True), "layout": Attr("str", "NCHW", ("NCHW",))}


def _pool_geometry(shape, kernel, stride, pad, global_pool, pooling_convention, **unused):
    """(kernel, stride, pad, extra end padding, output size) for an NCHW input."""
    if len(shape) != 4 or not (global_pool or len(kernel) == 2):
        raise ShapeError(f"Pooling: needs NCHW data and a 2-D kernel (or global_pool=True), "
                         f"got data {shape} and kernel {kernel}")
    if global_pool:
        kernel, stride, pad = shape[2:], (1, 1), (0, 0)
    check_pairs("Pooling", stride=stride, pad=pad)
    ceil = pooling_convention == "full"
    size = tuple(out_size("Pooling", shape[2 + i], kernel[i], stride[i], pad[i], ceil)
                 for i in (0, 1))
    extra = tuple(max(0, (size[i] - 1) * stride[i] + kernel[i] - shape[2 + i] - 2 * pad[i])
                  for i in (0, 1))
    return kernel, stride, pad, extra, size


def _lowest(dtype: np.dtype) -> float:
    return np.finfo(dtype).min if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def _pooling(x: np.ndarray, pool_type: str, **attrs) -> np.ndarray:
    """Combine the kh * kw slabs elementwise: faster than reducing a window view."""
    kernel, stride, pad, extra, size = _pool_geometry(x.shape, **attrs)
    padded = pad_image(x, pad, extra, _lowest(x.dtype) if pool_type == "max" else 0)
    combine = np.maximum if pool_type == "max" else np.add
    out = None
    for _, _, slab in slabs(kernel, stride, (1, 1), size):
        out = padded[slab].copy() if out is None else combine(out, padded[slab], out=out)
    if pool_type == "avg":
        # in place; integers divide in float and truncate back (casting="unsafe")
        np.divide(out, _window_counts(x, **attrs), out=out, casting="unsafe")
    return out


def _window_counts(x: np.ndarray, count_include_pad: bool, **attrs) -> np.ndarray:
    """How many elements each average divides by: the window area, or only the real ones."""
    if count_include_pad:
        kernel = _pool_geometry(x.shape, **attrs)[0]
        return np.asarray(kernel[0] * kernel[1])
    real = np.ones((1, 1, *x.shape[2:]), x.dtype)
    return _pooling(real, "sum", count_include_pad=True, **attrs)


def _pooling_grad(g: np.ndarray, x: np.ndarray, pool_type: str, **attrs) -> np.ndarray:
    kernel, stride, pad, extra, size = _pool_geometry(x.shape, **attrs)
    padded = pad_image(x, pad, extra, _lowest(x.dtype))
    image = np.zeros(padded.shape, g.dtype)
    if pool_type == "max":  # each window's gradient goes to its first largest element
        out = _pooling(x, "max", **attrs)
        pending = np.ones(out.shape, bool)
        for _, _, slab in slabs(kernel, stride, (1, 1), size):
            hit = pending & (padded[slab] == out)
            image[slab] += np.where(hit, g, 0)
            pending &= ~hit
    else:
        share = g if pool_type == "sum" else g / _window_counts(x, **attrs).astype(g.dtype)
        for _, _, slab in slabs(kernel, stride, (1, 1), size):
            image[slab] += share
    return crop(image, pad, x.shape)


register(OpDef(
    name="Pooling", kernel=_pooling, kind=Kind.OPAQUE, attrs=_POOL_ATTRS,
    infer=lambda x, **attrs: [Aval((*x.shape[:2], *_pool_geometry(x.shape, **attrs)[4]),
                                   x.dtype)],
    grad=lambda F, inputs, outputs, out_grads, **attrs: [
        F._pooling_grad(out_grads[0], inputs[0], **attrs)],
    doc="2-D max / average / sum pooling of NCHW data over ``kernel`` windows; "
        "``global_pool`` pools each whole channel; ``pooling_convention='full'`` rounds "
        "the output size up."))
register(OpDef(
    name="_pooling_grad", kernel=_pooling_grad, kind=Kind.OPAQUE,
    grad=None, grad_missing="Pooling's backward has no second order",
    attrs=_POOL_ATTRS, inputs=("data", "like"),
    infer=lambda g, x, **attrs: [Aval(x.shape, g.dtype)],
    doc="Pooling's gradient: each window's gradient goes back to its max (or is shared)."))
