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

A real network's program (lesson 09) places thousands of results over thousands of steps:
a box each would be a speck. Past :data:`MANY_BOXES` results the picture is the
*profile* instead -- the bytes of results alive at each step (``lab.memory.live_profile``),
under the same two lines -- and the step slider reads out what each step computes.

:func:`~hybridlab.lab.memory.timeline` computes the boxes (the model, in ``hybridlab.lab``);
:func:`memory_timeline` draws them with matplotlib and returns a bundle-ready figure.
"""

from __future__ import annotations

import html
from typing import Any, Sequence

from hybridlab.lab.memory import (
    LABEL_PT,
    MODES,
    Box,
    Fit,
    describe_step,
    fits,
    live_profile,
    rectangles,
    step_text,
    timeline,
)
from hybridlab.viz.bundle import AUTO_BUTTONS, NATURAL_SIZE, ROW, Instrument, canvas_png
from hybridlab.viz.palette import KIND_COLOURS, OKABE_ITO, OTHER_COLOUR


def memory_timeline(obj: Any, shape: dict | None = None, backward: bool = False
                    ) -> tuple[Any, str]:
    """A matplotlib figure of the arena over the program's steps, and a one-line summary
    (the plan's own line); ``backward=True`` for the joint forward + backward program."""
    import matplotlib.pyplot as plt

    boxes, plan = timeline(obj, shape, backward)
    figure = plt.figure(figsize=(8, 3.2), layout="constrained")
    draw(figure, boxes, plan)
    return figure, str(plan)


MANY_BOXES = 300  # more results than this: the profile of bytes alive, not a box each
def draw(figure: Any, boxes: list[Box], plan: Any, step: int | None = None,
         artists: dict[str, Any] | None = None) -> Any:
    """Draw the timeline on ``figure`` (cleared first); ``step`` marks one program step.

    ``artists`` (the explorer's): every box is drawn faded, with an *animated* full copy
    and label on top (``"live"``: (box, bar, label) each), and the step's line and text
    are animated too (``"step"``, ``"text"``). A canvas draw then leaves them out, so a
    step only pastes the saved background and draws what is alive (:class:`MemoryExplorer`).
    """
    figure.clear()
    axes = figure.add_subplot()
    total = sum(plan.buffer_bytes)
    scale, unit = (1024, "KiB") if total >= 4096 else (1, "bytes")
    # the plot area in points (about 6 x 2.3 inches of the 8 x 3.2 figure, legend aside)
    steps = max((box.last for box in boxes), default=0) + 1
    pt_per_step, pt_per_unit = 430 / steps, 165 / (max(total, plan.bound, 1) / scale * 1.15)
    if len(boxes) > MANY_BOXES:  # a real network: the bytes alive, not one box per result
        profile = live_profile(boxes)
        axes.fill_between(range(len(profile)), [b / scale for b in profile], step="mid",
                          color=KIND_COLOURS["opaque"], edgecolor="#555555", linewidth=0.6,
                          label=f"bytes of results alive ({len(boxes)} results)")
    live = [step is None or box.first <= step <= box.last for box in boxes]
    # a backward box is hatched where a hatch shows (8 points or more each way): hatching
    # is most of a redraw's time, and on a box a few pixels wide it is invisible anyway
    hatched = [box.backward and box.span()[1] * pt_per_step >= 8
               and (box.high - box.low) / scale * pt_per_unit >= 8 for box in boxes]
    # a real network has thousands of steps: a box is at least 2 points wide, and one
    # too small for an edge has none (else its edge would be all that shows of it)
    fit = (scale, 2 / pt_per_step, 4 / pt_per_step, 4 / pt_per_unit * scale)
    if len(boxes) <= MANY_BOXES:
        _draw_boxes(axes, boxes, live, hatched, fit, artists)
        _draw_labels(axes, boxes, (pt_per_step, pt_per_unit, scale), artists)
    first_backward = _draw_lines(axes, boxes, plan, step, scale, artists)
    kinds = sorted({box.kind for box in boxes}) if len(boxes) <= MANY_BOXES else []
    _legend(axes, kinds, first_backward is not None)
    axes.set(xlabel="program step (node)",
             ylabel=f"byte offset ({unit}):\narena, then own buffers" if kinds else
             f"bytes alive ({unit})", ylim=(0, max(total if kinds else 0, plan.bound, 1)
                                            / scale * 1.15))
    axes.set_title(f"{len(boxes)} results placed; peak {plan.planned} bytes (scratch "
                   f"{plan.workspace} included), {plan.unplanned} unplanned", fontsize=9,
                   loc="left")  # a long title runs right, over the legend's margin
    return figure


def _draw_boxes(axes: Any, boxes: list[Box], live: list[bool], hatched: list[bool],
                fit: Fit, artists: dict[str, Any] | None) -> None:
    """One collection per hatch (thousands of boxes, two artists); with ``artists``, every
    box faded under an animated full copy the explorer draws over the live ones."""
    for hatch in (False, True):
        chosen = [i for i in range(len(boxes)) if hatched[i] == hatch]
        if not chosen:
            continue
        faded = _collection(boxes, chosen, fit, [0.35 if artists is not None or not live[i]
                                                    else 1.0 for i in chosen], hatch)
        axes.add_collection(faded)
        if artists is not None:  # the full copy, drawn by the explorer over the live boxes
            top = _collection(boxes, chosen, fit, [1.0] * len(chosen), hatch)
            top.set_animated(True)
            axes.add_collection(top)
            looks = (top.get_facecolor().copy(), top.get_edgecolor().copy(),
                     list(top.get_linewidth()))  # per chosen box, picked per step
            artists.setdefault("live", []).append((top, chosen, rectangles(boxes, fit),
                                                   looks))


def _draw_labels(axes: Any, boxes: list[Box], sizes: tuple[float, float, float],
                 artists: dict[str, Any] | None) -> None:
    """A box's name only where it fits whole (``sizes``: points per step and per unit,
    bytes per unit)."""
    pt_per_step, pt_per_unit, scale = sizes
    for box in boxes:
        left, width = box.span()
        if fits(box.name, width * pt_per_step, (box.high - box.low) / scale * pt_per_unit):
            label = axes.text(left + width / 2, (box.low + box.high) / 2 / scale, box.name,
                              ha="center", va="center", fontsize=LABEL_PT, clip_on=True,
                              animated=artists is not None)
            if artists is not None:
                artists.setdefault("labels", []).append((box, label))


def _draw_lines(axes: Any, boxes: list[Box], plan: Any, step: int | None, scale: float,
                artists: dict[str, Any] | None) -> int | None:
    """The arena's end, the liveness bound, where the backward starts (returned: None
    without one) and the chosen step with its text."""
    axes.axhline(plan.buffer_bytes[0] / scale, color=OKABE_ITO["blue"], linestyle="-",
                 linewidth=1, label=f"end of the shared arena: {plan.buffer_bytes[0]} bytes")
    axes.axhline(plan.bound / scale, color=OKABE_ITO["vermillion"], linestyle="--",
                 linewidth=1, label=f"liveness bound: {plan.bound} bytes")
    first_backward = min((box.first for box in boxes if box.backward), default=None)
    if first_backward is not None:
        axes.axvline(first_backward - 0.5, color="#333333", linestyle=":", linewidth=1,
                     label="backward starts")
    if step is not None:
        line = axes.axvline(step, color=OKABE_ITO["orange"], linewidth=2.5, alpha=0.8,
                            label="the chosen step", animated=artists is not None)
        text = axes.text(1.0, -0.2, step_text(boxes, step), transform=axes.transAxes,
                         ha="right", va="top", fontsize=9, animated=artists is not None)
        if artists is not None:
            artists.update(step=line, text=text)
    return first_backward


def _legend(axes: Any, kinds: list[str], backward: bool) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=KIND_COLOURS.get(k, OTHER_COLOUR), edgecolor="#555555",
                     label=k) for k in kinds]
    if kinds:
        handles.append(Patch(facecolor="white", edgecolor=OKABE_ITO["vermillion"],
                             label="in place over its input"))
    if backward and kinds:
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="///",
                             label="computed by the backward"))
    axes.legend(handles=[*axes.get_legend_handles_labels()[0], *handles], fontsize=9,
                loc="upper left", bbox_to_anchor=(1.01, 1))


