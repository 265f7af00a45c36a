"""Operators that move data without doing arithmetic: reshape, transpose, concat, slice...

What this module teaches
------------------------
``reshape`` in MXNet speaks a small language of special codes, so one graph works for
any batch size: ``x.reshape((0, -1))`` means "keep the first dimension, flatten the
rest". :func:`reshape_codes` is that language's whole interpreter.

Gradients of data-movement ops only move the gradient back: ``reshape_like`` undoes a
reshape, ``_slice_grad`` puts a slice's gradient into a zero array, ``sum_like`` undoes a
broadcast. They take the forward input as a ``like`` argument instead of reading its
shape, because a Symbol's shape may not be known when its backward graph is built.

Creation ops (``zeros``, ``ones``, ``_full``, ``arange``) have no inputs: their shape and
dtype come entirely from attributes (``dtype`` defaults to float32).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

_CODES_HELP = ("codes: 0 copies an input dimension, -1 infers one dimension, -2 copies all "
               "remaining dimensions, -3 merges two dimensions, -4 splits one dimension into "
               "the next two values (one of them may be -1)")


def _grad_like(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], **attrs: Any
        ) -> list[Any]:
    """The VJP of every pure reshaping op: reshape the gradient back."""
    return [F.reshape_like(out_grads[0], inputs[0])]


def reshape_back(inputs: list[Any], outputs: list[Any], **attrs: Any) -> list[Any]:
    """A reshape keeps the number of elements: a fully known output sizes the one size
    of its input not known yet (MXNet infers a Reshape backwards too)."""
    x, out = inputs[0], outputs[0]
    if x is None or out is None or 0 in out or x.count(0) != 1:
        return inputs
    rest, total = int(np.prod([d for d in x if d])), int(np.prod(out))
    if not rest or total % rest:
        return inputs
    return [tuple(total // rest if d == 0 else d for d in x), *inputs[1:]]


def _reshape_op(name: str, infer_shape: Any, doc: str, attrs: Any, aliases: Any = ()) -> OpDef:
    def infer(x: Aval, **kw: Any) -> list[Aval]:
        return [Aval(tuple(infer_shape(x.shape, **kw)), x.dtype)]

    # view=True: ``ndarray.reshape`` shares the input's memory, and the memory planner must
    # know it (the input stays alive as long as the view, and is not pinned out of reuse)
    return register(OpDef(
        name=name, kernel=lambda x, **kw: x.reshape(infer(x, **kw)[0].shape), infer=infer,
        grad=_grad_like, kind=Kind.OPAQUE, attrs=attrs, aliases=aliases, doc=doc, view=True,
        infer_back=reshape_back))


def reshape_codes(shape_in: tuple[int, ...], codes: tuple[int, ...], reverse: bool = False) -> Any:
    """The output shape for MXNet's ``Reshape(shape=codes)``; see ``_CODES_HELP``."""
    def fail(why: str) -> ShapeError:
        return ShapeError(f"Reshape: cannot reshape {tuple(shape_in)} to {tuple(codes)}: {why}"
                          f" ({_CODES_HELP})")

    dims, todo = (shape_in[::-1], codes[::-1]) if reverse else (shape_in, codes)
    out: list[int] = []
    src, infer_at, i = 0, None, 0
    while i < len(todo):
        code = todo[i]
        if code in (0, -3, -4) and src + (code == -3) >= len(dims):
            raise fail(f"code {code} at position {i} has no input dimension left to use")
        if code == -1:
            if infer_at is not None:
                raise fail("only one -1 is allowed")
            infer_at = len(out)
        if code == -2:
            out.extend(dims[src:])
            src = len(dims)
        elif code == -3:
            out.append(dims[src] * dims[src + 1])
            src += 2
        elif code == -4:
            out.extend(_split_dim(dims[src], *todo[i + 1:i + 3], fail=fail))
            src, i = src + 1, i + 2
        elif code >= -1:
            out.append(dims[src] if code == 0 else 1 if code == -1 else code)
            src += 1
        else:
            raise fail(f"unknown code {code}")
        i += 1
    total, known = math.prod(shape_in), math.prod(out)  # (Python ints: never wrap)
    if infer_at is not None:
        if known == 0 or total % known:
            raise fail(f"{total} elements cannot be split evenly for the -1")
        out[infer_at] = total // known
    if math.prod(out) != total:
        raise fail(f"{total} elements do not fit in {tuple(out[::-1] if reverse else out)}")
    return tuple(out[::-1] if reverse else out) or (1,)  # never 0-d, as in MXNet


