"""How much does hybridize save? Measured timings and their plots (lessons 00 and 02).

What this module teaches
------------------------
Hybridizing removes per-layer Python work; it cannot make numpy's matrix products
faster. So the gain is large when the network is deep and the batch small (overhead
dominates) and shrinks as arithmetic grows. We measure three things side by side: the
network run imperatively, hybridized, and the same arithmetic written directly in numpy
-- the floor: the kernels alone, with no framework around them.

NOTE [A fair floor]: the three are measured under one protocol, so that only the work
*around* the kernels differs. All three run with one BLAS thread (threadpoolctl) and the
framework on a one-worker engine: with two workers, the engine would run consecutive
independent calls at the same time (lesson 03's automatic parallelism) and could beat a
numpy loop on one core, which says nothing about overhead. Rounds of the three are
interleaved (in rotating order) and each result is the median round, so a burst of
load on a shared machine hits all three alike.

Invariants
----------
* Timings are microseconds per call; only the ratios mean something across machines.
* :func:`speedup_callback` is a plain function (what the sliders call); it is tested
  across the sliders' whole range. matplotlib, ipywidgets and threadpoolctl are imported
  inside functions only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hybridlab.viz.bundle import Instrument, figure_png

BATCH_RANGE = (1, 256)  # slider limits, also used by the tests
WIDTH_RANGE = (16, 512)
DEPTH_RANGE = (1, 8)
OUTPUTS = 10  # units of the last Dense layer
PROTOCOL = "all three on 1 engine worker and 1 BLAS thread; medians of interleaved rounds"
SERIES = (("imperative_us", "imperative", "#fc8d62"),  # Timing field, label, colour
          ("hybridized_us", "hybridized", "#66c2a5"),
          ("numpy_us", "numpy floor (kernels only)", "#8da0cb"))


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


def time_round(fn: Callable[[], Any], repeats: int) -> float:
    """Mean seconds per call of ``repeats`` calls issued back to back, synced once.

    Like a training loop, the engine is synced once at the end (``nd.waitall()``):
    waiting after every call would time the hand-over between threads, not the work.
    """
    from hybridlab import ndarray as nd

    fn()  # warm-up: after a switch to hybridized, the first call traces and compiles
    nd.waitall()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    nd.waitall()
    return (time.perf_counter() - start) / repeats


def make_mlp(width: int, depth: int, outputs: int = OUTPUTS) -> Any:
    """``depth`` ReLU Dense layers of ``width`` units and a Dense output layer."""
    from hybridlab.gluon import nn

    net = nn.HybridSequential()
    for _ in range(depth):
        net.add(nn.Dense(width, activation="relu"))
    net.add(nn.Dense(outputs))
    net.initialize()
    return net


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

    with engine.engine_scope(engine.ThreadedEngine(workers=1)), \
            threadpool_limits(1, user_api="blas"):
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
    from hybridlab import ndarray as nd
    from hybridlab import random

    random.seed(0)
    net = make_mlp(width, depth)
    x = nd.random.normal(shape=(batch_size, width))
    return measure_speedup(net, x, repeats)


def network_name(width: int, depth: int) -> str:
    return f"{depth} x Dense({width}) + Dense({OUTPUTS})"


def speedup_callback(batch_size: int, width: int, depth: int, repeats: int = 30
                     ) -> tuple[Any, str]:
    """What the sliders call: a bar chart of one setting and its text summary."""
    import matplotlib.pyplot as plt

    timing = speedup_point(batch_size, width, depth, repeats)
    figure, axes = plt.subplots(figsize=(7, 2.6), layout="constrained")
    bars = axes.barh([label for _, label, _ in SERIES],
                     [getattr(timing, f) for f, _, _ in SERIES],
                     color=[colour for _, _, colour in SERIES])
    axes.bar_label(bars, fmt="%.0f µs", padding=3, fontsize=8)
    axes.invert_yaxis()  # imperative on top, as in the summary line
    axes.margins(x=0.15)  # room for the value labels
    axes.set_xlabel("time per forward call (µs)")
    figure.supxlabel(PROTOCOL, fontsize=8, color="#555555")
    axes.set_title(f"{network_name(width, depth)}, batch {batch_size}: "
                   f"hybridize speed-up x{timing.speedup:.1f}", fontsize=10)
    return figure, f"batch={batch_size} width={width} depth={depth}: {timing}"


def speedup_widget(batch_size: int = 1, width: int = 64, depth: int = 4) -> Any:
    """Sliders for batch size, width and depth, redrawing :func:`speedup_callback`.

    Displayed, it is one bundle (:class:`~hybridlab.viz.bundle.Instrument`): the live
    widget, a PNG of the last plot and its summary line, so a notebook read without a
    running kernel still shows the plot and the numbers.
    """
    return _SpeedupView(batch_size, width, depth)


class _SpeedupView(Instrument):
    """The speed-up sliders and plot (see :func:`speedup_widget`)."""

    def __init__(self, batch_size: int, width: int, depth: int) -> None:
        import ipywidgets as widgets

        self.sliders = {
            "batch_size": widgets.SelectionSlider(options=[1, 4, 16, 64, 256], value=batch_size,
                                                  description="batch"),
            "width": widgets.IntSlider(value=width, min=WIDTH_RANGE[0], max=WIDTH_RANGE[1],
                                       step=16, description="width"),
            "depth": widgets.IntSlider(value=depth, min=DEPTH_RANGE[0], max=DEPTH_RANGE[1],
                                       description="depth"),
        }
        self.output = widgets.Output()
        self.text, self.png = "", b""
        for slider in self.sliders.values():
            slider.observe(self.redraw, names="value")
        self.widget = widgets.VBox([*self.sliders.values(), self.output])
        self.redraw()

    def redraw(self, change: Any = None) -> str:
        import matplotlib.pyplot as plt
        from IPython.display import display

        figure, self.text = speedup_callback(**{k: s.value for k, s in self.sliders.items()})
        self.png = figure_png(figure)
        self.output.clear_output(wait=True)
        with self.output:
            print(self.text)
            display(figure)
        plt.close(figure)
        return self.text

    def summary(self) -> str:
        return self.text

    def snapshot_png(self) -> bytes | None:
        return self.png


def speedup_figure(batch_sizes: tuple[int, ...] = (1, 16, 64, 256), width: int = 128,
                   depth: int = 3, repeats: int = 20) -> Any:
    """A static figure: time per call against batch size, three ways (log-log)."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    timings = [speedup_point(b, width, depth, repeats) for b in batch_sizes]
    figure, axes = plt.subplots(figsize=(7, 3.6), layout="constrained")
    for field, label, colour in SERIES:
        axes.plot(batch_sizes, [getattr(t, field) for t in timings], "o-", label=label,
                  color=colour)
    axes.set(xscale="log", yscale="log", xlabel="batch size (examples)",
             ylabel="time per forward call (µs)", title=f"MLP, {network_name(width, depth)}",
             ylim=nice_limits([getattr(t, f) for t in timings for f, _, _ in SERIES]))
    axes.set_xticks(batch_sizes, [str(b) for b in batch_sizes])  # the measured sizes, plainly
    axes.xaxis.set_minor_locator(ticker.NullLocator())
    axes.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    axes.yaxis.set_minor_formatter(ticker.NullFormatter())
    axes.legend(fontsize=9)
    figure.supxlabel(PROTOCOL, fontsize=8, color="#555555")
    for b, t in zip(batch_sizes, timings):
        print(f"batch {b:4d}: {t}")
    return figure


def nice_limits(values: list[float]) -> tuple[float, float]:
    """The 1-2-5 values just below and above the data, so both ends carry a tick label."""
    steps = [m * 10.0 ** e for e in range(-3, 10) for m in (1, 2, 5)]
    return max(s for s in steps if s <= min(values)), min(s for s in steps if s >= max(values))
