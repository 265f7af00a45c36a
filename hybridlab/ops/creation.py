"""Creation operators: ``zeros``, ``ones``, ``full``, ``arange`` -- arrays from attributes.

What this module teaches
------------------------
A symbolic program cannot call ``nd.array([...])``: its data must come from inputs or
from operators. Creation ops are operators with *no inputs*: their shape and dtype come
from attributes alone (``dtype`` defaults to float32), so ``F.ones((1, 1))`` works the
same inside ``hybrid_forward`` for ``nd`` and ``sym``. They have no gradient.

MXNet names the primitives ``_zeros``, ``_ones``, ``_full``, ``_arange`` (that is what a
saved ``-symbol.json`` contains); ``zeros``/``ones``/``arange`` are aliases and ``full``
is a small front end, because MXNet spells its attribute ``val`` there and ``value`` in
the op.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops import _infer
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, composite, register

_COMMON = {"shape": Attr("shape"), "ctx": Attr("any", None), "dtype": Attr("dtype", "float32")}


def _filled(name: str, fill: Any, doc: str, extra: Any = None, aliases: Any = ()) -> OpDef:
    attrs = {**_COMMON, **(extra or {})}
    return register(OpDef(
        name=name, kernel=lambda shape, ctx, dtype, **kw: np.full(shape, fill(kw), dtype),
        infer=lambda shape, ctx, dtype, **kw: _infer.created(name, shape, dtype),
        grad=None, kind=Kind.OPAQUE, inputs=(), attrs=attrs, aliases=aliases, doc=doc))


# MXNet's ``stype``: hybridlab stores every array densely, so 'default' is the one choice
_DENSE = {"stype": Attr("str", "default", ("default",))}
_filled("_zeros", lambda kw: 0, "An array of zeros of ``shape``.", _DENSE, aliases=("zeros",))
_filled("_ones", lambda kw: 1, "An array of ones of ``shape``.", _DENSE, aliases=("ones",))
_filled("_full", lambda kw: kw["value"], "An array of ``shape`` filled with ``value``.",
        {"value": Attr("float")})


@composite("full")
def full(F: Any, shape: Any, val: Any, ctx: Any = None, dtype: Any = "float32", name: Any = None,
         out: Any = None) -> Any:
    """An array of ``shape`` filled with ``val`` (written into ``out`` if given, nd only)."""
    where = {} if out is None else {"out": out}
    return F._full(shape=shape, value=val, dtype=dtype, name=name, **where)


register(OpDef(
    name="_eye", aliases=("eye",), grad=None, kind=Kind.OPAQUE, inputs=(),
    kernel=lambda N, M, k, ctx, dtype: np.eye(N, M or N, k, dtype=dtype),
    infer=lambda N, M, k, ctx, dtype: _infer.created("eye", (N, M or N), dtype),
    attrs={"N": Attr("int", low=0), "M": Attr("int", 0, low=0), "k": Attr("int", 0),
           "ctx": Attr("any", None), "dtype": Attr("dtype", "float32")},
    doc="An ``N`` x ``M`` (``M=0``: N) array with ones on diagonal ``k``, zeros elsewhere."))
register(OpDef(
    name="_linspace", aliases=("linspace",), grad=None, kind=Kind.OPAQUE, inputs=(),
    kernel=lambda start, stop, num, endpoint, ctx, dtype: np.linspace(
        start, stop, num, endpoint=endpoint).astype(dtype),
    infer=lambda start, stop, num, endpoint, ctx, dtype: [Aval((num,), np.dtype(dtype))],
    attrs={"start": Attr("float"), "stop": Attr("float"), "num": Attr("int", low=0),
           "endpoint": Attr("bool", True), "ctx": Attr("any", None),
           "dtype": Attr("dtype", "float32")},
    doc="``num`` evenly spaced values from ``start`` to ``stop`` (included if ``endpoint``)."))


def _optional_float(value: float | str | None) -> float | None:
    return None if value is None or value == "None" else float(value)


def _arange_length(start: Any, stop: Any, step: Any, repeat: Any) -> int:
    start, stop = (0.0, start) if _optional_float(stop) is None else (start, _optional_float(stop))
    if step == 0:
        raise ShapeError("arange: step must not be 0")
    result: int = max(0, math.ceil((stop - start) / step)) * repeat
    return result


def _arange(start: Any, stop: Any, step: Any, repeat: Any, ctx: Any, dtype: str) -> np.ndarray:
    # MXNet casts start and step to dtype first, then counts: arange(1.3, 10, 1.3, 'int32')
    # is 1, 2, ..., 7 (seven steps of int(1.3) from int(1.3)), not numpy's 1, 2, 3, 5, ...
    length = _arange_length(start, stop, step, 1)
    start = 0.0 if _optional_float(stop) is None else start
    first, stride = np.array([start, step]).astype(dtype)
    values = first + np.arange(length, dtype=dtype) * stride
    return np.repeat(values.astype(dtype), repeat)


register(OpDef(
    name="_arange", kernel=_arange, grad=None, kind=Kind.OPAQUE, inputs=(), aliases=("arange",),
    infer=lambda start, stop, step, repeat, ctx, dtype: [
        Aval((_arange_length(start, stop, step, repeat),), np.dtype(dtype))],
    attrs={"start": Attr("float"), "stop": Attr("any", None), "step": Attr("float", 1.0),
           "repeat": Attr("int", 1), "ctx": Attr("any", None), "dtype": Attr("dtype", "float32")},
    doc="``start, start + step, ...`` below ``stop`` (``arange(5)`` is 0..4), each value "
        "repeated ``repeat`` times."))
