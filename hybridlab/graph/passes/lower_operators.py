"""Lowering: MXNet's layer operators become the primitive operators that define them.

::

    %0 = var data                            %0 = var data
    %1 = Activation(%0, act_type='relu') ==> %1 = relu(%0)
    return %1                                return %1

A graph keeps MXNet's operators whole -- ``Activation``, ``softmax``, ``Dropout``,
``BatchNorm``, ``elemwise_add`` -- so what ``tojson()`` writes and ``plot_network`` draws
is what MXNet wrote and drew. Each is a *layer operator* (``OpDef.lower``): its only
definition is a function writing it with primitive operators. This pass, the first of
the compiler, calls that function on graph values and splices the result in place of
the node; every later pass, the gradient builder and the code generator see primitives
only. The last node of a lowering takes the layer node's name (``dense0_relu_fwd``),
the helper nodes are named under it (``softmax0_exp0``), so the generated code still
names the user's layers.

The pass reads its :class:`~hybridlab.graph.passes.context.PassContext`: ``training``
matters to one operator: ``BatchNorm`` lowers to the batch's statistics while training
and to the moving ones when predicting. ``CachedOp`` compiles per mode, so it lowers with
the mode it compiles for. ``keep`` names operators to leave whole (the ONNX exporter
keeps ``BatchNorm``, which ONNX has as one operator).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from hybridlab import name as names
from hybridlab.graph import frontend
from hybridlab.graph.ir import Graph, Node, Value, rebuild
from hybridlab.graph.passes.context import PassContext, PassResult
from hybridlab.ops.registry import run_lowering
from hybridlab.walk import postorder


def lower_operators(graph: Graph, context: PassContext) -> PassResult:
    """Replace every layer-operator node (not named in ``context.keep``) by its lowering
    for ``context.training``."""
    training, keep = context.training, context.keep
    if not any(n.kind == "call" and n.opdef.lower is not None and n.op not in keep
               for n in graph.nodes):
        return PassResult(graph, [])
    changes: list[str] = []

    def visit(node: Node, inputs: tuple[Value, ...]) -> Node | list[Value]:
        fresh = node if all(a is b for a, b in zip(inputs, node.inputs)) else \
            dataclasses.replace(node, inputs=inputs)
        if node.kind != "call" or node.opdef.lower is None or node.op in keep:
            return fresh
        values = _lower(fresh, training)
        made = [n.op for n in _made(values, inputs) if n.kind == "call"]
        changes.append(f"lowered {node.name} ({node.op}) to {', '.join(made) or 'its input'}")  # type: ignore[arg-type]
        return values

    return PassResult(rebuild(graph, visit), changes)


def _made(values: Sequence[Value], inputs: Sequence[Value]) -> list[Node]:
    """The nodes a lowering made for ``values`` (the walk stops at the node's inputs)."""
    stop = {id(v.node) for v in inputs}
    return postorder((v.node for v in values if id(v.node) not in stop),
                     lambda n: [v.node for v in n.inputs if id(v.node) not in stop])


def _lower(node: Node, training: bool) -> list[Value]:
    sym, wrap, unwrap, _ = frontend.current()  # F = sym, installed by symbol (above graph)
    with names.Prefix(f"{node.name}_"):
        result: Any = run_lowering(node.opdef, sym, [wrap(v) for v in node.inputs],
                                   node.attr_dict, training)
    values = [unwrap(r) for r in (result if isinstance(result, (tuple, list)) else [result])]
    if len(values) != node.num_outputs:
        raise TypeError(f"the lowering of {node.op} gave {len(values)} values for its "
                        f"{node.num_outputs} outputs")
    return _named(values, node)


def _named(values: list[Value], node: Node) -> list[Value]:
    """The first result's node takes the layer node's name and origin, unless it is an
    input of the lowering or another result depends on it (then it keeps its own)."""
    first = values[0].node
    if first.kind != "call" or any(first is v.node for v in node.inputs):
        return values
    if any(first is n for n in _made(values[1:], node.inputs)):
        return values
    renamed = dataclasses.replace(first, name=node.name, origin=node.origin or first.origin)
    return [Value(renamed, v.index) if v.node is first else v for v in values]
