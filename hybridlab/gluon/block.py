"""Blocks: Gluon's layers and models, and ``hybridize()``.

What this module teaches
------------------------
A :class:`Block` is a callable with parameters and child blocks. A :class:`HybridBlock`
writes its maths once, in ``hybrid_forward(self, F, x, **params)``, and runs it in two
ways:

* **imperatively** (the default): ``F`` is ``hybridlab.ndarray``, the parameters are
  NDArrays, and every operator is pushed to the engine as the Python runs;
* **hybridized**: the first call runs ``hybrid_forward`` *once* with ``F =
  hybridlab.symbol`` and Symbol inputs (``data``, or ``data0, data1 ...``). The traced
  Symbol is compiled by the graph pipeline into a ``CachedOp``; later calls feed the
  NDArrays straight to the compiled program -- no Python of the block runs again.

Naming follows MXNet, because exported files and lessons show the names: a block's
prefix comes from a counter per class name (``dense0_``, ``hybridnet0_``; inside a
parent's ``name_scope()`` the counter is the parent's); an operator traced inside a block
is named ``<prefix><op><n>`` (``hybridnet0_relu0``); a layer names its output ``fwd``.

Invariants: a compiled program is keyed by (training mode, and the input shapes when
``static_shape=True``); ``hybridize()`` or a new ``hybridize(False)`` throws them away.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import json
import threading
import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from hybridlab import autograd, display, model_files, ndarray, symbol
from hybridlab import name as _name
from hybridlab.base import _flatten, _regroup
from hybridlab.errors import (
    ArrayFileError,
    BlockInputError,
    DeferredInitializationError,
    NonHybridChildError,
    TraceOutputError,
)
from hybridlab.gluon import _report, _trace
from hybridlab.gluon.parameter import Parameter, ParameterDict

if TYPE_CHECKING:
    from hybridlab.graph.cached_op import CachedOp


MAX_STRUCTURE_BYTES = 1 << 20  # Block.load reads at most this much of a -model.json


def _renamed(key: str, renames: dict[str, str]) -> str:
    """A saved parameter path (``dense00.weight``) under the current blocks' keys."""
    prefix = max((p for p in renames if key.startswith(p)), key=len, default="")
    return renames.get(prefix, "") + key[len(prefix):]

class _BlockScope:
    """The ``with block.name_scope():`` context: children get ``parent_prefix + hint<n>_``."""

    _current = threading.local()  # per thread: the innermost scope, and what to restore

    def __init__(self, block: Block) -> None:
        self._block = block
        self._counter: dict[str, int] = {}

    @staticmethod
    def create(prefix: str | None, params: ParameterDict | None, hint: str) -> tuple:
        """``(prefix, params)`` of a new block. ``params=other.params`` shares: the new
        dict takes ``other``'s prefix, so ``get('weight')`` finds ``other``'s weight."""
        parent = getattr(_BlockScope._current, "value", None)
        if parent is None:
            if prefix is None:  # a top-level block: one global counter per class name
                prefix = _name.NameManager.current.get(None, hint) + "_"
            full, owner = prefix, None
        else:
            if prefix is None:
                count = parent._counter.get(hint, 0)
                parent._counter[hint] = count + 1
                prefix = f"{hint}{count}_"
            full, owner = parent._block.prefix + prefix, parent._block.params
        if params is not None:
            return full, ParameterDict(params.prefix, params)
        if owner is None:
            return full, ParameterDict(full)
        # a child's parameter names extend its parent's *dict* prefix, not the block's: in
        # Net(prefix='net2_', params=net1.collect_params()) the children look up
        # net1_dense0_weight in the shared dict, as MXNet's do
        return full, ParameterDict(owner.prefix + prefix, owner._shared)

    def __enter__(self) -> _BlockScope:
        if self._block._empty_prefix:  # prefix='': its children count in the enclosing
            return self  # scope, as MXNet's do (two units of a stage: conv0..conv3, no clash)
        # what to restore is kept per thread, never on the scope: two threads may trace
        # the same block at once (each its first call)
        local = _BlockScope._current
        saved = local.__dict__.setdefault("saved", [])
        prefix_scope = _name.Prefix(self._block.prefix)
        saved.append((getattr(local, "value", None), prefix_scope))
        local.value = self
        prefix_scope.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._block._empty_prefix:
            return
        old, prefix_scope = _BlockScope._current.saved.pop()
        prefix_scope.__exit__(*exc)
        _BlockScope._current.value = old


