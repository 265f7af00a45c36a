"""How much does hybridize save? The speed-up plot and its instrument (lessons 00 and 02).

What this module teaches
------------------------
The measurements -- the network imperatively, hybridized, and the numpy floor, under
one protocol (NOTE [A fair floor] in ``hybridlab/lab/timing.py``) -- are made by
:mod:`hybridlab.lab.timing`. Here they are drawn: time per call against batch size, with
the speed-up and the distance to the floor written at every measured point, and the
instrument that measures a point when its sliders move. matplotlib and ipywidgets are
imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from hybridlab.lab.timing import (
    BATCHES,
    CUSTOM,
    DEPTH_RANGE,
    PROTOCOL,
    SEED,
    WIDTH_RANGE,
    SpeedupModel,
)
from hybridlab.viz.bundle import AUTO_BUTTONS, NATURAL_SIZE, Instrument, canvas_png
from hybridlab.viz.palette import OKABE_ITO

SERIES = (("imperative_us", "imperative", OKABE_ITO["vermillion"]),  # field, label, colour
          ("hybridized_us", "hybridized", OKABE_ITO["bluish_green"]),
          ("numpy_us", "numpy floor (kernels only)", OKABE_ITO["blue"]))


def draw_speedups(figure: Any, model: SpeedupModel, name: str, batch: int,
                  animated: bool = False) -> Any:
    """Time per call against batch size for one network, three ways (log-log), every
    measured point kept; the speed-up and the distance to the floor written at each point.
    ``animated``: the band marking ``batch`` is left out of a canvas draw (the widget
    pastes the rest and draws the band over it, translucent) and is the axes' last line."""
    from matplotlib import ticker

    figure.clear()
    axes = figure.add_subplot()
    series = model.series(name)
    batches = [b for b, _ in series]
    for field, label, colour in SERIES:
        axes.plot(batches, [getattr(t, field) for _, t in series], "o-", label=label,
                  color=colour)
    for b, t in series:  # the ratios, on the plot: speed-up, and how far above the floor
        axes.annotate(f"x{t.speedup:.1f}\n{t.hybridized_us / t.numpy_us:.2f}x floor",
                      (b, t.hybridized_us), textcoords="offset points", xytext=(0, -22),
                      ha="center", va="top", fontsize=9, color="#333333", zorder=5,
                      bbox={"boxstyle": "round,pad=0.15", "facecolor": "white",
                            "edgecolor": "none", "alpha": 0.85})  # readable over the band
    if animated:
        axes.axvline(batch, color=OKABE_ITO["orange"], alpha=0.3, linewidth=8, animated=True)
    else:
        axes.axvline(batch, color="#eeeeee", linewidth=6, zorder=0)
    values = [getattr(t, f) for _, t in series for f, _, _ in SERIES]
    low, high = nice_limits(values)
    axes.set(xscale="log", yscale="log", xlabel="batch size (examples)",
             ylabel="time per forward call (µs)", ylim=(low / 4, high * 1.2))  # room
    axes.set_title(f"{name}: {len(series)} batch size(s) measured\nat each point: the "
                   f"hybridize speed-up (x) and hybridized / floor", fontsize=9)
    axes.set_xticks(batches, [str(b) for b in batches])
    axes.set_xlim(min(batches) / 2.5, max(batches) * 2.5)  # room for the ratios
    axes.xaxis.set_minor_locator(ticker.NullLocator())
    axes.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    axes.yaxis.set_minor_locator(ticker.LogLocator(subs=(2.0, 5.0)))
    axes.yaxis.set_minor_formatter(ticker.NullFormatter())
    axes.legend(fontsize=9, loc="upper left")
    figure.supxlabel(PROTOCOL, fontsize=9, color="#555555", y=0.01, va="bottom")
    return figure


def speedup_widget(batch_size: int = 1, width: int = 64, depth: int = 4,
                   network_kind: str = SEED) -> Any:
    """The speed-up instrument: the network (the seeds' MLP, or ``depth`` x
    ``Dense(width)``) and the batch size, measured on each change (a line says so while
    it measures; points are kept, so moving back costs nothing), drawn as time per call
    against batch size with the speed-up and the distance to the floor at every point.

    Displayed, it is one bundle (:class:`~hybridlab.viz.bundle.Instrument`): the live
    widget, a PNG of the last plot and its summary line, so a notebook read without a
    running kernel still shows the plot and the numbers.
    """
    return _SpeedupView(batch_size, width, depth, network_kind)


