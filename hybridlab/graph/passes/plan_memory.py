"""Memory planning: which results live in a reused buffer, which overwrite their input.

::

    step   node                 live after it    arena (greedy)
    0      %2 = dot(%0, %1)     {%2}             bytes 0.. <- %2
    1      %3 = relu(%2)        {%3}             the same bytes (in place: %2 dies here)
    2      %4 = dot(%3, %1)     {%4}             new bytes <- %4 (%3 is read while %4 is written)
    3      %5 = relu(%4)        {%5}             the same bytes as %4 (in place)

*Liveness*: a value is live from the node that computes it to its last user (graph
outputs live to the end). A *view* (``OpDef.view``: a reshape) owns no memory; it keeps
the value it views alive as long as itself.

Which results the program can place is a registry fact, not a choice of this pass:

* *placeable*: one output, not 0-d, not a view, and the op has a ``kernel_out`` (it can
  write into a given buffer; its plain kernel returns a fresh array);
* *pinned*: read by an op that might return a view of it (no ``kernel_out``, not a
  declared view): it is never overwritten and never lives in the reused arena;
* *in place*: a placeable node whose op may overwrite its first input
  (``OpDef.can_overwrite``) writes over that input when it is placeable and not
  pinned, dies at this node and has the same shape and dtype. Codegen writes
  ``y = relu_out(x, out=x)``, with or without ``static_alloc``. Values written in place
  form a *chain* in one buffer;
* everything else is allocated by its kernel when it runs (and freed after its last use).

*Workspace*: some kernels need scratch while they run -- a convolution's im2col matrix, a
padded copy (``OpDef.workspace``, MXNet's ``kTempSpace``). It is allocated and freed
inside the kernel, so it lives only during its own step; every number below counts it.

With ``static_alloc`` chains live in one byte *arena* allocated once per program,
packed largest first, each at the smallest gap between the chains alive at the same
time (TFLite's ``GreedyBySizeAndOffset``) -- except a chain holding a graph output (the
caller keeps that array) or a pinned value: those are allocated fresh on each call.
The arena is held at every step, so a chain that is dead at the peak step still costs
its bytes there: a chain joins it only while the peak stays within ``_SLACK`` of the
bound (:func:`_choose_arena`); the others, like outputs, are allocated on each call.
The numbers, all for the ``static_alloc`` program as generated, in bytes:

* ``unplanned`` -- every result and every op's workspace in a buffer of its own, none
  freed (views own nothing);
* ``bound`` -- the most bytes live at one step, a chain of in-place writes counting as the
  one buffer it is (outputs live from their step to the end): no way of placing these
  buffers does better, so ``planned >= bound`` always, and ``planned / bound`` measures
  what the arena costs (at most ``1 + _SLACK`` before packing); a workspace counts at
  its step;
* ``planned`` -- what the program holds at its peak: the arena, plus what its kernels
  allocate at the worst step (outputs, non-placeable values and the step's workspace).

The plan is stored in ``graph.meta["memory"]`` (a :class:`MemoryPlan`); codegen reads it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from hybridlab.graph.ir import Graph, Node
from hybridlab.graph.passes.context import PassContext, PassResult

Key = tuple[int, int]  # (id(node), output index)
Span = tuple[int, int, int]  # (first step, last step, bytes) of one buffer
_ALIGN = 64  # arena offsets are cache-line aligned, so every dtype view is aligned
_SLACK = 1 / 32  # how far above the liveness bound the arena may lift the peak


@dataclass
class MemoryPlan:
    """Where each result lives (see the module docstring) and the three peak numbers."""

    # placed values -> buffer: 0 is the arena (allocated once with static_alloc); 1, 2, ...
    # are chains allocated by their kernels on each call: outputs (the caller keeps them),
    # pinned values, and chains left out of the arena (_choose_arena)
    buffer_of: dict[Key, int] = field(default_factory=dict)
    offset_of: dict[Key, int] = field(default_factory=dict)  # byte offset in the buffer
    inplace_of: dict[Key, Key] = field(default_factory=dict)  # value -> input it overwrites
    buffer_bytes: list[int] = field(default_factory=lambda: [0])  # arena, then outputs
    # NOTE [Concatenation in place]: a value written straight into its slice of a
    # concatenation -> (the outermost concatenation's value, axis, start, stop along it);
    # and the Concat nodes that copy nothing (their inputs are all such values)
    slot_of: dict[Key, tuple[Key, int, int, int]] = field(default_factory=dict)
    concats: set[Key] = field(default_factory=set)
    unplanned: int = 0
    planned: int = 0
    bound: int = 0
    workspace: int = 0  # the largest scratch one kernel needs (counted in the three above)

    @property
    def inplace(self) -> int:
        """How many results overwrite their input."""
        return len(self.inplace_of)

    def __str__(self) -> str:
        return (f"memory plan: {self.planned} bytes at the peak ({self.buffer_bytes[0]} arena), "
                f"{self.unplanned} unplanned, liveness bound {self.bound}, "
                f"{self.inplace} in place"
                + (f", {len(self.concats)} concatenation(s) written in place by their "
                   f"inputs" if self.concats else ""))


def plan_memory(graph: Graph, context: PassContext) -> PassResult:
    """Annotate ``graph`` with a :class:`MemoryPlan` (needs inferred avals)."""
    if any(n.aval is None for n in graph.nodes if n.kind == "call"):
        return PassResult(graph, ["skipped: shapes unknown (run shapes.infer_graph first)"])
    values = _Values(graph)
    plan = MemoryPlan()
    slots = _concat_slots(graph, values, plan)  # before the chains: it extends lifetimes
    chains = _inplace_chains(graph, values, plan)
    in_chains = {k for chain in chains for k in chain}
    inside = _inside_concatenations(chains, slots, values, plan)  # they own no buffer
    chains = [c for c in chains if c[-1] not in inside]
    alone = [values.span([k]) for k in values.owning() if k not in in_chains]  # kernels'
    # a chain ending in a graph output is that output's memory, and one some op might take
    # a view of may outlive its slot: both are fresh arrays on each call, not in the arena
    fixed = [c for c in chains if (values.kept | values.pinned).intersection(c)]
    candidates = [c for c in chains if c not in fixed]
    allocated = [values.span(c) for c in fixed] + alone + values.scratch
    plan.bound = values.peak([values.span(c) for c in chains] + alone + values.scratch)
    plan.planned, size, arena, plan.offset_of = _choose_arena(candidates, allocated, values,
                                                              plan.bound)
    plan.buffer_of = dict.fromkeys(plan.offset_of, 0)
    plan.buffer_bytes = [size]  # the arena's, then one per chain outside it
    for chain in (c for c in chains if c not in arena):  # a buffer of its own, on each call
        plan.buffer_of.update(dict.fromkeys(chain, len(plan.buffer_bytes)))
        plan.offset_of.update(dict.fromkeys(chain, 0))
        plan.buffer_bytes.append(values.nbytes[chain[0]])
    for key, (root, axis, start, _) in plan.slot_of.items():  # in their concatenation's bytes
        shape = values.shape[root]
        plan.buffer_of[key] = plan.buffer_of[root]
        plan.offset_of[key] = plan.offset_of[root] + start * math.prod(shape[axis + 1:]) * (
            values.nbytes[root] // max(1, math.prod(shape)))
    scratch = [nbytes for _, _, nbytes in values.scratch]
    plan.unplanned = sum(values.nbytes[k] for k in values.owning()) + sum(scratch)
    plan.workspace = max(scratch, default=0)
    annotated = Graph(graph.nodes, graph.inputs, graph.outputs, {**graph.meta, "memory": plan})
    return PassResult(annotated, [str(plan)])


def _choose_arena(candidates: list[list[Key]], allocated: list[Span], values: _Values,
                  bound: int) -> tuple[int, int, list[list[Key]], dict[Key, int]]:
    """The planned peak, the arena's size, the chains it holds and their offsets.

    With an empty arena every value is allocated by its kernel only while it lives, and
    the peak *is* the liveness bound. The arena spares those allocations on every call,
    but it is held at every step: a chain placed there costs its bytes even where it is
    dead. So chains join it largest first, each only if the (unpacked) peak
    ``max(arena live) + max(allocated)`` stays within ``1 + _SLACK`` of the bound.
    """
    arena_live = values.profile([])
    elsewhere = values.profile(allocated + [values.span(c) for c in candidates])  # max: bound
    budget = bound * (1 + _SLACK)
    chosen = []
    for chain in sorted(candidates, key=lambda c: -values.nbytes[c[0]]):
        first, last, nbytes = values.span(chain)
        live, other = arena_live.copy(), elsewhere.copy()
        live[first:last + 1] += nbytes
        other[first:last + 1] -= nbytes
        if live.max() + other.max() <= budget:
            chosen.append(chain)
            arena_live, elsewhere = live, other
    offsets, size = _pack(chosen, values)
    return size + int(elsewhere.max(initial=0)), size, chosen, offsets


class _Values:
    """Every call result: its size, life span, and whether the program may place it."""

    def __init__(self, graph: Graph) -> None:
        self.graph, self.steps = graph, len(graph.nodes)
        self.outputs = {(id(v.node), v.index) for v in graph.outputs}
        self.nbytes: dict[Key, int] = {}
        self.shape: dict[Key, tuple[int, ...]] = {}
        self.start: dict[Key, int] = {}
        self.end: dict[Key, int] = {}
        self.root: dict[Key, Key] = {}  # a view -> the value whose memory it shows
        self.pinned: set[Key] = set()
        self.scratch: list[Span] = []  # (step, step, bytes) of each kernel's workspace
        for step, node in enumerate(graph.nodes):
            self._visit(step, node)
        for key in self.outputs:
            self.end[self.root.get(key, key)] = self.steps
        # the caller keeps outputs, and the memory an output views: never the arena's
        self.kept = self.outputs | {self.root[k] for k in self.outputs if k in self.root}

    def _visit(self, step: int, node: Node) -> None:
        for value in node.inputs:
            key = self.root.get((id(value.node), value.index), (id(value.node), value.index))
            self.end[key] = max(self.end.get(key, step), step)
            if node.kind == "call" and node.opdef.kernel_out is None and not node.opdef.view:
                self.pinned.add(key)  # its result might be a view of this value
        if node.kind != "call":
            return
        if node.opdef.workspace is not None:
            nbytes = node.opdef.workspace(*(v.aval for v in node.inputs), **node.attr_dict)
            self.scratch.append((step, step, nbytes))
        assert node.aval is not None, "plan_memory runs on a graph with inferred avals"
        for index in range(node.num_outputs):
            key = (id(node), index)
            aval = node.aval[index]
            self.nbytes[key] = math.prod(aval.shape) * aval.dtype.itemsize
            self.shape[key] = tuple(aval.shape)
            self.start[key] = self.end[key] = step
        if node.opdef.view and node.inputs:
            first = node.inputs[0]
            base = (id(first.node), first.index)
            self.root[(id(node), 0)] = self.root.get(base, base)

    def owning(self) -> list[Key]:
        """The results that own memory: all but views."""
        return [k for k in self.nbytes if k not in self.root]

    def placeable(self, node: Node) -> bool:
        key = (id(node), 0)
        return (node.kind == "call" and node.num_outputs == 1 and key not in self.root
                and node.opdef.kernel_out is not None
                and node.aval is not None
                and node.aval[0].shape != ())  # numpy makes 0-d results scalars

    def span(self, chain: list[Key]) -> Span:
        """(first step, last step, bytes) of values sharing one buffer."""
        return (self.start[chain[0]], max(self.end[k] for k in chain), self.nbytes[chain[0]])

    def profile(self, spans: list[Span]) -> np.ndarray:
        """The bytes live at each step."""
        events = np.zeros(self.steps + 2, dtype=np.int64)
        for start, end, nbytes in spans:
            events[start] += nbytes
            events[end + 1] -= nbytes
        return np.cumsum(events)

    def peak(self, spans: list[Span]) -> int:
        """The most bytes live at one step."""
        return int(self.profile(spans).max(initial=0))


# NOTE: [Concatenation in place] a Concat copies each input into its slice of a new
# buffer; if each input's producer had written into that slice in the first place, the
# copy would be gone. So a Concat whose inputs can all be placed there (each a placeable
# result read by this Concat alone, not a graph output, not pinned, of its dtype) copies
# nothing: its buffer is allocated before its first input is computed, each input is
# written into its slice (an in-place chain ending in the input, relu over a convolution,
# lives there too), and the Concat itself only names the buffer. Nested ones (DenseNet
# concatenates each layer's output onto the concatenation before it) share the outermost
# buffer: a block's growing features are written once, where the last concatenation
# wants them. The slices must be contiguous -- every axis before the concatenated one of
# size 1 (one image, channels) -- because kernels write into plain buffers; a batch of
# several images concatenates by copying, as before. Every value in the buffer lives as
# long as the buffer (from its first input's step to the last read of any of them), so
# nothing is written over a slice in place while the concatenation still needs it.
def _concat_slots(graph: Graph, values: _Values, plan: MemoryPlan
                  ) -> dict[Key, tuple[Key, int, int, int]]:
    """The Concat nodes that copy nothing (``plan.concats``) and each input's slice of its
    outermost one (``member -> (root, axis, start, stop)``); lifetimes extended."""
    reads = Counter((id(v.node), v.index) for n in graph.nodes if n.op == "Concat"
                    for v in n.inputs)
    members: dict[Key, list[tuple[Key, int]]] = {}  # concat -> [(input, size on its axis)]
    axis_of: dict[Key, int] = {}
    for node in graph.nodes:
        key = (id(node), 0)
        if node.op != "Concat" or not values.placeable(node) or key in values.root:
            continue
        shape = values.shape[key]
        axis = node.attr_dict["dim"] % len(shape)
        parts = [((id(v.node), v.index), v) for v in node.inputs]
        if all(size == 1 for size in shape[:axis]) and all(
                reads[k] == 1 and k not in values.kept and k not in values.pinned
                and v.index == 0 and values.placeable(v.node)
                and v.aval is not None and v.aval.dtype == node.aval[0].dtype  # type: ignore[index]
                for k, v in parts):
            members[key] = [(k, v.aval.shape[axis]) for k, v in parts]  # type: ignore[union-attr]
            axis_of[key] = axis
    inner = {k for parts in members.values() for k, _ in parts if k in members}
    slots: dict[Key, tuple[Key, int, int, int]] = {}

    def place(concat: Key, root: Key, start: int) -> None:
        for key, size in members[concat]:
            slots[key] = (root, axis_of[root], start, start + size)
            if key in members:
                place(key, root, start)
            start += size

    for root in (k for k in members if k not in inner):
        place(root, root, 0)
        tree = [k for k, slot in slots.items() if slot[0] == root] + [root]
        end = max(values.end[k] for k in tree)
        for key in tree:
            values.end[key] = end
    plan.concats = set(members)
    return slots


def _inside_concatenations(chains: list[list[Key]], slots: dict[Key, tuple[Key, int, int, int]],
                           values: _Values, plan: MemoryPlan) -> set[Key]:
    """Every value of the chains that end in a slot (the whole chain lives there), recorded
    in ``plan.slot_of``; the buffer of each outermost concatenation starts with the
    first of them."""
    inside: set[Key] = set()
    for chain in chains:
        slot = slots.get(chain[-1])
        if slot is None:
            continue
        inside.add(chain[-1])
        root = slot[0]
        plan.slot_of.update(dict.fromkeys(chain, slot))
        values.start[root] = min(values.start[root], values.start[chain[0]])
    return inside


def _inplace_chains(graph: Graph, values: _Values, plan: MemoryPlan) -> list[list[Key]]:
    """Placeable values grouped into chains that share one buffer (each overwrites the
    previous one in place); records ``plan.inplace_of``."""
    chain_of: dict[Key, list[Key]] = {}
    chains: list[list[Key]] = []
    for step, node in enumerate(graph.nodes):
        if not values.placeable(node):
            continue
        key, first = (id(node), 0), node.inputs[0] if node.inputs else None
        host = None if first is None else (id(first.node), first.index)
        if (first is not None and node.aval is not None
                and host in chain_of and host not in values.pinned and values.end[host] == step
                and first.aval == node.aval[0] and node.opdef.can_overwrite(node.attr_dict)
                and not _reads_host_again(node, host, values)):
            plan.inplace_of[key] = host
            chain_of[key] = chain_of[host]
            chain_of[key].append(key)
        else:
            chain_of[key] = [key]
            chains.append(chain_of[key])
    return chains


def _reads_host_again(node: Node, host: Key, values: _Values) -> bool:
    """Does ``node`` also read ``host``'s buffer through another input (``host`` itself,
    or a view of it such as a reshape)? A ufunc copes with overlapping operands, but a
    kernel of several steps (a fused group) would read values its first step overwrote."""
    if node.opdef.ufunc is not None:
        return False
    return any(values.root.get((id(v.node), v.index), (id(v.node), v.index)) == host
               for v in node.inputs[1:])


def _pack(chains: list[list[Key]], values: _Values) -> tuple[dict[Key, int], int]:
    """Byte offsets in the arena, and its size: largest chain first, each at the
    best-fitting gap among the chains already placed that are alive at the same time."""
    offset_of: dict[Key, int] = {}
    placed: list[tuple[int, int, int, int]] = []  # (offset, bytes, first step, last step)
    for chain in sorted(chains, key=lambda c: (-values.nbytes[c[0]], values.start[c[0]])):
        first, last, size = values.span(chain)
        busy = sorted((o, o + n) for o, n, s, e in placed if not (e < first or last < s))
        offset = _best_gap(busy, size)
        placed.append((offset, size, first, last))
        offset_of.update(dict.fromkeys(chain, offset))
    return offset_of, max((o + n for o, n, _, _ in placed), default=0)


def _best_gap(busy: list[tuple[int, int]], need: int) -> int:
    """The offset of the smallest free gap that holds ``need`` bytes (else the end)."""
    cursor, best, best_size = 0, None, None
    for start, end in busy:
        gap = start - cursor
        if gap >= need and (best_size is None or gap < best_size):
            best, best_size = cursor, gap
        cursor = max(cursor, -(-end // _ALIGN) * _ALIGN)
    return cursor if best is None else best
