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
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from hybridlab.errors import MXNetError
from hybridlab.graph.ir import Graph, Node, Value, const, rebuild, run_kernel, with_inputs
from hybridlab.graph.passes.context import PassContext, PassResult
from hybridlab.ops.registry import RunContext


def fold_constants(graph: Graph, context: PassContext) -> PassResult:
    """Replace each pure call with only constant inputs by its computed value."""
    changes: list[str] = []

    def visit(node: Node, inputs: tuple[Value, ...]) -> Node | list[Value]:
        node = with_inputs(node, inputs)
        if not _foldable(node):
            return node
        try:
            arrays = [v.node.value for v in inputs]  # every input is a const (_foldable)
            results = run_kernel(node, cast("list[np.ndarray]", arrays), RunContext())
        except Exception as err:  # as the op would fail when run: same class, same line
            raise MXNetError(f"operator '{node.op}' failed with {type(err).__name__}: {err}"
                             f"\n  created at {node.origin or '<unknown line>'} (computed "
                             f"while compiling: its inputs are constants)") from err
        changes.append(f"folded {node.name} ({node.op}) into a constant")
        avals = node.aval or [None] * len(results)  # keep the inferred dtype when known
        return [const(r if a is None else r.astype(a.dtype, copy=False), name=node.name).out()
                for r, a in zip(results, avals)]

    return PassResult(rebuild(graph, visit), changes)


# A constant is stored in the program and lives as long as it: folding a node whose
# results exceed this would materialise them at compile time (a model file's ``_zeros``
# of shape (100000, 100000, 100000) would be allocated by the compiler). Larger nodes
# stay operators, computed when the program runs, as any other.
FOLD_MAX_BYTES = 16 * 2**20


def _foldable(node: Node) -> bool:
    # a pure op without inputs (``sym.full(shape=(1,), val=2)``) is a constant too
    if node.kind != "call":
        return False
    opdef = node.opdef
    if not (opdef.pure and not opdef.needs_context
            and all(v.node.kind == "const" for v in node.inputs)):
        return False
    if node.aval is None:  # size unknown: the shapes were not inferred
        return False
    return sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in node.aval) \
        <= FOLD_MAX_BYTES
