"""Symbols: building a graph instead of computing values (MXNet's ``mx.sym``).

What this module teaches
------------------------
An NDArray operation computes at once; a Symbol operation only *records* what would be
computed. ``sym.relu(sym.var('data'))`` makes a graph node and returns a handle to its
output. A whole program written this way is a graph that can be inspected
(``list_arguments``, ``infer_shape``), optimised by the compiler, saved as JSON and run
many times (``eval``, ``bind``) -- the symbolic half of "hybrid" programming::

    >>> import hybridlab as mx
    >>> x = mx.sym.var('data')
    >>> fc = mx.sym.FullyConnected(data=x, num_hidden=10, name='fc1')
    >>> out = mx.sym.relu(fc)
    >>> fc.list_arguments()            # weight and bias were created for us
    ['data', 'fc1_weight', 'fc1_bias']
    >>> out                            # an automatic name from mx.name.NameManager
    <Symbol relu0>

A Symbol is a thin handle over the compiler's IR (:mod:`hybridlab.graph.ir`): it holds
the :class:`~hybridlab.graph.ir.Value` s it stands for, nothing else. ``sym.*`` and the
arithmetic dunders are generated from the operator registry by the same loop that makes
``nd.*``, so ``F.relu`` means the same thing whether ``F`` is ``nd`` or ``sym``.

Differences from MXNet, on purpose
----------------------------------
* (Kept as in MXNet, although a wart: ``+ - * /`` on Symbols are the elementwise
  operators, two inputs of one shape, while NDArray's broadcast; ``F.broadcast_add``
  broadcasts. The compiler's own Symbols, which gradient rules use, broadcast.)
* Inside a traced ``hybrid_forward``, ``x[0]`` on a one-output Symbol raises
  :class:`~hybridlab.errors.SymbolIndexError` instead of silently meaning "output 0" (an
  array was meant); outside a trace it means output 0, as in MXNet, and ``len(x)``
  counts outputs. Indexing a *grouped* symbol works everywhere.
* Every node remembers the user line that created it, and shape errors quote it.

Invariants
----------
* A Symbol never changes after it is made; operations return new Symbols.
* Argument order (``list_arguments``) is MXNet's: depth-first, inputs in order.
* Loading JSON never executes anything: it is parsed with :mod:`json` and every node
  is checked against the registry before a graph is built (see ``load_json``).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import itertools
import sys
import threading
import warnings
from typing import Any, Iterator, Sequence

import numpy as np

from hybridlab import attribute, autograd, display, errors, executor, model_files, util
from hybridlab import name as _name
from hybridlab.executor import Executor
from hybridlab.graph import frontend, ir, shapes
from hybridlab.graph.ir import Graph, Node, Value
from hybridlab.ops import registry
from hybridlab.ops.registry import Aval

PARAMETER_INPUTS = model_files.PARAMETER_INPUTS  # NOTE [Parameter inputs] in model_files
AUXILIARY_INPUTS = model_files.AUXILIARY_INPUTS

_STATE = threading.local()
Report = tuple[list[Any], list[Any], list[Any]]  # infer_*_partial: arguments, outputs, aux
Known = tuple[list[Any] | None, list[Any] | None, list[Any] | None]  # infer_*: None, unknown


class Symbol:
    """A handle to one or more outputs of a graph (several: a *grouped* symbol)."""

    __slots__ = ("_outputs", "_graph", "_names")
    __array_ufunc__ = None  # numpy defers to our reflected dunders (``np_array + x``)

    def __init__(self, outputs: Sequence[Value]) -> None:
        self._outputs = tuple(Value(*v) for v in outputs)
        self._graph: Graph | None = None  # caches: a Symbol never changes once made
        self._names: dict[str, list[str]] | None = None

    # -- names and display ---------------------------------------------------------------

    @property
    def name(self) -> str | None:
        """The node's name; None for a grouped symbol (as in MXNet)."""
        return self._outputs[0].node.name if len(self._outputs) == 1 else None

    def __repr__(self) -> str:
        if self.name is None:
            return f"<Symbol group [{', '.join(v.node.name for v in self._outputs)}]>"
        return f"<Symbol {self.name}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Jupyter draws a Symbol as its graph; the text form stays MXNet's ``<Symbol x>``
        (followed by the one-line install hint when graphviz is missing)."""
        return display.mimebundle(self, text=repr(self))  # viz fills the hook

    def to_graph(self) -> Graph:
        """The compiler's view: a :class:`~hybridlab.graph.ir.Graph` of this symbol."""
        if self._graph is None:
            self._graph = Graph.from_outputs(self._outputs)
        return self._graph

    graph = property(to_graph)

    # -- listing ----------------------------------------------------------------------------

    def list_inputs(self) -> list[str]:
        """Every variable, arguments and auxiliary states, in graph order."""
        return list(self._listing()["inputs"])

    def list_arguments(self) -> list[str]:
        """The variables that are not auxiliary states: data and learnable parameters."""
        return list(self._listing()["arguments"])

    def list_auxiliary_states(self) -> list[str]:
        """Variables the graph updates itself (BatchNorm's running mean and variance)."""
        return list(self._listing()["auxiliary"])

    def list_outputs(self) -> list[str]:
        """``<name>_output`` per output (``<name>_output<i>`` for multi-output ops)."""
        return [model_files.output_name(value) for value in self._outputs]

    def get_internals(self) -> Symbol:
        """A grouped symbol of every output of every node (index it by output name)."""
        graph = self.to_graph()
        return Symbol([n.out(i) for n in graph.nodes for i in range(n.num_outputs)])

    def get_children(self) -> Symbol | None:
        """The inputs of this symbol's (first) node, grouped; None for a variable (MXNet)."""
        node = self._outputs[0].node
        return Symbol(node.inputs) if node.kind == "call" and node.inputs else None

    def __call__(self, *args: Symbol, name: str | None = None, **kwargs: Symbol) -> Symbol:
        """Composition (MXNet's ``net2(fc3_data=net1)``): a copy of this graph with the
        named (or, positionally, the first) arguments replaced by other symbols."""
        given = dict(zip(self.list_arguments(), args), **kwargs)
        unknown = sorted(set(given) - set(self.list_inputs()))
        if unknown or len(args) > len(self.list_arguments()):
            raise ValueError(f"compose: {unknown or args} are not arguments of {self!r}; "
                             f"its arguments are {self.list_arguments()}")
        values = {key: _input_value(registry.get("_copy"), "compose", key, symbol, {})
                  for key, symbol in given.items()}

        def visit(node: Node, inputs: tuple[Value, ...]) -> Node | Sequence[Value]:
            if node.kind == "var" and node.name in values:
                return [values[node.name]]
            return ir.with_inputs(node, inputs)

        composed = Symbol(ir.rebuild(self.to_graph(), visit).outputs)
        return _renamed(composed, name, "compose") if name else composed

    def _variables(self) -> list[Node]:
        return [node for node in self.to_graph().nodes if node.kind == "var"]

    def _listing(self) -> dict[str, list[str]]:
        """The name lists, computed once (Gluon asks ``list_inputs`` on every call)."""
        if self._names is None:
            names = model_files.names(self.to_graph())
            self._names = {"inputs": names.inputs, "arguments": names.arguments,
                           "auxiliary": names.auxiliary}
        return self._names

    # -- grouped symbols ---------------------------------------------------------------

    def __getitem__(self, index: int | str) -> Symbol:
        if isinstance(index, str):
            names = self.list_outputs()
            if index not in names:
                raise ValueError(f"{self!r} has no output {index!r}; outputs are {names}")
            return Symbol([self._outputs[names.index(index)]])
        count = len(self._outputs)
        if not isinstance(index, (int, np.integer)) or (count == 1 and _tracing()
                                                         and index not in (0, -1)):
            raise errors.SymbolIndexError(_index_message(self, index))
        if count == 1 and _tracing():  # MXNet's output 0: the Symbol itself, not a row
            warnings.warn(f"x[{index}] on {self!r}{_where(self)} is the Symbol itself (its "
                          f"only output, as in MXNet), not its row {index} as on an NDArray: "
                          f"hybridized, the block computes something else. For a row, write "
                          f"F.slice_axis(x, axis=0, begin=0, end=1)", stacklevel=2)
            return self
        if not -count <= index < count:
            raise IndexError(f"{self!r} has {count} outputs, so index {index} is out of "
                             f"range; pick 0..{count - 1} or an output name "
                             f"{self.list_outputs()}")
        return Symbol([self._outputs[index]])

    def __len__(self) -> int:
        if len(self._outputs) == 1 and _tracing():
            raise errors.SymbolIndexError(_index_message(self, "len"))
        return len(self._outputs)

    def __iter__(self) -> Iterator[Symbol]:
        return (self[i] for i in range(len(self)))

    # -- attributes ------------------------------------------------------------------------

    def attr(self, key: str) -> str | None:
        """One attribute of this node as MXNet's string form, or None."""
        return self.list_attr().get(key)

    def list_attr(self) -> dict[str, str]:
        """This node's attributes as strings (``{'num_hidden': '10'}``, ``{'__shape__': ...}``)."""
        if self.name is None:
            return {}
        return _attr_texts(self._outputs[0].node)

    def attr_dict(self) -> dict[str, dict[str, str]]:
        """Every node's attributes by node name (nodes without attributes are left out)."""
        return {node.name: _attr_texts(node) for node in self.to_graph().nodes
                if node.attrs or node.notes}

    def debug_str(self) -> str:
        """The graph in the compiler's printed SSA form (MXNet printed its own dump here)."""
        return str(self.to_graph())

    # -- shapes and types -----------------------------------------------------------------

    def infer_shape(self, *args: Any, **kwargs: Any
                    ) -> Known:
        """``(arg_shapes, out_shapes, aux_shapes)`` from some input shapes, inferred both
        ways (``graph.shapes``); all three None while any is incomplete (MXNet's answer:
        ``infer_shape_partial`` says what is known)."""
        found = self._report(self._inferred(self._given(args, kwargs), {}),
                             lambda aval: aval.shape)
        if any(shape is None or 0 in shape for shapes in found for shape in shapes):
            return None, None, None
        return found

    def infer_shape_partial(self, *args: Any, **kwargs: Any) -> Report:
        """Like ``infer_shape``, but a size not known is 0 (-1 in numpy-shape mode) and a
        shape of unknown rank is ``()`` (None in numpy-shape mode), as MXNet answers."""
        found = self._report(self._inferred(self._given(args, kwargs), {}),
                             lambda aval: aval.shape)
        unknown, nothing = (-1, None) if util.is_np_shape() else (0, ())
        return tuple([nothing if s is None else tuple(d or unknown for d in s) for s in shapes]
                     for shapes in found)  # type: ignore[return-value]  # (a 3-tuple)

    def infer_type(self, *args: Any, **kwargs: Any
                   ) -> Known:
        """``(arg_types, out_types, aux_types)`` as numpy dtypes; unknown: None."""
        dtypes = {k: np.dtype(v) for k, v in self._given(args, kwargs).items()}
        return self._report(self._inferred({}, dtypes), lambda aval: np.dtype(aval.dtype).type)

    def infer_type_partial(self, *args: Any, **kwargs: Any) -> Report:
        """Like ``infer_type``, but a type nothing decides is None (``graph.shapes``:
        types flow through an operator both ways, but not through a Cast)."""
        arg, out, aux = self.infer_type(*args, **kwargs)
        undecided, decided = shapes.undecided_types(self.to_graph(),
                                                    set(self._given(args, kwargs)))
        names = self.list_arguments()
        return ([None if n in undecided else t for n, t in zip(names, arg or [None] * len(names))],
                [t if known else None for known, t in zip(decided, out or [])], aux or [])

    def _inferred(self, given: dict[str, Any], dtypes: dict[str, np.dtype]) -> shapes.Inferred:
        if util.is_np_shape():  # numpy-shape mode spells an unknown size -1
            given = {k: tuple(0 if d == -1 else d for d in v) for k, v in given.items()}
        return shapes.infer_partial(self.to_graph(), given, dtypes)

    def _given(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        names = self.list_arguments()
        if len(args) > len(names):
            raise TypeError(f"{self!r} has {len(names)} arguments {names}, got {len(args)}")
        given = {n: v for n, v in zip(names, args) if v is not None}
        unknown = sorted(set(kwargs) - set(self.list_inputs()))
        if unknown:
            raise ValueError(f"{unknown} are not inputs of {self!r}; its inputs are "
                             f"{self.list_inputs()}")
        return {**given, **{k: v for k, v in kwargs.items() if v is not None}}

    def _report(self, inferred: shapes.Inferred, field: Any) -> Report:
        variables: dict[str, list[Node]] = {}  # by name, in graph order (names may repeat)
        for node in self._variables():
            variables.setdefault(node.name, []).append(node)

        def pick(value: Value) -> Any:
            aval = inferred.aval(value)
            return None if aval is None else field(aval)

        def named(names: list[str]) -> list[Any]:
            taken: dict[str, int] = {}
            return [pick(variables[n][_next(taken, n)].out()) for n in names]

        return (named(self.list_arguments()), [pick(value) for value in self._outputs],
                named(self.list_auxiliary_states()))

    def _static_shape(self) -> tuple[int, ...]:
        """The shape recorded in the trace (Gluon layers use it to size parameters)."""
        aval = self._outputs[0].aval
        if aval is None:
            raise errors.SymbolShapeError(_shape_message(self, "shape"))
        return aval.shape

    @property
    def shape(self) -> tuple[int, ...]:
        """Only under ``with symbol.static_shapes():`` (Gluon's ``static_shape=True``)."""
        if getattr(_STATE, "static", False):
            return self._static_shape()
        raise errors.SymbolShapeError(_shape_message(self, "shape"))

    # -- saving -------------------------------------------------------------------------

    def tojson(self, file_attrs: dict[str, str] | None = None) -> str:
        """The graph in MXNet's JSON layout (attributes as strings); see ``load_json``.
        ``file_attrs``: more string entries for the top-level ``attrs`` (export's digest of
        its parameters; MXNet 1.9.1 reads and ignores them)."""
        return model_files.to_json(self.to_graph(), file_attrs)

    def save(self, fname: str) -> None:
        """Write ``tojson()`` to ``fname`` (``sym.load(fname)`` reads it back): the JSON is
        made first, then written atomically (a failure leaves an existing file as it was)."""
        from hybridlab.ndarray_io import atomic_write

        atomic_write(fname, self.tojson())

    # -- running ------------------------------------------------------------------------

    def eval(self, ctx: Any = None, **kwargs: Any) -> list[Any]:
        """Run the graph once on NDArrays given by name; returns one NDArray per output."""
        aux = {k: v for k, v in kwargs.items() if k in self._listing()["auxiliary"]}
        args = {k: v for k, v in kwargs.items() if k not in aux}
        return self.bind(ctx, args, aux_states=aux).forward()

    def bind(self, ctx: Any, args: Any, args_grad: Any = None, grad_req: Any = "write",
             aux_states: Any = None) -> Executor:
        """An :class:`~hybridlab.executor.Executor` holding the arrays (a list in
        ``list_arguments`` order, or a dict)."""
        return Executor(self.to_graph(), args, args_grad, grad_req, aux_states, ctx)

    def simple_bind(self, ctx: Any = None, grad_req: Any = "write", type_dict: Any = None,
                    stype_dict: Any = None, group2ctx: Any = None, shared_arg_names: Any = None,
                    shared_exec: Any = None, shared_buffer: Any = None, **shapes: Any
                    ) -> Executor:
        """Bind zeros of the shapes inferred from the input shapes given by name (MXNet's
        ``simple_bind``); gradient arrays too, for every argument whose grad_req is not
        'null'. The arguments after ``type_dict`` exist for MXNet's signature only."""
        from hybridlab import ndarray
        shapes = {k: v for k, v in shapes.items() if isinstance(v, (tuple, list))}  # as MXNet
        arg_shapes, _, aux_shapes = self.infer_shape(**shapes)
        arg_types, _, aux_types = self.infer_type(**(type_dict or {}))
        names, aux_names = self.list_arguments(), self.list_auxiliary_states()
        if arg_shapes is None or aux_shapes is None:
            known = self.infer_shape_partial(**shapes)
            unknown = [n for n, s in zip(names + aux_names, known[0] + known[2])
                       if not s or 0 in s]
            raise errors.ShapeError(f"simple_bind: cannot infer the shapes of {unknown} from "
                                    f"{shapes}; give more input shapes, e.g. data=(batch, 10)")
        arg_types = arg_types or [np.float32] * len(names)
        aux_types = aux_types or [np.float32] * len(aux_names)
        args = {n: ndarray.from_numpy(np.zeros(s, t or np.float32))
                for n, s, t in zip(names, arg_shapes, arg_types)}
        aux = {n: ndarray.from_numpy(np.zeros(s, t or np.float32))
               for n, s, t in zip(aux_names, aux_shapes, aux_types)}
        reqs = executor.grad_reqs(names, grad_req)
        grads = {n: ndarray.from_numpy(np.zeros(a.shape, a.dtype)) for n, a in args.items()
                 if reqs[n] != "null"}
        return Executor(self.to_graph(), args, grads, reqs, aux, ctx)

    # -- what a symbolic program cannot do (teaching errors) ----------------------------

    def __bool__(self) -> bool:
        raise errors.SymbolBoolError(
            f"`if`/`while`/`bool()`/`and`/`or` on {self!r}{_where(self)}: a Symbol has no "
            f"value while the graph is built, so Python cannot choose a branch. Fix: compute "
            f"both sides and pick with F.where(cond, a, b)")

    def asnumpy(self) -> np.ndarray:
        raise errors.SymbolValueError(errors.value_message("asnumpy()", _described(self)))

    def asscalar(self) -> Any:
        raise errors.SymbolValueError(errors.value_message("asscalar()", _described(self)))

    def wait_to_read(self) -> None:
        raise errors.SymbolValueError(errors.value_message("wait_to_read()", _described(self)))

    def __float__(self) -> float:
        raise errors.SymbolNumberError(errors.value_message("float(x)", _described(self)))

    def __int__(self) -> int:
        raise errors.SymbolNumberError(errors.value_message("int(x)", _described(self)))

    __index__ = __int__  # range(x), list[x]

    def __setitem__(self, index: Any, value: Any) -> None:
        raise errors.SymbolInplaceError(_inplace_message(self, "x[...] = y"))

    def __neg__(self) -> Symbol:
        return self * -1.0  # type: ignore[operator,return-value]  # (the dunders are installed by the registry)

    def __abs__(self) -> Symbol:
        return globals()["abs"](self)  # type: ignore[no-any-return]  # the generated sym.abs (see NOTE: [Shadowed builtins])

    def astype(self, dtype: Any) -> Symbol:
        """``Cast`` to ``dtype``, as ``NDArray.astype``."""
        return globals()["Cast"](self, dtype=dtype)  # type: ignore[no-any-return]  # (populate)


def _inplace_method(spelling: str) -> Any:
    def method(self: Symbol, other: Any) -> Symbol:
        raise errors.SymbolInplaceError(_inplace_message(self, f"x {spelling} y"))
    return method


def _valueless_property(what: str) -> property:
    def getter(self: Symbol) -> Any:
        raise errors.SymbolShapeError(_shape_message(self, what))
    return property(getter, doc=f"A Symbol has no {what}: reading it raises SymbolShapeError.")


for _dunder, _spelling in (("__iadd__", "+="), ("__isub__", "-="), ("__imul__", "*="),
                           ("__itruediv__", "/=")):
    setattr(Symbol, _dunder, _inplace_method(_spelling))
for _what in ("dtype", "context", "size", "ndim"):
    setattr(Symbol, _what, _valueless_property(_what))


@contextlib.contextmanager
def traced() -> Iterator[None]:
    """Mark this thread as tracing a block (Gluon enters it): there, ``x[0]`` and ``len(x)``
    on a one-output Symbol are the classic mistake (an array was meant) and raise
    :class:`~hybridlab.errors.SymbolIndexError`; outside a trace they mean what MXNet
    says -- output 0, and the number of outputs."""
    _STATE.tracing = getattr(_STATE, "tracing", 0) + 1
    try:
        yield
    finally:
        _STATE.tracing -= 1


def _tracing() -> bool:
    return getattr(_STATE, "tracing", 0) > 0


@contextlib.contextmanager
def static_shapes() -> Iterator[None]:
    """Let ``Symbol.shape`` answer from the traced shapes (``hybridize(static_shape=True)``)."""
    saved = getattr(_STATE, "static", False)
    _STATE.static = True
    try:
        yield
    finally:
        _STATE.static = saved


def _described(symbol: Symbol) -> str:
    return f"{symbol!r}{_where(symbol)}"


def _where(symbol: Symbol) -> str:
    """Where the misused Symbol was made -- unless it is an input (``data``, a parameter):
    a block makes those for its trace at the caller's ``net(x)`` line, which tells the
    reader nothing the error's own "at <line>" does not."""
    node = symbol._outputs[0].node
    return f" (created at {node.origin})" if node.origin and node.kind != "var" else ""


def _inplace_message(symbol: Symbol, spelling: str) -> str:
    return (f"`{spelling}` on {symbol!r}{_where(symbol)}: a Symbol is a graph node, not a "
            f"buffer, so there is nothing to overwrite. Fix: x = x + y, or F.where(mask, y, x)")


def _shape_message(symbol: Symbol, what: str) -> str:
    return errors.attribute_message(what, _described(symbol))


def _next(counts: dict[str, int], name: str) -> int:
    """0, 1, 2, ... on each call with ``name``: the how-many-th ``name`` this is."""
    counts[name] = counts.get(name, -1) + 1
    return counts[name]


def _attr_texts(node: Node) -> dict[str, str]:
    """A node's parameters and notes as strings, hidden keys both ways (MXNet's listing)."""
    return _with_hidden_keys({**{key: ir.attr_text(value) for key, value in node.attrs},
                              **dict(node.notes)})


def _with_hidden_keys(attrs: dict[str, str]) -> dict[str, str]:
    """MXNet lists a hidden key both ways: ``__lr_mult__`` and ``lr_mult``."""
    return {**attrs, **{key: attrs[f"__{key}__"] for key in attribute.HIDDEN_KEYS
                        if f"__{key}__" in attrs}}


def _index_message(symbol: Symbol, index: Any) -> str:
    if isinstance(index, str):  # "len": len(x) or iterating
        what, meaning, fix = "len(x)", "the number of outputs", _index_fix(0)
    else:
        key = _key_text(index)
        what, meaning, fix = f"x[{key}]", f"output(s) {key} of a grouped symbol", _index_fix(index)
    return (f"{what} on {symbol!r}{_where(symbol)}: a Symbol is not an array. MXNet read this "
            f"as {meaning}, which differs from the NDArray meaning. "
            f"Fix: {fix}, F.take or F.split; group outputs "
            f"with sym.Group([...]) before indexing them")


def _key_text(key: Any) -> str:
    """An index as the user wrote it: ``:, 0``, not ``(slice(None, None, None), 0)``.
    (``builtins.slice``: this module's ``slice`` is the registry operator.)"""
    if isinstance(key, tuple):
        return ", ".join(map(_key_text, key)) if key else "()"
    if isinstance(key, builtins.slice):
        start, stop, step = ("" if v is None else repr(v) for v in (key.start, key.stop, key.step))
        return f"{start}:{stop}" + (f":{step}" if step else "")
    return "..." if key is Ellipsis else repr(key)


def _index_fix(key: Any) -> str:
    """``F.slice_axis`` on the first axis the key does not take whole (``x[:, 0]``: axis 1;
    after ``...`` axes count from the end: ``x[..., 0]``: axis -1)."""
    parts = key if isinstance(key, tuple) else (key,)
    for position, part in enumerate(parts):
        if part is Ellipsis or (isinstance(part, builtins.slice) and part == builtins.slice(None)):
            continue
        axis = position - len(parts) if any(p is Ellipsis for p in parts[:position]) else position
        if isinstance(part, (int, np.integer)) and not isinstance(part, bool):
            end = None if part == -1 else part + 1
            return f"F.slice_axis(x, axis={axis}, begin={part}, end={end})"
        if isinstance(part, builtins.slice) and part.step in (None, 1):
            return f"F.slice_axis(x, axis={axis}, begin={part.start or 0}, end={part.stop})"
        if part is None:
            return f"F.expand_dims(x, axis={axis})"
        if isinstance(part, builtins.slice):
            return f"F.slice(x, begin=..., end=..., step=...) with the step on axis {axis}"
        return f"F.take(x, indices, axis={axis})"
    return "F.identity(x)"


# ---------------------------------------------------------------------------------------
# Building symbols: var, Group, and the one ``apply`` the registry calls
# ---------------------------------------------------------------------------------------

def traced_input(name: str, shape: tuple[int, ...], dtype: Any) -> Symbol:
    """An input of a traced block: its shape is the real array's, so a 0 is a size (an
    empty batch), not MXNet's "unknown" as in ``sym.var(shape=...)``."""
    symbol = var(name, shape=shape, dtype=dtype)
    node = symbol._outputs[0].node
    return Symbol([dataclasses.replace(node, aval=(Aval(tuple(shape), np.dtype(dtype)),))
                   .out()])


def var(name: str, shape: Any = None, dtype: Any = None, init: Any = None,
        attr: dict[str, str] | None = None, lr_mult: float | None = None,
        wd_mult: float | None = None, **kwargs: Any) -> Symbol:
    """A named input of the graph (data or a parameter). Extra keywords: ``__name__=``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"sym.var needs a non-empty string name, got {name!r}")
    attrs = {attribute.stored_key(key): str(value)
             for key, value in attribute.AttrScope.current.get(attr).items()}
    for key, value in kwargs.items():
        if not (key.startswith("__") and key.endswith("__")):
            raise ValueError(f"sym.var: attribute {key!r} is not supported; extra attributes "
                             f"are spelled with double underscores, e.g. __{key}__={value!r}")
        attrs[key] = str(value)
    shape = None if shape is None else _as_shape(shape, f"sym.var({name!r})")
    extra = {"__shape__": shape, "__dtype__": dtype, "__init__": init,
             "__lr_mult__": lr_mult, "__wd_mult__": wd_mult}
    for key, value in extra.items():
        if value is not None:
            attrs[key] = _var_attr_text(key, value)
    aval = None
    if shape is not None and all(d > 0 for d in shape):
        aval = (Aval(shape, np.dtype(dtype or "float32")),)
    node = Node("var", name=name, attrs=tuple(sorted(attrs.items())), aval=aval,
                origin=ir.user_origin())
    return Symbol([node.out()])


Variable = var


def _as_shape(shape: Any, where: str) -> tuple[int, ...]:
    """A shape given by a user: ints >= 0, where 0 means "not known yet" (MXNet's rule)."""
    try:
        parsed = shapes.parse_shape(shape)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where}: shape must be a tuple of ints such as (2, 3), got "
                        f"{shape!r} ({err})") from None
    if util.is_np_shape():  # numpy-shape mode: -1 is "not known yet" (0 an empty axis)
        parsed = tuple(0 if d == -1 else d for d in parsed)
    if any(d < 0 for d in parsed):
        raise ValueError(f"{where}: shape {parsed} has a negative size; use 0 for a size "
                         f"that is not known yet (MXNet's convention), e.g. (0, 3)")
    return parsed


