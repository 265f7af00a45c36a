"""Code generation: a Graph becomes readable Python source, one line per node.

What this module teaches
------------------------
"Compiling the whole program" can be as simple as writing out, once, the Python a
careful person would have typed by hand, and letting ``compile()`` turn it into a
function. For the seed MLP it looks like::

    def forward(data, fc0_weight, fc0_bias, ..., fc2_bias, *, rt=()):
        fc0 = FullyConnected_2d(data, fc0_weight, fc0_bias)
        relu0 = relu_out(fc0, out=fc0); fc0 = None
        ...
        return (fc2,)

Each line calls the op's kernel from the registry, or its ``kernel_out`` form writing
into a buffer that already exists: over its dead first input when the memory plan says
so (``relu0`` above reuses ``fc0``'s array), and with ``static_alloc`` into the node's
slot of the arena allocated once for the program (``out=buf_fc0``). A kernel may offer
a version specialised for the line's shapes and attributes (``FullyConnected_2d``
above: NOTE [Specialised kernels]). A fused group is
printed step by step, every step writing ``out=`` the group's one buffer. ``name = None``
after a value's last use drops the reference: the memory plan, visible. Graph outputs
are always fresh arrays (their kernel allocates them), because the caller keeps them.

Safety (NOTE: [Generated names]): every identifier in the source comes from
:class:`Namespace`, which sanitises names (letters, digits, ``_``; never a keyword,
builtin or a name the generated code itself uses) and makes them unique. Strings from
a graph or a loaded file are never pasted into the source: attributes are written as
literals only when they are plain numbers, bools or tuples of those (formatted here);
anything else is passed by reference through the program's constants table. Comments
are built from those identifiers and registry op names only: a node name may hold a
newline, and a newline inside a comment ends it. Before ``exec``, :func:`check_source`
parses the result and refuses any name we did not create, any string constant and any
attribute access, so a slip in this module fails loudly instead of running a file's text.

The source is registered in ``linecache`` under a unique file name, so a traceback
through a compiled program shows the generated line that failed; the entry is dropped when
the program is garbage (2 000 compiles do not keep 2 000 sources).
"""

from __future__ import annotations

import ast
import builtins
import itertools
import keyword
import linecache
import math
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from hybridlab import random
from hybridlab.errors import GraphError, ShapeError
from hybridlab.graph.ir import Graph, Node, Value
from hybridlab.ndarray_io import aligned_empty
from hybridlab.ops import control_flow
from hybridlab.ops.fused import FUSED
from hybridlab.ops.registry import RunContext

_RESERVED = {"rt", "forward", "backward"}
_MAX_IDENTIFIER = 40  # a name from a file may be 256 characters: keep lines readable
_counter = itertools.count()


class Namespace:
    """Unique, safe Python identifiers derived from arbitrary names."""

    def __init__(self) -> None:
        self._used: set[str] = set(_RESERVED) | set(dir(builtins)) | set(keyword.kwlist)
        self.created: set[str] = set()  # every identifier handed out (checked at the end)

    def create(self, candidate: str) -> str:
        """A fresh identifier that looks like ``candidate``."""
        base = re.sub(r"\W", "_", candidate or "v", flags=re.ASCII)[:_MAX_IDENTIFIER]
        if not base or base[0].isdigit():
            base = "v_" + base
        name, suffix = base, 1
        while name in self._used or keyword.iskeyword(name):
            name, suffix = f"{base}_{suffix}", suffix + 1
        self._used.add(name)
        self.created.add(name)
        return name


_PARSE_LOCK = threading.Lock()


def parse_source(source: str) -> ast.Module:
    """``ast.parse``, one thread at a time (and ``compile`` of a tree, below): CPython
    3.11's conversion between source, AST and code can fail with "AST
    constructor recursion depth mismatch" when threads parse at once (measured: 1 trial
    in 100 with four threads tracing together)."""
    with _PARSE_LOCK:
        return ast.parse(source)


