"""The operator registry: every operator hybridlab knows is defined here exactly once.

What this module teaches
------------------------
A deep-learning framework is mostly a table of operators. For each operator we need
to know *how to compute it* (a numpy kernel), *what it produces without computing it*
(a shape and dtype rule, used to give arrays a shape at once and to type-check graphs),
*how to differentiate it* (a vector-Jacobian product written with registry operators,
so the same rule builds the imperative tape's backward and a symbolic backward graph),
and a few facts that passes and plots ask for (``kind``, ``pure``, ``inplace_ok``).

All of that lives in one :class:`OpDef`. The front ends -- ``nd.*``, ``sym.*`` (and
therefore ``F.*`` inside ``hybrid_forward``) and the arithmetic dunders of ``NDArray``
and ``Symbol`` -- are *generated* from the table by :func:`populate` and
:func:`install_dunders`, so the two namespaces can never disagree.

Vocabulary
----------
``aval``      the abstract value of an array: its shape and dtype (:class:`Aval`).
``kernel``    ``kernel(*arrays, **attrs) -> array | tuple of arrays`` on numpy arrays.
              The kernel contract: the result has exactly the shape and dtype ``infer``
              promises (``sqrt`` of int32 is int32), so every front end and the compiled
              programs agree without casting afterwards.
``kernel_out`` optional: ``kernel_out(*arrays, out=buffer, **attrs) -> buffer`` writes the
              same result into a buffer of the promised aval instead of allocating one
              (fused chains compute in one buffer; ``static_alloc`` reuses buffers across
              calls). With ``inplace_ok``, ``out`` may be the first input's own buffer.
              Derived from ``ufunc`` when not given. An op with ``kernel_out`` promises
              that its plain kernel returns a fresh array (never a view of an input), so
              the compiler may later write into that array.
``view``      the kernel returns a view of its first input (a reshape): no new memory;
              the memory plan keeps the input's buffer alive as long as the view.
``workspace`` optional: ``workspace(*avals, **attrs) -> int``, the bytes of scratch the
              kernel (either form) holds at once while it runs, besides its inputs and
              its result -- im2col matrices, padded copies (MXNet's ``kTempSpace``
              resource). The memory plan counts them at the op's step; a test measures
              each declaration against the real kernel with ``tracemalloc``.
``infer``     ``infer(*avals, **attrs) -> list[Aval]``, one per output; raises
              :class:`~hybridlab.errors.ShapeError` (a ``ValueError``) with a message
              naming the op, the shapes and the fix.
``grad``      ``grad(F, inputs, outputs, out_grads, **attrs) -> list``, one entry per
              input (``None`` where the input gets no gradient). ``F`` is a namespace
              made by :func:`populate` (``nd`` on the tape, ``sym`` in a backward graph).
              ``grad=None`` means *no gradient by design*: the outputs are constants for
              autograd (random draws, masks, ``argmax``), unless ``grad_missing`` says
              why a gradient that exists is not written (the second order of
              backward-only ops): ``graph.autodiff`` and the ``autograd`` tape then fail
              loudly, never give zeros.
``infer_params`` optional, for layers with weights: ``infer_params(data_aval, **attrs)
              -> {input name: shape}``, so ``sym.infer_shape(data=...)`` fills the
              parameters' shapes (``fc1_weight``) as MXNet did.
``apply``     what a front end does with an op: ``apply(op, inputs, attrs, hint)``.
              ``nd`` pushes the kernel to the engine; ``sym`` adds a graph node.
``lower``     a *layer operator* (``Activation``, ``softmax``, ``Dropout``, ``BatchNorm``,
              ``elemwise_add``): ``lower(F, *inputs, **attrs)`` writes it with primitive
              operators, and that is its only definition -- no kernel, no gradient
              rule of its own. ``sym`` keeps it as one node (exported JSON and drawings
              show MXNet's operator); the compiler's first pass, ``lower_operators``,
              replaces the node by its lowering; ``nd`` runs the lowering at once.
              With ``needs_context`` the lowering also takes ``training`` (BatchNorm
              uses the batch's statistics while training).
``composite`` an operator written in Python from other operators that MXNet never
              stored as one node (``softrelu``, ``stack``): no kernel, no gradient, and
              every front end runs its function at once.
"""

