"""2-D convolution (NCHW) on numpy, with its gradients, and the window geometry it shares.

What this module teaches
------------------------
A convolution is a matrix product in disguise. ``sliding_window_view`` shows every
``kh x kw`` window of the (padded) image as a 6-D array ``(N, C, OH, OW, kh, kw)``
without copying; ``np.tensordot`` with the weight ``(F, C, kh, kw)`` then copies the
windows into one big matrix (the classic *im2col*) and calls BLAS once.

Backwards, the weight gradient is the same product with the output gradient in the
weight's place. The data gradient is the reverse of im2col (*col2im*, :func:`fold`):
each window's gradient is added back where the window came from -- a loop over the
``kh * kw`` kernel offsets (:func:`slabs`), each a vectorised strided add. ``pool.py``
uses the same geometry helpers (``out_size``, ``slabs``, ``pad_image``, ``crop``).

The backward kernels are internal ops (``_conv_data_grad``, ``_conv_weight_grad``) so
the gradient rules stay written with registry ops; they take the
forward input as ``like`` for its shape and have no second-order gradient.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hybridlab.errors import ShapeError
from hybridlab.ops._infer import promote
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

_GEOMETRY = {"kernel": Attr("shape", low=1), "stride": Attr("shape", (1, 1), low=1),
             "dilate": Attr("shape", (1, 1), low=1), "pad": Attr("shape", (0, 0), low=0)}
_CONV_ATTRS = {**_GEOMETRY, "num_filter": Attr("int", low=1),
               "num_group": Attr("int", 1, (1,)),
               "no_bias": Attr("bool", False), "layout": Attr("str", "NCHW", ("NCHW",))}


def out_size(name: str, size: int, kernel: int, stride: int, pad: int, ceil: bool = False):
    span = size + 2 * pad - kernel
    if span < 0 or stride < 1:
        raise ShapeError(f"{name}: a window of {kernel} (after dilation) does not fit an input "
                         f"of {size} padded by {pad} on each side (stride {stride})")
    return (math.ceil(span / stride) if ceil else span // stride) + 1


def check_pairs(name: str, **pairs: tuple[int, ...]) -> None:
    """2-D geometry attributes need one value per spatial axis: (rows, columns)."""
    for key, value in pairs.items():
        if len(value) != 2:
            raise ShapeError(f"{name}: {key}={value} needs two values (rows, columns), "
                             f"e.g. {key}=(1, 1)")


def _windows(padded: np.ndarray, kernel, stride, dilate=(1, 1)) -> np.ndarray:
    """Every window as a view ``(N, C, OH, OW, kh, kw)``: no data is copied."""
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilate)]
    view = sliding_window_view(padded, reach, axis=(2, 3))
    return view[:, :, ::stride[0], ::stride[1], ::dilate[0], ::dilate[1]]


def slabs(kernel, stride, dilate, size):
    """For each kernel offset (i, j): the index of the input elements it touches.

    Offset (i, j) of every window, taken over all windows at once, is one strided slab
    of the padded input; looping over the ``kh * kw`` offsets touches everything.
    """
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            top, left = i * dilate[0], j * dilate[1]
            yield i, j, (slice(None), slice(None),
                         slice(top, top + stride[0] * (size[0] - 1) + 1, stride[0]),
                         slice(left, left + stride[1] * (size[1] - 1) + 1, stride[1]))


def fold(cols: np.ndarray, padded_shape, stride, dilate=(1, 1)) -> np.ndarray:
    """col2im: add each window's values back into a zero image of ``padded_shape``."""
    image = np.zeros(padded_shape, cols.dtype)
    for i, j, slab in slabs(cols.shape[4:], stride, dilate, cols.shape[2:4]):
        image[slab] += cols[:, :, :, :, i, j]
    return image


def pad_image(x: np.ndarray, pad, extra=(0, 0), value: float = 0.0) -> np.ndarray:
    widths = ((0, 0), (0, 0), (pad[0], pad[0] + extra[0]), (pad[1], pad[1] + extra[1]))
    return np.pad(x, widths, constant_values=value) if any(pad) or any(extra) else x


def crop(image: np.ndarray, pad, shape) -> np.ndarray:
    return np.ascontiguousarray(image[:, :, pad[0]:pad[0] + shape[2], pad[1]:pad[1] + shape[3]])


