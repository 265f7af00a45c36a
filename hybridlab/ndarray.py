"""NDArray: imperative arrays whose operators run on the dependency engine (``mx.nd``).

What this module teaches
------------------------
``c = a + b`` returns at once. The shape and dtype of ``c`` are known immediately,
from the registry's shape rule (so a shape mistake raises on the line that made it),
but its *values* are computed when the engine runs the pushed kernel. Values are only
needed at *sync points*: ``asnumpy()``, ``asscalar()``, ``wait_to_read()``, ``print``
and ``nd.waitall()``. Every function of ``nd`` and every arithmetic dunder is generated
from the registry and goes through one function, :func:`_apply`::

    parse attrs -> check inputs -> infer output avals (cached) -> make outputs
                -> engine.push(kernel on the inputs' buffers) -> record on the tape

Invariants
----------
* ``_data`` (a numpy array) is valid once the engine ran the op writing ``_var``;
  ``shape``/``dtype`` are valid from the start. If that op failed, ``_data`` stays None:
  the failure is raised once at a sync point (the engine's rule), and after that every
  read of the array, or op using it, raises an MXNetError naming the failed op, until
  an op overwrites the whole array (``x[:] = v``, ``out=x``).
* NOTE [Immutable buffers]: a numpy buffer is never modified once an op stored it.
  In-place operations (``x += 1``, ``x[:] = v``, ``out=x``) compute a new buffer and
  rebind ``x._data``, in an engine op that reads *and* writes ``x._var``, so ops pushed
  before see the old value and ops pushed after see the new one. Kernels may therefore
  return views of their inputs, and ``copy()`` may share the buffer.
* ``x[i]``, ``x[a:b]`` (rows of the first axis) and ``x.reshape(...)`` are *views*, as
  in MXNet: writing through one changes the base, and the other way round (NOTE
  [Views], by copy-on-write on the base's Var). Other indexing, and any indexing under
  ``autograd.record()`` or of an array on the tape, returns a new array made by
  registry ops, so gradients flow through it.
* Every array lives on one device, ``x.context`` (``cpu(0)`` unless ``ctx=`` or a
  ``with mx.cpu(1):`` block says otherwise); an operator's results are on its first
  input's device (MXNet's rule), and ``copyto(ctx)``/``as_in_context(ctx)`` move values
  by an engine op named ``_copyto`` (see hybridlab/context.py). ``float32`` is the
  default dtype (also for ``nd.array`` of float64 or int numpy data, as in MXNet).
* NOTE [Op names shadow builtins]: :func:`populate` puts ``sum``, ``max``, ``abs``,
  ``round``, ``slice``... into this module, so the code below spells builtins as
  ``builtins.slice`` etc.
"""

from __future__ import annotations

import builtins
import difflib
import math
import sys
import types
from typing import Any, Callable, Iterator, NoReturn

import numpy as np

from hybridlab import autograd, engine, ndarray_io
from hybridlab import random as _seed_stream
from hybridlab.context import Context, as_context, cpu
from hybridlab.errors import (
    InplaceGradError,
    MXNetError,
    NotScalarError,
    ShapeError,
)
from hybridlab.ops import optimizer as optimizer_ops
from hybridlab.ops import registry
from hybridlab.ops.nn import variance_from_invstd
from hybridlab.ops.registry import Aval, OpDef, RunContext

_CPU = cpu()
_MODE = autograd._MODE  # the per-thread recording / training flags
_SCALARS = (int, float, bool, np.number, np.bool_)
_INFER_CACHE: dict[Any, list[Aval]] = {}  # (op, input shapes and dtypes, attrs) -> output avals
Shape = tuple[int, ...]
Attrs = dict[str, Any]  # an operator's attributes, as given (raw) or parsed
_object_new = object.__new__


