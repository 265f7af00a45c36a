"""Deformable convolution (``contrib.DeformableConvolution``, Dai et al. 2017).

What this module teaches
------------------------
A convolution reads each window on a fixed grid: output ``(y, x)`` and kernel tap
``(i, j)`` read the input at ``(y*stride - pad + i*dilate, x*stride - pad + j*dilate)``.
A deformable convolution adds a learned *offset* to every tap of every window: a second
input ``offset`` of shape ``(N, 2*kh*kw*G, Ho, Wo)`` holds ``(dy, dx)`` per tap (channel
``2k`` for rows, ``2k + 1`` for columns, tap ``k = i*kw + j``), one set per *deformable
group* of ``C / G`` input channels. A tap landing between pixels reads the bilinear mix of
its four neighbours. Once every tap has been read into columns (a deformable ``im2col``),
the rest is the ordinary product with the weights, so offsets of zero give exactly
``Convolution``.

The gradient follows the same path back: the columns' gradient is ``weight.T @ out_grad``;
each tap hands its share to its four neighbours (the data's gradient, a scatter-add) and,
through the slope of the bilinear mix, to its own offset. MXNet's CPU rules at the edges
are kept: a tap outside ``[0, H) x [0, W)`` reads 0, and one in the last row or column
reads that row or column alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops._infer import promote
from hybridlab.ops.conv import _GEOMETRY, out_size, spatial
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

_ATTRS = {**_GEOMETRY, "num_filter": Attr("int", low=1), "num_group": Attr("int", 1, low=1),
          "num_deformable_group": Attr("int", 1, low=1), "no_bias": Attr("bool", False),
          "workspace": Attr("int", 1024, low=0), "layout": Attr("str", "NCHW", ("NCHW",))}


def _input_names(attrs: dict[str, Any]) -> tuple[str, ...]:
    return ("data", "offset", "weight") if attrs["no_bias"] else ("data", "offset", "weight",
                                                                  "bias")


def _taps(x: np.ndarray, offset: np.ndarray, attrs: dict[str, Any]) -> dict[str, Any]:
    """Where every tap reads: the four neighbours' indices and weights, (N, G, K, Ho, Wo)."""
    (kh, kw), geometry = attrs["kernel"], spatial("DeformableConvolution", attrs)
    (sh, sw), (dh, dw), (ph, pw) = geometry["stride"], geometry["dilate"], geometry["pad"]
    n, _, height, width = x.shape
    out_h, out_w = offset.shape[2:]
    shifts = offset.reshape(n, attrs["num_deformable_group"], kh * kw, 2, out_h, out_w)
    rows = (np.arange(out_h) * sh - ph)[:, None] + np.repeat(np.arange(kh) * dh, kw)[:, None, None]
    cols = (np.arange(out_w) * sw - pw)[None, :] + np.tile(np.arange(kw) * dw, kh)[:, None, None]
    h = rows + shifts[:, :, :, 0].astype(np.float64)
    w = cols + shifts[:, :, :, 1].astype(np.float64)
    inside = (h >= 0) & (w >= 0) & (h < height) & (w < width)
    h, w = np.where(inside, h, 0.0), np.where(inside, w, 0.0)
    h_low, w_low = np.floor(h).astype(np.int64), np.floor(w).astype(np.int64)
    # the last row or column reads itself alone (MXNet's CPU kernel)
    lh = np.where(h_low >= height - 1, 0.0, h - h_low)
    lw = np.where(w_low >= width - 1, 0.0, w - w_low)
    h_high, w_high = np.minimum(h_low + 1, height - 1), np.minimum(w_low + 1, width - 1)
    corners = [(h_low, w_low, (1 - lh) * (1 - lw)), (h_low, w_high, (1 - lh) * lw),
               (h_high, w_low, lh * (1 - lw)), (h_high, w_high, lh * lw)]
    return {"corners": [(a, b, weight * inside) for a, b, weight in corners], "lh": lh,
            "lw": lw, "inside": inside}


