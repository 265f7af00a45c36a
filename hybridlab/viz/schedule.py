"""The schedule explorer: one task graph, scheduled on 1 to 16 workers, as you watch.

What this module teaches
------------------------
Two numbers decide how fast a task graph can run. The *work* ``W`` is the sum of all
durations: one worker needs exactly that long. The *span* ``S`` is the longest chain of
dependent tasks (the *critical path*): no number of workers beats it. A list scheduler --
the engine, or :func:`~hybridlab.viz.gantt.simulate` -- never idles while a task is ready,
and then Brent's bounds hold for ``k`` workers::

    max(W / k, S)  <=  T_k  <=  W / k + S

so adding workers helps until ``W / k`` falls below ``S``, and nothing helps after. The
explorer schedules a graph on as many workers as the slider says, draws the Gantt chart
(dependency arrows and the critical path optional), prints ``W``, ``S``, ``T_k`` and the
bounds, and plots the speed-up against the worker count beside the ideal and the span
limit. Its *reduction* switch rewrites every chain of additions ``((a+b)+c)+d`` into a
balanced tree ``(a+b)+(c+d)``: the same work, a span of ``log n`` instead of ``n``.

Two layers, as every instrument (DESIGN.md section 5): :class:`TaskGraph` and
:class:`ScheduleModel` are plain Python (tested by pytest); :class:`ScheduleExplorer` is the
ipywidgets view, displayed through :class:`~hybridlab.viz.bundle.Instrument`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from hybridlab.engine import Task, TaskRecord
from hybridlab.viz.bundle import Instrument, figure_png
from hybridlab.viz.gantt import _legend, op_kind, simulate, work_and_span
from hybridlab.viz.palette import (
    DEVICE_COLOURS,
    DEVICE_HATCHES,
    KIND_COLOURS,
    OKABE_ITO,
    OTHER_COLOUR,
)

SUMS = ("broadcast_add", "elemwise_add", "_plus", "add")  # what the reduction switch rebalances


@dataclass
class TaskGraph:
    """Tasks ``0..n-1``: a name (the operator), the tasks each depends on, a duration
    (seconds, or any unit) for the *measured* cost model when one is known, and the kind of
    device each task runs on when the graph says (``"cpu"``, ``"gpu"``, ``"copy"``, ...)."""

    names: list[str]
    deps: list[list[int]]
    measured: list[float] | None = None
    notes: list[str] = field(default_factory=list)
    devices: list[str] | None = None
    unit: str = "units"  # of ``measured``: seconds for a trace's

    @classmethod
    def from_tasks(cls, tasks: Sequence[Task | TaskRecord]) -> TaskGraph:
        """From a StepEngine's tasks or an engine trace's records (their ``seq`` and
        ``deps``; dependencies on tasks outside the list are dropped)."""
        ordered = sorted(tasks, key=lambda t: t.seq)
        index = {t.seq: i for i, t in enumerate(ordered)}
        if len(index) < len(ordered) or -1 in index:
            raise ValueError("from_tasks needs tasks with distinct push numbers (seq): an "
                             "engine's tasks, or the records of a traced engine")
        deps = [sorted({index[d.seq] for d in t.deps if d.seq in index}) for t in ordered]
        records = [t for t in ordered if isinstance(t, TaskRecord)]
        measured = [r.end - r.start for r in records] if len(records) == len(ordered) else None
        return cls([t.name for t in ordered], deps, measured, unit="s")

    @classmethod
    def from_dict(cls, tasks: dict[str, tuple]) -> TaskGraph:
        """From ``{name: (duration, [names it depends on])}`` (listed in any order), or
        ``{name: (duration, [names], device)}`` to bind each task to a kind of device."""
        names = list(tasks)
        shapes = {len(spec) if isinstance(spec, (tuple, list)) else 0
                  for spec in tasks.values()}
        if not shapes <= {2, 3} or len(shapes) > 1:
            raise ValueError("from_dict: give every task as (duration, [dependencies]) or "
                             "every task as (duration, [dependencies], device)")
        unknown = {d for spec in tasks.values() for d in spec[1]} - set(names)
        if unknown:
            raise ValueError(f"from_dict: dependencies on unknown tasks {sorted(unknown)}")
        return cls(names, [[names.index(d) for d in spec[1]] for spec in tasks.values()],
                   [float(spec[0]) for spec in tasks.values()],
                   devices=[str(spec[2]) for spec in tasks.values()] if shapes == {3} else None)

    @classmethod
    def from_graph(cls, source: Any) -> TaskGraph:
        """One task per operator node of a Symbol or a graph IR (``Graph``), depending on
        the operator nodes it reads (inputs and constants are not tasks)."""
        from hybridlab.graph.ir import Graph

        graph = source.to_graph() if hasattr(source, "to_graph") else source
        if not isinstance(graph, Graph):
            raise TypeError(f"from_graph takes a Symbol or a graph IR, not "
                            f"{type(source).__name__}")
        calls = [node for node in graph.nodes if node.kind == "call"]
        index = {id(node): i for i, node in enumerate(calls)}
        return cls([str(node.op) for node in calls],
                   [sorted({index[id(v.node)] for v in node.inputs if id(v.node) in index})
                    for node in calls])

    def as_tree_reductions(self) -> TaskGraph:
        """The same graph with every chain of additions rebalanced into a tree.

        A chain is a run of sums where each one's only user is the next sum; its leaves
        (everything the chain adds up) are then added pairwise, level by level.
        """
        users: list[list[int]] = [[] for _ in self.names]
        for i, needs in enumerate(self.deps):
            for d in needs:
                users[d].append(i)
        is_sum = [name in SUMS and len(set(d)) == 2 for name, d in zip(self.names, self.deps)]
        deps = [list(d) for d in self.deps]
        for top in range(len(self.names)):  # the last sum of each chain: no sum uses it
            if not is_sum[top] or any(is_sum[u] for u in users[top]):
                continue
            sums, leaves, todo = [], [], [top]  # type: ignore[var-annotated]
            while todo:  # a sum whose only user is a sum of the chain belongs to the chain
                node = todo.pop()
                sums.append(node)
                for d in deps[node]:
                    (todo if is_sum[d] and users[d] == [node] else leaves).append(d)
            if len(leaves) < 3:
                continue  # nothing to gain
            queue = sorted(leaves)  # first in, first out: pairs, then pairs of pairs ...
            for node in sorted(sums):  # ... reusing the chain's own sums (top comes last)
                deps[node], queue = queue[:2], queue[2:] + [node]
        return TaskGraph(list(self.names), deps, list(self.measured) if self.measured else None,
                         ["additions rebalanced as trees"], self.devices, self.unit)


STREAMS = {  # the explorer's device settings, for graphs whose tasks name devices
    "identical": "identical workers (devices ignored)",
    "typed": "typed: cpu workers, one stream per device, copies on their own stream",
    "serialised": "typed, but copies share the compute stream (no overlap)",
}


class ScheduleModel:
    """A task graph and the explorer's settings; every number the view shows.

    ``cost``: ``"uniform"`` (one unit per task), ``"measured"`` (the trace's durations) or
    ``"per operator"`` (one cost per operator name: ``op_costs``, or the median measured
    duration of each operator). ``streams`` (for graphs whose tasks name devices, see
    :data:`STREAMS`): ``workers`` is then the number of cpu workers, beside one stream per
    other device.
    """

    def __init__(self, graph: TaskGraph, workers: int = 2, cost: str = "uniform",
                 tree: bool = False, op_costs: dict[str, float] | None = None,
                 streams: str = "identical") -> None:
        self.graph, self.workers, self.cost, self.tree = graph, workers, cost, tree
        self.op_costs, self.streams = op_costs, streams
        self.arrows, self.critical = True, True
        if cost not in self.costs():
            raise ValueError(f"cost={cost!r}: this graph offers {self.costs()}")
        if streams not in self.stream_options():
            raise ValueError(f"streams={streams!r}: this graph offers {self.stream_options()}"
                             + ("" if self.graph.devices else " (its tasks name no devices)"))

    def costs(self) -> list[str]:
        per_op = ["per operator"] if self.op_costs or self.graph.measured else []
        return ["uniform"] + (["measured"] if self.graph.measured else []) + per_op

    def stream_options(self) -> list[str]:
        return list(STREAMS) if self.graph.devices else ["identical"]

    def current(self) -> TaskGraph:
        return self.graph.as_tree_reductions() if self.tree else self.graph

    def durations(self, graph: TaskGraph) -> list[float]:
        if self.cost == "measured":
            if not graph.measured:
                raise ValueError("this graph has no measured durations: use cost='uniform'")
            return graph.measured
        if self.cost == "per operator":
            table = self.op_costs or _median_by_name(graph)
            missing = sorted(set(graph.names) - set(table))
            if missing:
                raise ValueError(f"op_costs gives no cost for {missing}: add them")
            return [float(table[name]) for name in graph.names]
        return [1.0] * len(graph.names)

    def pools(self, workers: int | None = None) -> int | dict[str, int]:
        """The workers: ``k`` identical ones, or ``{"cpu": k, <each device>: 1}``."""
        k = workers or self.workers
        if self.streams == "identical":
            return k
        return {"cpu": k, **{d: 1 for d in self._devices() if d != "cpu"}}

    def row_names(self) -> list[str]:
        pools = self.pools()
        if isinstance(pools, int):
            return [f"worker {w}" for w in range(pools)]
        return [f"{kind} {i}" if count > 1 else kind
                for kind, count in pools.items() for i in range(count)]

    def _devices(self) -> list[str]:
        """Each task's device under the setting: copies on the compute stream if serialised."""
        devices = list(self.graph.devices or [])
        if self.streams == "serialised":
            compute = next((d for d in devices if d not in ("cpu", "copy")), "cpu")
            devices = [compute if d == "copy" else d for d in devices]
        return devices

    def schedule(self, workers: int | None = None) -> list[TaskRecord]:
        graph = self.current()
        pools = self.pools(workers)
        return simulate(graph.names, graph.deps, self.durations(graph), pools,
                        None if isinstance(pools, int) else self._devices())

    def numbers(self) -> dict[str, float]:
        """work, span, the makespan, and the bounds every list schedule keeps: Brent's
        ``max(W/k, S) <= T <= W/k + S``; with typed workers, per pool ``d`` of ``k_d``
        workers doing work ``W_d``: ``max(S, max W_d/k_d) <= T <= S + sum W_d/k_d``."""
        graph = self.current()
        durations = self.durations(graph)
        work, span = work_and_span(graph.deps, durations)
        makespan = max((r.end for r in self.schedule()), default=0.0)
        pools = self.pools()
        if isinstance(pools, int):
            shares = [work / pools]
        else:
            devices = self._devices()
            shares = [sum(t for t, d in zip(durations, devices) if d == kind) / count
                      for kind, count in pools.items()]
        return {"work": work, "span": span, "makespan": makespan,
                "lower": max([span, *shares]), "upper": span + sum(shares)}

    def critical_path(self) -> list[int]:
        """Task indices of one longest chain (the first found, deterministic)."""
        graph = self.current()
        durations = self.durations(graph)
        finish, best = [0.0] * len(graph.names), [-1] * len(graph.names)
        for i in _order(graph):
            for d in graph.deps[i]:
                if finish[d] > finish[i]:
                    finish[i], best[i] = finish[d], d
            finish[i] += durations[i]
        path, node = [], max(range(len(finish)), key=lambda i: (finish[i], -i), default=-1)
        while node != -1:
            path.append(node)
            node = best[node]
        return path[::-1]

    def speedups(self, up_to: int = 16) -> list[tuple[int, float]]:
        """(k, T_1 / T_k) for k = 1 .. up_to (cpu) workers."""
        times = [max(r.end for r in self.schedule(k)) for k in range(1, up_to + 1)]
        return [(k, times[0] / t) for k, t in enumerate(times, start=1)]

    def summary(self) -> str:
        n, graph = self.numbers(), self.current()
        unit = graph.unit if self.cost != "uniform" else "units"
        where = (f"{self.workers} worker(s)" if self.streams == "identical" else
                 f"{', '.join(self.row_names())} ({self.streams})")
        bound = "Brent" if self.streams == "identical" else "bounds"
        return (f"{len(graph.names)} tasks on {where}, {self.cost} costs"
                f"{', tree reductions' if self.tree else ''}: work {n['work']:.4g}, span "
                f"{n['span']:.4g}, makespan {n['makespan']:.4g} {unit}; {bound}: "
                f"{n['lower']:.4g} <= T <= {n['upper']:.4g}")


def _median_by_name(graph: TaskGraph) -> dict[str, float]:
    """Each operator's median measured duration: one cost per operator name."""
    import statistics

    if not graph.measured:
        raise ValueError("per-operator costs need op_costs={name: cost} or a measured trace")
    by_name: dict[str, list[float]] = {}
    for name, t in zip(graph.names, graph.measured):
        by_name.setdefault(name, []).append(t)
    return {name: statistics.median(ts) for name, ts in by_name.items()}


def _order(graph: TaskGraph) -> list[int]:
    from hybridlab.viz.gantt import _topological_order

    return _topological_order(graph.names, graph.deps)[0]


def draw(model: ScheduleModel, figure: Any = None) -> Any:
    """The explorer's figure (reused when given): the Gantt chart with arrows and the
    critical path, and the speed-up curve against the ideal and the span limit."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.patches import Patch

    if figure is None:
        figure = plt.figure(figsize=(9, 3.6))
    figure.clear()
    # fixed margins, not a layout engine: a redraw stays one render (a slider must be quick)
    gantt_axes, curve_axes = figure.subplots(1, 2, width_ratios=[3, 1], gridspec_kw={
        "left": 0.09, "right": 0.98, "bottom": 0.27, "top": 0.9, "wspace": 0.28})
    graph, records = model.current(), model.schedule()
    critical = set(model.critical_path()) if model.critical else set()
    boxes, colours, edges = [], [], []
    devices = graph.devices  # bound to devices: colour by device (the names are the user's)
    for i, r in enumerate(records):
        boxes.append([(r.start, r.worker - 0.38), (r.end, r.worker - 0.38),
                      (r.end, r.worker + 0.38), (r.start, r.worker + 0.38)])
        colours.append(DEVICE_COLOURS.get(devices[i], OTHER_COLOUR) if devices else
                       KIND_COLOURS.get(op_kind(r.name), OTHER_COLOUR))
        edges.append(OKABE_ITO["vermillion"] if i in critical else "#555555")
    widths = [2.2 if i in critical else 0.6 for i in range(len(records))]
    if devices:  # one collection per device, so that copies can be hatched
        for kind in sorted(set(devices)):
            mine = [i for i, d in enumerate(devices) if d == kind]
            gantt_axes.add_collection(PolyCollection(
                [boxes[i] for i in mine], facecolors=[colours[i] for i in mine],
                edgecolors=[edges[i] for i in mine], linewidths=[widths[i] for i in mine],
                hatch=DEVICE_HATCHES.get(kind, "")))
    else:
        gantt_axes.add_collection(PolyCollection(boxes, facecolors=colours, edgecolors=edges,
                                                 linewidths=widths))
    if model.arrows:
        segments = [[(records[d].end, records[d].worker), (r.start, r.worker)]
                    for r, needs in zip(records, graph.deps) for d in needs]
        gantt_axes.add_collection(LineCollection(segments, colors="#777777", linewidths=0.6))
    if len(records) <= 40:
        for r in records:
            label = r.name.replace("broadcast_", "").replace("_scalar", "").lstrip("_")[:9]
            gantt_axes.text((r.start + r.end) / 2, r.worker, label,
                            ha="center", va="center", fontsize=6, clip_on=True)
    n, rows = model.numbers(), model.row_names()
    gantt_axes.set(xlim=(0, max(n["makespan"], 1e-9) * 1.02), ylim=(len(rows) - 0.5, -0.5),
                   xlabel=f"time ({graph.unit})" if model.cost != "uniform" else
                   "time (units of work)",
                   yticks=range(len(rows)), yticklabels=rows)
    where = f"{model.workers} worker(s)" if len(rows) == model.workers else ", ".join(rows)
    gantt_axes.set_title(f"makespan {n['makespan']:.4g} on {where}; "
                         f"work {n['work']:.4g}, span {n['span']:.4g}"
                         + (" (red: critical path)" if critical else ""), fontsize=9)
    handles = _legend(records) if not devices else [
        Patch(facecolor=DEVICE_COLOURS.get(kind, OTHER_COLOUR), edgecolor="#555555",
              hatch=DEVICE_HATCHES.get(kind, ""), label=f"{kind} task")
        for kind in sorted(set(devices))]
    gantt_axes.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                      ncols=len(handles), fontsize=7, frameon=False)
    ks, speeds = zip(*model.speedups())
    curve_axes.plot(ks, speeds, "o-", color=OKABE_ITO["blue"], markersize=3, label="simulated")
    curve_axes.plot(ks, ks, ":", color="#999999", label="ideal (k)")
    one_worker = max((r.end for r in model.schedule(1)), default=0.0)  # = W if identical
    curve_axes.axhline(one_worker / max(n["span"], 1e-12), color=OKABE_ITO["vermillion"],
                       linestyle="--", label="span limit T1/S")
    curve_axes.axvline(model.workers, color="#cccccc", linewidth=4, zorder=0)
    curve_axes.set(xlabel="workers" if len(rows) == model.workers else "cpu workers",
                   ylabel="speed-up over 1 worker",
                   ylim=(0, max(speeds) * 1.3 + 0.5))
    curve_axes.legend(fontsize=7, loc="upper left")
    return figure


class ScheduleExplorer(Instrument):
    """The widget: workers slider, cost model, reduction switch, arrows, critical path."""

    def __init__(self, model: ScheduleModel) -> None:
        import ipywidgets as widgets
        from matplotlib.figure import Figure

        self.model = model
        self.workers = widgets.IntSlider(value=model.workers, min=1, max=16,
                                         description="workers", continuous_update=False)
        self.cost = widgets.Dropdown(options=model.costs(), value=model.cost,
                                     description="costs")
        self.tree = widgets.ToggleButtons(options=["chain", "tree"],
                                          value="tree" if model.tree else "chain",
                                          description="sums")
        self.streams = widgets.Dropdown(
            options=[(label, key) for key, label in STREAMS.items()
                     if key in model.stream_options()],
            value=model.streams, description="devices", layout={"width": "34em"})
        if len(model.stream_options()) == 1:  # no devices in this graph: nothing to choose
            self.streams.layout.display = "none"
        self.arrows = widgets.Checkbox(value=model.arrows, description="dependency arrows")
        self.critical = widgets.Checkbox(value=model.critical, description="critical path")
        self.numbers = widgets.HTML()
        self.image = widgets.Image(format="png")
        # not through pyplot: a pyplot figure stays registered, and the inline backend
        # would show it again under the next cell that draws a plot
        self.figure = Figure(figsize=(9, 3.6))
        for control in (self.workers, self.cost, self.tree, self.streams, self.arrows,
                        self.critical):
            control.observe(self._changed, names="value")
        self.widget = widgets.VBox([
            widgets.HBox([self.workers, self.cost, self.tree]),
            widgets.HBox([self.streams, self.arrows, self.critical]), self.numbers, self.image])
        self.widget.add_class("hybridlab-schedule-explorer")
        self.refresh()

    def _changed(self, change: Any = None) -> None:
        m = self.model
        m.workers, m.cost, m.tree = self.workers.value, self.cost.value, self.tree.value == "tree"
        m.arrows, m.critical, m.streams = self.arrows.value, self.critical.value, self.streams.value
        self.refresh()

    def refresh(self) -> None:
        """Redraw in place: the same figure, a new PNG in the same Image widget."""
        self.png = figure_png(draw(self.model, self.figure), tight=False)
        self.image.value = self.png
        self.numbers.value = f"<code>{self.model.summary()}</code>"

    def summary(self) -> str:
        return self.model.summary()

    def snapshot_png(self) -> bytes | None:
        return self.png


def real_vs_simulated(records: Sequence[TaskRecord]) -> tuple[str, Any]:
    """A traced run beside the list schedule of the same tasks with the measured
    durations on as many workers: a line with both makespans and their ratio, and one
    figure with both Gantt charts on the same time axis (real above, simulated below).

    A ratio above 1 is time the real engine lost to what the simulation leaves out:
    pushing from Python, handing tasks to threads, waiting for the GIL.
    """
    from hybridlab.viz.gantt import gantt

    workers = len({r.worker for r in records if r.worker >= 0}) or 1
    model = ScheduleModel(TaskGraph.from_tasks(records), workers, cost="measured")
    simulated = model.schedule()
    real = max(r.end for r in records) - min(r.start for r in records)
    ideal = max(r.end for r in simulated)
    line = (f"makespan: real {real * 1e3:.3f} ms, simulated list schedule "
            f"{ideal * 1e3:.3f} ms on {workers} worker(s): real / simulated = {real / ideal:.2f}")
    moved = [TaskRecord(r.name, r.worker, r.start, r.end, r.reads, r.writes, r.seq, r.deps)
             for r in simulated]
    return line, gantt(records, "real: the engine's trace", beside=[
        (moved, f"simulated: the same {len(records)} tasks, measured durations")])


def schedule_explorer(source: Any, workers: int = 2, cost: str = "uniform", *,
                      op_costs: dict[str, float] | None = None, streams: str = "identical",
                      tree: bool = False) -> ScheduleExplorer:
    """The explorer over a StepEngine (its tasks), engine records (a trace), a Symbol or
    graph IR (one task per operator), a :class:`TaskGraph`, or ``{name: (duration,
    [dependencies])}`` / ``{name: (duration, [dependencies], device)}``. Settings as
    :class:`ScheduleModel`'s."""
    from hybridlab.graph.ir import Graph

    if isinstance(source, TaskGraph):
        graph = source
    elif isinstance(source, dict):
        graph = TaskGraph.from_dict(source)
    elif isinstance(source, Graph) or hasattr(source, "to_graph"):
        graph = TaskGraph.from_graph(source)
    elif hasattr(source, "tasks"):
        graph = TaskGraph.from_tasks(source.tasks)
    else:
        graph = TaskGraph.from_tasks(list(source))
    return ScheduleExplorer(ScheduleModel(graph, workers, cost, tree, op_costs, streams))
