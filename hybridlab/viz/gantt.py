"""Gantt charts: the one renderer for the engine's trace, simulated schedules and Dask.

What this module teaches
------------------------
A dependency engine runs an op as soon as the ops it depends on are done and a worker
is free. Drawing what ran where and when (one row per worker, one bar per op) shows
laziness and automatic parallelism at a glance: independent ops overlap, dependent ones
wait. The schedules themselves -- the list scheduler, work, span and makespan -- are
computed in :mod:`hybridlab.lab.schedule`; this module only draws.

Invariants
----------
* Draws :class:`~hybridlab.engine.TaskRecord` s only: the engine's trace, a simulated
  schedule and Dask's task stream (``hybridlab.dask.stream_records``) are all records,
  and :func:`draw_tasks` is the one routine that puts them on axes (the schedule
  explorer uses it too).
* Bars are coloured by the registry's ``OpDef.kind`` with the graph drawings' colours,
  so one op has one colour in every chart of the course, never via a table of op
  names; a legend names the ops of each kind. Names are written on bars only where the
  text fits. matplotlib is imported inside functions only.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from hybridlab.engine import TaskRecord
from hybridlab.lab.graphs import op_kind
from hybridlab.lab.schedule import describe
from hybridlab.viz.palette import KIND_COLOURS, OTHER_COLOUR

BAR = 0.38  # half a bar's height, in rows
EDGE = "#555555"


def draw_tasks(axes: Any, records: Sequence[TaskRecord], rows: Sequence[int],
               colours: Sequence[str], *, edges: Sequence[str] | None = None,
               linewidths: Sequence[float] | None = None,
               hatches: Sequence[str] | None = None, origin: float = 0.0,
               scale: float = 1.0) -> list[tuple[float, float, int, str]]:
    """Put one bar per record on ``axes``: row ``rows[i]``, from ``(start - origin) *
    scale`` to ``(end - origin) * scale``, filled with ``colours[i]`` (and hatched with
    ``hatches[i]``). One collection per hatch, so a redraw is a few artists, not one per
    bar. Returns ``(left, width, row, name)`` per bar, for :func:`label_tasks`."""
    from matplotlib.collections import PolyCollection

    bars = [((r.start - origin) * scale, (r.end - r.start) * scale, row, r.name)
            for r, row in zip(records, rows)]
    edges = edges or [EDGE] * len(bars)
    linewidths = linewidths or [0.6] * len(bars)
    hatches = hatches or [""] * len(bars)
    for hatch in sorted(set(hatches)):
        mine = [i for i, h in enumerate(hatches) if h == hatch]
        axes.add_collection(PolyCollection(
            [[(left, row - BAR), (left + width, row - BAR), (left + width, row + BAR),
              (left, row + BAR)] for left, width, row, _ in (bars[i] for i in mine)],
            facecolors=[colours[i] for i in mine], edgecolors=[edges[i] for i in mine],
            linewidths=[linewidths[i] for i in mine], hatch=hatch or None))
    return bars


def label_tasks(axes: Any, bars: Sequence[tuple[float, float, int, str]],
                fontsize: float = 9, shorten: Any = None) -> None:
    """Write each bar's name on it where the text fits inside the bar with a margin
    (estimated from the font size, so no text is measured: the axes' limits must be set
    first); neighbouring labels never run together."""
    figure = axes.figure
    char = 0.6 * fontsize * figure.dpi / 72  # an average glyph's width, in pixels
    for left, width, row, name in bars:
        text = shorten(name) if shorten else name
        x0, x1 = axes.transData.transform([(left, row), (left + width, row)])[:, 0]
        if len(text) * char + 8 < 0.9 * (x1 - x0):
            axes.text(left + width / 2, row, text, ha="center", va="center",
                      fontsize=fontsize, clip_on=True)


def kind_colours(records: Sequence[TaskRecord]) -> list[str]:
    """Each record's fill: its operator's kind, as in the graph drawings."""
    return [KIND_COLOURS.get(op_kind(r.name), OTHER_COLOUR) for r in records]


def gantt(records: Sequence[TaskRecord], title: str = "engine trace",
          rows: Mapping[int, str] | None = None,
          beside: Sequence[tuple[Sequence[TaskRecord], str]] = ()) -> Any:
    """A matplotlib figure: one row per worker, one bar per op (milliseconds), coloured
    by the op's kind as in the graph drawings, with a legend naming the ops of each kind.
    ``rows`` names the workers (default ``worker 0``, ``worker 1``, ...). ``beside``: more
    ``(records, title)`` charts drawn below on the same time axis (e.g. a simulation of
    the same tasks), each from its own first op."""
    import matplotlib.pyplot as plt

    charts = [(records, title), *beside]
    for chart, _ in charts:
        if not chart:
            raise ValueError(describe(chart))
    heights = [1.0 + 0.5 * len({r.worker for r in chart}) for chart, _ in charts]
    figure, axes = plt.subplots(len(charts), 1, figsize=(8, 0.6 + sum(heights)),
                                layout="constrained", sharex=True, squeeze=False,
                                height_ratios=heights)
    drawn = []
    for (chart, heading), ax in zip(charts, axes[:, 0]):
        origin = min(r.start for r in chart)
        workers = sorted({r.worker for r in chart})
        bars = draw_tasks(ax, chart, [workers.index(r.worker) for r in chart],
                          kind_colours(chart), origin=origin, scale=1e3)
        drawn.append((ax, bars))
        ax.set_ylim(len(workers) - 0.5, -0.5)
        names = rows if rows and chart is records else {}  # ``rows`` name the first chart's
        ax.set_yticks(range(len(workers)), [names.get(w, f"worker {w}") for w in workers])
        ax.set_title(f"{heading}\n{describe(chart)}")
    right = max(left + width for _, bars in drawn for left, width, _, _ in bars)
    axes[-1, 0].set(xlim=(0, right * 1.01 or 1.0), xlabel="time since the first op (ms)")
    handles = legend_handles([r for chart, _ in charts for r in chart])
    figure.legend(handles=handles, loc="outside lower center", ncols=min(2, len(handles)),
                  fontsize=9, frameon=False)  # (one row of long labels: 2000 px wide)
    figure.draw_without_rendering()  # settles the layout, so labels fit the final bars
    for ax, bars in drawn:
        label_tasks(ax, bars, fontsize=9)
    return figure


def legend_handles(records: Sequence[TaskRecord], width: int = 44) -> list[Any]:
    """One patch per kind present, naming its ops (so unlabelled narrow bars are readable);
    a label longer than ``width`` characters wraps, so two columns fit the figure."""
    import textwrap

    from matplotlib.patches import Patch

    names: dict[str, list[str]] = {}
    for name in sorted({r.name for r in records}):
        names.setdefault(op_kind(name), []).append(name)
    return [Patch(facecolor=KIND_COLOURS.get(kind, OTHER_COLOUR), edgecolor="#555555",
                  label=textwrap.fill(f"{kind}: {', '.join(ops)}", width))
            for kind, ops in sorted(names.items())]


def two_axes(figure: Any, width_ratios: list[float], **margins: float) -> tuple[Any, Any]:
    """The figure's two side-by-side axes (a Gantt chart and its curve), emptied. Made once
    per figure (fixed margins, not a layout engine, so a redraw is one render); a redraw
    removes only what it drew, so the axes and their ticks are reused: clearing and
    making them again took half of the schedule and all-reduce explorers' redraws."""
    if getattr(figure, "_hybridlab_axes", None) != tuple(figure.axes) or \
            len(figure.axes) != 2:
        figure.clear()
        figure.subplots(1, 2, width_ratios=width_ratios, gridspec_kw=margins)
        figure._hybridlab_axes = tuple(figure.axes)
    for axes in figure.axes:
        for artist in [*axes.collections, *axes.lines, *axes.texts, *axes.patches]:
            artist.remove()
        if axes.get_legend() is not None:
            axes.get_legend().remove()
    return figure.axes[0], figure.axes[1]
