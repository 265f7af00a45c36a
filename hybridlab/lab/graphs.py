"""Anything drawable -> (graph IR, parameter names); the registry's kind of an operator.

A Symbol, a graph IR, a CachedOp and a hybridized block that has run all become a
``graph.ir.Graph`` here, so every instrument and drawing takes any of them. A var counts
as a parameter when the registry names the operator input it feeds as one (``weight``,
``bias``, ...), when it carries a learnable var's attributes (``init``, ``lr_mult``,
``wd_mult``), or when a block says so (its ``collect_params()``).

Blocks (:func:`blocks`): a real network has hundreds of nodes, but it was *written* as a few
dozen blocks, and a drawing that shows one box per block reads as a picture. Where a block
boundary is in the graph's structure, it is found there: a *cut point* is an operator whose
result is, once it is computed, the only value still waiting to be read -- every path from
the input to the output passes through it. The operators between two cut points form a
block (a residual block ends at its sum, an inception block at its concatenation, a dense
layer at the concatenation that grows its input); runs of one-operator blocks (the stem,
the head, a pooling between stages) are merged into one chain, and an elementwise operator
right after a block (the ReLU after a residual sum) joins it. A block is named by the name
scope its parameters share (``inception_3a/1x1_w``, ``inception_3a/3x3_w`` ->
``inception_3a``), or its operators' names when it has no parameters; where names carry no
scope (several ONNX files name nodes only by number), by its kind and number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from hybridlab.graph.ir import Graph, format_type
from hybridlab.graph.passes import derived_input

LEARNABLE_ATTRS = ("__init__", "__lr_mult__", "__wd_mult__")  # only trainable vars have them


def drawable(obj: Any) -> bool:
    """A Graph, a Symbol, a CachedOp or a hybridized block that has run."""
    return isinstance(obj, Graph) or hasattr(obj, "to_graph") or cached_op_of(obj) is not None


def as_graph(obj: Any, shape: dict[str, Any] | None = None, dtype: Any = "float32"
             ) -> tuple[Graph, tuple[str, ...]]:
    """``(graph, parameter names)`` for anything drawable; ``shape`` fills in the types."""
    if isinstance(obj, Graph):
        return obj, parameter_names(obj)
    if hasattr(obj, "to_graph"):  # a Symbol
        graph: Graph = obj.to_graph()
        if shape:
            graph = _with_shapes(obj, graph, shape, dtype)
        return graph, parameter_names(graph)
    cached_op = cached_op_of(obj)
    if cached_op is not None:
        graph = _typed(cached_op)
        return graph, parameter_names(graph) + block_parameters(obj)
    raise TypeError(f"cannot draw a {type(obj).__name__}: expected a Symbol, a graph.ir.Graph, "
                    f"a CachedOp, or a hybridized HybridBlock that has been called once")


def cached_op_of(obj: Any) -> Any:
    """The CachedOp itself, or the one a hybridized block compiled for its latest call."""
    op = getattr(obj, "_cached_op", None)  # a hybridized HybridBlock's one CachedOp
    if op is not None:
        return op if op.last_program is not None else None
    return obj if hasattr(obj, "code") and hasattr(obj, "graph") else None


def _typed(cached_op: Any) -> Graph:
    """The CachedOp's graph with types: a SymbolBlock's graph comes from its Symbol, untyped;
    the types are then inferred from the avals of the last call's inputs."""
    from hybridlab.graph.shapes import infer_graph

    graph: Graph = cached_op.graph
    last = getattr(cached_op, "_last", None)
    if last is not None and len(last.in_avals) == len(graph.inputs) and any(
            node.aval is None for node in graph.nodes if node.kind == "call"):
        return infer_graph(graph, list(last.in_avals))
    return graph


def block_parameters(obj: Any) -> tuple[str, ...]:
    """A block's own parameter names (covers ``self.params.get`` weights fed to ``dot``)."""
    collect = getattr(obj, "collect_params", None)
    return tuple(collect().keys()) if collect is not None else ()


def parameter_names(graph: Graph) -> tuple[str, ...]:
    """Vars that feed an input the registry names as a parameter (``weight``), or that
    carry a learnable var's attributes (``init``, ``lr_mult``, ``wd_mult``)."""

    fed = set(parameter_names_of(graph.nodes))
    return tuple(n.name for n in graph.inputs  # in the graph's order
                 if n.name in fed or any(k in LEARNABLE_ATTRS for k, _ in n.attrs))


