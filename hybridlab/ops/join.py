"""Joining and splitting: ``concat``, ``split`` (``SliceChannel``) and ``stack``.

What this module teaches
------------------------
``concat`` and ``split`` are each other's gradients, almost: ``split``'s VJP is a
``concat`` of its output gradients (zeros for outputs nobody used), and ``concat``'s VJP
cuts the gradient into one piece per input with ``_concat_part``, which reads each
input's extent along ``dim`` from the inputs themselves (a Symbol may not know shapes
when its backward graph is built).

``split`` is the one operator with several outputs; how many is an attribute
(``num_outputs``), so ``OpDef.num_outputs`` is a function of the attributes here.
MXNet's name for it is ``SliceChannel``; ``split`` is the alias.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops import _infer
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, composite, register
from hybridlab.ops.shape import squeeze_shape


def _concat_infer(*xs: Aval, dim: int, num_args: int) -> list[Aval]:
    _needs_inputs("concat", xs)
    _infer.check_count("concat", xs, num_args)
    first = xs[0].shape
    axis = dim % len(first) if -len(first) <= dim < len(first) else None

    def others(shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape[:axis] + shape[axis + 1:] if axis is not None else shape

    if axis is None or any(len(x.shape) != len(first) or others(x.shape) != others(first)
                           for x in xs):
        raise ShapeError(f"concat: cannot join shapes {[x.shape for x in xs]} along dim {dim}; "
                         "all other dimensions must be equal (and dim in range)")
    size = sum(x.shape[axis] for x in xs)
    dtype = _infer.promote(*(x.dtype for x in xs))  # int32 with float32 is float32, as in +
    return [Aval(first[:axis] + (size,) + first[axis + 1:], dtype)]


def _needs_inputs(op_name: str, inputs: tuple[Any, ...]) -> None:
    if not inputs:
        raise TypeError(f"{op_name}: needs at least one input array, got none; call it as "
                        f"{op_name}(a, b, ...) with the arrays to join")


def _concat_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], dim: Any,
                 num_args: Any) -> list[Any]:
    return [F._concat_part(out_grads[0], *inputs, dim=dim, index=i) for i in range(len(inputs))]


def _concat(*xs: np.ndarray, dim: int, num_args: int) -> np.ndarray:
    return np.concatenate(xs, axis=dim, dtype=_infer.promote(*(x.dtype for x in xs)))


def _concat_out(*xs: np.ndarray, out: np.ndarray, dim: int, num_args: int) -> np.ndarray:
    """Into a buffer of the promised aval: a DenseNet's growing concatenations can then be
    placed by the memory planner like any other result."""
    return np.concatenate(xs, axis=dim, out=out)


def _concat_back(inputs: list[Any], outputs: list[Any], *, dim: int, num_args: int
                 ) -> list[Any]:
    """Each input has the output's sizes off the axis; along it, an input's size is what
    the others leave of the output's (when theirs are known)."""
    out = outputs[0]
    if out is None or not -len(out) <= dim < len(out):
        return inputs
    axis = dim % len(out)
    result = []
    for i, shape in enumerate(inputs):
        guess = list(out if shape is None or len(shape) == len(out) else shape)
        others = [0 if s is None else s[axis] for j, s in enumerate(inputs) if j != i]
        left = out[axis] - sum(others)
        guess[axis] = left if out[axis] and all(others) and left > 0 else 0
        result.append(tuple(guess))
    return result


register(OpDef(
    name="Concat", kernel=_concat, kernel_out=_concat_out,
    infer=_concat_infer, grad=_concat_grad, kind=Kind.OPAQUE, inputs=("*data",),
    infer_back=_concat_back,
    attrs={"dim": Attr("int", 1), "num_args": Attr("int", 0)},
    aliases=("concat", "_rnn_param_concat"), doc="Join the inputs along axis ``dim``."))


def _concat_part(g: np.ndarray, *xs: np.ndarray, dim: int, index: int) -> np.ndarray:
    start = sum(x.shape[dim] for x in xs[:index])
    return np.take(g, np.arange(start, start + xs[index].shape[dim]), axis=dim)


