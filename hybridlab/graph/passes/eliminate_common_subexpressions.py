"""Common-subexpression elimination: compute each pure ``op(inputs, attrs)`` once.

::

    %2 = broadcast_mul(%0, %1)                %2 = broadcast_mul(%0, %1)
    %3 = broadcast_mul(%0, %1)      ==>       %4 = broadcast_add(%2, %2)
    %4 = broadcast_add(%2, %3)

Two nodes are the same computation when they call the same op on the same input
Values with the same attributes. Impure ops and ops drawing random numbers are never
merged (two ``random.normal`` calls must differ); the registry says which they are.
Because the pass walks in topological order, merging cascades to the users.
"""

from __future__ import annotations

from typing import Any

from hybridlab.graph.ir import Graph, Node, Value, rebuild, with_inputs
from hybridlab.graph.passes.context import PassContext, PassResult


def eliminate_common_subexpressions(graph: Graph, context: PassContext) -> PassResult:
    """Replace each repeated pure call by the first node computing it."""
    seen: dict[Any, Node] = {}
    changes: list[str] = []

    def visit(node: Node, inputs: tuple[Value, ...]) -> Node | list[Value]:
        node = with_inputs(node, inputs)
        if node.kind != "call" or not node.opdef.pure or node.opdef.needs_context:
            return node
        key = (node.op, tuple((id(v.node), v.index) for v in inputs), node.attrs)
        first = seen.setdefault(key, node)
        if first is node:
            return node
        changes.append(f"{node.name} is the same as {first.name}")
        return [first.out(i) for i in range(node.num_outputs)]

    return PassResult(rebuild(graph, visit), changes)
