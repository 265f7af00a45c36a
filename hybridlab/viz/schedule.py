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

Two layers, as every instrument (ARCHITECTURE.md, "Instruments"): the model --
:class:`~hybridlab.lab.schedule.TaskGraph` and :class:`~hybridlab.lab.schedule.ScheduleModel`
-- is plain Python in :mod:`hybridlab.lab.schedule`; :class:`ScheduleExplorer` is the
ipywidgets view, drawn with the one Gantt renderer (:func:`~hybridlab.viz.gantt.draw_tasks`).
"""

from __future__ import annotations

from typing import Any, Sequence

from hybridlab.engine import TaskRecord
from hybridlab.lab.schedule import STREAMS, ScheduleModel, TaskGraph
from hybridlab.viz.bundle import AUTO_BUTTONS, NATURAL_SIZE, ROW, Instrument, canvas_png
from hybridlab.viz.gantt import draw_tasks, kind_colours, label_tasks, legend_handles, two_axes
from hybridlab.viz.palette import DEVICE_COLOURS, DEVICE_HATCHES, OKABE_ITO, OTHER_COLOUR

BAND = "workers-band"  # the curve panel's mark of the chosen number of workers


def draw(model: ScheduleModel, figure: Any = None) -> Any:
    """The explorer's figure (reused when given): the Gantt chart with arrows and the
    critical path, and the speed-up curve against the ideal and the span limit."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Patch

    if figure is None:
        figure = plt.figure(figsize=(9, 3.6))
    gantt_axes, curve_axes = _axes(figure)
    graph, records = model.current(), model.schedule()
    critical = set(model.critical_path()) if model.critical else set()
    devices = graph.devices  # bound to devices: colour by device (the names are the user's)
    colours = ([DEVICE_COLOURS.get(d, OTHER_COLOUR) for d in devices] if devices else
               kind_colours(records))
    bars = draw_tasks(gantt_axes, records, [r.worker for r in records], colours,
                      edges=[OKABE_ITO["vermillion"] if i in critical else "#555555"
                             for i in range(len(records))],
                      linewidths=[2.2 if i in critical else 0.6 for i in range(len(records))],
                      hatches=[DEVICE_HATCHES.get(d, "") for d in devices] if devices else None)
    if model.arrows:
        segments = [[(records[d].end, records[d].worker), (r.start, r.worker)]
                    for r, needs in zip(records, graph.deps) for d in needs]
        # under the bars (zorder): an arrow shows in the gaps, never across a bar's label
        gantt_axes.add_collection(LineCollection(segments, colors="#777777", linewidths=0.6,
                                                 zorder=0.5))
    n, rows = model.numbers(), model.row_names()
    gantt_axes.set(xlim=(0, max(n["makespan"], 1e-9) * 1.02), ylim=(len(rows) - 0.5, -0.5),
                   xlabel=f"time ({graph.unit})" if model.cost != "uniform" else
                   "time (units of work)",
                   yticks=range(len(rows)), yticklabels=rows)
    where = f"{model.workers} worker(s)" if len(rows) == model.workers else ", ".join(rows)
    if len(records) <= 40:
        label_tasks(gantt_axes, bars, fontsize=9, shorten=lambda name: name.replace(
            "broadcast_", "").replace("_scalar", "").lstrip("_"))
    gantt_axes.set_title(f"makespan {n['makespan']:.4g} on {where}; "
                         f"work {n['work']:.4g}, span {n['span']:.4g}"
                         + (" (red: critical path)" if critical else ""), fontsize=9)
    handles = legend_handles(records) if not devices else [
        Patch(facecolor=DEVICE_COLOURS.get(kind, OTHER_COLOUR), edgecolor="#555555",
              hatch=DEVICE_HATCHES.get(kind, ""), label=f"{kind} task")
        for kind in sorted(set(devices))]
    gantt_axes.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                      ncols=len(handles), fontsize=9, frameon=False)
    ks, speeds = zip(*model.speedups())
    curve_axes.plot(ks, speeds, "o-", color=OKABE_ITO["blue"], markersize=3, label="simulated")
    curve_axes.plot(ks, ks, ":", color="#999999", label="ideal (k)")
    one_worker = max((r.end for r in model.schedule(1)), default=0.0)  # = W if identical
    curve_axes.axhline(one_worker / max(n["span"], 1e-12), color=OKABE_ITO["vermillion"],
                       linestyle="--", label="span limit T1/S")
    curve_axes.axvline(model.workers, color="#999999", alpha=0.4, linewidth=4, zorder=0,
                       gid=BAND)
    curve_axes.set(xlabel="workers" if len(rows) == model.workers else "cpu workers",
                   ylabel="speed-up over 1 worker",
                   ylim=(0, max(speeds) * 1.3 + 0.5))
    curve_axes.legend(fontsize=9, loc="lower right")  # the curves rise on the left
    return figure