def _concat_part_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], dim: Any,
                      index: Any) -> list[Any]:
    """Linear in ``data``: its VJP puts the part's gradient back between zeros."""
    parts = [out_grads[0] if i == index else F.zeros_like(x) for i, x in enumerate(inputs[1:])]
    return [F.concat(*parts, dim=dim)] + [None] * (len(inputs) - 1)


register(OpDef(
    name="_concat_part", kernel=_concat_part, grad=_concat_part_grad,
    infer=lambda g, *xs, dim, index: [Aval(xs[index].shape, g.dtype)],
    kind=Kind.OPAQUE, inputs=("*data",), attrs={"dim": Attr("int"), "index": Attr("int")},
    doc="The part of ``concat``'s gradient ``data[0]`` that belongs to input ``index + 1``."))


def _split_infer(x: Aval, num_outputs: int, axis: int, squeeze_axis: bool) -> list[Aval]:
    if not -len(x.shape) <= axis < len(x.shape) or x.shape[axis] % num_outputs:
        raise ShapeError(f"split: cannot split shape {x.shape} into {num_outputs} equal parts "
                         f"along axis {axis}")
    part = x.shape[:axis % len(x.shape)] + (x.shape[axis] // num_outputs,) + x.shape[axis:][1:]
    if squeeze_axis:
        part = squeeze_shape(part, axis)
    return [Aval(part, x.dtype)] * num_outputs


def _split_kernel(x: np.ndarray, num_outputs: int, axis: Any, squeeze_axis: bool
                  ) -> np.ndarray | tuple[np.ndarray, ...]:
    part = _split_infer(Aval(x.shape, x.dtype), num_outputs, axis, squeeze_axis)[0].shape
    parts = tuple(p.reshape(part) for p in np.split(x, num_outputs, axis=axis))
    return parts[0] if num_outputs == 1 else parts  # one output is an array, not a 1-tuple


def split_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
               axis: Any, squeeze_axis: Any, **unused: Any) -> list[Any]:
    """The gradient of any split along ``axis``: its parts' gradients (zeros for an
    unused part) joined back, each given its axis again if the split squeezed it."""
    grads = [F.zeros_like(y) if g is None else g for g, y in zip(out_grads, outputs)]
    if squeeze_axis:
        grads = [F.expand_dims(g, axis=axis) for g in grads]
    return [F.concat(*grads, dim=axis)]


def _split_back(inputs: list[Any], outputs: list[Any], *, num_outputs: int, axis: int,
                squeeze_axis: bool) -> list[Any]:
    """The parts have one shape; the whole is a part with ``num_outputs`` times its size
    along the axis (given back its axis first if the split squeezed it)."""
    known = [s for s in outputs if s is not None]
    if not known or any(len(s) != len(known[0]) for s in known):
        return inputs
    part = [next((s[d] for s in known if s[d]), 0) for d in range(len(known[0]))]
    rank = len(part) + squeeze_axis
    if not -rank <= axis < rank:
        return inputs
    if squeeze_axis:
        part.insert(axis % rank, 1)
    part[axis % rank] *= num_outputs
    return [tuple(part)]


register(OpDef(
    name="SliceChannel", kernel=_split_kernel, infer=_split_infer, grad=split_grad,
    infer_back=_split_back,
    kind=Kind.OPAQUE, num_outputs=lambda attrs: attrs["num_outputs"], aliases=("split",),
    attrs={"num_outputs": Attr("int", low=1), "axis": Attr("int", 1),
           "squeeze_axis": Attr("bool", False)},
    doc="Split into ``num_outputs`` equal parts along ``axis`` (several outputs)."))


@composite("stack")
def stack(F: Any, *data: Any, axis: Any = 0, num_args: Any = None, name: Any = None) -> Any:
    """Join arrays of one shape along a new axis ``axis``."""
    _needs_inputs("stack", data)
    return F.concat(*[F.expand_dims(x, axis=axis) for x in data], dim=axis, name=name)
