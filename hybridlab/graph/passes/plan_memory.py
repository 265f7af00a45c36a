"""Memory planning: give every intermediate result a buffer, reusing buffers that died.

::

    step   node                 live after it    buffers (greedy)
    0      %2 = dot(%0, %1)     {%2}             b0 <- %2
    1      %3 = relu(%2)        {%3}             b0 <- %3   (in place: %2 dies here)
    2      %4 = dot(%3, %1)     {%4}             b1 <- %4   (%3 is read while %4 is written)
    3      %5 = relu(%4)        {%5}             b1 <- %5   (in place)

*Liveness*: a value is live from the node that computes it to its last user (graph
outputs live to the end). Three numbers come out:

* ``unplanned`` -- every result gets its own buffer (what running op by op and keeping
  everything would need); the sum of all result sizes;
* ``bound`` -- the outputs' bytes (each caller-owned) plus the largest total size of
  the other values live at one step: no plan that keeps each value in one place can do
  better (in place updates aside);
* ``planned`` -- the sum of the sizes of the buffers this greedy plan allocates.

The plan works in two steps. First *in place*: a node may write over its first input
when the registry says ``inplace_ok``, the input dies at this node and has the same
size and dtype (and shape, for elementwise kernels that write while they read); the
two values then form one group living from the input's birth to the output's death.
Then *packing* into one byte arena (TFLite's ``GreedyBySizeAndOffset``): largest group
first, each takes the smallest gap, between groups alive at the same time, that holds
it (or goes on top). Placing by byte offset instead of whole buffers lets a big buffer
later hold two smaller values side by side.
Graph inputs and constants belong to the caller and are never reused; graph outputs
get their own buffers (the caller keeps them after the call).

The plan is stored in ``graph.meta["memory"]`` (a :class:`MemoryPlan`); codegen reads
``buffer_of`` to allocate each buffer once (``static_alloc``) and to write ``out=`` it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hybridlab.graph.ir import Graph, Node, Value
from hybridlab.ops.registry import Kind

_ALIGN = 64  # arena offsets are cache-line aligned, so every dtype view is aligned


@dataclass
class MemoryPlan:
    """Buffer ids per result and the three peak numbers (bytes)."""

    buffer_of: dict[tuple[int, int], int] = field(default_factory=dict)  # (id(node), i) -> b
    offset_of: dict[tuple[int, int], int] = field(default_factory=dict)  # byte offset in b
    buffer_bytes: list[int] = field(default_factory=list)  # buffer 0: the shared arena
    unplanned: int = 0
    planned: int = 0
    bound: int = 0
    inplace: int = 0  # how many results overwrite their input

    def __str__(self) -> str:
        return (f"memory plan: {self.planned} bytes planned ({self.buffer_bytes[0]} arena + "
                f"{len(self.buffer_bytes) - 1} outputs), {self.unplanned} unplanned, "
                f"liveness bound {self.bound}, {self.inplace} in place")


def plan_memory(graph: Graph) -> tuple[Graph, list[str]]:
    """Annotate ``graph`` with a :class:`MemoryPlan` (needs inferred avals)."""
    results = [(n, i) for n in graph.nodes if n.kind == "call" for i in range(n.num_outputs)]
    if any(n.aval is None for n, _ in results):
        return graph, ["skipped: shapes unknown (run infer_shapes first)"]
    last_use = _last_uses(graph)
    plan = MemoryPlan()
    plan.unplanned = sum(_nbytes(n, i) for n, i in results)
    plan.bound = _liveness_bound(graph, last_use)
    groups = _inplace_groups(graph, last_use, plan)
    outputs = {(id(v.node), v.index) for v in graph.outputs}
    plan.buffer_of, plan.offset_of, plan.buffer_bytes = _pack(groups, outputs)
    plan.planned = sum(plan.buffer_bytes)
    annotated = Graph(graph.nodes, graph.inputs, graph.outputs, {**graph.meta, "memory": plan})
    return annotated, [str(plan)]


@dataclass
class _Group:
    """Values sharing one buffer because each overwrites the previous one in place."""

    keys: list[tuple[int, int]]
    nbytes: int
    dtype: str
    start: int
    end: int


def _inplace_groups(graph: Graph, last_use: dict[tuple[int, int], int],
                    plan: MemoryPlan) -> list[_Group]:
    outputs = {(id(v.node), v.index) for v in graph.outputs}
    group_of: dict[tuple[int, int], _Group] = {}
    groups: list[_Group] = []
    for step, node in enumerate(graph.nodes):
        if node.kind != "call":
            continue
        for index in range(node.num_outputs):
            key = (id(node), index)
            end = max(last_use.get(key, step), step)
            first = node.inputs[0] if node.inputs else None
            host = group_of.get((id(first.node), first.index)) if first is not None else None
            if (index == 0 and host is not None and node.opdef.inplace_ok
                    and host.end == step and _fits_inplace(node, first)
                    and (id(first.node), first.index) not in outputs and key not in outputs):
                host.keys.append(key)
                host.end = end
                plan.inplace += 1
            else:
                host = _Group([key], _nbytes(node, index),
                              np.dtype(node.aval[index].dtype).name, step, end)
                groups.append(host)
            group_of[key] = host
    return groups


def _fits_inplace(node: Node, first: Value) -> bool:
    """Same bytes and dtype; elementwise kernels write as they read, so also same shape
    (a broadcast read would overlap the write). Other kernels compute, then copy."""
    aval = node.aval[0]
    if np.dtype(first.aval.dtype) != np.dtype(aval.dtype) or _nbytes(node, 0) != \
            _nbytes(first.node, first.index):
        return False
    return first.aval == aval or node.opdef.kind not in (Kind.ELEMENTWISE, Kind.BROADCAST)


def _pack(groups: list[_Group], outputs: set[tuple[int, int]]
          ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int], list[int]]:
    """Place groups in one arena (buffer 0), largest first, each at the best-fitting gap
    among the groups alive at the same time; outputs get buffers of their own."""
    buffer_of: dict[tuple[int, int], int] = {}
    offset_of: dict[tuple[int, int], int] = {}
    sizes = [0]
    placed: list[tuple[int, _Group]] = []  # (offset, group) in the arena
    for group in sorted(groups, key=lambda g: (-g.nbytes, g.start)):
        if any(k in outputs for k in group.keys):
            buffer, offset = len(sizes), 0
            sizes.append(group.nbytes)
        else:
            busy = sorted((o, o + g.nbytes) for o, g in placed
                          if not (g.end < group.start or group.end < g.start))
            buffer, offset = 0, _best_gap(busy, group.nbytes)
            placed.append((offset, group))
            sizes[0] = max(sizes[0], offset + group.nbytes)
        buffer_of.update((k, buffer) for k in group.keys)
        offset_of.update((k, offset) for k in group.keys)
    return buffer_of, offset_of, sizes


def _best_gap(busy: list[tuple[int, int]], need: int) -> int:
    """The offset of the smallest free gap that holds ``need`` bytes (else the end)."""
    cursor, best, best_size = 0, None, None
    for start, end in busy:
        gap = start - cursor
        if gap >= need and (best_size is None or gap < best_size):
            best, best_size = cursor, gap
        cursor = max(cursor, -(-end // _ALIGN) * _ALIGN)
    return cursor if best is None else best

def _nbytes(node: Node, index: int) -> int:
    aval = node.aval[index]
    return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize


def _last_uses(graph: Graph) -> dict[tuple[int, int], int]:
    last: dict[tuple[int, int], int] = {}
    for step, node in enumerate(graph.nodes):
        for value in node.inputs:
            last[(id(value.node), value.index)] = step
    for value in graph.outputs:
        last[(id(value.node), value.index)] = len(graph.nodes)
    return last


def _liveness_bound(graph: Graph, last_use: dict[tuple[int, int], int]) -> int:
    """Bytes of all outputs (the caller keeps each one) plus, over every step, the most
    bytes of other results computed at or before it and used at or after it."""
    outputs = {(id(v.node), v.index) for v in graph.outputs}
    events = np.zeros(len(graph.nodes) + 2, dtype=np.int64)
    kept = 0
    for step, node in enumerate(graph.nodes):
        for index in range(node.num_outputs if node.kind == "call" else 0):
            if (id(node), index) in outputs:
                kept += _nbytes(node, index)
                continue
            end = max(last_use.get((id(node), index), step), step)
            events[step] += _nbytes(node, index)
            events[end + 1] -= _nbytes(node, index)
    return kept + int(np.cumsum(events).max(initial=0))
