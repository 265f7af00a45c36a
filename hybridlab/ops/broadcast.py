"""Broadcasting made explicit: ``broadcast_to``, ``broadcast_axis``, and their inverse.

What this module teaches
------------------------
Broadcasting repeats an array along axes of length 1 (or missing leading axes) without
the user writing a loop. Its gradient is the opposite movement: the repeated copies'
gradients are *summed* back to the original shape. ``sum_like(g, x)`` is that sum, and
every broadcasting op's gradient -- including ``broadcast_add`` and friends in
``elementwise.py`` -- ends in it. ``broadcast_like`` is its own inverse pair.

Invariant: ``sum_like`` and ``broadcast_like`` take the other array as ``like`` (only
its shape is read), so a gradient rule never needs a shape a Symbol may not know yet.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops import _infer
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register


def _sum_like_kernel(x: np.ndarray, like: np.ndarray) -> np.ndarray:
    extra = x.ndim - like.ndim
    axes = tuple(range(extra)) + tuple(
        i + extra for i, n in enumerate(like.shape) if n == 1 and x.shape[i + extra] != 1)
    # dtype=x.dtype: numpy would sum int32 into int64; the shape rule promises x's dtype
    return x.sum(axis=axes, dtype=x.dtype).reshape(like.shape) if axes else x


def _sum_like_infer(x: Aval, like: Aval) -> list[Aval]:
    # Only a shape that broadcasts *to* x's shape can be summed back from it.
    tail = x.shape[len(x.shape) - len(like.shape):] if like.shape else ()
    if len(like.shape) > len(x.shape) or any(n not in (1, m) for n, m in zip(like.shape, tail)):
        raise ShapeError(f"sum_like: shape {like.shape} does not broadcast to {x.shape}, so "
                         f"{x.shape} cannot be summed back to it; `like` must be an array "
                         f"that broadcasting turned into data's shape")
    return [Aval(like.shape, x.dtype)]


register(OpDef(
    name="sum_like", kernel=_sum_like_kernel, infer=_sum_like_infer,
    grad=lambda F, inputs, outputs, out_grads: [F.broadcast_like(out_grads[0], inputs[0]), None],
    kind=Kind.REDUCE, inputs=("data", "like"),
    doc="Sum ``data`` over the axes along which ``like`` was broadcast (the VJP of broadcasting).",
))
def _like_shape(x: tuple[int, ...], like: tuple[int, ...], lhs_axes: Any, rhs_axes: Any
                ) -> tuple[int, ...]:
    """``broadcast_like``'s target: ``like``'s shape, or with ``lhs_axes``/``rhs_axes`` only
    those axes of ``x`` taken from the paired axes of ``like``."""
    if lhs_axes is None and rhs_axes is None:
        return like
    pairs = list(zip(lhs_axes or (), rhs_axes or ()))
    if not pairs or len(pairs) != len(lhs_axes or ()) or len(pairs) != len(rhs_axes or ()) or any(
            not (-len(x) <= a < len(x) and -len(like) <= b < len(like)) for a, b in pairs):
        raise ShapeError(f"broadcast_like: lhs_axes={lhs_axes} and rhs_axes={rhs_axes} do not "
                         f"pair axes of {x} with axes of {like}; give as many of each (at "
                         f"least one), every axis in range")
    shape = list(x)
    for a, b in pairs:
        shape[a] = like[b]
    return tuple(shape)


register(OpDef(
    name="broadcast_like", kernel=lambda x, like, **kw: np.broadcast_to(
        x, _like_shape(x.shape, like.shape, **kw)).copy(),
    infer=lambda x, like, **kw: _infer.broadcast_to(
        x, _like_shape(x.shape, like.shape, **kw), "broadcast_like"),
    grad=lambda F, inputs, outputs, out_grads, **kw: [F.sum_like(out_grads[0], inputs[0]), None],
    # OPAQUE: with rhs_axes, rhs only lends sizes; it does not broadcast to the result
    kind=Kind.OPAQUE, inputs=("lhs", "rhs"),
    attrs={"lhs_axes": Attr("axis", None), "rhs_axes": Attr("axis", None)},
    doc="Broadcast ``lhs`` to the shape of ``rhs`` (or only ``lhs_axes`` of it, to the sizes "
        "of ``rhs``'s ``rhs_axes``).",
))



def _target(x: Aval, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``broadcast_to``'s shape where 0 means "keep the input's dimension"."""
    pad = len(shape) - len(x.shape)
    return tuple(x.shape[i - pad] if n == 0 and i >= pad else n for i, n in enumerate(shape))


def _broadcast_op(name: str, target: Any, doc: str, attrs: Any, aliases: Any = ()) -> OpDef:
    def infer(x: Aval, **kw: Any) -> list[Aval]:
        shape = target(x, **kw)
        if any(n < 0 for n in shape):  # numpy would only fail when the op runs
            raise ShapeError(f"{name}: target shape {shape} has a negative size; every size "
                             f"must be >= 0 (in broadcast_to, 0 keeps the input's dimension)")
        return _infer.broadcast_to(x, shape, name)

    return register(OpDef(
        name=name, kernel=lambda x, **kw: np.broadcast_to(x, infer(x, **kw)[0].shape).copy(),
        infer=infer, grad=lambda F, inputs, outputs, out_grads, **kw: [
            F.sum_like(out_grads[0], inputs[0])],
        kind=Kind.BROADCAST, attrs=attrs, aliases=aliases, doc=doc))


def _along_axes(x: Aval, axis: Any, size: tuple[int, ...]) -> tuple[int, ...]:
    axes = axis if isinstance(axis, tuple) else (axis,)
    if len(axes) != len(size) or any(not -len(x.shape) <= a < len(x.shape) for a in axes):
        raise ShapeError(f"broadcast_axis: axis {axis} and size {size} do not fit shape "
                         f"{x.shape}; give one size per axis, each axis in range")
    shape = list(x.shape)
    for a, n in zip(axes, size):
        shape[a] = n
    return tuple(shape)


_broadcast_op("broadcast_to", lambda x, shape: _target(x, shape),
              "Broadcast to ``shape``; a 0 keeps the input's dimension.", {"shape": Attr("shape")})
_broadcast_op("broadcast_axis", _along_axes, "Broadcast axes of length 1 to ``size``.",
              {"axis": Attr("axis"), "size": Attr("shape")}, ("broadcast_axes",))