def _split_dim(dim: int, *parts: int, fail: Any) -> tuple[int, int]:
    if len(parts) != 2 or 0 in parts or min(parts) < -1 or parts == (-1, -1):
        raise fail(f"-4 must be followed by two sizes (one may be -1) whose product is {dim}")
    first, second = parts
    first = dim // second if first == -1 else first
    second = dim // first if second == -1 else second
    if first * second != dim:
        raise fail(f"-4 cannot split {dim} into ({parts[0]}, {parts[1]})")
    return first, second


def _reshape(s: tuple[int, ...], shape: tuple[int, ...], reverse: bool,
             target_shape: tuple[int, ...], keep_highest: bool) -> Any:
    if not shape and target_shape:  # MXNet's deprecated form: a 0 is the size to infer
        shape = tuple(-1 if d == 0 else d for d in target_shape)
        shape = (s[0], *shape[1:]) if keep_highest and s else shape
    return reshape_codes(s, shape, reverse)


_reshape_op("Reshape", _reshape,
            "Reshape ``data`` to ``shape`` with MXNet's codes 0, -1, -2, -3, -4 "
            "(``reverse=True`` reads the codes right to left); the deprecated "
            "``target_shape`` (0: infer it; ``keep_highest`` keeps the first axis) too.",
            {"shape": Attr("shape", ()), "reverse": Attr("bool", False),
             "target_shape": Attr("shape", ()), "keep_highest": Attr("bool", False)},
            ("reshape",))
def _flatten(s: tuple[int, ...]) -> tuple[int, int]:
    if not s:
        raise ShapeError("Flatten: a 0-d value has no first axis to keep; give it one first "
                         "(x.reshape((1,))), or use x.reshape((1, -1))")
    return s[0], int(np.prod(s[1:]))


_reshape_op("Flatten", _flatten,
            "Collapse every axis but the first: ``(N, C, H, W) -> (N, C*H*W)``.", {}, ("flatten",))


def _expand(s: Any, axis: Any) -> Any:
    if not -len(s) - 1 <= axis <= len(s):
        raise ShapeError(f"expand_dims: axis {axis} is out of range for shape {s}")
    axis %= len(s) + 1
    return s[:axis] + (1,) + s[axis:]


def squeeze_shape(s: tuple[int, ...], axis: Any) -> tuple[int, ...]:
    """The shape after removing axes of length 1 (all, or those in ``axis``)."""
    if axis is None:
        return tuple(n for n in s if n != 1) or (1,)
    listed = (axis,) if isinstance(axis, int) else axis
    axes = [a % len(s) for a in listed if -len(s) <= a < len(s)]
    if len(axes) != len(listed) or any(s[a] != 1 for a in axes):
        raise ShapeError(f"squeeze: axis {axis} of shape {s} is out of range or not of length 1")
    return tuple(n for i, n in enumerate(s) if i not in axes) or (1,)


_reshape_op("expand_dims", _expand, "Insert an axis of length 1 at ``axis``.",
            {"axis": Attr("int")})
_reshape_op("squeeze", squeeze_shape, "Remove axes of length 1 (all of them, or ``axis``).",
            {"axis": Attr("axis", None)})


def _check_size(name: str, a: Aval, b: Aval) -> None:
    if int(np.prod(a.shape)) != int(np.prod(b.shape)):
        raise ShapeError(f"{name}: {a.shape} and {b.shape} have different sizes")


def _like_shape(x: Aval, like: Aval, lhs_begin: Any = None, lhs_end: Any = None,
                rhs_begin: Any = None, rhs_end: Any = None) -> tuple[int, ...]:
    """MXNet's ``reshape_like``: the axes ``[lhs_begin, lhs_end)`` of ``lhs`` take the shape
    of the axes ``[rhs_begin, rhs_end)`` of ``rhs`` (all of both by default)."""
    def span(shape: tuple[int, ...], begin: Any, end: Any, side: str) -> slice:
        n = len(shape)
        if any(i is not None and not -n <= i <= n for i in (begin, end)):
            raise ShapeError(f"reshape_like: {side}_begin={begin}, {side}_end={end} do not "
                             f"fit the {n} axes of {side} {shape}")
        return slice(*(d if i is None else i + n if i < 0 else i for i, d in ((begin, 0),
                                                                             (end, n))))

    lhs, rhs = span(x.shape, lhs_begin, lhs_end, "lhs"), span(like.shape, rhs_begin, rhs_end, "rhs")
    shape = (*x.shape[:lhs.start], *like.shape[rhs], *x.shape[lhs.stop:])
    _check_size("reshape_like", x, Aval(shape, x.dtype))
    return shape


