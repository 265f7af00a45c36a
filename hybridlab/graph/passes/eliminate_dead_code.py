"""Dead-code elimination: drop nodes no output depends on.

::

    %0 = var x                         %0 = var x
    %1 = relu(%0)            ==>       %2 = _mul_scalar(%0, scalar=2.0)
    %2 = _mul_scalar(%0, scalar=2.0)   return %2
    return %2

A node is live when an output needs it, or when its op is impure (it has an effect
besides its result) -- ``OpDef.pure`` decides. Graph inputs (``var`` nodes) always
stay: they are the program's calling convention.
"""

from __future__ import annotations

from hybridlab.graph.ir import Graph, toposort
from hybridlab.graph.passes.context import PassContext, PassResult


def eliminate_dead_code(graph: Graph, context: PassContext) -> PassResult:
    """Keep only the nodes the outputs, the inputs and impure calls depend on."""
    roots = [v.node for v in graph.outputs] + list(graph.inputs)
    roots += [n for n in graph.nodes if n.kind == "call" and not n.opdef.pure]
    live = {id(n) for n in toposort(roots)}
    kept = tuple(n for n in graph.nodes if id(n) in live)
    changes = [f"removed {n.name} ({n.op or n.kind})" for n in graph.nodes if id(n) not in live]
    return PassResult(Graph(kept, graph.inputs, graph.outputs), changes)