def _with_shapes(symbol: Any, graph: Graph, shape: dict[str, Any], dtype: Any) -> Graph:
    """``graph`` with every type inferred from the data shapes (parameters' shapes follow)."""
    import numpy as np

    from hybridlab.graph.shapes import infer_graph
    from hybridlab.ops.registry import Aval

    arg_shapes, _, aux_shapes = symbol.infer_shape(**shape)
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    known: dict[str, list[Any]] = {}  # name -> shapes in graph order (two vars may share one)
    for name, found in zip(names, (arg_shapes or []) + (aux_shapes or [])):
        known.setdefault(name, []).append(found)
    if any(not known.get(n.name) for n in graph.inputs):
        return graph  # not enough shapes given: draw without types rather than fail
    def dtype_of(name: str) -> Any:  # one dtype, or MXNet's {name: dtype} (float32 else)
        return np.dtype(dtype.get(name, "float32") if isinstance(dtype, dict) else dtype)
    return infer_graph(graph, [Aval(tuple(known[n.name].pop(0)), dtype_of(n.name))
                               for n in graph.inputs])


def op_kind(name: str) -> str:
    """The registry's kind of an op name (``OpDef.kind``), or "other" (CachedOp, user ops)."""
    from hybridlab.ops import registry

    try:
        return registry.get(name).kind.value
    except KeyError:  # not a registry operator: a CachedOp, or a task pushed by hand
        return "other"


def unused_nodes(graph: Graph) -> set[int]:
    """Ids of the nodes that no graph output depends on (dead code)."""
    used = {id(v.node) for v in graph.outputs} | {id(n) for n in graph.inputs}
    for node in reversed(graph.nodes):
        if id(node) in used:
            used.update(id(v.node) for v in node.inputs)
    return {id(n) for n in graph.nodes} - used


def summary(graph: Graph, params: Any = ()) -> str:
    """A one-line description that does not depend on graphviz (nbval compares it)."""
    counts: dict[str, int] = {}
    for node in graph.nodes:
        if node.kind == "call":
            counts[str(node.op)] = counts.get(str(node.op), 0) + 1
    ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
    n_params = sum(1 for n in graph.inputs if n.name in set(params))
    unused = len(unused_nodes(graph))
    return (f"Graph(nodes={len(graph.nodes)}, inputs={len(graph.inputs) - n_params}, "
            f"params={n_params}, ops=[{ops}]{f', unused={unused}' if unused else ''})")


# --- what a drawing's node says ---------------------------------------------------------
def fused_body(node: Any) -> Graph | None:
    """The sub-program a node carries as an attribute (a fused group's program, a loop's
    step: ``func`` for a while_loop, not its ``cond``), or None."""
    graphs = {k: v for k, v in node.attrs if isinstance(v, Graph)}
    return graphs.get("func", next(iter(graphs.values()), None))


def operator_calls(graph: Graph) -> list[Any]:
    """Every operator node, those inside fused groups included (what a drawing shows)."""
    found: list[Any] = []
    for node in graph.nodes:
        body = fused_body(node) if node.kind == "call" else None
        found += (operator_calls(body) if body is not None
                  else [node] if node.kind == "call" else [])
    return found


def changed_attrs(node: Any, limit: int = 2) -> list[str]:
    """The (at most ``limit``) short attributes that differ from the operator's defaults."""
    defaults = {key: spec.default for key, spec in node.opdef.attrs.items()}
    shown = [f"{k}={v!r}" for k, v in node.attrs
             if defaults.get(k, object()) != v and len(repr(v)) <= 16]
    return shown[:limit]


# --- blocks: one box per residual / inception / dense block --------------------------------
SUM_OPS = frozenset({"elemwise_add", "broadcast_add", "_plus", "add", "ElementWiseSum",
                     "add_n", "_Plus"})
CONCAT_OPS = frozenset({"Concat", "concat"})
WEIGHT_SUFFIX = re.compile(  # "conv1_w_0" -> "conv1": whose weight, not which of its weights
    r"([_/.:-](w|b|s|weight|bias|gamma|beta|scale|mean|var|rm|riv|moving_mean|moving_var|"
    r"running_mean|running_var|\d+))+$")
AUTO_NAME = re.compile(r"^[A-Za-z_]*\d+$")  # "relu0", "r38": a counter, not a scope


