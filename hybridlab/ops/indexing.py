"""Operators that select elements: ``slice``, ``slice_axis``, ``pick``, ``take``, ``one_hot``.

What this module teaches
------------------------
Selecting is easy forwards and "scatter" backwards: the gradient of a selection is an
array of zeros (the input's shape) with the output gradient written -- or, when an
element may be selected twice as in ``take``, *added* -- where the elements came from.
Each selection has an internal backward op (``_slice_grad``, ``_pick_grad``,
``_take_grad``) that receives the forward input as ``like``, so the rule never needs a
shape that a Symbol may not know yet. A scatter is linear in the gradient it scatters,
so its own VJP is the selection again (``_pick_grad``'s is ``pick``): gradients of
gradients (``autograd.grad(..., create_graph=True)``) go through these ops too.

Invariants
----------
* ``x[1:3, ::2]`` on an NDArray or a Symbol is ``slice(x, begin=(1, None), end=(3, None),
  step=(None, 2))``; dimensions not listed are kept whole.
* Indices are floats, as in MXNet; ``pick``/``take`` clip out-of-range indices
  (``mode="clip"``) or wrap them (``mode="wrap"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register, register_layer

_SLICE_ATTRS = {"begin": Attr("indices"), "end": Attr("indices"), "step": Attr("indices", ())}


def _slices(name: str, shape: Any, begin: Any, end: Any, step: Any = (), axis: Any = None
        ) -> tuple[slice, ...]:
    """The Python index for a slice op; ``axis`` set means begin/end are for that axis only."""
    if axis is not None:
        if not -len(shape) <= axis < len(shape):
            raise ShapeError(f"{name}: axis {axis} is out of range for shape {shape}")
        lead = (slice(None),) * (axis % len(shape))
        result: tuple[slice[Any, Any, Any], ...] = lead + (slice(begin[0], end[0]),)
        return result
    if (len(begin) != len(end) or len(begin) > len(shape) or len(step) not in (0, len(begin))
            or 0 in step):
        raise ShapeError(f"{name}: begin {begin}, end {end}, step {step} do not fit shape "
                         f"{shape}; give one entry per sliced dimension (steps not 0)")
    steps = step or (None,) * len(begin)
    return tuple(slice(b, e, s) for b, e, s in zip(begin, end, steps))


def _sliced_shape(name: str, shape: Any, index: tuple[slice, ...]) -> tuple[int, ...]:
    out = tuple(len(range(n)[s]) for n, s in zip(shape, index)) + tuple(shape[len(index):])
    if any(size == 0 < before for size, before in zip(out, shape)):  # (an unknown 0 stays 0)
        raise ShapeError(f"{name}: slicing shape {shape} with {index} leaves nothing")
    return out


def _slice_op(name: str, attrs: dict[str, Attr], doc: str, to_slice_attrs: Any,
              aliases: tuple[str, ...] = ()) -> OpDef:
    def infer(x: Aval, **kw: Any) -> list[Aval]:
        return [Aval(_sliced_shape(name, x.shape, _slices(name, x.shape, **to_slice_attrs(kw))),
                     x.dtype)]

    def kernel(x: np.ndarray, **kw: Any) -> np.ndarray:
        result: np.ndarray = x[_slices(name, x.shape, **to_slice_attrs(kw))].copy()
        return result

    def grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], **kw: Any
        ) -> list[Any]:
        return [F._slice_grad(out_grads[0], inputs[0], **to_slice_attrs(kw))]

    return register(OpDef(name=name, kernel=kernel, infer=infer, grad=grad, kind=Kind.OPAQUE,
                          attrs=attrs, doc=doc, aliases=aliases))


_slice_op("slice", _SLICE_ATTRS, "``data[begin:end:step]`` per dimension (what ``x[1:3]`` "
          "becomes).", lambda kw: kw, ("crop",))
_slice_op("slice_axis", {"axis": Attr("int"), "begin": Attr("int"), "end": Attr("index")},
          "``data[begin:end]`` along ``axis`` (``end=None``: to the end).",
          lambda kw: {"axis": kw["axis"], "begin": (kw["begin"],), "end": (kw["end"],)})


def _slice_grad(g: np.ndarray, like: np.ndarray, **attrs: Any) -> np.ndarray:
    out = np.zeros(like.shape, g.dtype)
    out[_slices("_slice_grad", like.shape, **attrs)] = g
    return out


def _reslice(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], begin: Any,
             end: Any, step: Any, axis: Any) -> list[Any]:
    """``_slice_grad``'s VJP: select the same slice of its output gradient."""
    if axis is None:
        return [F.slice(out_grads[0], begin=begin, end=end, step=step), None]
    return [F.slice_axis(out_grads[0], axis=axis, begin=begin[0], end=end[0]), None]


register(OpDef(
    name="_slice_grad", kernel=_slice_grad, grad=_reslice, kind=Kind.OPAQUE,
    infer=lambda g, like, **attrs: [Aval(like.shape, g.dtype)], inputs=("data", "like"),
    attrs={**_SLICE_ATTRS, "axis": Attr("index", None)},
    doc="Zeros shaped like ``like`` with ``data`` written into the slice (a slice's VJP)."))


