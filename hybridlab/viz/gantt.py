"""Gantt charts of engine traces, and of schedules simulated on k workers.

What this module teaches
------------------------
A dependency engine runs an op as soon as the ops it depends on are done and a worker
is free. Drawing what ran where and when (one row per worker, one bar per op) shows
laziness and automatic parallelism at a glance: independent ops overlap, dependent ones
wait. :func:`simulate` replays a list of ops with their dependencies on ``k`` imaginary
workers (greedy, in push order, as the engine schedules), so a lesson can ask "what if
there were 4 workers?" on a 2-core machine.

Invariants
----------
* Reads only :class:`~hybridlab.engine.TaskRecord` s (the engine's records); never the
  engine itself. Simulated schedules are TaskRecords too, so one drawing serves both.
* Bars are coloured by the registry's ``OpDef.kind`` with the graph drawings' colours,
  so one op has one colour in every chart of the course, never via a table of op
  names; a legend names the ops of each kind. Names are written on bars only where the
  text measurably fits. matplotlib is imported inside :func:`gantt` only.
"""

from __future__ import annotations

from typing import Any, Sequence

from hybridlab.engine import TaskRecord
from hybridlab.viz.palette import KIND_COLOURS, OTHER_COLOUR


def simulate(names: Sequence[str], deps: Sequence[Sequence[int]],
             durations: Sequence[float], workers: int) -> list[TaskRecord]:
    """Greedy list scheduling: op ``i`` starts when ops ``deps[i]`` are done and a worker
    is free, taking the worker that can start it earliest. Times are in seconds."""
    if workers < 1:
        raise ValueError(f"simulate needs at least one worker, got {workers}")
    free_at = [0.0] * workers
    ends: list[float] = []
    records = []
    for index, (name, needs, duration) in enumerate(zip(names, deps, durations)):
        late = [d for d in needs if d >= index]
        if late:
            raise ValueError(f"op {index} ({name}) depends on {late}: list ops in push order")
        ready = max((ends[d] for d in needs), default=0.0)
        worker = min(range(workers), key=lambda w: (max(free_at[w], ready), w))
        start = max(free_at[worker], ready)
        ends.append(start + duration)
        free_at[worker] = ends[-1]
        records.append(TaskRecord(name, worker, start, ends[-1], (), ()))
    return records


def describe(records: Sequence[TaskRecord]) -> str:
    """One line: how many ops, on how many workers, the time span and how busy they were."""
    if not records:
        return "no ops recorded (turn tracing on with engine.set_tracing(True))"
    workers = {r.worker for r in records}
    span = max(r.end for r in records) - min(r.start for r in records)
    busy = sum(r.end - r.start for r in records) / (span * len(workers)) if span > 0 else 1.0
    return (f"{len(records)} ops on {len(workers)} worker(s): span {span * 1e3:.3f} ms, "
            f"workers busy {busy:.0%} of it")


def op_kind(name: str) -> str:
    """The registry's kind of an op name (``OpDef.kind``), or "other" (CachedOp, user ops)."""
    from hybridlab.ops import registry

    try:
        return registry.get(name).kind.value
    except KeyError:  # not a registry operator: a CachedOp, or a task pushed by hand
        return "other"


def gantt(records: Sequence[TaskRecord], title: str = "engine trace") -> Any:
    """A matplotlib figure: one row per worker, one bar per op (milliseconds), coloured
    by the op's kind as in the graph drawings, with a legend naming the ops of each kind."""
    import matplotlib.pyplot as plt

    if not records:
        raise ValueError(describe(records))
    origin = min(r.start for r in records)
    workers = sorted({r.worker for r in records})
    figure, axes = plt.subplots(figsize=(8, 1.6 + 0.5 * len(workers)), layout="constrained")
    bars = []
    for record in records:
        row, left = workers.index(record.worker), (record.start - origin) * 1e3
        width = (record.end - record.start) * 1e3
        axes.broken_barh([(left, width)], (row - 0.4, 0.8), edgecolor="#555555",
                         facecolor=KIND_COLOURS.get(op_kind(record.name), OTHER_COLOUR))
        bars.append((left, width, row, record.name))
    axes.set_yticks(range(len(workers)), [f"worker {w}" for w in workers])
    axes.set(xlabel="time since the first op (ms)", title=f"{title}\n{describe(records)}")
    axes.invert_yaxis()
    handles = _legend(records)
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles),
                  fontsize=8, frameon=False)
    figure.draw_without_rendering()  # settles the layout, so labels fit the final bars
    _label_bars(figure, axes, bars)
    return figure


def _legend(records: Sequence[TaskRecord]) -> list[Any]:
    """One patch per kind present, naming its ops (so unlabelled narrow bars are readable)."""
    from matplotlib.patches import Patch

    names: dict[str, list[str]] = {}
    for name in sorted({r.name for r in records}):
        names.setdefault(op_kind(name), []).append(name)
    return [Patch(facecolor=KIND_COLOURS.get(kind, OTHER_COLOUR), edgecolor="#555555",
                  label=f"{kind}: {', '.join(ops)}") for kind, ops in sorted(names.items())]


def _label_bars(figure: Any, axes: Any, bars: list[tuple[float, float, int, str]]) -> None:
    """Write each op's name on its bar, only where the text really fits (measured)."""
    renderer = figure.canvas.get_renderer()
    for left, width, row, name in bars:
        text = axes.text(left + width / 2, row, name, ha="center", va="center", fontsize=8,
                         clip_on=True)
        x0, x1 = axes.transData.transform([(left, row), (left + width, row)])[:, 0]
        if text.get_window_extent(renderer).width > 0.9 * (x1 - x0):
            text.remove()