class _SpeedupView(Instrument):
    """The speed-up controls and plot (see :func:`speedup_widget`)."""

    def __init__(self, batch_size: int, width: int, depth: int, network_kind: str) -> None:
        import ipywidgets as widgets

        self.model = SpeedupModel()
        self.network = widgets.ToggleButtons(options=[SEED, CUSTOM], value=network_kind,
                                             description="network", style=AUTO_BUTTONS)
        self.sliders = {
            "batch_size": widgets.SelectionSlider(options=list(BATCHES), value=batch_size,
                                                  description="batch",
                                                  continuous_update=False),
            "width": widgets.IntSlider(value=width, min=WIDTH_RANGE[0], max=WIDTH_RANGE[1],
                                       step=16, description="width", continuous_update=False),
            "depth": widgets.IntSlider(value=depth, min=DEPTH_RANGE[0], max=DEPTH_RANGE[1],
                                       description="depth", continuous_update=False),
        }
        self.status = widgets.HTML()  # the summary line, above the controls
        self.image = widgets.Image(format="png", layout=NATURAL_SIZE)
        self._drawn: dict[str, tuple[Any, Any, int]] = {}  # see _render
        self.text, self.png = "", b""
        self.network.observe(self.redraw, names="value")
        for slider in self.sliders.values():
            slider.observe(self.redraw, names="value")
        self.widget = widgets.VBox([self.status, self.network, *self.sliders.values(),
                                    self.image])
        self.widget.add_class("hybridlab-speedup")
        self.redraw()

    def redraw(self, change: Any = None) -> str:
        import html

        kind = self.network.value
        batch, width, depth = (s.value for s in self.sliders.values())
        for key in ("width", "depth"):  # the seeds' MLP has its own sizes: no sliders
            self.sliders[key].layout.display = "none" if kind == SEED else None
        name = SpeedupModel.name(kind, width, depth)
        if (name, batch) not in self.model.points:  # shown while the kernel measures
            self.status.value = (f"<i>measuring {html.escape(name)} at batch {batch} (a "
                                 f"large batch takes a few seconds) ...</i>")
        timing = self.model.measure(kind, batch, width, depth)
        self.text = f"{name}, batch {batch}: {timing}"
        self.png = self._render(name, batch)
        self.image.value = self.png
        self.status.value = f"<code>{html.escape(self.text)}</code>"
        return self.text

    def _render(self, name: str, batch: int) -> bytes:
        """The plot of ``name`` with ``batch`` marked. One figure per network, drawn again
        only when it has new points (fixed margins, not a layout engine: laying it out
        took two thirds of a draw); moving the batch pastes the saved background and
        draws the band (a redraw was 0.3-0.8 s, text rendering most of it)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        points = len(self.model.series(name))
        if name not in self._drawn or self._drawn[name][2] != points:
            figure = Figure(figsize=(7, 3.8))  # not through pyplot
            canvas = FigureCanvasAgg(figure)
            draw_speedups(figure, self.model, name, batch, animated=True)
            figure.subplots_adjust(left=0.11, right=0.98, top=0.86, bottom=0.21)
            canvas.draw()
            self._drawn[name] = (figure, canvas.copy_from_bbox(figure.bbox), points)
        figure, background, _ = self._drawn[name]
        axes, band = figure.axes[0], figure.axes[0].lines[-1]
        figure.canvas.restore_region(background)
        band.set_xdata([batch, batch])
        axes.draw_artist(band)
        return canvas_png(figure.canvas)

    def summary(self) -> str:
        return self.text


def nice_limits(values: list[float]) -> tuple[float, float]:
    """The 1-2-5 values just below and above the data, so both ends carry a tick label."""
    steps = [m * 10.0 ** e for e in range(-3, 10) for m in (1, 2, 5)]
    return max(s for s in steps if s <= min(values)), min(s for s in steps if s >= max(values))