class NDArray:
    """An n-dimensional array on the engine; create one with ``nd.array`` or an operator."""

    __slots__ = ("_data", "_var", "_aval", "shape", "dtype", "_ag", "_ctx", "__weakref__")
    __array_ufunc__ = None  # ``numpy_value * x`` defers to NDArray's dunders
    _data: np.ndarray | None  # (the slots' types, for readers and mypy)
    _var: engine.Var
    _aval: Aval
    shape: tuple[int, ...]
    dtype: np.dtype
    _ag: Any  # None, an autograd.Leaf, or (autograd.Node, output index)
    _ctx: Context  # the device (interned: compared with `is`)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("create arrays with nd.array(...), nd.zeros(...) or an operator")

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context

    @property
    def T(self) -> NDArray:  # noqa: N802 -- MXNet's name
        return self.transpose()

    @property
    def stype(self) -> str:
        """The storage type: always ``'default'`` (dense; hybridlab has no sparse storage)."""
        return "default"

    @property
    def grad(self) -> NDArray | None:
        """The gradient buffer made by ``attach_grad`` (None for other arrays)."""
        return self._ag.grad if isinstance(self._ag, autograd.Leaf) else None

    @property
    def _fresh_grad(self) -> bool:  # MXNet's flag: a backward wrote .grad since cleared
        return isinstance(self._ag, autograd.Leaf) and self._ag.fresh

    @_fresh_grad.setter
    def _fresh_grad(self, value: bool) -> None:
        if isinstance(self._ag, autograd.Leaf):
            self._ag.fresh = bool(value)

    # --- sync points --------------------------------------------------------------------
    def wait_to_read(self) -> None:
        """Block until every pushed op writing this array has run."""
        self._values()

    def asnumpy(self) -> np.ndarray:
        """The values, as a new numpy array (waits for the engine)."""
        return self._values().copy()

    def all(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        """numpy's ``all`` of the values (what ``np.all(x)`` calls; an extension of MXNet)."""
        return np.all(self._values(), axis=axis, out=out, keepdims=keepdims)

    def any(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        """numpy's ``any`` of the values (what ``np.any(x)`` calls)."""
        return np.any(self._values(), axis=axis, out=out, keepdims=keepdims)

    def to_dlpack_for_read(self) -> Any:
        """A DLPack capsule of the values, for another library to read (``from_dlpack``)."""
        return self._values().__dlpack__()

    def to_dlpack_for_write(self) -> Any:
        """A DLPack capsule another library may write through: this array first gets a
        buffer of its own (NOTE [Immutable buffers]: no other array shares it)."""
        def own() -> None:
            self._data = self._data.copy()  # type: ignore[union-attr]

        engine.current().push(own, [self._var], [self._var], "to_dlpack_for_write")
        return self._values().__dlpack__()

    def _values(self) -> np.ndarray:
        """Wait for the engine, then the buffer; raise if the op computing it failed."""
        engine.current().wait_for_var(self._var)  # raises the failure the first time
        if self._data is None:  # ... and this raises every later time
            _raise_never_computed(self, engine.reported_failure(self._var))
        return self._data

    def asscalar(self) -> Any:
        """The single value of a one-element array, as a numpy scalar."""
        if self.size != 1:
            raise NotScalarError(
                f"asscalar() needs an array with exactly one element, got shape {self.shape}; "
                f"use x[0].asscalar(), x.sum().asscalar() or x.asnumpy()")
        return self.asnumpy().reshape(-1)[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:  # np.asarray(x)
        return self.asnumpy() if dtype is None else self.asnumpy().astype(dtype)

    def __repr__(self) -> str:
        shape_info = "x".join(str(n) for n in self.shape)
        return f"\n{self.asnumpy()}\n<NDArray {shape_info} @{self.context}>"

    def __bool__(self) -> bool:  # MXNet: False when empty, the value when it has one
        if self.size > 1:
            raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")
        return self.size == 1 and bool(self.asscalar())

    def __float__(self) -> float:
        return float(self.asscalar())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d NDArray")
        return self.shape[0]

    def __iter__(self) -> Iterator[NDArray]:
        for index in range(len(self)):
            yield self[index]

    # --- devices and copies -------------------------------------------------------------
    def as_in_context(self, context: Context) -> NDArray:
        """This array on ``context``: itself when it is there already, else a copy."""
        device = as_context(context, "as_in_context")
        return self if device is self._ctx else self.copyto(device)

    def copyto(self, other: NDArray | Context) -> NDArray:
        """Copy into ``other`` (an NDArray of the same shape) or to a device: one engine op,
        ``_copyto``, which copies the bytes (the transfer between devices) and is
        recorded by autograd (the gradient flows back to this array's device)."""
        if isinstance(other, NDArray):
            if other.shape != self.shape:
                raise ValueError(f"copyto: shape {self.shape} into an array of shape {other.shape}")
            _check_inplace(other, [self])
            return _assign(other, self)
        return _apply(registry.get("_copyto"), [self], {"ctx": as_context(other, "copyto")})  # type: ignore[no-any-return]  # (one output)

    def copy(self) -> NDArray:
        return _apply(registry.get("_copy"), [self], {})  # type: ignore[no-any-return]  # (one output)

    def __deepcopy__(self, memo: dict[int, Any]) -> NDArray:  # a new buffer, not its Var
        return self.copy()

    def __getstate__(self) -> dict[str, Any]:  # pickle: MXNet's one-array bytes, as MXNet pickles
        return {"handle": bytearray(ndarray_io.array_to_bytes(self.asnumpy()))}

    def __reduce__(self) -> tuple[Any, ...]:  # a view pickles as a plain array of its values
        return (_from_state, (self.__getstate__(),))

    def __setstate__(self, state: dict[str, Any]) -> None:
        values = ndarray_io.array_from_bytes(bytes(state["handle"]))
        if getattr(self, "_var", None) is not None:  # an existing array: the ops pending on
            engine.current().wait_all()  # it finish first (they would see the new shape)
        fresh = from_numpy(values)
        for slot in ("_data", "_var", "_aval", "shape", "dtype", "_ag", "_ctx"):
            object.__setattr__(self, slot, getattr(fresh, slot))

    def tostype(self, stype: str) -> NDArray:
        """MXNet's storage conversion: ``'default'`` (dense) gives a copy; sparse is refused."""
        return _this_module.cast_storage(self, stype=stype)  # type: ignore[no-any-return]

    def detach(self) -> NDArray:
        """The same values, cut off from the autograd tape."""
        return _assign(empty_like_aval(self._aval), self)

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return _apply(registry.get("Cast"), [self], {"dtype": dtype})  # type: ignore[no-any-return]  # (one output)

    # --- shape methods with MXNet's positional forms: x.reshape(2, 3), x.transpose(1, 0) --
    def reshape(self, *shape: Any, **kwargs: Any) -> NDArray:
        """A view of the same values in another shape (writes go through, as in MXNet);
        under ``autograd.record()`` or on an array on the tape, the Reshape operator."""
        shape = _one_tuple(shape)
        attrs = {"shape": shape, **kwargs} if shape else kwargs
        if _MODE.recording or self._ag is not None:
            return _apply(registry.get("Reshape"), [self], attrs)  # type: ignore[no-any-return]  # (one output)
        op = registry.get("Reshape")
        (aval,) = op.infer(self._aval, **op.parse_attrs(attrs))
        return _View.of(self, 0, self.size, tuple(aval.shape))

    def squeeze(self, axis: Any = None, inplace: bool = False) -> NDArray:
        """``nd.squeeze``; ``inplace=True``: a view sharing this array's memory (MXNet)."""
        return _maybe_view(self, _apply(registry.get("squeeze"), [self], {"axis": axis}), inplace)

    def expand_dims(self, axis: int, inplace: bool = False) -> NDArray:
        """``nd.expand_dims``; ``inplace=True``: a view sharing this array's memory."""
        return _maybe_view(self, _apply(registry.get("expand_dims"), [self], {"axis": axis}),
                           inplace)

    def flatten(self, inplace: bool = False) -> NDArray:
        """``nd.flatten``; ``inplace=True``: a view sharing this array's memory."""
        return _maybe_view(self, _apply(registry.get("Flatten"), [self], {}), inplace)

    def transpose(self, *axes: Any, **kwargs: Any) -> NDArray:
        axes = _one_tuple(axes)
        return _apply(registry.get("transpose"), [self], {"axes": axes, **kwargs} if axes  # type: ignore[no-any-return]  # (one output)
                       else kwargs)

    # --- autograd -----------------------------------------------------------------------
    def attach_grad(self, grad_req: str = "write", stype: Any = None) -> None:
        """Mark this array for gradients; ``backward`` fills ``x.grad`` (zeros until then)."""
        zeros = from_numpy(np.zeros(self.shape, self.dtype), self._ctx)
        autograd.mark_variables([self], [zeros], grad_req)

    def backward(self, out_grad: NDArray | None = None, retain_graph: bool = False,
                 train_mode: bool = True, *, head_grad: NDArray | None = None) -> None:
        """Gradients of this array into every ``x.grad``; ``out_grad`` (MXNet's name) or
        ``head_grad`` is the gradient flowing into it (ones by default)."""
        if out_grad is not None and head_grad is not None:
            raise TypeError("backward: give the head gradient once, as out_grad= or head_grad=")
        grad = head_grad if out_grad is None else out_grad
        autograd.backward([self], [grad], retain_graph, train_mode)

    # --- indexing -----------------------------------------------------------------------
    def __getitem__(self, key: Any) -> NDArray:
        if isinstance(key, (NDArray, list, np.ndarray)):  # integer arrays index axis 0
            indices = key if isinstance(key, NDArray) else array(key, dtype=np.int64)
            return _apply(registry.get("take"), [self, indices], {"axis": 0})  # type: ignore[no-any-return]  # (one output)
        parts = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, (NDArray, list, tuple, np.ndarray)) for k in parts):
            return _gather_positions(self, parts)
        if None in parts:  # np.newaxis: the basic index, then the new axes of length 1
            shape = _indexed_shape(self.shape, parts)
            return self[tuple(k for k in parts if k is not None)].reshape(shape or (1,))
        begin, end, step, kept = _normalize_key(self.shape, key)
        shape = kept or (1,)  # integer indices drop their axis, but never down to 0-d
        flat = _contiguous_range(self.shape, begin, end, step)
        if flat is not None and not _MODE.recording and self._ag is None:
            return _View.of(self, *flat, shape)  # NOTE [Views]
        if not begin and self.shape == shape:  # x[:] on the tape: a new array
            return self.copy()
        result = self
        if begin:
            attrs = {"begin": begin, "end": end, "step": step}
            result = _apply(registry.get("slice"), [self], attrs)
        if result.shape != shape:
            result = _apply(registry.get("Reshape"), [result], {"shape": shape})
        return result

    @staticmethod
    def _basic_indexing_slice_is_contiguous(key: Any, shape: tuple[int, ...]) -> bool:
        """Is ``x[key]`` (ints and slices) one contiguous block of ``x``'s buffer? (Then
        it is a view of ``x``: NOTE [Views].)"""
        return _contiguous_range(tuple(shape), *_normalize_key(tuple(shape), key)[:3]) is not None

    def __setitem__(self, key: Any, value: Any) -> None:
        """``x[key] = value`` as one engine op that reads and writes ``x`` (copy-on-write)."""
        key = _numpy_key(key)
        target_shape = np.broadcast_to(np.empty((), np.bool_), self.shape)[key].shape
        source = value if isinstance(value, NDArray) else from_numpy(
            np.asarray(value, dtype=self.dtype))
        try:
            np.broadcast_shapes(source.shape, target_shape)
        except ValueError:
            raise ValueError(f"cannot assign a value of shape {source.shape} to x[{key!r}] of "
                             f"shape {target_shape}") from None
        _check_inplace(self, [source])
        full = key == builtins.slice(None) if isinstance(key, builtins.slice) else False
        missing = _unfilled([source] if full else [source, self])  # x[:] = v heals x
        size = int(np.prod(target_shape))

        def write() -> None:
            if missing is not None:  # NOTE [Unfilled inputs]
                _refuse_unfilled(missing)
            new = np.empty(self.shape, self.dtype) if full else self._data.copy()  # type: ignore[union-attr]
            values: np.ndarray = source._data  # type: ignore[assignment]  # (computed: see above)
            if values.size == size and values.shape != target_shape:  # b[0] = [47.8]: fits
                values = values.reshape(target_shape)
            new[key] = values
            self._data = new

        engine.current().push(write, [self._var, source._var], [self._var], "_set_item",
                              self._ctx, source._ctx is not self._ctx)

    def __neg__(self) -> NDArray:
        return _apply(registry.get("negative"), [self], {})  # type: ignore[no-any-return]  # (one output)

    def __abs__(self) -> NDArray:
        return _apply(registry.get("abs"), [self], {})  # type: ignore[no-any-return]  # (one output)


# NOTE: [Views] ``x[1:3]``, ``x[i]`` and ``x.reshape(...)`` are views of ``x``, as in
# MXNet: a view reads its base's current buffer (numpy views of it: free), and a write
# through it -- every in-place path ends in ``target._data = new`` inside an engine op
# writing target's Var -- makes the base's *next* buffer: a copy with the region
# replaced (copy-on-write). No stored buffer is ever modified (NOTE [Immutable buffers]),
# and a view shares its base's Var, so the engine orders reads and writes of the view
# and the base as one array's. Only views pay: NDArray's own ``_data`` is a plain slot.
class _View(NDArray):
    """Elements ``start:stop`` of ``base``'s flattened buffer, seen in ``shape`` (a reshape:
    all of them; a basic index whose elements are contiguous: that block)."""

    __slots__ = ("_base", "_rows")
    _base: NDArray
    _rows: tuple[int, int]

    @staticmethod
    def of(base: NDArray, start: int, stop: int, shape: tuple[int, ...]) -> NDArray:
        view = _object_new(_View)
        aval = Aval(tuple(int(n) for n in shape), base.dtype)
        view._aval, view.shape, view.dtype = aval, aval.shape, aval.dtype
        view._base, view._rows, view._var, view._ag = base, (start, stop), base._var, None
        view._ctx = base._ctx  # (the base's device: a view shares its buffer)
        return view

    @property
    def _data(self) -> np.ndarray | None:
        whole = self._base._data
        if whole is None:
            return None
        start, stop = self._rows
        return whole.reshape(-1)[start:stop].reshape(self.shape)

    @_data.setter
    def _data(self, value: np.ndarray | None) -> None:
        base, (start, stop) = self._base, self._rows
        if value is None or base._data is None:  # (a failed op; the base reports it)
            return
        new = base._data.copy()  # copy-on-write: the base's next buffer
        new.reshape(-1)[start:stop] = np.asarray(value).reshape(-1)
        base._data = new


def _maybe_view(x: NDArray, result: NDArray, inplace: bool) -> NDArray:
    return x.reshape(result.shape) if inplace else result


def _contiguous_range(shape: Shape, begin: Shape, end: Shape, step: Shape
                      ) -> tuple[int, int] | None:
    """``(start, stop)`` in the flattened buffer when the basic index selects one contiguous
    block (what MXNet returns as a view: numpy's C-contiguity test), else None."""
    if not begin:
        return 0, math.prod(shape)
    ranges = [range(b, -1 if e is None else e, s) for b, e, s in zip(begin, end, step)]
    ranges += [range(n) for n in shape[len(ranges):]]
    stride, expected, offset = 1, 1, 0
    for n, picked in zip(reversed(shape), reversed(ranges)):
        if len(picked) != 1 and stride * picked.step != expected:
            return None
        expected *= len(picked)
        offset += picked[0] * stride
        stride *= n
    return offset, offset + expected


def _indexed_shape(shape: tuple[int, ...], key: tuple[Any, ...]) -> tuple[Any, ...]:
    return np.broadcast_to(np.empty((), np.bool_), shape)[key].shape  # type: ignore[no-any-return]  # (no data: stride 0)


def _numpy_key(key: Any) -> Any:
    """A key for numpy: NDArrays of indices (alone or inside a tuple) as int64 arrays."""
    if isinstance(key, NDArray):
        return key.asnumpy().astype(np.int64)
    return tuple(map(_numpy_key, key)) if isinstance(key, tuple) and any(
        isinstance(k, NDArray) for k in key) else key


def _gather_positions(x: NDArray, key: tuple[Any, ...]) -> NDArray:
    """``x[key]`` with numpy's advanced indexing (lists or arrays of indices in a tuple,
    with ``None``): numpy finds the positions the key picks in ``x``'s flattened buffer,
    and ``take`` gathers them, so autograd scatters the gradient back through ``take``."""
    try:
        positions = np.arange(x.size).reshape(x.shape)[_numpy_key(key)]
    except IndexError as err:
        raise IndexError(f"x[{key!r}] for an array of shape {x.shape}: {err}") from None
    flat = _apply(registry.get("Reshape"), [x], {"shape": (-1,)})
    return _apply(registry.get("take"), [flat, from_numpy(positions.reshape(  # type: ignore[no-any-return]  # (one output)
        positions.shape or (1,)))], {"axis": 0})


def _raise_never_computed(x: NDArray, failed: engine.Task | None) -> NoReturn:
    what = f"this NDArray of shape {x.shape} has no values"
    if failed is None:
        raise MXNetError(f"{what}: no operator has written it yet")
    filename, line = failed.origin
    raise MXNetError(
        f"{what}: operator '{failed.name}', which was to compute it, failed with "
        f"{type(failed.error).__name__}: {failed.error}\n  pushed at {filename}:{line}\n"
        f"  That failure was reported before; compute the array again, or overwrite it "
        f"(x[:] = ...) before reading it.") from failed.error


def _check_computed(x: NDArray) -> None:
    """Refuse an array whose op failed (the failure was reported), now. Only where the
    answer cannot depend on timing: on a NaiveEngine, or after a wait (``_values``)."""
    failed = engine.reported_failure(x._var)
    if failed is not None:
        _raise_never_computed(x, failed)


def _unfilled(arrays: Any) -> list[Any] | None:
    """NOTE: [Unfilled inputs] the inputs of an op being pushed that have no buffer yet,
    each with the op that was last pushed to write it. Whether that writer has run (or
    been skipped) by now is timing, so nothing is decided here -- except on a NaiveEngine,
    where everything pushed has run and the failure is raised at the push as always. The
    op checks again when it runs (:func:`_refuse_unfilled`): by then its inputs' writers
    have finished, so the answer depends on push order alone (ARCHITECTURE.md, "The engine
    after a failure")."""
    missing = None
    for x in arrays:
        if x._data is None:
            missing = _note_unfilled(x, missing)
    return missing


def _note_unfilled(x: NDArray, missing: list[Any] | None) -> list[Any]:
    if isinstance(engine.current(), engine.NaiveEngine):
        _check_computed(x)
    return [*(missing or ()), (x, x._var._writer)]


def _refuse_unfilled(missing: list[Any]) -> None:
    """In a running op: an input still without a buffer was never computed -- its writer
    failed, or was skipped, and that failure was reported before this op was pushed."""
    for x, writer in missing:
        if x._data is None:
            _raise_never_computed(x, writer.failure if writer is not None else None)


def _one_tuple(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``f(2, 3)`` and ``f((2, 3))`` mean the same (MXNet's reshape and transpose)."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def _normalize_key(shape: Shape, key: Any
                   ) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
    """A basic index -> (begin, end, step) for ``slice`` and the shape after int indices.

    ``begin`` is empty when the key selects everything. A negative step's end of -1
    ("before the first element") is written ``None``, as MXNet's ``slice`` expects.
    """
    key = key if isinstance(key, tuple) else (key,)
    if Ellipsis in key:
        where = key.index(Ellipsis)
        key = key[:where] + (builtins.slice(None),) * (len(shape) - len(key) + 1) + key[where + 1:]
    if len(key) > len(shape):
        raise IndexError(f"too many indices ({len(key)}) for an array of shape {shape}")
    begin, end, step, kept = [], [], [], []
    for axis, (item, size) in enumerate(zip(key + (builtins.slice(None),) * len(shape), shape)):
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for axis {axis} with size {size}")
            start, stop, stride = int(item) % size, int(item) % size + 1, 1
        elif isinstance(item, builtins.slice):
            start, stop, stride = item.indices(size)
            kept.append(len(range(start, stop, stride)))
            if not kept[-1]:
                raise ShapeError(f"x[{item.start}:{item.stop}:{item.step}] selects nothing on "
                                 f"axis {axis} of size {size}; hybridlab, like MXNet, has no "
                                 f"empty slices")
        else:
            raise IndexError(f"unsupported index {item!r} for axis {axis}: use ints, slices, "
                             f"... or an NDArray of indices (nd.take)")
        begin.append(start)
        end.append(None if stop < 0 else stop)
        step.append(stride)
    if all(b == 0 and e == n and s == 1 for b, e, s, n in zip(begin, end, step, shape)):
        return (), (), (), tuple(kept)
    return tuple(begin), tuple(end), tuple(step), tuple(kept)


# --- making arrays ------------------------------------------------------------------------
def _new(aval: Aval, data: np.ndarray | None = None, ctx: Context = _CPU) -> NDArray:
    result = _object_new(NDArray)  # skips __init__, which refuses direct construction
    result._aval, result.shape, result.dtype = aval, aval.shape, aval.dtype
    result._data, result._var, result._ag, result._ctx = data, engine.Var(), None, ctx
    return result


def from_numpy(values: np.ndarray, ctx: Context | None = None) -> NDArray:
    """Wrap an already computed numpy array (no engine op); hybridlab owns it afterwards.
    It is on ``ctx``, else on the current context (``with mx.cpu(1):``)."""
    values = np.asarray(values)
    return _new(Aval(values.shape, values.dtype), values, ctx or Context._default or _CPU)


class _Capsule:
    """A bare DLPack capsule dressed as the object ``np.from_dlpack`` expects."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return 1, 0  # DLPack's CPU: hybridlab's arrays live in host memory


def from_dlpack(dlpack: Any) -> NDArray:
    """An NDArray of a DLPack capsule's values (``to_dlpack_for_read``/``_for_write``, or
    any object with ``__dlpack__``: a numpy array, another library's tensor), copied."""
    if not hasattr(dlpack, "__dlpack__"):
        if type(dlpack).__name__ != "PyCapsule":
            raise TypeError(f"nd.from_dlpack: expected a DLPack capsule or an object with "
                            f"__dlpack__, got {type(dlpack).__name__}")
        dlpack = _Capsule(dlpack)
    try:
        values = np.from_dlpack(dlpack)
    except (BufferError, RuntimeError, TypeError, ValueError) as err:
        raise ValueError(f"nd.from_dlpack: cannot read the capsule ({err}); a capsule is "
                         f"read once, and only from host (CPU) memory") from None
    return from_numpy(values.copy())


def _from_state(state: dict[str, Any]) -> NDArray:
    return from_numpy(ndarray_io.array_from_bytes(bytes(state["handle"])))


def empty_like_aval(aval: Aval, ctx: Context = _CPU) -> NDArray:
    """A result whose ``_data`` an op pushed later fills (used by the graph/gluon layers)."""
    if type(aval) is Aval and type(aval.shape) is tuple and isinstance(aval.dtype, np.dtype):
        return _new(aval, None, ctx)  # already normal (a CachedOp's results, on every call)
    return _new(Aval(tuple(aval.shape), np.dtype(aval.dtype)), None, ctx)


# --- the one path every operator takes ----------------------------------------------------
def _apply(op: OpDef, inputs: list[Any], attrs: Attrs, name: str | None = None, hint: str = "",
           out: NDArray | None = None) -> Any:
    """Run ``op`` on NDArrays: the ``apply`` hook of :func:`registry.populate` and the dunders.

    This is the hot path of imperative code (every ``a + b``), so it avoids work it can
    skip: output avals are cached per (op, input shapes and dtypes, attrs), and inputs are
    checked one by one only when one is not an NDArray.
    """
    ctx = None
    if attrs and ("out" in attrs or "ctx" in attrs):
        attrs, out, ctx = _split_out_and_ctx(op, attrs)
    attrs = op.parse_attrs(attrs)
    parts: list[Any] = [op]
    reads, missing = [], None
    for x in inputs:
        if not isinstance(x, NDArray):
            _explain_bad_input(op, inputs, attrs)
        if x._data is None:  # pending, or never computed: NOTE [Unfilled inputs]
            missing = _note_unfilled(x, missing)
        parts += (x.shape, x.dtype)
        reads.append(x._var)
    parts += attrs.items()
    key: tuple[Any, ...] | None = tuple(parts)
    try:
        avals = _INFER_CACHE.get(key)
    except TypeError:  # an unhashable attribute value: infer without the cache
        avals = key = None
    if avals is None:  # (not in an `except`: a ShapeError then shows no chained KeyError)
        avals = _infer(op, inputs, attrs, key)
    if ctx is None:  # MXNet's rule: the first input's device (a creation op: the current)
        ctx = inputs[0]._ctx if inputs else Context._default or _CPU
    outputs = ([_new(aval, None, ctx) for aval in avals] if out is None
               else _use_out(op, avals, out, inputs))
    kernel_attrs = attrs
    if op.needs_context:  # the seed is drawn now, in program order (see hybridlab.random)
        rt = RunContext(training=_MODE.training, rng=_seed_stream.next_generator())
        kernel_attrs = {**attrs, "rt": rt}
    run = _runner(op, inputs, outputs, kernel_attrs, missing)
    # on the results' device's stream, a copy on its copy stream (NOTE [A worker per
    # device] in engine.py)
    engine.current().push(run, reads, [y._var for y in outputs], op.name,
                          ctx if out is None else out._ctx, op.name == "_copyto")
    if _MODE.recording:
        autograd.record_op(op, attrs, inputs, outputs)
    return outputs[0] if len(outputs) == 1 else outputs


def _runner(op: OpDef, inputs: list[Any], outputs: list[Any], attrs: Attrs,
            missing: list[Any] | None = None) -> Callable[[], None]:
    """The function the engine runs: the kernel on the inputs' buffers, stored as outputs
    (``missing``: NOTE [Unfilled inputs])."""
    kernel = op.kernel
    if len(outputs) == 1:
        result = outputs[0]

        def run() -> None:
            if missing is not None:
                _refuse_unfilled(missing)
            value = kernel(*[x._data for x in inputs], **attrs)
            # builtin dtypes are singletons, so `is not` is a cheap first check
            if value.__class__ is not np.ndarray or value.dtype is not result.dtype \
                    or value.shape != result.shape:
                value = _conform(op, result, value)
            result._data = value

        return run

    def run_many() -> None:
        if missing is not None:
            _refuse_unfilled(missing)
        values = kernel(*[x._data for x in inputs], **attrs)
        for array_, value in zip(outputs, values):
            array_._data = _conform(op, array_, value)

    return run_many


def _split_out_and_ctx(op: OpDef, attrs: Attrs) -> tuple[Attrs, NDArray | None, Context | None]:
    """``out=`` and ``ctx=`` (the results' device: MXNet's creation functions took it)."""
    attrs = dict(attrs)
    out = attrs.pop("out", None)
    ctx = attrs.pop("ctx", None)
    return attrs, out, None if ctx is None else as_context(ctx, op.name)


def _infer(op: OpDef, inputs: list[Any], attrs: Attrs, key: tuple[Any, ...] | None
           ) -> list[Aval]:
    avals = [Aval(tuple(int(n) for n in a.shape), np.dtype(a.dtype))
             for a in op.infer(*[x._aval for x in inputs], **attrs)]
    if key is not None:
        if len(_INFER_CACHE) > 4096:  # a bound, in case shapes change every call
            _INFER_CACHE.clear()
        _INFER_CACHE[key] = avals
    return avals


def _explain_bad_input(op: OpDef, inputs: list[Any], attrs: Attrs) -> None:
    names = op.input_names(attrs)
    for index, x in enumerate(inputs):
        label = names[index] if index < len(names) and not names[0].startswith("*") else index
        if x is None:
            raise TypeError(f"{op.name}: missing input {label!r}; call it as "
                            f"{op.name}({', '.join(names)}, ...)")
        if not isinstance(x, NDArray):
            raise TypeError(f"{op.name}: input {label!r} must be an NDArray, got "
                            f"{type(x).__name__}; wrap values with nd.array(...)")


def _use_out(op: OpDef, avals: list[Aval], out: NDArray, inputs: list[Any]) -> list[NDArray]:
    if len(avals) != 1 or not isinstance(out, NDArray) or avals[0].shape != out.shape:
        raise ValueError(f"{op.name}: the result has shape {[a.shape for a in avals]} but "
                         f"the array written in place (out= or x op= y) is "
                         f"{getattr(out, 'shape', out)!r}; in-place ops cannot change a shape")
    _check_inplace(out, inputs)
    return [out]


def _conform(op: OpDef, array: NDArray, value: Any) -> np.ndarray:
    """Cast a kernel's result to the promised dtype; a wrong shape is a registry bug."""
    result = np.asarray(value, dtype=array.dtype)  # no copy when it already fits
    if result.shape != array.shape:
        if result.size != array.size or result.ndim != 0:
            raise RuntimeError(f"{op.name}: the kernel returned shape {result.shape} but the "
                               f"shape rule promised {array.shape} (a registry bug)")
        result = result.reshape(array.shape)
    return result


def _check_inplace(target: NDArray, sources: list[Any]) -> None:
    if _MODE.recording and (target._ag is not None or any(s._ag is not None for s in sources)):
        raise InplaceGradError(  # MXNet's first sentence, word for word: code matches it
            f"Inplace operations (+=, -=, x[:]=, etc) are not supported when recording with "
            f"autograd: in-place write to an array of shape {target.shape} inside "
            f"autograd.record(), "
            f"while the array or the value is on the tape; write `y = x + 1` instead of "
            f"`x += 1`, or update outside record()")


def _assign(target: NDArray, source: NDArray) -> NDArray:
    """Make ``target`` hold ``source``'s values (an engine op; no autograd check)."""
    missing = _unfilled([source])

    def write() -> None:
        if missing is not None:  # NOTE [Unfilled inputs]
            _refuse_unfilled(missing)
        target._data = source._data.astype(target.dtype, copy=False)  # type: ignore[union-attr]

    engine.current().push(write, [source._var], [target._var], "_assign", target._ctx,
                          source._ctx is not target._ctx)
    return target


def _assign_all(targets: list[NDArray], sources: list[NDArray]) -> None:
    """``_assign`` for many pairs as ONE engine op (a backward pass storing every
    parameter's gradient: one push, not one per parameter)."""
    if not targets:
        return
    for source in sources:
        if source._data is None:
            _check_computed(source)

    def write() -> None:
        for target, source in zip(targets, sources):
            target._data = source._data.astype(target.dtype, copy=False)  # type: ignore[union-attr]

    engine.current().push(write, [s._var for s in sources], [t._var for t in targets],
                          "_assign", targets[0]._ctx)


def _expand(op: OpDef, inputs: list[Any], attrs: Attrs, name: str | None = None,
            hint: str = "") -> Any:
    """A layer operator run imperatively (``nd.Activation``): its lowering, op by op, each
    pushed and recorded like any other, so the tape holds the primitives."""
    out = None
    if attrs and ("out" in attrs or "ctx" in attrs):
        attrs, out, _ = _split_out_and_ctx(op, attrs)
    parsed = op.parse_attrs(attrs)
    if not all(isinstance(x, NDArray) for x in inputs):
        _explain_bad_input(op, inputs, parsed)
    op.infer(*[x._aval for x in inputs], **parsed)  # a shape error names the layer op
    if op.moves_statistics and _MODE.training and not parsed["use_global_stats"]:
        result = _move_statistics(op, inputs, parsed)
    else:
        result = registry.run_lowering(op, _this_module, inputs, parsed, _MODE.training)
    if isinstance(result, tuple):
        return list(result)
    if out is not None:
        _check_inplace(out, inputs)
        return _assign(out, result)
    return result


def _move_statistics(op: OpDef, inputs: list[Any], parsed: Attrs) -> Any:
    """BatchNorm while training: the output, and the moving statistics (inputs 3, 4)
    moved in place towards the batch's, outside the tape (see ``OpDef.moves_statistics``)."""
    out, mean, invstd = registry.run_lowering(op, _this_module, inputs,
                                              {**parsed, "output_mean_var": True}, True)
    keep = parsed["momentum"]
    with autograd.pause():
        var = variance_from_invstd(_this_module, invstd.detach(), parsed["eps"])
        for moving, batch in ((inputs[3], mean.detach()), (inputs[4], var)):
            _assign(moving, moving * keep + batch * (1 - keep))
    return (out, mean, invstd) if parsed["output_mean_var"] else out


def _inplace_method(dunder: str) -> Any:
    tensor_name, scalar_name, _ = registry.DUNDERS[dunder]

    def method(self: NDArray, other: Any) -> NDArray:
        if isinstance(other, NDArray):
            return _apply(registry.get(tensor_name), [self, other], {}, out=self)  # type: ignore[no-any-return]  # (one output)
        if isinstance(other, _SCALARS):
            return _apply(registry.get(scalar_name), [self], {"scalar": float(other)}, out=self)  # type: ignore[no-any-return]  # (one output)
        return NotImplemented  # type: ignore[no-any-return]  # (Python then tries x = x op y)

    method.__name__ = dunder.replace("__", "__i", 1)
    return method


# --- the generated namespace and methods --------------------------------------------------
_this_module = sys.modules[__name__]
registry.populate(_this_module, _apply, expand=_expand)
registry.install_dunders(NDArray, _apply)
for _dunder in ("__add__", "__sub__", "__mul__", "__truediv__", "__mod__", "__pow__"):
    setattr(NDArray, _dunder.replace("__", "__i", 1), _inplace_method(_dunder))

# Operators as methods (x.sum(axis=1), x.clip(0, 1), x.dot(w)): the same rule as Symbol's.
registry.install_methods(NDArray, _this_module)


# --- public functions that are not operators (defined after populate: they win) ----------
def _in_place_update(op: OpDef, states: tuple[int, ...]) -> Callable[..., Any]:
    """``nd.adam_update(w, g, mean, var, out=w, ...)`` as MXNet runs it: the new weight
    goes to ``out`` (or is returned) and the states given are overwritten in place."""
    def update(*args: Any, out: NDArray | None = None, **kwargs: Any) -> NDArray:
        inputs, attrs = registry.split_arguments(op, args, kwargs)
        attrs.pop("name", None)
        weight, *new_states = _apply(op, inputs, attrs)
        _assign_all([inputs[i] for i in states], new_states)
        return weight if out is None else _assign(out, weight)

    update.__name__, update.__doc__ = op.name, op.doc
    return update


for _name, _states in optimizer_ops.STATE_INPUTS.items():
    if _states:
        setattr(_this_module, _name, _in_place_update(registry.get(_name), _states))


# Called first by nd.array when set: gluon's tracing installs it (it refuses nd.array in
# a traced hybrid_forward, in the tracing thread only). ndarray never imports gluon.
_array_guard: Callable[[], None] | None = None


def array(source_array: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """A new array from a list, numpy array or NDArray (float32 unless ``dtype`` is given)."""
    device = as_context(ctx, "nd.array")
    if _array_guard is not None:  # NOTE [Interception per thread] in gluon/_trace.py
        _array_guard()
    if source_array is None:  # numpy would make [nan] of it
        raise TypeError("nd.array(None): there are no values to store; pass numbers, a "
                        "list, a numpy array or an NDArray (nd.zeros(shape) for a blank one)")
    if isinstance(source_array, NDArray):
        dtype = dtype or source_array.dtype
        source_array = source_array.asnumpy()
    try:
        wanted = np.dtype(dtype or np.float32)
    except TypeError:
        raise TypeError(f"nd.array: dtype={dtype!r} is not a dtype; use e.g. 'float32', "
                        f"'int64' or np.float16") from None
    if wanted.kind not in "biuf":  # objects and strings: no operator computes with them
        raise TypeError(f"nd.array: dtype={wanted} is not numeric; NDArrays hold booleans, "
                        f"integers or floats (e.g. 'float32', 'int64')")
    try:
        values = np.array(source_array, dtype=wanted)
    except (TypeError, ValueError) as err:
        raise TypeError(f"nd.array: cannot make a numeric array from "
                        f"{type(source_array).__name__} ({err})") from None
    if values.ndim == 0 and not isinstance(source_array, np.ndarray):
        values = values.reshape(1)  # a Python number: MXNet's (1,); a 0-d numpy array stays 0-d
    return from_numpy(values, device)


def empty(shape: Any, ctx: Context | None = None, dtype: Any = "float32") -> NDArray:
    """MXNet's uninitialised array; hybridlab fills it with zeros (numpy has no cost to save)."""
    return zeros(shape, ctx=ctx, dtype=dtype)  # type: ignore[name-defined,no-any-return]  # noqa: F821 (populate)


# Names of nd that higher layers define (``nd.CachedOp`` is graph's), each imported at its
# first use by a function the package root registers (ndarray imports nothing above it).
_LATE_NAMES: dict[str, Callable[[], Any]] = {}


def __getattr__(name: str) -> Any:
    """``nd.Relu`` or ``nd.sofmax``: an AttributeError that suggests the nearest names."""
    if name in _LATE_NAMES:
        return _LATE_NAMES[name]()
    if name.startswith("_"):  # Python's and IPython's probing (__path__, _ipython_...): no hints
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    known = {n.lower(): n for n, value in globals().items()  # operators, functions, NDArray
             if not n.startswith("_") and not isinstance(value, types.ModuleType)}
    close = difflib.get_close_matches(name, known.values(), n=3) or [
        known[n] for n in difflib.get_close_matches(name.lower(), known, n=3)]
    hint = f"; did you mean {' or '.join(repr(n) for n in close)}?" if close else (
        "; see dir(nd) for the operators hybridlab has")
    raise AttributeError(f"hybridlab.nd has no operator or function {name!r}{hint}")


# MXNet's older NDArray functions (nd only, as in MXNet), written with the operators
def moveaxis(tensor: NDArray, source: int, destination: int) -> NDArray:
    """``tensor`` with the axes ``source`` (an int or several) moved to ``destination``,
    the others kept in order (numpy's ``moveaxis``)."""
    sources, targets = (_moved_axes(tensor.ndim, axes, what) for axes, what in
                        ((source, "source"), (destination, "destination")))
    if len(sources) != len(targets):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must name "
                         f"as many axes")
    order = [axis for axis in range(tensor.ndim) if axis not in sources]
    for target, axis in sorted(zip(targets, sources)):
        order.insert(target, axis)
    return tensor.transpose(order)


def _moved_axes(ndim: int, axes: Any, what: str) -> list[int]:
    listed = [axes] if isinstance(axes, int) else list(axes)
    if any(not -ndim <= a < ndim for a in listed) or len(set(a % ndim for a in listed)) < len(
            listed):
        raise ValueError(f"moveaxis: {what} {axes} must be distinct axes of a {ndim}-d array "
                         f"(-{ndim} .. {ndim - 1})")
    return [a % ndim for a in listed]


def concatenate(arrays: list[Any], axis: int = 0, always_copy: bool = True) -> NDArray:
    """``concat(*arrays, dim=axis)`` (MXNet's older spelling, taking a list)."""
    return _this_module.concat(*arrays, dim=axis)  # type: ignore[no-any-return]


def onehot_encode(indices: NDArray, out: NDArray) -> NDArray:
    """Write the one-hot rows of ``indices`` into ``out`` (its width is the depth)."""
    return _assign(out, _this_module.one_hot(indices, depth=out.shape[1], dtype=out.dtype))


def choose_element_0index(lhs: NDArray, rhs: NDArray) -> NDArray:
    """``lhs[i, rhs[i]]`` for every row ``i`` (``pick`` along axis 1)."""
    return _this_module.pick(lhs, rhs, axis=1)  # type: ignore[no-any-return]


def fill_element_0index(lhs: NDArray, mhs: NDArray, rhs: NDArray) -> NDArray:
    """A copy of ``lhs`` with ``lhs[i, rhs[i]] = mhs[i]`` for every row ``i``."""
    mask = _this_module.one_hot(rhs, depth=lhs.shape[1], dtype=lhs.dtype)
    spread = _this_module.broadcast_like(mhs.reshape((-1, 1)), lhs)
    return _this_module.where(mask, spread, lhs)  # type: ignore[no-any-return]


def waitall() -> None:
    """Block until every pushed operator has run (raises the first failure, if any)."""
    engine.current().wait_all()


def reset_arrays(*arrays: NDArray, num_arrays: int | None = None) -> None:
    """Set every array to zero in place (MXNet's, as ``ParameterDict.zero_grad`` uses)."""
    if num_arrays is not None and num_arrays != len(arrays):
        raise ValueError(f"reset_arrays: num_arrays={num_arrays} but {len(arrays)} arrays given")
    for array in arrays:
        array[:] = 0


Saveable = NDArray | list[Any] | tuple[Any, ...] | dict[str, Any]  # what nd.save takes


def save(fname: str, data: Saveable) -> None:
    """Save a list or dict of NDArrays in MXNet's binary format (``ndarray_io``), atomically."""
    ndarray_io.write_arrays(fname, _numpy_arrays(data))


def save_temporary(fname: str, data: Saveable, caller: str = "nd.save") -> str:
    """``save``'s first half, for a save of several files (export): the whole file in a
    synced temporary beside ``fname``; ``ndarray_io.commit_temporary`` renames it. Errors
    start with ``caller``, what the user called."""
    temporary = ndarray_io.write_arrays(fname, _numpy_arrays(data, caller), commit=False,
                                        caller=caller)
    assert temporary is not None
    return temporary


def _numpy_arrays(data: Saveable, caller: str = "nd.save"
                  ) -> list[np.ndarray] | dict[str, np.ndarray]:
    if isinstance(data, NDArray):
        data = [data]
    items: list[tuple[Any, Any]]
    if isinstance(data, dict):
        items = list(data.items())
    elif isinstance(data, (list, tuple)):
        items = list(enumerate(data))
    else:
        raise TypeError(f"{caller}: data must be an NDArray, list or dict, got {type(data)}")
    for key, value in items:
        if (isinstance(data, dict) and not isinstance(key, str)) or not isinstance(value, NDArray):
            raise TypeError(f"{caller}: entry {key!r} must be a str key and an NDArray value")
    values = [value._values() for _, value in items]  # written as they are: no copy
    return dict(zip(data, values)) if isinstance(data, dict) else values


def load(fname: str) -> list[NDArray] | dict[str, NDArray]:
    """Load an MXNet NDArray file (``nd.save``, ``export``, real MXNet's ``.params``): a list,
    or a dict when the file names its arrays. Bounded reads, never pickle (``ndarray_io``)."""
    return _wrap_loaded(ndarray_io.read_arrays(fname))


def load_frombuffer(buf: bytes | bytearray | memoryview) -> list[NDArray] | dict[str, NDArray]:
    """``load`` of a file's bytes already in memory (checked as a file is)."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError(f"nd.load_frombuffer: buf must be bytes (a file's contents, e.g. "
                        f"open(f, 'rb').read()), got {type(buf).__name__}")
    return _wrap_loaded(ndarray_io.read_arrays_from_bytes(bytes(buf)))


def _wrap_loaded(arrays: list[Any] | dict[str, Any]) -> list[NDArray] | dict[str, NDArray]:
    if isinstance(arrays, dict):
        return {key: from_numpy(values) for key, values in arrays.items()}
    return [from_numpy(values) for values in arrays]


to_dlpack_for_read, to_dlpack_for_write = NDArray.to_dlpack_for_read, NDArray.to_dlpack_for_write
_internal = _this_module  # MXNet's nd._internal: here the ops with a leading _ live in nd
