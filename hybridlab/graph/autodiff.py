"""The symbolic backward graph: forward and backward of a training step as one graph.

What this module teaches
------------------------
The imperative tape (``autograd.py``) applies each op's gradient rule to *arrays* as it
walks back. Applied to *graph values* instead, the very same rules --
``OpDef.grad(F, inputs, outputs, out_grads)`` with ``F = sym`` (installed in
``graph.frontend``) -- build new nodes: the backward graph. Forward and backward then
form one graph that the passes optimise and memory-plan together (the backward reuses
forward buffers once they die)::

    forward:   x, w -> y = relu(x * w)                       returns y
    joint:     x, w, y_grad -> y, x_grad, w_grad             (one graph)

:func:`gradient_graph` builds the joint graph; :func:`split_joint` cuts it into the part
that needs no output gradient (run at forward time, returning the outputs plus the
*residuals* the backward needs, e.g. relu's output) and the part that does (run when
``backward()`` arrives). That is how ``CachedOp`` records one tape node whose backward is
a compiled program.

Invariants: gradients of a value used several times are summed; an op with ``grad=None``
(no gradient by design: random draws, masks) passes no gradient to its inputs; an op
whose gradient exists but is not written (``OpDef.grad_missing``) raises ``GraphError``
naming the node, never a silent zero; an input that receives no gradient gets zeros.
"""

from __future__ import annotations

import dataclasses

from hybridlab.errors import GraphError
from hybridlab.graph import frontend, ir
from hybridlab.graph.ir import Graph, Node, Value
from hybridlab.ops.registry import Kind
from hybridlab.walk import reverse_mode


def gradient_graph(graph: Graph) -> Graph:
    """Joint graph: inputs ``graph.inputs + one cotangent per output``; outputs
    ``graph.outputs + one gradient per input`` (shapes must be inferred). Layer operators
    are lowered first (for training): their lowerings' primitives have the rules."""
    from hybridlab import name as names
    from hybridlab.graph.passes.context import PassContext
    from hybridlab.graph.passes.lower_operators import lower_operators

    graph = lower_operators(graph, PassContext(training=True)).graph

    sym, wrap, unwrap, _ = frontend.current()  # F = sym, installed by symbol (above graph)
    cotangents = [ir.var(f"{v.node.name}_ograd{i}", v.aval) for i, v in enumerate(graph.outputs)]

    def vjp(node: Node, found: list[Value | None]) -> list[Value | None]:
        """One node's gradient rule on graph values: it adds the backward's nodes."""
        if node.kind != "call":
            return []
        _check_rule(node)
        if node.opdef.grad is None:  # no gradient by design
            return []
        out_grads = [wrap(g) if g is not None else sym.zeros_like(wrap(node.out(i)))
                     for i, g in enumerate(found)]
        in_grads = node.opdef.grad(sym, [wrap(v) for v in node.inputs],
                                   [wrap(node.out(i)) for i in range(node.num_outputs)],
                                   out_grads, **node.attr_dict)
        return [None if g is None else unwrap(g) for g in in_grads]

    def add(value: Value, previous: Value, grad: Value) -> Value:  # a value read twice
        return ir.call("broadcast_add", [previous, grad],
                       name=f"d_{value.node.name}_sum").out()

    grads: dict[Value, Value] = {}
    with names.Prefix("d_"):
        for value, cotangent in zip(graph.outputs, cotangents):
            grads[value] = cotangent.out() if value not in grads else add(
                value, grads[value], cotangent.out())
        reverse_mode(graph.nodes, grads,
                     lambda node: [node.out(i) for i in range(node.num_outputs)],
                     lambda node: list(node.inputs), vjp, add)
        results = [grads.get(n.out()) or unwrap(sym.zeros_like(wrap(n.out())))
                   for n in graph.inputs]
    # Schedule: the depth-first order follows its roots, so visiting the gradients of
    # the *last* inputs first computes each layer's weight gradient as soon as the
    # backward sweep reaches that layer, and its inputs die sooner (less memory live).
    inputs = list(graph.inputs) + cotangents
    roots = [*inputs, *(v.node for v in graph.outputs), *(v.node for v in reversed(results))]
    return Graph(tuple(ir.toposort(roots)), tuple(inputs), tuple(graph.outputs) + tuple(results))


