"""Shape and dtype rules shared by many operators (each rule is still named by its OpDef).

The dtype rules here are half of the kernel contract (ARCHITECTURE.md, registry): a
kernel returns exactly the dtype its ``infer`` rule promises, so the imperative engine,
the reference interpreter and generated code compute the same thing.
"""

from __future__ import annotations

import functools

import numpy as np

from hybridlab import util
from hybridlab.errors import ShapeError
from hybridlab.ops.registry import Aval


def known_dtype(x: object) -> np.dtype | None:
    """The dtype of ``x`` -- an NDArray, or a Symbol whose type is known -- else None (a
    rule written with ``F`` asks it where MXNet's kernel would branch on the type)."""
    dtype = getattr(x, "dtype", None)  # (a Symbol's dtype raises an AttributeError)
    if dtype is None and getattr(x, "_outputs", None):
        aval = x._outputs[0].aval  # type: ignore[attr-defined]  # (a Symbol's)
        dtype = None if aval is None else aval.dtype
    return None if dtype is None else np.dtype(dtype)


def same_as_first(*avals: Aval, **attrs: object) -> list[Aval]:
    """Elementwise ops: the output looks like the first input."""
    return [avals[0]]


@functools.lru_cache(maxsize=256)  # kernels ask it on every call: a dict lookup instead
def promote(*dtypes: object) -> np.dtype:
    """The result dtype of mixing ``dtypes``, MXNet's rule: integers meeting floats give
    the float type (``int32 + float32 -> float32``; numpy would say float64); otherwise
    numpy's promotion (``float16 + float32 -> float32``, ``int8 + int32 -> int32``).
    ``dtypes`` are hashable (np.dtype objects or names), so results are cached."""
    kinds = [np.dtype(d) for d in dtypes]  # type: ignore[call-overload]  # (numpy's stubs)
    floats = [d for d in kinds if d.kind == "f"]
    return np.result_type(*(floats or kinds))


def broadcast(*avals: Aval, op_name: str = "op", **attrs: object) -> list[Aval]:
    """numpy broadcasting of all inputs; the dtype is :func:`promote`'s."""
    try:
        shape = np.broadcast_shapes(*(a.shape for a in avals))
    except ValueError:
        shapes = " and ".join(str(a.shape) for a in avals)
        raise ShapeError(
            f"{op_name}: shapes {shapes} cannot be broadcast together; trailing dimensions "
            f"must be equal or 1 (reshape or use broadcast_to / expand_dims first)"
        ) from None
    return [Aval(tuple(shape), promote(*(a.dtype for a in avals)))]


def broadcast_to(aval: Aval, shape: tuple[int, ...], op_name: str) -> list[Aval]:
    """``aval`` broadcast to ``shape``; numpy's rule, with an error that names the op."""
    ok = len(aval.shape) <= len(shape) and all(
        n in (1, m) for n, m in zip(aval.shape[::-1], shape[::-1]))
    if not ok:
        raise ShapeError(
            f"{op_name}: cannot broadcast shape {aval.shape} to {tuple(shape)}; each dimension "
            f"must be 1 or equal to the target (counting from the right)")
    return [Aval(tuple(shape), aval.dtype)]


def created(op_name: str, shape: tuple[int, ...], dtype: object) -> list[Aval]:
    """Creation and random ops: the shape comes from an attribute; check it is a real one."""
    if util.is_np_shape():  # numpy's shapes: () is a scalar, 0 an empty axis
        if any(n < 0 for n in shape):
            raise ShapeError(f"{op_name}: shape {tuple(shape)} has a negative size")
    elif not shape or any(n <= 0 for n in shape):  # MXNet: 0 means "unknown", no 0-d arrays
        raise ShapeError(f"{op_name}: shape {tuple(shape)} is not a valid array shape; give "
                         f"one or more positive sizes, e.g. shape=(2, 3) (inside "
                         f"`with mx.np_shape():` 0 and () are numpy's empty and scalar shapes)")
    return [Aval(tuple(shape), np.dtype(dtype))]  # type: ignore[call-overload]  # (numpy's stubs)


def check_count(op_name: str, avals: tuple[Aval, ...], num_args: int) -> None:
    """Variadic ops: MXNet's JSON records ``num_args``; when given it must match."""
    if num_args and num_args != len(avals):
        raise ShapeError(f"{op_name}: num_args={num_args} but {len(avals)} inputs were given")