class Block:
    """Base class of every layer and model: parameters, children, ``forward``."""

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        self._empty_prefix = prefix == ""
        self._prefix, self._params = _BlockScope.create(prefix, params, self._alias())
        self._name = self._prefix[:-1] if self._prefix.endswith("_") else self._prefix
        self._scope = _BlockScope(self)
        self._children: OrderedDict[str, Block] = OrderedDict()
        self._reg_params: dict[str, Parameter] = {}
        self._forward_pre_hooks: OrderedDict[int, Any] = OrderedDict()
        self._forward_hooks: OrderedDict[int, Any] = OrderedDict()

    def _alias(self) -> str:
        return type(self).__name__.lower()

    def __setattr__(self, name: str, value: Any) -> None:
        """Attributes that are Blocks or Parameters are registered (as MXNet does).

        A Parameter made directly (``self.w = gluon.Parameter('w', shape=(2,))``) rather
        than by ``self.params.get`` joins ``self.params`` too, so that ``initialize()``,
        ``collect_params()`` and the compiled program all see it.
        """
        existing = self.__dict__.get(name)
        if isinstance(existing, (Block, Parameter)) and not isinstance(value, type(existing)):
            raise TypeError(f"{type(self).__name__}.{name} is a {type(existing).__name__}; "
                            f"it cannot become a {type(value).__name__} (MXNet forbids "
                            f"changing a registered attribute's type): use another name")
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            self._reg_params[name] = value
            self._params.update({value.name: value})
        super().__setattr__(name, value)

    def __repr__(self) -> str:
        body = "".join(f"\n  ({key}): " + repr(child).replace("\n", "\n  ")
                       for key, child in self._children.items())
        return f"{type(self).__name__}({body}\n)" if body else f"{type(self).__name__}()"

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def name(self) -> str:
        return self._name

    @property
    def params(self) -> ParameterDict:
        """This block's own parameters (not its children's: see ``collect_params``)."""
        return self._params

    def name_scope(self) -> _BlockScope:
        return self._scope

    def register_child(self, block: Block, name: str | None = None) -> None:
        self._children[name or str(len(self._children))] = block

    def apply(self, fn: Any) -> Block:
        """Call ``fn(block)`` on every child (recursively), then on this block."""
        for child in self._children.values():
            child.apply(fn)
        fn(self)
        return self

    def register_forward_pre_hook(self, hook: Any) -> HookHandle:
        """Call ``hook(block, inputs)`` before each forward; ``.detach()`` the handle to stop."""
        return HookHandle(self, self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook: Any) -> HookHandle:
        """Call ``hook(block, inputs, outputs)`` after each forward."""
        return HookHandle(self, self._forward_hooks, hook)

    def _hooks_changed(self) -> None:
        """(HybridBlock keeps its hot path free of hook checks: it looks here.)"""

    def cast(self, dtype: Any) -> None:
        """Convert every parameter (this block's and its children's) to ``dtype``."""
        for child in self._children.values():
            child.cast(dtype)
        for param in self.params.values():
            param.cast(dtype)

    def collect_params(self, select: str | None = None) -> ParameterDict:
        """Own parameters first, then each child's, in order; ``select`` is a regex."""
        self._warn_unregistered_blocks()
        found = ParameterDict(self._params.prefix)
        found.update(self.params)
        for child in self._children.values():
            found.update(child.collect_params())
        return found.select(select)

    def _warn_unregistered_blocks(self) -> None:
        """Blocks kept in a plain list or dict are not children: their parameters are not
        collected, initialised or saved (MXNet warns too)."""
        children = {id(child) for child in self._children.values()}

        def unregistered(value: Any) -> bool:
            if isinstance(value, Block):
                return id(value) not in children
            items = value.values() if isinstance(value, dict) else value
            return isinstance(value, (list, tuple, dict)) and any(map(unregistered, items))

        for name, value in vars(self).items():
            if name != "_children" and not isinstance(value, Block) and unregistered(value):
                warnings.warn(f"{type(self).__name__}.{name} holds Blocks in a plain "
                              f"{type(value).__name__}: they are not children, so their "
                              f"parameters are not collected; use nn.Sequential (or "
                              f"HybridSequential) and add() them", stacklevel=3)

    def _params_by_path(self, path: str = "") -> dict[str, Parameter]:
        """Structural names such as ``0.weight`` or ``hidden.bias`` (save_parameters keys)."""
        found = {path + key: param for key, param in self._reg_params.items()}
        for key, child in self._children.items():
            found.update(child._params_by_path(f"{path}{key}."))
        return found

    def save_parameters(self, filename: str, deduplicate: bool = False) -> None:
        """Save the values with structural keys (``hidden.weight``); no pickle.
        ``deduplicate=True`` saves a parameter shared by several blocks once."""
        arrays, seen = {}, set()
        for key, param in self._params_by_path().items():
            if not (deduplicate and id(param) in seen):
                arrays[key] = param._reduce()
            seen.add(id(param))
        ndarray.save(filename, arrays)

    def save_params(self, filename: str) -> None:
        """MXNet's deprecated form: full parameter names less this block's prefix."""
        warnings.warn("save_params is deprecated; use save_parameters", DeprecationWarning,
                      stacklevel=2)
        self.collect_params().save(filename, strip_prefix=self.prefix)

    def load_params(self, filename: str, ctx: Any = None, allow_missing: bool = False,
                    ignore_extra: bool = False) -> None:
        """MXNet's deprecated form of ``load_parameters``, for files of ``save_params``."""
        warnings.warn("load_params is deprecated; use load_parameters", DeprecationWarning,
                      stacklevel=2)
        self.collect_params().load(filename, ctx, allow_missing, ignore_extra, self.prefix)

    def load_parameters(self, filename: str, ctx: Any = None, allow_missing: bool = False,
                        ignore_extra: bool = False, cast_dtype: bool = False,
                        dtype_source: str = "current") -> None:
        """Load values saved by ``save_parameters`` (shapes must match). A value stored in
        another dtype is refused unless ``cast_dtype=True`` (as MXNet): float64 1e300
        would silently become inf, an int8 file silently floats. With ``cast_dtype``,
        ``dtype_source='current'`` casts to the parameter's dtype, ``'saved'`` keeps the
        file's."""
        self._load_arrays(ndarray.load(filename), filename, allow_missing, ignore_extra,
                          cast_dtype, dtype_source)

    def _load_arrays(self, loaded: Any, filename: str, allow_missing: bool = False,
                     ignore_extra: bool = False, cast_dtype: bool = False,
                     dtype_source: str = "current") -> None:
        params = self._params_by_path()
        if not isinstance(loaded, dict):
            raise ArrayFileError(f"{filename}: holds a list of {len(loaded)} unnamed arrays "
                                 f"(nd.save of a list), not named parameters. Fix: load it "
                                 f"with nd.load, or save the network with save_parameters")
        saved = {id(params[key]) for key in params.keys() & loaded.keys()}  # type: ignore[union-attr]
        # a shared parameter saved once (deduplicate=True) is not missing
        missing = sorted(k for k in set(params) - set(loaded) if id(params[k]) not in saved)
        extra = sorted(set(loaded) - set(params))  # type: ignore[type-var]  # (a dict: checked above)
        if missing and not allow_missing:
            raise ValueError(f"{filename}: no values for {missing} (allow_missing=True skips)")
        if extra and not ignore_extra:
            raise ValueError(f"{filename}: values for unknown parameters {extra} "
                             f"(ignore_extra=True skips them)")
        if dtype_source not in ("current", "saved"):
            raise ValueError(f"load_parameters: dtype_source={dtype_source!r}; use 'current' "
                             f"(cast to the parameter's dtype) or 'saved' (keep the file's)")
        for key in sorted(params.keys() & loaded.keys()):  # type: ignore[union-attr]
            param, value = params[key], loaded[key]
            if np.dtype(value.dtype) != np.dtype(param.dtype):
                if not cast_dtype:
                    raise ValueError(f"{filename}: {key!r} is stored as {value.dtype} but the "
                                     f"parameter is {param.dtype}; load_parameters(..., "
                                     f"cast_dtype=True) converts it")
                if dtype_source == "saved":  # a new NDArray: compiled programs are stale
                    param.cast(value.dtype)
                    self.apply(_forget_programs)
            if param.shape is not None and 0 not in param.shape and value.shape != param.shape:
                raise ValueError(f"{filename}: {key!r} has shape {value.shape} but the "
                                 f"parameter has {param.shape}: saved from another network?")
            param.set_data(value)

    def save(self, prefix: str) -> None:
        """MXNet's whole-model save: ``<prefix>-model.json``, the blocks' structure (each
        block's class, its children by key, whether it was hybridized), and
        ``<prefix>-model.params``, the values (:meth:`save_parameters`)."""
        from hybridlab.ndarray_io import atomic_write

        self.save_parameters(f"{prefix}-model.params")
        atomic_write(f"{prefix}-model.json", json.dumps(self._structure_of(), indent=1))

    def load(self, prefix: str) -> None:
        """Load what :meth:`save` wrote into this block, built the same way: the same
        classes, children in the same order (their keys may differ: MXNet renames the
        blocks to the saved names); the parameters take the saved values and the blocks
        that were hybridized are hybridized again."""
        fname = f"{prefix}-model.json"
        with open(fname, encoding="utf-8") as file:
            saved = json.loads(file.read(MAX_STRUCTURE_BYTES))
        renames: dict[str, str] = {}
        if not self._matches(saved, "", "", renames):
            raise ValueError(f"{fname}: describes another network than {type(self).__name__} "
                             f"{self.name!r} (its blocks' classes differ); build the model "
                             f"as it was built when saved")
        loaded = ndarray.load(f"{prefix}-model.params")
        if isinstance(loaded, dict):  # (_load_arrays refuses anything else, clearly)
            loaded = {_renamed(key, renames): value for key, value in loaded.items()}
        self._load_arrays(loaded, f"{prefix}-model.params")
        self._rehybridize(saved)

    def _structure_of(self) -> dict:
        """This block and its children, in order, as the JSON :meth:`save` writes."""
        return {"class": type(self).__name__, "hybridized": bool(getattr(self, "_active", False)),
                "children": [[key, child._structure_of()] for key, child in self._children.items()]}

    def _matches(self, saved: Any, path: str, saved_path: str, renames: dict) -> bool:
        """Does ``saved`` describe this block? Collects each child's saved path prefix."""
        if not isinstance(saved, dict) or saved.get("class") != type(self).__name__ or \
                len(saved.get("children", ())) != len(self._children):
            return False
        renames[saved_path] = path
        return all(child._matches(entry[1], f"{path}{key}.", f"{saved_path}{entry[0]}.", renames)
                   for (key, child), entry in zip(self._children.items(), saved["children"]))

    def _rehybridize(self, saved: dict) -> None:
        if saved["hybridized"] and isinstance(self, HybridBlock):
            self.hybridize()
        for child, (_, entry) in zip(self._children.values(), saved["children"]):
            child._rehybridize(entry)

    def initialize(self, init: Any = None, ctx: Any = None, verbose: bool = False,
                   force_reinit: bool = False) -> None:
        """Initialise every parameter (deferred where the shape is still unknown)."""
        self.collect_params().initialize(init, ctx, verbose, force_reinit)

    def hybridize(self, active: bool = True, **flags: Any) -> None:
        """A plain Block cannot be compiled; it hybridizes its hybridizable children."""
        active, flags = _flags_in_active(active, flags)
        _check_flags(active, flags)
        for child in self._children.values():
            child.hybridize(active, **flags)

    def __call__(self, *args: Any) -> Any:
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args)
        return self._hooked(self.forward, args)

    def _hooked(self, run: Any, args: tuple) -> Any:
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, args)
        out = run(*args)
        for hook in list(self._forward_hooks.values()):
            hook(self, args, out)
        return out

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward(self, x)")