def _conv_infer(x: Aval, w: Aval, b: Aval | None = None, **attrs) -> list[Aval]:
    kernel, num_filter = attrs["kernel"], attrs["num_filter"]
    if len(x.shape) != 4 or len(kernel) != 2 or min(kernel) < 1:
        raise ShapeError(f"Convolution: needs NCHW data and a 2-D kernel, got data {x.shape} "
                         f"and kernel {kernel}")
    want = (num_filter, x.shape[1], *kernel)
    if w.shape != want or (b is not None and b.shape != (num_filter,)):
        raise ShapeError(f"Convolution: data {x.shape} needs weight {want} and bias "
                         f"({num_filter},), got weight {w.shape}"
                         f"{'' if b is None else f' and bias {b.shape}'}")
    check_pairs("Convolution", stride=attrs["stride"], pad=attrs["pad"], dilate=attrs["dilate"])
    sizes = [out_size("Convolution", x.shape[2 + i], (kernel[i] - 1) * attrs["dilate"][i] + 1,
                       attrs["stride"][i], attrs["pad"][i]) for i in (0, 1)]
    return [Aval((x.shape[0], num_filter, *sizes), promote(x.dtype, w.dtype))]


def _convolution(x, w, b=None, *, kernel, stride, dilate, pad, **unused):
    cols = _windows(pad_image(x, pad), kernel, stride, dilate)
    out = np.tensordot(cols, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    out = out if b is None else out + b.reshape(1, -1, 1, 1)
    return np.ascontiguousarray(out, dtype=promote(x.dtype, w.dtype))


def _conv_data_grad(g, w, x, *, kernel, stride, dilate, pad, **unused):
    cols = np.tensordot(g, w, axes=([1], [0])).transpose(0, 3, 1, 2, 4, 5)
    padded = (*x.shape[:2], x.shape[2] + 2 * pad[0], x.shape[3] + 2 * pad[1])
    return crop(fold(cols, padded, stride, dilate), pad, x.shape)


def _conv_weight_grad(g, x, *, kernel, stride, dilate, pad, **unused):
    cols = _windows(pad_image(x, pad), kernel, stride, dilate)
    return np.tensordot(g, cols, axes=([0, 2, 3], [0, 2, 3])).astype(g.dtype, copy=False)


def _conv_grad(F, inputs, outputs, out_grads, **attrs):
    x, w, g = inputs[0], inputs[1], out_grads[0]
    grads = [F._conv_data_grad(g, w, x, **attrs), F._conv_weight_grad(g, x, **attrs)]
    return grads if attrs["no_bias"] else grads + [F.sum(g, axis=(0, 2, 3))]


register(OpDef(
    name="Convolution", kernel=_convolution, infer=_conv_infer, grad=_conv_grad,
    infer_params=lambda x, *, kernel, num_filter, **_: {
        "weight": (num_filter, x.shape[1], *kernel), "bias": (num_filter,)},
    kind=Kind.OPAQUE, attrs=_CONV_ATTRS,
    inputs=lambda attrs: ("data", "weight") if attrs["no_bias"] else ("data", "weight", "bias"),
    doc="2-D convolution (cross-correlation) of NCHW ``data`` with ``weight`` of shape "
        "``(num_filter, C, kh, kw)``, plus ``bias``; ``stride``, ``pad`` and ``dilate`` per "
        "axis."))
register(OpDef(
    name="_conv_data_grad", kernel=_conv_data_grad, kind=Kind.OPAQUE,
    grad=None, grad_missing="Convolution's backward has no second order",
    infer=lambda g, w, x, **attrs: [Aval(x.shape, g.dtype)], attrs=_CONV_ATTRS,
    inputs=("data", "weight", "like"), doc="Convolution's gradient for its data (col2im)."))
register(OpDef(
    name="_conv_weight_grad", kernel=_conv_weight_grad, kind=Kind.OPAQUE,
    grad=None, grad_missing="Convolution's backward has no second order",
    infer=lambda g, x, **attrs: [Aval((g.shape[1], x.shape[1], *attrs["kernel"]), g.dtype)],
    attrs=_CONV_ATTRS, inputs=("data", "like"), doc="Convolution's gradient for its weight."))
