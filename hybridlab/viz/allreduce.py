"""The all-reduce explorer: a parameter server, a ring and a tree, on 2 to 16 devices.

What this module teaches
------------------------
The same sum of gradients, three ways to move the bytes (hybridlab/lab/allreduce.py has
the model and the closed forms). The explorer draws the transfers of the chosen way as a
Gantt chart -- one row per network port, each bar a message of ``alpha + beta * bytes``
seconds -- and, beside it, each way's time against the number of devices, with the
chosen point marked. Move the devices slider to watch the server's line climb while the
ring's flattens; move the gradient size to watch the tree win small messages (latency)
and the ring win large ones (bandwidth).

The model is :class:`~hybridlab.lab.allreduce.AllReduceModel`; this is its view, drawn
with the one Gantt renderer (:func:`~hybridlab.viz.gantt.draw_tasks`).
"""

from __future__ import annotations

from typing import Any

from hybridlab.lab.allreduce import KINDS, AllReduceModel
from hybridlab.viz.bundle import AUTO_BUTTONS, NATURAL_SIZE, ROW, Instrument
from hybridlab.viz.gantt import draw_tasks, label_tasks, two_axes
from hybridlab.viz.palette import OKABE_ITO, lighten

# one colour per way (the curves) and per phase of a way (the bars)
KIND_COLOURS = {"server": OKABE_ITO["vermillion"], "ring": OKABE_ITO["blue"],
                "tree": OKABE_ITO["bluish_green"]}
PHASE_COLOURS = {"push": lighten(OKABE_ITO["vermillion"], 0.45),
                 "pull": lighten(OKABE_ITO["orange"], 0.45),
                 "rs": lighten(OKABE_ITO["blue"], 0.5), "ag": lighten(OKABE_ITO["sky_blue"], 0.4),
                 "reduce": lighten(OKABE_ITO["bluish_green"], 0.5),
                 "bcast": lighten(OKABE_ITO["yellow"], 0.3)}
PHASE_NAMES = {"push": "push to the server", "pull": "pull from the server",
               "rs": "reduce-scatter", "ag": "all-gather", "reduce": "reduce",
               "bcast": "broadcast"}


def draw(model: AllReduceModel, figure: Any = None) -> Any:
    """The Gantt chart of the chosen all-reduce, and every way's time against ``n``."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if figure is None:
        figure = plt.figure(figsize=(9, 3.6))
    gantt_axes, curve_axes = _axes(figure)
    records, ports = model.schedule(), model.ports()
    phases = [r.name.split()[0] for r in records]
    bars = draw_tasks(gantt_axes, records, [ports.index(p) for p in model.graph().devices or []],
                      [PHASE_COLOURS[p] for p in phases], scale=1e3)
    makespan = model.time * 1e3
    gantt_axes.set(xlim=(0, max(makespan, 1e-9) * 1.02), ylim=(len(ports) - 0.5, -0.5),
                   xlabel="time (ms)", yticks=range(len(ports)), yticklabels=ports)
    if len(records) <= 40:
        label_tasks(gantt_axes, bars, fontsize=8)
    gantt_axes.set_title(f"{model.kind}: {makespan:.3g} ms for {model.size:.3g} bytes on "
                         f"{model.n} devices", fontsize=9)
    handles = [Patch(facecolor=PHASE_COLOURS[p], edgecolor="#555555", label=PHASE_NAMES[p])
               for p in dict.fromkeys(phases)]
    gantt_axes.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                      ncols=len(handles), fontsize=9, frameon=False)
    for kind, points in model.times_by_devices().items():
        ns, times = zip(*points)
        curve_axes.plot(ns, [t * 1e3 for t in times], "o-", markersize=2.5,
                        color=KIND_COLOURS[kind], label=kind)
    curve_axes.plot([model.n], [makespan], "o", markersize=9, markerfacecolor="none",
                    color=KIND_COLOURS[model.kind])
    curve_axes.set(xlabel="devices n", ylabel="all-reduce time (ms)")
    curve_axes.legend(fontsize=9, loc="upper left")
    return figure


def _axes(figure: Any) -> tuple[Any, Any]:
    return two_axes(figure, [3, 2], left=0.1, right=0.98, bottom=0.27, top=0.9, wspace=0.3)


class AllReduceExplorer(Instrument):
    """The widget: the way, the devices slider, the gradient's size, alpha and beta."""

    def __init__(self, model: AllReduceModel) -> None:
        import ipywidgets as widgets
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.model = model
        self.kind = widgets.ToggleButtons(options=list(KINDS), value=model.kind,
                                          description="way", style=AUTO_BUTTONS)
        self.devices = widgets.IntSlider(value=model.n, min=2, max=16, description="devices",
                                         continuous_update=False)
        self.size = widgets.FloatLogSlider(value=model.size, base=10, min=2, max=9,
                                           description="bytes", continuous_update=False)
        self.alpha = widgets.FloatLogSlider(value=model.alpha, base=10, min=-7, max=-2,
                                            description="alpha (s)", continuous_update=False)
        self.beta = widgets.FloatLogSlider(value=model.beta, base=10, min=-11, max=-7,
                                           description="beta (s/B)", continuous_update=False)
        self.numbers = widgets.HTML()
        self.image = widgets.Image(format="png", layout=NATURAL_SIZE)
        self.figure = Figure(figsize=(9, 3.6))
        self._canvas: Any = FigureCanvasAgg(self.figure)
        for control in (self.kind, self.devices, self.size, self.alpha, self.beta):
            control.observe(self._changed, names="value")
        self.widget = widgets.VBox([widgets.HBox([self.kind, self.devices], layout=ROW),
                                    widgets.HBox([self.size, self.alpha, self.beta], layout=ROW),
                                    self.numbers, self.image])
        self.widget.add_class("hybridlab-allreduce-explorer")
        self.refresh()

    def _changed(self, change: Any = None) -> None:
        m = self.model
        m.kind, m.n, m.size = self.kind.value, self.devices.value, self.size.value
        m.alpha, m.beta = self.alpha.value, self.beta.value
        self.refresh()

    def refresh(self) -> None:
        draw(self.model, self.figure)
        self.show_canvas()


def allreduce_explorer(kind: str = "ring", n: int = 4, size: float = 4e6,
                       alpha: float = 50e-6, beta: float = 1e-9) -> AllReduceExplorer:
    """The explorer over :class:`~hybridlab.lab.allreduce.AllReduceModel`'s settings."""
    model = AllReduceModel(kind, n, size, alpha, beta)
    model.graph()  # a bad setting raises here, with the model's message
    return AllReduceExplorer(model)
