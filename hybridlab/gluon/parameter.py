"""Parameters: the named, trainable arrays a Block owns.

What this module teaches
------------------------
A :class:`Parameter` is a name plus (eventually) an NDArray and its gradient. Three
things make it more than an array:

* **Deferred initialisation.** ``nn.Dense(256)`` does not know its input size, so its
  weight has shape ``(256, 0)`` -- 0 means "unknown yet". ``initialize()`` only records
  *how* to initialise; the first forward call fills in the 0s and draws the values.
  Asking for ``data()`` before that raises :class:`DeferredInitializationError`.
* **Two faces.** ``data()`` is the NDArray used imperatively; ``var()`` is the Symbol
  placeholder with the same name used when a block is traced under ``hybridize()``.
* **Gradient requests.** ``grad_req`` is ``'write'`` (overwrite), ``'add'`` (accumulate)
  or ``'null'`` (no gradient: running statistics, frozen layers).

A :class:`ParameterDict` maps full names (``dense0_weight``) to Parameters, keeps their
order of creation, and is what ``collect_params()`` returns and ``Trainer`` updates.

Invariants: a Parameter's ``shape`` only gains information (a 0 may become a size, a
size never changes); its NDArray, once created, always has exactly that shape.

NOTE: [One copy per device] ``initialize(ctx=[mx.cpu(0), mx.cpu(1)])`` gives the
Parameter one NDArray on each device (``list_data()``, ``list_ctx()``, ``data(ctx)``),
filled with the same values: data parallelism runs the same network on each device's
slice of the batch, and the Trainer keeps the copies equal (it sums the gradients across
devices and applies one update; gluon/trainer.py, hybridlab/kvstore/). ``data()``
without a device means the only copy, or the current context's (MXNet's rule); asking
for a device it was not initialised on raises MXNet's "was not initialized on context".
The first copy is the Parameter's NDArray of NOTE [One NDArray per Parameter].

NOTE: [One NDArray per Parameter] once created, a Parameter's NDArray is the same object
for the Parameter's whole life: new values (``set_data``, ``initialize(force_reinit=
True)``, ``load_parameters``) are *copied into* it by an engine op. So a compiled program
can gather its parameters' NDArrays once and keep the list (``graph.cached_op.Traced``'s
``feed``), and a Trainer's or user's reference to ``p.data()`` never goes stale.

NOTE: [Aligned weights] where a weight matrix starts in memory changes the speed of every
product with it: BLAS loads 32 or 64 bytes at a time, and a matrix that starts 16 bytes
past a 64-byte boundary (where numpy's allocator usually puts a large array) makes loads
straddle two cache lines: measurably slower products, about 5% of the seed MLP's
forward at batch 1 (the measurement: ARCHITECTURE.md, "Performance notes"). So every buffer a
Parameter holds starts at a 64-byte boundary: every new value goes through
``Parameter._store``, which copies it there with :func:`aligned` when needed
(initialisation, ``set_data``, loading, a hybridized BatchNorm's running statistics),
and the Trainer writes updates into :func:`aligned_empty` buffers. (Both helpers live in
``ndarray_io``, below ``nd``, because ``nd.load`` reads files straight into such buffers.)
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from hybridlab import initializer as _init
from hybridlab.context import Context, as_context, as_context_list, current_context
from hybridlab.errors import DeferredInitializationError, MXNetError
from hybridlab.gluon import _trace
from hybridlab.ndarray_io import aligned, aligned_empty  # noqa: F401 (defined below nd)
from hybridlab.ops.registry import Aval

_GRAD_REQS = ("write", "add", "null")
class Parameter:
    """One named array of a Block (``weight``, ``bias``, ``running_mean`` ...)."""

    def __init__(self, name: str, grad_req: str = "write", shape: Any = None,
                 dtype: Any = "float32", init: Any = None, allow_deferred_init: bool = True,
                 differentiable: bool = True, lr_mult: float = 1.0, wd_mult: float = 1.0,
                 stype: str = "default", grad_stype: str = "default") -> None:
        if stype != "default" or grad_stype != "default":
            raise ValueError(f"Parameter {name!r}: stype={stype!r}, grad_stype={grad_stype!r}: "
                             f"hybridlab stores every array densely; leave both 'default'")
        self.name = name
        self._trainer: Any = None  # a weak reference to the Trainer that updates it
        # the Trainer multiplies its learning rate and weight decay by these (MXNet's)
        self.lr_mult, self.wd_mult = lr_mult, wd_mult
        self._shape = _as_shape(shape)
        self.dtype = np.dtype(dtype)  # == "float32" and == np.float32, as MXNet users compare
        self.init = _init.create(init)
        self.allow_deferred_init = allow_deferred_init
        self._differentiable = differentiable
        self._data: Any = None  # the copy on the first device (NOTE [One copy per device])
        self._copies: dict[Context, Any] = {}  # device -> its NDArray, in list_ctx() order
        self._ctx_list: list[Context] | None = None  # the devices initialize() was given
        self._vars: dict[Any, Any] = {}  # shape -> Symbol var: one node per name in a trace
        self._grad_req = "write"
        self.grad_req = grad_req if differentiable else "null"
        self._deferred: _init.Initializer | None = None  # set by initialize() until shape known

    def __repr__(self) -> str:
        return f"Parameter {self.name} (shape={self.shape}, dtype={self.dtype})"

    @property
    def shape(self) -> tuple[int, ...] | None:
        return self._shape

    @shape.setter
    def shape(self, new: Any) -> None:
        new = _as_shape(new)
        old = self._shape
        if old is not None and new is not None:
            fits = len(old) == len(new) and all(o in (0, n) for o, n in zip(old, new))
            if not fits:
                raise ValueError(f"Parameter {self.name!r}: shape {new} does not match the "
                                 f"declared {old} (0 marks a size still unknown)")
        self._shape = new

    @property
    def grad_req(self) -> str:
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        if req not in _GRAD_REQS:
            raise ValueError(f"grad_req must be one of {_GRAD_REQS}, got {req!r}")
        self._grad_req = req if self._differentiable else "null"
        if self._data is not None:
            self._attach_grad()

    def initialize(self, init: Any = None, ctx: Any = None, default_init: Any = None,
                   force_reinit: bool = False) -> None:
        """Schedule (or, when the shape is known, perform) this parameter's initialisation.

        MXNet's precedence: ``init`` given here, else the parameter's own ``init``, else
        ``default_init`` (what ``net.initialize(init)`` passes), else ``Uniform(0.07)``.
        """
        if self._data is not None and not force_reinit:
            warnings.warn(f"Parameter {self.name!r} is already initialized, ignoring. Set "
                          f"force_reinit=True to re-initialize.",
                          stacklevel=_trace.user_stacklevel())
            return
        self._ctx_list = as_context_list(current_context() if ctx is None else ctx,
                                         f"Parameter {self.name!r}: initialize")
        self._deferred = (_init.create(init) or self.init or _init.create(default_init)
                          or _init.Uniform())
        if self._shape_known():
            self.finish_deferred_init()
        elif not self.allow_deferred_init:
            raise DeferredInitializationError(
                f"Parameter {self.name!r} has unknown shape {self.shape} and deferred "
                f"initialisation is not allowed; give the full shape when creating it")

    def finish_deferred_init(self) -> None:
        """Draw the values now that the shape is known (a forward pass filled it in)."""
        if self._deferred is None:
            return
        if not self._shape_known():
            raise DeferredInitializationError(
                f"Parameter {self.name!r}: shape {self.shape} is still unknown after "
                f"shape inference; pass the input size (e.g. in_units=/in_channels=)")
        _check_fits_in_memory(self.name, self._shape, self.dtype)  # type: ignore[arg-type]  # (known: checked above)
        values = _init.run(self._deferred, self.name, self._shape, self.dtype)  # type: ignore[arg-type]
        self._deferred = None
        self._store(values)  # (force_reinit: into the same NDArray)

    def list_ctx(self) -> list[Context]:
        """The devices this parameter lives on (NOTE [One copy per device])."""
        if self._ctx_list is None:
            self._raise_uninitialized()
        return list(self._ctx_list)  # type: ignore[arg-type]  # (set: checked above)

    @property
    def _grad(self) -> list | None:
        """MXNet's internal list of gradient arrays, one per device: None when
        ``grad_req='null'``."""
        if self._data is None or self.grad_req == "null" or self._data.grad is None:
            return None
        return [data.grad for data in self._copies.values()]

    def cast(self, dtype: Any) -> None:
        """Change the parameter's dtype; its values (and gradient) are converted. The one
        exception to NOTE [One NDArray per Parameter]: new NDArrays (one per device), so
        ``Block.cast`` throws away the compiled programs that held the old ones."""
        self.dtype, self._vars = np.dtype(dtype), {}
        if self._data is not None:
            old, self._data, self._copies = self._data, None, {}
            self._store(old.astype(self.dtype))

    def reset_ctx(self, ctx: Any = None) -> None:
        """Move the parameter to the devices ``ctx`` (one copy each), keeping its values."""
        devices = as_context_list(current_context() if ctx is None else ctx,
                                  f"Parameter {self.name!r}: reset_ctx")
        if self._data is None:
            self._ctx_list = devices  # (deferred: the copies are made when the shape is known)
            return
        first = self.list_data()[0]
        self._ctx_list = devices
        self._store(first)

    def list_data(self) -> list:
        """The parameter's arrays, one per device, in ``list_ctx()`` order."""
        self.data(self.list_ctx()[0])  # the errors of data(): deferred, uninitialised
        return list(self._copies.values())

    def list_grad(self) -> list:
        """The gradients, one per device, in ``list_ctx()`` order."""
        return [self.grad(ctx) for ctx in self.list_ctx()]

    def data(self, ctx: Any = None) -> Any:
        """The parameter's NDArray; while a block is traced, its Symbol ``var()``.

        The second case serves blocks written in the F-less style, ``forward(self, x)``
        using ``self.weight.data()``: the same line is a value imperatively and a graph
        input when traced.
        """
        if _trace.current() is not None:
            return self.var()
        found = self._copies.get(ctx)  # the common case: a device it lives on (interned)
        if found is not None:
            return found
        if self._data is None:
            self._raise_uninitialized()
        if ctx is None:
            if len(self._copies) == 1:
                return self._data
            ctx = current_context()
        found = self._copies.get(as_context(ctx, f"Parameter {self.name!r}: data"))
        if found is None:  # MXNet 1.9's words
            raise RuntimeError(
                f"Parameter {self.name!r} was not initialized on context {ctx}. It was only "
                f"initialized on {list(self._copies)}. Fix: initialize(ctx=[...]) with every "
                f"device the data is split over, or move the data (x.as_in_context(ctx))")
        return found

    def _reduce(self) -> Any:
        """The values to save or export: the first device's copy (the Trainer keeps the
        copies equal; MXNet 1.9 averages them, which gives the same values then)."""
        return self.data(self.list_ctx()[0])

    def _raise_uninitialized(self) -> None:
        if self._deferred is not None:
            raise DeferredInitializationError(
                f"Parameter {self.name!r} has not been initialized yet because its "
                f"shape {self.shape} is not known: run one forward pass (net(x)) first, "
                f"or give the input size (e.g. nn.Dense(256, in_units=512))")
        raise RuntimeError(
            f"Parameter {self.name!r} has not been initialized. Call "
            f"net.initialize() (or net.collect_params().initialize()) first")

    def grad(self, ctx: Any = None) -> Any:
        """The gradient NDArray written by ``backward()`` (on device ``ctx``)."""
        data = self.data(ctx)
        if self.grad_req == "null" or data.grad is None:
            raise RuntimeError(f"Parameter {self.name!r} has no gradient because "
                               f"grad_req='null'")
        return data.grad

    def set_data(self, data: Any) -> None:
        """Replace the value; the shape must fit (the setter checks); grads stay attached."""
        from hybridlab import ndarray as nd
        value = data if isinstance(data, nd.NDArray) else nd.array(data, dtype=self.dtype)
        self.shape = value.shape
        self._deferred = None
        if self._ctx_list is None:  # never initialised (a file loaded into it): as MXNet,
            self._ctx_list = [current_context()]  # it lives on the current device now
        self._store(value)
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is not None:
            trainer._reset_kvstore()  # its store's copy of the old value is stale

    def zero_grad(self) -> None:
        """Set the gradient to 0 (needed between steps when ``grad_req='add'``)."""
        for data in self._copies.values():
            if data.grad is not None:
                data.grad[:] = 0

    def var(self) -> Any:
        """The Symbol placeholder for this parameter (used when tracing)."""
        from hybridlab import symbol
        if self.shape not in self._vars:
            extra: dict[str, Any] = {} if self._differentiable else {"__aux__": True}
            if self.init is not None:  # (as MXNet's: a Module binding the graph starts it so)
                extra["init"] = self.init
            self._vars[self.shape] = symbol.var(self.name, shape=self.shape, dtype=self.dtype,
                                                **extra)
        return self._vars[self.shape]

    def _shape_known(self) -> bool:
        return self._shape is not None and all(n > 0 for n in self._shape)

    def _store(self, values: Any) -> None:
        """Write the NDArray ``values`` into the parameter's NDArray: one engine op that
        reads ``values`` and writes the parameter, casting to its dtype and aligning
        (NOTE [Aligned weights]); every new value of a Parameter arrives here. The buffer
        is shared, not copied, when it needs neither (NOTE [Immutable buffers] in
        ndarray.py). The first value creates the NDArray (NOTE [One NDArray per Parameter])."""
        from hybridlab import engine, ndarray
        devices = self._ctx_list or [current_context()]
        if list(self._copies) != devices:  # the first value, or initialize(ctx=) changed them
            self._make_copies(devices)
        missing = ndarray._unfilled([values])
        for index, target in enumerate(self._copies.values()):
            def write(target: Any = target, copy: bool = index > 0) -> None:
                if missing is not None:  # its op failed: refuse, as copyto does
                    ndarray._refuse_unfilled(missing)
                # each further device gets its own bytes (a copy), the first may share
                value = values._data.astype(target.dtype, copy=copy)
                target._data = aligned(value)

            engine.current().push(write, [values._var], [target._var], "_store", target._ctx,
                                  target._ctx is not values._ctx)

    def _make_copies(self, devices: list[Context]) -> None:
        """One empty NDArray per device, filled by the ops ``_store`` pushes; the first
        keeps the Parameter's NDArray when it has one (NOTE [One NDArray per Parameter])."""
        from hybridlab import ndarray
        aval = Aval(self._shape, np.dtype(self.dtype))  # type: ignore[arg-type]  # (known by the first value)
        if self._data is None:
            self._data = ndarray.empty_like_aval(aval, devices[0])
        self._data._ctx = devices[0]
        self._copies = {devices[0]: self._data}
        for device in devices[1:]:
            self._copies[device] = ndarray.empty_like_aval(aval, device)
        self._attach_grad()

    def _attach_grad(self) -> None:
        if self._grad_req != "null":
            for data in self._copies.values():
                data.attach_grad(grad_req=self._grad_req)