_LIKE_ATTRS = {k: Attr("index", None) for k in ("lhs_begin", "lhs_end", "rhs_begin", "rhs_end")}
register(OpDef(
    name="reshape_like", kernel=lambda x, like, **kw: x.reshape(_like_shape(x, like, **kw)),
    infer=lambda x, like, **kw: [Aval(_like_shape(x, like, **kw), x.dtype)],
    grad=lambda F, inputs, outputs, out_grads, **kw: [
        F.reshape_like(out_grads[0], inputs[0]), None],
    kind=Kind.OPAQUE, inputs=("lhs", "rhs"), view=True, attrs=_LIKE_ATTRS,
    doc="Reshape ``lhs`` to the shape of ``rhs``; with ``lhs_begin``/``lhs_end`` and "
        "``rhs_begin``/``rhs_end`` only those axes of ``lhs`` take those axes' shape."))


def _perm(shape: Any, axes: Any) -> Any:
    """``axes`` as non-negative axis numbers; each of ``-n <= a < n`` must appear once."""
    n = len(shape)
    if not axes:
        return tuple(range(n))[::-1]
    normal = [a % n for a in axes if -n <= a < n]  # in range only: 3 must not wrap to 1
    if len(axes) != n or len(normal) != n or sorted(normal) != list(range(n)):
        raise ShapeError(f"transpose: axes {axes} are not a permutation of the {n} axes of "
                         f"shape {shape}; give each of 0..{n - 1} (or -{n}..-1) exactly once, "
                         f"e.g. axes={tuple(range(n))[::-1]}")
    return tuple(normal)


def _inverse(axes: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation that undoes ``axes`` (an empty one reverses, and undoes itself)."""
    return tuple(int(a) for a in np.argsort([a % len(axes) for a in axes])) if axes else ()


register(OpDef(
    name="transpose", kernel=lambda x, axes: x.transpose(_perm(x.shape, axes)).copy(),
    infer=lambda x, axes: [Aval(tuple(x.shape[a] for a in _perm(x.shape, axes)), x.dtype)],
    grad=lambda F, inputs, outputs, out_grads, axes: [F.transpose(
        out_grads[0], axes=_inverse(axes))],
    kind=Kind.OPAQUE, attrs={"axes": Attr("shape", ())},
    doc="Permute the axes (reverse them when ``axes`` is empty)."))


def _swapped(shape: tuple[int, ...], dim1: int, dim2: int) -> tuple[int, ...]:
    if not all(-len(shape) <= d < len(shape) for d in (dim1, dim2)):
        raise ShapeError(f"swapaxes: dim1={dim1}, dim2={dim2} out of range for shape {shape}")
    out = list(shape)
    out[dim1], out[dim2] = shape[dim2], shape[dim1]
    return tuple(out)


register(OpDef(
    name="SwapAxis", kernel=lambda x, dim1, dim2: np.swapaxes(x, dim1, dim2).copy(),
    infer=lambda x, dim1, dim2: [Aval(_swapped(x.shape, dim1, dim2), x.dtype)],
    grad=lambda F, inputs, outputs, out_grads, **dims: [F.swapaxes(out_grads[0], **dims)],
    kind=Kind.OPAQUE, attrs={"dim1": Attr("int", 0), "dim2": Attr("int", 0)},
    aliases=("swapaxes",), doc="Exchange axes ``dim1`` and ``dim2`` (its own inverse)."))


def _flip_infer(x: Aval, axis: Any) -> list[Aval]:
    axes = (axis,) if isinstance(axis, int) else axis
    if not all(-len(x.shape) <= a < len(x.shape) for a in axes):
        raise ShapeError(f"reverse: axis {axis} is out of range for shape {x.shape}")
    return [x]


register(OpDef(
    name="reverse", kernel=lambda x, axis: np.flip(x, axis).copy(), infer=_flip_infer,
    grad=lambda F, inputs, outputs, out_grads, axis: [F.reverse(out_grads[0], axis=axis)],
    kind=Kind.OPAQUE, attrs={"axis": Attr("axis")}, aliases=("flip",),
    doc="Reverse the order of the elements along ``axis`` (its own inverse)."))