@dataclass(frozen=True)
class Block:
    """A run of operator nodes drawn as one box: its name, its kind (``residual block``,
    ``inception block``, ``dense layer``, ``chain``, ``block``) and its nodes in order."""

    name: str
    kind: str
    nodes: tuple[Any, ...]
    count: int = 1  # blocks of this kind merged into one box (a stage of a big network)

    def op_counts(self) -> dict[str, int]:
        """How many nodes of each operator the block holds (first seen first)."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[str(node.op)] = counts.get(str(node.op), 0) + 1
        return counts


def block_lines(block: Block) -> list[str]:
    """A closed block's label: its name, kind and size, its first operators, its type."""
    counts = [f"{op} x{n}" if n > 1 else op for op, n in block.op_counts().items()]
    kind = block.kind if block.count == 1 else f"{block.count} x {block.kind}"
    lines = [block.name, f"{kind}: {len(block.nodes)} ops",
             ", ".join(counts[:3]) + (", ..." if len(counts) > 3 else ""),
             format_type(block.nodes[-1].aval) if block.nodes[-1].aval else ""]
    return [line for line in lines if line]


def block_edges(graph: Graph, found: Sequence[Block], drawn: dict[int, str]
                ) -> list[tuple[str, str]]:
    """The edges of a block drawing, once each: ``drawn`` maps ``id(node)`` to what draws
    it (its block's box, or the node itself); an edge joins two of them, and the last
    drawn of each output to ``out<i>``."""
    edges: dict[tuple[str, str], None] = {}
    for node in (node for block in found for node in block.nodes):
        for tail in (drawn.get(id(value.node)) for value in node.inputs):
            if tail is not None and tail != drawn[id(node)]:
                edges[(tail, drawn[id(node)])] = None
    for index, value in enumerate(graph.outputs):
        if id(value.node) in drawn:
            edges[(drawn[id(value.node)], f"out{index}")] = None
    return list(edges)


def cut_points(graph: Graph) -> list[int]:
    """Positions (in the list of operator nodes) of the cut points: operators whose result
    is, once computed, the only result still to be read (inputs, weights and constants are
    there from the start: they are never waited for)."""
    calls = [n for n in graph.nodes if n.kind == "call"]
    readers: dict[int, int] = {}
    for node in calls:
        for value in node.inputs:
            if value.node.kind == "call":
                readers[id(value.node)] = readers.get(id(value.node), 0) + 1
    for value in graph.outputs:  # an output is read after the last operator
        readers[id(value.node)] = readers.get(id(value.node), 0) + 1
    waiting: dict[int, int] = {}
    cuts = []
    for position, node in enumerate(calls):
        for value in node.inputs:
            key = id(value.node)
            if key in waiting:
                waiting[key] -= 1
                if not waiting[key]:
                    del waiting[key]
        if readers.get(id(node)):
            waiting[id(node)] = readers[id(node)]
        if len(waiting) == 1 and id(node) in waiting:
            cuts.append(position)
    return cuts


def blocks(graph: Graph, most: int = 24) -> list[Block]:
    """The graph's operators as blocks (the module docstring says how they are found).
    When there are more than ``most``, consecutive blocks of one kind whose names share a
    parent scope (``conv2_1`` ... ``conv2_6``: a stage of DenseNet) become one block."""
    calls = [n for n in graph.nodes if n.kind == "call"]
    runs: list[list[Any]] = []
    start = 0
    for cut in [*cut_points(graph), len(calls) - 1]:
        if cut >= start:
            runs.append(calls[start:cut + 1])
            start = cut + 1
    merged: list[list[Any]] = []
    for run in runs:  # an elementwise op after a block joins it; single ops make chains
        last = merged[-1] if merged else None
        if last is not None and len(run) == 1 and len(last) > 1 and _kind(last) != "chain" \
                and run[0].opdef.kind.value == "elementwise" and len(run[0].inputs) == 1:
            last.extend(run)
        elif last is not None and _kind(run) == "chain" and _kind(last) == "chain":
            last.extend(run)
        else:
            merged.append(list(run))
    scopes = _strip_common([_scope(run) for run in merged])
    found: list[Block] = []
    seen: dict[str, int] = {}
    numbers: dict[str, int] = {}
    for index, (run, scope) in enumerate(zip(merged, scopes)):
        kind = _kind(run)
        if not scope and len(run) == 1:
            scope = str(run[0].op)  # a pooling between two stages, say
        if not scope:
            ends = {0: "stem", len(merged) - 1: "head"}
            numbers[kind] = numbers.get(kind, 0) + 1
            scope = (ends[index] if kind == "chain" and index in ends and len(merged) > 2
                     else f"{kind} {numbers[kind]}")
        seen[scope] = seen.get(scope, 0) + 1
        found.append(Block(scope if seen[scope] == 1 else f"{scope} ({seen[scope]})", kind,
                           tuple(run)))
    return found if len(found) <= most else _stages(found)


