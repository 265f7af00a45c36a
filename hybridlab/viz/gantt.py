"""Gantt charts of engine traces, and of schedules simulated on k workers.

What this module teaches
------------------------
A dependency engine runs an op as soon as the ops it depends on are done and a worker
is free. Drawing what ran where and when (one row per worker, one bar per op) shows
laziness and automatic parallelism at a glance: independent ops overlap, dependent ones
wait. :func:`simulate` replays a list of ops with their dependencies on ``k`` imaginary
workers, so a lesson can ask "what if there were 4 workers?" on a 2-core machine. It is a
*list scheduler*, as the engine is: no worker ever idles while an op is ready. Such a
schedule always lies within Brent's bounds, ``max(work / k, span) <= T_k <= work / k +
span`` (*work*: the sum of the durations; *span*: the longest chain of dependent ops).

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

import heapq
from typing import Any, Mapping, Sequence

from hybridlab.engine import TaskRecord
from hybridlab.viz.palette import KIND_COLOURS, OTHER_COLOUR


def simulate(names: Sequence[str], deps: Sequence[Sequence[int]],
             durations: Sequence[float], workers: int | Mapping[str, int],
             devices: Sequence[str] | None = None) -> list[TaskRecord]:
    """Greedy list scheduling of ops ``0..n-1`` on ``workers`` identical workers.

    Op ``i`` takes ``durations[i]`` and may start once the ops ``deps[i]`` are done. The
    schedule is *work-conserving*: whenever a worker is free and an op is ready, the op
    starts. When several ops are ready, the one with the longest path to the end of the
    program (its own duration plus its longest chain of dependents: the *bottom level*)
    goes first, then the lowest index; a free worker with the lowest number takes it. So
    the schedule is deterministic, and within Brent's bounds (module docstring). Returns one
    TaskRecord per op, in op order (times in the durations' unit).
    O((ops + dependencies) log ops): 10 000 ops take a fraction of a second.

    *Typed workers*: with ``workers={"cpu": 2, "gpu": 1, "copy": 1}`` and ``devices[i]``
    naming the kind of worker op ``i`` needs, each kind is its own pool, numbered in the
    mapping's order (cpu 0-1, gpu 2, copy 3). The rule is the same within each pool: a
    worker never idles while an op of its kind is ready. (Brent's bounds are for identical
    workers; a typed schedule still never runs two ops on one worker at once.)
    """
    n = len(names)
    pools = dict(workers) if isinstance(workers, Mapping) else {"": workers}
    if isinstance(workers, Mapping) and devices is None:
        raise ValueError("simulate: typed workers need devices=[the kind of each op]")
    if any(not isinstance(k, int) or k < 1 for k in pools.values()):
        raise ValueError(f"simulate needs at least one worker of each kind, got {workers}")
    kinds = [""] * n if not isinstance(workers, Mapping) else list(devices or ())
    if not len(deps) == len(durations) == len(kinds) == n:
        raise ValueError(f"simulate: {n} names, {len(deps)} dependency lists, "
                         f"{len(durations)} durations and {len(kinds)} devices: give one of "
                         f"each per op")
    if set(kinds) - set(pools):
        raise ValueError(f"simulate: ops need devices {sorted(set(kinds) - set(pools))} "
                         f"that have no workers (workers={workers})")
    if any(d < 0 for d in durations):
        raise ValueError("simulate: durations must be >= 0")
    order, dependents = _topological_order(names, deps)
    bottom = [0.0] * n  # the longest path from each op to the end, its own duration included
    for i in reversed(order):
        bottom[i] = durations[i] + max((bottom[j] for j in dependents[i]), default=0.0)
    waiting = [len(set(d)) for d in deps]
    ready: dict[str, list[tuple[float, int]]] = {kind: [] for kind in pools}
    idle: dict[str, list[int]] = {}  # per kind, a heap of free worker numbers
    for kind, count in pools.items():
        first = sum(len(free) for free in idle.values())
        idle[kind] = list(range(first, first + count))
    for i in range(n):
        if waiting[i] == 0:
            ready[kinds[i]].append((-bottom[i], i))
    for heap in ready.values():
        heapq.heapify(heap)
    running: list[tuple[float, int, int]] = []  # (end, op, worker)
    start, worker_of = [0.0] * n, [0] * n
    now = 0.0
    while running or any(ready.values()):
        for kind, queue in ready.items():  # work-conserving: nothing ready waits beside
            free = idle[kind]              # a free worker of its kind
            while queue and free:
                _, op = heapq.heappop(queue)
                start[op], worker_of[op] = now, heapq.heappop(free)
                heapq.heappush(running, (now + durations[op], op, worker_of[op]))
        now = running[0][0]
        while running and running[0][0] == now:  # everything finishing now frees together
            _, op, worker = heapq.heappop(running)
            heapq.heappush(idle[kinds[op]], worker)
            for dependent in dependents[op]:
                waiting[dependent] -= 1
                if waiting[dependent] == 0:
                    heapq.heappush(ready[kinds[dependent]], (-bottom[dependent], dependent))
    return [TaskRecord(names[i], worker_of[i], start[i], start[i] + durations[i], (), ())
            for i in range(n)]


def _topological_order(names: Sequence[str], deps: Sequence[Sequence[int]]
                       ) -> tuple[list[int], list[list[int]]]:
    """A topological order of the ops, and each op's dependents; raises on a cycle or on a
    dependency that names no op."""
    n = len(names)
    dependents: list[list[int]] = [[] for _ in range(n)]
    for i, needs in enumerate(deps):
        for d in set(needs):
            if not 0 <= d < n or d == i:
                raise ValueError(f"op {i} ({names[i]}) depends on {d}, which is "
                                 f"{'itself' if d == i else 'not an op'}")
            dependents[d].append(i)
    waiting = [len(set(d)) for d in deps]
    order = [i for i in range(n) if waiting[i] == 0]
    for op in order:  # Kahn's algorithm: ``order`` grows while it is walked
        for dependent in dependents[op]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                order.append(dependent)
    if len(order) < n:
        stuck = sorted(set(range(n)) - set(order))[:5]
        raise ValueError(f"simulate: the dependencies form a cycle (ops {stuck} never become "
                         f"ready)")
    return order, dependents


def work_and_span(deps: Sequence[Sequence[int]], durations: Sequence[float]
                  ) -> tuple[float, float]:
    """(work, span): the total duration, and the longest chain of dependent ops."""
    order, _ = _topological_order([str(i) for i in range(len(deps))], deps)
    finish = [0.0] * len(deps)
    for i in order:
        finish[i] = durations[i] + max((finish[d] for d in deps[i]), default=0.0)
    return float(sum(durations)), max(finish, default=0.0)


def describe(records: Sequence[TaskRecord]) -> str:
    """One line: how many ops, on how many workers, the makespan (wall-clock time from
    the first op's start to the last op's end -- not the *span*, the critical path) and
    how busy the workers were during it."""
    if not records:
        return "no ops recorded (turn tracing on with engine.set_tracing(True))"
    workers = {r.worker for r in records}
    makespan = max(r.end for r in records) - min(r.start for r in records)
    busy = (sum(r.end - r.start for r in records) / (makespan * len(workers))
            if makespan > 0 else 1.0)
    return (f"{len(records)} ops on {len(workers)} worker(s): makespan {makespan * 1e3:.3f} "
            f"ms (wall-clock), workers busy {busy:.0%} of it")


def op_kind(name: str) -> str:
    """The registry's kind of an op name (``OpDef.kind``), or "other" (CachedOp, user ops)."""
    from hybridlab.ops import registry

    try:
        return registry.get(name).kind.value
    except KeyError:  # not a registry operator: a CachedOp, or a task pushed by hand
        return "other"


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
    bars = []
    for (chart, heading), ax in zip(charts, axes[:, 0]):
        origin = min(r.start for r in chart)
        workers = sorted({r.worker for r in chart})
        for record in chart:
            row, left = workers.index(record.worker), (record.start - origin) * 1e3
            width = (record.end - record.start) * 1e3
            ax.broken_barh([(left, width)], (row - 0.4, 0.8), edgecolor="#555555",
                           facecolor=KIND_COLOURS.get(op_kind(record.name), OTHER_COLOUR))
            bars.append((ax, left, width, row, record.name))
        names = rows if rows and chart is records else {}  # ``rows`` name the first chart's
        ax.set_yticks(range(len(workers)), [names.get(w, f"worker {w}") for w in workers])
        ax.set_title(f"{heading}\n{describe(chart)}")
        ax.invert_yaxis()
    axes[-1, 0].set_xlabel("time since the first op (ms)")
    handles = _legend([r for chart, _ in charts for r in chart])
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles),
                  fontsize=8, frameon=False)
    figure.draw_without_rendering()  # settles the layout, so labels fit the final bars
    _label_bars(figure, bars)
    return figure


def _legend(records: Sequence[TaskRecord]) -> list[Any]:
    """One patch per kind present, naming its ops (so unlabelled narrow bars are readable)."""
    from matplotlib.patches import Patch

    names: dict[str, list[str]] = {}
    for name in sorted({r.name for r in records}):
        names.setdefault(op_kind(name), []).append(name)
    return [Patch(facecolor=KIND_COLOURS.get(kind, OTHER_COLOUR), edgecolor="#555555",
                  label=f"{kind}: {', '.join(ops)}") for kind, ops in sorted(names.items())]


def _label_bars(figure: Any, bars: list[tuple[Any, float, float, int, str]]) -> None:
    """Write each op's name on its bar, only where the text really fits (measured)."""
    renderer = figure.canvas.get_renderer()
    for axes, left, width, row, name in bars:
        text = axes.text(left + width / 2, row, name, ha="center", va="center", fontsize=8,
                         clip_on=True)
        x0, x1 = axes.transData.transform([(left, row), (left + width, row)])[:, 0]
        if text.get_window_extent(renderer).width > 0.9 * (x1 - x0):
            text.remove()
