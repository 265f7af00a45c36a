"""Code generation: a Graph becomes readable Python source, one line per node.

What this module teaches
------------------------
"Compiling the whole program" can be as simple as writing out, once, the Python a
careful person would have typed by hand, and letting ``compile()`` turn it into a
function. For the seed MLP it looks like::

    def forward(data, fc0_weight, fc0_bias, ..., fc2_bias, *, rt):
        fc0 = FullyConnected(data, fc0_weight, fc0_bias, flatten=True, no_bias=False, ...)
        relu0 = relu(fc0); fc0 = None
        ...
        return (fc2,)

and with ``static_alloc``, a node whose kernel is a numpy ufunc writes ``out=`` a view
of the arena planned by ``plan_memory`` (``buf0_add0``), allocated once for the program::

        add0 = np_add(x, b, out=buf0_add0)
        relu0 = _fresh(relu(add0), add0); add0 = None

``name = None`` after a value's last use drops the reference (that is the memory plan,
visible), and a fused group is printed step by step writing ``out=`` its one buffer.
NOTE: [Only out= goes into the arena]: a kernel without a ufunc (``FullyConnected``,
``relu``) allocates its result whatever we do, so it keeps that array: copying it into
the arena would cost one more pass over memory and save nothing (numpy reuses freed
blocks). ``_fresh`` copies a result only if it is a view of an arena buffer that a later
step overwrites; graph outputs are always fresh arrays because the caller keeps them.

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
through a compiled program shows the generated line that failed.
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
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from hybridlab.errors import GraphError, ShapeError
from hybridlab.graph.ir import Graph, Node, Value
from hybridlab.graph.passes.fuse_elementwise import FUSED
from hybridlab.ops.registry import RunContext

_RESERVED = {"np", "rt", "forward", "_fresh", "_into"}
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


def check_source(source: str, identifiers: set[str]) -> None:
    """Refuse generated source that is not made of our own pieces (defence in depth).

    The writer only ever emits identifiers from its :class:`Namespace`, numbers and
    tuples formatted by :func:`_literal`, ``rt[i]`` and comments built from those. So
    the parsed program holds one function, no string constants, no attribute access and
    no name we did not create. A graph string that slipped into a line would break one
    of these rules and is caught here, before ``exec``.
    """
    tree = ast.parse(source)
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
        if all(p is not None for p in parts):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return None


def _fresh(result: np.ndarray, *inputs: np.ndarray) -> np.ndarray:
    """The first step of a fused group owns its buffer: copy if the kernel returned a view."""
    result = np.asarray(result)
    return result.copy() if any(np.may_share_memory(result, a) for a in inputs) else result


def _into(out: np.ndarray, result: np.ndarray) -> np.ndarray:
    np.copyto(out, result)
    return out


@dataclass
class Program:
    """A compiled graph: ``program(*arrays) -> tuple of arrays``; ``.source`` is the code."""

    source: str
    function: Callable[..., tuple]
    graph: Graph
    static_shape: bool = False
    filename: str = ""
    buffers: list[np.ndarray] = field(default_factory=list)  # static_alloc's memory
    num_random: int = 0  # nodes whose kernel takes a RunContext: rt[0], rt[1], ...
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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
        contexts = tuple(RunContext(training, r if r is not None else np.random.default_rng())
                         for r in rngs)
        return tuple(self.run(arrays, contexts))

    def run(self, arrays: Sequence[np.ndarray], contexts: tuple[RunContext, ...] = ()
            ) -> list[np.ndarray]:
        """The call without the checks (a CachedOp made sure the inputs fit): the hot path."""
        if not self.buffers:  # nothing is shared between calls: no lock, nothing to own
            return [np.asarray(r) for r in self.function(*arrays, rt=contexts)]
        with self._lock:  # static buffers are shared by every call of this program
            results = self.function(*arrays, rt=contexts)
        return [self._own(np.asarray(r)) for r in results]  # ufuncs give 0-d scalars

    def _own(self, result: np.ndarray) -> np.ndarray:
        """A kernel may return its input (a view of a static buffer): the caller keeps a copy."""
        if any(np.may_share_memory(result, b) for b in self.buffers):
            return result.copy()
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
    """Generate, compile and wrap the source of ``graph`` (see the module docstring)."""
    writer = _Writer(graph, static_alloc and "memory" in graph.meta)
    source = writer.write()
    check_source(source, writer.names.created | set(writer.table) | {"rt"})
    filename = f"<hybridlab-{name}-{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = dict(writer.table)
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 -- our own generated source
    return Program(source, scope["forward"], graph, static_shape or static_alloc, filename,
                   list(writer.buffers.values()), writer.num_random)


class _Writer:
    """Turns one graph into source lines; ``table`` holds every object the code refers to."""

    def __init__(self, graph: Graph, static: bool) -> None:
        self.graph, self.names = graph, Namespace()
        self.plan = graph.meta.get("memory") if static else None
        self.table: dict[str, Any] = {"np": np, "_fresh": _fresh, "_into": _into}
        self.var: dict[tuple[int, int], str] = {}
        self.objects: dict[int, str] = {}
        self.buffers: dict[int, np.ndarray] = {}
        self.placed: set[tuple[int, int]] = set()  # values written into the arena
        self.outputs = {(id(v.node), v.index) for v in graph.outputs}
        self.num_random = 0

    def write(self) -> str:
        params = [self._name_value(n.out(), n.name) for n in self.graph.inputs]
        lines = [f"def forward({', '.join(params + ['*', 'rt'])}):"]
        last = {(id(v.node), v.index): i for i, n in enumerate(self.graph.nodes)
                for v in n.inputs}
        for step, node in enumerate(self.graph.nodes):
            if node.kind == "const":
                self.var[(id(node), 0)] = self._bind(node.value, node.name)
            elif node.kind == "call":
                code = self._call_lines(node)
                dead = [self.var[(id(v.node), v.index)] for v in dict.fromkeys(node.inputs)
                        if last.get((id(v.node), v.index)) == step and v.node.kind == "call"
                        and (id(v.node), v.index) not in self.outputs]
                code[-1] += "".join(f"; {d} = None" for d in dead)
                lines += ["    " + c for c in code]
        results = [self.var[(id(v.node), v.index)] for v in self.graph.outputs]
        lines.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
        return "\n".join(lines) + "\n"

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

    def _call_lines(self, node: Node) -> list[str]:
        inputs = [self.var[(id(v.node), v.index)] for v in node.inputs]
        if node.op == FUSED:
            return self._fused_lines(node, inputs)
        outs = [self._name_value(node.out(i), node.name) for i in range(node.num_outputs)]
        if len(outs) > 1:
            return [f"{', '.join(outs)} = {self._call(node, inputs)}"]
        # NOTE: [Views of static buffers] a kernel may return a view of its input (a
        # reshape); a later step would overwrite that buffer, so such results are owned
        owners = [name for v, name in zip(node.inputs, inputs)
                  if (id(v.node), v.index) in self.placed]
        # NOTE: [Only out= goes into the arena]: other kernels allocate their result anyway
        target = self._view(node) if node.opdef.kernel_out is not None else None
        return [self._write(node, inputs, target, outs[0], owners)]

    def _call(self, node: Node, args: list[str]) -> str:
        return f"{self._bind(node.opdef.kernel, node.op)}({self._args(node, args)})"

    def _write(self, node: Node, args: list[str], target: str | None, out: str,
               owners: list[str]) -> str:
        """``out = node(args)``, written into ``target`` when there is one."""
        kernel_out = node.opdef.kernel_out
        if target is None:
            call = self._call(node, args)
            return f"{out} = _fresh({call}, {', '.join(owners)})" if owners else f"{out} = {call}"
        if kernel_out is not None:
            function = self._bind(kernel_out, node.opdef.name + "_out")
            return f"{out} = {function}({self._args(node, [*args, f'out={target}'])})"
        return f"{out} = _into({target}, {self._call(node, args)})"

    def _view(self, node: Node) -> str | None:
        """The static buffer view a single-output node writes into, if any."""
        key = (id(node), 0)
        if self.plan is None or node.num_outputs != 1 or key in self.outputs:
            return None
        buffer = self.plan.buffer_of.get(key)
        if buffer is None:
            return None
        if buffer not in self.buffers:
            self.buffers[buffer] = np.empty(self.plan.buffer_bytes[buffer], np.uint8)
        self.placed.add(key)
        aval, offset = node.aval[0], self.plan.offset_of[key]
        count = int(np.prod(aval.shape, dtype=np.int64))
        flat = self.buffers[buffer][offset:offset + count * np.dtype(aval.dtype).itemsize]
        return self._bind(flat.view(aval.dtype).reshape(aval.shape), f"buf{buffer}_{node.name}")

    def _fused_lines(self, node: Node, inputs: list[str]) -> list[str]:
        """A fused group step by step; the first step without a static buffer allocates
        one that shares no memory with the inputs, since the next steps write into it."""
        program: Graph = node.attr_dict["program"]
        out = self._name_value(node.out(), node.name)
        local = {id(p): name for p, name in zip(program.inputs, inputs)}
        steps = [n for n in program.nodes if n.kind == "call"]
        # only our identifier and registry op names: a node's name may hold a newline
        lines = [f"# {out}: fused {' -> '.join(s.opdef.name for s in steps)} in one buffer"]
        target = self._view(node)
        for step in steps:
            args = [local.get(id(v.node), out) for v in step.inputs]
            lines.append(self._write(step, args, target, out, inputs))
            target = local[id(step)] = out
        return lines