def _as_shape(shape: Any) -> tuple[int, ...] | None:
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(n) for n in shape)


class ParameterDict(OrderedDict):
    """An ordered ``name -> Parameter`` map whose new entries share a name ``prefix``.

    ``get(name, **kwargs)`` is MXNet's: it *creates* ``prefix + name`` when missing
    (as ``dict.setdefault`` would), so it does not take a default like ``dict.get``.
    """

    def __init__(self, prefix: str = "", shared: ParameterDict | None = None) -> None:
        super().__init__()
        self.prefix = prefix
        self._shared = shared

    def __repr__(self) -> str:
        lines = "\n".join(f"  {p!r}" for p in self.values())
        return f"{self.prefix or 'ParameterDict'} (\n{lines}\n)"

    def get(self, name: str, **kwargs: Any) -> Parameter:  # type: ignore[override]  # (MXNet's API: get(name, **kwargs))
        """The Parameter ``prefix + name``, created with ``kwargs`` if it does not exist."""
        full = self.prefix + name
        found = super().get(full)
        if found is None and self._shared is not None:
            found = OrderedDict.get(self._shared, full)
        if found is None:
            found = Parameter(full, **kwargs)
        elif "shape" in kwargs and kwargs["shape"] is not None and found.shape is not None:
            # one dict's sizes fill the other's unknown (0) ones, either way (MXNet's get)
            asked = _as_shape(kwargs["shape"])
            if asked is not None and len(asked) == len(found.shape):
                asked = tuple(a or b for a, b in zip(asked, found.shape))
            found.shape = asked
        elif "shape" in kwargs:
            found.shape = kwargs["shape"]
        self[full] = found
        return found

    def get_constant(self, name: str, value: Any = None) -> Parameter:
        """The constant ``prefix + name`` (created with ``value``, a nested list, numpy
        array or NDArray): a Parameter with ``grad_req='null'`` that no Trainer changes."""
        full = self.prefix + name
        found = super().get(full) or (OrderedDict.get(self._shared, full)
                                      if self._shared is not None else None)
        if found is None:
            if value is None:
                raise KeyError(f"no constant {full!r}: give its value, "
                               f"get_constant({name!r}, value)")
            found = Constant(full, value)
        self[full] = found
        return found

    def save(self, filename: str, strip_prefix: str = "") -> None:
        """Save every value under its full name, less ``strip_prefix`` (MXNet's legacy
        ``save_params`` format)."""
        from hybridlab import ndarray
        arrays = {}
        for name, param in self.items():
            if not name.startswith(strip_prefix):
                raise ValueError(f"save: parameter {name!r} does not start with "
                                 f"strip_prefix={strip_prefix!r}; give a common prefix or ''")
            arrays[name[len(strip_prefix):]] = param.data()
        ndarray.save(filename, arrays)

    def load(self, filename: str, ctx: Any = None, allow_missing: bool = False,
             ignore_extra: bool = False, restore_prefix: str = "", cast_dtype: bool = False,
             dtype_source: str = "current") -> None:
        """Load values saved by :meth:`save` (names get ``restore_prefix`` back; MXNet's
        ``arg:``/``aux:`` keys are accepted too)."""
        from hybridlab import ndarray
        loaded = ndarray.load(filename)
        if not isinstance(loaded, dict):
            raise ValueError(f"{filename}: holds unnamed arrays (nd.save of a list), not "
                             f"named parameters")
        values = {restore_prefix + key.split(":", 1)[-1]: v for key, v in loaded.items()}
        missing = [name for name in self if name not in values]
        extra = [name for name in values if name not in self]
        if missing and not allow_missing:
            raise ValueError(f"{filename}: no values for {missing} (allow_missing=True skips)")
        if extra and not ignore_extra:
            raise ValueError(f"{filename}: values for unknown parameters {extra} "
                             f"(ignore_extra=True skips them)")
        for name in self.keys() & values.keys():
            value, param = values[name], self[name]
            if np.dtype(value.dtype) != np.dtype(param.dtype) and cast_dtype \
                    and dtype_source == "saved":
                param.cast(value.dtype)
            param.set_data(value)

    def update(self, other: Any = (), **unused: Any) -> None:  # type: ignore[override]  # (MXNet's API)
        """Add every parameter of ``other``; one name may not mean two parameters."""
        for name, param in dict(other).items():
            if self.setdefault(name, param) is not param:
                raise ValueError(f"two different parameters are both named {name!r}")

    def select(self, pattern: str | None) -> ParameterDict:
        """A new dict with the parameters whose name matches the regex ``pattern``."""
        chosen = ParameterDict(self.prefix)
        regex = re.compile(pattern or "")
        chosen.update({k: p for k, p in self.items() if regex.match(k)})
        return chosen

    def initialize(self, init: Any = None, ctx: Any = None, verbose: bool = False,
                   force_reinit: bool = False) -> None:
        """Initialise every parameter; ``init`` applies where a parameter has none."""
        for param in self.values():
            param.initialize(None, ctx, default_init=init, force_reinit=force_reinit)

    def zero_grad(self) -> None:
        for param in self.values():
            param.zero_grad()

    def reset_ctx(self, ctx: Any = None) -> None:
        """Move every parameter to the devices ``ctx``."""
        for param in self.values():
            param.reset_ctx(ctx)

    def list_ctx(self) -> list:
        """Every device some parameter lives on."""
        return list(dict.fromkeys(c for param in self.values() for c in param.list_ctx()))

    def setattr(self, name: str, value: Any) -> None:
        """Set an attribute on every parameter, e.g. ``setattr('grad_req', 'null')``."""
        for param in self.values():
            setattr(param, name, value)


class Constant(Parameter):
    """A constant array of a Block (``params.get_constant``): no gradient, never trained."""

    def __init__(self, name: str, value: Any) -> None:
        from hybridlab import ndarray
        if not isinstance(value, ndarray.NDArray):  # float32 unless given in floats (MXNet)
            value = np.asarray(value)
            value = ndarray.array(value, dtype=value.dtype if value.dtype.kind == "f"
                                  else "float32")
        super().__init__(name, grad_req="null", shape=value.shape, dtype=value.dtype,
                         init=_init.Constant(value))
        self.value = value


def _check_fits_in_memory(name: str, shape: tuple[int, ...], dtype: Any) -> None:
    """A parameter larger than the machine's memory is refused before anything is
    allocated, with the same error on every engine (it was MemoryError on one and the
    failed initialiser's MXNetError on the other)."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not a POSIX system: let numpy decide
        return
    if nbytes > memory:
        raise MXNetError(f"Parameter {name!r} of shape {shape} ({np.dtype(dtype).name}) needs "
                         f"{nbytes / 2**30:.1f} GiB, more than this machine's "
                         f"{memory / 2**30:.1f} GiB of memory; check the layer's sizes")