def _var_attr_text(key: str, value: Any) -> str:
    if key == "__shape__":
        return str(value)
    if key == "__dtype__":
        return str(np.dtype(value).name)
    if key == "__init__" and hasattr(value, "dumps"):
        return str(value.dumps())  # an Initializer describes itself as JSON, as in MXNet
    return str(value)


def Group(symbols: Sequence[Symbol]) -> Symbol:  # noqa: N802 -- MXNet's name
    """One symbol with the outputs of all ``symbols`` (``g[0]``, ``g['fc1_output']``)."""
    outputs = [value for s in symbols for value in _check_symbol(s, "Group")._outputs]
    if not outputs:
        raise ValueError("sym.Group needs at least one symbol")
    return Symbol(outputs)


def _check_symbol(value: Any, where: str) -> Symbol:
    if isinstance(value, Symbol):
        return value
    if hasattr(value, "asnumpy"):
        raise errors.ArrayInTraceError(
            f"{where}: got an NDArray where a Symbol is needed. A symbolic graph cannot hold "
            f"an array made outside it. Fix: F.ones/F.zeros/F.full for constants, or a "
            f"parameter (self.params.get(..., grad_req='null')) for fixed arrays")
    raise TypeError(f"{where}: expected a Symbol, got {type(value).__name__} {value!r}")


