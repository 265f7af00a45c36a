"""Constant folding: a pure node whose inputs are all constants is computed at compile time.

::

    %0 = const 1.0   %1 = const 2.0          %0 = const 1.0  %1 = const 2.0
    %2 = broadcast_add(%0, %1)       ==>     %2 = const 3.0
    %3 = relu(%2)                            %3 = const 3.0    (folding cascades)

A pure op with no inputs at all (``_full``, ``_ones``, ``_arange``) folds too: its value
is fixed by its attributes. The folded inputs stay in the graph (dead) until
``eliminate_dead_code`` removes them: each pass does one thing. Ops that need a
RunContext (random, dropout) or are impure are never folded; which ops those are is
asked of the registry (``OpDef.pure``).

A folded constant lives in the compiled program for as long as the block does, so a
node whose results would exceed :data:`MAX_FOLD_BYTES` is left as a runtime op: a model
file declaring ``_zeros`` of shape (100000, 100000, 100000) compiles and fails (or not)
when it runs, instead of allocating at compile time.
"""

from __future__ import annotations

import math

from hybridlab.errors import MXNetError
from hybridlab.graph.ir import Graph, Node, Value, const, rebuild, run_kernel, with_inputs
from hybridlab.ops.registry import RunContext

MAX_FOLD_BYTES = 16 * 2**20  # larger constants stay runtime ops (see above)


def fold_constants(graph: Graph) -> tuple[Graph, list[str]]:
    """Replace each pure call with only constant inputs by its computed value."""
    changes: list[str] = []

    def visit(node: Node, inputs: tuple[Value, ...]) -> Node | list[Value]:
        node = with_inputs(node, inputs)
        if not _foldable(node):
            return node
        try:
            results = run_kernel(node, [v.node.value for v in inputs], RunContext())
        except Exception as err:  # as the imperative call reports it, at the user's line
            raise MXNetError(f"operator '{node.op}' failed with {type(err).__name__}: {err}\n"
                             f"  pushed at {node.origin or 'an unknown line'} (run while "
                             f"compiling: its inputs are all constants)") from err
        changes.append(f"folded {node.name} ({node.op}) into a constant")
        avals = node.aval or [None] * len(results)  # keep the inferred dtype when known
        return [const(r if a is None else r.astype(a.dtype, copy=False), name=node.name).out()
                for r, a in zip(results, avals)]

    return rebuild(graph, visit), changes


def _foldable(node: Node) -> bool:
    # a pure op without inputs (``sym.full(shape=(1,), val=2)``) is a constant too
    if node.kind != "call":
        return False
    opdef = node.opdef
    return (opdef.pure and not opdef.needs_context
            and all(v.node.kind == "const" for v in node.inputs) and _small(node))


def _small(node: Node) -> bool:
    """The results' declared bytes are within MAX_FOLD_BYTES (unknown avals: not folded)."""
    if not node.aval:
        return False
    return sum(math.prod(a.shape) * a.dtype.itemsize for a in node.aval) <= MAX_FOLD_BYTES