def _forget_programs(block: Block) -> None:
    """Drop a hybridized block's compiled programs (they hold NDArrays now replaced)."""
    if isinstance(block, HybridBlock) and block._cached_op is not None:
        block._reset_cache()


class HookHandle:
    """What ``register_forward_hook`` returns: ``detach()`` removes the hook."""

    _next_id = 0

    def __init__(self, block: Block, hooks: OrderedDict, hook: Any) -> None:
        HookHandle._next_id += 1
        self._block, self._hooks, self._id = block, hooks, HookHandle._next_id
        hooks[self._id] = hook
        block._hooks_changed()

    def detach(self) -> None:
        self._hooks.pop(self._id, None)
        self._block._hooks_changed()


_FLAGS = ("static_alloc", "static_shape", "passes", "disabled_passes", "autotune",
          "inline_limit")
# One trace at a time, in any thread (a trace of a parent traces its children, hence
# re-entrant): a trace is a one-off of milliseconds, and two threads making a block's
# first call at once then compile it once, not twice.
_TRACE_LOCK = threading.RLock()


def _flags_in_active(active: Any, flags: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """MXNet code sometimes gives the flags as a dict in the first argument,
    ``hybridize({'static_alloc': True})``: MXNet took the dict as a true ``active`` and
    dropped the flags; here they are applied, as their author meant."""
    if isinstance(active, dict):
        return True, {**active, **flags}
    return active, flags


def _check_flags(active: Any, flags: dict[str, Any]) -> None:
    for key in flags:
        if key not in _FLAGS:
            close = difflib.get_close_matches(key, _FLAGS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"hybridize() got an unknown keyword {key!r}{hint} "
                            f"(it takes active, {', '.join(_FLAGS)})")
    switches = {k: v for k, v in flags.items() if k in ("static_alloc", "static_shape")
                or k == "autotune" and v is not None}
    for key, value in [("active", active), *switches.items()]:
        if not isinstance(value, bool):  # the strings "no" and "False" are true in Python
            raise TypeError(f"hybridize(): {key} must be True or False, got {value!r}")
    limit = flags.get("inline_limit", 2)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise TypeError(f"hybridize(): inline_limit must be an integer >= 0, got {limit!r}")
    for key, want in (("passes", callable), ("disabled_passes", lambda v: isinstance(v, str))):
        value = flags.get(key, ())
        if isinstance(value, (str, bytes)) or not all(want(v) for v in value):
            raise TypeError(f"hybridize(): {key} must be a list of "
                            f"{'pass functions' if key == 'passes' else 'pass names'}, "
                            f"got {value!r}")


@functools.cache  # keyed by the class's function (not a bound method: no block kept)
def _input_slots(function: Any, params: frozenset[str]) -> tuple[list[str], int, bool]:
    """(names of the data inputs, how many are required, whether more are accepted) of a
    ``hybrid_forward`` (its F and its parameters left out)."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    listed = list(inspect.signature(function).parameters.values())[2:]  # self, F
    data = [p for p in listed if p.kind in kinds and p.name not in params]
    required = sum(p.default is inspect.Parameter.empty for p in data)
    return ([p.name for p in data], required,
            any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in listed))


def _check_input_count(block: HybridBlock, count: int) -> None:
    """A clear error, in the block's own terms, for a call with the wrong number of inputs
    (it was a TypeError about ``weight`` imperatively, and CachedOp internals hybridized)."""
    if type(block).forward is not HybridBlock.forward:  # the F-less style: Python checks
        return
    names, required, more = _input_slots(type(block).hybrid_forward,
                                         frozenset(block._reg_params))
    if required <= count and (more or count <= len(names)):
        return
    expected = f"{len(names)}" if required == len(names) and not more else (
        f"{required} or more" if more else f"{required} to {len(names)}")
    raise BlockInputError(f"{type(block).__name__} {block.name!r} takes {expected} input(s) "
                          f"({', '.join(names) or 'none'}), got {count}")


def _only_ndarrays(args: tuple) -> bool:
    """True when every input is an NDArray (and there is one): the hybridized call."""
    for arg in args:
        if not isinstance(arg, ndarray.NDArray):
            return False
    return bool(args)


def _one_device(block: Any, args: tuple) -> Any:
    """The device of a compiled call's inputs; inputs on two devices are refused, as
    MXNet's CachedOp refuses them (checked on a block's first call on each device: the
    hot path compares only the first input's device)."""
    devices = list(dict.fromkeys(arg._ctx for arg in args))
    if len(devices) > 1:
        raise ValueError(f"{type(block).__name__} {block.name!r} is hybridized: its inputs "
                         f"must all be on one device, got {devices}. Fix: move them with "
                         f"x.as_in_context({devices[0]})")
    return devices[0]


def _kinds(args: Any) -> set:
    """Which of NDArray and Symbol the inputs hold (looking into lists, as MXNet)."""
    if isinstance(args, (list, tuple)):
        return set().union(*map(_kinds, args)) if args else set()
    return {type_ for type_ in (ndarray.NDArray, symbol.Symbol) if isinstance(args, type_)}


def _is_flat(structure: Any) -> bool:
    return all(item is None for item in structure)


def _are_symbols(block: Block, args: tuple) -> bool:
    """True for Symbol inputs, False for NDArrays (other values, such as None or a number
    beside them, pass through to ``hybrid_forward``, as in MXNet); no array at all, or
    both kinds, is a clear error."""
    if _only_ndarrays(args):  # the common case, without building sets
        return False
    kinds_found = _kinds(args)
    if len(kinds_found) == 1:
        return kinds_found == {symbol.Symbol}
    kinds = ", ".join(type(arg).__name__ for arg in args) or "no input"
    fix = ("pass the input: net(x)" if not args else
           "give all NDArrays (to compute) or all Symbols (to build a graph)"
           if all(isinstance(a, (symbol.Symbol, ndarray.NDArray)) for a in args) else
           "convert it first, e.g. net(nd.array(x))")
    raise BlockInputError(f"{type(block).__name__} {block.name!r} was called with ({kinds}); "
                          f"a block takes NDArrays or Symbols. Fix: {fix}")


class HybridBlock(Block):
    """A Block whose ``hybrid_forward`` can be traced into a compiled program."""

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        super().__init__(prefix, params)
        self._active = False
        self._flags: dict[str, Any] = {"static_alloc": False, "static_shape": False}
        # one CachedOp, the block's one cache (made by hybridize); its traces, by mode.
        # NOTE [One program per device]: data on another device than the first call's
        # runs another CachedOp, fed that device's copies of the parameters
        self._cached_op: CachedOp | None = None
        self._op_ctx: Any = None  # the device self._cached_op feeds (its first call's)
        self._device_ops: dict[Any, CachedOp] = {}
        self._traces: dict[tuple, _Trace] = {}
        self._report: _report.HybridizationReport | None = None
        self._fast = False  # hybridized, no hooks and no None inputs: the hot path
        self._structure: tuple[bool, ...] | None = None  # which inputs were None, 1st call
        self._given = 0  # how many inputs the first call gave (trailing Nones included)
        self._nesting: Any = None  # the first call's lists among the inputs (_flatten)

    def _hooks_changed(self) -> None:
        self._fast = self._active and not (self._forward_pre_hooks or self._forward_hooks
                                           or any(self._structure or ())
                                           or not _is_flat(self._nesting or ()))

    def cast(self, dtype: Any) -> None:
        super().cast(dtype)
        if self._cached_op is not None:  # its programs read the old NDArrays
            self._reset_cache()

    def register_child(self, block: Block, name: str | None = None) -> None:
        if not isinstance(block, HybridBlock):
            raise NonHybridChildError(
                f"{type(block).__name__} {block.name!r} is a plain Block, but {self.name!r} "
                f"is a HybridBlock: a Block's forward is arbitrary Python and cannot be "
                f"traced (at {_trace.user_line()}). Fix: make {type(block).__name__} a "
                f"HybridBlock (hybrid_forward), or make {type(self).__name__} a plain Block")
        super().register_child(block, name)
        # a new child changes the network: the compiled programs describe the old one
        # (MXNet clears its cached op here too); the next call traces again
        if self._cached_op is not None:
            self._reset_cache()

    def hybridize(self, active: bool = True, **flags: Any) -> None:
        """Compile on the next call (``active=False`` returns to imperative execution).

        Flags: ``static_alloc=True`` keeps the output buffers between calls;
        ``static_shape=True`` also compiles one program per input shape, so traced
        Symbols know their shapes; ``passes=[...]`` adds compiler passes (pure
        ``(graph, context) -> (graph, changes)`` functions, run before fusion and the
        memory plan)
        and ``disabled_passes=[...]`` names pipeline passes not to run; ``autotune=False``
        keeps the weights' layout as stored instead of timing both on the first call of
        each input signature (default: the ``AUTOTUNE`` flag, on; graph/autotune.py).
        ``inline_limit`` is accepted for MXNet's code and changes nothing: MXNet keeps a
        child with more operators than that as a nested program; hybridlab always
        compiles a block and its children into one program (the same results).
        """
        active, flags = _flags_in_active(active, flags)
        _check_flags(active, flags)
        self._active = bool(active)
        flags = {k: v for k, v in flags.items() if k != "inline_limit"}
        self._flags = {"static_alloc": False, "static_shape": False, **flags}
        for key in ("passes", "disabled_passes"):
            self._flags[key] = tuple(self._flags.get(key, ()))
        self._reset_cache()
        super().hybridize(active, **flags)

    def _reset_cache(self) -> None:
        """A new CachedOp (nothing compiled) whose graphs come from tracing this block."""
        from hybridlab.graph.cached_op import CachedOp
        self._traces, self._structure, self._given, self._nesting = {}, None, 0, None
        self._hooks_changed()
        self._cached_op = CachedOp(trace=self._traced, **self._flags)
        self._op_ctx, self._device_ops = None, {}

    def hybridization_report(self) -> _report.HybridizationReport | None:
        """What the last trace ran only once (prints, Python branches, frozen constants),
        the weights' layout measured for each input signature and the algorithm measured
        for each convolution (graph/autotune.py)."""
        if self._report is None or self._cached_op is None:
            return self._report
        from hybridlab.graph.ir import format_type
        layouts = [f"{', '.join(format_type((a,)) for a in avals)}: {choice}"
                   for avals, choice in self._cached_op.layouts()]
        convolutions = [f"{name}: {choice}"
                        for name, choice in self._cached_op.convolutions().items()]
        return dataclasses.replace(self._report, layouts=layouts, convolutions=convolutions)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """In Jupyter: the traced graph once hybridized and called, the layer listing as text."""
        return display.mimebundle(self, text=repr(self))  # viz fills the hook

    def __call__(self, *args: Any) -> Any:
        # the hot path, checked first: NDArrays into a hybridized block, no trace running
        # (the trace stack read directly, not through _trace.current(): one call fewer)
        if self._fast and _only_ndarrays(args) and not _trace._STATE.stack:
            # one cache, the CachedOp's: it asks self._traced on a miss (NOTE [The last
            # signature first] in graph/cached_op.py is the one fast path)
            if args[0]._ctx is self._op_ctx:  # (identity: contexts are interned)
                return self._cached_op(*args)  # type: ignore[misc]  # active: hybridize made one
            return self._device_op(_one_device(self, args))(*args)
        if self._forward_pre_hooks or self._forward_hooks:
            return self._hooked(self._dispatch, args)
        return self._dispatch(*args)

    def _dispatch(self, *args: Any) -> Any:
        """Every call but the hot path: hooks, None inputs, Symbols, imperative."""
        if self._active and not _trace._STATE.stack and _kinds(args) == {ndarray.NDArray}:
            return self._call_compiled(args)
        if _are_symbols(self, args):  # (the clear errors for anything else are in here)
            return self._trace_call(*args)
        self._finish_deferred_init(*args)
        return self.forward(*args)

    def _device_op(self, ctx: Any) -> Any:
        """The CachedOp for data on ``ctx`` (NOTE [One program per device]): the block's own
        on its first call, another for each further device, sharing the traces."""
        if self._op_ctx is None:
            self._op_ctx = ctx
            return self._cached_op
        if ctx is self._op_ctx:
            return self._cached_op
        if ctx not in self._device_ops:
            from hybridlab.graph.cached_op import CachedOp
            trace = functools.partial(self._traced, ctx=ctx)
            self._device_ops[ctx] = CachedOp(trace=trace, **self._flags)
        return self._device_ops[ctx]

    def _call_compiled(self, args: tuple) -> Any:
        """A hybridized call with None among the inputs (an optional input left out): the
        program is compiled without it, and the block keeps the first call's structure."""
        args = self._flat_inputs(args)
        given = len(args)
        while args and args[-1] is None:
            args = args[:-1]
        wrong = [a for a in args if a is not None and not isinstance(a, ndarray.NDArray)]
        if wrong:
            raise BlockInputError(f"{type(self).__name__} {self.name!r} is hybridized: its "
                                  f"inputs must be NDArrays (or None), got "
                                  f"{type(wrong[0]).__name__} {wrong[0]!r}. Fix: pass "
                                  f"nd.array(...), or call hybridize(False)")
        structure = tuple(arg is None for arg in args)
        if self._structure is None:
            self._structure, self._given = structure, given
            self._hooks_changed()
        self._check_structure(structure)
        given_arrays = [a for a in args if a is not None]
        op: Any = (self._device_op(_one_device(self, tuple(given_arrays))) if given_arrays
                   else self._cached_op)
        return op(*given_arrays)

    def _flat_inputs(self, args: tuple) -> tuple:
        """Lists among the inputs (``net(x, [h, c])``) become separate program inputs; the
        block keeps the first call's nesting and gives ``hybrid_forward`` the lists back."""
        leaves, nesting = _flatten(args)
        if self._nesting is None and self._structure is None:
            self._nesting = nesting
        if nesting != (self._nesting or nesting):
            raise BlockInputError(
                f"{type(self).__name__} {self.name!r} was compiled for inputs nested as "
                f"{self._nesting} and is now called with {nesting} (None: one array, [...]: "
                f"a list); a hybridized block keeps its first call's inputs (as MXNet). Fix: "
                f"call hybridize() again before changing them")
        return tuple(leaves)

    def _check_structure(self, structure: tuple[bool, ...]) -> None:
        if structure != self._structure:
            def show(s: Any) -> str:
                return "(" + ", ".join("None" if n else "NDArray" for n in s) + ")"
            raise BlockInputError(
                f"{type(self).__name__} {self.name!r} was compiled for inputs "
                f"{show(self._structure)} and is now called with {show(structure)}; a "
                f"hybridized block keeps its first call's inputs (as MXNet). Fix: call "
                f"hybridize() again before changing them")

    def forward(self, x: Any, *args: Any) -> Any:
        """Imperative execution: ``F`` is ``hybridlab.ndarray``, parameters are NDArrays."""
        _check_input_count(self, 1 + len(args))
        ctx = x.context if isinstance(x, ndarray.NDArray) else None  # the data's device
        params = {key: p.data(ctx) for key, p in self._reg_params.items()}
        return self.hybrid_forward(ndarray, x, *args, **params)

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **params: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define hybrid_forward("
                                  f"self, F, x, ...) or forward(self, x)")

    # -- deferred initialisation -------------------------------------------------------

    def infer_shape(self, *args: Any) -> None:
        """Fill in unknown parameter dimensions from the inputs (layers override this)."""
        unknown = [p.name for p in self._reg_params.values() if p._deferred is not None]
        raise DeferredInitializationError(
            f"{type(self).__name__} {self.name!r} cannot infer the shapes of {unknown}: "
            f"give their full shapes when creating them, or define infer_shape(self, x)")

    def _finish_deferred_init(self, *args: Any) -> None:
        if any(p._deferred is not None for p in self._reg_params.values()):
            self.infer_shape(*args)
            for param in self._reg_params.values():
                param.finish_deferred_init()

    # -- tracing -------------------------------------------------------------------------

    def _trace_call(self, *args: Any) -> Any:
        """Run the block on Symbols: record its operators under its name scope.

        Deferred parameters are sized only when the input shapes are known (always under
        ``hybridize()``); ``net(sym.var('data'))`` leaves them deferred, as MXNet does.
        """
        if all(value.aval is not None for arg in args if isinstance(arg, symbol.Symbol)
               for value in arg._outputs):
            self._finish_deferred_init(*args)
        with self.name_scope():
            if type(self).forward is not HybridBlock.forward:  # the F-less tracing style
                return self.forward(*args)
            params = {key: p.var() for key, p in self._reg_params.items()}
            return self.hybrid_forward(symbol, *args, **params)

    def _trace(self, args: Sequence[Any]) -> _Trace:
        """Trace ``hybrid_forward`` once with Symbol inputs (``args``: arrays or avals)."""
        structure = self._structure or (False,) * len(args)
        structure += (True,) * (self._given - len(structure))  # trailing Nones, given
        _check_input_count(self, len(structure) if self._nesting is None else len(self._nesting))
        names = ["data"] if len(args) == 1 else [f"data{i}" for i in range(len(args))]
        inputs = [symbol.traced_input(n, a.shape, a.dtype) for n, a in zip(names, args)]
        given = iter(inputs)
        frame = _trace.TraceFrame(self, _report.HybridizationReport(self.name),
                                  static_shape=self._flags["static_shape"])
        leaves = [None if none else next(given) for none in structure]
        if self._nesting is not None and not _is_flat(self._nesting):
            leaves = _regroup(leaves, self._nesting)
        with _trace.tracing(frame):
            out = self._trace_call(*leaves)
        outputs, out_format = _flatten(out)
        for value in outputs:
            if not isinstance(value, symbol.Symbol):
                raise TraceOutputError(
                    f"in block {self.name!r}: {type(self).__name__}.hybrid_forward returned "
                    f"{type(value).__name__} {value!r} while traced; a compiled program "
                    f"returns only F.* results. Fix: return Symbols computed with F.* (one, or "
                    f"a tuple), e.g. F.ones_like(x) * 3.0 for a constant")
        if frame.report and str(frame.report) != str(self._report):  # each new finding once
            warnings.warn(str(frame.report), stacklevel=6)
        self._report = frame.report
        data = [value._outputs[0].node for value in inputs]
        if not outputs:
            raise TraceOutputError(
                f"in block {self.name!r}: {type(self).__name__}.hybrid_forward returned no "
                f"Symbol ({out!r}); a compiled program needs at least one output")
        return self._compile(outputs, data, frame.aux_updates, out_format)

    def _compile(self, outputs: list, data: list, aux_updates: list, out_format: Any) -> _Trace:
        """The traced outputs (plus running-stat updates) as what the CachedOp compiles:
        the data inputs first, then every parameter the graph reads (the feed)."""
        from hybridlab.graph import ir
        from hybridlab.graph.cached_op import Traced
        everything = outputs + [new for _, new in aux_updates]
        graph = (everything[0] if len(everything) == 1 else symbol.Group(everything)).to_graph()
        names = {node.name for node in data}
        params = self.collect_params()
        read = [node for node in graph.inputs if node.name not in names]
        feed = [params[node.name] for node in read]
        present = {id(node) for node in graph.nodes}  # an input the outputs never read
        unread = tuple(node for node in data if id(node) not in present)  # is still one
        graph = ir.Graph(unread + graph.nodes, tuple(data) + tuple(read), graph.outputs)
        writes = tuple(feed.index(param) for param, _ in aux_updates)
        regroup = None if out_format is None else functools.partial(_regroup,
                                                                    structure=out_format)
        traced = Traced(graph, (), writes, regroup)
        return _Trace(outputs, traced, feed)

    def _traced(self, training: bool, avals: list[Any], ctx: Any = None) -> Any:
        """What the CachedOp compiles for a call in this mode: a trace, made on the first
        call of each mode (and, under static_shape, of each input shape), fed with the
        parameters' copies on ``ctx`` (the block's first device when None)."""
        if not any(self._structure or ()) and self._given <= len(avals) and \
                _is_flat(self._nesting or ()):
            _check_input_count(self, len(avals))  # the count error first, in the block's terms
        if self._structure is None:
            self._structure = (False,) * len(avals)
        self._check_structure(tuple(self._structure) if len(avals) == self._structure.count(
            False) else (False,) * len(avals))
        key: tuple = (training, len(avals))
        if self._flags["static_shape"]:
            key += tuple([(a.shape, a.dtype) for a in avals])
        trace = self._traces.get(key)
        if trace is None:
            with _TRACE_LOCK:  # threads making the first call at once: one traces
                trace = self._traces.get(key)
                if trace is None:
                    trace = self._trace(avals)
                    trace.in_avals = [(a.shape, a.dtype) for a in avals]
                    self._traces[key] = trace
        return trace.fed(self._op_ctx if ctx is None else ctx)

    def export(self, path: str, epoch: int = 0) -> None:
        """Write ``path-symbol.json`` and ``path-%04d.params`` (``arg:``/``aux:`` keys).
        Epochs share the JSON, as in MXNet: each epoch's .params loads with it as long as
        the graph is the same (NOTE [Export pair] in model_files.py)."""
        if not self._traces:
            raise RuntimeError(f"{self.name!r}: call hybridize() and run the block once "
                               f"(net(x)) before export(), so there is a graph to save")
        predict = [t for key, t in self._traces.items() if key[0] is False]
        if predict:
            trace = predict[0]
        else:  # only trained so far: deployment needs the prediction graph (BatchNorm!)
            avals = next(iter(self._traces.values())).in_avals
            with autograd.predict_mode():
                trace = self._trace([ndarray.zeros(s, dtype=d) for s, d in avals])
        graph = trace.exported_symbol()
        params, arrays = self.collect_params(), {}
        for name in graph.list_arguments():
            if name in params:
                arrays[f"arg:{name}"] = params[name]._reduce()
        for name in graph.list_auxiliary_states():
            arrays[f"aux:{name}"] = params[name]._reduce()
        model_files.write_export_pair(f"{path}-symbol.json", graph.to_graph(),
                                      f"{path}-{epoch:04d}.params", arrays, epoch)


class _Trace:
    """One trace of a block: its output Symbols and what its CachedOp compiles from it."""

    def __init__(self, outputs: list, traced: Any, feed: list) -> None:
        self.outputs, self.traced, self.feed = outputs, traced, feed
        self.in_avals: list = []  # the traced inputs' (shape, dtype), set by _traced
        self._by_device: dict[Any, Any] = {}

    def fed(self, ctx: Any) -> Any:
        """``traced`` fed with the parameters' copies on ``ctx`` (one Traced per device)."""
        if ctx not in self._by_device:
            arrays = tuple(p.data(ctx) for p in self.feed)
            self._by_device[ctx] = dataclasses.replace(self.traced, feed=arrays)
        return self._by_device[ctx]

    def exported_symbol(self) -> Any:
        """The user-visible outputs only (running-stat updates are a training detail)."""
        return self.outputs[0] if len(self.outputs) == 1 else symbol.Group(self.outputs)

