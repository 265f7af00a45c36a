"""How much does hybridize save? Measured timings and their plots (lessons 00 and 02).

What this module teaches
------------------------
Hybridizing removes per-layer Python work; it cannot make numpy's matrix products
faster. So the gain is large when the network is deep and the batch small (overhead
dominates) and shrinks as arithmetic grows. We measure three things side by side: the
network run imperatively, hybridized, and the same arithmetic written directly in numpy
-- the floor: the kernels alone, with no framework around them.

NOTE [A fair floor]: the three are measured under one protocol, so that only the work
*around* the kernels differs (lesson 00, "How the course measures", explains it to
students). All three run with one BLAS thread (threadpoolctl) and the framework on the
naive engine, which runs every operation at once on the calling thread, as the numpy floor
does: with a worker thread, the engine would run the next call's Python while the worker
computes the last one (lesson 03's front end and back end), and could beat a numpy loop on
one thread, which says nothing about overhead. Rounds of the three are interleaved (in
rotating order) and each result is the median round, so a burst of load on a shared
machine hits all three alike. When the kernels dominate, hybridized and floor run the same
kernels, so their ratio is 1 within the noise of the machine (a little below 1 is noise).

Invariants
----------
* Timings are microseconds per call; only the ratios mean something across machines.
* :class:`SpeedupModel` (the widget's measurements, cached per setting) and
  :func:`draw_speedups` are plain Python, tested across the sliders' whole range.
  matplotlib, ipywidgets and threadpoolctl are imported inside functions only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hybridlab.viz.bundle import Instrument, figure_png
from hybridlab.viz.palette import OKABE_ITO

BATCH_RANGE = (1, 1024)  # slider limits, also used by the tests
BATCHES = (1, 4, 16, 64, 256, 1024)  # the batch slider's stops
SEED = "seed MLP 512-256-128-2"  # the seeds' network: Dense(256), Dense(128), Dense(2)
CUSTOM = "depth x Dense(width)"
WIDTH_RANGE = (16, 512)
DEPTH_RANGE = (1, 8)
OUTPUTS = 10  # units of the last Dense layer
PROTOCOL = "all three on the naive engine and 1 BLAS thread; medians of interleaved rounds"
SERIES = (("imperative_us", "imperative", OKABE_ITO["vermillion"]),  # field, label, colour
          ("hybridized_us", "hybridized", OKABE_ITO["bluish_green"]),
          ("numpy_us", "numpy floor (kernels only)", OKABE_ITO["blue"]))


@dataclass(frozen=True)
class Timing:
    """Microseconds per call of one network, three ways."""

    imperative_us: float
    hybridized_us: float
    numpy_us: float

    @property
    def speedup(self) -> float:
        return self.imperative_us / self.hybridized_us

    def __str__(self) -> str:
        return (f"imperative {self.imperative_us:8.1f} µs/call | hybridized "
                f"{self.hybridized_us:8.1f} µs/call | numpy floor {self.numpy_us:8.1f} µs/call"
                f" | speed-up x{self.speedup:.1f}")


def time_round(fn: Callable[[], Any], repeats: int, chunks: int = 3) -> float:
    """Seconds per call of ``repeats`` calls issued back to back: the fastest of ``chunks``
    runs of ``repeats // chunks`` calls, each synced once at its end.

    Like a training loop, the engine is synced once per run (``nd.waitall()``): waiting
    after every call would time the hand-over between threads, not the work. The fastest
    run counts, because a run during which the operating system gave the core to another
    program (a shared machine) measures that program, not this one.
    """
    from hybridlab import ndarray as nd

    fn()  # warm-up: after a switch to hybridized, the first call traces and compiles
    nd.waitall()
    calls, best = max(1, repeats // chunks), float("inf")
    for _ in range(chunks):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        nd.waitall()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def make_mlp(width: int, depth: int, outputs: int = OUTPUTS) -> Any:
    """``depth`` ReLU Dense layers of ``width`` units and a Dense output layer."""
    return make_net((width,) * depth + (outputs,))


def make_net(units: tuple[int, ...]) -> Any:
    """ReLU Dense layers of ``units[:-1]`` units, then a Dense layer of ``units[-1]``."""
    from hybridlab.gluon import nn

    net = nn.HybridSequential()
    for size in units[:-1]:
        net.add(nn.Dense(size, activation="relu"))  # type: ignore[misc]
    net.add(nn.Dense(units[-1]))  # type: ignore[misc]
    net.initialize()
    return net


def network(name: str, width: int = 64, depth: int = 4) -> tuple[int, tuple[int, ...]]:
    """``(input features, units per layer)`` of the widget's two networks."""
    if name == SEED:
        return 512, (256, 128, 2)
    if name == CUSTOM:
        return width, (width,) * depth + (OUTPUTS,)
    raise ValueError(f"network {name!r}: choose {SEED!r} or {CUSTOM!r}")


