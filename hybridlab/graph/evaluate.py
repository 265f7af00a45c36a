"""The reference interpreter: a graph run node by node with the registry's kernels.

Tests use it as the oracle every compiled program is compared with. It lowers MXNet's
layer operators first (the compiler's own first pass, for the mode asked), then calls
``ir.interpret``; it lives beside the IR rather than in it because the lowering is a
pass, and the IR imports no pass.
"""

from __future__ import annotations

import numpy as np

from hybridlab.graph import loops
from hybridlab.graph.ir import Graph, interpret
from hybridlab.graph.passes.context import PassContext
from hybridlab.graph.passes.lower_operators import lower_operators
from hybridlab.ops.registry import RunContext


def evaluate(graph: Graph, *arrays: np.ndarray, training: bool = False,
             rng: np.random.Generator | None = None) -> tuple[np.ndarray, ...]:
    """Run ``graph`` on ``arrays`` (one per input) for the mode asked (``training``);
    the outputs as numpy arrays."""
    if len(arrays) != len(graph.inputs):
        raise TypeError(f"the graph takes {len(graph.inputs)} inputs "
                        f"{[n.name for n in graph.inputs]}, got {len(arrays)}")
    loops.install()  # (done at import; _foreach's kernel compiles its body through it)
    graph = lower_operators(graph, PassContext(training=training)).graph
    context = RunContext(training, rng if rng is not None else np.random.default_rng(0))
    env: dict[int, tuple[np.ndarray, ...]] = {}
    for _ in interpret(graph, arrays, context, env):
        pass
    return tuple(env[id(v.node)][v.index] for v in graph.outputs)
