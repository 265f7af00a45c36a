"""The memory timeline's model: where the memory planner put every result, step by step.

What this module teaches
------------------------
A compiled program runs its nodes in order; each result lives from the step that writes
it to the last step that reads it. The planner (``plan_memory``) gives results whose
lifetimes do not overlap the same bytes of one shared *arena*. With time (the program's
steps) across and the arena's byte offsets up, every placed result is a :class:`Box`;
boxes never overlap, and a result computed in place over its input continues that
input's box at the same height. :func:`live_bytes` is what is in use at one step; its
largest value, when no kernel needs scratch, is the plan's *liveness bound*, which no
placement can go below. The drawing is :mod:`hybridlab.viz.memory`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hybridlab.lab.graphs import as_graph

MODES = ("forward", "forward + backward")  # the programs the memory explorer shows


@dataclass(frozen=True)
class Box:
    """One placed result: its node, steps ``[first, last]``, bytes ``[low, high)``."""

    name: str
    kind: str
    first: int
    last: int
    low: int
    high: int
    inplace: bool  # written over its input's bytes
    backward: bool = False  # computed by the backward part of a joint program

    def span(self) -> tuple[float, float]:
        """(left, width) in steps, from the step that writes it to the step that last
        reads it (a result read at once: a box 0.9 of a step wide, centred on its step)."""
        return ((self.first, self.last - self.first) if self.last > self.first
                else (self.first - 0.45, 0.9))


def timeline(obj: Any, shape: dict[str, Any] | None = None, backward: bool = False
             ) -> tuple[list[Box], Any]:
    """The boxes for ``obj`` (a Symbol with input ``shape``, a graph IR or a hybridized
    block that ran), and the plan (``MemoryPlan``) they come from. Bytes count from the
    arena's start, then each buffer of its own (outputs, chains allocated per call)
    above it, end to end. ``backward=True``: the joint forward + backward program
    (``graph.autodiff.gradient_graph``), where the activations the backward reads stay
    alive across the whole forward; its boxes have ``backward`` set."""
    from hybridlab.graph.autodiff import gradient_graph
    from hybridlab.graph.passes import run_pipeline

    graph, _ = as_graph(obj, shape)
    forward_names = {node.name for node in graph.nodes}
    if backward:
        if any(node.aval is None for node in graph.nodes):
            raise ValueError("the backward needs the graph's shapes; give the input shapes "
                             "(memory_timeline(symbol, shape={'data': (1, 4)}))")
        graph = gradient_graph(graph)
    final, _ = run_pipeline(graph)
    plan = final.meta.get("memory")
    if plan is None:
        raise ValueError("no memory plan: the graph's shapes are unknown; give the input "
                         "shapes (memory_timeline(symbol, shape={'data': (1, 4)}))")
    step_of = {id(node): step for step, node in enumerate(final.nodes)}
    last_use = dict(step_of)
    for step, node in enumerate(final.nodes):
        for value in node.inputs:
            last_use[id(value.node)] = max(last_use[id(value.node)], step)
    end = len(final.nodes)
    for value in final.outputs:
        last_use[id(value.node)] = end
    for step, node in enumerate(final.nodes):  # NOTE [Concatenation in place]: an input
        # written into its concatenation's slice; once that is computed, its bytes are the
        # concatenation's box, so they are drawn (and counted) once
        if (id(node), 0) in plan.concats:
            for value in node.inputs:
                last_use[id(value.node)] = step - 1
    base = [sum(plan.buffer_bytes[:k]) for k in range(len(plan.buffer_bytes))]
    boxes = []
    for node in final.nodes:
        for index, aval in enumerate(node.aval or ()):
            key = (id(node), index)
            if key not in plan.buffer_of:
                continue  # placed nowhere: a view, a constant, an op without out=
            low = base[plan.buffer_of[key]] + plan.offset_of[key]
            size = aval.dtype.itemsize * math.prod(aval.shape)
            kind = node.opdef.kind.value if node.kind == "call" else "other"
            boxes.append(Box(node.name, kind, step_of[id(node)], last_use[id(node)], low,
                             low + size, key in plan.inplace_of,
                             backward and node.name not in forward_names))
    return boxes, plan


def live_bytes(boxes: list[Box], step: int) -> int:
    """The bytes in use at ``step``: the union of the boxes alive then (written at or
    before it, read at or after it). A result computed in place shares its input's bytes,
    so the hand-over step counts them once."""
    used, end = 0, 0
    for low, high in sorted((b.low, b.high) for b in boxes if b.first <= step <= b.last):
        used += max(0, high - max(low, end))
        end = max(end, high)
    return used


def live_profile(boxes: list[Box]) -> list[int]:
    """:func:`live_bytes` at every step from 0 to the last, in one pass (a real network's
    program has thousands of steps and results). Boxes alive at one step never share
    bytes -- that is what a plan guarantees -- except where a result is written in place
    over the input read at that step: there the two count once."""
    steps = max((b.last for b in boxes), default=-1) + 1
    delta = [0] * (steps + 1)
    ending: dict[int, list[Box]] = {}
    for box in boxes:
        delta[box.first] += box.high - box.low
        delta[box.last + 1] -= box.high - box.low
        ending.setdefault(box.last, []).append(box)
    for box in boxes:
        if box.inplace:  # the hand-over step: its input's bytes are its own
            shared = sum(max(0, min(box.high, other.high) - max(box.low, other.low))
                         for other in ending.get(box.first, ()) if other is not box)
            delta[box.first] -= shared
            delta[box.first + 1] += shared
    profile, total = [], 0
    for step in range(steps):
        total += delta[step]
        profile.append(total)
    return profile


def describe_step(boxes: list[Box], plan: Any, mode: str, step: int) -> str:
    """One line for ``step`` of the ``mode`` program: what it computes, what is alive
    across it, and the plan."""
    made = [box.name for box in boxes if box.first == step]
    alive = [box.name for box in boxes if box.first <= step <= box.last]
    computed = ", ".join(made) or "no placed result"
    return (f"{mode}: step {step} computes {computed}; {len(alive)} results alive, "
            f"{live_bytes(boxes, step)} bytes. {plan}")


def memory_notes(graph: Any) -> dict[int, str]:
    """id(node) -> where ``plan_memory`` put its result: a byte range of the shared arena,
    or a buffer of its own (graph outputs, which the caller keeps)."""
    plan = graph.meta.get("memory")
    if plan is None:
        return {}
    notes = {}
    outputs = {(id(v.node), v.index) for v in graph.outputs}
    output_buffers = {plan.buffer_of.get(key) for key in outputs}
    for node in graph.nodes:  # one line per node: its first result stands for the others
        buffer = plan.buffer_of.get((id(node), 0))
        if buffer is None:  # not placed: a view, a constant, or an op without ``out=``
            continue
        slot = plan.slot_of.get((id(node), 0))
        if slot is not None:  # NOTE [Concatenation in place] in plan_memory.py
            _, axis, first, stop = slot
            notes[id(node)] = (f"in place: slice {first}:{stop} of axis {axis} of its "
                               f"concatenation's buffer")
        elif buffer == 0:
            start = plan.offset_of[(id(node), 0)]
            size = node.aval[0].dtype.itemsize * math.prod(node.aval[0].shape)
            notes[id(node)] = f"arena bytes {start}-{start + size}"
        elif (id(node), 0) in outputs:
            notes[id(node)] = f"own buffer {buffer} (output)"
        elif buffer in output_buffers:  # an earlier link of an in-place chain to an output
            notes[id(node)] = f"in place in buffer {buffer} (the output's)"
        else:  # pinned, or left out of the arena (_choose_arena)
            notes[id(node)] = f"own buffer {buffer} (allocated on each call)"
    return notes


# --- the drawing's layout: what goes where, in the axes' units (the view draws it) --------
LABEL_PT = 9  # a box's name, drawn only where it fits whole (never cut, never overlapping)
Fit = tuple[float, float, float, float]  # bytes per unit; least width, edged width, height


def fits(text: str, width_pt: float, height_pt: float) -> bool:
    """Whether ``text`` at :data:`LABEL_PT` fits a box of that size (sans-serif: a
    character is about 0.6 of the size wide)."""
    return width_pt >= 0.6 * LABEL_PT * len(text) + 4 and height_pt >= LABEL_PT + 3


def rectangles(boxes: list[Box], fit: Fit) -> Any:
    """Every box's corners, an array (n, 4, 2) in the axes' data units (at least
    ``fit[1]`` steps wide, centred on its span)."""
    import numpy as np

    corners = np.empty((len(boxes), 4, 2))
    for i, box in enumerate(boxes):
        left, width = box.span()
        if width < fit[1]:
            left, width = left + width / 2 - fit[1] / 2, fit[1]
        low, high = box.low / fit[0], box.high / fit[0]
        corners[i] = ((left, low), (left + width, low), (left + width, high), (left, high))
    return corners


def step_text(boxes: list[Box], step: int) -> str:
    return f"step {step}: {live_bytes(boxes, step)} bytes live"


@dataclass(frozen=True)
class Lifetime:
    """An array a function's local name held while the function ran imperatively: made by
    statement ``born``, last read by statement ``last_read``, let go at step ``freed``
    (indices into the steps :func:`lifetimes` returns)."""

    name: str
    nbytes: int
    born: int
    last_read: int
    freed: int


def lifetimes(fn: Any, *args: Any) -> tuple[list[str], list[Lifetime]]:
    """Run ``fn(*args)`` as Python runs it, statement by statement, and watch the arrays
    its local names hold: ``(steps, lifetimes)``, the statements in the order they ran and
    a last step, ``"(returned)"``.

    Each array a statement binds to a local name is followed with :func:`weakref.finalize`,
    so ``freed`` is when the interpreter really let it go: for a local, when the function
    returned, however early its last use -- the interpreter runs one statement at a time
    and cannot know that a name will not be read again. (Arguments are not followed: the
    caller holds them; a name bound twice is followed with its first array.)"""
    import inspect
    import re
    import sys
    import weakref

    code = fn.__code__
    source = dict(enumerate(inspect.getsource(fn).splitlines(), code.co_firstlineno))
    arguments = set(code.co_varnames[:code.co_argcount])
    steps: list[str] = []
    born: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    read: dict[str, int] = {}
    freed: dict[str, int] = {}
    returned = [False]

    def let_go(name: str) -> None:  # the step running when the array was freed
        freed[name] = len(steps) if returned[0] else len(steps) - 1

    def watch(frame: Any, event: str, _: Any) -> Any:
        for name, value in frame.f_locals.items():
            if name not in born and name not in arguments and hasattr(value, "nbytes"):
                born[name], nbytes[name] = max(len(steps) - 1, 0), int(value.nbytes)
                weakref.finalize(value, let_go, name)
        returned[0] = event == "return"
        if event == "line":
            statement = source.get(frame.f_lineno, "").strip()
            steps.append(statement)
            right = re.sub(r"^\w+\s*=(?!=)", "", statement)  # what the statement reads
            for name in set(re.findall(r"[A-Za-z_]\w*", right)) & set(born):
                read[name] = len(steps) - 1
        return watch

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: watch if frame.f_code is code else None)
    try:
        fn(*args)
    finally:
        sys.settrace(previous)
    steps.append("(returned)")
    return steps, [Lifetime(name, nbytes[name], born[name], read.get(name, born[name]),
                            freed.get(name, len(steps) - 1)) for name in born]
