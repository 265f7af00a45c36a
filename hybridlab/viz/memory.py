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

import html
import math
from dataclasses import dataclass
from typing import Any

from hybridlab.viz.bundle import Instrument, figure_png
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
    backward: bool = False  # computed by the backward part of a joint program


def timeline(obj: Any, shape: dict | None = None, backward: bool = False
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


def memory_timeline(obj: Any, shape: dict | None = None, backward: bool = False
                    ) -> tuple[Any, str]:
    """A matplotlib figure of the arena over the program's steps, and a one-line summary
    (the plan's own line); ``backward=True`` for the joint forward + backward program."""
    import matplotlib.pyplot as plt

    boxes, plan = timeline(obj, shape, backward)
    figure = plt.figure(figsize=(8, 3.2), layout="constrained")
    draw(figure, boxes, plan)
    return figure, str(plan)


def draw(figure: Any, boxes: list[Box], plan: Any, step: int | None = None) -> Any:
    """Draw the timeline on ``figure`` (cleared first); ``step`` marks one program step."""
    from matplotlib.patches import Patch

    figure.clear()
    axes = figure.add_subplot()
    total = sum(plan.buffer_bytes)
    scale, unit = (1024, "KiB") if total >= 4096 else (1, "bytes")
    for box in boxes:  # from the step that writes it to the step that last reads it
        left, width = (box.first, box.last - box.first) if box.last > box.first else \
            (box.first - 0.45, 0.9)
        live = step is None or box.first <= step <= box.last
        axes.broken_barh([(left, width)], (box.low / scale, (box.high - box.low) / scale),
                         facecolor=KIND_COLOURS.get(box.kind, OTHER_COLOUR),
                         edgecolor=OKABE_ITO["vermillion"] if box.inplace else "#555555",
                         linewidth=1.6 if box.inplace else 0.6, hatch="///" if box.backward
                         else None, alpha=1.0 if live else 0.35)
        if width >= 1.5:
            axes.text(left + width / 2, (box.low + box.high) / 2 / scale, box.name,
                      ha="center", va="center", fontsize=7, clip_on=True)
    axes.axhline(plan.buffer_bytes[0] / scale, color=OKABE_ITO["blue"], linestyle="-",
                 linewidth=1, label=f"end of the shared arena: {plan.buffer_bytes[0]} bytes")
    axes.axhline(plan.bound / scale, color=OKABE_ITO["vermillion"], linestyle="--",
                 linewidth=1, label=f"liveness bound: {plan.bound} bytes")
    first_backward = min((box.first for box in boxes if box.backward), default=None)
    if first_backward is not None:
        axes.axvline(first_backward - 0.5, color="#333333", linestyle=":", linewidth=1,
                     label="backward starts")
    if step is not None:
        axes.axvline(step, color=OKABE_ITO["orange"], linewidth=2.5, alpha=0.8,
                     label=f"step {step}: {live_bytes(boxes, step)} bytes live")
    kinds = sorted({box.kind for box in boxes})
    handles = [Patch(facecolor=KIND_COLOURS.get(k, OTHER_COLOUR), edgecolor="#555555",
                     label=k) for k in kinds]
    handles.append(Patch(facecolor="white", edgecolor=OKABE_ITO["vermillion"],
                         label="in place over its input"))
    if first_backward is not None:
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="///",
                             label="computed by the backward"))
    axes.legend(handles=[*axes.get_legend_handles_labels()[0], *handles], fontsize=7,
                loc="upper left", bbox_to_anchor=(1.01, 1))
    axes.set(xlabel="program step (node)",
             ylabel=f"byte offset ({unit}): arena, then own buffers",
             ylim=(0, max(total, plan.bound, 1) / scale * 1.15))
    axes.set_title(f"{len(boxes)} results placed; peak {plan.planned} bytes (scratch "
                   f"{plan.workspace} included), {plan.unplanned} unplanned", fontsize=9)
    return figure


def live_bytes(boxes: list[Box], step: int) -> int:
    """The bytes in use at ``step``: the union of the boxes alive then (written at or
    before it, read at or after it). A result computed in place shares its input's bytes,
    so the hand-over step counts them once."""
    used, end = 0, 0
    for low, high in sorted((b.low, b.high) for b in boxes if b.first <= step <= b.last):
        used += max(0, high - max(low, end))
        end = max(end, high)
    return used


class MemoryExplorer(Instrument):
    """The timeline as a widget: forward or forward + backward, and a step slider that
    names the result computed at that step and the results alive across it."""

    MODES = ("forward", "forward + backward")

    def __init__(self, obj: Any, shape: dict | None = None, backward: bool = False) -> None:
        import ipywidgets as widgets
        from matplotlib.figure import Figure

        self.plans = {mode: timeline(obj, shape, mode != "forward") for mode in self.MODES}
        self.mode = widgets.ToggleButtons(options=list(self.MODES),
                                          value=self.MODES[int(backward)], description="program")
        self.step = widgets.IntSlider(value=0, min=0, description="step",
                                      continuous_update=False)
        self.text = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.figure = Figure(figsize=(8, 3.2), layout="constrained")  # not through pyplot
        self.mode.observe(self._mode_changed, names="value")
        self.step.observe(lambda change: self.refresh(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.mode, self.step]), self.text,
                                    self.image])
        self.widget.add_class("hybridlab-memory-explorer")
        self._mode_changed()

    def _mode_changed(self, change: Any = None) -> None:
        boxes, _ = self.plans[self.mode.value]
        last = max(box.last for box in boxes)
        with self.step.hold_trait_notifications():
            self.step.max = last
            self.step.value = min(self.step.value, last)
        self.refresh()

    def describe(self) -> str:
        """The step's line: what it computes, what is alive across it, and the plan."""
        boxes, plan = self.plans[self.mode.value]
        step = self.step.value
        made = [box.name for box in boxes if box.first == step]
        alive = [box.name for box in boxes if box.first <= step <= box.last]
        computed = ", ".join(made) or "no placed result"
        return (f"{self.mode.value}: step {step} computes {computed}; {len(alive)} results "
                f"alive, {live_bytes(boxes, step)} bytes. {plan}")

    def refresh(self) -> None:
        boxes, plan = self.plans[self.mode.value]
        self.png = figure_png(draw(self.figure, boxes, plan, self.step.value))
        self.image.value = self.png
        self.text.value = f"<code>{html.escape(self.describe())}</code>"

    def summary(self) -> str:
        return self.describe()

    def snapshot_png(self) -> bytes | None:
        return self.png


def memory_explorer(obj: Any, shape: dict | None = None, backward: bool = False
                    ) -> MemoryExplorer:
    """The memory timeline of ``obj`` as a widget (see :class:`MemoryExplorer`)."""
    return MemoryExplorer(obj, shape, backward)