def _slice_assign(lhs: np.ndarray, rhs: Any = None, scalar: float = 0.0, **attrs: Any
                  ) -> np.ndarray:
    out = lhs.copy()
    index = _slices("_slice_assign", lhs.shape, **attrs)
    out[index] = scalar if rhs is None else np.broadcast_to(rhs, out[index].shape)
    return out


def _assign_infer(lhs: Aval, rhs: Aval | None = None, scalar: float = 0.0, **attrs: Any
                  ) -> list[Aval]:
    index = _slices("_slice_assign", lhs.shape, **attrs)
    region = _sliced_shape("_slice_assign", lhs.shape, index)
    if rhs is not None and rhs.shape != region:
        raise ShapeError(f"_slice_assign: the value's shape {rhs.shape} is not the region's "
                         f"{region} (begin {attrs['begin']}, end {attrs['end']})")
    return [lhs]


# MXNet's x[begin:end] = value as operators (``_crop_assign`` in older code): lhs with the
# region replaced; the region's gradient goes to the value, the rest to lhs.
register(OpDef(
    name="_slice_assign", kernel=_slice_assign, infer=_assign_infer, kind=Kind.OPAQUE,
    grad=lambda F, inputs, outputs, out_grads, **kw: [
        F._slice_assign_scalar(out_grads[0], scalar=0.0, **kw), F.slice(out_grads[0], **kw)],
    inputs=("lhs", "rhs"), attrs=_SLICE_ATTRS, aliases=("_crop_assign",),
    doc="``lhs`` with ``lhs[begin:end:step]`` replaced by ``rhs``."))
register(OpDef(
    name="_slice_assign_scalar", kernel=_slice_assign, infer=_assign_infer, kind=Kind.OPAQUE,
    grad=lambda F, inputs, outputs, out_grads, scalar, **kw: [
        F._slice_assign_scalar(out_grads[0], scalar=0.0, **kw)],
    attrs={**_SLICE_ATTRS, "scalar": Attr("float", 0.0)}, aliases=("_crop_assign_scalar",),
    doc="``data`` with ``data[begin:end:step]`` set to ``scalar``."))


def _indices(index: np.ndarray, size: int, mode: str) -> np.ndarray:
    whole = index.astype(np.int64)
    if mode == "raise":  # MXNet's take(mode='raise'): an index out of range is an error
        bad = whole[(whole < 0) | (whole >= size)]  # (negative ones too, as MXNet)
        if bad.size:
            raise IndexError(f"take: index {bad.flat[0]} is out of range for an axis of "
                             f"{size}; use mode='clip' or 'wrap' to keep it in range")
        return whole
    return np.clip(whole, 0, size - 1) if mode == "clip" else np.mod(whole, size)


def _pick_infer(x: Aval, index: Aval, axis: int, keepdims: bool, mode: str) -> list[Aval]:
    if not -len(x.shape) <= axis < len(x.shape):
        raise ShapeError(f"pick: axis {axis} is out of range for shape {x.shape}")
    kept = tuple(1 if i == axis % len(x.shape) else n for i, n in enumerate(x.shape))
    if index.shape not in (kept, _drop(kept, axis)):
        raise ShapeError(f"pick: index shape {index.shape} does not match data shape {x.shape} "
                         f"without axis {axis}; expected {_drop(kept, axis)}")
    return [Aval(kept if keepdims else _drop(kept, axis), x.dtype)]


