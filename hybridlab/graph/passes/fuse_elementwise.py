"""Elementwise fusion: a chain of elementwise ops becomes one node computing in one buffer.

::

    %3 = dot(%0, %1)                 %3 = dot(%0, %1)
    %5 = broadcast_add(%3, %4)  ==>  %5 = _fused(%3, %4, program={broadcast_add; relu})
    %6 = relu(%5)

Why: run one op at a time and every intermediate (``%5``) gets its own array, written to
memory and read back. A fused group writes each step into the *same* buffer (each op's
``kernel_out``), so the chain costs one array instead of one per op -- and none at all
when the group may overwrite its first input (``%3`` above, dead after the group): the
memory plan decides that, as for any op that may work in place.

Which nodes join a group (facts from the registry, never a list of op names):
* the op's ``kind`` is ELEMENTWISE or BROADCAST, it is pure, has one output, not 0-d
  (numpy gives a scalar, not an array) and a ``kernel_out`` (it can write into the
  group's buffer);
* a producer joins its consumer's group only if that consumer is its *only* user and it
  is not a graph output (otherwise its value must exist on its own), and its aval equals
  the group's result aval (so the shared buffer fits every step);
* a group is a *chain*: each step takes at most one input from the group. With two
  (``relu(x) + relu(y)``) the second branch would overwrite the first in the one buffer.
These rules give each group a single exit, its root, so no value leaves the group and
comes back (the group is *convex*) and topological order is kept.

The fused node calls the ``_fused`` operator (``ops/fused.py``, registered with the
other operators) whose ``program`` attribute is the sub-graph; codegen prints its steps
inline, each writing ``out=`` the group's buffer. This pass only rewrites graphs.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from hybridlab.graph.ir import Graph, Node, Value, call, var, with_inputs
from hybridlab.graph.passes.context import PassContext, PassResult
from hybridlab.ops.fused import FUSED
from hybridlab.ops.registry import Kind


def fuse_elementwise(graph: Graph, context: PassContext) -> PassResult:
    """Merge single-consumer chains of elementwise/broadcast nodes into ``_fused`` nodes."""
    groups = _find_groups(graph)
    member_of = {id(m): root for root, members in groups.items() for m in members}
    mapping: dict[int, tuple[Value, ...]] = {}
    nodes: list[Node] = []
    changes: list[str] = []
    for node in graph.nodes:
        if id(node) in member_of and id(node) not in groups:
            continue  # an inner step: it lives on inside its root's sub-program
        if id(node) in groups:
            members = groups[id(node)]
            external = _external_inputs(members)
            new = call(FUSED, [mapping[id(v.node)][v.index] for v in external],
                       {"program": _subprogram(members, external)}, name=node.name + "_fused",
                       origin=node.origin, parsed=True)
            changes.append(f"fused {[m.name for m in members]} into {new.name}")
        else:
            new = with_inputs(node, tuple(mapping[id(v.node)][v.index] for v in node.inputs))
        nodes.append(new)
        mapping[id(node)] = tuple(new.out(i) for i in range(new.num_outputs))
    outputs = tuple(mapping[id(v.node)][v.index] for v in graph.outputs)
    inputs = tuple(mapping[id(n)][0].node for n in graph.inputs)
    return PassResult(Graph(tuple(nodes), inputs, outputs), changes)


def _fusable(node: Node) -> bool:
    if node.kind != "call" or node.aval is None:
        return False
    opdef = node.opdef
    # 0-d results are numpy scalars, which have no buffer to write into
    return (opdef.kind in (Kind.ELEMENTWISE, Kind.BROADCAST) and opdef.pure
            and not opdef.needs_context and node.num_outputs == 1
            and opdef.kernel_out is not None and node.aval[0].shape != ())


def _find_groups(graph: Graph) -> dict[int, list[Node]]:
    """root id -> members in topological order, for every group of two or more nodes."""
    uses = Counter(id(v.node) for n in graph.nodes for v in n.inputs)
    uses.update(id(v.node) for v in graph.outputs)
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    taken: set[int] = set()
    groups: dict[int, list[Node]] = {}
    for root in reversed(graph.nodes):
        if id(root) in taken or not _fusable(root):
            continue
        members = [root]
        while True:  # walk up a chain: each step has at most one producer in the group
            joinable = [v.node for v in members[-1].inputs
                        if _fusable(v.node) and uses[id(v.node)] == 1
                        and id(v.node) not in taken and v.node.aval == root.aval]
            if not joinable:
                break
            members.append(joinable[0])
        taken.update(id(m) for m in members)
        if len(members) > 1:
            groups[id(root)] = sorted(members, key=lambda m: position[id(m)])
    return groups


def _external_inputs(members: list[Node]) -> list[Value]:
    inside = {id(m) for m in members}
    external: list[Value] = []
    for member in members:
        for value in member.inputs:
            if id(value.node) not in inside and value not in external:
                external.append(value)
    return external


def _subprogram(members: list[Node], external: list[Value]) -> Graph:
    """The group as a graph whose vars are the external inputs, in order."""
    params = [var(f"in{i}", v.aval) for i, v in enumerate(external)]
    mapping = {(id(v.node), v.index): p.out() for v, p in zip(external, params)}
    for member in members:
        inputs = [mapping[(id(v.node), v.index)] for v in member.inputs]
        new = dataclasses.replace(member, inputs=tuple(inputs))
        mapping[(id(member), 0)] = new.out()
    return Graph.from_outputs([mapping[(id(members[-1]), 0)]], params)
