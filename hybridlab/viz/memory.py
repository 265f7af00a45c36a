"""The memory timeline: where the memory planner put every result, step by step.

What this module teaches
------------------------
A compiled program runs its nodes in order; each result lives from the step that writes
it to the last step that reads it. The planner (``plan_memory``) gives results whose
lifetimes do not overlap the same bytes of one shared *arena*. Drawn with time (the
program's steps) across and the arena's byte offsets up, every placed result is a box;
boxes never overlap, and a result computed in place over its input continues that
input's box at the same height. Two lines frame the picture: the arena's size, and the
*liveness bound* -- the largest total of results (and kernel scratch) alive at one step,
which no placement can go below. Results kept in buffers of their own (the outputs the
caller keeps, chains allocated per call) are stacked above the arena. The title adds the
planned peak and what a fresh array per result would allocate (unplanned).

:func:`timeline` computes the boxes (plain Python, tested); :func:`memory_timeline` draws
them with matplotlib and returns a bundle-ready figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hybridlab.viz.graph import as_graph
from hybridlab.viz.palette import KIND_COLOURS, OKABE_ITO, OTHER_COLOUR


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


def timeline(obj: Any, shape: dict | None = None) -> tuple[list[Box], Any]:
    """The boxes for ``obj`` (a Symbol with input ``shape``, a graph IR or a hybridized
    block that ran), and the plan (``MemoryPlan``) they come from. Bytes count from the
    arena's start, then each buffer of its own (outputs, chains allocated per call)
    above it, end to end."""
    from hybridlab.graph.passes import run_pipeline

    graph, _ = as_graph(obj, shape)
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
                             low + size, key in plan.inplace_of))
    return boxes, plan


def memory_timeline(obj: Any, shape: dict | None = None) -> tuple[Any, str]:
    """A matplotlib figure of the arena over the program's steps, and a one-line summary
    (the plan's own line)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    boxes, plan = timeline(obj, shape)
    figure, axes = plt.subplots(figsize=(8, 3.2), layout="constrained")
    total = sum(plan.buffer_bytes)
    scale, unit = (1024, "KiB") if total >= 4096 else (1, "bytes")
    for box in boxes:  # from the step that writes it to the step that last reads it
        left, width = (box.first, box.last - box.first) if box.last > box.first else \
            (box.first - 0.45, 0.9)
        axes.broken_barh([(left, width)], (box.low / scale, (box.high - box.low) / scale),
                         facecolor=KIND_COLOURS.get(box.kind, OTHER_COLOUR),
                         edgecolor=OKABE_ITO["vermillion"] if box.inplace else "#555555",
                         linewidth=1.6 if box.inplace else 0.6)
        if width >= 1.5:
            axes.text(left + width / 2, (box.low + box.high) / 2 / scale, box.name,
                      ha="center", va="center", fontsize=7, clip_on=True)
    axes.axhline(plan.buffer_bytes[0] / scale, color=OKABE_ITO["blue"], linestyle="-",
                 linewidth=1, label=f"end of the shared arena: {plan.buffer_bytes[0]} bytes")
    axes.axhline(plan.bound / scale, color=OKABE_ITO["vermillion"], linestyle="--",
                 linewidth=1, label=f"liveness bound: {plan.bound} bytes")
    kinds = sorted({box.kind for box in boxes})
    handles = [Patch(facecolor=KIND_COLOURS.get(k, OTHER_COLOUR), edgecolor="#555555",
                     label=k) for k in kinds]
    handles.append(Patch(facecolor="white", edgecolor=OKABE_ITO["vermillion"],
                         label="in place over its input"))
    axes.legend(handles=[*axes.get_legend_handles_labels()[0], *handles], fontsize=7,
                loc="upper left", bbox_to_anchor=(1.01, 1))
    axes.set(xlabel="program step (node)",
             ylabel=f"byte offset ({unit}): arena, then own buffers",
             ylim=(0, max(total, plan.bound, 1) / scale * 1.15))
    axes.set_title(f"{len(boxes)} results placed; peak {plan.planned} bytes (scratch "
                   f"{plan.workspace} included), {plan.unplanned} unplanned", fontsize=9)
    text = str(plan)
    return figure, text
