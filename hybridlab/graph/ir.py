"""The graph IR: a small SSA form with one printed syntax, used by symbols, passes and codegen.

What this module teaches
------------------------
A compiler needs a data structure it can inspect and rewrite. Ours is a list of
:class:`Node` s in topological order. Every node is assigned once (SSA), and refers to
earlier results through a :class:`Value` ``(node, index)``: the ``index``-th output of
``node``. There are four kinds of node, documented the way torch.fx documents its opcodes:

==========  ===============================================================================
kind        meaning
==========  ===============================================================================
``var``     a graph input (data or a parameter), called ``name``; ``op`` is None,
            no inputs. ``Graph.inputs`` lists them in calling order.
``const``   a numpy array known at compile time, held in ``node.value`` (not hashed);
            made by constant folding or by a user constant.
``call``    ``op(*inputs, **attrs)``: ``op`` is a registry name (:func:`registry.get`);
            ``attrs`` are already parsed by ``OpDef.parse_attrs`` and frozen.
``output``  reserved for serialisers that need a node for a result (MXNet JSON
            ``heads``). A :class:`Graph` keeps its results in ``Graph.outputs`` instead,
            so passes never meet an output node.
==========  ===============================================================================

The printed form (``str(graph)``), one line per node, numbered by position::

    %0 = var data : float32[1,512]
    %1 = var fc0_weight : float32[256,512]
    %2 = var fc0_bias : float32[256]
    %3 = FullyConnected(%0, %1, %2, num_hidden=256) : float32[1,256]
    %4 = relu(%3) : float32[1,256]
    %5 = const 10.0 : float32[]
    return %4

Grammar::

    line   := "%" N " = " rhs " : " type          |  "return " value ("," value)*
    rhs    := "var " name  |  "const " literal  |  op "(" value* ("," key "=" attr)* ")"
              (attributes equal to the operator's default are not printed)
    value  := "%" N        (output 0 of node N)   |  "%" N "." i   (output i > 0)
    type   := aval  |  "(" aval ("," aval)* ")"  (several outputs)  |  "?" (not inferred)
    aval   := dtype "[" dim ("," dim)* "]"        e.g. float32[4,8]; a scalar is float32[]

Invariants (checked by :func:`verify`)
--------------------------------------
* ``Graph.nodes`` is in topological order: a node's inputs appear before it.
* Each node appears once (single assignment); ``Graph.inputs`` are ``var`` nodes of the graph.
* Every ``call`` names a registered operator; its ``aval``, when known, equals what the
  operator's ``infer`` rule gives for its inputs' avals.

Nodes compare by identity: two calls of the same op on the same inputs are two values
until the CSE pass decides they are one (we do not hash-cons while building, so CSE stays
a visible pass). Nodes are frozen, so a pass builds new nodes with :func:`rebuild`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from hybridlab import display
from hybridlab.errors import GraphError, ShapeError
from hybridlab.ops import registry
from hybridlab.ops.registry import Aval, RunContext
from hybridlab.userline import format_line, user_frame
from hybridlab.walk import postorder  # the one graph walk, shared with autograd

KINDS = ("var", "const", "call", "output")


class Inference(NamedTuple):
    """What the IR asks of the shape inference (``graph/shapes.py``, which imports this
    module and installs itself here when imported; ``graph/__init__`` imports it): a new
    call node's avals, and the avals a node's operator says it should have."""

    infer_node: Callable[[Node], tuple[Aval, ...]]
    check_node: Callable[[Node], Sequence[Aval]]


_inference: list[Inference] = []  # filled by graph/shapes.py


@dataclass(frozen=True, eq=False)
class Node:
    """One SSA assignment. See the module docstring for the four kinds."""

    kind: str
    op: str | None = None
    inputs: tuple[Value, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()  # sorted (key, value) pairs, values hashable
    name: str = ""
    aval: tuple[Aval, ...] | None = None  # one per output; None until inferred
    value: np.ndarray | None = field(default=None, repr=False)  # const nodes only
    origin: str | None = field(default=None, repr=False)  # the user line that made it
    # MXNet's operator-level attributes (``attr={...}``, ``lr_mult=``, an AttrScope's): strings
    # for tools and the JSON file, never seen by the operator's kernel, infer or grad rules
    notes: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def attr_dict(self) -> dict[str, Any]:
        """The attributes as the ``**attrs`` a kernel, infer or grad rule receives."""
        return dict(self.attrs)

    @property
    def opdef(self) -> registry.OpDef:
        """The registry entry of a ``call`` node."""
        return registry.get(str(self.op))

    @property
    def num_outputs(self) -> int:
        return self.opdef.output_count(self.attr_dict) if self.kind == "call" else 1

    def out(self, index: int = 0) -> Value:
        """The ``index``-th result of this node as a :class:`Value`."""
        return Value(self, index)


class Value(NamedTuple):
    """A reference to one result: output ``index`` of ``node``."""

    node: Node
    index: int = 0  # type: ignore[assignment]  # (shadows tuple.index, as MXNet's name)

    @property
    def aval(self) -> Aval | None:
        return None if self.node.aval is None else self.node.aval[self.index]


def freeze(value: Any) -> Any:
    """Make an attribute value hashable (lists become tuples, dicts sorted tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    return value


def user_origin() -> str | None:
    """``file.py:12 `code``` of the innermost user frame (:mod:`hybridlab.userline`), for
    errors that say where a node was created; None when there is none."""
    frame = user_frame(1)
    return None if frame is None else format_line(frame.f_code.co_filename, frame.f_lineno)


# ---------------------------------------------------------------------------------------
# Building nodes
# ---------------------------------------------------------------------------------------

def var(name: str, aval: Aval | None = None) -> Node:
    """A graph input called ``name``."""
    return Node("var", name=name, aval=None if aval is None else (aval,))


def const(value: Any, name: str = "const") -> Node:
    """A compile-time constant array."""
    array = np.array(value)  # our own copy: the caller may keep writing to theirs
    array.setflags(write=False)  # shared by every run of the program: never written
    return Node("const", name=name, aval=(Aval(array.shape, array.dtype),), value=array)


def call(op: str, inputs: Sequence[Value], attrs: Mapping[str, Any] | None = None,
         name: str = "", origin: str | None = None, parsed: bool = False,
         notes: Mapping[str, str] | None = None) -> Node:
    """``op(*inputs, **attrs)``; the aval is inferred at once when every input has one.
    ``notes``: operator-level attributes (:attr:`Node.notes`)."""
    opdef = registry.get(op)
    full = dict(attrs or {}) if parsed else opdef.parse_attrs(dict(attrs or {}))
    node = Node("call", opdef.name, tuple(Value(*v) for v in inputs),
                tuple(sorted((k, freeze(v)) for k, v in full.items())), name or opdef.name,
                origin=origin, notes=tuple(sorted((notes or {}).items())))
    if all(v.aval is not None for v in node.inputs):
        node = dataclasses.replace(node, aval=_inference[0].infer_node(node))
    return node


# ---------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Graph:
    """Nodes in topological order, the input ``var`` nodes, and the result Values.

    ``meta`` carries pass annotations that are not part of the program's meaning
    (the memory plan's buffer ids, read by codegen).
    """

    nodes: tuple[Node, ...]
    inputs: tuple[Node, ...]
    outputs: tuple[Value, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_outputs(cls, outputs: Sequence[Value], inputs: Sequence[Node] | None = None
                     ) -> Graph:
        """The graph computing ``outputs``; inputs default to its var nodes in order."""
        outs = tuple(Value(*v) for v in outputs)
        nodes = toposort([*(inputs or ()), *(v.node for v in outs)])  # unused inputs stay
        ins = tuple(n for n in nodes if n.kind == "var") if inputs is None else tuple(inputs)
        return cls(tuple(nodes), ins, outs)

    def __str__(self) -> str:
        return format_graph(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython shows the IR
        printer.text(str(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Jupyter draws the graph, with its summary as text (and the install hint when
        graphviz is missing); ``print(graph)`` still gives the IR."""
        return display.mimebundle(self)  # viz fills the hook


def toposort(roots: Iterable[Node]) -> list[Node]:
    """Every node the roots depend on, inputs before users."""
    return postorder(roots, lambda node: [v.node for v in node.inputs])


Visit = Callable[[Node, tuple[Value, ...]], "Node | Sequence[Value]"]


def rebuild(graph: Graph, visit: Visit) -> Graph:
    """Copy ``graph`` node by node: ``visit(node, new_inputs)`` returns a Node or its Values.

    Returning a node keeps output ``i`` as output ``i``; returning a sequence of Values
    replaces each output by an existing value (that is how a pass deletes a node).
    """
    mapping: dict[int, tuple[Value, ...]] = {}
    new_nodes: list[Node] = []
    emitted: set[int] = set()

    def unemitted_inputs(node: Node) -> list[Node]:
        return [v.node for v in node.inputs if id(v.node) not in emitted]

    for node in graph.nodes:
        new_inputs = tuple(mapping[id(v.node)][v.index] for v in node.inputs)
        result = visit(node, new_inputs)
        values = (tuple(result.out(i) for i in range(result.num_outputs))
                  if isinstance(result, Node) else tuple(result))
        # the new nodes a visit made, inputs first; the walk stops at nodes already
        # emitted, so a whole rebuild is O(nodes + edges), not a walk of all the graph
        # above every node (quadratic on a chain)
        for fresh in postorder((v.node for v in values if id(v.node) not in emitted),
                               unemitted_inputs):
            emitted.add(id(fresh))
            new_nodes.append(fresh)
        mapping[id(node)] = values
    outputs = tuple(mapping[id(v.node)][v.index] for v in graph.outputs)
    inputs = tuple(mapping[id(n)][0].node for n in graph.inputs)
    return Graph(tuple(new_nodes), inputs, outputs)  # meta (a plan) is stale after a rewrite


def with_inputs(node: Node, inputs: tuple[Value, ...]) -> Node:
    """``node`` with new inputs (the same node object when nothing changed)."""
    if all(a.node is b.node and a.index == b.index for a, b in zip(inputs, node.inputs)):
        return node
    return dataclasses.replace(node, inputs=inputs)


# ---------------------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------------------

def format_graph(graph: Graph) -> str:
    """The printed SSA form (grammar in the module docstring)."""
    number = {id(n): i for i, n in enumerate(graph.nodes)}
    lines = [f"%{number[id(n)]} = {_format_rhs(n, number)} : {format_type(n.aval)}"
             for n in graph.nodes]
    lines.append("return " + ", ".join(_format_value(v, number) for v in graph.outputs))
    return "\n".join(lines)


def _format_value(value: Value, number: Mapping[int, int]) -> str:
    ref = f"%{number.get(id(value.node), '?')}"
    return ref if value.index == 0 else f"{ref}.{value.index}"


def _format_rhs(node: Node, number: Mapping[int, int]) -> str:
    if node.kind == "var":
        return f"var {format_name(node.name)}"
    if node.kind == "const":
        array = np.asarray(node.value)
        shown = repr(array.item()) if array.size == 1 else f"<{format_name(node.name)}>"
        return f"const {shown}"
    declared = registry.get(node.op).attrs if node.op in registry.OPS else {}
    args = [_format_value(v, number) for v in node.inputs]
    args += [f"{k}={format_attr(v)}" for k, v in node.attrs  # defaults are left out
             if k not in declared or freeze(declared[k].default) != v]
    return f"{node.op}({', '.join(args)})"


def format_name(name: str) -> str:
    """A node name as printed: as is when plain, else quoted with escapes (``'a\\nb'``),
    so a name read from a file can never break the one-line-per-node form."""
    plain = name and name.isprintable() and not any(c.isspace() or c in "'\"" for c in name)
    return name if plain else repr(name)


def format_attr(value: Any) -> str:
    """An attribute as printed in the IR; a sub-program prints as ``{op; op}``."""
    if isinstance(value, Graph):
        return "{" + "; ".join(str(n.op) for n in value.nodes if n.kind == "call") + "}"
    return repr(value)


def attr_text(value: Any) -> str:
    """An attribute in MXNet's JSON string form ("128", "(2, 3)", "True", "0.5")."""
    if isinstance(value, Graph):
        raise ValueError("a fused sub-graph attribute cannot be saved; save the symbol "
                         "before running compiler passes on it")
    return value if isinstance(value, str) else repr(value)


def format_type(avals: tuple[Aval, ...] | None) -> str:
    if avals is None:
        return "?"
    return str(avals[0]) if len(avals) == 1 else "(" + ", ".join(map(str, avals)) + ")"


# ---------------------------------------------------------------------------------------
# Checking, and the reference interpreter
# ---------------------------------------------------------------------------------------

def verify(graph: Graph) -> Graph:
    """Check the invariants of the module docstring; on failure print the graph in the error."""
    problems: list[str] = []
    position: dict[int, int] = {}
    for i, node in enumerate(graph.nodes):
        if id(node) in position:
            problems.append(f"{_label(node, i)} is assigned twice (also %{position[id(node)]})")
        position[id(node)] = i
        problems += _check_node(node, i, position)
    for value in graph.outputs:
        if id(value.node) not in position:
            problems.append(f"output {format_name(value.node.name)} is not a node of the graph")
        elif not 0 <= value.index < _output_count(value.node):
            problems.append(f"output {format_name(value.node.name)}.{value.index}: the node "
                            f"has {_output_count(value.node)} output(s)")
    for node in graph.inputs:
        if node.kind != "var" or id(node) not in position:
            problems.append(f"input {format_name(node.name)} is not a var node of the graph")
    if problems:
        raise GraphError("graph failed verification:\n  " + "\n  ".join(problems)
                         + "\n\nthe graph:\n" + format_graph(graph))
    return graph


def _label(node: Node, i: int) -> str:
    return f"%{i} ({format_name(node.name)})"


def _known_op(node: Node) -> bool:
    if not isinstance(node.op, str):
        return False
    try:
        registry.get(node.op)
    except (KeyError, TypeError):
        return False
    return True


def _output_count(node: Node) -> int:
    """Outputs of any node, even one whose op is unknown (verify reports that itself)."""
    return node.num_outputs if node.kind == "call" and _known_op(node) else 1


def _check_node(node: Node, i: int, position: Mapping[int, int]) -> list[str]:
    if node.kind not in ("var", "const", "call"):
        return [f"%{i} has kind {node.kind!r}; graphs hold var, const and call nodes"]
    late = [v.node.name for v in node.inputs if position.get(id(v.node), i) >= i]
    if late:
        return [f"{_label(node, i)} uses {late} before they are assigned (not topological)"]
    if node.kind == "const" and node.value is None:
        return [f"%{i} is a const node without a value"]
    if node.kind != "call":
        return [f"{_label(node, i)} is a {node.kind} node with inputs"] if node.inputs else []
    if not _known_op(node):
        return [f"{_label(node, i)}: unknown operator {node.op!r}"]
    bad = [f"%{position[id(v.node)]}.{v.index}" for v in node.inputs
           if not 0 <= v.index < _output_count(v.node)]
    if bad:
        return [f"{_label(node, i)} reads {bad}: past the outputs of those nodes"]
    return _check_call(node, i)


def _check_call(node: Node, i: int) -> list[str]:
    """Arity, and the aval against the op's infer rule once the inputs' avals are known."""
    opdef = node.opdef
    names = opdef.input_names(node.attr_dict)
    variadic = bool(names) and names[0].startswith("*")
    if (len(node.inputs) < 1) if variadic and names else len(node.inputs) != len(names):
        return [f"{_label(node, i)}: {node.op} takes inputs {list(names)}, "
                f"got {len(node.inputs)}"]
    if any(v.aval is None for v in node.inputs):
        return []
    if node.aval is None:
        return [f"{_label(node, i)} has no type although its inputs' types are known "
                f"(build it with ir.call or run shapes.infer_graph)"]
    try:
        expected = tuple(_inference[0].check_node(node))
    except (ShapeError, TypeError) as err:
        return [f"{_label(node, i)}: {err}"]
    if expected != node.aval:
        return [f"{_label(node, i)} claims {format_type(node.aval)} but {node.op} "
                f"gives {format_type(expected)}"]
    return []


def interpret(graph: Graph, arrays: Sequence[np.ndarray], context: RunContext,
              env: dict[int, tuple[np.ndarray, ...]] | None = None
              ) -> Iterator[tuple[Node, list[np.ndarray]]]:
    """Run the graph node by node, yielding each operator node with the arrays it read
    (after computing it); ``env`` collects every node's results, by ``id(node)``."""
    env = {} if env is None else env
    env.update({id(n): (a,) for n, a in zip(graph.inputs, arrays)})
    for node in graph.nodes:
        if node.kind == "const":
            env[id(node)] = (np.asarray(node.value),)
        elif node.kind == "call":
            args = [env[id(v.node)][v.index] for v in node.inputs]
            env[id(node)] = run_kernel(node, args, context)
            yield node, args


def run_kernel(node: Node, args: Sequence[np.ndarray], context: RunContext
               ) -> tuple[np.ndarray, ...]:
    """Call a node's kernel; always returns a tuple of arrays (one per output)."""
    opdef = node.opdef
    extra = {"rt": context} if opdef.needs_context else {}
    result = opdef.kernel(*args, **node.attr_dict, **extra)
    return tuple(result) if node.num_outputs > 1 else (np.asarray(result),)