def _apply(op: registry.OpDef, inputs: list[Any], attrs: dict[str, Any], name: str | None, hint: str
           ) -> Symbol:
    """The registry's hook for ``sym``: add one call node, return its outputs."""
    notes = attribute.operator_notes({key: attrs.pop(key) for key in list(attrs)
                                      if attribute.is_note(key)})
    parsed = op.parse_attrs(attrs)
    node_name = _name.NameManager.current.get(name, hint)
    names = op.input_names(parsed)
    if names and names[0].startswith("*"):
        names = tuple(f"{names[0][1:]}{i}" for i in range(len(inputs)))
    values = [_input_value(op, node_name, input_name, given, notes)
              for input_name, given in zip(names, inputs)]
    node = ir.call(op.name, values, parsed, name=node_name, origin=ir.user_origin(),
                   parsed=True, notes=notes)
    kind = _GraphSymbol if any(type(x) is _GraphSymbol for x in inputs) else Symbol
    return kind([node.out(i) for i in range(op.output_count(parsed))])


def _foreign_operand(symbol: Symbol, other: Any, dunder: str) -> None:
    """``x + nd.ones((1, 1))`` inside ``hybrid_forward``: an array cannot join a graph."""
    if hasattr(other, "asnumpy") or isinstance(other, np.ndarray):
        raise errors.ArrayInTraceError(
            f"{dunder} of {symbol!r}{_where(symbol)} and an array "
            f"({type(other).__name__} of shape {getattr(other, 'shape', '?')}): a symbolic "
            f"graph cannot hold an array made outside it. Fix: build the constant with F "
            f"(F.ones((1, 1)), F.full(shape, value), F.zeros_like(x)), or make it a "
            f"parameter (self.params.get(..., grad_req='null'))")