def numpy_mlp(net: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The same network as plain numpy, as fast as numpy writes it: the floor. Products
    by ``np.dot``'s C function (NOTE [np.dot, not @] in ops/linalg.py; hybridlab's kernels
    call it too) into buffers made once per batch size, bias and relu added in place.
    The weights keep hybridlab's layout, ``(out, in)`` read transposed, and start at a
    64-byte boundary as the network's own do (NOTE [Aligned weights] in parameter.py).
    (The floor returns its own buffer, reused by the next call: fine for timing.)"""
    from hybridlab.gluon.parameter import aligned
    from hybridlab.ops.linalg import dot_c as dot

    layers = [(aligned(layer.weight.data().asnumpy()).T, aligned(layer.bias.data().asnumpy()))
              for layer in net]
    buffers: dict[int, list[np.ndarray]] = {}

    def forward(x: np.ndarray) -> np.ndarray:
        outs = buffers.get(len(x))
        if outs is None:
            outs = buffers[len(x)] = [np.empty((len(x), w.shape[1]), w.dtype) for w, _ in layers]
        for index, ((weight_t, bias), out) in enumerate(zip(layers, outs)):
            dot(x, weight_t, out=out)
            np.add(out, bias, out=out)
            if index < len(layers) - 1:  # relu after every layer but the last
                np.maximum(out, 0, out=out)
            x = out
        return x

    return forward


def measure_speedup(net: Any, x: Any, repeats: int = 50, rounds: int = 5) -> Timing:
    """Time ``net(x)`` imperatively and hybridized, and the numpy floor (for an MLP of
    Dense layers), under the protocol of NOTE [A fair floor]. Leaves ``net`` hybridized."""
    from threadpoolctl import threadpool_limits

    from hybridlab import engine

    with engine.engine_scope(engine.NaiveEngine()), threadpool_limits(1, user_api="blas"):
        net.hybridize(active=False)
        net(x).wait_to_read()  # finishes deferred initialisation before numpy_mlp reads
        forward, array = numpy_mlp(net), x.asnumpy()
        variants = [(lambda: net.hybridize(active=False), lambda: net(x)),
                    (lambda: net.hybridize(), lambda: net(x)),
                    (lambda: None, lambda: forward(array))]
        samples: list[list[float]] = [[], [], []]
        for round_index in range(rounds):
            for offset in range(3):  # rotating order: no variant always goes first
                which = (round_index + offset) % 3
                switch, call = variants[which]
                switch()
                samples[which].append(time_round(call, repeats))
        net.hybridize()
    return Timing(*(statistics.median(s) * 1e6 for s in samples))


def speedup_point(batch_size: int, width: int, depth: int, repeats: int = 30) -> Timing:
    """Timings for a freshly made MLP with inputs of ``width`` features (seeded)."""
    return network_point(batch_size, width, (width,) * depth + (OUTPUTS,), repeats)


def network_point(batch_size: int, features: int, units: tuple[int, ...],
                  repeats: int = 30) -> Timing:
    """Timings for a freshly made network of ``units`` on ``features`` inputs (seeded)."""
    from hybridlab import ndarray as nd
    from hybridlab import random

    random.seed(0)
    net = make_net(units)
    x = nd.random.normal(shape=(batch_size, features))
    return measure_speedup(net, x, repeats)


def network_name(width: int, depth: int) -> str:
    return f"{depth} x Dense({width}) + Dense({OUTPUTS})"


class SpeedupModel:
    """The widget's measurements: one :class:`Timing` per (network, batch), measured once
    and kept, so that points accumulate and a setting seen before costs nothing.

    Large settings take long to time, so the number of calls per round shrinks with the
    arithmetic of one call (at least 2, at most ``repeats``): about a second per point.
    """

    def __init__(self, repeats: int = 30) -> None:
        self.repeats = repeats
        self.points: dict[tuple[str, int], Timing] = {}

    @staticmethod
    def name(network_kind: str, width: int, depth: int) -> str:
        return SEED if network_kind == SEED else network_name(width, depth)

    def calls_per_round(self, batch: int, features: int, units: tuple[int, ...]) -> int:
        sizes = (features, *units)
        flops = 2 * batch * sum(a * b for a, b in zip(sizes, sizes[1:]))
        seconds = flops / 2e10 + 60e-6  # one BLAS thread's speed, plus the call around it
        return max(2, min(self.repeats, int(1.0 / (15 * seconds))))

    def measure(self, network_kind: str, batch: int, width: int = 64, depth: int = 4
                ) -> Timing:
        key = (self.name(network_kind, width, depth), batch)
        if key not in self.points:
            features, units = network(network_kind, width, depth)
            self.points[key] = network_point(batch, features, units,
                                             self.calls_per_round(batch, features, units))
        return self.points[key]

    def series(self, name: str) -> list[tuple[int, Timing]]:
        """The measured points of one network, by batch size."""
        return sorted((batch, t) for (net, batch), t in self.points.items() if net == name)


def draw_speedups(figure: Any, model: SpeedupModel, name: str, batch: int) -> Any:
    """Time per call against batch size for one network, three ways (log-log), every
    measured point kept; the speed-up and the distance to the floor written at each point."""
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
                      ha="center", va="top", fontsize=7, color="#333333")
    axes.axvline(batch, color="#dddddd", linewidth=6, zorder=0)
    values = [getattr(t, f) for _, t in series for f, _, _ in SERIES]
    low, high = nice_limits(values)
    axes.set(xscale="log", yscale="log", xlabel="batch size (examples)",
             ylabel="time per forward call (µs)", ylim=(low / 2, high * 1.2))  # room
    axes.set_title(f"{name}: {len(series)} batch size(s) measured\nat each point: the "
                   f"hybridize speed-up (x) and hybridized / floor", fontsize=9)
    axes.set_xticks(batches, [str(b) for b in batches])
    axes.set_xlim(min(batches) / 1.6, max(batches) * 1.6)
    axes.xaxis.set_minor_locator(ticker.NullLocator())
    axes.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    axes.legend(fontsize=8, loc="upper left")
    figure.supxlabel(PROTOCOL, fontsize=8, color="#555555")
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
        from matplotlib.figure import Figure

        self.model = SpeedupModel()
        self.network = widgets.ToggleButtons(options=[SEED, CUSTOM], value=network_kind,
                                             description="network")
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
        self.image = widgets.Image(format="png")
        self.figure = Figure(figsize=(7, 3.6), layout="constrained")  # not through pyplot
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
        for key in ("width", "depth"):  # the seeds' MLP has its own sizes
            self.sliders[key].disabled = kind == SEED
        name = SpeedupModel.name(kind, width, depth)
        if (name, batch) not in self.model.points:  # shown while the kernel measures
            self.status.value = (f"<i>measuring {html.escape(name)} at batch {batch} (a "
                                 f"large batch takes a few seconds) ...</i>")
        timing = self.model.measure(kind, batch, width, depth)
        self.text = f"{name}, batch {batch}: {timing}"
        self.png = figure_png(draw_speedups(self.figure, self.model, name, batch))
        self.image.value = self.png
        self.status.value = f"<code>{html.escape(self.text)}</code>"
        return self.text

    def summary(self) -> str:
        return self.text

    def snapshot_png(self) -> bytes | None:
        return self.png


def nice_limits(values: list[float]) -> tuple[float, float]:
    """The 1-2-5 values just below and above the data, so both ends carry a tick label."""
    steps = [m * 10.0 ** e for e in range(-3, 10) for m in (1, 2, 5)]
    return max(s for s in steps if s <= min(values)), min(s for s in steps if s >= max(values))