def _stages(found: list[Block]) -> list[Block]:
    """Consecutive blocks of one kind with one parent scope, merged (``conv2_1 ... conv2_6``)."""
    def parent(block: Block) -> str:
        return re.sub(r"[_/.-][^_/.-]*$", "", block.name) if block.kind != "chain" else ""

    merged: list[list[Block]] = []
    for block in found:
        if merged and parent(block) and parent(block) == parent(merged[-1][0]) \
                and block.kind == merged[-1][0].kind:
            merged[-1].append(block)
        else:
            merged.append([block])
    return [run[0] if len(run) == 1 else
            Block(f"{run[0].name} ... {run[-1].name}", run[0].kind,
                  tuple(n for b in run for n in b.nodes), len(run)) for run in merged]


def block_of(found: Sequence[Block]) -> dict[int, str]:
    """id(node) -> the name of its block (``to_dot``'s ``groups``)."""
    return {id(node): block.name for block in found for node in block.nodes}


def _kind(run: Sequence[Any]) -> str:
    inside = {id(n) for n in run}

    if len(run) == 1:
        return "chain"
    for node in run:
        if node.op in CONCAT_OPS:
            if len(node.inputs) >= 3:
                return "inception block"
            if any(id(v.node) not in inside for v in node.inputs):
                return "dense layer"
    if any(node.op in SUM_OPS and sum(v.node.kind == "call" for v in node.inputs) >= 2
           for node in run):  # two results summed, not a result and its bias
        return "residual block"
    branching = any(sum(1 for m in run for v in m.inputs if v.node is n) > 1 for n in run)
    return "block" if branching else "chain"


def source_names(var: Any) -> list[str]:
    """The names a var stands for: the inputs a pass derived it from (a transposed or a
    BatchNorm-folded weight: ``graph.passes.derived_input``), else its own."""
    derived = derived_input(var)
    return [var.name] if derived is None else [name for name in derived.sources if name]


def parameter_names_of(nodes: Sequence[Any]) -> list[str]:
    """Vars the nodes read through an input the registry names as a parameter."""
    from hybridlab.symbol import PARAMETER_INPUTS

    names = []
    for node in nodes:
        if node.kind == "call":
            slots = node.opdef.input_names(node.attr_dict)
            names += [v.node.name for v, slot in zip(node.inputs, slots)
                      if slot in PARAMETER_INPUTS and v.node.kind == "var"]
    return names


def _scope(run: Sequence[Any]) -> str:
    """The name scope a run's inputs and weights (else its operators) share, or ""."""
    names = [WEIGHT_SUFFIX.sub("", name) for n in run for v in n.inputs
             if v.node.kind == "var" for name in source_names(v.node)
             if not AUTO_NAME.match(name)]
    names = names or [str(n.name) for n in run if not AUTO_NAME.match(str(n.name))]
    if not names:
        return ""
    prefix = names[0]
    for name in names[1:]:
        while not name.startswith(prefix):
            prefix = prefix[:-1]
    if len(names) > 1 and prefix not in names:  # cut back to the last separator
        prefix = re.sub(r"[^/_.:-]*$", "", prefix)
    return prefix.rstrip("/_.:-")


def _strip_common(scopes: list[str]) -> list[str]:
    """Leave out a leading scope every named block shares: a path (``gpu_0/``) or a block
    counter's name (``resnet0_``), never a word that says what the blocks are
    (``inception_``)."""
    named = [s for s in scopes if s]
    if len(named) < 2:
        return scopes
    prefix = named[0] + "/"  # a scope that is the shared prefix itself ("gpu_0") counts
    for name in named[1:]:
        while not (name + "/").startswith(prefix):
            prefix = prefix[:-1]
    prefix = re.sub(r"[^/_]*$", "", prefix)
    last = prefix[:-1].split("/")[-1].split("_")[-1]
    if prefix and (prefix.endswith("/") or any(c.isdigit() for c in last)):
        return [s[len(prefix):] for s in scopes]  # "gpu_0" itself becomes "": unnamed
    return scopes