def _compose(run: Any, hint: str, name: str | None, notes: dict[str, Any]) -> Symbol:
    """A composite as one named node: ``sym.Activation(x)`` is ``activation0`` as in MXNet.

    Its helper nodes are named under ``<name>_`` with fresh counters (``softmax0_exp0``),
    so they neither take the user's ``exp0`` nor depend on what was built before.
    """
    final = _name.NameManager.current.get(name, hint)
    with _name.Prefix(f"{final}_"), attribute.AttrScope(**attribute.operator_notes(notes)):
        result = run()
    return _renamed(result, final, "composite")


def _renamed(result: Any, name: str, where: str) -> Symbol:
    """``result`` with its one output node called ``name`` (the node was just built)."""
    if not (isinstance(result, Symbol) and len(result._outputs) == 1
            and result._outputs[0].index == 0 and result._outputs[0].node.kind == "call"):
        raise TypeError(f"{where} must give one Symbol made by an operator, got {result!r}")
    return Symbol([dataclasses.replace(result._outputs[0].node, name=name).out()])


# The first values an operator gives the variables it makes (MXNet's FSetInputVarAttrOnCompose)
_INPUT_INITS = {("LeakyReLU", "gamma"): '["Constant", {"value": 0.25}]'}


def _input_value(op: registry.OpDef, node_name: str, input_name: str, given: Any,
                 notes: dict[str, str]) -> Value:
    if given is None:  # MXNet makes every missing input a variable: fc3_data, fc3_weight,
        # with the operator's own attributes (lr_mult= on a layer reaches its weight)
        extra: dict[str, Any] = {"__aux__": True} if input_name in AUXILIARY_INPUTS else {}
        if (op.name, input_name) in _INPUT_INITS:
            extra["init"] = _INPUT_INITS[op.name, input_name]
        return var(f"{node_name}_{input_name}", attr=notes, **extra)._outputs[0]
    symbol = _check_symbol(given, f"{op.name} {node_name!r} input {input_name!r}")
    if len(symbol._outputs) != 1:
        raise TypeError(f"{op.name} {node_name!r}: input {input_name!r} is the grouped "
                        f"{symbol!r}; pick one output first (g[0] or g['name_output'])")
    return symbol._outputs[0]


