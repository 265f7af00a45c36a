"""Ordering operators: ``topk``, and ``sort`` / ``argsort`` written with it (MXNet's).

What this module teaches
------------------------
``topk`` picks the ``k`` largest (or, ``is_ascend``, smallest) values along an axis and
returns them, their indices, a 0/1 mask of where they were, or both. Only the values
have a gradient: each picked value's gradient goes back to the place it was picked from
(``_topk_backward`` scatters it), every other element gets zero. Indices and masks are
piecewise constant: no gradient. ``axis=None`` works on the flattened array, as MXNet.

Invariants
----------
* Ties keep numpy's stable order (``kind="stable"``), so results are deterministic.
* Indices come out as floats (``dtype``, float32 by default), as MXNet returns them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, composite, register

_ATTRS = {"axis": Attr("index", -1), "k": Attr("int", 1), "ret_typ": Attr(
    "str", "indices", ("value", "indices", "mask", "both")), "is_ascend": Attr("bool", False),
          "dtype": Attr("dtype", "float32")}


def _order(x: np.ndarray, axis: Any, k: int, is_ascend: bool) -> tuple[np.ndarray, int, int]:
    """(indices of the k picked along the axis, the axis, k) for ``x`` (flattened if None)."""
    data, axis = (x.reshape(-1), 0) if axis is None else (x, axis % x.ndim)
    count = data.shape[axis] if k <= 0 else k
    key = data if is_ascend else -data
    if 0 < k and 4 * k < data.shape[axis]:
        picked = _first_k(np.moveaxis(key, axis, -1), k)
        if picked is not None:
            return np.moveaxis(picked, -1, axis), axis, count
    ranked = np.argsort(key, axis=axis, kind="stable")
    return np.take(ranked, np.arange(count), axis=axis), axis, count


def _first_k(key: np.ndarray, k: int) -> np.ndarray | None:
    """The first ``k`` of a stable sort of each row of ``key`` (its last axis) without
    sorting the row: the k-th smallest from a partition, every smaller key and, of the
    keys equal to it, the first ones by index (as the stable sort takes them), then only
    those ``k`` sorted. None when NaN is among them (the full sort decides)."""
    kth = np.partition(key, k - 1, axis=-1)[..., k - 1:k]
    if key.dtype.kind == "f" and np.isnan(kth).any():
        return None
    chosen = key <= kth
    if (chosen.sum(axis=-1) != k).any():  # ties at the k-th: the first by index only
        less, tied = key < kth, key == kth
        chosen = less | tied & (np.cumsum(tied, axis=-1) <= k - less.sum(axis=-1, keepdims=True))
    first = np.nonzero(chosen)[-1].reshape(*key.shape[:-1], k)  # (row-major: by index)
    order = np.argsort(np.take_along_axis(key, first, axis=-1), axis=-1, kind="stable")
    result: np.ndarray = np.take_along_axis(first, order, axis=-1)
    return result


def _topk(x: np.ndarray, axis: Any, k: int, ret_typ: str, is_ascend: bool, dtype: str) -> Any:
    picked, along, _ = _order(x, axis, k, is_ascend)
    flat = x.reshape(-1) if axis is None else x
    values = np.take_along_axis(flat, picked, axis=along)
    if ret_typ == "mask":
        mask = np.zeros(flat.shape, x.dtype)
        np.put_along_axis(mask, picked, 1, axis=along)
        return mask.reshape(x.shape)
    indices = picked.astype(dtype)
    return {"value": values, "indices": indices, "both": (values, indices)}[ret_typ]


def _topk_infer(x: Aval, axis: Any, k: int, ret_typ: str, is_ascend: bool, dtype: str
                ) -> list[Aval]:
    shape = list((int(np.prod(x.shape)),) if axis is None else x.shape)
    along = 0 if axis is None else axis
    if not -len(shape) <= along < len(shape) or k > shape[along]:
        raise ShapeError(f"topk: axis {axis} and k={k} do not fit shape {tuple(x.shape)}")
    if ret_typ == "mask":
        return [x]
    shape[along] = shape[along] if k <= 0 else k
    values, indices = Aval(tuple(shape), x.dtype), Aval(tuple(shape), np.dtype(dtype))
    return {"value": [values], "indices": [indices], "both": [values, indices]}[ret_typ]


def _topk_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
               **attrs: Any) -> list[Any]:
    if attrs["ret_typ"] not in ("value", "both"):
        return [None]
    return [F._topk_backward(out_grads[0], inputs[0], **{k: v for k, v in attrs.items()
                                                         if k in ("axis", "k", "is_ascend")})]


def _topk_backward(g: np.ndarray, x: np.ndarray, axis: Any, k: int, is_ascend: bool
                   ) -> np.ndarray:
    picked, along, _ = _order(x, axis, k, is_ascend)
    result = np.zeros((x.size,) if axis is None else x.shape, g.dtype)
    np.put_along_axis(result, picked, g.reshape(picked.shape), axis=along)
    return result.reshape(x.shape)


register(OpDef(
    name="topk", kernel=_topk, infer=_topk_infer, grad=_topk_grad, kind=Kind.OPAQUE,
    attrs=_ATTRS, num_outputs=lambda attrs: 2 if attrs["ret_typ"] == "both" else 1,
    doc="The ``k`` largest (``is_ascend``: smallest) along ``axis``: their values, indices, "
        "a 0/1 mask, or both. ``k <= 0``: all of them."))
register(OpDef(
    name="_topk_backward", kernel=_topk_backward, infer=lambda g, x, **attrs: [Aval(
        x.shape, g.dtype)], grad=None, kind=Kind.OPAQUE, inputs=("data", "like"),
    attrs={key: _ATTRS[key] for key in ("axis", "k", "is_ascend")},
    grad_missing="topk's gradient is not differentiated again",
    doc="``topk``'s VJP: each picked value's gradient back where it was picked from."))


@composite("sort")
def sort(F: Any, data: Any, axis: Any = -1, is_ascend: bool = True, name: Any = None) -> Any:
    """The values sorted along ``axis`` (flattened if None), smallest first by default."""
    return F.topk(data, axis=axis, k=0, ret_typ="value", is_ascend=is_ascend, name=name)


@composite("argsort")
def argsort(F: Any, data: Any, axis: Any = -1, is_ascend: bool = True, dtype: Any = "float32",
            name: Any = None) -> Any:
    """The indices that sort ``data`` along ``axis`` (as floats, like MXNet)."""
    return F.topk(data, axis=axis, k=0, ret_typ="indices", is_ascend=is_ascend, dtype=dtype,
                  name=name)