def _check_rule(node: Node) -> None:
    """A gradient reached a node whose op has a gradient but no rule written for it."""
    why = node.opdef.grad_missing
    if why:
        where = f" (created at {node.origin})" if node.origin else ""
        raise GraphError(f"cannot differentiate node {ir.format_name(node.name)} ({node.op})"
                         f"{where}: {why} (a zero would be a wrong gradient)")


@dataclasses.dataclass(frozen=True)
class Split:
    """A joint graph cut in two: ``forward`` returns outputs + residuals; ``backward``
    takes the residuals, the forward inputs listed in ``saved_inputs`` (indices) and the
    output gradients, and returns one gradient per forward input."""

    forward: Graph
    backward: Graph
    num_outputs: int
    saved_inputs: tuple[int, ...]


def split_joint(joint: Graph, num_inputs: int, num_outputs: int) -> Split:
    """Cut the joint graph where values start to depend on the output gradients."""
    cotangents = joint.inputs[num_inputs:]
    late = _late_nodes(joint, cotangents, num_outputs)
    needed: list[Value] = []  # forward values the backward reads: the residuals
    grads = joint.outputs[num_outputs:]
    late_inputs = [v for node in joint.nodes if id(node) in late for v in node.inputs]
    for v in late_inputs + list(grads):  # one at a time: concat(x, x) reads x twice
        if id(v.node) not in late and v not in needed:
            needed.append(v)
    residuals = [v for v in needed if v.node.kind == "call"]
    position = {id(n): i for i, n in enumerate(joint.inputs[:num_inputs])}
    saved = tuple(position[id(v.node)] for v in needed if v.node.kind == "var")
    forward = Graph.from_outputs(joint.outputs[:num_outputs] + tuple(residuals),
                                 joint.inputs[:num_inputs])
    stand_ins = {(id(v.node), v.index): ir.var(f"{v.node.name}_saved{v.index}", v.aval)
                 for v in residuals}
    stand_ins.update({(id(joint.inputs[i]), 0): joint.inputs[i] for i in saved})
    backward = _rebase(joint, grads, late, stand_ins, cotangents)
    return Split(forward, backward, num_outputs, saved)


def _late_nodes(joint: Graph, cotangents: tuple[Node, ...], num_outputs: int) -> set[int]:
    """The nodes of the backward half: those that depend on an output gradient, plus
    cheap forward nodes only the backward reads (*rematerialised*).

    ``relu``'s gradient reads ``out > 0``: computed in the forward, that mask would be
    one more residual kept alive until the backward runs; recomputed in the backward
    from ``out`` (a residual anyway) it costs one elementwise pass and no memory. Views
    (a reshape) cost nothing either way. Only one-input elementwise ops and views move,
    so a move never saves more bytes than it frees.
    """
    late = {id(n) for n in cotangents}
    for node in joint.nodes:
        if any(id(v.node) in late for v in node.inputs):
            late.add(id(node))
    forward = {id(n) for n in ir.toposort(v.node for v in joint.outputs[:num_outputs])}
    users: dict[int, list[Node]] = {}
    for node in joint.nodes:
        for value in node.inputs:
            users.setdefault(id(value.node), []).append(node)
    returned = {id(v.node) for v in joint.outputs}
    for node in reversed(joint.nodes):
        if (id(node) not in late and id(node) not in forward and id(node) not in returned
                and _cheap(node) and all(id(u) in late for u in users.get(id(node), []))):
            late.add(id(node))
    return late


def _cheap(node: Node) -> bool:
    if node.kind != "call" or len(node.inputs) != 1 or node.num_outputs != 1:
        return False
    opdef = node.opdef
    return opdef.pure and not opdef.needs_context and (
        opdef.view or opdef.kind == Kind.ELEMENTWISE)


def _rebase(joint: Graph, grads: tuple[Value, ...], late: set[int],
            stand_ins: dict[tuple[int, int], Node], cotangents: tuple[Node, ...]) -> Graph:
    """The late nodes, reading residuals through new var nodes."""
    mapping: dict[tuple[int, int], Value] = {k: n.out() for k, n in stand_ins.items()}

    def look(value: Value) -> Value:
        return mapping.get((id(value.node), value.index), value)

    for node in joint.nodes:
        if id(node) in late and node.kind == "call":
            new = dataclasses.replace(node, inputs=tuple(look(v) for v in node.inputs))
            for i in range(node.num_outputs):
                mapping[(id(node), i)] = new.out(i)
    return Graph.from_outputs([look(v) for v in grads], list(stand_ins.values()) + list(cotangents))
