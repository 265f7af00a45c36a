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
* Colours follow the order in which op names first appear (deterministic), never a
  table of op names. matplotlib is imported inside :func:`gantt` only.
"""

from __future__ import annotations

from typing import Any, Sequence

from hybridlab.engine import TaskRecord

PALETTE = ("#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5")


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


def gantt(records: Sequence[TaskRecord], title: str = "engine trace") -> Any:
    """A matplotlib figure: one row per worker, one labelled bar per op (milliseconds)."""
    import matplotlib.pyplot as plt

    if not records:
        raise ValueError(describe(records))
    origin = min(r.start for r in records)
    span_ms = (max(r.end for r in records) - origin) * 1e3
    workers = sorted({r.worker for r in records})
    colours: dict[str, str] = {}
    figure, axes = plt.subplots(figsize=(7, 1.2 + 0.5 * len(workers)))
    for record in records:
        colour = colours.setdefault(record.name, PALETTE[len(colours) % len(PALETTE)])
        row, left = workers.index(record.worker), (record.start - origin) * 1e3
        width = (record.end - record.start) * 1e3
        axes.broken_barh([(left, width)], (row - 0.4, 0.8), facecolor=colour,
                         edgecolor="#555555")
        if width > 0.06 * span_ms:  # a label only where it fits; hover-free and legible
            axes.text(left + width / 2, row, record.name, ha="center", va="center",
                      fontsize=7, clip_on=True)
    axes.set_yticks(range(len(workers)), [f"worker {w}" for w in workers])
    axes.set(xlabel="time since the first op (ms)", title=f"{title}\n{describe(records)}")
    axes.invert_yaxis()
    figure.tight_layout()
    return figure
