"""2-D convolution (NCHW) on numpy, with its gradients, and the window geometry it shares.

What this module teaches
------------------------
A convolution is a matrix product in disguise. Copy every ``kh x kw`` window of the
(padded) image into one matrix per image, ``(C*kh*kw, OH*OW)`` -- the classic *im2col*,
filled one kernel offset ``(i, j)`` at a time: offset ``(i, j)`` of every window is one
strided slab of the image (:func:`slabs`) -- and then ``weight (F, C*kh*kw) @ cols`` is
the image's output ``(F, OH*OW)``, already in NCHW order, so ``np.matmul`` writes it
straight into the result (``kernel_out``), with no transpose or copy afterwards.

The im2col matrix is ``kh * kw`` times bigger than the image: for LeNet's first layer
at batch 1024 it would be 59 MB to produce a 14 MB result. So the kernels walk the batch
in *chunks* of images (:func:`chunks`) whose scratch fits ``_SCRATCH`` bytes: the
memory a kernel needs stays bounded whatever the batch, and each product is still big
enough for BLAS. That scratch is an ``OpDef.workspace`` fact (MXNet's ``kTempSpace``):
the memory plan counts it at the op's step, and a test measures it.

Backwards, the weight gradient is the same product with the output gradient in the
weight's place, summed over the images. The data gradient is the reverse of im2col
(*col2im*, :func:`fold`): each window's gradient is added back where the window came
from -- a loop over the ``kh * kw`` kernel offsets (:func:`slabs`), each a vectorised
strided add. ``pool.py`` uses the same geometry helpers (``out_size``, ``slabs``,
``pad_image``) and chunks.

The backward kernels are internal ops (``_conv_data_grad``, ``_conv_weight_grad``) so
the gradient rules stay written with registry ops; they take the
forward input as ``like`` for its shape and have no second-order gradient.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops._infer import promote
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

_GEOMETRY = {"kernel": Attr("shape", low=1),
             "stride": Attr("shape", (1, 1), low=1, empty_is_default=True),
             "dilate": Attr("shape", (1, 1), low=1, empty_is_default=True),
             "pad": Attr("shape", (0, 0), low=0, empty_is_default=True)}
_CONV_ATTRS = {**_GEOMETRY, "num_filter": Attr("int", low=1),
               "num_group": Attr("int", 1, low=1),
               "no_bias": Attr("bool", False),
               "layout": Attr("str", "NCHW", ("NCW", "NCHW", "NCDHW")),  # (channels first)
               # MXNet's choice of algorithm by measurement (NOTE [Convolution algorithms]
               # in graph/passes/choose_convolutions.py): "off" keeps im2col; "None" is
               # the unset value MXNet writes; the other two measure, as the default does
               "cudnn_tune": Attr("str", "", ("", "None", "off", "limited_workspace",
                                              "fastest")),
               "cudnn_off": Attr("bool", False),  # True: im2col, nothing measured
               # MXNet's scratch limit in MB; hybridlab's kernels bound their scratch by
               # walking the batch in chunks (``chunks``), so it is read and not needed
               "workspace": Attr("int", 1024, low=0)}


def out_size(name: str, size: int, kernel: int, stride: int, pad: int, ceil: bool = False
             ) -> int:
    span = size + 2 * pad - kernel
    if span < 0 or stride < 1:
        raise ShapeError(f"{name}: a window of {kernel} (after dilation) does not fit an input "
                         f"of {size} padded by {pad} on each side (stride {stride})")
    return (math.ceil(span / stride) if ceil else span // stride) + 1


def spatial(name: str, attrs: dict[str, Any], keys: Any = ("stride", "pad", "dilate")
            ) -> dict[str, Any]:
    """``attrs`` with one stride, pad and dilation per axis of the kernel: MXNet's unset
    value (hybridlab's 2-D default) or an all-zero pad becomes ones (zeros for pad) of the
    kernel's length."""
    n, fixed = len(attrs["kernel"]), dict(attrs)
    for key in keys:
        value = tuple(attrs[key])
        if len(value) != n:
            if value != (1, 1) and any(value):
                raise ShapeError(f"{name}: {key}={value} needs one value per axis of the "
                                 f"kernel {attrs['kernel']}, e.g. {key}={(value[0],) * n}")
            fixed[key] = value[:1] * n
    return fixed


def lift(attrs: dict[str, Any]) -> dict[str, Any]:
    """1-D geometry as 2-D: a leading 1 (0 for pad) on each of kernel, stride, pad, dilate."""
    if len(attrs.get("kernel", ())) != 1:
        return attrs  # (a global pool's kernel is unset: the whole image)
    keys = [k for k in ("kernel", "stride", "pad", "dilate") if k in attrs]
    flat = spatial("", attrs, keys[1:])
    return {**flat, **{k: (0 if k == "pad" else 1, *flat[k]) for k in keys}}


def lifted(fn: Any) -> Callable[..., np.ndarray]:
    """A 2-D kernel (``kernel_out`` form) that also takes 1-D data (NCW): every array of
    three axes gets a height of 1 (a view: writes go through) and the geometry a leading
    1 (:func:`lift`); bias-like arrays of one axis pass as they are."""
    def run(*arrays: Any, out: np.ndarray, **attrs: Any) -> np.ndarray:
        if arrays[0].ndim != 3:
            result: np.ndarray = fn(*arrays, out=out, **attrs)
            return result
        fn(*(a[:, :, None] if a is not None and a.ndim == 3 else a for a in arrays),
           out=out[:, :, None], **lift(attrs))
        return out

    run.__name__ = fn.__name__
    return run


def slabs(kernel: Any, stride: Any, dilate: Any, size: tuple[int, ...]) -> Any:
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


def fold(cols: np.ndarray, image: np.ndarray, stride: Any, dilate: Any = (1, 1)) -> np.ndarray:
    """col2im: add each window's values, ``cols`` of shape ``(n, C, kh, kw, OH, OW)``,
    back where the window came from, into ``image`` (zeroed first)."""
    image[...] = 0
    for i, j, slab in slabs(cols.shape[2:4], stride, dilate, cols.shape[4:]):
        image[slab] += cols[:, :, i, j]
    return image


def pad_image(x: np.ndarray, pad: Any, extra: Any = (0, 0), value: float = 0.0) -> np.ndarray:
    """``x`` with ``pad`` (and ``extra`` at the end) rows and columns of ``value`` around
    each image (``x`` itself without padding). Written into a filled buffer by one slice
    assignment: ``np.pad``'s general machinery costs more than the copy on small images."""
    if not (any(pad) or any(extra)):
        return x
    n, c, h, w = x.shape
    padded = np.full((n, c, h + 2 * pad[0] + extra[0], w + 2 * pad[1] + extra[1]), value,
                     x.dtype)
    padded[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x
    return padded


def crop(image: np.ndarray, pad: Any, shape: Any) -> np.ndarray:
    """The part of a padded ``image`` that covers the real input of ``shape`` (a view)."""
    return image[:, :, pad[0]:pad[0] + shape[2], pad[1]:pad[1] + shape[3]]


_SCRATCH = 1 << 20  # bytes of scratch one chunk of images may fill. Measured on LeNet's
# training step: 1 MiB is within ~5 % of the speed of 2 or 4 MiB, and lowers the peak at
# batch 64 by 28 % (2 MiB); one chunk for a whole batch of 1024 is 2x slower.


def chunks(batch: int, per_image: int) -> list[slice]:
    """Slices of the batch whose scratch fits ``_SCRATCH`` bytes (at least one image)."""
    step = max(1, _SCRATCH // max(per_image, 1))
    return [slice(i, i + step) for i in range(0, batch, step)]


def chunk_scratch(batch: int, per_image: int) -> int:
    """The workspace of a kernel walking :func:`chunks`: its largest chunk's scratch."""
    return min(batch, max(1, _SCRATCH // max(per_image, 1))) * per_image


def _per_image(x: Aval | np.ndarray, grid: Any, dtype: Any, kernel: Any, pad: Any, filters: Any = 0,
               **unused: Any) -> int:
    """Bytes of scratch for one image of ``x``: its im2col matrix ``(C*kh*kw, OH*OW)``
    in ``dtype``, its padded copy if there is padding and, for the weight gradient, its
    product ``(filters, C*kh*kw)`` before the sum over the chunk (counted beside the
    padded copy, which is freed first: a slight over-estimate)."""
    channels, height, width = x.shape[1:]
    rows = channels * kernel[0] * kernel[1]
    padded = channels * (height + 2 * pad[0]) * (width + 2 * pad[1]) if any(pad) else 0
    return int(rows * (grid[0] * grid[1] + filters) * np.dtype(dtype).itemsize
               + padded * np.dtype(x.dtype).itemsize)


def _im2col(x: np.ndarray, dtype: Any, kernel: Any, stride: Any, dilate: Any, pad: Any,
            **unused: Any) -> np.ndarray:
    """The windows of the images ``x`` copied into one matrix per image,
    ``(n, C*kh*kw, OH*OW)``, in ``dtype`` (the one copy im2col makes). A 1x1 window with
    stride 1 and no padding *is* the image: its matrix is a view, nothing is copied
    (most of SqueezeNet's and ResNet's convolutions). Otherwise the matrix is filled one
    kernel offset at a time (:func:`slabs`): ``kh * kw`` copies of whole strided slabs,
    each row of the copy as long as an output row (faster than copying the 6-D window
    view, whose rows are as short as a window)."""
    if (tuple(kernel) == (1, 1) and tuple(stride) == (1, 1) and not any(pad)
            and x.dtype == dtype):
        return x.reshape(len(x), x.shape[1], x.shape[2] * x.shape[3])
    padded = pad_image(x, pad)
    size = tuple(out_size("Convolution", padded.shape[2 + i], (kernel[i] - 1) * dilate[i] + 1,
                          stride[i], 0) for i in (0, 1))
    n, channels = x.shape[:2]
    cols = np.empty((n, channels, *kernel, *size), dtype)
    for i, j, slab in slabs(kernel, stride, dilate, size):
        np.copyto(cols[:, :, i, j], padded[slab], casting="unsafe")
    return cols.reshape(n, channels * kernel[0] * kernel[1], size[0] * size[1])


def _flat(images: np.ndarray) -> tuple[int, int, int]:
    """The shape ``(N, C, H*W)`` of ``(N, C, H, W)`` images (spelled out: an empty batch
    has no -1 to infer)."""
    return (*images.shape[:2], images.shape[2] * images.shape[3])


def allocating(kernel_out: Any, infer: Any) -> Any:
    """The plain kernel of an op written as its ``kernel_out``: allocate the promised result."""
    def kernel(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
        aval = infer(*(Aval(a.shape, a.dtype) for a in arrays), **attrs)[0]
        result: np.ndarray = kernel_out(*arrays, out=np.empty(aval.shape, aval.dtype), **attrs)
        return result

    def specialise(avals: list[Aval], out: bool, **attrs: Any) -> Any:
        """NOTE [Specialised kernels] in graph/codegen.py: with the shapes known when the
        program is compiled, the result's aval is too -- ``infer`` runs once, here, not on
        every call (on SqueezeNet, a tenth of a forward's time went to asking it). Into a
        planned buffer (``out``): the attributes bound, so the line shows none."""
        if out:  # a planned buffer: ``kernel_out`` with the attributes bound
            def into(*arrays: np.ndarray, out: np.ndarray) -> np.ndarray:
                written: np.ndarray = kernel_out(*arrays, out=out, **attrs)
                return written

            into.__name__ = f"{kernel.__name__}_into"
            return into
        result = infer(*avals, **attrs)[0]
        shape, dtype = tuple(result.shape), np.dtype(result.dtype)

        def sized(*arrays: np.ndarray) -> np.ndarray:
            made: np.ndarray = kernel_out(*arrays, out=np.empty(shape, dtype), **attrs)
            return made

        sized.__name__ = f"{kernel.__name__}_sized"
        return sized

    kernel.__name__ = kernel_out.__name__.removesuffix("_out")
    kernel.specialise = specialise  # type: ignore[attr-defined]  # asked by graph/codegen.py
    return kernel


def _conv_infer(x: Aval, w: Aval, b: Aval | None = None, **attrs: Any) -> list[Aval]:
    kernel, num_filter = attrs["kernel"], attrs["num_filter"]
    if len(x.shape) != 2 + len(kernel) or len(kernel) not in (1, 2, 3):
        raise ShapeError(f"Convolution: needs data NCW, NCHW or NCDHW with a kernel of one "
                         f"size per spatial axis, got data {x.shape} and kernel {kernel}")
    groups = attrs["num_group"]
    if x.shape[1] % groups or num_filter % groups:
        raise ShapeError(f"Convolution: num_group={groups} must divide the data's "
                         f"{x.shape[1]} channels and the {num_filter} filters")
    want = (num_filter, x.shape[1] // groups, *kernel)
    if w.shape != want or (b is not None and b.shape != (num_filter,)):
        raise ShapeError(f"Convolution: data {x.shape} needs weight {want} and bias "
                         f"({num_filter},), got weight {w.shape}"
                         f"{'' if b is None else f' and bias {b.shape}'}")
    geometry = spatial("Convolution", attrs)
    sizes = [out_size("Convolution", x.shape[2 + i], (k - 1) * geometry["dilate"][i] + 1,
                      geometry["stride"][i], geometry["pad"][i]) for i, k in enumerate(kernel)]
    return [Aval((x.shape[0], num_filter, *sizes), promote(x.dtype, w.dtype))]


def _convolution_out(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, out: np.ndarray,
                     **attrs: Any) -> np.ndarray:
    """``out[n] = weight (F, C*kh*kw) @ im2col(x[n])``, a chunk of images at a time."""
    filters = w.reshape(len(w), -1).astype(out.dtype, copy=False)
    rows = np.reshape(out, _flat(out), copy=False)  # a view: the products write into it
    for part in chunks(len(x), _per_image(x, out.shape[2:], out.dtype, **attrs)):
        np.matmul(filters, _im2col(x[part], out.dtype, **attrs), out=rows[part])
    if b is not None:
        np.add(out, b.reshape(1, -1, 1, 1), out=out, casting="unsafe")
    return out


def _conv_data_grad_out(g: np.ndarray, w: np.ndarray, x: np.ndarray, *, out: np.ndarray,
                        kernel: Any, stride: Any, dilate: Any, pad: Any, **unused: Any
        ) -> np.ndarray:
    """col2im of ``weight.T @ g[n]``, a chunk of images at a time."""
    transposed = w.reshape(len(w), -1).T.astype(out.dtype, copy=False)  # (C*kh*kw, F)
    grads, padded = g.reshape(_flat(g)), np.add(x.shape[2:], np.multiply(2, pad))
    for part in chunks(len(g), _per_image(out, g.shape[2:], out.dtype, kernel, pad)):
        cols = np.matmul(transposed, grads[part]).reshape(-1, x.shape[1], *kernel, *g.shape[2:])
        image = np.empty((len(cols), x.shape[1], *padded), out.dtype) if any(pad) else out[part]
        fold(cols, image, stride, dilate)
        if any(pad):
            out[part] = crop(image, pad, x.shape)
        del cols, image  # free this chunk's scratch before the next chunk makes its own
    return out


def _conv_weight_grad_out(g: np.ndarray, x: np.ndarray, *, out: np.ndarray, **attrs: Any
        ) -> np.ndarray:
    """``sum over images of g[n] (F, OH*OW) @ im2col(x[n]).T``, a chunk at a time."""
    grads, total = g.reshape(_flat(g)), np.reshape(out, (len(out), -1), copy=False)
    total[...] = 0
    for part in chunks(len(g), _per_image(x, g.shape[2:], out.dtype, filters=len(out), **attrs)):
        cols = _im2col(x[part], out.dtype, **attrs)
        total += np.matmul(grads[part], cols.transpose(0, 2, 1)).sum(axis=0)
        del cols  # free this chunk's scratch before the next chunk makes its own
    return out


def _weight_grad_workspace(g: Aval, x: Aval, **attrs: Any) -> int:
    """The chunks' scratch, and the sum of the last chunk's products (the weight's size)."""
    (x, g), attrs, extra = _plane_avals(x, attrs, g)
    per_image = _per_image(x, g.shape[2:], g.dtype, filters=g.shape[1], **attrs)
    summed = g.shape[1] * x.shape[1] * attrs["kernel"][0] * attrs["kernel"][1]
    result: int = chunk_scratch(x.shape[0], per_image) + summed * np.dtype(g.dtype).itemsize \
        + extra
    return result


def _weight_grad_infer(g: Aval, x: Aval, **attrs: Any) -> list[Aval]:
    return [Aval((g.shape[1], x.shape[1] // attrs["num_group"], *attrs["kernel"]), g.dtype)]


# NOTE [Groups] With ``num_group=k`` the channels and the filters split into k groups, and
# group i's filters see only group i's channels (AlexNet's two halves, ShuffleNet's 1x1
# layers; k = C is a depthwise convolution). im2col's matrix lists the rows channel by
# channel, so group i's rows are the i-th k-th of it: the forward is one stacked product,
# ``(k, F/k, C/k*kh*kw) @ (n, k, C/k*kh*kw, OH*OW)``, written straight into the result
# (ShuffleNet's 1x1 layers of 3 groups had been three products, three copies into place).
# The gradients run once per group on channel slices.
def _grouped_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                     out: np.ndarray, num_group: int, **attrs: Any) -> np.ndarray:
    if num_group == 1:
        return _convolution_out(x, w, b, out=out, **attrs)
    filters = w.reshape(num_group, len(w) // num_group, -1).astype(out.dtype, copy=False)
    rows = np.reshape(out, (len(out), num_group, len(w) // num_group, -1), copy=False)
    for part in chunks(len(x), _per_image(x, out.shape[2:], out.dtype, **attrs)):
        cols = _im2col(x[part], out.dtype, **attrs)
        np.matmul(filters, cols.reshape(len(cols), num_group, -1, cols.shape[-1]),
                  out=rows[part])
    if b is not None:
        np.add(out, b.reshape(1, -1, 1, 1), out=out, casting="unsafe")
    return out


def _grouped_data_grad(g: np.ndarray, w: np.ndarray, x: np.ndarray, *, out: np.ndarray,
                       num_group: int, **attrs: Any) -> np.ndarray:
    if num_group == 1:
        return _conv_data_grad_out(g, w, x, out=out, **attrs)
    for cs, fs in _groups(num_group, x.shape[1], len(w)):
        part = np.empty((len(x), cs.stop - cs.start, *x.shape[2:]), out.dtype)
        out[:, cs] = _conv_data_grad_out(g[:, fs], w[fs], x[:, cs], out=part, **attrs)
    return out


def _grouped_weight_grad(g: np.ndarray, x: np.ndarray, *, out: np.ndarray, num_group: int,
                         **attrs: Any) -> np.ndarray:
    for cs, fs in _groups(num_group, x.shape[1], len(out)):  # out[fs]: contiguous, in place
        _conv_weight_grad_out(g[:, fs], x[:, cs], out=out[fs], **attrs)
    return out


def _groups(count: int, channels: int, filters: int) -> list[tuple[slice, slice]]:
    """Each group's (channels, filters) slices."""
    c, f = channels // count, filters // count
    return [(slice(i * c, (i + 1) * c), slice(i * f, (i + 1) * f)) for i in range(count)]


_PLANAR = {fn.__name__: lifted(fn) for fn in (_grouped_forward, _grouped_data_grad,
                                              _grouped_weight_grad)}  # made once, not per call


# NOTE [1-D and 3-D] The kernels above are 2-D. 1-D data (NCW) is an image of height 1
# (:func:`lifted`: views, nothing copied). A 3-D convolution (NCDHW) adds up one 2-D
# convolution per depth offset ``k`` of its kernel: offset k reads every stride-th depth
# slice from ``k * dilate``, and those slices, folded into the batch, are one batch of
# 2-D images (:func:`_planes`) for the weight's slice ``w[:, :, k]``. Backwards, each
# offset's data gradient is added back to the slices it read; its weight gradient is
# the weight's slice k.
def _depth(attrs: dict[str, Any]) -> tuple[tuple[int, ...], dict[str, Any]]:
    """(kernel, stride, pad, dilate) along the depth, and the 2-D attributes of a plane."""
    attrs = spatial("Convolution", attrs)
    keys = ("kernel", "stride", "pad", "dilate")
    return tuple(attrs[k][0] for k in keys), {**attrs, **{k: attrs[k][1:] for k in keys}}


def _planes(x: np.ndarray, k: int, depth: tuple[int, ...], count: int) -> np.ndarray:
    """The ``count`` depth slices kernel offset ``k`` reads, as 2-D images
    ``(N*count, C, H, W)``."""
    _, stride, _, dilate = depth
    slab = x[:, :, k * dilate:k * dilate + stride * (count - 1) + 1:stride]
    return slab.transpose(0, 2, 1, 3, 4).reshape(-1, x.shape[1], *x.shape[3:])


def _unplanes(planes: np.ndarray, n: int) -> np.ndarray:
    """``(N*D, C, H, W)`` images back to one volume ``(N, C, D, H, W)`` (a view)."""
    return planes.reshape(n, -1, *planes.shape[1:]).transpose(0, 2, 1, 3, 4)


def _pad_depth(x: np.ndarray, pad: int) -> np.ndarray:
    return np.pad(x, [(0, 0), (0, 0), (pad, pad), (0, 0), (0, 0)]) if pad else x


def _forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, out: np.ndarray,
             **attrs: Any) -> np.ndarray:
    if len(attrs["kernel"]) != 3:
        return _PLANAR["_grouped_forward"](x, w, b, out=out, **attrs)
    depth, flat = _depth(attrs)
    padded, count = _pad_depth(x, depth[2]), out.shape[2]
    out[...] = 0
    for k in range(depth[0]):
        planes = _planes(padded, k, depth, count)
        part = np.empty((len(planes), len(w), *out.shape[3:]), out.dtype)
        out += _unplanes(_grouped_forward(planes, w[:, :, k], out=part, **flat), len(x))
    if b is not None:
        np.add(out, b.reshape(1, -1, 1, 1, 1), out=out, casting="unsafe")
    return out


def _data_grad(g: np.ndarray, w: np.ndarray, x: np.ndarray, *, out: np.ndarray, **attrs: Any
               ) -> np.ndarray:
    if len(attrs["kernel"]) != 3:
        return _PLANAR["_grouped_data_grad"](g, w, x, out=out, **attrs)
    (size, stride, pad, dilate), flat = _depth(attrs)
    count, depth = g.shape[2], x.shape[2]
    image = np.zeros((*x.shape[:2], depth + 2 * pad, *x.shape[3:]), out.dtype)
    grads = _planes(g, 0, (1, 1, 0, 1), count)
    like = np.broadcast_to(np.zeros((), x.dtype), (len(grads), x.shape[1], *x.shape[3:]))
    for k in range(size):
        part = _grouped_data_grad(grads, w[:, :, k], like, out=np.empty(like.shape, out.dtype),
                                  **flat)
        image[:, :, k * dilate:k * dilate + stride * (count - 1) + 1:stride] += _unplanes(
            part, len(x))
    out[...] = image[:, :, pad:pad + depth]
    return out


def _weight_grad(g: np.ndarray, x: np.ndarray, *, out: np.ndarray, **attrs: Any) -> np.ndarray:
    if len(attrs["kernel"]) != 3:
        return _PLANAR["_grouped_weight_grad"](g, x, out=out, **attrs)
    depth, flat = _depth(attrs)
    padded, count = _pad_depth(x, depth[2]), g.shape[2]
    grads = _planes(g, 0, (1, 1, 0, 1), count)
    for k in range(depth[0]):
        part = np.empty((*out.shape[:2], *out.shape[3:]), out.dtype)
        out[:, :, k] = _grouped_weight_grad(grads, _planes(padded, k, depth, count), out=part,
                                            **flat)
    return out


def _plane_avals(x: Aval, attrs: dict[str, Any], *others: Aval) -> tuple[Any, ...]:
    """For a workspace: ``x`` and ``others`` (data-like avals) as the 2-D images the
    kernels run on, the 2-D attributes, and the bytes the 1-D/3-D forms add (3-D: the
    padded volume and one offset's planes and result, a slight over-estimate)."""
    if len(attrs["kernel"]) == 2:
        return (x, *others), attrs, 0
    if len(attrs["kernel"]) == 1:
        return tuple(Aval((*a.shape[:2], 1, *a.shape[2:]), a.dtype) for a in (x, *others)), \
            lift(attrs), 0
    depth, flat = _depth(attrs)
    count = out_size("Convolution", x.shape[2], (depth[0] - 1) * depth[3] + 1, depth[1],
                     depth[2])
    planes = [Aval((a.shape[0] * count, a.shape[1], *a.shape[3:]), a.dtype) for a in (x, *others)]
    extra = sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in planes)
    return tuple(planes), flat, extra + int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize


def _forward_workspace(x: Aval, w: Aval, b: Aval | None = None, **attrs: Any) -> int:
    (x2,), flat, extra = _plane_avals(x, attrs)
    grid = (1, *_conv_infer(x, w, **attrs)[0].shape[2:])[-2:]  # a plane's (OH, OW)
    return chunk_scratch(x2.shape[0], _per_image(x2, grid, promote(x.dtype, w.dtype), **flat)) \
        + int(extra)


def _data_grad_workspace(g: Aval, w: Aval, x: Aval, **attrs: Any) -> int:
    (x2, g2), flat, extra = _plane_avals(x, attrs, g)
    return chunk_scratch(x2.shape[0], _per_image(Aval(x2.shape, g.dtype), g2.shape[2:], g.dtype,
                                                 **flat)) + int(extra)


def _conv_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], **attrs: Any
        ) -> list[Any]:
    x, w, g = inputs[0], inputs[1], out_grads[0]
    grads = [F._conv_data_grad(g, w, x, **attrs), F._conv_weight_grad(g, x, **attrs)]
    spatial_axes = tuple(range(2, 2 + len(attrs["kernel"])))
    return grads if attrs["no_bias"] else grads + [F.sum(g, axis=(0, *spatial_axes))]


def _conv_back(inputs: list[Any], outputs: list[Any], *, kernel: tuple[int, ...],
               stride: tuple[int, ...], dilate: tuple[int, ...], pad: tuple[int, ...],
               **_: Any) -> list[Any]:
    """The output's batch is the data's; with stride 1 each spatial size of the data
    follows from the output's (``in = out - 2 pad + dilate (kernel - 1)``); a stride
    above 1 leaves several input sizes possible, so those stay unknown."""
    out, data = outputs[0], inputs[0]
    if out is None or data is None or len(out) != len(data):
        return inputs
    spatial = []
    for i, size in enumerate(out[2:]):
        step = stride[i] if i < len(stride) else 1
        gap = dilate[i] if i < len(dilate) else 1
        margin = pad[i] if i < len(pad) else 0
        found = size - 2 * margin + gap * (kernel[i] - 1)
        spatial.append(found if size and step == 1 and found > 0 else 0)
    return [(out[0], data[1], *spatial), *inputs[1:]]


register(OpDef(
    name="Convolution", kernel=allocating(_forward, _conv_infer),
    kernel_out=_forward, infer=_conv_infer, grad=_conv_grad, workspace=_forward_workspace,
    infer_back=_conv_back,
    infer_params=lambda x, *, kernel, num_filter, num_group, **_: {
        "weight": (num_filter, x.shape[1] // num_group, *kernel), "bias": (num_filter,)},
    kind=Kind.OPAQUE, attrs=_CONV_ATTRS,
    inputs=lambda attrs: ("data", "weight") if attrs["no_bias"] else ("data", "weight", "bias"),
    doc="1-, 2- or 3-D convolution (cross-correlation) of NCW/NCHW/NCDHW ``data`` with "
        "``weight`` of shape ``(num_filter, C / num_group, *kernel)``, plus ``bias``; "
        "``stride``, ``pad`` and ``dilate`` per axis; ``num_group`` splits channels and "
        "filters (NOTE [Groups])."))
register(OpDef(
    name="_conv_data_grad", kind=Kind.OPAQUE, kernel_out=_data_grad,
    kernel=allocating(_data_grad, lambda g, w, x, **attrs: [Aval(x.shape, g.dtype)]),
    workspace=_data_grad_workspace,
    grad=None, grad_missing="Convolution's backward has no second order",
    infer=lambda g, w, x, **attrs: [Aval(x.shape, g.dtype)], attrs=_CONV_ATTRS,
    inputs=("data", "weight", "like"), doc="Convolution's gradient for its data (col2im)."))
register(OpDef(
    name="_conv_weight_grad", kernel=allocating(_weight_grad, _weight_grad_infer),
    kernel_out=_weight_grad, kind=Kind.OPAQUE, workspace=_weight_grad_workspace,
    grad=None, grad_missing="Convolution's backward has no second order",
    infer=_weight_grad_infer, attrs=_CONV_ATTRS, inputs=("data", "like"),
    doc="Convolution's gradient for its weight."))


# NOTE [Deconvolution] A transposed convolution *is* a convolution's data gradient: each
# input pixel adds ``weight`` times itself into a window of the output. So its forward is
# ``_conv_data_grad`` of the convolution that would map its output back to its input (the
# weight's layout, (C_in, num_filter / groups, *kernel), is that convolution's), its data
# gradient is that convolution, and its weight gradient ``_conv_weight_grad`` with data
# and output gradient swapped.
def _conv_of(attrs: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The attributes of the convolution a Deconvolution is the data gradient of."""
    return {**{k: v for k, v in attrs.items() if k in _CONV_ATTRS}, **changes}


def _deconv_infer(x: Aval, w: Aval, b: Aval | None = None, **attrs: Any) -> list[Aval]:
    kernel, filters, groups = attrs["kernel"], attrs["num_filter"], attrs["num_group"]
    want = (x.shape[1] if len(x.shape) > 1 else 0, filters // groups, *kernel)
    if (len(x.shape) != 2 + len(kernel) or len(kernel) not in (1, 2, 3) or x.shape[1] % groups
            or filters % groups or w.shape != want or b is not None and b.shape != (filters,)):
        raise ShapeError(f"Deconvolution: data NCW/NCHW/NCDHW {x.shape} with kernel {kernel} "
                         f"needs weight {want} (in channels, num_filter / num_group, *kernel)"
                         f" and bias ({filters},); got weight {w.shape}")
    if any(attrs["target_shape"]):
        raise ShapeError("Deconvolution: target_shape is not supported; give pad and adj")
    geometry = spatial("Deconvolution", attrs, ("stride", "pad", "dilate", "adj"))
    stride, pad, dilate, adj = (geometry[k] for k in ("stride", "pad", "dilate", "adj"))
    sizes = [(x.shape[2 + i] - 1) * stride[i] - 2 * pad[i] + dilate[i] * (k - 1) + 1 + adj[i]
             for i, k in enumerate(kernel)]
    if min(sizes) < 1 or any(a >= s for a, s in zip(adj, stride)):
        raise ShapeError(f"Deconvolution: data {x.shape} gives output sizes {sizes}; pad less, "
                         f"and keep each adj smaller than its stride")
    return [Aval((x.shape[0], filters, *sizes), promote(x.dtype, w.dtype))]


def _deconvolution_out(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                       out: np.ndarray, **attrs: Any) -> np.ndarray:
    like = np.broadcast_to(np.zeros((), out.dtype), out.shape)  # (only its shape is read)
    _data_grad(x, w, like, out=out, **_conv_of(attrs))
    if b is not None:
        np.add(out, b.reshape(1, -1, *(1,) * (out.ndim - 2)), out=out, casting="unsafe")
    return out


def _deconv_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
                 **attrs: Any) -> list[Any]:
    x, w, g = inputs[0], inputs[1], out_grads[0]
    grads = [F._deconv_data_grad(g, w, **attrs), F._conv_weight_grad(x, g, **_conv_of(attrs))]
    axes = (0, *range(2, 2 + len(attrs["kernel"])))
    return grads if attrs["no_bias"] else grads + [F.sum(g, axis=axes)]


def _deconv_data_grad_infer(g: Aval, w: Aval, **attrs: Any) -> list[Aval]:
    return _conv_infer(g, w, **_conv_of(attrs, num_filter=w.shape[0], no_bias=True))


_DECONV_ATTRS = {**_CONV_ATTRS, "no_bias": Attr("bool", True),
                 "adj": Attr("shape", (0, 0), low=0, empty_is_default=True),
                 "target_shape": Attr("shape", (0, 0), low=0, empty_is_default=True)}
register(OpDef(
    name="Deconvolution", kernel=allocating(_deconvolution_out, _deconv_infer),
    kernel_out=_deconvolution_out, infer=_deconv_infer, grad=_deconv_grad,
    workspace=lambda x, w, b=None, **attrs: _data_grad_workspace(
        x, w, _deconv_infer(x, w, **attrs)[0], **_conv_of(attrs)),
    infer_params=lambda x, *, kernel, num_filter, num_group, **_: {
        "weight": (x.shape[1], num_filter // num_group, *kernel), "bias": (num_filter,)},
    kind=Kind.OPAQUE, attrs=_DECONV_ATTRS,
    inputs=lambda attrs: ("data", "weight") if attrs["no_bias"] else ("data", "weight", "bias"),
    doc="The transposed convolution (NOTE [Deconvolution]) of NCW/NCHW/NCDHW ``data`` with "
        "``weight`` ``(C, num_filter / num_group, *kernel)``: output size ``(in - 1) * stride "
        "- 2 * pad + dilate * (kernel - 1) + 1 + adj``; no bias unless ``no_bias=False``."))
register(OpDef(
    name="_deconv_data_grad", kind=Kind.OPAQUE, attrs=_DECONV_ATTRS, inputs=("data", "weight"),
    kernel=allocating(lambda g, w, *, out, **attrs: _forward(
        g, w, out=out, **_conv_of(attrs, num_filter=w.shape[0])), _deconv_data_grad_infer),
    infer=_deconv_data_grad_infer, grad=None, grad_missing="Deconvolution has no second order",
    doc="Deconvolution's gradient for its data: the convolution it transposes."))