def check_source(source: str, identifiers: set[str]) -> ast.Module:
    """Refuse generated source that is not made of our own pieces (defence in depth).

    The writer only ever emits identifiers from its :class:`Namespace`, numbers and
    tuples formatted by :func:`_literal`, ``rt[i]`` and comments built from those. So
    the parsed program holds one function, no string constants, no attribute access and
    no name we did not create. A graph string that slipped into a line would break one
    of these rules and is caught here, before ``exec``.
    """
    tree = parse_source(source)
    problems = [] if len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef) \
        else ["the module must hold exactly one function"]
    for item in ast.walk(tree):
        if isinstance(item, ast.Name) and item.id not in identifiers:
            problems.append(f"unknown name {item.id!r}")
        elif isinstance(item, ast.arg) and item.arg not in identifiers:
            problems.append(f"unknown parameter {item.arg!r}")
        elif isinstance(item, (ast.Attribute, ast.Import, ast.ImportFrom, ast.Lambda)) or (
                isinstance(item, ast.Constant) and isinstance(item.value, (str, bytes))):
            problems.append(f"a {type(item).__name__} node at line {item.lineno}")
    if problems:
        raise GraphError("codegen produced source it does not allow (a bug in codegen): "
                         + "; ".join(problems[:5]))
    return tree  # compiled as it is: the source is parsed once


def _literal(value: Any) -> str | None:
    """Source text for plain attribute values we format ourselves, else None."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        return repr(float(value))
    if isinstance(value, tuple):
        parts = [_literal(v) for v in value]
        known = [p for p in parts if p is not None]
        if len(known) == len(parts):
            return "(" + ", ".join(known) + ("," if len(known) == 1 else "") + ")"
    return None


Instance = tuple[Callable[..., tuple[Any, ...]], list[np.ndarray]]  # (function, [its arena])


@dataclass
class Program:
    """A compiled graph: ``program(*arrays) -> tuple of arrays``; ``.source`` is the code.

    NOTE: [One arena per concurrent call] with ``static_alloc`` the generated function
    writes into an arena bound in its globals, so two threads must not run the same
    function at once. Rather than a lock (a ThreadedEngine worker would sit waiting),
    the program keeps a pool of *instances*: the one compiled code object executed with
    its own arena. A call takes a free instance, or makes one when all are busy, so
    arenas are allocated once and there are only as many as calls ever ran together.
    """

    source: str
    function: Callable[..., tuple[Any, ...]]
    graph: Graph
    static_shape: bool = False
    filename: str = ""
    num_random: int = 0  # nodes whose kernel takes a RunContext: rt[0], rt[1], ...
    code: Any = None  # the compiled module, to make more instances
    table: dict[str, Any] = field(default_factory=dict, repr=False)
    views: dict[str, tuple[int, np.dtype, tuple[int, ...]]] = field(default_factory=dict)
    arena_bytes: int = 0
    entry: str = "forward"  # the generated function's name
    scalar_outputs: tuple[int, ...] = ()  # outputs that may come back as numpy scalars
    _free: list[Instance] = field(default_factory=list, repr=False)

    @property
    def buffers(self) -> list[np.ndarray]:
        """The static arena of the first instance (empty without static_alloc)."""
        return self._instance(keep=True)[1] if self.views else []

    def __call__(self, *arrays: np.ndarray, training: bool = False,
                 rng: np.random.Generator | Sequence[np.random.Generator] | None = None
                 ) -> tuple[np.ndarray, ...]:
        """Run the program; ``rng`` is one generator, or one per random node (in order,
        like the imperative engine draws one per random op it pushes)."""
        if len(arrays) != len(self.graph.inputs):
            raise TypeError(f"the program takes {len(self.graph.inputs)} inputs "
                            f"{[n.name for n in self.graph.inputs]}, got {len(arrays)}")
        if self.static_shape:
            self._check_shapes(arrays)
        rngs = list(rng) if isinstance(rng, Sequence) else [rng] * self.num_random
        contexts = tuple(RunContext(training, r if r is not None else random.next_generator())
                         for r in rngs)  # None: mx.random.seed's stream, as nd would draw
        return tuple(self.run(arrays, contexts))

    def run(self, arrays: Sequence[np.ndarray], contexts: tuple[RunContext, ...] = ()
            ) -> Sequence[np.ndarray]:
        """The call without the checks (a CachedOp made sure the inputs fit): the hot path.

        NOTE: [No keyword when not needed] ``rt`` has the default ``()``, and a keyword
        argument makes every call slower, so it is passed only to programs with random
        nodes."""
        if not self.views:
            results = self.function(*arrays, rt=contexts) if contexts else self.function(*arrays)
            return self._as_arrays(results) if self.scalar_outputs else results
        function, arena = self._instance()  # static_alloc: an arena of our own
        try:
            computed: Sequence[np.ndarray] = function(*arrays, rt=contexts)
            if self.scalar_outputs:
                computed = self._as_arrays(computed)
            return [self._own(r, arena) for r in computed]
        finally:
            self._free.append((function, arena))

    def single(self) -> Callable[..., tuple[Any, ...]]:
        """For a program with one output: a function of the input arrays alone returning
        ``(result,)`` -- the generated function itself, or, with ``static_alloc``, that
        function run with an arena of its own from the pool (NOTE [One arena per
        concurrent call]): what a CachedOp's plain call runs."""
        if not self.views:
            return self.function
        free, take, own = self._free, self._instance, self._own

        def pooled(*arrays: np.ndarray) -> tuple[np.ndarray]:
            function, arena = take()
            try:
                return (own(function(*arrays)[0], arena),)
            finally:
                free.append((function, arena))

        return pooled

    def _as_arrays(self, results: Sequence[Any]) -> list[np.ndarray]:
        """NOTE: [0-d results] a ufunc given 0-d arrays returns a numpy *scalar*, which is
        not an array (no ``out=``, not writable). Only outputs whose shape is ``()`` (or
        unknown) can be one, so only those are converted: ``compile_graph`` lists them."""
        return [np.asarray(r) if i in self.scalar_outputs else r for i, r in enumerate(results)]

    def _instance(self, keep: bool = False) -> Instance:
        """A free (function, arena) pair, made when none is free (list.pop is atomic)."""
        try:
            instance = self._free[-1] if keep else self._free.pop()
        except IndexError:
            # at a 64-byte boundary, as the plan's offsets: every slot starts a cache line
            arena = aligned_empty((self.arena_bytes,), np.uint8)
            scope = dict(self.table)
            for name, (offset, dtype, shape) in self.views.items():
                count = math.prod(shape) * dtype.itemsize  # (exact: no int64 wrap)
                scope[name] = arena[offset:offset + count].view(dtype).reshape(shape)
            exec(self.code, scope)
            instance = (scope[self.entry], [arena])
            if keep:
                self._free.append(instance)
        return instance

    @staticmethod
    def _own(result: np.ndarray, arena: list[np.ndarray]) -> np.ndarray:
        """An output viewing the arena would change at the next call: the caller gets a copy.
        The memory plan keeps outputs (and what they view) out of the arena, so this is a
        guard: an array that views nothing (``base`` None, a kernel's fresh result) is
        passed at once, and only a view pays for numpy's (slower) overlap test."""
        if result.base is not None and np.may_share_memory(result, arena[0]):
            copied: np.ndarray = result.copy()
            return copied
        return result

    def _check_shapes(self, arrays: tuple[np.ndarray, ...]) -> None:
        for node, array in zip(self.graph.inputs, arrays):
            if node.aval is not None and tuple(np.shape(array)) != node.aval[0].shape:
                raise ShapeError(
                    f"input {node.name!r} has shape {np.shape(array)} but this program was "
                    f"compiled for {node.aval[0].shape} (static_shape=True); call the "
                    f"CachedOp again to compile for the new shape, or use static_shape=False")

    def __str__(self) -> str:
        return self.source