# ---------------------------------------------------------------------------------------
# Loading: MXNet JSON (the reader is hybridlab/model_files.py)
# ---------------------------------------------------------------------------------------

def load(fname: str) -> Symbol:
    """Read a symbol saved by ``Symbol.save`` / ``HybridBlock.export`` (or by MXNet)."""
    return Symbol(model_files.read_symbol_file(fname))


def load_json(text: str, source: str = "<json>") -> Symbol:
    """Parse MXNet-layout JSON into a Symbol, every node checked against the registry
    (``model_files.from_json`` says what is refused)."""
    return Symbol(model_files.from_json(text, source))


# Generate the namespace (sym.relu, sym.FullyConnected, ...) and the dunders from the
# registry, with the same loop as nd; then x.relu(), x.reshape(...) as methods.
# NOTE: [Shadowed builtins] this puts sym.sum, sym.min, sym.max, sym.abs, sym.round and
# sym.slice into this module's globals, so code above must not call those builtins.
registry.populate(sys.modules[__name__], _apply, _compose)
registry.install_dunders(Symbol, _apply, _foreign_operand, registry.ELEMENTWISE_DUNDERS)
def _ignoring_inplace(name: str) -> Any:
    function = getattr(sys.modules[__name__], name)

    def method(self: Symbol, *args: Any, inplace: bool = False, **kwargs: Any) -> Any:
        return function(self, *args, **kwargs)  # a Symbol holds no memory to share

    method.__name__, method.__doc__ = name, f"``{name}``; MXNet's ``inplace`` (an NDArray " \
        f"view) asks nothing of a graph, so it is accepted and changes nothing."
    return method