from __future__ import annotations

import difflib
import enum
import inspect
import math
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from hybridlab import attribute
from hybridlab.errors import (
    AttributeValueError,
    GraphError,
    ShapeError,
    UnknownAttributeError,
    UnknownOperatorError,
)


class Kind(str, enum.Enum):
    """How an operator touches its data; passes and plots ask this, never op names."""

    ELEMENTWISE = "elementwise"  # out[i] = f(in[i]); inputs and output share one shape
    BROADCAST = "broadcast"  # elementwise after numpy broadcasting of the inputs
    REDUCE = "reduce"  # sums, means, max ... over axes
    OPAQUE = "opaque"  # everything else: dot, convolution, reshape, random, ...


@dataclass(frozen=True)
class Aval:
    """The abstract value of an array: what is known before it is computed."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __str__(self) -> str:
        return f"{np.dtype(self.dtype).name}[{','.join(map(str, self.shape))}]"


REQUIRED: Any = object()  # marks an attribute without a default


@dataclass(frozen=True)
class Attr:
    """One attribute of an operator: its type (used to validate and to parse JSON) and
    its range: ``low``/``high`` bound a number, or every entry of a shape (inclusive)."""

    type: str  # one of ATTR_TYPES
    default: Any = REQUIRED
    choices: tuple[Any, ...] | None = None
    low: float | None = None  # Attr("int", low=1): num_hidden=0 is refused at the call
    high: float | None = None
    empty_is_default: bool = False  # a shape "()" is MXNet's unset one: the default applies


# The attribute types an operator may declare; each parser accepts the Python value a
# user passes *and* the string MXNet's JSON stores ("(2, 2)", "True", "0.5").
ATTR_TYPES = ("int", "float", "bool", "str", "shape", "axis", "dtype", "any", "index", "indices")


@dataclass(frozen=True)
class RunContext:
    """What a kernel may need besides its inputs: the training flag and a seeded RNG."""

    training: bool = False
    rng: np.random.Generator | None = None


@dataclass(eq=False)
class OpDef:
    """Everything hybridlab knows about one operator."""

    name: str
    kernel: Callable[..., Any]
    infer: Callable[..., list[Aval]]
    grad: Callable[..., Sequence[Any]] | None
    kind: Kind
    inputs: tuple[str, ...] | Callable[[dict[str, Any]], tuple[str, ...]] = ("data",)
    attrs: dict[str, Attr] = field(default_factory=dict)
    num_outputs: int | Callable[[dict[str, Any]], int] = 1  # callable: split(num_outputs=k)
    pure: bool = True  # same inputs, same outputs, no side effects (CSE/DCE may touch it)
    # the output may overwrite the first input's buffer (callable: decided by the attrs)
    inplace_ok: bool | Callable[[dict[str, Any]], bool] = False
    needs_context: bool = False  # the kernel takes a keyword ``rt: RunContext``
    ufunc: np.ufunc | None = None  # the kernel *is* this numpy ufunc (gives ``kernel_out``)
    kernel_out: Callable[..., np.ndarray] | None = None  # writes into ``out=`` (see above)
    grad_missing: str = ""  # with grad=None: why a gradient that exists has no rule
    view: bool = False  # the kernel returns a view of its first input: it allocates nothing
    workspace: Callable[..., int] | None = None  # scratch bytes while it runs (see above)
    # layers with weights: parameter shapes from the data's Aval, {input name: shape}, so
    # sym.infer_shape(data=...) can fill `fc1_weight` as MXNet did
    infer_params: Callable[..., dict[str, tuple[int, ...]]] | None = None
    # what the outputs' (partial) shapes tell of the inputs' (MXNet infers both ways):
    # ``infer_back(input_shapes, output_shapes, **attrs) -> input_shapes``, each a tuple
    # with 0 for a size not known yet, or None; only graph/shapes.py calls it
    infer_back: Callable[..., Sequence[tuple[int, ...] | None]] | None = None
    lower: Callable[..., Any] | None = None  # a layer operator's definition (see above)
    # BatchNorm's side effect, as MXNet's operator has it: run imperatively while training
    # (use_global_stats off), inputs 3 and 4 (moving mean, variance) move in place towards
    # the batch's statistics (the lowering's outputs 1 and 2 with output_mean_var: the mean,
    # and the inverse standard deviation the variance is recovered from) by momentum
    moves_statistics: bool = False
    aliases: tuple[str, ...] = ()
    doc: str = ""

    def input_names(self, attrs: dict[str, Any]) -> tuple[str, ...]:
        """Names of the inputs for these attributes (``("*data",)`` means variadic)."""
        return self.inputs(attrs) if callable(self.inputs) else self.inputs

    def can_overwrite(self, attrs: dict[str, Any]) -> bool:
        """May the result be written over the first input's buffer (``inplace_ok``)?"""
        return self.inplace_ok(attrs) if callable(self.inplace_ok) else self.inplace_ok

    def output_count(self, attrs: dict[str, Any]) -> int:
        """How many outputs the op has for these (parsed) attributes."""
        return self.num_outputs(attrs) if callable(self.num_outputs) else self.num_outputs

    def parse_attrs(self, given: dict[str, Any]) -> dict[str, Any]:
        """Validate ``given`` against the declared attributes and fill in defaults."""
        if not given and not self._required:
            return self._defaults
        parsed = dict(self._defaults)
        for key, value in given.items():
            spec = self.attrs.get(key)
            if spec is None:
                raise UnknownAttributeError(_unknown_attr_message(self, key))
            parsed[key] = parse_attr_value(self.name, key, spec, value)
        missing = [k for k in self._required if k not in parsed]
        if missing:
            raise AttributeValueError(
                f"{self.name}: missing required attribute(s) {missing}; "
                f"call it as {self.name}(..., {missing[0]}=<{self.attrs[missing[0]].type}>)"
            )
        return parsed

    def __post_init__(self) -> None:
        self._defaults = {k: a.default for k, a in self.attrs.items() if a.default is not REQUIRED}
        self._required = [k for k, a in self.attrs.items() if a.default is REQUIRED]
        if self.kernel_out is None and self.ufunc is not None and not self.attrs:
            self.kernel_out = ufunc_out(self.ufunc)
        if self.lower is not None:  # run only through its lowering: say so if called
            self.kernel = _lower_first(self.name)

    def __repr__(self) -> str:
        return f"<OpDef {self.name} ({self.kind.value})>"