def compile_graph(graph: Graph, static_alloc: bool = False, static_shape: bool = False,
                  name: str = "forward") -> Program:
    """Generate, compile and wrap the source of ``graph`` (see the module docstring);
    ``name`` names the generated function (``forward``, ``backward``)."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"compile_graph: name must be a Python identifier, got {name!r}")
    writer = _Writer(graph, static_alloc, name)
    source = writer.write()
    tree = check_source(source, writer.names.created | set(writer.table) | {"rt"})
    filename = f"<hybridlab-{name}-{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    with _PARSE_LOCK:  # turning an AST into code has the same thread-safety problem
        code = compile(tree, filename, "exec")
    scope = dict(writer.table)
    if not writer.views:
        exec(code, scope)
    scalars = tuple(i for i, v in enumerate(graph.outputs) if v.aval is None or not v.aval.shape)
    # (the function is None until a static_alloc instance binds its arena views)
    program = Program(source, scope.get(name), graph,  # type: ignore[arg-type]
                      static_shape or static_alloc, filename, writer.num_random, code,
                      writer.table, writer.views, writer.arena_bytes, name, scalars)
    # the source stays readable for tracebacks while the program lives, and no longer
    weakref.finalize(program, linecache.cache.pop, filename, None)
    if writer.views:
        program.function = program._instance(keep=True)[0]
    return program


def _specialised(node: Node, out: bool) -> Callable[..., Any] | None:
    """NOTE: [Specialised kernels] an op's kernel handles every case its attributes and
    inputs allow, and tests for them on every call. Here the attributes and the input
    avals are fixed, so a kernel may offer ``kernel.specialise(avals, out, **attrs)``:
    a function of the arrays alone (plus ``out=`` when ``out``) for this one case, or
    None. The line then reads ``fc0 = FullyConnected_2d(data, fc0_weight, fc0_bias)``:
    no keyword to parse, no test to repeat. The general kernel stays the reference:
    tests check that the two give the same bits."""
    specialise = getattr(node.opdef.kernel, "specialise", None)
    avals = [v.aval for v in node.inputs]
    if specialise is None or node.opdef.needs_context or None in avals:
        return None
    special: Callable[..., Any] | None = specialise(avals, out, **node.attr_dict)
    return special


class _Writer:
    """Turns one graph into source lines; ``table`` holds every object the code refers to."""

    def __init__(self, graph: Graph, static: bool, name: str) -> None:
        self.graph, self.function_name = graph, name
        self.names = Namespace()
        self.names._used.add(name)
        plan = self.plan = graph.meta.get("memory")  # in-place writes need no static_alloc
        self.static = static and plan is not None and plan.buffer_bytes[0] > 0
        self.arena_bytes = plan.buffer_bytes[0] if self.static and plan is not None else 0
        self.views: dict[str, tuple[int, np.dtype, tuple[int, ...]]] = {}  # arena slots
        self.table: dict[str, Any] = {}
        self.var: dict[tuple[int, int], str] = {}
        self.objects: dict[int, str] = {}
        self.outputs = {(id(v.node), v.index) for v in graph.outputs}
        self.num_random = 0
        # NOTE [Concatenation in place] (plan_memory.py): each outermost concatenation's
        # buffer is made at the step of its first input, which is written into its slice
        self.opens: dict[int, list[Node]] = {}
        if plan is not None and plan.slot_of:
            nodes = {id(n): n for n in graph.nodes}
            first: dict[tuple[int, int], int] = {}
            for step, node in enumerate(graph.nodes):
                slot = plan.slot_of.get((id(node), 0))
                if slot is not None and slot[0] not in first:
                    first[slot[0]] = step
            for root, step in first.items():
                self.opens.setdefault(step, []).append(nodes[root[0]])

    def write(self) -> str:
        params = [self._name_value(n.out(), n.name) for n in self.graph.inputs]
        lines = [f"def {self.function_name}({', '.join(params + ['*', 'rt=()'])}):"]
        last = {(id(v.node), v.index): i for i, n in enumerate(self.graph.nodes)
                for v in n.inputs}
        for step, node in enumerate(self.graph.nodes):
            lines += ["    " + self._open(root) for root in self.opens.get(step, ())]
            if node.kind == "const":
                self.var[(id(node), 0)] = self._bind(node.value, node.name)
            elif node.kind == "call":
                code = self._call_lines(node)
                drop = "; ".join(f"{name} = None" for name in self._dead(node, step, last))
                if drop and code[-1].startswith("#"):  # (an in-place Concat: a comment)
                    code.append(drop)
                elif drop:
                    code[-1] += "; " + drop
                lines += ["    " + c for c in code]
        results = [self.var[(id(v.node), v.index)] for v in self.graph.outputs]
        lines.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
        return "\n".join(lines) + "\n"

    def _dead(self, node: Node, step: int, last: dict[tuple[int, int], int]) -> list[str]:
        """Values to drop after this node: inputs read for the last time, and results
        nobody reads (the unused outputs of a multi-output node)."""
        keys = [(id(v.node), v.index) for v in dict.fromkeys(node.inputs)
                if last.get((id(v.node), v.index)) == step and v.node.kind == "call"]
        keys += [(id(node), i) for i in range(node.num_outputs) if (id(node), i) not in last]
        return [self.var[k] for k in dict.fromkeys(keys) if k not in self.outputs]

    def _name_value(self, value: Value, hint: str) -> str:
        name = self.names.create(hint if value.index == 0 else f"{hint}_{value.index}")
        self.var[(id(value.node), value.index)] = name
        return name

    def _bind(self, obj: Any, hint: str) -> str:
        """A global name for ``obj`` in the constants table (one per distinct object)."""
        if id(obj) not in self.objects:
            name = self.names.create(hint)
            self.table[name] = obj
            self.objects[id(obj)] = name
        return self.objects[id(obj)]

    def _bind_kernel(self, kernel: Callable[..., Any], name: str) -> str:
        """Kernels keep their op's name (``relu``); one that would shadow a builtin or a
        keyword gets a prefix (``op_sum``) rather than a number."""
        clash = name in dir(builtins) or keyword.iskeyword(name) or name in _RESERVED
        return self._bind(kernel, f"op_{name}" if clash else name)

    def _args(self, node: Node, inputs: list[str]) -> str:
        opdef, parts, odd = node.opdef, list(inputs), {}
        for key, value in node.attrs:
            if key not in opdef.attrs or not key.isidentifier() or keyword.iskeyword(key):
                odd[key] = value  # never paste a key we did not declare: pass it by reference
                continue
            text = _literal(value)
            parts.append(f"{key}={text if text is not None else self._bind(value, key)}")
        if odd:
            parts.append("**" + self._bind(odd, f"{node.name}_attrs"))
        if opdef.needs_context:
            parts.append(f"rt=rt[{self.num_random}]")
            self.num_random += 1
        return ", ".join(parts)

    def _call(self, node: Node, args: list[str], target: str | None) -> str:
        """``kernel(args)``, or ``kernel_out(args, out=target)`` writing into ``target``."""
        opdef = node.opdef
        special = _specialised(node, target is not None)
        if special is not None:  # NOTE [Specialised kernels]: arrays only, no attributes
            # named like the op: the kernel ``_fc`` specialised as ``_fc_2d`` is called
            # ``FullyConnected_2d`` here
            # (a C function such as ``np.dot``'s is named otherwise: ``dot_c``)
            kernel_name = opdef.kernel.__name__
            suffix = (special.__name__.removeprefix(kernel_name)
                      if special.__name__.startswith(kernel_name) else "_c")
            out = [] if target is None else [f"out={target}"]
            return f"{self._bind(special, opdef.name + suffix)}({', '.join(args + out)})"
        if target is None:
            return f"{self._bind_kernel(opdef.kernel, opdef.name)}({self._args(node, args)})"
        function = self._bind_kernel(opdef.kernel_out,  # type: ignore[arg-type]  # (a target
                                     opdef.name + "_out")  # only for ops with kernel_out)
        return f"{function}({self._args(node, [*args, f'out={target}'])})"

    def _open(self, root: Node) -> str:
        """The line making an in-place concatenation's buffer: its arena slot with
        ``static_alloc``, else a fresh array (NOTE [Concatenation in place])."""
        name = self._name_value(root.out(), root.name)
        aval = root.aval[0]  # type: ignore[index]  # (the plan placed it: it has an aval)
        key = (id(root), 0)
        if self.static and self.plan is not None and self.plan.buffer_of.get(key) == 0:
            view = self.names.create(f"buf_{root.name}")
            self.views[view] = (self.plan.offset_of[key], np.dtype(aval.dtype), aval.shape)
            return f"{name} = {view}  # {name}'s inputs are written into it"
        return (f"{name} = {self._bind(np.empty, 'empty')}({_literal(tuple(aval.shape))}, "
                f"{self._bind(np.dtype(aval.dtype), str(np.dtype(aval.dtype)))})"
                f"  # {name}'s inputs are written into it")

    def _slice(self, key: tuple[int, int]) -> str:
        """The slice of its concatenation's buffer a value is written into."""
        root, axis, start, stop = self.plan.slot_of[key]  # type: ignore[union-attr]
        return f"{self.var[root]}[{':, ' * axis}{start}:{stop}]"

    def _call_lines(self, node: Node) -> list[str]:
        inputs = [self.var[(id(v.node), v.index)] for v in node.inputs]
        key = (id(node), 0)
        if self.plan is not None and key in self.plan.concats:  # nothing left to copy
            if key in self.plan.slot_of:  # an inner one: a view of the outer buffer
                return [f"{self._name_value(node.out(), node.name)} = {self._slice(key)}"]
            return [f"# {self.var[key]}: Concat, its inputs were written into it"]
        if node.op == FUSED:
            return self._fused_lines(node, inputs)
        if node.op == control_flow.FOREACH:
            return self._loop_lines(node, inputs)
        outs = [self._name_value(node.out(i), node.name) for i in range(node.num_outputs)]
        return [f"{', '.join(outs)} = {self._call(node, inputs, self._target(node))}"]

    def _target(self, node: Node) -> str | None:
        """Where a single-output node writes: over its first input (in place), into its
        slot of the static arena, or nowhere (its kernel allocates the result)."""
        key = (id(node), 0)
        if self.plan is None or node.num_outputs != 1:
            return None
        host = self.plan.inplace_of.get(key)
        if host is not None:
            return self.var[host]
        if key in self.plan.slot_of:  # NOTE [Concatenation in place]
            return self._slice(key)
        if not self.static or self.plan.buffer_of.get(key) != 0:  # 0: the arena
            return None
        name = self.names.create(f"buf_{node.name}")  # the arena view, per instance
        aval = node.aval[0]  # type: ignore[index]  # (the plan placed it: it has an aval)
        self.views[name] = (self.plan.offset_of[key], np.dtype(aval.dtype), aval.shape)
        return name

    def _loop_lines(self, node: Node, inputs: list[str]) -> list[str]:
        """A ``_foreach`` node as a Python loop calling its body's compiled function once
        per row (ops/control_flow.py); the body is compiled once per row shape."""
        attrs = node.attr_dict
        data, states = attrs["num_data"], attrs["num_states"]
        avals = tuple(v.aval for v in node.inputs)  # (codegen runs on an inferred graph)
        rows = control_flow.step_avals(avals, data)  # type: ignore[arg-type]
        outs = [self._name_value(node.out(i), node.name) for i in range(node.num_outputs)]
        body, count = self._bind(attrs["body"], f"{node.name}_body"), attrs["num_out_data"]
        step, carry, t, done = (self.names.create(f"{node.name}_{part}")
                                for part in ("step", "carry", "t", "rows"))
        context = f"rt[{self.num_random}]"
        self.num_random += 1
        lines = [f"# {node.name}: a loop over the rows of {inputs[0]}, its body compiled "
                 f"once for rows {', '.join(str(a) for a in rows[:data])}",
                 f"{step} = {self._bind(control_flow.step_function, 'body_function')}("
                 f"{context}, {body}, {self._bind(rows, f'{node.name}_rows')})",
                 f"{carry} = ({'None, ' * count}"  # (a step's results: outputs, states)
                 f"{''.join(f'{name}, ' for name in inputs[data:data + states])})",
                 f"{done} = [{'[], ' * count}]",
                 f"for {t} in {self._bind(range, 'steps')}({self._bind(len, 'length')}"
                 f"({inputs[0]})):",
                 f"    {carry} = {step}({', '.join(f'{x}[{t}]' for x in inputs[:data])}, "
                 f"*{carry}[{count}:], {', '.join(inputs[data + states:])})"]
        lines += [f"    {done}[{i}] += [{carry}[{i}]]" for i in range(count)]
        stack = self._bind(control_flow.stack_rows, "stack_rows")
        lines += [f"{out} = {stack}({done}[{i}], {self._bind(node.aval[i], f'{out}_aval')})"  # type: ignore[index]
                  for i, out in enumerate(outs[:count])]
        return lines + [f"{out} = {carry}[{count + i}]" for i, out in enumerate(outs[count:])]

    def _fused_lines(self, node: Node, inputs: list[str]) -> list[str]:
        """A fused group step by step, every step writing into the group's one buffer."""
        program: Graph = node.attr_dict["program"]
        target = self._target(node)
        out = self._name_value(node.out(), node.name)
        local = {id(p): name for p, name in zip(program.inputs, inputs)}
        steps = [n for n in program.nodes if n.kind == "call"]
        # only our identifier and registry op names: a node's name may hold a newline
        lines = [f"# {out}: fused {' -> '.join(s.opdef.name for s in steps)} in one buffer"]
        for step in steps:
            args = [local.get(id(v.node), out) for v in step.inputs]
            lines.append(f"{out} = {self._call(step, args, target)}")
            target = local[id(step)] = out
        return lines