def _collection(boxes: list[Box], chosen: list[int], fit: Fit, alphas: list[float],
                hatch: bool) -> Any:
    """The ``chosen`` boxes as one PolyCollection: colour by kind, a red edge in place,
    hatched (``hatch``) when computed by the backward."""
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    picked = [boxes[i] for i in chosen]
    return PolyCollection(
        rectangles(picked, fit),
        facecolors=[to_rgba(KIND_COLOURS.get(b.kind, OTHER_COLOUR), a)
                    for b, a in zip(picked, alphas)],
        edgecolors=[to_rgba(OKABE_ITO["vermillion"] if b.inplace else "#555555", a)
                    for b, a in zip(picked, alphas)],
        linewidths=[0.0 if b.span()[1] < fit[2] or b.high - b.low < fit[3] else
                    1.6 if b.inplace else 0.6 for b in picked],
        hatch="///" if hatch else None)


class MemoryExplorer(Instrument):
    """The timeline as a widget: forward or forward + backward, and a step slider that
    names the result computed at that step and the results alive across it."""

    MODES: tuple[str, ...] = MODES

    def __init__(self, obj: Any, shape: dict | None = None, backward: bool = False,
                 modes: Sequence[str] = MODES) -> None:
        import ipywidgets as widgets
        from matplotlib.figure import Figure

        if not modes or set(modes) - set(MODES) or MODES[int(backward)] not in modes:
            raise ValueError(f"modes={list(modes)!r}: give some of {list(MODES)}, including "
                             f"the program shown first ({MODES[int(backward)]!r})")
        self.MODES = tuple(m for m in MODES if m in modes)  # the programs this one offers
        self.plans = {mode: timeline(obj, shape, mode != "forward") for mode in self.MODES}
        self.mode = widgets.ToggleButtons(options=list(self.MODES),
                                          value=MODES[int(backward)], description="program",
                                          style=AUTO_BUTTONS)
        if len(self.MODES) == 1:  # one program: a toggle of one option is no choice
            self.mode.layout.display = "none"
        self.step = widgets.IntSlider(value=0, min=0, description="step",
                                      continuous_update=False)
        self.text = widgets.HTML()
        self.image = widgets.Image(format="png", layout=NATURAL_SIZE)
        # one figure per program, drawn once here: a control then only pastes and draws
        self._drawn = {mode: self._draw_mode(mode, Figure(figsize=(8, 3.2)))
                       for mode in self.MODES}
        self.mode.observe(self._mode_changed, names="value")
        self.step.observe(lambda change: self.refresh(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.mode, self.step], layout=ROW), self.text,
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
        return describe_step(boxes, plan, self.mode.value, self.step.value)

    def _draw_mode(self, mode: str, figure: Any) -> tuple[Any, dict[str, Any], Any]:
        """Draw one program once (not through pyplot): lay it out, keep that layout, and
        save the background (all but the animated step and live boxes) for every step.
        Returns (figure, its animated artists, the background)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        boxes, plan = self.plans[mode]
        canvas, artists = FigureCanvasAgg(figure), {}  # type: ignore[var-annotated]
        figure.set_layout_engine("constrained")
        draw(figure, boxes, plan, 0, artists)
        canvas.draw()
        figure.set_layout_engine("none")
        return figure, artists, canvas.copy_from_bbox(figure.bbox)

    def refresh(self) -> None:
        """One step: paste the background, draw the live boxes, the line and its text."""
        boxes, _ = self.plans[self.mode.value]
        figure, artists, background = self._drawn[self.mode.value]
        step, canvas, axes = self.step.value, figure.canvas, figure.axes[0]
        canvas.restore_region(background)
        for top, chosen, corners, (faces, edges, widths) in artists.get("live", ()):
            alive = [k for k, i in enumerate(chosen) if boxes[i].first <= step <= boxes[i].last]
            if not alive:  # only the boxes alive at this step are drawn over the faded ones
                continue
            top.set_verts(corners[[chosen[k] for k in alive]])
            top.set_facecolor(faces[alive])
            top.set_edgecolor(edges[alive])
            top.set_linewidth([widths[k] for k in alive])
            axes.draw_artist(top)
        for box, label in artists.get("labels", []):
            if box.first <= step <= box.last:
                axes.draw_artist(label)
        artists["step"].set_xdata([step, step])
        artists["text"].set_text(step_text(boxes, step))
        axes.draw_artist(artists["step"])
        axes.draw_artist(artists["text"])
        self.png = canvas_png(canvas)
        self.image.value = self.png
        self.text.value = f"<code>{html.escape(self.describe())}</code>"

    def summary(self) -> str:
        return self.describe()


def memory_explorer(obj: Any, shape: dict | None = None, backward: bool = False,
                    modes: Sequence[str] = MODES) -> MemoryExplorer:
    """The memory timeline of ``obj`` as a widget (see :class:`MemoryExplorer`); ``modes``
    the programs it offers (a real network's forward + backward takes a while to plan:
    ``modes=["forward"]`` leaves it out)."""
    return MemoryExplorer(obj, shape, backward, modes)
