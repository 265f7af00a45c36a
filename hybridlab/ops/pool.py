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
It needs scratch (the recomputed maxima, masks, padded copies), so it walks the batch in
chunks as the convolutions do, and declares that scratch as its ``OpDef.workspace``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops import conv
from hybridlab.ops.conv import allocating, crop, lift, lifted, out_size, pad_image, slabs, spatial
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

_POOL_ATTRS = {"kernel": Attr("shape", (), low=1),
               "pool_type": Attr("str", "max", ("max", "avg", "sum")),
               "stride": Attr("shape", (1, 1), low=1, empty_is_default=True),
               "pad": Attr("shape", (0, 0), low=0, empty_is_default=True),
               "global_pool": Attr("bool", False),
               "pooling_convention": Attr("str", "valid", ("valid", "full", "same")),
               "count_include_pad": Attr("bool", True), "layout": Attr("str", "NCHW", ("NCHW",))}


def _pool_geometry(shape: Any, kernel: Any, stride: Any, pad: Any, global_pool: bool,
                   pooling_convention: str, **unused: Any) -> tuple[Any, ...]:
    """(kernel, stride, pad, extra end padding, output size) for an NCHW input."""
    if len(shape) != 4 or not (global_pool or len(kernel) == 2):
        raise ShapeError(f"Pooling: needs NCW or NCHW data and a kernel of one size per "
                         f"spatial axis (or global_pool=True), got data {shape} and kernel "
                         f"{kernel}")
    if global_pool:
        kernel, stride, pad = shape[2:], (1, 1), (0, 0)
    geometry = spatial("Pooling", {"kernel": kernel, "stride": stride, "pad": pad},
                       ("stride", "pad"))
    stride, pad = geometry["stride"], geometry["pad"]
    if pooling_convention == "same":  # MXNet's: ceil(size / stride) windows, cut at the end
        size = tuple(-(-shape[2 + i] // stride[i]) for i in (0, 1))
    else:
        size = tuple(out_size("Pooling", shape[2 + i], kernel[i], stride[i], pad[i],
                              pooling_convention == "full") for i in (0, 1))
    extra = tuple(max(0, (size[i] - 1) * stride[i] + kernel[i] - shape[2 + i] - 2 * pad[i])
                  for i in (0, 1))
    return kernel, stride, pad, extra, size


def _lowest(dtype: np.dtype) -> float:
    return np.finfo(dtype).min if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def _pool_infer(x: Aval, **attrs: Any) -> list[Aval]:
    one_d = len(x.shape) == 3
    if attrs["pooling_convention"] == "same" and (
            not one_d or attrs["pool_type"] != "max" or any(attrs["pad"])):
        raise ShapeError(f"Pooling: pooling_convention='same' is MXNet's 1-D max pooling "
                         f"without pad (got data {x.shape}, pool_type={attrs['pool_type']!r}, "
                         f"pad={attrs['pad']}); use 'valid' or 'full' otherwise")
    shape = (*x.shape[:2], 1, x.shape[2]) if one_d else x.shape
    size = _pool_geometry(shape, **lift(attrs))[4]
    return [Aval((*x.shape[:2], *size[len(size) - len(x.shape) + 2:]), x.dtype)]


def _pooling_out(x: np.ndarray, *, out: np.ndarray, pool_type: str, **attrs: Any) -> np.ndarray:
    """Combine the kh * kw slabs elementwise into ``out``: faster than reducing a window view."""
    kernel, stride, pad, extra, size = _pool_geometry(x.shape, **attrs)
    padded = pad_image(x, pad, extra, _lowest(x.dtype) if pool_type == "max" else 0)
    _combine(padded, kernel, stride, size, pool_type == "max", out)
    if pool_type == "avg":
        # in place; integers divide in float and truncate back (casting="unsafe")
        np.divide(out, _window_counts(x, **attrs), out=out, casting="unsafe")
    return out


def _combine(padded: np.ndarray, kernel: Any, stride: Any, size: tuple[int, ...], largest: bool,
             out: np.ndarray
        ) -> Any:
    """``out`` = the max (``largest``) or the sum of each window of ``padded``.

    A window's max (or sum) is the max over its rows of each row's max: combined along
    the height first -- ``kh`` slabs whose rows are contiguous in memory -- into a scratch
    ``(N, C, OH, width)``, then along the width, ``kw`` strided slabs: ``kh + kw``
    elementwise ops instead of ``kh * kw`` strided ones (the same count of elements, read
    in longer runs). A window covering the whole image (global pooling) is one reduction.
    """
    combine = np.maximum if largest else np.add
    if tuple(size) == (1, 1) and padded.shape[2:] == tuple(kernel):
        combine.reduce(padded.reshape(*padded.shape[:2], -1), axis=2, out=out[:, :, 0, 0])
        return out
    rows = (padded[:, :, :stride[0] * (size[0] - 1) + 1:stride[0]] if kernel[0] == 1 else
            _along(padded, 2, kernel[0], stride[0], size[0], combine,
                   np.empty((*padded.shape[:2], size[0], padded.shape[3]), out.dtype)))
    return _along(rows, 3, kernel[1], stride[1], size[1], combine, out)


def _along(src: np.ndarray, axis: int, k: int, step: int, n: int, combine: Any,
           out: np.ndarray) -> np.ndarray:
    """``out`` = ``combine`` of the ``k`` slabs of ``src`` along ``axis`` (``n`` each, every
    ``step``-th): the windows of one axis."""
    slabs = [src[(slice(None),) * axis + (slice(i, i + step * (n - 1) + 1, step),)]
             for i in range(k)]
    if k == 1:
        np.copyto(out, slabs[0])
    else:
        combine(slabs[0], slabs[1], out=out)
    for slab in slabs[2:]:
        combine(out, slab, out=out)
    return out


_pooling = allocating(_pooling_out, _pool_infer)


def _window_counts(x: np.ndarray, count_include_pad: bool, **attrs: Any) -> np.ndarray:
    """How many elements each average divides by: the window area, or only the real ones."""
    if count_include_pad:
        kernel = _pool_geometry(x.shape, **attrs)[0]
        return np.asarray(kernel[0] * kernel[1], x.dtype)  # x's dtype: no casting buffers
    real = np.ones((1, 1, *x.shape[2:]), x.dtype)
    result: np.ndarray = _pooling(real, pool_type="sum", count_include_pad=True, **attrs)
    return result


def _pooling_grad_out(g: np.ndarray, x: np.ndarray, *, out: np.ndarray, pool_type: str,
                      **attrs: Any) -> np.ndarray:
    """Each window's gradient back to its first largest element (max), or shared among
    its elements; a chunk of images at a time, so the scratch stays bounded (conv.py)."""
    for part in conv.chunks(len(x), _pool_grad_per_image(g, x, pool_type, **attrs)):
        _pool_grad_chunk(g[part], x[part], out[part], pool_type, **attrs)
    return out


def _pool_grad_chunk(g: np.ndarray, x: np.ndarray, out: np.ndarray, pool_type: str, **attrs: Any
        ) -> None:
    kernel, stride, pad, extra, size = _pool_geometry(x.shape, **attrs)
    padded = pad_image(x, pad, extra, _lowest(x.dtype))
    image = out if padded is x else np.empty(padded.shape, g.dtype)
    image[...] = 0
    if pool_type == "max":
        pooled = _combine(padded, kernel, stride, size, True, np.empty(g.shape, x.dtype))
        pending, hit, routed = np.ones(g.shape, bool), np.empty(g.shape, bool), np.empty_like(g)
        for _, _, slab in slabs(kernel, stride, (1, 1), size):
            np.equal(padded[slab], pooled, out=hit)
            hit &= pending
            image[slab] += np.multiply(g, hit, out=routed)  # faster than add(where=hit)
            pending ^= hit  # a window's gradient goes to its first maximum only
    else:
        share = g if pool_type == "sum" else g / _window_counts(x, **attrs).astype(g.dtype)
        for _, _, slab in slabs(kernel, stride, (1, 1), size):
            image[slab] += share
    if image is not out:
        np.copyto(out, crop(image, pad, x.shape))


def _pool_scratch(x: Aval, **attrs: Any) -> tuple[int, int]:
    """Elements of ``x``'s padded copy (0 without padding) and of ``_combine``'s rows."""
    kernel, _, pad, extra, size = _pool_geometry(x.shape, **attrs)
    padded = np.add(x.shape[2:], np.add(np.multiply(pad, 2), extra))
    whole = tuple(size) == (1, 1) and tuple(padded) == tuple(kernel)
    rows = 0 if kernel[0] == 1 or whole else size[0] * int(padded[1])
    images = x.shape[0] * x.shape[1]
    return (images * int(np.prod(padded)) if any(pad + extra) else 0), images * rows


def _pool_workspace(x: Aval, pool_type: str, **attrs: Any) -> int:
    """The padded copy of ``x`` when padding is needed (an average's tiny counts aside),
    and ``_combine``'s rows combined along the height."""
    return sum(_pool_scratch(x, **attrs)) * np.dtype(x.dtype).itemsize


def _pool_grad_per_image(g: Any, x: Any, pool_type: str, **attrs: Any) -> int:
    """For one image of ``x``: the padded input and image (if padded); max: the
    recomputed maxima with ``_combine``'s rows, then the routed gradient and two masks
    (bool), whichever is more; avg: the shared one."""
    g, x = (Aval((1, *a.shape[1:]), np.dtype(a.dtype)) for a in (g, x))
    padded, rows = _pool_scratch(x, **attrs)
    count = int(np.prod(g.shape))
    scratch = {"max": count * x.dtype.itemsize + max(rows * x.dtype.itemsize,
                                                     count * (g.dtype.itemsize + 2)),
               "avg": count * g.dtype.itemsize}
    result: int = padded * (x.dtype.itemsize + g.dtype.itemsize) + scratch.get(pool_type, 0)
    return result


def _planar(workspace: Any) -> Any:
    """A workspace rule of 2-D avals that also takes 1-D ones (as :func:`conv.lifted`)."""
    def rule(*avals: Aval, **attrs: Any) -> int:
        if len(avals[-1].shape) != 3:
            return int(workspace(*avals, **attrs))
        return int(workspace(*(Aval((*a.shape[:2], 1, a.shape[2]), a.dtype) for a in avals),
                             **lift(attrs)))
    return rule


register(OpDef(
    name="Pooling", kernel=allocating(lifted(_pooling_out), _pool_infer),
    kernel_out=lifted(_pooling_out), workspace=_planar(_pool_workspace),
    kind=Kind.OPAQUE, attrs=_POOL_ATTRS, infer=_pool_infer,
    grad=lambda F, inputs, outputs, out_grads, **attrs: [
        F._pooling_grad(out_grads[0], inputs[0], **attrs)],
    doc="1-D or 2-D max / average / sum pooling of NCW or NCHW data over ``kernel`` "
        "windows; ``global_pool`` pools each whole channel; ``pooling_convention='full'`` "
        "rounds the output size up, ``'same'`` (1-D max) makes ceil(size / stride) windows."))
register(OpDef(
    name="_pooling_grad", kernel_out=lifted(_pooling_grad_out),
    kernel=allocating(lifted(_pooling_grad_out), lambda g, x, **attrs: [Aval(x.shape, g.dtype)]),
    workspace=_planar(lambda g, x, **attrs: conv.chunk_scratch(
        x.shape[0], _pool_grad_per_image(g, x, **attrs))), kind=Kind.OPAQUE,
    grad=None, grad_missing="Pooling's backward has no second order",
    attrs=_POOL_ATTRS, inputs=("data", "like"),
    infer=lambda g, x, **attrs: [Aval(x.shape, g.dtype)],
    doc="Pooling's gradient: each window's gradient goes back to its max (or is shared)."))
