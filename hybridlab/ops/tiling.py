"""Operators whose result repeats, pads or cuts the input: tile, repeat, pad, slice_like,
split_v2; and the two that read a shape as data: shape_array, size_array.

What this module teaches
------------------------
Each of these copies input elements to new places, so each gradient *gathers them back*:
an element copied to several places receives the sum of their gradients. The backward
ops (``_tile_grad``, ``_repeat_grad``, ``_pad_grad``, ``_slice_like_grad``) take the
forward input as ``like`` (only its shape is read), as the selections in ``indexing.py``
do, so a rule never needs a shape a Symbol may not know yet. Each backward op is linear in
the gradient, and its own VJP is the forward op again.

``_pad_grad`` shows the general trick: pad an array of *positions* (``arange``) the way the
data was padded, and each output element names the input element it copied (``-1`` for
a constant); summing the gradient by those positions (``np.bincount``) undoes any mode.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.join import split_grad
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, composite, register


def _aligned(shape: tuple[int, ...], reps: tuple[int, ...]
             ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``shape`` and ``reps`` padded with leading 1s to one length (numpy's ``tile`` rule)."""
    n = max(len(shape), len(reps))
    return (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + tuple(reps)


def _tile_infer(x: Aval, reps: tuple[int, ...]) -> list[Aval]:
    if any(r < 0 for r in reps):
        raise ShapeError(f"tile: reps {reps} has a negative count; every count must be >= 0")
    shape, full = _aligned(x.shape, reps)
    return [Aval(tuple(n * r for n, r in zip(shape, full)), x.dtype)]


def _tile_grad_kernel(g: np.ndarray, like: np.ndarray, reps: tuple[int, ...]) -> np.ndarray:
    shape, full = _aligned(like.shape, reps)
    split = g.reshape([d for n, r in zip(shape, full) for d in (r, n)])  # (r0, n0, r1, n1, ..)
    summed: np.ndarray = split.sum(axis=tuple(range(0, split.ndim, 2)), dtype=g.dtype)
    return summed.reshape(like.shape)


register(OpDef(
    name="tile", kernel=lambda x, reps: np.tile(x, reps), infer=_tile_infer,
    grad=lambda F, inputs, outputs, out_grads, reps: [F._tile_grad(out_grads[0], inputs[0],
                                                                    reps=reps)],
    kind=Kind.OPAQUE, attrs={"reps": Attr("shape")},
    doc="Repeat the whole array ``reps`` times along each axis (numpy's ``tile``)."))
register(OpDef(
    name="_tile_grad", kernel=_tile_grad_kernel, inputs=("data", "like"), kind=Kind.REDUCE,
    infer=lambda g, like, reps: [Aval(like.shape, g.dtype)],
    grad=lambda F, inputs, outputs, out_grads, reps: [F.tile(out_grads[0], reps=reps), None],
    attrs={"reps": Attr("shape")}, doc="Sum each tile's gradient back (``tile``'s VJP)."))


def _repeat_infer(x: Aval, repeats: int, axis: Any) -> list[Aval]:
    if axis is None:
        return [Aval((math.prod(x.shape) * repeats,), x.dtype)]
    if not -len(x.shape) <= axis < len(x.shape):
        raise ShapeError(f"repeat: axis {axis} is out of range for shape {x.shape}")
    shape = list(x.shape)
    shape[axis] *= repeats
    return [Aval(tuple(shape), x.dtype)]


def _repeat_grad_kernel(g: np.ndarray, like: np.ndarray, repeats: int, axis: Any
                        ) -> np.ndarray:
    split: np.ndarray
    if axis is None:
        split, axis = g.reshape(-1, repeats), 0
    else:
        axis %= like.ndim
        split = g.reshape(like.shape[:axis + 1] + (repeats,) + like.shape[axis + 1:])
    summed: np.ndarray = split.sum(axis=axis + 1, dtype=g.dtype)
    return summed.reshape(like.shape)


_REPEAT_ATTRS = {"repeats": Attr("int", low=1), "axis": Attr("index", None)}
register(OpDef(
    name="repeat", kernel=lambda x, repeats, axis: np.repeat(x, repeats, axis),
    infer=_repeat_infer, kind=Kind.OPAQUE, attrs=_REPEAT_ATTRS,
    grad=lambda F, inputs, outputs, out_grads, **kw: [F._repeat_grad(out_grads[0], inputs[0],
                                                                      **kw)],
    doc="Repeat each element ``repeats`` times along ``axis`` (flattened when None)."))
register(OpDef(
    name="_repeat_grad", kernel=_repeat_grad_kernel, inputs=("data", "like"), kind=Kind.REDUCE,
    infer=lambda g, like, **kw: [Aval(like.shape, g.dtype)], attrs=_REPEAT_ATTRS,
    grad=lambda F, inputs, outputs, out_grads, **kw: [F.repeat(out_grads[0], **kw), None],
    doc="Sum the copies' gradients back (``repeat``'s VJP)."))

_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect"}


def _widths(name: str, shape: tuple[int, ...], pad_width: tuple[int, ...]
            ) -> list[tuple[int, int]]:
    pairs = list(zip(pad_width[::2], pad_width[1::2]))
    if len(pad_width) != 2 * len(shape) or any(p < 0 for p in pad_width):
        raise ShapeError(f"{name}: pad_width {pad_width} needs two sizes >= 0 (before, after) "
                         f"for each of the {len(shape)} axes of shape {shape}")
    return pairs


def _pad_kernel(x: np.ndarray, mode: str, pad_width: Any, constant_value: float
                ) -> np.ndarray:
    extra = {"constant_values": constant_value} if mode == "constant" else {}
    padded: np.ndarray = np.pad(x, _widths("pad", x.shape, pad_width),
                                mode=_PAD_MODES[mode], **extra)  # type: ignore[call-overload]
    return padded


def _pad_infer(x: Aval, mode: str, pad_width: Any, constant_value: float) -> list[Aval]:
    pairs = _widths("pad", x.shape, pad_width)
    if mode == "reflect" and any(max(p) >= n for (p, n) in zip(pairs, x.shape)):
        raise ShapeError(f"pad: mode='reflect' needs each width below its axis's size; "
                         f"pad_width {pad_width} on shape {x.shape}")
    return [Aval(tuple(n + a + b for n, (a, b) in zip(x.shape, pairs)), x.dtype)]


def _pad_grad_kernel(g: np.ndarray, like: np.ndarray, mode: str, pad_width: Any,
                     constant_value: float) -> np.ndarray:
    positions = _pad_kernel(np.arange(like.size).reshape(like.shape), mode, pad_width, -1)
    picked = positions.reshape(-1) >= 0
    summed = np.bincount(positions.reshape(-1)[picked], weights=g.reshape(-1)[picked],
                         minlength=like.size)
    return summed.astype(g.dtype).reshape(like.shape)


_PAD_ATTRS = {"mode": Attr("str", "constant", tuple(_PAD_MODES)), "pad_width": Attr("shape"),
              "constant_value": Attr("float", 0.0)}
register(OpDef(
    name="Pad", kernel=_pad_kernel, infer=_pad_infer, kind=Kind.OPAQUE, attrs=_PAD_ATTRS,
    aliases=("pad",),
    grad=lambda F, inputs, outputs, out_grads, **kw: [F._pad_grad(out_grads[0], inputs[0],
                                                                   **kw)],
    doc="Pad every axis by ``pad_width`` = (before0, after0, before1, ...) with "
        "``constant_value``, the edge values (``edge``) or a mirror image (``reflect``)."))
register(OpDef(
    name="_pad_grad", kernel=_pad_grad_kernel, inputs=("data", "like"), kind=Kind.REDUCE,
    infer=lambda g, like, **kw: [Aval(like.shape, g.dtype)], attrs=_PAD_ATTRS,
    grad=lambda F, inputs, outputs, out_grads, **kw: [
        F.pad(out_grads[0], **{**kw, "constant_value": 0.0}), None],
    doc="Sum the gradient of every padded copy back into its source (``pad``'s VJP)."))


def _like_extent(name: str, x: tuple[int, ...], like: tuple[int, ...], axes: tuple[int, ...]
                 ) -> tuple[int, ...]:
    """``x`` cut to ``like``'s sizes on ``axes`` (all of ``like``'s axes when empty)."""
    chosen = [a % len(x) if -len(x) <= a < len(x) else len(x) for a in axes] or list(
        range(len(like)))
    if any(a >= min(len(x), len(like)) for a in chosen):
        raise ShapeError(f"{name}: axes {axes} do not fit shapes {x} and {like}")
    out = list(x)
    for a in chosen:
        if like[a] > x[a]:
            raise ShapeError(f"{name}: cannot cut axis {a} of {x} to {like[a]} (from {like})")
        out[a] = like[a]
    return tuple(out)


register(OpDef(
    name="slice_like", inputs=("data", "shape_like"), kind=Kind.OPAQUE,
    kernel=lambda x, like, axes: x[tuple(slice(n) for n in _like_extent(
        "slice_like", x.shape, like.shape, axes))].copy(),
    infer=lambda x, like, axes: [Aval(_like_extent("slice_like", x.shape, like.shape, axes),
                                      x.dtype)],
    grad=lambda F, inputs, outputs, out_grads, axes: [
        F._slice_like_grad(out_grads[0], inputs[0]), None],
    attrs={"axes": Attr("shape", ())},
    doc="The start of ``data`` cut to the sizes of ``shape_like`` on ``axes`` (all when empty)."))


def _slice_like_grad_kernel(g: np.ndarray, like: np.ndarray) -> np.ndarray:
    out = np.zeros(like.shape, g.dtype)
    out[tuple(slice(n) for n in g.shape)] = g
    return out


register(OpDef(
    name="_slice_like_grad", kernel=_slice_like_grad_kernel, inputs=("data", "like"),
    infer=lambda g, like: [Aval(like.shape, g.dtype)], kind=Kind.OPAQUE,
    grad=lambda F, inputs, outputs, out_grads: [F.slice_like(out_grads[0], inputs[0]), None],
    doc="Zeros shaped like ``like`` with ``data`` at its start (``slice_like``'s VJP)."))


def _split_v2_infer(x: Aval, indices_or_sections: Any, axis: int, squeeze_axis: bool
                    ) -> list[Aval]:
    if not -len(x.shape) <= axis < len(x.shape):
        raise ShapeError(f"split_v2: axis {axis} is out of range for shape {x.shape}")
    size = x.shape[axis]
    if isinstance(indices_or_sections, int):
        if indices_or_sections < 1 or size % indices_or_sections:
            raise ShapeError(f"split_v2: {size} cannot be split into {indices_or_sections} "
                             f"equal sections; give a divisor, or indices")
        bounds = list(range(0, size + 1, size // indices_or_sections))
    else:
        bounds = [0, *indices_or_sections, size]
        if any(b > c for b, c in zip(bounds, bounds[1:])):
            raise ShapeError(f"split_v2: indices {indices_or_sections} must rise within "
                             f"0..{size}")
    shapes = []
    for start, stop in zip(bounds, bounds[1:]):
        part = list(x.shape)
        part[axis] = stop - start
        shapes.append(tuple(part[:axis % len(part)] + part[axis % len(part) + 1:])
                      if squeeze_axis and stop - start == 1 else tuple(part))
    return [Aval(s, x.dtype) for s in shapes]


def _split_v2_kernel(x: np.ndarray, indices_or_sections: Any, axis: int, squeeze_axis: bool
                     ) -> Any:
    avals = _split_v2_infer(Aval(x.shape, x.dtype), indices_or_sections, axis, squeeze_axis)
    parts = np.split(x, indices_or_sections, axis=axis)
    out = tuple(p.reshape(a.shape) for p, a in zip(parts, avals))
    return out[0] if len(out) == 1 else out


def _split_count(attrs: dict[str, Any]) -> int:
    parts = attrs["indices_or_sections"]
    return parts if isinstance(parts, int) else len(parts) + 1


register(OpDef(
    name="split_v2", kernel=_split_v2_kernel, infer=_split_v2_infer, grad=split_grad,
    kind=Kind.OPAQUE, num_outputs=_split_count,
    attrs={"indices_or_sections": Attr("axis"), "axis": Attr("int", 0),
           "squeeze_axis": Attr("bool", False)},
    doc="Split along ``axis`` into equal sections (an int) or at indices (a tuple), as "
        "numpy's ``split``."))
register(OpDef(
    name="shape_array", kernel=lambda x: np.array(x.shape, np.int64), kind=Kind.OPAQUE,
    infer=lambda x: [Aval((len(x.shape),), np.dtype(np.int64))], grad=None,
    doc="The input's shape as a 1-D int64 array."))
register(OpDef(
    name="size_array", kernel=lambda x: np.array([x.size], np.int64), kind=Kind.OPAQUE,
    infer=lambda x: [Aval((1,), np.dtype(np.int64))], grad=None,
    doc="The input's number of elements as a 1-element int64 array."))


@composite("argmax_channel")
def argmax_channel(F: Any, data: Any, name: Any = None) -> Any:
    """The index of the largest value along axis 1 (MXNet's channel axis)."""
    return F.argmax(data, axis=1, name=name)