def _drop(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return tuple(n for i, n in enumerate(shape) if i != axis % len(shape)) or (1,)


def _pick_positions(x: np.ndarray, index: np.ndarray, axis: Any, mode: str) -> np.ndarray:
    idx = _indices(index, x.shape[axis], mode)
    return idx.reshape(tuple(1 if i == axis % x.ndim else n for i, n in enumerate(x.shape)))


def _pick(x: np.ndarray, index: np.ndarray, axis: Any, keepdims: bool, mode: str) -> np.ndarray:
    out = np.take_along_axis(x, _pick_positions(x, index, axis, mode), axis)
    index_aval = Aval(index.shape, index.dtype)
    shape = _pick_infer(Aval(x.shape, x.dtype), index_aval, axis, keepdims, mode)[0].shape
    return out.reshape(shape)


def _pick_grad(g: np.ndarray, x: np.ndarray, index: np.ndarray, axis: Any, keepdims: bool, mode: str
        ) -> np.ndarray:
    out = np.zeros_like(x, dtype=g.dtype)
    positions = _pick_positions(x, index, axis, mode)
    np.put_along_axis(out, positions, g.reshape(positions.shape), axis)
    return out


_PICK_ATTRS = {"axis": Attr("int", -1), "keepdims": Attr("bool", False),
               "mode": Attr("str", "clip", ("clip", "wrap"))}
register(OpDef(
    name="pick", kernel=_pick, infer=_pick_infer, kind=Kind.OPAQUE,
    grad=lambda F, inputs, outputs, out_grads, **kw: [F._pick_grad(out_grads[0], *inputs, **kw),
                                                      None],
    inputs=("data", "index"), attrs=_PICK_ATTRS,
    doc="``data[..., index, ...]`` along ``axis``: one element per row (e.g. the probability "
        "of the true class)."))
register(OpDef(
    name="_pick_grad", kernel=_pick_grad, kind=Kind.OPAQUE,
    grad=lambda F, inputs, outputs, out_grads, **kw: [F.pick(out_grads[0], inputs[2], **kw),
                                                      None, None],
    infer=lambda g, x, index, **kw: [Aval(x.shape, g.dtype)], inputs=("data", "like", "index"),
    attrs=_PICK_ATTRS, doc="Zeros shaped like ``like`` with ``data`` at the picked places."))


def _take_infer(a: Aval, indices: Aval, axis: int, mode: str) -> list[Aval]:
    if not -len(a.shape) <= axis < len(a.shape):
        raise ShapeError(f"take: axis {axis} is out of range for shape {a.shape}")
    axis %= len(a.shape)
    return [Aval(a.shape[:axis] + indices.shape + a.shape[axis + 1:], a.dtype)]


def _take_grad(g: np.ndarray, a: np.ndarray, indices: np.ndarray, axis: Any, mode: str
        ) -> np.ndarray:
    out = np.zeros_like(a, dtype=g.dtype)
    idx = _indices(indices, a.shape[axis], mode).ravel()
    axis %= a.ndim
    moved = np.moveaxis(g.reshape(a.shape[:axis] + idx.shape + a.shape[axis + 1:]), axis, 0)
    np.add.at(np.moveaxis(out, axis, 0), idx, moved)  # add: an index may repeat
    return out


_TAKE_ATTRS = {"axis": Attr("int", 0), "mode": Attr("str", "clip", ("clip", "wrap", "raise"))}
register(OpDef(
    name="take", inputs=("a", "indices"), attrs=_TAKE_ATTRS, kind=Kind.OPAQUE, infer=_take_infer,
    kernel=lambda a, indices, axis, mode: np.take(
        a, _indices(indices, a.shape[axis], mode), axis=axis),
    grad=lambda F, inputs, outputs, out_grads, **kw: [F._take_grad(out_grads[0], *inputs, **kw),
                                                      None],
    doc="Rows (slices along ``axis``) of ``a`` chosen by ``indices`` (an embedding lookup)."))
register(OpDef(
    name="_take_grad", kernel=_take_grad, kind=Kind.OPAQUE, attrs=_TAKE_ATTRS,
    grad=lambda F, inputs, outputs, out_grads, **kw: [F.take(out_grads[0], inputs[2], **kw),
                                                      None, None],
    infer=lambda g, a, indices, **kw: [Aval(a.shape, g.dtype)], inputs=("data", "a", "indices"),
    doc="``take``'s VJP: ``data`` added into zeros shaped like ``a`` at ``indices``."))


def _embedding_infer(data: Aval, weight: Aval, input_dim: int, output_dim: int,
                     dtype: str, sparse_grad: bool) -> list[Aval]:
    if tuple(weight.shape) != (input_dim, output_dim):
        raise ShapeError(f"Embedding: weight has shape {tuple(weight.shape)}, but input_dim="
                         f"{input_dim} and output_dim={output_dim} need ({input_dim}, "
                         f"{output_dim})")
    return [Aval(tuple(data.shape) + (output_dim,), weight.dtype)]


register_layer(
    "Embedding", lambda F, data, weight, **attrs: F.take(weight, data, axis=0),
    _embedding_infer, inputs=("data", "weight"),
    infer_params=lambda data, input_dim, output_dim, **unused: {
        "weight": (input_dim, output_dim)},
    attrs={"input_dim": Attr("int", low=1), "output_dim": Attr("int", low=1),
           "dtype": Attr("dtype", "float32"), "sparse_grad": Attr("bool", False)},
    doc="MXNet's ``Embedding``: row ``data[i]`` of ``weight`` (shape ``(input_dim, "
        "output_dim)``); a layer operator, lowered to ``take``.")


def _one_hot_infer(indices: Aval, depth: int, dtype: str, **values: Any) -> list[Aval]:
    if depth < 1:
        raise ShapeError(f"one_hot: depth={depth} must be at least 1 (the number of classes)")
    return [Aval(indices.shape + (depth,), np.dtype(dtype))]


register(OpDef(
    name="one_hot", kind=Kind.OPAQUE, grad=None, inputs=("indices",),
    kernel=lambda i, depth, on_value, off_value, dtype: np.where(  # type: ignore[attr-defined]  # (numpy's stubs)
        i[..., None].astype(np.int64) == np.arange(depth), on_value, off_value).astype(dtype),
    infer=_one_hot_infer,
    attrs={"depth": Attr("int"), "on_value": Attr("float", 1.0), "off_value": Attr("float", 0.0),
           "dtype": Attr("dtype", "float32")},
    doc="``on_value`` at position ``indices`` along a new last axis of length ``depth``."))