for _spelling in ("squeeze", "expand_dims", "flatten"):  # NDArray's inplace= forms, traced
    setattr(Symbol, _spelling, _ignoring_inplace(_spelling))
registry.install_methods(Symbol, sys.modules[__name__])  # x.relu(): the rule NDArray uses
_internal = sys.modules[__name__]  # MXNet's sym._internal: the ops with a leading _ live here


def _symbol_from_tape(head: Any, nodes: list[Any]) -> Symbol:
    """``autograd.get_symbol``: the tape's nodes (inputs first) as one graph."""
    values: dict[int, Value] = {}  # id(array) -> its value in the graph
    count = itertools.count()

    def value_of(array: Any) -> Value:
        if id(array) not in values:  # an array no recorded op made: a variable
            values[id(array)] = ir.var(f"var{next(count)}").out()
        return values[id(array)]

    for node in nodes:
        if not isinstance(node.op, registry.OpDef):
            raise TypeError(f"autograd.get_symbol: {node.op.name} (an autograd.Function) "
                            f"has no operator to put in a graph")
        inputs = [value_of(x) for x in node.inputs]
        made = ir.call(node.op.name, inputs, node.attrs, f"{node.op.name}{len(values)}",
                       parsed=True)
        values.update((id(out), made.out(i)) for i, out in enumerate(node.outputs))
    return Symbol([value_of(head)])


autograd._TAPE_TO_SYMBOL[:] = [_symbol_from_tape]


class _GraphSymbol(Symbol):
    """The compiler's Symbol: its ``+ - * /`` broadcast, as NDArray's do, because gradient
    rules and lowerings are written once for both (``g * b`` with b broadcast). User code
    never sees it; ``_apply`` keeps the class through every operator it feeds."""


registry.install_dunders(_GraphSymbol, _apply, _foreign_operand)
# The compiler (graph.autodiff) writes gradient nodes with this module as F.
frontend.install(sys.modules[__name__], lambda value: _GraphSymbol([value]),
                 lambda symbol: symbol._outputs[0], Symbol)
