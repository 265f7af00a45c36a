"""Anything drawable -> (graph IR, parameter names); the registry's kind of an operator.

A Symbol, a graph IR, a CachedOp and a hybridized block that has run all become a
``graph.ir.Graph`` here, so every instrument and drawing takes any of them. A var counts
as a parameter when the registry names the operator input it feeds as one (``weight``,
``bias``, ...), when it carries a learnable var's attributes (``init``, ``lr_mult``,
``wd_mult``), or when a block says so (its ``collect_params()``).
"""

from __future__ import annotations

from typing import Any

from hybridlab.graph.ir import Graph

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
        return cached_op.graph, parameter_names(cached_op.graph) + block_parameters(obj)
    raise TypeError(f"cannot draw a {type(obj).__name__}: expected a Symbol, a graph.ir.Graph, "
                    f"a CachedOp, or a hybridized HybridBlock that has been called once")


def cached_op_of(obj: Any) -> Any:
    """The CachedOp itself, or the one a hybridized block compiled for its latest call."""
    op = getattr(obj, "_cached_op", None)  # a hybridized HybridBlock's one CachedOp
    if op is not None:
        return op if op.last_program is not None else None
    return obj if hasattr(obj, "code") and hasattr(obj, "graph") else None


def block_parameters(obj: Any) -> tuple[str, ...]:
    """A block's own parameter names (covers ``self.params.get`` weights fed to ``dot``)."""
    collect = getattr(obj, "collect_params", None)
    return tuple(collect().keys()) if collect is not None else ()


def parameter_names(graph: Graph) -> tuple[str, ...]:
    """Vars that feed an input the registry names as a parameter (``weight``), or that
    carry a learnable var's attributes (``init``, ``lr_mult``, ``wd_mult``)."""
    from hybridlab.symbol import PARAMETER_INPUTS

    names = [n.name for n in graph.inputs if any(k in LEARNABLE_ATTRS for k, _ in n.attrs)]
    for node in graph.nodes:
        if node.kind == "call":
            slots = node.opdef.input_names(node.attr_dict)
            names += [v.node.name for v, slot in zip(node.inputs, slots)
                      if slot in PARAMETER_INPUTS and v.node.kind == "var"]
    return tuple(dict.fromkeys(names))


def _with_shapes(symbol: Any, graph: Graph, shape: dict[str, Any], dtype: Any) -> Graph:
    """``graph`` with every type inferred from the data shapes (parameters' shapes follow)."""
    import numpy as np

    from hybridlab.graph.ir import infer_shapes
    from hybridlab.ops.registry import Aval

    arg_shapes, _, aux_shapes = symbol.infer_shape(**shape)
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    known = dict(zip(names, (arg_shapes or []) + (aux_shapes or [])))
    if any(known.get(n.name) is None for n in graph.inputs):
        return graph  # not enough shapes given: draw without types rather than fail
    return infer_shapes(graph, {n: Aval(tuple(s), np.dtype(dtype)) for n, s in known.items()})


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