def _lower_first(name: str) -> Callable[..., Any]:
    def kernel(*arrays: Any, **attrs: Any) -> Any:
        raise GraphError(f"{name} is a layer operator: it runs as its lowering. Lower the "
                         f"graph first (graph.passes.lower_operators, the compiler's first "
                         f"pass; graph.evaluate does it for you)")

    kernel.__name__ = f"{name}_needs_lowering"
    return kernel


def ufunc_out(ufunc: np.ufunc) -> Callable[..., np.ndarray]:
    """The ``kernel_out`` of an op that is a numpy ufunc.

    ``casting="unsafe"`` lets the ufunc write a result computed in a wider type into the
    promised dtype, exactly as ``astype`` would (``sqrt`` of int32 truncates into int32).
    """
    def kernel_out(*arrays: np.ndarray, out: np.ndarray) -> np.ndarray:
        result: np.ndarray = ufunc(*arrays, out=out, casting="unsafe")
        return result

    kernel_out.__name__ = f"{ufunc.__name__}_out"
    return kernel_out


def _unknown_attr_message(op: OpDef, key: str) -> str:
    close = difflib.get_close_matches(key, list(op.attrs), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    known = ", ".join(sorted(op.attrs)) or "none"
    return f"{op.name}: unknown attribute {key!r}{hint} (known attributes: {known})"


def parse_attr_value(op_name: str, key: str, spec: Attr, value: Any) -> Any:
    """Turn a user value or a JSON string into the attribute's declared type."""
    try:
        parsed = _PARSERS[spec.type](value)
    except (TypeError, ValueError) as err:
        raise AttributeValueError(
            f"{op_name}: attribute {key!r} must be of type {spec.type}, got {value!r} ({err})"
        ) from None
    if parsed == () and spec.empty_is_default:
        parsed = spec.default  # Convolution(stride="()") in MXNet's files: stride 1
    if spec.choices is not None and parsed not in spec.choices:
        raise AttributeValueError(
            f"{op_name}: attribute {key!r} must be one of {list(spec.choices)}, got {value!r}"
        )
    if spec.low is not None or spec.high is not None:
        _check_range(op_name, key, spec, parsed, value)
    return parsed


def _check_range(op_name: str, key: str, spec: Attr, parsed: Any, value: Any) -> None:
    numbers = parsed if isinstance(parsed, tuple) else () if parsed is None else (parsed,)
    low = -np.inf if spec.low is None else spec.low
    high = np.inf if spec.high is None else spec.high
    if not all(low <= n <= high for n in numbers if n is not None):
        entries = "every entry of " if isinstance(parsed, tuple) else ""
        bounds = [f">= {spec.low}" if spec.low is not None else "",
                  f"<= {spec.high}" if spec.high is not None else ""]
        raise AttributeValueError(f"{op_name}: {entries}attribute {key!r} must be "
                                  f"{' and '.join(b for b in bounds if b)}, got {value!r}")


def _parse_bool(value: Any) -> bool:
    if isinstance(value, str):
        if value.lower() in ("true", "1"):
            return True
        if value.lower() in ("false", "0"):
            return False
        raise ValueError("expected True or False")
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return bool(value)
    raise TypeError("expected a bool")


_INT64 = 2**63  # an attribute beyond int64 cannot be a size, an axis or an index


def _parse_int(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("expected an int, not a bool")
    if isinstance(value, str):
        number = int(value.strip())
    elif isinstance(value, (int, np.integer)) or (
            isinstance(value, float) and value.is_integer()):
        number = int(value)
    else:
        raise TypeError("expected an int")
    if not -_INT64 <= number < _INT64:
        raise ValueError("out of the int64 range")
    return number


def _parse_float(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("expected a number, not a bool")
    if isinstance(value, str):
        return float(value.strip())
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    raise TypeError("expected a number")


MAX_ELEMENTS = 2**60  # NOTE [Shape sizes]: 8-byte elements then still count in int64 bytes


def _parse_shape(value: Any) -> tuple[int, ...]:
    """A shape: an int, a tuple/list of ints, or MXNet's string form "(2, 3)". Its sizes
    (reshape's codes count as 1) may multiply to at most ``MAX_ELEMENTS``: a larger array
    cannot exist, and int64 arithmetic on its size would silently wrap."""
    if isinstance(value, str):
        text = value.strip().strip("()[]").strip()
        dims = tuple(_parse_int(p) for p in text.split(",") if p.strip()) if text else ()
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims = (int(value),)
    elif isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.ndim == 1
                                             and value.dtype.kind in "iu"):
        dims = tuple(_parse_int(v) for v in list(value))  # MXNet takes a numpy array of ints
    else:
        raise TypeError("expected a shape such as (2, 3)")
    if math.prod(d for d in dims if d > 0) > MAX_ELEMENTS:
        raise ValueError(f"{dims} has more than 2**60 elements; no array is that large")
    return dims


def _parse_axis(value: Any) -> int | tuple[int, ...] | None:
    """An axis: None (all), an int, or a tuple of ints."""
    if value is None or (isinstance(value, str) and value.strip() in ("None", "()", "")):
        return None
    if isinstance(value, str) and not value.strip().startswith(("(", "[")):
        return _parse_int(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    return _parse_shape(value)


def _parse_index(value: Any) -> int | None:
    """An int or None (the open end of a slice); "None" in JSON."""
    if value is None or (isinstance(value, str) and value.strip() == "None"):
        return None
    return _parse_int(value)


def _parse_indices(value: Any) -> tuple[int | None, ...]:
    """A tuple of ints and Nones, such as ``slice``'s ``begin=(None, 1)``."""
    if isinstance(value, str):
        text = value.strip().strip("()[]").strip()
        return tuple(_parse_index(p) for p in text.split(",") if p.strip()) if text else ()
    if isinstance(value, (tuple, list)):
        return tuple(_parse_index(v) for v in value)
    return (_parse_index(value),)


def _parse_dtype(value: Any) -> str | None:
    if value is None or value == "None":  # not numpy's float64: "no dtype given" (softmax)
        return None
    result: str = np.dtype(value).name
    return result


def _parse_str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "int": _parse_int,
    "float": _parse_float,
    "bool": _parse_bool,
    "str": _parse_str,
    "shape": _parse_shape,
    "axis": _parse_axis,
    "dtype": _parse_dtype,
    "any": lambda value: value,
    "index": _parse_index,
    "indices": _parse_indices,
}


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------

OPS: dict[str, OpDef] = {}  # primary name -> OpDef
_BY_NAME: dict[str, OpDef] = {}  # primary names and aliases -> OpDef


@dataclass(eq=False)
class Composite:
    """An operator written in Python from registry operators: ``fn(F, *args, **kwargs)``."""

    name: str
    fn: Callable[..., Any]
    aliases: tuple[str, ...] = ()
    doc: str = ""


COMPOSITES: dict[str, Composite] = {}


def register(op: OpDef) -> OpDef:
    """Add ``op`` to the table; a name may be taken only once."""
    for name in (op.name, *op.aliases):
        if name in _BY_NAME or name in COMPOSITES:
            raise ValueError(f"operator name {name!r} is registered twice")
        _BY_NAME[name] = op
    OPS[op.name] = op
    return op


def register_layer(name: str, lower: Callable[..., Any], infer: Callable[..., list[Aval]],
                   kind: Kind = Kind.OPAQUE, **fields: Any) -> OpDef:
    """Register a layer operator: defined by ``lower`` alone (no kernel, no gradient rule:
    both are its lowering's), kept whole by ``sym`` and lowered by the compiler."""
    return register(OpDef(
        name=name, kernel=_lower_first(name), infer=infer, grad=None, kind=kind, lower=lower,
        grad_missing=f"{name} is differentiated through its lowering: lower the graph first "
                     f"(graph.passes.lower_operators)", **fields))


def composite(name: str, aliases: tuple[str, ...] = ()
              ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering ``fn(F, *args, **kwargs)`` as a composite operator."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for n in (name, *aliases):
            if n in _BY_NAME or n in COMPOSITES:
                raise ValueError(f"operator name {n!r} is registered twice")
        COMPOSITES[name] = Composite(name, fn, aliases, fn.__doc__ or "")
        return fn

    return decorate


def get(name: str) -> OpDef:
    """The OpDef called ``name`` (primary name or alias), with a helpful error."""
    op = _BY_NAME.get(name)
    if op is None:
        close = difflib.get_close_matches(name, list(_BY_NAME), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UnknownOperatorError(f"unknown operator {name!r}.{hint}")
    return op


# ---------------------------------------------------------------------------------------
# Generating the front ends: the one loop
# ---------------------------------------------------------------------------------------

Apply = Callable[[OpDef, "list[Any]", "dict[str, Any]", "str | None", str], Any]


Compose = Callable[[Callable[[], Any], str, "str | None", "dict[str, Any]"], Any]


def populate(module: types.ModuleType, apply: Apply, compose: Compose | None = None,
             expand: Apply | None = None) -> None:
    """Put one function per operator and composite into ``module``.

    ``apply(op, inputs, attrs, name, hint)`` is the front end's only hook: ``inputs``
    is a list (NDArrays, Symbols or ``None`` for an input the caller left out), ``attrs``
    the raw keyword attributes, ``name`` the user's ``name=`` (or None) and ``hint`` the
    spelling that was called (``"broadcast_add"``), used for automatic symbol names.
    ``compose(run, hint, name, notes)``, when given, runs a composite (``run()``) and names
    its result as one node (``sym``: ``activation0``, not the ``relu0`` inside it);
    ``notes`` are the call's operator-level attributes (``attr=``, ``lr_mult=``, ``__x__=``).
    ``expand``, when given, replaces ``apply`` for layer operators (``OpDef.lower``): an
    eager front end runs their lowering at once (see :func:`run_lowering`).
    A dotted alias such as ``"random.normal"`` lands in a sub-namespace ``module.random``.
    """
    for op in OPS.values():
        hook = expand if expand is not None and op.lower is not None else apply
        for spelling in (op.name, *op.aliases):
            _install(module, spelling, _op_function(op, hook, spelling))
    for comp in COMPOSITES.values():
        for spelling in (comp.name, *comp.aliases):
            _install(module, spelling, _composite_function(comp, module, spelling, compose))


def run_lowering(op: OpDef, F: Any, inputs: Sequence[Any], attrs: dict[str, Any],
                 training: bool = False) -> Any:
    """A layer operator's lowering called with front end ``F`` on ``inputs``: the
    attributes parsed (defaults filled), ``training`` given when the op asks for it."""
    parsed = op.parse_attrs(attrs)
    if op.lower is None:
        raise ValueError(f"{op.name} is not a layer operator: it has no lowering")
    extra = {"training": training} if op.needs_context else {}
    return op.lower(F, *inputs, **parsed, **extra)


def _op_function(op: OpDef, apply: Apply, spelling: str) -> Callable[..., Any]:
    def function(*args: Any, name: str | None = None, **kwargs: Any) -> Any:
        inputs, attrs = split_arguments(op, args, kwargs)
        return apply(op, inputs, attrs, name, spelling.rsplit(".", 1)[-1].lower())

    function.__name__ = spelling.rsplit(".", 1)[-1]
    function.__qualname__ = spelling
    function.__doc__ = op.doc
    return function


def _composite_function(comp: Composite, module: Any, spelling: str,
                        compose: Compose | None) -> Callable[..., Any]:
    hint = spelling.rsplit(".", 1)[-1].lower()

    def function(*args: Any, name: str | None = None, **kwargs: Any) -> Any:
        notes = {key: kwargs.pop(key) for key in list(kwargs)
                 if compose is not None and attribute.is_note(key)}

        def run() -> Any:
            return comp.fn(module, *args, **kwargs)

        try:
            return run() if compose is None else compose(run, hint, name, notes)
        except TypeError as err:
            _check_composite_call(comp, args, kwargs)  # our arguments, or deeper?
            raise err from None
        except (ShapeError, AttributeValueError) as err:  # name the op the user called
            raise type(err)(_composite_error(comp.name, str(err))) from None

    function.__name__ = spelling.rsplit(".", 1)[-1]
    function.__qualname__ = spelling
    function.__doc__ = comp.doc
    return function


def _check_composite_call(comp: Composite, args: tuple[Any, ...], kwargs: dict[str, Any]
                          ) -> None:
    """After a TypeError: if the call does not fit ``comp.fn``, say so like an op would."""
    signature = inspect.signature(comp.fn)
    known = [p for p in list(signature.parameters)[1:] if p != "name"]
    unknown = [key for key in kwargs if key not in signature.parameters]
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownAttributeError(f"{comp.name}: unknown argument {unknown[0]!r}{hint} "
                                    f"(it takes {', '.join(known)})")
    try:
        signature.bind(None, *args, **kwargs)
    except TypeError as err:
        missing = [p for p in known[len(args):] if p not in kwargs
                   and signature.parameters[p].default is inspect.Parameter.empty]
        if missing:
            raise AttributeValueError(f"{comp.name}: missing required argument(s) {missing}; "
                                      f"call it as {comp.name}({', '.join(known)})") from None
        raise TypeError(f"{comp.name}: {err} (it takes {', '.join(known)})") from None


def _composite_error(name: str, message: str) -> str:
    """"log_softmax: axis 4 ... (in its max step)" rather than "max: axis 4 ..."."""
    inner, sep, rest = message.partition(": ")
    if sep and inner in _BY_NAME:
        return f"{name}: {rest} (in its {inner} step)"
    return f"{name}: {message}"


def _install(module: Any, spelling: str, function: Callable[..., Any]) -> None:
    *path, leaf = spelling.split(".")
    target = module
    for part in path:
        if not hasattr(target, part):
            setattr(target, part, types.SimpleNamespace())
        target = getattr(target, part)
    setattr(target, leaf, function)


def split_arguments(op: OpDef, args: tuple[Any, ...], kwargs: dict[str, Any]
                    ) -> tuple[list[Any], dict[str, Any]]:
    """Separate a call's inputs (positional, or keyword by input name) from attributes."""
    if callable(op.inputs):  # e.g. FullyConnected has a bias input unless no_bias=True
        names = op.inputs(op.parse_attrs({k: v for k, v in kwargs.items() if k in op.attrs}))
    else:
        names = op.inputs
    if names and names[0].startswith("*"):  # variadic: every positional is an input
        return list(args), kwargs
    # Like MXNet's generated functions, positionals after the inputs fill the attributes
    # in declaration order: ``nd.sum(x, 1)``, ``F.ones((1, 1))``, ``nd.clip(x, 0, 1)``.
    extra = args[len(names):]
    while callable(op.inputs) and extra and extra[0] is None:  # Convolution(x, w, None,
        extra = extra[1:]  # no_bias=True): the absent bias input, as MXNet takes it
    if len(extra) > len(op.attrs):
        raise TypeError(
            f"{op.name} takes {len(names)} input(s) {list(names)} and attributes "
            f"{list(op.attrs)}, got {len(args)} positional arguments"
        )
    inputs = list(args[:len(names)]) + [None] * (len(names) - len(args[:len(names)]))
    attrs = dict(zip(op.attrs, extra))
    for key, value in kwargs.items():
        if key in names:
            inputs[names.index(key)] = value
        elif key in attrs:
            raise TypeError(f"{op.name} got attribute {key!r} both by position and by keyword")
        else:
            attrs[key] = value
    return inputs, attrs


# The arithmetic dunders of NDArray and Symbol: dunder -> (tensor op, scalar op, hint).
# A "reflected" scalar op (``_rminus_scalar``) computes ``scalar - x``. The hint names
# ``a + b`` (``_plus0``); ``a + 1`` is named by SCALAR_HINTS, both MXNet 1.x's names.
DUNDERS: dict[str, tuple[str, str, str]] = {
    "__add__": ("broadcast_add", "_plus_scalar", "_plus"),
    "__radd__": ("broadcast_add", "_plus_scalar", "_plus"),
    "__sub__": ("broadcast_sub", "_minus_scalar", "_minus"),
    "__rsub__": ("broadcast_sub", "_rminus_scalar", "_minus"),
    "__mul__": ("broadcast_mul", "_mul_scalar", "_mul"),
    "__rmul__": ("broadcast_mul", "_mul_scalar", "_mul"),
    "__truediv__": ("broadcast_div", "_div_scalar", "_div"),
    "__rtruediv__": ("broadcast_div", "_rdiv_scalar", "_div"),
    "__pow__": ("broadcast_power", "_power_scalar", "_power"),
    "__rpow__": ("broadcast_power", "_rpower_scalar", "_power"),
    "__mod__": ("broadcast_mod", "_mod_scalar", "_mod"),
    "__rmod__": ("broadcast_mod", "_rmod_scalar", "_mod"),
    "__eq__": ("broadcast_equal", "_equal_scalar", "_equal"),
    "__ne__": ("broadcast_not_equal", "_not_equal_scalar", "_not_equal"),
    "__gt__": ("broadcast_greater", "_greater_scalar", "_greater"),
    "__ge__": ("broadcast_greater_equal", "_greater_equal_scalar", "_greater_equal"),
    "__lt__": ("broadcast_lesser", "_lesser_scalar", "_lesser"),
    "__le__": ("broadcast_lesser_equal", "_lesser_equal_scalar", "_lesser_equal"),
}
# MXNet's Symbol called ``_internal._PlusScalar`` for ``a + 1`` but ``_greater_scalar`` for
# ``a > 1``: its automatic names are those functions' names in lower case.
SCALAR_HINTS: dict[str, str] = {
    "__add__": "_plusscalar", "__radd__": "_plusscalar", "__sub__": "_minusscalar",
    "__rsub__": "_rminusscalar", "__mul__": "_mulscalar", "__rmul__": "_mulscalar",
    "__truediv__": "_divscalar", "__rtruediv__": "_rdivscalar", "__pow__": "_powerscalar",
    "__rpow__": "_rpower_scalar", "__mod__": "_modscalar", "__rmod__": "_rmodscalar",
    "__eq__": "_equal_scalar", "__ne__": "_not_equal_scalar", "__gt__": "_greater_scalar",
    "__ge__": "_greater_equal_scalar", "__lt__": "_lesser_scalar",
    "__le__": "_lesser_equal_scalar",
}


Foreign = Callable[[Any, Any, str], None]


def install_methods(cls: type, module: types.ModuleType) -> None:
    """Every lower-case operator or composite that takes a data input becomes a method of
    ``cls`` (``x.sum(axis=1)``, ``x.dot(w)`` is ``module.dot(x, w)``), unless ``cls``
    already has the name. The one rule for every front end (NDArray and Symbol), so their
    methods cannot disagree; call it after ``populate(module, ...)``."""
    spellings = [s for op in OPS.values() if callable(op.inputs) or op.inputs
                 for s in (op.name, *op.aliases)]
    spellings += [s for comp in COMPOSITES.values() for s in (comp.name, *comp.aliases)]
    for spelling in spellings:
        if spelling[:1].islower() and "." not in spelling and not hasattr(cls, spelling):
            setattr(cls, spelling, _method(getattr(module, spelling)))


def _method(function: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return function(self, *args, **kwargs)  # x.clip(0, 1) is nd.clip(x, 0, 1)

    method.__name__ = function.__name__
    method.__doc__ = function.__doc__
    return method


# MXNet's Symbol: ``a + b`` of two Symbols is the elementwise ``_Plus`` (one shape, no
# broadcasting; F.broadcast_add broadcasts). NDArray's operators broadcast, as in MXNet.
ELEMENTWISE_DUNDERS: dict[str, str] = {
    "__add__": "elemwise_add", "__radd__": "elemwise_add", "__sub__": "elemwise_sub",
    "__rsub__": "elemwise_sub", "__mul__": "elemwise_mul", "__rmul__": "elemwise_mul",
    "__truediv__": "elemwise_div", "__rtruediv__": "elemwise_div",
}


def install_dunders(cls: type, apply: Apply, foreign: Foreign | None = None,
                    tensor_ops: dict[str, str] | None = None) -> None:
    """Give ``cls`` its arithmetic operators, all routed through ``apply``.

    ``foreign(self, other, dunder)``, when given, sees an operand that is neither a
    ``cls`` nor a number before Python's ``TypeError``, and may raise a clearer error
    (``sym``: an NDArray inside a traced ``hybrid_forward``). ``tensor_ops`` replaces the
    operator of some dunders between two tensors (``sym``: ``ELEMENTWISE_DUNDERS``).
    """
    for dunder, (tensor_name, scalar_name, hint) in DUNDERS.items():
        tensor_name = (tensor_ops or {}).get(dunder, tensor_name)
        setattr(cls, dunder, _dunder(cls, dunder, tensor_name, scalar_name, hint, apply,
                                     foreign))
    # defining __eq__ would otherwise remove hashing
    cls.__hash__ = object.__hash__  # type: ignore[method-assign,assignment]


def _dunder(cls: type, dunder: str, tensor_name: str, scalar_name: str, hint: str,
            apply: Apply, foreign: Foreign | None) -> Callable[[Any, Any], Any]:
    tensor_op, scalar_op = get(tensor_name), get(scalar_name)
    reflected = dunder.startswith("__r") and dunder not in ("__rshift__",)
    scalar_hint = SCALAR_HINTS[dunder]

    def method(self: Any, other: Any) -> Any:
        if isinstance(other, cls):
            pair = [other, self] if reflected else [self, other]
            return apply(tensor_op, pair, {}, None, hint)
        if isinstance(other, (int, float, bool, np.number)):
            return apply(scalar_op, [self], {"scalar": float(other)}, None, scalar_hint)
        if foreign is not None:
            foreign(self, other, dunder)
        return NotImplemented

    method.__name__ = dunder
    return method