def _axes(figure: Any) -> tuple[Any, Any]:
    return two_axes(figure, [3, 1], left=0.09, right=0.98, bottom=0.27, top=0.9, wspace=0.28)


class ScheduleExplorer(Instrument):
    """The widget: workers slider, cost model, reduction switch, arrows, critical path."""

    def __init__(self, model: ScheduleModel) -> None:
        import ipywidgets as widgets
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.model = model
        self.workers = widgets.IntSlider(value=model.workers, min=1, max=16,
                                         description="workers", continuous_update=False)
        self.cost = widgets.Dropdown(options=model.distinct_costs(), value=model.cost,
                                     description="costs")
        self.tree = widgets.ToggleButtons(options=["chain", "tree"],
                                          value="tree" if model.tree else "chain",
                                          description="sums", style=AUTO_BUTTONS)
        self.streams = widgets.Dropdown(
            options=[(label, key) for key, label in STREAMS.items()
                     if key in model.stream_options()],
            value=model.streams, description="devices", layout={"width": "auto"})
        if len(model.stream_options()) == 1:  # no devices in this graph: nothing to choose
            self.streams.layout.display = "none"
        # a control that would change nothing drawn is not shown: one cost model (or
        # several giving the same durations), sums without a chain to rebalance
        if len(model.distinct_costs()) == 1:
            self.cost.layout.display = "none"
        if not model.tree_matters():
            self.tree.layout.display = "none"
        self.arrows = widgets.Checkbox(value=model.arrows, description="dependency arrows")
        self.critical = widgets.Checkbox(value=model.critical, description="critical path")
        self.numbers = widgets.HTML()
        self.image = widgets.Image(format="png", layout=NATURAL_SIZE)
        # not through pyplot: a pyplot figure stays registered, and the inline backend
        # would show it again under the next cell that draws a plot
        self.figure = Figure(figsize=(9, 3.6))
        self._canvas: Any = FigureCanvasAgg(self.figure)
        self._curve_key: Any = None  # what the saved curve panel was drawn for (refresh)
        self._background: Any = None
        for control in (self.workers, self.cost, self.tree, self.streams, self.arrows,
                        self.critical):
            control.observe(self._changed, names="value")
        self.widget = widgets.VBox([
            widgets.HBox([self.workers, self.cost, self.tree], layout=ROW),
            widgets.HBox([self.streams, self.arrows, self.critical], layout=ROW), self.numbers,
            self.image])
        self.widget.add_class("hybridlab-schedule-explorer")
        self.refresh()

    def _changed(self, change: Any = None) -> None:
        m = self.model
        m.workers, m.cost, m.tree = self.workers.value, self.cost.value, self.tree.value == "tree"
        m.arrows, m.critical, m.streams = self.arrows.value, self.critical.value, self.streams.value
        self.refresh()

    def refresh(self) -> None:
        """Redraw in place: the same figure, a new PNG in the same Image widget. The
        speed-up curve depends only on the costs, the sums and the devices: while they
        stay, the curve panel is pasted from a saved background and only the Gantt chart
        and the workers band are rendered (text rendering is most of a redraw)."""
        model, figure = self.model, self.figure
        draw(model, figure)
        gantt_axes, curve_axes = figure.axes
        band = next(line for line in curve_axes.lines if line.get_gid() == BAND)
        key, canvas = (model.cost, model.tree, model.streams), self._canvas
        if key != self._curve_key:  # a new curve: render it once, without the Gantt chart
            gantt_axes.set_visible(False)
            band.set_visible(False)
            canvas.draw()
            self._background = canvas.copy_from_bbox(figure.bbox)
            gantt_axes.set_visible(True)
            band.set_visible(True)
            self._curve_key = key
        canvas.restore_region(self._background)
        figure.draw_artist(gantt_axes)
        curve_axes.draw_artist(band)
        self.png = canvas_png(canvas)
        self.image.value = self.png
        self.numbers.value = f"<code>{self.model.summary()}</code>"


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