def _channels_last(x: np.ndarray, groups: int) -> np.ndarray:
    """(N, C, H, W) -> (N, G, H, W, C/G): a tap's neighbours gathered with all channels."""
    n, c, height, width = x.shape
    return x.reshape(n, groups, c // groups, height, width).transpose(0, 1, 3, 4, 2)


def _gather(image: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, groups = image.shape[:2]
    picked: np.ndarray = image[np.arange(n)[:, None, None, None, None],
                               np.arange(groups)[None, :, None, None, None], a, b]
    return picked


def _columns(x: np.ndarray, taps: dict[str, Any], groups: int) -> np.ndarray:
    """The deformable im2col: (N, C*K, Ho*Wo), channel-major as Convolution's weight."""
    image = _channels_last(x.astype(np.float64), groups)
    sampled: np.ndarray = sum(weight[..., None] * _gather(image, a, b)
                              for a, b, weight in taps["corners"])
    n, _, k, out_h, out_w, per_group = sampled.shape  # (N, G, K, Ho, Wo, C/G)
    return sampled.transpose(0, 1, 5, 2, 3, 4).reshape(n, groups * per_group * k, out_h * out_w)


def _by_group(weight: np.ndarray, num_group: int) -> np.ndarray:
    return weight.reshape(num_group, len(weight) // num_group, -1).astype(np.float64)


def _forward(x: np.ndarray, offset: np.ndarray, weight: np.ndarray,
             bias: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    columns = _columns(x, _taps(x, offset, attrs), attrs["num_deformable_group"])
    n, _, size = columns.shape
    grouped = columns.reshape(n, attrs["num_group"], -1, size)
    out = np.einsum("gfr,ngrl->ngfl", _by_group(weight, attrs["num_group"]), grouped)
    out = out.reshape(n, len(weight), *offset.shape[2:])
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    result: np.ndarray = out.astype(promote(x.dtype, weight.dtype))
    return result


def _backward(x: np.ndarray, offset: np.ndarray, weight: np.ndarray, *rest: np.ndarray,
              **attrs: Any) -> tuple[np.ndarray, ...]:
    """Gradients for data, offset, weight (and bias) from the output's gradient."""
    out_grad = rest[-1].astype(np.float64)
    groups, num_group = attrs["num_deformable_group"], attrs["num_group"]
    taps = _taps(x, offset, attrs)
    n, filters = out_grad.shape[:2]
    flat_grad = out_grad.reshape(n, num_group, filters // num_group, -1)
    columns = _columns(x, taps, groups).reshape(n, num_group, -1, flat_grad.shape[-1])
    grad_weight = np.einsum("ngfl,ngrl->gfr", flat_grad, columns).reshape(weight.shape)
    grad_columns = np.einsum("gfr,ngfl->ngrl", _by_group(weight, num_group), flat_grad)
    k = attrs["kernel"][0] * attrs["kernel"][1]
    out_h, out_w = offset.shape[2:]
    # back to one row per tap: (N, G, K, Ho, Wo, C/G)
    grad_taps = grad_columns.reshape(n, groups, -1, k, out_h, out_w).transpose(0, 1, 3, 4, 5, 2)
    image = _channels_last(x.astype(np.float64), groups)
    grad_image = np.zeros_like(image)
    index = (np.arange(n)[:, None, None, None, None], np.arange(groups)[None, :, None, None, None])
    values = []
    for a, b, share in taps["corners"]:
        np.add.at(grad_image, (*index, a, b), share[..., None] * grad_taps)
        values.append((_gather(image, a, b) * grad_taps).sum(-1))  # (N, G, K, Ho, Wo)
    v1, v2, v3, v4 = values
    lh, lw, inside = taps["lh"], taps["lw"], taps["inside"]
    # the bilinear mix's slope in each direction (zero where the tap reads one row/column)
    grad_h = inside * ((1 - lw) * (v3 - v1) + lw * (v4 - v2))
    grad_w = inside * ((1 - lh) * (v2 - v1) + lh * (v4 - v3))
    grad_offset = np.stack([grad_h, grad_w], axis=3).reshape(offset.shape)
    c = x.shape[1]
    grad_x = grad_image.transpose(0, 1, 4, 2, 3).reshape(n, c, *x.shape[2:])
    grads = [grad_x.astype(x.dtype), grad_offset.astype(offset.dtype),
             grad_weight.astype(weight.dtype)]
    if len(rest) == 2:
        grads.append(out_grad.sum(axis=(0, 2, 3)).astype(rest[0].dtype))
    return tuple(grads)


def _check(x: Aval, offset: Aval, weight: Aval, bias: Aval | None, attrs: dict[str, Any]
           ) -> tuple[int, int]:
    kernel, filters = attrs["kernel"], attrs["num_filter"]
    if len(x.shape) != 4 or len(kernel) != 2:
        raise ShapeError(f"DeformableConvolution: needs NCHW data and a 2-D kernel, got data "
                         f"{x.shape} and kernel {kernel}")
    c, groups, num_group = x.shape[1], attrs["num_deformable_group"], attrs["num_group"]
    if c % groups or c % num_group or filters % num_group:
        raise ShapeError(f"DeformableConvolution: num_deformable_group={groups} and "
                         f"num_group={num_group} must divide the data's {c} channels (and "
                         f"num_group the {filters} filters)")
    geometry = spatial("DeformableConvolution", attrs)
    out_h, out_w = (out_size("DeformableConvolution", x.shape[2 + i],
                             (size - 1) * geometry["dilate"][i] + 1, geometry["stride"][i],
                             geometry["pad"][i]) for i, size in enumerate(kernel))
    want = {"offset": (x.shape[0], 2 * kernel[0] * kernel[1] * groups, out_h, out_w),
            "weight": (filters, c // num_group, *kernel), "bias": (filters,)}
    given = {"offset": offset.shape, "weight": weight.shape,
             "bias": want["bias"] if bias is None else bias.shape}
    if given != want:
        raise ShapeError(f"DeformableConvolution: data {x.shape} needs {want}, got {given}")
    return out_h, out_w


def _infer(x: Aval, offset: Aval, weight: Aval, bias: Aval | None = None, **attrs: Any
           ) -> list[Aval]:
    out_h, out_w = _check(x, offset, weight, bias, attrs)
    return [Aval((x.shape[0], attrs["num_filter"], out_h, out_w), promote(x.dtype, weight.dtype))]


def _grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], **attrs: Any
          ) -> list[Any]:
    grads = F._backward_DeformableConvolution(*inputs, out_grads[0], **attrs)
    return [grads[i] for i in range(len(inputs))]


register(OpDef(
    name="_contrib_DeformableConvolution", kernel=_forward, infer=_infer, grad=_grad,
    kind=Kind.OPAQUE, inputs=_input_names, attrs=_ATTRS,
    infer_params=lambda x, *, kernel, num_filter, num_group, **_: {
        "weight": (num_filter, x.shape[1] // num_group, *kernel), "bias": (num_filter,)},
    aliases=("contrib.DeformableConvolution", "DeformableConvolution"),
    doc="2-D convolution whose taps read the NCHW ``data`` at learned ``offset``s "
        "(N, 2*kh*kw*num_deformable_group, Ho, Wo), bilinearly; zero offsets give "
        "``Convolution``."))
register(OpDef(
    name="_backward_DeformableConvolution", kernel=_backward, kind=Kind.OPAQUE, grad=None,
    grad_missing="DeformableConvolution's backward has no second order",
    infer=lambda *avals, **attrs: list(avals[:-1]),
    inputs=lambda attrs: _input_names(attrs) + ("out_grad",), attrs=_ATTRS,
    num_outputs=lambda attrs: len(_input_names(attrs)),
    doc="DeformableConvolution's gradients for data, offset, weight (and bias)."))
